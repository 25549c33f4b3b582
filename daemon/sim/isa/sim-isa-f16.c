/* SPDX-License-Identifier: MIT */
/*
 * The 16-bit operations of the vector ALU in their VOP1, VOP2 and VOP3 forms
 * (RDNA2 ISA chapter 6: the _F16, _I16, _U16 and _B16 opcodes and their
 * conversions to and from 32 bits), executed for one wave over the lanes of
 * the Vop's exec; called by sim-isa-valu.c for every opcode it does not
 * handle itself. Owns nothing.
 *
 * Operands: a 16-bit source is the low half of its register, or the high half
 * when the VOP3 op_sel bit of that source is set; op_sel[3] writes the result
 * to the high half (only the VOP3-only opcodes of sim_isa_vop16_has_opsel
 * have op_sel on gfx10). The other half of the destination is kept: "On gfx10, all
 * 16-bit instructions preserve the high bits" (LLVM AMDGPUSubtarget.cpp,
 * GCNSubtarget::zeroesHigh16BitsOfDest). Float inline constants are the
 * half-precision values (RDNA2 ISA §3.1.2: 0.5 is 0x3800 for a 16-bit
 * operand). abs and neg act on bit 15 of the selected half.
 *
 * Arithmetic is IEEE binary16, round to nearest even. Denormals follow the
 * wave's MODE register (FP_DENORM[7:6] for 16 and 64 bits: bit 6 keeps
 * denormal inputs, bit 7 denormal results; otherwise they become zeros of
 * their sign; Mesa aco_ir.h struct float_mode mirrors the encoding), which
 * the dispatch initializes from COMPUTE_PGM_RSRC1.FLOAT_MODE and
 * s_denorm_mode changes. Single operations are computed in double, which holds
 * every sum and product of two halves exactly, and rounded once; for
 * quotients and square roots the double rounding is innocuous since 53 >= 2 *
 * 11 + 2 (Figueroa, "When is double rounding innocuous?", 1995); fma is
 * computed exactly in integers (half_fma). v_rcp, v_rsq, v_sqrt, v_log, v_exp,
 * v_sin and v_cos return the correctly rounded (rcp, rsq, sqrt) or host libm
 * (log2, exp2, sin, cos, in double and rounded once) value, where the ISA
 * promises 1 ULP. NaN results carry the host's NaN payload and sign.
 *
 * Not implemented (refused by name): v_cvt_norm_i16/u16_f16,
 * v_cvt_pknorm_*, v_cvt_pk_u16_u32/i16_i32, v_sad_u16, the interpolation
 * opcodes, v_dot2c_f32_f16 and v_dot4c_i32_i8.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sim-isa-valu.h"
#include "sim-isa-opcodes.h"

/* Half-precision inline constants for codes 240..248 (0.5, -0.5, 1.0, -1.0,
 * 2.0, -2.0, 4.0, -4.0, 1/(2*pi)). */
static const uint16_t inline_f16[9] = { 0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118 };

void sim_isa_src_init16(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, Src *s, unsigned code) {
        if (code >= 240 && code <= 248) {
                s->abs = s->neg = 0;
                s->k[0] = inline_f16[code - 240];
                s->k[1] = 0;
                s->lo = &s->k[0];
                s->hi = &s->k[1];
                s->stride = 0;
                return;
        }
        sim_isa_src_init(r, w, in, s, code, K32);
}

bool half_is_denorm(uint16_t h) {
        return (h & 0x7c00) == 0 && (h & 0x3ff) != 0;
}

/* The zero of h's sign if h is denormal and keep is false. */
static uint16_t half_flush(uint16_t h, bool keep) {
        return !keep && half_is_denorm(h) ? (uint16_t) (h & 0x8000) : h;
}

uint16_t half_in(uint16_t h, uint32_t mode) {
        return half_flush(h, (mode >> 6) & 1);
}

uint16_t half_out(uint16_t h, uint32_t mode) {
        return half_flush(h, (mode >> 7) & 1);
}

uint16_t half_from(double x) {
        _Float16 h = (_Float16) x;
        uint16_t u;
        memcpy(&u, &h, 2);
        return u;
}

double half_to(uint16_t u) {
        _Float16 h;
        memcpy(&h, &u, 2);
        return (double) h;
}

/* A finite half as a signed integer count of 2^-24 (at most 2^40 in magnitude). */
static int64_t half_units(uint16_t h) {
        unsigned e = (h >> 10) & 31, m = h & 0x3ff;
        int64_t n = e ? (int64_t) (m | 0x400) << (e - 1) : m;
        return (h >> 15) ? -n : n;
}

/* fma(a, b, c) of halves with one rounding: a * b + c is exactly
 * (A * B + C * 2^24) * 2^-48 in integers of at most 82 bits, which are
 * rounded to nearest even at the half's quantum (2^-24 for denormals). */
uint16_t half_fma(uint16_t a, uint16_t b, uint16_t c) {
        double da = half_to(a), db = half_to(b), dc = half_to(c);

        if (!isfinite(da) || !isfinite(db) || !isfinite(dc))
                return half_from(fma(da, db, dc)); /* the IEEE special cases, exact in double */
        __int128 sum = (__int128) half_units(a) * half_units(b) + (__int128) half_units(c) * ((__int128) 1 << 24);
        if (sum == 0) {
                /* Exact zero: -0 only when both addends are zeros of sign minus. */
                bool prod_neg = ((a ^ b) >> 15) & 1, prod_zero = da == 0.0 || db == 0.0;
                return prod_zero && dc == 0.0 && prod_neg && (c >> 15) ? 0x8000 : 0;
        }
        bool neg = sum < 0;
        unsigned __int128 n = neg ? -(unsigned __int128) sum : (unsigned __int128) sum, q, rem, half;
        uint64_t hi = (uint64_t) (n >> 64);
        int bits = hi ? 128 - __builtin_clzll(hi) : 64 - __builtin_clzll((uint64_t) n);
        int drop = bits - 11 > 24 ? bits - 11 : 24;  /* 11 significant bits, quantum >= 2^-24 */
        q = n >> drop;
        rem = n & (((unsigned __int128) 1 << drop) - 1);
        half = (unsigned __int128) 1 << (drop - 1);
        if (rem > half || (rem == half && (q & 1)))
                q++;
        uint16_t h = half_from(ldexp((double) (uint64_t) q, drop - 48));      /* exact, or inf */
        return neg ? (uint16_t) (h | 0x8000) : h;
}

/* IEEE minNum/maxNum as the VALU does them: a NaN operand gives the other
 * one, and +0 is above -0. */
static double min_num(double a, double b) {
        if (isnan(a))
                return b;
        if (isnan(b))
                return a;
        if (a == b)
                return signbit(a) ? a : b;
        return a < b ? a : b;
}
static double max_num(double a, double b) {
        if (isnan(a))
                return b;
        if (isnan(b))
                return a;
        if (a == b)
                return signbit(a) ? b : a;
        return a > b ? a : b;
}

uint16_t half_arith(HalfOp op, uint16_t a, uint16_t b, uint16_t c, uint32_t mode) {
        double x, y;
        uint16_t r;

        a = half_in(a, mode), b = half_in(b, mode), c = half_in(c, mode);
        x = half_to(a), y = half_to(b);
        switch (op) {
        case HALF_ADD: r = half_from(x + y); break;
        case HALF_MUL: r = half_from(x * y); break;
        case HALF_FMA: r = half_fma(a, b, c); break;
        case HALF_MIN: r = half_from(min_num(x, y)); break;
        case HALF_MAX: r = half_from(max_num(x, y)); break;
        default: r = half_from(NAN); break;
        }
        return half_out(r, mode);
}

/* Clamp to [0, 1], NaN to 0 (VOP3 clamp bit on a float result). */
uint16_t half_clamp(uint16_t h) {
        double x = half_to(h);
        if (isnan(x) || x <= 0.0)
                return 0;
        return x >= 1.0 ? 0x3c00 : h;
}

static uint16_t half_med3(double a, double b, double c) {
        if (isnan(a) || isnan(b) || isnan(c))
                return half_from(min_num(min_num(a, b), c));
        return half_from(max_num(min_num(a, b), min_num(max_num(a, b), c)));
}

static uint16_t sat_u16(int64_t x) {
        return x < 0 ? 0 : x > 0xffff ? 0xffff : (uint16_t) x;
}
static uint16_t sat_i16(int64_t x) {
        return (uint16_t) (x < INT16_MIN ? INT16_MIN : x > INT16_MAX ? INT16_MAX : x);
}
static uint16_t med3_u(uint16_t a, uint16_t b, uint16_t c) {
        uint16_t lo = a < b ? a : b, hi = a < b ? b : a;
        return c < lo ? lo : c > hi ? hi : c;
}
static int16_t med3_i(int16_t a, int16_t b, int16_t c) {
        int16_t lo = a < b ? a : b, hi = a < b ? b : a;
        return c < lo ? lo : c > hi ? hi : c;
}

/* Float to 16-bit integer: truncation, saturating, NaN to 0. */
static uint16_t cvt_u16(double x) {
        return isnan(x) ? 0 : sat_u16((int64_t) fmax(fmin(trunc(x), 65535.0), 0.0));
}
static uint16_t cvt_i16(double x) {
        return isnan(x) ? 0 : sat_i16((int64_t) fmax(fmin(trunc(x), 32767.0), -32768.0));
}

/* f32 to f16 rounding toward zero (v_cvt_pkrtz_f16_f32). */
static uint16_t half_from_rtz(float f) {
        uint16_t h = half_from(f);
        double back = half_to(h);
        if (isnan(f))
                return h;
        if (isinf(back) && !isinf(f))
                return (uint16_t) ((h & 0x8000) | 0x7bff);     /* largest finite of the sign */
        if (fabs(back) > fabs((double) f))
                h--;    /* one step toward zero: magnitudes are ordered like their bit patterns */
        return h;
}

/* The 16-bit source i of lane l: its op_sel half, then abs and neg (floats only). */
#define SEL(i) ((sel >> (i)) & 1)
#define RAW(i) ((uint16_t) (U(&s[i], l) >> (16 * SEL(i))))
#define FLT(i) ((uint16_t) ((RAW(i) & (((v->abs >> (i)) & 1) ? 0x7fffu : 0xffffu)) ^ (((v->neg >> (i)) & 1) ? 0x8000u : 0)))
#define HX(i) half_to(half_in(FLT(i), mode))
/* Writes the 16-bit result of lane l to the op_sel[3] half of its destination. */
#define PUT(x) put16(&d[l], (x), SEL(3))
/* A float result: flushed per MODE, then the VOP3 clamp. */
#define PUTF(x) PUT(out16(v, half_out((x), mode)))

static void put16(uint32_t *d, uint16_t x, unsigned hi) {
        *d = hi ? (*d & 0xffffu) | (uint32_t) x << 16 : (*d & 0xffff0000u) | x;
}

static uint16_t out16(const Vop *v, uint16_t h) {
        return v->clamp ? half_clamp(h) : h;
}

int sim_isa_exec_vop16(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v) {
        uint64_t exec = v->exec;
        unsigned op = v->op, sel = v->opsel;
        uint32_t mode = w->mode, *d = w->v[v->vdst];
        Src s[3];

        for (unsigned i = 0; i < 3; i++) {
                unsigned code = i < v->nsrc ? v->src[i] : 128;
                /* f32 operands and integer exponents keep the 32-bit inline constants. */
                bool f32 = (op == 384 + VOP1_V_CVT_F16_F32 || op == 256 + VOP2_V_CVT_PKRTZ_F16_F32) ||
                           (op == 256 + VOP2_V_LDEXP_F16 && i == 1);
                if (f32)
                        sim_isa_src_init(r, w, in, &s[i], code, K32);
                else
                        sim_isa_src_init16(r, w, in, &s[i], code);
                s[i].abs = (v->abs >> i) & 1;   /* for the f32 sources read with F() */
                s[i].neg = (v->neg >> i) & 1;
        }

        switch (op) {
        /* VOP2 (256 + op) */
        case 256 + VOP2_V_ADD_F16: LANES PUTF(half_from(HX(0) + HX(1))); return 0;
        case 256 + VOP2_V_SUB_F16: LANES PUTF(half_from(HX(0) - HX(1))); return 0;
        case 256 + VOP2_V_SUBREV_F16: LANES PUTF(half_from(HX(1) - HX(0))); return 0;
        case 256 + VOP2_V_MUL_F16: LANES PUTF(half_from(HX(0) * HX(1))); return 0;
        case 256 + VOP2_V_MAX_F16: LANES PUTF(half_from(max_num(HX(0), HX(1)))); return 0;
        case 256 + VOP2_V_MIN_F16: LANES PUTF(half_from(min_num(HX(0), HX(1)))); return 0;
        case 256 + VOP2_V_FMAC_F16:
                /* D = S0 * S1 + D, the accumulator in the destination's op_sel[3] half. */
                LANES PUTF(half_fma(half_in(FLT(0), mode), half_in(FLT(1), mode),
                                    half_in((uint16_t) (d[l] >> (16 * SEL(3))), mode)));
                return 0;
        case 256 + VOP2_V_FMAMK_F16:
                LANES PUTF(half_fma(half_in(FLT(0), mode), half_in((uint16_t) in->literal, mode), half_in(FLT(1), mode)));
                return 0;
        case 256 + VOP2_V_FMAAK_F16:
                LANES PUTF(half_fma(half_in(FLT(0), mode), half_in(FLT(1), mode), half_in((uint16_t) in->literal, mode)));
                return 0;
        case 256 + VOP2_V_LDEXP_F16:
                /* D = S0 * 2^S1.i16 (RDNA2 ISA); the exponent beyond +-64 saturates the result either way. */
                LANES {
                        int32_t e = (int16_t) (uint16_t) U(&s[1], l);
                        PUTF(half_from(ldexp(HX(0), e < -64 ? -64 : e > 64 ? 64 : e)));
                }
                return 0;
        case 256 + VOP2_V_CVT_PKRTZ_F16_F32:
                /* D = { rtz(S1.f32), rtz(S0.f32) }: S0 to the low half. */
                LANES {
                        float a = F(&s[0], l), b = F(&s[1], l);
                        d[l] = half_out(half_from_rtz(a), mode) | (uint32_t) half_out(half_from_rtz(b), mode) << 16;
                }
                return 0;
        case 256 + VOP2_V_PK_FMAC_F16:
                LANES {
                        uint32_t a = U(&s[0], l), b = U(&s[1], l), c = d[l];
                        d[l] = half_arith(HALF_FMA, (uint16_t) a, (uint16_t) b, (uint16_t) c, mode) |
                               (uint32_t) half_arith(HALF_FMA, (uint16_t) (a >> 16), (uint16_t) (b >> 16), (uint16_t) (c >> 16), mode) << 16;
                }
                return 0;

        /* VOP1 (384 + op) */
        case 384 + VOP1_V_CVT_F16_F32:
                LANES PUTF(half_from(F(&s[0], l)));
                return 0;
        case 384 + VOP1_V_CVT_F32_F16:
                LANES d[l] = f2u(out_f32(v, (float) HX(0)));
                return 0;
        case 384 + VOP1_V_CVT_F16_U16: LANES PUTF(half_from(RAW(0))); return 0;
        case 384 + VOP1_V_CVT_F16_I16: LANES PUTF(half_from((int16_t) RAW(0))); return 0;
        case 384 + VOP1_V_CVT_U16_F16: LANES PUT(cvt_u16(HX(0))); return 0;
        case 384 + VOP1_V_CVT_I16_F16: LANES PUT(cvt_i16(HX(0))); return 0;
        case 384 + VOP1_V_RCP_F16: LANES PUTF(half_from(1.0 / HX(0))); return 0;
        case 384 + VOP1_V_SQRT_F16: LANES PUTF(half_from(sqrt(HX(0)))); return 0;
        case 384 + VOP1_V_RSQ_F16: LANES PUTF(half_from(vfloat_rsq(HX(0), 11))); return 0;
        case 384 + VOP1_V_LOG_F16: LANES PUTF(half_from(log2(HX(0)))); return 0;
        case 384 + VOP1_V_EXP_F16: LANES PUTF(half_from(exp2(HX(0)))); return 0;
        case 384 + VOP1_V_SIN_F16: LANES PUTF(half_from(sin(HX(0) * 2.0 * M_PI))); return 0;
        case 384 + VOP1_V_COS_F16: LANES PUTF(half_from(cos(HX(0) * 2.0 * M_PI))); return 0;
        case 384 + VOP1_V_FLOOR_F16: LANES PUTF(half_from(floor(HX(0)))); return 0;
        case 384 + VOP1_V_CEIL_F16: LANES PUTF(half_from(ceil(HX(0)))); return 0;
        case 384 + VOP1_V_TRUNC_F16: LANES PUTF(half_from(trunc(HX(0)))); return 0;
        case 384 + VOP1_V_RNDNE_F16: LANES PUTF(half_from(nearbyint(HX(0)))); return 0;
        case 384 + VOP1_V_FRACT_F16:
                /* x - floor(x), below 1 (0x3bff); NaN for an infinity (RDNA2 ISA V_FRACT_F16). */
                LANES {
                        double a = HX(0);
                        PUTF(isinf(a) ? half_from(NAN) : half_from(fmin(a - floor(a), half_to(0x3bff))));
                }
                return 0;
        case 384 + VOP1_V_FREXP_MANT_F16:
                LANES {
                        double a = HX(0);
                        int e;
                        PUTF(half_from((isnan(a) || isinf(a)) ? a : frexp(a, &e)));
                }
                return 0;
        case 384 + VOP1_V_FREXP_EXP_I16_F16:
                LANES {
                        double a = HX(0);
                        int e = 0;
                        if (!isnan(a) && !isinf(a))
                                frexp(a, &e);
                        PUT((uint16_t) e);
                }
                return 0;
        case 384 + VOP1_V_SAT_PK_U8_I16:
                /* D.u16 = { sat_u8(S0[31:16].i16), sat_u8(S0[15:0].i16) } */
                LANES {
                        int16_t lo = (int16_t) U(&s[0], l), hi = (int16_t) (U(&s[0], l) >> 16);
                        uint16_t a = lo < 0 ? 0 : lo > 255 ? 255 : (uint16_t) lo, b = hi < 0 ? 0 : hi > 255 ? 255 : (uint16_t) hi;
                        PUT((uint16_t) (a | b << 8));
                }
                return 0;

        /* VOP3-only float */
        case VOP3_V_FMA_F16:
                LANES PUTF(half_fma(half_in(FLT(0), mode), half_in(FLT(1), mode), half_in(FLT(2), mode)));
                return 0;
        case VOP3_V_DIV_FIXUP_F16: LANES PUTF(half_from(vfloat_div_fixup(HX(0), HX(1), HX(2)))); return 0;
        case VOP3_V_MIN3_F16: LANES PUTF(half_from(min_num(min_num(HX(0), HX(1)), HX(2)))); return 0;
        case VOP3_V_MAX3_F16: LANES PUTF(half_from(max_num(max_num(HX(0), HX(1)), HX(2)))); return 0;
        case VOP3_V_MED3_F16: LANES PUTF(half_med3(HX(0), HX(1), HX(2))); return 0;
        case VOP3_V_PACK_B32_F16:
                /* D = { S1.f16, S0.f16 }: a float move of two halves (denormals per MODE). */
                LANES d[l] = half_out(half_in(FLT(0), mode), mode) | (uint32_t) half_out(half_in(FLT(1), mode), mode) << 16;
                return 0;

        /* VOP3-only integer; clamp saturates */
        case VOP3_V_ADD_NC_U16:
                LANES PUT(v->clamp ? sat_u16((int64_t) RAW(0) + RAW(1)) : (uint16_t) (RAW(0) + RAW(1)));
                return 0;
        case VOP3_V_SUB_NC_U16:
                LANES PUT(v->clamp ? sat_u16((int64_t) RAW(0) - RAW(1)) : (uint16_t) (RAW(0) - RAW(1)));
                return 0;
        case VOP3_V_ADD_NC_I16:
                LANES PUT(v->clamp ? sat_i16((int64_t) (int16_t) RAW(0) + (int16_t) RAW(1)) : (uint16_t) (RAW(0) + RAW(1)));
                return 0;
        case VOP3_V_SUB_NC_I16:
                LANES PUT(v->clamp ? sat_i16((int64_t) (int16_t) RAW(0) - (int16_t) RAW(1)) : (uint16_t) (RAW(0) - RAW(1)));
                return 0;
        case VOP3_V_MUL_LO_U16: LANES PUT((uint16_t) (RAW(0) * RAW(1))); return 0;
        case VOP3_V_LSHLREV_B16: LANES PUT((uint16_t) (RAW(1) << (RAW(0) & 15))); return 0;
        case VOP3_V_LSHRREV_B16: LANES PUT((uint16_t) (RAW(1) >> (RAW(0) & 15))); return 0;
        case VOP3_V_ASHRREV_I16: LANES PUT((uint16_t) ((int16_t) RAW(1) >> (RAW(0) & 15))); return 0;
        case VOP3_V_MAX_U16: LANES PUT(RAW(0) > RAW(1) ? RAW(0) : RAW(1)); return 0;
        case VOP3_V_MIN_U16: LANES PUT(RAW(0) < RAW(1) ? RAW(0) : RAW(1)); return 0;
        case VOP3_V_MAX_I16: LANES PUT((int16_t) RAW(0) > (int16_t) RAW(1) ? RAW(0) : RAW(1)); return 0;
        case VOP3_V_MIN_I16: LANES PUT((int16_t) RAW(0) < (int16_t) RAW(1) ? RAW(0) : RAW(1)); return 0;
        case VOP3_V_MAD_U16:
                LANES {
                        int64_t x = (int64_t) RAW(0) * RAW(1) + RAW(2);
                        PUT(v->clamp ? sat_u16(x) : (uint16_t) x);
                }
                return 0;
        case VOP3_V_MAD_I16:
                LANES {
                        int64_t x = (int64_t) (int16_t) RAW(0) * (int16_t) RAW(1) + (int16_t) RAW(2);
                        PUT(v->clamp ? sat_i16(x) : (uint16_t) x);
                }
                return 0;
        case VOP3_V_MIN3_U16: {
                LANES {
                        uint16_t a = RAW(0), b = RAW(1), c = RAW(2), m = a < b ? a : b;
                        PUT(m < c ? m : c);
                }
                return 0;
        }
        case VOP3_V_MAX3_U16: {
                LANES {
                        uint16_t a = RAW(0), b = RAW(1), c = RAW(2), m = a > b ? a : b;
                        PUT(m > c ? m : c);
                }
                return 0;
        }
        case VOP3_V_MIN3_I16: {
                LANES {
                        int16_t a = (int16_t) RAW(0), b = (int16_t) RAW(1), c = (int16_t) RAW(2), m = a < b ? a : b;
                        PUT((uint16_t) (m < c ? m : c));
                }
                return 0;
        }
        case VOP3_V_MAX3_I16: {
                LANES {
                        int16_t a = (int16_t) RAW(0), b = (int16_t) RAW(1), c = (int16_t) RAW(2), m = a > b ? a : b;
                        PUT((uint16_t) (m > c ? m : c));
                }
                return 0;
        }
        case VOP3_V_MED3_U16: LANES PUT(med3_u(RAW(0), RAW(1), RAW(2))); return 0;
        case VOP3_V_MED3_I16: LANES PUT((uint16_t) med3_i((int16_t) RAW(0), (int16_t) RAW(1), (int16_t) RAW(2))); return 0;
        /* 16-bit sources, 32-bit result */
        case VOP3_V_MAD_U32_U16: LANES d[l] = (uint32_t) RAW(0) * RAW(1) + U(&s[2], l); return 0;
        case VOP3_V_MAD_I32_I16:
                LANES d[l] = (uint32_t) ((int32_t) (int16_t) RAW(0) * (int16_t) RAW(1)) + U(&s[2], l);
                return 0;
        default:
                return sim_isa_unsupported(r, w, in);
        }
}

/* The VOP3 opcodes with op_sel on gfx10, the others refuse it: llvm-mc-15
 * -mcpu=gfx1030 accepts op_sel on exactly these 16-bit ones (LLVM
 * VOP3Instructions.td, VOP3_OPSEL profiles), not on the VOP3 forms of VOP1,
 * VOP2 and VOPC opcodes. */
bool sim_isa_vop16_has_opsel(unsigned op) {
        switch (op) {
        case VOP3_V_ADD_NC_U16: case VOP3_V_SUB_NC_U16: case VOP3_V_ADD_NC_I16: case VOP3_V_SUB_NC_I16:
        case VOP3_V_MAD_U16: case VOP3_V_MAD_I16: case VOP3_V_FMA_F16: case VOP3_V_DIV_FIXUP_F16:
        case VOP3_V_MIN3_F16: case VOP3_V_MAX3_F16: case VOP3_V_MED3_F16: case VOP3_V_MIN3_I16: case VOP3_V_MAX3_I16:
        case VOP3_V_MED3_I16: case VOP3_V_MIN3_U16: case VOP3_V_MAX3_U16: case VOP3_V_MED3_U16:
        case VOP3_V_PACK_B32_F16: case VOP3_V_MAD_U32_U16: case VOP3_V_MAD_I32_I16:
                return true;
        default:
                return false;
        }
}
