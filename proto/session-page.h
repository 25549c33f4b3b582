/* SPDX-License-Identifier: MIT */
/*
 * The session page: a memfd the daemon writes and each client maps read-only
 * (sealed with F_SEAL_FUTURE_WRITE|F_SEAL_SHRINK|F_SEAL_GROW|F_SEAL_SEAL), given
 * at Hello with an eventfd that the daemon signals after every change. It lets
 * a client see completions and event ages without a round trip.
 *
 * Layout version 1. All fields little-endian, naturally aligned, written with
 * release stores and read with acquire loads. A reader that needs several
 * fields consistent reads `seq` before and after (even and unchanged = stable).
 */
#pragma once

#include <stdint.h>

#define KFDB_PAGE_MAGIC 0x4244464bu /* "KFDB" */
#define KFDB_PAGE_VERSION 1u
#define KFDB_PAGE_MAX_EVENTS 1024u

typedef struct KfdbPageEvent {
        uint64_t age;      /* KFD event age: 1 at creation, +1 (skipping 0 and 1) per signal */
        uint32_t signaled; /* 1 while signaled */
        uint32_t live;     /* 1 while the slot holds an event */
} KfdbPageEvent;

typedef struct KfdbSessionPage {
        uint32_t magic;
        uint32_t version;
        uint32_t size;           /* bytes of this page */
        uint32_t max_events;     /* entries in events[] */
        uint64_t seq;            /* odd while the daemon is writing */
        uint64_t completed_fence; /* every job with fence <= this has finished */
        uint64_t submitted_fence; /* last fence handed out */
        uint64_t jobs_failed;
        uint64_t last_failed_fence;
        uint64_t context_lost;   /* bumped when a GPU fault or reset failed jobs */
        uint64_t max_jobs_in_flight; /* the session's limit now (SetLimits may change it); 0: not said */
        uint64_t reserved[7];
        KfdbPageEvent events[KFDB_PAGE_MAX_EVENTS];
} KfdbSessionPage;

#define KFDB_PAGE_SIZE ((sizeof(KfdbSessionPage) + 4095u) & ~4095u)
