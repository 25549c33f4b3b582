/* SPDX-License-Identifier: MIT */
/*
 * The cache maintenance of the GPU layer's job streams (gpu-queue.c "HDP
 * flush", gpu-dispatch.c DISPATCH_ACQUIRE_GCR and FENCE_GCR, sdma.h
 * SDMA_GCR_ACQUIRE/RELEASE), checked against the simulator's HDP, GL2 and
 * instruction cache (daemon/sim/sim-cache.h), where a missing flush or
 * invalidate leaves stale data as on the hardware. Each test names the
 * flushes it needs: take one out of the daemon and the test fails.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "dispatch-test.h"
#include "gpu-test.h"
#include "gpu/gpu-internal.h" /* white box: the code object's buffer */

#define N 4096u
#define SDMA_QUEUE 0u

static void set_floats(GpuBuffer *b, float base) {
        float *p = gpu_buffer_get_cpu(b);
        for (uint32_t i = 0; i < N; i++)
                p[i] = base + (float) i;
}

/* c = a + b over N floats on the compute queue, checked complete. */
static void add(GpuCodeObject *co, GpuBuffer *a, GpuBuffer *b, GpuBuffer *c) {
        const GpuKernel *k = kernel_of(co, "vector_add");
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(a));
        arg_ptr(&args, k, gpu_buffer_get_va(b));
        arg_ptr(&args, k, gpu_buffer_get_va(c));
        arg_u32(&args, k, N);
        GpuJob j = dispatch_job(co, "vector_add", N, 256, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
}

static void sdma(const GpuJob *j) {
        check_ok(wait_seq(fx.ctx, &fx.comps, SDMA_QUEUE, submit(SDMA_QUEUE, j)));
}

static void copy(GpuBuffer *dst, GpuBuffer *src) {
        sdma(&(GpuJob) { .type = GPU_JOB_COPY, .copy = { .src_va = gpu_buffer_get_va(src),
                                                         .dst_va = gpu_buffer_get_va(dst), .size = N * 4 } });
}

static void expect_floats(GpuBuffer *b, float base, const char *what) {
        const float *p = gpu_buffer_get_cpu(b);
        for (uint32_t i = 0; i < N; i++)
                cr_assert_eq(p[i], base + (float) i, "%s: [%u] = %f, not %f", what, i, p[i], base + (float) i);
}

/* Needs the HDP flush before the doorbell and GL2_INV in the dispatch's
 * ACQUIRE_MEM: the CPU's writes into a VRAM buffer reach a dispatch, also
 * the second time, when the GL2 holds the buffer's old lines. */
Test(gpu_caches, cpu_writes_into_vram_reach_a_dispatch, .init = setup, .fini = teardown, .timeout = 60) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *in = new_buf(N * 4, GPU_PLACEMENT_VRAM), *zero = new_buf(N * 4, GPU_PLACEMENT_GTT),
                  *out = new_buf(N * 4, GPU_PLACEMENT_GTT);
        memset(gpu_buffer_get_cpu(zero), 0, N * 4);

        set_floats(in, 1000.0f);
        add(co, in, zero, out);
        expect_floats(out, 1000.0f, "first dispatch");
        set_floats(in, 5000.0f);
        add(co, in, zero, out);
        expect_floats(out, 5000.0f, "second dispatch (the GL2 held the old lines)");
        gpu_buffer_unref(in);
        gpu_buffer_unref(zero);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

/* Needs GL2_WB in the fence's RELEASE_MEM: what a dispatch wrote into VRAM
 * is in memory when the CPU sees the job complete. */
Test(gpu_caches, a_dispatch_result_in_vram_reaches_the_cpu, .init = setup, .fini = teardown, .timeout = 60) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *a = new_buf(N * 4, GPU_PLACEMENT_GTT), *zero = new_buf(N * 4, GPU_PLACEMENT_GTT),
                  *out = new_buf(N * 4, GPU_PLACEMENT_VRAM);
        memset(gpu_buffer_get_cpu(zero), 0, N * 4);
        memset(gpu_buffer_get_cpu(out), 0xFF, N * 4);

        set_floats(a, 7.0f);
        add(co, a, zero, out);
        expect_floats(out, 7.0f, "the dispatch's result, read by the CPU");
        gpu_buffer_unref(a);
        gpu_buffer_unref(zero);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

/* v_add_f32_e32 v2, v2, v3 in vector_add (llvm-objdump-15 of
 * vector-add.hsaco); v_sub_f32_e32 is VOP2 opcode 4 instead of 3
 * (bits 30:25). */
#define V_ADD_F32_V2_V2_V3 0x06040702u
#define V_SUB_F32_V2_V2_V3 0x08040702u

/* Needs GLI_INV in the dispatch's ACQUIRE_MEM: new code at the address of
 * code that ran before (a code object loaded where a freed one was) runs,
 * not the instruction cache's copy of the old. */
Test(gpu_caches, new_code_at_an_old_address_runs, .init = setup, .fini = teardown, .timeout = 60) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *a = new_buf(N * 4, GPU_PLACEMENT_GTT), *b = new_buf(N * 4, GPU_PLACEMENT_GTT),
                  *out = new_buf(N * 4, GPU_PLACEMENT_GTT);
        memset(gpu_buffer_get_cpu(b), 0, N * 4);
        float *pb = gpu_buffer_get_cpu(b);
        for (uint32_t i = 0; i < N; i++)
                pb[i] = 1.0f;
        set_floats(a, 100.0f);

        add(co, a, b, out);
        expect_floats(out, 101.0f, "a + b");

        uint32_t *code = gpu_buffer_get_cpu(co->code);
        unsigned patched = 0;
        for (uint64_t i = 0; i < co->image_size / 4; i++)
                if (code[i] == V_ADD_F32_V2_V2_V3) {
                        code[i] = V_SUB_F32_V2_V2_V3;
                        patched++;
                }
        cr_assert_eq(patched, 1u, "the kernel's one v_add_f32");
        add(co, a, b, out);
        expect_floats(out, 99.0f, "a - b: the new instruction ran");
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

/* Needs the HDP flush and the GL2_INV of the SDMA acquire GCR_REQ: the
 * CPU's writes into VRAM reach an SDMA copy, also the second time. */
Test(gpu_caches, cpu_writes_into_vram_reach_an_sdma_copy, .init = setup, .fini = teardown, .timeout = 60) {
        GpuBuffer *src = new_buf(N * 4, GPU_PLACEMENT_VRAM), *dst = new_buf(N * 4, GPU_PLACEMENT_GTT);

        set_floats(src, 10.0f);
        copy(dst, src);
        expect_floats(dst, 10.0f, "first copy");
        set_floats(src, 20.0f);
        copy(dst, src);
        expect_floats(dst, 20.0f, "second copy (the GL2 held the old lines)");
        gpu_buffer_unref(src);
        gpu_buffer_unref(dst);
}

/* Needs GL2_WB in the SDMA release GCR_REQ: what a copy or a fill wrote into
 * VRAM is in memory when the CPU sees the job complete. */
Test(gpu_caches, sdma_writes_into_vram_reach_the_cpu, .init = setup, .fini = teardown, .timeout = 60) {
        GpuBuffer *src = new_buf(N * 4, GPU_PLACEMENT_GTT), *dst = new_buf(N * 4, GPU_PLACEMENT_VRAM);

        set_floats(src, 30.0f);
        copy(dst, src);
        expect_floats(dst, 30.0f, "the copy's bytes, read by the CPU");
        sdma(&(GpuJob) { .type = GPU_JOB_FILL,
                         .fill = { .dst_va = gpu_buffer_get_va(dst), .size = N * 4, .pattern = 0x5A5A5A5Au } });
        const uint32_t *p = gpu_buffer_get_cpu(dst);
        for (uint32_t i = 0; i < N; i++)
                cr_assert_eq(p[i], 0x5A5A5A5Au, "the fill's dword %u, read by the CPU: 0x%08x", i, p[i]);
        gpu_buffer_unref(src);
        gpu_buffer_unref(dst);
}

/* A dispatch and an SDMA copy share the GL2: what the dispatch wrote into
 * VRAM is what the copy reads; the part of the buffer the GPU never wrote
 * keeps what the CPU put there. */
Test(gpu_caches, engines_share_the_gl2, .init = setup, .fini = teardown, .timeout = 60) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *a = new_buf(N * 4, GPU_PLACEMENT_GTT), *zero = new_buf(N * 4, GPU_PLACEMENT_GTT),
                  *mid = new_buf(2 * N * 4, GPU_PLACEMENT_VRAM), *dst = new_buf(N * 4, GPU_PLACEMENT_GTT);
        memset(gpu_buffer_get_cpu(zero), 0, N * 4);
        float *pm = gpu_buffer_get_cpu(mid);
        for (uint32_t i = 0; i < 2 * N; i++)
                pm[i] = -1.0f;

        set_floats(a, 3.0f);
        add(co, a, zero, mid); /* the first half of mid */
        copy(dst, mid);
        expect_floats(dst, 3.0f, "the copy read the dispatch's result");
        expect_floats(mid, 3.0f, "the first half, written back");
        for (uint32_t i = N; i < 2 * N; i++)
                cr_assert_eq(pm[i], -1.0f, "mid[%u], which the GPU never wrote, is the CPU's: %f", i, pm[i]);
        gpu_buffer_unref(a);
        gpu_buffer_unref(zero);
        gpu_buffer_unref(mid);
        gpu_buffer_unref(dst);
        gpu_code_object_unref(co);
}
