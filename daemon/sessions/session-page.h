/* SPDX-License-Identifier: MIT */
/*
 * SessionPage: the daemon side of a session's read-only shared page
 * (proto/session-page.h) and its eventfd. Owned by one Session. The daemon
 * maps the memfd read-write before sealing it with F_SEAL_FUTURE_WRITE, so the
 * client can only map it read-only; writes are bracketed by the page's seq
 * counter and followed by one eventfd signal per batch of changes.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "../../proto/session-page.h" /* the layout is part of the protocol */

typedef struct SessionPage {
        int memfd;
        int eventfd;
        KfdbSessionPage *page;
        bool dirty;
} SessionPage;

int session_page_init(SessionPage *p);
void session_page_done(SessionPage *p);

/* Field updates; each marks the page dirty. */
void session_page_set_fences(SessionPage *p, uint64_t completed, uint64_t submitted);
void session_page_job_failed(SessionPage *p, uint64_t fence);
/* The session's GPU context was lost (a fault or a reset): +1. */
void session_page_context_lost(SessionPage *p);
/* The session's max_jobs_in_flight now (a submit ring client checks it). */
void session_page_set_jobs_limit(SessionPage *p, uint64_t max_jobs_in_flight);
void session_page_set_event(SessionPage *p, uint32_t slot, uint64_t age, bool signaled, bool live);
/* Signals the eventfd once if anything changed since the last flush. */
void session_page_flush(SessionPage *p);
