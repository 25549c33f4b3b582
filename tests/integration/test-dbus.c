/* SPDX-License-Identifier: MIT */
/*
 * The D-Bus management API on a private system-like bus: a dbus-daemon with
 * the stock default-deny policy plus the project's bus policy
 * (policy/org.kfdbroker.Broker1.conf), kfdbrokerd --bus=system on it, and
 * callers that are root or an unprivileged uid, with polkit absent or played
 * by a stand-in authority that says yes or no. Accounting is checked against
 * jobs of known sizes; the signals against sessions and a failing job.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <time.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "compute-util.h"
#include "config.h"
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
        test_daemon_fini(&d);
        test_bus_stop(&tb);
        test_fini_end();
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
static uint64_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* A value of an a{sv} dictionary (searched into nested a{sv} values too). */
typedef struct DictValue {
        char type; /* 0 if not found, else 't', 'u', 'd' or 's' */
        uint64_t number;
        double real;
        char *string; /* malloc'd */
} DictValue;

static void dict_find(sd_bus_message *m, const char *want, DictValue *ret) {
        int r;

        cr_assert_geq(sd_bus_message_enter_container(m, 'a', "{sv}"), 0);
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *sig, *str;
                cr_assert_geq(sd_bus_message_read(m, "s", &key), 0);
                cr_assert_geq(sd_bus_message_peek_type(m, NULL, &sig), 0);
                if (strcmp(key, want) == 0 && strcmp(sig, "t") == 0) {
                        cr_assert_geq(sd_bus_message_read(m, "v", "t", &ret->number), 0);
                        ret->type = 't';
                } else if (strcmp(key, want) == 0 && strcmp(sig, "u") == 0) {
                        uint32_t v;
                        cr_assert_geq(sd_bus_message_read(m, "v", "u", &v), 0);
                        ret->number = v;
                        ret->type = 'u';
                } else if (strcmp(key, want) == 0 && strcmp(sig, "d") == 0) {
                        cr_assert_geq(sd_bus_message_read(m, "v", "d", &ret->real), 0);
                        ret->type = 'd';
                } else if (strcmp(key, want) == 0 && strcmp(sig, "s") == 0) {
                        cr_assert_geq(sd_bus_message_read(m, "v", "s", &str), 0);
                        free(ret->string);
                        ret->string = strdup(str);
                        ret->type = 's';
                } else if (strcmp(sig, "a{sv}") == 0) {
                        cr_assert_geq(sd_bus_message_enter_container(m, 'v', "a{sv}"), 0);
                        dict_find(m, want, ret);
                        cr_assert_geq(sd_bus_message_exit_container(m), 0);
                } else
                        cr_assert_geq(sd_bus_message_skip(m, "v"), 0);
                cr_assert_geq(sd_bus_message_exit_container(m), 0);
        }
        cr_assert_geq(sd_bus_message_exit_container(m), 0);
}

/* A number ('t' or 'u') of the dictionary, or -1. */
static int64_t dict_get_number(sd_bus_message *m, const char *want) {
        DictValue v = {};

        dict_find(m, want, &v);
        free(v.string);
        return v.type == 't' || v.type == 'u' ? (int64_t) v.number : -1;
}

/* GetSession(id)'s value for key; asserts it is there. */
static DictValue session_value(sd_bus *bus, uint64_t id, const char *key) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        DictValue v = {};

        cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, &reply, "t", id), 0,
                      "GetSession: %s", e.message);
        dict_find(reply, key, &v);
        sd_bus_message_unref(reply);
        cr_assert_neq(v.type, 0, "GetSession has no %s", key);
        return v;
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
        cr_assert_str_eq(version, KFDBROKER_VERSION);
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
        kfdb_event *ev;
        uint64_t fence, id = kfdb_session_get_id(s), t_alloc, t_held;
        DictValue v;

        t_alloc = now_usec();
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_VRAM, &b), 0);
        t_held = now_usec();
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
        /* drm-usage-stats: the two buffers by placement, in KiB; the device's PCI address
         * (the simulated GPU's topology says domain 0, location_id 0x0300); the SDMA engine
         * named "dma" as amdgpu names it (amdgpu_fdinfo.c), with the jobs' GPU time. */
        v = session_value(bus, id, "DrmUsage");
        cr_assert(strstr(v.string, "drm-total-gtt:\t1024 KiB\n") && strstr(v.string, "drm-total-vram:\t1024 KiB\n"),
                  "%s", v.string);
        {
                char head[128];
                const char *dma = strstr(v.string, "\ndrm-engine-dma:\t");

                snprintf(head, sizeof(head), "drm-driver:\tkfdbroker\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t%llu\n",
                         (unsigned long long) id);
                cr_assert(strncmp(v.string, head, strlen(head)) == 0, "%s", v.string);
                cr_assert_not_null(dma, "%s", v.string);
                cr_assert_eq(strtoull(dma + strlen("\ndrm-engine-dma:\t"), NULL, 10), session_number(bus, id, "BusyNSecSDMA"),
                             "%s", v.string);
                cr_assert_null(strstr(v.string, "sdma"), "%s", v.string);
        }
        free(v.string);

        /* Time queued: a wait job held 200 ms for its event counts it. */
        cr_assert_eq(session_number(bus, id, "QueuedNSec") < 100000000, 1, "the two jobs queued briefly");
        cr_assert_eq(kfdb_event_create(s, true, &ev), 0);
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        usleep(200000);
        cr_assert_eq(kfdb_event_set(ev), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0);
        cr_assert_geq(session_number(bus, id, "QueuedNSec"), 200000000, "the held wait job was queued >= 200 ms");

        /* Byte-seconds: 2 MiB held since the allocations, no more than since before them. */
        {
                uint64_t t_before = now_usec();
                double lo, hi;

                v = session_value(bus, id, "BufferByteSeconds");
                lo = (double) (2 << 20) * (double) (t_before - t_held) / 1e6;
                hi = (double) (2 << 20) * (double) (now_usec() - t_alloc) / 1e6;
                cr_assert_eq(v.type, 'd');
                cr_assert(v.real >= lo * 0.99 && v.real <= hi * 1.01, "BufferByteSeconds %.0f outside [%.0f, %.0f]",
                          v.real, lo, hi);
        }
        kfdb_event_destroy(ev);

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
                /* OpenMetrics: the counter family is named without _total; an info type. */
                cr_assert(strstr(text, "# TYPE kfdbroker_identity_bytes counter\n"), "%s", text);
                cr_assert(strstr(text, "# TYPE kfdbroker_build info\n"), "%s", text);
                sd_bus_message_unref(reply);
        }
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* A bigger job takes longer on the engine: busy time is ordered by size. */
Test(dbus, busy_time_is_ordered_by_job_size) {
        sd_bus *bus = open_bus();
        kfdb_session *small = connect_session(), *big = connect_session();
        kfdb_session *ss[2] = { small, big };
        const uint64_t sizes[2] = { 256u << 10, 32u << 20 };
        int64_t busy[2];

        for (unsigned i = 0; i < 2; i++) {
                kfdb_buffer *a, *b;
                kfdb_batch *batch;
                uint64_t fence;

                cr_assert_eq(kfdb_buffer_alloc(ss[i], sizes[i], KFDB_PLACEMENT_GTT, &a), 0);
                cr_assert_eq(kfdb_buffer_alloc(ss[i], sizes[i], KFDB_PLACEMENT_GTT, &b), 0);
                cr_assert_eq(kfdb_batch_new(ss[i], &batch), 0);
                cr_assert_eq(kfdb_batch_copy(batch, b, 0, a, 0, sizes[i]), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
                cr_assert_eq(kfdb_fence_wait(ss[i], fence, 10000), 0);
                kfdb_batch_free(batch);
                busy[i] = session_number(bus, kfdb_session_get_id(ss[i]), "BusyNSecSDMA");
                cr_assert_eq(session_number(bus, kfdb_session_get_id(ss[i]), "BytesCopied"), (int64_t) sizes[i]);
        }
        cr_assert_gt(busy[0], 0);
        cr_assert_gt(busy[1], busy[0], "32 MiB took %lld ns, 256 KiB %lld ns", (long long) busy[1],
                     (long long) busy[0]);
        kfdb_session_free(small);
        kfdb_session_free(big);
        sd_bus_unref(bus);
}

typedef struct Signals {
        /* When set, session signals of other sessions are ignored: the
         * harness's readiness probe (a connect) is a session too, and its
         * SessionOpened/Closed may reach the bus after the test's match. */
        uint64_t only_session;
        uint64_t opened_id, closed_id, failed_session, failed_fence, fault_session, fault_fence;
        uint32_t opened_uid;
        int32_t failed_errno;
        char closed_reason[256], failed_message[256], fault_message[256];
} Signals;

static int on_signal(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Signals *sig = userdata;
        const char *unit, *text;
        uint64_t id, fence;
        uint32_t uid;
        int32_t err;

        if (sd_bus_message_is_signal(m, IFACE, "SessionOpened") &&
            sd_bus_message_read(m, "tus", &id, &uid, &unit) >= 0) {
                if (sig->only_session && id != sig->only_session)
                        return 0;
                sig->opened_id = id;
                sig->opened_uid = uid;
        } else if (sd_bus_message_is_signal(m, IFACE, "SessionClosed") &&
                   sd_bus_message_read(m, "ts", &id, &text) >= 0) {
                if (sig->only_session && id != sig->only_session)
                        return 0;
                sig->closed_id = id;
                snprintf(sig->closed_reason, sizeof(sig->closed_reason), "%s", text);
        } else if (sd_bus_message_is_signal(m, IFACE, "JobFailed") &&
                   sd_bus_message_read(m, "ttis", &id, &fence, &err, &text) >= 0) {
                sig->failed_session = id;
                sig->failed_fence = fence;
                sig->failed_errno = err;
                snprintf(sig->failed_message, sizeof(sig->failed_message), "%s", text);
        } else if (sd_bus_message_is_signal(m, IFACE, "DeviceFault") &&
                   sd_bus_message_read(m, "tts", &id, &fence, &text) >= 0) {
                sig->fault_session = id;
                sig->fault_fence = fence;
                snprintf(sig->fault_message, sizeof(sig->fault_message), "%s", text);
        }
        return 0;
}

/* Runs the bus until *what is non-zero or 10 s pass. */
/* Processes the bus until *what is set, for up to 10 s (by the clock: a
 * busy bus must not use up a count of rounds on a loaded machine). */
static void wait_for(sd_bus *bus, const uint64_t *what) {
        for (uint64_t end = now_usec() + 10000000; *what == 0 && now_usec() < end;) {
                int r = sd_bus_process(bus, NULL);
                cr_assert_geq(r, 0);
                if (r == 0)
                        cr_assert_geq(sd_bus_wait(bus, 10000), 0);
        }
        cr_assert_neq(*what, 0, "the signal did not come within 10 s");
}

Test(dbus, signals_tell_of_sessions_and_failed_jobs) {
        sd_bus *bus = open_bus();
        Signals sig = {};
        kfdb_session *s;
        kfdb_event *ev;
        kfdb_batch *batch;
        uint64_t id, fence;
        int r;

        cr_assert_geq(sd_bus_match_signal(bus, NULL, NAME, PATH, IFACE, NULL, on_signal, &sig), 0);
        /* The match is in place once a call has gone through the bus after it. */
        cr_assert_geq(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "GetId", NULL, NULL, ""), 0);
        s = connect_session();
        id = kfdb_session_get_id(s);
        sig.only_session = id;
        wait_for(bus, &sig.opened_id);
        cr_assert_eq(sig.opened_id, id);
        cr_assert_eq(sig.opened_uid, getuid());

        /* A wait on an event nobody signals, past a 100 ms JobTimeout set over D-Bus. */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", NULL, NULL, "ta{sv}", id, 1,
                               "JobTimeoutUSec", "t", (uint64_t) 100000);
        cr_assert_geq(r, 0);
        cr_assert_eq(kfdb_event_create(s, true, &ev), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        wait_for(bus, &sig.failed_session);
        cr_assert_eq(sig.failed_session, id);
        cr_assert_eq(sig.failed_fence, fence);
        cr_assert_eq(sig.failed_errno, ETIME);
        cr_assert(strstr(sig.failed_message, "timeout"), "%s", sig.failed_message);
        cr_assert_eq(kfdb_fence_wait(s, fence, 1000), -ETIME);

        kfdb_batch_free(batch);
        kfdb_session_free(s);
        wait_for(bus, &sig.closed_id);
        cr_assert_eq(sig.closed_id, id, "closed %llu, expected %llu (%s)", (unsigned long long) sig.closed_id,
                     (unsigned long long) id, sig.closed_reason);
        cr_assert_str_neq(sig.closed_reason, "");
        sd_bus_unref(bus);
}

/* A kernel that stores outside every buffer: the GPU memory fault is told to
 * the administrator as DeviceFault (and JobFailed with EFAULT), naming the
 * session, the job and the address; the session goes on working. */
Test(dbus, device_fault_signal_names_the_job) {
        sd_bus *bus = open_bus();
        Signals sig = {};
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint64_t id, fence, offset = 1ull << 36; /* 256 GiB past the buffer: mapped by nothing */
        uint32_t grid = 1, block = 1;
        void *map;

        compute_require_kernels();
        cr_assert_geq(sd_bus_match_signal(bus, NULL, NAME, PATH, IFACE, NULL, on_signal, &sig), 0);
        cr_assert_geq(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "GetId", NULL, NULL, ""), 0);
        s = connect_session();
        id = kfdb_session_get_id(s);
        co = load_kernel(s, "fault");
        b = new_buffer(s, 4096, 0, &map);
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_value(&offset, 8) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "fault", 1, &grid, &block, args, 2), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));

        wait_for(bus, &sig.fault_session);
        cr_assert_eq(sig.fault_session, id);
        cr_assert_eq(sig.fault_fence, fence);
        cr_assert(strstr(sig.fault_message, "GPU memory fault in dispatch of kernel \"fault\", at "), "%s",
                  sig.fault_message);
        cr_assert(strstr(sig.fault_message, ", outside any buffer of yours"), "%s", sig.fault_message);
        cr_assert(strstr(sig.fault_message, "kernel \"fault\""), "%s", sig.fault_message);
        wait_for(bus, &sig.failed_session);
        cr_assert_eq(sig.failed_fence, fence);
        cr_assert_eq(sig.failed_errno, EFAULT);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), -EFAULT);

        /* The session still works: a fill on the same buffer. */
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0x5A5A5A5Au), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(((uint32_t *) map)[1023], 0x5A5A5A5Au);

        kfdb_batch_free(batch);
        kfdb_buffer_free(b);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* --metrics-file: the same OpenMetrics text, rewritten in place for a node
 * exporter's textfile collector, following the accounting as it changes. */
/*
 * What node exporter's textfile collector (the Prometheus text format 0.0.4
 * parser) demands and OpenMetrics does not: only counter, gauge, summary,
 * histogram and untyped types, and every sample named as the family whose
 * TYPE line precedes it (else the file is dropped or read untyped). NULL if
 * text complies, else the offending line (in a static buffer).
 */
static const char *prometheus_text_problem(const char *text) {
        static char bad[256];
        char family[128] = "";

        for (const char *line = text; *line;) {
                const char *end = strchrnul(line, '\n');
                int len = (int) (end - line);
                char name[128], type[32];

                if (sscanf(line, "# TYPE %127s %31s", name, type) == 2) {
                        if (strcmp(type, "counter") && strcmp(type, "gauge") && strcmp(type, "untyped"))
                                goto fail;
                        snprintf(family, sizeof(family), "%s", name);
                } else if (sscanf(line, "# HELP %127s", name) == 1 || sscanf(line, "# UNIT %127s", name) == 1) {
                        if (strcmp(name, family) != 0)
                                goto fail;
                } else if (line[0] != '#' && len > 0) {
                        size_t n = strcspn(line, "{ ");
                        if (n != strlen(family) || strncmp(line, family, n) != 0)
                                goto fail;
                }
                line = *end ? end + 1 : end;
                continue;
        fail:
                snprintf(bad, sizeof(bad), "%.*s", len, line);
                return bad;
        }
        return NULL;
}

Test(dbus, metrics_file_is_rewritten) {
        char path[160], arg[200], text[16384];
        const char *args[] = { arg, "--metrics-interval=0.1", NULL };
        TestDaemon other;
        kfdb_session *s;
        kfdb_buffer *a;
        bool seen = false, torn = false;

        mode_t umask_before;
        struct stat st;

        snprintf(path, sizeof(path), "%s/kfdbroker.prom", tb.dir);
        snprintf(arg, sizeof(arg), "--metrics-file=%s", path);
        umask_before = umask(0077); /* the unit's UMask= */
        test_daemon_start(&other, args);
        umask(umask_before);
        cr_assert_eq(kfdb_session_new(other.sock, "metrics-file", &s), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 3u << 20, KFDB_PLACEMENT_GTT, &a), 0);
        for (int i = 0; i < 300 && !seen && !torn; i++) {
                FILE *f = fopen(path, "re");
                size_t n = 0;

                if (f) {
                        n = fread(text, 1, sizeof(text) - 1, f);
                        fclose(f);
                }
                text[n] = 0;
                /* Never half a file: it is replaced by rename(). */
                torn = n > 0 && (strncmp(text, "# TYPE kfdbroker_build_info gauge\n", 34) != 0 ||
                                 strcmp(text + n - 6, "# EOF\n") != 0);
                seen = strstr(text, "\nkfdbroker_identity_buffer_bytes{uid=\"0\",unit=\"\",app=\"\",container=\"\"} "
                                    "3145728\n");
                if (!seen)
                        usleep(10000);
        }
        kfdb_session_free(s);
        /* Stop the second daemon before any assertion can end the test. */
        cr_assert_eq(test_daemon_stop(&other), 0);
        cr_assert(!torn, "a torn file: %s", text);
        cr_assert(seen, "the file never showed the session's 3 MiB: %s", text);
        cr_assert_null(prometheus_text_problem(text), "not what a textfile collector reads: \"%s\" in\n%s",
                       prometheus_text_problem(text), text);
        cr_assert(strstr(text, "# TYPE kfdbroker_identity_jobs_total counter\n"), "%s", text);
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_mode & 07777, 0600, "without --metrics-file-mode only the daemon's user reads it: %o",
                     st.st_mode & 07777);
}

/* --metrics-file-mode: the mode asked for whatever the umask, so that a node
 * exporter running as another user can read the file. */
Test(dbus, metrics_file_mode_is_what_was_asked) {
        static const unsigned modes[] = { 0644, 0640 };

        for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
                char path[160], arg[200], mode_arg[64];
                const char *args[] = { arg, mode_arg, "--metrics-interval=0.1", NULL };
                TestDaemon other;
                struct stat st = {};
                mode_t umask_before;
                int r = -1;

                snprintf(path, sizeof(path), "%s/mode-%o.prom", tb.dir, modes[i]);
                snprintf(arg, sizeof(arg), "--metrics-file=%s", path);
                snprintf(mode_arg, sizeof(mode_arg), "--metrics-file-mode=%04o", modes[i]);
                umask_before = umask(0077);
                test_daemon_start(&other, args);
                umask(umask_before);
                for (int k = 0; k < 300 && (r = stat(path, &st)) < 0; k++)
                        usleep(10000);
                cr_assert_eq(test_daemon_stop(&other), 0);
                cr_assert_eq(r, 0, "%s was never written", path);
                cr_assert_eq(st.st_mode & 07777, modes[i], "%s has mode %o", mode_arg, st.st_mode & 07777);
        }
}

/* True once the metrics file at path was replaced (a new inode) twice
 * after *ino, within 5 s; *ino becomes the last one seen. */
static bool metrics_rewritten_twice(const char *path, ino_t *ino) {
        unsigned changes = 0;

        for (int i = 0; i < 500 && changes < 2; i++) {
                struct stat st;

                if (stat(path, &st) == 0 && st.st_ino != *ino) {
                        *ino = st.st_ino;
                        changes++;
                }
                usleep(10000);
        }
        return changes >= 2;
}

/* Someone who may write to the metrics file's directory puts a FIFO, a file
 * they can read, and a symlink at the temporary name the daemon used
 * (<file>.tmp): the daemon keeps writing the metrics file, its loop keeps
 * serving clients, and nothing reaches what was put there. */
Test(dbus, metrics_temp_name_cannot_be_captured_or_stall_the_loop) {
        char path[160], tmp[176], target[176], arg[200];
        const char *args[] = { arg, "--metrics-interval=0.1", NULL };
        const char *kinds[] = { "a FIFO", "a world-readable file", "a symlink" };
        TestDaemon other;
        bool rewritten[3] = {}, served[3] = {}, untouched[3] = {};
        ino_t ino = 0;
        int held = -1, stopped;

        snprintf(path, sizeof(path), "%s/capture.prom", tb.dir);
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        snprintf(target, sizeof(target), "%s/elsewhere", tb.dir);
        snprintf(arg, sizeof(arg), "--metrics-file=%s", path);
        /* In place before the daemon's first write. */
        cr_assert_eq(mkfifo(tmp, 0666), 0);
        test_daemon_start(&other, args);
        for (int k = 0; k < 3; k++) {
                struct stat st = {}, lst = {};
                int c;

                if (k == 1) {
                        cr_assert_eq(unlink(tmp), 0);
                        held = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
                        cr_assert_geq(held, 0);
                        cr_assert_eq(fchmod(held, 0666), 0);
                } else if (k == 2) {
                        (void) unlink(tmp); /* a daemon that wrote there renamed it */
                        close(open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0666));
                        cr_assert_eq(symlink(target, tmp), 0);
                }
                rewritten[k] = metrics_rewritten_twice(path, &ino);
                if (!rewritten[k])
                        break;
                /* The loop is not stuck: a new client gets its Hello answered. */
                c = raw_connect(&other);
                served[k] = raw_hello(c) > 0;
                close(c);
                if (k == 0) {
                        int r = open(tmp, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                        char b;

                        untouched[k] = r >= 0 && read(r, &b, 1) == 0; /* no writer: EOF */
                        close(r);
                } else if (k == 1)
                        untouched[k] = fstat(held, &st) == 0 && st.st_size == 0 && stat(tmp, &lst) == 0 &&
                                       lst.st_ino == st.st_ino;
                else
                        untouched[k] = stat(target, &st) == 0 && st.st_size == 0 && lstat(tmp, &lst) == 0 &&
                                       S_ISLNK(lst.st_mode);
        }
        if (held >= 0)
                close(held);
        stopped = test_daemon_stop(&other);
        for (int k = 0; k < 3; k++) {
                cr_assert(rewritten[k], "with %s at %s the metrics file was not rewritten", kinds[k], tmp);
                cr_assert(served[k], "with %s at %s a client was not served", kinds[k], tmp);
                cr_assert(untouched[k], "%s at %s received what the daemon wrote", kinds[k], tmp);
        }
        cr_assert_eq(stopped, 0);
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
        cr_assert(strstr(kfdb_session_last_error(s), "max_buffers 1, policy Buffers=)"), "%s", kfdb_session_last_error(s));
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
                /* SessionEnded said why, and not to come back. */
                cr_assert(strstr(kfdb_session_last_error(s), "kfdbrokerd ended the session: terminated over D-Bus"),
                          "%s", kfdb_session_last_error(s));
                cr_assert_eq(kfdb_session_get_reconnects(s), 0);
        }
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, NULL, "t", id);
        cr_assert_lt(r, 0);
        cr_assert(sd_bus_error_has_name(&e, "org.kfdbroker.Broker1.Error.NoSuchSession"), "%s", e.name);
        sd_bus_error_free(&e);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* The reason a caller gives TerminateSession reaches SessionClosed (and the
 * log) as printable ASCII: a newline and a UTF-8 character the 255-byte cut
 * would split come out as '?', and the signal is sent (a string cut inside a
 * character is not valid UTF-8, which sd-bus refuses to send). */
Test(dbus, terminate_reason_is_printable_and_signalled) {
        sd_bus *bus = open_bus();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        Signals sig = {};
        kfdb_session *s;
        char reason[400];
        uint64_t id;
        size_t n;
        int r;

        cr_assert_geq(sd_bus_match_signal(bus, NULL, NAME, PATH, IFACE, NULL, on_signal, &sig), 0);
        cr_assert_geq(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "GetId", NULL, NULL, ""), 0);
        s = connect_session();
        id = kfdb_session_get_id(s);
        sig.only_session = id;
        /* "line1\nline2" and then two-byte characters (U+00E9) up to past 255 bytes. */
        n = (size_t) snprintf(reason, sizeof reason, "line1\nline2 ");
        while (n + 2 < sizeof reason - 1) {
                reason[n++] = (char) 0xc3;
                reason[n++] = (char) 0xa9;
        }
        reason[n] = 0;
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "TerminateSession", &e, NULL, "ts", id, reason);
        cr_assert_geq(r, 0, "TerminateSession: %s", e.message);
        wait_for(bus, &sig.closed_id);
        cr_assert_eq(sig.closed_id, id);
        cr_assert(strstr(sig.closed_reason, "terminated over D-Bus by "), "%s", sig.closed_reason);
        cr_assert(strstr(sig.closed_reason, ": line1?line2 ??"), "%s", sig.closed_reason);
        cr_assert_eq(strlen(sig.closed_reason), 255u, "%s", sig.closed_reason);
        for (const char *p = sig.closed_reason; *p; p++)
                cr_assert(*p >= 0x20 && *p < 0x7f, "byte 0x%02x in %s", (unsigned char) *p, sig.closed_reason);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* Every countable limit, lowered over D-Bus, refuses the next request with
 * EDQUOT and a message naming it. */
Test(dbus, each_limit_is_enforced_with_its_error) {
        sd_bus *bus = open_bus();
        sd_bus_error e = SD_BUS_ERROR_NULL;
        kfdb_session *s = connect_session();
        uint64_t id = kfdb_session_get_id(s);
        kfdb_buffer *a, *b, *c;
        kfdb_event *e1, *e2;
        kfdb_batch *batch;
        uint64_t fence;
        int r;

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", id, 4,
                               "BufferMemory", "t", (uint64_t) (1u << 20), "MaxBufferSize", "t",
                               (uint64_t) (512u << 10), "Events", "t", (uint64_t) 1, "JobsInFlight", "t",
                               (uint64_t) 1);
        cr_assert_geq(r, 0, "%s", e.message);

        cr_assert_eq(kfdb_buffer_alloc(s, 1u << 20, KFDB_PLACEMENT_GTT, &a), -EDQUOT);
        cr_assert(strstr(kfdb_session_last_error(s), "max_buffer_size limit (policy MaxBufferSize=) of 524288 bytes"), "%s",
                  kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_alloc(s, 512u << 10, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 512u << 10, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &c), -EDQUOT);
        cr_assert(strstr(kfdb_session_last_error(s), "buffer memory limit (max_buffer_bytes 1048576, policy BufferMemory=)"), "%s",
                  kfdb_session_last_error(s));

        cr_assert_eq(kfdb_event_create(s, false, &e1), 0);
        cr_assert_eq(kfdb_event_create(s, false, &e2), -EDQUOT);
        cr_assert(strstr(kfdb_session_last_error(s), "max_events 1, policy Events=)"), "%s", kfdb_session_last_error(s));

        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 4096, 1), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 2), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), -EDQUOT);
        cr_assert(strstr(kfdb_session_last_error(s), "max_jobs_in_flight 1, policy JobsInFlight=)"), "%s", kfdb_session_last_error(s));
        kfdb_batch_reset(batch);
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 4096, 1), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "one job is within the limit");
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0);
        kfdb_batch_free(batch);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* The ranges a policy file allows hold for SetLimits too; a refused call changes nothing. */
Test(dbus, set_limits_refuses_values_out_of_range) {
        static const struct {
                const char *key;
                uint64_t value;
                const char *message;
        } bad[] = {
                { "JobsInFlight", 0, "Limit JobsInFlight must be 1..4294967294, or 18446744073709551615 for no limit, got 0" },
                { "JobTimeoutUSec", 0, "Limit JobTimeoutUSec must be 1..18446744073709551 microseconds, or "
                                       "18446744073709551615 for no limit, got 0" },
                { "JobTimeoutUSec", 18446744073709552ull, "Limit JobTimeoutUSec must be 1..18446744073709551 "
                                                          "microseconds, or 18446744073709551615 for no limit, got "
                                                          "18446744073709552" },
                { "BufferMemory", 0, "Limit BufferMemory must be 1..18446744073709551614 bytes, or "
                                     "18446744073709551615 for no limit, got 0" },
                { "Buffers", 4294967295ull, "Limit Buffers must be 0..4294967294, or 18446744073709551615 for no "
                                            "limit, got 4294967295" },
        };
        sd_bus *bus = open_bus();
        kfdb_session *s = connect_session();
        uint64_t id = kfdb_session_get_id(s);

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                sd_bus_error e = SD_BUS_ERROR_NULL;
                int r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", id, 2,
                                           "Weight", "u", (uint32_t) 9, bad[i].key, "t", bad[i].value);

                cr_expect_lt(r, 0, "%s", bad[i].key);
                cr_expect(sd_bus_error_has_name(&e, SD_BUS_ERROR_INVALID_ARGS), "%s", e.name);
                cr_expect_str_eq(e.message, bad[i].message);
                sd_bus_error_free(&e);
        }
        cr_assert_eq(session_number(bus, id, "Weight"), 1, "nothing of a refused call is applied");
        /* Not fitted to the simulated GPU's 1 GiB: it cannot see a buffer's
         * last copy go (docs/policy.md "Defaults on a shared GPU"). */
        cr_assert_eq(session_number(bus, id, "BufferMemory"), (int64_t) (4ull << 30));
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

        /* A broken file now: refused, and the policy in force (Buffers=7, not the
         * defaults) stays, for this session and for one that connects after. */
        f = fopen(path, "we");
        fprintf(f, "[Match]\nUser=%u\n[Limits]\nBuffers=7\nWeight=heavy\n", (unsigned) getuid());
        fclose(f);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ReloadPolicy", &e, NULL, "");
        cr_assert_lt(r, 0);
        cr_assert(strstr(e.message, "10-test.conf:5"), "names file and line: %s", e.message);
        sd_bus_error_free(&e);
        {
                kfdb_session *later = connect_session();
                kfdb_usage u;

                cr_assert_eq(kfdb_query(s, &u), 0);
                cr_assert_eq(u.limits.max_buffers, 7, "the old policy stays for a connected session");
                cr_assert_eq(kfdb_query(later, &u), 0);
                cr_assert_eq(u.limits.max_buffers, 7, "and for a new one");
                cr_assert_eq(session_number(bus, kfdb_session_get_id(later), "Weight"), 5);
                kfdb_session_free(later);
        }

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

static int as_nobody(int (*fn)(uint64_t), uint64_t arg);

/* As nobody: subscribes to the daemon's signals, says so on fd arg, then
 * listens for 1.5 s. Exit 0 if no signal of the interface arrived. */
static int listen_for_signals(uint64_t ready_fd) {
        Signals sig = {};
        sd_bus *bus = NULL;

        if (sd_bus_open_system(&bus) < 0)
                return 10;
        if (sd_bus_match_signal(bus, NULL, NAME, PATH, IFACE, NULL, on_signal, &sig) < 0 ||
            sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetId", NULL, NULL, "") < 0)
                return 11;
        if (write((int) ready_fd, "r", 1) != 1)
                return 12;
        for (uint64_t end = now_usec() + 1500000; now_usec() < end;) {
                if (sd_bus_process(bus, NULL) == 0)
                        (void) sd_bus_wait(bus, 100000);
        }
        sd_bus_unref(bus);
        if (sig.opened_id || sig.closed_id) {
                fprintf(stderr, "nobody received SessionOpened %" PRIu64 " / SessionClosed %" PRIu64 "\n",
                        sig.opened_id, sig.closed_id);
                return 13;
        }
        return 0;
}

Test(dbus, signals_reach_root_but_not_other_users) {
        sd_bus *bus = open_bus();
        Signals sig = {};
        kfdb_session *s;
        int p[2], status;
        char c;
        pid_t pid;

        cr_assert_geq(sd_bus_match_signal(bus, NULL, NAME, PATH, IFACE, NULL, on_signal, &sig), 0);
        cr_assert_geq(sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "GetId", NULL, NULL, ""), 0);
        cr_assert_eq(pipe(p), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                close(p[0]);
                _exit(as_nobody(listen_for_signals, (uint64_t) p[1]));
        }
        close(p[1]);
        cr_assert_eq(read(p[0], &c, 1), 1, "the unprivileged listener did not get ready");
        close(p[0]);
        s = connect_session();
        sig.only_session = kfdb_session_get_id(s);
        wait_for(bus, &sig.opened_id);
        cr_assert_eq(sig.opened_id, kfdb_session_get_id(s), "root receives SessionOpened");
        kfdb_session_free(s);
        wait_for(bus, &sig.closed_id);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "uid nobody must not receive the daemon's signals (status 0x%x)", status);
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

/* An unprivileged user's own session, opened over D-Bus: readable, listed and
 * terminable by that user without polkit. */
static int own_session_calls(uint64_t unused) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        kfdb_session *s = NULL;
        sd_bus *bus = NULL;
        uint64_t id, listed;
        uint32_t uid;
        int fd, r;

        if (sd_bus_open_system(&bus) < 0)
                return 10;
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "OpenSession", &e, &reply, "");
        if (r < 0 || sd_bus_message_read(reply, "h", &fd) < 0)
                return 11;
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        sd_bus_message_unref(reply);
        reply = NULL;
        if (kfdb_session_new_from_fd(fd, "nobody's", &s) < 0)
                return 12;
        id = kfdb_session_get_id(s);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, &reply, "t", id);
        if (r < 0) {
                fprintf(stderr, "GetSession: %s\n", e.message);
                return 13;
        }
        sd_bus_message_unref(reply);
        reply = NULL;
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListSessions", &e, &reply, "");
        if (r < 0 || sd_bus_message_enter_container(reply, 'a', "(tuuussss)") < 0 ||
            sd_bus_message_read(reply, "(tuuussss)", &listed, &uid, NULL, NULL, NULL, NULL, NULL, NULL) <= 0 ||
            listed != id || uid != 65534 || sd_bus_message_at_end(reply, false) <= 0)
                return 14;
        sd_bus_message_unref(reply);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "TerminateSession", &e, NULL, "ts", id, "done");
        if (r < 0) {
                fprintf(stderr, "TerminateSession: %s\n", e.message);
                return 15;
        }
        kfdb_session_free(s);
        sd_bus_unref(bus);
        return 0;
}

Test(dbus, a_user_reads_and_ends_their_own_session) {
        sd_bus *bus = open_bus();
        kfdb_session *root = connect_session();

        cr_assert_eq(as_nobody(own_session_calls, 0), 0);
        kfdb_session_free(root);
        sd_bus_unref(bus);
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

/* ---- polkit's answer ---- */

/* A stand-in for polkit's authority on the private bus: it owns
 * org.freedesktop.PolicyKit1 and answers CheckAuthorization "yes" for the
 * actions in allow (comma-separated), "no" for the rest. In a child process,
 * so the callers can fork freely. Returns its pid once it owns the name. */
static int authority_check(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *allow = userdata, *kind, *action;
        char list[256];
        bool yes = false;
        int r;

        r = sd_bus_message_enter_container(m, 'r', "sa{sv}");
        if (r >= 0)
                r = sd_bus_message_read(m, "s", &kind);
        if (r >= 0)
                r = sd_bus_message_skip(m, "a{sv}");
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r >= 0)
                r = sd_bus_message_read(m, "s", &action);
        if (r < 0)
                return r;
        snprintf(list, sizeof(list), ",%s,", allow);
        {
                char want[160];
                snprintf(want, sizeof(want), ",%s,", action);
                yes = strcmp(kind, "system-bus-name") == 0 && strstr(list, want);
        }
        return sd_bus_reply_method_return(m, "(bba{ss})", (int) yes, 0, 0);
}

static const sd_bus_vtable authority_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("CheckAuthorization", "(sa{sv})sa{ss}us", "(bba{ss})", authority_check,
                      SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

static pid_t start_authority(const char *allow) {
        int ready[2];
        pid_t pid;
        char c;

        cr_assert_eq(pipe2(ready, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                sd_bus *bus = NULL;

                int r = -EEXIST;

                if (sd_bus_open_system(&bus) < 0 ||
                    sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/PolicyKit1/Authority",
                                             "org.freedesktop.PolicyKit1.Authority", authority_vtable,
                                             (void *) allow) < 0)
                        _exit(1);
                /* The previous stand-in's name may take a moment to be released. */
                for (int i = 0; i < 200 && r == -EEXIST; i++)
                        if ((r = sd_bus_request_name(bus, "org.freedesktop.PolicyKit1", 0)) == -EEXIST)
                                usleep(10000);
                if (r < 0)
                        _exit(1);
                (void) !write(ready[1], "r", 1);
                for (;;) {
                        r = sd_bus_process(bus, NULL);
                        if (r < 0)
                                _exit(2);
                        if (r == 0 && sd_bus_wait(bus, UINT64_MAX) < 0)
                                _exit(3);
                }
        }
        close(ready[1]);
        cr_assert_eq(read(ready[0], &c, 1), 1, "the stand-in authority did not start");
        close(ready[0]);
        return pid;
}

static void stop_authority(pid_t pid) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
}

static int granted_calls(uint64_t root_session) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        uint64_t id;
        int r;

        if (sd_bus_open_system(&bus) < 0)
                return 10;
        /* org.kfdbroker.manage granted: another user's session may be changed. */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", root_session, 1,
                               "Weight", "u", (uint32_t) 6);
        if (r < 0) {
                fprintf(stderr, "SetLimits: %s\n", e.message);
                return 11;
        }
        /* org.kfdbroker.read-all granted: every session is listed. */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListSessions", &e, &reply, "");
        if (r < 0 || sd_bus_message_enter_container(reply, 'a', "(tuuussss)") < 0 ||
            sd_bus_message_read(reply, "(tuuussss)", &id, NULL, NULL, NULL, NULL, NULL, NULL, NULL) <= 0 ||
            id != root_session)
                return 12;
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return 0;
}

static int denied_calls(uint64_t root_session) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        sd_bus *bus = NULL;
        int r;

        if (sd_bus_open_system(&bus) < 0)
                return 10;
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", root_session, 1,
                               "Weight", "u", (uint32_t) 7);
        if (r >= 0 || !sd_bus_error_has_name(&e, SD_BUS_ERROR_ACCESS_DENIED) ||
            strcmp(e.message, "Access denied: polkit did not authorize action org.kfdbroker.manage for SetLimits") != 0) {
                fprintf(stderr, "SetLimits: %d %s\n", r, e.message);
                return 11;
        }
        sd_bus_error_free(&e);
        /* Read-all refused: the list degrades to the caller's own sessions (none). */
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "ListSessions", &e, &reply, "");
        if (r < 0 || sd_bus_message_enter_container(reply, 'a', "(tuuussss)") < 0 ||
            sd_bus_message_at_end(reply, false) <= 0)
                return 12;
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        return 0;
}

Test(dbus, polkit_decides_for_other_users) {
        sd_bus *bus = open_bus();
        kfdb_session *s = connect_session();
        uint64_t id = kfdb_session_get_id(s);
        pid_t authority;

        authority = start_authority("org.kfdbroker.manage,org.kfdbroker.read-all");
        cr_assert_eq(as_nobody(granted_calls, id), 0);
        stop_authority(authority);
        cr_assert_eq(session_number(bus, id, "Weight"), 6, "the granted SetLimits took effect");

        authority = start_authority("");
        cr_assert_eq(as_nobody(denied_calls, id), 0);
        stop_authority(authority);
        cr_assert_eq(session_number(bus, id, "Weight"), 6, "the refused SetLimits changed nothing");
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
        const char *text;
        DictValue drm_usage;
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

        drm_usage = session_value(bus, id, "DrmUsage");
        line = strstr(drm_usage.string, "drm-engine-compute:\t");
        cr_assert_not_null(line, "%s", drm_usage.string);
        cr_assert_gt(strtoull(line + strlen("drm-engine-compute:\t"), NULL, 10), 0, "%s", drm_usage.string);
        free(drm_usage.string);

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
