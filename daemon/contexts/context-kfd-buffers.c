/* SPDX-License-Identifier: MIT */
/*
 * The buffers of a relayed client's KFD process (context-kfd-buffers.h):
 * the table its mmaps are resolved by, and their GEM backing on a KFD
 * without EXPORT_DMABUF. Owned by the KfdProcess; the table has its own
 * lock, since the serving threads of the client and of the daemon use it.
 *
 * GEM backing (KFD < 1.12: Linux 6.1, Debian 12's own kernel): the client's
 * buffers must reach it as dma-bufs, never as the render file, and only the
 * render node makes dma-bufs there. So a VRAM or GTT allocation is made as
 * gpu-buffer.c makes the daemon's own buffers on such a kernel, the path
 * libhsakmt takes for graphics buffers (hsaKmtRegisterGraphicsHandleToNodes):
 * a GEM buffer imported into KFD. The kernel gives an imported buffer its
 * own flags, not the client's (amdgpu_amdkfd_gpuvm_import_dmabuf(), Linux
 * 6.1: VRAM or GTT | WRITABLE | EXECUTABLE); docs/rocm.md ("Versions") says
 * what that costs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>

#include <amdgpu_drm.h>

#include "contexts/context-kfd-buffers.h"
#include "util/log.h"
#include "util/macro.h"

void kfd_buffers_init(KfdBuffers *b) {
        *b = (KfdBuffers) {};
        pthread_mutex_init(&b->lock, NULL);
}

void kfd_buffers_done(KfdBuffers *b) {
        free(b->v);
        b->v = NULL;
        b->n = b->cap = 0;
        pthread_mutex_destroy(&b->lock);
}

void kfd_buffers_add(KfdBuffers *b, const struct kfd_ioctl_alloc_memory_of_gpu_args *a, uint32_t gem_handle) {
        KfdBuffer e = { .handle = a->handle, .mmap_offset = a->mmap_offset, .gpu_id = a->gpu_id,
                        .size = ALIGN_UP(a->size, (uint64_t) PAGE_SIZE_4K), .gem_handle = gem_handle };

        pthread_mutex_lock(&b->lock);
        /* The kernel just gave this handle out: a buffer noted under it is
         * gone, whatever the table missed. */
        for (size_t i = 0; i < b->n; i++)
                if (b->v[i].handle == e.handle) {
                        b->v[i] = e;
                        pthread_mutex_unlock(&b->lock);
                        return;
                }
        if (b->n == b->cap) {
                size_t cap = b->cap ? 2 * b->cap : 16;
                KfdBuffer *v = reallocarray(b->v, cap, sizeof *v);
                if (!v) {
                        pthread_mutex_unlock(&b->lock);
                        return;
                }
                b->v = v;
                b->cap = cap;
        }
        b->v[b->n++] = e;
        pthread_mutex_unlock(&b->lock);
}

uint32_t kfd_buffers_remove(KfdBuffers *b, uint64_t handle, uint32_t *ret_gpu_id) {
        uint32_t gem_handle = 0;

        pthread_mutex_lock(&b->lock);
        for (size_t i = 0; i < b->n; i++)
                if (b->v[i].handle == handle) {
                        gem_handle = b->v[i].gem_handle;
                        if (ret_gpu_id)
                                *ret_gpu_id = b->v[i].gpu_id;
                        b->v[i] = b->v[--b->n];
                        break;
                }
        pthread_mutex_unlock(&b->lock);
        return gem_handle;
}

int kfd_buffers_find(KfdBuffers *b, uint32_t gpu_id, uint64_t offset, size_t length, KfdBuffer *ret) {
        int r = -EINVAL;

        pthread_mutex_lock(&b->lock);
        for (size_t i = 0; i < b->n && r < 0; i++) {
                const KfdBuffer *e = &b->v[i];
                if (e->gpu_id == gpu_id && offset >= e->mmap_offset && offset - e->mmap_offset < e->size &&
                    length <= e->size - (offset - e->mmap_offset)) {
                        *ret = *e;
                        r = 0;
                }
        }
        pthread_mutex_unlock(&b->lock);
        return r;
}

void kfd_gem_close(const KfdOps *base, int render_fd, uint32_t gem_handle) {
        struct drm_gem_close c = { .handle = gem_handle };
        int r = kfd_ioctl(base, render_fd, DRM_IOCTL_GEM_CLOSE, &c);

        if (r < 0)
                log_debug_errno(r, "KFD relay: GEM_CLOSE of handle %" PRIu32 " failed: %m", gem_handle);
}

/* DRM_RDWR: a read-only dma-buf file cannot be mapped for writing. */
int kfd_gem_export(const KfdOps *base, int render_fd, uint32_t gem_handle, int *ret_fd) {
        struct drm_prime_handle e = { .handle = gem_handle, .flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
        int r = kfd_ioctl(base, render_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &e);

        if (r < 0)
                return r;
        if (e.fd < 0)
                return -EIO;
        *ret_fd = e.fd;
        return 0;
}

/*
 * The GEM flags are what the KFD allocation would have been made with
 * (amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu(), Linux 6.1: PUBLIC VRAM is
 * CPU_ACCESS_REQUIRED); VRAM is also VRAM_CLEARED, so that the client never
 * reads what a freed buffer of another held (KFD makes its VRAM
 * VRAM_WIPE_ON_RELEASE, which a GEM_CREATE cannot ask). The kernel's
 * GEM_CREATE falls back to GTT where VRAM is full, as a KFD allocation does
 * not (amdgpu_gem_create_ioctl()'s retry). The offset is the buffer's on the
 * render file (amdgpu_bo_mmap_offset(), as a KFD allocation's mmap_offset).
 */
int kfd_gem_alloc(const KfdOps *base, int kfd_fd, int render_fd, struct kfd_ioctl_alloc_memory_of_gpu_args *a,
                  uint32_t *ret_gem_handle) {
        bool vram = a->flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
        union drm_amdgpu_gem_create c = {
                .in = {
                        .bo_size = a->size,
                        .alignment = PAGE_SIZE_4K,
                        .domains = vram ? AMDGPU_GEM_DOMAIN_VRAM : AMDGPU_GEM_DOMAIN_GTT,
                        .domain_flags = !vram ? 0
                                        : AMDGPU_GEM_CREATE_VRAM_CLEARED |
                                                  ((a->flags & KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC)
                                                           ? AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED
                                                           : 0),
                },
        };
        struct kfd_ioctl_import_dmabuf_args imp = { .va_addr = a->va_addr, .gpu_id = a->gpu_id };
        union drm_amdgpu_gem_mmap m = {};
        _cleanup_close_ int dmabuf = -EBADF;
        uint32_t gem_handle;
        int r;

        r = kfd_ioctl(base, render_fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &c);
        if (r < 0)
                return r;
        gem_handle = c.out.handle;
        r = kfd_gem_export(base, render_fd, gem_handle, &dmabuf);
        if (r >= 0) {
                imp.dmabuf_fd = (uint32_t) dmabuf;
                r = kfd_ioctl(base, kfd_fd, AMDKFD_IOC_IMPORT_DMABUF, &imp);
        }
        if (r >= 0) {
                m.in.handle = gem_handle;
                r = kfd_ioctl(base, render_fd, DRM_IOCTL_AMDGPU_GEM_MMAP, &m);
                if (r < 0) {
                        struct kfd_ioctl_free_memory_of_gpu_args f = { .handle = imp.handle };
                        (void) kfd_ioctl(base, kfd_fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f);
                }
        }
        if (r < 0) {
                kfd_gem_close(base, render_fd, gem_handle);
                return r;
        }
        a->handle = imp.handle;
        a->mmap_offset = m.out.addr_ptr;
        *ret_gem_handle = gem_handle;
        return 0;
}
