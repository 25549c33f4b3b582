/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU's caches: small and deterministic, just enough that a
 * stream missing a flush or an invalidate reads or leaves stale data, as the
 * hardware would (kfd-facts §7.5). Three pieces:
 *
 *  - the HDP: the CPU writes VRAM through the host data path, which may hold
 *    its writes until it is flushed. The simulator cannot see a CPU store, so
 *    it models the effect: the GPU's view of a VRAM page is refilled from the
 *    memory the CPU writes only when an HDP flush came after the view was
 *    filled (and a GL2 invalidate after that, below). The flush is a store to
 *    HDP_MEM_FLUSH_CNTL in the device's MMIO remap page (kfd_mmio_mmap), which
 *    the engines look at before each pass over their queues: any store there
 *    but of SIM_HDP_IDLE (what the register reads between flushes) flushes.
 *
 *  - the GL2, for VRAM BOs (the memory whose GPU mappings are cached; GTT BOs
 *    are COHERENT or UNCACHED here, MTYPE UC: they bypass it, and the model
 *    leaves them to the engines directly). Each VRAM BO has a GPU view, a copy
 *    of it page by page that the shaders and the SDMA engine read and write
 *    (sim_cache_view()); the CPU and every mapping of the BO's memfd see the
 *    memory. A page is clean (the view holds what the memory held when it was
 *    filled, tagged with the HDP flush count then) or dirty (the GPU wrote it;
 *    a pre-image tells which bytes). GL2_WB (RELEASE_MEM/ACQUIRE_MEM GCR, SDMA
 *    GCR_REQ) writes the bytes the GPU changed into the memory and makes the
 *    pages clean; GL2_INV lets every clean page filled before the latest HDP
 *    flush be refilled at its next GPU access. Nothing is ever evicted: a
 *    stream that never writes back leaves the CPU its old data for good.
 *    Kinder than the hardware: a refill happens at the first access after the
 *    invalidate, so it also picks up CPU writes made after the flush; a VRAM
 *    BO made from an existing memfd (an import) fills at its first access;
 *    the CP's own packets (WRITE_DATA, COPY_DATA, DMA_DATA, WAIT_REG_MEM,
 *    RELEASE_MEM data, indirect buffers) and the SDMA fence, timestamp and
 *    poll packets go to the memory directly.
 *
 *  - the instruction cache and the scalar data cache (K$) of each KFD
 *    process: 64-byte lines keyed by GPU address, filled from the GPU view
 *    (so from GL2) when a dispatch fetches code or runs a scalar load (SMEM
 *    s_load / s_buffer_load without GLC), kept across dispatches, dropped
 *    only by ACQUIRE_MEM with GCR_CNTL.GLI_INV (instruction cache) or
 *    GLK_INV (K$), an SDMA GCR_REQ with them, or (K$) the shader's own
 *    s_dcache_inv. Nothing else updates a line: new code at
 *    the address of old code runs the old code, and new kernel arguments in
 *    a kernarg slot that an earlier dispatch read are not seen, until then —
 *    as on the hardware, whose K$ is not coherent with vector stores, the
 *    CPU or the SDMA engine (LLVM AMDGPUUsage, "Memory Model GFX10":
 *    "scalar memory operations are only used to access memory that is
 *    proven to not change during the execution of the kernel dispatch ...
 *    The scalar and vector caches are invalidated between kernel dispatches
 *    by CP"). Scalar stores are not modelled (the
 *    interpreter refuses them), so GLK_WB has nothing to write back.
 *    Kinder than the hardware: one cache of each per process, where the
 *    hardware has one per WGP, shared by every VMID.
 *
 *  - the vector L0 and GL1 of the interpreter threads (sim-isa-vcache.c):
 *    FLAT/GLOBAL loads read through them, and they keep lines across
 *    dispatches; ACQUIRE_MEM with GLV_INV / GL1_INV (or an SDMA GCR_REQ with
 *    them) drops the process's lines from every thread.
 *
 * Each GPU has its own HDP flush page, HDP and GL2 state (SimGpu).
 * Locking: the per-GPU counters are atomics; each BO's state has a lock of its
 * own, because dispatches run without the device lock. A page written by a
 * dispatch or a large SDMA copy that is still running is pinned
 * (sim_cache_view(pin), sim_cache_unpin()) and stays dirty through a write-back
 * that comes meanwhile: its new bytes are not all there yet.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sim-types.h"

/* GCR_CNTL bits the model acts on (ACQUIRE_MEM DW7 and SDMA GCR_REQ
 * GCR_CONTROL; nvd.h PACKET3_ACQUIRE_MEM_GCR_CNTL_*): GLI_INV [1:0], GLK_INV
 * 7, GLV_INV 8, GL1_INV 9, GL2_INV 14, GL2_WB 15. RELEASE_MEM carries GL2_INV and GL2_WB at bits 20 and 21 of
 * its DW1 (PACKET3_RELEASE_MEM_GCR_*). */
#define SIM_GCR_GLI_INV_MASK 0x3u
#define SIM_GCR_GLK_INV (1u << 7)
#define SIM_GCR_GLV_INV (1u << 8)
#define SIM_GCR_GL1_INV (1u << 9)
#define SIM_GCR_GL2_INV (1u << 14)
#define SIM_GCR_GL2_WB (1u << 15)

/* What HDP_MEM_FLUSH_CNTL reads between flushes; a store of any other value
 * is a flush. */
#define SIM_HDP_IDLE 0xFFFFFFFFu

/* The GL2 state of bo if it is cached memory (VRAM), else nothing. fresh: the
 * BO is new and zero (its view starts clean); else its view fills at the
 * first GPU access. Returns 0 or -ENOMEM. */
int sim_cache_bo_init(SimBo *bo, bool fresh);
void sim_cache_bo_free(SimBo *bo);
/* A GPU reset lost VRAM: the BO's memory reads zeros, and so does its view. */
void sim_cache_bo_lost(SimBo *bo);
/* The mapping of bo's GL2 view (bo->size bytes; NULL without one), whose
 * pages sim-populate.c backs ahead of the engines. take: the BO is being
 * freed, and the mapping becomes the caller's to munmap. Locked. */
uint8_t *sim_cache_view_pages(SimBo *bo, bool take);

/*
 * sim_cache_view() - the GPU's view of [off, off + len) of bo (in bounds,
 * len >= 1) for an engine access: a pointer into the GL2 view of a cached BO,
 * refilled where an HDP flush and a GL2 invalidate allow it, or into bo->host
 * for memory that is not cached. write: the pages become dirty (their
 * pre-image is kept); pin: they stay dirty until sim_cache_unpin() of the same
 * range. Safe without the device lock.
 */
uint8_t *sim_cache_view(SimBo *bo, uint64_t off, uint64_t len, bool write, bool pin);
/*
 * sim_cache_view(write, pin) for an engine that writes every byte of the
 * range before it unpins it (an SDMA copy's or fill's destination): a page
 * the range covers whole is neither filled nor pre-imaged — every one of its
 * bytes is the GPU's, and goes to memory at the write-back, as the GL2's
 * byte mask would send it. What it saves is two page copies and the compare.
 */
uint8_t *sim_cache_view_overwrite(SimBo *bo, uint64_t off, uint64_t len);
void sim_cache_unpin(SimBo *bo, uint64_t off, uint64_t len);

/* GPU g's HDP flush page (its MMIO remap page, a SimBo of 4 KiB): a new
 * reference in *ret, made if no MMIO_REMAP handle holds one. 0 or -ENOMEM.
 * Locked. */
int sim_cache_mmio_bo(SimGpu *g, SimBo **ret);
/* Takes the HDP flush stores made on g's page since the last call (see the top). Locked. */
void sim_cache_poll_hdp(SimGpu *g);
/* A GL2 request of g's whole cache: write back (GL2_WB), then invalidate
 * (GL2_INV). Each GPU has its own HDP and GL2; a VRAM BO's GPU view is that
 * of the GPU whose memory it is (SimBo.gpu), also when a peer maps it.
 * Locked. */
void sim_cache_gl2(SimGpu *g, bool writeback, bool invalidate);
/* The bytes a GL2_WB of g would write now: its dirty pages, 4 KiB each.
 * Locked. */
uint64_t sim_cache_gl2_dirty_bytes(SimGpu *g);

/* A new owner id for a process's vector L0/GL1 lines (SimIsaVectorCaches),
 * never 0 and never given twice. */
uint64_t sim_cache_owner_new(void);
/* GLV_INV and GL1_INV (ACQUIRE_MEM GCR_CNTL, SDMA GCR_REQ) on p's vector
 * caches: every thread's lines of p go. Safe without the device lock. */
void sim_vcache_invalidate(SimProcess *p, uint32_t gcr);

/* The process's instruction cache and scalar data cache, made at its first
 * dispatch. Locked. */
int sim_icache_get(SimProcess *p, SimLineCache **ret);
int sim_kcache_get(SimProcess *p, SimLineCache **ret);
void sim_line_cache_free(SimLineCache *lc);
/* GLI_INV or GLK_INV: every line goes (nothing without the cache). Safe
 * without the device lock. */
void sim_line_cache_invalidate(SimLineCache *lc);
/*
 * The dword at va (dword aligned) through lc; a line missing is filled by
 * fill(userdata, line_va, 64, false, &host) (the dispatch's translation, GPU
 * view); a line that cannot be mapped whole is read dword by dword,
 * uncached. Returns 0 or the translation's -EFAULT. Safe without the device
 * lock.
 */
int sim_line_cache_read(SimLineCache *lc, uint64_t va, uint32_t *ret,
                        int (*fill)(void *userdata, uint64_t va, uint64_t len, bool write, void **ret_host),
                        void *userdata);
