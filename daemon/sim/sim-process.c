/* SPDX-License-Identifier: MIT */
/*
 * KFD process contexts of the simulated GPU (see sim-process.h), and the
 * ioctls that act on the context as a whole: GET_VERSION, ACQUIRE_VM,
 * RUNTIME_ENABLE, GET_CLOCK_COUNTERS, GET_PROCESS_APERTURES_NEW
 * (kfd_chardev.c counterparts).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kfd/kfd-uapi.h"
#include "sim-cp.h"
#include "sim-device.h"
#include "sim-events.h"
#include "sim-file.h"
#include "sim-ih.h"
#include "sim-memory.h"
#include "sim-cache.h"
#include "sim-process.h"
#include "sim-queue.h"
#include "sim-sdma.h"
#include "util/macro.h"


static void pdd_free(SimPdd *pdd) {
        if (!pdd)
                return;
        if (pdd->doorbells)
                munmap(pdd->doorbells, KFD_DOORBELL_SLICE_SIZE);
        safe_close(pdd->doorbell_fd);
        if (pdd->vm_file) {
                pdd->vm_file->process = NULL;
                sim_file_unref(pdd->vm_file);
        }
        free(pdd);
}

/* The process's view of gpu, with its doorbell slice: 1024 8-byte doorbells
 * (kfd_doorbell.c). Sealed at its size: the engines read it through the
 * mapping below, and a remote process holds the memfd too (sim-remote.c) —
 * shrunk under the engines it would fault them. */
static int pdd_new(SimProcess *p, SimGpu *gpu, SimPdd **ret) {
        SimPdd *pdd;
        void *m;

        pdd = calloc(1, sizeof *pdd);
        if (!pdd)
                return -ENOMEM;
        pdd->process = p;
        pdd->gpu = gpu;
        pdd->doorbell_fd = memfd_create("kfd-doorbells", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (pdd->doorbell_fd < 0 || ftruncate(pdd->doorbell_fd, KFD_DOORBELL_SLICE_SIZE) < 0 ||
            fcntl(pdd->doorbell_fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
                int r = -errno;
                pdd_free(pdd);
                return r;
        }
        m = mmap(NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, pdd->doorbell_fd, 0);
        if (m == MAP_FAILED) {
                int r = -errno;
                pdd_free(pdd);
                return r;
        }
        pdd->doorbells = m;
        *ret = pdd;
        return 0;
}

static void process_free(SimProcess *p) {
        if (!p)
                return;
        if (p->device)
                sim_ih_process_gone(p);
        for (uint32_t i = 0; i < SIM_MAX_QUEUES_PER_PROCESS; i++)
                sim_queue_free(p->queues[i]);
        sim_events_free_all(p);
        sim_process_free_mems(p);
        sim_line_cache_free(p->icache);
        sim_line_cache_free(p->kcache);
        for (unsigned i = 0; i < p->n_pdds; i++)
                pdd_free(p->pdds[i]);
        if (p->device)
                for (SimProcess **x = &p->device->processes; *x; x = &(*x)->next)
                        if (*x == p) {
                                *x = p->next;
                                break;
                        }
        free(p);
}
DEFINE_POINTER_CLEANUP(SimProcess, process_free);

int sim_process_new(SimMm *mm, bool primary, SimProcess **ret) {
        _cleanup_(process_freep) SimProcess *p = NULL;
        SimDevice *d = mm->device;
        int r;

        p = calloc(1, sizeof *p);
        if (!p)
                return -ENOMEM;
        p->n_ref = 1;
        p->primary = primary;
        p->signal_event_count = 1; /* kfd_event_init_process: id 0 is reserved */
        p->vcache = (SimIsaVectorCaches) { .owner = sim_cache_owner_new(), .glv_gen = &p->glv_gen,
                                           .gl1_gen = &p->gl1_gen };
        /* kfd_init_apertures: a pdd for every GPU node. */
        for (unsigned i = 0; i < d->n_gpus; i++) {
                r = pdd_new(p, d->gpus[i], &p->pdds[i]);
                if (r < 0)
                        return r;
                p->n_pdds++;
        }

        p->device = d;
        p->mm = mm;
        p->next = d->processes;
        d->processes = p;
        *ret = TAKE_PTR(p);
        return 0;
}

SimProcess *sim_process_ref(SimProcess *p) {
        if (p)
                p->n_ref++;
        return p;
}

void sim_process_unref(SimProcess *p) {
        if (!p)
                return;
        assert(p->n_ref > 0);
        if (--p->n_ref == 0)
                process_free(p);
}

/* Every queue of p stops for good, on every GPU, and queues it makes later start stopped. */
static void process_evict(SimProcess *p) {
        p->evicted = true;
        for (uint32_t i = 0; i < SIM_MAX_QUEUES_PER_PROCESS; i++)
                if (p->queues[i] && p->queues[i]->cp)
                        sim_cp_preempt(p->queues[i]);
}

void sim_process_vm_fault(SimProcess *p, SimGpu *gpu, uint64_t va) {
        process_evict(p);
        sim_events_memory_fault(p, gpu, va);
}

void sim_process_gpu_reset(SimProcess *p, SimGpu *gpu, bool memory_lost) {
        process_evict(p);
        sim_events_gpu_reset(p, gpu, memory_lost);
}

int sim_process_create_secondary(SimFile *f) {
        SimProcess *p = f->process, *s;
        int r;

        if (!p || !p->primary)
                return -EINVAL; /* "Each FD owns only one kfd_process" */
        r = sim_process_new(p->mm, false, &s);
        if (r < 0)
                return r;
        f->process = s;
        sim_process_unref(p); /* "Each open() increases kref of the primary kfd_process" */
        return 0;
}

SimPdd *sim_process_pdd(SimProcess *p, uint32_t gpu_id) {
        SimGpu *g = sim_device_gpu(p->device, gpu_id);

        return g ? p->pdds[g->index] : NULL;
}

/* kfd_ioctl_get_version: the device's uapi version (SimOptions.kfd_minor). */
int sim_process_get_version(SimProcess *p, struct kfd_ioctl_get_version_args *a) {
        a->major_version = 1;
        a->minor_version = p->device->kfd_minor;
        return 0;
}

static uint64_t clock_ns(clockid_t id) {
        struct timespec ts;

        clock_gettime(id, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* kfd_ioctl_get_clock_counters. */
int sim_process_get_clock_counters(SimProcess *p, struct kfd_ioctl_get_clock_counters_args *a) {
        /* "Node without GPU resource" -> 0 */
        a->gpu_clock_counter = sim_device_gpu(p->device, a->gpu_id) ? sim_gpu_clock_counter() : 0;
        a->cpu_clock_counter = clock_ns(CLOCK_MONOTONIC_RAW); /* ktime_get_raw_ns */
        a->system_clock_counter = clock_ns(CLOCK_BOOTTIME);   /* ktime_get_boottime_ns */
        a->system_clock_freq = 1000000000;
        return 0;
}

/* kfd_ioctl_get_process_apertures_new: num_of_nodes 0 asks for the count. */
int sim_process_get_apertures(SimProcess *p, struct kfd_ioctl_get_process_apertures_new_args *a) {
        /* One entry per GPU, in topology order (the iGPU first when there is one). */
        unsigned n = p->n_pdds;
        struct kfd_process_device_apertures *pa;

        if (a->num_of_nodes == 0) {
                a->num_of_nodes = n;
                return 0;
        }
        pa = (struct kfd_process_device_apertures *) (uintptr_t) a->kfd_process_device_apertures_ptr;
        if (!pa)
                return -EFAULT;
        /* "Fill in process-aperture information for all available nodes, but
         * not more than args->num_of_nodes". */
        n = MIN(n, a->num_of_nodes);
        for (unsigned i = 0; i < n; i++)
                pa[i] = (struct kfd_process_device_apertures) {
                        .lds_base = SIM_LDS_APERTURE_BASE,
                        .lds_limit = SIM_LDS_APERTURE_BASE | SIM_APERTURE_SIZE,
                        .scratch_base = SIM_SCRATCH_APERTURE_BASE,
                        .scratch_limit = SIM_SCRATCH_APERTURE_BASE | SIM_APERTURE_SIZE,
                        .gpuvm_base = SIM_GPUVM_BASE,
                        .gpuvm_limit = SIM_GPUVM_LIMIT,
                        .gpu_id = p->pdds[i]->gpu->info.gpu_id,
                };
        a->num_of_nodes = n;
        return 0;
}

/* kfd_ioctl_acquire_vm + kfd_process_device_init_vm: a non-DRM (or closed) fd,
 * or one of another process's fd table, -> -EINVAL (fget / amdgpu_file_to_fpriv),
 * unknown gpu -> -EINVAL, the same file again for that GPU -> 0, another file
 * -> -EBUSY, a render file already holding another process's (or another
 * GPU's) compute VM -> -EINVAL (amdgpu_amdkfd_gpuvm_acquire_process_vm). Each
 * GPU's pdd acquires its own VM. */
int sim_process_acquire_vm(SimProcess *p, struct kfd_ioctl_acquire_vm_args *a) {
        SimFile *f = sim_file_find(p->mm, (int) a->drm_fd);
        SimPdd *pdd = sim_process_pdd(p, a->gpu_id);

        if (!f || f->kind != SIM_FILE_RENDER)
                return -EINVAL;
        if (!pdd)
                return -EINVAL;
        if (pdd->vm_file)
                return pdd->vm_file == f ? 0 : -EBUSY;
        if (f->process)
                return -EINVAL;
        /* amdgpu_amdkfd_gpuvm_acquire_process_vm() takes the VM of that
         * device's DRM file: another GPU's render node is no VM of this one. */
        if (f->gpu != pdd->gpu)
                return -EINVAL;
        pdd->vm_file = sim_file_ref(f);
        f->process = p;
        return 0;
}

/* kfd_ioctl_runtime_enable: ENABLE fails -EBUSY if already enabled and -EEXIST
 * if a queue exists; mode_mask 0 disables (always succeeds). */
int sim_process_runtime_enable(SimProcess *p, struct kfd_ioctl_runtime_enable_args *a) {
        if (!(a->mode_mask & 1u)) {
                p->runtime_enabled = false;
                return 0;
        }
        if (p->runtime_enabled)
                return -EBUSY;
        for (uint32_t i = 0; i < SIM_MAX_QUEUES_PER_PROCESS; i++)
                if (p->queues[i])
                        return -EEXIST;
        p->runtime_enabled = true;
        return 0;
}

/* The context's pdd for a call that needs the VM (kfd_bind_process_to_device):
 * NULL when the id names no GPU; *ret_bound says whether it has its VM. */
static SimPdd *bound_pdd(SimProcess *p, uint32_t gpu_id, bool *ret_bound) {
        SimPdd *pdd = sim_process_pdd(p, gpu_id);

        *ret_bound = pdd && pdd->vm_file;
        return pdd;
}

/* kfd_chardev.c kfd_ioctl_set_memory_policy: both policies must be
 * KFD_IOC_CACHE_POLICY_COHERENT or _NONCOHERENT (-EINVAL), the gpu_id one of
 * the process's (-EINVAL), and binding the process to the device must work
 * (-ESRCH). On gfx9 and later the alternate aperture is ignored
 * (kfd_device_queue_manager_v9.c update_qpd_v9). */
int sim_process_set_memory_policy(SimProcess *p, struct kfd_ioctl_set_memory_policy_args *a) {
        bool bound;

        if (a->default_policy > KFD_IOC_CACHE_POLICY_NONCOHERENT ||
            a->alternate_policy > KFD_IOC_CACHE_POLICY_NONCOHERENT)
                return -EINVAL;
        if (!bound_pdd(p, a->gpu_id, &bound))
                return -EINVAL;
        if (!bound)
                return -ESRCH;
        p->default_policy = a->default_policy;
        p->alternate_policy = a->alternate_policy;
        return 0;
}

/* kfd_ioctl_set_scratch_backing_va: -EINVAL for an unknown gpu_id, the bind's
 * error (-ENODEV without a VM) otherwise; the address is stored for the
 * non-HWS path only, never checked. */
int sim_process_set_scratch_backing_va(SimProcess *p, struct kfd_ioctl_set_scratch_backing_va_args *a) {
        bool bound;

        if (!bound_pdd(p, a->gpu_id, &bound))
                return -EINVAL;
        if (!bound)
                return -ENODEV;
        p->scratch_backing_va = a->va_addr;
        return 0;
}

/* kfd_ioctl_set_trap_handler: -EINVAL for an unknown gpu_id, -ESRCH when the
 * bind fails; the TBA/TMA go into the CWSR trap area (kfd_process.c
 * kfd_process_set_trap_handler). Only a trap runs them, which the simulator
 * does not raise. */
int sim_process_set_trap_handler(SimProcess *p, struct kfd_ioctl_set_trap_handler_args *a) {
        bool bound;

        if (!bound_pdd(p, a->gpu_id, &bound))
                return -EINVAL;
        if (!bound)
                return -ESRCH;
        p->tba_addr = a->tba_addr;
        p->tma_addr = a->tma_addr;
        return 0;
}

/* kfd_ioctl_set_xnack_mode: a negative value queries; setting is refused
 * with -EBUSY while the process has queues, and turning XNACK on with -EPERM
 * where a GPU cannot (kfd_process_xnack_mode: gfx10.3 has no retry faults). */
int sim_process_set_xnack_mode(SimProcess *p, struct kfd_ioctl_set_xnack_mode_args *a) {
        if (a->xnack_enabled < 0) {
                a->xnack_enabled = 0;
                return 0;
        }
        for (uint32_t i = 0; i < SIM_MAX_QUEUES_PER_PROCESS; i++)
                if (p->queues[i])
                        return -EBUSY;
        return a->xnack_enabled ? -EPERM : 0;
}

/* amdgpu's gfx config arrays (amdgpu_gfx.h: tile_mode_array[32],
 * macrotile_mode_array[16]), which gfx10 never programs: zeros. */
#define SIM_TILE_CONFIGS 32u
#define SIM_MACRO_TILE_CONFIGS 16u
/* GB_ADDR_CONFIG as AMD's own model backend of the thunk reports it for its
 * gfx10/11 models (libhsakmt hsakmtmodel.c, rocm-facts §3): what ROCr's
 * image manager reads. */
#define SIM_GB_ADDR_CONFIG 0x10000444u

/* kfd_ioctl_get_tile_config + amdgpu_amdkfd_get_tile_config: the counts
 * are clamped to the device's arrays and say how many were written; banks
 * and ranks come from MC_ARB_RAMCFG, which gfx10 does not have (0). */
int sim_process_get_tile_config(SimProcess *p, struct kfd_ioctl_get_tile_config_args *a) {
        uint32_t *tiles = (uint32_t *) (uintptr_t) a->tile_config_ptr;
        uint32_t *macros = (uint32_t *) (uintptr_t) a->macro_tile_config_ptr;

        if (!sim_process_pdd(p, a->gpu_id))
                return -EINVAL;
        a->gb_addr_config = SIM_GB_ADDR_CONFIG;
        a->num_banks = 0;
        a->num_ranks = 0;
        a->num_tile_configs = MIN(a->num_tile_configs, SIM_TILE_CONFIGS);
        a->num_macro_tile_configs = MIN(a->num_macro_tile_configs, SIM_MACRO_TILE_CONFIGS);
        /* copy_to_user of each array: a NULL one of a nonzero count faults. */
        if ((a->num_tile_configs && !tiles) || (a->num_macro_tile_configs && !macros))
                return -EFAULT;
        for (uint32_t i = 0; i < a->num_tile_configs; i++)
                tiles[i] = 0;
        for (uint32_t i = 0; i < a->num_macro_tile_configs; i++)
                macros[i] = 0;
        return 0;
}
