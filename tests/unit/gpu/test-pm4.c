/* SPDX-License-Identifier: MIT */
/*
 * PM4 packet builders against layouts written out by hand from the
 * documentation (kfd-facts §2.1-2.3: nvd.h PACKET3_* fields, the kernel's
 * gfx_v10_0.c emitters, Mesa sid.h). The expected dwords are literals; the
 * comment next to each shows the field math. Header: 3 << 30 | COUNT << 16 |
 * opcode << 8, COUNT = body dwords - 1.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "gpu/pm4.h"

#define CHECK_DWORDS(got, n_got, ...)                                                   \
        do {                                                                            \
                const uint32_t _exp[] = { __VA_ARGS__ };                                \
                cr_assert_eq((n_got), sizeof _exp / sizeof _exp[0], "dword count %zu", \
                             (size_t) (n_got));                                         \
                for (size_t _i = 0; _i < (n_got); _i++)                                 \
                        cr_expect_eq((got)[_i], _exp[_i], "DW%zu: got 0x%08x want 0x%08x", \
                                     _i, (got)[_i], _exp[_i]);                          \
        } while (0)

#define GUARD 0xABABABABu

Test(pm4, nop_forms) {
        uint32_t b[8];
        memset(b, 0xAB, sizeof b);
        size_t n = pm4_emit_nop(b, 1);
        CHECK_DWORDS(b, n, 0xFFFF1000 /* header-only NOP: COUNT 0x3FFF, op 0x10 (Mesa PKT3_NOP_PAD) */);
        cr_expect_eq(b[1], GUARD);

        memset(b, 0xAB, sizeof b);
        n = pm4_emit_nop(b, 4);
        CHECK_DWORDS(b, n,
                     0xC0021000, /* 3<<30 | COUNT 2 (3 body dwords) <<16 | NOP 0x10<<8 */
                     0, 0, 0);
        cr_expect_eq(b[4], GUARD);

        n = pm4_emit_nop(b, 2);
        CHECK_DWORDS(b, n, 0xC0001000 /* COUNT 0: one body dword */, 0);
}

Test(pm4, set_sh_reg_pgm) {
        uint32_t b[8];
        memset(b, 0xAB, sizeof b);
        uint64_t entry = 0x00007F12345600ull; /* 256-byte aligned */
        size_t n = pm4_emit_set_sh_reg(b, mmCOMPUTE_PGM_LO,
                                       (uint32_t[]) { (uint32_t) (entry >> 8), (uint32_t) (entry >> 40) }, 2);
        /* kfd-facts §2.2 example: PGM_LO/HI = PACKET3(0x76, 2), 0x20C, lo, hi */
        CHECK_DWORDS(b, n,
                     0xC0027600, /* 3<<30 | COUNT 2 <<16 | SET_SH_REG 0x76 <<8 */
                     0x0000020C, /* 0x2E0C - 0x2C00 */
                     0x7F123456, /* entry >> 8 */
                     0x00000000  /* entry >> 40 */);
        cr_expect_eq(b[4], GUARD);
        cr_expect_eq(mmCOMPUTE_PGM_LO - PM4_SH_REG_BASE, 0x20Cu);
        cr_expect_eq(mmCOMPUTE_PGM_RSRC1 - PM4_SH_REG_BASE, 0x212u);
        cr_expect_eq(mmCOMPUTE_TMPRING_SIZE - PM4_SH_REG_BASE, 0x218u);
        cr_expect_eq(mmCOMPUTE_PGM_RSRC3 - PM4_SH_REG_BASE, 0x228u);
        cr_expect_eq(mmCOMPUTE_USER_DATA_0 - PM4_SH_REG_BASE, 0x240u);
        cr_expect_eq(mmCOMPUTE_START_X - PM4_SH_REG_BASE, 0x204u);
        cr_expect_eq(mmCOMPUTE_NUM_THREAD_X - PM4_SH_REG_BASE, 0x207u);
        cr_expect_eq(mmCOMPUTE_RESTART_X - PM4_SH_REG_BASE, 0x21Bu);
        cr_expect_eq(mmCOMPUTE_RESOURCE_LIMITS - PM4_SH_REG_BASE, 0x215u);
}

Test(pm4, set_sh_reg_user_data_16) {
        uint32_t b[20], v[16];
        for (unsigned i = 0; i < 16; i++)
                v[i] = 0x1000 + i;
        size_t n = pm4_emit_set_sh_reg(b, mmCOMPUTE_USER_DATA_0, v, 16);
        cr_assert_eq(n, 18u);
        cr_expect_eq(b[0], 0xC0107600u); /* COUNT 16 */
        cr_expect_eq(b[1], 0x240u);
        cr_expect_eq(b[2], 0x1000u);
        cr_expect_eq(b[17], 0x100Fu);
}

Test(pm4, num_thread_and_tmpring_fields) {
        /* NUM_THREAD_FULL [15:0], NUM_THREAD_PARTIAL [31:16] (sid.h S_00B81C_*) */
        cr_expect_eq(COMPUTE_NUM_THREAD(256, 100), 0x00640100u);
        cr_expect_eq(COMPUTE_NUM_THREAD(64, 64), 0x00400040u);
        /* TMPRING_SIZE gfx10: WAVES [11:0], WAVESIZE [24:12] */
        cr_expect_eq(COMPUTE_TMPRING_SIZE(1280, 9), 0x00009500u);
        cr_expect_eq(COMPUTE_TMPRING_SIZE(0xFFF, 0x1FFF), 0x01FFFFFFu);
}

Test(pm4, dispatch_direct) {
        uint32_t b[8];
        memset(b, 0xAB, sizeof b);
        uint32_t init = COMPUTE_DISPATCH_INITIATOR_COMPUTE_SHADER_EN | COMPUTE_DISPATCH_INITIATOR_PARTIAL_TG_EN |
                        COMPUTE_DISPATCH_INITIATOR_FORCE_START_AT_000 | COMPUTE_DISPATCH_INITIATOR_CS_W32_EN;
        size_t n = pm4_emit_dispatch_direct(b, 40, 2, 1, init);
        CHECK_DWORDS(b, n,
                     0xC0031500, /* COUNT 3, DISPATCH_DIRECT 0x15 */
                     40, 2, 1,   /* DIM_X/Y/Z in workgroups */
                     0x00008007  /* COMPUTE_SHADER_EN 0 | PARTIAL_TG_EN 1 | FORCE_START_AT_000 2 | CS_W32_EN 15 */);
        cr_expect_eq(b[5], GUARD);
}

Test(pm4, event_write_cs_partial_flush) {
        uint32_t b[4];
        size_t n = pm4_emit_event_write(b, PM4_EVENT_CS_PARTIAL_FLUSH, PM4_EVENT_INDEX_CS_PARTIAL_FLUSH);
        CHECK_DWORDS(b, n,
                     0xC0004600, /* COUNT 0, EVENT_WRITE 0x46 */
                     0x00000407  /* EVENT_TYPE CS_PARTIAL_FLUSH 7 | EVENT_INDEX 4 << 8 */);
}

Test(pm4, acquire_mem_gfx10) {
        uint32_t b[10];
        memset(b, 0xAB, sizeof b);
        size_t n = pm4_emit_acquire_mem(b, ACQUIRE_MEM_GCR_GLM_WB | ACQUIRE_MEM_GCR_GLM_INV | ACQUIRE_MEM_GCR_GLK_INV |
                                                   ACQUIRE_MEM_GCR_GLV_INV | ACQUIRE_MEM_GCR_GL1_INV);
        CHECK_DWORDS(b, n,
                     0xC0065800, /* COUNT 6, ACQUIRE_MEM 0x58 */
                     0x00000000, /* CP_COHER_CNTL */
                     0xFFFFFFFF, /* COHER_SIZE */
                     0x00FFFFFF, /* COHER_SIZE_HI (gfx_v10_0_emit_mem_sync) */
                     0x00000000, /* COHER_BASE */
                     0x00000000, /* COHER_BASE_HI */
                     0x0000000A, /* POLL_INTERVAL */
                     0x000003B0  /* GCR_CNTL: GLM_WB 4 | GLM_INV 5 | GLK_INV 7 | GLV_INV 8 | GL1_INV 9 */);
        cr_expect_eq(b[8], GUARD);
}

Test(pm4, release_mem_interrupt) {
        uint32_t b[10];
        memset(b, 0xAB, sizeof b);
        uint32_t gcr = RELEASE_MEM_GCR_SEQ | RELEASE_MEM_GCR_GL2_WB | RELEASE_MEM_GCR_GLM_INV | RELEASE_MEM_GCR_GLM_WB |
                       RELEASE_MEM_CACHE_POLICY(3);
        size_t n = pm4_emit_release_mem(b, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, gcr,
                                        PM4_DATA_32, PM4_INT_AFTER_WRITE_CONFIRM, 0x00007F00DEAD0018ull, 5, 5);
        CHECK_DWORDS(b, n,
                     0xC0064900, /* COUNT 6, RELEASE_MEM 0x49 */
                     /* EVENT_TYPE 0x14 | EVENT_INDEX 5<<8 | GLM_WB 12 | GLM_INV 13 | GL2_WB 21 | SEQ 22 |
                      * CACHE_POLICY 3<<25: the kernel's gfx_v10_0_ring_emit_fence form */
                     0x06603514,
                     0x22000000, /* DST_SEL 0 | INT_SEL 2 <<24 | DATA_SEL 1 <<29 */
                     0xDEAD0018, /* ADDR lo */
                     0x00007F00, /* ADDR hi */
                     0x00000005, /* DATA lo: the event id */
                     0x00000000, /* DATA hi */
                     0x00000005  /* INT_CTXID: the event id (kfd_int_process_v10.c) */);
        cr_expect_eq(b[8], GUARD);
}

Test(pm4, release_mem_timestamp) {
        uint32_t b[8];
        size_t n = pm4_emit_release_mem(b, PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT, PM4_EVENT_INDEX_END_OF_PIPE, 0,
                                        PM4_DATA_TIMESTAMP, PM4_INT_NONE, 0x1000ull, 0, 0);
        cr_assert_eq(n, 8u);
        cr_expect_eq(b[1], 0x00000514u);
        cr_expect_eq(b[2], 0x60000000u); /* DATA_SEL 3 (GPU clock counter) << 29, INT_SEL 0 */
        cr_expect_eq(b[3], 0x1000u);
}

Test(pm4, wait_reg_mem_geq) {
        uint32_t b[8];
        memset(b, 0xAB, sizeof b);
        size_t n = pm4_emit_wait_reg_mem(b, PM4_WAIT_GE, 0x0000123400005008ull, 77, 0xFFFFFFFF, 4);
        CHECK_DWORDS(b, n,
                     0xC0053C00, /* COUNT 5, WAIT_REG_MEM 0x3C */
                     0x00000015, /* FUNCTION 5 (>=) | MEM_SPACE 1 <<4 | OPERATION 0 | ENGINE 0 (ME) */
                     0x00005008, /* poll address lo */
                     0x00001234, /* poll address hi */
                     77,         /* reference */
                     0xFFFFFFFF, /* mask */
                     0x00000004  /* POLL_INTERVAL */);
        cr_expect_eq(b[7], GUARD);
}

Test(pm4, write_data_memory) {
        uint32_t b[8];
        memset(b, 0xAB, sizeof b);
        size_t n = pm4_emit_write_data(b, 0x2000ull, (uint32_t[]) { 0x11, 0x22 }, 2);
        CHECK_DWORDS(b, n,
                     /* COUNT 4 = 2 + n (3 + n body dwords), WRITE_DATA 0x37 (the kernel's
                      * fence_kiq writes PACKET3(WRITE_DATA, 3) for one dword) */
                     0xC0043700,
                     0x00100500, /* DST_SEL 5 (memory) <<8 | WR_CONFIRM 20 */
                     0x00002000, 0x00000000, 0x11, 0x22);
        cr_expect_eq(b[6], GUARD);
}

Test(pm4, indirect_buffer) {
        uint32_t b[6];
        size_t n = pm4_emit_indirect_buffer(b, 0x00007F0000001000ull, 64);
        CHECK_DWORDS(b, n,
                     0xC0023F00, /* COUNT 2, INDIRECT_BUFFER 0x3F */
                     0x00001000, 0x00007F00,
                     0x00800040  /* IB_SIZE 64 | VALID 23 */);
}

Test(pm4, atomic_mem_signal_decrement) {
        uint32_t b[10];
        memset(b, 0xAB, sizeof b);
        size_t n = pm4_emit_atomic_mem(b, PM4_TC_OP_ATOMIC_ADD_RTN_64, PM4_ATOMIC_SINGLE_PASS, 0x00007F0000002008ull,
                                       ~0ull, 0);
        CHECK_DWORDS(b, n,
                     0xC0071E00, /* 3<<30 | COUNT 7 (8 body dwords) | ATOMIC_MEM 0x1E<<8 */
                     0x0600002F, /* ATOMIC[6:0]=0x2F ADD_RTN_64 | COMMAND[11:8]=0 | CACHE_POLICY[26:25]=3 (bypass) */
                     0x00002008, 0x00007F00, /* ADDR */
                     0xFFFFFFFF, 0xFFFFFFFF, /* SRC_DATA = -1 */
                     0x00000000, 0x00000000, /* CMP_DATA */
                     0x00000000 /* LOOP_INTERVAL */);
        cr_expect_eq(b[9], GUARD);

        n = pm4_emit_atomic_mem(b, PM4_TC_OP_ATOMIC_CMPSWAP_RTN_64, PM4_ATOMIC_LOOP_UNTIL_COMPARE, 0x1000, 5, 6);
        CHECK_DWORDS(b, n, 0xC0071E00,
                     0x06000128, /* 0x28 CMPSWAP_RTN_64 | COMMAND 1 << 8 | bypass */
                     0x00001000, 0, 5, 0, 6, 0,
                     0x00000080 /* LOOP_INTERVAL 128 */);
}

Test(pm4, wait_reg_mem64_barrier) {
        uint32_t b[10];
        memset(b, 0xAB, sizeof b);
        size_t n = pm4_emit_wait_reg_mem64(b, PM4_WAIT_EQ, 0x0000001200003008ull, 0, ~0ull, 4);
        CHECK_DWORDS(b, n,
                     0xC0079300, /* COUNT 7 | WAIT_REG_MEM64 0x93<<8 */
                     0x00000013, /* FUNCTION 3 (==) | MEM_SPACE[5:4]=1 | OPERATION 0 */
                     0x00003008, 0x00000012, /* poll address (qword aligned) */
                     0x00000000, 0x00000000, /* reference 0 */
                     0xFFFFFFFF, 0xFFFFFFFF, /* mask */
                     0x00000004 /* POLL_INTERVAL */);
        cr_expect_eq(b[9], GUARD);
}

/* Second opinion: the simulator's decoder reads back what the builders wrote. */
#include "sim/sim-pm4-decode.h"

Test(pm4_decode, atomic_mem_and_wait64) {
        uint32_t b[10];
        SimPm4Packet p;
        const char *why = NULL;
        size_t n = pm4_emit_atomic_mem(b, PM4_TC_OP_ATOMIC_ADD_RTN_64, PM4_ATOMIC_SINGLE_PASS, 0x00007F0000002008ull,
                                       ~0ull, 0);
        cr_assert_eq(sim_pm4_decode(b, n, &p, &why), 0, "%s", why ? why : "");
        cr_expect_eq(p.opcode, (unsigned) SIM_PKT3_ATOMIC_MEM);
        cr_expect_eq(p.n_dwords, n);
        cr_expect_eq(p.atomic_mem.op, PM4_TC_OP_ATOMIC_ADD_RTN_64);
        cr_expect_eq(p.atomic_mem.addr, 0x00007F0000002008ull);
        cr_expect_eq(p.atomic_mem.src, ~0ull);
        cr_expect_eq(p.atomic_mem.cache_policy, PM4_ATOMIC_CACHE_POLICY_BYPASS);
        n = pm4_emit_wait_reg_mem64(b, PM4_WAIT_GE, 0x0000001200003008ull, 0x100000000ull, ~0ull, 4);
        cr_assert_eq(sim_pm4_decode(b, n, &p, &why), 0, "%s", why ? why : "");
        cr_expect_eq(p.opcode, (unsigned) SIM_PKT3_WAIT_REG_MEM64);
        cr_expect_eq(p.wait_reg_mem64.addr, 0x0000001200003008ull);
        cr_expect_eq(p.wait_reg_mem64.ref, 0x100000000ull);
        cr_expect_eq(p.wait_reg_mem64.mask, ~0ull);
        cr_expect_eq(p.wait_reg_mem64.function, (unsigned) PM4_WAIT_GE);
}
