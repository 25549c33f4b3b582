/* SPDX-License-Identifier: MIT */
/*
 * Unmodified HIP programs through the broker (issue 30 item 8), on the
 * simulated GPU, against baselines measured in the same run:
 *   1. Launch: an empty HIP kernel's launch + hipDeviceSynchronize (Debian's
 *      ROCm 5.2.3, run by kfdbroker-run, its AQL packets relayed by the
 *      daemon) against a native libkfdbroker empty-kernel dispatch's round
 *      trip (as bench-compute measures it): p50 of each, in interleaved
 *      rounds so that noise on this small machine hits both alike.
 *      Goal: at most 1.5x.
 *   2. Copy: hipMemcpy of 256 MiB from hipHostMalloc memory to the device
 *      against memcpy of 256 MiB, five of each interleaved, into the same
 *      device buffer: the first copy and four warm ones, each printed.
 *      Goal: the median ratio at least 0.7x.
 *   3. Idle: a HIP process initialised with two streams that ran a kernel
 *      each, then asleep (hip-bench idle), costs the daemon at most 1 % of
 *      a CPU: its utime+stime over 10 s from /proc/PID/stat, and its
 *      wake-ups (context switches of all its threads); next to the daemon
 *      with no client over the same time. With interrupts on, with them off
 *      (HSA_ENABLE_INTERRUPT=0: ROCr never waits in the kernel), and with
 *      worker processes (--sim-kfd-version=1.18, the workers' CPU added).
 *   4. Memory of one HIP client: the daemon's RSS before it, with it
 *      initialised, and after it left; with worker processes, the workers'
 *      PSS too.
 * Starts its own kfdbrokerd --device=sim (path from $KFDBROKERD or the build
 * tree). Needs the test kernels (tests/kernels) and the HIP programs
 * (tests/hip, hipcc); says it skipped when they were not built.
 * "bench-hip launch" runs 1 only, "bench-hip copy" 2, "bench-hip idle" 3 and 4.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "kfdbroker.h"

#if defined(EMPTY_HSACO) && defined(HIP_BENCH_PATH)

/* Launch rounds: one warm-up round, then LAUNCH_ROUNDS of LAUNCH_BATCH HIP
 * launches and LAUNCH_BATCH native round trips each. */
#define LAUNCH_ROUNDS 10
#define LAUNCH_BATCH 40
#define COPIES 5
#define IDLE_S 10
#define IDLE_ARG "13" /* its sleep: the measured IDLE_S and a margin */
/* How long a HIP program may take for anything (its start compiles HIP's
 * blit kernels on the interpreter: seconds). */
#define HIP_TIMEOUT_S 900

static void die(kfdb_session *s, const char *what, int r) {
        fprintf(stderr, "bench-hip: %s: %s%s%s\n", what, strerror(r < 0 ? -r : r), s ? ": " : "",
                s ? kfdb_session_last_error(s) : "");
        exit(1);
}

typedef BenchGrant Bench;

static void bench_init(Bench *b) {
        int r = bench_grant_init(b);

        if (r < 0)
                die(NULL, "making the benchmark's directory and policy", r);
}

static void bench_start(Bench *b, const char *extra) {
        if (bench_grant_start(b, KFDBROKERD_BUILD_PATH, extra) < 0)
                die(NULL, "kfdbrokerd did not start", ETIMEDOUT);
}

static void bench_stop(Bench *b) {
        bench_grant_stop(b);
}

static void bench_done(Bench *b) {
        bench_grant_done(b);
}

/* ---- a HIP program through kfdbroker-run ---- */

typedef struct Hip {
        pid_t pid;
        FILE *in, *out;
        char *line;
        size_t cap;
} Hip;

/* Runs kfdbroker-run --socket SOCK hip-bench ARGS... with env (NAME=VALUE or
 * NULL) set, its stdin and stdout ours; returns once it printed "ready". */
static void hip_start(Hip *h, const Bench *b, const char *env, const char *arg1, const char *arg2) {
        int to[2], from[2];

        *h = (Hip) {};
        if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0)
                die(NULL, "pipe", errno);
        h->pid = fork();
        if (h->pid < 0)
                die(NULL, "fork", errno);
        if (h->pid == 0) {
                const char *argv[] = { KFDBROKER_RUN_PATH, "--socket", b->sock, "--", HIP_BENCH_PATH, arg1, arg2, NULL };

                if (dup2(to[0], 0) < 0 || dup2(from[1], 1) < 0)
                        _exit(127);
                if (env)
                        putenv((char *) env);
                /* A program that hangs ends, and the benchmark with it (EOF). */
                alarm(HIP_TIMEOUT_S);
                execv(argv[0], (char *const *) argv);
                _exit(127);
        }
        close(to[0]);
        close(from[1]);
        h->in = fdopen(to[1], "we");
        h->out = fdopen(from[0], "re");
        if (!h->in || !h->out)
                die(NULL, "fdopen", errno);
        if (getline(&h->line, &h->cap, h->out) < 0 || strcmp(h->line, "ready\n") != 0)
                die(NULL,
                    waitpid(b->pid, NULL, WNOHANG) == b->pid ? "kfdbrokerd exited under hip-bench (its stderr says why)"
                                                              : "hip-bench did not start (its stderr says why)",
                    EIO);
}

/* Sends cmd and returns the answer's line, which begins with key. */
static char *hip_ask(Hip *h, const char *cmd, const char *key) {
        size_t n = strlen(key);

        fprintf(h->in, "%s\n", cmd);
        fflush(h->in);
        if (getline(&h->line, &h->cap, h->out) < 0 || strncmp(h->line, key, n) != 0 || h->line[n] != ' ')
                die(NULL, "hip-bench did not answer (its stderr says why)", EIO);
        return h->line + n + 1;
}

/* Ends it (quit, or by its own sleep for idle) and waits for it. */
static void hip_end(Hip *h) {
        int status;

        if (h->in)
                fclose(h->in); /* EOF: serve ends */
        waitpid(h->pid, &status, 0);
        fclose(h->out);
        free(h->line);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                die(NULL, "hip-bench failed", EIO);
}

/* ---- 1 and 2: launch and copy ---- */

/* One native empty-kernel dispatch, submitted and waited for; its ns. */
static uint64_t native_round_trip(kfdb_session *s, kfdb_batch *b, const kfdb_code_object *co) {
        const uint32_t one = 1;
        uint64_t fence, t0 = now_ns();
        int r;

        if ((r = kfdb_batch_dispatch(b, co, "empty", 1, &one, &one, NULL, 0)) < 0 ||
            (r = kfdb_batch_submit(b, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 10000)) < 0)
                die(s, "native round trip", r);
        return now_ns() - t0;
}

/* The HIP launches of one "launch N" answer, in ns, into t (n of them). */
static void hip_launches(Hip *h, uint64_t *t, size_t n) {
        char cmd[32], *p, *end;

        snprintf(cmd, sizeof cmd, "launch %zu", n);
        p = hip_ask(h, cmd, "launch");
        for (size_t i = 0; i < n; i++, p = end) {
                double us = strtod(p, &end);
                if (end == p)
                        die(NULL, "hip-bench answered fewer launches than asked", EIO);
                t[i] = (uint64_t) (us * 1000.0);
        }
}

static void launch_line(const char *what, uint64_t *t, double nat_p50, double nat_p99) {
        double p50, p99;
        char line[120], tail[96];

        percentiles(t, LAUNCH_ROUNDS * LAUNCH_BATCH, &p50, &p99);
        printf("  %-48s p50 %8.1f us  p99 %8.1f us\n", what, p50, p99);
        snprintf(line, sizeof line, "%s p50 / native p50", what);
        snprintf(tail, sizeof tail, "  (p99 %.2fx)", p99 / nat_p99);
        report_line(line, p50 / nat_p50, true, 1.5, tail);
}

static void bench_launch(const Bench *b) {
        static uint64_t hip[2][LAUNCH_ROUNDS * LAUNCH_BATCH], native[LAUNCH_ROUNDS * LAUNCH_BATCH];
        static const char *const env[2] = { NULL, "HSA_ENABLE_INTERRUPT=0" };
        static const char *const names[2] = { "HIP launch+sync", "HIP launch+sync, HSA_ENABLE_INTERRUPT=0" };
        double nat_p50, nat_p99;
        uint64_t warm[LAUNCH_BATCH];
        kfdb_code_object *co;
        kfdb_session *s;
        kfdb_batch *batch;
        Hip h[2];
        int r;

        if ((r = kfdb_session_new(b->sock, "bench-hip", &s)) < 0)
                die(NULL, "connect", r);
        if ((r = kfdb_code_object_load_file(s, EMPTY_HSACO, &co)) < 0 || (r = kfdb_batch_new(s, &batch)) < 0)
                die(s, EMPTY_HSACO, r);
        /* Interrupts on (ROCr waits in WAIT_EVENTS after a spin of 200 us)
         * and off (it only spins: the relay must find its packets itself). */
        for (int i = 0; i < 2; i++)
                hip_start(&h[i], b, env[i], "serve", NULL);

        /* A warm-up round of each, then the rounds. */
        for (size_t k = 0; k <= LAUNCH_ROUNDS; k++) {
                for (int i = 0; i < 2; i++)
                        hip_launches(&h[i], k == 0 ? warm : hip[i] + (k - 1) * LAUNCH_BATCH, LAUNCH_BATCH);
                for (size_t j = 0; j < LAUNCH_BATCH; j++) {
                        uint64_t ns = native_round_trip(s, batch, co);
                        if (k > 0)
                                native[(k - 1) * LAUNCH_BATCH + j] = ns;
                }
        }
        percentiles(native, LAUNCH_ROUNDS * LAUNCH_BATCH, &nat_p50, &nat_p99);
        printf("empty kernel, %d each in %d interleaved rounds:\n", LAUNCH_ROUNDS * LAUNCH_BATCH, LAUNCH_ROUNDS);
        printf("  %-48s p50 %8.1f us  p99 %8.1f us\n", "native libkfdbroker dispatch round trip", nat_p50, nat_p99);
        for (int i = 0; i < 2; i++) {
                launch_line(names[i], hip[i], nat_p50, nat_p99);
                hip_end(&h[i]);
        }

        kfdb_batch_free(batch);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
}

/* COPIES copies of one buffer into one device buffer, each next to a memcpy
 * of the same bytes: the first (which meets the destination's memory for the
 * first time) and the warm ones, each printed; the goal is on the median
 * ratio of all of them. */
static void bench_copy(const Bench *b) {
        double h2d[COPIES], mc[COPIES], ratio[COPIES], first, warm;
        Hip h;

        hip_start(&h, b, NULL, "serve", NULL);
        for (int i = 0; i < COPIES; i++) {
                if (sscanf(hip_ask(&h, "copy", "copy"), "%lf %lf", &h2d[i], &mc[i]) != 2)
                        die(NULL, "hip-bench's copy answer", EIO);
                ratio[i] = mc[i] / h2d[i];
        }
        hip_end(&h);
        printf("256 MiB from hipHostMalloc to the device, one after another (ms, hipMemcpy / memcpy):\n ");
        for (int i = 0; i < COPIES; i++)
                printf(" %.1f/%.1f", h2d[i] / 1e3, mc[i] / 1e3);
        first = ratio[0];
        warm = median(ratio + 1, COPIES - 1); /* (sorts them) */
        printf("\n  median of %d: hipMemcpy %.3f GB/s, memcpy %.3f GB/s; the first alone %.2fx, the warm ones' median %.2fx\n",
               COPIES, (double) (256u << 20) / median(h2d, COPIES) / 1e3, (double) (256u << 20) / median(mc, COPIES) / 1e3,
               first, warm);
        report("hipMemcpy H2D 256 MiB (hipHostMalloc) / memcpy", median(ratio, COPIES), false, 0.7);
}

/* ---- 3 and 4: idle cost and memory ---- */

typedef struct Usage {
        uint64_t ticks;     /* utime + stime */
        uint64_t switches;  /* voluntary + involuntary, all threads */
        uint64_t rss_kib;   /* VmRSS */
        uint64_t pss_kib;   /* Pss of smaps_rollup */
} Usage;

static uint64_t status_field(const char *path, const char *key) {
        char line[256];
        size_t n = strlen(key);
        uint64_t v = 0;
        FILE *f = fopen(path, "re");

        if (!f)
                return 0;
        while (fgets(line, sizeof line, f))
                if (strncmp(line, key, n) == 0 && line[n] == ':') {
                        v = strtoull(line + n + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return v;
}

/* What pid has used so far (0s for a process that is gone). */
static Usage usage_of(pid_t pid) {
        char path[320], buf[1024], *p;
        Usage u = {};
        unsigned long utime, stime;
        FILE *f;
        DIR *d;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        if (!(f = fopen(path, "re")))
                return u;
        p = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
        fclose(f);
        /* After the comm: state ppid pgrp session tty tpgid flags minflt
         * cminflt majflt cmajflt utime stime (proc(5), fields 3-15). */
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2)
                u.ticks = utime + stime;
        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        u.rss_kib = status_field(path, "VmRSS");
        snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int) pid);
        u.pss_kib = status_field(path, "Pss");
        snprintf(path, sizeof path, "/proc/%d/task", (int) pid);
        if ((d = opendir(path))) {
                struct dirent *e;
                while ((e = readdir(d)))
                        if (e->d_name[0] != '.') {
                                snprintf(path, sizeof path, "/proc/%d/task/%s/status", (int) pid, e->d_name);
                                u.switches += status_field(path, "voluntary_ctxt_switches") +
                                              status_field(path, "nonvoluntary_ctxt_switches");
                        }
                closedir(d);
        }
        return u;
}

/* The daemon's child processes (its workers), at most max of them. */
static size_t children_of(pid_t pid, pid_t *out, size_t max) {
        char path[320];
        size_t n = 0;
        DIR *d;

        snprintf(path, sizeof path, "/proc/%d/task", (int) pid);
        if (!(d = opendir(path)))
                return 0;
        for (struct dirent *e; (e = readdir(d));) {
                FILE *f;
                int c;

                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "/proc/%d/task/%s/children", (int) pid, e->d_name);
                if (!(f = fopen(path, "re")))
                        continue;
                while (n < max && fscanf(f, "%d", &c) == 1)
                        out[n++] = c;
                fclose(f);
        }
        closedir(d);
        return n;
}

/* The daemon's and its workers' usage, summed (workers' RSS apart: pss). */
typedef struct Sample {
        Usage daemon;
        uint64_t worker_ticks, worker_switches, worker_pss_kib;
        size_t workers;
} Sample;

static Sample sample(pid_t daemon) {
        pid_t kids[64];
        Sample s = { .daemon = usage_of(daemon) };

        s.workers = children_of(daemon, kids, 64);
        for (size_t i = 0; i < s.workers; i++) {
                Usage u = usage_of(kids[i]);
                s.worker_ticks += u.ticks;
                s.worker_switches += u.switches;
                s.worker_pss_kib += u.pss_kib;
        }
        return s;
}

/* CPU % of one CPU and wake-ups per second between a and b over secs. */
static void idle_cost(const Sample *a, const Sample *b, double secs, bool workers, double *ret_pct, double *ret_wakeups) {
        double ticks = (double) (b->daemon.ticks - a->daemon.ticks), sw = (double) (b->daemon.switches - a->daemon.switches);

        if (workers) {
                ticks += (double) b->worker_ticks - (double) a->worker_ticks;
                sw += (double) b->worker_switches - (double) a->worker_switches;
        }
        *ret_pct = 100.0 * ticks / (double) sysconf(_SC_CLK_TCK) / secs;
        *ret_wakeups = sw / secs;
}

static double sleep_measured(unsigned secs) {
        uint64_t t0 = now_ns();
        sleep(secs);
        return (double) (now_ns() - t0) / 1e9;
}

/* One daemon (extra: its option, or NULL): its idle cost with no client,
 * then with one idle HIP client (env: NULL or an HSA_* setting), and the
 * memory of that client. */
static void bench_idle(Bench *b, const char *extra, const char *env, const char *what) {
        bool workers = extra != NULL;
        Sample before, a, c, after;
        double secs, pct0, wk0, pct, wk;
        char line[200], tail[160];
        Hip h;

        bench_start(b, extra);
        usleep(500000); /* its start-up done */
        a = sample(b->pid);
        secs = sleep_measured(IDLE_S);
        c = sample(b->pid);
        idle_cost(&a, &c, secs, workers, &pct0, &wk0);
        before = c;

        hip_start(&h, b, env, "idle", IDLE_ARG);
        fclose(h.in);
        h.in = NULL;
        usleep(500000); /* the last of its start-up calls answered */
        a = sample(b->pid);
        secs = sleep_measured(IDLE_S);
        c = sample(b->pid);
        idle_cost(&a, &c, secs, workers, &pct, &wk);
        /* It wakes, runs a kernel on each stream and ends: work after an
         * idle period still runs. */
        if (getline(&h.line, &h.cap, h.out) < 0 || strcmp(h.line, "done\n") != 0)
                die(NULL, "hip-bench's launch after its idle period failed", EIO);
        hip_end(&h);
        usleep(500000);
        after = sample(b->pid);
        bench_stop(b);

        printf("%s:\n", what);
        printf("  daemon%s with no client:       %5.2f %% of a CPU, %6.1f wake-ups/s (%.1f s)\n",
               workers ? "+workers" : "", pct0, wk0, secs);
        printf("  daemon%s, one idle HIP client: %5.2f %% of a CPU, %6.1f wake-ups/s (%.1f s)\n",
               workers ? "+workers" : "", pct, wk, secs);
        printf("  daemon RSS %" PRIu64 " KiB before the client, %" PRIu64 " KiB with it (+%" PRId64
               " KiB), %" PRIu64 " KiB after it left\n",
               before.daemon.rss_kib, c.daemon.rss_kib, (int64_t) c.daemon.rss_kib - (int64_t) before.daemon.rss_kib,
               after.daemon.rss_kib);
        if (workers)
                printf("  worker processes: %zu before, %zu with the client (their PSS %" PRIu64 " KiB -> %" PRIu64
                       " KiB), %zu after it left\n",
                       before.workers, c.workers, before.worker_pss_kib, c.worker_pss_kib, after.workers);
        snprintf(line, sizeof line, "idle HIP client, %s: daemon CPU %%", what);
        snprintf(tail, sizeof tail, "  (%.1f wake-ups/s; no client: %.2f %%)", wk, pct0);
        report_line(line, pct, true, 1.0, tail);
}

static bool wanted(int argc, char **argv, const char *part) {
        if (argc < 2)
                return true;
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], part) == 0)
                        return true;
        return false;
}

int main(int argc, char **argv) {
        Bench bench;

        printf("kfdbroker HIP benchmark (Debian's ROCm through kfdbroker-run on the simulated GPU; baselines "
               "measured in the same run)\n");
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], "launch") != 0 && strcmp(argv[i], "copy") != 0 && strcmp(argv[i], "idle") != 0) {
                        fprintf(stderr, "usage: bench-hip [launch] [copy] [idle]  (default: all)\n");
                        return 2;
                }
        if (access(HIP_BENCH_PATH, X_OK) < 0 || access(KFDBROKER_RUN_PATH, X_OK) < 0) {
                printf("skipped: %s or %s is missing\n", HIP_BENCH_PATH, KFDBROKER_RUN_PATH);
                return 0;
        }
        bench_init(&bench);
        if (wanted(argc, argv, "launch")) {
                bench_start(&bench, NULL);
                bench_launch(&bench);
                bench_stop(&bench);
        }
        if (wanted(argc, argv, "copy")) {
                bench_start(&bench, NULL);
                bench_copy(&bench);
                bench_stop(&bench);
        }
        if (wanted(argc, argv, "idle")) {
                bench_idle(&bench, NULL, NULL, "secondary contexts");
                bench_idle(&bench, NULL, "HSA_ENABLE_INTERRUPT=0", "secondary contexts, HSA_ENABLE_INTERRUPT=0");
                bench_idle(&bench, "--sim-kfd-version=1.18", NULL, "worker processes (--sim-kfd-version=1.18)");
        }
        bench_done(&bench);
        return 0;
}

#else

int main(void) {
        printf("kfdbroker HIP benchmark: skipped, the test kernels or the HIP programs were not built "
               "(clang-15 with the AMDGPU device libraries, hipcc and libamdhip64-dev)\n");
        return 0;
}

#endif
