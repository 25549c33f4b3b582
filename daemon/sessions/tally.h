/* SPDX-License-Identifier: MIT */
/*
 * Tally: what the sessions of one user (uid), or of one systemd unit, hold
 * together — the bytes charged to them and the buffers and code objects they
 * keep — so that the policy's per-user and per-unit caps (UserBufferMemory=,
 * UserBuffers=, UnitBufferMemory=) hold however many sessions the user opens.
 * A session holds a reference to its user's and its unit's Tally while it
 * exists; the TallyTable (owned by the SessionSet) drops a Tally after its
 * last session, once its log rate limit has nothing left to count.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "scheduler/scheduler.h"
#include "sessions/forward.h"
#include "util/list.h"
#include "util/log-ratelimit.h"

/* A connection waiting for its turn, with the pidfd of its peer taken when
 * it was accepted (identity_peer_pidfd()). */
typedef struct TallyWaiting {
        int fd, pidfd;
        bool pidfd_exact;
} TallyWaiting;

typedef struct Tally {
        unsigned n_ref;
        char *key;             /* "uid 1000", "unit foo.service", "uid 1000 user unit bar.service" */
        uint64_t buffer_bytes; /* charged: live buffers and code objects, and freed buffers still charged */
        uint64_t objects;      /* buffers and code objects held (each keeps a daemon fd on the simulator) */
        uint64_t fds;          /* daemon fds held for its sessions (user tallies only: session-fds.c) */
        /* Of buffer_bytes (and objects, fds): freed buffers whose dma-buf
         * outlived their session, charged to the user and unit until no copy
         * is left, or until the daemon restarts where it cannot tell
         * (session-quota.c, "Kept buffers"). The Tally stays while it has any. */
        uint64_t kept_bytes;
        unsigned kept_probes;  /* of them, those with a probe (an object and an fd each) */
        uint64_t jobs;         /* unfinished jobs of its sessions (user tallies only: UserJobsInFlight=) */
        unsigned sessions;
        LogRateLimit log_limit; /* the log lines its sessions cause (per peer) */
        /* User tallies: the compute slots its sessions hold together, on each
         * GPU (SessionGpu.index): each GPU's scheduler shares its own out. */
        SchedUser sched[SESSION_MAX_GPUS];

        /* Its connections taken per second (session-admit.c): the theoretical
         * arrival time of the generic cell rate algorithm, and the
         * connections waiting for their turn, oldest first. */
        uint64_t connect_tat_ns;
        TallyWaiting *waiting;
        unsigned n_waiting, n_waiting_alloc, waiting_head;
        LIST_FIELDS(struct Tally, tallies);
} Tally;

typedef struct TallyTable {
        LIST_HEAD(Tally, tallies);
        unsigned n;
        bool closing; /* the daemon exits: a Tally goes with its last session */
} TallyTable;

/* Whether a Tally no session holds has nothing left to remember. */
bool tally_idle(const Tally *t, uint64_t now_ns);

/* Finds or creates the Tally for key; returns a new reference (-ENOMEM). */
int tally_table_get(TallyTable *t, const char *key, Tally **ret);
Tally *tally_ref(Tally *t);
/* Drops a reference. After the last one the Tally goes (logging what its rate
 * limit suppressed) once its rate-limit interval is over. NULL-safe; returns NULL. */
Tally *tally_unref(TallyTable *table, Tally *t);
/* Frees the Tallies no session holds that have nothing left to remember. */
void tally_table_prune(TallyTable *table);
/* Frees every Tally no session holds; the others go with their last session. */
void tally_table_done(TallyTable *table);
/* Adds delta (may be negative) to a counter of a Tally, NULL-safe. */
void tally_add(Tally *t, int64_t bytes_delta, int64_t objects_delta);
