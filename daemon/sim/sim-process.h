/* SPDX-License-Identifier: MIT */
/*
 * One KFD process context of the simulated machine: what the kernel keeps in
 * struct kfd_process, with one SimPdd (kfd_process_device) per GPU: that
 * GPU's VM, memory handles and doorbell page. A primary one is created by the first open_kfd() of its mm and held by
 * the mm until the device goes (the kernel keeps it until the process exits);
 * a secondary one is created by CREATE_PROCESS on a fd. Either is owned by
 * references: every KFD file on it holds one, every ioctl in flight holds one
 * (so a WAIT_EVENTS sleeping while the fd is closed keeps it alive, as the
 * kernel's file reference does), and it is torn down — queues destroyed,
 * events destroyed, memory freed — when the last one goes, which for a
 * secondary context is the close of its fd. Locked.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "isa/sim-isa.h"
#include "sim-device.h"
#include "sim-types.h"

/* Exception records handed out by KfdOps.exception_info (sim-events.c). */
/* kfd_flat_memory.c kfd_init_apertures_v9: the LDS and scratch apertures of
 * generic (flat) addresses, 4 GiB each. */
#define SIM_LDS_APERTURE_BASE (1ULL << 48)
#define SIM_SCRATCH_APERTURE_BASE (2ULL << 48)
#define SIM_APERTURE_SIZE 0xFFFFFFFFULL

#define SIM_MAX_EXCEPTIONS 16u
#define SIM_EXCEPTION_TEXT 256u
typedef struct SimException {
        uint32_t queue_id;
        char text[SIM_EXCEPTION_TEXT];
} SimException;

/*
 * A process's view of one GPU (struct kfd_process_device): made for every GPU
 * with the process, as kfd_flat_memory.c kfd_init_apertures makes one per
 * GPU node at kfd_create_process. Its VM is the render file ACQUIRE_VM gave
 * it (pdd->drm_priv); its memory handles are gpu_id << 32 | idr of its own
 * idr (pdd->alloc_idr); its doorbell slice is its own page
 * (kfd_alloc_process_doorbells per pdd), mmapped at an offset that names its
 * gpu_id (KFD_MMAP_GPU_ID). Queue ids are the process's (pqm), not the pdd's.
 */
struct SimPdd {
        SimProcess *process;
        SimGpu *gpu;
        SimFile *vm_file;        /* render node acquired with ACQUIRE_VM (ref), or NULL */
        /* Memory handles, indexed by idr (sim-memory.c). */
        SimMem **mems;
        uint32_t n_mems;
        bool doorbell_used[SIM_DOORBELL_COUNT];
        int doorbell_fd;
        uint64_t *doorbells;     /* host view of the 8 KiB slice */
};

struct SimProcess {
        SimProcess *next;        /* SimDevice.processes */
        SimDevice *device;
        SimMm *mm;               /* the simulated user process it belongs to */
        unsigned n_ref;
        bool primary;            /* the mm's own context (else made by CREATE_PROCESS) */
        /* A GPU VM fault evicted every queue of the context, for good
         * (kfd_set_dbg_ev_from_interrupt -> kfd_dqm_evict_pasid, kfd-facts
         * §7.1): no queue runs again, and queues created afterwards start
         * evicted (create_queue_cpsch: is_evicted = qpd->evicted). */
        bool evicted;

        SimPdd *pdds[SIM_MAX_GPU_NODES]; /* by SimGpu.index */
        unsigned n_pdds;
        bool runtime_enabled;
        /* What the thunk sets once at start (sim-process.c): kept as the
         * kernel keeps it in the qpd, read by nothing the simulator runs. */
        uint32_t default_policy, alternate_policy;
        uint64_t scratch_backing_va;
        uint64_t tba_addr, tma_addr;

        SimLineCache *icache;    /* instruction cache (sim-cache.h), NULL before the first dispatch */
        SimLineCache *kcache;    /* scalar data cache (sim-cache.h), NULL before the first dispatch */
        /* The vector L0 and GL1 of its dispatches (sim-isa-vcache.c): lines are
         * the interpreter threads', tagged with vcache.owner; GLV_INV and
         * GL1_INV bump glv_gen and gl1_gen. */
        uint32_t glv_gen, gl1_gen;
        SimIsaVectorCaches vcache;

        /* Events (sim-events.c). */
        SimEvent *events;        /* all events */
        SimEvent *signal_events[KFD_SIGNAL_EVENT_LIMIT]; /* signal/debug events by slot (= id) */
        SimBo *signal_bo;        /* the registered event page (ref) */
        uint64_t signal_handle;
        uint64_t *signal_slots;  /* host view of the event page */
        uint32_t signal_slot_count;
        uint32_t signal_event_count; /* starts at 1: id 0 is reserved */
        uint32_t next_nonsignal_id;
        /* HW exceptions not yet taken, oldest first (a ring of SIM_MAX_EXCEPTIONS). */
        SimException exceptions[SIM_MAX_EXCEPTIONS];
        unsigned exception_first, exception_count;

        /* Queues (sim-queue.c), on any of its GPUs. */
        SimQueue *queues[SIM_MAX_QUEUES_PER_PROCESS];
};

int sim_process_new(SimMm *mm, bool primary, SimProcess **ret);
SimProcess *sim_process_ref(SimProcess *p);
/* Drops a reference; tears the context down at the last one. */
void sim_process_unref(SimProcess *p);

struct kfd_ioctl_runtime_enable_args;
struct kfd_ioctl_get_version_args;
struct kfd_ioctl_get_clock_counters_args;
struct kfd_ioctl_get_process_apertures_new_args;
struct kfd_ioctl_acquire_vm_args;
struct kfd_ioctl_set_memory_policy_args;
struct kfd_ioctl_set_scratch_backing_va_args;
struct kfd_ioctl_set_trap_handler_args;
struct kfd_ioctl_set_xnack_mode_args;
struct kfd_ioctl_get_tile_config_args;

/*
 * A GPU VM fault at va in a queue of p on gpu (the interrupt path of
 * kfd_int_process_v10.c for a process that is not being debugged): every
 * queue of p is evicted, on every GPU (kfd_dqm_evict_pasid ->
 * kfd_process_evict_queues walks all of the process's pdds) — a dispatch
 * running on another of its queues is preempted and never resumes — then its
 * MEMORY events are signalled with the address and gpu's id. Other processes
 * are untouched, on either GPU. Locked.
 */
void sim_process_vm_fault(SimProcess *p, SimGpu *gpu, uint64_t va);
/* A reset of gpu seen by p: evicted, HW_EXCEPTION events signaled with its id (sim_device_reset()). */
void sim_process_gpu_reset(SimProcess *p, SimGpu *gpu, bool memory_lost);

/*
 * AMDKFD_IOC_CREATE_PROCESS on file f (kfd_ioctl_create_process, uapi 1.19):
 * only on a fd that still holds its mm's primary process (-EINVAL otherwise,
 * also for a fd that already holds a secondary one); gives f a new secondary
 * context — its own VM to acquire, events, doorbells and queues — and drops
 * f's reference on the primary. Locked.
 */
int sim_process_create_secondary(SimFile *f);

/* Ioctl handlers (kfd_chardev.c counterparts). Locked. */
int sim_process_get_version(SimProcess *p, struct kfd_ioctl_get_version_args *a);
int sim_process_get_clock_counters(SimProcess *p, struct kfd_ioctl_get_clock_counters_args *a);
int sim_process_get_apertures(SimProcess *p, struct kfd_ioctl_get_process_apertures_new_args *a);
int sim_process_acquire_vm(SimProcess *p, struct kfd_ioctl_acquire_vm_args *a);
int sim_process_runtime_enable(SimProcess *p, struct kfd_ioctl_runtime_enable_args *a);
/* The once-at-start settings of the thunk (sim-process.c cites the kernel):
 * -EINVAL for a GPU id that is not the context's or a bad policy, -ESRCH /
 * -ENODEV before ACQUIRE_VM bound the context to the GPU. */
int sim_process_set_memory_policy(SimProcess *p, struct kfd_ioctl_set_memory_policy_args *a);
int sim_process_set_scratch_backing_va(SimProcess *p, struct kfd_ioctl_set_scratch_backing_va_args *a);
int sim_process_set_trap_handler(SimProcess *p, struct kfd_ioctl_set_trap_handler_args *a);
/* XNACK: gfx1030 has no retry faults, so 0 (off) is the only mode; a
 * negative value queries it. -EPERM for 1, -EBUSY while queues exist. */
int sim_process_set_xnack_mode(SimProcess *p, struct kfd_ioctl_set_xnack_mode_args *a);
/* GET_TILE_CONFIG: gfx10's answer (sim-process.c); -EINVAL for a GPU id that
 * is not the context's, -EFAULT for a NULL array of a nonzero count. */
int sim_process_get_tile_config(SimProcess *p, struct kfd_ioctl_get_tile_config_args *a);

/*
 * The context's pdd on the GPU gpu_id names (kfd_process_device_data_by_id):
 * NULL for an id of no GPU (the kernel's "Getting device by id failed" /
 * -EINVAL where callers say). Its VM exists once ACQUIRE_VM gave it one
 * (pdd->vm_file; kfd_bind_process_to_device fails before).
 */
SimPdd *sim_process_pdd(SimProcess *p, uint32_t gpu_id);
