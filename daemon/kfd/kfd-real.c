/* SPDX-License-Identifier: MIT */
/*
 * kfd_ops_real: the kernel-call table backed by the real system calls on
 * /dev/kfd and /dev/dri/renderD<minor> (see kfd-ops.h for the contract). The
 * GPU context calls nothing else to reach the device. Also kfd_probe_real(),
 * which the daemon uses to decide --device=auto.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kfd/kfd-ops.h"
#include "kfd/kfd-real.h"
#include "kfd/kfd-topology.h"
#include "util/macro.h"

#define KFD_DEVICE_PATH "/dev/kfd"
#define KFD_SYSFS_ROOT "/sys/devices/virtual/kfd/kfd"

static int real_open_kfd(void *userdata) {
        /* libhsakmt opens it O_RDWR | O_CLOEXEC; one open per process (kfd-facts §1.2). */
        int fd = open(KFD_DEVICE_PATH, O_RDWR | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int real_open_render(void *userdata, unsigned minor) {
        char path[64];

        snprintf(path, sizeof path, "/dev/dri/renderD%u", minor);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

static int real_ioctl(void *userdata, int fd, unsigned long request, void *arg) {
        /* WAIT_EVENTS returns -ERESTARTSYS -> EINTR to user space when a signal
         * arrives; the kernel has written the remaining timeout back, so
         * reissuing the same request is correct (libhsakmt's kmtIoctl loops
         * the same way on EINTR/EAGAIN). */
        for (;;) {
                int r = ioctl(fd, request, arg);
                if (r >= 0)
                        return r;
                if (errno != EINTR && errno != EAGAIN)
                        return -errno;
        }
}

static int real_mmap(void *userdata, void *addr, size_t length, int prot, int flags, int fd,
                     uint64_t offset, void **ret_addr) {
        void *p = mmap(addr, length, prot, flags, fd, (off_t) offset);
        if (p == MAP_FAILED)
                return -errno;
        *ret_addr = p;
        return 0;
}

/* KfdOps.mmap_resolve (kfd-ops.h): the render file itself, which maps the
 * same objects at the same offsets for whoever holds it. */
static int real_mmap_resolve(void *userdata, int fd, size_t length, uint64_t offset, int *ret_fd,
                             uint64_t *ret_offset) {
        int copy;

        if (length == 0 || offset % 4096 || offset > INT64_MAX)
                return -EINVAL;
        copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0)
                return -errno;
        *ret_fd = copy;
        *ret_offset = offset;
        return 0;
}

static int real_munmap(void *userdata, void *addr, size_t length) {
        return munmap(addr, length) < 0 ? -errno : 0;
}

static int real_close(void *userdata, int fd) {
        return close(fd) < 0 ? -errno : 0;
}

/* The "count:" of a dma-buf's fdinfo, which dma_buf_show_fdinfo()
 * (drivers/dma-buf/dma-buf.c, since Linux 5.3) prints as
 * file_count(dmabuf->file) - 1, leaving out the reference procfs holds while
 * it prints. Every fd of the file in any process, every mapping of it, an fd
 * in flight in a unix socket and every importer's dma_buf_get() hold one. */
int kfd_dmabuf_fdinfo_count(const char *fdinfo, long *ret) {
        const char *p = fdinfo;
        bool is_dmabuf = false, have_count = false;
        long count = 0;

        while (p && *p) {
                if (strncmp(p, "exp_name:", 9) == 0)
                        is_dmabuf = true;
                else if (strncmp(p, "count:", 6) == 0) {
                        char *end;
                        errno = 0;
                        count = strtol(p + 6, &end, 10);
                        if (errno != 0 || end == p + 6 || count < 0 || (*end != '\n' && *end != 0))
                                return -EBADMSG;
                        have_count = true;
                }
                p = strchr(p, '\n');
                if (p)
                        p++;
        }
        if (!is_dmabuf)
                return -EINVAL;
        if (!have_count)
                return -EOPNOTSUPP;
        *ret = count;
        return 0;
}

static int real_dmabuf_refs(void *userdata, int fd) {
        char path[64], buf[1024];
        _cleanup_close_ int f = -EBADF;
        ssize_t n;
        long count;
        int r;

        snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
        f = open(path, O_RDONLY | O_CLOEXEC);
        if (f < 0)
                return errno == ENOENT ? -EBADF : -errno;
        n = read(f, buf, sizeof buf - 1);
        if (n < 0)
                return -errno;
        buf[n] = 0;
        r = kfd_dmabuf_fdinfo_count(buf, &count);
        if (r < 0)
                return r;
        /* Our own fd is one of them. */
        return count > 0 ? (int) MIN(count - 1, (long) INT32_MAX) : 0;
}

const KfdOps kfd_ops_real = {
        .name = "kfd",
        .userdata = NULL,
        .sysfs_root = KFD_SYSFS_ROOT,
        .open_kfd = real_open_kfd,
        .open_render = real_open_render,
        .ioctl = real_ioctl,
        .mmap = real_mmap,
        .munmap = real_munmap,
        .close = real_close,
        .dmabuf_refs = real_dmabuf_refs,
        .mmap_resolve = real_mmap_resolve,
};

int kfd_probe_real(char *reason, size_t n) {
        int fd = real_open_kfd(NULL);
        if (fd < 0) {
                const char *why = fd == -ENOENT   ? "no amdgpu KFD on this machine"
                                  : fd == -EACCES || fd == -EPERM
                                          ? "no permission: the daemon needs access to /dev/kfd"
                                          : "cannot open the KFD device";
                snprintf(reason, n, "%s: %s (%s)", KFD_DEVICE_PATH, strerror(-fd), why);
                return fd;
        }
        close(fd);

        KfdTopology *t = calloc(1, sizeof *t);
        if (!t) {
                snprintf(reason, n, "%s: out of memory", KFD_DEVICE_PATH);
                return -ENOMEM;
        }
        int r = kfd_topology_read(KFD_SYSFS_ROOT, t);
        free(t);
        if (r < 0) {
                snprintf(reason, n, "%s/topology: %s (KFD topology unreadable)", KFD_SYSFS_ROOT,
                         strerror(-r));
                return r;
        }
        if (r == 0) {
                snprintf(reason, n, "%s/topology: no GPU node (KFD found no usable GPU)", KFD_SYSFS_ROOT);
                return -ENODEV;
        }
        snprintf(reason, n, "%s: usable, %d GPU node(s)", KFD_DEVICE_PATH, r);
        return 0;
}

static atomic_uint fault_signals;

static void on_sigsegv(int sig, siginfo_t *si, void *ucontext) {
        if (si && si->si_code == SI_USER) {
                /* KFD's notification of a GPU fault (or a kill -SEGV): the
                 * MEMORY event carries the details; nothing to do here. */
                atomic_fetch_add(&fault_signals, 1);
                return;
        }
        /* A real fault of ours: back to the default action; returning
         * re-executes the faulting instruction, which now kills us. */
        signal(SIGSEGV, SIG_DFL);
}

int kfd_fault_signal_install(void) {
        struct sigaction sa = {
                .sa_sigaction = on_sigsegv,
                .sa_flags = SA_SIGINFO | SA_RESTART,
        };
        sigemptyset(&sa.sa_mask);
        return sigaction(SIGSEGV, &sa, NULL) < 0 ? -errno : 0;
}

unsigned kfd_fault_signal_count(void) {
        return atomic_load(&fault_signals);
}
