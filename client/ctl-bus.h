/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl verbs over the daemon's D-Bus management API, and the helpers
 * they share (ctl-top.c, ctl-limits.c). Each verb prints its result (JSON
 * with json) or what went wrong, and returns 0 or a negative errno.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

/* What a verb returns for bad usage (an unknown option, key or value) when
 * nothing was sent: main() exits with this status. Other failures are a
 * negative errno (exit status 1). */
#define CTL_EXIT_USAGE 2

int ctl_bus_sessions(const char *prog, bool json);
int ctl_bus_accounting(const char *prog, bool json);
/* OpenMetrics text as the daemon produces it (already machine-readable). */
int ctl_bus_metrics(const char *prog);

/* `top`: a live view of every session's GPU use (ctl-top.c). argv[0] is "top". */
int ctl_top(const char *prog, bool json, int argc, char **argv);
/* `limits ID [KEY=VALUE...]`: show or set a session's limits (ctl-limits.c). */
int ctl_limits(const char *prog, bool json, int argc, char **argv);

/* Opens the system bus ($DBUS_SYSTEM_BUS_ADDRESS); prints why it could not.
 * Calls on it allow interactive authorization unless ctl_bus_set_ask_password(false). */
int ctl_bus_open(const char *prog, sd_bus **ret);
/* --no-ask-password: no interactive authorization, no polkit agent (ctl-polkit.h). */
void ctl_bus_set_ask_password(bool ask);
/* How long a call that may wait for a password is given (the daemon gives polkit as long). */
#define CTL_BUS_INTERACTIVE_TIMEOUT_USEC (5ull * 60 * 1000 * 1000)
/* `terminate --bus ID REASON`: TerminateSession. */
int ctl_bus_terminate(const char *prog, uint64_t id, const char *reason);
/* `reload`: ReloadPolicy, waiting for the daemon's answer. */
int ctl_bus_reload(const char *prog);

/*
 * ctl_bus_call() - call a method of org.kfdbroker.Broker1.
 * @types: the arguments' signature followed by the arguments, as for
 *         sd_bus_message_append(), or NULL for none.
 * On failure prints "PROG: METHOD failed: MESSAGE" with the D-Bus error's own
 * message (a refusal says why), or that the daemon is not on the bus, and
 * returns the negative errno of the error.
 */
int ctl_bus_call(const char *prog, sd_bus *bus, const char *method, sd_bus_message **ret,
                 const char *types, ...);
/* The same in steps: a new call of method, to append arguments to; then the
 * call, which on failure puts the message (without PROG) into err. */
int ctl_bus_new_call(sd_bus *bus, const char *method, sd_bus_message **ret);
int ctl_bus_send(sd_bus *bus, sd_bus_message *m, sd_bus_message **ret, char *err, size_t errlen);
/* ctl_bus_call() without printing: the message goes to err. */
int ctl_bus_callv(sd_bus *bus, const char *method, sd_bus_message **ret, char *err, size_t errlen,
                  const char *types, va_list ap);

/* Prints an a{sv}: as a JSON object, or as "INDENTkey value" lines. */
int ctl_bus_print_dict(sd_bus_message *m, bool json, const char *indent);

/*
 * ctl_bus_read_dict() - walk an a{sv}.
 * @fn: called for every entry with the message at the entry's variant and
 *      its contents signature; returns 1 if it read the variant, 0 to have
 *      it skipped, or a negative errno to stop.
 */
typedef int (*CtlDictFn)(sd_bus_message *m, const char *key, const char *contents, void *userdata);
int ctl_bus_read_dict(sd_bus_message *m, CtlDictFn fn, void *userdata);

/* Reads a variant holding a 't' or a 'u' into *ret. */
int ctl_bus_read_number(sd_bus_message *m, const char *contents, uint64_t *ret);
/* Reads a variant holding an 's' into buf (truncated to n). */
int ctl_bus_read_string(sd_bus_message *m, const char *contents, char *buf, size_t n);

/* Copies s into buf for a terminal: control characters (and DEL) become '?'. */
const char *ctl_sanitize(const char *s, char *buf, size_t n);
