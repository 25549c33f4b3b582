/* SPDX-License-Identifier: MIT */
/* See log-ratelimit.h. */
#include "util/log-ratelimit.h"

#include "util/log-ids.h"

#include <stdio.h>
#include <time.h>

static LogRateLimit global_limit = {
        .interval_usec = LOG_RATELIMIT_GLOBAL_INTERVAL_USEC,
        .burst = LOG_RATELIMIT_GLOBAL_BURST,
};

static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ull + (uint64_t) ts.tv_nsec / 1000ull;
}

void log_ratelimit_init(LogRateLimit *rl, uint64_t interval_usec, unsigned burst) {
        *rl = (LogRateLimit) { .interval_usec = interval_usec, .burst = burst };
}

bool log_ratelimit_idle(const LogRateLimit *rl) {
        return rl->begin_usec == 0 || now_usec() - rl->begin_usec >= rl->interval_usec;
}

LogRateLimit *log_ratelimit_global(void) {
        return &global_limit;
}

/* The line that says what rl held back: "from uid 1000" for a peer's limit
 * (who its Tally key), the daemon-wide one for who NULL. */
static void summarize(LogRateLimit *rl, const char *who, uint64_t now) {
        LogFields f = {};
        uint64_t secs;

        if (rl->suppressed == 0)
                return;
        /* Rounded up: "in the last 0 s" would read as nothing. */
        secs = (now - rl->first_suppressed_usec + 999999ull) / 1000000ull;
        log_fields_add(&f, "KFDBROKER_SUPPRESSED=%u", rl->suppressed);
        log_fields_add(&f, "KFDBROKER_SUPPRESSED_SEC=%llu", (unsigned long long) secs);
        log_fields_add(&f, "KFDBROKER_RATELIMIT=%s", who ? "peer" : "daemon");
        if (who)
                log_fields_add(&f, "KFDBROKER_PEER=%s", who);
        log_struct_internal(LOG_NOTICE, 0, __FILE__, __LINE__, __func__, KFDBROKER_MESSAGE_LOG_SUPPRESSED, &f,
                            "Suppressed %u messages %s%s in the last %llu s", rl->suppressed,
                            who ? "from " : "", who ? who : "(all clients, over the daemon-wide limit)",
                            (unsigned long long) secs);
        rl->suppressed = 0;
}

/* One limit: true if the line fits; false (and counted) if not. */
static bool test_one(LogRateLimit *rl, const char *who, uint64_t now) {
        if (rl->begin_usec == 0 || now - rl->begin_usec >= rl->interval_usec) {
                summarize(rl, who, now);
                rl->begin_usec = now;
                rl->n = 0;
        }
        if (rl->n < rl->burst) {
                rl->n++;
                return true;
        }
        if (rl->suppressed++ == 0)
                rl->first_suppressed_usec = now;
        return false;
}

bool log_ratelimit_pass(LogRateLimit *rl, const char *who) {
        uint64_t now = now_usec();

        if (rl && !test_one(rl, who, now))
                return false;
        return test_one(&global_limit, NULL, now);
}

void log_ratelimit_flush(LogRateLimit *rl, const char *who) {
        if (!rl)
                return;
        summarize(rl, rl == &global_limit ? NULL : who, now_usec());
}
