/* SPDX-License-Identifier: MIT */
/*
 * Memory of the simulated GPU. A SimBo is a buffer object: a memfd sealed
 * against shrinking and growing, mapped once into the simulator for the
 * engines, with a DRM-style fake mmap offset for the render node. BOs are
 * refcounted: a SimMem (one KFD handle of one process, `gpu_id<<32 | idr`)
 * holds one reference, so a BO imported by another context stays alive while
 * either handle exists, and an exported dma-buf is just another fd on the
 * memfd. A SimMem carries the GPU VA and the GPU mapping state; the set of
 * mapped SimMems of a process is its GPU VM, which sim_vm_access() translates
 * for the engines. Owned by SimProcess (handles) and SimDevice (BO list).
 * Locked.
 */
#pragma once

#include <linux/kfd_ioctl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sim-cache.h"
#include "sim-device.h"
#include "sim-topology.h"
#include "sim-types.h"

struct SimBo {
        SimBo *next;            /* SimDevice.bos */
        SimDevice *device;
        SimGpu *gpu;            /* the GPU whose memory it is (VRAM accounting, caches, dma-buf identity) */
        unsigned n_ref;
        int memfd;
        uint8_t *host;          /* the simulator's own mapping of the whole BO */
        uint64_t size;          /* page aligned */
        uint32_t alloc_flags;   /* KFD_IOC_ALLOC_MEM_FLAGS_* as allocated */
        uint64_t mmap_offset;   /* render-node fake offset */
        dev_t st_dev;
        ino_t st_ino;
        bool exported;          /* a dma-buf fd was handed out: importable */
        bool foreign;           /* another driver's dma-buf, imported (sim-memory.c) */
        bool populated;         /* every page backed, or being backed (sim_bo_populate) */
        SimBoCache *cache;      /* its GL2 state if it is VRAM (sim-cache.h), else NULL */
};

struct SimMem {
        SimBo *bo;
        SimPdd *pdd;            /* whose handle it is (pdd->alloc_idr) */
        uint32_t idr;
        uint64_t va;
        uint64_t size;          /* == bo->size */
        uint32_t flags;
        /* The GPU VMs it is mapped into, a bit per SimGpu.index: its own GPU's
         * and peers' (MAP_MEMORY_TO_GPU with several device ids). */
        uint32_t mapped_on;
        /* Queues using its mapping in each GPU's VM, by SimGpu.index (the
         * bo_va's queue_refcount of kfd_queue_buffer_get: one per VM). */
        unsigned queue_refcount[SIM_MAX_GPU_NODES];
};

/* A new BO of gpu (a GPU of d) of size bytes (page aligned) with one
 * reference, linked into d. */
int sim_bo_new(SimDevice *d, SimGpu *gpu, uint64_t size, uint32_t flags, SimBo **ret);
SimBo *sim_bo_ref(SimBo *bo);
/* Backs all of bo's pages once, at the first engine write (see sim-memory.c). */
void sim_bo_populate(SimBo *bo);
/*
 * Drops a reference. At the last one the BO record and the simulator's
 * mapping go; the memory of an exported BO lives on in its dma-buf fds, whose
 * memfd name lets an importer make a new record (sim-memory.c).
 */
void sim_bo_unref(SimBo *bo);
/* A reset of gpu (NULL: of every GPU) lost VRAM: every VRAM BO of it has its
 * pages dropped (they read as zeros). Called with the device lock held. */
void sim_memory_lose_vram(SimDevice *d, SimGpu *gpu);
/* Frees every BO record of the device (teardown). */
void sim_device_free_bos(SimDevice *d);
/* Finds the BO whose render-node offset range holds [offset, offset+length). */
SimBo *sim_device_find_bo_by_offset(SimDevice *d, uint64_t offset, uint64_t length);

/* The SimMem of a handle of this process (in the pdd of the handle's GPU),
 * NULL if the handle is unknown. */
SimMem *sim_process_find_mem(SimProcess *p, uint64_t handle);
/* Frees every handle of the process (process teardown). */
void sim_process_free_mems(SimProcess *p);
/* True if the process holds a handle on bo (DRM mmap permission, drm_vma_node_is_allowed). */
bool sim_process_has_bo(SimProcess *p, SimBo *bo);

/*
 * The GPU VM of a process on one GPU is its pdd's: every SimMem of the
 * process (of any of its pdds) mapped on that GPU (SimMem.mapped_on). An
 * engine of that GPU translates through it.
 *
 * sim_vm_lookup() - the SimMem mapped in vm whose GPU VA range holds va, or NULL.
 */
SimMem *sim_vm_lookup(SimPdd *vm, uint64_t va);
/*
 * sim_vm_access() - translate [va, va+len) for an engine access.
 * Returns 0 with the host pointer in *ret_host when the whole range lies in
 * one BO mapped in vm, else -EFAULT with the first address that is not
 * covered in *ret_fault_va.
 */
int sim_vm_access(SimPdd *vm, uint64_t va, uint64_t len, uint8_t **ret_host, uint64_t *ret_fault_va);
/*
 * sim_vm_access() for an engine write: the mapping must also be writable. A
 * BO allocated without KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE is mapped readable
 * only (amdgpu_amdkfd_gpuvm.c get_pte_flags: AMDGPU_VM_PAGE_READABLE always,
 * AMDGPU_VM_PAGE_WRITEABLE with the flag), and a write to it is a protection
 * fault: -EFAULT with va in *ret_fault_va.
 */
int sim_vm_access_write(SimPdd *vm, uint64_t va, uint64_t len, uint8_t **ret_host, uint64_t *ret_fault_va);
/* Whether the mapping holding va is present but read-only (what a fault at va
 * then was: a write to it; sim_events_memory_fault). */
bool sim_vm_read_only(SimPdd *vm, uint64_t va);
/* sim_vm_access_write() for a bulk engine write (copy or fill destination):
 * backs the BO's pages first (sim_bo_populate). */
int sim_vm_access_bulk_write(SimPdd *vm, uint64_t va, uint64_t len, uint8_t **ret_host, uint64_t *ret_fault_va);

/*
 * A snapshot of a process's VM on one GPU for an engine that runs without the device
 * lock (the CP engine's shader dispatches): every mapped SimMem's range and
 * host pointer, sorted by VA, each holding a reference on its BO so that the
 * memory stays valid however UNMAP/FREE race with the dispatch. The dispatch
 * therefore sees the VM as it was when it started; unmapping takes effect for
 * the packets after it, as a TLB flush would. Create and release locked;
 * translate without any lock.
 */
typedef struct SimVmEntry {
        uint64_t va, size;
        uint8_t *host;
        SimBo *bo;              /* reference held */
        bool writable;          /* KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE (sim_vm_access_write()) */
} SimVmEntry;

typedef struct SimVmSnapshot {
        SimVmEntry *entries;
        size_t n;
} SimVmSnapshot;

/* Locked. Returns 0 or -ENOMEM. */
int sim_vm_snapshot_new(SimPdd *vm, SimVmSnapshot *ret);
/* Locked. Drops the BO references. Safe on a zeroed snapshot. */
void sim_vm_snapshot_release(SimVmSnapshot *s);
/* Lock-free; the sim_vm_access() rule: [va, va+len) inside one entry (its
 * memory at entry->host + va - entry->va, or its GPU view: sim-cache.h), else
 * -EFAULT with the first address not covered in *ret_fault_va. */
int sim_vm_snapshot_find(const SimVmSnapshot *s, uint64_t va, uint64_t len, const SimVmEntry **ret_entry,
                         uint64_t *ret_fault_va);

/* Ioctl handlers (kfd_chardev.c counterparts). Locked. */
int sim_memory_alloc(SimProcess *p, struct kfd_ioctl_alloc_memory_of_gpu_args *a);
int sim_memory_free(SimProcess *p, struct kfd_ioctl_free_memory_of_gpu_args *a);
int sim_memory_map(SimProcess *p, struct kfd_ioctl_map_memory_to_gpu_args *a);
int sim_memory_unmap(SimProcess *p, struct kfd_ioctl_unmap_memory_from_gpu_args *a);
int sim_memory_available(SimProcess *p, struct kfd_ioctl_get_available_memory_args *a);
int sim_memory_get_dmabuf_info(SimProcess *p, struct kfd_ioctl_get_dmabuf_info_args *a);
int sim_memory_import_dmabuf(SimProcess *p, struct kfd_ioctl_import_dmabuf_args *a);
struct kfd_ioctl_export_dmabuf_args;
int sim_memory_export_dmabuf(SimProcess *p, struct kfd_ioctl_export_dmabuf_args *a);
