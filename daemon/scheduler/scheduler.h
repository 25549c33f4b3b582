/* SPDX-License-Identifier: MIT */
/*
 * Scheduler: decides when each accepted Job goes to which hardware queue.
 *
 * Each session has one stream per engine, bound to one hardware queue of that
 * engine; jobs of a stream run in order. A hardware queue serves its streams
 * by start-time fair queueing on measured GPU time: every stream has a
 * virtual time that advances by each retired job's GPU busy time (from the
 * timestamps around it) divided by the session's weight, jobs still on the
 * GPU count with an estimate until they retire, and the next slot goes to the
 * ready stream with the least virtual time. Charging measured time rather
 * than bytes makes weights mean shares of engine time for any kind of job
 * (a copy's speed depends on memory, a dispatch's on its kernel). A stream
 * that was idle starts at the least virtual time of the active ones, so it
 * cannot bank credit. Priority classes come first: a ready stream of a higher
 * class is always served before one of a lower class (KFD ignores
 * queue_priority for SDMA queues — only compute MQDs get a pipe priority,
 * kfd_mqd_manager_v10.c set_priority — so on SDMA the class is enforced here).
 * Jobs carry a timeout from the session's policy: one running on the GPU past
 * it is aborted (gpu_queue_abort) and fails with ETIME; a wait-event job held
 * at the head of its stream past it fails with ETIME too.
 * The queue keeps at most a bounded amount of work on the
 * ring (jobs and bytes), so a session that floods cannot push another
 * session's latency beyond one bounded backlog. Wait-event jobs are resolved here: an already signaled
 * event lets the job through, an event whose signal job is already on the
 * GPU becomes a GPU-side wait (POLL_REGMEM on that queue's fence), and an
 * event with no signal on the way holds its stream until one is.
 *
 * Owned by the Manager.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "forward.h"
#include "gpu/gpu.h"
#include "util/list.h"

struct SchedStream {
        Session *session; /* weak: the session detaches its streams before it goes */
        GpuEngine engine;
        unsigned queue;
        uint32_t weight;
        unsigned klass;         /* priority class: higher is served first */
        double vtime;           /* GPU ns / weight charged so far */
        uint64_t inflight_est;  /* estimated GPU ns of its jobs on the GPU now */
        bool active;            /* has pending jobs (on its queue's active list) */
        unsigned n_inflight;    /* its jobs on the GPU now */
        uint32_t want_priority; /* KFD queue priority its class maps to */
        Job *blocked_head;      /* head job found blocked, and since when */
        uint64_t blocked_since_ns;
        QUEUE_HEAD(Job, pending);
        LIST_FIELDS(SchedStream, active);
};

typedef struct SchedQueueStats {
        unsigned in_flight;
        uint64_t in_flight_bytes;
        uint64_t submitted;
        uint64_t completed;
} SchedQueueStats;

int scheduler_new(Manager *m, GpuContext *gpu, Scheduler **ret);
Scheduler *scheduler_free(Scheduler *s);

/* Binds a new stream for a session to the least loaded queue of engine. */
void scheduler_stream_init(Scheduler *s, SchedStream *st, Session *session, GpuEngine engine,
                           uint32_t weight);
/* Sets the stream's priority class. Compute streams move to a compute queue
 * created with kfd_priority (KFD honours it there) as soon as they are idle. */
void scheduler_stream_set_class(Scheduler *s, SchedStream *st, unsigned klass, uint32_t kfd_priority);
/* True if the device has a hardware queue for the stream's engine. */
bool scheduler_stream_has_queue(const SchedStream *st);
/* Removes the stream from its queue's ring; pending jobs must be gone. */
void scheduler_stream_done(Scheduler *s, SchedStream *st);

/* Queues an accepted job on its stream (takes ownership). */
void scheduler_enqueue(Scheduler *s, SchedStream *st, Job *j);
/* Writes ready jobs to the hardware queues, as far as budgets allow. */
void scheduler_run(Scheduler *s);
/* Handles the GPU's wake fd: retire completed jobs, then run. */
int scheduler_process_gpu(Scheduler *s);
/* Forgets jobs the GPU never retired (exit after a drain timeout). */
void scheduler_abandon(Scheduler *s);
/* Jobs submitted to the GPU and not yet retired, over all queues. */
unsigned scheduler_in_flight(const Scheduler *s);
void scheduler_get_queue_stats(const Scheduler *s, unsigned queue, SchedQueueStats *ret);
