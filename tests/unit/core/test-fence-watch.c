/* SPDX-License-Identifier: MIT */
/*
 * FenceWatch (daemon/sessions/fence-watch.h) on its own: the waiter thread's
 * look writes a session's eventfd once when the slot of its armed fence says
 * done, and never for a slot that says something else, a disarmed entry or
 * a removed one; and entries come and go while another thread looks.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fence-page.h"
#include "sessions/fence-watch.h"

typedef struct Page {
        uint32_t slots[KFDB_FENCE_PAGE_SLOTS];
        int efd;
        FenceWatchEntry e;
} Page;

static void page_init(Page *p) {
        for (uint32_t i = 0; i < KFDB_FENCE_PAGE_SLOTS; i++)
                p->slots[i] = kfdb_fence_page_fresh_slot(i);
        p->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        cr_assert_geq(p->efd, 0);
        fence_watch_entry_init(&p->e, p->slots, KFDB_FENCE_PAGE_SLOTS, p->efd);
}

/* What the eventfd counted since the last read (0: nothing). */
static uint64_t taken(const Page *p) {
        uint64_t v = 0;

        return read(p->efd, &v, sizeof v) == sizeof v ? v : 0;
}

static void engine_writes(Page *p, uint64_t fence) {
        __atomic_store_n(&p->slots[kfdb_fence_page_slot(fence, KFDB_FENCE_PAGE_SLOTS)], (uint32_t) fence,
                         __ATOMIC_RELEASE);
}

Test(fence_watch, the_armed_fence_done_wakes_the_client_once) {
        FenceWatch w;
        Page p;

        fence_watch_init(&w);
        page_init(&p);
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&p), 0u, "nothing armed: no wake-up");

        fence_watch_arm(&w, &p.e, 7);
        cr_expect_eq(w.entries, &p.e, "armed: on the watch");
        engine_writes(&p, 6);
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&p), 0u, "fence 6 done says nothing of 7");
        fence_watch_arm(&w, &p.e, 8);
        engine_writes(&p, 7);
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&p), 0u, "armed again at 8: 7 done says nothing");
        engine_writes(&p, 8);
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&p), 1u, "fence 8 done: one write");
        cr_expect_eq(atomic_load(&w.wakes), 1u);
        cr_expect_null(w.entries, "off the watch after its wake-up");
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&p), 0u);

        fence_watch_remove(&w, &p.e); /* not on the watch: nothing to do */
        close(p.efd);
        fence_watch_done(&w);
}

Test(fence_watch, a_slot_a_later_fence_wrote_does_not_wake) {
        FenceWatch w;
        Page p;

        fence_watch_init(&w);
        page_init(&p);
        fence_watch_arm(&w, &p.e, 5);
        engine_writes(&p, 5 + KFDB_FENCE_PAGE_SLOTS);
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&p), 0u, "slot 5 holds fence 1029: not 5");
        /* The client's own scribbles make only its eventfd written. */
        p.slots[5] = 5;
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&p), 1u);

        fence_watch_remove(&w, &p.e);
        close(p.efd);
        fence_watch_done(&w);
}

Test(fence_watch, only_the_entries_on_the_watch_are_looked_at) {
        FenceWatch w;
        Page a, b, c;

        fence_watch_init(&w);
        page_init(&a);
        page_init(&b);
        page_init(&c);
        fence_watch_arm(&w, &a.e, 3);
        fence_watch_arm(&w, &b.e, 9);
        engine_writes(&a, 3);
        engine_writes(&b, 9);
        engine_writes(&c, 1); /* never armed */
        fence_watch_remove(&w, &b.e);
        fence_watch_on_events(&w);
        cr_expect_eq(taken(&a), 1u);
        cr_expect_eq(taken(&b), 0u, "a removed entry is not woken");
        cr_expect_eq(taken(&c), 0u, "an entry never armed is not looked at");
        cr_expect_null(w.entries);

        close(a.efd);
        close(b.efd);
        close(c.efd);
        fence_watch_done(&w);
}

typedef struct Looker {
        FenceWatch *w;
        atomic_bool stop;
        unsigned long looks;
} Looker;

static void *look_on(void *userdata) {
        Looker *l = userdata;

        while (!atomic_load(&l->stop)) {
                fence_watch_on_events(l->w);
                l->looks++;
        }
        return NULL;
}

/* The event loop adds, arms and removes entries while the waiter thread
 * looks: after fence_watch_remove() the entry's memory and eventfd may go at
 * once (ASan would see a look at freed memory). */
Test(fence_watch, entries_come_and_go_while_the_waiter_looks) {
        FenceWatch w;
        Looker l = { .w = &w };
        pthread_t t;
        uint64_t woken = 0, before;

        fence_watch_init(&w);
        cr_assert_eq(pthread_create(&t, NULL, look_on, &l), 0);
        for (uint64_t i = 1; i <= 1000; i++) {
                Page *p = malloc(sizeof *p);

                cr_assert_not_null(p);
                page_init(p);
                engine_writes(p, i);
                before = atomic_load(&w.wakes);
                fence_watch_arm(&w, &p->e, i);
                if (i % 2) /* the only entry on the watch: the looker takes it (perhaps on this CPU) */
                        while (atomic_load(&w.wakes) == before)
                                sched_yield();
                fence_watch_remove(&w, &p->e);
                woken += taken(p);
                close(p->efd);
                free(p);
        }
        atomic_store(&l.stop, true);
        pthread_join(t, NULL);
        cr_expect_geq(woken, 500u, "every entry waited for was woken: %llu", (unsigned long long) woken);
        cr_expect_eq(woken, atomic_load(&w.wakes));
        cr_expect_gt(l.looks, 0u);
        fence_watch_done(&w);
}
