/* SPDX-License-Identifier: MIT */
/*
 * Tests of libkfdbroker against a fake kfdbrokerd: a thread on the other end
 * of a SOCK_SEQPACKET socketpair that decodes requests and encodes replies
 * with the daemon's own wire layer (daemon/wire/wire.c), so both halves of the
 * protocol are exercised together. Each test scripts what the daemon does —
 * replies out of order, notifications in between, stray fds, truncated or
 * malformed datagrams, errors — and checks what the library's caller sees.
 *
 * The fake server never uses criterion's asserts (they must run on the test's
 * own thread): it records the first failure, and closing its socket at the end
 * of the script makes any call still waiting fail instead of hanging.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <inttypes.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client-session.h"
#include "config.h"
#include "kfdbroker.h"
#include "sessions/session-page.h"
#include "wire/wire.h"

typedef struct Srv Srv;
typedef void (*srv_script)(Srv *s);

struct Srv {
        int fd; /* server end */
        int client_fd;
        int event_fd;
        KfdbSessionPage *page;
        srv_script script;
        pthread_t thread;
        char failure[256];
        /* Free use by scripts. */
        int pipe[2];
        uint64_t value;
        const char *const *features; /* what Hello announces; NULL: srv_features */
};

#define S_CHECK(s, cond)                                                                    \
        do {                                                                                \
                if (!(cond)) {                                                              \
                        if (!(s)->failure[0])                                               \
                                snprintf((s)->failure, sizeof((s)->failure), "%s:%d: %s",   \
                                         __FILE__, __LINE__, #cond);                        \
                        return;                                                             \
                }                                                                           \
        } while (0)

static int srv_send_raw(Srv *s, const void *buf, size_t len, const int *fds, size_t n_fds) {
        char control[CMSG_SPACE(sizeof(int) * 4)] = {};
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds > 0) {
                struct cmsghdr *c;
                mh.msg_control = control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        return sendmsg(s->fd, &mh, MSG_NOSIGNAL) == (ssize_t) len ? 0 : -errno;
}

static int srv_send(Srv *s, const WireReply *r, const int *fds, size_t n_fds) {
        void *buf = NULL;
        size_t len = 0;
        int k;

        k = wire_reply_encode(r, &buf, &len);
        if (k < 0)
                return k;
        k = srv_send_raw(s, buf, len, fds, n_fds);
        free(buf);
        return k;
}

/* Receives and decodes one request; fds (if any) go to *ret_fd, else -1. */
static int srv_recv(Srv *s, WireRequest *req, int *ret_fd) {
        static uint8_t buf[WIRE_MAX_MESSAGE_SIZE];
        char control[CMSG_SPACE(sizeof(int) * 4)];
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                             .msg_controllen = sizeof(control) };
        char err[256];
        uint64_t id;
        ssize_t n;

        if (ret_fd)
                *ret_fd = -1;
        n = recvmsg(s->fd, &mh, MSG_CMSG_CLOEXEC);
        if (n <= 0)
                return -ECONNRESET;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_type == SCM_RIGHTS && ret_fd)
                        memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        return wire_request_decode(buf, (size_t) n, req, &id, err, sizeof(err));
}

static void srv_page_init(Srv *s, int *ret_page_fd) {
        int fd = memfd_create("test-session-page", MFD_CLOEXEC);

        *ret_page_fd = fd;
        if (fd < 0 || ftruncate(fd, KFDB_PAGE_SIZE) < 0)
                return;
        s->page = mmap(NULL, KFDB_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (s->page == MAP_FAILED) {
                s->page = NULL;
                return;
        }
        s->page->magic = KFDB_PAGE_MAGIC;
        s->page->version = KFDB_PAGE_VERSION;
        s->page->size = (uint32_t) KFDB_PAGE_SIZE;
        s->page->max_events = KFDB_PAGE_MAX_EVENTS;
        s->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

static const char *const srv_features[] = { "sdma-copy", "sdma-fill", "events", "session-page", NULL };

/* Answers the Hello every session starts with. */
static void srv_hello(Srv *s) {
        WireRequest req = {};
        int page_fd, fds[2];
        WireReply r = { .type = WIRE_REPLY_HELLO };

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_HELLO);
        S_CHECK(s, req.hello.protocol_version == 1);
        S_CHECK(s, strcmp(req.hello.client_name, "test-client") == 0);
        srv_page_init(s, &page_fd);
        S_CHECK(s, s->page && s->event_fd >= 0);
        r.id = req.id;
        r.hello.protocol_version = 1;
        r.hello.daemon_version = "0.1.0-fake";
        r.hello.features = s->features ? s->features : srv_features;
        r.hello.limits = (WireLimits) { .max_buffer_size = 1ull << 30, .max_buffers = 16,
                                        .max_events = 64, .max_jobs_per_submit = 4,
                                        .max_wait_events = 8 };
        r.hello.session_id = 42;
        r.hello.session_page_size = (uint32_t) KFDB_PAGE_SIZE;
        fds[0] = page_fd;
        fds[1] = s->event_fd;
        S_CHECK(s, srv_send(s, &r, fds, 2) == 0);
        close(page_fd);
}

static void *srv_main(void *userdata) {
        Srv *s = userdata;

        s->script(s);
        close(s->fd);
        return NULL;
}

/* Starts the server thread; its Hello announces features (NULL: srv_features). */
static void srv_start_with(Srv *s, srv_script script, const char *const *features) {
        int sv[2];

        memset(s, 0, sizeof(*s));
        s->features = features;
        s->event_fd = -1;
        s->pipe[0] = s->pipe[1] = -1;
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        s->client_fd = sv[0];
        s->fd = sv[1];
        s->script = script;
        cr_assert_eq(pthread_create(&s->thread, NULL, srv_main, s), 0);
}

static void srv_start(Srv *s, srv_script script) {
        srv_start_with(s, script, NULL);
}

static void srv_join(Srv *s) {
        cr_assert_eq(pthread_join(s->thread, NULL), 0);
        cr_assert_str_empty(s->failure, "fake server: %s", s->failure);
}

/* Starts the server (announcing features; NULL: srv_features) and a session on it. */
static kfdb_session *connect_to_with(Srv *s, srv_script script, const char *const *features) {
        kfdb_session *session = NULL;
        int k;

        srv_start_with(s, script, features);
        k = kfdb_session_new_from_fd(s->client_fd, "test-client", &session);
        cr_assert_eq(k, 0, "kfdb_session_new_from_fd: %s", strerror(-k));
        return session;
}

static kfdb_session *connect_to(Srv *s, srv_script script) {
        return connect_to_with(s, script, NULL);
}

/* ---- Hello and the session page ---- */

static void script_hello_only(Srv *s) {
        srv_hello(s);
}

Test(client, hello_maps_page_and_keeps_announcements) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_hello_only);
        kfdb_limits l;

        srv_join(&s);
        cr_assert_eq(kfdb_session_get_id(session), 42);
        cr_assert_str_eq(kfdb_session_get_daemon_version(session), "0.1.0-fake");
        cr_assert(kfdb_session_has_feature(session, "sdma-fill"));
        cr_assert(!kfdb_session_has_feature(session, "dispatch"));
        kfdb_session_get_limits(session, &l);
        cr_assert_eq(l.max_buffers, 16);
        cr_assert_eq(l.max_jobs_per_submit, 4);
        cr_assert_eq(l.max_buffer_size, 1ull << 30);
        cr_assert_eq(kfdb_get_fd(session), s.client_fd);
        cr_assert_geq(kfdb_get_event_fd(session), 0);
        cr_assert_str_empty(kfdb_session_last_error(session));

        /* The page is live: what the daemon writes, the library reads. */
        cr_assert_eq(kfdb_session_get_context_lost(session), 0);
        s.page->context_lost = 3;
        cr_assert_eq(kfdb_session_get_context_lost(session), 3);
        kfdb_session_free(session);
}

/* A daemon from before lazy sessions ignores the bit the library sends and
 * gives the page at Hello: the library takes it there, and asks for nothing
 * more (the script ends after Hello). */
static void script_old_daemon_sees_the_lazy_bit(Srv *s) {
        WireRequest req = {};
        int page_fd, fds[2];
        WireReply r = { .type = WIRE_REPLY_HELLO };

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_HELLO);
        S_CHECK(s, req.hello.features == WIRE_HELLO_FEATURE_LAZY_SESSION);
        srv_page_init(s, &page_fd);
        S_CHECK(s, s->page && s->event_fd >= 0);
        r.id = req.id;
        r.hello.protocol_version = 1;
        r.hello.features = srv_features;
        r.hello.session_page_size = (uint32_t) KFDB_PAGE_SIZE;
        fds[0] = page_fd;
        fds[1] = s->event_fd;
        S_CHECK(s, srv_send(s, &r, fds, 2) == 0);
        close(page_fd);
}

Test(client, an_old_daemon_gives_the_page_at_hello_to_a_lazy_library) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_old_daemon_sees_the_lazy_bit);

        srv_join(&s);
        cr_assert(!kfdb_session_has_feature(session, "lazy-session"));
        cr_assert_geq(kfdb_get_event_fd(session), 0, "%s", kfdb_session_last_error(session));
        s.page->context_lost = 1;
        cr_assert_eq(kfdb_session_get_context_lost(session), 1, "the page of Hello is the one read");
        kfdb_session_free(session);
}

static const char *const srv_features_lazy[] = { "sdma-copy", "sdma-fill", "events", "session-page", "lazy-session",
                                                 NULL };

/* A lazy daemon: no fds at Hello; OpenSessionPage when the library needs
 * the page, and only then. */
static void script_lazy_daemon(Srv *s) {
        WireRequest req = {};
        int page_fd, fds[2];
        WireReply r = { .type = WIRE_REPLY_HELLO };

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.hello.features == WIRE_HELLO_FEATURE_LAZY_SESSION);
        r.id = req.id;
        r.hello.protocol_version = 1;
        r.hello.features = srv_features_lazy;
        r.hello.limits = (WireLimits) { .max_buffers = 16, .max_events = 64, .max_jobs_per_submit = 4 };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_OPEN_SESSION_PAGE);
        srv_page_init(s, &page_fd);
        S_CHECK(s, s->page && s->event_fd >= 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_OPEN_SESSION_PAGE,
                          .session_page = { .size = (uint32_t) KFDB_PAGE_SIZE } };
        fds[0] = page_fd;
        fds[1] = s->event_fd;
        S_CHECK(s, srv_send(s, &r, fds, 2) == 0);
        close(page_fd);
        /* Nothing more is asked: the page is there. */
        S_CHECK(s, srv_recv(s, &req, NULL) == -ECONNRESET);
}

Test(client, a_lazy_session_asks_for_its_page_when_it_needs_it) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_lazy_daemon);
        int efd;

        cr_assert(kfdb_session_has_feature(session, "lazy-session"));
        cr_assert_eq(kfdb_fence_is_done(session, 0), 1, "no page: every fence handed out is done");
        cr_assert_eq(kfdb_session_get_context_lost(session), 0);
        efd = kfdb_get_event_fd(session);
        cr_assert_geq(efd, 0, "%s", kfdb_session_last_error(session));
        cr_assert_eq(kfdb_get_event_fd(session), efd, "asked once");
        s.page->context_lost = 2;
        cr_assert_eq(kfdb_session_get_context_lost(session), 2, "the page OpenSessionPage gave is the one read");
        shutdown(s.client_fd, SHUT_WR); /* ends the script's wait for another request */
        srv_join(&s);
        kfdb_session_free(session);
}

/* A lazy daemon whose OpenSessionPage hands out something that is no
 * session page: the call fails with -EPROTO and the session reads nothing
 * of it afterwards. */
static void script_lazy_daemon_bad_page(Srv *s) {
        WireRequest req = {};
        int page_fd, fds[2];
        WireReply r = { .type = WIRE_REPLY_HELLO };

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r.id = req.id;
        r.hello.protocol_version = 1;
        r.hello.features = srv_features_lazy;
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_OPEN_SESSION_PAGE);
        srv_page_init(s, &page_fd);
        S_CHECK(s, s->page && s->event_fd >= 0);
        s->page->magic = 0x12345678u;
        s->page->context_lost = 5;
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_OPEN_SESSION_PAGE,
                          .session_page = { .size = (uint32_t) KFDB_PAGE_SIZE } };
        fds[0] = page_fd;
        fds[1] = s->event_fd;
        S_CHECK(s, srv_send(s, &r, fds, 2) == 0);
        close(page_fd);
}

Test(client, a_lazy_session_refuses_a_page_that_is_none) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_lazy_daemon_bad_page);

        cr_assert_eq(kfdb_get_event_fd(session), -EPROTO);
        cr_assert(strstr(kfdb_session_last_error(session), "magic 0x12345678"), "%s",
                  kfdb_session_last_error(session));
        srv_join(&s);
        cr_assert_eq(kfdb_session_get_context_lost(session), 0, "the refused page is read");
        kfdb_session_free(session);
}

static void script_bad_page(Srv *s) {
        WireRequest req = {};
        int page_fd, fds[2];
        WireReply r = { .type = WIRE_REPLY_HELLO };

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        srv_page_init(s, &page_fd);
        S_CHECK(s, s->page);
        s->page->magic = (uint32_t) s->value;
        if (s->value == KFDB_PAGE_MAGIC)
                s->page->max_events = KFDB_PAGE_MAX_EVENTS + 1;
        r.id = req.id;
        r.hello.protocol_version = 1;
        r.hello.session_page_size = (uint32_t) KFDB_PAGE_SIZE;
        fds[0] = page_fd;
        fds[1] = s->event_fd;
        S_CHECK(s, srv_send(s, &r, fds, 2) == 0);
        close(page_fd);
}

Test(client, session_page_is_checked_before_use) {
        static const uint32_t magics[] = { 0x12345678u, KFDB_PAGE_MAGIC };
        for (size_t i = 0; i < 2; i++) {
                kfdb_session *session = NULL;
                Srv s;

                memset(&s, 0, sizeof(s));
                srv_start(&s, script_bad_page);
                s.value = magics[i];
                cr_assert_eq(kfdb_session_new_from_fd(s.client_fd, "test-client", &session), -EPROTO);
                cr_assert_null(session);
                /* The caller still owns its fd after a failure. */
                cr_assert_eq(fcntl(s.client_fd, F_GETFD), FD_CLOEXEC);
                srv_join(&s);
                close(s.client_fd);
        }
}

static void script_hello_without_fds(Srv *s) {
        WireRequest req = {};
        WireReply r = { .type = WIRE_REPLY_HELLO };

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r.id = req.id;
        r.hello.protocol_version = 1;
        r.hello.session_page_size = (uint32_t) KFDB_PAGE_SIZE;
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
}

Test(client, hello_without_fds_is_ebadmsg) {
        kfdb_session *session = NULL;
        Srv s;

        srv_start(&s, script_hello_without_fds);
        cr_assert_eq(kfdb_session_new_from_fd(s.client_fd, "test-client", &session), -EBADMSG);
        srv_join(&s);
        close(s.client_fd);
}

Test(client, bad_client_name_and_socket_type) {
        kfdb_session *session = NULL;
        int sv[2];

        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
        cr_assert_eq(kfdb_session_new_from_fd(sv[0], "bad\nname", &session), -EINVAL);
        close(sv[0]);
        close(sv[1]);
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        cr_assert_eq(kfdb_session_new_from_fd(sv[0], "x", &session), -EPROTOTYPE);
        close(sv[0]);
        close(sv[1]);
        cr_assert_eq(kfdb_session_new("/nonexistent/kfdbroker.sock", NULL, &session), -ENOENT);
}

/* A listening socket: the fake server accepts one connection and says Hello. */
static void script_accept_hello(Srv *s) {
        int listener = s->fd;

        s->fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        close(listener);
        S_CHECK(s, s->fd >= 0);
        srv_hello(s);
}

Test(client, socket_path_from_environment) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/test-client-XXXXXX";
        kfdb_session *session = NULL;
        Srv s;

        memset(&s, 0, sizeof(s));
        cr_assert_not_null(mkdtemp(dir));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/kfdbroker.sock", dir);
        s.fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        cr_assert_geq(s.fd, 0);
        cr_assert_eq(bind(s.fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(listen(s.fd, 1), 0);
        s.script = script_accept_hello;
        cr_assert_eq(pthread_create(&s.thread, NULL, srv_main, &s), 0);

        /* NULL path: $KFDBROKER_SOCKET wins over the compiled-in default. */
        cr_assert_eq(setenv("KFDBROKER_SOCKET", sa.sun_path, 1), 0);
        cr_assert_eq(kfdb_session_new(NULL, "test-client", &session), 0);
        cr_assert_eq(kfdb_session_get_id(session), 42);
        srv_join(&s);
        kfdb_session_free(session);
        unlink(sa.sun_path);
        rmdir(dir);

        /* Unset: the default, which does not exist here. */
        unsetenv("KFDBROKER_SOCKET");
        cr_assert_str_eq(kfdb_default_socket_path(), KFDBROKER_DEFAULT_SOCKET);
        if (access(KFDBROKER_DEFAULT_SOCKET, F_OK) < 0)
                cr_assert_eq(kfdb_session_new(NULL, NULL, &session), -ENOENT);
}

/* ---- A free that rides with the next AllocBuffer (alloc-free-first) ---- */

static const char *const srv_features_free_first[] = { "sdma-copy", "sdma-fill", "events", "session-page",
                                                        "free-no-reply", "alloc-free-first", NULL };

/* Receives one request of type type into req; counts it in s->value. */
static void srv_expect(Srv *s, WireRequest *req, WireRequestType type) {
        *req = (WireRequest) {};
        S_CHECK(s, srv_recv(s, req, NULL) == 0);
        s->value++;
        if (req->type != type && !s->failure[0])
                snprintf(s->failure, sizeof(s->failure), "request %" PRIu64 ": %s where %s was due",
                         s->value, wire_request_type_name(req->type), wire_request_type_name(type));
}

/* Answers an AllocBuffer with handle and a memfd of its size. */
static void srv_alloc_reply(Srv *s, const WireRequest *req, uint64_t handle) {
        int mem = memfd_create("buffer", MFD_CLOEXEC);
        WireReply r = { .id = req->id, .type = WIRE_REPLY_ALLOC_BUFFER,
                        .buffer = { handle, req->alloc_buffer.size } };

        S_CHECK(s, mem >= 0 && ftruncate(mem, (off_t) req->alloc_buffer.size) == 0);
        S_CHECK(s, srv_send(s, &r, &mem, 1) == 0);
        close(mem);
}

static void script_free_first(Srv *s) {
        WireRequest req;
        WireReply r;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        /* alloc: nothing freed yet */
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0] && req.alloc_buffer.free_first_id == 0);
        srv_alloc_reply(s, &req, 0x100);
        /* free, alloc: one datagram, the free first, with an id of its own
         * that is answered only by an error (here one, to see it arrive) */
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0]);
        S_CHECK(s, req.alloc_buffer.free_first_id & CLIENT_NO_REPLY_ID_BIT);
        S_CHECK(s, req.alloc_buffer.free_first_id != req.id);
        S_CHECK(s, req.alloc_buffer.free_first_handle == 0x100 && req.alloc_buffer.free_first_no_copy_kept);
        r = (WireReply) { .id = req.alloc_buffer.free_first_id, .type = WIRE_REPLY_ERROR, .error = ENOENT,
                          .message = "free_buffer.handle: no buffer 0x100 (fake)" };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        srv_alloc_reply(s, &req, 0x101);
        /* free, then another request: the free goes just before it */
        srv_expect(s, &req, WIRE_REQUEST_FREE_BUFFER);
        S_CHECK(s, !s->failure[0]);
        S_CHECK(s, req.object.handle == 0x101 && req.object.no_reply && req.object.no_copy_kept);
        srv_expect(s, &req, WIRE_REQUEST_STATUS);
        S_CHECK(s, !s->failure[0]);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_STATUS, .status = { "0.1.0-fake", "sim", "gfx1030" } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        /* larger than the daemon pools: freed at once */
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0] && req.alloc_buffer.free_first_id == 0);
        srv_alloc_reply(s, &req, 0x102);
        srv_expect(s, &req, WIRE_REQUEST_FREE_BUFFER);
        S_CHECK(s, !s->failure[0] && req.object.handle == 0x102 && req.object.no_reply);
        /* its fd taken: freed at once, a copy may be kept */
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0] && req.alloc_buffer.free_first_id == 0);
        srv_alloc_reply(s, &req, 0x103);
        srv_expect(s, &req, WIRE_REQUEST_FREE_BUFFER);
        S_CHECK(s, !s->failure[0] && req.object.handle == 0x103 && !req.object.no_copy_kept);
        /* the last free waits for a request that never comes */
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0] && req.alloc_buffer.free_first_id == 0);
        srv_alloc_reply(s, &req, 0x104);
        S_CHECK(s, srv_recv(s, &req, NULL) == -ECONNRESET);
}

/* Datagrams, not time: an alloc and free pair is one request, so the daemon
 * is woken once for it (docs/protocol.md "Buffers"). */
Test(client, a_free_rides_with_the_next_alloc) {
        Srv s;
        kfdb_session *session = connect_to_with(&s, script_free_first, srv_features_free_first);
        kfdb_buffer *b;
        kfdb_daemon_status st;
        kfdb_job_failure f;

        cr_assert_eq(kfdb_buffer_alloc(session, 64 << 10, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        cr_assert_eq(kfdb_buffer_alloc(session, 64 << 10, KFDB_PLACEMENT_GTT, &b), 0,
                     "%s", kfdb_session_last_error(session));
        cr_assert_eq(kfdb_buffer_free(b), 0);
        cr_assert_eq(kfdb_status(session, &st), 0, "%s", kfdb_session_last_error(session));
        /* The refusal of the free that rode along: a failure with fence 0. */
        cr_assert_eq(kfdb_job_failure_next(session, &f), 1);
        cr_expect_eq(f.fence, 0);
        cr_expect_eq(f.error, -ENOENT);
        cr_expect_str_eq(f.message, "free_buffer.handle: no buffer 0x100 (fake)");
        cr_assert_eq(kfdb_buffer_alloc(session, 1 << 20, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        cr_assert_eq(kfdb_buffer_alloc(session, 64 << 10, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_geq(kfdb_buffer_get_fd(b), 0);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        cr_assert_eq(kfdb_buffer_alloc(session, 64 << 10, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        kfdb_session_free(session);
        srv_join(&s);
        cr_expect_eq(s.value, 9, "%" PRIu64 " requests for 5 allocs, 5 frees and a Status: not 9", s.value);
}

/* ---- A GPU per buffer and per job (feature "gpu-per-job") ---- */

/* A daemon from before it: only the session's GPU reaches it. */
static void script_gpu_old_daemon(Srv *s) {
        WireRequest req;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0] && req.alloc_buffer.has_gpu && req.alloc_buffer.gpu == 0);
        srv_alloc_reply(s, &req, 0x200);
        S_CHECK(s, srv_recv(s, &req, NULL) == -ECONNRESET);
}

Test(client, another_gpu_is_refused_here_when_the_daemon_cannot_take_it) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_gpu_old_daemon);
        kfdb_buffer *b = NULL;
        kfdb_batch *batch = NULL;

        cr_assert_eq(kfdb_session_get_gpu(session), 0u);
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(session, 4096, KFDB_PLACEMENT_GTT, 1, &b), -EOPNOTSUPP);
        cr_expect_str_eq(kfdb_session_last_error(session),
                         "kfdb_buffer_alloc_on_gpu: kfdbrokerd 0.1.0-fake puts a session's buffers on its GPU (0) "
                         "only (no feature \"gpu-per-job\")");
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(session, 4096, KFDB_PLACEMENT_GTT, KFDB_GPU_SESSION, &b), -EINVAL);
        /* Its own GPU, named: what any daemon does. */
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(session, 4096, KFDB_PLACEMENT_GTT, 0, &b), 0, "%s",
                     kfdb_session_last_error(session));
        cr_expect_eq(kfdb_buffer_get_gpu(b), 0u);
        cr_assert_eq(kfdb_batch_new(session, &batch), 0);
        cr_expect_eq(kfdb_batch_get_gpu(batch), KFDB_GPU_SESSION);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
        cr_expect_eq(kfdb_batch_get_gpu(batch), 1u);
        cr_assert_eq(kfdb_batch_copy(batch, b, 0, b, 2048, 1024), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, NULL), -EOPNOTSUPP);
        cr_expect_str_eq(kfdb_session_last_error(session),
                         "kfdb_batch_submit: job 0 names GPU 1, and kfdbrokerd 0.1.0-fake runs a session's jobs on "
                         "its GPU (0) only (no feature \"gpu-per-job\")");
        /* A fill of a buffer of another GPU than the job's is refused here. */
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 1), -EINVAL);
        kfdb_batch_free(batch);
        kfdb_session_free(session);
        srv_join(&s);
}

static const char *const srv_features_gpu[] = { "sdma-copy", "sdma-fill", "events", "session-page", "gpu-per-job",
                                                NULL };

static void script_gpu_per_job(Srv *s) {
        WireRequest req;
        WireReply r;
        int mem;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0] && req.alloc_buffer.has_gpu && req.alloc_buffer.gpu == 1);
        mem = memfd_create("buffer", MFD_CLOEXEC);
        S_CHECK(s, mem >= 0 && ftruncate(mem, 4096) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_ALLOC_BUFFER, .buffer = { 0x300, 4096, 1 } };
        S_CHECK(s, srv_send(s, &r, &mem, 1) == 0);
        close(mem);
        /* An old call: no GPU named. */
        srv_expect(s, &req, WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, !s->failure[0] && !req.alloc_buffer.has_gpu);
        srv_alloc_reply(s, &req, 0x301);
        srv_expect(s, &req, WIRE_REQUEST_SUBMIT);
        S_CHECK(s, !s->failure[0] && req.submit.n_jobs == 2);
        S_CHECK(s, req.submit.jobs[0].has_gpu && req.submit.jobs[0].gpu == 1);
        S_CHECK(s, req.submit.jobs[0].type == WIRE_JOB_FILL && req.submit.jobs[0].fill.dst_handle == 0x300);
        S_CHECK(s, !req.submit.jobs[1].has_gpu && req.submit.jobs[1].type == WIRE_JOB_COPY);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_SUBMIT,
                          .submit = { .fences = (uint64_t[]) { 1, 2 }, .n_fences = 2 } };
        wire_request_done(&req);
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        S_CHECK(s, srv_recv(s, &req, NULL) == -ECONNRESET);
}

Test(client, buffers_and_jobs_name_their_gpu) {
        Srv s;
        kfdb_session *session = connect_to_with(&s, script_gpu_per_job, srv_features_gpu);
        kfdb_buffer *on1 = NULL, *on0 = NULL;
        kfdb_batch *batch = NULL;
        uint64_t last = 0;

        cr_assert_eq(kfdb_buffer_alloc_on_gpu(session, 4096, KFDB_PLACEMENT_VRAM, 1, &on1), 0, "%s",
                     kfdb_session_last_error(session));
        cr_expect_eq(kfdb_buffer_get_gpu(on1), 1u);
        cr_assert_eq(kfdb_buffer_alloc(session, 4096, KFDB_PLACEMENT_GTT, &on0), 0);
        cr_expect_eq(kfdb_buffer_get_gpu(on0), 0u);
        cr_assert_eq(kfdb_batch_new(session, &batch), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
        cr_assert_eq(kfdb_batch_fill(batch, on1, 0, 4096, 7), 0, "%s", kfdb_session_last_error(session));
        cr_assert_eq(kfdb_batch_set_gpu(batch, KFDB_GPU_SESSION), 0);
        cr_assert_eq(kfdb_batch_copy(batch, on0, 0, on1, 0, 4096), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &last), 0, "%s", kfdb_session_last_error(session));
        cr_expect_eq(last, 2u);
        kfdb_batch_free(batch);
        kfdb_session_free(session);
        srv_join(&s);
}

/* ---- Out of order replies and notifications ---- */

static void script_out_of_order(Srv *s) {
        WireRequest status = {}, device = {};
        WireReply r;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        S_CHECK(s, srv_recv(s, &status, NULL) == 0);
        S_CHECK(s, status.type == WIRE_REQUEST_STATUS);
        /* The reply to the *next* request first, then a notification, then the answer. */
        r = (WireReply) { .id = status.id + 1, .type = WIRE_REPLY_DEVICE_INFO,
                          .device_info = { .backend = "sim", .gfx_name = "gfx1030",
                                           .name = "Simulated RDNA2", .cu_count = 40 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        r = (WireReply) { .id = 0, .type = WIRE_REPLY_JOB_FAILED,
                          .job_failed = { 17, EFAULT, "GPU memory fault at 0x7f0000001000" } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        r = (WireReply) { .id = status.id, .type = WIRE_REPLY_STATUS,
                          .status = { "0.1.0-fake", "sim", "gfx1030", 2, 1000, 1, 3ull * 1000000000,
                                      128ull << 20, 5, 3, 7 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        /* The DeviceInfo request still arrives; its reply was already sent. */
        S_CHECK(s, srv_recv(s, &device, NULL) == 0);
        S_CHECK(s, device.type == WIRE_REQUEST_DEVICE_INFO && device.id == status.id + 1);
}

Test(client, replies_out_of_order_and_notifications_between) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_out_of_order);
        kfdb_daemon_status st;
        kfdb_device dev;
        kfdb_job_failure f;

        cr_assert_eq(kfdb_status(session, &st), 0, "%s", kfdb_session_last_error(session));
        cr_assert_str_eq(st.daemon_version, "0.1.0-fake");
        cr_assert_str_eq(st.backend, "sim");
        cr_assert_eq(st.sessions, 2);
        cr_assert_eq(st.jobs_completed, 1000);
        cr_assert_eq(st.buffer_bytes, 128ull << 20);
        cr_assert_eq(st.gpu_buffers, 5);
        cr_assert_eq(st.jobs_in_flight, 3);
        cr_assert_eq(st.events, 7);

        cr_assert_eq(kfdb_device_info(session, &dev), 0, "%s", kfdb_session_last_error(session));
        cr_assert_str_eq(dev.gfx_name, "gfx1030");
        cr_assert_str_eq(dev.name, "Simulated RDNA2");
        cr_assert_eq(dev.cu_count, 40);

        cr_assert_eq(kfdb_job_failure_next(session, &f), 1);
        cr_assert_eq(f.fence, 17);
        cr_assert_eq(f.error, -EFAULT);
        cr_assert_str_eq(f.message, "GPU memory fault at 0x7f0000001000");
        srv_join(&s);
        /* The server is gone: the queue is empty and the end of the stream is reported. */
        cr_assert_eq(kfdb_job_failure_next(session, &f), -ECONNRESET);
        kfdb_session_free(session);
}

/* ---- fds ---- */

static void script_stray_fds(Srv *s) {
        WireRequest req = {};
        WireReply r;
        int fds[2], mem;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        /* A Query reply must carry no fd: the library has to close the one we attach. */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_QUERY);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_QUERY, .query = { .buffers = 1 } };
        S_CHECK(s, srv_send(s, &r, &s->pipe[1], 1) == 0);
        /* An AllocBuffer reply carries one fd; a second one is closed too. */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_ALLOC_BUFFER && req.alloc_buffer.size == 100);
        mem = memfd_create("buffer", MFD_CLOEXEC);
        S_CHECK(s, mem >= 0 && ftruncate(mem, 4096) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_ALLOC_BUFFER, .buffer = { 7, 4096 } };
        fds[0] = mem;
        fds[1] = s->pipe[1];
        S_CHECK(s, srv_send(s, &r, fds, 2) == 0);
        close(mem);
        close(s->pipe[1]);
        s->pipe[1] = -1;
}

Test(client, unexpected_fds_are_closed) {
        Srv s;
        kfdb_session *session;
        kfdb_buffer *b = NULL;
        kfdb_usage u;
        struct pollfd p;
        char c;

        srv_start(&s, script_stray_fds);
        cr_assert_eq(pipe2(s.pipe, O_CLOEXEC), 0);
        cr_assert_eq(kfdb_session_new_from_fd(s.client_fd, "test-client", &session), 0);
        cr_assert_eq(kfdb_query(session, &u), 0);
        cr_assert_eq(u.buffers, 1);
        cr_assert_eq(kfdb_buffer_alloc(session, 100, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_get_size(b), 4096);
        cr_assert_eq(kfdb_buffer_get_handle(b), 7);
        srv_join(&s);
        /* Every write end is closed (ours by the server, both copies by the library): EOF. */
        p = (struct pollfd) { .fd = s.pipe[0], .events = POLLIN };
        cr_assert_eq(poll(&p, 1, 1000), 1);
        cr_assert_eq(read(s.pipe[0], &c, 1), 0);
        close(s.pipe[0]);
        kfdb_session_free(session);
}

/* ---- Broken replies ---- */

static void script_broken_replies(Srv *s) {
        static uint8_t big[WIRE_MAX_MESSAGE_SIZE + 100];
        WireRequest req = {};
        WireReply r;
        void *buf;
        size_t len;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        /* 1: a reply cut in half. */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_STATUS,
                          .status = { "0.1.0-fake", "sim", "gfx1030", 2, 1000, 1, 3, 4 } };
        S_CHECK(s, wire_reply_encode(&r, &buf, &len) == 0);
        S_CHECK(s, srv_send_raw(s, buf, len / 2, NULL, 0) == 0);
        free(buf);
        /* 2: a datagram larger than any message, with an fd that must not leak. */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        memset(big, 0xff, sizeof(big));
        S_CHECK(s, srv_send_raw(s, big, sizeof(big), &s->pipe[1], 1) == 0);
        close(s->pipe[1]);
        s->pipe[1] = -1;
        /* 3: a reply whose body does not match the request. */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_EMPTY };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        /* 4: after all that, a good reply still gets through. */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_STATUS, .status = { .sessions = 9 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
}

Test(client, broken_replies_are_ebadmsg) {
        Srv s;
        kfdb_session *session;
        kfdb_daemon_status st;
        char c;

        srv_start(&s, script_broken_replies);
        cr_assert_eq(pipe2(s.pipe, O_CLOEXEC), 0);
        cr_assert_eq(kfdb_session_new_from_fd(s.client_fd, "test-client", &session), 0);

        cr_assert_eq(kfdb_status(session, &st), -EBADMSG);
        cr_assert(strstr(kfdb_session_last_error(session), "does not decode"), "%s",
                  kfdb_session_last_error(session));
        cr_assert_eq(kfdb_status(session, &st), -EBADMSG);
        cr_assert_str_eq(kfdb_session_last_error(session), "kfdbrokerd sent a truncated message");
        cr_assert_eq(kfdb_status(session, &st), -EBADMSG);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "kfdbrokerd answered Status with the wrong reply body");
        cr_assert_eq(kfdb_status(session, &st), 0, "%s", kfdb_session_last_error(session));
        cr_assert_eq(st.sessions, 9);
        srv_join(&s);
        cr_assert_eq(read(s.pipe[0], &c, 1), 0);
        close(s.pipe[0]);
        kfdb_session_free(session);
}

/* ---- Daemon errors ---- */

static void script_errors(Srv *s) {
        WireRequest req = {};
        WireReply r;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_ALLOC_BUFFER);
        S_CHECK(s, req.alloc_buffer.placement == WIRE_PLACEMENT_VRAM);
        r = (WireReply) { .id = req.id, .error = EDQUOT,
                          .message = "alloc_buffer.size: 2147483648 bytes over the session's limit of 1073741824" };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r = (WireReply) { .id = req.id, .error = EOPNOTSUPP };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
}

Test(client, daemon_error_is_negative_errno_with_message) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_errors);
        kfdb_buffer *b = NULL;
        kfdb_usage u;

        cr_assert_eq(kfdb_buffer_alloc(session, 2ull << 30, KFDB_PLACEMENT_VRAM, &b), -EDQUOT);
        cr_assert_null(b);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "alloc_buffer.size: 2147483648 bytes over the session's limit of 1073741824");
        /* Without a message, the errno's text. */
        cr_assert_eq(kfdb_query(session, &u), -EOPNOTSUPP);
        cr_assert_str_eq(kfdb_session_last_error(session), strerror(EOPNOTSUPP));
        srv_join(&s);
        kfdb_session_free(session);
}

/* ---- Buffers, batches, fences ---- */

static void script_buffers_and_jobs(Srv *s) {
        WireRequest req = {};
        WireReply r;
        int mem[2], imported;
        uint64_t fences[3] = { 1, 2, 3 };

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        for (int i = 0; i < 2; i++) {
                S_CHECK(s, srv_recv(s, &req, NULL) == 0);
                S_CHECK(s, req.type == WIRE_REQUEST_ALLOC_BUFFER && req.alloc_buffer.size == 10000);
                mem[i] = memfd_create("buffer", MFD_CLOEXEC);
                S_CHECK(s, mem[i] >= 0 && ftruncate(mem[i], 12288) == 0);
                r = (WireReply) { .id = req.id, .type = WIRE_REPLY_ALLOC_BUFFER,
                                  .buffer = { 100 + (uint64_t) i, 12288 } };
                S_CHECK(s, srv_send(s, &r, &mem[i], 1) == 0);
        }
        /* The client writes through its mapping; the daemon's side sees it. */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_SUBMIT && req.submit.n_jobs == 3);
        S_CHECK(s, req.submit.jobs[0].type == WIRE_JOB_FILL);
        S_CHECK(s, req.submit.jobs[0].fill.dst_handle == 100);
        S_CHECK(s, req.submit.jobs[0].fill.size == 12288);
        S_CHECK(s, req.submit.jobs[0].fill.pattern == 0xcafef00d);
        S_CHECK(s, req.submit.jobs[1].type == WIRE_JOB_COPY);
        S_CHECK(s, req.submit.jobs[1].copy.src_handle == 100);
        S_CHECK(s, req.submit.jobs[1].copy.dst_handle == 101);
        S_CHECK(s, req.submit.jobs[1].copy.dst_offset == 4096);
        S_CHECK(s, req.submit.jobs[1].copy.size == 8192);
        S_CHECK(s, req.submit.jobs[2].type == WIRE_JOB_FILL);
        wire_request_done(&req);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_SUBMIT, .submit = { fences, 3 } };
        s->page->submitted_fence = 3;
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        /* Completes job 1 and 2 now, job 3 (failed) later. */
        __atomic_store_n(&s->page->completed_fence, 2, __ATOMIC_RELEASE);
        S_CHECK(s, eventfd_write(s->event_fd, 1) == 0);
        usleep(50 * 1000);
        r = (WireReply) { .id = 0, .type = WIRE_REPLY_JOB_FAILED,
                          .job_failed = { 3, EFAULT, "submit job 3: GPU memory fault" } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        __atomic_store_n(&s->page->last_failed_fence, 3, __ATOMIC_RELEASE);
        __atomic_store_n(&s->page->completed_fence, 3, __ATOMIC_RELEASE);
        S_CHECK(s, eventfd_write(s->event_fd, 1) == 0);

        /* Import: the fd arrives with the request. */
        S_CHECK(s, srv_recv(s, &req, &imported) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_IMPORT_BUFFER && imported >= 0);
        close(imported);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_IMPORT_BUFFER, .buffer = { 200, 12288 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        /* Free of all three. */
        for (int i = 0; i < 3; i++) {
                S_CHECK(s, srv_recv(s, &req, NULL) == 0);
                S_CHECK(s, req.type == WIRE_REQUEST_FREE_BUFFER);
                r = (WireReply) { .id = req.id, .type = WIRE_REPLY_EMPTY };
                S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        }
        {
                uint32_t *p = mmap(NULL, 12288, PROT_READ, MAP_SHARED, mem[1], 0);
                S_CHECK(s, p != MAP_FAILED);
                s->value = p[0];
                munmap(p, 12288);
        }
        close(mem[0]);
        close(mem[1]);
}

Test(client, buffers_batches_and_fences) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_buffers_and_jobs);
        kfdb_buffer *a = NULL, *b = NULL, *imp = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fences[3], last = 0;
        uint32_t *map, *map2;
        kfdb_job_failure f;

        cr_assert_eq(kfdb_buffer_alloc(session, 10000, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(session, 10000, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_get_size(a), 12288);
        cr_assert_eq(kfdb_buffer_map(b, (void **) &map), 0);
        cr_assert_eq(kfdb_buffer_map(b, (void **) &map2), 0);
        cr_assert_eq(map, map2, "the mapping is cached");
        map[0] = 0x600dc0de;

        cr_assert_eq(kfdb_batch_new(session, &batch), 0);
        /* Local checks name the problem before anything is sent. */
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 6, 0), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session), "fill: size 6 is not a multiple of 4");
        cr_assert_eq(kfdb_batch_copy(batch, b, 2, a, 0, 4), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "copy destination: offset 2 is not a multiple of 4");
        cr_assert_eq(kfdb_batch_copy(batch, b, 8192, a, 0, 8192), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "copy destination: range 8192+8192 exceeds the buffer's 12288 bytes");
        cr_assert_eq(kfdb_batch_submit(batch, NULL, NULL), -ENODATA);
        cr_assert_eq(kfdb_batch_get_n_jobs(batch), 0);

        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 12288, 0xcafef00d), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 4096, a, 0, 8192), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4, 1), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4, 2), 0);
        /* max_jobs_per_submit is 4 in this fake daemon. */
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4, 3), -E2BIG);
        kfdb_batch_reset(batch);
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 12288, 0xcafef00d), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 4096, a, 0, 8192), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4, 1), 0);

        cr_assert_eq(kfdb_fence_wait(session, 1, 0), -EINVAL, "no fence handed out yet");
        cr_assert_eq(kfdb_batch_submit(batch, fences, &last), 0, "%s", kfdb_session_last_error(session));
        cr_assert_eq(fences[0], 1);
        cr_assert_eq(fences[2], 3);
        cr_assert_eq(last, 3);
        cr_assert_eq(kfdb_batch_get_n_jobs(batch), 0, "a submitted batch is emptied");

        cr_assert_eq(kfdb_fence_wait(session, 2, 5000), 0, "%s", kfdb_session_last_error(session));
        cr_assert_eq(kfdb_fence_is_done(session, 2), 1);
        cr_assert_eq(kfdb_fence_wait(session, 3, 5000), -EFAULT);
        cr_assert_str_eq(kfdb_session_last_error(session), "submit job 3: GPU memory fault");
        cr_assert_eq(kfdb_fence_is_done(session, 3), 1);
        cr_assert_eq(kfdb_job_failure_next(session, &f), 1);
        cr_assert_eq(f.fence, 3);
        cr_assert_eq(kfdb_job_failure_next(session, &f), 0);

        cr_assert_eq(kfdb_buffer_import(session, kfdb_buffer_get_fd(b), &imp), 0);
        cr_assert_eq(kfdb_buffer_get_handle(imp), 200);
        cr_assert_eq(kfdb_buffer_free(a), 0);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        cr_assert_eq(kfdb_buffer_free(imp), 0);
        srv_join(&s);
        cr_assert_eq(s.value, 0x600dc0de);
        kfdb_batch_free(batch);
        kfdb_session_free(session);
}

static void script_fence_timeout(Srv *s) {
        WireRequest req = {};
        uint64_t fence = 1;
        WireReply r;
        int mem;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        mem = memfd_create("buffer", MFD_CLOEXEC);
        S_CHECK(s, mem >= 0 && ftruncate(mem, 4096) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_ALLOC_BUFFER, .buffer = { 1, 4096 } };
        S_CHECK(s, srv_send(s, &r, &mem, 1) == 0);
        close(mem);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        wire_request_done(&req);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_SUBMIT, .submit = { &fence, 1 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        /* Never completes; then the daemon goes away. */
        (void) srv_recv(s, &req, NULL);
}

Test(client, fence_wait_times_out_and_sees_the_daemon_go) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_fence_timeout);
        kfdb_buffer *a = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fence = 0;

        cr_assert_eq(kfdb_buffer_alloc(session, 4096, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_batch_new(session, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, 4096, 0), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        cr_assert_eq(kfdb_fence_is_done(session, fence), 0);
        cr_assert_eq(kfdb_fence_wait(session, fence, 50), -ETIMEDOUT);
        cr_assert_eq(kfdb_fence_wait(session, fence, 0), -ETIMEDOUT);
        /* Closing our end makes the fake server's recv fail and it closes its end. */
        shutdown(s.client_fd, SHUT_WR);
        srv_join(&s);
        cr_assert_eq(kfdb_fence_wait(session, fence, 5000), -ECONNRESET);
        cr_assert_str_eq(kfdb_session_last_error(session), "kfdbrokerd closed the connection");
        /* Objects left alive are released with the session. */
        kfdb_session_free(session);
}

/* ---- Events ---- */

static void script_events(Srv *s) {
        WireRequest req = {};
        WireReply r;
        WireWaitEntry ages[2];

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        for (uint32_t i = 0; i < 2; i++) {
                S_CHECK(s, srv_recv(s, &req, NULL) == 0);
                S_CHECK(s, req.type == WIRE_REQUEST_CREATE_EVENT);
                S_CHECK(s, req.create_event.auto_reset == (i == 0));
                s->page->events[5 + i] = (KfdbPageEvent) { .age = 1, .live = 1 };
                r = (WireReply) { .id = req.id, .type = WIRE_REPLY_CREATE_EVENT,
                                  .create_event = { 50 + i, 5 + i } };
                S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        }
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_SET_EVENT && req.object.handle == 51);
        s->page->events[6].age = 2;
        s->page->events[6].signaled = 1;
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_EMPTY };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_WAIT_EVENTS && req.wait_events.n_entries == 2);
        S_CHECK(s, req.wait_events.entries[0].handle == 50);
        S_CHECK(s, req.wait_events.entries[1].handle == 51);
        S_CHECK(s, req.wait_events.entries[1].last_event_age == 1);
        S_CHECK(s, !req.wait_events.wait_all);
        S_CHECK(s, req.wait_events.timeout_ms == UINT32_MAX);
        wire_request_done(&req);
        ages[0] = (WireWaitEntry) { 50, 1 };
        ages[1] = (WireWaitEntry) { 51, 2 };
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_WAIT_EVENTS,
                          .wait_events = { WIRE_WAIT_COMPLETE, ages, 2 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_RESET_EVENT && req.object.handle == 51);
        r = (WireReply) { .id = req.id, .error = ENOENT, .message = "reset_event.handle: no event 51" };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_DESTROY_EVENT && req.object.handle == 50);
        s->page->events[5].live = 0;
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_EMPTY };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
}

Test(client, events_ages_and_waits) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_events);
        kfdb_event *e1 = NULL, *e2 = NULL;
        kfdb_wait_entry w[2];
        kfdb_wait_result result = KFDB_WAIT_FAIL;

        cr_assert_eq(kfdb_event_create(session, true, &e1), 0);
        cr_assert_eq(kfdb_event_create(session, false, &e2), 0);
        cr_assert_eq(kfdb_event_get_handle(e2), 51);
        cr_assert_eq(kfdb_event_get_age(e2), 1);
        cr_assert(!kfdb_event_is_signaled(e2));
        cr_assert_eq(kfdb_event_set(e2), 0);
        cr_assert_eq(kfdb_event_get_age(e2), 2);
        cr_assert(kfdb_event_is_signaled(e2));

        cr_assert_eq(kfdb_wait_events(session, w, 0, false, 0, &result), -EINVAL);
        w[0] = (kfdb_wait_entry) { e1, 0 };
        w[1] = (kfdb_wait_entry) { e2, 1 };
        cr_assert_eq(kfdb_wait_events(session, w, 2, false, KFDB_TIMEOUT_INFINITE, &result), 0);
        cr_assert_eq(result, KFDB_WAIT_COMPLETE);
        cr_assert_eq(w[0].last_event_age, 1);
        cr_assert_eq(w[1].last_event_age, 2);

        cr_assert_eq(kfdb_event_reset(e2), -ENOENT);
        cr_assert_str_eq(kfdb_session_last_error(session), "reset_event.handle: no event 51");
        cr_assert_eq(kfdb_event_destroy(e1), 0);
        srv_join(&s);
        kfdb_session_free(session);
}

/* ---- Compute: code objects and dispatch ---- */

static const uint8_t fake_elf[] = "\x7f" "ELF not really, the fake daemon only compares bytes";

/* saxpy(float a, global float *x, global float *y, uint n) plus one hidden
 * argument, and a kernel with a local pointer. */
static const WireKernelArgInfo saxpy_args[] = {
        { "a", 0, 4, "by_value" }, { "x", 8, 8, "global_buffer" }, { "y", 16, 8, "global_buffer" },
        { "n", 24, 4, "by_value" }, { "", 32, 8, "hidden" },
};
static const WireKernelArgInfo lds_args[] = {
        { "out", 0, 8, "global_buffer" }, { "tmp", 8, 4, "dynamic_lds" }, { "", 16, 8, "hidden" },
};
static const WireKernelArgInfo odd_args[] = { { "img", 0, 32, "image_from_a_newer_daemon" } };
static const WireKernelInfo fake_kernels[] = {
        { "saxpy", 40, 0, 0, 256, saxpy_args, 5 },
        { "lds", 24, 512, 16, 1024, lds_args, 3 },
        { "odd", 32, 0, 0, 1024, odd_args, 1 },
};

/* Checks the memfd the client sent: sealed as the daemon requires, holding fake_elf. */
static void srv_check_code_memfd(Srv *s, int fd) {
        uint8_t buf[sizeof(fake_elf) + 8];
        int seals = fcntl(fd, F_GET_SEALS);

        S_CHECK(s, seals >= 0);
        S_CHECK(s, (seals & (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
                           (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
        S_CHECK(s, pread(fd, buf, sizeof(buf), 0) == (ssize_t) sizeof(fake_elf));
        S_CHECK(s, memcmp(buf, fake_elf, sizeof(fake_elf)) == 0);
}

static void script_code_objects(Srv *s) {
        WireRequest req = {};
        WireReply r;
        uint64_t fences[4] = { 1, 2, 3, 4 };
        int fd, mem;
        float a;
        uint32_t n;

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        /* From memory, then from a file: both arrive as sealed memfds. */
        for (int i = 0; i < 2; i++) {
                S_CHECK(s, srv_recv(s, &req, &fd) == 0);
                S_CHECK(s, req.type == WIRE_REQUEST_LOAD_CODE_OBJECT && fd >= 0);
                srv_check_code_memfd(s, fd);
                close(fd);
                r = (WireReply) { .id = req.id, .type = WIRE_REPLY_LOAD_CODE_OBJECT,
                                  .load_code_object = { 0x4300 + (uint64_t) i, fake_kernels, 3 } };
                S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        }
        /* The daemon refuses the third. */
        S_CHECK(s, srv_recv(s, &req, &fd) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_LOAD_CODE_OBJECT && fd >= 0);
        close(fd);
        r = (WireReply) { .id = req.id, .error = ENOEXEC,
                          .message = "load_code_object: not an ELF file (bad magic)" };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_ALLOC_BUFFER);
        mem = memfd_create("buffer", MFD_CLOEXEC);
        S_CHECK(s, mem >= 0 && ftruncate(mem, 8192) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_ALLOC_BUFFER, .buffer = { 0x4201, 8192 } };
        S_CHECK(s, srv_send(s, &r, &mem, 1) == 0);
        close(mem);

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_DEVICE_INFO);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_DEVICE_INFO,
                          .device_info = { .backend = "fake", .sdma_queues = 2, .compute_queues = 4 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_CREATE_EVENT);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_CREATE_EVENT, .create_event = { 0x4501, 0 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        /* wait(compute) dispatch(saxpy) dispatch(lds) signal(auto) */
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_SUBMIT && req.submit.n_jobs == 4);
        S_CHECK(s, req.submit.jobs[0].type == WIRE_JOB_WAIT_EVENT);
        S_CHECK(s, req.submit.jobs[0].event.engine == WIRE_ENGINE_COMPUTE);
        {
                const WireJob *j = &req.submit.jobs[1];
                S_CHECK(s, j->type == WIRE_JOB_DISPATCH);
                S_CHECK(s, j->dispatch.code_object == 0x4300);
                S_CHECK(s, strcmp(j->dispatch.kernel, "saxpy") == 0);
                S_CHECK(s, j->dispatch.n_dims == 1);
                S_CHECK(s, j->dispatch.grid[0] == 1000 && j->dispatch.block[0] == 256);
                S_CHECK(s, j->dispatch.grid[1] == 1 && j->dispatch.block[2] == 1);
                S_CHECK(s, j->dispatch.n_args == 4);
                S_CHECK(s, j->dispatch.args[0].type == WIRE_ARG_BYTES && j->dispatch.args[0].n_bytes == 4);
                memcpy(&a, j->dispatch.args[0].bytes, 4);
                S_CHECK(s, a == 2.5f);
                S_CHECK(s, j->dispatch.args[1].type == WIRE_ARG_BUFFER);
                S_CHECK(s, j->dispatch.args[1].handle == 0x4201 && j->dispatch.args[1].offset == 0);
                S_CHECK(s, j->dispatch.args[2].handle == 0x4201 && j->dispatch.args[2].offset == 4096);
                memcpy(&n, j->dispatch.args[3].bytes, 4);
                S_CHECK(s, n == 1000);
                j = &req.submit.jobs[2];
                S_CHECK(s, j->type == WIRE_JOB_DISPATCH && strcmp(j->dispatch.kernel, "lds") == 0);
                S_CHECK(s, j->dispatch.code_object == 0x4301);
                S_CHECK(s, j->dispatch.n_dims == 3);
                S_CHECK(s, j->dispatch.grid[2] == 5 && j->dispatch.block[1] == 4);
                S_CHECK(s, j->dispatch.args[1].type == WIRE_ARG_LOCAL_SIZE);
                S_CHECK(s, j->dispatch.args[1].local_size == 2048);
        }
        S_CHECK(s, req.submit.jobs[3].type == WIRE_JOB_SIGNAL_EVENT);
        S_CHECK(s, req.submit.jobs[3].event.engine == WIRE_ENGINE_AUTO);
        wire_request_done(&req);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_SUBMIT, .submit = { fences, 4 } };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);

        /* Frees of both code objects. */
        for (int i = 0; i < 2; i++) {
                S_CHECK(s, srv_recv(s, &req, NULL) == 0);
                S_CHECK(s, req.type == WIRE_REQUEST_FREE_CODE_OBJECT);
                S_CHECK(s, req.object.handle == 0x4300 + (uint64_t) i);
                r = (WireReply) { .id = req.id, .type = WIRE_REPLY_EMPTY };
                S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        }
}

Test(client, code_objects_and_dispatch) {
        Srv s;
        kfdb_session *session = connect_to(&s, script_code_objects);
        kfdb_code_object *co = NULL, *co2 = NULL, *bad = NULL;
        const kfdb_kernel *k;
        kfdb_kernel_arg ka;
        kfdb_buffer *buf = NULL;
        kfdb_batch *batch = NULL;
        kfdb_event *ev;
        char path[] = "/tmp/test-client-co-XXXXXX";
        uint32_t grid[3] = { 1000, 7, 5 }, block[3] = { 256, 4, 1 }, queues = 0;
        float alpha = 2.5f;
        uint32_t n = 1000;
        uint64_t fences[4];
        int fd;

        cr_assert_eq(kfdb_code_object_load(session, NULL, 0, &co), -EINVAL);
        cr_assert_eq(kfdb_code_object_load(session, fake_elf, 0, &co), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session), "kfdb_code_object_load: the code object is empty");
        cr_assert_eq(kfdb_code_object_load(session, fake_elf, (64u << 20) + 1, &co), -E2BIG);

        cr_assert_eq(kfdb_code_object_load(session, fake_elf, sizeof(fake_elf), &co), 0, "%s",
                     kfdb_session_last_error(session));
        fd = mkstemp(path);
        cr_assert(fd >= 0);
        cr_assert_eq(write(fd, fake_elf, sizeof(fake_elf)), (ssize_t) sizeof(fake_elf));
        close(fd);
        cr_assert_eq(kfdb_code_object_load_file(session, path, &co2), 0, "%s", kfdb_session_last_error(session));
        cr_assert_eq(kfdb_code_object_load_file(session, path, &bad), -ENOEXEC);
        cr_assert_str_eq(kfdb_session_last_error(session), "load_code_object: not an ELF file (bad magic)");
        cr_assert_null(bad);
        unlink(path);
        cr_assert_eq(kfdb_code_object_load_file(session, path, &bad), -ENOENT);

        cr_assert_eq(kfdb_code_object_get_handle(co), 0x4300);
        cr_assert_eq(kfdb_code_object_get_n_kernels(co), 3);
        k = kfdb_code_object_get_kernel(co, 1);
        cr_assert_str_eq(kfdb_kernel_get_name(k), "lds");
        cr_assert_null(kfdb_code_object_get_kernel(co, 3));
        cr_assert_null(kfdb_code_object_find_kernel(co, "nope"));
        k = kfdb_code_object_find_kernel(co, "saxpy");
        cr_assert_not_null(k);
        cr_assert_eq(kfdb_kernel_get_kernarg_size(k), 40);
        cr_assert_eq(kfdb_kernel_get_max_workgroup_size(k), 256);
        cr_assert_eq(kfdb_kernel_get_n_args(k), 5);
        cr_assert_eq(kfdb_kernel_get_n_explicit_args(k), 4);
        cr_assert_eq(kfdb_kernel_get_arg(k, 2, &ka), 0);
        cr_assert_str_eq(ka.name, "y");
        cr_assert_eq(ka.offset, 16);
        cr_assert_eq(ka.size, 8);
        cr_assert_eq(ka.kind, KFDB_KERNEL_ARG_GLOBAL_BUFFER);
        cr_assert_eq(kfdb_kernel_get_arg(k, 4, &ka), 0);
        cr_assert_eq(ka.kind, KFDB_KERNEL_ARG_HIDDEN);
        cr_assert_eq(kfdb_kernel_get_arg(k, 5, &ka), -EINVAL);
        k = kfdb_code_object_find_kernel(co, "lds");
        cr_assert_eq(kfdb_kernel_get_group_segment_size(k), 512);
        cr_assert_eq(kfdb_kernel_get_private_segment_size(k), 16);
        cr_assert_eq(kfdb_kernel_get_n_explicit_args(k), 2);
        k = kfdb_code_object_find_kernel(co, "odd");
        cr_assert_eq(kfdb_kernel_get_arg(k, 0, &ka), 0);
        cr_assert_eq(ka.kind, KFDB_KERNEL_ARG_UNKNOWN, "a kind from a newer daemon");
        cr_assert_eq(kfdb_kernel_get_n_explicit_args(k), 1, "an unknown kind is not assumed hidden");

        cr_assert_eq(kfdb_buffer_alloc(session, 8192, KFDB_PLACEMENT_GTT, &buf), 0);
        cr_assert_eq(kfdb_device_compute_queues(session, &queues), 0);
        cr_assert_eq(queues, 4);

        /* Every local check names what was wrong; nothing is added. */
        cr_assert_eq(kfdb_batch_new(session, &batch), 0);
        kfdb_arg args[4] = { kfdb_arg_value(&alpha, 4), kfdb_arg_buffer(buf, 0), kfdb_arg_buffer(buf, 4096),
                             kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "sax", 1, grid, block, args, 4), -ENOENT);
        cr_assert_str_eq(kfdb_session_last_error(session), "dispatch: no kernel \"sax\" in the code object");
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 0, grid, block, args, 4), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session), "dispatch: 1 to 3 grid and block dimensions needed, got 0");
        block[0] = 512;
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, grid, block, args, 4), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "dispatch: 512 work-items per workgroup, kernel \"saxpy\" allows at most 256");
        block[0] = 256;
        grid[0] = 0;
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, grid, block, args, 4), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session), "dispatch: grid[0] must be >= 1");
        grid[0] = 1000;
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, grid, block, args, 3), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session), "dispatch: kernel \"saxpy\" takes 4 arguments, got 3");
        args[1] = kfdb_arg_value(&n, 4);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, grid, block, args, 4), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "dispatch: argument 1 (\"x\") of kernel \"saxpy\" takes a buffer (kfdb_arg_buffer), got a value");
        args[1] = kfdb_arg_buffer(buf, 8192);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, grid, block, args, 4), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "dispatch: argument 1 (\"x\"): offset 8192 is outside the 8192-byte buffer");
        args[1] = kfdb_arg_buffer(buf, 0);
        args[0] = kfdb_arg_value(&alpha, 8);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, grid, block, args, 4), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "dispatch: argument 0 (\"a\") of kernel \"saxpy\" takes 4 bytes, got 8");
        args[0] = kfdb_arg_value(&alpha, 4);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "odd", 1, grid, block, args, 1), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session),
                         "dispatch: argument 0 (\"img\") of kernel \"odd\" takes an argument kind this library cannot pass, got a value");
        cr_assert_eq(kfdb_batch_get_n_jobs(batch), 0);

        cr_assert_eq(kfdb_event_create(session, false, &ev), 0);
        cr_assert_eq(kfdb_batch_wait_event_on(batch, ev, (kfdb_engine) 9), -EINVAL);
        cr_assert_str_eq(kfdb_session_last_error(session), "wait_event: unknown engine 9");
        cr_assert_eq(kfdb_batch_wait_event_on(batch, ev, KFDB_ENGINE_COMPUTE), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, grid, block, args, 4), 0, "%s",
                     kfdb_session_last_error(session));
        /* The values were copied: changing them now changes nothing sent. */
        alpha = -1.0f;
        kfdb_arg largs[2] = { kfdb_arg_buffer(buf, 0), kfdb_arg_local(2048) };
        cr_assert_eq(kfdb_batch_dispatch(batch, co2, "lds", 3, grid, block, largs, 2), 0, "%s",
                     kfdb_session_last_error(session));
        cr_assert_eq(kfdb_batch_signal_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0, "%s", kfdb_session_last_error(session));
        cr_assert_eq(fences[3], 4);

        cr_assert_eq(kfdb_code_object_free(co), 0);
        cr_assert_eq(kfdb_code_object_free(co2), 0);
        cr_assert_eq(kfdb_code_object_free(NULL), 0);
        srv_join(&s);
        kfdb_batch_free(batch);
        /* The session releases the rest (buffer, event) without a daemon. */
        kfdb_session_free(session);
}

/* ---- OpenKfd: the topology written where the caller said, never elsewhere ---- */

static void script_open_kfd(Srv *s) {
        static const WireTopologyFile bad[] = {
                { "topology/generation_id", "1\n", 2 },
                { "topology/../../escaped", "x", 1 },
        };
        static const WireTopologyFile good[] = {
                { "topology/generation_id", "1\n", 2 },
                { "topology/nodes/1/properties", "gfx_target_version 100300\n", 26 },
        };
        WireRequest req = {};
        WireReply r;
        int sv[2];

        srv_hello(s);
        S_CHECK(s, !s->failure[0]);
        S_CHECK(s, socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        S_CHECK(s, req.type == WIRE_REQUEST_OPEN_KFD);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_OPEN_KFD,
                          .open_kfd = { .files = bad, .n_files = ELEMENTSOF(bad), .render_minor = 128 } };
        S_CHECK(s, srv_send(s, &r, &sv[1], 1) == 0);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r = (WireReply) { .id = req.id, .type = WIRE_REPLY_OPEN_KFD,
                          .open_kfd = { .files = good, .n_files = ELEMENTSOF(good), .render_minor = 129 } };
        S_CHECK(s, srv_send(s, &r, &sv[1], 1) == 0);
        S_CHECK(s, srv_recv(s, &req, NULL) == 0);
        r = (WireReply) { .id = req.id, .error = EACCES,
                          .message = "open_kfd: this daemon gives no client a GPU context of its own" };
        S_CHECK(s, srv_send(s, &r, NULL, 0) == 0);
        close(sv[0]);
        close(sv[1]);
}

Test(client, open_kfd_writes_the_topology_inside_the_directory_only) {
        char dir[] = "/tmp/kfdb-topo.XXXXXX", path[128];
        kfdb_session *session;
        uint32_t minor = 0;
        int dir_fd, fd = -1;
        Srv s;

        cr_assert(mkdtemp(dir));
        dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert(dir_fd >= 0);
        srv_start(&s, script_open_kfd);
        cr_assert_eq(kfdb_session_new_from_fd(s.client_fd, "test-client", &session), 0);

        cr_expect_eq(kfdb_session_open_kfd(session, dir_fd, &fd, &minor), -EBADMSG, "a path leaving the directory");
        cr_expect_eq(fd, -1);
        snprintf(path, sizeof path, "%s/../escaped", dir);
        cr_expect_eq(access(path, F_OK), -1);
        snprintf(path, sizeof path, "%s/topology", dir);
        cr_expect_eq(access(path, F_OK), -1, "nothing written from a refused reply");

        cr_assert_eq(kfdb_session_open_kfd(session, dir_fd, &fd, &minor), 0, "%s", kfdb_session_last_error(session));
        cr_expect_geq(fd, 0);
        cr_expect_eq(minor, 129);
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        snprintf(path, sizeof path, "%s/topology/nodes/1/properties", dir);
        cr_expect_eq(access(path, R_OK), 0, "%s", path);
        close(fd);

        cr_expect_eq(kfdb_session_open_kfd(session, dir_fd, &fd, &minor), -EACCES);
        cr_expect_str_eq(kfdb_session_last_error(session), "open_kfd: this daemon gives no client a GPU context of its own");
        srv_join(&s);
        kfdb_session_free(session);
        close(dir_fd);
        snprintf(path, sizeof path, "rm -rf '%s'", dir);
        cr_expect_eq(system(path), 0);
}
