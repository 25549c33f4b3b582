/* SPDX-License-Identifier: MIT */
/*
 * The buffers a relayed client made in its KFD process (context-kfd-process.c):
 * their table, by which the process resolves the client's mmaps of its
 * render file, and on a KFD without dma-buf export (before uapi 1.12,
 * kfd-facts §7.4) their backing by GEM buffers of the process's render file
 * (context-kfd-buffers.c).
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kfd/kfd-ops.h"
#include "kfd/kfd-uapi.h"

typedef struct KfdBuffer {
        uint64_t handle, mmap_offset, size;
        uint32_t gpu_id;     /* whose render file maps it (offsets are per GPU) */
        uint32_t gem_handle; /* on the render file, or 0: a KFD allocation */
} KfdBuffer;

typedef struct KfdBuffers {
        pthread_mutex_t lock;
        KfdBuffer *v;
        size_t n, cap;
} KfdBuffers;

void kfd_buffers_init(KfdBuffers *b);
void kfd_buffers_done(KfdBuffers *b);
/* Notes the buffer a made (size rounded up to pages), in place of any noted
 * under the same handle. Without memory it is not noted: the client cannot
 * map it, and it is still the client's. */
void kfd_buffers_add(KfdBuffers *b, const struct kfd_ioctl_alloc_memory_of_gpu_args *a, uint32_t gem_handle);
/* Forgets a freed buffer; returns its GEM handle, or 0, and its GPU in
 * *ret_gpu_id (if not NULL) when it was there. */
uint32_t kfd_buffers_remove(KfdBuffers *b, uint64_t handle, uint32_t *ret_gpu_id);
/* The buffer of GPU gpu_id whose mmap range holds length bytes at offset: 0
 * and *ret, or -EINVAL. */
int kfd_buffers_find(KfdBuffers *b, uint32_t gpu_id, uint64_t offset, size_t length, KfdBuffer *ret);

/*
 * kfd_gem_alloc() - a client's ALLOC_MEMORY_OF_GPU of VRAM or GTT made as a
 * GEM buffer of render_fd imported into the KFD context of kfd_fd (both of
 * base), at the VA and GPU @a asks: AMDGPU_GEM_CREATE, PRIME_HANDLE_TO_FD,
 * IMPORT_DMABUF, AMDGPU_GEM_MMAP. Fills a->handle (the KFD handle) and
 * a->mmap_offset (the buffer's offset on render_fd) and *ret_gem_handle.
 * Returns 0 or the failing call's errno; on failure nothing is left.
 */
int kfd_gem_alloc(const KfdOps *base, int kfd_fd, int render_fd, struct kfd_ioctl_alloc_memory_of_gpu_args *a,
                  uint32_t *ret_gem_handle);
/* PRIME_HANDLE_TO_FD of the GEM buffer (O_CLOEXEC, read-write): a new
 * dma-buf fd in *ret_fd, or the errno. */
int kfd_gem_export(const KfdOps *base, int render_fd, uint32_t gem_handle, int *ret_fd);
/* GEM_CLOSE of the handle (the buffer goes with its last holder). */
void kfd_gem_close(const KfdOps *base, int render_fd, uint32_t gem_handle);
