/* SPDX-License-Identifier: MIT */
/*
 * State shared by the files of the RDNA2 interpreter: one SimIsaWave per wave
 * (32 or 64 lanes) of a running workgroup; one SimIsaRun per thread taking
 * part in a dispatch (a participant: the calling thread, or a helper of the
 * pool), which runs one workgroup at a time with its own waves, LDS and
 * translation caches; one SimIsaJob per sim_isa_dispatch() call, what the
 * participants share (the next workgroup to claim, the budget, the first
 * failure). Nothing here outlives a dispatch but the pool (sim-isa-pool.c). Operand codes follow the RDNA2 ISA
 * reference §3.1 / chapter 13 (SSRC/VSRC fields): 0-105 SGPRs, 106/107 VCC,
 * 124 M0, 125 NULL, 126/127 EXEC, 128-208 integer inline constants, 240-248
 * float inline constants, 251 VCCZ, 252 EXECZ, 253 SCC, 255 literal, 256-511
 * VGPRs.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim-isa.h"

/* Lanes of a wave64; a wave32 uses the first 32 of every VGPR row. */
#define SIM_ISA_MAX_LANES 64u
#define SIM_ISA_NUM_VGPRS 256u

enum {
        OPND_VCC_LO = 106,
        OPND_VCC_HI = 107,
        OPND_M0 = 124,
        OPND_NULL = 125,
        OPND_EXEC_LO = 126,
        OPND_EXEC_HI = 127,
        OPND_VCCZ = 251,
        OPND_EXECZ = 252,
        OPND_SCC = 253,
        OPND_LITERAL = 255,
        OPND_VGPR0 = 256,
};

/* Encoding families, RDNA2 ISA chapter 13. */
typedef enum SimIsaEnc {
        ENC_SOP2,
        ENC_SOPK,
        ENC_SOP1,
        ENC_SOPC,
        ENC_SOPP,
        ENC_SMEM,
        ENC_VOP2,
        ENC_VOP1,
        ENC_VOPC,
        ENC_VOP3,
        ENC_VOP3P,
        ENC_DS,
        ENC_MUBUF,
        ENC_FLAT,
        ENC_SCRATCH,
        ENC_GLOBAL,
        ENC_UNKNOWN,
        _ENC_MAX,
} SimIsaEnc;

/* Extensions of VOP1/VOP2/VOPC selected by src0 (RDNA2 ISA §6.3.2, §6.3.3). */
typedef enum SimIsaExt {
        EXT_NONE,
        EXT_SDWA,       /* src0 = 0xf9: sub-dword selection, second dword */
        EXT_DPP,        /* src0 = 0xfa (DPP16), 0xe9/0xea (DPP8, DPP8 with FI): lane permutation of src0 */
} SimIsaExt;

typedef struct SimIsaInst {
        SimIsaEnc enc;
        SimIsaExt ext;
        unsigned op;
        unsigned size;      /* bytes, literal included */
        uint32_t w0, w1;    /* w1 is 0 for 4-byte encodings */
        uint32_t literal;   /* valid if has_literal */
        bool has_literal;
} SimIsaInst;

typedef struct SimIsaWave {
        uint32_t s[128];        /* indexed by operand code: SGPRs, VCC, TTMP, M0, EXEC */
        uint64_t pc;
        bool scc;
        bool done;
        bool at_barrier;
        unsigned index;         /* wave number inside its workgroup */
        unsigned lanes;         /* 32 or 64 (DISPATCH_INITIATOR.CS_W32_EN) */
        uint32_t mode;          /* HW_REG_MODE, kept for s_getreg; arithmetic is round-to-nearest */
        uint32_t flat_scratch_lo, flat_scratch_hi;
        /* Rows of v below which earlier waves in this SimIsaWave may have
         * left values; every row from it up is 0 in all 64 lanes, as are
         * the hidden rows unless hidden_dirty (wave_init() clears what is
         * below, sim-isa.c). */
        unsigned vgpr_dirty;
        unsigned dirty_lanes;   /* ... in the lanes below this: 32, or 64 once a wave64 ran */
        bool hidden_dirty;
        /* VGPRs, plus three rows of the model's own for SDWA operand selection. */
        uint32_t v[SIM_ISA_NUM_VGPRS + 3][SIM_ISA_MAX_LANES];
} SimIsaWave;

/* The hidden rows: SDWA src0 and src1 after selection, and the unmerged result. */
#define SIM_ISA_SDWA_SRC0 256u
#define SIM_ISA_SDWA_SRC1 257u
#define SIM_ISA_SDWA_DST 258u

#define SIM_ISA_TLB_SIZE 64u
#define SIM_ISA_PAGE 4096u

typedef struct SimIsaTlbEntry {
        uint64_t page;          /* VA of the page, UINT64_MAX if empty */
        uint8_t *host;
        bool writable;
} SimIsaTlbEntry;

/* Decoded instructions by pc; code is assumed not to change during a dispatch. */
#define SIM_ISA_ICACHE_SIZE 4096u

typedef struct SimIsaICacheEntry {
        uint64_t pc;            /* UINT64_MAX if empty */
        SimIsaInst inst;
} SimIsaICacheEntry;

/*
 * One dispatch, shared by its participants. Workgroups are claimed in their
 * serial order (x fastest) from `next`. A failing workgroup lowers `stop_at`
 * to its index: no later workgroup starts, those running are abandoned, the
 * earlier ones run on, and the failure of the lowest index is the
 * dispatch's (what the serial run reports when workgroups do not depend on
 * one another's order). The budget is handed out in chunks under `lock`, so
 * the dispatch runs out exactly when its wave-instructions reach it.
 */
typedef struct SimIsaJob {
        const SimIsaDispatch *d;
        const SimIsaMemory *mem;
        uint64_t n_groups;              /* grid[0] * grid[1] * grid[2] */
        uint64_t next;                  /* atomic: the next workgroup index to claim */
        uint64_t stop_at;               /* atomic: the lowest failed workgroup index, else n_groups */
        unsigned wg_waves;              /* waves of a full workgroup (a scratch slot's size) */
        unsigned max_slots;             /* participants the scratch backing has room for */
        /* Guarded by the pool's lock (unused without a pool). */
        unsigned n_slots;               /* participants so far; each takes the next scratch slot */
        unsigned n_helpers;             /* helpers inside the dispatch now */
        bool listed;                    /* on the pool's list of dispatches open to helpers */
        bool launching;                 /* counted in the pool's launching[priority] */
        bool had_cu;                    /* a participant has had a CU */
        bool helpers_wanted;            /* sleeping helpers are woken for it (sim_isa_pool_want_helpers()) */
        struct SimIsaJob *next_job;
        /* Guarded by lock. */
        pthread_mutex_t lock;
        pthread_cond_t budget_cond;     /* a participant gave back or spent its chunk */
        uint64_t budget;                /* 0 = unlimited */
        uint64_t budget_left;           /* not yet handed out */
        uint64_t budget_out;            /* handed out, neither spent nor given back */
        uint64_t fail_index;            /* workgroup of `result`'s error, UINT64_MAX if none */
        SimIsaResult result;            /* the dispatch's: counters summed, the first failure */
} SimIsaJob;

typedef struct SimIsaRun {
        const SimIsaDispatch *d;
        const SimIsaMemory *mem;
        SimIsaJob *job;
        SimIsaResult *ret;      /* this participant's failure and counters */
        uint8_t *lds;
        uint32_t lds_size;
        uint64_t wg_index;      /* serial index of the running workgroup */
        uint32_t wg_id[3];
        uint32_t wg_size[3];    /* work-items of the running workgroup (partial in a last one) */
        unsigned n_waves;       /* waves of the running workgroup */
        unsigned scratch_slot;  /* wave w of a workgroup uses scratch wave scratch_slot * wg_waves + w */
        uint64_t wg_start;      /* ret->wave_instructions when the running workgroup started */
        uint64_t quota;         /* budget chunk left to this participant */
        uint64_t quota_taken;   /* size of the chunk it holds */
        unsigned lanes;         /* wave size of the dispatch: 32 or 64 */
        uint64_t lds_aperture, private_aperture;        /* bases from SH_MEM_BASES; 0 = none */
        SimIsaTlbEntry tlb[SIM_ISA_TLB_SIZE];
        /* Fetch cache: host pointer of the page holding pc. */
        uint64_t code_page;
        const uint8_t *code_host;
        SimIsaICacheEntry *icache;
        /* One more than the highest VGPR row an instruction this participant
         * decoded in this dispatch can reach (sim_isa_vgpr_end()): its waves
         * touch no row from it up. */
        unsigned vgpr_end;
        bool hidden_used;       /* ... and one of them was SDWA or DPP (the hidden rows) */
        /* The caller's wave-instructions at which it wakes the pool's
         * helpers for its dispatch (sim_isa_pool_want_helpers()); UINT64_MAX:
         * done, or a helper. */
        uint64_t wake_helpers_at;
        bool cu_held;           /* holds one of the pool's CUs, since cu_since */
        uint64_t cu_since;
} SimIsaRun;

#define ELEMS(x) (sizeof(x) / sizeof((x)[0]))
#define MIN_U(a, b) ((a) < (b) ? (a) : (b))

/* Lane masks: EXEC and VCC are one SGPR in wave32 (the _LO half; the _HI
 * SGPR is then an ordinary register) and an SGPR pair in wave64 (RDNA2 ISA
 * §3.2 "Wave32 and Wave64"). */
static inline uint64_t wave_mask_at(const SimIsaWave *w, unsigned code) {
        uint64_t m = w->s[code];
        if (w->lanes > 32)
                m |= (uint64_t) w->s[code + 1] << 32;
        return m;
}

static inline uint64_t wave_exec(const SimIsaWave *w) {
        return wave_mask_at(w, OPND_EXEC_LO);
}

static inline uint64_t wave_vcc(const SimIsaWave *w) {
        return wave_mask_at(w, OPND_VCC_LO);
}

static inline void wave_set_exec(SimIsaWave *w, uint64_t m) {
        w->s[OPND_EXEC_LO] = (uint32_t) m;
        if (w->lanes > 32)
                w->s[OPND_EXEC_HI] = (uint32_t) (m >> 32);
}

/* Runs the statement that follows once for each lane l set in the uint64_t
 * `exec` in scope, lowest first, up to the highest set lane (the else keeps
 * if/else around it unambiguous). */
#define LANES for (unsigned l = 0, _n = 64 - (unsigned) __builtin_clzll(exec | 1); l < _n; l++) if (!((exec >> l) & 1)) continue; else

static inline uint32_t f2u(float f) {
        uint32_t u;
        __builtin_memcpy(&u, &f, 4);
        return u;
}
static inline float u2f(uint32_t u) {
        float f;
        __builtin_memcpy(&f, &u, 4);
        return f;
}
static inline uint64_t d2u(double f) {
        uint64_t u;
        __builtin_memcpy(&u, &f, 8);
        return u;
}
static inline double u2d(uint64_t u) {
        double f;
        __builtin_memcpy(&f, &u, 8);
        return f;
}

/* sim-isa-decode.c */
void sim_isa_decode(const uint32_t *words, SimIsaInst *ret);
const char *sim_isa_inst_name(const SimIsaInst *inst);
const char *sim_isa_enc_name(SimIsaEnc enc);
/* Name of any gfx10 opcode, implemented or not (for messages); NULL if none. */
const char *sim_isa_any_name(const SimIsaInst *inst);
/* Name of an implemented opcode of an encoding, for tests; NULL if none. */
const char *sim_isa_opcode_name(SimIsaEnc enc, unsigned op);
/* Whether a 4-byte-encoding dword is followed by a second one (literal, SDWA, DPP). */
bool sim_isa_needs_literal(uint32_t w0);
bool sim_isa_bad_operand(const SimIsaInst *inst);
/* One more than the highest VGPR row the instruction can read or write (0:
 * none), counted generously: every field that may name a VGPR, as wide as
 * the widest operand. */
unsigned sim_isa_vgpr_end(const SimIsaInst *inst);

/* sim-isa-pool.c: the workgroups of a dispatch on the pool's helper threads
 * besides the caller. Both are no-ops without a pool. From open() to close()
 * the dispatch holds back the workgroups of dispatches of lower priority. */
void sim_isa_pool_open(SimIsaPool *pool, SimIsaJob *job);
void sim_isa_pool_close(SimIsaPool *pool, SimIsaJob *job);
/* The caller of job has run sim_isa_pool_wake_after() wave-instructions in
 * it (UINT64_MAX without a pool) and workgroups are left: sleeping helpers
 * are woken for it, as many as it has room for (once; helpers awake join a
 * listed dispatch without it). */
uint64_t sim_isa_pool_wake_after(SimIsaPool *pool);
void sim_isa_pool_want_helpers(SimIsaPool *pool, SimIsaJob *job);
/* Whether job may start a workgroup now: no dispatch of a higher priority
 * is open (true without a pool). Lock-free. */
bool sim_isa_pool_may_launch(SimIsaPool *pool, const SimIsaJob *job);
/* Waits until sim_isa_pool_may_launch() or *cancel (if set) is non-zero. */
void sim_isa_pool_wait_launch(SimIsaPool *pool, const SimIsaJob *job, const int *cancel);
/* CUs (the pool's comment): a participant takes one before it runs
 * workgroups, waiting for it if none is free (take stores when it got it in
 * *ret_since), and gives it back before it waits for anything or leaves. A
 * wait ends without the CU (take returns false) once abandon(userdata) says the participant has nothing left to run
 * (polled). check gives the CU up and takes one again when it has held it
 * for a quantum (since *since, which it updates) and others wait: call it
 * often (lock-free until then); false when it gave the CU up and abandoned
 * the wait for another. */
bool sim_isa_pool_cu_take(SimIsaPool *pool, SimIsaJob *job, bool (*abandon)(const void *userdata),
                          const void *userdata, uint64_t *ret_since);
void sim_isa_pool_cu_give(SimIsaPool *pool);
bool sim_isa_pool_cu_check(SimIsaPool *pool, SimIsaJob *job, uint64_t *since, bool (*abandon)(const void *userdata),
                           const void *userdata);

/* sim-isa.c: runs workgroups of job until none is left (or the dispatch
 * stops) on the caller's thread, as participant `slot`, with room for
 * wg_waves waves in waves, d->lds_bytes of LDS in lds and an icache. */
void sim_isa_participate(SimIsaJob *job, unsigned slot, bool helper, SimIsaWave *waves, uint8_t *lds,
                         SimIsaICacheEntry *icache);

/* sim-isa.c: failure reporting and memory. */
int sim_isa_fail(SimIsaRun *r, int error, uint64_t pc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int sim_isa_unsupported(SimIsaRun *r, const SimIsaWave *w, const SimIsaInst *inst);
/* Host pointer for [va, va+len) (len <= 16, may cross a page); -EFAULT recorded in r->ret. */
int sim_isa_mem(SimIsaRun *r, const SimIsaWave *w, uint64_t va, uint32_t len, bool write, void **ret_host);

/* The vector L0 and GL1 caches (sim-isa-vcache.c), for r->mem->vcache
 * non-NULL. sim_isa_vcache_load(): len (1, 2 or 4) bytes at va into dst, a
 * fault recorded as sim_isa_mem() does; glc reads around the L0, dlc around
 * the GL1. sim_isa_vcache_wrote(): a store or an atomic changed [va, va+len):
 * this thread's lines of it go. sim_isa_vcache_invalidate(): buffer_gl0_inv
 * (l0), buffer_gl1_inv / s_gl1_inv (gl1) on this thread. */
int sim_isa_vcache_load(SimIsaRun *r, const SimIsaWave *w, uint64_t va, unsigned len, bool glc, bool dlc, void *dst);
void sim_isa_vcache_wrote(SimIsaRun *r, uint64_t va, unsigned len);
void sim_isa_vcache_invalidate(SimIsaRun *r, bool l0, bool gl1);

/* Scalar operand access (sim-isa-salu.c). */
uint32_t sim_isa_sread(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst, unsigned code);
uint64_t sim_isa_sread64(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst, unsigned code);
void sim_isa_swrite(SimIsaWave *w, unsigned code, uint32_t v);
void sim_isa_swrite64(SimIsaWave *w, unsigned code, uint64_t v);
/* A lane mask operand (VCC, a carry, a compare result): one SGPR in wave32, a pair in wave64. */
uint64_t sim_isa_sread_mask(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst, unsigned code);
void sim_isa_swrite_mask(SimIsaWave *w, unsigned code, uint64_t m);

/* Executors return 0 to continue after the instruction, 1 when they set pc
 * themselves (branch, end of program), or a negative errno (recorded in run->ret). */
int sim_isa_exec_salu(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);
int sim_isa_exec_smem(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);
int sim_isa_exec_valu(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);
int sim_isa_exec_vop3p(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);
int sim_isa_exec_vmem(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);

/* A MUBUF instruction's buffer resource (V#), decoded (sim-isa-vsharp.c has
 * the layout, the addressing and the range checks, with their sources). */
typedef struct SimIsaVsharp {
        uint64_t base;
        uint32_t stride, num_records, index_stride;
        unsigned oob_select;
        bool swizzle, add_tid;
        bool usable;    /* FORMAT valid, RESOURCE_LEVEL 1, TYPE buffer; else every access is out of range */
} SimIsaVsharp;
void sim_isa_vsharp_decode(const uint32_t d[4], SimIsaVsharp *ret);
/* The address of lane's access to record index, byte offset, with soffset
 * added; false when the range check puts it out of range (a load returns 0,
 * a store or atomic does nothing). */
bool sim_isa_vsharp_address(const SimIsaVsharp *v, unsigned lane, uint32_t index, uint32_t offset, uint32_t soffset,
                            uint64_t *ret_va);
int sim_isa_exec_ds(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);
int sim_isa_exec_ds_permute(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);
int sim_isa_exec_ds_swizzle(SimIsaRun *r, SimIsaWave *w, const SimIsaInst *inst);
