/* SPDX-License-Identifier: MIT */
/*
 * A client must not be given another process's identity by keeping a
 * connection whose maker has exited, and having the maker's pid handed to a
 * victim. The tests, as root, play all parts: an attacker process (uid nobody,
 * no supplementary group) makes a connection and gives it to the test; it
 * exits; a victim process (user "daemon", group VICTIM_GID) is started with the
 * attacker's pid (clone3() with set_tid); the policy gives VICTIM_GID
 * Buffers=7. The attacker's connection then opens a session — over the
 * daemon's socket, where it waited for its turn under
 * --max-connect-rate-per-user (with SO_PEERPIDFD refused, as before Linux
 * 6.5, and as the kernel has it), and over D-Bus, whose connection the test
 * completed (authentication, Hello) with the attacker's credentials. It must
 * never get the victim's Buffers=7, while a connection the victim makes
 * itself does (the rule works): over the socket it is refused (its process
 * is gone), over D-Bus it gets the attacker's own groups and an unknown
 * process (dbus-daemon 1.14 gives no ProcessFD).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "harness.h"

#define NAME "org.kfdbroker.Broker1"
#define PATH "/org/kfdbroker/Broker1"
#define IFACE "org.kfdbroker.Broker1"

#define ATTACKER_UID 65534u
/* The victim: a user with an account (dbus-daemon refuses a uid without
 * one), other than the attacker's. */
static uid_t victim_uid(void) {
        struct passwd *pw = getpwnam("daemon");

        if (!pw || pw->pw_uid == 0 || pw->pw_uid == ATTACKER_UID)
                cr_skip_test("SKIP: no user \"daemon\" to play the victim");
        return pw->pw_uid;
}
#define VICTIM_GID 4242u
#define VICTIM_BUFFERS 7u

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

static TestDaemon d;
static TestBus tb;
static bool bus_started;
static char policy_root[64]; /* the policy's directory, when not the bus's */

/* Removes what write_policy() made under dir. */
static void remove_policy(const char *dir) {
        char path[256];

        snprintf(path, sizeof(path), "%s/policy.d/50-victim-group.conf", dir);
        (void) unlink(path);
        snprintf(path, sizeof(path), "%s/policy.d", dir);
        (void) rmdir(path);
}

static void teardown(void) {
        test_daemon_fini(&d);
        if (bus_started) {
                remove_policy(tb.dir);
                test_bus_stop(&tb);
        }
        bus_started = false;
        if (policy_root[0]) {
                remove_policy(policy_root);
                (void) rmdir(policy_root);
                policy_root[0] = 0;
        }
        test_fini_end();
}

static int close_fd(int fd) {
        if (fd >= 0)
                close(fd);
        return -1;
}

TestSuite(identity_reuse, .fini = teardown, .timeout = 120);

static void need_root(void) {
        if (geteuid() != 0)
                cr_skip_test("SKIP: needs root to run processes as other users and choose their pids");
}

/* A policy directory under dir giving VICTIM_GID Buffers=VICTIM_BUFFERS; the
 * --policy-dir= argument in arg. */
static void write_policy(const char *dir, char *arg, size_t size) {
        char path[200];
        FILE *f;

        snprintf(path, sizeof(path), "%s/policy.d", dir);
        cr_assert_eq(mkdir(path, 0755), 0);
        snprintf(arg, size, "--policy-dir=%s", path);
        snprintf(path, sizeof(path), "%s/policy.d/50-victim-group.conf", dir);
        f = fopen(path, "we");
        cr_assert_not_null(f);
        fprintf(f, "[Match]\nGroup=%u\n[Limits]\nBuffers=%u\n", VICTIM_GID, VICTIM_BUFFERS);
        cr_assert_eq(fclose(f), 0);
}

/* Before Linux 6.5 getsockopt(SO_PEERPIDFD) fails with ENOPROTOOPT: a
 * seccomp filter gives the daemon that answer on a newer kernel. */
static void refuse_so_peerpidfd(void) {
        struct sock_filter code[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
#if defined(__x86_64__)
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 7),
#elif defined(__aarch64__)
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_AARCH64, 0, 7),
#else
#error "the seccomp filter needs this architecture's AUDIT_ARCH"
#endif
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_getsockopt, 0, 5),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 0, 3),
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SO_PEERPIDFD, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOPROTOOPT),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                _exit(127);
}

/* A process that connects, as a user, to a socket path and hands the
 * connections to the test. */
typedef struct Connector {
        pid_t pid;
        int ctl;     /* closing it (or a byte) tells the process to exit */
        int fds[2];  /* its connections, now the test's */
} Connector;

static int send_fds(int sock, const int *fds, unsigned n) {
        char byte = 'f';
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 2)];
        } control = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
        return sendmsg(sock, &mh, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

static void recv_fds(int sock, int *fds, unsigned n) {
        char byte;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 2)];
        } control;
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof(control) };
        struct cmsghdr *c;

        cr_assert_eq(recvmsg(sock, &mh, MSG_CMSG_CLOEXEC), 1, "the connecting process failed");
        c = CMSG_FIRSTHDR(&mh);
        cr_assert(c && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int) * n));
        memcpy(fds, CMSG_DATA(c), sizeof(int) * n);
}

/* In the new process: become uid/gid with groups, connect n times, hand the
 * connections over, wait to be told to exit. Only system calls: the test
 * process may have threads. */
static _Noreturn void connector_main(int ctl, const char *path, int type, uid_t uid, gid_t gid, const gid_t *groups,
                                     size_t n_groups, unsigned n) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fds[2];
        char b;

        if (setgroups(n_groups, groups) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                _exit(2);
        strncpy(sa.sun_path, path, sizeof(sa.sun_path) - 1);
        for (unsigned i = 0; i < n; i++) {
                fds[i] = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
                if (fds[i] < 0 || connect(fds[i], (struct sockaddr *) &sa, sizeof(sa)) < 0)
                        _exit(3);
        }
        if (send_fds(ctl, fds, n) < 0)
                _exit(4);
        (void) read(ctl, &b, 1);
        _exit(0);
}

/* Starts a connector; at_pid > 0 gives it that pid (clone3 set_tid, Linux
 * 5.5), which must be free. */
static void connector_start(Connector *c, pid_t at_pid, const char *path, int type, uid_t uid, gid_t gid,
                            const gid_t *groups, size_t n_groups, unsigned n) {
        int sv[2];

        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        if (at_pid > 0) {
                pid_t tid = at_pid;
                struct clone_args a = { .exit_signal = SIGCHLD, .set_tid = (uint64_t) (uintptr_t) &tid,
                                        .set_tid_size = 1 };

                c->pid = (pid_t) syscall(SYS_clone3, &a, sizeof(a));
                if (c->pid < 0 && (errno == ENOSYS || errno == EPERM))
                        cr_skip_test("SKIP: clone3() with set_tid is not available here: %s", strerror(errno));
                cr_assert_geq(c->pid, 0, "clone3 at pid %d: %s", (int) at_pid, strerror(errno));
        } else
                c->pid = fork();
        cr_assert_geq(c->pid, 0);
        if (c->pid == 0) {
                close(sv[0]);
                connector_main(sv[1], path, type, uid, gid, groups, n_groups, n);
        }
        close(sv[1]);
        c->ctl = sv[0];
        recv_fds(c->ctl, c->fds, n);
}

/* Tells it to exit and reaps it: its pid is free. */
static void connector_exit(Connector *c) {
        int status;

        c->ctl = close_fd(c->ctl);
        cr_assert_eq(waitpid(c->pid, &status, 0), c->pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "connector status 0x%x", status);
}

static void connector_kill(Connector *c) {
        if (c->pid <= 0)
                return;
        c->ctl = close_fd(c->ctl);
        (void) kill(c->pid, SIGKILL);
        (void) waitpid(c->pid, NULL, 0);
        c->pid = 0;
}

static uint64_t hello_session_id(int fd, uint32_t *ret_max_buffers);

/* The session limit Buffers= a Hello on fd reports. */
static uint32_t hello_max_buffers(int fd) {
        uint32_t v;

        (void) hello_session_id(fd, &v);
        return v;
}

/* The daemon's "Session N opened" line, malloc'd. */
static char *session_line(uint64_t id) {
        char *log = test_daemon_read_log(&d), *line = NULL, what[64];
        const char *p;

        snprintf(what, sizeof(what), "Session %llu opened:", (unsigned long long) id);
        p = strstr(log, what);
        if (p)
                line = strndup(p, strcspn(p, "\n"));
        free(log);
        cr_assert_not_null(line, "no \"%s\" in the log", what);
        return line;
}

static bool log_has(const char *what) {
        char *log = test_daemon_read_log(&d);
        bool found = strstr(log, what) != NULL;

        free(log);
        return found;
}

/* Sends Hello on fd: 0 and *ret_max_buffers if a session was set up, else
 * the errno the daemon refused it with. */
static int hello_or_refusal(int fd, uint32_t *ret_max_buffers, char *msg, size_t msg_size) {
        Kfdbroker__V1__ServerMessage *m;
        int fds[2], e;
        unsigned n = 2;

        m = raw_hello_answer(fd, "identity-reuse", 77, fds, &n, 10000);
        for (unsigned i = 0; i < n; i++)
                close(fds[i]);
        e = (int) m->error;
        snprintf(msg, msg_size, "%s", m->error_message ? m->error_message : "");
        if (e == 0) {
                cr_assert(m->hello && m->hello->limits);
                *ret_max_buffers = m->hello->limits->max_buffers;
        }
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return e;
}

/* The socket: the attacker's second connection waits for its turn (one a
 * second per uid); meanwhile the attacker exits and the victim gets its pid.
 * The connection is refused — its process is gone — never given the
 * victim's groups (nor a session with its process unknown, which would
 * escape rules that restrict by unit or container). */
static void socket_attack(bool as_linux_6_1) {
        static const gid_t victim_groups[] = { VICTIM_GID };
        const char *args[] = { "--max-connect-rate-per-user=1", NULL, NULL };
        char policy_arg[256], waiting[160];
        Connector attacker = {}, victim = {};
        uint32_t own, reused = 0, victims;
        uint64_t own_id;
        char *own_line, refusal[256];
        int e;

        need_root();
        /* The policy is in place before the daemon starts. */
        strcpy(policy_root, "/tmp/kfdbroker-reuse.XXXXXX");
        cr_assert_not_null(mkdtemp(policy_root));
        write_policy(policy_root, policy_arg, sizeof(policy_arg));
        args[1] = policy_arg;
        test_daemon_start_hooked(&d, args, as_linux_6_1 ? refuse_so_peerpidfd : NULL);
        cr_assert_eq(chmod(d.dir, 0755), 0); /* so that other uids reach the socket */

        connector_start(&attacker, 0, d.sock, SOCK_SEQPACKET, ATTACKER_UID, ATTACKER_UID, NULL, 0, 2);
        /* The first was taken at once, the second waits: the daemon says so. */
        own_id = hello_session_id(attacker.fds[0], &own);
        snprintf(waiting, sizeof(waiting), "Connections from uid %u come faster than 1 a second", ATTACKER_UID);
        for (int i = 0; i < 500 && !log_has(waiting); i++)
                usleep(10000);
        cr_assert(log_has(waiting), "the attacker's second connection was not made to wait");

        connector_exit(&attacker);
        connector_start(&victim, attacker.pid, d.sock, SOCK_SEQPACKET, victim_uid(), victim_uid(), victim_groups, 1, 1);
        cr_assert_eq(victim.pid, attacker.pid);

        e = hello_or_refusal(attacker.fds[1], &reused, refusal, sizeof(refusal));
        victims = hello_max_buffers(victim.fds[0]);
        connector_kill(&victim);
        own_line = session_line(own_id);
        cr_assert_eq(victims, VICTIM_BUFFERS, "the victim's own connection gets its group's rule");
        cr_assert(e != 0 || reused != VICTIM_BUFFERS,
                  "the attacker's connection got the victim's group rule (Buffers=%u) from the victim "
                  "holding its pid", VICTIM_BUFFERS);
        cr_assert_eq(e, ESRCH, "the attacker's connection, whose maker is gone, got %s (Buffers=%u, its own %u)",
                     e ? strerror(e) : "a session", reused, own);
        cr_assert(strstr(refusal, "the process that made this connection has exited"), "refused with \"%s\"",
                  refusal);
        cr_assert_null(strstr(own_line, "process unknown"), "%s", own_line);
        free(own_line);
        close(attacker.fds[0]);
        close(attacker.fds[1]);
        close(victim.fds[0]);
}

Test(identity_reuse, socket_peer_without_so_peerpidfd) {
        socket_attack(true);
}

Test(identity_reuse, socket_peer_with_so_peerpidfd) {
        socket_attack(false);
}

/* A bus connection made by fd's maker, authenticated and said Hello to by
 * the test: the bus records the maker's credentials. */
static sd_bus *bus_on_fd(int fd) {
        sd_bus *bus = NULL;

        cr_assert_eq(sd_bus_new(&bus), 0);
        cr_assert_geq(sd_bus_set_fd(bus, fd, fd), 0);
        cr_assert_geq(sd_bus_set_bus_client(bus, true), 0);
        cr_assert_geq(sd_bus_negotiate_fds(bus, true), 0);
        cr_assert_geq(sd_bus_start(bus), 0);
        return bus;
}

/* OpenSession over bus; the session's socket, or -1 with the message in
 * refusal if refused with AccessDenied and refusal is not NULL. */
static int open_session(sd_bus *bus, char *refusal, size_t size) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        int fd, r;

        for (int i = 0; i < 200; i++) { /* the daemon takes its name asynchronously */
                r = sd_bus_call_method(bus, NAME, PATH, IFACE, "OpenSession", &e, &reply, "");
                if (r >= 0 || !sd_bus_error_has_name(&e, SD_BUS_ERROR_SERVICE_UNKNOWN))
                        break;
                sd_bus_error_free(&e);
                usleep(10000);
        }
        if (r < 0 && refusal && sd_bus_error_has_name(&e, SD_BUS_ERROR_ACCESS_DENIED)) {
                snprintf(refusal, size, "%s", e.message ? e.message : "");
                sd_bus_error_free(&e);
                return -1;
        }
        cr_assert_geq(r, 0, "OpenSession: %s", e.message);
        cr_assert_geq(sd_bus_message_read(reply, "h", &fd), 0);
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        cr_assert_geq(fd, 0);
        sd_bus_message_unref(reply);
        return fd;
}

/* GetSession's UnknownFields for id, over bus (the test's own, root). */
static char *unknown_fields(uint64_t id) {
        sd_bus *bus = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        char *found = NULL;
        int r;

        cr_assert_eq(sd_bus_open_system(&bus), 0);
        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, &reply, "t", id);
        cr_assert_geq(r, 0, "GetSession: %s", e.message);
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key, *v;

                cr_assert_geq(sd_bus_message_read(reply, "s", &key), 0);
                if (strcmp(key, "UnknownFields") == 0) {
                        cr_assert_geq(sd_bus_message_read(reply, "v", "s", &v), 0);
                        found = strdup(v);
                } else
                        cr_assert_geq(sd_bus_message_skip(reply, "v"), 0);
                cr_assert_geq(sd_bus_message_exit_container(reply), 0);
        }
        sd_bus_message_unref(reply);
        sd_bus_unref(bus);
        cr_assert_not_null(found, "GetSession has no UnknownFields");
        return found;
}

static uint64_t hello_session_id(int fd, uint32_t *ret_max_buffers) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        int fds[2];
        unsigned n = 2;
        uint64_t id;

        h.protocol_version = 1;
        h.client_name = "identity-reuse";
        req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        m = raw_call(fd, &req, NULL, 0, fds, &n);
        cr_assert_eq(m->error, 0, "Hello failed: %s", m->error_message);
        cr_assert_not_null(m->hello);
        cr_assert_not_null(m->hello->limits);
        id = m->hello->session_id;
        *ret_max_buffers = m->hello->limits->max_buffers;
        for (unsigned i = 0; i < n; i++)
                close(fds[i]);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return id;
}

/* D-Bus: the attacker's bus connection outlives it; the victim gets its pid;
 * OpenSession on the attacker's connection. */
Test(identity_reuse, dbus_caller_whose_maker_exited) {
        static const gid_t victim_groups[] = { VICTIM_GID };
        const char *args[] = { "--bus=system", NULL, NULL };
        char policy_arg[256], bus_path[108];
        const char *addr;
        Connector attacker = {}, victim = {};
        sd_bus *attacker_bus, *victim_bus;
        uint32_t reused, victims;
        int fd_reused, fd_victim;
        uint64_t id;
        char *unknown, refusal[256] = "";

        need_root();
        test_bus_start(&tb);
        bus_started = true;
        write_policy(tb.dir, policy_arg, sizeof(policy_arg));
        args[1] = policy_arg;
        test_daemon_start(&d, args);
        addr = getenv("DBUS_SYSTEM_BUS_ADDRESS");
        cr_assert(addr && strncmp(addr, "unix:path=", 10) == 0, "bus address %s", addr ? addr : "(none)");
        snprintf(bus_path, sizeof(bus_path), "%s", addr + 10);
        bus_path[strcspn(bus_path, ",")] = 0;

        connector_start(&attacker, 0, bus_path, SOCK_STREAM, ATTACKER_UID, ATTACKER_UID, NULL, 0, 1);
        attacker_bus = bus_on_fd(attacker.fds[0]);
        cr_assert_geq(sd_bus_call_method(attacker_bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "GetId", NULL, NULL, ""), 0);
        connector_exit(&attacker);
        connector_start(&victim, attacker.pid, bus_path, SOCK_STREAM, victim_uid(), victim_uid(), victim_groups, 1, 1);
        cr_assert_eq(victim.pid, attacker.pid);
        victim_bus = bus_on_fd(victim.fds[0]);
        cr_assert_geq(sd_bus_call_method(victim_bus, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                         "org.freedesktop.DBus", "GetId", NULL, NULL, ""), 0, "victim GetId");

        fd_victim = open_session(victim_bus, NULL, 0);
        fd_reused = open_session(attacker_bus, refusal, sizeof(refusal));
        victims = hello_max_buffers(fd_victim);
        if (fd_reused < 0) {
                /* A bus with ProcessFD (dbus-daemon 1.15 and later): the
                 * attacker's process has exited, so it is refused outright. */
                connector_kill(&victim);
                sd_bus_flush_close_unref(attacker_bus);
                sd_bus_flush_close_unref(victim_bus);
                close(fd_victim);
                cr_assert_eq(victims, VICTIM_BUFFERS, "the victim's own OpenSession gets its group's rule");
                cr_assert(strstr(refusal, "The caller's process has exited"), "refused with \"%s\"", refusal);
                return;
        }
        id = hello_session_id(fd_reused, &reused);
        connector_kill(&victim);
        sd_bus_flush_close_unref(attacker_bus);
        sd_bus_flush_close_unref(victim_bus);
        cr_assert_eq(victims, VICTIM_BUFFERS, "the victim's own OpenSession gets its group's rule");
        cr_assert_neq(reused, VICTIM_BUFFERS,
                      "OpenSession on the attacker's connection got the victim's group rule (Buffers=%u)",
                      VICTIM_BUFFERS);
        unknown = unknown_fields(id);
        /* dbus-daemon 1.14 gives no ProcessFD: the process is not known. */
        cr_assert(strstr(unknown, "Unit") && strstr(unknown, "Container"), "UnknownFields: \"%s\"", unknown);
        free(unknown);
        {
                char idarg[32], *out = NULL, *err = NULL;
                const char *ctl[] = { "limits", idarg, NULL };

                snprintf(idarg, sizeof(idarg), "%llu", (unsigned long long) id);
                cr_assert_eq(test_run_ctl(ctl, false, &out, &err), 0, "%s", err);
                cr_assert(strstr(out, "\nUnknown to the daemon: GID Comm Unit UserUnit Slice ControlGroup AppId "
                                      "Container (no policy rule on them applies)\n"),
                          "kfdbrokerctl limits does not say what is unknown:\n%s", out);
                free(out);
                free(err);
        }
        close(fd_reused);
        close(fd_victim);
        cr_assert(log_has("The bus gives no ProcessFD"), "the log does not say why the process is unknown");
}
