/* SPDX-License-Identifier: MIT */
/*
 * Coming back after a daemon restart (docs/protocol.md "When the daemon
 * restarts"). The GPU state of a session — queues, events, its GPU context —
 * dies with the daemon process; what survives is buffer memory, held by the
 * dma-buf fds this library keeps, and code objects, whose sealed memfds it
 * keeps too. So a lost connection is followed by a new one on the same socket
 * path, put on the same fd number (callers may be polling it), and a Hello
 * that continues the fence numbers; then every buffer is imported again,
 * every event and code object made again, and handles inside batches and the
 * interrupted request are rewritten. Jobs that were in flight when the old
 * daemon went are failed here with ECANCELED: the new one never saw them.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client-session.h"

/* ---- Handle map ---- */

int client_handle_map_add(ClientHandleMap *m, uint64_t from, uint64_t to) {
        if (m->n == m->n_allocated) {
                size_t n = MAX(m->n_allocated * 2, (size_t) 16);
                struct ClientHandlePair *p = reallocarray(m->pairs, n, sizeof(*p));

                if (!p)
                        return -ENOMEM;
                m->pairs = p;
                m->n_allocated = n;
        }
        m->pairs[m->n++] = (struct ClientHandlePair) { .from = from, .to = to };
        m->sorted = false;
        return 0;
}

static int pair_compare(const void *a, const void *b) {
        const struct ClientHandlePair *x = a, *y = b;

        return x->from < y->from ? -1 : x->from > y->from;
}

uint64_t client_handle_map_get(ClientHandleMap *m, uint64_t from) {
        struct ClientHandlePair key = { .from = from }, *p;

        if (m->n == 0 || from == 0)
                return from;
        if (!m->sorted) {
                qsort(m->pairs, m->n, sizeof(*m->pairs), pair_compare);
                m->sorted = true;
        }
        p = bsearch(&key, m->pairs, m->n, sizeof(*m->pairs), pair_compare);
        return p ? p->to : from;
}

void client_handle_map_clear(ClientHandleMap *m) {
        free(m->pairs);
        *m = (ClientHandleMap) {};
}

/* ---- Requests and fences ---- */

void session_request_remap(kfdb_session *s, ClientRequest *req) {
        ClientHandleMap *m = &s->restore_map;

        switch (req->type) {
        case CLIENT_REQUEST_ALLOC_BUFFER:
                /* The free it carried was of a buffer of the old connection. */
                req->alloc_buffer.free_first_id = 0;
                break;
        case CLIENT_REQUEST_FREE_BUFFER:
        case CLIENT_REQUEST_EXPORT_BUFFER:
        case CLIENT_REQUEST_DESTROY_EVENT:
        case CLIENT_REQUEST_SET_EVENT:
        case CLIENT_REQUEST_RESET_EVENT:
        case CLIENT_REQUEST_FREE_CODE_OBJECT:
                req->object.handle = client_handle_map_get(m, req->object.handle);
                break;
        case CLIENT_REQUEST_WAIT_EVENTS:
                /* New events have new ages: wait for their next signal. */
                for (size_t i = 0; i < req->wait_events.n_entries; i++) {
                        ClientWaitEntry *e = &req->wait_events.entries[i];
                        e->handle = client_handle_map_get(m, e->handle);
                        e->last_event_age = 0;
                }
                break;
        default:
                /* Submit names the batch's jobs, which their batch rewrote; the
                 * rest name no handle. */
                break;
        }
}

int session_find_cancelled(kfdb_session *s, uint64_t fence) {
        for (size_t i = 0; i < s->n_cancelled; i++)
                if (fence >= s->cancelled[i].first && fence <= s->cancelled[i].last)
                        return session_error(s, -ECANCELED,
                                             "the job with fence %" PRIu64 " was in flight when kfdbrokerd restarted%s%s%s: it did not complete",
                                             fence, s->cancelled[i].why[0] ? " (" : "", s->cancelled[i].why,
                                             s->cancelled[i].why[0] ? ")" : "");
        return 0;
}

/* Jobs the old daemon had not finished: the new one never saw them. */
static void cancel_in_flight(kfdb_session *s) {
        uint64_t completed = session_completed_fence(s);
        ClientReply r = { .type = CLIENT_REPLY_JOB_FAILED };
        char message[CLIENT_ERROR_MAX];

        if (completed >= s->last_fence)
                return;
        if (s->n_cancelled == CLIENT_CANCELLED_RANGES) {
                memmove(s->cancelled, s->cancelled + 1, (CLIENT_CANCELLED_RANGES - 1) * sizeof(s->cancelled[0]));
                s->n_cancelled--;
        }
        s->cancelled[s->n_cancelled].first = completed + 1;
        s->cancelled[s->n_cancelled].last = s->last_fence;
        snprintf(s->cancelled[s->n_cancelled].why, sizeof(s->cancelled[0].why), "%s", s->restart_message);
        s->n_cancelled++;
        /* And one notification each, as for any failed job (the queue keeps the newest). */
        snprintf(message, sizeof(message), "kfdbrokerd restarted%s%s%s while the job was in flight: it did not complete",
                 s->restart_message[0] ? " (" : "", s->restart_message, s->restart_message[0] ? ")" : "");
        r.job_failed.error = ECANCELED;
        r.job_failed.message = message;
        for (uint64_t f = MAX(completed + 1, s->last_fence > CLIENT_FAILURES_MAX ? s->last_fence - CLIENT_FAILURES_MAX + 1 : 1);
             f <= s->last_fence; f++) {
                r.job_failed.fence = f;
                session_push_failure(s, &r);
        }
}

/* ---- Reconnecting ---- */

static int64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool retry_later(int k) {
        /* No socket yet, nobody listening yet, or the new daemon went too. */
        return k == -ENOENT || k == -ECONNREFUSED || k == -EAGAIN || session_connection_lost(k);
}

/* Moves fd onto the number target (closing what was there), keeping close-on-exec. */
static int move_fd(int fd, int target) {
        if (target < 0 || fd == target)
                return fd;
        if (dup3(fd, target, O_CLOEXEC) < 0) {
                int k = -errno;
                safe_close(fd);
                return k;
        }
        safe_close(fd);
        return target;
}

static int restore_objects(kfdb_session *s, bool late) {
        int lost = 0;

        for (ClientObject *o = s->objects.next; o != &s->objects; o = o->next) {
                if (!o->restore || o->restore_late != late)
                        continue;
                if (o->restore(o, &s->restore_map) < 0)
                        lost++;
        }
        return lost;
}

/* One try: connect, Hello, make everything again. */
static int reconnect_once(kfdb_session *s) {
        int fd = -EBADF, old_event_fd = s->event_fd, k, lost;
        bool had_submitted = s->submit_ready;

        k = session_connect(s->path, &fd);
        if (k < 0)
                return session_error(s, k, "cannot connect to %s: %s", s->path, strerror(-k));
        k = move_fd(fd, s->fd);
        if (k < 0)
                return session_error(s, k, "cannot reuse the socket's fd: %s", strerror(-k));
        s->fd = k;

        session_forget_hello(s);
        s->event_fd = -EBADF;
        k = session_hello(s, s->client_name, s->last_fence);
        /* The caller may poll the eventfd it had: a lazy session that had its
         * page makes the new one now, onto the same number below, and its
         * ring and fence page if it had submitted. */
        if (k >= 0 && s->lazy && had_submitted)
                k = session_submit_need(s);
        else if (k >= 0 && s->lazy && old_event_fd >= 0)
                k = session_page_need(s);
        if (k >= 0 && s->event_fd >= 0) {
                k = move_fd(s->event_fd, old_event_fd);
                s->event_fd = k < 0 ? -EBADF : k;
        }
        if (s->event_fd < 0)
                s->event_fd = old_event_fd; /* keep the number for the next try */
        if (k < 0)
                return k;
        if (!kfdb_session_has_feature(s, "resume"))
                return session_error(s, -EPROTONOSUPPORT,
                                     "kfdbrokerd came back without the \"resume\" feature: the session cannot go on");

        client_handle_map_clear(&s->restore_map);
        lost = restore_objects(s, false);
        lost += restore_objects(s, true);
        /* Lost objects have handle 0 now: the daemon names them when used. */
        return session_error(s, 0, lost > 0 ? "reconnected; %d objects could not be made again" : "reconnected", lost);
}

bool session_connection_lost(int k) {
        return k == -ECONNRESET || k == -EPIPE || k == -ENOTCONN;
}

int session_recover(kfdb_session *s, int k) {
        int64_t deadline, delay = 10;
        char first[CLIENT_ERROR_MAX];

        if (!session_connection_lost(k) || s->restoring || !s->path || s->reconnect_timeout_ms == 0)
                return k;
        /* What the old connection still holds: job failures, SessionEnded. */
        session_drain(s);
        if (s->ended)
                return session_error(s, -ECONNRESET, "kfdbrokerd ended the session: %s", s->ended_message);

        snprintf(first, sizeof(first), "%s", s->last_error);
        s->deferred_free.handle = 0; /* its buffer went with the connection */
        cancel_in_flight(s);
        for (size_t i = 0; i < s->n_stash; i++)
                client_reply_free(s->stash[i]);
        s->n_stash = 0;

        deadline = now_ms() + s->reconnect_timeout_ms;
        s->restoring = true;
        for (;;) {
                k = reconnect_once(s);
                if (k >= 0 || !retry_later(k) || now_ms() >= deadline)
                        break;
                usleep((useconds_t) (delay * 1000));
                delay = MIN(delay * 2, (int64_t) 250);
        }
        s->restoring = false;
        s->restart_message[0] = '\0';
        if (k < 0)
                return session_error(s, k == -ETIMEDOUT || retry_later(k) ? -ECONNRESET : k,
                                     "%s; reconnecting to %s failed: %s", first, s->path, s->last_error);
        s->n_reconnects++;
        return 0;
}
