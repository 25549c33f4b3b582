/* SPDX-License-Identifier: MIT */
/*
 * CREATE_QUEUE / DESTROY_QUEUE validation of the simulator against
 * set_queue_properties_from_user and kfd_queue_acquire_buffers (kernels >=
 * 6.12, kfd-facts §1.6), the SDMA queue pool and the doorbell offsets.
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "kfd/kfd-topology.h"
#include "sim-test.h"

typedef struct Bufs {
        TestQueue q;
        TestBo eop, cwsr;
        KfdQueueSizes sizes;
} Bufs;

static struct kfd_ioctl_create_queue_args sdma_args(TestCtx *c, TestQueue *q) {
        return (struct kfd_ioctl_create_queue_args) {
                .ring_base_address = q->ring.va,
                .write_pointer_address = q->wptr.va,
                .read_pointer_address = q->rptr.va,
                .ring_size = q->ring_size,
                .gpu_id = c->gpu_id,
                .queue_type = KFD_IOC_QUEUE_TYPE_SDMA,
                .queue_percentage = 100,
                .queue_priority = 7,
        };
}

static void buffers(TestCtx *c, Bufs *b, uint32_t ring_size) {
        KfdTopology t;
        cr_assert_eq(kfd_topology_read(c->ops->sysfs_root, &t), 1);
        cr_assert_eq(kfd_node_queue_sizes(&t.nodes[0], &b->sizes), 0);
        b->q.ring_size = ring_size;
        b->q.ring = t_bo(c, ring_size, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        b->q.rptr = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        b->q.wptr = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        b->eop = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        b->cwsr = t_bo(c, b->sizes.cwsr_bo_size, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
}

static struct kfd_ioctl_create_queue_args compute_args(TestCtx *c, Bufs *b) {
        struct kfd_ioctl_create_queue_args a = sdma_args(c, &b->q);
        a.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE;
        a.eop_buffer_address = b->eop.va;
        a.eop_buffer_size = 4096;
        a.ctx_save_restore_address = b->cwsr.va;
        a.ctx_save_restore_size = b->sizes.cwsr_size;
        a.ctl_stack_size = b->sizes.ctl_stack_size;
        return a;
}

static int create(TestCtx *c, struct kfd_ioctl_create_queue_args *a) {
        return t_ioctl(c, AMDKFD_IOC_CREATE_QUEUE, a);
}

static int destroy(TestCtx *c, uint32_t id) {
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = id };
        return t_ioctl(c, AMDKFD_IOC_DESTROY_QUEUE, &d);
}

Test(sim_queue, properties) {
        TestCtx c;
        t_open(&c, NULL);
        Bufs b;
        buffers(&c, &b, 65536);
        struct kfd_ioctl_create_queue_args a;

        a = sdma_args(&c, &b.q);
        a.queue_percentage = 101;
        cr_expect_eq(create(&c, &a), -EINVAL, "percentage > 100");
        a = sdma_args(&c, &b.q);
        a.queue_percentage = 100 | (3 << 8); /* bits 8-15: PM4 target XCC, not a percentage */
        cr_assert_eq(create(&c, &a), 0);
        cr_expect_eq(destroy(&c, a.queue_id), 0);
        a = sdma_args(&c, &b.q);
        a.queue_priority = 16;
        cr_expect_eq(create(&c, &a), -EINVAL, "priority > 15");
        a = sdma_args(&c, &b.q);
        a.ring_size = 65536 + 4096;
        cr_expect_eq(create(&c, &a), -EINVAL, "ring size not a power of two");
        a = sdma_args(&c, &b.q);
        a.queue_type = 7;
        cr_expect_eq(create(&c, &a), -EOPNOTSUPP, "unknown type (kernel: ENOTSUPP)");
        a = sdma_args(&c, &b.q);
        a.read_pointer_address = 1ull << 47;
        cr_expect_eq(create(&c, &a), -EFAULT, "access_ok");
        a = sdma_args(&c, &b.q);
        a.gpu_id = 0x1234;
        cr_expect_eq(create(&c, &a), -EINVAL, "unknown gpu");
        cr_expect_eq(destroy(&c, 0), -EINVAL, "no such queue");
        cr_expect_eq(destroy(&c, 5000), -EINVAL);
        t_close(&c, true);
}

Test(sim_queue, small_ring_is_clamped) {
        TestCtx c;
        t_open(&c, NULL);
        TestQueue q = { .ring_size = 4096 };
        q.ring = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q.rptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q.wptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        struct kfd_ioctl_create_queue_args a = sdma_args(&c, &q);
        a.ring_size = 256;
        cr_assert_eq(create(&c, &a), 0, "below one page only the start of the mapping is checked");
        cr_expect_eq(a.ring_size, 1024u, "clamped to KFD_MIN_QUEUE_RING_SIZE and copied back");
        t_close(&c, true);
}

Test(sim_queue, acquire_buffers_sdma) {
        TestCtx c;
        t_open(&c, NULL);
        Bufs b;
        buffers(&c, &b, 65536);
        TestBo two = t_bo(&c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo unmapped = {};
        uint64_t va = t_reserve_va(4096);
        cr_assert_eq(t_alloc_raw(&c, va, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &unmapped), 0);
        struct kfd_ioctl_create_queue_args a;

        a = sdma_args(&c, &b.q);
        a.ring_size = 32768;
        cr_expect_eq(create(&c, &a), -EINVAL, "ring mapping larger than ring_size");
        a = sdma_args(&c, &b.q);
        a.ring_base_address += 4096;
        a.ring_size = 32768;
        cr_expect_eq(create(&c, &a), -EINVAL, "ring not at the start of its mapping");
        a = sdma_args(&c, &b.q);
        a.read_pointer_address = two.va;
        cr_expect_eq(create(&c, &a), -EINVAL, "rptr mapping is two pages");
        a = sdma_args(&c, &b.q);
        a.write_pointer_address = two.va + 4096;
        cr_expect_eq(create(&c, &a), -EINVAL, "wptr in the second page of its mapping");
        a = sdma_args(&c, &b.q);
        a.write_pointer_address = unmapped.va;
        cr_expect_eq(create(&c, &a), -EINVAL, "wptr BO not GPU-mapped");
        a = sdma_args(&c, &b.q);
        a.read_pointer_address = b.q.rptr.va + 0x80; /* tinygrad's layout: inside the first page */
        a.write_pointer_address = b.q.rptr.va + 0x38;
        cr_assert_eq(create(&c, &a), 0, "rptr and wptr inside one one-page mapping");

        /* The mappings a queue uses cannot be unmapped while it exists (queue_refcount). */
        cr_expect_eq(t_unmap(&c, b.q.ring.handle), -EBUSY);
        cr_expect_eq(t_free(&c, b.q.ring.handle), -EBUSY);
        cr_expect_eq(destroy(&c, a.queue_id), 0);
        cr_expect_eq(t_unmap(&c, b.q.ring.handle), 0);
        cr_expect_eq(t_free(&c, b.q.ring.handle), 0);
        t_close(&c, true);
}

Test(sim_queue, acquire_buffers_compute) {
        TestCtx c;
        t_open(&c, NULL);
        Bufs b;
        buffers(&c, &b, 65536);
        TestBo cwsr_small = t_bo(&c, b.sizes.cwsr_size, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        TestBo eop2 = t_bo(&c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        struct kfd_ioctl_create_queue_args a;

        cr_expect_eq(b.sizes.cwsr_bo_size, 0xD56000u);
        a = compute_args(&c, &b);
        a.eop_buffer_size = 8192;
        a.eop_buffer_address = eop2.va;
        cr_expect_eq(create(&c, &a), -EINVAL, "EOP size must be 4096");
        a = compute_args(&c, &b);
        a.eop_buffer_address = eop2.va;
        cr_expect_eq(create(&c, &a), -EINVAL, "EOP mapping must be 4096 bytes");
        a = compute_args(&c, &b);
        a.ctl_stack_size += 4096;
        cr_expect_eq(create(&c, &a), -EINVAL, "ctl_stack_size != topology");
        a = compute_args(&c, &b);
        a.ctx_save_restore_size -= 4096;
        cr_expect_eq(create(&c, &a), -EINVAL, "ctx_save_restore_size != topology");
        a = compute_args(&c, &b);
        a.ctx_save_restore_address = cwsr_small.va;
        cr_expect_eq(create(&c, &a), -EINVAL, "CWSR mapping without the debug area (pitfall #1)");
        a = compute_args(&c, &b);
        a.ctx_save_restore_address = 0;
        cr_expect_eq(create(&c, &a), -EINVAL, "no CWSR area");
        a = compute_args(&c, &b);
        cr_assert_eq(create(&c, &a), 0);
        cr_expect_eq(a.doorbell_offset, KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(0x697D) | 0,
                     "first CP queue: doorbell 0 (trace 0xDA5F400000000000 for gpu 0x697D)");
        cr_expect_eq(a.doorbell_offset, 0xDA5F400000000000ull);
        struct kfd_ioctl_create_queue_args a2 = compute_args(&c, &b);
        a2.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL;
        a2.eop_buffer_address = 0; /* "EOP buffer is not required for all ASICs" */
        cr_assert_eq(create(&c, &a2), 0);
        cr_expect_eq(a2.doorbell_offset & 0x1FFF, 8u);
        cr_expect_eq(a2.queue_id, a.queue_id + 1);
        cr_expect_eq(destroy(&c, a.queue_id), 0);
        cr_expect_eq(destroy(&c, a2.queue_id), 0);
        t_close(&c, true);
}

Test(sim_queue, sdma_pool_and_doorbells) {
        TestCtx c;
        t_open(&c, NULL);
        TestQueue qs[17];
        uint32_t ids[17];
        /* 2 engines x 8 queues; engine = slot % 2, queue = slot / 2; doorbell index
         * 0x100 + 0xA * engine + (queue & 1) * 512 + queue / 2, in bytes * 8. */
        const uint64_t expect[4] = { 0x100 * 8, 0x10A * 8, (0x100 + 512) * 8, (0x10A + 512) * 8 };
        for (int i = 0; i < 17; i++) {
                qs[i].ring_size = 4096;
                qs[i].ring = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                qs[i].rptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                qs[i].wptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                struct kfd_ioctl_create_queue_args a = sdma_args(&c, &qs[i]);
                int r = create(&c, &a);
                if (i < 16) {
                        cr_assert_eq(r, 0, "queue %d: %d", i, r);
                        ids[i] = a.queue_id;
                        cr_expect_eq(a.doorbell_offset & ~0x1FFFull, KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(0x697D));
                        if (i < 4)
                                cr_expect_eq(a.doorbell_offset & 0x1FFF, expect[i], "queue %d", i);
                        if (i == 1)
                                cr_expect_eq(a.doorbell_offset, 0xDA5F400000000850ull, "tinygrad #9363 trace");
                } else
                        cr_expect_eq(r, -ENOMEM, "the 17th SDMA queue: pool exhausted");
        }
        /* XGMI SDMA: this board has none. */
        struct kfd_ioctl_create_queue_args x = sdma_args(&c, &qs[16]);
        x.queue_type = KFD_IOC_QUEUE_TYPE_SDMA_XGMI;
        cr_expect_eq(create(&c, &x), -ENOMEM);
        cr_expect_eq(destroy(&c, ids[3]), 0);
        struct kfd_ioctl_create_queue_args a = sdma_args(&c, &qs[16]);
        cr_expect_eq(create(&c, &a), 0, "a freed slot is reused");
        cr_expect_eq(a.doorbell_offset & 0x1FFF, expect[3]);
        t_close(&c, true);
}

Test(sim_queue, sdma_by_engine_id) {
        TestCtx c;
        t_open(&c, NULL);
        TestQueue q = { .ring_size = 4096 };
        q.ring = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q.rptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q.wptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        struct { struct kfd_ioctl_create_queue_args base; uint32_t sdma_engine_id, pad; } a;
        a.base = sdma_args(&c, &q);
        a.base.queue_type = 4; /* KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID, uapi 1.17 */
        a.sdma_engine_id = 2;
        a.pad = 0;
        cr_expect_eq(kfd_ioctl(c.ops, c.kfd, _IOWR('K', 0x02, a), &a), -EINVAL, "engine 2 of 2");
        a.sdma_engine_id = 1;
        cr_assert_eq(kfd_ioctl(c.ops, c.kfd, _IOWR('K', 0x02, a), &a), 0);
        cr_expect_eq(a.base.doorbell_offset & 0x1FFF, 0x10A * 8u, "engine 1, queue 0");
        t_close(&c, true);
}

/* kfd_ioctl_set_cu_mask: a nonzero multiple of 32 bits, at most 1024 kept, a
 * queue of the process (-EFAULT otherwise, from pqm_update_mqd). */
Test(sim_queue, set_cu_mask) {
        TestCtx c;
        TestQueue q;
        uint32_t mask[40];

        t_open(&c, NULL);
        t_sdma_queue(&c, &q, 4096);
        memset(mask, 0xa5, sizeof mask);
        struct kfd_ioctl_set_cu_mask_args a = { .queue_id = q.queue_id, .num_cu_mask = 0,
                                                .cu_mask_ptr = (uintptr_t) mask };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_CU_MASK, &a), -EINVAL, "a count of 0");
        a.num_cu_mask = 33;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_CU_MASK, &a), -EINVAL, "not a multiple of 32");
        a.num_cu_mask = 64;
        a.cu_mask_ptr = 0;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_CU_MASK, &a), -EFAULT);
        a.cu_mask_ptr = (uintptr_t) mask;
        a.queue_id = q.queue_id + 1;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_CU_MASK, &a), -EFAULT, "no such queue");
        a.queue_id = q.queue_id;
        a.num_cu_mask = 40 * 32;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_CU_MASK, &a), 0, "past 1024 bits: the rest is dropped");
        t_queue_release(&c, &q);
        t_close(&c, true);
}
