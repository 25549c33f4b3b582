/* SPDX-License-Identifier: MIT */
/*
 * Several GPUs in one session (issue 33, item 2): a buffer names its GPU
 * (kfdb_buffer_alloc_on_gpu(), AllocBufferRequest.gpu) and so does a job
 * (kfdb_batch_set_gpu(), Job.gpu); a copy between GPUs imports the other
 * GPU's buffer (KFD 1.15 on), fills and dispatches keep to their GPU;
 * BufferMemory= holds per GPU, the user cap counts them all; Devices= and a
 * GPU's socket keep a session off the GPUs it may not use; an old client
 * sees no change; nothing of the session stays on any GPU after it ends.
 * On a simulated machine of two gfx1030s (--sim-gpus=2).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

static const char *const two_gpus[] = { "--sim-gpus=2", NULL };

/* Devices= for this uid. */
static void set_devices(const TestDaemon *d, const char *devices, unsigned count) {
        char line[128];

        snprintf(line, sizeof line, "Devices=%s", devices);
        test_daemon_set_limits(d, line, count);
}

/* Fills buffer b (on GPU gpu) with value by a job on that GPU and waits. */
static void fill_on(kfdb_session *s, kfdb_buffer *b, uint32_t gpu, uint32_t value) {
        kfdb_batch *batch = NULL;
        uint64_t fence = 0;

        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, gpu), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, kfdb_buffer_get_size(b), value), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 30000), 0, "%s", kfdb_session_last_error(s));
        kfdb_batch_free(batch);
}

static void expect_words(kfdb_buffer *b, uint32_t value, const char *what) {
        uint32_t *p;

        cr_assert_eq(kfdb_buffer_map(b, (void **) &p), 0);
        for (uint64_t i = 0; i < kfdb_buffer_get_size(b) / 4; i++)
                cr_assert_eq(p[i], value, "%s: word %lu is 0x%08x", what, (unsigned long) i, p[i]);
}

/* What the daemon says of each GPU now. */
static void gpus_now(kfdb_session *s, kfdb_gpu gpus[2]) {
        size_t n = 0;

        cr_assert_eq(kfdb_gpus_get(s, gpus, 2, &n), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(n, 2u);
}

/* ListSessions over the socket, raw: the busy_ns_by_gpu of session id, which
 * must sum to its engine times. */
static void expect_gpu_time(const TestDaemon *d, uint64_t id, const char *what) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__ListSessionsRequest list = KFDBROKER__V1__LIST_SESSIONS_REQUEST__INIT;
        Kfdbroker__V1__ServerMessage *m = NULL;
        int fd = raw_connect(d);
        bool found = false;

        cr_assert_geq(fd, 0);
        raw_hello(fd);
        req.id = 7;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_LIST_SESSIONS;
        req.list_sessions = &list;
        cr_assert_eq(raw_send(fd, &req, NULL, 0), 0);
        cr_assert_eq(raw_recv(fd, &m, NULL, NULL, 10000), 1);
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_LIST_SESSIONS, "%s", m->error_message);
        for (size_t i = 0; i < m->list_sessions->n_sessions; i++) {
                const Kfdbroker__V1__SessionInfo *si = m->list_sessions->sessions[i];

                if (si->id != id)
                        continue;
                found = true;
                cr_assert_eq(si->n_busy_ns_by_gpu, 2u, "%s", what);
                cr_expect_gt(si->busy_ns_by_gpu[0], 0u, "%s: GPU 0 ran a fill and a copy", what);
                cr_expect_gt(si->busy_ns_by_gpu[1], 0u, "%s: GPU 1 ran a fill, a copy and a kernel", what);
                cr_expect_eq(si->busy_ns_by_gpu[0] + si->busy_ns_by_gpu[1], si->busy_ns_sdma + si->busy_ns_compute,
                             "%s: the GPUs' times add up to the session's", what);
                cr_expect_eq(si->gpu, 0u, "%s: its own GPU", what);
        }
        cr_expect(found, "%s: session %lu not listed", what, (unsigned long) id);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);
}

/* One session on GPU 0 with buffers and jobs on both GPUs: fills on each,
 * copies across in both directions (the copying GPU imports the other's
 * buffer), a dispatch on GPU 1; each GPU's scheduler counts its own jobs,
 * the session counts on both, and its fences are one sequence. When it
 * ends, every buffer and GPU context it had on either GPU goes. Both
 * context mechanisms: secondary KFD contexts (default) and worker processes
 * (KFD 1.18). */
Test(gpus_session, one_session_fills_copies_and_dispatches_on_both_gpus) {
        static const char *const versions[] = { NULL, "--sim-kfd-version=1.18" };

        for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
                const char *extra[] = { "--sim-gpus=2", versions[v], NULL };
                const char *what = versions[v] ? versions[v] : "secondary contexts";
                const uint64_t size = 64 * 1024;
                const uint32_t count = 256, block = 64;
                TestDaemon d;
                kfdb_session *s = NULL, *watcher = NULL;
                kfdb_buffer *a0 = NULL, *b1 = NULL, *c0 = NULL, *d1 = NULL, *x1 = NULL;
                kfdb_code_object *add = NULL;
                kfdb_batch *batch = NULL;
                kfdb_gpu before[2], after[2], ended[2];
                kfdb_gpu_contexts cs;
                kfdb_gpu_context list[16];
                uint64_t fences[2] = { 0, 0 }, fence = 0;
                float *px;

                test_daemon_start(&d, extra);
                cr_assert_eq(kfdb_session_new(d.sock, "both", &s), 0, "%s", kfdb_session_last_error(NULL));
                cr_assert_eq(kfdb_session_new(d.sock, "watcher", &watcher), 0, "%s", kfdb_session_last_error(NULL));
                gpus_now(watcher, before);
                int fds = test_daemon_count_fds(&d);

                /* An old call is on the session's GPU, as ever. */
                cr_assert_eq(kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_VRAM, &a0), 0, "%s", kfdb_session_last_error(s));
                cr_expect_eq(kfdb_buffer_get_gpu(a0), 0u);
                cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, size, KFDB_PLACEMENT_VRAM, 1, &b1), 0, "%s",
                             kfdb_session_last_error(s));
                cr_expect_eq(kfdb_buffer_get_gpu(b1), 1u, "%s", what);
                cr_assert_eq(kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_GTT, &c0), 0);
                cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, size, KFDB_PLACEMENT_GTT, 1, &d1), 0);

                fill_on(s, a0, 0, 0xa0a0a0a0);
                fill_on(s, b1, 1, 0xb1b1b1b1);
                /* GPU 1 copies GPU 0's a0 into its d1; GPU 0 copies GPU 1's b1 into its c0: one batch. */
                cr_assert_eq(kfdb_batch_new(s, &batch), 0);
                cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
                cr_assert_eq(kfdb_batch_copy(batch, d1, 0, a0, 0, size), 0);
                cr_assert_eq(kfdb_batch_set_gpu(batch, KFDB_GPU_SESSION), 0);
                cr_assert_eq(kfdb_batch_copy(batch, c0, 0, b1, 0, size), 0);
                cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0, "%s: %s", what, kfdb_session_last_error(s));
                cr_expect_eq(fences[1], fences[0] + 1, "one sequence of fences");
                cr_assert_eq(kfdb_fence_wait(s, fences[1], 30000), 0, "%s: %s", what, kfdb_session_last_error(s));
                cr_assert_eq(kfdb_fence_wait(s, fences[0], 30000), 0, "%s: %s", what, kfdb_session_last_error(s));
                expect_words(d1, 0xa0a0a0a0, "GPU 0's buffer copied on GPU 1");
                expect_words(c0, 0xb1b1b1b1, "GPU 1's buffer copied on GPU 0");
                kfdb_batch_free(batch);

                /* A kernel on GPU 1 with GPU 1's buffer: x = x + x. */
                cr_assert_eq(kfdb_code_object_load_file(s, COMPUTE_KERNEL_DIR "/vector-add.hsaco", &add), 0, "%s",
                             kfdb_session_last_error(s));
                cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, count * 4, KFDB_PLACEMENT_GTT, 1, &x1), 0);
                cr_assert_eq(kfdb_buffer_map(x1, (void **) &px), 0);
                for (uint32_t i = 0; i < count; i++)
                        px[i] = (float) i;
                kfdb_arg args[] = { kfdb_arg_buffer(x1, 0), kfdb_arg_buffer(x1, 0), kfdb_arg_buffer(x1, 0),
                                    kfdb_arg_value(&count, 4) };
                cr_assert_eq(kfdb_batch_new(s, &batch), 0);
                cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
                cr_assert_eq(kfdb_batch_dispatch(batch, add, "vector_add", 1, &count, &block, args, 4), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s: %s", what, kfdb_session_last_error(s));
                cr_assert_eq(kfdb_fence_wait(s, fence, 60000), 0, "%s: %s", what, kfdb_session_last_error(s));
                for (uint32_t i = 0; i < count; i++)
                        cr_assert_eq(px[i], 2.0f * (float) i, "%s: element %u", what, i);
                kfdb_batch_free(batch);

                /* GPU 0 ran a fill and a copy, GPU 1 a fill, a copy and the dispatch. */
                gpus_now(watcher, after);
                cr_expect_eq(after[0].jobs_completed - before[0].jobs_completed, 2u, "%s", what);
                cr_expect_eq(after[1].jobs_completed - before[1].jobs_completed, 3u, "%s", what);
                cr_expect_eq(after[0].sessions, 2u, "%s: both sessions are on GPU 0", what);
                cr_expect_eq(after[1].sessions, 1u, "%s: the session uses GPU 1 too", what);
                /* b1, d1 and x1 (with worker processes, the code the kernel ran on GPU 1 too). */
                cr_expect_geq(after[1].gpu_buffers - before[1].gpu_buffers, 3u, "%s: %u -> %u", what,
                              before[1].gpu_buffers, after[1].gpu_buffers);
                cr_assert_eq(kfdb_gpu_contexts_get(s, &cs, list, 16), 0);
                /* The session dispatched on GPU 1 only: one client context, there. */
                unsigned clients = 0;
                for (size_t i = 0; i < cs.n && i < 16; i++)
                        clients += strcmp(list[i].kind, "device") != 0 && list[i].live;
                cr_expect_eq(clients, 1u, "%s: the session's GPU context on GPU 1", what);

                expect_gpu_time(&d, kfdb_session_get_id(s), what);

                /* The session ends: nothing of it stays on either GPU. */
                kfdb_code_object_free(add);
                kfdb_session_free(s);
                for (int i = 0; i < 400; i++) {
                        gpus_now(watcher, ended);
                        if (ended[0].gpu_buffers == before[0].gpu_buffers &&
                            ended[1].gpu_buffers == before[1].gpu_buffers && ended[1].sessions == 0)
                                break;
                        usleep(25 * 1000);
                }
                cr_expect_eq(ended[0].gpu_buffers, before[0].gpu_buffers, "%s", what);
                cr_expect_eq(ended[1].gpu_buffers, before[1].gpu_buffers, "%s", what);
                cr_expect_eq(ended[1].sessions, 0u, "%s", what);
                for (int i = 0; i < 400; i++) {
                        cr_assert_eq(kfdb_gpu_contexts_get(watcher, &cs, list, 16), 0);
                        clients = 0;
                        for (size_t k = 0; k < cs.n && k < 16; k++)
                                clients += strcmp(list[k].kind, "device") != 0 && list[k].live;
                        if (clients == 0)
                                break;
                        usleep(25 * 1000);
                }
                cr_expect_eq(clients, 0u, "%s: no client context is left up", what);
                /* Nor a file descriptor: the session's, its buffers', the imports' and its
                 * context's (a worker's connection) are all gone. */
                for (int i = 0; i < 400 && test_daemon_count_fds(&d) > fds; i++)
                        usleep(25 * 1000);
                cr_expect_leq(test_daemon_count_fds(&d), fds, "%s: the daemon holds more fds than before", what);
                kfdb_session_free(watcher);
                test_daemon_fini(&d);
        }
}

/* A GPU a buffer or a job names that the daemon lacks is ENODEV, with how
 * many it serves; a fill's or a dispatch's buffer of another GPU than the
 * job's is EINVAL naming both. */
Test(gpus_session, a_gpu_a_buffer_or_job_names_is_checked) {
        TestDaemon d;
        kfdb_session *s = NULL;
        kfdb_buffer *b = NULL, *on0 = NULL, *on1 = NULL;
        kfdb_batch *batch = NULL;
        kfdb_code_object *add = NULL;
        const uint32_t count = 64, block = 64;
        char want[200];
        int r;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new(d.sock, "checked", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, 4096, KFDB_PLACEMENT_GTT, 99, &b), -ENODEV);
        cr_expect_str_eq(kfdb_session_last_error(s),
                         "alloc_buffer.gpu: no GPU 99: this daemon serves 2 (indexes 0 to 1, kfdbrokerctl status)");
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &on0), 0);
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, count * 4, KFDB_PLACEMENT_GTT, 1, &on1), 0);

        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 99), 0);
        cr_assert_eq(kfdb_batch_copy(batch, on0, 0, on1, 0, 256), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, NULL), -ENODEV);
        cr_expect_str_eq(kfdb_session_last_error(s),
                         "submit.jobs[0].gpu: no GPU 99: this daemon serves 2 (indexes 0 to 1, kfdbrokerctl status)");
        kfdb_batch_reset(batch);

        /* A fill on GPU 1 of GPU 0's buffer: the library says so at once. */
        cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
        cr_assert_eq(kfdb_batch_fill(batch, on0, 0, 4096, 1), -EINVAL);
        cr_expect(strstr(kfdb_session_last_error(s), "fill: the buffer is on GPU 0 and the job runs on GPU 1"), "%s",
                  kfdb_session_last_error(s));
        /* A dispatch on GPU 0 naming GPU 1's buffer: the daemon does. */
        cr_assert_eq(kfdb_code_object_load_file(s, COMPUTE_KERNEL_DIR "/vector-add.hsaco", &add), 0, "%s",
                     kfdb_session_last_error(s));
        kfdb_arg args[] = { kfdb_arg_buffer(on1, 0), kfdb_arg_buffer(on1, 0), kfdb_arg_buffer(on1, 0),
                            kfdb_arg_value(&count, 4) };
        cr_assert_eq(kfdb_batch_set_gpu(batch, KFDB_GPU_SESSION), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, add, "vector_add", 1, &count, &block, args, 4), 0);
        r = kfdb_batch_submit(batch, NULL, NULL);
        cr_expect_eq(r, -EINVAL, "%d: %s", r, kfdb_session_last_error(s));
        snprintf(want, sizeof want,
                 "submit.jobs[0].dispatch.args[0].buffer.handle: buffer 0x%" PRIx64 " is on GPU 1 and the job runs on "
                 "GPU 0 (submit.jobs[0].gpu); only a copy takes a buffer of another GPU",
                 kfdb_buffer_get_handle(on1));
        cr_expect_str_eq(kfdb_session_last_error(s), want);
        kfdb_batch_reset(batch);
        /* The session goes on. */
        fill_on(s, on1, 1, 0x5a5a5a5a);
        expect_words(on1, 0x5a5a5a5a, "after the refusals");
        kfdb_batch_free(batch);
        kfdb_session_free(s);
        test_daemon_fini(&d);
}

/* Devices= confining a user to GPU 1 refuses a buffer or a job on GPU 0
 * naming the rule; a session that came through GPU 1's socket is refused
 * GPU 0 naming the socket. */
Test(gpus_session, devices_and_a_gpus_socket_keep_buffers_and_jobs_off_other_gpus) {
        TestDaemon d;
        kfdb_session *s = NULL, *pinned = NULL;
        kfdb_buffer *b = NULL, *mine = NULL;
        kfdb_batch *batch = NULL;
        char gpu1[200];

        test_daemon_start(&d, two_gpus);
        set_devices(&d, "1", 1);
        cr_assert_eq(kfdb_session_new(d.sock, "confined", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, 4096, KFDB_PLACEMENT_GTT, 0, &b), -EACCES);
        cr_expect(strstr(kfdb_session_last_error(s),
                         "alloc_buffer.gpu: GPU 0 is not one this session may use (policy Devices=1, from "),
                  "%s", kfdb_session_last_error(s));
        cr_expect(strstr(kfdb_session_last_error(s), "50-devices.conf"), "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, 4096, KFDB_PLACEMENT_GTT, 1, &mine), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 0), 0);
        cr_assert_eq(kfdb_batch_copy(batch, mine, 0, mine, 2048, 1024), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, NULL), -EACCES);
        cr_expect(strstr(kfdb_session_last_error(s),
                         "submit.jobs[0].gpu: GPU 0 is not one this session may use (policy Devices=1, from "),
                  "%s", kfdb_session_last_error(s));
        kfdb_batch_free(batch);
        kfdb_buffer_free(mine);
        kfdb_session_free(s);
        set_devices(&d, "all", 2);

        snprintf(gpu1, sizeof gpu1, "%s-gpu1", d.sock);
        cr_assert_eq(kfdb_session_new(gpu1, "through-gpu1", &pinned), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(pinned, 4096, KFDB_PLACEMENT_GTT, 0, &b), -EACCES);
        cr_expect_str_eq(kfdb_session_last_error(pinned),
                         "alloc_buffer.gpu: this connection came through GPU 1's socket, which serves GPU 1 only");
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(pinned, 4096, KFDB_PLACEMENT_GTT, 1, &b), 0, "%s",
                     kfdb_session_last_error(pinned));
        cr_expect_eq(kfdb_buffer_get_gpu(b), 1u);
        kfdb_session_free(pinned);
        test_daemon_fini(&d);
}

/* Before KFD 1.15 the kernel imports no other GPU's buffer: a copy across
 * GPUs is refused naming both GPUs and the version; copies on each GPU go on. */
Test(gpus_session, a_copy_across_gpus_before_kfd_1_15_is_refused_naming_both) {
        const char *extra[] = { "--sim-gpus=2", "--sim-kfd-version=1.11", NULL };
        TestDaemon d;
        kfdb_session *s = NULL;
        kfdb_buffer *on0 = NULL, *on1 = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fence = 0;
        int r;

        test_daemon_start(&d, extra);
        cr_assert_eq(kfdb_session_new(d.sock, "old-kernel", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &on0), 0);
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, 4096, KFDB_PLACEMENT_GTT, 1, &on1), 0, "%s",
                     kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, on0, 0, on1, 0, 4096), 0);
        /* Through the submit ring: the job fails with the reason. */
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        r = kfdb_fence_wait(s, fence, 30000);
        cr_expect_eq(r, -EINVAL, "%d: %s", r, kfdb_session_last_error(s));
        cr_expect(strstr(kfdb_session_last_error(s),
                         "submit.jobs[0].copy.src_handle: the buffer is on GPU 1 and the job runs on GPU 0: this "
                         "kernel's KFD 1.11 cannot import another GPU's buffer (KFD 1.15, Linux 6.8, can)"),
                  "%s", kfdb_session_last_error(s));
        /* As a Submit (a job naming its GPU), the submit fails. */
        kfdb_batch_reset(batch);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
        cr_assert_eq(kfdb_batch_copy(batch, on1, 0, on0, 0, 4096), 0);
        r = kfdb_batch_submit(batch, NULL, NULL);
        cr_expect_eq(r, -EINVAL, "%d: %s", r, kfdb_session_last_error(s));
        cr_expect_str_eq(kfdb_session_last_error(s),
                         "submit.jobs[0].copy.src_handle: the buffer is on GPU 0 and the job runs on GPU 1: this "
                         "kernel's KFD 1.11 cannot import another GPU's buffer (KFD 1.15, Linux 6.8, can)");
        kfdb_batch_free(batch);
        fill_on(s, on1, 1, 0x01010101);
        fill_on(s, on0, 0, 0x02020202);
        expect_words(on1, 0x01010101, "GPU 1");
        expect_words(on0, 0x02020202, "GPU 0");
        kfdb_session_free(s);
        test_daemon_fini(&d);
}

/* BufferMemory= holds on each GPU: a session full on GPU 0 still allocates
 * on GPU 1; UserBufferMemory= counts both GPUs together. */
Test(gpus_session, buffer_memory_holds_per_gpu_and_the_user_cap_counts_every_gpu) {
        TestDaemon d;
        kfdb_session *s = NULL;
        kfdb_buffer *a = NULL, *b = NULL, *c = NULL;
        const uint64_t MiB = 1024 * 1024;

        test_daemon_start(&d, two_gpus);
        test_daemon_set_limits(&d, "BufferMemory=1M\nUserBufferMemory=1536K", 1);
        cr_assert_eq(kfdb_session_new(d.sock, "per-gpu", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_buffer_alloc(s, MiB, KFDB_PLACEMENT_GTT, &a), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &b), -EDQUOT);
        cr_expect(strstr(kfdb_session_last_error(s),
                         "buffer memory limit (max_buffer_bytes 1048576, policy BufferMemory=) reached on GPU 0: "
                         "1048576 in use, 4096 requested"),
                  "%s", kfdb_session_last_error(s));
        /* GPU 1 has room under BufferMemory=, but not under UserBufferMemory=. */
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, MiB, KFDB_PLACEMENT_GTT, 1, &b), -EDQUOT);
        cr_expect(strstr(kfdb_session_last_error(s), "per-user buffer memory limit (policy UserBufferMemory="), "%s",
                  kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, 256 * 1024, KFDB_PLACEMENT_GTT, 1, &c), 0, "%s",
                     kfdb_session_last_error(s));
        cr_expect_eq(kfdb_buffer_get_gpu(c), 1u);
        kfdb_session_free(s);
        test_daemon_fini(&d);
}

/* An event signaled on GPU 1 releases a wait on GPU 0 of the same session:
 * the copy after the wait runs once the fill before the signal is done. */
Test(gpus_session, an_event_orders_jobs_on_two_gpus) {
        TestDaemon d;
        kfdb_session *s = NULL;
        kfdb_buffer *src1 = NULL, *dst0 = NULL;
        kfdb_event *e = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fences[4];
        const uint64_t size = 256 * 1024;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new(d.sock, "ordered", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, size, KFDB_PLACEMENT_VRAM, 1, &src1), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_GTT, &dst0), 0);
        cr_assert_eq(kfdb_event_create(s, true, &e), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        /* Wait first on GPU 0, so its stream holds the copy until GPU 1 signals. */
        cr_assert_eq(kfdb_batch_wait_event_on(batch, e, KFDB_ENGINE_SDMA), 0);
        cr_assert_eq(kfdb_batch_copy(batch, dst0, 0, src1, 0, size), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
        cr_assert_eq(kfdb_batch_fill(batch, src1, 0, size, 0x77777777), 0);
        cr_assert_eq(kfdb_batch_signal_event_on(batch, e, KFDB_ENGINE_SDMA), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fences[1], 30000), 0, "%s", kfdb_session_last_error(s));
        expect_words(dst0, 0x77777777, "copied after GPU 1's fill");
        kfdb_batch_free(batch);
        kfdb_session_free(s);
        test_daemon_fini(&d);
}

/* A kernel on GPU 0 waits for a signal of GPU 1: GPU 1 fills its buffer
 * with 1.0f and copies it into GPU 0's, signals; GPU 0's compute stream
 * waits, then doubles what arrived. Nothing of GPU 1 is polled by GPU 0
 * (scheduler.c job_prepare()): the wait is released when the signal is done. */
static void kernel_waits_for_the_other_gpu(const char *version) {
        const char *extra[] = { "--sim-gpus=2", version, NULL };
        const char *what = version ? version : "secondary contexts";
        TestDaemon d;
        kfdb_session *s = NULL;
        kfdb_buffer *src1 = NULL, *x0 = NULL;
        kfdb_code_object *add = NULL;
        kfdb_event *e = NULL;
        kfdb_batch *batch = NULL;
        const uint32_t count = 16384, block = 64;
        uint64_t fence = 0;
        float *px;

        test_daemon_start(&d, extra);
        cr_assert_eq(kfdb_session_new(d.sock, "kernel-waits", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_code_object_load_file(s, COMPUTE_KERNEL_DIR "/vector-add.hsaco", &add), 0, "%s",
                     kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, count * 4, KFDB_PLACEMENT_VRAM, 1, &src1), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, count * 4, KFDB_PLACEMENT_GTT, &x0), 0);
        cr_assert_eq(kfdb_buffer_map(x0, (void **) &px), 0);
        memset(px, 0, count * 4);
        cr_assert_eq(kfdb_event_create(s, true, &e), 0);
        kfdb_arg args[] = { kfdb_arg_buffer(x0, 0), kfdb_arg_buffer(x0, 0), kfdb_arg_buffer(x0, 0),
                            kfdb_arg_value(&count, 4) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
        cr_assert_eq(kfdb_batch_fill(batch, src1, 0, count * 4, 0x3f800000), 0);
        cr_assert_eq(kfdb_batch_copy(batch, x0, 0, src1, 0, count * 4), 0);
        cr_assert_eq(kfdb_batch_signal_event_on(batch, e, KFDB_ENGINE_SDMA), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, KFDB_GPU_SESSION), 0);
        cr_assert_eq(kfdb_batch_wait_event_on(batch, e, KFDB_ENGINE_COMPUTE), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, add, "vector_add", 1, &count, &block, args, 4), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 60000), 0, "%s: %s", what, kfdb_session_last_error(s));
        for (uint32_t i = 0; i < count; i++)
                cr_assert_eq(px[i], 2.0f, "%s: element %u is %g", what, i, (double) px[i]);
        kfdb_batch_free(batch);
        kfdb_session_free(s);
        test_daemon_fini(&d);
}

Test(gpus_session, a_kernel_waits_for_a_signal_of_the_other_gpu) {
        kernel_waits_for_the_other_gpu(NULL);
        /* Its context a worker process (KFD 1.18). */
        kernel_waits_for_the_other_gpu("--sim-kfd-version=1.18");
}

/* GPUs that differ (a gfx1030 and an integrated gfx1036): a code object the
 * session loaded for its gfx1030 does not run on the gfx1036, said with
 * both; fills and copies between them work. */
Test(gpus_session, a_kernel_of_one_target_is_refused_on_a_gpu_of_another) {
        const char *extra[] = { "--sim-topology=igpu-first", "--gpu=all", NULL };
        TestDaemon d;
        kfdb_session *s = NULL;
        kfdb_code_object *add = NULL;
        kfdb_buffer *x1 = NULL, *y0 = NULL;
        kfdb_batch *batch = NULL;
        const uint32_t count = 1024, block = 64; /* 4096 bytes: a whole buffer */
        char want[256];
        uint64_t fence = 0;
        int r;

        test_daemon_start(&d, extra);
        cr_assert_eq(kfdb_session_new(d.sock, "two-targets", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_code_object_load_file(s, COMPUTE_KERNEL_DIR "/vector-add.hsaco", &add), 0, "%s",
                     kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, count * 4, KFDB_PLACEMENT_GTT, 1, &x1), 0, "%s",
                     kfdb_session_last_error(s));
        kfdb_arg args[] = { kfdb_arg_buffer(x1, 0), kfdb_arg_buffer(x1, 0), kfdb_arg_buffer(x1, 0),
                            kfdb_arg_value(&count, 4) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, 1), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, add, "vector_add", 1, &count, &block, args, 4), 0);
        r = kfdb_batch_submit(batch, NULL, NULL);
        cr_expect_eq(r, -EXDEV, "%d: %s", r, kfdb_session_last_error(s));
        snprintf(want, sizeof want,
                 "submit.jobs[0].dispatch.code_object: code object 0x%" PRIx64 " was loaded for the session's GPU 0 "
                 "(gfx1030); the job runs on GPU 1 (gfx1036)",
                 kfdb_code_object_get_handle(add));
        cr_expect_str_eq(kfdb_session_last_error(s), want);
        kfdb_batch_reset(batch);

        fill_on(s, x1, 1, 0x36363636);
        cr_assert_eq(kfdb_buffer_alloc(s, count * 4, KFDB_PLACEMENT_VRAM, &y0), 0);
        cr_assert_eq(kfdb_batch_set_gpu(batch, KFDB_GPU_SESSION), 0);
        cr_assert_eq(kfdb_batch_copy(batch, y0, 0, x1, 0, count * 4), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 30000), 0, "%s", kfdb_session_last_error(s));
        expect_words(y0, 0x36363636, "the gfx1036's buffer copied on the gfx1030");
        kfdb_batch_free(batch);
        kfdb_session_free(s);
        test_daemon_fini(&d);
}

/* A reload that takes away a GPU the session holds buffers on ends it,
 * naming that GPU, though its own GPU is still allowed. */
Test(gpus_session, a_reload_taking_a_used_gpu_away_ends_the_session) {
        TestDaemon d;
        kfdb_session *s = NULL, *other = NULL;
        kfdb_buffer *b = NULL, *c = NULL;
        int r;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new(d.sock, "uses-gpu1", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_session_new(d.sock, "gpu0-only", &other), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_session_get_gpu(s), 0u);
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(s, 4096, KFDB_PLACEMENT_GTT, 1, &b), 0);
        set_devices(&d, "0", 1);
        kfdb_session_set_reconnect_timeout(s, 0);
        r = kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &c);
        cr_expect_eq(r, -ECONNRESET, "%d", r);
        cr_expect(strstr(kfdb_session_last_error(s), "the policy no longer lets this session use GPU 1 (Devices=0)"),
                  "%s", kfdb_session_last_error(s));
        /* A session that never used GPU 1 goes on. */
        cr_assert_eq(kfdb_buffer_alloc(other, 4096, KFDB_PLACEMENT_GTT, &c), 0, "%s", kfdb_session_last_error(other));
        kfdb_session_free(s);
        kfdb_session_free(other);
        test_daemon_fini(&d);
}

/* What a client other than libkfdbroker sends: the daemon itself refuses a
 * fill of another GPU's buffer naming the field and both GPUs, answers an
 * AllocBuffer with the buffer's GPU, and an old client's requests (no GPU
 * named) are on the session's GPU. */
Test(gpus_session, the_daemon_checks_a_raw_clients_gpus) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__GpuRef one = KFDBROKER__V1__GPU_REF__INIT;
        Kfdbroker__V1__SubmitRequest sub = KFDBROKER__V1__SUBMIT_REQUEST__INIT;
        Kfdbroker__V1__Job job = KFDBROKER__V1__JOB__INIT, *jobs[1] = { &job };
        Kfdbroker__V1__FillJob fill = KFDBROKER__V1__FILL_JOB__INIT;
        Kfdbroker__V1__ServerMessage *m;
        TestDaemon d;
        int fds[1], fd;
        unsigned n = 1;
        uint64_t on1, on0;
        char want[256];

        test_daemon_start(&d, two_gpus);
        fd = raw_connect(&d);
        cr_assert_geq(fd, 0);
        raw_hello(fd);
        one.index = 1;
        a.size = 4096;
        a.gpu = &one;
        req.id = 10;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        req.alloc_buffer = &a;
        m = raw_call(fd, &req, NULL, 0, fds, &n);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        cr_expect_eq(m->alloc_buffer->gpu, 1u);
        on1 = m->alloc_buffer->handle;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fds[0]);
        on0 = raw_alloc(fd, 4096, NULL);

        fill.dst_handle = on1;
        fill.size = 4096;
        job.kind_case = KFDBROKER__V1__JOB__KIND_FILL;
        job.fill = &fill;
        sub.n_jobs = 1;
        sub.jobs = jobs;
        req = (Kfdbroker__V1__Request) KFDBROKER__V1__REQUEST__INIT;
        req.id = 11;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        req.submit = &sub;
        n = 0;
        m = raw_call(fd, &req, NULL, 0, NULL, &n);
        cr_expect_eq(m->error, EINVAL, "%d: %s", m->error, m->error_message);
        snprintf(want, sizeof want,
                 "submit.jobs[0].fill.dst_handle: buffer 0x%" PRIx64 " is on GPU 1 and the job runs on GPU 0 "
                 "(submit.jobs[0].gpu); only a copy takes a buffer of another GPU",
                 on1);
        cr_expect_str_eq(m->error_message, want);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        /* The same fill on GPU 1, and an old client's fill of GPU 0's buffer. */
        job.gpu = &one;
        req.id = 12;
        m = raw_call(fd, &req, NULL, 0, NULL, &n);
        cr_expect_eq(m->error, 0, "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        job.gpu = NULL;
        fill.dst_handle = on0;
        req.id = 13;
        m = raw_call(fd, &req, NULL, 0, NULL, &n);
        cr_expect_eq(m->error, 0, "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);
        test_daemon_fini(&d);
}
