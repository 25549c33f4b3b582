/* SPDX-License-Identifier: MIT */
/*
 * kfdb_session_open_kfd(): the session's own KFD process, for
 * libkfdbroker-kfd.so (docs/rocm.md). Writes the topology the daemon sent
 * into a directory of the caller's, never following a link and never
 * leaving it (the paths were checked by the decoder, client-wire.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client-session.h"
#include "client-wire.h"
#include "kfdbroker.h"
#include "macro.h"

/* Creates the directories of path below dir_fd and returns the last one's fd. */
static int open_parent(int dir_fd, const char *path, const char **ret_name) {
        _cleanup_close_ int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
        const char *c = path;

        if (fd < 0)
                return -errno;
        for (;;) {
                size_t len = strcspn(c, "/");
                char name[CLIENT_MAX_TOPOLOGY_PATH + 1];
                int sub;

                if (!c[len]) {
                        *ret_name = c;
                        return TAKE_FD(fd);
                }
                memcpy(name, c, len);
                name[len] = 0;
                if (mkdirat(fd, name, 0755) < 0 && errno != EEXIST)
                        return -errno;
                sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0)
                        return -errno;
                safe_close(fd);
                fd = sub;
                c += len + 1;
        }
}

static int write_topology_file(int dir_fd, const ClientTopologyFile *f) {
        _cleanup_close_ int parent = -EBADF, fd = -EBADF;
        const char *name = NULL;
        size_t done = 0;

        parent = open_parent(dir_fd, f->path, &name);
        if (parent < 0)
                return parent;
        fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
        if (fd < 0)
                return -errno;
        while (done < f->size) {
                ssize_t n = write(fd, f->content + done, f->size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) n;
        }
        return 0;
}

int kfdb_session_open_kfd(kfdb_session *s, int topology_dir_fd, int *ret_fd, uint32_t *ret_render_minor) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_OPEN_KFD };
        int k;

        if (!s || topology_dir_fd < 0 || !ret_fd)
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        for (size_t i = 0; i < r->open_kfd.n_files; i++) {
                k = write_topology_file(topology_dir_fd, &r->open_kfd.files[i]);
                if (k < 0)
                        return k;
        }
        if (ret_render_minor)
                *ret_render_minor = r->open_kfd.render_minor;
        *ret_fd = TAKE_FD(r->fds[0]);
        return 0;
}
