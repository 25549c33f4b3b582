/* SPDX-License-Identifier: MIT */
/*
 * Benchmarks of the first slice, each printed next to a baseline measured in
 * the same run (compare ratios; machines here are small and noisy):
 *   1. no-op job round trip (submit -> completion seen through the session
 *      page) vs a raw SOCK_SEQPACKET request/response between two processes;
 *   2. 256 MiB GPU copy vs memcpy of the same size;
 *   3. AllocBuffer+FreeBuffer pairs vs memfd_create+ftruncate+mmap+munmap+close.
 * Starts its own kfdbrokerd --device=sim (path from $KFDBROKERD or the build tree).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kfdbroker.h"

#define ROUND_TRIPS 3000
#define COPY_SIZE (256ull << 20)
#define ALLOC_PAIRS 2000
#define ALLOC_SIZE (64u << 10)

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

static void die(const char *what, int r) {
        fprintf(stderr, "bench-broker: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

static pid_t start_daemon(const char *sock) {
        const char *bin = getenv("KFDBROKERD");
        pid_t pid;

        if (!bin)
                bin = KFDBROKERD_BUILD_PATH;
        pid = fork();
        if (pid == 0) {
                execl(bin, bin, "--device=sim", "--listen", sock, "--log-level=warning",
                      "--log-target=stderr", (char *) NULL);
                _exit(127);
        }
        for (int i = 0; i < 400; i++) {
                if (access(sock, F_OK) == 0)
                        return pid;
                usleep(10000);
        }
        die("kfdbrokerd did not start", ETIMEDOUT);
        return -1;
}

static void baseline_seqpacket(double *p50, double *p99) {
        uint64_t *t = calloc(ROUND_TRIPS, sizeof(*t));
        char buf[64] = "ping";
        int sv[2];
        pid_t child;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) < 0)
                die("socketpair", errno);
        child = fork();
        if (child == 0) {
                close(sv[0]);
                for (;;) {
                        ssize_t n = recv(sv[1], buf, sizeof(buf), 0);
                        if (n <= 0)
                                _exit(0);
                        if (send(sv[1], buf, (size_t) n, 0) < 0)
                                _exit(1);
                }
        }
        close(sv[1]);
        for (int i = 0; i < ROUND_TRIPS + 100; i++) {
                uint64_t t0 = now_ns();
                if (send(sv[0], buf, sizeof(buf), 0) < 0 || recv(sv[0], buf, sizeof(buf), 0) <= 0)
                        die("baseline round trip", errno);
                if (i >= 100)
                        t[i - 100] = now_ns() - t0;
        }
        close(sv[0]);
        waitpid(child, NULL, 0);
        percentiles(t, ROUND_TRIPS, p50, p99);
        free(t);
}

static void bench_round_trip(kfdb_session *s) {
        uint64_t *t = calloc(ROUND_TRIPS, sizeof(*t));
        double p50, p99, b50, b99;
        kfdb_batch *batch;
        kfdb_event *ev;
        int r;

        if ((r = kfdb_event_create(s, false, &ev)) < 0 || (r = kfdb_batch_new(s, &batch)) < 0)
                die("setup", r);
        for (int i = 0; i < ROUND_TRIPS + 100; i++) {
                uint64_t fence, t0 = now_ns();
                if ((r = kfdb_batch_signal_event(batch, ev)) < 0 ||
                    (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 ||
                    (r = kfdb_fence_wait(s, fence, 10000)) < 0)
                        die("no-op job", r);
                if (i >= 100)
                        t[i - 100] = now_ns() - t0;
        }
        percentiles(t, ROUND_TRIPS, &p50, &p99);
        baseline_seqpacket(&b50, &b99);
        printf("no-op job round trip:   p50 %8.1f us  p99 %8.1f us\n", p50, p99);
        printf("  raw SEQPACKET echo:   p50 %8.1f us  p99 %8.1f us   ratio p50 %.1fx  p99 %.1fx\n",
               b50, b99, p50 / b50, p99 / b99);
        kfdb_batch_free(batch);
        kfdb_event_destroy(ev);
        free(t);
}

static void bench_copy(kfdb_session *s) {
        kfdb_buffer *a, *b;
        kfdb_batch *batch;
        uint64_t fence, t0, gpu_ns = UINT64_MAX, cpu_ns = UINT64_MAX;
        char *x, *y;
        int r;

        if ((r = kfdb_buffer_alloc(s, COPY_SIZE, KFDB_PLACEMENT_GTT, &a)) < 0 ||
            (r = kfdb_buffer_alloc(s, COPY_SIZE, KFDB_PLACEMENT_GTT, &b)) < 0 ||
            (r = kfdb_batch_new(s, &batch)) < 0)
                die("copy setup", r);
        /* Touch both buffers once (first-touch page faults are not the copy's cost). */
        if ((r = kfdb_batch_fill(batch, a, 0, COPY_SIZE, 0x5a5a5a5a)) < 0 ||
            (r = kfdb_batch_fill(batch, b, 0, COPY_SIZE, 0)) < 0 ||
            (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 60000)) < 0)
                die("fill", r);
        for (int i = 0; i < 3; i++) {
                t0 = now_ns();
                if ((r = kfdb_batch_copy(batch, b, 0, a, 0, COPY_SIZE)) < 0 ||
                    (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 ||
                    (r = kfdb_fence_wait(s, fence, 60000)) < 0)
                        die("copy", r);
                gpu_ns = now_ns() - t0 < gpu_ns ? now_ns() - t0 : gpu_ns;
        }
        x = malloc(COPY_SIZE);
        y = malloc(COPY_SIZE);
        memset(x, 0x5a, COPY_SIZE);
        memset(y, 0, COPY_SIZE);
        for (int i = 0; i < 3; i++) {
                t0 = now_ns();
                memcpy(y, x, COPY_SIZE);
                __asm__ __volatile__("" ::"r"(y) : "memory");
                cpu_ns = now_ns() - t0 < cpu_ns ? now_ns() - t0 : cpu_ns;
        }
        printf("256 MiB GPU copy:       %8.2f GB/s (best of 3, submit to completion seen)\n",
               (double) COPY_SIZE / (double) gpu_ns);
        printf("  memcpy same size:     %8.2f GB/s   ratio %.2fx\n", (double) COPY_SIZE / (double) cpu_ns,
               (double) cpu_ns / (double) gpu_ns);
        free(x);
        free(y);
        kfdb_batch_free(batch);
        kfdb_buffer_free(a);
        kfdb_buffer_free(b);
}

static void bench_alloc(kfdb_session *s) {
        uint64_t t0, broker_ns, memfd_ns;
        int r;

        t0 = now_ns();
        for (int i = 0; i < ALLOC_PAIRS; i++) {
                kfdb_buffer *b;
                if ((r = kfdb_buffer_alloc(s, ALLOC_SIZE, KFDB_PLACEMENT_GTT, &b)) < 0 ||
                    (r = kfdb_buffer_free(b)) < 0)
                        die("alloc/free", r);
        }
        broker_ns = now_ns() - t0;
        t0 = now_ns();
        for (int i = 0; i < ALLOC_PAIRS; i++) {
                int fd = memfd_create("bench", MFD_CLOEXEC);
                void *p;
                if (fd < 0 || ftruncate(fd, ALLOC_SIZE) < 0)
                        die("memfd", errno);
                p = mmap(NULL, ALLOC_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (p == MAP_FAILED)
                        die("mmap", errno);
                munmap(p, ALLOC_SIZE);
                close(fd);
        }
        memfd_ns = now_ns() - t0;
        printf("AllocBuffer+FreeBuffer: %8.0f pairs/s (64 KiB)\n", ALLOC_PAIRS * 1e9 / (double) broker_ns);
        printf("  memfd+mmap+close:     %8.0f pairs/s   ratio %.1fx slower\n",
               ALLOC_PAIRS * 1e9 / (double) memfd_ns, (double) broker_ns / (double) memfd_ns);
}

int main(void) {
        char dir[] = "/tmp/kfdbroker-bench.XXXXXX", sock[128];
        kfdb_session *s;
        pid_t pid;
        int r, status;

        if (!mkdtemp(dir))
                die("mkdtemp", errno);
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        pid = start_daemon(sock);
        r = kfdb_session_new(sock, "bench-broker", &s);
        if (r < 0)
                die("connect", r);

        printf("kfdbroker benchmarks (simulated GPU; baselines measured in the same run)\n");
        bench_round_trip(s);
        bench_copy(s);
        bench_alloc(s);

        kfdb_session_free(s);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        unlink(sock);
        rmdir(dir);
        return 0;
}
