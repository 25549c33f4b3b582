/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU's SDMA packet decoder: a pure function from ring dwords to
 * one decoded packet, written from the documented SDMA 5.x (navi10) layouts in
 * kfd-facts §3.2. It owns nothing and touches no memory but its arguments; the
 * SDMA engine (sim-sdma.c) executes what it returns, and packet-builder tests
 * elsewhere in the tree call it to check their encoders.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* SDMA 5.x opcodes (navi10_sdma_pkt_open.h, kfd-facts §3.2): header [7:0] OP, [15:8] SUB_OP. */
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
#define SDMA_OP_GCR_REQ 17

#define SDMA_SUBOP_COPY_LINEAR 0
/* COPY_LINEAR_SUB_WIND (navi10_sdma_pkt_open.h SDMA_SUBOP_COPY_LINEAR_SUB_WIND;
 * ROCr calls it COPY_LINEAR_RECT). */
#define SDMA_SUBOP_COPY_LINEAR_RECT 4
#define SDMA_SUBOP_WRITE_LINEAR 0
/* CONSTANT_FILL FILLSIZE[31:30] (Mesa sid.h SDMA_CONSTANT_FILL_EXTRA_SIZE). */
#define SDMA_CONSTANT_FILL_BYTE 0
#define SDMA_CONSTANT_FILL_DWORD 2
#define SDMA_SUBOP_TIMESTAMP_SET 0
#define SDMA_SUBOP_TIMESTAMP_GET 1
#define SDMA_SUBOP_TIMESTAMP_GET_GLOBAL 2

typedef struct SimSdmaPacket {
        unsigned op, sub_op;
        size_t n_dwords;            /* length of the whole packet */
        union {
                struct { uint64_t src, dst; uint64_t bytes; } copy;          /* COPY_LINEAR */
                struct {
                        unsigned element;          /* log2 of the element size in bytes, 0..4 */
                        uint64_t src, dst;         /* dword-aligned bases */
                        uint32_t src_x, src_y, src_z, dst_x, dst_y, dst_z; /* offsets: elements, rows, slices */
                        uint64_t src_pitch, src_slice, dst_pitch, dst_slice; /* bytes */
                        uint32_t x, y, z;          /* the rectangle: elements, rows, slices (>= 1) */
                } rect;                                                     /* COPY_LINEAR_RECT */
                struct {
                        unsigned op;               /* TC_OP code (sim-atomic.h) */
                        bool loop;
                        uint64_t addr, src, cmp;
                        unsigned loop_interval;
                } atomic;                                                   /* ATOMIC */
                struct { uint64_t dst; uint32_t data; uint64_t bytes; unsigned fillsize; } fill;
                struct { uint64_t addr; uint32_t data; } fence;
                struct { uint32_t context; } trap;
                struct { uint64_t dst; uint32_t n_data; const uint32_t *data; } write; /* WRITE_LINEAR; data points into dw */
                struct { uint64_t addr; uint32_t value, mask; unsigned func; bool mem_poll; unsigned interval, retry_count; } poll;
                struct { uint64_t addr; } timestamp;                            /* GET_GLOBAL */
                struct { unsigned count; } nop;
                struct { uint32_t control; uint64_t base, limit; } gcr;         /* GCR_REQ: GCR_CONTROL [18:0] */
        };
} SimSdmaPacket;

/*
 * sim_sdma_decode() - decode the packet that starts at dw[0].
 * @dw: the ring dwords, in ring order (the caller unwraps the ring).
 * @avail_dwords: how many dwords of @dw are valid.
 * @ret: the decoded packet on success.
 * @ret_reason: on -EBADMSG, a static string saying what is wrong (may be NULL).
 *
 * Returns 0, -EAGAIN if avail_dwords is shorter than the packet, -EBADMSG for
 * an unknown or malformed packet (reserved bits, misaligned address) with a
 * reason in *ret_reason.
 */
int sim_sdma_decode(const uint32_t *dw, size_t avail_dwords, SimSdmaPacket *ret, const char **ret_reason);
