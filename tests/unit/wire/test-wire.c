/* SPDX-License-Identifier: MIT */
/*
 * Tests of daemon/wire/wire.c and wire-reply.c: requests built with the generated protobuf-c types
 * (what a client sends) decode into the plain structs of wire.h with every
 * field intact; each range check rejects with the errno and the message a
 * client would see; garbage, truncated and oversized datagrams are refused;
 * replies encode into ServerMessages that decode back to the same values.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "kfdbroker.pb-c.h"
#include "util/macro.h"
#include "wire/wire.h"

typedef struct Packed {
        uint8_t *buf;
        size_t len;
} Packed;

static Packed pack(const Kfdbroker__V1__Request *m) {
        Packed p;
        p.len = kfdbroker__v1__request__get_packed_size(m);
        p.buf = malloc(p.len + 1);
        cr_assert(p.buf != NULL);
        cr_assert_eq(kfdbroker__v1__request__pack(m, p.buf), p.len);
        return p;
}

/* Decodes and returns the errno; errbuf receives the message. */
static int decode(const Kfdbroker__V1__Request *m, WireRequest *r, uint64_t *id, char *errbuf,
                  size_t errlen) {
        Packed p = pack(m);
        int k = wire_request_decode(p.buf, p.len, r, id, errbuf, errlen);
        free(p.buf);
        return k;
}

static void expect_error(const Kfdbroker__V1__Request *m, int expected, const char *message) {
        WireRequest r = {};
        uint64_t id = 12345;
        char err[256] = "unset";
        int k = decode(m, &r, &id, err, sizeof(err));

        cr_assert_eq(k, expected, "expected %d (%s), got %d: %s", expected, message, k, err);
        cr_assert_str_eq(err, message);
        if (expected == -EINVAL || expected == -EOPNOTSUPP)
                cr_assert_eq(id, m->id);
}

#define REQ(name) Kfdbroker__V1__Request name = KFDBROKER__V1__REQUEST__INIT

Test(wire, hello_round_trip) {
        REQ(m);
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        WireRequest r = {};
        uint64_t id = 0;
        char err[128];

        h.protocol_version = 1;
        h.client_name = (char *) "demo-app \xc3\xa9";
        m.id = 7;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        m.hello = &h;
        cr_assert_eq(decode(&m, &r, &id, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(id, 7);
        cr_assert_eq(r.id, 7);
        cr_assert_eq(r.type, WIRE_REQUEST_HELLO);
        cr_assert_eq(r.hello.protocol_version, 1);
        cr_assert_str_eq(r.hello.client_name, "demo-app \xc3\xa9");
        wire_request_done(&r);
}

Test(wire, hello_name_exactly_64_bytes) {
        REQ(m);
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        char name[65];
        WireRequest r = {};
        char err[128];

        memset(name, 'a', 64);
        name[64] = 0;
        h.protocol_version = 1;
        h.client_name = name;
        m.id = 1;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        m.hello = &h;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_str_eq(r.hello.client_name, name);
}

Test(wire, hello_range_checks) {
        REQ(m);
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        char name[66];

        m.id = 3;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        m.hello = &h;
        h.protocol_version = 2;
        expect_error(&m, -EPROTONOSUPPORT, "hello.protocol_version: unsupported version 2, this daemon speaks 1");
        h.protocol_version = 0;
        expect_error(&m, -EPROTONOSUPPORT, "hello.protocol_version: unsupported version 0, this daemon speaks 1");

        h.protocol_version = 1;
        memset(name, 'x', 65);
        name[65] = 0;
        h.client_name = name;
        expect_error(&m, -EINVAL, "hello.client_name: must be at most 64 bytes, got 65");
        h.client_name = (char *) "bad\nname";
        expect_error(&m, -EINVAL, "hello.client_name: control character 0x0a at byte 3");
        h.client_name = (char *) "del\x7f";
        expect_error(&m, -EINVAL, "hello.client_name: control character 0x7f at byte 3");
        h.client_name = (char *) "bad \xff";
        expect_error(&m, -EINVAL, "hello.client_name: not valid UTF-8");
        h.client_name = (char *) "surrogate \xed\xa0\x80";
        expect_error(&m, -EINVAL, "hello.client_name: not valid UTF-8");
}

Test(wire, hello_name_with_embedded_nul) {
        /* id=5, hello{protocol_version=1, client_name="ab\0cd"} written by hand:
         * protobuf-c itself cannot produce an embedded NUL. */
        static const uint8_t raw[] = { 0x08, 0x05, 0x52, 0x09, 0x08, 0x01, 0x12, 0x05,
                                       'a',  'b',  0x00, 'c',  'd' };
        WireRequest r = {};
        uint64_t id = 0;
        char err[128];

        cr_assert_eq(wire_request_decode(raw, sizeof(raw), &r, &id, err, sizeof(err)), -EINVAL);
        cr_assert_eq(id, 5);
        cr_assert_str_eq(err, "hello.client_name: contains a NUL byte");
}

Test(wire, id_zero_and_missing_body) {
        REQ(m);
        Kfdbroker__V1__QueryRequest q = KFDBROKER__V1__QUERY_REQUEST__INIT;

        m.id = 0;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
        m.query = &q;
        expect_error(&m, -EINVAL, "request.id: must not be 0");

        m.id = 9;
        m.body_case = KFDBROKER__V1__REQUEST__BODY__NOT_SET;
        expect_error(&m, -EOPNOTSUPP, "request: no body set");
}

Test(wire, unknown_body_is_named) {
        /* id=77 and a length-delimited field 40 (a body this daemon does not know). */
        static const uint8_t raw[] = { 0x08, 77, 0xc2, 0x02, 0x00 };
        WireRequest r = {};
        uint64_t id = 0;
        char err[128];

        cr_assert_eq(wire_request_decode(raw, sizeof(raw), &r, &id, err, sizeof(err)), -EOPNOTSUPP);
        cr_assert_eq(id, 77);
        cr_assert_str_eq(err, "request: body field 40 is not supported");
}

Test(wire, simple_requests_round_trip) {
        static const struct {
                Kfdbroker__V1__Request__BodyCase body;
                WireRequestType type;
                bool has_handle;
        } cases[] = {
                { KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO, WIRE_REQUEST_DEVICE_INFO, false },
                { KFDBROKER__V1__REQUEST__BODY_IMPORT_BUFFER, WIRE_REQUEST_IMPORT_BUFFER, false },
                { KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER, WIRE_REQUEST_FREE_BUFFER, true },
                { KFDBROKER__V1__REQUEST__BODY_EXPORT_BUFFER, WIRE_REQUEST_EXPORT_BUFFER, true },
                { KFDBROKER__V1__REQUEST__BODY_DESTROY_EVENT, WIRE_REQUEST_DESTROY_EVENT, true },
                { KFDBROKER__V1__REQUEST__BODY_SET_EVENT, WIRE_REQUEST_SET_EVENT, true },
                { KFDBROKER__V1__REQUEST__BODY_RESET_EVENT, WIRE_REQUEST_RESET_EVENT, true },
                { KFDBROKER__V1__REQUEST__BODY_QUERY, WIRE_REQUEST_QUERY, false },
                { KFDBROKER__V1__REQUEST__BODY_STATUS, WIRE_REQUEST_STATUS, false },
        };
        /* All handle-carrying bodies share the layout { base; uint64 handle; }. */
        Kfdbroker__V1__DeviceInfoRequest di = KFDBROKER__V1__DEVICE_INFO_REQUEST__INIT;
        Kfdbroker__V1__ImportBufferRequest ib = KFDBROKER__V1__IMPORT_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__FreeBufferRequest fb = KFDBROKER__V1__FREE_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__ExportBufferRequest eb = KFDBROKER__V1__EXPORT_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__DestroyEventRequest de = KFDBROKER__V1__DESTROY_EVENT_REQUEST__INIT;
        Kfdbroker__V1__SetEventRequest se = KFDBROKER__V1__SET_EVENT_REQUEST__INIT;
        Kfdbroker__V1__ResetEventRequest re = KFDBROKER__V1__RESET_EVENT_REQUEST__INIT;
        Kfdbroker__V1__QueryRequest q = KFDBROKER__V1__QUERY_REQUEST__INIT;
        Kfdbroker__V1__StatusRequest st = KFDBROKER__V1__STATUS_REQUEST__INIT;
        void *bodies[] = { &di, &ib, &fb, &eb, &de, &se, &re, &q, &st };

        fb.handle = 0x100000001ull;
        eb.handle = 0x100000001ull;
        de.handle = 0x100000001ull;
        se.handle = 0x100000001ull;
        re.handle = 0x100000001ull;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                REQ(m);
                WireRequest r = {};
                char err[128];

                m.id = 1000 + i;
                m.body_case = cases[i].body;
                m.hello = bodies[i];
                cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%zu: %s", i, err);
                cr_assert_eq(r.type, cases[i].type);
                cr_assert_eq(r.id, 1000 + i);
                if (cases[i].has_handle)
                        cr_assert_eq(r.object.handle, 0x100000001ull);
                cr_assert_eq(wire_request_fds_expected(r.type),
                             r.type == WIRE_REQUEST_IMPORT_BUFFER ? 1u : 0u);
                wire_request_done(&r);
        }
}

Test(wire, create_event_round_trip) {
        REQ(m);
        Kfdbroker__V1__CreateEventRequest c = KFDBROKER__V1__CREATE_EVENT_REQUEST__INIT;
        WireRequest r = {};
        char err[128];

        c.auto_reset = true;
        m.id = 2;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT;
        m.create_event = &c;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0);
        cr_assert_eq(r.type, WIRE_REQUEST_CREATE_EVENT);
        cr_assert(r.create_event.auto_reset);
}

Test(wire, alloc_buffer) {
        REQ(m);
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        WireRequest r = {};
        char err[128];

        m.id = 4;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        m.alloc_buffer = &a;
        a.size = 64ull << 20;
        a.placement = KFDBROKER__V1__PLACEMENT__PLACEMENT_VRAM;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.type, WIRE_REQUEST_ALLOC_BUFFER);
        cr_assert_eq(r.alloc_buffer.size, 64ull << 20);
        cr_assert_eq(r.alloc_buffer.placement, WIRE_PLACEMENT_VRAM);
        cr_assert_eq(r.alloc_buffer.flags, 0);

        a.size = 0;
        expect_error(&m, -EINVAL, "alloc_buffer.size: must be > 0");
        a.size = UINT64_MAX - 5;
        expect_error(&m, -EINVAL,
                     "alloc_buffer.size: 18446744073709551610 overflows when rounded up to 4 KiB");
        a.size = 4096;
        a.placement = 7;
        expect_error(&m, -EINVAL, "alloc_buffer.placement: unknown placement 7");
        a.placement = -1;
        expect_error(&m, -EINVAL, "alloc_buffer.placement: unknown placement -1");
        a.placement = KFDBROKER__V1__PLACEMENT__PLACEMENT_GTT;
        a.flags = 0x10;
        expect_error(&m, -EINVAL, "alloc_buffer.flags: reserved, must be 0, got 0x10");
}

Test(wire, wait_events) {
        REQ(m);
        Kfdbroker__V1__WaitEventsRequest w = KFDBROKER__V1__WAIT_EVENTS_REQUEST__INIT;
        Kfdbroker__V1__WaitEntry e[257], *ep[257];
        WireRequest r = {};
        char err[128];

        for (size_t i = 0; i < 257; i++) {
                kfdbroker__v1__wait_entry__init(&e[i]);
                e[i].handle = 100 + i;
                e[i].last_event_age = i;
                ep[i] = &e[i];
        }
        m.id = 5;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_WAIT_EVENTS;
        m.wait_events = &w;
        w.events = ep;
        w.n_events = 3;
        w.wait_all = true;
        w.timeout_ms = 0xFFFFFFFFu;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.type, WIRE_REQUEST_WAIT_EVENTS);
        cr_assert_eq(r.wait_events.n_entries, 3);
        cr_assert_eq(r.wait_events.entries[2].handle, 102);
        cr_assert_eq(r.wait_events.entries[2].last_event_age, 2);
        cr_assert(r.wait_events.wait_all);
        cr_assert_eq(r.wait_events.timeout_ms, 0xFFFFFFFFu);
        wire_request_done(&r);
        cr_assert_null(r.wait_events.entries);

        w.n_events = 256;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        wire_request_done(&r);

        w.n_events = 0;
        expect_error(&m, -EINVAL, "wait_events.events: must have 1..256 entries, got 0");
        w.n_events = 257;
        expect_error(&m, -EINVAL, "wait_events.events: must have 1..256 entries, got 257");
}

/* A Submit of n jobs; the caller edits jobs[] before decoding. */
typedef struct SubmitFixture {
        Kfdbroker__V1__SubmitRequest s;
        Kfdbroker__V1__Job jobs[1025], *jp[1025];
        Kfdbroker__V1__CopyJob copy;
        Kfdbroker__V1__FillJob fill;
        Kfdbroker__V1__SignalEventJob sig;
        Kfdbroker__V1__WaitEventJob wait;
} SubmitFixture;

static void submit_fixture_init(SubmitFixture *f, Kfdbroker__V1__Request *m, size_t n) {
        kfdbroker__v1__submit_request__init(&f->s);
        kfdbroker__v1__copy_job__init(&f->copy);
        kfdbroker__v1__fill_job__init(&f->fill);
        kfdbroker__v1__signal_event_job__init(&f->sig);
        kfdbroker__v1__wait_event_job__init(&f->wait);
        f->copy.src_handle = 11;
        f->copy.src_offset = 4096;
        f->copy.dst_handle = 12;
        f->copy.dst_offset = 8;
        f->copy.size = 1024;
        f->fill.dst_handle = 12;
        f->fill.dst_offset = 16;
        f->fill.size = 64;
        f->fill.pattern = 0xdeadbeef;
        f->sig.handle = 21;
        f->wait.handle = 22;
        for (size_t i = 0; i < 1025; i++) {
                kfdbroker__v1__job__init(&f->jobs[i]);
                f->jobs[i].kind_case = KFDBROKER__V1__JOB__KIND_FILL;
                f->jobs[i].fill = &f->fill;
                f->jp[i] = &f->jobs[i];
        }
        f->s.jobs = f->jp;
        f->s.n_jobs = n;
        m->id = 6;
        m->body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        m->submit = &f->s;
}

Test(wire, submit_round_trip) {
        REQ(m);
        static SubmitFixture f;
        WireRequest r = {};
        char err[128];

        submit_fixture_init(&f, &m, 4);
        f.jobs[0].kind_case = KFDBROKER__V1__JOB__KIND_COPY;
        f.jobs[0].copy = &f.copy;
        f.jobs[2].kind_case = KFDBROKER__V1__JOB__KIND_SIGNAL_EVENT;
        f.jobs[2].signal_event = &f.sig;
        f.jobs[3].kind_case = KFDBROKER__V1__JOB__KIND_WAIT_EVENT;
        f.jobs[3].wait_event = &f.wait;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.type, WIRE_REQUEST_SUBMIT);
        cr_assert_eq(r.submit.n_jobs, 4);
        cr_assert_eq(r.submit.jobs[0].type, WIRE_JOB_COPY);
        cr_assert_eq(r.submit.jobs[0].copy.src_handle, 11);
        cr_assert_eq(r.submit.jobs[0].copy.src_offset, 4096);
        cr_assert_eq(r.submit.jobs[0].copy.dst_handle, 12);
        cr_assert_eq(r.submit.jobs[0].copy.dst_offset, 8);
        cr_assert_eq(r.submit.jobs[0].copy.size, 1024);
        cr_assert_eq(r.submit.jobs[1].type, WIRE_JOB_FILL);
        cr_assert_eq(r.submit.jobs[1].fill.dst_handle, 12);
        cr_assert_eq(r.submit.jobs[1].fill.dst_offset, 16);
        cr_assert_eq(r.submit.jobs[1].fill.size, 64);
        cr_assert_eq(r.submit.jobs[1].fill.pattern, 0xdeadbeef);
        cr_assert_eq(r.submit.jobs[2].type, WIRE_JOB_SIGNAL_EVENT);
        cr_assert_eq(r.submit.jobs[2].event.handle, 21);
        cr_assert_eq(r.submit.jobs[3].type, WIRE_JOB_WAIT_EVENT);
        cr_assert_eq(r.submit.jobs[3].event.handle, 22);
        wire_request_done(&r);

        /* The largest batch: 1024 fill jobs fit in one datagram. Each its
         * own: unpacked, they outgrow the decoder's arena, and the ones past
         * it (from malloc) must come out as right as the first. */
        static Kfdbroker__V1__FillJob fills[1024];
        submit_fixture_init(&f, &m, 1024);
        for (uint32_t i = 0; i < 1024; i++) {
                kfdbroker__v1__fill_job__init(&fills[i]);
                fills[i].dst_handle = 100 + i;
                fills[i].dst_offset = 4ull * i;
                fills[i].size = 4;
                fills[i].pattern = 0x5a000000u | i;
                f.jobs[i].fill = &fills[i];
        }
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.submit.n_jobs, 1024);
        for (uint32_t i = 0; i < 1024; i++) {
                cr_assert_eq(r.submit.jobs[i].type, WIRE_JOB_FILL, "job %u", i);
                cr_assert_eq(r.submit.jobs[i].fill.dst_handle, 100 + i, "job %u", i);
                cr_assert_eq(r.submit.jobs[i].fill.dst_offset, 4ull * i, "job %u", i);
                cr_assert_eq(r.submit.jobs[i].fill.pattern, 0x5a000000u | i, "job %u", i);
        }
        wire_request_done(&r);
}

/* AllocBufferRequest.gpu and Job.gpu: absent is not GPU 0 (the session's
 * GPU); present, the index as sent (the session checks it against what the
 * daemon serves). */
Test(wire, alloc_buffer_and_job_name_a_gpu) {
        REQ(m);
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__GpuRef g = KFDBROKER__V1__GPU_REF__INIT;
        static SubmitFixture f;
        WireRequest r = {};
        char err[128];

        m.id = 4;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        m.alloc_buffer = &a;
        a.size = 4096;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_not(r.alloc_buffer.has_gpu);
        g.index = 0;
        a.gpu = &g;
        r = (WireRequest) {};
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert(r.alloc_buffer.has_gpu);
        cr_assert_eq(r.alloc_buffer.gpu, 0u);
        g.index = 99;
        r = (WireRequest) {};
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.alloc_buffer.gpu, 99u);

        submit_fixture_init(&f, &m, 2);
        f.jobs[1].gpu = &g;
        g.index = 1;
        r = (WireRequest) {};
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_not(r.submit.jobs[0].has_gpu);
        cr_assert(r.submit.jobs[1].has_gpu);
        cr_assert_eq(r.submit.jobs[1].gpu, 1u);
        cr_assert_eq(r.submit.jobs[1].type, WIRE_JOB_FILL);
        cr_assert_eq(r.submit.jobs[1].fill.pattern, 0xdeadbeef, "the job itself is intact");
        wire_request_done(&r);
}

/* The reply carries the buffer's GPU. */
Test(wire, reply_buffer_gpu) {
        WireReply w = { .id = 9, .type = WIRE_REPLY_ALLOC_BUFFER, .buffer = { .handle = 0x42, .size = 4096, .gpu = 1 } };
        Kfdbroker__V1__ServerMessage *m;
        void *buf = NULL;
        size_t len = 0;

        cr_assert_eq(wire_reply_encode(&w, &buf, &len), 0);
        m = kfdbroker__v1__server_message__unpack(NULL, len, buf);
        cr_assert_not_null(m);
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_ALLOC_BUFFER);
        cr_assert_eq(m->alloc_buffer->gpu, 1u);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        free(buf);
        w.type = WIRE_REPLY_IMPORT_BUFFER;
        cr_assert_eq(wire_reply_encode(&w, &buf, &len), 0);
        m = kfdbroker__v1__server_message__unpack(NULL, len, buf);
        cr_assert_not_null(m);
        cr_assert_eq(m->import_buffer->gpu, 1u);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        free(buf);
}

Test(wire, submit_range_checks) {
        REQ(m);
        static SubmitFixture f;
        Kfdbroker__V1__FillJob bad_fill;

        submit_fixture_init(&f, &m, 0);
        expect_error(&m, -EINVAL, "submit.jobs: must have 1..1024 jobs, got 0");
        submit_fixture_init(&f, &m, 1025);
        expect_error(&m, -EINVAL, "submit.jobs: must have 1..1024 jobs, got 1025");

        submit_fixture_init(&f, &m, 5);
        bad_fill = f.fill;
        f.jobs[3].fill = &bad_fill;
        bad_fill.size = 6;
        expect_error(&m, -EINVAL, "submit.jobs[3].fill.size: must be a multiple of 4, got 6");
        bad_fill.size = 0;
        expect_error(&m, -EINVAL, "submit.jobs[3].fill.size: must be > 0");
        bad_fill.size = 8;
        bad_fill.dst_offset = 2;
        expect_error(&m, -EINVAL, "submit.jobs[3].fill.dst_offset: must be a multiple of 4, got 2");
        bad_fill.dst_offset = UINT64_MAX - 3;
        expect_error(&m, -EINVAL,
                     "submit.jobs[3].fill.dst_offset: 18446744073709551612 + size 8 overflows");

        submit_fixture_init(&f, &m, 2);
        f.jobs[1].kind_case = KFDBROKER__V1__JOB__KIND_COPY;
        f.jobs[1].copy = &f.copy;
        f.copy.size = 10;
        expect_error(&m, -EINVAL, "submit.jobs[1].copy.size: must be a multiple of 4, got 10");
        f.copy.size = 0;
        expect_error(&m, -EINVAL, "submit.jobs[1].copy.size: must be > 0");
        f.copy.size = 16;
        f.copy.src_offset = 1;
        expect_error(&m, -EINVAL, "submit.jobs[1].copy.src_offset: must be a multiple of 4, got 1");
        f.copy.src_offset = 0;
        f.copy.dst_offset = 4094;
        expect_error(&m, -EINVAL, "submit.jobs[1].copy.dst_offset: must be a multiple of 4, got 4094");
        f.copy.dst_offset = UINT64_MAX - 11;
        expect_error(&m, -EINVAL,
                     "submit.jobs[1].copy.dst_offset: 18446744073709551604 + size 16 overflows");

        submit_fixture_init(&f, &m, 3);
        f.jobs[2].kind_case = KFDBROKER__V1__JOB__KIND__NOT_SET;
        expect_error(&m, -EINVAL, "submit.jobs[2]: no job kind set");
}

Test(wire, submit_unknown_job_kind) {
        /* id=8, submit{jobs{<field 9: empty message>}}: a job kind from a newer client. */
        static const uint8_t raw[] = { 0x08, 0x08, 0xaa, 0x01, 0x04, 0x0a, 0x02, 0x4a, 0x00 };
        WireRequest r = {};
        uint64_t id = 0;
        char err[128];

        cr_assert_eq(wire_request_decode(raw, sizeof(raw), &r, &id, err, sizeof(err)), -EOPNOTSUPP);
        cr_assert_eq(id, 8);
        cr_assert_str_eq(err, "submit.jobs[0]: job kind 9 is not supported");
}

Test(wire, garbage_truncated_oversized) {
        REQ(m);
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                           0xff, 0xff, 0xff, 0x01 };
        static uint8_t big[WIRE_MAX_MESSAGE_SIZE + 1];
        WireRequest r = {};
        uint64_t id = 99;
        char err[128];
        Packed p;

        cr_assert_eq(wire_request_decode(garbage, sizeof(garbage), &r, &id, err, sizeof(err)),
                     -EBADMSG);
        cr_assert_eq(id, 0);
        cr_assert_str_eq(err, "request: not a valid Request message");

        h.protocol_version = 1;
        h.client_name = (char *) "truncate-me";
        m.id = 300;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        m.hello = &h;
        p = pack(&m);
        /* Every strict prefix that cuts into the hello body is invalid. */
        for (size_t n = 4; n < p.len; n++)
                cr_assert_eq(wire_request_decode(p.buf, n, &r, &id, err, sizeof(err)), -EBADMSG,
                             "prefix of %zu bytes", n);
        free(p.buf);

        cr_assert_eq(wire_request_decode(big, sizeof(big), &r, &id, err, sizeof(err)), -EMSGSIZE);
        cr_assert_str_eq(err, "request: 65537 bytes, larger than the limit of 65536");

        /* An empty datagram is a Request with id 0. */
        cr_assert_eq(wire_request_decode("", 0, &r, &id, err, sizeof(err)), -EINVAL);
        cr_assert_str_eq(err, "request.id: must not be 0");
}

Test(wire, errbuf_is_optional_and_truncates) {
        REQ(m);
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        WireRequest r = {};
        char err[8];

        m.id = 1;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        m.alloc_buffer = &a;
        cr_assert_eq(decode(&m, &r, NULL, NULL, 0), -EINVAL);
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), -EINVAL);
        cr_assert_str_eq(err, "alloc_b");
}

Test(wire, type_names) {
        cr_assert_str_eq(wire_request_type_name(WIRE_REQUEST_HELLO), "Hello");
        cr_assert_str_eq(wire_request_type_name(WIRE_REQUEST_SUBMIT), "Submit");
        cr_assert_str_eq(wire_request_type_name(WIRE_REQUEST_STATUS), "Status");
        cr_assert_str_eq(wire_request_type_name(0), "Unknown");
        cr_assert_str_eq(wire_request_type_name(99), "Unknown");
        cr_assert_eq(wire_request_fds_expected(WIRE_REQUEST_IMPORT_BUFFER), 1);
        cr_assert_eq(wire_request_fds_expected(WIRE_REQUEST_ALLOC_BUFFER), 0);
}

/* ---- Replies ---- */

static Kfdbroker__V1__ServerMessage *encode_decode(const WireReply *r) {
        void *buf = NULL;
        size_t len = 0;
        Kfdbroker__V1__ServerMessage *m;

        cr_assert_eq(wire_reply_encode(r, &buf, &len), 0);
        cr_assert_leq(len, WIRE_MAX_MESSAGE_SIZE);
        m = kfdbroker__v1__server_message__unpack(NULL, len, buf);
        free(buf);
        cr_assert_not_null(m);
        return m;
}

Test(wire, reply_error) {
        WireReply r = { .id = 42, .error = ENOENT, .message = "free_buffer.handle: no buffer 7",
                        .type = WIRE_REPLY_ERROR };
        Kfdbroker__V1__ServerMessage *m = encode_decode(&r);

        cr_assert_eq(m->id, 42);
        cr_assert_eq(m->error, ENOENT);
        cr_assert_str_eq(m->error_message, "free_buffer.handle: no buffer 7");
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY__NOT_SET);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r.error = -1;
        void *buf;
        size_t len;
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EINVAL);
}

Test(wire, reply_hello) {
        static const char *const features[] = { "sdma-copy", "sdma-fill", "events", NULL };
        WireReply r = {
                .id = 1,
                .type = WIRE_REPLY_HELLO,
                .hello = { .protocol_version = 1, .daemon_version = "0.1.0", .features = features,
                           .limits = { .max_buffer_size = 1ull << 32, .max_buffer_bytes = 1ull << 34,
                                       .max_buffers = 4096, .max_events = 1024,
                                       .max_jobs_in_flight = 64, .max_jobs_per_submit = 1024,
                                       .max_message_size = 65536, .max_wait_events = 256 },
                           .session_id = 17, .session_page_size = 20480 },
        };
        Kfdbroker__V1__ServerMessage *m = encode_decode(&r);

        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_HELLO);
        cr_assert_eq(m->hello->protocol_version, 1);
        cr_assert_str_eq(m->hello->daemon_version, "0.1.0");
        cr_assert_eq(m->hello->n_features, 3);
        cr_assert_str_eq(m->hello->features[2], "events");
        cr_assert_eq(m->hello->limits->max_buffer_bytes, 1ull << 34);
        cr_assert_eq(m->hello->limits->max_wait_events, 256);
        cr_assert_eq(m->hello->limits->max_jobs_in_flight, 64);
        cr_assert_eq(m->hello->session_id, 17);
        cr_assert_eq(m->hello->session_page_size, 20480);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

Test(wire, reply_bodies) {
        static const WireWaitEntry entries[] = { { 5, 3 }, { 6, 9 } };
        static const uint64_t fences[] = { 10, 11, 12 };
        WireReply r = { .id = 2, .type = WIRE_REPLY_WAIT_EVENTS,
                        .wait_events = { WIRE_WAIT_TIMEOUT, entries, 2 } };
        Kfdbroker__V1__ServerMessage *m = encode_decode(&r);

        cr_assert_eq(m->wait_events->result, KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_TIMEOUT);
        cr_assert_eq(m->wait_events->n_events, 2);
        cr_assert_eq(m->wait_events->events[1]->handle, 6);
        cr_assert_eq(m->wait_events->events[1]->last_event_age, 9);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 3, .type = WIRE_REPLY_SUBMIT, .submit = { fences, 3 } };
        m = encode_decode(&r);
        cr_assert_eq(m->submit->n_fences, 3);
        cr_assert_eq(m->submit->fences[2], 12);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 4, .type = WIRE_REPLY_ALLOC_BUFFER, .buffer = { 0x100000002ull, 8192 } };
        m = encode_decode(&r);
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_ALLOC_BUFFER);
        cr_assert_eq(m->alloc_buffer->handle, 0x100000002ull);
        cr_assert_eq(m->alloc_buffer->size, 8192);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 5, .type = WIRE_REPLY_IMPORT_BUFFER, .buffer = { 3, 4096 } };
        m = encode_decode(&r);
        cr_assert_eq(m->import_buffer->handle, 3);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 6, .type = WIRE_REPLY_EXPORT_BUFFER, .buffer = { .size = 4096 } };
        m = encode_decode(&r);
        cr_assert_eq(m->export_buffer->size, 4096);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 7, .type = WIRE_REPLY_EMPTY };
        m = encode_decode(&r);
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_EMPTY);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 8, .type = WIRE_REPLY_CREATE_EVENT, .create_event = { 77, 5 } };
        m = encode_decode(&r);
        cr_assert_eq(m->create_event->handle, 77);
        cr_assert_eq(m->create_event->slot, 5);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 0, .type = WIRE_REPLY_JOB_FAILED,
                          .job_failed = { 31, EFAULT, "memory fault at 0x1000" } };
        m = encode_decode(&r);
        cr_assert_eq(m->id, 0);
        cr_assert_eq(m->job_failed->fence, 31);
        cr_assert_eq(m->job_failed->error, EFAULT);
        cr_assert_str_eq(m->job_failed->message, "memory fault at 0x1000");
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 9, .type = WIRE_REPLY_STATUS,
                          .status = { "0.1.0", "sim", "gfx1030", 3, 100, 2, 5000000000ull, 1 << 20,
                                      4, 2, 6 } };
        m = encode_decode(&r);
        cr_assert_str_eq(m->status->backend, "sim");
        cr_assert_str_eq(m->status->gfx_name, "gfx1030");
        cr_assert_eq(m->status->sessions, 3);
        cr_assert_eq(m->status->jobs_completed, 100);
        cr_assert_eq(m->status->uptime_ns, 5000000000ull);
        cr_assert_eq(m->status->buffer_bytes, 1 << 20);
        cr_assert_eq(m->status->gpu_buffers, 4);
        cr_assert_eq(m->status->jobs_in_flight, 2);
        cr_assert_eq(m->status->events, 6);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 10, .type = WIRE_REPLY_QUERY,
                          .query = { .buffers = 2, .jobs_in_flight = 1, .bytes_copied = 1 << 26,
                                     .limits = { .max_buffers = 9 } } };
        m = encode_decode(&r);
        cr_assert_eq(m->query->buffers, 2);
        cr_assert_eq(m->query->bytes_copied, 1 << 26);
        cr_assert_eq(m->query->limits->max_buffers, 9);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 11, .type = WIRE_REPLY_DEVICE_INFO,
                          .device_info = { .backend = "sim", .gfx_name = "gfx1030",
                                           .name = NULL, .cu_count = 40 } };
        m = encode_decode(&r);
        cr_assert_str_eq(m->device_info->backend, "sim");
        cr_assert_str_eq(m->device_info->name, "");
        cr_assert_eq(m->device_info->cu_count, 40);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

Test(wire, reply_too_large) {
        static char message[WIRE_MAX_MESSAGE_SIZE + 16];
        WireReply r = { .id = 1, .error = EINVAL, .message = message, .type = WIRE_REPLY_ERROR };
        void *buf = NULL;
        size_t len = 0;

        memset(message, 'm', sizeof(message) - 1);
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EMSGSIZE);
        cr_assert_null(buf);
}

Test(wire, reply_invalid_inputs) {
        WireReply r = { .id = 1, .type = WIRE_REPLY_WAIT_EVENTS,
                        .wait_events = { .result = 7, .entries = NULL, .n_entries = 0 } };
        void *buf = NULL;
        size_t len = 0;
        Kfdbroker__V1__ServerMessage *m;

        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EINVAL, "unknown wait result");
        r.wait_events.result = WIRE_WAIT_COMPLETE;
        r.wait_events.n_entries = 2;
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EINVAL, "entries missing");
        r.wait_events.n_entries = WIRE_MAX_WAIT_EVENTS + 1;
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EMSGSIZE);
        r = (WireReply) { .id = 1, .type = WIRE_REPLY_SUBMIT, .submit = { NULL, 3 } };
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EINVAL, "fences missing");
        r = (WireReply) { .id = 1, .type = (WireReplyType) 99 };
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EINVAL, "unknown reply type");
        cr_assert_eq(wire_reply_encode(NULL, &buf, &len), -EINVAL);
        cr_assert_null(buf);

        /* A Hello without features and strings still encodes: empty, not absent. */
        r = (WireReply) { .id = 2, .type = WIRE_REPLY_HELLO, .hello = { .protocol_version = 1 } };
        m = encode_decode(&r);
        cr_assert_eq(m->hello->n_features, 0);
        cr_assert_str_eq(m->hello->daemon_version, "");
        cr_assert_not_null(m->hello->limits);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

/* ---- Compute: code objects and dispatch jobs ---- */

Test(wire, code_object_requests) {
        REQ(m);
        Kfdbroker__V1__LoadCodeObjectRequest load = KFDBROKER__V1__LOAD_CODE_OBJECT_REQUEST__INIT;
        Kfdbroker__V1__FreeCodeObjectRequest fr = KFDBROKER__V1__FREE_CODE_OBJECT_REQUEST__INIT;
        WireRequest r = {};
        char err[128];

        m.id = 31;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_LOAD_CODE_OBJECT;
        m.load_code_object = &load;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.type, WIRE_REQUEST_LOAD_CODE_OBJECT);
        cr_assert_eq(r.id, 31);
        cr_assert_eq(wire_request_fds_expected(r.type), 1, "LoadCodeObject carries its memfd");
        cr_assert_str_eq(wire_request_type_name(r.type), "LoadCodeObject");
        wire_request_done(&r);

        fr.handle = 0x4300000100000002ull;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_CODE_OBJECT;
        m.free_code_object = &fr;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.type, WIRE_REQUEST_FREE_CODE_OBJECT);
        cr_assert_eq(r.object.handle, 0x4300000100000002ull);
        cr_assert_eq(wire_request_fds_expected(r.type), 0);
        cr_assert_str_eq(wire_request_type_name(r.type), "FreeCodeObject");
        wire_request_done(&r);
}

/* One dispatch job with a by-value, a buffer and a local-size argument. */
typedef struct DispatchFixture {
        Kfdbroker__V1__SubmitRequest s;
        Kfdbroker__V1__Job job[2], *jp[2];
        Kfdbroker__V1__DispatchJob d;
        Kfdbroker__V1__KernelArg args[WIRE_DISPATCH_MAX_ARGS + 1], *ap[WIRE_DISPATCH_MAX_ARGS + 1];
        Kfdbroker__V1__BufferRef ref;
        Kfdbroker__V1__SignalEventJob sig;
        Kfdbroker__V1__WaitEventJob wait;
        uint32_t grid[4], block[4];
        uint8_t bytes[WIRE_DISPATCH_MAX_ARG_BYTES + 1];
} DispatchFixture;

static void dispatch_fixture_init(DispatchFixture *f, Kfdbroker__V1__Request *m) {
        memset(f, 0, sizeof(*f));
        kfdbroker__v1__submit_request__init(&f->s);
        kfdbroker__v1__dispatch_job__init(&f->d);
        kfdbroker__v1__buffer_ref__init(&f->ref);
        kfdbroker__v1__signal_event_job__init(&f->sig);
        kfdbroker__v1__wait_event_job__init(&f->wait);
        for (size_t i = 0; i < 2; i++) {
                kfdbroker__v1__job__init(&f->job[i]);
                f->jp[i] = &f->job[i];
        }
        f->job[0].kind_case = KFDBROKER__V1__JOB__KIND_DISPATCH;
        f->job[0].dispatch = &f->d;
        f->job[1].kind_case = KFDBROKER__V1__JOB__KIND_SIGNAL_EVENT;
        f->job[1].signal_event = &f->sig;
        f->sig.handle = 0x45;
        f->sig.engine = KFDBROKER__V1__ENGINE__ENGINE_COMPUTE;
        for (size_t i = 0; i < ELEMENTSOF(f->args); i++) {
                kfdbroker__v1__kernel_arg__init(&f->args[i]);
                f->ap[i] = &f->args[i];
        }
        for (size_t i = 0; i < sizeof(f->bytes); i++)
                f->bytes[i] = (uint8_t) i;
        f->args[0].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BYTES;
        f->args[0].bytes = (ProtobufCBinaryData) { .len = 4, .data = f->bytes };
        f->ref.handle = 0x42;
        f->ref.offset = 256;
        f->args[1].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BUFFER;
        f->args[1].buffer = &f->ref;
        f->args[2].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_LOCAL_SIZE;
        f->args[2].local_size = 1024;
        f->d.code_object = 0x43;
        f->d.kernel = (char *) "saxpy";
        f->grid[0] = 1000;
        f->grid[1] = 3;
        f->block[0] = 64;
        f->block[1] = 2;
        f->d.grid = f->grid;
        f->d.n_grid = 2;
        f->d.block = f->block;
        f->d.n_block = 2;
        f->d.args = f->ap;
        f->d.n_args = 3;
        f->s.jobs = f->jp;
        f->s.n_jobs = 2;
        m->id = 7;
        m->body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        m->submit = &f->s;
}

Test(wire, dispatch_round_trip) {
        REQ(m);
        static DispatchFixture f;
        WireRequest r = {};
        const WireJob *j;
        char err[256];

        dispatch_fixture_init(&f, &m);
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.submit.n_jobs, 2);
        j = &r.submit.jobs[0];
        cr_assert_eq(j->type, WIRE_JOB_DISPATCH);
        cr_assert_eq(j->dispatch.code_object, 0x43);
        cr_assert_str_eq(j->dispatch.kernel, "saxpy");
        cr_assert_eq(j->dispatch.n_dims, 2);
        cr_assert_eq(j->dispatch.grid[0], 1000);
        cr_assert_eq(j->dispatch.grid[1], 3);
        cr_assert_eq(j->dispatch.grid[2], 1, "an unused dimension is 1");
        cr_assert_eq(j->dispatch.block[0], 64);
        cr_assert_eq(j->dispatch.block[1], 2);
        cr_assert_eq(j->dispatch.block[2], 1);
        cr_assert_eq(j->dispatch.n_args, 3);
        cr_assert_eq(j->dispatch.args[0].type, WIRE_ARG_BYTES);
        cr_assert_eq(j->dispatch.args[0].n_bytes, 4);
        cr_assert_arr_eq(j->dispatch.args[0].bytes, f.bytes, 4);
        cr_assert_eq(j->dispatch.args[1].type, WIRE_ARG_BUFFER);
        cr_assert_eq(j->dispatch.args[1].handle, 0x42);
        cr_assert_eq(j->dispatch.args[1].offset, 256);
        cr_assert_eq(j->dispatch.args[2].type, WIRE_ARG_LOCAL_SIZE);
        cr_assert_eq(j->dispatch.args[2].local_size, 1024);
        cr_assert_eq(r.submit.jobs[1].type, WIRE_JOB_SIGNAL_EVENT);
        cr_assert_eq(r.submit.jobs[1].event.engine, WIRE_ENGINE_COMPUTE);
        wire_request_done(&r);
        cr_assert_null(r.submit.jobs);

        /* The limits themselves are accepted: 3 dimensions, 1024 work-items
         * per workgroup, 64 arguments, a 4096-byte value, a 127-byte name. */
        static char name[WIRE_KERNEL_NAME_MAX + 1];
        memset(name, 'k', WIRE_KERNEL_NAME_MAX);
        f.d.kernel = name;
        f.grid[2] = 7;
        f.block[0] = 512;
        f.block[1] = 1;
        f.block[2] = 2;
        f.d.n_grid = f.d.n_block = 3;
        for (size_t i = 3; i < WIRE_DISPATCH_MAX_ARGS; i++)
                f.args[i] = f.args[0];
        f.args[0].bytes.len = WIRE_DISPATCH_MAX_ARG_BYTES;
        f.d.n_args = WIRE_DISPATCH_MAX_ARGS;
        f.sig.engine = KFDBROKER__V1__ENGINE__ENGINE_AUTO;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        j = &r.submit.jobs[0];
        cr_assert_eq(strlen(j->dispatch.kernel), WIRE_KERNEL_NAME_MAX);
        cr_assert_eq(j->dispatch.n_args, WIRE_DISPATCH_MAX_ARGS);
        cr_assert_eq(j->dispatch.args[0].n_bytes, WIRE_DISPATCH_MAX_ARG_BYTES);
        cr_assert_arr_eq(j->dispatch.args[0].bytes, f.bytes, WIRE_DISPATCH_MAX_ARG_BYTES);
        cr_assert_eq(j->dispatch.grid[2], 7);
        cr_assert_eq(r.submit.jobs[1].event.engine, WIRE_ENGINE_AUTO);
        wire_request_done(&r);
}

Test(wire, dispatch_range_checks) {
        REQ(m);
        static DispatchFixture f;
        static char name[WIRE_KERNEL_NAME_MAX + 2];

        dispatch_fixture_init(&f, &m);
        f.d.kernel = (char *) "";
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.kernel: must not be empty");
        memset(name, 'k', WIRE_KERNEL_NAME_MAX + 1);
        f.d.kernel = name;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.kernel: must be at most 127 bytes, got 128");
        f.d.kernel = (char *) "sa xpy";
        expect_error(&m, -EINVAL,
                     "submit.jobs[0].dispatch.kernel: byte 0x20 at 2 is not printable ASCII");
        f.d.kernel = (char *) "saxpy\x1b[2J";
        expect_error(&m, -EINVAL,
                     "submit.jobs[0].dispatch.kernel: byte 0x1b at 5 is not printable ASCII");
        f.d.kernel = (char *) "saxpy";

        f.d.n_grid = f.d.n_block = 0;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.grid: must have 1..3 dimensions, got 0");
        f.d.n_grid = f.d.n_block = 4;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.grid: must have 1..3 dimensions, got 4");
        f.d.n_grid = 2;
        f.d.n_block = 1;
        expect_error(&m, -EINVAL,
                     "submit.jobs[0].dispatch.block: must have as many dimensions as grid (2), got 1");
        f.d.n_block = 2;
        f.grid[1] = 0;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.grid[1]: must be >= 1");
        f.grid[1] = 3;
        f.block[0] = 0;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.block[0]: must be >= 1");
        f.block[0] = 1024;
        expect_error(&m, -EINVAL,
                     "submit.jobs[0].dispatch.block: 2048 work-items per workgroup, at most 1024 allowed");
        f.block[0] = 1;
        f.block[1] = 1;
        f.grid[0] = UINT32_MAX;
        f.grid[1] = 2;
        expect_error(&m, -EINVAL,
                     "submit.jobs[0].dispatch.grid: 8589934590 workgroups, at most 4294967295 allowed");
        f.grid[0] = 1000;
        f.block[0] = 64;

        f.d.n_args = WIRE_DISPATCH_MAX_ARGS + 1;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.args: at most 64 arguments, got 65");
        f.d.n_args = 3;
        f.args[0].bytes.len = 0;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.args[0].bytes: must be 1..4096 bytes, got 0");
        f.args[0].bytes.len = WIRE_DISPATCH_MAX_ARG_BYTES + 1;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.args[0].bytes: must be 1..4096 bytes, got 4097");
        f.args[0].bytes.len = 4;
        /* Errors after an argument's bytes were copied free them (ASan checks). */
        f.args[2].local_size = 0;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.args[2].local_size: must be > 0");
        f.args[2].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE__NOT_SET;
        expect_error(&m, -EINVAL, "submit.jobs[0].dispatch.args[2]: no value set");
        f.args[2].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_LOCAL_SIZE;
        f.args[2].local_size = 16;

        f.sig.engine = (Kfdbroker__V1__Engine) 7;
        expect_error(&m, -EINVAL, "submit.jobs[1].signal_event.engine: unknown engine 7");
        f.job[1].kind_case = KFDBROKER__V1__JOB__KIND_WAIT_EVENT;
        f.job[1].wait_event = &f.wait;
        f.wait.engine = (Kfdbroker__V1__Engine) 7;
        expect_error(&m, -EINVAL, "submit.jobs[1].wait_event.engine: unknown engine 7");
}

Test(wire, reply_load_code_object) {
        static const WireKernelArgInfo args[] = {
                { "a", 0, 4, "by_value" }, { "x", 8, 8, "global_buffer" },
                { "tmp", 16, 4, "dynamic_lds" }, { "", 24, 8, "hidden" },
        };
        static const WireKernelInfo kernels[] = {
                { "saxpy", 272, 0, 0, 256, args, 4 },
                { "empty", 0, 64, 16, 1024, NULL, 0 },
        };
        WireReply r = { .id = 12, .type = WIRE_REPLY_LOAD_CODE_OBJECT,
                        .load_code_object = { 0x4311, kernels, 2 } };
        Kfdbroker__V1__ServerMessage *m = encode_decode(&r);
        const Kfdbroker__V1__KernelInfo *k;
        void *buf = NULL;
        size_t len = 0;

        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_LOAD_CODE_OBJECT);
        cr_assert_eq(m->load_code_object->handle, 0x4311);
        cr_assert_eq(m->load_code_object->n_kernels, 2);
        k = m->load_code_object->kernels[0];
        cr_assert_str_eq(k->name, "saxpy");
        cr_assert_eq(k->kernarg_size, 272);
        cr_assert_eq(k->max_workgroup_size, 256);
        cr_assert_eq(k->n_args, 4);
        cr_assert_str_eq(k->args[1]->name, "x");
        cr_assert_eq(k->args[1]->offset, 8);
        cr_assert_eq(k->args[1]->size, 8);
        cr_assert_str_eq(k->args[1]->kind, "global_buffer");
        cr_assert_str_eq(k->args[3]->kind, "hidden");
        k = m->load_code_object->kernels[1];
        cr_assert_str_eq(k->name, "empty");
        cr_assert_eq(k->group_segment_size, 64);
        cr_assert_eq(k->private_segment_size, 16);
        cr_assert_eq(k->n_args, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r.load_code_object.kernels = NULL;
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EINVAL, "kernels missing");
        r.load_code_object.kernels = (WireKernelInfo[]) { { "k", 0, 0, 0, 0, NULL, 3 } };
        r.load_code_object.n_kernels = 1;
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EINVAL, "args missing");

        /* A kernel list that does not fit one datagram is refused, not truncated. */
        static WireKernelInfo many[2000];
        for (size_t i = 0; i < ELEMENTSOF(many); i++)
                many[i] = (WireKernelInfo) { "a_kernel_with_a_long_enough_name", 272, 0, 0, 256, args, 4 };
        r.load_code_object.kernels = many;
        r.load_code_object.n_kernels = ELEMENTSOF(many);
        cr_assert_eq(wire_reply_encode(&r, &buf, &len), -EMSGSIZE);
        cr_assert_null(buf);
}

Test(wire, compute_counts_in_replies) {
        WireReply r = { .id = 1, .type = WIRE_REPLY_DEVICE_INFO,
                        .device_info = { .backend = "sim", .sdma_queues = 2, .compute_queues = 4 } };
        Kfdbroker__V1__ServerMessage *m = encode_decode(&r);

        cr_assert_eq(m->device_info->sdma_queues, 2);
        cr_assert_eq(m->device_info->compute_queues, 4);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 2, .type = WIRE_REPLY_QUERY, .query = { .code_objects = 3 } };
        m = encode_decode(&r);
        cr_assert_eq(m->query->code_objects, 3);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        r = (WireReply) { .id = 3, .type = WIRE_REPLY_STATUS, .status = { .code_objects = 5 } };
        m = encode_decode(&r);
        cr_assert_eq(m->status->code_objects, 5);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

Test(wire, open_kfd_request_and_reply) {
        REQ(m);
        Kfdbroker__V1__OpenKfdRequest ok = KFDBROKER__V1__OPEN_KFD_REQUEST__INIT;
        WireRequest r = {};
        uint64_t id = 0;
        char err[256] = "";
        static WireTopologyFile files[WIRE_MAX_TOPOLOGY_FILES + 1];
        char longpath[WIRE_MAX_TOPOLOGY_PATH + 2];
        Kfdbroker__V1__ServerMessage *sm;
        WireReply rep;
        void *buf;
        size_t len;

        m.id = 9;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_KFD;
        m.open_kfd = &ok;
        cr_assert_eq(decode(&m, &r, &id, err, sizeof err), 0, "%s", err);
        cr_assert_eq(r.type, WIRE_REQUEST_OPEN_KFD);
        cr_assert_str_eq(wire_request_type_name(r.type), "OpenKfd");
        cr_assert_eq(wire_request_fds_expected(r.type), 0);

        for (size_t i = 0; i < ELEMENTSOF(files); i++)
                files[i] = (WireTopologyFile) { "topology/generation_id", "1\n", 2 };
        rep = (WireReply) { .id = 9, .type = WIRE_REPLY_OPEN_KFD,
                            .open_kfd = { .files = files, .n_files = 2, .render_minor = 128 } };
        sm = encode_decode(&rep);
        cr_assert_eq(sm->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_KFD);
        cr_assert_eq(sm->open_kfd->n_topology, 2);
        cr_assert_str_eq(sm->open_kfd->topology[1]->path, "topology/generation_id");
        cr_assert_eq(sm->open_kfd->topology[1]->content.len, 2);
        cr_assert_eq(sm->open_kfd->render_minor, 128);
        kfdbroker__v1__server_message__free_unpacked(sm, NULL);

        /* Past the bounds the client checks: refused here first. */
        rep.open_kfd.n_files = ELEMENTSOF(files);
        cr_assert_eq(wire_reply_encode(&rep, &buf, &len), -EINVAL);
        memset(longpath, 'a', sizeof longpath - 1);
        longpath[sizeof longpath - 1] = 0;
        files[0].path = longpath;
        rep.open_kfd.n_files = 1;
        cr_assert_eq(wire_reply_encode(&rep, &buf, &len), -EINVAL);
        files[0] = (WireTopologyFile) { "topology/x", "", WIRE_MAX_TOPOLOGY_CONTENT + 1 };
        cr_assert_eq(wire_reply_encode(&rep, &buf, &len), -EINVAL);
}

/* HelloRequest.features (docs/protocol.md "Lazy sessions"): the bits reach
 * the handler as sent, the known one and any a newer client sets; a Hello
 * without them says 0. OpenSessionPage decodes, its reply encodes. */
Test(wire, hello_features_and_open_session_page) {
        REQ(m);
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__OpenSessionPageRequest o = KFDBROKER__V1__OPEN_SESSION_PAGE_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *reply;
        WireRequest r = {};
        char err[128];

        h.protocol_version = 1;
        m.id = 9;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        m.hello = &h;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.hello.features, 0);
        h.features = WIRE_HELLO_FEATURE_LAZY_SESSION | (UINT64_C(1) << 40);
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.hello.features, WIRE_HELLO_FEATURE_LAZY_SESSION | (UINT64_C(1) << 40));
        cr_assert_eq(WIRE_HELLO_FEATURE_LAZY_SESSION, 1, "bit 0 is the protocol's (docs/protocol.md)");

        m.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_SESSION_PAGE;
        m.open_session_page = &o;
        cr_assert_eq(decode(&m, &r, NULL, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(r.type, WIRE_REQUEST_OPEN_SESSION_PAGE);
        cr_assert_str_eq(wire_request_type_name(r.type), "OpenSessionPage");
        cr_assert_eq(wire_request_fds_expected(r.type), 0);

        reply = encode_decode(&(WireReply) { .id = 9, .type = WIRE_REPLY_OPEN_SESSION_PAGE,
                                             .session_page = { .size = 20480 } });
        cr_assert_eq(reply->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SESSION_PAGE);
        cr_assert_eq(reply->open_session_page->size, 20480);
        kfdbroker__v1__server_message__free_unpacked(reply, NULL);
}
