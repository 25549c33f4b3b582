/* SPDX-License-Identifier: MIT */
/*
 * libkfdbroker-kfd.so's libc entry points (docs/rocm.md): each asks the core
 * (interposer.c) whether its path or fd is one of the broker's — /dev/kfd,
 * the render node the topology names, the KFD sysfs tree and
 * /sys/module/amdgpu — and passes everything else to the next definition
 * (glibc's). The set is glibc 2.36's (Debian 12), checked with `nm -D`:
 * open/open64/__open/__open64, openat/openat64, the _FORTIFY_SOURCE
 * variants __open_2/__open64_2/__openat_2/__openat64_2, fopen/fopen64 and
 * opendir (stdio and dirent open files inside libc, past an interposed open),
 * stat/lstat/fstat/fstatat and their 64 names (GLIBC_2.33) and the older
 * __xstat family, statx, access/faccessat/eaccess/euidaccess, close,
 * close_range, dup/dup2/dup3, fcntl/fcntl64/__fcntl (F_DUPFD*), ioctl,
 * mmap/mmap64. munmap needs nothing: a buffer's mapping is an ordinary
 * mapping of the daemon's memory, and a later MAP_FIXED replaces it as the
 * kernel would.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <dirent.h>
#include <sys/sysmacros.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "interposer.h"

#define EXPORT __attribute__((visibility("default")))

#define REAL(name) real_##name
#define DECLARE_REAL(ret, name, ...)                                   \
        static ret (*real_##name)(__VA_ARGS__);                        \
        static ret (*get_##name(void))(__VA_ARGS__) {                  \
                if (!real_##name)                                      \
                        real_##name = dlsym(RTLD_NEXT, #name);         \
                return real_##name;                                    \
        }

DECLARE_REAL(int, openat, int, const char *, int, ...)
DECLARE_REAL(FILE *, fopen, const char *, const char *)
DECLARE_REAL(DIR *, opendir, const char *)
DECLARE_REAL(int, stat, const char *, struct stat *)
DECLARE_REAL(int, lstat, const char *, struct stat *)
DECLARE_REAL(int, fstat, int, struct stat *)
DECLARE_REAL(int, fstatat, int, const char *, struct stat *, int)
DECLARE_REAL(int, __xstat, int, const char *, struct stat *)
DECLARE_REAL(int, __lxstat, int, const char *, struct stat *)
DECLARE_REAL(int, __fxstat, int, int, struct stat *)
DECLARE_REAL(int, __fxstatat, int, int, const char *, struct stat *, int)
DECLARE_REAL(int, statx, int, const char *, int, unsigned, struct statx *)
DECLARE_REAL(int, access, const char *, int)
DECLARE_REAL(int, faccessat, int, const char *, int, int)
DECLARE_REAL(int, eaccess, const char *, int)
DECLARE_REAL(int, close, int)
DECLARE_REAL(int, close_range, unsigned, unsigned, int)
DECLARE_REAL(int, dup, int)
DECLARE_REAL(int, dup2, int, int)
DECLARE_REAL(int, dup3, int, int, int)
DECLARE_REAL(int, fcntl, int, int, ...)
DECLARE_REAL(int, ioctl, int, unsigned long, ...)
DECLARE_REAL(void *, mmap, void *, size_t, int, int, int, off_t)

static int fail(int r) {
        errno = -r;
        return -1;
}

__attribute__((constructor)) static void interposer_init(void) {
        pthread_atfork(NULL, NULL, kfdi_after_fork_child);
        kfdi_init();
}

__attribute__((destructor)) static void interposer_fini(void) {
        kfdi_fini();
}

/* ---- open ---- */

/*
 * An open of path: ours (an fd, or -1 with errno) with *ret_handled, else
 * path_out is the path to open for real (a topology path redirected).
 */
static int open_ours(const char *path, int flags, bool *ret_handled, char *buf, size_t size, const char **path_out) {
        unsigned minor = 0;
        int kind = kfdi_path(path, &minor, buf, size);

        *path_out = path;
        *ret_handled = false;
        if (kind < 0) {
                *ret_handled = true;
                return fail(kind);
        }
        if (kind == KFDI_PATH_TOPOLOGY) {
                /* sysfs is read-only to a process like this one. */
                if ((flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC))) {
                        *ret_handled = true;
                        return fail(-EACCES);
                }
                *path_out = buf;
                return 0;
        }
        if (kind == KFDI_PATH_KFD || kind == KFDI_PATH_RENDER) {
                int r = kfdi_open((KfdiPathKind) kind, minor, flags);
                *ret_handled = true;
                return r < 0 ? fail(r) : r;
        }
        return 0;
}

static mode_t open_mode(int flags, va_list ap) {
        return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t) va_arg(ap, int) : 0;
}

static int do_openat(int dirfd, const char *path, int flags, mode_t mode) {
        char buf[PATH_MAX];
        const char *p;
        bool handled;
        int r = open_ours(path, flags, &handled, buf, sizeof buf, &p);

        if (handled)
                return r;
        return get_openat()(dirfd, p, flags, mode);
}

EXPORT int open(const char *path, int flags, ...) {
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return do_openat(AT_FDCWD, path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...) {
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return do_openat(AT_FDCWD, path, flags | O_LARGEFILE, mode);
}

EXPORT int __open(const char *path, int flags, ...) {
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return do_openat(AT_FDCWD, path, flags, mode);
}

EXPORT int __open64(const char *path, int flags, ...) {
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return do_openat(AT_FDCWD, path, flags | O_LARGEFILE, mode);
}

EXPORT int openat(int dirfd, const char *path, int flags, ...) {
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return do_openat(dirfd, path, flags, mode);
}

EXPORT int openat64(int dirfd, const char *path, int flags, ...) {
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return do_openat(dirfd, path, flags | O_LARGEFILE, mode);
}

/* _FORTIFY_SOURCE's checked opens take no mode (O_CREAT is refused at build time). */
EXPORT int __open_2(const char *path, int flags) {
        return do_openat(AT_FDCWD, path, flags, 0);
}

EXPORT int __open64_2(const char *path, int flags) {
        return do_openat(AT_FDCWD, path, flags | O_LARGEFILE, 0);
}

EXPORT int __openat_2(int dirfd, const char *path, int flags) {
        return do_openat(dirfd, path, flags, 0);
}

EXPORT int __openat64_2(int dirfd, const char *path, int flags) {
        return do_openat(dirfd, path, flags | O_LARGEFILE, 0);
}

/* ---- stdio and dirent ---- */

static FILE *do_fopen(const char *path, const char *mode) {
        char buf[PATH_MAX];
        unsigned minor = 0;
        int kind = kfdi_path(path, &minor, buf, sizeof buf);

        if (kind < 0) {
                errno = -kind;
                return NULL;
        }
        if (kind == KFDI_PATH_TOPOLOGY) {
                if (mode[0] != 'r' || strchr(mode, '+')) {
                        errno = EACCES;
                        return NULL;
                }
                return get_fopen()(buf, mode);
        }
        if (kind == KFDI_PATH_KFD || kind == KFDI_PATH_RENDER) {
                int fd = kfdi_open((KfdiPathKind) kind, minor, O_RDWR | (strchr(mode, 'e') ? O_CLOEXEC : 0));
                FILE *f;
                if (fd < 0) {
                        errno = -fd;
                        return NULL;
                }
                f = fdopen(fd, mode);
                if (!f) {
                        int e = errno;
                        close(fd);
                        errno = e;
                }
                return f;
        }
        return get_fopen()(path, mode);
}

EXPORT FILE *fopen(const char *path, const char *mode) {
        return do_fopen(path, mode);
}

EXPORT FILE *fopen64(const char *path, const char *mode) {
        return do_fopen(path, mode);
}

EXPORT DIR *opendir(const char *path) {
        char buf[PATH_MAX];
        int kind = kfdi_path(path, NULL, buf, sizeof buf);

        if (kind < 0) {
                errno = -kind;
                return NULL;
        }
        if (kind == KFDI_PATH_KFD || kind == KFDI_PATH_RENDER) {
                errno = ENOTDIR;
                return NULL;
        }
        return get_opendir()(kind == KFDI_PATH_TOPOLOGY ? buf : path);
}

/* ---- stat and access ---- */

/* A stat of path: 1 = answered (ret set), 0 = not ours (path_out to use). */
static int stat_ours(const char *path, struct stat *st, char *buf, size_t size, const char **path_out, int *ret) {
        unsigned minor = 0;
        int kind = kfdi_path(path, &minor, buf, size);

        *path_out = path;
        if (kind < 0) {
                *ret = fail(kind);
                return 1;
        }
        if (kind == KFDI_PATH_KFD || kind == KFDI_PATH_RENDER) {
                kfdi_node_stat((KfdiPathKind) kind, minor, st);
                *ret = 0;
                return 1;
        }
        if (kind == KFDI_PATH_TOPOLOGY)
                *path_out = buf;
        return 0;
}

#define STAT_BODY(call_real)                                                \
        char buf[PATH_MAX];                                                 \
        const char *p;                                                      \
        int r;                                                              \
        if (stat_ours(path, st, buf, sizeof buf, &p, &r))                   \
                return r;                                                   \
        return call_real;

EXPORT int stat(const char *path, struct stat *st) {
        STAT_BODY(get_stat()(p, st))
}

EXPORT int stat64(const char *path, struct stat64 *st64) {
        struct stat *st = (struct stat *) st64;
        STAT_BODY(get_stat()(p, st))
}

EXPORT int lstat(const char *path, struct stat *st) {
        STAT_BODY(get_lstat()(p, st))
}

EXPORT int lstat64(const char *path, struct stat64 *st64) {
        struct stat *st = (struct stat *) st64;
        STAT_BODY(get_lstat()(p, st))
}

EXPORT int __xstat(int ver, const char *path, struct stat *st) {
        STAT_BODY(get___xstat()(ver, p, st))
}

EXPORT int __xstat64(int ver, const char *path, struct stat64 *st64) {
        struct stat *st = (struct stat *) st64;
        STAT_BODY(get___xstat()(ver, p, st))
}

EXPORT int __lxstat(int ver, const char *path, struct stat *st) {
        STAT_BODY(get___lxstat()(ver, p, st))
}

EXPORT int __lxstat64(int ver, const char *path, struct stat64 *st64) {
        struct stat *st = (struct stat *) st64;
        STAT_BODY(get___lxstat()(ver, p, st))
}

EXPORT int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
        if ((flags & AT_EMPTY_PATH) && !path[0] && kfdi_is_fake(dirfd))
                return kfdi_fd_stat(dirfd, st) < 0 ? fail(-EBADF) : 0;
        STAT_BODY(get_fstatat()(dirfd, p, st, flags))
}

EXPORT int fstatat64(int dirfd, const char *path, struct stat64 *st64, int flags) {
        return fstatat(dirfd, path, (struct stat *) st64, flags);
}

EXPORT int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags) {
        STAT_BODY(get___fxstatat()(ver, dirfd, p, st, flags))
}

EXPORT int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st64, int flags) {
        struct stat *st = (struct stat *) st64;
        STAT_BODY(get___fxstatat()(ver, dirfd, p, st, flags))
}

EXPORT int fstat(int fd, struct stat *st) {
        if (kfdi_is_fake(fd))
                return kfdi_fd_stat(fd, st) < 0 ? fail(-EBADF) : 0;
        return get_fstat()(fd, st);
}

EXPORT int fstat64(int fd, struct stat64 *st) {
        return fstat(fd, (struct stat *) st);
}

EXPORT int __fxstat(int ver, int fd, struct stat *st) {
        if (kfdi_is_fake(fd))
                return kfdi_fd_stat(fd, st) < 0 ? fail(-EBADF) : 0;
        return get___fxstat()(ver, fd, st);
}

EXPORT int __fxstat64(int ver, int fd, struct stat64 *st) {
        return __fxstat(ver, fd, (struct stat *) st);
}

static void statx_from_stat(const struct stat *st, struct statx *stx) {
        memset(stx, 0, sizeof *stx);
        stx->stx_mask = STATX_BASIC_STATS;
        stx->stx_mode = (uint16_t) st->st_mode;
        stx->stx_nlink = (uint32_t) st->st_nlink;
        stx->stx_blksize = (uint32_t) st->st_blksize;
        stx->stx_rdev_major = major(st->st_rdev);
        stx->stx_rdev_minor = minor(st->st_rdev);
}

EXPORT int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx) {
        char buf[PATH_MAX];
        const char *p = path;
        struct stat st;
        unsigned minor = 0;
        int kind;

        if ((flags & AT_EMPTY_PATH) && !path[0] && kfdi_is_fake(dirfd)) {
                if (kfdi_fd_stat(dirfd, &st) < 0)
                        return fail(-EBADF);
                statx_from_stat(&st, stx);
                return 0;
        }
        kind = kfdi_path(path, &minor, buf, sizeof buf);
        if (kind < 0)
                return fail(kind);
        if (kind == KFDI_PATH_KFD || kind == KFDI_PATH_RENDER) {
                kfdi_node_stat((KfdiPathKind) kind, minor, &st);
                statx_from_stat(&st, stx);
                return 0;
        }
        if (kind == KFDI_PATH_TOPOLOGY)
                p = buf;
        return get_statx()(dirfd, p, flags, mask, stx);
}

/* access on a fake node: read and write for everyone, as the nodes are 0666. */
static int access_ours(const char *path, int amode, char *buf, size_t size, const char **path_out, int *ret) {
        unsigned minor = 0;
        int kind = kfdi_path(path, &minor, buf, size);

        *path_out = path;
        if (kind < 0) {
                *ret = fail(kind);
                return 1;
        }
        if (kind == KFDI_PATH_KFD || kind == KFDI_PATH_RENDER) {
                *ret = (amode & X_OK) ? fail(-EACCES) : 0;
                return 1;
        }
        if (kind == KFDI_PATH_TOPOLOGY) {
                if (amode & W_OK) {
                        *ret = fail(-EACCES);
                        return 1;
                }
                *path_out = buf;
        }
        return 0;
}

#define ACCESS_BODY(call_real)                                              \
        char buf[PATH_MAX];                                                 \
        const char *p;                                                      \
        int r;                                                              \
        if (access_ours(path, amode, buf, sizeof buf, &p, &r))              \
                return r;                                                   \
        return call_real;

EXPORT int access(const char *path, int amode) {
        ACCESS_BODY(get_access()(p, amode))
}

EXPORT int eaccess(const char *path, int amode) {
        ACCESS_BODY(get_eaccess()(p, amode))
}

EXPORT int euidaccess(const char *path, int amode) {
        ACCESS_BODY(get_eaccess()(p, amode))
}

EXPORT int faccessat(int dirfd, const char *path, int amode, int flags) {
        ACCESS_BODY(get_faccessat()(dirfd, p, amode, flags))
}

/* ---- fds ---- */

EXPORT int close(int fd) {
        /* Out of the table first: once the number is closed the kernel may
         * give it to another thread's open at once. Whatever close says, the
         * number is gone (close(2): never retry). */
        if (kfdi_is_fake(fd))
                kfdi_forget(fd);
        return get_close()(fd);
}

EXPORT int close_range(unsigned first, unsigned last, int flags) {
        int r = get_close_range()(first, last, flags);

        if (r == 0 && !(flags & CLOSE_RANGE_CLOEXEC))
                kfdi_forget_range(first, last);
        return r;
}

static int dup_done(int fd, int newfd) {
        int r;

        if (newfd < 0 || !kfdi_is_fake(fd))
                return newfd;
        r = kfdi_dup_to(fd, newfd);
        if (r < 0) {
                get_close()(newfd);
                return fail(r);
        }
        return newfd;
}

EXPORT int dup(int fd) {
        return dup_done(fd, get_dup()(fd));
}

EXPORT int dup2(int fd, int newfd) {
        int r = get_dup2()(fd, newfd);

        if (r >= 0 && fd != newfd && kfdi_is_fake(newfd) && !kfdi_is_fake(fd))
                kfdi_forget(newfd);
        return dup_done(fd, r);
}

EXPORT int dup3(int fd, int newfd, int flags) {
        int r = get_dup3()(fd, newfd, flags);

        if (r >= 0 && kfdi_is_fake(newfd) && !kfdi_is_fake(fd))
                kfdi_forget(newfd);
        return dup_done(fd, r);
}

static int do_fcntl(int fd, int cmd, va_list ap) {
        unsigned long arg = va_arg(ap, unsigned long);
        int r = get_fcntl()(fd, cmd, arg);

        if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
                return dup_done(fd, r);
        return r;
}

EXPORT int fcntl(int fd, int cmd, ...) {
        va_list ap;
        va_start(ap, cmd);
        int r = do_fcntl(fd, cmd, ap);
        va_end(ap);
        return r;
}

EXPORT int fcntl64(int fd, int cmd, ...) {
        va_list ap;
        va_start(ap, cmd);
        int r = do_fcntl(fd, cmd, ap);
        va_end(ap);
        return r;
}

EXPORT int __fcntl(int fd, int cmd, ...) {
        va_list ap;
        va_start(ap, cmd);
        int r = do_fcntl(fd, cmd, ap);
        va_end(ap);
        return r;
}

EXPORT int ioctl(int fd, unsigned long request, ...) {
        va_list ap;
        void *arg;
        int r;

        va_start(ap, request);
        arg = va_arg(ap, void *);
        va_end(ap);
        if (!kfdi_is_fake(fd))
                return get_ioctl()(fd, request, arg);
        r = kfdi_ioctl(fd, request, arg);
        return r < 0 ? fail(r) : r;
}

/* ---- mmap ---- */

static void *do_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
        void *m;
        int r;

        if (!(flags & MAP_ANONYMOUS) && kfdi_is_fake(fd)) {
                r = kfdi_mmap(addr, length, prot, flags, fd, offset, &m);
                if (r < 0) {
                        errno = -r;
                        return MAP_FAILED;
                }
                return m;
        }
        return get_mmap()(addr, length, prot, flags, fd, offset);
}

EXPORT void *mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
        return do_mmap(addr, length, prot, flags, fd, offset);
}

EXPORT void *mmap64(void *addr, size_t length, int prot, int flags, int fd, off_t offset) {
        return do_mmap(addr, length, prot, flags, fd, offset);
}
