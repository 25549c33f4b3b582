/* SPDX-License-Identifier: MIT */
/*
 * See scheduler.h. Start-time fair queueing (Goyal, Vin & Cheng, 1996) per
 * group of hardware queues, with the virtual-time bookkeeping of Linux's CFS:
 * charge what a job really used, when it is known.
 */
#include "scheduler/scheduler.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

/* Work allowed on one hardware queue at once: enough to keep the engine busy
 * between completions, small enough to bound the wait of a newly ready
 * stream behind a flooding one. The budget is GPU time, estimated from the
 * queue's measured throughput: a job that becomes ready waits behind at most
 * QUEUE_BUDGET_NS of other streams' work (and the piece running). */
#define QUEUE_MAX_JOBS 64u
#define QUEUE_BUDGET_NS (1ull * 1000 * 1000)
/* An ordinary SDMA queue of the device context while it has an express one
 * (EXPRESS_SDMA_BYTES): the small jobs of streams that wake do not wait
 * behind its work, so it holds more, and a flood's pieces keep its engine
 * busy across a daemon that gets no CPU for a while (each piece is a
 * completion for the daemon to handle and a place to fill again). */
#define SDMA_QUEUE_BUDGET_NS (4ull * 1000 * 1000)
/* A job of a stream with nothing on the GPU that is estimated to take at
 * most this long goes to a full queue all the same (up to QUEUE_MAX_JOBS): a
 * stream that wakes from idle does not wait for room behind the flooders'
 * backlog, which it would barely lengthen. */
#define WAKE_JOB_NS (100ull * 1000)
/* Copies and fills larger than this go to the GPU in pieces of this size,
 * each competing for the queue as a job of its own, so a large job never
 * holds a queue for long. Every piece is a completion to handle; with 1 MiB
 * pieces, 15 clients keeping 16 MiB copies in flight got 0.64-0.80x of the
 * throughput they got unchunked, with 2 MiB 0.81 (bench-broker noise), and
 * the light client's p99 next to them stayed the same: the queue budget, not
 * the piece, bounds how long a ready job waits. */
#define CHUNK_BYTES (2ull << 20)
/* Pieces sized to what waits (piece_bytes()): up to this on an ordinary
 * SDMA queue with the express queue beside it, while no stream there waits
 * with a job of CHUNK_BYTES or less. Every piece is a completion for the
 * daemon, whose CPU the simulated engines share: 15 clients keeping 16 MiB
 * copies in flight (or 8 queued) got 0.47-0.85x of their unchunked
 * throughput with 2 MiB pieces (four runs; one more gave 1.34 where the
 * unchunked daemon stalled) and 0.66-1.02x with 8 MiB ones (four runs,
 * three of them 0.82 or more), on a 2-CPU machine at load 4-10
 * (bench-broker noise). */
#define CHUNK_MAX_BYTES (8ull << 20)
/* A copy or fill of at most this many bytes, the next job of an SDMA stream
 * with nothing pending or on the GPU, goes to the device context's express
 * SDMA queue (express_sdma_wanted()): a ring of its own, so that it waits
 * behind no flood's pieces already on an ordinary queue's ring (up to
 * SDMA_QUEUE_BUDGET_NS of them), only for the engine, which switches between its
 * queues by a time quantum, inside a long copy too (sdma_v5_2.c
 * sdma_v5_2_ctx_switch_enable(): AUTO_CTXSW_ENABLE and the phase quantum,
 * 32K clocks by default; MIDCMD_PREEMPT_ENABLE; the simulator's model:
 * daemon/sim/sim-sdma.c). The size: what the simulated engine moves in one
 * quantum, so such a job ends within its first turn. */
#define EXPRESS_SDMA_BYTES (256ull << 10)
/* With chunking off (KFDBROKERD_CHUNKING=0, for benchmarks): the budget of
 * before, in jobs and bytes. */
#define UNCHUNKED_QUEUE_MAX_BYTES (64ull << 20)
/* Extra room for signal and wait event jobs (see queue_has_room()). */
#define QUEUE_EVENT_JOBS 64u
/* Dispatches on the GPU at once, over every compute queue of every context:
 * what makes weights and classes hold across contexts (the hardware would
 * give every queue with work the same share). Enough to keep the CP pipes
 * busy between completions. */
#define COMPUTE_GROUP_MAX_JOBS 16u
/* Dispatches of one stream on the GPU at once: its jobs run in order on one
 * queue anyway, so more would only take the group's slots from the others. */
#define COMPUTE_STREAM_MAX_JOBS 4u
/* A user's share of the compute group never falls below this (user_share()). */
#define COMPUTE_USER_MIN_JOBS 4u
/* Dispatches beyond COMPUTE_GROUP_MAX_JOBS, one each of users that held none
 * when the group was full (run_group()): how far the group may run over. */
#define COMPUTE_GROUP_WAKE_JOBS 16u
/* Losses of a user's GPU contexts in a row that cost nothing; from the next
 * one its next context waits FAULT_BACKOFF_NS, doubling per loss up to
 * FAULT_BACKOFF_MAX_NS. The streak shrinks by one per FAULT_DECAY_NS without
 * a loss. */
#define FAULT_FREE_LOSSES 3u
#define FAULT_BACKOFF_NS (10ull * 1000 * 1000)
#define FAULT_BACKOFF_MAX_NS (1000ull * 1000 * 1000)
#define FAULT_DECAY_NS (1000ull * 1000 * 1000)
#define FAULT_STREAK_MAX (FAULT_FREE_LOSSES + 8u)
/* Priority classes counted per group (PolicyPriority has four; more clamp). */
#define SCHED_CLASSES 8u
/* Cost floor so that empty jobs (events) are not free in the ring budget. */
#define MIN_JOB_COST 4096ull
/* Estimate for a job with no bytes (events) until it is measured. */
#define EMPTY_JOB_NS 2000ull

struct SchedGroup {
        unsigned max_jobs;      /* work (not event) jobs on the GPU over its queues; 0 = no group limit */
        unsigned work_in_flight;
        unsigned class_in_flight[SCHED_CLASSES]; /* work jobs on the GPU, by the class they went with */
        double vclock;          /* virtual time of the latest work sent to the GPU (never goes back) */
        unsigned users;         /* compute: users with work waiting or on the GPU (SchedUser) */
        QUEUE_HEAD(SchedStream, active);
};

struct HwQueue {
        Scheduler *sched;       /* whose it is: each GPU has its scheduler */
        Context *ctx;           /* a reference */
        unsigned index;         /* in ctx's current incarnation */
        GpuEngine engine;
        uint32_t priority;      /* the KFD queue priority it was created with */
        SchedGroup *group;
        SchedGroup own_group;   /* an SDMA queue is a group of its own */
        unsigned n_streams;     /* bound streams, for balancing */
        bool express;           /* the device context's express SDMA queue (EXPRESS_SDMA_BYTES) */
        unsigned n_homed;       /* SDMA streams whose home it is (SchedStream.sdma_home), for balancing */
        bool full;              /* refused more work in this pass */
        uint64_t inflight_ns;   /* estimated GPU time of its work jobs on the GPU */
        uint64_t head_since_ns; /* when the oldest job on the GPU became the oldest */
        double bytes_per_ns;    /* measured throughput, for estimates (moving average) */
        QUEUE_HEAD(SchedJob, inflight);
        LIST_HEAD(SchedStream, bound); /* streams bound to it */
        SchedQueueStats stats;
        LIST_FIELDS(HwQueue, queues);
};

struct Scheduler {
        sd_event *event;
        ContextPool *pool;
        SchedulerCallbacks cb;
        sd_event_source *timeout_timer;
        LIST_HEAD(HwQueue, queues);
        HwQueue *sdma_express;  /* NULL when the device had no SDMA queue to spare for it */
        SchedGroup compute;
        uint64_t jobs_completed, jobs_failed;
        uint32_t last_chain;
        uint64_t chunk_bytes;   /* 0: chunking off, and the job/byte budget of before */
        unsigned chunked_in_flight; /* jobs with pieces on the GPU */
        uint64_t losses;        /* GPU contexts lost so far (SchedUser.fault_seen) */
        uint64_t backoff_wake_ns; /* the earliest end of a backoff a stream waits for, or UINT64_MAX */
        bool running;
        bool again;
};

static HwQueue *hwq_new(Scheduler *s, Context *ctx, unsigned index, GpuEngine engine) {
        HwQueue *q = calloc(1, sizeof *q);

        if (!q)
                return NULL;
        q->sched = s;
        q->ctx = context_ref(ctx);
        q->index = index;
        q->engine = engine;
        q->bytes_per_ns = 1.0; /* 1 GB/s until measured */
        q->group = engine == GPU_ENGINE_COMPUTE ? &s->compute : &q->own_group;
        LIST_APPEND(queues, s->queues, q);
        return q;
}

static void stream_unbind(SchedStream *st);

static void hwq_free(Scheduler *s, HwQueue *q) {
        while (q->bound)
                stream_unbind(q->bound);
        LIST_REMOVE(queues, s->queues, q);
        context_unref(q->ctx);
        free(q);
}

static HwQueue *hwq_find(Scheduler *s, Context *ctx, unsigned index) {
        HwQueue *q;

        LIST_FOREACH(queues, q, s->queues)
                if (q->ctx == ctx && q->index == index)
                        return q;
        return NULL;
}

static HwQueue *pick_sdma(Scheduler *s);

int scheduler_new(sd_event *event, ContextPool *pool, const SchedulerCallbacks *cb, Scheduler **ret) {
        Context *dev = context_pool_device(pool);
        const GpuDeviceInfo *info = context_pool_info(pool);
        Scheduler *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->pool = pool;
        s->cb = *cb;
        s->compute.max_jobs = COMPUTE_GROUP_MAX_JOBS;
        s->backoff_wake_ns = UINT64_MAX;
        s->chunk_bytes = CHUNK_BYTES;
        const char *e = getenv("KFDBROKERD_CHUNKING");
        if (e && strcmp(e, "0") == 0) {
                s->chunk_bytes = 0;
                log_info("Chunking of large copies and fills is off (KFDBROKERD_CHUNKING=0)");
        }
        /* The device context's SDMA queues exist from the start. */
        for (unsigned i = 0; i < info->n_queues; i++)
                if (info->queue_engine[i] == GPU_ENGINE_SDMA && !hwq_new(s, dev, i, GPU_ENGINE_SDMA)) {
                        scheduler_free(s);
                        return -ENOMEM;
                }
        /* And the express one, made after them (KFD puts it on the engine
         * of the next free SDMA slot: kfd_device_queue_manager.c
         * allocate_sdma_queue()). Without a slot for it, small jobs go to
         * the ordinary queues as before. */
        if (pick_sdma(s)) {
                unsigned idx;
                int r = gpu_context_add_queue(context_pool_device_gpu(pool), GPU_ENGINE_SDMA,
                                              GPU_QUEUE_PRIORITY_DEFAULT, &idx);
                if (r < 0)
                        log_debug_errno(r, "No express SDMA queue for small jobs: %m");
                else {
                        s->sdma_express = hwq_new(s, dev, idx, GPU_ENGINE_SDMA);
                        if (!s->sdma_express) {
                                scheduler_free(s);
                                return -ENOMEM;
                        }
                        s->sdma_express->express = true;
                }
        }
        *ret = s;
        return 0;
}

Scheduler *scheduler_free(Scheduler *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->timeout_timer);
        /* The manager retires or cancels all jobs before freeing us. */
        while (s->queues)
                hwq_free(s, s->queues);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

/* ---- streams ---- */

static void stream_unbind(SchedStream *st) {
        if (st->hwq) {
                st->hwq->n_streams--;
                LIST_REMOVE(bound, st->hwq->bound, st);
        }
        st->hwq = NULL;
}

static void stream_bind(SchedStream *st, HwQueue *q) {
        stream_unbind(st);
        st->hwq = q;
        q->n_streams++;
        LIST_PREPEND(bound, q->bound, st);
}

/* ---- users (the compute group's shares) ---- */

static bool user_busy(const SchedUser *u) {
        return u->compute_held > 0 || u->compute_streams > 0;
}

/* Changes what a compute stream's user has in the group, counting the users
 * with work there. */
static void user_change(SchedGroup *g, SchedUser *u, int d_streams, int d_held) {
        bool was;

        if (!u || !g)
                return;
        was = user_busy(u);
        assert(d_streams >= 0 || u->compute_streams > 0);
        assert(d_held >= 0 || u->compute_held > 0);
        u->compute_streams += d_streams;
        u->compute_held += d_held;
        if (user_busy(u) != was) {
                if (was)
                        g->users--;
                else
                        g->users++;
        }
}

/*
 * The most slots of the compute group one user may hold: max(4, ceil(16 /
 * (U + 1))) with U users that have compute work (waiting or on the GPU). The
 * "+ 1" leaves room for a user yet to come: with U users holding their
 * shares, a user that gets work finds slots free (16 - U x share >= 4 for U <
 * 4), and what each of the others holds is already within the share of U +
 * 1 users — a slot on the GPU cannot be taken back, and a halted or spinning
 * kernel keeps its slot until its DispatchTimeout=. From 4 users on the
 * floor of 4 can fill the group; then a user holding none still gets one
 * slot beyond it (COMPUTE_GROUP_WAKE_JOBS, run_group()).
 */
static unsigned user_share(const SchedGroup *g) {
        unsigned share = (g->max_jobs + g->users) / (g->users + 1);

        return MAX(share, COMPUTE_USER_MIN_JOBS);
}

/* How long a user whose contexts were lost `streak` times in a row waits
 * before its next one. */
static uint64_t fault_backoff_ns(unsigned streak) {
        if (streak <= FAULT_FREE_LOSSES)
                return 0;
        return MIN(FAULT_BACKOFF_NS << MIN(streak - FAULT_FREE_LOSSES - 1, 16u), FAULT_BACKOFF_MAX_NS);
}

/*
 * A GPU context u's work ran in was lost (a fault, mostly: the client's
 * kernel). Each loss costs the daemon a context's bring-up — a worker
 * process, with that mechanism — and a client whose kernels fault in a loop
 * made it bring up some 350 a second, raising another user's dispatch p99
 * from 0.29 to 18 ms (issue 29). So a user that keeps losing contexts waits
 * before its next one (fault_backoff_ns()); the wait shrinks when the losses
 * stop. Charged once per loss, whichever of its streams used the context.
 */
static void user_fault(Scheduler *s, SchedUser *u, uint64_t now) {
        uint64_t quiet, delay;

        if (!u || u->fault_seen == s->losses)
                return;
        u->fault_seen = s->losses;
        quiet = (now - MIN(now, u->last_fault_ns)) / FAULT_DECAY_NS;
        u->fault_streak = u->fault_streak > quiet ? u->fault_streak - (unsigned) quiet : 0;
        if (u->fault_streak == 0)
                u->backoff_told = false;
        u->fault_streak = MIN(u->fault_streak + 1, FAULT_STREAK_MAX);
        u->last_fault_ns = now;
        delay = fault_backoff_ns(u->fault_streak);
        u->backoff_until_ns = now + delay;
        if (delay > 0 && !u->backoff_told) {
                /* Once a streak: the next lines would say the same. */
                u->backoff_told = true;
                log_notice("GPU contexts of %s were lost %u times in a row (its kernels fault): its next GPU context "
                           "comes up after %.0f ms, later ones after up to %.0f ms while the losses go on; its "
                           "dispatches wait meanwhile",
                           u->name ? u->name : "a user", u->fault_streak, (double) delay / 1e6,
                           (double) FAULT_BACKOFF_MAX_NS / 1e6);
        }
}

bool scheduler_user_backs_off(const SchedUser *u) {
        return u && u->backoff_until_ns > 0 && now_ns() < u->backoff_until_ns;
}

/* Whether st must wait before its context comes up again (user_fault()):
 * its context is down and its user's backoff runs. Notes when it ends. */
static bool stream_backs_off(Scheduler *s, const SchedStream *st) {
        uint64_t now;

        if (!st->user || st->user->backoff_until_ns == 0 || !st->ctx || context_live(st->ctx))
                return false;
        now = now_ns();
        if (now >= st->user->backoff_until_ns)
                return false;
        s->backoff_wake_ns = MIN(s->backoff_wake_ns, st->user->backoff_until_ns);
        return true;
}

/* The ordinary SDMA queue of the device context that is home to the fewest
 * streams (wherever they are bound now: a light one may be on the express
 * queue). */
static HwQueue *pick_sdma(Scheduler *s) {
        HwQueue *q, *best = NULL;

        LIST_FOREACH(queues, q, s->queues)
                if (q->engine == GPU_ENGINE_SDMA && !q->express && context_is_device(q->ctx) &&
                    (!best || q->n_homed < best->n_homed))
                        best = q;
        return best;
}

static void stream_set_sdma_home(SchedStream *st, HwQueue *q) {
        if (st->sdma_home)
                st->sdma_home->n_homed--;
        st->sdma_home = q;
        if (q)
                q->n_homed++;
}

void scheduler_stream_init(Scheduler *s, SchedStream *st, uint64_t owner_id, GpuEngine engine, uint32_t weight) {
        /* 2^32 streams before a chain comes round again: by then the old
         * one's jobs are long gone. */
        if (++s->last_chain == 0)
                s->last_chain = 1;
        *st = (SchedStream) { .owner_id = owner_id, .engine = engine, .weight = weight ? weight : 1,
                              .want_priority = GPU_QUEUE_PRIORITY_DEFAULT, .chain = s->last_chain };
        if (engine == GPU_ENGINE_SDMA) {
                HwQueue *q = pick_sdma(s);
                if (q) {
                        stream_bind(st, q);
                        st->group = q->group;
                        stream_set_sdma_home(st, q);
                }
        } else
                st->group = &s->compute;
}

/* Whether the stream has nothing pending or on the GPU. */
static bool stream_idle(const SchedStream *st) {
        return !st->active && st->n_inflight == 0;
}

/* A compute stream whose recent dispatches were all short — each under a
 * queue's budget — asks for its context's express queue (context_get_queue()),
 * where no long dispatch of another session runs ahead of them. */
static bool stream_wants_express(const SchedStream *st) {
        return st->dispatch_max_ns > 0 && st->dispatch_max_ns <= QUEUE_BUDGET_NS;
}

/* An idle compute stream bound to a queue of the wrong priority, context or
 * kind lets go of it; it binds again when it next has work. One that wants
 * the express queue and did not get it (its context had one user then)
 * asks again when it is idle and the context has more users. */

static void stream_maybe_rebind(SchedStream *st) {
        HwQueue *q = st->hwq;

        if (st->engine != GPU_ENGINE_COMPUTE || !q || !stream_idle(st))
                return;
        if (q->ctx != st->ctx || q->priority != st->want_priority)
                stream_unbind(st);
        else if (st->bound_express != stream_wants_express(st) && (st->bound_express || context_get_users(st->ctx) > 1))
                stream_unbind(st);
}

void scheduler_stream_set_context(Scheduler *s, SchedStream *st, Context *ctx) {
        if (st->ctx == ctx)
                return;
        context_unref(st->ctx);
        st->ctx = context_ref(ctx);
        stream_maybe_rebind(st);
}

int scheduler_stream_use_sdma(Scheduler *s, SchedStream *st, Context *ctx, unsigned index) {
        HwQueue *q;

        if (st->engine != GPU_ENGINE_SDMA || !stream_idle(st) || st->pending.first)
                return -EBUSY;
        q = hwq_find(s, ctx, index);
        if (!q) {
                q = hwq_new(s, ctx, index, GPU_ENGINE_SDMA);
                if (!q)
                        return -ENOMEM;
        }
        stream_bind(st, q);
        st->group = q->group;
        stream_set_sdma_home(st, NULL); /* stays there */
        return 0;
}

void scheduler_stream_set_class(Scheduler *s, SchedStream *st, unsigned klass, uint32_t kfd_priority) {
        st->klass = klass;
        st->want_priority = kfd_priority;
        stream_maybe_rebind(st);
}

void scheduler_stream_set_user(Scheduler *s, SchedStream *st, SchedUser *user) {
        assert(!st->active);
        st->user = user;
}

void scheduler_stream_done(Scheduler *s, SchedStream *st) {
        if (st->active && st->group) {
                QUEUE_REMOVE(active, st->group->active, st);
                if (st->engine == GPU_ENGINE_COMPUTE)
                        user_change(st->group, st->user, -1, 0);
        }
        st->active = false;
        stream_unbind(st);
        stream_set_sdma_home(st, NULL);
        st->ctx = context_unref(st->ctx);
}

/* ---- jobs ---- */

static uint64_t job_bytes(const SchedJob *j) {
        if (j->kind != SCHED_JOB_WORK && j->kind != SCHED_JOB_CHUNK)
                return 0;
        if (j->gpu.type == GPU_JOB_COPY)
                return j->gpu.copy.size;
        if (j->gpu.type == GPU_JOB_FILL)
                return j->gpu.fill.size;
        return 0;
}

static uint64_t job_cost(const SchedJob *j) {
        uint64_t c = job_bytes(j);

        return c < MIN_JOB_COST ? MIN_JOB_COST : c;
}

void sched_args_append(uint8_t *packed, uint32_t *size, uint32_t offset, const void *bytes, uint32_t n) {
        memcpy(packed + *size, &offset, 4);
        memcpy(packed + *size + 4, &n, 4);
        if (n > 0)
                memcpy(packed + *size + SCHED_ARGS_RECORD, bytes, n);
        *size += SCHED_ARGS_RECORD + n;
}

void sched_args_lay(const uint8_t *packed, uint32_t packed_size, uint8_t *image, uint32_t image_size) {
        uint32_t pos = 0;

        memset(image, 0, image_size);
        while (packed_size - pos >= SCHED_ARGS_RECORD) {
                uint32_t off, n;

                memcpy(&off, packed + pos, 4);
                memcpy(&n, packed + pos + 4, 4);
                pos += SCHED_ARGS_RECORD;
                if (n > packed_size - pos)
                        break; /* the owner built it: never */
                if (off < image_size)
                        memcpy(image + off, packed + pos, MIN(n, image_size - off));
                pos += n;
        }
}

void sched_job_describe(const SchedJob *j, char *buf, size_t size) {
        switch (j->kind) {
        case SCHED_JOB_SIGNAL:
                snprintf(buf, size, "signal-event job");
                return;
        case SCHED_JOB_WAIT:
                snprintf(buf, size, "wait-event job");
                return;
        case SCHED_JOB_RELAY:
                snprintf(buf, size, "relay job");
                return;
        case SCHED_JOB_CHUNK:
        case SCHED_JOB_WORK:
                break;
        }
        if (j->gpu.type == GPU_JOB_DISPATCH && j->gpu.dispatch.co &&
            j->gpu.dispatch.kernel < gpu_code_object_n_kernels(j->gpu.dispatch.co))
                snprintf(buf, size, "dispatch of kernel \"%s\"",
                         gpu_code_object_kernel(j->gpu.dispatch.co, j->gpu.dispatch.kernel)->name);
        else if (j->gpu.type == GPU_JOB_AQL)
                snprintf(buf, size, "relayed kernel dispatch (AQL packet %" PRIu64 ")", j->gpu.aql.dispatch_id);
        else
                snprintf(buf, size, "%s job", j->gpu.type == GPU_JOB_COPY ? "copy" : j->gpu.type == GPU_JOB_FILL ? "fill"
                                                                           : "dispatch");
}

/* Where a stream that wakes from idle starts: the least virtual time among
 * the group's active streams or, with none active, the group's virtual
 * clock. Without the clock, a stream that woke while nothing else was
 * active kept the virtual time it went idle with (0 for a new one), and a
 * stream that had been alone on the engine — its virtual time grown by all
 * it ran meanwhile — got nothing until the newcomer had caught up: a light
 * client that had run alone for a while waited 1.3 s for its first
 * dispatch once 8 flooders came (tests/bench/bench-compute, shared context). */
static double wake_vtime(const SchedGroup *g) {
        double m = -1;

        for (SchedStream *it = g->active.first; it; it = it->active_next)
                if (m < 0 || it->vtime < m)
                        m = it->vtime;
        return m < 0 ? g->vclock : m;
}

/* Whether j, the job an SDMA stream wakes with, goes to the express SDMA
 * queue (EXPRESS_SDMA_BYTES): a small copy or fill of a stream whose home is
 * an ordinary queue of the device context. */
static bool express_sdma_wanted(const Scheduler *s, const SchedStream *st, const SchedJob *j) {
        return s->sdma_express && st->sdma_home && j->kind == SCHED_JOB_WORK &&
               (j->gpu.type == GPU_JOB_COPY || j->gpu.type == GPU_JOB_FILL) && job_bytes(j) <= EXPRESS_SDMA_BYTES;
}

/* An SDMA stream waking with j, with nothing on the GPU (its jobs run in
 * order: it changes queues only then), goes to the express queue or back
 * to its home queue as j asks; a work or event job of another kind stays
 * where the stream is. On another queue it is in another group, whose
 * virtual times are not its old group's: it starts at the new group's
 * (wake_vtime()). */
static void stream_pick_sdma_queue(Scheduler *s, SchedStream *st, const SchedJob *j) {
        HwQueue *q;

        if (st->engine != GPU_ENGINE_SDMA || !st->sdma_home || st->n_inflight > 0 ||
            (j->kind != SCHED_JOB_WORK && st->hwq))
                return;
        q = express_sdma_wanted(s, st, j) ? s->sdma_express : st->sdma_home;
        if (q == st->hwq)
                return;
        stream_bind(st, q);
        st->group = q->group;
        st->vtime = wake_vtime(q->group);
}

void scheduler_enqueue(Scheduler *s, SchedStream *st, SchedJob *j) {
        j->cost = job_cost(j);
        j->queued_ns = loop_now_ns(s->event);
        j->stream = st;
        j->state = SCHED_JOB_PENDING;
        QUEUE_APPEND(queue, st->pending, j);
        if (!st->active)
                stream_pick_sdma_queue(s, st, j);
        if (!st->active && st->group) {
                double m = wake_vtime(st->group);

                /* Waking from idle: no credit for the time it did not compete. */
                if (m > st->vtime)
                        st->vtime = m;
                /* Nor a queue chosen when its context had fewer users or its
                 * dispatches looked otherwise. */
                stream_maybe_rebind(st);
                QUEUE_APPEND(active, st->group->active, st);
                st->active = true;
                if (st->engine == GPU_ENGINE_COMPUTE)
                        user_change(st->group, st->user, +1, 0);
        }
}

/* Drops the stream from the active list once it has nothing pending. */
static void stream_maybe_idle(SchedStream *st) {
        if (st->pending.first || !st->active)
                return;
        QUEUE_REMOVE(active, st->group->active, st);
        st->active = false;
        if (st->engine == GPU_ENGINE_COMPUTE)
                user_change(st->group, st->user, -1, 0);
        stream_maybe_rebind(st);
}

static void stream_remove_pending(SchedStream *st, SchedJob *j) {
        QUEUE_REMOVE(queue, st->pending, j);
        if (st->blocked_head == j)
                st->blocked_head = NULL;
}

/* A job some of whose chunks are on the GPU leaves its stream: the rest of it
 * never runs, and it finishes (once) when those chunks have retired, with
 * error and msg (NULL: dropped without a word), unless one of them failed
 * first. */
static void chunked_job_stop(SchedJob *j, int error, const char *msg) {
        assert(j->chunks_inflight > 0 && j->state == SCHED_JOB_PENDING);
        stream_remove_pending(j->stream, j);
        j->state = SCHED_JOB_SUBMITTED;
        if (j->chunk_error == 0) {
                j->chunk_error = error;
                j->chunk_message = msg ? strdup(msg) : NULL;
        }
}

int scheduler_dequeue(Scheduler *s, SchedJob *j) {
        SchedStream *st = j->stream;

        if (j->state != SCHED_JOB_PENDING || !st)
                return 0;
        if (j->chunks_inflight > 0) {
                chunked_job_stop(j, ECANCELED, NULL);
                stream_maybe_idle(st);
                return 1;
        }
        stream_remove_pending(st, j);
        stream_maybe_idle(st);
        return 0;
}

typedef enum Readiness {
        JOB_READY,
        JOB_BLOCKED,
        JOB_CANCELLED,
} Readiness;

static bool relay(Scheduler *s, HwQueue *from, Context *to, GpuWait *ret_wait);

/*
 * Resolves a wait-event job at the head of its stream, bound to q
 * (idempotent for the other kinds). The GPU, not the CPU, waits for a signal
 * already on its way in the same GPU context.
 */
static Readiness job_prepare(Scheduler *s, SchedJob *j, HwQueue *q) {
        SchedEvent *e = j->event;
        SchedJob *sig;
        GpuWait w;

        if (j->kind != SCHED_JOB_WAIT || j->wait_resolved)
                return JOB_READY;
        if (e->destroyed)
                return JOB_CANCELLED;
        if (e->signaled) {
                if (e->auto_reset)
                        s->cb.event_reset(e, s->cb.userdata); /* this wait consumes the signal */
                j->wait_resolved = true;
                return JOB_READY;
        }
        LIST_FOREACH(signals, sig, e->signals) {
                if (e->auto_reset && sig->signal_claimed)
                        continue;
                /* A queue of another GPU (a session's jobs on several
                 * GPUs): nothing of this GPU can see its fence. The signal
                 * sets the event when it completes, and the wait is
                 * resolved here then (the Manager runs every GPU's
                 * scheduler after an event is signaled). */
                if (sig->hwq->sched != s)
                        continue;
                /* Another context's queue: its fence is memory this context
                 * cannot see, and must not. A device-context SDMA queue can
                 * write a word of this (client) context when it gets there — a
                 * relay; the other way round a device queue would poll memory
                 * a client's kernel can write, so the signal sets the event
                 * when it completes and the wait is resolved here. */
                if (sig->hwq->ctx != q->ctx) {
                        if (!context_is_device(sig->hwq->ctx) || sig->hwq->engine != GPU_ENGINE_SDMA ||
                            context_is_device(q->ctx) || !relay(s, sig->hwq, q->ctx, &w))
                                continue;
                        if (e->auto_reset)
                                sig->signal_claimed = true;
                        j->gpu.waits[0] = w;
                        j->gpu.n_waits = 1;
                        j->wait_resolved = true;
                        return JOB_READY;
                }
                if (e->auto_reset)
                        sig->signal_claimed = true;
                /* Same ring: the signal job's packets precede ours, nothing to wait for. */
                if (sig->hwq != q) {
                        j->gpu.waits[0] = (GpuWait) { .queue = sig->hwq->index, .seq = sig->seq };
                        j->gpu.n_waits = 1;
                }
                j->wait_resolved = true;
                return JOB_READY;
        }
        return JOB_BLOCKED;
}

static void fail_head(Scheduler *s, SchedStream *st, int error, const char *msg);

/*
 * A job of st (described as `what`) failed: the jobs ordered after it that
 * are still waiting in the stream fail too, without running (those already
 * on the GPU behind it are dropped by the GPU layer: GpuJob.chain). A job
 * submitted after this runs.
 */
static void fail_ordered_after(Scheduler *s, SchedStream *st, const char *what) {
        char msg[256];

        if (st->failing || !st->pending.first)
                return;
        snprintf(msg, sizeof msg, "not run: the %s before it in its stream failed", what);
        st->failing = true;
        while (st->pending.first)
                fail_head(s, st, ECANCELED, msg);
        st->failing = false;
}

static void finish_job(Scheduler *s, SchedJob *j, int error, const char *msg, uint64_t busy_ns) {
        SchedStream *st = j->stream;
        char what[192];
        bool ordering;

        assert(j->kind != SCHED_JOB_CHUNK && j->chunks_inflight == 0);
        if (j->kind == SCHED_JOB_RELAY) {
                if (error != 0)
                        log_debug("A relay job on the GPU failed (%s)", strerror(error));
                /* Its write comes after the fence word that retired it: the
                 * page's mapping in the device context stays until it landed. */
                gpu_buffer_unref_after_jobs_of(j->hold, context_pool_device_gpu(s->pool));
                free(j);
                return;
        }
        if (error == 0)
                s->jobs_completed++;
        else
                s->jobs_failed++;
        j->state = SCHED_JOB_DONE;
        /* A job dropped without a word (its client went away, and every job
         * of it goes) orders nothing. */
        ordering = error != 0 && st && msg && !st->failing && st->pending.first;
        if (ordering)
                sched_job_describe(j, what, sizeof what);
        s->cb.job_finished(j, error, msg, busy_ns, s->cb.userdata); /* frees j */
        if (ordering)
                fail_ordered_after(s, st, what);
}

static bool is_event_job(const SchedJob *j) {
        return j->kind != SCHED_JOB_WORK && j->kind != SCHED_JOB_CHUNK;
}

static uint64_t estimate_ns(const HwQueue *q, const SchedJob *j);

/* The GPU time of work q takes at once (QUEUE_BUDGET_NS, SDMA_QUEUE_BUDGET_NS). */
static uint64_t queue_budget_ns(const Scheduler *s, const HwQueue *q) {
        return q->engine == GPU_ENGINE_SDMA && s->sdma_express && !q->express && context_is_device(q->ctx)
                       ? SDMA_QUEUE_BUDGET_NS
                       : QUEUE_BUDGET_NS;
}

static bool queue_has_room(const Scheduler *s, const HwQueue *q, const SchedJob *j) {
        uint64_t est;

        /* An empty queue always takes one job, however large. */
        if (q->stats.in_flight == 0)
                return true;
        /* Event jobs move no data, so the byte budget does not hold them back,
         * and they get room of their own in the job budget: a signal queued
         * behind a large copy goes to the ring at once, so the other engine's
         * wait for it is resolved and submitted too, and the GPU (POLL_REGMEM /
         * WAIT_REG_MEM on the fence) does the waiting, not this scheduler. */
        if (is_event_job(j))
                return q->stats.in_flight < QUEUE_MAX_JOBS + QUEUE_EVENT_JOBS;
        if (q->stats.in_flight >= QUEUE_MAX_JOBS)
                return false;
        if (s->chunk_bytes == 0)
                return q->stats.in_flight_bytes + j->cost <= UNCHUNKED_QUEUE_MAX_BYTES;
        est = estimate_ns(q, j);
        if (j->stream && j->stream->n_inflight == 0 && est <= WAKE_JOB_NS)
                return true;
        return q->inflight_ns + est <= queue_budget_ns(s, q);
}

/* Whether a user holding no compute slot may take one beyond the group's
 * budget: the group is full, and not yet by more than COMPUTE_GROUP_WAKE_JOBS. */
static bool group_wakes(const SchedGroup *g, const SchedStream *st) {
        return st->engine == GPU_ENGINE_COMPUTE && st->user && st->user->compute_held == 0 &&
               g->work_in_flight < g->max_jobs + COMPUTE_GROUP_WAKE_JOBS;
}

static bool group_has_room(const SchedGroup *g, const SchedStream *st, const SchedJob *j) {
        return is_event_job(j) || g->max_jobs == 0 || g->work_in_flight == 0 || g->work_in_flight < g->max_jobs ||
               group_wakes(g, st);
}

/* Whether st's user may take one more slot of the compute group (its share,
 * user_share(); while the group is full, only a user that holds none). */
static bool user_may_take(const SchedGroup *g, const SchedStream *st) {
        if (!st->user || g->max_jobs == 0)
                return true;
        if (g->work_in_flight >= g->max_jobs)
                return group_wakes(g, st);
        return st->user->compute_held < user_share(g);
}

/* A copy or fill from the queue's measured throughput; a dispatch from its
 * stream's recent dispatches (a stream tends to repeat its kernels), so the
 * queue budget holds on compute too: a queue with one long dispatch on it
 * takes no second one, and a stream that wakes with a short one goes in
 * behind at most what runs (a shared context's queues serve many streams). */
/* A kernel dispatch: a client's, or a relayed client's AQL packet. */
static bool is_dispatch(const SchedJob *j) {
        return j->gpu.type == GPU_JOB_DISPATCH || j->gpu.type == GPU_JOB_AQL;
}

static uint64_t estimate_ns(const HwQueue *q, const SchedJob *j) {
        uint64_t bytes = job_bytes(j);

        if (is_dispatch(j) && !is_event_job(j))
                return j->stream && j->stream->dispatch_ns > EMPTY_JOB_NS ? (uint64_t) j->stream->dispatch_ns
                                                                           : EMPTY_JOB_NS;
        return bytes ? (uint64_t) ((double) bytes / q->bytes_per_ns) + EMPTY_JOB_NS : EMPTY_JOB_NS;
}

/* Where the stream stands, counting its jobs on the GPU at their estimate. */
static double stream_key(const SchedStream *st) {
        return st->vtime + (double) st->inflight_est / st->weight;
}

/* The estimate of a stream's next job (an active stream has one). */
static uint64_t head_estimate(const SchedStream *st) {
        const SchedJob *j = st->pending.first;

        return j && st->hwq ? estimate_ns(st->hwq, j) : EMPTY_JOB_NS;
}

/* Whether stream a goes before b: a higher priority class first; then the
 * least virtual time; on a tie the one with less on the GPU, then the one
 * whose next job is shorter. Ties are common: a stream that wakes from idle
 * starts at the least virtual time of the active ones, so a light stream
 * stands level with a flooder there, and goes first — on SDMA because the
 * flooder has pieces on the GPU, on compute (where a flooder waiting for
 * its next dispatch has none on the GPU) because its dispatch is shorter.
 * Without the last rule a light stream in a shared context, appended to the
 * active list after the flooders, lost every tie to them. */
static bool stream_before(const SchedStream *a, const SchedStream *b) {
        double ka, kb;

        if (a->klass != b->klass)
                return a->klass > b->klass;
        ka = stream_key(a);
        kb = stream_key(b);
        if (ka != kb)
                return ka < kb;
        if (a->n_inflight != b->n_inflight)
                return a->n_inflight < b->n_inflight;
        return head_estimate(a) < head_estimate(b);
}

/* Binds a compute stream to a queue of its class in its context, bringing
 * the context up if needed. 0, -EAGAIN (the pool is full: try later) or
 * another error with err set. */
static int stream_bind_compute(Scheduler *s, SchedStream *st, char *err, size_t errlen) {
        uint32_t prio;
        unsigned idx;
        HwQueue *q;
        int r;

        if (!st->ctx) {
                snprintf(err, errlen, "no GPU context for compute");
                return -ENODEV;
        }
        r = context_get_queue(st->ctx, GPU_ENGINE_COMPUTE, st->want_priority, stream_wants_express(st), &idx, &prio,
                              &st->bound_express, err, errlen);
        if (r < 0)
                return r;
        q = hwq_find(s, st->ctx, idx);
        if (!q) {
                q = hwq_new(s, st->ctx, idx, GPU_ENGINE_COMPUTE);
                if (!q) {
                        snprintf(err, errlen, "out of memory");
                        return -ENOMEM;
                }
                q->priority = prio;
        }
        stream_bind(st, q);
        return 0;
}

/* Fails the head job of a stream that cannot run it (one with chunks on the
 * GPU fails when they have retired). */
static void fail_head(Scheduler *s, SchedStream *st, int error, const char *msg) {
        SchedJob *j = st->pending.first;

        if (j->chunks_inflight > 0)
                chunked_job_stop(j, error, msg);
        else {
                stream_remove_pending(st, j);
                finish_job(s, j, error, msg, 0);
        }
        stream_maybe_idle(st);
}

/* Puts the in-flight bookkeeping of a job written to q. */
static void track_submitted(Scheduler *s, HwQueue *q, SchedJob *j, uint64_t seq) {
        j->state = SCHED_JOB_SUBMITTED;
        j->hwq = q;
        j->seq = seq;
        j->submitted_ns = loop_now_ns(s->event);
        j->est_ns = estimate_ns(q, j);
        if (!q->inflight.first)
                q->head_since_ns = j->submitted_ns;
        QUEUE_APPEND(queue, q->inflight, j);
        if (j->kind == SCHED_JOB_RELAY)
                return; /* the scheduler's own, tiny: not in the counts */
        q->stats.in_flight++;
        q->stats.in_flight_bytes += j->cost;
        q->stats.submitted++;
        if (!is_event_job(j))
                q->inflight_ns += j->est_ns;
}

static unsigned class_index(unsigned klass) {
        return MIN(klass, SCHED_CLASSES - 1);
}

/* The stream's side of a job written to its queue. */
static void stream_track_submitted(SchedStream *st, SchedJob *j) {
        if (st->group && st->vtime > st->group->vclock)
                st->group->vclock = st->vtime;
        st->inflight_est += j->est_ns;
        st->n_inflight++;
        j->klass = class_index(st->klass);
        if (!is_event_job(j)) {
                st->hwq->group->work_in_flight++;
                st->hwq->group->class_in_flight[j->klass]++;
                if (st->engine == GPU_ENGINE_COMPUTE)
                        user_change(st->hwq->group, st->user, 0, +1);
        }
}

/* Writes one job to its stream's hardware queue. */
static void submit_job(Scheduler *s, SchedStream *st, SchedJob *j) {
        HwQueue *q = st->hwq;
        char err[256] = "", what[192], msg[512];
        bool laid = false;
        uint64_t seq;
        int r;

        /* The kernel argument image exists only while the job is written:
         * the GPU layer copies it (a kernarg slot, or a worker's message). */
        uint8_t image[SCHED_ARGS_IMAGE_MAX];
        if (j->kind == SCHED_JOB_WORK && j->gpu.type == GPU_JOB_DISPATCH && j->gpu.dispatch.args_size > 0 &&
            !j->gpu.dispatch.args_data) {
                assert(j->gpu.dispatch.args_size <= sizeof image);
                sched_args_lay(j->args_packed, j->args_packed_size, image, j->gpu.dispatch.args_size);
                j->gpu.dispatch.args_data = image;
                laid = true;
        }
        j->gpu.chain = st->chain;
        r = context_submit(q->ctx, q->index, &j->gpu, j->code, j->relocs, j->n_relocs, &seq, err, sizeof err);
        if (laid)
                j->gpu.dispatch.args_data = NULL;
        if (r == -EAGAIN) {
                q->full = true; /* no room on the ring now: after completions */
                return;
        }
        QUEUE_REMOVE(queue, st->pending, j);
        if (r < 0) {
                sched_job_describe(j, what, sizeof(what));
                /* A quota is the client's to hear about (its JobFailed says
                 * which), not the administrator's. */
                log_full_errno(r == -EDQUOT ? LOG_DEBUG : LOG_WARNING, r, "Session %" PRIu64 ": GPU refused %s: %s",
                               j->owner_id, what, err[0] ? err : strerror(-r));
                if (r == -EDQUOT)
                        snprintf(msg, sizeof(msg), "%s", err);
                else if (is_dispatch(j) && r == -EINVAL)
                        snprintf(msg, sizeof(msg), "the GPU layer refused the %s: the hardware cannot run it (%s)",
                                 what, err[0] ? err : strerror(-r));
                else
                        snprintf(msg, sizeof(msg), "the GPU layer refused the %s (%s)", what,
                                 err[0] ? err : strerror(-r));
                finish_job(s, j, -r, msg, 0);
                stream_maybe_idle(st);
                return;
        }
        track_submitted(s, q, j, seq);
        stream_track_submitted(st, j);
        if (j->kind == SCHED_JOB_SIGNAL)
                LIST_APPEND(signals, j->event->signals, j);
        stream_maybe_idle(st);
}

static bool job_wants_chunks(const Scheduler *s, const SchedJob *j) {
        return s->chunk_bytes > 0 && j->kind == SCHED_JOB_WORK &&
               (j->gpu.type == GPU_JOB_COPY || j->gpu.type == GPU_JOB_FILL) && job_bytes(j) > s->chunk_bytes;
}

/* The next piece of j (a copy or fill that wants chunks), not yet submitted:
 * the first carries j's GPU waits, the last j's signal word. NULL if out of
 * memory. */
/*
 * The size of st's next piece: CHUNK_BYTES while another stream of its queue
 * waits with an event job or a copy, fill or dispatch of at most that much
 * (which then waits behind one such piece, as before), and on a queue without
 * the express queue beside it; else CHUNK_MAX_BYTES. What waits on an
 * ordinary queue then is large jobs, each longer than a small piece itself,
 * and the small jobs of streams that wake go to the express queue.
 */
static uint64_t piece_bytes(const Scheduler *s, const SchedStream *st) {
        const HwQueue *q = st->hwq;

        if (!q || !st->group || queue_budget_ns(s, q) == QUEUE_BUDGET_NS)
                return s->chunk_bytes;
        for (const SchedStream *o = st->group->active.first; o; o = o->active_next) {
                const SchedJob *h = o->pending.first;
                if (o != st && h && (is_event_job(h) || job_bytes(h) <= s->chunk_bytes))
                        return s->chunk_bytes;
        }
        return CHUNK_MAX_BYTES;
}

static SchedJob *chunk_new(const Scheduler *s, SchedJob *j) {
        uint64_t off = j->chunked_bytes, size = MIN(piece_bytes(s, j->stream), job_bytes(j) - off);
        SchedJob *c = calloc(1, sizeof *c);

        if (!c)
                return NULL;
        *c = (SchedJob) { .kind = SCHED_JOB_CHUNK, .engine = j->engine, .owner_id = j->owner_id, .gpu = j->gpu,
                          .timeout_ns = j->timeout_ns, .stream = j->stream, .parent = j, .cost = size,
                          .state = SCHED_JOB_PENDING };
        if (j->gpu.type == GPU_JOB_COPY) {
                c->gpu.copy.src_va += off;
                c->gpu.copy.dst_va += off;
                c->gpu.copy.size = size;
        } else {
                c->gpu.fill.dst_va += off;
                c->gpu.fill.size = size;
        }
        /* The job's timeout bounds all of it: a piece gets what its retired
         * pieces left of it. */
        if (j->timeout_ns != UINT64_MAX)
                c->timeout_ns = j->timeout_ns > j->chunk_busy_ns ? j->timeout_ns - j->chunk_busy_ns : 1;
        if (off > 0)
                c->gpu.n_waits = 0;
        if (off + size < job_bytes(j)) {
                c->gpu.signal_va = 0;
                c->gpu.signal_value = 0;
        }
        return c;
}

/* Writes the next piece of st's head job j to st's queue. Returns whether it
 * went (false: the queue has no room for it now). */
static bool submit_chunk(Scheduler *s, SchedStream *st, SchedJob *j) {
        HwQueue *q = st->hwq;
        char err[256] = "", what[192], msg[512];
        SchedJob *c;
        uint64_t seq;
        int r;

        c = chunk_new(s, j);
        if (!c) {
                fail_head(s, st, ENOMEM, "out of memory for a piece of the job");
                return true;
        }
        if (!queue_has_room(s, q, c)) {
                free(c);
                q->full = true;
                return false;
        }
        c->gpu.chain = st->chain;
        r = context_submit(q->ctx, q->index, &c->gpu, NULL, NULL, 0, &seq, err, sizeof err);
        if (r == -EAGAIN) {
                free(c);
                q->full = true;
                return false;
        }
        if (r < 0) {
                free(c);
                sched_job_describe(j, what, sizeof what);
                log_warning_errno(r, "Session %" PRIu64 ": GPU refused a piece of a %s: %s", j->owner_id, what,
                                  err[0] ? err : strerror(-r));
                snprintf(msg, sizeof msg, "the GPU layer refused the %s (%s)", what, err[0] ? err : strerror(-r));
                fail_head(s, st, -r, msg);
                return true;
        }
        if (j->chunked_bytes == 0)
                j->submitted_ns = loop_now_ns(s->event);
        track_submitted(s, q, c, seq);
        stream_track_submitted(st, c);
        j->chunked_bytes += c->cost;
        if (j->chunks_inflight++ == 0)
                s->chunked_in_flight++;
        if (j->chunked_bytes == job_bytes(j)) {
                /* All of it is on the GPU: it leaves the stream. */
                stream_remove_pending(st, j);
                j->state = SCHED_JOB_SUBMITTED;
                j->hwq = q;
                j->seq = seq;
                stream_maybe_idle(st);
        }
        return true;
}

/*
 * Writes a relay job to `from` (a device-context SDMA queue): when the queue
 * gets to it — past everything submitted there so far — it writes a word of
 * `to`, and *ret_wait waits for that word in `to`. False if none can be made
 * now (no room on the ring, no relay page): then the wait is resolved on the
 * CPU.
 */
static bool relay(Scheduler *s, HwQueue *from, Context *to, GpuWait *ret_wait) {
        char err[128];
        uint64_t write_va, wait_va, seq;
        uint32_t value;
        SchedJob *r;
        int k;

        r = calloc(1, sizeof *r);
        if (!r)
                return false;
        *r = (SchedJob) { .kind = SCHED_JOB_RELAY, .engine = GPU_ENGINE_SDMA, .timeout_ns = UINT64_MAX,
                          .cost = MIN_JOB_COST, .gpu = { .type = GPU_JOB_NOP } };
        k = context_relay(to, from->index, &r->hold, &write_va, &wait_va, &value);
        if (k < 0) {
                free(r);
                return false;
        }
        r->gpu.signal_va = write_va;
        r->gpu.signal_value = value;
        k = context_submit(from->ctx, from->index, &r->gpu, NULL, NULL, 0, &seq, err, sizeof err);
        if (k < 0) {
                /* The value is spent unwritten: later relays on this slot write
                 * larger ones, which a wait for this one would pass early — but
                 * nobody waits for it. */
                gpu_buffer_unref(r->hold);
                free(r);
                return false;
        }
        track_submitted(s, from, r, seq);
        *ret_wait = (GpuWait) { .va = wait_va, .value = value };
        return true;
}

/*
 * The class below which compute work waits: the highest class with work on
 * the GPU or ready to go there (a work job at the head of a stream bound to
 * a queue). The compute queues of different classes run side by side, on
 * pipes of their own priority or on one pipe taking turns with another queue
 * (where the hardware scheduler put them; queue priority within a pipe is not
 * set by amdkfd since 73463e26f7e2), so a class holds on compute only if a
 * lower class gets no new work onto the GPU while a higher one has work
 * there or waiting. Work already on the GPU runs on; what the GPU does with
 * it, the pipes' priorities decide (sim-isa.h, SIM_PIPE_PRIORITY_*). Event
 * jobs are never held: a higher class may wait for a lower one's signal.
 */
static unsigned compute_hold_class(const SchedGroup *g) {
        unsigned top = 0;

        for (unsigned k = 0; k < SCHED_CLASSES; k++)
                if (g->class_in_flight[k] > 0)
                        top = k;
        for (const SchedStream *st = g->active.first; st; st = st->active_next)
                if (st->hwq && !is_event_job(st->pending.first))
                        top = MAX(top, class_index(st->klass));
        return top;
}

/*
 * Fills the group's hardware queues: while they have room, submit the head
 * job of the ready stream with the least virtual time. A stream whose job
 * does not fit its queue keeps that queue for itself in this pass (nobody
 * overtakes it there); one that does not fit the group's budget stops the
 * group. On compute, a lower class's work waits while a higher class has
 * work on the GPU or ready (compute_hold_class()). Returns true if anything
 * changed.
 */
static bool run_group(Scheduler *s, SchedGroup *g) {
        bool changed = false;
        HwQueue *q;

        LIST_FOREACH(queues, q, s->queues)
                if (q->group == g)
                        q->full = false;
        for (;;) {
                SchedStream *best = NULL, *st, *next;
                unsigned hold = g == &s->compute ? compute_hold_class(g) : 0;
                char err[256];
                SchedJob *j;
                int r;

                for (st = g->active.first; st; st = next) {
                        next = st->active_next;
                        j = st->pending.first;
                        if (g == &s->compute && !is_event_job(j) && st->n_inflight >= COMPUTE_STREAM_MAX_JOBS)
                                continue; /* one stream does not take every slot of the group */
                        if (g == &s->compute && !is_event_job(j) && !user_may_take(g, st))
                                continue; /* nor one user, with all its sessions */
                        if (!is_event_job(j) && class_index(st->klass) < hold)
                                continue; /* a higher class has the compute engine */
                        if (!st->hwq) {
                                if (stream_backs_off(s, st))
                                        continue; /* its user's contexts keep faulting: later */
                                err[0] = '\0';
                                r = stream_bind_compute(s, st, err, sizeof err);
                                if (r == -EAGAIN)
                                        continue; /* no context free now: after completions */
                                if (r < 0) {
                                        char msg[320];
                                        /* A quota names itself (context.h, ContextPayer). */
                                        snprintf(msg, sizeof msg, "%s%s", r == -EDQUOT ? "" : "no GPU context to run it in: ",
                                                 err);
                                        fail_head(s, st, -r, msg);
                                        changed = true;
                                        continue;
                                }
                        }
                        if (st->hwq->full)
                                continue;
                        switch (job_prepare(s, j, st->hwq)) {
                        case JOB_CANCELLED:
                                fail_head(s, st, ECANCELED, "the event this wait-event job waits for was destroyed");
                                changed = true;
                                continue;
                        case JOB_BLOCKED:
                                if (st->blocked_head != j) {
                                        st->blocked_head = j;
                                        st->blocked_since_ns = now_ns();
                                }
                                continue;
                        case JOB_READY:
                                st->blocked_head = NULL;
                                if (!best || stream_before(st, best))
                                        best = st;
                                break;
                        }
                }
                if (!best)
                        break;
                j = best->pending.first;
                if (!group_has_room(g, best, j))
                        break;
                if (job_wants_chunks(s, j)) {
                        if (submit_chunk(s, best, j))
                                changed = true;
                        continue;
                }
                if (!queue_has_room(s, best->hwq, j)) {
                        best->hwq->full = true;
                        continue;
                }
                submit_job(s, best, j);
                if (!best->hwq || !best->hwq->full)
                        changed = true;
        }
        return changed;
}

/* Stops the running jobs of clients that went away (one abort each, as they
 * come to the head of their queue). */
static void reap_cancelled(Scheduler *s) {
        HwQueue *q, *next;

        for (q = s->queues; q; q = next) {
                next = q->queues_next;
                for (unsigned guard = 0; guard < QUEUE_MAX_JOBS + QUEUE_EVENT_JOBS; guard++) {
                        SchedJob *h = q->inflight.first;
                        int r;
                        if (!h || !h->cancel_requested || h->abort_sent)
                                break;
                        r = context_abort(q->ctx, q->index, h->seq, -ECANCELED);
                        if (q->inflight.first == h) {
                                /* Not running (r == 0), or stopping: reported later. */
                                h->abort_sent = r > 0;
                                break;
                        }
                }
        }
}

/* The earliest timeout deadline of any running or held job, or UINT64_MAX. */
static uint64_t next_deadline(const Scheduler *s) {
        uint64_t next = UINT64_MAX;
        const SchedGroup *groups[2] = { &s->compute, NULL };
        HwQueue *q;

        LIST_FOREACH(queues, q, s->queues) {
                const SchedJob *h = q->inflight.first;

                if (h && h->timeout_ns != UINT64_MAX && !h->abort_sent)
                        next = MIN(next, q->head_since_ns + h->timeout_ns);
                if (q->group == &q->own_group)
                        groups[1] = &q->own_group;
                else
                        groups[1] = NULL;
                for (unsigned g = 0; g < 2; g++)
                        for (const SchedStream *st = groups[g] ? groups[g]->active.first : NULL; st; st = st->active_next)
                                if (st->blocked_head && st->blocked_head == st->pending.first &&
                                    st->blocked_head->timeout_ns != UINT64_MAX)
                                        next = MIN(next, st->blocked_since_ns + st->blocked_head->timeout_ns);
        }
        next = MIN(next, s->backoff_wake_ns);
        /* Compute streams not bound to any queue yet. */
        for (const SchedStream *st = s->compute.active.first; st; st = st->active_next)
                if (st->blocked_head && st->blocked_head == st->pending.first && st->blocked_head->timeout_ns != UINT64_MAX)
                        next = MIN(next, st->blocked_since_ns + st->blocked_head->timeout_ns);
        return next;
}

static void arm_timeouts(Scheduler *s);

/* Held wait-event jobs past their timeout fail with ETIME. */
static void expire_held(Scheduler *s, SchedGroup *g, uint64_t now) {
        SchedStream *st, *next;

        for (st = g->active.first; st; st = next) {
                SchedJob *j = st->pending.first;
                char msg[160];

                next = st->active_next;
                if (!j || j != st->blocked_head || j->timeout_ns == UINT64_MAX ||
                    now < st->blocked_since_ns + j->timeout_ns)
                        continue;
                snprintf(msg, sizeof(msg),
                         "wait-event job waited longer than its timeout of %.3f s for its event",
                         (double) j->timeout_ns / 1e9);
                fail_head(s, st, ETIME, msg);
        }
}

static int on_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        Scheduler *s = userdata;
        uint64_t now = now_ns();
        HwQueue *q, *next;

        for (q = s->queues; q; q = next) {
                SchedJob *h = q->inflight.first;

                next = q->queues_next;
                if (h && h->timeout_ns != UINT64_MAX && !h->abort_sent && now >= q->head_since_ns + h->timeout_ns) {
                        int r = context_abort(q->ctx, q->index, h->seq, -ETIME);
                        if (r < 0)
                                log_warning_errno(r, "Failed to abort job %" PRIu64 " on queue %u of GPU context %" PRIu64 ": %m",
                                                  h->seq, q->index, context_get_id(q->ctx));
                        else if (r > 0 && q->inflight.first == h)
                                h->abort_sent = true; /* its report comes from a worker */
                }
        }
        expire_held(s, &s->compute, now);
        LIST_FOREACH(queues, q, s->queues)
                if (q->group == &q->own_group)
                        expire_held(s, &q->own_group, now);
        scheduler_run(s);
        return 0;
}

static void arm_timeouts(Scheduler *s) {
        uint64_t next = next_deadline(s);
        int r;

        if (next == UINT64_MAX) {
                if (s->timeout_timer)
                        (void) sd_event_source_set_enabled(s->timeout_timer, SD_EVENT_OFF);
                return;
        }
        /* CLOCK_MONOTONIC in usec, as now_ns() is CLOCK_MONOTONIC. */
        if (!s->timeout_timer) {
                r = sd_event_add_time(s->event, &s->timeout_timer, CLOCK_MONOTONIC, next / 1000 + 1, 1000,
                                      on_timeout, s);
                if (r < 0) {
                        log_warning_errno(r, "Failed to arm the job timeout timer: %m");
                        return;
                }
                (void) sd_event_source_set_description(s->timeout_timer, "job-timeouts");
                return;
        }
        (void) sd_event_source_set_time(s->timeout_timer, next / 1000 + 1);
        (void) sd_event_source_set_enabled(s->timeout_timer, SD_EVENT_ONESHOT);
}

void scheduler_run(Scheduler *s) {
        if (s->running) {
                s->again = true;
                return;
        }
        s->running = true;
        s->backoff_wake_ns = UINT64_MAX;
        /* Copies and fills go to the device context: one doorbell per queue
         * for what this pass writes there. */
        context_hold_doorbells(context_pool_device(s->pool));
        do {
                bool changed = false;
                HwQueue *q;

                s->again = false;
                reap_cancelled(s);
                LIST_FOREACH(queues, q, s->queues)
                        if (q->group == &q->own_group)
                                changed |= run_group(s, &q->own_group);
                changed |= run_group(s, &s->compute);
                /* A signal submitted on one queue can unblock a wait on another. */
                if (changed)
                        s->again = true;
        } while (s->again);
        context_release_doorbells(context_pool_device(s->pool));
        s->running = false;
        arm_timeouts(s);
        if (s->cb.settled)
                s->cb.settled(s->cb.userdata);
}

void scheduler_cancel_running(Scheduler *s, SchedStream *st) {
        HwQueue *q;
        SchedJob *j;

        LIST_FOREACH(queues, q, s->queues)
                if (q->engine == GPU_ENGINE_COMPUTE)
                        for (j = q->inflight.first; j; j = j->queue_next)
                                if (j->stream == st && is_dispatch(j))
                                        j->cancel_requested = true;
}

/* Charges a retired job's measured GPU time to its stream and refines the
 * queue's throughput estimate. */
static void charge(HwQueue *q, SchedJob *j, uint64_t busy_ns) {
        SchedStream *st = j->stream;
        uint64_t bytes = job_bytes(j);

        if (st) {
                st->inflight_est -= MIN(st->inflight_est, j->est_ns);
                st->vtime += (double) busy_ns / st->weight;
                if (st->n_inflight > 0)
                        st->n_inflight--;
        }
        if (bytes >= (1u << 20) && busy_ns > 0)
                q->bytes_per_ns = 0.9 * q->bytes_per_ns + 0.1 * ((double) bytes / (double) busy_ns);
        /* A dispatch's estimate follows its stream's shortest recent ones:
         * down at once, up by at most a quarter per dispatch. What stretches
         * a dispatch's measured time is mostly others — the CUs it shared,
         * on the simulator the CPUs its threads lost — and a light client's
         * estimate must not grow past WAKE_JOB_NS because it once ran next
         * to CPU burners. */
        if (st && is_dispatch(j) && !is_event_job(j) && busy_ns > 0) {
                st->dispatch_ns = st->dispatch_ns > 0 ? MIN((double) busy_ns, 1.25 * st->dispatch_ns)
                                                      : (double) busy_ns;
                /* The longest, for the express queue: up at once, down by a
                 * fifth per dispatch, so a stream that mixes long dispatches
                 * into short ones does not keep it. */
                st->dispatch_max_ns = MAX((double) busy_ns, 0.8 * st->dispatch_max_ns);
        }
}

/* Takes a retired job off its queue. */
static void retire(Scheduler *s, HwQueue *q, SchedJob *j, uint64_t busy_ns) {
        QUEUE_REMOVE(queue, q->inflight, j);
        if (j->kind == SCHED_JOB_RELAY)
                return;
        q->stats.in_flight--;
        q->stats.in_flight_bytes -= j->cost;
        q->stats.completed++;
        if (!is_event_job(j)) {
                q->inflight_ns -= MIN(q->inflight_ns, j->est_ns);
                if (q->group->work_in_flight > 0)
                        q->group->work_in_flight--;
                if (q->group->class_in_flight[j->klass] > 0)
                        q->group->class_in_flight[j->klass]--;
                if (q->engine == GPU_ENGINE_COMPUTE && j->stream)
                        user_change(q->group, j->stream->user, 0, -1);
        }
        q->head_since_ns = loop_now_ns(s->event); /* the next job starts now */
        charge(q, j, busy_ns);
        if (j->kind == SCHED_JOB_SIGNAL)
                LIST_REMOVE(signals, j->event->signals, j);
        if (j->stream)
                stream_maybe_rebind(j->stream);
}

/* A chunk c of job j retired (error 0) or failed: j fails once, with the
 * first failure, and finishes when the last of its chunks on the GPU has
 * retired and no more of it is to be written. */
static void chunk_retired(Scheduler *s, HwQueue *q, SchedJob *c, int error, const char *msg, uint64_t busy_ns) {
        SchedJob *j = c->parent;
        char *m;

        retire(s, q, c, busy_ns);
        free(c);
        if (--j->chunks_inflight == 0)
                s->chunked_in_flight--;
        j->chunk_busy_ns += busy_ns;
        if (error != 0 && j->chunk_error == 0) {
                j->chunk_error = error;
                j->chunk_message = msg ? strdup(msg) : NULL;
                if (j->state == SCHED_JOB_PENDING) {
                        /* The rest of it never runs. */
                        SchedStream *st = j->stream;
                        stream_remove_pending(st, j);
                        j->state = SCHED_JOB_SUBMITTED;
                        stream_maybe_idle(st);
                }
        }
        if (j->chunks_inflight > 0 || j->state == SCHED_JOB_PENDING)
                return;
        m = TAKE_PTR(j->chunk_message);
        finish_job(s, j, j->chunk_error, m, j->chunk_busy_ns);
        free(m);
}

/* Takes j off q and finishes it (or the piece of a job it is). */
static void retire_and_finish(Scheduler *s, HwQueue *q, SchedJob *j, int error, const char *msg, uint64_t busy_ns) {
        if (j->kind == SCHED_JOB_CHUNK) {
                chunk_retired(s, q, j, error, msg, busy_ns);
                return;
        }
        retire(s, q, j, busy_ns);
        finish_job(s, j, error, msg, busy_ns);
}

/* What the client reads in JobFailed: what happened, and what the device
 * said about it (the simulator names the instruction). */
static void completion_message(const SchedJob *j, const GpuCompletion *c, char *msg, size_t size) {
        char what[192];

        sched_job_describe(j, what, sizeof(what));
        if (c->error == -EFAULT)
                /* Where, as the GPU layer says it: relative to the client's
                 * own buffers, never an address of the daemon or a worker. */
                snprintf(msg, size, "GPU memory fault in %s, %s", what,
                         c->message ? c->message : "at an address the device did not say");
        else if (c->error == -EIO)
                /* A HW_EXCEPTION: a GPU reset or RAS poison (gpu_context_reset()). */
                snprintf(msg, size, "%s did not complete: %s", what,
                         c->message ? c->message : "the device raised a hardware exception");
        else if (c->error == -ETIME)
                /* A queue that stopped at something it cannot run says
                 * nothing (kfd-facts §7.2); the simulator's words, if any,
                 * say what it was. */
                snprintf(msg, size, "%s ran longer than its timeout of %.3f s and was aborted%s%s", what,
                         (double) j->timeout_ns / 1e9, c->message ? "; the GPU had stopped it: " : "",
                         c->message ? c->message : "");
        else if (c->error == -ECANCELED && c->message)
                snprintf(msg, size, "%s was cancelled: %s", what, c->message);
        else if (c->error < 0)
                snprintf(msg, size, "%s failed on the GPU: %s%s%s", what, strerror(-c->error),
                         c->message ? ": " : "", c->message ? c->message : "");
        else
                msg[0] = '\0';
}

void scheduler_on_completion(Scheduler *s, Context *ctx, const GpuCompletion *c) {
        HwQueue *q = hwq_find(s, ctx, c->queue);
        uint64_t busy_ns;
        char msg[512];
        SchedJob *j;

        if (!q) {
                log_error("GPU context %" PRIu64 " reported a completion on unknown queue %u", context_get_id(ctx),
                          c->queue);
                return;
        }
        for (j = q->inflight.first; j; j = j->queue_next)
                if (j->seq == c->seq)
                        break;
        if (!j) {
                log_error("GPU reported completion of unknown job %u:%" PRIu64, c->queue, c->seq);
                return;
        }
        if (j != q->inflight.first)
                log_warning("Queue %u retired job %" PRIu64 " out of order", c->queue, c->seq);

        busy_ns = c->end_ns > c->begin_ns ? c->end_ns - c->begin_ns : 0;
        if (j->kind == SCHED_JOB_SIGNAL && c->error == 0) {
                retire(s, q, j, busy_ns ? busy_ns : j->est_ns);
                s->cb.event_signal(j->event, j->signal_claimed, s->cb.userdata);
                finish_job(s, j, 0, NULL, busy_ns);
                return;
        }
        /* Made only for a failure: formatting it for every job was ~4% of
         * the event loop's time on batches of small fills. */
        if (c->error)
                completion_message(j->kind == SCHED_JOB_CHUNK ? j->parent : j, c, msg, sizeof msg);
        if (j->kind == SCHED_JOB_CHUNK) {
                chunk_retired(s, q, j, -c->error, c->error ? msg : NULL, busy_ns ? busy_ns : j->est_ns);
                return;
        }
        retire(s, q, j, busy_ns ? busy_ns : j->est_ns);
        finish_job(s, j, -c->error, c->error ? msg : NULL, busy_ns);
}

static void cancel_pending(Scheduler *s, SchedStream *st, const char *msg) {
        while (st->pending.first)
                fail_head(s, st, ECANCELED, msg);
}

void scheduler_on_context_gone(Scheduler *s, Context *ctx, bool lost, const char *reason) {
        HwQueue *q, *next;
        SchedStream *st, *snext;
        char msg[320];

        snprintf(msg, sizeof msg, "its GPU context was lost before it ran (%s)", reason ? reason : "lost");
        /* The users whose work ran there wait before their next context. */
        if (lost && !context_is_device(ctx)) {
                uint64_t now = now_ns();

                s->losses++;
                for (st = s->compute.active.first; st; st = st->active_next)
                        if (st->ctx == ctx)
                                user_fault(s, st->user, now);
                for (q = s->queues; q; q = q->queues_next)
                        if (q->ctx == ctx)
                                for (st = q->bound; st; st = st->bound_next)
                                        user_fault(s, st->user, now);
        }
        /* Streams of that context that wait for work: in shared mode the
         * device context's SDMA streams are no better off. */
        if (lost)
                for (st = s->compute.active.first; st; st = snext) {
                        snext = st->active_next;
                        if (st->ctx == ctx)
                                cancel_pending(s, st, msg);
                }
        for (q = s->queues; q; q = next) {
                next = q->queues_next;
                if (q->ctx != ctx)
                        continue;
                /* An SDMA queue of a client context (a relayed process's):
                 * what waits for it cannot run anywhere else. */
                if ((lost || !context_is_device(ctx)) && q->engine == GPU_ENGINE_SDMA)
                        for (st = q->own_group.active.first; st; st = snext) {
                                snext = st->active_next;
                                cancel_pending(s, st, msg);
                        }
                if (q->engine == GPU_ENGINE_SDMA && !context_is_device(ctx))
                        for (st = q->bound; st; st = st->bound_next)
                                st->group = NULL; /* its group goes with the queue */
                /* Everything on it was reported (lost) or nothing was there
                 * (reclaimed); whatever is left cannot finish any more. */
                while (q->inflight.first)
                        retire_and_finish(s, q, q->inflight.first, ECANCELED, msg, 0);
                if (q->engine == GPU_ENGINE_SDMA && context_is_device(ctx))
                        continue; /* the device context's SDMA queues stay, refusing work */
                hwq_free(s, q); /* unbinds its streams: they bind again in the next incarnation */
        }
        scheduler_run(s);
}

unsigned scheduler_in_flight(const Scheduler *s) {
        unsigned n = s->chunked_in_flight;
        const HwQueue *q;

        /* A job in pieces counts once. */
        LIST_FOREACH(queues, q, s->queues) {
                n += q->stats.in_flight;
                for (const SchedJob *j = q->inflight.first; j; j = j->queue_next)
                        if (j->kind == SCHED_JOB_CHUNK)
                                n--;
        }
        return n;
}

unsigned scheduler_sdma_queues(const Scheduler *s) {
        const HwQueue *q;
        unsigned n = 0;

        LIST_FOREACH(queues, q, s->queues)
                n += q->engine == GPU_ENGINE_SDMA && !q->express && context_is_device(q->ctx);
        return n;
}

uint64_t scheduler_jobs_completed(const Scheduler *s) {
        return s->jobs_completed;
}

uint64_t scheduler_jobs_failed(const Scheduler *s) {
        return s->jobs_failed;
}

void scheduler_get_queue_stats(const Scheduler *s, unsigned queue, SchedQueueStats *ret) {
        const HwQueue *q;

        LIST_FOREACH(queues, q, s->queues)
                if (context_is_device(q->ctx) && q->index == queue) {
                        *ret = q->stats;
                        return;
                }
        *ret = (SchedQueueStats) {};
}

void scheduler_abandon(Scheduler *s) {
        HwQueue *q;

        LIST_FOREACH(queues, q, s->queues)
                while (q->inflight.first)
                        retire_and_finish(s, q, q->inflight.first, ECANCELED, NULL, 0);
}
