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
typedef struct SimRemoteHooks SimRemoteHooks;
int sim_remote_serve(SimDevice *d, int fd);
/* sim_remote_serve() with hooks (sim-remote.h below; NULL: none), e.g. to
 * learn of the process's end (end()). On failure end() is not called. */
int sim_remote_serve_hooked(SimDevice *d, int fd, const SimRemoteHooks *hooks, void *userdata);

/*
 * What the daemon checks around the ioctls of a process it serves for a
 * relayed client (daemon/sessions/kfd-relay.c; sim_remote_serve_process()),
 * and what it takes over of the process: called on the server's threads,
 * several at once; every one may be NULL.
 *  - before() may refuse a call unrun with a negative errno, or change its
 *    argument (the server's copy, as the process's table will read it) — e.g. to
 *    answer a call itself: a positive return means "answered, do not run
 *    it" and the argument is what the process gets back (0 is the result).
 *    It may block, e.g. to charge memory on the event loop.
 *  - after() sees the result and the argument as the call left it.
 *  - open_render() names the file of the process (a number its KfdOps
 *    knows) that an open of the render node gets — the one the daemon's own
 *    context in the process acquired its VM with, so that the process's
 *    ACQUIRE_VM and buffer mmaps find that VM — or a negative errno; the
 *    server hands out copies of it and never closes it for the process
 *    (close_keeps() says which numbers those are).
 *  - mmap() resolves an mmap of the process itself: 1 with *ret_memfd (a new
 *    fd, the server closes it) and *ret_offset, 0 for the process's own
 *    resolution (SimRemoteProcess.mmap_resolve), or a negative errno to
 *    refuse it.
 *  - release() is called once the process is killed and its calls have
 *    returned, before its memory and files go: the daemon stops using the
 *    process (its own GPU context in it), and returns when it has.
 *  - end() is the last call, once the process and all it held are gone.
 */
struct SimRemoteHooks {
        int (*before)(void *userdata, unsigned long request, void *arg);
        void (*after)(void *userdata, unsigned long request, const void *arg, int r);
        int (*open_render)(void *userdata, unsigned minor);
        bool (*close_keeps)(void *userdata, int fd);
        int (*mmap)(void *userdata, int fd, size_t length, uint64_t offset, int *ret_memfd, uint64_t *ret_offset);
        void (*release)(void *userdata);
        void (*end)(void *userdata);
};

/*
 * What a served process's calls run on, when it is not a process of the
 * simulator's own (a SimMm): any KFD context the daemon holds, reached
 * through a KfdOps table — on the kernel, a secondary KFD context of the
 * daemon's (daemon/contexts/context-kfd-process.c). The server calls:
 *  - ops: every open, ioctl, close, exception_info and doorbell_written of
 *    the process, with the file numbers the table handed out; the table
 *    refuses any other number (-EBADF) and answers as the kernel would.
 *  - dup_file(): an fd to hand the process for its open file fd, standing
 *    for it (never the daemon's own file: the process must not reach the
 *    device through it), or a negative errno.
 *  - mmap_resolve(): as sim_mm_mmap_resolve(): an fd the process maps at
 *    *ret_offset to get what mmap(fd, offset) would map, or a negative errno.
 *  - kill(): the process is going; calls asleep (WAIT_EVENTS) return soon
 *    with -EINTR, later ones at once.
 *  - free(): the last call, after every channel ended and hooks->release()
 *    returned.
 */
typedef struct SimRemoteProcess {
        const KfdOps *ops;
        void *userdata;
        int (*dup_file)(void *userdata, int fd);
        int (*mmap_resolve)(void *userdata, int fd, size_t length, uint64_t offset, int *ret_fd,
                            uint64_t *ret_offset);
        void (*kill)(void *userdata);
        void (*free)(void *userdata);
} SimRemoteProcess;

/*
 * The servers one owner runs, ended together: the simulated device's (its
 * remote processes) and the context pool's (relayed processes on KFD
 * contexts of the daemon's). stop() ends every server's process (EOF on its
 * control socket) and waits until each has torn it down; no server starts
 * after it. free() stops first.
 */
typedef struct SimRemoteRegistry SimRemoteRegistry;
int sim_remote_registry_new(SimRemoteRegistry **ret);
void sim_remote_registry_stop(SimRemoteRegistry *reg);
SimRemoteRegistry *sim_remote_registry_free(SimRemoteRegistry *reg);
/* Servers running now. */
unsigned sim_remote_registry_count(SimRemoteRegistry *reg);
/* Waits until reg runs no server, each having ended on its own. */
void sim_remote_registry_wait(SimRemoteRegistry *reg);

/*
 * Serves proc (copied; proc->free() is called at its end, also when this
 * fails) over the connected SOCK_SEQPACKET socket fd (taken over, closed on
 * failure too), with hooks (NULL: none; userdata theirs). Returns 0, -ENODEV
 * once reg is stopping, -ENOMEM, or an errno from creating the thread; on
 * failure end() is not called.
 */
int sim_remote_serve_process(SimRemoteRegistry *reg, int fd, const SimRemoteProcess *proc,
                             const SimRemoteHooks *hooks, void *userdata);

/*
 * For tests and fuzz targets: a server without threads of its own, which
 * its caller runs. sim_remote_serve_process_driven() and
 * sim_remote_serve_driven() are sim_remote_serve_process() and
 * sim_remote_serve_hooked() but for that, and give the server in *ret.
 * sim_remote_server_run() serves, on the caller's thread, every message
 * waiting on the server's control socket and channels (each socket's in
 * order), as the threads would, until none is left; it does not wait for
 * one. Returns 1 while the process lives, 0 once it ended (the control
 * socket's EOF or a protocol error there: torn down as sim-remote.h says,
 * end() called, the server freed), or a negative errno from poll(). The
 * registry's stop() waits for the end of a driven server too: run it to its
 * end first.
 */
typedef struct SimRemoteServer SimRemoteServer;
int sim_remote_serve_process_driven(SimRemoteRegistry *reg, int fd, const SimRemoteProcess *proc,
                                    const SimRemoteHooks *hooks, void *userdata, SimRemoteServer **ret);
int sim_remote_serve_driven(SimDevice *d, int fd, const SimRemoteHooks *hooks, void *userdata,
                            SimRemoteServer **ret);
int sim_remote_server_run(SimRemoteServer *s);

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
 * Bounds how long a call waits for its answer (none by default): a call
 * not answered within timeout_ms (< 0: no bound) — a WAIT_EVENTS within its
 * own timeout and timeout_ms; one with KFD_EVENT_TIMEOUT_INFINITE sleeps as
 * long as it asked — returns -ETIMEDOUT, and the connection is given up:
 * its channels shut down, so that a WAIT_EVENTS asleep wakes to -ENODEV, as
 * does every later call. For a peer that may stop answering (a proxy
 * worker, context-pool-kfd.c) whose caller must not wait for ever.
 */
void sim_remote_ops_set_reply_timeout(const KfdOps *ops, int timeout_ms);
/*
 * Closes everything: the channels (the daemon then tears the process down,
 * closing its files) and the fds of files still open. No other thread may be
 * inside an operation of ops while this runs. NULL-safe.
 */
void sim_remote_ops_free(const KfdOps *ops);
