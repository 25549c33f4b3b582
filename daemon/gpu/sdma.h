/* SPDX-License-Identifier: MIT */
/*
 * SDMA packet builders for the SDMA 5.x engines of RDNA2 (gfx10.3) user queues.
 * Each sdma_emit_<packet>() writes one packet's dwords into a caller buffer and
 * returns the number of dwords written; the caller (gpu-queue.c) owns the ring
 * and decides where the packet goes. The field layouts are those of the kernel's
 * navi10_sdma_pkt_open.h (SDMA_PKT_<PKT>_<DW>_<field>_{offset,mask,shift}),
 * restated in kfd-facts §3.2; every builder cites its layout.
 *
 * The ring is a byte ring of dwords; a packet never straddles the ring's end
 * (gpu-queue.c pads with NOPs).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Opcodes, header bits [7:0] (navi10_sdma_pkt_open.h SDMA_OP_*). */
#define SDMA_OP_NOP 0
#define SDMA_OP_COPY 1
#define SDMA_OP_WRITE 2
#define SDMA_OP_INDIRECT 4
#define SDMA_OP_FENCE 5
#define SDMA_OP_TRAP 6
#define SDMA_OP_SEM 7
#define SDMA_OP_POLL_REGMEM 8
#define SDMA_OP_COND_EXE 9
#define SDMA_OP_ATOMIC 10
#define SDMA_OP_CONST_FILL 11
#define SDMA_OP_PTEPDE 12
#define SDMA_OP_TIMESTAMP 13
#define SDMA_OP_SRBM_WRITE 14
#define SDMA_OP_PRE_EXE 15
#define SDMA_OP_GPUVM_INV 16
#define SDMA_OP_GCR_REQ 17
#define SDMA_OP_DUMMY_TRAP 32

/* Sub-opcodes, header bits [15:8]. */
#define SDMA_SUBOP_COPY_LINEAR 0
#define SDMA_SUBOP_WRITE_LINEAR 0
#define SDMA_SUBOP_TIMESTAMP_SET 0
#define SDMA_SUBOP_TIMESTAMP_GET 1
#define SDMA_SUBOP_TIMESTAMP_GET_GLOBAL 2
#define SDMA_SUBOP_POLL_REGMEM 0
#define SDMA_SUBOP_CONST_FILL 0

#define SDMA_PKT_HEADER_OP(x) (((uint32_t) (x) & 0xFFu) << 0)
#define SDMA_PKT_HEADER_SUB_OP(x) (((uint32_t) (x) & 0xFFu) << 8)

/* NOP: COUNT[29:16] = payload dwords that follow the header. */
#define SDMA_PKT_NOP_HEADER_COUNT(x) (((uint32_t) (x) & 0x3FFFu) << 16)
#define SDMA_NOP_MAX_PAYLOAD 0x3FFFu

/* COPY_LINEAR DW1 COUNT[21:0] = bytes - 1 (navi10 header: mask 0x003FFFFF). */
#define SDMA_PKT_COPY_LINEAR_COUNT(x) (((uint32_t) (x) & 0x3FFFFFu) << 0)
/* Largest copy one packet can describe on SDMA 5.0: 4 MiB. */
#define SDMA_COPY_MAX_BYTES 0x400000u

/* CONSTANT_FILL: header SW[17:16], FILLSIZE[31:30] (0 = byte, 2 = dword);
 * DW4 COUNT[21:0] = bytes - 1. */
#define SDMA_PKT_CONSTANT_FILL_HEADER_SW(x) (((uint32_t) (x) & 0x3u) << 16)
#define SDMA_PKT_CONSTANT_FILL_HEADER_FILLSIZE(x) (((uint32_t) (x) & 0x3u) << 30)
#define SDMA_CONSTANT_FILL_SIZE_DWORD 2
#define SDMA_PKT_CONSTANT_FILL_COUNT(x) (((uint32_t) (x) & 0x3FFFFFu) << 0)
/* Largest fill one packet can describe (22-bit count): 4 MiB, a dword multiple. */
#define SDMA_FILL_MAX_BYTES 0x400000u

/* FENCE header MTYPE[18:16]; tinygrad uses MTYPE 3 (uncached) on gfx10+. */
#define SDMA_PKT_FENCE_HEADER_MTYPE(x) (((uint32_t) (x) & 0x7u) << 16)
#define SDMA_FENCE_MTYPE_UC 3

/* TRAP DW1 INT_CONTEXT[27:0]. */
#define SDMA_PKT_TRAP_INT_CONTEXT(x) (((uint32_t) (x) & 0x0FFFFFFFu) << 0)

/* POLL_REGMEM header HDP_FLUSH 26, FUNC[30:28], MEM_POLL 31; DW5
 * INTERVAL[15:0], RETRY_COUNT[27:16]. */
#define SDMA_PKT_POLL_REGMEM_HEADER_HDP_FLUSH(x) (((uint32_t) (x) & 0x1u) << 26)
#define SDMA_PKT_POLL_REGMEM_HEADER_FUNC(x) (((uint32_t) (x) & 0x7u) << 28)
#define SDMA_PKT_POLL_REGMEM_HEADER_MEM_POLL(x) (((uint32_t) (x) & 0x1u) << 31)
#define SDMA_PKT_POLL_REGMEM_DW5_INTERVAL(x) (((uint32_t) (x) & 0xFFFFu) << 0)
#define SDMA_PKT_POLL_REGMEM_DW5_RETRY_COUNT(x) (((uint32_t) (x) & 0xFFFu) << 16)
#define SDMA_POLL_RETRY_FOREVER 0xFFFu

/* Compare functions of POLL_REGMEM (same codes as PM4 WAIT_REG_MEM). */
typedef enum SdmaPollFunc {
        SDMA_POLL_FUNC_ALWAYS = 0,
        SDMA_POLL_FUNC_LT = 1,
        SDMA_POLL_FUNC_LE = 2,
        SDMA_POLL_FUNC_EQ = 3,
        SDMA_POLL_FUNC_NE = 4,
        SDMA_POLL_FUNC_GE = 5,
        SDMA_POLL_FUNC_GT = 6,
} SdmaPollFunc;

/* GCR_REQ (SDMA 5.x, gfx10.1+): SUB_OP 1 is the user GCR request (ROCr
 * amd_blit_sdma.cpp BuildGCRCommand: SDMA_SUBOP_USER_GCR). GCR_CONTROL
 * [18:0] has the ACQUIRE_MEM GCR_CNTL layout (pm4.h): DW2 [31:16] holds its
 * bits [15:0], DW3 [2:0] its bits [18:16] (kfd-facts §3.2). */
#define SDMA_SUBOP_USER_GCR 1
#define SDMA_GCR_GLK_WB (1u << 6)
#define SDMA_GCR_GLK_INV (1u << 7)
#define SDMA_GCR_GLV_INV (1u << 8)
#define SDMA_GCR_GL1_INV (1u << 9)
#define SDMA_GCR_GL2_INV (1u << 14)
#define SDMA_GCR_GL2_WB (1u << 15)
/* ROCr's two requests around every SDMA command on gfx10+ (useGCR): before,
 * write back and invalidate GL2/GL1/GLV/GLK so the engine reads what the CPU
 * or a shader wrote; after, write back GL2/GLK so what it wrote leaves the
 * GL2 before the fence (BuildGCRCommand(invalidate = true / false)). */
#define SDMA_GCR_ACQUIRE                                                                           \
        (SDMA_GCR_GLK_WB | SDMA_GCR_GLK_INV | SDMA_GCR_GLV_INV | SDMA_GCR_GL1_INV | SDMA_GCR_GL2_INV | \
         SDMA_GCR_GL2_WB)
#define SDMA_GCR_RELEASE (SDMA_GCR_GLK_WB | SDMA_GCR_GL2_WB)

/* COPY_LINEAR_SUB_WIND (navi10_sdma_pkt_open.h SDMA_SUBOP_COPY_LINEAR_SUB_WIND;
 * ROCr's COPY_LINEAR_RECT) and its field widths (ROCr SDMA_PKT_COPY_LINEAR_RECT:
 * pitch_bits 19, slice_bits 28, rect_xy_bits 14, rect_z_bits 11). */
#define SDMA_SUBOP_COPY_LINEAR_RECT 4
#define SDMA_RECT_PITCH_MAX (1u << 19)     /* elements */
#define SDMA_RECT_SLICE_MAX (1u << 28)     /* elements */
#define SDMA_RECT_XY_MAX (1u << 14)        /* elements / rows */
#define SDMA_RECT_Z_MAX (1u << 11)         /* slices */
#define SDMA_RECT_ELEMENT_MAX 4            /* log2 of 16-byte elements */

/* One side of a rectangular copy: a dword-aligned base, the offset of the
 * rectangle's first element (x in elements, y in rows, z in slices) and the
 * row and slice pitch in bytes. */
typedef struct SdmaRectSide {
        uint64_t base;
        uint32_t x, y, z;
        uint64_t pitch, slice;
} SdmaRectSide;

/* TC_OP codes of ATOMIC (the TC_OP enum of AMD's gfx9/gfx10 chip headers;
 * ROCr's BlitSdma decrements a signal with SDMA_ATOMIC_ADD64 = 47 and
 * SRC_DATA = -1, amd_blit_sdma.cpp BuildAtomicDecrementCommand). */
#define SDMA_ATOMIC_SWAP_RTN_64 0x27u
#define SDMA_ATOMIC_CMPSWAP_RTN_64 0x28u
#define SDMA_ATOMIC_ADD_RTN_64 0x2Fu
#define SDMA_ATOMIC_SUB_RTN_64 0x30u

/* Packet sizes in dwords. */
#define SDMA_COPY_LINEAR_DW 7
#define SDMA_CONSTANT_FILL_DW 5
#define SDMA_FENCE_DW 4
#define SDMA_TRAP_DW 2
#define SDMA_POLL_REGMEM_DW 6
#define SDMA_TIMESTAMP_DW 3
#define SDMA_GCR_REQ_DW 5
#define SDMA_COPY_LINEAR_RECT_DW 13
#define SDMA_ATOMIC_DW 8

/*
 * Each builder writes its packet at buf and returns the dword count. Arguments
 * the hardware cannot encode (count out of range, misaligned addresses) are
 * programmer errors of gpu-queue.c and are asserted; callers validate jobs.
 */
size_t sdma_emit_copy_linear(uint32_t *buf, uint64_t dst, uint64_t src, uint32_t bytes);
size_t sdma_emit_constant_fill(uint32_t *buf, uint64_t dst, uint32_t pattern, uint32_t bytes);
size_t sdma_emit_fence(uint32_t *buf, uint64_t addr, uint32_t data);
size_t sdma_emit_trap(uint32_t *buf, uint32_t int_context);
size_t sdma_emit_poll_regmem(uint32_t *buf, uint64_t addr, uint32_t value, uint32_t mask,
                             SdmaPollFunc func);
size_t sdma_emit_timestamp(uint32_t *buf, uint64_t addr);
/* A rectangle of x elements (1 << element bytes each) by y rows by z slices
 * from src to dst; x, y, z >= 1 and within the fields' widths, pitches and
 * slice pitches multiples of the element size and of 4 bytes. */
size_t sdma_emit_copy_linear_rect(uint32_t *buf, const SdmaRectSide *dst, const SdmaRectSide *src, unsigned element,
                                  uint32_t x, uint32_t y, uint32_t z);
/* A 64-bit atomic TC_OP on the qword at addr (8-byte aligned), no loop. */
size_t sdma_emit_atomic(uint32_t *buf, unsigned op, uint64_t addr, uint64_t src, uint64_t cmp);
/* A whole-cache GCR request (BASE_VA = LIMIT_VA = 0, GL2_RANGE 0: all of it)
 * with gcr_control [18:0]. */
size_t sdma_emit_gcr_req(uint32_t *buf, uint32_t gcr_control);
/* A NOP of ndw dwords in total (ndw >= 1, header included). */
size_t sdma_emit_nop(uint32_t *buf, size_t ndw);
