/* SPDX-License-Identifier: MIT */
/*
 * Several GPUs in one daemon (issue 33): every GPU chosen is served with its
 * own device context, client contexts and scheduler; a session is on one
 * GPU, the first it may use or the one it names (kfdb_session_new_on_gpu(),
 * $KFDBROKER_GPU, HelloRequest.gpu); status, the metrics and D-Bus list every
 * GPU by index. Most tests run on a simulated machine of two gfx1030s
 * (--sim-gpus=2); some on a gfx1030 beside an integrated gfx1036 listed first
 * (--sim-topology=igpu-first --gpu=all serves both, the discrete one as
 * GPU 0), where the GPUs differ.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

static const char *const two_gpus[] = { "--sim-gpus=2", NULL };
static const char *const igpu_and_dgpu[] = { "--sim-topology=igpu-first", "--gpu=all", NULL };

/* Fills size bytes of a new buffer with value on the session's GPU and checks them. */
static void fill_and_check(kfdb_session *s, uint32_t value) {
        const uint64_t size = 1 << 20;
        kfdb_buffer *b = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fence = 0;
        uint32_t *p = NULL;

        cr_assert_eq(kfdb_buffer_alloc(s, size, KFDB_PLACEMENT_VRAM, &b), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, size, value), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, 30000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_map(b, (void **) &p), 0);
        for (unsigned i = 0; i < size / 4; i++)
                cr_assert_eq(p[i], value, "word %u", i);
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_buffer_free(b), 0);
}

Test(gpus, each_session_works_on_its_own_gpu_and_status_counts_them_apart) {
        TestDaemon d;
        kfdb_session *a = NULL, *b = NULL;
        kfdb_gpu gpus[4];
        size_t n = 0;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new(d.sock, "on-first", &a), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "on-second", 1, &b), 0, "%s", kfdb_session_last_error(NULL));
        cr_expect_eq(kfdb_session_get_gpu(a), 0u);
        cr_expect_eq(kfdb_session_get_gpu(b), 1u);

        fill_and_check(a, 0xa0a0a0a0);
        fill_and_check(b, 0xb1b1b1b1);
        fill_and_check(b, 0xb2b2b2b2);

        cr_assert_eq(kfdb_gpus_get(a, gpus, 4, &n), 0);
        cr_assert_eq(n, 2u);
        cr_expect_eq(gpus[0].index, 0u);
        cr_expect_str_eq(gpus[0].gfx_name, "gfx1030");
        cr_expect_str_eq(gpus[1].gfx_name, "gfx1030");
        cr_expect_neq(gpus[0].gpu_id, gpus[1].gpu_id);
        cr_expect_eq(gpus[0].sessions, 1u);
        cr_expect_eq(gpus[1].sessions, 1u);
        /* Each GPU's scheduler counts its own jobs: one fill, two fills. */
        cr_expect_eq(gpus[0].jobs_completed, 1u, "%lu", (unsigned long) gpus[0].jobs_completed);
        cr_expect_eq(gpus[1].jobs_completed, 2u, "%lu", (unsigned long) gpus[1].jobs_completed);
        cr_expect(strstr(gpus[1].node, "node 2 (gfx1030, 0000:04:00.0, renderD129, "), "%s", gpus[1].node);
        cr_expect_str_eq(gpus[1].node_reason, "every GPU (2 discrete)");

        kfdb_session_free(a);
        kfdb_session_free(b);
        test_daemon_fini(&d);
}

Test(gpus, a_gpu_the_daemon_does_not_serve_is_named) {
        TestDaemon d;
        kfdb_session *s = NULL;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "too-far", 2, &s), -ENODEV);
        cr_expect_str_eq(kfdb_session_last_error(NULL),
                         "hello.gpu: no GPU 2: this daemon serves 2 (indexes 0 to 1, kfdbrokerctl status)");

        setenv("KFDBROKER_GPU", "one", 1);
        cr_assert_eq(kfdb_session_new(d.sock, "bad-env", &s), -EINVAL);
        cr_expect_str_eq(kfdb_session_last_error(NULL),
                         "KFDBROKER_GPU=one: not a GPU index (0, 1, ... as kfdbrokerctl status lists them)");
        setenv("KFDBROKER_GPU", "1", 1);
        cr_assert_eq(kfdb_session_new(d.sock, "env", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_expect_eq(kfdb_session_get_gpu(s), 1u);
        fill_and_check(s, 0x1e1e1e1e);
        kfdb_session_free(s);
        unsetenv("KFDBROKER_GPU");

        /* The daemon is unharmed: a session on the first GPU works. */
        cr_assert_eq(kfdb_session_new(d.sock, "after", &s), 0, "%s", kfdb_session_last_error(NULL));
        fill_and_check(s, 0x600d600d);
        kfdb_session_free(s);
        test_daemon_fini(&d);
}

/* One client using both GPUs: a session on each, a buffer of the first
 * handed to the second as a dma-buf and copied there. */
Test(gpus, a_buffer_of_one_gpu_is_copied_on_the_other) {
        const uint64_t size = 256 << 10;
        TestDaemon d;
        kfdb_session *a = NULL, *b = NULL;
        kfdb_buffer *src = NULL, *imported = NULL, *dst = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fence = 0;
        uint32_t *p = NULL;
        int fd = -1;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new(d.sock, "first", &a), 0);
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "second", 1, &b), 0);
        cr_assert_eq(kfdb_buffer_alloc(a, size, KFDB_PLACEMENT_GTT, &src), 0);
        cr_assert_eq(kfdb_buffer_map(src, (void **) &p), 0);
        for (unsigned i = 0; i < size / 4; i++)
                p[i] = i * 2654435761u;
        cr_assert_eq(kfdb_buffer_export(src, &fd), 0);
        cr_assert_eq(kfdb_buffer_import(b, fd, &imported), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(kfdb_buffer_alloc(b, size, KFDB_PLACEMENT_VRAM, &dst), 0);
        cr_assert_eq(kfdb_batch_new(b, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, dst, 0, imported, 0, size), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(kfdb_fence_wait(b, fence, 30000), 0, "%s", kfdb_session_last_error(b));
        cr_assert_eq(kfdb_buffer_map(dst, (void **) &p), 0);
        for (unsigned i = 0; i < size / 4; i++)
                cr_assert_eq(p[i], i * 2654435761u, "word %u", i);
        close(fd);
        kfdb_batch_free(batch);
        kfdb_buffer_free(dst);
        kfdb_buffer_free(imported);
        kfdb_buffer_free(src);
        kfdb_session_free(b);
        kfdb_session_free(a);
        test_daemon_fini(&d);
}

Test(gpus, status_and_metrics_list_every_gpu) {
        TestDaemon d;
        char metrics_arg[200], path[160];
        /* The integrated GPU beside the discrete one: GPUs that differ. */
        const char *extra[] = { "--sim-topology=igpu-first", "--gpu=all", metrics_arg, "--metrics-interval=1", NULL };
        const char *status[] = { "--socket", NULL, "status", NULL };
        char *out = NULL, *err = NULL;

        snprintf(path, sizeof path, "/tmp/kfdbroker-test-gpus-%d.prom", (int) getpid());
        snprintf(metrics_arg, sizeof metrics_arg, "--metrics-file=%s", path);
        test_daemon_start(&d, extra);
        status[1] = d.sock;
        cr_assert_eq(test_run_ctl(status, false, &out, &err), 0, "%s", err);
        cr_expect(strstr(out, "gpu 0:    node 2 (gfx1030, 0000:03:00.0, renderD129, discrete, 1 GiB local memory): every "
                              "GPU node (--gpu=all); 1 session, "),
                  "%s", out);
        cr_expect(strstr(out, "gpu 1:    node 1 (gfx1036, 0000:10:00.0, renderD128, integrated, 512 MiB local memory)"),
                  "%s", out);
        cr_expect(strstr(out, "0 of at most 64 client contexts up"), "two device contexts are not clients:\n%s", out);
        free(out);
        free(err);
        /* Written at start, then every second. */
        for (int i = 0; i < 100 && access(path, F_OK) < 0; i++)
                usleep(50 * 1000);
        out = test_read_file(path);
        cr_assert(out, "no metrics file at %s", path);
        cr_expect(strstr(out, "kfdbroker_gpu_info{gpu=\"0\",gfx=\"gfx1030\",gpu_id=\"0x697d\"} 1\n"), "%s", out);
        cr_expect(strstr(out, "kfdbroker_gpu_info{gpu=\"1\",gfx=\"gfx1036\",gpu_id=\"0x5a0b\"} 1\n"), "%s", out);
        cr_expect(strstr(out, "kfdbroker_jobs_in_flight{gpu=\"1\"} 0\n"), "%s", out);
        cr_expect(strstr(out, "kfdbroker_gpu_jobs_total{gpu=\"1\",result=\"completed\"} 0\n"), "%s", out);
        cr_expect(strstr(out, ",kind=\"device\",gpu=\"1\"}"), "%s", out);
        free(out);
        unlink(path);
        test_daemon_fini(&d);
}

/* Devices= for this uid (test_daemon_set_limits()). */
static void set_devices(const TestDaemon *d, const char *devices, unsigned count) {
        char line[128];

        snprintf(line, sizeof line, "Devices=%s", devices);
        test_daemon_set_limits(d, line, count);
}

/* A policy confining a user to GPU 1: its sessions go there by default, one
 * that asks for GPU 0 is refused naming the rule, and a reload that takes
 * GPU 1 away ends the session that is on it. */
Test(gpus, devices_confines_a_user_to_its_gpus) {
        TestDaemon d;
        kfdb_session *s = NULL, *other = NULL;
        kfdb_buffer *b = NULL;

        test_daemon_start(&d, two_gpus);
        set_devices(&d, "1", 1);

        cr_assert_eq(kfdb_session_new(d.sock, "confined", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_expect_eq(kfdb_session_get_gpu(s), 1u, "the first GPU it may use");
        fill_and_check(s, 0xc0c0c0c0);

        {
                /* kfdbrokerctl cdi, asked by this user, lists the GPU it may use. */
                const char *cdi[] = { "--socket", d.sock, "cdi", NULL };
                char *out = NULL, *err = NULL;

                cr_assert_eq(test_run_ctl(cdi, false, &out, &err), 0, "%s", err);
                cr_expect(strstr(out, "\"name\": \"1\"") && !strstr(out, "\"name\": \"0\""), "%s", out);
                free(out);
                free(err);
        }
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "not-there", 0, &other), -EACCES);
        cr_expect(strstr(kfdb_session_last_error(NULL),
                         "hello.gpu: GPU 0 is not one this session may use (policy Devices=1, from "),
                  "%s", kfdb_session_last_error(NULL));
        cr_expect(strstr(kfdb_session_last_error(NULL), "50-devices.conf"), "%s", kfdb_session_last_error(NULL));

        /* By PCI address: GPU 1 is at 0000:04:00.0. */
        set_devices(&d, "0000:04:00.0", 2);
        cr_assert_eq(kfdb_session_new(d.sock, "by-pci", &other), 0, "%s", kfdb_session_last_error(NULL));
        cr_expect_eq(kfdb_session_get_gpu(other), 1u);
        kfdb_session_free(other);

        /* GPU 1 taken away: the session on it ends, saying why. */
        set_devices(&d, "0", 3);
        kfdb_session_set_reconnect_timeout(s, 0);
        int r = kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &b);
        cr_expect_eq(r, -ECONNRESET, "%d", r);
        cr_expect(strstr(kfdb_session_last_error(s), "the policy no longer lets this session use GPU 1 (Devices=0)"),
                  "%s", kfdb_session_last_error(s));
        kfdb_session_free(s);

        /* Devices= naming no GPU served: Hello says so. */
        set_devices(&d, "5", 4);
        cr_assert_eq(kfdb_session_new(d.sock, "nowhere", &s), -EACCES);
        cr_expect(strstr(kfdb_session_last_error(NULL), "no GPU this session may use: policy Devices=5 (from "),
                  "%s", kfdb_session_last_error(NULL));
        cr_expect(strstr(kfdb_session_last_error(NULL), "names none of the 2 GPUs this daemon serves"), "%s",
                  kfdb_session_last_error(NULL));
        test_daemon_fini(&d);
}

/* kfdbrokerctl selftest on one GPU, and on each. */
Test(gpus, selftest_runs_on_a_chosen_gpu_and_on_every_gpu) {
        TestDaemon d;
        const char *one[] = { "--socket", NULL, "selftest", "--gpu=1", "--timeout-wait=100", NULL };
        const char *all[] = { "--socket", NULL, "--json", "selftest", "--all", "--timeout-wait=100", NULL };
        const char *bad[] = { "--socket", NULL, "selftest", "--gpu=2", NULL };
        char *out = NULL, *err = NULL;

        test_daemon_start(&d, igpu_and_dgpu);
        one[1] = all[1] = bad[1] = d.sock;
        cr_assert_eq(test_run_ctl(one, false, &out, &err), 0, "%s%s", out, err);
        cr_expect(strstr(out, "selftest of kfdbrokerd "), "%s", out);
        cr_expect(strstr(out, " on gfx1036 "), "%s", out);
        cr_expect(strstr(out, "skip  dispatch             0.0 ms  the kernels built in are for gfx1030; this GPU is "
                              "gfx1036\n"),
                  "%s", out);
        free(out);
        free(err);

        cr_assert_eq(test_run_ctl(all, false, &out, &err), 0, "%s%s", out, err);
        cr_expect_eq(out[0], '[', "%s", out);
        /* Two suites, the first on the gfx1030, each with its device. */
        const char *first = strstr(out, "\"gfx_name\":\"gfx1030\"");
        const char *second = strstr(out, "\"gfx_name\":\"gfx1036\"");
        cr_expect(first && second && first < second, "%s", out);
        free(out);
        free(err);

        cr_expect_eq(test_run_ctl(bad, false, &out, &err), 1, "%s%s", out, err);
        cr_expect(strstr(err, "hello.gpu: no GPU 2: this daemon serves 2"), "%s", err);
        free(out);
        free(err);
        test_daemon_fini(&d);
}

/* A socket per GPU: its sessions may use that GPU only, and the CDI spec
 * gives a container one of them (kfdbroker.org/gpu=N). */
Test(gpus, a_gpus_socket_serves_that_gpu_only_and_the_cdi_spec_lists_each) {
        TestDaemon d;
        char gpu0[200], gpu1[200], want[300];
        const char *cdi[] = { "--socket", NULL, "cdi", NULL };
        kfdb_session *s = NULL;
        char *out = NULL, *err = NULL;

        test_daemon_start(&d, two_gpus);
        snprintf(gpu0, sizeof gpu0, "%s-gpu0", d.sock);
        snprintf(gpu1, sizeof gpu1, "%s-gpu1", d.sock);
        cr_assert_eq(kfdb_session_new(gpu1, "through-gpu1", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_expect_eq(kfdb_session_get_gpu(s), 1u);
        fill_and_check(s, 0x11111111);
        kfdb_session_free(s);
        cr_assert_eq(kfdb_session_new_on_gpu(gpu1, "wants-gpu0", 0, &s), -EACCES);
        cr_expect_str_eq(kfdb_session_last_error(NULL),
                         "hello.gpu: this connection came through GPU 1's socket, which serves GPU 1 only");
        cr_assert_eq(kfdb_session_new(gpu0, "through-gpu0", &s), 0, "%s", kfdb_session_last_error(NULL));
        cr_expect_eq(kfdb_session_get_gpu(s), 0u);
        kfdb_session_free(s);

        cdi[1] = d.sock;
        cr_assert_eq(test_run_ctl(cdi, false, &out, &err), 0, "%s", err);
        cr_expect(strstr(out, "\"name\": \"all\""), "%s", out);
        cr_expect(strstr(out, "\"name\": \"0\""), "%s", out);
        cr_expect(strstr(out, "\"name\": \"1\""), "%s", out);
        cr_expect(!strstr(out, "\"name\": \"2\""), "the daemon said two GPUs:\n%s", out);
        snprintf(want, sizeof want, "\"hostPath\": \"%s\"", gpu1);
        cr_expect(strstr(out, want), "%s", out);
        free(out);
        free(err);
        test_daemon_fini(&d);

        /* The daemon gone, its files too: an empty list of GPU sockets. */
        cr_expect_eq(access(gpu1, F_OK), -1, "the GPU sockets go with the daemon");
}

/* A client's fault on GPU 0 loses its own GPU context only: a client on
 * GPU 1 dispatching before, during and after goes on, and GPU 1's contexts
 * count no loss. */
Test(gpus, a_fault_on_gpu_0_leaves_gpu_1s_clients_running) {
        TestDaemon d;
        kfdb_session *faulter = NULL, *bystander = NULL;
        kfdb_code_object *fault = NULL, *add = NULL;
        kfdb_buffer *fb = NULL, *a = NULL, *b = NULL, *c = NULL;
        kfdb_batch *fbatch = NULL;
        kfdb_gpu_contexts cs;
        kfdb_gpu_context list[16];
        uint64_t off = 1ull << 38, ffence = 0;
        const uint32_t n = 4096, one = 1, block = 64;
        float *pa, *pb, *pc;
        uint32_t *pf;
        int r;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "faulter", 0, &faulter), 0);
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "bystander", 1, &bystander), 0);
        cr_assert_eq(kfdb_code_object_load_file(faulter, COMPUTE_KERNEL_DIR "/fault.hsaco", &fault), 0, "%s",
                     kfdb_session_last_error(faulter));
        cr_assert_eq(kfdb_code_object_load_file(bystander, COMPUTE_KERNEL_DIR "/vector-add.hsaco", &add), 0, "%s",
                     kfdb_session_last_error(bystander));
        cr_assert_eq(kfdb_buffer_alloc(faulter, 4096, KFDB_PLACEMENT_GTT, &fb), 0);
        cr_assert_eq(kfdb_buffer_map(fb, (void **) &pf), 0);
        cr_assert_eq(kfdb_buffer_alloc(bystander, n * 4, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(bystander, n * 4, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_buffer_alloc(bystander, n * 4, KFDB_PLACEMENT_GTT, &c), 0);
        cr_assert_eq(kfdb_buffer_map(a, (void **) &pa), 0);
        cr_assert_eq(kfdb_buffer_map(b, (void **) &pb), 0);
        cr_assert_eq(kfdb_buffer_map(c, (void **) &pc), 0);

        for (int round = 0; round < 3; round++) {
                kfdb_batch *batch = NULL;
                uint64_t fence = 0;
                kfdb_arg args[] = { kfdb_arg_buffer(a, 0), kfdb_arg_buffer(b, 0), kfdb_arg_buffer(c, 0),
                                    kfdb_arg_value(&n, 4) };

                for (uint32_t i = 0; i < n; i++) {
                        pa[i] = (float) (i + round);
                        pb[i] = 2.0f * (float) i;
                        pc[i] = -1.0f;
                }
                cr_assert_eq(kfdb_batch_new(bystander, &batch), 0);
                cr_assert_eq(kfdb_batch_dispatch(batch, add, "vector_add", 1, &n, &block, args, 4), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(bystander));
                if (round == 1) {
                        /* GPU 0's client faults while GPU 1's dispatch is in flight. */
                        kfdb_arg fargs[] = { kfdb_arg_buffer(fb, 0), kfdb_arg_value(&off, 8) };
                        cr_assert_eq(kfdb_batch_new(faulter, &fbatch), 0);
                        cr_assert_eq(kfdb_batch_dispatch(fbatch, fault, "fault", 1, &one, &one, fargs, 2), 0);
                        cr_assert_eq(kfdb_batch_submit(fbatch, NULL, &ffence), 0, "%s", kfdb_session_last_error(faulter));
                        r = kfdb_fence_wait(faulter, ffence, 60000);
                        cr_expect_eq(r, -EFAULT, "%d: %s", r, kfdb_session_last_error(faulter));
                }
                cr_assert_eq(kfdb_fence_wait(bystander, fence, 60000), 0, "round %d: %s", round,
                             kfdb_session_last_error(bystander));
                for (uint32_t i = 0; i < n; i++)
                        cr_assert_eq(pc[i], (float) (i + round) + 2.0f * (float) i, "round %d, element %u", round, i);
                kfdb_batch_free(batch);
        }
        cr_expect_geq(kfdb_session_get_context_lost(faulter), 1u);
        cr_expect_eq(kfdb_session_get_context_lost(bystander), 0u);
        /* The losses are GPU 0's: GPU 1's contexts (its device context, the bystander's) count none. */
        cr_assert_eq(kfdb_gpu_contexts_get(bystander, &cs, list, 16), 0);
        unsigned lost = 0;
        for (size_t i = 0; i < cs.n && i < 16; i++)
                lost += list[i].losses;
        cr_expect_eq(lost, 1u, "one context lost, the faulter's");

        kfdb_batch_free(fbatch);
        kfdb_session_free(faulter);
        kfdb_session_free(bystander);
        test_daemon_fini(&d);
}

/* A kernel without secondary KFD contexts (KFD 1.18, 1.11: today's): the
 * second GPU's device context shares the daemon's KFD process, its event
 * page mapped into that GPU's VM; clients' contexts are worker processes. */
Test(gpus, a_kernel_without_secondary_contexts_serves_both_gpus) {
        static const char *const versions[] = { "--sim-kfd-version=1.18", "--sim-kfd-version=1.11" };

        for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
                const char *extra[] = { "--sim-gpus=2", versions[v], NULL };
                TestDaemon d;
                kfdb_session *s0 = NULL, *s1 = NULL;
                kfdb_code_object *add = NULL;
                kfdb_buffer *a = NULL;
                kfdb_batch *batch = NULL;
                kfdb_gpu gpus[4];
                size_t n = 0;
                uint64_t fence = 0;
                const uint32_t count = 256, block = 64;
                float *pa;
                char *log;

                test_daemon_start(&d, extra);
                log = test_daemon_read_log(&d);
                cr_expect(strstr(log, "notice: GPU 1: its device context shares the daemon's KFD process with GPU 0's"),
                          "%s: %s", versions[v], log);
                free(log);
                cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "gpu0", 0, &s0), 0, "%s", kfdb_session_last_error(NULL));
                cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "gpu1", 1, &s1), 0, "%s", kfdb_session_last_error(NULL));
                fill_and_check(s0, 0x0a0a0a0a);
                fill_and_check(s1, 0x1b1b1b1b);
                cr_assert_eq(kfdb_gpus_get(s1, gpus, 4, &n), 0);
                cr_expect_eq(n, 2u, "%s", versions[v]);

                /* A kernel on GPU 1, in a worker's context: c = a + a. */
                cr_assert_eq(kfdb_code_object_load_file(s1, COMPUTE_KERNEL_DIR "/vector-add.hsaco", &add), 0, "%s",
                             kfdb_session_last_error(s1));
                cr_assert_eq(kfdb_buffer_alloc(s1, count * 4, KFDB_PLACEMENT_GTT, &a), 0);
                cr_assert_eq(kfdb_buffer_map(a, (void **) &pa), 0);
                for (uint32_t i = 0; i < count; i++)
                        pa[i] = (float) i;
                kfdb_arg args[] = { kfdb_arg_buffer(a, 0), kfdb_arg_buffer(a, 0), kfdb_arg_buffer(a, 0),
                                    kfdb_arg_value(&count, 4) };
                cr_assert_eq(kfdb_batch_new(s1, &batch), 0);
                cr_assert_eq(kfdb_batch_dispatch(batch, add, "vector_add", 1, &count, &block, args, 4), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s1));
                cr_assert_eq(kfdb_fence_wait(s1, fence, 60000), 0, "%s: %s", versions[v], kfdb_session_last_error(s1));
                for (uint32_t i = 0; i < count; i++)
                        cr_assert_eq(pa[i], 2.0f * (float) i, "%s: element %u", versions[v], i);
                kfdb_batch_free(batch);
                kfdb_session_free(s0);
                kfdb_session_free(s1);
                test_daemon_fini(&d);
        }
}

/* Whether pid, a child of ours, has exited (a zombie, not yet reaped). */
static bool exited(pid_t pid) {
        char path[64], buf[256], *p;
        FILE *f;
        bool z = false;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return true;
        if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')))
                z = p[1] == ' ' && p[2] == 'Z';
        fclose(f);
        return z;
}

/* Resets simulated GPU index of the daemon (kfdbrokerd.8, SIGUSR2 with a value). */
static void reset_gpu(const TestDaemon *d, unsigned index) {
        cr_assert_eq(sigqueue(d->pid, SIGUSR2, (union sigval) { .sival_int = (int) index + 1 }), 0);
}

static bool log_has(const TestDaemon *d, const char *text, int timeout_ms) {
        for (int waited = 0;; waited += 10) {
                char *log = test_daemon_read_log(d);
                bool found = strstr(log, text) != NULL;
                free(log);
                if (found || waited >= timeout_ms)
                        return found;
                usleep(10 * 1000);
        }
}

/* A reset of GPU 1 (secondary device contexts, KFD 1.19): GPU 1 is brought
 * back inside the running daemon — its session ends and comes back through
 * libkfdbroker's reconnect, and works — while GPU 0's session never notices
 * (before, the daemon exited and every session had to reconnect). */
Test(gpus, a_reset_gpu_is_brought_back_while_the_other_goes_on) {
        TestDaemon d;
        kfdb_session *s0 = NULL, *s1 = NULL, *both = NULL;
        kfdb_buffer *on1 = NULL;
        kfdb_gpu gpus[4];
        size_t n = 0;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "gpu0", 0, &s0), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "gpu1", 1, &s1), 0, "%s", kfdb_session_last_error(NULL));
        /* A session of GPU 0 holding a buffer on GPU 1 has something on the lost GPU too. */
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "both", 0, &both), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_buffer_alloc_on_gpu(both, 4096, KFDB_PLACEMENT_GTT, 1, &on1), 0, "%s",
                     kfdb_session_last_error(both));
        fill_and_check(s0, 0x0a0a0a0a);
        fill_and_check(s1, 0x1a1a1a1a);

        reset_gpu(&d, 1);
        cr_assert(log_has(&d, "GPU 1 is served again", 60000), "GPU 1 was not brought back");
        cr_expect(log_has(&d, "GPU 1: its device context was lost", 0));
        cr_expect_eq(kill(d.pid, 0), 0, "the daemon runs on");

        fill_and_check(s0, 0x0b0b0b0b);
        cr_expect_eq(kfdb_session_get_reconnects(s0), 0u, "GPU 0's session never noticed");
        fill_and_check(s1, 0x1b1b1b1b);
        cr_expect_eq(kfdb_session_get_reconnects(s1), 1u, "GPU 1's session came back once");
        fill_and_check(both, 0x2b2b2b2b);
        cr_expect_eq(kfdb_session_get_reconnects(both), 1u, "so did the one with a buffer on GPU 1");
        cr_expect_eq(kfdb_session_get_gpu(s1), 1u, "to GPU 1");
        cr_assert_eq(kfdb_gpus_get(s0, gpus, 4, &n), 0);
        cr_expect_eq(n, 2u, "both GPUs served");

        /* Again: a GPU comes back as often as it is lost. */
        reset_gpu(&d, 1);
        for (int i = 0; i < 6000; i++) {
                char *log = test_daemon_read_log(&d);
                bool twice = strstr(log, "(recovery 2)") != NULL;
                free(log);
                if (twice)
                        break;
                usleep(10 * 1000);
        }
        fill_and_check(s1, 0x1c1c1c1c);
        cr_expect_eq(kfdb_session_get_reconnects(s1), 2u);
        cr_expect_eq(kfdb_session_get_reconnects(s0), 0u);
        kfdb_session_free(s0);
        kfdb_session_free(s1);
        kfdb_session_free(both);
        test_daemon_fini(&d);
}

/* A reset of GPU 0 (issue 33: "a fault or reset on GPU 0 leaves GPU 1's
 * clients running"): with secondary KFD contexts every GPU's device context
 * is one of its own, GPU 0's too, so GPU 0 comes back in the running daemon
 * and GPU 1's session never notices. */
Test(gpus, a_reset_of_gpu_0_leaves_gpu_1s_clients_running) {
        TestDaemon d;
        kfdb_session *s0 = NULL, *s1 = NULL;

        test_daemon_start(&d, two_gpus);
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "gpu0", 0, &s0), 0, "%s", kfdb_session_last_error(NULL));
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "gpu1", 1, &s1), 0, "%s", kfdb_session_last_error(NULL));
        fill_and_check(s0, 0x0a0a0a0a);
        fill_and_check(s1, 0x1a1a1a1a);
        reset_gpu(&d, 0);
        cr_assert(log_has(&d, "GPU 0 is served again", 60000), "GPU 0 was not brought back");
        fill_and_check(s1, 0x1b1b1b1b);
        cr_expect_eq(kfdb_session_get_reconnects(s1), 0u, "GPU 1's session never noticed");
        fill_and_check(s0, 0x0b0b0b0b);
        cr_expect_eq(kfdb_session_get_reconnects(s0), 1u, "GPU 0's came back once");
        cr_expect_eq(kill(d.pid, 0), 0, "the daemon runs on");
        kfdb_session_free(s0);
        kfdb_session_free(s1);
        test_daemon_fini(&d);
}

/* Where GPU 1's device context shares the daemon's KFD process (no
 * secondary contexts: KFD 1.18), a reset of it ends the daemon as before,
 * naming why: that process cannot be closed while the daemon runs. */
Test(gpus, a_reset_gpu_sharing_the_daemons_kfd_process_ends_the_daemon) {
        const char *extra[] = { "--sim-gpus=2", "--sim-kfd-version=1.18", NULL };
        TestDaemon d;
        kfdb_session *s1 = NULL;
        int rc;

        test_daemon_start(&d, extra);
        cr_assert_eq(kfdb_session_new_on_gpu(d.sock, "gpu1", 1, &s1), 0, "%s", kfdb_session_last_error(NULL));
        fill_and_check(s1, 0x1a1a1a1a);
        reset_gpu(&d, 1);
        cr_expect(log_has(&d, "The GPU context of the daemon was lost", 60000));
        for (int i = 0; i < 6000 && !exited(d.pid); i++)
                usleep(10 * 1000);
        cr_expect(exited(d.pid), "the daemon ended on its own");
        rc = test_daemon_stop(&d);
        cr_expect(rc != 0 && rc != 128 + SIGTERM, "with a failure, for Restart=on-failure: %d", rc);
        kfdb_session_free(s1);
}

/* A bad --sim-gpus= stops the daemon with one line naming the value. */
Test(gpus, a_bad_sim_gpus_value_is_named) {
        static const char *const values[] = { "--sim-gpus=9", "--sim-gpus=0", "--sim-gpus=two" };
        char dir[] = "/tmp/kfdbroker-test-gpus.XXXXXX";

        cr_assert_not_null(mkdtemp(dir));
        for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
                char sock[128], log[128], want[160];
                const char *argv[] = { NULL, "--device=sim", values[i], "--listen", sock, "--log-target=stderr", NULL };
                char *out;

                snprintf(sock, sizeof sock, "%s/sock", dir);
                snprintf(log, sizeof log, "%s/log", dir);
                cr_assert_eq(test_wait_exit(test_daemon_spawn(argv, log, NULL), 30000), 1, "%s", values[i]);
                out = test_read_file(log);
                snprintf(want, sizeof want, "expected 1..8 discrete GPUs, got '%s'", values[i] + strlen("--sim-gpus="));
                cr_expect(strstr(out, want), "%s: %s", values[i], out);
                free(out);
                unlink(log);
        }
        rmdir(dir);
}
