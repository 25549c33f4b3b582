/* SPDX-License-Identifier: MIT */
/*
 * What an idle session costs the daemon, measured from outside (issue 32
 * item 2): the daemon's resident memory (VmRSS, and its anonymous and shared
 * parts, RssAnon and RssShmem) and its open fds (/proc/PID/fd) before and
 * after SESSIONS more libkfdbroker sessions that said Hello and nothing
 * else, in three rounds, each on a daemon of its own:
 *   - the old feature set (KFDBROKER_LAZY_SESSION=0: Hello gives the session
 *     page and its eventfd, and the library opens the submit ring and the
 *     fence page at once), what an older client costs;
 *   - the new one (the "lazy-session" Hello bit: none of those until used);
 *   - the new one after each session ran one 4 KiB fill, when it holds
 *     everything the old one held at Hello, plus a buffer.
 * Prints KiB and fds per session and the ratio of the new round's KiB to
 * the goal of 8 KiB (and to the old round, measured in the same run).
 * WARMUP sessions stay open before the base is read, so what the first
 * sessions set up once (heap arenas, tables) is not counted.
 * Starts its own kfdbrokerd --device=sim (path from $KFDBROKERD or the build
 * tree); SESSIONS from argv[1] (default 2000: with 5 fds a session, as many
 * as the daemon's 20000 fds take with room for its reserve).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "kfdbroker.h"

#define DEFAULT_SESSIONS 2000u
#define WARMUP 20u
#define GOAL_KIB 8.0

static void die(const char *what, int r) {
        fprintf(stderr, "bench-sessions: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

/* A field of /proc/PID/status in KiB. */
static uint64_t status_kib(pid_t pid, const char *field) {
        char path[64], line[256];
        size_t n = strlen(field);
        uint64_t kib = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
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

static uint64_t open_fds(pid_t pid) {
        char path[64];
        uint64_t n = 0;
        DIR *d;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
        d = opendir(path);
        if (!d)
                die(path, errno);
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

typedef struct Sample {
        uint64_t rss, anon, shmem, fds;
} Sample;

static Sample sample(pid_t pid) {
        /* Let the daemon finish what the last session asked (a Hello's
         * reply is sent before the loop goes idle). */
        usleep(300 * 1000);
        return (Sample) { .rss = status_kib(pid, "VmRSS"), .anon = status_kib(pid, "RssAnon"),
                          .shmem = status_kib(pid, "RssShmem"), .fds = open_fds(pid) };
}

typedef struct Round {
        const char *name;
        bool lazy; /* the lazy-session Hello bit */
        bool used; /* one fill each after Hello */
        double kib, anon, shmem, fds;
} Round;

/* Whether the daemon listens: its socket's file appears at bind(), a moment
 * before listen(), when a connect is still refused. */
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

static kfdb_session *open_session(const char *sock, const Round *round) {
        kfdb_session *s;
        int r;

        r = kfdb_session_new(sock, "bench-sessions", &s);
        if (r < 0) {
                fprintf(stderr, "bench-sessions: a session: %s (%s)\n", strerror(-r), kfdb_session_last_error(NULL));
                exit(1);
        }
        if (round->lazy != kfdb_session_has_feature(s, "lazy-session") && round->lazy)
                die("the daemon does not offer lazy-session", EOPNOTSUPP);
        if (round->used) {
                kfdb_buffer *buf;
                kfdb_batch *b;
                uint64_t fence;

                r = kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &buf);
                if (r >= 0)
                        r = kfdb_batch_new(s, &b);
                if (r >= 0)
                        r = kfdb_batch_fill(b, buf, 0, 4096, 0x5a5a5a5a);
                if (r >= 0)
                        r = kfdb_batch_submit(b, NULL, &fence);
                if (r >= 0)
                        r = kfdb_fence_wait(s, fence, 60000);
                if (r < 0) {
                        fprintf(stderr, "bench-sessions: a fill: %s (%s)\n", strerror(-r), kfdb_session_last_error(s));
                        exit(1);
                }
        }
        return s;
}

static void run_round(Round *round, const char *dir, unsigned n) {
        const char *args[] = { "--max-connections-per-user=0", "--max-connect-rate-per-user=0",
                               "--max-fds-per-user=infinity", NULL };
        kfdb_session **sessions = calloc(n + WARMUP, sizeof(*sessions));
        char sock[256];
        Sample base, after;
        pid_t pid;
        int status;

        if (!sessions)
                die("calloc", ENOMEM);
        snprintf(sock, sizeof(sock), "%s/sock-%s", dir, round->name);
        pid = bench_start_daemon(KFDBROKERD_BUILD_PATH, sock, "warning", args, NULL);
        for (int i = 0; pid >= 0 && i < 400 && !can_connect(sock); i++)
                usleep(10000);
        if (pid < 0 || !can_connect(sock))
                die("kfdbrokerd did not start", ETIMEDOUT);
        if (setenv("KFDBROKER_LAZY_SESSION", round->lazy ? "1" : "0", 1) < 0)
                die("setenv", errno);
        for (unsigned i = 0; i < WARMUP; i++)
                sessions[i] = open_session(sock, round);
        base = sample(pid);
        for (unsigned i = 0; i < n; i++)
                sessions[WARMUP + i] = open_session(sock, round);
        after = sample(pid);
        round->kib = (double) (after.rss - base.rss) / n;
        round->anon = (double) ((int64_t) after.anon - (int64_t) base.anon) / n;
        round->shmem = (double) ((int64_t) after.shmem - (int64_t) base.shmem) / n;
        round->fds = (double) (after.fds - base.fds) / n;
        printf("%-28s daemon RSS %lu -> %lu KiB over %u sessions: %.2f KiB each (anon %.2f, shmem %.2f), "
               "%.2f fds each\n",
               round->name, (unsigned long) base.rss, (unsigned long) after.rss, n, round->kib, round->anon,
               round->shmem, round->fds);
        for (unsigned i = 0; i < n + WARMUP; i++)
                kfdb_session_free(sessions[i]);
        free(sessions);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        unlink(sock);
}

int main(int argc, char **argv) {
        Round rounds[] = {
                { .name = "old feature set (idle)", .lazy = false },
                { .name = "lazy-session (idle)", .lazy = true },
                { .name = "lazy-session (one fill)", .lazy = true, .used = true },
        };
        unsigned n = argc > 1 ? (unsigned) strtoul(argv[1], NULL, 10) : DEFAULT_SESSIONS;
        char dir[] = "/tmp/bench-sessions-XXXXXX", tail[128];
        struct rlimit rl;

        if (n == 0)
                die("the number of sessions", EINVAL);
        /* Each session holds a few fds here too (its socket, eventfd, doorbell). */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (!mkdtemp(dir))
                die("mkdtemp", errno);
        for (size_t i = 0; i < sizeof(rounds) / sizeof(*rounds); i++)
                run_round(&rounds[i], dir, n);
        rmdir(dir);

        snprintf(tail, sizeof(tail), " (%.2f KiB, %.2f fds each; the old feature set %.2f KiB, %.2f fds)",
                 rounds[1].kib, rounds[1].fds, rounds[0].kib, rounds[0].fds);
        report_line("idle session's daemon RSS / 8 KiB (lazy-session)", rounds[1].kib / GOAL_KIB, true, 1.0, tail);
        /* An older client's cost, for comparison: the goal is the lazy session's. */
        printf("%-62s ratio %5.2f (no goal: what a client without the bit costs)\n",
               "idle session's daemon RSS / 8 KiB (old feature set)", rounds[0].kib / GOAL_KIB);
        report("idle session's daemon RSS, lazy-session / old feature set", rounds[1].kib / rounds[0].kib, true, 1.0);
        return 0;
}
