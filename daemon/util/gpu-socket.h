/* SPDX-License-Identifier: MIT */
/*
 * The socket of one GPU: beside the daemon's socket, a socket per GPU whose
 * connections may use that GPU only, so that a container given one socket
 * (a CDI device kfdbroker.org/gpu=N) gets one GPU. Its path is the main
 * socket's with "-gpuN" before a ".sock" suffix (else at the end):
 * /run/kfdbroker/kfdbroker.sock -> /run/kfdbroker/kfdbroker-gpu1.sock. The
 * daemon (which listens there) and kfdbrokerctl cdi (which mounts them)
 * name them with this one function.
 */
#pragma once

#include <stddef.h>

/* Writes GPU index's socket path for main_path into buf: 0, or -ENAMETOOLONG. */
int gpu_socket_path(const char *main_path, unsigned index, char *buf, size_t size);
