/* SPDX-License-Identifier: MIT */
/*
 * The submit ring, client side (docs/protocol.md "The submit ring",
 * proto/submit-ring.h). After Hello, a session whose daemon offers
 * "submit-ring" asks for its ring (unless KFDBROKER_SUBMIT_RING=0) and maps
 * it; kfdb_batch_submit() then writes copy, fill and event jobs into it and
 * assigns their fences itself (fences are sequential per session: the next
 * ones after the last handed out), so a submit needs no reply. Batches the
 * ring cannot take — a dispatch, no room, over the jobs-in-flight limit —
 * go as a Submit request; the daemon takes what the ring holds before any
 * request, so the two stay in order. A reconnect maps the new daemon's ring.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client-session.h"

static bool ring_layout_ok(const KfdbSubmitRing *r) {
        return r->magic == KFDB_RING_MAGIC && r->version == KFDB_RING_VERSION && r->size == KFDB_RING_SIZE &&
               r->records == KFDB_RING_RECORDS && r->record_size == KFDB_RING_RECORD_SIZE &&
               r->header_size == KFDB_RING_HEADER_SIZE;
}

void session_ring_close(kfdb_session *s) {
        if (s->ring)
                munmap(s->ring, KFDB_RING_SIZE);
        s->ring = NULL;
        s->ring_doorbell = safe_close(s->ring_doorbell);
        s->ring_head = 0;
}

int session_ring_open(kfdb_session *s) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_OPEN_SUBMIT_RING };
        struct stat st;
        void *m;
        int k;

        session_ring_close(s);
        if (!s->ring_wanted || !kfdb_session_has_feature(s, "submit-ring"))
                return 0;
        k = session_call(s, &req, NULL, 0, &r);
        if (session_connection_lost(k))
                return k;
        /* Anything else: the socket path works without it. */
        if (k < 0 || r->submit_ring.size != KFDB_RING_SIZE || fstat(r->fds[0], &st) < 0 ||
            st.st_size < (off_t) KFDB_RING_SIZE)
                return 0;
        m = mmap(NULL, KFDB_RING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, r->fds[0], 0);
        if (m == MAP_FAILED)
                return 0;
        if (!ring_layout_ok(m)) {
                munmap(m, KFDB_RING_SIZE);
                return 0;
        }
        s->ring = m;
        s->ring_doorbell = TAKE_FD(r->fds[1]);
        s->ring_head = atomic_load_explicit((_Atomic uint64_t *) &s->ring->head, memory_order_relaxed);
        return 0;
}

static void record_from_job(const ClientJob *j, bool end, KfdbRingRecord *rec) {
        *rec = (KfdbRingRecord) { .bytes = KFDB_RING_RECORD_SIZE, .flags = end ? KFDB_RING_END_OF_BATCH : 0 };
        switch (j->type) {
        case CLIENT_JOB_COPY:
                rec->kind = KFDB_RING_COPY;
                rec->copy.src_handle = j->copy.src_handle;
                rec->copy.src_offset = j->copy.src_offset;
                rec->copy.dst_handle = j->copy.dst_handle;
                rec->copy.dst_offset = j->copy.dst_offset;
                rec->copy.size = j->copy.size;
                break;
        case CLIENT_JOB_FILL:
                rec->kind = KFDB_RING_FILL;
                rec->fill.dst_handle = j->fill.dst_handle;
                rec->fill.dst_offset = j->fill.dst_offset;
                rec->fill.size = j->fill.size;
                rec->fill.pattern = j->fill.pattern;
                break;
        case CLIENT_JOB_SIGNAL_EVENT:
        case CLIENT_JOB_WAIT_EVENT:
                rec->kind = j->type == CLIENT_JOB_SIGNAL_EVENT ? KFDB_RING_SIGNAL_EVENT : KFDB_RING_WAIT_EVENT;
                rec->event.handle = j->event.handle;
                rec->event.engine = j->event.engine;
                break;
        case CLIENT_JOB_DISPATCH:
                break; /* never: the ring does not carry dispatches */
        }
}

static bool ring_takes(kfdb_session *s, const ClientJob *jobs, size_t n) {
        uint64_t tail = atomic_load_explicit((_Atomic uint64_t *) &s->ring->tail, memory_order_acquire);
        uint64_t in_flight = s->last_fence - session_completed_fence(s);
        uint64_t limit = session_page_load_u64(&s->page->max_jobs_in_flight);

        if (s->ring_head - tail + n > KFDB_RING_RECORDS)
                return false;
        /* Over the limit (now: SetLimits may have changed it since Hello) the
         * daemon would refuse it: let a Submit say so. The page's completed
         * fence may lag, so this errs towards the Submit. */
        if (limit == 0)
                limit = s->limits.max_jobs_in_flight;
        if (limit > 0 && in_flight + n > limit)
                return false;
        /* Its records carry no GPU: a job on another GPU goes as a Submit. */
        for (size_t i = 0; i < n; i++)
                if (jobs[i].type == CLIENT_JOB_DISPATCH || jobs[i].has_gpu)
                        return false;
        return true;
}

/* What arrived on the socket first: a lost connection is recovered before
 * jobs go into a ring nobody reads any more. */
static int ring_check_connection(kfdb_session *s) {
        struct pollfd p = { .fd = s->fd, .events = POLLIN };
        int k;

        if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
                return 0;
        for (;;) {
                k = session_receive(s, 0);
                if (k == 0)
                        return 0;
                if (k < 0)
                        return session_recover(s, k);
        }
}

int session_ring_submit(kfdb_session *s, const ClientJob *jobs, size_t n, uint64_t *fences_out) {
        uint64_t one = 1;
        int k;

        if (!s->ring)
                return 0;
        k = ring_check_connection(s);
        if (k < 0)
                return k;
        /* A reconnect maps the new daemon's ring (or none). */
        if (!s->ring || !ring_takes(s, jobs, n))
                return 0;
        for (size_t i = 0; i < n; i++) {
                KfdbRingRecord rec;

                record_from_job(&jobs[i], i == n - 1, &rec);
                memcpy(kfdb_ring_record(s->ring, s->ring_head + i), &rec, sizeof(rec));
        }
        s->ring_head += n;
        session_spin_look(s);
        atomic_store_explicit((_Atomic uint64_t *) &s->ring->head, s->ring_head, memory_order_release);
        /* Pairs with the daemon's fence between arming the doorbell and its last look. */
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit((_Atomic uint32_t *) &s->ring->doorbell_armed, memory_order_relaxed))
                (void) !write(s->ring_doorbell, &one, sizeof(one));
        for (size_t i = 0; i < n; i++)
                if (fences_out)
                        fences_out[i] = s->last_fence + 1 + i;
        s->last_fence += n;
        s->ring_submits++;
        return 1;
}
