/* SPDX-License-Identifier: MIT */
/*
 * Dispatch round trip through the broker: an empty kernel (one workgroup of
 * one work-item) submitted and its completion seen through the session
 * page, against the SDMA no-op job round trip measured in the same run (and
 * a no-op job on the compute queue, which separates the cost of the queue
 * from the cost of the dispatch). The three are interleaved so that noise
 * on this small machine hits them alike; compare the ratios.
 * Starts its own kfdbrokerd --device=sim (path from $KFDBROKERD or the build tree).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kfdbroker.h"

#define ROUND_TRIPS 2000
#define WARMUP 100

#ifdef EMPTY_HSACO

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static void percentiles(uint64_t *v, size_t n, double *p50, double *p99) {
        qsort(v, n, sizeof(*v), cmp_u64);
        *p50 = (double) v[n / 2] / 1000.0;
        *p99 = (double) v[(n * 99) / 100] / 1000.0;
}

static void die(kfdb_session *s, const char *what, int r) {
        fprintf(stderr, "bench-compute: %s: %s%s%s\n", what, strerror(r < 0 ? -r : r), s ? ": " : "",
                s ? kfdb_session_last_error(s) : "");
        exit(1);
}

/* The daemon's policy denies compute dispatch unless a rule grants it: one
 * rule in dir/policy.d grants it to our uid. */
static pid_t start_daemon(const char *dir, const char *sock) {
        const char *bin = getenv("KFDBROKERD");
        char policy[160], file[200], arg[180];
        pid_t pid;
        FILE *f;

        if (!bin)
                bin = KFDBROKERD_BUILD_PATH;
        snprintf(policy, sizeof(policy), "%s/policy.d", dir);
        snprintf(file, sizeof(file), "%s/50-bench.conf", policy);
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policy);
        if (mkdir(policy, 0755) < 0 || !(f = fopen(file, "we")))
                die(NULL, "writing the policy", errno);
        fprintf(f, "[Match]\nUser=%u\n[Limits]\nComputeDispatch=yes\n", (unsigned) getuid());
        fclose(f);
        pid = fork();
        if (pid == 0) {
                execl(bin, bin, "--device=sim", "--listen", sock, "--log-level=warning", "--log-target=stderr",
                      arg, (char *) NULL);
                _exit(127);
        }
        for (int i = 0; i < 400; i++) {
                if (access(sock, F_OK) == 0)
                        return pid;
                usleep(10000);
        }
        die(NULL, "kfdbrokerd did not start", ETIMEDOUT);
        return -1;
}

typedef enum Kind { KIND_SDMA_NOP, KIND_COMPUTE_NOP, KIND_DISPATCH, _KIND_MAX } Kind;

/* One job of the kind, submitted and waited for; returns its round trip in ns. */
static uint64_t round_trip(kfdb_session *s, kfdb_batch *b, Kind k, kfdb_event *ev, const kfdb_code_object *co) {
        const uint32_t one = 1;
        uint64_t fence, t0 = now_ns();
        int r;

        switch (k) {
        case KIND_SDMA_NOP:
                r = kfdb_batch_signal_event_on(b, ev, KFDB_ENGINE_SDMA);
                break;
        case KIND_COMPUTE_NOP:
                r = kfdb_batch_signal_event_on(b, ev, KFDB_ENGINE_COMPUTE);
                break;
        default:
                r = kfdb_batch_dispatch(b, co, "empty", 1, &one, &one, NULL, 0);
                break;
        }
        if (r < 0 || (r = kfdb_batch_submit(b, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 10000)) < 0)
                die(s, "round trip", r);
        return now_ns() - t0;
}

static void bench(void) {
        static const char *const names[_KIND_MAX] = {
                [KIND_SDMA_NOP] = "SDMA no-op job", [KIND_COMPUTE_NOP] = "compute no-op job",
                [KIND_DISPATCH] = "empty-kernel dispatch",
        };
        char dir[] = "/tmp/kfdbroker-bench.XXXXXX", sock[128];
        uint64_t *t[_KIND_MAX];
        double p50[_KIND_MAX], p99[_KIND_MAX];
        kfdb_code_object *co = NULL;
        kfdb_session *s;
        kfdb_batch *b;
        kfdb_event *ev;
        pid_t pid;
        int r, status;

        if (!mkdtemp(dir))
                die(NULL, "mkdtemp", errno);
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        pid = start_daemon(dir, sock);
        r = kfdb_session_new(sock, "bench-compute", &s);
        if (r < 0)
                die(NULL, "connect", r);
        if ((r = kfdb_code_object_load_file(s, EMPTY_HSACO, &co)) < 0)
                die(s, "load " EMPTY_HSACO, r);
        if ((r = kfdb_event_create(s, false, &ev)) < 0 || (r = kfdb_batch_new(s, &b)) < 0)
                die(s, "setup", r);
        for (int k = 0; k < _KIND_MAX; k++) {
                t[k] = calloc(ROUND_TRIPS, sizeof(uint64_t));
                if (!t[k])
                        die(s, "calloc", ENOMEM);
        }
        for (int i = 0; i < WARMUP + ROUND_TRIPS; i++)
                for (int k = 0; k < _KIND_MAX; k++) {
                        uint64_t ns = round_trip(s, b, (Kind) k, ev, co);
                        if (i >= WARMUP)
                                t[k][i - WARMUP] = ns;
                }
        for (int k = 0; k < _KIND_MAX; k++)
                percentiles(t[k], ROUND_TRIPS, &p50[k], &p99[k]);

        printf("round trip, submit -> completion seen in the session page (%d each, interleaved):\n", ROUND_TRIPS);
        for (int k = 0; k < _KIND_MAX; k++) {
                printf("  %-22s p50 %8.1f us  p99 %8.1f us", names[k], p50[k], p99[k]);
                if (k != KIND_SDMA_NOP)
                        printf("   vs SDMA no-op: p50 %.2fx  p99 %.2fx", p50[k] / p50[KIND_SDMA_NOP],
                               p99[k] / p99[KIND_SDMA_NOP]);
                printf("\n");
        }
        printf("  dispatch vs compute no-op: p50 %.2fx  p99 %.2fx (the cost of the dispatch itself)\n",
               p50[KIND_DISPATCH] / p50[KIND_COMPUTE_NOP], p99[KIND_DISPATCH] / p99[KIND_COMPUTE_NOP]);

        for (int k = 0; k < _KIND_MAX; k++)
                free(t[k]);
        kfdb_session_free(s);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        {
                char path[200];
                snprintf(path, sizeof(path), "%s/policy.d/50-bench.conf", dir);
                unlink(path);
                snprintf(path, sizeof(path), "%s/policy.d", dir);
                rmdir(path);
        }
        unlink(sock);
        rmdir(dir);
}
#endif

int main(void) {
        printf("kfdbroker compute benchmark (simulated GPU; baselines measured in the same run)\n");
#ifdef EMPTY_HSACO
        bench();
#else
        printf("skipped: the empty kernel was not built (clang-15 with the AMDGPU device libraries is missing)\n");
#endif
        return 0;
}
