/* SPDX-License-Identifier: MIT */
/*
 * Cross-lane instructions on the RDNA2 interpreter: tests/kernels/cross-lane.cl
 * (ds_bpermute/ds_permute, DPP16 and DPP8, v_permlane16/x16, sub-group
 * reductions and scans) against a CPU model of each instruction written from
 * its definition, on workgroups whose last wave is partial (so some sources are
 * inactive lanes) and inside a branch, in wave32 and (cross-lane-w64.hsaco)
 * wave64; plus hand-assembled DPP16 forms the kernel does not reach (fi,
 * masks on a VOP2, refused controls) and ds_swizzle_b32, which clang-15 does
 * not emit for OpenCL C and rocPRIM's kernels in Debian's rocSPARSE do.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "isa-helper.h"

#define OLD 0x0bad0000u
#define WAVE 32u
#define MAX_WAVE 64u

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
        rng_state = rng_state * 1664525u + 1013904223u;
        return rng_state >> 8 ^ rng_state << 13;
}

static bool on(uint64_t exec, unsigned l) {
        return (exec >> l) & 1;
}

/* DPP16 source of lane l (LLVM AMDGPUModifierSyntax.rst dpp16_ctrl), -1 outside the row. */
static int dpp16_src(unsigned ctrl, unsigned l) {
        unsigned row = l & ~15u, i = l & 15, n = ctrl & 15;
        if (ctrl < 0x100)
                return (int) ((l & ~3u) | ((ctrl >> (2 * (l & 3))) & 3));
        switch (ctrl & ~15u) {
        case 0x100: return i + n < 16 ? (int) (l + n) : -1;
        case 0x110: return i >= n ? (int) (l - n) : -1;
        case 0x120: return (int) (row + (i + 16 - n) % 16);
        case 0x150: return (int) (row + n);
        case 0x160: return (int) (row + (i ^ n));
        }
        return ctrl == 0x140 ? (int) (row + 15 - i) : (int) ((l & ~7u) + 7 - (l & 7));
}

/* update_dpp(old = OLD + lane, v, ctrl, row_mask, bank_mask, bound_ctrl) on the lanes of exec. */
static uint32_t ref_dpp16(const uint32_t *v, uint64_t exec, unsigned l, unsigned ctrl, unsigned rm, unsigned bm, bool bc) {
        if (!((rm >> (l / 16)) & 1) || !((bm >> ((l / 4) & 3)) & 1))
                return OLD + l;
        int s = dpp16_src(ctrl, l);
        if (s >= 0 && on(exec, (unsigned) s))
                return v[s];
        return bc ? 0 : OLD + l;
}

static uint32_t ref_dpp8(const uint32_t *v, uint64_t exec, unsigned l, uint32_t sel) {
        unsigned s = (l & ~7u) | ((sel >> (3 * (l & 7))) & 7);
        return on(exec, s) ? v[s] : 0;
}

static uint32_t ref_permlane(const uint32_t *v, uint64_t exec, unsigned l, bool cross, uint32_t s1, uint32_t s2, bool bc) {
        uint64_t sel = s1 | (uint64_t) s2 << 32;
        unsigned s = ((l / 16) ^ (cross ? 1u : 0u)) * 16 + ((sel >> (4 * (l & 15))) & 15);
        if (on(exec, s))
                return v[s];
        return bc ? 0 : OLD + l;
}

static uint32_t ref_bpermute(const uint32_t *v, uint64_t exec, unsigned from) {
        return on(exec, from) ? v[from] : 0;
}

/* ds_permute to lane (l * mul + add) % 32 of lane l's 32-lane half. */
static void ref_permute(const uint32_t *v, uint64_t exec, unsigned mul, unsigned add, unsigned lanes, uint32_t *ret) {
        memset(ret, 0, MAX_WAVE * 4);
        for (unsigned l = 0; l < lanes; l++)
                if (on(exec, l))
                        ret[(l & 32) | ((l * mul + add) & 31)] = v[l];
}

static float u2f_(uint32_t u) {
        float f;
        memcpy(&f, &u, 4);
        return f;
}

/* Expected 24 words of every lane of one wave (sub-group) of `lanes` with
 * the lanes of exec live. ds_(b)permute work on each 32-lane half alone. */
static void ref_wave(const uint32_t *v, uint64_t exec, unsigned lanes, uint32_t (*e)[24]) {
        uint32_t perm[MAX_WAVE], perm2[MAX_WAVE], sum = 0, incl = 0, mx = 0, fmin_bits = 0x7f800000;
        uint64_t odd = 0;

        ref_permute(v, exec, 7, 0, lanes, perm);
        for (unsigned l = 0; l < lanes; l++)
                if (on(exec, l)) {
                        sum += v[l];
                        if (u2f_(v[l] >> 2) < u2f_(fmin_bits))
                                fmin_bits = v[l] >> 2;
                        odd |= (uint64_t) (v[l] & 1) << l;
                }
        ref_permute(v, odd, 11, 2, lanes, perm2);
        for (unsigned l = 0; l < lanes; l++) {
                if (!on(exec, l))
                        continue;
                uint32_t *x = e[l];
                x[0] = ref_bpermute(v, exec, (l & 32) | ((l * 5 + 3) & 31));
                x[1] = perm[l];
                x[2] = ref_dpp16(v, exec, l, 0x4e, 0xf, 0xf, false);
                x[3] = ref_dpp16(v, exec, l, 0x103, 0xf, 0xf, false);
                x[4] = ref_dpp16(v, exec, l, 0x115, 0xf, 0xf, true);
                x[5] = ref_dpp16(v, exec, l, 0x127, 0x1, 0xf, false);
                x[6] = ref_dpp16(v, exec, l, 0x140, 0xf, 0x6, false);
                x[7] = ref_dpp16(v, exec, l, 0x141, 0xf, 0xf, false);
                x[8] = ref_dpp16(v, exec, l, 0x155, 0xf, 0xf, false);
                x[9] = ref_dpp16(v, exec, l, 0x169, 0xf, 0xf, false);
                x[10] = ref_dpp8(v, exec, l, 0x053977);
                x[11] = ref_permlane(v, exec, l, false, 0x01234567u, 0x89abcdefu, false);
                x[12] = ref_permlane(v, exec, l, true, 0x76543210u, 0xfedcba98u, false);
                incl += v[l];
                x[13] = sum;
                x[14] = incl;
                x[15] = mx;
                mx = v[l] > mx ? v[l] : mx;
                x[16] = v[3];
                x[17] = fmin_bits;
                if (!on(odd, l)) {
                        for (unsigned k = 18; k < 24; k++)
                                x[k] = OLD;
                        continue;
                }
                x[18] = ref_bpermute(v, odd, (l & 32) | ((l * 3 + 1) & 31));
                x[19] = perm2[l];
                x[20] = ref_dpp16(v, odd, l, 0x102, 0xf, 0xf, false);
                x[21] = ref_dpp16(v, odd, l, 0x113, 0xf, 0xf, true);
                x[22] = ref_permlane(v, odd, l, true, 0x67452301u, 0xefcdab89u, true);
                x[23] = ref_dpp8(v, odd, l, 0x1d3977);
        }
}

Test(isa_cross_lane, kernel_uses_every_form) {
        static const char *const needles[] = {
                "ds_bpermute_b32", "ds_permute_b32", "v_mov_b32_dpp", "v_add_nc_u32_dpp", "quad_perm:", "row_shl:",
                "row_shr:", "row_ror:", "row_mirror", "row_half_mirror", "row_share:", "row_xmask:", "dpp8:",
                "row_mask:0x1 ", "bank_mask:0x6", "bound_ctrl:1", "v_permlane16_b32", "v_permlanex16_b32",
                "op_sel:[0,1]",
        };
        for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
                cr_assert_gt(isa_objdump_count("cross-lane.hsaco", needles[i]), 0,
                             "clang no longer emits %s for cross-lane.cl", needles[i]);
}

static void check_kernel(const char *file, unsigned lanes, const uint32_t (*shapes)[2], size_t nshapes) {
        for (size_t t = 0; t < nshapes; t++) {
                uint32_t groups = shapes[t][0], wg = shapes[t][1], n = groups * wg, *in, *out;
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;

                isa_mem_init(&m);
                cr_assert_eq(isa_kernel_load(&m, isa_kernel_path(file), "cross_lane", &k), 0);
                cr_assert_eq((k.code_properties >> 10) & 1, lanes == 32, "%s: ENABLE_WAVEFRONT_SIZE32", file);
                uint64_t iv = isa_mem_alloc(&m, 4 * n, (void **) &in), ov = isa_mem_alloc(&m, 96 * n, (void **) &out);
                for (uint32_t i = 0; i < n; i++)
                        in[i] = rnd() % 5 == 0 ? rnd() % 64 : rnd();
                isa_args_u64(&a, iv), isa_args_u64(&a, ov);
                uint32_t grid[3] = { groups, 1, 1 }, wgs[3] = { wg, 1, 1 };
                int r = isa_launch(&m, &k, grid, wgs, &a, 10000000, &res);
                cr_assert_eq(r, 0, "%s wg %u: %s", file, wg, res.message);

                for (uint32_t g = 0; g < groups; g++)
                        for (uint32_t w0 = 0; w0 < wg; w0 += lanes) {
                                uint32_t v[MAX_WAVE] = { 0 }, e[MAX_WAVE][24], live = wg - w0 < lanes ? wg - w0 : lanes;
                                uint64_t exec = live == 64 ? ~0ull : (1ull << live) - 1;
                                for (unsigned l = 0; l < live; l++)
                                        v[l] = in[g * wg + w0 + l];
                                ref_wave(v, exec, lanes, e);
                                for (unsigned l = 0; l < live; l++)
                                        for (unsigned j = 0; j < 24; j++) {
                                                if (j == 16 && live <= 3)
                                                        continue;       /* broadcast of an inactive lane */
                                                uint32_t got = out[24 * (g * wg + w0 + l) + j];
                                                cr_assert_eq(got, e[l][j], "%s wg %u group %u lane %u word %u: %#x, expected %#x",
                                                             file, wg, g, w0 + l, j, got, e[l][j]);
                                        }
                        }
                isa_mem_fini(&m);
        }
}

Test(isa_cross_lane, kernel_matches_reference) {
        /* Workgroup sizes: whole waves, a last wave of 16, 8 and 1 lanes, one tiny wave. */
        static const uint32_t shapes[][2] = { { 4, 32 }, { 2, 64 }, { 3, 48 }, { 2, 40 }, { 2, 33 }, { 5, 4 } };
        check_kernel("cross-lane.hsaco", 32, shapes, sizeof(shapes) / sizeof(shapes[0]));
}

/* The same kernel built for wave64: DPP over four rows, permlanex16 pairing
 * rows 2 and 3, ds_(b)permute within each half, and the device library's
 * sub-group reductions combining the halves with v_readlane. */
Test(isa_cross_lane, wave64_kernel_matches_reference) {
        static const uint32_t shapes[][2] = { { 2, 64 }, { 2, 128 }, { 3, 96 }, { 2, 100 }, { 2, 33 }, { 3, 4 } };
        cr_assert_gt(isa_objdump_count("cross-lane-w64.hsaco", "v_readlane_b32"), 0);
        cr_assert_gt(isa_objdump_count("cross-lane-w64.hsaco", "exec, exec, s["), 0, "64-bit EXEC");
        check_kernel("cross-lane-w64.hsaco", 64, shapes, sizeof(shapes) / sizeof(shapes[0]));
}

/* Runs one wave32 of hand-assembled code (encodings from llvm-mc-15
 * -mcpu=gfx1030 -show-encoding) between a prologue that sets v1 = 16 * lane + 1,
 * v2 = 0x700 + lane, v5 = OLD + lane and EXEC = exec, and an epilogue that
 * stores v5 of every lane; returns the stored words in ret. */
static int run_asm(const uint32_t *code, size_t n, uint32_t exec, uint32_t *ret, SimIsaResult *res) {
        static const uint32_t pro[] = {
                0x34060082,                     /* v_lshlrev_b32 v3, 2, v0 (v0 = lane) */
                0x34020084,                     /* v_lshlrev_b32 v1, 4, v0 */
                0x4a020281,                     /* v_add_nc_u32 v1, 1, v1 */
                0x4a0400ff, 0x00000700,         /* v_add_nc_u32 v2, 0x700, v0 */
                0x4a0a00ff, OLD,                /* v_add_nc_u32 v5, OLD, v0 */
                0xbefe03ff,                     /* s_mov_b32 exec_lo, <literal> */
        };
        static const uint32_t epi[] = {
                0xbefe03c1,                     /* s_mov_b32 exec_lo, -1 */
                0xdc708000, 0x00000503,         /* global_store_dword v3, v5, s[0:1] */
                0xbf810000,                     /* s_endpgm */
        };
        IsaMem m;
        uint32_t *p, *out, k = 0;

        isa_mem_init(&m);
        uint64_t ov = isa_mem_alloc(&m, 4 * WAVE, (void **) &out);
        p = isa_mem_map(&m, 0x200000, 4096);
        memcpy(p, pro, sizeof(pro)), k += sizeof(pro) / 4;
        p[k++] = exec;
        memcpy(p + k, code, 4 * n), k += (uint32_t) n;
        memcpy(p + k, epi, sizeof(epi));
        SimIsaDispatch d = { .entry_va = 0x200000, .grid = { 1, 1, 1 }, .wg_size = { WAVE, 1, 1 }, .wave32 = true,
                             .rsrc2 = 2 << 1 };
        d.user_sgpr[0] = (uint32_t) ov, d.user_sgpr[1] = (uint32_t) (ov >> 32);
        int r = sim_isa_dispatch(&d, &m.mem, 1000, res);
        memcpy(ret, out, 4 * WAVE);
        isa_mem_fini(&m);
        return r;
}

static uint32_t v1_of(unsigned l) {
        return 16 * l + 1;
}

/* FI: with it, a shifted-in inactive lane's value is read; without it the
 * destination keeps its value. Lanes past the row stay unwritten either way. */
Test(isa_cross_lane, dpp16_fetch_inactive) {
        static const uint32_t fi[] = { 0x7e0a02fa, 0xff050101 }, nofi[] = { 0x7e0a02fa, 0xff010101 };
        uint32_t exec = 0xffffu & ~(1u << 5), got[WAVE];
        SimIsaResult res;

        for (int with_fi = 0; with_fi < 2; with_fi++) {
                cr_assert_eq(run_asm(with_fi ? fi : nofi, 2, exec, got, &res), 0, "%s", res.message);
                for (unsigned l = 0; l < WAVE; l++) {
                        uint32_t e = OLD + l;
                        if (on(exec, l) && (l & 15) != 15 && (with_fi || on(exec, l + 1)))
                                e = v1_of(l + 1);
                        cr_assert_eq(got[l], e, "fi=%d lane %u: %#x, expected %#x", with_fi, l, got[l], e);
                }
        }
}

/* A VOP2 with row_mask/bank_mask: lanes of masked rows and banks keep v5. */
Test(isa_cross_lane, dpp16_masks_on_vop2) {
        static const uint32_t code[] = { 0x4a0a04fa, 0x2a016301 };     /* v_add_nc_u32_dpp v5, v1, v2 row_xmask:3 row_mask:2 bank_mask:0xa */
        uint32_t got[WAVE];
        SimIsaResult res;

        cr_assert_eq(run_asm(code, 2, ~0u, got, &res), 0, "%s", res.message);
        for (unsigned l = 0; l < WAVE; l++) {
                bool written = l >= 16 && ((l / 4) & 1);
                uint32_t e = written ? v1_of((l & ~15u) | ((l & 15) ^ 3)) + 0x700 + l : OLD + l;
                cr_assert_eq(got[l], e, "lane %u: %#x, expected %#x", l, got[l], e);
        }
}

/* src0_neg and src1_abs of the DPP16 word on a float op. */
Test(isa_cross_lane, dpp16_float_modifiers) {
        static const uint32_t code[] = { 0x060a04fa, 0xff90b101 };     /* v_add_f32_dpp v5, -v1, |v2| quad_perm:[1,0,3,2] */
        uint32_t got[WAVE];
        SimIsaResult res;

        cr_assert_eq(run_asm(code, 2, ~0u, got, &res), 0, "%s", res.message);
        for (unsigned l = 0; l < WAVE; l++) {
                float e = -u2f_(v1_of(l ^ 1)) + u2f_(0x700 + l);
                uint32_t eb;
                memcpy(&eb, &e, 4);
                cr_assert_eq(got[l], eb, "lane %u: %#x, expected %#x", l, got[l], eb);
        }
}

/* DPP8 reads 0 from an inactive lane, or its value with FI (src0 field 0xea). */
Test(isa_cross_lane, dpp8_fetch_inactive) {
        static const uint32_t fi[] = { 0x7e0a02ea, 0xde54c101 }, nofi[] = { 0x7e0a02e9, 0xde54c101 };
        uint32_t exec = ~0u & ~(1u << 1) & ~(1u << 30), got[WAVE];
        SimIsaResult res;

        for (int with_fi = 0; with_fi < 2; with_fi++) {
                cr_assert_eq(run_asm(with_fi ? fi : nofi, 2, exec, got, &res), 0, "%s", res.message);
                for (unsigned l = 0; l < WAVE; l++) {
                        uint32_t e = !on(exec, l) ? OLD + l : (with_fi || on(exec, l ^ 1)) ? v1_of(l ^ 1) : 0;
                        cr_assert_eq(got[l], e, "fi=%d lane %u: %#x, expected %#x", with_fi, l, got[l], e);
                }
        }
}

/* v_permlane16_b32 op_sel:[1,0] (FI) reads inactive lanes; without it they leave v5 alone. */
Test(isa_cross_lane, permlane16_fetch_inactive) {
        static const uint32_t fi[] = { 0xbe8203ff, 0x01234567, 0xbe8303ff, 0x89abcdef, 0xd7770805, 0x000c0501 },
                              nofi[] = { 0xbe8203ff, 0x01234567, 0xbe8303ff, 0x89abcdef, 0xd7770005, 0x000c0501 };
        uint32_t exec = ~0u & ~(1u << 7) & ~(1u << 24), got[WAVE];
        SimIsaResult res;

        for (int with_fi = 0; with_fi < 2; with_fi++) {
                cr_assert_eq(run_asm(with_fi ? fi : nofi, 6, exec, got, &res), 0, "%s", res.message);
                for (unsigned l = 0; l < WAVE; l++) {
                        unsigned i = l & 15, from = (l & ~15u) | (i < 8 ? 7 - i : 23 - i);
                        uint32_t e = !on(exec, l) ? OLD + l : (with_fi || on(exec, from)) ? v1_of(from) : OLD + l;
                        cr_assert_eq(got[l], e, "fi=%d lane %u: %#x, expected %#x", with_fi, l, got[l], e);
                }
        }
}

/* gfx9's wave_shl/row_bcast controls do not exist on gfx10: refused, named. */
Test(isa_cross_lane, gfx9_dpp_control_refused) {
        static const uint32_t code[] = { 0x7e0a02fa, 0xff013001 };     /* v_mov_b32_dpp v5, v1 wave_shl:1 (gfx9) */
        uint32_t got[WAVE];
        SimIsaResult res;

        cr_assert_eq(run_asm(code, 2, ~0u, got, &res), -EILSEQ);
        cr_assert(strstr(res.message, "v_mov_b32_dpp"), "message: %s", res.message);
}

/* ds_swizzle_b32's source lane for lane l of a wave32, from the offset's
 * definition (LLVM SIDefines.h Swizzle and AMDGPUModifierSyntax.rst "swizzle
 * pattern"): quad permute at 0x8000-0x80ff, else and/or/xor masks. */
static unsigned swizzle_src(uint32_t offset, unsigned l) {
        if (offset & 0x8000)
                return (l & ~3u) | ((offset >> (2 * (l & 3))) & 3);
        return ((l & (offset & 31)) | ((offset >> 5) & 31)) ^ ((offset >> 10) & 31);
}

/* Every mode LLVM names, encodings from llvm-mc-15 -mcpu=gfx1030; an inactive
 * source reads 0, an inactive lane keeps v5; then s_waitcnt and the store. */
Test(isa_cross_lane, ds_swizzle_modes) {
        static const struct {
                uint32_t w0;
                const char *what;
        } forms[] = {
                { 0xd8d4041f, "swizzle(SWAP,1)" },
                { 0xd8d401e0, "swizzle(BROADCAST,32,15) (rocPRIM's, in rocSPARSE's csr2csc)" },
                { 0xd8d4801b, "swizzle(QUAD_PERM,3,2,1,0)" },
                { 0xd8d4800b, "swizzle(QUAD_PERM,3,2,0,0)" },
                { 0xd8d40906, "swizzle(BITMASK_PERM,\"01pi0\")" },
                { 0xd8d47c1f, "swizzle(REVERSE,32)" },
        };
        uint32_t exec = ~0u & ~(1u << 15) & ~(1u << 9) & ~(1u << 2), got[WAVE];
        SimIsaResult res;

        for (size_t f = 0; f < sizeof(forms) / sizeof(forms[0]); f++) {
                uint32_t code[] = { forms[f].w0, 0x05000001, 0xbf8cc07f };  /* ds_swizzle_b32 v5, v1 ...; s_waitcnt lgkmcnt(0) */
                cr_assert_eq(run_asm(code, 3, exec, got, &res), 0, "%s: %s", forms[f].what, res.message);
                for (unsigned l = 0; l < WAVE; l++) {
                        unsigned from = swizzle_src(forms[f].w0 & 0xffff, l);
                        uint32_t e = !on(exec, l) ? OLD + l : on(exec, from) ? v1_of(from) : 0;
                        cr_assert_eq(got[l], e, "%s lane %u (from %u): %#x, expected %#x", forms[f].what, l, from,
                                     got[l], e);
                }
        }
}

/* The rotate and FFT modes (gfx9 and later, per LLVM) are refused, named. */
Test(isa_cross_lane, ds_swizzle_rotate_refused) {
        static const uint32_t code[] = { 0xd8d4c000, 0x05000001, 0xbf8cc07f };  /* ds_swizzle_b32 v5, v1 offset:0xc000 */
        uint32_t got[WAVE];
        SimIsaResult res;

        cr_assert_eq(run_asm(code, 3, ~0u, got, &res), -EILSEQ);
        cr_assert(strstr(res.message, "unsupported form of instruction ds_swizzle_b32"), "message: %s", res.message);
}
