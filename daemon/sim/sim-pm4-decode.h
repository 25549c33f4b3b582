/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU's PM4 decoder: a pure function from ring (or indirect
 * buffer) dwords to one decoded type-3 packet, written from the documented
 * gfx10 layouts (Linux nvd.h and kfd_pm4_headers_ai.h, Mesa sid.h, as
 * tabulated in kfd-facts §2). It owns nothing and touches no memory but its
 * arguments; the CP engine (sim-cp.c) executes what it returns, and
 * packet-builder tests elsewhere in the tree may call it to check their
 * encoders. Names carry a SIM_ prefix so that this header can sit next to
 * the daemon's own PM4 builder header in one test.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Type-3 opcodes (nvd.h "Packet 3 types"). */
#define SIM_PKT3_NOP 0x10
#define SIM_PKT3_DISPATCH_DIRECT 0x15
#define SIM_PKT3_ATOMIC_MEM 0x1E
#define SIM_PKT3_WRITE_DATA 0x37
#define SIM_PKT3_WAIT_REG_MEM 0x3C
#define SIM_PKT3_INDIRECT_BUFFER 0x3F
#define SIM_PKT3_COPY_DATA 0x40
#define SIM_PKT3_EVENT_WRITE 0x46
#define SIM_PKT3_RELEASE_MEM 0x49
#define SIM_PKT3_DMA_DATA 0x50
#define SIM_PKT3_ACQUIRE_MEM 0x58
#define SIM_PKT3_SET_SH_REG 0x76
#define SIM_PKT3_SET_UCONFIG_REG 0x79
#define SIM_PKT3_WAIT_REG_MEM64 0x93

/* ATOMIC_MEM COMMAND [11:8] (PM4_MEC_ATOMIC_MEM MEC_ATOMIC_MEM_command_enum). */
#define SIM_ATOMIC_MEM_SINGLE_PASS 0
#define SIM_ATOMIC_MEM_LOOP_UNTIL_COMPARE 1
#define SIM_ATOMIC_MEM_WAIT_FOR_WRITE_CONFIRM 2
#define SIM_ATOMIC_MEM_SEND_AND_CONTINUE 3

/* Register windows, dword offsets, end exclusive (nvd.h PACKET3_SET_*_REG_START/END). */
#define SIM_SH_REG_START 0x2C00u
#define SIM_SH_REG_END 0x3000u
#define SIM_UCONFIG_REG_START 0xC000u
#define SIM_UCONFIG_REG_END 0xC400u

/* WRITE_DATA DST_SEL [11:8] (nvd.h). */
#define SIM_WRITE_DATA_DST_REG 0
#define SIM_WRITE_DATA_DST_MEM_GRBM 1
#define SIM_WRITE_DATA_DST_TC_L2 2
#define SIM_WRITE_DATA_DST_GDS 3
#define SIM_WRITE_DATA_DST_MEM 5

/* RELEASE_MEM (kfd_pm4_headers_ai.h enum mec_release_mem_*). */
#define SIM_RELEASE_MEM_DATA_NONE 0
#define SIM_RELEASE_MEM_DATA_32 1
#define SIM_RELEASE_MEM_DATA_64 2
#define SIM_RELEASE_MEM_DATA_GPU_CLOCK 3
#define SIM_RELEASE_MEM_INT_NONE 0
#define SIM_RELEASE_MEM_INT_ONLY 1
#define SIM_RELEASE_MEM_INT_AFTER_WRITE 2
#define SIM_RELEASE_MEM_DATA_AFTER_WRITE 3

/* COPY_DATA SRC_SEL [3:0] / DST_SEL [11:8] (kfd-facts §2.2). */
#define SIM_COPY_DATA_SRC_MEM 2
#define SIM_COPY_DATA_SRC_IMM 5
#define SIM_COPY_DATA_SRC_GPU_CLOCK 9
#define SIM_COPY_DATA_DST_TC_L2 2
#define SIM_COPY_DATA_DST_MEM 5

typedef struct SimPm4Packet {
        unsigned opcode;
        unsigned count;           /* header COUNT [29:16] */
        bool shader_type;         /* header bit 1 (PACKET3_COMPUTE) */
        bool predicate;           /* header bit 0 */
        size_t n_dwords;          /* length of the whole packet, header included */
        union {
                struct { uint32_t reg; uint32_t n; const uint32_t *values; } set_reg; /* absolute dword register */
                struct {
                        unsigned dst_sel, cache_policy, engine_sel;
                        bool one_addr, wr_confirm;
                        uint64_t addr;    /* memory address, or register offset for DST_SEL 0 */
                        uint32_t n;
                        const uint32_t *data;
                } write_data;
                struct {
                        unsigned event_type, event_index, cache_policy;
                        uint32_t gcr;     /* DW1 [22:12] */
                        bool execute;
                        unsigned dst_sel, int_sel, data_sel;
                        uint64_t addr;
                        uint64_t data;    /* DATA_HI:DATA_LO */
                        uint32_t int_ctxid;
                } release_mem;
                struct {
                        uint32_t coher_cntl;
                        uint64_t coher_size;  /* COHER_SIZE_HI[7:0]:COHER_SIZE */
                        uint64_t coher_base;  /* COHER_BASE_HI[23:0]:COHER_BASE */
                        unsigned poll_interval;
                        uint32_t gcr_cntl;    /* [18:0] */
                } acquire_mem;
                struct {
                        unsigned function, mem_space, operation, engine, cache_policy;
                        uint64_t addr;        /* memory: poll address; register: DW2 = register offset */
                        uint32_t reg1;        /* register space: DW3, the second register of a write-wait-write */
                        uint32_t ref, mask;
                        unsigned poll_interval;
                } wait_reg_mem;
                struct {
                        unsigned function, mem_space, operation, cache_policy;
                        uint64_t addr;        /* qword aligned */
                        uint64_t ref, mask;
                        unsigned poll_interval;
                } wait_reg_mem64;
                struct {
                        unsigned op;          /* TC_OP code (sim-atomic.h) */
                        unsigned command, cache_policy;
                        uint64_t addr, src, cmp;
                        unsigned loop_interval;
                } atomic_mem;
                struct { unsigned event_type, event_index; } event_write;
                struct { uint32_t dim[3]; uint32_t initiator; } dispatch;
                struct {
                        uint64_t addr;
                        uint32_t size_dw;
                        bool chain, valid, priv;
                        unsigned vmid, cache_policy;
                } ib;
                struct {
                        unsigned src_sel, dst_sel;
                        bool count_64, wr_confirm;
                        uint64_t src;         /* address or immediate (low, high) */
                        uint64_t dst;
                } copy_data;
                struct {
                        unsigned src_sel, dst_sel;
                        bool cp_sync, raw_wait, disable_wr_confirm;
                        uint64_t src;         /* address, or DATA in the low 32 bits for SRC_SEL 2 */
                        uint64_t dst;
                        uint32_t byte_count;
                } dma_data;
        };
} SimPm4Packet;

/*
 * sim_pm4_decode() - decode the packet that starts at dw[0].
 * @dw: the packet dwords in order (the caller unwraps the ring).
 * @avail_dwords: how many dwords of @dw are valid.
 * @ret: the decoded packet on success.
 * @ret_reason: on -EBADMSG, a static string naming what is wrong (never NULL then).
 *
 * Returns 0; -EAGAIN if avail_dwords is shorter than the packet (the
 * header's COUNT gives its length, so ret->n_dwords is filled in even then);
 * -EBADMSG for a type-0/1/2 header, an unknown opcode, a COUNT that does not
 * fit the opcode, reserved bits, a register outside its window, or a
 * misaligned address.
 */
int sim_pm4_decode(const uint32_t *dw, size_t avail_dwords, SimPm4Packet *ret, const char **ret_reason);

/* The packet name for an opcode ("RELEASE_MEM"), or NULL for one the decoder does not know. */
const char *sim_pm4_opcode_name(unsigned opcode);
