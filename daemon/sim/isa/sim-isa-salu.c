/* SPDX-License-Identifier: MIT */
/*
 * The scalar unit: SOP2, SOPK, SOP1, SOPC and SOPP (RDNA2 ISA chapter 5,
 * "Scalar ALU Operations", and §4 "Program Flow Control") and scalar memory
 * reads, SMEM (chapter 6). Operates on one SimIsaWave of the run; called by
 * the interpreter loop in sim-isa.c with pc still at the instruction.
 */
#include <errno.h>
#include <string.h>

#include "sim-isa-internal.h"
#include "sim-isa-opcodes.h"

/* Inline float constants 240..248 (RDNA2 ISA §3.1.2), as f32 and f64 bits. */
static const uint32_t inline_f32[9] = {
        0x3f000000, 0xbf000000, 0x3f800000, 0xbf800000, 0x40000000,
        0xc0000000, 0x40800000, 0xc0800000, 0x3e22f983,
};
static const uint64_t inline_f64[9] = {
        0x3fe0000000000000ull, 0xbfe0000000000000ull, 0x3ff0000000000000ull,
        0xbff0000000000000ull, 0x4000000000000000ull, 0xc000000000000000ull,
        0x4010000000000000ull, 0xc010000000000000ull, 0x3fc45f306dc9c882ull,
};

uint32_t sim_isa_sread(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst, unsigned code) {
        if (code < 128)
                return code == OPND_NULL ? 0 : w->s[code];
        if (code <= 192)
                return code - 128;
        if (code <= 208)
                return (uint32_t) -(int32_t) (code - 192);
        if (code >= 240 && code <= 248)
                return inline_f32[code - 240];
        switch (code) {
        case OPND_VCCZ:
                return wave_vcc(w) == 0;
        case OPND_EXECZ:
                return wave_exec(w) == 0;
        case OPND_SCC:
                return w->scc;
        case OPND_LITERAL:
                return inst->literal;
        }
        return 0; /* rejected by sim_isa_bad_operand() before execution */
}

/* 64-bit operand: integer inline constants sign-extend, float ones are f64,
 * a literal is zero-extended (what llvm-mc-15 encodes for 64-bit integers). */
uint64_t sim_isa_sread64(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst, unsigned code) {
        if (code < 128)
                return code == OPND_NULL ? 0 : w->s[code] | (uint64_t) w->s[(code + 1) & 127] << 32;
        if (code <= 208)
                return (uint64_t) (int64_t) (int32_t) sim_isa_sread(r, w, inst, code);
        if (code >= 240 && code <= 248)
                return inline_f64[code - 240];
        return sim_isa_sread(r, w, inst, code);
}

uint64_t sim_isa_sread_mask(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst, unsigned code) {
        return w->lanes > 32 ? sim_isa_sread64(r, w, inst, code) : sim_isa_sread(r, w, inst, code);
}

void sim_isa_swrite_mask(SimIsaWave *w, unsigned code, uint64_t m) {
        if (w->lanes > 32)
                sim_isa_swrite64(w, code, m);
        else
                sim_isa_swrite(w, code, (uint32_t) m);
}

void sim_isa_swrite(SimIsaWave *w, unsigned code, uint32_t v) {
        if (code < 128 && code != OPND_NULL)
                w->s[code] = v;
}

void sim_isa_swrite64(SimIsaWave *w, unsigned code, uint64_t v) {
        if (code < 127 && code != OPND_NULL) {
                w->s[code] = (uint32_t) v;
                w->s[code + 1] = (uint32_t) (v >> 32);
        }
}

static int32_t sext(uint32_t v, unsigned bits) {
        if (bits == 0)
                return 0;
        if (bits >= 32)
                return (int32_t) v;
        return (int32_t) (v << (32 - bits)) >> (32 - bits);
}

static int exec_sop2(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        unsigned sdst = (in->w0 >> 16) & 0x7f, c1 = (in->w0 >> 8) & 0xff, c0 = in->w0 & 0xff;
        uint32_t a = sim_isa_sread(r, w, in, c0), b = sim_isa_sread(r, w, in, c1), d;
        uint64_t a64 = 0, b64 = 0, d64;
        uint64_t t;

        switch (in->op) {
        case SOP2_S_CSELECT_B64: case SOP2_S_AND_B64: case SOP2_S_OR_B64: case SOP2_S_XOR_B64:
        case SOP2_S_ANDN2_B64: case SOP2_S_ORN2_B64: case SOP2_S_NAND_B64: case SOP2_S_NOR_B64:
        case SOP2_S_XNOR_B64: case SOP2_S_BFE_U64: case SOP2_S_BFE_I64:
                a64 = sim_isa_sread64(r, w, in, c0);
                b64 = sim_isa_sread64(r, w, in, c1);
                break;
        case SOP2_S_LSHL_B64: case SOP2_S_LSHR_B64: case SOP2_S_ASHR_I64:
                a64 = sim_isa_sread64(r, w, in, c0);
                break;
        }

        switch (in->op) {
        case SOP2_S_ADD_U32:
                t = (uint64_t) a + b;
                w->scc = t >> 32;
                d = (uint32_t) t;
                break;
        case SOP2_S_SUB_U32:
                w->scc = b > a;
                d = a - b;
                break;
        case SOP2_S_ADD_I32:
                d = a + b;
                w->scc = ((~(a ^ b)) & (a ^ d)) >> 31;
                break;
        case SOP2_S_SUB_I32:
                d = a - b;
                w->scc = ((a ^ b) & (a ^ d)) >> 31;
                break;
        case SOP2_S_ADDC_U32:
                t = (uint64_t) a + b + w->scc;
                w->scc = t >> 32;
                d = (uint32_t) t;
                break;
        case SOP2_S_SUBB_U32:
                t = (uint64_t) a - b - w->scc;
                w->scc = (t >> 32) != 0;
                d = (uint32_t) t;
                break;
        case SOP2_S_MIN_I32:
                w->scc = (int32_t) a < (int32_t) b;
                d = w->scc ? a : b;
                break;
        case SOP2_S_MIN_U32:
                w->scc = a < b;
                d = w->scc ? a : b;
                break;
        case SOP2_S_MAX_I32:
                w->scc = (int32_t) a > (int32_t) b;
                d = w->scc ? a : b;
                break;
        case SOP2_S_MAX_U32:
                w->scc = a > b;
                d = w->scc ? a : b;
                break;
        case SOP2_S_CSELECT_B32:
                d = w->scc ? a : b;
                break;
        case SOP2_S_CSELECT_B64:
                sim_isa_swrite64(w, sdst, w->scc ? a64 : b64);
                return 0;
#define LOGIC32(OP, EXPR) case OP: d = (EXPR); w->scc = d != 0; break;
#define LOGIC64(OP, EXPR) case OP: d64 = (EXPR); w->scc = d64 != 0; sim_isa_swrite64(w, sdst, d64); return 0;
        LOGIC32(SOP2_S_AND_B32, a & b)
        LOGIC32(SOP2_S_OR_B32, a | b)
        LOGIC32(SOP2_S_XOR_B32, a ^ b)
        LOGIC32(SOP2_S_ANDN2_B32, a & ~b)
        LOGIC32(SOP2_S_ORN2_B32, a | ~b)
        LOGIC32(SOP2_S_NAND_B32, ~(a & b))
        LOGIC32(SOP2_S_NOR_B32, ~(a | b))
        LOGIC32(SOP2_S_XNOR_B32, ~(a ^ b))
        LOGIC32(SOP2_S_LSHL_B32, a << (b & 31))
        LOGIC32(SOP2_S_LSHR_B32, a >> (b & 31))
        LOGIC32(SOP2_S_ASHR_I32, (uint32_t) ((int32_t) a >> (b & 31)))
        LOGIC32(SOP2_S_BFE_U32, ((b >> 16) & 0x7f) == 0 ? 0 :
                (a >> (b & 31)) & (((b >> 16) & 0x7f) >= 32 ? ~0u : (1u << ((b >> 16) & 0x7f)) - 1))
        LOGIC32(SOP2_S_BFE_I32, (uint32_t) sext(a >> (b & 31), MIN_U((b >> 16) & 0x7f, 32 - (b & 31))))
        LOGIC64(SOP2_S_AND_B64, a64 & b64)
        LOGIC64(SOP2_S_OR_B64, a64 | b64)
        LOGIC64(SOP2_S_XOR_B64, a64 ^ b64)
        LOGIC64(SOP2_S_ANDN2_B64, a64 & ~b64)
        LOGIC64(SOP2_S_ORN2_B64, a64 | ~b64)
        LOGIC64(SOP2_S_NAND_B64, ~(a64 & b64))
        LOGIC64(SOP2_S_NOR_B64, ~(a64 | b64))
        LOGIC64(SOP2_S_XNOR_B64, ~(a64 ^ b64))
        LOGIC64(SOP2_S_LSHL_B64, a64 << (b & 63))
        LOGIC64(SOP2_S_LSHR_B64, a64 >> (b & 63))
        LOGIC64(SOP2_S_ASHR_I64, (uint64_t) ((int64_t) a64 >> (b & 63)))
        LOGIC64(SOP2_S_BFE_U64, ((b64 >> 16) & 0x7f) == 0 ? 0 :
                (a64 >> (b64 & 63)) & (((b64 >> 16) & 0x7f) >= 64 ? ~0ull : (1ull << ((b64 >> 16) & 0x7f)) - 1))
        case SOP2_S_BFE_I64: {
                unsigned off = b64 & 63, width = (b64 >> 16) & 0x7f;
                uint64_t v = a64 >> off;
                if (width == 0)
                        d64 = 0;
                else if (width >= 64)
                        d64 = v;
                else
                        d64 = (uint64_t) ((int64_t) (v << (64 - width)) >> (64 - width));
                w->scc = d64 != 0;
                sim_isa_swrite64(w, sdst, d64);
                return 0;
        }
#undef LOGIC32
#undef LOGIC64
        case SOP2_S_BFM_B32:
                d = ((1u << (a & 31)) - 1) << (b & 31);
                if ((a & 31) == 0)
                        d = 0;
                break;
        case SOP2_S_BFM_B64:
                sim_isa_swrite64(w, sdst, ((a & 63) ? ((1ull << (a & 63)) - 1) : 0) << (b & 63));
                return 0;
        case SOP2_S_MUL_I32:
                d = a * b;
                break;
        case SOP2_S_MUL_HI_U32:
                d = (uint32_t) (((uint64_t) a * b) >> 32);
                break;
        case SOP2_S_MUL_HI_I32:
                d = (uint32_t) (((int64_t) (int32_t) a * (int32_t) b) >> 32);
                break;
        case SOP2_S_ABSDIFF_I32: {
                int64_t diff = (int64_t) (int32_t) a - (int32_t) b;
                d = (uint32_t) (diff < 0 ? -diff : diff);
                w->scc = d != 0;
                break;
        }
        case SOP2_S_LSHL1_ADD_U32: case SOP2_S_LSHL2_ADD_U32:
        case SOP2_S_LSHL3_ADD_U32: case SOP2_S_LSHL4_ADD_U32:
                t = ((uint64_t) a << (in->op - SOP2_S_LSHL1_ADD_U32 + 1)) + b;
                w->scc = t >> 32;
                d = (uint32_t) t;
                break;
        case SOP2_S_PACK_LL_B32_B16:
                d = (a & 0xffff) | b << 16;
                break;
        case SOP2_S_PACK_LH_B32_B16:
                d = (a & 0xffff) | (b & 0xffff0000u);
                break;
        case SOP2_S_PACK_HH_B32_B16:
                d = a >> 16 | (b & 0xffff0000u);
                break;
        default:
                return sim_isa_unsupported(r, w, in);
        }
        sim_isa_swrite(w, sdst, d);
        return 0;
}

static int exec_sopk(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        unsigned sdst = (in->w0 >> 16) & 0x7f;
        uint32_t imm = in->w0 & 0xffff, s = sim_isa_sread(r, w, in, sdst);
        int32_t simm = (int16_t) imm;

        switch (in->op) {
        case SOPK_S_MOVK_I32:
                sim_isa_swrite(w, sdst, (uint32_t) simm);
                return 0;
        case SOPK_S_CMOVK_I32:
                if (w->scc)
                        sim_isa_swrite(w, sdst, (uint32_t) simm);
                return 0;
        case SOPK_S_CMPK_EQ_I32: w->scc = (int32_t) s == simm; return 0;
        case SOPK_S_CMPK_LG_I32: w->scc = (int32_t) s != simm; return 0;
        case SOPK_S_CMPK_GT_I32: w->scc = (int32_t) s > simm; return 0;
        case SOPK_S_CMPK_GE_I32: w->scc = (int32_t) s >= simm; return 0;
        case SOPK_S_CMPK_LT_I32: w->scc = (int32_t) s < simm; return 0;
        case SOPK_S_CMPK_LE_I32: w->scc = (int32_t) s <= simm; return 0;
        case SOPK_S_CMPK_EQ_U32: w->scc = s == imm; return 0;
        case SOPK_S_CMPK_LG_U32: w->scc = s != imm; return 0;
        case SOPK_S_CMPK_GT_U32: w->scc = s > imm; return 0;
        case SOPK_S_CMPK_GE_U32: w->scc = s >= imm; return 0;
        case SOPK_S_CMPK_LT_U32: w->scc = s < imm; return 0;
        case SOPK_S_CMPK_LE_U32: w->scc = s <= imm; return 0;
        case SOPK_S_ADDK_I32: {
                uint32_t d = s + (uint32_t) simm;
                w->scc = ((~(s ^ (uint32_t) simm)) & (s ^ d)) >> 31;
                sim_isa_swrite(w, sdst, d);
                return 0;
        }
        case SOPK_S_MULK_I32:
                sim_isa_swrite(w, sdst, s * (uint32_t) simm);
                return 0;
        case SOPK_S_WAITCNT_VSCNT: case SOPK_S_WAITCNT_VMCNT:
        case SOPK_S_WAITCNT_EXPCNT: case SOPK_S_WAITCNT_LGKMCNT:
                /* Every access completed when it was issued. */
                return 0;
        case SOPK_S_VERSION:
                return 0;
        case SOPK_S_GETREG_B32: case SOPK_S_SETREG_B32: case SOPK_S_SETREG_IMM32_B32: {
                /* hwreg(id[5:0], offset[10:6], size-1[15:11]); RDNA2 ISA §3.3.2. */
                unsigned id = imm & 63, off = (imm >> 6) & 31, size = ((imm >> 11) & 31) + 1;
                uint32_t mask = (size >= 32 ? ~0u : (1u << size) - 1) << off, *reg, scratch = 0;
                bool read_only = false;
                switch (id) {
                case 1: reg = &w->mode; break;                  /* HW_REG_MODE */
                case 20: reg = &w->flat_scratch_lo; break;      /* HW_REG_FLAT_SCR_LO */
                case 21: reg = &w->flat_scratch_hi; break;      /* HW_REG_FLAT_SCR_HI */
                case 2: case 3: case 4: case 5: case 6: case 7: case 23: case 24:
                        /* STATUS, TRAPSTS, HW_ID, GPR_ALLOC, LDS_ALLOC, IB_STS, HW_ID1/2: read as 0. */
                        reg = &scratch;
                        break;
                case 15:
                        /* HW_REG_SH_MEM_BASES (LLVM SIDefines.h Hwreg::ID_MEM_BASES): what clang
                         * reads to turn a local or private pointer into a generic one
                         * (SIISelLowering.cpp getSegmentAperture: s_getreg_b32
                         * hwreg(HW_REG_SH_MEM_BASES, 16, 16) << 16 is bits 63:32 of the LDS
                         * aperture, offset 0 the scratch one). Not writable by a shader. */
                        scratch = r->d->sh_mem_bases;
                        reg = &scratch;
                        read_only = true;
                        break;
                default:
                        return sim_isa_fail(r, -EILSEQ, w->pc, "unsupported hardware register %u in %s at pc 0x%llx",
                                            id, sim_isa_inst_name(in), (unsigned long long) w->pc);
                }
                if (in->op == SOPK_S_GETREG_B32) {
                        sim_isa_swrite(w, sdst, (*reg & mask) >> off);
                } else if (read_only) {
                        return sim_isa_fail(r, -EILSEQ, w->pc, "hardware register %u is read-only in %s at pc 0x%llx",
                                            id, sim_isa_inst_name(in), (unsigned long long) w->pc);
                } else if (reg != &scratch) {
                        uint32_t v = in->op == SOPK_S_SETREG_IMM32_B32 ? in->literal : s;
                        *reg = (*reg & ~mask) | ((v << off) & mask);
                }
                return 0;
        }
        case SOPK_S_CALL_B64:
                sim_isa_swrite64(w, sdst, w->pc + 4);
                w->pc = w->pc + 4 + (int64_t) simm * 4;
                return 1;
        default:
                return sim_isa_unsupported(r, w, in);
        }
}

/* The _b64 EXEC manipulations (RDNA2 ISA §5.3), which wave64 code uses: on
 * the whole of EXEC_LO:EXEC_HI, whatever the wave size. */
static int exec_sop1_b64_exec(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        unsigned sdst = (in->w0 >> 16) & 0x7f;
        uint64_t a = sim_isa_sread64(r, w, in, in->w0 & 0xff), d;
        uint64_t exec = w->s[OPND_EXEC_LO] | (uint64_t) w->s[OPND_EXEC_HI] << 32;
        bool save = true;

        switch (in->op) {
        case SOP1_S_AND_SAVEEXEC_B64: d = a & exec; break;
        case SOP1_S_OR_SAVEEXEC_B64: d = a | exec; break;
        case SOP1_S_XOR_SAVEEXEC_B64: d = a ^ exec; break;
        case SOP1_S_ANDN2_SAVEEXEC_B64: d = a & ~exec; break;
        case SOP1_S_ORN2_SAVEEXEC_B64: d = a | ~exec; break;
        case SOP1_S_NAND_SAVEEXEC_B64: d = ~(a & exec); break;
        case SOP1_S_NOR_SAVEEXEC_B64: d = ~(a | exec); break;
        case SOP1_S_XNOR_SAVEEXEC_B64: d = ~(a ^ exec); break;
        case SOP1_S_ANDN1_SAVEEXEC_B64: d = ~a & exec; break;
        case SOP1_S_ORN1_SAVEEXEC_B64: d = ~a | exec; break;
        /* wrexec: the new EXEC goes to SDST too, not the old one. */
        case SOP1_S_ANDN1_WREXEC_B64: d = ~a & exec, save = false; break;
        case SOP1_S_ANDN2_WREXEC_B64: d = a & ~exec, save = false; break;
        default:
                return sim_isa_unsupported(r, w, in);
        }
        sim_isa_swrite64(w, sdst, save ? exec : d);
        w->s[OPND_EXEC_LO] = (uint32_t) d;
        w->s[OPND_EXEC_HI] = (uint32_t) (d >> 32);
        w->scc = d != 0;
        return 0;
}

static int exec_sop1(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        unsigned sdst = (in->w0 >> 16) & 0x7f, c0 = in->w0 & 0xff;
        uint32_t a = sim_isa_sread(r, w, in, c0), d, exec = w->s[OPND_EXEC_LO];
        uint64_t a64;

        switch (in->op) {
        case SOP1_S_MOV_B32:
                sim_isa_swrite(w, sdst, a);
                return 0;
        case SOP1_S_MOV_B64:
                sim_isa_swrite64(w, sdst, sim_isa_sread64(r, w, in, c0));
                return 0;
        case SOP1_S_CMOV_B32:
                if (w->scc)
                        sim_isa_swrite(w, sdst, a);
                return 0;
        case SOP1_S_CMOV_B64:
                if (w->scc)
                        sim_isa_swrite64(w, sdst, sim_isa_sread64(r, w, in, c0));
                return 0;
        case SOP1_S_NOT_B32:
                d = ~a;
                w->scc = d != 0;
                sim_isa_swrite(w, sdst, d);
                return 0;
        case SOP1_S_NOT_B64:
                a64 = ~sim_isa_sread64(r, w, in, c0);
                w->scc = a64 != 0;
                sim_isa_swrite64(w, sdst, a64);
                return 0;
        case SOP1_S_BREV_B32:
                d = 0;
                for (unsigned i = 0; i < 32; i++)
                        d |= ((a >> i) & 1) << (31 - i);
                sim_isa_swrite(w, sdst, d);
                return 0;
        case SOP1_S_BCNT1_I32_B32:
                d = __builtin_popcount(a);
                w->scc = d != 0;
                sim_isa_swrite(w, sdst, d);
                return 0;
        case SOP1_S_BCNT1_I32_B64:
                d = __builtin_popcountll(sim_isa_sread64(r, w, in, c0));
                w->scc = d != 0;
                sim_isa_swrite(w, sdst, d);
                return 0;
        case SOP1_S_FF1_I32_B32:
                sim_isa_swrite(w, sdst, a ? (uint32_t) __builtin_ctz(a) : ~0u);
                return 0;
        case SOP1_S_FF1_I32_B64:
                a64 = sim_isa_sread64(r, w, in, c0);
                sim_isa_swrite(w, sdst, a64 ? (uint32_t) __builtin_ctzll(a64) : ~0u);
                return 0;
        case SOP1_S_FLBIT_I32_B32:
                sim_isa_swrite(w, sdst, a ? (uint32_t) __builtin_clz(a) : ~0u);
                return 0;
        case SOP1_S_FLBIT_I32_B64:
                a64 = sim_isa_sread64(r, w, in, c0);
                sim_isa_swrite(w, sdst, a64 ? (uint32_t) __builtin_clzll(a64) : ~0u);
                return 0;
        case SOP1_S_FLBIT_I32: {
                uint32_t x = (int32_t) a < 0 ? ~a : a;
                sim_isa_swrite(w, sdst, x ? (uint32_t) __builtin_clz(x) : ~0u);
                return 0;
        }
        case SOP1_S_SEXT_I32_I8:
                sim_isa_swrite(w, sdst, (uint32_t) (int32_t) (int8_t) a);
                return 0;
        case SOP1_S_SEXT_I32_I16:
                sim_isa_swrite(w, sdst, (uint32_t) (int32_t) (int16_t) a);
                return 0;
        case SOP1_S_BITSET0_B32:
                sim_isa_swrite(w, sdst, sim_isa_sread(r, w, in, sdst) & ~(1u << (a & 31)));
                return 0;
        case SOP1_S_BITSET1_B32:
                sim_isa_swrite(w, sdst, sim_isa_sread(r, w, in, sdst) | 1u << (a & 31));
                return 0;
        case SOP1_S_ABS_I32:
                d = (int32_t) a < 0 ? -a : a;
                w->scc = d != 0;
                sim_isa_swrite(w, sdst, d);
                return 0;
        case SOP1_S_GETPC_B64:
                sim_isa_swrite64(w, sdst, w->pc + in->size);
                return 0;
        case SOP1_S_SETPC_B64:
                w->pc = sim_isa_sread64(r, w, in, c0);
                return 1;
        case SOP1_S_SWAPPC_B64:
                a64 = sim_isa_sread64(r, w, in, c0);
                sim_isa_swrite64(w, sdst, w->pc + in->size);
                w->pc = a64;
                return 1;
        /* Wave32 EXEC manipulation, RDNA2 ISA §5.3 (the _b32 forms). */
#define SAVEEXEC(OP, EXPR)                              \
        case OP:                                        \
                sim_isa_swrite(w, sdst, exec);          \
                d = (EXPR);                             \
                w->s[OPND_EXEC_LO] = d;                 \
                w->scc = d != 0;                        \
                return 0;
        SAVEEXEC(SOP1_S_AND_SAVEEXEC_B32, a & exec)
        SAVEEXEC(SOP1_S_OR_SAVEEXEC_B32, a | exec)
        SAVEEXEC(SOP1_S_XOR_SAVEEXEC_B32, a ^ exec)
        SAVEEXEC(SOP1_S_ANDN2_SAVEEXEC_B32, a & ~exec)
        SAVEEXEC(SOP1_S_ORN2_SAVEEXEC_B32, a | ~exec)
        SAVEEXEC(SOP1_S_NAND_SAVEEXEC_B32, ~(a & exec))
        SAVEEXEC(SOP1_S_NOR_SAVEEXEC_B32, ~(a | exec))
        SAVEEXEC(SOP1_S_XNOR_SAVEEXEC_B32, ~(a ^ exec))
        SAVEEXEC(SOP1_S_ANDN1_SAVEEXEC_B32, ~a & exec)
        SAVEEXEC(SOP1_S_ORN1_SAVEEXEC_B32, ~a | exec)
#undef SAVEEXEC
        case SOP1_S_ANDN1_WREXEC_B32:
                d = ~a & exec;
                w->s[OPND_EXEC_LO] = d;
                w->scc = d != 0;
                sim_isa_swrite(w, sdst, d);
                return 0;
        case SOP1_S_ANDN2_WREXEC_B32:
                d = a & ~exec;
                w->s[OPND_EXEC_LO] = d;
                w->scc = d != 0;
                sim_isa_swrite(w, sdst, d);
                return 0;
        default:
                return exec_sop1_b64_exec(r, w, in);
        }
}

static int exec_sopc(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        unsigned c1 = (in->w0 >> 8) & 0xff, c0 = in->w0 & 0xff;
        uint32_t a = sim_isa_sread(r, w, in, c0), b = sim_isa_sread(r, w, in, c1);

        switch (in->op) {
        case SOPC_S_CMP_EQ_I32: case SOPC_S_CMP_EQ_U32: w->scc = a == b; return 0;
        case SOPC_S_CMP_LG_I32: case SOPC_S_CMP_LG_U32: w->scc = a != b; return 0;
        case SOPC_S_CMP_GT_I32: w->scc = (int32_t) a > (int32_t) b; return 0;
        case SOPC_S_CMP_GE_I32: w->scc = (int32_t) a >= (int32_t) b; return 0;
        case SOPC_S_CMP_LT_I32: w->scc = (int32_t) a < (int32_t) b; return 0;
        case SOPC_S_CMP_LE_I32: w->scc = (int32_t) a <= (int32_t) b; return 0;
        case SOPC_S_CMP_GT_U32: w->scc = a > b; return 0;
        case SOPC_S_CMP_GE_U32: w->scc = a >= b; return 0;
        case SOPC_S_CMP_LT_U32: w->scc = a < b; return 0;
        case SOPC_S_CMP_LE_U32: w->scc = a <= b; return 0;
        case SOPC_S_BITCMP0_B32: w->scc = !((a >> (b & 31)) & 1); return 0;
        case SOPC_S_BITCMP1_B32: w->scc = (a >> (b & 31)) & 1; return 0;
        case SOPC_S_BITCMP0_B64: w->scc = !((sim_isa_sread64(r, w, in, c0) >> (b & 63)) & 1); return 0;
        case SOPC_S_BITCMP1_B64: w->scc = (sim_isa_sread64(r, w, in, c0) >> (b & 63)) & 1; return 0;
        case SOPC_S_CMP_EQ_U64:
                w->scc = sim_isa_sread64(r, w, in, c0) == sim_isa_sread64(r, w, in, c1);
                return 0;
        case SOPC_S_CMP_LG_U64:
                w->scc = sim_isa_sread64(r, w, in, c0) != sim_isa_sread64(r, w, in, c1);
                return 0;
        default:
                return sim_isa_unsupported(r, w, in);
        }
}

/* Returns 1 when pc was set (branch taken, end of program). */
static int exec_sopp(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        int64_t simm = (int16_t) (in->w0 & 0xffff);
        uint64_t target = w->pc + 4 + simm * 4;
        bool take;

        switch (in->op) {
        case SOPP_S_NOP: case SOPP_S_WAITCNT: case SOPP_S_SLEEP: case SOPP_S_SETPRIO:
        case SOPP_S_SENDMSG: case SOPP_S_ICACHE_INV: case SOPP_S_INCPERFLEVEL: case SOPP_S_DECPERFLEVEL:
        case SOPP_S_TTRACEDATA: case SOPP_S_TTRACEDATA_IMM: case SOPP_S_INST_PREFETCH: case SOPP_S_CLAUSE:
        case SOPP_S_WAIT_IDLE: case SOPP_S_WAITCNT_DEPCTR: case SOPP_S_CODE_END:
                /* No caches, no counters, no messages, one rounding mode: nothing to do.
                 * s_sendmsg is only ever MSG_DEALLOC_VGPRS-style bookkeeping in compute. */
                return 0;
        case SOPP_S_ROUND_MODE:
                /* MODE.FP_ROUND [3:0] = SIMM16[3:0] (RDNA2 ISA S_ROUND_MODE); arithmetic
                 * still rounds to nearest even, see sim-isa.h. */
                w->mode = (w->mode & ~0xfu) | (in->w0 & 0xf);
                return 0;
        case SOPP_S_DENORM_MODE:
                /* MODE.FP_DENORM [7:4] = SIMM16[3:0] (RDNA2 ISA S_DENORM_MODE). */
                w->mode = (w->mode & ~0xf0u) | (in->w0 & 0xf) << 4;
                return 0;
        case SOPP_S_ENDPGM:
                w->done = true;
                return 1;
        case SOPP_S_BARRIER:
                w->at_barrier = true;
                return 0;
        case SOPP_S_BRANCH: take = true; break;
        case SOPP_S_CBRANCH_SCC0: take = !w->scc; break;
        case SOPP_S_CBRANCH_SCC1: take = w->scc; break;
        case SOPP_S_CBRANCH_VCCZ: take = wave_vcc(w) == 0; break;
        case SOPP_S_CBRANCH_VCCNZ: take = wave_vcc(w) != 0; break;
        case SOPP_S_CBRANCH_EXECZ: take = wave_exec(w) == 0; break;
        case SOPP_S_CBRANCH_EXECNZ: take = wave_exec(w) != 0; break;
        default:
                return sim_isa_unsupported(r, w, in);
        }
        if (!take)
                return 0;
        w->pc = target;
        return 1;
}

int sim_isa_exec_salu(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        switch (in->enc) {
        case ENC_SOP2: return exec_sop2(r, w, in);
        case ENC_SOPK: return exec_sopk(r, w, in);
        case ENC_SOP1: return exec_sop1(r, w, in);
        case ENC_SOPC: return exec_sopc(r, w, in);
        case ENC_SOPP: return exec_sopp(r, w, in);
        default: return sim_isa_unsupported(r, w, in);
        }
}

/* SMEM, RDNA2 ISA §6 and chapter 13 "SMEM": sbase[5:0] (SGPR pair / 2),
 * sdata[12:6], glc 16, dlc 14, op[25:18]; dword 1: offset[20:0] (signed),
 * soffset[31:25] (NULL = none). */
int sim_isa_exec_smem(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        unsigned sbase = (in->w0 & 0x3f) * 2, sdata = (in->w0 >> 6) & 0x7f, soff = in->w1 >> 25;
        int32_t offset = (int32_t) (in->w1 << 11) >> 11;
        unsigned n;
        uint64_t addr;

        switch (in->op) {
        case SMEM_S_DCACHE_INV:
                if (r->mem->scalar_invalidate)
                        r->mem->scalar_invalidate(r->mem->userdata);
                return 0;
        case SMEM_S_GL1_INV:
                sim_isa_vcache_invalidate(r, false, true);
                return 0;
        case SMEM_S_MEMTIME: case SMEM_S_MEMREALTIME:
                /* Deterministic clock, serial or parallel: the wave instructions
                 * of the workgroup so far. */
                sim_isa_swrite64(w, sdata, r->ret->wave_instructions - r->wg_start);
                return 0;
        case SMEM_S_LOAD_DWORD: case SMEM_S_BUFFER_LOAD_DWORD: n = 1; break;
        case SMEM_S_LOAD_DWORDX2: case SMEM_S_BUFFER_LOAD_DWORDX2: n = 2; break;
        case SMEM_S_LOAD_DWORDX4: case SMEM_S_BUFFER_LOAD_DWORDX4: n = 4; break;
        case SMEM_S_LOAD_DWORDX8: case SMEM_S_BUFFER_LOAD_DWORDX8: n = 8; break;
        case SMEM_S_LOAD_DWORDX16: case SMEM_S_BUFFER_LOAD_DWORDX16: n = 16; break;
        default:
                return sim_isa_unsupported(r, w, in);
        }
        if (in->op >= SMEM_S_BUFFER_LOAD_DWORD)
                /* Buffer form: sbase is a V#, base address in dwords 0-1 [47:0]. */
                addr = (w->s[sbase] | (uint64_t) (w->s[sbase + 1] & 0xffff) << 32);
        else
                addr = w->s[sbase] | (uint64_t) w->s[sbase + 1] << 32;
        addr += (int64_t) offset;
        if (soff != OPND_NULL)
                addr += w->s[soff];
        addr &= ~3ull; /* SMEM ignores the two low address bits */
        /* A load with GLC (bit 16, "globally coherent", RDNA2 ISA chapter 6)
         * reads around the scalar data cache. */
        bool cached = r->mem->scalar_load && !(in->w0 & 1u << 16);
        for (unsigned i = 0; i < n; i++) {
                uint32_t v;
                void *p;
                int k;

                /* A miss the cache cannot fill faults below, with the
                 * translation's message. */
                if (!cached || r->mem->scalar_load(r->mem->userdata, addr + 4 * i, &v) < 0) {
                        k = sim_isa_mem(r, w, addr + 4 * i, 4, false, &p);
                        if (k < 0)
                                return k;
                        memcpy(&v, p, 4);
                }
                if (sdata + i < 106)
                        w->s[sdata + i] = v;
        }
        return 0;
}
