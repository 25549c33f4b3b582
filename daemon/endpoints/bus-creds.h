/* SPDX-License-Identifier: MIT */
/*
 * BusPeerCreds: what the bus says of a peer's connection, from
 * org.freedesktop.DBus.GetConnectionCredentials — the uid and groups fixed
 * when the peer connected to the bus, its pid then, and (dbus-daemon 1.15
 * and later) a pidfd for the process that connected. Nothing here is taken
 * from /proc: sd-bus's SD_BUS_CREDS_AUGMENT would fill the gid, groups,
 * cgroup and unit from /proc/PID of whoever holds that pid now (systemd 252,
 * bus-creds.c bus_creds_add_more()), which is what a reused pid abuses.
 * Owned by whoever read it; bus_peer_creds_done() frees it.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

#include "policy/identity.h"

typedef struct BusPeerCreds {
        bool have_uid, have_pid, have_gids;
        uint32_t uid, pid;
        gid_t *gids;
        size_t n_gids;
        int pidfd; /* ProcessFD, our own copy; -EBADF if the bus gave none */
} BusPeerCreds;

/**
 * bus_peer_creds_read() - reads a GetConnectionCredentials reply.
 * @reply: the method return, its a{sv} not yet read
 * @ret: filled on success; keys other than UnixUserID, UnixGroupIDs,
 *       ProcessID and ProcessFD are skipped, as are those of another type
 *
 * Returns 0, -ENOMEM, or -errno from sd-bus for a malformed reply.
 */
int bus_peer_creds_read(sd_bus_message *reply, BusPeerCreds *ret);

/* The connection's side of an Identity: the gid is unknown (the bus tells
 * the groups, not which is primary). Valid while c lives. */
IdentityCreds bus_peer_creds_identity(const BusPeerCreds *c);

void bus_peer_creds_done(BusPeerCreds *c);

/**
 * bus_caller_identity() - who called a method, for the audit log of a
 * management action: uid and pid as the bus records the caller's connection,
 * the unit from /proc only through a pidfd whose process still has that pid
 * and the caller's uid (identity_from_creds() with pidfd_by_pid), else
 * unknown. Asks the bus synchronously, as authorize() does for the uid.
 * Returns 0, or -errno from sd-bus or -ENOMEM; ret is freed with identity_done().
 */
int bus_caller_identity(sd_bus_message *m, Identity *ret);
