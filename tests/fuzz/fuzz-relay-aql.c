/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for what the KFD relay does with an AQL kernel dispatch packet
 * it read from a ROCm program's ring: the GPU layer's half
 * (daemon/gpu/gpu-aql.c) — gpu_aql_check() on a GPU_JOB_AQL job built from
 * the input, with what it calls: gpu_aql_kernel_code() (the 64 descriptor
 * bytes at kernel_object, in both layouts: a code object v3+ kernel
 * descriptor, and the amd_kernel_code_t ROCr's blit kernels use),
 * gpu_aql_entry_va(), gpu_hsa_check() and gpu_kernel_rsrc_check(). One
 * simulated gfx1030 context is brought up for the whole run; an input may
 * ask for gfx11, which the context then claims to be (the simulator models
 * gfx1030 only; the checks read nothing but the generation, LDS and scratch
 * sizes).
 *
 * Input (little-endian, short inputs padded with zeros):
 *   @0   the 64 descriptor bytes
 *   @64  flags: bit 0 gfx11, bit 1 write amd_kernel_code_t's version_major
 *        (1 @0) and machine_kind (1 @8) over the descriptor
 *   @65  descriptor_va (u64)
 *   @73  grid_size_x/y/z (u32 each), @85 workgroup_size_x/y/z (u16 each)
 *   @91  group_segment_size, @95 private_segment_size (u32)
 *   @99  the completion: ts_va, signal_va, event_slot_va, mailbox_va,
 *        index_va, index_value (u64 each), @147 event_id (u32), @151 acquire
 *
 * Besides "no crash, no UB" it checks that the checks are the documented ones
 * (gpu.h gpu_aql_check()), against an oracle written here from the sources
 * they cite (LLVM AMDGPUUsage "Kernel Descriptor", AMDHSAKernelDescriptor.h;
 * ROCr amd_hsa_kernel_code.h): a job is accepted exactly when the oracle
 * accepts it. So an accepted descriptor has its user SGPRs within
 * PM4_MAX_USER_DATA and at least the ones kernel_code_properties enables, a
 * 256-byte aligned entry that does not wrap, RSRC words without a privileged
 * or reserved bit (and gpu_kernel_rsrc_check() agrees), zero reserved bytes
 * and no kernarg preload (v3+); what gpu_aql_kernel_code() returns is the
 * descriptor's own words; a refusal is -EINVAL with a printable message,
 * the same one each time.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu-internal.h"
#include "gpu/gpu.h"
#include "gpu/pm4.h"
#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_SIZE 152u
#define FLAG_GFX11 0x1u
#define FLAG_KERNEL_CODE_T 0x2u

/* gpu-dispatch.c: a queue's scratch backs at least 32 waves, at most
 * GPU_SCRATCH_MAX bytes. */
#define SCRATCH_MIN_WAVES 32u
/* The simulated gfx1030's LDS (sim-topology.c lds_size_in_kb 64). */
#define LDS_BYTES 65536u

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-relay-aql: broken promise: %s\n", what);
                abort();
        }
}

static SimDevice *dev;
static GpuContext *ctx;
static uint32_t gfx10_version;
static bool debug; /* FUZZ_RELAY_AQL_DEBUG=1: each input's answer on stderr */

static void teardown(void) {
        ctx = gpu_context_free(ctx);
        dev = sim_device_free(dev);
}

static void bring_up(void) {
        if (ctx)
                return;
        check(sim_device_new(&(SimOptions) { .isa_helpers = -1 }, &dev) == 0, "sim_device_new");
        check(gpu_context_new(sim_device_get_ops(dev), NULL, &ctx) == 0, "gpu_context_new");
        gfx10_version = ctx->info.gfx_target_version;
        debug = getenv("FUZZ_RELAY_AQL_DEBUG") != NULL;
        atexit(teardown);
}

static uint64_t le(const uint8_t *p, unsigned n) {
        uint64_t v = 0;

        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t) p[i] << (8 * i);
        return v;
}

static bool zero(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

/* ---- The oracle ---- */

/* amd_kernel_code_t: amd_kernel_code_version_major (u32 @0) 1 and
 * amd_machine_kind (u16 @8) 1 (AMD_MACHINE_KIND_AMDGPU). */
static bool is_kernel_code_t(const uint8_t *d) {
        return le(d, 4) == 1 && le(d + 8, 2) == 1;
}

/* descriptor_va + kernel_code_entry_byte_offset (s64 @16), 0 if outside
 * [0, 2^64). */
static uint64_t entry_of(const GpuJob *j) {
        __int128 e = (__int128) j->aql.descriptor_va + (int64_t) le(j->aql.descriptor + 16, 8);

        return e < 0 || e > (__int128) UINT64_MAX ? 0 : (uint64_t) e;
}

/* The user SGPRs kernel_code_properties bits 0-6 enable (AMDGPUUsage
 * "Initial Kernel Execution State"): private segment buffer 4, dispatch ptr,
 * queue ptr, kernarg segment ptr, dispatch id, flat scratch init 2 each,
 * private segment size 1. */
static unsigned enabled_user_sgprs(uint16_t kcp) {
        static const unsigned n[7] = { 4, 2, 2, 2, 2, 2, 1 };
        unsigned sum = 0;

        for (unsigned b = 0; b < 7; b++)
                if (kcp >> b & 1)
                    sum += n[b];
        return sum;
}

/* The COMPUTE_PGM_RSRC bits no client may set (gpu-kernel-rsrc.c's list,
 * from AMDGPUUsage's compute_pgm_rsrc tables): privileged, debugger, trap
 * and exception enables, reserved. */
static bool rsrc_clean(unsigned gfx, uint32_t rsrc1, uint32_t rsrc2, uint32_t rsrc3) {
        const uint32_t bad1 = 1u << 20 | 1u << 22 | 1u << 24 | 1u << 25 | 3u << 27;
        const uint32_t bad2 = 1u << 6 | 1u << 13 | 1u << 14 | 0xFFu << 24;
        const uint32_t bad3 = gfx == 11 ? 0x7FFFFC00u : 0xFFFFFFF0u;

        return !(rsrc1 & bad1) && !(rsrc2 & bad2) && !(rsrc3 & bad3);
}

static uint64_t align_up(uint64_t v, uint64_t a) {
        return (v + a - 1) / a * a;
}

/* Whether the descriptor is one the loader would take. */
static bool oracle_descriptor(unsigned gfx, const GpuJob *j) {
        const uint8_t *d = j->aql.descriptor;
        bool akc = is_kernel_code_t(d);
        uint32_t rsrc1 = (uint32_t) le(d + 48, 4), rsrc2 = (uint32_t) le(d + 52, 4);
        uint32_t rsrc3 = akc ? 0 : (uint32_t) le(d + 44, 4);
        uint16_t kcp = (uint16_t) le(d + 56, 2);
        unsigned sgprs = rsrc2 >> 1 & 0x1F;
        uint64_t entry = entry_of(j);

        if (!akc && (!zero(d + 12, 4) || !zero(d + 24, 20) || !zero(d + 58, 2) || !zero(d + 60, 4)))
                return false;
        return !(kcp & 0xF380u) && rsrc_clean(gfx, rsrc1, rsrc2, rsrc3) && sgprs >= enabled_user_sgprs(kcp) &&
               sgprs <= PM4_MAX_USER_DATA && entry != 0 && entry % 256 == 0;
}

static bool oracle_job(unsigned gfx, const GpuJob *j) {
        const GpuHsaCompletion *h = &j->aql.hsa;
        bool wave32 = le(j->aql.descriptor + 56, 2) >> 10 & 1;
        uint64_t threads = 1;

        for (unsigned i = 0; i < 3; i++) {
                if (j->aql.grid[i] == 0 || j->aql.block[i] == 0)
                        return false;
                threads *= j->aql.block[i];
        }
        if (threads > 1024 || j->aql.group_segment_size > LDS_BYTES || !oracle_descriptor(gfx, j))
                return false;
        if (j->aql.private_segment_size > 0) {
                uint64_t unit = gfx == 11 ? PM4_TMPRING_WAVESIZE_UNIT_GFX11 : PM4_TMPRING_WAVESIZE_UNIT;
                uint64_t wave = align_up(align_up(j->aql.private_segment_size, 4) * (wave32 ? 32 : 64), unit);
                if (wave * SCRATCH_MIN_WAVES > GPU_SCRATCH_MAX)
                        return false;
        }
        return h->ts_va % 8 == 0 && h->ts_va <= UINT64_MAX - 16 && h->signal_va % 8 == 0 &&
               h->event_slot_va % 4 == 0 && h->mailbox_va % 4 == 0 && h->index_va % 8 == 0;
}

/* ---- The target ---- */

static void check_message(int r, const char *err, size_t size) {
        check(r == -EINVAL, "a refusal other than -EINVAL");
        check(memchr(err, 0, size) && err[0] != '\0', "a refusal without a message");
        for (const char *c = err; *c; c++)
                check(*c >= 0x20 && *c < 0x7f, "a message that is not printable");
}

static void check_kernel_code(unsigned gfx, const GpuJob *j, const GpuKernelCode *kc) {
        const uint8_t *d = j->aql.descriptor;
        bool akc = is_kernel_code_t(d);
        uint16_t kcp = (uint16_t) le(d + 56, 2);
        char why[256];

        check(kc->kd_va == j->aql.descriptor_va, "kd_va is not kernel_object");
        check(kc->entry_va == entry_of(j) && kc->entry_va != 0 && kc->entry_va % 256 == 0,
              "the entry point is not descriptor_va + its offset, 256-byte aligned, without a wrap");
        check(kc->rsrc1 == le(d + 48, 4) && kc->rsrc2 == le(d + 52, 4), "RSRC1/2 are not the descriptor's");
        check(kc->rsrc3 == (akc ? 0 : le(d + 44, 4)), "RSRC3 is not the descriptor's (0 for amd_kernel_code_t)");
        check(kc->code_properties == kcp && kc->wave32 == (bool) (kcp >> 10 & 1), "kernel_code_properties");
        check(!(kcp & 0xF380u), "reserved kernel_code_properties bits accepted");
        unsigned sgprs = kc->rsrc2 >> 1 & 0x1F;
        check(sgprs <= PM4_MAX_USER_DATA, "more user SGPRs than PM4_MAX_USER_DATA");
        check(sgprs >= enabled_user_sgprs(kcp), "fewer user SGPRs than kernel_code_properties enable");
        check(gpu_kernel_rsrc_check(gfx, kc->rsrc1, kc->rsrc2, kc->rsrc3, why, sizeof why) == 0,
              "RSRC words gpu_kernel_rsrc_check() refuses");
        check(rsrc_clean(gfx, kc->rsrc1, kc->rsrc2, kc->rsrc3), "a privileged or reserved RSRC bit");
        if (!akc) {
                check(zero(d + 12, 4) && zero(d + 24, 20) && zero(d + 60, 4), "non-zero reserved bytes (v3+)");
                check(zero(d + 58, 2), "kernarg preload accepted");
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t in[INPUT_SIZE] = { 0 };
        GpuJob j = { .type = GPU_JOB_AQL };
        GpuHsaCompletion *h = &j.aql.hsa;
        GpuKernelCode kc;
        char err[512], err2[512];

        bring_up();
        memcpy(in, data, size < INPUT_SIZE ? size : INPUT_SIZE);
        unsigned gfx = in[64] & FLAG_GFX11 ? 11 : 10;
        if (in[64] & FLAG_KERNEL_CODE_T) {
                memcpy(in, "\1\0\0\0", 4);
                memcpy(in + 8, "\1\0", 2);
        }
        memcpy(j.aql.descriptor, in, GPU_AQL_DESCRIPTOR_SIZE);
        j.aql.descriptor_va = le(in + 65, 8);
        for (unsigned i = 0; i < 3; i++) {
                j.aql.grid[i] = (uint32_t) le(in + 73 + 4 * i, 4);
                j.aql.block[i] = (uint16_t) le(in + 85 + 2 * i, 2);
        }
        j.aql.group_segment_size = (uint32_t) le(in + 91, 4);
        j.aql.private_segment_size = (uint32_t) le(in + 95, 4);
        h->ts_va = le(in + 99, 8);
        h->signal_va = le(in + 107, 8);
        h->event_slot_va = le(in + 115, 8);
        h->mailbox_va = le(in + 123, 8);
        h->index_va = le(in + 131, 8);
        h->index_value = le(in + 139, 8);
        h->event_id = (uint32_t) le(in + 147, 4);
        h->acquire = in[151] & 1;
        ctx->info.gfx_target_version = gfx == 11 ? 110000 : gfx10_version;
        check(gpu_gfx_generation(ctx) == gfx, "the generation the context claims");

        check(gpu_aql_is_kernel_code_t(j.aql.descriptor) == is_kernel_code_t(j.aql.descriptor),
              "the two descriptor layouts told apart otherwise");
        check(gpu_aql_entry_va(&j) == entry_of(&j), "gpu_aql_entry_va() is not descriptor_va + offset (0: wraps)");
        GpuJob other = j;
        other.type = GPU_JOB_DISPATCH;
        check(gpu_aql_entry_va(&other) == 0 && gpu_aql_entry_va(NULL) == 0, "an entry for a job that is not AQL");

        /* The descriptor alone. */
        memset(err, 0, sizeof err);
        memset(&kc, 0, sizeof kc);
        int rk = gpu_aql_kernel_code(gfx, &j, &kc, err, sizeof err);
        check(rk == 0 || rk == -EINVAL, "gpu_aql_kernel_code(): an errno other than -EINVAL");
        check((rk == 0) == oracle_descriptor(gfx, &j), "gpu_aql_kernel_code() accepts what the oracle does not, "
                                                       "or refuses what it accepts");
        if (rk == 0)
                check_kernel_code(gfx, &j, &kc);
        else
                check_message(rk, err, sizeof err);

        /* The completion alone. */
        memset(err, 0, sizeof err);
        int rh = gpu_hsa_check(&j, err, sizeof err);
        if (rh < 0)
                check_message(rh, err, sizeof err);

        /* The whole job, twice: the same answer and message. */
        memset(err, 0, sizeof err);
        memset(err2, 0, sizeof err2);
        int r = gpu_aql_check(ctx, &j, err, sizeof err);
        int r2 = gpu_aql_check(ctx, &j, err2, sizeof err2);
        check(r == r2 && strcmp(err, err2) == 0, "gpu_aql_check() answers the same job differently");
        check((r == 0) == oracle_job(gfx, &j), "gpu_aql_check() accepts what the oracle does not, or refuses "
                                               "what it accepts");
        if (r == 0)
                check(rk == 0 && rh == 0, "a job accepted with a refused descriptor or completion");
        else
                check_message(r, err, sizeof err);
        if (debug)
                fprintf(stderr, "fuzz-relay-aql: gfx%u %s: %s\n", gfx,
                        is_kernel_code_t(j.aql.descriptor) ? "amd_kernel_code_t" : "v3+", r == 0 ? "accepted" : err);
        /* Without a buffer for the reason: the same answer. */
        check(gpu_aql_check(ctx, &j, NULL, 0) == r, "gpu_aql_check() without err answers otherwise");
        return 0;
}
