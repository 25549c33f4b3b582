/* SPDX-License-Identifier: MIT */
/*
 * GpuBuffer: one KFD buffer object in the context's GPU VM, mapped at the same
 * address for the CPU and the GPU (kfd-facts §1.5). Reference counted: the
 * owner (a session, through the core) holds one reference and every job in
 * flight that touches it holds another (the core takes them with
 * gpu_buffer_ref). The context also uses GpuBuffers for its own rings, fence
 * memory and event page ("internal" buffers, not counted in the stats).
 *
 * Life of a buffer:
 *   1. reserve the VA with an anonymous PROT_NONE mapping of our own process
 *      (tinygrad KFDIface.alloc; not a device call);
 *   2. ALLOC_MEMORY_OF_GPU at that VA, MAP_MEMORY_TO_GPU;
 *   3. CPU-map it over the reservation: ops->mmap(va, size, RW,
 *      MAP_SHARED|MAP_FIXED, render_fd, mmap_offset), so CPU VA == GPU VA.
 * Imports replace 2 by IMPORT_DMABUF at the reserved VA and 3 by mmap(2) of the
 * dma-buf fd itself (a dma-buf fd is mmappable: dma_buf_mmap_internal; the
 * render-node offset of an imported BO is not known to us without GEM calls).
 * Teardown goes backwards: UNMAP_MEMORY_FROM_GPU, FREE_MEMORY_OF_GPU, munmap.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu/gpu-internal.h"
#include "util/log.h"
#include "util/macro.h"

static int reserve_va(uint64_t size, uint64_t *ret) {
        void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
                return -errno;
        *ret = (uint64_t) (uintptr_t) p;
        return 0;
}

/*
 * MAP_MEMORY_TO_GPU for our one device. The kernel maps devices
 * [n_success, n_devices) and advances n_success after each, so a call that was
 * interrupted is simply reissued with the same args (kfd_ioctl_map_memory_to_gpu).
 */
int gpu_map_to_gpu(GpuContext *c, uint64_t handle) {
        uint32_t ids[1] = { c->gpu_id };
        struct kfd_ioctl_map_memory_to_gpu_args a = {
                .handle = handle,
                .device_ids_array_ptr = (uint64_t) (uintptr_t) ids,
                .n_devices = 1,
                .n_success = 0,
        };
        int r = -EINTR;
        for (unsigned attempt = 0; attempt < 8 && a.n_success < a.n_devices; attempt++) {
                r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &a);
                if (r >= 0 || (r != -EINTR && r != -EAGAIN))
                        break;
        }
        if (r < 0)
                return r;
        return a.n_success == a.n_devices ? 0 : -EIO;
}

static int unmap_from_gpu(GpuContext *c, uint64_t handle) {
        uint32_t ids[1] = { c->gpu_id };
        struct kfd_ioctl_unmap_memory_from_gpu_args a = {
                .handle = handle,
                .device_ids_array_ptr = (uint64_t) (uintptr_t) ids,
                .n_devices = 1,
        };
        int r = -EINTR;
        for (unsigned attempt = 0; attempt < 8 && a.n_success < a.n_devices; attempt++) {
                r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &a);
                if (r >= 0 || (r != -EINTR && r != -EAGAIN))
                        break;
        }
        return r < 0 ? r : 0;
}

void gpu_buffer_release_kernel(GpuBuffer *b) {
        GpuContext *c = b->ctx;
        int r;

        if (!c)
                return;
        /* The registered event page stays mapped and allocated until the KFD
         * fd closes: the kernel kmaps it and refuses to free it (EPERM). */
        if (b->gpu_mapped && !b->keep_bo) {
                r = unmap_from_gpu(c, b->handle);
                if (r < 0)
                        log_debug_errno(r, "gpu: UNMAP_MEMORY_FROM_GPU va=0x%" PRIx64 " failed: %m", b->va);
                b->gpu_mapped = false;
        }
        if (b->allocated && !b->keep_bo) {
                struct kfd_ioctl_free_memory_of_gpu_args a = { .handle = b->handle };
                r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &a);
                if (r < 0)
                        log_debug_errno(r, "gpu: FREE_MEMORY_OF_GPU va=0x%" PRIx64 " failed: %m", b->va);
        }
        b->allocated = false;
        if (b->cpu_mapped) {
                if (b->imported)
                        r = munmap((void *) (uintptr_t) b->va, b->size) < 0 ? -errno : 0;
                else
                        r = c->ops->munmap(c->ops->userdata, (void *) (uintptr_t) b->va, b->size);
                if (r < 0)
                        log_debug_errno(r, "gpu: munmap of va=0x%" PRIx64 " failed: %m", b->va);
                b->cpu_mapped = false;
                b->va_reserved = false;
        }
        if (b->va_reserved) {
                munmap((void *) (uintptr_t) b->va, b->size);
                b->va_reserved = false;
        }
        b->cpu = NULL;
}

static void buffer_link(GpuContext *c, GpuBuffer *b) {
        b->ctx = c;
        b->next = c->buffers;
        if (c->buffers)
                c->buffers->prev = b;
        c->buffers = b;
}

static void buffer_unlink(GpuBuffer *b) {
        GpuContext *c = b->ctx;
        if (!c)
                return;
        if (b->prev)
                b->prev->next = b->next;
        else
                c->buffers = b->next;
        if (b->next)
                b->next->prev = b->prev;
        b->prev = b->next = NULL;
        if (!b->internal) {
                c->n_user_buffers--;
                c->user_buffer_bytes -= b->size;
        }
}

static void shadow_unlink(GpuBuffer *sh) {
        GpuBuffer *o = sh->origin;
        if (!o)
                return;
        for (GpuBuffer **x = &o->shadows; *x; x = &(*x)->shadow_next)
                if (*x == sh) {
                        *x = sh->shadow_next;
                        break;
                }
        sh->origin = NULL;
        sh->shadow_next = NULL;
}

/* Frees the struct after releasing everything; for half-built buffers too.
 * A buffer's shadows in other contexts go with it. */
static void buffer_destroy(GpuBuffer *b) {
        if (!b)
                return;
        gpu_watches_fire(&b->watches);
        while (b->shadows) {
                GpuBuffer *sh = b->shadows;
                shadow_unlink(sh);
                buffer_destroy(sh);
        }
        shadow_unlink(b);
        gpu_buffer_release_kernel(b);
        buffer_unlink(b);
        free(b);
}
DEFINE_POINTER_CLEANUP(GpuBuffer, buffer_destroy);

void gpu_buffers_release_all(GpuContext *c) {
        while (c->buffers) {
                GpuBuffer *b = c->buffers;
                if (b->origin) {
                        /* An import of another context's buffer: ours alone. */
                        buffer_destroy(b);
                        continue;
                }
                gpu_buffer_release_kernel(b);
                c->buffers = b->next;
                if (c->buffers)
                        c->buffers->prev = NULL;
                b->prev = b->next = NULL;
                b->ctx = NULL;
        }
}

static void buffer_account(GpuBuffer *b) {
        if (!b->internal) {
                b->ctx->n_user_buffers++;
                b->ctx->user_buffer_bytes += b->size;
        }
}

int gpu_buffer_alloc_internal(GpuContext *c, uint64_t size, uint32_t flags, bool internal,
                              GpuBuffer **ret) {
        if (size == 0)
                return -EINVAL;
        size = align_up_u64(size, PAGE_SIZE_4K);
        if (size == 0)
                return -E2BIG;

        _cleanup_(buffer_destroyp) GpuBuffer *b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->n_ref = 1;
        b->size = size;
        b->flags = flags;
        b->internal = internal;
        buffer_link(c, b);
        buffer_account(b);

        int r = reserve_va(size, &b->va);
        if (r < 0)
                return r;
        b->va_reserved = true;

        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = b->va,
                .size = size,
                .gpu_id = c->gpu_id,
                .flags = flags,
        };
        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);
        if (r < 0)
                return r;
        b->handle = a.handle;
        b->allocated = true;

        r = gpu_map_to_gpu(c, b->handle);
        if (r < 0)
                return r;
        b->gpu_mapped = true;

        void *p = NULL;
        r = c->ops->mmap(c->ops->userdata, (void *) (uintptr_t) b->va, size, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED, c->render_fd, a.mmap_offset, &p);
        if (r < 0)
                return r;
        b->cpu_mapped = true;
        if (p != (void *) (uintptr_t) b->va)
                return -EFAULT; /* MAP_FIXED must land on the GPU VA */
        b->cpu = p;

        *ret = TAKE_PTR(b);
        return 0;
}

int gpu_buffer_new(GpuContext *c, uint64_t size, GpuPlacement placement, bool executable,
                   GpuBuffer **ret) {
        uint32_t flags;

        if (!c || !ret)
                return -EINVAL;
        switch (placement) {
        case GPU_PLACEMENT_GTT:
                flags = GPU_BO_FLAGS_GTT;
                break;
        case GPU_PLACEMENT_VRAM:
                flags = GPU_BO_FLAGS_VRAM;
                break;
        default:
                return -EINVAL;
        }
        if (executable)
                flags |= KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
        return gpu_buffer_alloc_internal(c, size, flags, false, ret);
}

/* IMPORT_DMABUF at a VA of our own and MAP; with cpu_map also mmap(2) of the
 * dma-buf at that VA (a shadow needs no CPU view: the origin has one). */
static int buffer_import(GpuContext *c, int dmabuf_fd, bool cpu_map, bool internal, GpuBuffer **ret) {
        int r;

        if (!c || !ret || dmabuf_fd < 0)
                return -EINVAL;

        /* The size: GET_DMABUF_INFO (kfd_ioctl_get_dmabuf_info) answers for
         * any dma-buf the device can take; fall back to lseek(SEEK_END), which
         * dma_buf_llseek() supports, if the kernel lacks the request. */
        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) dmabuf_fd };
        uint64_t size;
        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_GET_DMABUF_INFO, &info);
        if (r >= 0)
                size = info.size;
        else if (r == -ENOTTY || r == -EOPNOTSUPP) {
                off_t end = lseek(dmabuf_fd, 0, SEEK_END);
                if (end < 0)
                        return -EINVAL;
                size = (uint64_t) end;
        } else
                return r == -EBADF ? -EINVAL : r;
        if (size == 0 || size % PAGE_SIZE_4K != 0)
                return -EINVAL;

        _cleanup_(buffer_destroyp) GpuBuffer *b = calloc(1, sizeof *b);
        if (!b)
                return -ENOMEM;
        b->n_ref = 1;
        b->size = size;
        b->imported = true;
        b->internal = internal;
        buffer_link(c, b);
        buffer_account(b);

        r = reserve_va(size, &b->va);
        if (r < 0)
                return r;
        b->va_reserved = true;

        struct kfd_ioctl_import_dmabuf_args a = {
                .va_addr = b->va,
                .gpu_id = c->gpu_id,
                .dmabuf_fd = (uint32_t) dmabuf_fd,
        };
        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_IMPORT_DMABUF, &a);
        if (r < 0)
                return r;
        b->handle = a.handle;
        b->allocated = true;

        r = gpu_map_to_gpu(c, b->handle);
        if (r < 0)
                return r;
        b->gpu_mapped = true;

        if (cpu_map) {
                void *p = mmap((void *) (uintptr_t) b->va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                               dmabuf_fd, 0);
                if (p == MAP_FAILED)
                        return -errno;
                b->cpu_mapped = true;
                b->cpu = p;
        }

        *ret = TAKE_PTR(b);
        return 0;
}

int gpu_buffer_import(GpuContext *c, int dmabuf_fd, GpuBuffer **ret) {
        return buffer_import(c, dmabuf_fd, true, false, ret);
}

int gpu_buffer_import_mapped(GpuContext *c, int dmabuf_fd, GpuBuffer **ret) {
        int r = buffer_import(c, dmabuf_fd, false, true, ret);

        if (r >= 0)
                (*ret)->mapped_in = true;
        return r;
}

void gpu_watch_add(GpuWatch **head, GpuWatch *w) {
        gpu_watch_cancel(w);
        w->head = head;
        w->prev = NULL;
        w->next = *head;
        if (*head)
                (*head)->prev = w;
        *head = w;
}

void gpu_buffer_watch(GpuBuffer *b, GpuWatch *w) {
        gpu_watch_add(&b->watches, w);
}

void gpu_watch_cancel(GpuWatch *w) {
        if (!w || !w->head)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                *w->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        w->prev = w->next = NULL;
        w->head = NULL;
}

void gpu_watches_fire(GpuWatch **head) {
        while (*head) {
                GpuWatch *w = *head;
                gpu_watch_cancel(w);
                w->gone(w);
        }
}

int gpu_buffer_map_in(GpuBuffer *b, GpuContext *other, GpuBuffer **ret) {
        _cleanup_close_ int fd = -EBADF;
        GpuBuffer *sh;
        int r;

        if (!b || !other || !ret)
                return -EINVAL;
        if (b->ctx == other) {
                *ret = b;
                return 0;
        }
        for (sh = b->shadows; sh; sh = sh->shadow_next)
                if (sh->ctx == other) {
                        *ret = sh;
                        return 0;
                }
        r = gpu_buffer_export(b, &fd);
        if (r < 0)
                return r;
        /* Counted as the context's mapped memory, not as a buffer of its own. */
        r = buffer_import(other, fd, false, true, &sh);
        if (r < 0)
                return r;
        sh->origin = b;
        sh->shadow_next = b->shadows;
        b->shadows = sh;
        *ret = sh;
        return 0;
}

int gpu_buffer_export(GpuBuffer *b, int *ret_fd) {
        if (!b || !ret_fd)
                return -EINVAL;
        if (!b->ctx || !b->allocated)
                return -ENODEV;
        struct kfd_ioctl_export_dmabuf_args a = {
                .handle = b->handle,
                .flags = O_CLOEXEC | O_RDWR,
        };
        int r = kfd_ioctl(b->ctx->ops, b->ctx->kfd_fd, AMDKFD_IOC_EXPORT_DMABUF, &a);
        if (r < 0)
                return r;
        *ret_fd = (int) a.dmabuf_fd;
        return 0;
}

GpuBuffer *gpu_buffer_ref(GpuBuffer *b) {
        if (b)
                b->n_ref++;
        return b;
}

GpuBuffer *gpu_buffer_unref(GpuBuffer *b) {
        if (!b)
                return NULL;
        if (--b->n_ref > 0)
                return NULL;
        buffer_destroy(b);
        return NULL;
}

uint64_t gpu_buffer_get_va(const GpuBuffer *b) {
        return b->va;
}

uint64_t gpu_buffer_get_size(const GpuBuffer *b) {
        return b->size;
}

void *gpu_buffer_get_cpu(const GpuBuffer *b) {
        return b->cpu;
}
