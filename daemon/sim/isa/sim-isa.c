/* SPDX-License-Identifier: MIT */
/*
 * sim_isa_dispatch(): the interpreter loop. Each participant of a dispatch
 * (the caller, helpers of the pool: sim-isa-pool.c) claims workgroups in
 * their serial order and runs them one at a time; inside a workgroup the
 * waves take turns (a slice of instructions each, round-robin) and meet at
 * s_barrier. Sets up the initial wave state from the dispatch registers as
 * described in sim-isa.h, fetches instructions through the caller's
 * translate callback (one cached page), takes the budget in chunks, and
 * turns every failure into a SimIsaResult with the pc and a message; the
 * lowest failing workgroup's is the dispatch's. The caller owns its waves
 * and LDS for the duration of the call, a helper its own.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim-isa-internal.h"

#define SLICE 256u
#define MAX_LDS (64u * 1024u)
/* Wave-instructions a participant takes from the budget at a time. */
#define BUDGET_CHUNK 4096u

int sim_isa_fail(SimIsaRun *r, int error, uint64_t pc, const char *fmt, ...) {
        va_list ap;

        if (r->ret->error == 0) {
                r->ret->error = error;
                r->ret->fault_pc = pc;
                va_start(ap, fmt);
                vsnprintf(r->ret->message, sizeof(r->ret->message), fmt, ap);
                va_end(ap);
        }
        return error;
}

int sim_isa_unsupported(SimIsaRun *r, const SimIsaWave *w, const SimIsaInst *inst) {
        const char *name = sim_isa_inst_name(inst), *any = sim_isa_any_name(inst);

        r->ret->bad_encoding[0] = inst->w0;
        r->ret->bad_encoding[1] = inst->w1;
        if (name)
                /* Implemented, but not with these operands or modifiers. */
                return sim_isa_fail(r, -EILSEQ, w->pc,
                                    "unsupported form of instruction %s%s (encoding 0x%08x 0x%08x) at pc 0x%llx", name,
                                    inst->ext == EXT_DPP ? "_dpp" : inst->ext == EXT_SDWA ? "_sdwa" : "", inst->w0,
                                    inst->w1, (unsigned long long) w->pc);
        if (any)
                return sim_isa_fail(r, -EILSEQ, w->pc, "unsupported instruction %s%s (encoding 0x%08x 0x%08x) at pc 0x%llx",
                                    any, inst->ext == EXT_DPP ? "_dpp" : "", inst->w0, inst->w1,
                                    (unsigned long long) w->pc);
        return sim_isa_fail(r, -EILSEQ, w->pc, "unsupported instruction: %s opcode %u (encoding 0x%08x 0x%08x) at pc 0x%llx",
                            sim_isa_enc_name(inst->enc), inst->op, inst->w0, inst->w1, (unsigned long long) w->pc);
}

static int translate_page(SimIsaRun *r, uint64_t page, bool write, uint8_t **ret) {
        void *p;
        int k = r->mem->translate(r->mem->userdata, page, SIM_ISA_PAGE, write, &p);
        if (k < 0)
                return k;
        *ret = p;
        return 0;
}

int sim_isa_mem(SimIsaRun *r, const SimIsaWave *w, uint64_t va, uint32_t len, bool write, void **ret_host) {
        uint64_t page = va & ~(uint64_t) (SIM_ISA_PAGE - 1);
        SimIsaTlbEntry *e;
        int k;

        if (va + len < va)
                goto fault;
        if (((va + len - 1) & ~(uint64_t) (SIM_ISA_PAGE - 1)) != page) {
                /* Crosses a page: ask for exactly this range. */
                k = r->mem->translate(r->mem->userdata, va, len, write, ret_host);
                if (k < 0)
                        goto fault;
                return 0;
        }
        e = &r->tlb[(page / SIM_ISA_PAGE) % SIM_ISA_TLB_SIZE];
        if (e->page == page && (e->writable || !write)) {
                *ret_host = e->host + (va - page);
                return 0;
        }
        uint8_t *host;
        if (translate_page(r, page, write, &host) >= 0) {
                e->page = page;
                e->host = host;
                e->writable = write;
                *ret_host = host + (va - page);
                return 0;
        }
        /* The page is only partly mapped: translate the exact range, uncached. */
        k = r->mem->translate(r->mem->userdata, va, len, write, ret_host);
        if (k >= 0)
                return 0;
fault:
        r->ret->fault_va = va;
        return sim_isa_fail(r, -EFAULT, w->pc, "memory fault: %s of %u bytes at 0x%llx, pc 0x%llx",
                            write ? "write" : "read", len, (unsigned long long) va, (unsigned long long) w->pc);
}

static int fetch(SimIsaRun *r, const SimIsaWave *w, uint64_t va, uint32_t *ret) {
        uint64_t page = va & ~(uint64_t) (SIM_ISA_PAGE - 1);

        if (va & 3) {
                r->ret->fault_va = va;
                return sim_isa_fail(r, -EFAULT, w->pc, "misaligned pc 0x%llx", (unsigned long long) va);
        }
        if (r->mem->fetch) {
                if (r->mem->fetch(r->mem->userdata, va, ret) < 0) {
                        r->ret->fault_va = va;
                        return sim_isa_fail(r, -EFAULT, w->pc, "instruction fetch fault at 0x%llx",
                                            (unsigned long long) va);
                }
                return 0;
        }
        if (!r->code_host || r->code_page != page) {
                uint8_t *host;
                void *p;
                if (translate_page(r, page, false, &host) < 0) {
                        /* Code near the end of a mapping: fetch the dword alone. */
                        if (r->mem->translate(r->mem->userdata, va, 4, false, &p) < 0) {
                                r->ret->fault_va = va;
                                return sim_isa_fail(r, -EFAULT, w->pc, "instruction fetch fault at 0x%llx",
                                                    (unsigned long long) va);
                        }
                        memcpy(ret, p, 4);
                        return 0;
                }
                r->code_page = page;
                r->code_host = host;
        }
        memcpy(ret, r->code_host + (va - page), 4);
        return 0;
}

/* Fetch and decode the instruction at w->pc; only valid ones are cached. */
static int decode_at(SimIsaRun *r, SimIsaWave *w, const SimIsaInst **ret) {
        SimIsaICacheEntry *e = &r->icache[(w->pc >> 2) % SIM_ISA_ICACHE_SIZE];
        uint32_t words[3] = { 0 };
        SimIsaInst inst;
        int k;

        if (e->pc == w->pc) {
                *ret = &e->inst;
                return 0;
        }
        k = fetch(r, w, w->pc, &words[0]);
        if (k < 0)
                return k;
        /* Every 8-byte encoding has bits 31:30 = 11; VOP1/2/C and SALU may carry a literal. */
        if ((words[0] >> 30) == 3 || sim_isa_needs_literal(words[0])) {
                k = fetch(r, w, w->pc + 4, &words[1]);
                if (k < 0)
                        return k;
        }
        sim_isa_decode(words, &inst);
        if (inst.has_literal && inst.size == 12) {
                k = fetch(r, w, w->pc + 8, &inst.literal);
                if (k < 0)
                        return k;
        }
        if (!sim_isa_inst_name(&inst) || sim_isa_bad_operand(&inst))
                return sim_isa_unsupported(r, w, &inst);
        /* Every instruction a wave runs passes here once per participant and
         * dispatch (the cache starts empty): r->vgpr_end bounds its waves' rows. */
        unsigned end = sim_isa_vgpr_end(&inst);
        if (end > r->vgpr_end)
                r->vgpr_end = end;
        if (inst.ext != EXT_NONE)
                r->hidden_used = true;
        e->pc = w->pc;
        e->inst = inst;
        *ret = &e->inst;
        return 0;
}

/* Execute one instruction of w. */
static int step(SimIsaRun *r, SimIsaWave *w) {
        const SimIsaInst *in = NULL;
        int k;

        k = decode_at(r, w, &in);
        if (k < 0)
                return k;
        r->ret->wave_instructions++;
        r->ret->lane_instructions += __builtin_popcountll(wave_exec(w));

        switch (in->enc) {
        case ENC_SOP2: case ENC_SOPK: case ENC_SOP1: case ENC_SOPC: case ENC_SOPP:
                k = sim_isa_exec_salu(r, w, in);
                break;
        case ENC_SMEM:
                k = sim_isa_exec_smem(r, w, in);
                break;
        case ENC_VOP1: case ENC_VOP2: case ENC_VOPC: case ENC_VOP3:
                k = sim_isa_exec_valu(r, w, in);
                break;
        case ENC_VOP3P:
                k = sim_isa_exec_vop3p(r, w, in);
                break;
        case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: case ENC_MUBUF:
                k = sim_isa_exec_vmem(r, w, in);
                break;
        case ENC_DS:
                k = sim_isa_exec_ds(r, w, in);
                break;
        default:
                k = sim_isa_unsupported(r, w, in);
        }
        if (k < 0)
                return k;
        if (k == 0)
                w->pc += in->size;
        return 0;
}

/*
 * The registers of a SimIsaWave are daemon memory that the waves of every
 * context's dispatches take turns in (a helper's serve every dispatch it
 * joins), so a wave must not find what an earlier one left: unlike the
 * hardware (docs/simulator.md, "What a wave starts with"), every VGPR it can
 * reach starts at 0. Cheaply: only the rows earlier waves can have touched
 * (vgpr_dirty, and r->vgpr_end for those of this participant) are cleared,
 * in the lanes they can have used (dirty_lanes, r->lanes: 32 while only
 * wave32s ran there, else all 64, so no wave32 finds a wave64's upper lanes
 * whatever reaches them), and the three hidden rows of SDWA and DPP
 * operands once such an instruction ran.
 */
static void wave_clear_vgprs(SimIsaRun *r, SimIsaWave *w) {
        unsigned rows = w->vgpr_dirty > r->vgpr_end ? w->vgpr_dirty : r->vgpr_end;
        unsigned lanes = w->dirty_lanes > r->lanes ? w->dirty_lanes : r->lanes;

        if (rows < 3)
                rows = 3; /* v0..v2: the work-item IDs, written below for every lane */
        if (lanes == SIM_ISA_MAX_LANES)
                memset(w->v, 0, rows * sizeof(w->v[0]));
        else
                for (unsigned v = 0; v < rows; v++)
                        memset(w->v[v], 0, lanes * sizeof(w->v[0][0]));
        if (w->hidden_dirty || r->hidden_used)
                memset(w->v[SIM_ISA_SDWA_SRC0], 0, 3 * sizeof(w->v[0]));
        w->vgpr_dirty = 3;
        w->dirty_lanes = r->lanes;
        w->hidden_dirty = false;
}

/*
 * The same for the wave's private memory: its own part of the scratch
 * backing (the byte offset wave_init() hands it, lanes x scratch_per_lane
 * bytes) starts at 0, page by page where it is mapped (an access to an
 * unmapped one faults). The rest of the backing is the queue's memory, which
 * only its own context's waves reach (docs/simulator.md).
 */
static void wave_clear_scratch(SimIsaRun *r, uint32_t wave_offset) {
        const SimIsaDispatch *d = r->d;
        uint64_t len = (uint64_t) r->lanes * ((d->scratch_per_lane + 3) & ~3u), va = d->scratch_va + wave_offset;

        if (!(d->rsrc2 & 1) || !d->scratch_va || len == 0)
                return;
        while (len > 0) {
                uint64_t n = SIM_ISA_PAGE - (va & (SIM_ISA_PAGE - 1));
                void *p;
                if (n > len)
                        n = len;
                if (r->mem->translate(r->mem->userdata, va, n, true, &p) >= 0)
                        memset(p, 0, n);
                va += n;
                len -= n;
        }
}

/* Initial state of wave `index` of workgroup r->wg_id (sim-isa.h). */
static void wave_init(SimIsaRun *r, SimIsaWave *w, unsigned index, unsigned wg_threads) {
        const SimIsaDispatch *d = r->d;
        const uint32_t *size = r->wg_size;
        unsigned user = (d->rsrc2 >> 1) & 31, n = 0, tidig = (d->rsrc2 >> 11) & 3;
        unsigned lanes = r->lanes, first = index * lanes, live = MIN_U(lanes, wg_threads - first);
        uint32_t scratch_offset = (r->scratch_slot * r->job->wg_waves + index) * lanes * ((d->scratch_per_lane + 3) & ~3u);

        wave_clear_vgprs(r, w);
        wave_clear_scratch(r, scratch_offset);
        memset(w->s, 0, sizeof(w->s));
        for (n = 0; n < user && n < 16; n++)
                w->s[n] = d->user_sgpr[n];
        for (unsigned i = 0; i < 3; i++)
                if ((d->rsrc2 >> (7 + i)) & 1)
                        w->s[n++] = r->wg_id[i];
        if ((d->rsrc2 >> 10) & 1)
                w->s[n++] = r->n_waves;
        if (d->rsrc2 & 1)
                w->s[n++] = scratch_offset;
        w->lanes = lanes;
        wave_set_exec(w, live >= 64 ? ~0ull : (1ull << live) - 1);
        w->pc = d->entry_va;
        w->scc = false;
        w->done = w->at_barrier = false;
        w->index = index;
        /* MODE from COMPUTE_PGM_RSRC1, as the CP sets it (LLVM AMDGPUUsage, "compute_pgm_rsrc1
         * for GFX6-GFX11": FLOAT_ROUND_MODE_32/16_64 [15:12] and FLOAT_DENORM_MODE_32/16_64
         * [19:16] are MODE[7:0], DX10_CLAMP [21] MODE[8], IEEE_MODE [23] MODE[9]). */
        w->mode = ((d->rsrc1 >> 12) & 0xff) | ((d->rsrc1 >> 21) & 1) << 8 | ((d->rsrc1 >> 23) & 1) << 9;
        w->flat_scratch_lo = w->flat_scratch_hi = 0;
        for (unsigned l = 0; l < lanes; l++) {
                unsigned t = first + l, x = t % size[0], y = (t / size[0]) % size[1], z = t / (size[0] * size[1]);
                if (l >= live)
                        x = y = z = 0;
                w->v[0][l] = x;
                w->v[1][l] = tidig >= 1 ? y : 0;
                w->v[2][l] = tidig >= 2 ? z : 0;
        }
}

static bool cu_abandon(const void *userdata);

/* r takes a CU of the pool before it runs anything (true at once without a
 * pool); false when it stopped waiting because its dispatch is cancelled or
 * its workgroup superseded (cu_abandon()), which run_workgroup() then finds
 * before it runs an instruction. */
static bool cu_take(SimIsaRun *r) {
        if (!r->d->pool || r->cu_held)
                return true;
        if (!sim_isa_pool_cu_take(r->d->pool, r->job, cu_abandon, r, &r->cu_since))
                return false;
        r->cu_held = true;
        return true;
}

/* r gives its CU back before it waits or leaves. */
static void cu_give(SimIsaRun *r) {
        if (!r->cu_held)
                return;
        sim_isa_pool_cu_give(r->d->pool);
        r->cu_held = false;
}

static bool cancelled(const SimIsaRun *r) {
        return r->d->cancel && __atomic_load_n(r->d->cancel, __ATOMIC_RELAXED) != 0;
}

/* An earlier workgroup failed: this one would not have run in the serial order. */
static bool superseded(const SimIsaRun *r) {
        return __atomic_load_n(&r->job->stop_at, __ATOMIC_RELAXED) < r->wg_index;
}

static bool cu_abandon(const void *userdata) {
        const SimIsaRun *r = userdata;

        return cancelled(r) || superseded(r);
}

typedef enum Refill {
        REFILL_OK,
        REFILL_EXHAUSTED,  /* every wave-instruction of the budget is spent */
        REFILL_STOP,       /* the dispatch stops (cancelled, or an earlier workgroup failed) */
} Refill;

/* Spend the chunk r holds and take the next. When the budget has nothing left
 * but other participants still hold chunks, wait for them to spend or give
 * theirs back: they run on without waiting for anything, so this ends, and
 * the dispatch runs out only when all of it is spent. */
static Refill budget_refill(SimIsaRun *r) {
        SimIsaJob *job = r->job;
        Refill ret;

        pthread_mutex_lock(&job->lock);
        job->budget_out -= r->quota_taken - r->quota;
        r->quota_taken = r->quota = 0;
        pthread_cond_broadcast(&job->budget_cond);
        for (;;) {
                if (cancelled(r) || superseded(r)) {
                        ret = REFILL_STOP;
                        break;
                }
                if (job->budget_left > 0) {
                        r->quota = r->quota_taken = job->budget_left < BUDGET_CHUNK ? job->budget_left : BUDGET_CHUNK;
                        job->budget_left -= r->quota;
                        job->budget_out += r->quota;
                        ret = REFILL_OK;
                        break;
                }
                if (job->budget_out == 0) {
                        ret = REFILL_EXHAUSTED;
                        break;
                }
                if (r->cu_held) {
                        /* The chunks may be with participants waiting for a CU. */
                        pthread_mutex_unlock(&job->lock);
                        cu_give(r);
                        pthread_mutex_lock(&job->lock);
                        continue;
                }
                pthread_cond_wait(&job->budget_cond, &job->lock);
        }
        pthread_mutex_unlock(&job->lock);
        if (ret == REFILL_OK && !cu_take(r))
                ret = REFILL_STOP;
        return ret;
}

/* Runs the workgroup r->wg_index names. Returns 0, 1 when abandoned (an
 * earlier workgroup failed), or the negative errno recorded in r->ret. */
static int run_workgroup(SimIsaRun *r, SimIsaWave *waves) {
        unsigned done = 0, n_waves, wg_threads = r->wg_size[0] * r->wg_size[1] * r->wg_size[2];
        uint64_t budget = r->job->budget;

        n_waves = (wg_threads + r->lanes - 1) / r->lanes;
        r->n_waves = n_waves;
        r->wg_start = r->ret->wave_instructions;
        memset(r->lds, 0, r->lds_size);
        for (unsigned i = 0; i < n_waves; i++)
                wave_init(r, &waves[i], i, wg_threads);

        while (done < n_waves) {
                unsigned waiting = 0;
                bool progressed = false;

                for (unsigned i = 0; i < n_waves; i++) {
                        SimIsaWave *w = &waves[i];
                        if (cancelled(r))
                                return sim_isa_fail(r, -ECANCELED, w->pc, "dispatch cancelled at pc 0x%llx",
                                                    (unsigned long long) w->pc);
                        if (superseded(r))
                                return 1;
                        if (r->ret->wave_instructions >= r->wake_helpers_at) {
                                r->wake_helpers_at = UINT64_MAX;
                                sim_isa_pool_want_helpers(r->d->pool, r->job);
                        }
                        if (r->cu_held &&
                            !sim_isa_pool_cu_check(r->d->pool, r->job, &r->cu_since, cu_abandon, r)) {
                                r->cu_held = false;
                                continue; /* the next wave's turn finds out why */
                        }
                        for (unsigned n = 0; n < SLICE && !w->done && !w->at_barrier; n++) {
                                if (budget && r->quota == 0) {
                                        Refill f = budget_refill(r);
                                        if (f == REFILL_STOP)
                                                break; /* found out at the top of the next slice */
                                        if (f == REFILL_EXHAUSTED)
                                                return sim_isa_fail(r, -ETIME, w->pc,
                                                                    "instruction budget of %llu wave instructions exceeded at pc 0x%llx",
                                                                    (unsigned long long) budget, (unsigned long long) w->pc);
                                }
                                r->quota--;
                                int k = step(r, w);
                                if (k < 0)
                                        return k;
                                progressed = true;
                                if (w->done)
                                        done++;
                        }
                }
                for (unsigned i = 0; i < n_waves; i++)
                        waiting += waves[i].at_barrier;
                if (waiting > 0 && waiting == n_waves - done) {
                        /* Every live wave arrived: release the barrier. */
                        for (unsigned i = 0; i < n_waves; i++)
                                waves[i].at_barrier = false;
                        progressed = true;
                }
                if (!progressed && done < n_waves && !cancelled(r) && !superseded(r))
                        return sim_isa_fail(r, -EDEADLK, waves[0].pc, "workgroup deadlocked");
        }
        return 0;
}

/* Workgroup `index` in the serial order (x fastest) becomes r's. */
static void select_workgroup(SimIsaRun *r, uint64_t index) {
        const SimIsaDispatch *d = r->d;
        uint64_t rest = index;

        r->wg_index = index;
        for (unsigned i = 0; i < 3; i++) {
                uint32_t id = (uint32_t) (rest % d->grid[i]);
                bool last = id == d->grid[i] - 1;
                rest /= d->grid[i];
                r->wg_id[i] = d->wg_id_base[i] + id;
                r->wg_size[i] = last && d->partial[i] ? d->partial[i] : d->wg_size[i];
        }
}

/* r's workgroup failed: the dispatch stops after the workgroups before it,
 * and its failure is the dispatch's unless an earlier one fails too. */
static void job_fail(SimIsaJob *job, const SimIsaRun *r) {
        pthread_mutex_lock(&job->lock);
        if (r->wg_index < job->fail_index) {
                job->fail_index = r->wg_index;
                job->result.error = r->ret->error;
                job->result.fault_va = r->ret->fault_va;
                job->result.fault_pc = r->ret->fault_pc;
                memcpy(job->result.bad_encoding, r->ret->bad_encoding, sizeof job->result.bad_encoding);
                memcpy(job->result.message, r->ret->message, sizeof job->result.message);
        }
        uint64_t at = __atomic_load_n(&job->stop_at, __ATOMIC_RELAXED);
        while (r->wg_index < at &&
               !__atomic_compare_exchange_n(&job->stop_at, &at, r->wg_index, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                ;
        pthread_cond_broadcast(&job->budget_cond);
        pthread_mutex_unlock(&job->lock);
}

/* r is done with the dispatch: its chunk goes back, its counters are added. */
static void job_leave(SimIsaJob *job, SimIsaRun *r) {
        pthread_mutex_lock(&job->lock);
        job->budget_left += r->quota;
        job->budget_out -= r->quota_taken;
        r->quota = r->quota_taken = 0;
        job->result.wave_instructions += r->ret->wave_instructions;
        job->result.lane_instructions += r->ret->lane_instructions;
        pthread_cond_broadcast(&job->budget_cond);
        pthread_mutex_unlock(&job->lock);
}

void sim_isa_participate(SimIsaJob *job, unsigned slot, bool helper, SimIsaWave *waves, uint8_t *lds,
                         SimIsaICacheEntry *icache) {
        const SimIsaDispatch *d = job->d;
        SimIsaResult ret = {};
        SimIsaRun r = {
                .d = d,
                .mem = job->mem,
                .job = job,
                .ret = &ret,
                .lds = lds,
                .lds_size = d->lds_bytes,
                .scratch_slot = slot,
                .lanes = d->wave32 ? 32 : 64,
                .lds_aperture = (uint64_t) (d->sh_mem_bases >> 16) << 48,
                .private_aperture = (uint64_t) (d->sh_mem_bases & 0xffff) << 48,
                .icache = icache,
                .wake_helpers_at = helper ? UINT64_MAX : sim_isa_pool_wake_after(d->pool),
        };

        for (unsigned i = 0; i < SIM_ISA_TLB_SIZE; i++)
                r.tlb[i].page = UINT64_MAX;
        for (unsigned i = 0; i < SIM_ISA_ICACHE_SIZE; i++)
                icache[i].pc = UINT64_MAX;
        for (;;) {
                /* Nothing left to claim: done, whatever runs elsewhere. */
                if (__atomic_load_n(&job->next, __ATOMIC_RELAXED) >=
                    MIN_U(job->n_groups, __atomic_load_n(&job->stop_at, __ATOMIC_RELAXED)))
                        break;
                /* Wave launch: a dispatch of a higher priority goes first; a
                 * helper goes over to it, the caller waits. */
                if (!sim_isa_pool_may_launch(d->pool, job)) {
                        cu_give(&r);
                        if (helper)
                                break;
                        sim_isa_pool_wait_launch(d->pool, job, d->cancel);
                }
                uint64_t index = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED);
                if (index >= job->n_groups || index >= __atomic_load_n(&job->stop_at, __ATOMIC_RELAXED))
                        break;
                select_workgroup(&r, index);
                (void) cu_take(&r); /* without it, run_workgroup() stops before any instruction */
                int k = run_workgroup(&r, waves);
                if (k > 0)
                        break;
                if (k < 0) {
                        job_fail(job, &r);
                        break;
                }
        }
        cu_give(&r);
        /* What this participant's waves may have left in its buffers. */
        for (unsigned i = 0; i < job->wg_waves; i++) {
                if (waves[i].vgpr_dirty < r.vgpr_end)
                        waves[i].vgpr_dirty = r.vgpr_end;
                waves[i].hidden_dirty |= r.hidden_used;
                if (waves[i].dirty_lanes < r.lanes)
                        waves[i].dirty_lanes = r.lanes;
        }
        job_leave(job, &r);
}

/* Checks what the model cannot run; 0 or the error, recorded in r->ret. */
static int check_dispatch(SimIsaRun *r, const SimIsaDispatch *d, uint64_t wg_threads) {
        if (wg_threads == 0 || wg_threads > 1024)
                return sim_isa_fail(r, -EINVAL, d->entry_va, "workgroup size %ux%ux%u is not 1..1024 threads",
                                    d->wg_size[0], d->wg_size[1], d->wg_size[2]);
        for (unsigned i = 0; i < 3; i++)
                if (d->partial[i] > d->wg_size[i])
                        return sim_isa_fail(r, -EINVAL, d->entry_va,
                                            "partial workgroup size %u in dimension %u exceeds the full size %u",
                                            d->partial[i], i, d->wg_size[i]);
        if (d->lds_bytes > MAX_LDS)
                return sim_isa_fail(r, -EINVAL, d->entry_va, "LDS size %u exceeds 64 KiB", d->lds_bytes);
        return 0;
}

int sim_isa_dispatch(const SimIsaDispatch *d, const SimIsaMemory *mem, uint64_t max_wave_instructions, SimIsaResult *ret) {
        SimIsaRun r = { .d = d, .mem = mem, .ret = ret };
        uint64_t wg_threads;
        unsigned lanes = d->wave32 ? 32 : 64, wg_waves;
        int k;

        memset(ret, 0, sizeof(*ret));
        wg_threads = (uint64_t) d->wg_size[0] * d->wg_size[1] * d->wg_size[2];
        k = check_dispatch(&r, d, wg_threads);
        if (k < 0)
                return k;
        if (d->grid[0] == 0 || d->grid[1] == 0 || d->grid[2] == 0)
                return 0;

        wg_waves = (unsigned) ((wg_threads + lanes - 1) / lanes);
        SimIsaWave *waves = calloc(wg_waves, sizeof(SimIsaWave));
        uint8_t *lds = calloc(1, d->lds_bytes ? d->lds_bytes : 1);
        SimIsaICacheEntry *icache = malloc(SIM_ISA_ICACHE_SIZE * sizeof(SimIsaICacheEntry));
        if (!waves || !lds || !icache) {
                free(waves);
                free(lds);
                free(icache);
                return sim_isa_fail(&r, -ENOMEM, d->entry_va, "out of memory for %u waves", wg_waves);
        }

        SimIsaJob job = {
                .d = d,
                .mem = mem,
                .n_groups = (uint64_t) d->grid[0] * d->grid[1] * d->grid[2],
                .wg_waves = wg_waves,
                /* Each thread at work needs a workgroup's worth of the scratch ring. */
                .max_slots = !(d->rsrc2 & 1) ? UINT32_MAX : d->scratch_waves / wg_waves > 1 ? d->scratch_waves / wg_waves : 1,
                .n_slots = 1, /* the caller's */
                .budget = max_wave_instructions,
                .budget_left = max_wave_instructions,
                .fail_index = UINT64_MAX,
        };
        job.stop_at = job.n_groups;
        pthread_mutex_init(&job.lock, NULL);
        pthread_cond_init(&job.budget_cond, NULL);

        sim_isa_pool_open(d->pool, &job);
        sim_isa_participate(&job, 0, false, waves, lds, icache);
        sim_isa_pool_close(d->pool, &job);

        pthread_cond_destroy(&job.budget_cond);
        pthread_mutex_destroy(&job.lock);
        free(waves);
        free(lds);
        free(icache);
        *ret = job.result;
        return ret->error;
}
