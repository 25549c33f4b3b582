/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerd as the installed service starts it: the D-Bus name on a bus
 * whose policy was read before the daemon's user existed (the daemon asks the
 * bus to re-read it), a start-up failure that exits 1 (a name the bus
 * refuses for good), a machine without an AMD GPU (--device=kfd stays up,
 * says why in STATUS= and answers every client with ENODEV), and
 * --device=auto falling back to the simulated GPU only with a warning that
 * `kfdbrokerctl status` repeats.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "harness.h"

static void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ __attribute__((cleanup(freep)))

#define BUS_NAME "org.kfdbroker.Broker1"
#define NO_GPU_MESSAGE "no AMD GPU: /dev/kfd missing — see kfdbrokerd(8) to run the simulated GPU"

static char dir[64];
static pid_t bus_pid, daemon_pid;

static void setup(void) {
        strcpy(dir, "/tmp/kfdbroker-service-test.XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void) {
        char cmd[128];

        if (daemon_pid > 0 && waitpid(daemon_pid, NULL, WNOHANG) == 0) {
                kill(daemon_pid, SIGKILL);
                waitpid(daemon_pid, NULL, 0);
        }
        daemon_pid = 0;
        if (bus_pid > 0)
                kill(bus_pid, SIGTERM);
        bus_pid = 0;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void) !system(cmd);
        test_fini_end();
}

TestSuite(service, .init = setup, .fini = teardown, .timeout = 120);

static void set_path(struct sockaddr_un *sa, const char *path) {
        cr_assert_lt(strlen(path), sizeof(sa->sun_path), "socket path too long: %s", path);
        memcpy(sa->sun_path, path, strlen(path) + 1);
}

/* Forks $KFDBROKERD with argv[1..] (test_daemon_spawn()), killed by the
 * teardown if a test fails first. */
static pid_t spawn(const char **argv, const char *log, void (*setup_child)(void)) {
        pid_t pid = test_daemon_spawn(argv, log, setup_child);

        daemon_pid = pid; /* killed by the teardown if a test fails first */
        return pid;
}


/* ---- The D-Bus name ---- */

/*
 * A private system-like bus (the stock default policy) that lets root own
 * the name only through DIR/late.conf, included if it exists: dbus-daemon
 * watches the directories of <includedir>, not a single <include>d file, so
 * a late.conf written after the bus started is what a rule naming a user made
 * after the bus read its policy is: not in force until the bus re-reads its
 * configuration (dbus-daemon(1), "SIGHUP ... ReloadConfig").
 */
static void start_bus(void) {
        char conf[128], cmd[256], addr[256];
        FILE *f;

        snprintf(conf, sizeof(conf), "%s/system.conf", dir);
        f = fopen(conf, "we");
        cr_assert(f);
        fprintf(f,
                "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                "<busconfig>\n"
                "  <type>system</type>\n"
                "  <listen>unix:path=%s/system_bus_socket</listen>\n"
                "  <auth>EXTERNAL</auth>\n"
                "  <policy context=\"default\">\n"
                "    <allow user=\"*\"/>\n"
                "    <deny own=\"*\"/>\n"
                "    <deny send_type=\"method_call\"/>\n"
                "    <allow send_type=\"signal\"/>\n"
                "    <allow send_requested_reply=\"true\" send_type=\"method_return\"/>\n"
                "    <allow send_requested_reply=\"true\" send_type=\"error\"/>\n"
                "    <allow receive_type=\"method_call\"/>\n"
                "    <allow receive_type=\"method_return\"/>\n"
                "    <allow receive_type=\"error\"/>\n"
                "    <allow receive_type=\"signal\"/>\n"
                "    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\"/>\n"
                "  </policy>\n"
                "  <include ignore_missing=\"yes\">%s/late.conf</include>\n"
                "</busconfig>\n",
                dir, dir);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "dbus-daemon --config-file=%s --fork --print-address=1 --print-pid=1", conf);
        f = popen(cmd, "re");
        cr_assert(f, "cannot run dbus-daemon");
        cr_assert(fgets(addr, sizeof(addr), f), "dbus-daemon printed no address");
        addr[strcspn(addr, "\n")] = '\0';
        cr_assert_eq(fscanf(f, "%d", &bus_pid), 1);
        pclose(f);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", addr, 1);
}

static void grant_name_late(void) {
        char path[128];
        FILE *f;

        snprintf(path, sizeof(path), "%s/late.conf", dir);
        f = fopen(path, "we");
        cr_assert(f);
        fprintf(f, "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                   " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                   "<busconfig><policy user=\"root\"><allow own=\"" BUS_NAME "\"/></policy>\n"
                   "<policy context=\"default\"><allow send_destination=\"" BUS_NAME "\"/></policy></busconfig>\n");
        fclose(f);
}

/* Whether the name has an owner within timeout_ms. */
static bool name_appears(int timeout_ms) {
        sd_bus *bus = NULL;
        bool found = false;

        cr_assert_eq(sd_bus_open_system(&bus), 0);
        for (int i = 0; i < timeout_ms / 10 && !found; i++) {
                found = sd_bus_get_name_creds(bus, BUS_NAME, 0, NULL) >= 0;
                if (!found)
                        usleep(10000);
        }
        sd_bus_flush_close_unref(bus);
        return found;
}

/* The policy that grants the name appeared after the bus read its own (a
 * user made by systemd-sysusers after the policy file was installed): the
 * daemon's first request is refused, it asks the bus to re-read its
 * configuration and owns the name. */
Test(service, name_refused_by_a_stale_bus_policy_is_owned_after_the_bus_rereads_it) {
        char sock[128], log[128];
        const char *argv[] = { NULL, "--device=sim", "--bus=system", "--listen", sock, "--log-target=stderr", NULL };
        _cleanup_free_ char *out = NULL;
        pid_t pid;

        if (geteuid() != 0)
                cr_skip_test("the private bus grants the name to root; run as root");
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        start_bus();
        grant_name_late();
        pid = spawn(argv, log, NULL);
        cr_assert(name_appears(20000), "the daemon never owned %s:\n%s", BUS_NAME, out = test_read_file(log));
        out = test_read_file(log);
        cr_assert(strstr(out, "The bus refused the name " BUS_NAME " ("), "%s", out);
        cr_assert(strstr(out, "asking it to re-read its configuration"), "%s", out);
        cr_assert(strstr(out, "Serving " BUS_NAME " on the bus"), "%s", out);
        cr_assert(!strstr(out, "Cannot own"), "%s", out);
        kill(pid, SIGTERM);
        cr_assert_eq(test_wait_exit(pid, 30000), 0);
}

/* A bus that refuses the name for good: the daemon cannot do what it was
 * started for (the unit's BusName=), says why and exits 1, as kfdbrokerd(8)
 * says, so that systemd records a failure. */
Test(service, name_refused_for_good_exits_1) {
        char sock[128], log[128];
        const char *argv[] = { NULL, "--device=sim", "--bus=system", "--listen", sock, "--log-target=stderr", NULL };
        _cleanup_free_ char *out = NULL;
        int rc;

        snprintf(sock, sizeof(sock), "%s/sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        start_bus();
        rc = test_wait_exit(spawn(argv, log, NULL), 30000);
        out = test_read_file(log);
        cr_assert_eq(rc, 1, "exit status %d:\n%s", rc, out);
        cr_assert(strstr(out, "error: Cannot own the D-Bus name " BUS_NAME ": "), "%s", out);
        cr_assert(strstr(out, "(also after the bus re-read its configuration: does its policy, "
                              "dbus-1/system.d/" BUS_NAME ".conf, grant it to this user?)\n"),
                  "%s", out);
}

/* ---- No AMD GPU ---- */

static int listen_fd_for_child = -1;
static char notify_path[128];

/* As systemd starts kfdbrokerd.service from kfdbrokerd.socket: the socket on
 * fd 3 (sd_listen_fds(3)) and NOTIFY_SOCKET for Type=notify. */
static void become_socket_activated(void) {
        char pid[32];

        if (dup2(listen_fd_for_child, 3) < 0)
                _exit(126);
        snprintf(pid, sizeof(pid), "%d", (int) getpid());
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_PID", pid, 1);
        setenv("NOTIFY_SOCKET", notify_path, 1);
}

/* The daemon's sd_notify() messages until one holds until, joined by '|'. */
static void read_notify(int fd, char *buf, size_t len, const char *until, int timeout_ms) {
        size_t used = strlen(buf);

        for (int i = 0; i < timeout_ms / 10 && !strstr(buf, until); i++) {
                char msg[4096];
                ssize_t n = recv(fd, msg, sizeof(msg) - 1, MSG_DONTWAIT);

                if (n < 0) {
                        usleep(10000);
                        continue;
                }
                msg[n] = 0;
                used += (size_t) snprintf(buf + used, len - used, "%s|", msg);
                cr_assert_lt(used, len);
        }
        cr_assert(strstr(buf, until), "no %s in the notifications: %s", until, buf);
}

/* What a raw client gets for its Hello: the daemon's one message. */
static Kfdbroker__V1__ServerMessage *hello_answer(const char *sock) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        Kfdbroker__V1__ServerMessage *m = NULL;
        int c = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), r;

        cr_assert(c >= 0);
        set_path(&sa, sock);
        cr_assert_eq(connect(c, (struct sockaddr *) &sa, sizeof(sa)), 0, "connect: %s", strerror(errno));
        m = raw_hello_answer(c, "no-gpu", 1, NULL, NULL, 10000);
        r = raw_recv(c, &(Kfdbroker__V1__ServerMessage *) { NULL }, NULL, NULL, 5000);
        cr_assert(r == 0 || r == -ECONNRESET, "then the connection is closed (%d)", r);
        close(c);
        return m;
}

/* --device=kfd (the shipped unit) on a machine without /dev/kfd: up and
 * ready, STATUS= says why, every client is answered ENODEV with the same
 * words (kfdbrokerctl prints them), and the daemon is still there after. */
Test(service, no_gpu_the_service_stays_up_and_says_why) {
        char sock[128], log[128], notes[16384] = "";
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *argv[] = { NULL, "--device=kfd", "--log-target=stderr", NULL };
        const char *ctl[] = { "--socket", sock, "status", NULL };
        _cleanup_free_ char *out = NULL, *ctl_out = NULL, *ctl_err = NULL;
        int nfd, rc;
        pid_t pid;

        if (access("/dev/kfd", F_OK) == 0)
                cr_skip_test("this machine has /dev/kfd");
        snprintf(sock, sizeof(sock), "%s/kfdbroker.sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        snprintf(notify_path, sizeof(notify_path), "%s/notify", dir);
        listen_fd_for_child = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        set_path(&sa, sock);
        cr_assert_eq(bind(listen_fd_for_child, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(listen(listen_fd_for_child, 16), 0);
        nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        set_path(&sa, notify_path);
        cr_assert_eq(bind(nfd, (struct sockaddr *) &sa, sizeof(sa)), 0);

        pid = spawn(argv, log, become_socket_activated);
        close(listen_fd_for_child);
        read_notify(nfd, notes, sizeof(notes), "READY=1", 10000);
        cr_assert(strstr(notes, "STATUS=" NO_GPU_MESSAGE "|"), "%s", notes);

        for (int i = 0; i < 3; i++) {
                Kfdbroker__V1__ServerMessage *m = hello_answer(sock);

                cr_assert_eq(m->id, 0, "a refusal of the connection, as at the connection limit");
                cr_assert_eq(m->error, ENODEV, "got %d: %s", m->error, m->error_message);
                cr_assert_str_eq(m->error_message, NO_GPU_MESSAGE);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        rc = test_run_ctl(ctl, false, &ctl_out, &ctl_err);
        cr_assert_eq(rc, 1, "kfdbrokerctl status exited %d: %s%s", rc, ctl_out, ctl_err);
        cr_assert(strstr(ctl_err, NO_GPU_MESSAGE "\n"), "kfdbrokerctl says why: %s", ctl_err);

        cr_assert_eq(waitpid(pid, NULL, WNOHANG), 0, "the daemon is still up");
        kill(pid, SIGTERM);
        cr_assert_eq(test_wait_exit(pid, 30000), 0);
        out = test_read_file(log);
        cr_assert(strstr(out, "warning: --device=kfd: /dev/kfd: No such file or directory (no amdgpu KFD on this "
                              "machine): serving no GPU; every client is told: " NO_GPU_MESSAGE "\n"),
                  "%s", out);
        cr_assert(!strstr(out, "error: "), "%s", out);
        close(nfd);
}

/* --device=kfd without a GPU on the bus too: the name is served (so that a
 * D-Bus activation does not wait for it in vain) and every method says why. */
Test(service, no_gpu_dbus_calls_are_answered_with_the_reason) {
        char sock[128], log[128], late[128];
        const char *argv[] = { NULL, "--device=kfd", "--bus=system", "--listen", sock, "--log-target=stderr", NULL };
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus *bus = NULL;
        pid_t pid;
        int r;

        if (access("/dev/kfd", F_OK) == 0)
                cr_skip_test("this machine has /dev/kfd");
        if (geteuid() != 0)
                cr_skip_test("the private bus grants the name to root; run as root");
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        snprintf(late, sizeof(late), "%s/late.conf", dir);
        grant_name_late(); /* before the bus starts: in force from the first */
        start_bus();
        pid = spawn(argv, log, NULL);
        cr_assert(name_appears(20000), "%s never appeared", BUS_NAME);
        cr_assert_eq(sd_bus_open_system(&bus), 0);
        r = sd_bus_call_method(bus, BUS_NAME, "/org/kfdbroker/Broker1", BUS_NAME, "ListSessions", &error, NULL, "");
        cr_assert_lt(r, 0, "ListSessions answered without a GPU");
        cr_assert_str_eq(error.name, "org.kfdbroker.Broker1.Error.NoDevice");
        cr_assert_str_eq(error.message, NO_GPU_MESSAGE);
        sd_bus_error_free(&error);
        r = sd_bus_call_method(bus, BUS_NAME, "/org/kfdbroker/Broker1", BUS_NAME, "ReloadPolicy", &error, NULL, "");
        cr_assert_geq(r, 0, "ReloadPolicy still works (systemctl reload): %s", error.message);
        sd_bus_flush_close_unref(bus);
        kill(pid, SIGTERM);
        cr_assert_eq(test_wait_exit(pid, 30000), 0);
}

/* --device=auto without a GPU: the simulated GPU, but with a warning in the
 * log, and `kfdbrokerctl status` says the same next to the GPU. */
Test(service, device_auto_falls_back_only_with_a_warning_that_status_repeats) {
        const char *extra[] = { "--device=auto", NULL };
        TestDaemon d;
        _cleanup_free_ char *log = NULL, *out = NULL, *err = NULL;

        if (access("/dev/kfd", F_OK) == 0)
                cr_skip_test("this machine has /dev/kfd");
        test_daemon_start(&d, extra);
        log = test_daemon_read_log(&d);
        cr_assert(strstr(log, "warning: --device=auto: /dev/kfd: No such file or directory (no amdgpu KFD on this "
                              "machine); using the simulated GPU: clients' jobs run in software (--device=kfd never "
                              "falls back)\n"),
                  "%s", log);
        cr_assert(strstr(log, "Device 0: sim gfx1030 (simulated GPU, gpu_id "), "%s", log);
        {
                const char *args[] = { "--socket", d.sock, "status", NULL };

                cr_assert_eq(test_run_ctl(args, false, &out, &err), 0, "%s", err);
        }
        cr_assert(strstr(out, "backend:  sim (simulated GPU)\n"), "%s", out);
        cr_assert(strstr(out, ": the only GPU; simulated GPU (fallback: no /dev/kfd)\n"), "%s", out);
        test_daemon_fini(&d);
}
