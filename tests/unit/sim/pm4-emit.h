/* SPDX-License-Identifier: MIT */
/*
 * A tiny PM4 emitter for the CP engine tests and benchmark, written from the
 * documented gfx10 layouts (kfd-facts §2, Linux nvd.h, Mesa sid.h),
 * independent of daemon/gpu's builders and of the simulator's decoder: the
 * packets of the daemon contract and the SET_SH_REG sequence of a dispatch
 * (kfd-facts §2.3). No test framework here, so a benchmark can use it too.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "isa-helper.h"

#ifndef LO
#define LO(x) ((uint32_t) (uint64_t) (x))
#define HI(x) ((uint32_t) ((uint64_t) (x) >> 32))
#endif

/* ---- PM4 (type-3 header: 3 << 30 | COUNT << 16 | opcode << 8; kfd-facts §2.1) ---- */
#define PKT3(op, count) ((3u << 30) | ((uint32_t) (count) << 16) | ((uint32_t) (op) << 8))
#define OP_NOP 0x10u
#define OP_DISPATCH_DIRECT 0x15u
#define OP_WRITE_DATA 0x37u
#define OP_WAIT_REG_MEM 0x3Cu
#define OP_INDIRECT_BUFFER 0x3Fu
#define OP_EVENT_WRITE 0x46u
#define OP_RELEASE_MEM 0x49u
#define OP_ACQUIRE_MEM 0x58u
#define OP_SET_SH_REG 0x76u
#define NOP1 0xFFFF1000u /* header-only NOP */

/* Registers, SH offsets (reg - 0x2C00). */
#define SH_START_X 0x204u
#define SH_NUM_THREAD_X 0x207u
#define SH_PGM_LO 0x20Cu
#define SH_PGM_RSRC1 0x212u
#define SH_RESOURCE_LIMITS 0x215u
#define SH_TMPRING_SIZE 0x218u
#define SH_RESTART_X 0x21Bu
#define SH_PGM_RSRC3 0x228u
#define SH_USER_DATA_0 0x240u

/* DISPATCH_INITIATOR */
#define CSI_COMPUTE_SHADER_EN 1u
#define CSI_PARTIAL_TG_EN 2u
#define CSI_FORCE_START_AT_000 4u
#define CSI_CS_W32_EN (1u << 15)

/* RELEASE_MEM DW1: CACHE_FLUSH_AND_INV_TS (0x14) | EVENT_INDEX(5) | GCR GLM_WB|GLM_INV|GL2_WB|SEQ. */
#define RM_DW1 (0x14u | (5u << 8) | (1u << 12) | (1u << 13) | (1u << 21) | (1u << 22))
#define RM_DW2(data_sel, int_sel) (((uint32_t) (data_sel) << 29) | ((uint32_t) (int_sel) << 24))

typedef struct Pm4 {
        uint32_t dw[4096];
        size_t n;
} Pm4;

static inline void pm4_put(Pm4 *p, uint32_t v) {
        if (p->n >= sizeof p->dw / sizeof p->dw[0])
                abort(); /* a test's PM4 buffer is too small: a bug in the test */
        p->dw[p->n++] = v;
}

static inline void pm4_set_sh(Pm4 *p, uint32_t offset, const uint32_t *v, unsigned n) {
        pm4_put(p, PKT3(OP_SET_SH_REG, n));
        pm4_put(p, offset);
        for (unsigned i = 0; i < n; i++)
                pm4_put(p, v[i]);
}

/* WRITE_DATA, ENGINE_SEL 0, DST_SEL dst (5 memory / 2 L2), WR_CONFIRM. */
static inline void pm4_write_data(Pm4 *p, unsigned dst_sel, uint64_t addr, const uint32_t *v, unsigned n) {
        pm4_put(p, PKT3(OP_WRITE_DATA, 2 + n));
        pm4_put(p, (dst_sel << 8) | (1u << 20));
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        for (unsigned i = 0; i < n; i++)
                pm4_put(p, v[i]);
}

static inline void pm4_release_mem(Pm4 *p, unsigned data_sel, unsigned int_sel, uint64_t addr, uint64_t data,
                                   uint32_t ctxid) {
        pm4_put(p, PKT3(OP_RELEASE_MEM, 6));
        pm4_put(p, RM_DW1);
        pm4_put(p, RM_DW2(data_sel, int_sel));
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        pm4_put(p, LO(data));
        pm4_put(p, HI(data));
        pm4_put(p, ctxid);
}

/* The completion signal: event slot = id, INT_SEL 2, INT_CTXID = id (kfd-facts §1.10). */
static inline void pm4_signal(Pm4 *p, uint64_t page_va, uint32_t id) {
        pm4_release_mem(p, 1, 2, page_va + 8ull * id, id, id);
}

/* WAIT_REG_MEM on memory: FUNCTION func, MEM_SPACE 1, ref, mask, poll interval 4. */
static inline void pm4_wait_mem(Pm4 *p, unsigned func, uint64_t addr, uint32_t ref, uint32_t mask) {
        pm4_put(p, PKT3(OP_WAIT_REG_MEM, 5));
        pm4_put(p, func | (1u << 4));
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        pm4_put(p, ref);
        pm4_put(p, mask);
        pm4_put(p, 4);
}

/* WAIT_REG_MEM64 (0x93) on memory: FUNCTION func, MEM_SPACE 1; 64-bit ref and mask. */
static inline void pm4_wait_mem64(Pm4 *p, unsigned func, uint64_t addr, uint64_t ref, uint64_t mask) {
        pm4_put(p, PKT3(0x93u, 7));
        pm4_put(p, func | (1u << 4));
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        pm4_put(p, LO(ref));
        pm4_put(p, HI(ref));
        pm4_put(p, LO(mask));
        pm4_put(p, HI(mask));
        pm4_put(p, 4);
}

/* ATOMIC_MEM (0x1E): ATOMIC [6:0] = TC_OP, COMMAND [11:8], CACHE_POLICY [26:25] = 3. */
static inline void pm4_atomic_mem(Pm4 *p, unsigned op, unsigned command, uint64_t addr, uint64_t src, uint64_t cmp) {
        pm4_put(p, PKT3(0x1Eu, 7));
        pm4_put(p, op | command << 8 | 3u << 25);
        pm4_put(p, LO(addr));
        pm4_put(p, HI(addr));
        pm4_put(p, LO(src));
        pm4_put(p, HI(src));
        pm4_put(p, LO(cmp));
        pm4_put(p, HI(cmp));
        pm4_put(p, command == 1 ? 128 : 0);
}

static inline void pm4_acquire_mem(Pm4 *p) {
        pm4_put(p, PKT3(OP_ACQUIRE_MEM, 6));
        pm4_put(p, 0);
        pm4_put(p, 0xFFFFFFFFu);
        pm4_put(p, 0x00FFFFFFu);
        pm4_put(p, 0);
        pm4_put(p, 0);
        pm4_put(p, 0x0000000Au);
        /* GLM_WB|GLM_INV|GLK_WB|GLK_INV|GLV_INV|GL1_INV */
        pm4_put(p, (1u << 4) | (1u << 5) | (1u << 6) | (1u << 7) | (1u << 8) | (1u << 9));
}

static inline void pm4_ib(Pm4 *p, uint64_t va, uint32_t size_dw, bool chain) {
        pm4_put(p, PKT3(OP_INDIRECT_BUFFER, 2));
        pm4_put(p, LO(va));
        pm4_put(p, HI(va));
        pm4_put(p, size_dw | (chain ? 1u << 20 : 0) | (1u << 23));
}

typedef struct CpLaunch {
        uint32_t grid[3], wg[3], partial[3]; /* partial[i] 0: no partial workgroup in i */
        uint64_t kernarg_va, packet_va, scratch_va;
        uint32_t scratch_wavesize_kib, scratch_waves;
        uint32_t scratch_workgroups; /* workgroups cp_prepare() sizes the scratch ring for; 0 = 1 */
} CpLaunch;

/* The per-dispatch packet stream of the daemon contract (kfd-facts §2.3 order). */
static inline void pm4_dispatch(Pm4 *p, const IsaKernel *kk, const CpLaunch *l) {
        uint32_t user[16], n = 0, lds_granules = (kk->group_segment_size + 511) / 512;
        uint32_t init = CSI_COMPUTE_SHADER_EN | CSI_FORCE_START_AT_000 | CSI_CS_W32_EN;

        if (kk->code_properties & (1u << 0)) { /* private segment buffer V# */
                user[n++] = LO(l->scratch_va);
                user[n++] = (HI(l->scratch_va) & 0xFFFF) | (1u << 31);
                user[n++] = 0xFFFFFFFFu;
                user[n++] = SIM_ISA_SCRATCH_RSRC3(true); /* wave32 (CS_W32_EN below) */
        }
        if (kk->code_properties & (1u << 1)) {
                user[n++] = LO(l->packet_va);
                user[n++] = HI(l->packet_va);
        }
        if (kk->code_properties & (1u << 2)) {
                user[n++] = 0;
                user[n++] = 0;
        }
        if (kk->code_properties & (1u << 3)) {
                user[n++] = LO(l->kernarg_va);
                user[n++] = HI(l->kernarg_va);
        }
        if (kk->code_properties & (1u << 4)) {
                user[n++] = 0;
                user[n++] = 0;
        }
        if (kk->code_properties & (1u << 5)) {
                user[n++] = LO(l->scratch_va);
                user[n++] = HI(l->scratch_va);
        }
        if (kk->code_properties & (1u << 6))
                user[n++] = (kk->private_segment_size + 3) & ~3u;
        if (n != ((kk->rsrc2 >> 1) & 31))
                abort(); /* user SGPRs in descriptor order must fill USER_SGPR_COUNT */

        pm4_acquire_mem(p);
        uint32_t pgm[2] = { (uint32_t) (kk->entry_va >> 8), (uint32_t) (kk->entry_va >> 40) };
        pm4_set_sh(p, SH_PGM_LO, pgm, 2);
        uint32_t rsrc[2] = { kk->rsrc1, kk->rsrc2 | (lds_granules << 15) };
        pm4_set_sh(p, SH_PGM_RSRC1, rsrc, 2);
        pm4_set_sh(p, SH_PGM_RSRC3, &kk->rsrc3, 1);
        uint32_t tmpring = l->scratch_waves | (l->scratch_wavesize_kib << 12);
        pm4_set_sh(p, SH_TMPRING_SIZE, &tmpring, 1);
        uint32_t zero3[3] = { 0, 0, 0 };
        pm4_set_sh(p, SH_RESTART_X, zero3, 3);
        if (n)
                pm4_set_sh(p, SH_USER_DATA_0, user, n);
        uint32_t limits = 0;
        pm4_set_sh(p, SH_RESOURCE_LIMITS, &limits, 1);
        uint32_t st[8] = { 0, 0, 0 };
        bool partial = false;
        for (unsigned i = 0; i < 3; i++) {
                st[3 + i] = l->wg[i];
                if (l->partial[i])
                        partial = true;
        }
        if (partial) {
                init |= CSI_PARTIAL_TG_EN;
                for (unsigned i = 0; i < 3; i++)
                        st[3 + i] |= (l->partial[i] ? l->partial[i] : l->wg[i]) << 16;
        }
        pm4_set_sh(p, SH_START_X, st, 8);
        pm4_put(p, PKT3(OP_DISPATCH_DIRECT, 3));
        pm4_put(p, l->grid[0]);
        pm4_put(p, l->grid[1]);
        pm4_put(p, l->grid[2]);
        pm4_put(p, init);
        pm4_put(p, PKT3(OP_EVENT_WRITE, 0));
        pm4_put(p, 7u | (4u << 8)); /* CS_PARTIAL_FLUSH, EVENT_INDEX 4 */
}

/* Registers and DISPATCH_DIRECT for a raw program: grid x 1 x 1 workgroups of wg
 * work-items, user SGPRs from user[]. */
static inline void pm4_dispatch_raw(Pm4 *p, uint64_t entry, uint32_t rsrc2, const uint32_t *user, unsigned n_user,
                                    uint32_t grid, uint32_t wg) {
        uint32_t pgm[2] = { (uint32_t) (entry >> 8), (uint32_t) (entry >> 40) };
        pm4_set_sh(p, SH_PGM_LO, pgm, 2);
        uint32_t rsrc[2] = { 0, rsrc2 | ((uint32_t) n_user << 1) };
        pm4_set_sh(p, SH_PGM_RSRC1, rsrc, 2);
        if (n_user)
                pm4_set_sh(p, SH_USER_DATA_0, user, n_user);
        uint32_t st[6] = { 0, 0, 0, wg, 1, 1 };
        pm4_set_sh(p, SH_START_X, st, 6);
        pm4_put(p, PKT3(OP_DISPATCH_DIRECT, 3));
        pm4_put(p, grid);
        pm4_put(p, 1);
        pm4_put(p, 1);
        pm4_put(p, CSI_COMPUTE_SHADER_EN | CSI_FORCE_START_AT_000 | CSI_CS_W32_EN);
}
