/* SPDX-License-Identifier: MIT */
/*
 * The compute (CP) engine end to end through the KfdOps table only, as the
 * daemon drives it: a PM4 compute queue with EOP and CWSR buffers, PM4
 * written by hand into the ring, the 64-bit dword wptr stored and rung, and
 * completion awaited with WAIT_EVENTS on an event signalled by RELEASE_MEM
 * (INT_SEL 2, INT_CTXID = event id). Covers WRITE_DATA, RELEASE_MEM
 * 32/64-bit/timestamp, WAIT_REG_MEM against an SDMA queue in both directions,
 * ring wrap, indirect buffers, corpus kernels with partial workgroups and
 * scratch, faults, illegal instructions and exception_info, the instruction
 * budget, DESTROY_QUEUE and teardown during a long dispatch, memory freed
 * under a running dispatch, and malformed packets.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "cp-test.h"

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

typedef struct Rig {
        TestCtx c;
        TestBo page;
        uint32_t done;     /* SIGNAL, auto-reset: completion */
        uint32_t mem_ev;   /* MEMORY */
        uint32_t hw_ev;    /* HW_EXCEPTION */
        TestComputeQueue q;
        Pm4 p;
} Rig;

static double now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void rig_open_dev(Rig *r, SimDevice *dev, uint32_t ring_size, bool eop) {
        memset(r, 0, sizeof *r);
        t_open(&r->c, dev);
        r->page = t_event_page(&r->c, &r->done);
        r->mem_ev = t_event(&r->c, KFD_IOC_EVENT_MEMORY, true, 0);
        r->hw_ev = t_event(&r->c, KFD_IOC_EVENT_HW_EXCEPTION, true, 0);
        t_compute_queue(&r->c, &r->q, ring_size, eop);
}

static void rig_open(Rig *r, uint32_t ring_size) {
        rig_open_dev(r, NULL, ring_size, true);
}

/* On a device of its own that handles GPU VM faults in this order (sim-ih.h). */
static void rig_open_order(Rig *r, uint32_t ring_size, SimFaultOrder order) {
        SimDevice *dev;
        SimOptions o = { .fault_order = order };

        cr_assert_eq(sim_device_new(&o, &dev), 0);
        rig_open_dev(r, dev, ring_size, true);
}

/* Submits r->p plus the completion signal and waits for it. */
static void rig_run(Rig *r) {
        pm4_signal(&r->p, r->page.va, r->done);
        t_submit_pm4_buf(&r->q, &r->p);
        cr_assert_eq(t_wait1(&r->c, r->done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE, "completion event");
        cr_assert_eq(t_rptr_dw(&r->q), t_rptr_at(&r->q, t_wptr_dw(&r->q)), "rptr written back up to wptr");
        cr_expect_eq(((uint64_t *) r->page.cpu)[r->done], ~0ull, "slot acknowledged (reset to ~0)");
}

/* The queue stopped at something it cannot run: no event says so (the
 * kernel raises none, kfd-facts §7.2), the simulator's record does. */
static void rig_expect_stopped(Rig *r, char *text, size_t size) {
        uint32_t qid = 999;
        cr_assert_not_null(r->c.ops->exception_info);
        cr_assert_eq(t_take_stop_record(&r->c, &qid, text, size), 0, "no record of the stop");
        cr_expect_eq(qid, r->q.q.queue_id, "the record names the stopped queue");
        cr_expect_eq(t_wait1(&r->c, r->hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "no HW_EXCEPTION for a stop");
        cr_assert_eq(t_wait1(&r->c, r->mem_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "not a memory fault");
}

static void rig_expect_fault(Rig *r, uint64_t page_va) {
        struct kfd_event_data ev = { .event_id = r->mem_ev };
        uint32_t res;
        cr_assert_eq(t_wait(&r->c, &ev, 1, false, 10000, &res), 0);
        cr_assert_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "MEMORY event");
        cr_expect_eq(ev.memory_exception_data.gpu_id, 0x697Du);
        cr_expect_eq(ev.memory_exception_data.va, page_va, "fault va %#llx, expected %#llx",
                     (unsigned long long) ev.memory_exception_data.va, (unsigned long long) page_va);
        cr_expect_eq(ev.memory_exception_data.failure.NotPresent, 1u);
}

Test(sim_cp, write_data_and_release_mem) {
        Rig r;
        rig_open(&r, 65536);
        TestBo buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t *u = buf.cpu;
        uint64_t *q = buf.cpu;
        struct kfd_ioctl_get_clock_counters_args k0 = { .gpu_id = 0x697D }, k1 = { .gpu_id = 0x697D };
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_GET_CLOCK_COUNTERS, &k0), 0);

        uint32_t three[] = { 0x11, 0x22, 0x33 };
        pm4_write_data(&r.p, 5, buf.va + 16, three, 3);                 /* memory */
        uint32_t one[] = { 0x44 };
        pm4_write_data(&r.p, 2, buf.va + 64, one, 1);                   /* L2 */
        pm4_release_mem(&r.p, 3, 0, buf.va + 128, 0, 0);                /* timestamp */
        pm4_release_mem(&r.p, 1, 0, buf.va + 256, 0xAABBCCDD11223344ull, 0); /* 32-bit */
        pm4_release_mem(&r.p, 2, 0, buf.va + 264, 0x0102030405060708ull, 0); /* 64-bit */
        pm4_release_mem(&r.p, 0, 0, buf.va + 272, 0x5555, 0);           /* DATA_SEL 0: no write */
        pm4_release_mem(&r.p, 3, 0, buf.va + 136, 0, 0);                /* second timestamp */
        rig_run(&r);
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_GET_CLOCK_COUNTERS, &k1), 0);

        cr_expect_eq(u[4], 0x11u);
        cr_expect_eq(u[5], 0x22u);
        cr_expect_eq(u[6], 0x33u);
        cr_expect_eq(u[7], 0u, "no more than three dwords");
        cr_expect_eq(u[16], 0x44u);
        cr_expect_eq(u[64], 0x11223344u, "DATA_SEL 1 writes the low 32 bits");
        cr_expect_eq(u[65], 0u, "and only those");
        cr_expect_eq(q[33], 0x0102030405060708ull);
        cr_expect_eq(q[34], 0u, "DATA_SEL 0 writes nothing");
        cr_expect_neq(q[16], 0u);
        cr_expect_leq(k0.gpu_clock_counter, q[16], "the 100 MHz counter of GET_CLOCK_COUNTERS");
        cr_expect_leq(q[16], q[17]);
        cr_expect_leq(q[17], k1.gpu_clock_counter);

        /* The event's age moves with each signal (last_event_age). */
        struct kfd_event_data ev = { .event_id = r.done };
        kfd_event_data_set_age(&ev, 2);
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_TIMEOUT, "age still 2 after one signal");
        pm4_put(&r.p, NOP1);
        rig_run(&r);
        kfd_event_data_set_age(&ev, 2);
        cr_assert_eq(t_wait(&r.c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(kfd_event_data_get_age(&ev), 3u);
        t_close(&r.c, true);
}

/*
 * The CP's read-pointer report (kfd-facts §7.7): a 32-bit dword position
 * inside the ring, written only per 64-dword block. Through a 256-dword ring
 * 40 times over, every report is below the ring size, a multiple of 64, and
 * the block the engine has read up to; the 64-bit word's high half stays as
 * the driver left it (the CP writes 32 bits).
 */
Test(sim_cp, rptr_report_wraps_in_blocks) {
        Rig r;
        rig_open(&r, 1024);
        uint32_t *word = r.q.q.rptr.cpu;
        word[1] = 0xA5A5A5A5u;
        for (unsigned round = 0; round < 1000; round++) {
                for (unsigned i = 0; i < round % 23; i++)
                        pm4_put(&r.p, NOP1);
                rig_run(&r);
                uint64_t rep = t_rptr_dw(&r.q);
                cr_assert_lt(rep, 256u, "round %u: report %" PRIu64 " outside the ring", round, rep);
                cr_assert_eq(rep % 64, 0u, "round %u: report %" PRIu64 " not block-granular", round, rep);
        }
        cr_assert_gt(t_wptr_dw(&r.q), 40u * 256, "the ring went round 40 times");
        cr_expect_eq(word[1], 0xA5A5A5A5u, "the high half is not the CP's");
        t_close(&r.c, true);
}

Test(sim_cp, interrupt_only_and_data_after_write_confirm) {
        Rig r;
        rig_open(&r, 4096);
        TestBo buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint64_t slot = r.page.va + 8ull * r.done;
        /* INT_SEL 3 ("send data after write confirm") writes the slot without an
         * interrupt (Mesa radv: "don't send an interrupt"). */
        pm4_release_mem(&r.p, 1, 3, buf.va, 7, r.done);
        pm4_release_mem(&r.p, 1, 3, slot, r.done, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        /* No interrupt to wait for: the slot's write is the sign (the rptr
         * report is too coarse to tell). */
        for (int i = 0; i < 500 && ((volatile uint32_t *) r.page.cpu)[2 * r.done] != r.done; i++)
                usleep(1000);
        cr_assert_eq(((uint32_t *) buf.cpu)[0], 7u);
        cr_assert_eq(((uint32_t *) r.page.cpu)[2 * r.done], r.done, "the slot's low dword was written");
        cr_expect_eq(t_wait1(&r.c, r.done, 50), KFD_IOC_WAIT_RESULT_TIMEOUT, "INT_SEL 3: no interrupt");
        /* INT_SEL 1 (interrupt only, DATA_SEL 0) finds the written slot. */
        pm4_release_mem(&r.p, 0, 1, 0, 0, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_expect_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE, "INT_SEL 1 interrupts");
        t_close(&r.c, true);
}

/* A compute queue waits (WAIT_REG_MEM GEQ) for an SDMA fence, and an SDMA
 * queue waits (POLL_REGMEM GEQ) for a compute RELEASE_MEM fence. */
Test(sim_cp, wait_reg_mem_against_sdma_both_ways) {
        Rig r;
        rig_open(&r, 4096);
        TestQueue sdma;
        t_sdma_queue(&r.c, &sdma, 4096);
        uint32_t sdma_done = t_event(&r.c, KFD_IOC_EVENT_SIGNAL, true, 0);
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint32_t *f = fence.cpu;

        /* compute waits for SDMA: fence[0] >= 5, then writes fence[1] = 1. */
        uint32_t one[] = { 1 };
        pm4_wait_mem(&r.p, 5, fence.va, 5, 0xFFFFFFFF);
        uint64_t wait_at = t_wptr_dw(&r.q);
        pm4_write_data(&r.p, 5, fence.va + 4, one, 1);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        uint32_t f4[] = { PKT_FENCE(fence.va, 4) };
        t_submit(&sdma, f4, ELEMENTSOF(f4));
        cr_expect_eq(t_wait1(&r.c, r.done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "4 < 5: still waiting");
        cr_expect_eq(f[0], 4u, "the SDMA fence was written");
        cr_expect_eq(f[1], 0u, "nothing after the wait ran");
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, wait_at), "rptr stays at the WAIT_REG_MEM packet");
        uint32_t f5[] = { PKT_FENCE(fence.va, 5) };
        t_submit(&sdma, f5, ELEMENTSOF(f5));
        cr_assert_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(f[1], 1u);

        /* SDMA waits for compute: fence[2] >= 9 (a RELEASE_MEM of the compute queue), then FENCE fence[3]. */
        uint32_t poll[] = { PKT_POLL_GE(fence.va + 8, 9), PKT_FENCE(fence.va + 12, 77),
                            PKT_SIGNAL(r.page.va, sdma_done) };
        t_submit(&sdma, poll, ELEMENTSOF(poll));
        cr_expect_eq(t_wait1(&r.c, sdma_done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "SDMA still polling");
        cr_expect_eq(f[3], 0u);
        pm4_release_mem(&r.p, 1, 0, fence.va + 8, 9, 0);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_assert_eq(t_wait1(&r.c, sdma_done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(f[3], 77u);

        /* Masked compares: (v & 0xF0) == 0x30 with v = 0x3F; and < / != forms. */
        f[4] = 0x3F;
        pm4_wait_mem(&r.p, 3, fence.va + 16, 0x30, 0xF0);
        pm4_wait_mem(&r.p, 1, fence.va + 16, 0x40, 0xFFFFFFFF);
        pm4_wait_mem(&r.p, 4, fence.va + 16, 0x3E, 0xFFFFFFFF);
        rig_run(&r);
        t_close(&r.c, true);
}

/* 14- and 11-dword rounds in a 1 KiB ring (256 dwords): packets straddle the
 * end over and over; the tail is padded with both NOP forms as the daemon does. */
Test(sim_cp, ring_wraps_around) {
        Rig r;
        rig_open(&r, 1024);
        TestBo buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        for (uint32_t i = 1; i <= 300; i++) {
                uint32_t v[] = { i, i * 3 };
                pm4_write_data(&r.p, 5, buf.va, v, (i % 2) + 1);
                if (i % 7 == 0) {
                        pm4_put(&r.p, NOP1);
                        pm4_put(&r.p, PKT3(OP_NOP, 1));
                        pm4_put(&r.p, 0xDEADBEEF);
                        pm4_put(&r.p, 0xDEADBEEF);
                }
                rig_run(&r);
                cr_assert_eq(((uint32_t *) buf.cpu)[0], i);
        }
        cr_expect_gt(t_wptr_dw(&r.q), 10u * 256, "wrapped many times");
        t_close(&r.c, true);
}

Test(sim_cp, indirect_buffers) {
        Rig r;
        rig_open(&r, 4096);
        TestBo buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo ibs = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t *u = buf.cpu;
        Pm4 ib1 = { .n = 0 }, ib2 = { .n = 0 };

        /* IB 1: two WRITE_DATAs, then CHAIN to IB 2 (the rest of IB 1 is never run). */
        uint32_t a[] = { 0xA1 }, b[] = { 0xB2 }, c[] = { 0xC3 }, x[] = { 0xBAD };
        pm4_write_data(&ib1, 5, buf.va, a, 1);
        pm4_write_data(&ib1, 5, buf.va + 4, b, 1);
        pm4_ib(&ib1, ibs.va + 4096, 0, true); /* size patched below */
        size_t chain_at = ib1.n - 1;
        pm4_write_data(&ib1, 5, buf.va + 12, x, 1);
        /* IB 2: a WRITE_DATA and a RELEASE_MEM. */
        pm4_write_data(&ib2, 5, buf.va + 8, c, 1);
        pm4_release_mem(&ib2, 1, 0, buf.va + 16, 0xD4, 0);
        ib1.dw[chain_at] |= (uint32_t) ib2.n;
        memcpy(ibs.cpu, ib1.dw, ib1.n * 4);
        memcpy((char *) ibs.cpu + 4096, ib2.dw, ib2.n * 4);

        pm4_ib(&r.p, ibs.va, (uint32_t) ib1.n, false);
        rig_run(&r);
        cr_expect_eq(u[0], 0xA1u);
        cr_expect_eq(u[1], 0xB2u);
        cr_expect_eq(u[2], 0xC3u);
        cr_expect_eq(u[3], 0u, "CHAIN replaced the rest of IB 1");
        cr_expect_eq(u[4], 0xD4u);

        /* The same IB again: IBs are re-read each time. */
        memset(buf.cpu, 0, 32);
        pm4_ib(&r.p, ibs.va, (uint32_t) ib1.n, false);
        rig_run(&r);
        cr_expect_eq(u[2], 0xC3u);

        /* A nested (non-chained) IB is refused; rptr stays at the ring's IB packet. */
        Pm4 nest = { .n = 0 };
        pm4_ib(&nest, ibs.va + 4096, (uint32_t) ib2.n, false);
        memcpy((char *) ibs.cpu + 2048, nest.dw, nest.n * 4);
        uint64_t at = t_wptr_dw(&r.q);
        pm4_ib(&r.p, ibs.va + 2048, (uint32_t) nest.n, false);
        t_submit_pm4_buf(&r.q, &r.p);
        char text[256];
        rig_expect_stopped(&r, text, sizeof text);
        cr_expect(strstr(text, "one level"), "text: %s", text);
        cr_expect(strstr(text, "IB 0x"), "names the IB position: %s", text);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, at));
        t_close(&r.c, true);
}

/* Fence-first (the default, sim-ih.h): the faulting wave reads amdgpu's
 * dummy page and runs on, the dispatch ends, the packets after it run and
 * their end-of-pipe interrupt is handled after the fault: whoever sees the
 * completion finds the MEMORY event set already. Then the process is
 * evicted: nothing more runs. */
Test(sim_cp, dispatch_fault_fence_first_runs_on_and_the_event_comes_first) {
        Rig r;
        rig_open(&r, 65536);
        CpKernel k;
        cp_kernel_load(&r.c, "vector-add.hsaco", "vector_add", &k);
        TestBo a = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT), buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint64_t hole = t_reserve_va(1 << 20);
        for (unsigned i = 0; i < 64; i++)
                ((uint32_t *) a.cpu)[i] = i + 1;
        IsaArgs args = { 0 };
        /* c[i] = a[i] + b[i] with b in the hole: b reads the dummy page's zeros. */
        isa_args_u64(&args, a.va), isa_args_u64(&args, hole + 0x5000), isa_args_u64(&args, buf.va + 256),
                isa_args_u32(&args, 64);
        CpLaunch l = { .grid = { 1, 1, 1 }, .wg = { 64, 1, 1 } };
        TestBo argbo, scratch;
        cp_prepare(&r.c, &k, &args, &l, &argbo, &scratch);
        pm4_dispatch(&r.p, &k.k, &l);
        uint32_t after[] = { 0x99 };
        pm4_write_data(&r.p, 5, buf.va, after, 1);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_assert_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE, "the end-of-pipe interrupt came");
        cr_expect_eq(t_wait1(&r.c, r.mem_ev, 0), KFD_IOC_WAIT_RESULT_COMPLETE,
                     "the MEMORY event was set before the interrupt raised after the fault");
        cr_expect_eq(((uint32_t *) buf.cpu)[0], 0x99u, "the packet after the faulting dispatch ran");
        for (unsigned i = 0; i < 64; i++)
                cr_assert_eq(((uint32_t *) buf.cpu)[64 + i], i + 1, "lane %u: a + the dummy page's 0", i);
        cr_expect_eq(t_wait1(&r.c, r.hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "a fault is not a HW exception");

        /* Evicted for good: later work never runs. */
        uint32_t again[] = { 0x77 };
        pm4_write_data(&r.p, 5, buf.va, again, 1);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_expect_eq(t_wait1(&r.c, r.done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "an evicted queue runs nothing");
        cr_expect_eq(((uint32_t *) buf.cpu)[0], 0x99u);
        t_close(&r.c, true);
}

Test(sim_cp, indirect_buffer_faults_and_ring_chain) {
        Rig r;
        rig_open(&r, 4096);
        uint64_t hole = t_reserve_va(65536);
        uint64_t at = t_wptr_dw(&r.q);
        pm4_ib(&r.p, hole + 0x3000, 16, false);
        t_submit_pm4_buf(&r.q, &r.p);
        rig_expect_fault(&r, hole + 0x3000);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, at), "rptr at the INDIRECT_BUFFER packet");

        Rig s;
        rig_open(&s, 4096);
        TestBo ib = t_bo(&s.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        pm4_ib(&s.p, ib.va, 4, true); /* CHAIN in the ring */
        t_submit_pm4_buf(&s.q, &s.p);
        char text[256];
        rig_expect_stopped(&s, text, sizeof text);
        cr_expect(strstr(text, "CHAIN"), "text: %s", text);
        t_close(&s.c, true);
        t_close(&r.c, true);
}

/* vector_add over n = 1000 in workgroups of 64: 16 workgroups, the last one
 * partial (40). The kernel argument n is 1024, so only the hardware keeps
 * work-items 1000..1023 from running. */
Test(sim_cp, dispatch_vector_add_with_partial_workgroup) {
        Rig r;
        rig_open(&r, 65536);
        CpKernel k;
        cp_kernel_load(&r.c, "vector-add.hsaco", "vector_add", &k);
        TestBo a = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT), b = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT),
               cc = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        float *x = a.cpu, *y = b.cpu, *z = cc.cpu;
        for (uint32_t i = 0; i < 2048; i++)
                x[i] = (float) i * 0.5f, y[i] = (float) (i % 97) - 3.25f, z[i] = -1.0f;
        IsaArgs args = { 0 };
        isa_args_u64(&args, a.va), isa_args_u64(&args, b.va), isa_args_u64(&args, cc.va), isa_args_u32(&args, 1024);
        CpLaunch l = { .grid = { 16, 1, 1 }, .wg = { 64, 1, 1 }, .partial = { 40, 0, 0 } };
        TestBo argbo, scratch;
        cp_prepare(&r.c, &k, &args, &l, &argbo, &scratch);
        pm4_dispatch(&r.p, &k.k, &l);
        rig_run(&r);
        for (uint32_t i = 0; i < 1000; i++)
                cr_assert_eq(z[i], x[i] + y[i], "i=%u: %f != %f", i, z[i], x[i] + y[i]);
        for (uint32_t i = 1000; i < 1100; i++)
                cr_assert_eq(z[i], -1.0f, "i=%u: work-item beyond the partial workgroup ran", i);

        /* Again without PARTIAL_TG_EN: all 1024 run (the kernel's guard is n = 1024). */
        CpLaunch full = { .grid = { 16, 1, 1 }, .wg = { 64, 1, 1 } };
        TestBo argbo2, scratch2;
        cp_prepare(&r.c, &k, &args, &full, &argbo2, &scratch2);
        pm4_dispatch(&r.p, &k.k, &full);
        rig_run(&r);
        for (uint32_t i = 1000; i < 1024; i++)
                cr_assert_eq(z[i], x[i] + y[i], "i=%u", i);
        cr_assert_eq(z[1024], -1.0f);
        t_close(&r.c, true);
}

/* private_array needs real scratch: COMPUTE_TMPRING_SIZE and the private
 * segment buffer V#; 2-D workgroups don't matter here, partial ones do. */
Test(sim_cp, dispatch_private_array_with_scratch) {
        static const uint32_t shapes[][2] = { { 1000, 256 }, { 77, 48 }, { 33, 1 } };
        Rig r;
        rig_open(&r, 65536);
        CpKernel k;
        cp_kernel_load(&r.c, "private-array.hsaco", "private_array", &k);
        cr_assert(k.k.rsrc2 & 1, "SCRATCH_EN");
        cr_assert_geq(k.k.private_segment_size, 256u);
        TestBo in = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT), out = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t *iv = in.cpu, *ov = out.cpu;
        for (uint32_t i = 0; i < 2048; i++)
                iv[i] = i * 2654435761u;
        for (size_t t = 0; t < ELEMENTSOF(shapes); t++) {
                uint32_t n = shapes[t][0], wg = shapes[t][1], groups = (n + wg - 1) / wg;
                memset(out.cpu, 0xEE, 8192);
                IsaArgs args = { 0 };
                /* the guard argument is the rounded-up size: the partial workgroup does the rest */
                isa_args_u64(&args, in.va), isa_args_u64(&args, out.va), isa_args_u32(&args, groups * wg);
                CpLaunch l = { .grid = { groups, 1, 1 }, .wg = { wg, 1, 1 }, .partial = { n - (groups - 1) * wg, 0, 0 } };
                TestBo argbo, scratch;
                cp_prepare(&r.c, &k, &args, &l, &argbo, &scratch);
                cr_assert_gt(l.scratch_wavesize_kib, 0u);
                pm4_dispatch(&r.p, &k.k, &l);
                rig_run(&r);
                for (uint32_t i = 0; i < n; i++) {
                        uint32_t v = iv[i], e = 0;
                        for (uint32_t j = 0; j < 16; j++)
                                e += v * ((v + j * 7) & 63) + i;
                        cr_assert_eq(ov[i], e, "n=%u wg=%u i=%u: %u != %u", n, wg, i, ov[i], e);
                }
                for (uint32_t i = n; i < groups * wg; i++)
                        cr_assert_eq(ov[i], 0xEEEEEEEEu, "n=%u wg=%u: item %u past the partial workgroup ran", n, wg, i);
        }
        t_close(&r.c, true);
}

/* private_array on a device with 3 interpreter helpers, 64 workgroups: with
 * a scratch ring (COMPUTE_TMPRING_SIZE.WAVES) of one workgroup, the
 * workgroups run one at a time (helpers sharing the ring would overwrite one
 * another's private arrays); with a ring of four, up to four at once, each in
 * its slot. Either way every result is right. */
static void run_private_array_ring(uint32_t ring_workgroups) {
        SimDevice *dev;
        SimOptions o = { .isa_helpers = 3 };
        cr_assert_eq(sim_device_new(&o, &dev), 0);
        Rig r;
        rig_open_dev(&r, dev, 65536, true);
        CpKernel k;
        cp_kernel_load(&r.c, "private-array.hsaco", "private_array", &k);
        uint32_t n = 64 * 64;
        TestBo in = t_bo(&r.c, 4 * n, KFD_IOC_ALLOC_MEM_FLAGS_GTT), out = t_bo(&r.c, 4 * n, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t *iv = in.cpu, *ov = out.cpu;
        for (uint32_t i = 0; i < n; i++)
                iv[i] = i * 2654435761u;
        IsaArgs args = { 0 };
        isa_args_u64(&args, in.va), isa_args_u64(&args, out.va), isa_args_u32(&args, n);
        CpLaunch l = { .grid = { 64, 1, 1 }, .wg = { 64, 1, 1 }, .scratch_workgroups = ring_workgroups };
        TestBo argbo, scratch;
        cp_prepare(&r.c, &k, &args, &l, &argbo, &scratch);
        pm4_dispatch(&r.p, &k.k, &l);
        rig_run(&r);
        for (uint32_t i = 0; i < n; i++) {
                uint32_t v = iv[i], e = 0;
                for (uint32_t j = 0; j < 16; j++)
                        e += v * ((v + j * 7) & 63) + i;
                cr_assert_eq(ov[i], e, "ring of %u workgroups, i=%u: %u != %u", ring_workgroups, i, ov[i], e);
        }
        t_close(&r.c, true);
}

Test(sim_cp, parallel_workgroups_take_scratch_ring_slots) {
        run_private_array_ring(1);
        run_private_array_ring(4);
}

/* index_3d in three dimensions with partial workgroups in each: work-item IDs
 * stay below the partial sizes, workgroup IDs X/Y/Z land where they should. */
Test(sim_cp, dispatch_index_3d_partial) {
        Rig r;
        rig_open(&r, 65536);
        CpKernel k;
        cp_kernel_load(&r.c, "index-3d.hsaco", "index_3d", &k);
        const uint32_t D[6] = { 9, 5, 7, 4, 2, 3 };
        uint32_t grid[3], full[3], partial[3];
        for (unsigned i = 0; i < 3; i++) {
                grid[i] = (D[i] + D[3 + i] - 1) / D[3 + i];
                full[i] = grid[i] * D[3 + i];
                partial[i] = D[i] - (grid[i] - 1) * D[3 + i];
        }
        uint32_t total = full[0] * full[1] * full[2];
        TestBo out = t_bo(&r.c, 8ull * total + 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t *o = out.cpu;
        memset(o, 0xA5, 8ull * total);
        IsaArgs args = { 0 };
        isa_args_u64(&args, out.va), isa_args_u32(&args, full[0]), isa_args_u32(&args, full[1]), isa_args_u32(&args, full[2]);
        CpLaunch l = { .grid = { grid[0], grid[1], grid[2] }, .wg = { D[3], D[4], D[5] },
                       .partial = { partial[0], partial[1], partial[2] } };
        TestBo argbo, scratch;
        cp_prepare(&r.c, &k, &args, &l, &argbo, &scratch);
        pm4_dispatch(&r.p, &k.k, &l);
        rig_run(&r);
        for (uint32_t z = 0; z < full[2]; z++)
                for (uint32_t y = 0; y < full[1]; y++)
                        for (uint32_t x = 0; x < full[0]; x++) {
                                uint32_t i = (z * full[1] + y) * full[0] + x;
                                if (x >= D[0] || y >= D[1] || z >= D[2]) {
                                        cr_assert_eq(o[2 * i], 0xA5A5A5A5u, "(%u,%u,%u) ran", x, y, z);
                                        continue;
                                }
                                uint32_t lsz = z / D[5] == grid[2] - 1 ? partial[2] : D[5];
                                uint32_t e0 = ((x % D[3]) | (y % D[4]) << 8 | (z % D[5]) << 16) ^ (z / D[5]) << 24;
                                uint32_t e1 = ((x / D[3]) | (y / D[4]) << 12) + lsz * 100000u;
                                cr_assert_eq(o[2 * i], e0, "(%u,%u,%u): %#x != %#x", x, y, z, o[2 * i], e0);
                                cr_assert_eq(o[2 * i + 1], e1, "(%u,%u,%u): %#x != %#x", x, y, z, o[2 * i + 1], e1);
                        }
        t_close(&r.c, true);
}

Test(sim_cp, dispatch_fault_stops_the_queue_at_the_dispatch) {
        Rig r;
        rig_open_order(&r, 65536, SIM_FAULT_ORDER_EVENT_FIRST);
        CpKernel k;
        cp_kernel_load(&r.c, "vector-add.hsaco", "vector_add", &k);
        TestBo a = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT), buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint64_t hole = t_reserve_va(1 << 20);
        IsaArgs args = { 0 };
        isa_args_u64(&args, a.va), isa_args_u64(&args, hole + 0x5000), isa_args_u64(&args, a.va), isa_args_u32(&args, 64);
        CpLaunch l = { .grid = { 1, 1, 1 }, .wg = { 64, 1, 1 } };
        TestBo argbo, scratch;
        cp_prepare(&r.c, &k, &args, &l, &argbo, &scratch);
        pm4_dispatch(&r.p, &k.k, &l);
        size_t dispatch_at = 0;
        for (size_t i = 0; i < r.p.n; i++)
                if (r.p.dw[i] == PKT3(OP_DISPATCH_DIRECT, 3))
                        dispatch_at = i;
        uint64_t base = t_wptr_dw(&r.q);
        uint32_t after[] = { 0x99 };
        pm4_write_data(&r.p, 5, buf.va, after, 1);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        rig_expect_fault(&r, hole + 0x5000);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, base + dispatch_at), "rptr at the DISPATCH_DIRECT packet");
        cr_expect_eq(((uint32_t *) buf.cpu)[0], 0u, "nothing after the fault ran");
        cr_expect_eq(t_wait1(&r.c, r.done, 50), KFD_IOC_WAIT_RESULT_TIMEOUT);
        cr_expect_eq(t_wait1(&r.c, r.hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "a fault is not a HW exception");
        cr_expect_eq(r.c.ops->exception_info(r.c.ops->userdata, r.c.kfd, NULL, NULL, 0), -ENOENT);

        /* The fault evicted the whole process (kfd-facts §7.1): its queues
         * stay stopped, and a queue created afterwards starts evicted, so
         * destroying and recreating the faulting queue brings nothing back. */
        pm4_put(&r.p, NOP1);
        t_submit_pm4_buf(&r.q, &r.p);
        usleep(20000);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, base + dispatch_at));
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = r.q.q.queue_id };
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
        *(uint64_t *) r.q.q.wptr.cpu = 0;
        *(uint64_t *) r.q.q.rptr.cpu = 0;
        struct kfd_ioctl_create_queue_args ca;
        cr_assert_eq(t_create_compute_queue_args(&r.c, &r.q, &ca), 0, "CREATE_QUEUE itself succeeds");
        r.q.q.queue_id = ca.queue_id;
        r.q.q.wptr_value = 0;
        pm4_write_data(&r.p, 5, buf.va, after, 1);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_expect_eq(t_wait1(&r.c, r.done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "the new queue never runs");
        cr_expect_eq(((uint32_t *) buf.cpu)[0], 0u);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, 0u));
        t_close(&r.c, true);
}

/* v_dot2_f32_f16 v0, v1, v2, v3 (VOP3P): the interpreter refuses it by name. */
Test(sim_cp, illegal_instruction_stops_the_queue_with_its_name) {
        static const uint32_t code[] = { 0xcc134000, 0x1c0e0501, 0xbf810000 };
        Rig r;
        rig_open(&r, 4096);
        TestBo prog = cp_code(&r.c, code, ELEMENTSOF(code));
        pm4_dispatch_raw(&r.p, prog.va, 0, NULL, 0, 1, 32);
        uint64_t at = t_wptr_dw(&r.q) + r.p.n - 5;
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        char text[256];
        rig_expect_stopped(&r, text, sizeof text);
        cr_expect(strstr(text, "v_dot2_f32_f16"), "text: %s", text);
        cr_expect(strstr(text, "0xcc134000"), "text names the encoding: %s", text);
        char pc[32];
        snprintf(pc, sizeof pc, "0x%llx", (unsigned long long) prog.va);
        cr_expect(strstr(text, pc), "text names the pc %s: %s", pc, text);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, at), "rptr at the DISPATCH_DIRECT packet");
        cr_expect_eq(t_wait1(&r.c, r.done, 0), KFD_IOC_WAIT_RESULT_TIMEOUT);
        /* One record per exception: none left now; a render fd is not a KFD fd. */
        cr_expect_eq(r.c.ops->exception_info(r.c.ops->userdata, r.c.kfd, NULL, text, sizeof text), -ENOENT);
        cr_expect_eq(r.c.ops->exception_info(r.c.ops->userdata, r.c.render, NULL, text, sizeof text), -EBADF);
        cr_expect_eq(r.c.ops->exception_info(r.c.ops->userdata, 12345, NULL, text, sizeof text), -EBADF);
        t_close(&r.c, true);
}

/* A dispatch whose RSRC words ask for a privileged, debugged or trapping
 * wave stops the queue at the DISPATCH_DIRECT, naming the bit, before any
 * wave runs: the model never runs it as an ordinary one. */
Test(sim_cp, dispatch_with_privileged_or_trap_bits_stops_the_queue) {
        static const uint32_t code[] = {
                0x7e0002ff, 0x00000001, /* v_mov_b32_e32 v0, 1 */
                0x7e020280,             /* v_mov_b32_e32 v1, 0 */
                0xdc708000, 0x00000001, /* global_store_dword v1, v0, s[0:1] */
                0xbf810000,             /* s_endpgm */
        };
        static const struct {
                unsigned reg, bit;
                const char *want;
        } cases[] = {
                { 1, 20, "COMPUTE_PGM_RSRC1.PRIV (bit 20): privileged waves, not modelled" },
                { 1, 22, "COMPUTE_PGM_RSRC1.DEBUG_MODE (bit 22)" },
                { 1, 24, "COMPUTE_PGM_RSRC1.BULKY (bit 24)" },
                { 1, 25, "COMPUTE_PGM_RSRC1.CDBG_USER (bit 25)" },
                { 2, 6, "COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6)" },
                { 2, 13, "COMPUTE_PGM_RSRC2.EXCP_EN_MSB (bits 13-14)" },
                { 2, 26, "COMPUTE_PGM_RSRC2.EXCP_EN (bits 24-30)" },
                { 3, 10, "COMPUTE_PGM_RSRC3 bits 4-31: reserved on gfx10" },
        };
        for (size_t i = 0; i <= ELEMENTSOF(cases); i++) {
                Rig r;
                rig_open(&r, 4096);
                TestBo prog = cp_code(&r.c, code, ELEMENTSOF(code));
                TestBo out = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                uint32_t user[2] = { (uint32_t) out.va, (uint32_t) (out.va >> 32) };
                pm4_dispatch_raw(&r.p, prog.va, 0, user, 2, 1, 32);
                if (i < ELEMENTSOF(cases)) {
                        /* RSRC3 gets a SET_SH_REG of its own, first. */
                        if (cases[i].reg == 3) {
                                uint32_t rsrc3 = 1u << cases[i].bit;
                                Pm4 pre = r.p;
                                r.p.n = 0;
                                pm4_set_sh(&r.p, SH_PGM_RSRC3, &rsrc3, 1);
                                for (unsigned k = 0; k < pre.n; k++)
                                        pm4_put(&r.p, pre.dw[k]);
                        } else {
                                /* SET_SH_REG header, register offset, RSRC1, RSRC2. */
                                size_t k = 1;
                                while (k < r.p.n && r.p.dw[k] != SH_PGM_RSRC1)
                                        k++;
                                cr_assert_lt(k + 2, r.p.n);
                                r.p.dw[k + cases[i].reg] |= 1u << cases[i].bit;
                        }
                }
                pm4_signal(&r.p, r.page.va, r.done);
                t_submit_pm4_buf(&r.q, &r.p);
                if (i == ELEMENTSOF(cases)) {
                        /* Without them, the same dispatch runs. */
                        cr_assert_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE);
                        cr_expect_eq(((uint32_t *) out.cpu)[0], 1u);
                        t_close(&r.c, true);
                        break;
                }
                char text[256];
                rig_expect_stopped(&r, text, sizeof text);
                cr_expect(strstr(text, cases[i].want), "case %zu: \"%s\" does not say \"%s\"", i, text, cases[i].want);
                cr_expect_eq(((uint32_t *) out.cpu)[0], 0u, "case %zu: no wave ran", i);
                t_close(&r.c, true);
        }
}

Test(sim_cp, instruction_budget_ends_an_endless_kernel) {
        static const uint32_t code[] = { 0xbf82ffff }; /* s_branch -1 */
        SimDevice *dev;
        SimOptions o = { .max_dispatch_wave_instructions = 200000 };
        cr_assert_eq(sim_device_new(&o, &dev), 0);
        Rig r;
        rig_open_dev(&r, dev, 4096, true);
        TestBo prog = cp_code(&r.c, code, ELEMENTSOF(code));
        pm4_dispatch_raw(&r.p, prog.va, 0, NULL, 0, 4, 64);
        t_submit_pm4_buf(&r.q, &r.p);
        char text[256];
        rig_expect_stopped(&r, text, sizeof text);
        cr_expect(strstr(text, "budget of 200000"), "text: %s", text);
        t_close(&r.c, true);
}

/* A dispatch that would never end holds a CP pipe; DESTROY_QUEUE cancels it
 * promptly, and meanwhile ioctls, WAIT_EVENTS and the SDMA engines carry on. */
Test(sim_cp, destroy_queue_during_a_long_dispatch) {
        static const uint32_t code[] = { 0xbf82ffff };
        Rig r;
        rig_open(&r, 4096);
        TestBo prog = cp_code(&r.c, code, ELEMENTSOF(code));
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestQueue sdma;
        t_sdma_queue(&r.c, &sdma, 4096);
        pm4_dispatch_raw(&r.p, prog.va, 0, NULL, 0, 1000, 256);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        usleep(50000); /* the dispatch is running now */

        double t0 = now_ms();
        uint32_t f[] = { PKT_FENCE(fence.va, 3), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&sdma, f, ELEMENTSOF(f));
        cr_assert_eq(t_wait1(&r.c, r.done, 5000), KFD_IOC_WAIT_RESULT_COMPLETE, "SDMA and WAIT_EVENTS not stalled");
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 3u);
        TestBo extra = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        t_bo_release(&r.c, &extra);
        cr_expect_lt(now_ms() - t0, 2000.0, "ioctls answered while the dispatch runs");

        t0 = now_ms();
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = r.q.q.queue_id };
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
        double took = now_ms() - t0;
        cr_expect_lt(took, 1000.0, "DESTROY_QUEUE took %.1f ms", took);
        cr_expect_eq(t_ioctl(&r.c, AMDKFD_IOC_DESTROY_QUEUE, &d), -EINVAL, "gone");
        cr_expect_eq(t_wait1(&r.c, r.hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "cancelled, not failed");
        cr_expect_eq(t_wait1(&r.c, r.done, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "and never completed");
        /* The queue's buffers are free to unmap now. */
        cr_expect_eq(t_unmap(&r.c, r.q.q.ring.handle), 0);
        t_close(&r.c, true);
}

static void *destroy_from_thread(void *userdata) {
        Rig *r = userdata;
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = r->q.q.queue_id };
        return (void *) (intptr_t) t_ioctl(&r->c, AMDKFD_IOC_DESTROY_QUEUE, &d);
}

Test(sim_cp, two_destroys_of_a_running_queue) {
        static const uint32_t code[] = { 0xbf82ffff };
        Rig r;
        rig_open(&r, 4096);
        TestBo prog = cp_code(&r.c, code, ELEMENTSOF(code));
        pm4_dispatch_raw(&r.p, prog.va, 0, NULL, 0, 1000, 256);
        t_submit_pm4_buf(&r.q, &r.p);
        usleep(30000);
        pthread_t t1, t2;
        void *r1, *r2;
        cr_assert_eq(pthread_create(&t1, NULL, destroy_from_thread, &r), 0);
        cr_assert_eq(pthread_create(&t2, NULL, destroy_from_thread, &r), 0);
        pthread_join(t1, &r1);
        pthread_join(t2, &r2);
        int a = (int) (intptr_t) r1, b = (int) (intptr_t) r2;
        cr_expect((a == 0 && b == -EINVAL) || (a == -EINVAL && b == 0), "one destroy wins: %d %d", a, b);
        t_close(&r.c, true);
}

Test(sim_cp, device_teardown_during_a_long_dispatch) {
        static const uint32_t code[] = { 0xbf82ffff };
        Rig r, s;
        rig_open(&r, 4096);
        rig_open_dev(&s, r.c.dev, 4096, true);
        TestBo prog = cp_code(&r.c, code, ELEMENTSOF(code));
        TestBo prog2 = cp_code(&s.c, code, ELEMENTSOF(code));
        pm4_dispatch_raw(&r.p, prog.va, 0, NULL, 0, 1000, 256);
        pm4_dispatch_raw(&s.p, prog2.va, 0, NULL, 0, 1000, 256);
        t_submit_pm4_buf(&r.q, &r.p);
        t_submit_pm4_buf(&s.q, &s.p);
        usleep(30000);
        double t0 = now_ms();
        sim_device_free(r.c.dev);
        cr_expect_lt(now_ms() - t0, 2000.0, "teardown cancels the dispatches");
}

/* The kernel loops storing to a buffer that the test unmaps and frees while
 * the dispatch runs: the dispatch keeps the memory it started with (no
 * use-after-free), and ends on its budget. */
Test(sim_cp, free_memory_under_a_running_dispatch) {
        /* v_mov_b32 v1, 0; loop: global_store_dword v1, v0, s[0:1]; s_branch loop */
        static const uint32_t code[] = { 0x7e020280, 0xdc708000, 0x00000001, 0xbf82fffd };
        SimDevice *dev;
        SimOptions o = { .max_dispatch_wave_instructions = 3000000 };
        cr_assert_eq(sim_device_new(&o, &dev), 0);
        Rig r;
        rig_open_dev(&r, dev, 4096, true);
        TestBo prog = cp_code(&r.c, code, ELEMENTSOF(code));
        TestBo victim = t_bo(&r.c, 65536, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t user[2] = { LO(victim.va), HI(victim.va) };
        pm4_dispatch_raw(&r.p, prog.va, 0, user, 2, 1, 64);
        uint32_t v[] = { 1 };
        pm4_write_data(&r.p, 5, victim.va + 64, v, 1);
        t_submit_pm4_buf(&r.q, &r.p);
        usleep(10000);
        cr_assert_eq(t_unmap(&r.c, victim.handle), 0);
        cr_assert_eq(t_free(&r.c, victim.handle), 0);
        munmap(victim.cpu, victim.size);
        char text[256];
        rig_expect_stopped(&r, text, sizeof text);
        cr_expect(strstr(text, "budget"), "the dispatch ended on its budget: %s", text);
        t_close(&r.c, true);
}

Test(sim_cp, release_mem_without_eop_buffer) {
        Rig r;
        rig_open_dev(&r, NULL, 4096, false);
        TestBo buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t v[] = { 5 };
        pm4_write_data(&r.p, 5, buf.va, v, 1);
        uint64_t at = t_wptr_dw(&r.q) + r.p.n;
        pm4_release_mem(&r.p, 1, 0, buf.va + 8, 6, 0);
        t_submit_pm4_buf(&r.q, &r.p);
        char text[256];
        rig_expect_stopped(&r, text, sizeof text);
        cr_expect(strstr(text, "EOP"), "text: %s", text);
        cr_expect_eq(((uint32_t *) buf.cpu)[0], 5u, "WRITE_DATA needs no EOP buffer");
        cr_expect_eq(((uint32_t *) buf.cpu)[2], 0u);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, at));
        t_close(&r.c, true);
}

typedef struct Bad {
        uint32_t dw[9];
        size_t n;
        const char *reason;
} Bad;

Test(sim_cp, malformed_packets_stop_the_queue) {
        static const Bad cases[] = {
                { { 0x80000000 }, 1, "type-2" },
                { { 0xC0000100, 0 }, 2, "unknown PM4 opcode" },
                { { 0xC0017600, 0x400, 1 }, 3, "SH window" },
                { { 0xC0054900, 0x514, 1u << 29, 0x2000, 0, 1, 0 }, 7, "COUNT 5" },
                { { 0xC0053C00, 5u | (1u << 4), 0x4002, 0, 1, ~0u, 4 }, 7, "dword aligned" },
                { { 0xC0031501, 1, 1, 1, 0x8005 }, 5, "predicated" },
                { { 0xC0031500, 1, 1, 1, 0x8004 }, 5, "COMPUTE_SHADER_EN" },
                { { 0xC0031500, 1, 1, 1, 0x8027 }, 5, "USE_THREAD_DIMENSIONS" },
                { { 0xC0033700, 5u << 8 | 1u << 30, 0x1000, 0, 1 }, 5, "ENGINE_SEL" },
                { { 0xC0053C00, 5u | (1u << 4) | (1u << 8), 0x4000, 0, 1, ~0u, 4 }, 7, "PFP" },
                /* ATOMIC_MEM: a 64-bit op on a dword boundary, a float op, a
                 * loop on an add, a reserved bit, a short COUNT. */
                { { 0xC0071E00, 0x2F, 0x4004, 0, ~0u, ~0u, 0, 0, 0 }, 9, "aligned" },
                { { 0xC0071E00, 0x21, 0x4000, 0, 1, 0, 0, 0, 0 }, 9, "not an integer" },
                { { 0xC0071E00, 0x2F | 1u << 8, 0x4000, 0, 1, 0, 0, 0, 0 }, 9, "COMMAND 1" },
                { { 0xC0071E00, 0x2F | 1u << 7, 0x4000, 0, 1, 0, 0, 0, 0 }, 9, "reserved" },
                { { 0xC0061E00, 0x2F, 0x4000, 0, 1, 0, 0, 0 }, 8, "COUNT must be 7" },
                /* WAIT_REG_MEM64: misaligned, a register poll, the MES fields. */
                { { 0xC0079300, 3u | 1u << 4, 0x4004, 0, 0, 0, ~0u, ~0u, 4 }, 9, "qword aligned" },
                { { 0xC0079300, 3u, 0x4000, 0, 0, 0, ~0u, ~0u, 4 }, 9, "MEM_SPACE" },
                { { 0xC0079300, 3u | 1u << 4 | 1u << 24, 0x4000, 0, 0, 0, ~0u, ~0u, 4 }, 9, "MES" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Rig r;
                rig_open(&r, 4096);
                TestBo buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                uint32_t ok[] = { 1 };
                pm4_write_data(&r.p, 5, buf.va, ok, 1);
                rig_run(&r);
                uint64_t at = t_wptr_dw(&r.q);
                t_submit_pm4(&r.q, cases[i].dw, cases[i].n);
                uint32_t after[] = { 2 };
                pm4_write_data(&r.p, 5, buf.va, after, 1);
                t_submit_pm4_buf(&r.q, &r.p);
                char text[256], where[64];
                rig_expect_stopped(&r, text, sizeof text);
                cr_expect(strstr(text, cases[i].reason), "case %zu: \"%s\" does not mention \"%s\"", i, text,
                          cases[i].reason);
                snprintf(where, sizeof where, "header 0x%08x at ring dword 0x%llx", cases[i].dw[0], (unsigned long long) at);
                cr_expect(strstr(text, where), "case %zu: \"%s\" does not say \"%s\"", i, text, where);
                cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, at), "case %zu: stopped at the bad packet", i);
                cr_expect_eq(((uint32_t *) buf.cpu)[0], 1u, "case %zu: nothing after it ran", i);
                t_close(&r.c, true);
        }
}

Test(sim_cp, wptr_more_than_a_ring_ahead) {
        Rig r;
        rig_open(&r, 1024);
        __atomic_store_n(r.q.q.doorbell, 257, __ATOMIC_RELEASE); /* 256 dwords in the ring */
        char text[256];
        rig_expect_stopped(&r, text, sizeof text);
        cr_expect(strstr(text, "ring ahead"), "text: %s", text);
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, 0u));
        t_close(&r.c, true);
}

Test(sim_cp, exception_records_are_bounded_oldest_first) {
        Rig r;
        rig_open(&r, 4096);
        /* 20 exceptions on 20 queues in turn, each a different unknown opcode. */
        TestBo mark = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        for (uint32_t i = 0; i < 20; i++) {
                uint32_t v[] = { i + 1 };
                pm4_write_data(&r.p, 5, mark.va, v, 1);
                pm4_put(&r.p, PKT3(0x60 + i, 0));
                pm4_put(&r.p, 0);
                t_submit_pm4_buf(&r.q, &r.p);
                /* The engine decodes the bad packet in the pass that wrote
                 * the mark, under the device lock DESTROY_QUEUE takes. */
                for (int k = 0; k < 10000 && ((volatile uint32_t *) mark.cpu)[0] != i + 1; k++)
                        usleep(1000);
                cr_assert_eq(((volatile uint32_t *) mark.cpu)[0], i + 1);
                struct kfd_ioctl_destroy_queue_args d = { .queue_id = r.q.q.queue_id };
                cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
                *(uint64_t *) r.q.q.rptr.cpu = 0;
                struct kfd_ioctl_create_queue_args ca;
                cr_assert_eq(t_create_compute_queue_args(&r.c, &r.q, &ca), 0);
                r.q.q.queue_id = ca.queue_id;
                r.q.q.wptr_value = 0;
        }
        char text[256], want[32];
        for (uint32_t i = 4; i < 20; i++) {
                uint32_t qid;
                cr_assert_eq(r.c.ops->exception_info(r.c.ops->userdata, r.c.kfd, &qid, text, sizeof text), 0, "record %u", i);
                snprintf(want, sizeof want, "header 0x%08x", PKT3(0x60 + i, 0));
                cr_expect(strstr(text, want), "record %u is \"%s\"", i, text);
        }
        cr_expect_eq(r.c.ops->exception_info(r.c.ops->userdata, r.c.kfd, NULL, text, sizeof text), -ENOENT,
                     "16 kept, the 4 oldest dropped");
        /* Truncation to the caller's buffer. */
        uint32_t bad[] = { 0x80000000 };
        t_submit_pm4(&r.q, bad, 1);
        char small[8];
        cr_assert_eq(t_take_stop_record(&r.c, NULL, small, sizeof small), 0);
        cr_expect_eq(strlen(small), 7u);
        t_close(&r.c, true);
}

/* The SDMA engine's bad packets leave records too. */
Test(sim_cp, sdma_bad_packet_leaves_a_record) {
        Rig r;
        rig_open(&r, 4096);
        TestQueue sdma;
        t_sdma_queue(&r.c, &sdma, 4096);
        uint32_t bad[] = { 0x00000007, 0, 0, 0 }; /* SEM */
        t_submit(&sdma, bad, ELEMENTSOF(bad));
        char text[256];
        uint32_t qid;
        cr_assert_eq(t_take_stop_record(&r.c, &qid, text, sizeof text), 0);
        cr_expect_eq(t_wait1(&r.c, r.hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "no HW_EXCEPTION for a bad packet");
        cr_expect_eq(qid, sdma.queue_id);
        cr_expect(strstr(text, "SDMA") && strstr(text, "unknown SDMA opcode"), "text: %s", text);
        t_close(&r.c, true);
}

/* Counts the entries of out[0..n) that a dispatch has written (not poison). */
static unsigned written(const volatile uint32_t *out, unsigned n) {
        unsigned k = 0;

        for (unsigned i = 0; i < n; i++)
                k += out[i] != 0xFFFFFFFFu;
        return k;
}

static void collatz_launch(Rig *r, CpKernel *k, TestBo *in, TestBo *out, uint32_t n) {
        IsaArgs args = { 0 };
        TestBo argbo, scratch;
        CpLaunch l = { .grid = { n / 64, 1, 1 }, .wg = { 64, 1, 1 } };

        for (uint32_t i = 0; i < n; i++)
                ((uint32_t *) in->cpu)[i] = i + 1, ((uint32_t *) out->cpu)[i] = 0xFFFFFFFFu;
        isa_args_u64(&args, in->va), isa_args_u64(&args, out->va), isa_args_u32(&args, n);
        cp_prepare(&r->c, k, &args, &l, &argbo, &scratch);
        pm4_dispatch(&r->p, &k->k, &l);
        pm4_signal(&r->p, r->page.va, r->done);
        t_submit_pm4_buf(&r->q, &r->p);
}

/*
 * Pipe priority (sim-isa.h): queues of queue_priority 3 (CS_LOW) and 11
 * (CS_HIGH) land on two pipes. While the high queue's dispatch runs, the
 * low one's starts no workgroup: from the high dispatch's first results to
 * half of them, the low dispatch, started first, finishes only the
 * workgroups that were running then (at most one per thread) — counted in
 * its output, not timed. A look that came too late (the high dispatch had
 * ended: a loaded host) does not count; the run is repeated. With equal
 * priorities the two share the threads. Returns false if no look was in time.
 */
static bool pipe_priority_run(uint32_t lo_prio, uint32_t hi_prio, unsigned *ret_lo_during) {
        enum { LO_N = 64 * 4096, HI_N = 64 * 256 };
        bool in_time = false;
        Rig lo, hi;
        CpKernel klo, khi;

        rig_open(&lo, 65536);
        memset(&hi, 0, sizeof hi);
        t_open(&hi.c, lo.c.dev);
        hi.page = t_event_page(&hi.c, &hi.done);
        t_compute_queue_prio(&lo.c, &lo.q, 65536, true, lo_prio);
        t_compute_queue_prio(&hi.c, &hi.q, 65536, true, hi_prio);
        cp_kernel_load(&lo.c, "collatz.hsaco", "collatz", &klo);
        cp_kernel_load(&hi.c, "collatz.hsaco", "collatz", &khi);
        TestBo lin = t_bo(&lo.c, LO_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT), lout = t_bo(&lo.c, LO_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo hin = t_bo(&hi.c, HI_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT), hout = t_bo(&hi.c, HI_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);

        for (int attempt = 0; attempt < 5 && !in_time; attempt++) {
                collatz_launch(&lo, &klo, &lin, &lout, LO_N);
                while (written(lout.cpu, LO_N) < 64 * 8) /* the low dispatch runs */
                        usleep(100);
                collatz_launch(&hi, &khi, &hin, &hout, HI_N);
                while (written(hout.cpu, HI_N) == 0)
                        usleep(50);
                unsigned before = written(lout.cpu, LO_N);
                while (written(hout.cpu, HI_N) < HI_N / 2)
                        usleep(50);
                unsigned mid = written(lout.cpu, LO_N);
                in_time = written(hout.cpu, HI_N) < HI_N;
                *ret_lo_during = (mid - before + 63) / 64;
                cr_assert_eq(t_wait1(&hi.c, hi.done, 60000), KFD_IOC_WAIT_RESULT_COMPLETE, "the high dispatch completes");
                cr_assert_eq(written(hout.cpu, HI_N), HI_N);
                cr_assert_eq(t_wait1(&lo.c, lo.done, 120000), KFD_IOC_WAIT_RESULT_COMPLETE, "the low dispatch completes");
                cr_assert_eq(written(lout.cpu, LO_N), LO_N);
        }
        t_close(&hi.c, false);
        t_close(&lo.c, true);
        return in_time;
}

Test(sim_cp, a_high_priority_pipe_runs_its_workgroups_first) {
        unsigned lo_during = 0, shared_during = 0;
        unsigned threads = sim_isa_default_helpers() + 2; /* both pipes' CP threads and the helpers */

        cr_assert(pipe_priority_run(3, 11, &lo_during), "the high dispatch ended before the test looked, 5 times");
        (void) pipe_priority_run(7, 7, &shared_during);
        cr_log_info("low-priority workgroups completed during the first half of a high-priority dispatch: %u "
                    "(%u with equal priorities)", lo_during, shared_during);
        cr_assert_leq(lo_during, threads,
                      "%u workgroups of the low-priority dispatch ran while the high-priority one ran", lo_during);
}

/*
 * Queues run side by side (docs/simulator.md): a GPU's pipe CP hands a
 * dispatch to the SPI and goes on to its other queues, so a short dispatch
 * on any queue launches beside a long one. Five short dispatches, on queues
 * made after the long one's — in the pipes' round-robin one of them shares
 * its pipe — all complete while the long dispatch still runs. A look that
 * came too late (the long dispatch had ended: a loaded host) does not count;
 * the run is repeated.
 */
Test(sim_cp, a_short_dispatch_runs_beside_a_long_one_on_any_queue) {
        enum { LONG_N = 64 * 8192, SHORT_N = 64, SHORT = 5 };
        bool in_time = false;
        Rig lg, sh[SHORT];
        CpKernel klong, kshort[SHORT];
        TestBo sin[SHORT], sout[SHORT];

        rig_open(&lg, 65536);
        cp_kernel_load(&lg.c, "collatz.hsaco", "collatz", &klong);
        TestBo lin = t_bo(&lg.c, LONG_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo lout = t_bo(&lg.c, LONG_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        for (int i = 0; i < SHORT; i++) {
                rig_open_dev(&sh[i], lg.c.dev, 65536, true);
                cp_kernel_load(&sh[i].c, "collatz.hsaco", "collatz", &kshort[i]);
                sin[i] = t_bo(&sh[i].c, SHORT_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                sout[i] = t_bo(&sh[i].c, SHORT_N * 4, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        }
        for (int attempt = 0; attempt < 5 && !in_time; attempt++) {
                collatz_launch(&lg, &klong, &lin, &lout, LONG_N);
                while (written(lout.cpu, LONG_N) == 0) /* the long dispatch runs */
                        usleep(100);
                for (int i = 0; i < SHORT; i++)
                        collatz_launch(&sh[i], &kshort[i], &sin[i], &sout[i], SHORT_N);
                for (int i = 0; i < SHORT; i++)
                        cr_assert_eq(t_wait1(&sh[i].c, sh[i].done, 60000), KFD_IOC_WAIT_RESULT_COMPLETE,
                                     "short dispatch %d completes", i);
                in_time = written(lout.cpu, LONG_N) < LONG_N;
                cr_assert_eq(t_wait1(&lg.c, lg.done, 120000), KFD_IOC_WAIT_RESULT_COMPLETE, "the long dispatch completes");
                cr_assert_eq(written(lout.cpu, LONG_N), LONG_N);
                for (int i = 0; i < SHORT; i++)
                        cr_assert_eq(written(sout[i].cpu, SHORT_N), SHORT_N);
        }
        cr_assert(in_time, "the long dispatch had always ended before the short ones, 5 times");
        for (int i = 0; i < SHORT; i++)
                t_close(&sh[i].c, false);
        t_close(&lg.c, true);
}

/* What the daemon's AQL translation emits for a completion signal and a
 * barrier-AND (rocm-facts §3): ATOMIC_MEM ADD -1 on the 64-bit signal value,
 * and WAIT_REG_MEM64 until a dependency's 64-bit value is 0. A 32-bit wait on
 * the low half would pass at 0x100000000; the 64-bit one does not. */
Test(sim_cp, atomic_mem_and_wait_reg_mem64) {
        Rig r;
        rig_open(&r, 4096);
        TestBo sig = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint64_t *v = sig.cpu;
        v[1] = 0x100000001ull;
        v[2] = 7;
        v[3] = 9;
        pm4_atomic_mem(&r.p, 0x2F, 0, sig.va + 8, ~0ull, 0);    /* ADD_RTN_64 -1, single pass */
        pm4_atomic_mem(&r.p, 0x30, 2, sig.va + 16, 3, 0);       /* SUB_RTN_64, write confirm */
        pm4_atomic_mem(&r.p, 0x28, 0, sig.va + 24, 5, 8);       /* CMPSWAP_RTN_64: compare fails */
        rig_run(&r);
        cr_expect_eq(v[1], 0x100000000ull, "64-bit decrement borrows across the halves");
        cr_expect_eq(v[2], 4u);
        cr_expect_eq(v[3], 9u, "a failed compare-swap leaves memory alone, and the queue goes on");

        /* Barrier-AND on v[1] (0x100000000): waits although the low half is 0. */
        uint32_t one[] = { 1 };
        pm4_wait_mem64(&r.p, 3, sig.va + 8, 0, ~0ull);
        uint64_t wait_at = t_wptr_dw(&r.q);
        pm4_write_data(&r.p, 5, sig.va + 64, one, 1);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_expect_eq(t_wait1(&r.c, r.done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "0x100000000 != 0: still waiting");
        cr_expect_eq(((uint32_t *) sig.cpu)[16], 0u, "nothing after the wait ran");
        cr_expect_eq(t_rptr_dw(&r.q), t_rptr_at(&r.q, wait_at), "rptr stays at the WAIT_REG_MEM64 packet");
        __atomic_store_n(&v[1], 0, __ATOMIC_RELEASE);
        cr_assert_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(((uint32_t *) sig.cpu)[16], 1u);

        /* COMMAND 1: a compare-swap retried until the CPU makes it hold. */
        v[4] = 1;
        pm4_atomic_mem(&r.p, 0x28, 1, sig.va + 32, 42, 2);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_expect_eq(t_wait1(&r.c, r.done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "1 != 2: still looping");
        __atomic_store_n(&v[4], 2, __ATOMIC_RELEASE);
        cr_assert_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(v[4], 42u);
        t_close(&r.c, true);
}

Test(sim_cp, atomic_mem_outside_the_vm_faults) {
        Rig r;
        rig_open(&r, 4096);
        uint64_t hole = t_reserve_va(65536);
        pm4_atomic_mem(&r.p, 0x2F, 0, hole + 0x3010, ~0ull, 0);
        t_submit_pm4_buf(&r.q, &r.p);
        rig_expect_fault(&r, hole + 0x3000);
        Rig w;
        rig_open(&w, 4096);
        pm4_wait_mem64(&w.p, 3, hole + 0x1008, 0, ~0ull);
        t_submit_pm4_buf(&w.q, &w.p);
        rig_expect_fault(&w, hole + 0x1000);
        t_close(&w.c, true);
        t_close(&r.c, true);
}

/* A rig on the device's GPU at index (SimOptions.n_gpus), in a process of
 * its own: its VM, event page and compute queue are that GPU's. */
static void rig_open_gpu(Rig *r, SimDevice *dev, unsigned index, int *ret_render0) {
        TestCtx g;

        memset(r, 0, sizeof *r);
        t_open(&r->c, dev);
        *ret_render0 = -EBADF;
        if (index > 0) {
                *ret_render0 = r->c.render;
                t_on_gpu(&r->c, index, &g);
                r->c = g;
        }
        r->page = t_event_page(&r->c, &r->done);
        r->mem_ev = t_event(&r->c, KFD_IOC_EVENT_MEMORY, true, 0);
        r->hw_ev = t_event(&r->c, KFD_IOC_EVENT_HW_EXCEPTION, true, 0);
        t_compute_queue(&r->c, &r->q, 65536, true);
}

/* Two GPUs (SimOptions.n_gpus): GPU 0's CP runs an endless kernel while
 * GPU 1's CP runs vector_add to its end; the endless one never completes,
 * and goes with its queue. */
Test(sim_cp, dispatch_on_each_of_two_gpus) {
        static const uint32_t endless[] = { 0xbf82ffff }; /* s_branch -1 */
        SimOptions o = { .n_gpus = 2 };
        SimDevice *dev;
        Rig r0, r1;
        int render0[2];

        cr_assert_eq(sim_device_new(&o, &dev), 0);
        rig_open_gpu(&r0, dev, 0, &render0[0]);
        rig_open_gpu(&r1, dev, 1, &render0[1]);
        cr_assert_neq(r0.c.gpu_id, r1.c.gpu_id);

        TestBo prog = cp_code(&r0.c, endless, ELEMENTSOF(endless));
        pm4_dispatch_raw(&r0.p, prog.va, 0, NULL, 0, 1000, 256);
        pm4_signal(&r0.p, r0.page.va, r0.done);
        t_submit_pm4_buf(&r0.q, &r0.p);

        CpKernel k;
        cp_kernel_load(&r1.c, "vector-add.hsaco", "vector_add", &k);
        TestBo a = t_bo(&r1.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT), b = t_bo(&r1.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT),
               cc = t_bo(&r1.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        float *x = a.cpu, *y = b.cpu, *z = cc.cpu;
        for (uint32_t i = 0; i < 1024; i++)
                x[i] = (float) i, y[i] = 0.25f, z[i] = -1.0f;
        IsaArgs args = { 0 };
        isa_args_u64(&args, a.va), isa_args_u64(&args, b.va), isa_args_u64(&args, cc.va), isa_args_u32(&args, 1024);
        CpLaunch l = { .grid = { 16, 1, 1 }, .wg = { 64, 1, 1 } };
        TestBo argbo, scratch;
        cp_prepare(&r1.c, &k, &args, &l, &argbo, &scratch);
        pm4_dispatch(&r1.p, &k.k, &l);
        rig_run(&r1);
        for (uint32_t i = 0; i < 1024; i++)
                cr_assert_eq(z[i], (float) i + 0.25f, "i=%u", i);
        SimGpuStats st;
        cr_assert_eq(sim_device_get_gpu_stats(dev, 1, &st), 0);
        cr_expect_eq(st.cp_engines, 1u, "GPU 1's queue on a CP engine of GPU 1");
        cr_assert_eq(sim_device_get_gpu_stats(dev, 0, &st), 0);
        cr_expect_eq(st.cp_engines, 1u);

        cr_expect_eq(t_wait1(&r0.c, r0.done, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "GPU 0's endless kernel runs on");
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = r0.q.q.queue_id };
        cr_assert_eq(t_ioctl(&r0.c, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
        cr_expect_eq(t_wait1(&r0.c, r0.hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "cancelled, not failed");
        cr_expect_eq(t_wait1(&r1.c, r1.mem_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT);
        for (unsigned i = 0; i < 2; i++) {
                Rig *r = i ? &r1 : &r0;
                if (render0[i] >= 0)
                        cr_expect_eq(r->c.ops->close(r->c.ops->userdata, render0[i]), 0);
                t_close(&r->c, false);
        }
        sim_device_free(dev);
}
