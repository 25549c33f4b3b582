/* SPDX-License-Identifier: MIT */
/*
 * Making a session's page (session-page.h) and handing it out: at Hello, or,
 * for a session whose Hello set the lazy session bit, at OpenSessionPage
 * (docs/protocol.md "Lazy sessions").
 *
 * Why lazy: at 2000 idle sessions each cost the daemon 15 KiB of RSS, 12 of
 * them in three shared pages (the session page, the submit ring's first
 * page and the fence page, which libkfdbroker opened at Hello) and 5 fds
 * (bench-sessions); before those came, a session cost 5.2 KiB. A client
 * that opens each only when it first needs it costs the daemon its socket
 * and its Session until then.
 *
 * The daemon keeps the memfd only until the reply that hands it out is
 * queued (the reply holds a copy until the client reads it): its own
 * mapping is all it writes through, so a session holds one fd for its page,
 * the eventfd.
 */
#include <errno.h>
#include <string.h>

#include "sessions/client-event.h"
#include "sessions/session.h"
#include "util/macro.h"

/* Held while the page is made (its memfd and eventfd), and the copies the
 * reply holds until the client reads it. */
#define PAGE_FDS_AT_OPEN 4u

int session_page_make(Session *s, uint64_t id, const char *what, bool check_fds) {
        int r;

        if (check_fds && !session_check_fds(s, id, PAGE_FDS_AT_OPEN, what))
                return -EDQUOT;
        r = session_page_open(&s->page);
        if (r < 0) {
                session_send_error(s, id, -r, "%s: cannot make the session page: %s", what, strerror(-r));
                return r;
        }
        session_account_fds(s, 2);
        /* The header was kept meanwhile; the events live now go in too. */
        for (uint32_t i = 0; i < s->events.n_alloc; i++) {
                ClientEvent *e = handle_table_slot(&s->events, i);

                if (e && !e->sched.destroyed)
                        session_page_set_event(&s->page, e->slot, e->age, e->sched.signaled, true);
        }
        return 0;
}

void session_page_handed_out(Session *s) {
        if (s->page.memfd < 0)
                return;
        s->page.memfd = safe_close(s->page.memfd);
        session_account_fds(s, -1);
}

void session_open_session_page(Session *s, const WireRequest *req) {
        if (s->page.page) {
                session_send_error(s, req->id, EEXIST,
                                   "open_session_page: this session has its session page already%s",
                                   s->lazy ? "" : " (it came with Hello: the Hello did not ask for a lazy session)");
                return;
        }
        if (session_page_make(s, req->id, "OpenSessionPage", true) < 0)
                return;
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_OPEN_SESSION_PAGE,
                                       .session_page = { .size = (uint32_t) KFDB_PAGE_SIZE } },
                     (int[]) { s->page.memfd, s->page.eventfd }, 2);
        session_page_handed_out(s);
}
