/* SPDX-License-Identifier: MIT */
/*
 * Events with KFD semantics: CreateEvent / DestroyEvent / SetEvent /
 * ResetEvent / WaitEvents through the daemon, and age and state read from the
 * session page without a round trip.
 */
#include <errno.h>
#include <stdlib.h>

#include "client-event.h"

static void event_release(ClientObject *o) {
        kfdb_event *e = (kfdb_event *) o;

        session_object_unlink(&e->object);
        free(e);
}

static int event_call(kfdb_event *e, ClientRequestType type) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = type };

        if (!e)
                return -EINVAL;
        req.object.handle = e->handle;
        return session_call(e->session, &req, NULL, 0, &r);
}

/* CreateEvent: the handle and page slot of a new event. */
static int event_make(kfdb_session *s, bool auto_reset, uint64_t *ret_handle, uint32_t *ret_slot) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_CREATE_EVENT };
        int k;

        *ret_handle = 0; /* also on error: gcc -O3 cannot see that the error is negative */
        *ret_slot = 0;
        req.create_event.auto_reset = auto_reset;
        /* Its state is read from the session page: a lazy session makes it now. */
        k = session_page_need(s);
        if (k < 0)
                return k;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        if (r->create_event.slot >= session_page_load_u32(&s->page->max_events)) {
                req = (ClientRequest) { .type = CLIENT_REQUEST_DESTROY_EVENT,
                                        .object.handle = r->create_event.handle };
                client_reply_free(TAKE_PTR(r));
                (void) session_call(s, &req, NULL, 0, &r);
                return session_error(s, -EBADMSG,
                                     "kfdbrokerd gave the event a slot outside the session page");
        }
        *ret_handle = r->create_event.handle;
        *ret_slot = r->create_event.slot;
        return 0;
}

/* After a daemon restart: a new event, unsignaled, in a new slot. */
static int event_restore(ClientObject *o, ClientHandleMap *map) {
        kfdb_event *e = (kfdb_event *) o;
        uint64_t old = e->handle;
        int k;

        e->handle = 0;
        e->slot = UINT32_MAX;
        k = event_make(e->session, e->auto_reset, &e->handle, &e->slot);
        if (k < 0)
                return k;
        return client_handle_map_add(map, old, e->handle);
}

int kfdb_event_create(kfdb_session *s, bool auto_reset, kfdb_event **ret) {
        uint64_t handle;
        uint32_t slot;
        kfdb_event *e;
        int k;

        if (!s || !ret)
                return -EINVAL;
        k = event_make(s, auto_reset, &handle, &slot);
        if (k < 0)
                return k;
        e = calloc(1, sizeof(*e));
        if (!e) {
                ClientRequest req = { .type = CLIENT_REQUEST_DESTROY_EVENT, .object.handle = handle };
                _cleanup_(client_reply_freep) ClientReply *r = NULL;

                (void) session_call(s, &req, NULL, 0, &r);
                return -ENOMEM;
        }
        e->session = s;
        e->handle = handle;
        e->slot = slot;
        e->auto_reset = auto_reset;
        session_object_link(s, &e->object, event_release, event_restore, false);
        *ret = e;
        return 0;
}

int kfdb_event_destroy(kfdb_event *e) {
        int k;

        if (!e)
                return 0;
        k = event_call(e, CLIENT_REQUEST_DESTROY_EVENT);
        event_release(&e->object);
        return k;
}

int kfdb_event_set(kfdb_event *e) {
        return event_call(e, CLIENT_REQUEST_SET_EVENT);
}

int kfdb_event_reset(kfdb_event *e) {
        return event_call(e, CLIENT_REQUEST_RESET_EVENT);
}

static const KfdbPageEvent *event_slot(const kfdb_event *e) {
        const KfdbSessionPage *page = e->session->page;

        /* None: a reconnect could not make the page again. */
        if (!page || e->slot >= session_page_load_u32(&page->max_events))
                return NULL;
        if (!session_page_load_u32(&page->events[e->slot].live))
                return NULL;
        return &page->events[e->slot];
}

uint64_t kfdb_event_get_age(const kfdb_event *e) {
        const KfdbPageEvent *pe;

        if (!e)
                return 0;
        pe = event_slot(e);
        return pe ? session_page_load_u64(&pe->age) : 0;
}

bool kfdb_event_is_signaled(const kfdb_event *e) {
        const KfdbPageEvent *pe;

        if (!e)
                return false;
        pe = event_slot(e);
        return pe && session_page_load_u32(&pe->signaled) != 0;
}

uint64_t kfdb_event_get_handle(const kfdb_event *e) {
        return e ? e->handle : 0;
}

int kfdb_wait_events(kfdb_session *s, kfdb_wait_entry *entries, size_t n, bool wait_all,
                     int timeout_ms, kfdb_wait_result *ret_result) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        _cleanup_free_ ClientWaitEntry *wire = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_WAIT_EVENTS };
        int k;

        if (!s || !entries || !ret_result)
                return -EINVAL;
        if (n == 0 || (s->limits.max_wait_events > 0 && n > s->limits.max_wait_events))
                return session_error(s, -EINVAL, "kfdb_wait_events: %zu events, must be 1..%u", n,
                                     s->limits.max_wait_events);
        wire = calloc(n, sizeof(*wire));
        if (!wire)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (!entries[i].event || entries[i].event->session != s)
                        return session_error(s, -EINVAL,
                                             "kfdb_wait_events: entry %zu is not an event of this session",
                                             i);
                wire[i].handle = entries[i].event->handle;
                wire[i].last_event_age = entries[i].last_event_age;
        }
        req.wait_events.entries = wire;
        req.wait_events.n_entries = n;
        req.wait_events.wait_all = wait_all;
        req.wait_events.timeout_ms = timeout_ms < 0 ? UINT32_MAX : (uint32_t) timeout_ms;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        if (r->wait_events.result > KFDB_WAIT_FAIL)
                return session_error(s, -EBADMSG, "kfdbrokerd sent wait result %u",
                                     r->wait_events.result);
        /* Ages come back in request order; a daemon that sends none leaves them as they were. */
        if (r->wait_events.n_entries == n)
                for (size_t i = 0; i < n; i++)
                        entries[i].last_event_age = r->wait_events.entries[i].last_event_age;
        *ret_result = (kfdb_wait_result) r->wait_events.result;
        return 0;
}
