/* SPDX-License-Identifier: MIT */
/*
 * The structures behind context.h, shared by context.c (one slot and its
 * incarnations) and context-pool.c (the pool: the device context, the
 * mechanism, the slots by key, the limit and the idle reclaim).
 */
#pragma once

#include "contexts/context-kfd-process.h"
#include "contexts/context.h"
#include "sim/sim-remote.h"

/* A client context's queues: at most this many jobs each (the scheduler keeps
 * fewer), rings of this size — small, since a dispatch is a few dozen dwords. */
#define CLIENT_MAX_INFLIGHT 128u
#define CLIENT_RING_SIZE (64u * 1024u)

typedef struct WorkerLink WorkerLink;
typedef struct WorkerReaper WorkerReaper;

struct Context {
        unsigned n_ref;
        unsigned users;          /* sessions that took it with context_pool_get() */
        ContextPool *pool;       /* weak; NULL once the pool is gone */
        GpuContext *held_gpu;    /* whose doorbells context_hold_doorbells() holds; compared only */
        unsigned doorbell_holds; /* context_hold_doorbells() nesting */
        Context *prev, *next;    /* ContextPool.clients */
        uint64_t id;
        char *key;
        bool device;
        /* The GPU context the daemon keeps in a relayed client's KFD process
         * (context_pool_kfd_relay_begin()): one incarnation, never
         * reclaimed, never brought up again. */
        bool kfd_process;
        void (*kfd_dropped)(void *userdata); /* context_on_kfd_drop() */
        void *kfd_dropped_userdata;
        /* Its proxy worker (where the kernel has no secondary contexts),
         * reaped when the slot's incarnation ends; -1 for none. */
        pid_t kfd_worker_pid;
        int kfd_worker_pidfd;

        /* The current incarnation: a GPU context of this process, or a
         * worker process's (context-worker.c). */
        GpuContext *gpu;
        WorkerLink *worker;
        sd_event_source *wake;
        unsigned inflight;
        uint64_t created_ns, bring_up_ns;
        uint64_t last_used_ns;

        unsigned incarnations, losses;
        bool losing_told;        /* the current incarnation's loss was announced */

        /* Relays (context_relay()): a page of the current incarnation that
         * device-context SDMA queues write when they are past a point, one
         * 32-bit slot per queue; mapped into the device context too. */
        GpuBuffer *relay;        /* a reference (jobs writing it hold more) */
        GpuBuffer *relay_device; /* its mapping in the device context (owned by relay) */
        uint32_t relay_values[GPU_MAX_QUEUES];

        /* Its own memory (context_set_payer()): of the current incarnation,
         * and per queue index the scratch it backs (per wave, in all). */
        ContextPayer *payer;
        uint64_t memory;
        uint32_t scratch_wave[GPU_MAX_QUEUES];
        uint64_t scratch_bytes[GPU_MAX_QUEUES];

        /* Express compute queues of the current incarnation, by KFD
         * priority (context_get_queue()): the index + 1, 0 = none. */
        unsigned express_queue[16];
};

struct ContextPool {
        sd_event *event;
        const KfdOps *ops;
        ContextPoolOptions opts;
        ContextPoolCallbacks cb;
        ContextMechanism mechanism;
        char mechanism_reason[320];

        Context *device;
        Context *clients;        /* client slots, most recently used first */
        unsigned n_live;         /* client incarnations up */
        unsigned n_relays;       /* KFD processes of relayed clients (context_pool_kfd_relay_begin) */
        sd_event_source *idle_timer;
        sd_event_source *reap;   /* deferred: drops incarnations nobody uses */
        int exe_fd;              /* this program, for worker processes (O_PATH) */
        WorkerReaper *reapers;   /* workers on their way out */
        SimRemoteRegistry *relays; /* servers of relayed clients' KFD processes (context-kfd-process.c) */
};

/* context.c */
int context_new(ContextPool *p, const char *key, bool device, Context **ret);
/* Takes over gpu as the slot's incarnation and watches its wake fd. */
int context_adopt(Context *c, GpuContext *gpu, uint64_t bring_up_ns);
/* Takes over a worker process as the slot's incarnation. */
void context_adopt_worker(Context *c, WorkerLink *w);
/* A completion of the current incarnation, upwards. */
void context_report(Context *c, const GpuCompletion *comp);
/* The current incarnation is being lost: tells the users once, before the
 * completions of its jobs. */
void context_announce_losing(Context *c, const char *reason);
/* Ends the current incarnation (nothing may be in flight unless lost).
 * lost: reported to the callbacks as a loss. */
void context_drop(Context *c, bool lost, const char *reason);

/* Charges bytes more of c's own memory to its payer (what: for the message);
 * 0 or -EDQUOT with err set. context_uncharge() gives them back. */
int context_charge(Context *c, uint64_t bytes, const char *what, char *err, size_t errlen);
void context_uncharge(Context *c, uint64_t bytes);

/* context-pool.c */
/* Brings up a client incarnation for c, reclaiming an idle one if the pool is full. */
int context_pool_bring_up(ContextPool *p, Context *c, char *err, size_t errlen);
void context_pool_touch(ContextPool *p, Context *c);
void context_pool_unlink(ContextPool *p, Context *c);
/* Soon (on the next loop iteration, outside whatever calls this): drop the
 * incarnations of slots no session uses and with nothing in flight. */
void context_pool_schedule_reap(ContextPool *p);

/* context-worker-process.c: worker processes as processes. */
/* Starts `kfdbrokerd --worker` with its control socket (*ret_sock, the
 * daemon's end, non-blocking) and the device's connection, and sends it its
 * setup with a relay page of the device context (*ret_relay; none, NULL,
 * for a WORKER_SETUP_KFD_PROXY, whose KFD process shows the n_more_gpus
 * more_gpus too: at most WORKER_MAX_MORE_GPUS, -E2BIG). */
int worker_process_spawn(ContextPool *p, uint64_t context_id, uint32_t setup_flags, const ContextKfdGpu *more_gpus,
                         size_t n_more_gpus, pid_t *ret_pid, int *ret_pidfd, int *ret_sock, GpuBuffer **ret_relay,
                         char *err, size_t errlen);
/* Waits up to timeout_ms for a new worker's READY on sock: 0, or why not in
 * err (its FAILED text, its end, the timeout). Blocks. */
int worker_process_wait_ready(int sock, int timeout_ms, char *err, size_t errlen);
/* At start: whether a worker comes up here, and how long it takes. Blocks. */
int worker_process_probe(ContextPool *p, uint64_t *ret_ns, char *err, size_t errlen);
/* Reaps it when it exits (taking the pidfd over), killing it if it has not
 * within a grace; killed: we sent it SIGKILL already (its death is no news). */
void worker_process_reap_later(ContextPool *p, pid_t pid, int pidfd, uint64_t context_id, bool killed);
/* Kills and reaps every worker still on its way out: the daemon exits. */
void worker_reapers_free(ContextPool *p);

/* context-worker.c: the link to a running worker. */
/* Starts a worker for c (not waiting for it to come up). */
int worker_link_spawn(ContextPool *p, Context *c, WorkerLink **ret, char *err, size_t errlen);
/* Tells the worker to exit and lets it go (reaped later, killed if it
 * lingers). NULL-safe; returns NULL. */
WorkerLink *worker_link_free(WorkerLink *w);
/* The queue of priority the worker has (or the one to use when no more can
 * be made); -ENOENT when a new one is to be made with worker_link_add_queue(). */
int worker_link_find_queue(WorkerLink *w, GpuEngine engine, uint32_t priority, unsigned *ret_index,
                           uint32_t *ret_priority, char *err, size_t errlen);
int worker_link_add_queue(WorkerLink *w, uint32_t priority, unsigned *ret_index, char *err, size_t errlen);
int worker_link_submit(WorkerLink *w, unsigned queue, const GpuJob *job, GpuCodeObject *code,
                       const ContextReloc *relocs, unsigned n_relocs, uint64_t *ret_seq, char *err, size_t errlen);
int worker_link_relay(WorkerLink *w, unsigned device_queue, GpuBuffer **ret_hold, uint64_t *ret_write_va,
                      uint64_t *ret_wait_va, uint32_t *ret_value);
int worker_link_abort(WorkerLink *w, unsigned queue, uint64_t seq, int error);
void worker_link_get_stats(const WorkerLink *w, ContextStats *ret);
