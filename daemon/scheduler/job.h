/* SPDX-License-Identifier: MIT */
/*
 * Job: one unit of client work (copy, fill, dispatch, signal-event,
 * wait-event) from the moment a Submit is accepted until it is retired. A Job
 * holds references to its session, its buffers, its code object and its
 * event, so nothing it touches is freed
 * while the GPU may still use it. Jobs sit on their session's list in fence
 * order, and on their stream's pending queue or their hardware queue's
 * in-flight queue. The Scheduler owns the decision of when a job goes to the
 * GPU; the Session owns its fence bookkeeping.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forward.h"
#include "gpu/gpu.h"
#include "util/list.h"
#include "wire/wire.h"

typedef enum JobState {
        JOB_PENDING,   /* accepted, waiting in its stream */
        JOB_SUBMITTED, /* written to a hardware queue */
        JOB_DONE,
} JobState;

struct Job {
        Session *session; /* reference */
        uint64_t fence;
        WireJobType type;
        GpuEngine engine;
        JobState state;

        GpuJob gpu;        /* what the GPU layer runs (addresses resolved at submit) */
        GpuBuffer *src;    /* references, or NULL */
        GpuBuffer *dst;
        ClientEvent *event; /* reference for SIGNAL/WAIT_EVENT jobs */
        GpuCodeObject *co;  /* reference for DISPATCH jobs (gpu.dispatch.co) */
        GpuBuffer **buffers; /* references to the buffers a DISPATCH's arguments name */
        unsigned n_buffers;
        uint8_t *args;      /* DISPATCH: the explicit kernarg bytes (gpu.dispatch.args_data) */
        bool engine_auto;   /* event job whose engine follows its neighbours (ENGINE_AUTO) */

        unsigned queue;    /* hardware queue once submitted */
        uint64_t seq;      /* its sequence number there */
        uint64_t cost;     /* bytes moved (ring budget) */
        uint64_t est_ns;   /* GPU time charged to its stream while it runs */
        SchedStream *stream; /* the stream it was queued on */
        bool signal_claimed; /* SIGNAL job whose signal a GPU wait already consumes */
        bool wait_resolved;  /* WAIT job whose wait was turned into GPU waits (or none) */
        uint64_t queued_ns, submitted_ns;
        uint64_t timeout_ns; /* from the session's policy; UINT64_MAX = none */

        LIST_FIELDS(Job, session_jobs); /* the session's unfinished jobs, fence order */
        LIST_FIELDS(Job, queue);        /* stream pending queue or hw in-flight queue */
        LIST_FIELDS(Job, signals);      /* the event's submitted, unfinished signal jobs */
};

Job *job_new(Session *s, uint64_t fence, WireJobType type);
/* Drops every reference the job holds and frees it. NULL-safe. */
Job *job_free(Job *j);
/* Human-readable kind for logs and errors: "copy", "fill", ... */
const char *job_type_name(WireJobType t);
/* "copy job", or for a dispatch 'dispatch of kernel "saxpy"': for messages. */
void job_describe(const Job *j, char *buf, size_t size);
