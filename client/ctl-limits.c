/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl limits ID` shows the limits a session runs under (GetSession)
 * and `kfdbrokerctl limits ID KEY=VALUE...` changes them (SetLimits). Keys
 * and values are written as in a policy file's [Limits] section (512M, 30s,
 * yes, infinity) and parsed by the daemon's own policy_limit_parse(), so the
 * command accepts exactly what a policy file does; every argument is checked
 * before anything is sent. The text output is KEY=VALUE lines in the same
 * syntax, ready to paste into a policy file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl-json.h"
#include "policy/policy-limits.h"
#include "util/macro.h"

/* The D-Bus SetLimits/GetSession key of each limit: the policy file's name,
 * except the timeouts, which D-Bus carries in microseconds. */
static const char *bus_key(int k) {
        return k == POLICY_LIMIT_JOB_TIMEOUT        ? "JobTimeoutUSec"
               : k == POLICY_LIMIT_DISPATCH_TIMEOUT ? "DispatchTimeoutUSec"
                                                    : policy_limit_key_to_string((PolicyLimitKey) k);
}

static bool is_timeout(int k) {
        return k == POLICY_LIMIT_JOB_TIMEOUT || k == POLICY_LIMIT_DISPATCH_TIMEOUT;
}

/* The policy file's name, or the D-Bus name (JobTimeoutUSec). */
static int limit_key_from_arg(const char *s) {
        int k = policy_limit_key_from_string(s);

        if (k >= 0)
                return k;
        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if (strcmp(s, bus_key(i)) == 0)
                        return i;
        return -EINVAL;
}

static int parse_session_id(const char *prog, const char *s, uint64_t *ret) {
        if (policy_parse_uint(s, ret) < 0 || *ret == 0) {
                fprintf(stderr, "%s limits: invalid session id '%s' (see '%s sessions')\n", prog, s, prog);
                return -EINVAL;
        }
        return 0;
}

/* ---- show ---- */

typedef struct SessionView {
        uint64_t id, uid;
        char unit[256], user_unit[256], app_id[256], container[256], client[80];
        char policy_rules[512];
        char unknown[128]; /* UnknownFields: identity keys the daemon does not know */
        int overridden;
        PolicyLimits limits;
        unsigned limits_seen; /* bit per PolicyLimitKey */
} SessionView;

static int limits_field(sd_bus_message *m, const char *key, const char *contents, void *userdata) {
        SessionView *v = userdata;
        PolicyLimits *l = &v->limits;
        int k = -1, r;

        for (int i = 0; i < _POLICY_LIMIT_MAX; i++)
                if (strcmp(key, bus_key(i)) == 0)
                        k = i;
        if (k < 0)
                return 0; /* a limit this kfdbrokerctl does not know yet */
        if (k == POLICY_LIMIT_PRIORITY) {
                char p[32];

                r = ctl_bus_read_string(m, contents, p, sizeof(p));
                if (r < 0)
                        return r;
                r = policy_priority_from_string(p);
                if (r < 0)
                        return -EBADMSG;
                l->priority = (PolicyPriority) r;
        } else if (k == POLICY_LIMIT_DEVICES) {
                char p[256], err[256];

                r = ctl_bus_read_string(m, contents, p, sizeof(p));
                if (r < 0)
                        return r;
                if (policy_limit_parse(POLICY_LIMIT_DEVICES, p, l, err, sizeof err) < 0)
                        return -EBADMSG;
        } else if (k == POLICY_LIMIT_COMPUTE_DISPATCH || k == POLICY_LIMIT_ISOLATION) {
                char p[32];

                r = ctl_bus_read_string(m, contents, p, sizeof(p));
                if (r < 0)
                        return r;
                if (k == POLICY_LIMIT_ISOLATION) {
                        r = policy_isolation_from_string(p);
                        if (r < 0)
                                return -EBADMSG;
                        l->isolation = (PolicyIsolation) r;
                } else {
                        r = policy_compute_from_string(p);
                        if (r < 0)
                                return -EBADMSG;
                        l->compute_dispatch = (PolicyCompute) r;
                }
        } else {
                uint64_t x;

                r = ctl_bus_read_number(m, contents, &x);
                if (r < 0)
                        return r;
                if (policy_limit_number(l, (PolicyLimitKey) k))
                        *policy_limit_number(l, (PolicyLimitKey) k) = x;
                else if (k == POLICY_LIMIT_WEIGHT)
                        l->weight = (uint32_t) MIN(x, (uint64_t) UINT32_MAX);
                else { /* *TimeoutUSec: microseconds, 2^64-1 for none */
                        uint64_t ns = x == UINT64_MAX ? POLICY_INFINITY
                                    : x > (POLICY_INFINITY - 1) / 1000 ? POLICY_INFINITY - 1 : x * 1000;
                        if (k == POLICY_LIMIT_JOB_TIMEOUT)
                                l->job_timeout_ns = ns;
                        else
                                l->dispatch_timeout_ns = ns;
                }
        }
        v->limits_seen |= 1u << k;
        return 1;
}

static int session_field(sd_bus_message *m, const char *key, const char *contents, void *userdata) {
        SessionView *v = userdata;
        int r;

        if (strcmp(key, "Id") == 0)
                return ctl_bus_read_number(m, contents, &v->id) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "UID") == 0)
                return ctl_bus_read_number(m, contents, &v->uid) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "Unit") == 0)
                return ctl_bus_read_string(m, contents, v->unit, sizeof(v->unit)) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "UserUnit") == 0)
                return ctl_bus_read_string(m, contents, v->user_unit, sizeof(v->user_unit)) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "AppId") == 0)
                return ctl_bus_read_string(m, contents, v->app_id, sizeof(v->app_id)) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "Container") == 0)
                return ctl_bus_read_string(m, contents, v->container, sizeof(v->container)) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "ClientName") == 0)
                return ctl_bus_read_string(m, contents, v->client, sizeof(v->client)) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "UnknownFields") == 0)
                return ctl_bus_read_string(m, contents, v->unknown, sizeof(v->unknown)) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "PolicyRules") == 0)
                return ctl_bus_read_string(m, contents, v->policy_rules, sizeof(v->policy_rules)) < 0
                               ? -EBADMSG : 1;
        if (strcmp(key, "LimitsOverridden") == 0) {
                if (strcmp(contents, "b") != 0)
                        return -EBADMSG;
                r = sd_bus_message_read(m, "v", "b", &v->overridden);
                return r < 0 ? r : 1;
        }
        if (strcmp(key, "Limits") == 0 && strcmp(contents, "a{sv}") == 0) {
                r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, contents);
                if (r >= 0)
                        r = ctl_bus_read_dict(m, limits_field, v);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                return r < 0 ? r : 1;
        }
        return 0;
}

/* JSON: the session's identity and its Limits dictionary as D-Bus has it. */
static int print_json(sd_bus_message *reply, const SessionView *v) {
        int r;

        printf("{\"id\":%" PRIu64 ",\"uid\":%" PRIu64 ",\"client_name\":", v->id, v->uid);
        json_string(v->client);
        printf(",\"policy_rules\":");
        json_string(v->policy_rules);
        printf(",\"limits_overridden\":%s,\"limits\":", v->overridden ? "true" : "false");

        /* Second pass for the Limits dictionary itself. */
        r = sd_bus_message_rewind(reply, true);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "{sv}");
        while (r >= 0 && (r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read_basic(reply, 's', &key);
                if (r >= 0 && strcmp(key, "Limits") == 0) {
                        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_VARIANT, "a{sv}");
                        if (r >= 0)
                                r = ctl_bus_print_dict(reply, true, "");
                        if (r >= 0)
                                r = sd_bus_message_exit_container(reply);
                        if (r >= 0)
                                printf("}\n");
                        return r;
                }
                if (r >= 0)
                        r = sd_bus_message_skip(reply, "v");
                if (r >= 0)
                        r = sd_bus_message_exit_container(reply);
        }
        return r < 0 ? r : -EBADMSG;
}

static void print_text(const SessionView *v) {
        const char *who = v->app_id[0] ? v->app_id
                        : v->container[0] ? v->container
                        : v->user_unit[0] ? v->user_unit
                        : v->unit[0] ? v->unit : NULL;
        char b1[256], b2[256], b3[512], val[64];

        printf("Session %" PRIu64 ": uid %" PRIu64 "%s%s, client \"%s\"\n", v->id, v->uid, who ? ", " : "",
               who ? ctl_sanitize(who, b1, sizeof(b1)) : "", ctl_sanitize(v->client, b2, sizeof(b2)));
        if (v->unknown[0])
                printf("Unknown to the daemon: %s (no policy rule on them applies)\n",
                       ctl_sanitize(v->unknown, b1, sizeof(b1)));
        if (v->overridden)
                printf("Limits set with SetLimits (policy reloads keep them)\n");
        else if (v->policy_rules[0])
                printf("Limits from the policy rules %s\n", ctl_sanitize(v->policy_rules, b3, sizeof(b3)));
        else
                printf("Limits: the built-in defaults (no policy rule matched)\n");
        for (int k = 0; k < _POLICY_LIMIT_MAX; k++)
                if (v->limits_seen & (1u << k))
                        printf("  %s=%s\n", policy_limit_key_to_string((PolicyLimitKey) k),
                               policy_limit_format((PolicyLimitKey) k, &v->limits, val, sizeof(val)));
}

static int limits_show(const char *prog, bool json, sd_bus *bus, uint64_t id) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        SessionView v = {};
        int r;

        r = ctl_bus_call(prog, bus, "GetSession", &reply, "t", id);
        if (r < 0)
                return r;
        r = ctl_bus_read_dict(reply, session_field, &v);
        if (r >= 0 && json)
                r = print_json(reply, &v);
        else if (r >= 0)
                print_text(&v);
        if (r < 0)
                fprintf(stderr, "%s limits: cannot read the GetSession reply: %s\n", prog, strerror(-r));
        return r;
}

/* ---- set ---- */

/* Parses every KEY=VALUE before anything is sent. Returns 0 or -EINVAL after
 * printing which argument is wrong. */
static int parse_assignments(const char *prog, int argc, char **argv, PolicyLimits *l, unsigned *ret_set) {
        unsigned set = 0;

        policy_limits_default(l);
        for (int i = 0; i < argc; i++) {
                char key[64], err[512];
                const char *eq = strchr(argv[i], '='), *value;
                int k;

                if (!eq || eq == argv[i] || (size_t) (eq - argv[i]) >= sizeof(key)) {
                        fprintf(stderr, "%s limits: expected KEY=VALUE, got '%s'\n", prog,
                                ctl_sanitize(argv[i], err, sizeof(err)));
                        return -EINVAL;
                }
                memcpy(key, argv[i], (size_t) (eq - argv[i]));
                key[eq - argv[i]] = 0;
                value = eq + 1;
                k = limit_key_from_arg(key);
                if (k < 0) {
                        fprintf(stderr,
                                "%s limits: unknown limit '%s' (known: BufferMemory, MaxBufferSize, Buffers, "
                                "Events, JobsInFlight, Weight, Priority, ComputeDispatch, Isolation, JobTimeout, "
                                "DispatchTimeout, UserBufferMemory, UserBuffers, UnitBufferMemory, UserJobsInFlight, Queues)\n",
                                prog, ctl_sanitize(key, err, sizeof(err)));
                        return -EINVAL;
                }
                if (k == POLICY_LIMIT_DEVICES) {
                        fprintf(stderr,
                                "%s limits: Devices= cannot be set on a live session: a session stays on its GPU; "
                                "set it in a policy file (kfdbroker-policy(5)) and reload\n",
                                prog);
                        return -EINVAL;
                }
                if (set & (1u << k)) {
                        fprintf(stderr, "%s limits: %s= is given more than once\n", prog,
                                policy_limit_key_to_string((PolicyLimitKey) k));
                        return -EINVAL;
                }
                if (value[0] == 0) {
                        fprintf(stderr, "%s limits: empty value for %s=\n", prog,
                                ctl_sanitize(key, err, sizeof(err)));
                        return -EINVAL;
                }
                /* JobTimeoutUSec=30000000 would read as 30000000 s in the policy
                 * syntax: insist on a unit rather than guess. */
                if (is_timeout(k) && strcmp(key, bus_key(k)) == 0) {
                        uint64_t x;
                        if (policy_parse_uint(value, &x) >= 0) {
                                fprintf(stderr,
                                        "%s limits: invalid %s= value \"%s\": give a unit, "
                                        "e.g. 30s, 500ms or 250us, or \"infinity\"\n",
                                        prog, bus_key(k), ctl_sanitize(value, err, sizeof(err)));
                                return -EINVAL;
                        }
                }
                if (policy_limit_parse((PolicyLimitKey) k, value, l, err, sizeof(err)) < 0) {
                        fprintf(stderr, "%s limits: %s\n", prog, err);
                        return -EINVAL;
                }
                set |= 1u << k;
        }
        *ret_set = set;
        return 0;
}

static int append_limit(sd_bus_message *m, PolicyLimitKey k, const PolicyLimits *l) {
        const char *key = bus_key(k);

        if (policy_limit_number((PolicyLimits *) l, k))
                return sd_bus_message_append(m, "{sv}", key, "t", *policy_limit_number((PolicyLimits *) l, k));
        switch (k) {
        case POLICY_LIMIT_WEIGHT:
                return sd_bus_message_append(m, "{sv}", key, "u", l->weight);
        case POLICY_LIMIT_PRIORITY:
                return sd_bus_message_append(m, "{sv}", key, "s", policy_priority_to_string(l->priority));
        case POLICY_LIMIT_COMPUTE_DISPATCH:
                return sd_bus_message_append(m, "{sv}", key, "s", policy_compute_to_string(l->compute_dispatch));
        case POLICY_LIMIT_ISOLATION:
                return sd_bus_message_append(m, "{sv}", key, "s", policy_isolation_to_string(l->isolation));
        case POLICY_LIMIT_JOB_TIMEOUT:
        case POLICY_LIMIT_DISPATCH_TIMEOUT: {
                /* Whole microseconds: the syntax's smallest unit. */
                uint64_t ns = k == POLICY_LIMIT_JOB_TIMEOUT ? l->job_timeout_ns : l->dispatch_timeout_ns;
                return sd_bus_message_append(m, "{sv}", key, "t", ns == POLICY_INFINITY ? UINT64_MAX : ns / 1000);
        }
        default:
                return -EINVAL;
        }
}

static int limits_set(const char *prog, sd_bus *bus, uint64_t id, const PolicyLimits *l, unsigned set) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        char err[1024];
        int r;

        r = ctl_bus_new_call(bus, "SetLimits", &m);
        if (r >= 0)
                r = sd_bus_message_append(m, "t", id);
        if (r >= 0)
                r = sd_bus_message_open_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        for (int k = 0; r >= 0 && k < _POLICY_LIMIT_MAX; k++)
                if (set & (1u << k))
                        r = append_limit(m, (PolicyLimitKey) k, l);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r < 0) {
                fprintf(stderr, "%s limits: cannot build the SetLimits call: %s\n", prog, strerror(-r));
                return r;
        }
        r = ctl_bus_send(bus, m, NULL, err, sizeof(err));
        if (r < 0)
                fprintf(stderr, "%s: %s\n", prog, err);
        return r;
}

int ctl_limits(const char *prog, bool json, int argc, char **argv) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        PolicyLimits l;
        unsigned set = 0;
        uint64_t id;
        int r;

        if (argc < 2) {
                fprintf(stderr, "%s limits: missing session id: %s limits ID [KEY=VALUE...]\n", prog, prog);
                return CTL_EXIT_USAGE;
        }
        if (parse_session_id(prog, argv[1], &id) < 0)
                return CTL_EXIT_USAGE;
        if (argc > 2) {
                if (json) {
                        fprintf(stderr, "%s limits: --json applies to showing limits, not to setting them\n",
                                prog);
                        return CTL_EXIT_USAGE;
                }
                if (parse_assignments(prog, argc - 2, argv + 2, &l, &set) < 0)
                        return CTL_EXIT_USAGE;
        }

        r = ctl_bus_open(prog, &bus);
        if (r < 0)
                return r;
        if (argc == 2)
                r = limits_show(prog, json, bus, id);
        else
                r = limits_set(prog, bus, id, &l, set);
        return r < 0 ? r : 0;
}
