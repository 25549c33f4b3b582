/* SPDX-License-Identifier: MIT */
/*
 * The cache maintenance of the GPU layer's job streams, checked against the
 * simulator's HDP, GL2, instruction, scalar data, vector L0 and GL1 caches
 * (daemon/sim/sim-cache.h, daemon/sim/isa/sim-isa-vcache.c), where a missing
 * flush or invalidate leaves stale data as on the hardware. Every flush the streams emit has a name (GpuFlush,
 * gpu-internal.h); each test below runs a scenario with every flush and
 * again with one left out (gpu_context_test_omit_flushes(), for tests only),
 * and the second run must see stale data: a flush taken out of the daemon is
 * caught. Every test runs in both context mechanisms: a secondary context on
 * the default simulated kernel (sessions' contexts in the daemon) and a
 * primary one on KFD 1.18 (a worker process's).
 *
 * flush                   | without it                                   | test
 * ------------------------+----------------------------------------------+------------------------------
 * HDP (queue_kick)        | the CPU's writes into VRAM wait in the HDP;  | cpu_writes_into_vram_reach_a_
 *                         | a dispatch or a copy reads the old bytes     | dispatch / _an_sdma_copy
 * DISPATCH_GL2_INV        | the GL2 keeps a VRAM buffer's lines from     | cpu_writes_into_vram_reach_a_
 *                         | before the CPU's writes: the dispatch reads  | dispatch
 *                         | the old values                               |
 * DISPATCH_GLI_INV        | new code loaded where old code ran: the      | new_code_at_an_old_address_runs
 *                         | instruction cache runs the old               |
 * DISPATCH_GLK_INV        | a kernarg slot is reused every max_inflight  | kernel_arguments_in_a_reused_
 *                         | jobs: the K$ hands the kernel the arguments  | slot_are_read
 *                         | (pointers) of the dispatch before, which     |
 *                         | writes the old output buffer again           |
 * FENCE_GL2_WB            | a dispatch's VRAM result is still in the GL2 | a_dispatch_result_in_vram_
 *                         | when the CPU sees the fence word             | reaches_the_cpu
 * SDMA_ACQUIRE_GL2_INV    | a copy reads the GL2's old lines of VRAM the | cpu_writes_into_vram_reach_an_
 *                         | CPU wrote                                    | sdma_copy
 * SDMA_RELEASE_GL2_WB     | a copy's or a fill's VRAM bytes are still in | sdma_writes_into_vram_reach_
 *                         | the GL2 when the CPU sees the fence word     | the_cpu
 * SDMA_ACQUIRE_GLK        | nothing alone: every dispatch invalidates    | kernel_arguments_in_a_reused_
 *                         | the K$ itself. With DISPATCH_GLK_INV also    | slot_are_read_after_a_copy
 *                         | left out, a copy between two dispatches is   |
 *                         | what drops the stale arguments (shown both   |
 *                         | ways)                                        |
 * DISPATCH_GL2_WB,        | nothing in the daemon's own streams: every   | none (cannot fail)
 * SDMA_ACQUIRE_GL2_WB     | job ends with a GL2 write-back before its    |
 *                         | fence, so no line is dirty when the next     |
 *                         | acquire comes; the model keeps dirty lines   |
 *                         | across GL2_INV. Kept because the kernel      |
 *                         | (gfx_v10_0_emit_mem_sync), Mesa (INV_L2 is   |
 *                         | GL2_INV and GL2_WB) and ROCr never send      |
 *                         | GL2_INV alone (what it does to dirty lines   |
 *                         | is not public), and relayed work need not    |
 *                         | write back at its end                        |
 * DISPATCH_GLV_INV        | the vector L0 keeps the lines an earlier     | cpu_writes_reach_a_dispatch_
 *                         | dispatch read: the CPU's new values in a GTT | past_the_vector_caches
 *                         | buffer are not seen                          |
 * DISPATCH_GL1_INV        | the GL1 keeps them: the L0, invalidated,     | cpu_writes_reach_a_dispatch_
 *                         | refills from the GL1's old lines             | past_the_vector_caches
 * SDMA_ACQUIRE_GLV_GL1    | nothing alone: every dispatch invalidates    | cpu_writes_reach_a_dispatch_
 *                         | its L0 and GL1 itself. With the dispatch's   | past_the_vector_caches_after_
 *                         | GLV_INV and GL1_INV also left out, a copy    | a_copy
 *                         | between two dispatches is what drops them    |
 * DISPATCH_GLK_WB,        | scalar stores reach memory late; the         | none: the interpreter refuses
 * SDMA_ACQUIRE_GLK (WB),  | interpreter has none (LLVM ends a kernel     | scalar stores
 * SDMA_RELEASE_GLK_WB     | that has them with s_dcache_wb itself)       |
 * DISPATCH_GLM,           | GL2 metadata (DCC/HTILE of compressed        | none: KFD buffers are not
 * FENCE_GLM               | surfaces); compute buffers have none         | compressed; not modelled
 * (event slot RELEASE_MEM)| carries no GCR any more: it follows the      | —
 *                         | fence's, which wrote everything back         |
 *
 * The ROCm queue relay (daemon/sessions/kfd-relay*) emits no flush of its
 * own. The HDP flush before relayed work is the one every queue's doorbell
 * gets (HDP above: the relay's queues are queues of a context like any
 * other, and submit through gpu_queue_submit()). ROCr's PM4-IB packet and an
 * AQL header's acquire scope become an ACQUIRE_MEM with the dispatch
 * acquire's bits (the DISPATCH_* rows): before a relayed kernel it does
 * nothing the kernel's own acquire does not do again, so leaving it out is
 * not observable here — what it stands for on hardware (caches cleaned after
 * ROCr wrote code) is the dispatch acquire's GLI_INV, which
 * new_code_at_an_old_address_runs covers. A relayed SDMA packet's caches are
 * its own (BlitSdma writes its own GCR_REQ packets, which run as written).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "dispatch-test.h"
#include "gpu-test.h"
#include "gpu/gpu-internal.h" /* white box: the code object's buffer, the flush switch */

#define N 4096u
#define SDMA_QUEUE 0u
/* Kernarg slots come back every MAX_INFLIGHT jobs of a queue. */
#define MAX_INFLIGHT 2u

/* No interpreter helpers: a queue's workgroups all run on its CP thread,
 * whose vector L0 and GL1 (sim-isa-vcache.c) are then the ones every
 * dispatch of the queue reads through — stale lines are found, not left on
 * another thread. */
static void setup_secondary(void) {
        setup_sim(&(SimOptions) { .isa_helpers = -1 },
                  &(GpuContextOptions) { .flags = GPU_CONTEXT_SECONDARY, .max_inflight = MAX_INFLIGHT });
}

static void setup_worker(void) {
        setup_sim(&(SimOptions) { .kfd_minor = 18, .isa_helpers = -1 },
                  &(GpuContextOptions) { .max_inflight = MAX_INFLIGHT });
}

/* A test in both context mechanisms. */
#define BOTH(name)                                                                                  \
        static void name(void);                                                                     \
        Test(gpu_caches_secondary, name, .init = setup_secondary, .fini = teardown, .timeout = 60) { \
                name();                                                                             \
        }                                                                                           \
        Test(gpu_caches_worker, name, .init = setup_worker, .fini = teardown, .timeout = 60) {      \
                name();                                                                             \
        }                                                                                           \
        static void name(void)

static void omit(uint32_t flushes) {
        gpu_context_test_omit_flushes(fx.ctx, flushes);
}

#define F(x) (1u << GPU_FLUSH_##x)

static void set_floats(GpuBuffer *b, float base) {
        float *p = gpu_buffer_get_cpu(b);
        for (uint32_t i = 0; i < N; i++)
                p[i] = base + (float) i;
}

/* The floats of b that are not base + i. */
static unsigned wrong_floats(GpuBuffer *b, float base) {
        const float *p = gpu_buffer_get_cpu(b);
        unsigned n = 0;
        for (uint32_t i = 0; i < N; i++)
                n += p[i] != base + (float) i;
        return n;
}

/* The floats of b that are not 2 * (base + i). */
static unsigned wrong_doubled(GpuBuffer *b, float base) {
        const float *p = gpu_buffer_get_cpu(b);
        unsigned n = 0;
        for (uint32_t i = 0; i < N; i++)
                n += p[i] != 2.0f * (base + (float) i);
        return n;
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

static GpuBuffer *zeros(GpuPlacement pl) {
        GpuBuffer *b = new_buf(N * 4, pl);
        memset(gpu_buffer_get_cpu(b), 0, N * 4);
        return b;
}

/* The CPU writes a VRAM buffer, a dispatch reads it; twice, the second time
 * with the GL2 holding the buffer's lines from the first. Returns the wrong
 * floats of both results. Needs the HDP flush and DISPATCH_GL2_INV. */
static unsigned cpu_to_dispatch(void) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *in = new_buf(N * 4, GPU_PLACEMENT_VRAM), *zero = zeros(GPU_PLACEMENT_GTT),
                  *out = new_buf(N * 4, GPU_PLACEMENT_GTT);
        unsigned wrong;

        set_floats(in, 1000.0f);
        add(co, in, zero, out);
        wrong = wrong_floats(out, 1000.0f);
        set_floats(in, 5000.0f);
        add(co, in, zero, out);
        wrong += wrong_floats(out, 5000.0f);
        gpu_buffer_unref(in);
        gpu_buffer_unref(zero);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
        return wrong;
}

BOTH(cpu_writes_into_vram_reach_a_dispatch) {
        cr_assert_eq(cpu_to_dispatch(), 0u, "every flush: the dispatches read what the CPU wrote");
        omit(F(HDP));
        cr_assert_gt(cpu_to_dispatch(), 0u, "without the HDP flush the CPU's writes must stay unseen");
        omit(F(DISPATCH_GL2_INV));
        cr_assert_gt(cpu_to_dispatch(), 0u, "without GL2_INV the GL2's old lines must be read");
}

/* A dispatch writes a VRAM buffer the CPU then reads. Returns the wrong
 * floats. Needs FENCE_GL2_WB. */
static unsigned dispatch_to_cpu(void) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *a = new_buf(N * 4, GPU_PLACEMENT_GTT), *zero = zeros(GPU_PLACEMENT_GTT),
                  *out = new_buf(N * 4, GPU_PLACEMENT_VRAM);
        unsigned wrong;

        memset(gpu_buffer_get_cpu(out), 0xFF, N * 4);
        set_floats(a, 7.0f);
        add(co, a, zero, out);
        wrong = wrong_floats(out, 7.0f);
        gpu_buffer_unref(a);
        gpu_buffer_unref(zero);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
        return wrong;
}

BOTH(a_dispatch_result_in_vram_reaches_the_cpu) {
        cr_assert_eq(dispatch_to_cpu(), 0u, "every flush: the CPU reads the dispatch's result");
        omit(F(FENCE_GL2_WB));
        cr_assert_gt(dispatch_to_cpu(), 0u, "without the fence's GL2_WB the result must stay in the GL2");
}

/* v_add_f32_e32 v2, v2, v3 in vector_add (llvm-objdump-15 of
 * vector-add.hsaco); v_sub_f32_e32 is VOP2 opcode 4 instead of 3
 * (bits 30:25). */
#define V_ADD_F32_V2_V2_V3 0x06040702u
#define V_SUB_F32_V2_V2_V3 0x08040702u

/* New code at the address of code that ran before (a code object loaded
 * where a freed one was): a + b, then the kernel patched to a - b. Returns
 * the wrong floats of both runs (a run after one that left the instruction
 * cache holding a - b at this address, without GLI_INV, gets the first
 * wrong). Needs DISPATCH_GLI_INV. */
static unsigned new_code(void) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *a = new_buf(N * 4, GPU_PLACEMENT_GTT), *b = new_buf(N * 4, GPU_PLACEMENT_GTT),
                  *out = new_buf(N * 4, GPU_PLACEMENT_GTT);
        float *pb = gpu_buffer_get_cpu(b);
        unsigned wrong, patched = 0;

        for (uint32_t i = 0; i < N; i++)
                pb[i] = 1.0f;
        set_floats(a, 100.0f);
        add(co, a, b, out);
        wrong = wrong_floats(out, 101.0f);

        uint32_t *code = gpu_buffer_get_cpu(co->code);
        for (uint64_t i = 0; i < co->image_size / 4; i++)
                if (code[i] == V_ADD_F32_V2_V2_V3) {
                        code[i] = V_SUB_F32_V2_V2_V3;
                        patched++;
                }
        cr_assert_eq(patched, 1u, "the kernel's one v_add_f32");
        add(co, a, b, out);
        wrong += wrong_floats(out, 99.0f);
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
        return wrong;
}

BOTH(new_code_at_an_old_address_runs) {
        cr_assert_eq(new_code(), 0u, "every flush: a - b, the new instruction ran");
        omit(F(DISPATCH_GLI_INV));
        cr_assert_gt(new_code(), 0u, "without GLI_INV the instruction cache's old code must run");
}

/* The CPU writes a GTT buffer, a dispatch reads it (in + in: one input, so
 * its 128 lines fill the L0 without evicting one another); twice, the
 * second time with the L0 and the GL1 holding the first one's lines. between:
 * an SDMA copy before the second. Returns the wrong floats of both results.
 * Needs DISPATCH_GLV_INV and DISPATCH_GL1_INV (or, between,
 * SDMA_ACQUIRE_GLV_GL1). */
static unsigned vector_caches(bool between) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *in = new_buf(N * 4, GPU_PLACEMENT_GTT), *out = new_buf(N * 4, GPU_PLACEMENT_GTT),
                  *zero = zeros(GPU_PLACEMENT_GTT), *scratch = zeros(GPU_PLACEMENT_GTT);
        unsigned wrong;

        set_floats(in, 1000.0f);
        add(co, in, in, out);
        wrong = wrong_doubled(out, 1000.0f);
        set_floats(in, 5000.0f);
        if (between)
                copy(scratch, zero);
        add(co, in, in, out);
        wrong += wrong_doubled(out, 5000.0f);
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_buffer_unref(zero);
        gpu_buffer_unref(scratch);
        gpu_code_object_unref(co);
        return wrong;
}

BOTH(cpu_writes_reach_a_dispatch_past_the_vector_caches) {
        cr_assert_eq(vector_caches(false), 0u, "every flush: the second dispatch read the CPU's new values");
        omit(F(DISPATCH_GLV_INV));
        cr_assert_gt(vector_caches(false), 0u, "without GLV_INV the L0 must hand out the first dispatch's lines");
        omit(F(DISPATCH_GL1_INV));
        cr_assert_gt(vector_caches(false), 0u, "without GL1_INV the GL1 must refill the L0 with old lines");
}

BOTH(cpu_writes_reach_a_dispatch_past_the_vector_caches_after_a_copy) {
        omit(F(DISPATCH_GLV_INV) | F(DISPATCH_GL1_INV));
        cr_assert_eq(vector_caches(true), 0u, "the copy's acquire GCR_REQ dropped the L0 and GL1 lines");
        omit(F(DISPATCH_GLV_INV) | F(DISPATCH_GL1_INV) | F(SDMA_ACQUIRE_GLV_GL1));
        cr_assert_gt(vector_caches(true), 0u, "without any GLV_INV/GL1_INV the old lines must be read");
}

/* The buffers of reused_kernarg_slot(), alive for the whole test: a
 * dispatch handed stale arguments writes into one of them, not into freed
 * memory. */
typedef struct Slots {
        GpuCodeObject *co;
        GpuBuffer *a[3], *out[3], *zero, *scratch;
} Slots;

static void slots_new(Slots *s) {
        s->co = load_kernel_file("vector-add.hsaco");
        s->zero = zeros(GPU_PLACEMENT_GTT);
        s->scratch = zeros(GPU_PLACEMENT_GTT);
        for (unsigned i = 0; i < 3; i++) {
                s->a[i] = new_buf(N * 4, GPU_PLACEMENT_GTT);
                set_floats(s->a[i], 1000.0f * (float) (i + 1));
                s->out[i] = new_buf(N * 4, GPU_PLACEMENT_GTT);
        }
}

static void slots_free(Slots *s) {
        for (unsigned i = 0; i < 3; i++) {
                gpu_buffer_unref(s->a[i]);
                gpu_buffer_unref(s->out[i]);
        }
        gpu_buffer_unref(s->zero);
        gpu_buffer_unref(s->scratch);
        gpu_code_object_unref(s->co);
}

/* Three dispatches on the compute queue, each from an input into an output
 * of its own; with MAX_INFLIGHT 2 each reuses the kernarg slot of the one
 * two jobs before, whose words the scalar data cache read then. between: an
 * SDMA copy before the third. Returns the wrong floats of the three outputs.
 * Needs DISPATCH_GLK_INV (or, between, SDMA_ACQUIRE_GLK). */
static unsigned reused_kernarg_slot(Slots *s, bool between) {
        unsigned wrong = 0;

        for (unsigned i = 0; i < 3; i++)
                memset(gpu_buffer_get_cpu(s->out[i]), 0, N * 4);
        for (unsigned i = 0; i < 3; i++) {
                if (between && i == 2)
                        copy(s->scratch, s->zero);
                add(s->co, s->a[i], s->zero, s->out[i]);
        }
        for (unsigned i = 0; i < 3; i++)
                wrong += wrong_floats(s->out[i], 1000.0f * (float) (i + 1));
        return wrong;
}

BOTH(kernel_arguments_in_a_reused_slot_are_read) {
        Slots s;

        slots_new(&s);
        cr_assert_eq(reused_kernarg_slot(&s, false), 0u, "every flush: each dispatch read its own arguments");
        omit(F(DISPATCH_GLK_INV));
        cr_assert_gt(reused_kernarg_slot(&s, false), 0u,
                     "without GLK_INV the K$ must hand a dispatch the arguments of the one two jobs before");
        slots_free(&s);
}

BOTH(kernel_arguments_in_a_reused_slot_are_read_after_a_copy) {
        Slots s;

        slots_new(&s);
        omit(F(DISPATCH_GLK_INV));
        cr_assert_eq(reused_kernarg_slot(&s, true), 0u, "the copy's acquire GCR_REQ dropped the K$ lines");
        omit(F(DISPATCH_GLK_INV) | F(SDMA_ACQUIRE_GLK));
        cr_assert_gt(reused_kernarg_slot(&s, true), 0u, "without either GLK_INV the K$ must keep old arguments");
        slots_free(&s);
}

/* The CPU writes a VRAM buffer, an SDMA copy reads it; twice. Returns the
 * wrong floats of both copies. Needs the HDP flush and SDMA_ACQUIRE_GL2_INV. */
static unsigned cpu_to_sdma(void) {
        GpuBuffer *src = new_buf(N * 4, GPU_PLACEMENT_VRAM), *dst = new_buf(N * 4, GPU_PLACEMENT_GTT);
        unsigned wrong;

        set_floats(src, 10.0f);
        copy(dst, src);
        wrong = wrong_floats(dst, 10.0f);
        set_floats(src, 20.0f);
        copy(dst, src);
        wrong += wrong_floats(dst, 20.0f);
        gpu_buffer_unref(src);
        gpu_buffer_unref(dst);
        return wrong;
}

BOTH(cpu_writes_into_vram_reach_an_sdma_copy) {
        cr_assert_eq(cpu_to_sdma(), 0u, "every flush: the copies read what the CPU wrote");
        omit(F(HDP));
        cr_assert_gt(cpu_to_sdma(), 0u, "without the HDP flush the CPU's writes must stay unseen");
        omit(F(SDMA_ACQUIRE_GL2_INV));
        cr_assert_gt(cpu_to_sdma(), 0u, "without the acquire GL2_INV the GL2's old lines must be read");
}

/* An SDMA copy, then a fill, write a VRAM buffer the CPU reads after each.
 * Returns the wrong dwords. Needs SDMA_RELEASE_GL2_WB. */
static unsigned sdma_to_cpu(void) {
        GpuBuffer *src = new_buf(N * 4, GPU_PLACEMENT_GTT), *dst = zeros(GPU_PLACEMENT_VRAM);
        unsigned wrong;

        set_floats(src, 30.0f);
        copy(dst, src);
        wrong = wrong_floats(dst, 30.0f);
        sdma(&(GpuJob) { .type = GPU_JOB_FILL,
                         .fill = { .dst_va = gpu_buffer_get_va(dst), .size = N * 4, .pattern = 0x5A5A5A5Au } });
        const uint32_t *p = gpu_buffer_get_cpu(dst);
        for (uint32_t i = 0; i < N; i++)
                wrong += p[i] != 0x5A5A5A5Au;
        gpu_buffer_unref(src);
        gpu_buffer_unref(dst);
        return wrong;
}

BOTH(sdma_writes_into_vram_reach_the_cpu) {
        cr_assert_eq(sdma_to_cpu(), 0u, "every flush: the CPU reads the copy's and the fill's bytes");
        omit(F(SDMA_RELEASE_GL2_WB));
        /* The fill's acquire writes the copy's lines back, its own stay. */
        cr_assert_geq(sdma_to_cpu(), N, "without the release GL2_WB the bytes must stay in the GL2");
}

/* A dispatch and an SDMA copy share the GL2: what the dispatch wrote into
 * VRAM is what the copy reads; the part of the buffer the GPU never wrote
 * keeps what the CPU put there. */
BOTH(engines_share_the_gl2) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        GpuBuffer *a = new_buf(N * 4, GPU_PLACEMENT_GTT), *zero = zeros(GPU_PLACEMENT_GTT),
                  *mid = new_buf(2 * N * 4, GPU_PLACEMENT_VRAM), *dst = new_buf(N * 4, GPU_PLACEMENT_GTT);
        float *pm = gpu_buffer_get_cpu(mid);
        for (uint32_t i = 0; i < 2 * N; i++)
                pm[i] = -1.0f;

        set_floats(a, 3.0f);
        add(co, a, zero, mid); /* the first half of mid */
        copy(dst, mid);
        cr_assert_eq(wrong_floats(dst, 3.0f), 0u, "the copy read the dispatch's result");
        cr_assert_eq(wrong_floats(mid, 3.0f), 0u, "the first half, written back");
        for (uint32_t i = N; i < 2 * N; i++)
                cr_assert_eq(pm[i], -1.0f, "mid[%u], which the GPU never wrote, is the CPU's: %f", i, pm[i]);
        gpu_buffer_unref(a);
        gpu_buffer_unref(zero);
        gpu_buffer_unref(mid);
        gpu_buffer_unref(dst);
        gpu_code_object_unref(co);
}
