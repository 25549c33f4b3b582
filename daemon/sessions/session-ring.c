/* SPDX-License-Identifier: MIT */
/*
 * SessionRing: the daemon side of a session's submit ring (proto/submit-ring.h,
 * docs/protocol.md "The submit ring"). Owned by one Session, made at
 * OpenSubmitRing, its event sources stopped when the session disconnects and
 * the rest freed with the session.
 *
 * The ring is a memfd the daemon makes, maps and seals against shrinking and
 * growing before the client sees it, so the client can write anything into
 * it but cannot take the daemon's mapping away (no SIGBUS). Everything in it
 * is the client's: the daemon keeps its own count of records taken (the
 * shared `tail` is only told), copies what was published before looking at
 * it, and checks each record as a Submit's job (wire-ring.c, then
 * session_submit_ring_batch()). A ring whose indices or records make no
 * sense ends its session with SessionEnded naming what was wrong; a batch
 * whose jobs a Submit would refuse fails job by job (JobFailed).
 *
 * Waking: the client writes the doorbell eventfd when `doorbell_armed` is
 * set, which this daemon keeps set: it does not poll the ring. Polling it
 * from the loop for 30 us after taking records made the 4-byte fill round
 * trip slower on the 2-core simulator machine (p50 58.6-79.8 us against
 * 32.9-33.6 us without, alternating runs), polling after a completion gained
 * nothing measurable (31.2-60.6 us); the field lets a daemon that polls tell
 * clients to skip the doorbell without a protocol change.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"
#include "wire/wire-ring.h"

struct SessionRing {
        int memfd;              /* until the reply that hands it out is queued */
        int doorbell;
        KfdbSubmitRing *shared; /* our read-write mapping of memfd */
        uint64_t tail;          /* records taken: ours, never read back */
        sd_event_source *doorbell_src;
        bool doorbell_counted;  /* in the session's fds (session-fds.c) */
};

static uint64_t load_head(SessionRing *r) {
        return atomic_load_explicit((_Atomic uint64_t *) &r->shared->head, memory_order_acquire);
}

void session_ring_stop(Session *s) {
        SessionRing *r = s->ring;

        if (!r)
                return;
        r->doorbell_src = sd_event_source_disable_unref(r->doorbell_src);
}

void session_ring_free(Session *s) {
        SessionRing *r = s->ring;

        if (!r)
                return;
        session_ring_stop(s);
        if (r->shared)
                munmap(r->shared, KFDB_RING_SIZE);
        safe_close(r->memfd);
        safe_close(r->doorbell);
        if (r->doorbell_counted)
                session_account_fds(s, -1);
        free(r);
        s->ring = NULL;
}

/* What was published, copied out of the shared ring (the client may change
 * it meanwhile), and room to decode it. */
typedef struct RingTake {
        KfdbRingRecord *copy;
        WireJob *jobs;
} RingTake;

static void ring_take_done(RingTake *t) {
        free(t->copy);
        free(t->jobs);
}

/*
 * Takes one batch starting at t->copy[at] (ring index @index), at most @left
 * records: decodes it and submits it. Returns the records it took (> 0), or
 * a negative errno with why filled when the ring is garbage.
 */
static int take_batch(Session *s, RingTake *t, size_t at, uint64_t index, size_t left, char *why,
                      size_t whylen) {
        char err[512] = "";
        int decode_error = 0;
        bool end = false;
        size_t n = 0;

        while (!end) {
                char e[512];
                int k;

                if (n == left) {
                        snprintf(why, whylen,
                                 "submit ring: the records from %" PRIu64 " to the producer index %" PRIu64 " end no batch (no record has KFDB_RING_END_OF_BATCH)",
                                 index, index + n);
                        return -EPROTO;
                }
                k = wire_ring_decode_record(&t->copy[at + n], index + n, n, &t->jobs[n], &end, e, sizeof(e));
                if (k == -EPROTO) {
                        snprintf(why, whylen, "%s", e);
                        return k;
                }
                if (k < 0 && decode_error == 0) {
                        decode_error = -k;
                        snprintf(err, sizeof(err), "%s", e);
                }
                n++;
        }
        (void) session_submit_ring_batch(s, t->jobs, n, decode_error, err);
        return (int) n;
}

/* Takes what was published; false when the session ended over it. */
static bool ring_take(Session *s) {
        _cleanup_(ring_take_done) RingTake t = {};
        SessionRing *r = s->ring;
        uint64_t head = load_head(r), tail = r->tail, pending = head - tail;
        char why[600] = "";
        size_t at = 0;

        if (pending == 0)
                return true;
        if ((int64_t) pending < 0)
                snprintf(why, sizeof(why),
                         "submit ring: the producer index moved backwards, to %" PRIu64 ", behind the %" PRIu64 " records already taken",
                         head, tail);
        else if (pending > KFDB_RING_RECORDS)
                snprintf(why, sizeof(why),
                         "submit ring: the producer index %" PRIu64 " is %" PRIu64 " records ahead of the consumer index %" PRIu64 ", more than the ring's %u",
                         head, pending, tail, KFDB_RING_RECORDS);
        if (!why[0]) {
                t.copy = malloc(pending * sizeof(KfdbRingRecord));
                t.jobs = calloc(pending, sizeof(WireJob));
                if (!t.copy || !t.jobs)
                        return true; /* out of memory: the next doorbell or request tries again */
                for (uint64_t i = 0; i < pending; i++)
                        memcpy(&t.copy[i], kfdb_ring_record(r->shared, tail + i), sizeof(KfdbRingRecord));
                while (at < pending && s->connected) {
                        int k = take_batch(s, &t, at, tail + at, (size_t) (pending - at), why, sizeof(why));
                        if (k < 0)
                                break;
                        at += (size_t) k;
                }
        }
        if (!s->connected)
                return false;
        if (why[0]) {
                session_log(s, LOG_NOTICE, "Session %" PRIu64 ": %s; ending the session", s->id, why);
                session_end(s, EPROTO, why, false);
                return false;
        }
        r->tail = head;
        atomic_store_explicit((_Atomic uint64_t *) &r->shared->tail, head, memory_order_release);
        scheduler_run(s->gpu->scheduler);
        return s->connected;
}

void session_ring_drain(Session *s) {
        if (!s->ring || !s->connected)
                return;
        session_ref(s);
        (void) ring_take(s);
        session_unref(s);
}

static int on_doorbell(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Session *s = userdata;
        uint64_t v;

        (void) !read(fd, &v, sizeof(v));
        session_ref(s);
        (void) ring_take(s);
        session_flush(s);
        session_unref(s);
        return 0;
}

/* Makes the memfd, maps and seals it, the doorbell and the sources; the
 * caller frees a half-made ring. */
static int ring_setup(Session *s, SessionRing *r) {
        void *m;
        int k;

        r->memfd = memfd_create("kfdbroker-submit-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (r->memfd < 0 || ftruncate(r->memfd, KFDB_RING_SIZE) < 0)
                return -errno;
        m = mmap(NULL, KFDB_RING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, r->memfd, 0);
        if (m == MAP_FAILED)
                return -errno;
        r->shared = m;
        /* The client may write it, but never make it smaller under our mapping. */
        if (fcntl(r->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
                return -errno;
        r->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->doorbell < 0)
                return -errno;
        *r->shared = (KfdbSubmitRing) {
                .magic = KFDB_RING_MAGIC,
                .version = KFDB_RING_VERSION,
                .size = KFDB_RING_SIZE,
                .records = KFDB_RING_RECORDS,
                .record_size = KFDB_RING_RECORD_SIZE,
                .header_size = KFDB_RING_HEADER_SIZE,
                .doorbell_armed = 1,
        };
        k = sd_event_add_io(s->set->event, &r->doorbell_src, r->doorbell, EPOLLIN, on_doorbell, s);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(r->doorbell_src, "session-ring-doorbell");
        return 0;
}

static int ring_new(Session *s) {
        int k;

        s->ring = calloc(1, sizeof(*s->ring));
        if (!s->ring)
                return -ENOMEM;
        s->ring->memfd = s->ring->doorbell = -EBADF;
        k = ring_setup(s, s->ring);
        if (k < 0)
                session_ring_free(s);
        return k;
}

void session_open_submit_ring(Session *s, const WireRequest *req) {
        int fds[2], k;

        if (s->ring) {
                session_send_error(s, req->id, EEXIST, "open_submit_ring: this session has its submit ring already");
                return;
        }
        /* The doorbell it keeps, and the reply's two fds until read. */
        if (!session_check_fds(s, req->id, 3, "OpenSubmitRing"))
                return;
        k = ring_new(s);
        if (k < 0) {
                session_send_error(s, req->id, -k, "open_submit_ring: cannot make the ring: %s", strerror(-k));
                return;
        }
        session_account_fds(s, +1);
        s->ring->doorbell_counted = true;
        fds[0] = s->ring->memfd;
        fds[1] = s->ring->doorbell;
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_OPEN_SUBMIT_RING,
                                       .submit_ring = { .size = KFDB_RING_SIZE, .records = KFDB_RING_RECORDS } },
                     fds, 2);
        /* The reply holds its own copy; our mapping keeps the memory: one fd
         * less per session. */
        s->ring->memfd = safe_close(s->ring->memfd);
}
