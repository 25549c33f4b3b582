/* SPDX-License-Identifier: MIT */
/*
 * Quotas that hold (docs/policy.md, "Exported buffers" and the caps shared by
 * sessions): a buffer freed while its dma-buf is kept stays charged, and
 * Query says so; UserBufferMemory= and UserBuffers= hold across the sessions
 * of one user; another user is not affected by them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

#define MiB (1ull << 20)

static TestDaemon d;
static char policydir[64];
static char arg[128];
static const char *args[] = { arg, NULL };

static void setup(void) {
        char path[160];
        FILE *f;

        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        snprintf(path, sizeof(path), "%s/50-quota.conf", policydir);
        f = fopen(path, "we");
        cr_assert(f);
        fprintf(f, "[Limits]\nBufferMemory=16M\nUserBufferMemory=24M\nUserBuffers=3\n");
        fclose(f);
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
}

static void teardown(void) {
        char cmd[128];

        test_daemon_fini(&d);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        test_fini_end();
}

TestSuite(quota, .init = setup, .fini = teardown, .timeout = 120);

static kfdb_session *connect_session(void) {
        kfdb_session *s;
        cr_assert_eq(kfdb_session_new(d.sock, "quota", &s), 0);
        return s;
}

static void expect_refused(kfdb_session *s, uint64_t size, const char *words) {
        kfdb_buffer *b = NULL;
        int r = kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_GTT, &b);

        cr_assert_eq(r, -EDQUOT, "alloc of %llu bytes: got %d (%s)", (unsigned long long) size, r,
                     kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), words), "%s", kfdb_session_last_error(s));
}

/* The bypass of issue 16: FreeBuffer while keeping the dma-buf fd freed the
 * quota but not the memory (511 MiB held against a 16 MiB quota, Query 0). */
Test(quota, a_freed_buffer_whose_dma_buf_is_kept_stays_charged) {
        kfdb_session *s = connect_session();
        int kept[2];
        kfdb_usage u;
        kfdb_quota q;

        for (int i = 0; i < 2; i++) {
                kfdb_buffer *b;
                cr_assert_eq(kfdb_buffer_alloc(s, 8 * MiB, KFDB_PLACEMENT_GTT, &b), 0, "%s",
                             kfdb_session_last_error(s));
                kept[i] = dup(kfdb_buffer_get_fd(b));
                cr_assert_geq(kept[i], 0);
                cr_assert_eq(kfdb_buffer_free(b), 0);
        }
        /* The kept fds still reach 16 MiB of memory... */
        for (int i = 0; i < 2; i++) {
                uint32_t *p = mmap(NULL, 8 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, kept[i], 0);
                cr_assert_neq(p, MAP_FAILED);
                p[2 * MiB - 1] = 0x600d + (uint32_t) i;
                cr_expect_eq(p[2 * MiB - 1], 0x600d + (uint32_t) i);
                munmap(p, 8 * MiB);
        }
        /* ...so they are still charged, and Query says so. */
        expect_refused(s, 4096, "BufferMemory=");
        expect_refused(s, 4096, "16777216 of it freed buffers whose dma-buf may still be held");
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_expect_eq(u.buffers, 0);
        cr_expect_eq(u.buffer_bytes, 16 * MiB);
        cr_assert_eq(kfdb_query_quota(s, &q), 0);
        cr_expect_eq(q.released_buffer_bytes, 16 * MiB);
        cr_expect_eq(q.user_buffer_bytes, 16 * MiB);
        cr_expect_eq(q.max_user_buffer_bytes, 24 * MiB);
        cr_expect_eq(q.max_user_buffers, 3);
        close(kept[0]);
        close(kept[1]);
        /* The charge outlives the session: the simulated GPU's dma-bufs
         * (memfds) never show the daemon their last copy go, so the user
         * stays charged until the daemon restarts; the next session has its
         * own BufferMemory= again, not its user's. */
        kfdb_session_free(s);
        s = connect_session();
        for (int i = 0; i < 500 && kfdb_query_quota(s, &q) == 0 && q.released_buffer_bytes > 0; i++)
                usleep(10000);
        cr_assert_eq(kfdb_query_quota(s, &q), 0);
        cr_expect_eq(q.released_buffer_bytes, 0);
        cr_expect_eq(q.user_buffer_bytes, 16 * MiB);
        kfdb_buffer *b;
        cr_assert_eq(kfdb_buffer_alloc(s, 8 * MiB, KFDB_PLACEMENT_GTT, &b), 0, "%s", kfdb_session_last_error(s));
        expect_refused(s, 4096, "per-user buffer memory limit (policy UserBufferMemory=24M) reached");
        kfdb_buffer_free(b);
        kfdb_session_free(s);
}

/* The bypass of issue 29 (item 5): allocate, keep the dma-buf, end the
 * session, repeat — each new session started from nothing, and the user held
 * ten times UserBufferMemory=. The kept buffers stay charged to the user. */
Test(quota, a_kept_dma_buf_stays_charged_to_its_user_after_its_session) {
        kfdb_session *s;
        kfdb_quota q;
        int kept;

        s = connect_session();
        kfdb_buffer *b;
        cr_assert_eq(kfdb_buffer_alloc(s, 16 * MiB, KFDB_PLACEMENT_GTT, &b), 0, "%s", kfdb_session_last_error(s));
        kept = dup(kfdb_buffer_get_fd(b));
        cr_assert_geq(kept, 0);
        uint32_t *p = mmap(NULL, 16 * MiB, PROT_READ | PROT_WRITE, MAP_SHARED, kept, 0);
        cr_assert_neq(p, MAP_FAILED);
        p[4 * MiB - 1] = 0xbad;
        kfdb_session_free(s); /* FreeBuffer comes with the hang-up */

        /* A second session of the same user: its own BufferMemory=16M is
         * free, the user's 24M holds 16 MiB that are still reachable. */
        s = connect_session();
        for (int i = 0; i < 500 && kfdb_query_quota(s, &q) == 0 && q.user_buffer_bytes < 16 * MiB; i++)
                usleep(10000);
        cr_assert_eq(kfdb_query_quota(s, &q), 0);
        cr_expect_eq(q.user_buffer_bytes, 16 * MiB);
        cr_expect_eq(q.released_buffer_bytes, 0);
        b = NULL;
        cr_assert_eq(kfdb_buffer_alloc(s, 16 * MiB, KFDB_PLACEMENT_GTT, &b), -EDQUOT, "%s",
                     kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "per-user buffer memory limit (policy UserBufferMemory=24M) reached: uid "),
                  "%s", kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), " holds 16777216 bytes in 1 sessions"), "%s",
                  kfdb_session_last_error(s));
        /* The memory is still there for whoever kept it. */
        cr_expect_eq(p[4 * MiB - 1], 0xbad);
        munmap(p, 16 * MiB);
        close(kept);
        /* The simulator cannot see the copy go: charged until the daemon restarts. */
        cr_assert_eq(kfdb_query_quota(s, &q), 0);
        cr_expect_eq(q.user_buffer_bytes, 16 * MiB);
        kfdb_session_free(s);
}

/* A buffer that was never handed out (an import frees its charge at once:
 * the exporter is the one charged while copies live). */
Test(quota, an_imported_buffer_is_uncharged_by_free) {
        kfdb_session *owner = connect_session(), *s = connect_session();
        kfdb_buffer *b, *imp;
        kfdb_quota q;
        kfdb_usage u;

        cr_assert_eq(kfdb_buffer_alloc(owner, 4 * MiB, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_import(s, kfdb_buffer_get_fd(b), &imp), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_expect_eq(u.buffer_bytes, 4 * MiB);
        cr_assert_eq(kfdb_buffer_free(imp), 0);
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_expect_eq(u.buffer_bytes, 0);
        cr_assert_eq(kfdb_query_quota(s, &q), 0);
        cr_expect_eq(q.released_buffer_bytes, 0);
        kfdb_buffer_free(b);
        kfdb_session_free(s);
        kfdb_session_free(owner);
}

Test(quota, the_user_memory_cap_holds_across_sessions) {
        kfdb_session *a = connect_session(), *b = connect_session();
        kfdb_buffer *x, *y;
        kfdb_quota q;

        cr_assert_eq(kfdb_buffer_alloc(a, 16 * MiB, KFDB_PLACEMENT_GTT, &x), 0, "%s", kfdb_session_last_error(a));
        cr_assert_eq(kfdb_buffer_alloc(b, 8 * MiB, KFDB_PLACEMENT_GTT, &y), 0, "%s", kfdb_session_last_error(b));
        /* b is far below its own BufferMemory=16M, but the user holds 24 MiB. */
        expect_refused(b, 4096, "per-user buffer memory limit (policy UserBufferMemory=24M) reached: uid ");
        expect_refused(b, 4096, " holds 25165824 bytes in 2 sessions, 4096 requested");
        cr_assert_eq(kfdb_query_quota(b, &q), 0);
        cr_expect_eq(q.user_buffer_bytes, 24 * MiB);
        cr_expect_eq(q.user_buffers, 2);
        /* The other session going does not give its share back: its
         * buffer's dma-buf went to the client, and the simulated GPU cannot
         * see the last copy of one go (docs/policy.md "Exported buffers"). */
        kfdb_buffer_free(x);
        kfdb_session_free(a);
        /* The daemon sees a's hang-up in its own time: until then the
         * message still counts 2 sessions. */
        for (int i = 0; i < 500; i++) {
                kfdb_buffer *z = NULL;
                cr_assert_eq(kfdb_buffer_alloc(b, 4096, KFDB_PLACEMENT_GTT, &z), -EDQUOT);
                if (!strstr(kfdb_session_last_error(b), "in 2 sessions"))
                        break;
                usleep(10000);
        }
        expect_refused(b, 4096, " holds 25165824 bytes in 1 sessions, 4096 requested");
        /* A restarted daemon starts from nothing. */
        kfdb_buffer_free(y);
        kfdb_session_free(b);
        cr_assert_eq(test_daemon_restart(&d, SIGTERM, args), 0);
        b = connect_session();
        cr_assert_eq(kfdb_query_quota(b, &q), 0);
        cr_expect_eq(q.user_buffer_bytes, 0);
        cr_assert_eq(kfdb_buffer_alloc(b, 16 * MiB, KFDB_PLACEMENT_GTT, &x), 0, "%s", kfdb_session_last_error(b));
        kfdb_buffer_free(x);
        kfdb_session_free(b);
}

Test(quota, the_user_buffer_count_cap_holds_across_sessions) {
        kfdb_session *a = connect_session(), *b = connect_session();
        kfdb_buffer *x[3];

        cr_assert_eq(kfdb_buffer_alloc(a, 4096, KFDB_PLACEMENT_GTT, &x[0]), 0);
        cr_assert_eq(kfdb_buffer_alloc(a, 4096, KFDB_PLACEMENT_GTT, &x[1]), 0);
        cr_assert_eq(kfdb_buffer_alloc(b, 4096, KFDB_PLACEMENT_GTT, &x[2]), 0);
        expect_refused(b, 4096, "per-user buffer count limit (policy UserBuffers=3) reached: uid ");
        expect_refused(b, 4096, " holds 3 buffers and code objects in 2 sessions");
        for (int i = 0; i < 3; i++)
                kfdb_buffer_free(x[i]);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

/* Run as nobody: allocates 16 MiB and reports what Query said. */
static int nobody_allocates(void) {
        kfdb_session *s;
        kfdb_buffer *b;
        kfdb_quota q;

        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                return 10;
        if (kfdb_session_new(d.sock, "nobody", &s) < 0)
                return 11;
        if (kfdb_buffer_alloc(s, 16 * MiB, KFDB_PLACEMENT_GTT, &b) < 0) {
                fprintf(stderr, "nobody: %s\n", kfdb_session_last_error(s));
                return 12;
        }
        if (kfdb_query_quota(s, &q) < 0 || q.user_buffer_bytes != 16 * MiB)
                return 13;
        kfdb_buffer_free(b);
        kfdb_session_free(s);
        return 0;
}

Test(quota, another_user_is_not_affected) {
        kfdb_session *a = connect_session(), *b = connect_session();
        kfdb_buffer *x, *y;
        int status;
        pid_t pid;

        if (geteuid() != 0)
                cr_skip_test("needs root to run a client as nobody (65534)");
        cr_assert_eq(chmod(d.dir, 0755), 0); /* nobody must reach the socket */
        cr_assert_eq(kfdb_buffer_alloc(a, 16 * MiB, KFDB_PLACEMENT_GTT, &x), 0);
        cr_assert_eq(kfdb_buffer_alloc(b, 8 * MiB, KFDB_PLACEMENT_GTT, &y), 0);
        expect_refused(b, 4096, "UserBufferMemory=24M");
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
                _exit(nobody_allocates());
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "nobody's client: status 0x%x", status);
        kfdb_buffer_free(x);
        kfdb_buffer_free(y);
        kfdb_session_free(a);
        kfdb_session_free(b);
}
