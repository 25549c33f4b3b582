/* SPDX-License-Identifier: MIT */
/*
 * Tests of daemon/util/log.c's structured journal entries, of the fields a
 * session adds (session_log_fields()) and of their rate-limited forms
 * (log_struct_ratelimited(), session_log_struct()): what reaches a journal
 * socket of our own, in the native protocol, is MESSAGE, PRIORITY, the code
 * location, SYSLOG_IDENTIFIER, ERRNO, the MESSAGE_ID and our KFDBROKER_*
 * fields, each exactly once; a client-controlled name with a newline or a
 * "MESSAGE=" in it stays inside its own field, escaped; fields that do not
 * fit are left out rather than cut; a line over its rate limit is held back
 * whole and the summary is an entry of its own (LOG_SUPPRESSED); on stderr
 * only the message is written.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log-ratelimit.h"
#include "util/log.h"
#include "test-fini.h"

#define MAX_CAPTURED 40

static char captured[MAX_CAPTURED][1024];
static int n_captured;
static int journal = -1;
static char journal_dir[] = "/tmp/kfdbroker-test-log.XXXXXX";
static char journal_path[128];

/*
 * Receives the next entry sent to our journal socket and splits it into
 * "KEY=value" strings: a line KEY=value, or (a value with a newline) KEY,
 * its length as 64-bit little-endian and the bytes (systemd's native
 * protocol). Returns false when no entry is waiting.
 */
static bool receive_entry(void) {
        static char buf[16384];
        ssize_t len = recv(journal, buf, sizeof(buf), MSG_DONTWAIT);
        size_t o = 0;

        n_captured = 0;
        if (len <= 0)
                return false;
        while (o < (size_t) len && n_captured < MAX_CAPTURED) {
                char *nl = memchr(buf + o, '\n', (size_t) len - o), *eq;
                char *out = captured[n_captured++];

                cr_assert_not_null(nl, "an entry ends without a newline");
                eq = memchr(buf + o, '=', (size_t) (nl - (buf + o)));
                if (eq) {
                        snprintf(out, sizeof(captured[0]), "%.*s", (int) (nl - (buf + o)), buf + o);
                        o = (size_t) (nl - buf) + 1;
                } else {
                        uint64_t vlen = 0;
                        size_t klen = (size_t) (nl - (buf + o));

                        for (unsigned b = 0; b < 8; b++)
                                vlen |= (uint64_t) (uint8_t) nl[1 + b] << (8 * b);
                        snprintf(out, sizeof(captured[0]), "%.*s=%.*s", (int) klen, buf + o, (int) vlen, nl + 9);
                        o = (size_t) (nl - buf) + 1 + 8 + vlen + 1;
                }
        }
        return true;
}

/* The value of KEY in the captured entry; asserts it is there exactly once. */
static const char *field(const char *key) {
        const char *found = NULL;
        size_t kl = strlen(key);

        for (int i = 0; i < n_captured; i++)
                if (strncmp(captured[i], key, kl) == 0 && captured[i][kl] == '=') {
                        cr_assert_null(found, "%s twice", key);
                        found = captured[i] + kl + 1;
                }
        cr_assert_not_null(found, "no %s field", key);
        return found;
}

static bool has_field(const char *key) {
        size_t kl = strlen(key);

        for (int i = 0; i < n_captured; i++)
                if (strncmp(captured[i], key, kl) == 0 && captured[i][kl] == '=')
                        return true;
        return false;
}

static void setup(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        cr_assert_not_null(mkdtemp(journal_dir));
        snprintf(journal_path, sizeof(journal_path), "%s/socket", journal_dir);
        strcpy(sa.sun_path, journal_path);
        journal = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(journal, 0);
        cr_assert_eq(bind(journal, (struct sockaddr *) &sa, sizeof(sa)), 0);
        log_set_journal_socket(journal_path);
        log_setup(LOG_TARGET_JOURNAL);
        n_captured = 0;
}

static void teardown(void) {
        log_set_journal_socket(NULL);
        log_setup(LOG_TARGET_STDERR);
        close(journal);
        unlink(journal_path);
        rmdir(journal_dir);
        test_fini_end();
}

TestSuite(log, .init = setup, .fini = teardown);

Test(log, struct_entry_has_message_id_priority_errno_and_fields) {
        LogFields f = {};

        log_fields_add(&f, "KFDBROKER_SESSION=%d", 42);
        log_fields_add(&f, "KFDBROKER_FENCE=%d", 7);
        log_struct_errno(LOG_NOTICE, -ETIME, KFDBROKER_MESSAGE_JOB_FAILED, &f, "job %d failed: %m", 7);
        cr_assert(receive_entry());
        cr_assert_str_eq(field("MESSAGE"), "job 7 failed: Timer expired");
        cr_assert_str_eq(field("PRIORITY"), "5");
        cr_assert_str_eq(field("ERRNO"), "62");
        cr_assert_str_eq(field("MESSAGE_ID"), "df882ae907de43dca001b6e328238753");
        cr_assert_str_eq(field("SYSLOG_IDENTIFIER"), program_invocation_short_name);
        cr_assert_str_eq(field("KFDBROKER_SESSION"), "42");
        cr_assert_str_eq(field("KFDBROKER_FENCE"), "7");
        cr_assert(strstr(field("CODE_FILE"), "test-log.c"));
        cr_assert_str_eq(field("CODE_FUNC"), "log_struct_entry_has_message_id_priority_errno_and_fields_impl");
        cr_assert_eq(n_captured, 10, "%d fields, first %s, last %s", n_captured, captured[0], captured[n_captured - 1]);
        cr_assert(!receive_entry(), "one entry");
}

Test(log, plain_entry_has_no_message_id) {
        log_info("plain %s", "words");
        cr_assert(receive_entry());
        cr_assert_str_eq(field("MESSAGE"), "plain words");
        cr_assert_str_eq(field("PRIORITY"), "6");
        cr_assert(!has_field("MESSAGE_ID"));
        cr_assert(!has_field("ERRNO"));
}

Test(log, below_the_level_nothing_is_written) {
        log_set_max_level(LOG_NOTICE);
        log_struct(LOG_INFO, KFDBROKER_MESSAGE_SESSION_OPENED, NULL, "not shown");
        log_set_max_level(LOG_INFO);
        cr_assert(!receive_entry());
}

Test(log, a_field_that_does_not_fit_is_left_out) {
        static char big[4000];
        LogFields f = {}, g = {};

        memset(big, 'x', sizeof(big) - 1);
        log_fields_add(&f, "KFDBROKER_A=1");
        log_fields_add(&f, "KFDBROKER_BIG=%s", big);
        log_fields_add(&f, "KFDBROKER_B=2");
        cr_assert_eq(f.n, 2);
        cr_assert_str_eq(f.v[0], "KFDBROKER_A=1");
        cr_assert_str_eq(f.v[1], "KFDBROKER_B=2");
        log_fields_append(&g, &f);
        log_fields_append(&g, NULL);
        cr_assert_eq(g.n, 2);
        cr_assert_str_eq(g.v[1], "KFDBROKER_B=2");
        for (int i = 0; i < 40; i++)
                log_fields_add(&f, "KFDBROKER_N%d=%d", i, i);
        cr_assert_eq(f.n, LOG_FIELDS_MAX);
}

/* A session as the daemon has it after Hello: identity from the kernel, a name from the client. */
static void fake_session(Session *s, Tally *t, char *unit, char *slice, char *container) {
        s->id = 12;
        s->identity.uid = 1000;
        s->identity.gid = 100;
        s->identity.pid = 4242;
        strcpy(s->identity.comm, "evil\nMESSAGE=x");
        strcpy(s->client_name, "name\nPRIORITY=0");
        s->identity.unit = unit;
        s->identity.slice = slice;
        s->identity.container = container;
        s->user_tally = t;
}

static void expect_session_fields(void) {
        cr_assert_str_eq(field("KFDBROKER_SESSION"), "12");
        cr_assert_str_eq(field("KFDBROKER_UID"), "1000");
        cr_assert_str_eq(field("KFDBROKER_GID"), "100");
        cr_assert_str_eq(field("KFDBROKER_PID"), "4242");
        cr_assert_str_eq(field("KFDBROKER_COMM"), "evil\\x0aMESSAGE=x");
        cr_assert_str_eq(field("KFDBROKER_CLIENT"), "name\\x0aPRIORITY=0");
        cr_assert_str_eq(field("KFDBROKER_UNIT"), "ci-runner@3.service");
        cr_assert_str_eq(field("KFDBROKER_SLICE"), "system.slice");
        cr_assert_str_eq(field("KFDBROKER_CONTAINER"), "box\\x0a1");
        cr_assert(!has_field("KFDBROKER_USER_UNIT"), "no user unit: no field");
        cr_assert(!has_field("KFDBROKER_APP_ID"));
        for (int i = 0; i < n_captured; i++)
                cr_assert_null(strchr(captured[i], '\n'), "a newline in field %s", captured[i]);
}

Test(log, session_fields_name_the_session_and_escape_what_the_client_chose) {
        char unit[] = "ci-runner@3.service", slice[] = "system.slice", container[] = "box\n1";
        Session s = {};
        LogFields f = {};

        fake_session(&s, NULL, unit, slice, container);
        session_log_fields(&s, &f);
        log_struct(LOG_INFO, KFDBROKER_MESSAGE_SESSION_OPENED, &f, "Session %u opened", 12u);
        cr_assert(receive_entry());
        cr_assert_str_eq(field("MESSAGE"), "Session 12 opened");
        cr_assert_str_eq(field("PRIORITY"), "6");
        cr_assert_str_eq(field("MESSAGE_ID"), KFDBROKER_MESSAGE_SESSION_OPENED);
        expect_session_fields();
}

/* session_log_struct(): the session's fields, the extra ones, the
 * MESSAGE_ID, under the user's limit; what the limit holds back is one
 * LOG_SUPPRESSED entry naming the peer and the count. */
Test(log, session_lines_keep_id_and_fields_under_the_rate_limit) {
        char unit[] = "ci-runner@3.service", slice[] = "system.slice", container[] = "box\n1";
        char key[] = "uid 1000";
        Tally t = { .key = key };
        Session s = {};
        LogFields extra = {};
        unsigned passed = 0;

        fake_session(&s, &t, unit, slice, container);
        log_ratelimit_init(&t.log_limit, 200 * 1000, 3);
        log_fields_add(&extra, "KFDBROKER_FENCE=%d", 9);
        for (int i = 0; i < 10; i++) {
                session_log_struct(&s, LOG_NOTICE, EIO, KFDBROKER_MESSAGE_JOB_FAILED, &extra,
                                   "Session %u: job %d failed", 12u, i);
                if (receive_entry()) {
                        passed++;
                        cr_assert_str_eq(field("MESSAGE_ID"), KFDBROKER_MESSAGE_JOB_FAILED);
                        cr_assert_str_eq(field("KFDBROKER_FENCE"), "9");
                        cr_assert_str_eq(field("ERRNO"), "5");
                        expect_session_fields();
                }
        }
        cr_assert_eq(passed, 3);
        cr_assert_eq(t.log_limit.suppressed, 7);

        /* A plain session line carries the session's fields too. */
        usleep(250 * 1000);
        session_log(&s, LOG_INFO, "Session %u: a plain line", 12u);
        cr_assert(receive_entry());
        cr_assert_str_eq(field("MESSAGE"), "Suppressed 7 messages from uid 1000 in the last 1 s");
        cr_assert_str_eq(field("MESSAGE_ID"), KFDBROKER_MESSAGE_LOG_SUPPRESSED);
        cr_assert_str_eq(field("KFDBROKER_SUPPRESSED"), "7");
        cr_assert_str_eq(field("KFDBROKER_RATELIMIT"), "peer");
        cr_assert_str_eq(field("KFDBROKER_PEER"), "uid 1000");
        cr_assert(receive_entry());
        cr_assert_str_eq(field("MESSAGE"), "Session 12: a plain line");
        cr_assert(!has_field("MESSAGE_ID"));
        expect_session_fields();
}

/* log_struct_ratelimited() (a refused connection has no session yet). */
Test(log, struct_ratelimited_holds_back_whole_entries) {
        LogRateLimit rl;
        LogFields f = {};
        unsigned passed = 0;

        log_ratelimit_init(&rl, 10 * 1000 * 1000, 2);
        log_fields_add(&f, "KFDBROKER_UID=%u", 77u);
        for (int i = 0; i < 5; i++) {
                log_struct_ratelimited(&rl, "uid 77", LOG_NOTICE, EUSERS, KFDBROKER_MESSAGE_SESSION_REFUSED, &f,
                                       "Refusing a connection %d", i);
                while (receive_entry()) {
                        passed++;
                        cr_assert_str_eq(field("MESSAGE_ID"), KFDBROKER_MESSAGE_SESSION_REFUSED);
                        cr_assert_str_eq(field("KFDBROKER_UID"), "77");
                        cr_assert_str_eq(field("ERRNO"), "87");
                }
        }
        cr_assert_eq(passed, 2);
        log_ratelimit_flush(&rl, "uid 77");
        cr_assert(receive_entry());
        cr_assert_str_eq(field("MESSAGE_ID"), KFDBROKER_MESSAGE_LOG_SUPPRESSED);
        cr_assert_str_eq(field("KFDBROKER_SUPPRESSED"), "3");
        cr_assert_str_eq(field("MESSAGE"), "Suppressed 3 messages from uid 77 in the last 1 s");
}

Test(log, on_stderr_only_the_message) {
        char buf[512] = "";
        FILE *f = tmpfile();
        int saved = dup(STDERR_FILENO);
        LogFields fields = {};

        cr_assert_not_null(f);
        log_setup(LOG_TARGET_STDERR);
        fflush(stderr);
        dup2(fileno(f), STDERR_FILENO);
        log_fields_add(&fields, "KFDBROKER_SESSION=3");
        log_struct(LOG_WARNING, KFDBROKER_MESSAGE_CONTEXT_LOST, &fields, "context %d lost", 3);
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        rewind(f);
        cr_assert_not_null(fgets(buf, sizeof(buf), f));
        fclose(f);
        cr_assert_str_eq(buf, "kfdbrokerd: warning: context 3 lost\n");
        cr_assert(!receive_entry());
}
