/* SPDX-License-Identifier: MIT */
/* The daemon's clock: CLOCK_MONOTONIC in nanoseconds, as sd-event's timers use. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>
#include <time.h>

static inline uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/*
 * When the event loop last woke up (sd_event_now(): no system call), or
 * now_ns() outside a loop iteration. For bookkeeping done per job —
 * queueing and submission times, a context's last use — where the few
 * microseconds one pass of the loop takes do not matter: reading the clock
 * five times per job was about 11% of the loop's time on batches of small
 * fills (a virtual machine's clock is slower to read than a bare one's).
 */
static inline uint64_t loop_now_ns(sd_event *e) {
        uint64_t usec;

        if (e && sd_event_now(e, CLOCK_MONOTONIC, &usec) >= 0)
                return usec * 1000ull;
        return now_ns();
}
