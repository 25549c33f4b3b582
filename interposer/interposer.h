/* SPDX-License-Identifier: MIT */
/*
 * The core of libkfdbroker-kfd.so (docs/rocm.md): one KFD process per
 * process, made of the broker. The libc entry points (kfd-interposer.c) ask
 * it whether a path or fd is one of its own and, if so, let it answer. It
 * owns:
 *  - the attachment: a kfdbroker session, its OpenKfd relay socket, the
 *    sim-remote KfdOps table over it (daemon/sim/sim-remote.h: a channel per
 *    thread, so a WAIT_EVENTS asleep holds up no other call) and a private
 *    directory holding the topology the daemon sent, made at the first use
 *    of a KFD path and removed at exit;
 *  - the fake files: /dev/kfd (one file for the whole process: every open is
 *    a new fd of it, as the kernel gives one KFD process per mm) and the
 *    render node (a file per open). The fds handed out are real fds — dups of
 *    the file the daemon sent — so the kernel never gives their numbers to
 *    anything else; a table maps each to its file, counted by references;
 *  - fork: a child's calls on an inherited fake fd fail with -EBADF (what the
 *    thunk takes for "a forked child"), it never touches the parent's session
 *    or channels, and its own open of /dev/kfd gets a KFD process of its own.
 * Thread-safe: one lock over the table; calls into the daemon run without it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#define KFDI_SYSFS_KFD "/sys/devices/virtual/kfd/kfd"
#define KFDI_SYSFS_CLASS_KFD "/sys/class/kfd/kfd"
#define KFDI_SYSFS_AMDGPU "/sys/module/amdgpu"
#define KFDI_SYSFS_DEV_CHAR "/sys/dev/char"
/* The daemon's client address window (daemon/gpu/gpu-va-window.c). */
#define KFDI_VA_WINDOW_BASE 0x120000000000ULL
#define KFDI_VA_WINDOW_END 0x1e0000000000ULL

typedef enum KfdiPathKind {
        KFDI_PATH_OTHER,     /* not ours */
        KFDI_PATH_KFD,       /* /dev/kfd */
        KFDI_PATH_RENDER,    /* /dev/dri/renderD<minor> */
        KFDI_PATH_TOPOLOGY,  /* under the KFD sysfs, /sys/module/amdgpu or /sys/dev/char/226:MINOR */
} KfdiPathKind;

/*
 * What path names, and for TOPOLOGY the path in the private directory it is
 * redirected to (written to buf, size bytes; attaching first if needed).
 * Only absolute paths are classified. Returns the kind, or a negative errno
 * when a path of ours cannot be served (no daemon: -ENOENT, as on a host
 * without amdgpu; a name too long: -ENAMETOOLONG).
 */
int kfdi_path(const char *path, unsigned *ret_minor, char *buf, size_t size);
/* The kind alone, attaching nothing. */
KfdiPathKind kfdi_path_kind(const char *path, unsigned *ret_minor);

/* Opens a fake node (kind KFD or RENDER): a new fd, or a negative errno
 * (the daemon's refusal: -EACCES, -EBUSY, -EOPNOTSUPP, with one line on
 * stderr naming why). flags: O_CLOEXEC is honoured. */
int kfdi_open(KfdiPathKind kind, unsigned minor, int flags);
/* Whether fd is a fake fd of this process. */
bool kfdi_is_fake(int fd);
/* A synthetic stat of a fake node (character device). */
void kfdi_node_stat(KfdiPathKind kind, unsigned minor, struct stat *st);
int kfdi_fd_stat(int fd, struct stat *st);
/* fd is being closed / was duplicated to newfd by the real call. */
void kfdi_forget(int fd);
void kfdi_forget_range(unsigned first, unsigned last);
int kfdi_dup_to(int fd, int newfd);
/*
 * The ioctl on a fake fd: the argument is copied in and out by the size its
 * request word encodes (_IOC_SIZE), fds named in it (ACQUIRE_VM's drm_fd)
 * translated, and the call carried out by the daemon. Returns 0/positive
 * or a negative errno (-EBADF in a forked child, -EFAULT for an argument
 * that is not readable memory).
 */
int kfdi_ioctl(int fd, unsigned long request, void *arg);
/* mmap of a fake fd: the daemon's memory mapped at addr with flags, then
 * MADV_DONTFORK. Returns 0 or a negative errno. */
int kfdi_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset, void **ret);

/* Test hooks: attach to a relay socket and topology the caller made (the
 * harness's in-process simulated GPU), and end everything. */
int kfdi_attach_relay(int relay_fd, const char *topology_dir, unsigned render_minor);
void kfdi_reset(void);
/* In a forked child (pthread_atfork): the parent's files and attachment become
 * the parent's; the next open attaches anew. */
void kfdi_after_fork_child(void);
/* Constructor work: the VA window reservation, HSA_USERPTR_FOR_PAGED_MEM. */
void kfdi_init(void);
void kfdi_fini(void);
