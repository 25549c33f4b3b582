/* SPDX-License-Identifier: MIT */
/*
 * The interpreter's reciprocal square roots (v_rsq_f32/f64: correctly
 * rounded, f32 denormal inputs read as zero), V_TRIG_PREOP_F64 (the ISA's
 * 2/pi segment definition) and HW_REG_SH_MEM_BASES (generic pointers to
 * __local and __private data), on tests/kernels/special-math.cl against CPU
 * references written independently of the interpreter: quad precision
 * (libquadmath) for 1/sqrt, bit extraction from a hex string of 2/pi for the
 * segments. And double sin/cos of the device library (tests/kernels/
 * double-trig.cl), whose large-angle reduction runs on V_TRIG_PREOP_F64,
 * against the C library.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <quadmath.h>
#include <string.h>

#include "isa-helper.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd64(void) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        return rng;
}

static float u2f_(uint32_t u) {
        float f;
        memcpy(&f, &u, 4);
        return f;
}
static uint32_t f2u_(float f) {
        uint32_t u;
        memcpy(&u, &f, 4);
        return u;
}
static double u2d_(uint64_t u) {
        double f;
        memcpy(&f, &u, 8);
        return f;
}
static uint64_t d2u_(double f) {
        uint64_t u;
        memcpy(&u, &f, 8);
        return u;
}

/* 1/sqrt(x) rounded once from quad precision (113 bits: no double rounding
 * can reach a float or double result). */
static __float128 rsq_q(__float128 x) {
        return 1.0Q / sqrtq(x);
}

static float ref_rsq32(float x) {
        if (fpclassify(x) == FP_SUBNORMAL)
                x = copysignf(0.0f, x);         /* v_rsq_f32 reads denormals as zero */
        if (isnan(x) || x < 0.0f)
                return NAN;
        if (x == 0.0f)
                return signbit(x) ? -INFINITY : INFINITY;
        if (isinf(x))
                return 0.0f;
        return (float) rsq_q(x);
}

static double ref_rsq64(double x) {
        if (isnan(x) || x < 0.0)
                return NAN;
        if (x == 0.0)
                return signbit(x) ? -INFINITY : INFINITY;
        if (isinf(x))
                return 0.0;
        return (double) rsq_q(x);
}

/* The first 1184 fraction bits of 2/pi. */
static const char two_over_pi_hex[] =
        "a2f9836e4e441529fc2757d1f534ddc0db6295993c439041fe5163abdebbc561b7246e3a424dd2e006492eea09d1921cfe1deb1c"
        "b129a73ee88235f52ebb4484e99c7026b45f7e413991d639835339f49c845f8bbdf9283b1ff897ffde05980fef2f118b5a0a6d1f"
        "6d367ecf27cb09b74f463f669e5fea2d7527bac7ebe5f17b3d0739f78a5292ea6bfb5fb11f8d5d0856033046";

static unsigned pi_bit(unsigned k) {
        char c = two_over_pi_hex[k / 4];
        unsigned v = c <= '9' ? (unsigned) (c - '0') : (unsigned) (c - 'a' + 10);
        return (v >> (3 - k % 4)) & 1;
}

/* TrigPreOp(S0, S1) from the ISA's definition: shift = 53 * S1[4:0] (+
 * exponent - 1077 above 1077); the 53 fraction bits after the first shift
 * ones, times 2^(-53 - shift) (+128 for exponents >= 1968), truncated below
 * the normal range; +0 once the window leaves the table as LLVM's folding
 * says the hardware does; NaN quieted. */
static double ref_trig_preop(double x, uint32_t seg) {
        uint64_t bits = d2u_(x), m = 0;
        unsigned e = (bits >> 52) & 0x7ff, shift = (seg & 31) * 53 + (e > 1077 ? e - 1077 : 0);
        int scale = -53 - (int) shift + (e >= 1968 ? 128 : 0);

        if (isnan(x))
                return u2d_(bits | 1ull << 51);
        if (shift / 32 + 2 >= 37)
                return 0.0;
        for (unsigned k = 0; k < 53; k++)
                m = m << 1 | pi_bit(shift + k);
        /* Value m * 2^scale; keep only multiples of 2^-1074 (round toward zero). */
        while (scale < -1074) {
                m >>= 1;
                scale++;
        }
        return ldexp((double) m, scale);        /* exact now */
}

static bool same_bits_or_nan32(float a, float b) {
        return f2u_(a) == f2u_(b) || (isnan(a) && isnan(b));
}

Test(isa_special_math, kernels_use_the_instructions) {
        cr_assert_gt(isa_objdump_count("special-math.hsaco", "v_rsq_f32"), 0);
        cr_assert_gt(isa_objdump_count("special-math.hsaco", "v_rsq_f64"), 0);
        cr_assert_gt(isa_objdump_count("special-math.hsaco", "v_trig_preop_f64"), 0);
        cr_assert_gt(isa_objdump_count("special-math.hsaco", "hwreg(HW_REG_SH_MEM_BASES, 16, 16)"), 0, "LDS aperture");
        cr_assert_gt(isa_objdump_count("special-math.hsaco", "hwreg(HW_REG_SH_MEM_BASES, 0, 16)"), 0, "private aperture");
        cr_assert_geq(isa_objdump_count("double-trig.hsaco", "v_trig_preop_f64"), 3);
}

Test(isa_special_math, rsq_trig_preop_and_apertures_match_reference) {
        static const float fspecial[] = {
                0.0f, -0.0f, 1.0f, 4.0f, 2.0f, 0.25f, 0x1p-149f, 0x1.fffffcp-127f, 0x1p-126f, 0x1.fffffep127f,
                INFINITY, -INFINITY, -1.0f, NAN, 0x1.000002p0f, 0x1.fffffep-1f,
        };
        static const double dspecial[] = {
                0.0, -0.0, 1.0, 3.0, 0x1p-1074, 0x1p-1022, 0x1.fffffffffffffp1023, INFINITY, -2.0, NAN,
                1e22, 0x1p54, 0x1p200, 0x1p1000, 0x1.8p945, -0x1p60, 0x1p53,
        };
        const uint32_t n = 4096, wg = 64;
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        float *f, *of;
        double *d, *od;
        int32_t *seg;
        uint64_t *ap;

        isa_mem_init(&m);
        cr_assert_eq(isa_kernel_load(&m, isa_kernel_path("special-math.hsaco"), "special_math", &k), 0);
        uint64_t fv = isa_mem_alloc(&m, 4 * n, (void **) &f), dv = isa_mem_alloc(&m, 8 * n, (void **) &d),
                 sv = isa_mem_alloc(&m, 4 * n, (void **) &seg), ofv = isa_mem_alloc(&m, 4 * n, (void **) &of),
                 odv = isa_mem_alloc(&m, 16 * n, (void **) &od), apv = isa_mem_alloc(&m, 16 * n, (void **) &ap);
        for (uint32_t i = 0; i < n; i++) {
                uint64_t r = rnd64();
                if (i < sizeof(fspecial) / sizeof(fspecial[0]))
                        f[i] = fspecial[i];
                else
                        f[i] = u2f_((uint32_t) r & (i % 3 ? 0x7fffffffu : 0x807fffffu)); /* every exponent; denormals */
                if (i < sizeof(dspecial) / sizeof(dspecial[0]))
                        d[i] = dspecial[i];
                else
                        d[i] = u2d_(r >> (i % 2));      /* every exponent, sign mostly positive */
                seg[i] = i % 5 == 0 ? (int32_t) (r >> 40) : (int32_t) (i % 4);
                if (i >= 100 && i < 164) {
                        /* Windows deep in the table whose value falls below 2^-1022
                         * and loses the bits past 2^-1074. */
                        d[i] = ldexp(1.0 + (double) (r % 1000) / 1000.0, 60 + (int) (i % 40));
                        seg[i] = 18 + (int32_t) (i % 3);
                }
        }
        isa_args_u64(&a, fv), isa_args_u64(&a, dv), isa_args_u64(&a, sv);
        isa_args_u64(&a, ofv), isa_args_u64(&a, odv), isa_args_u64(&a, apv);
        uint32_t grid[3] = { n / wg, 1, 1 }, wgs[3] = { wg, 1, 1 };
        cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 10000000, &res), 0, "%s", res.message);

        unsigned subnormal = 0;
        for (uint32_t i = 0; i < n; i++)
                subnormal += fpclassify(ref_trig_preop(d[i], (uint32_t) seg[i])) == FP_SUBNORMAL;
        cr_assert_geq(subnormal, 20, "too few subnormal trig_preop results (%u)", subnormal);
        for (uint32_t i = 0; i < n; i++) {
                float e = ref_rsq32(f[i]);
                cr_assert(same_bits_or_nan32(of[i], e), "rsq_f32(%a) = %a, expected %a", f[i], of[i], e);
                double E = ref_rsq64(d[i]);
                cr_assert(d2u_(od[2 * i]) == d2u_(E) || (isnan(od[2 * i]) && isnan(E)), "rsq_f64(%a) = %a, expected %a",
                          d[i], od[2 * i], E);
                double t = ref_trig_preop(d[i], (uint32_t) seg[i]);
                cr_assert_eq(d2u_(od[2 * i + 1]), d2u_(t), "trig_preop(%a, %d) = %a (%#llx), expected %a (%#llx)", d[i],
                             seg[i], od[2 * i + 1], (unsigned long long) d2u_(od[2 * i + 1]), t,
                             (unsigned long long) d2u_(t));
                cr_assert_eq(ap[2 * i], ISA_LDS_APERTURE + 4 * (i % wg), "generic LDS pointer %#llx",
                             (unsigned long long) ap[2 * i]);
                cr_assert_eq(ap[2 * i + 1], ISA_SCRATCH_APERTURE + 4 * (i & 1), "generic private pointer %#llx",
                             (unsigned long long) ap[2 * i + 1]);
        }
        isa_mem_fini(&m);
}

/* The reference itself: segment 0 of a small argument is 2/pi rounded toward
 * zero to 53 bits (to nearest it would end in ...883); segments 0-2 add up to
 * 2/pi to quad precision; an argument of 2^55 (exponent 1078) drops the first
 * fraction bit, leaving frac(4/pi)/2; windows past the table give 0. */
Test(isa_special_math, trig_preop_reference_sanity) {
        cr_assert_eq(ref_trig_preop(1.0, 0), 0x1.45f306dc9c882p-1);
        __float128 sum = (__float128) ref_trig_preop(1.0, 0) + ref_trig_preop(1.0, 1) + ref_trig_preop(1.0, 2);
        cr_assert(fabsq(sum - M_2_PIq) < 0x1p-110Q, "segments 0-2 do not add up to 2/pi");
        __float128 frac = 2 * M_2_PIq - 1;      /* fraction of 4/pi */
        cr_assert(fabsq((__float128) ref_trig_preop(0x1p55, 0) * 2 - frac) < 0x1p-52Q);
        cr_assert(isnan(ref_trig_preop(NAN, 3)));
        cr_assert_eq(ref_trig_preop(1.0, 22), 0.0, "window past the 1184-bit table");
}

Test(isa_special_math, double_sin_cos_particle_move) {
        const uint32_t n = 1000;
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        double *x, *y, *ang, *sp, *sc, *x0 = malloc(8 * n), *y0 = malloc(8 * n);

        isa_mem_init(&m);
        cr_assert_eq(isa_kernel_load(&m, isa_kernel_path("double-trig.hsaco"), "particle_move", &k), 0);
        uint64_t xv = isa_mem_alloc(&m, 8 * n, (void **) &x), yv = isa_mem_alloc(&m, 8 * n, (void **) &y),
                 av = isa_mem_alloc(&m, 8 * n, (void **) &ang), spv = isa_mem_alloc(&m, 8 * n, (void **) &sp),
                 scv = isa_mem_alloc(&m, 16 * n, (void **) &sc);
        for (uint32_t i = 0; i < n; i++) {
                uint64_t r = rnd64();
                x0[i] = x[i] = (double) (r % 1000) / 7.0, y0[i] = y[i] = (double) (r >> 20 % 1000) / 3.0;
                sp[i] = 1.0 + (double) (r % 97) / 16.0;
                /* Angles from tiny to huge: the last ones need V_TRIG_PREOP_F64's reduction. */
                double scale = i % 4 == 0 ? 1e-3 : i % 4 == 1 ? 10.0 : i % 4 == 2 ? 1e9 : 1e300;
                ang[i] = ((double) (r >> 11) / 0x1p53 - 0.5) * scale;
        }
        isa_args_u64(&a, xv), isa_args_u64(&a, yv), isa_args_u64(&a, av), isa_args_u64(&a, spv);
        isa_args_u64(&a, scv), isa_args_u32(&a, n);
        uint32_t grid[3] = { (n + 63) / 64, 1, 1 }, wgs[3] = { 64, 1, 1 };
        cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 10000000, &res), 0, "%s", res.message);
        for (uint32_t i = 0; i < n; i++) {
                double s = sin(ang[i]), c = cos(ang[i]);
                /* The device library's sin/cos are within 1 ulp; the C library's too. */
                cr_assert(fabs(sc[2 * i] - s) <= 0x1p-52 * fmax(fabs(s), 0x1p-1022) * 2, "sin(%a) = %a, libm %a", ang[i],
                          sc[2 * i], s);
                cr_assert(fabs(sc[2 * i + 1] - c) <= 0x1p-52 * fmax(fabs(c), 0x1p-1022) * 2, "cos(%a) = %a, libm %a",
                          ang[i], sc[2 * i + 1], c);
                /* x += speed * c contracts to one fma (OpenCL's default FP_CONTRACT ON). */
                cr_assert_eq(x[i], fma(sp[i], sc[2 * i + 1], x0[i]), "x[%u]", i);
                cr_assert_eq(y[i], fma(sp[i], sc[2 * i], y0[i]), "y[%u]", i);
        }
        free(x0), free(y0);
        isa_mem_fini(&m);
}
