/* SPDX-License-Identifier: MIT */
/*
 * A faulting job is never reported as succeeded, whichever the device lets
 * the daemon see first: the MEMORY event (event-first: the queue stops at
 * the faulting packet) or the faulting job's end-of-pipe fence and what its
 * queue runs after it (fence-first, the simulator's default, as the kernel
 * allows on gfx10/11 without fault retry: sim-ih.h). Each case runs in both
 * orders and in both kinds of context the daemon makes in-process: the
 * primary KFD context and a secondary one (AMDKFD_IOC_CREATE_PROCESS; the
 * worker-process mechanism is test-sim-remote's a_fault_in_the_child_...).
 *  - a copy from unmapped memory with a signal write (what a fence page slot
 *    is, gpu-queue.c): -EFAULT at the fault's page, the signal never written,
 *    the job after it -ECANCELED, the context lost;
 *  - a kernel that reads unmapped memory: -EFAULT, the job after it
 *    -ECANCELED, the fence word never says the dispatch completed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "dispatch-test.h"
#include "gpu-test.h"
#include "gpu/gpu-internal.h"
#include "util/macro.h"

#define UNMAPPED 0x7E0000000000ull /* no buffer of the context lives there */

typedef struct Case {
        SimFaultOrder order;
        bool secondary;
} Case;

static const Case cases[] = {
        { SIM_FAULT_ORDER_FENCE_FIRST, false },
        { SIM_FAULT_ORDER_FENCE_FIRST, true },
        { SIM_FAULT_ORDER_EVENT_FIRST, false },
        { SIM_FAULT_ORDER_EVENT_FIRST, true },
};

static const char *name_of(const Case *c) {
        return c->order == SIM_FAULT_ORDER_FENCE_FIRST ? (c->secondary ? "fence-first, secondary" : "fence-first, primary")
                                                       : (c->secondary ? "event-first, secondary" : "event-first, primary");
}

static void setup_case(const Case *c) {
        GpuContextOptions o = { .flags = c->secondary ? GPU_CONTEXT_SECONDARY : 0 };
        setup_sim(&(SimOptions) { .fault_order = c->order }, &o);
}

Test(gpu_fault_order, a_faulting_copy_fails_and_writes_no_signal, .timeout = 120) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *what = name_of(&cases[i]);
                setup_case(&cases[i]);
                GpuBuffer *dst = new_buf(4096, GPU_PLACEMENT_GTT), *page = new_buf(4096, GPU_PLACEMENT_GTT);
                volatile uint32_t *slot = gpu_buffer_get_cpu(page);
                slot[5] = ~5u; /* as a new fence page's slot 5 */
                GpuJob bad = { .type = GPU_JOB_COPY,
                               .copy = { .src_va = UNMAPPED + 0x3000, .dst_va = gpu_buffer_get_va(dst), .size = 256 },
                               .signal_va = gpu_buffer_get_va(page) + 5 * 4,
                               .signal_value = 1029 };
                GpuJob after = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(dst), .size = 64, .pattern = 7 } };
                uint64_t s_bad = submit(0, &bad), s_after = submit(0, &after);

                const GpuCompletion *cb = wait_seq(fx.ctx, &fx.comps, 0, s_bad);
                cr_assert_not_null(cb, "%s: the copy was never reported", what);
                cr_expect_eq(cb->error, -EFAULT, "%s: the faulting copy reported %d (%s)", what, cb->error,
                             cb->message ? cb->message : "");
                cr_expect_eq(cb->fault_va, UNMAPPED + 0x3000, "%s: fault at 0x%llx", what,
                             (unsigned long long) cb->fault_va);
                const GpuCompletion *ca = wait_seq(fx.ctx, &fx.comps, 0, s_after);
                cr_assert_not_null(ca, "%s", what);
                cr_expect_eq(ca->error, -ECANCELED, "%s: the job after it reported %d", what, ca->error);
                cr_expect(gpu_context_is_lost(fx.ctx, NULL), "%s", what);
                cr_expect_eq(slot[5], ~5u, "%s: the faulting copy's signal (a fence page slot) was written: 0x%x", what,
                             slot[5]);
                cr_expect_eq(*gpu_queue_fence_word(fx.ctx, 0), 0u, "%s: the fence word says a job completed", what);
                gpu_buffer_unref(dst);
                gpu_buffer_unref(page);
                teardown();
        }
}

Test(gpu_fault_order, a_faulting_kernel_fails, .timeout = 300) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *what = name_of(&cases[i]);
                setup_case(&cases[i]);
                GpuCodeObject *co = load_kernel_file("vector-add.hsaco");
                const GpuKernel *k = kernel_of(co, "vector_add");
                GpuBuffer *a = new_buf(4096, GPU_PLACEMENT_GTT);
                Args args = { 0 };
                /* c = a + b, b unmapped: a read fault. */
                arg_ptr(&args, k, gpu_buffer_get_va(a));
                arg_ptr(&args, k, UNMAPPED + 0x5000);
                arg_ptr(&args, k, gpu_buffer_get_va(a));
                arg_u32(&args, k, 64);
                GpuJob bad = dispatch_job(co, "vector_add", 64, 64, &args), nop = { .type = GPU_JOB_NOP };
                uint64_t s_bad = submit(COMPUTE_QUEUE, &bad), s_next = submit(COMPUTE_QUEUE, &nop);

                const GpuCompletion *cb = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_bad);
                cr_assert_not_null(cb, "%s: the dispatch was never reported", what);
                cr_expect_eq(cb->error, -EFAULT, "%s: the faulting dispatch reported %d (%s)", what, cb->error,
                             cb->message ? cb->message : "");
                cr_expect_eq(cb->fault_va & ~0xFFFull, UNMAPPED + 0x5000, "%s: fault at 0x%llx", what,
                             (unsigned long long) cb->fault_va);
                const GpuCompletion *cn = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_next);
                cr_assert_not_null(cn, "%s", what);
                cr_expect_eq(cn->error, -ECANCELED, "%s: the job after it reported %d", what, cn->error);
                cr_expect_eq(*gpu_queue_fence_word(fx.ctx, COMPUTE_QUEUE), 0u,
                             "%s: the fence word says the faulting dispatch completed", what);
                cr_expect(gpu_context_is_lost(fx.ctx, NULL), "%s", what);
                gpu_buffer_unref(a);
                gpu_code_object_unref(co);
                teardown();
        }
}
