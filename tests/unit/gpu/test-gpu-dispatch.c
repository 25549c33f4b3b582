/* SPDX-License-Identifier: MIT */
/*
 * Compute on the GPU layer, end to end on the simulated gfx1030: corpus code
 * objects loaded into the context, dispatched on the PM4 compute queue and
 * checked element by element (partial workgroups, scratch, LDS, local-pointer
 * arguments), compute timestamps, SDMA -> compute -> SDMA chains ordered on the
 * GPU with every job submitted before the first one finishes, a dispatch that
 * faults, an instruction the device does not know (its words reach the
 * completion), an aborted endless kernel, and the queue's recovery after each.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu-test.h"
#include "dispatch-test.h"
#include "gpu/gpu-internal.h" /* white box: the code object's entry, the fence words */

static void vector_add(GpuCodeObject *co, uint32_t n, uint32_t block) {
        const GpuKernel *k = kernel_of(co, "vector_add");
        uint64_t bytes = (uint64_t) n * 4 + 4096;
        GpuBuffer *a = new_buf(bytes, GPU_PLACEMENT_GTT), *b = new_buf(bytes, GPU_PLACEMENT_VRAM),
                  *c = new_buf(bytes, GPU_PLACEMENT_GTT);
        float *pa = gpu_buffer_get_cpu(a), *pb = gpu_buffer_get_cpu(b), *pc = gpu_buffer_get_cpu(c);
        for (uint32_t i = 0; i < n + 1024; i++) {
                pa[i] = (float) i * 0.5f;
                pb[i] = 1000.0f - (float) i;
                pc[i] = -1.0f;
        }
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(a));
        arg_ptr(&args, k, gpu_buffer_get_va(b));
        arg_ptr(&args, k, gpu_buffer_get_va(c));
        arg_u32(&args, k, n);
        /* The grid is n work-items, not rounded up: the last workgroup is partial. */
        GpuJob j = dispatch_job(co, "vector_add", n, block, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t i = 0; i < n; i++)
                cr_assert_eq(pc[i], pa[i] + pb[i], "n %u block %u: c[%u] = %f", n, block, i, pc[i]);
        for (uint32_t i = n; i < n + 1024; i++)
                cr_assert_eq(pc[i], -1.0f, "n %u block %u: c[%u] written past the grid", n, block, i);
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);
        gpu_buffer_unref(c);
}

Test(gpu_dispatch, vector_add_shapes, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        static const uint32_t shapes[][2] = { { 1, 64 }, { 100, 32 }, { 1000, 256 }, { 77, 48 }, { 4097, 128 },
                                              { 33, 1 }, { 65536, 256 } };
        for (unsigned i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
                vector_add(co, shapes[i][0], shapes[i][1]);
        gpu_code_object_unref(co);
}

Test(gpu_dispatch, nop_on_compute_queue, .init = setup, .fini = teardown) {
        GpuJob j = { .type = GPU_JOB_NOP };
        uint64_t s1 = submit(COMPUTE_QUEUE, &j), s2 = submit(COMPUTE_QUEUE, &j);
        cr_expect_eq(s2, s1 + 1);
        const GpuCompletion *c1 = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s1);
        check_ok(c1);
        const GpuCompletion *c2 = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s2);
        check_ok(c2);
        cr_expect_leq(c1->end_ns, c2->begin_ns, "in order on one queue");
        cr_expect_eq(gpu_queue_get_completed(fx.ctx, COMPUTE_QUEUE), s2);
}

Test(gpu_dispatch, scratch_private_array, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("private-array.hsaco");
        const GpuKernel *k = kernel_of(co, "private_array");
        cr_assert_gt(k->private_segment_size, 0u, "the kernel needs scratch");
        uint32_t n = 3000;
        GpuBuffer *in = new_buf(n * 4, GPU_PLACEMENT_GTT), *out = new_buf(n * 4, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in), *po = gpu_buffer_get_cpu(out);
        for (uint32_t i = 0; i < n; i++)
                pi[i] = i * 2654435761u;
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(in));
        arg_ptr(&args, k, gpu_buffer_get_va(out));
        arg_u32(&args, k, n);
        GpuJob j = dispatch_job(co, "private_array", n, 64, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t i = 0; i < n; i++) {
                uint32_t v = pi[i], a[64], acc = 0;
                for (int q = 0; q < 64; q++)
                        a[q] = v * (uint32_t) q + i;
                for (int q = 0; q < 16; q++)
                        acc += a[(v + (uint32_t) q * 7) & 63];
                cr_assert_eq(po[i], acc, "out[%u]", i);
        }
        /* Scratch and the CWSR area are the GPU's alone: VRAM (kfd-facts §7.6). */
        GpuQueue *q = &fx.ctx->queues[COMPUTE_QUEUE];
        cr_assert(q->scratch && q->cwsr);
        cr_expect(q->scratch->flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM, "scratch flags 0x%x", q->scratch->flags);
        cr_expect(q->cwsr->flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM, "CWSR flags 0x%x", q->cwsr->flags);
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

Test(gpu_dispatch, lds_reduction, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("reduce-lds.hsaco");
        const GpuKernel *k = kernel_of(co, "reduce_lds");
        cr_assert_gt(k->group_segment_size, 0u, "static LDS");
        uint32_t n = 256 * 37, groups = 37;
        GpuBuffer *in = new_buf(n * 4, GPU_PLACEMENT_GTT), *out = new_buf(groups * 4, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in), *po = gpu_buffer_get_cpu(out);
        for (uint32_t i = 0; i < n; i++)
                pi[i] = i ^ 0x5A5A;
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(in));
        arg_ptr(&args, k, gpu_buffer_get_va(out));
        arg_u32(&args, k, n);
        GpuJob j = dispatch_job(co, "reduce_lds", n, 256, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t g = 0; g < groups; g++) {
                uint32_t sum = 0;
                for (uint32_t i = 0; i < 256; i++)
                        sum += pi[g * 256 + i];
                cr_assert_eq(po[g], sum, "partial[%u]", g);
        }
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

/* SDMA fill -> compute -> SDMA copy, each waiting for the one before on the
 * GPU, all submitted before the first finishes. The dispatch reads the last
 * elements the 64 MiB fill writes and the copy reads what the dispatch writes,
 * so a wait that did not hold shows up as zeros in the result. */
Test(gpu_dispatch, cross_engine_chain, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        const GpuKernel *k = kernel_of(co, "vector_add");
        uint64_t big = 64 * MiB, small = 4096;
        GpuBuffer *a = new_buf(big, GPU_PLACEMENT_GTT), *c = new_buf(small, GPU_PLACEMENT_GTT),
                  *d = new_buf(small, GPU_PLACEMENT_GTT), *gate = new_buf(small, GPU_PLACEMENT_GTT);
        uint32_t *gate_word = gpu_buffer_get_cpu(gate);
        memset(gpu_buffer_get_cpu(c), 0, small);
        memset(gpu_buffer_get_cpu(d), 0, small);
        memset(gate_word, 0, small);

        float one = 1.5f;
        uint32_t pattern;
        memcpy(&pattern, &one, 4);
        /* The fill waits on the GPU for a word the test sets once the whole
         * chain is queued, so it cannot have finished before, however fast
         * the engine or slow this thread. */
        GpuJob fill = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(a), .size = big,
                                                       .pattern = pattern },
                        .n_waits = 1, .waits = { { .va = gpu_buffer_get_va(gate), .value = 1 } } };
        uint64_t s_fill = submit(0, &fill);

        Args args = { 0 };
        uint64_t tail = gpu_buffer_get_va(a) + big - small;
        arg_ptr(&args, k, tail);
        arg_ptr(&args, k, tail);
        arg_ptr(&args, k, gpu_buffer_get_va(c));
        arg_u32(&args, k, 1024);
        GpuJob disp = dispatch_job(co, "vector_add", 1024, 256, &args);
        disp.n_waits = 1;
        disp.waits[0] = (GpuWait) { .queue = 0, .seq = s_fill };
        uint64_t s_disp = submit(COMPUTE_QUEUE, &disp);

        GpuJob copy = { .type = GPU_JOB_COPY, .copy = { .src_va = gpu_buffer_get_va(c),
                                                       .dst_va = gpu_buffer_get_va(d), .size = small },
                        .n_waits = 1, .waits = { { .queue = COMPUTE_QUEUE, .seq = s_disp } } };
        uint64_t s_copy = submit(1, &copy);
        /* The CPU never waited: the fill's fence was not yet written when the
         * whole chain was on the GPU's queues. */
        cr_expect_lt(__atomic_load_n(gpu_queue_fence_word(fx.ctx, 0), __ATOMIC_ACQUIRE), (uint32_t) s_fill,
                     "the fill was still running when the chain was queued");
        __atomic_store_n(gate_word, 1, __ATOMIC_RELEASE);

        const GpuCompletion *cf = wait_seq(fx.ctx, &fx.comps, 0, s_fill);
        const GpuCompletion *cd = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_disp);
        const GpuCompletion *cc = wait_seq(fx.ctx, &fx.comps, 1, s_copy);
        check_ok(cf);
        check_ok(cd);
        check_ok(cc);
        cr_expect_leq(cf->end_ns, cd->end_ns, "the dispatch ended after the fill it waited for");
        cr_expect_leq(cd->end_ns, cc->end_ns, "the copy ended after the dispatch it waited for");
        const float *pd = gpu_buffer_get_cpu(d);
        for (uint32_t i = 0; i < 1024; i++)
                cr_assert_eq(pd[i], 3.0f, "d[%u] = %f", i, pd[i]);
        gpu_buffer_unref(a);
        gpu_buffer_unref(c);
        gpu_buffer_unref(d);
        gpu_buffer_unref(gate);
        gpu_code_object_unref(co);
}

Test(gpu_dispatch, a_faulting_kernel_ends_its_context, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        const GpuKernel *k = kernel_of(co, "vector_add");
        GpuBuffer *a = new_buf(4096, GPU_PLACEMENT_GTT);
        Args args = { 0 };
        uint64_t unmapped = 0x7E0000000000ull; /* no buffer of the context lives there */
        arg_ptr(&args, k, gpu_buffer_get_va(a));
        arg_ptr(&args, k, gpu_buffer_get_va(a));
        arg_ptr(&args, k, unmapped);
        arg_u32(&args, k, 64);
        GpuJob bad = dispatch_job(co, "vector_add", 64, 64, &args);
        uint64_t s_bad = submit(COMPUTE_QUEUE, &bad);
        GpuJob nop = { .type = GPU_JOB_NOP };
        uint64_t s_next = submit(COMPUTE_QUEUE, &nop);

        /* The one running kernel is the only one that can have faulted. */
        const GpuCompletion *cb = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_bad);
        cr_expect_eq(cb->error, -EFAULT);
        cr_expect_eq(cb->fault_va & ~0xFFFull, unmapped, "fault at 0x%llx", (unsigned long long) cb->fault_va);
        cr_expect_eq(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_next)->error, -ECANCELED);
        cr_expect(gpu_context_is_lost(fx.ctx, NULL));
        gpu_buffer_unref(a);
        gpu_code_object_unref(co);
}

/* Two kernels of one context run at once on two queues and one faults: the
 * fault names an address, not a queue, so neither is blamed. */
Test(gpu_dispatch, a_fault_among_running_kernels_blames_none, .timeout = 120) {
        GpuContextOptions o = { .n_compute_queues = 2, .compute_priority = { 7, 7 } };
        setup_opts(&o);
        GpuCodeObject *co = load_kernel_file("collatz.hsaco");
        const GpuKernel *k = kernel_of(co, "collatz");
        uint32_t n = 1u << 16;
        GpuBuffer *in = new_buf(n * 4, GPU_PLACEMENT_GTT), *out = new_buf(n * 4, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in);
        for (uint32_t i = 0; i < n; i++)
                pi[i] = 0x7FFFFFFFu - i; /* long trips: the kernel runs a while */
        Args good = { 0 }, bad = { 0 };
        arg_ptr(&good, k, gpu_buffer_get_va(in));
        arg_ptr(&good, k, gpu_buffer_get_va(out));
        arg_u32(&good, k, n);
        arg_ptr(&bad, k, gpu_buffer_get_va(in));
        arg_ptr(&bad, k, 0x7E0000000000ull);
        arg_u32(&bad, k, n);
        GpuJob jg = dispatch_job(co, "collatz", n, 256, &good), jb = dispatch_job(co, "collatz", n, 256, &bad);
        unsigned q0 = COMPUTE_QUEUE, q1 = COMPUTE_QUEUE + 1;
        uint64_t sg = submit(q0, &jg), sb;
        /* The good kernel runs (its begin timestamp is written) before the
         * bad one is submitted: a job not yet begun is no suspect. */
        volatile uint64_t *begin =
                (volatile uint64_t *) ((uint8_t *) fx.ctx->fence->cpu +
                                       (gpu_queue_ts_va(fx.ctx, q0, sg) - fx.ctx->fence->va));
        for (int i = 0; i < 10000 && !__atomic_load_n(begin, __ATOMIC_ACQUIRE); i++)
                usleep(1000);
        cr_assert_neq(*begin, 0u, "the good kernel never began");
        sb = submit(q1, &jb);
        const GpuCompletion *cg = wait_seq(fx.ctx, &fx.comps, q0, sg), *cbad = wait_seq(fx.ctx, &fx.comps, q1, sb);
        cr_expect_eq(cg->error, -ECANCELED, "the innocent kernel is not blamed (and did not finish)");
        cr_expect_eq(cbad->error, -ECANCELED, "two running kernels: neither is blamed");
        cr_expect(cbad->message && strstr(cbad->message, "does not say which"), "message: %s",
                  cbad->message ? cbad->message : "(null)");
        cr_expect(gpu_context_is_lost(fx.ctx, NULL));
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
        teardown();
}

/* Overwrites the kernel's first instruction with one the device does not
 * implement (v_dot2_f32_f16, VOP3P, refused by the simulator's interpreter).
 * The queue stops there and says nothing — no event, as on the kernel
 * (kfd-facts §7.2) — until the job is given up on at its timeout; then its
 * message carries the simulator's words. */
Test(gpu_dispatch, unknown_instruction_named, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        const GpuKernel *k = kernel_of(co, "vector_add");
        int idx = gpu_code_object_find(co, "vector_add");
        GpuBuffer *a = new_buf(4096, GPU_PLACEMENT_GTT);
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(a));
        arg_ptr(&args, k, gpu_buffer_get_va(a));
        arg_ptr(&args, k, gpu_buffer_get_va(a));
        arg_u32(&args, k, 64);

        /* v_dot2_f32_f16 v0, v1, v2, v3 (llvm-mc-15 -mcpu=gfx1030): CC134000 1C0E0501 */
        uint32_t *entry = (uint32_t *) (uintptr_t) co->kernel_code[idx].entry_va; /* CPU VA == GPU VA */
        entry[0] = 0xCC134000u;
        entry[1] = 0x1C0E0501u;
        GpuJob j = dispatch_job(co, "vector_add", 64, 64, &args);
        uint64_t s = submit(COMPUTE_QUEUE, &j);
        GpuJob nop = { .type = GPU_JOB_NOP };
        uint64_t s_next = submit(COMPUTE_QUEUE, &nop);
        double t0 = now_s();
        while (now_s() - t0 < 0.3)
                (void) gpu_context_process(fx.ctx, on_comp, &fx.comps);
        cr_assert_null(find_comp(&fx.comps, COMPUTE_QUEUE, s), "a stopped queue reported its job");
        cr_assert_eq(gpu_queue_abort(fx.ctx, COMPUTE_QUEUE, s, -ETIME, on_comp, &fx.comps), 1);
        const GpuCompletion *c = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s);
        cr_expect_eq(c->error, -ETIME);
        cr_assert_not_null(c->message, "the simulator says what went wrong");
        cr_expect(strstr(c->message, "v_dot2_f32_f16") != NULL, "message: %s", c->message);
        cr_expect(strstr(c->message, "cc134000") || strstr(c->message, "CC134000"), "encoding named: %s",
                  c->message);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_next));
        gpu_buffer_unref(a);
        gpu_code_object_unref(co);
}

/* A job the caller gives up on (a timeout) is aborted: the queue is destroyed,
 * the dispatch cancelled, the queue recreated and the jobs behind it rerun —
 * but those of its chain (ordered after it), which are reported -ECANCELED in
 * their turn without running. */
Test(gpu_dispatch, abort_running_dispatch, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("collatz.hsaco");
        const GpuKernel *k = kernel_of(co, "collatz");
        uint32_t n = 1u << 20;
        GpuBuffer *in = new_buf(n * 4, GPU_PLACEMENT_GTT), *out = new_buf(n * 4, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in);
        for (uint32_t i = 0; i < n; i++)
                pi[i] = 0x7FFFFFFFu - i; /* long trips: seconds of interpretation */
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(in));
        arg_ptr(&args, k, gpu_buffer_get_va(out));
        arg_u32(&args, k, n);
        GpuJob j = dispatch_job(co, "collatz", n, 256, &args);
        j.chain = 7;
        uint64_t s = submit(COMPUTE_QUEUE, &j);
        GpuJob nop = { .type = GPU_JOB_NOP, .chain = 9 };
        uint64_t s_next = submit(COMPUTE_QUEUE, &nop);
        /* Chain 7 again, after it: a fill of `out` by a dispatch would show;
         * a NOP's completion order does. */
        GpuJob same = { .type = GPU_JOB_NOP, .chain = 7 };
        uint64_t s_same = submit(COMPUTE_QUEUE, &same);
        uint64_t s_last = submit(COMPUTE_QUEUE, &nop);

        double t0 = now_s();
        int r;
        while ((r = gpu_queue_abort(fx.ctx, COMPUTE_QUEUE, s, -ETIME, on_comp, &fx.comps)) == 0) {
                cr_assert_lt(now_s() - t0, 10.0, "the dispatch never started");
                gpu_context_process(fx.ctx, on_comp, &fx.comps);
        }
        cr_expect_eq(r, 1);
        cr_expect_lt(now_s() - t0, 5.0, "aborting took %.1f s", now_s() - t0);
        const GpuCompletion *c = find_comp(&fx.comps, COMPUTE_QUEUE, s);
        cr_assert_not_null(c);
        cr_expect_eq(c->error, -ETIME);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_next));
        c = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_same);
        cr_expect_eq(c->error, -ECANCELED, "the job of the aborted one's chain was dropped");
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_last));
        {
                /* Reported in queue order: s, s_next, s_same, s_last. */
                uint64_t order[4] = { s, s_next, s_same, s_last };
                unsigned m = 0;
                for (unsigned i = 0; i < fx.comps.n && m < 4; i++)
                        if (fx.comps.c[i].queue == COMPUTE_QUEUE && fx.comps.c[i].seq == order[m])
                                m++;
                cr_expect_eq(m, 4u, "completions out of order");
        }
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

Test(gpu_dispatch, refused_dispatches, .init = setup, .fini = teardown) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        const GpuKernel *k = kernel_of(co, "vector_add");
        Args args = { 0 };
        arg_ptr(&args, k, 0);
        arg_ptr(&args, k, 0);
        arg_ptr(&args, k, 0);
        arg_u32(&args, k, 0); /* n = 0: the one dispatch that runs touches no memory */
        uint64_t seq;
        GpuJob j = dispatch_job(co, "vector_add", 64, 64, &args);

        j.dispatch.block[0] = 2048;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "block of 2048");
        char why[256];
        cr_expect_eq(gpu_dispatch_check(fx.ctx, &j, why, sizeof why), -EINVAL);
        cr_expect_str_eq(why, "2048 work-items per workgroup, kernel \"vector_add\" allows at most 256");
        j.dispatch.block[0] = k->max_flat_workgroup_size + 1;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "block over the kernel's maximum");
        j.dispatch.block[0] = 64;
        j.dispatch.grid[1] = 0;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "empty grid");
        j.dispatch.grid[1] = 1;
        j.dispatch.args_size = 8;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "arguments missing");
        j.dispatch.args_size = args.size;
        j.dispatch.dynamic_lds = 65536 + 4;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "LDS beyond 64 KiB");
        j.dispatch.dynamic_lds = 0;
        j.dispatch.kernel = 99;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "no kernel 99");
        j = dispatch_job(co, "vector_add", 64, 64, &args);
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &j, &seq), -EINVAL, "a dispatch on an SDMA queue");
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), 0);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, seq));
        cr_expect_eq(seq, 1u, "refused jobs consume no sequence number");
        gpu_code_object_unref(co);
}

/* A descriptor that reached a dispatch with a bit the loader refuses (as one
 * that comes without a load would) is refused again there, on the words the
 * registers would get, before anything reaches the queue. */
Test(gpu_dispatch, refused_descriptor_bits_at_dispatch, .init = setup, .fini = teardown) {
        GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
        const GpuKernel *k = kernel_of(co, "vector_add");
        Args args = { 0 };
        arg_ptr(&args, k, 0);
        arg_ptr(&args, k, 0);
        arg_ptr(&args, k, 0);
        arg_u32(&args, k, 0);
        uint64_t seq;
        char why[256];
        GpuJob j = dispatch_job(co, "vector_add", 64, 64, &args);
        GpuKernelCode *kc = &co->kernel_code[j.dispatch.kernel];
        uint32_t rsrc1 = kc->rsrc1;

        kc->rsrc1 = rsrc1 | 1u << 20;
        cr_expect_eq(gpu_dispatch_check(fx.ctx, &j, why, sizeof why), -EINVAL);
        cr_expect_str_eq(why, "kernel \"vector_add\": kernel descriptor sets COMPUTE_PGM_RSRC1.PRIV (bit 20), which "
                              "clients may not");
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "PRIV");
        kc->rsrc1 = rsrc1;
        kc->rsrc2 |= 1u << 6;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "TRAP_PRESENT");
        kc->rsrc2 &= ~(1u << 6);
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), 0);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, seq));
        cr_expect_eq(seq, 1u, "refused jobs consume no sequence number");
        gpu_code_object_unref(co);
}

/* Local-pointer arguments get LDS regions of the sizes asked for, after the
 * static LDS, not overlapping; a partial workgroup sees its real size. */
Test(gpu_dispatch, local_pointer_args, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("local-arg.hsaco");
        const GpuKernel *k = kernel_of(co, "local_arg");
        uint32_t n = 1000, block = 128; /* 7 full workgroups and one of 104 */
        GpuBuffer *in = new_buf(n * 4, GPU_PLACEMENT_GTT), *out = new_buf(n * 4, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in), *po = gpu_buffer_get_cpu(out);
        for (uint32_t i = 0; i < n; i++)
                pi[i] = i * 7 + 1;
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(in));
        arg_ptr(&args, k, gpu_buffer_get_va(out));
        arg_u32(&args, k, block * 4); /* a: block uints */
        arg_u32(&args, k, block * 4); /* b: block uints */
        arg_u32(&args, k, n);
        GpuJob j = dispatch_job(co, "local_arg", n, block, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t i = 0; i < n; i++) {
                uint32_t g = i / block, lid = i % block, ls = g == n / block ? n % block : block;
                uint32_t src = g * block + (ls - 1 - lid);
                uint32_t want = pi[src] + (((ls - 1 - lid) * 3u) << 20);
                cr_assert_eq(po[i], want, "out[%u] = 0x%x, want 0x%x", i, po[i], want);
        }
        /* Too much: two regions of 40 KiB do not fit 64 KiB. */
        Args big = { 0 };
        arg_ptr(&big, k, gpu_buffer_get_va(in));
        arg_ptr(&big, k, gpu_buffer_get_va(out));
        arg_u32(&big, k, 40 << 10);
        arg_u32(&big, k, 40 << 10);
        arg_u32(&big, k, n);
        j = dispatch_job(co, "local_arg", n, block, &big);
        uint64_t seq;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL);
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

/* The values of the SET_SH_REG packets in a PM4 stream, by register. */
typedef struct ShRegs {
        bool set[0x400];
        uint32_t v[0x400];
} ShRegs;

static void walk_sh_regs(const uint32_t *p, size_t n, ShRegs *ret) {
        memset(ret, 0, sizeof *ret);
        for (size_t i = 0; i < n;) {
                uint32_t h = p[i];
                cr_assert_eq(h >> 30, 3u, "type-3 header at dword %zu", i);
                uint32_t count = (h >> 16) & 0x3FFF, op = (h >> 8) & 0xFF;
                size_t len = count == 0x3FFF ? 1 : count + 2;
                if (op == 0x76)
                        for (uint32_t r = 0; r < count; r++) {
                                uint32_t reg = p[i + 1] + r;
                                cr_assert_lt(reg, 0x400u);
                                ret->set[reg] = true;
                                ret->v[reg] = p[i + 2 + r];
                        }
                i += len;
        }
}

/* The stream a gfx11 device gets (the simulator models gfx1030, so the
 * stream is built and read here, not run): the architected scratch base, the
 * gfx11 TMPRING_SIZE and V#, RSRC1.PRIV — and none of them on gfx10. */
Test(gpu_dispatch, gfx11_scratch_programming, .init = setup, .fini = teardown) {
        GpuCodeObject *co = load_kernel_file("private-array.hsaco");
        const GpuKernel *k = kernel_of(co, "private_array");
        Args args = { 0 };
        arg_ptr(&args, k, 0);
        arg_ptr(&args, k, 0);
        arg_u32(&args, k, 0);
        GpuJob j = dispatch_job(co, "private_array", 64, 64, &args);
        GpuQueue *q = &fx.ctx->queues[COMPUTE_QUEUE];
        uint32_t saved = fx.ctx->info.gfx_target_version;
        uint32_t ring[512];
        ShRegs regs;

        for (int gfx11 = 0; gfx11 <= 1; gfx11++) {
                fx.ctx->info.gfx_target_version = gfx11 ? 110000 : saved;
                GpuInflight f = { .seq = 7, .job = j };
                cr_assert_eq(gpu_dispatch_prepare(fx.ctx, q, &j, f.seq, &f), 0);
                size_t n = gpu_compute_emit_job(fx.ctx, q, &j, &f, ring);
                cr_assert_eq(n, gpu_compute_job_dwords(fx.ctx, &j), "the dword count matches the stream");
                walk_sh_regs(ring, n, &regs);
                uint64_t scratch = gpu_buffer_get_va(f.scratch);
                uint32_t per_lane = (k->private_segment_size + 3) & ~3u;

                cr_expect_eq(regs.set[0x210], (bool) gfx11, "COMPUTE_DISPATCH_SCRATCH_BASE only on gfx11");
                if (gfx11) {
                        cr_expect_eq(regs.v[0x210], (uint32_t) (scratch >> 8));
                        cr_expect_eq(regs.v[0x211], (uint32_t) (scratch >> 40));
                }
                cr_expect_eq((regs.v[0x212] >> 20) & 1, (uint32_t) gfx11, "RSRC1.PRIV");
                uint32_t unit = gfx11 ? 256 : 1024, tmpring = regs.v[0x218];
                uint32_t wavesize = gfx11 ? (tmpring >> 12) & 0x7FFF : (tmpring >> 12) & 0x1FFF;
                /* the queue's backing may be bigger than this kernel needs (reused) */
                cr_expect_eq(wavesize * unit, q->scratch_wave_bytes, "TMPRING_SIZE.WAVESIZE in %u-byte units", unit);
                cr_expect_geq(q->scratch_wave_bytes, per_lane * 32);
                cr_expect_gt(tmpring & 0xFFF, 0u, "TMPRING_SIZE.WAVES");
                /* user SGPRs: the private segment buffer V# first */
                cr_expect_eq(regs.v[0x240], (uint32_t) scratch);
                /* ROCr's scratch V# (FillBufRsrcWord1/_Gfx11, Word2, Word3_Gfx10/_Gfx11) with
                 * INDEX_STRIDE 32: SWIZZLE_ENABLE (bit 31; gfx11: the field [31:30] = 1),
                 * NUM_RECORDS the backing's size, FORMAT 32_UINT, ADD_TID, RESOURCE_LEVEL
                 * 1 (gfx10), OOB_SELECT 2. */
                cr_expect_eq(regs.v[0x241], (uint32_t) (scratch >> 32 & 0xFFFF) | (gfx11 ? 1u << 30 : 1u << 31),
                             "V# dword1");
                cr_expect_eq(regs.v[0x242], (uint32_t) gpu_buffer_get_size(f.scratch), "V# NUM_RECORDS");
                cr_expect_eq(regs.v[0x243], gfx11 ? 0x20C14FACu : 0x21C14FACu, "V# dword3");
                gpu_buffer_unref(f.scratch);
        }
        fx.ctx->info.gfx_target_version = saved;
        gpu_code_object_unref(co);
}

/*
 * gfx11 as far as the toolchain goes (docs/simulator.md, "Other GPU
 * generations"): one kernel that needs no device library, built by clang-15
 * for gfx1030 and for gfx1100. The gfx1030 build runs on the simulator and
 * gives the CPU's results (so the source is right); the gfx1100 build loads
 * into a context that calls itself gfx1100 — the loader's gfx11 target and
 * descriptor checks — and gets the gfx11 stream for what its descriptor asks:
 * RSRC1 with PRIV, RSRC2 with the descriptor's user SGPR count (clang-15 says
 * 15 for the 2 it enables: the loader once refused that, and the stream's
 * dword count once disagreed with the emitter, so every such dispatch failed
 * EIO) and the enabled USER_DATA registers, RSRC3 as built, the architected
 * scratch base and TMPRING_SIZE in 256-byte units when it uses scratch.
 */
Test(gpu_dispatch, gfx1100_code_object_built_by_clang, .init = setup, .fini = teardown, .timeout = 120) {
        uint32_t n = 1000, saved = fx.ctx->info.gfx_target_version, ring[512];
        GpuCodeObject *co = load_kernel_file("builtins-private-array-gfx1030.hsaco");
        const GpuKernel *k = kernel_of(co, "private_array_builtins");
        GpuBuffer *in = new_buf(n * 4, GPU_PLACEMENT_GTT), *out = new_buf(n * 4, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in), *po = gpu_buffer_get_cpu(out);
        GpuQueue *q = &fx.ctx->queues[COMPUTE_QUEUE];
        Args args = { 0 };
        ShRegs regs;

        for (uint32_t i = 0; i < n; i++)
                pi[i] = i * 2246822519u;
        arg_ptr(&args, k, gpu_buffer_get_va(in));
        arg_ptr(&args, k, gpu_buffer_get_va(out));
        arg_u32(&args, k, n);
        GpuJob j = dispatch_job(co, "private_array_builtins", n, 64, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t i = 0; i < n; i++) {
                uint32_t v = pi[i], a[64], acc = 0;
                for (int x = 0; x < 64; x++)
                        a[x] = v * (uint32_t) x + i;
                for (int x = 0; x < 16; x++)
                        acc += a[(v + (uint32_t) x * 7) & 63];
                cr_assert_eq(po[i], acc, "gfx1030 build: out[%u]", i);
        }
        gpu_code_object_unref(co);

        fx.ctx->info.gfx_target_version = 110000;
        co = load_kernel_file("builtins-private-array-gfx1100.hsaco");
        k = kernel_of(co, "private_array_builtins");
        const GpuKernelCode *kc = &co->kernel_code[0];
        cr_expect(kc->wave32, "clang builds gfx11 kernels for wave32");
        GpuJob j11 = dispatch_job(co, "private_array_builtins", n, 64, &args);
        GpuInflight f = { .seq = 9, .job = j11 };
        cr_assert_eq(gpu_dispatch_prepare(fx.ctx, q, &j11, f.seq, &f), 0);
        size_t len = gpu_compute_emit_job(fx.ctx, q, &j11, &f, ring);
        cr_assert_eq(len, gpu_compute_job_dwords(fx.ctx, &j11), "the dword count matches the stream");
        walk_sh_regs(ring, len, &regs);

        uint32_t user_sgprs = (kc->rsrc2 >> 1) & 0x1F, n_user = 0;
        cr_expect_eq(regs.v[0x212], kc->rsrc1 | 1u << 20, "RSRC1 as built, with PRIV");
        cr_expect_eq((regs.v[0x213] >> 1) & 0x1F, user_sgprs, "RSRC2.USER_SGPR_COUNT as the descriptor's");
        for (unsigned r = 0x240; r < 0x250; r++)
                n_user += regs.set[r];
        /* clang-15 asks for 15 with 2 enabled (system SGPRs from s15): the
         * enabled ones are written, the CP loads the rest unread. */
        cr_expect_eq(n_user, gpu_kernel_user_sgprs(kc->code_properties), "USER_DATA registers written");
        cr_expect_geq(user_sgprs, n_user);
        if (regs.set[0x228])
                cr_expect_eq(regs.v[0x228], kc->rsrc3, "RSRC3 as built");
        if (k->private_segment_size > 0) {
                uint64_t scratch = gpu_buffer_get_va(f.scratch);
                cr_expect_eq(regs.v[0x210], (uint32_t) (scratch >> 8), "COMPUTE_DISPATCH_SCRATCH_BASE_LO");
                cr_expect_eq(((regs.v[0x218] >> 12) & 0x7FFF) * 256u, q->scratch_wave_bytes,
                             "TMPRING_SIZE.WAVESIZE in 256-byte units");
                gpu_buffer_unref(f.scratch);
        }
        fx.ctx->info.gfx_target_version = saved;
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

typedef struct Tally {
        unsigned done, failed;
        uint64_t last_seq;
        bool in_order;
} Tally;

static void tally(const GpuCompletion *c, void *userdata) {
        Tally *t = userdata;

        t->done++;
        t->failed += c->error != 0;
        if (c->seq != t->last_seq + 1)
                t->in_order = false;
        t->last_seq = c->seq;
}

/*
 * 20 000 dispatches through one compute queue: the ring (256 KiB, a few
 * hundred dispatches) goes round dozens of times, and the CP reports its read
 * position wrapped and only every 64 dwords (kfd-facts §7.7). A driver that
 * read it as a growing count would find the ring full after one trip and
 * stop. Every job must complete, in order, without error.
 */
Test(gpu_dispatch, twenty_thousand_dispatches_wrap_the_ring, .init = setup, .fini = teardown, .timeout = 180) {
        GpuCodeObject *co = load_kernel_file("empty.hsaco");
        Args args = { 0 };
        GpuJob j = dispatch_job(co, "empty", 1, 1, &args);
        Tally t = { .in_order = true };
        const unsigned n = 20000;
        unsigned eagain = 0;
        double t0 = now_s();

        for (unsigned i = 0; i < n; i++) {
                uint64_t seq;
                int r;

                while ((r = gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq)) == -EAGAIN) {
                        eagain++;
                        cr_assert_lt(now_s() - t0, 120.0, "stuck at dispatch %u: the ring never drains", i);
                        (void) gpu_context_process(fx.ctx, tally, &t);
                }
                cr_assert_eq(r, 0, "dispatch %u: %s", i, strerror(-r));
                cr_assert_eq(seq, (uint64_t) i + 1);
        }
        while (t.done < n) {
                cr_assert_lt(now_s() - t0, 120.0, "%u of %u dispatches completed", t.done, n);
                (void) gpu_context_process(fx.ctx, tally, &t);
        }
        cr_assert_eq(t.failed, 0);
        cr_assert(t.in_order);
        cr_assert_gt(eagain, 0, "the ring was never full: the test did not wrap it");
        gpu_code_object_unref(co);
}

/* COMPUTE_DISPATCH_INITIATOR of the stream's DISPATCH_DIRECT (opcode 0x15:
 * DIM_X, DIM_Y, DIM_Z, initiator). */
static uint32_t dispatch_initiator(const uint32_t *p, size_t n) {
        for (size_t i = 0; i < n;) {
                uint32_t h = p[i], count = (h >> 16) & 0x3FFF;
                if (((h >> 8) & 0xFF) == 0x15) {
                        cr_assert_eq(count, 3u, "DISPATCH_DIRECT carries 4 dwords");
                        return p[i + 4];
                }
                i += count == 0x3FFF ? 1 : count + 2;
        }
        cr_assert_fail("no DISPATCH_DIRECT in the stream");
        return 0;
}

/* The wave size travels from the descriptor (ENABLE_WAVEFRONT_SIZE32,
 * kernel_code_properties bit 10) to COMPUTE_DISPATCH_INITIATOR.CS_W32_EN
 * (bit 15); a wave64 kernel's scratch is sized for 64 lanes and its V# has
 * INDEX_STRIDE 64. */
Test(gpu_dispatch, wave_size_programs_cs_w32_en, .init = setup, .fini = teardown) {
        static const struct {
                const char *file;
                bool wave32;
        } kernels[] = { { "private-array.hsaco", true }, { "private-array-w64.hsaco", false } };
        GpuQueue *q = &fx.ctx->queues[COMPUTE_QUEUE];
        uint32_t ring[512];
        ShRegs regs;

        for (size_t i = 0; i < sizeof(kernels) / sizeof(kernels[0]); i++) {
                GpuCodeObject *co = load_kernel_file(kernels[i].file);
                const GpuKernel *k = kernel_of(co, "private_array");
                Args args = { 0 };
                arg_ptr(&args, k, 0);
                arg_ptr(&args, k, 0);
                arg_u32(&args, k, 0);
                GpuJob j = dispatch_job(co, "private_array", 100, 64, &args);
                cr_assert_eq(co->kernel_code[j.dispatch.kernel].wave32, kernels[i].wave32, "%s", kernels[i].file);
                GpuInflight f = { .seq = 7, .job = j };
                cr_assert_eq(gpu_dispatch_prepare(fx.ctx, q, &j, f.seq, &f), 0);
                size_t n = gpu_compute_emit_job(fx.ctx, q, &j, &f, ring);
                uint32_t init = dispatch_initiator(ring, n);
                cr_expect_eq((init >> 15) & 1, (uint32_t) kernels[i].wave32, "%s: CS_W32_EN in 0x%x", kernels[i].file, init);
                cr_expect_eq(init & 0x7, 0x7u, "COMPUTE_SHADER_EN | PARTIAL_TG_EN | FORCE_START_AT_000 in 0x%x", init);
                walk_sh_regs(ring, n, &regs);
                uint32_t per_lane = (k->private_segment_size + 3) & ~3u, lanes = kernels[i].wave32 ? 32 : 64;
                cr_expect_eq(regs.v[0x243], kernels[i].wave32 ? 0x21C14FACu : 0x21E14FACu, "%s: V# dword3 (INDEX_STRIDE)",
                             kernels[i].file);
                cr_expect_geq(((regs.v[0x218] >> 12) & 0x1FFF) * 1024u, per_lane * lanes, "%s: WAVESIZE", kernels[i].file);
                gpu_buffer_unref(f.scratch);
                gpu_code_object_unref(co);
        }
}

/* Wave64 kernels run on the simulated CP: partial waves, scratch, LDS with
 * barriers over several waves. */
Test(gpu_dispatch, wave64_kernels_run, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("vector-add-w64.hsaco");
        vector_add(co, 1000, 64);
        vector_add(co, 1000, 256);
        vector_add(co, 77, 48);
        gpu_code_object_unref(co);

        co = load_kernel_file("private-array-w64.hsaco");
        const GpuKernel *k = kernel_of(co, "private_array");
        uint32_t n = 1000;
        GpuBuffer *in = new_buf(n * 4, GPU_PLACEMENT_GTT), *out = new_buf(n * 4, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in), *po = gpu_buffer_get_cpu(out);
        for (uint32_t i = 0; i < n; i++)
                pi[i] = i * 2654435761u;
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(in));
        arg_ptr(&args, k, gpu_buffer_get_va(out));
        arg_u32(&args, k, n);
        GpuJob j = dispatch_job(co, "private_array", n, 128, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t i = 0; i < n; i++) {
                uint32_t v = pi[i], acc = 0;
                for (uint32_t q = 0; q < 16; q++)
                        acc += v * ((v + q * 7) & 63) + i;
                cr_assert_eq(po[i], acc, "out[%u]", i);
        }
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);

        co = load_kernel_file("reduce-lds-w64.hsaco");
        k = kernel_of(co, "reduce_lds");
        uint32_t groups = 9;
        n = 256 * groups;
        in = new_buf(n * 4, GPU_PLACEMENT_GTT), out = new_buf(groups * 4, GPU_PLACEMENT_GTT);
        pi = gpu_buffer_get_cpu(in), po = gpu_buffer_get_cpu(out);
        for (uint32_t i = 0; i < n; i++)
                pi[i] = i ^ 0x5A5A;
        Args rargs = { 0 };
        arg_ptr(&rargs, k, gpu_buffer_get_va(in));
        arg_ptr(&rargs, k, gpu_buffer_get_va(out));
        arg_u32(&rargs, k, n);
        j = dispatch_job(co, "reduce_lds", n, 256, &rargs);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t g = 0; g < groups; g++) {
                uint32_t sum = 0;
                for (uint32_t i = 0; i < 256; i++)
                        sum += pi[g * 256 + i];
                cr_assert_eq(po[g], sum, "partial[%u]", g);
        }
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}

/* Generic pointers to __local and __private data (flat instructions in the
 * apertures of SH_MEM_BASES, FLAT_SCRATCH from the flat scratch init SGPRs)
 * through the daemon's dispatch and the simulated CP: the counter every
 * work-item bumps with a flat atomic in LDS ends at the workgroup size, and
 * the tile each even work-item updates through a generic pointer reads back. */
Test(gpu_dispatch, generic_pointers, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("generic-ptr.hsaco");
        const GpuKernel *k = kernel_of(co, "generic_ptr");
        uint32_t n = 640, block = 64;
        GpuBuffer *in = new_buf(4096, GPU_PLACEMENT_GTT), *out = new_buf(12 * n, GPU_PLACEMENT_GTT);
        uint32_t *pi = gpu_buffer_get_cpu(in), *po = gpu_buffer_get_cpu(out);
        for (uint32_t i = 0; i < 1024; i++)
                pi[i] = i * 2654435761u;
        Args args = { 0 };
        arg_ptr(&args, k, gpu_buffer_get_va(in));
        arg_ptr(&args, k, gpu_buffer_get_va(out));
        GpuJob j = dispatch_job(co, "generic_ptr", n, block, &args);
        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        for (uint32_t i = 0; i < n; i++) {
                uint32_t l = i % block, even = i - l % 2;
                cr_assert_eq(po[3 * i + 2], block, "count of item %u", i);
                cr_assert_eq(po[3 * i + 1], pi[i & 1023] * 3 + (even % block), "tile of item %u", i);
        }
        gpu_buffer_unref(in);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
}
