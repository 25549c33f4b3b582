/* SPDX-License-Identifier: MIT */
/*
 * PM4 type-3 packet builders for KFD compute (PM4) queues on gfx10.3 (RDNA2),
 * and the COMPUTE_* register offsets a dispatch programs. Each
 * pm4_emit_<packet>() writes one packet at a caller buffer and returns the
 * number of dwords written; gpu-queue.c owns the ring. Layouts: the kernel's
 * nvd.h (PACKET3_*), gfx_v10_0.c emitters and Mesa's sid.h, restated with
 * sources in kfd-facts §2; each builder cites its table.
 *
 * Header (kfd-facts §2.1; nvd.h PACKET3, CP_PACKET_GET_COUNT):
 *   bits [31:30] = 3 (type 3), [29:16] COUNT = body dwords - 1, [15:8]
 *   opcode, bit 1 shader type, bit 0 predicate. KFD compute rings take
 *   headers without the shader-type bit (the kernel's own compute-ring
 *   emitters and tinygrad leave it 0), so these builders leave it 0 too.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Opcodes (nvd.h PACKET3_*; kfd-facts §2.1 table). */
#define PKT3_NOP 0x10
#define PKT3_DISPATCH_DIRECT 0x15
#define PKT3_ATOMIC_MEM 0x1E
#define PKT3_WRITE_DATA 0x37
#define PKT3_WAIT_REG_MEM 0x3C
#define PKT3_INDIRECT_BUFFER 0x3F
#define PKT3_EVENT_WRITE 0x46
#define PKT3_RELEASE_MEM 0x49
#define PKT3_ACQUIRE_MEM 0x58
#define PKT3_SET_SH_REG 0x76
#define PKT3_WAIT_REG_MEM64 0x93

#define PKT3_HDR(op, count) ((3u << 30) | (((uint32_t) (count) & 0x3FFFu) << 16) | (((uint32_t) (op) & 0xFFu) << 8))
/* The header-only NOP: COUNT 0x3FFF means "no body" (Mesa PKT3_NOP_PAD). */
#define PKT3_NOP_PAD 0xFFFF1000u
/* The kernel caps one NOP at COUNT 0x3FFE (amdgpu_gfx10_ring_insert_nop). */
#define PKT3_NOP_MAX_COUNT 0x3FFEu

/* SET_SH_REG window (dword register addresses 0x2C00..0x3000). */
#define PM4_SH_REG_BASE 0x2C00u
#define PM4_SH_REG_END 0x3000u

/* COMPUTE_* registers, absolute dword addresses (gc_10_3_0 / gc_11_0_0
 * headers: mmCOMPUTE_PGM_LO = 0x1BAC + GC base 0x1260 = 0x2E0C; kfd-facts §2.3). */
#define mmCOMPUTE_DISPATCH_INITIATOR 0x2E00u
#define mmCOMPUTE_START_X 0x2E04u
#define mmCOMPUTE_NUM_THREAD_X 0x2E07u
#define mmCOMPUTE_PGM_LO 0x2E0Cu
#define mmCOMPUTE_DISPATCH_SCRATCH_BASE_LO 0x2E10u /* gfx11+: scratch base >> 8 */
#define mmCOMPUTE_PGM_RSRC1 0x2E12u
#define mmCOMPUTE_RESOURCE_LIMITS 0x2E15u
#define mmCOMPUTE_TMPRING_SIZE 0x2E18u
#define mmCOMPUTE_RESTART_X 0x2E1Bu
#define mmCOMPUTE_PGM_RSRC3 0x2E28u
#define mmCOMPUTE_USER_DATA_0 0x2E40u
#define PM4_MAX_USER_DATA 16u

/* COMPUTE_DISPATCH_INITIATOR bits (kfd-facts §2.3). */
#define COMPUTE_DISPATCH_INITIATOR_COMPUTE_SHADER_EN (1u << 0)
#define COMPUTE_DISPATCH_INITIATOR_PARTIAL_TG_EN (1u << 1)
#define COMPUTE_DISPATCH_INITIATOR_FORCE_START_AT_000 (1u << 2)
#define COMPUTE_DISPATCH_INITIATOR_CS_W32_EN (1u << 15)

/* COMPUTE_NUM_THREAD_X/Y/Z: NUM_THREAD_FULL [15:0], NUM_THREAD_PARTIAL
 * [31:16] (Mesa sid.h S_00B81C_NUM_THREAD_*; radeonsi si_compute.c sets
 * PARTIAL to the full size when a dimension has no partial group). */
#define COMPUTE_NUM_THREAD(full, partial) (((uint32_t) (full) & 0xFFFFu) | ((uint32_t) (partial) & 0xFFFFu) << 16)

/* COMPUTE_PGM_RSRC2 LDS_SIZE [23:15] in 512-byte granules on gfx10 (kfd-facts §2.4). */
#define COMPUTE_PGM_RSRC2_LDS_SIZE_SHIFT 15
#define COMPUTE_PGM_RSRC2_LDS_SIZE_MASK (0x1FFu << 15)
#define PM4_LDS_GRANULE 512u

/* COMPUTE_TMPRING_SIZE on gfx10: WAVES [11:0], WAVESIZE [24:12] in units of
 * 256 dwords (1 KiB) per wave (kfd-facts §2.3, §2.5). */
#define COMPUTE_TMPRING_SIZE(waves, wavesize) (((uint32_t) (waves) & 0xFFFu) | ((uint32_t) (wavesize) & 0x1FFFu) << 12)
#define PM4_TMPRING_WAVES_MAX 0xFFFu
#define PM4_TMPRING_WAVESIZE_UNIT 1024u
/* gfx11: WAVESIZE [26:12] in 256-byte units, WAVES per shader engine
 * (kfd-facts §2.5; tinygrad AMDDevice._ensure_has_local_memory). */
#define COMPUTE_TMPRING_SIZE_GFX11(waves, wavesize) \
        (((uint32_t) (waves) & 0xFFFu) | ((uint32_t) (wavesize) & 0x7FFFu) << 12)
#define PM4_TMPRING_WAVESIZE_UNIT_GFX11 256u

/* COMPUTE_PGM_RSRC1.PRIV (bit 20): tinygrad sets it on gfx11 "to workaround
 * cwsr" (kfd-facts §5 #7). */
#define COMPUTE_PGM_RSRC1_PRIV (1u << 20)

/* EVENT_WRITE / RELEASE_MEM event types (VGT_EVENT_TYPE) and indexes. */
#define PM4_EVENT_CS_PARTIAL_FLUSH 0x07u
#define PM4_EVENT_CACHE_FLUSH_AND_INV_TS_EVENT 0x14u
#define PM4_EVENT_INDEX_CS_PARTIAL_FLUSH 4u
#define PM4_EVENT_INDEX_END_OF_PIPE 5u

/* RELEASE_MEM DW1 GCR bits (gfx10+, nvd.h PACKET3_RELEASE_MEM_GCR_*). */
#define RELEASE_MEM_GCR_GLM_WB (1u << 12)
#define RELEASE_MEM_GCR_GLM_INV (1u << 13)
#define RELEASE_MEM_GCR_GL2_WB (1u << 21)
#define RELEASE_MEM_GCR_SEQ (1u << 22)
#define RELEASE_MEM_CACHE_POLICY(x) (((uint32_t) (x) & 0x3u) << 25)

typedef enum Pm4DataSel {
        PM4_DATA_NONE = 0,
        PM4_DATA_32 = 1,
        PM4_DATA_64 = 2,
        PM4_DATA_TIMESTAMP = 3, /* the 64-bit GPU clock counter */
} Pm4DataSel;

typedef enum Pm4IntSel {
        PM4_INT_NONE = 0,
        PM4_INT_AFTER_WRITE_CONFIRM = 2,
} Pm4IntSel;

/* ACQUIRE_MEM GCR_CNTL bits (gfx10+, nvd.h PACKET3_ACQUIRE_MEM_GCR_CNTL_*;
 * kfd-facts §2.2). GLI_INV [1:0] = 1 invalidates the whole instruction cache
 * (Mesa sid.h V_586_GLI_ALL). The same GCR_CNTL layout is the SDMA GCR_REQ's
 * GCR_CONTROL (sdma.h). */
#define ACQUIRE_MEM_GCR_GLI_INV_ALL (1u << 0)
#define ACQUIRE_MEM_GCR_GLM_WB (1u << 4)
#define ACQUIRE_MEM_GCR_GLM_INV (1u << 5)
#define ACQUIRE_MEM_GCR_GLK_WB (1u << 6)
#define ACQUIRE_MEM_GCR_GLK_INV (1u << 7)
#define ACQUIRE_MEM_GCR_GLV_INV (1u << 8)
#define ACQUIRE_MEM_GCR_GL1_INV (1u << 9)
#define ACQUIRE_MEM_GCR_GL2_INV (1u << 14)
#define ACQUIRE_MEM_GCR_GL2_WB (1u << 15)

/* WAIT_REG_MEM functions (same codes as SDMA POLL_REGMEM). */
typedef enum Pm4WaitFunc {
        PM4_WAIT_ALWAYS = 0,
        PM4_WAIT_LT = 1,
        PM4_WAIT_LE = 2,
        PM4_WAIT_EQ = 3,
        PM4_WAIT_NE = 4,
        PM4_WAIT_GE = 5,
        PM4_WAIT_GT = 6,
} Pm4WaitFunc;

/* ATOMIC_MEM ATOMIC [6:0]: TC_OP codes (the TC_OP enum of AMD's gfx9/gfx10
 * chip headers, as ROCr's and PAL's PM4 headers list it). ROCr's own PM4
 * path decrements a completion signal with TC_OP_ATOMIC_ADD_RTN_64 and
 * SRC_DATA -1, cache policy bypass (the aqlprofile/ROCr BuildAtomicMem
 * callers: "BuildAtomicMem(signal_addr, TC_OP_ATOMIC_ADD_RTN_64, ...,
 * cache_policy__mec_atomic_mem__bypass, -1)"). */
#define PM4_TC_OP_ATOMIC_SWAP_RTN_64 0x27u
#define PM4_TC_OP_ATOMIC_CMPSWAP_RTN_64 0x28u
#define PM4_TC_OP_ATOMIC_ADD_RTN_64 0x2Fu
#define PM4_TC_OP_ATOMIC_SUB_RTN_64 0x30u
/* ATOMIC_MEM COMMAND [11:8] and CACHE_POLICY [26:25] (PM4_MEC_ATOMIC_MEM enums). */
typedef enum Pm4AtomicCommand {
        PM4_ATOMIC_SINGLE_PASS = 0,
        PM4_ATOMIC_LOOP_UNTIL_COMPARE = 1,
        PM4_ATOMIC_WAIT_FOR_WRITE_CONFIRM = 2,
        PM4_ATOMIC_SEND_AND_CONTINUE = 3,
} Pm4AtomicCommand;
#define PM4_ATOMIC_CACHE_POLICY_BYPASS 3u

/* Packet sizes in dwords (header included). */
#define PM4_RELEASE_MEM_DW 8
#define PM4_ACQUIRE_MEM_DW 8
#define PM4_WAIT_REG_MEM_DW 7
#define PM4_WAIT_REG_MEM64_DW 9
#define PM4_ATOMIC_MEM_DW 9
#define PM4_DISPATCH_DIRECT_DW 5
#define PM4_EVENT_WRITE_DW 2
#define PM4_INDIRECT_BUFFER_DW 4
#define PM4_SET_SH_REG_DW(n) (2 + (n))
#define PM4_WRITE_DATA_DW(n) (4 + (n))

/*
 * Every builder writes its packet at buf and returns its dword count.
 * Arguments the packet cannot encode (a register outside the SH window,
 * misaligned addresses, counts out of range) are programmer errors of
 * gpu-queue.c and are asserted; jobs are validated before emission.
 */
/* A NOP of ndw dwords in total (ndw >= 1): the one-dword header-only form for
 * 1, else COUNT = ndw - 2 with ndw - 1 ignored body dwords (zeroed). */
size_t pm4_emit_nop(uint32_t *buf, size_t ndw);
size_t pm4_emit_set_sh_reg(uint32_t *buf, uint32_t reg, const uint32_t *values, unsigned n);
size_t pm4_emit_dispatch_direct(uint32_t *buf, uint32_t x, uint32_t y, uint32_t z, uint32_t initiator);
size_t pm4_emit_event_write(uint32_t *buf, uint32_t event_type, uint32_t event_index);
size_t pm4_emit_acquire_mem(uint32_t *buf, uint32_t gcr_cntl);
size_t pm4_emit_release_mem(uint32_t *buf, uint32_t event_type, uint32_t event_index, uint32_t gcr,
                            Pm4DataSel data_sel, Pm4IntSel int_sel, uint64_t addr, uint64_t data,
                            uint32_t int_ctxid);
size_t pm4_emit_wait_reg_mem(uint32_t *buf, Pm4WaitFunc func, uint64_t addr, uint32_t ref, uint32_t mask,
                             uint32_t poll_interval);
/* A 64-bit memory wait: (qword at addr & mask) func ref (addr 8-byte aligned). */
size_t pm4_emit_wait_reg_mem64(uint32_t *buf, Pm4WaitFunc func, uint64_t addr, uint64_t ref, uint64_t mask,
                               uint32_t poll_interval);
/* A 64-bit TC_OP atomic on the qword at addr (8-byte aligned), cache policy
 * bypass; PM4_ATOMIC_LOOP_UNTIL_COMPARE only with compare-swap. */
size_t pm4_emit_atomic_mem(uint32_t *buf, unsigned op, Pm4AtomicCommand command, uint64_t addr, uint64_t src,
                           uint64_t cmp);
size_t pm4_emit_write_data(uint32_t *buf, uint64_t addr, const uint32_t *data, unsigned n);
size_t pm4_emit_indirect_buffer(uint32_t *buf, uint64_t addr, uint32_t ndw);
