/* SPDX-License-Identifier: MIT */
/*
 * amdgpu's GEM buffer ioctls on the simulated render node (sim-drm.h).
 *
 * Sources (Linux 6.1, the kernel whose KFD lacks EXPORT_DMABUF):
 *  - drm_ioctl.c drm_ioctl(): copies in _IOC_SIZE(cmd) bytes, zero-extends to
 *    the kernel's struct, copies as many back even when the handler fails.
 *  - amdgpu_gem.c amdgpu_gem_create_ioctl(): flags outside CPU_ACCESS_REQUIRED,
 *    NO_CPU_ACCESS, CPU_GTT_USWC, VRAM_CLEARED, VM_ALWAYS_VALID,
 *    EXPLICIT_SYNC, ENCRYPTED, DISCARDABLE -> -EINVAL; domains outside
 *    AMDGPU_GEM_DOMAIN_MASK -> -EINVAL; ENCRYPTED without TMZ -> -EINVAL
 *    ("Cannot allocate secure buffer since TMZ is disabled"); a VRAM
 *    allocation that fails is retried without CPU_ACCESS_REQUIRED and then
 *    with GTT added (the 6.1 "retry:" path); the args are zeroed and
 *    out.handle set.
 *  - drm_gem.c drm_gem_handle_create_tail(): handles from idr_alloc(..., 1, 0),
 *    the lowest free id from 1; drm_gem_close_ioctl() -> drm_gem_handle_delete():
 *    unknown handle -> -EINVAL; drm_gem_release() drops every handle when the
 *    file goes.
 *  - drm_prime.c drm_prime_handle_to_fd_ioctl(): flags outside DRM_CLOEXEC |
 *    DRM_RDWR -> -EINVAL; drm_gem_prime_handle_to_fd(): unknown handle ->
 *    -ENOENT; the dma-buf file is opened with the flags given, so without
 *    DRM_RDWR it is read-only (a PROT_WRITE mmap of it fails with EACCES);
 *    one dma-buf per object, every export a new fd on it.
 *  - amdgpu_gem.c amdgpu_gem_mmap_ioctl() -> amdgpu_mode_dumb_mmap(): unknown
 *    handle -> -ENOENT; a user-pointer BO or one made NO_CPU_ACCESS -> -EPERM;
 *    out.addr_ptr = amdgpu_bo_mmap_offset(), the BO's offset on every render
 *    file (drm_vma_node_offset_addr), where an mmap of a file that holds a
 *    handle of it maps it (drm_gem_handle_create_tail() allows the file on
 *    the node: drm_vma_node_allow()).
 *
 * Where the simulator differs (never kinder in what the daemon relies on):
 *  - only the whole request words of libdrm are run (sim-drm.h);
 *  - domains other than exactly VRAM, GTT or VRAM|GTT (CPU, GDS, GWS, OA, none)
 *    and bo_size 0 are -EINVAL: the simulator models no other placement;
 *  - a BO has one placement: one that fell back from VRAM to GTT stays GTT,
 *    and KFD reports GTT for it where the kernel reports its preferred VRAM;
 *  - NO_CPU_ACCESS is accepted but a dma-buf mmap of the BO still works (the
 *    kernel refuses it with EPERM in amdgpu_gem_object_mmap), and so does
 *    GEM_MMAP of it (EPERM on the kernel); the daemon never sets it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <amdgpu_drm.h>

#include "sim-device.h"
#include "sim-drm.h"
#include "sim-file.h"
#include "sim-memory.h"
#include "util/macro.h"

/* AMDGPU_GEM_CREATE_DISCARDABLE (Linux 5.19, include/uapi/drm/amdgpu_drm.h:
 * "#define AMDGPU_GEM_CREATE_DISCARDABLE (1 << 12)"); Debian 12's libdrm
 * header predates it. */
#ifndef AMDGPU_GEM_CREATE_DISCARDABLE
#define AMDGPU_GEM_CREATE_DISCARDABLE (1 << 12)
#endif

#define GEM_CREATE_FLAGS_6_1                                                                                 \
        (AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED | AMDGPU_GEM_CREATE_NO_CPU_ACCESS |                           \
         AMDGPU_GEM_CREATE_CPU_GTT_USWC | AMDGPU_GEM_CREATE_VRAM_CLEARED | AMDGPU_GEM_CREATE_VM_ALWAYS_VALID | \
         AMDGPU_GEM_CREATE_EXPLICIT_SYNC | AMDGPU_GEM_CREATE_ENCRYPTED | AMDGPU_GEM_CREATE_DISCARDABLE)

/* At most this many handles per file (the idr has no such bound; ours keeps
 * a hostile remote process from growing the table without end). */
#define SIM_DRM_MAX_HANDLES (1u << 20)

bool sim_drm_ioctl_simulated(unsigned long request) {
        return request == DRM_IOCTL_AMDGPU_GEM_CREATE || request == DRM_IOCTL_GEM_CLOSE ||
               request == DRM_IOCTL_PRIME_HANDLE_TO_FD || request == DRM_IOCTL_AMDGPU_GEM_MMAP;
}

static SimBo *handle_lookup(SimFile *f, uint32_t handle) {
        if (handle == 0 || handle > f->n_gem)
                return NULL;
        return f->gem[handle - 1];
}

/* idr_alloc(&file_priv->object_idr, obj, 1, 0): the lowest free id from 1. */
static int handle_add(SimFile *f, SimBo *bo, uint32_t *ret) {
        uint32_t i;

        for (i = 0; i < f->n_gem; i++)
                if (!f->gem[i])
                        break;
        if (i == f->n_gem) {
                uint32_t n = MAX(16u, f->n_gem * 2);
                SimBo **a;

                if (f->n_gem >= SIM_DRM_MAX_HANDLES)
                        return -ENOSPC; /* idr_alloc's answer when the id space is full */
                a = realloc(f->gem, n * sizeof *a);
                if (!a)
                        return -ENOMEM;
                memset(a + f->n_gem, 0, (n - f->n_gem) * sizeof *a);
                f->gem = a;
                f->n_gem = n;
        }
        f->gem[i] = sim_bo_ref(bo);
        *ret = i + 1;
        return 0;
}

/* The BO's KFD allocation flags: what an IMPORT_DMABUF of it reports
 * (amdgpu_amdkfd_gpuvm_import_dmabuf: VRAM if its preferred domains hold
 * VRAM, else GTT) and what its memfd name carries (sim-memory.c). */
static uint32_t kfd_flags_for(uint32_t domain, uint64_t gem_flags) {
        if (domain == AMDGPU_GEM_DOMAIN_VRAM)
                return KFD_IOC_ALLOC_MEM_FLAGS_VRAM |
                       ((gem_flags & AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED) ? KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC : 0);
        return KFD_IOC_ALLOC_MEM_FLAGS_GTT;
}

static int gem_create(SimFile *f, union drm_amdgpu_gem_create *a) {
        SimDevice *d = f->device;
        uint64_t flags = a->in.domain_flags, size = a->in.bo_size;
        uint64_t domains = a->in.domains;
        uint32_t domain, handle;
        SimBo *bo;
        int r;

        if (flags & ~(uint64_t) GEM_CREATE_FLAGS_6_1)
                return -EINVAL;
        if (domains & ~(uint64_t) AMDGPU_GEM_DOMAIN_MASK)
                return -EINVAL;
        if (flags & AMDGPU_GEM_CREATE_ENCRYPTED)
                return -EINVAL; /* no TMZ on the simulated GPU */
        if (domains != AMDGPU_GEM_DOMAIN_VRAM && domains != AMDGPU_GEM_DOMAIN_GTT &&
            domains != (AMDGPU_GEM_DOMAIN_VRAM | AMDGPU_GEM_DOMAIN_GTT))
                return -EINVAL; /* see the top of the file */
        size = align_up_u64(size, PAGE_SIZE_4K);
        if (size == 0)
                return -EINVAL;

        /* VRAM if it fits; else the 6.1 retry with GTT added. Anything that
         * fits neither is -ENOMEM (TTM's answer when it cannot place it). */
        domain = (domains & AMDGPU_GEM_DOMAIN_VRAM) && size <= f->gpu->info.vram_size - f->gpu->info.vram_used
                         ? AMDGPU_GEM_DOMAIN_VRAM
                         : AMDGPU_GEM_DOMAIN_GTT;
        r = sim_bo_new(d, f->gpu, size, kfd_flags_for(domain, flags), &bo);
        if (r < 0)
                return r;
        r = handle_add(f, bo, &handle);
        sim_bo_unref(bo); /* the handle holds it now, or nothing does */
        if (r < 0)
                return r;
        memset(a, 0, sizeof *a);
        a->out.handle = handle;
        return 0;
}

static int gem_close(SimFile *f, struct drm_gem_close *a) {
        SimBo *bo = handle_lookup(f, a->handle);

        if (!bo)
                return -EINVAL;
        f->gem[a->handle - 1] = NULL;
        sim_bo_unref(bo);
        return 0;
}

/* A read-only file on the BO's memory: a new open of the memfd itself, as
 * dma_buf_export() opens the dma-buf file O_RDONLY without DRM_RDWR. */
static int open_read_only(int memfd, bool cloexec) {
        char path[64];
        int fd;

        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
        fd = open(path, O_RDONLY | (cloexec ? O_CLOEXEC : 0));
        return fd < 0 ? -errno : fd;
}

static int prime_handle_to_fd(SimFile *f, struct drm_prime_handle *a) {
        bool cloexec = a->flags & DRM_CLOEXEC;
        SimBo *bo;
        int fd;

        if (a->flags & ~(uint32_t) (DRM_CLOEXEC | DRM_RDWR))
                return -EINVAL;
        bo = handle_lookup(f, a->handle);
        if (!bo)
                return -ENOENT;
        if (a->flags & DRM_RDWR) {
                fd = fcntl(bo->memfd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 3);
                if (fd < 0)
                        return -errno;
        } else {
                fd = open_read_only(bo->memfd, cloexec);
                if (fd < 0)
                        return fd;
        }
        bo->exported = true;
        a->fd = fd;
        return 0;
}

/* The BO's offset on the render files; handle_lookup() is
 * drm_gem_object_lookup(): -ENOENT for a handle the file does not have. */
static int gem_mmap(SimFile *f, union drm_amdgpu_gem_mmap *a) {
        SimBo *bo = handle_lookup(f, a->in.handle);

        if (!bo)
                return -ENOENT;
        memset(a, 0, sizeof *a);
        a->out.addr_ptr = bo->mmap_offset;
        return 0;
}

bool sim_drm_file_has_bo(SimFile *f, SimBo *bo) {
        for (uint32_t i = 0; i < f->n_gem; i++)
                if (f->gem[i] == bo)
                        return true;
        return false;
}

int sim_drm_ioctl(SimFile *f, unsigned long request, void *arg) {
        union {
                union drm_amdgpu_gem_create create;
                struct drm_gem_close close;
                struct drm_prime_handle prime;
                union drm_amdgpu_gem_mmap mmap;
        } k = {};
        size_t size = _IOC_SIZE(request);
        int r;

        if (!sim_drm_ioctl_simulated(request))
                return -ENOTTY;
        if (!arg)
                return -EFAULT;
        if (_IOC_DIR(request) & _IOC_WRITE)
                memcpy(&k, arg, MIN(size, sizeof k));
        if (request == DRM_IOCTL_AMDGPU_GEM_CREATE)
                r = gem_create(f, &k.create);
        else if (request == DRM_IOCTL_GEM_CLOSE)
                r = gem_close(f, &k.close);
        else if (request == DRM_IOCTL_AMDGPU_GEM_MMAP)
                r = gem_mmap(f, &k.mmap);
        else
                r = prime_handle_to_fd(f, &k.prime);
        if (_IOC_DIR(request) & _IOC_READ)
                memcpy(arg, &k, MIN(size, sizeof k));
        return r;
}

void sim_drm_file_release(SimFile *f) {
        for (uint32_t i = 0; i < f->n_gem; i++)
                sim_bo_unref(f->gem[i]);
        free(f->gem);
        f->gem = NULL;
        f->n_gem = 0;
}

unsigned sim_drm_count_handles(SimDevice *d) {
        unsigned n = 0;

        for (SimFile *f = d->files; f; f = f->next)
                for (uint32_t i = 0; i < f->n_gem; i++)
                        n += f->gem[i] != NULL;
        return n;
}
