/* SPDX-License-Identifier: MIT */
/*
 * The SDMA packet decoder of the simulated GPU. It extracts fields from the
 * dword layouts documented for SDMA 5.x (navi10_sdma_pkt_open.h as tabulated
 * in kfd-facts §3.2) with its own shifts and masks, and never from the
 * daemon's encoders, so that an encoding mistake in the daemon shows up as a
 * decode error or a wrong result instead of being mirrored. Pure functions;
 * the SDMA engine (sim-sdma.c) and tests own the buffers.
 *
 * Strictness: bits that the navi10 layout marks reserved must be zero, counts
 * use the 22-bit navi10 COUNT field (4 MiB per COPY/FILL packet), addresses
 * must have the alignment the layout implies (FENCE/POLL dword, TIMESTAMP
 * qword, ATOMIC the operand's size, COPY_LINEAR_RECT dword bases and
 * 4-byte pitches), and features the simulator does not model (byte
 * swapping, TMZ, encryption, broadcast, backwards copies, multi-fill, float
 * or cache TC_OPs) are rejected rather than executed wrongly.
 */
#include <errno.h>

#include "sim-atomic.h"
#include "sim-sdma-decode.h"
#include "util/macro.h"

/* Bit-field helpers: FIELD(v, hi, lo). */
#define BITS(v, hi, lo) (((uint32_t) (v) >> (lo)) & ((uint32_t) (((uint64_t) 1 << ((hi) - (lo) + 1)) - 1)))
#define MASK(hi, lo) ((uint32_t) ((((uint64_t) 1 << ((hi) - (lo) + 1)) - 1) << (lo)))

static uint64_t addr64(uint32_t lo, uint32_t hi) {
        return ((uint64_t) hi << 32) | lo;
}

static int bad(const char **ret_reason, const char *reason) {
        if (ret_reason)
                *ret_reason = reason;
        return -EBADMSG;
}

/* COPY_LINEAR, 7 dwords (navi10 SDMA_PKT_COPY_LINEAR): DW0 op 1 sub 0, ENCRYPT 16,
 * TMZ 18, BACKWARDS 25, BROADCAST 27; DW1 COUNT[21:0] = bytes - 1; DW2 DST_SW[17:16],
 * SRC_SW[25:24] (cache-policy positions [20:18]/[28:26] of SDMA 5.2 are tolerated);
 * DW3/4 SRC; DW5/6 DST. */
static int decode_copy(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        if (p->sub_op != SDMA_SUBOP_COPY_LINEAR)
                return bad(ret_reason, "COPY sub-op other than LINEAR and LINEAR_RECT (4) is not modelled");
        if (dw[0] & (1u << 16))
                return bad(ret_reason, "COPY_LINEAR: ENCRYPT is not modelled");
        if (dw[0] & (1u << 18))
                return bad(ret_reason, "COPY_LINEAR: TMZ is not modelled");
        if (dw[0] & (1u << 25))
                return bad(ret_reason, "COPY_LINEAR: BACKWARDS is not modelled");
        if (dw[0] & (1u << 27))
                return bad(ret_reason, "COPY_LINEAR: BROADCAST is not modelled");
        if (dw[0] & ~(MASK(15, 0) | (1u << 16) | (1u << 18) | (1u << 25) | (1u << 27)))
                return bad(ret_reason, "COPY_LINEAR: reserved header bits set");
        if (dw[1] & ~MASK(21, 0))
                return bad(ret_reason, "COPY_LINEAR: COUNT above the 22-bit field (max 4 MiB)");
        if (BITS(dw[2], 17, 16) || BITS(dw[2], 25, 24))
                return bad(ret_reason, "COPY_LINEAR: byte swapping is not modelled");
        if (dw[2] & ~(MASK(17, 16) | MASK(20, 18) | MASK(25, 24) | MASK(28, 26)))
                return bad(ret_reason, "COPY_LINEAR: reserved DW2 bits set");
        p->copy.bytes = (uint64_t) BITS(dw[1], 21, 0) + 1;
        p->copy.src = addr64(dw[3], dw[4]);
        p->copy.dst = addr64(dw[5], dw[6]);
        return 0;
}

/* COPY_LINEAR_RECT (linear sub-window), 13 dwords (navi10_sdma_pkt_open.h
 * SDMA_PKT_COPY_LINEAR_SUBWIN, as ROCr's SDMA_PKT_COPY_LINEAR_RECT restates it
 * in amd_blit_sdma.cpp / sdma_registers.h): DW0 op 1 sub 4, [28:16] reserved,
 * ELEMENT [31:29] = log2(bytes per element); DW1/2 SRC; DW3 SRC_X [13:0],
 * SRC_Y [29:16]; DW4 SRC_Z [10:0], SRC_PITCH [31:13] (19 bits); DW5
 * SRC_SLICE_PITCH [27:0]; DW6/7 DST; DW8-10 the same for DST; DW11 RECT_X
 * [13:0], RECT_Y [29:16]; DW12 RECT_Z [10:0], DST_SW [17:16], SRC_SW [25:24]
 * (cache policies [20:18]/[28:26] of SDMA 5.2 tolerated). Pitches, slice
 * pitches and the rectangle are stored minus one and in elements
 * (BuildCopyRectCommand: "pitch = (pitch >> element) - 1", "rect_x = xcount -
 * 1"); X offsets are in elements, Y in rows, Z in slices.
 *
 * The engine's limits: ELEMENT at most 4 (16-byte elements: ROCr's
 * maxAlignedElement never goes past 4, Mesa's SDMA paths handle 1..16 bpp);
 * bases dword aligned (ROCr: "Base addresses must be DWORD (4 byte)
 * aligned"); pitches a multiple of 4 bytes (Mesa radv_sdma_check_pitches:
 * pitch aligned to MAX2(1, 4 / bpp) elements, slice pitch to 4). A row wider
 * than its pitch, or rows that overrun their slice pitch in a 3-D copy, would
 * make rows or slices overlap; no documented use does that, and the model
 * refuses it instead of guessing the order the engine writes them in. */
static int decode_copy_rect(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        typeof(p->rect) *r = &p->rect;
        uint64_t e;

        if (dw[0] & MASK(28, 16))
                return bad(ret_reason, "COPY_LINEAR_RECT: reserved header bits [28:16] set");
        if ((dw[3] & (MASK(15, 14) | MASK(31, 30))) || (dw[8] & (MASK(15, 14) | MASK(31, 30))) ||
            (dw[4] & MASK(12, 11)) || (dw[9] & MASK(12, 11)) || (dw[5] & MASK(31, 28)) || (dw[10] & MASK(31, 28)) ||
            (dw[11] & (MASK(15, 14) | MASK(31, 30))))
                return bad(ret_reason, "COPY_LINEAR_RECT: reserved bits set in an offset, pitch or rectangle dword");
        if (BITS(dw[12], 17, 16) || BITS(dw[12], 25, 24))
                return bad(ret_reason, "COPY_LINEAR_RECT: byte swapping is not modelled");
        if (dw[12] & ~(MASK(10, 0) | MASK(17, 16) | MASK(20, 18) | MASK(25, 24) | MASK(28, 26)))
                return bad(ret_reason, "COPY_LINEAR_RECT: reserved DW12 bits set");
        r->element = BITS(dw[0], 31, 29);
        if (r->element > 4)
                return bad(ret_reason, "COPY_LINEAR_RECT: ELEMENT above 4 (16-byte elements)");
        e = 1u << r->element;
        r->src = addr64(dw[1], dw[2]);
        r->src_x = BITS(dw[3], 13, 0);
        r->src_y = BITS(dw[3], 29, 16);
        r->src_z = BITS(dw[4], 10, 0);
        r->src_pitch = ((uint64_t) BITS(dw[4], 31, 13) + 1) * e;
        r->src_slice = ((uint64_t) BITS(dw[5], 27, 0) + 1) * e;
        r->dst = addr64(dw[6], dw[7]);
        r->dst_x = BITS(dw[8], 13, 0);
        r->dst_y = BITS(dw[8], 29, 16);
        r->dst_z = BITS(dw[9], 10, 0);
        r->dst_pitch = ((uint64_t) BITS(dw[9], 31, 13) + 1) * e;
        r->dst_slice = ((uint64_t) BITS(dw[10], 27, 0) + 1) * e;
        r->x = BITS(dw[11], 13, 0) + 1;
        r->y = BITS(dw[11], 29, 16) + 1;
        r->z = BITS(dw[12], 10, 0) + 1;
        if (r->src % 4 || r->dst % 4)
                return bad(ret_reason, "COPY_LINEAR_RECT: source or destination base not dword aligned");
        if (r->src_pitch % 4 || r->dst_pitch % 4)
                return bad(ret_reason, "COPY_LINEAR_RECT: pitch not a multiple of 4 bytes");
        if (r->z > 1 && (r->src_slice % 4 || r->dst_slice % 4))
                return bad(ret_reason, "COPY_LINEAR_RECT: slice pitch not a multiple of 4 bytes");
        if (((uint64_t) r->src_x + r->x) * e > r->src_pitch || ((uint64_t) r->dst_x + r->x) * e > r->dst_pitch)
                return bad(ret_reason, "COPY_LINEAR_RECT: a row runs past its pitch");
        if (r->z > 1 && (((uint64_t) r->src_y + r->y) * r->src_pitch > r->src_slice ||
                         ((uint64_t) r->dst_y + r->y) * r->dst_pitch > r->dst_slice))
                return bad(ret_reason, "COPY_LINEAR_RECT: the rows run past the slice pitch");
        return 0;
}

/* ATOMIC, 8 dwords (navi10_sdma_pkt_open.h SDMA_PKT_ATOMIC; ROCr
 * amd_blit_sdma.cpp SDMA_PKT_ATOMIC): DW0 op 10, sub-op 0, LOOP 16, TMZ 18,
 * ATOMIC_OP [31:25] (a TC_OP code; CACHE_POLICY [22:20] and CPV 24 of later
 * SDMA tolerated); DW1/2 ADDR; DW3/4 SRC_DATA; DW5/6 CMP_DATA; DW7
 * LOOP_INTERVAL [12:0]. The address must be aligned to the operand (PAL
 * BuildAtomicMem: "The destination address must be aligned to the size of
 * the operands"). LOOP repeats a compare-swap until it succeeds; on any
 * other op it has no defined meaning and is refused. */
static int decode_atomic(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        typeof(p->atomic) *a = &p->atomic;
        unsigned width;

        if (p->sub_op != 0)
                return bad(ret_reason, "ATOMIC: non-zero sub-op");
        if (dw[0] & (1u << 18))
                return bad(ret_reason, "ATOMIC: TMZ is not modelled");
        if (dw[0] & ((1u << 17) | (1u << 19) | (1u << 23)))
                return bad(ret_reason, "ATOMIC: reserved header bits set");
        if (dw[7] & ~MASK(12, 0))
                return bad(ret_reason, "ATOMIC: reserved DW7 bits set");
        a->op = BITS(dw[0], 31, 25);
        a->loop = BITS(dw[0], 16, 16);
        a->addr = addr64(dw[1], dw[2]);
        a->src = addr64(dw[3], dw[4]);
        a->cmp = addr64(dw[5], dw[6]);
        a->loop_interval = BITS(dw[7], 12, 0);
        width = sim_tc_atomic_width(a->op);
        if (!width)
                return bad(ret_reason, "ATOMIC: ATOMIC_OP is not an integer memory atomic (float, cache or reserved TC_OP)");
        if (a->addr % width)
                return bad(ret_reason, "ATOMIC: address not aligned to the operand size");
        if (a->loop && !sim_tc_atomic_is_cmpswap(a->op))
                return bad(ret_reason, "ATOMIC: LOOP set on an op other than compare-swap");
        return 0;
}

/* CONSTANT_FILL, 5 dwords: DW0 op 11, SW[17:16], FILLSIZE[31:30]; DW1/2 DST;
 * DW3 DATA; DW4 COUNT[21:0] = bytes - 1. FILLSIZE 0 = byte fill (DATA[7:0]),
 * 2 = dword fill of the 32-bit DATA, COUNT in bytes either way (Mesa sid.h
 * SDMA_CONSTANT_FILL_EXTRA_SIZE "0 = byte fill, 2 = DW fill";
 * ac_emit_sdma_constant_fill). 1 and 3 are not documented and are refused. */
static int decode_fill(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        if (p->sub_op != 0)
                return bad(ret_reason, "CONST_FILL: sub-op other than 0 (DATA_FILL_MULTI) is not modelled");
        if (BITS(dw[0], 17, 16))
                return bad(ret_reason, "CONST_FILL: byte swapping is not modelled");
        if (dw[0] & ~(MASK(15, 0) | MASK(17, 16) | MASK(26, 24) | (1u << 28) | MASK(31, 30)))
                return bad(ret_reason, "CONST_FILL: reserved header bits set");
        if (dw[4] & ~MASK(21, 0))
                return bad(ret_reason, "CONST_FILL: COUNT above the 22-bit field (max 4 MiB)");
        p->fill.fillsize = BITS(dw[0], 31, 30);
        p->fill.dst = addr64(dw[1], dw[2]);
        p->fill.data = dw[3];
        p->fill.bytes = (uint64_t) BITS(dw[4], 21, 0) + 1;
        if (p->fill.fillsize != SDMA_CONSTANT_FILL_BYTE && p->fill.fillsize != SDMA_CONSTANT_FILL_DWORD)
                return bad(ret_reason, "CONST_FILL: FILLSIZE must be 0 (byte) or 2 (dword)");
        if (p->fill.fillsize == SDMA_CONSTANT_FILL_DWORD) {
                if (p->fill.bytes % 4)
                        return bad(ret_reason, "CONST_FILL: dword fill byte count not a multiple of 4");
                if (p->fill.dst % 4)
                        return bad(ret_reason, "CONST_FILL: dword fill destination not dword aligned");
        }
        return 0;
}

/* FENCE, 4 dwords: DW0 op 5, MTYPE[18:16], GCC 19, SYS 20, SNP 22, GPA 23,
 * L2_POLICY[25:24] (SDMA 6 adds LLC 26, CPV 28); DW1/2 ADDR (dword aligned); DW3 DATA. */
static int decode_fence(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        if (p->sub_op != 0)
                return bad(ret_reason, "FENCE: non-zero sub-op");
        if (dw[0] & (1u << 23))
                return bad(ret_reason, "FENCE: GPA (physical address) is not modelled");
        if (dw[0] & ~(MASK(15, 0) | MASK(20, 16) | MASK(26, 22) | (1u << 28)))
                return bad(ret_reason, "FENCE: reserved header bits set");
        p->fence.addr = addr64(dw[1], dw[2]);
        p->fence.data = dw[3];
        if (p->fence.addr % 4)
                return bad(ret_reason, "FENCE: address not dword aligned");
        return 0;
}

/* TRAP, 2 dwords: DW0 op 6; DW1 INT_CONTEXT[27:0] (KFD decodes 28 bits, kfd_int_process_v10.c). */
static int decode_trap(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        if (p->sub_op != 0 || (dw[0] & ~MASK(15, 0)))
                return bad(ret_reason, "TRAP: reserved header bits set");
        if (dw[1] & ~MASK(27, 0))
                return bad(ret_reason, "TRAP: INT_CONTEXT above 28 bits");
        p->trap.context = BITS(dw[1], 27, 0);
        return 0;
}

/* POLL_REGMEM, 6 dwords: DW0 op 8, HDP_FLUSH 26, FUNC[30:28], MEM_POLL 31
 * (SDMA 6: CACHE_POLICY[22:20], CPV 24); DW1/2 ADDR; DW3 VALUE; DW4 MASK;
 * DW5 INTERVAL[15:0], RETRY_COUNT[27:16]. FUNC uses WAIT_REG_MEM's codes,
 * 0..6; 7 is reserved. */
static int decode_poll(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        if (p->sub_op != 0)
                return bad(ret_reason, "POLL_REGMEM: only sub-op 0 (poll) is modelled");
        if (dw[0] & ~(MASK(15, 0) | MASK(22, 20) | (1u << 24) | (1u << 26) | MASK(31, 28)))
                return bad(ret_reason, "POLL_REGMEM: reserved header bits set");
        if (dw[5] & ~MASK(27, 0))
                return bad(ret_reason, "POLL_REGMEM: reserved DW5 bits set");
        p->poll.func = BITS(dw[0], 30, 28);
        p->poll.mem_poll = BITS(dw[0], 31, 31);
        p->poll.addr = addr64(dw[1], dw[2]);
        p->poll.value = dw[3];
        p->poll.mask = dw[4];
        p->poll.interval = BITS(dw[5], 15, 0);
        p->poll.retry_count = BITS(dw[5], 27, 16);
        if (p->poll.func == 7)
                return bad(ret_reason, "POLL_REGMEM: FUNC 7 is reserved");
        if (p->poll.mem_poll && p->poll.addr % 4)
                return bad(ret_reason, "POLL_REGMEM: memory address not dword aligned");
        return 0;
}

/* TIMESTAMP, 3 dwords: DW0 op 13, sub-op SET 0 / GET 1 / GET_GLOBAL 2 (SDMA 6:
 * L2_POLICY[25:24], LLC 26, CPV 28); DW1 WRITE_ADDR[31:3] (qword aligned); DW2 hi. */
static int decode_timestamp(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        if (p->sub_op != SDMA_SUBOP_TIMESTAMP_GET && p->sub_op != SDMA_SUBOP_TIMESTAMP_GET_GLOBAL)
                return bad(ret_reason, "TIMESTAMP: only GET and GET_GLOBAL are modelled");
        if (dw[0] & ~(MASK(15, 0) | MASK(26, 24) | (1u << 28)))
                return bad(ret_reason, "TIMESTAMP: reserved header bits set");
        p->timestamp.addr = addr64(dw[1], dw[2]);
        if (p->timestamp.addr % 8)
                return bad(ret_reason, "TIMESTAMP: address not 8-byte aligned");
        return 0;
}

/* GCR_REQ, 5 dwords (kfd-facts §3.2; navi10_sdma_pkt_open.h SDMA_PKT_GCR_REQ):
 * DW0 op 17, SUB_OP 0 (the kernel's rings) or 1 (user GCR: ROCr
 * BuildGCRCommand); DW1 BASE_VA[31:7] in
 * [31:7]; DW2 BASE_VA[47:32] in [15:0], GCR_CONTROL[15:0] in [31:16]; DW3
 * GCR_CONTROL[18:16] in [2:0], LIMIT_VA[31:7] in [31:7]; DW4 LIMIT_VA[47:32]
 * in [15:0], VMID[27:24]. */
static int decode_gcr(const uint32_t *dw, SimSdmaPacket *p, const char **ret_reason) {
        if (p->sub_op > 1)
                return bad(ret_reason, "GCR_REQ: SUB_OP must be 0 (the kernel's sdma_v5_2_ring_emit_mem_sync) or 1 "
                                       "(user GCR)");
        if (dw[0] & ~MASK(15, 0))
                return bad(ret_reason, "GCR_REQ: reserved header bits set");
        if ((dw[1] & MASK(6, 0)) || (dw[3] & MASK(6, 3)) || (dw[4] & ~(MASK(15, 0) | MASK(27, 24))))
                return bad(ret_reason, "GCR_REQ: reserved bits set");
        p->gcr.control = BITS(dw[2], 31, 16) | BITS(dw[3], 2, 0) << 16;
        p->gcr.base = (uint64_t) (dw[1] & ~MASK(6, 0)) | (uint64_t) BITS(dw[2], 15, 0) << 32;
        p->gcr.limit = (uint64_t) (dw[3] & ~MASK(6, 0)) | (uint64_t) BITS(dw[4], 15, 0) << 32;
        return 0;
}

int sim_sdma_decode(const uint32_t *dw, size_t avail_dwords, SimSdmaPacket *ret, const char **ret_reason) {
        SimSdmaPacket p = {};
        int r;

        if (ret_reason)
                *ret_reason = NULL;
        if (avail_dwords < 1)
                return -EAGAIN;

        p.op = BITS(dw[0], 7, 0);
        p.sub_op = BITS(dw[0], 15, 8);

        switch (p.op) {
        case SDMA_OP_NOP:
                /* NOP: DW0 COUNT[29:16] payload dwords follow (burst NOP). */
                if (p.sub_op != 0 || (dw[0] & MASK(31, 30)))
                        return bad(ret_reason, "NOP: reserved header bits set");
                p.nop.count = BITS(dw[0], 29, 16);
                p.n_dwords = 1 + (size_t) p.nop.count;
                break;
        case SDMA_OP_COPY:
                p.n_dwords = p.sub_op == SDMA_SUBOP_COPY_LINEAR_RECT ? 13 : 7;
                break;
        case SDMA_OP_ATOMIC:
                p.n_dwords = 8;
                break;
        case SDMA_OP_WRITE:
                /* WRITE_LINEAR: DW1/2 DST (dword aligned); DW3 COUNT[19:0] = dwords - 1,
                 * SW[25:24]; DW4.. data. */
                if (p.sub_op != SDMA_SUBOP_WRITE_LINEAR)
                        return bad(ret_reason, "WRITE sub-op other than LINEAR is not modelled");
                if (avail_dwords < 4)
                        return -EAGAIN;
                if (dw[3] & ~MASK(19, 0))
                        return bad(ret_reason, "WRITE_LINEAR: reserved or swap bits set in DW3");
                p.n_dwords = 4 + (size_t) BITS(dw[3], 19, 0) + 1;
                break;
        case SDMA_OP_FENCE:
                p.n_dwords = 4;
                break;
        case SDMA_OP_TRAP:
                p.n_dwords = 2;
                break;
        case SDMA_OP_POLL_REGMEM:
                p.n_dwords = 6;
                break;
        case SDMA_OP_CONST_FILL:
                p.n_dwords = 5;
                break;
        case SDMA_OP_TIMESTAMP:
                p.n_dwords = 3;
                break;
        case SDMA_OP_GCR_REQ:
                /* GCR_REQ, 5 dwords: a cache write-back/invalidate request. */
                p.n_dwords = 5;
                break;
        default:
                return bad(ret_reason, "unknown SDMA opcode");
        }

        if (avail_dwords < p.n_dwords)
                return -EAGAIN;

        switch (p.op) {
        case SDMA_OP_COPY:
                r = p.sub_op == SDMA_SUBOP_COPY_LINEAR_RECT ? decode_copy_rect(dw, &p, ret_reason)
                                                            : decode_copy(dw, &p, ret_reason);
                break;
        case SDMA_OP_ATOMIC:
                r = decode_atomic(dw, &p, ret_reason);
                break;
        case SDMA_OP_WRITE:
                p.write.dst = addr64(dw[1], dw[2]);
                p.write.n_data = BITS(dw[3], 19, 0) + 1;
                p.write.data = dw + 4;
                r = p.write.dst % 4 ? bad(ret_reason, "WRITE_LINEAR: destination not dword aligned") : 0;
                break;
        case SDMA_OP_FENCE:
                r = decode_fence(dw, &p, ret_reason);
                break;
        case SDMA_OP_TRAP:
                r = decode_trap(dw, &p, ret_reason);
                break;
        case SDMA_OP_POLL_REGMEM:
                r = decode_poll(dw, &p, ret_reason);
                break;
        case SDMA_OP_CONST_FILL:
                r = decode_fill(dw, &p, ret_reason);
                break;
        case SDMA_OP_TIMESTAMP:
                r = decode_timestamp(dw, &p, ret_reason);
                break;
        case SDMA_OP_GCR_REQ:
                r = decode_gcr(dw, &p, ret_reason);
                break;
        default:
                r = 0;
        }
        if (r < 0)
                return r;

        *ret = p;
        return 0;
}
