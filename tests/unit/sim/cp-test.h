/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the compute (CP) engine tests: a PM4 compute queue created the
 * way the daemon creates it (ring, one-page rptr and wptr BOs, 4 KiB EOP
 * buffer, CWSR BO of the topology's size), and a tiny PM4 emitter written
 * from the documented gfx10 layouts (kfd-facts §2, Linux nvd.h, Mesa sid.h),
 * independent of daemon/gpu's builders and of the simulator's decoder. Also
 * what a dispatcher does for a DISPATCH_DIRECT of a corpus kernel: code in a
 * BO, kernel arguments, an hsa_kernel_dispatch_packet_t, scratch, and the
 * SET_SH_REG sequence of kfd-facts §2.3.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#include "isa-helper.h"
#include "sim-test.h"

/* ---- PM4 (type-3 header: 3 << 30 | COUNT << 16 | opcode << 8; kfd-facts §2.1) ---- */
#define PKT3(op, count) ((3u << 30) | ((uint32_t) (count) << 16) | ((uint32_t) (op) << 8))
#define OP_NOP 0x10u
#define OP_DISPATCH_DIRECT 0x15u
#define OP_WRITE_DATA 0x37u
#define OP_WAIT_REG_MEM 0x3Cu
#define OP_INDIRECT_BUFFER 0x3Fu
#define OP_EVENT_WRITE 0x46u
#define OP_RELEASE_MEM 0x49u
#define OP_ACQUIRE_MEM 0x58u
#define OP_SET_SH_REG 0x76u
#define NOP1 0xFFFF1000u /* header-only NOP */

/* Registers, SH offsets (reg - 0x2C00). */
#define SH_START_X 0x204u
#define SH_NUM_THREAD_X 0x207u
#define SH_PGM_LO 0x20Cu
#define SH_PGM_RSRC1 0x212u
#define SH_RESOURCE_LIMITS 0x215u
#define SH_TMPRING_SIZE 0x218u
#define SH_RESTART_X 0x21Bu
#define SH_PGM_RSRC3 0x228u
#define SH_USER_DATA_0 0x240u

/* DISPATCH_INITIATOR */
#define CSI_COMPUTE_SHADER_EN 1u
#define CSI_PARTIAL_TG_EN 2u
#define CSI_FORCE_START_AT_000 4u
#define CSI_CS_W32_EN (1u << 15)

/* RELEASE_MEM DW1: CACHE_FLUSH_AND_INV_TS (0x14) | EVENT_INDEX(5) | GCR GLM_WB|GLM_INV|GL2_WB|SEQ. */
#define RM_DW1 (0x14u | (5u << 8) | (1u << 12) | (1u << 13) | (1u << 21) | (1u << 22))
#define RM_DW2(data_sel, int_sel) (((uint32_t) (data_sel) << 29) | ((uint32_t) (int_sel) << 24))

typedef struct Pm4 {
        uint32_t dw[4096];
        size_t n;
} Pm4;

static inline void pm4_put(Pm4 *p, uint32_t v) {
        cr_assert_lt(p->n, sizeof p->dw / sizeof p->dw[0], "test PM4 buffer full");
        p->dw[p->n++] = v;
}

static inline void pm4_set_sh(Pm4 *p, uint32_t offset, const uint32_t *v, unsigned n) {
        pm4_put(p, PKT3(OP_SET_SH_REG, n));
        pm4_put(p, offset);
        for (unsigned i = 0; i < n; i++)
                pm4_put(p, v[i]);
}

/* WRITE_DATA, ENGINE_SEL 0, DST_SEL dst (5 memory / 2 L2), WR_CONFIRM. */
static inline void pm4_write_data(Pm4 *p, unsigned dst_sel, uint64_t addr, const uint32_t *v, unsigned n) {
        pm4_put(p, PKT3(OP_WRITE_DATA, 2 + n));
        pm4_put(p, (dst_sel << 8) | (1u << 20));
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        for (unsigned i = 0; i < n; i++)
                pm4_put(p, v[i]);
}

static inline void pm4_release_mem(Pm4 *p, unsigned data_sel, unsigned int_sel, uint64_t addr, uint64_t data,
                                   uint32_t ctxid) {
        pm4_put(p, PKT3(OP_RELEASE_MEM, 6));
        pm4_put(p, RM_DW1);
        pm4_put(p, RM_DW2(data_sel, int_sel));
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        pm4_put(p, LO(data));
        pm4_put(p, HI(data));
        pm4_put(p, ctxid);
}

/* The completion signal: event slot = id, INT_SEL 2, INT_CTXID = id (kfd-facts §1.10). */
static inline void pm4_signal(Pm4 *p, uint64_t page_va, uint32_t id) {
        pm4_release_mem(p, 1, 2, page_va + 8ull * id, id, id);
}

/* WAIT_REG_MEM on memory: FUNCTION func, MEM_SPACE 1, ref, mask, poll interval 4. */
static inline void pm4_wait_mem(Pm4 *p, unsigned func, uint64_t addr, uint32_t ref, uint32_t mask) {
        pm4_put(p, PKT3(OP_WAIT_REG_MEM, 5));
        pm4_put(p, func | (1u << 4));
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        pm4_put(p, ref);
        pm4_put(p, mask);
        pm4_put(p, 4);
}

static inline void pm4_acquire_mem(Pm4 *p) {
        pm4_put(p, PKT3(OP_ACQUIRE_MEM, 6));
        pm4_put(p, 0);
        pm4_put(p, 0xFFFFFFFFu);
        pm4_put(p, 0x00FFFFFFu);
        pm4_put(p, 0);
        pm4_put(p, 0);
        pm4_put(p, 0x0000000Au);
        /* GLM_WB|GLM_INV|GLK_WB|GLK_INV|GLV_INV|GL1_INV */
        pm4_put(p, (1u << 4) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 9));
}

static inline void pm4_ib(Pm4 *p, uint64_t va, uint32_t size_dw, bool chain) {
        pm4_put(p, PKT3(OP_INDIRECT_BUFFER, 2));
        pm4_put(p, LO(va));
        pm4_put(p, HI(va));
        pm4_put(p, size_dw | (chain ? 1u << 20 : 0) | (1u << 23));
}

/* ---- queues ---- */

typedef struct Topo {
        uint32_t cwsr_size, ctl_stack_size;
        uint64_t cwsr_bo_size;
} Topo;

/* The queue sizes from the simulated sysfs, as the daemon reads them (kfd-facts §1.6.3). */
static inline Topo t_topology(TestCtx *c) {
        char path[4096], name[64];
        unsigned long long v, simd = 0, simd_per_cu = 0;
        Topo t = { 0 };
        snprintf(path, sizeof path, "%s/topology/nodes/1/properties", c->ops->sysfs_root);
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "%s", path);
        while (fscanf(f, "%63s %llu", name, &v) == 2) {
                if (!strcmp(name, "cwsr_size"))
                        t.cwsr_size = (uint32_t) v;
                else if (!strcmp(name, "ctl_stack_size"))
                        t.ctl_stack_size = (uint32_t) v;
                else if (!strcmp(name, "simd_count"))
                        simd = v;
                else if (!strcmp(name, "simd_per_cu"))
                        simd_per_cu = v;
        }
        fclose(f);
        cr_assert(t.cwsr_size && t.ctl_stack_size && simd && simd_per_cu);
        uint64_t debug = ((simd / simd_per_cu) * 32 * 32 + 63) & ~63ull;
        t.cwsr_bo_size = (t.cwsr_size + debug + 4095) & ~4095ull;
        return t;
}

typedef struct TestComputeQueue {
        TestQueue q;   /* wptr_value in bytes, as t_submit() keeps it */
        TestBo eop, cwsr;
        bool has_eop;
} TestComputeQueue;

static inline int t_create_compute_queue_args(TestCtx *c, TestComputeQueue *cq, struct kfd_ioctl_create_queue_args *a) {
        Topo t = t_topology(c);
        *a = (struct kfd_ioctl_create_queue_args) {
                .ring_base_address = cq->q.ring.va,
                .write_pointer_address = cq->q.wptr.va,
                .read_pointer_address = cq->q.rptr.va,
                .ring_size = cq->q.ring_size,
                .gpu_id = c->gpu_id,
                .queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE,
                .queue_percentage = 100,
                .queue_priority = 7,
                .eop_buffer_address = cq->has_eop ? cq->eop.va : 0,
                .eop_buffer_size = cq->has_eop ? 4096 : 0,
                .ctx_save_restore_address = cq->cwsr.va,
                .ctx_save_restore_size = t.cwsr_size,
                .ctl_stack_size = t.ctl_stack_size,
        };
        return t_ioctl(c, AMDKFD_IOC_CREATE_QUEUE, a);
}

/* A PM4 compute queue as the daemon builds it; maps the doorbell slice. */
static inline void t_compute_queue(TestCtx *c, TestComputeQueue *cq, uint32_t ring_size, bool with_eop) {
        struct kfd_ioctl_create_queue_args a;
        memset(cq, 0, sizeof *cq);
        cq->q.ring_size = ring_size;
        cq->q.ring = t_bo(c, ring_size, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cq->q.rptr = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cq->q.wptr = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cq->has_eop = with_eop;
        if (with_eop)
                cq->eop = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        cq->cwsr = t_bo(c, t_topology(c).cwsr_bo_size, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        cr_assert_eq(t_create_compute_queue_args(c, cq, &a), 0);
        cq->q.queue_id = a.queue_id;
        cq->q.doorbell_offset = a.doorbell_offset;
        cr_assert_eq(c->ops->mmap(c->ops->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                                  c->kfd, a.doorbell_offset & ~0x1FFFull, &cq->q.doorbell_page), 0);
        cq->q.doorbell = (volatile uint64_t *) ((char *) cq->q.doorbell_page + (a.doorbell_offset & 0x1FFF));
}

/* Writes dwords at wptr (wrapping), stores the dword wptr, rings the doorbell with it. */
static inline void t_submit_pm4(TestComputeQueue *cq, const uint32_t *dw, size_t n) {
        TestQueue *q = &cq->q;
        uint32_t *ring = q->ring.cpu;
        uint64_t mask = q->ring_size / 4 - 1, wptr_dw = q->wptr_value / 4;
        for (size_t i = 0; i < n; i++)
                ring[(wptr_dw + i) & mask] = dw[i];
        q->wptr_value += n * 4;
        __atomic_store_n((uint64_t *) q->wptr.cpu, q->wptr_value / 4, __ATOMIC_RELEASE);
        __atomic_store_n(q->doorbell, q->wptr_value / 4, __ATOMIC_RELEASE);
}

static inline void t_submit_pm4_buf(TestComputeQueue *cq, Pm4 *p) {
        t_submit_pm4(cq, p->dw, p->n);
        p->n = 0;
}

/* rptr as the CP writes it back, in dwords. */
static inline uint64_t t_rptr_dw(TestComputeQueue *cq) {
        return __atomic_load_n((uint64_t *) cq->q.rptr.cpu, __ATOMIC_ACQUIRE);
}

static inline uint64_t t_wptr_dw(TestComputeQueue *cq) {
        return cq->q.wptr_value / 4;
}

/* ---- dispatch ---- */

typedef struct CpKernel {
        TestBo image;
        IsaKernel k;      /* kd_va/entry_va rebased into image */
} CpKernel;

/* Loads a corpus code object into a GPU BO (the ELF reader of isa-helper). */
static inline void cp_kernel_load(TestCtx *c, const char *file, const char *name, CpKernel *ret) {
        IsaMem m;
        isa_mem_init(&m);
        int r = isa_kernel_load(&m, isa_kernel_path(file), name, &ret->k);
        cr_assert_eq(r, 0, "loading %s: %s", file, strerror(-r));
        IsaRegion *img = &m.regions[0];
        ret->image = t_bo(c, (img->size + 4095) & ~4095ull, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        memcpy(ret->image.cpu, img->host, img->size);
        ret->k.kd_va = ret->image.va + (ret->k.kd_va - img->va);
        ret->k.entry_va = ret->image.va + (ret->k.entry_va - img->va);
        cr_assert_eq(ret->k.entry_va % 256, 0, "COMPUTE_PGM_LO holds the entry >> 8");
        isa_mem_fini(&m);
}

typedef struct CpLaunch {
        uint32_t grid[3], wg[3], partial[3]; /* partial[i] 0: no partial workgroup in i */
        uint64_t kernarg_va, packet_va, scratch_va;
        uint32_t scratch_wavesize_kib, scratch_waves;
} CpLaunch;

/*
 * What a dispatcher puts in memory for a launch: the kernel arguments (hidden
 * ones zero) and an hsa_kernel_dispatch_packet_t with workgroup and grid
 * sizes (get_local_size() reads them), and the scratch backing when the
 * kernel needs it. Returns the BOs through *args_bo / *scratch_bo.
 */
static inline void cp_prepare(TestCtx *c, const CpKernel *k, const IsaArgs *args, CpLaunch *l, TestBo *args_bo,
                              TestBo *scratch_bo) {
        size_t ka = k->k.kernarg_size > args->size ? k->k.kernarg_size : args->size;
        *args_bo = t_bo(c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint8_t *base = args_bo->cpu;
        memset(base, 0, 8192);
        memcpy(base, args->bytes, args->size);
        l->kernarg_va = args_bo->va;
        l->packet_va = args_bo->va + ((ka + 63) & ~63ull);
        uint8_t *pkt = base + (l->packet_va - args_bo->va);
        uint16_t setup = l->wg[2] > 1 || l->grid[2] > 1 ? 3 : l->wg[1] > 1 || l->grid[1] > 1 ? 2 : 1, wgs[3];
        uint32_t gsize[3];
        for (unsigned i = 0; i < 3; i++) {
                wgs[i] = (uint16_t) l->wg[i];
                gsize[i] = l->partial[i] ? (l->grid[i] - 1) * l->wg[i] + l->partial[i] : l->grid[i] * l->wg[i];
        }
        memcpy(pkt + 2, &setup, 2);
        memcpy(pkt + 4, wgs, 6);
        memcpy(pkt + 12, gsize, 12);
        memcpy(pkt + 24, &k->k.private_segment_size, 4);
        memcpy(pkt + 28, &k->k.group_segment_size, 4);
        memcpy(pkt + 32, &k->k.kd_va, 8);
        memcpy(pkt + 40, &l->kernarg_va, 8);

        memset(scratch_bo, 0, sizeof *scratch_bo);
        if (k->k.rsrc2 & 1) {
                /* gfx10: WAVESIZE in 1 KiB units per wave (kfd-facts §2.4). */
                uint32_t per_lane = (k->k.private_segment_size + 3) & ~3u;
                uint32_t wg_threads = l->wg[0] * l->wg[1] * l->wg[2];
                l->scratch_wavesize_kib = (32 * per_lane + 1023) / 1024;
                l->scratch_waves = (wg_threads + 31) / 32;
                *scratch_bo = t_bo(c, (uint64_t) l->scratch_waves * l->scratch_wavesize_kib * 1024,
                                   KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
                l->scratch_va = scratch_bo->va;
        }
}

/* The per-dispatch packet stream of the daemon contract (kfd-facts §2.3 order). */
static inline void pm4_dispatch(Pm4 *p, const CpKernel *k, const CpLaunch *l) {
        const IsaKernel *kk = &k->k;
        uint32_t user[16], n = 0, lds_granules = (kk->group_segment_size + 511) / 512;
        uint32_t init = CSI_COMPUTE_SHADER_EN | CSI_FORCE_START_AT_000 | CSI_CS_W32_EN;

        if (kk->code_properties & (1u << 0)) { /* private segment buffer V# */
                user[n++] = LO(l->scratch_va);
                user[n++] = (HI(l->scratch_va) & 0xFFFF) | (1u << 31);
                user[n++] = 0xFFFFFFFFu;
                user[n++] = (1u << 23) | (2u << 21);
        }
        if (kk->code_properties & (1u << 1)) {
                user[n++] = LO(l->packet_va);
                user[n++] = HI(l->packet_va);
        }
        if (kk->code_properties & (1u << 2)) {
                user[n++] = 0;
                user[n++] = 0;
        }
        if (kk->code_properties & (1u << 3)) {
                user[n++] = LO(l->kernarg_va);
                user[n++] = HI(l->kernarg_va);
        }
        if (kk->code_properties & (1u << 4)) {
                user[n++] = 0;
                user[n++] = 0;
        }
        if (kk->code_properties & (1u << 5)) {
                user[n++] = LO(l->scratch_va);
                user[n++] = HI(l->scratch_va);
        }
        if (kk->code_properties & (1u << 6))
                user[n++] = (kk->private_segment_size + 3) & ~3u;
        cr_assert_eq(n, (kk->rsrc2 >> 1) & 31, "user SGPRs in descriptor order");

        pm4_acquire_mem(p);
        uint32_t pgm[2] = { (uint32_t) (kk->entry_va >> 8), (uint32_t) (kk->entry_va >> 40) };
        pm4_set_sh(p, SH_PGM_LO, pgm, 2);
        uint32_t rsrc[2] = { kk->rsrc1, kk->rsrc2 | (lds_granules << 15) };
        pm4_set_sh(p, SH_PGM_RSRC1, rsrc, 2);
        pm4_set_sh(p, SH_PGM_RSRC3, &kk->rsrc3, 1);
        uint32_t tmpring = l->scratch_waves | (l->scratch_wavesize_kib << 12);
        pm4_set_sh(p, SH_TMPRING_SIZE, &tmpring, 1);
        uint32_t zero3[3] = { 0, 0, 0 };
        pm4_set_sh(p, SH_RESTART_X, zero3, 3);
        if (n)
                pm4_set_sh(p, SH_USER_DATA_0, user, n);
        uint32_t limits = 0;
        pm4_set_sh(p, SH_RESOURCE_LIMITS, &limits, 1);
        uint32_t st[8] = { 0, 0, 0 };
        bool partial = false;
        for (unsigned i = 0; i < 3; i++) {
                st[3 + i] = l->wg[i];
                if (l->partial[i])
                        partial = true;
        }
        if (partial) {
                init |= CSI_PARTIAL_TG_EN;
                for (unsigned i = 0; i < 3; i++)
                        st[3 + i] |= (l->partial[i] ? l->partial[i] : l->wg[i]) << 16;
        }
        pm4_set_sh(p, SH_START_X, st, 8);
        pm4_put(p, PKT3(OP_DISPATCH_DIRECT, 3));
        pm4_put(p, l->grid[0]);
        pm4_put(p, l->grid[1]);
        pm4_put(p, l->grid[2]);
        pm4_put(p, init);
        pm4_put(p, PKT3(OP_EVENT_WRITE, 0));
        pm4_put(p, 7u | (4u << 8)); /* CS_PARTIAL_FLUSH, EVENT_INDEX 4 */
}

/* A hand-assembled program at a 256-byte aligned address of a fresh BO. */
static inline TestBo cp_code(TestCtx *c, const uint32_t *code, size_t n) {
        TestBo bo = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        memcpy(bo.cpu, code, n * 4);
        return bo;
}

/* Registers and DISPATCH_DIRECT for a raw program: grid x 1 x 1 workgroups of wg
 * work-items, user SGPRs from user[]. */
static inline void pm4_dispatch_raw(Pm4 *p, uint64_t entry, uint32_t rsrc2, const uint32_t *user, unsigned n_user,
                                    uint32_t grid, uint32_t wg) {
        uint32_t pgm[2] = { (uint32_t) (entry >> 8), (uint32_t) (entry >> 40) };
        pm4_set_sh(p, SH_PGM_LO, pgm, 2);
        uint32_t rsrc[2] = { 0, rsrc2 | ((uint32_t) n_user << 1) };
        pm4_set_sh(p, SH_PGM_RSRC1, rsrc, 2);
        if (n_user)
                pm4_set_sh(p, SH_USER_DATA_0, user, n_user);
        uint32_t st[6] = { 0, 0, 0, wg, 1, 1 };
        pm4_set_sh(p, SH_START_X, st, 6);
        pm4_put(p, PKT3(OP_DISPATCH_DIRECT, 3));
        pm4_put(p, grid);
        pm4_put(p, 1);
        pm4_put(p, 1);
        pm4_put(p, CSI_COMPUTE_SHADER_EN | CSI_FORCE_START_AT_000 | CSI_CS_W32_EN);
}
