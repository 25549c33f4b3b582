/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU: a software model of an RDNA2 (gfx1030) GPU behind the KFD
 * uapi, reached only through the KfdOps table it provides. It follows the
 * kernel's documented validation and errno values (kfd-facts §1, §4.5, §5),
 * backs memory with memfds (exported dma-bufs are real fds another process can
 * mmap), publishes a simulated sysfs topology, and runs engines on threads of
 * their own that read rings after doorbells, write fences and raise
 * "interrupts" that signal KFD events.
 *
 * One SimDevice models one machine with SimOptions.n_gpus discrete GPU nodes
 * (and an integrated one listed first with SimOptions.igpu_first); every
 * open_kfd() is one KFD process context on it, with a VM on every GPU.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "kfd/kfd-ops.h"

typedef struct SimDevice SimDevice;

/* Default instruction budget of one compute dispatch (SimOptions). */
#define SIM_DEFAULT_DISPATCH_BUDGET (1ULL << 30)

/* SimOptions.n_gpus: at most this many discrete GPUs. */
#define SIM_MAX_GPUS 8u

/* SimOptions.fault_order. */
typedef enum SimFaultOrder {
        SIM_FAULT_ORDER_DEFAULT = 0,  /* fence-first */
        SIM_FAULT_ORDER_FENCE_FIRST,
        SIM_FAULT_ORDER_EVENT_FIRST,
} SimFaultOrder;

typedef struct SimOptions {
        /* Discrete gfx1030 GPUs: 0 or 1 = one, at most SIM_MAX_GPUS. Each is a
         * topology node of its own (gpu_id, render minor, PCI location,
         * unique_id), with its own VRAM of vram_size bytes, SDMA engines, CP
         * engines, caches and doorbell pages; a KFD process has a VM on each
         * (ACQUIRE_VM with that GPU's render node), as the kernel gives it one
         * kfd_process_device per GPU. The first GPU is the one gpu_id names,
         * at PCI 0000:03:00.0; GPU i (from 0) sits at bus 3 + i, its render
         * minor is the first GPU's + i, and its gpu_id is a hash of the first
         * one's and i (sim-device.c). */
        uint32_t n_gpus;
        uint64_t vram_size;        /* bytes per GPU; 0 = default 1 GiB (memfd-backed, lazily) */
        uint32_t gpu_id;           /* of the first GPU; 0 = default 0x697D (a hash, like the kernel's) */
        uint32_t cu_count;         /* per GPU; 0 = default 40 (RX 6800 XT class gfx1030) */
        const char *sysfs_dir;     /* NULL = create a private temp dir, removed on free */
        /* Instruction budget of one compute dispatch, in wave-instructions
         * (instructions issued per wave, summed over all waves); a dispatch that
         * exceeds it stops its queue with a HW exception ("instruction budget
         * ... exceeded"), so a kernel that loops forever cannot hold a CP pipe
         * for ever. 0 = default SIM_DEFAULT_DISPATCH_BUDGET (2^30, about a
         * minute of interpretation on one core). */
        uint64_t max_dispatch_wave_instructions;
        /* The KFD uapi minor version the simulated kernel reports and behaves
         * as (major is 1): 0 = SIM_DEFAULT_KFD_MINOR. 11 is Linux 6.1 (Debian
         * 12), 19 Linux 7.0. Older versions lack what came later, as those
         * kernels do: no EXPORT_DMABUF before 12, no RUNTIME_ENABLE before 13,
         * no event ages before 14, no SDMA-by-engine queues before 17, no
         * CREATE_PROCESS (secondary contexts) before 19; an ioctl past the
         * version's table is -EINVAL (-ENOTTY from 19 on, as kfd_ioctl answers
         * since "report -ENOTTY for unknown ioctls"). */
        uint32_t kfd_minor;
        /* Which simulated device this is, as a PCI address names a real one:
         * the same identity gives the same device, so dma-bufs (memfds) it
         * exported are its own again in a later instance (a daemon restarted
         * on the same socket imports what its predecessor gave out, as the
         * kernel does for a GPU that stayed). NULL = a device of its own,
         * unlike any other (random). */
        const char *identity;
        /* A desktop Ryzen with a discrete card (kfd-facts §7.6): the topology
         * lists the CPU's integrated GPU (gfx1036, 2 CUs, 512 MiB, renderD128,
         * PCI 0000:10:00.0, gpu_id SIM_IGPU_GPU_ID) as node 1, before the
         * gfx1030s, which become nodes 2.. at renderD129... Every GPU is
         * driven like the others, with engines of its own; the interpreter
         * runs gfx1030 code on the iGPU too. */
        bool igpu_first;
        /* Helper threads that run the workgroups of a dispatch besides the
         * CP engine thread of its pipe (shared by the pipes, made once with
         * the device): 0 = one fewer than the CPUs the process may run on
         * (sim_isa_default_helpers(), at most 31), negative = none (every
         * dispatch runs its workgroups one after another). */
        int32_t isa_helpers;
        /* Which the daemon sees first after a GPU VM fault (sim-ih.h): the
         * faulting job's end-of-pipe fence and what its queue runs after it
         * (SIM_FAULT_ORDER_FENCE_FIRST, the default: the kernel's order allows
         * it on gfx10/11 without fault retry), or the MEMORY event, with the
         * queue stopped at the faulting packet (SIM_FAULT_ORDER_EVENT_FIRST). */
        SimFaultOrder fault_order;
} SimOptions;

#define SIM_MIN_KFD_MINOR 11u
#define SIM_DEFAULT_KFD_MINOR 19u

/*
 * Creates the device, writes its sysfs tree and starts one SDMA engine thread
 * per SDMA engine of each GPU; CP engine threads start with the compute
 * queues, one each. opts may be NULL (all defaults). Returns 0, -EINVAL for
 * options out of range (more than SIM_MAX_GPUS GPUs, gpu_id above 16 bits,
 * more than 1024 CUs, VRAM size not page aligned; each logged at debug level
 * with what was wrong), -ENOMEM, or a negative errno from creating the tree
 * or the threads. All fds the device hands out belong to the calling process.
 */
int sim_device_new(const SimOptions *opts, SimDevice **ret);
/*
 * A whole-GPU reset, as the kernel goes through one after a hang
 * (kgd2kfd_pre_reset -> kfd_signal_reset_event, kfd-facts §7.2): every KFD
 * context's queues stop for good (evicted, as after a fault: created queues
 * start stopped too), every context's HW_EXCEPTION events are signaled with
 * {WHOLE_GPU_RESET, GPU_HANG, memory_lost, gpu_id}, and with memory_lost the
 * contents of every VRAM buffer are gone (they read as zeros). GTT memory is
 * system memory and stays. For tests of recovery: kfdbrokerd --device=sim
 * does this on SIGUSR2.
 */
void sim_device_reset(SimDevice *d, bool memory_lost);
/*
 * sim_device_reset() of one GPU, the one gpu_id names (kgd2kfd_pre_reset of
 * that device): the contexts with a VM on it are evicted for good and their
 * HW_EXCEPTION events signaled with that gpu_id; with memory_lost that GPU's
 * VRAM buffers read as zeros. Contexts that only use other GPUs, and other
 * GPUs' memory, are untouched. -ENODEV for an id of no GPU of d.
 */
int sim_device_reset_gpu(SimDevice *d, uint32_t gpu_id, bool memory_lost);
/*
 * Releases WAIT_EVENTS sleepers (they return FAIL / -EIO), ends every remote
 * process (sim-remote.h) and waits for its server, waits for ioctls in
 * flight, closes every fd the device handed out that is still open (which
 * tears down the contexts: queues, events, memory), stops the engines and
 * removes the temp sysfs tree. Exported dma-buf fds stay valid memfds.
 * NULL-safe; returns NULL.
 */
SimDevice *sim_device_free(SimDevice *d);
/* The kernel-call table that reaches this device from the calling process;
 * valid until sim_device_free(). */
const KfdOps *sim_device_get_ops(SimDevice *d);
/*
 * Another simulated user process on the same GPU: a table whose open_kfd()
 * reaches a primary KFD process of its own (as a second program opening
 * /dev/kfd would), for tests of what crosses processes — dma-buf sharing,
 * per-process VMs. Real fds in this process all the same; its fd numbers
 * reach only its own files. Valid until sim_device_remove_mm() or
 * sim_device_free(); -ENOMEM, -ENODEV once the device is shutting down.
 */
int sim_device_add_mm(SimDevice *d, const KfdOps **ret);
/*
 * That process exits: its WAIT_EVENTS sleepers return -EINTR, its ioctls in
 * flight are waited for, every file it still has open is closed and its
 * primary KFD context destroyed (kfd_process_notifier_release): queues, events
 * and memory go, dma-bufs it exported stay valid. ops is invalid afterwards.
 * -EINVAL if ops is not a table of sim_device_add_mm() on d.
 */
int sim_device_remove_mm(SimDevice *d, const KfdOps *ops);

/* What the device holds now, for tests and diagnostics. */
typedef struct SimDeviceStats {
        unsigned processes;        /* simulated user processes (SimMm), the device's own included */
        unsigned contexts;         /* KFD contexts, primary and secondary */
        unsigned queues;           /* user-mode queues of every context */
        unsigned files;            /* open KFD and render-node files */
        unsigned ioctls_in_flight; /* e.g. WAIT_EVENTS asleep */
        unsigned remote_processes; /* served by sim_remote_serve() and not yet torn down */
        unsigned gem_handles;      /* GEM handles open on render-node files (sim-drm.h) */
        uint64_t doorbells;        /* doorbell writes that woke an engine, since the device was made */
        uint64_t interrupts;       /* interrupts the engines raised (SDMA TRAP, RELEASE_MEM with INT_SEL) */
        unsigned gpus;             /* GPU nodes (the iGPU of SimOptions.igpu_first included) */
        unsigned engine_threads;   /* SDMA and CP engine threads of every GPU */
        uint64_t backed_ahead;     /* bytes of VRAM BOs' memory and GL2 views backed beside the engines (sim-populate.h) */
} SimDeviceStats;
void sim_device_get_stats(SimDevice *d, SimDeviceStats *ret);

/* What one GPU of the device holds now (sim_device_get_gpu_stats()). */
typedef struct SimGpuStats {
        uint32_t gpu_id;
        unsigned drm_render_minor;
        uint64_t vram_size;        /* bytes */
        uint64_t vram_used;        /* bytes that VRAM buffers of this GPU hold */
        unsigned queues;           /* user-mode queues on this GPU, of every context */
        unsigned sdma_engines;     /* engine threads */
        unsigned cp_engines;       /* engine threads, idle ones included */
} SimGpuStats;
/*
 * The state of the device's GPU at position index in topology order (the
 * iGPU of SimOptions.igpu_first first). -ENODEV for an index past the last.
 */
int sim_device_get_gpu_stats(SimDevice *d, unsigned index, SimGpuStats *ret);
