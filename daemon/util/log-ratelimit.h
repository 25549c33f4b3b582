/* SPDX-License-Identifier: MIT */
/*
 * Rate-limited logging: a small wrapper around the log_*() calls for lines
 * that a client can cause (a session opened or closed, a refused connection,
 * a failed job), so that a client that connects 80 000 times cannot flood the
 * journal, nor slow other clients with the logging. Each line passes two
 * limits, systemd-style (at most burst lines per interval): the peer's own
 * (one LogRateLimit per user, kept by its Tally) and one shared by every peer.
 * What a limit held back is said once the interval is over, in one line:
 *
 *   Suppressed 7423 messages from uid 1000 in the last 10 s
 *
 * Use it as
 *
 *   log_ratelimited(&tally->log_limit, tally->key, LOG_INFO, "Session %" PRIu64 " opened: ...", ...);
 *
 * with rl NULL for a line that only the shared limit applies to, or, for a
 * structured entry (log.h), as
 *
 *   log_struct_ratelimited(&tally->log_limit, tally->key, LOG_NOTICE, 0, KFDBROKER_MESSAGE_..., &fields, "...");
 *
 * The summary is itself a structured entry (KFDBROKER_MESSAGE_LOG_SUPPRESSED,
 * docs/journal.md). Meant for
 * the event loop's thread (the limits are not locked).
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "util/log.h"

/* Per peer: 50 lines in 10 s; all peers together: 200 lines in 10 s. */
#define LOG_RATELIMIT_PEER_INTERVAL_USEC (10ull * 1000000ull)
#define LOG_RATELIMIT_PEER_BURST 50u
#define LOG_RATELIMIT_GLOBAL_INTERVAL_USEC (10ull * 1000000ull)
#define LOG_RATELIMIT_GLOBAL_BURST 200u

typedef struct LogRateLimit {
        uint64_t interval_usec;
        unsigned burst;
        uint64_t begin_usec;      /* start of the current interval, 0 before the first line */
        unsigned n;               /* lines let through in it */
        unsigned suppressed;      /* lines held back since the last summary */
        uint64_t first_suppressed_usec;
} LogRateLimit;

void log_ratelimit_init(LogRateLimit *rl, uint64_t interval_usec, unsigned burst);
/* Whether a line of @who (for the summary: "uid 1000") may be logged now:
 * checks rl (NULL: none) and the shared limit, counts it where it is held
 * back, and logs the summary of an interval that is over. */
bool log_ratelimit_pass(LogRateLimit *rl, const char *who);
/* Logs the summary of what rl held back, if anything, and resets it (a peer
 * that goes away). NULL-safe. */
void log_ratelimit_flush(LogRateLimit *rl, const char *who);
/* Whether rl has no interval running (nothing to remember). */
bool log_ratelimit_idle(const LogRateLimit *rl);
/* The shared limit, for the daemon's exit and tests. */
LogRateLimit *log_ratelimit_global(void);

#define log_ratelimited(rl, who, level, ...)                                                \
        do {                                                                                \
                int _rl_level_ = (level);                                                   \
                if (log_get_max_level() >= _rl_level_ && log_ratelimit_pass((rl), (who)))   \
                        log_full(_rl_level_, __VA_ARGS__);                                  \
        } while (0)
#define log_ratelimited_errno(rl, who, level, error, ...)                                   \
        do {                                                                                \
                int _rl_level_ = (level);                                                   \
                if (log_get_max_level() >= _rl_level_ && log_ratelimit_pass((rl), (who)))   \
                        (void) log_full_errno(_rl_level_, (error), __VA_ARGS__);            \
        } while (0)
/* A structured entry (log_struct_errno()) under the limits; fields is
 * evaluated only when the line passes. */
#define log_struct_ratelimited(rl, who, level, error, message_id, fields, ...)                          \
        do {                                                                                           \
                int _rl_level_ = (level);                                                              \
                if (log_get_max_level() >= _rl_level_ && log_ratelimit_pass((rl), (who)))              \
                        (void) log_struct_errno(_rl_level_, (error), (message_id), (fields), __VA_ARGS__); \
        } while (0)
