/* SPDX-License-Identifier: MIT */
/*
 * Identity: who a client is, as the kernel tells it — never as the client
 * says. uid/gid/pid come from SO_PEERCRED; supplementary groups, comm and the
 * cgroup path from /proc/PID; the systemd unit, a Flatpak/snap app id and a
 * container name are derived from the cgroup path (and, where the daemon may
 * read it, from the process's root and namespaces). Policy rules match on it
 * and accounting aggregates by it.
 *
 * An Identity is a plain value owned by whoever filled it (a Session);
 * identity_done() frees its strings, identity_copy() duplicates it. Reading is
 * pinned to the process through a pidfd: /proc is read first, then the pidfd
 * is checked to still name a live process, so a pid reused in between is
 * caught (-ESRCH) instead of yielding a stranger's identity.
 *
 * A connection's identity (identity-peer.c) takes uid, gid and groups from the
 * connection's credentials, fixed when it was made, and the rest from /proc
 * only through a pidfd known to name the process that connected; where there
 * is none, those fields are unknown (process_unknown) and policy rules on them
 * do not match.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Upper bound on supplementary groups read (the kernel's NGROUPS_MAX). */
#define IDENTITY_MAX_GIDS 65536u

typedef enum IdentityAppSource {
        IDENTITY_APP_NONE = 0,
        IDENTITY_APP_FLATPAK_INFO,  /* /proc/PID/root/.flatpak-info [Application] name= */
        IDENTITY_APP_FLATPAK_SCOPE, /* cgroup unit app-flatpak-<id>-<n>.scope */
        IDENTITY_APP_SNAP,          /* cgroup unit snap.<name>.<app>….scope/.service */
} IdentityAppSource;

typedef enum IdentityContainerSource {
        IDENTITY_CONTAINER_NONE = 0,
        IDENTITY_CONTAINER_MACHINE,    /* machine-<name>.scope (systemd-machined) */
        IDENTITY_CONTAINER_NSPAWN,     /* systemd-nspawn@<name>.service */
        IDENTITY_CONTAINER_DOCKER,     /* docker-<id>.scope or /docker/<id> */
        IDENTITY_CONTAINER_PODMAN,     /* libpod-<id>.scope or …/libpod-<id> */
        IDENTITY_CONTAINER_CRI,        /* cri-containerd-<id>.scope, crio-<id>.scope */
        IDENTITY_CONTAINER_LXC,        /* /lxc.payload.<name>, /lxc/<name> */
        IDENTITY_CONTAINER_NAMESPACE,  /* other pid or mount namespace, no name known */
} IdentityContainerSource;

/* gid of a peer whose primary group its connection does not tell (D-Bus:
 * the bus gives the groups, not which one is primary). */
#define IDENTITY_GID_UNKNOWN ((gid_t) -1)

typedef struct Identity {
        uid_t uid;
        gid_t gid; /* IDENTITY_GID_UNKNOWN if the connection does not tell */
        pid_t pid; /* the pid that connected, as the kernel or bus reported it */
        gid_t *gids; /* supplementary groups (Groups: in /proc/PID/status) */
        size_t n_gids;
        char comm[17]; /* client-controlled: escape before logging */

        char *cgroup;      /* cgroup v2 path, e.g. "/system.slice/foo.service"; NULL if unknown */
        char *unit;        /* system unit: first non-slice component, e.g. "foo.service" */
        char *user_unit;   /* unit inside user@UID.service, e.g. "foo.service"; else NULL */
        uid_t user_unit_uid; /* UID of that user@UID.service, (uid_t) -1 if none */
        char *slice;       /* innermost slice above the system unit, e.g. "system.slice" */

        char *app_id; /* Flatpak or snap app id, NULL if none */
        IdentityAppSource app_source;

        /* True if the client runs in a container: a container cgroup convention
         * matched, or its pid or mount namespace differs from the daemon's
         * and it is not a Flatpak app (Flatpak sandboxes also use namespaces). */
        bool in_container;
        char *container; /* container/machine name or id, NULL if unknown */
        IdentityContainerSource container_source;
        /* docker, podman, CRI: the full 64-hex id (container has its 12-hex
         * short form); NULL otherwise. */
        char *container_id;
        /* Kubernetes: the pod's UID (8-4-4-4-12 hex, as `kubectl get pod -o
         * jsonpath={.metadata.uid}` prints it) from a kubepods…pod<uid> cgroup
         * component; NULL outside a pod (identity-pod.c). */
        char *pod_uid;
        bool other_pid_ns, other_mnt_ns; /* as far as readable */

        /* The process behind the connection could not be pinned (no pidfd
         * known to name it, or it has gone): comm, cgroup, unit, user unit,
         * slice, app id and container are unknown, and policy rules on them
         * do not match (policy.c). */
        bool process_unknown;
        uid_t process_euid; /* effective uid in /proc/PID/status; (uid_t) -1 if not read */
} Identity;

/* The credentials a connection carries, fixed when it was made: SO_PEERCRED
 * and SO_PEERGROUPS, or the bus's GetConnectionCredentials. */
typedef struct IdentityCreds {
        uid_t uid;
        gid_t gid;         /* IDENTITY_GID_UNKNOWN if not told */
        pid_t pid;         /* 0 if not told */
        const gid_t *gids; /* the groups; NULL with n_gids 0 when have_gids is false */
        size_t n_gids;
        bool have_gids;    /* false: unknown, so read from /proc through a pinned pidfd */
} IdentityCreds;

/**
 * identity_peer_pidfd() - a pidfd for the peer of a connected AF_UNIX socket,
 * to be taken at accept(), before the connection waits anywhere.
 * @sockfd: the accepted socket
 * @ret_exact: true if it names the process that connected (SO_PEERPIDFD,
 *             Linux 6.5); false if it is pidfd_open() of SO_PEERCRED's pid,
 *             which names whoever holds that pid now
 *
 * Returns the pidfd, -ESRCH if the pid is gone or not visible, or -errno.
 */
int identity_peer_pidfd(int sockfd, bool *ret_exact);

/**
 * identity_from_peer() - the identity of a connected AF_UNIX socket's peer.
 * @sockfd: the socket
 * @pidfd: from identity_peer_pidfd() at accept, or -1 to take one now
 * @pidfd_exact: what identity_peer_pidfd() said of it
 * @ret: filled on success
 *
 * uid and gid from SO_PEERCRED, the groups from SO_PEERGROUPS (Linux 4.13;
 * before, from /proc through the pidfd), the rest as identity_from_creds().
 * A peer whose pid is not visible here (another pid namespace) has an
 * unknown process; one whose connecting process cannot be pinned (gone, or
 * its pid now another uid's) is refused.
 * Returns 0, -ESRCH if the connecting process is gone, -ENOMEM, -EMFILE or
 * -ENFILE when the caller's fd table (or the system's) has no room for the
 * pidfd or /proc files it needs, or -errno from getsockopt().
 */
int identity_from_peer(int sockfd, int pidfd, bool pidfd_exact, Identity *ret);

/**
 * identity_from_creds() - an identity from a connection's credentials and a
 * pidfd for the process that made it.
 * @c: the credentials; uid, gid and (if have_gids) groups are taken as they are
 * @pidfd: -1 if there is none; it is used, not closed
 * @pidfd_by_pid: the pidfd came from pidfd_open(c->pid) and may name a process
 *                that got the pid after the connecting one exited: its /proc
 *                is used only if its effective uid is c->uid
 * @ret: filled on success
 *
 * The process's fields come from /proc/PID only if pidfd names a live process
 * with pid c->pid before and after the read; otherwise ret->process_unknown.
 * Returns 0 or -ENOMEM.
 */
int identity_from_creds(const IdentityCreds *c, int pidfd, bool pidfd_by_pid, Identity *ret);
/* Same for a process given by pid and the credentials the kernel stamped on
 * its connection (cred may be NULL: then uid/gid come from /proc/PID/status). */
int identity_from_pid(pid_t pid, const struct ucred *cred, Identity *ret);
/* Same with a pidfd the caller already holds (the Session's); the pidfd is
 * used for the liveness check and not closed. */
int identity_from_pidfd(int pidfd, pid_t pid, const struct ucred *cred, Identity *ret);

/* The worker behind the three above, with the /proc root as a parameter so
 * tests can point it at a fabricated tree. pidfd < 0 skips the liveness check;
 * self_ns_root is where the daemon's own ns/ links are read ("/proc/self" in
 * production), NULL to skip the namespace comparison. */
int identity_read(const char *proc_root, pid_t pid, int pidfd, const struct ucred *cred,
                  const char *self_ns_root, Identity *ret);

/* Derives unit, user unit, slice, app id and container from id->cgroup alone
 * (identity_read calls it; exposed for tests). Returns 0 or -ENOMEM. */
int identity_parse_cgroup(Identity *id);

/* Makes every string of id valid UTF-8 (identity_read calls it): the bytes
 * of an invalid sequence become "\xNN" (comm: '?'). Names a client picks
 * (a cgroup, a scope's escaped app id, its comm) may be any bytes, and D-Bus
 * refuses a reply with one invalid string. Returns 0 or -ENOMEM. */
int identity_make_valid_utf8(Identity *id);

void identity_done(Identity *id);
int identity_copy(const Identity *src, Identity *ret);

/* 0 if the pidfd's process is alive, -ESRCH if it is gone, else -errno. */
int identity_pidfd_alive(int pidfd);

/* True if gid is the primary or a supplementary group. */
bool identity_has_gid(const Identity *id, gid_t gid);

const char *identity_app_source_to_string(IdentityAppSource s);
const char *identity_container_source_to_string(IdentityContainerSource s);

/**
 * identity_pod_from_cgroup() - the Kubernetes pod UID in a cgroup path: the
 * kubelet's pod cgroup, kubepods[-QOS]-pod<uid with '_' for '-'>.slice
 * (systemd driver) or kubepods/[QOS/]pod<uid> (cgroupfs driver).
 * @ret: the UID with dashes, malloc'd; NULL if the path holds none
 * @ret_container_id: (may be NULL) under the cgroupfs driver, the bare 64-hex
 *                    container id in the component after the pod's; else NULL
 * Returns 0 or -ENOMEM.
 */
int identity_pod_from_cgroup(const char *cgroup, char **ret, char **ret_container_id);

/* ---- The caller of a management action, for the audit log (identity-caller.c) ---- */

typedef struct LogFields LogFields;

/**
 * identity_caller_describe() - "uid U (unit UNIT, pid P)" naming who asked
 * for a management action; the user unit where there is one, else the
 * system unit, escaped; "unknown" where the process could not be pinned.
 * Returns buf.
 */
const char *identity_caller_describe(const Identity *id, char *buf, size_t n);
/* The same as journal fields KFDBROKER_CALLER_UID, _PID and _UNIT (if known). */
void identity_caller_log_fields(const Identity *id, LogFields *f);
