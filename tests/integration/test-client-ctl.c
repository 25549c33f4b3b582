/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl and libkfdbroker's poll-loop integration against the real
 * kfdbrokerd on the simulated GPU: what a user sees from `kfdbrokerctl
 * status` (text and JSON), `kfdbrokerctl demo` (the user story: two
 * 64 MiB buffers, a GPU fill and copy, every byte checked; saxpy over 16 M
 * floats through the broker, every element checked) and `kfdbrokerctl
 * kernels FILE`, the message when
 * no daemon listens, and a client that drives completion from its own poll(2)
 * loop on kfdb_get_event_fd() and kfdb_get_fd(); then the D-Bus verbs
 * (sessions, accounting, metrics) against the daemon on a private bus.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;

static void setup(void) {
        test_daemon_start(&d, NULL);
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(ctl, .init = setup, .fini = teardown, .timeout = 120);

static int run_ctl(const char *const *args, char **ret_out, char **ret_err) {
        return test_run_ctl(args, false, ret_out, ret_err);
}

Test(ctl, status_text_and_json) {
        const char *text[] = { "--socket", d.sock, "status", NULL };
        const char *json[] = { "--json", "--socket", d.sock, "status", NULL };
        char *out, *err;

        cr_assert_eq(run_ctl(text, &out, &err), 0, "stderr: %s", err);
        cr_assert(strstr(out, "daemon:   kfdbrokerd " KFDBROKER_VERSION "\n"), "%s", out);
        cr_assert(strstr(out, "backend:  sim (simulated GPU)\n"), "%s", out);
        cr_assert(strstr(out, "device:   gfx1030"), "%s", out);
        /* The session of kfdbrokerctl itself. */
        cr_assert(strstr(out, "sessions: 1\n"), "%s", out);
        cr_assert(strstr(out, "jobs:     0 completed, 0 failed, 0 on the GPU\n"), "%s", out);
        cr_assert(strstr(out, "buffers:  0 B (0 bytes), "), "%s", out);
        cr_assert(strstr(out, "events:   0\n"), "%s", out);
        free(out);
        free(err);

        cr_assert_eq(run_ctl(json, &out, &err), 0, "stderr: %s", err);
        cr_assert(strstr(out, "{\"daemon_version\":\"" KFDBROKER_VERSION "\",\"backend\":\"sim\",\"gfx_name\":\"gfx1030\""),
                  "%s", out);
        cr_assert(strstr(out, "\"sessions\":1,\"jobs_completed\":0,\"jobs_failed\":0,\"jobs_in_flight\":0,"),
                  "%s", out);
        cr_assert(strstr(out, "\"buffer_bytes\":0,\"gpu_buffers\":"), "%s", out);
        free(out);
        free(err);
}

Test(ctl, device_text_and_json) {
        const char *text[] = { "--socket", d.sock, "device", NULL };
        const char *json[] = { "--json", "--socket", d.sock, "device", NULL };
        char *out, *err;

        cr_assert_eq(run_ctl(text, &out, &err), 0, "stderr: %s", err);
        cr_assert(strstr(out, "gfx:         gfx1030\n"), "%s", out);
        cr_assert(strstr(out, "SDMA queues: 2\n"), "%s", out);
        /* the hardware queues KFD offers a context (the topology's num_cp_queues) */
        cr_assert(strstr(out, "compute queues: 8\n"), "%s", out);
        free(out);
        free(err);

        cr_assert_eq(run_ctl(json, &out, &err), 0, "stderr: %s", err);
        cr_assert(strstr(out, ",\"sdma_queues\":2,\"compute_queues\":8}\n"), "%s", out);
        free(out);
        free(err);
}

Test(ctl, demo_checks_every_byte_of_64_mib) {
        const char *demo[] = { "--socket", d.sock, "demo", NULL };
        const char *json[] = { "--socket", d.sock, "--json", "demo", "--size=1M", "--vram", "--elements=4096", NULL };
        char *out, *err;

        cr_assert_eq(run_ctl(demo, &out, &err), 0, "stdout: %s\nstderr: %s", out, err);
        cr_assert(strstr(out, "allocated 2 buffers of 64.0 MiB in GTT"), "%s", out);
        cr_assert(strstr(out, "checked all 67108864 bytes of both buffers"), "%s", out);
        cr_assert(strstr(out, " GB/s\n"), "%s", out);
#ifdef COMPUTE_KERNEL_DIR
        cr_assert(strstr(out, "saxpy on the GPU: y = 2.5 * x + y over 16777216 floats in "), "%s", out);
        cr_assert(strstr(out, " M elements/s\n"), "%s", out);
        cr_assert(strstr(out, "checked all 16777216 elements of y through its dma-buf mapping against the CPU: correct\n"),
                  "%s", out);
        /* 16 fills, one copy, one dispatch, and nothing else ran on this daemon. */
        cr_assert(strstr(out, "daemon: 18 jobs completed, 0 failed"), "%s", out);
#endif
        cr_assert(strstr(out, "demo passed\n"), "%s", out);
        cr_assert_str_empty(err);
        free(out);
        free(err);

        cr_assert_eq(run_ctl(json, &out, &err), 0, "stdout: %s\nstderr: %s", out, err);
        cr_assert(strstr(out, "{\"passed\":true,\"size\":1048576,\"backend\":\"sim\""), "%s", out);
#ifdef COMPUTE_KERNEL_DIR
        cr_assert(strstr(out, "\"wrong_bytes\":0,\"saxpy\":{\"elements\":4096,\"ms\":"), "%s", out);
        cr_assert(strstr(out, ",\"wrong_elements\":0},\"daemon_jobs_completed\":36,"), "%s", out);
#endif
        free(out);
        free(err);
}

#ifdef COMPUTE_KERNEL_DIR
Test(ctl, kernels_lists_what_the_daemon_loaded) {
        const char *text[] = { "--socket", d.sock, "kernels", COMPUTE_KERNEL_DIR "/local-sum.hsaco", NULL };
        const char *json[] = { "--socket", d.sock, "--json", "kernels", COMPUTE_KERNEL_DIR "/saxpy.hsaco", NULL };
        const char *bad[] = { "--socket", d.sock, "kernels", "/etc/hostname", NULL };
        const char *none[] = { "--socket", d.sock, "kernels", NULL };
        const char *missing[] = { "--socket", d.sock, "kernels", "/nonexistent/k.hsaco", NULL };
        char *out, *err;

        cr_assert_eq(run_ctl(text, &out, &err), 0, "stdout: %s\nstderr: %s", out, err);
        cr_assert(strstr(out, "local_sum\n  workgroup: at most 256 work-items; LDS 0 bytes; scratch 0 bytes per work-item; kernarg segment "),
                  "%s", out);
        cr_assert(strstr(out, "  arg 0: global_buffer  offset    0  size   8\n"), "%s", out);
        cr_assert(strstr(out, "  arg 2: by_value       offset   16  size   4\n"), "%s", out);
        cr_assert(strstr(out, "  arg 3: dynamic_lds    offset   20  size   4\n"), "%s", out);
        cr_assert(strstr(out, " hidden arguments the daemon fills)\n"), "%s", out);
        free(out);
        free(err);

        cr_assert_eq(run_ctl(json, &out, &err), 0, "stdout: %s\nstderr: %s", out, err);
        cr_assert(strstr(out, "\"kernels\":[{\"name\":\"saxpy\",\"kernarg_size\":"), "%s", out);
        cr_assert(strstr(out, "{\"name\":\"\",\"kind\":\"by_value\",\"offset\":0,\"size\":4}"), "%s", out);
        cr_assert(strstr(out, "{\"name\":\"\",\"kind\":\"global_buffer\",\"offset\":8,\"size\":8}"), "%s", out);
        free(out);
        free(err);

        cr_assert_eq(run_ctl(bad, &out, &err), 1);
        cr_assert(strstr(err, "kfdbrokerctl: cannot load /etc/hostname: load_code_object: "), "%s", err);
        cr_assert(strstr(err, "(Exec format error)\n"), "%s", err);
        free(out);
        free(err);
        cr_assert_eq(run_ctl(none, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl kernels: expected one code object file, got 0 arguments\n");
        free(out);
        free(err);
        /* The library's message names the errno already: said once. */
        cr_assert_eq(run_ctl(missing, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl: cannot load /nonexistent/k.hsaco: cannot open /nonexistent/k.hsaco: "
                              "No such file or directory\n");
        free(out);
        free(err);
}
#endif

Test(ctl, no_daemon_and_bad_usage) {
        const char *missing[] = { "--socket", "/nonexistent/kfdbroker.sock", "status", NULL };
        const char *unknown[] = { "--socket", d.sock, "frobnicate", NULL };
        const char *bad_size[] = { "--socket", d.sock, "demo", "--size=1000", NULL };
        const char *version[] = { "--version", NULL };
        char *out, *err;

        cr_assert_eq(run_ctl(missing, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl: cannot connect to /nonexistent/kfdbroker.sock: No such "
                              "file or directory (is kfdbrokerd running?)\n");
        free(out);
        free(err);
        cr_assert_eq(run_ctl(unknown, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl: unknown command 'frobnicate'. Try 'kfdbrokerctl --help'.\n");
        free(out);
        free(err);
        cr_assert_eq(run_ctl(bad_size, &out, &err), 1);
        cr_assert(strstr(err, "--size must be a multiple of 65536 bytes, got '1000'"), "%s", err);
        free(out);
        free(err);
        cr_assert_eq(run_ctl(version, &out, &err), 0);
        cr_assert_str_eq(out, "kfdbrokerctl " KFDBROKER_VERSION "\n");
        free(out);
        free(err);
}

/* A client that owns its event loop: it polls the library's two fds itself. */
Test(ctl, completion_through_a_clients_own_poll_loop) {
        kfdb_session *s = NULL;
        kfdb_buffer *a = NULL, *b = NULL;
        kfdb_batch *batch = NULL;
        kfdb_event *e = NULL;
        kfdb_wait_entry w;
        kfdb_wait_result result;
        uint64_t fence = 0, age;
        uint32_t *map;
        int r;

        r = kfdb_session_new(d.sock, "poll-loop", &s);
        cr_assert_eq(r, 0, "connect: %s", strerror(-r));
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_event_create(s, false, &e), 0, "%s", kfdb_session_last_error(s));
        age = kfdb_event_get_age(e);
        cr_assert_eq(age, 1, "a new event has age 1 in the session page");

        /* Nothing signals the event yet: a 0 ms wait times out and reports the age. */
        w = (kfdb_wait_entry) { e, 0 };
        cr_assert_eq(kfdb_wait_events(s, &w, 1, false, 20, &result), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(result, KFDB_WAIT_TIMEOUT);

        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 1 << 20, 0x01020304), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 4096, a, 0, (1 << 20) - 4096), 0);
        cr_assert_eq(kfdb_batch_signal_event(batch, e), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));

        while (kfdb_fence_is_done(s, fence) == 0) {
                struct pollfd p[2] = {
                        { .fd = kfdb_get_event_fd(s), .events = POLLIN },
                        { .fd = kfdb_get_fd(s), .events = POLLIN },
                };
                cr_assert_geq(poll(p, 2, 10000), 1, "no wakeup within 10 s");
                cr_assert_geq(kfdb_process(s), 0);
        }
        cr_assert_eq(kfdb_fence_wait(s, fence, 0), 0, "%s", kfdb_session_last_error(s));
        cr_assert(kfdb_event_is_signaled(e));
        cr_assert_gt(kfdb_event_get_age(e), age, "a signal bumps the event's age");

        /* The copy landed 4096 bytes in: the first page is still zero. */
        cr_assert_eq(kfdb_buffer_map(b, (void **) &map), 0);
        cr_assert_eq(map[0], 0);
        cr_assert_eq(map[1023], 0);
        cr_assert_eq(map[1024], 0x01020304);
        cr_assert_eq(map[(1 << 18) - 1], 0x01020304);

        /* A copy past the end is refused by the library before the daemon sees it. */
        cr_assert_eq(kfdb_batch_copy(batch, b, 8, a, 0, 1 << 20), -EINVAL);
        kfdb_session_free(s);
}

/* ---- The D-Bus verbs, on a private bus ---- */

static pid_t bus_pid = -1;

/* A private dbus-daemon (session configuration: no policy in the way); the daemon and
 * kfdbrokerctl both reach it as the "system" bus through DBUS_SYSTEM_BUS_ADDRESS. */
static void start_private_bus(void) {
        char addr[256];
        FILE *f = popen("dbus-daemon --session --fork --print-address=1 --print-pid=1", "re");

        cr_assert_not_null(f, "cannot run dbus-daemon");
        cr_assert_not_null(fgets(addr, sizeof(addr), f), "dbus-daemon printed no address");
        addr[strcspn(addr, "\n")] = '\0';
        cr_assert_eq(fscanf(f, "%d", &bus_pid), 1);
        pclose(f);
        cr_assert_eq(setenv("DBUS_SYSTEM_BUS_ADDRESS", addr, 1), 0);
}

static void stop_private_bus(void) {
        if (bus_pid > 0)
                kill(bus_pid, SIGTERM);
        bus_pid = -1;
}

static void bus_setup(void) {
        static const char *const args[] = { "--bus=system", NULL };
        const char *list[] = { "sessions", NULL };
        char *out, *err;
        int rc = 1;

        start_private_bus();
        test_daemon_start(&d, args);
        /* The daemon takes its name asynchronously after start-up. */
        for (int i = 0; i < 200 && rc != 0; i++) {
                rc = run_ctl(list, &out, &err);
                free(out);
                free(err);
                if (rc != 0)
                        usleep(10000);
        }
        cr_assert_eq(rc, 0, "org.kfdbroker.Broker1 never appeared on the private bus");
}

static void bus_teardown(void) {
        test_daemon_fini(&d);
        stop_private_bus();
        test_fini_end();
}

TestSuite(ctl_bus, .init = bus_setup, .fini = bus_teardown, .timeout = 120);

Test(ctl_bus, sessions_lists_every_client) {
        const char *json[] = { "--json", "sessions", NULL };
        const char *text[] = { "sessions", NULL };
        kfdb_session *s = NULL;
        char *out, *err, want[128];

        cr_assert_eq(kfdb_session_new(d.sock, "bus-test-client", &s), 0);
        cr_assert_eq(run_ctl(json, &out, &err), 0, "stderr: %s", err);
        snprintf(want, sizeof(want), "\"uid\":%u,\"gid\":%u,\"pid\":%d,", (unsigned) getuid(),
                 (unsigned) getgid(), (int) getpid());
        cr_assert(strstr(out, want), "%s should contain %s", out, want);
        cr_assert(strstr(out, "\"client_name\":\"bus-test-client\"}]"), "%s", out);
        free(out);
        free(err);

        cr_assert_eq(run_ctl(text, &out, &err), 0, "stderr: %s", err);
        cr_assert(strncmp(out, "ID     UID     GID     PID      UNIT", strlen("ID     UID     GID     PID      UNIT")) == 0,
                  "%s", out);
        cr_assert(strstr(out, " bus-test-client\n"), "%s", out);
        free(out);
        free(err);
        kfdb_session_free(s);
}

Test(ctl_bus, accounting_and_metrics_after_a_demo) {
        const char *demo[] = { "--socket", d.sock, "demo", "--size=1M", "--elements=4096", NULL };
        const char *json[] = { "accounting", "--json", NULL }; /* global options may follow the verb */
        const char *text[] = { "accounting", NULL };
        const char *metrics[] = { "metrics", NULL };
        char *out, *err;

        cr_assert_eq(run_ctl(demo, &out, &err), 0, "stdout: %s\nstderr: %s", out, err);
        free(out);
        free(err);

        /* The demo's session is gone; its identity (this uid) keeps the totals. */
        cr_assert_eq(run_ctl(json, &out, &err), 0, "stderr: %s", err);
        cr_assert(strncmp(out, "{\"sessions\":[],\"identities\":[{", strlen("{\"sessions\":[],\"identities\":[{")) == 0,
                  "%s", out);
#ifdef COMPUTE_KERNEL_DIR
        cr_assert(strstr(out, "\"jobs_completed\":18,"), "%s", out);
        cr_assert(strstr(out, "\"jobs_compute\":1,"), "%s", out);
#else
        cr_assert(strstr(out, "\"jobs_completed\":17,"), "%s", out);
#endif
        cr_assert(strstr(out, "\"bytes_copied\":1048576,"), "%s", out);
        cr_assert(strstr(out, "\"bytes_filled\":1048576,"), "%s", out);
        free(out);
        free(err);

        cr_assert_eq(run_ctl(text, &out, &err), 0, "stderr: %s", err);
        cr_assert(strstr(out, "Sessions:\n  (none)\n\nIdentities:\n"), "%s", out);
#ifdef COMPUTE_KERNEL_DIR
        cr_assert(strstr(out, "  JobsCompleted        18\n"), "%s", out);
#else
        cr_assert(strstr(out, "  JobsCompleted        17\n"), "%s", out);
#endif
        free(out);
        free(err);

        cr_assert_eq(run_ctl(metrics, &out, &err), 0, "stderr: %s", err);
        cr_assert(strstr(out, "kfdbroker_build_info{version=\"" KFDBROKER_VERSION "\",backend=\"sim\",gfx=\"gfx1030\"} 1\n"),
                  "%s", out);
        free(out);
        free(err);
}

Test(ctl_bus_missing, no_bus_and_no_daemon_on_the_bus) {
        const char *list[] = { "sessions", NULL };
        char *out, *err;

        cr_assert_eq(setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus", 1), 0);
        cr_assert_eq(run_ctl(list, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl: cannot connect to the system bus: No such file or directory\n"
                              "kfdbrokerctl: this command uses kfdbrokerd's D-Bus API on the system bus (kfdbrokerd "
                              "--bus=system, as the shipped service runs it); a daemon without it serves only the "
                              "socket: 'status' (your sessions' GPU contexts) and 'terminate ID' work there\n");
        free(out);
        free(err);

        start_private_bus();
        cr_assert_eq(run_ctl(list, &out, &err), 1);
        stop_private_bus();
        cr_assert_str_eq(err, "kfdbrokerctl: org.kfdbroker.Broker1 is not on the system bus (is kfdbrokerd running, with --bus=system? Without it, only the socket's commands work: status, device, demo, selftest, terminate)\n");
        free(out);
        free(err);
}
