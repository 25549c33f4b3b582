/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl verbs over the daemon's D-Bus management API. Each prints its
 * result (JSON with json) or what went wrong, and returns 0 or a negative
 * errno.
 */
#pragma once

#include <stdbool.h>

int ctl_bus_sessions(const char *prog, bool json);
int ctl_bus_accounting(const char *prog, bool json);
/* OpenMetrics text as the daemon produces it (already machine-readable). */
int ctl_bus_metrics(const char *prog);
