/* SPDX-License-Identifier: MIT */
/*
 * The log rate limit (util/log-ratelimit.h): a peer gets its burst per
 * interval, the rest is counted and summed up in one line once the interval
 * is over; the daemon-wide limit holds over all peers; and a log that cannot
 * take a line at once never makes the caller wait.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/log-ratelimit.h"

/* Points stderr at a fresh file; returns the path for read_all(). */
static void capture_stderr(char *path) {
        int fd;

        strcpy(path, "/tmp/kfdbroker-log-test.XXXXXX");
        fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        cr_assert_eq(dup2(fd, STDERR_FILENO), STDERR_FILENO);
        close(fd);
        log_setup(LOG_TARGET_STDERR);
}

static char *read_all(const char *path) {
        static char buf[65536];
        FILE *f = fopen(path, "re");
        size_t n;

        cr_assert_not_null(f);
        n = fread(buf, 1, sizeof(buf) - 1, f);
        buf[n] = 0;
        fclose(f);
        return buf;
}

static unsigned count(const char *text, const char *word) {
        unsigned n = 0;
        for (const char *p = text; (p = strstr(p, word)); p++)
                n++;
        return n;
}

Test(log_ratelimit, a_peer_gets_its_burst_then_a_summary) {
        LogRateLimit rl;
        char path[64];
        unsigned passed = 0;

        capture_stderr(path);
        log_ratelimit_init(&rl, 200 * 1000, 3);
        for (int i = 0; i < 10; i++) {
                bool pass = log_ratelimit_pass(&rl, "uid 1000");
                passed += pass;
                if (pass)
                        log_info("line %d", i);
        }
        cr_expect_eq(passed, 3);
        cr_expect(!log_ratelimit_idle(&rl));
        usleep(250 * 1000);
        cr_expect(log_ratelimit_idle(&rl));
        log_ratelimited(&rl, "uid 1000", LOG_INFO, "line after the interval");
        char *out = read_all(path);
        cr_expect_eq(count(out, "kfdbrokerd: line "), 4, "%s", out);
        cr_expect(strstr(out, "Suppressed 7 messages from uid 1000 in the last 1 s\n"), "%s", out);
        /* The summary comes before the line that ended the interval. */
        cr_expect_lt(strstr(out, "Suppressed"), strstr(out, "line after the interval"), "%s", out);
        unlink(path);
}

Test(log_ratelimit, flush_says_what_was_held_back_once) {
        LogRateLimit rl;
        char path[64];

        capture_stderr(path);
        log_ratelimit_init(&rl, 10ull * 1000 * 1000, 1);
        cr_expect(log_ratelimit_pass(&rl, "uid 7"));
        cr_expect(!log_ratelimit_pass(&rl, "uid 7"));
        cr_expect(!log_ratelimit_pass(&rl, "uid 7"));
        log_ratelimit_flush(&rl, "uid 7");
        log_ratelimit_flush(&rl, "uid 7");
        char *out = read_all(path);
        cr_expect_eq(count(out, "Suppressed 2 messages from uid 7 in the last "), 1, "%s", out);
        unlink(path);
}

Test(log_ratelimit, the_daemon_wide_limit_holds_over_all_peers) {
        LogRateLimit peers[100];
        unsigned passed = 0;
        char who[32];

        for (int i = 0; i < 100; i++)
                log_ratelimit_init(&peers[i], LOG_RATELIMIT_PEER_INTERVAL_USEC, LOG_RATELIMIT_PEER_BURST);
        /* 100 peers, each within its own burst, 1000 lines in all. */
        for (int i = 0; i < 1000; i++) {
                snprintf(who, sizeof(who), "uid %d", i % 100);
                passed += log_ratelimit_pass(&peers[i % 100], who);
        }
        cr_expect_eq(passed, LOG_RATELIMIT_GLOBAL_BURST);
        cr_expect_eq(log_ratelimit_global()->suppressed, 1000 - LOG_RATELIMIT_GLOBAL_BURST);
}

/* A log that takes nothing (a full pipe nobody reads: a journal that does
 * not keep up) drops the line at once; the next line that goes out says so. */
Test(log_ratelimit, a_full_log_never_makes_the_caller_wait, .timeout = 10) {
        int p[2];
        char buf[65536];
        struct timespec t0, t1;

        cr_assert_eq(pipe(p), 0);
        cr_assert_eq(fcntl(p[1], F_SETFL, O_NONBLOCK), 0);
        while (write(p[1], buf, sizeof(buf)) > 0)
                ; /* fill it */
        cr_assert_eq(fcntl(p[1], F_SETFL, 0), 0); /* a blocking fd, as stderr is */
        cr_assert_eq(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
        log_setup(LOG_TARGET_STDERR);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 0; i < 1000; i++)
                log_info("a line nobody reads %d", i);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        cr_expect_lt(t1.tv_sec - t0.tv_sec, 2);
        cr_expect_eq(log_get_dropped(), 1000);
        /* Drain it: the next line goes out after a note of what was lost. */
        cr_assert_eq(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
        while (read(p[0], buf, sizeof(buf)) > 0)
                ;
        log_info("after");
        ssize_t n = read(p[0], buf, sizeof(buf) - 1);
        cr_assert_gt(n, 0);
        buf[n] = 0;
        cr_expect(strstr(buf, "1000 log messages were dropped"), "%s", buf);
        cr_expect(strstr(buf, "kfdbrokerd: after\n"), "%s", buf);
        cr_expect_eq(log_get_dropped(), 0);
}

/* A journald of our own: the entries arrive in the native protocol, and a
 * journal that does not read makes nobody wait. */
Test(log_ratelimit, journal_entries_in_the_native_protocol_without_waiting, .timeout = 10) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/kfdbroker-journal.XXXXXX", buf[8192];
        int j;
        ssize_t n;

        cr_assert_not_null(mkdtemp(dir));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/socket", dir);
        j = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(j, 0);
        cr_assert_eq(bind(j, (struct sockaddr *) &sa, sizeof(sa)), 0);
        log_set_journal_socket(sa.sun_path);
        log_setup(LOG_TARGET_JOURNAL);

        log_notice_errno(ENOSPC, "one line: %m");
        n = recv(j, buf, sizeof(buf) - 1, MSG_DONTWAIT);
        cr_assert_gt(n, 0);
        buf[n] = 0;
        cr_expect(strstr(buf, "MESSAGE=one line: No space left on device\n"), "%s", buf);
        cr_expect(strstr(buf, "\nPRIORITY=5\n"), "%s", buf);
        cr_expect(strstr(buf, "\nERRNO=28\n"), "%s", buf);
        cr_expect(strstr(buf, "\nCODE_FUNC="), "%s", buf);

        /* A value with a newline goes as KEY\n, its length (64-bit LE), the bytes. */
        log_info("two\nlines");
        n = recv(j, buf, sizeof(buf), MSG_DONTWAIT);
        cr_assert_gt(n, 0);
        cr_expect(memcmp(buf, "MESSAGE\n\x09\0\0\0\0\0\0\0two\nlines\n", 8 + 8 + 10) == 0);

        /* Nobody reads: the socket's queue fills, then lines are dropped at once. */
        for (int i = 0; i < 2000; i++)
                log_info("unread %d", i);
        cr_expect_gt(log_get_dropped(), 0);
        while (recv(j, buf, sizeof(buf), MSG_DONTWAIT) > 0)
                ;
        log_info("read again");
        n = recv(j, buf, sizeof(buf) - 1, MSG_DONTWAIT);
        cr_assert_gt(n, 0);
        buf[n] = 0;
        cr_expect(strstr(buf, " log messages were dropped"), "%s", buf);
        close(j);
        unlink(sa.sun_path);
        rmdir(dir);
        log_set_journal_socket(NULL);
}
