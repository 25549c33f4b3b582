/* SPDX-License-Identifier: MIT */
/*
 * Datagram transport of the client: one sendmsg(2)/recvmsg(2) per message on
 * the SOCK_SEQPACKET socket, with fds as SCM_RIGHTS. Received fds are
 * close-on-exec (MSG_CMSG_CLOEXEC); a datagram or its control data that did
 * not fit (MSG_TRUNC/MSG_CTRUNC) is an error and its fds are closed, so no fd
 * a peer sends can leak into the process.
 */
#pragma once

#include <stddef.h>

/* Sends one datagram with n_fds fds (n_fds <= 8). Waits while the socket is full. */
int client_socket_send(int fd, const void *buf, size_t len, const int *fds, size_t n_fds);

/*
 * Receives one datagram without blocking. Up to max_fds fds are stored in
 * ret_fds (count in *ret_n_fds); any further fds are closed and counted in
 * *ret_n_extra (may be NULL). Returns the datagram's length, -EAGAIN if
 * nothing is waiting, -ECONNRESET at end of stream, -EBADMSG if the datagram
 * or its fds were truncated.
 */
int client_socket_recv(int fd, void *buf, size_t size, int *ret_fds, size_t max_fds,
                       size_t *ret_n_fds, size_t *ret_n_extra);

/* poll(2) for POLLIN on fd; timeout_ms as poll(2). 1 readable, 0 timeout, negative errno. */
int client_socket_wait(int fd, int timeout_ms);
