/* SPDX-License-Identifier: MIT */
/*
 * The SDMA decoder against hand-written dword layouts from the documented
 * SDMA 5 (navi10) packet tables (kfd-facts §3.2), including every refusal the
 * engine relies on: short input (-EAGAIN), unknown opcodes, reserved bits,
 * 22-bit counts, misaligned addresses (-EBADMSG with a reason).
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "sim/sim-sdma-decode.h"

static SimSdmaPacket ok(const uint32_t *dw, size_t n) {
        SimSdmaPacket p;
        const char *why = NULL;
        int r = sim_sdma_decode(dw, n, &p, &why);
        cr_assert_eq(r, 0, "decode: %d (%s)", r, why ? why : "");
        return p;
}

static void bad(const uint32_t *dw, size_t n, int expected) {
        SimSdmaPacket p;
        const char *why = NULL;
        int r = sim_sdma_decode(dw, n, &p, &why);
        cr_assert_eq(r, expected, "decode returned %d, expected %d", r, expected);
        if (expected == -EBADMSG)
                cr_assert_not_null(why, "a refusal names its reason");
}

Test(sim_decode, copy_linear) {
        /* DW0 op 1 sub 0; DW1 count 0xFFF = 4096 bytes; DW2 0; src 0x7f0012345678; dst 0x100000000 */
        uint32_t dw[] = { 0x00000001, 0x00000FFF, 0, 0x12345678, 0x00007F00, 0x00000000, 0x00000001 };
        SimSdmaPacket p = ok(dw, 7);
        cr_expect_eq(p.op, SDMA_OP_COPY);
        cr_expect_eq(p.sub_op, SDMA_SUBOP_COPY_LINEAR);
        cr_expect_eq(p.n_dwords, 7u);
        cr_expect_eq(p.copy.bytes, 4096u);
        cr_expect_eq(p.copy.src, 0x00007F0012345678ull);
        cr_expect_eq(p.copy.dst, 0x0000000100000000ull);
}

Test(sim_decode, copy_limits) {
        uint32_t max[] = { 0x00000001, 0x003FFFFF, 0, 0, 0, 0, 0 };
        cr_expect_eq(ok(max, 7).copy.bytes, 4u << 20); /* 22-bit COUNT: 4 MiB */
        uint32_t over[] = { 0x00000001, 0x00400000, 0, 0, 0, 0, 0 };
        bad(over, 7, -EBADMSG);
        uint32_t tiled[] = { 0x00000101, 0, 0, 0, 0, 0, 0 }; /* sub-op 1 = TILED */
        bad(tiled, 7, -EBADMSG);
        uint32_t swap[] = { 0x00000001, 0, 1u << 16, 0, 0, 0, 0 };
        bad(swap, 7, -EBADMSG);
        uint32_t backwards[] = { 0x00000001 | (1u << 25), 0, 0, 0, 0, 0, 0 };
        bad(backwards, 7, -EBADMSG);
        bad(max, 6, -EAGAIN);
}

Test(sim_decode, constant_fill) {
        /* FILLSIZE 2 (dword) in [31:30]; dst 0x2000; data; COUNT = 64 - 1 */
        uint32_t dw[] = { 0x8000000B, 0x00002000, 0x00000000, 0xCAFEF00D, 63 };
        SimSdmaPacket p = ok(dw, 5);
        cr_expect_eq(p.op, SDMA_OP_CONST_FILL);
        cr_expect_eq(p.n_dwords, 5u);
        cr_expect_eq(p.fill.dst, 0x2000u);
        cr_expect_eq(p.fill.data, 0xCAFEF00Du);
        cr_expect_eq(p.fill.bytes, 64u);
        cr_expect_eq(p.fill.fillsize, (unsigned) SDMA_CONSTANT_FILL_DWORD);

        uint32_t odd[] = { 0x8000000B, 0x00002000, 0, 0, 62 }; /* 63 bytes */
        bad(odd, 5, -EBADMSG);
        uint32_t unaligned[] = { 0x8000000B, 0x00002002, 0, 0, 63 };
        bad(unaligned, 5, -EBADMSG);
        uint32_t size1[] = { 0x4000000B, 0x00002000, 0, 0, 63 };
        bad(size1, 5, -EBADMSG);
        uint32_t bytefill[] = { 0x0000000B, 0x00002001, 0, 0xAB, 2 }; /* 3 bytes, byte fill */
        p = ok(bytefill, 5);
        cr_expect_eq(p.fill.fillsize, (unsigned) SDMA_CONSTANT_FILL_BYTE);
        cr_expect_eq(p.fill.bytes, 3u);
        uint32_t big[] = { 0x8000000B, 0, 0, 0, 0x00400003 };
        bad(big, 5, -EBADMSG);
}

Test(sim_decode, fence) {
        /* MTYPE 3 in [18:16] as the daemon and tinygrad emit it */
        uint32_t dw[] = { 0x00030005, 0x00001004, 0x00007FFF, 0x11223344 };
        SimSdmaPacket p = ok(dw, 4);
        cr_expect_eq(p.op, SDMA_OP_FENCE);
        cr_expect_eq(p.n_dwords, 4u);
        cr_expect_eq(p.fence.addr, 0x00007FFF00001004ull);
        cr_expect_eq(p.fence.data, 0x11223344u);
        uint32_t mis[] = { 0x00000005, 0x00001006, 0, 1 };
        bad(mis, 4, -EBADMSG);
        uint32_t reserved[] = { 0x80000005, 0x00001004, 0, 1 };
        bad(reserved, 4, -EBADMSG);
        bad(dw, 3, -EAGAIN);
}

Test(sim_decode, trap) {
        uint32_t dw[] = { 0x00000006, 0x0FFFFFFF };
        SimSdmaPacket p = ok(dw, 2);
        cr_expect_eq(p.op, SDMA_OP_TRAP);
        cr_expect_eq(p.n_dwords, 2u);
        cr_expect_eq(p.trap.context, 0x0FFFFFFFu);
        uint32_t wide[] = { 0x00000006, 0x10000000 };
        bad(wide, 2, -EBADMSG);
}

Test(sim_decode, poll_regmem) {
        /* FUNC 5 (>=) [30:28], MEM_POLL 31; addr; value 42; mask; INTERVAL 4 | RETRY 0xFFF */
        uint32_t dw[] = { 0xD0000008, 0x00002004, 0x00000001, 42, 0xFFFFFFFF, 0x0FFF0004 };
        SimSdmaPacket p = ok(dw, 6);
        cr_expect_eq(p.op, SDMA_OP_POLL_REGMEM);
        cr_expect_eq(p.n_dwords, 6u);
        cr_expect_eq(p.poll.addr, 0x0000000100002004ull);
        cr_expect_eq(p.poll.value, 42u);
        cr_expect_eq(p.poll.mask, 0xFFFFFFFFu);
        cr_expect_eq(p.poll.func, 5u);
        cr_expect(p.poll.mem_poll);
        cr_expect_eq(p.poll.interval, 4u);
        cr_expect_eq(p.poll.retry_count, 0xFFFu);
        uint32_t func7[] = { 0xF0000008, 0x2004, 0, 0, 0, 0 };
        bad(func7, 6, -EBADMSG);
        uint32_t mis[] = { 0xD0000008, 0x2006, 0, 0, 0, 0 };
        bad(mis, 6, -EBADMSG);
        uint32_t dw5[] = { 0xD0000008, 0x2004, 0, 0, 0, 0xF0000000 };
        bad(dw5, 6, -EBADMSG);
}

Test(sim_decode, timestamp) {
        uint32_t dw[] = { 0x0000020D, 0x00000FF8, 0x00007F00 };
        SimSdmaPacket p = ok(dw, 3);
        cr_expect_eq(p.op, SDMA_OP_TIMESTAMP);
        cr_expect_eq(p.sub_op, SDMA_SUBOP_TIMESTAMP_GET_GLOBAL);
        cr_expect_eq(p.n_dwords, 3u);
        cr_expect_eq(p.timestamp.addr, 0x00007F0000000FF8ull);
        uint32_t mis[] = { 0x0000020D, 0x00000FF4, 0 };
        bad(mis, 3, -EBADMSG);
        uint32_t set[] = { 0x0000000D, 0, 0 };
        bad(set, 3, -EBADMSG);
}

Test(sim_decode, nop) {
        uint32_t one[] = { 0 };
        SimSdmaPacket p = ok(one, 1);
        cr_expect_eq(p.op, SDMA_OP_NOP);
        cr_expect_eq(p.n_dwords, 1u);
        cr_expect_eq(p.nop.count, 0u);
        uint32_t burst[] = { 3u << 16, 0xAAAAAAAA, 0xBBBBBBBB, 0xCCCCCCCC };
        p = ok(burst, 4);
        cr_expect_eq(p.n_dwords, 4u);
        cr_expect_eq(p.nop.count, 3u);
        bad(burst, 3, -EAGAIN);
        bad(one, 0, -EAGAIN);
}

Test(sim_decode, write_linear) {
        uint32_t dw[] = { 0x00000002, 0x00003000, 0, 1, 0x11111111, 0x22222222 }; /* COUNT 1 = 2 dwords */
        SimSdmaPacket p = ok(dw, 6);
        cr_expect_eq(p.op, SDMA_OP_WRITE);
        cr_expect_eq(p.n_dwords, 6u);
        cr_expect_eq(p.write.dst, 0x3000u);
        cr_expect_eq(p.write.n_data, 2u);
        cr_expect_eq(p.write.data[1], 0x22222222u);
        bad(dw, 5, -EAGAIN);
}

/* GCR_REQ as ROCr's BuildGCRCommand(invalidate = true) writes it on a user
 * queue: SUB_OP 1, GCR_CONTROL GLK_WB|GLK_INV|GLV_INV|GL1_INV|GL2_INV|GL2_WB
 * (0xC3C0) in DW2 [31:16], whole cache; the kernel's ring form has SUB_OP 0
 * and GCR_CONTROL [18:16] in DW3 [2:0]. */
Test(sim_decode, gcr_req) {
        uint32_t user[] = { 0x00000111, 0, 0xC3C00000, 0, 0 };
        SimSdmaPacket p = ok(user, 5);
        cr_expect_eq(p.op, SDMA_OP_GCR_REQ);
        cr_expect_eq(p.n_dwords, 5u);
        cr_expect_eq(p.gcr.control, 0xC3C0u);
        uint32_t ring[] = { 0x00000011, 0x00001080, 0x00010002, 0x00002005, 0x03000003 };
        p = ok(ring, 5);
        cr_expect_eq(p.gcr.control, 0x50001u, "GCR_CONTROL [18:16] from DW3 [2:0]");
        cr_expect_eq(p.gcr.base, 0x0000000200001080ull);
        cr_expect_eq(p.gcr.limit, 0x0000000300002000ull);
        bad(user, 4, -EAGAIN);
        uint32_t subop[] = { 0x00000211, 0, 0, 0, 0 };
        bad(subop, 5, -EBADMSG);
        uint32_t low_base[] = { 0x00000111, 0x00000040, 0, 0, 0 };
        bad(low_base, 5, -EBADMSG);
        uint32_t reserved[] = { 0x00000111, 0, 0, 0x00000008, 0 };
        bad(reserved, 5, -EBADMSG);
}

Test(sim_decode, unknown) {
        uint32_t sem[] = { 0x00000007, 0, 0, 0 };
        bad(sem, 4, -EBADMSG);
        uint32_t indirect[] = { 0x00000004, 0, 0, 0, 0, 0 };
        bad(indirect, 6, -EBADMSG);
        uint32_t garbage[] = { 0xDEADBEEF, 0, 0, 0, 0, 0, 0, 0 };
        bad(garbage, 8, -EBADMSG);
}
