/* SPDX-License-Identifier: MIT */
/*
 * The PM4 decoder of the simulated GPU. Field extraction follows the gfx10
 * layouts of Linux drivers/gpu/drm/amd/amdgpu/nvd.h (PACKET3_* bit
 * definitions), amdkfd/kfd_pm4_headers_ai.h (struct pm4_mec_release_mem and
 * its enums), Mesa src/amd/common/sid.h (PKT3 header bits, COPY_DATA) and the
 * kernel's own emitters in gfx_v10_0.c, as tabulated in kfd-facts §2.1-2.2,
 * with shifts and masks of its own; it never calls the daemon's encoders, so
 * an encoding mistake shows up as a refusal instead of being mirrored. Pure
 * functions; the CP engine (sim-cp.c) and tests own the buffers.
 *
 * What the decoder checks is the layout: the type-3 header (type 0, 1 and 2
 * packets are refused: a gfx10 compute queue executes type-3 packets, and
 * PACKET2 padding is a GFX6 convention, Mesa sid.h PKT2_NOP_PAD), the COUNT
 * each opcode has (RELEASE_MEM and ACQUIRE_MEM are 8 dwords on gfx10,
 * WAIT_REG_MEM 7, WAIT_REG_MEM64 and ATOMIC_MEM 9, INDIRECT_BUFFER 4,
 * DISPATCH_DIRECT 5), register windows,
 * reserved bits and enum values the documentation does not define, and the
 * address alignment each packet requires. Whether the CP engine models a
 * documented choice (a GDS destination, a register wait, an interrupt mode)
 * is the engine's decision, not the decoder's.
 */
#include <errno.h>

#include "sim-atomic.h"
#include "sim-pm4-decode.h"

#define BITS(v, hi, lo) (((uint32_t) (v) >> (lo)) & ((uint32_t) (((uint64_t) 1 << ((hi) - (lo) + 1)) - 1)))
#define MASK(hi, lo) ((uint32_t) ((((uint64_t) 1 << ((hi) - (lo) + 1)) - 1) << (lo)))
#define BIT(n) (1u << (n))

/* PM4 header (nvd.h PACKET3(), Mesa sid.h): TYPE [31:30], COUNT [29:16], IT_OPCODE
 * [15:8], RESET_FILTER_CAM 2 (newer Mesa), SHADER_TYPE 1, PREDICATE 0; [7:3] reserved. */
#define HEADER_RESERVED MASK(7, 3)
/* "NOP is the only packet that can have count == -1" (header-only form, Mesa PKT3_NOP_PAD). */
#define NOP_HEADER_ONLY_COUNT 0x3FFFu

/* VGT_EVENT_TYPE values used on compute queues (Mesa sid.h V_028A90_*). */
#define EVENT_CACHE_FLUSH_TS 0x04u
#define EVENT_CS_PARTIAL_FLUSH 0x07u
#define EVENT_CACHE_FLUSH_AND_INV_TS 0x14u
#define EVENT_BOTTOM_OF_PIPE_TS 0x28u
#define EVENT_CS_DONE 0x2Fu
/* EVENT_INDEX values (nvd.h EVENT_WRITE comment; kfd_pm4_headers_ai.h). */
#define EVENT_INDEX_OTHER 0u
#define EVENT_INDEX_PARTIAL_FLUSH 4u
#define EVENT_INDEX_END_OF_PIPE 5u
#define EVENT_INDEX_SHADER_DONE 6u

static uint64_t addr64(uint32_t lo, uint32_t hi) {
        return ((uint64_t) hi << 32) | lo;
}

static int bad(const char **ret_reason, const char *reason) {
        if (ret_reason)
                *ret_reason = reason;
        return -EBADMSG;
}

const char *sim_pm4_opcode_name(unsigned opcode) {
        switch (opcode) {
        case SIM_PKT3_NOP: return "NOP";
        case SIM_PKT3_DISPATCH_DIRECT: return "DISPATCH_DIRECT";
        case SIM_PKT3_ATOMIC_MEM: return "ATOMIC_MEM";
        case SIM_PKT3_WAIT_REG_MEM64: return "WAIT_REG_MEM64";
        case SIM_PKT3_WRITE_DATA: return "WRITE_DATA";
        case SIM_PKT3_WAIT_REG_MEM: return "WAIT_REG_MEM";
        case SIM_PKT3_INDIRECT_BUFFER: return "INDIRECT_BUFFER";
        case SIM_PKT3_COPY_DATA: return "COPY_DATA";
        case SIM_PKT3_EVENT_WRITE: return "EVENT_WRITE";
        case SIM_PKT3_RELEASE_MEM: return "RELEASE_MEM";
        case SIM_PKT3_DMA_DATA: return "DMA_DATA";
        case SIM_PKT3_ACQUIRE_MEM: return "ACQUIRE_MEM";
        case SIM_PKT3_SET_SH_REG: return "SET_SH_REG";
        case SIM_PKT3_SET_UCONFIG_REG: return "SET_UCONFIG_REG";
        default: return NULL;
        }
}

/* The packet length each opcode's COUNT gives, or a refusal of the COUNT. */
static int packet_length(unsigned opcode, unsigned count, size_t *ret, const char **ret_reason) {
        switch (opcode) {
        case SIM_PKT3_NOP:
                /* Header-only NOP (count 0x3FFF), else count + 1 ignored dwords
                 * (the kernel caps one NOP at count 0x3FFE,
                 * amdgpu_gfx10_ring_insert_nop). */
                *ret = count == NOP_HEADER_ONLY_COUNT ? 1 : (size_t) count + 2;
                return 0;
        case SIM_PKT3_SET_SH_REG:
        case SIM_PKT3_SET_UCONFIG_REG:
                /* DW1 register offset, then COUNT values. */
                if (count < 1)
                        return bad(ret_reason, "SET_*_REG: COUNT 0 writes no register (COUNT = number of registers)");
                break;
        case SIM_PKT3_WRITE_DATA:
                /* DW1 control, DW2/3 address, then COUNT - 2 data dwords. */
                if (count < 3)
                        return bad(ret_reason, "WRITE_DATA: COUNT below 3 carries no data (COUNT = 2 + data dwords)");
                break;
        case SIM_PKT3_RELEASE_MEM:
                if (count != 6)
                        return bad(ret_reason, count == 5 ? "RELEASE_MEM: COUNT 5 is the gfx8 MEC form; gfx10 RELEASE_MEM is 8 dwords (COUNT 6)"
                                                          : "RELEASE_MEM: COUNT must be 6 (8 dwords)");
                break;
        case SIM_PKT3_ACQUIRE_MEM:
                if (count != 6)
                        return bad(ret_reason, count == 5 ? "ACQUIRE_MEM: COUNT 5 is the gfx9 form; gfx10 ACQUIRE_MEM is 8 dwords (COUNT 6) with GCR_CNTL last"
                                                          : "ACQUIRE_MEM: COUNT must be 6 (8 dwords)");
                break;
        case SIM_PKT3_WAIT_REG_MEM:
                if (count != 5)
                        return bad(ret_reason, "WAIT_REG_MEM: COUNT must be 5 (7 dwords)");
                break;
        case SIM_PKT3_ATOMIC_MEM:
                if (count != 7)
                        return bad(ret_reason, "ATOMIC_MEM: COUNT must be 7 (9 dwords)");
                break;
        case SIM_PKT3_WAIT_REG_MEM64:
                if (count != 7)
                        return bad(ret_reason, "WAIT_REG_MEM64: COUNT must be 7 (9 dwords)");
                break;
        case SIM_PKT3_EVENT_WRITE:
                if (count != 0 && count != 2)
                        return bad(ret_reason, "EVENT_WRITE: COUNT must be 0 (or 2 with an address)");
                break;
        case SIM_PKT3_DISPATCH_DIRECT:
                if (count != 3)
                        return bad(ret_reason, "DISPATCH_DIRECT: COUNT must be 3 (DIM_X/Y/Z, initiator)");
                break;
        case SIM_PKT3_INDIRECT_BUFFER:
                if (count != 2)
                        return bad(ret_reason, "INDIRECT_BUFFER: COUNT must be 2 (4 dwords)");
                break;
        case SIM_PKT3_COPY_DATA:
                if (count != 4)
                        return bad(ret_reason, "COPY_DATA: COUNT must be 4 (6 dwords)");
                break;
        case SIM_PKT3_DMA_DATA:
                if (count != 5)
                        return bad(ret_reason, "DMA_DATA: COUNT must be 5 (7 dwords)");
                break;
        default:
                return bad(ret_reason, "unknown PM4 opcode");
        }
        if (count == NOP_HEADER_ONLY_COUNT)
                return bad(ret_reason, "COUNT 0x3FFF (header only) is only valid for NOP");
        *ret = (size_t) count + 2;
        return 0;
}

/* SET_SH_REG / SET_UCONFIG_REG: DW1 REG_OFFSET [15:0] (VMID_SHIFT [27:23] and
 * INDEX [31:28] in newer nvd.h, 0 for plain writes; [22:16] reserved); DW2.. values. */
static int decode_set_reg(const uint32_t *dw, SimPm4Packet *p, uint32_t start, uint32_t end, const char **ret_reason) {
        if (dw[1] & MASK(22, 16))
                return bad(ret_reason, "SET_*_REG: reserved bits [22:16] of the register offset dword set");
        if (dw[1] & MASK(31, 23))
                return bad(ret_reason, "SET_*_REG: VMID_SHIFT/INDEX set; plain register writes need them 0");
        p->set_reg.reg = start + BITS(dw[1], 15, 0);
        p->set_reg.n = p->count;
        p->set_reg.values = dw + 2;
        if (p->set_reg.reg >= end || p->set_reg.n > end - p->set_reg.reg)
                return bad(ret_reason, start == SIM_SH_REG_START ? "SET_SH_REG: register outside the SH window 0x2C00..0x2FFF"
                                                                 : "SET_UCONFIG_REG: register outside the UCONFIG window 0xC000..0xC3FF");
        return 0;
}

/* WRITE_DATA: DW1 DST_SEL [11:8], WR_ONE_ADDR 16, WR_CONFIRM 20, CACHE_POLICY
 * [26:25], ENGINE_SEL [31:30] (nvd.h; pm4_mec_write_data_mmio also has RESUME_VF
 * 19); DW2 address low (memory: dword aligned) or register; DW3 address high. */
static int decode_write_data(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        if (dw[1] & ~(MASK(11, 8) | BIT(16) | BIT(19) | BIT(20) | MASK(26, 25) | MASK(31, 30)))
                return bad(ret_reason, "WRITE_DATA: reserved control bits set");
        p->write_data.dst_sel = BITS(dw[1], 11, 8);
        p->write_data.one_addr = BITS(dw[1], 16, 16);
        p->write_data.wr_confirm = BITS(dw[1], 20, 20);
        p->write_data.cache_policy = BITS(dw[1], 26, 25);
        p->write_data.engine_sel = BITS(dw[1], 31, 30);
        p->write_data.addr = addr64(dw[2], dw[3]);
        p->write_data.n = p->count - 2;
        p->write_data.data = dw + 4;
        switch (p->write_data.dst_sel) {
        case SIM_WRITE_DATA_DST_REG:
        case SIM_WRITE_DATA_DST_MEM_GRBM:
        case SIM_WRITE_DATA_DST_TC_L2:
        case SIM_WRITE_DATA_DST_GDS:
        case SIM_WRITE_DATA_DST_MEM:
                break;
        default:
                return bad(ret_reason, "WRITE_DATA: DST_SEL is not one of 0 register, 1/5 memory, 2 L2, 3 GDS");
        }
        if (p->write_data.engine_sel == 3)
                return bad(ret_reason, "WRITE_DATA: ENGINE_SEL 3 is reserved");
        if (p->write_data.dst_sel != SIM_WRITE_DATA_DST_REG && p->write_data.dst_sel != SIM_WRITE_DATA_DST_GDS &&
            p->write_data.addr % 4)
                return bad(ret_reason, "WRITE_DATA: memory address not dword aligned");
        return 0;
}

/* RELEASE_MEM, 8 dwords (kfd_pm4_headers_ai.h struct pm4_mec_release_mem, nvd.h
 * PACKET3_RELEASE_MEM_*): DW1 EVENT_TYPE [5:0], EVENT_INDEX [11:8], GCR [22:12]
 * (GLM_WB 12 ... SEQ 22), CACHE_POLICY [26:25], EXECUTE 28; DW2 DST_SEL [17:16],
 * INT_SEL [26:24], DATA_SEL [31:29]; DW3/4 address (32-bit data: [31:2], 64-bit:
 * [31:3]); DW5/6 data; DW7 INT_CTXID. */
static int decode_release_mem(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        typeof(p->release_mem) *m = &p->release_mem;

        if (dw[1] & ~(MASK(5, 0) | MASK(11, 8) | MASK(17, 12) | MASK(22, 19) | MASK(26, 25) | BIT(28)))
                return bad(ret_reason, "RELEASE_MEM: reserved bits set in DW1");
        if (dw[2] & ~(MASK(17, 16) | MASK(26, 24) | MASK(31, 29)))
                return bad(ret_reason, "RELEASE_MEM: reserved bits set in DW2");
        m->event_type = BITS(dw[1], 5, 0);
        m->event_index = BITS(dw[1], 11, 8);
        m->gcr = BITS(dw[1], 22, 12);
        m->cache_policy = BITS(dw[1], 26, 25);
        m->execute = BITS(dw[1], 28, 28);
        m->dst_sel = BITS(dw[2], 17, 16);
        m->int_sel = BITS(dw[2], 26, 24);
        m->data_sel = BITS(dw[2], 31, 29);
        m->addr = addr64(dw[3], dw[4]);
        m->data = addr64(dw[5], dw[6]);
        m->int_ctxid = dw[7];

        /* "EVENT_INDEX(event == CS_DONE || event == PS_DONE ? 6 : 5)" (Mesa
         * radv_cs_emit_write_event_eop); end-of-pipe events are the TS ones. */
        switch (m->event_type) {
        case EVENT_CACHE_FLUSH_TS:
        case EVENT_CACHE_FLUSH_AND_INV_TS:
        case EVENT_BOTTOM_OF_PIPE_TS:
                if (m->event_index != EVENT_INDEX_END_OF_PIPE)
                        return bad(ret_reason, "RELEASE_MEM: a timestamp event needs EVENT_INDEX 5 (end of pipe)");
                break;
        case EVENT_CS_DONE:
                if (m->event_index != EVENT_INDEX_SHADER_DONE)
                        return bad(ret_reason, "RELEASE_MEM: CS_DONE needs EVENT_INDEX 6 (shader done)");
                break;
        default:
                return bad(ret_reason, "RELEASE_MEM: EVENT_TYPE is not an end-of-pipe event a compute queue has "
                                       "(CACHE_FLUSH_TS, CACHE_FLUSH_AND_INV_TS, BOTTOM_OF_PIPE_TS, CS_DONE)");
        }
        if (m->int_sel == 7)
                return bad(ret_reason, "RELEASE_MEM: INT_SEL 7 is reserved");
        if (m->data_sel > 5)
                return bad(ret_reason, "RELEASE_MEM: DATA_SEL 6 and 7 are reserved");
        /* nvd.h: "1 - interrupt only (DATA_SEL = 0)". */
        if (m->int_sel == SIM_RELEASE_MEM_INT_ONLY && m->data_sel != SIM_RELEASE_MEM_DATA_NONE)
                return bad(ret_reason, "RELEASE_MEM: INT_SEL 1 (interrupt only) needs DATA_SEL 0");
        if (m->data_sel == SIM_RELEASE_MEM_DATA_32 && m->addr % 4)
                return bad(ret_reason, "RELEASE_MEM: address for 32-bit data not dword aligned");
        if ((m->data_sel == SIM_RELEASE_MEM_DATA_64 || m->data_sel == SIM_RELEASE_MEM_DATA_GPU_CLOCK || m->data_sel == 4) &&
            m->addr % 8)
                return bad(ret_reason, "RELEASE_MEM: address for 64-bit data not 8-byte aligned");
        return 0;
}

/* ACQUIRE_MEM, gfx10, 8 dwords (nvd.h PACKET3_ACQUIRE_MEM_GCR_CNTL_*, Mesa radv
 * si_cs_emit_cache_flush, gfx_v10_0_emit_mem_sync): DW1 CP_COHER_CNTL, DW2
 * COHER_SIZE, DW3 COHER_SIZE_HI [7:0], DW4 COHER_BASE, DW5 COHER_BASE_HI
 * [23:0], DW6 POLL_INTERVAL [15:0], DW7 GCR_CNTL [18:0]. The kernel and radv
 * write 0xffffff to the 8-bit COHER_SIZE_HI for "everything", so its upper
 * bits are ignored rather than refused. */
static int decode_acquire_mem(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        if (dw[5] & ~MASK(23, 0))
                return bad(ret_reason, "ACQUIRE_MEM: COHER_BASE_HI has bits above [23:0]");
        if (dw[6] & ~MASK(15, 0))
                return bad(ret_reason, "ACQUIRE_MEM: POLL_INTERVAL has bits above [15:0]");
        if (dw[7] & ~MASK(18, 0))
                return bad(ret_reason, "ACQUIRE_MEM: GCR_CNTL has bits above [18:0]");
        p->acquire_mem.coher_cntl = dw[1];
        p->acquire_mem.coher_size = addr64(dw[2], BITS(dw[3], 7, 0));
        p->acquire_mem.coher_base = addr64(dw[4], dw[5]);
        p->acquire_mem.poll_interval = BITS(dw[6], 15, 0);
        p->acquire_mem.gcr_cntl = dw[7];
        return 0;
}

/* WAIT_REG_MEM, 7 dwords (nvd.h WAIT_REG_MEM_*, gfx_v10_0_wait_reg_mem): DW1
 * FUNCTION [2:0] (7 reserved), MEM_SPACE [5:4] (0 register, 1 memory), OPERATION
 * [7:6] (0 wait, 1 write-wait-write register pair, 3 preemptable memory wait),
 * ENGINE [9:8], CACHE_POLICY [26:25]; DW2/3 poll address (memory, dword
 * aligned: "BUG_ON(addr0 & 0x3)") or registers; DW4 reference; DW5 mask; DW6
 * POLL_INTERVAL [15:0], OPTIMIZE_ACE_OFFLOAD_MODE 31. */
static int decode_wait_reg_mem(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        typeof(p->wait_reg_mem) *w = &p->wait_reg_mem;

        if (dw[1] & ~(MASK(2, 0) | MASK(9, 4) | MASK(26, 25)))
                return bad(ret_reason, "WAIT_REG_MEM: reserved bits set in DW1");
        if (dw[6] & ~(MASK(15, 0) | BIT(31)))
                return bad(ret_reason, "WAIT_REG_MEM: reserved bits set in DW6");
        w->function = BITS(dw[1], 2, 0);
        w->mem_space = BITS(dw[1], 5, 4);
        w->operation = BITS(dw[1], 7, 6);
        w->engine = BITS(dw[1], 9, 8);
        w->cache_policy = BITS(dw[1], 26, 25);
        w->addr = addr64(dw[2], dw[3]);
        w->reg1 = dw[3];
        w->ref = dw[4];
        w->mask = dw[5];
        w->poll_interval = BITS(dw[6], 15, 0);
        if (w->function == 7)
                return bad(ret_reason, "WAIT_REG_MEM: FUNCTION 7 is reserved");
        if (w->mem_space > 1)
                return bad(ret_reason, "WAIT_REG_MEM: MEM_SPACE must be 0 (register) or 1 (memory)");
        if (w->operation == 2)
                return bad(ret_reason, "WAIT_REG_MEM: OPERATION 2 is reserved");
        if (w->mem_space == 1 && w->operation == 1)
                return bad(ret_reason, "WAIT_REG_MEM: OPERATION 1 (write-wait-write) is a register operation");
        if (w->mem_space == 0 && w->operation == 3)
                return bad(ret_reason, "WAIT_REG_MEM: OPERATION 3 (preemptable wait) is a memory operation");
        if (w->engine > 1)
                return bad(ret_reason, "WAIT_REG_MEM: ENGINE must be 0 (ME) or 1 (PFP)");
        if (w->mem_space == 1 && w->addr % 4)
                return bad(ret_reason, "WAIT_REG_MEM: memory address not dword aligned");
        return 0;
}

/* WAIT_REG_MEM64 (0x93), 9 dwords (PAL gfx9_plus_merged_f32_mec_pm4_packets.h
 * PM4_MEC_WAIT_REG_MEM64; kfd-facts §2.1 opcode table): DW1 FUNCTION [2:0],
 * MEM_SPACE [5:4], OPERATION [7:6], MES_INTR_PIPE [23:22], MES_ACTION 24,
 * CACHE_POLICY [26:25] (no ENGINE field: a MEC packet); DW2 MEM_POLL_ADDR_LO
 * [31:3] (qword aligned: bits [2:0] reserved); DW3 address high; DW4/5
 * reference lo/hi; DW6/7 mask lo/hi; DW8 POLL_INTERVAL [15:0],
 * OPTIMIZE_ACE_OFFLOAD_MODE 31. Register polls of 64 bits and the MES
 * fields have no use on a user compute queue and are refused. */
static int decode_wait_reg_mem64(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        typeof(p->wait_reg_mem64) *w = &p->wait_reg_mem64;

        if (dw[1] & ~(MASK(2, 0) | MASK(7, 4) | MASK(24, 22) | MASK(26, 25)))
                return bad(ret_reason, "WAIT_REG_MEM64: reserved bits set in DW1");
        if (dw[1] & MASK(24, 22))
                return bad(ret_reason, "WAIT_REG_MEM64: MES_INTR_PIPE/MES_ACTION are for the MES, not a user queue");
        if (dw[8] & ~(MASK(15, 0) | BIT(31)))
                return bad(ret_reason, "WAIT_REG_MEM64: reserved bits set in DW8");
        w->function = BITS(dw[1], 2, 0);
        w->mem_space = BITS(dw[1], 5, 4);
        w->operation = BITS(dw[1], 7, 6);
        w->cache_policy = BITS(dw[1], 26, 25);
        w->addr = addr64(dw[2], dw[3]);
        w->ref = addr64(dw[4], dw[5]);
        w->mask = addr64(dw[6], dw[7]);
        w->poll_interval = BITS(dw[8], 15, 0);
        if (w->function == 7)
                return bad(ret_reason, "WAIT_REG_MEM64: FUNCTION 7 is reserved");
        if (w->mem_space != 1)
                return bad(ret_reason, "WAIT_REG_MEM64: MEM_SPACE must be 1 (memory); 64-bit register polls are not modelled");
        if (w->operation != 0 && w->operation != 3)
                return bad(ret_reason, "WAIT_REG_MEM64: OPERATION must be 0 (wait) or 3 (preemptable wait) on memory");
        if (w->addr % 8)
                return bad(ret_reason, "WAIT_REG_MEM64: poll address not qword aligned");
        return 0;
}

/* ATOMIC_MEM (0x1E), 9 dwords (PM4_MEC_ATOMIC_MEM in ROCr's and PAL's PM4
 * headers; nvd.h PACKET3_ATOMIC_MEM): DW1 ATOMIC [6:0] (a TC_OP code),
 * COMMAND [11:8] (0 single pass, 1 loop until compare satisfied, 2 wait for
 * write confirmation, 3 send and continue), CACHE_POLICY [26:25] (0 LRU,
 * 1 stream, 2 NOA, 3 bypass); DW2/3 ADDR; DW4/5 SRC_DATA; DW6/7 CMP_DATA;
 * DW8 LOOP_INTERVAL [12:0]. The address must be aligned to the operand (PAL
 * CmdUtil::BuildAtomicMem asserts it); COMMAND 1 only means something for a
 * compare-swap. */
static int decode_atomic_mem(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        typeof(p->atomic_mem) *a = &p->atomic_mem;
        unsigned width;

        if (dw[1] & ~(MASK(6, 0) | MASK(11, 8) | MASK(26, 25)))
                return bad(ret_reason, "ATOMIC_MEM: reserved bits set in DW1");
        if (dw[8] & ~MASK(12, 0))
                return bad(ret_reason, "ATOMIC_MEM: reserved bits set in DW8");
        a->op = BITS(dw[1], 6, 0);
        a->command = BITS(dw[1], 11, 8);
        a->cache_policy = BITS(dw[1], 26, 25);
        a->addr = addr64(dw[2], dw[3]);
        a->src = addr64(dw[4], dw[5]);
        a->cmp = addr64(dw[6], dw[7]);
        a->loop_interval = BITS(dw[8], 12, 0);
        width = sim_tc_atomic_width(a->op);
        if (!width)
                return bad(ret_reason, "ATOMIC_MEM: ATOMIC is not an integer memory atomic (float, cache or reserved TC_OP)");
        if (a->command > SIM_ATOMIC_MEM_SEND_AND_CONTINUE)
                return bad(ret_reason, "ATOMIC_MEM: COMMAND above 3 is not defined");
        if (a->command == SIM_ATOMIC_MEM_LOOP_UNTIL_COMPARE && !sim_tc_atomic_is_cmpswap(a->op))
                return bad(ret_reason, "ATOMIC_MEM: COMMAND 1 (loop until compare) on an op other than compare-swap");
        if (a->addr % width)
                return bad(ret_reason, "ATOMIC_MEM: address not aligned to the operand size");
        return 0;
}

/* EVENT_WRITE: DW1 EVENT_TYPE [5:0], EVENT_INDEX [11:8] (nvd.h: "0 - any non-TS
 * event, 1 - ZPASS_DONE, PIXEL_PIPE_STAT_*, 2 - SAMPLE_PIPELINESTAT, 3 -
 * SAMPLE_STREAMOUTSTAT*, 4 - *S_PARTIAL_FLUSH"); COUNT 2 adds an address for
 * the sample events. Timestamp (end-of-pipe) events belong in RELEASE_MEM. */
static int decode_event_write(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        unsigned type = BITS(dw[1], 5, 0), index = BITS(dw[1], 11, 8);

        if (dw[1] & ~(MASK(5, 0) | MASK(11, 8)))
                return bad(ret_reason, "EVENT_WRITE: reserved bits set in DW1");
        p->event_write.event_type = type;
        p->event_write.event_index = index;
        if (index > 4)
                return bad(ret_reason, "EVENT_WRITE: EVENT_INDEX above 4 (end-of-pipe and shader-done events go in RELEASE_MEM)");
        if ((index == 1 || index == 2 || index == 3) != (p->count == 2))
                return bad(ret_reason, "EVENT_WRITE: COUNT 2 (with an address) is for sample events (EVENT_INDEX 1..3) only");
        if (type == EVENT_CS_PARTIAL_FLUSH && index != EVENT_INDEX_PARTIAL_FLUSH)
                return bad(ret_reason, "EVENT_WRITE: CS_PARTIAL_FLUSH needs EVENT_INDEX 4");
        if (index == EVENT_INDEX_PARTIAL_FLUSH && type != EVENT_CS_PARTIAL_FLUSH && type != 0x0F && type != 0x10)
                return bad(ret_reason, "EVENT_WRITE: EVENT_INDEX 4 is for the *S_PARTIAL_FLUSH events");
        if (index == EVENT_INDEX_OTHER &&
            (type == EVENT_CACHE_FLUSH_TS || type == EVENT_CACHE_FLUSH_AND_INV_TS || type == EVENT_BOTTOM_OF_PIPE_TS))
                return bad(ret_reason, "EVENT_WRITE: a timestamp event with EVENT_INDEX 0 (\"any non-TS event\")");
        if (p->count == 2 && dw[2] % 8)
                return bad(ret_reason, "EVENT_WRITE: sample address not 8-byte aligned");
        return 0;
}

/* INDIRECT_BUFFER, 4 dwords (nvd.h INDIRECT_BUFFER_*, kfd-facts §2.2,
 * gfx_v10_0_ring_emit_ib_compute "BUG_ON(ib->gpu_addr & 0x3)"): DW1 base low
 * (dword aligned), DW2 base high [15:0]; DW3 IB_SIZE [19:0] (dwords), CHAIN 20,
 * PRE_ENB 21, VALID 23, VMID [27:24], CACHE_POLICY [29:28], PRE_RESUME 30, PRIV 31. */
static int decode_ib(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        if (dw[1] & 3)
                return bad(ret_reason, "INDIRECT_BUFFER: IB base not dword aligned");
        if (dw[2] & ~MASK(15, 0))
                return bad(ret_reason, "INDIRECT_BUFFER: IB base high has bits above [15:0] (48-bit VA)");
        if (dw[3] & BIT(22))
                return bad(ret_reason, "INDIRECT_BUFFER: reserved bit 22 set");
        if (BITS(dw[3], 29, 28) == 3)
                return bad(ret_reason, "INDIRECT_BUFFER: CACHE_POLICY 3 is reserved");
        p->ib.addr = addr64(dw[1], dw[2]);
        p->ib.size_dw = BITS(dw[3], 19, 0);
        p->ib.chain = BITS(dw[3], 20, 20);
        p->ib.valid = BITS(dw[3], 23, 23);
        p->ib.vmid = BITS(dw[3], 27, 24);
        p->ib.cache_policy = BITS(dw[3], 29, 28);
        p->ib.priv = BITS(dw[3], 31, 31);
        if (dw[3] & BIT(30))
                return bad(ret_reason, "INDIRECT_BUFFER: PRE_RESUME (resume after preemption) set");
        if (!p->ib.valid)
                return bad(ret_reason, "INDIRECT_BUFFER: VALID (bit 23) clear");
        if (p->ib.size_dw == 0)
                return bad(ret_reason, "INDIRECT_BUFFER: IB_SIZE 0");
        return 0;
}

/* COPY_DATA, 6 dwords (Mesa sid.h COPY_DATA_*, kfd-facts §2.2): DW1 SRC_SEL
 * [3:0], DST_SEL [11:8], SRC_CACHE_POLICY [14:13], COUNT_SEL 16 (64-bit),
 * WR_CONFIRM 20, DST_CACHE_POLICY [26:25], ENGINE_SEL [31:30]; DW2/3 source
 * (address, register or immediate); DW4/5 destination. */
static int decode_copy_data(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        typeof(p->copy_data) *c = &p->copy_data;
        unsigned align;

        if (dw[1] & ~(MASK(3, 0) | MASK(11, 8) | MASK(14, 13) | BIT(16) | BIT(20) | MASK(26, 25) | MASK(31, 30)))
                return bad(ret_reason, "COPY_DATA: reserved control bits set");
        c->src_sel = BITS(dw[1], 3, 0);
        c->dst_sel = BITS(dw[1], 11, 8);
        c->count_64 = BITS(dw[1], 16, 16);
        c->wr_confirm = BITS(dw[1], 20, 20);
        c->src = addr64(dw[2], dw[3]);
        c->dst = addr64(dw[4], dw[5]);
        if (c->src_sel > 10)
                return bad(ret_reason, "COPY_DATA: SRC_SEL above 10 is not defined");
        if (c->dst_sel > 6)
                return bad(ret_reason, "COPY_DATA: DST_SEL above 6 is not defined");
        if (BITS(dw[1], 31, 30) == 3)
                return bad(ret_reason, "COPY_DATA: ENGINE_SEL 3 is reserved");
        align = c->count_64 ? 8 : 4;
        if ((c->src_sel == 1 || c->src_sel == SIM_COPY_DATA_SRC_MEM) && c->src % align)
                return bad(ret_reason, "COPY_DATA: source address not aligned to the data size");
        if ((c->dst_sel == 1 || c->dst_sel == SIM_COPY_DATA_DST_TC_L2 || c->dst_sel == SIM_COPY_DATA_DST_MEM) &&
            c->dst % align)
                return bad(ret_reason, "COPY_DATA: destination address not aligned to the data size");
        return 0;
}

/* DMA_DATA, 7 dwords (nvd.h PACKET3_DMA_DATA_*): DW1 ENGINE 0, SRC_CACHE_POLICY
 * [14:13], DST_SEL [21:20] (0 address, 1 GDS, 3 address via L2), DST_CACHE_POLICY
 * [26:25], SRC_SEL [30:29] (0 address, 1 GDS, 2 DATA, 3 address via L2),
 * CP_SYNC 31; DW2/3 source or DATA; DW4/5 destination; DW6 BYTE_COUNT [25:0],
 * SAS 26, DAS 27, SAIC 28, DAIC 29, RAW_WAIT 30, DISABLE_WR_CONFIRM 31. */
static int decode_dma_data(const uint32_t *dw, SimPm4Packet *p, const char **ret_reason) {
        typeof(p->dma_data) *d = &p->dma_data;

        if (dw[1] & ~(BIT(0) | MASK(14, 13) | MASK(21, 20) | MASK(26, 25) | MASK(31, 29)))
                return bad(ret_reason, "DMA_DATA: reserved control bits set");
        d->dst_sel = BITS(dw[1], 21, 20);
        d->src_sel = BITS(dw[1], 30, 29);
        d->cp_sync = BITS(dw[1], 31, 31);
        d->src = addr64(dw[2], dw[3]);
        d->dst = addr64(dw[4], dw[5]);
        d->byte_count = BITS(dw[6], 25, 0);
        d->raw_wait = BITS(dw[6], 30, 30);
        d->disable_wr_confirm = BITS(dw[6], 31, 31);
        if (d->dst_sel == 2)
                return bad(ret_reason, "DMA_DATA: DST_SEL 2 is not defined");
        if (BITS(dw[1], 0, 0))
                return bad(ret_reason, "DMA_DATA: ENGINE 1 (PFP) does not exist on a compute queue");
        if (dw[6] & (BIT(26) | BIT(27)))
                return bad(ret_reason, "DMA_DATA: SAS/DAS (register address space) are not modelled");
        if (dw[6] & (BIT(28) | BIT(29)))
                return bad(ret_reason, "DMA_DATA: SAIC/DAIC (no address increment) are not modelled");
        if (d->byte_count == 0)
                return bad(ret_reason, "DMA_DATA: BYTE_COUNT 0");
        if (d->src_sel == 2 && (d->dst % 4 || d->byte_count % 4))
                return bad(ret_reason, "DMA_DATA: a DATA fill needs a dword-aligned destination and a multiple of 4 bytes");
        return 0;
}

int sim_pm4_decode(const uint32_t *dw, size_t avail_dwords, SimPm4Packet *ret, const char **ret_reason) {
        SimPm4Packet p = {};
        unsigned type;
        int r;

        if (ret_reason)
                *ret_reason = NULL;
        if (avail_dwords < 1)
                return -EAGAIN;

        type = BITS(dw[0], 31, 30);
        if (type != 3)
                return bad(ret_reason, type == 2 ? "type-2 (filler) packet: a gfx10 compute queue takes type-3 packets only"
                                                 : "type-0/1 packet: a gfx10 compute queue takes type-3 packets only");
        p.count = BITS(dw[0], 29, 16);
        p.opcode = BITS(dw[0], 15, 8);
        p.shader_type = BITS(dw[0], 1, 1);
        p.predicate = BITS(dw[0], 0, 0);
        if (dw[0] & HEADER_RESERVED)
                return bad(ret_reason, "PM4 header: reserved bits [7:3] set");
        r = packet_length(p.opcode, p.count, &p.n_dwords, ret_reason);
        if (r < 0)
                return r;
        if (avail_dwords < p.n_dwords) {
                ret->n_dwords = p.n_dwords;
                return -EAGAIN;
        }

        switch (p.opcode) {
        case SIM_PKT3_NOP:
                r = 0;
                break;
        case SIM_PKT3_SET_SH_REG:
                r = decode_set_reg(dw, &p, SIM_SH_REG_START, SIM_SH_REG_END, ret_reason);
                break;
        case SIM_PKT3_SET_UCONFIG_REG:
                r = decode_set_reg(dw, &p, SIM_UCONFIG_REG_START, SIM_UCONFIG_REG_END, ret_reason);
                break;
        case SIM_PKT3_WRITE_DATA:
                r = decode_write_data(dw, &p, ret_reason);
                break;
        case SIM_PKT3_RELEASE_MEM:
                r = decode_release_mem(dw, &p, ret_reason);
                break;
        case SIM_PKT3_ACQUIRE_MEM:
                r = decode_acquire_mem(dw, &p, ret_reason);
                break;
        case SIM_PKT3_WAIT_REG_MEM:
                r = decode_wait_reg_mem(dw, &p, ret_reason);
                break;
        case SIM_PKT3_WAIT_REG_MEM64:
                r = decode_wait_reg_mem64(dw, &p, ret_reason);
                break;
        case SIM_PKT3_ATOMIC_MEM:
                r = decode_atomic_mem(dw, &p, ret_reason);
                break;
        case SIM_PKT3_EVENT_WRITE:
                r = decode_event_write(dw, &p, ret_reason);
                break;
        case SIM_PKT3_DISPATCH_DIRECT:
                p.dispatch.dim[0] = dw[1];
                p.dispatch.dim[1] = dw[2];
                p.dispatch.dim[2] = dw[3];
                p.dispatch.initiator = dw[4];
                r = 0;
                break;
        case SIM_PKT3_INDIRECT_BUFFER:
                r = decode_ib(dw, &p, ret_reason);
                break;
        case SIM_PKT3_COPY_DATA:
                r = decode_copy_data(dw, &p, ret_reason);
                break;
        case SIM_PKT3_DMA_DATA:
                r = decode_dma_data(dw, &p, ret_reason);
                break;
        default:
                r = bad(ret_reason, "unknown PM4 opcode");
        }
        if (r < 0)
                return r;
        *ret = p;
        return 0;
}
