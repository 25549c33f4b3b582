/* SPDX-License-Identifier: MIT */
/*
 * See worker-user.h. Like systemd's DynamicUser= (its docs/UIDS-GIDS.md, and
 * src/core/dynamic-user.c for the idea: a start point from a hash of the
 * name, then the next free id), but without systemd's lock files, which are
 * its own business: the id is checked free against the user and group
 * databases and every running process. What that cannot rule out — systemd
 * later giving the same id to a DynamicUser= service — is why the service's
 * own user (kfdbroker) comes first.
 */
#include "manager/worker-user.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/macro.h"

/* "Uid:\t0\t0\t0\t0": true if one of the numbers is id. */
static bool line_has_id(const char *line, uint32_t id) {
        const char *p = strchr(line, ':');

        if (!p)
                return false;
        p++;
        for (int i = 0; i < 4; i++) {
                char *end;
                unsigned long long v;

                errno = 0;
                v = strtoull(p, &end, 10);
                if (errno || end == p)
                        return false;
                if (v == id)
                        return true;
                p = end;
        }
        return false;
}

/* Whether /proc/PID/status (dirfd) names id; false for a process that went. */
static bool process_has_id(int dirfd, const char *pid, uint32_t id) {
        char path[64], buf[4096];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;
        bool found = false;

        snprintf(path, sizeof(path), "%s/status", pid);
        fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return false;
        /* Uid: and Gid: are within the first lines (fs/proc/array.c, task_state()). */
        n = read(fd, buf, sizeof(buf) - 1);
        if (n <= 0)
                return false;
        buf[n] = 0;
        for (char *l = buf; l && *l && !found; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, "Uid:", 4) == 0 || strncmp(l, "Gid:", 4) == 0)
                        found = line_has_id(l, id);
        return found;
}

int worker_user_id_in_use(const char *proc_root, uint32_t id) {
        DIR *d = opendir(proc_root);
        struct dirent *de;
        bool found = false;

        if (!d)
                return -errno;
        while (!found && (de = readdir(d)))
                if (isdigit((unsigned char) de->d_name[0]))
                        found = process_has_id(dirfd(d), de->d_name, id);
        closedir(d);
        return found;
}

int worker_user_pick_dynamic(const char *proc_root, uid_t *ret) {
        const uint32_t n = WORKER_DYNAMIC_UID_MAX - WORKER_DYNAMIC_UID_MIN + 1;
        uint32_t h = 2166136261u; /* FNV-1a of the name: a stable start point */

        for (const char *c = "kfdbroker-worker"; *c; c++)
                h = (h ^ (uint8_t) *c) * 16777619u;
        for (uint32_t i = 0; i < n; i++) {
                uint32_t id = WORKER_DYNAMIC_UID_MIN + (h + i) % n;
                int r;

                errno = 0;
                if (getpwuid((uid_t) id) || getgrgid((gid_t) id))
                        continue;
                r = worker_user_id_in_use(proc_root, id);
                if (r < 0)
                        return r;
                if (r > 0)
                        continue;
                *ret = (uid_t) id;
                return 0;
        }
        return -EBUSY;
}
