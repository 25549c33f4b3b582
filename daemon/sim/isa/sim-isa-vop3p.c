/* SPDX-License-Identifier: MIT */
/*
 * Packed 16-bit math, the VOP3P encoding (RDNA2 ISA §6.3.4 "Packed Math"
 * and chapter 13 "VOP3P"): each lane computes two 16-bit results, one into
 * each half of the destination. Source i of the low result is the half of
 * its register chosen by op_sel[i], negated by neg_lo[i]; of the high result
 * the half chosen by op_sel_hi[i], negated by neg_hi[i] (so the default
 * op_sel 0 / op_sel_hi 1 pairs low with low and high with high). Float
 * inline constants are half values in the low half (0x00003c00 for 1.0),
 * which is why clang splats them with op_sel_hi 0. Also the integer dot
 * products and v_fma_mix_f32/mixlo/mixhi (f32 arithmetic on sources that
 * op_sel_hi declares f16). Called by the interpreter loop for one wave;
 * owns nothing.
 *
 * Encoding: dword 0 vdst[7:0], neg_hi[10:8], op_sel[13:11], op_sel_hi[2] 14,
 * clamp 15, op[22:16]; dword 1 src0[8:0], src1[17:9], src2[26:18],
 * op_sel_hi[1:0] [28:27], neg_lo[31:29].
 *
 * Not implemented (refused by name): v_dot2_f32_f16, whose intermediate
 * rounding the ISA does not state.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sim-isa-valu.h"
#include "sim-isa-opcodes.h"

typedef struct Packed {
        unsigned op_sel, op_sel_hi, neg_lo, neg_hi;
        bool clamp;
} Packed;

/* Source i's half for the low (hi = 0) or high result, raw. */
static uint16_t half_of(const Src *s, unsigned l, const Packed *p, unsigned i, unsigned hi) {
        unsigned pick = hi ? (p->op_sel_hi >> i) & 1 : (p->op_sel >> i) & 1;
        return (uint16_t) (U(s, l) >> (16 * pick));
}

/* The same with the float negation of neg_lo/neg_hi. */
static uint16_t fhalf_of(const Src *s, unsigned l, const Packed *p, unsigned i, unsigned hi) {
        unsigned neg = hi ? (p->neg_hi >> i) & 1 : (p->neg_lo >> i) & 1;
        return (uint16_t) (half_of(s, l, p, i, hi) ^ (neg ? 0x8000u : 0));
}

static uint16_t sat_u16(int64_t x) {
        return x < 0 ? 0 : x > 0xffff ? 0xffff : (uint16_t) x;
}
static uint16_t sat_i16(int64_t x) {
        return (uint16_t) (x < INT16_MIN ? INT16_MIN : x > INT16_MAX ? INT16_MAX : x);
}

/* One half of an integer packed op. */
static uint16_t int_op(unsigned op, uint16_t a, uint16_t b, uint16_t c, bool clamp) {
        int64_t x;
        switch (op) {
        case VOP3P_V_PK_MAD_I16:
                x = (int64_t) (int16_t) a * (int16_t) b + (int16_t) c;
                return clamp ? sat_i16(x) : (uint16_t) x;
        case VOP3P_V_PK_MAD_U16:
                x = (int64_t) a * b + c;
                return clamp ? sat_u16(x) : (uint16_t) x;
        case VOP3P_V_PK_MUL_LO_U16: return (uint16_t) (a * b);
        case VOP3P_V_PK_ADD_I16:
                x = (int64_t) (int16_t) a + (int16_t) b;
                return clamp ? sat_i16(x) : (uint16_t) x;
        case VOP3P_V_PK_SUB_I16:
                x = (int64_t) (int16_t) a - (int16_t) b;
                return clamp ? sat_i16(x) : (uint16_t) x;
        case VOP3P_V_PK_ADD_U16:
                x = (int64_t) a + b;
                return clamp ? sat_u16(x) : (uint16_t) x;
        case VOP3P_V_PK_SUB_U16:
                x = (int64_t) a - b;
                return clamp ? sat_u16(x) : (uint16_t) x;
        /* Shifts: S1 shifted by S0[3:0]. */
        case VOP3P_V_PK_LSHLREV_B16: return (uint16_t) (b << (a & 15));
        case VOP3P_V_PK_LSHRREV_B16: return (uint16_t) (b >> (a & 15));
        case VOP3P_V_PK_ASHRREV_I16: return (uint16_t) ((int16_t) b >> (a & 15));
        case VOP3P_V_PK_MAX_I16: return (int16_t) a > (int16_t) b ? a : b;
        case VOP3P_V_PK_MIN_I16: return (int16_t) a < (int16_t) b ? a : b;
        case VOP3P_V_PK_MAX_U16: return a > b ? a : b;
        default: return a < b ? a : b;     /* VOP3P_V_PK_MIN_U16 */
        }
}

/* Integer dot products: D = sum of the products of the n signed or unsigned
 * fields of S0 and S1, plus S2; clamp saturates to the 32-bit range
 * (RDNA2 ISA V_DOT2_I32_I16 .. V_DOT8_U32_U4). */
static uint32_t dot(uint32_t a, uint32_t b, uint32_t c, unsigned bits, bool is_signed, bool clamp) {
        int64_t sum = is_signed ? (int64_t) (int32_t) c : (int64_t) c;
        for (unsigned i = 0; i < 32 / bits; i++) {
                uint32_t fa = (a >> (i * bits)) & ((1u << bits) - 1), fb = (b >> (i * bits)) & ((1u << bits) - 1);
                if (is_signed) {
                        int32_t sa = (int32_t) (fa << (32 - bits)) >> (32 - bits), sb = (int32_t) (fb << (32 - bits)) >> (32 - bits);
                        sum += (int64_t) sa * sb;
                } else {
                        sum += (int64_t) fa * fb;
                }
        }
        if (clamp) {
                if (is_signed)
                        sum = sum < INT32_MIN ? INT32_MIN : sum > INT32_MAX ? INT32_MAX : sum;
                else
                        sum = sum > UINT32_MAX ? UINT32_MAX : sum;
        }
        return (uint32_t) sum;
}

/* A v_fma_mix source: f16 (its op_sel half) when op_sel_hi says so, else
 * f32; neg_lo negates and neg_hi takes the absolute value (LLVM
 * VOP3PInstructions.td: mad_mix/fma_mix encode abs in the neg_hi bits). */
static float mix_src(const Src *s, unsigned l, const Packed *p, unsigned i, uint32_t mode) {
        float x;
        if ((p->op_sel_hi >> i) & 1)
                x = (float) half_to(half_in((uint16_t) (U(s, l) >> (16 * ((p->op_sel >> i) & 1))), mode));
        else
                x = u2f(U(s, l));
        if ((p->neg_hi >> i) & 1)
                x = fabsf(x);
        if ((p->neg_lo >> i) & 1)
                x = -x;
        return x;
}

int sim_isa_exec_vop3p(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        uint32_t w0 = in->w0, w1 = in->w1, mode = w->mode, *d = w->v[w0 & 0xff];
        uint64_t exec = wave_exec(w);
        unsigned op = in->op;
        Packed p = {
                .op_sel = (w0 >> 11) & 7,
                .op_sel_hi = ((w1 >> 27) & 3) | ((w0 >> 14) & 1) << 2,
                .neg_lo = (w1 >> 29) & 7,
                .neg_hi = (w0 >> 8) & 7,
                .clamp = (w0 >> 15) & 1,
        };
        bool is_float = false, is_mix = false;
        HalfOp h = HALF_ADD;
        Src s[3];

        switch (op) {
        case VOP3P_V_PK_FMA_F16: is_float = true, h = HALF_FMA; break;
        case VOP3P_V_PK_ADD_F16: is_float = true, h = HALF_ADD; break;
        case VOP3P_V_PK_MUL_F16: is_float = true, h = HALF_MUL; break;
        case VOP3P_V_PK_MIN_F16: is_float = true, h = HALF_MIN; break;
        case VOP3P_V_PK_MAX_F16: is_float = true, h = HALF_MAX; break;
        case VOP3P_V_FMA_MIX_F32: case VOP3P_V_FMA_MIXLO_F16: case VOP3P_V_FMA_MIXHI_F16: is_mix = true; break;
        }

        for (unsigned i = 0; i < 3; i++) {
                unsigned code = i == 0 ? w1 & 0x1ff : i == 1 ? (w1 >> 9) & 0x1ff : (w1 >> 18) & 0x1ff;
                if (is_float || (is_mix && ((p.op_sel_hi >> i) & 1)))
                        sim_isa_src_init16(r, w, in, &s[i], code);
                else
                        sim_isa_src_init(r, w, in, &s[i], code, K32);
        }

        if (is_float) {
                LANES {
                        uint16_t res[2];
                        for (unsigned hi = 0; hi < 2; hi++) {
                                res[hi] = half_arith(h, fhalf_of(&s[0], l, &p, 0, hi), fhalf_of(&s[1], l, &p, 1, hi),
                                                     fhalf_of(&s[2], l, &p, 2, hi), mode);
                                if (p.clamp)
                                        res[hi] = half_clamp(res[hi]);
                        }
                        d[l] = res[0] | (uint32_t) res[1] << 16;
                }
                return 0;
        }
        if (is_mix) {
                LANES {
                        float x = fmaf(mix_src(&s[0], l, &p, 0, mode), mix_src(&s[1], l, &p, 1, mode), mix_src(&s[2], l, &p, 2, mode));
                        if (p.clamp)
                                x = isnan(x) ? 0.0f : fminf(fmaxf(x, 0.0f), 1.0f);
                        if (op == VOP3P_V_FMA_MIX_F32) {
                                d[l] = f2u(x);
                                continue;
                        }
                        /* mixlo/mixhi: the f32 result rounded to f16 into one half, the other kept
                         * (LLVM selects fptrunc(fma f32) to them). */
                        uint16_t r16 = half_out(half_from(x), mode);
                        d[l] = op == VOP3P_V_FMA_MIXLO_F16 ? (d[l] & 0xffff0000u) | r16 : (d[l] & 0xffffu) | (uint32_t) r16 << 16;
                }
                return 0;
        }
        switch (op) {
        case VOP3P_V_DOT2_I32_I16: case VOP3P_V_DOT2_U32_U16: case VOP3P_V_DOT4_I32_I8: case VOP3P_V_DOT4_U32_U8:
        case VOP3P_V_DOT8_I32_I4: case VOP3P_V_DOT8_U32_U4: {
                static const unsigned bits[] = {
                        [VOP3P_V_DOT2_I32_I16] = 16, [VOP3P_V_DOT2_U32_U16] = 16, [VOP3P_V_DOT4_I32_I8] = 8,
                        [VOP3P_V_DOT4_U32_U8] = 8, [VOP3P_V_DOT8_I32_I4] = 4, [VOP3P_V_DOT8_U32_U4] = 4,
                };
                bool is_signed = op == VOP3P_V_DOT2_I32_I16 || op == VOP3P_V_DOT4_I32_I8 || op == VOP3P_V_DOT8_I32_I4;
                /* Whole registers: the default op_sel 0 / op_sel_hi 1 and no negation only. */
                if (p.op_sel || p.op_sel_hi != 7 || p.neg_lo || p.neg_hi)
                        return sim_isa_unsupported(r, w, in);
                LANES d[l] = dot(U(&s[0], l), U(&s[1], l), U(&s[2], l), bits[op], is_signed, p.clamp);
                return 0;
        }
        case VOP3P_V_PK_MAD_I16: case VOP3P_V_PK_MUL_LO_U16: case VOP3P_V_PK_ADD_I16: case VOP3P_V_PK_SUB_I16:
        case VOP3P_V_PK_LSHLREV_B16: case VOP3P_V_PK_LSHRREV_B16: case VOP3P_V_PK_ASHRREV_I16: case VOP3P_V_PK_MAX_I16:
        case VOP3P_V_PK_MIN_I16: case VOP3P_V_PK_MAD_U16: case VOP3P_V_PK_ADD_U16: case VOP3P_V_PK_SUB_U16:
        case VOP3P_V_PK_MAX_U16: case VOP3P_V_PK_MIN_U16:
                if (p.neg_lo || p.neg_hi)
                        return sim_isa_unsupported(r, w, in);   /* no negation of integers */
                LANES {
                        uint16_t lo = int_op(op, half_of(&s[0], l, &p, 0, 0), half_of(&s[1], l, &p, 1, 0),
                                             half_of(&s[2], l, &p, 2, 0), p.clamp);
                        uint16_t hi = int_op(op, half_of(&s[0], l, &p, 0, 1), half_of(&s[1], l, &p, 1, 1),
                                             half_of(&s[2], l, &p, 2, 1), p.clamp);
                        d[l] = lo | (uint32_t) hi << 16;
                }
                return 0;
        default:
                return sim_isa_unsupported(r, w, in);
        }
}
