/* SPDX-License-Identifier: MIT */
/*
 * The KFD process of a relayed client (OpenKfd, docs/rocm.md) as the kernel
 * has it: a secondary KFD context of the daemon's (AMDKFD_IOC_CREATE_PROCESS,
 * uapi 1.19, kfd-facts §7.3) with a render file of its own, made through the
 * daemon's KfdOps table — the kernel's, or the simulator's with the same
 * calls. Two tables reach it:
 *  - the daemon's view, for the daemon's own GPU context in the process
 *    (its rings, fences and event page, context-pool.c);
 *  - the served view, for the client's calls over sim-remote's wire
 *    (sim_remote_serve_process()), which must never reach the daemon beyond
 *    this context: only its two files are known (-EBADF for any other
 *    number), only KFD calls on the KFD file are made (the render file is
 *    the daemon's: a DRM call on it is -EACCES, as a render node answers a
 *    call it does not allow, but for the questions libdrm asks about the
 *    GPU, context-kfd-render.h), only the calls of an allowlist (others
 *    -EINVAL; the queue calls name queues the relay answers for, and the
 *    daemon's own queues are in this context; numbers past the last one
 *    known here get what the kernel answers past its table),
 *    only the GPUs the session may use (another gpu_id is -EINVAL, as a
 *    GPU the process has no device data for; the apertures list them
 *    alone; ACQUIRE_VM takes the render file of the GPU it names, each GPU
 *    having one of the process's),
 *    never USERPTR (-EOPNOTSUPP, as a secondary context answers it), and an
 *    mmap of the render file is a dma-buf export of the buffer it falls in,
 *    never the file itself.
 *
 * Where the kernel has no secondary contexts (before 1.19), the process is
 * a proxy worker's (worker.c, WORKER_SETUP_KFD_PROXY): base is then a
 * sim-remote client whose calls the worker makes on its own primary KFD
 * context, which it serves with this same code in the TRUSTED flavour —
 * every call passes (the daemon is its only client), and the doorbell slice
 * of each of its GPUs is a shadow page of ours (a process cannot map
 * another's doorbells), each slot copied to the real slice of the queue's
 * GPU at doorbell_written(), the daemon's GPU layer calling it after every
 * doorbell store. The worker opens the render file of every GPU the
 * program sees before its sandbox (kfd_process_add_gpu()), as the daemon's
 * side of the process then opens them there. The daemon maps what it
 * maps of the process through the worker: an export of the buffer
 * (EXPORT_DMABUF, KFD 1.12), or, on a KFD without it, the worker's render
 * file itself (KfdOps.mmap_resolve: a DRM file maps its objects for whoever
 * holds it), which only the daemon ever gets.
 *
 * The client's buffers are mapped through dma-bufs, never a render file.
 * On a KFD without EXPORT_DMABUF (before 1.12: Linux 6.1, kfd-facts §7.4),
 * its VRAM and GTT allocations are made where dma-bufs come from — the
 * process's render file (context-kfd-buffers.c; gpu-buffer.c does the same
 * for the daemon's own buffers there): ALLOC_MEMORY_OF_GPU becomes
 * AMDGPU_GEM_CREATE, PRIME_HANDLE_TO_FD and IMPORT_DMABUF at the VA and GPU
 * the client asked, answered with the imported handle and the BO's offset
 * on the render file (AMDGPU_GEM_MMAP), the mmap_offset a KFD allocation
 * has too (amdgpu_bo_mmap_offset()); an mmap of it is a PRIME export of the
 * GEM handle, and FREE_MEMORY_OF_GPU closes the handle after KFD's. What the
 * client loses by it is in docs/rocm.md ("Versions"): the kernel gives an
 * imported BO its own flags, not the ones the client asked for.
 *
 * The files live as long as anything uses them: the daemon's view while its
 * GPU context has them open, the server until its end. So the daemon's
 * context may go before the client (its session ended) and the client's
 * calls still run on open files, and the client may go first (its calls
 * returned) while the daemon's context winds down. A WAIT_EVENTS of the
 * client sleeps in slices of at most WAIT_SLICE_MS, so that the end of the
 * client (kill()) ends it within one slice: a kernel wait cannot be
 * interrupted from another thread without a signal.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "contexts/context-kfd-buffers.h"
#include "contexts/context-kfd-render.h"
#include "contexts/context-kfd-process.h"
#include "kfd/kfd-uapi.h"
#include "util/log.h"
#include "util/macro.h"

#define WAIT_SLICE_MS 100u
/* GPU nodes a KFD process lists at most (the wire's bound too). */
#define MAX_APERTURES 64u

/* A queue made through the process, for its doorbell slot (TRUSTED). */
typedef struct KfdProcessQueue {
        uint32_t queue_id;
        uint32_t slot;           /* its doorbell's byte offset in the slice */
        uint32_t gpu;            /* its GPU (index into gpus[]): whose doorbell slice */
} KfdProcessQueue;

#define MAX_QUEUES 64u

typedef struct KfdProcessView {
        KfdOps ops;              /* userdata = this view */
        KfdProcess *proc;
        unsigned opens;          /* files opened through it and not closed (the daemon's view) */
} KfdProcessView;

struct KfdProcess {
        pthread_mutex_t lock;
        unsigned n_ref;          /* the creator's (then the server's), and the daemon view's while it has files */
        const KfdOps *base;
        void (*base_free)(const KfdOps *base);
        unsigned flags;          /* KFD_PROCESS_* */
        int kfd_fd;
        int placeholder_fd;      /* what stands for a file in the client (dup_file()) */
        KfdProcessQueue queues[MAX_QUEUES];
        /* The GPUs the client sees, the daemon's own first, each with a
         * render file of the process's (render_fd); TRUSTED: each with the
         * shadow doorbell slice the daemon maps and writes, and the real one
         * (mapped at the daemon's first doorbell mmap of that GPU: a KFD
         * process has a doorbell slice per GPU, kfd_doorbell.c). */
        struct {
                uint32_t gpu_id;
                unsigned render_minor;
                int render_fd;
                int shadow_fd;
                volatile uint64_t *shadow, *doorbells;
        } gpus[KFD_PROCESS_MAX_GPUS];
        size_t n_gpus;
        uint32_t kfd_minor;      /* the KFD's uapi minor (GET_VERSION) */
        bool killed;
        KfdBuffers bufs;         /* the client's buffers, for its mmaps */
        KfdProcessView daemon, served;
};

static void kfd_process_unref(KfdProcess *p) {
        unsigned n;

        if (!p)
                return;
        pthread_mutex_lock(&p->lock);
        n = --p->n_ref;
        pthread_mutex_unlock(&p->lock);
        if (n > 0)
                return;
        /* Its last file: the kernel tears the secondary context down. */
        for (size_t i = 0; i < p->n_gpus; i++)
                if (p->gpus[i].doorbells)
                        (void) p->base->munmap(p->base->userdata, (void *) p->gpus[i].doorbells,
                                               KFD_DOORBELL_SLICE_SIZE);
        for (size_t i = 0; i < p->n_gpus; i++)
                if (p->gpus[i].render_fd >= 0)
                        p->base->close(p->base->userdata, p->gpus[i].render_fd);
        if (p->kfd_fd >= 0)
                p->base->close(p->base->userdata, p->kfd_fd);
        if (p->base_free)
                p->base_free(p->base);
        for (size_t i = 0; i < p->n_gpus; i++) {
                if (p->gpus[i].shadow)
                        (void) munmap((void *) p->gpus[i].shadow, KFD_DOORBELL_SLICE_SIZE);
                safe_close(p->gpus[i].shadow_fd);
        }
        safe_close(p->placeholder_fd);
        kfd_buffers_done(&p->bufs);
        pthread_mutex_destroy(&p->lock);
        free(p);
}

static bool is_kfd_call(unsigned long request) {
        return _IOC_TYPE(request) == AMDKFD_IOCTL_BASE;
}

/* The GPU (index into gpus[]) of a render file of the process, or -1. */
static int gpu_of_fd(const KfdProcess *p, int fd) {
        for (size_t i = 0; fd >= 0 && i < p->n_gpus; i++)
                if (p->gpus[i].render_fd == fd)
                        return (int) i;
        return -1;
}

/* The GPU of a gpu_id the client sees, or -1. */
static int gpu_of_id(const KfdProcess *p, uint32_t gpu_id) {
        for (size_t i = 0; i < p->n_gpus; i++)
                if (p->gpus[i].gpu_id == gpu_id)
                        return (int) i;
        return -1;
}

/* The GPU an mmap offset of the KFD file names (KFD_MMAP_GPU_ID: its low
 * 16 bits), or -1. */
static int gpu_of_mmap_offset(const KfdProcess *p, uint64_t offset) {
        for (size_t i = 0; i < p->n_gpus; i++)
                if (KFD_MMAP_GPU_ID(p->gpus[i].gpu_id) == (offset & KFD_MMAP_GPU_ID_MASK))
                        return (int) i;
        return -1;
}

/* The GPU of renderD<minor>, or -1. */
static int gpu_of_minor(const KfdProcess *p, unsigned minor) {
        for (size_t i = 0; i < p->n_gpus; i++)
                if (p->gpus[i].render_minor == minor)
                        return (int) i;
        return -1;
}

/* A file of the process: 0, or -EBADF for any other number. */
static int known_file(const KfdProcess *p, int fd) {
        return fd >= 0 && (fd == p->kfd_fd || gpu_of_fd(p, fd) >= 0) ? 0 : -EBADF;
}

/* The n-byte field at off of a call's argument as the kernel reads it:
 * kfd_ioctl() copies in the request's _IOC_SIZE bytes and zeroes the rest
 * of its struct (kfd_chardev.c), so a request cut short inside a field
 * names the value its bytes make with zeros: a gpu_id cut after two bytes
 * is still a whole one (the kernel's are 16-bit hashes: kfd_topology.c
 * kfd_generate_gpu_id(), kfd_priv.h KFD_GPU_ID_HASH_WIDTH). */
static uint64_t arg_field(const void *arg, unsigned long request, size_t off, size_t n) {
        size_t usize = _IOC_SIZE(request);
        uint8_t b[8] = { 0 };
        uint64_t v;

        if (arg && off < usize)
                memcpy(b, (const uint8_t *) arg + off, MIN(n, usize - off));
        memcpy(&v, b, sizeof v);
        return n < 8 ? v & ((1ull << (8 * n)) - 1) : v;
}

/*
 * The handle a FREE_MEMORY_OF_GPU frees, read as the kernel reads it: by
 * the number, whatever size the request word gives (kfd_ioctl() copies in
 * the caller's bytes and zeros the rest of its own struct). A FREE the
 * relay read otherwise than the kernel would leave the freed buffer in the
 * table under a handle the kernel hands to the next buffer of the process
 * (its IDR), the daemon's own among them, and an mmap of the freed offset
 * would export that one.
 */
static uint64_t free_handle(const void *arg, unsigned long request) {
        return arg_field(arg, request, offsetof(struct kfd_ioctl_free_memory_of_gpu_args, handle), sizeof(uint64_t));
}

/* ACQUIRE_VM names its render file by number: the process's own file of
 * the GPU it names or none (kfd_ioctl_acquire_vm: fget() fails, -EINVAL; a
 * render file of another GPU is another device's VM, which
 * amdgpu_amdkfd_gpuvm_acquire_process_vm() must never be given) — the
 * numbers as the kernel reads them, also from a request cut short. */
static int check_acquire_vm(const KfdProcess *p, unsigned long request, const void *arg) {
        if (_IOC_NR(request) != _IOC_NR(AMDKFD_IOC_ACQUIRE_VM) || !arg)
                return 0;
        int drm_fd = (int) (uint32_t) arg_field(arg, request, offsetof(struct kfd_ioctl_acquire_vm_args, drm_fd), 4);
        uint32_t gpu_id = (uint32_t) arg_field(arg, request, offsetof(struct kfd_ioctl_acquire_vm_args, gpu_id), 4);
        int k = gpu_of_id(p, gpu_id);
        return k >= 0 && drm_fd == p->gpus[k].render_fd ? 0 : -EINVAL;
}

/* The daemon's view: its GPU context's calls, on the process's files. */
static int daemon_open_kfd(void *userdata) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;

        pthread_mutex_lock(&p->lock);
        if (v->opens++ == 0)
                p->n_ref++;
        pthread_mutex_unlock(&p->lock);
        return p->kfd_fd;
}

static int daemon_open_render(void *userdata, unsigned minor) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;

        int k = gpu_of_minor(p, minor);

        if (k < 0)
                return -ENOENT;
        pthread_mutex_lock(&p->lock);
        if (v->opens++ == 0)
                p->n_ref++;
        pthread_mutex_unlock(&p->lock);
        return p->gpus[k].render_fd;
}

static int daemon_close(void *userdata, int fd) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;
        bool last = false;

        if (known_file(p, fd) < 0)
                return -EBADF;
        pthread_mutex_lock(&p->lock);
        if (v->opens > 0)
                last = --v->opens == 0;
        pthread_mutex_unlock(&p->lock);
        if (last)
                kfd_process_unref(p);
        return 0;
}

static int daemon_ioctl(void *userdata, int fd, unsigned long request, void *arg) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;
        int r = known_file(p, fd);

        if (r == 0)
                r = check_acquire_vm(p, request, arg);
        return r < 0 ? r : p->base->ioctl(p->base->userdata, fd, request, arg);
}

static int daemon_mmap(void *userdata, void *addr, size_t length, int prot, int flags, int fd, uint64_t offset,
                       void **ret_addr) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;
        int r = known_file(p, fd);

        return r < 0 ? r : p->base->mmap(p->base->userdata, addr, length, prot, flags, fd, offset, ret_addr);
}

static int view_munmap(void *userdata, void *addr, size_t length) {
        KfdProcessView *v = userdata;

        return v->proc->base->munmap(v->proc->base->userdata, addr, length);
}

static int view_exception_info(void *userdata, int kfd_fd, uint32_t *ret_queue_id, char *buf, size_t buflen) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;

        if (kfd_fd != p->kfd_fd)
                return -EBADF;
        if (!p->base->exception_info)
                return -ENOENT;
        return p->base->exception_info(p->base->userdata, kfd_fd, ret_queue_id, buf, buflen);
}

static int view_dmabuf_refs(void *userdata, int dmabuf_fd) {
        KfdProcessView *v = userdata;

        return kfd_dmabuf_refs(v->proc->base, dmabuf_fd);
}

static void view_doorbell_written(void *userdata, int kfd_fd, uint32_t queue_id) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;

        if (kfd_fd != p->kfd_fd)
                return;
        /* TRUSTED: the daemon stored to the shadow slot; the store reaches
         * the real doorbell here (a 64-bit store, as the GPU layer's). */
        if (v == &p->served && (p->flags & KFD_PROCESS_TRUSTED)) {
                volatile uint64_t *shadow = NULL, *doorbells = NULL;
                uint32_t slot = 0;
                pthread_mutex_lock(&p->lock);
                for (unsigned i = 0; i < MAX_QUEUES && !slot; i++)
                        if (p->queues[i].slot != 0 && p->queues[i].queue_id == queue_id) {
                                slot = p->queues[i].slot;
                                shadow = p->gpus[p->queues[i].gpu].shadow;
                                doorbells = p->gpus[p->queues[i].gpu].doorbells;
                        }
                pthread_mutex_unlock(&p->lock);
                if (!slot || !shadow || !doorbells || slot - 1 + 8 > KFD_DOORBELL_SLICE_SIZE)
                        return;
                uint64_t value = __atomic_load_n(&shadow[(slot - 1) / 8], __ATOMIC_ACQUIRE);
                __atomic_store_n(&doorbells[(slot - 1) / 8], value, __ATOMIC_RELEASE);
        }
        if (p->base->doorbell_written)
                p->base->doorbell_written(p->base->userdata, kfd_fd, queue_id);
}

/* The served view: the client's calls. Its opens need no count: the
 * server's reference covers them until its end. */
static int served_open_kfd(void *userdata) {
        KfdProcessView *v = userdata;

        return v->proc->kfd_fd;
}

static int served_open_render(void *userdata, unsigned minor) {
        KfdProcessView *v = userdata;

        int k = gpu_of_minor(v->proc, minor);

        return k >= 0 ? v->proc->gpus[k].render_fd : -ENOENT;
}

static int served_close(void *userdata, int fd) {
        KfdProcessView *v = userdata;

        /* The files stay: the daemon's context, and the client's other
         * numbers, name them too. */
        return known_file(v->proc, fd);
}

/* The KFD calls a client's process makes that reach the context (the
 * relay's hooks answer its queue calls and refuse what it must not have). */
static bool served_call_allowed(unsigned long request) {
        switch (_IOC_NR(request)) {
        case _IOC_NR(AMDKFD_IOC_GET_VERSION):
        case _IOC_NR(AMDKFD_IOC_SET_MEMORY_POLICY):
        case _IOC_NR(AMDKFD_IOC_GET_CLOCK_COUNTERS):
        case _IOC_NR(AMDKFD_IOC_GET_PROCESS_APERTURES):
        case _IOC_NR(AMDKFD_IOC_CREATE_EVENT):
        case _IOC_NR(AMDKFD_IOC_DESTROY_EVENT):
        case _IOC_NR(AMDKFD_IOC_SET_EVENT):
        case _IOC_NR(AMDKFD_IOC_RESET_EVENT):
        case _IOC_NR(AMDKFD_IOC_WAIT_EVENTS):
        case _IOC_NR(AMDKFD_IOC_GET_TILE_CONFIG):
        case _IOC_NR(AMDKFD_IOC_SET_TRAP_HANDLER):
        case _IOC_NR(AMDKFD_IOC_SET_SCRATCH_BACKING_VA):
        case _IOC_NR(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW):
        case _IOC_NR(AMDKFD_IOC_ACQUIRE_VM):
        case _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU):
        case _IOC_NR(AMDKFD_IOC_FREE_MEMORY_OF_GPU):
        case _IOC_NR(AMDKFD_IOC_MAP_MEMORY_TO_GPU):
        case _IOC_NR(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU):
        case _IOC_NR(AMDKFD_IOC_GET_DMABUF_INFO):
        case _IOC_NR(AMDKFD_IOC_IMPORT_DMABUF):
        case _IOC_NR(AMDKFD_IOC_SET_XNACK_MODE):
        case _IOC_NR(AMDKFD_IOC_AVAILABLE_MEMORY):
        case _IOC_NR(AMDKFD_IOC_EXPORT_DMABUF):
        case _IOC_NR(AMDKFD_IOC_RUNTIME_ENABLE):
        case _IOC_NR(AMDKFD_IOC_CREATE_PROCESS):
                return true;
        default:
                return false;
        }
}

/* Where a call's argument names its GPU (kfd_ioctl.h), or 0 for none. */
static size_t gpu_id_offset(unsigned long request) {
        switch (_IOC_NR(request)) {
        case _IOC_NR(AMDKFD_IOC_SET_MEMORY_POLICY):
                return offsetof(struct kfd_ioctl_set_memory_policy_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_GET_CLOCK_COUNTERS):
                return offsetof(struct kfd_ioctl_get_clock_counters_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_SET_SCRATCH_BACKING_VA):
                return offsetof(struct kfd_ioctl_set_scratch_backing_va_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_GET_TILE_CONFIG):
                return offsetof(struct kfd_ioctl_get_tile_config_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_SET_TRAP_HANDLER):
                return offsetof(struct kfd_ioctl_set_trap_handler_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_ACQUIRE_VM):
                return offsetof(struct kfd_ioctl_acquire_vm_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU):
                return offsetof(struct kfd_ioctl_alloc_memory_of_gpu_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_AVAILABLE_MEMORY):
                return offsetof(struct kfd_ioctl_get_available_memory_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_IMPORT_DMABUF):
                return offsetof(struct kfd_ioctl_import_dmabuf_args, gpu_id);
        default:
                return 0;
        }
}

/* The apertures of the client's GPUs alone, as kfd_ioctl_get_process_apertures_new
 * lists them: with num_of_nodes 0 their count, else at most that many. */
static int served_apertures(KfdProcess *p, struct kfd_ioctl_get_process_apertures_new_args *a) {
        struct kfd_process_device_apertures all[MAX_APERTURES];
        struct kfd_ioctl_get_process_apertures_new_args b = {
                .kfd_process_device_apertures_ptr = (uintptr_t) all, .num_of_nodes = MAX_APERTURES };
        struct kfd_process_device_apertures *out = (void *) (uintptr_t) a->kfd_process_device_apertures_ptr;
        uint32_t n = 0;
        int r;

        r = p->base->ioctl(p->base->userdata, p->kfd_fd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &b);
        if (r < 0)
                return r;
        for (uint32_t i = 0; i < b.num_of_nodes; i++) {
                if (gpu_of_id(p, all[i].gpu_id) < 0)
                        continue;
                if (a->num_of_nodes > 0 && n == a->num_of_nodes)
                        break;
                if (a->num_of_nodes > 0) {
                        if (!out)
                                return -EFAULT;
                        out[n] = all[i];
                }
                n++;
        }
        a->num_of_nodes = n;
        return 0;
}

/* The old call's fixed array, likewise. */
static int served_apertures_old(KfdProcess *p, struct kfd_ioctl_get_process_apertures_args *a) {
        uint32_t n = 0;
        int r;

        r = p->base->ioctl(p->base->userdata, p->kfd_fd, AMDKFD_IOC_GET_PROCESS_APERTURES, a);
        if (r < 0)
                return r;
        for (uint32_t i = 0; i < MIN(a->num_of_nodes, (uint32_t) NUM_OF_SUPPORTED_GPUS); i++)
                if (gpu_of_id(p, a->process_apertures[i].gpu_id) >= 0)
                        a->process_apertures[n++] = a->process_apertures[i];
        memset(&a->process_apertures[n], 0, (NUM_OF_SUPPORTED_GPUS - n) * sizeof a->process_apertures[0]);
        a->num_of_nodes = n;
        return 0;
}

/* WAIT_EVENTS in slices: the same wait, ended early once the client is
 * killed (-EINTR, what a fatal signal makes of it). A wait that timed out
 * leaves every event as it was (kfd_wait_on_events resets auto-reset events
 * only on COMPLETE), so the next slice is the same wait. */
static int served_wait(KfdProcess *p, unsigned long request, struct kfd_ioctl_wait_events_args *a) {
        const uint32_t timeout = a->timeout;
        uint32_t left = timeout;

        for (;;) {
                bool forever = left == UINT32_MAX;
                uint32_t slice = forever ? WAIT_SLICE_MS : MIN(left, WAIT_SLICE_MS);
                bool killed;
                int r;

                pthread_mutex_lock(&p->lock);
                killed = p->killed;
                pthread_mutex_unlock(&p->lock);
                if (killed)
                        return -EINTR;
                a->timeout = slice;
                r = p->base->ioctl(p->base->userdata, p->kfd_fd, request, a);
                a->timeout = timeout;
                if (r < 0 || a->wait_result != KFD_IOC_WAIT_RESULT_TIMEOUT || (!forever && left <= slice))
                        return r;
                if (!forever)
                        left -= slice;
        }
}

/* Whether the client's allocation of flags is made on the render file (see
 * the top of the file): a KFD without EXPORT_DMABUF, and VRAM or GTT, the
 * domains amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu() tries first, in that
 * order (USERPTR never reaches here; DOORBELL and MMIO_REMAP are pages of the
 * KFD file, which the relay answers). */
static bool gem_backed(const KfdProcess *p, uint32_t flags) {
        return !(p->flags & KFD_PROCESS_TRUSTED) && p->kfd_minor < KFD_MINOR_EXPORT_DMABUF &&
               (flags & (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT));
}

/* TRUSTED: the daemon's calls, all of them; what the doorbells need is
 * noted, and the client's buffers for their mmaps. */
static int trusted_ioctl(KfdProcess *p, int fd, unsigned long request, void *arg) {
        int r;

        if (fd == p->kfd_fd && is_kfd_call(request) && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_WAIT_EVENTS) && arg &&
            _IOC_SIZE(request) >= sizeof(struct kfd_ioctl_wait_events_args))
                return served_wait(p, request, arg);
        r = p->base->ioctl(p->base->userdata, fd, request, arg);
        if (r < 0 || fd != p->kfd_fd || !is_kfd_call(request) || !arg)
                return r;
        switch (_IOC_NR(request)) {
        case _IOC_NR(AMDKFD_IOC_CREATE_QUEUE): {
                const struct kfd_ioctl_create_queue_args *a = arg;
                int k = _IOC_SIZE(request) < sizeof *a ? -1 : gpu_of_id(p, a->gpu_id);
                if (k < 0)
                        break;
                pthread_mutex_lock(&p->lock);
                for (unsigned i = 0; i < MAX_QUEUES; i++)
                        if (p->queues[i].slot == 0 && p->queues[i].queue_id == 0) {
                                /* slot + 1: 0 marks a free entry. */
                                p->queues[i] = (KfdProcessQueue) {
                                        .queue_id = a->queue_id,
                                        .slot = (uint32_t) (a->doorbell_offset & (KFD_DOORBELL_SLICE_SIZE - 1)) + 1,
                                        .gpu = (uint32_t) k };
                                break;
                        }
                pthread_mutex_unlock(&p->lock);
                break;
        }
        case _IOC_NR(AMDKFD_IOC_DESTROY_QUEUE): {
                const struct kfd_ioctl_destroy_queue_args *a = arg;
                if (_IOC_SIZE(request) < sizeof *a)
                        break;
                pthread_mutex_lock(&p->lock);
                for (unsigned i = 0; i < MAX_QUEUES; i++)
                        if (p->queues[i].slot != 0 && p->queues[i].queue_id == a->queue_id)
                                p->queues[i] = (KfdProcessQueue) {};
                pthread_mutex_unlock(&p->lock);
                break;
        }
        case _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU):
                if (_IOC_SIZE(request) >= sizeof(struct kfd_ioctl_alloc_memory_of_gpu_args))
                        kfd_buffers_add(&p->bufs, arg, 0);
                break;
        case _IOC_NR(AMDKFD_IOC_FREE_MEMORY_OF_GPU):
                if (r == 0)
                        (void) kfd_buffers_remove(&p->bufs, free_handle(arg, request), NULL);
                break;
        default:
                break;
        }
        return r;
}

static int served_ioctl(void *userdata, int fd, unsigned long request, void *arg) {
        KfdProcessView *v = userdata;
        KfdProcess *p = v->proc;
        int r = known_file(p, fd);

        if (r < 0)
                return r;
        if (p->flags & KFD_PROCESS_TRUSTED)
                return trusted_ioctl(p, fd, request, arg);
        if (gpu_of_fd(p, fd) >= 0 && kfd_render_call_allowed(request, arg))
                return p->base->ioctl(p->base->userdata, fd, request, arg);
        if (fd != p->kfd_fd || !is_kfd_call(request))
                return gpu_of_fd(p, fd) >= 0 ? -EACCES : -ENOTTY;
        /* Past the table of this kernel: what its kfd_ioctl answers (EINVAL
         * before 1.19, ENOTTY from then on; sim-device.c), never run. */
        if (_IOC_NR(request) > _IOC_NR(AMDKFD_IOC_CREATE_PROCESS))
                return p->kfd_minor >= KFD_MINOR_CREATE_PROCESS ? -ENOTTY : -EINVAL;
        if (!served_call_allowed(request)) {
                log_debug("KFD relay: call 0x%02x of a relayed process refused (not among the calls it may make)",
                          (unsigned) _IOC_NR(request));
                return -EINVAL;
        }
        r = check_acquire_vm(p, request, arg);
        if (r < 0)
                return r;
        size_t off = gpu_id_offset(request);
        if (off > 0 && arg && gpu_of_id(p, (uint32_t) arg_field(arg, request, off, sizeof(uint32_t))) < 0)
                return -EINVAL;
        switch (_IOC_NR(request)) {
        case _IOC_NR(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW):
                if (!arg || _IOC_SIZE(request) < sizeof(struct kfd_ioctl_get_process_apertures_new_args))
                        break;
                return served_apertures(p, arg);
        case _IOC_NR(AMDKFD_IOC_GET_PROCESS_APERTURES):
                if (!arg || _IOC_SIZE(request) < sizeof(struct kfd_ioctl_get_process_apertures_args))
                        break;
                return served_apertures_old(p, arg);
        case _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU): {
                struct kfd_ioctl_alloc_memory_of_gpu_args *a = arg;

                if (!a || _IOC_SIZE(request) < sizeof *a)
                        return -EINVAL;
                /* Memory of the daemon's address space: never. */
                if (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR)
                        return -EOPNOTSUPP;
                if (gem_backed(p, a->flags)) {
                        uint32_t gem_handle = 0;
                        /* On the render file of the GPU it names (checked
                         * above: one of the process's). */
                        int k = gpu_of_id(p, a->gpu_id);
                        r = kfd_gem_alloc(p->base, p->kfd_fd, p->gpus[k].render_fd, a, &gem_handle);
                        if (r == 0)
                                kfd_buffers_add(&p->bufs, a, gem_handle);
                        return r;
                }
                r = p->base->ioctl(p->base->userdata, fd, request, arg);
                if (r == 0)
                        kfd_buffers_add(&p->bufs, a, 0);
                return r;
        }
        case _IOC_NR(AMDKFD_IOC_FREE_MEMORY_OF_GPU): {
                uint64_t handle = free_handle(arg, request);

                r = p->base->ioctl(p->base->userdata, fd, request, arg);
                if (r == 0) {
                        /* KFD's reference went; the handle's goes now, and
                         * with it the memory (dma-bufs of it live on), on
                         * the render file of its GPU. */
                        uint32_t gpu_id = 0;
                        uint32_t gem_handle = kfd_buffers_remove(&p->bufs, handle, &gpu_id);
                        int k = gpu_of_id(p, gpu_id);
                        if (gem_handle && k >= 0)
                                kfd_gem_close(p->base, p->gpus[k].render_fd, gem_handle);
                }
                return r;
        }
        case _IOC_NR(AMDKFD_IOC_WAIT_EVENTS):
                if (!arg || _IOC_SIZE(request) < sizeof(struct kfd_ioctl_wait_events_args))
                        break;
                return served_wait(p, request, arg);
        default:
                break;
        }
        return p->base->ioctl(p->base->userdata, fd, request, arg);
}

static int served_mmap(void *userdata, void *addr, size_t length, int prot, int flags, int fd, uint64_t offset,
                       void **ret_addr) {
        /* The server maps nothing of the process's: it resolves (below). */
        return -ENODEV;
}

/* SimRemoteProcess */
static int served_dup_file(void *userdata, int fd) {
        KfdProcess *p = userdata;
        int r = known_file(p, fd);

        if (r < 0)
                return r;
        /* What stands for the file in the client: nothing of the device. */
        r = fcntl(p->placeholder_fd, F_DUPFD_CLOEXEC, 3);
        return r < 0 ? -errno : r;
}

static int served_mmap_resolve(void *userdata, int fd, size_t length, uint64_t offset, int *ret_fd,
                               uint64_t *ret_offset) {
        KfdProcess *p = userdata;
        struct kfd_ioctl_export_dmabuf_args e = { .flags = O_CLOEXEC | O_RDWR };
        KfdBuffer b;
        int r = known_file(p, fd), k = gpu_of_fd(p, fd);

        if (r < 0)
                return r;
        /* TRUSTED: the doorbell slice of the GPU the offset names is its
         * shadow page (mapping the real one here the first time). */
        if ((p->flags & KFD_PROCESS_TRUSTED) && fd == p->kfd_fd &&
            (offset & KFD_MMAP_TYPE_MASK) == KFD_MMAP_TYPE_DOORBELL) {
                k = gpu_of_mmap_offset(p, offset);
                if (length != KFD_DOORBELL_SLICE_SIZE || k < 0)
                        return -EINVAL;
                pthread_mutex_lock(&p->lock);
                if (!p->gpus[k].doorbells) {
                        void *addr = NULL;
                        r = p->base->mmap(p->base->userdata, NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                                          offset, &addr);
                        if (r >= 0)
                                p->gpus[k].doorbells = addr;
                }
                pthread_mutex_unlock(&p->lock);
                if (r < 0)
                        return r;
                r = fcntl(p->gpus[k].shadow_fd, F_DUPFD_CLOEXEC, 3);
                if (r < 0)
                        return -errno;
                *ret_fd = r;
                *ret_offset = 0;
                return 0;
        }
        /* The KFD file's own pages (doorbells, the HDP page) are the
         * relay's to answer; nothing else of it is the client's. */
        if (k < 0 || length == 0)
                return -EINVAL;
        /* TRUSTED on a KFD without EXPORT_DMABUF: the render file itself, for
         * the daemon alone (the top of the file). */
        if ((p->flags & KFD_PROCESS_TRUSTED) && p->kfd_minor < KFD_MINOR_EXPORT_DMABUF)
                return p->base->mmap_resolve ? p->base->mmap_resolve(p->base->userdata, fd, length, offset, ret_fd,
                                                                      ret_offset)
                                             : -EOPNOTSUPP;
        r = kfd_buffers_find(&p->bufs, p->gpus[k].gpu_id, offset, length, &b);
        if (r < 0)
                return r;
        if (b.gem_handle) {
                r = kfd_gem_export(p->base, p->gpus[k].render_fd, b.gem_handle, ret_fd);
                if (r < 0)
                        return r;
        } else {
                e.handle = b.handle;
                r = p->base->ioctl(p->base->userdata, p->kfd_fd, AMDKFD_IOC_EXPORT_DMABUF, &e);
                if (r < 0)
                        return r;
                *ret_fd = (int) e.dmabuf_fd;
        }
        *ret_offset = offset - b.mmap_offset;
        return 0;
}

static void served_kill(void *userdata) {
        KfdProcess *p = userdata;

        pthread_mutex_lock(&p->lock);
        p->killed = true;
        pthread_mutex_unlock(&p->lock);
}

static void served_free(void *userdata) {
        kfd_process_unref(userdata);
}

static void view_init(KfdProcessView *v, KfdProcess *p, bool served) {
        v->proc = p;
        v->ops = (KfdOps) {
                .name = p->base->name,
                .userdata = v,
                .sysfs_root = p->base->sysfs_root,
                .fds_per_bo = p->base->fds_per_bo,
                .open_kfd = served ? served_open_kfd : daemon_open_kfd,
                .open_render = served ? served_open_render : daemon_open_render,
                .ioctl = served ? served_ioctl : daemon_ioctl,
                .mmap = served ? served_mmap : daemon_mmap,
                .munmap = view_munmap,
                .close = served ? served_close : daemon_close,
                .exception_info = view_exception_info,
                .dmabuf_refs = view_dmabuf_refs,
                .doorbell_written = view_doorbell_written,
        };
}

/* TRUSTED: the shadow doorbell slice of GPU k, made before the process is
 * served (a proxy worker's sandbox has no memfd_create()). */
static int shadow_new(KfdProcess *p, size_t k, char *err, size_t errlen) {
        void *shadow;
        int r;

        if (!(p->flags & KFD_PROCESS_TRUSTED))
                return 0;
        p->gpus[k].shadow_fd = memfd_create("kfdbroker-doorbells", MFD_CLOEXEC);
        if (p->gpus[k].shadow_fd < 0 || ftruncate(p->gpus[k].shadow_fd, KFD_DOORBELL_SLICE_SIZE) < 0) {
                r = -errno;
                snprintf(err, errlen, "the doorbell page: %s", strerror(-r));
                return r;
        }
        shadow = mmap(NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ, MAP_SHARED, p->gpus[k].shadow_fd, 0);
        if (shadow == MAP_FAILED) {
                r = -errno;
                snprintf(err, errlen, "the doorbell page: %s", strerror(-r));
                return r;
        }
        p->gpus[k].shadow = shadow;
        return 0;
}

int kfd_process_new(const KfdOps *base, void (*base_free)(const KfdOps *), unsigned flags, uint32_t gpu_id,
                    unsigned render_minor, KfdProcess **ret, char *err, size_t errlen) {
        struct kfd_ioctl_get_version_args v = {};
        KfdProcess *p;
        int r;

        p = calloc(1, sizeof *p);
        if (!p) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        pthread_mutex_init(&p->lock, NULL);
        kfd_buffers_init(&p->bufs);
        p->n_ref = 1;
        p->base = base;
        p->base_free = base_free;
        p->flags = flags;
        p->kfd_fd = p->placeholder_fd = -EBADF;
        p->gpus[0] = (typeof(p->gpus[0])) { .gpu_id = gpu_id, .render_minor = render_minor, .render_fd = -EBADF,
                                            .shadow_fd = -EBADF };
        p->n_gpus = 1;
        /* Made now: a proxy worker's sandbox has no memfd_create(). */
        p->placeholder_fd = memfd_create("kfdbroker-kfd-file", MFD_CLOEXEC);
        if (p->placeholder_fd < 0) {
                r = -errno;
                snprintf(err, errlen, "memfd_create: %s", strerror(-r));
                goto fail;
        }
        r = shadow_new(p, 0, err, errlen);
        if (r < 0)
                goto fail;
        view_init(&p->daemon, p, false);
        view_init(&p->served, p, true);

        p->kfd_fd = base->open_kfd(base->userdata);
        if (p->kfd_fd < 0) {
                r = p->kfd_fd;
                snprintf(err, errlen, "cannot open /dev/kfd: %s", strerror(-r));
                goto fail;
        }
        r = kfd_ioctl(base, p->kfd_fd, AMDKFD_IOC_GET_VERSION, &v);
        p->kfd_minor = v.minor_version;
        if (r >= 0 && (flags & KFD_PROCESS_SECONDARY)) {
                if (v.minor_version < KFD_MINOR_CREATE_PROCESS)
                        r = -EOPNOTSUPP;
                if (r >= 0)
                        r = kfd_ioctl(base, p->kfd_fd, AMDKFD_IOC_CREATE_PROCESS, NULL);
        } else if (r >= 0 && v.minor_version < KFD_MINOR_EXPORT_DMABUF && (flags & KFD_PROCESS_TRUSTED) &&
                   !base->mmap_resolve)
                /* The daemon could not map what it maps of the process. */
                r = -EOPNOTSUPP;
        if (r < 0) {
                snprintf(err, errlen, "cannot make a %s KFD context for it (KFD %u.%u): %s",
                         (flags & KFD_PROCESS_SECONDARY) ? "secondary" : "mappable", v.major_version, v.minor_version,
                         strerror(-r));
                goto fail;
        }
        p->gpus[0].render_fd = base->open_render(base->userdata, render_minor);
        if (p->gpus[0].render_fd < 0) {
                r = p->gpus[0].render_fd;
                snprintf(err, errlen, "cannot open renderD%u: %s", render_minor, strerror(-r));
                goto fail;
        }
        *ret = p;
        return 0;
fail:
        kfd_process_unref(p);
        return r;
}

int kfd_process_add_gpu(KfdProcess *p, uint32_t gpu_id, unsigned render_minor, char *err, size_t errlen) {
        size_t k = p->n_gpus;
        int fd, r;

        /* Any flavour: a secondary context, a proxy worker's own process
         * (TRUSTED, before its sandbox: its worker was given the GPUs in its
         * setup) and the daemon's side of it, whose base opens the render
         * file in the worker (and gets -ENOENT for a GPU the worker was not
         * given). */
        if (k == KFD_PROCESS_MAX_GPUS) {
                snprintf(err, errlen, "GPU 0x%" PRIx32 " cannot be added to this KFD process (more than %u GPUs)",
                         gpu_id, KFD_PROCESS_MAX_GPUS);
                return -EOPNOTSUPP;
        }
        if (gpu_of_id(p, gpu_id) >= 0 || gpu_of_minor(p, render_minor) >= 0) {
                snprintf(err, errlen, "GPU 0x%" PRIx32 " (renderD%u) is in this KFD process already", gpu_id,
                         render_minor);
                return -EEXIST;
        }
        p->gpus[k] = (typeof(p->gpus[0])) { .gpu_id = gpu_id, .render_minor = render_minor, .render_fd = -EBADF,
                                            .shadow_fd = -EBADF };
        r = shadow_new(p, k, err, errlen);
        fd = r < 0 ? r : p->base->open_render(p->base->userdata, render_minor);
        if (fd < 0) {
                if (r >= 0)
                        snprintf(err, errlen, "cannot open renderD%u: %s", render_minor, strerror(-fd));
                if (p->gpus[k].shadow)
                        (void) munmap((void *) p->gpus[k].shadow, KFD_DOORBELL_SLICE_SIZE);
                safe_close(p->gpus[k].shadow_fd);
                p->gpus[k] = (typeof(p->gpus[0])) {};
                return fd;
        }
        pthread_mutex_lock(&p->lock);
        p->gpus[k].render_fd = fd;
        p->n_gpus++;
        pthread_mutex_unlock(&p->lock);
        return 0;
}

const KfdOps *kfd_process_daemon_ops(KfdProcess *p) {
        return &p->daemon.ops;
}

SimRemoteProcess kfd_process_served(KfdProcess *p) {
        return (SimRemoteProcess) { .ops = &p->served.ops, .userdata = p, .dup_file = served_dup_file,
                                    .mmap_resolve = served_mmap_resolve, .kill = served_kill,
                                    .free = served_free };
}
