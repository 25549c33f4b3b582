/* SPDX-License-Identifier: MIT */
/*
 * Float semantics of the vector ALU that go beyond one IEEE operation: the
 * saturating conversions, the three steps of IEEE division (V_DIV_SCALE,
 * V_DIV_FMAS, V_DIV_FIXUP), V_CMP_CLASS and V_MED3 (RDNA2 ISA chapter 6).
 * Pure functions of their operands.
 */
#include <math.h>

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

