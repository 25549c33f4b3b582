/* SPDX-License-Identifier: MIT */
/*
 * The CPU priority of the simulator's CP engine threads (sim-engine.c,
 * engine_apply()), on a PM4 compute queue through the KfdOps table only:
 * after it idled a CP engine runs at the process's priority, so that the
 * next doorbell wakes it at once next to CPU-bound threads; a busy streak
 * longer than its first passes goes 10 nice steps down until the engine
 * idles again. The SDMA engines stay 10 steps down but for bulk moves
 * (test-sim-sdma.c).
 */
#include <criterion/criterion.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cp-test.h"

typedef struct Rig {
        TestCtx c;
        TestBo page;
        uint32_t done; /* SIGNAL, auto-reset: completion */
        TestComputeQueue q;
        Pm4 p;
} Rig;

/* More packets than the passes an engine runs at the process's priority
 * after it idled hold (PROMPT_PASSES of 64 packets: sim-engine.c, sim-cp.c). */
#define STREAK_NOPS 1200u

/* Waits (at most 10 s) until the CP reports it has read up to dword dw. */
static void wait_rptr(Rig *r, uint64_t dw) {
        for (int i = 0; i < 10000 && t_rptr_dw(&r->q) != t_rptr_at(&r->q, dw); i++)
                usleep(1000);
        cr_assert_eq(t_rptr_dw(&r->q), t_rptr_at(&r->q, dw), "the CP did not get to dword %llu of its ring",
                     (unsigned long long) dw);
}

Test(sim_engine, prompt_after_idle_and_lower_when_kept_busy) {
        int base = getpriority(PRIO_PROCESS, 0), low = base + 10 > 19 ? 19 : base + 10;
        unsigned idle_low;
        Rig r = {};

        if (low == base)
                cr_skip_test("this process runs at nice %d: its engines cannot go lower", base);
        if (!t_can_raise_priority(base))
                cr_skip_test("this process may not raise a thread's priority back (no CAP_SYS_NICE, RLIMIT_NICE too low)");
        t_open(&r.c, NULL);
        r.page = t_event_page(&r.c, &r.done);
        t_compute_queue(&r.c, &r.q, 65536, true);
        TestBo mem = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint32_t *flag = mem.cpu;

        /* A job: the engine runs it and idles at the process's priority. */
        uint32_t one[] = { 1 };
        pm4_write_data(&r.p, 5, mem.va + 64, one, 1);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        cr_assert_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE, "completion event");
        /* The SDMA engines are there already, 10 steps down — each once it
         * has run (it goes down at its start, which on a loaded machine can
         * come after this job): wait for all of them, so that the count
         * below is the CP engine's alone. */
        SimGpuStats gs;
        cr_assert_eq(sim_device_get_gpu_stats(r.c.dev, 0, &gs), 0);
        idle_low = t_wait_threads_at_nice(low, gs.sdma_engines);
        cr_assert_eq(idle_low, gs.sdma_engines, "the %u idle SDMA engines should be 10 nice steps down", gs.sdma_engines);

        /* A busy streak, then a wait for the flag: the engine went down. */
        for (unsigned i = 0; i < STREAK_NOPS; i++) {
                pm4_put(&r.p, PKT3(OP_NOP, 0));
                pm4_put(&r.p, i);
        }
        uint64_t wait_at = t_wptr_dw(&r.q) + r.p.n;
        pm4_wait_mem(&r.p, 3, mem.va, 1, 0xFFFFFFFFu);
        pm4_signal(&r.p, r.page.va, r.done);
        t_submit_pm4_buf(&r.q, &r.p);
        wait_rptr(&r, wait_at);
        cr_expect_eq(t_threads_at_nice(low), idle_low + 1, "an idle CP engine sat 10 nice steps down, or one kept "
                     "busy past its prompt passes stayed at nice %d", base);

        /* The wait passes, the queue idles: back up before it sleeps. */
        *flag = 1;
        cr_assert_eq(t_wait1(&r.c, r.done, 10000), KFD_IOC_WAIT_RESULT_COMPLETE, "completion event");
        cr_expect_eq(t_wait_threads_at_nice(low, idle_low), idle_low, "an engine that idled again stayed 10 nice steps down");
        t_close(&r.c, true);
}
