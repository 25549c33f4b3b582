/* SPDX-License-Identifier: MIT */
/* See bus-args.h. The wording of each refusal is what docs/dbus.md and the
 * D-Bus integration tests show. */
#include "endpoints/bus-args.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"

/* The numeric limits, all `t`, and where each goes. */
typedef enum NumberLimit {
        NUMBER_BUFFER_MEMORY,
        NUMBER_MAX_BUFFER_SIZE,
        NUMBER_BUFFERS,
        NUMBER_EVENTS,
        NUMBER_JOBS_IN_FLIGHT,
        NUMBER_JOB_TIMEOUT,
        NUMBER_DISPATCH_TIMEOUT,
        NUMBER_USER_BUFFER_MEMORY,
        NUMBER_USER_BUFFERS,
        NUMBER_UNIT_BUFFER_MEMORY,
        NUMBER_USER_JOBS_IN_FLIGHT,
        NUMBER_QUEUES,
        _NUMBER_MAX,
} NumberLimit;

static const char *const number_names[_NUMBER_MAX] = {
        [NUMBER_BUFFER_MEMORY] = "BufferMemory",   [NUMBER_MAX_BUFFER_SIZE] = "MaxBufferSize",
        [NUMBER_BUFFERS] = "Buffers",              [NUMBER_EVENTS] = "Events",
        [NUMBER_JOBS_IN_FLIGHT] = "JobsInFlight",  [NUMBER_JOB_TIMEOUT] = "JobTimeoutUSec",
        [NUMBER_DISPATCH_TIMEOUT] = "DispatchTimeoutUSec",
        [NUMBER_USER_BUFFER_MEMORY] = "UserBufferMemory", [NUMBER_USER_BUFFERS] = "UserBuffers",
        [NUMBER_UNIT_BUFFER_MEMORY] = "UnitBufferMemory", [NUMBER_USER_JOBS_IN_FLIGHT] = "UserJobsInFlight",
        [NUMBER_QUEUES] = "Queues",
};

static int _printf_(3, 4) refuse(char *err, size_t errlen, const char *fmt, ...) {
        va_list ap;

        if (err && errlen > 0) {
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static int number_from_key(const char *key) {
        for (unsigned i = 0; i < _NUMBER_MAX; i++)
                if (strcmp(key, number_names[i]) == 0)
                        return (int) i;
        return -EINVAL;
}

/* The ranges policy files allow (policy_limit_parse()); 2^64-1 means
 * "infinity" for each of them. */
static int apply_number(PolicyLimits *l, NumberLimit k, uint64_t t, char *err, size_t errlen) {
        uint64_t min = 0, max = UINT32_MAX - 1;
        const char *unit = "";

        switch (k) {
        case NUMBER_BUFFER_MEMORY:
        case NUMBER_MAX_BUFFER_SIZE:
        case NUMBER_USER_BUFFER_MEMORY:
        case NUMBER_UNIT_BUFFER_MEMORY:
                min = 1;
                max = UINT64_MAX - 1;
                unit = " bytes";
                break;
        case NUMBER_JOBS_IN_FLIGHT:
        case NUMBER_USER_JOBS_IN_FLIGHT:
                min = 1;
                break;
        case NUMBER_JOB_TIMEOUT:
        case NUMBER_DISPATCH_TIMEOUT:
                min = 1;
                max = (POLICY_INFINITY - 1) / 1000;
                unit = " microseconds";
                break;
        default:
                break;
        }
        if (t != UINT64_MAX && (t < min || t > max))
                return refuse(err, errlen,
                              "Limit %s must be %" PRIu64 "..%" PRIu64 "%s, or %" PRIu64 " for no limit, got %" PRIu64,
                              number_names[k], min, max, unit, UINT64_MAX, t);

        switch (k) {
        case NUMBER_BUFFER_MEMORY:
                l->buffer_memory = t;
                break;
        case NUMBER_MAX_BUFFER_SIZE:
                l->max_buffer_size = t;
                break;
        case NUMBER_BUFFERS:
                l->buffers = t;
                break;
        case NUMBER_EVENTS:
                l->events = t;
                break;
        case NUMBER_JOBS_IN_FLIGHT:
                l->jobs_in_flight = t;
                break;
        case NUMBER_JOB_TIMEOUT:
                l->job_timeout_ns = t == UINT64_MAX ? POLICY_INFINITY : t * 1000;
                break;
        case NUMBER_DISPATCH_TIMEOUT:
                l->dispatch_timeout_ns = t == UINT64_MAX ? POLICY_INFINITY : t * 1000;
                break;
        case NUMBER_USER_BUFFER_MEMORY:
                l->user_buffer_memory = t;
                break;
        case NUMBER_USER_BUFFERS:
                l->user_buffers = t;
                break;
        case NUMBER_UNIT_BUFFER_MEMORY:
                l->unit_buffer_memory = t;
                break;
        case NUMBER_USER_JOBS_IN_FLIGHT:
                l->user_jobs_in_flight = t;
                break;
        case NUMBER_QUEUES:
                l->queues = t;
                break;
        default:
                break;
        }
        return 0;
}

static bool has_type(const BusLimitValue *v, const char *sig) {
        return v->signature && strcmp(v->signature, sig) == 0;
}

static int wrong_type(const char *key, const char *expected, const BusLimitValue *v, char *err, size_t errlen) {
        char q[80];

        policy_quote_value(v->signature ? v->signature : "?", q, sizeof q);
        return refuse(err, errlen, "Limit %s must be of type '%s', got '%s'", key, expected, q);
}

static int apply_word(PolicyLimits *l, const char *key, const char *word, char *err, size_t errlen) {
        char q[80];
        int r;

        policy_quote_value(word, q, sizeof q);
        if (strcmp(key, "Priority") == 0) {
                r = policy_priority_from_string(word);
                if (r < 0)
                        return refuse(err, errlen, "Priority must be idle, low, normal or high, got '%s'", q);
                l->priority = (PolicyPriority) r;
        } else if (strcmp(key, "Isolation") == 0) {
                r = policy_isolation_from_string(word);
                if (r < 0)
                        return refuse(err, errlen, "Isolation must be session, identity or shared, got '%s'", q);
                l->isolation = (PolicyIsolation) r;
        } else {
                r = policy_compute_from_string(word);
                if (r < 0)
                        return refuse(err, errlen, "ComputeDispatch must be no, isolated or yes, got '%s'", q);
                l->compute_dispatch = (PolicyCompute) r;
        }
        return 0;
}

int bus_limit_apply(PolicyLimits *l, const char *key, const BusLimitValue *v, char *err, size_t errlen) {
        char q[80];
        int k;

        k = number_from_key(key);
        if (k >= 0) {
                if (!has_type(v, "t"))
                        return wrong_type(key, "t", v, err, errlen);
                return apply_number(l, (NumberLimit) k, v->t, err, errlen);
        }
        if (strcmp(key, "Weight") == 0) {
                if (!has_type(v, "u"))
                        return wrong_type(key, "u", v, err, errlen);
                if (v->u < POLICY_WEIGHT_MIN || v->u > POLICY_WEIGHT_MAX)
                        return refuse(err, errlen, "Weight must be %u..%u, got %" PRIu32, POLICY_WEIGHT_MIN,
                                      POLICY_WEIGHT_MAX, v->u);
                l->weight = v->u;
                return 0;
        }
        if (strcmp(key, "ComputeDispatch") == 0 && has_type(v, "b")) {
                /* The boolean of earlier versions: yes or no. */
                l->compute_dispatch = v->b ? POLICY_COMPUTE_YES : POLICY_COMPUTE_NO;
                return 0;
        }
        if (strcmp(key, "Priority") == 0 || strcmp(key, "ComputeDispatch") == 0 || strcmp(key, "Isolation") == 0) {
                if (!has_type(v, "s"))
                        return wrong_type(key, "s", v, err, errlen);
                return apply_word(l, key, v->s, err, errlen);
        }
        policy_quote_value(key, q, sizeof q);
        return refuse(err, errlen,
                      "Unknown limit '%s' (known: BufferMemory, MaxBufferSize, Buffers, Events, JobsInFlight, Weight, "
                      "Priority, ComputeDispatch, Isolation, JobTimeoutUSec, DispatchTimeoutUSec, UserBufferMemory, "
                      "UserBuffers, UnitBufferMemory, UserJobsInFlight, Queues)",
                      q);
}

void bus_terminate_reason(const char *sender, const char *reason, char *buf, size_t n) {
        if (n == 0)
                return;
        snprintf(buf, n, "terminated over D-Bus by %s%s%s", sender ? sender : "?", reason && *reason ? ": " : "",
                 reason ? reason : "");
        for (char *p = buf; *p; p++)
                if ((unsigned char) *p < 0x20 || (unsigned char) *p >= 0x7f)
                        *p = '?';
}
