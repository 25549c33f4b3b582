/* SPDX-License-Identifier: MIT */
/*
 * Throughput of the RDNA2 interpreter: runs corpus kernels (tiled matrix
 * multiply, Collatz loop, vector add) and prints executed lane-instructions
 * per second for each, and each one's ratio to the vector-add baseline
 * measured in the same run. Then the same dispatches (many workgroups each)
 * serially and with a pool of helpers as a simulated device makes one (one
 * fewer than the CPUs this process may use): the median over rounds of the
 * serial time over the parallel time, by the clock and by the busiest
 * thread's CPU time, against the goal of 1.8 on 2 cores (issue 13), and the
 * work the parallel run does per CPU-second of all its threads against the
 * serial run's, goal >= 0.9 (issue 32), also for 100 short dispatches of a
 * few workgroups each, where what a helper costs to wake shows; with the
 * load average and what the machine gives two spinning threads, as the
 * machine is shared.
 * Usage: bench-isa [scale] [rounds] (defaults 1 and 5).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "isa-helper.h"

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of every thread of this process so far: the caller's and the
 * pool's helpers' (CLOCK_PROCESS_CPUTIME_ID sums the per-thread clocks,
 * CLOCK_THREAD_CPUTIME_ID, of all of them; this process runs nothing else). */
static double cpu_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct Result {
        const char *name;
        double seconds, cpu_seconds;
        uint64_t lanes, waves;
} Result;

/* Runs kernel `name` `repeat` times on the same arguments: the matrix
 * multiply on 64 x scale square matrices, the others on 65536 x scale
 * elements, or on `items` elements when it is not 0 (256 a workgroup). */
static int bench_n(const char *file, const char *name, unsigned scale, uint32_t items, unsigned repeat,
                   SimIsaPool *pool, Result *out) {
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        uint32_t grid[3] = { 1, 1, 1 }, wg[3] = { 1, 1, 1 };
        int r;

        isa_mem_init(&m);
        m.pool = pool;
        r = isa_kernel_load(&m, isa_kernel_path(file), name, &k);
        if (r < 0) {
                fprintf(stderr, "%s: %s (build the hsaco targets first)\n", file, strerror(-r));
                isa_mem_fini(&m);
                return r;
        }
        if (!strcmp(name, "matmul_tiled")) {
                uint32_t n = 64 * scale;
                float *A, *B;
                uint64_t av = isa_mem_alloc(&m, 4ull * n * n, (void **) &A), bv = isa_mem_alloc(&m, 4ull * n * n, (void **) &B),
                         cv = isa_mem_alloc(&m, 4ull * n * n, NULL);
                for (uint32_t i = 0; i < n * n; i++)
                        A[i] = (float) (i % 17), B[i] = (float) (i % 13);
                isa_args_u64(&a, av), isa_args_u64(&a, bv), isa_args_u64(&a, cv);
                isa_args_u32(&a, n), isa_args_u32(&a, n), isa_args_u32(&a, n);
                grid[0] = grid[1] = n / 16, wg[0] = wg[1] = 16;
        } else {
                uint32_t n = items ? items : 65536 * scale, *in;
                uint64_t iv = isa_mem_alloc(&m, 4ull * n, (void **) &in), ov = isa_mem_alloc(&m, 4ull * n, NULL),
                         zv = isa_mem_alloc(&m, 4ull * n, NULL);
                for (uint32_t i = 0; i < n; i++)
                        in[i] = i + 1;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov);
                if (!strcmp(name, "vector_add"))
                        isa_args_u64(&a, zv);
                isa_args_u32(&a, n);
                grid[0] = n / 256, wg[0] = 256;
        }
        *out = (Result) { .name = name };
        double c0 = cpu_now(), t0 = now();
        unsigned regions = m.n;
        for (unsigned i = 0; i < repeat && r >= 0; i++) {
                isa_mem_release(&m, regions);
                r = isa_launch(&m, &k, grid, wg, &a, 0, &res);
                out->lanes += res.lane_instructions;
                out->waves += res.wave_instructions;
        }
        double t1 = now(), c1 = cpu_now();
        if (r < 0)
                fprintf(stderr, "%s: %s\n", name, res.message);
        out->seconds = t1 - t0;
        out->cpu_seconds = c1 - c0;
        isa_mem_fini(&m);
        return r;
}

static int bench(const char *file, const char *name, unsigned scale, SimIsaPool *pool, Result *out) {
        return bench_n(file, name, scale, 0, 1, pool, out);
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* CPU time of each thread of this process so far (schedstat, ns), by tid. */
typedef struct ThreadTimes {
        unsigned n;
        int tid[64];
        double seconds[64];
} ThreadTimes;

static void thread_times(ThreadTimes *t) {
        DIR *dir = opendir("/proc/self/task");
        struct dirent *e;

        t->n = 0;
        while (dir && (e = readdir(dir)) && t->n < 64) {
                char path[300];
                unsigned long long ns;
                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "/proc/self/task/%s/schedstat", e->d_name);
                FILE *f = fopen(path, "r");
                if (!f)
                        continue;
                if (fscanf(f, "%llu", &ns) == 1) {
                        t->tid[t->n] = atoi(e->d_name);
                        t->seconds[t->n++] = ns * 1e-9;
                }
                fclose(f);
        }
        if (dir)
                closedir(dir);
}

/* The most CPU time one thread spent between a and b: how long the run would
 * have taken with a core for each thread. */
static double busiest_thread(const ThreadTimes *a, const ThreadTimes *b) {
        double max = 0;
        for (unsigned i = 0; i < b->n; i++) {
                double before = 0;
                for (unsigned j = 0; j < a->n; j++)
                        if (a->tid[j] == b->tid[i])
                                before = a->seconds[j];
                if (b->seconds[i] - before > max)
                        max = b->seconds[i] - before;
        }
        return max;
}

/* Medians over rounds of one kernel's serial run against its parallel run. */
typedef struct Ratios {
        double clock;           /* serial seconds / parallel seconds */
        double busiest;         /* ... by the busiest thread's CPU time */
        double work_per_cpu;    /* parallel work per CPU-second / serial work per CPU-second */
} Ratios;

/* By the clock, by the busiest thread's CPU time (what a core per thread
 * would give: on a loaded machine, or one that groups a session's threads
 * for the scheduler, the clock cannot show it), and the work each CPU-second
 * does: the same wave-instructions both ways, so the serial run's CPU time
 * over the parallel run's, summed over every thread (what the parallel run
 * spends on waiting, waking and sharing, whatever the load). Serial and
 * parallel runs alternate, so both see the same load. */
static int parallel_ratio(const char *file, const char *name, unsigned scale, uint32_t items, unsigned repeat,
                          unsigned rounds, SimIsaPool *pool, Ratios *ret) {
        double ratio[64], cpu_ratio[64], work_ratio[64];

        for (unsigned i = 0; i < rounds; i++) {
                Result s, p;
                ThreadTimes t0, t1, t2;
                thread_times(&t0);
                if (bench_n(file, name, scale, items, repeat, NULL, &s) < 0)
                        return -1;
                thread_times(&t1);
                if (bench_n(file, name, scale, items, repeat, pool, &p) < 0)
                        return -1;
                thread_times(&t2);
                cpu_ratio[i] = busiest_thread(&t0, &t1) / busiest_thread(&t1, &t2);
                if (s.waves != p.waves || s.lanes != p.lanes) {
                        fprintf(stderr, "%s: %llu wave-instructions serially, %llu in parallel\n", name,
                                (unsigned long long) s.waves, (unsigned long long) p.waves);
                        return -1;
                }
                ratio[i] = s.seconds / p.seconds;
                work_ratio[i] = s.cpu_seconds / p.cpu_seconds;
        }
        qsort(ratio, rounds, sizeof ratio[0], cmp_double);
        qsort(cpu_ratio, rounds, sizeof cpu_ratio[0], cmp_double);
        qsort(work_ratio, rounds, sizeof work_ratio[0], cmp_double);
        *ret = (Ratios) {
                .clock = ratio[rounds / 2],
                .busiest = cpu_ratio[rounds / 2],
                .work_per_cpu = work_ratio[rounds / 2],
        };
        return 0;
}

static void *spin(void *userdata) {
        volatile uint64_t x = 0;
        for (uint64_t i = 0; i < 200000000u; i++)
                x += i;
        return NULL;
}

/* What the machine gives two threads now: one spin loop alone, then two at
 * once; the clock's ratio of twice the first to the second (2 on two idle
 * cores). */
static double machine_ratio(void) {
        pthread_t t;
        double t0 = now();
        spin(NULL);
        double t1 = now();
        if (pthread_create(&t, NULL, spin, NULL) != 0)
                return 0;
        spin(NULL);
        pthread_join(t, NULL);
        double t2 = now();
        return 2 * (t1 - t0) / (t2 - t1);
}

static void print_load(const char *when) {
        char buf[128] = "?";
        FILE *f = fopen("/proc/loadavg", "r");
        if (f) {
                if (!fgets(buf, sizeof buf, f))
                        buf[0] = 0;
                fclose(f);
        }
        buf[strcspn(buf, "\n")] = 0;
        printf("load average %s: %s\n", when, buf);
}

/* One of the dispatches that run at once, each on a thread of its own as
 * the CP engines of as many queues call them. */
typedef struct Concurrent {
        SimIsaPool *pool;
        unsigned scale;
        Result res;
        int r;
} Concurrent;

static void *concurrent_thread(void *userdata) {
        Concurrent *c = userdata;
        c->r = bench_n("collatz.hsaco", "collatz", c->scale, 0, 1, c->pool, &c->res);
        return NULL;
}

#define CONCURRENT 8

/* CONCURRENT Collatz dispatches at once on the pool (the CPs of as many
 * queues: the threads outnumber the pool's CUs, which they hand on to each
 * other) against the same ones one after another on one thread: the work per
 * CPU-second of all threads, medians over rounds. */
static int concurrent_ratio(unsigned scale, unsigned rounds, SimIsaPool *pool, double *ret) {
        double ratio[64];

        for (unsigned i = 0; i < rounds; i++) {
                Concurrent c[CONCURRENT];
                pthread_t t[CONCURRENT];
                double c0 = cpu_now();
                uint64_t serial_waves = 0, waves = 0;

                for (unsigned j = 0; j < CONCURRENT; j++) {
                        Result s;
                        if (bench_n("collatz.hsaco", "collatz", scale, 0, 1, NULL, &s) < 0)
                                return -1;
                        serial_waves += s.waves;
                }
                double serial = cpu_now() - c0;
                c0 = cpu_now();
                for (unsigned j = 0; j < CONCURRENT; j++) {
                        c[j] = (Concurrent) { .pool = pool, .scale = scale };
                        if (pthread_create(&t[j], NULL, concurrent_thread, &c[j]) != 0)
                                return -1;
                }
                for (unsigned j = 0; j < CONCURRENT; j++)
                        pthread_join(t[j], NULL);
                double parallel = cpu_now() - c0;
                for (unsigned j = 0; j < CONCURRENT; j++) {
                        if (c[j].r < 0)
                                return -1;
                        waves += c[j].res.waves;
                }
                if (waves != serial_waves) {
                        fprintf(stderr, "collatz: %llu wave-instructions serially, %llu at once\n",
                                (unsigned long long) serial_waves, (unsigned long long) waves);
                        return -1;
                }
                ratio[i] = serial / parallel;
        }
        qsort(ratio, rounds, sizeof ratio[0], cmp_double);
        *ret = ratio[rounds / 2];
        return 0;
}

int main(int argc, char **argv) {
        unsigned scale = argc > 1 ? (unsigned) atoi(argv[1]) : 1, rounds = argc > 2 ? (unsigned) atoi(argv[2]) : 5;
        static const char *const kernels[][2] = {
                { "vector-add.hsaco", "vector_add" },
                { "collatz.hsaco", "collatz" },
                { "matmul-tiled.hsaco", "matmul_tiled" },
        };
        Result r[3];
        double base = 0;
        SimIsaPool *pool = NULL;
        unsigned helpers = sim_isa_default_helpers();

        if (scale == 0)
                scale = 1;
        if (rounds == 0 || rounds > 64)
                rounds = 5;
        for (unsigned i = 0; i < 3; i++) {
                if (bench(kernels[i][0], kernels[i][1], scale, NULL, &r[i]) < 0)
                        return 1;
                double rate = r[i].lanes / r[i].seconds;
                if (i == 0)
                        base = rate;
                printf("%-14s %12llu lane-instr %10llu wave-instr %8.3f s %8.2f M lane-instr/s (x%.2f of vector_add)\n",
                       r[i].name, (unsigned long long) r[i].lanes, (unsigned long long) r[i].waves, r[i].seconds,
                       rate / 1e6, rate / base);
        }

        if (sim_isa_pool_new(helpers, &pool) < 0) {
                fprintf(stderr, "cannot start %u helper threads\n", helpers);
                return 1;
        }
        print_load("before");
        for (unsigned i = 1; i < 3; i++) {
                Ratios q;
                if (parallel_ratio(kernels[i][0], kernels[i][1], scale * 2, 0, 1, rounds, pool, &q) < 0) {
                        sim_isa_pool_free(pool);
                        return 1;
                }
                printf("parallel/serial %-14s x%.2f by the clock, x%.2f by the busiest thread's CPU time, with %u "
                       "helpers + the caller, medians of %u rounds (goal >= 1.8 on 2 cores)\n",
                       kernels[i][1], q.clock, q.busiest, helpers, rounds);
                printf("parallel/serial %-14s x%.2f work per CPU-second (all threads' CPU time; goal >= 0.9)\n",
                       kernels[i][1], q.work_per_cpu);
        }
        /* Short dispatches, as a client's: few workgroups each, where what
         * a helper costs to join shows. */
        for (unsigned i = 0; i < 2; i++) {
                static const uint32_t items[] = { 2048, 8192 };
                Ratios q;
                if (parallel_ratio(kernels[i][0], kernels[i][1], 1, items[i], 100, rounds, pool, &q) < 0) {
                        sim_isa_pool_free(pool);
                        return 1;
                }
                printf("parallel/serial %-14s 100 dispatches of %u workgroups: x%.2f work per CPU-second (goal >= 0.9), "
                       "x%.2f by the clock, x%.2f by the busiest thread's CPU time\n",
                       kernels[i][1], items[i] / 256, q.work_per_cpu, q.clock, q.busiest);
        }
        {
                double ratio;
                if (concurrent_ratio(scale, rounds, pool, &ratio) < 0) {
                        sim_isa_pool_free(pool);
                        return 1;
                }
                printf("parallel/serial collatz        %u dispatches at once: x%.2f work per CPU-second of one after "
                       "another (goal >= 0.9; the kernel loads and memory set-up counted on both sides)\n",
                       CONCURRENT, ratio);
        }
        print_load("after");
        printf("the machine now: two spinning threads x%.2f of one by the clock (2.00 on two idle cores)\n",
               machine_ratio());
        sim_isa_pool_free(pool);
        return 0;
}
