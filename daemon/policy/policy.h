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
#include "policy/identity.h"
#include "policy/policy-limits.h"

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

typedef struct Policy Policy;

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
 * An unknown User=/Group= name is not an error: see policy_n_warnings().
 * Returns the number of rules loaded, or -EINVAL (syntax or value error,
 * described in err), -EFBIG (file or line too long), -E2BIG (too many files
 * or rules), -ENOMEM, or the -errno of opening/reading a file or directory.
 */
int policy_load(const char *const *dirs, Policy **ret, char *err, size_t errlen);

/* The same for one buffer, as if it were the file named by filename (tests). */
int policy_load_string(const char *text, size_t len, const char *filename, Policy **ret,
                       char *err, size_t errlen);

Policy *policy_free(Policy *p);
static inline void policy_freep(Policy **p) {
        if (*p)
                policy_free(*p);
}

size_t policy_n_rules(const Policy *p);
size_t policy_n_files(const Policy *p);

/* What the load let pass but the administrator should fix, each
 * "FILE:LINE: message": a User= or Group= naming no one this system knows
 * (that rule then matches no client). The daemon logs them at every load;
 * `kfdbrokerctl policy check` prints them. */
size_t policy_n_warnings(const Policy *p);

/* The [Match] keys, by index from 0 (NULL past the last): for tests that
 * hold the documentation to the parser. */
const char *policy_match_key_to_string(unsigned i);
const char *policy_warning(const Policy *p, size_t i);

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
