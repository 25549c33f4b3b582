/* SPDX-License-Identifier: MIT */
/*
 * Files handed out by the simulated GPU (see sim-file.h). Each is a memfd
 * named like the node it stands for ("kfd", "renderD128"), so it shows up
 * sensibly in /proc/self/fd and is closed like any fd.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim-device.h"
#include "sim-drm.h"
#include "sim-file.h"
#include "util/macro.h"

int sim_file_new(SimMm *mm, SimFileKind kind, SimFile **ret) {
        SimDevice *d = mm->device;
        struct stat st;
        SimFile *f;
        int fd;

        fd = memfd_create(kind == SIM_FILE_KFD ? "kfd" : "renderD128", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
            fstat(fd, &st) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        f = calloc(1, sizeof *f);
        if (!f) {
                safe_close(fd);
                return -ENOMEM;
        }
        f->device = d;
        f->kind = kind;
        f->n_ref = 1; /* held by "open" */
        f->open = true;
        f->fd = fd;
        f->st_dev = st.st_dev;
        f->st_ino = st.st_ino;
        f->pid = getpid();
        f->mm = mm;
        f->next = d->files;
        d->files = f;
        *ret = f;
        return 0;
}

SimFile *sim_file_find(SimMm *mm, int fd) {
        struct stat st;

        if (fd < 0)
                return NULL;
        for (SimFile *f = mm->device->files; f; f = f->next)
                if (f->open && f->fd == fd && f->mm == mm) {
                        /* The number must still name our memfd (not a reused fd). */
                        if (fstat(fd, &st) < 0 || st.st_dev != f->st_dev || st.st_ino != f->st_ino)
                                return NULL;
                        return f;
                }
        return NULL;
}

SimFile *sim_file_ref(SimFile *f) {
        if (f)
                f->n_ref++;
        return f;
}

void sim_file_unref(SimFile *f) {
        if (!f)
                return;
        assert(f->n_ref > 0);
        if (--f->n_ref > 0)
                return;
        for (SimFile **x = &f->device->files; *x; x = &(*x)->next)
                if (*x == f) {
                        *x = f->next;
                        break;
                }
        if (f->open)
                safe_close(f->fd);
        sim_drm_file_release(f); /* drm_gem_release: at the drm file's last reference */
        free(f);
}
