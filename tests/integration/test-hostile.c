/* SPDX-License-Identifier: MIT */
/*
 * Hostile and broken clients against the real daemon: each bad input gets a
 * reply naming the problem (or, for garbage, a clean disconnect), the daemon's
 * fd and object counts return to where they were, and another session keeps
 * working throughout.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

static TestDaemon d;
static int bystander = -1; /* a well-behaved session that must keep working */
static uint64_t bystander_buf;
static int base_fds; /* the daemon's fds with only the bystander connected */

static uint64_t create_event(int fd, bool auto_reset);
static Kfdbroker__V1__ServerMessage *wait_one(int fd, uint64_t event, uint32_t timeout_ms);
static Kfdbroker__V1__ServerMessage *call_simple(int fd, Kfdbroker__V1__Request *req);

static void destroy_event(int fd, uint64_t ev) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__DestroyEventRequest de = KFDBROKER__V1__DESTROY_EVENT_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;

        de.handle = ev;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_DESTROY_EVENT;
        req.destroy_event = &de;
        m = call_simple(fd, &req);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

/* True once only the bystander's session and its one buffer are left and the
 * daemon holds no more fds than base_fds; *why says what is not yet so. */
static bool nothing_left(char *why, size_t len) {
        Kfdbroker__V1__ServerMessage *holder;
        Kfdbroker__V1__StatusReply *st = raw_status(bystander, &holder);
        int fds = test_daemon_count_fds(&d);

        snprintf(why, len,
                 "sessions %u (want 1), buffer_bytes %" PRIu64 " (want %u), gpu_buffers %u (want 1), events %u, code_objects %u, jobs_in_flight %u (want 0), fds %d (want <= %d)",
                 st->sessions, st->buffer_bytes, 1u << 20, st->gpu_buffers, st->events, st->code_objects,
                 st->jobs_in_flight, fds, base_fds);
        bool ok = st->sessions == 1 && st->buffer_bytes == 1u << 20 && st->gpu_buffers == 1 &&
                  st->events == 0 && st->code_objects == 0 && st->jobs_in_flight == 0 && fds >= 0 &&
                  fds <= base_fds;
        kfdbroker__v1__server_message__free_unpacked(holder, NULL);
        return ok;
}

static void setup(void) {
        char why[512];
        uint64_t ev;

        test_daemon_start(&d, NULL);
        bystander = raw_connect(&d);
        raw_hello(bystander);
        bystander_buf = raw_alloc(bystander, 1 << 20, NULL);
        /* What the daemon sets up once and keeps: the event page (first
         * CREATE_EVENT) and sd-event's timer fd (first timed wait). */
        ev = create_event(bystander, true);
        kfdbroker__v1__server_message__free_unpacked(wait_one(bystander, ev, 1), NULL);
        destroy_event(bystander, ev);
        /* The harness's start-up probes close asynchronously. */
        base_fds = INT32_MAX;
        for (int i = 0; i < 500 && !nothing_left(why, sizeof(why)); i++)
                usleep(10000);
        base_fds = test_daemon_count_fds(&d);
        cr_assert(nothing_left(why, sizeof(why)), "%s", why);
}

/* Every test ends with the daemon back where setup left it: each bad input
 * above was answered without leaking an fd or an object. */
static void teardown(void) {
        char why[512] = "";

        if (bystander >= 0) {
                bool ok = false;

                for (int i = 0; i < 2000 && !(ok = nothing_left(why, sizeof(why))); i++)
                        usleep(10000);
                test_fini_expect(ok, "the daemon did not return to its state before the test: %s", why);
                close(bystander);
                bystander = -1;
        }
        test_daemon_fini(&d);
        test_fini_end();
}

/* The bystander can still fill its buffer and see the result via Status. */
static void assert_bystander_works(void) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__SubmitRequest sub = KFDBROKER__V1__SUBMIT_REQUEST__INIT;
        Kfdbroker__V1__Job job = KFDBROKER__V1__JOB__INIT, *jobs[1] = { &job };
        Kfdbroker__V1__FillJob fill = KFDBROKER__V1__FILL_JOB__INIT;
        Kfdbroker__V1__ServerMessage *m;

        fill.dst_handle = bystander_buf;
        fill.size = 4096;
        fill.pattern = 0xabcdef01;
        job.kind_case = KFDBROKER__V1__JOB__KIND_FILL;
        job.fill = &fill;
        sub.n_jobs = 1;
        sub.jobs = jobs;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        req.submit = &sub;
        m = raw_call(bystander, &req, NULL, 0, NULL, NULL);
        cr_assert_eq(m->error, 0, "bystander submit failed: %s", m->error_message);
        cr_assert_eq(m->submit->n_fences, 1);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

static Kfdbroker__V1__ServerMessage *call_simple(int fd, Kfdbroker__V1__Request *req) {
        return raw_call(fd, req, NULL, 0, NULL, NULL);
}

static void expect_error(Kfdbroker__V1__ServerMessage *m, int error, const char *substring) {
        cr_assert_eq(m->error, error, "expected error %d (%s), got %d: %s", error, strerror(error),
                     m->error, m->error_message);
        cr_assert(strstr(m->error_message, substring), "message \"%s\" should mention \"%s\"",
                  m->error_message, substring);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

/* Waits until the daemon holds no more fds than before (work retires
 * asynchronously; under ASan it takes a while). */
static void assert_fds_return_to(int n) {
        int now = -1;

        for (int i = 0; i < 2000; i++) {
                now = test_daemon_count_fds(&d);
                if (now >= 0 && now <= n)
                        return;
                usleep(10000);
        }
        cr_assert_leq(now, n, "daemon fd count %d did not return to %d", now, n);
}

TestSuite(hostile, .init = setup, .fini = teardown, .timeout = 60);

Test(hostile, garbage_disconnects_cleanly) {
        int base = test_daemon_count_fds(&d);
        int fd = raw_connect(&d);
        static const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34 };
        Kfdbroker__V1__ServerMessage *m = NULL;

        cr_assert_eq(raw_send_bytes(fd, junk, sizeof(junk), NULL, 0), 0);
        cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 5000), 0, "garbage must end the connection");
        close(fd);
        assert_fds_return_to(base);
        assert_bystander_works();
}

Test(hostile, oversized_message_is_refused_and_connection_survives) {
        int fd = raw_connect(&d);
        size_t len = 70 * 1024;
        uint8_t *big = calloc(1, len);
        Kfdbroker__V1__ServerMessage *m = NULL;

        raw_hello(fd);
        cr_assert_eq(raw_send_bytes(fd, big, len, NULL, 0), 0);
        cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 5000), 1);
        expect_error(m, EMSGSIZE, "exceeds the limit");
        free(big);
        /* Still usable. */
        raw_alloc(fd, 4096, NULL);
        close(fd);
        assert_bystander_works();
}

Test(hostile, request_before_hello) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__StatusRequest st = KFDBROKER__V1__STATUS_REQUEST__INIT;

        req.body_case = KFDBROKER__V1__REQUEST__BODY_STATUS;
        req.status = &st;
        expect_error(call_simple(fd, &req), EPROTO, "must be Hello");
        close(fd);
}

/* A protocol version the daemon does not speak: EPROTONOSUPPORT, as
 * docs/protocol.md says, and the connection can say Hello again. */
Test(hostile, unknown_protocol_version) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;

        h.protocol_version = 2;
        h.client_name = "from-the-future";
        req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        expect_error(call_simple(fd, &req), EPROTONOSUPPORT, "hello.protocol_version: unsupported version 2");
        raw_hello(fd);
        close(fd);
}

Test(hostile, unknown_message_type) {
        int fd = raw_connect(&d);
        /* id = 7 (field 1, varint), then field 99 (varint 1): a body this daemon does not know. */
        static const uint8_t msg[] = { 0x08, 0x07, 0x98, 0x06, 0x01 };
        Kfdbroker__V1__ServerMessage *m = NULL;

        raw_hello(fd);
        cr_assert_eq(raw_send_bytes(fd, msg, sizeof(msg), NULL, 0), 0);
        cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 5000), 1);
        cr_assert_eq(m->id, 7);
        cr_assert_eq(m->error, EOPNOTSUPP, "got %d: %s", m->error, m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);
}

Test(hostile, missing_and_extra_fds) {
        int base = test_daemon_count_fds(&d);
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__ImportBufferRequest imp = KFDBROKER__V1__IMPORT_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__DeviceInfoRequest di = KFDBROKER__V1__DEVICE_INFO_REQUEST__INIT;
        int extra[3];

        raw_hello(fd);
        req.body_case = KFDBROKER__V1__REQUEST__BODY_IMPORT_BUFFER;
        req.import_buffer = &imp;
        expect_error(call_simple(fd, &req), EINVAL, "got 0");

        for (int i = 0; i < 3; i++)
                extra[i] = memfd_create("extra", MFD_CLOEXEC);
        req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO;
        req.device_info = &di;
        expect_error(raw_call(fd, &req, extra, 3, NULL, NULL), EINVAL, "got 3");
        for (int i = 0; i < 3; i++)
                close(extra[i]);
        close(fd);
        /* The daemon closed the fds it was sent. */
        assert_fds_return_to(base);
}

Test(hostile, import_of_a_non_dmabuf_fd) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__ImportBufferRequest imp = KFDBROKER__V1__IMPORT_BUFFER_REQUEST__INIT;
        int mfd = memfd_create("not-a-dmabuf", MFD_CLOEXEC), p[2];

        raw_hello(fd);
        cr_assert_eq(ftruncate(mfd, 1 << 20), 0);
        req.body_case = KFDBROKER__V1__REQUEST__BODY_IMPORT_BUFFER;
        req.import_buffer = &imp;
        expect_error(raw_call(fd, &req, &mfd, 1, NULL, NULL), EINVAL, "not a dma-buf");
        cr_assert_eq(pipe(p), 0);
        req.id = 0;
        expect_error(raw_call(fd, &req, &p[0], 1, NULL, NULL), EINVAL, "not a dma-buf");
        close(p[0]);
        close(p[1]);
        close(mfd);
        close(fd);
}

static Kfdbroker__V1__ServerMessage *submit_copy(int fd, uint64_t src, uint64_t src_off, uint64_t dst,
                                                 uint64_t dst_off, uint64_t size) {
        RawCopy c;

        return call_simple(fd, raw_copy_request(&c, 0, src, src_off, dst, dst_off, size));
}

static uint64_t create_event(int fd, bool auto_reset) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__CreateEventRequest ce = KFDBROKER__V1__CREATE_EVENT_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        uint64_t h;

        ce.auto_reset = auto_reset;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT;
        req.create_event = &ce;
        m = call_simple(fd, &req);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        h = m->create_event->handle;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return h;
}

Test(hostile, handles_of_nobody_and_of_another_session) {
        int fd = raw_connect(&d);
        uint64_t mine;

        raw_hello(fd);
        mine = raw_alloc(fd, 8192, NULL);
        /* A made-up handle. */
        expect_error(submit_copy(fd, 0x1234, 0, mine, 0, 4096), ENOENT, "src_handle");
        /* The bystander's buffer: a live handle, but of another session. */
        expect_error(submit_copy(fd, bystander_buf, 0, mine, 0, 4096), ENOENT, "no buffer");
        /* An event handle where a buffer belongs: named as such. */
        expect_error(submit_copy(fd, create_event(fd, true), 0, mine, 0, 4096), ENOENT, "an event handle");
        /* And this session's handle used from the bystander. */
        expect_error(submit_copy(bystander, mine, 0, bystander_buf, 0, 4096), ENOENT, "no buffer");
        close(fd);
        assert_bystander_works();
}

Test(hostile, out_of_bounds_and_wrapping_ranges) {
        int fd = raw_connect(&d);
        uint64_t a, b;

        raw_hello(fd);
        a = raw_alloc(fd, 8192, NULL);
        b = raw_alloc(fd, 8192, NULL);
        expect_error(submit_copy(fd, a, 4096, b, 0, 8192), ERANGE, "source range");
        expect_error(submit_copy(fd, a, 0, b, 8192, 4), ERANGE, "destination range");
        /* offset + size wraps around 2^64: refused by the wire layer as a field error. */
        expect_error(submit_copy(fd, a, 0xfffffffffffff000ull, b, 0, 0x2000), EINVAL, "overflows");
        expect_error(submit_copy(fd, a, 0, b, 0x10, 0xfffffffffffffff0ull), EINVAL, "overflows");
        /* Overlapping copy within one buffer. */
        expect_error(submit_copy(fd, a, 0, a, 16, 64), EINVAL, "overlap");
        close(fd);
}

Test(hostile, zero_and_huge_allocations) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;

        raw_hello(fd);
        req.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        req.alloc_buffer = &a;
        a.size = 0;
        expect_error(call_simple(fd, &req), EINVAL, "size");
        req.id = 0;
        a.size = 1ull << 40;
        expect_error(call_simple(fd, &req), EDQUOT, "max_buffer_size");
        req.id = 0;
        a.size = UINT64_MAX;
        {
                Kfdbroker__V1__ServerMessage *m = call_simple(fd, &req);
                cr_assert(m->error == EINVAL || m->error == EDQUOT, "got %d: %s", m->error,
                          m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        close(fd);
}

Test(hostile, waits_on_destroyed_events) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT, dreq = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__WaitEventsRequest w = KFDBROKER__V1__WAIT_EVENTS_REQUEST__INIT;
        Kfdbroker__V1__WaitEntry e = KFDBROKER__V1__WAIT_ENTRY__INIT, *es[1] = { &e };
        Kfdbroker__V1__DestroyEventRequest de = KFDBROKER__V1__DESTROY_EVENT_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m = NULL;
        uint64_t ev;

        raw_hello(fd);
        ev = create_event(fd, true);
        /* A wait pending when the event is destroyed ends with FAIL. */
        e.handle = ev;
        w.n_events = 1;
        w.events = es;
        w.timeout_ms = UINT32_MAX;
        req.id = 100;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_WAIT_EVENTS;
        req.wait_events = &w;
        cr_assert_eq(raw_send(fd, &req, NULL, 0), 0);
        de.handle = ev;
        dreq.id = 101;
        dreq.body_case = KFDBROKER__V1__REQUEST__BODY_DESTROY_EVENT;
        dreq.destroy_event = &de;
        cr_assert_eq(raw_send(fd, &dreq, NULL, 0), 0);
        for (int got = 0; got < 2;) {
                cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 5000), 1);
                if (m->id == 100) {
                        cr_assert_eq(m->error, 0, "%s", m->error_message);
                        cr_assert_eq(m->wait_events->result, KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_FAIL);
                        got++;
                } else if (m->id == 101) {
                        cr_assert_eq(m->error, 0, "%s", m->error_message);
                        got++;
                }
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        /* A new wait on the destroyed handle: no such event. */
        req.id = 0;
        expect_error(call_simple(fd, &req), ENOENT, "no event");
        close(fd);
}

Test(hostile, disconnect_with_jobs_in_flight) {
        int base = test_daemon_count_fds(&d);
        int fd = raw_connect(&d);
        Kfdbroker__V1__ServerMessage *holder, *m;
        uint64_t a, b;

        raw_hello(fd);
        a = raw_alloc(fd, 32 << 20, NULL);
        b = raw_alloc(fd, 32 << 20, NULL);
        for (int i = 0; i < 8; i++) {
                m = submit_copy(fd, a, 0, b, 0, 32 << 20);
                cr_assert_eq(m->error, 0, "%s", m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        close(fd); /* jobs still queued or on the GPU */
        assert_bystander_works();
        assert_fds_return_to(base);
        for (int i = 0; i < 500; i++) {
                Kfdbroker__V1__StatusReply *st = raw_status(bystander, &holder);
                bool idle = st->jobs_in_flight == 0 && st->sessions == 1;
                kfdbroker__v1__server_message__free_unpacked(holder, NULL);
                if (idle)
                        break;
                usleep(10000);
        }
        {
                Kfdbroker__V1__StatusReply *st = raw_status(bystander, &holder);
                cr_assert_eq(st->sessions, 1);
                cr_assert_eq(st->jobs_in_flight, 0);
                cr_assert_eq(st->buffer_bytes, 1 << 20, "only the bystander's buffer remains");
                kfdbroker__v1__server_message__free_unpacked(holder, NULL);
        }
}

Test(hostile, client_that_never_reads_replies) {
        int base = test_daemon_count_fds(&d);
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__QueryRequest q = KFDBROKER__V1__QUERY_REQUEST__INIT;
        int sndbuf = 4096;

        raw_hello(fd);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sndbuf, sizeof(sndbuf));
        req.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
        req.query = &q;
        /* Send far more requests than the daemon will queue replies for. */
        fcntl(fd, F_SETFL, O_NONBLOCK);
        for (int i = 0; i < 5000; i++) {
                req.id = (uint64_t) i + 1;
                if (raw_send(fd, &req, NULL, 0) < 0)
                        break; /* the daemon stopped reading us: back-pressure */
        }
        /* Others are unaffected meanwhile. */
        assert_bystander_works();
        close(fd);
        assert_fds_return_to(base);
        assert_bystander_works();
}

/* One WaitEvents on one event, answered. */
static Kfdbroker__V1__ServerMessage *wait_one(int fd, uint64_t event, uint32_t timeout_ms) {
        Kfdbroker__V1__ServerMessage *m = NULL;

        raw_send_wait(fd, 0x7ffff000, event, timeout_ms);
        do {
                if (m)
                        kfdbroker__v1__server_message__free_unpacked(m, NULL);
                cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 10000), 1);
        } while (m->id != 0x7ffff000);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        return m;
}

Test(hostile, pending_waits_are_limited) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m = NULL;
        unsigned limit, completed = 0;
        int fds[2];
        unsigned n = 2;
        uint64_t ev;

        {
                Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
                h.protocol_version = 1;
                req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
                req.hello = &h;
                m = raw_call(fd, &req, NULL, 0, fds, &n);
                cr_assert_eq(m->error, 0, "%s", m->error_message);
                limit = m->hello->limits->max_pending_waits;
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
                close(fds[0]);
                close(fds[1]);
        }
        cr_assert_eq(limit, 256, "Hello announces max_pending_waits");
        ev = create_event(fd, false);
        /* Fill the limit with waits that never time out; none is answered yet. */
        for (unsigned i = 0; i < limit; i++)
                raw_send_wait(fd, 1000 + i, ev, UINT32_MAX);
        raw_send_wait(fd, 5000, ev, UINT32_MAX);
        cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 10000), 1);
        cr_assert_eq(m->id, 5000, "only the wait over the limit is answered, got id %" PRIu64, m->id);
        expect_error(m, EDQUOT, "max_pending_waits 256");
        assert_bystander_works();

        /* Setting the (manual-reset) event completes them all; then waits work again. */
        raw_send_set_event(fd, 6000, ev);
        for (unsigned got = 0; got < limit + 1;) {
                cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 10000), 1);
                cr_assert_eq(m->error, 0, "id %" PRIu64 ": %s", m->id, m->error_message);
                if (m->id >= 1000 && m->id < 1000 + limit) {
                        cr_assert_eq(m->wait_events->result, KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_COMPLETE);
                        completed++;
                }
                got++;
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        cr_assert_eq(completed, limit);
        m = wait_one(fd, ev, 0);
        cr_assert_eq(m->wait_events->result, KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_COMPLETE);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);
}

Test(hostile, truncated_message_disconnects_cleanly) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m = NULL;
        int fd = raw_connect(&d);
        uint8_t buf[64];
        size_t len;

        raw_hello(fd);
        a.size = 1 << 20;
        req.id = 42;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        req.alloc_buffer = &a;
        len = kfdbroker__v1__request__get_packed_size(&req);
        cr_assert_lt(len, sizeof(buf));
        kfdbroker__v1__request__pack(&req, buf);
        /* The body's length prefix promises bytes that are not there. */
        cr_assert_eq(raw_send_bytes(fd, buf, len - 2, NULL, 0), 0);
        cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 5000), 0, "a truncated message ends the connection");
        close(fd);
}

Test(hostile, too_many_fds_are_refused_by_request_id) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__DeviceInfoRequest di = KFDBROKER__V1__DEVICE_INFO_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m = NULL;
        int many[12];

        raw_hello(fd);
        for (int i = 0; i < 12; i++)
                many[i] = memfd_create("many", MFD_CLOEXEC);
        req.id = 77;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO;
        req.device_info = &di;
        cr_assert_eq(raw_send(fd, &req, many, 12), 0);
        cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 5000), 1);
        cr_assert_eq(m->id, 77, "the reply names the request, got id %" PRIu64, m->id);
        expect_error(m, EBADMSG, "too many file descriptors");
        for (int i = 0; i < 12; i++)
                close(many[i]);
        /* Still usable. */
        raw_alloc(fd, 4096, NULL);
        close(fd);
}

Test(hostile, session_page_cannot_be_written) {
        int fd = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        char path[64];
        int fds[2], again;
        unsigned n = 2;
        void *p;

        h.protocol_version = 1;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        m = raw_call(fd, &req, NULL, 0, fds, &n);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        cr_assert_eq(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0), MAP_FAILED,
                     "a writable shared mapping of the page must fail");
        p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fds[0], 0);
        cr_assert_neq(p, MAP_FAILED, "the page maps read-only: %s", strerror(errno));
        cr_assert_eq(mprotect(p, 4096, PROT_READ | PROT_WRITE), -1, "nor may it become writable");
        munmap(p, 4096);
        cr_assert_eq(write(fds[0], "x", 1), -1, "write(2) to the page fails");
        /* Nor through a new open of the same file. */
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
        again = open(path, O_RDWR | O_CLOEXEC);
        if (again >= 0) {
                cr_assert_eq(pwrite(again, "x", 1, 0), -1, "a reopened page is sealed too");
                close(again);
        }
        cr_assert_eq(ftruncate(fds[0], 0), -1, "the page cannot shrink");
        close(fds[0]);
        close(fds[1]);
        close(fd);
}

/* One request, raw: 1 and *ret with its reply (and its fds closed), 0 if the
 * daemon ended the connection, or -ETIMEDOUT if no reply came: a lost reply. */
static int try_call(int fd, Kfdbroker__V1__Request *req, Kfdbroker__V1__ServerMessage **ret) {
        static uint64_t id = 1u << 20;
        int fds[2], r;

        req->id = id++;
        r = raw_send(fd, req, NULL, 0);
        if (r < 0)
                return 0; /* EPIPE / ECONNRESET: closed */
        for (;;) {
                unsigned n = 2;
                r = raw_recv(fd, ret, fds, &n, 5000);
                if (r <= 0)
                        return r == 0 || r == -ECONNRESET ? 0 : r;
                for (unsigned i = 0; i < n; i++)
                        close(fds[i]);
                if ((*ret)->id == req->id)
                        return 1;
                kfdbroker__v1__server_message__free_unpacked(*ret, NULL);
        }
}

/*
 * The daemon out of file descriptors (its RLIMIT_NOFILE lowered to a few
 * above what it holds): a reply that carries a dma-buf fd can then not be
 * queued. No request may go unanswered — the client gets its reply, an error
 * reply, or the end of its session, which returns everything it held — and
 * other sessions go on once the limit is back.
 */
Test(hostile, a_reply_that_cannot_be_sent_ends_the_session) {
        struct rlimit old, low;
        uint64_t handles[256];
        unsigned n = 0, steps = 0;
        bool closed = false;
        int sock = raw_connect(&d), r, before;

        raw_hello(sock);
        before = test_daemon_count_fds(&d);
        cr_assert_gt(before, 0);
        cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, NULL, &old), 0, "%m");
        low = old;
        low.rlim_cur = (rlim_t) before + 24;
        cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &low, NULL), 0, "%m");

        /* Allocate until the daemon refuses; then free one buffer at a time
         * and export another, so that the spare fds go through every small
         * number (a dma-buf export needs one for the export and one for the
         * reply's copy). */
        while (!closed && steps++ < 300) {
                Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
                Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
                Kfdbroker__V1__FreeBufferRequest f = KFDBROKER__V1__FREE_BUFFER_REQUEST__INIT;
                Kfdbroker__V1__ExportBufferRequest e = KFDBROKER__V1__EXPORT_BUFFER_REQUEST__INIT;
                Kfdbroker__V1__ServerMessage *m;
                bool refused_alloc = n == (sizeof handles / sizeof handles[0]);

                if (!refused_alloc) {
                        a.size = 4096;
                        req.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
                        req.alloc_buffer = &a;
                        r = try_call(sock, &req, &m);
                        cr_assert_neq(r, -ETIMEDOUT, "alloc %u: no reply and the session still open (a lost reply)", n);
                        if (r == 0) {
                                closed = true;
                                break;
                        }
                        if (m->error == 0)
                                handles[n++] = m->alloc_buffer->handle;
                        else
                                refused_alloc = true;
                        kfdbroker__v1__server_message__free_unpacked(m, NULL);
                        if (!refused_alloc)
                                continue;
                }
                if (n < 2)
                        break;
                f.handle = handles[--n];
                req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
                req.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER;
                req.free_buffer = &f;
                r = try_call(sock, &req, &m);
                cr_assert_neq(r, -ETIMEDOUT, "free: no reply");
                if (r == 0) {
                        closed = true;
                        break;
                }
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
                e.handle = handles[0];
                req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
                req.body_case = KFDBROKER__V1__REQUEST__BODY_EXPORT_BUFFER;
                req.export_buffer = &e;
                r = try_call(sock, &req, &m);
                cr_assert_neq(r, -ETIMEDOUT, "export with %u buffers: no reply and the session still open (a lost reply)",
                              n);
                if (r == 0) {
                        closed = true;
                        break;
                }
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        cr_assert(closed, "the daemon never ran out of descriptors for a reply (%u steps, %u buffers)", steps, n);
        cr_assert_eq(prlimit(d.pid, RLIMIT_NOFILE, &old, NULL), 0, "%m");
        close(sock);
        {
                char *log = test_daemon_read_log(&d);
                cr_assert(log && strstr(log, "cannot send a reply"), "the daemon did not say why it closed the session");
                free(log);
        }
        assert_bystander_works();
}
