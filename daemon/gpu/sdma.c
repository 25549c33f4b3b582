/* SPDX-License-Identifier: MIT */
/*
 * SDMA 5.x packet builders (see sdma.h). Pure functions over a caller buffer;
 * no state. Layouts: navi10_sdma_pkt_open.h in drivers/gpu/drm/amd/amdgpu
 * (kfd-facts §3.2 [K10]); usage conventions from tinygrad's AMDCopyQueue
 * (ops_amd.py [T1]) and the kernel's sdma_v5_x emitters [K11].
 */
#include <assert.h>

#include "gpu/sdma.h"

static inline uint32_t lo32(uint64_t v) {
        return (uint32_t) v;
}
static inline uint32_t hi32(uint64_t v) {
        return (uint32_t) (v >> 32);
}

/*
 * COPY_LINEAR, 7 dwords [K10 SDMA_PKT_COPY_LINEAR_*]:
 *   DW0 OP[7:0]=1 SUB_OP[15:8]=0 (ENCRYPT 16, TMZ 18, BACKWARDS 25, BROADCAST 27 = 0)
 *   DW1 COUNT[21:0] = bytes - 1
 *   DW2 DST_SW[17:16], SRC_SW[25:24] = 0 (no swap)
 *   DW3/DW4 SRC_ADDR lo/hi, DW5/DW6 DST_ADDR lo/hi
 * Byte granular: no alignment requirement on src/dst/count.
 */
size_t sdma_emit_copy_linear(uint32_t *buf, uint64_t dst, uint64_t src, uint32_t bytes) {
        assert(bytes >= 1 && bytes <= SDMA_COPY_MAX_BYTES);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_COPY) | SDMA_PKT_HEADER_SUB_OP(SDMA_SUBOP_COPY_LINEAR);
        buf[1] = SDMA_PKT_COPY_LINEAR_COUNT(bytes - 1);
        buf[2] = 0;
        buf[3] = lo32(src);
        buf[4] = hi32(src);
        buf[5] = lo32(dst);
        buf[6] = hi32(dst);
        return SDMA_COPY_LINEAR_DW;
}

/*
 * CONSTANT_FILL, 5 dwords [K10 SDMA_PKT_CONSTANT_FILL_*]:
 *   DW0 OP=11, SW[17:16]=0, FILLSIZE[31:30]=2 (dword fill: Mesa amd/common
 *       SDMA_CONSTANT_FILL_EXTRA_SIZE "0 = byte fill, 2 = DW fill"; libdrm's
 *       amdgpu tests use FILLSIZE 2 with COUNT = bytes-1 on gfx9+)
 *   DW1/DW2 DST_ADDR lo/hi (dword aligned), DW3 SRC_DATA (the 32-bit pattern)
 *   DW4 COUNT[21:0] = bytes - 1 (bytes a multiple of 4)
 */
size_t sdma_emit_constant_fill(uint32_t *buf, uint64_t dst, uint32_t pattern, uint32_t bytes) {
        assert(bytes >= 4 && bytes <= SDMA_FILL_MAX_BYTES && bytes % 4 == 0 && dst % 4 == 0);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_CONST_FILL) |
                 SDMA_PKT_CONSTANT_FILL_HEADER_FILLSIZE(SDMA_CONSTANT_FILL_SIZE_DWORD);
        buf[1] = lo32(dst);
        buf[2] = hi32(dst);
        buf[3] = pattern;
        buf[4] = SDMA_PKT_CONSTANT_FILL_COUNT(bytes - 1);
        return SDMA_CONSTANT_FILL_DW;
}

/*
 * FENCE, 4 dwords [K10 SDMA_PKT_FENCE_*]:
 *   DW0 OP=5, MTYPE[18:16]=3 (uncached; tinygrad AMDCopyQueue.signal uses
 *       MTYPE(3) on gfx10+), GCC 19/SYS 20/SNP 22/GPA 23/L2_POLICY[25:24] = 0
 *   DW1/DW2 ADDR lo/hi (dword aligned), DW3 DATA (32 bits are written)
 */
size_t sdma_emit_fence(uint32_t *buf, uint64_t addr, uint32_t data) {
        assert(addr % 4 == 0);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_FENCE) | SDMA_PKT_FENCE_HEADER_MTYPE(SDMA_FENCE_MTYPE_UC);
        buf[1] = lo32(addr);
        buf[2] = hi32(addr);
        buf[3] = data;
        return SDMA_FENCE_DW;
}

/*
 * TRAP, 2 dwords [K10 SDMA_PKT_TRAP_*]: DW0 OP=6; DW1 INT_CONTEXT[27:0].
 * The interrupt handler passes context_id0 & 0xfffffff to
 * kfd_signal_event_interrupt() (kfd_int_process_v10.c [K8]), so the context is
 * the KFD event id.
 */
size_t sdma_emit_trap(uint32_t *buf, uint32_t int_context) {
        assert(int_context <= 0x0FFFFFFFu);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_TRAP);
        buf[1] = SDMA_PKT_TRAP_INT_CONTEXT(int_context);
        return SDMA_TRAP_DW;
}

/*
 * POLL_REGMEM, 6 dwords [K10 SDMA_PKT_POLL_REGMEM_*]:
 *   DW0 OP=8 SUB_OP=0, HDP_FLUSH 26 = 0, FUNC[30:28], MEM_POLL 31 = 1 (memory)
 *   DW1/DW2 ADDR lo/hi (dword aligned), DW3 VALUE (reference), DW4 MASK
 *       (applied to the read value before comparing)
 *   DW5 INTERVAL[15:0] = 4 (as tinygrad AMDCopyQueue.wait), RETRY_COUNT[27:16]
 *       = 0xFFF (retry forever)
 */
size_t sdma_emit_poll_regmem(uint32_t *buf, uint64_t addr, uint32_t value, uint32_t mask,
                             SdmaPollFunc func) {
        assert(addr % 4 == 0 && (unsigned) func <= SDMA_POLL_FUNC_GT);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_POLL_REGMEM) | SDMA_PKT_HEADER_SUB_OP(SDMA_SUBOP_POLL_REGMEM) |
                 SDMA_PKT_POLL_REGMEM_HEADER_FUNC(func) | SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(1);
        buf[1] = lo32(addr);
        buf[2] = hi32(addr);
        buf[3] = value;
        buf[4] = mask;
        buf[5] = SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(4) |
                 SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(SDMA_POLL_RETRY_FOREVER);
        return SDMA_POLL_REGMEM_DW;
}

/*
 * TIMESTAMP GET_GLOBAL, 3 dwords [K10 SDMA_PKT_TIMESTAMP_GET_GLOBAL_*]:
 *   DW0 OP=13 SUB_OP=2; DW1 WRITE_ADDR[31:3] (bits 2:0 must be 0: 8-byte
 *   aligned, the 64-bit counter is written there); DW2 WRITE_ADDR[63:32].
 */
size_t sdma_emit_timestamp(uint32_t *buf, uint64_t addr) {
        assert(addr % 8 == 0);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_TIMESTAMP) | SDMA_PKT_HEADER_SUB_OP(SDMA_SUBOP_TIMESTAMP_GET_GLOBAL);
        buf[1] = lo32(addr);
        buf[2] = hi32(addr);
        return SDMA_TIMESTAMP_DW;
}

/*
 * GCR_REQ, 5 dwords [K10 SDMA_PKT_GCR_REQ_*; kfd-facts §3.2; ROCr
 * amd_blit_sdma.cpp BuildGCRCommand]:
 *   DW0 OP=17 SUB_OP=1 (user GCR)
 *   DW1 BASE_VA[31:7] = 0
 *   DW2 BASE_VA[47:32] in [15:0] = 0, GCR_CONTROL[15:0] in [31:16]
 *   DW3 GCR_CONTROL[18:16] in [2:0], LIMIT_VA[31:7] = 0
 *   DW4 LIMIT_VA[47:32] in [15:0] = 0, VMID[27:24] = 0 (the queue's)
 * GL2_RANGE (bits 12:11) 0 acts on the whole cache, as ROCr asks.
 */
size_t sdma_emit_gcr_req(uint32_t *buf, uint32_t gcr_control) {
        assert(gcr_control < (1u << 19));
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_GCR_REQ) | SDMA_PKT_HEADER_SUB_OP(SDMA_SUBOP_USER_GCR);
        buf[1] = 0;
        buf[2] = (gcr_control & 0xFFFFu) << 16;
        buf[3] = gcr_control >> 16;
        buf[4] = 0;
        return SDMA_GCR_REQ_DW;
}

/*
 * NOP [K10 SDMA_PKT_NOP_*]: DW0 OP=0, COUNT[29:16] = payload dwords. We pad with
 * ndw one-dword NOPs (all-zero dwords, COUNT 0) as tinygrad does at the ring's
 * end: an engine that honours COUNT and one that skips dword by dword (the
 * tinygrad mock) then land on the same next packet.
 */
size_t sdma_emit_nop(uint32_t *buf, size_t ndw) {
        assert(ndw >= 1);
        for (size_t i = 0; i < ndw; i++)
                buf[i] = SDMA_PKT_HEADER_OP(SDMA_OP_NOP) | SDMA_PKT_NOP_HEADER_COUNT(0);
        return ndw;
}

/*
 * COPY_LINEAR_RECT (linear sub-window), 13 dwords [K10 SDMA_PKT_COPY_LINEAR_SUBWIN;
 * ROCr amd_blit_sdma.cpp SDMA_PKT_COPY_LINEAR_RECT and BuildCopyRectCommand]:
 *   DW0 OP=1 SUB_OP=4, ELEMENT[31:29] = log2(element bytes)
 *   DW1/DW2 SRC base lo/hi (dword aligned)
 *   DW3 SRC_X[13:0] (elements), SRC_Y[29:16] (rows)
 *   DW4 SRC_Z[10:0] (slices), SRC_PITCH[31:13] = pitch in elements - 1
 *   DW5 SRC_SLICE_PITCH[27:0] = slice pitch in elements - 1
 *   DW6..DW10 the same for DST
 *   DW11 RECT_X[13:0] = x - 1, RECT_Y[29:16] = y - 1
 *   DW12 RECT_Z[10:0] = z - 1, DST_SW/SRC_SW = 0
 * A 2-D copy (z == 1) may carry slice pitch 0, as ROCr sends it.
 */
static void rect_side(uint32_t *dw, const SdmaRectSide *s, unsigned element, uint32_t z) {
        uint64_t pitch = s->pitch >> element, slice = z > 1 ? s->slice >> element : 1;

        assert(s->base % 4 == 0 && s->pitch % 4 == 0 && s->pitch % (1u << element) == 0);
        assert(pitch >= 1 && pitch <= SDMA_RECT_PITCH_MAX && slice >= 1 && slice <= SDMA_RECT_SLICE_MAX);
        assert(s->x < SDMA_RECT_XY_MAX && s->y < SDMA_RECT_XY_MAX && s->z < SDMA_RECT_Z_MAX);
        assert(z == 1 || (s->slice % 4 == 0 && s->slice % (1u << element) == 0));
        dw[0] = lo32(s->base);
        dw[1] = hi32(s->base);
        dw[2] = (s->x & 0x3FFFu) | (s->y & 0x3FFFu) << 16;
        dw[3] = (s->z & 0x7FFu) | (uint32_t) (pitch - 1) << 13;
        dw[4] = (uint32_t) (slice - 1) & 0x0FFFFFFFu;
}

size_t sdma_emit_copy_linear_rect(uint32_t *buf, const SdmaRectSide *dst, const SdmaRectSide *src, unsigned element,
                                  uint32_t x, uint32_t y, uint32_t z) {
        assert(element <= SDMA_RECT_ELEMENT_MAX);
        assert(x >= 1 && x <= SDMA_RECT_XY_MAX && y >= 1 && y <= SDMA_RECT_XY_MAX && z >= 1 && z <= SDMA_RECT_Z_MAX);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_COPY) | SDMA_PKT_HEADER_SUB_OP(SDMA_SUBOP_COPY_LINEAR_RECT) |
                 (uint32_t) element << 29;
        rect_side(buf + 1, src, element, z);
        rect_side(buf + 6, dst, element, z);
        buf[11] = ((x - 1) & 0x3FFFu) | ((y - 1) & 0x3FFFu) << 16;
        buf[12] = (z - 1) & 0x7FFu;
        return SDMA_COPY_LINEAR_RECT_DW;
}

/*
 * ATOMIC, 8 dwords [K10 SDMA_PKT_ATOMIC; ROCr amd_blit_sdma.cpp SDMA_PKT_ATOMIC,
 * BuildAtomicDecrementCommand]:
 *   DW0 OP=10, LOOP 16 = 0, ATOMIC_OP[31:25] = TC_OP code
 *   DW1/DW2 ADDR lo/hi, DW3/DW4 SRC_DATA lo/hi, DW5/DW6 CMP_DATA lo/hi
 *   DW7 LOOP_INTERVAL[12:0] = 0
 * ROCr's signal decrement is op 47 (ADD_RTN_64) with SRC_DATA = ~0.
 */
size_t sdma_emit_atomic(uint32_t *buf, unsigned op, uint64_t addr, uint64_t src, uint64_t cmp) {
        assert(op <= 0x7F && (op & 0x20) && addr % 8 == 0);
        buf[0] = SDMA_PKT_HEADER_OP(SDMA_OP_ATOMIC) | (uint32_t) op << 25;
        buf[1] = lo32(addr);
        buf[2] = hi32(addr);
        buf[3] = lo32(src);
        buf[4] = hi32(src);
        buf[5] = lo32(cmp);
        buf[6] = hi32(cmp);
        buf[7] = 0;
        return SDMA_ATOMIC_DW;
}
