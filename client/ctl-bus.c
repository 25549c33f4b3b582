/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl's verbs that read the daemon's D-Bus management API
 * (org.kfdbroker.Broker1 on the system bus, or $DBUS_SYSTEM_BUS_ADDRESS):
 * sessions, accounting and metrics, and the helpers that `top` (ctl-top.c)
 * and `limits` (ctl-limits.c) share with them: calling a method with the
 * D-Bus error's own message on failure, walking an a{sv}, and making strings
 * from the daemon safe for a terminal (unit and container names come from
 * cgroup paths, which a delegated user can name). They see every client of
 * the daemon, where the socket verbs see only the caller's own session.
 * Dictionaries (a{sv}) are printed generically, so fields the daemon adds
 * later show up without a change here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "ctl-bus.h"
#include "ctl-json.h"
#include "ctl-polkit.h"
#include "util/macro.h"

#define BROKER_NAME "org.kfdbroker.Broker1"
#define BROKER_PATH "/org/kfdbroker/Broker1"
#define BROKER_INTERFACE "org.kfdbroker.Broker1"

static bool ask_password = true;

void ctl_bus_set_ask_password(bool ask) {
        ask_password = ask;
}

/* What a D-Bus verb's failure to reach the daemon adds: a daemon started
 * by hand ("Running the daemon yourself" in README) serves only its socket. */
#define BUS_HINT "\n%s: this command uses kfdbrokerd's D-Bus API on the system bus (kfdbrokerd --bus=system, " \
                 "as the shipped service runs it); a daemon without it serves only the socket: " \
                 "'status' (your sessions' GPU contexts) and 'terminate ID' work there"

int ctl_bus_open(const char *prog, sd_bus **ret) {
        int r = sd_bus_open_system(ret);

        if (r < 0) {
                fprintf(stderr, "%s: cannot connect to the system bus: %s" BUS_HINT "\n", prog, strerror(-r), prog);
                return r;
        }
        /* Every call may then be authorized interactively (the daemon tells polkit). */
        r = sd_bus_set_allow_interactive_authorization(*ret, ask_password);
        if (r < 0) {
                fprintf(stderr, "%s: cannot set up the bus connection: %s\n", prog, strerror(-r));
                *ret = sd_bus_unref(*ret);
        }
        return r;
}

/* The methods whose authorization polkit may ask a password for; the listing
 * methods fall back to the caller's own sessions instead (docs/dbus.md). */
static bool method_may_ask(const char *method) {
        static const char *const asking[] = { "SetLimits", "ReloadPolicy", "TerminateSession", "GetMetrics",
                                              "GetSession" };

        for (size_t i = 0; i < ELEMENTSOF(asking); i++)
                if (strcmp(method, asking[i]) == 0)
                        return true;
        return false;
}

int ctl_bus_new_call(sd_bus *bus, const char *method, sd_bus_message **ret) {
        return sd_bus_message_new_method_call(bus, ret, BROKER_NAME, BROKER_PATH, BROKER_INTERFACE, method);
}

int ctl_bus_send(sd_bus *bus, sd_bus_message *m, sd_bus_message **ret, char *err, size_t errlen) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *method = sd_bus_message_get_member(m);
        uint64_t timeout = 0; /* sd-bus's default, 25 s */
        int r;

        if (ask_password && method && method_may_ask(method)) {
                ctl_polkit_agent_open();
                /* Time for someone to type a password. */
                timeout = CTL_BUS_INTERACTIVE_TIMEOUT_USEC;
        }
        r = sd_bus_call(bus, m, timeout, &error, ret);
        if (r < 0) {
                /* Only now: the header moves while arguments are appended and at sealing. */
                method = sd_bus_message_get_member(m);
                if (sd_bus_error_has_name(&error, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
                    sd_bus_error_has_name(&error, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        snprintf(err, errlen,
                                 "%s is not on the system bus (is kfdbrokerd running, with --bus=system? "
                                 "Without it, only the socket's commands work: status, device, demo, selftest, "
                                 "terminate)",
                                 BROKER_NAME);
                else
                        snprintf(err, errlen, "%s failed: %s", method,
                                 error.message ? error.message : strerror(-r));
                sd_bus_error_free(&error);
        }
        return r;
}

int ctl_bus_callv(sd_bus *bus, const char *method, sd_bus_message **ret, char *err, size_t errlen,
                  const char *types, va_list ap) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = ctl_bus_new_call(bus, method, &m);
        if (r >= 0 && types)
                r = sd_bus_message_appendv(m, types, ap);
        if (r < 0) {
                snprintf(err, errlen, "cannot build the %s call: %s", method, strerror(-r));
                return r;
        }
        return ctl_bus_send(bus, m, ret, err, errlen);
}

int ctl_bus_call(const char *prog, sd_bus *bus, const char *method, sd_bus_message **ret,
                 const char *types, ...) {
        char err[1024];
        va_list ap;
        int r;

        va_start(ap, types);
        r = ctl_bus_callv(bus, method, ret, err, sizeof(err), types, ap);
        va_end(ap);
        if (r < 0)
                fprintf(stderr, "%s: %s\n", prog, err);
        return r;
}

/* Opens the bus and calls a method without arguments. */
static int bus_call(const char *prog, const char *method, sd_bus **ret_bus, sd_bus_message **ret) {
        sd_bus *bus = NULL;
        int r;

        r = ctl_bus_open(prog, &bus);
        if (r < 0)
                return r;
        r = ctl_bus_call(prog, bus, method, ret, NULL);
        if (r < 0) {
                sd_bus_unref(bus);
                return r;
        }
        *ret_bus = bus;
        return 0;
}

const char *ctl_sanitize(const char *s, char *buf, size_t n) {
        size_t i = 0;

        if (n == 0)
                return buf;
        for (; s[i] && i + 1 < n; i++) {
                unsigned char c = (unsigned char) s[i];
                buf[i] = c < 0x20 || c == 0x7f ? '?' : (char) c;
        }
        buf[i] = 0;
        return buf;
}

int ctl_bus_read_dict(sd_bus_message *m, CtlDictFn fn, void *userdata) {
        int r;

        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key, *contents;

                r = sd_bus_message_read_basic(m, 's', &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r < 0)
                        return r;
                r = fn(m, key, contents, userdata);
                if (r == 0)
                        r = sd_bus_message_skip(m, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

int ctl_bus_read_number(sd_bus_message *m, const char *contents, uint64_t *ret) {
        uint32_t u;
        int r;

        if (strcmp(contents, "t") == 0)
                return sd_bus_message_read(m, "v", "t", ret);
        if (strcmp(contents, "u") != 0)
                return -EBADMSG;
        r = sd_bus_message_read(m, "v", "u", &u);
        if (r >= 0)
                *ret = u;
        return r;
}

int ctl_bus_read_string(sd_bus_message *m, const char *contents, char *buf, size_t n) {
        const char *s;
        int r;

        if (strcmp(contents, "s") != 0)
                return -EBADMSG;
        r = sd_bus_message_read(m, "v", "s", &s);
        if (r >= 0)
                snprintf(buf, n, "%s", s);
        return r;
}

/* A string value in text mode: control characters shown as '?', except that
 * a multi-line value (DrmUsage) continues on lines indented to column, with
 * its tabs as spaces. */
static void print_text_block(const char *s, size_t column) {
        for (const char *line = s; *line;) {
                size_t n = strcspn(line, "\n");
                char buf[1024];

                if (line != s)
                        printf("\n%*s", (int) MIN(column, (size_t) 200), "");
                snprintf(buf, sizeof(buf), "%.*s", (int) MIN(n, sizeof(buf) - 1), line);
                for (char *c = buf; *c; c++)
                        if (*c == '\t')
                                *c = ' ';
                fputs(ctl_sanitize(buf, buf, sizeof(buf)), stdout);
                line += n;
                if (*line == '\n')
                        line++;
        }
}

/* Prints one variant of a basic type (the a{sv} values the daemon sends);
 * column is where a text value starts, for continuation lines. */
static int print_variant(sd_bus_message *m, bool json, size_t column) {
        const char *contents = NULL;
        char type;
        int r;

        r = sd_bus_message_peek_type(m, &type, &contents);
        if (r <= 0)
                return r < 0 ? r : -EBADMSG;
        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, contents);
        if (r < 0)
                return r;
        switch (contents[0]) {
        case SD_BUS_TYPE_STRING: {
                const char *s;
                r = sd_bus_message_read_basic(m, 's', &s);
                if (r >= 0) {
                        if (json)
                                json_string(s);
                        else if (s[0])
                                print_text_block(s, column);
                        else
                                putchar('-');
                }
                break;
        }
        case SD_BUS_TYPE_UINT64: {
                uint64_t v;
                r = sd_bus_message_read_basic(m, 't', &v);
                if (r >= 0 && json)
                        json_uint64(v);
                else if (r >= 0 && v == CTL_UINT64_INFINITY)
                        fputs("infinity", stdout);
                else if (r >= 0)
                        printf("%" PRIu64, v);
                break;
        }
        case SD_BUS_TYPE_INT64: {
                int64_t v;
                r = sd_bus_message_read_basic(m, 'x', &v);
                if (r >= 0)
                        printf("%" PRIi64, v);
                break;
        }
        case SD_BUS_TYPE_UINT32: {
                uint32_t v;
                r = sd_bus_message_read_basic(m, 'u', &v);
                if (r >= 0)
                        printf("%" PRIu32, v);
                break;
        }
        case SD_BUS_TYPE_INT32: {
                int32_t v;
                r = sd_bus_message_read_basic(m, 'i', &v);
                if (r >= 0)
                        printf("%" PRIi32, v);
                break;
        }
        case SD_BUS_TYPE_BOOLEAN: {
                int v;
                r = sd_bus_message_read_basic(m, 'b', &v);
                if (r >= 0)
                        fputs(v ? "true" : "false", stdout);
                break;
        }
        case SD_BUS_TYPE_DOUBLE: {
                double v;
                char buf[32];
                r = sd_bus_message_read_basic(m, 'd', &v);
                if (r >= 0 && json)
                        json_double(v);
                else if (r >= 0)
                        fputs(format_double_exact(v, buf, sizeof(buf)), stdout);
                break;
        }
        case SD_BUS_TYPE_ARRAY:
                if (strcmp(contents, "at") == 0) {
                        /* One number per GPU (BusyNSecByGPU): "12 34", or a JSON array. */
                        const uint64_t *v;
                        size_t size;

                        r = sd_bus_message_read_array(m, 't', (const void **) &v, &size);
                        if (r < 0)
                                break;
                        fputs(json ? "[" : "", stdout);
                        for (size_t i = 0; i < size / sizeof(uint64_t); i++)
                                printf("%s%" PRIu64, i == 0 ? "" : json ? "," : " ", v[i]);
                        fputs(json ? "]" : size == 0 ? "-" : "", stdout);
                        break;
                }
                _fallthrough_;
        default:
                /* Not a basic type this verb knows how to show: skip it. */
                r = sd_bus_message_skip(m, contents);
                if (r >= 0)
                        fputs(json ? "null" : "-", stdout);
                break;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

int ctl_bus_print_dict(sd_bus_message *m, bool json, const char *indent) {
        bool first = true;
        int r;

        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        if (json)
                putchar('{');
        while ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key;

                const char *contents = NULL;
                bool nested;

                r = sd_bus_message_read_basic(m, 's', &key);
                if (r >= 0)
                        r = sd_bus_message_peek_type(m, NULL, &contents);
                if (r < 0)
                        return r;
                /* Usage and Limits of a session are dictionaries of their own. */
                nested = contents && strcmp(contents, "a{sv}") == 0;
                if (json) {
                        printf("%s", first ? "" : ",");
                        json_key(key);
                        putchar(':');
                } else if (nested)
                        printf("%s%s:\n", indent, key);
                else
                        printf("%s%-20s ", indent, key);
                if (nested) {
                        char deeper[64];

                        snprintf(deeper, sizeof(deeper), "%s  ", indent);
                        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, contents);
                        if (r >= 0)
                                r = ctl_bus_print_dict(m, json, deeper);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(m);
                } else
                        r = print_variant(m, json, strlen(indent) + 21);
                if (r < 0)
                        return r;
                if (!json && !nested)
                        putchar('\n');
                first = false;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        if (json)
                putchar('}');
        return sd_bus_message_exit_container(m);
}

/* One session of GetAccounting, as `sessions` shows it. */
typedef struct SessionRow {
        uint64_t id, uid, gid, pid;
        char unit[256], app[256], container[256], container_id[80], pod_uid[48], name[256];
} SessionRow;

static int session_row_field(sd_bus_message *m, const char *key, const char *contents, void *userdata) {
        SessionRow *row = userdata;
        static const struct {
                const char *key;
                size_t offset, size;
        } strings[] = {
                { "Unit", offsetof(SessionRow, unit), sizeof(((SessionRow *) 0)->unit) },
                { "AppId", offsetof(SessionRow, app), sizeof(((SessionRow *) 0)->app) },
                { "Container", offsetof(SessionRow, container), sizeof(((SessionRow *) 0)->container) },
                { "ContainerId", offsetof(SessionRow, container_id), sizeof(((SessionRow *) 0)->container_id) },
                { "PodUID", offsetof(SessionRow, pod_uid), sizeof(((SessionRow *) 0)->pod_uid) },
                { "ClientName", offsetof(SessionRow, name), sizeof(((SessionRow *) 0)->name) },
        };
        int r;

        if (strcmp(key, "Id") == 0)
                r = ctl_bus_read_number(m, contents, &row->id);
        else if (strcmp(key, "UID") == 0)
                r = ctl_bus_read_number(m, contents, &row->uid);
        else if (strcmp(key, "GID") == 0)
                r = ctl_bus_read_number(m, contents, &row->gid);
        else if (strcmp(key, "PID") == 0)
                r = ctl_bus_read_number(m, contents, &row->pid);
        else {
                for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                        if (strcmp(key, strings[i].key) == 0)
                                return ctl_bus_read_string(m, contents, (char *) row + strings[i].offset,
                                                           strings[i].size) < 0 ? -EBADMSG : 1;
                return 0;
        }
        return r < 0 ? r : 1;
}

static void session_row_print(const SessionRow *row, bool json, bool first) {
        if (json) {
                printf("%s{\"id\":%" PRIu64 ",\"uid\":%" PRIu64 ",\"gid\":%" PRIu64 ",\"pid\":%" PRIu64,
                       first ? "" : ",", row->id, row->uid, row->gid, row->pid);
                json_member_string(",", "unit", row->unit);
                json_member_string(",", "app_id", row->app);
                json_member_string(",", "container", row->container);
                json_member_string(",", "container_id", row->container_id);
                json_member_string(",", "pod_uid", row->pod_uid);
                json_member_string(",", "client_name", row->name);
                putchar('}');
        } else {
                char u[256], a[320], n[256], who[320];

                /* A container of a Kubernetes pod: its short id and the pod's UID. */
                if (row->app[0])
                        snprintf(who, sizeof(who), "%s", row->app);
                else if (row->container[0] && row->pod_uid[0])
                        snprintf(who, sizeof(who), "%s (pod %s)", row->container, row->pod_uid);
                else
                        snprintf(who, sizeof(who), "%s", row->container[0] ? row->container : "-");
                printf("%-6" PRIu64 " %-7" PRIu64 " %-7" PRIu64 " %-8" PRIu64 " %-28s %-20s %s\n", row->id, row->uid,
                       row->gid, row->pid, row->unit[0] ? ctl_sanitize(row->unit, u, sizeof(u)) : "-",
                       ctl_sanitize(who, a, sizeof(a)), ctl_sanitize(row->name, n, sizeof(n)));
        }
}

/* The sessions of GetAccounting (the caller's own, or every one for root
 * and org.kfdbroker.read-all, as ListSessions), which also tell what was
 * detected of a container: its full id and a Kubernetes pod's UID. */
int ctl_bus_sessions(const char *prog, bool json) {
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        bool first = true;
        int r;

        r = bus_call(prog, "GetAccounting", &bus, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "a{sv}");
        if (r >= 0 && json)
                putchar('[');
        else if (r >= 0)
                printf("%-6s %-7s %-7s %-8s %-28s %-20s %s\n", "ID", "UID", "GID", "PID", "UNIT",
                       "APP/CONTAINER", "CLIENT");
        while (r >= 0 && (r = sd_bus_message_at_end(reply, false)) == 0) {
                SessionRow row = {};

                r = ctl_bus_read_dict(reply, session_row_field, &row);
                if (r < 0)
                        break;
                session_row_print(&row, json, first);
                first = false;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0 && json)
                printf("]\n");
        if (r < 0)
                fprintf(stderr, "%s: cannot read the GetAccounting reply: %s\n", prog, strerror(-r));
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return r < 0 ? r : 0;
}

/* Prints an aa{sv}; text mode separates entries with a blank line. */
static int print_dict_array(sd_bus_message *m, bool json, const char *title) {
        bool first = true;
        int r;

        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "a{sv}");
        if (r < 0)
                return r;
        if (json)
                putchar('[');
        else
                printf("%s:\n", title);
        for (;;) {
                r = sd_bus_message_at_end(m, false);
                if (r != 0)
                        break;
                if (json && !first)
                        putchar(',');
                else if (!json && !first)
                        putchar('\n');
                r = ctl_bus_print_dict(m, json, "  ");
                if (r < 0)
                        return r;
                first = false;
        }
        if (r < 0)
                return r;
        if (json)
                putchar(']');
        else if (first)
                printf("  (none)\n");
        return sd_bus_message_exit_container(m);
}

int ctl_bus_accounting(const char *prog, bool json) {
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        int r;

        r = bus_call(prog, "GetAccounting", &bus, &reply);
        if (r < 0)
                return r;
        if (json)
                printf("{\"sessions\":");
        r = print_dict_array(reply, json, "Sessions");
        if (r >= 0) {
                if (json)
                        printf(",\"identities\":");
                else
                        putchar('\n');
                r = print_dict_array(reply, json, "Identities");
        }
        if (r >= 0 && json)
                printf("}\n");
        if (r < 0)
                fprintf(stderr, "%s: cannot read the GetAccounting reply: %s\n", prog, strerror(-r));
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return r < 0 ? r : 0;
}

int ctl_bus_metrics(const char *prog) {
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        const char *text;
        int r;

        r = bus_call(prog, "GetMetrics", &bus, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "s", &text);
        if (r >= 0)
                fputs(text, stdout);
        else
                fprintf(stderr, "%s: cannot read the GetMetrics reply: %s\n", prog, strerror(-r));
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return r < 0 ? r : 0;
}

int ctl_bus_terminate(const char *prog, uint64_t id, const char *reason) {
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        int r;

        r = ctl_bus_open(prog, &bus);
        if (r < 0)
                return r;
        r = ctl_bus_call(prog, bus, "TerminateSession", &reply, "ts", id, reason);
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return r < 0 ? r : 0;
}

int ctl_bus_reload(const char *prog) {
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        int r;

        /* Synchronous: returns when the daemon has read the policy, or refused it
         * (org.kfdbroker.Broker1.Error.PolicyInvalid, "Policy not reloaded, the old
         * policy stays: FILE:LINE: ..."), which is printed and makes the exit status 1
         * (and so `systemctl reload` fail: ExecReload= runs this). */
        r = bus_call(prog, "ReloadPolicy", &bus, &reply);
        if (r < 0)
                return r;
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return 0;
}
