/* SPDX-License-Identifier: MIT */
/*
 * When the interpreter's pool (sim-isa-pool.c) wakes its sleeping helpers: a
 * wake-up costs CPU time of its own, as much as a short dispatch does in all,
 * so a dispatch wakes helpers only once its caller has run
 * SIM_ISA_WAKE_AFTER wave-instructions in it with workgroups left, and only
 * as many as it has workgroups left for; a dispatch's end wakes none. Counted
 * with sim_isa_pool_wakeups(), which does not depend on the machine's load.
 */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "isa-helper.h"

#define HELPERS 3u

static SimIsaPool *pool;

/* A pool whose helpers all sleep: one that has not gone to sleep yet would
 * join a listed dispatch without being woken. */
static void pool_start(void) {
        int r = sim_isa_pool_new(HELPERS, &pool);
        cr_assert_eq(r, 0, "sim_isa_pool_new: %s", strerror(-r));
        for (unsigned i = 0; i < 10000 && sim_isa_pool_sleeping(pool) < HELPERS; i++)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        cr_assert_eq(sim_isa_pool_sleeping(pool), HELPERS, "the helpers did not go to sleep");
}

static void pool_stop(void) {
        pool = sim_isa_pool_free(pool);
}

/* Collatz steps of items inputs (1, 2, .. period, 1, 2, ..) in workgroups of
 * wg_size work-items, `times` times over; every result checked against the
 * host's count. */
static void run_collatz(uint32_t items, uint32_t period, uint32_t wg_size, unsigned times, uint64_t *ret_waves) {
        IsaMem m;
        IsaKernel k;
        uint32_t *in, *steps, grid[3] = { (items + wg_size - 1) / wg_size, 1, 1 }, wg[3] = { wg_size, 1, 1 };
        SimIsaResult res;

        isa_mem_init(&m);
        m.pool = pool;
        int r = isa_kernel_load(&m, isa_kernel_path("collatz.hsaco"), "collatz", &k);
        cr_assert_eq(r, 0, "loading collatz: %s", strerror(-r));
        uint64_t iv = isa_mem_alloc(&m, 4ull * items, (void **) &in), sv = isa_mem_alloc(&m, 4ull * items, (void **) &steps);
        for (uint32_t i = 0; i < items; i++)
                in[i] = i % period + 1;
        IsaArgs a = { 0 };
        isa_args_u64(&a, iv), isa_args_u64(&a, sv), isa_args_u32(&a, items);
        unsigned regions = m.n;
        *ret_waves = 0;
        for (unsigned t = 0; t < times; t++) {
                isa_mem_release(&m, regions);
                memset(steps, 0, 4ull * items);
                r = isa_launch(&m, &k, grid, wg, &a, 0, &res);
                cr_assert_eq(r, 0, "dispatch %u: %s", t, res.message);
                *ret_waves += res.wave_instructions;
                for (uint32_t i = 0; i < items; i++) {
                        uint32_t v = i % period + 1, s = 0;
                        for (; v > 1; s++)
                                v = v & 1 ? 3 * v + 1 : v / 2;
                        cr_assert_eq(steps[i], s, "dispatch %u: steps[%u] = %u, not %u", t, i, steps[i], s);
                }
        }
        isa_mem_fini(&m);
}

/* Dispatches of one workgroup are never open to helpers; their end used to
 * wake every sleeping helper all the same. */
Test(isa_wake, one_workgroup_dispatches_wake_no_helper, .init = pool_start, .fini = pool_stop) {
        uint64_t waves;

        run_collatz(64, 64, 64, 50, &waves);
        cr_assert_eq(sim_isa_pool_wakeups(pool), 0, "50 dispatches of one workgroup woke helpers %llu times",
                     (unsigned long long) sim_isa_pool_wakeups(pool));
}

/* Dispatches of 4 workgroups that their caller runs in fewer wave-instructions
 * than SIM_ISA_WAKE_AFTER: waking a helper would cost more than it gains. */
Test(isa_wake, short_dispatches_wake_no_helper, .init = pool_start, .fini = pool_stop) {
        uint64_t waves;

        run_collatz(128, 4, 32, 50, &waves);
        cr_assert_lt(waves / 50, SIM_ISA_WAKE_AFTER, "a dispatch ran %llu wave-instructions",
                     (unsigned long long) (waves / 50));
        cr_assert_eq(sim_isa_pool_wakeups(pool), 0, "50 short dispatches woke helpers %llu times",
                     (unsigned long long) sim_isa_pool_wakeups(pool));
}

/* A dispatch of two long workgroups: once its caller has run
 * SIM_ISA_WAKE_AFTER wave-instructions in the first, one helper is woken for
 * the second, not all three (and none again at its end). */
Test(isa_wake, a_long_dispatch_wakes_one_helper_per_workgroup_left, .init = pool_start, .fini = pool_stop) {
        uint64_t waves, n = 0;

        run_collatz(2048, 2048, 1024, 1, &waves);
        cr_assert_gt(waves / 2, SIM_ISA_WAKE_AFTER, "a workgroup ran %llu wave-instructions",
                     (unsigned long long) (waves / 2));
        /* The helper counts its wake-up when it gets the CPU, maybe after the
         * dispatch has ended. */
        for (unsigned i = 0; i < 1000 && (n = sim_isa_pool_wakeups(pool)) == 0; i++)
                nanosleep(&(struct timespec) { .tv_nsec = 10000000 }, NULL);
        nanosleep(&(struct timespec) { .tv_nsec = 50000000 }, NULL);
        n = sim_isa_pool_wakeups(pool);
        cr_assert_eq(n, 1, "helpers woke %llu times for one workgroup left", (unsigned long long) n);
}
