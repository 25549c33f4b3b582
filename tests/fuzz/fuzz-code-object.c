/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the code object loader (daemon/gpu/gpu-code-object.c and
 * its metadata decoder), which takes a client's ELF bytes. One simulated
 * gfx1030 context is brought up for the whole run. Besides "no crash, no
 * leak, no UB" (ASan/UBSan), it checks the loader's promises: only the
 * documented errnos, a message for every refusal, and for an accepted object
 * kernels whose names are printable, whose arguments are in offset order
 * inside the kernarg segment, whose descriptor and 256-byte aligned entry
 * point lie in the code buffer; and that the context holds no buffer once the
 * object is released.
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files given on its command line
 * (seeded with real code objects of tests/kernels/).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu-internal.h"
#include "gpu/gpu.h"
#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-code-object: broken promise: %s\n", what);
                abort();
        }
}

static SimDevice *dev;
static GpuContext *ctx;

static void teardown(void) {
        ctx = gpu_context_free(ctx);
        dev = sim_device_free(dev);
}

static void bring_up(void) {
        if (ctx)
                return;
        check(sim_device_new(NULL, &dev) == 0, "sim_device_new");
        check(gpu_context_new(sim_device_get_ops(dev), NULL, &ctx) == 0, "gpu_context_new");
        atexit(teardown);
}

static void check_object(const GpuCodeObject *co) {
        uint64_t va = gpu_buffer_get_va(co->code), end = va + gpu_buffer_get_size(co->code);

        check(co->n_kernels >= 1 && co->n_kernels <= GPU_CODE_OBJECT_MAX_KERNELS, "kernel count");
        for (unsigned i = 0; i < co->n_kernels; i++) {
                const GpuKernel *k = gpu_code_object_kernel(co, i);
                const GpuKernelCode *kc = &co->kernel_code[i];
                size_t n = strnlen(k->name, sizeof k->name);

                check(n > 0 && n < sizeof k->name, "kernel name length");
                for (size_t j = 0; j < n; j++)
                        check(k->name[j] > 0x20 && k->name[j] < 0x7f, "kernel name bytes");
                check(gpu_code_object_find(co, k->name) == (int) i, "find by name");
                check(k->n_args <= GPU_KERNEL_MAX_ARGS, "argument count");
                uint64_t prev_end = 0;
                for (unsigned j = 0; j < k->n_args; j++) {
                        const GpuKernelArg *a = &k->args[j];
                        check(a->size > 0 && a->offset >= prev_end, "argument order");
                        prev_end = (uint64_t) a->offset + a->size;
                        check(prev_end <= k->kernarg_size, "argument inside the kernarg segment");
                        check(strnlen(a->value_kind, sizeof a->value_kind) < sizeof a->value_kind,
                              "value_kind terminated");
                        check(a->kind >= GPU_ARG_BY_VALUE && a->kind <= GPU_ARG_HIDDEN, "argument kind");
                }
                check(kc->kd_va >= va && kc->kd_va + 64 <= end, "descriptor in the buffer");
                check(kc->entry_va >= va && kc->entry_va < end && kc->entry_va % 256 == 0, "entry point");
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        GpuCodeObject *co = NULL;
        GpuContextStats st;
        char err[512];

        bring_up();
        err[0] = '\0';
        int r = gpu_code_object_load(ctx, data, size, &co, err, sizeof err);
        if (r == 0) {
                check(co != NULL, "success without an object");
                check_object(co);
                gpu_code_object_unref(co);
        } else {
                check(co == NULL, "failure with an object");
                check(r == -ENOEXEC || r == -EINVAL || r == -EXDEV || r == -E2BIG || r == -ENOMEM,
                      "undocumented errno");
                check(err[0] != '\0' && memchr(err, 0, sizeof err), "refusal without a message");
        }
        gpu_context_get_stats(ctx, &st);
        check(st.buffers == 0 && st.buffer_bytes == 0, "a buffer stayed behind");
        return 0;
}
