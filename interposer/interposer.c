/* SPDX-License-Identifier: MIT */
/*
 * The core of libkfdbroker-kfd.so: the process's KFD attachment and its fake
 * files (interposer.h). Calls that would reach the libc entry points this
 * library replaces (close, fcntl, madvise) are made as raw system calls, so
 * that the core never re-enters itself through them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include <linux/kfd_ioctl.h>

#include "config.h"
#include "interposer.h"
#include "kfdbroker.h"
#include "sim/sim-remote.h"

/* The render node's character major (include/drm/drm.h DRM_MAJOR); libdrm
 * checks it on the render fd. /dev/kfd's major is dynamic on a real host. */
#define DRM_MAJOR 226u
#define KFD_FAKE_MAJOR 511u
/* Fake fds the table holds at once. */
#define KFDI_MAX_FDS 1024u
/* AQL queues remembered for a lost connection (the relay runs 64). */
#define KFDI_MAX_QUEUES 64u
/* GPUs a KFD process shows at most (the daemon's SESSION_MAX_GPUS). */
#define KFDI_MAX_GPUS 8u
/* ROCr's amd_queue_t (amd_hsa_queue.h): read_dispatch_id, queue_inactive_signal;
 * amd_signal_t's value. */
#define AMD_QUEUE_READ_DISPATCH_ID 0x80u
#define AMD_QUEUE_INACTIVE_SIGNAL 0xC0u
#define AMD_SIGNAL_VALUE 8u
/* What the CP writes to queue_inactive_signal for a trap, which ROCr reports
 * as HSA_STATUS_ERROR_EXCEPTION (amd_aql_queue.cpp DynamicScratchHandler). */
#define QUEUE_ERROR_EXCEPTION 0x80000000ull

typedef struct KfdiFile {
        int private_fd;          /* the fd the KfdOps table knows; never handed out */
        KfdiPathKind kind;
        unsigned minor;
        unsigned refs;           /* fake fds naming it, plus the process's own for /dev/kfd */
        unsigned generation;     /* Kfdi.generation it was opened in: older ones are a parent's */
} KfdiFile;

typedef struct KfdiFd {
        int fd;
        KfdiFile *file;
} KfdiFd;

typedef struct Kfdi {
        pthread_mutex_t attach_lock;   /* attaching; never taken under table_lock */
        pthread_mutex_t table_lock;    /* fds and files */
        bool attached;
        unsigned generation;           /* one more in each forked child (kfdi_after_fork_child) */
        pid_t owner;
        int attach_error;              /* a failed attachment's errno, kept: no retry storm */
        kfdb_session *session;
        const KfdOps *ops;
        /* The render nodes of the GPUs the process sees (the topology's
         * drm_render_minor of each), the daemon's GPU's first. */
        unsigned render_minors[KFDI_MAX_GPUS];
        unsigned n_render_minors;
        char dir[PATH_MAX];            /* the private topology directory, "" before */
        KfdiFile *kfd;                 /* the process's one /dev/kfd file */
        KfdiFd fds[KFDI_MAX_FDS];
        unsigned n_fds;
        /* The process's AQL queues (their amd_queue_t), for when the daemon
         * goes (watch_relay()). Guarded by table_lock. */
        struct {
                uint32_t id;
                uint64_t amd_queue;
        } queues[KFDI_MAX_QUEUES];
        unsigned n_queues;
        bool exiting;                  /* kfdi_fini(): a hang-up now is ours */
} Kfdi;

static Kfdi kfdi = {
        .attach_lock = PTHREAD_MUTEX_INITIALIZER,
        .table_lock = PTHREAD_MUTEX_INITIALIZER,
};

static int raw_close(int fd) {
        return (int) syscall(SYS_close, fd);
}

static int raw_dupfd(int fd, bool cloexec) {
        int r = (int) syscall(SYS_fcntl, fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, 3);
        return r < 0 ? -errno : r;
}

/* ---- Paths ---- */

/* rest of path after prefix if path is prefix itself or below it. */
static const char *path_under(const char *path, const char *prefix) {
        size_t n = strlen(prefix);

        if (strncmp(path, prefix, n) != 0 || (path[n] != 0 && path[n] != '/'))
                return NULL;
        return path + n;
}

/* A path under /sys/dev/char/226:MINOR (a DRM device's sysfs, which
 * libdrm's drmGetNodeTypeFromFd() checks for a render fd: "device/drm"
 * must exist): its minor and the rest of the path after it. */
static bool drm_char_minor(const char *path, unsigned *ret_minor, const char **ret_rest) {
        const char *p = path;
        unsigned long minor;
        char *end;

        if (strncmp(p, KFDI_SYSFS_DEV_CHAR "/226:", strlen(KFDI_SYSFS_DEV_CHAR "/226:")) != 0)
                return false;
        p += strlen(KFDI_SYSFS_DEV_CHAR "/226:");
        if (*p < '0' || *p > '9')
                return false;
        errno = 0;
        minor = strtoul(p, &end, 10);
        if (errno != 0 || minor >= 1u << 20 || (*end != 0 && *end != '/'))
                return false;
        if (ret_minor)
                *ret_minor = (unsigned) minor;
        if (ret_rest)
                *ret_rest = end;
        return true;
}

KfdiPathKind kfdi_path_kind(const char *path, unsigned *ret_minor) {
        const char *rest;
        char *end;
        unsigned long minor;

        if (!path || path[0] != '/')
                return KFDI_PATH_OTHER;
        if (strcmp(path, "/dev/kfd") == 0)
                return KFDI_PATH_KFD;
        if (strncmp(path, "/dev/dri/renderD", 16) == 0 && path[16] >= '0' && path[16] <= '9') {
                errno = 0;
                minor = strtoul(path + 16, &end, 10);
                if (*end == 0 && errno == 0 && minor < 1u << 20) {
                        if (ret_minor)
                                *ret_minor = (unsigned) minor;
                        return KFDI_PATH_RENDER;
                }
                return KFDI_PATH_OTHER;
        }
        if ((rest = path_under(path, KFDI_SYSFS_KFD)) || (rest = path_under(path, KFDI_SYSFS_CLASS_KFD)) ||
            (rest = path_under(path, KFDI_SYSFS_AMDGPU)) || drm_char_minor(path, NULL, NULL))
                return KFDI_PATH_TOPOLOGY;
        return KFDI_PATH_OTHER;
}

/* ---- The attachment ---- */

static int remove_tree_at(int parent, const char *name) {
        int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d;
        struct dirent *de;

        if (fd < 0)
                return unlinkat(parent, name, 0) < 0 ? -errno : 0;
        d = fdopendir(fd);
        if (!d) {
                raw_close(fd);
                return -errno;
        }
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        (void) remove_tree_at(dirfd(d), de->d_name);
        closedir(d);
        return unlinkat(parent, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

static void remove_dir(void) {
        if (kfdi.dir[0] && kfdi.owner == getpid())
                (void) remove_tree_at(AT_FDCWD, kfdi.dir);
        kfdi.dir[0] = 0;
}

/* The line after line's, or NULL. */
static char *next_line(char *line) {
        char *nl = strchr(line, '\n');

        return nl && nl[1] ? nl + 1 : NULL;
}

/* The render nodes the KFD process's topology under dir names (each GPU
 * node's drm_render_minor), first the daemon's GPU's (first): the process
 * has a render file of each (docs/rocm.md "Several GPUs"). */
static unsigned topology_render_minors(const char *dir, unsigned first, unsigned *minors) {
        unsigned n = 0;

        minors[n++] = first;
        for (unsigned node = 0; node < 64 && n < KFDI_MAX_GPUS; node++) {
                char path[PATH_MAX + 64], buf[4096];
                ssize_t k;
                int fd;

                snprintf(path, sizeof path, "%s/kfd/topology/nodes/%u/properties", dir, node);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        break;
                k = read(fd, buf, sizeof buf - 1);
                raw_close(fd);
                if (k <= 0)
                        continue;
                buf[k] = 0;
                for (char *line = buf; line && n < KFDI_MAX_GPUS; line = next_line(line)) {
                        unsigned long m;
                        bool known = false;

                        if (sscanf(line, "drm_render_minor %lu", &m) != 1 || m == 0 || m >= 1u << 20)
                                continue;
                        for (unsigned i = 0; i < n; i++)
                                known = known || minors[i] == m;
                        if (!known)
                                minors[n++] = (unsigned) m;
                }
        }
        return n;
}

/* Whether renderD<minor> is one of the process's (table lock, or attached). */
static bool render_minor_ours(unsigned minor) {
        for (unsigned i = 0; i < kfdi.n_render_minors; i++)
                if (kfdi.render_minors[i] == minor)
                        return true;
        return false;
}

/* What /sys/module/amdgpu holds for a reader that checks the driver is
 * there, and what /sys/dev/char/226:MINOR holds for libdrm (drm_char_minor())
 * for each of minors: device/drm/renderDMINOR in drm-char-MINOR, as the
 * kernel's device directory lists its DRM nodes. */
static int write_module_dir(int dir_fd, const unsigned *minors, unsigned n) {
        int fd;

        for (unsigned i = 0; i < n; i++) {
                char top[32], device[48], drm[64], render[96];

                snprintf(top, sizeof top, "drm-char-%u", minors[i]);
                snprintf(device, sizeof device, "%s/device", top);
                snprintf(drm, sizeof drm, "%s/drm", device);
                snprintf(render, sizeof render, "%s/renderD%u", drm, minors[i]);
                if (mkdirat(dir_fd, top, 0755) < 0 || mkdirat(dir_fd, device, 0755) < 0 ||
                    mkdirat(dir_fd, drm, 0755) < 0 || mkdirat(dir_fd, render, 0755) < 0)
                        return -errno;
        }
        if (mkdirat(dir_fd, "amdgpu", 0755) < 0)
                return -errno;
        fd = openat(dir_fd, "amdgpu/initstate", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (fd < 0)
                return -errno;
        if (write(fd, "live\n", 5) != 5) {
                raw_close(fd);
                return -EIO;
        }
        raw_close(fd);
        return 0;
}

static int make_dir(char *ret, size_t size) {
        const char *base = secure_getenv("XDG_RUNTIME_DIR");

        if (!base || base[0] != '/' || access(base, W_OK) < 0)
                base = "/tmp";
        if ((size_t) snprintf(ret, size, "%s/kfdbroker-kfd-XXXXXX", base) >= size)
                return -ENAMETOOLONG;
        if (!mkdtemp(ret))
                return -errno;
        return 0;
}

/*
 * The daemon went (a restart, a crash, the session ended by an
 * administrator) while the process has queues: what was on them will never
 * complete, and a ROCr thread spinning on a signal with interrupts off would
 * spin for ever. Each queue gets the error the CP reports for a trap in its
 * queue_inactive_signal, which ROCr's handler turns into the program's queue
 * error (HIP aborts with it), as when the GPU stops a queue.
 */
static void queues_fail(void) {
        bool told = false;

        pthread_mutex_lock(&kfdi.table_lock);
        for (unsigned i = 0; i < kfdi.n_queues; i++) {
                uint64_t signal = *(volatile uint64_t *) (uintptr_t) (kfdi.queues[i].amd_queue + AMD_QUEUE_INACTIVE_SIGNAL);
                uint64_t zero = 0;
                if (!signal || signal % 8)
                        continue;
                if (!told)
                        fprintf(stderr, "kfdbroker: the connection to kfdbrokerd was lost; this program's GPU queues "
                                        "are stopped\n");
                told = true;
                (void) __atomic_compare_exchange_n((uint64_t *) (uintptr_t) (signal + AMD_SIGNAL_VALUE), &zero,
                                                   QUEUE_ERROR_EXCEPTION, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&kfdi.table_lock);
}

static void *watch_relay(void *userdata) {
        int fd = (int) (intptr_t) userdata;
        struct pollfd p = { .fd = fd, .events = POLLRDHUP };
        pid_t owner = getpid();

        while (poll(&p, 1, -1) < 0 && errno == EINTR)
                ;
        if (getpid() == owner && !__atomic_load_n(&kfdi.exiting, __ATOMIC_ACQUIRE))
                queues_fail();
        raw_close(fd);
        return NULL;
}

/* A thread that waits for the daemon's end of the relay to go away. */
static void watch_start(int relay_fd) {
        int fd = raw_dupfd(relay_fd, true);
        pthread_attr_t attr;
        pthread_t t;

        if (fd < 0)
                return;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        if (pthread_create(&t, &attr, watch_relay, (void *) (intptr_t) fd) != 0)
                raw_close(fd);
        pthread_attr_destroy(&attr);
}

static void queue_remember(uint32_t id, uint64_t amd_queue) {
        pthread_mutex_lock(&kfdi.table_lock);
        if (kfdi.n_queues < KFDI_MAX_QUEUES)
                kfdi.queues[kfdi.n_queues++] = (__typeof__(kfdi.queues[0])) { id, amd_queue };
        pthread_mutex_unlock(&kfdi.table_lock);
}

static void queue_forget(uint32_t id) {
        pthread_mutex_lock(&kfdi.table_lock);
        for (unsigned i = 0; i < kfdi.n_queues; i++)
                if (kfdi.queues[i].id == id) {
                        kfdi.queues[i] = kfdi.queues[--kfdi.n_queues];
                        break;
                }
        pthread_mutex_unlock(&kfdi.table_lock);
}

int kfdi_attach_relay(int relay_fd, const char *topology_dir, unsigned render_minor) {
        const KfdOps *ops;
        int fd, r;

        watch_start(relay_fd);
        r = sim_remote_ops_new(relay_fd, &ops);
        if (r < 0)
                return r;
        fd = ops->open_kfd(ops->userdata);
        if (fd < 0) {
                sim_remote_ops_free(ops);
                return fd;
        }
        pthread_mutex_lock(&kfdi.table_lock);
        kfdi.kfd = calloc(1, sizeof *kfdi.kfd);
        if (!kfdi.kfd) {
                pthread_mutex_unlock(&kfdi.table_lock);
                sim_remote_ops_free(ops);
                return -ENOMEM;
        }
        *kfdi.kfd = (KfdiFile) { .private_fd = fd, .kind = KFDI_PATH_KFD, .refs = 1, .generation = kfdi.generation };
        kfdi.ops = ops;
        if (topology_dir != kfdi.dir)
                snprintf(kfdi.dir, sizeof kfdi.dir, "%s", topology_dir);
        kfdi.n_render_minors = topology_render_minors(kfdi.dir, render_minor, kfdi.render_minors);
        kfdi.owner = getpid();
        kfdi.attached = true;
        pthread_mutex_unlock(&kfdi.table_lock);
        return 0;
}

static int attach_locked(void) {
        const char *sock = secure_getenv("KFDBROKER_SOCKET");
        char kfd_dir[PATH_MAX + 8];
        int dir_fd = -1, relay_fd = -1, r;
        uint32_t minor = 0;

        if (kfdi.attached)
                return 0;
        if (kfdi.attach_error)
                return -kfdi.attach_error;
        kfdi.owner = getpid();
        r = kfdb_session_new(sock && sock[0] ? sock : KFDBROKER_DEFAULT_SOCKET, "kfdbroker-run", &kfdi.session);
        if (r < 0) {
                fprintf(stderr, "kfdbroker: cannot reach kfdbrokerd at %s: %s\n",
                        sock && sock[0] ? sock : KFDBROKER_DEFAULT_SOCKET, strerror(-r));
                goto fail;
        }
        r = make_dir(kfdi.dir, sizeof kfdi.dir);
        if (r < 0)
                goto fail;
        snprintf(kfd_dir, sizeof kfd_dir, "%s/kfd", kfdi.dir);
        if (mkdir(kfd_dir, 0755) < 0) {
                r = -errno;
                goto fail;
        }
        dir_fd = open(kfd_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0) {
                r = -errno;
                goto fail;
        }
        r = kfdb_session_open_kfd(kfdi.session, dir_fd, &relay_fd, &minor);
        raw_close(dir_fd);
        if (r < 0) {
                fprintf(stderr, "kfdbroker: the daemon refused a KFD process: %s\n",
                        kfdb_session_last_error(kfdi.session));
                goto fail;
        }
        unsigned minors[KFDI_MAX_GPUS], n_minors = topology_render_minors(kfdi.dir, minor, minors);
        dir_fd = open(kfdi.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        r = dir_fd < 0 ? -errno : write_module_dir(dir_fd, minors, n_minors);
        if (dir_fd >= 0)
                raw_close(dir_fd);
        if (r < 0) {
                raw_close(relay_fd);
                goto fail;
        }
        r = kfdi_attach_relay(relay_fd, kfdi.dir, minor);
        if (r < 0) {
                fprintf(stderr, "kfdbroker: the KFD relay did not answer: %s\n", strerror(-r));
                goto fail;
        }
        return 0;
fail:
        remove_dir();
        kfdi.session = kfdb_session_free(kfdi.session);
        kfdi.attach_error = -r;
        return r;
}

static int attach(void) {
        int r;

        if (__atomic_load_n(&kfdi.attached, __ATOMIC_ACQUIRE))
                return 0;
        pthread_mutex_lock(&kfdi.attach_lock);
        r = attach_locked();
        pthread_mutex_unlock(&kfdi.attach_lock);
        return r;
}

int kfdi_path(const char *path, unsigned *ret_minor, char *buf, size_t size) {
        KfdiPathKind kind = kfdi_path_kind(path, ret_minor);
        const char *rest;
        int r;

        if (kind != KFDI_PATH_TOPOLOGY)
                return kind;
        r = attach();
        if (r < 0)
                return -ENOENT;
        unsigned minor;
        if (drm_char_minor(path, &minor, &rest)) {
                /* The render nodes the topology names are ours; any other
                 * device's sysfs is the machine's. */
                if (!render_minor_ours(minor))
                        return KFDI_PATH_OTHER;
                r = snprintf(buf, size, "%s/drm-char-%u%s", kfdi.dir, minor, rest);
        } else if ((rest = path_under(path, KFDI_SYSFS_KFD)) || (rest = path_under(path, KFDI_SYSFS_CLASS_KFD)))
                r = snprintf(buf, size, "%s/kfd%s", kfdi.dir, rest);
        else
                r = snprintf(buf, size, "%s/amdgpu%s", kfdi.dir, path_under(path, KFDI_SYSFS_AMDGPU));
        if (r < 0 || (size_t) r >= size)
                return -ENAMETOOLONG;
        return kind;
}

/* ---- Fake files ---- */

static KfdiFd *fd_find_locked(int fd) {
        for (unsigned i = 0; i < kfdi.n_fds; i++)
                if (kfdi.fds[i].fd == fd)
                        return &kfdi.fds[i];
        return NULL;
}

bool kfdi_is_fake(int fd) {
        bool r;

        if (fd < 0 || !__atomic_load_n(&kfdi.n_fds, __ATOMIC_RELAXED))
                return false;
        pthread_mutex_lock(&kfdi.table_lock);
        r = fd_find_locked(fd) != NULL;
        pthread_mutex_unlock(&kfdi.table_lock);
        return r;
}

/* Drops a reference; returns the private fd to close through the table,
 * without the lock, when it was the last. A parent's file (inherited over
 * fork) is closed here, as a plain fd of this process: the parent's table
 * and channels are not this process's to use. */
static int file_unref_locked(KfdiFile *f) {
        int fd;

        if (--f->refs > 0)
                return -1;
        fd = f->private_fd;
        if (f == kfdi.kfd)
                kfdi.kfd = NULL;
        if (f->generation != kfdi.generation) {
                raw_close(fd);
                fd = -1;
        }
        free(f);
        return fd;
}

static void private_close(int fd) {
        if (fd < 0)
                return;
        if (!kfdi.ops)
                raw_close(fd);
        else
                kfdi.ops->close(kfdi.ops->userdata, fd);
}

static int fd_add_locked(int fd, KfdiFile *f) {
        if (kfdi.n_fds == KFDI_MAX_FDS)
                return -EMFILE;
        kfdi.fds[kfdi.n_fds++] = (KfdiFd) { .fd = fd, .file = f };
        f->refs++;
        return 0;
}

int kfdi_open(KfdiPathKind kind, unsigned minor, int flags) {
        bool cloexec = flags & O_CLOEXEC;
        KfdiFile *f = NULL;
        int fd, r;

        r = attach();
        if (r < 0)
                return r;
        if (kind == KFDI_PATH_RENDER) {
                /* Only the render nodes the topology names are there. */
                if (!render_minor_ours(minor))
                        return -ENOENT;
                r = kfdi.ops->open_render(kfdi.ops->userdata, minor);
                if (r < 0)
                        return r;
                f = calloc(1, sizeof *f);
                if (!f) {
                        private_close(r);
                        return -ENOMEM;
                }
                *f = (KfdiFile) { .private_fd = r, .kind = KFDI_PATH_RENDER, .minor = minor,
                                  .generation = kfdi.generation };
        }
        pthread_mutex_lock(&kfdi.table_lock);
        if (kind == KFDI_PATH_KFD)
                f = kfdi.kfd;
        fd = f ? raw_dupfd(f->private_fd, cloexec) : -ENODEV;
        if (fd >= 0) {
                r = fd_add_locked(fd, f);
                if (r < 0) {
                        raw_close(fd);
                        fd = r;
                }
        }
        /* A render file that got no fd goes at once. */
        if (fd < 0 && kind == KFDI_PATH_RENDER) {
                f->refs++;
                r = file_unref_locked(f);
                pthread_mutex_unlock(&kfdi.table_lock);
                private_close(r);
                return fd;
        }
        pthread_mutex_unlock(&kfdi.table_lock);
        return fd;
}

void kfdi_node_stat(KfdiPathKind kind, unsigned minor, struct stat *st) {
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFCHR | 0666;
        st->st_rdev = kind == KFDI_PATH_RENDER ? makedev(DRM_MAJOR, minor) : makedev(KFD_FAKE_MAJOR, 0);
        st->st_nlink = 1;
        st->st_blksize = 4096;
}

int kfdi_fd_stat(int fd, struct stat *st) {
        KfdiFd *e;
        KfdiPathKind kind;
        unsigned minor;

        pthread_mutex_lock(&kfdi.table_lock);
        e = fd_find_locked(fd);
        if (!e) {
                pthread_mutex_unlock(&kfdi.table_lock);
                return -EBADF;
        }
        kind = e->file->kind;
        minor = e->file->minor;
        pthread_mutex_unlock(&kfdi.table_lock);
        kfdi_node_stat(kind, minor, st);
        return 0;
}

static void forget_locked(unsigned i, int *ret_private) {
        KfdiFile *f = kfdi.fds[i].file;

        kfdi.fds[i] = kfdi.fds[--kfdi.n_fds];
        *ret_private = file_unref_locked(f);
}

void kfdi_forget(int fd) {
        int private = -1;

        pthread_mutex_lock(&kfdi.table_lock);
        for (unsigned i = 0; i < kfdi.n_fds; i++)
                if (kfdi.fds[i].fd == fd) {
                        forget_locked(i, &private);
                        break;
                }
        pthread_mutex_unlock(&kfdi.table_lock);
        private_close(private);
}

void kfdi_forget_range(unsigned first, unsigned last) {
        for (;;) {
                int private = -1;
                bool found = false;

                pthread_mutex_lock(&kfdi.table_lock);
                for (unsigned i = 0; i < kfdi.n_fds; i++)
                        if ((unsigned) kfdi.fds[i].fd >= first && (unsigned) kfdi.fds[i].fd <= last) {
                                forget_locked(i, &private);
                                found = true;
                                break;
                        }
                pthread_mutex_unlock(&kfdi.table_lock);
                private_close(private);
                if (!found)
                        return;
        }
}

int kfdi_dup_to(int fd, int newfd) {
        KfdiFd *e;
        int r;

        if (fd == newfd)
                return 0;
        kfdi_forget(newfd); /* the real dup2/dup3 closed it */
        pthread_mutex_lock(&kfdi.table_lock);
        e = fd_find_locked(fd);
        r = e ? fd_add_locked(newfd, e->file) : 0;
        pthread_mutex_unlock(&kfdi.table_lock);
        return r;
}

/* Takes a reference to fd's file for a call made without the lock. */
static KfdiFile *file_get(int fd) {
        KfdiFd *e;
        KfdiFile *f = NULL;

        pthread_mutex_lock(&kfdi.table_lock);
        e = fd_find_locked(fd);
        if (e && e->file->generation == kfdi.generation) {
                f = e->file;
                f->refs++;
        }
        pthread_mutex_unlock(&kfdi.table_lock);
        return f;
}

static void file_put(KfdiFile *f) {
        int private;

        pthread_mutex_lock(&kfdi.table_lock);
        private = file_unref_locked(f);
        pthread_mutex_unlock(&kfdi.table_lock);
        private_close(private);
}

/* A render file of the process with a reference (file_put()), or NULL:
 * the thunk's, whose VM its KFD process acquired (the kernel maps a KFD
 * buffer through the render file it was allowed on, the acquired one). */
static KfdiFile *render_file_get(void) {
        KfdiFile *f = NULL;

        pthread_mutex_lock(&kfdi.table_lock);
        for (size_t i = 0; i < kfdi.n_fds && !f; i++)
                if (kfdi.fds[i].file->kind == KFDI_PATH_RENDER && kfdi.fds[i].file->generation == kfdi.generation)
                        f = kfdi.fds[i].file;
        if (f)
                f->refs++;
        pthread_mutex_unlock(&kfdi.table_lock);
        return f;
}

/* The private fd behind a fake fd number named inside an ioctl argument, or -1. */
static int private_of(int fd, KfdiPathKind kind) {
        KfdiFd *e;
        int r = -1;

        pthread_mutex_lock(&kfdi.table_lock);
        e = fd_find_locked(fd);
        if (e && e->file->kind == kind && e->file->generation == kfdi.generation)
                r = e->file->private_fd;
        pthread_mutex_unlock(&kfdi.table_lock);
        return r;
}

/* Copies between the caller's memory and ours without faulting on a bad
 * pointer: the kernel's copy_from_user / copy_to_user answer -EFAULT. */
static int copy_self(void *dst, const void *src, size_t n, bool to_caller) {
        struct iovec local = { .iov_base = to_caller ? (void *) src : dst, .iov_len = n };
        struct iovec remote = { .iov_base = to_caller ? dst : (void *) src, .iov_len = n };
        ssize_t k;

        if (n == 0)
                return 0;
        k = to_caller ? process_vm_writev(getpid(), &local, 1, &remote, 1, 0)
                      : process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
        if (k < 0)
                return errno == EFAULT ? -EFAULT : -errno;
        return (size_t) k == n ? 0 : -EFAULT;
}

/*
 * User-pointer memory: ALLOC_MEMORY_OF_GPU with USERPTR asks the kernel to
 * put pages of this process in the GPU VM. The daemon cannot reach them, so
 * the range is moved onto pages it can: a memfd of the same size gets the
 * range's bytes and is mapped over it in place (same address, same
 * contents), and the memfd is imported as the buffer (IMPORT_DMABUF of the
 * simulator's stand-in for another driver's dma-buf). HIP pins host memory
 * this way (hsa_amd_memory_lock_to_pool when it sets up a stream) and does
 * not survive a refusal. A write by another thread to the range between the
 * copy and the remap would be lost; the thunk registers memory it owns.
 * A KFD before 1.15 imports amdgpu's own dma-bufs alone ("Can't handle
 * non-graphics buffers", amdgpu_amdkfd_gpuvm_import_dmabuf() before "Import
 * DMABufs for interop through DRM"): there the range moves onto a GTT buffer
 * of the process instead (userptr_alloc()).
 * Returns the ioctl's result, the handle in a->handle.
 */
static int userptr_alloc(KfdiFile *f, struct kfd_ioctl_alloc_memory_of_gpu_args *a);

static int userptr_import(KfdiFile *f, struct kfd_ioctl_alloc_memory_of_gpu_args *a) {
        uint64_t addr = a->mmap_offset, size = a->size;
        struct kfd_ioctl_import_dmabuf_args imp = { .va_addr = a->va_addr, .gpu_id = a->gpu_id };
        void *copy;
        int memfd, r;

        if (size == 0 || (addr | size) % 4096 != 0 || addr + size < addr)
                return -EINVAL;
        memfd = memfd_create("foreign-dmabuf:userptr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (memfd < 0)
                return -errno;
        if (ftruncate(memfd, (off_t) size) < 0) {
                r = -errno;
                goto out;
        }
        copy = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
        if (copy == MAP_FAILED) {
                r = -errno;
                goto out;
        }
        memcpy(copy, (const void *) (uintptr_t) addr, size);
        munmap(copy, size);
        if (mmap((void *) (uintptr_t) addr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, memfd, 0) ==
            MAP_FAILED) {
                r = -errno;
                goto out;
        }
        (void) madvise((void *) (uintptr_t) addr, size, MADV_DONTFORK);
        if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0) {
                r = -errno;
                goto out;
        }
        imp.dmabuf_fd = (uint32_t) memfd;
        r = kfdi.ops->ioctl(kfdi.ops->userdata, f->private_fd, AMDKFD_IOC_IMPORT_DMABUF, &imp);
        if (r >= 0)
                a->handle = imp.handle;
        else if (r == -EINVAL)
                r = userptr_alloc(f, a);
out:
        close(memfd);
        return r;
}

/*
 * The range (already moved onto a memfd of ours by userptr_import()) moved
 * again, onto a GTT buffer of the process: ALLOC_MEMORY_OF_GPU of GTT at the
 * VA the thunk asked, with its other flags, the range's bytes copied in, and
 * the buffer mapped over the range through the process's render file. It
 * is charged to the session as any allocation, for it is GPU memory now.
 */
static int userptr_alloc(KfdiFile *f, struct kfd_ioctl_alloc_memory_of_gpu_args *a) {
        struct kfd_ioctl_alloc_memory_of_gpu_args g = {
                .va_addr = a->va_addr, .size = a->size, .gpu_id = a->gpu_id,
                .flags = (a->flags & ~KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) | KFD_IOC_ALLOC_MEM_FLAGS_GTT,
        };
        struct kfd_ioctl_free_memory_of_gpu_args fr = {};
        void *addr = (void *) (uintptr_t) a->mmap_offset, *copy = NULL, *m = NULL;
        KfdiFile *render = render_file_get();
        int r;

        if (!render)
                return -EINVAL; /* no VM acquired: nothing to map the buffer with */
        r = kfdi.ops->ioctl(kfdi.ops->userdata, f->private_fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &g);
        if (r >= 0)
                r = kfdi.ops->mmap(kfdi.ops->userdata, NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED,
                                   render->private_fd, g.mmap_offset, &copy);
        if (r >= 0) {
                memcpy(copy, addr, a->size);
                r = kfdi.ops->mmap(kfdi.ops->userdata, addr, a->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
                                   render->private_fd, g.mmap_offset, &m);
                (void) kfdi.ops->munmap(kfdi.ops->userdata, copy, a->size);
        }
        file_put(render);
        if (r < 0) {
                fr.handle = g.handle;
                if (fr.handle)
                        (void) kfdi.ops->ioctl(kfdi.ops->userdata, f->private_fd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr);
                return r;
        }
        (void) madvise(addr, a->size, MADV_DONTFORK);
        a->handle = g.handle;
        return 0;
}

int kfdi_ioctl(int fd, unsigned long request, void *arg) {
        size_t size = _IOC_SIZE(request);
        unsigned dir = _IOC_DIR(request);
        uint8_t buf[1u << 14];
        KfdiFile *f;
        int r;

        f = file_get(fd);
        if (!f)
                return -EBADF;
        /* The argument by the size its request encodes, as kfd_ioctl copies
         * it (an argument the command does not write is still passed). */
        memset(buf, 0, size);
        if (arg && size > 0 && (dir & _IOC_WRITE)) {
                r = copy_self(buf, arg, size, false);
                if (r < 0)
                        goto out;
        }
        if (f->kind == KFDI_PATH_KFD && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_ACQUIRE_VM) &&
            size >= sizeof(struct kfd_ioctl_acquire_vm_args)) {
                struct kfd_ioctl_acquire_vm_args *a = (void *) buf;
                a->drm_fd = (uint32_t) private_of((int) a->drm_fd, KFDI_PATH_RENDER);
        }
        if (f->kind == KFDI_PATH_KFD && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU) &&
            size >= sizeof(struct kfd_ioctl_alloc_memory_of_gpu_args) &&
            (((struct kfd_ioctl_alloc_memory_of_gpu_args *) (void *) buf)->flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR))
                r = userptr_import(f, (void *) buf);
        else
                r = kfdi.ops->ioctl(kfdi.ops->userdata, f->private_fd, request, arg ? buf : NULL);
        if (r >= 0 && f->kind == KFDI_PATH_KFD && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_CREATE_QUEUE) &&
            size >= sizeof(struct kfd_ioctl_create_queue_args)) {
                const struct kfd_ioctl_create_queue_args *q = (const void *) buf;
                if (q->queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE_AQL && q->read_pointer_address > AMD_QUEUE_READ_DISPATCH_ID)
                        queue_remember(q->queue_id, q->read_pointer_address - AMD_QUEUE_READ_DISPATCH_ID);
        }
        if (r >= 0 && f->kind == KFDI_PATH_KFD && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_DESTROY_QUEUE) &&
            size >= sizeof(struct kfd_ioctl_destroy_queue_args))
                queue_forget(((const struct kfd_ioctl_destroy_queue_args *) (const void *) buf)->queue_id);
        if (r >= 0 && arg && size > 0 && (dir & _IOC_READ)) {
                if (f->kind == KFDI_PATH_KFD && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_ACQUIRE_VM))
                        goto out; /* nothing to copy back that the caller lacks */
                int k = copy_self(arg, buf, size, true);
                if (k < 0)
                        r = k;
        }
out:
        file_put(f);
        return r;
}

int kfdi_mmap(void *addr, size_t length, int prot, int flags, int fd, off_t offset, void **ret) {
        KfdiFile *f = file_get(fd);
        void *m = NULL;
        int r;

        if (!f)
                return -EBADF;
        r = kfdi.ops->mmap(kfdi.ops->userdata, addr, length, prot, flags, f->private_fd, (uint64_t) offset, &m);
        file_put(f);
        if (r < 0)
                return r;
        /* A child gets none of the GPU's memory (the thunk's own rule). */
        (void) syscall(SYS_madvise, m, length, MADV_DONTFORK);
        *ret = m;
        return 0;
}

/* ---- Process life ---- */

void kfdi_after_fork_child(void) {
        /* A new process, as the kernel sees it: the parent's KFD process is
         * not the child's. The child has the parent's table, session and
         * channels, and must use none of them (a goodbye on the parent's
         * session socket would end the parent's session): they are left
         * as they are, the inherited fake fds stay open (real fds) and calls
         * on them fail with -EBADF, and the child's own open of /dev/kfd
         * attaches anew — a session and KFD process of its own. */
        pthread_mutex_init(&kfdi.table_lock, NULL);
        pthread_mutex_init(&kfdi.attach_lock, NULL);
        kfdi.generation++;
        kfdi.attached = false;
        kfdi.n_queues = 0; /* the parent's */
        kfdi.attach_error = 0;
        kfdi.ops = NULL;
        kfdi.session = NULL;
        kfdi.dir[0] = 0; /* the parent's, which removes it */
        if (kfdi.kfd)
                (void) file_unref_locked(kfdi.kfd); /* the parent's process reference */
        kfdi.kfd = NULL;
}

void kfdi_init(void) {
        struct rlimit as;
        void *m;

        /* The thunk asks for USERPTR of its paged host memory unless told not
         * to (rocm-facts §4 "Userptr"): the daemon cannot see this process's
         * pages, so say so before the thunk reads it. */
        (void) setenv("HSA_USERPTR_FOR_PAGED_MEM", "0", 0);
        /* The daemon maps its own objects in a client's GPU VM inside this
         * window (gpu-va-window.c); CPU VA == GPU VA for everything the thunk
         * maps, so the thunk must never pick an address in it. A PROT_NONE
         * reservation still counts against RLIMIT_AS: under a finite one the
         * 12 TiB would leave the program no address space, so it is not made
         * (the thunk's own reservations then avoid the window only by
         * chance; docs/rocm.md). */
        if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
                return;
        m = mmap((void *) (uintptr_t) KFDI_VA_WINDOW_BASE, KFDI_VA_WINDOW_END - KFDI_VA_WINDOW_BASE, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
        (void) m; /* taken already (a parent's reservation survives exec only in name): nothing to do */
}

void kfdi_reset(void) {
        int privates[KFDI_MAX_FDS + 1];
        unsigned n = 0;

        pthread_mutex_lock(&kfdi.table_lock);
        while (kfdi.n_fds > 0) {
                int p;
                raw_close(kfdi.fds[kfdi.n_fds - 1].fd);
                forget_locked(kfdi.n_fds - 1, &p);
                if (p >= 0)
                        privates[n++] = p;
        }
        if (kfdi.kfd) {
                int p = file_unref_locked(kfdi.kfd);
                if (p >= 0)
                        privates[n++] = p;
        }
        pthread_mutex_unlock(&kfdi.table_lock);
        for (unsigned i = 0; i < n; i++)
                private_close(privates[i]);
        sim_remote_ops_free(kfdi.ops);
        kfdb_session_free(kfdi.session);
        kfdi.ops = NULL;
        kfdi.session = NULL;
        remove_dir();
        kfdi.attached = false;
        kfdi.attach_error = 0;
}

void kfdi_fini(void) {
        __atomic_store_n(&kfdi.exiting, true, __ATOMIC_RELEASE);
        if (kfdi.attached && kfdi.owner == getpid())
                remove_dir();
}
