/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl selftest`: a short suite that exercises the daemon's GPU —
 * simulated or real — through libkfdbroker only, as any client would: copies,
 * fills, events, a compute dispatch, a GPU memory fault and a job that cannot
 * finish. Each check ends in pass, fail or skip (with the reason), with its
 * time and, where it means something, its throughput. The owner of a new
 * machine runs it first.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "kfdbroker.h"

/* How long the timeout check waits, by default, for the daemon to end a job
 * that cannot finish (the session's JobTimeout=) before it ends the wait on
 * its own side. */
#define CTL_SELFTEST_DEFAULT_TIMEOUT_WAIT_MS 1000u

typedef struct CtlSelftestOptions {
        bool json;               /* print JSON (docs/man/kfdbrokerctl.1, docs/selftest.md) */
        bool strict;             /* a skipped check fails the run */
        uint32_t timeout_wait_ms; /* see CTL_SELFTEST_DEFAULT_TIMEOUT_WAIT_MS */
} CtlSelftestOptions;

/*
 * Runs every check on @s and prints one line per check and a summary (or one
 * JSON object). Returns 0 when every check that ran passed (and, with strict,
 * none was skipped), -EIO when one did not, or a negative errno when the
 * suite could not start (the device could not be asked for: printed).
 * A check that does not finish within its time limit ends the program.
 * Messages on stderr start with @prog (e.g. "kfdbrokerctl selftest").
 */
int ctl_selftest(kfdb_session *s, const char *prog, const CtlSelftestOptions *o);
