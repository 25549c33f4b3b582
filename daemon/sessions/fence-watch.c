/* SPDX-License-Identifier: MIT */
/*
 * FenceWatch (fence-watch.h): the device context's waiter thread wakes
 * clients whose last copy or fill its engine has finished.
 */
#include <assert.h>
#include <errno.h>
#include <unistd.h>

#include "fence-page.h"
#include "sessions/fence-watch.h"

void fence_watch_init(FenceWatch *w) {
        *w = (FenceWatch) {};
        pthread_mutex_init(&w->lock, NULL);
}

void fence_watch_done(FenceWatch *w) {
        assert(!w->entries);
        pthread_mutex_destroy(&w->lock);
}

void fence_watch_entry_init(FenceWatchEntry *e, const uint32_t *slots, uint32_t n_slots, int eventfd) {
        *e = (FenceWatchEntry) { .slots = slots, .n_slots = n_slots, .eventfd = eventfd };
}

void fence_watch_arm(FenceWatch *w, FenceWatchEntry *e, uint64_t fence) {
        if (fence == 0)
                return;
        pthread_mutex_lock(&w->lock);
        if (e->armed == 0)
                LIST_PREPEND(entries, w->entries, e);
        e->armed = fence;
        pthread_mutex_unlock(&w->lock);
}

static void disarm(FenceWatch *w, FenceWatchEntry *e) {
        LIST_REMOVE(entries, w->entries, e);
        e->armed = 0;
}

void fence_watch_remove(FenceWatch *w, FenceWatchEntry *e) {
        pthread_mutex_lock(&w->lock);
        if (e->armed != 0)
                disarm(w, e);
        pthread_mutex_unlock(&w->lock);
}

void fence_watch_on_events(void *userdata) {
        FenceWatch *w = userdata;
        FenceWatchEntry *e, *next;

        pthread_mutex_lock(&w->lock);
        LIST_FOREACH_SAFE(entries, e, next, w->entries) {
                uint32_t v = __atomic_load_n(&e->slots[kfdb_fence_page_slot(e->armed, e->n_slots)], __ATOMIC_ACQUIRE);
                uint64_t one = 1;

                if (!kfdb_fence_page_says_done(v, e->armed))
                        continue;
                disarm(w, e);
                /* EAGAIN: the counter is saturated, the client is woken anyway. */
                while (write(e->eventfd, &one, sizeof one) < 0 && errno == EINTR)
                        ;
                atomic_fetch_add_explicit(&w->wakes, 1, memory_order_relaxed);
        }
        pthread_mutex_unlock(&w->lock);
}
