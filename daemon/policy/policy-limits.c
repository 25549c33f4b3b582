/* SPDX-License-Identifier: MIT */
/*
 * See policy-limits.h. The syntax follows systemd's unit files where they
 * have one (sizes with base-1024 suffixes, time spans "1min 30s", yes/no,
 * "infinity"), because the administrators who write kfdbroker policy write
 * those too.
 */
#include "policy/policy-limits.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/macro.h"
#include "util/parse-util.h"

static const char *const limit_key_names[_POLICY_LIMIT_MAX] = {
        [POLICY_LIMIT_BUFFER_MEMORY] = "BufferMemory",
        [POLICY_LIMIT_MAX_BUFFER_SIZE] = "MaxBufferSize",
        [POLICY_LIMIT_BUFFERS] = "Buffers",
        [POLICY_LIMIT_EVENTS] = "Events",
        [POLICY_LIMIT_JOBS_IN_FLIGHT] = "JobsInFlight",
        [POLICY_LIMIT_WEIGHT] = "Weight",
        [POLICY_LIMIT_PRIORITY] = "Priority",
        [POLICY_LIMIT_COMPUTE_DISPATCH] = "ComputeDispatch",
        [POLICY_LIMIT_ISOLATION] = "Isolation",
        [POLICY_LIMIT_JOB_TIMEOUT] = "JobTimeout",
        [POLICY_LIMIT_DISPATCH_TIMEOUT] = "DispatchTimeout",
        [POLICY_LIMIT_USER_BUFFER_MEMORY] = "UserBufferMemory",
        [POLICY_LIMIT_USER_BUFFERS] = "UserBuffers",
        [POLICY_LIMIT_UNIT_BUFFER_MEMORY] = "UnitBufferMemory",
        [POLICY_LIMIT_USER_JOBS_IN_FLIGHT] = "UserJobsInFlight",
        [POLICY_LIMIT_QUEUES] = "Queues",
        [POLICY_LIMIT_DEVICES] = "Devices",
};

void policy_limits_fit_device(PolicyLimits *l, uint64_t vram_size, bool copies_visible) {
        uint64_t user;

        if (vram_size == 0 || !copies_visible)
                return; /* the defaults without a device stay (policy-limits.h) */
        user = MAX(vram_size / 2, POLICY_USER_BUFFER_MEMORY_FLOOR);
        l->user_buffer_memory = MIN(l->user_buffer_memory, user);
        l->buffer_memory = MIN(l->buffer_memory, l->user_buffer_memory);
        l->max_buffer_size = MIN(l->max_buffer_size, l->buffer_memory);
}

void policy_limits_default(PolicyLimits *ret) {
        *ret = (PolicyLimits) {
                .buffer_memory = 4ull << 30,
                .max_buffer_size = 1ull << 30,
                .buffers = 4096,
                .events = 1024,
                .jobs_in_flight = 4096,
                .weight = 1,
                .priority = POLICY_PRIORITY_NORMAL,
                /* A client's kernels run in a GPU context of their own, where
                 * they reach only that client's buffers; in a context shared
                 * with others (a kernel without secondary contexts, or
                 * Isolation=shared) only by a rule's grant (docs/security.md). */
                .compute_dispatch = POLICY_COMPUTE_ISOLATED,
                .isolation = POLICY_ISOLATION_SESSION,
                .job_timeout_ns = POLICY_INFINITY,
                /* A kernel that runs a minute is stopped: the GPU is shared. */
                .dispatch_timeout_ns = 60ull * 1000000000ull,
                /* Sessions of one user together: memory is capped to half
                 * the GPU's once the device is known (policy_limits_fit_device());
                 * buffers so that one user cannot take every fd of the daemon
                 * (issue 13's fd starvation). */
                .user_buffer_memory = POLICY_INFINITY,
                .user_buffers = 16384,
                .unit_buffer_memory = POLICY_INFINITY,
                /* Every unfinished job costs daemon memory (a few hundred
                 * bytes and the arguments it carried): 16 sessions' worth of
                 * JobsInFlight=, so a user with many sessions cannot grow the
                 * daemon without bound (issue 29: 64 sessions x 4096 queued
                 * dispatches). */
                .user_jobs_in_flight = 65536,
                /* Each is a stream of the daemon's scheduler and a few pages
                 * of relay state; HIP makes a few per device (its streams
                 * share them), ROCr two SDMA queues. */
                .queues = 64,
        };
}

uint64_t *policy_limit_number(PolicyLimits *l, PolicyLimitKey k) {
        switch (k) {
        case POLICY_LIMIT_BUFFER_MEMORY:
                return &l->buffer_memory;
        case POLICY_LIMIT_MAX_BUFFER_SIZE:
                return &l->max_buffer_size;
        case POLICY_LIMIT_BUFFERS:
                return &l->buffers;
        case POLICY_LIMIT_EVENTS:
                return &l->events;
        case POLICY_LIMIT_JOBS_IN_FLIGHT:
                return &l->jobs_in_flight;
        case POLICY_LIMIT_USER_BUFFER_MEMORY:
                return &l->user_buffer_memory;
        case POLICY_LIMIT_USER_BUFFERS:
                return &l->user_buffers;
        case POLICY_LIMIT_UNIT_BUFFER_MEMORY:
                return &l->unit_buffer_memory;
        case POLICY_LIMIT_USER_JOBS_IN_FLIGHT:
                return &l->user_jobs_in_flight;
        case POLICY_LIMIT_QUEUES:
                return &l->queues;
        default:
                return NULL;
        }
}

bool policy_limit_is_bytes(PolicyLimitKey k) {
        return k == POLICY_LIMIT_BUFFER_MEMORY || k == POLICY_LIMIT_MAX_BUFFER_SIZE ||
               k == POLICY_LIMIT_USER_BUFFER_MEMORY || k == POLICY_LIMIT_UNIT_BUFFER_MEMORY;
}

const char *policy_limit_key_to_string(PolicyLimitKey k) {
        return (unsigned) k < _POLICY_LIMIT_MAX ? limit_key_names[k] : NULL;
}

int policy_limit_key_from_string(const char *s) {
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if (strcmp(s, limit_key_names[i]) == 0)
                        return i;
        return -EINVAL;
}

/* ---- value parsers ---- */

static bool is_infinity(const char *s) {
        return strcmp(s, "infinity") == 0;
}

/* A plain decimal number: digits only, no sign, no spaces. */
static int parse_u64_prefix(const char *s, uint64_t *ret, const char **ret_end) {
        uint64_t v = 0;
        const char *p = s;

        if (!isdigit((unsigned char) *p))
                return -EINVAL;
        for (; isdigit((unsigned char) *p); p++) {
                unsigned d = (unsigned) (*p - '0');

                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        *ret = v;
        *ret_end = p;
        return 0;
}

int policy_parse_uint(const char *s, uint64_t *ret) {
        const char *end;
        uint64_t v;
        int r = parse_u64_prefix(s, &v, &end);

        if (r < 0)
                return r;
        if (*end != 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static const struct {
        char suffix;
        unsigned shift;
} byte_suffixes[] = { { 'K', 10 }, { 'M', 20 }, { 'G', 30 }, { 'T', 40 } };

/* The largest value with this suffix that policy_parse_bytes() takes. */
static uint64_t byte_suffix_max(unsigned shift) {
        return (UINT64_MAX >> shift) - 1;
}

int policy_parse_bytes(const char *s, uint64_t *ret) {
        const char *end;
        uint64_t v;
        int r;

        if (is_infinity(s)) {
                *ret = POLICY_INFINITY;
                return 0;
        }
        r = parse_u64_prefix(s, &v, &end);
        if (r < 0)
                return r;
        if (*end == 0) {
                *ret = v;
                return v == POLICY_INFINITY ? -ERANGE : 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(byte_suffixes); i++)
                if (end[0] == byte_suffixes[i].suffix && end[1] == 0) {
                        if (v > byte_suffix_max(byte_suffixes[i].shift))
                                return -ERANGE;
                        *ret = v << byte_suffixes[i].shift;
                        return 0;
                }
        return -EINVAL;
}

int policy_parse_count(const char *s, uint64_t *ret) {
        uint64_t v;
        int r;

        if (is_infinity(s)) {
                *ret = POLICY_INFINITY;
                return 0;
        }
        r = policy_parse_uint(s, &v);
        if (r < 0)
                return r;
        if (v >= UINT32_MAX)
                return -ERANGE;
        *ret = v;
        return 0;
}

static const struct {
        const char *name;
        uint64_t ns;
} time_units[] = {
        /* longest first within a prefix: "ms" before "m", "min" before "m" */
        { "usec", 1000ull },  { "us", 1000ull },
        { "msec", 1000000ull }, { "ms", 1000000ull },
        { "seconds", 1000000000ull }, { "second", 1000000000ull },
        { "sec", 1000000000ull }, { "s", 1000000000ull },
        { "minutes", 60000000000ull }, { "minute", 60000000000ull },
        { "min", 60000000000ull }, { "m", 60000000000ull },
        { "hours", 3600000000000ull }, { "hour", 3600000000000ull },
        { "hr", 3600000000000ull }, { "h", 3600000000000ull },
        { "days", 86400000000000ull }, { "day", 86400000000000ull },
        { "d", 86400000000000ull },
};

int policy_parse_timespan(const char *s, uint64_t *ret_ns) {
        uint64_t total = 0;
        const char *p = s;
        bool any = false;

        if (is_infinity(s)) {
                *ret_ns = POLICY_INFINITY;
                return 0;
        }
        while (*p) {
                uint64_t v, mult = 1000000000ull; /* a bare number is seconds */
                const char *end;
                size_t ul = 0;
                int r;

                while (*p == ' ')
                        p++;
                if (!*p)
                        break;
                r = parse_u64_prefix(p, &v, &end);
                if (r < 0)
                        return r;
                p = end;
                while (*p == ' ')
                        p++;
                for (size_t i = 0; i < ELEMENTSOF(time_units); i++) {
                        size_t l = strlen(time_units[i].name);

                        if (strncmp(p, time_units[i].name, l) == 0 && !isalpha((unsigned char) p[l])) {
                                mult = time_units[i].ns;
                                ul = l;
                                break;
                        }
                }
                if (ul == 0 && isalpha((unsigned char) *p))
                        return -EINVAL;
                /* A bare number is only allowed alone ("30" = 30 s). */
                if (ul == 0 && (any || (*p != 0)))
                        return -EINVAL;
                p += ul;
                if (v > UINT64_MAX / mult || total > UINT64_MAX - v * mult)
                        return -ERANGE;
                total += v * mult;
                any = true;
        }
        if (!any)
                return -EINVAL;
        if (total == 0 || total == POLICY_INFINITY)
                return -ERANGE; /* 0 would fail every job: say "infinity" to disable */
        *ret_ns = total;
        return 0;
}

int policy_parse_boolean(const char *s) {
        static const char *const yes[] = { "yes", "true", "on", "1" };
        static const char *const no[] = { "no", "false", "off", "0" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcmp(s, yes[i]) == 0)
                        return 1;
                if (strcmp(s, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}

static const char *const compute_names[_POLICY_COMPUTE_MAX] = {
        [POLICY_COMPUTE_NO] = "no",
        [POLICY_COMPUTE_ISOLATED] = "isolated",
        [POLICY_COMPUTE_YES] = "yes",
};

const char *policy_compute_to_string(PolicyCompute c) {
        return (unsigned) c < _POLICY_COMPUTE_MAX ? compute_names[c] : NULL;
}

int policy_compute_from_string(const char *s) {
        int b;

        if (strcmp(s, "isolated") == 0)
                return POLICY_COMPUTE_ISOLATED;
        b = policy_parse_boolean(s);
        if (b < 0)
                return -EINVAL;
        return b ? POLICY_COMPUTE_YES : POLICY_COMPUTE_NO;
}

static const char *const isolation_names[_POLICY_ISOLATION_MAX] = {
        [POLICY_ISOLATION_SESSION] = "session",
        [POLICY_ISOLATION_IDENTITY] = "identity",
        [POLICY_ISOLATION_SHARED] = "shared",
};

const char *policy_isolation_to_string(PolicyIsolation i) {
        return (unsigned) i < _POLICY_ISOLATION_MAX ? isolation_names[i] : NULL;
}

int policy_isolation_from_string(const char *s) {
        for (int i = 0; i < _POLICY_ISOLATION_MAX; i++)
                if (strcmp(s, isolation_names[i]) == 0)
                        return i;
        return -EINVAL;
}

static const char *const priority_names[_POLICY_PRIORITY_MAX] = {
        [POLICY_PRIORITY_IDLE] = "idle",
        [POLICY_PRIORITY_LOW] = "low",
        [POLICY_PRIORITY_NORMAL] = "normal",
        [POLICY_PRIORITY_HIGH] = "high",
};

const char *policy_priority_to_string(PolicyPriority p) {
        return (unsigned) p < _POLICY_PRIORITY_MAX ? priority_names[p] : NULL;
}

int policy_priority_from_string(const char *s) {
        for (int i = 0; i < _POLICY_PRIORITY_MAX; i++)
                if (strcmp(s, priority_names[i]) == 0)
                        return i;
        return -EINVAL;
}

uint32_t policy_priority_to_queue_priority(PolicyPriority p) {
        /* libhsakmt maps thunk priorities -3..+3 to queue_priority
         * {0,3,5,7,9,11,15} (kfd-facts §1.6.4). We use the values of MINIMUM,
         * LOW, NORMAL and HIGH. amdkfd's pipe_priority_map turns 0..6 into the
         * LOW pipe priority, 7..10 MEDIUM, 11..15 HIGH, so "high" reaches the
         * HIGH pipe priority and "normal" equals the daemon's default (7);
         * MAXIMUM (15) is left out on purpose. */
        static const uint32_t map[_POLICY_PRIORITY_MAX] = {
                [POLICY_PRIORITY_IDLE] = 0,
                [POLICY_PRIORITY_LOW] = 3,
                [POLICY_PRIORITY_NORMAL] = 7,
                [POLICY_PRIORITY_HIGH] = 11,
        };
        return (unsigned) p < _POLICY_PRIORITY_MAX ? map[p] : 7;
}

/* ---- one limit ---- */

/* Copies at most 64 bytes of a value for a message, non-printables as '?'. */
void policy_quote_value(const char *v, char *buf, size_t n) {
        size_t i = 0, o = 0;

        for (; v[i] && o + 4 < n && i < 64; i++)
                buf[o++] = isprint((unsigned char) v[i]) ? v[i] : '?';
        if (v[i] && o + 4 < n)
                buf[o++] = '.', buf[o++] = '.', buf[o++] = '.';
        buf[o] = 0;
}

static int _printf_(3, 4) limit_error(char *err, size_t errlen, const char *fmt, ...) {
        va_list ap;

        if (err && errlen > 0) {
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

/* Devices=: "all", or indexes and PCI addresses separated by commas or blanks. */
static int parse_devices(const char *value, const char *q, PolicyDevices *ret, char *err, size_t errlen) {
        PolicyDevices d = {};

        if (strcmp(value, "all") == 0) {
                *ret = d;
                return 0;
        }
        for (const char *p = value + strspn(value, " \t"); *p;) {
                size_t len = strcspn(p, ", \t");
                PolicyDevice v = {};
                unsigned long x;

                if (len == 0)
                        return limit_error(err, errlen, "invalid Devices= value \"%s\": an empty item", q);
                if (parse_uint_n(p, len, 10, POLICY_MAX_DEVICES - 1, &x))
                        v.index = (uint32_t) x;
                else if (parse_pci_address(p, len, &v.domain, &v.location))
                        v.pci = true;
                else
                        return limit_error(err, errlen,
                                           "invalid Devices= value \"%s\": expected \"all\", or GPU indexes 0..%u (as "
                                           "kfdbrokerctl status numbers them) and PCI addresses (0000:03:00.0)",
                                           q, POLICY_MAX_DEVICES - 1);
                for (unsigned i = 0; i < d.n; i++)
                        if (d.v[i].pci == v.pci && d.v[i].index == v.index && d.v[i].domain == v.domain &&
                            d.v[i].location == v.location)
                                return limit_error(err, errlen, "invalid Devices= value \"%s\": a GPU named twice", q);
                if (d.n == POLICY_MAX_DEVICES)
                        return limit_error(err, errlen, "invalid Devices= value \"%s\": more than %u GPUs", q,
                                           POLICY_MAX_DEVICES);
                d.v[d.n++] = v;
                /* Items are separated by blanks, or by one comma with blanks around it. */
                p += len;
                p += strspn(p, " \t");
                if (*p == ',') {
                        p++;
                        p += strspn(p, " \t");
                        if (*p == '\0' || *p == ',')
                                return limit_error(err, errlen, "invalid Devices= value \"%s\": an empty item", q);
                }
        }
        if (d.n == 0)
                return limit_error(err, errlen, "invalid Devices= value \"%s\": no GPU named", q);
        *ret = d;
        return 0;
}

bool policy_devices_allow(const PolicyDevices *d, unsigned index, const char *pci_address) {
        char pci[24];

        if (d->n == 0)
                return true;
        for (unsigned i = 0; i < d->n; i++) {
                if (!d->v[i].pci && d->v[i].index == index)
                        return true;
                if (d->v[i].pci && pci_address) {
                        format_pci_address(d->v[i].domain, d->v[i].location, pci, sizeof pci);
                        if (strcmp(pci, pci_address) == 0)
                                return true;
                }
        }
        return false;
}

int policy_limit_parse(PolicyLimitKey k, const char *value, PolicyLimits *l, char *err, size_t errlen) {
        const char *name = policy_limit_key_to_string(k);
        char q[80];
        uint64_t x;
        int r;

        if (!name)
                return -EINVAL;
        policy_quote_value(value, q, sizeof(q));
        switch (k) {
        case POLICY_LIMIT_BUFFER_MEMORY:
        case POLICY_LIMIT_MAX_BUFFER_SIZE:
        case POLICY_LIMIT_USER_BUFFER_MEMORY:
        case POLICY_LIMIT_UNIT_BUFFER_MEMORY:
                r = policy_parse_bytes(value, &x);
                if (r < 0)
                        return limit_error(err, errlen,
                                           "invalid %s= value \"%s\": expected bytes with an optional K, M, G or T suffix (base 1024), or \"infinity\"%s",
                                           name, q, r == -ERANGE ? " (too large)" : "");
                if (x == 0)
                        return limit_error(err, errlen, "invalid %s= value \"%s\": must be at least 1 byte",
                                           name, q);
                *policy_limit_number(l, k) = x;
                return 0;
        case POLICY_LIMIT_BUFFERS:
        case POLICY_LIMIT_EVENTS:
        case POLICY_LIMIT_JOBS_IN_FLIGHT:
        case POLICY_LIMIT_USER_BUFFERS:
        case POLICY_LIMIT_USER_JOBS_IN_FLIGHT:
        case POLICY_LIMIT_QUEUES:
                r = policy_parse_count(value, &x);
                if (r < 0)
                        return limit_error(err, errlen,
                                           "invalid %s= value \"%s\": expected a number below 4294967295 or \"infinity\"",
                                           name, q);
                if ((k == POLICY_LIMIT_JOBS_IN_FLIGHT || k == POLICY_LIMIT_USER_JOBS_IN_FLIGHT) && x == 0)
                        return limit_error(err, errlen,
                                           "invalid %s= value \"%s\": must be at least 1 (use ComputeDispatch= or Buffers= to deny work)",
                                           name, q);
                *policy_limit_number(l, k) = x;
                return 0;
        case POLICY_LIMIT_WEIGHT:
                r = policy_parse_count(value, &x);
                if (r < 0 || x < POLICY_WEIGHT_MIN || x > POLICY_WEIGHT_MAX)
                        return limit_error(err, errlen, "invalid Weight= value \"%s\": expected %u..%u", q,
                                           POLICY_WEIGHT_MIN, POLICY_WEIGHT_MAX);
                l->weight = (uint32_t) x;
                return 0;
        case POLICY_LIMIT_PRIORITY:
                r = policy_priority_from_string(value);
                if (r < 0)
                        return limit_error(err, errlen,
                                           "invalid Priority= value \"%s\": expected idle, low, normal or high", q);
                l->priority = (PolicyPriority) r;
                return 0;
        case POLICY_LIMIT_COMPUTE_DISPATCH:
                r = policy_compute_from_string(value);
                if (r < 0)
                        return limit_error(err, errlen,
                                           "invalid ComputeDispatch= value \"%s\": expected no, isolated or yes", q);
                l->compute_dispatch = (PolicyCompute) r;
                return 0;
        case POLICY_LIMIT_ISOLATION:
                r = policy_isolation_from_string(value);
                if (r < 0)
                        return limit_error(err, errlen,
                                           "invalid Isolation= value \"%s\": expected session, identity or shared", q);
                l->isolation = (PolicyIsolation) r;
                return 0;
        case POLICY_LIMIT_JOB_TIMEOUT:
        case POLICY_LIMIT_DISPATCH_TIMEOUT:
                r = policy_parse_timespan(value, &x);
                if (r < 0)
                        return limit_error(err, errlen,
                                           "invalid %s= value \"%s\": expected a time span such as 500ms, 30s, 5min, 1h, or \"infinity\"%s",
                                           name, q, r == -ERANGE ? " (zero or too large)" : "");
                if (k == POLICY_LIMIT_JOB_TIMEOUT)
                        l->job_timeout_ns = x;
                else
                        l->dispatch_timeout_ns = x;
                return 0;
        case POLICY_LIMIT_DEVICES:
                return parse_devices(value, q, &l->devices, err, errlen);
        default:
                return -EINVAL;
        }
}

/* ---- printing ---- */

const char *policy_format_bytes(uint64_t v, char *buf, size_t n) {
        if (v == POLICY_INFINITY) {
                snprintf(buf, n, "infinity");
                return buf;
        }
        for (size_t i = ELEMENTSOF(byte_suffixes); i > 0; i--) {
                unsigned shift = byte_suffixes[i - 1].shift;

                if (v != 0 && (v & ((1ull << shift) - 1)) == 0 && (v >> shift) <= byte_suffix_max(shift)) {
                        snprintf(buf, n, "%" PRIu64 "%c", v >> shift, byte_suffixes[i - 1].suffix);
                        return buf;
                }
        }
        snprintf(buf, n, "%" PRIu64, v);
        return buf;
}

const char *policy_format_timespan(uint64_t ns, char *buf, size_t n) {
        /* The units policy_parse_timespan() reads, largest first. */
        static const struct {
                const char *name;
                uint64_t ns;
        } units[] = {
                { "d", 86400000000000ull }, { "h", 3600000000000ull }, { "min", 60000000000ull },
                { "s", 1000000000ull },     { "ms", 1000000ull },      { "us", 1000ull },
        };
        size_t used = 0;

        if (n == 0)
                return buf;
        buf[0] = 0;
        if (ns == POLICY_INFINITY) {
                snprintf(buf, n, "infinity");
                return buf;
        }
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                uint64_t q = ns / units[i].ns;
                int w;

                if (q == 0)
                        continue;
                ns -= q * units[i].ns;
                w = snprintf(buf + used, n - used, "%s%" PRIu64 "%s", used ? " " : "", q, units[i].name);
                if (w < 0 || (size_t) w >= n - used)
                        break;
                used += (size_t) w;
        }
        /* Below a microsecond: the syntax has no unit for it. */
        if (used == 0)
                snprintf(buf, n, "0");
        return buf;
}

const char *policy_limit_format(PolicyLimitKey k, const PolicyLimits *l, char *buf, size_t n) {
        switch (k) {
        case POLICY_LIMIT_BUFFER_MEMORY:
        case POLICY_LIMIT_MAX_BUFFER_SIZE:
        case POLICY_LIMIT_USER_BUFFER_MEMORY:
        case POLICY_LIMIT_UNIT_BUFFER_MEMORY:
                return policy_format_bytes(*policy_limit_number((PolicyLimits *) l, k), buf, n);
        case POLICY_LIMIT_BUFFERS:
        case POLICY_LIMIT_EVENTS:
        case POLICY_LIMIT_JOBS_IN_FLIGHT:
        case POLICY_LIMIT_USER_BUFFERS:
        case POLICY_LIMIT_USER_JOBS_IN_FLIGHT:
        case POLICY_LIMIT_QUEUES: {
                uint64_t v = *policy_limit_number((PolicyLimits *) l, k);
                if (v == POLICY_INFINITY)
                        snprintf(buf, n, "infinity");
                else
                        snprintf(buf, n, "%" PRIu64, v);
                return buf;
        }
        case POLICY_LIMIT_WEIGHT:
                snprintf(buf, n, "%" PRIu32, l->weight);
                return buf;
        case POLICY_LIMIT_PRIORITY: {
                const char *p = policy_priority_to_string(l->priority);
                snprintf(buf, n, "%s", p ? p : "?");
                return buf;
        }
        case POLICY_LIMIT_COMPUTE_DISPATCH: {
                const char *c = policy_compute_to_string(l->compute_dispatch);
                snprintf(buf, n, "%s", c ? c : "?");
                return buf;
        }
        case POLICY_LIMIT_ISOLATION: {
                const char *i = policy_isolation_to_string(l->isolation);
                snprintf(buf, n, "%s", i ? i : "?");
                return buf;
        }
        case POLICY_LIMIT_JOB_TIMEOUT:
                return policy_format_timespan(l->job_timeout_ns, buf, n);
        case POLICY_LIMIT_DISPATCH_TIMEOUT:
                return policy_format_timespan(l->dispatch_timeout_ns, buf, n);
        case POLICY_LIMIT_DEVICES: {
                size_t used = 0;

                if (n == 0)
                        return buf;
                buf[0] = '\0';
                if (l->devices.n == 0)
                        snprintf(buf, n, "all");
                for (unsigned i = 0; i < l->devices.n && used < n; i++) {
                        char item[24];
                        const PolicyDevice *v = &l->devices.v[i];

                        if (v->pci)
                                format_pci_address(v->domain, v->location, item, sizeof item);
                        else
                                snprintf(item, sizeof item, "%" PRIu32, v->index);
                        int w = snprintf(buf + used, n - used, "%s%s", i ? "," : "", item);
                        if (w < 0)
                                break;
                        used += (size_t) w;
                }
                return buf;
        }
        default:
                snprintf(buf, n, "?");
                return buf;
        }
}
