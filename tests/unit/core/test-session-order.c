/* SPDX-License-Identifier: MIT */
/*
 * The order in which the daemon's loop serves its clients (session-set.h,
 * "Young sessions"; listener.c): the sessions that were already there come
 * before young sessions, and young sessions before new connections — so that
 * a connect flood waits while the others are served (issue 16; bench-flood
 * measures it) — and busy sessions starve neither young sessions nor new
 * connections. Runs a daemon (a Manager on the simulated GPU) in this
 * process and its loop one dispatch at a time.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kfdbroker.pb-c.h"
#include "manager/manager.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"

#define N_YOUNG 4

static Manager *manager;
static char dir[] = "/tmp/kfdbroker-order.XXXXXX", sock_path[96];

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void setup(void) {
        const char *dirs[2] = { dir, NULL };
        ManagerOptions o = {
                .device = DEVICE_SIM,
                .listen_path = sock_path,
                .bus = BUS_NONE,
                .policy_dirs = dirs,
                .contexts = CONTEXT_CHOICE_KERNEL,
        };

        log_set_max_level(LOG_WARNING);
        cr_assert(mkdtemp(dir));
        snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
        cr_assert_eq(manager_new(&o, &manager), 0);
}

static void teardown(void) {
        manager = manager_free(manager);
        unlink(sock_path);
        rmdir(dir);
}

TestSuite(session_order, .init = setup, .fini = teardown, .timeout = 60);

static void send_request(int fd, Kfdbroker__V1__Request *r) {
        static uint64_t next_id = 1;
        uint8_t buf[256];
        size_t len;

        r->id = next_id++;
        len = kfdbroker__v1__request__get_packed_size(r);
        cr_assert_leq(len, sizeof(buf));
        kfdbroker__v1__request__pack(r, buf);
        cr_assert_eq(send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL), (ssize_t) len, "send: %s", strerror(errno));
}

static void send_hello(int fd) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;

        h.protocol_version = 1;
        h.client_name = (char *) "order";
        r.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        r.hello = &h;
        send_request(fd, &r);
}

static void send_device_info(int fd) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__DeviceInfoRequest d = KFDBROKER__V1__DEVICE_INFO_REQUEST__INIT;

        r.body_case = KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO;
        r.device_info = &d;
        send_request(fd, &r);
}

/* Reads (and closes the fds of) the replies waiting on fd; how many. */
static unsigned drain(int fd) {
        unsigned n = 0;

        for (;;) {
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(16 * sizeof(int))];
                } control;
                char buf[8192];
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                                     .msg_controllen = sizeof(control) };

                if (recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
                        return n;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                                for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++)
                                        close(((int *) CMSG_DATA(c))[i]);
                n++;
        }
}

/* A session of this process, its client end in *client. */
static Session *open_session(int *client) {
        Identity me = { .comm = "order", .user_unit_uid = (uid_t) -1 };
        Session *s = NULL;
        int sv[2];

        me.uid = getuid();
        me.gid = getgid();
        me.pid = getpid();
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
        cr_assert_eq(session_new(&manager->set, sv[0], &me, &s), 0);
        *client = sv[1];
        return s;
}

/* Runs the loop until it has been idle for 50 ms. */
static void settle(void) {
        uint64_t deadline = now_usec() + 10 * 1000000u;

        while (sd_event_run(manager->event, 50 * 1000) > 0)
                cr_assert_lt(now_usec(), deadline, "the loop does not go idle");
}

/* An established session that has said Hello. */
static Session *established_session(int *client) {
        Session *s = open_session(client);
        uint64_t deadline = now_usec() + 10 * 1000000u;

        cr_assert(s->young, "a new session is served as young");
        send_hello(*client);
        while (s->young || drain(*client) == 0) {
                cr_assert_lt(now_usec(), deadline, "the session did not grow up within 10 s");
                cr_assert_geq(sd_event_run(manager->event, 10 * 1000), 0);
        }
        settle();
        return s;
}

/* A connection the listener has not taken yet. */
static int pending_connection(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        cr_assert_geq(fd, 0);
        strcpy(sa.sun_path, sock_path);
        cr_assert_eq(connect(fd, (struct sockaddr *) &sa, sizeof(sa)), 0, "connect: %s", strerror(errno));
        return fd;
}

static bool all_replied(const bool *replied) {
        for (unsigned i = 0; i < N_YOUNG; i++)
                if (!replied[i])
                        return false;
        return true;
}

/* One round: an established session, N_YOUNG young ones and a connection
 * waiting, each session with a request; the loop runs one dispatch at a time.
 * False if the round took so long that the young sessions grew up meanwhile
 * (a very loaded machine): then the order says nothing. */
static bool one_round(void) {
        int a_fd, y_fd[N_YOUNG], conn;
        bool a_replied = false, y_replied[N_YOUNG] = {}, young_throughout;
        unsigned n0;
        uint64_t t0, deadline;

        (void) established_session(&a_fd);
        n0 = manager->set.n_sessions;
        conn = pending_connection();
        send_device_info(a_fd);
        t0 = now_usec();
        for (unsigned i = 0; i < N_YOUNG; i++) {
                (void) open_session(&y_fd[i]);
                send_hello(y_fd[i]);
        }
        n0 += N_YOUNG;

        deadline = now_usec() + 10 * 1000000u;
        while (!all_replied(y_replied) || manager->set.n_sessions == n0) {
                bool any_young = false;

                cr_assert_lt(now_usec(), deadline, "the young sessions or the connection were not served");
                cr_assert_geq(sd_event_run(manager->event, 10 * 1000), 0);
                a_replied = a_replied || drain(a_fd) > 0;
                for (unsigned i = 0; i < N_YOUNG; i++) {
                        y_replied[i] = y_replied[i] || drain(y_fd[i]) > 0;
                        any_young = any_young || y_replied[i];
                }
                if (any_young)
                        cr_expect(a_replied, "a young session was served before the established one");
                if (manager->set.n_sessions > n0)
                        cr_expect(all_replied(y_replied), "a connection was taken before the young sessions were served");
        }
        young_throughout = now_usec() - t0 < SESSION_YOUNG_NS / 2000;
        close(conn);
        close(a_fd);
        for (unsigned i = 0; i < N_YOUNG; i++)
                close(y_fd[i]);
        settle();
        return young_throughout;
}

Test(session_order, established_sessions_first_then_young_ones_then_new_connections) {
        for (unsigned i = 0; i < 5; i++)
                if (one_round())
                        return;
        cr_skip_test("the machine is too loaded: every round took longer than a session is young");
}

Test(session_order, a_busy_session_starves_neither_young_sessions_nor_new_connections) {
        int a_fd, y_fd, conn;
        unsigned n0, a_replies = 0;
        bool y_replied = false;
        uint64_t deadline;

        (void) established_session(&a_fd);
        n0 = manager->set.n_sessions;
        conn = pending_connection();
        (void) open_session(&y_fd);
        send_hello(y_fd);
        n0++;

        /* The established session always has a request waiting. */
        deadline = now_usec() + 10 * 1000000u;
        while (!y_replied || manager->set.n_sessions == n0) {
                cr_assert_lt(now_usec(), deadline, "starved: young session %s, connection %s",
                             y_replied ? "served" : "not served", manager->set.n_sessions > n0 ? "taken" : "not taken");
                send_device_info(a_fd);
                cr_assert_geq(sd_event_run(manager->event, 10 * 1000), 0);
                a_replies += drain(a_fd);
                y_replied = y_replied || drain(y_fd) > 0;
        }
        cr_expect_gt(a_replies, 0u);
        close(conn);
        close(a_fd);
        close(y_fd);
        settle();
}

/* An error datagram waiting on fd (the daemon refused the connection), its
 * message in msg. */
static bool refused(int fd, char *msg, size_t size) {
        uint8_t buf[4096];
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        Kfdbroker__V1__ServerMessage *m;
        bool r;

        if (n <= 0)
                return false;
        m = kfdbroker__v1__server_message__unpack(NULL, (size_t) n, buf);
        cr_assert(m, "an undecodable datagram");
        r = m->error != 0;
        if (r)
                snprintf(msg, size, "%s", m->error_message);
        cr_expect_eq(m->error, EUSERS, "error %d: %s", m->error, m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return r;
}

Test(session_order, connections_over_the_connect_rate_wait_their_turn) {
        enum { RATE = 10, N = 25 };
        int fds[N];
        unsigned n0 = manager->set.n_sessions;
        uint64_t t0, deadline;
        char msg[256];

        manager->set.max_connect_rate_per_user = RATE;
        t0 = now_usec();
        for (unsigned i = 0; i < N; i++)
                fds[i] = pending_connection();
        deadline = t0 + 10 * 1000000u;
        while (manager->set.n_sessions < n0 + N) {
                double elapsed;

                cr_assert_lt(now_usec(), deadline, "%u of %d connections taken in 10 s", manager->set.n_sessions - n0, N);
                cr_assert_geq(sd_event_run(manager->event, 10 * 1000), 0);
                /* After the run: on a busy machine it may take long, and
                 * what it took is bounded by the time it ended. */
                elapsed = (double) (now_usec() - t0) / 1e6;
                /* The burst (a second's worth), then RATE a second. */
                cr_assert_leq(manager->set.n_sessions - n0, RATE + RATE * elapsed + 1,
                              "%u sessions after %.3f s at %d a second", manager->set.n_sessions - n0, elapsed, RATE);
        }
        cr_expect_geq(now_usec() - t0, (uint64_t) (N - RATE - 1) * 1000000u / RATE,
                      "%d connections over the burst were taken faster than %d a second", N - RATE, RATE);
        cr_expect_eq(session_set_n_waiting(&manager->set), 0u);
        for (unsigned i = 0; i < N; i++) {
                cr_expect(!refused(fds[i], msg, sizeof(msg)), "connection %u refused: %s", i, msg);
                close(fds[i]);
        }
        settle();
}

Test(session_order, a_user_with_too_many_connections_waiting_is_refused) {
        enum { N = 6, CAP = 3 };
        int fds[N];
        unsigned n_refused = 0;
        uint64_t deadline;
        char msg[256] = "";

        manager->set.max_connect_rate_per_user = 1; /* a burst of one */
        manager->set.max_connections_per_user = CAP;
        for (unsigned i = 0; i < N; i++)
                fds[i] = pending_connection();
        /* One is taken, CAP wait, the others are refused. */
        deadline = now_usec() + 10 * 1000000u;
        while (n_refused < N - 1 - CAP) {
                cr_assert_lt(now_usec(), deadline, "%u refused, %u waiting", n_refused,
                             session_set_n_waiting(&manager->set));
                cr_assert_geq(sd_event_run(manager->event, 10 * 1000), 0);
                for (unsigned i = 0; i < N; i++)
                        if (fds[i] >= 0 && refused(fds[i], msg, sizeof(msg))) {
                                cr_expect(strstr(msg, "waiting for their turn"), "%s", msg);
                                close(fds[i]);
                                fds[i] = -1;
                                n_refused++;
                        }
        }
        cr_expect_eq(session_set_n_waiting(&manager->set), (unsigned) CAP);
        for (unsigned i = 0; i < N; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}
