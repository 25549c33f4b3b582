/* SPDX-License-Identifier: MIT */
/* See harness.h. */
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t next_id = 1;

static bool log_has_sanitizer_report(const TestDaemon *d);

/* Whether d's log, past its first from bytes, has the line the daemon logs
 * when its start-up is done, just before its loop runs ("kfdbrokerd VERSION
 * ready"). */
static bool log_says_ready(const TestDaemon *d, long from) {
        char line[512];
        bool ready = false;
        FILE *f = fopen(d->log, "re");

        if (!f)
                return false;
        if (fseek(f, from, SEEK_SET) == 0)
                while (!ready && fgets(line, sizeof line, f))
                        ready = strncmp(line, "kfdbrokerd: kfdbrokerd ", 23) == 0 && strstr(line, " ready");
        fclose(f);
        return ready;
}

/* Starts the daemon binary on d's socket and waits until it listens and
 * has said it is ready: its main socket accepts before the rest of its
 * start-up is done (the GPUs' sockets, their reserve fds), so what a test
 * counts of it (test_daemon_count_fds()) is taken at the end of start-up. */
static void daemon_spawn(TestDaemon *d, const char *bin, const char *const *extra_args) {
        const char *argv[32];
        struct stat st;
        unsigned n = 0;
        pid_t parent;
        long log_from = stat(d->log, &st) == 0 ? (long) st.st_size : 0; /* a restart appends */
        bool listening = false;

        argv[n++] = bin;
        argv[n++] = "--device=sim";
        argv[n++] = "--listen";
        argv[n++] = d->sock;
        argv[n++] = "--log-target=stderr";
        /* Only what the test says: not an installed kfdbrokerd.conf. */
        argv[n++] = "--no-config";
        for (unsigned i = 0; extra_args && extra_args[i] && n < 26; i++)
                argv[n++] = extra_args[i];
        /* A whole suite again in another mode (meson.build: the worker-process
         * variants set --sim-kfd-version=1.18). One option, no spaces. */
        if (getenv("KFDBROKER_TEST_DAEMON_ARG") && n < 27)
                argv[n++] = getenv("KFDBROKER_TEST_DAEMON_ARG");
        argv[n++] = d->grant_arg;
        argv[n] = NULL;

        parent = getpid();
        d->pid = fork();
        cr_assert(d->pid >= 0);
        if (d->pid == 0) {
                /* Appended: a restarted daemon's log follows its predecessor's. */
                int lf = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

                /* A test that dies (an assertion in its setup skips the teardown)
                 * must not leave its daemon running. */
                if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
                        _exit(127);
                if (lf >= 0)
                        dup2(lf, STDERR_FILENO);
                if (d->nofile && setrlimit(RLIMIT_NOFILE, &(struct rlimit) { d->nofile, d->nofile }) < 0)
                        _exit(127);
                if (d->in_child)
                        d->in_child();
                execv(bin, (char **) argv);
                _exit(127);
        }
        for (int i = 0; i < 400; i++) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
                int status;

                strcpy(sa.sun_path, d->sock);
                listening = listening || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0;
                close(fd);
                if (listening && log_says_ready(d, log_from))
                        return;
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        test_daemon_dump_log(d);
                        cr_assert_fail("kfdbrokerd exited during start-up (status 0x%x)", status);
                }
                usleep(10000);
        }
        test_daemon_dump_log(d);
        cr_assert_fail("%s", listening ? "kfdbrokerd listens but did not log that it is ready within 4 s"
                                       : "kfdbrokerd did not start listening within 4 s");
}

pid_t test_daemon_spawn(const char **argv, const char *log, void (*setup_child)(void)) {
        const char *full[32];
        size_t n = 0;
        pid_t pid;

        argv[0] = getenv("KFDBROKERD");
        cr_assert_not_null(argv[0], "KFDBROKERD is not set (run through meson test)");
        /* Whatever kfdbrokerd.conf this machine has is not the test's. */
        full[n++] = argv[0];
        if (!argv[1] || strcmp(argv[1], "--no-config") != 0)
                full[n++] = "--no-config";
        for (size_t i = 1; argv[i]; i++) {
                cr_assert_lt(n, sizeof(full) / sizeof(full[0]) - 1);
                full[n++] = argv[i];
        }
        full[n] = NULL;
        argv = full;
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                int lf = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

                if (lf >= 0)
                        dup2(lf, STDERR_FILENO);
                if (setup_child)
                        setup_child();
                execv(argv[0], (char **) argv);
                _exit(127);
        }
        return pid;
}

int test_wait_exit(pid_t pid, int timeout_ms) {
        int status;

        for (int i = 0; i < timeout_ms / 10; i++) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                usleep(10000);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
}

char *test_read_file(const char *path) {
        TestDaemon d = {};

        snprintf(d.log, sizeof(d.log), "%s", path);
        return test_daemon_read_log(&d);
}

void test_daemon_start(TestDaemon *d, const char *const *extra_args) {
        test_daemon_start_limited(d, extra_args, 0);
}

static void daemon_start(TestDaemon *d, const char *const *extra_args, unsigned nofile, void (*in_child)(void));

void test_daemon_start_limited(TestDaemon *d, const char *const *extra_args, unsigned nofile) {
        daemon_start(d, extra_args, nofile, NULL);
}

void test_daemon_start_hooked(TestDaemon *d, const char *const *extra_args, void (*in_child)(void)) {
        daemon_start(d, extra_args, 0, in_child);
}

static void daemon_start(TestDaemon *d, const char *const *extra_args, unsigned nofile, void (*in_child)(void)) {
        const char *bin = getenv("KFDBROKERD");

        cr_assert(bin, "KFDBROKERD is not set (run through meson test)");
        memset(d, 0, sizeof(*d));
        strcpy(d->dir, "/tmp/kfdbroker-test.XXXXXX");
        cr_assert(mkdtemp(d->dir));
        snprintf(d->sock, sizeof(d->sock), "%s/sock", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
        d->nofile = nofile;
        d->in_child = in_child;

        /* The built-in policy lets clients dispatch only in GPU contexts of
         * their own (ComputeDispatch=isolated); the tests' own uid is granted
         * ComputeDispatch=yes (shared contexts too) by a rule in the least
         * important policy directory, read first by its name, so a test's own
         * policy files still override it. Other uids (nobody, in the tests
         * that switch to it) get the built-in policy. */
        snprintf(d->grant_dir, sizeof(d->grant_dir), "%s/grant.d", d->dir);
        snprintf(d->grant_arg, sizeof(d->grant_arg), "--policy-dir=%s", d->grant_dir);
        cr_assert_eq(mkdir(d->grant_dir, 0755), 0);
        {
                char path[256];
                snprintf(path, sizeof(path), "%s/00-tests-may-dispatch.conf", d->grant_dir);
                FILE *f = fopen(path, "we");
                cr_assert_not_null(f);
                fprintf(f, "# The tests' clients run kernels.\n[Match]\nUser=%u\n[Limits]\nComputeDispatch=yes\n",
                        (unsigned) getuid());
                cr_assert_eq(fclose(f), 0);
        }
        daemon_spawn(d, bin, extra_args);
}

int test_daemon_restart(TestDaemon *d, int sig, const char *const *extra_args) {
        int status = 0, rc;

        cr_assert_gt(d->pid, 0, "no daemon to restart");
        if (sig)
                kill(d->pid, sig); /* 0: it is on its way out already */
        cr_assert_eq(waitpid(d->pid, &status, 0), d->pid);
        d->pid = 0;
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (rc == 0 && log_has_sanitizer_report(d))
                rc = TEST_DAEMON_SANITIZER_REPORT;
        /* Its socket file stays behind after SIGKILL: the new one replaces it
         * (the daemon refuses only a socket someone still accepts on). */
        daemon_spawn(d, getenv("KFDBROKERD"), extra_args);
        return rc;
}

void test_daemon_dump_log(const TestDaemon *d) {
        char buf[4096];
        FILE *f = fopen(d->log, "re");
        size_t n;

        if (!f)
                return;
        fprintf(stderr, "--- kfdbrokerd log ---\n");
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                fwrite(buf, 1, n, stderr);
        fclose(f);
}

char *test_daemon_read_log(const TestDaemon *d) {
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len), *f = fopen(d->log, "re");
        char chunk[4096];
        size_t n;

        cr_assert_not_null(out);
        while (f && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                fwrite(chunk, 1, n, out);
        if (f)
                fclose(f);
        cr_assert_eq(fclose(out), 0);
        return buf;
}

/* Whether the daemon's log holds a report of ASan, LeakSanitizer or UBSan. */
static bool log_has_sanitizer_report(const TestDaemon *d) {
        static const char *const marks[] = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error: " };
        char line[4096];
        bool found = false;
        FILE *f = fopen(d->log, "re");

        if (!f)
                return false;
        while (!found && fgets(line, sizeof(line), f))
                for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++)
                        if (strstr(line, marks[i]))
                                found = true;
        fclose(f);
        return found;
}

int test_daemon_stop(TestDaemon *d) {
        int status = 0, rc;
        char cmd[160];

        if (d->pid <= 0)
                return -1;
        kill(d->pid, SIGTERM);
        for (int i = 0; i < 3000; i++) {
                if (waitpid(d->pid, &status, WNOHANG) == d->pid)
                        break;
                if (i == 2999) {
                        kill(d->pid, SIGKILL);
                        waitpid(d->pid, &status, 0);
                }
                usleep(10000);
        }
        d->pid = 0;
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (rc == 0 && log_has_sanitizer_report(d))
                rc = TEST_DAEMON_SANITIZER_REPORT;
        if (rc != 0)
                test_daemon_dump_log(d);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->dir);
        (void) !system(cmd);
        return rc;
}

void test_daemon_fini(TestDaemon *d) {
        int rc;

        if (d->pid <= 0)
                return;
        rc = test_daemon_stop(d);
        if (rc == TEST_DAEMON_SANITIZER_REPORT)
                test_fini_expect(false, "kfdbrokerd exited 0 but its log (above) has a sanitizer report");
        else if (rc > 128)
                test_fini_expect(false, "kfdbrokerd died of signal %d (%s) after SIGTERM (its log is above)", rc - 128,
                                 strsignal(rc - 128));
        else
                test_fini_expect(rc == 0, "kfdbrokerd exited with status %d on SIGTERM (its log is above)", rc);
}

int test_daemon_count_fds(const TestDaemon *d) {
        char path[64];
        struct dirent *de;
        DIR *dir;
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int) d->pid);
        dir = opendir(path);
        if (!dir)
                return -errno;
        while ((de = readdir(dir)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(dir);
        return n;
}

char *test_daemon_fd_names(const TestDaemon *d) {
        char path[64], link[320], target[256];
        struct dirent *de;
        char *out = NULL;
        size_t len = 0;
        bool first = true;
        FILE *f = open_memstream(&out, &len);
        DIR *dir;

        cr_assert_not_null(f);
        snprintf(path, sizeof(path), "/proc/%d/fd", (int) d->pid);
        dir = opendir(path);
        if (dir) {
                while ((de = readdir(dir))) {
                        ssize_t n;

                        if (de->d_name[0] == '.')
                                continue;
                        snprintf(link, sizeof(link), "%s/%s", path, de->d_name);
                        n = readlink(link, target, sizeof(target) - 1);
                        target[n > 0 ? n : 0] = 0;
                        fprintf(f, "%s%s=%s", first ? "" : " ", de->d_name, target);
                        first = false;
                }
                closedir(dir);
        } else
                fprintf(f, "(%s: %s)", path, strerror(errno));
        fclose(f);
        cr_assert_not_null(out);
        return out;
}

int raw_connect(const TestDaemon *d) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        cr_assert(fd >= 0);
        strcpy(sa.sun_path, d->sock);
        cr_assert(connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0, "connect: %s",
                  strerror(errno));
        return fd;
}

int raw_send_bytes(int fd, const void *buf, size_t len, const int *fds, unsigned n_fds) {
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 16)];
        } control = {};
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > 0) {
                struct cmsghdr *c;
                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        return sendmsg(fd, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int raw_send(int fd, const Kfdbroker__V1__Request *req, const int *fds, unsigned n_fds) {
        size_t len = kfdbroker__v1__request__get_packed_size(req);
        uint8_t *buf = malloc(len ? len : 1);
        int r;

        kfdbroker__v1__request__pack(req, buf);
        r = raw_send_bytes(fd, buf, len, fds, n_fds);
        free(buf);
        return r;
}

int raw_recv(int fd, Kfdbroker__V1__ServerMessage **ret, int *fds, unsigned *n_fds, int timeout_ms) {
        static uint8_t buf[128 * 1024];
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 8)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof(control) };
        struct pollfd p = { .fd = fd, .events = POLLIN };
        unsigned max = n_fds ? *n_fds : 0, got = 0;
        ssize_t n;
        int r;

        r = poll(&p, 1, timeout_ms);
        if (r == 0)
                return -ETIMEDOUT;
        if (r < 0)
                return -errno;
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
        if (n < 0)
                return -errno;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        int *p2 = (int *) CMSG_DATA(c);
                        unsigned k = (unsigned) ((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        for (unsigned i = 0; i < k; i++) {
                                if (got < max)
                                        fds[got++] = p2[i];
                                else
                                        close(p2[i]);
                        }
                }
        if (n_fds)
                *n_fds = got;
        if (n == 0)
                return 0;
        *ret = kfdbroker__v1__server_message__unpack(NULL, (size_t) n, buf);
        cr_assert(*ret, "daemon sent an undecodable message of %zd bytes", n);
        return 1;
}

Kfdbroker__V1__ServerMessage *raw_call(int fd, Kfdbroker__V1__Request *req, const int *fds,
                                       unsigned n_fds, int *ret_fds, unsigned *n_ret_fds) {
        Kfdbroker__V1__ServerMessage *m = NULL;
        int r;

        if (req->id == 0)
                req->id = next_id++;
        r = raw_send(fd, req, fds, n_fds);
        cr_assert(r == 0, "send: %s", strerror(-r));
        for (;;) {
                unsigned cap = n_ret_fds ? *n_ret_fds : 0;
                r = raw_recv(fd, &m, ret_fds, &cap, 10000);
                cr_assert(r == 1, "no reply to request %llu: %s", (unsigned long long) req->id,
                          r == 0 ? "connection closed" : strerror(-r));
                if (m->id == req->id) {
                        if (n_ret_fds)
                                *n_ret_fds = cap;
                        return m;
                }
                for (unsigned i = 0; i < cap; i++)
                        close(ret_fds[i]);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
}

uint64_t raw_hello(int fd) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        int fds[2];
        unsigned n = 2;
        uint64_t id;

        h.protocol_version = 1;
        h.client_name = "integration-test";
        req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        m = raw_call(fd, &req, NULL, 0, fds, &n);
        cr_assert_eq(m->error, 0, "hello failed: %s", m->error_message);
        cr_assert_eq(n, 2, "hello carries the page memfd and the eventfd");
        id = m->hello->session_id;
        close(fds[0]);
        close(fds[1]);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return id;
}

Kfdbroker__V1__ServerMessage *raw_hello_answer(int fd, const char *client_name, uint64_t id, int *fds,
                                               unsigned *n_fds, int timeout_ms) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m = NULL;
        unsigned max = n_fds ? *n_fds : 0;
        int r;

        h.protocol_version = 1;
        h.client_name = (char *) client_name;
        req.id = id;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        /* The daemon refuses a connection over a limit as it accepts it and
         * may close it before our Hello is sent: the refusal is queued all
         * the same. */
        r = raw_send(fd, &req, NULL, 0);
        cr_assert(r == 0 || r == -EPIPE, "sending the Hello: %s", strerror(-r));
        r = raw_recv(fd, &m, fds, n_fds, timeout_ms);
        if (r == -ECONNRESET) {
                /* A connection closed with its Hello unread: AF_UNIX reports
                 * that first (sock_error() before the queue,
                 * net/core/datagram.c), the answer is still queued. */
                if (n_fds)
                        *n_fds = max;
                r = raw_recv(fd, &m, fds, n_fds, timeout_ms);
        }
        cr_assert_eq(r, 1, "no answer to Hello: %s", r == 0 ? "connection closed" : strerror(-r));
        return m;
}

uint64_t raw_alloc(int fd, uint64_t size, int *ret_fd) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;
        int fds[1];
        unsigned n = 1;
        uint64_t handle;

        a.size = size;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        req.alloc_buffer = &a;
        m = raw_call(fd, &req, NULL, 0, fds, &n);
        cr_assert_eq(m->error, 0, "alloc failed: %s", m->error_message);
        cr_assert_eq(n, 1);
        handle = m->alloc_buffer->handle;
        if (ret_fd)
                *ret_fd = fds[0];
        else
                close(fds[0]);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return handle;
}

void raw_send_wait(int fd, uint64_t id, uint64_t event, uint32_t timeout_ms) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__WaitEventsRequest w = KFDBROKER__V1__WAIT_EVENTS_REQUEST__INIT;
        Kfdbroker__V1__WaitEntry e = KFDBROKER__V1__WAIT_ENTRY__INIT, *es[1] = { &e };

        e.handle = event;
        w.n_events = 1;
        w.events = es;
        w.timeout_ms = timeout_ms;
        req.id = id;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_WAIT_EVENTS;
        req.wait_events = &w;
        cr_assert_eq(raw_send(fd, &req, NULL, 0), 0);
}

void raw_send_set_event(int fd, uint64_t id, uint64_t event) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__SetEventRequest se = KFDBROKER__V1__SET_EVENT_REQUEST__INIT;

        se.handle = event;
        req.id = id;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_SET_EVENT;
        req.set_event = &se;
        cr_assert_eq(raw_send(fd, &req, NULL, 0), 0);
}

Kfdbroker__V1__Request *raw_copy_request(RawCopy *c, uint64_t id, uint64_t src, uint64_t src_off, uint64_t dst,
                                         uint64_t dst_off, uint64_t size) {
        c->req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
        c->sub = (Kfdbroker__V1__SubmitRequest) KFDBROKER__V1__SUBMIT_REQUEST__INIT;
        c->job = (Kfdbroker__V1__Job) KFDBROKER__V1__JOB__INIT;
        c->copy = (Kfdbroker__V1__CopyJob) KFDBROKER__V1__COPY_JOB__INIT;
        c->copy.src_handle = src;
        c->copy.src_offset = src_off;
        c->copy.dst_handle = dst;
        c->copy.dst_offset = dst_off;
        c->copy.size = size;
        c->job.kind_case = KFDBROKER__V1__JOB__KIND_COPY;
        c->job.copy = &c->copy;
        c->jobs[0] = &c->job;
        c->sub.n_jobs = 1;
        c->sub.jobs = c->jobs;
        c->req.id = id;
        c->req.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        c->req.submit = &c->sub;
        return &c->req;
}

Kfdbroker__V1__StatusReply *raw_status(int fd, Kfdbroker__V1__ServerMessage **holder) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__StatusRequest s = KFDBROKER__V1__STATUS_REQUEST__INIT;

        req.body_case = KFDBROKER__V1__REQUEST__BODY_STATUS;
        req.status = &s;
        *holder = raw_call(fd, &req, NULL, 0, NULL, NULL);
        cr_assert_eq((*holder)->error, 0, "status failed: %s", (*holder)->error_message);
        return (*holder)->status;
}

void test_bus_start(TestBus *b) {
        char conf[256], cmd[512], addr[256];
        FILE *f;

        strcpy(b->dir, "/tmp/kfdbroker-bus.XXXXXX");
        cr_assert(mkdtemp(b->dir));
        chmod(b->dir, 0755); /* the unprivileged caller must reach the socket */
        snprintf(conf, sizeof(conf), "%s/system.conf", b->dir);
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
                "    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus.Introspectable\"/>\n"
                "  </policy>\n"
                "  <include>%s/org.kfdbroker.Broker1.conf</include>\n"
                "  <!-- Tests run the daemon as root instead of the kfdbroker user, and may\n"
                "       stand in for polkit's authority (test-dbus). -->\n"
                "  <policy user=\"root\"><allow own=\"org.kfdbroker.Broker1\"/>\n"
                "    <allow own=\"org.freedesktop.PolicyKit1\"/></policy>\n"
                "  <policy context=\"default\"><allow send_destination=\"org.freedesktop.PolicyKit1\"/></policy>\n"
                "</busconfig>\n",
                b->dir, getenv("KFDBROKER_POLICY_SRC"));
        fclose(f);
        snprintf(cmd, sizeof(cmd), "dbus-daemon --config-file=%s --fork --print-address=1 --print-pid=1", conf);
        f = popen(cmd, "re");
        cr_assert(f, "cannot run dbus-daemon");
        cr_assert(fgets(addr, sizeof(addr), f), "dbus-daemon printed no address");
        addr[strcspn(addr, "\n")] = '\0';
        cr_assert_eq(fscanf(f, "%d", &b->pid), 1);
        pclose(f);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", addr, 1);
}

void test_bus_stop(TestBus *b) {
        char cmd[128];

        if (b->pid > 0)
                kill(b->pid, SIGTERM);
        b->pid = 0;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b->dir);
        (void) !system(cmd);
}

/* Reads all of fd into a malloc'd string. */
static char *slurp(int fd) {
        size_t n = 0, cap = 4096;
        char *buf = malloc(cap);
        ssize_t k;

        cr_assert_not_null(buf);
        while ((k = read(fd, buf + n, cap - n - 1)) > 0) {
                n += (size_t) k;
                if (cap - n < 2) {
                        cap *= 2;
                        buf = realloc(buf, cap);
                        cr_assert_not_null(buf);
                }
        }
        buf[n] = '\0';
        return buf;
}

int test_run_ctl(const char *const *args, bool as_nobody, char **ret_out, char **ret_err) {
        const char *ctl = getenv("KFDBROKERCTL");
        char *argv[32];
        int out[2], err[2], status = 0;
        size_t n = 0;
        pid_t pid;

        cr_assert_not_null(ctl, "KFDBROKERCTL is not set (run through meson test)");
        argv[n++] = (char *) ctl;
        for (; args[n - 1] && n < 31; n++)
                argv[n] = (char *) args[n - 1];
        argv[n] = NULL;
        cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
        cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

                if (null < 0 || dup2(null, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0)
                        _exit(126);
                if (as_nobody && (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                                  setresuid(65534, 65534, 65534) < 0))
                        _exit(125);
                execv(ctl, argv);
                _exit(127);
        }
        close(out[1]);
        close(err[1]);
        /* stdout is read to its end before stderr: fine while stderr stays below a pipe's 64 KiB. */
        *ret_out = slurp(out[0]);
        *ret_err = slurp(err[0]);
        close(out[0]);
        close(err[0]);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status), "kfdbrokerctl died: status 0x%x; its stderr:\n%s", status, *ret_err);
        cr_assert_lt(WEXITSTATUS(status), 125, "kfdbrokerctl could not be started (%d)", WEXITSTATUS(status));
        return WEXITSTATUS(status);
}

kfdb_session *test_connect(const TestDaemon *d, const char *name) {
        kfdb_session *s = NULL;
        int r = kfdb_session_new(d->sock, name, &s);

        cr_assert_eq(r, 0, "connect to %s: %s", d->sock, strerror(-r));
        return s;
}

uint64_t harness_now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

void test_daemon_set_limits(const TestDaemon *d, const char *limits, unsigned count) {
        char path[300];
        FILE *f;

        snprintf(path, sizeof path, "%s/50-devices.conf", d->grant_dir);
        f = fopen(path, "we");
        cr_assert_not_null(f);
        fprintf(f, "[Match]\nUser=%u\n[Limits]\n%s\n", (unsigned) getuid(), limits);
        cr_assert_eq(fclose(f), 0);
        cr_assert_eq(kill(d->pid, SIGHUP), 0);
        for (int i = 0; i < 200; i++) {
                char *log = test_daemon_read_log(d);
                unsigned n = 0;

                for (const char *p = log; (p = strstr(p, "Policy loaded (SIGHUP)")); p++)
                        n++;
                free(log);
                if (n >= count)
                        return;
                usleep(25 * 1000);
        }
        cr_assert_fail("the daemon did not reload its policy");
}
