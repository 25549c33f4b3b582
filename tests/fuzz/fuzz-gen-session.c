/* SPDX-License-Identifier: MIT */
/*
 * Seeds of fuzz-session (see the input format there): one client session
 * each, written op by op — copies and fills between its buffers, events
 * signalled by jobs and by the client, a wait job released by SetEvent, a
 * dma-buf exported and imported back, a dispatch of the real code object, a
 * client that forgets Hello, raw bytes, the submit ring written well and
 * badly next to a fence page, and a lazy session.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz-gen.h"
#include "submit-ring.h"

/* Opcodes of fuzz-session.c (enum Op). */
enum {
        OP_RAW, OP_HELLO, OP_ALLOC, OP_FREE, OP_EXPORT, OP_IMPORT, OP_CREATE_EVENT, OP_DESTROY_EVENT,
        OP_SET_EVENT, OP_RESET_EVENT, OP_WAIT_EVENTS, OP_SUBMIT, OP_QUERY, OP_LOAD_CODE, OP_FREE_CODE,
        OP_STATUS, OP_OPEN_RING, OP_RING, OP_OPEN_FENCE_PAGE,
};
/* Job kinds of build_job(). */
enum { JOB_COPY, JOB_FILL, JOB_SIGNAL, JOB_WAIT, JOB_DISPATCH };

typedef struct Seed {
        uint8_t b[512];
        size_t n;
} Seed;

static void put(Seed *s, const uint8_t *bytes, size_t n) {
        if (s->n + n <= sizeof s->b) {
                memcpy(s->b + s->n, bytes, n);
                s->n += n;
        }
}
#define PUT(s, ...) put((s), (const uint8_t[]) { __VA_ARGS__ }, sizeof((const uint8_t[]) { __VA_ARGS__ }))

static int write_session(const char *dir, const char *name, const Seed *s) {
        return write_seed(dir, name, s->b, s->n);
}

int session_corpus(const char *dir) {
        Seed s;

        /* Two 64 KiB buffers (GTT, VRAM), filled and copied, then Query. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 16, 0, OP_ALLOC, 96, 0); /* 96: VRAM (0x40), 16 x 4 KiB */
        PUT(&s, OP_SUBMIT, 2, JOB_FILL, 0, 0, 0, 0xff, 0x0f, 0x78, 0x56, 0x34, 0x12,
            JOB_COPY, 0, 0, 0, 1, 0, 0, 0xff, 0x0f);
        PUT(&s, OP_QUERY, 0, OP_FREE, 0, OP_FREE, 1);
        if (write_session(dir, "copy-fill", &s) < 0)
                return -1;

        /* An event signalled by an SDMA job, polled, set, reset, destroyed. */
        s = (Seed) {};
        PUT(&s, 0, OP_CREATE_EVENT, 0, OP_SUBMIT, 1, JOB_SIGNAL, 0, 1);
        PUT(&s, OP_WAIT_EVENTS, 1, 0, 0, OP_SET_EVENT, 0, OP_RESET_EVENT, 0, OP_WAIT_EVENTS, 0x21, 0, 1);
        PUT(&s, OP_DESTROY_EVENT, 0, OP_STATUS, 1);
        if (write_session(dir, "events", &s) < 0)
                return -1;

        /* A wait job held until the client sets its event, then a fill after it. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 1, 0, OP_CREATE_EVENT, 1);
        PUT(&s, OP_SUBMIT, 2, JOB_WAIT, 0, 1, JOB_FILL, 0, 0, 0, 0x10, 0, 1, 2, 3, 4);
        PUT(&s, OP_SET_EVENT, 0, OP_QUERY, 0);
        if (write_session(dir, "wait-job", &s) < 0)
                return -1;

        /* A wait job never released: the hang-up cancels it. */
        s = (Seed) {};
        PUT(&s, 0, OP_CREATE_EVENT, 0, OP_SUBMIT, 1, JOB_WAIT, 0, 2, OP_WAIT_EVENTS, 0x21, 0, 0);
        if (write_session(dir, "wait-forever", &s) < 0)
                return -1;

        /* Export a buffer's dma-buf and import it (fds: page, eventfd,
         * the allocation's dma-buf, the export's), then free both. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 2, 0, OP_EXPORT, 0, OP_IMPORT, 3, OP_IMPORT, 2, OP_IMPORT, 0);
        PUT(&s, OP_IMPORT, 0xd0, OP_IMPORT, 0xf0, OP_FREE, 0, OP_FREE, 1, OP_FREE, 0xff, 1, 2, 3, 4, 5, 6, 7, 8);
        if (write_session(dir, "export-import", &s) < 0)
                return -1;

        /* vector_add over three 16 KiB buffers, 1024 work-items in blocks of 64. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 4, 0, OP_ALLOC, 4, 0, OP_ALLOC, 4, 0, OP_LOAD_CODE, 0);
        PUT(&s, OP_SUBMIT, 1, JOB_DISPATCH, 0, 0, 0xff, 0x03, 63, 0, 0, 1, 0, 2, 0, 0x00, 0x04);
        PUT(&s, OP_QUERY, 0, OP_FREE_CODE, 0);
        if (write_session(dir, "dispatch", &s) < 0)
                return -1;

        /* The same with c out of range of its buffer: a GPU fault. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 1, 0, OP_ALLOC, 1, 0, OP_ALLOC, 1, 0, OP_LOAD_CODE, 0);
        PUT(&s, OP_SUBMIT, 1, JOB_DISPATCH, 0, 0, 0xff, 0x0f, 255, 0, 0, 1, 0, 2, 0xf0, 0xff, 0x0f);
        PUT(&s, OP_SUBMIT, 1, JOB_FILL, 0, 0, 0, 0, 1, 0, 0, 0, 0);
        if (write_session(dir, "dispatch-fault", &s) < 0)
                return -1;

        /* A code object made of the input's bytes; an unsealed memfd. */
        s = (Seed) {};
        PUT(&s, 0, OP_LOAD_CODE, 0xc0, 8, 0x7f, 'E', 'L', 'F', 2, 1, 1, 0x40, OP_LOAD_CODE, 0x20);
        if (write_session(dir, "code-objects", &s) < 0)
                return -1;

        /* Requests before Hello; a second Hello; a Hello of another version. */
        s = (Seed) {};
        PUT(&s, 1, OP_ALLOC, 1, 0, OP_HELLO, 0x85, OP_HELLO, 1, OP_HELLO, 0, OP_QUERY, 0);
        if (write_session(dir, "hello-order", &s) < 0)
                return -1;

        /* Limits: buffers over MaxBufferSize and over BufferMemory, and a made-up size. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 79, 0, OP_ALLOC, 64, 0, OP_ALLOC, 64, 0, OP_ALLOC, 64, 0, OP_ALLOC, 64, 0);
        PUT(&s, OP_ALLOC, 64, 0, OP_ALLOC, 64, 0, OP_ALLOC, 64, 0, OP_ALLOC, 64, 0);
        PUT(&s, OP_ALLOC, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x80, OP_ALLOC, 0xfe, 0, OP_ALLOC, 0, 1);
        if (write_session(dir, "limits", &s) < 0)
                return -1;

        /* Raw datagrams: garbage, a Request with no body, an empty one (EOF). */
        s = (Seed) {};
        PUT(&s, 0, OP_RAW, 4, 0, 0xde, 0xad, 0xbe, 0xef, OP_RAW, 2, 0, 0x08, 0x07, OP_QUERY, 0, OP_RAW, 0, 0);
        if (write_session(dir, "raw", &s) < 0)
                return -1;

        /* The fence page and the submit ring: a batch of a fill, a copy and
         * a fill of a 64 KiB buffer (op_ring: count-1 and flags, then per
         * record kind, flag byte, fields; then how head moves), then one of
         * an event signal, then Query. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 16, 0, OP_CREATE_EVENT, 0, OP_OPEN_FENCE_PAGE, OP_OPEN_RING);
        PUT(&s, OP_RING, 2, KFDB_RING_FILL, 0, 0, 0, 0, 0x0f, 0, 0x78, 0x56, 0x34, 0x12);
        PUT(&s, KFDB_RING_COPY, 0, 0, 0, 0, 0, 0x40, 0, 0x0f, 0);
        PUT(&s, KFDB_RING_FILL, 0, 0, 0x80, 0, 0x03, 0, 1, 2, 3, 4, 0);
        PUT(&s, OP_RING, 0, KFDB_RING_SIGNAL_EVENT, 0, 0, 1, 0, OP_QUERY, 0);
        if (write_session(dir, "ring", &s) < 0)
                return -1;

        /* A lazy session (Hello byte 0x8): a buffer, an event set and a fill
         * before its page; the fence page refused before it; OpenSessionPage
         * (Query's operand 1) twice; then the fence page and the ring. */
        s = (Seed) {};
        PUT(&s, 1, OP_HELLO, 8, OP_ALLOC, 16, 0, OP_CREATE_EVENT, 0, OP_SET_EVENT, 0);
        PUT(&s, OP_SUBMIT, 1, JOB_FILL, 0, 0, 0, 0xff, 0x0f, 0x78, 0x56, 0x34, 0x12);
        PUT(&s, OP_OPEN_FENCE_PAGE, OP_QUERY, 1, OP_OPEN_FENCE_PAGE, OP_QUERY, 1, OP_OPEN_RING, OP_QUERY, 0);
        if (write_session(dir, "lazy", &s) < 0)
                return -1;

        /* A ring scribbled on, three ways, each of which ends the session
         * (the doorbell is rung regardless): a record of a bad length with a
         * reserved word set; head moved back after a good batch; head thrown
         * far out. */
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 1, 0, OP_OPEN_RING);
        PUT(&s, OP_RING, 0x80, KFDB_RING_FILL, 0x60, 17, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0);
        PUT(&s, OP_QUERY, 0);
        if (write_session(dir, "ring-bad-record", &s) < 0)
                return -1;
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 1, 0, OP_OPEN_RING);
        PUT(&s, OP_RING, 0x81, KFDB_RING_FILL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            KFDB_RING_FILL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        PUT(&s, OP_RING, 0x80, KFDB_RING_FILL, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xe3, OP_QUERY, 0);
        if (write_session(dir, "ring-head-back", &s) < 0)
                return -1;
        s = (Seed) {};
        PUT(&s, 0, OP_ALLOC, 1, 0, OP_OPEN_RING);
        PUT(&s, OP_RING, 0x80, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f);
        PUT(&s, OP_QUERY, 0);
        if (write_session(dir, "ring-head-far", &s) < 0)
                return -1;
        return 0;
}
