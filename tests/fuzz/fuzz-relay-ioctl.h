/* SPDX-License-Identifier: MIT */
/* The input of fuzz-relay-ioctl (fuzz-relay-ioctl.c says what each part
 * means), shared with the seeds' writer (fuzz-gen-ioctl.c), and its oracle
 * (fuzz-relay-ioctl-oracle.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/ioctl.h>

#include <amdgpu_drm.h>

#include "kfd/kfd-uapi.h"
#include "sim/sim-remote-protocol.h"

/* The flags byte. */
#define RIO_FLAG_SIM_PROCESS 0x1u
#define RIO_FLAG_DAEMON_CONTEXT 0x2u
#define RIO_FLAG_NO_HANDSHAKE 0x4u
/* Both bits: the server runs on threads of its own, as in the daemon; else it
 * is driven on the fuzzer's thread (sim_remote_server_run()), which is cheaper. */
#define RIO_FLAG_THREADS 0x18u

/* The operations (opcode byte modulo RIO_OP_COUNT). */
enum {
        RIO_OP_RAW,
        RIO_OP_IOCTL,
        RIO_OP_OPEN_KFD,
        RIO_OP_OPEN_RENDER,
        RIO_OP_CLOSE,
        RIO_OP_MMAP,
        RIO_OP_EXCEPTION_INFO,
        RIO_OP_DOORBELL,
        RIO_OP_NEW_CHANNEL,
        RIO_OP_CONTROL,
        RIO_OP_ALLOC,
        RIO_OP_COUNT,
};

/* IOCTL's fix-up byte. */
#define RIO_FIX_GPU_ID 0x1u     /* the client's GPU (and ACQUIRE_VM's render file) */
#define RIO_FIX_NEIGHBOUR 0x10u /* with RIO_FIX_GPU_ID, ACQUIRE_VM: another relayed process's render file */
#define RIO_FIX_HANDLE 0x2u     /* a buffer the client has (bits 4-6 which) */
#define RIO_FIX_EVENT 0x4u      /* the event the client made last */
#define RIO_FIX_ARRAY_SIZE 0x8u /* an array length of the input's own (2 bytes) */
#define RIO_FIX_SIZE 0x20u      /* the request word's size of the input's own (1 byte) */
#define RIO_FIX_OTHER_GPU 0x40u /* with RIO_FIX_GPU_ID: the device's other GPU */
#define RIO_FIX_FD 0x80u        /* an fd along (1 byte: which) */

/* The calls IOCTL's request byte picks (modulo one more than their count:
 * that one is 4 bytes of the input's own). */
static const unsigned long fuzz_relay_ioctl_requests[] = {
        AMDKFD_IOC_GET_VERSION, AMDKFD_IOC_CREATE_QUEUE, AMDKFD_IOC_DESTROY_QUEUE, AMDKFD_IOC_SET_MEMORY_POLICY,
        AMDKFD_IOC_GET_CLOCK_COUNTERS, AMDKFD_IOC_GET_PROCESS_APERTURES, AMDKFD_IOC_UPDATE_QUEUE,
        AMDKFD_IOC_CREATE_EVENT, AMDKFD_IOC_DESTROY_EVENT, AMDKFD_IOC_SET_EVENT, AMDKFD_IOC_RESET_EVENT,
        AMDKFD_IOC_WAIT_EVENTS, AMDKFD_IOC_GET_TILE_CONFIG, AMDKFD_IOC_SET_TRAP_HANDLER,
        AMDKFD_IOC_SET_SCRATCH_BACKING_VA, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, AMDKFD_IOC_ACQUIRE_VM,
        AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, AMDKFD_IOC_FREE_MEMORY_OF_GPU, AMDKFD_IOC_MAP_MEMORY_TO_GPU,
        AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, AMDKFD_IOC_SET_CU_MASK, AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
        AMDKFD_IOC_GET_DMABUF_INFO, AMDKFD_IOC_IMPORT_DMABUF, AMDKFD_IOC_ALLOC_QUEUE_GWS, AMDKFD_IOC_SMI_EVENTS,
        AMDKFD_IOC_SVM, AMDKFD_IOC_SET_XNACK_MODE, AMDKFD_IOC_CRIU_OP, AMDKFD_IOC_AVAILABLE_MEMORY,
        AMDKFD_IOC_EXPORT_DMABUF, AMDKFD_IOC_RUNTIME_ENABLE, AMDKFD_IOC_CREATE_PROCESS,
        DRM_IOCTL_AMDGPU_GEM_CREATE, DRM_IOCTL_GEM_CLOSE, DRM_IOCTL_PRIME_HANDLE_TO_FD,
};

/* What libdrm asks of a render node about its GPU (context-kfd-render.c),
 * picked by the request byte's top values, 254 and 255 (which named
 * SMI_EVENTS and SVM, as 26 and 64 still do): added after the seeds were
 * made, so that the table above keeps what their bytes mean. */
#define RIO_PICK_RENDER_INFO 254u
static const unsigned long fuzz_relay_ioctl_render_info[] = { DRM_IOCTL_VERSION, DRM_IOCTL_AMDGPU_INFO };


static inline void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-relay-ioctl: broken promise: %s\n", what);
                abort();
        }
}

/* fuzz-relay-ioctl-oracle.c */
/* The argument as the server reads it: the request's bytes if it writes to
 * the kernel, zeros otherwise and past its size. */
void rio_view_of(unsigned long request, const uint8_t *arg, uint8_t *view, size_t view_size);
/* The n-byte little-endian field at off. */
uint64_t rio_field(const uint8_t *view, size_t off, unsigned n);
/* Whether the server ends the channel on this message (with an fd or not). */
bool rio_malformed(const uint8_t *msg, size_t n, bool has_fd);
void rio_check_errno(int32_t r);
/* What the client may reach: its GPU, and the file numbers the server gave
 * it (-1: none). A relayed process's numbers stay valid after CLOSE (the
 * files are the daemon's). */
typedef struct RioReach {
        uint32_t gpu_id, other_gpu_id;
        int render[4];
        int kfd;                /* the KFD file's number the server gave, or -1 */
        bool relayed;           /* a relayed client's KFD process (else a simulated process) */
} RioReach;
/* The reply to an IOCTL request: its argument (got, arg_size bytes), array
 * and fd as the wire promises; a call that names the other GPU (but
 * GET_CLOCK_COUNTERS of a simulated process, which the kernel answers for
 * any id), or ACQUIRE_VM of a file that is not a render file the client
 * was given, never succeeds (the argument read as the kernel reads it: the
 * request's bytes, zeros past its size); a relayed process's calls reach
 * its KFD file only (-EACCES on its render file, -EBADF elsewhere) and
 * never make or change a queue. */
void rio_check_ioctl_reply(const RioReach *reach, const SimRemoteRequest *req, const uint8_t *payload,
                           const SimRemoteReply *rep, const uint8_t *got, size_t array, int fd);

/* fuzz-relay-ioctl-client.c: one client of the server. */
#define MAX_KEPT_FDS 8u
#define MAX_BOS 32u

typedef struct Bo {
        uint64_t handle, mmap_offset, va, size;
        bool freed;                 /* FREE_MEMORY_OF_GPU succeeded */
        bool held;                  /* exported or mapped: the object may outlive its handle */
} Bo;

typedef struct Client {
        int control, channel;
        bool hello_done;            /* the handshake was answered */
        bool process_gone;          /* the control channel ended */
        int kfd, render;            /* the numbers the server gave, or -1 */
        RioReach reach;             /* its GPU, the render numbers it was given */
        int kept[MAX_KEPT_FDS];     /* fds that came with replies: dma-bufs, memfds, copies */
        unsigned n_kept;
        Bo bos[MAX_BOS];            /* every ALLOC that succeeded, however it was asked for */
        unsigned n_bos;
        bool unknown_bos;           /* a buffer the client made but cannot place (past MAX_BOS, an
                                     * answer cut before mmap_offset, an import): it may hold any
                                     * offset a freed one held */
        uint32_t event_id;          /* the last event CREATE_EVENT gave */
        uint64_t next_va;
        uint8_t *buf;               /* a reply: SIM_REMOTE_MAX_MESSAGE + 1 bytes */
        uint32_t render_minor;      /* the client's GPU's render node */
        bool debug;                 /* each message and its answer on stderr */
        struct SimRemoteServer *server; /* driven: run before each answer is read; NULL once it ended */
} Client;

/* Keeps an fd that came with an answer (closing the oldest past MAX_KEPT_FDS). */
void rio_keep_fd(Client *c, int fd);
/* An fd to send along: 0 none, 1 a memfd, 2 a pipe's end, 3 a copy of one
 * that came with an answer, 4 a socket (kind modulo 5); the caller closes it. */
int rio_make_fd(Client *c, unsigned kind);
/* A socket of the client's end: with a driven server, one that does not
 * wait (each answer is there once sim_remote_server_run() returned). */
void rio_client_socket(const Client *c, int sock);
int rio_send(int sock, const void *msg, size_t n, int fd);
/* The answer on sock into c->buf: its length (0: EOF) and its fd. */
ssize_t rio_recv_answer(Client *c, int sock, int *ret_fd);
/* Sends msg (with fd, closed here) and checks what comes back; false when
 * the channel ended (as the oracle said it must). */
bool rio_exchange(Client *c, int sock, uint8_t *msg, size_t n, int fd);
void rio_handshake(Client *c);
/* NEW_CHANNEL: 0, -EMFILE, or -EPIPE once the process is gone. */
int rio_new_channel(Client *c);
/* A channel ended: the process must answer on a new one. */
void rio_after_channel_end(Client *c);
