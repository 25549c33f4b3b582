/* SPDX-License-Identifier: MIT */
/*
 * The checks of D-Bus method arguments, apart from sd-bus: what Bus (bus.c)
 * reads from a call goes through these pure functions, which decide what is
 * accepted and word every refusal, so that they can be tested and fuzzed
 * without a bus. Nothing here allocates, logs or touches the system.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy-limits.h"

/* One entry of SetLimits' a{sv} as read from the call: the key, the
 * signature of the variant's contents, and its value when that signature is
 * one a limit can have ("t", "u", "s", "b"; the caller reads no other). */
typedef struct BusLimitValue {
        const char *signature;
        union {
                uint64_t t;
                uint32_t u;
                const char *s;
                bool b;
        };
} BusLimitValue;

/*
 * bus_limit_apply() - one SetLimits entry into @l.
 * @key:   the entry's key ("BufferMemory", ..., "DispatchTimeoutUSec").
 * @v:     its value (see BusLimitValue).
 * @err:   on refusal, a printable ASCII message naming the key, the type
 *         or the value, e.g. "Limit Weight must be 1..1000, got 0".
 *
 * Accepts what a policy file would (docs/dbus.md "SetLimits"): numbers as
 * `t` with 2^64-1 meaning no limit, Weight as `u`, the words as `s`, and
 * ComputeDispatch also as a boolean `b`. Only the field of @key is written,
 * and only on success.
 * Returns 0, or -EINVAL (unknown key, wrong type, value out of range).
 */
int bus_limit_apply(PolicyLimits *l, const char *key, const BusLimitValue *v, char *err, size_t errlen);

/*
 * bus_terminate_reason() - why a session ends, for TerminateSession called
 * by @sender (the caller: "uid U (unit X, pid P)", bus.c) with the caller's @reason (may be NULL or empty): "terminated
 * over D-Bus by SENDER[: REASON]", cut to @n bytes, with every byte that is
 * not printable ASCII written as '?', so that the text is safe to log and to
 * send in the SessionClosed signal (a D-Bus string must be valid UTF-8).
 */
void bus_terminate_reason(const char *sender, const char *reason, char *buf, size_t n);
