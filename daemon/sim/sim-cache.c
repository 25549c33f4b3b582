/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU's HDP, GL2, instruction and scalar data caches, and the
 * invalidate generations of the vector L0/GL1 (see sim-cache.h). The GL2 view
 * and the pre-images of a VRAM BO are anonymous mappings of its size, so the
 * pages of a BO the GPU never writes cost nothing (the view of one it writes
 * or exports is backed whole, sim-populate.h); the page states are an array
 * beside them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kfd/kfd-uapi.h"
#include "sim-cache.h"
#include "sim-device.h"
#include "sim-dma-move.h"
#include "sim-memory.h"
#include "sim-process.h"
#include "util/macro.h"

#define PAGE PAGE_SIZE_4K
#define LINE 64u
/* One RDNA2 SQC instruction cache (32 KiB) and one scalar data cache (16 KiB),
 * each shared by the two CUs of a WGP (RDNA whitepaper, "Compute Unit"); the
 * model has one of each per process. */
#define ICACHE_LINES 512u
#define KCACHE_LINES 256u

enum {
        PAGE_CLEAN,   /* view == the memory as of the fill (gen) */
        PAGE_DIRTY,   /* the GPU wrote it; pre holds the view before the first write */
        PAGE_INVALID, /* the view was never filled: fill at the next access */
        PAGE_WRITTEN, /* the GPU wrote all of it (sim_cache_view_overwrite): the view is the page */
};

typedef struct CachePage {
        uint32_t gen;      /* the HDP flush count when the view was filled */
        uint16_t writers;  /* running engines writing it (pins) */
        uint8_t state;
} CachePage;

struct SimBoCache {
        pthread_mutex_t lock;
        uint8_t *view, *pre; /* bo->size each */
        CachePage *pages;
        uint32_t *dirty;     /* indices of the dirty pages, n_dirty of them */
        size_t n_dirty;
};

typedef struct CacheLine {
        uint64_t va;         /* line address; 0 with !valid */
        bool valid;
        uint8_t bytes[LINE];
} CacheLine;

struct SimLineCache {
        pthread_mutex_t lock;
        unsigned n_lines;
        CacheLine lines[];
};

static uint8_t *anon(uint64_t size) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

void sim_cache_bo_free(SimBo *bo) {
        SimBoCache *c = bo->cache;

        if (!c)
                return;
        if (c->n_dirty > 0)
                __atomic_sub_fetch(&bo->gpu->n_dirty_bos, 1, __ATOMIC_ACQ_REL);
        if (c->view)
                munmap(c->view, bo->size);
        if (c->pre)
                munmap(c->pre, bo->size);
        free(c->pages);
        free(c->dirty);
        pthread_mutex_destroy(&c->lock);
        free(c);
        bo->cache = NULL;
}

int sim_cache_bo_init(SimBo *bo, bool fresh) {
        uint64_t n = bo->size / PAGE;
        SimBoCache *c;

        if (!(bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM))
                return 0;
        c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        pthread_mutex_init(&c->lock, NULL);
        bo->cache = c;
        c->view = anon(bo->size);
        c->pre = anon(bo->size);
        c->pages = calloc(n, sizeof *c->pages);
        c->dirty = calloc(n, sizeof *c->dirty);
        if (!c->view || !c->pre || !c->pages || !c->dirty) {
                sim_cache_bo_free(bo);
                return -ENOMEM;
        }
        /* A new BO's memory and view are both zero: clean as of now. */
        uint32_t gen = __atomic_load_n(&bo->gpu->hdp_gen, __ATOMIC_ACQUIRE);
        for (uint64_t i = 0; i < n; i++)
                c->pages[i] = (CachePage) { .gen = gen, .state = fresh ? PAGE_CLEAN : PAGE_INVALID };
        return 0;
}

uint8_t *sim_cache_view_pages(SimBo *bo, bool take) {
        SimBoCache *c = bo->cache;
        uint8_t *view;

        if (!c)
                return NULL;
        view = c->view;
        if (take)
                c->view = NULL;
        return view;
}

void sim_cache_bo_lost(SimBo *bo) {
        SimBoCache *c = bo->cache;

        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        (void) madvise(c->view, bo->size, MADV_DONTNEED);
        for (uint64_t i = 0; i < bo->size / PAGE; i++) {
                c->pages[i].state = PAGE_CLEAN;
                c->pages[i].gen = __atomic_load_n(&bo->gpu->hdp_gen, __ATOMIC_ACQUIRE);
        }
        if (c->n_dirty > 0)
                __atomic_sub_fetch(&bo->gpu->n_dirty_bos, 1, __ATOMIC_ACQ_REL);
        c->n_dirty = 0;
        pthread_mutex_unlock(&c->lock);
}

static void mark_dirty(SimBo *bo, SimBoCache *c, uint64_t i) {
        if (c->n_dirty++ == 0)
                __atomic_add_fetch(&bo->gpu->n_dirty_bos, 1, __ATOMIC_ACQ_REL);
        c->dirty[c->n_dirty - 1] = (uint32_t) i;
}

/* Brings page i of the view up to date for an access; locked by c->lock.
 * whole: the access writes every byte of the page. */
static void page_access(SimBo *bo, SimBoCache *c, uint64_t i, bool write, bool pin, bool whole, uint32_t hdp_gen,
                        uint32_t inv_gen) {
        CachePage *pg = &c->pages[i];
        uint64_t o = i * PAGE;

        if (write && whole && pg->state != PAGE_DIRTY && pg->state != PAGE_WRITTEN) {
                pg->state = PAGE_WRITTEN;
                mark_dirty(bo, c, i);
                if (pin)
                        pg->writers++;
                return;
        }
        if (pg->state == PAGE_INVALID || (pg->state == PAGE_CLEAN && pg->gen < inv_gen)) {
                /* An HDP flush, then a GL2 invalidate, since the view was filled. */
                memcpy(c->view + o, bo->host + o, PAGE);
                pg->state = PAGE_CLEAN;
                pg->gen = hdp_gen;
        }
        if (!write)
                return;
        if (pg->state == PAGE_CLEAN) {
                memcpy(c->pre + o, c->view + o, PAGE);
                pg->state = PAGE_DIRTY;
                mark_dirty(bo, c, i);
        }
        if (pin)
                pg->writers++;
}

static uint8_t *view(SimBo *bo, uint64_t off, uint64_t len, bool write, bool pin, bool overwrite) {
        SimBoCache *c = bo->cache;

        if (!c)
                return bo->host + off;
        uint32_t hdp_gen = __atomic_load_n(&bo->gpu->hdp_gen, __ATOMIC_ACQUIRE);
        uint32_t inv_gen = __atomic_load_n(&bo->gpu->gl2_inv_gen, __ATOMIC_ACQUIRE);
        pthread_mutex_lock(&c->lock);
        for (uint64_t i = off / PAGE; i <= (off + len - 1) / PAGE; i++) {
                bool whole = overwrite && i * PAGE >= off && (i + 1) * PAGE <= off + len;
                page_access(bo, c, i, write, pin, whole, hdp_gen, inv_gen);
        }
        pthread_mutex_unlock(&c->lock);
        return c->view + off;
}

uint8_t *sim_cache_view(SimBo *bo, uint64_t off, uint64_t len, bool write, bool pin) {
        return view(bo, off, len, write, pin, false);
}

uint8_t *sim_cache_view_overwrite(SimBo *bo, uint64_t off, uint64_t len) {
        return view(bo, off, len, true, true, true);
}

void sim_cache_unpin(SimBo *bo, uint64_t off, uint64_t len) {
        SimBoCache *c = bo->cache;

        if (!c)
                return;
        pthread_mutex_lock(&c->lock);
        for (uint64_t i = off / PAGE; i <= (off + len - 1) / PAGE; i++)
                if (c->pages[i].writers > 0)
                        c->pages[i].writers--;
        pthread_mutex_unlock(&c->lock);
}

/* Whether every byte of x is nonzero (no zero byte: the "haszero" test). */
static bool all_bytes_set(uint64_t x) {
        return ((x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull) == 0;
}

/* The bytes of page o that the GPU changed since its pre-image go to memory,
 * and only those (what the host wrote meanwhile to the others stays), a
 * word at a time where the GPU changed all of it. */
static void page_write_back(SimBo *bo, SimBoCache *c, uint64_t o) {
        const uint8_t *v = c->view + o, *pre = c->pre + o;
        uint8_t *mem = bo->host + o;

        for (uint64_t k = 0; k < PAGE; k += 8) {
                uint64_t now, before;

                memcpy(&now, v + k, 8);
                memcpy(&before, pre + k, 8);
                if (now == before)
                        continue;
                if (all_bytes_set(now ^ before)) {
                        memcpy(mem + k, &now, 8);
                        continue;
                }
                for (uint64_t b = k; b < k + 8; b++)
                        if (v[b] != pre[b])
                                mem[b] = v[b];
        }
}

/* Whether page i was written whole and nobody writes it now (locked). */
static bool written_whole(const SimBoCache *c, uint32_t i) {
        return c->pages[i].state == PAGE_WRITTEN && c->pages[i].writers == 0;
}

/*
 * The dirty pages go to memory. Pages written whole go as runs of
 * consecutive ones (a large copy lists its pages in order) in one
 * sim_dma_copy() each, with the streaming stores of the engine's own moves:
 * page by page, the write-back of a 256 MiB copy took 1.5 times the CPU of
 * the copy itself (perf: a rep movsq per 4 KiB page).
 */
static void bo_write_back(SimBo *bo) {
        SimBoCache *c = bo->cache;
        size_t kept = 0;

        pthread_mutex_lock(&c->lock);
        if (c->n_dirty == 0) { /* the caller looked without the lock */
                pthread_mutex_unlock(&c->lock);
                return;
        }
        for (size_t k = 0; k < c->n_dirty; k++) {
                uint32_t i = c->dirty[k];
                if (c->pages[i].writers > 0) {
                        c->dirty[kept++] = i; /* still being written: it stays dirty */
                        continue;
                }
                if (c->pages[i].state == PAGE_WRITTEN) {
                        size_t n = 1;
                        while (k + n < c->n_dirty && c->dirty[k + n] == i + n && written_whole(c, i + (uint32_t) n))
                                n++;
                        sim_dma_copy(bo->host + (uint64_t) i * PAGE, c->view + (uint64_t) i * PAGE, n * PAGE);
                        for (size_t m = 0; m < n; m++)
                                c->pages[i + m].state = PAGE_CLEAN;
                        k += n - 1;
                        continue;
                }
                page_write_back(bo, c, (uint64_t) i * PAGE);
                c->pages[i].state = PAGE_CLEAN;
        }
        if (kept == 0)
                __atomic_sub_fetch(&bo->gpu->n_dirty_bos, 1, __ATOMIC_ACQ_REL);
        c->n_dirty = kept;
        pthread_mutex_unlock(&c->lock);
}

void sim_cache_gl2(SimGpu *g, bool writeback, bool invalidate) {
        /* Every job's streams write back: the walk only when a BO of g is dirty. */
        if (writeback && __atomic_load_n(&g->n_dirty_bos, __ATOMIC_ACQUIRE) > 0)
                for (SimBo *bo = g->device->bos; bo; bo = bo->next)
                        if (bo->cache && bo->gpu == g)
                                bo_write_back(bo);
        if (invalidate)
                __atomic_store_n(&g->gl2_inv_gen, __atomic_load_n(&g->hdp_gen, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
}

uint64_t sim_cache_gl2_dirty_bytes(SimGpu *g) {
        uint64_t n = 0;

        if (__atomic_load_n(&g->n_dirty_bos, __ATOMIC_ACQUIRE) == 0)
                return 0;
        for (SimBo *bo = g->device->bos; bo; bo = bo->next)
                if (bo->cache && bo->gpu == g) {
                        pthread_mutex_lock(&bo->cache->lock);
                        n += bo->cache->n_dirty;
                        pthread_mutex_unlock(&bo->cache->lock);
                }
        return n * PAGE;
}

int sim_cache_mmio_bo(SimGpu *g, SimBo **ret) {
        int r;

        /* g->mmio_bo is weak: the handles hold the BO (sim-memory.c bo_free
         * clears the pointer), so a device whose processes are gone keeps no
         * fd for it. */
        if (g->mmio_bo) {
                *ret = sim_bo_ref(g->mmio_bo);
                return 0;
        }
        r = sim_bo_new(g->device, g, PAGE, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, &g->mmio_bo);
        if (r < 0)
                return r;
        __atomic_store_n((uint32_t *) (void *) (g->mmio_bo->host + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL), SIM_HDP_IDLE,
                         __ATOMIC_RELEASE);
        *ret = g->mmio_bo;
        return 0;
}

void sim_cache_poll_hdp(SimGpu *g) {
        if (!g->mmio_bo)
                return;
        uint32_t v = __atomic_exchange_n((uint32_t *) (void *) (g->mmio_bo->host + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL),
                                         SIM_HDP_IDLE, __ATOMIC_ACQ_REL);
        if (v != SIM_HDP_IDLE)
                __atomic_add_fetch(&g->hdp_gen, 1, __ATOMIC_ACQ_REL);
}

static int line_cache_get(SimLineCache **c, unsigned n_lines, SimLineCache **ret) {
        if (!*c) {
                SimLineCache *lc = calloc(1, sizeof *lc + n_lines * sizeof lc->lines[0]);
                if (!lc)
                        return -ENOMEM;
                pthread_mutex_init(&lc->lock, NULL);
                lc->n_lines = n_lines;
                *c = lc;
        }
        *ret = *c;
        return 0;
}

uint64_t sim_cache_owner_new(void) {
        static uint64_t next;
        return __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
}

void sim_vcache_invalidate(SimProcess *p, uint32_t gcr) {
        if (gcr & SIM_GCR_GLV_INV)
                __atomic_add_fetch(&p->glv_gen, 1, __ATOMIC_ACQ_REL);
        if (gcr & SIM_GCR_GL1_INV)
                __atomic_add_fetch(&p->gl1_gen, 1, __ATOMIC_ACQ_REL);
}

int sim_icache_get(SimProcess *p, SimLineCache **ret) {
        return line_cache_get(&p->icache, ICACHE_LINES, ret);
}

int sim_kcache_get(SimProcess *p, SimLineCache **ret) {
        return line_cache_get(&p->kcache, KCACHE_LINES, ret);
}

void sim_line_cache_free(SimLineCache *lc) {
        if (!lc)
                return;
        pthread_mutex_destroy(&lc->lock);
        free(lc);
}

void sim_line_cache_invalidate(SimLineCache *lc) {
        if (!lc)
                return;
        pthread_mutex_lock(&lc->lock);
        for (unsigned i = 0; i < lc->n_lines; i++)
                lc->lines[i].valid = false;
        pthread_mutex_unlock(&lc->lock);
}

int sim_line_cache_read(SimLineCache *lc, uint64_t va, uint32_t *ret,
                     int (*fill)(void *userdata, uint64_t va, uint64_t len, bool write, void **ret_host),
                     void *userdata) {
        uint64_t line_va = va & ~(uint64_t) (LINE - 1);
        CacheLine *l = &lc->lines[(line_va / LINE) % lc->n_lines];
        void *host;
        int r = 0;

        pthread_mutex_lock(&lc->lock);
        if (!l->valid || l->va != line_va) {
                if (fill(userdata, line_va, LINE, false, &host) >= 0) {
                        memcpy(l->bytes, host, LINE);
                        l->va = line_va;
                        l->valid = true;
                } else {
                        /* Near the end of a mapping: this dword alone, uncached. */
                        r = fill(userdata, va, 4, false, &host);
                        if (r >= 0)
                                memcpy(ret, host, 4);
                        pthread_mutex_unlock(&lc->lock);
                        return r;
                }
        }
        memcpy(ret, l->bytes + (va - line_va), 4);
        pthread_mutex_unlock(&lc->lock);
        return r;
}
