/* SPDX-License-Identifier: MIT */
/*
 * The compute (PM4) job stream of a GpuQueue: checking a dispatch against
 * what the hardware can run, laying out its kernel arguments and dispatch
 * packet, sizing scratch, and the packets that program and run it — for the
 * daemon's own dispatches (GPU_JOB_DISPATCH) and for a client's translated
 * AQL packets (GPU_JOB_AQL, GPU_JOB_NOP with an HSA completion; gpu-aql.c
 * reads their descriptors). Called by gpu-queue.c, which owns the ring; runs
 * on the event loop and never blocks.
 *
 * Job stream (every packet from pm4.c, layouts in kfd-facts §2.2; [hsa]:
 * only for a job whose GpuHsaCompletion asks for it, so a job without one is
 * what it was before they existed):
 *   WAIT_REG_MEM(memory, >=, mask ~0) per cross-queue wait (another queue's
 *     32-bit fence word >= its seq, or a relay word), or WAIT_REG_MEM64(==,
 *     0, mask ~0) per 64-bit wait (an HSA signal of a barrier-AND packet),
 *   RELEASE_MEM(DATA_SEL 3: GPU clock → begin timestamp slot),
 *   [hsa] RELEASE_MEM(DATA_SEL 3 → the client's start_ts),
 *   [hsa, NOP] ACQUIRE_MEM(the dispatch acquire's GCR bits) when it asks to acquire
 *     (a GPU_JOB_AQL body has it anyway),
 *   dispatch body (below) or nothing for a NOP job,
 *   [hsa] RELEASE_MEM(DATA_SEL 3 → the client's end_ts),
 *   RELEASE_MEM(DATA_SEL 3 → end timestamp slot); [hsa, when the completion
 *     writes a signal, an event or an index] with the fence's GCR (what the
 *     job wrote leaves the GL2 first), then:
 *   [hsa] WAIT_REG_MEM64(end timestamp slot != 0): the micro engine goes on
 *     past a RELEASE_MEM before its end-of-pipe write is done, and the
 *     ATOMIC_MEM and WRITE_DATA below are its own writes, so it first waits
 *     for the timestamp (zeroed before the job is written; a written GPU
 *     clock is never 0, as head_running() in gpu-queue.c relies on too):
 *     then the job's writes are in memory and the client's end_ts written
 *     before its signal says done — HIP reads the timestamps once the
 *     signal has;
 *   [hsa] ATOMIC_MEM(TC_OP_ATOMIC_ADD_RTN_64, -1, WAIT_FOR_WRITE_CONFIRM,
 *     the signal's value): the decrement ROCr's own PM4 path emits
 *     (pm4.h), and the micro engine waits until it is done;
 *   [hsa] WRITE_DATA(the event slot := event id, 32 bits, WR_CONFIRM);
 *   [hsa] RELEASE_MEM(DATA_SEL 1: the mailbox := event id, INT_SEL 2,
 *     INT_CTXID = event id): the client's KFD event, as its own completion
 *     interrupt below. 32 bits, as ROCr's SDMA path writes the mailbox (a
 *     32-bit FENCE of event_id, then TRAP: amd_blit_sdma.cpp) and as the
 *     firmware's dispatch path does; KFD's kfd_signal_event_interrupt()
 *     only asks whether the event's 64-bit slot still holds
 *     UNSIGNALED_EVENT_SLOT (~0), which a 32-bit id in its low half ends;
 *   [hsa] RELEASE_MEM(DATA_SEL 2: the read index := its value): last of the
 *     client's writes (end-of-pipe writes land in order), so the relay's
 *     read_dispatch_id moves only once the packet has retired;
 *   RELEASE_MEM(DATA_SEL 1: queue fence word := seq; GCR GL2_WB | GLM_WB |
 *     GLM_INV, the kernel's fence form: what the job wrote leaves the GL2
 *     before the CPU or another engine can see the fence),
 *   RELEASE_MEM(DATA_SEL 1: event slot := event id, INT_SEL 2, INT_CTXID =
 *     event id; no GCR: the fence's wrote everything back just before) — the
 *     END_OF_PIPE interrupt KFD turns into the completion event (kfd-facts
 *     §1.10; tinygrad AMDComputeQueue.signal).
 * The HSA completion comes before the job's own fence, never after it: once
 * the daemon reports the job done (the fence), the client's signal has been
 * decremented and its index written, so the relay never sees a finished job
 * whose packet still looks unfinished to its client, and no write of the job
 * into client memory is left when its buffers may go.
 * The timestamps are end-of-pipe events: "begin" is when the work before this
 * job on the queue retired and its waits were met (waiting is not the job's
 * GPU time; a written begin also tells that the job runs, gpu-queue.c
 * head_running()), "end" when the dispatch's CS_PARTIAL_FLUSH completed.
 *
 * Dispatch body (tinygrad AMDComputeQueue.exec, kfd-facts §2.3, §2.4):
 *   ACQUIRE_MEM invalidating the instruction cache, K$, L0/GL1 and GL2 (GL2
 *   written back first; dispatch_acquire_gcr[] says why),
 *   SET_SH_REG COMPUTE_PGM_LO/HI = entry >> 8, PGM_RSRC1/RSRC2 (RSRC2.LDS_SIZE
 *   from static + dynamic LDS in 512-byte granules), PGM_RSRC3,
 *   TMPRING_SIZE, RESTART_X..Z = 0, USER_DATA_0.. (user SGPRs in descriptor
 *   order), RESOURCE_LIMITS = 0, START_X..Z = 0 with NUM_THREAD_X..Z (FULL
 *   and PARTIAL) and PIPELINESTAT/PERFCOUNT = 0, DISPATCH_DIRECT(workgroups,
 *   COMPUTE_SHADER_EN | FORCE_START_AT_000 | CS_W32_EN for a kernel whose
 *   descriptor sets ENABLE_WAVEFRONT_SIZE32 (kernel_code_properties bit 10;
 *   LLVM AMDGPUUsage: gfx10 kernels run wave32 with it, wave64 without) |
 *   PARTIAL_TG_EN when the grid is not a multiple of the block), EVENT_WRITE
 *   CS_PARTIAL_FLUSH.
 *
 * Partial workgroups: the grid is given in work-items, as in an HSA dispatch
 * packet; DIM_X/Y/Z count workgroups rounded up and NUM_THREAD_PARTIAL tells
 * the hardware how many work-items the last workgroup of a dimension has (Mesa
 * radeonsi si_emit_dispatch_packets).
 *
 * User SGPRs, in kernel_code_properties order (LLVM AMDGPUUsage "Initial
 * Kernel Execution State"): private segment buffer (4: the scratch V#), dispatch
 * ptr (2: the hsa_kernel_dispatch_packet_t in the kernarg slot), queue ptr (2:
 * the amd_queue_t page, apertures filled in), kernarg segment ptr (2), dispatch
 * id (2: the job's seq), flat scratch init (2: the scratch base), private
 * segment size (1). A GPU_JOB_AQL job gets the same registers, programmed by
 * the same code (DispatchSetup), with the client's values where the CP's AQL
 * front end would put them: dispatch ptr = its packet in its ring, queue ptr
 * = its amd_queue_t, its kernarg address, dispatch id = the packet's index;
 * the LDS size is the packet's group_segment_size; scratch is the queue's own
 * (sized from the packet's private_segment_size), not ROCr's dynamic-scratch
 * protocol through amd_queue_t. No kernarg slot or dispatch packet of the
 * daemon's is written for it.
 *
 * Scratch on gfx10 (kfd-facts §2.4, §2.5): no scratch base register; the
 * kernel finds its backing through the private segment buffer V# and the flat
 * scratch init SGPRs, and the hardware hands each wave a byte offset into it
 * (wave slot × TMPRING_SIZE.WAVESIZE KiB). The V# is the one ROCr builds
 * (AqlQueue::InitScratchSRD, FillBufRsrcWord0..3_Gfx10; layout in
 * sim-isa-vsharp.c): base, SWIZZLE_ENABLE, STRIDE 0, NUM_RECORDS = the
 * backing's size, and word 3 = DST_SEL XYZW | FORMAT 32_UINT | ADD_TID_ENABLE
 * | RESOURCE_LEVEL 1 | OOB_SELECT 2 ("no bounds check in swizzle mode") |
 * INDEX_STRIDE, which ROCr leaves to the CP and we set to the wave size: 2
 * (32 lanes, word 3 0x21C14FAC) or 3 (64 lanes, 0x21E14FAC), so that
 * ADD_TID_ENABLE gives each lane a dword column of its own (RDNA2 ISA §8.1.6,
 * swizzled buffer addressing; with STRIDE 0 the lanes past the index stride
 * would alias the first ones), and WAVESIZE covers the wave's lanes.
 * tinygrad's gfx10 word 3 (PR #5926), 0x00C00000, has FORMAT INVALID,
 * RESOURCE_LEVEL 0 and OOB_SELECT 0, which with STRIDE 0 puts every scratch
 * access out of range (Mesa ac_descriptors.c, the GFX10 OOB_SELECT table):
 * spills and private arrays would read zeros on hardware. One backing per
 * queue, grown when a kernel needs more per wave; jobs hold a reference to the
 * backing they were programmed with, so a bigger one never pulls memory from
 * under a running dispatch. It is shared by every session's dispatches on the
 * queue (docs/security.md).
 *
 * gfx11 (RDNA3) differs (kfd-facts §2.4, §2.5, tinygrad ops_amd.py): the base
 * also goes into COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI (architected flat
 * scratch), TMPRING_SIZE.WAVESIZE counts 256-byte units in a wider field and
 * WAVES counts per shader engine, the V# is ROCr's gfx11 one
 * (FillBufRsrcWord1_Gfx11, FillBufRsrcWord3_Gfx11: SWIZZLE_ENABLE is the
 * 2-bit field [31:30] of word 1 and ROCr and Mesa radv write 1 there, where
 * tinygrad writes 2; word 3 has no RESOURCE_LEVEL and a 6-bit FORMAT,
 * 0x20C14FAC for 32 lanes), and RSRC1.PRIV is set (tinygrad: "to workaround
 * cwsr"): the daemon's own bit, added to the descriptor's words after
 * gpu_kernel_rsrc_check() made sure the client's descriptor does not set it
 * (gpu-kernel-rsrc.c); so on gfx11 every dispatch's waves start privileged,
 * as tinygrad's do. Work-item IDs arrive
 * packed in v0 there, which is the hardware's doing, not ours. The simulator
 * models gfx1030 only; the gfx11 stream is checked packet by packet in
 * tests/unit/gpu/test-gpu-dispatch.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu-internal.h"
#include "gpu/pm4.h"
#include "util/log.h"
#include "util/macro.h"

/* kernel_code_properties bits (LLVM AMDHSAKernelDescriptor.h, kfd-facts §2.4). */
#define KCP_PRIVATE_SEGMENT_BUFFER (1u << 0)
#define KCP_DISPATCH_PTR (1u << 1)
#define KCP_QUEUE_PTR (1u << 2)
#define KCP_KERNARG_SEGMENT_PTR (1u << 3)
#define KCP_DISPATCH_ID (1u << 4)
#define KCP_FLAT_SCRATCH_INIT (1u << 5)
#define KCP_PRIVATE_SEGMENT_SIZE (1u << 6)

/* RSRC2.USER_SGPR_COUNT [5:1]. */
#define RSRC2_USER_SGPR_COUNT(r) (((r) >> 1) & 0x1Fu)

#define GPU_SCRATCH_MIN_WAVES 32u

/* The scratch V# (see the file comment; ROCr amd_aql_queue.cpp and
 * registers.h SQ_BUF_RSRC_WORD1/WORD3_GFX10/WORD3_GFX11). Word 3 without
 * INDEX_STRIDE: DST_SEL X,Y,Z,W = 4,5,6,7 [11:0], FORMAT 32_UINT = 20 at
 * [18:12], ADD_TID_ENABLE 23, RESOURCE_LEVEL 24 (gfx10 only), OOB_SELECT 2 at
 * [29:28]; INDEX_STRIDE [22:21] is 2 (32 lanes) or 3 (64). */
#define SCRATCH_RSRC_DWORD3 0x21814FACu
#define SCRATCH_RSRC_DWORD3_GFX11 0x20814FACu
#define SCRATCH_RSRC_INDEX_STRIDE(wave32) ((wave32) ? 2u << 21 : 3u << 21)
#define SCRATCH_RSRC_SWIZZLE_ENABLE (1u << 31)
#define SCRATCH_RSRC_SWIZZLE_ENABLE_GFX11 (1u << 30)

/* gfx11 (RDNA3) programs scratch differently from gfx10.3 (kfd-facts §2.5). */
static bool is_gfx11(const GpuContext *c) {
        return c->info.gfx_target_version >= 110000;
}

static uint32_t wavesize_unit(const GpuContext *c) {
        return is_gfx11(c) ? PM4_TMPRING_WAVESIZE_UNIT_GFX11 : PM4_TMPRING_WAVESIZE_UNIT;
}

#define WAIT_POLL_INTERVAL 4u

static uint32_t lds_limit(const GpuContext *c) {
        uint32_t kb = c->info.lds_size_in_kb ? c->info.lds_size_in_kb : 64;
        return MIN(kb, 64u) * 1024u;
}

uint32_t gpu_dispatch_lds_limit(const GpuContext *c) {
        return lds_limit(c);
}

static const GpuKernel *job_kernel(const GpuJob *job) {
        return &job->dispatch.co->kernels[job->dispatch.kernel];
}

static const GpuKernelCode *job_code(const GpuJob *job) {
        return &job->dispatch.co->kernel_code[job->dispatch.kernel];
}

static bool uses_scratch(const GpuKernel *k) {
        return k->private_segment_size > 0;
}

/* Per-wave scratch bytes for private_segment_size bytes per work-item, in
 * whole WAVESIZE units. */
static uint64_t scratch_wave_bytes(const GpuContext *c, uint32_t private_segment_size, bool wave32) {
        uint64_t per_lane = align_up_u64(private_segment_size, 4);
        return align_up_u64(per_lane * (wave32 ? 32u : 64u), wavesize_unit(c));
}

static bool scratch_too_big(const GpuContext *c, uint32_t private_segment_size, bool wave32) {
        return scratch_wave_bytes(c, private_segment_size, wave32) * GPU_SCRATCH_MIN_WAVES > GPU_SCRATCH_MAX;
}

bool gpu_dispatch_scratch_too_big(const GpuContext *c, uint32_t private_segment_size, bool wave32) {
        return scratch_too_big(c, private_segment_size, wave32);
}

unsigned gpu_gfx_generation(const GpuContext *c) {
        return is_gfx11(c) ? 11 : 10;
}

/* The LDS regions of the local-pointer args and the total LDS in bytes;
 * -EINVAL if it does not fit the device. */
static int lds_layout(const GpuContext *c, const GpuJob *job, uint32_t *ret_offsets, uint32_t *ret_total) {
        const GpuKernel *k = job_kernel(job);
        uint64_t cur = k->group_segment_size;

        for (unsigned i = 0; i < k->n_args; i++) {
                const GpuKernelArg *a = &k->args[i];
                uint32_t want;

                if (a->kind != GPU_ARG_DYNAMIC_LDS)
                        continue;
                if (a->offset + 4u > job->dispatch.args_size)
                        return -EINVAL;
                memcpy(&want, job->dispatch.args_data + a->offset, 4);
                cur = align_up_u64(cur, 16);
                if (ret_offsets)
                        ret_offsets[i] = (uint32_t) cur;
                cur += want;
                if (cur > lds_limit(c))
                        return -EINVAL;
        }
        cur += job->dispatch.dynamic_lds;
        if (cur > lds_limit(c))
                return -EINVAL;
        *ret_total = (uint32_t) cur;
        return 0;
}

#define REFUSE(...) (err ? (void) snprintf(err, errlen, __VA_ARGS__) : (void) 0, -EINVAL)

int gpu_dispatch_check(const GpuContext *c, const GpuJob *job, char *err, size_t errlen) {
        const GpuCodeObject *co = job->dispatch.co;
        uint64_t threads = 1;
        uint32_t lds;

        if (!c || job->type != GPU_JOB_DISPATCH)
                return REFUSE("not a dispatch");
        /* A code object loaded in c, or one parsed for this device (checked
         * before it is loaded anywhere). */
        if (!co || (co->ctx != c && (co->ctx || co->code)) || job->dispatch.kernel >= co->n_kernels)
                return REFUSE("no such kernel in a code object of this device");
        const GpuKernel *k = job_kernel(job);
        const GpuKernelCode *kc = job_code(job);

        for (unsigned d = 0; d < 3; d++) {
                if (job->dispatch.grid[d] == 0 || job->dispatch.block[d] == 0)
                        return REFUSE("grid and workgroup sizes must be at least 1 in every dimension");
                threads *= job->dispatch.block[d];
        }
        if (threads > 1024 || (k->max_flat_workgroup_size && threads > k->max_flat_workgroup_size))
                return REFUSE("%" PRIu64 " work-items per workgroup, kernel \"%s\" allows at most %" PRIu32, threads,
                              k->name, k->max_flat_workgroup_size ? MIN(k->max_flat_workgroup_size, 1024u) : 1024u);
        if (k->kernarg_size > GPU_KERNARG_MAX)
                return REFUSE("kernel \"%s\" has %" PRIu32 " bytes of kernel arguments, at most %u fit", k->name,
                              k->kernarg_size, GPU_KERNARG_MAX);
        if (job->dispatch.args_size > k->kernarg_size || (job->dispatch.args_size > 0 && !job->dispatch.args_data))
                return REFUSE("%" PRIu32 " bytes of arguments for kernel \"%s\", which takes %" PRIu32,
                              job->dispatch.args_size, k->name, k->kernarg_size);
        for (unsigned i = 0; i < k->n_args; i++)
                if (k->args[i].kind != GPU_ARG_HIDDEN &&
                    k->args[i].offset + k->args[i].size > job->dispatch.args_size)
                        return REFUSE("argument %u of kernel \"%s\" is missing", i, k->name);
        /* Checked at load too; again here, on the words the registers get,
         * as every descriptor that reaches the GPU passes here. */
        char why[160];
        if (gpu_kernel_rsrc_check(gpu_gfx_generation(c), kc->rsrc1, kc->rsrc2, kc->rsrc3, why, sizeof why) < 0)
                return REFUSE("kernel \"%s\": %s", k->name, why);
        if (RSRC2_USER_SGPR_COUNT(kc->rsrc2) > PM4_MAX_USER_DATA)
                return REFUSE("kernel \"%s\" wants %u user SGPRs, at most %u", k->name,
                              RSRC2_USER_SGPR_COUNT(kc->rsrc2), PM4_MAX_USER_DATA);
        if (uses_scratch(k) && scratch_too_big(c, k->private_segment_size, kc->wave32))
                return REFUSE("kernel \"%s\" needs %" PRIu32 " bytes of scratch per work-item, more than the %llu MiB "
                              "of scratch a queue backs allow",
                              k->name, k->private_segment_size, GPU_SCRATCH_MAX >> 20);
        if (lds_layout(c, job, NULL, &lds) < 0)
                return REFUSE("kernel \"%s\" needs more LDS than the device's %" PRIu32 " bytes", k->name,
                              lds_limit(c));
        return 0;
}

static uint32_t workgroups(const GpuJob *job, unsigned d) {
        return (uint32_t) DIV_ROUND_UP((uint64_t) job->dispatch.grid[d], job->dispatch.block[d]);
}

static unsigned grid_dims(const GpuJob *job) {
        if (job->dispatch.grid[2] > 1 || job->dispatch.block[2] > 1)
                return 3;
        if (job->dispatch.grid[1] > 1 || job->dispatch.block[1] > 1)
                return 2;
        return 1;
}

static void put_le(uint8_t *dst, uint32_t size, uint64_t v) {
        for (uint32_t i = 0; i < size && i < 8; i++)
                dst[i] = (uint8_t) (v >> (8 * i));
}

/* The amd_queue_t page after the kernarg slots. */
static uint64_t queue_ptr_va(const GpuQueue *q) {
        return q->kernargs->va + GPU_KERNARG_BO_SIZE(q->max_inflight) - 4096u;
}

static uint64_t slot_va(const GpuQueue *q, uint64_t seq) {
        return q->kernargs->va + (seq % q->max_inflight) * GPU_KERNARG_SLOT_SIZE;
}

/* "hidden_block_count_y" with prefix "hidden_block_count_" -> 1; -1 if kind
 * is not the prefix followed by x, y or z. */
static int xyz_suffix(const char *kind, const char *prefix) {
        size_t l = strlen(prefix);
        if (strncmp(kind, prefix, l) != 0 || kind[l] < 'x' || kind[l] > 'z' || kind[l + 1] != '\0')
                return -1;
        return kind[l] - 'x';
}

/* The value of a hidden argument (LLVM AMDGPUUsage "Code Object V4/V5
 * Metadata", .value_kind); 0 for the ones this dispatcher does not provide
 * (global offsets: dispatches start at 0; printf/hostcall buffers, default
 * queue, completion action, heap: not offered). */
static uint64_t hidden_value(const GpuContext *c, const GpuQueue *q, const GpuJob *job, const char *kind,
                             uint32_t lds_total) {
        int d;

        if ((d = xyz_suffix(kind, "hidden_block_count_")) >= 0)
                return workgroups(job, (unsigned) d);
        if ((d = xyz_suffix(kind, "hidden_group_size_")) >= 0)
                return job->dispatch.block[d];
        if ((d = xyz_suffix(kind, "hidden_remainder_")) >= 0)
                return job->dispatch.grid[d] % job->dispatch.block[d];
        if (strcmp(kind, "hidden_grid_dims") == 0)
                return grid_dims(job);
        if (strcmp(kind, "hidden_dynamic_lds_size") == 0)
                return lds_total - job_kernel(job)->group_segment_size;
        if (strcmp(kind, "hidden_private_base") == 0)
                return c->scratch_aperture_base >> 32;
        if (strcmp(kind, "hidden_shared_base") == 0)
                return c->lds_aperture_base >> 32;
        if (strcmp(kind, "hidden_queue_ptr") == 0)
                return queue_ptr_va(q);
        return 0;
}

static uint8_t *slot_cpu(const GpuQueue *q, uint64_t seq) {
        return (uint8_t *) q->kernargs->cpu + (seq % q->max_inflight) * GPU_KERNARG_SLOT_SIZE;
}

/*
 * hsa_kernel_dispatch_packet_t (HSA Platform System Architecture spec 2.9.6;
 * hsa.h): header u16 @0 (type KERNEL_DISPATCH 2, acquire/release fence scope
 * system 2 at bits 9 and 11), setup u16 @2 (dimensions), workgroup_size_x/y/z
 * u16 @4/6/8, grid_size_x/y/z u32 @12/16/20 (work-items), private_segment_size
 * u32 @24, group_segment_size u32 @28, kernel_object u64 @32, kernarg_address
 * u64 @40, completion_signal u64 @56 (0).
 */
static void write_dispatch_packet(uint8_t *pkt, const GpuJob *job, uint64_t kernarg_va, uint32_t lds_total) {
        const GpuKernel *k = job_kernel(job);

        memset(pkt, 0, GPU_DISPATCH_PACKET_SIZE);
        put_le(pkt + 0, 2, 2u | 2u << 9 | 2u << 11);
        put_le(pkt + 2, 2, grid_dims(job));
        for (unsigned d = 0; d < 3; d++) {
                put_le(pkt + 4 + 2 * d, 2, job->dispatch.block[d]);
                put_le(pkt + 12 + 4 * d, 4, job->dispatch.grid[d]);
        }
        put_le(pkt + 24, 4, k->private_segment_size);
        put_le(pkt + 28, 4, lds_total);
        put_le(pkt + 32, 8, job_code(job)->kd_va);
        put_le(pkt + 40, 8, kernarg_va);
}

/* The waves a queue's scratch backs at wave_bytes each: 32 per CU, as many
 * as COMPUTE_TMPRING_SIZE counts, at most GPU_SCRATCH_MAX in all. */
static uint64_t scratch_waves(const GpuContext *c, uint64_t wave_bytes) {
        uint64_t waves = MIN((uint64_t) MAX(c->info.cu_count, 1u) * 32u, (uint64_t) PM4_TMPRING_WAVES_MAX);

        return MIN(waves, GPU_SCRATCH_MAX / wave_bytes);
}

/* The scratch a job needs per work-item and its wave size; false if none
 * (or an AQL descriptor that does not decode: such a job is refused). */
static bool job_scratch(const GpuContext *c, const GpuJob *job, uint32_t *ret_size, bool *ret_wave32) {
        GpuKernelCode kc;

        if (job->type == GPU_JOB_DISPATCH && uses_scratch(job_kernel(job))) {
                *ret_size = job_kernel(job)->private_segment_size;
                *ret_wave32 = job_code(job)->wave32;
                return true;
        }
        if (job->type == GPU_JOB_AQL && job->aql.private_segment_size > 0 &&
            gpu_aql_kernel_code(gpu_gfx_generation(c), job, &kc, NULL, 0) >= 0) {
                *ret_size = job->aql.private_segment_size;
                *ret_wave32 = kc.wave32;
                return true;
        }
        return false;
}

uint64_t gpu_dispatch_scratch_bytes(const GpuContext *like, const GpuJob *job, uint32_t *ret_wave_bytes) {
        uint64_t wave_bytes;
        uint32_t size;
        bool wave32;

        *ret_wave_bytes = 0;
        if (!job_scratch(like, job, &size, &wave32))
                return 0;
        wave_bytes = scratch_wave_bytes(like, size, wave32);
        *ret_wave_bytes = (uint32_t) wave_bytes;
        return align_up_u64(scratch_waves(like, wave_bytes) * wave_bytes, PAGE_SIZE_4K);
}

static int ensure_scratch(GpuContext *c, GpuQueue *q, uint64_t wave_bytes) {
        GpuBuffer *b = NULL;

        if (q->scratch && q->scratch_wave_bytes >= wave_bytes)
                return 0;
        uint64_t waves = scratch_waves(c, wave_bytes);
        if (waves < GPU_SCRATCH_MIN_WAVES)
                return -EINVAL;
        int r = gpu_buffer_alloc_gpu_only(c, waves * wave_bytes, &b);
        if (r < 0)
                return r;
        log_debug("gpu: compute queue %u: scratch of %" PRIu64 " waves x %" PRIu64 " bytes", q->index, waves,
                  wave_bytes);
        gpu_buffer_unref(q->scratch); /* jobs programmed with it keep their own reference */
        q->scratch = b;
        q->scratch_wave_bytes = (uint32_t) wave_bytes;
        return 0;
}

/* Makes sure the queue's scratch backs the job (if it uses any) and fills
 * f->scratch (a ref) and f->tmpring with what it is programmed with. */
static int prepare_scratch(GpuContext *c, GpuQueue *q, const GpuJob *job, GpuInflight *f) {
        uint32_t size;
        bool wave32;

        f->scratch = NULL;
        f->tmpring = 0;
        if (!job_scratch(c, job, &size, &wave32))
                return 0;
        int r = ensure_scratch(c, q, scratch_wave_bytes(c, size, wave32));
        if (r < 0)
                return r;
        f->scratch = gpu_buffer_ref(q->scratch);
        uint64_t waves = gpu_buffer_get_size(q->scratch) / q->scratch_wave_bytes;
        uint32_t wavesize = q->scratch_wave_bytes / wavesize_unit(c);
        if (is_gfx11(c)) {
                /* WAVES counts per shader engine on gfx11. */
                uint32_t se = c->node.simd_arrays_per_engine
                                      ? MAX(c->node.array_count / c->node.simd_arrays_per_engine, 1u)
                                      : 1u;
                f->tmpring = COMPUTE_TMPRING_SIZE_GFX11(waves / se, wavesize);
        } else
                f->tmpring = COMPUTE_TMPRING_SIZE(waves, wavesize);
        return 0;
}

static int dispatch_prepare(GpuContext *c, GpuQueue *q, const GpuJob *job, uint64_t seq, GpuInflight *f) {
        uint32_t lds_offsets[GPU_KERNEL_MAX_ARGS] = { 0 }, lds_total;
        int r;

        const GpuKernel *k = job_kernel(job);
        r = lds_layout(c, job, lds_offsets, &lds_total);
        if (r < 0)
                return r;
        f->lds_bytes = lds_total;
        r = prepare_scratch(c, q, job, f);
        if (r < 0)
                return r;

        uint8_t *slot = slot_cpu(q, seq);
        memset(slot, 0, GPU_KERNARG_SLOT_SIZE);
        if (job->dispatch.args_size > 0) /* a kernel without arguments may pass args_data NULL */
                memcpy(slot, job->dispatch.args_data, job->dispatch.args_size);
        for (unsigned i = 0; i < k->n_args; i++) {
                const GpuKernelArg *a = &k->args[i];
                if (a->kind == GPU_ARG_DYNAMIC_LDS)
                        put_le(slot + a->offset, a->size, lds_offsets[i]);
                else if (a->kind == GPU_ARG_HIDDEN)
                        put_le(slot + a->offset, a->size, hidden_value(c, q, job, a->value_kind, lds_total));
        }
        write_dispatch_packet(slot + GPU_KERNARG_MAX, job, slot_va(q, seq), lds_total);
        return 0;
}

int gpu_dispatch_prepare(GpuContext *c, GpuQueue *q, const GpuJob *job, uint64_t seq, GpuInflight *f) {
        /* Copies and fills (most jobs) do not pay for the LDS layout's array. */
        if (job->type == GPU_JOB_AQL) {
                /* The kernel arguments and the packet are the client's. */
                f->lds_bytes = job->aql.group_segment_size;
                return prepare_scratch(c, q, job, f);
        }
        if (job->type != GPU_JOB_DISPATCH)
                return 0;
        return dispatch_prepare(c, q, job, seq, f);
}

/* What programming one dispatch takes, from either kind of job: the kernel
 * (a code object's, or a client's AQL descriptor), the geometry, and the
 * values of the user SGPRs the HSA ABI defines. */
typedef struct DispatchSetup {
        GpuKernelCode kc;
        uint32_t grid[3], block[3];
        uint32_t private_segment_size; /* bytes per work-item */
        uint64_t dispatch_ptr, queue_ptr, kernarg_ptr, dispatch_id;
} DispatchSetup;

/* GPU_JOB_DISPATCH: the daemon's kernarg slot and its dispatch packet, the
 * queue's amd_queue_t page, the job's seq. GPU_JOB_AQL: the client's packet,
 * queue, kernel arguments and index. -EINVAL for a descriptor that does not
 * decode (job_plan() refused it before). */
static int dispatch_setup(const GpuContext *c, const GpuQueue *q, const GpuJob *job, uint64_t seq,
                          DispatchSetup *ret) {
        if (job->type == GPU_JOB_AQL) {
                int r = gpu_aql_kernel_code(gpu_gfx_generation(c), job, &ret->kc, NULL, 0);
                if (r < 0)
                        return r;
                for (unsigned d = 0; d < 3; d++) {
                        ret->grid[d] = job->aql.grid[d];
                        ret->block[d] = job->aql.block[d];
                }
                ret->private_segment_size = job->aql.private_segment_size;
                ret->dispatch_ptr = job->aql.packet_va;
                ret->queue_ptr = job->aql.queue_va;
                ret->kernarg_ptr = job->aql.kernarg_va;
                ret->dispatch_id = job->aql.dispatch_id;
                return 0;
        }
        ret->kc = *job_code(job);
        memcpy(ret->grid, job->dispatch.grid, sizeof ret->grid);
        memcpy(ret->block, job->dispatch.block, sizeof ret->block);
        ret->private_segment_size = job_kernel(job)->private_segment_size;
        ret->kernarg_ptr = slot_va(q, seq);
        ret->dispatch_ptr = ret->kernarg_ptr + GPU_KERNARG_MAX;
        ret->queue_ptr = queue_ptr_va(q);
        ret->dispatch_id = seq;
        return 0;
}

static unsigned user_sgprs(const GpuContext *c, const DispatchSetup *d, const GpuInflight *f, uint32_t *v) {
        const GpuKernelCode *kc = &d->kc;
        uint64_t scratch = f->scratch ? gpu_buffer_get_va(f->scratch) : 0;
        unsigned n = 0;

#define PUT64(x) do { v[n++] = (uint32_t) (x); v[n++] = (uint32_t) ((x) >> 32); } while (0)
        if (kc->code_properties & KCP_PRIVATE_SEGMENT_BUFFER) {
                v[n++] = (uint32_t) scratch;
                v[n++] = (uint32_t) (scratch >> 32 & 0xFFFFu) |
                         (is_gfx11(c) ? SCRATCH_RSRC_SWIZZLE_ENABLE_GFX11 : SCRATCH_RSRC_SWIZZLE_ENABLE);
                v[n++] = f->scratch ? (uint32_t) MIN(gpu_buffer_get_size(f->scratch), UINT32_MAX) : 0; /* NUM_RECORDS */
                v[n++] = (is_gfx11(c) ? SCRATCH_RSRC_DWORD3_GFX11 : SCRATCH_RSRC_DWORD3) |
                         SCRATCH_RSRC_INDEX_STRIDE(kc->wave32);
        }
        if (kc->code_properties & KCP_DISPATCH_PTR)
                PUT64(d->dispatch_ptr);
        if (kc->code_properties & KCP_QUEUE_PTR)
                PUT64(d->queue_ptr);
        if (kc->code_properties & KCP_KERNARG_SEGMENT_PTR)
                PUT64(d->kernarg_ptr);
        if (kc->code_properties & KCP_DISPATCH_ID)
                PUT64(d->dispatch_id);
        if (kc->code_properties & KCP_FLAT_SCRATCH_INIT)
                PUT64(scratch);
        if (kc->code_properties & KCP_PRIVATE_SEGMENT_SIZE)
                v[n++] = (uint32_t) align_up_u64(d->private_segment_size, 4);
#undef PUT64
        return n;
}

/* Dwords of the dispatch body for the kernel. */
static size_t dispatch_dwords(const GpuContext *c, const GpuKernelCode *kc) {
        unsigned nuser = gpu_kernel_user_sgprs(kc->code_properties);
        return (is_gfx11(c) ? PM4_SET_SH_REG_DW(2) /* DISPATCH_SCRATCH_BASE */ : 0) +
               PM4_ACQUIRE_MEM_DW + PM4_SET_SH_REG_DW(2) /* PGM_LO/HI */ + PM4_SET_SH_REG_DW(2) /* RSRC1/2 */ +
               PM4_SET_SH_REG_DW(1) /* RSRC3 */ + PM4_SET_SH_REG_DW(1) /* TMPRING */ +
               PM4_SET_SH_REG_DW(3) /* RESTART */ + (nuser ? PM4_SET_SH_REG_DW(nuser) : 0) +
               PM4_SET_SH_REG_DW(1) /* RESOURCE_LIMITS */ + PM4_SET_SH_REG_DW(8) /* START..PERFCOUNT */ +
               PM4_DISPATCH_DIRECT_DW + PM4_EVENT_WRITE_DW;
}

size_t gpu_compute_job_dwords(const GpuContext *c, const GpuJob *job) {
        const GpuHsaCompletion *h = gpu_job_hsa(job);
        /* Timestamps, the barrier's interrupt, the fence, the done event;
         * the barrier's slot write and its wait. */
        size_t n = 5 * PM4_RELEASE_MEM_DW + PM4_WRITE_DATA_DW(1) + PM4_WAIT_REG_MEM_DW;
        GpuKernelCode kc;

        for (unsigned i = 0; i < job->n_waits; i++)
                n += job->waits[i].zero64 ? PM4_WAIT_REG_MEM64_DW : PM4_WAIT_REG_MEM_DW;
        if (job->type == GPU_JOB_DISPATCH)
                n += dispatch_dwords(c, job_code(job));
        else if (job->type == GPU_JOB_AQL && gpu_aql_kernel_code(gpu_gfx_generation(c), job, &kc, NULL, 0) >= 0)
                n += dispatch_dwords(c, &kc);
        if (h) {
                if (h->ts_va)
                        n += 2 * PM4_RELEASE_MEM_DW;
                if (h->acquire && job->type == GPU_JOB_NOP)
                        n += PM4_ACQUIRE_MEM_DW;
                if (gpu_hsa_retires(h))
                        n += PM4_WAIT_REG_MEM64_DW + (PM4_WRITE_DATA_DW(1) + PM4_RELEASE_MEM_DW + PM4_WAIT_REG_MEM_DW) +
                             (h->signal_va ? PM4_ATOMIC_MEM_DW : 0) +
                             (h->event_slot_va ? PM4_WRITE_DATA_DW(1) : 0) + (h->mailbox_va ? PM4_RELEASE_MEM_DW : 0) +
                             (h->index_va ? PM4_RELEASE_MEM_DW : 0);
        }
        return n;
}

/*
 * What the ACQUIRE_MEM before every dispatch makes visible to it (kfd-facts
 * §2.2, §7.5): code loaded since the last dispatch — a new code object may sit
 * where a freed one was, so the instruction cache is invalidated (GLI_INV ALL,
 * Mesa gfx10_emit_cache_flush for SI_CONTEXT_INV_ICACHE) — and data that the
 * CPU (through the HDP, flushed at the doorbell: gpu-queue.c queue_kick) or
 * another engine wrote: the scalar (GLK), vector (GLV), GL1 and GL2 caches are
 * written back and invalidated, GL2 included (Mesa: INV_L2 is GL2_INV |
 * GL2_WB; tinygrad's AMDComputeQueue.memory_barrier ends in acquire_mem() with
 * every bit, gli=1 and gl2=1, after the HDP flush).
 */
static const struct {
        GpuFlush flush;
        uint32_t bits;
} dispatch_acquire_gcr[] = {
        { GPU_FLUSH_DISPATCH_GLI_INV, ACQUIRE_MEM_GCR_GLI_INV_ALL },
        { GPU_FLUSH_DISPATCH_GLM, ACQUIRE_MEM_GCR_GLM_WB | ACQUIRE_MEM_GCR_GLM_INV },
        { GPU_FLUSH_DISPATCH_GLK_WB, ACQUIRE_MEM_GCR_GLK_WB },
        { GPU_FLUSH_DISPATCH_GLK_INV, ACQUIRE_MEM_GCR_GLK_INV },
        { GPU_FLUSH_DISPATCH_GLV_INV, ACQUIRE_MEM_GCR_GLV_INV },
        { GPU_FLUSH_DISPATCH_GL1_INV, ACQUIRE_MEM_GCR_GL1_INV },
        { GPU_FLUSH_DISPATCH_GL2_WB, ACQUIRE_MEM_GCR_GL2_WB },
        { GPU_FLUSH_DISPATCH_GL2_INV, ACQUIRE_MEM_GCR_GL2_INV },
};

/* The GCR_CNTL of c's dispatch ACQUIRE_MEM: every bit, but for a test's omissions. */
static uint32_t dispatch_acquire(const GpuContext *c) {
        uint32_t gcr = 0;

        for (size_t i = 0; i < ELEMENTSOF(dispatch_acquire_gcr); i++)
                if (gpu_flush_on(c, dispatch_acquire_gcr[i].flush))
                        gcr |= dispatch_acquire_gcr[i].bits;
        return gcr;
}

static size_t emit_dispatch(GpuContext *c, const DispatchSetup *d, const GpuInflight *f, uint32_t *p) {
        const GpuKernelCode *kc = &d->kc;
        uint32_t *const p0 = p, v[PM4_MAX_USER_DATA];
        uint32_t initiator = COMPUTE_DISPATCH_INITIATOR_COMPUTE_SHADER_EN |
                             COMPUTE_DISPATCH_INITIATOR_FORCE_START_AT_000 |
                             (kc->wave32 ? COMPUTE_DISPATCH_INITIATOR_CS_W32_EN : 0);
        uint32_t nthread[3], dim[3];

        uint32_t lds_granules = DIV_ROUND_UP(f->lds_bytes, PM4_LDS_GRANULE);
        uint32_t rsrc2 = (kc->rsrc2 & ~COMPUTE_PGM_RSRC2_LDS_SIZE_MASK) |
                         lds_granules << COMPUTE_PGM_RSRC2_LDS_SIZE_SHIFT;
        for (unsigned i = 0; i < 3; i++) {
                uint32_t rem = d->grid[i] % d->block[i];
                nthread[i] = COMPUTE_NUM_THREAD(d->block[i], rem ? rem : d->block[i]);
                dim[i] = (uint32_t) DIV_ROUND_UP((uint64_t) d->grid[i], d->block[i]);
                if (rem)
                        initiator |= COMPUTE_DISPATCH_INITIATOR_PARTIAL_TG_EN;
        }

        p += pm4_emit_acquire_mem(p, dispatch_acquire(c));
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_PGM_LO,
                                 (uint32_t[]) { (uint32_t) (kc->entry_va >> 8), (uint32_t) (kc->entry_va >> 40) }, 2);
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_PGM_RSRC1,
                                 (uint32_t[]) { kc->rsrc1 | (is_gfx11(c) ? COMPUTE_PGM_RSRC1_PRIV : 0), rsrc2 }, 2);
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_PGM_RSRC3, &kc->rsrc3, 1);
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_TMPRING_SIZE, &f->tmpring, 1);
        if (is_gfx11(c)) {
                /* Architected flat scratch: the base in a register (kfd-facts §2.3 step 5). */
                uint64_t base = f->scratch ? gpu_buffer_get_va(f->scratch) : 0;
                p += pm4_emit_set_sh_reg(p, mmCOMPUTE_DISPATCH_SCRATCH_BASE_LO,
                                         (uint32_t[]) { (uint32_t) (base >> 8), (uint32_t) (base >> 40) }, 2);
        }
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_RESTART_X, (uint32_t[]) { 0, 0, 0 }, 3);
        unsigned nuser = user_sgprs(c, d, f, v);
        if (nuser > 0)
                p += pm4_emit_set_sh_reg(p, mmCOMPUTE_USER_DATA_0, v, nuser);
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_RESOURCE_LIMITS, (uint32_t[]) { 0 }, 1);
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_START_X,
                                 (uint32_t[]) { 0, 0, 0, nthread[0], nthread[1], nthread[2], 0, 0 }, 8);
        p += pm4_emit_dispatch_direct(p, dim[0], dim[1], dim[2], initiator);
        p += pm4_emit_event_write(p, PM4_EVENT_CS_PARTIAL_FLUSH, PM4_EVENT_INDEX_CS_PARTIAL_FLUSH);
        return (size_t) (p - p0);
}

/*
 * The kernel's fence form of RELEASE_MEM: write back (and invalidate) the
 * GL2/GLM so the CPU sees what the dispatch wrote before the fence word
 * (gfx_v10_0_ring_emit_fence: "GLM_INV must be set with GLM_WB"); every bit
 * but for a test's omissions. The event slot's RELEASE_MEM right after it
 * carries none: nothing ran between the two end-of-pipe events, so a second
 * write-back would have nothing to write, and a flush whose absence no
 * stream could notice is one no test could hold to account
 * (test-gpu-caches.c).
 */
static uint32_t fence_gcr(const GpuContext *c) {
        uint32_t gcr = RELEASE_MEM_GCR_SEQ | RELEASE_MEM_CACHE_POLICY(3);

        if (gpu_flush_on(c, GPU_FLUSH_FENCE_GL2_WB))
                gcr |= RELEASE_MEM_GCR_GL2_WB;
        if (gpu_flush_on(c, GPU_FLUSH_FENCE_GLM))
                gcr |= RELEASE_MEM_GCR_GLM_INV | RELEASE_MEM_GCR_GLM_WB;
        return gcr;
}

static size_t emit_timestamp(uint32_t *p, uint64_t va) {
        return pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                    PM4_DATA_TIMESTAMP, PM4_INT_NONE, va, 0, 0);
}

/*
 * The writes of an HSA completion that come when the job has ended (see the
 * file comment): the end timestamp, carrying the write-back, and a wait for
 * it to have landed (emit_hsa_end); after the barrier, the signal, the
 * event, the read index (emit_hsa_signal).
 */
/* The barrier: the slot is set before the end-of-pipe event is even issued
 * (WRITE_DATA with WR_CONFIRM: a RELEASE_MEM's write lands when the pipe
 * drains, and the wait below could otherwise pass on the slot's old ~0), the
 * interrupt comes at the end of the pipe, after the work before it, and the
 * wait holds what follows back until the kernel has acknowledged it. */
static size_t emit_barrier(GpuContext *c, const GpuQueue *q, uint32_t *p) {
        uint32_t *const p0 = p;

        p += pm4_emit_write_data(p, gpu_context_event_slot_va(c, q->ack_event), &q->ack_event, 1);
        p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                  PM4_DATA_32, PM4_INT_AFTER_WRITE_CONFIRM, gpu_context_event_slot_va(c, q->ack_event),
                                  q->ack_event, q->ack_event);
        p += pm4_emit_wait_reg_mem(p, PM4_WAIT_EQ, gpu_context_event_slot_va(c, q->ack_event),
                                   KFD_UNSIGNALED_EVENT_SLOT32, 0xFFFFFFFFu, WAIT_POLL_INTERVAL);
        return (size_t) (p - p0);
}

static size_t emit_hsa_end(const GpuContext *c, uint64_t end_ts, uint32_t *p) {
        uint32_t *const p0 = p;

        p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE,
                                  fence_gcr(c), PM4_DATA_TIMESTAMP, PM4_INT_NONE, end_ts, 0, 0);
        p += pm4_emit_wait_reg_mem64(p, PM4_WAIT_NE, end_ts, 0, UINT64_MAX, WAIT_POLL_INTERVAL);
        return (size_t) (p - p0);
}

static size_t emit_hsa_signal(const GpuHsaCompletion *h, uint32_t *p) {
        uint32_t *const p0 = p;

        if (h->signal_va)
                p += pm4_emit_atomic_mem(p, PM4_TC_OP_ATOMIC_ADD_RTN_64, PM4_ATOMIC_WAIT_FOR_WRITE_CONFIRM, h->signal_va,
                                         UINT64_MAX /* -1 */, 0);
        if (h->event_slot_va)
                p += pm4_emit_write_data(p, h->event_slot_va, &h->event_id, 1);
        if (h->mailbox_va)
                p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                          PM4_DATA_32, PM4_INT_AFTER_WRITE_CONFIRM, h->mailbox_va, h->event_id,
                                          h->event_id);
        if (h->index_va)
                p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                          PM4_DATA_64, PM4_INT_NONE, h->index_va, h->index_value, 0);
        return (size_t) (p - p0);
}

size_t gpu_compute_emit_job(GpuContext *c, GpuQueue *q, const GpuJob *job, const GpuInflight *f,
                            uint32_t *p) {
        const GpuHsaCompletion *h = gpu_job_hsa(job);
        uint32_t *const p0 = p;
        uint64_t ts = gpu_queue_ts_va(c, q->index, f->seq);
        DispatchSetup d;

        for (unsigned i = 0; i < job->n_waits; i++) {
                uint64_t va;
                uint32_t value;

                gpu_wait_target(c, &job->waits[i], &va, &value);
                if (job->waits[i].zero64)
                        p += pm4_emit_wait_reg_mem64(p, PM4_WAIT_EQ, va, 0, UINT64_MAX, WAIT_POLL_INTERVAL);
                else
                        p += pm4_emit_wait_reg_mem(p, PM4_WAIT_GE, va, value, 0xFFFFFFFFu, WAIT_POLL_INTERVAL);
        }
        p += emit_timestamp(p, ts);
        if (h && h->ts_va)
                p += emit_timestamp(p, h->ts_va);
        if (h && h->acquire && job->type == GPU_JOB_NOP)
                p += pm4_emit_acquire_mem(p, dispatch_acquire(c));
        if ((job->type == GPU_JOB_DISPATCH || job->type == GPU_JOB_AQL) &&
            dispatch_setup(c, q, job, f->seq, &d) >= 0)
                p += emit_dispatch(c, &d, f, p);
        if (h && h->ts_va)
                p += emit_timestamp(p, h->ts_va + 8);
        if (h && gpu_hsa_retires(h))
                p += emit_hsa_end(c, ts + 8, p);
        else
                p += emit_timestamp(p, ts + 8);
        /* The barrier (gpu-queue.c, "Completion", emit_barrier()). A relayed
         * packet's completion (its client's signal, event and read index)
         * comes after one, so that a faulting kernel is never shown to its
         * client as done, and before another, so that a fault of its own
         * writes is never reported as success by the daemon's fence. */
        p += emit_barrier(c, q, p);
        if (h && gpu_hsa_retires(h)) {
                p += emit_hsa_signal(h, p);
                p += emit_barrier(c, q, p);
        }
        p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE,
                                  fence_gcr(c), PM4_DATA_32, PM4_INT_NONE, gpu_queue_fence_va(c, q->index),
                                  (uint32_t) f->seq, 0);
        p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE,
                                  RELEASE_MEM_CACHE_POLICY(3), PM4_DATA_32, PM4_INT_AFTER_WRITE_CONFIRM,
                                  gpu_context_event_slot_va(c, q->done_event), q->done_event, q->done_event);
        return (size_t) (p - p0);
}

void gpu_compute_emit_pad(uint32_t *p, size_t ndw) {
        while (ndw > 0) {
                size_t n = MIN(ndw, (size_t) PKT3_NOP_MAX_COUNT + 2);
                p += pm4_emit_nop(p, n);
                ndw -= n;
        }
}
