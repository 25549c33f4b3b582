/* SPDX-License-Identifier: MIT */
/*
 * OpenKfd: the session of a process that runs unmodified ROCm through
 * libkfdbroker-kfd.so (docs/rocm.md) gets a KFD process of its own and the
 * KFD topology as this session may see it: the CPU and the daemon's GPU,
 * no other (the process sees no other GPU either: SimMm.visible_gpu_id). The KFD process is reached over a
 * SOCK_SEQPACKET socket that speaks sim-remote's wire
 * (daemon/sim/sim-remote-protocol.h): the interposer's ioctls, mmaps and
 * closes run there, each checked as the kernel checks it by the simulator's
 * own ioctl code on that process alone, so a hostile argument gets the
 * kernel's errno and touches no other client. One per session; the session
 * keeps a copy of the daemon's end and shuts it down when it ends, which ends
 * the KFD process (its memory, events and queues) even if the client still
 * holds its end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sessions/kfd-relay.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct TopologyTree {
        WireTopologyFile files[WIRE_MAX_TOPOLOGY_FILES];
        size_t n_files;
        size_t bytes;
} TopologyTree;

static void topology_tree_done(TopologyTree *t) {
        for (size_t i = 0; i < t->n_files; i++) {
                free((char *) t->files[i].path);
                free((void *) t->files[i].content);
        }
        t->n_files = 0;
}

static int read_small_file(int dir_fd, const char *name, void **ret, size_t *ret_size) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;

        if (fd < 0)
                return -errno;
        buf = malloc(WIRE_MAX_TOPOLOGY_CONTENT);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, WIRE_MAX_TOPOLOGY_CONTENT - n);
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n == WIRE_MAX_TOPOLOGY_CONTENT)
                        return -EFBIG;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = n;
        return 0;
}

/* Every regular file under dir_fd, named relative to the tree's root. */
static int topology_tree_read(TopologyTree *t, int dir_fd, const char *prefix, unsigned depth) {
        DIR *d;
        struct dirent *de;
        int fd, r = 0;

        if (depth > 8)
                return -ELOOP;
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while (r == 0 && (de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                unsigned char type = de->d_type;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (asprintf(&path, "%s%s%s", prefix, prefix[0] ? "/" : "", de->d_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (strlen(path) > WIRE_MAX_TOPOLOGY_PATH) {
                        r = -ENAMETOOLONG;
                        break;
                }
                if (type == DT_UNKNOWN) {
                        struct stat st;
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                r = -errno;
                                break;
                        }
                        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
                }
                if (type == DT_DIR) {
                        _cleanup_close_ int sub = openat(dirfd(d), de->d_name,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        r = sub < 0 ? -errno : topology_tree_read(t, sub, path, depth + 1);
                } else if (type == DT_REG) {
                        WireTopologyFile *f;

                        if (t->n_files == WIRE_MAX_TOPOLOGY_FILES) {
                                r = -E2BIG;
                                break;
                        }
                        f = &t->files[t->n_files];
                        r = read_small_file(dirfd(d), de->d_name, (void **) &f->content, &f->size);
                        if (r == 0) {
                                f->path = TAKE_PTR(path);
                                t->bytes += f->size + strlen(f->path);
                                t->n_files++;
                        }
                }
        }
        closedir(d);
        /* Room for framing in one message. */
        if (r == 0 && t->bytes > WIRE_MAX_MESSAGE_SIZE - 4096)
                r = -EMSGSIZE;
        return r;
}

/* The node index of a path under topology/nodes/, or -1. */
static int node_of(const char *path, const char **ret_rest) {
        static const char prefix[] = "topology/nodes/";
        char *end;
        unsigned long n;

        if (strncmp(path, prefix, sizeof prefix - 1) != 0)
                return -1;
        errno = 0;
        n = strtoul(path + sizeof prefix - 1, &end, 10);
        if (errno || end == path + sizeof prefix - 1 || (*end && *end != '/') || n >= 1024)
                return -1;
        *ret_rest = end;
        return (int) n;
}

/*
 * Only the GPU this session may use, as a container given one GPU's device
 * nodes sees it: the CPU nodes (gpu_id 0) and the node of gpu_id, numbered
 * again from 0 in their order, as the thunk reads nodes 0..N-1.
 */
static int topology_tree_keep_gpu(TopologyTree *t, uint32_t gpu_id) {
        int renumber[1024];
        bool seen[1024] = {};
        unsigned next = 0;
        size_t k = 0;

        for (size_t i = 0; i < t->n_files; i++) {
                const char *rest;
                int n = node_of(t->files[i].path, &rest);
                if (n >= 0 && strcmp(rest, "/gpu_id") == 0) {
                        char text[32] = "";
                        memcpy(text, t->files[i].content, MIN(t->files[i].size, sizeof text - 1));
                        uint32_t id = (uint32_t) strtoul(text, NULL, 10);
                        seen[n] = id == 0 || id == gpu_id;
                }
        }
        for (unsigned n = 0; n < 1024; n++)
                renumber[n] = seen[n] ? (int) next++ : -1;
        for (size_t i = 0; i < t->n_files; i++) {
                WireTopologyFile *f = &t->files[i];
                const char *rest;
                int n = node_of(f->path, &rest);
                char *path;

                if (n >= 0 && renumber[n] < 0) {
                        free((char *) f->path);
                        free((void *) f->content);
                        continue;
                }
                if (n >= 0 && renumber[n] != n) {
                        if (asprintf(&path, "topology/nodes/%d%s", renumber[n], rest) < 0)
                                return -ENOMEM;
                        free((char *) f->path);
                        f->path = path;
                }
                t->files[k++] = *f;
        }
        t->n_files = k;
        return 0;
}

void session_open_kfd(Session *s, const WireRequest *req) {
        ContextPool *pool = s->set->contexts;
        _cleanup_(topology_tree_done) TopologyTree tree = {};
        _cleanup_close_ int fd = -EBADF, root_fd = -EBADF, keep = -EBADF;

        char err[384] = "";
        KfdRelay *relay = NULL;
        int k;

        if (s->kfd_relay_fd >= 0) {
                session_send_error(s, req->id, EEXIST, "open_kfd: this session has its KFD process already");
                return;
        }
        /* The daemon's end of the relay socket and our copy of the client's. */
        if (!session_check_fds(s, req->id, 2, "OpenKfd"))
                return;
        root_fd = open(context_pool_sysfs_root(pool), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0) {
                k = -errno;
                session_send_error(s, req->id, -k, "open_kfd: cannot read the KFD topology: %s", strerror(-k));
                return;
        }
        k = topology_tree_read(&tree, root_fd, "", 0);
        if (k >= 0)
                k = topology_tree_keep_gpu(&tree, context_pool_info(pool)->gpu_id);
        if (k < 0) {
                session_send_error(s, req->id, -k, "open_kfd: cannot read the KFD topology: %s", strerror(-k));
                return;
        }
        k = kfd_relay_new(s, s->set->event, &relay);
        if (k < 0) {
                session_send_error(s, req->id, -k, "open_kfd: %s", strerror(-k));
                return;
        }
        /* The server's reference, given back when the KFD process is gone. */
        k = context_pool_kfd_relay_begin(pool, &kfd_relay_hooks, kfd_relay_ref(relay), &fd, err, sizeof err);
        if (k < 0) {
                kfd_relay_detach(relay); /* ours */
                kfd_relay_unref(relay);  /* the server's, never handed over */
                session_log(s, LOG_NOTICE, "Session %" PRIu64 ": OpenKfd refused: %s", s->id, err);
                session_send_error(s, req->id, -k, "open_kfd: %s", err);
                return;
        }
        /* A copy of the client's end: shutting it down when the session
         * ends is EOF at the daemon's end, which ends the KFD process. */
        keep = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (keep < 0) {
                k = -errno;
                /* Our end goes with fd: the KFD process ends, the server lets the relay go. */
                kfd_relay_detach(relay);
                context_pool_kfd_relay_end(pool);
                session_send_error(s, req->id, -k, "open_kfd: %s", strerror(-k));
                return;
        }
        s->kfd_relay_fd = TAKE_FD(keep);
        s->kfd_relay = relay;
        session_account_fds(s, 2);
        session_log(s, LOG_INFO, "Session %" PRIu64 ": opened a KFD process of its own (the KFD relay)", s->id);
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_OPEN_KFD,
                                       .open_kfd = { .files = tree.files, .n_files = tree.n_files,
                                                     .render_minor = context_pool_info(pool)->drm_render_minor } },
                     &fd, 1);
}

void session_kfd_free(Session *s) {
        if (s->kfd_relay_fd < 0)
                return;
        (void) shutdown(s->kfd_relay_fd, SHUT_RDWR);
        s->kfd_relay_fd = safe_close(s->kfd_relay_fd);
        kfd_relay_detach(s->kfd_relay);
        s->kfd_relay = NULL;
        session_account_fds(s, -2);
        context_pool_kfd_relay_end(s->set->contexts);
}
