/* SPDX-License-Identifier: MIT */
/*
 * See isa-helper.h. The ELF reader checks every offset it follows against the
 * file size; the dispatch emulation follows kfd-facts §2.3-2.4 and LLVM
 * AMDGPUUsage "Initial Kernel Execution State" for gfx10.
 */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code-image.h"
#include "isa-helper.h"

static int translate(void *userdata, uint64_t va, uint64_t len, bool write, void **ret_host) {
        IsaMem *m = userdata;
        for (unsigned i = 0; i < m->n; i++) {
                IsaRegion *r = &m->regions[i];
                if (va >= r->va && len <= r->size && va - r->va <= r->size - len) {
                        *ret_host = r->host + (va - r->va);
                        return 0;
                }
        }
        return -EFAULT;
}

void isa_mem_init(IsaMem *m) {
        memset(m, 0, sizeof(*m));
        m->next_va = 0x100000000ull;
        m->mem.userdata = m;
        m->mem.translate = translate;
}

void isa_mem_fini(IsaMem *m) {
        for (unsigned i = 0; i < m->n; i++)
                free(m->regions[i].host);
        m->n = 0;
}

void isa_mem_release(IsaMem *m, unsigned n) {
        while (m->n > n)
                free(m->regions[--m->n].host);
}

void *isa_mem_map(IsaMem *m, uint64_t va, uint64_t size) {
        if (m->n >= ISA_MEM_MAX_REGIONS)
                abort();
        void *p = calloc(1, size ? size : 1);
        if (!p)
                abort();
        m->regions[m->n++] = (IsaRegion) { .va = va, .size = size, .host = p };
        return p;
}

uint64_t isa_mem_alloc(IsaMem *m, uint64_t size, void **ret_host) {
        uint64_t va = m->next_va;
        void *p = isa_mem_map(m, va, size);
        m->next_va = (va + size + 0x20000) & ~0xffffull;
        if (ret_host)
                *ret_host = p;
        return va;
}

int isa_kernel_load(IsaMem *m, const char *path, const char *name, IsaKernel *ret) {
        CodeImage img;
        uint8_t *image;
        int r = code_image_read(path, name, &img);

        if (r < 0)
                return r;
        uint64_t image_va = isa_mem_alloc(m, (img.size + 0xfff) & ~0xfffull, (void **) &image);
        memcpy(image, img.bytes, img.size);
        uint64_t kd_off = img.kd_off;
        code_image_free(&img);
        /* AMDHSA kernel descriptor, kfd-facts §2.4. */
        const uint8_t *kd = image + kd_off;
        int64_t entry_off;
        memset(ret, 0, sizeof(*ret));
        memcpy(&ret->group_segment_size, kd + 0, 4);
        memcpy(&ret->private_segment_size, kd + 4, 4);
        memcpy(&ret->kernarg_size, kd + 8, 4);
        memcpy(&entry_off, kd + 16, 8);
        memcpy(&ret->rsrc3, kd + 44, 4);
        memcpy(&ret->rsrc1, kd + 48, 4);
        memcpy(&ret->rsrc2, kd + 52, 4);
        memcpy(&ret->code_properties, kd + 56, 2);
        ret->kd_va = image_va + kd_off;
        ret->entry_va = ret->kd_va + (uint64_t) entry_off;
        return 0;
}

static void args_put(IsaArgs *a, const void *v, size_t n) {
        a->size = (a->size + n - 1) & ~(n - 1);
        if (a->size + n > sizeof(a->bytes))
                abort();
        memcpy(a->bytes + a->size, v, n);
        a->size += n;
}
void isa_args_u64(IsaArgs *a, uint64_t v) {
        args_put(a, &v, 8);
}
void isa_args_u32(IsaArgs *a, uint32_t v) {
        args_put(a, &v, 4);
}
void isa_args_f32(IsaArgs *a, float v) {
        args_put(a, &v, 4);
}

int isa_launch(IsaMem *m, const IsaKernel *k, const uint32_t grid[3], const uint32_t wg[3], const IsaArgs *args,
               uint64_t budget, SimIsaResult *ret) {
        return isa_launch_partial(m, k, grid, wg, NULL, args, budget, ret);
}

int isa_launch_partial(IsaMem *m, const IsaKernel *k, const uint32_t grid[3], const uint32_t wg[3],
                       const uint32_t partial[3], const IsaArgs *args, uint64_t budget, SimIsaResult *ret) {
        SimIsaDispatch d = { 0 };
        uint8_t *kernarg, *pkt;
        uint32_t wg_threads = wg[0] * wg[1] * wg[2];
        uint64_t kernarg_size = k->kernarg_size > args->size ? k->kernarg_size : args->size;

        /* Kernel arguments (hidden ones, e.g. the global offsets, stay 0), then
         * the hsa_kernel_dispatch_packet_t the dispatch pointer points at. */
        uint64_t kernarg_va = isa_mem_alloc(m, kernarg_size + 256, (void **) &kernarg);
        memcpy(kernarg, args->bytes, args->size);
        uint64_t pkt_va = isa_mem_alloc(m, 64, (void **) &pkt);
        uint16_t setup = wg[2] > 1 || grid[2] > 1 ? 3 : wg[1] > 1 || grid[1] > 1 ? 2 : 1, wgs[3];
        uint32_t gsize[3];
        for (unsigned i = 0; i < 3; i++) {
                wgs[i] = (uint16_t) wg[i];
                gsize[i] = grid[i] * wg[i];
                if (partial && partial[i] && grid[i] > 0)
                        gsize[i] = (grid[i] - 1) * wg[i] + partial[i];
        }
        memcpy(pkt + 2, &setup, 2);
        memcpy(pkt + 4, wgs, 6);
        memcpy(pkt + 12, gsize, 12);
        memcpy(pkt + 24, &k->private_segment_size, 4);
        memcpy(pkt + 28, &k->group_segment_size, 4);
        memcpy(pkt + 32, &k->kd_va, 8);
        memcpy(pkt + 40, &kernarg_va, 8);

        /* Scratch: one wave's worth per wave of a workgroup, for each thread
         * that may run one (sim-isa.h); kernel_code_properties bit 10 is
         * ENABLE_WAVEFRONT_SIZE32. */
        bool wave32 = (k->code_properties >> 10) & 1;
        uint32_t lanes = wave32 ? 32 : 64, wg_waves = (wg_threads + lanes - 1) / lanes;
        uint32_t per_lane = (k->private_segment_size + 3) & ~3u, threads = 1 + sim_isa_pool_threads(m->pool);
        uint64_t scratch_va = 0;
        if (per_lane)
                scratch_va = isa_mem_alloc(m, (uint64_t) threads * wg_waves * lanes * per_lane, NULL);

        /* User SGPRs in kernel_code_properties order. */
        unsigned n = 0;
        if (k->code_properties & (1u << 0)) {
                d.user_sgpr[n++] = (uint32_t) scratch_va;
                d.user_sgpr[n++] = (uint32_t) (scratch_va >> 32 & 0xffff) | 1u << 31;
                d.user_sgpr[n++] = m->scratch_rsrc_override ? m->scratch_rsrc[2] : 0xffffffffu;
                d.user_sgpr[n++] = m->scratch_rsrc_override ? m->scratch_rsrc[3] : SIM_ISA_SCRATCH_RSRC3(wave32);
        }
        if (k->code_properties & (1u << 1)) {
                d.user_sgpr[n++] = (uint32_t) pkt_va;
                d.user_sgpr[n++] = (uint32_t) (pkt_va >> 32);
        }
        if (k->code_properties & (1u << 2)) {
                d.user_sgpr[n++] = 0;
                d.user_sgpr[n++] = 0;
        }
        if (k->code_properties & (1u << 3)) {
                d.user_sgpr[n++] = (uint32_t) kernarg_va;
                d.user_sgpr[n++] = (uint32_t) (kernarg_va >> 32);
        }
        if (k->code_properties & (1u << 4)) {
                d.user_sgpr[n++] = 0;
                d.user_sgpr[n++] = 0;
        }
        if (k->code_properties & (1u << 5)) {
                d.user_sgpr[n++] = (uint32_t) scratch_va;
                d.user_sgpr[n++] = (uint32_t) (scratch_va >> 32);
        }
        if (k->code_properties & (1u << 6))
                d.user_sgpr[n++] = per_lane;
        if (n != ((k->rsrc2 >> 1) & 31))
                return -EPROTO;

        uint32_t lds_granules = (k->group_segment_size + 511) / 512;
        d.entry_va = k->entry_va;
        d.rsrc1 = k->rsrc1;
        d.rsrc2 = k->rsrc2 | lds_granules << 15;
        d.rsrc3 = k->rsrc3;
        memcpy(d.grid, grid, sizeof(d.grid));
        memcpy(d.wg_size, wg, sizeof(d.wg_size));
        if (partial)
                memcpy(d.partial, partial, sizeof(d.partial));
        d.wave32 = wave32;
        d.scratch_va = scratch_va;
        d.scratch_per_lane = per_lane;
        d.scratch_waves = threads * wg_waves;
        d.pool = m->pool;
        d.cancel = m->cancel;
        d.priority = m->priority;
        d.lds_bytes = lds_granules * 512;
        d.sh_mem_bases = ISA_SH_MEM_BASES;
        return sim_isa_dispatch(&d, &m->mem, budget, ret);
}

const char *isa_kernel_path(const char *file) {
        static __thread char buf[4096]; /* tests load kernels from several threads */
        snprintf(buf, sizeof(buf), "%s/%s", ISA_KERNEL_DIR, file);
        return buf;
}

int isa_objdump_count(const char *file, const char *needle) {
        char cmd[4200], line[1024];
        int n = 0;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "%s -d --mcpu=gfx1030 '%s'", ISA_OBJDUMP, isa_kernel_path(file));
        p = popen(cmd, "r");
        if (!p)
                return -errno;
        while (fgets(line, sizeof(line), p))
                if (line[0] == '\t' && strstr(line, needle))
                        n++;
        if (pclose(p) != 0)
                return -EIO;
        return n;
}
