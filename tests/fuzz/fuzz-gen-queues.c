/* SPDX-License-Identifier: MIT */
/*
 * Seeds of the queue fuzz targets (fuzz-sdma.c, fuzz-pm4.c): rings built
 * with the daemon's own packet builders (daemon/gpu/sdma.c, pm4.c) against
 * the rig's memory (fuzz-sim-layout.h) — what the daemon submits — plus
 * faults, polls that never pass, malformed headers, short rings, wrapping
 * positions and doorbells out of range. Each seed is the target's 4-byte
 * header and the ring dwords.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz-gen.h"
#include "fuzz-sim-layout.h"
#include "gpu/pm4.h"
#include "gpu/sdma.h"

#define MAX_DW 1024u

typedef struct Ring {
        uint8_t header[4];
        uint32_t dw[MAX_DW];
        size_t n;
} Ring;

static int write_ring(const char *dir, const char *name, const Ring *r) {
        uint8_t buf[4 + 4 * MAX_DW];

        memcpy(buf, r->header, 4);
        memcpy(buf + 4, r->dw, r->n * 4);
        return write_seed(dir, name, buf, 4 + r->n * 4);
}

/* The same ring at the start, wrapping the end of the ring, with the
 * pointers past 2^32 and near 2^64, and with each doorbell variant. */
static int write_variants(const char *dir, const char *name, Ring *r) {
        static const uint8_t headers[][4] = {
                { 0, 0, 0, 0 }, { 0xfc, 0x03, 0, 0 }, { 0x10, 0, 2, 0 }, { 0xf0, 0x03, 1, 0 },
                { 0, 0, 0, 1 }, { 0, 0, 0, 2 }, { 0, 0, 0, 3 }, { 0x20, 0, 0, 5 },
        };
        char n[96];

        for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
                memcpy(r->header, headers[i], 4);
                snprintf(n, sizeof n, "%s-%zu", name, i);
                if (write_ring(dir, n, r) < 0)
                        return -1;
        }
        return 0;
}

int sdma_corpus(const char *dir) {
        static const uint32_t bad_headers[] = { 0x00000003, 0x000000ff, 0x00000101, 0x0000000e, 0x00000007 };
        Ring r = {};
        char name[64];

        /* What the daemon's copy and fill jobs look like: timestamp, the
         * work, timestamp, fence + trap, padded with NOPs. */
        r.n = 0;
        r.n += sdma_emit_timestamp(r.dw + r.n, RIG_DATA_VA + 0x8000);
        r.n += sdma_emit_copy_linear(r.dw + r.n, RIG_DATA_VA + 0x1000, RIG_DATA_VA, 4096);
        r.n += sdma_emit_constant_fill(r.dw + r.n, RIG_SMALL_VA, 0xdeadbeef, 4096);
        r.n += sdma_emit_timestamp(r.dw + r.n, RIG_DATA_VA + 0x8008);
        r.n += sdma_emit_fence(r.dw + r.n, RIG_EVENT_PAGE_VA + 8, 1);
        r.n += sdma_emit_trap(r.dw + r.n, 1);
        r.n += sdma_emit_nop(r.dw + r.n, 3);
        if (write_variants(dir, "job", &r) < 0)
                return -1;

        /* What ROCr's BlitSdma sends for a hipMemcpy2D/3D with a completion
         * signal: a rectangular copy, the 64-bit signal decrement (ATOMIC
         * ADD -1), fence + trap; then a 3-D one, and one whose rows leave the
         * data buffer (a fault). */
        {
                SdmaRectSide src = { .base = RIG_DATA_VA, .x = 1, .y = 1, .pitch = 256, .slice = 256 * 8 };
                SdmaRectSide dst = { .base = RIG_DATA_VA + 0x4000, .x = 2, .pitch = 512, .slice = 512 * 8 };
                r.n = 0;
                r.n += sdma_emit_copy_linear_rect(r.dw + r.n, &dst, &src, 2, 16, 4, 1);
                r.n += sdma_emit_atomic(r.dw + r.n, SDMA_ATOMIC_ADD_RTN_64, RIG_SMALL_VA + 8, ~0ull, 0);
                r.n += sdma_emit_fence(r.dw + r.n, RIG_EVENT_PAGE_VA + 8, 1);
                r.n += sdma_emit_trap(r.dw + r.n, 1);
                if (write_variants(dir, "blit-rect", &r) < 0)
                        return -1;
                r.n = 0;
                r.n += sdma_emit_copy_linear_rect(r.dw + r.n, &dst, &src, 0, 100, 6, 3);
                r.n += sdma_emit_atomic(r.dw + r.n, SDMA_ATOMIC_CMPSWAP_RTN_64, RIG_SMALL_VA + 16, 1, 0);
                if (write_variants(dir, "blit-rect-3d", &r) < 0)
                        return -1;
                dst.base = RIG_DATA_VA + RIG_DATA_BYTES - 1024;
                r.n = 0;
                r.n += sdma_emit_copy_linear_rect(r.dw + r.n, &dst, &src, 0, 64, 4, 1);
                if (write_variants(dir, "fault-rect", &r) < 0)
                        return -1;
        }

        /* A poll that passes, one that never does (the retry count runs out
         * or it waits for ever), and a register poll. */
        r.n = 0;
        r.n += sdma_emit_fence(r.dw + r.n, RIG_SMALL_VA, 5);
        r.n += sdma_emit_poll_regmem(r.dw + r.n, RIG_SMALL_VA, 5, 0xffffffff, SDMA_POLL_FUNC_EQ);
        r.n += sdma_emit_poll_regmem(r.dw + r.n, RIG_SMALL_VA, 6, 0xffffffff, SDMA_POLL_FUNC_GE);
        if (write_variants(dir, "poll", &r) < 0)
                return -1;

        /* The fetcher: a run of fences longer than what it reads ahead
         * (256 bytes), behind a poll that waits, and a fence into the rptr
         * word itself, which the engine's write-back overwrites. */
        r.n = 0;
        r.n += sdma_emit_poll_regmem(r.dw + r.n, RIG_SMALL_VA, 0, 0xffffffff, SDMA_POLL_FUNC_EQ);
        for (uint32_t i = 0; i < 40; i++)
                r.n += sdma_emit_fence(r.dw + r.n, RIG_SMALL_VA + 4 + 4 * i, i);
        r.n += sdma_emit_fence(r.dw + r.n, RIG_RPTR_VA, 0xffffffff);
        if (write_variants(dir, "fetch-window", &r) < 0)
                return -1;

        /* Faults: a copy out of the data buffer into the gap, a fill past the
         * small buffer's end, a fence nowhere. */
        r.n = 0;
        r.n += sdma_emit_copy_linear(r.dw + r.n, RIG_DATA_VA + RIG_DATA_BYTES - 64, RIG_DATA_VA, 128);
        if (write_variants(dir, "fault-copy", &r) < 0)
                return -1;
        r.n = 0;
        r.n += sdma_emit_constant_fill(r.dw + r.n, RIG_SMALL_VA + 64, 0, RIG_SMALL_BYTES);
        if (write_variants(dir, "fault-fill", &r) < 0)
                return -1;
        r.n = 0;
        r.n += sdma_emit_fence(r.dw + r.n, 0x1000, 1);
        if (write_variants(dir, "fault-fence", &r) < 0)
                return -1;

        /* WRITE_LINEAR (the daemon does not emit it): header, address, count, data. */
        r.n = 0;
        r.dw[r.n++] = 0x00000002;
        r.dw[r.n++] = (uint32_t) RIG_SMALL_VA;
        r.dw[r.n++] = (uint32_t) (RIG_SMALL_VA >> 32);
        r.dw[r.n++] = 3 - 1;
        r.dw[r.n++] = 1;
        r.dw[r.n++] = 2;
        r.dw[r.n++] = 3;
        if (write_variants(dir, "write-linear", &r) < 0)
                return -1;

        /* Long NOPs (the engine unwraps them), one longer than the ring. */
        r.n = sdma_emit_nop(r.dw, 200);
        if (write_variants(dir, "nop-200", &r) < 0)
                return -1;
        r.n = 1;
        r.dw[0] = 0x3fff0000u;
        if (write_variants(dir, "nop-huge", &r) < 0)
                return -1;

        for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++) {
                r.n = 4;
                r.dw[0] = bad_headers[i];
                r.dw[1] = (uint32_t) RIG_DATA_VA;
                r.dw[2] = (uint32_t) (RIG_DATA_VA >> 32);
                r.dw[3] = 0;
                memset(r.header, 0, 4);
                snprintf(name, sizeof name, "bad-header-%zu", i);
                if (write_ring(dir, name, &r) < 0)
                        return -1;
        }
        return 0;
}

int pm4_corpus(const char *dir) {
        static const uint32_t bad_headers[] = { 0x00000000, 0x40000000, 0x80000000, 0xc0001000, 0xc0004600 | 3u << 16 };
        uint32_t v[16];
        Ring r = {};
        char name[64];

        /* A dispatch as gpu-dispatch.c builds it: the code (s_endpgm at the
         * data buffer's start), resources, thread counts, user data, start,
         * DISPATCH_DIRECT, then the completion RELEASE_MEM. */
        r.n = 0;
        v[0] = (uint32_t) (RIG_DATA_VA >> 8);
        v[1] = (uint32_t) (RIG_DATA_VA >> 40);
        r.n += pm4_emit_set_sh_reg(r.dw + r.n, mmCOMPUTE_PGM_LO, v, 2);
        v[0] = 0x00000040;
        v[1] = 0x00000008; /* 4 user SGPRs */
        r.n += pm4_emit_set_sh_reg(r.dw + r.n, mmCOMPUTE_PGM_RSRC1, v, 2);
        v[0] = COMPUTE_NUM_THREAD(64, 64);
        v[1] = COMPUTE_NUM_THREAD(1, 1);
        v[2] = COMPUTE_NUM_THREAD(1, 1);
        r.n += pm4_emit_set_sh_reg(r.dw + r.n, mmCOMPUTE_NUM_THREAD_X, v, 3);
        v[0] = (uint32_t) RIG_SMALL_VA;
        v[1] = (uint32_t) (RIG_SMALL_VA >> 32);
        v[2] = (uint32_t) RIG_DATA_VA;
        v[3] = (uint32_t) (RIG_DATA_VA >> 32);
        r.n += pm4_emit_set_sh_reg(r.dw + r.n, mmCOMPUTE_USER_DATA_0, v, 4);
        r.n += pm4_emit_dispatch_direct(r.dw + r.n, 2, 1, 1,
                                        COMPUTE_DISPATCH_INITIATOR_COMPUTE_SHADER_EN |
                                                COMPUTE_DISPATCH_INITIATOR_FORCE_START_AT_000 |
                                                COMPUTE_DISPATCH_INITIATOR_CS_W32_EN);
        r.n += pm4_emit_event_write(r.dw + r.n, PM4_EVENT_CS_PARTIAL_FLUSH, PM4_EVENT_INDEX_CS_PARTIAL_FLUSH);
        r.n += pm4_emit_acquire_mem(r.dw + r.n, ACQUIRE_MEM_GCR_GLM_INV | ACQUIRE_MEM_GCR_GL1_INV);
        r.n += pm4_emit_release_mem(r.dw + r.n, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE,
                                    RELEASE_MEM_GCR_GL2_WB | RELEASE_MEM_GCR_SEQ, PM4_DATA_64,
                                    PM4_INT_AFTER_WRITE_CONFIRM, RIG_EVENT_PAGE_VA + 8, 1, 1);
        r.n += pm4_emit_nop(r.dw + r.n, 4);
        if (write_variants(dir, "dispatch", &r) < 0)
                return -1;

        /* Memory: WRITE_DATA, a timestamp, a wait that passes and one that never does. */
        r.n = 0;
        v[0] = 7;
        v[1] = 8;
        r.n += pm4_emit_write_data(r.dw + r.n, RIG_SMALL_VA, v, 2);
        r.n += pm4_emit_release_mem(r.dw + r.n, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                    PM4_DATA_TIMESTAMP, PM4_INT_NONE, RIG_SMALL_VA + 16, 0, 0);
        r.n += pm4_emit_wait_reg_mem(r.dw + r.n, PM4_WAIT_EQ, RIG_SMALL_VA, 7, 0xffffffff, 4);
        r.n += pm4_emit_wait_reg_mem(r.dw + r.n, PM4_WAIT_GT, RIG_SMALL_VA, 7, 0xffffffff, 4);
        if (write_variants(dir, "memory", &r) < 0)
                return -1;

        /* The AQL translation's completion and barrier (rocm-facts §3): a
         * 64-bit signal decrement, a barrier-AND wait that passes and one
         * that never does, a compare-swap loop, an atomic that faults. */
        r.n = 0;
        r.n += pm4_emit_atomic_mem(r.dw + r.n, PM4_TC_OP_ATOMIC_ADD_RTN_64, PM4_ATOMIC_SINGLE_PASS, RIG_SMALL_VA + 8,
                                   ~0ull, 0);
        r.n += pm4_emit_wait_reg_mem64(r.dw + r.n, PM4_WAIT_LE, RIG_SMALL_VA + 8, ~0ull, ~0ull, 4);
        r.n += pm4_emit_wait_reg_mem64(r.dw + r.n, PM4_WAIT_EQ, RIG_SMALL_VA + 16, 1ull << 40, ~0ull, 4);
        if (write_variants(dir, "signal", &r) < 0)
                return -1;
        r.n = 0;
        r.n += pm4_emit_atomic_mem(r.dw + r.n, PM4_TC_OP_ATOMIC_CMPSWAP_RTN_64, PM4_ATOMIC_LOOP_UNTIL_COMPARE,
                                   RIG_SMALL_VA + 24, 1, 0);
        r.n += pm4_emit_atomic_mem(r.dw + r.n, PM4_TC_OP_ATOMIC_SUB_RTN_64, PM4_ATOMIC_WAIT_FOR_WRITE_CONFIRM,
                                   RIG_SMALL_VA - 8, 1, 0);
        if (write_variants(dir, "atomic-loop-fault", &r) < 0)
                return -1;

        /* An indirect buffer in the data buffer (it holds s_endpgm words,
         * which are not PM4: the IB's first packet is refused), and one
         * that faults. */
        r.n = 0;
        r.n += pm4_emit_indirect_buffer(r.dw + r.n, RIG_DATA_VA + 1024, 16);
        if (write_variants(dir, "ib", &r) < 0)
                return -1;
        r.n = 0;
        r.n += pm4_emit_indirect_buffer(r.dw + r.n, RIG_DATA_VA + RIG_DATA_BYTES - 32, 16);
        if (write_variants(dir, "ib-fault", &r) < 0)
                return -1;
        r.n = 0;
        v[0] = 1;
        r.n += pm4_emit_write_data(r.dw + r.n, RIG_SMALL_VA - 4, v, 1);
        if (write_variants(dir, "fault-write", &r) < 0)
                return -1;

        /* Long NOPs (the engine unwraps a packet across the ring's end). */
        r.n = pm4_emit_nop(r.dw, 300);
        if (write_variants(dir, "nop-300", &r) < 0)
                return -1;

        for (size_t i = 0; i < sizeof bad_headers / sizeof bad_headers[0]; i++) {
                r.n = 5;
                r.dw[0] = bad_headers[i];
                r.dw[1] = (uint32_t) RIG_DATA_VA;
                r.dw[2] = (uint32_t) (RIG_DATA_VA >> 32);
                r.dw[3] = 0;
                r.dw[4] = 0;
                memset(r.header, 0, 4);
                snprintf(name, sizeof name, "bad-header-%zu", i);
                if (write_ring(dir, name, &r) < 0)
                        return -1;
        }
        return 0;
}
