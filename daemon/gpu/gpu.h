/* SPDX-License-Identifier: MIT */
/*
 * The GPU context: one KFD process context on one GPU node — the render node,
 * the VM, the buffers, the event page, the hardware queues, the fence memory —
 * and the waiter thread that sleeps in WAIT_EVENTS and wakes the event loop
 * through an eventfd. Owned by the Manager; its interface takes plain values
 * (sizes, GPU addresses, queue indexes), never sessions, so a context can later
 * move into a per-client worker process.
 *
 * Everything here runs unchanged on the real kernel and on the simulated GPU:
 * it only talks to the kernel through the KfdOps table.
 *
 * Errors are negative errno values. Functions that may be called on the event
 * loop never block.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kfd/kfd-ops.h"

typedef struct GpuContext GpuContext;
typedef struct GpuBuffer GpuBuffer;
typedef struct GpuCodeObject GpuCodeObject;

/*
 * A watch on a buffer or a code object: gone() is called once, when the
 * object is freed (its last reference dropped, or its context freed), for
 * whoever keeps a copy of it elsewhere — a worker process that imported a
 * buffer or loaded a code object — and must let go of it then. The struct is
 * the caller's (embed it); the fields after gone are private.
 */
typedef struct GpuWatch GpuWatch;
struct GpuWatch {
        void (*gone)(GpuWatch *w);
        GpuWatch *prev, *next;
        GpuWatch **head;
};
void gpu_buffer_watch(GpuBuffer *b, GpuWatch *w);
void gpu_code_object_watch(GpuCodeObject *co, GpuWatch *w);
/* Stops watching (gone() will not be called); NULL-safe, idempotent. */
void gpu_watch_cancel(GpuWatch *w);

/*
 * The client address window (gpu-va-window.c): every address of a GPU
 * context — what a client's kernel is given, and what a fault names — lies in
 * this region, which each process running GPU contexts reserves at one fixed
 * address, independent of ASLR. The daemon's device contexts (one per GPU
 * served; or the primary context of a process) have
 * [GPU_VA_REGION_BASE, GPU_VA_CLIENT_BASE), split into
 * gpu_va_set_device_windows() windows, one each; every other context a slot
 * of gpu_va_client_slot_size() bytes in [GPU_VA_CLIENT_BASE, GPU_VA_REGION_END).
 */
#define GPU_VA_REGION_BASE 0x120000000000ULL
#define GPU_VA_CLIENT_BASE 0x160000000000ULL
#define GPU_VA_REGION_END 0x1e0000000000ULL
#define GPU_VA_MAX_DEVICE_WINDOWS 8u
/*
 * Reserves the region in this process (PROT_NONE, MAP_NORESERVE,
 * MAP_FIXED_NOREPLACE); idempotent. Call it at start, before threads that
 * map memory run; gpu_context_new() does it otherwise. -EEXIST when anything
 * is mapped there already, another -errno from mmap.
 */
int gpu_va_region_reserve(void);
/*
 * Room for n secondary contexts of this process at once: slots of
 * 8 TiB / max(128, n rounded up to a power of two). Before the first
 * secondary context only: -EBUSY after it if the size would change;
 * -EINVAL past 16384.
 */
int gpu_va_set_client_slots(unsigned n);
uint64_t gpu_va_client_slot_size(void);
/*
 * Device windows for n GPUs' device contexts (1 to GPU_VA_MAX_DEVICE_WINDOWS):
 * 4 TiB / n each, device context k taking window k
 * (GpuContextOptions.device_window). Before any is taken, or at the same n:
 * -EBUSY otherwise; -EINVAL out of range.
 */
int gpu_va_set_device_windows(unsigned n);
uint64_t gpu_va_device_window_size(void);

typedef enum GpuPlacement {
        GPU_PLACEMENT_GTT = 0,  /* system memory */
        GPU_PLACEMENT_VRAM = 1, /* device memory (CPU-visible: PUBLIC, needs large BAR) */
} GpuPlacement;

typedef enum GpuEngine {
        GPU_ENGINE_SDMA = 0,
        GPU_ENGINE_COMPUTE = 1,
        _GPU_ENGINE_MAX,
} GpuEngine;

#define GPU_MAX_QUEUES 8

typedef struct GpuDeviceInfo {
        char backend[8];            /* KfdOps name: "kfd" or "sim" */
        uint32_t gpu_id;
        char gfx_name[16];          /* "gfx1030" */
        char name[64];              /* topology node name */
        uint32_t gfx_target_version;
        uint32_t vendor_id, device_id;
        uint32_t cu_count;
        uint32_t wave_front_size;
        uint32_t lds_size_in_kb;
        uint32_t num_sdma_engines, num_sdma_queues_per_engine, num_cp_queues;
        uint32_t drm_render_minor;
        char pci_address[16];       /* "0000:03:00.0", from the topology (kfd_node_pci_name()) */
        uint32_t kfd_major, kfd_minor;
        /* Buffers are GEM objects of the render node, exported with PRIME and
         * imported into KFD: the kernel's KFD has no EXPORT_DMABUF (uapi <
         * 1.12, kfd-facts §7.4). Chosen at bring-up from GET_VERSION. */
        bool render_node_buffers;
        /* The HDP flush page is mapped (an MMIO_REMAP BO through /dev/kfd):
         * the context flushes the HDP before each doorbell, so what the CPU
         * wrote into VRAM reaches the GPU (gpu-queue.c). */
        bool hdp_flush;
        /* Daemon file descriptors each buffer keeps open while it exists:
         * 0 on the kernel, 1 on the simulator (KfdOps.fds_per_bo). */
        unsigned fds_per_buffer;
        uint64_t vram_size;         /* bytes, 0 if unknown */
        uint64_t timestamp_hz;      /* GPU timestamp counter frequency */
        unsigned n_queues;          /* hardware queues created by this context */
        GpuEngine queue_engine[GPU_MAX_QUEUES];
        uint32_t queue_priority[GPU_MAX_QUEUES]; /* KFD queue_priority each was created with */
} GpuDeviceInfo;

/* GpuContextOptions.flags */
enum {
        /* A secondary KFD context of this process (AMDKFD_IOC_CREATE_PROCESS,
         * uapi >= 1.19; kfd-facts §7.3): its own GPU VM, events, doorbells,
         * queues and fault domain, on a fresh /dev/kfd fd and a fresh render
         * fd. -EOPNOTSUPP on an older kernel. */
        GPU_CONTEXT_SECONDARY = 1u << 0,
        /* Create no SDMA / no compute queues at bring-up; compute queues can
         * be added later with gpu_context_add_queue(). */
        GPU_CONTEXT_NO_SDMA = 1u << 1,
        GPU_CONTEXT_NO_COMPUTE = 1u << 2,
        /* A client's context that is the primary KFD context of its process
         * (a worker's): its addresses come from a client slot of the window
         * (GPU_VA_CLIENT_BASE...), as a secondary context's do, never from
         * the range the daemon's device context has. */
        GPU_CONTEXT_CLIENT = 1u << 3,
        /* A device context of the daemon (the GPU's own, whose buffers are
         * every client's): its addresses come from device window
         * opts->device_window, whatever kind of KFD context it is
         * (gpu_va_set_device_windows()). */
        GPU_CONTEXT_DEVICE = 1u << 4,
};

typedef struct GpuContextOptions {
        unsigned flags;          /* GPU_CONTEXT_* */
        unsigned n_sdma_queues;  /* SDMA queues to create; 0 = default (2, clamped to the node) */
        /* Compute (PM4) queues, one per entry, with these KFD queue priorities
         * (0..15; KFD maps them to the HQD pipe priority). n_compute_queues 0 =
         * default: one queue at GPU_QUEUE_PRIORITY_DEFAULT. */
        unsigned n_compute_queues;
        uint32_t compute_priority[GPU_MAX_QUEUES];
        uint32_t compute_ring_size; /* bytes, power of two; 0 = default (256 KiB) */
        uint32_t sdma_ring_size; /* bytes, power of two; 0 = default (256 KiB) */
        uint32_t queue_priority; /* 0..15; default 7 when 0 is not meant: use GPU_QUEUE_PRIORITY_DEFAULT */
        /* Sequence number of every queue's first job; 0 = 1. Lets a test start
         * next to the 2^32 wrap of the fence words (gpu-queue.c, epoch turn). */
        uint64_t first_seq;
        /* Jobs one queue may have in flight, 1..GPU_QUEUE_MAX_INFLIGHT (a
         * power of two); 0 = GPU_QUEUE_MAX_INFLIGHT. Bounds the kernel
         * argument slots a compute queue reserves. */
        unsigned max_inflight;
        /* The GPU node to drive, by its KFD gpu_id (what the daemon chose once
         * with kfd_gpu_choose(), so that every context is on the same GPU);
         * 0 = kfd_gpu_choose()'s default: a discrete GPU before an integrated one. */
        uint32_t gpu_id;
        /* GPU_CONTEXT_DEVICE: which device window (the GPU's index among
         * those the daemon serves). */
        unsigned device_window;
        /* Called on the context's waiter thread each time its wait for events
         * returns with one (a completion interrupt, a fault), before the
         * event loop is woken through the wake fd; NULL: nothing. It runs
         * beside the loop, so it may touch only what it guards itself, and
         * must not block: the loop's wake-up waits behind it. Lets memory the
         * engine wrote be looked at one thread hop earlier than the loop can. */
        void (*on_events)(void *userdata);
        void *on_events_userdata;
        /* Where this context cannot map an HDP flush page of its own (its KFD
         * process is another process's: a relayed client's proxy worker),
         * the context whose page it writes instead — the HDP is the GPU's,
         * not a process's. It must outlive this context. NULL: none. */
        const GpuContext *hdp_fallback;
        /* Another GPU's context of this same KFD process (the daemon's own,
         * on a kernel without secondary contexts), which must outlive this
         * one: this context drives opts->gpu_id in that process — its VM on
         * that GPU — and shares its event page, mapped into this GPU's VM
         * too, since a KFD process registers one (kfd_event_page_set refuses
         * a second). A fault on either GPU evicts both (the process's queues
         * on every GPU, kfd-facts §7.1). Not with GPU_CONTEXT_SECONDARY. */
        const GpuContext *share_process;
} GpuContextOptions;
#define GPU_QUEUE_PRIORITY_DEFAULT 7

/*
 * Opens the device through ops (GET_VERSION, topology, render node,
 * ACQUIRE_VM, event page + internal events, queues, fence memory) and starts
 * the waiter thread. -ENODEV if the topology has no GPU node (or none with
 * opts->gpu_id), -ENOENT if there is no KFD, other errors from the kernel calls. With the real device
 * (kfd_ops_real) it also installs kfd_fault_signal_install()'s SIGSEGV
 * handler: the kernel signals every GPU VM fault with SIGSEGV (kfd-real.h).
 */
int gpu_context_new(const KfdOps *ops, const GpuContextOptions *opts, GpuContext **ret);
/* Stops the waiter, destroys queues, frees every buffer still held by the
 * context itself. Buffers still referenced elsewhere must be unref'd first.
 * For a secondary context, closing its fd tears down what is left of it in
 * the kernel. */
GpuContext *gpu_context_free(GpuContext *c);

/*
 * Adds a hardware queue of engine with KFD queue_priority (0..15) to a live
 * context; *ret_index is its index for gpu_queue_submit(). -ENOSPC when the
 * context has GPU_MAX_QUEUES queues, -ENODEV when the node has no queue of
 * that engine, -ENODEV on a lost context, errors of CREATE_QUEUE.
 */
int gpu_context_add_queue(GpuContext *c, GpuEngine engine, uint32_t priority, unsigned *ret_index);

/*
 * Whether a GPU memory fault ended the context. The kernel evicts every
 * queue of a KFD context on a fault, for good, and queues created afterwards
 * start evicted (kfd-facts §7.1): gpu_context_process() then reports every
 * job still in flight (see GpuCompletion) and the context can do nothing but
 * be freed. reason (if not NULL) gets a sentence for logs.
 */
bool gpu_context_is_lost(const GpuContext *c, const char **reason);

const GpuDeviceInfo *gpu_context_get_info(const GpuContext *c);
/*
 * For a context the daemon keeps in another program's KFD process (the KFD
 * relay, docs/rocm.md): the render node file it acquired its VM with (a
 * number of its KfdOps), which that program's own opens of the node share so
 * that its ACQUIRE_VM and buffer mmaps find the same VM; and the GPU address
 * of slot i of the event page the context registered — the page the
 * process's signal events live in, where a completion must write an event's
 * id before its interrupt (kfd_signal_event_interrupt checks the slot).
 */
int gpu_context_get_render_fd(const GpuContext *c);
/* Signals event event_id of the context's KFD process (SET_EVENT): how the
 * relay tells a program of a queue error it found (kfd-relay-queue.c). */
int gpu_context_set_event(GpuContext *c, uint32_t event_id);
/* The KfdOps the context makes its calls through. */
const KfdOps *gpu_context_get_ops(const GpuContext *c);
uint64_t gpu_context_get_event_slot_va(const GpuContext *c, uint32_t slot);
/* An eventfd that becomes readable when the waiter saw a KFD event (a job
 * completion interrupt or a fault); then call gpu_context_process(). */
int gpu_context_get_wake_fd(const GpuContext *c);
/* Live counters for diagnostics (objects the context currently holds). */
typedef struct GpuContextStats {
        unsigned buffers;         /* GpuBuffers alive (allocated or imported by a caller) */
        uint64_t buffer_bytes;
        unsigned mapped_buffers;  /* buffers of other contexts mapped here (gpu_buffer_map_in) */
        uint64_t mapped_bytes;
        uint64_t internal_bytes;  /* the context's own memory: rings, fences, event page, EOP,
                                   * CWSR areas, kernel arguments, scratch */
        unsigned queues;
        uint64_t jobs_submitted;
        uint64_t jobs_completed;
        uint64_t faults;
} GpuContextStats;
void gpu_context_get_stats(const GpuContext *c, GpuContextStats *ret);

/* ---- Buffers (reference counted: a job in flight holds a reference) ---- */

/* size is rounded up to 4 KiB; -EINVAL for 0, -ENOMEM/-E2BIG from the kernel. */
int gpu_buffer_new(GpuContext *c, uint64_t size, GpuPlacement placement, bool executable,
                   GpuBuffer **ret);
/* Imports a dma-buf fd (IMPORT_DMABUF + MAP + CPU mapping). The fd is not
 * consumed. -EINVAL if it is not a dma-buf the device accepts. */
int gpu_buffer_import(GpuContext *c, int dmabuf_fd, GpuBuffer **ret);
/* The same for the GPU alone (no CPU mapping), counted as memory mapped in
 * from elsewhere (GpuContextStats.mapped_*), not as a buffer of this
 * context: how a worker process maps a client's buffer into its VM. */
int gpu_buffer_import_mapped(GpuContext *c, int dmabuf_fd, GpuBuffer **ret);
/* A new dma-buf fd for the buffer (EXPORT_DMABUF, O_CLOEXEC|O_RDWR). */
int gpu_buffer_export(GpuBuffer *b, int *ret_fd);

/*
 * The number a client knows b (or code object co) by — its handle — for what
 * the client is told about an address of its context: a fault "at offset
 * 0x40 of buffer 0x…" (gpu-fault-text.c). A buffer mapped into another
 * context (gpu_buffer_map_in()) is named by its origin's tag. 0: none (the
 * daemon's own memory).
 */
void gpu_buffer_set_tag(GpuBuffer *b, uint64_t tag);
uint64_t gpu_buffer_get_tag(const GpuBuffer *b);
void gpu_code_object_set_tag(GpuCodeObject *co, uint64_t tag);
uint64_t gpu_code_object_get_tag(const GpuCodeObject *co);
/* How many references to the dma-buf of fd exist besides fd itself (the
 * kernel-call table's dmabuf_refs, kfd-ops.h): 0 when fd is the last copy,
 * -EOPNOTSUPP when the device cannot tell. */
int gpu_dmabuf_refs(GpuContext *c, int dmabuf_fd);
/* Whether gpu_dmabuf_refs() can ever tell (the real kernel's dma-bufs can, the
 * simulated GPU's memfds cannot). */
bool gpu_sees_dmabuf_copies(GpuContext *c);
/*
 * The buffer as mapped in another context of the same device: b itself if it
 * belongs to other, else an import of it there (EXPORT_DMABUF, IMPORT_DMABUF
 * at an address of its own, MAP) made on first use and kept until b is freed
 * or other is. *ret is borrowed: valid as long as both live. Its VA is where
 * a job of other reaches the buffer; other's VM holds nothing else of b's
 * context. Errors of the export and import.
 */
int gpu_buffer_map_in(GpuBuffer *b, GpuContext *other, GpuBuffer **ret);
GpuBuffer *gpu_buffer_ref(GpuBuffer *b);
/* The last unref unmaps (CPU and GPU) and frees the BO. NULL-safe. */
GpuBuffer *gpu_buffer_unref(GpuBuffer *b);
/*
 * gpu_buffer_unref(b) once the signal_va FENCEs of the jobs on b's context's
 * queues now have been written. For a buffer those jobs may still write while
 * their owner has gone — a session's fence page: unmapping it under them
 * would make the write a GPU memory fault, which ends the whole context. A
 * job's signal comes after its queue's fence word, so it may still be on its
 * way when the job is reported done; each queue says how far its signals have
 * landed in a word the engine writes after each one (gpu-queue.c). Not the
 * engines' read pointers: an engine reads its ring ahead of what it executes
 * (sim-sdma.c), so one may be past a FENCE whose write is still to come.
 * Looked at in each gpu_context_process(); what is left goes with the
 * context. With no signal in flight, or the context lost or gone: at once.
 * Returns NULL, as gpu_buffer_unref().
 */
GpuBuffer *gpu_buffer_unref_after_jobs(GpuBuffer *b);
/* The same for jobs of writer, another context, that write b through its
 * mapping there (gpu_buffer_map_in(): it goes with b's last reference). The
 * hold keeps b, orphaned if its own context ends first, until then. */
GpuBuffer *gpu_buffer_unref_after_jobs_of(GpuBuffer *b, GpuContext *writer);
uint64_t gpu_buffer_get_va(const GpuBuffer *b);
uint64_t gpu_buffer_get_size(const GpuBuffer *b);
/* The daemon's own CPU mapping of the buffer. */
void *gpu_buffer_get_cpu(const GpuBuffer *b);
/* Drops the buffer's mappings in other contexts (gpu_buffer_map_in()) and
 * tells its watchers it is gone from them (worker processes unmap it): a
 * job that uses it later maps it again. */
void gpu_buffer_unmap_elsewhere(GpuBuffer *b);
/* Whether anything but its owner holds the buffer: a job in flight, a
 * reference of another object. */
bool gpu_buffer_is_shared(const GpuBuffer *b);
/* Writes zeros over the whole buffer through the daemon's CPU mapping (what
 * the GPU reads next sees them: jobs invalidate its caches before they read,
 * and the HDP is flushed before every doorbell). -ENODEV without a mapping. */
int gpu_buffer_zero(GpuBuffer *b);

/* ---- Jobs ---- */

typedef enum GpuJobType {
        GPU_JOB_NOP,      /* only waits + completion (used for event signal/wait jobs); any engine */
        GPU_JOB_COPY,     /* SDMA COPY_LINEAR, split at the packet count limit */
        GPU_JOB_FILL,     /* SDMA CONSTANT_FILL, split at the count limit */
        GPU_JOB_DISPATCH, /* compute: one kernel dispatch (PM4 DISPATCH_DIRECT) */
        GPU_JOB_AQL,      /* compute: a client's HSA kernel dispatch packet, translated (GpuJob.aql) */
        GPU_JOB_SDMA_PACKETS, /* SDMA: a client's SDMA packets, as checked by gpu_sdma_packet_scan() */
} GpuJobType;

/* ---- Code objects (AMDHSA ELF for the device's gfx target) ---- */

typedef enum GpuArgKind {
        GPU_ARG_BY_VALUE,       /* bytes copied verbatim */
        GPU_ARG_GLOBAL_BUFFER,  /* a 64-bit GPU address (client names buffer + offset) */
        GPU_ARG_DYNAMIC_LDS,    /* a `local` pointer: LDS offset filled by the dispatcher */
        GPU_ARG_HIDDEN,         /* filled by the dispatcher (global offsets, grid info, ...) */
} GpuArgKind;

typedef struct GpuKernelArg {
        char name[64];          /* from the metadata; "" if absent */
        uint32_t offset, size;  /* in the kernarg segment */
        GpuArgKind kind;
        char value_kind[32];    /* the metadata's .value_kind, e.g. "hidden_global_offset_x" */
} GpuKernelArg;

#define GPU_KERNEL_MAX_ARGS 64

typedef struct GpuKernel {
        char name[128];                  /* symbol name without ".kd" */
        uint32_t kernarg_size, kernarg_align;
        uint32_t group_segment_size;     /* static LDS bytes */
        uint32_t private_segment_size;   /* scratch bytes per work-item */
        uint32_t max_flat_workgroup_size;
        unsigned n_args;                 /* explicit + hidden, in offset order */
        GpuKernelArg args[GPU_KERNEL_MAX_ARGS];
} GpuKernel;

/*
 * Parses an AMDHSA code object (ELF64, EM_AMDGPU, e_flags matching the
 * device's gfx target), its kernel descriptors (.kd symbols) and its
 * metadata note (NT_AMDGPU_METADATA, msgpack), and copies its loadable
 * segments into an executable buffer of the context. Errors: -ENOEXEC (not an
 * AMDHSA ELF: truncated, wrong class/machine/OS ABI, no descriptor), -EINVAL
 * (a size, offset or descriptor field out of range), -EXDEV (built for
 * another gfx target), -E2BIG (over GPU_CODE_OBJECT_MAX_SIZE, or more than
 * GPU_CODE_OBJECT_MAX_KERNELS kernels or GPU_KERNEL_MAX_ARGS arguments in a
 * kernel); err names the problem ("section .text extends past the end of the
 * file", "built for gfx1100, this device is gfx1030", ...). Errors of the
 * buffer allocation (-ENOMEM, ...) are passed on. The rules are listed at the
 * top of gpu-code-object.c. The code buffer counts in the context's buffer
 * stats like any other buffer.
 */
#define GPU_CODE_OBJECT_MAX_SIZE (64u << 20)
#define GPU_CODE_OBJECT_MAX_KERNELS 1024u
int gpu_code_object_load(GpuContext *c, const void *elf, size_t size, GpuCodeObject **ret,
                         char *err, size_t errlen);
/*
 * The same checks without loading anything: a code object of no context,
 * for the device info describes (its gfx target, LDS), that answers the
 * kernel queries and gpu_dispatch_check(), and that gpu_code_object_load_in()
 * loads into contexts later (it keeps its own copy of the file).
 * gpu_code_object_get_size() tells what loading it will occupy.
 */
int gpu_code_object_parse(const GpuDeviceInfo *dev, const void *elf, size_t size, GpuCodeObject **ret,
                          char *err, size_t errlen);
/*
 * co loaded in c: co itself if it was loaded there, else a copy loaded from
 * co's file on first use and kept until co or c is freed (*ret borrowed).
 * Errors as gpu_code_object_load().
 */
int gpu_code_object_load_in(GpuCodeObject *co, GpuContext *c, GpuCodeObject **ret, char *err, size_t errlen);
GpuCodeObject *gpu_code_object_ref(GpuCodeObject *co);
GpuCodeObject *gpu_code_object_unref(GpuCodeObject *co); /* NULL-safe */
unsigned gpu_code_object_n_kernels(const GpuCodeObject *co);
const GpuKernel *gpu_code_object_kernel(const GpuCodeObject *co, unsigned index);
/* Index of the kernel called name, or -ENOENT. */
int gpu_code_object_find(const GpuCodeObject *co, const char *name);
/* Bytes of GPU memory the loaded code occupies (its buffer's size; for a
 * parsed object, what loading it occupies), to charge to whoever loaded it. */
uint64_t gpu_code_object_get_size(const GpuCodeObject *co);
/* A parsed object's copy of its ELF file (to load it in another process),
 * or NULL for one loaded into a context. */
const void *gpu_code_object_get_file(const GpuCodeObject *co, size_t *ret_size);

/* Wait on the GPU until queue's completed sequence number >= seq; or, with
 * va set, until the 32-bit word at va (in this context's VM) >= value — a
 * word another context's job writes there (GpuJob.signal_va); or, with va
 * set and zero64, until the 64-bit word at va (8-byte aligned) == 0 — the
 * value of an HSA signal a client's barrier-AND packet depends on (value is
 * not used). Compute queues only for zero64 (PM4 WAIT_REG_MEM64). The fields
 * are packed so that GPU_JOB_MAX_WAITS of them take 120 bytes of each job. */
typedef struct GpuWait {
        uint64_t seq;
        uint64_t va;
        uint32_t value;
        uint16_t queue;
        bool zero64;
} GpuWait;

/* An HSA barrier-AND packet has up to 5 dependent signals (HSA Platform
 * System Architecture spec 2.9.7, dep_signal[5]). */
#define GPU_JOB_MAX_WAITS 5

/*
 * What a relayed HSA packet's completion does (GpuJob.nop.hsa and
 * GpuJob.aql.hsa; compute queues only, all zero = nothing), in this order
 * after the job's body has ended and its writes have left the caches, each
 * write to an address of this context's VM that the caller checked against
 * the client's buffers (gpu-aql.c has the stream and the reasons for it):
 *
 * @acquire: invalidate the caches before the job (the HSA header's acquire
 *     fence scope, or a PM4-IB packet's ACQUIRE_MEM). A GPU_JOB_AQL body
 *     invalidates them in any case.
 * @ts_va: 0, or where the GPU clock is written as two 64-bit values, when
 *     the job starts (ts_va: after its waits) and ends (ts_va + 8): an
 *     amd_signal_t's start_ts/end_ts (8-byte aligned), the same clock as
 *     GpuCompletion.begin_ns/end_ns count (GpuDeviceInfo.timestamp_hz).
 * @signal_va: 0, or the address of an amd_signal_t's 64-bit value (the
 *     signal + 8; 8-byte aligned), atomically decremented by 1.
 * @event_slot_va: 0, or an address where event_id is written as a 32-bit
 *     word before the interrupt (the KFD process's event page slot of the
 *     event, where it is not the mailbox).
 * @mailbox_va: 0, or the amd_signal_t's event_mailbox_ptr: event_id is
 *     written there as a 32-bit word (4-byte aligned) and an END_OF_PIPE
 *     interrupt with context id event_id raised, which KFD turns into that
 *     event of the context when its slot is signaled.
 * @index_va, @index_value: 0, or a 64-bit word (8-byte aligned) set to
 *     index_value last of all: the AQL queue's read_dispatch_id, advanced
 *     only when the packet has retired.
 *
 * Everything here is written before the job's own fence: once
 * gpu_context_process() reports the job done, the client's signal has been
 * decremented and its index written.
 */
typedef struct GpuHsaCompletion {
        uint64_t ts_va;
        uint64_t signal_va;
        uint64_t event_slot_va;
        uint64_t mailbox_va;
        uint64_t index_va;
        uint64_t index_value;
        uint32_t event_id;
        bool acquire;
} GpuHsaCompletion;

/* The kernel descriptor of an AQL dispatch, as copied from kernel_object. */
#define GPU_AQL_DESCRIPTOR_SIZE 64u

typedef struct GpuJob {
        GpuJobType type;
        union {
                struct {
                        uint64_t src_va, dst_va, size;
                } copy;
                struct {
                        uint64_t dst_va, size;
                        uint32_t pattern;
                } fill;
                struct {
                        GpuCodeObject *co;      /* the caller keeps a reference while the job lives */
                        unsigned kernel;
                        uint32_t grid[3];       /* work-items in x, y, z (partial workgroups allowed) */
                        uint32_t block[3];      /* workgroup size */
                        uint32_t dynamic_lds;   /* extra LDS bytes beyond the static size and the
                                                 * local-pointer regions below (normally 0) */
                        /* Explicit argument values laid out by the caller in kernarg order:
                         * for each explicit arg of the kernel, args_data holds its bytes at
                         * the arg's offset (global buffers as 64-bit GPU addresses). For a
                         * GPU_ARG_DYNAMIC_LDS arg (a `local` pointer) the caller stores the
                         * byte size it wants as a little-endian u32 at the arg's offset; the
                         * GPU layer replaces it with the region's LDS address (regions follow
                         * the static LDS in argument order, each 16-byte aligned). The GPU
                         * layer also fills the hidden arguments, copies the kernarg segment
                         * and an hsa_kernel_dispatch_packet_t into memory of its own, and
                         * programs the dispatch. gpu_queue_submit() refuses (-EINVAL) a
                         * dispatch the hardware cannot run: LDS beyond the device's, a
                         * workgroup over 1024 work-items or the kernel's maximum, args_size
                         * other than the kernel's explicit kernarg bytes. */
                        const uint8_t *args_data;
                        uint32_t args_size;
                } dispatch;
                /* GPU_JOB_NOP: its HSA completion, if any (a relayed barrier or
                 * PM4-IB packet; compute queues only). */
                struct {
                        GpuHsaCompletion hsa;
                } nop;
                /*
                 * GPU_JOB_AQL: an hsa_kernel_dispatch_packet_t of a client's AQL
                 * queue, run in the client's own context (its VM, where every
                 * address below is the client's), with the user SGPRs the CP
                 * gives an AQL dispatch (LLVM AMDGPUUsage, "Initial Kernel
                 * Execution State"). Everything is a copy the caller made and
                 * checked; the GPU layer reads no client memory.
                 *
                 * @descriptor: the 64 bytes at the packet's kernel_object: a code
                 *     object v3+ kernel descriptor, or the older amd_kernel_code_t
                 *     (amd_kernel_code_version_major 1, amd_machine_kind 1) that
                 *     ROCr's own blit kernels use; gpu-aql.c tells which and
                 *     checks it (gpu_aql_check()).
                 * @descriptor_va: kernel_object; the code starts at
                 *     descriptor_va + kernel_code_entry_byte_offset
                 *     (gpu_aql_entry_va()).
                 * @packet_va: the packet's ring slot (the dispatch ptr SGPRs).
                 * @queue_va: the amd_queue_t (the queue ptr SGPRs).
                 * @kernarg_va: kernarg_address (the kernarg segment ptr SGPRs).
                 * @dispatch_id: the packet's index (the dispatch id SGPRs).
                 * @grid: grid_size_x/y/z in work-items; @block: workgroup_size_x/y/z.
                 * @group_segment_size: LDS bytes per workgroup (the packet's,
                 *     which the CP uses, not the descriptor's).
                 * @private_segment_size: scratch bytes per work-item; the queue's
                 *     scratch backs it (as for GPU_JOB_DISPATCH, charged with
                 *     gpu_dispatch_scratch_bytes()).
                 * @hsa: the packet's completion.
                 */
                struct {
                        GpuHsaCompletion hsa;
                        uint8_t descriptor[GPU_AQL_DESCRIPTOR_SIZE];
                        uint64_t descriptor_va;
                        uint64_t packet_va, queue_va, kernarg_va, dispatch_id;
                        uint32_t grid[3];
                        uint16_t block[3];
                        uint32_t group_segment_size;
                        uint32_t private_segment_size;
                } aql;
                /*
                 * GPU_JOB_SDMA_PACKETS: packets of a relayed client's SDMA
                 * queue, run as they are on an SDMA queue of the client's own
                 * context, between the job's timestamps and fence: @dw (the
                 * caller's, alive until the job is reported: a recovered
                 * queue emits it again) holds @ndw dwords of whole packets,
                 * each one gpu_sdma_packet_scan() passed and whose memory the
                 * caller checked against the client's buffers.
                 */
                struct {
                        const uint32_t *dw;
                        uint32_t ndw;
                } packets;
        };
        unsigned n_waits;
        GpuWait waits[GPU_JOB_MAX_WAITS];
        /* SDMA only: after the job, write signal_value to the 32-bit word at
         * signal_va (4-byte aligned), an address of this context's VM; 0 =
         * none. How a job tells a job of another context that it is done
         * (that context's GpuWait.va). */
        uint64_t signal_va;
        uint32_t signal_value;
        /* Jobs of one queue with the same nonzero chain are ordered work of
         * one client stream: when one fails on the GPU (its own fault, an
         * exception, gpu_queue_abort()), the later ones of its chain still
         * in flight are not run but reported -ECANCELED (the queue is
         * recreated without them); other chains' jobs go on. 0: no chain. */
        uint32_t chain;
} GpuJob;

/*
 * gpu_sdma_packet_scan() - one SDMA packet of a client's ring, as the relay
 * of SDMA queues passes it (daemon/sessions/kfd-relay-queue.c): the packets
 * ROCr's BlitSdma writes (COPY_LINEAR, COPY_LINEAR_RECT, CONST_FILL, FENCE,
 * TRAP, POLL_REGMEM of memory, ATOMIC, TIMESTAMP, GCR_REQ, WRITE_LINEAR,
 * NOP) and nothing that reaches registers, other queues or the page tables.
 * @dw: the packet's first dword, @avail dwords readable from there.
 * @ret_ndw: its size in dwords.
 * @ranges: the memory it reads or writes (at most GPU_SDMA_MAX_RANGES), for
 *     the caller to check against the client's buffers; @ret_n of them.
 * @why: for -EINVAL, what is wrong with it.
 * Returns 0, -EAGAIN when the packet runs past @avail, -EINVAL.
 */
#define GPU_SDMA_MAX_RANGES 2
typedef struct GpuSdmaRange {
        uint64_t va, size;
} GpuSdmaRange;
int gpu_sdma_packet_scan(const uint32_t *dw, size_t avail, size_t *ret_ndw, GpuSdmaRange *ranges, unsigned *ret_n,
                         const char **why);

/*
 * What a context's own memory (GpuContextStats.internal_bytes) will be, for
 * charging it to whoever causes it before it is allocated — here or in a
 * worker process, which runs this same code. like is a context on the same
 * GPU node (the device context): the sizes depend on the node (CWSR and EOP
 * sizes, CU count, gfx target) and on the options the new context gets.
 * gpu_context_own_bytes(): at bring-up, before any queue (event page, fence
 * memory, the HDP flush page where like has one);
 * gpu_queue_own_bytes(): one more queue of engine (ring, pointer pages, and
 * for compute the EOP buffer, the CWSR area and the kernel-argument slots);
 * gpu_dispatch_scratch_bytes(): the scratch backing a compute queue
 * allocates for job, a GPU_JOB_DISPATCH or a GPU_JOB_AQL (its packet's
 * private_segment_size; 0 if it uses none), and in *ret_wave_bytes
 * what it backs per wave: a queue whose scratch already backs that much
 * allocates nothing (gpu-dispatch.c).
 */
uint64_t gpu_context_own_bytes(const GpuContext *like, unsigned max_inflight);
uint64_t gpu_queue_own_bytes(const GpuContext *like, GpuEngine engine, uint32_t ring_size, unsigned max_inflight);
uint64_t gpu_dispatch_scratch_bytes(const GpuContext *like, const GpuJob *job, uint32_t *ret_wave_bytes);


/*
 * Checks a GPU_JOB_DISPATCH job against what the device and its compute
 * queues can run — the checks gpu_queue_submit() makes of it, so a caller can
 * refuse a job at once rather than learn of it when the job reaches the
 * queue: a workgroup over 1024 work-items or the kernel's
 * maximum, missing arguments, kernel arguments or scratch beyond what a queue
 * provides, LDS beyond the device's. Returns 0 or -EINVAL with err (if not
 * NULL) naming the problem. Does not look at waits.
 */
int gpu_dispatch_check(const GpuContext *c, const GpuJob *job, char *err, size_t errlen);

/**
 * gpu_aql_check() - checks a GPU_JOB_AQL job against what the device and its
 * compute queues can run: the checks gpu_queue_submit() makes of it.
 * @c: the context the job is for (its device's LDS, gfx generation).
 * @job: a GPU_JOB_AQL job.
 * @err: if not NULL, what was wrong, naming the field ("workgroup of 2048
 *     work-items, at most 1024", "kernel descriptor sets
 *     COMPUTE_PGM_RSRC1.PRIV (bit 20), which clients may not", ...).
 *
 * Refused: a zero grid or workgroup dimension, a workgroup over 1024
 * work-items, LDS beyond the device's, scratch beyond what a queue backs, a
 * descriptor the loader would refuse (reserved bits or bytes, the
 * COMPUTE_PGM_RSRC bits of gpu-kernel-rsrc.c, more user SGPRs than
 * RSRC2.USER_SGPR_COUNT says or than 16), an entry point that is not 256-byte
 * aligned or overflows, and HSA completion addresses that are not aligned.
 * Does not look at waits, nor at whether the addresses lie in the client's
 * buffers (the caller's check).
 *
 * Return: 0 or -EINVAL.
 */
int gpu_aql_check(const GpuContext *c, const GpuJob *job, char *err, size_t errlen);
/* The code address of a GPU_JOB_AQL job (descriptor_va +
 * kernel_code_entry_byte_offset), for the caller to check against the
 * client's buffers; 0 when it overflows or job is not GPU_JOB_AQL. */
uint64_t gpu_aql_entry_va(const GpuJob *job);

/*
 * Writes the job's packets to the queue's ring — timestamp, waits, body,
 * timestamp, fence (seq) and trap — stores wptr and rings the doorbell. Never
 * blocks. Returns -EAGAIN if the ring has no room now, or if the queue is
 * draining before its 32-bit fence word wraps (once every 2^32 jobs; retry
 * after completions), -EINVAL for a job the engine cannot run.
 * *ret_seq is the job's sequence number on that queue (1, 2, 3, ...,
 * skipping the multiples of 2^32).
 */
int gpu_queue_submit(GpuContext *c, unsigned queue, const GpuJob *job, uint64_t *ret_seq);

/*
 * A burst of submissions: while doorbells are held (the calls nest),
 * gpu_queue_submit() writes each job to its ring but rings no doorbell; the
 * last release rings each queue that got jobs, once, with its last write
 * pointer. The engine then finds the whole burst at one wake-up and raises
 * one interrupt for it (on the simulator as on hardware, which processes
 * what is between rptr and the last doorbell value) instead of waking, and
 * waking the waiter, per job. Hold only around code that does not wait for
 * the jobs it submits.
 */
void gpu_context_hold_doorbells(GpuContext *c);
void gpu_context_release_doorbells(GpuContext *c);
/* Highest sequence number known complete on the queue (from fence memory). */
uint64_t gpu_queue_get_completed(const GpuContext *c, unsigned queue);

typedef struct GpuCompletion {
        unsigned queue;
        uint64_t seq;
        int error;          /* 0, or -EFAULT when the job hit a GPU memory fault (which
                             * ends the context: gpu_context_is_lost()), or -ECANCELED
                             * when the context was lost under it (a fault of another
                             * job, or one that cannot be told apart from others
                             * running with it), or -EIO when it raised a GPU
                             * exception other than a memory fault (an illegal
                             * instruction, a malformed packet), or the error
                             * passed to gpu_queue_abort() */
        uint64_t fault_va;  /* the faulting GPU address when error == -EFAULT (for
                             * the daemon's log only: an address of this process) */
        const char *message; /* NULL, or what the device said about the failure
                              * (KfdOps.exception_info); with -EFAULT where it was,
                              * "at offset 0x40 of buffer 0x…" and what the device
                              * said. Addresses in it are relative to the client's
                              * objects (gpu-fault-text.c). Valid during the callback */
        uint64_t begin_ns;  /* GPU timestamps around the job, converted to ns */
        uint64_t end_ns;
} GpuCompletion;

typedef void (*GpuCompletionFn)(const GpuCompletion *comp, void *userdata);

/*
 * Aborts the job @seq if it is the oldest unfinished job of @queue (the one
 * the engine is running): reports it through @cb with @error (e.g. -ETIME),
 * then destroys and recreates the queue and re-emits the jobs behind it, the
 * same recovery a memory fault gets. Jobs that finished meanwhile are
 * reported first, and so is the job itself if it ended while the queue was
 * being stopped (then the queue is recreated for the jobs behind it, none of
 * which ran). Returns 1 if it aborted, 0 if the job was not running (it
 * finished or has not started), -EINVAL for bad arguments. Never blocks.
 */
int gpu_queue_abort(GpuContext *c, unsigned queue, uint64_t seq, int error, GpuCompletionFn cb,
                    void *userdata);

/*
 * Drains the wake fd, reads fences and fault events, and reports every job
 * that finished since the last call exactly once, in sequence order per queue.
 * A queue that faulted is recovered (recreated, later jobs re-emitted) before
 * this returns. Never blocks. Returns the number of completions reported.
 */
int gpu_context_process(GpuContext *c, GpuCompletionFn cb, void *userdata);
