/* SPDX-License-Identifier: MIT */
/*
 * Clients against the real daemon on the simulated GPU, through libkfdbroker:
 * copies and fills checked byte by byte through the client's own mmap of the
 * dma-buf, several clients at once, a buffer shared between two sessions by
 * fd, a dma-buf of another driver, KFD event semantics over the protocol,
 * wait-event jobs held until a signal, and the session page.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;
static char policydir[64];

/* The large copies here (2 x 512 MiB, exported: on the simulated GPU they
 * stay charged to the user until a restart, docs/policy.md "Exported
 * buffers") need more than the per-user default fitted to its 1 GiB. */
static void setup(void) {
        char arg[128], path[160];
        const char *args[] = { arg, NULL };
        FILE *f;

        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        snprintf(path, sizeof(path), "%s/50-clients.conf", policydir);
        f = fopen(path, "we");
        cr_assert(f);
        fprintf(f, "[Match]\nUser=%u\n\n[Limits]\nUserBufferMemory=infinity\n", (unsigned) getuid());
        cr_assert_eq(fclose(f), 0);
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
}

static void teardown(void) {
        char cmd[128];

        test_daemon_fini(&d);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        test_fini_end();
}

TestSuite(clients, .init = setup, .fini = teardown, .timeout = 120);

static void *map(kfdb_buffer *b) {
        void *p = NULL;
        int r = kfdb_buffer_map(b, &p);

        cr_assert_eq(r, 0, "map: %s", strerror(-r));
        return p;
}

static void submit_and_wait(kfdb_session *s, kfdb_batch *b) {
        uint64_t fence = 0;
        int r = kfdb_batch_submit(b, NULL, &fence);

        cr_assert_eq(r, 0, "submit: %s (%s)", strerror(-r), kfdb_session_last_error(s));
        r = kfdb_fence_wait(s, fence, 30000);
        cr_assert_eq(r, 0, "fence %llu: %s (%s)", (unsigned long long) fence, strerror(-r),
                     kfdb_session_last_error(s));
}

static void fill_copy_check(kfdb_session *s, uint64_t size, uint32_t pattern) {
        kfdb_buffer *a, *b;
        kfdb_batch *batch;
        uint32_t *pa, *pb;
        int r;

        cr_assert_eq(kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_VRAM, &b), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        pa = map(a);
        pb = map(b);
        memset(pb, 0xee, size);
        /* Fill the first half on the GPU; write the second half from the CPU. */
        cr_assert_eq(kfdb_batch_fill(batch, a, 0, size / 2, pattern), 0);
        for (uint64_t i = size / 8; i < size / 4; i++)
                pa[i] = (uint32_t) i * 2654435761u;
        cr_assert_eq(kfdb_batch_copy(batch, b, 0, a, 0, size), 0);
        submit_and_wait(s, batch);
        for (uint64_t i = 0; i < size / 4; i++) {
                uint32_t want = i < size / 8 ? pattern : (uint32_t) i * 2654435761u;
                if (pb[i] != want)
                        cr_assert_fail("word %llu: got 0x%08x, want 0x%08x", (unsigned long long) i,
                                       pb[i], want);
        }
        r = kfdb_buffer_free(a);
        cr_assert_eq(r, 0);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        kfdb_batch_free(batch);
}

Test(clients, copy_and_fill_checked_through_own_mapping) {
        kfdb_session *s = test_connect(&d, "copy-fill");

        fill_copy_check(s, 4096, 0x01020304);
        fill_copy_check(s, (4u << 20) + 4096, 0xdeadbeef); /* crosses the 4 MiB packet split */
        kfdb_session_free(s);
}

static void *client_thread(void *arg) {
        kfdb_session *s = test_connect(&d, "parallel");
        uintptr_t n = (uintptr_t) arg;

        for (unsigned i = 0; i < 5; i++)
                fill_copy_check(s, (1u << 20) * (1 + (n + i) % 3), 0x11111111u * (uint32_t) (n + 1));
        kfdb_session_free(s);
        return NULL;
}

/* A client that goes away while its large copy runs in pieces: the pieces
 * not yet on the GPU never run, the daemon frees everything (the ASan run
 * checks for leaks), and the next client is served. The destination stays
 * readable through the client's own mapping of its dma-buf. */
Test(clients, copy_in_pieces_stops_when_its_client_goes_away) {
        enum { SIZE = 512u << 20 };
        kfdb_session *s = test_connect(&d, "cancel");
        kfdb_buffer *a, *b;
        kfdb_batch *batch;
        uint8_t *src, *dst;
        uint64_t f;
        int fd;

        cr_assert_eq(kfdb_buffer_alloc(s, SIZE, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, SIZE, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_map(a, (void **) &src), 0);
        cr_assert_eq(kfdb_buffer_export(b, &fd), 0);
        dst = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(dst, MAP_FAILED);
        close(fd);
        memset(src, 0x5a, SIZE);
        memset(dst, 0, SIZE);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 0, a, 0, SIZE), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &f), 0);
        for (int i = 0; i < 30000 && __atomic_load_n(&dst[0], __ATOMIC_RELAXED) != 0x5a; i++)
                usleep(100);
        cr_assert_eq(dst[0], 0x5a, "the copy started");
        kfdb_batch_free(batch);
        kfdb_session_free(s);

        sleep(2); /* what still ran would have run by now */
        cr_assert_eq(dst[SIZE - 1], 0, "the last piece of the copy ran after its client had gone");
        munmap(dst, SIZE);

        kfdb_session *next = test_connect(&d, "next");
        kfdb_buffer *c;
        cr_assert_eq(kfdb_buffer_alloc(next, 4096, KFDB_PLACEMENT_GTT, &c), 0);
        cr_assert_eq(kfdb_batch_new(next, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, c, 0, 4096, 1), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &f), 0);
        cr_assert_eq(kfdb_fence_wait(next, f, 30000), 0, "%s", kfdb_session_last_error(next));
        kfdb_batch_free(batch);
        kfdb_session_free(next);
}

Test(clients, several_clients_at_once) {
        pthread_t t[4];
        kfdb_session *s;
        kfdb_daemon_status st;

        for (uintptr_t i = 0; i < 4; i++)
                cr_assert_eq(pthread_create(&t[i], NULL, client_thread, (void *) i), 0);
        for (int i = 0; i < 4; i++)
                pthread_join(t[i], NULL);
        s = test_connect(&d, "observer");
        cr_assert_eq(kfdb_status(s, &st), 0);
        cr_assert_geq(st.jobs_completed, 4 * 5 * 2, "every fill and copy was retired");
        cr_assert_eq(st.jobs_failed, 0);
        kfdb_session_free(s);
}

Test(clients, buffer_shared_between_two_sessions_by_fd) {
        kfdb_session *a = test_connect(&d, "exporter"), *b = test_connect(&d, "importer");
        kfdb_buffer *ba, *bb, *dst;
        kfdb_batch *batch;
        uint32_t *pa, *pdst;
        int fd, r;

        cr_assert_eq(kfdb_buffer_alloc(a, 1 << 20, KFDB_PLACEMENT_GTT, &ba), 0);
        fd = kfdb_buffer_get_fd(ba);
        cr_assert_geq(fd, 0);
        r = kfdb_buffer_import(b, fd, &bb);
        cr_assert_eq(r, 0, "import: %s (%s)", strerror(-r), kfdb_session_last_error(b));
        cr_assert_eq(kfdb_buffer_get_size(bb), 1 << 20);

        /* B fills the shared buffer on the GPU; A sees it through its own mapping. */
        cr_assert_eq(kfdb_batch_new(b, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, bb, 0, 1 << 20, 0xc0ffee00), 0);
        submit_and_wait(b, batch);
        pa = map(ba);
        for (unsigned i = 0; i < (1u << 20) / 4; i++)
                cr_assert_eq(pa[i], 0xc0ffee00, "word %u", i);

        /* A drops its handle; B's import keeps the memory alive and usable. */
        pa[7] = 0x77777777;
        cr_assert_eq(kfdb_buffer_free(ba), 0);
        cr_assert_eq(kfdb_buffer_alloc(b, 1 << 20, KFDB_PLACEMENT_GTT, &dst), 0);
        cr_assert_eq(kfdb_batch_copy(batch, dst, 0, bb, 0, 1 << 20), 0);
        submit_and_wait(b, batch);
        pdst = map(dst);
        cr_assert_eq(pdst[7], 0x77777777);
        cr_assert_eq(pdst[8], 0xc0ffee00);

        kfdb_batch_free(batch);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

/* The simulator's stand-in for a dma-buf of another driver (a camera's,
 * udmabuf's): a memfd named "foreign-dmabuf:..." sealed against resizing
 * (sim-memory.c). */
static int foreign_dmabuf(size_t size) {
        int fd = memfd_create("foreign-dmabuf:test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, (off_t) size), 0);
        cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
        return fd;
}

/* KFD 1.15 (Linux 6.8) imports dma-bufs amdgpu did not make (kfd-facts §7.6):
 * filled on the GPU, seen through the exporter's own mapping, copied out. */
Test(clients, a_dma_buf_of_another_driver_is_imported) {
        kfdb_session *s = test_connect(&d, "foreign");
        kfdb_buffer *b = NULL, *dst;
        kfdb_batch *batch;
        int fd = foreign_dmabuf(64 << 10), r;
        uint32_t *p, *pd;
        kfdb_device dev;

        cr_assert_eq(kfdb_device_info(s, &dev), 0);
        if (dev.kfd_minor < 15) {
                /* (this suite also runs at KFD 1.11) */
                cr_expect_eq(kfdb_buffer_import(s, fd, &b), -EINVAL);
                kfdb_session_free(s);
                close(fd);
                return;
        }

        p = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(p, MAP_FAILED);
        p[100] = 0x5eed;
        r = kfdb_buffer_import(s, fd, &b);
        cr_assert_eq(r, 0, "import: %s (%s)", strerror(-r), kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_get_size(b), 64u << 10);
        cr_assert_eq(kfdb_buffer_alloc(s, 64 << 10, KFDB_PLACEMENT_VRAM, &dst), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, dst, 0, b, 0, 64 << 10), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0xf0f0f0f0), 0);
        submit_and_wait(s, batch);
        for (unsigned i = 0; i < 1024; i++)
                cr_assert_eq(p[i], 0xf0f0f0f0, "word %u of the foreign buffer", i);
        cr_assert_eq(p[1024], 0);
        pd = map(dst);
        cr_expect_eq(pd[100], 0x5eed, "the copy read what the exporter wrote");
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_buffer_free(b), 0);
        munmap(p, 64 << 10);
        close(fd);
        kfdb_session_free(s);
}

/* Before KFD 1.15 (Linux 6.1's 1.11, say) the kernel refuses them, and the
 * error says so; an ordinary memfd is no dma-buf anywhere. */
Test(clients, a_dma_buf_of_another_driver_on_an_older_kernel_is_refused_with_a_reason) {
        const char *args[] = { "--sim-kfd-version=1.14", NULL };
        TestDaemon old;
        kfdb_session *s;
        kfdb_buffer *b = NULL;
        int fd = foreign_dmabuf(4096), plain = memfd_create("plain", MFD_CLOEXEC), r;

        test_daemon_start(&old, args);
        cr_assert_eq(kfdb_session_new(old.sock, "foreign", &s), 0);
        r = kfdb_buffer_import(s, fd, &b);
        cr_assert_eq(r, -EINVAL, "import on KFD 1.14: %d", r);
        cr_expect(strstr(kfdb_session_last_error(s), "imports no dma-buf of another driver; KFD 1.15"), "%s",
                  kfdb_session_last_error(s));
        kfdb_session_free(s);
        test_daemon_fini(&old);

        cr_assert_eq(ftruncate(plain, 4096), 0);
        s = test_connect(&d, "plain");
        cr_expect_eq(kfdb_buffer_import(s, plain, &b), -EINVAL, "an ordinary memfd");
        cr_expect(strstr(kfdb_session_last_error(s), "not a dma-buf"), "%s",
                  kfdb_session_last_error(s));
        kfdb_session_free(s);
        close(fd);
        close(plain);
}

Test(clients, event_semantics) {
        kfdb_session *s = test_connect(&d, "events");
        kfdb_event *ar, *mr;
        kfdb_wait_entry w[2];
        kfdb_wait_result res;
        kfdb_batch *batch;
        uint64_t age;

        cr_assert_eq(kfdb_event_create(s, true, &ar), 0);
        cr_assert_eq(kfdb_event_create(s, false, &mr), 0);
        cr_assert_eq(kfdb_event_get_age(ar), 1, "events start at age 1");

        /* Poll: nothing signaled yet. */
        w[0] = (kfdb_wait_entry) { .event = ar };
        cr_assert_eq(kfdb_wait_events(s, w, 1, false, 0, &res), 0);
        cr_assert_eq(res, KFDB_WAIT_TIMEOUT);

        /* A signal job from the GPU. */
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_signal_event(batch, ar), 0);
        submit_and_wait(s, batch);
        cr_assert_eq(kfdb_event_get_age(ar), 2);
        cr_assert(kfdb_event_is_signaled(ar), "no waiter: an auto-reset event stays signaled");
        w[0] = (kfdb_wait_entry) { .event = ar };
        cr_assert_eq(kfdb_wait_events(s, w, 1, false, 1000, &res), 0);
        cr_assert_eq(res, KFDB_WAIT_COMPLETE);
        cr_assert_eq(w[0].last_event_age, 2);
        cr_assert(!kfdb_event_is_signaled(ar), "the wait consumed the auto-reset signal");
        /* Consumed: a second poll times out... */
        w[0] = (kfdb_wait_entry) { .event = ar };
        cr_assert_eq(kfdb_wait_events(s, w, 1, false, 0, &res), 0);
        cr_assert_eq(res, KFDB_WAIT_TIMEOUT);
        /* ...but age tracking sees the signal it missed. */
        w[0] = (kfdb_wait_entry) { .event = ar, .last_event_age = 1 };
        cr_assert_eq(kfdb_wait_events(s, w, 1, false, 0, &res), 0);
        cr_assert_eq(res, KFDB_WAIT_COMPLETE);
        cr_assert_eq(w[0].last_event_age, 2);

        /* Manual reset: stays signaled for every waiter until reset. */
        cr_assert_eq(kfdb_event_set(mr), 0);
        age = kfdb_event_get_age(mr);
        cr_assert_eq(age, 2);
        for (int i = 0; i < 2; i++) {
                w[0] = (kfdb_wait_entry) { .event = mr };
                cr_assert_eq(kfdb_wait_events(s, w, 1, false, 0, &res), 0);
                cr_assert_eq(res, KFDB_WAIT_COMPLETE);
        }
        cr_assert_eq(kfdb_event_reset(mr), 0);
        w[0] = (kfdb_wait_entry) { .event = mr };
        cr_assert_eq(kfdb_wait_events(s, w, 1, false, 0, &res), 0);
        cr_assert_eq(res, KFDB_WAIT_TIMEOUT);

        /* wait_all: one of two is not enough. */
        cr_assert_eq(kfdb_event_set(mr), 0);
        w[0] = (kfdb_wait_entry) { .event = ar };
        w[1] = (kfdb_wait_entry) { .event = mr };
        cr_assert_eq(kfdb_wait_events(s, w, 2, true, 50, &res), 0);
        cr_assert_eq(res, KFDB_WAIT_TIMEOUT);
        cr_assert_eq(kfdb_wait_events(s, w, 2, false, 50, &res), 0);
        cr_assert_eq(res, KFDB_WAIT_COMPLETE);

        kfdb_batch_free(batch);
        kfdb_session_free(s);
}

Test(clients, wait_does_not_block_other_requests) {
        /* Raw protocol, to have a WaitEvents outstanding while the same
         * connection sends more requests. */
        int fd = raw_connect(&d), other = raw_connect(&d);
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__CreateEventRequest ce = KFDBROKER__V1__CREATE_EVENT_REQUEST__INIT;
        Kfdbroker__V1__QueryRequest q = KFDBROKER__V1__QUERY_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m, *holder;
        uint64_t ev;
        bool got_wait = false, got_set = false;

        raw_hello(fd);
        raw_hello(other);
        req.body_case = KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT;
        req.create_event = &ce;
        m = raw_call(fd, &req, NULL, 0, NULL, NULL);
        cr_assert_eq(m->error, 0);
        ev = m->create_event->handle;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        raw_send_wait(fd, 1000, ev, UINT32_MAX);

        /* The same connection is still served while its wait is pending... */
        req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
        req.query = &q;
        m = raw_call(fd, &req, NULL, 0, NULL, NULL);
        cr_assert_eq(m->error, 0);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        /* ...and so is another session. */
        raw_status(other, &holder);
        kfdbroker__v1__server_message__free_unpacked(holder, NULL);

        raw_send_set_event(fd, 1001, ev);
        while (!got_wait || !got_set) {
                cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 5000), 1);
                if (m->id == 1000) {
                        cr_assert_eq(m->error, 0);
                        cr_assert_eq(m->wait_events->result, KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_COMPLETE);
                        cr_assert_eq(m->wait_events->events[0]->last_event_age, 2);
                        got_wait = true;
                } else if (m->id == 1001) {
                        cr_assert_eq(m->error, 0);
                        got_set = true;
                }
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        close(fd);
        close(other);
}

Test(clients, wait_event_job_holds_the_stream_until_signaled) {
        kfdb_session *s = test_connect(&d, "wait-job");
        kfdb_buffer *b;
        kfdb_event *ev;
        kfdb_batch *batch;
        uint64_t fences[2];
        uint32_t *p;

        cr_assert_eq(kfdb_buffer_alloc(s, 65536, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_event_create(s, true, &ev), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        p = map(b);
        p[0] = 0;
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 65536, 0x5eed5eed), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);
        cr_assert_eq(fences[1], fences[0] + 1);
        cr_assert_eq(kfdb_fence_wait(s, fences[1], 200), -ETIMEDOUT, "held until the event is set");
        cr_assert_eq(p[0], 0);
        cr_assert_eq(kfdb_event_set(ev), 0);
        cr_assert_eq(kfdb_fence_wait(s, fences[1], 10000), 0);
        cr_assert_eq(p[0], 0x5eed5eed);
        cr_assert(!kfdb_event_is_signaled(ev), "the wait job consumed the auto-reset signal");

        /* A signal job in the same stream releases a later wait job. */
        cr_assert_eq(kfdb_batch_signal_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0x600d600d), 0);
        submit_and_wait(s, batch);
        cr_assert_eq(p[0], 0x600d600d);

        /* Destroying the event fails a held wait job with ECANCELED. */
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);
        cr_assert_eq(kfdb_event_destroy(ev), 0);
        cr_assert_eq(kfdb_fence_wait(s, fences[0], 10000), -ECANCELED);

        kfdb_batch_free(batch);
        kfdb_session_free(s);
}

Test(clients, session_page_eventfd_signals_completion) {
        kfdb_session *s = test_connect(&d, "page");
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint64_t fence;
        struct pollfd p;

        cr_assert_eq(kfdb_buffer_alloc(s, 8 << 20, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 8 << 20, 1), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        p = (struct pollfd) { .fd = kfdb_get_event_fd(s), .events = POLLIN };
        for (int i = 0; i < 100 && !kfdb_fence_is_done(s, fence); i++) {
                uint64_t n;
                if (poll(&p, 1, 100) > 0)
                        cr_assert_eq(read(p.fd, &n, sizeof(n)), (ssize_t) sizeof(n));
        }
        cr_assert_eq(kfdb_fence_is_done(s, fence), 1, "seen through the page without a round trip");
        kfdb_batch_free(batch);
        kfdb_session_free(s);
}

/* The eventfd says something happened: a completion, not a submission (the
 * client that submitted knows; a wake for it is a wasted one). */
Test(clients, session_page_eventfd_is_quiet_at_submit) {
        kfdb_session *s = test_connect(&d, "page-quiet");
        struct pollfd p = { .fd = kfdb_get_event_fd(s), .events = POLLIN };
        kfdb_buffer *b;
        kfdb_event *ev;
        kfdb_batch *batch;
        uint64_t fence, n;

        cr_assert_eq(kfdb_buffer_alloc(s, 65536, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_event_create(s, true, &ev), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_wait_event(batch, ev), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 7), 0);
        /* What came before (the event's slot) may signal a moment after its reply. */
        while (poll(&p, 1, 200) > 0)
                cr_assert_eq(read(p.fd, &n, sizeof(n)), (ssize_t) sizeof(n));
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        cr_expect_eq(poll(&p, 1, 100), 0, "the eventfd signalled a submission");
        cr_assert_eq(kfdb_event_set(ev), 0);
        cr_expect_eq(poll(&p, 1, 10000), 1, "the eventfd did not signal the completion");
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0);
        kfdb_batch_free(batch);
        kfdb_session_free(s);
}

Test(clients, limits_are_enforced_with_edquot) {
        kfdb_session *s = test_connect(&d, "limits");
        kfdb_limits lim;
        kfdb_buffer *b;
        int r;

        kfdb_session_get_limits(s, &lim);
        r = kfdb_buffer_alloc(s, lim.max_buffer_size + 4096, KFDB_PLACEMENT_GTT, &b);
        cr_assert_eq(r, -EDQUOT);
        cr_assert(strstr(kfdb_session_last_error(s), "max_buffer_size"), "%s",
                  kfdb_session_last_error(s));
        kfdb_session_free(s);
}
