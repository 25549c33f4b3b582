/* SPDX-License-Identifier: MIT */
/*
 * Vector compares, VOPC and VOPC-in-VOP3 (RDNA2 ISA §6.4 "Vector Compare"):
 * the opcode's low bits give the condition, its group the type. v_cmp_*
 * writes a lane mask (inactive lanes 0) to VCC or the VOP3 SGPR destination;
 * v_cmpx_* writes EXEC only, as on gfx10.
 */
#include <math.h>

#include "sim-isa-valu.h"

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

/* VOPC and its VOP3 form (opcodes 0-255): f32/f64 with the 16 IEEE conditions,
 * i32/u32/i64/u64 with 8, and V_CMP_CLASS; 16-bit compares are not implemented. */
int sim_isa_exec_vopc(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v) {
        Src s[2];
        uint64_t exec = v->exec, mask = 0;
        unsigned op = v->op, c = op & 15;
        bool x = false;
        enum { T_F32, T_F64, T_I32, T_U32, T_I64, T_U64, T_CLASS32, T_CLASS64, T_NONE } t = T_NONE;

        if (op < 0x40) {
                t = op < 0x20 ? T_F32 : T_F64;
                x = (op & 0x10) != 0;
        } else if (op >= 0x80 && op < 0x100) {
                unsigned grp = op & 0xf0, lo = op & 0xf;
                x = (grp & 0x10) != 0;
                if (lo == 8 && (grp == 0x80 || grp == 0x90))
                        t = T_CLASS32;
                else if (lo == 8 && (grp == 0xa0 || grp == 0xb0))
                        t = T_CLASS64;
                else if (lo < 8)
                        switch (grp & 0xe0) {
                        case 0x80: t = T_I32; break;
                        case 0xa0: t = T_I64; break;
                        case 0xc0: t = T_U32; break;
                        case 0xe0: t = T_U64; break;
                        }
        }
        if (t == T_NONE)
                return sim_isa_unsupported(r, w, in);

        SrcKind k0 = (t == T_F64 || t == T_CLASS64) ? K64F : (t == T_I64 || t == T_U64) ? K64I : K32;
        SrcKind k1 = (t == T_CLASS32 || t == T_CLASS64) ? K32 : k0;
        sim_isa_src_init(r, w, in, &s[0], v->src[0], k0);
        sim_isa_src_init(r, w, in, &s[1], v->src[1], k1);
        s[0].abs = v->abs & 1, s[0].neg = v->neg & 1;
        s[1].abs = (v->abs >> 1) & 1, s[1].neg = (v->neg >> 1) & 1;

        LANES {
                bool b;
                switch (t) {
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

