/* SPDX-License-Identifier: MIT */
/*
 * Wave64 on the RDNA2 interpreter: corpus kernels built with
 * -mwavefrontsize64 (tests/kernels/meson.build, <name>-w64.hsaco) run on
 * 64-lane waves against the same CPU references as their wave32 builds —
 * vector add and saxpy over partial waves, an LDS reduction with barriers
 * over several waves, a private array in scratch (the V#'s INDEX_STRIDE 64) —
 * and hand-assembled checks of the 64-bit EXEC/VCC (the _b64 saveexec forms,
 * a compare into an SGPR pair, v_readlane of an upper lane, v_mbcnt_hi).
 * The cross-lane kernel's wave64 build is in test-isa-cross-lane.c.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "isa-helper.h"

static uint32_t rng_state = 99;
static uint32_t rnd(void) {
        rng_state = rng_state * 1664525u + 1013904223u;
        return rng_state >> 8;
}

static void load64(IsaMem *m, const char *file, const char *name, IsaKernel *k) {
        isa_mem_init(m);
        cr_assert_eq(isa_kernel_load(m, isa_kernel_path(file), name, k), 0, "loading %s", file);
        cr_assert_eq((k->code_properties >> 10) & 1, 0, "%s is wave64 (ENABLE_WAVEFRONT_SIZE32 clear)", file);
}

Test(isa_wave64, kernels_use_64_bit_masks) {
        /* Wave64 code keeps EXEC and VCC in SGPR pairs. */
        cr_assert_gt(isa_objdump_count("vector-add-w64.hsaco", "s_mov_b64 s[0:1], exec"), 0, "EXEC saved as a pair");
        cr_assert_gt(isa_objdump_count("reduce-lds-w64.hsaco", "s_barrier"), 0);
        cr_assert_gt(isa_objdump_count("reduce-lds-w64.hsaco", "ds_"), 0);
        cr_assert_gt(isa_objdump_count("private-array-w64.hsaco", "buffer_store_dword"), 0, "scratch through the V#");
}

Test(isa_wave64, vector_add_and_saxpy) {
        static const uint32_t shapes[][2] = { { 1, 64 }, { 100, 64 }, { 1000, 256 }, { 77, 48 }, { 200, 96 }, { 33, 1 } };
        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t n = shapes[t][0], wg = shapes[t][1];
                uint32_t grid[3] = { (n + wg - 1) / wg, 1, 1 }, wgs[3] = { wg, 1, 1 };
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                float *x, *y, *z;

                load64(&m, "vector-add-w64.hsaco", "vector_add", &k);
                uint64_t xv = isa_mem_alloc(&m, 4 * n, (void **) &x), yv = isa_mem_alloc(&m, 4 * n, (void **) &y),
                         zv = isa_mem_alloc(&m, 4 * n + 4, (void **) &z);
                for (uint32_t i = 0; i < n; i++)
                        x[i] = (float) i * 0.5f, y[i] = (float) (rnd() % 1000) - 3.25f;
                z[n] = 1234.0f;
                isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, zv), isa_args_u32(&a, n);
                cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 10000000, &res), 0, "%s", res.message);
                for (uint32_t i = 0; i < n; i++)
                        cr_assert_eq(z[i], x[i] + y[i], "n=%u wg=%u i=%u", n, wg, i);
                cr_assert_eq(z[n], 1234.0f, "the guard let a work-item past n write");
                isa_mem_fini(&m);

                IsaArgs b = { 0 };
                load64(&m, "saxpy-w64.hsaco", "saxpy", &k);
                xv = isa_mem_alloc(&m, 4 * n, (void **) &x), yv = isa_mem_alloc(&m, 4 * n, (void **) &y);
                float *ref = malloc(4 * n);
                for (uint32_t i = 0; i < n; i++) {
                        x[i] = (float) (rnd() % 2000) / 7.0f - 100.0f;
                        y[i] = (float) (rnd() % 2000) / 3.0f;
                        ref[i] = fmaf(2.5f, x[i], y[i]);
                }
                isa_args_f32(&b, 2.5f), isa_args_u64(&b, xv), isa_args_u64(&b, yv), isa_args_u32(&b, n);
                cr_assert_eq(isa_launch(&m, &k, grid, wgs, &b, 10000000, &res), 0, "%s", res.message);
                for (uint32_t i = 0; i < n; i++)
                        cr_assert_eq(y[i], ref[i], "saxpy n=%u wg=%u i=%u", n, wg, i);
                free(ref);
                isa_mem_fini(&m);
        }
}

/* Workgroups of several 64-lane waves meet at s_barrier around LDS. */
Test(isa_wave64, lds_reduction_with_barriers) {
        /* reduce_lds halves the workgroup size: powers of two, at most its 256 LDS slots. */
        static const uint32_t shapes[][2] = { { 1, 64 }, { 1000, 256 }, { 4097, 128 }, { 300, 256 }, { 64, 2 }, { 500, 4 } };
        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t n = shapes[t][0], wg = shapes[t][1], groups = (n + wg - 1) / wg, *in, *out;
                uint32_t grid[3] = { groups, 1, 1 }, wgs[3] = { wg, 1, 1 };
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;

                load64(&m, "reduce-lds-w64.hsaco", "reduce_lds", &k);
                uint64_t iv = isa_mem_alloc(&m, 4 * n, (void **) &in), ov = isa_mem_alloc(&m, 4 * groups, (void **) &out);
                for (uint32_t i = 0; i < n; i++)
                        in[i] = rnd() % 1000;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, n);
                cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 100000000, &res), 0, "%s", res.message);
                for (uint32_t g = 0; g < groups; g++) {
                        uint32_t e = 0;
                        for (uint32_t i = g * wg; i < (g + 1) * wg && i < n; i++)
                                e += in[i];
                        cr_assert_eq(out[g], e, "n=%u wg=%u group %u: %u != %u", n, wg, g, out[g], e);
                }
                isa_mem_fini(&m);
        }
}

/* Scratch of 64-lane waves: lanes 32-63 must not alias lanes 0-31. */
Test(isa_wave64, private_array_in_scratch) {
        static const uint32_t shapes[][2] = { { 64, 64 }, { 1000, 256 }, { 77, 48 }, { 130, 128 } };
        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t n = shapes[t][0], wg = shapes[t][1], *in, *out;
                uint32_t grid[3] = { (n + wg - 1) / wg, 1, 1 }, wgs[3] = { wg, 1, 1 };
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;

                load64(&m, "private-array-w64.hsaco", "private_array", &k);
                cr_assert(k.rsrc2 & 1, "SCRATCH_EN");
                uint64_t iv = isa_mem_alloc(&m, 4 * n, (void **) &in), ov = isa_mem_alloc(&m, 4 * n, (void **) &out);
                for (uint32_t i = 0; i < n; i++)
                        in[i] = rnd() % 100000;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, n);
                cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 100000000, &res), 0, "%s", res.message);
                for (uint32_t i = 0; i < n; i++) {
                        uint32_t v = in[i], acc = 0;
                        for (uint32_t j = 0; j < 16; j++)
                                acc += v * ((v + j * 7) & 63) + i;
                        cr_assert_eq(out[i], acc, "n=%u wg=%u i=%u: %u != %u", n, wg, i, out[i], acc);
                }
                isa_mem_fini(&m);
        }
}

/* One wave64 of hand-assembled code (llvm-mc-15 -mcpu=gfx1030
 * -mattr=+wavefrontsize64 -show-encoding) that stores v5 of all 64 lanes. */
static void run64(const uint32_t *code, size_t n, uint32_t *ret) {
        static const uint32_t epi[] = {
                0xbefe04c1,                     /* s_mov_b64 exec, -1 */
                0x340c0082,                     /* v_lshlrev_b32 v6, 2, v0 */
                0xdc708000, 0x00000506,         /* global_store_dword v6, v5, s[0:1] */
                0xbf810000,                     /* s_endpgm */
        };
        IsaMem m;
        SimIsaResult res;
        uint32_t *p, *out;

        isa_mem_init(&m);
        uint64_t ov = isa_mem_alloc(&m, 4 * 64, (void **) &out);
        p = isa_mem_map(&m, 0x200000, 4096);
        memcpy(p, code, 4 * n);
        memcpy(p + n, epi, sizeof(epi));
        SimIsaDispatch d = { .entry_va = 0x200000, .grid = { 1, 1, 1 }, .wg_size = { 64, 1, 1 }, .wave32 = false,
                             .rsrc2 = 2 << 1 };
        d.user_sgpr[0] = (uint32_t) ov, d.user_sgpr[1] = (uint32_t) (ov >> 32);
        cr_assert_eq(sim_isa_dispatch(&d, &m.mem, 1000, &res), 0, "%s", res.message);
        memcpy(ret, out, 4 * 64);
        isa_mem_fini(&m);
}

/* v_cmp into VCC (a pair in wave64), v_cndmask reading all 64 bits, and
 * s_and_saveexec_b64 / s_or_b64 exec around a lane-dependent branch. */
Test(isa_wave64, vcc_and_exec_are_64_bits) {
        static const uint32_t code[] = {
                0x7d8800ac,                     /* v_cmp_gt_u32_e32 vcc, 44, v0 (lanes 0..43) */
                0xd501000a, 0x01a90280,         /* v_cndmask_b32_e64 v10, 0, 1, vcc */
                0x7d8200a7,                     /* v_cmp_lt_u32_e32 vcc, 39, v0 (lanes 40..63) */
                0xbe82246a,                     /* s_and_saveexec_b64 s[2:3], vcc */
                0x7e0a02ff, 0x00000100,         /* v_mov_b32 v5, 0x100 (lanes 40..63 only) */
                0x88fe027e,                     /* s_or_b64 exec, exec, s[2:3] */
                0x4a0a0b0a,                     /* v_add_nc_u32 v5, v10, v5 */
        };
        uint32_t got[64];

        run64(code, sizeof(code) / 4, got);
        for (unsigned l = 0; l < 64; l++) {
                uint32_t e = (l < 44 ? 1u : 0u) + (l >= 40 ? 0x100u : 0u);
                cr_assert_eq(got[l], e, "lane %u: %#x, expected %#x", l, got[l], e);
        }
}

/* v_mbcnt_lo/hi over a 64-bit mask give each lane its rank; v_readlane
 * reaches lane 50; EXEC_HI counts. */
Test(isa_wave64, mbcnt_and_readlane_see_the_upper_half) {
        static const uint32_t code[] = {
                0xd7650005, 0x000100c1,         /* v_mbcnt_lo_u32_b32 v5, -1, 0 */
                0xd7660005, 0x00020ac1,         /* v_mbcnt_hi_u32_b32 v5, -1, v5 */
                0xd7600004, 0x00016505,         /* v_readlane_b32 s4, v5, 50 */
                0x4a0a0a04,                     /* v_add_nc_u32 v5, s4, v5 */
        };
        uint32_t got[64];

        run64(code, sizeof(code) / 4, got);
        for (unsigned l = 0; l < 64; l++)
                cr_assert_eq(got[l], l + 50, "lane %u: %u", l, got[l]);
}
