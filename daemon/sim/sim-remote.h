/* SPDX-License-Identifier: MIT */
/*
 * sim-remote: the simulated GPU reached from another process. The simulated
 * device lives in the daemon (its engine threads, its memory as memfds); a
 * worker process that runs the GPU layer on its own KFD context needs a
 * KfdOps whose calls reach that device. The daemon serves each worker over a
 * connected AF_UNIX SOCK_SEQPACKET socket as a simulated user process of its
 * own (a SimMm: its own primary KFD context, its own files, the device's
 * engines shared with everyone); the worker gets a KfdOps table that carries
 * every call over that socket, with real fds on its side (files, dma-bufs and
 * the memfds it maps arrive in SCM_RIGHTS). The wire is described in
 * sim-remote-protocol.h.
 *
 * The server treats the worker as hostile: every size and count is bounded,
 * fds the worker names are its own or nothing (-EBADF), pointers never cross,
 * and a malformed message ends its channel — never the daemon.
 */
#pragma once

#include "kfd/kfd-ops.h"
#include "sim.h"

/*
 * Daemon side. Serves a new simulated user process on the GPU d over the
 * connected SOCK_SEQPACKET socket fd (taken over, closed on failure too):
 * every request that arrives runs as that process's kernel call, on threads
 * of the server's own (one for the socket, one per channel the process
 * opens), so this never blocks. When the process goes away — its socket
 * reaches EOF, as when it dies or exits, or it breaks the protocol there —
 * everything of the process is torn down as the kernel does at process exit:
 * a WAIT_EVENTS asleep for it returns -EINTR, its files are closed, its
 * contexts (queues, events, memory) destroyed; dma-bufs it exported stay
 * valid. sim_device_free() ends every server first. Returns 0, -ENODEV when
 * the device is shutting down, -ENOMEM, or another negative errno from
 * creating the thread.
 */
int sim_remote_serve(SimDevice *d, int fd);

/*
 * What the daemon checks around the ioctls of a process it serves for a
 * relayed client (daemon/sessions/kfd-relay.c): called on the server's
 * threads, several at once. before() may refuse a call unrun with a
 * negative errno (it may block, e.g. to charge memory on the event loop);
 * after() sees the result and the argument as the simulator left it; end()
 * is the last call, once the process and all it held are gone.
 */
typedef struct SimRemoteHooks {
        int (*before)(void *userdata, unsigned long request, const void *arg);
        void (*after)(void *userdata, unsigned long request, const void *arg, int r);
        void (*end)(void *userdata);
} SimRemoteHooks;

/* sim_remote_serve() with hooks (NULL: none), for a process that sees only
 * the GPU gpu_id (0: all; SimMm.visible_gpu_id). On failure end() is not called. */
int sim_remote_serve_hooked(SimDevice *d, int fd, uint32_t gpu_id, const SimRemoteHooks *hooks, void *userdata);

/*
 * Process side (in the worker). A KfdOps whose every operation is carried out
 * by the daemon's simulated GPU over fd (the other end of the socket given to
 * sim_remote_serve(); taken over, closed on failure too). The handshake
 * brings the sysfs root (ops->sysfs_root, a directory of the daemon's that
 * the worker reads). Thread-safe: calls from several threads at once proceed
 * on channels of their own (a WAIT_EVENTS asleep in one thread does not hold
 * up an ALLOC in another), at most SIM_REMOTE_MAX_CHANNELS at once (-EMFILE
 * past that). Returns 0, -EPROTO if the peer's answer to the handshake is not
 * a sim-remote server's, -ETIMEDOUT if none comes within 10 s, -ENOMEM.
 *
 * The operations return what the in-process simulator returns, plus -ENODEV
 * once the daemon's end is gone and -EPROTO for a malformed answer; arrays
 * beyond the wire's bounds (sim-remote-protocol.h: WAIT_EVENTS events,
 * MAP/UNMAP device ids) are -ENOMEM, as the kernel's allocation of them
 * would be for a large enough count.
 */
int sim_remote_ops_new(int fd, const KfdOps **ret);
/*
 * Closes everything: the channels (the daemon then tears the process down,
 * closing its files) and the fds of files still open. No other thread may be
 * inside an operation of ops while this runs. NULL-safe.
 */
void sim_remote_ops_free(const KfdOps *ops);
