/* SPDX-License-Identifier: MIT */
/*
 * The identity of a connection's peer (identity.h): what the connection's
 * credentials say, and what the process that made it says in /proc — the
 * latter only through a pidfd known to name that process.
 *
 * The credentials are the connecting task's at connect(): SO_PEERCRED and
 * SO_PEERGROUPS (Linux 4.13) return the socket's sk_peer_cred, set in
 * unix_stream_connect() (net/unix/af_unix.c, copy_peercred()), and
 * dbus-daemon's UnixUserID and UnixGroupIDs are the same values read when
 * the bus accepted the connection (dbus-sysdeps-unix.c,
 * _dbus_read_credentials_socket(): "the credentials that were active at the
 * time the socket was opened"). No pid reuse can change them, so the uid,
 * gid and groups policy matches on come from there.
 *
 * The process — comm, cgroup, unit, app id, container — has no such record:
 * it must be read from /proc/PID, and a pid names whoever holds it now. Once
 * the connecting process has exited, anyone may get its pid (Linux hands pids
 * out cyclically: kernel/pid.c, alloc_pid()). So /proc is read only through a
 * pidfd that names the connecting process: SO_PEERPIDFD (Linux 6.5) and the
 * bus's ProcessFD (GetConnectionCredentials, D-Bus specification; dbus-daemon
 * 1.15 and later) give one; the read is bracketed by checks that the
 * pidfd's process still lives and has that pid, so what /proc said was its. Before Linux 6.5 the daemon has only pidfd_open(pid), which
 * names whoever holds the pid when it is called; it is called at accept(),
 * before any queueing, and its /proc is used only if that process's
 * effective uid is the connection's (the residual risk is in
 * docs/policy.md, "Identity").
 */
#include "policy/identity.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"
#include "util/macro.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59 /* Linux 4.13, include/uapi/asm-generic/socket.h */
#endif
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5, include/uapi/asm-generic/socket.h */
#endif

int identity_from_pid(pid_t pid, const struct ucred *cred, Identity *ret) {
        _cleanup_close_ int pidfd = -EBADF;

        if (pid <= 0)
                return -EINVAL;
        pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0) {
                if (errno == ESRCH)
                        return -ESRCH;
                /* ENOSYS (before Linux 5.3): no liveness check possible. */
                log_debug("identity: pidfd_open(%i) failed: %s", (int) pid, strerror(errno));
        }
        return identity_from_pidfd(pidfd, pid, cred, ret);
}

int identity_peer_pidfd(int sockfd, bool *ret_exact) {
        struct ucred cred;
        socklen_t len = sizeof(int);
        int fd = -1;

        if (getsockopt(sockfd, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0) {
                *ret_exact = true;
                return fd;
        }
        len = sizeof(cred);
        if (getsockopt(sockfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        if (cred.pid <= 0)
                return -ESRCH; /* not visible in our pid namespace */
        fd = (int) syscall(SYS_pidfd_open, cred.pid, 0);
        if (fd < 0)
                return -errno;
        *ret_exact = false;
        return fd;
}

/* SO_PEERGROUPS into a malloc'd array; -ENOPROTOOPT before Linux 4.13. */
static int peer_groups(int sockfd, gid_t **ret, size_t *ret_n) {
        _cleanup_free_ gid_t *gids = NULL;
        socklen_t len = 64 * sizeof(gid_t);

        for (;;) {
                gid_t *n = realloc(gids, len ? len : sizeof(gid_t));

                if (!n)
                        return -ENOMEM;
                gids = n;
                if (getsockopt(sockfd, SOL_SOCKET, SO_PEERGROUPS, gids, &len) == 0)
                        break;
                /* ERANGE: len now says how much is needed (sock_getsockopt()). */
                if (errno != ERANGE || len > IDENTITY_MAX_GIDS * sizeof(gid_t))
                        return -errno;
        }
        *ret_n = len / sizeof(gid_t);
        *ret = TAKE_PTR(gids);
        return 0;
}

int identity_from_peer(int sockfd, int pidfd, bool pidfd_exact, Identity *ret) {
        _cleanup_close_ int own_pidfd = -EBADF;
        _cleanup_free_ gid_t *gids = NULL;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        size_t n_gids = 0;
        int r;

        if (getsockopt(sockfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        r = peer_groups(sockfd, &gids, &n_gids);
        if (r == -ENOMEM)
                return r;
        if (pidfd < 0 && cred.pid > 0) {
                own_pidfd = identity_peer_pidfd(sockfd, &pidfd_exact);
                if (own_pidfd == -EMFILE || own_pidfd == -ENFILE)
                        return own_pidfd; /* as above */
                pidfd = own_pidfd;
        }
        r = identity_from_creds(&(IdentityCreds) { .uid = cred.uid, .gid = cred.gid, .pid = MAX(cred.pid, 0),
                                                   .gids = gids, .n_gids = n_gids, .have_gids = r >= 0 },
                                pidfd, !pidfd_exact, ret);
        if (r >= 0 && ret->process_unknown && cred.pid > 0) {
                /* The process that connected has gone (or its pid is another
                 * user's now). Refused, as it always was: a session whose
                 * process were merely unknown would escape the rules that
                 * restrict by unit or container. */
                identity_done(ret);
                return -ESRCH;
        }
        return r;
}

int identity_from_creds(const IdentityCreds *c, int pidfd, bool pidfd_by_pid, Identity *ret) {
        _cleanup_(identity_done) Identity id = { .user_unit_uid = (uid_t) -1, .process_euid = (uid_t) -1 };
        bool known = false;
        int r;

        if (pidfd >= 0 && c->pid > 0) {
                struct ucred u = { .pid = c->pid, .uid = c->uid, .gid = c->gid };

                /* Checks the pidfd's pid is c->pid, reads, checks it still lives. */
                r = identity_from_pidfd(pidfd, c->pid, &u, &id);
                /* The daemon's own shortage (memory, a full fd table) says
                 * nothing of the peer: not "unknown", which refuses it as gone. */
                if (r == -ENOMEM || r == -EMFILE || r == -ENFILE)
                        return r;
                if (r >= 0 && pidfd_by_pid && id.process_euid != c->uid)
                        log_debug("identity: pid %i now runs as uid %u, the connection as uid %u: not its maker",
                                  (int) c->pid, (unsigned) id.process_euid, (unsigned) c->uid);
                else if (r >= 0)
                        known = true;
                else
                        log_debug("identity: the process of pid %i cannot be read: %s", (int) c->pid, strerror(-r));
        }
        if (!known) {
                identity_done(&id);
                id.process_unknown = true;
        }
        id.uid = c->uid;
        id.gid = c->gid;
        id.pid = c->pid;
        if (c->have_gids) {
                free(id.gids);
                id.gids = NULL;
                id.n_gids = 0;
                if (c->n_gids > 0) {
                        id.gids = reallocarray(NULL, c->n_gids, sizeof(gid_t));
                        if (!id.gids)
                                return -ENOMEM;
                        memcpy(id.gids, c->gids, c->n_gids * sizeof(gid_t));
                        id.n_gids = c->n_gids;
                }
        }
        *ret = id;
        id = (Identity) {};
        return 0;
}
