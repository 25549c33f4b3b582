/* SPDX-License-Identifier: MIT */
/*
 * FenceWatch (fence-watch.h): the device context's waiter thread wakes
 * clients whose last copy or fill its engine has finished.
 */
#include <assert.h>
#include <errno.h>
#include <unistd.h>

#include "../../proto/fence-page.h"
#include "sessions/fence-watch.h"

void fence_watch_init(FenceWatch *w) {
        *w = (FenceWatch) {};
        pthread_mutex_init(&w->lock, NULL);
}

void fence_watch_done(FenceWatch *w) {
        assert(!w->entries);
        pthread_mutex_destroy(&w->lock);
}

void fence_watch_add(FenceWatch *w, FenceWatchEntry *e) {
        atomic_store(&e->armed, 0);
        pthread_mutex_lock(&w->lock);
        LIST_PREPEND(entries, w->entries, e);
        pthread_mutex_unlock(&w->lock);
}

void fence_watch_remove(FenceWatch *w, FenceWatchEntry *e) {
        pthread_mutex_lock(&w->lock);
        LIST_REMOVE(entries, w->entries, e);
        pthread_mutex_unlock(&w->lock);
}

void fence_watch_arm(FenceWatchEntry *e, uint64_t fence) {
        atomic_store_explicit(&e->armed, fence, memory_order_release);
}

void fence_watch_on_events(void *userdata) {
        FenceWatch *w = userdata;
        FenceWatchEntry *e;

        pthread_mutex_lock(&w->lock);
        LIST_FOREACH(entries, e, w->entries) {
                uint64_t f = atomic_load_explicit(&e->armed, memory_order_acquire), one = 1;
                uint32_t v;

                if (f == 0)
                        continue;
                v = __atomic_load_n(&e->slots[kfdb_fence_page_slot(f, e->n_slots)], __ATOMIC_ACQUIRE);
                if (!kfdb_fence_page_says_done(v, f))
                        continue;
                /* A fence armed meanwhile stays armed. */
                if (!atomic_compare_exchange_strong(&e->armed, &f, 0))
                        continue;
                /* EAGAIN: the counter is saturated, the client is woken anyway. */
                while (write(e->eventfd, &one, sizeof one) < 0 && errno == EINTR)
                        ;
                atomic_fetch_add_explicit(&w->wakes, 1, memory_order_relaxed);
        }
        pthread_mutex_unlock(&w->lock);
}
