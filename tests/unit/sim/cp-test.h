/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the compute (CP) engine tests: a PM4 compute queue created the
 * way the daemon creates it (ring, one-page rptr and wptr BOs, 4 KiB EOP
 * buffer, CWSR BO of the topology's size), submission, and what a dispatcher
 * puts in memory for a DISPATCH_DIRECT of a corpus kernel: code in a BO,
 * kernel arguments, an hsa_kernel_dispatch_packet_t and scratch. The PM4
 * itself comes from pm4-emit.h.
 */
#pragma once

#include <stdio.h>
#include <stdlib.h>

#include "isa-helper.h"
#include "pm4-emit.h"
#include "sim-test.h"

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
        uint32_t priority; /* queue_priority (t_compute_queue: 7, the daemon's normal) */
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
                .queue_priority = cq->priority,
                .eop_buffer_address = cq->has_eop ? cq->eop.va : 0,
                .eop_buffer_size = cq->has_eop ? 4096 : 0,
                .ctx_save_restore_address = cq->cwsr.va,
                .ctx_save_restore_size = t.cwsr_size,
                .ctl_stack_size = t.ctl_stack_size,
        };
        return t_ioctl(c, AMDKFD_IOC_CREATE_QUEUE, a);
}

/* A PM4 compute queue as the daemon builds it, at a queue priority (0..15);
 * maps the doorbell slice. */
static inline void t_compute_queue_prio(TestCtx *c, TestComputeQueue *cq, uint32_t ring_size, bool with_eop,
                                        uint32_t priority) {
        struct kfd_ioctl_create_queue_args a;
        memset(cq, 0, sizeof *cq);
        cq->priority = priority;
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
        cq->q.ops = c->ops;
        cq->q.kfd = c->kfd;
        cq->q.doorbell_offset = a.doorbell_offset;
        cr_assert_eq(c->ops->mmap(c->ops->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
                                  c->kfd, a.doorbell_offset & ~0x1FFFull, &cq->q.doorbell_page), 0);
        cq->q.doorbell = (volatile uint64_t *) ((char *) cq->q.doorbell_page + (a.doorbell_offset & 0x1FFF));
}

static inline void t_compute_queue(TestCtx *c, TestComputeQueue *cq, uint32_t ring_size, bool with_eop) {
        t_compute_queue_prio(c, cq, ring_size, with_eop, 7);
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
        t_ring_doorbell(q, q->wptr_value / 4);
}

static inline void t_submit_pm4_buf(TestComputeQueue *cq, Pm4 *p) {
        t_submit_pm4(cq, p->dw, p->n);
        p->n = 0;
}

/* rptr as the CP writes it back: a 32-bit dword position inside the ring,
 * reported only every 64 dwords (kfd-facts §7.7). */
static inline uint64_t t_rptr_dw(TestComputeQueue *cq) {
        return __atomic_load_n((uint32_t *) cq->q.rptr.cpu, __ATOMIC_ACQUIRE);
}

/* What the CP reports when it has read up to dword count dw (monotonic). */
static inline uint64_t t_rptr_at(TestComputeQueue *cq, uint64_t dw) {
        return (dw & ~63ull) % (cq->q.ring_size / 4);
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
        ret->image = t_bo(c, (img->size + 4095) & ~4095ull, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memcpy(ret->image.cpu, img->host, img->size);
        ret->k.kd_va = ret->image.va + (ret->k.kd_va - img->va);
        ret->k.entry_va = ret->image.va + (ret->k.entry_va - img->va);
        cr_assert_eq(ret->k.entry_va % 256, 0, "COMPUTE_PGM_LO holds the entry >> 8");
        isa_mem_fini(&m);
}

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
                l->scratch_waves = (wg_threads + 31) / 32 * (l->scratch_workgroups ? l->scratch_workgroups : 1);
                *scratch_bo = t_bo(c, (uint64_t) l->scratch_waves * l->scratch_wavesize_kib * 1024,
                                   KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
                l->scratch_va = scratch_bo->va;
        }
}

/* A hand-assembled program at a 256-byte aligned address of a fresh BO. */
static inline TestBo cp_code(TestCtx *c, const uint32_t *code, size_t n) {
        TestBo bo = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memcpy(bo.cpu, code, n * 4);
        return bo;
}

