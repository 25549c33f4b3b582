/* SPDX-License-Identifier: MIT */
/*
 * The SimDevice behind sim.h: one simulated machine with one gfx1030 GPU. It
 * owns the lock that guards every sim object, the condition variable
 * WAIT_EVENTS sleeps on, the topology, the files and processes, the BO list
 * (for dma-buf import and render-node offsets), the SDMA queue pool and the
 * engine threads. This header is for daemon/sim only.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kfd/kfd-ops.h"
#include "sim-cp.h"
#include "sim-topology.h"
#include "sim-types.h"
#include "sim.h"

#define SIM_MAX_SDMA_ENGINES 8u
#define SIM_MAX_SDMA_SLOTS 64u

/*
 * One simulated user process as KFD tells them apart: by address space
 * (kfd_process is looked up by current->mm). Every open_kfd() through its
 * KfdOps table refers to the same primary KFD process, created by the first
 * open and kept until the device goes (the kernel keeps it until the mm
 * exits, whatever fds are closed); AMDKFD_IOC_CREATE_PROCESS turns one open
 * fd into a secondary context of its own. The device's own mm is the calling
 * process; sim_device_add_mm() makes more, for tests that need two processes
 * on one GPU.
 */
typedef struct SimMm {
        struct SimMm *next;   /* SimDevice.extra_mms */
        SimDevice *device;
        KfdOps ops;           /* userdata = this mm */
        SimProcess *primary;  /* reference; NULL until the first open_kfd() */
} SimMm;

struct SimDevice {
        pthread_mutex_t lock;
        pthread_cond_t wait_cond;   /* WAIT_EVENTS sleepers; broadcast on every event change */
        pthread_cond_t idle_cond;   /* signalled when n_busy drops to 0 */
        pid_t pid;                  /* the process that created the device and owns its fds */

        SimGpuInfo gpu;
        char *sysfs_dir;
        bool own_sysfs_dir;
        uint32_t kfd_minor;         /* KFD uapi minor version this kernel speaks (SimOptions) */
        SimMm mm;                   /* the creating process */
        SimMm *extra_mms;           /* sim_device_add_mm() */

        SimFile *files;
        SimProcess *processes;
        SimBo *bos;
        uint64_t next_mmap_offset;
        uint64_t vram_used;

        SimQueue *sdma_slots[SIM_MAX_SDMA_SLOTS]; /* dqm->sdma_bitmap: engine = slot % n_engines */
        SimEngine *sdma_engines[SIM_MAX_SDMA_ENGINES];
        SimEngine *cp_engines[SIM_CP_PIPES];      /* one per MEC pipe (sim-cp.h) */
        unsigned next_cp_pipe;
        pthread_cond_t cp_cond;     /* broadcast when a dispatch lets go of its queue */
        uint64_t dispatch_budget;   /* wave-instructions per dispatch (SimOptions) */

        unsigned n_busy;            /* ioctls in flight */
        bool shutting_down;
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

/* AMDKFD_COMMAND_END of the device's uapi version: ioctl numbers at or past
 * it do not exist on that kernel. */
unsigned sim_device_command_end(const SimDevice *d);

/* Absolute CLOCK_MONOTONIC deadline ns from now, for pthread_cond_timedwait. */
void sim_deadline_after_ns(struct timespec *ts, uint64_t ns);
