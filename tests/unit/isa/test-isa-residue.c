/* SPDX-License-Identifier: MIT */
/*
 * What a wave finds when it starts (sim-isa.c wave_init(), docs/simulator.md
 * "What a wave starts with"): a writer leaves a secret in VGPRs v200..v255,
 * in an SGPR, in LDS and in its wave's private memory; a reader run after it,
 * on the same thread, reads those places without writing them first and
 * must find 0 everywhere. Serially, writer and reader are workgroups 0 and 1
 * of one dispatch (the caller's waves serve both); on the pool they are two
 * dispatches, and each makes every participant (the caller and each helper)
 * run exactly one of its workgroups: the workgroups meet at a counter in
 * memory before they end, so none can take a second. Wave32 and wave64.
 * Hand-assembled, encodings from llvm-mc-15 -mcpu=gfx1030 -show-encoding.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "isa-helper.h"
#include "sim/isa/sim-isa.h"

#define HELPERS 3u
#define PARTICIPANTS (HELPERS + 1)
#define WG_THREADS 64u
#define CODE_VA 0x200000ull
#define SECRET 0x5EC2E700u
#define SECRET_SGPR 0x5EC2E7AAu
#define SCRATCH_PER_LANE 16u
/* Dwords the reader stores per work-item: v200, v255, LDS, scratch, s90, v230. */
#define OUT_DWORDS 8u
#define READS 6u
/* Enough wave-instructions for helpers to join on a busy machine; a helper
 * that never came would end the test with -ETIME, not hang it. */
#define BUDGET 2000000000ull

#define ELEMS_OF(x) (sizeof(x) / sizeof((x)[0]))

typedef struct Prog {
        uint32_t w[256];
        unsigned n;
} Prog;

static void emit(Prog *p, const uint32_t *w, unsigned n) {
        cr_assert_leq(p->n + n, ELEMS_OF(p->w));
        memcpy(p->w + p->n, w, 4 * n);
        p->n += n;
}
#define EMIT(p, ...) emit(p, (const uint32_t[]) { __VA_ARGS__ }, sizeof((const uint32_t[]) { __VA_ARGS__ }) / 4)

/*
 * User SGPRs: s[0:3] the scratch V#, s[4:5] the meeting counter, s[6:7] the
 * reader's output; then s8 the workgroup ID X (RSRC2 bit 7) and s9 the wave's
 * private segment byte offset (RSRC2.SCRATCH_EN).
 */
#define RSRC2 (1u | 8u << 1 | 1u << 7)

/* The writer: v200..v255 = SECRET + row, LDS[4 x thread] = v200, the lane's
 * first private dword = v200, s90 = SECRET_SGPR. */
static void emit_writer(Prog *p) {
        for (uint32_t v = 200; v <= 255; v++)
                EMIT(p, 0x7e0002ffu | v << 17, SECRET + v); /* v_mov_b32_e32 vN, SECRET + N */
        EMIT(p, 0x34060082,                 /* v_lshlrev_b32_e32 v3, 2, v0 */
             0xd8340000, 0x0000c803,        /* ds_write_b32 v3, v200 */
             0xe0700000, 0x0900c800,        /* buffer_store_dword v200, off, s[0:3], s9 */
             0xbeda03ff, SECRET_SGPR);      /* s_mov_b32 s90, SECRET_SGPR */
}

/* The reader: stores v200, v255, LDS[4 x thread], its first private dword,
 * s90 and v230 to out[(wg x 64 + thread) x 8 + 0..5], without writing them. */
static void emit_reader(Prog *p) {
        EMIT(p, 0x34060082,                 /* v_lshlrev_b32_e32 v3, 2, v0 */
             0xd8d80000, 0x04000003,        /* ds_read_b32 v4, v3 */
             0xe0300000, 0x09000500,        /* buffer_load_dword v5, off, s[0:3], s9 */
             0xbf8c0070,                    /* s_waitcnt vmcnt(0) lgkmcnt(0) */
             0x7e0c025a,                    /* v_mov_b32_e32 v6, s90 */
             0x340e0085,                    /* v_lshlrev_b32_e32 v7, 5, v0 */
             0x8f0b8b08,                    /* s_lshl_b32 s11, s8, 11 */
             0x4a0e0e0b,                    /* v_add_nc_u32_e32 v7, s11, v7 */
             0xdc708000, 0x0006c807,        /* global_store_dword v7, v200, s[6:7] */
             0xdc708004, 0x0006ff07,        /* global_store_dword v7, v255, s[6:7] offset:4 */
             0xdc708008, 0x00060407,        /* global_store_dword v7, v4, s[6:7] offset:8 */
             0xdc70800c, 0x00060507,        /* global_store_dword v7, v5, s[6:7] offset:12 */
             0xdc708010, 0x00060607,        /* global_store_dword v7, v6, s[6:7] offset:16 */
             0xdc708014, 0x0006e607,        /* global_store_dword v7, v230, s[6:7] offset:20 */
             0xbbfd0000);                   /* s_waitcnt_vscnt null, 0x0 */
}

/* Every work-item adds 1 to the counter at s[4:5]; the wave then waits until
 * it reaches `threads`, so that no workgroup ends before all have started. */
static void emit_meet(Prog *p, uint32_t threads) {
        EMIT(p, 0x7e140281,                 /* v_mov_b32_e32 v10, 1 */
             0x7e180280,                    /* v_mov_b32_e32 v12, 0 */
             0xdcc88000, 0x00040a0c,        /* global_atomic_add v12, v10, s[4:5] */
             /* wait: */
             0xf4010282, 0xfa000000,        /* s_load_dword s10, s[4:5], 0x0 glc */
             0xbf8cc07f,                    /* s_waitcnt lgkmcnt(0) */
             0xbf0aff0a, threads,           /* s_cmp_lt_u32 s10, threads */
             0xbf85fffa);                   /* s_cbranch_scc1 wait */
}

typedef struct Run {
        IsaMem m;
        uint64_t scratch_va, counter_va, out_va;
        uint32_t *counter, *out, *code;
        bool wave32;
} Run;

static void run_init(Run *r, bool wave32, SimIsaPool *pool) {
        unsigned lanes = wave32 ? 32 : 64, wg_waves = WG_THREADS / lanes;

        isa_mem_init(&r->m);
        r->m.pool = pool;
        r->wave32 = wave32;
        /* A workgroup's worth of private memory for each participant. */
        r->scratch_va = isa_mem_alloc(&r->m, (uint64_t) PARTICIPANTS * wg_waves * lanes * SCRATCH_PER_LANE, NULL);
        r->counter_va = isa_mem_alloc(&r->m, 4096, (void **) &r->counter);
        r->out_va = isa_mem_alloc(&r->m, 4ull * OUT_DWORDS * WG_THREADS * PARTICIPANTS, (void **) &r->out);
        r->code = isa_mem_map(&r->m, CODE_VA, 4096);
}

static int run_dispatch(Run *r, const Prog *p, uint32_t groups, SimIsaResult *res) {
        unsigned lanes = r->wave32 ? 32 : 64;

        memset(r->counter, 0, 4096);
        memset(r->out, 0xEE, 4ull * OUT_DWORDS * WG_THREADS * PARTICIPANTS);
        memcpy(r->code, p->w, 4 * p->n);
        SimIsaDispatch d = {
                .entry_va = CODE_VA,
                .rsrc2 = RSRC2,
                .user_sgpr = {
                        (uint32_t) r->scratch_va, (uint32_t) (r->scratch_va >> 32 & 0xffff) | 1u << 31, 0xffffffffu,
                        SIM_ISA_SCRATCH_RSRC3(r->wave32),
                        (uint32_t) r->counter_va, (uint32_t) (r->counter_va >> 32),
                        (uint32_t) r->out_va, (uint32_t) (r->out_va >> 32),
                },
                .grid = { groups, 1, 1 },
                .wg_size = { WG_THREADS, 1, 1 },
                .pool = r->m.pool,
                .wave32 = r->wave32,
                .scratch_va = r->scratch_va,
                .scratch_per_lane = SCRATCH_PER_LANE,
                .scratch_waves = PARTICIPANTS * WG_THREADS / lanes,
                .lds_bytes = 4 * WG_THREADS,
                .sh_mem_bases = ISA_SH_MEM_BASES,
        };
        return sim_isa_dispatch(&d, &r->m.mem, BUDGET, res);
}

/* Workgroups first..first+groups-1 of the reader found 0 in every place. */
static void expect_nothing(const Run *r, uint32_t first, uint32_t groups, const char *what) {
        static const char *const place[READS] = { "v200", "v255", "LDS", "private memory", "s90", "v230" };

        for (uint32_t t = first * WG_THREADS; t < (first + groups) * WG_THREADS; t++)
                for (unsigned k = 0; k < READS; k++)
                        cr_assert_eq(r->out[t * OUT_DWORDS + k], 0,
                                     "%s, wave%u: work-item %u of workgroup %u read 0x%08x from %s, left there by "
                                     "an earlier wave", what, r->wave32 ? 32 : 64, t % WG_THREADS, t / WG_THREADS,
                                     r->out[t * OUT_DWORDS + k], place[k]);
}

/* Serially: workgroup 0 writes, workgroup 1 reads, on the caller's waves. */
static void check_serial(bool wave32) {
        Run r;
        Prog p = { .n = 0 };
        SimIsaResult res;

        run_init(&r, wave32, NULL);
        EMIT(&p, 0xbf068008,                /* s_cmp_eq_u32 s8, 0 */
             0xbf840000);                   /* s_cbranch_scc0 reader (patched below) */
        unsigned branch = p.n - 1;
        emit_writer(&p);
        EMIT(&p, 0xbf810000);               /* s_endpgm */
        p.w[branch] |= (uint16_t) (p.n - branch - 1);
        emit_reader(&p);
        EMIT(&p, 0xbf810000);               /* s_endpgm */

        cr_assert_eq(run_dispatch(&r, &p, 2, &res), 0, "%s", res.message);
        expect_nothing(&r, 1, 1, "serially");
        isa_mem_fini(&r.m);
}

Test(isa_residue, serial_wave32_workgroup_finds_nothing_of_the_previous_one) {
        check_serial(true);
}

Test(isa_residue, serial_wave64_workgroup_finds_nothing_of_the_previous_one) {
        check_serial(false);
}

/* On the pool: a dispatch of writers, then one of readers, one workgroup
 * of each for every participant. */
static void check_pool(bool wave32) {
        SimIsaPool *pool;
        Run r;
        Prog writer = { .n = 0 }, reader = { .n = 0 };
        SimIsaResult res;

        cr_assert_eq(sim_isa_pool_new(HELPERS, &pool), 0);
        sim_isa_pool_set_wake_after(pool, 0); /* the helpers take part from the first workgroup */
        run_init(&r, wave32, pool);
        emit_writer(&writer);
        emit_meet(&writer, PARTICIPANTS * WG_THREADS);
        EMIT(&writer, 0xbf810000);          /* s_endpgm */
        emit_reader(&reader);
        emit_meet(&reader, PARTICIPANTS * WG_THREADS);
        EMIT(&reader, 0xbf810000);          /* s_endpgm */

        for (unsigned round = 0; round < 3; round++) {
                cr_assert_eq(run_dispatch(&r, &writer, PARTICIPANTS, &res), 0, "writer: %s", res.message);
                cr_assert_eq(r.counter[0], PARTICIPANTS * WG_THREADS);
                cr_assert_eq(run_dispatch(&r, &reader, PARTICIPANTS, &res), 0, "reader: %s", res.message);
                expect_nothing(&r, 0, PARTICIPANTS, "on the pool");
        }
        isa_mem_fini(&r.m);
        sim_isa_pool_free(pool);
}

Test(isa_residue, pool_wave32_dispatch_finds_nothing_of_the_previous_one, .timeout = 120) {
        check_pool(true);
}

Test(isa_residue, pool_wave64_dispatch_finds_nothing_of_the_previous_one, .timeout = 120) {
        check_pool(false);
}
