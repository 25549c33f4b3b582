/* SPDX-License-Identifier: MIT */
/*
 * The RDNA2 (gfx1030, wave32 and wave64) instruction-set interpreter of the
 * simulated GPU.
 * The compute (CP) engine calls sim_isa_dispatch() once per DISPATCH_DIRECT with
 * the register state it programmed (COMPUTE_PGM_*, COMPUTE_USER_DATA_*,
 * COMPUTE_NUM_THREAD_*, the dispatch dimensions) and a callback that turns GPU
 * virtual addresses into host pointers. The interpreter owns nothing beyond
 * the call but an optional SimIsaPool of helper threads (one per simulated
 * device, made once): each thread taking part in a dispatch (the caller and
 * the helpers that join it) runs one workgroup at a time with wave and LDS
 * state of its own (waves of a workgroup round-robin, meeting at s_barrier),
 * claiming workgroups in their serial order; without a pool the caller runs
 * them all in that order. The call returns how the dispatch ended.
 *
 * What the threads share is global memory, through the translate callback
 * (which must be safe to call from several threads). Atomics on it are host
 * atomic operations (a lock orders the misaligned ones, which the hardware
 * does not allow), so they stay atomic across workgroups running at once, as
 * on the GPU; their order across workgroups is then the threads', as it is
 * the hardware's: a kernel whose result depends on it (a counter handing out
 * slots) gets one of the results the hardware could give, and every kernel
 * whose workgroups do not race gets the serial run's bytes. A failing
 * workgroup stops the dispatch: no later workgroup (in the serial order)
 * starts and those running are abandoned, earlier ones finish, and the
 * failure reported is the one of the lowest workgroup that failed, as in the
 * serial run. The instruction budget is the dispatch's, shared: it runs out
 * exactly when the wave-instructions of all threads reach it.
 *
 * Initial wave state, as the hardware sets it from the registers
 * (LLVM AMDGPUUsage "Initial Kernel Execution State", gfx10):
 *   s0..             COMPUTE_USER_DATA_0..RSRC2.USER_SGPR_COUNT-1, verbatim
 *   next SGPRs       workgroup ID X, Y, Z (each only if RSRC2 bit 7/8/9 is set),
 *                    then workgroup info (RSRC2 bit 10; bits [5:0] = number of
 *                    waves in the workgroup, as this model reports it),
 *                    then the private segment wave byte offset (RSRC2 bit 0,
 *                    SCRATCH_EN)
 *   v0, v1, v2       work-item ID x, y, z (v1 if TIDIG_COMP_CNT >= 1, v2 if 2)
 *   EXEC             the wave's live lanes (a trailing partial wave of a
 *                    workgroup has fewer), VCC = 0, SCC = 0, M0 undefined (0);
 *                    in wave64 EXEC and VCC are SGPR pairs
 *   MODE             FP_ROUND [3:0] and FP_DENORM [7:4] from RSRC1
 *                    FLOAT_ROUND_MODE [15:12] and FLOAT_DENORM_MODE [19:16]
 *   everything else  0, unlike the hardware: the other SGPRs and VGPRs, the
 *                    workgroup's LDS and the wave's own private memory (its
 *                    lanes x scratch_per_lane bytes at its wave byte offset);
 *                    nothing an earlier wave left (docs/simulator.md, "What a
 *                    wave starts with": the model's register files are shared
 *                    by every context's waves)
 *
 * What the dispatcher must put into the user SGPRs (kernel_code_properties
 * order: private segment buffer, dispatch ptr, queue ptr, kernarg ptr,
 * dispatch id, flat scratch init, private segment size):
 *   private segment buffer (4 SGPRs), the V# of the scratch backing, as ROCr
 *   builds it for gfx10 (AqlQueue::FillBufRsrcWord0..3_Gfx10) with the
 *   INDEX_STRIDE the CP would fill in:
 *     dword0 = scratch_va[31:0]
 *     dword1 = scratch_va[47:32] | SWIZZLE_ENABLE (bit 31), STRIDE 0
 *     dword2 = NUM_RECORDS, not 0 (ROCr: the backing's size)
 *     dword3 = SIM_ISA_SCRATCH_RSRC3(wave32): DST_SEL XYZW | FORMAT 32_UINT |
 *              INDEX_STRIDE = the wave size (2 << 21 for 32, 3 << 21 for 64) |
 *              ADD_TID_ENABLE | RESOURCE_LEVEL 1 | OOB_SELECT 2
 *   The model honours every field (sim-isa-vsharp.c): a word 3 without a
 *   FORMAT, RESOURCE_LEVEL or a fitting OOB_SELECT (tinygrad's 0x00C00000)
 *   leaves every scratch load 0 and drops every store, and an INDEX_STRIDE
 *   other than the wave size makes lanes share dwords.
 *   flat scratch init (2 SGPRs): scratch_va (low, high), the per-queue base
 *     the kernel adds its wave offset to before writing FLAT_SCRATCH.
 * The private segment wave byte offset this model hands to wave w of a
 * workgroup is (slot * wg_waves + w) * lanes * scratch_per_lane (lanes = 32 or
 * 64, wg_waves = ceil(wg_threads / lanes), scratch_per_lane rounded up to 4),
 * where slot numbers the threads running workgroups at once (0 for the
 * caller): as the hardware hands each wave a slot of the scratch ring, whose
 * size (COMPUTE_TMPRING_SIZE.WAVES, scratch_waves) bounds how many
 * workgroups run at once. One workgroup's worth of backing,
 * wg_waves * lanes * scratch_per_lane bytes, is enough for a serial run.
 * Buffer addressing with that V# (RDNA2 ISA §8.1.6, swizzled, element size
 * 4): lane l's byte o lands at base + soffset + (o / 4) * 4 * lanes + l * 4 +
 * o % 4. SCRATCH instructions and FLAT addresses in the private aperture use
 * the same layout from FLAT_SCRATCH (sim-isa-mem.c).
 *
 * Implemented (sim-isa-names.h has the exact list, named as llvm-objdump-15
 * prints them; docs/simulator.md lists the rest): SOP1/SOP2/SOPK/SOPC/SOPP
 * (32- and 64-bit lane-mask forms), SMEM loads, s_getreg/s_setreg of MODE and
 * s_getreg of SH_MEM_BASES, VOP1/VOP2/VOPC/VOP3 for 16-, 32- and 64-bit
 * integer and float operations (IEEE division via v_div_scale/fmas/fixup,
 * bit-exact; v_rcp/v_rsq/v_sqrt correctly rounded; v_trig_preop_f64), SDWA
 * and DPP16/DPP8 forms, VOP3P packed 16-bit math and v_fma_mix, the lane
 * permutes (v_permlane16/x16_b32, ds_permute/ds_bpermute_b32), GLOBAL, FLAT
 * (global, LDS aperture, private aperture) and SCRATCH loads/stores/atomics,
 * MUBUF loads/stores/atomics (the scratch path), DS loads/stores/atomics on
 * the workgroup's LDS, the _d16/_d16_hi loads and stores.
 *
 * Scalar loads go through SimIsaMemory.scalar_load (the scalar data cache)
 * unless their GLC bit is set, and s_dcache_inv invalidates that cache;
 * FLAT/GLOBAL loads of global memory go through the vector L0 and GL1
 * (SimIsaMemory.vcache, sim-isa-vcache.c), which buffer_gl0_inv,
 * buffer_gl1_inv and s_gl1_inv invalidate.
 * No-ops, as nothing they act on is modelled: s_icache_inv (decoded
 * instructions are kept for the dispatch, below), s_waitcnt* (every
 * access completes when issued), s_sendmsg (MSG_DEALLOC_VGPRS and friends),
 * s_inst_prefetch, s_clause, s_nop, s_setprio, s_sleep.
 * s_round_mode/s_denorm_mode set MODE; arithmetic always rounds to nearest
 * even (what clang's gfx1030 descriptors request), f32/f64 keep denormals and
 * f16 follows MODE.FP_DENORM [7:6]. s_memtime/s_memrealtime return the
 * number of wave-instructions the workgroup has executed so far, so results
 * stay deterministic, serial or parallel.
 *
 * Refused with -EILSEQ and the instruction's name and encoding, never run
 * wrongly: every opcode not in sim-isa-names.h (v_dot2_f32_f16, s_trap,
 * MIMG/MTBUF, ...), and unsupported forms of known ones: VOP3 op_sel on the
 * VOP3 forms of VOP1/VOP2/VOPC opcodes, gfx9 DPP controls and DPP on 64-bit
 * operands, GDS, LDS_DIRECT, the src_shared_base/src_private_base constants,
 * MUBUF with LDS or TFE, and a private access crossing a dword of the
 * swizzled segment.
 *
 * Other limits: code must not change during a dispatch (decoded instructions
 * are cached by pc); an LDS access outside lds_bytes is -EFAULT (the hardware
 * would drop it); MUBUF NUM_RECORDS range checking is not modelled; lanes of
 * a wave execute memory operations in lane order and waves take turns in
 * slices of 256 instructions, so a workgroup's results are deterministic.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Helper threads that run workgroups of dispatches besides their callers. */
/* Word 3 of the scratch V# as ROCr builds it for gfx10 (FillBufRsrcWord3_Gfx10:
 * DST_SEL X, Y, Z, W = 4, 5, 6, 7, FORMAT 20 = 32_UINT, ADD_TID_ENABLE,
 * RESOURCE_LEVEL 1, OOB_SELECT 2, TYPE 0) with INDEX_STRIDE the wave size
 * (2: 32, 3: 64), which the CP fills in on the AQL path. */
#define SIM_ISA_SCRATCH_RSRC3(wave32) (0x21814FACu | ((wave32) ? 2u : 3u) << 21)

typedef struct SimIsaPool SimIsaPool;

/* The vector L0 and GL1 caches of a GPU VM (sim-isa-vcache.c). */
typedef struct SimIsaVectorCaches {
        uint64_t owner;          /* the VM's id, unique for the process's life, >= 1 */
        const uint32_t *glv_gen; /* bumped (atomically) by each GLV_INV: every L0 line of the VM goes */
        const uint32_t *gl1_gen; /* bumped by each GL1_INV: every GL1 line goes */
} SimIsaVectorCaches;

typedef struct SimIsaMemory {
        void *userdata;
        /* Translate a GPU VA range to host memory; -EFAULT if any byte is unmapped. */
        int (*translate)(void *userdata, uint64_t va, uint64_t len, bool write, void **ret_host);
        /* Optional: the code dword at va (dword aligned), as the instruction
         * cache has it; 0 or -EFAULT. Without it code is read through
         * translate. Called when an instruction is decoded, not each time it
         * runs (decoded instructions are cached by pc for the dispatch). */
        int (*fetch)(void *userdata, uint64_t va, uint32_t *ret);
        /* Optional: the dword at va (dword aligned) for a scalar load
         * (SMEM without GLC), as the scalar data cache has it; 0 or -EFAULT.
         * Without it scalar loads read through translate. */
        int (*scalar_load)(void *userdata, uint64_t va, uint32_t *ret);
        /* Optional: s_dcache_inv, every line of that cache goes. */
        void (*scalar_invalidate)(void *userdata);
        /* Optional: the vector L0 and GL1 caches FLAT and GLOBAL loads read
         * through; NULL: they read translate's memory directly. */
        const SimIsaVectorCaches *vcache;
} SimIsaMemory;

typedef struct SimIsaDispatch {
        uint64_t entry_va;             /* COMPUTE_PGM_LO/HI << 8 */
        uint32_t rsrc1, rsrc2, rsrc3;  /* COMPUTE_PGM_RSRC1/2/3 as programmed */
        uint32_t user_sgpr[16];        /* COMPUTE_USER_DATA_0..15 */
        uint32_t grid[3];              /* workgroups in x, y, z (DISPATCH_DIRECT DIM_X/Y/Z) */
        uint32_t wg_size[3];           /* COMPUTE_NUM_THREAD_X/Y/Z NUM_THREAD_FULL */
        uint32_t partial[3];           /* work-items of the last workgroup in each dimension
                                        * (NUM_THREAD_PARTIAL with PARTIAL_TG_EN); 0 = full */
        uint32_t wg_id_base[3];        /* workgroup ID of the first workgroup (COMPUTE_START_X/Y/Z
                                        * unless FORCE_START_AT_000); IDs run base .. base+grid-1 */
        const int *cancel;             /* if set, polled between instruction slices (by every
                                        * thread of the dispatch): non-zero ends the dispatch
                                        * with -ECANCELED */
        SimIsaPool *pool;              /* helpers that may join; NULL = the caller alone */
        unsigned priority;             /* wave-launch priority, SIM_PIPE_PRIORITY_* (the HQD's
                                        * CP_HQD_PIPE_PRIORITY): with a pool, no workgroup of
                                        * this dispatch starts while one of higher priority
                                        * runs, and its threads wait for CUs after those of
                                        * higher dispatches (up to the age limit) */
        bool wave32;                   /* DISPATCH_INITIATOR.CS_W32_EN: 32 lanes, else 64 */
        uint64_t scratch_va;           /* base of the private segment backing, 0 if none */
        uint32_t scratch_per_lane;     /* bytes of private memory per work-item */
        uint32_t scratch_waves;        /* waves the scratch backing holds (COMPUTE_TMPRING_SIZE
                                        * .WAVES); fewer than two workgroups' worth (0 too)
                                        * keeps a dispatch with SCRATCH_EN on one thread */
        uint32_t lds_bytes;            /* RSRC2.LDS_SIZE granules * 512 (at most 65536) */
        uint32_t sh_mem_bases;         /* SH_MEM_BASES as the KFD programs it for the VMID:
                                        * PRIVATE_BASE [15:0] and SHARED_BASE [31:16], bits
                                        * 63:48 of the scratch and LDS apertures of flat
                                        * addresses (s_getreg HW_REG_SH_MEM_BASES) */
} SimIsaDispatch;

typedef struct SimIsaResult {
        int error;                  /* 0; -EFAULT (memory fault); -EILSEQ (unknown/unsupported
                                     * instruction); -ETIME (instruction budget exceeded);
                                     * -EINVAL (dispatch parameters the model cannot run);
                                     * -EDEADLK (waves of a workgroup can no longer progress);
                                     * -ECANCELED (*cancel was set); -ENOMEM */
        uint64_t fault_va;          /* -EFAULT: first faulting address */
        uint64_t fault_pc;          /* -EFAULT/-EILSEQ/-ETIME: pc of the instruction */
        uint32_t bad_encoding[2];   /* the instruction dwords for -EILSEQ */
        char message[160];          /* human-readable reason, e.g. "unsupported instruction
                                     * v_foo_bar (encoding 0x7e1234ab) at pc 0x…" */
        uint64_t lane_instructions; /* executed lane-instructions (active lanes summed) */
        uint64_t wave_instructions; /* executed wave-instructions */
} SimIsaResult;

/**
 * sim_isa_dispatch() - run one compute dispatch to completion.
 * @d: the dispatch registers.
 * @mem: VA translation for code, kernarg, global and scratch memory.
 * @max_wave_instructions: budget over the whole dispatch; 0 = unlimited.
 * @ret: filled in on every return (error, counters, message).
 *
 * Returns 0, or the negative errno also stored in @ret->error: -EFAULT (an
 * access outside the mapped memory, @ret->fault_va), -EILSEQ (an instruction
 * the interpreter does not implement), -ETIME (budget exceeded), -EINVAL
 * (a workgroup of 0 or more than 1024 work-items, a partial size
 * above the full one, LDS larger than 64 KiB), -EDEADLK, -ECANCELED (@d->cancel
 * became non-zero; checked at least every 256 wave-instructions), -ENOMEM.
 *
 * Partial workgroups: the last workgroup in dimension i (index grid[i]-1) has
 * partial[i] work-items in that dimension instead of wg_size[i] when
 * partial[i] is non-zero, as the hardware launches it with
 * COMPUTE_DISPATCH_INITIATOR.PARTIAL_TG_EN (Mesa radeonsi si_compute.c
 * si_emit_dispatch_packets). Its work-items are numbered densely over the
 * partial extents (x fastest), so every work-item ID stays below the size of
 * its own workgroup, and it has only the waves those work-items fill.
 * Memory writes done before a failure stay done, as on the hardware.
 */
int sim_isa_dispatch(const SimIsaDispatch *d, const SimIsaMemory *mem, uint64_t max_wave_instructions,
                     SimIsaResult *ret);

/*
 * Pipe priorities (CP_HQD_PIPE_PRIORITY, amdkfd's KFD_PIPE_PRIORITY_CS_*): the
 * SPI launches the waves of a dispatch from a pipe of higher priority before
 * those of a lower one (amdgpu's high-priority compute rings rely on it:
 * gfx_v10_0_compute_mqd_set_priority; "SPI scheduling ... near perfect
 * scheduling latency" for a high-priority compute context next to a low one,
 * amd-gfx, 2017-02-28, "Add support for high priority scheduling in
 * amdgpu"). Waves already running are not preempted for it. The model is
 * stricter than the hardware in two ways (sim-isa-pool.c says why): a lower
 * dispatch starts no workgroup until the higher one has finished, not only
 * launched, all of its own; and a lower workgroup already running, when it
 * gives its CU up after a quantum, may wait while higher ones take the CUs,
 * up to the age limit (2 ms), after which it goes first.
 */
#define SIM_PIPE_PRIORITY_LOW 0u
#define SIM_PIPE_PRIORITY_MEDIUM 1u
#define SIM_PIPE_PRIORITY_HIGH 2u
#define SIM_PIPE_PRIORITY_LEVELS 3u

/**
 * sim_isa_pool_new() - start the helper threads of a simulated device.
 * @n_threads: helpers (the callers of sim_isa_dispatch() work too); 0 makes a
 *             pool without threads, with which every dispatch runs serially.
 * @ret: the pool, to free with sim_isa_pool_free().
 *
 * Helpers sleep until a dispatch with workgroups to spare has run a while on
 * its caller (sim_isa_pool_wakeups()), join it, run its workgroups until none
 * is left, and go back to sleep. The pool is also the device's wave
 * launcher: a dispatch's workgroups start only while no dispatch of a higher
 * SimIsaDispatch.priority runs (its callers wait, its helpers go to the
 * other dispatch), and helpers join the open dispatch of the highest
 * priority first, then the oldest. Returns 0, -ENOMEM, or the negative errno
 * of pthread_create().
 */
int sim_isa_pool_new(unsigned n_threads, SimIsaPool **ret);

/**
 * sim_isa_pool_free() - stop and join the helpers. No dispatch may be running
 * on the pool. NULL-safe; returns NULL.
 */
SimIsaPool *sim_isa_pool_free(SimIsaPool *pool);

/* Helper threads of a pool (0 for NULL). */
unsigned sim_isa_pool_threads(const SimIsaPool *pool);

/* The most participants that have held CUs at once on the pool: at most its
 * helpers and two, however many dispatches run (sim-isa-pool.c). */
unsigned sim_isa_pool_most_busy(SimIsaPool *pool);

/* How many times a helper of the pool woke up from its sleep so far: a
 * dispatch wakes them once its caller has run SIM_ISA_WAKE_AFTER
 * wave-instructions in it with workgroups left (sim-isa-pool.c), so a
 * dispatch shorter than that runs on its caller alone unless a helper is
 * awake. */
#define SIM_ISA_WAKE_AFTER 4096u
uint64_t sim_isa_pool_wakeups(SimIsaPool *pool);
/* How many helpers sleep now (the others run workgroups, look for work or
 * have not started yet). */
unsigned sim_isa_pool_sleeping(SimIsaPool *pool);
/* Sets how many wave-instructions a caller runs before it wakes helpers (0:
 * at once, as a test that wants every dispatch shared asks). */
void sim_isa_pool_set_wake_after(SimIsaPool *pool, uint64_t wave_instructions);

/* The helpers a device on this host should have: one fewer than the CPUs the
 * process may run on (sched_getaffinity), at most SIM_ISA_MAX_HELPERS. */
#define SIM_ISA_MAX_HELPERS 31u
unsigned sim_isa_default_helpers(void);

/**
 * sim_isa_knows() - whether the decoder implements an instruction.
 * @mnemonic: the name as llvm-objdump prints it for gfx1030 (e.g. "v_add_nc_u32_e32",
 *            "s_load_dwordx2"); an _e32/_e64/_sdwa/_dpp suffix is accepted.
 */
bool sim_isa_knows(const char *mnemonic);

/**
 * sim_isa_name() - the mnemonic of the instruction at @words, if implemented.
 * @words: the instruction's first two dwords (a VOP3 literal is not needed).
 * @ret_size: instruction size in bytes (4, 8, or 12 with a literal), may be NULL.
 *
 * Returns the base name (static storage, without _e32/_e64/_sdwa) or NULL
 * for an encoding the interpreter does not implement.
 */
const char *sim_isa_name(const uint32_t *words, unsigned *ret_size);
