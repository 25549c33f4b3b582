/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl's read-only management verbs over the socket (ctl-socket.c):
 * `sessions`, `accounting` and `limits ID` given --socket, for the caller's
 * own uid's sessions (root: every one). Each prints its result (JSON with
 * json, the same keys as over D-Bus) or what went wrong, and returns 0 or a
 * negative errno.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "kfdbroker.h"

/* Sessions asked for per ListSessions call. */
#define CTL_SOCKET_PAGE 12u

int ctl_socket_sessions(kfdb_session *s, const char *prog, bool json);
int ctl_socket_accounting(kfdb_session *s, const char *prog, bool json);
int ctl_socket_limits(kfdb_session *s, const char *prog, bool json, uint64_t id);
