/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl's read-only management verbs over the socket, for a daemon
 * run without D-Bus (README "Running the daemon yourself"): `sessions`,
 * `accounting` and `limits ID` with --socket ask ListSessions
 * (kfdb_sessions_list()) and print what the D-Bus verbs print, for the
 * caller's own uid's sessions (root: every session). What needs the bus —
 * identities, metrics, top, setting limits, reload — is said so.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl-compute.h"
#include "ctl-json.h"
#include "ctl-socket.h"
#include "util/macro.h"

/* Every session the daemon shows this caller, page by page; malloc'd. */
static int list_all(kfdb_session *s, const char *prog, kfdb_session_info **ret, size_t *ret_n) {
        _cleanup_free_ kfdb_session_info *all = NULL;
        size_t n = 0, cap = 0;
        uint64_t after = 0;
        bool more = true;

        while (more) {
                size_t got = 0;
                int r;

                if (n + CTL_SOCKET_PAGE > cap) {
                        kfdb_session_info *a = reallocarray(all, cap + 4 * CTL_SOCKET_PAGE, sizeof(*all));

                        if (!a)
                                return -ENOMEM;
                        all = a;
                        cap += 4 * CTL_SOCKET_PAGE;
                }
                r = kfdb_sessions_list(s, after, all + n, CTL_SOCKET_PAGE, &got, &more);
                if (r < 0)
                        return ctl_print_failure(s, prog, r, "ListSessions failed");
                if (got == 0)
                        break;
                n += got;
                after = all[n - 1].id;
        }
        *ret = TAKE_PTR(all);
        *ret_n = n;
        return 0;
}

static const char *container_text(const kfdb_session_info *i, char *buf, size_t n) {
        if (i->app_id[0])
                snprintf(buf, n, "%s", i->app_id);
        else if (i->container[0] && i->pod_uid[0])
                snprintf(buf, n, "%s (pod %s)", i->container, i->pod_uid);
        else
                snprintf(buf, n, "%s", i->container[0] ? i->container : "-");
        return buf;
}

int ctl_socket_sessions(kfdb_session *s, const char *prog, bool json) {
        _cleanup_free_ kfdb_session_info *list = NULL;
        size_t n = 0;
        int r = list_all(s, prog, &list, &n);

        if (r < 0)
                return r;
        if (json)
                putchar('[');
        else
                printf("%-6s %-7s %-7s %-8s %-28s %-20s %s\n", "ID", "UID", "GID", "PID", "UNIT", "APP/CONTAINER",
                       "CLIENT");
        for (size_t k = 0; k < n; k++) {
                const kfdb_session_info *i = &list[k];

                if (json) {
                        printf("%s{\"id\":%" PRIu64 ",\"uid\":%" PRIu32 ",\"gid\":%" PRIu32 ",\"pid\":%" PRIu32,
                               k ? "," : "", i->id, i->uid, i->gid, i->pid);
                        json_member_string(",", "unit", i->unit);
                        json_member_string(",", "app_id", i->app_id);
                        json_member_string(",", "container", i->container);
                        json_member_string(",", "container_id", i->container_id);
                        json_member_string(",", "pod_uid", i->pod_uid);
                        json_member_string(",", "client_name", i->client_name);
                        putchar('}');
                } else {
                        char u[256], a[320], c[320], nm[256];

                        printf("%-6" PRIu64 " %-7" PRIu32 " %-7" PRIu32 " %-8" PRIu32 " %-28s %-20s %s\n", i->id,
                               i->uid, i->gid, i->pid, i->unit[0] ? ctl_sanitize(i->unit, u, sizeof(u)) : "-",
                               ctl_sanitize(container_text(i, c, sizeof(c)), a, sizeof(a)),
                               ctl_sanitize(i->client_name, nm, sizeof(nm)));
                }
        }
        if (json)
                printf("]\n");
        return 0;
}

/* A limit's value in JSON: the number for bytes, counts and time spans (2^64-1 as
 * "infinity", as the D-Bus verbs print it), the word for the others. */
static void json_limit(const kfdb_policy_limit *l) {
        char key[64];

        printf("\"%s\":", json_key_convert(l->key, key, sizeof(key)));
        if (strcmp(l->key, "Priority") == 0 || strcmp(l->key, "ComputeDispatch") == 0 ||
            strcmp(l->key, "Isolation") == 0)
                json_string(l->value);
        else
                json_uint64(l->number);
}

static void print_limits_json(const kfdb_session_info *i) {
        putchar('{');
        for (size_t k = 0; k < i->n_limits; k++) {
                if (k)
                        putchar(',');
                json_limit(&i->limits[k]);
        }
        putchar('}');
}

int ctl_socket_accounting(kfdb_session *s, const char *prog, bool json) {
        _cleanup_free_ kfdb_session_info *list = NULL;
        size_t n = 0;
        int r = list_all(s, prog, &list, &n);

        if (r < 0)
                return r;
        if (json)
                printf("{\"sessions\":[");
        else
                printf("Sessions:\n");
        for (size_t k = 0; k < n; k++) {
                const kfdb_session_info *i = &list[k];
                char b[4][320];

                if (json) {
                        printf("%s{\"id\":%" PRIu64 ",\"uid\":%" PRIu32 ",\"gid\":%" PRIu32 ",\"pid\":%" PRIu32,
                               k ? "," : "", i->id, i->uid, i->gid, i->pid);
                        json_member_string(",", "client_name", i->client_name);
                        json_member_string(",", "unit", i->unit);
                        json_member_string(",", "user_unit", i->user_unit);
                        json_member_string(",", "app_id", i->app_id);
                        json_member_string(",", "container", i->container);
                        json_member_string(",", "container_id", i->container_id);
                        json_member_string(",", "pod_uid", i->pod_uid);
                        printf(",\"opened_nsec\":%" PRIu64 ",\"buffers\":%" PRIu32 ",\"events\":%" PRIu32
                               ",\"jobs_in_flight\":%" PRIu32 ",\"context_bytes\":%" PRIu64,
                               i->opened_ns, i->buffers, i->events, i->jobs_in_flight, i->context_bytes);
                        json_member_string(",", "policy_rules", i->policy_rules);
                        printf(",\"limits_overridden\":%s,\"limits\":", i->limits_overridden ? "true" : "false");
                        print_limits_json(i);
                        printf(",\"usage\":{\"jobs_submitted\":%" PRIu64 ",\"jobs_completed\":%" PRIu64
                               ",\"jobs_failed\":%" PRIu64 ",\"busy_nsec_sdma\":%" PRIu64
                               ",\"busy_nsec_compute\":%" PRIu64 ",\"bytes_copied\":%" PRIu64
                               ",\"bytes_filled\":%" PRIu64 ",\"buffer_bytes\":%" PRIu64 "}}",
                               i->jobs_submitted, i->jobs_completed, i->jobs_failed, i->busy_ns_sdma,
                               i->busy_ns_compute, i->bytes_copied, i->bytes_filled, i->buffer_bytes);
                        continue;
                }
                if (k)
                        putchar('\n');
                printf("  Id                   %" PRIu64 "\n  UID                  %" PRIu32 "\n"
                       "  PID                  %" PRIu32 "\n  ClientName           %s\n  Unit                 %s\n"
                       "  AppId/Container      %s\n  Buffers              %" PRIu32 "\n"
                       "  Events               %" PRIu32 "\n  JobsInFlight         %" PRIu32 "\n"
                       "  PolicyRules          %s\n  Usage:\n    JobsSubmitted        %" PRIu64 "\n"
                       "    JobsCompleted        %" PRIu64 "\n    JobsFailed           %" PRIu64 "\n"
                       "    BusyNSecSDMA         %" PRIu64 "\n    BusyNSecCompute      %" PRIu64 "\n"
                       "    BytesCopied          %" PRIu64 "\n    BytesFilled          %" PRIu64 "\n"
                       "    BufferBytes          %" PRIu64 "\n",
                       i->id, i->uid, i->pid, ctl_sanitize(i->client_name, b[0], sizeof(b[0])),
                       i->unit[0] ? ctl_sanitize(i->unit, b[1], sizeof(b[1])) : "-",
                       ctl_sanitize(container_text(i, b[3], sizeof(b[3])), b[2], sizeof(b[2])), i->buffers,
                       i->events, i->jobs_in_flight, i->policy_rules[0] ? i->policy_rules : "-",
                       i->jobs_submitted, i->jobs_completed, i->jobs_failed, i->busy_ns_sdma, i->busy_ns_compute,
                       i->bytes_copied, i->bytes_filled, i->buffer_bytes);
        }
        if (json)
                printf("]}\n");
        else
                printf("%s\nIdentities: only over D-Bus (kfdbrokerd --bus=system)\n", n ? "" : "  (none)\n");
        return 0;
}

int ctl_socket_limits(kfdb_session *s, const char *prog, bool json, uint64_t id) {
        _cleanup_free_ kfdb_session_info *list = NULL;
        const kfdb_session_info *i = NULL;
        char b[2][320];
        size_t n = 0;
        int r = list_all(s, prog, &list, &n);

        if (r < 0)
                return r;
        for (size_t k = 0; k < n; k++)
                if (list[k].id == id)
                        i = &list[k];
        if (!i) {
                fprintf(stderr, "%s limits: no session %" PRIu64 " of this user (root sees every session)\n", prog,
                        id);
                return -ENOENT;
        }
        if (json) {
                printf("{\"id\":%" PRIu64 ",\"uid\":%" PRIu32, i->id, i->uid);
                json_member_string(",", "client_name", i->client_name);
                json_member_string(",", "policy_rules", i->policy_rules);
                printf(",\"limits_overridden\":%s,\"limits\":", i->limits_overridden ? "true" : "false");
                print_limits_json(i);
                printf("}\n");
                return 0;
        }
        printf("Session %" PRIu64 ": uid %" PRIu32 ", client \"%s\"\n", i->id, i->uid,
               ctl_sanitize(i->client_name, b[0], sizeof(b[0])));
        if (i->limits_overridden)
                printf("Limits set with SetLimits (policy reloads keep them)\n");
        else if (i->policy_rules[0])
                printf("Limits from the policy rules %s\n", ctl_sanitize(i->policy_rules, b[1], sizeof(b[1])));
        else
                printf("Limits: the built-in defaults (no policy rule matched)\n");
        for (size_t k = 0; k < i->n_limits; k++)
                printf("  %s=%s\n", ctl_sanitize(i->limits[k].key, b[0], sizeof(b[0])),
                       ctl_sanitize(i->limits[k].value, b[1], sizeof(b[1])));
        return 0;
}
