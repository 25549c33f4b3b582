/* SPDX-License-Identifier: MIT */
/*
 * Scheduler: decides when each accepted job goes to which hardware queue of
 * which GPU context.
 *
 * Each session has one stream per engine. An SDMA stream is bound to one SDMA
 * queue of the device context — its small copies and fills, when it wakes
 * with one, to the device context's express SDMA queue, so that they wait
 * behind no flood's work already on an ordinary queue's ring; a compute stream runs in the session's GPU
 * context (its own, its identity's, the shared one or, in shared mode, the
 * device context), on a queue of its priority class there, found or made when
 * it first has work — in a context several sessions use, the express queue of
 * that class while its recent dispatches were all short (context_get_queue()),
 * so they do not wait behind another session's long one. A stream changes
 * queues only when it has nothing pending or on the GPU. Jobs of a stream run
 * in order.
 *
 * Streams compete by start-time fair queueing on measured GPU time, in
 * groups that share a budget of work on the GPU: each SDMA queue is a group,
 * and all compute queues of all contexts are one group — so weights and
 * priority classes hold across contexts, as the hardware would otherwise give
 * every queue with work the same share. Every stream has a virtual time that
 * advances by each retired job's GPU busy time (from the timestamps around it)
 * divided by the session's weight; jobs still on the GPU count with an
 * estimate until they retire; the next slot goes to the ready stream with the
 * least virtual time. A stream that was idle starts at the least virtual time
 * of the active ones (with none active, at the group's virtual clock: the
 * virtual time of the latest work sent to the GPU), so it cannot bank
 * credit, and on a tie goes before the streams that have work on the GPU
 * already, then before the ones whose next job is estimated longer.
 * Priority classes come first:
 * a ready stream of a higher class is always served before one of a lower
 * class (KFD ignores queue_priority for SDMA queues — only compute MQDs get a
 * pipe priority, kfd_mqd_manager_v10.c set_priority — so on SDMA the class is
 * enforced here). The budgets bound how much work waits on the GPU, so a
 * session that floods cannot push another's latency beyond one bounded
 * backlog: each hardware queue takes 1 ms of estimated GPU time (4 ms an
 * ordinary SDMA queue beside the express one, scheduler.c; copies and
 * fills from its measured throughput, a dispatch from its stream's recent
 * dispatches; at most 64 jobs) — a job of under 100 us of a stream
 * with nothing on the GPU goes in all the same — and the compute group 16
 * dispatches, at most 4 of them one stream's and at most a user's share of
 * them one user's (all its sessions together): max(4, ceil(16 / (U + 1)))
 * with U users having compute work, and a dispatch of a user holding none
 * goes in even when the 16 are taken (scheduler.c, user_share()), so a user
 * whose kernels halt or spin holds a bounded part of the group until their
 * DispatchTimeout=, and another user's dispatch never waits for them. A
 * user whose GPU contexts keep being lost (its kernels fault) waits before
 * its next one comes up: nothing for its first 3 losses in a row, then 10 ms,
 * doubling up to 1 s, one step less per second without a loss (user_fault()),
 * so a fault loop brings up about one context a second instead of hundreds;
 * its dispatches wait, they do not fail. Copies and fills larger than
 * 2 MiB go to the GPU in pieces — 2 MiB, or 8 MiB on an ordinary SDMA queue
 * with the express queue beside it while nothing small waits there
 * (scheduler.c, piece_bytes()) — each competing for its queue like a job,
 * so a large job never holds a queue for long: the job keeps the head of
 * its stream until its last piece is written and finishes, once, when all
 * have retired; when a piece fails (or the job is cancelled) the rest of it
 * never runs and the job fails with the first failure. KFDBROKERD_CHUNKING=0
 * in the daemon's environment turns chunking off and restores the budget of
 * 64 jobs / 64 MiB per queue (for benchmarks: docs/man/kfdbrokerd.8).
 *
 * Wait-event jobs are resolved here: an already signaled event lets the job
 * through; an event whose signal job is already on the GPU in the same GPU
 * context becomes a GPU-side wait (POLL_REGMEM / WAIT_REG_MEM on that queue's
 * fence); a compute job waiting for a device-context SDMA job waits on the GPU
 * through a relay (a word of the client context that a relay job behind the
 * signal on the SDMA queue writes); any other wait across contexts — an SDMA
 * job waiting for a kernel — is held here until that job finishes (a device
 * queue must never poll memory a client's kernel can write); an event with no
 * signal on the way holds its stream until one is.
 *
 * Jobs carry a timeout: one running on the GPU past it is aborted and fails
 * with ETIME; a wait-event job held at the head of its stream past it too.
 * When a context's GPU context is lost, its jobs on the GPU are reported by
 * the GPU layer and the jobs still waiting in streams bound to it are
 * cancelled (ECANCELED); the next work brings up a new one.
 *
 * Owned by the Manager; reaches sessions only through its callbacks.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "contexts/context.h"
#include "scheduler/sched-job.h"
#include "util/list.h"

typedef struct Scheduler Scheduler;
typedef struct SchedGroup SchedGroup;

/*
 * A user (uid) as the compute group sees it: the group's slots are shared
 * between users, not only between streams, so that one user's sessions
 * together hold no more than its share (scheduler.c, user_share()). The
 * session layer embeds one in each user's Tally and points every stream of
 * the user's sessions at it; it must outlive their jobs on the GPU.
 */
typedef struct SchedUser {
        const char *name;         /* "uid 1000", for the log (the owner's string) */
        unsigned compute_held;    /* its dispatches on the GPU now: compute slots held */
        unsigned compute_streams; /* its compute streams with work waiting */
        /* Its GPU contexts lost in a row (scheduler.c, user_fault()): its
         * next context waits until backoff_until_ns. */
        unsigned fault_streak;
        uint64_t last_fault_ns, backoff_until_ns;
        uint64_t fault_seen;      /* the loss it was last charged for */
        bool backoff_told;        /* the log said so in this streak */
} SchedUser;

struct SchedStream {
        uint64_t owner_id;      /* the session's id, for logs */
        SchedUser *user;        /* whose it is (compute slots are shared by user); NULL: nobody's */
        GpuEngine engine;
        Context *ctx;           /* compute: the context it runs in (a reference), NULL until set */
        HwQueue *hwq;           /* the hardware queue it is bound to, NULL while unbound */
        SchedGroup *group;      /* where it competes while active */
        uint32_t weight;
        unsigned klass;         /* priority class: higher is served first */
        double vtime;           /* GPU ns / weight charged so far */
        uint64_t inflight_est;  /* estimated GPU ns of its jobs on the GPU now */
        double dispatch_ns;     /* compute: GPU ns of its shortest recent dispatches, 0 until one retired */
        double dispatch_max_ns; /* compute: of its longest recent ones (decaying), 0 until one retired */
        bool bound_express;     /* compute: bound to its context's express queue */
        HwQueue *sdma_home;     /* SDMA: its ordinary queue of the device context, NULL when bound for
                                 * good elsewhere; its small jobs may go to the express queue */
        bool active;            /* has pending jobs (on its group's active list) */
        unsigned n_inflight;    /* its jobs on the GPU now */
        uint32_t want_priority; /* KFD queue priority its class maps to */
        uint32_t chain;         /* GpuJob.chain of its jobs: unique among live streams, nonzero */
        bool failing;           /* failing the jobs ordered after a failed one */
        SchedJob *blocked_head; /* head job found blocked, and since when */
        uint64_t blocked_since_ns;
        QUEUE_HEAD(SchedJob, pending);
        LIST_FIELDS(SchedStream, active);
        LIST_FIELDS(SchedStream, bound);  /* its queue's bound streams */
};

typedef struct SchedulerCallbacks {
        void *userdata;
        /* A job finished (error 0) or failed (a positive errno and a message
         * for the client, or none for a job dropped without a word). The
         * owner frees it; the scheduler no longer knows it. */
        void (*job_finished)(SchedJob *j, int error, const char *message, uint64_t busy_ns, void *userdata);
        /* A signal job completed: set its event (consumed: a GPU wait already took the signal). */
        void (*event_signal)(SchedEvent *e, bool consumed, void *userdata);
        /* A wait consumed an auto-reset event's signal. */
        void (*event_reset)(SchedEvent *e, void *userdata);
        /* A pass of scheduling or retiring is over: a good time to publish. */
        void (*settled)(void *userdata);
} SchedulerCallbacks;

typedef struct SchedQueueStats {
        unsigned in_flight;
        uint64_t in_flight_bytes;
        uint64_t submitted;
        uint64_t completed;
} SchedQueueStats;

int scheduler_new(sd_event *event, ContextPool *pool, const SchedulerCallbacks *cb, Scheduler **ret);
Scheduler *scheduler_free(Scheduler *s);

/* An SDMA stream is bound to the least loaded SDMA queue of the device
 * context at once; a compute stream when it first has work, in the context
 * scheduler_stream_set_context() gave it. */
void scheduler_stream_init(Scheduler *s, SchedStream *st, uint64_t owner_id, GpuEngine engine, uint32_t weight);
/* The context a compute stream's jobs run in (a new reference is taken; the
 * stream moves there once it is idle). */
void scheduler_stream_set_context(Scheduler *s, SchedStream *st, Context *ctx);
/* Sets the stream's priority class. Compute streams move to a queue created
 * with kfd_priority (KFD honours it there) as soon as they are idle. */
/*
 * Binds an SDMA stream to SDMA queue index of ctx (a relayed process's
 * context, whose SDMA queue runs that client's packets in its own VM)
 * instead of a device context queue. The stream must have nothing pending
 * or on the GPU: -EBUSY; -ENOMEM. When ctx's incarnation goes, so does the
 * queue; what waits in the stream then is cancelled, and the stream runs
 * nothing more.
 */
int scheduler_stream_use_sdma(Scheduler *s, SchedStream *st, Context *ctx, unsigned index);
void scheduler_stream_set_class(Scheduler *s, SchedStream *st, unsigned klass, uint32_t kfd_priority);
/* Whether the user waits before its next GPU context comes up (its
 * contexts keep faulting): its dispatches wait for it. */
bool scheduler_user_backs_off(const SchedUser *user);
/* The user the stream's session belongs to; set before its first job. */
void scheduler_stream_set_user(Scheduler *s, SchedStream *st, SchedUser *user);
/* Unbinds the stream; its pending jobs must be gone. */
void scheduler_stream_done(Scheduler *s, SchedStream *st);

/* Queues an accepted job on its stream. */
void scheduler_enqueue(Scheduler *s, SchedStream *st, SchedJob *j);
/* Removes a job still pending in its stream (its owner drops it). Returns 0
 * when it is gone (the owner finishes it), 1 when pieces of it are on the GPU
 * already: the rest never runs, and it is finished through
 * SchedulerCallbacks.job_finished (ECANCELED, no message) once they retire. */
int scheduler_dequeue(Scheduler *s, SchedJob *j);
/* Writes ready jobs to the hardware queues, as far as budgets allow. */
void scheduler_run(Scheduler *s);
/* Asks for the owner's jobs on compute queues to be stopped (their client
 * went away): each is aborted as soon as it runs; they finish ECANCELED. */
void scheduler_cancel_running(Scheduler *s, SchedStream *st);

/* From the context pool's callbacks. */
void scheduler_on_completion(Scheduler *s, Context *ctx, const GpuCompletion *comp);
void scheduler_on_context_gone(Scheduler *s, Context *ctx, bool lost, const char *reason);

/* Forgets jobs the GPU never retired (exit after a drain timeout). */
void scheduler_abandon(Scheduler *s);
/* Jobs submitted to the GPU (all or some of their pieces) and not yet
 * retired, over all queues; a job in pieces counts once. */
unsigned scheduler_in_flight(const Scheduler *s);
/* The ordinary SDMA queues of the device context (kfdbrokerd --sdma-queues=),
 * not counting the express one: what DeviceInfo reports. */
unsigned scheduler_sdma_queues(const Scheduler *s);
/* Jobs retired since start, by outcome. */
uint64_t scheduler_jobs_completed(const Scheduler *s);
uint64_t scheduler_jobs_failed(const Scheduler *s);
/* The device context's queue's counters (by index). */
void scheduler_get_queue_stats(const Scheduler *s, unsigned queue, SchedQueueStats *ret);
