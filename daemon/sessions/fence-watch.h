/* SPDX-License-Identifier: MIT */
/*
 * FenceWatch: wakes a client sleeping on its fence page one thread hop
 * earlier. Without it, a copy's or fill's completion reaches a client that
 * sleeps in poll() on its session eventfd through four threads: the engine
 * (its TRAP), the device context's WAIT_EVENTS waiter, the event loop (which
 * retires the job, updates the session page and writes the eventfd) and the
 * client. The engine has written the job's fence page slot before its TRAP,
 * so the waiter itself can look at the slot and write the eventfd: engine,
 * waiter, client — the in-process floor's path (issue 13: "completion
 * reaching the main loop in one hop"; on the 2-core simulator machine a
 * wake-up costs 8 us between busy CPUs and 35-45 us across an idle one).
 *
 * Each session with a fence page has an entry: its page's slots (the daemon's
 * CPU mapping of the GTT page), its eventfd, and the fence it is armed at —
 * the last copy or fill of the session given a slot write
 * (session_fence_page_track()), armed once per submission. Only armed
 * entries are on the watch, so what the waiter looks through is the sessions
 * with such a job unfinished, not every session. The device context calls
 * fence_watch_on_events() on its waiter thread after every wait that returned
 * with an event; an entry whose armed fence's slot says done gets one write
 * to its eventfd and leaves the watch. Only the last submitted fence is
 * watched: a client waiting for an earlier one is woken by the event loop,
 * as before.
 *
 * The watch only adds wake-ups: the loop still writes the eventfd when the
 * session page changes (the page stays the one authority, proto/fence-page.h,
 * and a client waiting for a fence whose slot a later job reused needs it), so
 * a client the watch woke finds the loop's write at its next sleep and looks
 * once more. A client may map its page writable and write its slots: that
 * makes the watch write its own eventfd, nothing else.
 *
 * Threads: the event loop arms and removes entries, and the waiter thread
 * disarms them, all under the watch's lock, which the waiter holds while it
 * looks (for as many entries as are armed). The slots stay mapped while their
 * entry is on the watch: a session's fence page is a buffer of the device
 * context, which is never given up before the daemon exits (context.c,
 * context_drop(): a lost one stays, refusing work), and the session takes its
 * entry off before it
 * lets go of the page.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/list.h"

typedef struct FenceWatchEntry FenceWatchEntry;

struct FenceWatchEntry {
        const uint32_t *slots; /* the fence page, n_slots of them */
        uint32_t n_slots;
        int eventfd;           /* the session's; the entry goes before it is closed */
        /* Under the watch's lock: */
        uint64_t armed;        /* fence to wake the client at; 0: none, and not on the watch */
        LIST_FIELDS(FenceWatchEntry, entries);
};

typedef struct FenceWatch {
        pthread_mutex_t lock;
        LIST_HEAD(FenceWatchEntry, entries); /* the armed ones */
        _Atomic uint64_t wakes; /* eventfd writes made (tests read it) */
} FenceWatch;

void fence_watch_init(FenceWatch *w);
/* Every entry must be gone, and every context calling on_events with it. */
void fence_watch_done(FenceWatch *w);

/* A disarmed entry for a session's fence page and eventfd. */
void fence_watch_entry_init(FenceWatchEntry *e, const uint32_t *slots, uint32_t n_slots, int eventfd);

/* The client is to be woken once fence's slot says it is done (fence > 0);
 * puts e on the watch if it is not. */
void fence_watch_arm(FenceWatch *w, FenceWatchEntry *e, uint64_t fence);
/* Takes e off the watch if it is there: after this returns, the waiter
 * thread no longer looks at it. */
void fence_watch_remove(FenceWatch *w, FenceWatchEntry *e);

/* GpuContextOptions.on_events of the device context (userdata: the watch). */
void fence_watch_on_events(void *userdata);
