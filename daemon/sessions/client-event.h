/* SPDX-License-Identifier: MIT */
/*
 * ClientEvent: an event a client created, with the semantics of KFD signal
 * events (kfd_events.c, kfd-facts §1.10): an age that starts at 1 and grows
 * by one per signal (skipping 0 and 1 on wrap), auto-reset events that stay
 * signaled only if nobody was waiting, waits on any or all events with
 * last_event_age to close the check-then-sleep race, timeouts 0 = poll and
 * 0xFFFFFFFF = forever, and FAIL when an event is destroyed under a waiter.
 *
 * Waits never block the event loop: an EventWait is a pending request with a
 * timer; it is answered when its condition holds, when it times out or when
 * one of its events is destroyed. ClientEvents are reference counted (jobs
 * and waits hold references); the owning Session's handle table holds one.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "scheduler/sched-job.h"
#include "sessions/forward.h"
#include "util/macro.h"
#include "util/list.h"
#include "wire/wire.h"

typedef struct EventWaiter {
        EventWait *wait;
        ClientEvent *event; /* reference */
        bool activated;
        bool age_enabled;
        uint64_t age; /* reported back */
        LIST_FIELDS(struct EventWaiter, waiters);
} EventWaiter;

struct ClientEvent {
        SchedEvent sched;   /* signaled, auto_reset, destroyed, and its signal jobs on the GPU */
        unsigned n_ref;
        Session *session; /* owner; NULL once destroyed */
        uint64_t handle;
        uint32_t slot;
        uint64_t age;
        LIST_HEAD(EventWaiter, waiters);
};

static inline ClientEvent *client_event_from_sched(SchedEvent *e) {
        return container_of(e, ClientEvent, sched);
}

struct EventWait {
        Session *session; /* weak: the session cancels its waits before it goes */
        uint64_t request_id;
        bool wait_all;
        size_t n;
        EventWaiter *waiters; /* array of n */
        sd_event_source *timer;
        LIST_FIELDS(EventWait, waits);
};

ClientEvent *client_event_new(Session *s, bool auto_reset);
ClientEvent *client_event_ref(ClientEvent *e);
ClientEvent *client_event_unref(ClientEvent *e);

/* set_event(): age++, signaled = !auto_reset || no waiters, activate waiters.
 * consumed: a GPU wait already took this signal (counts as a waiter). */
void client_event_signal(ClientEvent *e, bool consumed);
void client_event_reset(ClientEvent *e);
/* Marks it destroyed, fails the waits on it. The caller drops its reference. */
void client_event_destroy(ClientEvent *e);

/*
 * Starts a WaitEvents request. The events are already looked up (references
 * taken by this call). Replies immediately when the condition holds or the
 * timeout is 0; otherwise the wait is linked into the session's list and
 * answered later. Returns 0 or a negative errno (then nothing was sent).
 */
int event_wait_start(Session *s, uint64_t request_id, ClientEvent **events,
                     const WireWaitEntry *entries, size_t n, bool wait_all, uint32_t timeout_ms);
/* Frees a wait without replying (session going away). */
void event_wait_cancel(EventWait *w);
