/* SPDX-License-Identifier: MIT */
/*
 * The vector ALU: VOP1, VOP2, VOPC and VOP3 (RDNA2 ISA chapter 6 "Vector ALU
 * Operations", encodings in chapter 13). Every form is first brought to the
 * VOP3 view (VOP3 opcode space: VOPC 0-255, VOP2 256+op, VOP1 384+op, native
 * VOP3 320-383 and 512-1023, as in LLVM's VOP*Instructions.td gfx10 records),
 * with up to three source operands, a VGPR destination or an SGPR mask
 * destination, and the VOP3 input (abs, neg) and output (clamp, omod)
 * modifiers; one switch then executes it over the active lanes of EXEC.
 * Float arithmetic is the host's IEEE single/double arithmetic, round to
 * nearest even, denormals kept (the descriptors clang emits for gfx1030 set
 * FLOAT_DENORM_MODE to "preserve").
 *
 * The ISA documents v_rcp_f32, v_rsq_f32 and v_sqrt_f32 as IEEE with 1 ULP
 * accuracy, and v_rcp/v_rsq/v_sqrt_f64 as 2^29 ULP (RDNA2 ISA §6.2, VOP1
 * opcode descriptions); their hardware results are not specified to the
 * bit. This model returns the correctly rounded value, which is within
 * those bounds and deterministic: v_rcp and v_sqrt are the host's IEEE
 * division and square root, v_rsq_f32/f64 the correctly rounded 1/sqrt(x)
 * (vfloat_rsq, exact integer comparison against the rounding midpoints),
 * so the hardware's own result may differ from it by 1 ULP. v_exp_f32,
 * v_log_f32, v_sin_f32 and v_cos_f32 are the host C library's exp2f, log2f,
 * sin and cos (glibc: within 1 ULP, the same bits for a given libm). As on
 * the hardware, v_rcp/v_rsq/v_sqrt/v_exp/v_log_f32 flush denormal inputs
 * and results to zero whatever the mode register says.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "sim-isa-valu.h"
#include "sim-isa-opcodes.h"

void sim_isa_src_init(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, Src *s, unsigned code, SrcKind kind) {
        s->abs = s->neg = 0;
        if (code >= OPND_VGPR0) {
                unsigned v = code - OPND_VGPR0;
                s->lo = w->v[v];
                s->hi = w->v[(v + 1) & 255];
                s->stride = 1;
                return;
        }
        if (kind == K32) {
                s->k[0] = sim_isa_sread(r, w, in, code);
                s->k[1] = 0;
        } else if (kind == K64F && code == OPND_LITERAL) {
                /* A 64-bit float literal supplies the high dword. */
                s->k[0] = 0;
                s->k[1] = in->literal;
        } else {
                uint64_t v = sim_isa_sread64(r, w, in, code);
                s->k[0] = (uint32_t) v;
                s->k[1] = (uint32_t) (v >> 32);
        }
        s->lo = &s->k[0];
        s->hi = &s->k[1];
        s->stride = 0;
}

static uint32_t bfe_u32(uint32_t v, uint32_t off, uint32_t width) {
        off &= 31, width &= 31;
        if (width == 0)
                return 0;
        if (off + width < 32)
                return (v << (32 - off - width)) >> (32 - width);
        return v >> off;
}
static uint32_t bfe_i32(uint32_t v, uint32_t off, uint32_t width) {
        off &= 31, width &= 31;
        if (width == 0)
                return 0;
        if (off + width < 32)
                return (uint32_t) ((int32_t) (v << (32 - off - width)) >> (32 - width));
        return (uint32_t) ((int32_t) v >> off);
}

static uint32_t perm_byte(uint64_t both, uint32_t s0, uint32_t s1, unsigned sel) {
        if (sel < 8)
                return (both >> (8 * sel)) & 0xff;
        switch (sel) {
        case 8: return (s1 >> 15) & 1 ? 0xff : 0;
        case 9: return (s1 >> 31) & 1 ? 0xff : 0;
        case 10: return (s0 >> 15) & 1 ? 0xff : 0;
        case 11: return (s0 >> 31) & 1 ? 0xff : 0;
        case 12: return 0;
        default: return 0xff;
        }
}

/* A denormal as the zero of its sign. */
static float ftz(float x) {
        return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x;
}

static float fmin_ieee(float a, float b) {
        return fminf(a, b);
}
static float fmax_ieee(float a, float b) {
        return fmaxf(a, b);
}
/* Kinds of the three sources of each op (K32 unless listed). */
static void src_kinds(unsigned op, SrcKind k[3]) {
        k[0] = k[1] = k[2] = K32;
        switch (op) {
        case VOP3_V_FMA_F64: case VOP3_V_DIV_FIXUP_F64: case VOP3_V_DIV_SCALE_F64: case VOP3_V_DIV_FMAS_F64:
                k[0] = k[1] = k[2] = K64F;
                break;
        case VOP3_V_ADD_F64: case VOP3_V_MUL_F64: case VOP3_V_MIN_F64: case VOP3_V_MAX_F64:
                k[0] = k[1] = K64F;
                break;
        case VOP3_V_LDEXP_F64: case VOP3_V_TRIG_PREOP_F64:
                k[0] = K64F;
                break;
        case VOP3_V_LSHLREV_B64: case VOP3_V_LSHRREV_B64: case VOP3_V_ASHRREV_I64:
                k[1] = K64I;
                break;
        case VOP3_V_MAD_U64_U32: case VOP3_V_MAD_I64_I32:
                k[2] = K64I;
                break;
        case 384 + VOP1_V_CVT_I32_F64: case 384 + VOP1_V_CVT_F32_F64: case 384 + VOP1_V_CVT_U32_F64:
        case 384 + VOP1_V_TRUNC_F64: case 384 + VOP1_V_CEIL_F64: case 384 + VOP1_V_RNDNE_F64:
        case 384 + VOP1_V_FLOOR_F64: case 384 + VOP1_V_RCP_F64: case 384 + VOP1_V_RSQ_F64:
        case 384 + VOP1_V_SQRT_F64: case 384 + VOP1_V_FREXP_EXP_I32_F64: case 384 + VOP1_V_FREXP_MANT_F64:
        case 384 + VOP1_V_FRACT_F64:
                k[0] = K64F;
                break;
        }
}

/* VOP3 opcodes whose op_sel bits mean something. */
static bool vop3_has_opsel(unsigned op) {
        return op == VOP3_V_PERMLANE16_B32 || op == VOP3_V_PERMLANEX16_B32 || sim_isa_vop16_has_opsel(op);
}

static int exec_vop(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v) {
        uint64_t exec = v->exec, mask = 0;
        unsigned op = v->op, vd = v->vdst;
        uint32_t *d = w->v[vd], *d1 = w->v[(vd + 1) & 255];
        Src s[3];
        SrcKind k[3];

        if (op < 256)
                return sim_isa_exec_vopc(r, w, in, v);

        src_kinds(op, k);
        for (unsigned i = 0; i < 3; i++) {
                sim_isa_src_init(r, w, in, &s[i], i < v->nsrc ? v->src[i] : 128, k[i]);
                s[i].abs = (v->abs >> i) & 1;
                s[i].neg = (v->neg >> i) & 1;
        }

        /* Integer ops ignore abs/neg; results of float ops go through out_f32/out_f64. */
        switch (op) {
        /* VOP2 (256 + op) */
        case 256 + VOP2_V_CNDMASK_B32: {
                uint64_t m = sim_isa_sread_mask(r, w, in, v->carry_in);
                LANES d[l] = (m >> l) & 1 ? f2u(F(&s[1], l)) : f2u(F(&s[0], l));
                return 0;
        }
        case 256 + VOP2_V_ADD_F32: LANES d[l] = f2u(out_f32(v, F(&s[0], l) + F(&s[1], l))); return 0;
        case 256 + VOP2_V_SUB_F32: LANES d[l] = f2u(out_f32(v, F(&s[0], l) - F(&s[1], l))); return 0;
        case 256 + VOP2_V_SUBREV_F32: LANES d[l] = f2u(out_f32(v, F(&s[1], l) - F(&s[0], l))); return 0;
        case 256 + VOP2_V_MUL_F32: LANES d[l] = f2u(out_f32(v, F(&s[0], l) * F(&s[1], l))); return 0;
        case 256 + VOP2_V_MUL_LEGACY_F32:
                LANES {
                        float a = F(&s[0], l), b = F(&s[1], l);
                        d[l] = f2u(out_f32(v, (a == 0.0f || b == 0.0f) ? 0.0f : a * b));
                }
                return 0;
        case 256 + VOP2_V_MIN_F32: LANES d[l] = f2u(out_f32(v, fmin_ieee(F(&s[0], l), F(&s[1], l)))); return 0;
        case 256 + VOP2_V_MAX_F32: LANES d[l] = f2u(out_f32(v, fmax_ieee(F(&s[0], l), F(&s[1], l)))); return 0;
        case 256 + VOP2_V_FMAC_F32:
                LANES d[l] = f2u(out_f32(v, fmaf(F(&s[0], l), F(&s[1], l), u2f(d[l]))));
                return 0;
        case 256 + VOP2_V_FMAMK_F32:
                LANES d[l] = f2u(fmaf(F(&s[0], l), u2f(in->literal), F(&s[1], l)));
                return 0;
        case 256 + VOP2_V_FMAAK_F32:
                LANES d[l] = f2u(fmaf(F(&s[0], l), F(&s[1], l), u2f(in->literal)));
                return 0;
        case 256 + VOP2_V_MUL_I32_I24:
                LANES d[l] = (uint32_t) ((int32_t) (U(&s[0], l) << 8) >> 8) * (uint32_t) ((int32_t) (U(&s[1], l) << 8) >> 8);
                return 0;
        case 256 + VOP2_V_MUL_HI_I32_I24:
                LANES d[l] = (uint32_t) (((int64_t) ((int32_t) (U(&s[0], l) << 8) >> 8) *
                                          ((int32_t) (U(&s[1], l) << 8) >> 8)) >> 32);
                return 0;
        case 256 + VOP2_V_MUL_U32_U24:
                LANES d[l] = (U(&s[0], l) & 0xffffff) * (U(&s[1], l) & 0xffffff);
                return 0;
        case 256 + VOP2_V_MUL_HI_U32_U24:
                LANES d[l] = (uint32_t) (((uint64_t) (U(&s[0], l) & 0xffffff) * (U(&s[1], l) & 0xffffff)) >> 32);
                return 0;
        case 256 + VOP2_V_MIN_I32: LANES d[l] = (int32_t) U(&s[0], l) < (int32_t) U(&s[1], l) ? U(&s[0], l) : U(&s[1], l); return 0;
        case 256 + VOP2_V_MAX_I32: LANES d[l] = (int32_t) U(&s[0], l) > (int32_t) U(&s[1], l) ? U(&s[0], l) : U(&s[1], l); return 0;
        case 256 + VOP2_V_MIN_U32: LANES d[l] = MIN_U(U(&s[0], l), U(&s[1], l)); return 0;
        case 256 + VOP2_V_MAX_U32: LANES d[l] = U(&s[0], l) > U(&s[1], l) ? U(&s[0], l) : U(&s[1], l); return 0;
        case 256 + VOP2_V_LSHRREV_B32: LANES d[l] = U(&s[1], l) >> (U(&s[0], l) & 31); return 0;
        case 256 + VOP2_V_ASHRREV_I32: LANES d[l] = (uint32_t) ((int32_t) U(&s[1], l) >> (U(&s[0], l) & 31)); return 0;
        case 256 + VOP2_V_LSHLREV_B32: LANES d[l] = U(&s[1], l) << (U(&s[0], l) & 31); return 0;
        case 256 + VOP2_V_AND_B32: LANES d[l] = U(&s[0], l) & U(&s[1], l); return 0;
        case 256 + VOP2_V_OR_B32: LANES d[l] = U(&s[0], l) | U(&s[1], l); return 0;
        case 256 + VOP2_V_XOR_B32: LANES d[l] = U(&s[0], l) ^ U(&s[1], l); return 0;
        case 256 + VOP2_V_XNOR_B32: LANES d[l] = ~(U(&s[0], l) ^ U(&s[1], l)); return 0;
        case 256 + VOP2_V_ADD_NC_U32:
                if (v->clamp)
                        LANES {
                                uint64_t t = (uint64_t) U(&s[0], l) + U(&s[1], l);
                                d[l] = t > UINT32_MAX ? UINT32_MAX : (uint32_t) t;
                        }
                else
                        LANES d[l] = U(&s[0], l) + U(&s[1], l);
                return 0;
        case 256 + VOP2_V_SUB_NC_U32:
                if (v->clamp)
                        LANES d[l] = U(&s[0], l) < U(&s[1], l) ? 0 : U(&s[0], l) - U(&s[1], l);
                else
                        LANES d[l] = U(&s[0], l) - U(&s[1], l);
                return 0;
        case 256 + VOP2_V_SUBREV_NC_U32:
                if (v->clamp)
                        LANES d[l] = U(&s[1], l) < U(&s[0], l) ? 0 : U(&s[1], l) - U(&s[0], l);
                else
                        LANES d[l] = U(&s[1], l) - U(&s[0], l);
                return 0;
        case 256 + VOP2_V_ADD_CO_CI_U32: case 256 + VOP2_V_SUB_CO_CI_U32: case 256 + VOP2_V_SUBREV_CO_CI_U32: {
                uint64_t ci = sim_isa_sread_mask(r, w, in, v->carry_in);
                LANES {
                        uint64_t a = U(&s[0], l), b = U(&s[1], l), c = (ci >> l) & 1, t;
                        if (op == 256 + VOP2_V_ADD_CO_CI_U32)
                                t = a + b + c, mask |= (uint64_t) (t >> 32 != 0) << l;
                        else if (op == 256 + VOP2_V_SUB_CO_CI_U32)
                                t = a - b - c, mask |= (uint64_t) (b + c > a) << l;
                        else
                                t = b - a - c, mask |= (uint64_t) (a + c > b) << l;
                        d[l] = (uint32_t) t;
                }
                sim_isa_swrite_mask(w, v->sdst, mask);
                return 0;
        }
        /* VOP3-only, VOP3b carry forms */
        case VOP3_V_ADD_CO_U32: case VOP3_V_SUB_CO_U32: case VOP3_V_SUBREV_CO_U32:
                LANES {
                        uint64_t a = U(&s[0], l), b = U(&s[1], l), t;
                        if (op == VOP3_V_ADD_CO_U32)
                                t = a + b, mask |= (uint64_t) (t >> 32 != 0) << l;
                        else if (op == VOP3_V_SUB_CO_U32)
                                t = a - b, mask |= (uint64_t) (b > a) << l;
                        else
                                t = b - a, mask |= (uint64_t) (a > b) << l;
                        d[l] = (uint32_t) t;
                }
                sim_isa_swrite_mask(w, v->sdst, mask);
                return 0;
        case VOP3_V_ADD_NC_I32: case VOP3_V_SUB_NC_I32:
                /* clamp saturates to the signed range (OpenCL add_sat/sub_sat). */
                LANES {
                        int64_t a = (int32_t) U(&s[0], l), b = (int32_t) U(&s[1], l);
                        int64_t t = op == VOP3_V_ADD_NC_I32 ? a + b : a - b;
                        if (v->clamp)
                                t = t > INT32_MAX ? INT32_MAX : t < INT32_MIN ? INT32_MIN : t;
                        d[l] = (uint32_t) t;
                }
                return 0;
        case VOP3_V_MAD_U32_U24:
                LANES d[l] = (U(&s[0], l) & 0xffffff) * (U(&s[1], l) & 0xffffff) + U(&s[2], l);
                return 0;
        case VOP3_V_MAD_I32_I24:
                LANES d[l] = (uint32_t) ((int32_t) (U(&s[0], l) << 8) >> 8) * (uint32_t) ((int32_t) (U(&s[1], l) << 8) >> 8) + U(&s[2], l);
                return 0;
        case VOP3_V_MUL_LO_U32: LANES d[l] = U(&s[0], l) * U(&s[1], l); return 0;
        case VOP3_V_MUL_HI_U32: LANES d[l] = (uint32_t) (((uint64_t) U(&s[0], l) * U(&s[1], l)) >> 32); return 0;
        case VOP3_V_MUL_HI_I32:
                LANES d[l] = (uint32_t) (((int64_t) (int32_t) U(&s[0], l) * (int32_t) U(&s[1], l)) >> 32);
                return 0;
        case VOP3_V_MAD_U64_U32:
                LANES {
                        unsigned __int128 t = (unsigned __int128) ((uint64_t) U(&s[0], l) * U(&s[1], l)) + U64(&s[2], l);
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                        mask |= (uint64_t) ((t >> 64) != 0) << l;
                }
                sim_isa_swrite_mask(w, v->sdst, mask);
                return 0;
        case VOP3_V_MAD_I64_I32:
                LANES {
                        __int128 t = (__int128) ((int64_t) (int32_t) U(&s[0], l) * (int32_t) U(&s[1], l)) +
                                     (int64_t) U64(&s[2], l);
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) ((uint64_t) t >> 32);
                        mask |= (uint64_t) (t != (int64_t) t) << l;
                }
                sim_isa_swrite_mask(w, v->sdst, mask);
                return 0;
        case VOP3_V_LSHLREV_B64:
                LANES {
                        uint64_t t = U64(&s[1], l) << (U(&s[0], l) & 63);
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_LSHRREV_B64:
                LANES {
                        uint64_t t = U64(&s[1], l) >> (U(&s[0], l) & 63);
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_ASHRREV_I64:
                LANES {
                        uint64_t t = (uint64_t) ((int64_t) U64(&s[1], l) >> (U(&s[0], l) & 63));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_BFE_U32: LANES d[l] = bfe_u32(U(&s[0], l), U(&s[1], l), U(&s[2], l)); return 0;
        case VOP3_V_BFE_I32: LANES d[l] = bfe_i32(U(&s[0], l), U(&s[1], l), U(&s[2], l)); return 0;
        case VOP3_V_BFI_B32: LANES d[l] = (U(&s[0], l) & U(&s[1], l)) | (~U(&s[0], l) & U(&s[2], l)); return 0;
        case VOP3_V_BFM_B32:
                LANES d[l] = ((U(&s[0], l) & 31) ? ((1u << (U(&s[0], l) & 31)) - 1) : 0) << (U(&s[1], l) & 31);
                return 0;
        case VOP3_V_ALIGNBIT_B32:
                LANES d[l] = (uint32_t) ((((uint64_t) U(&s[0], l) << 32) | U(&s[1], l)) >> (U(&s[2], l) & 31));
                return 0;
        case VOP3_V_ALIGNBYTE_B32:
                LANES d[l] = (uint32_t) ((((uint64_t) U(&s[0], l) << 32) | U(&s[1], l)) >> (8 * (U(&s[2], l) & 3)));
                return 0;
        case VOP3_V_PERM_B32:
                LANES {
                        uint32_t a = U(&s[0], l), b = U(&s[1], l), sel = U(&s[2], l), o = 0;
                        uint64_t both = (uint64_t) a << 32 | b;
                        for (unsigned i = 0; i < 4; i++)
                                o |= perm_byte(both, a, b, (sel >> (8 * i)) & 0xff) << (8 * i);
                        d[l] = o;
                }
                return 0;
        case VOP3_V_XOR3_B32: LANES d[l] = U(&s[0], l) ^ U(&s[1], l) ^ U(&s[2], l); return 0;
        case VOP3_V_OR3_B32: LANES d[l] = U(&s[0], l) | U(&s[1], l) | U(&s[2], l); return 0;
        case VOP3_V_AND_OR_B32: LANES d[l] = (U(&s[0], l) & U(&s[1], l)) | U(&s[2], l); return 0;
        case VOP3_V_LSHL_OR_B32: LANES d[l] = (U(&s[0], l) << (U(&s[1], l) & 31)) | U(&s[2], l); return 0;
        case VOP3_V_LSHL_ADD_U32: LANES d[l] = (U(&s[0], l) << (U(&s[1], l) & 31)) + U(&s[2], l); return 0;
        case VOP3_V_ADD_LSHL_U32: LANES d[l] = (U(&s[0], l) + U(&s[1], l)) << (U(&s[2], l) & 31); return 0;
        case VOP3_V_ADD3_U32: LANES d[l] = U(&s[0], l) + U(&s[1], l) + U(&s[2], l); return 0;
        case VOP3_V_XAD_U32: LANES d[l] = (U(&s[0], l) ^ U(&s[1], l)) + U(&s[2], l); return 0;
        case VOP3_V_MIN3_I32:
                LANES {
                        int32_t a = (int32_t) U(&s[0], l), b = (int32_t) U(&s[1], l), c = (int32_t) U(&s[2], l);
                        int32_t m = a < b ? a : b;
                        d[l] = (uint32_t) (m < c ? m : c);
                }
                return 0;
        case VOP3_V_MAX3_I32:
                LANES {
                        int32_t a = (int32_t) U(&s[0], l), b = (int32_t) U(&s[1], l), c = (int32_t) U(&s[2], l);
                        int32_t m = a > b ? a : b;
                        d[l] = (uint32_t) (m > c ? m : c);
                }
                return 0;
        case VOP3_V_MIN3_U32:
                LANES d[l] = MIN_U(MIN_U(U(&s[0], l), U(&s[1], l)), U(&s[2], l));
                return 0;
        case VOP3_V_MAX3_U32:
                LANES {
                        uint32_t a = U(&s[0], l), b = U(&s[1], l), c = U(&s[2], l), m = a > b ? a : b;
                        d[l] = m > c ? m : c;
                }
                return 0;
        case VOP3_V_MED3_I32:
                LANES {
                        int32_t a = (int32_t) U(&s[0], l), b = (int32_t) U(&s[1], l), c = (int32_t) U(&s[2], l);
                        int32_t lo = a < b ? a : b, hi = a < b ? b : a;
                        d[l] = (uint32_t) (c < lo ? lo : c > hi ? hi : c);
                }
                return 0;
        case VOP3_V_MED3_U32:
                LANES {
                        uint32_t a = U(&s[0], l), b = U(&s[1], l), c = U(&s[2], l);
                        uint32_t lo = a < b ? a : b, hi = a < b ? b : a;
                        d[l] = c < lo ? lo : c > hi ? hi : c;
                }
                return 0;
        case VOP3_V_MIN3_F32:
                LANES d[l] = f2u(out_f32(v, fminf(fminf(F(&s[0], l), F(&s[1], l)), F(&s[2], l))));
                return 0;
        case VOP3_V_MAX3_F32:
                LANES d[l] = f2u(out_f32(v, fmaxf(fmaxf(F(&s[0], l), F(&s[1], l)), F(&s[2], l))));
                return 0;
        case VOP3_V_MED3_F32:
                LANES d[l] = f2u(out_f32(v, vfloat_med3(F(&s[0], l), F(&s[1], l), F(&s[2], l))));
                return 0;
        case VOP3_V_FMA_F32: LANES d[l] = f2u(out_f32(v, fmaf(F(&s[0], l), F(&s[1], l), F(&s[2], l)))); return 0;
        case VOP3_V_FMA_LEGACY_F32:
                LANES {
                        float a = F(&s[0], l), b = F(&s[1], l);
                        d[l] = f2u(out_f32(v, (a == 0.0f || b == 0.0f) ? F(&s[2], l) + 0.0f : fmaf(a, b, F(&s[2], l))));
                }
                return 0;
        case VOP3_V_FMA_F64:
                LANES {
                        uint64_t t = d2u(out_f64(v, fma(D(&s[0], l), D(&s[1], l), D(&s[2], l))));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_ADD_F64: case VOP3_V_MUL_F64: case VOP3_V_MIN_F64: case VOP3_V_MAX_F64:
                LANES {
                        double a = D(&s[0], l), b = D(&s[1], l), x;
                        x = op == VOP3_V_ADD_F64 ? a + b : op == VOP3_V_MUL_F64 ? a * b :
                            op == VOP3_V_MIN_F64 ? fmin(a, b) : fmax(a, b);
                        uint64_t t = d2u(out_f64(v, x));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_LDEXP_F64:
                LANES {
                        uint64_t t = d2u(out_f64(v, ldexp(D(&s[0], l), (int32_t) U(&s[1], l))));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_TRIG_PREOP_F64:
                LANES {
                        uint64_t t = d2u(out_f64(v, vfloat_trig_preop(D(&s[0], l), U(&s[1], l))));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_LDEXP_F32: LANES d[l] = f2u(out_f32(v, ldexpf(F(&s[0], l), (int32_t) U(&s[1], l)))); return 0;
        case VOP3_V_DIV_SCALE_F32:
                LANES {
                        bool vcc;
                        d[l] = f2u(vfloat_div_scale32(F(&s[0], l), F(&s[1], l), F(&s[2], l), &vcc));
                        mask |= (uint64_t) vcc << l;
                }
                sim_isa_swrite_mask(w, v->sdst, mask);
                return 0;
        case VOP3_V_DIV_SCALE_F64:
                LANES {
                        bool vcc;
                        uint64_t t = d2u(vfloat_div_scale64(D(&s[0], l), D(&s[1], l), D(&s[2], l), &vcc));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                        mask |= (uint64_t) vcc << l;
                }
                sim_isa_swrite_mask(w, v->sdst, mask);
                return 0;
        case VOP3_V_DIV_FMAS_F32: {
                uint64_t vcc = wave_vcc(w);
                LANES d[l] = f2u(out_f32(v, vfloat_div_fmas32(F(&s[0], l), F(&s[1], l), F(&s[2], l), (vcc >> l) & 1)));
                return 0;
        }
        case VOP3_V_DIV_FMAS_F64: {
                uint64_t vcc = wave_vcc(w);
                LANES {
                        uint64_t t = d2u(out_f64(v, vfloat_div_fmas64(D(&s[0], l), D(&s[1], l), D(&s[2], l), (vcc >> l) & 1)));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        }
        case VOP3_V_DIV_FIXUP_F32:
                LANES d[l] = f2u(out_f32(v, (float) vfloat_div_fixup(F(&s[0], l), F(&s[1], l), F(&s[2], l))));
                return 0;
        case VOP3_V_DIV_FIXUP_F64:
                LANES {
                        uint64_t t = d2u(out_f64(v, vfloat_div_fixup(D(&s[0], l), D(&s[1], l), D(&s[2], l))));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case VOP3_V_BCNT_U32_B32: LANES d[l] = __builtin_popcount(U(&s[0], l)) + U(&s[1], l); return 0;
        /* Bits of S0 below the lane in the low (LO) or high (HI) half of a
         * 64-bit thread mask (RDNA2 ISA, V_MBCNT_LO/HI_U32_B32). */
        case VOP3_V_MBCNT_LO_U32_B32:
                LANES d[l] = __builtin_popcount(U(&s[0], l) & (l >= 32 ? ~0u : (1u << l) - 1)) + U(&s[1], l);
                return 0;
        case VOP3_V_MBCNT_HI_U32_B32:
                LANES d[l] = (l > 32 ? __builtin_popcount(U(&s[0], l) & ((1u << (l - 32)) - 1)) : 0) + U(&s[1], l);
                return 0;
        /* The lane select is S1 modulo the wave size (its low 5 or 6 bits). */
        case VOP3_V_READLANE_B32:
                sim_isa_swrite(w, v->vdst, s[0].lo[(U(&s[1], 0) & (w->lanes - 1)) * s[0].stride]);
                return 0;
        case VOP3_V_WRITELANE_B32:
                d[U(&s[1], 0) & (w->lanes - 1)] = U(&s[0], 0);
                return 0;
        case VOP3_V_PERMLANE16_B32: case VOP3_V_PERMLANEX16_B32:
                return sim_isa_exec_permlane(r, w, in, v);

        /* VOP1 (384 + op) */
        case 384 + VOP1_V_NOP:
                return 0;
        case 384 + VOP1_V_MOV_B32: LANES d[l] = U(&s[0], l); return 0;
        case 384 + VOP1_V_READFIRSTLANE_B32: {
                unsigned lane = exec ? (unsigned) __builtin_ctzll(exec) : 0;
                sim_isa_swrite(w, v->vdst, U(&s[0], lane));
                return 0;
        }
        case 384 + VOP1_V_CVT_F32_I32: LANES d[l] = f2u(out_f32(v, (float) (int32_t) U(&s[0], l))); return 0;
        case 384 + VOP1_V_CVT_F32_U32: LANES d[l] = f2u(out_f32(v, (float) U(&s[0], l))); return 0;
        case 384 + VOP1_V_CVT_U32_F32: LANES d[l] = vfloat_cvt_u32(F(&s[0], l)); return 0;
        case 384 + VOP1_V_CVT_I32_F32: LANES d[l] = (uint32_t) vfloat_cvt_i32(F(&s[0], l)); return 0;
        case 384 + VOP1_V_CVT_RPI_I32_F32: LANES d[l] = (uint32_t) vfloat_cvt_i32(floorf(F(&s[0], l) + 0.5f)); return 0;
        case 384 + VOP1_V_CVT_FLR_I32_F32: LANES d[l] = (uint32_t) vfloat_cvt_i32(floorf(F(&s[0], l))); return 0;
        case 384 + VOP1_V_CVT_F32_F64: LANES d[l] = f2u(out_f32(v, (float) D(&s[0], l))); return 0;
        case 384 + VOP1_V_CVT_I32_F64: LANES d[l] = (uint32_t) vfloat_cvt_i32(D(&s[0], l)); return 0;
        case 384 + VOP1_V_CVT_U32_F64: LANES d[l] = vfloat_cvt_u32(D(&s[0], l)); return 0;
        case 384 + VOP1_V_CVT_F64_F32: case 384 + VOP1_V_CVT_F64_I32: case 384 + VOP1_V_CVT_F64_U32:
        case 384 + VOP1_V_TRUNC_F64: case 384 + VOP1_V_CEIL_F64: case 384 + VOP1_V_RNDNE_F64:
        case 384 + VOP1_V_FLOOR_F64: case 384 + VOP1_V_RCP_F64: case 384 + VOP1_V_RSQ_F64:
        case 384 + VOP1_V_SQRT_F64: case 384 + VOP1_V_FRACT_F64: case 384 + VOP1_V_FREXP_MANT_F64:
                LANES {
                        double x;
                        switch (op - 384) {
                        case VOP1_V_CVT_F64_F32: x = F(&s[0], l); break;
                        case VOP1_V_CVT_F64_I32: x = (int32_t) U(&s[0], l); break;
                        case VOP1_V_CVT_F64_U32: x = U(&s[0], l); break;
                        case VOP1_V_TRUNC_F64: x = trunc(D(&s[0], l)); break;
                        case VOP1_V_CEIL_F64: x = ceil(D(&s[0], l)); break;
                        case VOP1_V_RNDNE_F64: x = nearbyint(D(&s[0], l)); break;
                        case VOP1_V_FLOOR_F64: x = floor(D(&s[0], l)); break;
                        case VOP1_V_RCP_F64: x = 1.0 / D(&s[0], l); break;
                        case VOP1_V_RSQ_F64: x = vfloat_rsq(D(&s[0], l), 53); break;
                        case VOP1_V_SQRT_F64: x = sqrt(D(&s[0], l)); break;
                        case VOP1_V_FRACT_F64: {
                                double a = D(&s[0], l);
                                x = isinf(a) ? NAN : fmin(a - floor(a), 0x1.fffffffffffffp-1);
                                break;
                        }
                        default: {
                                double a = D(&s[0], l);
                                int e;
                                x = (isnan(a) || isinf(a)) ? a : frexp(a, &e);
                                break;
                        }
                        }
                        uint64_t t = d2u(out_f64(v, x));
                        d[l] = (uint32_t) t, d1[l] = (uint32_t) (t >> 32);
                }
                return 0;
        case 384 + VOP1_V_FREXP_EXP_I32_F64:
                LANES {
                        double a = D(&s[0], l);
                        int e = 0;
                        if (!isnan(a) && !isinf(a))
                                frexp(a, &e);
                        d[l] = (uint32_t) e;
                }
                return 0;
        case 384 + VOP1_V_CVT_F32_UBYTE0: case 384 + VOP1_V_CVT_F32_UBYTE1:
        case 384 + VOP1_V_CVT_F32_UBYTE2: case 384 + VOP1_V_CVT_F32_UBYTE3: {
                unsigned sh = 8 * (op - 384 - VOP1_V_CVT_F32_UBYTE0);
                LANES d[l] = f2u(out_f32(v, (float) ((U(&s[0], l) >> sh) & 0xff)));
                return 0;
        }
        case 384 + VOP1_V_FRACT_F32:
                LANES {
                        float a = F(&s[0], l);
                        d[l] = f2u(out_f32(v, isinf(a) ? NAN : fminf(a - floorf(a), 0x1.fffffep-1f)));
                }
                return 0;
        case 384 + VOP1_V_TRUNC_F32: LANES d[l] = f2u(out_f32(v, truncf(F(&s[0], l)))); return 0;
        case 384 + VOP1_V_CEIL_F32: LANES d[l] = f2u(out_f32(v, ceilf(F(&s[0], l)))); return 0;
        case 384 + VOP1_V_RNDNE_F32: LANES d[l] = f2u(out_f32(v, nearbyintf(F(&s[0], l)))); return 0;
        case 384 + VOP1_V_FLOOR_F32: LANES d[l] = f2u(out_f32(v, floorf(F(&s[0], l)))); return 0;
        /* These five flush denormal inputs and results to zero whatever the
         * mode (Mesa src/amd/compiler/aco_ir.h, enum fp_denorm: "v_rcp_f32,
         * v_exp_f32, v_log_f32, v_sqrt_f32, v_rsq_f32 ... always flush
         * denormals"; llvm/llvm-project pull request #211017 for v_rcp_f32). */
        case 384 + VOP1_V_EXP_F32: LANES d[l] = f2u(out_f32(v, ftz(exp2f(ftz(F(&s[0], l)))))); return 0;
        case 384 + VOP1_V_LOG_F32: LANES d[l] = f2u(out_f32(v, ftz(log2f(ftz(F(&s[0], l)))))); return 0;
        case 384 + VOP1_V_RCP_F32: case 384 + VOP1_V_RCP_IFLAG_F32:
                LANES d[l] = f2u(out_f32(v, ftz(1.0f / ftz(F(&s[0], l)))));
                return 0;
        case 384 + VOP1_V_RSQ_F32: LANES d[l] = f2u(out_f32(v, (float) vfloat_rsq(ftz(F(&s[0], l)), 24))); return 0;
        case 384 + VOP1_V_SQRT_F32: LANES d[l] = f2u(out_f32(v, ftz(sqrtf(ftz(F(&s[0], l)))))); return 0;
        case 384 + VOP1_V_SIN_F32:
                LANES d[l] = f2u(out_f32(v, (float) sin((double) F(&s[0], l) * 2.0 * M_PI)));
                return 0;
        case 384 + VOP1_V_COS_F32:
                LANES d[l] = f2u(out_f32(v, (float) cos((double) F(&s[0], l) * 2.0 * M_PI)));
                return 0;
        case 384 + VOP1_V_NOT_B32: LANES d[l] = ~U(&s[0], l); return 0;
        case 384 + VOP1_V_BFREV_B32:
                LANES {
                        uint32_t a = U(&s[0], l), o = 0;
                        for (unsigned i = 0; i < 32; i++)
                                o |= ((a >> i) & 1) << (31 - i);
                        d[l] = o;
                }
                return 0;
        case 384 + VOP1_V_FFBH_U32: LANES d[l] = U(&s[0], l) ? (uint32_t) __builtin_clz(U(&s[0], l)) : ~0u; return 0;
        case 384 + VOP1_V_FFBL_B32: LANES d[l] = U(&s[0], l) ? (uint32_t) __builtin_ctz(U(&s[0], l)) : ~0u; return 0;
        case 384 + VOP1_V_FFBH_I32:
                LANES {
                        uint32_t a = U(&s[0], l), x = (int32_t) a < 0 ? ~a : a;
                        d[l] = x ? (uint32_t) __builtin_clz(x) : ~0u;
                }
                return 0;
        case 384 + VOP1_V_FREXP_EXP_I32_F32:
                LANES {
                        float a = F(&s[0], l);
                        int e = 0;
                        if (!isnan(a) && !isinf(a))
                                frexpf(a, &e);
                        d[l] = (uint32_t) e;
                }
                return 0;
        case 384 + VOP1_V_FREXP_MANT_F32:
                LANES {
                        float a = F(&s[0], l);
                        int e;
                        d[l] = f2u(out_f32(v, (isnan(a) || isinf(a)) ? a : frexpf(a, &e)));
                }
                return 0;
        default:
                /* The 16-bit operations, or an error naming the instruction. */
                return sim_isa_exec_vop16(r, w, in, v);
        }
}

/* SDWA operand selection: BYTE_0..3 = 0..3, WORD_0/1 = 4/5, DWORD = 6 (RDNA2 ISA §6.3.2). */
static uint32_t sdwa_select(uint32_t x, unsigned sel, bool sext) {
        if (sel < 4) {
                x = (x >> (8 * sel)) & 0xff;
                return sext ? (uint32_t) (int32_t) (int8_t) x : x;
        }
        if (sel < 6) {
                x = (x >> (16 * (sel - 4))) & 0xffff;
                return sext ? (uint32_t) (int32_t) (int16_t) x : x;
        }
        return x;
}

/* Places a result into the dst_sel part of old; dst_unused 0 pads with zeros,
 * 1 sign-extends the result upwards, 2 keeps the other bits of old. */
static uint32_t sdwa_merge(uint32_t old, uint32_t x, unsigned sel, unsigned unused) {
        unsigned shift, bits;
        if (sel >= 6)
                return x;
        shift = sel < 4 ? 8 * sel : 16 * (sel - 4);
        bits = sel < 4 ? 8 : 16;
        uint32_t mask = ((1u << bits) - 1) << shift, v = (x << shift) & mask;
        if (unused == 2)
                return (old & ~mask) | v;
        if (unused == 1 && ((x >> (bits - 1)) & 1) && shift + bits < 32)
                v |= ~0u << (shift + bits);
        return v;
}

/* SDWA form of a VOP1/VOP2/VOPC (dword 1: src0[7:0], dst_sel[10:8],
 * dst_unused[12:11], clamp 13, omod[15:14] (VOPC: sdst[14:8], sd 15),
 * src0_sel[18:16], src0_sext 19, src0_neg 20, src0_abs 21, s0 23,
 * src1_sel[26:24], src1_sext 27, src1_neg 28, src1_abs 29, s1 31): the
 * selected operands go through the model's hidden VGPR rows, the operation runs
 * unchanged, and its result is merged into the destination by dst_sel. */
static int exec_sdwa(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, Vop *v) {
        uint32_t w1 = in->w1;
        uint64_t exec = v->exec;
        unsigned src0 = ((w1 >> 23) & 1) ? (w1 & 0xff) : OPND_VGPR0 + (w1 & 0xff);
        unsigned src1 = v->src[1];
        unsigned dst_sel = (w1 >> 8) & 7, dst_unused = (w1 >> 11) & 3, real_dst = v->vdst;
        Src s0, s1;
        int k;

        if (in->enc != ENC_VOP1 && ((w1 >> 31) & 1))
                src1 = (in->w0 >> 9) & 0xff;    /* vsrc1 names an SGPR or constant */
        sim_isa_src_init(r, w, in, &s0, src0, K32);
        sim_isa_src_init(r, w, in, &s1, in->enc == ENC_VOP1 ? 128 : src1, K32);
        LANES {
                w->v[SIM_ISA_SDWA_SRC0][l] = sdwa_select(U(&s0, l), (w1 >> 16) & 7, (w1 >> 19) & 1);
                w->v[SIM_ISA_SDWA_SRC1][l] = sdwa_select(U(&s1, l), (w1 >> 24) & 7, (w1 >> 27) & 1);
        }
        v->src[0] = OPND_VGPR0 + SIM_ISA_SDWA_SRC0;
        v->src[1] = OPND_VGPR0 + SIM_ISA_SDWA_SRC1;
        v->abs = ((w1 >> 21) & 1) | ((w1 >> 29) & 1) << 1;
        v->neg = ((w1 >> 20) & 1) | ((w1 >> 28) & 1) << 1;
        if (in->enc == ENC_VOPC) {
                if ((w1 >> 15) & 1)
                        v->sdst = (w1 >> 8) & 0x7f;
                return sim_isa_exec_vopc(r, w, in, v);
        }
        v->clamp = (w1 >> 13) & 1;
        v->omod = (w1 >> 14) & 3;
        v->vdst = SIM_ISA_SDWA_DST;
        memcpy(w->v[SIM_ISA_SDWA_DST], w->v[real_dst], sizeof(w->v[0]));
        k = exec_vop(r, w, in, v);
        if (k < 0)
                return k;
        LANES w->v[real_dst][l] = sdwa_merge(w->v[real_dst][l], w->v[SIM_ISA_SDWA_DST][l], dst_sel, dst_unused);
        return 0;
}

int sim_isa_exec_valu(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        Vop v = { .exec = wave_exec(w) };
        uint32_t w0 = in->w0, w1 = in->w1;

        switch (in->enc) {
        case ENC_VOP2:
                /* src0[8:0], vsrc1[16:9], vdst[24:17], op[30:25] */
                v.op = 256 + in->op;
                v.src[0] = w0 & 0x1ff;
                v.src[1] = OPND_VGPR0 + ((w0 >> 9) & 0xff);
                v.nsrc = 2;
                v.vdst = (w0 >> 17) & 0xff;
                v.sdst = v.carry_in = OPND_VCC_LO;
                break;
        case ENC_VOP1:
                /* src0[8:0], op[16:9], vdst[24:17] */
                v.op = 384 + in->op;
                v.src[0] = w0 & 0x1ff;
                v.nsrc = 1;
                v.vdst = (w0 >> 17) & 0xff;
                break;
        case ENC_VOPC:
                /* src0[8:0], vsrc1[16:9], op[24:17]; result in VCC */
                v.op = in->op;
                v.src[0] = w0 & 0x1ff;
                v.src[1] = OPND_VGPR0 + ((w0 >> 9) & 0xff);
                v.nsrc = 2;
                v.sdst = OPND_VCC_LO;
                break;
        case ENC_VOP3: {
                /* vdst[7:0], abs[10:8] (or sdst[14:8] for VOP3b), opsel[14:11], clamp 15,
                 * op[25:16]; src0[8:0], src1[17:9], src2[26:18], omod[28:27], neg[31:29] */
                bool vop3b = in->op == VOP3_V_ADD_CO_U32 || in->op == VOP3_V_SUB_CO_U32 ||
                             in->op == VOP3_V_SUBREV_CO_U32 || in->op == 256 + VOP2_V_ADD_CO_CI_U32 ||
                             in->op == 256 + VOP2_V_SUB_CO_CI_U32 || in->op == 256 + VOP2_V_SUBREV_CO_CI_U32 ||
                             in->op == VOP3_V_DIV_SCALE_F32 || in->op == VOP3_V_DIV_SCALE_F64 ||
                             in->op == VOP3_V_MAD_U64_U32 || in->op == VOP3_V_MAD_I64_I32;
                v.op = in->op;
                v.src[0] = w1 & 0x1ff;
                v.src[1] = (w1 >> 9) & 0x1ff;
                v.src[2] = (w1 >> 18) & 0x1ff;
                v.nsrc = 3;
                v.vdst = w0 & 0xff;
                v.clamp = (w0 >> 15) & 1;
                v.omod = (w1 >> 27) & 3;
                v.neg = (w1 >> 29) & 7;
                if (vop3b) {
                        v.sdst = (w0 >> 8) & 0x7f;
                } else {
                        v.abs = (w0 >> 8) & 7;
                        v.opsel = (w0 >> 11) & 15;
                        if (v.opsel && !vop3_has_opsel(in->op))
                                /* op_sel means nothing to a 32-bit operation: refuse rather than ignore it. */
                                return sim_isa_unsupported(r, w, in);
                }
                if (in->op < 256)
                        v.sdst = w0 & 0xff;     /* VOPC in VOP3: the SGPR destination */
                if (in->op == 256 + VOP2_V_CNDMASK_B32 || in->op == 256 + VOP2_V_ADD_CO_CI_U32 ||
                    in->op == 256 + VOP2_V_SUB_CO_CI_U32 || in->op == 256 + VOP2_V_SUBREV_CO_CI_U32)
                        v.carry_in = v.src[2];
                if (in->op >= 384 && in->op < 512)
                        v.nsrc = 1;
                else if (in->op >= 256 && in->op < 320)
                        v.nsrc = 2;
                break;
        }
        default:
                return sim_isa_unsupported(r, w, in);
        }
        if (in->ext == EXT_SDWA)
                return exec_sdwa(r, w, in, &v);
        if (in->ext == EXT_DPP) {
                SrcKind kinds[3];
                src_kinds(v.op, kinds);
                if (kinds[0] != K32 || kinds[1] != K32 || kinds[2] != K32)
                        return sim_isa_unsupported(r, w, in);   /* DPP permutes 32-bit operands only */
                int k = sim_isa_dpp_prepare(r, w, in, &v);
                if (k < 0)
                        return k;
        }
        return exec_vop(r, w, in, &v);
}
