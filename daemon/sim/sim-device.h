/* SPDX-License-Identifier: MIT */
/*
 * The SimDevice behind sim.h: one simulated machine with SimOptions.n_gpus
 * gfx1030 GPUs (and with SimOptions.igpu_first an integrated gfx1036 listed
 * before them). It owns the lock that guards every sim object, the condition
 * variable WAIT_EVENTS sleeps on, the topology, the files and processes, the
 * BO list (for dma-buf import and render-node offsets), the GPUs (sim-gpu.h:
 * each with its SDMA queue pool, engine threads and caches) and the
 * interpreter's helper threads. This header is for daemon/sim only.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "isa/sim-isa.h"
#include "kfd/kfd-ops.h"
#include "sim-cp.h"
#include "sim-gpu.h"
#include "sim-topology.h"
#include "sim-types.h"
#include "sim.h"

/* The GPU nodes of a device: SIM_MAX_GPUS discrete ones and the iGPU. */
#define SIM_MAX_GPU_NODES (SIM_MAX_GPUS + 1u)

/*
 * One simulated user process as KFD tells them apart: by address space
 * (kfd_process is looked up by current->mm). Every open_kfd() through its
 * KfdOps table refers to the same primary KFD process, created by the first
 * open and kept until the process exits (the kernel keeps it until the mm
 * goes, whatever fds are closed); AMDKFD_IOC_CREATE_PROCESS turns one open
 * fd into a secondary context of its own. The files it opens are its own: a
 * number another process names does not reach them. The device's own mm is
 * the calling process; sim_device_add_mm() makes more (tests that need two
 * processes on one GPU, and sim-remote.c, one per remote process), and
 * sim_mm_free() ends one as the process's exit does.
 */
struct SimMm {
        SimMm *next;          /* SimDevice.extra_mms */
        SimDevice *device;
        KfdOps ops;           /* userdata = this mm */
        SimProcess *primary;  /* reference; NULL until the first open_kfd() */
        unsigned n_busy;      /* its ioctls in flight */
        /* The process is exiting (sim_mm_kill): a fatal signal is pending
         * for each of its threads, so a WAIT_EVENTS sleeping for it returns
         * -EINTR (kfd_wait_on_events: fatal_signal_pending). */
        bool killed;
};

struct SimDevice {
        pthread_mutex_t lock;
        pthread_cond_t wait_cond;   /* WAIT_EVENTS sleepers; broadcast on every event change */
        pthread_cond_t idle_cond;   /* signalled when n_busy drops to 0 */
        pid_t pid;                  /* the process that created the device and owns its fds */

        /* The GPUs in topology order: with SimOptions.igpu_first the iGPU
         * first, then the n_gpus discrete ones. */
        SimGpu *gpus[SIM_MAX_GPU_NODES];
        unsigned n_gpus;
        bool has_igpu;
        char *sysfs_dir;
        bool own_sysfs_dir;
        uint32_t kfd_minor;         /* KFD uapi minor version this kernel speaks (SimOptions) */
        SimMm mm;                   /* the creating process */
        SimMm *extra_mms;           /* sim_device_add_mm() */

        SimFile *files;
        SimProcess *processes;
        SimBo *bos;
        uint32_t bo_tag;            /* random, in every BO memfd's name: this device's (sim-memory.c) */

        pthread_cond_t cp_cond;     /* broadcast when a dispatch or an engine step lets go of its queue */
        uint64_t dispatch_budget;   /* wave-instructions per dispatch (SimOptions) */
        SimIsaPool *isa_pool;       /* helpers running workgroups of the CP engines' dispatches */
        SimPopulator *populator;    /* backs new VRAM BOs ahead of the engines (sim-populate.h) */

        unsigned n_busy;            /* ioctls in flight */
        bool shutting_down;

        /* Interrupts the engines raised whose WAIT_EVENTS sleepers are not
         * woken yet (sim_events_deliver()), and since when. */
        bool irq_pending;
        uint64_t irq_pending_since_ns;
        /* The order GPU VM faults are handled in (sim-ih.h; each GPU has its
         * own interrupt handler's queue, SimGpu.ih). */
        SimFaultOrder fault_order;
        /* Counted for SimDeviceStats, under lock. */
        uint64_t n_doorbells, n_interrupts;

        /* Remote processes served over sockets (sim-remote-server.c), each
         * with an mm of its own; sim_device_free() ends them first. */
        SimRemoteRegistry *remotes;
};

/*
 * Thread cancellation inside an ioctl: the simulator runs ioctls with
 * cancellation disabled, except around the sleeps the kernel would let a
 * signal interrupt (WAIT_EVENTS), which a handler brackets with
 * sim_ioctl_cancellable(true) / (false); there the caller's own state
 * applies. A thread cancelled while it sleeps unwinds through cleanup
 * handlers that release the device lock and undo the ioctl's bookkeeping, so
 * a caller that pthread_cancel()s a thread blocked in WAIT_EVENTS (the
 * daemon's waiter, when it cannot wake it) does not leave the device locked.
 */
void sim_ioctl_cancellable(bool on);

/* The device's GPU with that gpu_id (a gfx1030, or the iGPU of
 * SimOptions.igpu_first), NULL for another id. */
SimGpu *sim_device_gpu(SimDevice *d, uint32_t gpu_id);
/* The first discrete GPU (the one SimOptions.gpu_id names). */
SimGpu *sim_device_first_dgpu(SimDevice *d);
/* The device's GPU whose render node has that minor, NULL for another. */
SimGpu *sim_device_gpu_by_minor(SimDevice *d, unsigned minor);

/* AMDKFD_COMMAND_END of the device's uapi version: ioctl numbers at or past
 * it do not exist on that kernel. */
unsigned sim_device_command_end(const SimDevice *d);
/* Whether ioctl number nr runs a handler of the simulator (else it answers an
 * errno without reading the argument: -EINVAL, -ENOTTY or -EOPNOTSUPP). */
bool sim_device_ioctl_simulated(unsigned nr);

/*
 * A new simulated user process on d (the table is &(*ret)->ops). -ENODEV
 * once the device shuts down, -ENOMEM. Takes the lock.
 */
int sim_mm_new(SimDevice *d, SimMm **ret);
/*
 * The process is being killed: its WAIT_EVENTS sleepers wake and return
 * -EINTR, and any it starts later return at once. Takes the lock.
 */
void sim_mm_kill(SimMm *mm);
/*
 * The process exits (kfd_process_notifier_release): kills it, waits for its
 * ioctls in flight, closes every file it still has open — which destroys its
 * secondary contexts — and drops its primary context: queues, events and
 * memory go; dma-bufs it exported stay valid. Then frees mm. Not for the
 * device's own mm. Takes the lock.
 */
void sim_mm_free(SimMm *mm);
/*
 * A new fd (O_CLOEXEC) on the memfd of mm's open file fd, taken under the
 * lock so that it is that file's even if the number is closed (and reused)
 * right after: -EBADF when mm has no file at fd. Takes the lock.
 */
int sim_mm_dup_file(SimMm *mm, int fd);
/*
 * What mmap(addr, length, prot, flags, fd, offset) through mm's table would
 * map, with the same validation and errnos (sim-device.c op_mmap): a new fd
 * (O_CLOEXEC) on the memfd behind it in *ret_memfd, owned by the caller, and
 * the offset within that memfd. Mapping *ret_memfd at *ret_offset gives the
 * same memory as the mmap would. Takes the lock.
 */
int sim_mm_mmap_resolve(SimMm *mm, int fd, size_t length, uint64_t offset, int *ret_memfd,
                        uint64_t *ret_offset);

/* Absolute CLOCK_MONOTONIC deadline ns from now, for pthread_cond_timedwait. */
void sim_deadline_after_ns(struct timespec *ts, uint64_t ns);
