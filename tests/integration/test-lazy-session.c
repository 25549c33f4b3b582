/* SPDX-License-Identifier: MIT */
/*
 * Lazy sessions (docs/protocol.md "Lazy sessions", issue 32 item 2): a Hello
 * with the lazy session bit gets no fds, and the daemon holds nothing for
 * the session but its socket until OpenSessionPage, which hands out a page
 * that says what happened before it (fences, events, the jobs limit); a
 * Hello without the bit gets the page and eventfd as ever; bits the daemon
 * does not know change nothing. libkfdbroker asks for a lazy session and
 * makes the page, the submit ring and the fence page at their first use
 * (KFDBROKER_LAZY_SESSION=0: at Hello, as before), also after a restart.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "session-page.h"

static TestDaemon d;

static void setup(void) {
        test_daemon_start(&d, NULL);
}

static void teardown(void) {
        unsetenv("KFDBROKER_LAZY_SESSION");
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(lazy, .init = setup, .fini = teardown, .timeout = 120);

#define HELLO_LAZY_SESSION 1u

/* The daemon's fds once they stop changing: the same count twice, 50 ms apart. */
static int stable_fds(void) {
        int n = test_daemon_count_fds(&d), m;

        for (int i = 0; i < 100; i++, n = m) {
                usleep(50000);
                m = test_daemon_count_fds(&d);
                if (m == n)
                        break;
        }
        return n;
}

/* The daemon's fds once they are what is expected, or after 3 s (its
 * replies' copies are closed as they go out). */
static int settled_fds(int expected) {
        int n = test_daemon_count_fds(&d);

        for (int i = 0; i < 300 && n != expected; i++) {
                usleep(10000);
                n = test_daemon_count_fds(&d);
        }
        return n;
}

static bool has_feature(const Kfdbroker__V1__HelloReply *h, const char *feature) {
        for (size_t i = 0; i < h->n_features; i++)
                if (strcmp(h->features[i], feature) == 0)
                        return true;
        return false;
}

/* Hello with features; the reply (free it), its fds in fds[2], their count in *n_fds. */
static Kfdbroker__V1__ServerMessage *hello(int fd, uint64_t features, int *fds, unsigned *n_fds) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m;

        h.protocol_version = 1;
        h.client_name = "lazy-test";
        h.features = features;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        req.hello = &h;
        *n_fds = 2;
        m = raw_call(fd, &req, NULL, 0, fds, n_fds);
        cr_assert_eq(m->error, 0, "Hello: %s", m->error_message);
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_HELLO);
        return m;
}

static Kfdbroker__V1__ServerMessage *open_session_page(int fd, int *fds, unsigned *n_fds) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__OpenSessionPageRequest o = KFDBROKER__V1__OPEN_SESSION_PAGE_REQUEST__INIT;

        req.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_SESSION_PAGE;
        req.open_session_page = &o;
        *n_fds = 2;
        return raw_call(fd, &req, NULL, 0, fds, n_fds);
}

static Kfdbroker__V1__ServerMessage *open_fence_page(int fd, int *fds, unsigned *n_fds) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__OpenFencePageRequest o = KFDBROKER__V1__OPEN_FENCE_PAGE_REQUEST__INIT;

        req.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_FENCE_PAGE;
        req.open_fence_page = &o;
        *n_fds = 1;
        return raw_call(fd, &req, NULL, 0, fds, n_fds);
}

/* A plain request whose reply must be a success; returns the reply (free it). */
static Kfdbroker__V1__ServerMessage *call_ok(int fd, Kfdbroker__V1__Request *req, const char *what) {
        Kfdbroker__V1__ServerMessage *m = raw_call(fd, req, NULL, 0, NULL, NULL);

        cr_assert_eq(m->error, 0, "%s: %s", what, m->error_message);
        return m;
}

/* ---- The protocol ---- */

Test(lazy, a_lazy_hello_gets_no_fds_and_costs_the_daemon_its_socket_alone) {
        Kfdbroker__V1__ServerMessage *m;
        int base = stable_fds(), fd, fds[2];
        unsigned n;

        fd = raw_connect(&d);
        m = hello(fd, HELLO_LAZY_SESSION, fds, &n);
        cr_assert_eq(n, 0, "a lazy session's Hello carries %u fds", n);
        cr_assert(has_feature(m->hello, "lazy-session"), "the daemon does not announce lazy-session");
        cr_assert_eq(m->hello->session_page_size, 0, "a lazy Hello says a page of %u bytes",
                     m->hello->session_page_size);
        cr_assert_gt(m->hello->limits->max_jobs_in_flight, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        cr_assert_eq(settled_fds(base + 1), base + 1, "the daemon holds %d fds for an idle lazy session",
                     test_daemon_count_fds(&d) - base);
        close(fd);
        cr_assert_eq(settled_fds(base), base, "the session's socket was not closed");
}

Test(lazy, an_old_hello_gets_the_page_and_eventfd_at_once) {
        Kfdbroker__V1__ServerMessage *m;
        int base = stable_fds(), fd, fds[2];
        unsigned n;

        fd = raw_connect(&d);
        m = hello(fd, 0, fds, &n);
        cr_assert_eq(n, 2, "an old client's Hello carries %u fds", n);
        cr_assert_eq(m->hello->session_page_size, KFDB_PAGE_SIZE);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fds[0]);
        close(fds[1]);
        /* Its socket and the eventfd; the page's memfd went with the reply. */
        cr_assert_eq(settled_fds(base + 2), base + 2, "the daemon holds %d fds for an old session",
                     test_daemon_count_fds(&d) - base);

        m = open_session_page(fd, fds, &n);
        cr_assert_eq(m->error, EEXIST, "got %d (%s)", m->error, m->error_message);
        cr_assert(strstr(m->error_message, "has its session page already (it came with Hello"), "%s", m->error_message);
        cr_assert_eq(n, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);
}

Test(lazy, hello_bits_the_daemon_does_not_know_change_nothing) {
        Kfdbroker__V1__ServerMessage *m;
        int fd = raw_connect(&d), fds[2];
        unsigned n;

        m = hello(fd, UINT64_C(1) << 7, fds, &n);
        cr_assert_eq(n, 2, "an unknown bit alone: %u fds", n);
        close(fds[0]);
        close(fds[1]);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);

        fd = raw_connect(&d);
        m = hello(fd, HELLO_LAZY_SESSION | (UINT64_C(1) << 63), fds, &n);
        cr_assert_eq(n, 0, "the lazy bit with an unknown one: %u fds", n);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);
}

/* Work done before OpenSessionPage shows on the page it gets: the fences of
 * a finished fill, an event signaled, the jobs limit. The fence page needs
 * the page first. */
Test(lazy, the_page_comes_at_open_session_page_with_what_happened_before) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__CreateEventRequest ce = KFDBROKER__V1__CREATE_EVENT_REQUEST__INIT;
        Kfdbroker__V1__SetEventRequest se = KFDBROKER__V1__SET_EVENT_REQUEST__INIT;
        Kfdbroker__V1__SubmitRequest sub = KFDBROKER__V1__SUBMIT_REQUEST__INIT;
        Kfdbroker__V1__Job job = KFDBROKER__V1__JOB__INIT, *jobs[1] = { &job };
        Kfdbroker__V1__FillJob fill = KFDBROKER__V1__FILL_JOB__INIT;
        Kfdbroker__V1__ServerMessage *m;
        const KfdbSessionPage *page;
        uint64_t buf, event, fence, max_jobs;
        uint32_t slot;
        int base = stable_fds(), fd = raw_connect(&d), fds[2];
        unsigned n;
        struct stat st;

        m = hello(fd, HELLO_LAZY_SESSION, fds, &n);
        max_jobs = m->hello->limits->max_jobs_in_flight;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        buf = raw_alloc(fd, 4096, NULL);
        req.body_case = KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT;
        req.create_event = &ce;
        m = call_ok(fd, &req, "CreateEvent");
        event = m->create_event->handle;
        slot = m->create_event->slot;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
        se.handle = event;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_SET_EVENT;
        req.set_event = &se;
        kfdbroker__v1__server_message__free_unpacked(call_ok(fd, &req, "SetEvent"), NULL);

        fill.dst_handle = buf;
        fill.size = 4096;
        fill.pattern = 0x1a2b3c4d;
        job.kind_case = KFDBROKER__V1__JOB__KIND_FILL;
        job.fill = &fill;
        sub.n_jobs = 1;
        sub.jobs = jobs;
        req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        req.submit = &sub;
        m = call_ok(fd, &req, "Submit");
        cr_assert_eq(m->submit->n_fences, 1);
        fence = m->submit->fences[0];
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        /* The fence page wakes the page's eventfd: not before the page. */
        m = open_fence_page(fd, fds, &n);
        cr_assert_eq(m->error, EPROTO, "got %d (%s)", m->error, m->error_message);
        cr_assert(strstr(m->error_message, "no session page yet") && strstr(m->error_message, "OpenSessionPage first"),
                  "%s", m->error_message);
        cr_assert_eq(n, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        m = open_session_page(fd, fds, &n);
        cr_assert_eq(m->error, 0, "OpenSessionPage: %s", m->error_message);
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SESSION_PAGE);
        cr_assert_eq(n, 2, "OpenSessionPage carries %u fds", n);
        cr_assert_eq(m->open_session_page->size, KFDB_PAGE_SIZE);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        cr_assert_eq(fstat(fds[0], &st), 0);
        cr_assert_geq(st.st_size, (off_t) KFDB_PAGE_SIZE);
        page = mmap(NULL, KFDB_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[0], 0);
        cr_assert_neq(page, MAP_FAILED);
        cr_assert_eq(mmap(NULL, KFDB_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0), MAP_FAILED,
                     "the page is sealed against a writable mapping");
        close(fds[0]);
        cr_assert_eq(page->magic, KFDB_PAGE_MAGIC);
        cr_assert_eq(page->version, KFDB_PAGE_VERSION);
        cr_assert_eq(page->max_events, KFDB_PAGE_MAX_EVENTS);
        cr_assert_eq(page->max_jobs_in_flight, max_jobs);
        cr_assert_eq(__atomic_load_n(&page->submitted_fence, __ATOMIC_ACQUIRE), fence);
        cr_assert_lt(slot, KFDB_PAGE_MAX_EVENTS);
        cr_assert_eq(page->events[slot].live, 1);
        cr_assert_eq(page->events[slot].signaled, 1);
        cr_assert_eq(page->events[slot].age, 2, "a signaled event's age is 2, the page says %llu",
                     (unsigned long long) page->events[slot].age);
        /* The fill completes on the page, and the eventfd says so. */
        for (int i = 0; i < 500 && __atomic_load_n(&page->completed_fence, __ATOMIC_ACQUIRE) < fence; i++) {
                struct pollfd p = { .fd = fds[1], .events = POLLIN };
                uint64_t v;

                if (poll(&p, 1, 10) > 0)
                        (void) !read(fds[1], &v, sizeof(v));
                else
                        usleep(10000);
        }
        cr_assert_eq(__atomic_load_n(&page->completed_fence, __ATOMIC_ACQUIRE), fence, "completed %llu, submitted %llu, fence %llu", (unsigned long long) page->completed_fence, (unsigned long long) page->submitted_fence, (unsigned long long) fence);

        m = open_session_page(fd, fds + 0, &n);
        cr_assert_eq(m->error, EEXIST, "a second OpenSessionPage: %d (%s)", m->error, m->error_message);
        cr_assert_eq(n, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        {
                int page_fd;

                m = open_fence_page(fd, &page_fd, &n);
                cr_assert_eq(m->error, 0, "OpenFencePage after the page: %s", m->error_message);
                cr_assert_eq(n, 1);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
                close(page_fd);
        }
        munmap((void *) page, KFDB_PAGE_SIZE);
        close(fds[1]);
        close(fd);
        cr_assert_eq(settled_fds(base), base, "the daemon holds %d fds of the session after it ended",
                     test_daemon_count_fds(&d) - base);
}

/* ---- libkfdbroker ---- */

static uint64_t session_fds(kfdb_session *s) {
        kfdb_fd_budget b;

        cr_assert_eq(kfdb_query_fd_budget(s, &b), 0, "%s", kfdb_session_last_error(s));
        return b.session_fds;
}

/* Nothing until used: an idle session holds its socket; a buffer its fd;
 * the eventfd comes with kfdb_get_event_fd(), the ring and fence page with
 * the first submit, which goes through the ring and ends on the fence page. */
Test(lazy, libkfdbroker_makes_the_page_ring_and_fence_page_at_first_use) {
        kfdb_session *s = test_connect(&d, "lazy-lib"), *t = test_connect(&d, "lazy-lib-events");
        uint64_t fence, before;
        kfdb_buffer *b;
        kfdb_batch *batch;
        kfdb_event *e;
        uint32_t *p;
        int efd;

        cr_assert(kfdb_session_has_feature(s, "lazy-session"));
        cr_assert_eq(session_fds(s), 1, "an idle lazy session holds %llu fds", (unsigned long long) session_fds(s));
        cr_assert_eq(kfdb_fence_is_done(s, 0), 1, "fence 0 is done in a session that submitted nothing");
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &b), 0, "%s", kfdb_session_last_error(s));
        before = session_fds(s);
        cr_assert_leq(before, 2, "a session with one buffer holds %llu fds", (unsigned long long) before);

        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0x0badcafe), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_session_get_ring_submits(s), 1, "the first submit went through the ring");
        cr_assert_eq(kfdb_buffer_map(b, (void **) &p), 0);
        cr_assert_eq(p[1023], 0x0badcafe);
        /* The eventfd, the doorbell and the fence page (a buffer's fds). */
        cr_assert_eq(session_fds(s), before + 2 + (before - 1), "after the first submit: %llu fds",
                     (unsigned long long) session_fds(s));

        /* kfdb_get_event_fd() makes the page in a session without one, and
         * events show on it. */
        cr_assert_eq(session_fds(t), 1);
        efd = kfdb_get_event_fd(t);
        cr_assert_geq(efd, 0, "kfdb_get_event_fd: %s", strerror(-efd));
        cr_assert_eq(kfdb_get_event_fd(t), efd, "the eventfd's number stays");
        cr_assert_eq(session_fds(t), 2, "the eventfd alone came: %llu fds", (unsigned long long) session_fds(t));
        cr_assert_eq(kfdb_event_create(t, false, &e), 0, "%s", kfdb_session_last_error(t));
        cr_assert_eq(kfdb_event_set(e), 0);
        cr_assert_eq(kfdb_event_is_signaled(e), true);
        cr_assert_eq(kfdb_event_destroy(e), 0);

        kfdb_batch_free(batch);
        kfdb_buffer_free(b);
        kfdb_session_free(s);
        kfdb_session_free(t);
}

/* An event made first makes the page; KFDBROKER_LAZY_SESSION=0 asks for the
 * page, ring and fence page at Hello as a library without the bit did. */
Test(lazy, an_eager_library_session_holds_everything_from_hello) {
        kfdb_session *s;
        kfdb_event *e;

        s = test_connect(&d, "lazy-event");
        cr_assert_eq(kfdb_event_create(s, true, &e), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(session_fds(s), 2, "a session with an event holds %llu fds", (unsigned long long) session_fds(s));
        cr_assert_eq(kfdb_event_set(e), 0);
        cr_assert_eq(kfdb_event_get_age(e), 2);
        kfdb_event_destroy(e);
        kfdb_session_free(s);

        cr_assert_eq(setenv("KFDBROKER_LAZY_SESSION", "0", 1), 0);
        s = test_connect(&d, "eager");
        /* Its socket, the eventfd, the ring's doorbell and the fence page
         * (one fd a buffer on the simulated GPU). */
        cr_assert_eq(session_fds(s), 4, "an eager session holds %llu fds", (unsigned long long) session_fds(s));
        kfdb_session_free(s);
}

/* A lazy session's eventfd keeps its number over a daemon restart, and its
 * ring comes back with the session that had one. */
Test(lazy, a_lazy_session_comes_back_after_a_restart) {
        kfdb_session *s = test_connect(&d, "lazy-restart"), *idle = test_connect(&d, "lazy-idle");
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint64_t fence;
        int efd;

        cr_assert_eq(kfdb_buffer_alloc(s, 8192, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 1), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0, "%s", kfdb_session_last_error(s));
        efd = kfdb_get_event_fd(s);
        cr_assert_geq(efd, 0);

        cr_assert_eq(test_daemon_restart(&d, SIGTERM, NULL), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 4096, 4096, 2), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_session_get_reconnects(s), 1);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_get_event_fd(s), efd, "the eventfd kept its number");
        cr_assert_eq(kfdb_session_get_ring_submits(s), 2, "the new daemon's ring took the submit");

        /* The idle one comes back (at its next call) as idle: its socket alone. */
        cr_assert_eq(session_fds(idle), 1, "an idle session after a restart holds %llu fds",
                     (unsigned long long) session_fds(idle));
        cr_assert_eq(kfdb_session_get_reconnects(idle), 1);
        kfdb_batch_free(batch);
        kfdb_buffer_free(b);
        kfdb_session_free(s);
        kfdb_session_free(idle);
}
