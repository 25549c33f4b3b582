/* SPDX-License-Identifier: MIT */
/*
 * What the scheduler knows of a client's work: a SchedJob (one copy, fill,
 * dispatch, signal-event or wait-event job, embedded in the session's Job)
 * and a SchedEvent (the part of a client event the scheduler reads: whether
 * it is signaled, auto-reset or destroyed, and which signal jobs are on the
 * GPU for it). The owner of both — the session layer — allocates them, keeps
 * what they reference alive, and is told through the scheduler's callbacks
 * when a job finished and when an event is signaled or reset.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "contexts/context.h"
#include "gpu/gpu.h"
#include "util/list.h"

/* The largest kernel argument image a dispatch may have (a kernarg slot of
 * the GPU layer, GPU_KERNARG_MAX, holds less). */
#define SCHED_ARGS_IMAGE_MAX 4096u

typedef struct SchedJob SchedJob;
typedef struct SchedStream SchedStream;
typedef struct HwQueue HwQueue;

typedef enum SchedJobKind {
        SCHED_JOB_WORK,   /* copy, fill or dispatch */
        SCHED_JOB_SIGNAL, /* signals its event when everything before it on its stream is done */
        SCHED_JOB_WAIT,   /* holds its stream until its event is signaled */
        SCHED_JOB_RELAY,  /* the scheduler's own: tells another context that a queue got this far */
        SCHED_JOB_CHUNK,  /* the scheduler's own: a piece of a large copy or fill (SchedJob.parent) */
} SchedJobKind;

typedef enum SchedJobState {
        SCHED_JOB_PENDING,   /* accepted, waiting in its stream */
        SCHED_JOB_SUBMITTED, /* written to a hardware queue */
        SCHED_JOB_DONE,
} SchedJobState;

typedef struct SchedEvent {
        bool signaled;
        bool auto_reset;
        bool destroyed;
        LIST_HEAD(SchedJob, signals); /* submitted, unfinished signal jobs, oldest first */
} SchedEvent;

struct SchedJob {
        SchedJobKind kind;
        GpuEngine engine;
        SchedJobState state;
        uint64_t owner_id;        /* for logs: the session's id */

        GpuJob gpu;               /* what the GPU layer runs */
        GpuCodeObject *code;      /* dispatch: the parsed code object (kept alive by the owner) */
        ContextReloc *relocs;     /* dispatch: the buffer addresses its arguments carry */
        unsigned n_relocs;
        /* Dispatch: its explicit arguments as the client sent them (kept
         * alive by the owner), laid into the gpu.dispatch.args_size-byte
         * image only while it is written to the GPU (sched_args_lay()):
         * gpu.dispatch.args_data is NULL while it waits, so a queued
         * dispatch costs the daemon what its request carried, not a 4 KiB
         * image a kernel's metadata may ask for. */
        const uint8_t *args_packed;
        uint32_t args_packed_size;
        SchedEvent *event;        /* signal and wait jobs (kept alive by the owner) */
        uint64_t timeout_ns;      /* on the GPU, or held for its event; UINT64_MAX = none */

        /* The scheduler's. */
        HwQueue *hwq;             /* once submitted */
        uint64_t seq;             /* its sequence number there */
        uint64_t cost;            /* bytes moved (ring budget) */
        uint64_t est_ns;          /* GPU time charged to its stream while it runs */
        unsigned klass;           /* its stream's class when it was submitted */
        SchedStream *stream;
        bool signal_claimed;      /* signal job whose signal a GPU wait already consumes */
        bool wait_resolved;       /* wait job whose wait was turned into GPU waits (or none) */
        bool cancel_requested;    /* its owner went away: stop it if it runs */
        bool abort_sent;          /* asked to stop (timeout or cancel); a worker process's
                                   * context reports it later, not from context_abort() */
        GpuBuffer *hold;          /* relay: the word's page, kept mapped until it is written */
        /* Chunking (scheduler.c): a large copy or fill goes to the GPU as
         * pieces; it stays at the head of its stream until the last is
         * written, and finishes when all of them have retired. */
        SchedJob *parent;         /* chunk: the job it is a piece of */
        uint64_t chunked_bytes;   /* work job: bytes handed out in chunks so far */
        unsigned chunks_inflight; /* work job: its chunks on the GPU */
        int chunk_error;          /* work job: the first failure among its chunks (positive errno) */
        char *chunk_message;      /* and its message (owned; NULL for a drop without a word) */
        uint64_t chunk_busy_ns;   /* work job: GPU time of its retired chunks */
        uint64_t queued_ns, submitted_ns;

        LIST_FIELDS(SchedJob, queue);   /* stream pending queue or hardware in-flight queue */
        LIST_FIELDS(SchedJob, signals); /* the event's submitted, unfinished signal jobs */
};

/* Appends one argument record — {u32 offset, u32 size, size bytes}, back to
 * back, unaligned — to a packed argument list of *size bytes (the caller
 * made room: SCHED_ARGS_RECORD + n bytes). */
#define SCHED_ARGS_RECORD 8u
void sched_args_append(uint8_t *packed, uint32_t *size, uint32_t offset, const void *bytes, uint32_t n);
/* Lays a packed argument list into image: image_size bytes, zero where no
 * record says otherwise (buffer addresses are written there on submit);
 * records past image_size are cut there. */
void sched_args_lay(const uint8_t *packed, uint32_t packed_size, uint8_t *image, uint32_t image_size);

/* "copy job", or for a dispatch 'dispatch of kernel "saxpy"': for messages. */
void sched_job_describe(const SchedJob *j, char *buf, size_t size);
