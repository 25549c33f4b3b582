/* SPDX-License-Identifier: MIT */
/*
 * Listener: the listening SOCK_SEQPACKET socket — taken from systemd socket
 * activation (sd_listen_fds) or bound at --listen PATH — and the accept loop
 * that turns connections into Sessions. Owned by the Manager.
 */
#pragma once

#include "sessions/forward.h"

typedef struct Listener Listener;

/*
 * path: binds it, and beside it a socket for each GPU the set serves
 * (gpu-socket.h), whose sessions may use that GPU only; NULL: takes every
 * socket systemd passed (the first is the main one, the unit lists the
 * GPUs' after it), -ENOENT if there is none. Sets set->socket_path to the
 * main socket's path.
 */
int listener_new(SessionSet *set, const char *path, Listener **ret);
/* Stops accepting, closes the sockets, removes the socket files we created. */
Listener *listener_free(Listener *l);
static inline void listener_freep(Listener **l) {
        listener_free(*l);
}
