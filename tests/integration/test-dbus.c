/* SPDX-License-Identifier: MIT */
/*
 * The D-Bus management API on a private system-like bus: a dbus-daemon with
 * the stock default-deny policy plus the project's bus policy
 * (policy/org.kfdbroker.Broker1.conf), kfdbrokerd --bus=system on it, and
 * callers that are root or an unprivileged uid. Accounting is checked against
 * jobs of known sizes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

#define NAME "org.kfdbroker.Broker1"
#define PATH "/org/kfdbroker/Broker1"
#define IFACE "org.kfdbroker.Broker1"

static TestDaemon d;
static TestBus tb;
static char policydir[128];

static void setup(void) {
        char arg[160];
        const char *args[] = { "--bus=system", arg, NULL };

        test_bus_start(&tb);
        snprintf(policydir, sizeof(policydir), "%s/policy.d", tb.dir);
        cr_assert_eq(mkdir(policydir, 0755), 0);
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
}

static void teardown(void) {
        cr_assert_eq(test_daemon_stop(&d), 0, "kfdbrokerd must exit 0");
        test_bus_stop(&tb);
}

TestSuite(dbus, .init = setup, .fini = teardown, .timeout = 60);

static sd_bus *open_bus(void) {
        sd_bus *bus = NULL;
        int r;

        /* The daemon requests the name asynchronously after start-up. */
        for (int i = 0; i < 200; i++) {
                if (!bus)
                        cr_assert_eq(sd_bus_open_system(&bus), 0);
                r = sd_bus_get_name_creds(bus, NAME, 0, NULL);
                if (r >= 0)
                        return bus;
                usleep(10000);
        }
        cr_assert_fail("%s never appeared on the bus", NAME);
        return NULL;
}

static kfdb_session *connect_session(void) {
        kfdb_session *s;
        int r = kfdb_session_new(d.sock, "dbus-test", &s);

        cr_assert_eq(r, 0, "%s", strerror(-r));
        return s;
}

/* Reads a{sv} into a few known keys: returns the value of key as u64 (t or u), or -1. */
static int64_t dict_get_number(sd_bus_message *m, const char *want) {
        int64_t found = -1;
        int r;

        cr_assert_geq(sd_bus_message_enter_container(m, 'a', "{sv}"), 0);
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *sig;
                cr_assert_geq(sd_bus_message_read(m, "s", &key), 0);
                cr_assert_geq(sd_bus_message_peek_type(m, NULL, &sig), 0);
                if (strcmp(key, want) == 0 && strcmp(sig, "t") == 0) {
                        uint64_t v;
                        cr_assert_geq(sd_bus_message_read(m, "v", "t", &v), 0);
                        found = (int64_t) v;
                } else if (strcmp(key, want) == 0 && strcmp(sig, "u") == 0) {
                        uint32_t v;
                        cr_assert_geq(sd_bus_message_read(m, "v", "u", &v), 0);
                        found = v;
                } else if (strcmp(sig, "a{sv}") == 0) {
                        int64_t inner;
                        cr_assert_geq(sd_bus_message_enter_container(m, 'v', "a{sv}"), 0);
                        inner = dict_get_number(m, want);
                        if (inner >= 0)
                                found = inner;
                        cr_assert_geq(sd_bus_message_exit_container(m), 0);
                } else
                        cr_assert_geq(sd_bus_message_skip(m, "v"), 0);
                cr_assert_geq(sd_bus_message_exit_container(m), 0);
        }
        cr_assert_geq(sd_bus_message_exit_container(m), 0);
        return found;
}

static int64_t session_number(sd_bus *bus, uint64_t id, const char *key) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int64_t v;
        int r;

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, &reply, "t", id);
        cr_assert_geq(r, 0, "GetSession: %s", e.message);
        v = dict_get_number(reply, key);
        sd_bus_message_unref(reply);
        return v;
}

Test(dbus, introspection_and_properties) {
        sd_bus *bus = open_bus();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *xml, *version;
        kfdb_session *s = connect_session();
        uint32_t count;

        cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, "org.freedesktop.DBus.Introspectable",
                                         "Introspect", &e, &reply, ""), 0, "%s", e.message);
        cr_assert_geq(sd_bus_message_read(reply, "s", &xml), 0);
        for (const char *const *w = (const char *const[]) { "ListSessions", "GetSession", "GetAccounting",
                                                           "SetLimits", "TerminateSession", "ReloadPolicy",
                                                           "OpenSession", "SessionOpened", "SessionClosed",
                                                           "JobFailed", "DeviceFault", "SessionCount",
                                                           "Devices", "Version", NULL };
             *w; w++)
                cr_assert(strstr(xml, *w), "introspection lacks %s", *w);
        sd_bus_message_unref(reply);

        cr_assert_geq(sd_bus_get_property_string(bus, NAME, PATH, IFACE, "Version", &e, (char **) &version), 0);
        cr_assert_str_eq(version, "0.1.0");
        free((char *) version);
        cr_assert_geq(sd_bus_get_property_trivial(bus, NAME, PATH, IFACE, "SessionCount", &e, 'u', &count), 0);
        cr_assert_eq(count, 1);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

Test(dbus, accounting_matches_jobs_of_known_sizes) {
        sd_bus *bus = open_bus();
        kfdb_session *s = connect_session();
        kfdb_buffer *a, *b;
        kfdb_batch *batch;
        uint64_t fence, id = kfdb_session_get_id(s);

        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_VRAM, &b), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 1 << 20, 7), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 4096, a, 0, 512 << 10), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0);

        cr_assert_eq(session_number(bus, id, "BytesFilled"), 1 << 20);
        cr_assert_eq(session_number(bus, id, "BytesCopied"), 512 << 10);
        cr_assert_eq(session_number(bus, id, "JobsCompleted"), 2);
        cr_assert_eq(session_number(bus, id, "JobsSDMA"), 2);
        cr_assert_gt(session_number(bus, id, "BusyNSecSDMA"), 0, "GPU time from the timestamps");
        cr_assert_eq(session_number(bus, id, "BufferBytes"), 2 << 20);
        cr_assert_eq(session_number(bus, id, "BufferBytesPeak"), 2 << 20);
        cr_assert_eq(session_number(bus, id, "UID"), getuid());

        /* Per identity, across reconnects. */
        kfdb_batch_free(batch);
        kfdb_session_free(s);
        s = connect_session();
        {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                sd_bus_message *reply = NULL;
                int64_t total, filled;

                cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, IFACE, "GetAccounting", &e, &reply, ""),
                              0, "%s", e.message);
                cr_assert_geq(sd_bus_message_skip(reply, "aa{sv}"), 0);
                cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "a{sv}"), 0);
                /* One identity: this test process (uid, no unit outside systemd). */
                total = dict_get_number(reply, "SessionsTotal");
                cr_assert_eq(total, 2, "SessionsTotal %lld", (long long) total);
                sd_bus_message_unref(reply);
                reply = NULL;
                cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, IFACE, "GetAccounting", &e, &reply, ""), 0);
                cr_assert_geq(sd_bus_message_skip(reply, "aa{sv}"), 0);
                cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "a{sv}"), 0);
                filled = dict_get_number(reply, "BytesFilled");
                cr_assert_eq(filled, 1 << 20, "the identity keeps the first session's bytes");
                sd_bus_message_unref(reply);
        }
        {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                sd_bus_message *reply = NULL;
                const char *text;
                cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, IFACE, "GetMetrics", &e, &reply, ""), 0,
                              "%s", e.message);
                cr_assert_geq(sd_bus_message_read(reply, "s", &text), 0);
                cr_assert(strstr(text, "kfdbroker_identity_bytes_total{uid=\"0\""), "%s", text);
                cr_assert(strstr(text, "kind=\"filled\"} 1048576"), "%s", text);
                cr_assert(strstr(text, "# EOF\n"));
                sd_bus_message_unref(reply);
        }
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

Test(dbus, set_limits_and_terminate) {
        sd_bus *bus = open_bus();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        kfdb_session *s = connect_session();
        kfdb_buffer *a, *b;
        uint64_t id = kfdb_session_get_id(s);
        int r;

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", id, 2,
                               "Buffers", "t", (uint64_t) 1, "Weight", "u", (uint32_t) 3);
        cr_assert_geq(r, 0, "SetLimits: %s", e.message);
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &b), -EDQUOT);
        cr_assert(strstr(kfdb_session_last_error(s), "max_buffers 1"), "%s", kfdb_session_last_error(s));
        cr_assert_eq(session_number(bus, id, "Weight"), 3);

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", id, 1,
                               "Bogus", "t", (uint64_t) 1);
        cr_assert_lt(r, 0);
        cr_assert(strstr(e.message, "Unknown limit 'Bogus'"), "%s", e.message);
        sd_bus_error_free(&e);

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "TerminateSession", &e, NULL, "ts", id, "test");
        cr_assert_geq(r, 0, "TerminateSession: %s", e.message);
        {
                kfdb_usage u;
                cr_assert_eq(kfdb_query(s, &u), -ECONNRESET, "the client sees its session end");
        }
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, NULL, "t", id);
        cr_assert_lt(r, 0);
        cr_assert(sd_bus_error_has_name(&e, "org.kfdbroker.Broker1.Error.NoSuchSession"), "%s", e.name);
        sd_bus_error_free(&e);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

Test(dbus, reload_policy_refuses_broken_file_and_keeps_sessions) {
        sd_bus *bus = open_bus();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        kfdb_session *s = connect_session();
        uint64_t id = kfdb_session_get_id(s);
        char path[256];
        FILE *f;
        int r;

        snprintf(path, sizeof(path), "%s/10-test.conf", policydir);
        f = fopen(path, "we");
        fprintf(f, "[Match]\nUser=%u\n[Limits]\nBuffers=lots\n", (unsigned) getuid());
        fclose(f);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ReloadPolicy", &e, NULL, "");
        cr_assert_lt(r, 0);
        cr_assert(sd_bus_error_has_name(&e, "org.kfdbroker.Broker1.Error.PolicyInvalid"), "%s", e.name);
        cr_assert(strstr(e.message, "10-test.conf:4"), "names file and line: %s", e.message);
        sd_bus_error_free(&e);
        cr_assert_eq(session_number(bus, id, "Id"), (int64_t) id, "session still there");

        f = fopen(path, "we");
        fprintf(f, "[Match]\nUser=%u\n[Limits]\nBuffers=7\nWeight=5\n", (unsigned) getuid());
        fclose(f);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ReloadPolicy", &e, NULL, "");
        cr_assert_geq(r, 0, "%s", e.message);
        /* The connected session picked up the new limits without reconnecting. */
        {
                kfdb_usage u;
                cr_assert_eq(kfdb_query(s, &u), 0);
                cr_assert_eq(u.limits.max_buffers, 7);
        }
        cr_assert_eq(session_number(bus, id, "Weight"), 5);

        /* SIGHUP reloads too. */
        f = fopen(path, "we");
        fprintf(f, "[Match]\nUser=%u\n[Limits]\nBuffers=9\n", (unsigned) getuid());
        fclose(f);
        kill(d.pid, SIGHUP);
        for (int i = 0; i < 200; i++) {
                kfdb_usage u;
                cr_assert_eq(kfdb_query(s, &u), 0);
                if (u.limits.max_buffers == 9)
                        break;
                cr_assert_lt(i, 199, "SIGHUP did not reload the policy");
                usleep(10000);
        }
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

Test(dbus, open_session_returns_a_working_socket) {
        sd_bus *bus = open_bus();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        kfdb_session *s;
        kfdb_buffer *b;
        int fd, r;

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "OpenSession", &e, &reply, "");
        cr_assert_geq(r, 0, "%s", e.message);
        cr_assert_geq(sd_bus_message_read(reply, "h", &fd), 0);
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        sd_bus_message_unref(reply);
        r = kfdb_session_new_from_fd(fd, "over-dbus", &s);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        cr_assert_eq(kfdb_buffer_alloc(s, 65536, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(session_number(bus, kfdb_session_get_id(s), "PID"), getpid(),
                     "the identity is the D-Bus caller's");
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* Runs fn as uid/gid nobody in a child; returns its exit status. */
static int as_nobody(int (*fn)(uint64_t), uint64_t arg) {
        pid_t pid = fork();
        int status;

        cr_assert_geq(pid, 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                    setresuid(65534, 65534, 65534) < 0)
                        _exit(99);
                _exit(fn(arg));
        }
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

static int unprivileged_calls(uint64_t root_session) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        int r;

        if (sd_bus_open_system(&bus) < 0)
                return 10;
        /* Admin methods: refused, saying why. */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", root_session, 1,
                               "Buffers", "t", (uint64_t) 0);
        if (r >= 0 || !sd_bus_error_has_name(&e, SD_BUS_ERROR_ACCESS_DENIED) || !strstr(e.message, "polkit")) {
                fprintf(stderr, "SetLimits: %d %s %s\n", r, e.name, e.message);
                return 11;
        }
        sd_bus_error_free(&e);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ReloadPolicy", &e, NULL, "");
        if (r >= 0 || !sd_bus_error_has_name(&e, SD_BUS_ERROR_ACCESS_DENIED))
                return 12;
        sd_bus_error_free(&e);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "TerminateSession", &e, NULL, "ts", root_session, "x");
        if (r >= 0 || !sd_bus_error_has_name(&e, SD_BUS_ERROR_ACCESS_DENIED))
                return 13;
        sd_bus_error_free(&e);
        /* Another user's session: refused. */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, NULL, "t", root_session);
        if (r >= 0 || !sd_bus_error_has_name(&e, SD_BUS_ERROR_ACCESS_DENIED))
                return 14;
        sd_bus_error_free(&e);
        /* Listing: only this user's sessions (none). */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListSessions", &e, &reply, "");
        if (r < 0)
                return 15;
        r = sd_bus_message_enter_container(reply, 'a', "(tuuussss)");
        if (r < 0 || sd_bus_message_at_end(reply, false) <= 0)
                return 16;
        sd_bus_message_unref(reply);
        /* Properties are public. */
        {
                uint32_t n = 0;
                if (sd_bus_get_property_trivial(bus, NAME, PATH, IFACE, "SessionCount", &e, 'u', &n) < 0 || n != 1)
                        return 17;
        }
        sd_bus_unref(bus);
        return 0;
}

Test(dbus, unauthorised_peer_is_refused_with_a_reason) {
        sd_bus *bus = open_bus();
        kfdb_session *s = connect_session();
        uint64_t id = kfdb_session_get_id(s);

        cr_assert_eq(as_nobody(unprivileged_calls, id), 0);
        /* And nothing changed. */
        cr_assert_eq(session_number(bus, id, "Id"), (int64_t) id);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* Compute jobs are accounted per session and identity on their own engine:
 * D-Bus (JobsCompute, BusyNSecCompute), drm-usage-stats (drm-engine-compute)
 * and the metrics (engine="compute"). */
Test(dbus, compute_accounting) {
        sd_bus *bus = open_bus();
        kfdb_session *s = connect_session();
        uint64_t id = kfdb_session_get_id(s), fence = 0;
        kfdb_code_object *co;
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint32_t n = 4096, block = 256, *p;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *text, *drm;
        char *line;

        compute_require_kernels();
        co = load_kernel(s, "collatz");
        b = new_buffer(s, n * 4, 0, (void **) &p);
        for (uint32_t i = 0; i < n; i++)
                p[i] = i + 1;
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_buffer(b, 0), kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        for (int i = 0; i < 3; i++)
                cr_assert_eq(kfdb_batch_dispatch(batch, co, "collatz", 1, &n, &block, args, 3), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));

        cr_assert_eq(session_number(bus, id, "JobsCompute"), 3);
        cr_assert_eq(session_number(bus, id, "JobsSDMA"), 1);
        cr_assert_gt(session_number(bus, id, "BusyNSecCompute"), 0, "GPU time from the compute timestamps");

        cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, &reply, "t", id), 0, "%s",
                      e.message);
        drm = NULL;
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
        while (sd_bus_message_enter_container(reply, 'e', "sv") > 0) {
                const char *key;
                cr_assert_geq(sd_bus_message_read(reply, "s", &key), 0);
                if (strcmp(key, "DrmUsage") == 0)
                        cr_assert_geq(sd_bus_message_read(reply, "v", "s", &drm), 0);
                else
                        cr_assert_geq(sd_bus_message_skip(reply, "v"), 0);
                cr_assert_geq(sd_bus_message_exit_container(reply), 0);
        }
        cr_assert_not_null(drm, "GetSession has no DrmUsage");
        line = strstr(drm, "drm-engine-compute:\t");
        cr_assert_not_null(line, "%s", drm);
        cr_assert_gt(strtoull(line + strlen("drm-engine-compute:\t"), NULL, 10), 0, "%s", drm);
        sd_bus_message_unref(reply);
        reply = NULL;

        cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, IFACE, "GetMetrics", &e, &reply, ""), 0, "%s", e.message);
        cr_assert_geq(sd_bus_message_read(reply, "s", &text), 0);
        line = strstr(text, ",engine=\"compute\"} ");
        cr_assert_not_null(line, "%s", text);
        cr_assert_gt(strtod(line + strlen(",engine=\"compute\"} "), NULL), 0.0, "%s", text);
        sd_bus_message_unref(reply);

        kfdb_batch_free(batch);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}
