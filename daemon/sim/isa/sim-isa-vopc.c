/* SPDX-License-Identifier: MIT */
/*
 * Vector compares, VOPC and VOPC-in-VOP3 (RDNA2 ISA §6.4 "Vector Compare"):
 * the opcode's low bits give the condition, its group the type. v_cmp_*
 * writes a lane mask (inactive lanes 0) to VCC or the VOP3 SGPR destination;
 * v_cmpx_* writes EXEC only, as on gfx10. The 16-bit compares read the low
 * halves of their sources (gfx10 has no op_sel for VOPC); f16 inputs see
 * MODE's denormal flushing and the half-precision inline constants.
 */
#include <math.h>

#include "sim-isa-valu.h"

/* Half hi of a 16-bit source; with abs and neg for floats; as a double after MODE's input flushing. */
static uint16_t raw16(const Src *s, unsigned l, unsigned hi) {
        return (uint16_t) (U(s, l) >> (16 * hi));
}
static uint16_t mod16(const Src *s, unsigned l, unsigned hi) {
        uint16_t h = raw16(s, l, hi);
        if (s->abs)
                h &= 0x7fff;
        if (s->neg)
                h ^= 0x8000;
        return h;
}
static double half16(const Src *s, unsigned l, unsigned hi, uint32_t mode) {
        return half_to(half_in(mod16(s, l, hi), mode));
}

/* VOPC condition codes in the low 4 bits (float) or 3 bits (integer). */
static bool cmp_f(unsigned c, double a, double b) {
        switch (c & 15) {
        case 0: return false;
        case 1: return a < b;
        case 2: return a == b;
        case 3: return a <= b;
        case 4: return a > b;
        case 5: return a < b || a > b;
        case 6: return a >= b;
        case 7: return !isnan(a) && !isnan(b);
        case 8: return isnan(a) || isnan(b);
        case 9: return !(a >= b);
        case 10: return !(a < b || a > b);
        case 11: return !(a > b);
        case 12: return !(a <= b);
        case 13: return !(a == b);
        case 14: return !(a < b);
        default: return true;
        }
}
#define CMP_INT(c, a, b)                                                       \
        ({                                                                     \
                bool _r;                                                       \
                switch ((c) & 7) {                                             \
                case 0: _r = false; break;                                     \
                case 1: _r = (a) < (b); break;                                 \
                case 2: _r = (a) == (b); break;                                \
                case 3: _r = (a) <= (b); break;                                \
                case 4: _r = (a) > (b); break;                                 \
                case 5: _r = (a) != (b); break;                                \
                case 6: _r = (a) >= (b); break;                                \
                default: _r = true; break;                                     \
                }                                                              \
                _r;                                                            \
        })

/* VOPC and its VOP3 form (opcodes 0-255): f16/f32/f64 with the 16 IEEE
 * conditions, i16/u16 with 6 (lt..ge), i32/u32/i64/u64 with 8, and
 * V_CMP_CLASS_F16/F32/F64. In the groups 0x80-0xff the low 3 bits of an
 * opcode give the condition and bit 3 switches to the class and 16-bit
 * compares (LLVM VOPCInstructions.td, gfx10 encodings). */
int sim_isa_exec_vopc(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v) {
        Src s[2];
        uint64_t exec = v->exec, mask = 0;
        unsigned op = v->op, c = op & 15;
        uint32_t mode = w->mode;
        bool x = false;
        enum { T_F16, T_F32, T_F64, T_I16, T_U16, T_I32, T_U32, T_I64, T_U64, T_CLASS16, T_CLASS32, T_CLASS64, T_NONE } t = T_NONE;

        if (op < 0x40) {
                t = op < 0x20 ? T_F32 : T_F64;
                x = (op & 0x10) != 0;
        } else if (op >= 0x80 && op < 0x100) {
                unsigned grp = op & 0xf0, lo = op & 0xf;
                x = (grp & 0x10) != 0;
                if (lo < 8)
                        switch (grp & 0xe0) {
                        case 0x80: t = T_I32; break;
                        case 0xa0: t = T_I64; break;
                        case 0xc0: t = T_U32; break;
                        case 0xe0: t = T_U64; break;
                        }
                else if ((grp & 0xc0) == 0xc0) {
                        t = T_F16;      /* 0xc8-0xcf f..o, 0xe8-0xef u..tru */
                        c = (lo - 8) + ((grp & 0x20) ? 8 : 0);
                } else if (lo == 8) {
                        t = (grp & 0xe0) == 0x80 ? T_CLASS32 : T_CLASS64;
                } else if (lo == 15) {
                        t = (grp & 0xe0) == 0x80 ? T_CLASS16 : T_NONE;
                } else {
                        t = (grp & 0xe0) == 0x80 ? T_I16 : T_U16;
                        c = lo - 8;
                }
        }
        if (t == T_NONE)
                return sim_isa_unsupported(r, w, in);

        SrcKind k0 = (t == T_F64 || t == T_CLASS64) ? K64F : (t == T_I64 || t == T_U64) ? K64I : K32;
        SrcKind k1 = (t == T_CLASS32 || t == T_CLASS64 || t == T_CLASS16) ? K32 : k0;
        if (t == T_F16 || t == T_CLASS16)
                sim_isa_src_init16(r, w, in, &s[0], v->src[0]);
        else
                sim_isa_src_init(r, w, in, &s[0], v->src[0], k0);
        if (t == T_F16)
                sim_isa_src_init16(r, w, in, &s[1], v->src[1]);
        else
                sim_isa_src_init(r, w, in, &s[1], v->src[1], k1);
        s[0].abs = v->abs & 1, s[0].neg = v->neg & 1;
        s[1].abs = (v->abs >> 1) & 1, s[1].neg = (v->neg >> 1) & 1;

        LANES {
                bool b;
                switch (t) {
                case T_F16: b = cmp_f(c, half16(&s[0], l, 0, mode), half16(&s[1], l, 0, mode)); break;
                case T_I16: b = CMP_INT(c, (int16_t) raw16(&s[0], l, 0), (int16_t) raw16(&s[1], l, 0)); break;
                case T_U16: b = CMP_INT(c, raw16(&s[0], l, 0), raw16(&s[1], l, 0)); break;
                case T_CLASS16: {
                        uint16_t h = mod16(&s[0], l, 0);      /* classified as it is, like the f32/f64 classes */
                        double f = half_to(h);
                        b = vfloat_class(f, isnan(f) && !((h >> 9) & 1), U(&s[1], l));
                        break;
                }
                case T_F32: b = cmp_f(c, F(&s[0], l), F(&s[1], l)); break;
                case T_F64: b = cmp_f(c, D(&s[0], l), D(&s[1], l)); break;
                case T_I32: b = CMP_INT(c, (int32_t) U(&s[0], l), (int32_t) U(&s[1], l)); break;
                case T_U32: b = CMP_INT(c, U(&s[0], l), U(&s[1], l)); break;
                case T_I64: b = CMP_INT(c, (int64_t) U64(&s[0], l), (int64_t) U64(&s[1], l)); break;
                case T_U64: b = CMP_INT(c, U64(&s[0], l), U64(&s[1], l)); break;
                case T_CLASS32: {
                        float f = F(&s[0], l);
                        b = vfloat_class(f, isnan(f) && !((f2u(f) >> 22) & 1), U(&s[1], l));
                        break;
                }
                default: {
                        double f = D(&s[0], l);
                        b = vfloat_class(f, isnan(f) && !((d2u(f) >> 51) & 1), U(&s[1], l));
                        break;
                }
                }
                mask |= (uint64_t) b << l;
        }
        if (x)
                /* gfx10 v_cmpx writes EXEC only (LLVM VOPCInstructions.td, VOPC_Profile_NoSdst). */
                wave_set_exec(w, mask);
        else
                sim_isa_swrite_mask(w, v->sdst, mask);
        return 0;
}

