/* SPDX-License-Identifier: MIT */
/*
 * Cross-lane data movement of the vector unit: the DPP16 and DPP8 forms of
 * VOP1/VOP2/VOPC (RDNA2 ISA §6.3.3 "Data Parallel Processing (DPP)" and the
 * VOP_DPP16/VOP_DPP8 microcode formats of chapter 13), v_permlane16_b32 and
 * v_permlanex16_b32 (VOP3), and the LDS-crossbar permutes ds_permute_b32,
 * ds_bpermute_b32 and ds_swizzle_b32 (chapter 11, DS opcodes 178/179/53),
 * which touch no LDS memory. Called by the VALU and DS executors for one instruction of one
 * wave; owns nothing.
 *
 * Lanes are grouped in rows of 16 (two rows in wave32, four in wave64) and
 * banks of 4 lanes within a row. What a lane does when its source is not
 * usable follows LLVM's description of the modifiers (llvm/docs/
 * AMDGPUModifierSyntax.rst, "dpp16_ctrl", "row_mask", "bank_mask",
 * "bound_ctrl", "fi"): a source is invalid when it lies outside the row
 * (row_shl/row_shr past the edge) or, without FI, when it is an inactive
 * lane; an invalid source reads 0 with BOUND_CTRL set and otherwise leaves
 * the destination lane unwritten; a lane whose row or bank is masked off is
 * not written either.
 */
#include <errno.h>
#include <string.h>

#include "sim-isa-valu.h"
#include "sim-isa-opcodes.h"

/* The source lane of lane l for a DPP16 control (gfx10 set), or -1 when it
 * lies outside the row; -2 for controls gfx10 does not have (wave shifts and
 * rotates, row_bcast, the zero shifts). */
static int dpp16_source(unsigned ctrl, unsigned l) {
        unsigned row = l & ~15u, i = l & 15, n = ctrl & 15;

        if (ctrl <= 0xff)                       /* quad_perm:[a,b,c,d] */
                return (int) ((l & ~3u) | ((ctrl >> (2 * (l & 3))) & 3));
        switch (ctrl & ~15u) {
        case 0x100:                             /* row_shl:n, lane l reads l+n */
                if (n == 0)
                        return -2;
                return i + n < 16 ? (int) (l + n) : -1;
        case 0x110:                             /* row_shr:n, lane l reads l-n */
                if (n == 0)
                        return -2;
                return i >= n ? (int) (l - n) : -1;
        case 0x120:                             /* row_ror:n */
                if (n == 0)
                        return -2;
                return (int) (row | ((i - n) & 15));
        case 0x150:                             /* row_share:n */
                return (int) (row | n);
        case 0x160:                             /* row_xmask:n */
                return (int) (row | (i ^ n));
        }
        if (ctrl == 0x140)                      /* row_mirror */
                return (int) (row | (15 - i));
        if (ctrl == 0x141)                      /* row_half_mirror */
                return (int) ((l & ~7u) | (7 - (l & 7)));
        return -2;
}

/* DPP forms put src0 in the second dword and name its VGPR in bits [7:0].
 * DPP16 (src0 field 0xfa): dpp_ctrl[16:8], fi 18, bound_ctrl 19, src0_neg 20,
 * src0_abs 21, src1_neg 22, src1_abs 23, bank_mask[27:24], row_mask[31:28].
 * DPP8 (0xe9, or 0xea with FI): lane_sel[i] in bits [10+3i:8+3i] picks the
 * source among the 8 lanes of lane i's group; without FI an inactive source
 * reads 0 (no masks, no bound control, no modifiers).
 * The permuted src0 goes to the model's hidden row SIM_ISA_SDWA_SRC0 and the
 * lanes that must not be written leave v->exec. */
int sim_isa_dpp_prepare(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, Vop *v) {
        uint32_t w1 = in->w1, *t = w->v[SIM_ISA_SDWA_SRC0];
        const uint32_t *s = w->v[w1 & 0xff];
        uint64_t exec = v->exec, live = wave_exec(w), enabled = 0;

        if ((in->w0 & 0x1ff) != 0xfa) {
                bool fi = (in->w0 & 0x1ff) == 0xea;
                LANES {
                        unsigned src = (l & ~7u) | ((w1 >> (8 + 3 * (l & 7))) & 7);
                        t[l] = fi || ((live >> src) & 1) ? s[src] : 0;
                }
                enabled = exec;
        } else {
                unsigned ctrl = (w1 >> 8) & 0x1ff, bank_mask = (w1 >> 24) & 15, row_mask = (w1 >> 28) & 15;
                bool fi = (w1 >> 18) & 1, bound_ctrl = (w1 >> 19) & 1;

                if (dpp16_source(ctrl, 0) == -2)
                        return sim_isa_unsupported(r, w, in);
                LANES {
                        if (!((row_mask >> (l / 16)) & 1) || !((bank_mask >> ((l / 4) & 3)) & 1))
                                continue;
                        int src = dpp16_source(ctrl, l);
                        if (src >= 0 && (fi || ((live >> src) & 1)))
                                t[l] = s[src];
                        else if (bound_ctrl)
                                t[l] = 0;
                        else
                                continue;
                        enabled |= 1ull << l;
                }
                v->neg = ((w1 >> 20) & 1) | ((w1 >> 22) & 1) << 1;
                v->abs = ((w1 >> 21) & 1) | ((w1 >> 23) & 1) << 1;
        }
        v->src[0] = OPND_VGPR0 + SIM_ISA_SDWA_SRC0;
        v->exec = enabled;
        return 0;
}

/* v_permlane16_b32 / v_permlanex16_b32 D, S0, S1, S2 (RDNA2 ISA, VOP3
 * opcodes 0x377/0x378): the 64-bit lane select {S2, S1} holds one 4-bit
 * source index per lane of a row; permlane16 reads from the lane's own row,
 * permlanex16 from the other row of its 32-lane half (0<->1, 2<->3). S0
 * must be a VGPR. op_sel[0] is FI and op_sel[1] BOUND_CTRL, as for DPP
 * (LLVM VOP3Instructions.td, VOP3_PERMLANE_Profile). The ABS and NEG bits
 * mean nothing to this integer move and are ignored: clang-15's code
 * generator sets ABS[1] and NEG[1] together with op_sel[1] (it passes the
 * bound_ctrl flag as an all-ones source modifier; e.g. 0xd778121f 0x4305831e
 * in the device library's sub-group reductions), which llvm-objdump does not
 * print and the hardware evidently ignores. */
int sim_isa_exec_permlane(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in, const Vop *v) {
        uint64_t exec = v->exec, live = wave_exec(w);
        uint32_t src[SIM_ISA_MAX_LANES], *d = w->v[v->vdst];
        bool cross = v->op == VOP3_V_PERMLANEX16_B32, fi = v->opsel & 1, bound_ctrl = (v->opsel >> 1) & 1;
        uint64_t sel;

        if (v->src[0] < OPND_VGPR0 || v->clamp || v->omod || (v->opsel & ~3u))
                return sim_isa_unsupported(r, w, in);
        sel = sim_isa_sread(r, w, in, v->src[1]) | (uint64_t) sim_isa_sread(r, w, in, v->src[2]) << 32;
        memcpy(src, w->v[v->src[0] - OPND_VGPR0], sizeof(src));
        LANES {
                unsigned row = (l / 16) ^ (cross ? 1u : 0u), from = row * 16 + ((sel >> (4 * (l & 15))) & 15);
                if (fi || ((live >> from) & 1))
                        d[l] = src[from];
                else if (bound_ctrl)
                        d[l] = 0;
        }
        return 0;
}

/* ds_permute_b32 (forward: lane i's DATA0 goes to lane ADDR/4) and
 * ds_bpermute_b32 (backward: lane i reads DATA0 of lane ADDR/4), with the
 * 16-bit offset added to ADDR first; only active lanes send, an inactive or
 * unwritten source gives 0, and where several lanes send to one lane the
 * highest wins (RDNA ISA DS_PERMUTE_B32/DS_BPERMUTE_B32 pseudocode). The
 * lane index is the address's bits [6:2]: the crossbar spans 32 lanes, so a
 * wave64 permutes each 32-lane half on its own, as LLVM assumes for GFX10
 * wave64 ("wave64 targets without wave-wide bpermute", SIISelLowering.cpp
 * lowerWaveShuffle, which combines per-half permutes). */
int sim_isa_exec_ds_permute(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        uint64_t exec = wave_exec(w);
        uint32_t offset = in->w0 & 0xffff, tmp[SIM_ISA_MAX_LANES] = { 0 };
        const uint32_t *addr = w->v[in->w1 & 0xff], *data = w->v[(in->w1 >> 8) & 0xff];
        uint32_t *d = w->v[in->w1 >> 24];

        (void) r;
        if (in->op == DS_DS_PERMUTE_B32) {
                LANES tmp[(l & 32) | (((addr[l] + offset) >> 2) & 31)] = data[l];
        } else {
                LANES {
                        unsigned from = (l & 32) | (((addr[l] + offset) >> 2) & 31);
                        tmp[l] = (exec >> from) & 1 ? data[from] : 0;
                }
        }
        LANES d[l] = tmp[l];
        return 0;
}

/* ds_swizzle_b32: lane i reads ADDR's VGPR of a lane chosen by the 16-bit
 * offset, an inactive source giving 0 (RDNA2 ISA, DS_SWIZZLE_B32 pseudocode,
 * "thread_valid[j] ? thread_in[j] : 0"). The offset's modes, as LLVM encodes
 * and prints them (llvm/lib/Target/AMDGPU/SIDefines.h, namespace Swizzle;
 * AMDGPUInstPrinter::printSwizzle):
 *  - bit 15 clear, bit-mask mode: within each 32 lanes, lane i reads lane
 *    ((i & and_mask) | or_mask) ^ xor_mask, the masks being bits [4:0],
 *    [9:5] and [14:10] (swap, reverse, broadcast and BITMASK_PERM are all
 *    this mode);
 *  - 0x8000-0x80ff, quad-permute mode: lane i reads lane (i & ~3) | sel,
 *    sel being bits [2k+1:2k] for k = i & 3.
 * The rotate (0xc000) and FFT (0xe000) modes LLVM knows for GFX9 and later,
 * and the encodings between, are refused as unsupported forms. */
int sim_isa_exec_ds_swizzle(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *in) {
        uint64_t exec = wave_exec(w);
        uint32_t offset = in->w0 & 0xffff, tmp[SIM_ISA_MAX_LANES] = { 0 };
        unsigned and_mask = offset & 31, or_mask = (offset >> 5) & 31, xor_mask = (offset >> 10) & 31;
        const uint32_t *src = w->v[in->w1 & 0xff];
        uint32_t *d = w->v[in->w1 >> 24];

        if (offset > 0x80ff)
                return sim_isa_unsupported(r, w, in);
        LANES {
                unsigned from;
                if (offset & 0x8000)
                        from = (l & ~3u) | ((offset >> (2 * (l & 3))) & 3);
                else
                        from = (l & 32) | ((((l & 31) & and_mask) | or_mask) ^ xor_mask);
                tmp[l] = (exec >> from) & 1 ? src[from] : 0;
        }
        LANES d[l] = tmp[l];
        return 0;
}
