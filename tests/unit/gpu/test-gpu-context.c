/* SPDX-License-Identifier: MIT */
/*
 * The GPU layer end to end on the simulated gfx1030: bring-up through the
 * KfdOps table, buffers in GTT and VRAM, copy and fill jobs checked byte by
 * byte, cross-queue waits resolved on the GPU, dma-buf export/import between
 * two contexts, a GPU memory fault and the queue's recovery, ring wrap,
 * -EAGAIN on a full ring, and that every object and fd goes away again.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpu-test.h"
#include "gpu/gpu-internal.h" /* white box: where a context's CWSR areas went */
#include "gpu/gpu.h"
#include "kfd/kfd-real.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim.h"

static void check_ok(const GpuCompletion *c) {
        cr_assert_not_null(c);
        cr_expect_eq(c->error, 0, "job %llu error %d", (unsigned long long) c->seq, c->error);
        cr_expect_gt(c->end_ns, 0u, "end timestamp written");
        cr_expect_leq(c->begin_ns, c->end_ns);
}

Test(gpu_context, bring_up, .init = setup, .fini = teardown) {
        const GpuDeviceInfo *i = gpu_context_get_info(fx.ctx);
        cr_expect_str_eq(i->backend, "sim");
        cr_expect_str_eq(i->gfx_name, "gfx1030");
        cr_expect_eq(i->gfx_target_version, 100300u);
        cr_expect_eq(i->gpu_id, 0x697Du);
        /* default: two SDMA queues and one compute queue at the normal priority */
        cr_expect_eq(i->n_queues, 3u);
        cr_expect_eq(i->queue_engine[0], GPU_ENGINE_SDMA);
        cr_expect_eq(i->queue_engine[1], GPU_ENGINE_SDMA);
        cr_expect_eq(i->queue_engine[2], GPU_ENGINE_COMPUTE);
        cr_expect_eq(i->queue_priority[2], (uint32_t) GPU_QUEUE_PRIORITY_DEFAULT);
        cr_expect_eq(i->timestamp_hz, 100000000u);
        cr_expect_eq(i->kfd_major, 1u);
        cr_expect_geq(gpu_context_get_wake_fd(fx.ctx), 0);
}

static void copy_roundtrip(uint64_t size, GpuPlacement src_pl, GpuPlacement dst_pl, unsigned q) {
        GpuBuffer *src = new_buf(size, src_pl), *dst = new_buf(size, dst_pl);
        fill_pattern(gpu_buffer_get_cpu(src), size, (uint32_t) size);
        memset(gpu_buffer_get_cpu(dst), 0xEE, gpu_buffer_get_size(dst));

        GpuJob job = { .type = GPU_JOB_COPY,
                       .copy = { .src_va = gpu_buffer_get_va(src), .dst_va = gpu_buffer_get_va(dst), .size = size } };
        uint64_t seq = submit(q, &job);
        check_ok(wait_seq(fx.ctx, &fx.comps, q, seq));
        cr_assert_eq(memcmp(gpu_buffer_get_cpu(src), gpu_buffer_get_cpu(dst), size), 0,
                     "copy of %llu bytes differs", (unsigned long long) size);
        /* nothing written past the end */
        const uint8_t *d = gpu_buffer_get_cpu(dst);
        for (uint64_t k = size; k < gpu_buffer_get_size(dst); k++)
                cr_assert_eq(d[k], 0xEE, "byte %llu past the copy was written", (unsigned long long) k);
        cr_expect_geq(gpu_queue_get_completed(fx.ctx, q), seq);
        gpu_buffer_unref(src);
        gpu_buffer_unref(dst);
}

Test(gpu_context, copy_sizes, .init = setup, .fini = teardown, .timeout = 120) {
        copy_roundtrip(4, GPU_PLACEMENT_GTT, GPU_PLACEMENT_GTT, 0);
        copy_roundtrip(1, GPU_PLACEMENT_GTT, GPU_PLACEMENT_VRAM, 1);
        copy_roundtrip(4 * MiB + 4, GPU_PLACEMENT_GTT, GPU_PLACEMENT_VRAM, 0); /* crosses the 4 MiB split */
        copy_roundtrip(64 * MiB, GPU_PLACEMENT_VRAM, GPU_PLACEMENT_GTT, 1);
}

static void fill_check(uint64_t size, GpuPlacement pl, uint32_t pattern) {
        GpuBuffer *b = new_buf(size + 8, pl);
        uint8_t *p = gpu_buffer_get_cpu(b);
        memset(p, 0x11, size + 8);
        GpuJob job = { .type = GPU_JOB_FILL,
                       .fill = { .dst_va = gpu_buffer_get_va(b) + 4, .size = size, .pattern = pattern } };
        uint64_t seq = submit(0, &job);
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, seq));
        for (unsigned k = 0; k < 4; k++)
                cr_assert_eq(p[k], 0x11, "byte %u before the fill was written", k);
        for (uint64_t k = 0; k < size; k += 4) {
                uint32_t v;
                memcpy(&v, p + 4 + k, 4);
                cr_assert_eq(v, pattern, "fill dword at %llu: 0x%08x", (unsigned long long) k, v);
        }
        for (unsigned k = 0; k < 4; k++)
                cr_assert_eq(p[4 + size + k], 0x11, "byte after the fill was written");
        gpu_buffer_unref(b);
}

Test(gpu_context, fill_sizes, .init = setup, .fini = teardown, .timeout = 120) {
        fill_check(4, GPU_PLACEMENT_GTT, 0xA5A5F00D);
        fill_check(4 * MiB + 4, GPU_PLACEMENT_VRAM, 0x01020304);
        fill_check(64 * MiB, GPU_PLACEMENT_GTT, 0xCAFEBABE);
}

Test(gpu_context, invalid_jobs, .init = setup, .fini = teardown) {
        GpuBuffer *b = new_buf(4096, GPU_PLACEMENT_GTT);
        uint64_t va = gpu_buffer_get_va(b), seq;
        GpuJob j;

        j = (GpuJob) { .type = GPU_JOB_FILL, .fill = { .dst_va = va, .size = 0 } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "fill of 0 bytes");
        j = (GpuJob) { .type = GPU_JOB_FILL, .fill = { .dst_va = va, .size = 6 } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "fill of 6 bytes");
        j = (GpuJob) { .type = GPU_JOB_FILL, .fill = { .dst_va = va + 2, .size = 8 } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "misaligned fill");
        j = (GpuJob) { .type = GPU_JOB_COPY, .copy = { .src_va = va, .dst_va = va, .size = 0 } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "copy of 0 bytes");
        j = (GpuJob) { .type = GPU_JOB_COPY, .copy = { .src_va = UINT64_MAX - 2, .dst_va = va, .size = 8 } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "wrapping range");
        j = (GpuJob) { .type = GPU_JOB_NOP };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 3, &j, &seq), -EINVAL, "no queue 3");
        j = (GpuJob) { .type = GPU_JOB_FILL, .fill = { .dst_va = va, .size = 8 } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 2, &j, &seq), -EINVAL, "a fill on the compute queue");
        j = (GpuJob) { .type = GPU_JOB_DISPATCH };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "a dispatch on an SDMA queue");
        cr_expect_eq(gpu_queue_submit(fx.ctx, 2, &j, &seq), -EINVAL, "a dispatch without a code object");
        j = (GpuJob) { .type = GPU_JOB_NOP, .n_waits = 1, .waits = { { .queue = 1, .seq = 1 } } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "wait on a job never submitted");
        j = (GpuJob) { .type = GPU_JOB_NOP, .n_waits = 1, .waits = { { .queue = 7, .seq = 1 } } };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "wait on a missing queue");
        j = (GpuJob) { .type = 42 };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "unknown type");
        /* copies may be any byte size and alignment */
        j = (GpuJob) { .type = GPU_JOB_COPY, .copy = { .src_va = va + 1, .dst_va = va + 2001, .size = 3 } };
        memcpy((uint8_t *) gpu_buffer_get_cpu(b) + 1, "xyz", 3);
        seq = submit(0, &j);
        cr_expect_eq(seq, 1u, "rejected jobs consume no sequence number");
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, seq));
        cr_expect_eq(memcmp((uint8_t *) gpu_buffer_get_cpu(b) + 2001, "xyz", 3), 0);
        GpuContextStats st;
        gpu_context_get_stats(fx.ctx, &st);
        cr_expect_eq(st.jobs_submitted, 1u);
        cr_expect_eq(st.buffers, 1u);
        cr_expect_eq(st.buffer_bytes, 4096u);
        gpu_buffer_unref(b);
}

/*
 * q1: F = fill b; q0: A = copy a -> b after F; q1: B = copy b -> c after A.
 * Only the GPU-side waits make c == a: without them B copies the fill pattern
 * whichever queue the engine serves first. Returns A's seq.
 */
static uint64_t fill_copy_copy_chain(GpuBuffer *a, GpuBuffer *b, GpuBuffer *c, uint64_t size) {
        GpuJob jf = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b), .size = size, .pattern = 0x0F0F0F0F } };
        uint64_t sf = submit(1, &jf);
        GpuJob j0 = { .type = GPU_JOB_COPY,
                      .copy = { .src_va = gpu_buffer_get_va(a), .dst_va = gpu_buffer_get_va(b), .size = size },
                      .n_waits = 1,
                      .waits = { { .queue = 1, .seq = sf } } };
        uint64_t s0 = submit(0, &j0);
        GpuJob j1 = { .type = GPU_JOB_COPY,
                      .copy = { .src_va = gpu_buffer_get_va(b), .dst_va = gpu_buffer_get_va(c), .size = size },
                      .n_waits = 2,
                      .waits = { { .queue = 0, .seq = s0 }, { .queue = 1, .seq = sf } } };
        uint64_t s1 = submit(1, &j1);
        const GpuCompletion *c1 = wait_seq(fx.ctx, &fx.comps, 1, s1);
        check_ok(c1);
        const GpuCompletion *c0 = wait_seq(fx.ctx, &fx.comps, 0, s0);
        check_ok(c0);
        cr_assert_eq(memcmp(gpu_buffer_get_cpu(a), gpu_buffer_get_cpu(c), size), 0,
                     "queue 1 copied before queue 0 finished (A is seq %llu)", (unsigned long long) s0);
        cr_expect_geq(c1->end_ns, c0->end_ns, "the waiting job ended after the job it waited for");
        return s0;
}

Test(gpu_context, cross_queue_wait, .init = setup, .fini = teardown, .timeout = 120) {
        uint64_t size = 32 * MiB;
        GpuBuffer *a = new_buf(size, GPU_PLACEMENT_GTT), *b = new_buf(size, GPU_PLACEMENT_VRAM),
                  *c = new_buf(size, GPU_PLACEMENT_GTT);
        fill_pattern(gpu_buffer_get_cpu(a), size, 7);
        memset(gpu_buffer_get_cpu(b), 0, size);

        fill_copy_copy_chain(a, b, c, size);
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);
        gpu_buffer_unref(c);
}

/* Exports a VRAM buffer of fx.ctx, checks the dma-buf's memory, imports it
 * into another process's context and copies and fills through it there. */
static void export_import(void) {
        uint64_t size = 1 * MiB;
        GpuBuffer *b = new_buf(size, GPU_PLACEMENT_VRAM);
        fill_pattern(gpu_buffer_get_cpu(b), size, 99);

        int fd = -1;
        cr_assert_eq(gpu_buffer_export(b, &fd), 0);
        cr_assert_geq(fd, 0);
        void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(m, MAP_FAILED, "mmap of the dma-buf fd: %s", strerror(errno));
        cr_expect_eq(memcmp(m, gpu_buffer_get_cpu(b), size), 0, "dma-buf mapping shows the same bytes");
        ((uint8_t *) m)[123] ^= 0xFF;
        cr_expect_eq(((uint8_t *) m)[123], ((uint8_t *) gpu_buffer_get_cpu(b))[123], "writes are shared");
        munmap(m, size);

        /* A second context (another process's KFD context) on the same device imports it. */
        GpuContext *c2 = NULL;
        const KfdOps *other = NULL;
        cr_assert_eq(sim_device_add_mm(fx.dev, &other), 0);
        cr_assert_eq(gpu_context_new(other, NULL, &c2), 0);
        GpuBuffer *imp = NULL;
        int r = gpu_buffer_import(c2, fd, &imp);
        cr_assert_eq(r, 0, "gpu_buffer_import: %s", strerror(-r));
        cr_expect_eq(gpu_buffer_get_size(imp), size);
        cr_expect_eq(memcmp(gpu_buffer_get_cpu(imp), gpu_buffer_get_cpu(b), size), 0);

        GpuBuffer *local = NULL;
        cr_assert_eq(gpu_buffer_new(c2, size, GPU_PLACEMENT_GTT, false, &local), 0);
        /* copy imported -> local, then fill part of the imported buffer, in c2 */
        GpuJob j = { .type = GPU_JOB_COPY,
                     .copy = { .src_va = gpu_buffer_get_va(imp), .dst_va = gpu_buffer_get_va(local), .size = size } };
        uint64_t seq = 0;
        cr_assert_eq(gpu_queue_submit(c2, 0, &j, &seq), 0);
        Comps *cs2 = calloc(1, sizeof *cs2);
        check_ok(wait_seq(c2, cs2, 0, seq));
        cr_expect_eq(memcmp(gpu_buffer_get_cpu(local), gpu_buffer_get_cpu(b), size), 0,
                     "copy through the imported buffer");
        j = (GpuJob) { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(imp), .size = 4096, .pattern = 0x5A5A5A5A } };
        cr_assert_eq(gpu_queue_submit(c2, 1, &j, &seq), 0);
        check_ok(wait_seq(c2, cs2, 1, seq));
        const uint8_t *orig = gpu_buffer_get_cpu(b);
        for (unsigned k = 0; k < 4096; k++)
                cr_assert_eq(orig[k], 0x5A, "the exporter sees the importer's GPU write (byte %u)", k);
        free(cs2);

        gpu_buffer_unref(local);
        gpu_buffer_unref(imp);
        c2 = gpu_context_free(c2);
        close(fd);
        gpu_buffer_unref(b);
}

Test(gpu_context, export_import, .init = setup, .fini = teardown, .timeout = 60) {
        cr_expect_not(gpu_context_get_info(fx.ctx)->render_node_buffers, "KFD 1.19 exports its own buffers");
        export_import();
}

/* Linux 6.1 (KFD 1.11) has no EXPORT_DMABUF: buffers come from the render
 * node (GEM + PRIME) and are imported into KFD; sharing works all the same. */
Test(gpu_context, export_import_kfd_1_11, .init = setup_kfd_1_11, .fini = teardown, .timeout = 60) {
        SimDeviceStats st;

        cr_expect_eq(gpu_context_get_info(fx.ctx)->kfd_minor, 11u);
        cr_expect(gpu_context_get_info(fx.ctx)->render_node_buffers, "the gate follows GET_VERSION");
        export_import();

        /* Each buffer is one GEM object while it lives, none after. */
        GpuBuffer *b = new_buf(64 * 1024, GPU_PLACEMENT_GTT);
        sim_device_get_stats(fx.dev, &st);
        cr_expect_eq(st.gem_handles, 1u, "the buffer is a GEM object of the render node");
        int fd = -1;
        cr_assert_eq(gpu_buffer_export(b, &fd), 0);
        cr_expect_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR, "a dma-buf the client can map for writing");
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        memset(gpu_buffer_get_cpu(b), 0x42, 64 * 1024);
        uint8_t *m = mmap(NULL, 64 * 1024, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(m, MAP_FAILED);
        cr_expect_eq(m[65535], 0x42);
        munmap(m, 64 * 1024);
        close(fd);
        gpu_buffer_unref(b);
        sim_device_get_stats(fx.dev, &st);
        cr_expect_eq(st.gem_handles, 0u, "GEM_CLOSE at free");
}

/* The version gate is what keeps exports working on 1.11: KFD's own export is
 * refused there (the ioctl table ends before 0x24), and a 1.12 kernel makes no
 * GEM objects. */
Test(gpu_context, kfd_export_needs_uapi_1_12, .timeout = 60) {
        for (uint32_t minor = 11; minor <= 12; minor++) {
                SimOptions so = { .kfd_minor = minor };
                SimDevice *d = NULL;
                GpuContext *c = NULL;
                GpuBuffer *b = NULL;
                SimDeviceStats st;
                int fd = -1;

                cr_assert_eq(sim_device_new(&so, &d), 0);
                cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &c), 0);
                cr_expect_eq(gpu_context_get_info(c)->render_node_buffers, minor < 12, "1.%u", minor);
                cr_assert_eq(gpu_buffer_new(c, 4096, GPU_PLACEMENT_VRAM, false, &b), 0);
                sim_device_get_stats(d, &st);
                cr_expect_eq(st.gem_handles, minor < 12 ? 1u : 0u, "1.%u", minor);
                cr_expect_eq(gpu_buffer_export(b, &fd), 0, "1.%u", minor);
                close(fd);
                gpu_buffer_unref(b);
                c = gpu_context_free(c);
                d = sim_device_free(d);
        }
}

Test(gpu_context, import_rejects_non_dmabuf, .init = setup, .fini = teardown) {
        GpuBuffer *imp = NULL;
        int p[2];
        cr_assert_eq(pipe(p), 0);
        cr_expect_lt(gpu_buffer_import(fx.ctx, p[0], &imp), 0);
        cr_expect_null(imp);
        close(p[0]);
        close(p[1]);
}

Test(gpu_context, a_fault_ends_the_context, .init = setup, .fini = teardown, .timeout = 60) {
        uint64_t size = 64 * 1024;
        GpuBuffer *src = new_buf(size, GPU_PLACEMENT_GTT), *dst = new_buf(size, GPU_PLACEMENT_GTT),
                  *dst2 = new_buf(size, GPU_PLACEMENT_GTT);
        fill_pattern(gpu_buffer_get_cpu(src), size, 3);
        memset(gpu_buffer_get_cpu(dst), 0, size);
        memset(gpu_buffer_get_cpu(dst2), 0, size);
        const uint64_t bad = 0x00000dead0000000ull;

        GpuJob ok = { .type = GPU_JOB_COPY,
                      .copy = { .src_va = gpu_buffer_get_va(src), .dst_va = gpu_buffer_get_va(dst), .size = size } };
        GpuJob fault = { .type = GPU_JOB_COPY, .copy = { .src_va = bad, .dst_va = gpu_buffer_get_va(dst2), .size = size } };
        GpuJob later = { .type = GPU_JOB_FILL,
                         .fill = { .dst_va = gpu_buffer_get_va(dst2), .size = size, .pattern = 0x77777777 } };

        uint64_t s1 = submit(0, &ok);
        uint64_t s2 = submit(0, &fault);
        uint64_t s3 = submit(0, &later);
        uint64_t s4 = submit(0, &ok);

        check_ok(wait_seq(fx.ctx, &fx.comps, 0, s1));
        const GpuCompletion *f = wait_seq(fx.ctx, &fx.comps, 0, s2);
        cr_expect_eq(f->error, -EFAULT);
        cr_expect_geq(f->fault_va, bad & ~0xFFFull, "fault va 0x%llx", (unsigned long long) f->fault_va);
        cr_expect_lt(f->fault_va, bad + size, "fault va 0x%llx", (unsigned long long) f->fault_va);
        /* The kernel evicts every queue of the context for good (kfd-facts
         * §7.1): the jobs behind it never run and are reported cancelled. */
        const GpuCompletion *c3 = wait_seq(fx.ctx, &fx.comps, 0, s3), *c4 = wait_seq(fx.ctx, &fx.comps, 0, s4);
        cr_expect_eq(c3->error, -ECANCELED);
        cr_expect_eq(c4->error, -ECANCELED);
        cr_expect_str_eq(c3->message, "its GPU context was lost to another job's memory fault");
        cr_expect_eq(((uint8_t *) gpu_buffer_get_cpu(dst2))[0], 0, "the job after the fault did not run");

        /* in order, each exactly once */
        unsigned prev = 0;
        for (unsigned i = 0; i < fx.comps.n; i++)
                if (fx.comps.c[i].queue == 0) {
                        cr_expect_eq(fx.comps.c[i].seq, prev + 1u, "completion order");
                        prev = (unsigned) fx.comps.c[i].seq;
                }
        cr_expect_eq(prev, 4u);

        const char *why = NULL;
        cr_expect(gpu_context_is_lost(fx.ctx, &why));
        cr_expect(why && strstr(why, "memory fault at "), "reason: %s", why ? why : "(null)");
        uint64_t seq;
        cr_expect_eq(gpu_queue_submit(fx.ctx, 1, &ok, &seq), -ENODEV, "nothing is submitted to a lost context");
        unsigned idx;
        cr_expect_eq(gpu_context_add_queue(fx.ctx, GPU_ENGINE_SDMA, 7, &idx), -ENODEV);
        GpuContextStats st;
        gpu_context_get_stats(fx.ctx, &st);
        cr_expect_geq(st.faults, 1u);

        /* The process goes on: a new (secondary) context on the same GPU works. */
        GpuContext *c2 = NULL;
        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY };
        cr_assert_eq(gpu_context_new(fx.ops, &o, &c2), 0);
        GpuBuffer *b2 = NULL;
        cr_assert_eq(gpu_buffer_new(c2, 4096, GPU_PLACEMENT_GTT, false, &b2), 0);
        GpuJob fill = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b2), .size = 4096, .pattern = 0x42424242 } };
        cr_assert_eq(gpu_queue_submit(c2, 0, &fill, &seq), 0);
        Comps *cs2 = calloc(1, sizeof *cs2);
        check_ok(wait_seq(c2, cs2, 0, seq));
        cr_expect_eq(((uint32_t *) gpu_buffer_get_cpu(b2))[1023], 0x42424242u);
        free(cs2);
        gpu_buffer_unref(b2);
        gpu_context_free(c2);

        gpu_buffer_unref(src);
        gpu_buffer_unref(dst);
        gpu_buffer_unref(dst2);
}

Test(gpu_context, faults_on_both_queues, .init = setup, .fini = teardown, .timeout = 60) {
        GpuBuffer *b = new_buf(8192, GPU_PLACEMENT_GTT);
        uint32_t *w = gpu_buffer_get_cpu(b);
        memset(w, 0, 8192);
        /* Both queues fault at about the same time: KFD keeps one record per
         * MEMORY event, so the second fault may arrive folded into the first.
         * Each job touches unmapped memory, so each certainly faulted. */
        GpuJob f0 = { .type = GPU_JOB_FILL, .fill = { .dst_va = 0x00000a0000000000ull, .size = 64, .pattern = 1 } };
        GpuJob f1 = { .type = GPU_JOB_COPY, .copy = { .src_va = 0x00000b0000000000ull, .dst_va = gpu_buffer_get_va(b), .size = 64 } };
        uint64_t a0 = submit(0, &f0), a1 = submit(1, &f1);
        GpuJob g0 = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b) + 4096, .size = 4, .pattern = 0xC0C0C0C0 } };
        uint64_t b0 = submit(0, &g0);

        const GpuCompletion *c;
        c = wait_seq(fx.ctx, &fx.comps, 0, a0);
        cr_expect_eq(c->error, -EFAULT);
        cr_expect_eq(c->fault_va & ~0xFFFull, 0x00000a0000000000ull, "queue 0 fault va 0x%llx", (unsigned long long) c->fault_va);
        c = wait_seq(fx.ctx, &fx.comps, 1, a1);
        cr_expect_eq(c->error, -EFAULT);
        cr_expect_eq(c->fault_va & ~0xFFFull, 0x00000b0000000000ull, "queue 1 fault va 0x%llx", (unsigned long long) c->fault_va);
        cr_expect_eq(wait_seq(fx.ctx, &fx.comps, 0, b0)->error, -ECANCELED);
        cr_expect_eq(w[1024], 0u, "nothing ran after the faults");
        cr_expect_eq(w[0], 0u, "the faulted copy wrote nothing");
        gpu_buffer_unref(b);
}

static const GpuContextOptions small_ring = { .n_sdma_queues = 2, .sdma_ring_size = 4096,
                                              .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT };

static void setup_small(void) {
        setup_opts(&small_ring);
}

Test(gpu_context, ring_wrap, .init = setup_small, .fini = teardown, .timeout = 120) {
        const unsigned n_jobs = 2000; /* 4 KiB ring, ~100 bytes per job: ~50 wraps */
        GpuBuffer *b = new_buf(n_jobs * 4, GPU_PLACEMENT_GTT);
        uint32_t *words = gpu_buffer_get_cpu(b);
        memset(words, 0, n_jobs * 4);
        uint64_t last = 0;

        for (unsigned i = 0; i < n_jobs; i++) {
                GpuJob j = { .type = GPU_JOB_FILL,
                             .fill = { .dst_va = gpu_buffer_get_va(b) + i * 4, .size = 4, .pattern = i + 1 } };
                last = submit_when_room(0, &j, NULL);
                cr_assert_eq(last, (uint64_t) i + 1);
        }
        wait_seq(fx.ctx, &fx.comps, 0, last);
        cr_expect_eq(fx.comps.n, n_jobs);
        for (unsigned i = 0; i < fx.comps.n; i++) {
                cr_assert_eq(fx.comps.c[i].seq, (uint64_t) i + 1, "order");
                cr_assert_eq(fx.comps.c[i].error, 0);
        }
        for (unsigned i = 0; i < n_jobs; i++)
                cr_assert_eq(words[i], i + 1, "word %u", i);
        gpu_buffer_unref(b);
}

/* Queues whose first seq is 2^32 - 1: the next job is the one whose low 32
 * bits, all a fence word holds, would be 0 (gpu-queue.c, queue_turn_epoch). */
static const GpuContextOptions near_wrap = { .n_sdma_queues = 2, .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT,
                                             .first_seq = (1ull << 32) - 1 };

static void setup_near_wrap(void) {
        setup_opts(&near_wrap);
}

/* A wait for the first job past the wrap must not pass early: with the word
 * at 0xFFFFFFFF, an unsigned >= 0 is true at once. */
Test(gpu_context, fence_wrap_wait_holds, .init = setup_near_wrap, .fini = teardown, .timeout = 120) {
        uint64_t size = 32 * MiB;
        GpuBuffer *a = new_buf(size, GPU_PLACEMENT_GTT), *b = new_buf(size, GPU_PLACEMENT_VRAM),
                  *c = new_buf(size, GPU_PLACEMENT_GTT);
        fill_pattern(gpu_buffer_get_cpu(a), size, 11);
        memset(gpu_buffer_get_cpu(b), 0, size);
        memset(gpu_buffer_get_cpu(c), 0, size);

        /* Queue 1 crosses its wrap first; queue 0 is left one job before its own. */
        GpuJob nop = { .type = GPU_JOB_NOP };
        cr_assert_eq(submit(0, &nop), (1ull << 32) - 1);
        cr_assert_eq(submit(1, &nop), (1ull << 32) - 1);
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, (1ull << 32) - 1));
        check_ok(wait_seq(fx.ctx, &fx.comps, 1, (1ull << 32) - 1));
        uint64_t n1 = submit(1, &nop);
        cr_assert_eq(n1, (1ull << 32) + 1, "seq 2^32 (fence word 0) is skipped, got %llu", (unsigned long long) n1);
        check_ok(wait_seq(fx.ctx, &fx.comps, 1, n1));

        /* Queue 0 is idle and nobody waits on it: it turns at once, and
         * queue 1's wait is for its first seq past the wrap. */
        uint64_t s0 = fill_copy_copy_chain(a, b, c, size);
        cr_expect_eq(s0, (1ull << 32) + 1);
        cr_expect_null(find_comp(&fx.comps, 0, 1ull << 32), "no completion for the skipped seq");
        cr_expect_eq(gpu_queue_get_completed(fx.ctx, 0), s0);
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);
        gpu_buffer_unref(c);
}

/* The turn waits until the queue is idle and no job of another queue still
 * waits on it (that wait, for 0xFFFFFFFF, would never pass once the word
 * reads 0); meanwhile the queue answers -EAGAIN, and then everything runs. */
Test(gpu_context, fence_wrap_turn_waits_for_waiters, .init = setup_near_wrap, .fini = teardown, .timeout = 120) {
        uint64_t size = 32 * MiB;
        GpuBuffer *a = new_buf(size, GPU_PLACEMENT_GTT), *b = new_buf(size, GPU_PLACEMENT_VRAM),
                  *c = new_buf(size, GPU_PLACEMENT_GTT), *w = new_buf(4096, GPU_PLACEMENT_GTT);
        uint32_t *words = gpu_buffer_get_cpu(w);
        fill_pattern(gpu_buffer_get_cpu(a), size, 13);
        memset(gpu_buffer_get_cpu(c), 0, size);
        memset(words, 0, 4096);

        GpuJob j0 = { .type = GPU_JOB_COPY,
                      .copy = { .src_va = gpu_buffer_get_va(a), .dst_va = gpu_buffer_get_va(b), .size = size } };
        uint64_t s0 = submit(0, &j0);
        cr_assert_eq(s0, (1ull << 32) - 1);
        GpuJob j1 = { .type = GPU_JOB_COPY,
                      .copy = { .src_va = gpu_buffer_get_va(b), .dst_va = gpu_buffer_get_va(c), .size = size },
                      .n_waits = 1,
                      .waits = { { .queue = 0, .seq = s0 } } };
        uint64_t s1 = submit(1, &j1);

        GpuJob f = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(w), .size = 4, .pattern = 0xC0FFEE } };
        uint64_t seq = 0;
        cr_assert_eq(gpu_queue_submit(fx.ctx, 0, &f, &seq), -EAGAIN,
                     "queue 0 must drain, and queue 1 stop waiting on it, before its fence word wraps");
        unsigned refused = 0;
        uint64_t s2 = submit_when_room(0, &f, &refused);
        cr_expect_eq(s2, (1ull << 32) + 1);
        cr_expect_not_null(find_comp(&fx.comps, 1, s1), "the turn came only after queue 1's wait was done");
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, s2));
        check_ok(find_comp(&fx.comps, 0, s0));
        check_ok(find_comp(&fx.comps, 1, s1));
        cr_assert_eq(memcmp(gpu_buffer_get_cpu(a), gpu_buffer_get_cpu(c), size), 0);
        cr_expect_eq(words[0], 0xC0FFEEu);

        /* The new epoch's fences order jobs as before. */
        GpuJob g = { .type = GPU_JOB_FILL,
                     .fill = { .dst_va = gpu_buffer_get_va(w) + 4, .size = 4, .pattern = 0xBEEF },
                     .n_waits = 1, .waits = { { .queue = 0, .seq = s2 } } };
        uint64_t s3 = submit(1, &g);
        check_ok(wait_seq(fx.ctx, &fx.comps, 1, s3));
        cr_expect_eq(words[1], 0xBEEFu);
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);
        gpu_buffer_unref(c);
        gpu_buffer_unref(w);
}

Test(gpu_context, ring_full_eagain, .init = setup_small, .fini = teardown, .timeout = 60) {
        GpuBuffer *b = new_buf(4096, GPU_PLACEMENT_GTT);
        uint32_t *words = gpu_buffer_get_cpu(b);
        memset(words, 0, 4096);

        /* Stop queue 1 with a fault (nobody processes it yet), and make queue
         * 0 wait on that job on the GPU: queue 0 now fills up. */
        GpuJob fault = { .type = GPU_JOB_FILL, .fill = { .dst_va = 0x00000beef0000000ull, .size = 4096, .pattern = 1 } };
        uint64_t sf = submit(1, &fault);
        GpuJob w = { .type = GPU_JOB_FILL,
                     .fill = { .dst_va = gpu_buffer_get_va(b), .size = 4, .pattern = 0xAAAA0001 },
                     .n_waits = 1, .waits = { { .queue = 1, .seq = sf } } };
        uint64_t first = submit(0, &w);
        unsigned n = 1;
        uint64_t seq = 0;
        int r;
        for (;;) {
                GpuJob j = { .type = GPU_JOB_FILL,
                             .fill = { .dst_va = gpu_buffer_get_va(b) + 4 * (n % 1000), .size = 4, .pattern = n + 1 } };
                r = gpu_queue_submit(fx.ctx, 0, &j, &seq);
                if (r != 0)
                        break;
                n++;
                cr_assert_lt(n, 1000u, "a 4 KiB ring never filled up");
        }
        cr_expect_eq(r, -EAGAIN, "full ring: %s", strerror(-r));
        cr_expect_gt(n, 10u);
        GpuContextStats st;
        gpu_context_get_stats(fx.ctx, &st);
        cr_expect_eq(st.jobs_submitted, n + 1u, "the refused job was not counted");
        cr_expect_eq(words[0], 0u, "queue 0 is still blocked behind queue 1's fault");

        /* Processing reports the fault, which ended the context: every job of
         * the full queue 0 is reported cancelled, each once, and nothing ran. */
        const GpuCompletion *f = wait_seq(fx.ctx, &fx.comps, 1, sf);
        cr_expect_eq(f->error, -EFAULT);
        const GpuCompletion *c = wait_seq(fx.ctx, &fx.comps, 0, first + n - 1);
        cr_expect_eq(c->error, -ECANCELED);
        cr_expect_eq(fx.comps.n, n + 1u, "every job reported once");
        cr_expect_eq(words[0], 0u);
        gpu_buffer_unref(b);
}

Test(gpu_context, context_free_with_jobs_in_flight, .timeout = 60) {
        SimDevice *d = NULL;
        GpuContext *c = NULL;
        GpuBuffer *b = NULL;
        unsigned before = test_count_fds();
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &c), 0);
        cr_assert_eq(gpu_buffer_new(c, 16 * MiB, GPU_PLACEMENT_GTT, false, &b), 0);
        GpuJob j = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b), .size = 16 * MiB, .pattern = 9 } };
        for (unsigned i = 0; i < 4; i++)
                cr_assert_eq(gpu_queue_submit(c, i % 2, &j, NULL), 0);
        /* The context goes first (queues destroyed under running jobs); the
         * buffer outlives it detached, and its last unref only frees memory. */
        c = gpu_context_free(c);
        cr_expect_null(gpu_buffer_get_cpu(b), "detached buffer has no mapping");
        b = gpu_buffer_unref(b);
        d = sim_device_free(d);
        cr_expect_eq(test_count_fds(), before);
}

/* Mappings of simulated device memory (BOs, dma-bufs, doorbells are memfds).
 * Counting every line of /proc/self/maps would also count the allocator's
 * own growth (ASan's in particular). */
static unsigned count_maps(void) {
        FILE *f = fopen("/proc/self/maps", "re");
        cr_assert_not_null(f);
        unsigned n = 0;
        char line[512];
        while (fgets(line, sizeof line, f))
                if (strstr(line, "/memfd:"))
                        n++;
        fclose(f);
        return n;
}

static void one_round(const KfdOps *ops) {
        GpuContext *c = NULL;
        GpuBuffer *a = NULL, *b = NULL, *imp = NULL;
        Comps *cs = calloc(1, sizeof *cs);
        int fd = -1;
        uint64_t seq;

        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY };
        cr_assert_eq(gpu_context_new(ops, &o, &c), 0);
        cr_assert_eq(gpu_buffer_new(c, 1 * MiB, GPU_PLACEMENT_GTT, false, &a), 0);
        cr_assert_eq(gpu_buffer_new(c, 1 * MiB, GPU_PLACEMENT_VRAM, true, &b), 0);
        cr_assert_eq(gpu_buffer_export(b, &fd), 0);
        cr_assert_eq(gpu_buffer_import(c, fd, &imp), 0);
        GpuJob j = { .type = GPU_JOB_COPY, .copy = { .src_va = gpu_buffer_get_va(a), .dst_va = gpu_buffer_get_va(imp), .size = 1 * MiB } };
        cr_assert_eq(gpu_queue_submit(c, 0, &j, &seq), 0);
        check_ok(wait_seq(c, cs, 0, seq));
        j.copy.src_va = 0x00000c0000000000ull; /* and a fault, which ends the context */
        cr_assert_eq(gpu_queue_submit(c, 1, &j, &seq), 0);
        cr_expect_eq(wait_seq(c, cs, 1, seq)->error, -EFAULT);
        close(fd);
        gpu_buffer_unref(imp);
        gpu_buffer_unref(b);
        gpu_buffer_unref(a);
        gpu_context_free(c);
        free(cs);
}

Test(gpu_context, no_mapping_or_fd_leak_per_context, .timeout = 60) {
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        one_round(sim_device_get_ops(d)); /* warm up: thread arenas, lazily created sim state */
        unsigned maps = count_maps(), fds = test_count_fds();
        for (unsigned i = 0; i < 3; i++)
                one_round(sim_device_get_ops(d));
        cr_expect_eq(count_maps(), maps, "mappings: %u before, %u after three contexts", maps, count_maps());
        cr_expect_eq(test_count_fds(), fds);
        sim_device_free(d);
}

Test(gpu_context, options_validation) {
        SimDevice *d = NULL;
        GpuContext *c = NULL;
        unsigned before = test_count_fds();
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        GpuContextOptions o = { .sdma_ring_size = 3000, .queue_priority = 7 };
        cr_expect_eq(gpu_context_new(sim_device_get_ops(d), &o, &c), -EINVAL, "ring not a power of two");
        o = (GpuContextOptions) { .queue_priority = 16 };
        cr_expect_eq(gpu_context_new(sim_device_get_ops(d), &o, &c), -EINVAL, "priority 16");
        o = (GpuContextOptions) { .n_sdma_queues = 100, .queue_priority = 7 };
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), &o, &c), 0);
        cr_expect_leq(gpu_context_get_info(c)->n_queues, (unsigned) GPU_MAX_QUEUES, "clamped");
        cr_expect_leq(gpu_context_get_info(c)->n_queues,
                      gpu_context_get_info(c)->num_sdma_engines * gpu_context_get_info(c)->num_sdma_queues_per_engine);
        c = gpu_context_free(c);
        d = sim_device_free(d);
        cr_expect_eq(test_count_fds(), before);
}

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s", path);
        fputs(text, f);
        fclose(f);
}

Test(gpu_context, bring_up_errors_clean_up, .timeout = 60) {
        SimDevice *d = NULL;
        GpuContext *c = NULL;
        char root[] = "/tmp/test-gpu-topo-XXXXXX", path[256];
        unsigned before = test_count_fds();

        cr_assert_eq(sim_device_new(NULL, &d), 0);
        KfdOps ops = *sim_device_get_ops(d);
        cr_assert_not_null(mkdtemp(root));

        /* no topology at all */
        ops.sysfs_root = root;
        cr_expect_eq(gpu_context_new(&ops, NULL, &c), -ENOENT);
        cr_expect_null(c);

        /* only a CPU node */
        snprintf(path, sizeof path, "%s/topology", root);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/topology/nodes", root);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/topology/nodes/0", root);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/topology/nodes/0/gpu_id", root);
        write_text(path, "0\n");
        snprintf(path, sizeof path, "%s/topology/nodes/0/properties", root);
        write_text(path, "cpu_cores_count 4\nsimd_count 0\n");
        cr_expect_eq(gpu_context_new(&ops, NULL, &c), -ENODEV);

        /* a GPU node the device does not know: the kernel refuses ACQUIRE_VM */
        snprintf(path, sizeof path, "%s/topology/nodes/1", root);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/topology/nodes/1/gpu_id", root);
        write_text(path, "4660\n");
        snprintf(path, sizeof path, "%s/topology/nodes/1/properties", root);
        write_text(path, "simd_count 80\nsimd_per_cu 2\ngfx_target_version 100300\n"
                         "drm_render_minor 128\nnum_sdma_engines 2\nnum_sdma_queues_per_engine 2\n");
        int r = gpu_context_new(&ops, NULL, &c);
        cr_expect_lt(r, 0, "gpu_id 4660 is not the device's");
        cr_expect_null(c);

        /* a GPU without SDMA queues */
        snprintf(path, sizeof path, "%s/topology/nodes/1/properties", root);
        write_text(path, "simd_count 80\nsimd_per_cu 2\ngfx_target_version 100300\ndrm_render_minor 128\n");
        cr_expect_eq(gpu_context_new(&ops, NULL, &c), -ENODEV);

        snprintf(path, sizeof path, "rm -rf '%s'", root);
        cr_expect_eq(system(path), 0);
        d = sim_device_free(d);
        cr_expect_eq(test_count_fds(), before, "every failed bring-up closed what it opened");
}

/* A KfdOps that forwards to the simulator but fails the Nth call of a kind
 * made by the bring-up thread (not the waiter's WAIT_EVENTS). */
typedef struct FailOps {
        KfdOps ops;
        const KfdOps *inner;
        pthread_t thread;
        unsigned n_ioctl, fail_ioctl, n_mmap, fail_mmap;
        bool failed_hdp; /* the call failed was the HDP flush page's (optional) */
        int kfd_fd;
} FailOps;

static bool is_hdp_alloc(unsigned long req, const void *arg) {
        const struct kfd_ioctl_alloc_memory_of_gpu_args *a = arg;
        return req == AMDKFD_IOC_ALLOC_MEMORY_OF_GPU && (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP);
}

static int fail_open_kfd(void *u) {
        FailOps *f = u;
        return f->kfd_fd = f->inner->open_kfd(f->inner->userdata);
}
static int fail_open_render(void *u, unsigned minor) {
        FailOps *f = u;
        return f->inner->open_render(f->inner->userdata, minor);
}
static int fail_ioctl(void *u, int fd, unsigned long req, void *arg) {
        FailOps *f = u;
        if (pthread_equal(pthread_self(), f->thread) && ++f->n_ioctl == f->fail_ioctl) {
                f->failed_hdp = is_hdp_alloc(req, arg);
                return -ENOMEM;
        }
        return f->inner->ioctl(f->inner->userdata, fd, req, arg);
}
static int fail_mmap(void *u, void *addr, size_t len, int prot, int flags, int fd, uint64_t off, void **ret) {
        FailOps *f = u;
        if (pthread_equal(pthread_self(), f->thread) && ++f->n_mmap == f->fail_mmap) {
                /* KFD_MMAP_TYPE_MMIO (bits 63:62 = 0) on the KFD fd: the HDP page. */
                f->failed_hdp = fd == f->kfd_fd && off >> 62 == 0;
                return -ENOMEM;
        }
        return f->inner->mmap(f->inner->userdata, addr, len, prot, flags, fd, off, ret);
}
static int fail_munmap(void *u, void *addr, size_t len) {
        FailOps *f = u;
        return f->inner->munmap(f->inner->userdata, addr, len);
}
static int fail_close(void *u, int fd) {
        FailOps *f = u;
        return f->inner->close(f->inner->userdata, fd);
}

static void failops_init(FailOps *f, const KfdOps *inner) {
        *f = (FailOps) { .inner = inner, .thread = pthread_self(), .kfd_fd = -1 };
        f->ops = (KfdOps) { .name = inner->name, .userdata = f, .sysfs_root = inner->sysfs_root,
                            .open_kfd = fail_open_kfd, .open_render = fail_open_render,
                            .ioctl = fail_ioctl, .mmap = fail_mmap, .munmap = fail_munmap,
                            .close = fail_close };
}

/* A bring-up that succeeded although a call failed: the failure hit a CWSR
 * area on its way to VRAM, and it went to GTT instead. */
static void expect_cwsr_fell_back(GpuContext *c, const char *what, unsigned n) {
        bool fell_back = false;

        for (unsigned i = 0; i < GPU_MAX_QUEUES; i++)
                fell_back |= c->queues[i].cwsr && (c->queues[i].cwsr->flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cr_expect(fell_back, "failing %s #%u: the bring-up succeeded", what, n);
}

/* Secondary contexts are what the daemon makes and drops per client; a
 * failed bring-up must leave nothing behind. (The process's primary context
 * cannot be made twice: the kernel keeps it until the process exits, its VM
 * acquired once — see primary_context_is_made_once.) */
Test(gpu_context, every_failed_bring_up_step_cleans_up, .timeout = 120) {
        SimDevice *d = NULL;
        const GpuContextOptions secondary = { .flags = GPU_CONTEXT_SECONDARY };
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        /* The primary context comes with the process's first open and stays. */
        int k = sim_device_get_ops(d)->open_kfd(sim_device_get_ops(d)->userdata);
        cr_assert_geq(k, 0);
        sim_device_get_ops(d)->close(sim_device_get_ops(d)->userdata, k);
        unsigned maps = count_maps(), fds = test_count_fds();
        FailOps f;

        /* Fail the 1st, 2nd, ... ioctl of the bring-up until it needs no more. */
        for (unsigned n = 1;; n++) {
                GpuContext *c = NULL;
                failops_init(&f, sim_device_get_ops(d));
                f.fail_ioctl = n;
                int r = gpu_context_new(&f.ops, &secondary, &c);
                if (f.n_ioctl < n) {
                        cr_assert_eq(r, 0, "bring-up without injected failure: %s", strerror(-r));
                        c = gpu_context_free(c);
                        cr_expect_gt(n, 10u, "the bring-up made %u ioctls", n - 1);
                        break;
                }
                if (f.failed_hdp) {
                        /* A device without the HDP flush page still works. */
                        cr_expect_eq(r, 0, "failing the HDP page's ioctl #%u: got %d", n, r);
                        c = gpu_context_free(c);
                        cr_assert_eq(count_maps(), maps, "failing ioctl #%u leaked a mapping", n);
                        continue;
                }
                if (r == 0) {
                        expect_cwsr_fell_back(c, "ioctl", n);
                        c = gpu_context_free(c);
                        continue;
                }
                cr_expect_eq(r, -ENOMEM, "failing ioctl #%u: got %d", n, r);
                cr_expect_null(c);
                cr_assert_eq(count_maps(), maps, "failing ioctl #%u leaked a mapping", n);
                cr_assert_eq(test_count_fds(), fds + 0u, "failing ioctl #%u leaked an fd", n);
        }
        for (unsigned n = 1;; n++) {
                GpuContext *c = NULL;
                failops_init(&f, sim_device_get_ops(d));
                f.fail_mmap = n;
                int r = gpu_context_new(&f.ops, &secondary, &c);
                if (f.n_mmap < n) {
                        cr_assert_eq(r, 0);
                        c = gpu_context_free(c);
                        break;
                }
                if (f.failed_hdp) {
                        cr_expect_eq(r, 0, "failing the HDP page's mmap #%u: got %d", n, r);
                        c = gpu_context_free(c);
                        cr_assert_eq(count_maps(), maps, "failing mmap #%u leaked a mapping", n);
                        continue;
                }
                if (r == 0) {
                        expect_cwsr_fell_back(c, "mmap", n);
                        c = gpu_context_free(c);
                        continue;
                }
                cr_expect_eq(r, -ENOMEM, "failing mmap #%u: got %d", n, r);
                cr_assert_eq(count_maps(), maps, "failing mmap #%u leaked a mapping", n);
                cr_assert_eq(test_count_fds(), fds, "failing mmap #%u leaked an fd", n);
        }
        d = sim_device_free(d);
}

Test(gpu_context, primary_context_is_made_once, .timeout = 60) {
        SimDevice *d = NULL;
        GpuContext *c = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &c), 0);
        c = gpu_context_free(c);
        /* Closing the fds leaves the primary context with its VM acquired; a
         * fresh render fd cannot become its VM (ACQUIRE_VM: -EBUSY). */
        cr_expect_eq(gpu_context_new(sim_device_get_ops(d), NULL, &c), -EBUSY);
        cr_expect_null(c);
        /* Secondary contexts come and go. */
        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY };
        for (unsigned i = 0; i < 3; i++) {
                cr_assert_eq(gpu_context_new(sim_device_get_ops(d), &o, &c), 0);
                c = gpu_context_free(c);
        }
        d = sim_device_free(d);
}

Test(gpu_context, secondary_contexts_need_uapi_1_19, .timeout = 60) {
        SimOptions so = { .kfd_minor = 18 };
        SimDevice *d = NULL;
        GpuContext *c = NULL;
        unsigned fds = test_count_fds();
        cr_assert_eq(sim_device_new(&so, &d), 0);
        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY };
        cr_expect_eq(gpu_context_new(sim_device_get_ops(d), &o, &c), -EOPNOTSUPP);
        cr_expect_null(c);
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &c), 0, "the primary context works");
        cr_expect_eq(gpu_context_get_info(c)->kfd_minor, 18u);
        c = gpu_context_free(c);
        d = sim_device_free(d);
        cr_expect_eq(test_count_fds(), fds);
}

Test(gpu_context, queues_added_later, .timeout = 60) {
        SimDevice *d = NULL;
        GpuContext *c = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY | GPU_CONTEXT_NO_SDMA | GPU_CONTEXT_NO_COMPUTE,
                                .max_inflight = 64 };
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), &o, &c), 0);
        cr_expect_eq(gpu_context_get_info(c)->n_queues, 0u, "no queue until one is asked for");
        unsigned qi = 99;
        cr_assert_eq(gpu_context_add_queue(c, GPU_ENGINE_COMPUTE, 11, &qi), 0);
        cr_expect_eq(qi, 0u);
        cr_expect_eq(gpu_context_get_info(c)->queue_priority[0], 11u);
        cr_expect_eq(gpu_context_add_queue(c, GPU_ENGINE_COMPUTE, 16, &qi), -EINVAL, "priority 16");
        GpuJob nop = { .type = GPU_JOB_NOP };
        Comps *cs = calloc(1, sizeof *cs);
        uint64_t seq = 0;
        for (unsigned i = 0; i < 200; i++) {
                int r;
                while ((r = gpu_queue_submit(c, 0, &nop, &seq)) == -EAGAIN)
                        gpu_context_process(c, on_comp, cs);
                cr_assert_eq(r, 0, "job %u: %s", i, strerror(-r));
        }
        check_ok(wait_seq(c, cs, 0, seq));
        cr_expect_eq(cs->n, 200u, "more jobs than in-flight slots, all completed");
        GpuContextStats st;
        gpu_context_get_stats(c, &st);
        cr_expect_eq(st.queues, 1u);
        cr_expect_gt(st.internal_bytes, 0u);
        free(cs);
        c = gpu_context_free(c);
        d = sim_device_free(d);
}

Test(gpu_context, buffers_mapped_into_another_context, .timeout = 60) {
        SimDevice *d = NULL;
        GpuContext *home = NULL, *guest = NULL;
        unsigned fds = test_count_fds();
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &home), 0);
        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY };
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), &o, &guest), 0);

        GpuBuffer *a = NULL, *b = NULL, *sa = NULL, *sb = NULL, *again = NULL;
        cr_assert_eq(gpu_buffer_new(home, 64 * 1024, GPU_PLACEMENT_GTT, false, &a), 0);
        cr_assert_eq(gpu_buffer_new(home, 64 * 1024, GPU_PLACEMENT_VRAM, false, &b), 0);
        fill_pattern(gpu_buffer_get_cpu(a), 64 * 1024, 5);
        cr_assert_eq(gpu_buffer_map_in(a, home, &sa), 0);
        cr_expect_eq(sa, a, "a buffer of the context itself");
        cr_assert_eq(gpu_buffer_map_in(a, guest, &sa), 0);
        cr_assert_eq(gpu_buffer_map_in(b, guest, &sb), 0);
        cr_assert_eq(gpu_buffer_map_in(a, guest, &again), 0);
        cr_expect_eq(again, sa, "mapped once, kept");
        cr_expect_neq(gpu_buffer_get_va(sa), gpu_buffer_get_va(a), "an address of the guest's own");
        GpuContextStats st;
        gpu_context_get_stats(guest, &st);
        cr_expect_eq(st.mapped_buffers, 2u);
        cr_expect_eq(st.mapped_bytes, 128u * 1024);
        cr_expect_eq(st.buffers, 0u, "not buffers of the guest's own");

        /* The guest copies a -> b through its own addresses. */
        GpuJob j = { .type = GPU_JOB_COPY,
                     .copy = { .src_va = gpu_buffer_get_va(sa), .dst_va = gpu_buffer_get_va(sb), .size = 64 * 1024 } };
        uint64_t seq;
        Comps *cs = calloc(1, sizeof *cs);
        cr_assert_eq(gpu_queue_submit(guest, 0, &j, &seq), 0);
        check_ok(wait_seq(guest, cs, 0, seq));
        cr_expect_eq(memcmp(gpu_buffer_get_cpu(a), gpu_buffer_get_cpu(b), 64 * 1024), 0);

        /* Freeing the buffer takes its mapping out of the guest. */
        b = gpu_buffer_unref(b);
        gpu_context_get_stats(guest, &st);
        cr_expect_eq(st.mapped_buffers, 1u);
        /* ... and the home address is not the guest's: a fault there. */
        j.copy.src_va = gpu_buffer_get_va(a);
        cr_assert_eq(gpu_queue_submit(guest, 0, &j, &seq), 0);
        const GpuCompletion *f = wait_seq(guest, cs, 0, seq);
        cr_expect_eq(f->error, -EFAULT, "an address of another context faults");
        free(cs);
        /* The guest goes first; a's mapping there goes with it. */
        guest = gpu_context_free(guest);
        a = gpu_buffer_unref(a);
        home = gpu_context_free(home);
        d = sim_device_free(d);
        cr_expect_eq(test_count_fds(), fds);
}

Test(gpu_context, probe_real_without_kfd) {
        if (access("/dev/kfd", F_OK) == 0)
                cr_skip_test("this machine has /dev/kfd");
        char reason[256] = "";
        int r = kfd_probe_real(reason, sizeof reason);
        cr_expect_eq(r, -ENOENT);
        cr_expect_str_eq(reason, "/dev/kfd: No such file or directory (no amdgpu KFD on this machine)");
        cr_expect_null(strchr(reason, '\n'), "one line");

        GpuContext *c = NULL;
        cr_expect_eq(gpu_context_new(&kfd_ops_real, NULL, &c), -ENOENT);
        cr_expect_null(c);
}

/* A desktop Ryzen lists its iGPU first (kfd-facts §7.6): without a gpu_id
 * the context is made on the discrete GPU, node 2; a gpu_id names a node,
 * the iGPU too. */
Test(gpu_context, the_discrete_gpu_by_default_a_named_one_otherwise, .timeout = 60) {
        SimOptions so = { .igpu_first = true };
        SimDevice *d = NULL;
        GpuContext *c = NULL;
        unsigned fds = test_count_fds();

        cr_assert_eq(sim_device_new(&so, &d), 0);
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &c), 0);
        cr_expect_eq(gpu_context_get_info(c)->gpu_id, 0x697Du, "the gfx1030, not the gfx1036 listed before it");
        cr_expect_eq(gpu_context_get_info(c)->drm_render_minor, 129u);
        GpuBuffer *b = NULL;
        cr_assert_eq(gpu_buffer_new(c, 4096, GPU_PLACEMENT_VRAM, false, &b), 0);
        gpu_buffer_unref(b);
        c = gpu_context_free(c);

        /* Each in a process of its own: a process's KFD context keeps the
         * render node it was first given (ACQUIRE_VM, kfd-facts §1.4). */
        const KfdOps *other[3];
        for (unsigned i = 0; i < 3; i++)
                cr_assert_eq(sim_device_add_mm(d, &other[i]), 0);
        GpuContextOptions o = { .gpu_id = 0x697D };
        int r = gpu_context_new(other[0], &o, &c);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        c = gpu_context_free(c);
        o.gpu_id = 0x1234;
        cr_expect_eq(gpu_context_new(other[1], &o, &c), -ENODEV, "no node has that gpu_id");
        cr_expect_null(c);
        /* The iGPU when named: its render node, its memory, its queue sizes. */
        o.gpu_id = 0x5A0B;
        r = gpu_context_new(other[2], &o, &c);
        cr_assert_eq(r, 0, "%s", strerror(-r));
        const GpuDeviceInfo *i = gpu_context_get_info(c);
        cr_expect_str_eq(i->gfx_name, "gfx1036");
        cr_expect_eq(i->cu_count, 2u);
        cr_expect_eq(i->drm_render_minor, 128u);
        cr_expect_eq(i->vram_size, 512u << 20);
        cr_expect_eq(gpu_buffer_new(c, 1u << 30, GPU_PLACEMENT_VRAM, false, &b), -ENOMEM, "past its 512 MiB");
        cr_assert_eq(gpu_buffer_new(c, 64 * 1024, GPU_PLACEMENT_VRAM, false, &b), 0);
        GpuJob j = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b), .size = 64 * 1024, .pattern = 0x1036u } };
        uint64_t seq = 0;
        cr_assert_eq(gpu_queue_submit(c, 0, &j, &seq), 0);
        Comps *cs = calloc(1, sizeof *cs);
        check_ok(wait_seq(c, cs, 0, seq));
        free(cs);
        cr_expect_eq(((uint32_t *) gpu_buffer_get_cpu(b))[16383], 0x1036u, "the iGPU's SDMA queue filled it");
        gpu_buffer_unref(b);
        c = gpu_context_free(c);
        d = sim_device_free(d);
        cr_expect_eq(test_count_fds(), fds, "nothing left open by the failed bring-ups");
}

/* Held doorbells (gpu_context_hold_doorbells()): a burst of SDMA jobs rings
 * the queue's doorbell once, at the release, and raises a completion
 * interrupt after every 65th small job and after the last; a job of 256 KiB
 * or more keeps its own, and the job before it too. Every job is reported,
 * in order, and did its work. Each job raises its barrier interrupt as well
 * (gpu-queue.c, "Completion"), which wakes no one: completion interrupts are
 * the device's count less one per job. */
Test(gpu_context, held_doorbells_ring_once_and_moderate_interrupts, .init = setup, .fini = teardown, .timeout = 60) {
        const unsigned n_small = 100, n_large = 4;
        GpuBuffer *b = new_buf(n_large * 512 * 1024, GPU_PLACEMENT_GTT);
        uint32_t *words = gpu_buffer_get_cpu(b);
        SimDeviceStats s0, s1;
        uint64_t last = 0;

        memset(words, 0, n_large * 512 * 1024);
        sim_device_get_stats(fx.dev, &s0);
        gpu_context_hold_doorbells(fx.ctx);
        gpu_context_hold_doorbells(fx.ctx); /* nested: the outer release rings */
        for (unsigned i = 0; i < n_small; i++) {
                GpuJob j = { .type = GPU_JOB_FILL,
                             .fill = { .dst_va = gpu_buffer_get_va(b) + i * 4, .size = 4, .pattern = i + 1 } };
                last = submit(0, &j);
        }
        gpu_context_release_doorbells(fx.ctx);
        usleep(20000);
        cr_assert_eq(words[0], 0, "no doorbell yet, no work");
        sim_device_get_stats(fx.dev, &s1);
        cr_assert_eq(s1.doorbells, s0.doorbells);
        gpu_context_release_doorbells(fx.ctx);
        wait_seq(fx.ctx, &fx.comps, 0, last);
        sim_device_get_stats(fx.dev, &s1);
        cr_assert_eq(s1.doorbells - s0.doorbells, 1, "one doorbell for the burst");
        cr_assert_eq(s1.interrupts - s0.interrupts - n_small, 2, "after job 65 and the last: got %" PRIu64,
                     s1.interrupts - s0.interrupts - n_small);
        cr_assert_eq(fx.comps.n, n_small);
        for (unsigned i = 0; i < n_small; i++) {
                cr_assert_eq(fx.comps.c[i].seq, (uint64_t) i + 1, "order");
                cr_assert_eq(fx.comps.c[i].error, 0);
                cr_assert_eq(words[i], i + 1, "word %u", i);
        }

        s0 = s1;
        gpu_context_hold_doorbells(fx.ctx);
        for (unsigned i = 0; i < n_large; i++) {
                GpuJob j = { .type = GPU_JOB_FILL,
                             .fill = { .dst_va = gpu_buffer_get_va(b) + i * 512 * 1024, .size = 512 * 1024,
                                       .pattern = 0xa0 + i } };
                last = submit(0, &j);
        }
        gpu_context_release_doorbells(fx.ctx);
        wait_seq(fx.ctx, &fx.comps, 0, last);
        sim_device_get_stats(fx.dev, &s1);
        cr_assert_eq(s1.doorbells - s0.doorbells, 1);
        cr_assert_eq(s1.interrupts - s0.interrupts - n_large, n_large, "large jobs keep their interrupts");
        for (unsigned i = 0; i < n_large; i++)
                cr_assert_eq(words[i * 128 * 1024 + 5], 0xa0 + i);

        /* A small job before a large one is not left to wait for the large
         * one's interrupt: small, large, small raise 3. */
        s0 = s1;
        gpu_context_hold_doorbells(fx.ctx);
        for (unsigned i = 0; i < 3; i++) {
                GpuJob j = { .type = GPU_JOB_FILL,
                             .fill = { .dst_va = gpu_buffer_get_va(b), .size = i == 1 ? 512 * 1024 : 4, .pattern = i } };
                last = submit(0, &j);
        }
        gpu_context_release_doorbells(fx.ctx);
        wait_seq(fx.ctx, &fx.comps, 0, last);
        sim_device_get_stats(fx.dev, &s1);
        cr_assert_eq(s1.interrupts - s0.interrupts - 3, 3);

        /* Without a hold: a doorbell and an interrupt per job. */
        s0 = s1;
        for (unsigned i = 0; i < 5; i++) {
                GpuJob j = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b), .size = 4, .pattern = i } };
                last = submit(0, &j);
                wait_seq(fx.ctx, &fx.comps, 0, last);
        }
        sim_device_get_stats(fx.dev, &s1);
        cr_assert_eq(s1.doorbells - s0.doorbells, 5);
        cr_assert_eq(s1.interrupts - s0.interrupts - 5, 5);
        gpu_buffer_unref(b);
}

/* Interrupt moderation: a job whose burst goes on with a job that
 * waits on the GPU must still raise its completion interrupt when it ends,
 * not when the waiting job ends (which may be a kernel's whole run later). */
Test(gpu_context, held_burst_job_before_a_gpu_wait_raises_its_interrupt, .init = setup, .fini = teardown,
     .timeout = 60) {
        GpuBuffer *b = new_buf(4096, GPU_PLACEMENT_GTT), *flag = new_buf(4096, GPU_PLACEMENT_GTT);
        volatile uint32_t *words = gpu_buffer_get_cpu(b), *fl = gpu_buffer_get_cpu(flag);
        SimDeviceStats s0, s1;
        double deadline;

        words[0] = 0;
        fl[0] = 0;
        sim_device_get_stats(fx.dev, &s0);
        gpu_context_hold_doorbells(fx.ctx);
        GpuJob f = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b), .size = 4, .pattern = 0x1234 } };
        uint64_t sf = submit(0, &f);
        GpuJob w = { .type = GPU_JOB_NOP, .n_waits = 1, .waits = { { .va = gpu_buffer_get_va(flag), .value = 1 } } };
        uint64_t sw = submit(0, &w);
        gpu_context_release_doorbells(fx.ctx);

        deadline = now_s() + 10;
        while (words[0] != 0x1234) {
                cr_assert_lt(now_s(), deadline, "the fill never ran");
                usleep(1000);
        }
        /* The fill is done on the GPU: its interrupt should wake the context. */
        struct pollfd p = { .fd = gpu_context_get_wake_fd(fx.ctx), .events = POLLIN };
        int k = poll(&p, 1, 500);
        sim_device_get_stats(fx.dev, &s1);
        bool woke = k == 1, raised = s1.interrupts > s0.interrupts;

        fl[0] = 1; /* let the waiting job go, then clean up */
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, sw));
        cr_assert_not_null(find_comp(&fx.comps, 0, sf));
        gpu_buffer_unref(b);
        gpu_buffer_unref(flag);
        cr_assert(raised && woke,
                  "fill seq %llu finished on the GPU but raised no interrupt (%llu raised) and did not wake the "
                  "context within 500 ms: its TRAP waits behind the next job's GPU wait",
                  (unsigned long long) sf, (unsigned long long) (s1.interrupts - s0.interrupts));
}

/* GpuContextOptions.on_events: called on the waiter thread once a wait for
 * the context's events returned, so what the engine wrote before its
 * interrupt is there to see (the daemon wakes clients sleeping on their fence
 * page from it, sessions/fence-watch.c). */
static struct {
        pthread_mutex_t lock; /* word: the test lets go of the buffer under it */
        const uint32_t *word;
        uint32_t want;
        atomic_uint calls, saw_fill;
} hook = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void count_events(void *userdata) {
        if (userdata != &hook)
                return; /* counted nowhere: the test sees no call */
        atomic_fetch_add(&hook.calls, 1);
        pthread_mutex_lock(&hook.lock);
        if (hook.word && __atomic_load_n(hook.word, __ATOMIC_ACQUIRE) == hook.want)
                atomic_fetch_add(&hook.saw_fill, 1);
        pthread_mutex_unlock(&hook.lock);
}

static void setup_hooked(void) {
        static const GpuContextOptions o = { .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT,
                                             .on_events = count_events,
                                             .on_events_userdata = &hook };
        setup_opts(&o);
}

Test(gpu_context, on_events_sees_what_the_engine_wrote_before_its_interrupt, .init = setup_hooked,
     .fini = teardown) {
        GpuBuffer *b = new_buf(4096, GPU_PLACEMENT_GTT);
        uint32_t *word = gpu_buffer_get_cpu(b);
        uint64_t seq;
        double deadline;

        *word = 0;
        pthread_mutex_lock(&hook.lock);
        hook.word = word;
        hook.want = 0x5eed1e55;
        pthread_mutex_unlock(&hook.lock);
        seq = submit(0, &(GpuJob) { .type = GPU_JOB_FILL,
                                    .fill = { .dst_va = gpu_buffer_get_va(b), .size = 4, .pattern = hook.want } });
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, seq));
        /* wait_seq() may also have seen the fence on its own: the hook's
         * call can come a little later. */
        for (deadline = now_s() + 30; atomic_load(&hook.saw_fill) == 0 && now_s() < deadline;)
                usleep(1000);
        cr_expect_geq(atomic_load(&hook.calls), 1u);
        cr_expect_geq(atomic_load(&hook.saw_fill), 1u, "a call after the fill's data landed (%u calls)",
                      atomic_load(&hook.calls));
        pthread_mutex_lock(&hook.lock);
        hook.word = NULL;
        pthread_mutex_unlock(&hook.lock);
        gpu_buffer_unref(b);
}

/* The job is done (its fence word written); its signal comes after, and the
 * hold goes at a gpu_context_process() once the queue's signal word says it
 * landed: look until then. */
static void release_held(const GpuContextStats *st0, GpuContextStats *st) {
        for (double deadline = now_s() + 30; now_s() < deadline; usleep(1000)) {
                cr_assert_geq(gpu_context_process(fx.ctx, NULL, NULL), 0);
                gpu_context_get_stats(fx.ctx, st);
                if (st->buffers == st0->buffers - 1)
                        break;
        }
        cr_assert_eq(st->buffers, st0->buffers - 1, "released once its signal landed");
}

/* A 4-byte fill at data + off that then writes 42 into slot 2 of page; with
 * gate_va, it first waits until the word there is at least 1. Its seq. */
static uint64_t submit_signalling_fill(GpuBuffer *data, uint64_t off, GpuBuffer *page, uint64_t gate_va) {
        GpuJob j = { .type = GPU_JOB_FILL,
                     .fill = { .dst_va = gpu_buffer_get_va(data) + off, .size = 4, .pattern = 7 },
                     .signal_va = gpu_buffer_get_va(page) + 8,
                     .signal_value = 42 };

        if (gate_va) {
                j.waits[0] = (GpuWait) { .va = gate_va, .value = 1 };
                j.n_waits = 1;
        }
        return submit(0, &j);
}

/* A buffer a job's signal_va FENCE writes, let go with
 * gpu_buffer_unref_after_jobs() while the job is still on the ring, stays
 * mapped until the write has landed (unmapped, the write would be a fault
 * that ends the context), and goes at a gpu_context_process() after. */
Test(gpu_context, unref_after_jobs_keeps_a_signal_target_until_its_job_is_done, .init = setup, .fini = teardown,
     .timeout = 60) {
        GpuBuffer *data = new_buf(4096, GPU_PLACEMENT_GTT), *page = new_buf(4096, GPU_PLACEMENT_GTT);
        uint64_t seq;
        GpuContextStats st0, st;

        gpu_context_get_stats(fx.ctx, &st0);
        gpu_context_hold_doorbells(fx.ctx); /* on the ring, not yet seen by the engine */
        seq = submit_signalling_fill(data, 0, page, 0);
        cr_assert_null(gpu_buffer_unref_after_jobs(page));
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers, "held while its job is on the ring");
        gpu_context_release_doorbells(fx.ctx);
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, seq));
        release_held(&st0, &st);
        cr_assert_not(gpu_context_is_lost(fx.ctx, NULL), "the signal write found its page mapped");
        gpu_buffer_unref(data);
}

/* The engine reads its ring ahead of what it executes (sim-sdma.c): its read
 * pointer is past a job's signal FENCE while the job still waits, so a hold
 * that went by the read pointer would unmap the page under the write. Here
 * the job waits for a word the test sets, long after the engine has read it. */
Test(gpu_context, unref_after_jobs_does_not_go_by_the_read_pointer, .init = setup, .fini = teardown, .timeout = 60) {
        GpuBuffer *data = new_buf(4096, GPU_PLACEMENT_GTT), *page = new_buf(4096, GPU_PLACEMENT_GTT),
                  *gate = new_buf(4096, GPU_PLACEMENT_GTT);
        volatile uint32_t *word = gpu_buffer_get_cpu(gate);
        GpuContextStats st0, st;
        uint64_t seq;

        *word = 0;
        gpu_context_get_stats(fx.ctx, &st0);
        seq = submit_signalling_fill(data, 0, page, gpu_buffer_get_va(gate));
        cr_assert_null(gpu_buffer_unref_after_jobs(page));
        /* Let the engine read all of the job, and the daemon look. */
        for (int i = 0; i < 50; i++) {
                usleep(1000);
                cr_assert_geq(gpu_context_process(fx.ctx, on_comp, &fx.comps), 0);
        }
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers, "the page is held while its job waits");
        __atomic_store_n(word, 1, __ATOMIC_RELEASE);
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, seq));
        release_held(&st0, &st);
        cr_assert_not(gpu_context_is_lost(fx.ctx, NULL), "the signal write found its page mapped");
        gpu_buffer_unref(gate);
        gpu_buffer_unref(data);
}

/* Between a job's fence word and its signal: the job is reported done, and
 * its signal is still to come. The test stands in for the engine's first
 * write (doorbells held, it writes the fence word itself) to stop at that
 * moment: the page must stay held, or the engine's signal FENCE faults. */
Test(gpu_context, unref_after_jobs_does_not_go_by_the_fence_word, .init = setup, .fini = teardown, .timeout = 60) {
        GpuBuffer *data = new_buf(4096, GPU_PLACEMENT_GTT), *page = new_buf(4096, GPU_PLACEMENT_GTT);
        GpuContextStats st0, st;
        uint64_t seq;

        gpu_context_get_stats(fx.ctx, &st0);
        gpu_context_hold_doorbells(fx.ctx);
        seq = submit_signalling_fill(data, 0, page, 0);
        cr_assert_null(gpu_buffer_unref_after_jobs(page));
        __atomic_store_n(gpu_queue_fence_word(fx.ctx, 0), (uint32_t) seq, __ATOMIC_RELEASE);
        cr_assert_eq(wait_seq(fx.ctx, &fx.comps, 0, seq)->error, 0, "reported done"); /* no timestamps: not run */
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers, "the page is held while its job's signal is still to come");
        gpu_context_release_doorbells(fx.ctx);
        release_held(&st0, &st);
        cr_assert_not(gpu_context_is_lost(fx.ctx, NULL), "the signal write found its page mapped");
        gpu_buffer_unref(data);
}

/* A queue made again (here: its head job aborted, as a timeout does) writes
 * the jobs behind the head once more, signals included: a hold taken before
 * keeps the page until the job's write on the new queue has landed. */
Test(gpu_context, unref_after_jobs_holds_across_a_queue_made_again, .init = setup, .fini = teardown, .timeout = 60) {
        GpuBuffer *data = new_buf(4096, GPU_PLACEMENT_GTT), *page = new_buf(4096, GPU_PLACEMENT_GTT),
                  *gate = new_buf(4096, GPU_PLACEMENT_GTT);
        volatile uint32_t *word = gpu_buffer_get_cpu(gate);
        GpuContextStats st0, st;
        uint64_t stuck, writer;

        word[0] = word[1] = 0;
        gpu_context_get_stats(fx.ctx, &st0);
        /* Another session's job that waits for ever, and behind it the gone
         * session's job that writes the page. */
        stuck = submit(0, &(GpuJob) { .type = GPU_JOB_FILL,
                                      .fill = { .dst_va = gpu_buffer_get_va(data), .size = 4, .pattern = 1 },
                                      .waits = { { .va = gpu_buffer_get_va(gate), .value = 1 } },
                                      .n_waits = 1 });
        writer = submit_signalling_fill(data, 64, page, gpu_buffer_get_va(gate) + 4);
        cr_assert_null(gpu_buffer_unref_after_jobs(page));
        cr_assert_eq(gpu_queue_abort(fx.ctx, 0, stuck, -ETIMEDOUT, on_comp, &fx.comps), 1);
        cr_assert_eq(wait_seq(fx.ctx, &fx.comps, 0, stuck)->error, -ETIMEDOUT);
        for (int i = 0; i < 20; i++) {
                usleep(1000);
                cr_assert_geq(gpu_context_process(fx.ctx, on_comp, &fx.comps), 0);
        }
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers, "the page is held while the job emitted again is still to write it");
        word[1] = 1;
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, writer));
        release_held(&st0, &st);
        cr_assert_not(gpu_context_is_lost(fx.ctx, NULL), "the signal write found its page mapped");
        gpu_buffer_unref(gate);
        gpu_buffer_unref(data);
}

/* A job with a signal that is aborted never writes it, nor does the queue
 * made again: a hold on the queue's signals goes without waiting for a
 * later job. */
Test(gpu_context, unref_after_jobs_does_not_wait_for_an_aborted_signal, .init = setup, .fini = teardown,
     .timeout = 60) {
        GpuBuffer *data = new_buf(4096, GPU_PLACEMENT_GTT), *page = new_buf(4096, GPU_PLACEMENT_GTT),
                  *other = new_buf(4096, GPU_PLACEMENT_GTT), *gate = new_buf(4096, GPU_PLACEMENT_GTT);
        volatile uint32_t *word = gpu_buffer_get_cpu(gate);
        GpuContextStats st0, st;
        uint64_t seq;

        word[0] = 0;
        gpu_context_get_stats(fx.ctx, &st0);
        seq = submit_signalling_fill(data, 0, page, gpu_buffer_get_va(gate));
        cr_assert_null(gpu_buffer_unref_after_jobs(page));
        cr_assert_eq(gpu_queue_abort(fx.ctx, 0, seq, -ETIMEDOUT, on_comp, &fx.comps), 1);
        cr_assert_eq(wait_seq(fx.ctx, &fx.comps, 0, seq)->error, -ETIMEDOUT);
        cr_assert_geq(gpu_context_process(fx.ctx, on_comp, &fx.comps), 0);
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers - 1, "the aborted job's page went with the queue made again");
        /* A hold taken after, on a queue now idle, goes at once too. */
        cr_assert_null(gpu_buffer_unref_after_jobs(other));
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers - 2, "nothing of the queue's is still to write");
        cr_assert_not(gpu_context_is_lost(fx.ctx, NULL));
        gpu_buffer_unref(gate);
        gpu_buffer_unref(data);
}

/* A relay's shape: a job of one context (the writer) signals a word of a
 * buffer of another, through the buffer's mapping in the writer, which goes
 * with the buffer's last reference. Let go with
 * gpu_buffer_unref_after_jobs_of() between the writer's fence word and the
 * signal (the test writes the fence word, as in ..._by_the_fence_word), the
 * buffer and that mapping stay until the signal has landed. */
Test(gpu_context, unref_after_jobs_of_keeps_what_another_context_writes, .init = setup, .fini = teardown,
     .timeout = 60) {
        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY };
        GpuContext *home = NULL;
        GpuBuffer *word = NULL, *shadow = NULL;
        GpuContextStats st;
        uint64_t seq;

        cr_assert_eq(gpu_context_new(fx.ops, &o, &home), 0);
        cr_assert_eq(gpu_buffer_new(home, 4096, GPU_PLACEMENT_GTT, false, &word), 0);
        cr_assert_eq(gpu_buffer_map_in(word, fx.ctx, &shadow), 0);
        gpu_context_hold_doorbells(fx.ctx);
        seq = submit(0, &(GpuJob) { .type = GPU_JOB_NOP, .signal_va = gpu_buffer_get_va(shadow), .signal_value = 7 });
        cr_assert_null(gpu_buffer_unref_after_jobs_of(word, fx.ctx));
        __atomic_store_n(gpu_queue_fence_word(fx.ctx, 0), (uint32_t) seq, __ATOMIC_RELEASE);
        cr_assert_eq(wait_seq(fx.ctx, &fx.comps, 0, seq)->error, 0, "reported done");
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.mapped_buffers, 1u, "the mapping stays while the signal is still to come");
        /* Its own context may go first: the hold keeps the buffer. */
        home = gpu_context_free(home);
        gpu_context_release_doorbells(fx.ctx);
        for (double deadline = now_s() + 30; now_s() < deadline && st.mapped_buffers > 0; usleep(1000)) {
                cr_assert_geq(gpu_context_process(fx.ctx, NULL, NULL), 0);
                gpu_context_get_stats(fx.ctx, &st);
        }
        cr_assert_eq(st.mapped_buffers, 0u, "gone once the signal landed");
        cr_assert_not(gpu_context_is_lost(fx.ctx, NULL), "the signal write found its mapping");
}

/* With nothing on the rings the buffer goes at once; a buffer someone else
 * still holds is only unreferenced. */
Test(gpu_context, unref_after_rings_with_idle_rings_is_an_unref, .init = setup, .fini = teardown) {
        GpuBuffer *page = new_buf(4096, GPU_PLACEMENT_GTT);
        GpuContextStats st0, st;

        gpu_context_get_stats(fx.ctx, &st0);
        gpu_buffer_ref(page);
        cr_assert_null(gpu_buffer_unref_after_jobs(page));
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers);
        cr_assert_null(gpu_buffer_unref_after_jobs(page));
        gpu_context_get_stats(fx.ctx, &st);
        cr_assert_eq(st.buffers, st0.buffers - 1);
        cr_assert_null(gpu_buffer_unref_after_jobs(NULL));
}

static void setup_igpu_first(void) {
        /* The context on the discrete GPU (kfd_gpu_choose()'s default), an iGPU beside it. */
        setup_sim(&(SimOptions) { .igpu_first = true }, NULL);
}

/* A reset of another GPU is said to every KFD process, naming that GPU
 * (kfd_signal_reset_event); the context's own GPU was not reset, so its
 * queues go on. A reset of its own GPU loses it. */
Test(gpu_context, a_reset_of_another_gpu_leaves_the_context_running, .init = setup_igpu_first, .fini = teardown,
     .timeout = 60) {
        const uint64_t size = 64 * 1024;
        const uint32_t igpu = 0x5A0B;
        GpuBuffer *dst = new_buf(size, GPU_PLACEMENT_GTT);
        GpuJob fill = { .type = GPU_JOB_FILL,
                        .fill = { .dst_va = gpu_buffer_get_va(dst), .size = size, .pattern = 0x12345678 } };
        const char *why = NULL;
        GpuContextStats st;

        cr_assert_neq(gpu_context_get_info(fx.ctx)->gpu_id, igpu, "the context is on the discrete GPU");
        cr_assert_eq(sim_device_reset_gpu(fx.dev, igpu, true), 0);
        /* The waiter sees the exception; the next completions come after it. */
        check_ok(wait_seq(fx.ctx, &fx.comps, 0, submit(0, &fill)));
        gpu_context_get_stats(fx.ctx, &st);
        cr_expect_geq(st.faults, 1u, "the reset was seen");
        cr_expect(!gpu_context_is_lost(fx.ctx, &why), "lost: %s", why ? why : "");
        cr_expect_eq(((uint32_t *) gpu_buffer_get_cpu(dst))[size / 4 - 1], 0x12345678u);

        cr_assert_eq(sim_device_reset_gpu(fx.dev, gpu_context_get_info(fx.ctx)->gpu_id, false), 0);
        for (int i = 0; i < 3000 && !gpu_context_is_lost(fx.ctx, &why); i++) {
                struct pollfd p = { .fd = gpu_context_get_wake_fd(fx.ctx), .events = POLLIN };
                (void) poll(&p, 1, 10);
                (void) gpu_context_process(fx.ctx, on_comp, &fx.comps);
        }
        cr_expect(gpu_context_is_lost(fx.ctx, &why), "its own GPU's reset loses it");
        cr_expect(why && strstr(why, "the GPU was reset"), "%s", why ? why : "(null)");
        gpu_buffer_unref(dst);
}
