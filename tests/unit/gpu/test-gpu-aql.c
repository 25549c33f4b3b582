/* SPDX-License-Identifier: MIT */
/*
 * GPU_JOB_AQL and HSA completions (daemon/gpu/gpu-aql.c, gpu-dispatch.c) on
 * the simulated CP: a client's kernel dispatch packet, laid out with its
 * kernel arguments, amd_queue_t and amd_signal_t in buffers of the context,
 * runs with the AQL user SGPRs and completes as ROCr expects (signal 1 -> 0,
 * timestamps, mailbox, a KFD event, the read index); a barrier waits on a
 * 64-bit signal; refused descriptors and geometries name what is wrong; the
 * stream is checked packet by packet. Run in a primary context of KFD 1.2x, a
 * secondary context, and a primary context of KFD 1.18 (what a worker
 * process has).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu-test.h"
#include "dispatch-test.h"
#include "gpu/gpu-internal.h" /* white box: the loaded descriptor, the event page, the kfd fd */
#include "gpu/pm4.h"
#include "util/macro.h"

/* amd_signal_t (ROCr amd_hsa_signal.h): kind @0, value @8,
 * event_mailbox_ptr @16, event_id @24, start_ts @32, end_ts @40. */
#define SIG_VALUE 8
#define SIG_MAILBOX 16
#define SIG_EVENT_ID 24
#define SIG_START_TS 32

static void setup_secondary(void) {
        setup_opts(&(GpuContextOptions) { .flags = GPU_CONTEXT_SECONDARY });
}

static void setup_kfd_1_18(void) {
        setup_sim(&(SimOptions) { .kfd_minor = 18 }, NULL);
}

static void setup_two_compute(void) {
        setup_opts(&(GpuContextOptions) { .n_compute_queues = 2, .compute_priority = { 7, 7 } });
}

static uint64_t va(GpuBuffer *b) {
        return gpu_buffer_get_va(b);
}

static void *cpu(GpuBuffer *b, uint64_t off) {
        return (uint8_t *) gpu_buffer_get_cpu(b) + off;
}

static uint64_t load64(GpuBuffer *b, uint64_t off) {
        return __atomic_load_n((uint64_t *) cpu(b, off), __ATOMIC_ACQUIRE);
}

/* A KFD signal event of the context (what ROCr's InterruptSignal creates),
 * and whether WAIT_EVENTS finds it signaled now. */
static uint32_t create_signal_event(uint32_t *ret_slot) {
        struct kfd_ioctl_create_event_args a = { .event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1 };
        int r = kfd_ioctl(fx.ctx->ops, fx.ctx->kfd_fd, AMDKFD_IOC_CREATE_EVENT, &a);
        cr_assert_eq(r, 0, "CREATE_EVENT: %s", strerror(-r));
        *ret_slot = a.event_slot_index;
        return a.event_id;
}

static bool event_fired(uint32_t id) {
        struct kfd_event_data ev = { .event_id = id };
        struct kfd_ioctl_wait_events_args w = { .events_ptr = (uint64_t) (uintptr_t) &ev, .num_events = 1,
                                                .timeout = 0 };
        int r = kfd_ioctl(fx.ctx->ops, fx.ctx->kfd_fd, AMDKFD_IOC_WAIT_EVENTS, &w);
        cr_assert_eq(r, 0, "WAIT_EVENTS: %s", strerror(-r));
        return w.wait_result == KFD_IOC_WAIT_RESULT_COMPLETE;
}

/* The kernel descriptor a loaded code object holds for its first kernel. */
static const uint8_t *descriptor_of(GpuCodeObject *co) {
        const GpuKernelCode *kc = &co->kernel_code[0];
        return (const uint8_t *) gpu_buffer_get_cpu(co->code) + (kc->kd_va - va(co->code));
}

/* A client's AQL dispatch of aql_probe: kernel arguments (out, in, probe, n)
 * in kernarg, its hsa_kernel_dispatch_packet_t in slot 3 of ring. */
typedef struct Client {
        GpuBuffer *ring, *queue, *kernarg, *signal, *in, *out, *probe, *words;
        uint32_t n;
} Client;

static void client_new(Client *cl, uint32_t n) {
        cl->n = n;
        cl->ring = new_buf(4096, GPU_PLACEMENT_GTT);
        cl->queue = new_buf(4096, GPU_PLACEMENT_GTT);
        cl->kernarg = new_buf(4096, GPU_PLACEMENT_GTT);
        cl->signal = new_buf(4096, GPU_PLACEMENT_GTT);
        cl->in = new_buf((uint64_t) n * 4 + 4096, GPU_PLACEMENT_VRAM);
        cl->out = new_buf((uint64_t) n * 4 + 4096, GPU_PLACEMENT_GTT);
        cl->probe = new_buf(4096, GPU_PLACEMENT_GTT);
        cl->words = new_buf(4096, GPU_PLACEMENT_GTT);
        uint32_t *in = cpu(cl->in, 0), *out = cpu(cl->out, 0);
        for (uint32_t i = 0; i < n + 1024; i++) {
                in[i] = i * 7u + 5u;
                out[i] = 0xDEADBEEFu;
        }
        uint8_t *ka = cpu(cl->kernarg, 0);
        uint64_t p[3] = { va(cl->out), va(cl->in), va(cl->probe) };
        memcpy(ka, p, sizeof p);
        memcpy(ka + 24, &n, 4);
        /* amd_signal_t: value 1 */
        *(uint64_t *) cpu(cl->signal, SIG_VALUE) = 1;
}

static void client_free(Client *cl) {
        GpuBuffer **b[] = { &cl->ring, &cl->queue, &cl->kernarg, &cl->signal, &cl->in, &cl->out, &cl->probe,
                            &cl->words };
        for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
                *b[i] = gpu_buffer_unref(*b[i]);
}

/* The packet in the client's ring (what the CP reads through the dispatch ptr). */
static uint64_t write_packet(Client *cl, uint64_t kernel_object, uint16_t block, uint32_t grid) {
        uint8_t *pkt = cpu(cl->ring, 3 * 64);
        uint16_t header = 2 | 2 << 9 | 2 << 11, setup = 1, one = 1;
        uint64_t kernarg = va(cl->kernarg), sig = va(cl->signal);

        memset(pkt, 0, 64);
        memcpy(pkt + 2, &setup, 2);
        memcpy(pkt + 4, &block, 2);
        memcpy(pkt + 6, &one, 2);
        memcpy(pkt + 8, &one, 2);
        memcpy(pkt + 12, &grid, 4);
        memcpy(pkt + 16, &(uint32_t) { 1 }, 4);
        memcpy(pkt + 20, &(uint32_t) { 1 }, 4);
        memcpy(pkt + 32, &kernel_object, 8);
        memcpy(pkt + 40, &kernarg, 8);
        memcpy(pkt + 56, &sig, 8);
        __atomic_store_n((uint16_t *) (void *) pkt, header, __ATOMIC_RELEASE);
        return va(cl->ring) + 3 * 64;
}

static GpuJob aql_job(Client *cl, const uint8_t *descriptor, uint64_t descriptor_va, uint16_t block) {
        GpuJob j = { .type = GPU_JOB_AQL };

        memcpy(j.aql.descriptor, descriptor, GPU_AQL_DESCRIPTOR_SIZE);
        j.aql.descriptor_va = descriptor_va;
        j.aql.packet_va = write_packet(cl, descriptor_va, block, cl->n);
        j.aql.queue_va = va(cl->queue);
        j.aql.kernarg_va = va(cl->kernarg);
        j.aql.dispatch_id = 3;
        j.aql.grid[0] = cl->n;
        j.aql.grid[1] = j.aql.grid[2] = 1;
        j.aql.block[0] = block;
        j.aql.block[1] = j.aql.block[2] = 1;
        return j;
}

static void check_result(Client *cl, uint16_t block, uint64_t packet_va) {
        const uint32_t *in = cpu(cl->in, 0), *out = cpu(cl->out, 0);
        for (uint32_t i = 0; i < cl->n; i++)
                cr_assert_eq(out[i], in[i] * 3u + 1u, "out[%u] = 0x%x", i, out[i]);
        for (uint32_t i = cl->n; i < cl->n + 1024; i++)
                cr_assert_eq(out[i], 0xDEADBEEFu, "out[%u] written past the grid", i);
        const uint64_t *probe = cpu(cl->probe, 0);
        cr_expect_eq(probe[0], block, "workgroup_size_x read through the dispatch ptr");
        cr_expect_eq(probe[1], cl->n, "grid_size_x read through the dispatch ptr");
        cr_expect_eq(probe[2], packet_va, "dispatch ptr = the client's ring slot");
        cr_expect_eq(probe[3], va(cl->queue), "queue ptr = the client's amd_queue_t");
        cr_expect_eq(probe[4], va(cl->kernarg), "kernarg segment ptr = the packet's kernarg_address");
}

/* The whole relay path of one packet: the kernel runs on the client's
 * arguments with the AQL user SGPRs, then its completion signal goes 1 -> 0,
 * start/end timestamps are written in order, the mailbox holds the event id,
 * the KFD event the test created fires, the read index is written. */
static void aql_dispatch_completes(void) {
        GpuCodeObject *co = load_kernel_file("aql-probe.hsaco");
        Client cl;
        uint32_t slot, event = create_signal_event(&slot);
        uint16_t block = 64;

        client_new(&cl, 1000);
        GpuJob j = aql_job(&cl, descriptor_of(co), co->kernel_code[0].kd_va, block);
        j.aql.hsa = (GpuHsaCompletion) {
                .ts_va = va(cl.signal) + SIG_START_TS,
                .signal_va = va(cl.signal) + SIG_VALUE,
                .mailbox_va = va(cl.words),
                .event_slot_va = va(fx.ctx->event_page) + (uint64_t) slot * 8,
                .event_id = event,
                .index_va = va(cl.queue) + 0x38, /* amd_queue_t.read_dispatch_id */
                .index_value = 4,
                .acquire = true,
        };
        cr_expect_not(event_fired(event), "the event is not signaled before the packet ran");

        const GpuCompletion *c = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j));
        check_ok(c);
        check_result(&cl, block, j.aql.packet_va);
        cr_expect_eq(load64(cl.signal, SIG_VALUE), 0u, "the completion signal went 1 -> 0");
        uint64_t start = load64(cl.signal, SIG_START_TS), end = load64(cl.signal, SIG_START_TS + 8);
        cr_expect_neq(start, 0u, "start_ts written");
        cr_expect_leq(start, end, "start_ts %llu <= end_ts %llu", (unsigned long long) start,
                      (unsigned long long) end);
        cr_expect_eq(*(uint32_t *) cpu(cl.words, 0), event, "the mailbox holds the event id");
        cr_expect(event_fired(event), "the client's KFD event fired");
        cr_expect_eq(load64(cl.queue, 0x38), 4u, "read_dispatch_id advanced when the packet retired");
        client_free(&cl);
        gpu_code_object_unref(co);
}

Test(gpu_aql, dispatch_completes, .init = setup, .fini = teardown, .timeout = 120) {
        aql_dispatch_completes();
}

Test(gpu_aql, dispatch_completes_in_a_secondary_context, .init = setup_secondary, .fini = teardown, .timeout = 120) {
        aql_dispatch_completes();
}

Test(gpu_aql, dispatch_completes_on_kfd_1_18, .init = setup_kfd_1_18, .fini = teardown, .timeout = 120) {
        aql_dispatch_completes();
}

/*
 * ROCr's blit kernels: an amd_kernel_code_t (AMDKernelCodeT.h) in front of
 * wave64 code. Built here from the wave64 build of aql_probe: its code copied
 * behind a 256-byte amd_kernel_code_t carrying its RSRC1/2 and user SGPR
 * enables, with what a v3 descriptor would read as reserved bytes and as an
 * RSRC3 with a reserved bit set (prefetch fields, the high half of
 * max_scratch_backing_memory_byte_size), which must not matter for this layout.
 */
Test(gpu_aql, amd_kernel_code_t_runs_wave64, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("aql-probe-w64.hsaco");
        const GpuKernelCode *kc = &co->kernel_code[0];
        cr_assert_not(kc->wave32);
        GpuBuffer *code = NULL;
        cr_assert_eq(gpu_buffer_new(fx.ctx, 8192, GPU_PLACEMENT_GTT, true, &code), 0);
        uint8_t *akc = gpu_buffer_get_cpu(code);
        uint64_t code_bytes = MIN(4096u, va(co->code) + gpu_buffer_get_size(co->code) - kc->entry_va);

        memcpy(akc + 256, (uint8_t *) gpu_buffer_get_cpu(co->code) + (kc->entry_va - va(co->code)), code_bytes);
        uint32_t major = 1, minor = 2, rsrc3_word = 1u << 20;
        uint16_t kind = 1, mv[3] = { 10, 3, 0 };
        int64_t entry = 256, prefetch = 256;
        uint32_t props = kc->code_properties | 1u << 19 /* is_ptr64 */ | 2u << 17 /* private_element_size 4 */;
        memcpy(akc + 0, &major, 4);
        memcpy(akc + 4, &minor, 4);
        memcpy(akc + 8, &kind, 2);
        memcpy(akc + 10, mv, 6);
        memcpy(akc + 16, &entry, 8);
        memcpy(akc + 24, &prefetch, 8);
        memcpy(akc + 44, &rsrc3_word, 4);
        memcpy(akc + 48, &kc->rsrc1, 4);
        memcpy(akc + 52, &kc->rsrc2, 4);
        memcpy(akc + 56, &props, 4);

        Client cl;
        client_new(&cl, 777);
        uint16_t block = 128; /* two waves of 64 */
        GpuJob j = aql_job(&cl, akc, va(code), block);
        j.aql.hsa.signal_va = va(cl.signal) + SIG_VALUE;
        char err[256] = "";
        cr_assert_eq(gpu_aql_check(fx.ctx, &j, err, sizeof err), 0, "%s", err);

        /* As a v3 descriptor the same bytes would be refused. */
        GpuJob v3 = j;
        memset(v3.aql.descriptor, 0, 16);
        cr_expect_eq(gpu_aql_check(fx.ctx, &v3, err, sizeof err), -EINVAL);
        cr_expect(strstr(err, "reserved"), "read as v3: %s", err);

        check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
        check_result(&cl, block, j.aql.packet_va);
        cr_expect_eq(load64(cl.signal, SIG_VALUE), 0u);

        /* It ran wave64: CS_W32_EN clear, and RSRC3 0 in the stream. */
        GpuQueue *q = &fx.ctx->queues[COMPUTE_QUEUE];
        GpuInflight f = { .seq = 9, .job = j };
        uint32_t ring[512];
        cr_assert_eq(gpu_dispatch_prepare(fx.ctx, q, &j, f.seq, &f), 0);
        size_t n = gpu_compute_emit_job(fx.ctx, q, &j, &f, ring);
        cr_assert_eq(n, gpu_compute_job_dwords(fx.ctx, &j));
        bool saw_rsrc3 = false, saw_dispatch = false;
        for (size_t i = 0; i < n;) {
                uint32_t h = ring[i], count = (h >> 16) & 0x3FFF, op = (h >> 8) & 0xFF;
                if (op == PKT3_SET_SH_REG && ring[i + 1] == mmCOMPUTE_PGM_RSRC3 - PM4_SH_REG_BASE) {
                        cr_expect_eq(ring[i + 2], 0u, "RSRC3 of an amd_kernel_code_t is 0");
                        saw_rsrc3 = true;
                }
                if (op == PKT3_DISPATCH_DIRECT) {
                        cr_expect_eq(ring[i + 4] & COMPUTE_DISPATCH_INITIATOR_CS_W32_EN, 0u, "wave64");
                        saw_dispatch = true;
                }
                i += count == 0x3FFF ? 1 : count + 2;
        }
        cr_expect(saw_rsrc3 && saw_dispatch);
        gpu_buffer_unref(f.scratch);
        client_free(&cl);
        gpu_buffer_unref(code);
        gpu_code_object_unref(co);
}

/*
 * A barrier-AND packet: a NOP with a 64-bit wait on a signal whose low half
 * is already 0 (a 32-bit compare would pass). It stays unstarted (no begin
 * timestamp, not complete) while a kernel runs to the end on the other
 * compute queue, then starts once the test writes 0, after that kernel on
 * the simulator's clock; its own completion (the mailbox as ROCr points it
 * at the event's slot) fires the event and writes the index.
 */
Test(gpu_aql, barrier_waits_for_a_64_bit_signal, .init = setup_two_compute, .fini = teardown, .timeout = 120) {
        const unsigned qa = 2, qb = 3;
        GpuCodeObject *co = load_kernel_file("aql-probe.hsaco");
        Client cl;
        uint32_t slot, event = create_signal_event(&slot);

        client_new(&cl, 4096);
        uint64_t dep = va(cl.words) + 64;
        __atomic_store_n((uint64_t *) cpu(cl.words, 64), 1ull << 32, __ATOMIC_RELEASE);
        GpuJob barrier = { .type = GPU_JOB_NOP, .n_waits = 1 };
        barrier.waits[0] = (GpuWait) { .va = dep, .zero64 = true };
        barrier.nop.hsa = (GpuHsaCompletion) {
                .signal_va = va(cl.signal) + SIG_VALUE,
                .mailbox_va = va(fx.ctx->event_page) + (uint64_t) slot * 8,
                .event_id = event,
                .index_va = va(cl.queue) + 0x38,
                .index_value = 7,
        };
        uint64_t sb = submit(qa, &barrier);

        GpuJob k = aql_job(&cl, descriptor_of(co), co->kernel_code[0].kd_va, 256);
        const GpuCompletion *ck = wait_seq(fx.ctx, &fx.comps, qb, submit(qb, &k));
        check_ok(ck);
        uint64_t kernel_end = ck->end_ns;
        cr_assert_eq(gpu_queue_get_completed(fx.ctx, qa), sb - 1, "the barrier has not completed");
        cr_expect_eq(load64(fx.ctx->fence, GPU_FENCE_WORDS_SIZE + (uint64_t) qa * GPU_FENCE_TS_PER_QUEUE(fx.ctx->max_inflight) +
                                                    (sb % fx.ctx->max_inflight) * 16),
                     0u, "the barrier has not started (no begin timestamp)");
        cr_expect_eq(load64(cl.signal, SIG_VALUE), 1u);
        cr_expect_eq(load64(cl.queue, 0x38), 0u);
        cr_expect_not(event_fired(event));

        __atomic_store_n((uint64_t *) cpu(cl.words, 64), 0, __ATOMIC_RELEASE);
        const GpuCompletion *cbar = wait_seq(fx.ctx, &fx.comps, qa, sb);
        check_ok(cbar);
        cr_expect_geq(cbar->begin_ns, kernel_end, "started after the kernel on the other queue ended");
        cr_expect_eq(load64(cl.signal, SIG_VALUE), 0u);
        cr_expect_eq(load64(cl.queue, 0x38), 7u);
        cr_expect(event_fired(event), "the event fired through its own slot as mailbox");
        client_free(&cl);
        gpu_code_object_unref(co);
}

/* The order of the completion's writes, on the simulator: the mailbox
 * faults; the signal before it was decremented, and the job is reported
 * -EFAULT at the mailbox, never as done — the barrier after the client's
 * writes holds the daemon's fence until the fault has been handled. (The
 * read index after it may be written: the simulator's default fault order
 * runs on past a faulting write, as a gfx10 CP without retry may.) */
Test(gpu_aql, completion_writes_in_order, .init = setup, .fini = teardown, .timeout = 120) {
        Client cl;
        uint64_t unmapped = 0x7E0000001000ull;

        client_new(&cl, 64);
        GpuJob j = { .type = GPU_JOB_NOP };
        j.nop.hsa = (GpuHsaCompletion) {
                .signal_va = va(cl.signal) + SIG_VALUE,
                .mailbox_va = unmapped,
                .event_id = 5,
                .index_va = va(cl.queue) + 0x38,
                .index_value = 9,
        };
        const GpuCompletion *c = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j));
        cr_expect_eq(c->error, -EFAULT, "error %d", c->error);
        cr_expect_eq(c->fault_va & ~0xFFFull, unmapped);
        cr_expect_eq(load64(cl.signal, SIG_VALUE), 0u, "the signal was decremented before the mailbox");
        client_free(&cl);
}

/* A kernel of an AQL job that writes where nothing is mapped: reported as a
 * GPU_JOB_DISPATCH fault is (-EFAULT at the address; the job behind it
 * -ECANCELED; the context lost), and its completion never happened. */
Test(gpu_aql, a_faulting_aql_kernel_ends_its_context, .init = setup, .fini = teardown, .timeout = 120) {
        GpuCodeObject *co = load_kernel_file("aql-probe.hsaco");
        Client cl;
        uint64_t unmapped = 0x7E0000000000ull;

        client_new(&cl, 64);
        memcpy(cpu(cl.kernarg, 0), &unmapped, 8); /* out */
        GpuJob j = aql_job(&cl, descriptor_of(co), co->kernel_code[0].kd_va, 64);
        j.aql.hsa.signal_va = va(cl.signal) + SIG_VALUE;
        uint64_t s = submit(COMPUTE_QUEUE, &j);
        GpuJob nop = { .type = GPU_JOB_NOP };
        uint64_t s_next = submit(COMPUTE_QUEUE, &nop);
        const GpuCompletion *c = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s);
        cr_expect_eq(c->error, -EFAULT, "error %d", c->error);
        cr_expect_eq(c->fault_va & ~0xFFFull, unmapped);
        cr_expect_eq(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, s_next)->error, -ECANCELED);
        cr_expect(gpu_context_is_lost(fx.ctx, NULL));
        cr_expect_eq(load64(cl.signal, SIG_VALUE), 1u, "no completion for a packet that faulted");
        client_free(&cl);
        gpu_code_object_unref(co);
}

/* Every refused descriptor and geometry: -EINVAL from gpu_aql_check() with
 * the field named, and from gpu_queue_submit(). */
Test(gpu_aql, refused_descriptors_and_geometries, .init = setup, .fini = teardown) {
        GpuCodeObject *co = load_kernel_file("aql-probe.hsaco");
        Client cl;

        client_new(&cl, 64);
        GpuJob good = aql_job(&cl, descriptor_of(co), co->kernel_code[0].kd_va, 64);
        char err[256] = "";
        cr_assert_eq(gpu_aql_check(fx.ctx, &good, err, sizeof err), 0, "%s", err);

        static const char *const what[] = {
                "grid_size_y is 0",
                "workgroup_size_z is 0",
                "workgroup of 2048 work-items (64 x 32 x 1), at most 1024",
                "group_segment_size of 65537 bytes",
                "private_segment_size of 1048576 bytes",
                "COMPUTE_PGM_RSRC1.PRIV (bit 20)",
                "COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6)",
                "bit 4 of COMPUTE_PGM_RSRC3, which is reserved on gfx10",
                "kernel_code_properties 0x",
                "reserved bytes of the kernel descriptor",
                "kernarg preload",
                "USER_SGPR_COUNT is 0",
                "is not 256-byte aligned",
                "outside the address space",
                "signal value address",
                "read index address",
                "timestamp address",
                "event mailbox address",
        };
        for (unsigned i = 0; i < sizeof what / sizeof what[0]; i++) {
                GpuJob j = good;
                uint8_t *d = j.aql.descriptor;
                uint64_t seq;

                switch (i) {
                case 0: j.aql.grid[1] = 0; break;
                case 1: j.aql.block[2] = 0; break;
                case 2: j.aql.block[1] = 32; break;
                case 3: j.aql.group_segment_size = 65537; break;
                case 4: j.aql.private_segment_size = 1u << 20; break;
                case 5: d[48 + 2] |= 1u << 4; break;            /* RSRC1 bit 20 */
                case 6: d[52] |= 1u << 6; break;                /* RSRC2 bit 6 */
                case 7: d[44] |= 1u << 4; break;                /* RSRC3 bit 4 */
                case 8: d[56] |= 1u << 7; break;                /* kernel_code_properties bit 7 */
                case 9: d[30] = 1; break;                       /* reserved1 */
                case 10: d[58] = 1; break;                      /* kernarg_preload */
                case 11: d[52] &= (uint8_t) ~0x3Eu; break;      /* RSRC2.USER_SGPR_COUNT */
                case 12: j.aql.descriptor_va += 64; break;
                case 13: memset(d + 16, 0, 8); d[23] = 0x80; break; /* entry offset -2^63 */
                case 14: j.aql.hsa.signal_va = va(cl.signal) + 4; break;
                case 15: j.aql.hsa.index_va = va(cl.queue) + 0x3C; break;
                case 16: j.aql.hsa.ts_va = va(cl.signal) + 36; break;
                case 17: j.aql.hsa.mailbox_va = va(cl.words) + 2; break;
                }
                err[0] = '\0';
                cr_expect_eq(gpu_aql_check(fx.ctx, &j, err, sizeof err), -EINVAL, "%s: accepted", what[i]);
                cr_expect(strstr(err, what[i]), "expected \"%s\" in \"%s\"", what[i], err);
                cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &j, &seq), -EINVAL, "%s: submitted", what[i]);
        }

        /* HSA completions and 64-bit waits are PM4: not on an SDMA queue. */
        uint64_t seq;
        GpuJob nop = { .type = GPU_JOB_NOP };
        nop.nop.hsa.signal_va = va(cl.signal) + SIG_VALUE;
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &nop, &seq), -EINVAL);
        nop.nop.hsa.signal_va = va(cl.signal) + 12;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &nop, &seq), -EINVAL, "misaligned signal on a NOP");
        GpuJob wait = { .type = GPU_JOB_NOP, .n_waits = 1 };
        wait.waits[0] = (GpuWait) { .va = va(cl.words), .zero64 = true };
        cr_expect_eq(gpu_queue_submit(fx.ctx, 0, &wait, &seq), -EINVAL, "64-bit wait on SDMA");
        wait.waits[0].va += 4;
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &wait, &seq), -EINVAL, "misaligned 64-bit wait");
        wait.waits[0] = (GpuWait) { .queue = 0, .seq = 0, .zero64 = true };
        cr_expect_eq(gpu_queue_submit(fx.ctx, COMPUTE_QUEUE, &wait, &seq), -EINVAL, "64-bit wait without an address");
        client_free(&cl);
        gpu_code_object_unref(co);
}

/* The packets of a GPU_JOB_AQL job with every part of an HSA completion,
 * one by one (gpu-dispatch.c's file comment), and the user SGPRs with the
 * client's values. */
Test(gpu_aql, stream_packet_by_packet, .init = setup, .fini = teardown) {
        GpuCodeObject *co = load_kernel_file("aql-probe.hsaco");
        GpuQueue *q = &fx.ctx->queues[COMPUTE_QUEUE];
        Client cl;
        uint32_t ring[512];

        client_new(&cl, 100);
        GpuJob j = aql_job(&cl, descriptor_of(co), co->kernel_code[0].kd_va, 64);
        j.aql.dispatch_id = 0x123456789ull;
        j.aql.group_segment_size = 1000;
        j.n_waits = 2;
        j.waits[0] = (GpuWait) { .va = va(cl.words) + 8, .zero64 = true };
        j.waits[1] = (GpuWait) { .va = va(cl.words) + 16, .value = 3 };
        j.aql.hsa = (GpuHsaCompletion) { .ts_va = va(cl.signal) + 32, .signal_va = va(cl.signal) + 8,
                                         .event_slot_va = va(cl.words) + 32, .mailbox_va = va(cl.words) + 40,
                                         .event_id = 77, .index_va = va(cl.queue) + 0x38, .index_value = 4 };
        GpuInflight f = { .seq = 5, .job = j };
        cr_assert_eq(gpu_dispatch_prepare(fx.ctx, q, &j, f.seq, &f), 0);
        size_t n = gpu_compute_emit_job(fx.ctx, q, &j, &f, ring);
        cr_assert_eq(n, gpu_compute_job_dwords(fx.ctx, &j), "the dword count matches the stream");

        uint64_t ts = gpu_queue_ts_va(fx.ctx, COMPUTE_QUEUE, 5);
        size_t i = 0;
#define NEXT(op)                                                                                       \
        ({                                                                                             \
                cr_assert_lt(i, n);                                                                    \
                uint32_t h_ = ring[i], c_ = (h_ >> 16) & 0x3FFF;                                       \
                cr_assert_eq((h_ >> 8) & 0xFF, (uint32_t) (op), "packet at dword %zu: opcode 0x%x, not 0x%x", i, \
                             (h_ >> 8) & 0xFF, (uint32_t) (op));                                       \
                const uint32_t *p_ = ring + i;                                                         \
                i += c_ + 2;                                                                           \
                p_;                                                                                    \
        })
#define ADDR(p, k) ((uint64_t) (p)[k] | (uint64_t) (p)[(k) + 1] << 32)
        const uint32_t *p = NEXT(PKT3_WAIT_REG_MEM64);
        cr_expect_eq(p[1] & 7, (uint32_t) PM4_WAIT_EQ);
        cr_expect_eq(ADDR(p, 2), va(cl.words) + 8);
        cr_expect_eq(ADDR(p, 4), 0u, "reference 0");
        cr_expect_eq(ADDR(p, 6), UINT64_MAX, "mask ~0");
        p = NEXT(PKT3_WAIT_REG_MEM);
        cr_expect_eq(p[1] & 7, (uint32_t) PM4_WAIT_GE);
        cr_expect_eq(ADDR(p, 2), va(cl.words) + 16);
        cr_expect_eq(p[4], 3u);
        p = NEXT(PKT3_RELEASE_MEM); /* daemon's begin */
        cr_expect_eq(p[2] >> 29, (uint32_t) PM4_DATA_TIMESTAMP);
        cr_expect_eq(ADDR(p, 3), ts);
        p = NEXT(PKT3_RELEASE_MEM); /* client's start_ts */
        cr_expect_eq(p[2] >> 29, (uint32_t) PM4_DATA_TIMESTAMP);
        cr_expect_eq(ADDR(p, 3), va(cl.signal) + 32);
        p = NEXT(PKT3_ACQUIRE_MEM);
        cr_expect_eq(p[7] & (ACQUIRE_MEM_GCR_GLI_INV_ALL | ACQUIRE_MEM_GCR_GL2_INV),
                     ACQUIRE_MEM_GCR_GLI_INV_ALL | ACQUIRE_MEM_GCR_GL2_INV);
        uint32_t regs[0x400] = { 0 };
        bool set[0x400] = { false };
        while ((((ring[i] >> 8) & 0xFF)) == PKT3_SET_SH_REG) {
                p = NEXT(PKT3_SET_SH_REG);
                for (uint32_t r = 0; r < ((p[0] >> 16) & 0x3FFF); r++) {
                        regs[p[1] + r] = p[2 + r];
                        set[p[1] + r] = true;
                }
        }
        const GpuKernelCode *kc = &co->kernel_code[0];
        cr_expect_eq((uint64_t) regs[0x20C] << 8 | (uint64_t) regs[0x20D] << 40, kc->entry_va, "COMPUTE_PGM_LO/HI");
        cr_expect_eq(regs[0x212], kc->rsrc1);
        cr_expect_eq(regs[0x213], (kc->rsrc2 & ~COMPUTE_PGM_RSRC2_LDS_SIZE_MASK) | 2u << 15,
                     "RSRC2.LDS_SIZE from the packet's group_segment_size (1000 bytes: 2 granules)");
        cr_expect_eq(regs[0x228], kc->rsrc3);
        /* aql_probe enables private segment buffer (4), dispatch ptr, queue ptr, kernarg ptr */
        unsigned u = 0x240 + ((kc->code_properties & 1) ? 4 : 0);
        cr_expect_eq(ADDR(regs, u), j.aql.packet_va, "dispatch ptr");
        cr_expect_eq(ADDR(regs, u + 2), va(cl.queue), "queue ptr");
        cr_expect_eq(ADDR(regs, u + 4), va(cl.kernarg), "kernarg segment ptr");
        cr_expect_not(set[u + 6], "no more user SGPRs than the descriptor enables");
        cr_expect_eq(regs[0x207], 64u | 36u << 16, "NUM_THREAD_X: 64, the partial group 36");
        p = NEXT(PKT3_DISPATCH_DIRECT);
        cr_expect_eq(p[1], 2u);
        cr_expect_eq(p[4] & COMPUTE_DISPATCH_INITIATOR_CS_W32_EN, COMPUTE_DISPATCH_INITIATOR_CS_W32_EN);
        p = NEXT(PKT3_EVENT_WRITE);
        cr_expect_eq(p[1] & 0x3F, PM4_EVENT_CS_PARTIAL_FLUSH);
        p = NEXT(PKT3_RELEASE_MEM); /* client's end_ts */
        cr_expect_eq(ADDR(p, 3), va(cl.signal) + 40);
        p = NEXT(PKT3_RELEASE_MEM); /* daemon's end, with the write-back */
        cr_expect_eq(ADDR(p, 3), ts + 8);
        cr_expect_eq(p[1] & RELEASE_MEM_GCR_GL2_WB, RELEASE_MEM_GCR_GL2_WB, "the job's writes leave the GL2");
        p = NEXT(PKT3_WAIT_REG_MEM64);
        cr_expect_eq(p[1] & 7, (uint32_t) PM4_WAIT_NE, "waits until the end timestamp landed");
        cr_expect_eq(ADDR(p, 2), ts + 8);
        cr_expect_eq(ADDR(p, 4), 0u);
        /* The barrier (gpu-queue.c "Completion"): the client's signal only
         * once the kernel has handled every interrupt before it. */
        p = NEXT(PKT3_WRITE_DATA);
        cr_expect_eq(p[4], q->ack_event);
        p = NEXT(PKT3_RELEASE_MEM);
        cr_expect_eq(p[7], q->ack_event, "the barrier's interrupt");
        p = NEXT(PKT3_WAIT_REG_MEM);
        p = NEXT(PKT3_ATOMIC_MEM);
        cr_expect_eq(p[1] & 0x7F, PM4_TC_OP_ATOMIC_ADD_RTN_64);
        cr_expect_eq((p[1] >> 8) & 0xF, (uint32_t) PM4_ATOMIC_WAIT_FOR_WRITE_CONFIRM);
        cr_expect_eq(ADDR(p, 2), va(cl.signal) + 8);
        cr_expect_eq(ADDR(p, 4), UINT64_MAX, "adds -1");
        p = NEXT(PKT3_WRITE_DATA);
        cr_expect_eq(ADDR(p, 2), va(cl.words) + 32);
        cr_expect_eq(p[4], 77u);
        p = NEXT(PKT3_RELEASE_MEM); /* mailbox + interrupt */
        cr_expect_eq(ADDR(p, 3), va(cl.words) + 40);
        cr_expect_eq(p[2] >> 29, (uint32_t) PM4_DATA_32);
        cr_expect_eq((p[2] >> 24) & 7, (uint32_t) PM4_INT_AFTER_WRITE_CONFIRM);
        cr_expect_eq(p[5], 77u);
        cr_expect_eq(p[7], 77u, "INT_CTXID = the event id");
        p = NEXT(PKT3_RELEASE_MEM); /* read index */
        cr_expect_eq(p[2] >> 29, (uint32_t) PM4_DATA_64);
        cr_expect_eq(ADDR(p, 3), va(cl.queue) + 0x38);
        cr_expect_eq(ADDR(p, 5), 4u);
        p = NEXT(PKT3_WRITE_DATA); /* the second barrier, after the client's writes */
        cr_expect_eq(p[4], q->ack_event);
        p = NEXT(PKT3_RELEASE_MEM);
        p = NEXT(PKT3_WAIT_REG_MEM);
        p = NEXT(PKT3_RELEASE_MEM); /* the daemon's fence: after everything of the client's */
        cr_expect_eq(ADDR(p, 3), gpu_queue_fence_va(fx.ctx, COMPUTE_QUEUE));
        cr_expect_eq(p[5], 5u);
        p = NEXT(PKT3_RELEASE_MEM); /* the daemon's completion interrupt */
        cr_expect_eq(p[7], q->done_event);
        cr_expect_eq(i, n, "nothing else");
#undef NEXT
#undef ADDR
        gpu_buffer_unref(f.scratch);
        client_free(&cl);
        gpu_code_object_unref(co);
}

/* Every user SGPR an AQL descriptor can enable, with the values the CP's AQL
 * front end gives them (LLVM AMDGPUUsage, "Initial Kernel Execution State"):
 * aql_probe's descriptor with dispatch id, flat scratch init and private
 * segment size enabled as well, and a packet asking for scratch. */
Test(gpu_aql, every_user_sgpr, .init = setup, .fini = teardown) {
        GpuCodeObject *co = load_kernel_file("aql-probe.hsaco");
        GpuQueue *q = &fx.ctx->queues[COMPUTE_QUEUE];
        Client cl;
        uint32_t ring[512];

        client_new(&cl, 100);
        GpuJob j = aql_job(&cl, descriptor_of(co), co->kernel_code[0].kd_va, 64);
        uint16_t kcp;
        uint32_t rsrc2;
        memcpy(&kcp, j.aql.descriptor + 56, 2);
        memcpy(&rsrc2, j.aql.descriptor + 52, 4);
        cr_assert_eq(kcp & 0xF, 0xFu, "private segment buffer, dispatch ptr, queue ptr, kernarg ptr");
        kcp |= 1u << 4 | 1u << 5 | 1u << 6;
        rsrc2 = (rsrc2 & ~0x3Eu) | 15u << 1;
        memcpy(j.aql.descriptor + 56, &kcp, 2);
        memcpy(j.aql.descriptor + 52, &rsrc2, 4);
        j.aql.dispatch_id = 0x123456789ull;
        j.aql.private_segment_size = 98;
        char err[256] = "";
        cr_assert_eq(gpu_aql_check(fx.ctx, &j, err, sizeof err), 0, "%s", err);

        GpuInflight f = { .seq = 5, .job = j };
        cr_assert_eq(gpu_dispatch_prepare(fx.ctx, q, &j, f.seq, &f), 0);
        cr_assert_not_null(f.scratch, "the queue's scratch backs the packet's private segment");
        size_t n = gpu_compute_emit_job(fx.ctx, q, &j, &f, ring);
        cr_assert_eq(n, gpu_compute_job_dwords(fx.ctx, &j));
        uint32_t user[16] = { 0 };
        unsigned n_user = 0;
        for (size_t i = 0; i < n;) {
                uint32_t h = ring[i], count = (h >> 16) & 0x3FFF;
                if (((h >> 8) & 0xFF) == PKT3_SET_SH_REG && ring[i + 1] == mmCOMPUTE_USER_DATA_0 - PM4_SH_REG_BASE) {
                        n_user = count;
                        memcpy(user, ring + i + 2, count * 4);
                }
                i += count == 0x3FFF ? 1 : count + 2;
        }
        uint64_t scratch = gpu_buffer_get_va(f.scratch);
        cr_assert_eq(n_user, 15u);
        cr_expect_eq(user[0], (uint32_t) scratch, "private segment buffer V# base");
        cr_expect_eq(user[2], (uint32_t) gpu_buffer_get_size(f.scratch), "V# NUM_RECORDS");
        cr_expect_eq(user[4] | (uint64_t) user[5] << 32, j.aql.packet_va, "dispatch ptr");
        cr_expect_eq(user[6] | (uint64_t) user[7] << 32, va(cl.queue), "queue ptr");
        cr_expect_eq(user[8] | (uint64_t) user[9] << 32, va(cl.kernarg), "kernarg segment ptr");
        cr_expect_eq(user[10] | (uint64_t) user[11] << 32, 0x123456789ull, "dispatch id = the packet's index");
        cr_expect_eq(user[12] | (uint64_t) user[13] << 32, scratch, "flat scratch init");
        cr_expect_eq(user[14], 100u, "private segment size, dword-aligned");

        /* Charged as a dispatch of the same needs would be. */
        uint32_t wave_bytes = 0;
        uint64_t bytes = gpu_dispatch_scratch_bytes(fx.ctx, &j, &wave_bytes);
        cr_expect_gt(bytes, 0u);
        cr_expect_eq(wave_bytes, 4096u, "32 lanes x 100 bytes in whole 1 KiB units");
        gpu_buffer_unref(f.scratch);
        client_free(&cl);
        gpu_code_object_unref(co);
}

/* Scratch through AQL: private_array (a dynamically indexed private array)
 * run from its descriptor with the packet's private_segment_size, with buffer
 * and with flat scratch instructions, wave32 and wave64. */
Test(gpu_aql, scratch_kernels_run, .init = setup, .fini = teardown, .timeout = 120) {
        static const char *const files[] = { "private-array.hsaco", "private-array-fs.hsaco",
                                             "private-array-w64.hsaco" };
        const uint32_t n = 500;

        for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
                GpuCodeObject *co = load_kernel_file(files[fi]);
                const GpuKernel *k = gpu_code_object_kernel(co, 0);
                Client cl;

                client_new(&cl, n);
                uint8_t *ka = cpu(cl.kernarg, 0);
                memset(ka, 0, 4096);
                uint64_t p[2] = { va(cl.in), va(cl.out) };
                memcpy(ka, p, sizeof p);
                memcpy(ka + 16, &n, 4);
                GpuJob j = aql_job(&cl, descriptor_of(co), co->kernel_code[0].kd_va, 64);
                cr_assert_gt(k->private_segment_size, 0u);
                j.aql.private_segment_size = k->private_segment_size;
                j.aql.hsa.signal_va = va(cl.signal) + SIG_VALUE;
                check_ok(wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j)));
                const uint32_t *in = cpu(cl.in, 0), *out = cpu(cl.out, 0);
                for (uint32_t i = 0; i < n; i++) {
                        uint32_t a[64], acc = 0, v = in[i];
                        for (uint32_t x = 0; x < 64; x++)
                                a[x] = v * x + i;
                        for (uint32_t x = 0; x < 16; x++)
                                acc += a[(v + x * 7) & 63];
                        cr_assert_eq(out[i], acc, "%s: out[%u] = %u, not %u", files[fi], i, out[i], acc);
                }
                cr_expect_eq(load64(cl.signal, SIG_VALUE), 0u);
                client_free(&cl);
                gpu_code_object_unref(co);
        }
}

/* A barrier whose dependent signal lies where nothing is mapped: the wait
 * faults, the job is reported -EFAULT at that address, its completion never
 * happened. */
Test(gpu_aql, a_barrier_on_an_unmapped_signal_faults, .init = setup, .fini = teardown, .timeout = 120) {
        Client cl;
        uint64_t unmapped = 0x7E0000002000ull;

        client_new(&cl, 64);
        GpuJob j = { .type = GPU_JOB_NOP, .n_waits = 1 };
        j.waits[0] = (GpuWait) { .va = unmapped, .zero64 = true };
        const GpuCompletion *c = wait_seq(fx.ctx, &fx.comps, COMPUTE_QUEUE, submit(COMPUTE_QUEUE, &j));
        cr_expect_eq(c->error, -EFAULT, "error %d (%s)", c->error, c->message ? c->message : "");
        cr_expect_eq(c->fault_va & ~0xFFFull, unmapped);
        client_free(&cl);
}
