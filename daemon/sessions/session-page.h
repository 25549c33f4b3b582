/* SPDX-License-Identifier: MIT */
/*
 * SessionPage: the daemon side of a session's read-only shared page
 * (proto/session-page.h) and its eventfd. Owned by one Session. The daemon
 * maps the memfd read-write before sealing it with F_SEAL_FUTURE_WRITE, so the
 * client can only map it read-only; writes are bracketed by the page's seq
 * counter and followed by one eventfd signal per batch of changes.
 *
 * The page and the eventfd are made by session_page_open(): at Hello, or for
 * a lazy session (docs/protocol.md "Lazy sessions") at OpenSessionPage, so an
 * idle one costs neither (two fds and a shared page each: 12 of an idle
 * session's 15 KiB were such pages, bench-sessions). Until then the header
 * fields are kept here and written into the page when it is made; event
 * slots are the owner's to write then (session_page_set_event()).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../../proto/session-page.h" /* the layout is part of the protocol */

typedef struct SessionPage {
        int memfd;
        int eventfd;
        KfdbSessionPage *page; /* NULL until session_page_open() */
        bool dirty;
        /* What the header says, also while there is no page. */
        uint64_t completed_fence, submitted_fence, jobs_failed, last_failed_fence, context_lost;
        uint64_t max_jobs_in_flight;
} SessionPage;

/* No page yet: the fields start at 0, the fds at -EBADF. */
void session_page_init(SessionPage *p);
/* Makes the memfd, maps and seals it, writes the header as it stands, and
 * makes the eventfd. -EEXIST if it was made already; else 0 or a negative
 * errno (nothing was made then). */
int session_page_open(SessionPage *p);
void session_page_done(SessionPage *p);

/* Field updates; each marks the page dirty. Without a page, the header's are
 * kept for it and event slots go nowhere. */
void session_page_set_fences(SessionPage *p, uint64_t completed, uint64_t submitted);
void session_page_job_failed(SessionPage *p, uint64_t fence);
/* The session's GPU context was lost (a fault or a reset): +1. */
void session_page_context_lost(SessionPage *p);
/* The session's max_jobs_in_flight now (a submit ring client checks it). */
void session_page_set_jobs_limit(SessionPage *p, uint64_t max_jobs_in_flight);
void session_page_set_event(SessionPage *p, uint32_t slot, uint64_t age, bool signaled, bool live);
/* Signals the eventfd once if anything changed since the last flush (none
 * without a page). */
void session_page_flush(SessionPage *p);
