/* SPDX-License-Identifier: MIT */
/*
 * Listener: the listening SOCK_SEQPACKET socket — taken from systemd socket
 * activation (sd_listen_fds) or bound at --listen PATH — and the accept loop
 * that turns connections into Sessions. Owned by the Manager.
 */
#pragma once

#include "sessions/forward.h"

typedef struct Listener Listener;

/* path NULL: use the socket-activated fd; -ENOENT if there is none. */
int listener_new(SessionSet *set, const char *path, Listener **ret);
/* Stops accepting, closes the socket, removes a socket file we created. */
Listener *listener_free(Listener *l);
