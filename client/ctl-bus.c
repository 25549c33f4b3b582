/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl's verbs that read the daemon's D-Bus management API
 * (org.kfdbroker.Broker1 on the system bus, or $DBUS_SYSTEM_BUS_ADDRESS):
 * sessions, accounting and metrics. They see every client of the daemon,
 * where the socket verbs see only the caller's own session. Dictionaries
 * (a{sv}) are printed generically, so fields the daemon adds later show up
 * without a change here.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "ctl-bus.h"
#include "ctl-json.h"

#define BROKER_NAME "org.kfdbroker.Broker1"
#define BROKER_PATH "/org/kfdbroker/Broker1"
#define BROKER_INTERFACE "org.kfdbroker.Broker1"

/* Calls a method without arguments; prints why it failed. */
static int bus_call(const char *prog, const char *method, sd_bus **ret_bus, sd_bus_message **ret) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus *bus = NULL;
        int r;

        r = sd_bus_open_system(&bus);
        if (r < 0) {
                fprintf(stderr, "%s: cannot connect to the system bus: %s\n", prog, strerror(-r));
                return r;
        }
        r = sd_bus_call_method(bus, BROKER_NAME, BROKER_PATH, BROKER_INTERFACE, method, &error, ret,
                               "");
        if (r < 0) {
                if (sd_bus_error_has_name(&error, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
                    sd_bus_error_has_name(&error, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        fprintf(stderr, "%s: %s is not on the system bus (is kfdbrokerd running?)\n",
                                prog, BROKER_NAME);
                else
                        fprintf(stderr, "%s: %s failed: %s\n", prog, method,
                                error.message ? error.message : strerror(-r));
                sd_bus_error_free(&error);
                sd_bus_unref(bus);
                return r;
        }
        *ret_bus = bus;
        return 0;
}

/* Prints one variant of a basic type (the a{sv} values the daemon sends). */
static int print_variant(sd_bus_message *m, bool json) {
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
                        else
                                fputs(s[0] ? s : "-", stdout);
                }
                break;
        }
        case SD_BUS_TYPE_UINT64: {
                uint64_t v;
                r = sd_bus_message_read_basic(m, 't', &v);
                if (r >= 0)
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
                r = sd_bus_message_read_basic(m, 'd', &v);
                if (r >= 0)
                        printf("%.6g", v);
                break;
        }
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

/* Prints an a{sv}: as a JSON object, or as "  key: value" lines. */
static int print_dict(sd_bus_message *m, bool json, const char *indent) {
        bool first = true;
        int r;

        r = sd_bus_message_enter_container(m, SD_BUS_TYPE_ARRAY, "{sv}");
        if (r < 0)
                return r;
        if (json)
                putchar('{');
        while ((r = sd_bus_message_enter_container(m, SD_BUS_TYPE_DICT_ENTRY, "sv")) > 0) {
                const char *key;

                r = sd_bus_message_read_basic(m, 's', &key);
                if (r < 0)
                        return r;
                if (json) {
                        printf("%s", first ? "" : ",");
                        json_string(key);
                        putchar(':');
                } else
                        printf("%s%-20s ", indent, key);
                r = print_variant(m, json);
                if (r < 0)
                        return r;
                if (!json)
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

int ctl_bus_sessions(const char *prog, bool json) {
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        uint64_t id;
        uint32_t uid, gid, pid;
        const char *unit, *app, *container, *name;
        bool first = true;
        int r;

        r = bus_call(prog, "ListSessions", &bus, &reply);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(tuuussss)");
        if (r >= 0 && json)
                putchar('[');
        else if (r >= 0)
                printf("%-6s %-7s %-7s %-8s %-28s %-20s %s\n", "ID", "UID", "GID", "PID", "UNIT",
                       "APP/CONTAINER", "CLIENT");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(tuuussss)", &id, &uid, &gid, &pid, &unit,
                                                  &app, &container, &name)) > 0) {
                if (json) {
                        printf("%s{\"id\":%" PRIu64 ",\"uid\":%" PRIu32 ",\"gid\":%" PRIu32
                               ",\"pid\":%" PRIu32 ",\"unit\":",
                               first ? "" : ",", id, uid, gid, pid);
                        json_string(unit);
                        printf(",\"app_id\":");
                        json_string(app);
                        printf(",\"container\":");
                        json_string(container);
                        printf(",\"client_name\":");
                        json_string(name);
                        putchar('}');
                } else
                        printf("%-6" PRIu64 " %-7" PRIu32 " %-7" PRIu32 " %-8" PRIu32 " %-28s %-20s %s\n",
                               id, uid, gid, pid, unit[0] ? unit : "-",
                               app[0] ? app : container[0] ? container : "-", name);
                first = false;
        }
        if (r >= 0)
                r = sd_bus_message_exit_container(reply);
        if (r >= 0 && json)
                printf("]\n");
        if (r < 0)
                fprintf(stderr, "%s: cannot read the ListSessions reply: %s\n", prog, strerror(-r));
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
                r = print_dict(m, json, "  ");
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
