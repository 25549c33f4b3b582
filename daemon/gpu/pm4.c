/* SPDX-License-Identifier: MIT */
/*
 * PM4 type-3 packet builders (see pm4.h). Pure functions over a caller
 * buffer; no state. Layouts: Linux drivers/gpu/drm/amd/amdgpu/nvd.h
 * (PACKET3_* field macros), the gfx_v10_0.c ring emitters and Mesa's sid.h,
 * restated in kfd-facts §2.2 [K9, K11, M1]; conventions for user queues from
 * tinygrad's AMDComputeQueue [T1].
 */
#include <assert.h>
#include <string.h>

#include "gpu/pm4.h"

static inline uint32_t lo32(uint64_t v) {
        return (uint32_t) v;
}
static inline uint32_t hi32(uint64_t v) {
        return (uint32_t) (v >> 32);
}

size_t pm4_emit_nop(uint32_t *buf, size_t ndw) {
        assert(ndw >= 1 && (ndw == 1 || ndw - 2 <= PKT3_NOP_MAX_COUNT));
        if (ndw == 1) {
                buf[0] = PKT3_NOP_PAD;
                return 1;
        }
        buf[0] = PKT3_HDR(PKT3_NOP, ndw - 2);
        memset(buf + 1, 0, (ndw - 1) * sizeof *buf);
        return ndw;
}

/*
 * SET_SH_REG (0x76), COUNT = n [K9 PACKET3_SET_SH_REG; kfd-facts §2.2]:
 *   DW1 register offset from 0x2C00 (bits 15:0; the VMID-shift and INDEX
 *       fields above it are 0 for plain writes)
 *   DW2.. values of n consecutive registers
 */
size_t pm4_emit_set_sh_reg(uint32_t *buf, uint32_t reg, const uint32_t *values, unsigned n) {
        assert(n >= 1 && reg >= PM4_SH_REG_BASE && reg + n <= PM4_SH_REG_END);
        buf[0] = PKT3_HDR(PKT3_SET_SH_REG, n);
        buf[1] = reg - PM4_SH_REG_BASE;
        memcpy(buf + 2, values, n * sizeof *values);
        return PM4_SET_SH_REG_DW(n);
}

/*
 * DISPATCH_DIRECT (0x15), COUNT = 3 [K9; kfd-facts §2.2]: DW1..3 DIM_X/Y/Z in
 * workgroups (USE_THREAD_DIMENSIONS is not set), DW4 the
 * COMPUTE_DISPATCH_INITIATOR value.
 */
size_t pm4_emit_dispatch_direct(uint32_t *buf, uint32_t x, uint32_t y, uint32_t z, uint32_t initiator) {
        assert(x >= 1 && y >= 1 && z >= 1);
        buf[0] = PKT3_HDR(PKT3_DISPATCH_DIRECT, 3);
        buf[1] = x;
        buf[2] = y;
        buf[3] = z;
        buf[4] = initiator;
        return PM4_DISPATCH_DIRECT_DW;
}

/*
 * EVENT_WRITE (0x46), COUNT = 0 [K9 PACKET3_EVENT_WRITE_*]: DW1
 * EVENT_TYPE[5:0] | EVENT_INDEX[11:8]. After a dispatch: CS_PARTIAL_FLUSH
 * (7) with index 4 (tinygrad AMDComputeQueue.exec) [T1].
 */
size_t pm4_emit_event_write(uint32_t *buf, uint32_t event_type, uint32_t event_index) {
        assert(event_type <= 0x3F && event_index <= 0xF);
        buf[0] = PKT3_HDR(PKT3_EVENT_WRITE, 0);
        buf[1] = event_type | event_index << 8;
        return PM4_EVENT_WRITE_DW;
}

/*
 * ACQUIRE_MEM (0x58), gfx10+ form, COUNT = 6 [K9 PACKET3_ACQUIRE_MEM_*; M1
 * radv si_cs_emit_cache_flush; kfd-facts §2.2]:
 *   DW1 CP_COHER_CNTL = 0
 *   DW2 COHER_SIZE = 0xFFFFFFFF, DW3 COHER_SIZE_HI = 0xFFFFFF (everything; the
 *       kernel's gfx_v10_0_emit_mem_sync writes these two values)
 *   DW4/DW5 COHER_BASE lo/hi = 0
 *   DW6 POLL_INTERVAL[15:0] = 0xA (radv and the kernel)
 *   DW7 GCR_CNTL[18:0]
 */
size_t pm4_emit_acquire_mem(uint32_t *buf, uint32_t gcr_cntl) {
        assert(gcr_cntl < (1u << 19));
        buf[0] = PKT3_HDR(PKT3_ACQUIRE_MEM, 6);
        buf[1] = 0;
        buf[2] = 0xFFFFFFFFu;
        buf[3] = 0x00FFFFFFu;
        buf[4] = 0;
        buf[5] = 0;
        buf[6] = 0x0000000Au;
        buf[7] = gcr_cntl;
        return PM4_ACQUIRE_MEM_DW;
}

/*
 * RELEASE_MEM (0x49), COUNT = 6 [K9 PACKET3_RELEASE_MEM_*; K
 * kfd_pm4_headers_ai.h struct pm4_mec_release_mem; kfd-facts §2.2]:
 *   DW1 EVENT_TYPE[5:0] | EVENT_INDEX[11:8] | GCR bits [22:12] | CACHE_POLICY[26:25]
 *   DW2 DST_SEL[17:16] = 0 (memory) | INT_SEL[26:24] | DATA_SEL[31:29]
 *   DW3/DW4 ADDR lo/hi (dword aligned for 32-bit data, qword aligned for
 *           64-bit data and the timestamp)
 *   DW5/DW6 DATA lo/hi
 *   DW7 INT_CTXID: the context id the END_OF_PIPE interrupt carries (the KFD
 *       event id, kfd_int_process_v10.c)
 */
size_t pm4_emit_release_mem(uint32_t *buf, uint32_t event_type, uint32_t event_index, uint32_t gcr,
                            Pm4DataSel data_sel, Pm4IntSel int_sel, uint64_t addr, uint64_t data,
                            uint32_t int_ctxid) {
        assert(event_type <= 0x3F && event_index <= 0xF && (gcr & ~(0x7FFu << 12 | 3u << 25)) == 0);
        assert(addr % (data_sel == PM4_DATA_32 ? 4 : 8) == 0 || data_sel == PM4_DATA_NONE);
        buf[0] = PKT3_HDR(PKT3_RELEASE_MEM, 6);
        buf[1] = event_type | event_index << 8 | gcr;
        buf[2] = (uint32_t) int_sel << 24 | (uint32_t) data_sel << 29;
        buf[3] = lo32(addr);
        buf[4] = hi32(addr);
        buf[5] = lo32(data);
        buf[6] = hi32(data);
        buf[7] = int_ctxid;
        return PM4_RELEASE_MEM_DW;
}

/*
 * WAIT_REG_MEM (0x3C), COUNT = 5 [K9 PACKET3_WAIT_REG_MEM_*; kernel
 * gfx_v10_0_wait_reg_mem; kfd-facts §2.2]:
 *   DW1 FUNCTION[2:0] | MEM_SPACE[5:4] = 1 (memory) | OPERATION[7:6] = 0
 *       (wait) | ENGINE[9:8] = 0 (ME)
 *   DW2/DW3 poll address lo (dword aligned) / hi
 *   DW4 reference, DW5 mask (applied to the value read), DW6 POLL_INTERVAL[15:0]
 */
size_t pm4_emit_wait_reg_mem(uint32_t *buf, Pm4WaitFunc func, uint64_t addr, uint32_t ref, uint32_t mask,
                             uint32_t poll_interval) {
        assert(addr % 4 == 0 && (unsigned) func <= PM4_WAIT_GT && poll_interval <= 0xFFFF);
        buf[0] = PKT3_HDR(PKT3_WAIT_REG_MEM, 5);
        buf[1] = (uint32_t) func | 1u << 4;
        buf[2] = lo32(addr);
        buf[3] = hi32(addr);
        buf[4] = ref;
        buf[5] = mask;
        buf[6] = poll_interval;
        return PM4_WAIT_REG_MEM_DW;
}

/*
 * WAIT_REG_MEM64 (0x93), COUNT = 7 [K9 nvd.h PACKET3_WAIT_REG_MEM64 opcode;
 * field layout PM4_MEC_WAIT_REG_MEM64 in PAL's gfx9_plus_merged MEC packet
 * header]:
 *   DW1 FUNCTION[2:0] | MEM_SPACE[5:4] = 1 (memory) | OPERATION[7:6] = 0 (wait)
 *   DW2 MEM_POLL_ADDR_LO[31:3] (qword aligned), DW3 address hi
 *   DW4/DW5 reference lo/hi, DW6/DW7 mask lo/hi, DW8 POLL_INTERVAL[15:0]
 */
size_t pm4_emit_wait_reg_mem64(uint32_t *buf, Pm4WaitFunc func, uint64_t addr, uint64_t ref, uint64_t mask,
                               uint32_t poll_interval) {
        assert(addr % 8 == 0 && (unsigned) func <= PM4_WAIT_GT && poll_interval <= 0xFFFF);
        buf[0] = PKT3_HDR(PKT3_WAIT_REG_MEM64, 7);
        buf[1] = (uint32_t) func | 1u << 4;
        buf[2] = lo32(addr);
        buf[3] = hi32(addr);
        buf[4] = lo32(ref);
        buf[5] = hi32(ref);
        buf[6] = lo32(mask);
        buf[7] = hi32(mask);
        buf[8] = poll_interval;
        return PM4_WAIT_REG_MEM64_DW;
}

/*
 * ATOMIC_MEM (0x1E), COUNT = 7 [K9 nvd.h PACKET3_ATOMIC_MEM; field layout
 * PM4_MEC_ATOMIC_MEM in ROCr's and PAL's PM4 headers]:
 *   DW1 ATOMIC[6:0] = TC_OP | COMMAND[11:8] | CACHE_POLICY[26:25] = 3 (bypass)
 *   DW2/DW3 ADDR lo/hi, DW4/DW5 SRC_DATA lo/hi, DW6/DW7 CMP_DATA lo/hi
 *   DW8 LOOP_INTERVAL[12:0] (128 for a loop, as ROCr's blocking compare-swap)
 */
size_t pm4_emit_atomic_mem(uint32_t *buf, unsigned op, Pm4AtomicCommand command, uint64_t addr, uint64_t src,
                           uint64_t cmp) {
        assert(op <= 0x7F && (op & 0x20) && addr % 8 == 0 && (unsigned) command <= PM4_ATOMIC_SEND_AND_CONTINUE);
        assert(command != PM4_ATOMIC_LOOP_UNTIL_COMPARE || (op & 0x1F) == (PM4_TC_OP_ATOMIC_CMPSWAP_RTN_64 & 0x1F));
        buf[0] = PKT3_HDR(PKT3_ATOMIC_MEM, 7);
        buf[1] = op | (uint32_t) command << 8 | PM4_ATOMIC_CACHE_POLICY_BYPASS << 25;
        buf[2] = lo32(addr);
        buf[3] = hi32(addr);
        buf[4] = lo32(src);
        buf[5] = hi32(src);
        buf[6] = lo32(cmp);
        buf[7] = hi32(cmp);
        buf[8] = command == PM4_ATOMIC_LOOP_UNTIL_COMPARE ? 128 : 0;
        return PM4_ATOMIC_MEM_DW;
}

/*
 * WRITE_DATA (0x37), COUNT = 2 + n [K9 PACKET3_WRITE_DATA_*; the kernel's
 * gfx_v10_0_ring_emit_fence_kiq uses ENGINE_SEL(0) | DST_SEL(5) | WR_CONFIRM]:
 *   DW1 DST_SEL[11:8] = 5 (memory) | WR_CONFIRM bit 20
 *   DW2/DW3 address lo (dword aligned) / hi, DW4.. the n data dwords
 */
size_t pm4_emit_write_data(uint32_t *buf, uint64_t addr, const uint32_t *data, unsigned n) {
        assert(n >= 1 && addr % 4 == 0);
        buf[0] = PKT3_HDR(PKT3_WRITE_DATA, 2 + n);
        buf[1] = 5u << 8 | 1u << 20;
        buf[2] = lo32(addr);
        buf[3] = hi32(addr);
        memcpy(buf + 4, data, n * sizeof *data);
        return PM4_WRITE_DATA_DW(n);
}

/*
 * INDIRECT_BUFFER (0x3F), COUNT = 2 [K9 PACKET3_INDIRECT_BUFFER_*; K11
 * gfx_v10_0_ring_emit_ib_compute]: DW1/DW2 IB base lo (dword aligned) / hi,
 * DW3 IB_SIZE[19:0] in dwords | VALID bit 23 (VMID 0: the queue's VMID applies
 * on KFD user queues; tinygrad uses size | VALID).
 */
size_t pm4_emit_indirect_buffer(uint32_t *buf, uint64_t addr, uint32_t ndw) {
        assert(addr % 4 == 0 && ndw >= 1 && ndw < (1u << 20));
        buf[0] = PKT3_HDR(PKT3_INDIRECT_BUFFER, 2);
        buf[1] = lo32(addr);
        buf[2] = hi32(addr);
        buf[3] = ndw | 1u << 23;
        return PM4_INDIRECT_BUFFER_DW;
}
