/* SPDX-License-Identifier: MIT */
/*
 * The session page, client side: checked and mapped at Hello, or — in a lazy
 * session (the daemon offers "lazy-session" and KFDBROKER_LAZY_SESSION is
 * not 0; docs/protocol.md "Lazy sessions") — when first needed: the page
 * and its eventfd (OpenSessionPage) before the first event, the first
 * submit or kfdb_get_event_fd(); the submit ring and the fence page before
 * the first submit. Until then the session costs the daemon its socket and
 * little else: a program that connects and waits, or only allocates
 * buffers, makes it hold no page, eventfd, ring or fence page.
 *
 * Without a page no job of this connection was submitted, so every fence
 * handed out (those of a session before a daemon restart, resume_fence) is
 * complete: session_completed_fence() says s->last_fence.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client-session.h"

int session_map_page(kfdb_session *s, int page_fd, uint32_t page_size) {
        const size_t header = offsetof(KfdbSessionPage, events);
        const KfdbSessionPage *page;
        struct stat st;
        uint32_t size, max_events;
        void *p;

        if (page_size < header || page_size > (64u << 20))
                return session_error(s, -EPROTO, "session page size %u is not plausible",
                                     page_size);
        if (fstat(page_fd, &st) < 0)
                return session_error(s, -errno, "cannot stat the session page: %m");
        if (st.st_size < (off_t) page_size)
                return session_error(s, -EPROTO, "session page fd holds %lld bytes, Hello said %u",
                                     (long long) st.st_size, page_size);
        p = mmap(NULL, page_size, PROT_READ, MAP_SHARED, page_fd, 0);
        if (p == MAP_FAILED)
                return session_error(s, -errno, "cannot map the session page: %m");
        s->page = page = p;
        s->page_size = page_size;

        if (session_page_load_u32(&page->magic) != KFDB_PAGE_MAGIC)
                return session_error(s, -EPROTO, "session page has magic 0x%08x, expected 0x%08x",
                                     page->magic, KFDB_PAGE_MAGIC);
        if (session_page_load_u32(&page->version) != KFDB_PAGE_VERSION)
                return session_error(s, -EPROTO, "session page has layout version %u, expected %u",
                                     page->version, KFDB_PAGE_VERSION);
        size = session_page_load_u32(&page->size);
        max_events = session_page_load_u32(&page->max_events);
        if (max_events > KFDB_PAGE_MAX_EVENTS)
                return session_error(s, -EPROTO, "session page lists %u events, at most %u allowed",
                                     max_events, KFDB_PAGE_MAX_EVENTS);
        if (size > page_size || size < header + (size_t) max_events * sizeof(KfdbPageEvent))
                return session_error(s, -EPROTO,
                                     "session page says it is %u bytes (%u events), mapped %u",
                                     size, max_events, page_size);
        return 0;
}

int session_page_need(kfdb_session *s) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_OPEN_SESSION_PAGE };
        int k;

        if (s->page)
                return 0;
        if (!s->lazy) {
                /* Neither a page nor a lazy session: a reconnect that failed
                 * half way. Another try gives one or the other. */
                k = session_recover(s, -ECONNRESET);
                if (k < 0)
                        return k;
                if (s->page)
                        return 0;
                if (!s->lazy)
                        return session_error(s, -ENOTCONN, "the session has no session page: it is not connected");
        }
        k = session_call(s, &req, NULL, 0, &r);
        /* A reconnect on the way may have brought a daemon that gives the page at Hello. */
        if (k < 0)
                return s->page ? 0 : k;
        if (s->page)
                return 0;
        k = session_map_page(s, r->fds[0], r->session_page.size);
        if (k < 0) {
                /* Not a page to read: the session goes on without one. */
                if (s->page)
                        munmap((void *) s->page, s->page_size);
                s->page = NULL;
                return k;
        }
        /* A number the caller may hold already (kfdb_get_event_fd() before a
         * daemon restart) stays the session's eventfd. */
        if (s->event_fd >= 0) {
                if (dup3(r->fds[1], s->event_fd, O_CLOEXEC) < 0)
                        return session_error(s, -errno, "cannot keep the eventfd's number: %m");
                return 0;
        }
        s->event_fd = TAKE_FD(r->fds[1]);
        return 0;
}

int session_submit_need(kfdb_session *s) {
        int k;

        if (s->submit_ready)
                return 0;
        k = session_page_need(s);
        if (k < 0)
                return k;
        k = session_ring_open(s);
        if (k < 0)
                return k;
        k = session_fence_page_open(s);
        if (k < 0)
                return k;
        s->submit_ready = true;
        return 0;
}
