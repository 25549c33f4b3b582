/* SPDX-License-Identifier: MIT */
/*
 * The V# of MUBUF accesses (sim-isa-vsharp.c): what a gfx10.3 GPU gives for
 * the scratch descriptor ROCr builds, for tinygrad's old word 3 (0x00C00000),
 * for a NUM_RECORDS too small and for each OOB_SELECT, FORMAT,
 * RESOURCE_LEVEL and TYPE: in range, a dword is stored and loaded back at its
 * swizzled address; out of range, the store leaves memory untouched and the
 * load gives 0. A hand-assembled program (encodings from llvm-mc-15
 * -mcpu=gfx1030 -show-encoding) shows each dword; the private_array kernel
 * built by clang shows what a real kernel computes through each descriptor.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "isa-helper.h"
#include "sim/isa/sim-isa.h"

#define CODE_VA 0x200000ull
#define SCRATCH_BYTES 4096u
#define UNTOUCHED 0xABABABABu

/* Each lane l stores { 100 + l, 200 + l } with buffer_store_dwordx2 at
 * offset 8 through the V# in s[0:3] (soffset s6), loads it back into v[4:5]
 * (preset to 0xdead) and writes v[4:5] to out[2l], out[2l+1] (s[4:5]). */
static const uint32_t store_load_x2[] = {
        0x4a0200ff, 0x00000064, /* v_add_nc_u32_e32 v1, 0x64, v0 */
        0x4a0400ff, 0x000000c8, /* v_add_nc_u32_e32 v2, 0xc8, v0 */
        0xe0740008, 0x06000100, /* buffer_store_dwordx2 v[1:2], off, s[0:3], s6 offset:8 */
        0x7e0802ff, 0x0000dead, /* v_mov_b32_e32 v4, 0xdead */
        0x7e0a02ff, 0x0000dead, /* v_mov_b32_e32 v5, 0xdead */
        0xe0340008, 0x06000400, /* buffer_load_dwordx2 v[4:5], off, s[0:3], s6 offset:8 */
        0xbf8c3f70,             /* s_waitcnt vmcnt(0) */
        0x34060083,             /* v_lshlrev_b32_e32 v3, 3, v0 */
        0xdc748000, 0x00040403, /* global_store_dwordx2 v3, v[4:5], s[4:5] */
        0xbf810000,             /* s_endpgm */
};

/* Each lane adds 5 to its dword at offset 8 with buffer_atomic_add glc and
 * writes the old value it got to out[l]. */
static const uint32_t atomic_add[] = {
        0x7e020285,             /* v_mov_b32_e32 v1, 5 */
        0xe0c84008, 0x06000100, /* buffer_atomic_add v1, off, s[0:3], s6 offset:8 glc */
        0xbf8c3f70,             /* s_waitcnt vmcnt(0) */
        0x34060082,             /* v_lshlrev_b32_e32 v3, 2, v0 */
        0xdc708000, 0x00040103, /* global_store_dword v3, v1, s[4:5] */
        0xbf810000,             /* s_endpgm */
};

#define RSRC3_ROCR_W32 0x21C14FACu  /* ROCr's gfx10 word 3, INDEX_STRIDE 32 */
#define RSRC3_ROCR_W64 0x21E14FACu  /* the same, INDEX_STRIDE 64 */
#define RSRC3_TINYGRAD 0x00C00000u  /* INDEX_STRIDE 32 | ADD_TID_ENABLE, nothing else */
#define OOB_SELECT(x) ((uint32_t) (x) << 28)
#define RSRC3_WITH_OOB(x) ((RSRC3_ROCR_W32 & ~OOB_SELECT(3)) | OOB_SELECT(x))

typedef struct Case {
        const char *what;
        uint32_t stride, num_records, rsrc3, soffset;
        bool wave32;
        unsigned in0, in1;      /* lanes 0..in0-1 have dword 0 in range, 0..in1-1 dword 1 */
} Case;

typedef struct Run {
        IsaMem m;
        uint32_t *scratch, *out;
        uint64_t scratch_va;
} Run;

static void run_code(Run *r, const Case *c, const uint32_t *code, size_t code_bytes) {
        SimIsaResult res;
        unsigned lanes = c->wave32 ? 32 : 64;

        isa_mem_init(&r->m);
        r->scratch_va = isa_mem_alloc(&r->m, SCRATCH_BYTES, (void **) &r->scratch);
        uint64_t ov = isa_mem_alloc(&r->m, 8 * 64, (void **) &r->out);
        memset(r->scratch, 0xAB, SCRATCH_BYTES);
        memset(r->out, 0xEE, 8 * 64);
        memcpy(isa_mem_map(&r->m, CODE_VA, 4096), code, code_bytes);
        SimIsaDispatch d = {
                .entry_va = CODE_VA,
                .grid = { 1, 1, 1 },
                .wg_size = { lanes, 1, 1 },
                .wave32 = c->wave32,
                .rsrc2 = 7 << 1, /* USER_SGPR_COUNT 7 */
                .user_sgpr = {
                        (uint32_t) r->scratch_va,
                        (uint32_t) (r->scratch_va >> 32 & 0xffff) | c->stride << 16 | 1u << 31, /* SWIZZLE_ENABLE */
                        c->num_records, c->rsrc3,
                        (uint32_t) ov, (uint32_t) (ov >> 32),
                        c->soffset,
                },
        };
        cr_assert_eq(sim_isa_dispatch(&d, &r->m.mem, 0, &res), 0, "%s: %s", c->what, res.message);
}

static void run_case(Run *r, const Case *c) {
        run_code(r, c, store_load_x2, sizeof(store_load_x2));
}

/* Dword k (0, 1: offsets 8 and 12) of lane l, swizzled with INDEX_STRIDE =
 * the wave's lanes, element size 4, STRIDE below the index stride's reach:
 * soffset + (offset / 4) * 4 * lanes + l * 4. */
static unsigned dword_index(const Case *c, unsigned l, unsigned k) {
        unsigned lanes = c->wave32 ? 32 : 64;
        return (c->soffset + (2 + k) * 4 * lanes + l * 4) / 4;
}

static void check_case(const Case *c) {
        Run r;
        unsigned lanes = c->wave32 ? 32 : 64;
        static uint32_t want[SCRATCH_BYTES / 4];

        run_case(&r, c);
        for (unsigned i = 0; i < SCRATCH_BYTES / 4; i++)
                want[i] = UNTOUCHED;
        for (unsigned l = 0; l < lanes; l++) {
                bool in[2] = { l < c->in0, l < c->in1 };
                for (unsigned k = 0; k < 2; k++) {
                        uint32_t value = (k ? 200 : 100) + l;
                        cr_expect_eq(r.out[2 * l + k], in[k] ? value : 0,
                                     "%s: lane %u dword %u loaded 0x%x, expected 0x%x", c->what, l, k, r.out[2 * l + k],
                                     in[k] ? value : 0);
                        if (in[k])
                                want[dword_index(c, l, k)] = value;
                }
        }
        for (unsigned i = 0; i < SCRATCH_BYTES / 4; i++)
                cr_expect_eq(r.scratch[i], want[i], "%s: scratch dword %u is 0x%x, expected 0x%x", c->what, i,
                             r.scratch[i], want[i]);
        isa_mem_fini(&r.m);
}

Test(isa_vsharp, rocr_scratch_descriptor_is_in_range) {
        check_case(&(Case) { "ROCr gfx10 V#, wave32", 0, SCRATCH_BYTES, RSRC3_ROCR_W32, 0, true, 32, 32 });
        check_case(&(Case) { "ROCr gfx10 V#, wave64", 0, SCRATCH_BYTES, RSRC3_ROCR_W64, 0, false, 64, 64 });
        check_case(&(Case) { "ROCr gfx10 V#, soffset 64", 0, SCRATCH_BYTES, RSRC3_ROCR_W32, 64, true, 32, 32 });
        check_case(&(Case) { "NUM_RECORDS 1 with OOB_SELECT 2 (only 0 checked)", 0, 1, RSRC3_ROCR_W32, 0, true, 32, 32 });
}

/* tinygrad's word 3: FORMAT INVALID, RESOURCE_LEVEL 0, OOB_SELECT 0 with
 * STRIDE 0; every dword is out of range, whatever NUM_RECORDS says. */
Test(isa_vsharp, tinygrad_word3_reads_zeros_and_drops_stores) {
        check_case(&(Case) { "0x00C00000", 0, 0xffffffffu, RSRC3_TINYGRAD, 0, true, 0, 0 });
        check_case(&(Case) { "0x00C00000 | FORMAT 32_UINT | RESOURCE_LEVEL 1 (OOB_SELECT 0, STRIDE 0)", 0, 0xffffffffu,
                             RSRC3_WITH_OOB(0), 0, true, 0, 0 });
}

Test(isa_vsharp, oob_select_variants) {
        /* 0: index >= NUM_RECORDS or offset >= STRIDE: offset 8 < 12 is in, 12 is not. */
        check_case(&(Case) { "OOB_SELECT 0, STRIDE 12", 12, 32, RSRC3_WITH_OOB(0), 0, true, 32, 0 });
        check_case(&(Case) { "OOB_SELECT 0, STRIDE 16, NUM_RECORDS 20", 16, 20, RSRC3_WITH_OOB(0), 0, true, 20, 20 });
        /* 1: index (the lane, ADD_TID_ENABLE) >= NUM_RECORDS. */
        check_case(&(Case) { "OOB_SELECT 1, NUM_RECORDS 10", 0, 10, RSRC3_WITH_OOB(1), 0, true, 10, 10 });
        /* 2: NUM_RECORDS == 0. */
        check_case(&(Case) { "OOB_SELECT 2, NUM_RECORDS 0", 0, 0, RSRC3_WITH_OOB(2), 0, true, 0, 0 });
        /* 3: the swizzled byte offset (with soffset) >= NUM_RECORDS, per dword:
         * dword 0 of lane l is at 256 + 4l, dword 1 at 384 + 4l. */
        check_case(&(Case) { "OOB_SELECT 3, NUM_RECORDS 384", 0, 384, RSRC3_WITH_OOB(3), 0, true, 32, 0 });
        check_case(&(Case) { "OOB_SELECT 3, NUM_RECORDS 320", 0, 320, RSRC3_WITH_OOB(3), 0, true, 16, 0 });
        check_case(&(Case) { "OOB_SELECT 3, NUM_RECORDS 416, soffset 32", 0, 416, RSRC3_WITH_OOB(3), 32, true, 32, 0 });
        check_case(&(Case) { "OOB_SELECT 3, NUM_RECORDS 4096", 0, 4096, RSRC3_WITH_OOB(3), 0, true, 32, 32 });
}

/* What the hardware does with these is not documented for untyped accesses;
 * the model reads it the unkind way (sim-isa-vsharp.c). */
Test(isa_vsharp, invalid_format_resource_level_or_type_is_out_of_range) {
        check_case(&(Case) { "FORMAT 0", 0, SCRATCH_BYTES, RSRC3_ROCR_W32 & ~(0x7fu << 12), 0, true, 0, 0 });
        check_case(&(Case) { "RESOURCE_LEVEL 0", 0, SCRATCH_BYTES, RSRC3_ROCR_W32 & ~(1u << 24), 0, true, 0, 0 });
        check_case(&(Case) { "TYPE 2 (an image)", 0, SCRATCH_BYTES, RSRC3_ROCR_W32 | 2u << 30, 0, true, 0, 0 });
}

/* An atomic in range returns the old value and adds; out of range it returns
 * 0 and leaves memory alone. */
Test(isa_vsharp, atomic_in_or_out_of_range) {
        const Case cases[] = {
                { "ROCr V#", 0, SCRATCH_BYTES, RSRC3_ROCR_W32, 0, true, 32, 32 },
                { "0x00C00000", 0, 0xffffffffu, RSRC3_TINYGRAD, 0, true, 0, 0 },
                { "OOB_SELECT 3, NUM_RECORDS 320", 0, 320, RSRC3_WITH_OOB(3), 0, true, 16, 16 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                const Case *c = &cases[i];
                Run r;
                run_code(&r, c, atomic_add, sizeof(atomic_add));
                for (unsigned l = 0; l < 32; l++) {
                        bool in = l < c->in0;
                        cr_expect_eq(r.out[l], in ? UNTOUCHED : 0, "%s: lane %u got 0x%x", c->what, l, r.out[l]);
                        cr_expect_eq(r.scratch[dword_index(c, l, 0)], in ? UNTOUCHED + 5 : UNTOUCHED, "%s: lane %u's dword",
                                     c->what, l);
                }
                isa_mem_fini(&r.m);
        }
}

/* A wave64 access through a V# with INDEX_STRIDE 32: lane l + 32 lands on
 * lane l's dword (STRIDE 0), so the later lane's store wins and lanes l and
 * l + 32 both load it back. */
Test(isa_vsharp, wave64_with_index_stride_32_aliases_lanes) {
        Case c = { "wave64, INDEX_STRIDE 32", 0, SCRATCH_BYTES, RSRC3_ROCR_W32, 0, false, 64, 64 };
        Run r;
        run_case(&r, &c);
        for (unsigned l = 0; l < 64; l++)
                for (unsigned k = 0; k < 2; k++) {
                        uint32_t want = (k ? 200 : 100) + l % 32 + 32;
                        cr_expect_eq(r.out[2 * l + k], want, "lane %u dword %u: 0x%x, expected 0x%x", l, k,
                                     r.out[2 * l + k], want);
                        cr_expect_eq(r.scratch[(2 + k) * 32 + l % 32], want);
                }
        isa_mem_fini(&r.m);
}

/* The private_array kernel (64 dwords indexed at run time, in scratch through
 * buffer instructions), with the scratch V# isa_launch() passes replaced. */
typedef enum Outcome { RIGHT, ZEROS, SOME_WRONG } Outcome;

static void private_array(bool wave64, uint32_t num_records, uint32_t rsrc3, Outcome outcome, const char *what) {
        enum { N = 200 };
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        uint32_t *in, *out, n = N;

        isa_mem_init(&m);
        cr_assert_eq(isa_kernel_load(&m, isa_kernel_path(wave64 ? "private-array-w64.hsaco" : "private-array.hsaco"),
                                     "private_array", &k), 0);
        cr_assert_geq(k.private_segment_size, 256, "the array is in scratch");
        m.scratch_rsrc_override = true;
        m.scratch_rsrc[2] = num_records;
        m.scratch_rsrc[3] = rsrc3;
        uint64_t iv = isa_mem_alloc(&m, 4 * N, (void **) &in), ov = isa_mem_alloc(&m, 4 * N, (void **) &out);
        for (uint32_t i = 0; i < N; i++)
                in[i] = i * 2654435761u;
        isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, n);
        cr_assert_eq(isa_launch(&m, &k, (uint32_t[3]) { 4, 1, 1 }, (uint32_t[3]) { 64, 1, 1 }, &a, 0, &res), 0, "%s: %s",
                     what, res.message);
        unsigned right = 0;
        for (uint32_t i = 0; i < N; i++) {
                uint32_t v = in[i], want = 0;
                for (uint32_t j = 0; j < 16; j++)
                        want += v * ((v + j * 7) & 63) + i;
                right += out[i] == want;
                if (outcome != SOME_WRONG)
                        cr_expect_eq(out[i], outcome == RIGHT ? want : 0, "%s: out[%u] = %u, expected %u", what, i,
                                     out[i], outcome == RIGHT ? want : 0);
        }
        if (outcome == SOME_WRONG)
                cr_expect_lt(right, N, "%s: all %u results right", what, N);
        isa_mem_fini(&m);
}

Test(isa_vsharp, private_array_through_each_descriptor) {
        private_array(false, 0xffffffffu, RSRC3_ROCR_W32, RIGHT, "wave32, ROCr V#");
        private_array(true, 0xffffffffu, RSRC3_ROCR_W64, RIGHT, "wave64, ROCr V#");
        private_array(false, 0xffffffffu, RSRC3_TINYGRAD, ZEROS, "wave32, 0x00C00000");
        private_array(true, 0xffffffffu, 0x00E00000u, ZEROS, "wave64, 0x00E00000");
        private_array(false, 0, RSRC3_ROCR_W32, ZEROS, "wave32, NUM_RECORDS 0");
        private_array(false, 512, RSRC3_WITH_OOB(3), SOME_WRONG, "wave32, raw NUM_RECORDS 512");
        private_array(true, 0xffffffffu, RSRC3_ROCR_W32, SOME_WRONG, "wave64, INDEX_STRIDE 32");
}
