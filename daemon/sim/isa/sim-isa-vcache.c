/* SPDX-License-Identifier: MIT */
/*
 * The vector L0 and GL1 caches of the interpreter (SimIsaMemory.vcache). Each
 * thread that runs workgroups stands for a CU and has an L0 and a GL1 of its
 * own, thread-local and kept across dispatches (freed when the thread ends),
 * so there is no lock on the load path. RDNA2 sizes (RDNA whitepaper, "the
 * L0 ... 16KB", "the graphics L1 ... 128KB", 128-byte lines): 128 and 1024
 * direct-mapped lines.
 *
 * A non-atomic vector load of global memory without GLC reads the L0, an L0
 * miss reads the GL1 (unless DLC) and fills the L0, a GL1 miss reads the
 * memory as translate gives it (the GL2 view, sim-cache.h) and fills the GL1;
 * GLC reads around the L0, DLC around the GL1 (LLVM AMDGPUUsage, memory model
 * GFX10: "glc=1 dlc=1" loads for agent scope). Stores and atomics go to
 * memory and drop the lines of this thread they touch (its own writes are seen
 * by its own loads); the lines other threads hold stay as they were, as other
 * CUs' L0s do. buffer_gl0_inv drops this thread's L0, buffer_gl1_inv and
 * s_gl1_inv its GL1. The CP's ACQUIRE_MEM GLV_INV / GL1_INV (and an SDMA
 * GCR_REQ with them) bump the owner's generations, which drops every thread's
 * lines of that owner at its next load. Between dispatches that is the only
 * way a line goes, so a stream without them reads what an earlier dispatch
 * read (LLVM AMDGPUUsage: "The scalar and vector caches are invalidated
 * between kernel dispatches by CP").
 *
 * Kinder than the hardware: private (scratch) and LDS accesses are not
 * cached; an access that crosses a line is read around the caches; a thread
 * drops its lines when it runs another owner's workgroups (the hardware tags
 * lines by VMID and keeps them).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sim-isa-internal.h"

#define VLINE 128u
#define L0_LINES 128u
#define GL1_LINES 1024u

typedef struct VLine {
        uint64_t va; /* line address; UINT64_MAX: empty */
        uint8_t bytes[VLINE];
} VLine;

typedef struct VCache {
        uint64_t owner;
        uint32_t l0_gen, gl1_gen; /* the owner's generations the lines were filled under */
        VLine l0[L0_LINES], gl1[GL1_LINES];
} VCache;

static pthread_key_t vcache_key;
static pthread_once_t vcache_once = PTHREAD_ONCE_INIT;
static __thread VCache *vcache;

static void vcache_key_make(void) {
        (void) pthread_key_create(&vcache_key, free);
}

static void lines_drop(VLine *lines, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                lines[i].va = UINT64_MAX;
}

/* This thread's caches, emptied if they hold lines of another owner or of
 * generations an invalidate ended; NULL without memory (loads then read
 * around them). */
static VCache *vcache_for(const SimIsaVectorCaches *vc) {
        uint32_t l0 = __atomic_load_n(vc->glv_gen, __ATOMIC_ACQUIRE), gl1 = __atomic_load_n(vc->gl1_gen, __ATOMIC_ACQUIRE);
        VCache *c = vcache;

        if (!c) {
                (void) pthread_once(&vcache_once, vcache_key_make);
                c = calloc(1, sizeof *c);
                if (!c)
                        return NULL;
                if (pthread_setspecific(vcache_key, c) != 0) {
                        free(c);
                        return NULL;
                }
                vcache = c;
        }
        if (c->owner != vc->owner) {
                c->owner = vc->owner;
                c->l0_gen = l0 + 1; /* both dropped below */
                c->gl1_gen = gl1 + 1;
        }
        if (c->l0_gen != l0) {
                lines_drop(c->l0, L0_LINES);
                c->l0_gen = l0;
        }
        if (c->gl1_gen != gl1) {
                lines_drop(c->gl1, GL1_LINES);
                c->gl1_gen = gl1;
        }
        return c;
}

int sim_isa_vcache_load(SimIsaRun *r, const SimIsaWave *w, uint64_t va, unsigned len, bool glc, bool dlc, void *dst) {
        uint64_t line_va = va & ~(uint64_t) (VLINE - 1);
        VCache *c = vcache_for(r->mem->vcache);
        VLine *l0, *gl1;
        void *p;
        int k;

        /* The access itself first: a fault names it, not its line. */
        k = sim_isa_mem(r, w, va, len, false, &p);
        if (k < 0)
                return k;
        if (!c || (va & (VLINE - 1)) + len > VLINE) {
                memcpy(dst, p, len);
                return 0;
        }
        l0 = &c->l0[(line_va / VLINE) % L0_LINES];
        gl1 = &c->gl1[(line_va / VLINE) % GL1_LINES];
        if (!glc && l0->va == line_va) {
                memcpy(dst, l0->bytes + (va - line_va), len);
                return 0;
        }
        const uint8_t *src;
        if (!dlc && gl1->va == line_va)
                src = gl1->bytes;
        else {
                /* The line lies in va's page, which the host maps in one piece. */
                src = (const uint8_t *) p - (va - line_va);
                if (!dlc) {
                        memcpy(gl1->bytes, src, VLINE);
                        gl1->va = line_va;
                        src = gl1->bytes;
                }
        }
        if (!glc) {
                memcpy(l0->bytes, src, VLINE);
                l0->va = line_va;
        }
        memcpy(dst, src + (va - line_va), len);
        return 0;
}

void sim_isa_vcache_wrote(SimIsaRun *r, uint64_t va, unsigned len) {
        VCache *c = vcache;

        if (!c || c->owner != r->mem->vcache->owner)
                return;
        for (uint64_t line_va = va & ~(uint64_t) (VLINE - 1); line_va < va + len; line_va += VLINE) {
                VLine *l0 = &c->l0[(line_va / VLINE) % L0_LINES], *gl1 = &c->gl1[(line_va / VLINE) % GL1_LINES];
                if (l0->va == line_va)
                        l0->va = UINT64_MAX;
                if (gl1->va == line_va)
                        gl1->va = UINT64_MAX;
        }
}

void sim_isa_vcache_invalidate(SimIsaRun *r, bool l0, bool gl1) {
        VCache *c = vcache;

        if (!r->mem->vcache || !c)
                return;
        if (l0)
                lines_drop(c->l0, L0_LINES);
        if (gl1)
                lines_drop(c->gl1, GL1_LINES);
}
