/* SPDX-License-Identifier: MIT */
/*
 * The daemon binary's life cycle: device choice and its one-line reasons,
 * socket activation, sd_notify, an orderly SIGTERM with jobs on the GPU,
 * refusing to take over a live socket, the per-user connection limit, and
 * which GPU of the topology it drives (--gpu=).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

static void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ __attribute__((cleanup(freep)))

static char dir[64];

static void set_path(struct sockaddr_un *sa, const char *path) {
        cr_assert_lt(strlen(path), sizeof(sa->sun_path), "socket path too long: %s", path);
        memcpy(sa->sun_path, path, strlen(path) + 1);
}

static void setup(void) {
        strcpy(dir, "/tmp/kfdbroker-daemon-test.XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
}

/* A daemon a test started and has not reaped: killed if an assertion ends
 * the test early, so it does not outlive the run. */
static pid_t running_pid;

static void teardown(void) {
        char cmd[128];

        if (running_pid > 0) {
                kill(running_pid, SIGKILL);
                (void) waitpid(running_pid, NULL, 0);
        }
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        (void) !system(cmd);
        test_fini_end();
}

TestSuite(daemon, .init = setup, .fini = teardown, .timeout = 120);

static pid_t spawn(const char **argv, const char *log, void (*setup_child)(void)) {
        return test_daemon_spawn(argv, log, setup_child);
}


static int connect_to(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        cr_assert(fd >= 0);
        set_path(&sa, path);
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                close(fd);
                return -errno;
        }
        return fd;
}

static int connect_retrying(const char *path, pid_t pid, const char *log) {
        for (int i = 0; i < 500; i++) {
                int fd = connect_to(path), status;

                if (fd >= 0)
                        return fd;
                if (waitpid(pid, &status, WNOHANG) == pid) {
                        char *l = test_read_file(log);
                        cr_assert_fail("kfdbrokerd exited during start-up (status 0x%x):\n%s", status, l);
                }
                usleep(10000);
        }
        cr_assert_fail("kfdbrokerd did not answer on %s within 5 s", path);
        return -1;
}

/* A mode that would let others write the metrics file, or no octal number, is refused by name. */
Test(daemon, metrics_file_mode_refused_when_not_within_0644) {
        static const char *const bad[] = { "0664", "0755", "644x", "-1", "" };
        char sock[128], log[128], arg[64];
        const char *argv[] = { NULL, "--device=sim", "--listen", sock, "--metrics-file=/nonexistent/m.prom", arg,
                               "--log-target=stderr", NULL };

        snprintf(sock, sizeof(sock), "%s/sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                _cleanup_free_ char *out = NULL;
                char want[200];

                snprintf(arg, sizeof(arg), "--metrics-file-mode=%s", bad[i]);
                cr_assert_eq(test_wait_exit(spawn(argv, log, NULL), 30000), 1, "%s", arg);
                out = test_read_file(log);
                snprintf(want, sizeof(want), "kfdbrokerd: --metrics-file-mode: expected an octal mode within 0644 "
                                             "(e.g. 0600, 0640, 0644), got '%s'\n", bad[i]);
                cr_assert_str_eq(out, want);
        }
}

/* (--device=kfd without a GPU, and --device=auto's warning: test-service.c.) */
Test(daemon, device_auto_says_which_and_why) {
        TestDaemon d;
        const char *extra[] = { "--device=auto", NULL };
        _cleanup_free_ char *out = NULL;

        test_daemon_start(&d, extra);
        out = test_daemon_read_log(&d);
        if (access("/dev/kfd", F_OK) == 0)
                cr_assert(strstr(out, "--device=auto: "), "%s", out);
        else
                cr_assert(strstr(out, "warning: --device=auto: /dev/kfd: No such file or directory (no amdgpu KFD on this machine); using the simulated GPU"),
                          "%s", out);
        cr_assert(strstr(out, "Device 0: "), "%s", out);
        test_daemon_fini(&d);
}

static char notify_path[128];

/* The daemon's sd_notify() messages, each up to 4 KiB, joined by '|'. */
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

static int listen_fd_for_child = -1;

/* As systemd does for an activated service: the socket on fd 3, and
 * LISTEN_FDS / LISTEN_PID naming this process (sd_listen_fds(3)). */
static void become_socket_activated(void) {
        char pid[32];

        if (dup2(listen_fd_for_child, 3) < 0)
                _exit(126);
        snprintf(pid, sizeof(pid), "%d", (int) getpid());
        setenv("LISTEN_FDS", "1", 1);
        setenv("LISTEN_PID", pid, 1);
        setenv("NOTIFY_SOCKET", notify_path, 1);
}

Test(daemon, socket_activation_notify_and_sigterm) {
        char sock[128], log[128], notes[16384] = "";
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *argv[] = { NULL, "--device=sim", "--log-target=stderr", NULL };
        Kfdbroker__V1__ServerMessage *holder;
        _cleanup_free_ char *out = NULL;
        int nfd, c;
        pid_t pid;

        snprintf(sock, sizeof(sock), "%s/activated.sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        snprintf(notify_path, sizeof(notify_path), "%s/notify", dir);

        /* What kfdbrokerd.socket sets up: a listening SOCK_SEQPACKET socket. */
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
        cr_assert(strstr(notes, "STATUS="), "a STATUS line comes with READY: %s", notes);

        c = connect_retrying(sock, pid, log);
        raw_hello(c);
        cr_assert_eq(raw_status(c, &holder)->sessions, 1);
        kfdbroker__v1__server_message__free_unpacked(holder, NULL);

        kill(pid, SIGTERM);
        read_notify(nfd, notes, sizeof(notes), "STOPPING=1", 10000);
        cr_assert_eq(test_wait_exit(pid, 30000), 0);
        out = test_read_file(log);
        cr_assert(strstr(out, "Shutting down"), "%s", out);
        cr_assert_eq(access(sock, F_OK), 0, "the activated socket belongs to systemd: not removed");
        {
                Kfdbroker__V1__ServerMessage *m = NULL;
                /* Told why first, and that it may come back to the next daemon. */
                cr_assert_eq(raw_recv(c, &m, NULL, NULL, 5000), 1, "SessionEnded comes before the end");
                cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_SESSION_ENDED);
                cr_assert_eq(m->id, 0);
                cr_assert_eq(m->session_ended->error, ESHUTDOWN);
                cr_assert(m->session_ended->reconnect);
                cr_assert_str_eq(m->session_ended->message, "daemon shutting down");
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
                m = NULL;
                cr_assert_eq(raw_recv(c, &m, NULL, NULL, 5000), 0, "the session ends with the daemon");
        }
        close(c);
        close(nfd);
}

static void submit_copy(int fd, uint64_t id, uint64_t src, uint64_t dst, uint64_t size) {
        RawCopy c;

        cr_assert_eq(raw_send(fd, raw_copy_request(&c, id, src, 0, dst, 0, size), NULL, 0), 0);
}

Test(daemon, sigterm_with_jobs_on_the_gpu_retires_them_and_exits_0) {
        TestDaemon d;
        _cleanup_free_ char *out = NULL;
        int c, status, rc;
        uint64_t a, b;

        test_daemon_start(&d, NULL);
        c = raw_connect(&d);
        raw_hello(c);
        a = raw_alloc(c, 64 << 20, NULL);
        b = raw_alloc(c, 64 << 20, NULL);
        for (uint64_t i = 0; i < 16; i++)
                submit_copy(c, 100 + i, a, b, 64 << 20);
        /* Wait for the first fence so that jobs are on the GPU, not just queued. */
        {
                Kfdbroker__V1__ServerMessage *m = NULL;
                cr_assert_eq(raw_recv(c, &m, NULL, NULL, 5000), 1);
                cr_assert_eq(m->error, 0, "%s", m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        kill(d.pid, SIGTERM);
        for (int i = 0; i < 6000 && waitpid(d.pid, &status, WNOHANG) != d.pid; i++)
                usleep(10000);
        cr_assert(WIFEXITED(status), "kfdbrokerd died of a signal");
        rc = WEXITSTATUS(status);
        out = test_daemon_read_log(&d);
        d.pid = 0;
        cr_assert_eq(rc, 0, "exit status %d:\n%s", rc, out);
        cr_assert(!strstr(out, "ERROR: AddressSanitizer") && !strstr(out, "ERROR: LeakSanitizer") &&
                          !strstr(out, "runtime error: "),
                  "sanitizer report:\n%s", out);
        cr_assert(strstr(out, "Shutting down: no new connections, retiring "), "%s", out);
        cr_assert(strstr(out, "Stopped"), "%s", out);
        cr_assert_eq(access(d.sock, F_OK), -1, "the daemon removes the socket it bound");
        close(c);
        (void) test_daemon_stop(&d); /* removes the directory */
}

Test(daemon, second_daemon_does_not_take_over_a_live_socket) {
        TestDaemon d;
        char log[128];
        const char *argv[] = { NULL, "--device=sim", "--listen", NULL, "--log-target=stderr", NULL };
        _cleanup_free_ char *out = NULL;
        Kfdbroker__V1__ServerMessage *holder;
        int c;

        test_daemon_start(&d, NULL);
        argv[3] = d.sock;
        snprintf(log, sizeof(log), "%s/second.log", dir);
        cr_assert_eq(test_wait_exit(spawn(argv, log, NULL), 30000), 1);
        out = test_read_file(log);
        cr_assert(strstr(out, "a daemon is already accepting connections there"), "%s", out);
        /* The first daemon still serves on its socket. */
        c = raw_connect(&d);
        raw_hello(c);
        cr_assert_eq(raw_status(c, &holder)->sessions, 1);
        kfdbroker__v1__server_message__free_unpacked(holder, NULL);
        close(c);
        test_daemon_fini(&d);
}

Test(daemon, stale_socket_file_is_replaced) {
        char sock[128], log[128];
        const char *argv[] = { NULL, "--device=sim", "--listen", sock, "--log-target=stderr", NULL };
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int s, c;
        pid_t pid;

        /* A socket file whose daemon is gone: bound, never listening, closed. */
        snprintf(sock, sizeof(sock), "%s/stale.sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        set_path(&sa, sock);
        cr_assert_eq(bind(s, (struct sockaddr *) &sa, sizeof(sa)), 0);
        close(s);
        pid = spawn(argv, log, NULL);
        c = connect_retrying(sock, pid, log);
        raw_hello(c);
        close(c);
        kill(pid, SIGTERM);
        cr_assert_eq(test_wait_exit(pid, 30000), 0);
}

/* At its fd limit the daemon tells a new client so (an error with id 0, as
 * for a refusal over the connection limit) instead of leaving it waiting for
 * a Hello reply; the sessions it has keep working, and once fds are free a
 * new client gets in. (One user cannot fill the table by default: its fd
 * budget stops it at about half, test-buffers; without the budget its
 * sessions can, up to --max-connections-per-user.) */
Test(daemon, a_connection_at_the_fd_limit_is_refused_with_a_reason) {
        const char *const args[] = { "--max-fds-per-user=infinity", NULL };
        TestDaemon d;
        Kfdbroker__V1__ServerMessage *m = NULL;
        int c[64];
        unsigned n = 0;

        test_daemon_start_limited(&d, args, 64);
        for (; n < 64; n++) {
                int fds[2];
                unsigned nfd = 2;

                c[n] = raw_connect(&d);
                /* A client at the fd limit is answered, not left waiting. */
                m = raw_hello_answer(c[n], "fd-limit", 1, fds, &nfd, 5000);
                for (unsigned i = 0; i < nfd; i++)
                        close(fds[i]);
                if (m->error != 0)
                        break;
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        cr_assert_lt(n, 64u, "the daemon's fds did not run out");
        /* Refused at accept or at set-up: id 0; at the Hello reply: the Hello's. */
        cr_expect(m->id == 0 || m->id == 1, "id %llu", (unsigned long long) m->id);
        cr_expect(m->error == EMFILE || m->error == ENFILE, "got %d: %s", m->error, m->error_message);
        cr_expect(strstr(m->error_message, "file descriptors") || strstr(m->error_message, "open files"), "%s",
                  m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(c[n]);

        /* The sessions are served; a closed one makes room for a new client. */
        {
                Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
                Kfdbroker__V1__StatusRequest st = KFDBROKER__V1__STATUS_REQUEST__INIT;

                req.body_case = KFDBROKER__V1__REQUEST__BODY_STATUS;
                req.status = &st;
                m = raw_call(c[0], &req, NULL, 0, NULL, NULL);
                cr_expect_eq(m->error, 0, "an existing session is served: %s", m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        close(c[1]);
        close(c[2]);
        usleep(200000);
        c[1] = raw_connect(&d);
        raw_hello(c[1]);
        for (unsigned i = 0; i < n; i++)
                if (i != 2)
                        close(c[i]);
        test_daemon_fini(&d);
}

Test(daemon, connections_per_user_are_limited) {
        TestDaemon d;
        const char *extra[] = { "--max-connections-per-user=3", NULL };
        Kfdbroker__V1__ServerMessage *m = NULL;
        _cleanup_free_ char *out = NULL;
        int c[3], extra_c, base;

        test_daemon_start(&d, extra);
        /* The harness's start-up probes are gone once the daemon has seen them close. */
        usleep(200000);
        base = test_daemon_count_fds(&d);
        for (int i = 0; i < 3; i++) {
                c[i] = raw_connect(&d);
                raw_hello(c[i]);
        }
        extra_c = raw_connect(&d);
        cr_assert_eq(raw_recv(extra_c, &m, NULL, NULL, 5000), 1, "the refusal says why");
        cr_assert_eq(m->id, 0);
        cr_assert_eq(m->error, EUSERS, "got %d: %s", m->error, m->error_message);
        cr_assert(strstr(m->error_message, "already holds 3 (kfdbrokerd --max-connections-per-user=3)"),
                  "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        cr_assert_eq(raw_recv(extra_c, &m, NULL, NULL, 5000), 0, "then the connection is closed");
        close(extra_c);

        /* The sessions already open are untouched; a closed one frees a place. */
        {
                Kfdbroker__V1__ServerMessage *holder;
                cr_assert_eq(raw_status(c[0], &holder)->sessions, 3);
                kfdbroker__v1__server_message__free_unpacked(holder, NULL);
        }
        close(c[2]);
        for (int i = 0; i < 500; i++) {
                c[2] = raw_connect(&d);
                if (raw_recv(c[2], &m, NULL, NULL, 300) == -ETIMEDOUT)
                        break; /* not refused */
                if (m)
                        kfdbroker__v1__server_message__free_unpacked(m, NULL);
                m = NULL;
                close(c[2]);
                usleep(10000);
        }
        raw_hello(c[2]);
        for (int i = 0; i < 3; i++)
                close(c[i]);
        for (int i = 0; i < 500 && test_daemon_count_fds(&d) > base; i++)
                usleep(10000);
        cr_assert_leq(test_daemon_count_fds(&d), base, "refused connections leave no fds behind");
        out = test_daemon_read_log(&d);
        cr_assert(strstr(out, "Refusing a connection from pid "), "%s", out);
        test_daemon_fini(&d);
}

/* ---- Which GPU (--gpu=, kfd-facts §7.6) ---- */

/* A desktop Ryzen with a discrete card: the iGPU is KFD node 1 (renderD128),
 * the discrete GPU node 2 (renderD129). Returns kfdbrokerctl status's output. */
static char *status_of(const TestDaemon *d) {
        const char *args[] = { "--socket", d->sock, "status", NULL };
        char *out = NULL, *err = NULL;

        cr_assert_eq(test_run_ctl(args, false, &out, &err), 0, "status failed: %s", err);
        free(err);
        return out;
}

/* Fills a buffer on the GPU and checks it through the client's mapping. */
static void fill_and_check(const TestDaemon *d) {
        kfdb_session *s = NULL;
        kfdb_buffer *b = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fence = 0;
        uint32_t *p = NULL;

        cr_assert_eq(kfdb_session_new(d->sock, "gpu-choice", &s), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_VRAM, &b), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 1 << 20, 0x600d600d), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 30000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_map(b, (void **) &p), 0);
        for (unsigned i = 0; i < (1u << 20) / 4; i++)
                cr_assert_eq(p[i], 0x600d600du, "word %u", i);
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        kfdb_session_free(s);
}

Test(daemon, gpu_a_discrete_gpu_is_preferred_to_an_integrated_one_listed_first) {
        TestDaemon d;
        const char *extra[] = { "--sim-topology=igpu-first", NULL };
        _cleanup_free_ char *log = NULL, *out = NULL;

        test_daemon_start(&d, extra);
        log = test_daemon_read_log(&d);
        cr_assert(strstr(log, "GPU 0: node 2 (gfx1030, 0000:03:00.0, renderD129, discrete, 1 GiB local memory): every "
                              "discrete GPU (1 of 2 GPU nodes look integrated and are left out: name them in --gpu= to "
                              "serve them)\n"),
                  "%s", log);
        cr_assert(!strstr(log, "GPU 1: "), "the iGPU is not served:\n%s", log);
        out = status_of(&d);
        cr_assert(strstr(out, "gpu:      node 2 (gfx1030, 0000:03:00.0, renderD129, discrete, 1 GiB local memory): "
                              "every discrete GPU (1 of 2"),
                  "%s", out);
        fill_and_check(&d);
        test_daemon_fini(&d);
}

Test(daemon, gpu_chosen_by_pci_address_or_render_node) {
        const char *specs[] = { "--gpu=0000:03:00.0", "--gpu=03:00.0", "--gpu=renderD129", "--gpu=/dev/dri/renderD129",
                                "--gpu=2" };

        for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
                TestDaemon d;
                const char *extra[] = { "--sim-topology=igpu-first", specs[i], NULL };
                char want[128];
                _cleanup_free_ char *out = NULL;

                test_daemon_start(&d, extra);
                out = status_of(&d);
                snprintf(want, sizeof(want), "gpu:      node 2 (gfx1030, 0000:03:00.0, renderD129, discrete, 1 GiB local "
                                             "memory): listed by %s\n", specs[i]);
                cr_assert(strstr(out, want), "%s:\n%s", specs[i], out);
                fill_and_check(&d);
                test_daemon_fini(&d);
        }
}

/* The administrator's choice stands, even the integrated GPU. */
Test(daemon, gpu_the_integrated_gpu_when_named) {
        TestDaemon d;
        const char *extra[] = { "--sim-topology=igpu-first", "--gpu=1", NULL };
        _cleanup_free_ char *log = NULL, *out = NULL;

        test_daemon_start(&d, extra);
        log = test_daemon_read_log(&d);
        cr_assert(strstr(log, "Device 0: sim gfx1036 (simulated GPU, gpu_id 0x5a0b, 2 CUs, "), "%s", log);
        out = status_of(&d);
        cr_assert(strstr(out, "gpu:      node 1 (gfx1036, 0000:10:00.0, renderD128, integrated, 512 MiB local memory): "
                              "listed by --gpu=1\n"),
                  "%s", out);
        fill_and_check(&d);
        test_daemon_fini(&d);
}

/* A bad --gpu= stops the daemon with one line naming the value and the GPUs there are. */
Test(daemon, gpu_bad_values_are_named) {
        static const struct {
                const char *arg, *line;
        } cases[] = {
                { "--gpu=7", "error: --gpu=7: no GPU at KFD node 7 (the GPUs: node 1 gfx1036 0000:10:00.0 renderD128, "
                             "node 2 gfx1030 0000:03:00.0 renderD129)\n" },
                { "--gpu=0000:09:00.0", "error: --gpu=0000:09:00.0: no GPU at PCI address 0000:09:00.0 (the GPUs: node 1 "
                                        "gfx1036 0000:10:00.0 renderD128, node 2 gfx1030 0000:03:00.0 renderD129)\n" },
                { "--gpu=renderD200", "error: --gpu=renderD200: no GPU at render node renderD200 (the GPUs: " },
                { "--gpu=discrete", "error: --gpu=discrete: 'discrete' is not a GPU: expected auto, all, a KFD node id (2), a "
                                    "PCI address (0000:03:00.0) or a render node (renderD128), or a comma-separated list "
                                    "of them\n" },
                { "--gpu=1,renderD128", "error: --gpu=1,renderD128: 'renderD128' names node 1, which the list already "
                                        "has\n" },
                { "--gpu=03:00.9", "error: --gpu=03:00.9: '03:00.9' is not a GPU" },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char sock[128], log[128];
                const char *argv[] = { NULL, "--device=sim", "--sim-topology=igpu-first", cases[i].arg, "--listen", sock,
                                       "--log-target=stderr", NULL };
                _cleanup_free_ char *out = NULL;
                unsigned error_lines = 0;

                snprintf(sock, sizeof(sock), "%s/sock", dir);
                snprintf(log, sizeof(log), "%s/log", dir);
                cr_assert_eq(test_wait_exit(spawn(argv, log, NULL), 30000), 1, "%s", cases[i].arg);
                out = test_read_file(log);
                for (const char *p = out; (p = strstr(p, "error: ")); p++)
                        error_lines++;
                cr_assert_eq(error_lines, 1, "%s: one error line expected:\n%s", cases[i].arg, out);
                cr_assert(strstr(out, cases[i].line), "%s:\n%s", cases[i].arg, out);
                cr_assert_eq(access(sock, F_OK), -1, "no socket is left behind");
        }
}

/* Issue 16: 80 000 connects produced 650 000 journal lines. Lines a client
 * causes are rate-limited per user and daemon-wide, and what was held back is
 * summed up in one line (here at exit, where the limits are flushed). */
Test(daemon, a_connect_flood_cannot_flood_the_log) {
        enum { CONNECTS = 3000 };
        _cleanup_free_ char *out = NULL;
        unsigned lines = 0, opened = 0;
        char want[64], cmd[160];
        const char *p;
        TestDaemon d;
        int status;

        test_daemon_start(&d, NULL);
        for (int i = 0; i < CONNECTS; i++) {
                int c = raw_connect(&d);
                raw_hello(c);
                close(c);
        }
        cr_assert_eq(kill(d.pid, SIGTERM), 0);
        cr_assert_eq(waitpid(d.pid, &status, 0), d.pid);
        d.pid = 0;
        out = test_daemon_read_log(&d);
        for (p = out; (p = strchr(p, '\n')); p++)
                lines++;
        for (p = out; (p = strstr(p, " opened: pid ")); p++)
                opened++;
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x; log:\n%s", status, out);
        /* Unlimited, each connect logs two lines (opened, closed). */
        cr_assert_leq(lines, 400, "%u log lines for %d connects", lines, CONNECTS);
        cr_assert_geq(opened, 1);
        snprintf(want, sizeof(want), " messages from uid %u in the last ", (unsigned) getuid());
        p = strstr(out, "Suppressed ");
        cr_assert(p && strstr(p, want), "no summary of what was suppressed:\n%s", out);
        cr_assert(!strstr(out, "Sanitizer") && !strstr(out, "runtime error:"), "%s", out);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d.dir);
        (void) !system(cmd);
}

static void notify_only(void) {
        setenv("NOTIFY_SOCKET", notify_path, 1);
}

static void write_policy(const char *path, const char *text) {
        FILE *f = fopen(path, "w");

        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
}

/* After a failed `systemctl reload` the operator reads why in `systemctl
 * status` (its STATUS=), not only in the journal; a good reload says so.
 * An unknown user in a policy file warns, with FILE:LINE, and the daemon
 * starts. */
Test(daemon, policy_reload_failure_in_status) {
        char sock[128], log[128], pdir[128], pfile[192], want[512], notes[16384] = "";
        char pdir_arg[160];
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char *argv[] = { NULL, "--no-config", "--device=sim", "--log-target=stderr", "--listen", sock,
                               pdir_arg, NULL };
        _cleanup_free_ char *out = NULL;
        int nfd;
        pid_t pid;

        snprintf(sock, sizeof(sock), "%s/k.sock", dir);
        snprintf(log, sizeof(log), "%s/log", dir);
        snprintf(notify_path, sizeof(notify_path), "%s/notify", dir);
        snprintf(pdir, sizeof(pdir), "%s/policy.d", dir);
        snprintf(pdir_arg, sizeof(pdir_arg), "--policy-dir=%s", pdir);
        snprintf(pfile, sizeof(pfile), "%s/50-site.conf", pdir);
        cr_assert_eq(mkdir(pdir, 0755), 0);
        write_policy(pfile, "[Limits]\nWeight=2\n[Match]\nUser=no-such-user-kfdb\n[Limits]\nWeight=3\n");
        nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        set_path(&sa, notify_path);
        cr_assert_eq(bind(nfd, (struct sockaddr *) &sa, sizeof(sa)), 0);

        running_pid = pid = spawn(argv, log, notify_only);
        read_notify(nfd, notes, sizeof(notes), "READY=1", 10000);

        write_policy(pfile, "[Limits]\nWeight=2\n[Limits]\nWieght=3\n");
        kill(pid, SIGHUP);
        snprintf(want, sizeof(want),
                 "STATUS=Policy reload failed, old policy kept: %s:4: unknown key \"Wieght\" in [Limits] (value \"3\")",
                 pfile);
        read_notify(nfd, notes, sizeof(notes), want, 10000);

        write_policy(pfile, "[Limits]\nWeight=4\n");
        kill(pid, SIGHUP);
        read_notify(nfd, notes, sizeof(notes), "STATUS=Policy reloaded (SIGHUP): 1 rules from 1 files", 10000);

        kill(pid, SIGTERM);
        cr_assert_eq(test_wait_exit(pid, 30000), 0);
        running_pid = 0;
        out = test_read_file(log);
        snprintf(want, sizeof(want), "Policy: %s:4: User=no-such-user-kfdb: no such user; this rule matches no one",
                 pfile);
        cr_assert(strstr(out, want), "%s", out);
        close(nfd);
}
