/* SPDX-License-Identifier: MIT */
/*
 * Instruction decoding: which encoding a dword starts (RDNA2 ISA chapter 13,
 * "Microcode Formats": the fixed high bits of each format), its opcode, its
 * size with or without a trailing 32-bit literal (§3.1.3 "Literal
 * Constants"), and the name of every instruction the interpreter implements
 * (sim-isa-names.h). Stateless; used by the interpreter loop and by the tests.
 */
#include <string.h>

#include "sim-isa-internal.h"
#include "sim-isa-all-names.h"
#include "sim-isa-names.h"
#include "sim-isa-opcodes.h"

static SimIsaEnc classify(uint32_t w0) {
        if ((w0 >> 23) == 0x17d)
                return ENC_SOP1;        /* 1011 1110 1 */
        if ((w0 >> 23) == 0x17e)
                return ENC_SOPC;        /* 1011 1111 0 */
        if ((w0 >> 23) == 0x17f)
                return ENC_SOPP;        /* 1011 1111 1 */
        if ((w0 >> 28) == 0xb)
                return ENC_SOPK;        /* 1011 */
        if ((w0 >> 30) == 0x2)
                return ENC_SOP2;        /* 10 */
        if ((w0 >> 31) == 0) {
                if ((w0 >> 25) == 0x3f)
                        return ENC_VOP1;        /* 0111 111 */
                if ((w0 >> 25) == 0x3e)
                        return ENC_VOPC;        /* 0111 110 */
                return ENC_VOP2;                /* 0 */
        }
        switch (w0 >> 26) {
        case 0x3d: return ENC_SMEM;     /* 1111 01 */
        case 0x35: return ENC_VOP3;     /* 1101 01 */
        case 0x33: return ENC_VOP3P;    /* 1100 11 */
        case 0x36: return ENC_DS;       /* 1101 10 */
        case 0x38: return ENC_MUBUF;    /* 1110 00 */
        case 0x37:                      /* 1101 11, SEG[15:14] picks FLAT/SCRATCH/GLOBAL */
                switch ((w0 >> 14) & 3) {
                case 0: return ENC_FLAT;
                case 1: return ENC_SCRATCH;
                case 2: return ENC_GLOBAL;
                }
                return ENC_UNKNOWN;
        }
        return ENC_UNKNOWN;
}

static SimIsaExt vop_ext(uint32_t w0) {
        unsigned src0 = w0 & 0x1ff;
        if (src0 == 0xf9)
                return EXT_SDWA;
        if (src0 == 0xfa || src0 == 0xe9 || src0 == 0xea)
                return EXT_DPP;
        return EXT_NONE;
}

static bool vop2_has_k(unsigned op) {
        return op == VOP2_V_FMAMK_F32 || op == VOP2_V_FMAAK_F32 || op == VOP2_V_FMAMK_F16 || op == VOP2_V_FMAAK_F16;
}

bool sim_isa_needs_literal(uint32_t w0) {
        switch (classify(w0)) {
        case ENC_SOP2: case ENC_SOPC:
                return (w0 & 0xff) == OPND_LITERAL || ((w0 >> 8) & 0xff) == OPND_LITERAL;
        case ENC_SOP1:
                return (w0 & 0xff) == OPND_LITERAL;
        case ENC_SOPK:
                return ((w0 >> 23) & 31) == SOPK_S_SETREG_IMM32_B32;
        case ENC_VOP1: case ENC_VOPC:
                return (w0 & 0x1ff) == OPND_LITERAL || vop_ext(w0) != EXT_NONE;
        case ENC_VOP2:
                return (w0 & 0x1ff) == OPND_LITERAL || vop_ext(w0) != EXT_NONE || vop2_has_k((w0 >> 25) & 0x3f);
        default:
                return false;
        }
}

void sim_isa_decode(const uint32_t *words, SimIsaInst *ret) {
        uint32_t w0 = words[0];
        SimIsaInst in = { .w0 = w0, .size = 4 };

        in.enc = classify(w0);
        switch (in.enc) {
        case ENC_SOP2: in.op = (w0 >> 23) & 0x7f; break;
        case ENC_SOPK: in.op = (w0 >> 23) & 0x1f; break;
        case ENC_SOP1: in.op = (w0 >> 8) & 0xff; break;
        case ENC_SOPC: in.op = (w0 >> 16) & 0x7f; break;
        case ENC_SOPP: in.op = (w0 >> 16) & 0x7f; break;
        case ENC_VOP2: in.op = (w0 >> 25) & 0x3f; break;
        case ENC_VOP1: in.op = (w0 >> 9) & 0xff; break;
        case ENC_VOPC: in.op = (w0 >> 17) & 0xff; break;
        case ENC_SMEM: in.op = (w0 >> 18) & 0xff; in.size = 8; break;
        case ENC_VOP3: in.op = (w0 >> 16) & 0x3ff; in.size = 8; break;
        case ENC_VOP3P: in.op = (w0 >> 16) & 0x7f; in.size = 8; break;
        case ENC_DS: in.op = (w0 >> 18) & 0xff; in.size = 8; break;
        case ENC_MUBUF: in.op = (w0 >> 18) & 0x7f; in.size = 8; break;
        case ENC_FLAT: case ENC_SCRATCH: case ENC_GLOBAL: in.op = (w0 >> 18) & 0x7f; in.size = 8; break;
        default: break;
        }
        if (in.enc == ENC_VOP1 || in.enc == ENC_VOP2 || in.enc == ENC_VOPC)
                in.ext = vop_ext(w0);
        if (in.ext != EXT_NONE) {
                /* The second dword holds the SDWA/DPP controls (and src0). */
                in.w1 = words[1];
                in.size = 8;
        } else if (in.size == 8) {
                in.w1 = words[1];
                if (in.enc == ENC_VOP3 || in.enc == ENC_VOP3P) {
                        uint32_t w1 = in.w1;
                        if ((w1 & 0x1ff) == OPND_LITERAL || ((w1 >> 9) & 0x1ff) == OPND_LITERAL ||
                            ((w1 >> 18) & 0x1ff) == OPND_LITERAL) {
                                in.has_literal = true;
                                in.size = 12;
                                in.literal = words[2];
                        }
                }
        } else if (in.size == 4 && sim_isa_needs_literal(w0)) {
                in.has_literal = true;
                in.literal = words[1];
                in.size = 8;
        }
        *ret = in;
}

/* Source operand codes the model does not provide: reserved codes, the
 * shared/private aperture constants, POPS_EXITING_WAVE_ID, DPP/SDWA markers
 * and LDS_DIRECT. */
static bool bad_code(unsigned c) {
        return (c >= 209 && c <= 239) || c == 249 || c == 250 || c == 254;
}

bool sim_isa_bad_operand(const SimIsaInst *in) {
        uint32_t w0 = in->w0, w1 = in->w1;

        switch (in->enc) {
        case ENC_SOP2: case ENC_SOPC:
                return bad_code(w0 & 0xff) || bad_code((w0 >> 8) & 0xff);
        case ENC_SOP1:
                return bad_code(w0 & 0xff);
        case ENC_VOP1: case ENC_VOP2: case ENC_VOPC:
                if (in->ext == EXT_SDWA)
                        /* src0/src1 are 8-bit codes with an SGPR flag (bits 23/31). */
                        return (((w1 >> 23) & 1) && bad_code(w1 & 0xff)) ||
                               (in->enc != ENC_VOP1 && ((w1 >> 31) & 1) && bad_code((w0 >> 9) & 0xff));
                return in->ext == EXT_NONE && bad_code(w0 & 0x1ff);
        case ENC_VOP3: case ENC_VOP3P:
                return bad_code(w1 & 0x1ff) || bad_code((w1 >> 9) & 0x1ff) || bad_code((w1 >> 18) & 0x1ff);
        default:
                return false;
        }
}

/* One more than the highest VGPR an operand field naming vgpr can reach:
 * the widest operand is 4 dwords (x4 loads and stores, ds_read2_b64, the
 * 64-bit compare-and-swap), rows past 255 wrap to the first ones. */
static unsigned vgpr_end(unsigned vgpr) {
        return vgpr + 4 > SIM_ISA_NUM_VGPRS ? SIM_ISA_NUM_VGPRS : vgpr + 4;
}

/* The same for a 9-bit source operand code: 256..511 name VGPRs. */
static unsigned src_end(unsigned code) {
        return code >= OPND_VGPR0 ? vgpr_end(code - OPND_VGPR0) : 0;
}

static unsigned max3(unsigned a, unsigned b, unsigned c) {
        unsigned m = a > b ? a : b;
        return m > c ? m : c;
}

unsigned sim_isa_vgpr_end(const SimIsaInst *in) {
        uint32_t w0 = in->w0, w1 = in->w1;
        unsigned end;

        switch (in->enc) {
        case ENC_VOP1: case ENC_VOP2: case ENC_VOPC:
                /* src0 [8:0] (in the second dword [7:0] with SDWA and DPP,
                 * counted whether or not SDWA's S0 makes it an SGPR), vsrc1
                 * [16:9], vdst [24:17] (VOPC's opcode there: its destination
                 * is VCC). */
                end = in->ext != EXT_NONE ? vgpr_end(w1 & 0xff) : src_end(w0 & 0x1ff);
                return max3(end, in->enc == ENC_VOP1 ? 0 : vgpr_end((w0 >> 9) & 0xff),
                            in->enc == ENC_VOPC ? 0 : vgpr_end((w0 >> 17) & 0xff));
        case ENC_VOP3: case ENC_VOP3P:
                /* vdst [7:0], an SGPR for the compares (VOP3 opcodes 0..255,
                 * RDNA2 ISA §13.3.2), counted for the others (v_readlane's
                 * too); src0..2 in the second dword. */
                end = max3(src_end(w1 & 0x1ff), src_end((w1 >> 9) & 0x1ff), src_end((w1 >> 18) & 0x1ff));
                if (in->enc == ENC_VOP3 && in->op < 0x100)
                        return end;
                return end > vgpr_end(w0 & 0xff) ? end : vgpr_end(w0 & 0xff);
        case ENC_DS:
                /* addr [7:0], data0 [15:8], data1 [23:16], vdst [31:24]. */
                return max3(vgpr_end(w1 & 0xff), vgpr_end((w1 >> 8) & 0xff),
                            max3(vgpr_end((w1 >> 16) & 0xff), vgpr_end(w1 >> 24), 0));
        case ENC_FLAT: case ENC_SCRATCH: case ENC_GLOBAL: case ENC_MUBUF:
                /* addr [7:0], data [15:8], vdst [31:24] (MUBUF: vaddr,
                 * vdata; saddr, srsrc and soffset name SGPRs). */
                return max3(vgpr_end(w1 & 0xff), vgpr_end((w1 >> 8) & 0xff),
                            in->enc == ENC_MUBUF ? 0 : vgpr_end(w1 >> 24));
        default:
                return 0;
        }
}

#define LOOKUP(table, op) ((op) < ELEMS(table) ? (table)[op] : NULL)

const char *sim_isa_inst_name(const SimIsaInst *in) {
        if (in->ext != EXT_NONE && in->enc == ENC_VOP2 && vop2_has_k(in->op))
                return NULL;    /* the literal forms have no SDWA or DPP variant */
        switch (in->enc) {
        case ENC_SOP2: return LOOKUP(names_sop2, in->op);
        case ENC_SOPK: return LOOKUP(names_sopk, in->op);
        case ENC_SOP1: return LOOKUP(names_sop1, in->op);
        case ENC_SOPC: return LOOKUP(names_sopc, in->op);
        case ENC_SOPP: return LOOKUP(names_sopp, in->op);
        case ENC_SMEM: return LOOKUP(names_smem, in->op);
        case ENC_VOP2: return LOOKUP(names_vop2, in->op);
        case ENC_VOP1: return LOOKUP(names_vop1, in->op);
        case ENC_VOPC: return LOOKUP(names_vopc, in->op);
        case ENC_VOP3: return LOOKUP(names_vop3, in->op);
        case ENC_VOP3P: return LOOKUP(names_vop3p, in->op);
        case ENC_DS: return LOOKUP(names_ds, in->op);
        case ENC_MUBUF: return LOOKUP(names_mubuf, in->op);
        case ENC_FLAT: return LOOKUP(names_flat, in->op);
        case ENC_SCRATCH: return LOOKUP(names_scratch, in->op);
        case ENC_GLOBAL: return LOOKUP(names_global, in->op);
        default: return NULL;
        }
}

const char *sim_isa_any_name(const SimIsaInst *in) {
        switch (in->enc) {
        case ENC_SOP2: return LOOKUP(all_names_sop2, in->op);
        case ENC_SOPK: return LOOKUP(all_names_sopk, in->op);
        case ENC_SOP1: return LOOKUP(all_names_sop1, in->op);
        case ENC_SOPC: return LOOKUP(all_names_sopc, in->op);
        case ENC_SOPP: return LOOKUP(all_names_sopp, in->op);
        case ENC_SMEM: return LOOKUP(all_names_smem, in->op);
        case ENC_VOP2: return LOOKUP(all_names_vop2, in->op);
        case ENC_VOP1: return LOOKUP(all_names_vop1, in->op);
        case ENC_VOPC: return LOOKUP(all_names_vopc, in->op);
        case ENC_VOP3: return LOOKUP(all_names_vop3, in->op);
        case ENC_VOP3P: return LOOKUP(all_names_vop3p, in->op);
        case ENC_DS: return LOOKUP(all_names_ds, in->op);
        case ENC_MUBUF: return LOOKUP(all_names_mubuf, in->op);
        case ENC_FLAT: return LOOKUP(all_names_flat, in->op);
        case ENC_SCRATCH: return LOOKUP(all_names_scratch, in->op);
        case ENC_GLOBAL: return LOOKUP(all_names_global, in->op);
        default: return NULL;
        }
}

const char *sim_isa_enc_name(SimIsaEnc enc) {
        static const char *const names[_ENC_MAX] = {
                [ENC_SOP2] = "SOP2", [ENC_SOPK] = "SOPK", [ENC_SOP1] = "SOP1", [ENC_SOPC] = "SOPC",
                [ENC_SOPP] = "SOPP", [ENC_SMEM] = "SMEM", [ENC_VOP2] = "VOP2", [ENC_VOP1] = "VOP1",
                [ENC_VOPC] = "VOPC", [ENC_VOP3] = "VOP3", [ENC_VOP3P] = "VOP3P", [ENC_DS] = "DS",
                [ENC_MUBUF] = "MUBUF", [ENC_FLAT] = "FLAT", [ENC_SCRATCH] = "SCRATCH", [ENC_GLOBAL] = "GLOBAL",
                [ENC_UNKNOWN] = "unknown encoding",
        };
        return enc < _ENC_MAX ? names[enc] : "unknown encoding";
}

const char *sim_isa_name(const uint32_t *words, unsigned *ret_size) {
        SimIsaInst in;

        sim_isa_decode(words, &in);
        if (ret_size)
                *ret_size = in.size;
        if (sim_isa_bad_operand(&in))
                return NULL;
        return sim_isa_inst_name(&in);
}

static bool in_table(const char *const *table, size_t n, const char *name, size_t len) {
        for (size_t i = 0; i < n; i++)
                if (table[i] && strlen(table[i]) == len && memcmp(table[i], name, len) == 0)
                        return true;
        return false;
}

static bool ends_with(const char *s, size_t len, const char *suffix, size_t *ret_len) {
        size_t n = strlen(suffix);
        if (len > n && memcmp(s + len - n, suffix, n) == 0) {
                *ret_len = len - n;
                return true;
        }
        return false;
}

bool sim_isa_knows(const char *mnemonic) {
        size_t len = strlen(mnemonic), base;

        if (ends_with(mnemonic, len, "_sdwa", &base) || ends_with(mnemonic, len, "_dpp", &base)) {
                /* SDWA and DPP apply to the VOP1/VOP2/VOPC operations without a literal. */
                for (unsigned op = 0; op < ELEMS(names_vop2); op++)
                        if (vop2_has_k(op) && names_vop2[op] && strlen(names_vop2[op]) == base &&
                            memcmp(names_vop2[op], mnemonic, base) == 0)
                                return false;
                return in_table(names_vop1, ELEMS(names_vop1), mnemonic, base) ||
                       in_table(names_vop2, ELEMS(names_vop2), mnemonic, base) ||
                       in_table(names_vopc, ELEMS(names_vopc), mnemonic, base);
        }
        if (ends_with(mnemonic, len, "_e64", &base))
                return in_table(names_vop3, ELEMS(names_vop3), mnemonic, base);
        if (ends_with(mnemonic, len, "_e32", &base))
                return in_table(names_vop1, ELEMS(names_vop1), mnemonic, base) ||
                       in_table(names_vop2, ELEMS(names_vop2), mnemonic, base) ||
                       in_table(names_vopc, ELEMS(names_vopc), mnemonic, base);
#define T(x) in_table(x, ELEMS(x), mnemonic, len)
        return T(names_sop2) || T(names_sopk) || T(names_sop1) || T(names_sopc) || T(names_sopp) ||
               T(names_smem) || T(names_vop2) || T(names_vop1) || T(names_vopc) || T(names_vop3) ||
               T(names_vop3p) || T(names_ds) || T(names_mubuf) || T(names_flat) || T(names_scratch) || T(names_global);
#undef T
}

const char *sim_isa_opcode_name(SimIsaEnc enc, unsigned op) {
        SimIsaInst in = { .enc = enc, .op = op };
        return sim_isa_inst_name(&in);
}
