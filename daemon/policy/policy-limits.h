/* SPDX-License-Identifier: MIT */
/*
 * PolicyLimits: the limits one session runs under, their built-in defaults,
 * and the value syntax the policy files use for them (512M, 30s, yes,
 * infinity). The policy loader (policy.c), the D-Bus SetLimits method and
 * `kfdbrokerctl limits` all parse and print limits through these functions,
 * so a value is written the same way everywhere. Pure functions: nothing here
 * allocates, logs or touches the system, which is why kfdbrokerctl can build
 * this file on its own.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "infinity" in a limit field. */
#define POLICY_INFINITY UINT64_MAX

#define POLICY_WEIGHT_MIN 1u
#define POLICY_WEIGHT_MAX 1000u

typedef enum PolicyPriority {
        POLICY_PRIORITY_IDLE,
        POLICY_PRIORITY_LOW,
        POLICY_PRIORITY_NORMAL,
        POLICY_PRIORITY_HIGH,
        _POLICY_PRIORITY_MAX,
} PolicyPriority;

/* ComputeDispatch=: who may run their own kernels, and where. */
typedef enum PolicyCompute {
        POLICY_COMPUTE_NO,       /* no dispatch at all */
        POLICY_COMPUTE_ISOLATED, /* only in a GPU context no other trust domain shares */
        POLICY_COMPUTE_YES,      /* also in a context shared with other clients */
        _POLICY_COMPUTE_MAX,
} PolicyCompute;

/* Isolation=: which sessions share a GPU context (its VM and fault domain). */
typedef enum PolicyIsolation {
        POLICY_ISOLATION_SESSION,  /* each session its own, made on its first dispatch */
        POLICY_ISOLATION_IDENTITY, /* the sessions of one identity (uid, unit, app, container) */
        POLICY_ISOLATION_SHARED,   /* one context for every session that says so */
        _POLICY_ISOLATION_MAX,
} PolicyIsolation;

/* Devices=: which GPUs a session may use, by index (the served order,
 * `kfdbrokerctl status`) or PCI address; n 0 means all. */
#define POLICY_MAX_DEVICES 8u
typedef struct PolicyDevice {
        bool pci;                 /* a PCI address (domain, location), else an index */
        uint32_t index, domain, location;
} PolicyDevice;
typedef struct PolicyDevices {
        unsigned n;
        PolicyDevice v[POLICY_MAX_DEVICES];
} PolicyDevices;

typedef struct PolicyLimits {
        uint64_t buffer_memory;   /* BufferMemory=: bytes of all buffers of a session */
        uint64_t max_buffer_size; /* MaxBufferSize=: bytes of one buffer */
        uint64_t buffers;         /* Buffers= */
        uint64_t events;          /* Events= */
        uint64_t jobs_in_flight;  /* JobsInFlight= */
        uint32_t weight;          /* Weight=, 1..1000 */
        PolicyPriority priority;  /* Priority= */
        PolicyCompute compute_dispatch; /* ComputeDispatch= */
        PolicyIsolation isolation;      /* Isolation= */
        uint64_t job_timeout_ns;  /* JobTimeout=, POLICY_INFINITY = none */
        uint64_t dispatch_timeout_ns; /* DispatchTimeout=: dispatches only, POLICY_INFINITY = none */
        uint64_t user_buffer_memory; /* UserBufferMemory=: bytes of all sessions of the client's uid */
        uint64_t user_buffers;       /* UserBuffers=: buffers and code objects of all sessions of the uid */
        uint64_t unit_buffer_memory; /* UnitBufferMemory=: bytes of all sessions of the client's unit */
        uint64_t user_jobs_in_flight; /* UserJobsInFlight=: unfinished jobs of all sessions of the uid */
        uint64_t queues;          /* Queues=: KFD queues a relayed ROCm process may create (docs/rocm.md) */
        PolicyDevices devices;    /* Devices=: the GPUs a session may use */
} PolicyLimits;

/* The keys of a [Limits] section, in the order they are documented. */
typedef enum PolicyLimitKey {
        POLICY_LIMIT_BUFFER_MEMORY,
        POLICY_LIMIT_MAX_BUFFER_SIZE,
        POLICY_LIMIT_BUFFERS,
        POLICY_LIMIT_EVENTS,
        POLICY_LIMIT_JOBS_IN_FLIGHT,
        POLICY_LIMIT_WEIGHT,
        POLICY_LIMIT_PRIORITY,
        POLICY_LIMIT_COMPUTE_DISPATCH,
        POLICY_LIMIT_ISOLATION,
        POLICY_LIMIT_JOB_TIMEOUT,
        POLICY_LIMIT_DISPATCH_TIMEOUT,
        POLICY_LIMIT_USER_BUFFER_MEMORY,
        POLICY_LIMIT_USER_BUFFERS,
        POLICY_LIMIT_UNIT_BUFFER_MEMORY,
        POLICY_LIMIT_USER_JOBS_IN_FLIGHT,
        POLICY_LIMIT_QUEUES,
        POLICY_LIMIT_DEVICES,
        _POLICY_LIMIT_MAX,
} PolicyLimitKey;

/* The daemon's built-in defaults (the same values as policy/policy.d/00-defaults.conf
 * and the Manager's default WireLimits): 4 GiB per session, 1 GiB per buffer,
 * 4096 buffers, 1024 events, 4096 jobs in flight, weight 1, normal priority,
 * compute dispatch in an isolated context, a context per session, no job
 * timeout, dispatches stopped after a minute on the GPU, no per-user or
 * per-unit memory cap (policy_limits_fit_device() then caps per-user memory
 * to the GPU's), and UserBuffers=16384 (the daemon lowers that to a
 * quarter of its file descriptor limit where that is smaller: on the
 * simulated GPU every buffer holds a daemon fd), and 64 KFD queues for a
 * relayed ROCm process (Queues=). */
void policy_limits_default(PolicyLimits *ret);

/* The least per-user memory cap policy_limits_fit_device() sets: a GPU with
 * little VRAM (an APU's carve-out, the simulated GPU's 1 GiB) still runs the
 * demo, the selftest and bench-broker's 2 x 256 MiB copy in one session. */
#define POLICY_USER_BUFFER_MEMORY_FLOOR (1ull << 30)

/**
 * policy_limits_fit_device() - the defaults that depend on the GPU served,
 * so that one user cannot pin most of its memory: UserBufferMemory= is half
 * the GPU's VRAM (at least POLICY_USER_BUFFER_MEMORY_FLOOR), BufferMemory=
 * and MaxBufferSize= at most that. E.g. 16 GiB of VRAM: 8G per user, 4G per
 * session; 1 GiB of VRAM: 1G each. Lowers, never raises; a vram_size of 0
 * (unknown) changes nothing, and neither does a device that cannot tell
 * when the last copy of a buffer's dma-buf goes (copies_visible false: the
 * simulated GPU's memfds). There a buffer freed while a copy of its fd may
 * live stays charged to its user until the daemon restarts (docs/policy.md
 * "Exported buffers"), so a finite default cap would shut every user out
 * after a lifetime's worth of allocations; a rule that sets one still
 * holds.
 */
void policy_limits_fit_device(PolicyLimits *l, uint64_t vram_size, bool copies_visible);

/* The field of a limit whose value is a number of bytes or a count
 * (BufferMemory=, Buffers=, UserBufferMemory=, ...), or NULL for the others. */
uint64_t *policy_limit_number(PolicyLimits *l, PolicyLimitKey k);
/* Whether the number of @k is bytes (else a count); only for policy_limit_number() keys. */
bool policy_limit_is_bytes(PolicyLimitKey k);

/* The key's name in a policy file ("BufferMemory", …, "DispatchTimeout"), or NULL. */
const char *policy_limit_key_to_string(PolicyLimitKey k);
/* A value from a file or a caller, safe to put into an error message: at most
 * 64 bytes, non-printable bytes as '?', "..." when cut. */
void policy_quote_value(const char *v, char *buf, size_t n);
/* PolicyLimitKey for a policy-file key name (case-sensitive), or -EINVAL. */
int policy_limit_key_from_string(const char *s);

/*
 * policy_limit_parse() - parse one limit's value as a policy file writes it.
 * @k:     which limit.
 * @value: the text after "KEY=", without surrounding blanks.
 * @l:     receives the value in the field of @k; other fields are untouched.
 * @err:   on failure, a message naming the key and the value, e.g.
 *         `invalid Buffers= value "lots": expected a number below 4294967295
 *         or "infinity"` (control characters shown as '?').
 *
 * Applies the same range checks everywhere (sizes at least 1 byte,
 * JobsInFlight at least 1, Weight 1..1000, a non-zero JobTimeout).
 * Returns 0, or -EINVAL for a value that is not allowed.
 */
int policy_limit_parse(PolicyLimitKey k, const char *value, PolicyLimits *l, char *err, size_t errlen);

/*
 * policy_limit_format() - the value of limit @k in @l, written so that
 * policy_limit_parse() reads it back to the same value: "4G", "1536M",
 * "4096", "infinity", "normal", "yes", "1min 30s", "250us". Returns buf.
 */
const char *policy_limit_format(PolicyLimitKey k, const PolicyLimits *l, char *buf, size_t n);

/* Parsers of the value syntax. Each returns 0 or -EINVAL (-ERANGE on overflow). */
int policy_parse_uint(const char *s, uint64_t *ret);      /* decimal digits only */
int policy_parse_bytes(const char *s, uint64_t *ret);     /* 512, 64K, 2G, infinity */
int policy_parse_count(const char *s, uint64_t *ret);     /* 4096, infinity */
int policy_parse_timespan(const char *s, uint64_t *ret_ns); /* 500ms, 1min 30s, infinity */
int policy_parse_boolean(const char *s);                  /* 1/0 or -EINVAL */

/* The inverse of policy_parse_bytes() and policy_parse_timespan(): exact, with
 * the largest suffixes that divide the value ("1536M", "1min 30s"). */
const char *policy_format_bytes(uint64_t v, char *buf, size_t n);
const char *policy_format_timespan(uint64_t ns, char *buf, size_t n);

const char *policy_compute_to_string(PolicyCompute c);        /* "no", "isolated", "yes" */
int policy_compute_from_string(const char *s);                /* also yes/no synonyms; or -EINVAL */
const char *policy_isolation_to_string(PolicyIsolation i);    /* "session", "identity", "shared" */
int policy_isolation_from_string(const char *s);              /* PolicyIsolation or -EINVAL */

const char *policy_priority_to_string(PolicyPriority p);
int policy_priority_from_string(const char *s); /* PolicyPriority or -EINVAL */
/* KFD queue_priority (0..15) for CREATE_QUEUE: idle 0, low 3, normal 7, high 11
 * (libhsakmt's values for thunk priorities MINIMUM, LOW, NORMAL, HIGH). */
uint32_t policy_priority_to_queue_priority(PolicyPriority p);

/* Whether Devices= lets a session use the GPU of that index and PCI address
 * ("0000:03:00.0"; NULL or "" when it has none). */
bool policy_devices_allow(const PolicyDevices *d, unsigned index, const char *pci_address);
