/* SPDX-License-Identifier: MIT */
/*
 * The SimDevice and the KfdOps table it serves (sim.h, sim-device.h). The
 * ioctl entry point mirrors kfd_chardev.c kfd_ioctl: dispatch on _IOC_NR
 * only, take the copy direction from the KFD's own word for that number
 * (kfd-ioctl-table.h), never from the caller's; copy in _IOC_SIZE(request)
 * bytes if that word has IOC_IN, zero-extended to the larger of the two sizes
 * (and the simulator's own struct), run the handler, copy the caller's size
 * back if it has IOC_OUT (also on error, as the kernel does), -EINVAL
 * (-ENOTTY from uapi 1.19) for a number past the
 * table of the simulated uapi version, -EBADF for a fd used by another process
 * than its opener (a host process, or a simulated one: SimMm). Opens of one mm
 * share its primary KFD process;
 * CREATE_PROCESS gives a fd a secondary one (sim-device.h SimMm). mmap on the KFD fd serves the
 * doorbell slice and the event page (kfd_mmap); mmap on the render fd serves
 * BO contents at their DRM fake offsets (drm_gem_mmap). Ioctls on a render fd
 * are the amdgpu GEM and PRIME calls of sim-drm.c (drm_ioctl); any other
 * request on it is -ENOTTY.
 *
 * Not simulated (returns -EOPNOTSUPP): ioctls the daemon never issues (SVM,
 * CRIU, SMI events, debugger, CU masks, GWS, scratch/trap-handler setup,
 * queue update/wave state, memory policy, deprecated apertures, xnack), and
 * the reserved-memory mmap type. The MMIO type maps the HDP flush page
 * (sim-cache.h).
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kfd/kfd-ioctl-table.h"
#include "kfd/kfd-uapi.h"
#include "sim-cache.h"
#include "sim-cp.h"
#include "sim-device.h"
#include "sim-drm.h"
#include "sim-engine.h"
#include "sim-events.h"
#include "sim-file.h"
#include "sim-memory.h"
#include "sim-populate.h"
#include "sim-process.h"
#include "sim-queue.h"
#include "sim-remote.h"
#include "sim-sdma.h"
#include "util/log.h"
#include "util/macro.h"

/* AMDKFD_COMMAND_END of uapi 1.19: 0x28 (CREATE_PROCESS is 0x27). */
#define SIM_IOCTL_COUNT 0x28u
#define SIM_IOC_NR_CREATE_PROCESS 0x27u
_Static_assert(SIM_IOCTL_COUNT <= KFD_IOCTL_TABLE_END, "a number the KFD's table does not know");
#define SIM_DEFAULT_GPU_ID 0x697Du
#define SIM_DEFAULT_CU_COUNT 40u
#define SIM_DEFAULT_VRAM_SIZE (1ULL << 30)

void sim_deadline_after_ns(struct timespec *ts, uint64_t ns) {
        clock_gettime(CLOCK_MONOTONIC, ts);
        ns += (uint64_t) ts->tv_nsec;
        ts->tv_sec += (time_t) (ns / 1000000000ULL);
        ts->tv_nsec = (long) (ns % 1000000000ULL);
}

typedef int (*SimIoctlFunc)(SimProcess *p, void *args);
typedef struct SimIoctl {
        SimIoctlFunc func;
        size_t size; /* the simulator's struct size for this nr */
} SimIoctl;

#define HANDLER(name, fn, type)                                     \
        static int name(SimProcess *p, void *args) {                \
                return fn(p, (type *) args);                        \
        }
HANDLER(h_get_version, sim_process_get_version, struct kfd_ioctl_get_version_args)
HANDLER(h_create_queue, sim_queue_create, SimCreateQueueArgs)
HANDLER(h_destroy_queue, sim_queue_destroy, struct kfd_ioctl_destroy_queue_args)
HANDLER(h_get_clock_counters, sim_process_get_clock_counters, struct kfd_ioctl_get_clock_counters_args)
HANDLER(h_create_event, sim_events_create, struct kfd_ioctl_create_event_args)
HANDLER(h_destroy_event, sim_events_destroy, struct kfd_ioctl_destroy_event_args)
HANDLER(h_set_event, sim_events_set, struct kfd_ioctl_set_event_args)
HANDLER(h_reset_event, sim_events_reset, struct kfd_ioctl_reset_event_args)
HANDLER(h_wait_events, sim_events_wait, struct kfd_ioctl_wait_events_args)
HANDLER(h_get_apertures, sim_process_get_apertures, struct kfd_ioctl_get_process_apertures_new_args)
HANDLER(h_acquire_vm, sim_process_acquire_vm, struct kfd_ioctl_acquire_vm_args)
HANDLER(h_alloc, sim_memory_alloc, struct kfd_ioctl_alloc_memory_of_gpu_args)
HANDLER(h_free, sim_memory_free, struct kfd_ioctl_free_memory_of_gpu_args)
HANDLER(h_map, sim_memory_map, struct kfd_ioctl_map_memory_to_gpu_args)
HANDLER(h_unmap, sim_memory_unmap, struct kfd_ioctl_unmap_memory_from_gpu_args)
HANDLER(h_get_dmabuf_info, sim_memory_get_dmabuf_info, struct kfd_ioctl_get_dmabuf_info_args)
HANDLER(h_import_dmabuf, sim_memory_import_dmabuf, struct kfd_ioctl_import_dmabuf_args)
HANDLER(h_available, sim_memory_available, struct kfd_ioctl_get_available_memory_args)
HANDLER(h_export_dmabuf, sim_memory_export_dmabuf, struct kfd_ioctl_export_dmabuf_args)
HANDLER(h_runtime_enable, sim_process_runtime_enable, struct kfd_ioctl_runtime_enable_args)
HANDLER(h_set_memory_policy, sim_process_set_memory_policy, struct kfd_ioctl_set_memory_policy_args)
HANDLER(h_set_scratch_backing_va, sim_process_set_scratch_backing_va, struct kfd_ioctl_set_scratch_backing_va_args)
HANDLER(h_set_trap_handler, sim_process_set_trap_handler, struct kfd_ioctl_set_trap_handler_args)
HANDLER(h_set_xnack_mode, sim_process_set_xnack_mode, struct kfd_ioctl_set_xnack_mode_args)
HANDLER(h_get_tile_config, sim_process_get_tile_config, struct kfd_ioctl_get_tile_config_args)
HANDLER(h_set_cu_mask, sim_queue_set_cu_mask, struct kfd_ioctl_set_cu_mask_args)

static const SimIoctl ioctls[SIM_IOCTL_COUNT] = {
        [0x01] = { h_get_version, sizeof(struct kfd_ioctl_get_version_args) },
        [0x02] = { h_create_queue, sizeof(SimCreateQueueArgs) },
        [0x03] = { h_destroy_queue, sizeof(struct kfd_ioctl_destroy_queue_args) },
        [0x04] = { h_set_memory_policy, sizeof(struct kfd_ioctl_set_memory_policy_args) },
        [0x05] = { h_get_clock_counters, sizeof(struct kfd_ioctl_get_clock_counters_args) },
        [0x08] = { h_create_event, sizeof(struct kfd_ioctl_create_event_args) },
        [0x09] = { h_destroy_event, sizeof(struct kfd_ioctl_destroy_event_args) },
        [0x0A] = { h_set_event, sizeof(struct kfd_ioctl_set_event_args) },
        [0x0B] = { h_reset_event, sizeof(struct kfd_ioctl_reset_event_args) },
        [0x0C] = { h_wait_events, sizeof(struct kfd_ioctl_wait_events_args) },
        [0x11] = { h_set_scratch_backing_va, sizeof(struct kfd_ioctl_set_scratch_backing_va_args) },
        [0x12] = { h_get_tile_config, sizeof(struct kfd_ioctl_get_tile_config_args) },
        [0x13] = { h_set_trap_handler, sizeof(struct kfd_ioctl_set_trap_handler_args) },
        [0x14] = { h_get_apertures, sizeof(struct kfd_ioctl_get_process_apertures_new_args) },
        [0x15] = { h_acquire_vm, sizeof(struct kfd_ioctl_acquire_vm_args) },
        [0x16] = { h_alloc, sizeof(struct kfd_ioctl_alloc_memory_of_gpu_args) },
        [0x17] = { h_free, sizeof(struct kfd_ioctl_free_memory_of_gpu_args) },
        [0x18] = { h_map, sizeof(struct kfd_ioctl_map_memory_to_gpu_args) },
        [0x19] = { h_unmap, sizeof(struct kfd_ioctl_unmap_memory_from_gpu_args) },
        [0x1C] = { h_get_dmabuf_info, sizeof(struct kfd_ioctl_get_dmabuf_info_args) },
        [0x1A] = { h_set_cu_mask, sizeof(struct kfd_ioctl_set_cu_mask_args) },
        [0x1D] = { h_import_dmabuf, sizeof(struct kfd_ioctl_import_dmabuf_args) },
        [0x21] = { h_set_xnack_mode, sizeof(struct kfd_ioctl_set_xnack_mode_args) },
        [0x23] = { h_available, sizeof(struct kfd_ioctl_get_available_memory_args) },
        [0x24] = { h_export_dmabuf, sizeof(struct kfd_ioctl_export_dmabuf_args) },
        [0x25] = { h_runtime_enable, sizeof(struct kfd_ioctl_runtime_enable_args) },
};

/* uapi versions and the ioctls they brought (kfd_ioctl.h's history):
 * 1.12 EXPORT_DMABUF (0x24), 1.13 RUNTIME_ENABLE and DBG_TRAP (0x25, 0x26),
 * 1.19 CREATE_PROCESS (0x27). */
bool sim_device_ioctl_simulated(unsigned nr) {
        return nr == SIM_IOC_NR_CREATE_PROCESS || (nr < SIM_IOCTL_COUNT && ioctls[nr].func);
}

SimGpu *sim_device_gpu(SimDevice *d, uint32_t gpu_id) {
        for (unsigned i = 0; i < d->n_gpus; i++)
                if (d->gpus[i]->info.gpu_id == gpu_id)
                        return d->gpus[i];
        return NULL;
}

SimGpu *sim_device_gpu_by_minor(SimDevice *d, unsigned minor) {
        for (unsigned i = 0; i < d->n_gpus; i++)
                if (d->gpus[i]->info.drm_render_minor == minor)
                        return d->gpus[i];
        return NULL;
}

SimGpu *sim_device_first_dgpu(SimDevice *d) {
        return d->gpus[d->has_igpu ? 1 : 0];
}

unsigned sim_device_command_end(const SimDevice *d) {
        if (d->kfd_minor >= 19)
                return 0x28;
        if (d->kfd_minor >= 13)
                return 0x27;
        if (d->kfd_minor >= 12)
                return 0x25;
        return 0x24;
}

/* kfd_open -> kfd_create_process: the mm's primary process, created by the
 * first open; each open file holds a reference. */
static int op_open_kfd(void *userdata) {
        SimMm *mm = userdata;
        SimDevice *d = mm->device;
        SimFile *f;
        int r;

        /* The simulator's state lives in the creating process only. */
        if (getpid() != d->pid)
                return -EPERM;
        pthread_mutex_lock(&d->lock);
        if (d->shutting_down) {
                r = -ENODEV;
                goto out;
        }
        if (!mm->primary) {
                r = sim_process_new(mm, true, &mm->primary);
                if (r < 0)
                        goto out;
        }
        r = sim_file_new(mm, SIM_FILE_KFD, &f);
        if (r < 0)
                goto out;
        f->process = sim_process_ref(mm->primary);
        r = f->fd;
out:
        pthread_mutex_unlock(&d->lock);
        return r;
}

static int op_open_render(void *userdata, unsigned minor) {
        SimMm *mm = userdata;
        SimDevice *d = mm->device;
        SimGpu *gpu;
        SimFile *f;
        int r;

        if (getpid() != d->pid)
                return -EPERM;
        gpu = sim_device_gpu_by_minor(d, minor);
        if (!gpu)
                return -ENOENT;
        pthread_mutex_lock(&d->lock);
        r = d->shutting_down ? -ENODEV : sim_file_new(mm, SIM_FILE_RENDER, &f);
        if (r >= 0) {
                f->gpu = gpu;
                r = f->fd;
        }
        pthread_mutex_unlock(&d->lock);
        return r;
}

/* Called locked: the fd is closed now, the context goes with its last reference. */
static void file_close(SimFile *f) {
        SimProcess *p = NULL;

        if (f->kind == SIM_FILE_KFD) {
                p = f->process;
                f->process = NULL;
        }
        f->open = false;
        safe_close(f->fd);
        f->fd = -EBADF;
        sim_process_unref(p);
        sim_file_unref(f);
}

static int op_close(void *userdata, int fd) {
        SimMm *mm = userdata;
        SimDevice *d = mm->device;
        SimFile *f;

        pthread_mutex_lock(&d->lock);
        f = sim_file_find(mm, fd);
        if (f)
                file_close(f);
        pthread_mutex_unlock(&d->lock);
        return f ? 0 : -EBADF;
}

/* The thread's cancelability on entry to the ioctl in flight (see sim_ioctl_cancellable()). */
static __thread int caller_cancel_state = PTHREAD_CANCEL_ENABLE;

void sim_ioctl_cancellable(bool on) {
        (void) pthread_setcancelstate(on ? caller_cancel_state : PTHREAD_CANCEL_DISABLE, NULL);
}

typedef struct IoctlUnwind {
        SimMm *mm;
        SimProcess *p;
        void *kdata;
} IoctlUnwind;

/* An ioctl of mm is in flight (locked). */
static void busy_get(SimMm *mm) {
        mm->device->n_busy++;
        mm->n_busy++;
}

/* It is over: wake sim_device_free() and sim_mm_free() when they wait for it. Locked. */
static void busy_put(SimMm *mm) {
        SimDevice *d = mm->device;

        d->n_busy--;
        mm->n_busy--;
        if (d->n_busy == 0 || mm->n_busy == 0)
                pthread_cond_broadcast(&d->idle_cond);
}

/* The thread was cancelled in a cancellable sleep of the handler: the device
 * lock is held again (pthread_cond_wait reacquires it); undo the ioctl's
 * bookkeeping and let go of the lock, as the kernel's ioctl returns
 * -ERESTARTSYS to a dying thread. */
static void ioctl_cancelled(void *userdata) {
        IoctlUnwind *u = userdata;

        sim_process_unref(u->p);
        busy_put(u->mm);
        pthread_mutex_unlock(&u->mm->device->lock);
        free(u->kdata);
}

/* Runs the handler with the unwind handler in place (a function of its own so
 * that pthread_cleanup_push's setjmp sees few locals). */
static int call_handler(const SimIoctl *h, SimProcess *p, void *kdata, IoctlUnwind *unwind) {
        volatile int r;

        pthread_cleanup_push(ioctl_cancelled, unwind);
        r = h->func(p, kdata);
        pthread_cleanup_pop(0);
        return r;
}

static int ioctl_dispatch(SimMm *mm, const SimIoctl *h, unsigned nr, int fd, unsigned long request, void *arg,
                          void *kdata) {
        SimDevice *d = mm->device;
        size_t usize = _IOC_SIZE(request);
        /* kfd_ioctl: "cmd = ioctl->cmd" — "Do not trust userspace, use our
         * own definition" (kfd_chardev.c): the caller's word gives the size,
         * the KFD's the direction. */
        unsigned dir = _IOC_DIR(kfd_ioctl_word(nr));
        SimProcess *p;
        SimFile *f;
        int r;

        pthread_mutex_lock(&d->lock);
        f = sim_file_find(mm, fd);
        if (!f || f->pid != getpid()) {
                pthread_mutex_unlock(&d->lock);
                return -EBADF;
        }
        if (f->kind != SIM_FILE_KFD || !f->process) {
                pthread_mutex_unlock(&d->lock);
                return -ENOTTY;
        }
        if (nr == 0) {
                pthread_mutex_unlock(&d->lock);
                return -EINVAL; /* amdkfd_ioctls[0] has no function */
        }
        if (nr == SIM_IOC_NR_CREATE_PROCESS) {
                /* AMDKFD_IO: no payload; it acts on the file, not the process. */
                r = sim_process_create_secondary(f);
                pthread_mutex_unlock(&d->lock);
                return r;
        }
        if (!h->func) {
                pthread_mutex_unlock(&d->lock);
                return -EOPNOTSUPP;
        }

        p = sim_process_ref(f->process);
        busy_get(mm);
        /* IOC_IN: copy_from_user of the caller's size, -EFAULT before the
         * call; IOC_OUT alone: those bytes zeroed (kdata is, as is all past
         * them: "memset(kdata + usize, 0, asize - usize)"). */
        if ((dir & _IOC_WRITE) && usize > 0) {
                if (!arg) {
                        r = -EFAULT;
                        goto finish;
                }
                memcpy(kdata, arg, usize);
        }
        r = call_handler(h, p, kdata, &(IoctlUnwind) { .mm = mm, .p = p, .kdata = kdata });
        if ((dir & _IOC_READ) && usize > 0) {
                if (!arg)
                        r = -EFAULT;
                else
                        memcpy(arg, kdata, usize);
        }
finish:
        sim_process_unref(p);
        busy_put(mm);
        pthread_mutex_unlock(&d->lock);
        return r;
}

/* drm_ioctl on a render-node file of mm (sim-drm.h): false if fd is not one
 * or request not one of its calls, so that the KFD path answers (-ENOTTY for
 * a render file). */
static bool render_ioctl(SimMm *mm, int fd, unsigned long request, void *arg, int *ret) {
        SimDevice *d = mm->device;
        SimFile *f;
        bool ran = false;

        if (!sim_drm_ioctl_simulated(request))
                return false;
        pthread_mutex_lock(&d->lock);
        f = sim_file_find(mm, fd);
        if (f && f->kind == SIM_FILE_RENDER) {
                *ret = sim_drm_ioctl(f, request, arg);
                ran = true;
        }
        pthread_mutex_unlock(&d->lock);
        return ran;
}

static int op_ioctl(void *userdata, int fd, unsigned long request, void *arg) {
        SimMm *mm = userdata;
        SimDevice *d = mm->device;
        unsigned nr = _IOC_NR(request);
        const SimIoctl *h;
        void *kdata;
        int old, r;

        /* kfd_ioctl: "process->lead_thread != current->group_leader" -> -EBADF */
        if (getpid() != d->pid)
                return -EBADF;
        if (render_ioctl(mm, fd, request, arg, &r))
                return r;
        /* Past this kernel's table: -EINVAL as kfd_ioctl answered for years,
         * -ENOTTY on the kernels that speak 1.19 (a 2025 change; libhsakmt
         * takes either as "not supported", rocm-systems#6102). */
        if (nr >= sim_device_command_end(d) || nr >= SIM_IOCTL_COUNT)
                return d->kfd_minor >= 19 ? -ENOTTY : -EINVAL;
        h = &ioctls[nr];
        /* asize: the larger of the caller's size and the KFD's (and our own
         * struct's, which may hold more than the uapi one), all zeroed. */
        kdata = calloc(1, MAX(MAX(MAX((size_t) _IOC_SIZE(request), h->size), (size_t) _IOC_SIZE(kfd_ioctl_word(nr))),
                              (size_t) 1));
        if (!kdata)
                return -ENOMEM;
        /* Only a sleep may be cancelled (sim_ioctl_cancellable()): nowhere else
         * can a cancelled thread leave the device lock held or state half done. */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
        caller_cancel_state = old;
        r = ioctl_dispatch(mm, h, nr, fd, request, arg, kdata);
        pthread_setcancelstate(old, NULL);
        free(kdata);
        return r;
}

/* kfd_mmap() on the KFD fd: the memfd and offset it maps (borrowed). */
static int kfd_file_mmap_target(SimDevice *d, SimProcess *p, size_t length, uint64_t offset, int *ret_memfd,
                                uint64_t *ret_offset) {
        uint64_t type = offset & KFD_MMAP_TYPE_MASK;
        uint32_t gpu_id = (uint32_t) KFD_MMAP_GET_GPU_ID(offset);
        SimGpu *gpu = sim_device_gpu(d, gpu_id);

        switch (type) {
        case KFD_MMAP_TYPE_DOORBELL:
                /* kfd_mmap: no device for that gpu_id; else kfd_doorbell_mmap
                 * maps the doorbell slice of the process's pdd on it. */
                if (!gpu)
                        return -ENODEV;
                /* kfd_doorbell_mmap: the length must be exactly the process slice;
                 * the offset names the slice, not a doorbell in it. */
                if (length != KFD_DOORBELL_SLICE_SIZE)
                        return -EINVAL;
                if (offset & ~(KFD_MMAP_TYPE_MASK | KFD_MMAP_GPU_ID_MASK))
                        return -EINVAL;
                *ret_memfd = p->pdds[gpu->index]->doorbell_fd;
                *ret_offset = 0;
                return 0;
        case KFD_MMAP_TYPE_EVENTS:
                *ret_offset = 0;
                return sim_events_mmap_target(p, length, ret_memfd);
        case KFD_MMAP_TYPE_MMIO:
                if (!gpu)
                        return -ENODEV;
                /* kfd_mmio_mmap: exactly one page, the HDP flush page. The
                 * kernel maps the register page whether or not an MMIO_REMAP
                 * handle exists; the simulator's page lives with its handles,
                 * so it wants one (-EINVAL without: sim-memory.c). */
                if (length != PAGE_SIZE_4K || !gpu->mmio_bo)
                        return -EINVAL;
                *ret_memfd = gpu->mmio_bo->memfd;
                *ret_offset = 0;
                return 0;
        default:
                if (!gpu)
                        return -ENODEV;
                return -EOPNOTSUPP; /* reserved memory is not simulated */
        }
}

/*
 * What an mmap of mm's fd at offset for length maps: the memfd (borrowed,
 * valid while the lock is held) and the offset in it, or the errno. The
 * in-process table maps it at once; sim_mm_mmap_resolve() hands it to a
 * remote process, which maps it itself. Locked.
 */
static int mmap_target(SimMm *mm, int fd, size_t length, uint64_t offset, int *ret_memfd, uint64_t *ret_offset) {
        SimDevice *d = mm->device;
        SimFile *f;
        SimBo *bo;

        /* mmap(2): the offset must be page aligned and the length non-zero. */
        if (length == 0 || offset % PAGE_SIZE_4K)
                return -EINVAL;
        f = sim_file_find(mm, fd);
        if (!f)
                return -EBADF;
        if (f->kind == SIM_FILE_KFD)
                return f->process ? kfd_file_mmap_target(d, f->process, length, offset, ret_memfd, ret_offset)
                                  : -EBADF;
        /* drm_gem_mmap: no object at that offset -> -EINVAL; an object this
         * file was not allowed on -> -EACCES (drm_vma_node_is_allowed: a KFD
         * buffer of its process, or a GEM handle of the file's own). */
        bo = sim_device_find_bo_by_offset(d, offset, length);
        if (!bo)
                return -EINVAL;
        if (!(f->process && sim_process_has_bo(f->process, bo)) && !sim_drm_file_has_bo(f, bo))
                return -EACCES;
        *ret_memfd = bo->memfd;
        *ret_offset = offset - bo->mmap_offset;
        return 0;
}

static int op_mmap(void *userdata, void *addr, size_t length, int prot, int flags, int fd, uint64_t offset,
                   void **ret_addr) {
        SimMm *mm = userdata;
        SimDevice *d = mm->device;
        uint64_t memfd_offset = 0;
        int memfd = -EBADF, r;
        void *m;

        if (getpid() != d->pid)
                return -EBADF;
        pthread_mutex_lock(&d->lock);
        r = mmap_target(mm, fd, length, offset, &memfd, &memfd_offset);
        if (r >= 0) {
                m = mmap(addr, length, prot, flags, memfd, (off_t) memfd_offset);
                if (m == MAP_FAILED)
                        r = -errno;
                else
                        *ret_addr = m;
        }
        pthread_mutex_unlock(&d->lock);
        return r;
}

int sim_mm_dup_file(SimMm *mm, int fd) {
        SimDevice *d = mm->device;
        SimFile *f;
        int r;

        pthread_mutex_lock(&d->lock);
        f = sim_file_find(mm, fd);
        r = f ? fcntl(f->fd, F_DUPFD_CLOEXEC, 3) : -EBADF;
        if (r == -1)
                r = -errno;
        pthread_mutex_unlock(&d->lock);
        return r;
}

int sim_mm_mmap_resolve(SimMm *mm, int fd, size_t length, uint64_t offset, int *ret_memfd, uint64_t *ret_offset) {
        SimDevice *d = mm->device;
        uint64_t memfd_offset = 0;
        int memfd = -EBADF, r;

        pthread_mutex_lock(&d->lock);
        r = mmap_target(mm, fd, length, offset, &memfd, &memfd_offset);
        if (r >= 0) {
                /* A copy of our own: the BO may be freed as soon as we unlock. */
                r = fcntl(memfd, F_DUPFD_CLOEXEC, 3);
                if (r < 0)
                        r = -errno;
        }
        pthread_mutex_unlock(&d->lock);
        if (r < 0)
                return r;
        *ret_memfd = r;
        *ret_offset = memfd_offset;
        return 0;
}

/* KfdOps.mmap_resolve (kfd-ops.h). */
static int op_mmap_resolve(void *userdata, int fd, size_t length, uint64_t offset, int *ret_fd,
                           uint64_t *ret_offset) {
        SimMm *mm = userdata;

        if (getpid() != mm->device->pid)
                return -EBADF;
        return sim_mm_mmap_resolve(mm, fd, length, offset, ret_fd, ret_offset);
}

/* KfdOps.exception_info (kfd-ops.h): the oldest HW exception record of the
 * KFD context behind kfd_fd. */
static int op_exception_info(void *userdata, int kfd_fd, uint32_t *ret_queue_id, char *buf, size_t buflen) {
        SimMm *mm = userdata;
        SimDevice *d = mm->device;
        SimFile *f;
        int r;

        if (getpid() != d->pid)
                return -EBADF;
        pthread_mutex_lock(&d->lock);
        f = sim_file_find(mm, kfd_fd);
        if (!f || f->kind != SIM_FILE_KFD || !f->process)
                r = -EBADF;
        else
                r = sim_events_take_exception(f->process, ret_queue_id, buf, buflen);
        pthread_mutex_unlock(&d->lock);
        return r;
}

/* KfdOps.doorbell_written (kfd-ops.h): wakes the engine of the queue; the
 * engine reads the doorbell slot itself. An unknown fd or queue is ignored,
 * as a store to an unused doorbell is. */
static void op_doorbell_written(void *userdata, int kfd_fd, uint32_t queue_id) {
        SimMm *mm = userdata;
        SimDevice *d = mm->device;
        SimEngine *kicked = NULL;
        SimFile *f;

        if (getpid() != d->pid)
                return;
        pthread_mutex_lock(&d->lock);
        f = sim_file_find(mm, kfd_fd);
        if (f && f->kind == SIM_FILE_KFD && f->process && queue_id < SIM_MAX_QUEUES_PER_PROCESS) {
                SimQueue *q = f->process->queues[queue_id];
                if (q && q->engine) {
                        d->n_doorbells++;
                        kicked = q->engine;
                        sim_engine_mark_kicked(kicked);
                }
        }
        pthread_mutex_unlock(&d->lock);
        if (kicked)
                sim_engine_wake(kicked);
}

static int op_munmap(void *userdata, void *addr, size_t length) {
        if (munmap(addr, length) < 0)
                return -errno;
        return 0;
}

DEFINE_POINTER_CLEANUP(SimDevice, sim_device_free);

static void mm_init(SimMm *mm, SimDevice *d) {
        mm->device = d;
        mm->ops = (KfdOps) {
                .name = "sim",
                .userdata = mm,
                .sysfs_root = d->sysfs_dir,
                .fds_per_bo = 1, /* SimBo.memfd */
                .open_kfd = op_open_kfd,
                .open_render = op_open_render,
                .ioctl = op_ioctl,
                .mmap = op_mmap,
                .munmap = op_munmap,
                .close = op_close,
                .exception_info = op_exception_info,
                .mmap_resolve = op_mmap_resolve,
                /* No dmabuf_refs: the simulator's dma-bufs are memfds, whose
                 * fdinfo has no reference count, and no other observable
                 * (fdinfo, locks, leases, inotify) tells the daemon without a
                 * way for a client to fake or hide it whether a copy of a
                 * memfd survives elsewhere. So the daemon is told it cannot
                 * know, and keeps a freed exported buffer charged (to its
                 * session, then to its user and unit) until it restarts —
                 * stricter than on the kernel, never kinder. */
                .doorbell_written = op_doorbell_written,
        };
}

/* FNV-1a over the identity and the gpu_id: the same device, the same tag. */
static uint32_t identity_tag(const char *identity, uint32_t gpu_id) {
        uint32_t h = 2166136261u;

        for (const char *p = identity; *p; p++)
                h = (h ^ (uint8_t) *p) * 16777619u;
        for (unsigned i = 0; i < 4; i++)
                h = (h ^ (uint8_t) (gpu_id >> (8 * i))) * 16777619u;
        return h;
}

/* The gpu_id of discrete GPU i. The kernel hashes a GPU's PCI location and
 * properties into 16 bits and makes the result unique among the nodes
 * (kfd_topology.c kfd_generate_gpu_id: crc16, then "if gpu_id conflicts,
 * pick another"); here: the first GPU's id (SimOptions.gpu_id), then FNV-1a
 * of it and i folded to 16 bits, never 0, the iGPU's or one given before. */
static uint32_t dgpu_id(SimDevice *d, uint32_t first_id, unsigned i) {
        uint32_t h = 2166136261u, id;

        if (i == 0)
                return first_id;
        for (unsigned k = 0; k < 4; k++)
                h = (h ^ (uint8_t) (first_id >> (8 * k))) * 16777619u;
        for (;;) {
                h = (h ^ (uint8_t) i) * 16777619u;
                id = (h ^ (h >> 16)) & 0xFFFFu;
                if (id != 0 && id != SIM_IGPU_GPU_ID && !sim_device_gpu(d, id))
                        return id;
        }
}

/* The GPUs, in topology order, with their engines; and the topology. */
static int make_gpus(SimDevice *d, const SimOptions *o) {
        const SimGpuInfo *infos[SIM_MAX_GPU_NODES];
        unsigned n_dgpus = o->n_gpus ? o->n_gpus : 1;
        SimGpuInfo info;
        int r;

        if (o->igpu_first) {
                sim_gpu_info_init_igpu(&info);
                r = sim_gpu_new(d, d->n_gpus, &info, &d->gpus[d->n_gpus]);
                if (r < 0)
                        return r;
                d->n_gpus++;
                d->has_igpu = true;
        }
        for (unsigned i = 0; i < n_dgpus; i++) {
                sim_gpu_info_init(&info, dgpu_id(d, o->gpu_id, i), o->cu_count, o->vram_size);
                /* One card per PCI bus (03:00.0, 04:00.0, ...), render nodes
                 * numbered in probe order after the iGPU's, and a serial of
                 * its own. */
                info.location_id += i << 8;
                info.drm_render_minor += d->n_gpus;
                info.unique_id += i;
                r = sim_gpu_new(d, d->n_gpus, &info, &d->gpus[d->n_gpus]);
                if (r < 0)
                        return r;
                d->n_gpus++;
        }
        for (unsigned i = 0; i < d->n_gpus; i++)
                infos[i] = &d->gpus[i]->info;
        return sim_topology_write(infos, d->n_gpus, d->sysfs_dir);
}

int sim_device_new(const SimOptions *opts, SimDevice **ret) {
        _cleanup_(sim_device_freep) SimDevice *d = NULL;
        SimOptions o = opts ? *opts : (SimOptions) {};
        pthread_condattr_t attr;
        int r;

        if (o.gpu_id == 0)
                o.gpu_id = SIM_DEFAULT_GPU_ID;
        if (o.cu_count == 0)
                o.cu_count = SIM_DEFAULT_CU_COUNT;
        if (o.vram_size == 0)
                o.vram_size = SIM_DEFAULT_VRAM_SIZE;
        if (o.kfd_minor == 0)
                o.kfd_minor = SIM_DEFAULT_KFD_MINOR;
        if (o.n_gpus > SIM_MAX_GPUS) {
                log_debug("sim: %u GPUs requested, at most %u are simulated", o.n_gpus, SIM_MAX_GPUS);
                return -EINVAL;
        }
        if (o.igpu_first && o.gpu_id == SIM_IGPU_GPU_ID) {
                log_debug("sim: gpu_id 0x%x is the integrated GPU's", o.gpu_id);
                return -EINVAL;
        }
        /* gpu_id travels in 16 bits of mmap offsets (KFD_MMAP_GPU_ID). */
        if (o.gpu_id > 0xFFFF || o.cu_count > 1024 || o.vram_size % PAGE_SIZE_4K ||
            o.kfd_minor < SIM_MIN_KFD_MINOR || o.kfd_minor > SIM_DEFAULT_KFD_MINOR ||
            o.fault_order > SIM_FAULT_ORDER_EVENT_FIRST)
                return -EINVAL;

        d = calloc(1, sizeof *d);
        if (!d)
                return -ENOMEM;
        pthread_mutex_init(&d->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&d->wait_cond, &attr);
        pthread_condattr_destroy(&attr);
        pthread_cond_init(&d->idle_cond, NULL);
        pthread_cond_init(&d->cp_cond, NULL);
        d->pid = getpid();
        if (o.identity)
                d->bo_tag = identity_tag(o.identity, o.gpu_id);
        else if (getrandom(&d->bo_tag, sizeof d->bo_tag, 0) != (ssize_t) sizeof d->bo_tag)
                d->bo_tag = (uint32_t) d->pid ^ (uint32_t) (uintptr_t) d; /* no entropy: unique enough in one host */
        d->kfd_minor = o.kfd_minor;
        d->fault_order = o.fault_order == SIM_FAULT_ORDER_DEFAULT ? SIM_FAULT_ORDER_FENCE_FIRST : o.fault_order;
        d->dispatch_budget = o.max_dispatch_wave_instructions ? o.max_dispatch_wave_instructions
                                                              : SIM_DEFAULT_DISPATCH_BUDGET;
        r = sim_remote_registry_new(&d->remotes);
        if (r < 0)
                return r;

        if (o.sysfs_dir) {
                d->sysfs_dir = strdup(o.sysfs_dir);
                if (!d->sysfs_dir)
                        return -ENOMEM;
        } else {
                const char *tmp = getenv("TMPDIR");
                r = sim_topology_mkdtemp(tmp && *tmp ? tmp : "/tmp", &d->sysfs_dir);
                if (r < 0)
                        return r;
                d->own_sysfs_dir = true;
        }
        r = sim_populator_new(&d->populator);
        if (r < 0)
                return r;
        r = make_gpus(d, &o);
        if (r < 0)
                return r;

        mm_init(&d->mm, d);

        r = sim_isa_pool_new(o.isa_helpers < 0 ? 0 : o.isa_helpers > 0 ? (unsigned) o.isa_helpers : sim_isa_default_helpers(),
                             &d->isa_pool);
        if (r < 0)
                return r;

        log_debug("sim: device with %u GPU nodes, first gpu_id 0x%x, %u CUs, sysfs at %s", d->n_gpus,
                  d->gpus[0]->info.gpu_id, d->gpus[0]->info.cu_count, d->sysfs_dir);
        *ret = TAKE_PTR(d);
        return 0;
}

/* Closes every open file of mm (of every mm if NULL); each KFD close tears
 * its context down. Locked (the lock may be let go in between, while a
 * queue's dispatch is cancelled: the list is walked again each time). */
static void close_files(SimDevice *d, SimMm *mm) {
        for (;;) {
                SimFile *f = d->files;
                while (f && (!f->open || (mm && f->mm != mm)))
                        f = f->next;
                if (!f)
                        break;
                file_close(f);
        }
}

void sim_device_reset(SimDevice *d, bool memory_lost) {
        pthread_mutex_lock(&d->lock);
        log_warning("sim: GPU reset%s", memory_lost ? ", VRAM contents lost" : "");
        /* The events carry the id of the GPU the context uses (the first
         * it has a VM on), else of the first discrete GPU. */
        for (SimProcess *p = d->processes; p; p = p->next) {
                SimGpu *gpu = sim_device_first_dgpu(d);
                for (unsigned i = 0; i < p->n_pdds; i++)
                        if (p->pdds[i]->vm_file) {
                                gpu = p->pdds[i]->gpu;
                                break;
                        }
                sim_process_gpu_reset(p, gpu, memory_lost);
        }
        if (memory_lost)
                sim_memory_lose_vram(d, NULL);
        pthread_mutex_unlock(&d->lock);
}

int sim_device_reset_gpu(SimDevice *d, uint32_t gpu_id, bool memory_lost) {
        SimGpu *gpu;

        pthread_mutex_lock(&d->lock);
        gpu = sim_device_gpu(d, gpu_id);
        if (!gpu) {
                pthread_mutex_unlock(&d->lock);
                return -ENODEV;
        }
        log_warning("sim: reset of GPU 0x%x%s", gpu_id, memory_lost ? ", VRAM contents lost" : "");
        /* kgd2kfd_pre_reset(that device) -> kfd_signal_reset_event(node):
         * every process is told (each has its data for every GPU, made by
         * kfd_init_apertures at its creation), naming the reset GPU; the
         * contexts with a VM on it lose their queues. */
        for (SimProcess *p = d->processes; p; p = p->next)
                if (p->pdds[gpu->index]->vm_file)
                        sim_process_gpu_reset(p, gpu, memory_lost);
                else
                        sim_events_gpu_reset(p, gpu, memory_lost);
        if (memory_lost)
                sim_memory_lose_vram(d, gpu);
        pthread_mutex_unlock(&d->lock);
        return 0;
}

SimDevice *sim_device_free(SimDevice *d) {
        if (!d)
                return NULL;

        /* Release sleeping waiters, then end the remote processes: their
         * threads run ioctls of their own (sim-remote-server.c). */
        pthread_mutex_lock(&d->lock);
        d->shutting_down = true;
        pthread_cond_broadcast(&d->wait_cond);
        pthread_mutex_unlock(&d->lock);
        sim_remote_registry_stop(d->remotes);

        /* Let ioctls in flight finish. */
        pthread_mutex_lock(&d->lock);
        while (d->n_busy > 0)
                pthread_cond_wait(&d->idle_cond, &d->lock);

        /* Close every fd still open; each KFD close tears its context down. */
        close_files(d, NULL);
        /* The mms exit: their primary processes go. */
        sim_process_unref(TAKE_PTR(d->mm.primary));
        while (d->extra_mms) {
                SimMm *mm = d->extra_mms;
                d->extra_mms = mm->next;
                sim_process_unref(mm->primary);
                free(mm);
        }
        /* Anything left is a bug in reference counting; free it rather than leak. */
        while (d->processes) {
                SimProcess *p = d->processes;
                p->n_ref = 1;
                sim_process_unref(p);
        }
        pthread_mutex_unlock(&d->lock);

        /* No queue is left on any engine now; stop the threads. */
        for (unsigned i = 0; i < d->n_gpus; i++)
                d->gpus[i] = sim_gpu_free(d->gpus[i]);
        d->isa_pool = sim_isa_pool_free(d->isa_pool);
        sim_device_free_bos(d);
        d->populator = sim_populator_free(d->populator);

        if (d->own_sysfs_dir && d->sysfs_dir)
                (void) sim_topology_remove(d->sysfs_dir);
        free(d->sysfs_dir);
        pthread_cond_destroy(&d->wait_cond);
        pthread_cond_destroy(&d->idle_cond);
        pthread_cond_destroy(&d->cp_cond);
        d->remotes = sim_remote_registry_free(d->remotes);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return NULL;
}

const KfdOps *sim_device_get_ops(SimDevice *d) {
        return &d->mm.ops;
}

int sim_mm_new(SimDevice *d, SimMm **ret) {
        SimMm *mm = calloc(1, sizeof *mm);

        if (!mm)
                return -ENOMEM;
        mm_init(mm, d);
        pthread_mutex_lock(&d->lock);
        if (d->shutting_down) {
                pthread_mutex_unlock(&d->lock);
                free(mm);
                return -ENODEV;
        }
        mm->next = d->extra_mms;
        d->extra_mms = mm;
        pthread_mutex_unlock(&d->lock);
        *ret = mm;
        return 0;
}

void sim_mm_kill(SimMm *mm) {
        SimDevice *d = mm->device;

        pthread_mutex_lock(&d->lock);
        mm->killed = true;
        pthread_cond_broadcast(&d->wait_cond);
        pthread_mutex_unlock(&d->lock);
}

void sim_mm_free(SimMm *mm) {
        SimDevice *d;

        if (!mm)
                return;
        d = mm->device;
        assert(mm != &d->mm);
        pthread_mutex_lock(&d->lock);
        mm->killed = true;
        pthread_cond_broadcast(&d->wait_cond);
        while (mm->n_busy > 0)
                pthread_cond_wait(&d->idle_cond, &d->lock);
        /* kfd_process_notifier_release: every file of the process is closed
         * (secondary contexts go with theirs), then the primary context. */
        close_files(d, mm);
        sim_process_unref(TAKE_PTR(mm->primary));
        for (SimMm **x = &d->extra_mms; *x; x = &(*x)->next)
                if (*x == mm) {
                        *x = mm->next;
                        break;
                }
        pthread_mutex_unlock(&d->lock);
        free(mm);
}

int sim_device_add_mm(SimDevice *d, const KfdOps **ret) {
        SimMm *mm;
        int r;

        r = sim_mm_new(d, &mm);
        if (r < 0)
                return r;
        *ret = &mm->ops;
        return 0;
}

int sim_device_remove_mm(SimDevice *d, const KfdOps *ops) {
        SimMm *mm = NULL;

        pthread_mutex_lock(&d->lock);
        for (SimMm *x = d->extra_mms; x; x = x->next)
                if (&x->ops == ops)
                        mm = x;
        pthread_mutex_unlock(&d->lock);
        if (!mm)
                return -EINVAL;
        sim_mm_free(mm);
        return 0;
}

void sim_device_get_stats(SimDevice *d, SimDeviceStats *ret) {
        SimDeviceStats st = { .processes = 1 };

        pthread_mutex_lock(&d->lock);
        for (SimMm *mm = d->extra_mms; mm; mm = mm->next)
                st.processes++;
        for (SimProcess *p = d->processes; p; p = p->next) {
                st.contexts++;
                for (uint32_t i = 0; i < SIM_MAX_QUEUES_PER_PROCESS; i++)
                        if (p->queues[i])
                                st.queues++;
        }
        for (SimFile *f = d->files; f; f = f->next)
                if (f->open)
                        st.files++;
        st.ioctls_in_flight = d->n_busy;
        st.gem_handles = sim_drm_count_handles(d);
        st.remote_processes = sim_remote_registry_count(d->remotes);
        st.doorbells = d->n_doorbells;
        st.interrupts = d->n_interrupts;
        st.backed_ahead = sim_populator_backed(d->populator);
        st.gpus = d->n_gpus;
        for (unsigned i = 0; i < d->n_gpus; i++) {
                const SimGpu *g = d->gpus[i];
                for (unsigned k = 0; k < SIM_MAX_SDMA_ENGINES; k++)
                        st.engine_threads += g->sdma_engines[k] != NULL;
                st.engine_threads += g->n_cp_engines;
        }
        pthread_mutex_unlock(&d->lock);
        *ret = st;
}

int sim_device_get_gpu_stats(SimDevice *d, unsigned index, SimGpuStats *ret) {
        SimGpuStats st = {};
        const SimGpu *g;

        pthread_mutex_lock(&d->lock);
        if (index >= d->n_gpus) {
                pthread_mutex_unlock(&d->lock);
                return -ENODEV;
        }
        g = d->gpus[index];
        st.gpu_id = g->info.gpu_id;
        st.drm_render_minor = g->info.drm_render_minor;
        st.vram_size = g->info.vram_size;
        st.vram_used = g->info.vram_used;
        for (unsigned k = 0; k < SIM_MAX_SDMA_ENGINES; k++)
                st.sdma_engines += g->sdma_engines[k] != NULL;
        st.cp_engines = g->n_cp_engines;
        for (SimProcess *p = d->processes; p; p = p->next)
                for (uint32_t i = 0; i < SIM_MAX_QUEUES_PER_PROCESS; i++)
                        if (p->queues[i] && p->queues[i]->pdd->gpu == g)
                                st.queues++;
        pthread_mutex_unlock(&d->lock);
        *ret = st;
        return 0;
}
