/* SPDX-License-Identifier: MIT */
/*
 * Private structures of the GPU layer, shared by gpu-context.c (bring-up,
 * teardown, completion processing), gpu-buffer.c (BOs), gpu-queue.c (SDMA
 * queues, ring writing, fault recovery), gpu-waiter.c (the WAIT_EVENTS
 * thread) and gpu-code-object.c (code objects). Nothing outside daemon/gpu/ includes this; the public face is
 * gpu.h.
 *
 * Threads: everything runs on the caller's (event loop) thread except the
 * waiter, which only touches GpuContext.waiter_* fields under waiter_lock, the
 * ages of its own wait array and the wake eventfd.
 */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "kfd/kfd-ops.h"
#include "kfd/kfd-topology.h"
#include "kfd/kfd-uapi.h"

/* Allocation recipes (kfd-facts §1.5; tinygrad KFDIface.alloc, libhsakmt fmm). */
#define GPU_BO_FLAGS_INTERNAL                                                              \
        (KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |                  \
         KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |             \
         KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE)
/* What the engines and the waves only read (a queue's ring and write
 * pointer, the kernel arguments, dispatch packets and amd_queue_t the daemon
 * writes from the CPU): mapped readable only in the GPU VM (without
 * WRITABLE, amdgpu_amdkfd_gpuvm.c get_pte_flags), so that a client's kernel
 * in the same VM — a relayed ROCm program's, or any client context's —
 * cannot forge the daemon's packets; its write there is a protection fault
 * of its own context. The CPU mapping stays writable. */
#define GPU_BO_FLAGS_INTERNAL_READ_ONLY (GPU_BO_FLAGS_INTERNAL & ~KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
/* Client GTT buffers: fine-grained (COHERENT) system memory like libhsakmt's
 * fine-grained host allocations, so CPU and SDMA see each other's writes
 * without cache maintenance. */
#define GPU_BO_FLAGS_GTT                                                                   \
        (KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT |                  \
         KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE)
/* Scratch and the CWSR save area: only the GPU touches them, so VRAM (the
 * daemon's mapping is never used); in GTT|COHERENT the waves would reach them
 * uncached over PCIe. tinygrad keeps both in VRAM (kfd-facts §7.6);
 * gpu_buffer_alloc_gpu_only() falls back to GTT where VRAM refuses. */
#define GPU_BO_FLAGS_GPU_ONLY                                                              \
        (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC |                   \
         KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE)
/* Client VRAM: must be CPU-visible (PUBLIC, needs a large BAR, kfd-facts §5 #18). */
#define GPU_BO_FLAGS_VRAM                                                                  \
        (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC |                   \
         KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE)

/* A GPU context's client address window (gpu-va-window.c). */
typedef struct GpuVaRange GpuVaRange;
typedef struct GpuVaWindow {
        uint64_t base, size;
        int slot;            /* client slot, or -1 - n: device window n */
        bool open;
        GpuVaRange *free;    /* sorted, disjoint, not adjacent */
} GpuVaWindow;
/* Takes a slot (device window `device` if device >= 0 and that window is
 * free, else a client slot) that must lie inside [gpuvm_base, gpuvm_limit]:
 * -EADDRNOTAVAIL if not, -ENOSPC without a free slot, -EEXIST if the region
 * cannot be reserved. Close it even on failure. */
int gpu_va_window_open(GpuVaWindow *w, int device, uint64_t gpuvm_base, uint64_t gpuvm_limit);
void gpu_va_window_close(GpuVaWindow *w);
/* size bytes (a multiple of 4 KiB) of the window, still PROT_NONE: -ENOMEM when full. */
int gpu_va_alloc(GpuVaWindow *w, uint64_t size, uint64_t *ret);
/* Gives [va, va+size) back, putting the PROT_NONE placeholder over whatever
 * is mapped there (the buffer's CPU mapping ends with it). */
void gpu_va_free(GpuVaWindow *w, uint64_t va, uint64_t size);
bool gpu_va_window_contains(const GpuVaWindow *w, uint64_t va);

/* What the device said about a job, as report() passes it on (a worker
 * passes 256 bytes on), and gpu_context_describe_va()'s longest. */
#define GPU_REPORT_TEXT_MAX 256u
#define GPU_WHERE_TEXT_MAX 96u

/* gpu-fault-text.c: va as a client may be told it — relative to its own
 * buffer or code object, or to the window; never the process's address. */
void gpu_context_describe_va(const GpuContext *c, uint64_t va, char *buf, size_t size);
/* in with every "0x…" that lies in the client address window replaced by
 * gpu_context_describe_va(); cut to size. */
void gpu_context_rewrite_addresses(const GpuContext *c, const char *in, char *out, size_t size);

struct GpuBuffer {
        unsigned n_ref;
        GpuContext *ctx;          /* NULL once the context is gone */
        GpuBuffer *prev, *next;   /* ctx->buffers */

        uint64_t va, size;
        uint64_t handle;          /* KFD handle gpu_id<<32|idr, valid if allocated */
        void *cpu;                /* == (void *) va once mapped */
        uint32_t flags;           /* KFD_IOC_ALLOC_MEM_FLAGS_* (0 for imports) */

        bool internal;            /* rings, fences, event page: not in the stats */
        bool imported;            /* CPU view is our own mmap(2) of the dma-buf */
        bool va_reserved;         /* PROT_NONE reservation in place */
        bool allocated;           /* KFD BO exists (handle) */
        bool gpu_mapped;
        bool cpu_mapped;          /* ops->mmap of the render node (or dma-buf mmap) */
        bool keep_bo;             /* event page: FREE_MEMORY is refused (EPERM) */
        bool gem;                 /* a GEM object of the render node (gem_handle), imported into KFD */
        uint32_t gem_handle;

        /* gpu_buffer_map_in(): a shadow is an import of origin into another
         * context, owned by origin (freed with it, or with its own context);
         * origin lists its shadows. */
        GpuBuffer *origin;        /* weak; NULL unless this is a shadow */
        GpuBuffer *shadows;       /* first shadow of this buffer */
        GpuBuffer *shadow_next;   /* next in origin->shadows */
        bool mapped_in;           /* gpu_buffer_import_mapped(): another process's buffer */
        uint64_t tag;             /* gpu_buffer_set_tag(): the client's name for it, 0: none */
        GpuWatch *watches;        /* gpu_buffer_watch() */
};

/* Most jobs one queue keeps in flight (GpuContextOptions.max_inflight may
 * lower it per context); bounds the timestamp and kernel argument slots. */
#define GPU_QUEUE_MAX_INFLIGHT 1024u

typedef struct GpuInflight {
        uint64_t seq;
        GpuJob job;           /* dispatch: args_data is cleared, the kernargs live in the slot */
        uint64_t ring_start, ring_end; /* monotonic byte positions of its packets */
        GpuBuffer *scratch;   /* dispatch, AQL: the scratch backing it was programmed with (a ref) */
        uint32_t tmpring;     /* dispatch, AQL: COMPUTE_TMPRING_SIZE it was programmed with */
        uint32_t lds_bytes;   /* dispatch: static + dynamic LDS; AQL: the packet's group segment */
        bool dropped;         /* ordered after a failed job of its chain: not on the ring,
                               * reported -ECANCELED when it comes to the head */
} GpuInflight;

/* Compute queues: one kernarg slot per in-flight job (seq % max_inflight),
 * holding the kernarg segment and, in its last 64 bytes, the
 * hsa_kernel_dispatch_packet_t the dispatch pointer points at; after the slots
 * one page holding the amd_queue_t the queue pointer points at. */
#define GPU_KERNARG_SLOT_SIZE 4096u
#define GPU_DISPATCH_PACKET_SIZE 64u
#define GPU_KERNARG_MAX (GPU_KERNARG_SLOT_SIZE - GPU_DISPATCH_PACKET_SIZE)
#define GPU_KERNARG_BO_SIZE(max_inflight) ((uint64_t) (max_inflight) * GPU_KERNARG_SLOT_SIZE + 4096u)

typedef struct GpuQueue {
        unsigned index;
        GpuEngine engine;
        bool kick_pending;   /* jobs written while doorbells were held (gpu_context_hold_doorbells) */
        /* SDMA interrupt moderation while doorbells are held (gpu-queue.c):
         * the last quiet job's TRAP, written as NOPs at trap_at (ring byte
         * offset) until a later job or the release; the jobs and bytes since
         * the last interrupt the queue will raise. */
        bool trap_pending;
        uint64_t trap_at;
        unsigned quiet_jobs;
        uint64_t quiet_bytes;
        uint32_t priority;   /* KFD queue_priority */
        uint32_t max_inflight; /* the context's, a power of two */
        /* Its own SIGNAL events (gpu-queue.c, "Completion"): the completion
         * interrupt the waiter waits for, and the barrier interrupt no one
         * waits for, whose acknowledgement by the kernel each job waits for
         * before it writes a fence; 0 until made. Slot = id. */
        uint32_t done_event, ack_event;
        bool created;
        uint32_t queue_id;
        uint32_t ring_size;
        unsigned ptr_shift;  /* rptr/wptr/doorbell unit: bytes (SDMA, 0) or dwords (PM4, 2) */
        char stop_reason[256]; /* why the device stopped it, if it said (KfdOps.exception_info) */
        GpuBuffer *ring, *rptr_bo, *wptr_bo;
        GpuBuffer *eop, *cwsr;       /* compute only */
        GpuBuffer *kernargs;         /* compute only */
        GpuBuffer *scratch;          /* compute: the current scratch backing, NULL until needed */
        uint32_t scratch_wave_bytes; /* per wave, what ->scratch backs */
        uint64_t doorbell_offset;       /* as returned by CREATE_QUEUE */
        volatile uint64_t *doorbell;    /* inside ctx->doorbells */

        uint64_t wptr;       /* our monotonic byte write pointer */
        uint64_t next_seq;   /* sequence number of the next job (1, 2, ...) */
        uint64_t completed;  /* highest sequence number reported complete */
        uint64_t last_signal_seq; /* the last job with a signal_va (0: none yet) */

        GpuInflight *inflight; /* circular, max_inflight entries */
        unsigned inflight_head, inflight_count;
} GpuQueue;

/*
 * A loaded code object (gpu-code-object.c builds it, gpu-queue.c dispatches
 * from it). The public half of each kernel is GpuKernel (gpu.h); GpuKernelCode
 * is what programming a dispatch needs from its AMDHSA kernel descriptor
 * (kfd-facts §2.4; LLVM AMDGPUUsage "Kernel Descriptor").
 */
/**
 * gpu_kernel_rsrc_check() - whether a client's kernel descriptor may program
 * COMPUTE_PGM_RSRC1/2/3 with these words (gpu-kernel-rsrc.c lists the refused
 * bits and their sources).
 * @gfx: the device's generation, 10 or 11.
 * @err: if not NULL, the reason on failure, naming the lowest refused bit
 *       ("kernel descriptor sets COMPUTE_PGM_RSRC1.PRIV (bit 20), which
 *       clients may not").
 *
 * Returns 0 or -EINVAL.
 */
int gpu_kernel_rsrc_check(unsigned gfx, uint32_t rsrc1, uint32_t rsrc2, uint32_t rsrc3, char *err, size_t errlen);

/* The user SGPRs kernel_code_properties enables (what the dispatch writes;
 * RSRC2.USER_SGPR_COUNT may say more, gpu-code-object.c). */
unsigned gpu_kernel_user_sgprs(uint16_t kernel_code_properties);

typedef struct GpuKernelCode {
        uint64_t kd_va;             /* the 64-byte kernel descriptor, in ->code */
        uint64_t entry_va;          /* kd_va + kernel_code_entry_byte_offset; 256-byte aligned */
        uint32_t rsrc1, rsrc2, rsrc3; /* compute_pgm_rsrc1/2/3 as the descriptor holds them */
        uint16_t code_properties;   /* kernel_code_properties (user SGPR enables, wave32) */
        bool wave32;                /* kernel_code_properties bit 10 */
} GpuKernelCode;

struct GpuCodeObject {
        unsigned n_ref;
        GpuContext *ctx;            /* NULL once the context is gone */
        GpuCodeObject *prev, *next; /* ctx->code_objects */
        GpuBuffer *code;            /* executable buffer holding the loaded PT_LOAD segments at
                                     * code->va + p_vaddr (relocations applied); NULL when parsed
                                     * only (ctx NULL) */
        uint8_t *file;              /* parsed only: our copy of the ELF, to load it later */
        size_t file_size;
        uint64_t image_size;        /* bytes the loaded image occupies */
        GpuCodeObject *origin;      /* loaded by gpu_code_object_load_in(): the parsed object
                                     * it was loaded from (weak), which owns it */
        GpuCodeObject *loads;       /* parsed: what gpu_code_object_load_in() loaded */
        GpuCodeObject *load_next;   /* next in origin->loads */
        unsigned n_kernels;
        GpuKernel *kernels;         /* n_kernels, public information */
        GpuKernelCode *kernel_code; /* n_kernels, same order */
        GpuWatch *watches;          /* gpu_code_object_watch() */
        uint64_t tag;               /* gpu_code_object_set_tag() */
};

/* Puts w on the list *head (off any list it was on). */
void gpu_watch_add(GpuWatch **head, GpuWatch *w);
/* Calls gone() of every watch in *head (and empties it). */
void gpu_watches_fire(GpuWatch **head);

/* Fence memory layout (one GTT|COHERENT|UNCACHED BO): a 32-bit completed-seq
 * word per queue at 8-byte spacing, then per queue max_inflight {begin, end}
 * 64-bit timestamp pairs (8-byte aligned, TIMESTAMP needs it), room for
 * GPU_MAX_QUEUES queues. */
#define GPU_FENCE_WORDS_SIZE 4096u
#define GPU_FENCE_TS_PER_QUEUE(max_inflight) ((uint64_t) (max_inflight) * 16u)

typedef struct GpuFault {
        uint64_t va;
        uint32_t gpu_id;
        bool memory;   /* MEMORY event (else HW_EXCEPTION) */
        bool memory_lost; /* HW_EXCEPTION: the reset lost VRAM contents */
} GpuFault;

#define GPU_MAX_PENDING_FAULTS 16

/*
 * Every cache flush and invalidate the job streams emit, by name: the HDP
 * flush before a doorbell (gpu-queue.c queue_kick), each GCR_CNTL field of
 * the dispatch's ACQUIRE_MEM and each GCR field of the fence word's
 * end-of-pipe RELEASE_MEM (gpu-dispatch.c), each field of the SDMA acquire and release
 * GCR_REQ around a copy or a fill (gpu-queue.c sdma_emit_job, sdma.h).
 * tests/unit/gpu/test-gpu-caches.c keeps the table of what breaks without
 * each and leaves them out one at a time (gpu_context_test_omit_flushes()).
 */
typedef enum GpuFlush {
        GPU_FLUSH_HDP,                  /* HDP_MEM_FLUSH_CNTL store before the doorbell */
        GPU_FLUSH_DISPATCH_GLI_INV,     /* ACQUIRE_MEM GCR_CNTL.GLI_INV (instruction cache) */
        GPU_FLUSH_DISPATCH_GLK_INV,     /* .GLK_INV (scalar data cache) */
        GPU_FLUSH_DISPATCH_GLK_WB,      /* .GLK_WB */
        GPU_FLUSH_DISPATCH_GLV_INV,     /* .GLV_INV (vector L0) */
        GPU_FLUSH_DISPATCH_GL1_INV,     /* .GL1_INV */
        GPU_FLUSH_DISPATCH_GLM,         /* .GLM_WB | .GLM_INV (GL2 metadata) */
        GPU_FLUSH_DISPATCH_GL2_INV,     /* .GL2_INV */
        GPU_FLUSH_DISPATCH_GL2_WB,      /* .GL2_WB */
        GPU_FLUSH_FENCE_GL2_WB,         /* the fence word's RELEASE_MEM GCR GL2_WB */
        GPU_FLUSH_FENCE_GLM,            /* ... its GLM_WB | GLM_INV */
        GPU_FLUSH_SDMA_ACQUIRE_GL2_INV, /* the SDMA acquire GCR_REQ's GL2_INV */
        GPU_FLUSH_SDMA_ACQUIRE_GL2_WB,  /* ... GL2_WB */
        GPU_FLUSH_SDMA_ACQUIRE_GLK,     /* ... GLK_WB | GLK_INV */
        GPU_FLUSH_SDMA_ACQUIRE_GLV_GL1, /* ... GLV_INV | GL1_INV */
        GPU_FLUSH_SDMA_RELEASE_GL2_WB,  /* the SDMA release GCR_REQ's GL2_WB */
        GPU_FLUSH_SDMA_RELEASE_GLK_WB,  /* ... GLK_WB */
        /* The ROCm queue relay (kfd-relay*) adds no flush of its own: its
         * PM4-IB and acquire-scope NOP jobs emit the dispatch acquire's bits
         * (the GPU_FLUSH_DISPATCH_* above), relayed dispatches the dispatch
         * body's, and its queues ring doorbells through gpu_queue_submit()
         * with the HDP flush before each (GPU_FLUSH_HDP); test-gpu-caches.c
         * says why none of them needs a test of its own. */
        GPU_FLUSH_COUNT,
} GpuFlush;

struct GpuContext {
        unsigned doorbell_holds; /* gpu_context_hold_doorbells() nesting */
        const KfdOps *ops;
        int kfd_fd, render_fd;
        KfdNode node;
        GpuDeviceInfo info;
        GpuContextOptions opts;
        uint32_t gpu_id;

        GpuBuffer *buffers;  /* every live buffer of this context */
        GpuCodeObject *code_objects; /* every live code object (detached at free) */
        unsigned n_user_buffers;
        uint64_t user_buffer_bytes;
        GpuContextStats stats;

        /* Events (kfd-facts §1.10) */
        GpuBuffer *event_page;
        bool event_page_registered;
        bool event_page_peer;     /* share_process's page, mapped into this GPU's VM */
        uint32_t shutdown_event;      /* registered the event page; wakes the waiter */
        /* The queues' completion events the waiter waits for: done_events[i]
         * is queue i's; n_done_events grows (release) as queues are added. */
        uint32_t done_events[GPU_MAX_QUEUES];
        atomic_uint n_done_events;
        uint32_t memory_event, hw_exception_event;

        uint32_t max_inflight;       /* per queue, a power of two (GpuContextOptions) */
        KfdQueueSizes queue_sizes;   /* EOP/CWSR sizes compute queues are created with */
        GpuBuffer *fence;
        uint64_t lds_aperture_base, scratch_aperture_base; /* GET_PROCESS_APERTURES_NEW */
        uint64_t gpuvm_base, gpuvm_limit; /* GET_PROCESS_APERTURES_NEW */
        GpuVaWindow va;               /* where every buffer of the context lives */
        void *doorbells;              /* the 8 KiB slice, NULL until the first queue */
        GpuBuffer *hdp_page;          /* the HDP flush register page (MMIO_REMAP), NULL without */
        GpuBuffer *hdp_shared;        /* without: GpuContextOptions.hdp_fallback's (not a reference) */
        uint64_t doorbell_mmap_offset;
        uint32_t omit_flushes;        /* 1 << GpuFlush left out: tests only (gpu_context_test_omit_flushes) */
        GpuQueue queues[GPU_MAX_QUEUES];
        unsigned n_queues;
        /* gpu_buffer_unref_after_jobs(): buffers held until the signal of
         * the last job with one each queue had then has landed (seq; 0:
         * none; a queue made again has them lowered to what it will write,
         * gpu_context_requeue_holds()). */
        struct GpuJobsHold {
                GpuBuffer *buffer;
                uint64_t seq[GPU_MAX_QUEUES];
        } *job_holds;
        unsigned n_job_holds;
        bool compute_ready;           /* queue_sizes and apertures read */

        /* A memory fault ended the context (gpu_context_is_lost()). */
        bool lost;
        char lost_reason[256];

        /* Waiter thread */
        int wake_fd;
        pthread_t waiter;
        bool waiter_started;
        atomic_bool waiter_stop;
        pthread_mutex_t waiter_lock;
        GpuFault waiter_faults[GPU_MAX_PENDING_FAULTS];
        unsigned waiter_n_faults;
        int waiter_error;
};

/* Whether the streams of c emit flush f (all do, but for a test's omissions). */
static inline bool gpu_flush_on(const GpuContext *c, GpuFlush f) {
        return !(c->omit_flushes & 1u << f);
}

/*
 * gpu_context_test_omit_flushes() - for tests only: leave the flushes of
 * mask (1 << GpuFlush each) out of every job c emits from now on, to show
 * that a test catches their absence (test-gpu-caches.c). Nothing but a test
 * calls it; the daemon's streams always carry every flush.
 */
void gpu_context_test_omit_flushes(GpuContext *c, uint32_t mask);

/* gpu-buffer.c */
/*
 * The HDP flush register page of the context's GPU: a one-page MMIO_REMAP BO
 * (ALLOC_MEMORY_OF_GPU, kfd_chardev.c: size must be PAGE_SIZE, the returned
 * mmap_offset is KFD_MMAP_TYPE_MMIO | gpu_id) mapped through the KFD fd
 * (kfd_mmio_mmap), at its reserved VA. Not mapped to the GPU. Returns 0 or
 * the errno of the ioctl or the mmap (the kernel answers ENOMEM when the
 * device has no remap page, e.g. with a CPU page size above 4 KiB).
 */
int gpu_buffer_alloc_hdp_page(GpuContext *c, GpuBuffer **ret);
/* Flushes the HDP (a store to HDP_MEM_FLUSH_CNTL, read back to complete it,
 * as hdp_v5_0_flush_hdp does); nothing without the page. */
void gpu_context_flush_hdp(GpuContext *c);
/* An internal buffer only the GPU uses (scratch, CWSR): in VRAM
 * (GPU_BO_FLAGS_GPU_ONLY), else — no VRAM, or not enough of it visible — in
 * GTT (GPU_BO_FLAGS_GTT). */
int gpu_buffer_alloc_gpu_only(GpuContext *c, uint64_t size, GpuBuffer **ret);
int gpu_buffer_alloc_internal(GpuContext *c, uint64_t size, uint32_t flags, bool internal,
                              GpuBuffer **ret);
/* Context teardown: releases every buffer's kernel objects; shadows of other
 * contexts' buffers are freed, the context's own buffers detached. */
void gpu_buffers_release_all(GpuContext *c);
/* Releases the kernel objects and mappings (not the struct); idempotent. */
void gpu_buffer_release_kernel(GpuBuffer *b);
int gpu_map_to_gpu(GpuContext *c, uint64_t handle);
/* UNMAP_MEMORY_FROM_GPU of handle from c's GPU (c's KFD process): 0 or -errno. */
int gpu_unmap_from_gpu(GpuContext *c, uint64_t handle);

/* gpu-code-object.c: context teardown, loaded copies freed, own ones detached. */
void gpu_code_objects_release_all(GpuContext *c);

/* gpu-queue.c */
/* A SIGNAL event of the context (auto-reset) whose slot is its id, below
 * KFD_SIGNAL_EVENT_LIMIT (gpu-context.c); the destroy is NULL-safe on 0 and
 * zeroes *id. */
int gpu_context_create_signal_event(GpuContext *c, uint32_t *ret_id);
void gpu_context_destroy_event(GpuContext *c, uint32_t *id);
/* The va of event id's slot in the event page. */
uint64_t gpu_context_event_slot_va(const GpuContext *c, uint32_t id);

int gpu_queue_setup(GpuContext *c, GpuQueue *q, unsigned index, GpuEngine engine, uint32_t ring_size,
                    uint32_t priority);
/* A memory fault: fails every job in flight on every queue (see GpuCompletion)
 * and marks the context lost. */
int gpu_context_lose(GpuContext *c, const GpuFault *f, GpuCompletionFn cb, void *userdata);
void gpu_queue_teardown(GpuContext *c, GpuQueue *q);
int gpu_queue_collect(GpuContext *c, GpuQueue *q, GpuCompletionFn cb, void *userdata);
/* A HW_EXCEPTION (a GPU reset, or RAS poison): fails every job in flight with
 * -EIO and marks the context lost. */
int gpu_context_reset(GpuContext *c, const GpuFault *f, GpuCompletionFn cb, void *userdata);
uint32_t *gpu_queue_fence_word(GpuContext *c, unsigned q);
/* Whether the signal FENCE of job seq of q (and of every job before it) has
 * been written; true for seq 0. */
bool gpu_queue_signals_landed(GpuContext *c, GpuQueue *q, uint64_t seq);
/* The last job of q up to seq whose signal write is still to come after q
 * was made again (in flight, not dropped, with a signal_va); 0: none. */
uint64_t gpu_queue_signal_pending_upto(GpuQueue *q, uint64_t seq);
/* q was made again: each hold waits for the last of q's signals up to its
 * own that will still be written (gpu_queue_signal_pending_upto()). */
void gpu_context_requeue_holds(GpuContext *c, GpuQueue *q);
uint64_t gpu_queue_fence_va(GpuContext *c, unsigned q);
/* The word a GpuWait polls and the value it waits for (>=). */
void gpu_wait_target(GpuContext *c, const GpuWait *w, uint64_t *ret_va, uint32_t *ret_value);
uint64_t gpu_queue_ts_va(GpuContext *c, unsigned q, uint64_t seq);

/* gpu-aql.c: the AQL relay's kernel descriptors and HSA completions */
/* Whether the 64 bytes are an amd_kernel_code_t rather than a v3+ kernel
 * descriptor (gpu-aql.c says how it tells). */
bool gpu_aql_is_kernel_code_t(const uint8_t *descriptor);
/* The GPU_JOB_AQL job's descriptor, checked as the loader checks one (for
 * gfx 10 or 11), as what programming the dispatch takes; -EINVAL with err. */
int gpu_aql_kernel_code(unsigned gfx, const GpuJob *job, GpuKernelCode *ret, char *err, size_t errlen);
/* The job's HSA completion if it asks for anything (GPU_JOB_NOP or
 * GPU_JOB_AQL), else NULL. */
const GpuHsaCompletion *gpu_job_hsa(const GpuJob *job);
/* Whether it writes client memory when the job has ended (signal, event,
 * read index), which then waits for the job's end-of-pipe. */
bool gpu_hsa_retires(const GpuHsaCompletion *h);
/* Alignment of its addresses; -EINVAL with err naming the field. */
int gpu_hsa_check(const GpuJob *job, char *err, size_t errlen);

/* gpu-dispatch.c: the compute (PM4) job stream */
/* Writes the kernarg slot of seq and makes sure the queue's scratch backs the
 * kernel; fills f->scratch (a ref) and f->tmpring. Called once per job. */
int gpu_dispatch_prepare(GpuContext *c, GpuQueue *q, const GpuJob *job, uint64_t seq, GpuInflight *f);
/* Dwords of the job's PM4 stream (job->waits holds only the waits to emit);
 * gpu_compute_emit_job() writes exactly that many. */
size_t gpu_compute_job_dwords(const GpuContext *c, const GpuJob *job);
size_t gpu_compute_emit_job(GpuContext *c, GpuQueue *q, const GpuJob *job, const GpuInflight *f,
                            uint32_t *p);
/* Pads ndw dwords of ring tail. */
void gpu_compute_emit_pad(uint32_t *p, size_t ndw);
/* What the device's compute queues can run: LDS bytes per workgroup; whether
 * private_segment_size bytes per work-item are more scratch than a queue
 * backs; the generation (10 or 11) the descriptor rules are those of. */
uint32_t gpu_dispatch_lds_limit(const GpuContext *c);
/* Most scratch one queue backs: a kernel whose one full workgroup (32 waves
 * of 32 lanes) would need more is refused. */
#define GPU_SCRATCH_MAX (512ull << 20)
bool gpu_dispatch_scratch_too_big(const GpuContext *c, uint32_t private_segment_size, bool wave32);
unsigned gpu_gfx_generation(const GpuContext *c);

/* gpu-waiter.c */
int gpu_waiter_start(GpuContext *c);
void gpu_waiter_stop(GpuContext *c);
/* Makes the waiter start a new wait (a queue was added; its event is published). */
void gpu_waiter_rewait(GpuContext *c);
/* Moves pending faults out; returns how many, or the waiter's error. */
int gpu_waiter_take_faults(GpuContext *c, GpuFault *ret, unsigned max);
