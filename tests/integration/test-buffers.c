/* SPDX-License-Identifier: MIT */
/*
 * Fast allocation and fd budgets (issue 13, item 3; docs/protocol.md
 * "Buffers", docs/policy.md "File descriptors"):
 *  - FreeBuffer without a reply: an error still comes, with the request's id;
 *    success is silent; libkfdbroker does not wait and hands a later error
 *    out as a failure with fence 0;
 *  - the free an AllocBuffer carries (free_first, issue 32 item 3) is done
 *    first, its error answered with its own id;
 *  - a session's freed small buffers come back to it zeroed (CPU and GPU
 *    see zeros), never to another session, stay charged while pooled, are
 *    not pooled while a job uses them or when the client kept a copy, and
 *    are not charged after the session ends;
 *  - one user over its fd budget is refused with a clear error while another
 *    user still connects, allocates and runs a job; freeing makes room.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

#define KiB 1024ull
#define SMALL (64 * KiB)

static TestDaemon d;

static void setup(void) {
        test_daemon_start(&d, NULL);
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(buffers, .init = setup, .fini = teardown, .timeout = 120);

static uint64_t pooled_bytes(kfdb_session *s) {
        kfdb_fd_budget f;

        cr_assert_eq(kfdb_query_fd_budget(s, &f), 0, "%s", kfdb_session_last_error(s));
        return f.pooled_buffer_bytes;
}

static uint64_t buffer_bytes(kfdb_session *s) {
        kfdb_usage u;

        cr_assert_eq(kfdb_query(s, &u), 0, "%s", kfdb_session_last_error(s));
        return u.buffer_bytes;
}

static kfdb_buffer *alloc_filled(kfdb_session *s, kfdb_placement placement, uint8_t byte) {
        kfdb_buffer *b;
        void *p;

        cr_assert_eq(kfdb_buffer_alloc(s, SMALL, placement, &b), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_map(b, &p), 0);
        memset(p, byte, SMALL);
        return b;
}

static bool all_zero(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

/* Copies src into a new buffer on the GPU and says whether it read zeros. */
static bool gpu_reads_zeros(kfdb_session *s, kfdb_buffer *src) {
        kfdb_buffer *dst;
        kfdb_batch *batch;
        uint64_t fence;
        void *p;
        bool zero;

        cr_assert_eq(kfdb_buffer_alloc(s, SMALL, KFDB_PLACEMENT_GTT, &dst), 0);
        cr_assert_eq(kfdb_buffer_map(dst, &p), 0);
        memset(p, 0x5a, SMALL);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, dst, 0, src, 0, SMALL), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0, "%s", kfdb_session_last_error(s));
        zero = all_zero(p, SMALL);
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_buffer_free(dst), 0);
        return zero;
}

/* ---- FreeBuffer without a reply ---- */

static Kfdbroker__V1__Request *free_request(Kfdbroker__V1__Request *req, Kfdbroker__V1__FreeBufferRequest *f,
                                            uint64_t id, uint64_t handle) {
        *req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
        *f = (Kfdbroker__V1__FreeBufferRequest) KFDBROKER__V1__FREE_BUFFER_REQUEST__INIT;
        f->handle = handle;
        f->no_reply = true;
        req->id = id;
        req->body_case = KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER;
        req->free_buffer = f;
        return req;
}

Test(buffers, a_free_without_reply_is_silent_and_its_error_still_comes) {
        Kfdbroker__V1__Request req, q = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__QueryRequest qr = KFDBROKER__V1__QUERY_REQUEST__INIT;
        Kfdbroker__V1__FreeBufferRequest f;
        Kfdbroker__V1__ServerMessage *m;
        int c = raw_connect(&d);
        uint64_t h;

        raw_hello(c);
        h = raw_alloc(c, SMALL, NULL);
        /* Success: nothing. The Query sent after it is the first answer. */
        cr_assert_eq(raw_send(c, free_request(&req, &f, 900, h), NULL, 0), 0);
        q.id = 901;
        q.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
        q.query = &qr;
        cr_assert_eq(raw_send(c, &q, NULL, 0), 0);
        cr_assert_eq(raw_recv(c, &m, NULL, NULL, 5000), 1);
        cr_expect_eq(m->id, 901, "a FreeBuffer with no_reply was answered (id %llu)", (unsigned long long) m->id);
        cr_expect_eq(m->query ? m->query->buffers : 99, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        /* Failure: the error, with the FreeBuffer's id and what was wrong. */
        cr_assert_eq(raw_send(c, free_request(&req, &f, 902, h), NULL, 0), 0);
        cr_assert_eq(raw_recv(c, &m, NULL, NULL, 5000), 1);
        cr_expect_eq(m->id, 902);
        cr_expect_eq(m->error, ENOENT);
        cr_expect(strstr(m->error_message, "free_buffer.handle: no buffer"), "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(c);
}

/* The library's free returns at once; when the daemon refuses it after all
 * (here: the handle was freed behind the library's back, on the same
 * connection), the error comes as a failure with fence 0. */
Test(buffers, the_library_does_not_wait_for_a_free_and_reports_a_late_error) {
        Kfdbroker__V1__Request req;
        Kfdbroker__V1__FreeBufferRequest f;
        int c = raw_connect(&d), own = dup(c);
        kfdb_job_failure jf = {};
        kfdb_session *s;
        kfdb_buffer *b;

        cr_assert_geq(own, 0);
        cr_assert_eq(kfdb_session_new_from_fd(own, "late-error", &s), 0);
        cr_assert(kfdb_session_has_feature(s, "free-no-reply"));
        cr_assert_eq(kfdb_buffer_alloc(s, SMALL, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(raw_send(c, free_request(&req, &f, 77, kfdb_buffer_get_handle(b)), NULL, 0), 0);
        cr_assert_eq(kfdb_buffer_free(b), 0, "the free waited for the daemon: %s", kfdb_session_last_error(s));
        /* A call that waits reads what came before its reply. */
        (void) buffer_bytes(s);
        cr_assert_eq(kfdb_job_failure_next(s, &jf), 1, "the daemon's refusal was lost");
        cr_expect_eq(jf.fence, 0);
        cr_expect_eq(jf.error, -ENOENT);
        cr_expect(strstr(jf.message, "free_buffer.handle: no buffer"), "%s", jf.message);
        kfdb_session_free(s);
        close(c);
}

/* ---- A free in the AllocBuffer (alloc-free-first) ---- */

static void send_alloc_free_first(int c, uint64_t id, uint64_t free_id, uint64_t handle) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__FreeFirst f = KFDBROKER__V1__FREE_FIRST__INIT;

        f.id = free_id;
        f.handle = handle;
        f.no_copy_kept = true;
        a.size = SMALL;
        a.free_first = &f;
        req.id = id;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        req.alloc_buffer = &a;
        cr_assert_eq(raw_send(c, &req, NULL, 0), 0);
}

/* The next message, which must answer id; returns its handle (0: an error,
 * whose errno is checked against error). */
static uint64_t recv_answer(int c, uint64_t id, int error, const char *message) {
        Kfdbroker__V1__ServerMessage *m;
        int fds[2];
        unsigned n = 2;
        uint64_t handle = 0;

        cr_assert_eq(raw_recv(c, &m, fds, &n, 5000), 1, "no answer to request %llu", (unsigned long long) id);
        for (unsigned i = 0; i < n; i++)
                close(fds[i]);
        cr_assert_eq(m->id, id, "request %llu answered where %llu was due", (unsigned long long) m->id,
                     (unsigned long long) id);
        cr_expect_eq(m->error, error, "request %llu: %s", (unsigned long long) id, m->error_message);
        if (message)
                cr_expect(strstr(m->error_message, message), "%s", m->error_message);
        if (m->error == 0 && m->alloc_buffer)
                handle = m->alloc_buffer->handle;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return handle;
}

static void query_buffers(int c, uint64_t id, uint64_t *ret_buffers, uint64_t *ret_pooled) {
        Kfdbroker__V1__Request q = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__QueryRequest qr = KFDBROKER__V1__QUERY_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;

        q.id = id;
        q.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
        q.query = &qr;
        cr_assert_eq(raw_send(c, &q, NULL, 0), 0);
        cr_assert_eq(raw_recv(c, &m, NULL, NULL, 5000), 1);
        cr_assert_eq(m->id, id);
        cr_assert(m->query);
        *ret_buffers = m->query->buffers;
        *ret_pooled = m->query->pooled_buffer_bytes;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

/* The free an AllocBuffer carries is done first, as the FreeBuffer (no_reply)
 * it stands for: its memory, pooled, serves the allocation; its refusal
 * comes with its own id and does not stop the allocation; an id of 0 is
 * refused with the request, which then frees nothing. */
Test(buffers, an_alloc_does_the_free_it_carries_first) {
        int c = raw_connect(&d);
        uint64_t h, h2, h3, buffers, pooled;
        kfdb_session *s = test_connect(&d, "buffers");

        cr_assert(kfdb_session_has_feature(s, "alloc-free-first"));
        kfdb_session_free(s);
        raw_hello(c);
        h = raw_alloc(c, SMALL, NULL);
        send_alloc_free_first(c, 920, 921, h);
        h2 = recv_answer(c, 920, 0, NULL);
        cr_expect(h2 != 0 && h2 != h);
        query_buffers(c, 922, &buffers, &pooled);
        cr_expect_eq(buffers, 1, "the free did not come first (%llu buffers)", (unsigned long long) buffers);
        cr_expect_eq(pooled, 0, "the freed buffer's memory did not serve the allocation");

        send_alloc_free_first(c, 923, 924, h);
        recv_answer(c, 924, ENOENT, "free_buffer.handle: no buffer");
        h3 = recv_answer(c, 923, 0, NULL);
        cr_expect(h3 != 0);

        send_alloc_free_first(c, 925, 0, h2);
        recv_answer(c, 925, EINVAL, "alloc_buffer.free_first.id: must not be 0");
        query_buffers(c, 926, &buffers, &pooled);
        cr_expect_eq(buffers, 2, "a refused request freed its buffer (%llu buffers)", (unsigned long long) buffers);
        close(c);
}

/* ---- The pool ---- */

static void freed_buffer_comes_back_zeroed(kfdb_placement placement) {
        kfdb_session *s = test_connect(&d, "buffers");
        kfdb_buffer *b = alloc_filled(s, placement, 0xa5);
        void *p;

        cr_assert_eq(kfdb_buffer_free(b), 0);
        cr_expect_eq(pooled_bytes(s), SMALL, "the freed buffer was not kept");
        cr_expect_eq(buffer_bytes(s), SMALL, "a pooled buffer is charged");
        cr_assert_eq(kfdb_buffer_alloc(s, SMALL, placement, &b), 0, "%s", kfdb_session_last_error(s));
        cr_expect_eq(pooled_bytes(s), 0, "the next alloc did not take it");
        cr_expect_eq(buffer_bytes(s), SMALL, "charged once");
        cr_assert_eq(kfdb_buffer_map(b, &p), 0);
        cr_expect(all_zero(p, SMALL), "a reused buffer holds what was written before it was freed");
        cr_expect(gpu_reads_zeros(s, b), "the GPU reads old contents from a reused buffer");
        kfdb_buffer_free(b);
        kfdb_session_free(s);
}

Test(buffers, a_freed_gtt_buffer_comes_back_zeroed) {
        freed_buffer_comes_back_zeroed(KFDB_PLACEMENT_GTT);
}

Test(buffers, a_freed_vram_buffer_comes_back_zeroed) {
        freed_buffer_comes_back_zeroed(KFDB_PLACEMENT_VRAM);
}

Test(buffers, another_session_never_gets_a_pooled_buffer) {
        kfdb_session *a = test_connect(&d, "buffers"), *b = test_connect(&d, "buffers");
        kfdb_buffer *x = alloc_filled(a, KFDB_PLACEMENT_GTT, 0xa5), *y;
        void *p;

        cr_assert_eq(kfdb_buffer_free(x), 0);
        cr_assert_eq(pooled_bytes(a), SMALL);
        cr_assert_eq(kfdb_buffer_alloc(b, SMALL, KFDB_PLACEMENT_GTT, &y), 0);
        cr_assert_eq(kfdb_buffer_map(y, &p), 0);
        cr_expect(all_zero(p, SMALL));
        cr_expect_eq(pooled_bytes(a), SMALL, "another session took this session's freed buffer");
        kfdb_buffer_free(y);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

/* A buffer a job still uses is not reused (the job would read zeros) and
 * lives until the job is done; one whose fd the caller took is not pooled
 * (the copy could see the next buffer). */
Test(buffers, a_buffer_in_use_or_whose_fd_was_taken_is_not_pooled) {
        kfdb_session *s = test_connect(&d, "buffers");
        kfdb_buffer *src = alloc_filled(s, KFDB_PLACEMENT_GTT, 0xa5), *dst, *again, *idle;
        kfdb_event *e;
        kfdb_batch *batch;
        kfdb_quota q;
        uint64_t fence;
        uint8_t *p;

        cr_assert_eq(kfdb_buffer_alloc(s, SMALL, KFDB_PLACEMENT_GTT, &dst), 0);
        cr_assert_eq(kfdb_event_create(s, false, &e), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_wait_event(batch, e), 0);
        cr_assert_eq(kfdb_batch_copy(batch, dst, 0, src, 0, SMALL), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        /* Freed while the copy waits, and an alloc of its size at once. */
        cr_assert_eq(kfdb_buffer_free(src), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, SMALL, KFDB_PLACEMENT_GTT, &again), 0);
        cr_expect_eq(pooled_bytes(s), 0);
        cr_assert_eq(kfdb_event_set(e), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_map(dst, (void **) &p), 0);
        cr_expect(p[0] == 0xa5 && p[SMALL - 1] == 0xa5, "the job read %#x: its freed source was reused", p[0]);

        /* Its fd handed out: not pooled, charged as a freed exported buffer. */
        cr_assert(kfdb_buffer_get_fd(again) >= 0);
        cr_assert_eq(kfdb_buffer_free(again), 0);
        cr_expect_eq(pooled_bytes(s), 0, "a buffer whose fd the caller may keep was pooled");
        cr_assert_eq(kfdb_query_quota(s, &q), 0);
        cr_expect_geq(q.released_buffer_bytes, 2 * SMALL);
        /* Idle, fd never taken: pooled. */
        cr_assert_eq(kfdb_buffer_alloc(s, SMALL, KFDB_PLACEMENT_GTT, &idle), 0);
        cr_assert_eq(kfdb_buffer_free(idle), 0);
        cr_expect_eq(pooled_bytes(s), SMALL);
        kfdb_batch_free(batch);
        kfdb_event_destroy(e);
        kfdb_buffer_free(dst);
        kfdb_session_free(s);
}

/* Bounded, charged while kept; once the session is gone, what it kept is
 * let go of under the rule for freed exported buffers, which the user stays
 * charged for (docs/policy.md "Exported buffers"). */
Test(buffers, the_pool_is_bounded_and_goes_with_its_session) {
        kfdb_session *a = test_connect(&d, "buffers"), *b = test_connect(&d, "buffers");
        kfdb_buffer *x[20];
        kfdb_quota q;

        for (unsigned i = 0; i < 20; i++)
                cr_assert_eq(kfdb_buffer_alloc(a, SMALL, KFDB_PLACEMENT_GTT, &x[i]), 0);
        for (unsigned i = 0; i < 20; i++)
                cr_assert_eq(kfdb_buffer_free(x[i]), 0);
        cr_expect_eq(pooled_bytes(a), 16 * SMALL, "the pool keeps up to 16 buffers, 1 MiB");
        cr_expect_eq(buffer_bytes(a), 20 * SMALL, "pooled and freed exported buffers are charged");
        cr_assert_eq(kfdb_query_quota(b, &q), 0);
        cr_expect_eq(q.user_buffer_bytes, 20 * SMALL);
        kfdb_session_free(a);
        /* The simulated GPU cannot see whether a copy of their dma-bufs
         * lives on: the user stays charged until the daemon restarts, the
         * other session is not. */
        kfdb_session *c = test_connect(&d, "buffers");
        cr_assert_eq(kfdb_query_quota(c, &q), 0);
        cr_expect_eq(q.user_buffer_bytes, 20 * SMALL, "the user's charge for a gone session's pool and freed buffers");
        cr_expect_eq(buffer_bytes(b), 0);
        cr_expect_eq(pooled_bytes(c), 0);
        kfdb_session_free(c);
        kfdb_session_free(b);
}

/* ---- File descriptor budgets ---- */

#define HOG_MAX 200

static TestDaemon lim;

static void setup_limited(void) {
        /* 256 fds: the default budget gives one user a bit under half of
         * what is left after the device context's own and the reserve. */
        static const char *const args[] = { "--max-connections-per-user=0", NULL }; /* the fd budget decides */

        test_daemon_start_limited(&lim, args, 256);
}

static void teardown_limited(void) {
        test_daemon_fini(&lim);
        test_fini_end();
}

TestSuite(fds, .init = setup_limited, .fini = teardown_limited, .timeout = 120);

/* A raw Hello: NULL and the reply's limits in *ret_max_user_fds, or the
 * refusal (error and message) in *ret. */
static int raw_try_hello(int c, uint64_t *ret_max_user_fds, char *msg, size_t msglen) {
        Kfdbroker__V1__ServerMessage *m;
        int fds[2], error;
        unsigned n = 2;

        m = raw_hello_answer(c, "fd-hog", 1, fds, &n, 5000);
        for (unsigned i = 0; i < n; i++)
                close(fds[i]);
        error = m->error;
        snprintf(msg, msglen, "%s", m->error_message);
        if (error == 0 && m->hello && m->hello->limits)
                *ret_max_user_fds = m->hello->limits->max_user_fds;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return error;
}

/* A raw AllocBuffer: 0 (the dma-buf is closed; the handle in *ret_handle
 * if given) or the error, with its message. */
static int raw_try_alloc(int c, uint64_t size, uint64_t *ret_handle, char *msg, size_t msglen) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        int fds[1], error;
        unsigned n = 1;

        a.size = size;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        req.alloc_buffer = &a;
        m = raw_call(c, &req, NULL, 0, fds, &n);
        for (unsigned i = 0; i < n; i++)
                close(fds[i]);
        error = m->error;
        snprintf(msg, msglen, "%s", m->error_message);
        if (error == 0 && ret_handle)
                *ret_handle = m->alloc_buffer->handle;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return error;
}

/* Run as nobody: a session, a buffer, a fill job on it, read back. */
static int nobody_uses_the_gpu(void) {
        kfdb_session *s;
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint64_t fence;
        uint32_t *p;

        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                return 10;
        if (kfdb_session_new(lim.sock, "nobody", &s) < 0)
                return 11;
        if (kfdb_buffer_alloc(s, SMALL, KFDB_PLACEMENT_GTT, &b) < 0) {
                fprintf(stderr, "nobody: %s\n", kfdb_session_last_error(s));
                return 12;
        }
        if (kfdb_buffer_map(b, (void **) &p) < 0 || kfdb_batch_new(s, &batch) < 0 ||
            kfdb_batch_fill(batch, b, 0, SMALL, 0x12345678) < 0 || kfdb_batch_submit(batch, NULL, &fence) < 0 ||
            kfdb_fence_wait(s, fence, 10000) < 0) {
                fprintf(stderr, "nobody: %s\n", kfdb_session_last_error(s));
                return 13;
        }
        if (p[0] != 0x12345678 || p[SMALL / 4 - 1] != 0x12345678)
                return 14;
        kfdb_batch_free(batch);
        kfdb_buffer_free(b);
        kfdb_session_free(s);
        return 0;
}

Test(fds, one_user_cannot_take_the_fds_another_needs) {
        int c[HOG_MAX], status, error = 0, base;
        uint64_t budget = 0;
        unsigned n = 0, allocs = 0;
        char msg[512] = "";
        pid_t pid;

        if (geteuid() != 0)
                cr_skip_test("needs root to run a second user's client as nobody (65534)");
        cr_assert_eq(chmod(lim.dir, 0755), 0); /* nobody must reach the socket */
        base = test_daemon_count_fds(&lim);

        /* One user opens sessions until its budget refuses one, with the reason. */
        for (; n < HOG_MAX; n++) {
                c[n] = raw_connect(&lim);
                error = raw_try_hello(c[n], &budget, msg, sizeof(msg));
                if (error != 0)
                        break;
        }
        cr_assert_lt(n, HOG_MAX, "no session was refused");
        cr_expect_eq(error, EUSERS, "got %d: %s", error, msg);
        cr_expect(strstr(msg, "file descriptors") && strstr(msg, "--max-fds-per-user="), "%s", msg);
        close(c[n]);
        {
                /* libkfdbroker reads the refusal past the kernel's ECONNRESET. */
                kfdb_session *refused = NULL;
                int r = kfdb_session_new(lim.sock, "fd-hog", &refused);
                cr_expect_eq(r, -EUSERS, "libkfdbroker over the budget: got %d (%s)", r, strerror(-r));
                kfdb_session_free(refused);
        }
        cr_assert_gt(budget, 0, "Hello's limits carry no max_user_fds");
        cr_expect_lt(budget, 128, "the budget (%llu) is not below half of 256 fds", (unsigned long long) budget);
        /* ... and its buffers are refused too, naming the budget. */
        while (allocs < 100 && (error = raw_try_alloc(c[0], SMALL, NULL, msg, sizeof(msg))) == 0)
                allocs++;
        cr_expect_eq(error, EDQUOT, "got %d after %u buffers: %s", error, allocs, msg);
        cr_expect(strstr(msg, "per-user file descriptor budget (kfdbrokerd --max-fds-per-user="), "%s", msg);

        /* Another user still connects, allocates and runs a job. */
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0)
                _exit(nobody_uses_the_gpu());
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "nobody's client: status 0x%x", status);

        /* Freeing makes room: a session of the first user goes, its buffer fits. */
        close(c[n - 1]);
        for (int i = 0; i < 500 && (error = raw_try_alloc(c[0], SMALL, NULL, msg, sizeof(msg))) != 0; i++)
                usleep(10000);
        cr_expect_eq(error, 0, "no room after a session of the user ended: %s", msg);

        /* Nothing is left behind once the user's sessions are gone. */
        for (unsigned i = 0; i + 1 < n; i++)
                close(c[i]);
        for (int i = 0; i < 500 && test_daemon_count_fds(&lim) > base; i++)
                usleep(10000);
        cr_expect_leq(test_daemon_count_fds(&lim), base, "the daemon holds more fds than before the sessions");
}

/* ---- The per-session budget ---- */

static TestDaemon per_session;

static void setup_per_session(void) {
        const char *const args[] = { "--max-fds-per-session=24", NULL };

        test_daemon_start(&per_session, args);
}

static void teardown_per_session(void) {
        test_daemon_fini(&per_session);
        test_fini_end();
}

TestSuite(session_fds, .init = setup_per_session, .fini = teardown_per_session, .timeout = 120);

/* One session (one program) cannot take the fds its user's other sessions
 * need: its buffers are refused at its own budget, with the reason, while
 * another session of the same user allocates and runs a job; freeing makes
 * room again. */
Test(session_fds, one_session_cannot_take_its_users_fds) {
        kfdb_session *a = test_connect(&per_session, "buffers"), *b = test_connect(&per_session, "buffers");
        kfdb_buffer *bufs[64], *other;
        kfdb_batch *batch;
        kfdb_fd_budget fb;
        uint64_t fence;
        unsigned n = 0;
        uint32_t *p;
        int r = 0;

        cr_assert_eq(kfdb_query_fd_budget(a, &fb), 0, "%s", kfdb_session_last_error(a));
        cr_assert_eq(fb.max_session_fds, 24, "Query says a session budget of %llu", (unsigned long long) fb.max_session_fds);
        cr_assert_eq(fb.session_fds, 1, "a lazy session holds its socket alone until it needs more");
        while (n < 64 && (r = kfdb_buffer_alloc(a, SMALL, KFDB_PLACEMENT_GTT, &bufs[n])) == 0)
                n++;
        cr_assert_eq(r, -EDQUOT, "got %d (%s) after %u buffers", r, kfdb_session_last_error(a), n);
        cr_assert(strstr(kfdb_session_last_error(a), "per-session file descriptor budget (kfdbrokerd --max-fds-per-session=24)"),
                  "%s", kfdb_session_last_error(a));
        cr_assert_gt(n, 8, "only %u buffers before the budget", n);
        cr_assert_eq(kfdb_query_fd_budget(a, &fb), 0);
        cr_assert_leq(fb.session_fds, 24, "the session holds %llu fds", (unsigned long long) fb.session_fds);

        /* The user's other session is not affected. */
        cr_assert_eq(kfdb_buffer_alloc(b, SMALL, KFDB_PLACEMENT_GTT, &other), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(kfdb_batch_new(b, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, other, 0, SMALL, 0x600df00d), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(kfdb_fence_wait(b, fence, 30000), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(kfdb_buffer_map(other, (void **) &p), 0);
        cr_assert_eq(p[SMALL / 4 - 1], 0x600df00d);

        /* A freed buffer makes room in the full session (its pool is let go of first). */
        cr_assert_eq(kfdb_buffer_free(bufs[--n]), 0);
        cr_assert_eq(kfdb_buffer_alloc(a, SMALL, KFDB_PLACEMENT_GTT, &bufs[n]), 0, "%s", kfdb_session_last_error(a));
        n++;
        while (n > 0)
                kfdb_buffer_free(bufs[--n]);
        kfdb_batch_free(batch);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

static Kfdbroker__V1__ServerMessage *open_fence_page(int fd, int *fds, unsigned *n_fds) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__OpenFencePageRequest o = KFDBROKER__V1__OPEN_FENCE_PAGE_REQUEST__INIT;

        req.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_FENCE_PAGE;
        req.open_fence_page = &o;
        return raw_call(fd, &req, NULL, 0, fds, n_fds);
}

/* The fence page costs its session the fds of a buffer (one on the
 * simulator) and the reply's: at the session's budget it is refused with
 * the reason; a freed buffer makes room; nothing is left behind. */
Test(session_fds, the_fence_page_counts_against_the_session_budget) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__FreeBufferRequest fr = KFDBROKER__V1__FREE_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        int base = test_daemon_count_fds(&per_session), fd = raw_connect(&per_session), page_fd = -1, error = 0;
        uint64_t handles[64];
        unsigned n = 0, n_fds = 1;
        char msg[512] = "";

        raw_hello(fd);
        while (n < 64 && (error = raw_try_alloc(fd, SMALL, &handles[n], msg, sizeof(msg))) == 0)
                n++;
        cr_assert_eq(error, EDQUOT, "got %d (%s) after %u buffers", error, msg, n);
        m = open_fence_page(fd, &page_fd, &n_fds);
        cr_assert_eq(m->error, EDQUOT, "got %d (%s)", m->error, m->error_message);
        cr_assert(strstr(m->error_message, "per-session file descriptor budget") &&
                  strstr(m->error_message, "OpenFencePage needs"), "%s", m->error_message);
        cr_assert_eq(n_fds, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        fr.handle = handles[--n];
        req.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER;
        req.free_buffer = &fr;
        m = raw_call(fd, &req, NULL, 0, NULL, NULL);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        n_fds = 1;
        m = open_fence_page(fd, &page_fd, &n_fds);
        cr_assert_eq(m->error, 0, "a freed buffer makes room: %s", m->error_message);
        cr_assert_eq(n_fds, 1);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(page_fd);
        close(fd);
        for (int i = 0; i < 500 && test_daemon_count_fds(&per_session) > base; i++)
                usleep(10000);
        cr_assert_leq(test_daemon_count_fds(&per_session), base, "the daemon holds no fd of the session any more");
}

Test(session_fds, a_budget_too_small_for_a_session_is_refused_at_start) {
        char cmd[4096], out[512] = "";
        FILE *f;
        int status;

        snprintf(cmd, sizeof(cmd), "'%s' --no-config --device=sim --max-fds-per-session=3 2>&1", getenv("KFDBROKERD"));
        f = popen(cmd, "r");
        cr_assert(f);
        (void) !fread(out, 1, sizeof(out) - 1, f);
        status = pclose(f);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0, "kfdbrokerd started (status 0x%x): %s", status, out);
        cr_assert(strstr(out, "--max-fds-per-session: expected a number of file descriptors (at least 8) or infinity, got '3'"),
                  "%s", out);
}
