/* SPDX-License-Identifier: MIT */
/*
 * 16-bit arithmetic on the RDNA2 interpreter: tests/kernels/half-math.cl
 * (scalar half: VOP2/VOP1/VOP3 f16 operations, f16 compares and classes,
 * conversions) and half2-math.cl (VOP3P packed f16 and i16/u16 math with
 * op_sel/op_sel_hi/neg_lo/neg_hi, v_fma_mix_f32) against CPU references:
 * each operation rounded once from an exact value (double, or quad precision
 * for fused multiply-adds), inputs covering zeros, denormals, infinities,
 * NaNs, overflow and random bit patterns. Plus hand-assembled programs for
 * what the kernels leave out: VOP3 op_sel on f16 operations, MODE's denormal
 * flushing, 16-bit compares with op_sel, the high half kept by 16-bit
 * results.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <quadmath.h>
#include <string.h>

#include "isa-helper.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        return (uint32_t) (rng >> 16);
}

/* Halves as bit patterns; values as doubles (exact). */
static double hd(uint16_t u) {
        _Float16 h;
        memcpy(&h, &u, 2);
        return (double) h;
}
static uint16_t dh(double d) {
        _Float16 h = (_Float16) d;
        uint16_t u;
        memcpy(&u, &h, 2);
        return u;
}
/* fma rounded once: the quad sum of a half product (22 bits) and a half is exact. */
static uint16_t fmah(uint16_t a, uint16_t b, uint16_t c) {
        __float128 q = (__float128) hd(a) * (__float128) hd(b) + (__float128) hd(c);
        _Float16 h = (_Float16) q;
        uint16_t u;
        memcpy(&u, &h, 2);
        return u;
}
static bool isnan_h(uint16_t u) {
        return (u & 0x7c00) == 0x7c00 && (u & 0x3ff);
}
/* Same value, or both NaN (NaN payloads are the host's, not the hardware's). */
static bool same_h(uint16_t a, uint16_t b) {
        return a == b || (isnan_h(a) && isnan_h(b));
}
/* IEEE minNum/maxNum with -0 below +0, the VALU's choice. */
static double minh(double a, double b) {
        if (isnan(a))
                return b;
        if (isnan(b))
                return a;
        if (a == b)
                return signbit(a) ? a : b;
        return a < b ? a : b;
}
static double maxh(double a, double b) {
        if (isnan(a))
                return b;
        if (isnan(b))
                return a;
        if (a == b)
                return signbit(a) ? b : a;
        return a > b ? a : b;
}

/* Interesting halves first: zeros, denormals, normal limits, infinities, NaN, near-overflow. */
static const uint16_t special[] = {
        0x0000, 0x8000, 0x0001, 0x83ff, 0x0400, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x3c00, 0xbc00, 0x3555,
        0x5bf0, 0x7800, 0x0200, 0x3e00, 0xc500,
};
#define NSPECIAL (sizeof(special) / sizeof(special[0]))

static uint16_t pick(uint32_t i, unsigned which) {
        if (i < NSPECIAL * NSPECIAL) {
                unsigned k = which == 0 ? i % NSPECIAL : which == 1 ? i / NSPECIAL : (i * 7) % NSPECIAL;
                return special[k];
        }
        uint32_t r = rnd();
        /* Mostly moderate exponents (rounding at work), some anything. */
        return r % 4 ? (uint16_t) ((r & 0x83ff) | ((10 + (r >> 16) % 12) << 10)) : (uint16_t) r;
}

/* x / y as half-math.cl compiles it: v_rcp_f32 and v_mul_f32 on the f32
 * values, v_cvt_f16_f32, then v_div_fixup_f16's IEEE special cases. */
static uint16_t div_ref(uint16_t xh, uint16_t yh) {
        double x = hd(xh), y = hd(yh);
        bool neg = signbit(x) != signbit(y);
        if (isnan(x) || isnan(y) || (x == 0 && y == 0) || (isinf(x) && isinf(y)))
                return 0x7e00;
        if (y == 0 || isinf(x))
                return neg ? 0xfc00 : 0x7c00;
        if (isinf(y) || x == 0)
                return neg ? 0x8000 : 0;
        float q = (float) x * (1.0f / (float) y);
        uint16_t h = dh(q);
        return (uint16_t) ((h & 0x7fff) | (neg ? 0x8000 : 0));
}

/* convert_short_sat as clang-15 compiles it for a half: v_med3_f16(v, -65504,
 * 65504), v_cvt_i16_f16, then selects for the out-of-range values. A NaN
 * goes through v_med3_f16, which the ISA defines as v_min3_f16 when an input
 * is NaN, i.e. the lower bound: -32768, where OpenCL wants 0 (the
 * compiler's selects are skipped for NaN; they assume v_med3 passes it on). */
static int16_t sat_short(double v) {
        if (isnan(v))
                return -32768;
        v = trunc(v);
        return (int16_t) (v < -32768.0 ? -32768.0 : v > 32767.0 ? 32767.0 : v);
}

Test(isa_half, kernels_use_the_instructions) {
        static const char *const scalar[] = {
                "v_add_f16", "v_sub_f16", "v_mul_f16", "v_fmaak_f16", "v_max_f16", "v_min_f16", "v_ldexp_f16",
                "v_sqrt_f16", "v_floor_f16", "v_ceil_f16", "v_trunc_f16", "v_rndne_f16", "v_div_fixup_f16",
                "v_cvt_f16_f32", "v_cvt_f32_f16", "v_cvt_f16_i16", "v_cvt_i16_f16", "v_med3_f16", "v_mad_u16",
                "v_cmp_lt_f16", "v_cmp_neq_f16", "v_cmp_u_f16", "v_cmp_o_f16", "v_cmp_class_f16", "v_pk_fma_f16",
        };
        static const char *const packed[] = {
                "v_pk_add_f16", "v_pk_mul_f16", "v_pk_fma_f16", "v_pk_min_f16", "v_pk_max_f16", "v_pk_add_u16",
                "v_pk_mul_lo_u16", "v_pk_ashrrev_i16", "v_pk_lshlrev_b16", "v_pk_max_i16", "v_pk_min_i16",
                "v_fma_mix_f32", "op_sel:[0,1,0]", "op_sel_hi:[1,0,1]", "neg_lo:[1,0,0] neg_hi:[1,0,0]",
                "neg_lo:[0,0,1]",
        };
        for (size_t i = 0; i < sizeof(scalar) / sizeof(scalar[0]); i++)
                cr_assert_gt(isa_objdump_count("half-math.hsaco", scalar[i]), 0, "half-math.cl lost %s", scalar[i]);
        for (size_t i = 0; i < sizeof(packed) / sizeof(packed[0]); i++)
                cr_assert_gt(isa_objdump_count("half2-math.hsaco", packed[i]), 0, "half2-math.cl lost %s", packed[i]);
}

Test(isa_half, scalar_half_matches_reference) {
        const uint32_t n = 2048;
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        uint16_t *x, *y, *z, *out;
        int16_t *iout;
        uint32_t *flags;

        isa_mem_init(&m);
        cr_assert_eq(isa_kernel_load(&m, isa_kernel_path("half-math.hsaco"), "half_math", &k), 0);
        cr_assert_eq((k.rsrc1 >> 18) & 3, 3, "the descriptor keeps f16 denormals");
        uint64_t xv = isa_mem_alloc(&m, 2 * n, (void **) &x), yv = isa_mem_alloc(&m, 2 * n, (void **) &y),
                 zv = isa_mem_alloc(&m, 2 * n, (void **) &z), ov = isa_mem_alloc(&m, 32 * n, (void **) &out),
                 iv = isa_mem_alloc(&m, 4 * n, (void **) &iout), fv = isa_mem_alloc(&m, 4 * n, (void **) &flags);
        for (uint32_t i = 0; i < n; i++)
                x[i] = pick(i, 0), y[i] = pick(i, 1), z[i] = pick(i, 2);
        isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, zv);
        isa_args_u64(&a, ov), isa_args_u64(&a, iv), isa_args_u64(&a, fv);
        uint32_t grid[3] = { n / 64, 1, 1 }, wg[3] = { 64, 1, 1 };
        cr_assert_eq(isa_launch(&m, &k, grid, wg, &a, 10000000, &res), 0, "%s", res.message);

        for (uint32_t i = 0; i < n; i++) {
                double X = hd(x[i]), Y = hd(y[i]), Z = hd(z[i]);
                uint16_t e[16];
                e[0] = dh(X + Y);
                e[1] = dh(X - Y);
                e[2] = dh(X * Y);
                e[3] = fmah(x[i], y[i], z[i]);
                e[4] = fmah(x[i], 0x3e00, z[i]);
                e[5] = fmah(x[i], y[i], 0xba00);
                e[6] = dh(minh(X, Y));
                e[7] = dh(maxh(X, Z));
                e[8] = div_ref(x[i], y[i]);
                e[9] = dh(sqrt(X));
                e[10] = dh(floor(X) + ceil(Y));
                e[11] = dh(trunc(X) - nearbyint(Y));
                e[12] = dh(ldexp(X, (int) (i % 19) - 9));
                e[13] = dh((float) X * 0.375f);
                e[14] = dh((double) (int16_t) (uint16_t) (i * 977 - 30000));
                e[15] = dh(fabs(X) * -Y);
                for (unsigned j = 0; j < 16; j++)
                        cr_assert(same_h(out[16 * i + j], e[j]), "i=%u op %u x=%#06x y=%#06x z=%#06x: %#06x, expected %#06x",
                                  i, j, x[i], y[i], z[i], out[16 * i + j], e[j]);
                uint16_t m64 = dh(X * 64.0);
                cr_assert_eq(iout[2 * i], sat_short(hd(m64)), "i=%u convert_short_sat(%a): %d", i, hd(m64), iout[2 * i]);
                cr_assert(same_h((uint16_t) iout[2 * i + 1], dh(X * Y)), "i=%u", i);
                uint32_t ef = (X < Y) | (X <= Y) << 1 | (X == Y) << 2 | (X != Y) << 3 | (X > Y) << 4 | (X >= Y) << 5 |
                              (uint32_t) isnan(X) << 6 | (uint32_t) (isinf(Y) != 0) << 7 |
                              (uint32_t) (!isnan(X) && !isnan(Y)) << 8 | (uint32_t) (isnan(X) || isnan(Z)) << 9;
                cr_assert_eq(flags[i], ef, "i=%u compares of %#06x %#06x %#06x: %#x, expected %#x", i, x[i], y[i], z[i],
                             flags[i], ef);
        }
        isa_mem_fini(&m);
}

Test(isa_half, packed_half2_matches_reference) {
        const uint32_t n = 2048;
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        uint16_t *x, *y, *z, *out;
        int16_t *s, *sout;
        float *f, *fout;

        isa_mem_init(&m);
        cr_assert_eq(isa_kernel_load(&m, isa_kernel_path("half2-math.hsaco"), "half2_math", &k), 0);
        uint64_t xv = isa_mem_alloc(&m, 4 * n, (void **) &x), yv = isa_mem_alloc(&m, 4 * n, (void **) &y),
                 zv = isa_mem_alloc(&m, 4 * n, (void **) &z), ov = isa_mem_alloc(&m, 32 * n, (void **) &out),
                 sv = isa_mem_alloc(&m, 4 * n + 4, (void **) &s), sov = isa_mem_alloc(&m, 12 * n, (void **) &sout),
                 fv = isa_mem_alloc(&m, 4 * n, (void **) &f), fov = isa_mem_alloc(&m, 8 * n, (void **) &fout);
        for (uint32_t i = 0; i < n; i++) {
                x[2 * i] = pick(i, 0), y[2 * i] = pick(i, 1), z[2 * i] = pick(i, 2);
                x[2 * i + 1] = pick(n - 1 - i, 1), y[2 * i + 1] = pick(n - 1 - i, 2), z[2 * i + 1] = pick(n - 1 - i, 0);
                s[2 * i] = (int16_t) rnd(), s[2 * i + 1] = (int16_t) rnd();
                uint32_t fb = rnd() ^ rnd() << 16;
                memcpy(&f[i], &fb, 4);
        }
        s[2 * n] = 77, s[2 * n + 1] = -5;
        isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, zv), isa_args_u64(&a, ov);
        isa_args_u64(&a, sv), isa_args_u64(&a, sov), isa_args_u64(&a, fv), isa_args_u64(&a, fov);
        uint32_t grid[3] = { n / 64, 1, 1 }, wg[3] = { 64, 1, 1 };
        cr_assert_eq(isa_launch(&m, &k, grid, wg, &a, 10000000, &res), 0, "%s", res.message);

        for (uint32_t i = 0; i < n; i++) {
                const uint16_t *X = &x[2 * i], *Y = &y[2 * i], *Z = &z[2 * i];
                uint16_t e[16];
                for (unsigned c = 0; c < 2; c++) {
                        double xc = hd(X[c]), yc = hd(Y[c]), zc = hd(Z[c]);
                        e[0 + c] = dh(xc + yc);
                        e[2 + c] = dh(hd(dh(xc * yc)) - zc);
                        e[4 + c] = fmah(X[c], Y[1 - c], Z[c]);
                        e[6 + c] = fmah(X[c] ^ 0x8000, Y[c], c ? 0xc000 : 0x3e00);
                        e[8 + c] = dh(hd(dh(minh(xc, yc))) + hd(dh(maxh(-xc, hd(Z[1 - c])))));
                        e[10 + c] = dh(hd(c ? Y[0] : X[1]) * 0.5);
                        e[12 + c] = dh(hd(X[0]) + hd(Y[1]));
                        e[14 + c] = fmah(X[c], 0x4000, Y[c] ^ 0x8000);
                }
                for (unsigned j = 0; j < 16; j++)
                        cr_assert(same_h(out[16 * i + j], e[j]), "i=%u result %u.%c: %#06x, expected %#06x", i, j / 2,
                                  "xy"[j % 2], out[16 * i + j], e[j]);
                const int16_t *p = &s[2 * i], *q = &s[2 * i + 2];
                for (unsigned c = 0; c < 2; c++) {
                        int16_t sh = c ? 3 : 1, sl = c ? 1 : 2;
                        int16_t mx = p[c] > q[c] ? p[c] : q[c], pr = (int16_t) (p[c] >> sh), mn = pr < q[c] ? pr : q[c];
                        int16_t e0 = (int16_t) (p[c] + q[c]), e1 = (int16_t) (p[c] * q[c] - (c ? -7 : 3));
                        int16_t e2 = (int16_t) (mx + (int16_t) (uint16_t) ((uint16_t) mn << sl));
                        cr_assert_eq(sout[6 * i + c], e0, "i=%u p+q", i);
                        cr_assert_eq(sout[6 * i + 2 + c], e1, "i=%u p*q-k", i);
                        cr_assert_eq(sout[6 * i + 4 + c], e2, "i=%u max/min/shifts", i);
                }
                float e3 = fmaf((float) hd(X[0]), (float) hd(Y[1]), f[i]), e4 = fmaf((float) hd(X[1]), f[i], (float) hd(Z[0]));
                cr_assert(memcmp(&fout[2 * i], &e3, 4) == 0 || (isnan(e3) && isnan(fout[2 * i])), "i=%u mix: %a, expected %a",
                          i, fout[2 * i], e3);
                cr_assert(memcmp(&fout[2 * i + 1], &e4, 4) == 0 || (isnan(e4) && isnan(fout[2 * i + 1])),
                          "i=%u mix: %a, expected %a", i, fout[2 * i + 1], e4);
        }
        isa_mem_fini(&m);
}

/* Halves of registers loaded and stored alone: global_load_short_d16_hi,
 * ds_write_b16_d16_hi, ds_read_u16_d16_hi and global_store_short_d16_hi
 * keep the other half of the VGPR or take the upper one. */
Test(isa_half, d16_loads_and_stores) {
        static const char *const needles[] = {
                "global_load_short_d16_hi", "ds_write_b16_d16_hi", "ds_read_u16_d16_hi", "global_store_short_d16_hi",
        };
        for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++)
                cr_assert_gt(isa_objdump_count("d16.hsaco", needles[i]), 0, "d16.cl lost %s", needles[i]);

        static const uint32_t wgs_list[] = { 64, 32, 48 };
        for (size_t t = 0; t < sizeof(wgs_list) / sizeof(wgs_list[0]); t++) {
                uint32_t wg = wgs_list[t], groups = 4, n = groups * wg;
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;
                uint16_t *h, *h2out, *hout;
                uint8_t *u8;
                int8_t *s8;
                int16_t *s16, *s2out, *sout;

                isa_mem_init(&m);
                cr_assert_eq(isa_kernel_load(&m, isa_kernel_path("d16.hsaco"), "d16", &k), 0);
                uint64_t hv = isa_mem_alloc(&m, 2048, (void **) &h), uv = isa_mem_alloc(&m, 1024, (void **) &u8),
                         sv = isa_mem_alloc(&m, 1024, (void **) &s8), s16v = isa_mem_alloc(&m, 2048, (void **) &s16),
                         h2v = isa_mem_alloc(&m, 4 * n, (void **) &h2out), s2v = isa_mem_alloc(&m, 4 * n, (void **) &s2out),
                         hov = isa_mem_alloc(&m, 2 * n, (void **) &hout), sov = isa_mem_alloc(&m, 2 * n, (void **) &sout);
                for (uint32_t i = 0; i < 1024; i++) {
                        h[i] = pick(i + NSPECIAL * NSPECIAL, 0);
                        u8[i] = (uint8_t) rnd(), s8[i] = (int8_t) rnd(), s16[i] = (int16_t) rnd();
                }
                isa_args_u64(&a, hv), isa_args_u64(&a, uv), isa_args_u64(&a, sv), isa_args_u64(&a, s16v);
                isa_args_u64(&a, h2v), isa_args_u64(&a, s2v), isa_args_u64(&a, hov), isa_args_u64(&a, sov);
                uint32_t grid[3] = { groups, 1, 1 }, wgs[3] = { wg, 1, 1 };
                cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 10000000, &res), 0, "%s", res.message);
                for (uint32_t i = 0; i < n; i++) {
                        uint32_t l = i % wg, o = i - l + (l + 1) % wg;
                        uint16_t vx = dh(hd(h[i]) * 2.0), vy = dh(hd(h[(i * 7) & 1023]) * 0.5);
                        uint16_t vyo = dh(hd(h[(o * 7) & 1023]) * 0.5);
                        int16_t wy = (int16_t) (s8[i] * 3), wx = (int16_t) (u8[i] - 7), wyo = (int16_t) (s8[o] * 3);
                        uint16_t ex = dh(hd(vyo) + hd(vx)), ey = dh(hd(vy) + hd(vy));
                        int16_t sx = (int16_t) (wyo + wx + s16[i]), sy = (int16_t) (wy + wy + s16[(i * 5) & 1023]);
                        cr_assert(same_h(h2out[2 * i], ex) && same_h(h2out[2 * i + 1], ey), "wg %u item %u: half2 %#06x %#06x, "
                                  "expected %#06x %#06x", wg, i, h2out[2 * i], h2out[2 * i + 1], ex, ey);
                        cr_assert(same_h(hout[i], ey), "wg %u item %u: upper half stored alone %#06x", wg, i, hout[i]);
                        cr_assert_eq(s2out[2 * i], sx, "wg %u item %u", wg, i);
                        cr_assert_eq(s2out[2 * i + 1], sy, "wg %u item %u", wg, i);
                        cr_assert_eq(sout[i], sy, "wg %u item %u", wg, i);
                }
                isa_mem_fini(&m);
        }
}

/* One wave32 of hand-assembled code (encodings from llvm-mc-15 -mcpu=gfx1030
 * -show-encoding) after a prologue that sets v1 = 0x3c004000 (1.0 : 2.0),
 * v2 = 0x00013800 (2^-24 : 0.5), v3 = 0x00000001 (: 2^-24), v4 = 0x00000400
 * (: 2^-14) and v5 = 0xabcd1234; stores v5 of every lane, returns lane 0's
 * after checking that all lanes agree. */
static int run_asm(const uint32_t *code, size_t n, uint32_t *ret, SimIsaResult *res) {
        static const uint32_t pro[] = {
                0x7e0202ff, 0x3c004000, 0x7e0402ff, 0x00013800, 0x7e060281, 0x7e0802ff, 0x00000400,
                0x7e0a02ff, 0xabcd1234, 0x340c0082,     /* ..., v_lshlrev_b32 v6, 2, v0 */
        };
        static const uint32_t epi[] = { 0xdc708000, 0x00000506, 0xbf810000 }; /* global_store_dword v6, v5, s[0:1]; s_endpgm */
        IsaMem m;
        uint32_t *p, *out, k = 0;

        isa_mem_init(&m);
        uint64_t ov = isa_mem_alloc(&m, 4 * 32, (void **) &out);
        p = isa_mem_map(&m, 0x200000, 4096);
        memcpy(p, pro, sizeof(pro)), k += sizeof(pro) / 4;
        memcpy(p + k, code, 4 * n), k += (uint32_t) n;
        memcpy(p + k, epi, sizeof(epi));
        /* RSRC1.FLOAT_DENORM_MODE_16_64 = 3, as clang sets it. */
        SimIsaDispatch d = { .entry_va = 0x200000, .grid = { 1, 1, 1 }, .wg_size = { 32, 1, 1 }, .wave32 = true,
                             .rsrc1 = 3u << 18 | 3u << 16, .rsrc2 = 2 << 1 };
        d.user_sgpr[0] = (uint32_t) ov, d.user_sgpr[1] = (uint32_t) (ov >> 32);
        int r = sim_isa_dispatch(&d, &m.mem, 1000, res);
        for (unsigned l = 1; l < 32 && r == 0; l++)
                cr_assert_eq(out[l], out[0], "lane %u differs", l);
        *ret = out[0];
        isa_mem_fini(&m);
        return r;
}

Test(isa_half, operand_halves_constants_and_modifiers) {
        static const struct {
                const char *what;
                uint32_t code[3];
                size_t n;
                uint32_t expect;
        } cases[] = {
                { "v_add_f16_e32 v5, v1, v2: the low halves, v5's high half kept", { 0x640a0501 }, 1, 0xabcd4100 },
                { "v_add_f16_e32 v5, 1.0, v1: 1.0 is 0x3c00 for a 16-bit operand", { 0x640a02f2 }, 1, 0xabcd4200 },
                { "v_fma_f16 v5, v1, v2, v1 op_sel:[1,0,1,1]", { 0xd74b6805, 0x04060501 }, 2, 0x3e001234 },
                { "v_pk_mul_f16 v5, v1, v2 op_sel:[1,0] op_sel_hi:[0,1] neg_lo:[0,1] neg_hi:[1,0]",
                  { 0xcc104905, 0x50020501 }, 2, 0x8002b800 },
                { "v_add_nc_u16 v5, v1, v2 op_sel:[1,0,1] clamp", { 0xd703c805, 0x00020501 }, 2, 0x74001234 },
                { "v_pk_add_f16 v5, v1, v1 clamp", { 0xcc0fc005, 0x18020301 }, 2, 0x3c003c00 },
                { "v_mad_u32_u16 v5, v1, v2, 7 op_sel:[1,1,0,0]", { 0xd7731805, 0x021e0501 }, 2, 0x3c07 },
                { "v_cmp_gt_f16_e32 vcc_lo, v1, v2; v_cndmask_b32_e64 v5, 0, 1, vcc_lo",
                  { 0x7d980501, 0xd5010005, 0x01a90280 }, 3, 1 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                SimIsaResult res;
                uint32_t got;
                cr_assert_eq(run_asm(cases[i].code, cases[i].n, &got, &res), 0, "%s: %s", cases[i].what, res.message);
                cr_assert_eq(got, cases[i].expect, "%s: %#010x, expected %#010x", cases[i].what, got, cases[i].expect);
        }
}

/* MODE.FP_DENORM[7:6] (s_denorm_mode SIMM16[3:2]): bit 6 keeps denormal
 * inputs, bit 7 denormal results. 2^-24 + 2^-24 needs both; 2^-14 * 0.5
 * needs only the second. */
Test(isa_half, denorm_mode_flushes_inputs_and_results) {
        for (uint32_t m = 0; m < 4; m++) {
                uint32_t add[] = { 0xbfa50003 | m << 2, 0x640a0703 }, mul[] = { 0xbfa50003 | m << 2, 0x6a0a08f0 };
                uint32_t got;
                SimIsaResult res;
                bool keep_in = m & 1, keep_out = m & 2;
                cr_assert_eq(run_asm(add, 2, &got, &res), 0, "%s", res.message);
                cr_assert_eq(got & 0xffff, keep_in && keep_out ? 0x0002u : 0u, "mode %u: 2^-24 + 2^-24 = %#06x", m, got & 0xffff);
                cr_assert_eq(run_asm(mul, 2, &got, &res), 0, "%s", res.message);
                cr_assert_eq(got & 0xffff, keep_out ? 0x0200u : 0u, "mode %u: 2^-14 * 0.5 = %#06x", m, got & 0xffff);
        }
}

/* gfx10 has op_sel only on the VOP3-only 16-bit opcodes: on the VOP3 form of
 * a VOP2 one it is refused, not ignored. */
Test(isa_half, op_sel_on_promoted_vop2_refused) {
        static const uint32_t code[] = { 0xd5320805, 0x00020501 };     /* v_add_f16_e64 v5, v1, v2 + op_sel[0] */
        uint32_t got;
        SimIsaResult res;
        cr_assert_eq(run_asm(code, 2, &got, &res), -EILSEQ);
        cr_assert(strstr(res.message, "unsupported form of instruction v_add_f16"), "message: %s", res.message);
}
