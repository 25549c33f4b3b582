/* SPDX-License-Identifier: MIT */
/*
 * Float semantics of the vector ALU that go beyond one IEEE operation: the
 * saturating conversions, the three steps of IEEE division (V_DIV_SCALE,
 * V_DIV_FMAS, V_DIV_FIXUP), V_CMP_CLASS, V_MED3, the correctly rounded
 * reciprocal square root and V_TRIG_PREOP_F64's segments of 2/pi (RDNA2 ISA
 * chapter 6). Pure functions of their operands.
 */
#include <math.h>
#include <stdint.h>

#include "sim-isa-valu.h"

/* Conversions saturate, NaN converts to 0 (RDNA2 ISA §6.3, V_CVT_*). */
uint32_t vfloat_cvt_u32(double x) {
        if (isnan(x) || x <= 0.0)
                return 0;
        if (x >= 4294967295.0)
                return UINT32_MAX;
        return (uint32_t) x;
}
int32_t vfloat_cvt_i32(double x) {
        if (isnan(x))
                return 0;
        if (x <= -2147483648.0)
                return INT32_MIN;
        if (x >= 2147483647.0)
                return INT32_MAX;
        return (int32_t) x;
}

int vfloat_exp32(float x) {
        return (f2u(x) >> 23) & 0xff;
}
int vfloat_exp64(double x) {
        return (d2u(x) >> 52) & 0x7ff;
}
static bool is_denorm32(float x) {
        return fpclassify(x) == FP_SUBNORMAL;
}
static bool is_denorm64(double x) {
        return fpclassify(x) == FP_SUBNORMAL;
}

/* V_DIV_SCALE_F32/F64 (RDNA2 ISA §6, pseudocode of V_DIV_SCALE_F32): S0 is the
 * value to scale (numerator or denominator), S1 the denominator, S2 the
 * numerator. Both calls of a division take the same branch. Where only one
 * operand is scaled, VCC tells V_DIV_FMAS to undo it: a huge quotient had its
 * denominator scaled up (quotient estimate >= 2, undone by 2^+64), a denormal
 * quotient had its numerator scaled up (estimate < 2, undone by 2^-64). The
 * AMD pseudocode's fixed 2^32 in V_DIV_FMAS_F32 does not give IEEE results;
 * tinygrad's RDNA emulator (test/mockgpu/amd/emu.py) found the same and
 * chooses the direction by the estimate's exponent, as done here. Verified
 * bit-exact against host division by tests/unit/isa divide_ieee. */
float vfloat_div_scale32(float s0, float s1, float s2, bool *vcc) {
        *vcc = false;
        if (s2 == 0.0f || s1 == 0.0f || isnan(s1) || isnan(s2) || isinf(s1) || isinf(s2))
                return NAN;     /* V_DIV_FIXUP produces the IEEE special result */
        if (vfloat_exp32(s2) - vfloat_exp32(s1) >= 96) {
                *vcc = true;
                return s0 == s1 ? ldexpf(s0, 64) : s0;
        }
        if (is_denorm32(s1))
                return ldexpf(s0, 64);
        if (is_denorm32(1.0f / s1))
                return ldexpf(s0, -64);
        if (fabs((double) s2 / (double) s1) < 0x1p-126) {
                *vcc = true;
                return s0 == s2 ? ldexpf(s0, 64) : s0;
        }
        if (vfloat_exp32(s2) <= 23)
                return ldexpf(s0, 64);
        return s0;
}

double vfloat_div_scale64(double s0, double s1, double s2, bool *vcc) {
        *vcc = false;
        if (s2 == 0.0 || s1 == 0.0 || isnan(s1) || isnan(s2) || isinf(s1) || isinf(s2))
                return NAN;
        if (vfloat_exp64(s2) - vfloat_exp64(s1) >= 768) {
                *vcc = true;
                return s0 == s1 ? ldexp(s0, 128) : s0;
        }
        if (is_denorm64(s1))
                return ldexp(s0, 128);
        if (is_denorm64(1.0 / s1))
                return ldexp(s0, -128);
        if (fabsl((long double) s2 / (long double) s1) < 0x1p-1022L) {
                *vcc = true;
                return s0 == s2 ? ldexp(s0, 128) : s0;
        }
        if (vfloat_exp64(s2) <= 53)
                return ldexp(s0, 128);
        return s0;
}

/* V_DIV_FMAS: fma, rescaled when VCC; the scaling happens before the one
 * rounding (done here with a wider intermediate). */
float vfloat_div_fmas32(float a, float b, float c, bool vcc) {
        if (!vcc)
                return fmaf(a, b, c);
        double x = fma((double) a, (double) b, (double) c);
        return (float) ldexp(x, vfloat_exp32(c) > 127 ? 64 : -64);
}

double vfloat_div_fmas64(double a, double b, double c, bool vcc) {
        if (!vcc)
                return fma(a, b, c);
        long double x = fmal((long double) a, (long double) b, (long double) c);
        return (double) ldexpl(x, vfloat_exp64(c) > 1023 ? 128 : -128);
}

/* V_DIV_FIXUP: S0 quotient, S1 denominator, S2 numerator; special cases of
 * IEEE division, otherwise the quotient with the sign of the division. */
double vfloat_div_fixup(double s0, double s1, double s2) {
        bool sign = signbit(s1) != signbit(s2);
        if (isnan(s2))
                return s2 + 0.0;
        if (isnan(s1))
                return s1 + 0.0;
        if (s1 == 0.0 && s2 == 0.0)
                return NAN;
        if (isinf(s1) && isinf(s2))
                return NAN;
        if (s1 == 0.0 || isinf(s2))
                return sign ? -INFINITY : INFINITY;
        if (isinf(s1) || s2 == 0.0)
                return sign ? -0.0 : 0.0;
        if (isnan(s0))
                return sign ? -INFINITY : INFINITY;
        return sign ? -fabs(s0) : fabs(s0);
}

bool vfloat_class(double x, bool is_snan, uint32_t mask) {
        unsigned bit;
        if (isnan(x))
                bit = is_snan ? 0 : 1;
        else if (isinf(x))
                bit = signbit(x) ? 2 : 9;
        else if (x == 0.0)
                bit = signbit(x) ? 5 : 6;
        else if (fpclassify(x) == FP_SUBNORMAL)
                bit = signbit(x) ? 4 : 7;
        else
                bit = signbit(x) ? 3 : 8;
        return (mask >> bit) & 1;
}

float vfloat_med3(float a, float b, float c) {
        if (isnan(a) || isnan(b) || isnan(c))
                return fminf(fminf(a, b), c);
        return fmaxf(fminf(a, b), fminf(fmaxf(a, b), c));
}


/* Sign of M^2 * X * 2^e - 1 for integers M < 2^56, 0 < X < 2^54: -1, 0 or 1.
 * The product has at most 166 bits, kept in three 64-bit words. */
static int cmp_square_product(uint64_t M, uint64_t X, int e) {
        unsigned __int128 q = (unsigned __int128) M * M;
        unsigned __int128 t0 = (unsigned __int128) (uint64_t) q * X;
        unsigned __int128 t1 = (unsigned __int128) (uint64_t) (q >> 64) * X + (uint64_t) (t0 >> 64);
        uint64_t w[3] = { (uint64_t) t0, (uint64_t) t1, (uint64_t) (t1 >> 64) };
        int top = 2, bits;
        bool pow2;

        while (top > 0 && w[top] == 0)
                top--;
        bits = 64 * top + 64 - __builtin_clzll(w[top]);  /* the product is never 0 */
        pow2 = (w[top] & (w[top] - 1)) == 0;
        for (int i = 0; i < top; i++)
                pow2 = pow2 && w[i] == 0;
        /* The product is in [2^(bits-1), 2^bits); it times 2^e against 1. */
        if (bits - 1 + e > 0)
                return 1;
        if (bits + e <= 0)
                return -1;
        /* bits - 1 + e == 0: the product is 2^(bits-1) exactly or above. */
        return pow2 ? 0 : 1;
}

/* Sign of 1/sqrt(x) - M * 2^em for x = X * 2^ex > 0: the sign of
 * 1 - M^2 * 2^(2 em) * x, since both sides are positive. */
static int cmp_rsq(uint64_t X, int ex, uint64_t M, int em) {
        return -cmp_square_product(M, X, 2 * em + ex);
}

/* 1/sqrt(x) correctly rounded (to nearest, ties to even) to a binary format
 * with p-bit significands (11 half, 24 single, 53 double), returned as the
 * double holding that value; x is a value of that format (denormals
 * included). The result of a positive finite x is always a normal number of
 * the format, and never exactly halfway between two of them (that would make
 * x = 1 / (a (p+1)-bit odd number)^2 times a power of 4, which no binary
 * number is), so an estimate good to a few ulp is corrected by comparing
 * 1/sqrt(x) exactly with the midpoints next to it (integer arithmetic,
 * cmp_rsq). IEEE special cases as V_RSQ_F32/F64/F16 (RDNA2 ISA §6): +0 gives
 * +inf, -0 gives -inf, +inf gives +0, a negative number or NaN gives NaN. */
double vfloat_rsq(double x, int p) {
        uint64_t X, Y;
        int ex, ey, k;

        if (isnan(x) || x < 0.0)
                return NAN;
        if (x == 0.0)
                return signbit(x) ? -INFINITY : INFINITY;
        if (isinf(x))
                return 0.0;
        X = (uint64_t) ldexp(frexp(x, &k), 53);
        ex = k - 53;
        /* Estimate within a few ulp of the result, as Y * 2^ey with Y of p bits. */
        Y = (uint64_t) llround(ldexp(frexp(1.0 / sqrt(x), &k), p));
        ey = k - p;
        if (Y >> p) {
                Y >>= 1;
                ey++;
        }
        /* Each step moves Y one ulp towards 1/sqrt(x); the estimate is within a
         * few ulp, so the bound is never reached. */
        for (int step = 0; step < 64; step++) {
                /* The midpoints around Y: (2Y+1) * 2^(ey-1) above; below, (2Y-1) * 2^(ey-1),
                 * or (4Y-1) * 2^(ey-2) when Y is the smallest significand of its binade. */
                if (cmp_rsq(X, ex, 2 * Y + 1, ey - 1) > 0) {
                        if (++Y >> p) {
                                Y >>= 1;
                                ey++;
                        }
                        continue;
                }
                bool bottom = Y == (uint64_t) 1 << (p - 1);
                if (bottom ? cmp_rsq(X, ex, 4 * Y - 1, ey - 2) < 0 : cmp_rsq(X, ex, 2 * Y - 1, ey - 1) < 0) {
                        if (bottom) {
                                Y = 2 * Y - 1;
                                ey--;
                        } else {
                                Y--;
                        }
                        continue;
                }
                break;
        }
        return ldexp((double) Y, ey);
}

/* The first 1184 fraction bits of 2/pi, most significant first: the words
 * of floor(2^1184 * 2/pi) (computed with integer arithmetic from Machin's
 * formula for pi; the same table as LLVM's constant folding of
 * llvm.amdgcn.trig.preop, AMDGPUInstCombineIntrinsic.cpp). */
static const uint32_t two_over_pi[37] = {
        0xa2f9836e, 0x4e441529, 0xfc2757d1, 0xf534ddc0, 0xdb629599, 0x3c439041,
        0xfe5163ab, 0xdebbc561, 0xb7246e3a, 0x424dd2e0, 0x06492eea, 0x09d1921c,
        0xfe1deb1c, 0xb129a73e, 0xe88235f5, 0x2ebb4484, 0xe99c7026, 0xb45f7e41,
        0x3991d639, 0x835339f4, 0x9c845f8b, 0xbdf9283b, 0x1ff897ff, 0xde05980f,
        0xef2f118b, 0x5a0a6d1f, 0x6d367ecf, 0x27cb09b7, 0x4f463f66, 0x9e5fea2d,
        0x7527bac7, 0xebe5f17b, 0x3d0739f7, 0x8a5292ea, 0x6bfb5fb1, 0x1f8d5d08,
        0x56033046,
};

/* V_TRIG_PREOP_F64 D = TrigPreOp(S0, S1[4:0]) (RDNA2 ISA, VOP3 opcode 372:
 * "Look Up 2/PI (S0.d) with segment select S1.u[4:0] ... Rounding is always
 * round-to-zero. Large inputs (exp > 1968) are scaled to avoid loss of
 * precision through denormalization"): the 53 bits of 2/pi's fraction that
 * start after bit shift = 53 * segment, plus exponent(S0) - 1077 when S0's
 * biased exponent is above 1077, as a double worth those bits in place
 * (times 2^-53-shift), scaled up by 2^128 when the exponent is 1968 or more.
 * Only S0's exponent field matters. A window past the table gives +0 and a
 * NaN source a quiet NaN, as LLVM's constant folding of the intrinsic does
 * ("Return 0 for outbound segment (hardware behavior)"). A result below the
 * normal range is truncated, per the ISA's round-to-zero; every bit of the
 * table keeps its weight 2^-(k+1) in the result, so truncation always drops
 * the bits from k = 1074 on, and as that bit of 2/pi is 0, rounding to
 * nearest would give the same results. */
double vfloat_trig_preop(double s0, uint32_t s1) {
        uint64_t bits = d2u(s0), hi, lo;
        unsigned exponent = (bits >> 52) & 0x7ff, shift = (s1 & 31) * 53, idx, b;
        int scale, top;

        if (isnan(s0))
                return u2d(bits | 1ull << 51);
        if (exponent > 1077)
                shift += exponent - 1077;
        idx = shift / 32, b = shift % 32;
        if (idx + 2 >= ELEMS(two_over_pi))
                return 0.0;
        hi = (uint64_t) two_over_pi[idx] << 32 | two_over_pi[idx + 1];
        lo = (uint64_t) two_over_pi[idx + 2] << 32;
        if (b)
                hi = hi << b | lo >> (64 - b);
        hi >>= 11;
        scale = -53 - (int) shift + (exponent >= 1968 ? 128 : 0);
        if (hi == 0)
                return 0.0;
        /* hi * 2^scale, its top bit at 2^top: exact if normal; below 2^-1022
         * keep the multiples of 2^-1074 only (round toward zero). */
        top = 63 - __builtin_clzll(hi) + scale;
        if (top < -1022 && scale < -1074)
                hi = -1074 - scale >= 64 ? 0 : hi >> (-1074 - scale), scale = -1074;
        return ldexp((double) hi, scale);
}
