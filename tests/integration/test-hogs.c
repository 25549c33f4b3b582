/* SPDX-License-Identifier: MIT */
/*
 * One user hogging what all users share (issue 29): the compute group's slots
 * held by kernels that halt, and another user's dispatches must still get
 * one at once. The other user is nobody (65534), in a forked child: the
 * daemon tells users apart by the uid of the socket's peer. Run in both
 * context mechanisms (meson.build: test-hogs-workers).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

#define NOBODY 65534

static TestDaemon d;

static void setup(void) {
        test_daemon_start(&d, NULL);
        cr_assert_eq(chmod(d.dir, 0755), 0); /* nobody must reach the socket */
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(hogs, .init = setup, .fini = teardown, .timeout = 240);

static void require_root(void) {
        if (geteuid() != 0)
                cr_skip_test("needs root to run a second user's client as nobody (65534)");
}

/* Jobs on the GPU now, all sessions (Status). */
static uint32_t jobs_on_gpu(kfdb_session *s) {
        kfdb_daemon_status st;

        cr_assert_eq(kfdb_status(s, &st), 0, "%s", kfdb_session_last_error(s));
        return st.jobs_in_flight;
}

/* Waits until the jobs on the GPU stop changing (the daemon has placed what
 * it will place) and returns how many there are. */
static uint32_t settled_jobs_on_gpu(kfdb_session *s) {
        uint32_t last = UINT32_MAX, n;
        unsigned same = 0;

        for (unsigned i = 0; i < 200 && same < 5; i++) {
                n = jobs_on_gpu(s);
                same = n == last ? same + 1 : 0;
                last = n;
                usleep(50 * 1000);
        }
        return last;
}

/* Submits n dispatches of the halt kernel (tests/kernels/halt.cl) on s. */
static void submit_halts(kfdb_session *s, const kfdb_code_object *co, kfdb_buffer *out, unsigned n,
                         uint64_t *ret_first) {
        uint32_t one = 1;
        kfdb_arg arg = kfdb_arg_buffer(out, 0);
        kfdb_batch *b = NULL;
        uint64_t fences[16];

        cr_assert_leq(n, 16u);
        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        for (unsigned i = 0; i < n; i++)
                cr_assert_eq(kfdb_batch_dispatch(b, co, "halt", 1, &one, &one, &arg, 1), 0, "%s",
                             kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_submit(b, fences, NULL), 0, "%s", kfdb_session_last_error(s));
        kfdb_batch_free(b);
        *ret_first = fences[0];
}

/* The victim, as nobody: n dispatches of the empty kernel one after the
 * other, each waited for at most 10 s. Exit status 0, or what went wrong. */
static int victim_dispatches(unsigned n) {
        kfdb_code_object *co = NULL;
        kfdb_session *s = NULL;
        uint32_t one = 1;
        int r;

        if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0)
                return 10;
        if (kfdb_session_new(d.sock, "victim", &s) < 0)
                return 11;
        r = kfdb_code_object_load_file(s, kernel_path("empty"), &co);
        if (r < 0) {
                fprintf(stderr, "victim: loading empty: %s\n", kfdb_session_last_error(s));
                return 12;
        }
        for (unsigned i = 0; i < n; i++) {
                kfdb_batch *b = NULL;
                uint64_t fence;

                if (kfdb_batch_new(s, &b) < 0 || kfdb_batch_dispatch(b, co, "empty", 1, &one, &one, NULL, 0) < 0 ||
                    kfdb_batch_submit(b, NULL, &fence) < 0) {
                        fprintf(stderr, "victim: dispatch %u: %s\n", i, kfdb_session_last_error(s));
                        return 13;
                }
                kfdb_batch_free(b);
                r = kfdb_fence_wait(s, fence, 10000);
                if (r < 0) {
                        fprintf(stderr, "victim: dispatch %u did not finish within 10 s: %s (%s)\n", i, strerror(-r),
                                kfdb_session_last_error(s));
                        return 14;
                }
        }
        kfdb_code_object_free(co);
        kfdb_session_free(s);
        return 0;
}

/* Runs fn in a child (as whoever it makes itself) and returns its exit
 * status; kills it after limit_s seconds (status 99). */
static int run_child(int (*fn)(unsigned), unsigned arg, unsigned limit_s) {
        int status = 0;
        pid_t pid = fork();

        cr_assert_geq(pid, 0);
        if (pid == 0)
                _exit(fn(arg));
        for (unsigned i = 0; i < limit_s * 100; i++) {
                pid_t w = waitpid(pid, &status, WNOHANG);
                cr_assert_geq(w, 0);
                if (w == pid)
                        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                usleep(10 * 1000);
        }
        kill(pid, SIGKILL);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        return 99;
}

/*
 * Issue 29 item 3. One user (this test's uid) with 4 sessions that each want
 * 8 dispatches of a kernel that halts holds no more than its share of the 16
 * compute slots — 8, what each of two users may hold — and another user's
 * tiny dispatches, one after the other, each get a slot at once and finish,
 * while the first user's kernels still sit there (they would until their
 * DispatchTimeout=, a minute). Before, the 4 sessions held all 16 slots and
 * the other user's first dispatch waited for that minute.
 */
Test(hogs, halted_kernels_of_one_user_leave_slots_for_another) {
        enum { SESSIONS = 4, EACH = 8 };
        kfdb_session *a[SESSIONS];
        kfdb_code_object *co[SESSIONS];
        kfdb_buffer *out[SESSIONS];
        uint64_t first[SESSIONS];
        uint32_t held;
        void *map;
        int rc;

        compute_require_kernels();
        require_root();
        for (unsigned i = 0; i < SESSIONS; i++) {
                cr_assert_eq(kfdb_session_new(d.sock, "hog", &a[i]), 0);
                co[i] = load_kernel(a[i], "halt");
                out[i] = new_buffer(a[i], 4096, 0, &map);
                submit_halts(a[i], co[i], out[i], EACH, &first[i]);
        }
        held = settled_jobs_on_gpu(a[0]);
        cr_expect_gt(held, 0u, "none of the halting dispatches went to the GPU");
        cr_expect_leq(held, 8u, "one user holds %u of the 16 compute slots", held);

        rc = run_child(victim_dispatches, 20, 120);
        cr_expect_eq(rc, 0, "the other user's dispatches did not all finish promptly (victim status %d)", rc);

        /* The hog's kernels were there all along: none finished. */
        for (unsigned i = 0; i < SESSIONS; i++)
                cr_expect_eq(kfdb_fence_is_done(a[i], first[i]), 0, "a halted dispatch finished");
        held = jobs_on_gpu(a[0]);
        cr_expect_gt(held, 0u);
        cr_expect_leq(held, 8u, "one user holds %u of the 16 compute slots", held);
        for (unsigned i = 0; i < SESSIONS; i++)
                kfdb_session_free(a[i]);
}
