/* SPDX-License-Identifier: MIT */
/*
 * Several simulated GPUs (SimOptions.n_gpus): the topology lists each with an
 * identity of its own; each has its own VRAM, SDMA queue pool and engines; a
 * KFD process has a VM on each (ACQUIRE_VM with that GPU's render node), may
 * put the same VA on both or map one BO into both; a GPU VM fault evicts the
 * faulting process on every GPU and no other process on either. Through the
 * KfdOps table only, as the daemon reaches the device.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sim-test.h"

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

static SimDevice *new_device(uint32_t n_gpus, bool igpu_first) {
        SimOptions o = { .n_gpus = n_gpus, .igpu_first = igpu_first };
        SimDevice *d = NULL;

        cr_assert_eq(sim_device_new(&o, &d), 0);
        return d;
}

/* A property of topology node `node` (sysfs "name value" lines), or ~0. */
static uint64_t node_prop(const KfdOps *ops, unsigned node, const char *prop) {
        char path[4096], name[64];
        unsigned long long v, found = ~0ull;
        FILE *f;

        snprintf(path, sizeof path, "%s/topology/nodes/%u/properties", ops->sysfs_root, node);
        f = fopen(path, "re");
        if (!f)
                return ~0ull;
        while (fscanf(f, "%63s %llu", name, &v) == 2)
                if (strcmp(name, prop) == 0)
                        found = v;
        fclose(f);
        return found;
}

static uint64_t node_gpu_id(const KfdOps *ops, unsigned node) {
        char path[4096];
        unsigned long long v = ~0ull;
        FILE *f;

        snprintf(path, sizeof path, "%s/topology/nodes/%u/gpu_id", ops->sysfs_root, node);
        f = fopen(path, "re");
        if (!f)
                return ~0ull;
        if (fscanf(f, "%llu", &v) != 1)
                v = ~0ull;
        fclose(f);
        return v;
}

/* Waits (up to 10 s, a bound for a busy machine, not a measure) until the
 * dword at p holds v. */
static bool t_dword_is(const void *p, uint32_t v) {
        for (int i = 0; i < 10000; i++) {
                if (__atomic_load_n((const uint32_t *) p, __ATOMIC_ACQUIRE) == v)
                        return true;
                usleep(1000);
        }
        return false;
}

Test(sim_gpus, more_than_eight_is_refused) {
        SimOptions o = { .n_gpus = SIM_MAX_GPUS + 1 };
        SimDevice *d = NULL;

        cr_expect_eq(sim_device_new(&o, &d), -EINVAL);
        cr_expect_null(d);
        o.n_gpus = SIM_MAX_GPUS;
        cr_assert_eq(sim_device_new(&o, &d), 0);
        SimDeviceStats st;
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.gpus, SIM_MAX_GPUS);
        sim_device_free(d);
}

/* Node 0 is the CPU, nodes 1..3 the GPUs, each its own gpu_id, PCI
 * location, render node and serial; the CPU links to each. */
Test(sim_gpus, topology_lists_every_gpu_with_its_own_identity) {
        SimDevice *d = new_device(3, false);
        const KfdOps *ops = sim_device_get_ops(d);

        cr_expect_eq(node_gpu_id(ops, 0), 0u);
        cr_expect_eq(node_prop(ops, 0, "io_links_count"), 3u);
        for (unsigned i = 1; i <= 3; i++) {
                SimGpuStats st;
                cr_assert_eq(sim_device_get_gpu_stats(d, i - 1, &st), 0);
                cr_expect_eq(node_gpu_id(ops, i), st.gpu_id, "node %u", i);
                cr_expect_eq(node_prop(ops, i, "drm_render_minor"), 127u + i);
                cr_expect_eq(node_prop(ops, i, "location_id"), (2u + i) << 8, "PCI 0%u:00.0", 2 + i);
                cr_expect_eq(node_prop(ops, i, "simd_count"), 80u);
                for (unsigned j = 1; j < i; j++) {
                        cr_expect_neq(node_gpu_id(ops, j), node_gpu_id(ops, i), "nodes %u and %u", j, i);
                        cr_expect_neq(node_prop(ops, j, "unique_id"), node_prop(ops, i, "unique_id"));
                }
        }
        cr_expect_eq(node_gpu_id(ops, 1), 0x697Du, "the first GPU keeps SimOptions.gpu_id");
        cr_expect_eq(node_gpu_id(ops, 4), ~0ull, "no fourth GPU node");
        SimGpuStats st;
        cr_expect_eq(sim_device_get_gpu_stats(d, 3, &st), -ENODEV);

        /* Every render node opens; the next minor does not exist. */
        for (unsigned m = 128; m <= 130; m++) {
                int fd = ops->open_render(ops->userdata, m);
                cr_assert_geq(fd, 0, "renderD%u", m);
                cr_expect_eq(ops->close(ops->userdata, fd), 0);
        }
        cr_expect_eq(ops->open_render(ops->userdata, 131), -ENOENT);

        /* A KFD context sees the three GPUs' apertures, in node order. */
        int kfd = ops->open_kfd(ops->userdata);
        cr_assert_geq(kfd, 0);
        struct kfd_process_device_apertures ap[8] = {};
        struct kfd_ioctl_get_process_apertures_new_args aa = {
                .kfd_process_device_apertures_ptr = (uint64_t) (uintptr_t) ap, .num_of_nodes = 8 };
        cr_assert_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &aa), 0);
        cr_expect_eq(aa.num_of_nodes, 3u);
        for (unsigned i = 0; i < 3; i++)
                cr_expect_eq(ap[i].gpu_id, node_gpu_id(ops, i + 1));
        cr_expect_eq(ops->close(ops->userdata, kfd), 0);
        sim_device_free(d);
}

/* igpu_first with two discrete GPUs: the iGPU is node 1 at renderD128, the
 * gfx1030s nodes 2 and 3 at renderD129 and 130. */
Test(sim_gpus, integrated_gpu_first_then_the_discrete_ones) {
        SimDevice *d = new_device(2, true);
        const KfdOps *ops = sim_device_get_ops(d);

        cr_expect_eq(node_gpu_id(ops, 1), 0x5A0Bu);
        cr_expect_eq(node_prop(ops, 1, "gfx_target_version"), 100306u);
        cr_expect_eq(node_prop(ops, 1, "drm_render_minor"), 128u);
        cr_expect_eq(node_gpu_id(ops, 2), 0x697Du);
        for (unsigned n = 2; n <= 3; n++) {
                cr_expect_eq(node_prop(ops, n, "gfx_target_version"), 100300u);
                cr_expect_eq(node_prop(ops, n, "drm_render_minor"), 127u + n);
        }
        cr_expect_neq(node_gpu_id(ops, 3), node_gpu_id(ops, 2));
        cr_expect_neq(node_gpu_id(ops, 3), 0x5A0Bu);
        cr_expect_eq(node_gpu_id(ops, 4), ~0ull);
        SimDeviceStats st;
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.gpus, 3u);
        cr_expect_eq(st.engine_threads, 1u + 2u + 2u, "SDMA engines of their own: 1 on the iGPU, 2 on each gfx1030");
        sim_device_free(d);
}

/* VRAM is each GPU's own: what one allocates, only its AVAILABLE_MEMORY
 * loses; one GPU full leaves the other whole. A VM is per GPU: ALLOC on a
 * GPU whose VM was not acquired is -ENODEV, even with the other's acquired. */
Test(sim_gpus, memory_is_accounted_per_gpu) {
        SimDevice *d = new_device(2, false);
        TestCtx c0, c1;
        SimGpuStats g0, g1;

        t_open(&c0, d);
        cr_assert_eq(sim_device_get_gpu_stats(d, 1, &g1), 0);
        struct kfd_ioctl_alloc_memory_of_gpu_args al = { .va_addr = t_reserve_va(1 << 20), .size = 1 << 20,
                                                         .gpu_id = g1.gpu_id, .flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM };
        cr_expect_eq(t_ioctl(&c0, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &al), -ENODEV, "no VM on GPU 1 yet");
        /* GPU 0's render node is no VM of GPU 1. */
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) c0.render, .gpu_id = g1.gpu_id };
        cr_expect_eq(t_ioctl(&c0, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL);
        t_on_gpu(&c0, 1, &c1);
        cr_expect_eq(t_ioctl(&c1, AMDKFD_IOC_ACQUIRE_VM, &vm), -EBUSY, "GPU 1's VM is another file already");

        TestBo b = t_bo(&c1, 1 << 20, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        cr_expect_eq(KFD_HANDLE_GPU_ID(b.handle), g1.gpu_id);
        cr_assert_eq(sim_device_get_gpu_stats(d, 0, &g0), 0);
        cr_assert_eq(sim_device_get_gpu_stats(d, 1, &g1), 0);
        cr_expect_eq(g0.vram_used, 0u);
        cr_expect_eq(g1.vram_used, 1u << 20);
        struct kfd_ioctl_get_available_memory_args av = { .gpu_id = g0.gpu_id };
        cr_assert_eq(t_ioctl(&c0, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, 1u << 30);
        av.gpu_id = g1.gpu_id;
        cr_assert_eq(t_ioctl(&c0, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, (1u << 30) - (1u << 20));

        /* The rest of GPU 1's VRAM does not fit there; it does on GPU 0. */
        uint64_t rest = (1ull << 30) - (1u << 20) + 4096;
        al = (struct kfd_ioctl_alloc_memory_of_gpu_args) { .va_addr = t_reserve_va(rest), .size = rest,
                                                           .gpu_id = g1.gpu_id, .flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM };
        cr_expect_eq(t_ioctl(&c1, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &al), -ENOMEM);
        al.gpu_id = g0.gpu_id;
        cr_assert_eq(t_ioctl(&c0, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &al), 0);
        cr_assert_eq(sim_device_get_gpu_stats(d, 0, &g0), 0);
        cr_expect_eq(g0.vram_used, rest);
        cr_expect_eq(t_free(&c0, al.handle), 0);
        munmap((void *) (uintptr_t) al.va_addr, rest);

        t_bo_release(&c1, &b);
        cr_assert_eq(sim_device_get_gpu_stats(d, 1, &g1), 0);
        cr_expect_eq(g1.vram_used, 0u);
        t_close_gpu(&c1);
        t_close(&c0, false);
        sim_device_free(d);
}

/* Each GPU has its own SDMA queue pool (2 engines x 8 queues) and engines:
 * GPU 0's pool full, GPU 1 still gives queues, and a queue of each copies
 * while the other's waits. */
Test(sim_gpus, sdma_queues_of_two_gpus_run_independently) {
        SimDevice *d = new_device(2, false);
        TestCtx c0, c1;
        TestQueue full[16], q1;
        SimGpuStats st;

        t_open(&c0, d);
        t_on_gpu(&c0, 1, &c1);
        for (unsigned i = 0; i < 16; i++)
                t_sdma_queue(&c0, &full[i], 4096);
        TestQueue extra = { .ring = t_bo(&c0, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT),
                            .rptr = t_bo(&c0, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT),
                            .wptr = t_bo(&c0, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT), .ring_size = 4096 };
        struct kfd_ioctl_create_queue_args a;
        cr_expect_eq(t_create_sdma_queue_args(&c0, &extra, &a), -ENOMEM, "GPU 0's 16 SDMA queues are taken");
        t_sdma_queue(&c1, &q1, 4096);
        cr_assert_eq(sim_device_get_gpu_stats(d, 0, &st), 0);
        cr_expect_eq(st.queues, 16u);
        cr_expect_eq(st.sdma_engines, 2u);
        cr_assert_eq(sim_device_get_gpu_stats(d, 1, &st), 0);
        cr_expect_eq(st.queues, 1u);
        cr_expect_eq(st.sdma_engines, 2u);
        /* The doorbell pages are per GPU: the offset names the GPU's id. */
        cr_expect_eq(KFD_MMAP_GET_GPU_ID(q1.doorbell_offset), c1.gpu_id);
        cr_expect_eq(KFD_MMAP_GET_GPU_ID(full[0].doorbell_offset), c0.gpu_id);

        /* GPU 0's queue waits on a flag, then copies; GPU 1's copies now. */
        TestBo flag = t_bo(&c0, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo s0 = t_bo(&c0, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT), d0 = t_bo(&c0, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT),
               s1 = t_bo(&c1, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT), d1 = t_bo(&c1, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memset(flag.cpu, 0, 4096);
        memset(s0.cpu, 0x11, 8192);
        memset(s1.cpu, 0x22, 8192);
        memset(d0.cpu, 0, 8192);
        uint32_t p0[] = { PKT_POLL_GE(flag.va, 1), PKT_COPY(d0.va, s0.va, 8192) };
        uint32_t p1[] = { PKT_COPY(d1.va, s1.va, 8192) };
        t_submit(&full[0], p0, ELEMENTSOF(p0));
        t_submit(&q1, p1, ELEMENTSOF(p1));
        cr_assert(t_dword_is((uint8_t *) d1.cpu + 8188, 0x22222222u), "GPU 1's copy while GPU 0's queue waits");
        cr_expect_eq(((uint8_t *) d0.cpu)[0], 0u, "GPU 0's queue still waits on its flag");
        __atomic_store_n((uint32_t *) flag.cpu, 1, __ATOMIC_RELEASE);
        cr_assert(t_dword_is((uint8_t *) d0.cpu + 8188, 0x11111111u), "GPU 0's copy after the flag");

        for (unsigned i = 0; i < 16; i++)
                t_queue_release(&c0, &full[i]);
        t_queue_release(&c1, &q1);
        t_close_gpu(&c1);
        t_close(&c0, false);
        sim_device_free(d);
}

/* One process on both GPUs: each VM is its own, so the same VA holds a BO of
 * each GPU (the same VA twice on one GPU is refused), and each GPU's engine
 * writes its own. */
Test(sim_gpus, one_process_same_va_on_both_gpus) {
        SimDevice *d = new_device(2, false);
        TestCtx c0, c1;
        TestQueue q0, q1;
        TestBo b0 = {}, b1 = {};
        uint64_t va = t_reserve_va(8192);
        uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;

        t_open(&c0, d);
        t_on_gpu(&c0, 1, &c1);
        cr_assert_eq(t_alloc_raw(&c0, va, 8192, flags, &b0), 0);
        cr_expect_eq(t_alloc_raw(&c0, va, 8192, flags, NULL), -EINVAL, "the same VA twice in GPU 0's VM");
        cr_assert_eq(t_alloc_raw(&c1, va, 8192, flags, &b1), 0, "the same VA in GPU 1's VM");
        cr_assert_eq(t_map(&c0, b0.handle), 0);
        cr_assert_eq(t_map(&c1, b1.handle), 0);
        void *m0 = NULL, *m1 = NULL;
        cr_assert_eq(c0.ops->mmap(c0.ops->userdata, NULL, 8192, PROT_READ, MAP_SHARED, c0.render, b0.mmap_offset, &m0), 0);
        cr_assert_eq(c1.ops->mmap(c1.ops->userdata, NULL, 8192, PROT_READ, MAP_SHARED, c1.render, b1.mmap_offset, &m1), 0);

        t_sdma_queue(&c0, &q0, 4096);
        t_sdma_queue(&c1, &q1, 4096);
        uint32_t f0[] = { PKT_FILL_DW(va, 0xA0A0A0A0u, 8192) };
        uint32_t f1[] = { PKT_FILL_DW(va, 0xB1B1B1B1u, 8192) };
        t_submit(&q0, f0, ELEMENTSOF(f0));
        t_submit(&q1, f1, ELEMENTSOF(f1));
        cr_expect(t_dword_is((uint32_t *) m0 + 2047, 0xA0A0A0A0u), "GPU 0 wrote its BO at va");
        cr_expect(t_dword_is((uint32_t *) m1 + 2047, 0xB1B1B1B1u), "GPU 1 wrote its own BO at the same va");
        cr_expect_eq(((uint32_t *) m0)[0], 0xA0A0A0A0u);
        cr_expect_eq(((uint32_t *) m1)[0], 0xB1B1B1B1u);

        t_queue_release(&c0, &q0);
        t_queue_release(&c1, &q1);
        munmap(m0, 8192);
        munmap(m1, 8192);
        cr_expect_eq(t_unmap(&c0, b0.handle), 0);
        cr_expect_eq(t_unmap(&c1, b1.handle), 0);
        cr_expect_eq(t_free(&c0, b0.handle), 0);
        cr_expect_eq(t_free(&c1, b1.handle), 0);
        t_close_gpu(&c1);
        t_close(&c0, false);
        sim_device_free(d);
}

/* A VRAM BO of GPU 0 mapped into GPU 1's VM too (MAP_MEMORY_TO_GPU with both
 * ids, kfd_mem_attach's peer attachment): GPU 1's engine writes it, GPU 0's
 * reads what GPU 1 wrote. Mapping into a GPU without its VM is -ENODEV;
 * unmapped from GPU 1 only, it stays in GPU 0's VM and cannot be freed. */
Test(sim_gpus, one_bo_mapped_into_both_gpus) {
        SimDevice *d = new_device(2, false);
        TestCtx c0, c1;
        TestQueue q0, q1;
        SimGpuStats g1;

        t_open(&c0, d);
        cr_assert_eq(sim_device_get_gpu_stats(d, 1, &g1), 0);
        uint64_t va = t_reserve_va(65536);
        TestBo shared;
        cr_assert_eq(t_alloc_raw(&c0, va, 65536,
                                 KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, &shared), 0);
        uint32_t both[2] = { c0.gpu_id, g1.gpu_id };
        struct kfd_ioctl_map_memory_to_gpu_args map = { .handle = shared.handle,
                                                        .device_ids_array_ptr = (uint64_t) (uintptr_t) both,
                                                        .n_devices = 2 };
        cr_expect_eq(t_ioctl(&c0, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map), -ENODEV, "GPU 1 has no VM yet");
        cr_expect_eq(map.n_success, 1u, "mapped into GPU 0's VM before");
        t_on_gpu(&c0, 1, &c1);
        cr_assert_eq(t_ioctl(&c0, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map), 0);
        cr_expect_eq(map.n_success, 2u);

        t_sdma_queue(&c0, &q0, 4096);
        t_sdma_queue(&c1, &q1, 4096);
        TestBo out = t_bo(&c0, 65536, KFD_IOC_ALLOC_MEM_FLAGS_GTT), done1 = t_bo(&c1, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memset(out.cpu, 0, 65536);
        memset(done1.cpu, 0, 4096);
        uint32_t w1[] = { PKT_FILL_DW(va, 0x5EE15EE1u, 65536), PKT_FENCE(done1.va, 1) };
        t_submit(&q1, w1, ELEMENTSOF(w1));
        cr_assert(t_dword_is(done1.cpu, 1), "GPU 1 filled GPU 0's VRAM");
        uint32_t r0[] = { PKT_COPY(out.va, va, 65536) };
        t_submit(&q0, r0, ELEMENTSOF(r0));
        cr_assert(t_dword_is((uint32_t *) out.cpu + 16383, 0x5EE15EE1u), "GPU 0 reads what GPU 1 wrote");
        cr_expect_eq(((uint32_t *) out.cpu)[0], 0x5EE15EE1u);

        /* Out of GPU 1's VM only: still mapped in GPU 0's, so FREE is -EBUSY. */
        uint32_t one[1] = { g1.gpu_id };
        struct kfd_ioctl_unmap_memory_from_gpu_args un = { .handle = shared.handle,
                                                           .device_ids_array_ptr = (uint64_t) (uintptr_t) one,
                                                           .n_devices = 1 };
        cr_assert_eq(t_ioctl(&c0, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &un), 0);
        un.n_success = 0;
        cr_expect_eq(t_ioctl(&c0, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &un), -EINVAL, "not mapped there any more");
        cr_expect_eq(t_free(&c0, shared.handle), -EBUSY);
        cr_expect_eq(t_unmap(&c0, shared.handle), 0);
        cr_expect_eq(t_free(&c0, shared.handle), 0);

        t_queue_release(&c0, &q0);
        t_queue_release(&c1, &q1);
        t_bo_release(&c0, &out);
        t_bo_release(&c1, &done1);
        t_close_gpu(&c1);
        t_close(&c0, false);
        sim_device_free(d);
}

typedef struct TwoGpuProc {
        TestCtx c0, c1;
        TestQueue q0, q1;
        TestBo sink, sink0;     /* in GPU 1's VM, in GPU 0's */
        uint32_t mem_ev;
} TwoGpuProc;

static void proc_open(TwoGpuProc *p, SimDevice *d, bool secondary) {
        if (secondary)
                t_open_secondary(&p->c0, d);
        else
                t_open(&p->c0, d);
        t_on_gpu(&p->c0, 1, &p->c1);
        p->mem_ev = t_event(&p->c0, KFD_IOC_EVENT_MEMORY, true, 0);
        t_sdma_queue(&p->c0, &p->q0, 4096);
        t_sdma_queue(&p->c1, &p->q1, 4096);
        p->sink = t_bo(&p->c1, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memset(p->sink.cpu, 0, 4096);
        p->sink0 = t_bo(&p->c0, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memset(p->sink0.cpu, 0, 4096);
}

/* A fence on the queue of GPU 1 (to its own sink). */
static void proc_fence(TwoGpuProc *p, uint32_t value) {
        uint32_t f[] = { PKT_FENCE(p->sink.va, value) };
        t_submit(&p->q1, f, ELEMENTSOF(f));
}

static void proc_close(TwoGpuProc *p) {
        t_queue_release(&p->c0, &p->q0);
        t_queue_release(&p->c1, &p->q1);
        t_bo_release(&p->c1, &p->sink);
        t_bo_release(&p->c0, &p->sink0);
        t_close_gpu(&p->c1);
        t_close(&p->c0, false);
}

/* A GPU VM fault on GPU 0 evicts the whole faulting process — its queue on
 * GPU 1 too (kfd_dqm_evict_pasid evicts every pdd's queues) — and its
 * MEMORY event names GPU 0; the other process runs on, on both GPUs. */
static void fault_evicts_only_that_process(bool secondary) {
        SimDevice *d = new_device(2, false);
        TwoGpuProc a, b;

        proc_open(&a, d, secondary);
        proc_open(&b, d, secondary);
        uint64_t hole = t_reserve_va(1 << 20);
        uint32_t bad[] = { PKT_COPY(a.sink0.va, hole + 0x3000, 64) };
        t_submit(&a.q0, bad, ELEMENTSOF(bad));
        struct kfd_event_data ev = { .event_id = a.mem_ev };
        uint32_t res = 0;
        cr_assert_eq(t_wait(&a.c0, &ev, 1, false, 10000, &res), 0);
        cr_assert_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "a's MEMORY event");
        cr_expect_eq(ev.memory_exception_data.gpu_id, a.c0.gpu_id, "the faulting GPU's id");
        cr_expect_eq(ev.memory_exception_data.va, hole + 0x3000);

        /* b's queues run on both GPUs; a's queue on GPU 1 runs no more. */
        proc_fence(&b, 0xB);
        uint32_t f0[] = { PKT_FENCE(b.sink0.va, 0xB0) };
        t_submit(&b.q0, f0, ELEMENTSOF(f0));
        cr_assert(t_dword_is(b.sink.cpu, 0xBu), "b on GPU 1");
        cr_assert(t_dword_is(b.sink0.cpu, 0xB0u), "b on GPU 0");
        proc_fence(&a, 0xA);
        cr_expect_eq(t_wait1(&b.c0, b.mem_ev, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "no fault of b's");
        cr_expect_eq(t_rptr(&a.q1), 0u, "a's queue on GPU 1 is evicted too: it reads nothing");
        cr_expect_eq(((uint32_t *) a.sink.cpu)[0], 0u);

        proc_close(&a);
        proc_close(&b);
        sim_device_free(d);
}

Test(sim_gpus, fault_on_gpu0_evicts_only_that_process) {
        fault_evicts_only_that_process(false);
}

/* The same with secondary contexts (CREATE_PROCESS) of one simulated
 * process: each has its own VM on each GPU and is evicted alone. */
Test(sim_gpus, fault_on_gpu0_evicts_only_that_secondary_context) {
        fault_evicts_only_that_process(true);
}

/* A reset of GPU 1 evicts the contexts with a VM on it; every context is
 * told, with GPU 1's id (kfd_signal_reset_event); a context on GPU 0 only
 * runs on. */
Test(sim_gpus, reset_of_one_gpu_leaves_the_other_gpus_contexts) {
        SimDevice *d = new_device(2, false);
        TestCtx only0, both0, both1;
        TestQueue q;

        t_open(&only0, d);
        t_open(&both0, d);
        t_on_gpu(&both0, 1, &both1);
        uint32_t hw_only0 = t_event(&only0, KFD_IOC_EVENT_HW_EXCEPTION, true, 0);
        uint32_t hw_both = t_event(&both0, KFD_IOC_EVENT_HW_EXCEPTION, true, 0);
        cr_expect_eq(sim_device_reset_gpu(d, 0x1234, false), -ENODEV);
        cr_assert_eq(sim_device_reset_gpu(d, both1.gpu_id, false), 0);

        struct kfd_event_data ev = { .event_id = hw_both };
        uint32_t res = 0;
        cr_assert_eq(t_wait(&both0, &ev, 1, false, 1000, &res), 0);
        cr_assert_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(ev.hw_exception_data.gpu_id, both1.gpu_id);
        /* Every process is told (each has its data for every GPU,
         * kfd_init_apertures), with GPU 1's id: GPU 0 was not reset. */
        struct kfd_event_data ev0 = { .event_id = hw_only0 };
        cr_assert_eq(t_wait(&only0, &ev0, 1, false, 1000, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "told of GPU 1's reset");
        cr_expect_eq(ev0.hw_exception_data.gpu_id, both1.gpu_id);
        t_sdma_queue(&only0, &q, 4096);
        TestBo sink = t_bo(&only0, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t f[] = { PKT_FENCE(sink.va, 7) };
        t_submit(&q, f, ELEMENTSOF(f));
        cr_assert(t_dword_is(sink.cpu, 7), "GPU 0's context runs on");
        t_queue_release(&only0, &q);
        t_bo_release(&only0, &sink);
        t_close_gpu(&both1);
        t_close(&both0, false);
        t_close(&only0, false);
        sim_device_free(d);
}

/* A queue pins its buffers' mappings in its own GPU's VM only (the bo_va's
 * queue_refcount is per VM): a ring mapped into both GPUs and used by a
 * queue of GPU 1 leaves GPU 0's VM freely, GPU 1's not while the queue is. */
Test(sim_gpus, a_queue_pins_its_ring_in_its_own_gpus_vm_only) {
        SimDevice *d = new_device(2, false);
        TestCtx c0, c1;
        TestQueue q = { .ring_size = 4096 };

        t_open(&c0, d);
        t_on_gpu(&c0, 1, &c1);
        cr_assert_eq(t_alloc_raw(&c0, t_reserve_va(4096), 4096,
                                 KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, &q.ring), 0);
        uint32_t both[2] = { c0.gpu_id, c1.gpu_id };
        struct kfd_ioctl_map_memory_to_gpu_args map = { .handle = q.ring.handle,
                                                        .device_ids_array_ptr = (uint64_t) (uintptr_t) both,
                                                        .n_devices = 2 };
        cr_assert_eq(t_ioctl(&c0, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map), 0);
        q.rptr = t_bo(&c1, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q.wptr = t_bo(&c1, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        struct kfd_ioctl_create_queue_args a;
        cr_assert_eq(t_create_sdma_queue_args(&c1, &q, &a), 0, "GPU 0's BO as the ring of GPU 1's queue");

        uint32_t ids[1] = { c1.gpu_id };
        struct kfd_ioctl_unmap_memory_from_gpu_args un = { .handle = q.ring.handle,
                                                           .device_ids_array_ptr = (uint64_t) (uintptr_t) ids,
                                                           .n_devices = 1 };
        cr_expect_eq(t_ioctl(&c0, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &un), -EBUSY, "the queue's mapping in GPU 1's VM");
        cr_expect_eq(t_unmap(&c0, q.ring.handle), 0, "GPU 0's mapping is no queue's");
        struct kfd_ioctl_destroy_queue_args dq = { .queue_id = a.queue_id };
        cr_assert_eq(t_ioctl(&c1, AMDKFD_IOC_DESTROY_QUEUE, &dq), 0);
        un.n_success = 0;
        cr_expect_eq(t_ioctl(&c0, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &un), 0, "free once the queue is gone");
        cr_expect_eq(t_free(&c0, q.ring.handle), 0);
        t_bo_release(&c1, &q.rptr);
        t_bo_release(&c1, &q.wptr);
        t_close_gpu(&c1);
        t_close(&c0, false);
        sim_device_free(d);
}
