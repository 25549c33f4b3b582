/* SPDX-License-Identifier: MIT */
/*
 * The interpreter's pool (sim-isa-pool.c): a corpus of kernels run serially
 * and with helper threads, many workgroups each, must leave the same bytes in
 * every buffer and count the same instructions; a fault, the budget and a
 * cancellation end a parallel dispatch as they end a serial one. The pool has
 * more helpers than the machine has cores, so that workgroups interleave.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isa-helper.h"

#define HELPERS 3u
#define ITEMS 6000u

static SimIsaPool *pool;

static void pool_start(void) {
        int r = sim_isa_pool_new(HELPERS, &pool);
        cr_assert_eq(r, 0, "sim_isa_pool_new: %s", strerror(-r));
        cr_assert_eq(sim_isa_pool_threads(pool), HELPERS);
        /* Helpers join every dispatch at once, however short (test-isa-wake
         * tests when they are woken by default). */
        sim_isa_pool_set_wake_after(pool, 0);
}

static void pool_stop(void) {
        pool = sim_isa_pool_free(pool);
}

/*
 * A kernel's arguments, one letter each: u = a buffer of small unsigned
 * integers (1..1000), f = of floats, d = of doubles, z = a zeroed buffer
 * (every buffer holds 128 bytes per work-item), n = the uint ITEMS,
 * a = the float 2.5. Which buffers a kernel writes does not matter: every
 * byte of every region is compared.
 */
typedef struct Case {
        const char *file, *name, *args;
        uint32_t wg;            /* 1-D workgroup size; 0 = the 2-D matmul / 3-D index shapes */
} Case;

static const Case corpus[] = {
        { "vector-add.hsaco", "vector_add", "ffzn", 256 },
        { "saxpy.hsaco", "saxpy", "affn", 128 },
        { "collatz.hsaco", "collatz", "uzn", 64 },
        { "divergent.hsaco", "divergent", "uzn", 96 },
        { "reduce-lds.hsaco", "reduce_lds", "uzn", 256 },
        { "atomics.hsaco", "atomics", "uzzzzzn", 64 },
        { "private-array.hsaco", "private_array", "uzn", 128 },
        { "int64-math.hsaco", "int64_math", "uuzn", 64 },
        { "float-math.hsaco", "float_math", "ffzn", 32 },
        { "int-builtins.hsaco", "int_builtins", "uuzn", 256 },
        { "divide.hsaco", "divide", "ffzddzn", 64 },
        { "cross-lane.hsaco", "cross_lane", "uz", 64 },
        { "generic-ptr.hsaco", "generic_ptr", "uz", 64 },
        { "bytes-shorts.hsaco", "bytes_shorts", "uuuzzzzn", 128 },
        { "float-builtins.hsaco", "float_builtins", "ffzzn", 64 },
        { "matmul-tiled.hsaco", "matmul_tiled", NULL, 0 },
        { "index-3d.hsaco", "index_3d", NULL, 0 },
};

static uint32_t rng;
static uint32_t rnd(void) {
        rng = rng * 1664525u + 1013904223u;
        return rng >> 8;
}

static uint64_t fill(IsaMem *m, char kind) {
        uint8_t *p;
        uint64_t va = isa_mem_alloc(m, 128ull * ITEMS, (void **) &p);

        for (uint32_t i = 0; i < 32 * ITEMS; i++) {
                uint32_t u = 1 + rnd() % 1000;
                float f = (float) (rnd() % 2000) / 16.0f - 60.0f;
                double d = (double) (rnd() % 4000) / 64.0 - 30.0;
                if (kind == 'u')
                        memcpy(p + 4 * i, &u, 4);
                else if (kind == 'f')
                        memcpy(p + 4 * i, &f, 4);
                else if (kind == 'd' && i < 16 * ITEMS)
                        memcpy(p + 8 * i, &d, 8);
        }
        return va;
}

/* Loads and runs one case in m (with m->pool as set); the same seed gives the
 * same memory. Returns isa_launch()'s value. */
static int run_case(IsaMem *m, const Case *c, SimIsaResult *res) {
        IsaKernel k;
        IsaArgs a = { 0 };
        uint32_t grid[3] = { 1, 1, 1 }, wg[3] = { 1, 1, 1 };

        rng = 12345;
        int r = isa_kernel_load(m, isa_kernel_path(c->file), c->name, &k);
        cr_assert_eq(r, 0, "loading %s: %s", c->file, strerror(-r));
        if (!strcmp(c->name, "matmul_tiled")) {
                uint32_t n = 80; /* not a multiple of the 16x16 tile */
                isa_args_u64(&a, fill(m, 'f')), isa_args_u64(&a, fill(m, 'f')), isa_args_u64(&a, fill(m, 'z'));
                isa_args_u32(&a, n), isa_args_u32(&a, n), isa_args_u32(&a, n);
                grid[0] = grid[1] = (n + 15) / 16, wg[0] = wg[1] = 16;
        } else if (!strcmp(c->name, "index_3d")) {
                isa_args_u64(&a, fill(m, 'z'));
                isa_args_u32(&a, 19), isa_args_u32(&a, 13), isa_args_u32(&a, 11);
                grid[0] = 5, grid[1] = 4, grid[2] = 6, wg[0] = 4, wg[1] = 4, wg[2] = 2;
        } else {
                for (const char *p = c->args; *p; p++)
                        if (*p == 'n')
                                isa_args_u32(&a, ITEMS);
                        else if (*p == 'a')
                                isa_args_f32(&a, 2.5f);
                        else
                                isa_args_u64(&a, fill(m, *p));
                grid[0] = (ITEMS + c->wg - 1) / c->wg, wg[0] = c->wg;
        }
        return isa_launch(m, &k, grid, wg, &a, 0, res);
}

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

/* atomics.cl: which slot atomic_inc hands each work-item, and which
 * work-item's atomic_cmpxchg wins, depend on the order the workgroups reach
 * them, on the GPU as here: the slots are compared as a sorted list, the
 * winner must be one of the work-items. Regions: code, in, hist, counter,
 * slots, minmax, sub. */
static void canonicalize_atomics(IsaMem *m) {
        uint32_t *slots = (uint32_t *) m->regions[4].host, *sub = (uint32_t *) m->regions[6].host;

        qsort(slots, ITEMS, 4, cmp_u32);
        cr_assert(sub[2] >= 1 && sub[2] <= ITEMS, "atomic_cmpxchg stored %u", sub[2]);
        sub[2] = 0;
}

Test(isa_parallel, corpus_bytes_match_the_serial_run, .init = pool_start, .fini = pool_stop) {
        for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++) {
                const Case *c = &corpus[i];
                IsaMem s, p;
                SimIsaResult rs, rp;

                isa_mem_init(&s);
                isa_mem_init(&p);
                p.pool = pool;
                cr_assert_eq(run_case(&s, c, &rs), 0, "%s serial: %s", c->name, rs.message);
                cr_assert_eq(run_case(&p, c, &rp), 0, "%s parallel: %s", c->name, rp.message);
                cr_assert_eq(rs.wave_instructions, rp.wave_instructions, "%s: %llu != %llu wave instructions", c->name,
                             (unsigned long long) rs.wave_instructions, (unsigned long long) rp.wave_instructions);
                cr_assert_eq(rs.lane_instructions, rp.lane_instructions, "%s", c->name);
                if (!strcmp(c->name, "atomics")) {
                        canonicalize_atomics(&s);
                        canonicalize_atomics(&p);
                }
                cr_assert_eq(s.n, p.n);
                for (unsigned r = 0; r < s.n; r++) {
                        cr_assert_eq(s.regions[r].va, p.regions[r].va);
                        /* The scratch ring is the one region that differs: a workgroup's
                         * worth per thread, and its contents depend on which thread ran what. */
                        if (s.regions[r].size * (HELPERS + 1) == p.regions[r].size)
                                continue;
                        cr_assert_eq(s.regions[r].size, p.regions[r].size, "%s region %u", c->name, r);
                        cr_assert_eq(memcmp(s.regions[r].host, p.regions[r].host, s.regions[r].size), 0,
                                     "%s: region %u at 0x%llx differs between the serial and the parallel run", c->name, r,
                                     (unsigned long long) s.regions[r].va);
                }
                isa_mem_fini(&s);
                isa_mem_fini(&p);
        }
}

/* Every work-item of 64 workgroups bumps one counter 2000 times: a
 * read-modify-write that is not atomic across threads loses updates. */
Test(isa_parallel, global_atomics_stay_atomic_across_threads, .init = pool_start, .fini = pool_stop) {
        for (unsigned round = 0; round < 3; round++) {
                IsaMem p;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint32_t grid[3] = { 64, 1, 1 }, wg[3] = { 64, 1, 1 }, *counter;

                isa_mem_init(&p);
                p.pool = pool;
                cr_assert_eq(isa_kernel_load(&p, isa_kernel_path("atomic-storm.hsaco"), "atomic_storm", &k), 0);
                isa_args_u64(&a, isa_mem_alloc(&p, 8, (void **) &counter)), isa_args_u32(&a, 2000);
                cr_assert_eq(isa_launch(&p, &k, grid, wg, &a, 0, &res), 0, "%s", res.message);
                cr_assert_eq(counter[0], 64 * 64 * 2000, "round %u: %u of %u atomic_incs", round, counter[0], 64 * 64 * 2000);
                cr_assert_eq(counter[1], 64 * 64 * (64 * 64 - 1) / 2, "round %u: atomic_add", round);
                isa_mem_fini(&p);
        }
}

/* poke.cl reads and writes n words from addr: with addr 4 KiB below the end
 * of a buffer, every workgroup from the fourth on faults, each at its own
 * address. The dispatch reports the first in the serial order, whichever
 * thread got to its fault first. */
static uint64_t run_poke(IsaMem *m, SimIsaResult *res) {
        IsaKernel k;
        IsaArgs a = { 0 };
        uint32_t grid[3] = { 64, 1, 1 }, wg[3] = { 256, 1, 1 }, n = 64 * 256;

        int r = isa_kernel_load(m, isa_kernel_path("poke.hsaco"), "poke", &k);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        uint64_t buf = isa_mem_alloc(m, 64 * 1024, NULL), out = isa_mem_alloc(m, 4ull * n, NULL);
        isa_args_u64(&a, buf + 60 * 1024), isa_args_u32(&a, 7), isa_args_u32(&a, n), isa_args_u64(&a, out);
        cr_assert_eq(isa_launch(m, &k, grid, wg, &a, 0, res), -EFAULT);
        return buf + 64 * 1024;
}

Test(isa_parallel, first_fault_in_workgroup_order_is_reported, .init = pool_start, .fini = pool_stop) {
        IsaMem s;
        SimIsaResult rs;

        isa_mem_init(&s);
        uint64_t end = run_poke(&s, &rs);
        cr_assert_eq(rs.fault_va, end, "fault at 0x%llx", (unsigned long long) rs.fault_va);
        for (unsigned round = 0; round < 20; round++) {
                IsaMem p;
                SimIsaResult rp;
                isa_mem_init(&p);
                p.pool = pool;
                run_poke(&p, &rp);
                cr_assert_eq(rp.fault_va, rs.fault_va, "round %u: fault at 0x%llx, the serial run's at 0x%llx", round,
                             (unsigned long long) rp.fault_va, (unsigned long long) rs.fault_va);
                cr_assert_eq(rp.fault_pc, rs.fault_pc);
                cr_assert_str_eq(rp.message, rs.message);
                isa_mem_fini(&p);
        }
        isa_mem_fini(&s);
}

static int run_collatz(IsaMem *m, uint64_t budget, SimIsaResult *res) {
        IsaKernel k;
        IsaArgs a = { 0 };
        uint32_t grid[3] = { ITEMS / 64, 1, 1 }, wg[3] = { 64, 1, 1 };
        uint32_t *in;

        rng = 99;
        int r = isa_kernel_load(m, isa_kernel_path("collatz.hsaco"), "collatz", &k);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        uint64_t iv = isa_mem_alloc(m, 4ull * ITEMS, (void **) &in), ov = isa_mem_alloc(m, 4ull * ITEMS, NULL);
        for (uint32_t i = 0; i < ITEMS; i++)
                in[i] = 1 + rnd() % 100000;
        isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, ITEMS);
        return isa_launch(m, &k, grid, wg, &a, budget, res);
}

/* The budget is the dispatch's: a parallel run that needs exactly the budget
 * completes, one instruction less and it ends with -ETIME having run exactly
 * the budget, as the serial run does. */
Test(isa_parallel, budget_runs_out_exactly_as_in_the_serial_run, .init = pool_start, .fini = pool_stop) {
        IsaMem s;
        SimIsaResult rs;

        isa_mem_init(&s);
        cr_assert_eq(run_collatz(&s, 0, &rs), 0, "%s", rs.message);
        uint64_t need = rs.wave_instructions;
        isa_mem_fini(&s);
        isa_mem_init(&s);
        cr_assert_eq(run_collatz(&s, need - 1, &rs), -ETIME);
        cr_assert_eq(rs.wave_instructions, need - 1);
        isa_mem_fini(&s);

        for (unsigned round = 0; round < 5; round++) {
                IsaMem p;
                SimIsaResult rp;
                isa_mem_init(&p);
                p.pool = pool;
                cr_assert_eq(run_collatz(&p, need, &rp), 0, "round %u, budget %llu: %s", round, (unsigned long long) need,
                             rp.message);
                cr_assert_eq(rp.wave_instructions, need);
                isa_mem_fini(&p);
                isa_mem_init(&p);
                p.pool = pool;
                cr_assert_eq(run_collatz(&p, need - 1, &rp), -ETIME, "round %u: %s", round, rp.message);
                cr_assert_eq(rp.wave_instructions, need - 1);
                cr_assert(strstr(rp.message, "instruction budget"), "%s", rp.message);
                isa_mem_fini(&p);
        }
}

typedef struct Canceller {
        int *flag;
        unsigned delay_ms;
} Canceller;

static void *cancel_later(void *userdata) {
        Canceller *c = userdata;
        nanosleep(&(struct timespec) { .tv_nsec = c->delay_ms * 1000000L }, NULL);
        __atomic_store_n(c->flag, 1, __ATOMIC_RELEASE);
        return NULL;
}

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A dispatch of a million work-items (seconds of work) is cancelled while the
 * helpers run it: the call returns -ECANCELED with every helper out of it
 * (the memory is freed right after; ASan would see a helper still in it),
 * and the last workgroups never ran. */
Test(isa_parallel, cancel_stops_every_thread, .init = pool_start, .fini = pool_stop) {
        int flag = 0;
        IsaMem p;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        uint32_t grid[3] = { 4096, 1, 1 }, wg[3] = { 256, 1, 1 }, n = 4096 * 256, *in, *out;
        pthread_t t;

        isa_mem_init(&p);
        p.pool = pool;
        p.cancel = &flag;
        cr_assert_eq(isa_kernel_load(&p, isa_kernel_path("collatz.hsaco"), "collatz", &k), 0);
        uint64_t iv = isa_mem_alloc(&p, 4ull * n, (void **) &in), ov = isa_mem_alloc(&p, 4ull * n, (void **) &out);
        for (uint32_t i = 0; i < n; i++)
                in[i] = 0x7ffffffu - i;
        isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, n);
        Canceller c = { .flag = &flag, .delay_ms = 100 };
        cr_assert_eq(pthread_create(&t, NULL, cancel_later, &c), 0);
        double t0 = now();
        int r = isa_launch(&p, &k, grid, wg, &a, 0, &res);
        double t1 = now();
        pthread_join(t, NULL);
        cr_assert_eq(r, -ECANCELED, "%d: %s", r, res.message);
        cr_assert_eq(out[n - 1], 0, "the last workgroup ran");
        /* A bound for a loaded machine, far below what the whole work takes. */
        cr_assert_lt(t1 - t0, 5.0, "cancelled after %.1f s", t1 - t0);
        isa_mem_fini(&p);
}

/* ---- the pool's CUs: dispatches of several queues at once ---- */

#define CONCURRENT 8u

typedef struct Concurrent {
        unsigned idx;
        uint64_t budget;        /* 0 = none */
        uint32_t items;
        const int *cancel;
        uint32_t *expect;       /* outputs of the serial run, NULL = not compared */
        int r;
        SimIsaResult res;
        bool outputs_match;
} Concurrent;

/* Collatz over c->items inputs that depend on c->idx, with the pool if
 * with_pool; its outputs are copied to *ret_out when set (malloc'ed). */
static void run_concurrent_collatz(Concurrent *c, bool with_pool, uint32_t **ret_out) {
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        uint32_t grid[3] = { (c->items + 63) / 64, 1, 1 }, wg[3] = { 64, 1, 1 }, *in, *out;

        isa_mem_init(&m);
        if (with_pool) {
                m.pool = pool;
                m.cancel = c->cancel;
        }
        c->r = isa_kernel_load(&m, isa_kernel_path("collatz.hsaco"), "collatz", &k);
        if (c->r == 0) {
                uint64_t iv = isa_mem_alloc(&m, 4ull * c->items, (void **) &in),
                         ov = isa_mem_alloc(&m, 4ull * c->items, (void **) &out);
                for (uint32_t i = 0; i < c->items; i++)
                        in[i] = 1 + (i * 2654435761u + c->idx * 7919u) % 100000u;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, c->items);
                c->r = isa_launch(&m, &k, grid, wg, &a, c->budget, &c->res);
                if (ret_out) {
                        *ret_out = malloc(4ull * c->items);
                        memcpy(*ret_out, out, 4ull * c->items);
                }
                c->outputs_match = c->expect && !memcmp(out, c->expect, 4ull * c->items);
        }
        isa_mem_fini(&m);
}

static void *concurrent_thread(void *userdata) {
        run_concurrent_collatz(userdata, true, NULL);
        return NULL;
}

/* CONCURRENT dispatches at once, each called by its own thread as the CPs of
 * as many queues call them: together they hold at most HELPERS + 2 CUs, and
 * hand them on to each other until every one has finished with the serial
 * run's bytes; one whose budget is one instruction short still ends with
 * -ETIME after exactly its budget while its chunks wait in threads that are
 * waiting for a CU. */
Test(isa_parallel, concurrent_dispatches_share_the_pools_cus, .init = pool_start, .fini = pool_stop) {
        Concurrent c[CONCURRENT];
        pthread_t t[CONCURRENT];
        uint32_t *expect[CONCURRENT];

        for (unsigned i = 0; i < CONCURRENT; i++) {
                c[i] = (Concurrent) { .idx = i, .items = ITEMS };
                run_concurrent_collatz(&c[i], false, &expect[i]);
                cr_assert_eq(c[i].r, 0, "serial run %u: %s", i, c[i].res.message);
                c[i] = (Concurrent) { .idx = i, .items = ITEMS, .expect = expect[i],
                                      .budget = i == 0 ? c[i].res.wave_instructions - 1 : 0 };
        }
        for (unsigned i = 0; i < CONCURRENT; i++)
                cr_assert_eq(pthread_create(&t[i], NULL, concurrent_thread, &c[i]), 0);
        for (unsigned i = 0; i < CONCURRENT; i++)
                pthread_join(t[i], NULL);

        cr_assert_eq(c[0].r, -ETIME, "%s", c[0].res.message);
        cr_assert(strstr(c[0].res.message, "instruction budget"), "%s", c[0].res.message);
        for (unsigned i = 1; i < CONCURRENT; i++) {
                cr_assert_eq(c[i].r, 0, "dispatch %u: %s", i, c[i].res.message);
                cr_assert(c[i].outputs_match, "dispatch %u: the outputs differ from the serial run's", i);
        }
        unsigned most = sim_isa_pool_most_busy(pool);
        cr_assert(most >= 2 && most <= HELPERS + 2, "%u CUs were busy at once, of %u", most, HELPERS + 2);
        for (unsigned i = 0; i < CONCURRENT; i++)
                free(expect[i]);
}

typedef struct Gate {
        unsigned priority;      /* SIM_PIPE_PRIORITY_* */
        const int *cancel;
        uint32_t *flag;         /* host address of the flag it polls, set before it runs */
        int set_up;             /* set once flag is, or the set-up failed */
        int r;
        uint32_t out[2];
} Gate;

/* A gate kernel of one work-item that polls its flag until the test sets it. */
static void *gate_thread(void *userdata) {
        Gate *g = userdata;
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        uint32_t grid[3] = { 1, 1, 1 }, wg[3] = { 1, 1, 1 }, *flag, *out;
        SimIsaResult res;

        isa_mem_init(&m);
        m.pool = pool;
        m.priority = g->priority;
        m.cancel = g->cancel;
        g->r = isa_kernel_load(&m, isa_kernel_path("gate.hsaco"), "gate", &k);
        if (g->r == 0) {
                uint64_t fv = isa_mem_alloc(&m, 4, (void **) &flag), ov = isa_mem_alloc(&m, 8, (void **) &out);
                isa_args_u64(&a, fv), isa_args_u64(&a, ov), isa_args_u32(&a, UINT32_MAX);
                __atomic_store_n(&g->flag, flag, __ATOMIC_RELEASE);
                __atomic_store_n(&g->set_up, 1, __ATOMIC_RELEASE);
                g->r = isa_launch(&m, &k, grid, wg, &a, 0, &res);
                memcpy(g->out, out, sizeof g->out);
        }
        __atomic_store_n(&g->set_up, 1, __ATOMIC_RELEASE);
        isa_mem_fini(&m);
        return NULL;
}

/* Waits until g has set up, then lets it go (if it got that far). */
static void gate_release(Gate *g) {
        uint32_t *flag;

        while (!__atomic_load_n(&g->set_up, __ATOMIC_ACQUIRE))
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        if ((flag = __atomic_load_n(&g->flag, __ATOMIC_ACQUIRE)))
                __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
}

/* Waits up to seconds for *done. */
static bool wait_done(const int *done, double seconds) {
        double t0 = now();

        while (!__atomic_load_n(done, __ATOMIC_ACQUIRE) && now() - t0 < seconds)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        return __atomic_load_n(done, __ATOMIC_ACQUIRE);
}

/* Waits up to 30 s until every CU of the pool (HELPERS + 2) has been busy at once. */
static void wait_all_cus_busy(void) {
        double t0 = now();

        while (sim_isa_pool_most_busy(pool) < HELPERS + 2 && now() - t0 < 30.0)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
}

typedef struct Short {
        Concurrent c;
        int done;
} Short;

static void *short_thread(void *userdata) {
        Short *s = userdata;

        run_concurrent_collatz(&s->c, true, NULL);
        __atomic_store_n(&s->done, 1, __ATOMIC_RELEASE);
        return NULL;
}

/* Gate kernels that spin until the test lets them go hold every CU, and more
 * wait for one; a dispatch of one workgroup still gets a CU (the holders give
 * theirs up after a quantum, and it has run the least) and finishes while
 * they spin. */
Test(isa_parallel, a_short_dispatch_gets_a_cu_from_spinning_ones, .init = pool_start, .fini = pool_stop) {
        enum { GATES = HELPERS + 4 };
        Gate g[GATES] = {};
        Short s = { .c = { .idx = 99, .items = 64 } };
        pthread_t t[GATES], st;
        uint32_t *expect;

        run_concurrent_collatz(&s.c, false, &expect);
        cr_assert_eq(s.c.r, 0, "%s", s.c.res.message);
        s.c = (Concurrent) { .idx = 99, .items = 64, .expect = expect };
        for (unsigned i = 0; i < GATES; i++)
                cr_assert_eq(pthread_create(&t[i], NULL, gate_thread, &g[i]), 0);
        wait_all_cus_busy();
        cr_assert_eq(sim_isa_pool_most_busy(pool), HELPERS + 2, "the gates never held every CU");

        cr_assert_eq(pthread_create(&st, NULL, short_thread, &s), 0);
        bool done_while_gated = wait_done(&s.done, 20.0);
        for (unsigned i = 0; i < GATES; i++)
                gate_release(&g[i]);
        pthread_join(st, NULL);
        for (unsigned i = 0; i < GATES; i++)
                pthread_join(t[i], NULL);
        cr_assert(done_while_gated, "the short dispatch did not finish in 20 s while the gates spun");
        cr_assert_eq(s.c.r, 0, "%s", s.c.res.message);
        cr_assert(s.c.outputs_match, "the short dispatch's outputs differ from the serial run's");
        for (unsigned i = 0; i < GATES; i++) {
                cr_assert_eq(g[i].r, 0, "gate %u: %d", i, g[i].r);
                cr_assert_eq(g[i].out[1], 1, "gate %u ended without seeing its flag (%u polls)", i, g[i].out[0]);
        }
        free(expect);
}

typedef struct GateDone {
        Gate *g;
        int done;
} GateDone;

static void *gate_done_thread(void *userdata) {
        GateDone *d = userdata;

        gate_thread(d->g);
        __atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
        return NULL;
}

/* Two workgroups of low priority are running (gate kernels) when more
 * high-priority gates arrive than there are CUs. On a GPU resident waves go
 * on running; here they give their CUs up, but get one back within the age
 * limit: one, let go by the host, sees its flag and ends; the other, its
 * queue torn down (cancelled), ends with -ECANCELED — both while the high
 * gates spin. */
Test(isa_parallel, running_low_priority_workgroups_still_get_cus, .init = pool_start, .fini = pool_stop) {
        enum { HIGH = HELPERS + 8 };
        Gate low[2] = { { .priority = SIM_PIPE_PRIORITY_LOW }, { .priority = SIM_PIPE_PRIORITY_LOW } }, high[HIGH];
        GateDone done[2] = { { .g = &low[0] }, { .g = &low[1] } };
        pthread_t lt[2], ht[HIGH];
        int cancel = 0;

        low[1].cancel = &cancel;
        for (unsigned i = 0; i < 2; i++) {
                cr_assert_eq(pthread_create(&lt[i], NULL, gate_done_thread, &done[i]), 0);
                while (!__atomic_load_n(&low[i].set_up, __ATOMIC_ACQUIRE))
                        nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        }
        nanosleep(&(struct timespec) { .tv_nsec = 20000000 }, NULL); /* both are in their workgroup */
        for (unsigned i = 0; i < HIGH; i++) {
                high[i] = (Gate) { .priority = SIM_PIPE_PRIORITY_HIGH };
                cr_assert_eq(pthread_create(&ht[i], NULL, gate_thread, &high[i]), 0);
        }
        wait_all_cus_busy();
        nanosleep(&(struct timespec) { .tv_nsec = 20000000 }, NULL); /* the high gates hold the CUs */

        gate_release(&low[0]);
        __atomic_store_n(&cancel, 1, __ATOMIC_RELEASE);
        bool released_ended = wait_done(&done[0].done, 5.0), cancelled_ended = wait_done(&done[1].done, 5.0);
        for (unsigned i = 0; i < HIGH; i++)
                gate_release(&high[i]);
        for (unsigned i = 0; i < HIGH; i++)
                pthread_join(ht[i], NULL);
        for (unsigned i = 0; i < 2; i++)
                pthread_join(lt[i], NULL);
        cr_assert(released_ended, "the low gate let go did not end in 5 s while high gates held the CUs");
        cr_assert(cancelled_ended, "the cancelled low gate did not end in 5 s while high gates held the CUs");
        cr_assert_eq(low[0].r, 0, "%d", low[0].r);
        cr_assert_eq(low[0].out[1], 1, "the low gate ended without seeing its flag");
        cr_assert_eq(low[1].r, -ECANCELED, "%d", low[1].r);
        for (unsigned i = 0; i < HIGH; i++)
                cr_assert_eq(high[i].r, 0, "high gate %u: %d", i, high[i].r);
}

static void pool_start_without_helpers(void) {
        int r = sim_isa_pool_new(0, &pool);
        cr_assert_eq(r, 0, "sim_isa_pool_new: %s", strerror(-r));
}

typedef struct Starter {
        const int *stop;
        unsigned started;
        int r;
} Starter;

/* Starts one one-workgroup dispatch after another until *stop, with little
 * host work between them, as a queue's CP would: the kernel is loaded again
 * only every LAUNCHES_PER_LOAD dispatches (each takes two regions of the
 * test memory). */
#define LAUNCHES_PER_LOAD 8
static void *starter_thread(void *userdata) {
        Starter *st = userdata;

        while (st->r == 0 && !__atomic_load_n(st->stop, __ATOMIC_ACQUIRE)) {
                uint32_t grid[3] = { 1, 1, 1 }, wg[3] = { 64, 1, 1 }, *in;
                IsaArgs a = { 0 };
                SimIsaResult res;
                IsaKernel k;
                IsaMem m;

                isa_mem_init(&m);
                m.pool = pool;
                st->r = isa_kernel_load(&m, isa_kernel_path("collatz.hsaco"), "collatz", &k);
                if (st->r == 0) {
                        uint64_t iv = isa_mem_alloc(&m, 4 * 64, (void **) &in), ov = isa_mem_alloc(&m, 4 * 64, NULL);
                        for (uint32_t i = 0; i < 64; i++)
                                in[i] = 27 + i;
                        isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, 64);
                }
                for (unsigned i = 0; i < LAUNCHES_PER_LOAD && st->r == 0 && !__atomic_load_n(st->stop, __ATOMIC_ACQUIRE);
                     i++) {
                        st->r = isa_launch(&m, &k, grid, wg, &a, 0, &res);
                        __atomic_fetch_add(&st->started, 1, __ATOMIC_RELAXED);
                }
                isa_mem_fini(&m);
        }
        return NULL;
}

static unsigned started(const Starter *st, unsigned n) {
        unsigned sum = 0;

        for (unsigned i = 0; i < n; i++)
                sum += __atomic_load_n(&st[i].started, __ATOMIC_RELAXED);
        return sum;
}

/* A long dispatch that has run takes its turns at the CUs against clients
 * that keep starting new one-workgroup dispatches (a new one goes first
 * unless another waiter has waited the age limit): it finishes while twelve
 * such clients go on, on a pool of two CUs. */
Test(isa_parallel, new_dispatches_do_not_starve_one_that_has_run, .init = pool_start_without_helpers,
     .fini = pool_stop) {
        enum { STARTERS = 12 };
        Short a = { .c = { .idx = 7, .items = 8192 } };
        Starter st[STARTERS] = {};
        pthread_t t[STARTERS], at;
        int stop = 0;
        uint32_t *expect;

        run_concurrent_collatz(&a.c, false, &expect);
        cr_assert_eq(a.c.r, 0, "%s", a.c.res.message);
        a.c = (Concurrent) { .idx = 7, .items = 8192, .expect = expect };
        for (unsigned i = 0; i < STARTERS; i++) {
                st[i].stop = &stop;
                cr_assert_eq(pthread_create(&t[i], NULL, starter_thread, &st[i]), 0);
        }
        double t0 = now();
        while (started(st, STARTERS) < 2 * STARTERS && now() - t0 < 30.0)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        cr_assert_eq(pthread_create(&at, NULL, short_thread, &a), 0);
        t0 = now();
        bool done_while_started = wait_done(&a.done, 30.0);
        unsigned during = started(st, STARTERS);
        __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
        for (unsigned i = 0; i < STARTERS; i++) {
                pthread_join(t[i], NULL);
                cr_assert_eq(st[i].r, 0, "starter %u: %d", i, st[i].r);
        }
        pthread_join(at, NULL);
        cr_assert(done_while_started, "the long dispatch did not finish in 30 s while new ones kept starting");
        cr_assert_eq(a.c.r, 0, "%s", a.c.res.message);
        cr_assert(a.c.outputs_match, "the long dispatch's outputs differ from the serial run's");
        cr_assert_eq(sim_isa_pool_most_busy(pool), 2u);
        cr_log_info("the long dispatch finished after %.2f s, %u short ones started", now() - t0, during);
        free(expect);
}
