/* SPDX-License-Identifier: MIT */
/*
 * Clients survive a daemon restart (docs/protocol.md "When the daemon
 * restarts"): a client holding buffers (its own, and one imported from
 * another client), events, a code object, a batch not yet submitted and a job
 * in flight goes on after the daemon is stopped (SIGTERM) or killed (SIGKILL)
 * and started again on the same socket. Its data are intact, the job in
 * flight fails with ECANCELED, everything else works with the same objects,
 * and its poll loop keeps its fd numbers.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"
#include "session-page.h"

static TestDaemon d;

static void teardown(void) {
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(restart, .fini = teardown, .timeout = 300);

/* Whether the daemon's log says text within 60 s. */
static bool log_wait(const char *text) {
        for (int i = 0; i < 6000; i++) {
                char *log = test_daemon_read_log(&d);
                bool found = strstr(log, text) != NULL;
                free(log);
                if (found)
                        return true;
                usleep(10 * 1000);
        }
        return false;
}

static kfdb_session *connect_session(const char *name) {
        kfdb_session *s = NULL;
        int r = kfdb_session_new(d.sock, name, &s);

        cr_assert_eq(r, 0, "connect: %s", strerror(-r));
        return s;
}

static uint64_t submit_copy(kfdb_session *s, kfdb_buffer *dst, kfdb_buffer *src, uint64_t size) {
        kfdb_batch *b = NULL;
        uint64_t fence = 0;

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_copy(b, dst, 0, src, 0, size), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_submit(b, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        kfdb_batch_free(b);
        return fence;
}

static void fill_words(uint32_t *p, size_t words, uint32_t seed) {
        for (size_t i = 0; i < words; i++)
                p[i] = seed ^ (uint32_t) (i * 2654435761u);
}

static bool words_are(const uint32_t *p, size_t words, uint32_t seed) {
        for (size_t i = 0; i < words; i++)
                if (p[i] != (seed ^ (uint32_t) (i * 2654435761u)))
                        return false;
        return true;
}

static void restart_survived(int sig) {
        const size_t size = 1 << 20, words = size / 4;
        kfdb_session *a, *b;
        kfdb_buffer *src, *dst, *shared_b, *shared_a = NULL, *late_dst;
        kfdb_event *gate, *ev;
        kfdb_batch *later = NULL, *held = NULL;
        uint32_t *psrc, *pdst, *pshared, *plate;
        uint64_t held_fence = 0, fence, handle_before;
        int sock_fd, event_fd, shared_fd = -1, rc;
        kfdb_wait_entry w;
        kfdb_wait_result res;
        kfdb_usage u;

        test_daemon_start(&d, NULL);
        a = connect_session("survivor");
        b = connect_session("neighbour");

        src = new_buffer(a, size, 0, (void **) &psrc);
        dst = new_buffer(a, size, 0xee, (void **) &pdst);
        late_dst = new_buffer(a, size, 0xdd, (void **) &plate);
        fill_words(psrc, words, 0x5eed);
        /* B's buffer, shared with A through its dma-buf. */
        shared_b = new_buffer(b, size, 0, (void **) &pshared);
        fill_words(pshared, words, 0xb0b);
        cr_assert_eq(kfdb_buffer_export(shared_b, &shared_fd), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(kfdb_buffer_import(a, shared_fd, &shared_a), 0, "%s", kfdb_session_last_error(a));
        close(shared_fd);

        /* A job held on the GPU by an event nobody sets, and a copy after it. */
        cr_assert_eq(kfdb_event_create(a, false, &gate), 0);
        cr_assert_eq(kfdb_event_create(a, true, &ev), 0);
        cr_assert_eq(kfdb_batch_new(a, &held), 0);
        cr_assert_eq(kfdb_batch_wait_event(held, gate), 0);
        cr_assert_eq(kfdb_batch_copy(held, dst, 0, src, 0, size), 0);
        cr_assert_eq(kfdb_batch_submit(held, NULL, &held_fence), 0, "%s", kfdb_session_last_error(a));
        cr_assert_eq(kfdb_fence_wait(a, held_fence, 100), -ETIMEDOUT);
        /* A batch made now and submitted after the restart. */
        cr_assert_eq(kfdb_batch_new(a, &later), 0);
        cr_assert_eq(kfdb_batch_copy(later, late_dst, 0, shared_a, 0, size), 0);

        sock_fd = kfdb_get_fd(a);
        event_fd = kfdb_get_event_fd(a);
        handle_before = kfdb_buffer_get_handle(src);

        rc = test_daemon_restart(&d, sig, NULL);
        if (sig == SIGTERM)
                cr_assert_eq(rc, 0, "the daemon did not stop cleanly: %d", rc);

        /* The job in flight did not complete: the new daemon never saw it. */
        rc = kfdb_fence_wait(a, held_fence, 20000);
        cr_assert_eq(rc, -ECANCELED, "got %d (%s)", rc, kfdb_session_last_error(a));
        cr_assert(strstr(kfdb_session_last_error(a), "restarted"), "%s", kfdb_session_last_error(a));
        cr_assert_eq(kfdb_session_get_reconnects(a), 1);
        cr_assert_eq(kfdb_get_fd(a), sock_fd, "the socket kept its fd number");
        cr_assert_eq(kfdb_get_event_fd(a), event_fd, "the eventfd kept its fd number");
        cr_assert_neq(kfdb_buffer_get_handle(src), handle_before, "handles are the new session's");
        {
                kfdb_job_failure f;
                bool seen = false;

                while (kfdb_job_failure_next(a, &f) == 1)
                        if (f.fence == held_fence && f.error == -ECANCELED)
                                seen = true;
                cr_assert(seen, "the cancelled job is reported as a failure too");
        }

        /* Memory and contents survived, through the same mappings. */
        cr_assert(words_are(psrc, words, 0x5eed), "the source buffer changed");
        cr_assert(words_are(pshared, words, 0xb0b), "the shared buffer changed");
        cr_assert_eq(kfdb_query(a, &u), 0, "%s", kfdb_session_last_error(a));
        cr_assert_eq(u.buffers, 4, "src, dst, late_dst and the imported buffer: %u", u.buffers);
        cr_assert_eq(u.events, 2);

        /* Every object works: a new job, the batch made before, events. */
        fence = submit_copy(a, dst, src, size);
        cr_assert_gt(fence, held_fence, "fences go on from where they were");
        rc = kfdb_fence_wait(a, fence, 20000);
        cr_assert_eq(rc, 0, "%s", kfdb_session_last_error(a));
        cr_assert(words_are(pdst, words, 0x5eed), "the copy after the restart");
        cr_assert_eq(kfdb_batch_submit(later, NULL, &fence), 0, "%s", kfdb_session_last_error(a));
        cr_assert_eq(kfdb_fence_wait(a, fence, 20000), 0, "%s", kfdb_session_last_error(a));
        cr_assert(words_are(plate, words, 0xb0b), "the batch made before the restart copied B's buffer");

        cr_assert_eq(kfdb_event_set(ev), 0, "%s", kfdb_session_last_error(a));
        w = (kfdb_wait_entry) { .event = ev };
        cr_assert_eq(kfdb_wait_events(a, &w, 1, false, 5000, &res), 0, "%s", kfdb_session_last_error(a));
        cr_assert_eq(res, KFDB_WAIT_COMPLETE);

        /* B came back too, with its buffer: A's write into it shows there. */
        fill_words(psrc, words, 0xa11);
        fence = submit_copy(a, shared_a, src, size);
        cr_assert_eq(kfdb_fence_wait(a, fence, 20000), 0, "%s", kfdb_session_last_error(a));
        cr_assert(words_are(pshared, words, 0xa11));
        cr_assert_eq(kfdb_query(b, &u), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(u.buffers, 1);
        cr_assert_eq(kfdb_session_get_reconnects(b), 1);

        kfdb_batch_free(held);
        kfdb_batch_free(later);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

Test(restart, a_client_survives_a_clean_restart) {
        restart_survived(SIGTERM);
}

Test(restart, a_client_survives_a_crash) {
        restart_survived(SIGKILL);
}

/* The code object is loaded again from the memfd the library kept. */
Test(restart, kernels_run_after_a_restart) {
        const uint32_t n = 1000, block = 128;
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *bx, *by;
        float *x, *y, a = 2.0f;

        compute_require_kernels();
        test_daemon_start(&d, NULL);
        s = connect_session("kernels");
        co = load_kernel(s, "saxpy");
        bx = new_buffer(s, n * 4, 0, (void **) &x);
        by = new_buffer(s, n * 4, 0, (void **) &y);
        for (uint32_t i = 0; i < n; i++) {
                x[i] = (float) i;
                y[i] = 1.0f;
        }
        cr_assert_eq(test_daemon_restart(&d, SIGTERM, NULL), 0);

        kfdb_arg args[] = { kfdb_arg_value(&a, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                            kfdb_arg_value(&n, 4) };
        run_dispatch(s, co, "saxpy", 1, &n, &block, args, 4);
        for (uint32_t i = 0; i < n; i++)
                cr_assert_eq(y[i], fmaf(2.0f, (float) i, 1.0f), "y[%u] = %g", i, (double) y[i]);
        cr_assert_eq(kfdb_session_get_reconnects(s), 1);
        kfdb_session_free(s);
}

/* A sub-allocator's blocks are the session's buffers: after a restart its
 * slices hold their data, jobs on them run, and it hands out and takes back
 * slices as before. */
Test(restart, slices_of_a_sub_allocator_live_through_a_restart) {
        kfdb_session *s;
        kfdb_suballocator *a;
        kfdb_slice x, y, z;
        kfdb_batch *b;
        uint64_t fence;

        test_daemon_start(&d, NULL);
        s = connect_session("slices");
        cr_assert_eq(kfdb_suballocator_new(s, KFDB_PLACEMENT_GTT, 64u << 10, &a), 0);
        cr_assert_eq(kfdb_slice_alloc(a, 4096, 0, &x), 0);
        cr_assert_eq(kfdb_slice_alloc(a, 4096, 0, &y), 0);
        fill_words(x.ptr, 1024, 0x51ce);
        cr_assert_eq(test_daemon_restart(&d, SIGTERM, NULL), 0);

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_copy(b, y.buffer, y.offset, x.buffer, x.offset, 4096), 0);
        cr_assert_eq(kfdb_batch_submit(b, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 30000), 0, "%s", kfdb_session_last_error(s));
        cr_assert(words_are(y.ptr, 1024, 0x51ce), "the copy between two slices after the restart");
        cr_assert_eq(kfdb_session_get_reconnects(s), 1);
        cr_assert_eq(kfdb_slice_free(a, &x, fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_slice_alloc(a, 60u << 10, 0, &z), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_slice_free(a, &z, 0), 0);
        cr_assert_eq(kfdb_slice_free(a, &y, 0), 0);
        kfdb_batch_free(b);
        kfdb_suballocator_free(a);
        kfdb_session_free(s);
}

/* The daemon's parent-death signal follows the thread that forked it: the
 * thread that restarts it stays until the daemon is stopped. */
static int thread_done[2];

static void *restart_soon(void *arg) {
        char c;

        (void) arg;
        usleep(300 * 1000);
        (void) test_daemon_restart(&d, SIGKILL, NULL);
        (void) !read(thread_done[0], &c, 1);
        return NULL;
}

/* A call waiting in the daemon when it goes is sent again to the new one. */
Test(restart, a_wait_in_progress_goes_on) {
        kfdb_session *s;
        kfdb_event *e;
        kfdb_wait_entry w;
        kfdb_wait_result res = KFDB_WAIT_FAIL;
        pthread_t t;
        struct timespec t0, t1;
        int rc;

        test_daemon_start(&d, NULL);
        s = connect_session("waiter");
        cr_assert_eq(kfdb_event_create(s, true, &e), 0);
        w = (kfdb_wait_entry) { .event = e };
        cr_assert_eq(pipe2(thread_done, O_CLOEXEC), 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cr_assert_eq(pthread_create(&t, NULL, restart_soon, NULL), 0);
        rc = kfdb_wait_events(s, &w, 1, false, 1500, &res);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        cr_assert_eq(rc, 0, "%d: %s", rc, kfdb_session_last_error(s));
        /* Nobody set the new event: the wait sent again ends at its timeout. */
        cr_assert_eq(res, KFDB_WAIT_TIMEOUT);
        cr_assert_geq((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000, 1500);
        cr_assert_eq(kfdb_session_get_reconnects(s), 1);
        kfdb_session_free(s);
        test_daemon_fini(&d);
        cr_assert_eq(write(thread_done[1], "x", 1), 1);
        cr_assert_eq(pthread_join(t, NULL), 0);
        close(thread_done[0]);
        close(thread_done[1]);
}

/* A daemon that does not come back: the calls fail, saying why, in time. */
Test(restart, gives_up_when_the_daemon_stays_away) {
        kfdb_session *s;
        kfdb_usage u;
        struct timespec t0, t1;
        long ms;
        int rc;

        test_daemon_start(&d, NULL);
        s = connect_session("abandoned");
        cr_assert_eq(kfdb_session_set_reconnect_timeout(s, 400), 0);
        cr_assert_eq(test_daemon_stop(&d), 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = kfdb_query(s, &u);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
        cr_assert_eq(rc, -ECONNRESET, "got %d (%s)", rc, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "reconnecting to"), "%s", kfdb_session_last_error(s));
        cr_assert_geq(ms, 350, "gave up after %ld ms", ms);
        cr_assert_lt(ms, 5000, "gave up after %ld ms", ms);
        /* With reconnecting off, at once. */
        cr_assert_eq(kfdb_session_set_reconnect_timeout(s, 0), 0);
        cr_assert_eq(kfdb_query(s, &u), -ECONNRESET);
        kfdb_session_free(s);
}

/* Hello's resume_fence, from a raw client: fences go on after it; a value
 * past the limit is refused with the field named. */
Test(restart, hello_resume_fence) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest hello = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        int fd, fds[2];
        unsigned n_fds = 2;

        test_daemon_start(&d, NULL);
        fd = raw_connect(&d);
        hello.protocol_version = 1;
        hello.resume_fence = (UINT64_C(1) << 62) + 1;
        req.id = 1;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        req.hello = &hello;
        m = raw_call(fd, &req, NULL, 0, fds, &n_fds);
        cr_assert_eq(m->error, EINVAL);
        cr_assert(strstr(m->error_message, "hello.resume_fence"), "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        hello.resume_fence = 1000;
        req.id = 2;
        n_fds = 2;
        m = raw_call(fd, &req, NULL, 0, fds, &n_fds);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        cr_assert_eq(n_fds, 2);
        {
                const KfdbSessionPage *page = mmap(NULL, m->hello->session_page_size, PROT_READ, MAP_SHARED,
                                                   fds[0], 0);
                cr_assert_neq(page, MAP_FAILED);
                cr_assert_eq(page->completed_fence, 1000);
                cr_assert_eq(page->submitted_fence, 1000);
                munmap((void *) page, m->hello->session_page_size);
        }
        close(fds[0]);
        close(fds[1]);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        {
                int bfd;
                uint64_t h = raw_alloc(fd, 4096, &bfd);
                RawCopy c;

                close(bfd);
                m = raw_call(fd, raw_copy_request(&c, 3, h, 0, h, 2048, 4), NULL, 0, NULL, NULL);
                cr_assert_eq(m->error, 0, "%s", m->error_message);
                cr_assert_eq(m->submit->n_fences, 1);
                cr_assert_eq(m->submit->fences[0], 1001, "the first fence follows resume_fence");
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        close(fd);
}

/* A kernel without secondary KFD contexts (1.18): the daemon's device
 * context is its own KFD process, which a reset evicts for good. */
static const char *const no_secondary[] = { "--sim-kfd-version=1.18", NULL };

/*
 * A GPU reset (kfd-facts §7.2: HW_EXCEPTION with memory_lost; the simulator
 * does one on SIGUSR2) where the daemon's device context is its own KFD
 * process (KFD 1.18): the job on the GPU fails saying so; the daemon, whose
 * own GPU context is gone, tells its clients and exits 1 for the service
 * manager to start a new one (here the test does); the client goes on
 * there. GTT contents survive, VRAM contents do not. With secondary contexts
 * the daemon brings the GPU back itself (below).
 */
static void reset_and_go_on(bool in_daemon) {
        const size_t size = 1 << 20, words = size / 4;
        kfdb_session *s;
        kfdb_buffer *gtt, *vram, *dst;
        kfdb_event *gate;
        kfdb_batch *b = NULL;
        uint32_t *pgtt, *pvram, *pdst;
        uint64_t held, fence;
        int rc;

        test_daemon_start(&d, in_daemon ? NULL : no_secondary);
        s = connect_session("reset");
        gtt = new_buffer(s, size, 0, (void **) &pgtt);
        dst = new_buffer(s, size, 0, (void **) &pdst);
        cr_assert_eq(kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_VRAM, &vram), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_map(vram, (void **) &pvram), 0);
        fill_words(pgtt, words, 0x6771);
        fill_words(pvram, words, 0x7a3);
        cr_assert_eq(kfdb_event_create(s, false, &gate), 0);
        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_wait_event(b, gate), 0);
        cr_assert_eq(kfdb_batch_copy(b, dst, 0, gtt, 0, size), 0);
        cr_assert_eq(kfdb_batch_submit(b, NULL, &held), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, held, 100), -ETIMEDOUT);

        cr_assert_eq(kill(d.pid, SIGUSR2), 0);
        if (in_daemon) {
                /* The GPU comes back in the running daemon. */
                cr_assert(log_wait("GPU 0 is served again"), "GPU 0 was not brought back");
        } else {
                /* The daemon exits 1; then the service manager's part: a new
                 * daemon on the same socket. */
                cr_assert_eq(test_daemon_restart(&d, 0, no_secondary), 1, "the daemon exits 1 after the reset");
        }
        {
                char *log = test_daemon_read_log(&d);
                cr_assert(strstr(log, "the GPU was reset (VRAM contents lost)"), "%s", log);
                free(log);
        }

        /* Neither the wait job nor the copy after it ran; the first says why. */
        rc = kfdb_fence_wait(s, held - 1, 20000);
        cr_assert_eq(rc, -ECANCELED, "got %d (%s)", rc, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "the GPU was reset (VRAM contents lost)"), "%s",
                  kfdb_session_last_error(s));
        rc = kfdb_fence_wait(s, held, 20000);
        cr_assert_eq(rc, -ECANCELED, "got %d (%s)", rc, kfdb_session_last_error(s));
        cr_assert(words_are(pgtt, words, 0x6771), "GTT is system memory: it survives a reset");
        for (size_t i = 0; i < words; i++)
                cr_assert_eq(pvram[i], 0, "VRAM word %zu survived the reset", i);
        fence = submit_copy(s, dst, gtt, size);
        cr_assert_eq(kfdb_fence_wait(s, fence, 20000), 0, "%s", kfdb_session_last_error(s));
        cr_assert(words_are(pdst, words, 0x6771));
        cr_assert_eq(kfdb_session_get_reconnects(s), 1);
        kfdb_batch_free(b);
        kfdb_session_free(s);
}

Test(restart, a_gpu_reset_loses_vram_and_the_client_goes_on) {
        reset_and_go_on(false);
}

/* With secondary KFD contexts (KFD 1.19) the device context is one of its
 * own: the daemon makes it again and stays up; to the client it is the same
 * as a restart (its session ends, it reconnects, its jobs failed saying why). */
Test(restart, a_gpu_reset_is_recovered_in_the_running_daemon) {
        pid_t pid;

        /* The run's own daemon argument (the -workers run's KFD 1.18) comes
         * last and would win: no secondary contexts there. */
        if (getenv("KFDBROKER_TEST_DAEMON_ARG"))
                cr_skip_test("a run with a daemon argument of its own (%s)", getenv("KFDBROKER_TEST_DAEMON_ARG"));
        reset_and_go_on(true);
        pid = d.pid;
        cr_expect_eq(kill(pid, 0), 0, "the daemon ran on");
}

/* A kernel on the GPU at the reset: its job fails, saying why — EIO when its
 * own context reported the reset first, ECANCELED when the daemon's own
 * context did and the daemon handed over before the job's context spoke. */
Test(restart, a_kernel_running_at_a_gpu_reset_fails_with_eio) {
        kfdb_session *s;
        kfdb_code_object *gate, *saxpy;
        kfdb_buffer *flag, *out;
        uint32_t *pflag, *pout;
        uint64_t fence;
        int rc;

        compute_require_kernels();
        test_daemon_start(&d, no_secondary);
        s = connect_session("reset-kernel");
        gate = load_kernel(s, "gate");
        saxpy = load_kernel(s, "saxpy");
        flag = new_buffer(s, 4096, 0, (void **) &pflag);
        out = new_buffer(s, 4096, 0, (void **) &pout);
        fence = hold_gpu(s, gate, flag, out);
        cr_assert_eq(kfdb_fence_wait(s, fence, 300), -ETIMEDOUT, "the gate holds");
        cr_assert_eq(kill(d.pid, SIGUSR2), 0);
        cr_assert_eq(test_daemon_restart(&d, 0, no_secondary), 1, "the daemon exits 1 after the reset");
        rc = kfdb_fence_wait(s, fence, 20000);
        cr_assert(rc == -EIO || rc == -ECANCELED, "got %d (%s)", rc, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "the GPU was reset (VRAM contents lost)"), "%s",
                  kfdb_session_last_error(s));
        {
                const uint32_t n = 256, block = 64;
                float a = 3.0f, *x, *y;
                kfdb_buffer *bx = new_buffer(s, n * 4, 0, (void **) &x), *by = new_buffer(s, n * 4, 0, (void **) &y);
                kfdb_arg args[] = { kfdb_arg_value(&a, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                                    kfdb_arg_value(&n, 4) };

                for (uint32_t i = 0; i < n; i++)
                        x[i] = (float) i, y[i] = 1.0f;
                run_dispatch(s, saxpy, "saxpy", 1, &n, &block, args, 4);
                for (uint32_t i = 0; i < n; i++)
                        cr_assert_eq(y[i], fmaf(3.0f, (float) i, 1.0f));
        }
        kfdb_session_free(s);
}
