/* SPDX-License-Identifier: MIT */
/*
 * The GPU layer's half of the AQL relay: reading the kernel descriptor of a
 * client's HSA kernel dispatch packet (GPU_JOB_AQL) into what programming a
 * dispatch takes, with the checks every descriptor passes; checking a whole
 * GPU_JOB_AQL job (gpu_aql_check(): its geometry against the device's
 * queues, gpu-dispatch.c's limits) and the HSA completion (GpuHsaCompletion)
 * a relayed packet asks for. Stateless; the caller (the relay) copied the
 * descriptor and the packet out of client memory once and checked every
 * address against the client's buffers. The packets of a GPU_JOB_AQL job
 * and of an HSA completion are written by gpu-dispatch.c, with every other
 * compute job's.
 *
 * Two descriptor layouts reach the CP through an AQL packet's kernel_object,
 * and it reads both at the same offsets (LLVM AMDHSAKernelDescriptor.h
 * kernel_descriptor_t; ROCr amd_hsa_kernel_code.h / LLVM AMDKernelCodeT.h
 * amd_kernel_code_t; rocm-facts §2):
 *   @16 kernel_code_entry_byte_offset (signed 64-bit) in both;
 *   @44 compute_pgm_rsrc3 in a v3+ descriptor; in amd_kernel_code_t the high
 *       half of max_scratch_backing_memory_byte_size (@40, 64-bit);
 *   @48 compute_pgm_rsrc1, @52 compute_pgm_rsrc2 in both (amd_kernel_code_t's
 *       compute_pgm_resource_registers: RSRC1 low, RSRC2 high);
 *   @56 kernel_code_properties: bits 0..6 enable the same user SGPRs in both,
 *       bit 10 is ENABLE_WAVEFRONT_SIZE32 in a v3+ descriptor and reserved
 *       (0: wave64, as ROCr's blit kernels run) in amd_kernel_code_t.
 * The old layout is what ROCr's own blit kernels use (AssembleShader wraps
 * its hand-written gfx10 kernels in an amd_kernel_code_t).
 *
 * Telling them apart, which the CP does not: amd_kernel_code_t starts with
 * amd_kernel_code_version_major (1) and has amd_machine_kind (1,
 * AMD_MACHINE_KIND_AMDGPU) as the 16-bit word at 8; a v3+ descriptor has
 * group_segment_fixed_size and kernarg_size there, which would both have to
 * be 1 (one byte of static LDS and a one-byte kernel argument segment, which
 * no compiler emits) to be mistaken for it. The choice decides only RSRC3
 * (0 for amd_kernel_code_t, whose word there is no register) and whether the
 * v3+ reserved bytes must be zero; every other check is the same, so a
 * descriptor read the wrong way programs nothing the checks did not allow.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "gpu/gpu-internal.h"
#include "gpu/pm4.h"

#define KD_GROUP_SEGMENT_FIXED_SIZE 0   /* amd_kernel_code_t: amd_kernel_code_version_major */
#define KD_KERNARG_SIZE 8               /* amd_kernel_code_t: amd_machine_kind (16-bit) */
#define KD_RESERVED0 12                 /* 4 bytes */
#define KD_KERNEL_CODE_ENTRY_BYTE_OFFSET 16
#define KD_RESERVED1 24                 /* 20 bytes */
#define KD_COMPUTE_PGM_RSRC3 44
#define KD_COMPUTE_PGM_RSRC1 48
#define KD_COMPUTE_PGM_RSRC2 52
#define KD_KERNEL_CODE_PROPERTIES 56
#define KD_KERNARG_PRELOAD 58
#define KD_RESERVED3 60                 /* 4 bytes */

#define AKC_VERSION_MAJOR 1u
#define AKC_MACHINE_KIND_AMDGPU 1u

/* kernel_code_properties (LLVM AMDHSAKernelDescriptor.h): bit 10 wave32;
 * 7-9 and 12-15 reserved in a v3+ descriptor (in amd_kernel_code_t, 7-9 ask
 * for grid workgroup count SGPRs, which no gfx10 CP gives, and 12-15 are
 * reserved1): refused in both, as the loader refuses them. */
#define KCP_WAVEFRONT_SIZE32 (1u << 10)
#define KCP_RESERVED ((0x7u << 7) | (0xfu << 12))

#define RSRC2_USER_SGPR_COUNT(r) (((r) >> 1) & 0x1Fu)

#define REFUSE(...) (err ? (void) snprintf(err, errlen, __VA_ARGS__) : (void) 0, -EINVAL)

static uint32_t rd32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

static uint16_t rd16(const uint8_t *p) {
        return (uint16_t) (p[0] | p[1] << 8);
}

static uint64_t rd64(const uint8_t *p) {
        return (uint64_t) rd32(p) | (uint64_t) rd32(p + 4) << 32;
}

static bool all_zero(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

bool gpu_aql_is_kernel_code_t(const uint8_t *d) {
        return rd32(d + KD_GROUP_SEGMENT_FIXED_SIZE) == AKC_VERSION_MAJOR &&
               rd16(d + KD_KERNARG_SIZE) == AKC_MACHINE_KIND_AMDGPU;
}

uint64_t gpu_aql_entry_va(const GpuJob *job) {
        uint64_t entry;

        if (!job || job->type != GPU_JOB_AQL)
                return 0;
        int64_t off = (int64_t) rd64(job->aql.descriptor + KD_KERNEL_CODE_ENTRY_BYTE_OFFSET);
        if (off >= 0 ? __builtin_add_overflow(job->aql.descriptor_va, (uint64_t) off, &entry)
                     : __builtin_sub_overflow(job->aql.descriptor_va, -(uint64_t) off, &entry))
                return 0;
        return entry;
}

int gpu_aql_kernel_code(unsigned gfx, const GpuJob *job, GpuKernelCode *ret, char *err, size_t errlen) {
        const uint8_t *d = job->aql.descriptor;
        bool akc = gpu_aql_is_kernel_code_t(d);
        uint32_t rsrc1 = rd32(d + KD_COMPUTE_PGM_RSRC1), rsrc2 = rd32(d + KD_COMPUTE_PGM_RSRC2);
        uint32_t rsrc3 = akc ? 0 : rd32(d + KD_COMPUTE_PGM_RSRC3);
        uint16_t kcp = rd16(d + KD_KERNEL_CODE_PROPERTIES);
        char why[160];

        if (!akc) {
                if (!all_zero(d + KD_RESERVED0, 4) || !all_zero(d + KD_RESERVED1, 20) ||
                    !all_zero(d + KD_RESERVED3, 4))
                        return REFUSE("reserved bytes of the kernel descriptor at 0x%" PRIx64 " are not zero",
                                      job->aql.descriptor_va);
                /* Only gfx90a/gfx94x preload kernel arguments (LLVM AMDGPUUsage). */
                if (rd16(d + KD_KERNARG_PRELOAD) != 0)
                        return REFUSE("the kernel descriptor at 0x%" PRIx64 " asks for kernarg preload, which gfx%u "
                                      "does not have",
                                      job->aql.descriptor_va, gfx);
        }
        if (kcp & KCP_RESERVED)
                return REFUSE("the kernel descriptor's kernel_code_properties 0x%x sets reserved bits", kcp);
        if (gpu_kernel_rsrc_check(gfx, rsrc1, rsrc2, rsrc3, why, sizeof why) < 0)
                return REFUSE("%s", why);
        unsigned want = gpu_kernel_user_sgprs(kcp);
        if (RSRC2_USER_SGPR_COUNT(rsrc2) < want)
                return REFUSE("the kernel descriptor's COMPUTE_PGM_RSRC2.USER_SGPR_COUNT is %u but its "
                              "kernel_code_properties 0x%x enable %u user SGPRs",
                              RSRC2_USER_SGPR_COUNT(rsrc2), kcp, want);
        if (RSRC2_USER_SGPR_COUNT(rsrc2) > PM4_MAX_USER_DATA)
                return REFUSE("the kernel descriptor asks for %u user SGPRs, at most %u", RSRC2_USER_SGPR_COUNT(rsrc2),
                              PM4_MAX_USER_DATA);
        uint64_t entry = gpu_aql_entry_va(job);
        if (entry == 0)
                return REFUSE("the kernel descriptor's entry offset %" PRId64 " from 0x%" PRIx64 " is outside the "
                              "address space",
                              (int64_t) rd64(d + KD_KERNEL_CODE_ENTRY_BYTE_OFFSET), job->aql.descriptor_va);
        if (entry % 256 != 0)
                return REFUSE("the kernel's entry point 0x%" PRIx64 " is not 256-byte aligned", entry);
        *ret = (GpuKernelCode) {
                .kd_va = job->aql.descriptor_va,
                .entry_va = entry,
                .rsrc1 = rsrc1,
                .rsrc2 = rsrc2,
                .rsrc3 = rsrc3,
                .code_properties = kcp,
                .wave32 = kcp & KCP_WAVEFRONT_SIZE32,
        };
        return 0;
}

const GpuHsaCompletion *gpu_job_hsa(const GpuJob *job) {
        const GpuHsaCompletion *h;

        if (job->type == GPU_JOB_NOP)
                h = &job->nop.hsa;
        else if (job->type == GPU_JOB_AQL)
                h = &job->aql.hsa;
        else
                return NULL;
        if (!h->acquire && !h->ts_va && !gpu_hsa_retires(h))
                return NULL;
        return h;
}

bool gpu_hsa_retires(const GpuHsaCompletion *h) {
        return h->signal_va || h->event_slot_va || h->mailbox_va || h->index_va;
}

int gpu_hsa_check(const GpuJob *job, char *err, size_t errlen) {
        const GpuHsaCompletion *h = gpu_job_hsa(job);

        if (!h)
                return 0;
        if (h->ts_va % 8 != 0 || h->ts_va > UINT64_MAX - 16)
                return REFUSE("timestamp address 0x%" PRIx64 " is not 8-byte aligned", h->ts_va);
        if (h->signal_va % 8 != 0)
                return REFUSE("signal value address 0x%" PRIx64 " is not 8-byte aligned", h->signal_va);
        if (h->event_slot_va % 4 != 0)
                return REFUSE("event slot address 0x%" PRIx64 " is not 4-byte aligned", h->event_slot_va);
        if (h->mailbox_va % 4 != 0)
                return REFUSE("event mailbox address 0x%" PRIx64 " is not 4-byte aligned", h->mailbox_va);
        if (h->index_va % 8 != 0)
                return REFUSE("read index address 0x%" PRIx64 " is not 8-byte aligned", h->index_va);
        return 0;
}

int gpu_aql_check(const GpuContext *c, const GpuJob *job, char *err, size_t errlen) {
        GpuKernelCode kc;
        uint64_t threads = 1;
        int r;

        if (!c || !job || job->type != GPU_JOB_AQL)
                return REFUSE("not an AQL dispatch");
        for (unsigned d = 0; d < 3; d++) {
                if (job->aql.grid[d] == 0)
                        return REFUSE("grid_size_%c is 0", 'x' + d);
                if (job->aql.block[d] == 0)
                        return REFUSE("workgroup_size_%c is 0", 'x' + d);
                threads *= job->aql.block[d];
        }
        if (threads > 1024)
                return REFUSE("workgroup of %" PRIu64 " work-items (%u x %u x %u), at most 1024", threads,
                              job->aql.block[0], job->aql.block[1], job->aql.block[2]);
        if (job->aql.group_segment_size > gpu_dispatch_lds_limit(c))
                return REFUSE("group_segment_size of %" PRIu32 " bytes, more LDS than the device's %" PRIu32,
                              job->aql.group_segment_size, gpu_dispatch_lds_limit(c));
        r = gpu_aql_kernel_code(gpu_gfx_generation(c), job, &kc, err, errlen);
        if (r < 0)
                return r;
        if (job->aql.private_segment_size > 0 && gpu_dispatch_scratch_too_big(c, job->aql.private_segment_size, kc.wave32))
                return REFUSE("private_segment_size of %" PRIu32 " bytes per work-item, more than the %llu MiB of "
                              "scratch a queue backs allow",
                              job->aql.private_segment_size, (unsigned long long) (GPU_SCRATCH_MAX >> 20));
        return gpu_hsa_check(job, err, errlen);
}
