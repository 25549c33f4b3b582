/* SPDX-License-Identifier: MIT */
/*
 * SDMA packet builders against layouts written out by hand from the
 * documentation (kfd-facts §3.2, navi10_sdma_pkt_open.h field tables). The
 * expected dwords are literals; the comment next to each shows the field math.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "gpu/sdma.h"

#define CHECK_DWORDS(got, n_got, ...)                                                   \
        do {                                                                            \
                const uint32_t _exp[] = { __VA_ARGS__ };                                \
                cr_assert_eq((n_got), sizeof _exp / sizeof _exp[0], "dword count %zu", \
                             (size_t) (n_got));                                         \
                for (size_t _i = 0; _i < (n_got); _i++)                                 \
                        cr_expect_eq((got)[_i], _exp[_i], "DW%zu: got 0x%08x want 0x%08x", \
                                     _i, (got)[_i], _exp[_i]);                          \
        } while (0)

Test(sdma, copy_linear) {
        uint32_t b[16];
        memset(b, 0xAB, sizeof b);
        size_t n = sdma_emit_copy_linear(b, 0x00007F1234567000ull, 0x0000123400001004ull, 4096);
        CHECK_DWORDS(b, n,
                     0x00000001, /* OP[7:0]=1 COPY, SUB_OP[15:8]=0 LINEAR */
                     0x00000FFF, /* COUNT[21:0] = 4096 - 1 */
                     0x00000000, /* DST_SW[17:16]=0, SRC_SW[25:24]=0 */
                     0x00001004, /* SRC lo */
                     0x00001234, /* SRC hi */
                     0x34567000, /* DST lo */
                     0x00007F12  /* DST hi */);
        cr_expect_eq(b[7], 0xABABABABu, "builder wrote past its packet");
}

Test(sdma, copy_linear_limits) {
        uint32_t b[8];
        /* 1 byte: COUNT 0; 4 MiB: COUNT 0x3FFFFF fills the 22-bit field */
        sdma_emit_copy_linear(b, 0x1001, 0x2003, 1);
        cr_expect_eq(b[1], 0x00000000u);
        cr_expect_eq(b[3], 0x00002003u);
        cr_expect_eq(b[5], 0x00001001u);
        sdma_emit_copy_linear(b, 0, 0, 0x400000);
        cr_expect_eq(b[1], 0x003FFFFFu);
        cr_expect_eq(SDMA_COPY_MAX_BYTES, 4u << 20);
}

Test(sdma, constant_fill) {
        uint32_t b[8];
        size_t n = sdma_emit_constant_fill(b, 0x0000000812345600ull, 0xDEADBEEF, 0x100);
        CHECK_DWORDS(b, n,
                     0x8000000B, /* OP=11 CONST_FILL | FILLSIZE[31:30]=2 (dword) -> 2<<30 */
                     0x12345600, /* DST lo */
                     0x00000008, /* DST hi */
                     0xDEADBEEF, /* SRC_DATA */
                     0x000000FF  /* COUNT[21:0] = 0x100 - 1 */);
}

Test(sdma, fence) {
        uint32_t b[8];
        size_t n = sdma_emit_fence(b, 0x00007FFF00010008ull, 0x11223344);
        CHECK_DWORDS(b, n,
                     0x00030005, /* OP=5 FENCE | MTYPE[18:16]=3 -> 3<<16 = 0x30000 */
                     0x00010008, /* ADDR lo */
                     0x00007FFF, /* ADDR hi */
                     0x11223344  /* DATA (32 bits) */);
}

Test(sdma, trap) {
        uint32_t b[4];
        size_t n = sdma_emit_trap(b, 0x0ABCDEF1);
        CHECK_DWORDS(b, n,
                     0x00000006, /* OP=6 TRAP */
                     0x0ABCDEF1  /* INT_CONTEXT[27:0] */);
}

Test(sdma, poll_regmem_geq) {
        uint32_t b[8];
        size_t n = sdma_emit_poll_regmem(b, 0x0000000100002004ull, 42, 0xFFFFFFFF, SDMA_POLL_FUNC_GE);
        CHECK_DWORDS(b, n,
                     0xD0000008, /* OP=8 | FUNC[30:28]=5 (>=) -> 0x50000000 | MEM_POLL bit31 -> 0x80000000 */
                     0x00002004, /* ADDR lo */
                     0x00000001, /* ADDR hi */
                     0x0000002A, /* VALUE = 42 */
                     0xFFFFFFFF, /* MASK */
                     0x0FFF0004  /* INTERVAL[15:0]=4 | RETRY_COUNT[27:16]=0xFFF -> 0x0FFF0000 */);
}

Test(sdma, poll_regmem_eq) {
        uint32_t b[8];
        sdma_emit_poll_regmem(b, 0x1000, 1, 0x1, SDMA_POLL_FUNC_EQ);
        cr_expect_eq(b[0], 0xB0000008u); /* FUNC=3 -> 0x30000000 | 0x80000000 | 8 */
        cr_expect_eq(b[4], 0x00000001u);
}

Test(sdma, timestamp_get_global) {
        uint32_t b[4];
        size_t n = sdma_emit_timestamp(b, 0x00007F0000000FF8ull);
        CHECK_DWORDS(b, n,
                     0x0000020D, /* OP=13 TIMESTAMP | SUB_OP=2 GET_GLOBAL -> 2<<8 = 0x200 */
                     0x00000FF8, /* WRITE_ADDR[31:3] (bits 2:0 zero: 8-byte aligned) */
                     0x00007F00  /* WRITE_ADDR hi */);
}

Test(sdma, nop_padding) {
        uint32_t b[8];
        memset(b, 0xFF, sizeof b);
        size_t n = sdma_emit_nop(b, 3);
        CHECK_DWORDS(b, n, 0x00000000, 0x00000000, 0x00000000); /* three one-dword NOPs, COUNT 0 */
        cr_expect_eq(b[3], 0xFFFFFFFFu);
}

Test(sdma, atomic_signal_decrement) {
        uint32_t b[10];
        memset(b, 0xAB, sizeof b);
        size_t n = sdma_emit_atomic(b, SDMA_ATOMIC_ADD_RTN_64, 0x00007F0000001238ull, ~0ull, 0);
        CHECK_DWORDS(b, n,
                     0x5E00000A, /* OP=10 ATOMIC | ATOMIC_OP[31:25]=47 (0x2F << 25 = 0x5E000000), LOOP 16 = 0 */
                     0x00001238, /* ADDR lo */
                     0x00007F00, /* ADDR hi */
                     0xFFFFFFFF, /* SRC_DATA lo: -1 */
                     0xFFFFFFFF, /* SRC_DATA hi */
                     0x00000000, /* CMP_DATA lo */
                     0x00000000, /* CMP_DATA hi */
                     0x00000000  /* LOOP_INTERVAL[12:0] */);
        cr_expect_eq(b[8], 0xABABABABu, "builder wrote past its packet");
}

Test(sdma, copy_linear_rect) {
        uint32_t b[14];
        memset(b, 0xAB, sizeof b);
        SdmaRectSide src = { .base = 0x0000001200000100ull, .x = 3, .y = 5, .z = 1, .pitch = 256, .slice = 4096 };
        SdmaRectSide dst = { .base = 0x0000003400000040ull, .x = 1, .y = 2, .z = 7, .pitch = 1024, .slice = 65536 };
        size_t n = sdma_emit_copy_linear_rect(b, &dst, &src, 2, 37, 21, 4);
        CHECK_DWORDS(b, n,
                     0x40000401, /* OP=1 SUB_OP=4 (LINEAR_SUB_WIND), ELEMENT[31:29]=2 */
                     0x00000100, 0x00000012, /* SRC */
                     0x00050003, /* SRC_X=3, SRC_Y[29:16]=5 */
                     0x0007E001, /* SRC_Z=1 | (256/4 - 1 = 63) << 13 */
                     0x000003FF, /* SRC_SLICE_PITCH = 4096/4 - 1 */
                     0x00000040, 0x00000034, /* DST */
                     0x00020001, /* DST_X=1, DST_Y=2 */
                     0x001FE007, /* DST_Z=7 | (1024/4 - 1 = 255) << 13 */
                     0x00003FFF, /* DST_SLICE_PITCH = 65536/4 - 1 */
                     0x00140024, /* RECT_X = 36, RECT_Y[29:16] = 20 */
                     0x00000003  /* RECT_Z = 3 */);
        cr_expect_eq(b[13], 0xABABABABu);
        /* A 2-D copy carries slice pitch 0 (ROCr: "(range->z == 1) ? 0 : ..."). */
        sdma_emit_copy_linear_rect(b, &dst, &src, 0, 16, 1, 1);
        cr_expect_eq(b[5], 0u);
        cr_expect_eq(b[10], 0u);
        cr_expect_eq(b[4], 1u | 255u << 13, "pitch in 1-byte elements");
}

/*
 * Second opinion: the simulator's own decoder (daemon/sim/sim-sdma-decode.c,
 * written independently from the same documentation) must read back what the
 * builders wrote.
 */
#include "sim/sim-sdma-decode.h"

static SimSdmaPacket decode(const uint32_t *dw, size_t n) {
        SimSdmaPacket p;
        const char *why = NULL;
        int r = sim_sdma_decode(dw, n, &p, &why);
        cr_assert_eq(r, 0, "sim_sdma_decode: %d (%s)", r, why ? why : "");
        cr_assert_eq(p.n_dwords, n, "decoded length %zu, built %zu", p.n_dwords, n);
        return p;
}

Test(sdma_decode, copy_linear) {
        uint32_t b[8];
        size_t n = sdma_emit_copy_linear(b, 0x00007F1234567001ull, 0x0000123400001003ull, SDMA_COPY_MAX_BYTES);
        SimSdmaPacket p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_COPY);
        cr_expect_eq(p.sub_op, SDMA_SUBOP_COPY_LINEAR);
        cr_expect_eq(p.copy.src, 0x0000123400001003ull);
        cr_expect_eq(p.copy.dst, 0x00007F1234567001ull);
        cr_expect_eq(p.copy.bytes, (uint64_t) SDMA_COPY_MAX_BYTES);
}

Test(sdma_decode, constant_fill) {
        uint32_t b[8];
        size_t n = sdma_emit_constant_fill(b, 0x0000000812345600ull, 0xDEADBEEF, SDMA_FILL_MAX_BYTES);
        SimSdmaPacket p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_CONST_FILL);
        cr_expect_eq(p.fill.dst, 0x0000000812345600ull);
        cr_expect_eq(p.fill.data, 0xDEADBEEFu);
        cr_expect_eq(p.fill.bytes, (uint64_t) SDMA_FILL_MAX_BYTES);
        cr_expect_eq(p.fill.fillsize, (unsigned) SDMA_CONSTANT_FILL_SIZE_DWORD);
}

Test(sdma_decode, fence_trap) {
        uint32_t b[8];
        size_t n = sdma_emit_fence(b, 0x00007FFF00010008ull, 0x11223344);
        SimSdmaPacket p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_FENCE);
        cr_expect_eq(p.fence.addr, 0x00007FFF00010008ull);
        cr_expect_eq(p.fence.data, 0x11223344u);
        n = sdma_emit_trap(b, 0x0FFFFFFF);
        p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_TRAP);
        cr_expect_eq(p.trap.context, 0x0FFFFFFFu);
}

Test(sdma_decode, poll_regmem) {
        uint32_t b[8];
        size_t n = sdma_emit_poll_regmem(b, 0x0000000100002004ull, 42, 0xFFFFFFFF, SDMA_POLL_FUNC_GE);
        SimSdmaPacket p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_POLL_REGMEM);
        cr_expect_eq(p.poll.addr, 0x0000000100002004ull);
        cr_expect_eq(p.poll.value, 42u);
        cr_expect_eq(p.poll.mask, 0xFFFFFFFFu);
        cr_expect_eq(p.poll.func, (unsigned) SDMA_POLL_FUNC_GE);
        cr_expect(p.poll.mem_poll);
        cr_expect_eq(p.poll.interval, 4u);
        cr_expect_eq(p.poll.retry_count, 0xFFFu);
}

Test(sdma_decode, timestamp_nop) {
        uint32_t b[8];
        size_t n = sdma_emit_timestamp(b, 0x00007F0000000FF8ull);
        SimSdmaPacket p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_TIMESTAMP);
        cr_expect_eq(p.sub_op, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL);
        cr_expect_eq(p.timestamp.addr, 0x00007F0000000FF8ull);
        sdma_emit_nop(b, 1);
        p = decode(b, 1);
        cr_expect_eq(p.op, SDMA_OP_NOP);
}

Test(sdma_decode, atomic) {
        uint32_t b[8];
        size_t n = sdma_emit_atomic(b, SDMA_ATOMIC_CMPSWAP_RTN_64, 0x00007F0000001238ull, 5, 9);
        SimSdmaPacket p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_ATOMIC);
        cr_expect_eq(p.atomic.op, SDMA_ATOMIC_CMPSWAP_RTN_64);
        cr_expect_eq(p.atomic.addr, 0x00007F0000001238ull);
        cr_expect_eq(p.atomic.src, 5u);
        cr_expect_eq(p.atomic.cmp, 9u);
        cr_expect(!p.atomic.loop);
}

Test(sdma_decode, copy_linear_rect) {
        uint32_t b[13];
        SdmaRectSide src = { .base = 0x100, .x = 3, .y = 5, .z = 1, .pitch = 256, .slice = 256 * 64 };
        SdmaRectSide dst = { .base = 0x40000, .x = 1, .y = 2, .z = 7, .pitch = 1024, .slice = 1024 * 32 };
        size_t n = sdma_emit_copy_linear_rect(b, &dst, &src, 4, 13, 21, 4);
        SimSdmaPacket p = decode(b, n);
        cr_expect_eq(p.op, SDMA_OP_COPY);
        cr_expect_eq(p.sub_op, SDMA_SUBOP_COPY_LINEAR_RECT);
        cr_expect_eq(p.rect.element, 4u);
        cr_expect_eq(p.rect.src, 0x100u);
        cr_expect_eq(p.rect.dst, 0x40000u);
        cr_expect(p.rect.src_x == 3 && p.rect.src_y == 5 && p.rect.src_z == 1);
        cr_expect(p.rect.dst_x == 1 && p.rect.dst_y == 2 && p.rect.dst_z == 7);
        cr_expect_eq(p.rect.src_pitch, 256u);
        cr_expect_eq(p.rect.dst_pitch, 1024u);
        cr_expect_eq(p.rect.src_slice, 256u * 64);
        cr_expect_eq(p.rect.dst_slice, 1024u * 32);
        cr_expect(p.rect.x == 13 && p.rect.y == 21 && p.rect.z == 4);
}
