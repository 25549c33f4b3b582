/* SPDX-License-Identifier: MIT */
/*
 * Management over the socket, for a daemon run without D-Bus ("Running the
 * daemon yourself" in README): `kfdbrokerctl terminate ID [REASON]` ends a
 * session of the caller's uid (root: any), the ended client is told why and
 * does not come back, another uid's session is refused with EPERM and left
 * alone, and every action — done or refused — is in the log with the
 * caller's uid, unit and pid. The D-Bus-only verbs say that they need the
 * bus and how to get it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;

static void setup(void) {
        if (geteuid() != 0)
                cr_skip_test("needs root to run clients as nobody (65534)");
        test_daemon_start(&d, NULL);
        cr_assert_eq(chmod(d.dir, 0755), 0); /* nobody must reach the socket */
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(ctl_socket, .init = setup, .fini = teardown, .timeout = 120);

static bool starts_with(const char *s, const char *prefix) {
        return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A client as uid nobody: writes its session id to *ret_id's pipe, waits for
 * a byte on go, then reports kfdb_query()'s result and its last error. */
typedef struct NobodyClient {
        pid_t pid;
        int from, to;
        uint64_t id;
} NobodyClient;

static void nobody_client(NobodyClient *ret) {
        int up[2], down[2];

        cr_assert_eq(pipe2(up, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(down, O_CLOEXEC), 0);
        ret->pid = fork();
        cr_assert_geq(ret->pid, 0);
        if (ret->pid == 0) {
                kfdb_session *s = NULL;
                kfdb_usage u;
                char msg[600], c;
                uint64_t id;
                int r;

                if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                        _exit(10);
                if (kfdb_session_new(d.sock, "nobody-client", &s) < 0)
                        _exit(11);
                id = kfdb_session_get_id(s);
                if (write(up[1], &id, sizeof(id)) != sizeof(id))
                        _exit(12);
                if (read(down[0], &c, 1) != 1)
                        _exit(13);
                r = kfdb_query(s, &u);
                snprintf(msg, sizeof(msg), "%d %llu %s", r, (unsigned long long) kfdb_session_get_reconnects(s),
                         kfdb_session_last_error(s));
                if (write(up[1], msg, strlen(msg) + 1) < 0)
                        _exit(14);
                kfdb_session_free(s);
                _exit(0);
        }
        close(up[1]);
        close(down[0]);
        ret->from = up[0];
        ret->to = down[1];
        cr_assert_eq(read(ret->from, &ret->id, sizeof(ret->id)), (ssize_t) sizeof(ret->id));
}

/* Lets the client ask; returns what it saw (malloc'd) and reaps it. */
static char *nobody_client_finish(NobodyClient *c) {
        char buf[700] = "";
        ssize_t n;
        int status;

        cr_assert_eq(write(c->to, "q", 1), 1);
        n = read(c->from, buf, sizeof(buf) - 1);
        cr_assert_gt(n, 0);
        buf[n] = 0;
        cr_assert_eq(waitpid(c->pid, &status, 0), c->pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "client status %d", status);
        close(c->from);
        close(c->to);
        return strdup(buf);
}

Test(ctl_socket, a_user_ends_its_own_session_and_the_client_gets_the_reason) {
        NobodyClient c;
        char id[32], *out, *err, *seen, *log;
        const char *args[] = { "--socket", d.sock, "terminate", id, "GPU maintenance", NULL };

        nobody_client(&c);
        snprintf(id, sizeof(id), "%" PRIu64, c.id);
        cr_assert_eq(test_run_ctl(args, true, &out, &err), 0, "stdout: %s stderr: %s", out, err);
        cr_assert_str_empty(err);
        free(out);
        free(err);

        seen = nobody_client_finish(&c);
        /* -ECONNRESET, no reconnect, and the daemon's words with the caller and the reason. */
        cr_assert(starts_with(seen, "-104 0 kfdbrokerd ended the session: terminated by uid 65534 (unit "), "%s", seen);
        cr_assert(strstr(seen, ", pid ") && strstr(seen, "): GPU maintenance"), "%s", seen);
        free(seen);

        log = test_daemon_read_log(&d);
        {
                char want[128];

                snprintf(want, sizeof(want), "Session %" PRIu64 ": terminated over the socket by uid 65534 (unit ", c.id);
                cr_assert(strstr(log, want) && strstr(strstr(log, want), "): GPU maintenance"), "no '%s' in:\n%s", want,
                          log);
        }
        free(log);
}

Test(ctl_socket, another_users_session_is_refused_and_left_alone) {
        kfdb_session *root = NULL;
        kfdb_usage u;
        char id[32], *out, *err, *log, want[320];
        const char *args[] = { "--socket", d.sock, "terminate", id, NULL };

        cr_assert_eq(kfdb_session_new(d.sock, "root-client", &root), 0);
        snprintf(id, sizeof(id), "%" PRIu64, kfdb_session_get_id(root));
        cr_assert_eq(test_run_ctl(args, true, &out, &err), 1, "stdout: %s stderr: %s", out, err);
        snprintf(want, sizeof(want),
                 "kfdbrokerctl: TerminateSession failed: terminate_session.session_id: session %s is not one of uid "
                 "65534's sessions; only root ends another user's (Operation not permitted)\n",
                 id);
        cr_assert_str_eq(err, want);
        free(out);
        free(err);
        cr_assert_eq(kfdb_query(root, &u), 0, "root's session lives on: %s", kfdb_session_last_error(root));

        log = test_daemon_read_log(&d);
        snprintf(want, sizeof(want), "Session %s: TerminateSession over the socket by uid 65534 (unit ", id);
        cr_assert(strstr(log, want) && strstr(strstr(log, want), "refused: another user's session"), "no '%s' in:\n%s",
                  want, log);
        free(log);
        kfdb_session_free(root);
}

Test(ctl_socket, root_ends_any_session_and_bad_ids_are_named) {
        NobodyClient c;
        char id[32], *out, *err, *seen;
        const char *args[] = { "--socket", d.sock, "terminate", id, NULL };
        const char *none[] = { "--socket", d.sock, "terminate", "987654321", NULL };
        const char *bad[] = { "--socket", d.sock, "terminate", "twelve", NULL };

        nobody_client(&c);
        snprintf(id, sizeof(id), "%" PRIu64, c.id);
        cr_assert_eq(test_run_ctl(args, false, &out, &err), 0, "stdout: %s stderr: %s", out, err);
        free(out);
        free(err);
        seen = nobody_client_finish(&c);
        cr_assert(starts_with(seen, "-104 0 kfdbrokerd ended the session: terminated by uid 0 (unit "), "%s", seen);
        free(seen);

        cr_assert_eq(test_run_ctl(none, false, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl: TerminateSession failed: terminate_session.session_id: no session 987654321 "
                              "(No such file or directory)\n");
        free(out);
        free(err);
        cr_assert_eq(test_run_ctl(bad, false, &out, &err), 2);
        cr_assert_str_eq(err, "kfdbrokerctl terminate: 'twelve' is not a session id (a positive number, as 'sessions' "
                              "lists)\n");
        free(out);
        free(err);
}

/* Without D-Bus, --socket: sessions, accounting and limits ID show the
 * caller's own sessions (root: all), with the same keys as over D-Bus; what
 * needs the bus says so. */
Test(ctl_socket, read_only_verbs_show_the_callers_own_sessions) {
        kfdb_session *root = NULL;
        NobodyClient c;
        char mine[32], theirs[32], want[256], *out, *err, *seen;
        const char *sessions[] = { "--socket", d.sock, "sessions", NULL };
        const char *sessions_json[] = { "--socket", d.sock, "--json", "sessions", NULL };
        const char *accounting[] = { "--socket", d.sock, "--json", "accounting", NULL };
        const char *limits_own[] = { "--socket", d.sock, "limits", mine, NULL };
        const char *limits_other[] = { "--socket", d.sock, "limits", theirs, NULL };
        const char *limits_set[] = { "--socket", d.sock, "limits", mine, "Weight=2", NULL };
        const char *top[] = { "--socket", d.sock, "top", NULL };

        cr_assert_eq(kfdb_session_new(d.sock, "root-client", &root), 0);
        snprintf(theirs, sizeof(theirs), "%" PRIu64, kfdb_session_get_id(root));
        nobody_client(&c);
        snprintf(mine, sizeof(mine), "%" PRIu64, c.id);

        /* nobody: its own session (the listing client's own among them), not root's. */
        cr_assert_eq(test_run_ctl(sessions_json, true, &out, &err), 0, "stderr: %s", err);
        snprintf(want, sizeof(want), "{\"id\":%s,\"uid\":65534,", mine);
        cr_expect(strstr(out, want) && strstr(out, "\"client_name\":\"nobody-client\""), "%s", out);
        snprintf(want, sizeof(want), "{\"id\":%s,", theirs);
        cr_expect_null(strstr(out, want), "nobody sees root's session: %s", out);
        free(out);
        free(err);

        /* root: both. */
        cr_assert_eq(test_run_ctl(sessions, false, &out, &err), 0, "stderr: %s", err);
        cr_expect(strstr(out, "ID     UID     GID     PID      UNIT"), "%s", out);
        snprintf(want, sizeof(want), "\n%-6s 65534   65534   ", mine);
        cr_expect(strstr(out, want), "no '%s' in %s", want, out);
        snprintf(want, sizeof(want), "\n%-6s 0       0       ", theirs);
        cr_expect(strstr(out, want), "no '%s' in %s", want, out);
        free(out);
        free(err);

        /* accounting: use and limits, snake_case, the simulated GPU's defaults (not fitted to it). */
        cr_assert_eq(test_run_ctl(accounting, true, &out, &err), 0, "stderr: %s", err);
        cr_expect(strstr(out, "\"client_name\":\"nobody-client\""), "%s", out);
        cr_expect(strstr(out, "\"limits\":{\"buffer_memory\":4294967296,\"max_buffer_size\":1073741824,"), "%s", out);
        cr_expect(strstr(out, "\"priority\":\"normal\""), "%s", out);
        cr_expect(strstr(out, "\"usage\":{\"jobs_submitted\":0,"), "%s", out);
        cr_expect_null(strstr(out, "root-client"), "%s", out);
        free(out);
        free(err);

        /* limits: one's own shown as a policy file writes them; root's not found; setting needs the bus. */
        cr_assert_eq(test_run_ctl(limits_own, true, &out, &err), 0, "stderr: %s", err);
        snprintf(want, sizeof(want), "Session %s: uid 65534, client \"nobody-client\"\n", mine);
        cr_expect(strncmp(out, want, strlen(want)) == 0, "%s", out);
        cr_expect(strstr(out, "\n  BufferMemory=4G\n  MaxBufferSize=1G\n") && strstr(out, "\n  UserBufferMemory=infinity\n"),
                  "%s", out);
        free(out);
        free(err);
        cr_assert_eq(test_run_ctl(limits_other, true, &out, &err), 1);
        snprintf(want, sizeof(want), "kfdbrokerctl limits: no session %s of this user (root sees every session)\n",
                 theirs);
        cr_expect_str_eq(err, want);
        free(out);
        free(err);
        cr_assert_eq(test_run_ctl(limits_set, true, &out, &err), 2);
        cr_expect(strstr(err, "kfdbrokerctl limits: setting limits is for root or org.kfdbroker.manage (polkit), so it "
                              "needs kfdbrokerd's D-Bus API (kfdbrokerd --bus=system)"),
                  "%s", err);
        free(out);
        free(err);
        cr_assert_eq(test_run_ctl(top, true, &out, &err), 2);
        cr_expect(strstr(err, "kfdbrokerctl top: it samples GetAccounting, so it needs kfdbrokerd's D-Bus API"), "%s",
                  err);
        free(out);
        free(err);

        seen = nobody_client_finish(&c);
        cr_expect(strncmp(seen, "0 ", 2) == 0, "the client lives on: %s", seen);
        free(seen);
        kfdb_session_free(root);
}
