/* SPDX-License-Identifier: MIT */
/*
 * The checks of `kfdbrokerctl selftest` (ctl-selftest.h runs them and prints
 * what they found). Each takes the run's Selftest and fills one Check: its
 * result, a one-line detail (what it verified, what went wrong, or why it
 * could not run) and what it measured. A check frees what it made; it calls
 * only libkfdbroker, and every wait it makes is bounded.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl-selftest.h"
#include "kfdbroker.h"

typedef enum Result {
        RESULT_PASS,
        RESULT_FAIL,
        RESULT_SKIP,
} Result;

typedef struct CopyRun {
        uint64_t bytes;
        double ms;
        double gbps;
} CopyRun;

#define N_COPY_SIZES 3u

/* One check's outcome, filled by the check. */
typedef struct Check {
        const char *name;
        Result result;
        double ms;
        char detail[512];
        /* What each check measured (docs/selftest.md lists which keys each has). */
        CopyRun copies[N_COPY_SIZES]; /* copy */
        size_t n_copies;
        uint64_t bytes;               /* fill */
        double gbps;                  /* fill */
        uint64_t elements;            /* dispatch */
        double elements_per_s;        /* dispatch */
        int error;                    /* fault, timeout: the job's error (negative errno), 0 if none */
        uint64_t context_lost_before, context_lost_after; /* fault */
        const char *mechanism;        /* timeout: "job-timeout" or "client-wait" */
        uint32_t timeout_wait_ms;     /* timeout: how long it waited for the daemon to end the job */
        double held_ms;               /* timeout: submit -> the daemon ended the job, or the client released it */
} Check;

/* What every check is given: the session, and what the run found out first. */
typedef struct Selftest {
        kfdb_session *s;
        const char *prog;
        const CtlSelftestOptions *o;
        kfdb_device dev;
        uint32_t compute_queues;
        kfdb_gpu_contexts contexts;
} Selftest;

typedef void (*SelftestCheckFn)(const Selftest *t, Check *c);

typedef struct SelftestCheck {
        const char *name;
        SelftestCheckFn run;
} SelftestCheck;

/* The checks, in the order they run (docs/selftest.md). */
#define SELFTEST_N_CHECKS 7u
extern const SelftestCheck selftest_checks[SELFTEST_N_CHECKS];

double selftest_now_ms(void);
/* Drops the job failure notifications a check caused (it saw them through its fences). */
void selftest_drain_failures(const Selftest *t);
