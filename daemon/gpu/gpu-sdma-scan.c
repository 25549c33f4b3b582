/* SPDX-License-Identifier: MIT */
/*
 * gpu_sdma_packet_scan() (gpu.h): the SDMA packets of a relayed client, read
 * for their size and the memory they touch, on a copy the caller made. The
 * engine itself checks each packet's fields when it runs it (and stops the
 * queue, in the client's own context, on a bad one); what is decided here is
 * only which packets a client may put on a queue of the daemon's at all and
 * where they reach. Layouts: the kernel's navi10_sdma_pkt_open.h, as ROCr's
 * amd_blit_sdma.cpp restates them for BlitSdma, kfd-facts §3.2; sdma.h has
 * the opcodes. Refused: INDIRECT (a buffer of packets nobody read), SEM,
 * COND_EXE, PTEPDE (page tables), SRBM_WRITE (registers), PRE_EXE, GPUVM_INV,
 * DUMMY_TRAP, POLL_REGMEM of a register, TIMESTAMP SET (the engine's clock).
 */
#include <errno.h>

#include "gpu/gpu.h"
#include "gpu/sdma.h"
#include "util/macro.h"

#define BITS(v, hi, lo) ((uint32_t) (((uint64_t) (v) >> (lo)) & ((1ull << ((hi) - (lo) + 1)) - 1u)))

static uint64_t addr64(uint32_t lo, uint32_t hi) {
        return ((uint64_t) hi << 32) | lo;
}

static int refuse(const char **why, const char *text) {
        *why = text;
        return -EINVAL;
}

/* A rectangle's first and last byte + 1 on one side: x in elements, y in
 * rows, z in slices, rows and slices of pitch bytes (COPY_LINEAR_RECT). */
static GpuSdmaRange rect_range(uint64_t base, uint64_t x, uint64_t y, uint64_t z, uint64_t pitch, uint64_t slice,
                               uint64_t e, uint64_t rx, uint64_t ry, uint64_t rz) {
        uint64_t first = x * e + y * pitch + z * slice;
        uint64_t last = (x + rx) * e + (y + ry - 1) * pitch + (z + rz - 1) * slice;

        return (GpuSdmaRange) { base + first, last - first };
}

int gpu_sdma_packet_scan(const uint32_t *dw, size_t avail, size_t *ret_ndw, GpuSdmaRange *ranges, unsigned *ret_n,
                         const char **why) {
        unsigned op, sub, n = 0;
        size_t ndw;

        if (avail < 1)
                return -EAGAIN;
        op = BITS(dw[0], 7, 0);
        sub = BITS(dw[0], 15, 8);
        switch (op) {
        case SDMA_OP_NOP:
                ndw = 1 + BITS(dw[0], 29, 16);
                break;
        case SDMA_OP_COPY:
                if (sub != SDMA_SUBOP_COPY_LINEAR && sub != SDMA_SUBOP_COPY_LINEAR_RECT)
                        return refuse(why, "a COPY other than LINEAR and LINEAR_RECT");
                ndw = sub == SDMA_SUBOP_COPY_LINEAR ? 7 : 13;
                break;
        case SDMA_OP_WRITE:
                if (avail < 4)
                        return -EAGAIN;
                ndw = 4 + (size_t) BITS(dw[3], 19, 0) + 1;
                break;
        case SDMA_OP_FENCE:
                ndw = 4;
                break;
        case SDMA_OP_TRAP:
                ndw = 2;
                break;
        case SDMA_OP_POLL_REGMEM:
                if (!(dw[0] >> 31))
                        return refuse(why, "a POLL_REGMEM of a register (only memory is polled for clients)");
                ndw = 6;
                break;
        case SDMA_OP_ATOMIC:
                ndw = 8;
                break;
        case SDMA_OP_CONST_FILL:
                ndw = 5;
                break;
        case SDMA_OP_TIMESTAMP:
                if (sub != SDMA_SUBOP_TIMESTAMP_GET && sub != SDMA_SUBOP_TIMESTAMP_GET_GLOBAL)
                        return refuse(why, "a TIMESTAMP other than GET (setting the engine's clock)");
                ndw = 3;
                break;
        case SDMA_OP_GCR_REQ:
                ndw = 5;
                break;
        default:
                return refuse(why, "an SDMA opcode clients may not use (only BlitSdma's packets are relayed)");
        }
        if (avail < ndw)
                return -EAGAIN;
        switch (op) {
        case SDMA_OP_COPY:
                if (sub == SDMA_SUBOP_COPY_LINEAR) {
                        uint64_t bytes = (uint64_t) BITS(dw[1], 21, 0) + 1;
                        ranges[n++] = (GpuSdmaRange) { addr64(dw[3], dw[4]), bytes };
                        ranges[n++] = (GpuSdmaRange) { addr64(dw[5], dw[6]), bytes };
                } else {
                        uint64_t e = 1ull << MIN(BITS(dw[0], 31, 29), 4u);
                        uint64_t rx = BITS(dw[11], 13, 0) + 1ull, ry = BITS(dw[11], 29, 16) + 1ull;
                        uint64_t rz = BITS(dw[12], 10, 0) + 1ull;
                        ranges[n++] = rect_range(addr64(dw[1], dw[2]), BITS(dw[3], 13, 0), BITS(dw[3], 29, 16),
                                                 BITS(dw[4], 10, 0), (BITS(dw[4], 31, 13) + 1ull) * e,
                                                 (BITS(dw[5], 27, 0) + 1ull) * e, e, rx, ry, rz);
                        ranges[n++] = rect_range(addr64(dw[6], dw[7]), BITS(dw[8], 13, 0), BITS(dw[8], 29, 16),
                                                 BITS(dw[9], 10, 0), (BITS(dw[9], 31, 13) + 1ull) * e,
                                                 (BITS(dw[10], 27, 0) + 1ull) * e, e, rx, ry, rz);
                }
                break;
        case SDMA_OP_WRITE:
                ranges[n++] = (GpuSdmaRange) { addr64(dw[1], dw[2]), 4ull * (BITS(dw[3], 19, 0) + 1) };
                break;
        case SDMA_OP_FENCE:
                ranges[n++] = (GpuSdmaRange) { addr64(dw[1], dw[2]), 4 };
                break;
        case SDMA_OP_POLL_REGMEM:
                ranges[n++] = (GpuSdmaRange) { addr64(dw[1], dw[2]), 4 };
                break;
        case SDMA_OP_ATOMIC:
                ranges[n++] = (GpuSdmaRange) { addr64(dw[1], dw[2]), 8 };
                break;
        case SDMA_OP_CONST_FILL:
                ranges[n++] = (GpuSdmaRange) { addr64(dw[1], dw[2]), (uint64_t) BITS(dw[4], 21, 0) + 1 };
                break;
        case SDMA_OP_TIMESTAMP:
                ranges[n++] = (GpuSdmaRange) { addr64(dw[1], dw[2]), 8 };
                break;
        default:
                break;
        }
        *ret_ndw = ndw;
        *ret_n = n;
        return 0;
}
