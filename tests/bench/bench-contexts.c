/* SPDX-License-Identifier: MIT */
/*
 * What sessions and GPU contexts cost the daemon, under the default policy
 * (a GPU context per session, made on its first dispatch):
 *   1. resident memory (RSS) the daemon grows by per copy-only session, at
 *      300 sessions, each with one 4 KiB buffer and one finished fill
 *      (goal: <= 64 KiB each);
 *   2. the same per compute session, at 100 sessions, each with one 4 KiB
 *      buffer and one finished dispatch (goal: <= 1 MiB each);
 *   3. what a context costs in time: a session's first dispatch (which brings
 *      its context up) against its second, in the median of the 100;
 *   4. the same with worker processes (a daemon whose simulated kernel has no
 *      secondary contexts, KFD 1.18), at 20 sessions: the daemon's RSS per
 *      session, each worker's proportional set size (PSS: its own pages and
 *      its share of the program and libraries), both together against the
 *      1 MiB goal, and a worker's start against a dispatch.
 * Baselines come from the same run. On the simulator, memory the GPU context
 * never touches (the CWSR save areas) is not resident; on hardware each
 * compute queue's CWSR area is real GTT memory of tens of MiB.
 * Starts its own kfdbrokerd --device=sim (path from $KFDBROKERD or the build tree).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kfdbroker.h"

#define COPY_SESSIONS 300
#define COMPUTE_SESSIONS 100
#define WORKER_SESSIONS 20

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static void die(const char *what, int r) {
        fprintf(stderr, "bench-contexts: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, size_t n) {
        qsort(v, n, sizeof(*v), cmp_u64);
        return v[n / 2];
}

static bool can_connect(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        bool ok;

        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        ok = fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0;
        if (fd >= 0)
                close(fd);
        return ok;
}

static pid_t start_daemon(const char *sock, const char *version) {
        const char *bin = getenv("KFDBROKERD");
        pid_t pid;

        if (!bin)
                bin = KFDBROKERD_BUILD_PATH;
        pid = fork();
        if (pid == 0) {
                execl(bin, bin, "--device=sim", "--listen", sock, "--log-level=warning", "--log-target=stderr",
                      "--max-connections-per-user=1000", "--max-contexts=128", version, (char *) NULL);
                _exit(127);
        }
        /* Until it listens: the socket's file appears at bind(), a moment
         * before listen(), when a connect is still refused. */
        for (int i = 0; i < 400; i++) {
                if (access(sock, F_OK) == 0 && can_connect(sock))
                        return pid;
                usleep(10000);
        }
        die("kfdbrokerd did not start", ETIMEDOUT);
        return -1;
}

/* A field of /proc/PID/<file> in KiB ("VmRSS" of status, "Pss" of smaps_rollup). */
static uint64_t proc_kib(pid_t pid, const char *file, const char *field) {
        char path[64], line[256];
        size_t n = strlen(field);
        uint64_t kib = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/%s", (int) pid, file);
        f = fopen(path, "re");
        if (!f)
                die(path, errno);
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, field, n) == 0 && line[n] == ':') {
                        kib = strtoull(line + n + 1, NULL, 10);
                        break;
                }
        fclose(f);
        return kib;
}

/* The daemon's resident memory, in KiB (VmRSS). */
static uint64_t rss_kib(pid_t pid) {
        return proc_kib(pid, "status", "VmRSS");
}

/* Lets the daemon settle: completions published, allocator caches trimmed
 * as far as it does on its own. */
static void settle(void) {
        usleep(300 * 1000);
}

static void wait_job(kfdb_session *s, kfdb_batch *b, const char *what) {
        uint64_t fence;
        int r = kfdb_batch_submit(b, NULL, &fence);

        if (r < 0)
                die(what, r);
        r = kfdb_fence_wait(s, fence, 60000);
        if (r < 0) {
                fprintf(stderr, "bench-contexts: %s: %s (%s)\n", what, strerror(-r), kfdb_session_last_error(s));
                exit(1);
        }
        kfdb_batch_free(b);
}

static kfdb_session *copy_session(const char *sock) {
        kfdb_session *s;
        kfdb_buffer *buf;
        kfdb_batch *b;
        int r;

        if ((r = kfdb_session_new(sock, "bench-copy", &s)) < 0)
                die("connect", r);
        if ((r = kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &buf)) < 0)
                die("alloc", r);
        if ((r = kfdb_batch_new(s, &b)) < 0 || (r = kfdb_batch_fill(b, buf, 0, 4096, 0x11223344u)) < 0)
                die("fill", r);
        wait_job(s, b, "fill");
        return s;
}

#ifdef SAXPY_HSACO
/* A session with one buffer and one finished dispatch; the times of its first
 * dispatch (the context comes up) and of a second one. */
static kfdb_session *compute_session(const char *sock, uint64_t *ret_first, uint64_t *ret_second) {
        kfdb_code_object *co;
        kfdb_session *s;
        kfdb_buffer *buf;
        kfdb_batch *b;
        float a = 2.0f;
        uint32_t n = 1024, block = 64;
        uint64_t t;
        int r;

        if ((r = kfdb_session_new(sock, "bench-compute", &s)) < 0)
                die("connect", r);
        if ((r = kfdb_code_object_load_file(s, SAXPY_HSACO, &co)) < 0)
                die("load saxpy", r);
        if ((r = kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &buf)) < 0)
                die("alloc", r);
        kfdb_arg args[] = { kfdb_arg_value(&a, 4), kfdb_arg_buffer(buf, 0), kfdb_arg_buffer(buf, 0),
                            kfdb_arg_value(&n, 4) };
        for (int round = 0; round < 2; round++) {
                t = now_ns();
                if ((r = kfdb_batch_new(s, &b)) < 0 || (r = kfdb_batch_dispatch(b, co, "saxpy", 1, &n, &block, args, 4)) < 0)
                        die("dispatch", r);
                wait_job(s, b, "dispatch");
                t = now_ns() - t;
                if (round == 0)
                        *ret_first = t;
                else
                        *ret_second = t;
        }
        return s;
}
#endif

int main(void) {
        char dir[] = "/tmp/kfdbroker-bench.XXXXXX", sock[128];
        static kfdb_session *sessions[COPY_SESSIONS + COMPUTE_SESSIONS];
        struct rlimit rl;
        uint64_t base, after_copy;
        pid_t pid;
        int status;

        /* Each session holds a few fds here (socket, page, eventfd, buffers). */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (!mkdtemp(dir))
                die("mkdtemp", errno);
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        pid = start_daemon(sock, "--sim-kfd-version=1.19");

        /* Warm up: the first session of each kind sets up what stays. */
        kfdb_session_free(copy_session(sock));
        settle();
        base = rss_kib(pid);
        for (unsigned i = 0; i < COPY_SESSIONS; i++)
                sessions[i] = copy_session(sock);
        settle();
        after_copy = rss_kib(pid);
        printf("copy-only sessions: daemon RSS %lu -> %lu KiB over %u sessions: %.1f KiB each (goal <= 64 KiB)\n",
               (unsigned long) base, (unsigned long) after_copy, COPY_SESSIONS,
               (double) (after_copy - base) / COPY_SESSIONS);

#ifdef SAXPY_HSACO
        {
                static uint64_t first[COMPUTE_SESSIONS], second[COMPUTE_SESSIONS];
                uint64_t w1, w2, after_compute;

                kfdb_session_free(compute_session(sock, &w1, &w2));
                settle();
                base = rss_kib(pid);
                for (unsigned i = 0; i < COMPUTE_SESSIONS; i++)
                        sessions[COPY_SESSIONS + i] = compute_session(sock, &first[i], &second[i]);
                settle();
                after_compute = rss_kib(pid);
                printf("compute sessions: daemon RSS %lu -> %lu KiB over %u sessions (each its own GPU context): "
                       "%.1f KiB each (goal <= 1024 KiB)\n",
                       (unsigned long) base, (unsigned long) after_compute, COMPUTE_SESSIONS,
                       (double) (after_compute - base) / COMPUTE_SESSIONS);
                uint64_t f = median(first, COMPUTE_SESSIONS), s = median(second, COMPUTE_SESSIONS);
                printf("GPU context: a session's first dispatch %.3f ms (brings its context up), its second "
                       "%.3f ms (median of %u): %.3f ms for the context, %.1fx a dispatch\n",
                       (double) f / 1e6, (double) s / 1e6, COMPUTE_SESSIONS, (double) (f > s ? f - s : 0) / 1e6,
                       (double) f / (double) s);
        }
#else
        printf("compute sessions: skipped (the saxpy kernel was not built: clang-15 is missing)\n");
#endif
        for (unsigned i = 0; i < COPY_SESSIONS + COMPUTE_SESSIONS; i++)
                kfdb_session_free(sessions[i]);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);

#ifdef SAXPY_HSACO
        {
                static uint64_t first[WORKER_SESSIONS], second[WORKER_SESSIONS];
                kfdb_gpu_context list[WORKER_SESSIONS + 1];
                kfdb_gpu_contexts cs;
                uint64_t w1, w2, after, pss = 0, base_pss, after_pss;
                unsigned workers = 0;

                /* A socket of its own: the first daemon's may still be there. */
                snprintf(sock, sizeof(sock), "%s/sock-workers", dir);
                pid = start_daemon(sock, "--sim-kfd-version=1.18");
                kfdb_session_free(compute_session(sock, &w1, &w2));
                settle();
                base = rss_kib(pid);
                base_pss = proc_kib(pid, "smaps_rollup", "Pss");
                for (unsigned i = 0; i < WORKER_SESSIONS; i++)
                        sessions[i] = compute_session(sock, &first[i], &second[i]);
                settle();
                after = rss_kib(pid);
                after_pss = proc_kib(pid, "smaps_rollup", "Pss");
                if (kfdb_gpu_contexts_get(sessions[0], &cs, list, WORKER_SESSIONS + 1) < 0 ||
                    strcmp(cs.mechanism, "process") != 0)
                        die("the daemon at KFD 1.18 does not run worker processes", EINVAL);
                for (size_t i = 0; i < cs.n && i < WORKER_SESSIONS + 1; i++)
                        if (list[i].pid) {
                                pss += proc_kib((pid_t) list[i].pid, "smaps_rollup", "Pss");
                                workers++;
                        }
                if (workers == 0)
                        die("no worker process found", ESRCH);
                printf("worker processes: daemon RSS %lu -> %lu KiB over %u sessions: %.1f KiB each; each worker "
                       "%.1f KiB PSS (mean of %u)\n",
                       (unsigned long) base, (unsigned long) after, WORKER_SESSIONS,
                       (double) (after - base) / WORKER_SESSIONS, (double) pss / workers, workers);
                {
                        /* Each session here has a worker of its own (fewer
                         * sessions than --max-contexts): both parts are its.
                         * In PSS, pages the daemon and a worker share (the
                         * context's memory the daemon maps too) count once
                         * between them; the daemon's RSS counts them whole. */
                        double daemon_pss = ((double) after_pss - (double) base_pss) / WORKER_SESSIONS;
                        double all = daemon_pss + (double) pss / workers;

                        printf("compute session with a worker process, in all: daemon PSS %.1f KiB + worker PSS "
                               "%.1f KiB = %.1f KiB (goal <= 1024 KiB) %s\n",
                               daemon_pss, (double) pss / workers, all, all <= 1024.0 ? "ok" : "above");
                }
                uint64_t f = median(first, WORKER_SESSIONS), s = median(second, WORKER_SESSIONS);
                printf("worker process: a session's first dispatch %.3f ms (starts its worker), its second %.3f ms "
                       "(median of %u): %.3f ms for the worker, %.1fx a dispatch\n",
                       (double) f / 1e6, (double) s / 1e6, WORKER_SESSIONS, (double) (f > s ? f - s : 0) / 1e6,
                       (double) f / (double) s);
                for (unsigned i = 0; i < WORKER_SESSIONS; i++)
                        kfdb_session_free(sessions[i]);
                kill(pid, SIGTERM);
                waitpid(pid, &status, 0);
        }
#endif
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        unlink(sock);
        snprintf(sock, sizeof(sock), "%s/sock-workers", dir);
        unlink(sock);
        rmdir(dir);
        return 0;
}
