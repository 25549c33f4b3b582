/* SPDX-License-Identifier: MIT */
/*
 * The PM4 decoder against dword layouts written out by hand from the
 * documentation (Linux nvd.h and kfd_pm4_headers_ai.h, Mesa sid.h, the
 * kernel's gfx_v10_0.c emitters, kfd-facts §2): header fields, every packet
 * the CP engine executes, and every refusal it relies on (short input
 * -EAGAIN, type-0/1/2 headers, counts that do not fit the opcode, unknown
 * opcodes, registers outside their window, reserved bits and enum values,
 * misaligned addresses: -EBADMSG with a reason).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "sim/sim-pm4-decode.h"

static SimPm4Packet ok(const uint32_t *dw, size_t n) {
        SimPm4Packet p;
        const char *why = NULL;
        int r = sim_pm4_decode(dw, n, &p, &why);
        cr_assert_eq(r, 0, "decode: %d (%s)", r, why ? why : "");
        cr_assert_eq(p.n_dwords, n, "packet length %zu, expected %zu", p.n_dwords, n);
        return p;
}

/* Refused with a reason that contains `word`. */
static void bad(const uint32_t *dw, size_t n, const char *word) {
        SimPm4Packet p;
        const char *why = NULL;
        int r = sim_pm4_decode(dw, n, &p, &why);
        cr_assert_eq(r, -EBADMSG, "decode returned %d, expected -EBADMSG", r);
        cr_assert_not_null(why, "a refusal names its reason");
        cr_assert(strstr(why, word), "reason \"%s\" does not mention \"%s\"", why, word);
}

Test(sim_pm4_decode, header_fields) {
        /* PACKET3(NOP, 1) | SHADER_TYPE (PACKET3_COMPUTE) | PREDICATE:
         * 3 << 30 | 1 << 16 | 0x10 << 8 | 1 << 1 | 1 */
        uint32_t dw[] = { 0xC0011003, 0xAAAAAAAA, 0xBBBBBBBB };
        SimPm4Packet p = ok(dw, 3);
        cr_expect_eq(p.opcode, 0x10u);
        cr_expect_eq(p.count, 1u);
        cr_expect(p.shader_type);
        cr_expect(p.predicate);

        /* Without the shader-type bit (what tinygrad emits) it is the same packet. */
        uint32_t plain[] = { 0xC0011000, 0, 0 };
        p = ok(plain, 3);
        cr_expect(!p.shader_type);
        cr_expect(!p.predicate);
}

Test(sim_pm4_decode, nop_forms) {
        /* Header-only NOP: PACKET3(NOP, 0x3FFF) = 0xFFFF1000 (Mesa PKT3_NOP_PAD). */
        uint32_t one[] = { 0xFFFF1000 };
        SimPm4Packet p = ok(one, 1);
        cr_expect_eq(p.opcode, SIM_PKT3_NOP);
        cr_expect_eq(p.count, 0x3FFFu);

        /* PACKET3(NOP, 0): header + 1 ignored dword. */
        uint32_t two[] = { 0xC0001000, 0x12345678 };
        ok(two, 2);

        /* PACKET3(NOP, 0x3FFE), the kernel's largest: 0x4000 dwords in all. */
        static uint32_t big[0x4000];
        big[0] = 0xFFFE1000;
        p = ok(big, 0x4000);
        cr_expect_eq(p.n_dwords, 0x4000u);

        /* Short input says how long the packet is. */
        const char *why;
        cr_expect_eq(sim_pm4_decode(big, 100, &p, &why), -EAGAIN);
        cr_expect_eq(p.n_dwords, 0x4000u);
        cr_expect_eq(sim_pm4_decode(big, 0, &p, &why), -EAGAIN);
}

Test(sim_pm4_decode, other_packet_types_are_refused) {
        uint32_t type0[] = { 0x00001234, 0 };         /* PACKET0(0x1234, 0) */
        bad(type0, 2, "type-0/1");
        uint32_t type1[] = { 0x40000000, 0 };
        bad(type1, 2, "type-0/1");
        uint32_t type2[] = { 0x80000000 };            /* CP_PACKET2 filler */
        bad(type2, 1, "type-2");
        uint32_t reserved[] = { 0xC0001008, 0 };      /* header bit 3 */
        bad(reserved, 2, "reserved");
        uint32_t unknown[] = { 0xC0000100, 0 };       /* opcode 0x01 */
        bad(unknown, 2, "unknown PM4 opcode");
        uint32_t draw[] = { 0xC0022D00, 0, 0, 0 };    /* DRAW_INDEX_AUTO (0x2D): not a compute packet here */
        bad(draw, 4, "unknown PM4 opcode");
        uint32_t header_only[] = { 0xFFFF7600 };      /* SET_SH_REG with COUNT 0x3FFF */
        bad(header_only, 1, "0x3FFF");
}

Test(sim_pm4_decode, set_sh_reg) {
        /* PACKET3(SET_SH_REG, 2), COMPUTE_PGM_LO offset 0x20C, lo, hi (kfd-facts §2.2). */
        uint32_t dw[] = { 0xC0027600, 0x0000020C, 0x00123456, 0x00000078 };
        SimPm4Packet p = ok(dw, 4);
        cr_expect_eq(p.opcode, SIM_PKT3_SET_SH_REG);
        cr_expect_eq(p.set_reg.reg, 0x2E0Cu);
        cr_expect_eq(p.set_reg.n, 2u);
        cr_expect_eq(p.set_reg.values[0], 0x00123456u);
        cr_expect_eq(p.set_reg.values[1], 0x78u);

        /* The last register of the window, 0x2FFF, is fine; 0x2FFF + 2 is not. */
        uint32_t last[] = { 0xC0017600, 0x3FF, 1 };
        cr_expect_eq(ok(last, 3).set_reg.reg, 0x2FFFu);
        uint32_t over[] = { 0xC0027600, 0x3FF, 1, 2 };
        bad(over, 4, "SH window");
        uint32_t outside[] = { 0xC0017600, 0x400, 1 };
        bad(outside, 3, "SH window");
        uint32_t none[] = { 0xC0007600, 0x20C };      /* COUNT 0: no register */
        bad(none, 2, "COUNT 0");
        uint32_t index[] = { 0xC0017600, 0x1000020C, 1 }; /* INDEX [31:28] */
        bad(index, 3, "INDEX");
        uint32_t resv[] = { 0xC0017600, 0x0001020C, 1 };  /* bit 16 */
        bad(resv, 3, "reserved");
}

Test(sim_pm4_decode, set_uconfig_reg) {
        /* PACKET3(SET_UCONFIG_REG, 1), GRBM_GFX_INDEX-style offset 0x200, value. */
        uint32_t dw[] = { 0xC0017900, 0x00000200, 0xE0000000 };
        SimPm4Packet p = ok(dw, 3);
        cr_expect_eq(p.set_reg.reg, 0xC200u);
        cr_expect_eq(p.set_reg.values[0], 0xE0000000u);
        uint32_t outside[] = { 0xC0017900, 0x400, 0 };
        bad(outside, 3, "UCONFIG window");
}

Test(sim_pm4_decode, write_data) {
        /* PACKET3(WRITE_DATA, 4): ENGINE_SEL(0) | DST_SEL(5) | WR_CONFIRM, addr
         * 0x7F00_12345678, two data dwords (gfx_v10_0_ring_emit_fence_kiq form). */
        uint32_t dw[] = { 0xC0043700, (5u << 8) | (1u << 20), 0x12345678, 0x00007F00, 0xCAFE0001, 0xCAFE0002 };
        SimPm4Packet p = ok(dw, 6);
        cr_expect_eq(p.write_data.dst_sel, 5u);
        cr_expect(p.write_data.wr_confirm);
        cr_expect(!p.write_data.one_addr);
        cr_expect_eq(p.write_data.engine_sel, 0u);
        cr_expect_eq(p.write_data.addr, 0x00007F0012345678ull);
        cr_expect_eq(p.write_data.n, 2u);
        cr_expect_eq(p.write_data.data[1], 0xCAFE0002u);

        /* DST_SEL 2 (L2), WR_ONE_ADDR. */
        uint32_t l2[] = { 0xC0033700, (2u << 8) | (1u << 16), 0x1000, 0, 7 };
        p = ok(l2, 5);
        cr_expect_eq(p.write_data.dst_sel, 2u);
        cr_expect(p.write_data.one_addr);

        uint32_t nodata[] = { 0xC0023700, 5u << 8, 0x1000, 0 };
        bad(nodata, 4, "COUNT below 3");
        uint32_t misaligned[] = { 0xC0033700, 5u << 8, 0x1002, 0, 7 };
        bad(misaligned, 5, "dword aligned");
        uint32_t dst4[] = { 0xC0033700, 4u << 8, 0x1000, 0, 7 };
        bad(dst4, 5, "DST_SEL");
        uint32_t engine3[] = { 0xC0033700, (5u << 8) | (3u << 30), 0x1000, 0, 7 };
        bad(engine3, 5, "ENGINE_SEL 3");
        uint32_t resv[] = { 0xC0033700, (5u << 8) | (1u << 17), 0x1000, 0, 7 };
        bad(resv, 5, "reserved");
}

Test(sim_pm4_decode, release_mem) {
        /* PACKET3(RELEASE_MEM, 6) as the kernel fences on gfx10
         * (gfx_v10_0_ring_emit_fence): DW1 = GCR_SEQ | GL2_WB | GLM_INV | GLM_WB |
         * CACHE_POLICY(3) | EVENT_TYPE(CACHE_FLUSH_AND_INV_TS = 0x14) | EVENT_INDEX(5);
         * DW2 = DATA_SEL(1) | INT_SEL(2); addr; data; ctxid. */
        uint32_t dw1 = (1u << 22) | (1u << 21) | (1u << 13) | (1u << 12) | (3u << 25) | 0x14 | (5u << 8);
        uint32_t dw[] = { 0xC0064900, dw1, (1u << 29) | (2u << 24), 0x00002004, 0x00000001, 0x0000002A, 0, 42 };
        SimPm4Packet p = ok(dw, 8);
        cr_expect_eq(p.release_mem.event_type, 0x14u);
        cr_expect_eq(p.release_mem.event_index, 5u);
        cr_expect_eq(p.release_mem.gcr, (1u << 10) | (1u << 9) | (1u << 1) | 1u, "GCR bits [22:12]");
        cr_expect_eq(p.release_mem.cache_policy, 3u);
        cr_expect_eq(p.release_mem.dst_sel, 0u);
        cr_expect_eq(p.release_mem.int_sel, 2u);
        cr_expect_eq(p.release_mem.data_sel, 1u);
        cr_expect_eq(p.release_mem.addr, 0x0000000100002004ull);
        cr_expect_eq(p.release_mem.data, 0x2Aull);
        cr_expect_eq(p.release_mem.int_ctxid, 42u);

        /* DATA_SEL 3 (GPU clock) into a qword, DST_SEL 1 (TC_L2), BOTTOM_OF_PIPE_TS. */
        uint32_t ts[] = { 0xC0064900, 0x28 | (5u << 8), (3u << 29) | (1u << 16), 0x3008, 0, 0, 0, 0 };
        p = ok(ts, 8);
        cr_expect_eq(p.release_mem.data_sel, 3u);
        cr_expect_eq(p.release_mem.dst_sel, 1u);
        /* DATA_SEL 2 (64-bit), CS_DONE with EVENT_INDEX 6. */
        uint32_t d64[] = { 0xC0064900, 0x2F | (6u << 8), 2u << 29, 0x3000, 0, 0x89ABCDEF, 0x01234567, 0 };
        cr_expect_eq(ok(d64, 8).release_mem.data, 0x0123456789ABCDEFull);

        uint32_t gfx8[] = { 0xC0054900, 0x14 | (5u << 8), 1u << 29, 0x2000, 0, 1, 0 };
        bad(gfx8, 7, "COUNT 5");
        uint32_t ts_unaligned[] = { 0xC0064900, 0x14 | (5u << 8), 3u << 29, 0x3004, 0, 0, 0, 0 };
        bad(ts_unaligned, 8, "8-byte aligned");
        uint32_t d32_unaligned[] = { 0xC0064900, 0x14 | (5u << 8), 1u << 29, 0x3002, 0, 0, 0, 0 };
        bad(d32_unaligned, 8, "dword aligned");
        uint32_t int_only_with_data[] = { 0xC0064900, 0x14 | (5u << 8), (1u << 29) | (1u << 24), 0x3000, 0, 0, 0, 1 };
        bad(int_only_with_data, 8, "DATA_SEL 0");
        uint32_t wrong_index[] = { 0xC0064900, 0x14 | (6u << 8), 1u << 29, 0x3000, 0, 0, 0, 0 };
        bad(wrong_index, 8, "EVENT_INDEX 5");
        uint32_t not_eop[] = { 0xC0064900, 0x07 | (5u << 8), 1u << 29, 0x3000, 0, 0, 0, 0 };
        bad(not_eop, 8, "EVENT_TYPE");
        uint32_t int7[] = { 0xC0064900, 0x14 | (5u << 8), 7u << 24, 0x3000, 0, 0, 0, 0 };
        bad(int7, 8, "INT_SEL 7");
        uint32_t data6[] = { 0xC0064900, 0x14 | (5u << 8), 6u << 29, 0x3000, 0, 0, 0, 0 };
        bad(data6, 8, "DATA_SEL 6");
        uint32_t resv[] = { 0xC0064900, 0x14 | (5u << 8) | (1u << 18), 1u << 29, 0x3000, 0, 0, 0, 0 };
        bad(resv, 8, "reserved");
}

Test(sim_pm4_decode, release_mem_short_input_is_eagain) {
        uint32_t dw[] = { 0xC0064900, 0x14 | (5u << 8), 1u << 29, 0x2000, 0, 1, 0, 1 };
        SimPm4Packet p;
        const char *why;
        cr_expect_eq(sim_pm4_decode(dw, 7, &p, &why), -EAGAIN);
        cr_expect_eq(p.n_dwords, 8u);
}

Test(sim_pm4_decode, acquire_mem) {
        /* gfx10 ACQUIRE_MEM as radv emits it: 0, 0xffffffff, 0xffffff, 0, 0, 0xA, GCR_CNTL
         * (GLM_WB|GLM_INV|GLK_INV|GLV_INV|GL1_INV|GL2_INV|GL2_WB = bits 4,5,7,8,9,14,15). */
        uint32_t gcr = (1u << 4) | (1u << 5) | (1u << 7) | (1u << 8) | (1u << 9) | (1u << 14) | (1u << 15);
        uint32_t dw[] = { 0xC0065800, 0, 0xFFFFFFFF, 0x00FFFFFF, 0, 0, 0x0000000A, gcr };
        SimPm4Packet p = ok(dw, 8);
        cr_expect_eq(p.acquire_mem.coher_size, 0xFFFFFFFFFFull, "COHER_SIZE_HI is [7:0]");
        cr_expect_eq(p.acquire_mem.poll_interval, 10u);
        cr_expect_eq(p.acquire_mem.gcr_cntl, gcr);

        uint32_t gfx9[] = { 0xC0055800, 0, 0xFFFFFFFF, 0xFF, 0, 0, 0xA };
        bad(gfx9, 7, "gfx9");
        uint32_t base_hi[] = { 0xC0065800, 0, 0xFFFFFFFF, 0xFF, 0, 0x1000000, 0xA, 0 };
        bad(base_hi, 8, "COHER_BASE_HI");
        uint32_t poll[] = { 0xC0065800, 0, 0xFFFFFFFF, 0xFF, 0, 0, 0x1000A, 0 };
        bad(poll, 8, "POLL_INTERVAL");
        uint32_t gcr_hi[] = { 0xC0065800, 0, 0, 0, 0, 0, 0xA, 1u << 19 };
        bad(gcr_hi, 8, "GCR_CNTL");
}

Test(sim_pm4_decode, wait_reg_mem) {
        /* PACKET3(WAIT_REG_MEM, 5): FUNCTION(5 >=) | MEM_SPACE(1), addr, ref, mask, interval 4
         * (tinygrad timeline wait, kfd-facts §2.2). */
        uint32_t dw[] = { 0xC0053C00, 5u | (1u << 4), 0x00004000, 0x00000002, 7, 0xFFFFFFFF, 4 };
        SimPm4Packet p = ok(dw, 7);
        cr_expect_eq(p.wait_reg_mem.function, 5u);
        cr_expect_eq(p.wait_reg_mem.mem_space, 1u);
        cr_expect_eq(p.wait_reg_mem.operation, 0u);
        cr_expect_eq(p.wait_reg_mem.addr, 0x0000000200004000ull);
        cr_expect_eq(p.wait_reg_mem.ref, 7u);
        cr_expect_eq(p.wait_reg_mem.mask, 0xFFFFFFFFu);
        cr_expect_eq(p.wait_reg_mem.poll_interval, 4u);

        /* A register write-wait-write (OPERATION 1, MEM_SPACE 0), as tinygrad's HDP flush. */
        uint32_t reg[] = { 0xC0053C00, 3u | (1u << 6), 0x1234, 0x1235, 1, 1, 0x20 };
        p = ok(reg, 7);
        cr_expect_eq(p.wait_reg_mem.operation, 1u);
        cr_expect_eq(p.wait_reg_mem.reg1, 0x1235u);
        /* Preemptable memory wait (OPERATION 3) and OPTIMIZE_ACE_OFFLOAD (DW6 bit 31). */
        uint32_t pre[] = { 0xC0053C00, 3u | (1u << 4) | (3u << 6), 0x4000, 0, 1, 1, (1u << 31) | 4 };
        ok(pre, 7);

        uint32_t misaligned[] = { 0xC0053C00, 5u | (1u << 4), 0x00004002, 0, 7, ~0u, 4 };
        bad(misaligned, 7, "dword aligned");
        uint32_t func7[] = { 0xC0053C00, 7u | (1u << 4), 0x4000, 0, 7, ~0u, 4 };
        bad(func7, 7, "FUNCTION 7");
        uint32_t space2[] = { 0xC0053C00, 5u | (2u << 4), 0x4000, 0, 7, ~0u, 4 };
        bad(space2, 7, "MEM_SPACE");
        uint32_t wwr_mem[] = { 0xC0053C00, 3u | (1u << 4) | (1u << 6), 0x4000, 0, 7, ~0u, 4 };
        bad(wwr_mem, 7, "register operation");
        uint32_t short_count[] = { 0xC0043C00, 5u | (1u << 4), 0x4000, 0, 7, ~0u };
        bad(short_count, 6, "COUNT must be 5");
        uint32_t resv[] = { 0xC0053C00, 5u | (1u << 4) | (1u << 12), 0x4000, 0, 7, ~0u, 4 };
        bad(resv, 7, "reserved");
}

Test(sim_pm4_decode, event_write) {
        /* EVENT_WRITE: EVENT_TYPE(CS_PARTIAL_FLUSH = 7) | EVENT_INDEX(4). */
        uint32_t dw[] = { 0xC0004600, 0x00000407 };
        SimPm4Packet p = ok(dw, 2);
        cr_expect_eq(p.event_write.event_type, 7u);
        cr_expect_eq(p.event_write.event_index, 4u);
        /* A sample event with an address: COUNT 2, ZPASS_DONE (0x15) index 1. */
        uint32_t sample[] = { 0xC0024600, 0x115, 0x1000, 0 };
        ok(sample, 4);

        uint32_t csflush_index0[] = { 0xC0004600, 0x07 };
        bad(csflush_index0, 2, "EVENT_INDEX 4");
        uint32_t eop[] = { 0xC0004600, 0x514 };
        bad(eop, 2, "RELEASE_MEM");
        uint32_t ts_index0[] = { 0xC0004600, 0x14 };
        bad(ts_index0, 2, "non-TS");
        uint32_t count1[] = { 0xC0014600, 0x407, 0 };
        bad(count1, 3, "COUNT must be 0");
        uint32_t sample_no_addr[] = { 0xC0004600, 0x115 };
        bad(sample_no_addr, 2, "sample");
}

Test(sim_pm4_decode, dispatch_direct) {
        /* DISPATCH_DIRECT: DIM_X/Y/Z, initiator COMPUTE_SHADER_EN | FORCE_START_AT_000 |
         * CS_W32_EN = 0x8005 (kfd-facts §2.3); PACKET3_COMPUTE form. */
        uint32_t dw[] = { 0xC0031502, 16, 2, 1, 0x8005 };
        SimPm4Packet p = ok(dw, 5);
        cr_expect_eq(p.dispatch.dim[0], 16u);
        cr_expect_eq(p.dispatch.dim[1], 2u);
        cr_expect_eq(p.dispatch.dim[2], 1u);
        cr_expect_eq(p.dispatch.initiator, 0x8005u);
        uint32_t count2[] = { 0xC0021500, 1, 1, 1 };
        bad(count2, 4, "COUNT must be 3");
}

Test(sim_pm4_decode, indirect_buffer) {
        /* INDIRECT_BUFFER: base lo/hi, IB_SIZE 0x40 | VALID (tinygrad form). */
        uint32_t dw[] = { 0xC0023F00, 0x00100000, 0x00007F12, 0x40 | (1u << 23) };
        SimPm4Packet p = ok(dw, 4);
        cr_expect_eq(p.ib.addr, 0x00007F1200100000ull);
        cr_expect_eq(p.ib.size_dw, 0x40u);
        cr_expect(p.ib.valid);
        cr_expect(!p.ib.chain);
        cr_expect_eq(p.ib.vmid, 0u);
        /* The kernel's compute form: VALID | length | vmid << 24, CHAIN set here too. */
        uint32_t kern[] = { 0xC0023F00, 0x1000, 0, 0xFFFFF | (1u << 20) | (1u << 23) | (3u << 24) };
        p = ok(kern, 4);
        cr_expect_eq(p.ib.size_dw, 0xFFFFFu);
        cr_expect(p.ib.chain);
        cr_expect_eq(p.ib.vmid, 3u);

        uint32_t invalid[] = { 0xC0023F00, 0x1000, 0, 0x40 };
        bad(invalid, 4, "VALID");
        uint32_t empty[] = { 0xC0023F00, 0x1000, 0, 1u << 23 };
        bad(empty, 4, "IB_SIZE 0");
        uint32_t misaligned[] = { 0xC0023F00, 0x1002, 0, 0x40 | (1u << 23) };
        bad(misaligned, 4, "dword aligned");
        uint32_t hi[] = { 0xC0023F00, 0x1000, 0x10000, 0x40 | (1u << 23) };
        bad(hi, 4, "48-bit");
        uint32_t count3[] = { 0xC0033F00, 0x1000, 0, 0x40 | (1u << 23), 0 };
        bad(count3, 5, "COUNT must be 2");
}

Test(sim_pm4_decode, copy_data) {
        /* COPY_DATA: SRC_SEL(9 GPU clock) | DST_SEL(5 memory) | COUNT_SEL | WR_CONFIRM. */
        uint32_t dw[] = { 0xC0044000, 9u | (5u << 8) | (1u << 16) | (1u << 20), 0, 0, 0x2008, 0 };
        SimPm4Packet p = ok(dw, 6);
        cr_expect_eq(p.copy_data.src_sel, 9u);
        cr_expect_eq(p.copy_data.dst_sel, 5u);
        cr_expect(p.copy_data.count_64);
        cr_expect_eq(p.copy_data.dst, 0x2008ull);
        uint32_t unaligned64[] = { 0xC0044000, 9u | (5u << 8) | (1u << 16), 0, 0, 0x2004, 0 };
        bad(unaligned64, 6, "destination");
        uint32_t src11[] = { 0xC0044000, 11u | (5u << 8), 0, 0, 0x2000, 0 };
        bad(src11, 6, "SRC_SEL");
}

Test(sim_pm4_decode, dma_data) {
        /* DMA_DATA: SRC_SEL(0) DST_SEL(0) CP_SYNC, src, dst, BYTE_COUNT 4096. */
        uint32_t dw[] = { 0xC0055000, 1u << 31, 0x1000, 0, 0x3000, 0, 4096 };
        SimPm4Packet p = ok(dw, 7);
        cr_expect_eq(p.dma_data.src, 0x1000ull);
        cr_expect_eq(p.dma_data.dst, 0x3000ull);
        cr_expect_eq(p.dma_data.byte_count, 4096u);
        cr_expect(p.dma_data.cp_sync);
        /* A DATA fill (SRC_SEL 2). */
        uint32_t fill[] = { 0xC0055000, 2u << 29, 0xDEADBEEF, 0, 0x3000, 0, 64 };
        cr_expect_eq(ok(fill, 7).dma_data.src_sel, 2u);
        uint32_t fill_odd[] = { 0xC0055000, 2u << 29, 0xDEADBEEF, 0, 0x3000, 0, 6 };
        bad(fill_odd, 7, "multiple of 4");
        uint32_t zero[] = { 0xC0055000, 0, 0x1000, 0, 0x3000, 0, 0 };
        bad(zero, 7, "BYTE_COUNT 0");
        uint32_t sas[] = { 0xC0055000, 0, 0x1000, 0, 0x3000, 0, 64 | (1u << 26) };
        bad(sas, 7, "SAS");
        uint32_t pfp[] = { 0xC0055000, 1, 0x1000, 0, 0x3000, 0, 64 };
        bad(pfp, 7, "PFP");
}

Test(sim_pm4_decode, opcode_names) {
        cr_expect_str_eq(sim_pm4_opcode_name(0x49), "RELEASE_MEM");
        cr_expect_str_eq(sim_pm4_opcode_name(0x15), "DISPATCH_DIRECT");
        cr_expect_null(sim_pm4_opcode_name(0x01));
}

/* ATOMIC_MEM (0x1E), COUNT 7 (PM4_MEC_ATOMIC_MEM): DW1 ATOMIC [6:0], COMMAND
 * [11:8], CACHE_POLICY [26:25]; ADDR, SRC_DATA, CMP_DATA; LOOP_INTERVAL [12:0]. */
Test(sim_pm4_decode, atomic_mem) {
        /* 3<<30 | 7<<16 | 0x1E<<8; TC_OP_ATOMIC_CMPSWAP_RTN_64 0x28 | COMMAND 1 | bypass 3<<25 */
        uint32_t dw[] = { 0xC0071E00, 0x06000128, 0x00002008, 0x00007F00, 5, 0, 6, 0, 128 };
        SimPm4Packet p = ok(dw, 9);
        cr_expect_eq(p.opcode, 0x1Eu);
        cr_expect_eq(p.atomic_mem.op, 0x28u);
        cr_expect_eq(p.atomic_mem.command, 1u);
        cr_expect_eq(p.atomic_mem.cache_policy, 3u);
        cr_expect_eq(p.atomic_mem.addr, 0x00007F0000002008ull);
        cr_expect_eq(p.atomic_mem.src, 5u);
        cr_expect_eq(p.atomic_mem.cmp, 6u);
        cr_expect_eq(p.atomic_mem.loop_interval, 128u);
        /* A 32-bit op needs dword alignment only. */
        uint32_t add32[] = { 0xC0071E00, 0x0F, 0x2004, 0, 1, 0, 0, 0, 0 };
        ok(add32, 9);

        uint32_t b[9];
        memcpy(b, dw, sizeof b);
        b[1] = 0x2F | 1u << 8; /* loop on an add */
        bad(b, 9, "COMMAND 1");
        b[1] = 0x2F | 4u << 8;
        bad(b, 9, "COMMAND above 3");
        b[1] = 0x2F;
        b[2] = 0x2004; /* 64-bit op, dword aligned */
        bad(b, 9, "aligned");
        b[2] = 0x2008;
        b[1] = 0x23; /* FMAX_RTN_64 */
        bad(b, 9, "not an integer");
        b[1] = 0x1A; /* WBINVL1_VOL: a cache op */
        bad(b, 9, "not an integer");
        b[1] = 0x2F | 1u << 31;
        bad(b, 9, "reserved");
        b[1] = 0x2F;
        b[8] = 1u << 13;
        bad(b, 9, "DW8");
        uint32_t short_count[] = { 0xC0061E00, 0x2F, 0x2008, 0, 1, 0, 0, 0 };
        bad(short_count, 8, "COUNT must be 7");
}

/* WAIT_REG_MEM64 (0x93), COUNT 7 (PM4_MEC_WAIT_REG_MEM64): DW1 FUNCTION,
 * MEM_SPACE, OPERATION, MES_INTR_PIPE [23:22], MES_ACTION 24, CACHE_POLICY;
 * DW2 address [31:3]; reference and mask lo/hi; POLL_INTERVAL. */
Test(sim_pm4_decode, wait_reg_mem64) {
        uint32_t dw[] = { 0xC0079300, 0x00000015, 0x00003008, 0x12, 1, 2, 0xFFFFFFFF, 0x7FFFFFFF, 4 };
        SimPm4Packet p = ok(dw, 9);
        cr_expect_eq(p.opcode, 0x93u);
        cr_expect_eq(p.wait_reg_mem64.function, 5u);
        cr_expect_eq(p.wait_reg_mem64.mem_space, 1u);
        cr_expect_eq(p.wait_reg_mem64.addr, 0x0000001200003008ull);
        cr_expect_eq(p.wait_reg_mem64.ref, 0x0000000200000001ull);
        cr_expect_eq(p.wait_reg_mem64.mask, 0x7FFFFFFFFFFFFFFFull);
        cr_expect_eq(p.wait_reg_mem64.poll_interval, 4u);

        uint32_t b[9];
        memcpy(b, dw, sizeof b);
        b[2] = 0x3004;
        bad(b, 9, "qword aligned");
        b[2] = 0x3008;
        b[1] = 0x05; /* MEM_SPACE 0: a register */
        bad(b, 9, "MEM_SPACE");
        b[1] = 0x15 | 1u << 22;
        bad(b, 9, "MES");
        b[1] = 0x17; /* FUNCTION 7 */
        bad(b, 9, "FUNCTION 7");
        b[1] = 0x15 | 1u << 8; /* the ENGINE field of WAIT_REG_MEM does not exist here */
        bad(b, 9, "reserved");
        b[1] = 0x15;
        b[8] = 1u << 16;
        bad(b, 9, "DW8");
}
