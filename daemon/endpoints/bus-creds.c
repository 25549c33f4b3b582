/* SPDX-License-Identifier: MIT */
/* See bus-creds.h. The keys and their types are the D-Bus specification's
 * (GetConnectionCredentials): UnixUserID u, UnixGroupIDs au, ProcessID u,
 * ProcessFD h. */
#include "endpoints/bus-creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/macro.h"

static int read_groups(sd_bus_message *m, BusPeerCreds *c) {
        const void *p;
        size_t size;
        int r;

        r = sd_bus_message_enter_container(m, 'v', "au");
        if (r < 0)
                return r;
        r = sd_bus_message_read_array(m, 'u', &p, &size);
        if (r < 0)
                return r;
        if (size / sizeof(uint32_t) > IDENTITY_MAX_GIDS)
                return -E2BIG;
        free(c->gids);
        c->gids = NULL;
        c->n_gids = size / sizeof(uint32_t);
        if (c->n_gids > 0) {
                c->gids = malloc(size);
                if (!c->gids)
                        return -ENOMEM;
                memcpy(c->gids, p, size); /* gid_t is uint32_t on Linux */
        }
        c->have_gids = true;
        return sd_bus_message_exit_container(m);
}

int bus_peer_creds_read(sd_bus_message *reply, BusPeerCreds *ret) {
        _cleanup_(bus_peer_creds_done) BusPeerCreds c = { .pidfd = -EBADF };
        int r;

        _Static_assert(sizeof(gid_t) == sizeof(uint32_t), "UnixGroupIDs is au");
        r = sd_bus_message_enter_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key, *sig;

                r = sd_bus_message_read(reply, "s", &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(reply, NULL, &sig);
                if (r < 0)
                        return r;
                if (strcmp(key, "UnixUserID") == 0 && strcmp(sig, "u") == 0) {
                        r = sd_bus_message_read(reply, "v", "u", &c.uid);
                        c.have_uid = r >= 0;
                } else if (strcmp(key, "ProcessID") == 0 && strcmp(sig, "u") == 0) {
                        r = sd_bus_message_read(reply, "v", "u", &c.pid);
                        c.have_pid = r >= 0;
                } else if (strcmp(key, "UnixGroupIDs") == 0 && strcmp(sig, "au") == 0)
                        r = read_groups(reply, &c);
                else if (strcmp(key, "ProcessFD") == 0 && strcmp(sig, "h") == 0) {
                        int fd;

                        r = sd_bus_message_read(reply, "v", "h", &fd);
                        if (r >= 0) {
                                /* The message owns fd. */
                                safe_close(c.pidfd);
                                c.pidfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                                if (c.pidfd < 0)
                                        r = -errno;
                        }
                } else
                        r = sd_bus_message_skip(reply, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(reply);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(reply);
        if (r < 0)
                return r;
        *ret = c;
        c = (BusPeerCreds) { .pidfd = -EBADF };
        return 0;
}

IdentityCreds bus_peer_creds_identity(const BusPeerCreds *c) {
        return (IdentityCreds) {
                .uid = c->uid,
                .gid = IDENTITY_GID_UNKNOWN,
                .pid = c->have_pid && c->pid <= INT32_MAX ? (pid_t) c->pid : 0,
                .gids = c->gids,
                .n_gids = c->n_gids,
                .have_gids = c->have_gids,
        };
}

void bus_peer_creds_done(BusPeerCreds *c) {
        if (!c)
                return;
        free(c->gids);
        safe_close(c->pidfd);
        *c = (BusPeerCreds) { .pidfd = -EBADF };
}

int bus_caller_identity(sd_bus_message *m, Identity *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *c = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        IdentityCreds ic = { .gid = IDENTITY_GID_UNKNOWN };
        pid_t pid = 0;
        int r;

        /* The bus's own record of the connection (no SD_BUS_CREDS_AUGMENT, so
         * nothing from /proc of whoever has the pid now). */
        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID, &c);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(c, &ic.uid);
        if (r < 0)
                return r;
        if (sd_bus_creds_get_pid(c, &pid) >= 0 && pid > 0) {
                ic.pid = pid;
                pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        }
        /* pidfd_open() of the pid names whoever holds it now: its /proc is
         * used only if that process runs as the caller's uid. */
        return identity_from_creds(&ic, pidfd, true, ret);
}
