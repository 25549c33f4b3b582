/* SPDX-License-Identifier: MIT */
/* See session-page.h. */
#include "sessions/session-page.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/macro.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010 /* Linux 5.1, include/uapi/linux/fcntl.h */
#endif

static_assert(KFDB_PAGE_SIZE % 4096 == 0, "page size");

void session_page_init(SessionPage *p) {
        *p = (SessionPage) { .memfd = -EBADF, .eventfd = -EBADF };
}

int session_page_open(SessionPage *p) {
        _cleanup_close_ int memfd = -EBADF, efd = -EBADF;
        KfdbSessionPage *page;
        void *m;

        if (p->page)
                return -EEXIST;
        memfd = memfd_create("kfdbroker-session-page", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (memfd < 0)
                return -errno;
        if (ftruncate(memfd, KFDB_PAGE_SIZE) < 0)
                return -errno;
        m = mmap(NULL, KFDB_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
        if (m == MAP_FAILED)
                return -errno;
        /* Our writable mapping exists; from now on nobody can get another one. */
        if (fcntl(memfd, F_ADD_SEALS,
                  F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
                int r = -errno;
                munmap(m, KFDB_PAGE_SIZE);
                return r;
        }
        efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (efd < 0) {
                int r = -errno;
                munmap(m, KFDB_PAGE_SIZE);
                return r;
        }

        /* Nobody has the page yet: plain stores, seq 0. */
        page = m;
        page->magic = KFDB_PAGE_MAGIC;
        page->version = KFDB_PAGE_VERSION;
        page->size = KFDB_PAGE_SIZE;
        page->max_events = KFDB_PAGE_MAX_EVENTS;
        page->completed_fence = p->completed_fence;
        page->submitted_fence = p->submitted_fence;
        page->jobs_failed = p->jobs_failed;
        page->last_failed_fence = p->last_failed_fence;
        page->context_lost = p->context_lost;
        page->max_jobs_in_flight = p->max_jobs_in_flight;
        p->page = page;
        p->memfd = TAKE_FD(memfd);
        p->eventfd = TAKE_FD(efd);
        return 0;
}

void session_page_done(SessionPage *p) {
        if (p->page)
                munmap(p->page, KFDB_PAGE_SIZE);
        p->page = NULL;
        p->memfd = safe_close(p->memfd);
        p->eventfd = safe_close(p->eventfd);
}

static void begin(SessionPage *p) {
        atomic_store_explicit((_Atomic uint64_t *) &p->page->seq, p->page->seq + 1,
                              memory_order_release);
        atomic_thread_fence(memory_order_release);
}

static void end(SessionPage *p) {
        atomic_store_explicit((_Atomic uint64_t *) &p->page->seq, p->page->seq + 1,
                              memory_order_release);
        p->dirty = true;
}

#define STORE(field, v) atomic_store_explicit((_Atomic uint64_t *) &(field), (v), memory_order_release)

void session_page_set_fences(SessionPage *p, uint64_t completed, uint64_t submitted) {
        bool completion = p->completed_fence != completed, was_dirty = p->dirty;

        if (!completion && p->submitted_fence == submitted)
                return;
        p->completed_fence = completed;
        p->submitted_fence = submitted;
        if (!p->page)
                return;
        begin(p);
        STORE(p->page->submitted_fence, submitted);
        STORE(p->page->completed_fence, completed);
        end(p);
        /* A submission alone signals nothing: the client that submitted
         * knows (docs/protocol.md: completions, failures, event signals and
         * resets signal; issue 13 counted the spurious wake at submit). */
        if (!completion)
                p->dirty = was_dirty;
}

void session_page_job_failed(SessionPage *p, uint64_t fence) {
        p->jobs_failed++;
        p->last_failed_fence = fence;
        if (!p->page)
                return;
        begin(p);
        STORE(p->page->jobs_failed, p->jobs_failed);
        STORE(p->page->last_failed_fence, fence);
        end(p);
}

void session_page_context_lost(SessionPage *p) {
        p->context_lost++;
        if (!p->page)
                return;
        begin(p);
        STORE(p->page->context_lost, p->context_lost);
        end(p);
}

void session_page_set_jobs_limit(SessionPage *p, uint64_t max_jobs_in_flight) {
        p->max_jobs_in_flight = max_jobs_in_flight;
        /* One field nobody reads together with others: no seq, no signal. */
        if (p->page)
                STORE(p->page->max_jobs_in_flight, max_jobs_in_flight);
}

void session_page_set_event(SessionPage *p, uint32_t slot, uint64_t age, bool signaled, bool live) {
        KfdbPageEvent *e;

        if (!p->page || slot >= KFDB_PAGE_MAX_EVENTS)
                return;
        e = &p->page->events[slot];
        begin(p);
        atomic_store_explicit((_Atomic uint32_t *) &e->signaled, signaled, memory_order_release);
        atomic_store_explicit((_Atomic uint32_t *) &e->live, live, memory_order_release);
        STORE(e->age, age);
        end(p);
}

void session_page_flush(SessionPage *p) {
        uint64_t one = 1;

        if (!p->dirty)
                return;
        p->dirty = false;
        if (p->eventfd < 0)
                return;
        /* EAGAIN means the counter is saturated: the client is already woken. */
        (void) !write(p->eventfd, &one, sizeof(one));
}
