/* SPDX-License-Identifier: MIT */
/*
 * What the benchmarks of tests/bench share: a monotonic clock in ns, the
 * order statistics they report (medians, p50/p99), the warm-up of a round of
 * round trips and starting a simulated daemon. Header-only.
 */
#pragma once

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Unmeasured round trips at the start of each round of round trips that
 * bench-broker interleaves (the broker's, the floor's, the echo's), so that
 * a round does not time the first wake-ups of threads that sat idle while
 * the other rounds ran. */
#define BENCH_RT_WARMUP 30

/* Starts kfdbrokerd --device=sim --listen sock (the binary from $KFDBROKERD,
 * else build_path) at log level log_level, with the options of extra_args
 * (NULL-terminated; NULL: none), running child_setup() (NULL: nothing) in
 * the child before the exec, and waits up to 4 s until its socket takes a
 * connection. Returns its pid, or -1 when it did not. The daemon gets
 * SIGTERM when the benchmark ends without stopping it (a failure that exits
 * at once leaves no daemon behind). */
static inline pid_t bench_start_daemon(const char *build_path, const char *sock, const char *log_level,
                                       const char *const *extra_args, void (*child_setup)(void)) {
        const char *bin = getenv("KFDBROKERD"), *argv[24];
        char level[32];
        size_t n = 0;
        pid_t pid;

        if (!bin)
                bin = build_path;
        pid_t parent = getpid();

        pid = fork();
        if (pid == 0) {
                if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
                        _exit(126);
                if (child_setup)
                        child_setup();
                snprintf(level, sizeof(level), "--log-level=%s", log_level);
                argv[n++] = bin;
                argv[n++] = "--no-config";
                argv[n++] = "--device=sim";
                argv[n++] = "--listen";
                argv[n++] = sock;
                argv[n++] = level;
                argv[n++] = "--log-target=stderr";
                for (size_t i = 0; extra_args && extra_args[i] && n < sizeof(argv) / sizeof(*argv) - 1; i++)
                        argv[n++] = extra_args[i];
                argv[n] = NULL;
                execv(bin, (char *const *) argv);
                _exit(127);
        }
        /* Listening, not only bound: a connection is taken (the file
         * exists between bind() and listen()). */
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        if (strlen(sock) >= sizeof sa.sun_path)
                return -1;
        memcpy(sa.sun_path, sock, strlen(sock) + 1);
        for (int i = 0; pid > 0 && i < 400; i++) {
                int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                bool up = fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof sa) == 0;

                if (fd >= 0)
                        close(fd);
                if (up)
                        return pid;
                usleep(10000);
        }
        return -1;
}

/*
 * A daemon of the benchmark's own whose policy grants compute dispatch to our
 * uid (in a shared context too): a private directory with the socket and a
 * policy.d holding that one rule. bench_grant_init() returns 0 or -errno;
 * bench_grant_start() the daemon's pid, or -1 as bench_start_daemon().
 */
typedef struct BenchGrant {
        char dir[64], policy_dir[96], policy_file[128], policy_arg[128], sock[96];
        pid_t pid;
} BenchGrant;

static inline int bench_grant_init(BenchGrant *b) {
        FILE *f;

        snprintf(b->dir, sizeof(b->dir), "/tmp/kfdbroker-bench.XXXXXX");
        if (!mkdtemp(b->dir))
                return -errno;
        snprintf(b->policy_dir, sizeof(b->policy_dir), "%s/policy.d", b->dir);
        snprintf(b->policy_file, sizeof(b->policy_file), "%s/50-bench.conf", b->policy_dir);
        snprintf(b->policy_arg, sizeof(b->policy_arg), "--policy-dir=%s", b->policy_dir);
        snprintf(b->sock, sizeof(b->sock), "%s/sock", b->dir);
        if (mkdir(b->policy_dir, 0755) < 0 || !(f = fopen(b->policy_file, "we")))
                return -errno;
        fprintf(f, "[Match]\nUser=%u\n[Limits]\nComputeDispatch=yes\n", (unsigned) getuid());
        fclose(f);
        return 0;
}

/* The daemon (build_path, as bench_start_daemon()) with the policy and extra
 * (NULL: nothing more). */
static inline pid_t bench_grant_start(BenchGrant *b, const char *build_path, const char *extra) {
        const char *args[] = { b->policy_arg, extra, NULL };

        b->pid = bench_start_daemon(build_path, b->sock, "warning", args, NULL);
        return b->pid;
}

static inline void bench_grant_stop(BenchGrant *b) {
        int status;

        kill(b->pid, SIGTERM);
        waitpid(b->pid, &status, 0);
        unlink(b->sock);
}

static inline void bench_grant_done(BenchGrant *b) {
        unlink(b->policy_file);
        rmdir(b->policy_dir);
        rmdir(b->dir);
}

static inline uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static inline int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* Sorts v. */
static inline double median(double *v, size_t n) {
        qsort(v, n, sizeof *v, cmp_double);
        return v[n / 2];
}

/* Sorts v (ns); the 50th and 99th percentiles in us. */
static inline void percentiles(uint64_t *v, size_t n, double *p50, double *p99) {
        qsort(v, n, sizeof(*v), cmp_u64);
        *p50 = (double) v[n / 2] / 1000.0;
        *p99 = (double) v[(n * 99) / 100] / 1000.0;
}

/* One line of a benchmark's report: what, the ratio, its goal (at most or at
 * least goal), whether it is met, and tail (may be empty). */
static inline void report_line(const char *what, double ratio, bool at_most, double goal, const char *tail) {
        bool ok = at_most ? ratio <= goal : ratio >= goal;

        printf("%-62s ratio %5.2f (goal %s %g) %s%s\n", what, ratio, at_most ? "<=" : ">=", goal, ok ? "ok" : "below",
               tail);
}

static inline void report(const char *what, double ratio, bool at_most, double goal) {
        report_line(what, ratio, at_most, goal, "");
}

/* One round of a noisy-neighbour benchmark: stop ends the round's threads;
 * measuring is set while the light client's samples count. */
typedef struct BenchNoise {
        atomic_bool stop;
        atomic_bool measuring;
} BenchNoise;

/* A CPU burner (pthread start routine, userdata a BenchNoise): spins until
 * the round stops. */
static inline void *bench_burner_thread(void *userdata) {
        BenchNoise *n = userdata;
        volatile uint64_t x = 0;

        while (!atomic_load(&n->stop))
                x++;
        return NULL;
}
