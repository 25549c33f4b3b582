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
 *   1. take the VA from the context's client address window (gpu-va-window.c:
 *      a fixed region, PROT_NONE until mapped, so that no address a client
 *      sees says where ASLR put the daemon; tinygrad KFDIface.alloc reserves
 *      with mmap(NULL) instead);
 *   2. ALLOC_MEMORY_OF_GPU at that VA, MAP_MEMORY_TO_GPU;
 *   3. CPU-map it over the reservation: ops->mmap(va, size, RW,
 *      MAP_SHARED|MAP_FIXED, render_fd, mmap_offset), so CPU VA == GPU VA.
 * Imports replace 2 by IMPORT_DMABUF at the reserved VA and 3 by mmap(2) of the
 * dma-buf fd itself (a dma-buf fd is mmappable: dma_buf_mmap_internal; the
 * render-node offset of an imported BO is not known to us without GEM calls).
 * Teardown goes backwards: UNMAP_MEMORY_FROM_GPU, FREE_MEMORY_OF_GPU, and the
 * window's placeholder mapped back over the range (gpu_va_free()).
 *
 * Render-node buffers (KFD uapi < 1.12, GpuDeviceInfo.render_node_buffers):
 * such a kernel has no EXPORT_DMABUF (kfd-facts §7.4), so a buffer that must
 * be shareable is made where dma-bufs come from — the render node — and
 * imported into KFD, the path libhsakmt takes for graphics buffers
 * (hsaKmtRegisterGraphicsHandleToNodes: GET_DMABUF_INFO, IMPORT_DMABUF):
 *   1. DRM_IOCTL_AMDGPU_GEM_CREATE on the render fd (domain GTT or VRAM with
 *      CPU_ACCESS_REQUIRED, the PUBLIC of a KFD allocation) -> GEM handle;
 *   2. DRM_IOCTL_PRIME_HANDLE_TO_FD (DRM_CLOEXEC | DRM_RDWR: without RDWR the
 *      dma-buf file is read-only and cannot be mapped for writing);
 *   3. the import above with that fd (IMPORT_DMABUF at a reserved VA, MAP,
 *      mmap(2) of the dma-buf); the fd is closed, the mapping keeps the file;
 * every later export is another PRIME_HANDLE_TO_FD of the handle. Teardown:
 * UNMAP, FREE_MEMORY_OF_GPU (drops KFD's reference), munmap, and GEM_CLOSE
 * last, while the render fd is still open (gpu_context_free closes it after
 * the buffers). The GEM calls are raw ioctls through the KfdOps table, with
 * the structs of libdrm's amdgpu_drm.h, not libdrm_amdgpu's amdgpu_bo_alloc:
 * that one issues the same GEM_CREATE but straight to the fd, around the
 * table, after amdgpu_device_initialize()'s queries — the simulator could not
 * see it, and the path would be untested.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <amdgpu_drm.h>

#include "gpu/gpu-internal.h"
#include "util/log.h"
#include "util/macro.h"

/* A range of the context's client address window, still PROT_NONE. */
static int reserve_va(GpuContext *c, uint64_t size, uint64_t *ret) {
        return gpu_va_alloc(&c->va, size, ret);
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

int gpu_unmap_from_gpu(GpuContext *c, uint64_t handle) {
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
                r = gpu_unmap_from_gpu(c, b->handle);
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
        if (b->cpu_mapped || b->va_reserved) {
                /* The window's placeholder goes back over the range, which
                 * ends the CPU mapping (of the render node or the dma-buf) in
                 * the same call: a munmap would open a hole in the window. */
                gpu_va_free(&c->va, b->va, b->size);
                b->cpu_mapped = false;
                b->va_reserved = false;
        }
        b->cpu = NULL;
        if (b->gem) {
                /* Last: KFD's reference and the mapping are gone, this drops the object. */
                struct drm_gem_close a = { .handle = b->gem_handle };
                r = kfd_ioctl(c->ops, c->render_fd, DRM_IOCTL_GEM_CLOSE, &a);
                if (r < 0)
                        log_debug_errno(r, "gpu: GEM_CLOSE of handle %" PRIu32 " failed: %m", b->gem_handle);
                b->gem = false;
        }
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

static void buffer_destroy(GpuBuffer *b);

void gpu_buffer_unmap_elsewhere(GpuBuffer *b) {
        gpu_watches_fire(&b->watches);
        while (b->shadows) {
                GpuBuffer *sh = b->shadows;
                shadow_unlink(sh);
                buffer_destroy(sh);
        }
}

/* Frees the struct after releasing everything; for half-built buffers too.
 * A buffer's shadows in other contexts go with it. */
static void buffer_destroy(GpuBuffer *b) {
        if (!b)
                return;
        gpu_buffer_unmap_elsewhere(b);
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

/* A new buffer record of size bytes, linked and counted; nothing in the kernel yet. */
static GpuBuffer *buffer_new_record(GpuContext *c, uint64_t size, uint32_t flags, bool internal) {
        GpuBuffer *b = calloc(1, sizeof *b);

        if (!b)
                return NULL;
        b->n_ref = 1;
        b->size = size;
        b->flags = flags;
        b->internal = internal;
        buffer_link(c, b);
        buffer_account(b);
        return b;
}

/*
 * The steps of a KFD allocation (see the top of the file): reserve the VA,
 * ALLOC_MEMORY_OF_GPU there, MAP_MEMORY_TO_GPU unless gpu_map is false, and
 * map it for the CPU over the reservation through mmap_fd (the render node
 * for memory, the KFD fd for the MMIO remap page) at the offset KFD gave.
 * b is a new record of b->size bytes; a failure leaves it for buffer_destroy.
 */
static int buffer_alloc_kfd(GpuContext *c, GpuBuffer *b, bool gpu_map, int mmap_fd) {
        int r = reserve_va(c, b->size, &b->va);
        if (r < 0)
                return r;
        b->va_reserved = true;

        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = b->va,
                .size = b->size,
                .gpu_id = c->gpu_id,
                .flags = b->flags,
        };
        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);
        if (r < 0)
                return r;
        b->handle = a.handle;
        b->allocated = true;

        if (gpu_map) {
                r = gpu_map_to_gpu(c, b->handle);
                if (r < 0)
                        return r;
                b->gpu_mapped = true;
        }

        void *p = NULL;
        r = c->ops->mmap(c->ops->userdata, (void *) (uintptr_t) b->va, b->size, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED, mmap_fd, a.mmap_offset, &p);
        if (r < 0)
                return r;
        b->cpu_mapped = true;
        if (p != (void *) (uintptr_t) b->va)
                return -EFAULT; /* MAP_FIXED must land on the GPU VA */
        b->cpu = p;
        return 0;
}

int gpu_buffer_alloc_internal(GpuContext *c, uint64_t size, uint32_t flags, bool internal,
                              GpuBuffer **ret) {
        if (size == 0)
                return -EINVAL;
        size = align_up_u64(size, PAGE_SIZE_4K);
        if (size == 0)
                return -E2BIG;

        _cleanup_(buffer_destroyp) GpuBuffer *b = buffer_new_record(c, size, flags, internal);
        if (!b)
                return -ENOMEM;
        int r = buffer_alloc_kfd(c, b, true, c->render_fd);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

/* The HDP flush page: MMIO_REMAP, CPU-mapped through the KFD fd, not mapped
 * to the GPU (only the CPU writes it). */
int gpu_buffer_alloc_hdp_page(GpuContext *c, GpuBuffer **ret) {
        const uint32_t flags = KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
                               KFD_IOC_ALLOC_MEM_FLAGS_COHERENT | KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
        _cleanup_(buffer_destroyp) GpuBuffer *b = buffer_new_record(c, PAGE_SIZE_4K, flags, true);
        if (!b)
                return -ENOMEM;
        int r = buffer_alloc_kfd(c, b, false, c->kfd_fd);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

/* The size of a dma-buf: GET_DMABUF_INFO (kfd_ioctl_get_dmabuf_info) answers
 * for a dma-buf amdgpu made; lseek(SEEK_END), which dma_buf_llseek()
 * supports, if the kernel lacks the request. For a dma-buf of another driver
 * (a camera's, udmabuf's) it says EINVAL (amdgpu_amdkfd_get_dmabuf_info:
 * dma_buf->ops != &amdgpu_dmabuf_ops), yet IMPORT_DMABUF takes one from KFD
 * 1.15 on (kfd-facts §7.6): its size is then the file's, which
 * dma_buf_getfile() sets to the buffer's (fstat, which unlike lseek leaves
 * the file position of a non-dma-buf alone); whether it is a dma-buf at all
 * is for IMPORT_DMABUF to say. */
static int dmabuf_size(GpuContext *c, int dmabuf_fd, uint64_t *ret) {
        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) dmabuf_fd };
        struct stat st;
        uint64_t size;
        int r;

        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_GET_DMABUF_INFO, &info);
        if (r >= 0)
                size = info.size;
        else if (r == -ENOTTY || r == -EOPNOTSUPP) {
                off_t end = lseek(dmabuf_fd, 0, SEEK_END);
                if (end < 0)
                        return -EINVAL;
                size = (uint64_t) end;
        } else if (r == -EINVAL && c->info.kfd_minor >= 15) {
                if (fstat(dmabuf_fd, &st) < 0 || st.st_size <= 0)
                        return -EINVAL;
                size = (uint64_t) st.st_size;
        } else
                return r == -EBADF ? -EINVAL : r;
        if (size == 0 || size % PAGE_SIZE_4K != 0)
                return -EINVAL;
        *ret = size;
        return 0;
}

/* IMPORT_DMABUF of dmabuf_fd (b->size bytes) at a VA of our own and MAP;
 * with cpu_map also mmap(2) of the dma-buf at that VA. */
static int buffer_attach_dmabuf(GpuContext *c, GpuBuffer *b, int dmabuf_fd, bool cpu_map) {
        int r;

        b->imported = true;
        r = reserve_va(c, b->size, &b->va);
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
                void *p = mmap((void *) (uintptr_t) b->va, b->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                               dmabuf_fd, 0);
                if (p == MAP_FAILED)
                        return -errno;
                b->cpu_mapped = true;
                b->cpu = p;
        }
        return 0;
}

/* IMPORT_DMABUF at a VA of our own and MAP; with cpu_map also mmap(2) of the
 * dma-buf at that VA (a shadow needs no CPU view: the origin has one). */
static int buffer_import(GpuContext *c, int dmabuf_fd, bool cpu_map, bool internal, GpuBuffer **ret) {
        uint64_t size;
        int r;

        if (!c || !ret || dmabuf_fd < 0)
                return -EINVAL;
        r = dmabuf_size(c, dmabuf_fd, &size);
        if (r < 0)
                return r;

        _cleanup_(buffer_destroyp) GpuBuffer *b = buffer_new_record(c, size, 0, internal);
        if (!b)
                return -ENOMEM;
        r = buffer_attach_dmabuf(c, b, dmabuf_fd, cpu_map);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(b);
        return 0;
}

/* PRIME_HANDLE_TO_FD of a GEM buffer: a new dma-buf fd on its object. */
static int gem_export(GpuBuffer *b, int *ret_fd) {
        GpuContext *c = b->ctx;
        struct drm_prime_handle a = { .handle = b->gem_handle, .flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
        int r;

        r = kfd_ioctl(c->ops, c->render_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &a);
        if (r < 0)
                return r;
        if (a.fd < 0)
                return -EIO;
        *ret_fd = a.fd;
        return 0;
}

/* A buffer on the render node, imported into KFD (see the top of the file).
 * flags are the KFD allocation flags a KFD buffer would have had. */
static int buffer_new_gem(GpuContext *c, uint64_t size, uint32_t flags, GpuBuffer **ret) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        size = align_up_u64(size, PAGE_SIZE_4K);
        if (size == 0)
                return -E2BIG;
        _cleanup_(buffer_destroyp) GpuBuffer *b = buffer_new_record(c, size, flags, false);
        if (!b)
                return -ENOMEM;

        bool vram = flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
        union drm_amdgpu_gem_create a = {
                .in = {
                        .bo_size = size,
                        .alignment = PAGE_SIZE_4K,
                        .domains = vram ? AMDGPU_GEM_DOMAIN_VRAM : AMDGPU_GEM_DOMAIN_GTT,
                        .domain_flags = vram ? AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED : 0,
                },
        };
        r = kfd_ioctl(c->ops, c->render_fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &a);
        if (r < 0)
                return r;
        b->gem = true;
        b->gem_handle = a.out.handle;

        r = gem_export(b, &fd);
        if (r < 0)
                return r;
        r = buffer_attach_dmabuf(c, b, fd, true);
        if (r < 0)
                return r;
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
        if (size == 0)
                return -EINVAL;
        /* Every buffer made here may be exported (a client's dma-buf, a map
         * into another context): on KFD < 1.12 it must come from the render node. */
        if (c->info.render_node_buffers)
                return buffer_new_gem(c, size, flags, ret);
        return gpu_buffer_alloc_internal(c, size, flags, false, ret);
}

int gpu_buffer_alloc_gpu_only(GpuContext *c, uint64_t size, GpuBuffer **ret) {
        int r = -ENOMEM;

        if (c->info.vram_size > 0)
                r = gpu_buffer_alloc_internal(c, size, GPU_BO_FLAGS_GPU_ONLY, true, ret);
        if (r == -ENOMEM || r == -ENOSPC) {
                if (c->info.vram_size > 0)
                        log_debug("gpu: %" PRIu64 " bytes for the GPU alone do not fit in VRAM; using GTT", size);
                r = gpu_buffer_alloc_internal(c, size, GPU_BO_FLAGS_GTT, true, ret);
        }
        return r;
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
        if (b->gem)
                return gem_export(b, ret_fd);
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

int gpu_dmabuf_refs(GpuContext *c, int dmabuf_fd) {
        if (!c || dmabuf_fd < 0)
                return -EINVAL;
        return kfd_dmabuf_refs(c->ops, dmabuf_fd);
}

bool gpu_sees_dmabuf_copies(GpuContext *c) {
        return c && c->ops->dmabuf_refs;
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

bool gpu_buffer_is_shared(const GpuBuffer *b) {
        return b->n_ref > 1;
}

int gpu_buffer_zero(GpuBuffer *b) {
        if (!b->cpu)
                return -ENODEV;
        memset(b->cpu, 0, b->size);
        return 0;
}
