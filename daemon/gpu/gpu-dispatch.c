/* SPDX-License-Identifier: MIT */
/*
 * The compute (PM4) job stream of a GpuQueue: checking a dispatch against
 * what the hardware can run, laying out its kernel arguments and dispatch
 * packet, sizing scratch, and the packets that program and run it. Called by
 * gpu-queue.c, which owns the ring; runs on the event loop and never blocks.
 *
 * Job stream (every packet from pm4.c, layouts in kfd-facts §2.2):
 *   WAIT_REG_MEM(memory, >=, mask ~0) per cross-queue wait (another queue's
 *     32-bit fence word >= its seq, or a relay word),
 *   RELEASE_MEM(DATA_SEL 3: GPU clock → begin timestamp slot),
 *   dispatch body (below) or nothing for a NOP job,
 *   RELEASE_MEM(DATA_SEL 3 → end timestamp slot),
 *   RELEASE_MEM(DATA_SEL 1: queue fence word := seq; GCR GL2_WB | GLM_WB |
 *     GLM_INV, the kernel's fence form: what the job wrote leaves the GL2
 *     before the CPU or another engine can see the fence),
 *   RELEASE_MEM(DATA_SEL 1: event slot := event id, INT_SEL 2, INT_CTXID =
 *     event id) — the END_OF_PIPE interrupt KFD turns into the completion
 *     event (kfd-facts §1.10; tinygrad AMDComputeQueue.signal).
 * The timestamps are end-of-pipe events: "begin" is when the work before this
 * job on the queue retired and its waits were met (waiting is not the job's
 * GPU time; a written begin also tells that the job runs, gpu-queue.c
 * head_running()), "end" when the dispatch's CS_PARTIAL_FLUSH completed.
 *
 * Dispatch body (tinygrad AMDComputeQueue.exec, kfd-facts §2.3, §2.4):
 *   ACQUIRE_MEM invalidating the instruction cache, K$, L0/GL1 and GL2 (GL2
 *   written back first; DISPATCH_ACQUIRE_GCR says why),
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
 * segment size (1).
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

/* Most scratch one queue backs: a kernel whose one full workgroup (32 waves
 * of 32 lanes) would need more is refused. */
#define GPU_SCRATCH_MAX (512ull << 20)
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

static const GpuKernel *job_kernel(const GpuJob *job) {
        return &job->dispatch.co->kernels[job->dispatch.kernel];
}

static const GpuKernelCode *job_code(const GpuJob *job) {
        return &job->dispatch.co->kernel_code[job->dispatch.kernel];
}

static bool uses_scratch(const GpuKernel *k) {
        return k->private_segment_size > 0;
}

static unsigned wave_lanes(const GpuKernelCode *kc) {
        return kc->wave32 ? 32 : 64;
}

/* Per-wave scratch bytes for the kernel, in whole WAVESIZE units. */
static uint64_t scratch_wave_bytes(const GpuContext *c, const GpuKernel *k, const GpuKernelCode *kc) {
        uint64_t per_lane = align_up_u64(k->private_segment_size, 4);
        return align_up_u64(per_lane * wave_lanes(kc), wavesize_unit(c));
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
        if (gpu_kernel_rsrc_check(is_gfx11(c) ? 11 : 10, kc->rsrc1, kc->rsrc2, kc->rsrc3, why, sizeof why) < 0)
                return REFUSE("kernel \"%s\": %s", k->name, why);
        if (RSRC2_USER_SGPR_COUNT(kc->rsrc2) > PM4_MAX_USER_DATA)
                return REFUSE("kernel \"%s\" wants %u user SGPRs, at most %u", k->name,
                              RSRC2_USER_SGPR_COUNT(kc->rsrc2), PM4_MAX_USER_DATA);
        if (uses_scratch(k) && scratch_wave_bytes(c, k, kc) * GPU_SCRATCH_MIN_WAVES > GPU_SCRATCH_MAX)
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

uint64_t gpu_dispatch_scratch_bytes(const GpuContext *like, const GpuJob *job, uint32_t *ret_wave_bytes) {
        const GpuKernel *k = job_kernel(job);
        uint64_t wave_bytes;

        *ret_wave_bytes = 0;
        if (job->type != GPU_JOB_DISPATCH || !uses_scratch(k))
                return 0;
        wave_bytes = scratch_wave_bytes(like, k, job_code(job));
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

static int dispatch_prepare(GpuContext *c, GpuQueue *q, const GpuJob *job, uint64_t seq, GpuInflight *f) {
        uint32_t lds_offsets[GPU_KERNEL_MAX_ARGS] = { 0 }, lds_total;
        int r;

        const GpuKernel *k = job_kernel(job);
        r = lds_layout(c, job, lds_offsets, &lds_total);
        if (r < 0)
                return r;

        f->scratch = NULL;
        f->tmpring = 0;
        f->lds_bytes = lds_total;
        if (uses_scratch(k)) {
                uint64_t wave_bytes = scratch_wave_bytes(c, k, job_code(job));
                r = ensure_scratch(c, q, wave_bytes);
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
        }

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
        if (job->type != GPU_JOB_DISPATCH)
                return 0;
        return dispatch_prepare(c, q, job, seq, f);
}

static unsigned user_sgprs(const GpuContext *c, const GpuQueue *q, const GpuJob *job, const GpuInflight *f,
                           uint32_t *v) {
        const GpuKernelCode *kc = job_code(job);
        uint64_t scratch = f->scratch ? gpu_buffer_get_va(f->scratch) : 0;
        uint64_t kernarg = slot_va(q, f->seq);
        uint64_t queue_ptr = queue_ptr_va(q);
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
                PUT64(kernarg + GPU_KERNARG_MAX);
        if (kc->code_properties & KCP_QUEUE_PTR)
                PUT64(queue_ptr);
        if (kc->code_properties & KCP_KERNARG_SEGMENT_PTR)
                PUT64(kernarg);
        if (kc->code_properties & KCP_DISPATCH_ID)
                PUT64(f->seq);
        if (kc->code_properties & KCP_FLAT_SCRATCH_INIT)
                PUT64(scratch);
        if (kc->code_properties & KCP_PRIVATE_SEGMENT_SIZE)
                v[n++] = (uint32_t) align_up_u64(job_kernel(job)->private_segment_size, 4);
#undef PUT64
        return n;
}

/* Dwords of the dispatch body for the job's kernel. */
static size_t dispatch_dwords(const GpuJob *job) {
        unsigned nuser = gpu_kernel_user_sgprs(job_code(job)->code_properties);
        return (is_gfx11(job->dispatch.co->ctx) ? PM4_SET_SH_REG_DW(2) /* DISPATCH_SCRATCH_BASE */ : 0) +
               PM4_ACQUIRE_MEM_DW + PM4_SET_SH_REG_DW(2) /* PGM_LO/HI */ + PM4_SET_SH_REG_DW(2) /* RSRC1/2 */ +
               PM4_SET_SH_REG_DW(1) /* RSRC3 */ + PM4_SET_SH_REG_DW(1) /* TMPRING */ +
               PM4_SET_SH_REG_DW(3) /* RESTART */ + (nuser ? PM4_SET_SH_REG_DW(nuser) : 0) +
               PM4_SET_SH_REG_DW(1) /* RESOURCE_LIMITS */ + PM4_SET_SH_REG_DW(8) /* START..PERFCOUNT */ +
               PM4_DISPATCH_DIRECT_DW + PM4_EVENT_WRITE_DW;
}

size_t gpu_compute_job_dwords(const GpuJob *job) {
        size_t n = 5 * PM4_RELEASE_MEM_DW + PM4_WRITE_DATA_DW(1) + (job->n_waits + 1) * PM4_WAIT_REG_MEM_DW;
        if (job->type == GPU_JOB_DISPATCH)
                n += dispatch_dwords(job);
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
#define DISPATCH_ACQUIRE_GCR                                                                          \
        (ACQUIRE_MEM_GCR_GLI_INV_ALL | ACQUIRE_MEM_GCR_GLM_WB | ACQUIRE_MEM_GCR_GLM_INV |          \
         ACQUIRE_MEM_GCR_GLK_WB | ACQUIRE_MEM_GCR_GLK_INV | ACQUIRE_MEM_GCR_GLV_INV |               \
         ACQUIRE_MEM_GCR_GL1_INV | ACQUIRE_MEM_GCR_GL2_WB | ACQUIRE_MEM_GCR_GL2_INV)

static size_t emit_dispatch(GpuContext *c, GpuQueue *q, const GpuJob *job, const GpuInflight *f, uint32_t *p) {
        const GpuKernelCode *kc = job_code(job);
        uint32_t *const p0 = p, v[PM4_MAX_USER_DATA];
        uint32_t initiator = COMPUTE_DISPATCH_INITIATOR_COMPUTE_SHADER_EN |
                             COMPUTE_DISPATCH_INITIATOR_FORCE_START_AT_000 |
                             (kc->wave32 ? COMPUTE_DISPATCH_INITIATOR_CS_W32_EN : 0);
        uint32_t nthread[3];

        uint32_t lds_granules = DIV_ROUND_UP(f->lds_bytes, PM4_LDS_GRANULE);
        uint32_t rsrc2 = (kc->rsrc2 & ~COMPUTE_PGM_RSRC2_LDS_SIZE_MASK) |
                         lds_granules << COMPUTE_PGM_RSRC2_LDS_SIZE_SHIFT;
        for (unsigned d = 0; d < 3; d++) {
                uint32_t rem = job->dispatch.grid[d] % job->dispatch.block[d];
                nthread[d] = COMPUTE_NUM_THREAD(job->dispatch.block[d], rem ? rem : job->dispatch.block[d]);
                if (rem)
                        initiator |= COMPUTE_DISPATCH_INITIATOR_PARTIAL_TG_EN;
        }

        p += pm4_emit_acquire_mem(p, DISPATCH_ACQUIRE_GCR);
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
        unsigned nuser = user_sgprs(c, q, job, f, v);
        if (nuser > 0)
                p += pm4_emit_set_sh_reg(p, mmCOMPUTE_USER_DATA_0, v, nuser);
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_RESOURCE_LIMITS, (uint32_t[]) { 0 }, 1);
        p += pm4_emit_set_sh_reg(p, mmCOMPUTE_START_X,
                                 (uint32_t[]) { 0, 0, 0, nthread[0], nthread[1], nthread[2], 0, 0 }, 8);
        p += pm4_emit_dispatch_direct(p, workgroups(job, 0), workgroups(job, 1), workgroups(job, 2), initiator);
        p += pm4_emit_event_write(p, PM4_EVENT_CS_PARTIAL_FLUSH, PM4_EVENT_INDEX_CS_PARTIAL_FLUSH);
        return (size_t) (p - p0);
}

/* The kernel's fence form of RELEASE_MEM: write back (and invalidate) the
 * GL2/GLM so the CPU sees what the dispatch wrote before the fence
 * (gfx_v10_0_ring_emit_fence: "GLM_INV must be set with GLM_WB"). */
#define FENCE_GCR (RELEASE_MEM_GCR_SEQ | RELEASE_MEM_GCR_GL2_WB | RELEASE_MEM_GCR_GLM_INV | \
                   RELEASE_MEM_GCR_GLM_WB | RELEASE_MEM_CACHE_POLICY(3))

static size_t emit_timestamp(uint32_t *p, uint64_t va) {
        return pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                    PM4_DATA_TIMESTAMP, PM4_INT_NONE, va, 0, 0);
}

size_t gpu_compute_emit_job(GpuContext *c, GpuQueue *q, const GpuJob *job, const GpuInflight *f,
                            uint32_t *p) {
        uint32_t *const p0 = p;
        uint64_t ts = gpu_queue_ts_va(c, q->index, f->seq);

        for (unsigned i = 0; i < job->n_waits; i++) {
                uint64_t va;
                uint32_t value;

                gpu_wait_target(c, &job->waits[i], &va, &value);
                p += pm4_emit_wait_reg_mem(p, PM4_WAIT_GE, va, value, 0xFFFFFFFFu, WAIT_POLL_INTERVAL);
        }
        p += emit_timestamp(p, ts);
        if (job->type == GPU_JOB_DISPATCH)
                p += emit_dispatch(c, q, job, f, p);
        p += emit_timestamp(p, ts + 8);
        /* The barrier (gpu-queue.c, "Completion"): the slot is set before
         * the end-of-pipe event is even issued (WRITE_DATA with WR_CONFIRM:
         * a RELEASE_MEM's write lands when the pipe drains, and the wait
         * below could otherwise pass on the slot's old ~0), the interrupt
         * comes at the end of the pipe, after the dispatch, and the wait
         * holds the fences back until the kernel has acknowledged it. */
        p += pm4_emit_write_data(p, gpu_context_event_slot_va(c, q->ack_event), &q->ack_event, 1);
        p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                  PM4_DATA_32, PM4_INT_AFTER_WRITE_CONFIRM, gpu_context_event_slot_va(c, q->ack_event),
                                  q->ack_event, q->ack_event);
        p += pm4_emit_wait_reg_mem(p, PM4_WAIT_EQ, gpu_context_event_slot_va(c, q->ack_event),
                                   KFD_UNSIGNALED_EVENT_SLOT32, 0xFFFFFFFFu, WAIT_POLL_INTERVAL);
        p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE,
                                  FENCE_GCR, PM4_DATA_32, PM4_INT_NONE, gpu_queue_fence_va(c, q->index),
                                  (uint32_t) f->seq, 0);
        p += pm4_emit_release_mem(p, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE,
                                  FENCE_GCR, PM4_DATA_32, PM4_INT_AFTER_WRITE_CONFIRM,
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
