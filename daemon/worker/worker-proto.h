/* SPDX-License-Identifier: MIT */
/*
 * The messages between kfdbrokerd and a worker process: one GPU context of a
 * client, run in a process of its own (`kfdbrokerd --worker`, started by the
 * contexts layer, context-worker.c). One datagram per message on a
 * SOCK_SEQPACKET socketpair; fds travel as SCM_RIGHTS with the message that
 * names them. Every message is a WorkerMsgHeader followed by the type's
 * payload, laid out as the structs below (natural alignment, no padding
 * left unnamed); both sides check the size of what they receive before
 * reading it.
 *
 * The daemon decides and the worker carries out: the daemon keeps the
 * scheduling, the accounting and the policy, and names queues and jobs by
 * numbers of its own (queue index, sequence number); the worker maps them to
 * its GPU context's and answers with completions in the daemon's numbers.
 * Everything the daemon sends is acted on in order. The daemon never waits
 * for an answer: it does not block on a worker, and treats what a worker
 * says as untrusted (a worker runs a client's kernels; its word is worth no
 * more than that client's).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

#define WORKER_PROTO_VERSION 7u /* 5: WorkerSetup.flags (WORKER_SETUP_KFD_PROXY), render_minor; 6: no relay page for a proxy; 7: WorkerSetup.more_gpus */
/* Largest datagram either side sends: a dispatch's kernel arguments (4 KiB at
 * most) and its buffer relocations. */
#define WORKER_MSG_MAX 16384u
#define WORKER_MAX_FDS 1
#define WORKER_TEXT_MAX 256u
/* GPUs a proxy worker's KFD process shows besides its first, at most (the
 * KFD process's bound, KFD_PROCESS_MAX_GPUS, less one). */
#define WORKER_MAX_MORE_GPUS 7u
/* Kernel arguments of one dispatch, at most (the GPU layer's kernarg slot is
 * smaller and checks the exact size). */
#define WORKER_MAX_ARGS_SIZE 4096u
/* The fds a worker is started with (kfdbrokerd --worker). */
#define WORKER_FD_CONTROL 3
#define WORKER_FD_DEVICE 4 /* the simulated GPU's connection (sim-remote), if any */

typedef enum WorkerMsgType {
        /* daemon -> worker */
        WORKER_MSG_SETUP = 1,    /* WorkerSetup + the relay page's dma-buf (none for KFD_PROXY): the first message */
        WORKER_MSG_ADD_QUEUE,    /* WorkerAddQueue */
        WORKER_MSG_MAP_BUFFER,   /* WorkerObject + a dma-buf fd */
        WORKER_MSG_DROP_BUFFER,  /* WorkerObject */
        WORKER_MSG_LOAD_CODE,    /* WorkerObject + a memfd holding the ELF */
        WORKER_MSG_DROP_CODE,    /* WorkerObject */
        WORKER_MSG_SUBMIT,       /* WorkerSubmit + args bytes + WorkerReloc[] */
        WORKER_MSG_ABORT,        /* WorkerAbort */
        WORKER_MSG_EXIT,         /* no payload: finish and exit 0 */

        /* worker -> daemon */
        WORKER_MSG_READY = 64,   /* WorkerReady */
        WORKER_MSG_QUEUE,        /* WorkerQueue: what became of an ADD_QUEUE */
        WORKER_MSG_COMPLETION,   /* WorkerCompletion */
        WORKER_MSG_LOSING,       /* WorkerText: the context is lost; its completions follow */
        WORKER_MSG_LOST,         /* WorkerText: every completion was sent; the worker exits */
        WORKER_MSG_STATS,        /* WorkerStats */
        WORKER_MSG_FAILED,       /* WorkerFailed: bring-up failed; the worker exits */
} WorkerMsgType;

typedef struct WorkerMsgHeader {
        uint32_t type;
        uint32_t size; /* of the payload that follows */
} WorkerMsgHeader;

typedef struct WorkerSetup {
        uint32_t version;          /* WORKER_PROTO_VERSION */
        uint32_t max_inflight;     /* GpuContextOptions.max_inflight */
        uint32_t ring_size;        /* GpuContextOptions.compute_ring_size */
        uint32_t log_level;
        uint64_t context_id;       /* the daemon's, for logs */
        uint32_t uid, gid;         /* to switch to, when the worker starts as root */
        uint32_t n_groups;         /* supplementary groups to keep (render, video) */
        uint32_t groups[8];
        uint32_t gpu_id;           /* GpuContextOptions.gpu_id: the GPU the daemon drives */
        uint32_t flags;            /* WORKER_SETUP_* */
        uint32_t render_minor;     /* the render node of gpu_id (WORKER_SETUP_KFD_PROXY) */
        /* WORKER_SETUP_KFD_PROXY: the other GPUs its KFD process shows (the
         * relayed program's session may use them), whose render nodes it
         * opens before its sandbox, as gpu_id's. */
        uint32_t n_more_gpus;      /* at most WORKER_MAX_MORE_GPUS */
        struct {
                uint32_t gpu_id, render_minor;
        } more_gpus[WORKER_MAX_MORE_GPUS];
} WorkerSetup;

/*
 * WorkerSetup.flags. KFD_PROXY: the worker brings up no GPU context and
 * speaks no more of this protocol after READY: its KFD process is a relayed
 * ROCm program's (on a kernel without secondary KFD contexts), and the
 * control socket then carries sim-remote's wire (sim-remote-protocol.h), the
 * daemon making every KFD call of that process through it
 * (contexts/context-kfd-process.c). Its SETUP carries no relay page (it
 * would not be used).
 */
#define WORKER_SETUP_KFD_PROXY 0x1u

typedef struct WorkerAddQueue {
        uint32_t index;    /* the daemon's queue index: 0, 1, 2, ... */
        uint32_t engine;   /* GpuEngine */
        uint32_t priority; /* KFD queue priority */
        uint32_t pad;
} WorkerAddQueue;

typedef struct WorkerObject {
        uint64_t id;  /* the daemon's id of a buffer or code object */
        uint64_t tag; /* MAP_BUFFER, LOAD_CODE: the client's name for it (gpu_buffer_get_tag()),
                       * for what the client is told about an address there */
} WorkerObject;

/* Three kinds: a job of this context (queue, seq); a relay word (relay != 0:
 * the daemon's relay page, sent with SETUP, word `queue` >= value); an
 * address of this context's VM (va != 0: the 32-bit word at va >= value). */
typedef struct WorkerWait {
        uint32_t queue;
        uint32_t value;
        uint64_t seq;     /* the daemon's sequence number on queue */
        uint64_t va;
        uint32_t relay;
        uint32_t pad;
} WorkerWait;

typedef struct WorkerSubmit {
        uint32_t queue;
        uint32_t type;         /* GpuJobType: NOP or DISPATCH */
        uint64_t seq;          /* the daemon's: one more than the last on this queue */
        uint64_t code;         /* dispatch: the code object (LOAD_CODE id) */
        uint32_t kernel;
        uint32_t grid[3];
        uint32_t block[3];
        uint32_t dynamic_lds;
        uint32_t args_size;    /* bytes of kernel arguments after this struct */
        uint32_t n_relocs;     /* WorkerReloc entries after the arguments */
        uint32_t n_waits;
        uint32_t chain;        /* GpuJob.chain: the daemon's stream, for ordering on failure */
        WorkerWait waits[GPU_JOB_MAX_WAITS];
} WorkerSubmit;

/* The 64-bit address of a buffer the worker mapped (MAP_BUFFER id), plus
 * offset, written at arg_offset of the kernel arguments. */
typedef struct WorkerReloc {
        uint64_t buffer;
        uint64_t offset;
        uint32_t arg_offset;
        uint32_t pad;
} WorkerReloc;

typedef struct WorkerAbort {
        uint32_t queue;
        int32_t error; /* negative errno to report */
        uint64_t seq;
} WorkerAbort;

typedef struct WorkerReady {
        uint64_t bring_up_ns; /* from exec to a GPU context ready */
        uint32_t pid;
        uint32_t pad;
} WorkerReady;

/*
 * The daemon names a relay word in GpuWait.va by this token plus 4 x the
 * word's index: a non-canonical address, never one of a GPU VM (47 bits),
 * which worker_link_submit() turns into WorkerWait.relay. The page's address
 * in the worker's VM is the worker's own; the daemon need not know it, so
 * relays work from the worker's first message on.
 */
#define WORKER_RELAY_TOKEN 0xffff800000000000ull

typedef struct WorkerQueue {
        uint32_t index;
        int32_t error;     /* 0 or a negative errno */
        uint32_t priority; /* the priority it got */
        uint32_t pad;
} WorkerQueue;

typedef struct WorkerCompletion {
        uint32_t queue;
        int32_t error;
        uint64_t seq;
        uint64_t fault_va;
        uint64_t begin_ns, end_ns;
        char message[WORKER_TEXT_MAX]; /* "" or what the device said */
} WorkerCompletion;

typedef struct WorkerText {
        char text[WORKER_TEXT_MAX];
} WorkerText;

typedef struct WorkerStats {
        uint64_t mapped_buffers, mapped_bytes, internal_bytes;
        uint64_t queues, jobs_submitted, jobs_completed, faults;
} WorkerStats;

typedef struct WorkerFailed {
        int32_t error;
        uint32_t pad;
        char text[WORKER_TEXT_MAX];
} WorkerFailed;

/* A received message. */
typedef struct WorkerMsg {
        WorkerMsgType type;
        const void *payload;
        size_t size;
        int fd; /* -EBADF unless one came with it (the receiver owns it) */
} WorkerMsg;

/*
 * Sends type + payload (+ fd if >= 0) as one datagram. The daemon's socket
 * is non-blocking: -EAGAIN when the worker is not reading (the caller keeps
 * the message); the worker's blocks. Negative errno on failure.
 */
int worker_msg_send(int sock, WorkerMsgType type, const void *payload, size_t size, int fd);
/* Two parts (a header struct and variable bytes) in one datagram. */
int worker_msg_sendv(int sock, WorkerMsgType type, const void *a, size_t a_size, const void *b, size_t b_size,
                     int fd);
/*
 * Receives one datagram into buf (WORKER_MSG_MAX bytes) and checks its frame:
 * the header, that the payload is as long as the header says, at most one fd
 * (extra fds are closed). 0 and *ret; -EAGAIN when nothing is there; 0 with
 * ret->type 0 at end of file; -EBADMSG for a malformed datagram (its fds
 * closed); other negative errnos from recvmsg.
 */
int worker_msg_recv(int sock, void *buf, WorkerMsg *ret);
/* Whether msg's payload is exactly a T (its size), and the pointer. */
#define WORKER_MSG_AS(msg, T) ((msg)->size == sizeof(T) ? (const T *) (msg)->payload : NULL)

/* Copies text into a fixed field, always NUL-terminated. */
void worker_text_set(char *dst, const char *text);
/* Whether a fixed text field from the peer is NUL-terminated printable text. */
bool worker_text_ok(const char *text);
