/* SPDX-License-Identifier: MIT */
/*
 * GPU contexts: which GPU context serves which client.
 *
 * A Context is one trust domain's place on the GPU: the device context (the
 * daemon's own KFD process context, which runs every copy and fill on its
 * SDMA queues, with every client's buffers in its VM), or a client context —
 * a VM, queues, event page, doorbells and fault domain of its own — in which
 * the kernels of one session, one identity or all "shared" sessions run.
 *
 * A client Context is a slot named by a key ("session 12", "identity uid=1000
 * unit=-…", "shared"). Its GPU context — its incarnation — is brought up
 * when work needs it and goes away when it is lost (a memory fault or a
 * reset: every job in flight is reported first) or reclaimed (idle: nothing
 * in flight for the pool's idle time, or the least recently used idle one
 * when the pool is full). The slot outlives incarnations: what a client
 * loaded and allocated is mapped into the next one on demand, from the
 * device context's buffers (dma-bufs) and the parsed code objects.
 *
 * Mechanisms (kfd-facts §7.3): "kernel" — secondary KFD contexts of this
 * process (AMDKFD_IOC_CREATE_PROCESS, KFD uapi >= 1.19, Linux 7.0);
 * "process" — one worker process per context (`kfdbrokerd --worker`,
 * context-worker.c), which opens /dev/kfd itself and so gets a KFD context of
 * its own on any kernel; "none" — neither works: every key maps to the
 * device context (shared mode), a kernel's fault there loses the device
 * context, and compute is a right only ComputeDispatch=yes grants. The
 * interface takes plain values (buffers and code objects of the GPU layer,
 * queue indexes, sequence numbers), never sessions, and is the same for the
 * three.
 *
 * Owned by the Manager (the pool); sessions hold references on the slots they
 * use. Everything runs on the event loop and never blocks.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "gpu/gpu.h"
#include "kfd/kfd-ops.h"
#include "sim/sim-remote.h"

typedef struct Context Context;
typedef struct ContextPool ContextPool;
typedef struct ContextPayer ContextPayer;

typedef enum ContextMechanism {
        CONTEXT_MECHANISM_NONE,    /* shared mode: everything in the device context */
        CONTEXT_MECHANISM_KERNEL,  /* secondary KFD contexts (CREATE_PROCESS) */
        CONTEXT_MECHANISM_PROCESS, /* a worker process per context */
        _CONTEXT_MECHANISM_MAX,
} ContextMechanism;

const char *context_mechanism_to_string(ContextMechanism m); /* "none", "kernel", "process" */

/* What the administrator asked for (kfdbrokerd --contexts=). */
typedef enum ContextChoice {
        CONTEXT_CHOICE_AUTO,    /* kernel where the KFD has it, else process, else shared */
        CONTEXT_CHOICE_KERNEL,  /* secondary contexts or fail */
        CONTEXT_CHOICE_PROCESS, /* worker processes or fail */
        CONTEXT_CHOICE_SHARED,  /* no client contexts */
} ContextChoice;

typedef struct ContextPoolCallbacks {
        void *userdata;
        /* A job on queue comp->queue of ctx finished or failed. */
        void (*completion)(Context *ctx, const GpuCompletion *comp, void *userdata);
        /* ctx's incarnation is being lost (a fault): called once, before the
         * completions of the jobs it takes down, so that its users learn of
         * the loss no later than of its first failed job. */
        void (*losing)(Context *ctx, const char *reason, void *userdata);
        /* ctx's incarnation went: lost (after its jobs were reported through
         * completion) or reclaimed (nothing was in flight). Its queue indexes
         * mean nothing from now on; the next work brings up a new one. */
        void (*gone)(Context *ctx, bool lost, const char *reason, void *userdata);
        /* A wake-up's completions are all reported: time to schedule. */
        void (*processed)(void *userdata);
} ContextPoolCallbacks;

typedef struct ContextPoolOptions {
        GpuContextOptions device;     /* the device context's queues */
        unsigned max_contexts;        /* client incarnations alive at once; 0 = 64 */
        uint64_t idle_timeout_ns;     /* reclaim after this long without work; 0 = 30 s */
        ContextChoice choice;

        /* Worker processes (the "process" mechanism). */
        const char *worker_exe;       /* the kfdbrokerd to run as `--worker`; NULL = this program */
        /* A connection for a new worker to reach the device, as its fd 4, or
         * -1 with no connection: a worker on the real kernel opens /dev/kfd
         * itself (NULL = that). The simulated GPU lives in the daemon and
         * serves each worker over such a connection (sim-remote). */
        int (*worker_device)(void *userdata, int *ret_fd);
        void *worker_userdata;
        uint32_t worker_uid, worker_gid; /* a root daemon's workers switch to these */
        unsigned n_worker_groups;
        uint32_t worker_groups[8];    /* and keep these supplementary groups (render, video) */
} ContextPoolOptions;

/*
 * Brings up the device context on ops and decides the mechanism. Errors of
 * gpu_context_new(); -EOPNOTSUPP when the mechanism the choice insists on
 * cannot work here (context_pool_mechanism_reason() of the failed pool is
 * gone: err says why). The callbacks are called from the event loop.
 */
int context_pool_new(sd_event *event, const KfdOps *ops, const ContextPoolOptions *opts,
                     const ContextPoolCallbacks *cb, ContextPool **ret, char *err, size_t errlen);
/* Frees client contexts first (the kernel wants secondaries closed before the
 * primary), then the device context. Slots still referenced are detached. */
ContextPool *context_pool_free(ContextPool *p);

/* Ends every client incarnation (gone callbacks are called): exit. */
void context_pool_drop_clients(ContextPool *p);

ContextMechanism context_pool_mechanism(const ContextPool *p);
/* One line for logs and `kfdbrokerctl status`: which mechanism and why. */
const char *context_pool_mechanism_reason(const ContextPool *p);
const GpuDeviceInfo *context_pool_info(const ContextPool *p);
Context *context_pool_device(ContextPool *p);
/* The device context's GPU context: where client buffers are allocated. */
GpuContext *context_pool_device_gpu(ContextPool *p);
unsigned context_pool_max(const ContextPool *p);
unsigned context_pool_live(const ContextPool *p);   /* client incarnations alive */

/* Another GPU a relayed client's KFD process shows besides the pool's. */
typedef struct ContextKfdGpu {
        uint32_t gpu_id;
        unsigned render_minor;
} ContextKfdGpu;

/* An OpenKfd whose KFD process is on its way (a proxy worker coming up). */
typedef struct ContextKfdOpen ContextKfdOpen;
/* How it went: r < 0 with err (hooks->end() called), or fd and ctx as
 * context_pool_kfd_relay_begin() gives them. Called on the loop, once. */
typedef void (*ContextKfdOpenDone)(void *userdata, int r, int fd, Context *ctx, const char *err);

/**
 * context_pool_kfd_relay_begin() - a KFD process of its own for a relayed client
 * @p: the pool
 * @key: the name of its context slot ("kfd process of session 12")
 * @payer: who pays for the daemon's own memory in it (context_set_payer())
 * @hooks: what the daemon checks around its calls (sim-remote.h), with
 *         @hooks_userdata; its end() is called once the process is gone —
 *         also when this fails, then or before it returns
 * @more_gpus: the other GPUs the client sees in it besides the pool's
 *             (@n_more_gpus of them, at most KFD_PROCESS_MAX_GPUS - 1 in
 *             all: -E2BIG): its calls may name them, each with a render
 *             file of the process's (a proxy worker opens them before its
 *             sandbox, told in its setup)
 * @done: where the answer goes when it comes later (returns 1), with
 *        @done_userdata
 * @ret_open: the open on its way (returns 1), for context_kfd_open_cancel()
 * @ret_fd: where the connection to it lands (SOCK_SEQPACKET, the sim-remote
 *          wire of daemon/sim/sim-remote-protocol.h)
 * @ret_ctx: its context slot (a reference and a use, as context_pool_get()
 *           gives): the GPU context the daemon keeps *in that KFD process*
 *           — its queues run the client's relayed work in the client's own
 *           GPU VM — brought up before it is given
 * @err: one line saying why not, for the client
 *
 * A secondary context is made at once (returns 0, *ret_fd and *ret_ctx
 * set). A proxy worker is started and waited for on the loop, which serves
 * everything else meanwhile: the call returns 1 and @done says how it went
 * once the worker said READY (and its KFD process and the daemon's GPU
 * context there are up), went, or did not within 3 s (-ETIMEDOUT). It
 * counts against --max-contexts from the start.
 *
 * Whatever Isolation= says, a process that opened /dev/kfd through the
 * interposer (docs/rocm.md) gets a KFD process — a GPU VM — of its own, never
 * the device context's, and keeps it until it ends: it counts against
 * --max-contexts with the client incarnations, and neither --context-idle nor
 * the LRU reclaims it; once lost (a fault, or the process ended) the slot is
 * never brought up again (context_ensure(): -ENODEV). Returns 0 or 1; -EACCES
 * where the daemon has no client contexts (--contexts=shared, or no
 * mechanism works); -EBUSY when --max-contexts contexts are up; -EDQUOT
 * when the context's memory does not fit @payer; other errors
 * from making the connection or the context. Undo with
 * context_kfd_relay_end() and context_release() on the slot, then
 * context_pool_kfd_relay_end().
 */
int context_pool_kfd_relay_begin(ContextPool *p, const char *key, ContextPayer *payer, const SimRemoteHooks *hooks,
                                 void *hooks_userdata, const ContextKfdGpu *more_gpus, size_t n_more_gpus,
                                 ContextKfdOpenDone done, void *done_userdata, ContextKfdOpen **ret_open,
                                 int *ret_fd, Context **ret_ctx, char *err, size_t errlen);
/**
 * context_pool_kfd_relay_join() - the daemon's GPU context on another GPU in a
 * relayed client's KFD process
 * @p: the pool of that GPU
 * @key: the name of its slot
 * @payer: who pays for its memory (on @p's GPU)
 * @first: the slot context_pool_kfd_relay_begin() gave (in another pool),
 *         whose GPU context's process this one shares (its event page)
 * @ret_ctx: the slot, a reference and a use, its GPU context up
 * @err: why not, one line
 *
 * With either mechanism: in a secondary KFD context, or in @first's proxy
 * worker's process, through @first's GPU context's table (-EOPNOTSUPP where
 * @p has no client contexts or @first's GPU context is gone). It counts
 * against @p's --max-contexts (-EBUSY) and @payer (-EDQUOT). Must go before
 * @first's GPU context does — and so before @first's worker, which is
 * @first's alone, is let go: context_kfd_relay_leave() (or
 * context_kfd_relay_lose() first, when @first was lost; kfd-relay-queue.c
 * kfd_relay_gpus_follow()).
 */
int context_pool_kfd_relay_join(ContextPool *p, const char *key, ContextPayer *payer, Context *first,
                                Context **ret_ctx, char *err, size_t errlen);
/* Ends a slot context_pool_kfd_relay_join() gave: its GPU context goes now,
 * the use and the count with it. NULL-safe. */
void context_kfd_relay_leave(Context *c);
/* Gives up an open on its way (its client went): its worker is killed, its
 * slot released and uncounted, hooks->end() called; done is never called.
 * NULL-safe. */
void context_kfd_open_cancel(ContextKfdOpen *op);
/* The relayed process's context: its GPU context goes now (before its KFD
 * process does); the slot stays until its users release it. NULL-safe. */
void context_kfd_relay_end(Context *c);
/* The same, as a loss (counted, logged with reason, its users told), where
 * what it stands on was lost: the first GPU's context of its process (see
 * kfd-relay-queue.c). NULL-safe. */
void context_kfd_relay_lose(Context *c, const char *reason);
/* fn(userdata) is called, on the loop, when the GPU context of c (a relayed
 * process's) goes, whoever ends it: after that nothing of the daemon uses
 * the process's KfdOps. NULL to stop. */
void context_on_kfd_drop(Context *c, void (*fn)(void *userdata), void *userdata);
/* Whether c is the context of a relayed client's KFD process. */
bool context_is_kfd_process(const Context *c);
/* The GPU context of c's current incarnation in this process, or NULL (none,
 * or one in a worker process). */
GpuContext *context_get_gpu(const Context *c);
void context_pool_kfd_relay_end(ContextPool *p);
unsigned context_pool_kfd_relays(const ContextPool *p);
/* The directory standing for /sys/devices/virtual/kfd/kfd (KfdOps.sysfs_root). */
const char *context_pool_sysfs_root(const ContextPool *p);

/*
 * The client context slot for key, created on first use (the device context
 * with the "none" mechanism), for a new user: give it back with
 * context_release(). -ENOMEM.
 */
int context_pool_get(ContextPool *p, const char *key, Context **ret);
/* A user is done with it; a slot nobody uses ends its incarnation as soon as
 * nothing of it is in flight. NULL-safe; returns NULL. */
Context *context_release(Context *c);

typedef struct ContextStats {
        uint64_t id;
        const char *key;              /* "device" for the device context */
        bool device;
        bool live;                    /* an incarnation is up */
        unsigned incarnations;        /* brought up so far */
        unsigned losses;              /* incarnations lost to faults */
        unsigned users;               /* sessions using it */
        unsigned jobs_in_flight;
        uint64_t created_ns;          /* when the current incarnation came up (0 if none) */
        uint64_t bring_up_ns;         /* how long its bring-up took */
        uint32_t pid;                 /* its worker process (the "process" mechanism; a relayed
                                       * client's proxy worker), else 0 */
        GpuContextStats gpu;          /* of the current incarnation */
} ContextStats;

/* Calls fn for the device context and every client context slot. */
void context_pool_foreach(ContextPool *p, void (*fn)(Context *c, void *userdata), void *userdata);

Context *context_ref(Context *c);
Context *context_unref(Context *c);
void context_get_stats(const Context *c, ContextStats *ret);
bool context_is_device(const Context *c);
/*
 * Reports what c's GPU has finished that its waiter has not woken the loop
 * for yet (what the wake-up would do; nothing when nothing is in flight, or
 * for a context in a worker process). For the device context before a
 * request is answered: a client that saw its job done on its fence page
 * (session-fence-page.c) — written by the engine before the interrupt — must
 * find it retired in whatever the daemon tells it next.
 */
void context_catch_up(Context *c);
/* gpu_context_hold_doorbells()/release around a burst of context_submit()s
 * to c (a context of this process; nothing for one in a worker); they
 * nest. */
void context_hold_doorbells(Context *c);
void context_release_doorbells(Context *c);
const char *context_get_key(const Context *c);
uint64_t context_get_id(const Context *c);
/* Whether an incarnation is up. */
bool context_live(const Context *c);
/* Bumped each time an incarnation of this slot is lost. */
unsigned context_get_losses(const Context *c);
/* Sessions using it (context_pool_get() without context_release()). */
unsigned context_get_users(const Context *c);

/*
 * Who pays for a client context's own memory: its queue rings, EOP and CWSR
 * areas, kernel-argument slots, scratch, event page and fence memory — GPU
 * memory a client causes, charged under the same caps as its buffers. The
 * Context counts it from what it asks the GPU layer for (the GPU layer's
 * gpu_*_own_bytes() and gpu_dispatch_scratch_bytes(), the same in a worker
 * process, whose own word is not taken), and asks the payer before each
 * growth: at bring-up, for a new queue, for a larger scratch backing.
 * charge() with delta > 0 returns 0 (charged) or -EDQUOT with err naming the
 * limit; with force it must charge (the memory exists already); delta < 0
 * gives bytes back (the incarnation went, the payer changed). what says what
 * grows ("scratch 48 MiB"). The struct is the payer's (embed it).
 */
struct ContextPayer {
        int (*charge)(ContextPayer *p, int64_t delta, bool force, const char *what, char *err, size_t errlen);
};
/* Sets who pays for c's memory from now on (NULL: nobody); the charge of the
 * current incarnation moves from the old payer to the new one (forced).
 * Nothing for the device context, which is the daemon's. */
void context_set_payer(Context *c, ContextPayer *payer);
ContextPayer *context_get_payer(const Context *c);

/*
 * Makes sure an incarnation is up, bringing one up (and, when the pool is
 * full, reclaiming the least recently used idle one) if needed. -EAGAIN when
 * the pool holds context_pool_max() busy contexts, with err saying so;
 * -EDQUOT when its memory does not fit its payer; errors of the bring-up
 * otherwise.
 */
int context_ensure(Context *c, char *err, size_t errlen);

/*
 * The index of a queue of engine with KFD priority prio in the current
 * incarnation (brought up if needed), created on first use; *ret_priority
 * gets the priority it has: a queue of another priority serves when no more
 * can be made. Errors of context_ensure() and gpu_context_add_queue().
 *
 * express asks for the express compute queue of that priority: one for the
 * streams whose dispatches are all short, so that in a context several
 * sessions use, a short dispatch does not wait behind a long one of another
 * session on the queue they would share (a queue runs its dispatches in
 * order). Given only in a context of this process that more than one session
 * uses, and only when the queue can be made; otherwise the ordinary queue.
 * *ret_express says which it is.
 */
int context_get_queue(Context *c, GpuEngine engine, uint32_t priority, bool express, unsigned *ret_index,
                      uint32_t *ret_priority, bool *ret_express, char *err, size_t errlen);

/* A 64-bit buffer address a dispatch's kernel arguments carry. */
typedef struct ContextReloc {
        uint32_t arg_offset; /* where the address goes in the argument bytes */
        GpuBuffer *buffer;   /* a buffer of the device context (the caller holds a reference) */
        uint64_t offset;     /* into the buffer */
} ContextReloc;

/*
 * Submits job to queue of the current incarnation. For a dispatch, code is
 * the parsed code object (loaded into this context on first use) and relocs
 * the buffer addresses to write into job->dispatch.args_data (which the
 * caller owns and lets this write) as the addresses the buffers have here
 * (mapped on first use). err names what failed. Errors of
 * gpu_code_object_load_in(), gpu_buffer_map_in(), gpu_queue_submit() (-EAGAIN:
 * no room now), -ENODEV when the incarnation is gone, -EDQUOT when the
 * larger scratch the dispatch needs does not fit its payer (context_set_payer()).
 */
int context_submit(Context *c, unsigned queue, GpuJob *job, GpuCodeObject *code, const ContextReloc *relocs,
                   unsigned n_relocs, uint64_t *ret_seq, char *err, size_t errlen);

/*
 * A relay from the device context's queue `device_queue` to c (a client
 * context): a 32-bit word of c that a job on that queue writes when it is
 * done (GpuJob.signal_va = *ret_write_va, signal_value = *ret_value), and a
 * job of c waits for (GpuWait.va = *ret_wait_va, .value = *ret_value). The
 * word lives in c's memory: the device context writes it, and never reads
 * memory a client's kernel can write. *ret_hold is a reference the writing
 * job keeps until its write has landed (the word's mapping must outlive it:
 * gpu_buffer_unref_after_jobs_of() with the device context). -ENODEV
 * without an incarnation or for the device context, -ERANGE when the slot's
 * values are used up (wait on the CPU instead).
 */
int context_relay(Context *c, unsigned device_queue, GpuBuffer **ret_hold, uint64_t *ret_write_va,
                  uint64_t *ret_wait_va, uint32_t *ret_value);

/*
 * Stops job seq of queue if it runs: gpu_queue_abort() on the current
 * incarnation, which reports it (and what finished before it) through the
 * completion callback before returning 1. In a worker process the abort is
 * asked for and reported later: 1 all the same. 0 if the job is not running
 * or there is no incarnation.
 */
int context_abort(Context *c, unsigned queue, uint64_t seq, int error);
