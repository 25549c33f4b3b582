/* SPDX-License-Identifier: MIT */
/*
 * One user cannot starve another of the daemon's file descriptors (issue 13,
 * item 3). A daemon --device=sim with RLIMIT_NOFILE 512; one user (this
 * process) opens sessions until one is refused and then allocates 4 KiB
 * buffers until refused; then another user (nobody, so this needs root)
 * connects, allocates and runs a fill. Before the per-user fd budget the
 * first user took every fd and the second was refused at connect. Prints what
 * the first user got to hold, the refusals, and one line next to its goal
 * (1: the other user was served). It reports; it does not gate.
 */
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "kfdbroker.h"

#define NOFILE 512
#define MAX_SESSIONS 1024
#define MAX_BUFFERS 4096
#define BUF_SIZE 4096u

static void die(const char *what, int r) {
        fprintf(stderr, "bench-fds: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

static void limit_fds(void) {
        struct rlimit rl = { NOFILE, NOFILE };

        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                _exit(126);
}

static pid_t start_daemon(const char *sock) {
        pid_t pid = bench_start_daemon(KFDBROKERD_BUILD_PATH, sock, "err", NULL, limit_fds);

        if (pid < 0)
                die("kfdbrokerd did not start", ETIMEDOUT);
        return pid;
}

/* The other user: 0 when it connected, allocated and ran a fill; else a code. */
static int other_user(const char *sock) {
        kfdb_session *s;
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint64_t fence;
        uint32_t *p;

        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                return 10;
        if (kfdb_session_new(sock, "other-user", &s) < 0)
                return 11;
        if (kfdb_buffer_alloc(s, BUF_SIZE, KFDB_PLACEMENT_GTT, &b) < 0) {
                fprintf(stderr, "other user: %s\n", kfdb_session_last_error(s));
                return 12;
        }
        if (kfdb_buffer_map(b, (void **) &p) < 0 || kfdb_batch_new(s, &batch) < 0 ||
            kfdb_batch_fill(batch, b, 0, BUF_SIZE, 0xabcd0123) < 0 || kfdb_batch_submit(batch, NULL, &fence) < 0 ||
            kfdb_fence_wait(s, fence, 10000) < 0 || p[0] != 0xabcd0123)
                return 13;
        return 0;
}

int main(void) {
        static kfdb_session *sessions[MAX_SESSIONS];
        static kfdb_buffer *buffers[MAX_BUFFERS];
        char dir[] = "/tmp/kfdbroker-bench-fds.XXXXXX", sock[128], refusal[512] = "";
        unsigned n_sessions = 0, n_buffers = 0;
        int r = 0, session_refusal = 0, status;
        kfdb_fd_budget fb = {};
        pid_t pid, child;

        setvbuf(stdout, NULL, _IOLBF, 0);
        printf("one user against the daemon's file descriptors (RLIMIT_NOFILE %d, simulated GPU)\n", NOFILE);
        if (geteuid() != 0) {
                printf("skipped: needs root to run the other user's client as nobody (65534)\n");
                return 0;
        }
        if (!mkdtemp(dir) || chmod(dir, 0755) < 0)
                die("mkdtemp", errno);
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        pid = start_daemon(sock);

        for (; n_sessions < MAX_SESSIONS; n_sessions++)
                if ((r = kfdb_session_new(sock, "fd-hog", &sessions[n_sessions])) < 0)
                        break;
        session_refusal = r;
        if (n_sessions == 0)
                die("the first session", r);
        for (; n_buffers < MAX_BUFFERS; n_buffers++)
                if ((r = kfdb_buffer_alloc(sessions[0], BUF_SIZE, KFDB_PLACEMENT_GTT, &buffers[n_buffers])) < 0) {
                        snprintf(refusal, sizeof(refusal), "%s", kfdb_session_last_error(sessions[0]));
                        break;
                }
        (void) kfdb_query_fd_budget(sessions[0], &fb);
        printf("first user: %u sessions (the next refused: %s), %u buffers (the next refused: %s)\n", n_sessions,
               session_refusal < 0 ? strerror(-session_refusal) : "none", n_buffers, refusal[0] ? refusal : "none");
        printf("first user holds %llu daemon fds, budget %llu of %d\n", (unsigned long long) fb.user_fds,
               (unsigned long long) fb.max_user_fds, NOFILE);

        child = fork();
        if (child < 0)
                die("fork", errno);
        if (child == 0)
                _exit(other_user(sock));
        if (waitpid(child, &status, 0) != child)
                die("waitpid", errno);
        bool served = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        printf("other user: %s\n", served ? "connected, allocated and ran a fill" : "refused");
        printf("%-62s ratio %5.2f (goal >= 1) %s\n", "fd starvation: other user served / tried", served ? 1.0 : 0.0,
               served ? "ok" : "below");

        for (unsigned i = 0; i < n_buffers; i++)
                kfdb_buffer_free(buffers[i]);
        for (unsigned i = 0; i < n_sessions; i++)
                kfdb_session_free(sessions[i]);
        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        unlink(sock);
        rmdir(dir);
        return 0;
}
