/* SPDX-License-Identifier: MIT */
/*
 * A connect flood next to a light client (issue 16: 80 000 connects raised a
 * victim's p50 from 0.4 ms to 453 ms, most of it the daemon waiting on its
 * log). The flood may cost the victim what the CPU it takes costs, no more:
 * the victim's round trips (a 4-byte fill, submitted and waited for) are
 * timed alone, next to FLOODERS processes that only burn CPU (the baseline:
 * the contention the flood causes on these cores), and next to FLOODERS
 * processes that connect, say Hello and hang up in a loop. The daemon logs at
 * its default level to a pipe read slowly (FEED_BYTES_PER_S), which stands
 * for a journald that does not keep up. Prints the ratio flood / burners,
 * with the daemon's default connect rate per user (--max-connect-rate-per-user,
 * whose one-second burst the flooders spend before the victim is timed) and
 * with no rate (then only the order in which the loop serves clients —
 * established sessions before young ones before new connections — helps).
 * Starts its own kfdbrokerd --device=sim (path from $KFDBROKERD or the build tree).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kfdbroker.h"

#define ROUNDS 1000
#define FLOODERS 2
#define FEED_BYTES_PER_S (64u << 10)

static uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static void die(const char *what, int r) {
        fprintf(stderr, "bench-flood: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

/* The slow reader of the daemon's log: FEED_BYTES_PER_S, in 4 KiB reads. */
static pid_t start_log_reader(int fd) {
        pid_t pid = fork();

        if (pid == 0) {
                char buf[4096];
                for (;;) {
                        if (read(fd, buf, sizeof(buf)) <= 0)
                                _exit(0);
                        usleep((useconds_t) (1000000ull * sizeof(buf) / FEED_BYTES_PER_S));
                }
        }
        return pid;
}

static pid_t start_daemon(const char *sock, int log_fd, const char *rate_arg) {
        const char *bin = getenv("KFDBROKERD");
        pid_t pid;

        if (!bin)
                bin = KFDBROKERD_BUILD_PATH;
        pid = fork();
        if (pid == 0) {
                dup2(log_fd, STDERR_FILENO);
                execl(bin, bin, "--device=sim", "--listen", sock, "--log-target=stderr", rate_arg, (char *) NULL);
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

/* The victim's session and its buffer; the daemon may not listen yet (its
 * socket file appears at bind(), before listen()). */
static kfdb_session *victim_session(const char *sock, kfdb_buffer **b) {
        kfdb_session *s = NULL;
        int r;

        for (int i = 0; i < 200; i++) {
                r = kfdb_session_new(sock, "victim", &s);
                if (r != -ECONNREFUSED)
                        break;
                usleep(10000);
        }
        if (r < 0 || (r = kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, b)) < 0)
                die("victim setup", r);
        return s;
}

/* Victim: p50 and p99 in ms of ROUNDS fill round trips. */
static void victim(kfdb_session *s, kfdb_buffer *b, double *p50, double *p99) {
        uint64_t t[ROUNDS];
        kfdb_batch *batch;
        int r;

        if ((r = kfdb_batch_new(s, &batch)) < 0)
                die("batch", r);
        for (int i = 0; i < ROUNDS; i++) {
                uint64_t fence, t0 = now_ns();
                kfdb_batch_reset(batch);
                if ((r = kfdb_batch_fill(batch, b, 0, 4, (uint32_t) i)) < 0 ||
                    (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 30000)) < 0)
                        die("victim fill", r);
                t[i] = now_ns() - t0;
        }
        kfdb_batch_free(batch);
        qsort(t, ROUNDS, sizeof(t[0]), cmp_u64);
        *p50 = (double) t[ROUNDS / 2] / 1e6;
        *p99 = (double) t[ROUNDS * 99 / 100] / 1e6;
}

/* FLOODERS processes running fn until killed (after warm_up_us to get
 * going); connects counts their connects. */
static void start_load(pid_t *pids, void (*fn)(const char *, volatile uint64_t *), const char *sock,
                       volatile uint64_t *connects, unsigned warm_up_us) {
        for (int i = 0; i < FLOODERS; i++) {
                connects[i] = 0;
                pids[i] = fork();
                if (pids[i] == 0) {
                        fn(sock, connects + i);
                        _exit(0);
                }
        }
        usleep(warm_up_us);
}

static void stop_load(pid_t *pids) {
        for (int i = 0; i < FLOODERS; i++) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], NULL, 0);
        }
}

static void burn(const char *sock, volatile uint64_t *n) {
        for (volatile uint64_t x = 0;; x++)
                ;
}

static void flood(const char *sock, volatile uint64_t *n) {
        for (;;) {
                kfdb_session *s;
                if (kfdb_session_new(sock, "flood", &s) == 0)
                        kfdb_session_free(s);
                (*n)++;
        }
}

/* Ends the victim's session, the daemon and its log reader; removes the socket and its directory. */
static void stop(kfdb_session *s, kfdb_buffer *b, pid_t daemon, pid_t reader, const char *sock, const char *dir) {
        kfdb_buffer_free(b);
        kfdb_session_free(s);
        kill(daemon, SIGTERM);
        waitpid(daemon, NULL, 0);
        kill(reader, SIGTERM);
        waitpid(reader, NULL, 0);
        unlink(sock);
        rmdir(dir);
}

/* The victim next to the connect flood, on a daemon of its own started with
 * rate_arg; prints the line and returns p50 (ms) in *f50, p99 in *f99. */
static void flood_round(const char *label, const char *rate_arg, volatile uint64_t *connects, double *f50,
                        double *f99) {
        char dir[] = "/tmp/kfdbroker-bench.XXXXXX", sock[128];
        pid_t daemon, reader, load[FLOODERS];
        uint64_t t0, total = 0;
        kfdb_session *s;
        kfdb_buffer *b;
        int logpipe[2];

        if (!mkdtemp(dir) || pipe(logpipe) < 0)
                die("setup", errno);
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        reader = start_log_reader(logpipe[0]);
        daemon = start_daemon(sock, logpipe[1], rate_arg);
        close(logpipe[0]);
        close(logpipe[1]);
        s = victim_session(sock, &b);
        /* 1.5 s: longer than the one-second burst of the connect rate. */
        t0 = now_ns();
        start_load(load, flood, sock, connects, 1500000);
        victim(s, b, f50, f99);
        stop_load(load);
        for (int i = 0; i < FLOODERS; i++)
                total += connects[i];
        printf("  next to %d connect flooders, %s (%.0f connects/s): p50 %7.3f ms  p99 %7.3f ms\n", FLOODERS, label,
               (double) total * 1e9 / (double) (now_ns() - t0), *f50, *f99);

        stop(s, b, daemon, reader, sock, dir);
}

int main(void) {
        char dir[] = "/tmp/kfdbroker-bench.XXXXXX", sock[128];
        double a50, a99, b50, b99, f50, f99, u50, u99;
        volatile uint64_t *connects;
        pid_t daemon, reader, load[FLOODERS];
        kfdb_session *s;
        kfdb_buffer *b;
        int logpipe[2];

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (!mkdtemp(dir) || pipe(logpipe) < 0)
                die("setup", errno);
        connects = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (connects == MAP_FAILED)
                die("mmap", errno);
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        reader = start_log_reader(logpipe[0]);
        daemon = start_daemon(sock, logpipe[1], NULL);
        close(logpipe[0]);
        close(logpipe[1]);
        s = victim_session(sock, &b);

        printf("connect flood next to a light client (simulated GPU, daemon log read at %u KiB/s)\n",
               FEED_BYTES_PER_S >> 10);
        victim(s, b, &a50, &a99);
        printf("victim fill round trip alone:               p50 %7.3f ms  p99 %7.3f ms\n", a50, a99);
        start_load(load, burn, sock, connects, 200000);
        victim(s, b, &b50, &b99);
        stop_load(load);
        printf("  next to %d CPU burners (baseline):         p50 %7.3f ms  p99 %7.3f ms\n", FLOODERS, b50, b99);
        stop(s, b, daemon, reader, sock, dir);

        flood_round("default connect rate", NULL, connects, &f50, &f99);
        flood_round("no connect rate", "--max-connect-rate-per-user=0", connects, &u50, &u99);
        printf("flood / burners, default connect rate: p50 %.2fx  p99 %.2fx   (goal: p50 <= 2x)\n", f50 / b50,
               f99 / b99);
        printf("flood / burners, no connect rate:      p50 %.2fx  p99 %.2fx\n", u50 / b50, u99 / b99);
        return 0;
}
