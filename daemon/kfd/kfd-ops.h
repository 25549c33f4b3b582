/* SPDX-License-Identifier: MIT */
/*
 * The kernel-call table: the only way the daemon reaches /dev/kfd, the render
 * node and the KFD sysfs topology. In production the operations are the real
 * system calls (kfd-real.c); under test and with --device=sim they are the
 * simulated GPU (daemon/sim). Everything above this table — filling uapi
 * structs, computing doorbell and mmap offsets, registering the event page,
 * building packets — is the same code in both modes.
 *
 * Contract (both implementations follow it exactly):
 *  - open_kfd()/open_render() return a new file descriptor or a negative errno.
 *    The descriptors are real fds in both modes (the simulator hands out fds of
 *    its own, e.g. memfds, so that close() and fd accounting behave).
 *  - ioctl() takes the full request word (AMDKFD_IOC_*), returns 0 or a
 *    negative errno (never -1/errno). It may block (WAIT_EVENTS); callers on the
 *    event loop only use non-blocking requests.
 *  - mmap() has mmap(2) semantics and returns the address through ret_addr, or
 *    a negative errno. It is used for: the doorbell slice and event page on the
 *    KFD fd, and BO contents on the render-node fd at the ALLOC mmap_offset
 *    (with MAP_FIXED at the BO's VA, kfd-facts §1.5).
 *  - munmap() undoes an mmap() of this table.
 *  - close() closes an fd returned by open_kfd()/open_render().
 *  - sysfs_root is the directory that stands for /sys/devices/virtual/kfd/kfd
 *    (it holds topology/nodes/N/{gpu_id,name,properties}).
 *  - dri_root stands for /dev/dri (used only to name the render node in logs).
 *  - exception_info() is optional (NULL on the real kernel, which has no such
 *    channel outside the debugger API). A queue that stops at a packet or an
 *    instruction it cannot run raises no event (kfd-facts §7.2); this hands
 *    out the oldest record of such a stop in the KFD process behind kfd_fd
 *    that has not been taken yet: the KFD queue_id of the queue it stopped and a
 *    human-readable reason (NUL-terminated, truncated to buflen), e.g. the
 *    simulator's "unsupported instruction v_dot2_f32_f16 (encoding 0x...) at pc
 *    0x...". Returns 0, -ENOENT when no record is pending, -EBADF for an fd
 *    that is not a KFD fd of this table. It only adds words to an error
 *    message: nothing above this table depends on it to recover a queue.
 *  - dmabuf_refs() is optional (NULL: cannot tell). For a dma-buf fd the
 *    daemon holds, it returns how many other references to that dma-buf's
 *    file exist — fds in any process, CPU mappings, fds in flight in a
 *    socket, kernel importers — or -EOPNOTSUPP when it cannot tell, -EBADF /
 *    -EINVAL for an fd that is not a dma-buf. 0 means no copy of the dma-buf
 *    is left but the caller's: the memory goes when the caller closes it.
 *    The daemon uses it to keep a freed buffer charged to its owner while
 *    copies of its dma-buf live on (docs/policy.md, "Exported buffers").
 *  - fds_per_bo is how many file descriptors of the daemon's process the
 *    table keeps open for each buffer object while it exists: 0 on the
 *    kernel, whose objects are no files of the process (a GEM object is held
 *    by its KFD handle, a CPU mapping by the mapping itself); 1 on the
 *    simulator, whose buffer objects are memfds it must keep an fd of to
 *    export them again (an mmap cannot be turned back into an fd without
 *    privileges). The daemon counts them in its fd budgets
 *    (docs/policy.md, "File descriptors").
 *  - doorbell_written() is optional (NULL on the real kernel, where the 64-bit
 *    store to the doorbell slice is itself the MMIO write the GPU reacts to).
 *    A simulated engine cannot see a store to memory, so the daemon calls this
 *    right after each doorbell store, naming the KFD fd and the queue_id of
 *    CREATE_QUEUE; the simulator then wakes the engine of that queue, which
 *    still acts only on the value it reads from the doorbell slot (a store
 *    that was not made is not seen). It returns nothing: an engine that is
 *    not told still finds the doorbell within a few milliseconds.
 *  - mmap_resolve() is optional (NULL: the table cannot say). For an mmap of
 *    length bytes of a render-node file fd at offset, it returns, without
 *    mapping anything, a new fd (*ret_fd, O_CLOEXEC, the caller's to close)
 *    and the offset in it (*ret_offset) that map the same memory: what a
 *    process that cannot reach this table maps instead. The kernel: a copy
 *    of fd itself at the same offset (a DRM file maps the objects it was
 *    allowed on for whoever holds it: drm_gem_mmap(), drm_vma_node_is_allowed());
 *    the simulator: the buffer's memfd (sim_mm_mmap_resolve()). A proxy
 *    worker hands the daemon its render file so on a KFD without dma-buf
 *    export (context-kfd-process.c). Errors as mmap()'s.
 */
#pragma once

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct KfdOps {
        const char *name; /* "kfd" or "sim" */
        void *userdata;   /* passed to every operation */
        const char *sysfs_root;
        unsigned fds_per_bo; /* daemon fds each buffer object keeps open (see above) */

        int (*open_kfd)(void *userdata);
        int (*open_render)(void *userdata, unsigned minor);
        int (*ioctl)(void *userdata, int fd, unsigned long request, void *arg);
        int (*mmap)(void *userdata, void *addr, size_t length, int prot, int flags, int fd,
                    uint64_t offset, void **ret_addr);
        int (*munmap)(void *userdata, void *addr, size_t length);
        int (*close)(void *userdata, int fd);
        int (*exception_info)(void *userdata, int kfd_fd, uint32_t *ret_queue_id, char *buf,
                              size_t buflen); /* optional, may be NULL */
        int (*dmabuf_refs)(void *userdata, int dmabuf_fd); /* optional, may be NULL */
        void (*doorbell_written)(void *userdata, int kfd_fd, uint32_t queue_id); /* optional, may be NULL */
        int (*mmap_resolve)(void *userdata, int fd, size_t length, uint64_t offset, int *ret_fd,
                            uint64_t *ret_offset); /* optional, may be NULL */
} KfdOps;

/* ops->dmabuf_refs(), or -EOPNOTSUPP where the table has none. */
static inline int kfd_dmabuf_refs(const KfdOps *ops, int dmabuf_fd) {
        return ops->dmabuf_refs ? ops->dmabuf_refs(ops->userdata, dmabuf_fd) : -EOPNOTSUPP;
}

/* The real kernel (kfd-real.c). Does not open anything. */
extern const KfdOps kfd_ops_real;

static inline int kfd_ioctl(const KfdOps *ops, int fd, unsigned long request, void *arg) {
        return ops->ioctl(ops->userdata, fd, request, arg);
}
