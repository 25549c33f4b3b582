/* SPDX-License-Identifier: MIT */
/*
 * See client-event.h. The semantics follow the kernel's kfd_events.c
 * (set_event, init_event_waiter, test_event_condition,
 * copy_signaled_event_data) as summarised in kfd-facts §1.10, applied to
 * daemon-side objects so that waiting never blocks the loop.
 */
#include "sessions/client-event.h"

#include <errno.h>
#include <stdlib.h>

#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"

ClientEvent *client_event_new(Session *s, bool auto_reset) {
        ClientEvent *e = calloc(1, sizeof(*e));

        if (!e)
                return NULL;
        e->n_ref = 1;
        e->session = s;
        e->sched.auto_reset = auto_reset;
        e->age = 1; /* kfd_events.c: events start with event_age = 1 */
        return e;
}

ClientEvent *client_event_ref(ClientEvent *e) {
        if (e)
                e->n_ref++;
        return e;
}

ClientEvent *client_event_unref(ClientEvent *e) {
        if (!e || --e->n_ref > 0)
                return NULL;
        free(e);
        return NULL;
}

static void publish(ClientEvent *e) {
        if (e->session && !e->sched.destroyed)
                session_page_set_event(&e->session->page, e->slot, e->age, e->sched.signaled, true);
}

static void event_wait_check(EventWait *w);

void client_event_signal(ClientEvent *e, bool consumed) {
        EventWaiter *w, *n;
        bool waiters;

        if (e->sched.destroyed)
                return;
        /* kfd_events.c set_event(): age wraps past 0 and 1, which are reserved. */
        e->age++;
        if (e->age < 2)
                e->age = 2;
        waiters = consumed || e->waiters;
        e->sched.signaled = !e->sched.auto_reset || !waiters;
        publish(e);

        LIST_FOREACH_SAFE(waiters, w, n, e->waiters) {
                w->activated = true;
                w->age = e->age;
        }
        /* Checking may free waits (and unlink waiters), so iterate a snapshot. */
        while (e->waiters) {
                EventWait *wait = e->waiters->wait;
                LIST_REMOVE(waiters, e->waiters, e->waiters);
                event_wait_check(wait);
        }
}

void client_event_reset(ClientEvent *e) {
        if (e->sched.destroyed || !e->sched.signaled)
                return;
        e->sched.signaled = false;
        publish(e);
}

static void event_wait_reply(EventWait *w, WireWaitResult result);

void client_event_destroy(ClientEvent *e) {
        if (e->sched.destroyed)
                return;
        if (e->session)
                session_page_set_event(&e->session->page, e->slot, e->age, false, false);
        e->sched.destroyed = true;
        e->session = NULL;
        /* kfd_wait_on_events: an event destroyed under a waiter ends the wait with FAIL. */
        while (e->waiters) {
                EventWait *wait = e->waiters->wait;
                LIST_REMOVE(waiters, e->waiters, e->waiters);
                event_wait_reply(wait, WIRE_WAIT_FAIL);
        }
}

/* ---- WaitEvents ---- */

static void event_wait_free(EventWait *w) {
        if (!w)
                return;
        for (size_t i = 0; i < w->n; i++) {
                EventWaiter *x = &w->waiters[i];
                if (x->event) {
                        /* Unlink if still waiting on this event. */
                        EventWaiter *it;
                        LIST_FOREACH(waiters, it, x->event->waiters)
                                if (it == x) {
                                        LIST_REMOVE(waiters, x->event->waiters, x);
                                        break;
                                }
                        client_event_unref(x->event);
                }
        }
        sd_event_source_disable_unref(w->timer);
        if (w->session) {
                LIST_REMOVE(waits, w->session->waits, w);
                w->session->n_waits--;
        }
        free(w->waiters);
        free(w);
}

void event_wait_cancel(EventWait *w) {
        event_wait_free(w);
}

static bool condition_met(const EventWait *w) {
        size_t activated = 0;

        for (size_t i = 0; i < w->n; i++)
                if (w->waiters[i].activated)
                        activated++;
        return w->wait_all ? activated == w->n : activated > 0;
}

static void event_wait_reply(EventWait *w, WireWaitResult result) {
        _cleanup_free_ WireWaitEntry *entries = calloc(w->n, sizeof(*entries));
        Session *s = w->session;

        if (s && entries) {
                /* copy_signaled_event_data: ages go back for age-tracking waiters;
                 * we report the current age of every event, which is a superset. */
                for (size_t i = 0; i < w->n; i++) {
                        entries[i].handle = w->waiters[i].event->handle;
                        entries[i].last_event_age = w->waiters[i].event->age;
                }
                session_send(s, &(WireReply) {
                                        .id = w->request_id,
                                        .type = WIRE_REPLY_WAIT_EVENTS,
                                        .wait_events = { .result = result,
                                                         .entries = entries,
                                                         .n_entries = w->n },
                                },
                             NULL, 0);
                session_flush(s);
        } else if (s)
                session_send_error(s, w->request_id, ENOMEM, "out of memory replying to WaitEvents");
        event_wait_free(w);
}

static void event_wait_check(EventWait *w) {
        if (condition_met(w))
                event_wait_reply(w, WIRE_WAIT_COMPLETE);
}

static int on_wait_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        EventWait *w = userdata;

        /* Roll back nothing: auto-reset consumption by activated waiters stands,
         * as in the kernel for a timed-out wait_all. */
        event_wait_reply(w, WIRE_WAIT_TIMEOUT);
        return 0;
}

int event_wait_start(Session *s, uint64_t request_id, ClientEvent **events,
                     const WireWaitEntry *entries, size_t n, bool wait_all, uint32_t timeout_ms) {
        EventWait *w;
        int r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->waiters = calloc(n, sizeof(*w->waiters));
        if (!w->waiters) {
                free(w);
                return -ENOMEM;
        }
        w->session = s;
        w->request_id = request_id;
        w->wait_all = wait_all;
        w->n = n;
        LIST_PREPEND(waits, s->waits, w);
        s->n_waits++;

        /* init_event_waiter(): activated if signaled (auto-reset consumed), or if
         * age tracking is on and the age moved since the caller last looked. */
        for (size_t i = 0; i < n; i++) {
                EventWaiter *x = &w->waiters[i];
                ClientEvent *e = events[i];

                x->wait = w;
                x->event = client_event_ref(e);
                x->activated = e->sched.signaled;
                if (e->sched.signaled && e->sched.auto_reset) {
                        e->sched.signaled = false;
                        publish(e);
                }
                if (entries[i].last_event_age != 0) {
                        x->age_enabled = true;
                        if (e->age != entries[i].last_event_age)
                                x->activated = true;
                }
                x->age = e->age;
        }

        if (condition_met(w)) {
                event_wait_reply(w, WIRE_WAIT_COMPLETE);
                return 0;
        }
        if (timeout_ms == 0) {
                event_wait_reply(w, WIRE_WAIT_TIMEOUT);
                return 0;
        }

        for (size_t i = 0; i < n; i++)
                if (!w->waiters[i].activated)
                        LIST_PREPEND(waiters, events[i]->waiters, &w->waiters[i]);

        if (timeout_ms != UINT32_MAX) {
                r = sd_event_add_time_relative(s->set->event, &w->timer, CLOCK_MONOTONIC,
                                               (uint64_t) timeout_ms * 1000, 1000,
                                               on_wait_timeout, w);
                if (r < 0) {
                        event_wait_free(w);
                        return r;
                }
                (void) sd_event_source_set_description(w->timer, "wait-events-timeout");
        }
        return 0;
}
