/* SPDX-License-Identifier: MIT */
/*
 * Per-job timeouts from the policy (JobTimeout=): a job that runs on the GPU
 * past it is aborted and fails with ETIME, the session is told, and the queue
 * keeps working; a wait-event job held past it fails with ETIME too.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;
static char policydir[64];

static void setup(void) {
        char arg[128], path[160];
        const char *args[] = { arg, "--sdma-queues=1", NULL };
        FILE *f;

        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        snprintf(path, sizeof(path), "%s/50-timeout.conf", policydir);
        f = fopen(path, "we");
        cr_assert(f);
        /* Two 1 GiB buffers: more than the memory defaults fitted to the simulated GPU's 1 GiB. */
        fprintf(f, "[Match]\nUser=%u\n\n[Limits]\nJobTimeout=20ms\nBufferMemory=4G\nUserBufferMemory=infinity\n",
                (unsigned) getuid());
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

TestSuite(timeouts, .init = setup, .fini = teardown, .timeout = 120);

static kfdb_session *connect_session(void) {
        kfdb_session *s;
        cr_assert_eq(kfdb_session_new(d.sock, "timeouts", &s), 0);
        return s;
}

Test(timeouts, long_gpu_job_is_aborted_and_the_queue_recovers) {
        kfdb_session *s = connect_session(), *other = connect_session();
        kfdb_buffer *a, *b, *small;
        kfdb_batch *batch, *ob;
        uint64_t fences[4], f;
        uint32_t *p;
        int r;

        /* 1 GiB of copies in 4 MiB packets, into pages never touched before:
         * far longer than the 20 ms timeout (a memcpy of 1 GiB alone takes more). */
        cr_assert_eq(kfdb_buffer_alloc(s, 1ull << 30, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 1ull << 30, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &small), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 0, a, 0, 1ull << 30), 0);
        cr_assert_eq(kfdb_batch_fill(batch, small, 0, 4096, 0x7e7e7e7e), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);

        r = kfdb_fence_wait(s, fences[0], 30000);
        cr_assert_eq(r, -ETIME, "got %d (%s)", r, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "timeout"), "%s", kfdb_session_last_error(s));
        /* The fill ordered after it in its stream was on the GPU already: it
         * is dropped, not run. */
        r = kfdb_fence_wait(s, fences[1], 30000);
        cr_assert_eq(r, -ECANCELED, "got %d (%s)", r, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "before it in its stream failed"), "%s",
                  kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_map(small, (void **) &p), 0);
        cr_assert_eq(p[1023], 0u, "the fill ran after the copy it was ordered after failed");
        /* What is submitted after the failure runs, on the recreated queue. */
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, small, 0, 4096, 0x7e7e7e7e), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &f), 0);
        cr_assert_eq(kfdb_fence_wait(s, f, 30000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(p[1023], 0x7e7e7e7e);

        /* Another session on the same queue works too. */
        cr_assert_eq(kfdb_batch_new(other, &ob), 0);
        {
                kfdb_buffer *ob_buf;
                cr_assert_eq(kfdb_buffer_alloc(other, 65536, KFDB_PLACEMENT_GTT, &ob_buf), 0);
                cr_assert_eq(kfdb_batch_fill(ob, ob_buf, 0, 65536, 1), 0);
                cr_assert_eq(kfdb_batch_submit(ob, NULL, &f), 0);
                cr_assert_eq(kfdb_fence_wait(other, f, 30000), 0);
        }
        kfdb_batch_free(ob);
        kfdb_batch_free(batch);
        kfdb_session_free(other);
        kfdb_session_free(s);
}

/* A copy large enough to go to the GPU in 2 MiB pieces, each far shorter
 * than the 20 ms timeout: the timeout bounds the whole job, which fails once
 * (one JobFailed, with its fence), and its pieces after the failure never run. */
Test(timeouts, chunked_copy_times_out_as_one_job) {
        enum { SIZE = 512u << 20 };
        kfdb_session *s = connect_session();
        kfdb_buffer *a, *b, *small;
        kfdb_batch *batch;
        uint64_t fences[2];
        uint8_t *src, *dst;
        uint32_t *p;
        int r;

        cr_assert_eq(kfdb_buffer_alloc(s, SIZE, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, SIZE, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &small), 0);
        /* The source is written here; the destination's pages are left for
         * the copy to fault in, which makes the whole copy take several
         * times the 20 ms on any machine (with streaming stores the copy
         * alone takes about 27 ms here), while each 2 MiB piece stays far
         * under it. */
        cr_assert_eq(kfdb_buffer_map(a, (void **) &src), 0);
        cr_assert_eq(kfdb_buffer_map(b, (void **) &dst), 0);
        memset(src, 0x5a, SIZE);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 0, a, 0, SIZE), 0);
        cr_assert_eq(kfdb_batch_fill(batch, small, 0, 4096, 0x7e7e7e7e), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);

        r = kfdb_fence_wait(s, fences[0], 30000);
        cr_assert_eq(r, -ETIME, "got %d (%s)", r, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "copy job ran longer than its timeout of 0.020 s"), "%s",
                  kfdb_session_last_error(s));
        r = kfdb_fence_wait(s, fences[1], 30000);
        cr_assert_eq(r, -ECANCELED, "got %d (%s)", r, kfdb_session_last_error(s));
        {
                kfdb_job_failure jf;
                unsigned n = 0;
                while (kfdb_job_failure_next(s, &jf) == 1) {
                        cr_assert_lt(n, 2u, "one failure per job: a third for fence %llu (%s)",
                                     (unsigned long long) jf.fence, jf.message);
                        cr_assert_eq(jf.fence, fences[n], "failures reported in fence order");
                        cr_assert_eq(jf.error, n == 0 ? -ETIME : -ECANCELED);
                        n++;
                }
                cr_assert_eq(n, 2u);
        }
        sleep(1); /* anything still to run would have run by now */
        cr_assert_eq(dst[SIZE - 1], 0, "the last piece of the copy ran after it failed");
        cr_assert_eq(kfdb_buffer_map(small, (void **) &p), 0);
        cr_assert_eq(p[1023], 0u, "the fill ran after the copy it was ordered after failed");
        kfdb_batch_free(batch);
        kfdb_session_free(s);
}

/* A wait-event job that times out fails the jobs ordered after it in its
 * stream, which never run; the stream goes on with what comes after. */
Test(timeouts, jobs_after_a_timed_out_wait_do_not_run) {
        kfdb_session *s = connect_session();
        kfdb_buffer *b;
        kfdb_event *ev;
        kfdb_batch *batch;
        uint64_t fences[3], f;
        uint32_t *p;
        int r;

        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_map(b, (void **) &p), 0);
        cr_assert_eq(kfdb_event_create(s, true, &ev), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0xdeadbeef), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 8, 0x0badf00d), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);
        r = kfdb_fence_wait(s, fences[0], 30000);
        cr_assert_eq(r, -ETIME, "got %d (%s)", r, kfdb_session_last_error(s));
        for (unsigned i = 1; i < 3; i++) {
                r = kfdb_fence_wait(s, fences[i], 30000);
                cr_assert_eq(r, -ECANCELED, "job %u: got %d (%s)", i, r, kfdb_session_last_error(s));
                cr_assert(strstr(kfdb_session_last_error(s), "not run: the wait-event job before it in its stream failed"),
                          "%s", kfdb_session_last_error(s));
        }
        {
                kfdb_job_failure jf;
                unsigned n = 0;
                while (kfdb_job_failure_next(s, &jf) == 1) {
                        cr_assert_eq(jf.fence, fences[n], "failures reported in fence order");
                        n++;
                }
                cr_assert_eq(n, 3);
        }
        cr_assert_eq(p[0], 0u, "a fill ordered after the failed wait ran");
        cr_assert_eq(p[1023], 0u);
        kfdb_batch_free(batch);

        /* The stream goes on. (A 4 KiB fill is far below 20 ms, but on a
         * machine loaded far beyond its cores it can take longer: one that
         * timed out is tried again, a few times.) */
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        r = -ETIME;
        for (unsigned attempt = 0; attempt < 5 && r == -ETIME; attempt++) {
                cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0x600d600d), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &f), 0);
                r = kfdb_fence_wait(s, f, 30000);
        }
        cr_assert_eq(r, 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(p[1023], 0x600d600d);
        kfdb_batch_free(batch);
        kfdb_session_free(s);
}

/* A kernel past its timeout is stopped; the dispatch queued behind it in the
 * same stream (on the GPU already, in the client's GPU context or its worker
 * process) is dropped, not run; the next submission runs. */
Test(timeouts, dispatch_after_a_timed_out_kernel_does_not_run) {
        compute_require_kernels();
        kfdb_session *s = connect_session();
        kfdb_code_object *gate = load_kernel(s, "gate");
        uint32_t *flag, *out, *flag2, *out2, max = UINT32_MAX, one = 1;
        kfdb_buffer *bf = new_buffer(s, 4096, 0, (void **) &flag), *bo = new_buffer(s, 4096, 0x5a, (void **) &out);
        kfdb_buffer *bf2 = new_buffer(s, 4096, 0, (void **) &flag2), *bo2 = new_buffer(s, 4096, 0x5a, (void **) &out2);
        kfdb_arg spin[] = { kfdb_arg_buffer(bf, 0), kfdb_arg_buffer(bo, 0), kfdb_arg_value(&max, 4) };
        kfdb_arg quick[] = { kfdb_arg_buffer(bf2, 0), kfdb_arg_buffer(bo2, 0), kfdb_arg_value(&max, 4) };
        kfdb_batch *batch;
        uint64_t fences[2], f;
        int r;

        flag2[0] = 1; /* the second gate is open: it would return at once */
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, gate, "gate", 1, &one, &one, spin, 3), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, gate, "gate", 1, &one, &one, quick, 3), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);
        r = kfdb_fence_wait(s, fences[0], DISPATCH_TIMEOUT_MS);
        cr_assert_eq(r, -ETIME, "got %d (%s)", r, kfdb_session_last_error(s));
        r = kfdb_fence_wait(s, fences[1], DISPATCH_TIMEOUT_MS);
        cr_assert_eq(r, -ECANCELED, "got %d (%s)", r, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "before it in its stream failed"), "%s",
                  kfdb_session_last_error(s));
        cr_assert_eq(out2[1], 0x5a5a5a5au, "the dispatch ordered after the stopped kernel ran");
        kfdb_batch_free(batch);

        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, gate, "gate", 1, &one, &one, quick, 3), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &f), 0);
        cr_assert_eq(kfdb_fence_wait(s, f, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(out2[1], 1u);
        kfdb_batch_free(batch);
        kfdb_code_object_free(gate);
        kfdb_session_free(s);
}

/* An instruction the GPU cannot run stops the queue, and nothing says so —
 * the kernel raises no event for it (kfd-facts §7.2) — so the job ends at its
 * timeout; on the simulated GPU its message then carries the device's words,
 * the instruction and its encoding. The session goes on. */
Test(timeouts, instruction_the_gpu_cannot_run_ends_at_the_timeout) {
        compute_require_kernels();
        kfdb_session *s = connect_session();
        kfdb_code_object *co = load_kernel(s, "illegal");
        uint32_t n = 64, *p;
        kfdb_buffer *b = new_buffer(s, 4096, 0, (void **) &p);
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0) };
        kfdb_batch *batch;
        uint64_t fence;
        int r;

        /* 20 ms is short: a first dispatch in a new worker process may not
         * reach the instruction before it is aborted (then nobody can say
         * why it did not finish). Try until one did, ten times at most. */
        for (unsigned attempt = 0;
             attempt < 10 && !strstr(kfdb_session_last_error(s) ?: "", "the GPU had stopped it"); attempt++) {
                cr_assert_eq(kfdb_batch_new(s, &batch), 0);
                cr_assert_eq(kfdb_batch_dispatch(batch, co, "illegal", 1, &n, &n, args, 1), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
                r = kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS);
                cr_assert_eq(r, -ETIME, "got %d: %s", r, kfdb_session_last_error(s));
                cr_assert(strstr(kfdb_session_last_error(s), "dispatch of kernel \"illegal\" ran longer than its timeout"),
                          "%s", kfdb_session_last_error(s));
                kfdb_batch_free(batch);
        }
        cr_assert_eq(p[0], 1, "the kernel never ran up to the instruction");
        cr_assert(strstr(kfdb_session_last_error(s),
                         "the GPU had stopped it: unsupported instruction v_dot2_f32_f16 (encoding 0xcc134000 0x1c020100)"),
                  "%s", kfdb_session_last_error(s));

        /* The next work of the session runs. */
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 7), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        kfdb_batch_free(batch);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
}

Test(timeouts, held_wait_event_job_times_out) {
        kfdb_session *s = connect_session();
        kfdb_event *ev;
        kfdb_batch *batch;
        uint64_t fence;
        int r;

        cr_assert_eq(kfdb_event_create(s, true, &ev), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        r = kfdb_fence_wait(s, fence, 30000);
        cr_assert_eq(r, -ETIME, "got %d (%s)", r, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "waited longer than its timeout"), "%s",
                  kfdb_session_last_error(s));
        kfdb_batch_free(batch);
        kfdb_session_free(s);
}
