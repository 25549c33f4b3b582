/* SPDX-License-Identifier: MIT */
/*
 * See policy.h. The loader reads each file whole (bounded), walks it line by
 * line and builds a flat array of rules; any error aborts the whole load with
 * "FILE:LINE: message", so the caller keeps its old Policy. User= and Group=
 * names are resolved here, once, so resolving a client is pure matching and
 * never touches NSS on the event loop.
 */
#include "policy/policy.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/conf-files.h"
#include "util/macro.h"

typedef enum MatchKey {
        MATCH_USER,
        MATCH_GROUP,
        MATCH_UNIT,
        MATCH_USER_UNIT,
        MATCH_CGROUP_PREFIX,
        MATCH_APP_ID,
        MATCH_CONTAINER,
        _MATCH_MAX,
} MatchKey;

_Static_assert((int) _MATCH_MAX <= 32 && (int) _POLICY_LIMIT_MAX <= 32, "key_line too small");

static const char *const match_key_names[_MATCH_MAX] = {
        [MATCH_USER] = "User",          [MATCH_GROUP] = "Group",
        [MATCH_UNIT] = "Unit",          [MATCH_USER_UNIT] = "UserUnit",
        [MATCH_CGROUP_PREFIX] = "CgroupPrefix", [MATCH_APP_ID] = "AppId",
        [MATCH_CONTAINER] = "Container",
};

typedef enum ContainerMatch {
        CONTAINER_ANY = 0, /* key not given */
        CONTAINER_YES,
        CONTAINER_NO,
        CONTAINER_GLOB,
} ContainerMatch;

typedef struct PolicyRule {
        const char *file; /* points into Policy.files */
        unsigned line;

        unsigned match_set; /* bit per MatchKey */
        uid_t uid;
        gid_t gid;
        char *unit, *user_unit, *cgroup_prefix, *app_id, *container_glob;
        ContainerMatch container;
        /* User= or Group= named no one this system knows: the rule is kept
         * (its FILE:LINE still reads in the policy) but matches no client. */
        bool matches_none;

        unsigned limit_set; /* bit per LimitKey */
        PolicyLimits limits;
} PolicyRule;

struct Policy {
        PolicyRule *rules;
        size_t n_rules, cap_rules;
        char **files;
        size_t n_files;
        char **warnings; /* "FILE:LINE: message", for the log and `kfdbrokerctl policy check` */
        size_t n_warnings;
};

const char *const policy_default_dirs[] = { POLICY_DIR_ETC, POLICY_DIR_RUN, POLICY_DIR_VENDOR, NULL };

static void rule_done(PolicyRule *r) {
        free(r->unit);
        free(r->user_unit);
        free(r->cgroup_prefix);
        free(r->app_id);
        free(r->container_glob);
}

Policy *policy_free(Policy *p) {
        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_rules; i++)
                rule_done(&p->rules[i]);
        free(p->rules);
        for (size_t i = 0; i < p->n_files; i++)
                free(p->files[i]);
        free(p->files);
        for (size_t i = 0; i < p->n_warnings; i++)
                free(p->warnings[i]);
        free(p->warnings);
        free(p);
        return NULL;
}

size_t policy_n_rules(const Policy *p) {
        return p ? p->n_rules : 0;
}

size_t policy_n_files(const Policy *p) {
        return p ? p->n_files : 0;
}

const char *policy_match_key_to_string(unsigned i) {
        return i < _MATCH_MAX ? match_key_names[i] : NULL;
}

size_t policy_n_warnings(const Policy *p) {
        return p ? p->n_warnings : 0;
}

const char *policy_warning(const Policy *p, size_t i) {
        return p && i < p->n_warnings ? p->warnings[i] : NULL;
}

/* ---- the loader ---- */

typedef enum Section {
        SECTION_NONE,
        SECTION_MATCH,
        SECTION_LIMITS,
} Section;

typedef struct Parser {
        Policy *policy;
        const char *file;
        unsigned line;
        Section section;
        PolicyRule *rule;        /* the rule being filled */
        unsigned rule_has_limits;
        unsigned key_line[32]; /* per MatchKey or LimitKey of the current section */
        char *err;
        size_t errlen;
} Parser;

/* Copies at most 64 bytes of a value for a message, non-printables as '?'. */
static int _printf_(3, 4) parser_error(Parser *ps, int error, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (ps->err && ps->errlen > 0)
                snprintf(ps->err, ps->errlen, "%s:%u: %s", ps->file, ps->line, msg);
        return error;
}

/* A problem that does not stop the load: kept as "FILE:LINE: message". */
static int _printf_(2, 3) parser_warning(Parser *ps, const char *fmt, ...) {
        Policy *p = ps->policy;
        char msg[512], **nw;
        va_list ap;

        if (p->n_warnings >= POLICY_RULES_MAX)
                return 0;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        nw = reallocarray(p->warnings, p->n_warnings + 1, sizeof(char *));
        if (!nw)
                return -ENOMEM;
        p->warnings = nw;
        if (asprintf(&p->warnings[p->n_warnings], "%s:%u: %s", ps->file, ps->line, msg) < 0)
                return -ENOMEM;
        p->n_warnings++;
        return 0;
}

static int parser_new_rule(Parser *ps) {
        Policy *p = ps->policy;

        if (p->n_rules >= POLICY_RULES_MAX)
                return parser_error(ps, -E2BIG, "more than %u rules in total", POLICY_RULES_MAX);
        if (p->n_rules == p->cap_rules) {
                size_t nc = p->cap_rules ? p->cap_rules * 2 : 16;
                PolicyRule *nr = reallocarray(p->rules, nc, sizeof(PolicyRule));

                if (!nr)
                        return -ENOMEM;
                p->rules = nr;
                p->cap_rules = nc;
        }
        ps->rule = &p->rules[p->n_rules++];
        *ps->rule = (PolicyRule) { .file = ps->file, .line = ps->line };
        return 0;
}

/* A rule must set something: a [Match] not followed by [Limits] is an error
 * reported at the [Match] line. */
static int parser_finish_rule(Parser *ps) {
        if (ps->rule && !ps->rule_has_limits) {
                ps->line = ps->rule->line;
                return parser_error(ps, -EINVAL, "[Match] section is not followed by a [Limits] section");
        }
        return 0;
}

static int parse_section(Parser *ps, const char *name) {
        int r;

        if (strcmp(name, "Match") == 0) {
                r = parser_finish_rule(ps);
                if (r < 0)
                        return r;
                r = parser_new_rule(ps);
                if (r < 0)
                        return r;
                ps->rule_has_limits = 0;
                ps->section = SECTION_MATCH;
        } else if (strcmp(name, "Limits") == 0) {
                /* [Limits] right after [Match] belongs to that rule; any other
                 * [Limits] is a rule of its own that matches everyone. */
                if (ps->section != SECTION_MATCH) {
                        r = parser_new_rule(ps);
                        if (r < 0)
                                return r;
                }
                ps->rule_has_limits = 1;
                ps->section = SECTION_LIMITS;
        } else {
                char q[80];

                policy_quote_value(name, q, sizeof(q));
                return parser_error(ps, -EINVAL, "unknown section [%s] (expected [Match] or [Limits])", q);
        }
        memset(ps->key_line, 0, sizeof(ps->key_line));
        return 0;
}

static int resolve_user(const char *v, uid_t *ret) {
        _cleanup_free_ char *buf = NULL;
        struct passwd pw, *res = NULL;
        uint64_t x;
        long sz;
        int r;

        if (policy_parse_uint(v, &x) >= 0) {
                if (x >= UINT32_MAX)
                        return -ERANGE;
                *ret = (uid_t) x;
                return 0;
        }
        sz = sysconf(_SC_GETPW_R_SIZE_MAX);
        for (size_t n = sz > 0 ? (size_t) sz : 4096; n <= 1024 * 1024; n *= 2) {
                free(buf);
                buf = malloc(n);
                if (!buf)
                        return -ENOMEM;
                r = getpwnam_r(v, &pw, buf, n, &res);
                if (r == ERANGE)
                        continue;
                if (r != 0)
                        return -r;
                if (!res)
                        return -ESRCH;
                *ret = pw.pw_uid;
                return 0;
        }
        return -ERANGE;
}

static int resolve_group(const char *v, gid_t *ret) {
        _cleanup_free_ char *buf = NULL;
        struct group gr, *res = NULL;
        uint64_t x;
        long sz;
        int r;

        if (policy_parse_uint(v, &x) >= 0) {
                if (x >= UINT32_MAX)
                        return -ERANGE;
                *ret = (gid_t) x;
                return 0;
        }
        sz = sysconf(_SC_GETGR_R_SIZE_MAX);
        for (size_t n = sz > 0 ? (size_t) sz : 4096; n <= 1024 * 1024; n *= 2) {
                free(buf);
                buf = malloc(n);
                if (!buf)
                        return -ENOMEM;
                r = getgrnam_r(v, &gr, buf, n, &res);
                if (r == ERANGE)
                        continue;
                if (r != 0)
                        return -r;
                if (!res)
                        return -ESRCH;
                *ret = gr.gr_gid;
                return 0;
        }
        return -ERANGE;
}

static int set_string(char **dst, const char *v) {
        char *c = strdup(v);

        if (!c)
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

static int parse_match_key(Parser *ps, MatchKey k, const char *v, const char *q) {
        PolicyRule *rule = ps->rule;
        int r;

        switch (k) {
        case MATCH_USER:
                r = resolve_user(v, &rule->uid);
                /* As systemd-sysusers and tmpfiles do with a user that does
                 * not exist yet: say so and go on. The rule matches no one
                 * rather than the daemon refusing to start for one stale name
                 * (a deleted account, a typo in one of many files). */
                if (r == -ESRCH) {
                        rule->matches_none = true;
                        return parser_warning(ps, "User=%s: no such user; this rule matches no one", q);
                }
                if (r < 0)
                        return parser_error(ps, r == -ENOMEM ? r : -EINVAL,
                                            "User=%s: cannot resolve: %s", q, strerror(-r));
                break;
        case MATCH_GROUP:
                r = resolve_group(v, &rule->gid);
                if (r == -ESRCH) {
                        rule->matches_none = true;
                        return parser_warning(ps, "Group=%s: no such group; this rule matches no one", q);
                }
                if (r < 0)
                        return parser_error(ps, r == -ENOMEM ? r : -EINVAL,
                                            "Group=%s: cannot resolve: %s", q, strerror(-r));
                break;
        case MATCH_UNIT:
                return set_string(&rule->unit, v);
        case MATCH_USER_UNIT:
                return set_string(&rule->user_unit, v);
        case MATCH_APP_ID:
                return set_string(&rule->app_id, v);
        case MATCH_CGROUP_PREFIX: {
                size_t len = strlen(v);

                if (v[0] != '/')
                        return parser_error(ps, -EINVAL,
                                            "CgroupPrefix=%s: must be an absolute cgroup path", q);
                while (len > 1 && v[len - 1] == '/')
                        len--;
                rule->cgroup_prefix = strndup(v, len);
                return rule->cgroup_prefix ? 0 : -ENOMEM;
        }
        case MATCH_CONTAINER:
                r = policy_parse_boolean(v);
                if (r >= 0) {
                        rule->container = r ? CONTAINER_YES : CONTAINER_NO;
                        return 0;
                }
                rule->container = CONTAINER_GLOB;
                return set_string(&rule->container_glob, v);
        default:
                break;
        }
        return 0;
}

static int parse_limit_key(Parser *ps, PolicyLimitKey k, const char *v) {
        char msg[400];
        int r = policy_limit_parse(k, v, &ps->rule->limits, msg, sizeof(msg));

        return r < 0 ? parser_error(ps, r, "%s", msg) : 0;
}

static char *strip(char *s) {
        char *e;

        while (*s == ' ' || *s == '\t')
                s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = 0;
        return s;
}

static int parse_assignment(Parser *ps, char *line) {
        char *eq = strchr(line, '='), *key, *value;
        char qk[80], qv[80];
        int idx = -1;

        if (!eq) {
                policy_quote_value(line, qv, sizeof(qv));
                return parser_error(ps, -EINVAL, "expected KEY=VALUE or [Section], got \"%s\"", qv);
        }
        *eq = 0;
        key = strip(line);
        value = strip(eq + 1);
        policy_quote_value(key, qk, sizeof(qk));
        policy_quote_value(value, qv, sizeof(qv));

        if (ps->section == SECTION_NONE)
                return parser_error(ps, -EINVAL, "%s=%s outside of a section (start with [Match] or [Limits])",
                                    qk, qv);
        if (ps->section == SECTION_MATCH) {
                for (int i = 0; i < _MATCH_MAX; i++)
                        if (strcmp(key, match_key_names[i]) == 0)
                                idx = i;
        } else
                idx = policy_limit_key_from_string(key);
        if (idx < 0)
                return parser_error(ps, -EINVAL, "unknown key \"%s\" in [%s] (value \"%s\")", qk,
                                    ps->section == SECTION_MATCH ? "Match" : "Limits", qv);
        if (ps->key_line[idx])
                return parser_error(ps, -EINVAL, "duplicate key %s=%s in this [%s] section (first set at line %u)",
                                    qk, qv, ps->section == SECTION_MATCH ? "Match" : "Limits",
                                    ps->key_line[idx]);
        if (value[0] == 0)
                return parser_error(ps, -EINVAL, "empty value for %s=", qk);
        ps->key_line[idx] = ps->line;

        if (ps->section == SECTION_MATCH) {
                ps->rule->match_set |= 1u << idx;
                return parse_match_key(ps, (MatchKey) idx, value, qv);
        }
        ps->rule->limit_set |= 1u << idx;
        return parse_limit_key(ps, (PolicyLimitKey) idx, value);
}

static int parse_buffer(Policy *p, const char *file, const char *text, size_t len, char *err,
                        size_t errlen) {
        Parser ps = { .policy = p, .file = file, .err = err, .errlen = errlen };
        char buf[POLICY_LINE_MAX + 2];
        size_t pos = 0;
        int r;

        if (len > POLICY_FILE_MAX)
                return parser_error(&ps, -EFBIG, "file is larger than %u bytes", POLICY_FILE_MAX);
        if (memchr(text, 0, len)) {
                ps.line = 1;
                for (const char *c = text; *c; c++)
                        ps.line += *c == '\n';
                return parser_error(&ps, -EINVAL, "NUL byte in file");
        }

        while (pos < len) {
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t ll = nl ? (size_t) (nl - (text + pos)) : len - pos;
                char *line;

                ps.line++;
                if (ll > POLICY_LINE_MAX)
                        return parser_error(&ps, -EFBIG, "line longer than %u bytes", POLICY_LINE_MAX);
                memcpy(buf, text + pos, ll);
                buf[ll] = 0;
                pos += ll + (nl ? 1 : 0);

                line = strip(buf);
                if (line[0] == 0 || line[0] == '#' || line[0] == ';')
                        continue;
                if (line[0] == '[') {
                        size_t l = strlen(line);

                        if (line[l - 1] != ']') {
                                char q[80];

                                policy_quote_value(line, q, sizeof(q));
                                return parser_error(&ps, -EINVAL, "invalid section header \"%s\"", q);
                        }
                        line[l - 1] = 0;
                        r = parse_section(&ps, line + 1);
                } else
                        r = parse_assignment(&ps, line);
                if (r < 0)
                        return r;
        }
        return parser_finish_rule(&ps);
}

static int policy_new(Policy **ret) {
        *ret = calloc(1, sizeof(Policy));
        return *ret ? 0 : -ENOMEM;
}

static int policy_add_file(Policy *p, const char *name, const char **ret) {
        char **nf = reallocarray(p->files, p->n_files + 1, sizeof(char *));

        if (!nf)
                return -ENOMEM;
        p->files = nf;
        p->files[p->n_files] = strdup(name);
        if (!p->files[p->n_files])
                return -ENOMEM;
        *ret = p->files[p->n_files++];
        return 0;
}

int policy_load_string(const char *text, size_t len, const char *filename, Policy **ret,
                       char *err, size_t errlen) {
        _cleanup_(policy_freep) Policy *p = NULL;
        const char *file;
        int r;

        if (err && errlen > 0)
                err[0] = 0;
        r = policy_new(&p);
        if (r < 0)
                return r;
        r = policy_add_file(p, filename, &file);
        if (r < 0)
                return r;
        r = parse_buffer(p, file, text, len, err, errlen);
        if (r < 0)
                return r;
        r = (int) p->n_rules;
        *ret = TAKE_PTR(p);
        return r;
}

int policy_load(const char *const *dirs, Policy **ret, char *err, size_t errlen) {
        _cleanup_(policy_freep) Policy *p = NULL;
        ConfFile *files = NULL;
        size_t n = 0;
        char dummy[1];
        int r;

        if (!err || errlen == 0) {
                err = dummy;
                errlen = sizeof(dummy);
        }
        err[0] = 0;
        r = policy_new(&p);
        if (r < 0)
                return r;
        r = conf_files_list(dirs, POLICY_FILES_MAX, &files, &n, err, errlen);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *text = NULL;
                size_t len = 0;
                const char *file;

                r = conf_file_read(files[i].path, POLICY_FILE_MAX, &text, &len, err, errlen);
                if (r < 0)
                        break;
                r = policy_add_file(p, files[i].path, &file);
                if (r < 0)
                        break;
                if (len > 0)
                        r = parse_buffer(p, file, text, len, err, errlen);
        }
        conf_files_free(files, n);
        if (r < 0) {
                if (err[0] == 0 && errlen > 1)
                        snprintf(err, errlen, "loading policy: %s", strerror(-r));
                return r;
        }
        r = (int) p->n_rules;
        *ret = TAKE_PTR(p);
        return r;
}

/* ---- matching ---- */

static bool glob_match(const char *pattern, const char *s) {
        return s && fnmatch(pattern, s, 0) == 0;
}

/* "/a/b" matches "/a/b" and "/a/b/c", not "/a/bc"; "/" matches everything. */
static bool cgroup_prefix_match(const char *prefix, const char *cg) {
        size_t l = strlen(prefix);

        if (!cg)
                return false;
        if (l == 1)
                return true;
        return strncmp(cg, prefix, l) == 0 && (cg[l] == 0 || cg[l] == '/');
}

/* The rule names a key that only the client's process can tell (identity.h:
 * unit, user unit, cgroup, app id, container). */
static bool rule_needs_process(const PolicyRule *r) {
        return r->unit || r->user_unit || r->cgroup_prefix || r->app_id || r->container != CONTAINER_ANY;
}

static bool rule_matches(const PolicyRule *r, const Identity *id) {
        if (r->matches_none)
                return false;
        /* Unknown is no match, either way: not even Container=no. */
        if (id->process_unknown && rule_needs_process(r))
                return false;
        if ((r->match_set & (1u << MATCH_USER)) && id->uid != r->uid)
                return false;
        if ((r->match_set & (1u << MATCH_GROUP)) && !identity_has_gid(id, r->gid))
                return false;
        if (r->unit && !glob_match(r->unit, id->unit))
                return false;
        if (r->user_unit && !glob_match(r->user_unit, id->user_unit))
                return false;
        if (r->cgroup_prefix && !cgroup_prefix_match(r->cgroup_prefix, id->cgroup))
                return false;
        if (r->app_id && !glob_match(r->app_id, id->app_id))
                return false;
        switch (r->container) {
        case CONTAINER_YES:
                return id->in_container;
        case CONTAINER_NO:
                return !id->in_container;
        case CONTAINER_GLOB:
                /* The name or short id, the full 64-hex id, or the Kubernetes pod's UID. */
                return id->in_container &&
                       (glob_match(r->container_glob, id->container) ||
                        (id->container_id && glob_match(r->container_glob, id->container_id)) ||
                        (id->pod_uid && glob_match(r->container_glob, id->pod_uid)));
        default:
                return true;
        }
}

static void apply_limits(PolicyLimits *l, const PolicyRule *r) {
        const PolicyLimits *v = &r->limits;
        unsigned s = r->limit_set;

        for (int k = 0; k < _POLICY_LIMIT_MAX; k++)
                if ((s & (1u << k)) && policy_limit_number(l, (PolicyLimitKey) k))
                        *policy_limit_number(l, (PolicyLimitKey) k) =
                                *policy_limit_number((PolicyLimits *) v, (PolicyLimitKey) k);
        if (s & (1u << POLICY_LIMIT_WEIGHT))
                l->weight = v->weight;
        if (s & (1u << POLICY_LIMIT_PRIORITY))
                l->priority = v->priority;
        if (s & (1u << POLICY_LIMIT_COMPUTE_DISPATCH))
                l->compute_dispatch = v->compute_dispatch;
        if (s & (1u << POLICY_LIMIT_ISOLATION))
                l->isolation = v->isolation;
        if (s & (1u << POLICY_LIMIT_JOB_TIMEOUT))
                l->job_timeout_ns = v->job_timeout_ns;
        if (s & (1u << POLICY_LIMIT_DISPATCH_TIMEOUT))
                l->dispatch_timeout_ns = v->dispatch_timeout_ns;
        if (s & (1u << POLICY_LIMIT_DEVICES))
                l->devices = v->devices;
}

int policy_resolve(const Policy *p, const Identity *id, const PolicyLimits *defaults,
                   PolicyLimits *ret, char *matched, size_t n) {
        PolicyLimits l;
        size_t used = 0;
        int count = 0;
        bool truncated = false;

        if (defaults)
                l = *defaults;
        else
                policy_limits_default(&l);
        if (matched && n > 0)
                matched[0] = 0;

        for (size_t i = 0; p && i < p->n_rules; i++) {
                const PolicyRule *r = &p->rules[i];

                if (!rule_matches(r, id))
                        continue;
                apply_limits(&l, r);
                count++;
                if (matched && n > 0 && !truncated) {
                        int w = snprintf(matched + used, n - used, "%s%s:%u", count > 1 ? ", " : "",
                                         r->file, r->line);

                        if (w < 0 || (size_t) w >= n - used) {
                                truncated = true;
                                if (n >= 4)
                                        memcpy(matched + n - 4, "...", 4);
                        } else
                                used += (size_t) w;
                }
        }
        *ret = l;
        return count;
}
