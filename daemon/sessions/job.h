/* SPDX-License-Identifier: MIT */
/*
 * Job: one unit of client work (copy, fill, dispatch, signal-event,
 * wait-event) from the moment a Submit is accepted until it is retired. A Job
 * holds references to its session, its buffers, its code object and its
 * event, so nothing it touches is freed while the GPU may still use it. Jobs
 * sit on their session's list in fence order; the SchedJob inside is what the
 * Scheduler sees and moves (its stream's pending queue, then a hardware
 * queue). The Scheduler owns the decision of when a job goes to the GPU; the
 * Session owns its fence bookkeeping and frees it when the Scheduler reports
 * it finished.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "scheduler/sched-job.h"
#include "sessions/forward.h"
#include "util/list.h"
#include "util/macro.h"
#include "wire/wire.h"

struct Job {
        SchedJob sched;
        Session *session; /* reference */
        /* The GPU it runs on: what its session has there (the session's own
         * GPU's unless Job.gpu named another); lives as long as the session. */
        SessionOnGpu *on;
        uint64_t fence;
        WireJobType type;
        bool engine_auto;   /* event job whose engine follows its neighbours (ENGINE_AUTO) */
        bool gpu_auto;      /* it named no GPU: an ENGINE_AUTO event job follows its neighbour's too */
        bool unordered;     /* not a copy or fill: counted in Session.n_unordered */

        GpuBuffer *src;    /* references, or NULL */
        GpuBuffer *dst;
        ClientEvent *event; /* reference for SIGNAL/WAIT_EVENT jobs */
        GpuCodeObject *co;  /* reference for DISPATCH jobs: the parsed code object */
        GpuBuffer **buffers; /* references to the buffers a DISPATCH's arguments name */
        unsigned n_buffers;
        uint8_t *args;      /* DISPATCH: the explicit arguments as sent, packed (sched.args_packed) */
        ContextReloc *relocs; /* DISPATCH: where its buffers' addresses go (sched.relocs) */
        /* A packet of a relayed client's AQL queue (kfd-relay-queue.c): the
         * relay (a reference), the queue and the packet's index. */
        struct KfdRelay *relay;
        uint32_t relay_queue, relay_gen;
        uint64_t relay_index;

        LIST_FIELDS(Job, session_jobs); /* the session's unfinished jobs, fence order */
};

static inline Job *job_from_sched(SchedJob *j) {
        return container_of(j, Job, sched);
}

/* A job of s on its own GPU (set j->on before it is queued for another). */
Job *job_new(Session *s, uint64_t fence, WireJobType type);
/* Drops every reference the job holds and frees it. NULL-safe. */
Job *job_free(Job *j);
/* Human-readable kind for logs and errors: "copy", "fill", ... */
const char *job_type_name(WireJobType t);
