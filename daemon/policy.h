/* SPDX-License-Identifier: MIT */
/*
 * Policy: the administrator's rules that turn a client Identity into the
 * limits its session gets. Rules come from *.conf files in policy.d
 * directories (format in docs/policy.md and kfdbroker-policy(5)); a loaded
 * Policy is immutable, so the Manager swaps the whole object on reload and a
 * broken file never leaves half a policy behind. The Manager owns the
 * current Policy; sessions keep the PolicyLimits resolved for them, not a
 * pointer into the Policy.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "identity.h"

/* "infinity" in a limit field. */
#define POLICY_INFINITY UINT64_MAX

/* Directories read by default, most important first (a file name in an
 * earlier directory hides the same name in a later one): the administrator's
 * /etc, runtime drop-ins in /run, and the vendor directory meson installs
 * policy/policy.d to ($prefix/$datadir/kfdbroker/policy.d, from config.h). */
#define POLICY_DIR_ETC "/etc/kfdbroker/policy.d"
#define POLICY_DIR_RUN "/run/kfdbroker/policy.d"
#define POLICY_DIR_VENDOR KFDBROKER_POLICY_VENDOR_DIR
/* NULL-terminated, for policy_load(). */
extern const char *const policy_default_dirs[];

/* Bounds that keep a hostile or broken file from hurting the daemon. */
#define POLICY_FILE_MAX (1024u * 1024u) /* bytes per file */
#define POLICY_LINE_MAX 4096u           /* bytes per line, newline excluded */
#define POLICY_FILES_MAX 1024u          /* *.conf files over all directories */
#define POLICY_RULES_MAX 16384u         /* rules over all files */

#define POLICY_WEIGHT_MIN 1u
#define POLICY_WEIGHT_MAX 1000u

typedef enum PolicyPriority {
        POLICY_PRIORITY_IDLE,
        POLICY_PRIORITY_LOW,
        POLICY_PRIORITY_NORMAL,
        POLICY_PRIORITY_HIGH,
        _POLICY_PRIORITY_MAX,
} PolicyPriority;

typedef struct PolicyLimits {
        uint64_t buffer_memory;   /* BufferMemory=: bytes of all buffers of a session */
        uint64_t max_buffer_size; /* MaxBufferSize=: bytes of one buffer */
        uint64_t buffers;         /* Buffers= */
        uint64_t events;          /* Events= */
        uint64_t jobs_in_flight;  /* JobsInFlight= */
        uint32_t weight;          /* Weight=, 1..1000 */
        PolicyPriority priority;  /* Priority= */
        bool compute_dispatch;    /* ComputeDispatch= */
        uint64_t job_timeout_ns;  /* JobTimeout=, POLICY_INFINITY = none */
} PolicyLimits;

typedef struct Policy Policy;

/* The daemon's built-in defaults (the same values as policy/policy.d/00-defaults.conf
 * and the Manager's default WireLimits): 4 GiB per session, 1 GiB per buffer,
 * 4096 buffers, 1024 events, 4096 jobs in flight, weight 1, normal priority,
 * compute dispatch allowed, no job timeout. */
void policy_limits_default(PolicyLimits *ret);

/*
 * policy_load() - read every *.conf file of dirs into a new Policy.
 * @dirs: NULL-terminated list, most important first; missing directories
 *        are skipped. Files are read in the order of their names over all
 *        directories; a name found in several directories is read only from
 *        the first (so /etc/kfdbroker/policy.d/00-defaults.conf replaces the
 *        shipped file, and a symlink to /dev/null or an empty file masks it).
 * @ret:  the new Policy on success, untouched on failure.
 * @err:  on failure "FILE:LINE: message" (or "DIR: message"), NUL-terminated.
 *
 * Returns the number of rules loaded, or -EINVAL (syntax or value error,
 * described in err), -EFBIG (file or line too long), -E2BIG (too many files
 * or rules), -ENOMEM, or the -errno of opening/reading a file or directory.
 */
int policy_load(const char *const *dirs, Policy **ret, char *err, size_t errlen);

/* The same for one buffer, as if it were the file named by filename (tests,
 * `kfdbrokerctl limits --check`). */
int policy_load_string(const char *text, size_t len, const char *filename, Policy **ret,
                       char *err, size_t errlen);

Policy *policy_free(Policy *p);
static inline void policy_freep(Policy **p) {
        if (*p)
                policy_free(*p);
}

size_t policy_n_rules(const Policy *p);
size_t policy_n_files(const Policy *p);

/*
 * policy_resolve() - the limits for one client.
 * @p:        may be NULL (then *ret = *defaults).
 * @defaults: starting values; NULL means policy_limits_default().
 * @ret:      defaults overridden key by key by every matching rule, in order.
 * @matched:  if non-NULL, receives "FILE:LINE, FILE:LINE" of the matching
 *            rules (the line of their [Match] or lone [Limits]), or "" if none
 *            matched; truncated with "..." to n bytes.
 * Returns the number of matching rules.
 */
int policy_resolve(const Policy *p, const Identity *id, const PolicyLimits *defaults,
                   PolicyLimits *ret, char *matched, size_t n);

const char *policy_priority_to_string(PolicyPriority p);
int policy_priority_from_string(const char *s); /* PolicyPriority or -EINVAL */
/* KFD queue_priority (0..15) for CREATE_QUEUE: idle 0, low 3, normal 7, high 11
 * (libhsakmt's values for thunk priorities MINIMUM, LOW, NORMAL, HIGH). */
uint32_t policy_priority_to_queue_priority(PolicyPriority p);

/* Parsers of the value syntax, shared with `kfdbrokerctl limits` and the
 * D-Bus SetLimits method. Each returns 0 or -EINVAL (-ERANGE on overflow). */
int policy_parse_bytes(const char *s, uint64_t *ret);     /* 512, 64K, 2G, infinity */
int policy_parse_count(const char *s, uint64_t *ret);     /* 4096, infinity */
int policy_parse_timespan(const char *s, uint64_t *ret_ns); /* 500ms, 1min 30s, infinity */
int policy_parse_boolean(const char *s);                  /* 1/0 or -EINVAL */
