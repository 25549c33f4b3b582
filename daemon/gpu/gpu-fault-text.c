/* SPDX-License-Identifier: MIT */
/*
 * What a client is told about an address of its GPU context: a fault's
 * address and the addresses in what the device said about a job (the
 * simulator names the faulting access and the pc) are given relative to the
 * client's own objects — "offset 0x40 of buffer 0x…" (the handle the client
 * knows it by, GpuBuffer.tag), "offset 0x100 of code object 0x…" — or as an
 * offset of the context's client address window when nothing of the client's
 * is there, never as an address of the process that runs the context. An
 * address outside the window is the client's own number (a kernel's wild
 * pointer) and is repeated as it is. Used by the GPU layer when it reports a
 * job (gpu-queue.c); works on the context's own lists, on the loop thread.
 */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu-internal.h"
#include "util/macro.h"

void gpu_buffer_set_tag(GpuBuffer *b, uint64_t tag) {
        if (b)
                b->tag = tag;
}

uint64_t gpu_buffer_get_tag(const GpuBuffer *b) {
        return b->tag || !b->origin ? b->tag : b->origin->tag;
}

void gpu_code_object_set_tag(GpuCodeObject *co, uint64_t tag) {
        if (co)
                co->tag = tag;
}

uint64_t gpu_code_object_get_tag(const GpuCodeObject *co) {
        return co->tag || !co->origin ? co->tag : co->origin->tag;
}

static bool in_buffer(const GpuBuffer *b, uint64_t va) {
        return b && va >= b->va && va - b->va < b->size;
}

void gpu_context_describe_va(const GpuContext *c, uint64_t va, char *buf, size_t size) {
        for (const GpuCodeObject *co = c->code_objects; co; co = co->next)
                if (in_buffer(co->code, va)) {
                        snprintf(buf, size, "offset 0x%" PRIx64 " of code object 0x%" PRIx64, va - co->code->va,
                                 gpu_code_object_get_tag(co));
                        return;
                }
        for (const GpuBuffer *b = c->buffers; b; b = b->next) {
                if (!in_buffer(b, va))
                        continue;
                if (gpu_buffer_get_tag(b) != 0)
                        snprintf(buf, size, "offset 0x%" PRIx64 " of buffer 0x%" PRIx64, va - b->va,
                                 gpu_buffer_get_tag(b));
                else
                        /* Rings, fences, kernel arguments, scratch: the daemon's. */
                        snprintf(buf, size, "offset 0x%" PRIx64 " of the GPU context's own memory", va - b->va);
                return;
        }
        if (gpu_va_window_contains(&c->va, va))
                snprintf(buf, size, "window offset 0x%" PRIx64 ", outside any buffer of yours", va - c->va.base);
        else
                snprintf(buf, size, "address 0x%" PRIx64 ", outside any buffer of yours", va);
}

void gpu_context_rewrite_addresses(const GpuContext *c, const char *in, char *out, size_t size) {
        size_t n = 0;

        if (size == 0)
                return;
        while (*in && n + 1 < size) {
                bool word_start = n == 0 || !isalnum((unsigned char) out[n - 1]);

                if (word_start && in[0] == '0' && (in[1] == 'x' || in[1] == 'X') &&
                    isxdigit((unsigned char) in[2])) {
                        char *end;
                        unsigned long long v = strtoull(in + 2, &end, 16);

                        /* Only what could be an address of this process: in the
                         * client address window. Small numbers (encodings, LDS
                         * offsets) and a kernel's own wild pointers stay. */
                        if (!isalnum((unsigned char) *end) && v >= GPU_VA_REGION_BASE && v < GPU_VA_REGION_END) {
                                char d[GPU_WHERE_TEXT_MAX];

                                gpu_context_describe_va(c, v, d, sizeof d);
                                n += (size_t) snprintf(out + n, size - n, "%s", d);
                                n = MIN(n, size - 1);
                                in = end;
                                continue;
                        }
                }
                out[n++] = *in++;
        }
        out[n] = '\0';
}
