/* SPDX-License-Identifier: MIT */
/*
 * See scheduler.h. Start-time fair queueing (Goyal, Vin & Cheng, 1996) per
 * hardware queue, with the virtual-time bookkeeping of Linux's CFS: charge
 * what a job really used, when it is known.
 */
#include "scheduler/scheduler.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sessions/client-event.h"
#include "scheduler/job.h"
#include "manager/manager.h"
#include "sessions/session.h"
#include "util/macro.h"
#include "util/log.h"

/* Work allowed on one hardware queue at once: enough to keep the engine busy
 * between completions, small enough to bound the wait of a newly ready
 * stream behind a flooding one. */
#define QUEUE_MAX_JOBS 64u
#define QUEUE_MAX_BYTES (64ull << 20)
/* Extra room for signal and wait event jobs (see queue_has_room()). */
#define QUEUE_EVENT_JOBS 64u
/* Cost floor so that empty jobs (events) are not free in the ring budget. */
#define MIN_JOB_COST 4096ull
/* Estimate for a job with no bytes (events) until it is measured. */
#define EMPTY_JOB_NS 2000ull

typedef struct HwQueue {
        unsigned index;
        uint64_t head_since_ns; /* when the oldest job on the GPU became the oldest */
        GpuEngine engine;
        unsigned n_streams; /* bound streams, for balancing */
        double bytes_per_ns; /* measured throughput, for estimates (moving average) */
        QUEUE_HEAD(Job, inflight);
        QUEUE_HEAD(SchedStream, active);
        SchedQueueStats stats;
} HwQueue;

struct Scheduler {
        Manager *manager;
        GpuContext *gpu;
        sd_event_source *timeout_timer;
        unsigned n_queues;
        HwQueue queues[GPU_MAX_QUEUES];
        bool running;
        bool again;
};

int scheduler_new(Manager *m, GpuContext *gpu, Scheduler **ret) {
        const GpuDeviceInfo *info = gpu_context_get_info(gpu);
        Scheduler *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->manager = m;
        s->gpu = gpu;
        s->n_queues = info->n_queues;
        for (unsigned i = 0; i < s->n_queues; i++) {
                s->queues[i].index = i;
                s->queues[i].engine = info->queue_engine[i];
                s->queues[i].bytes_per_ns = 1.0; /* 1 GB/s until measured */
        }
        *ret = s;
        return 0;
}

Scheduler *scheduler_free(Scheduler *s) {
        if (!s)
                return NULL;
        sd_event_source_disable_unref(s->timeout_timer);
        /* The manager retires or cancels all jobs before freeing us. */
        free(s);
        return NULL;
}

/* The least loaded queue of the engine, preferring the KFD priority wanted. */
static HwQueue *pick_queue(Scheduler *s, GpuEngine engine, uint32_t want_priority) {
        const GpuDeviceInfo *info = gpu_context_get_info(s->gpu);
        HwQueue *best = NULL;
        bool best_match = false;

        for (unsigned i = 0; i < s->n_queues; i++) {
                HwQueue *q = &s->queues[i];
                bool match = engine != GPU_ENGINE_COMPUTE || info->queue_priority[i] == want_priority;

                if (q->engine != engine)
                        continue;
                if (!best || (match && !best_match) ||
                    (match == best_match && q->n_streams < best->n_streams)) {
                        best = q;
                        best_match = match;
                }
        }
        return best;
}

static void stream_bind(Scheduler *s, SchedStream *st) {
        HwQueue *q = pick_queue(s, st->engine, st->want_priority);

        st->queue = q ? q->index : UINT32_MAX;
        if (q)
                q->n_streams++;
}

void scheduler_stream_init(Scheduler *s, SchedStream *st, Session *session, GpuEngine engine,
                           uint32_t weight) {
        *st = (SchedStream) { .session = session, .engine = engine, .weight = weight ? weight : 1,
                              .queue = UINT32_MAX, .want_priority = GPU_QUEUE_PRIORITY_DEFAULT };
        stream_bind(s, st);
}

bool scheduler_stream_has_queue(const SchedStream *st) {
        return st->queue != UINT32_MAX;
}

/* Moves an idle compute stream to a queue of the priority it wants. */
static void stream_maybe_rebind(Scheduler *s, SchedStream *st) {
        const GpuDeviceInfo *info = gpu_context_get_info(s->gpu);
        HwQueue *q;

        if (st->engine != GPU_ENGINE_COMPUTE || st->queue == UINT32_MAX || st->active ||
            st->n_inflight > 0 || info->queue_priority[st->queue] == st->want_priority)
                return;
        q = pick_queue(s, st->engine, st->want_priority);
        if (!q || q->index == st->queue || info->queue_priority[q->index] != st->want_priority)
                return;
        s->queues[st->queue].n_streams--;
        st->queue = q->index;
        q->n_streams++;
}

void scheduler_stream_set_class(Scheduler *s, SchedStream *st, unsigned klass, uint32_t kfd_priority) {
        st->klass = klass;
        st->want_priority = kfd_priority;
        stream_maybe_rebind(s, st);
}

void scheduler_stream_done(Scheduler *s, SchedStream *st) {
        if (st->queue == UINT32_MAX)
                return;
        if (st->active)
                QUEUE_REMOVE(active, s->queues[st->queue].active, st);
        st->active = false;
        s->queues[st->queue].n_streams--;
        st->queue = UINT32_MAX;
}

static uint64_t job_cost(const Job *j) {
        uint64_t c = 0;

        if (j->type == WIRE_JOB_COPY)
                c = j->gpu.copy.size;
        else if (j->type == WIRE_JOB_FILL)
                c = j->gpu.fill.size;
        return c < MIN_JOB_COST ? MIN_JOB_COST : c;
}

/* The least virtual time among the queue's active streams, or -1. */
static double min_active_vtime(const HwQueue *q) {
        double m = -1;

        for (SchedStream *it = q->active.first; it; it = it->active_next)
                if (m < 0 || it->vtime < m)
                        m = it->vtime;
        return m;
}

void scheduler_enqueue(Scheduler *s, SchedStream *st, Job *j) {
        j->cost = job_cost(j);
        j->queued_ns = now_ns();
        j->stream = st;
        QUEUE_APPEND(queue, st->pending, j);
        if (!st->active && st->queue != UINT32_MAX) {
                HwQueue *q = &s->queues[st->queue];
                double m = min_active_vtime(q);

                /* Waking from idle: no credit for the time it did not compete. */
                if (m > st->vtime)
                        st->vtime = m;
                QUEUE_APPEND(active, q->active, st);
                st->active = true;
        }
}

typedef enum Readiness {
        JOB_READY,
        JOB_BLOCKED,
        JOB_CANCELLED,
} Readiness;

/*
 * Resolves a wait-event job at the head of its stream (idempotent for the
 * other kinds). The GPU, not the CPU, waits for a signal already on its way.
 */
static Readiness job_prepare(Job *j, unsigned queue) {
        ClientEvent *e = j->event;
        Job *sig;

        if (j->type != WIRE_JOB_WAIT_EVENT || j->wait_resolved)
                return JOB_READY;
        if (e->destroyed)
                return JOB_CANCELLED;
        if (e->signaled) {
                if (e->auto_reset)
                        client_event_reset(e); /* this wait consumes the signal */
                j->wait_resolved = true;
                return JOB_READY;
        }
        LIST_FOREACH(signals, sig, e->signals) {
                if (e->auto_reset && sig->signal_claimed)
                        continue;
                if (e->auto_reset)
                        sig->signal_claimed = true;
                /* Same ring: the signal job's packets precede ours, nothing to wait for. */
                if (sig->queue != queue) {
                        j->gpu.waits[0] = (GpuWait) { .queue = sig->queue, .seq = sig->seq };
                        j->gpu.n_waits = 1;
                }
                j->wait_resolved = true;
                return JOB_READY;
        }
        return JOB_BLOCKED;
}

static void finish_job(Scheduler *s, Job *j, int error, const char *msg, uint64_t busy_ns) {
        Session *session = j->session;

        session_job_finished(session, j, error, msg, busy_ns);
        if (error == 0)
                s->manager->jobs_completed++;
        else
                s->manager->jobs_failed++;
        job_free(j);
}

static bool queue_has_room(const HwQueue *q, const Job *j) {
        /* An empty queue always takes one job, however large. */
        if (q->stats.in_flight == 0)
                return true;
        /* Event jobs move no data, so the byte budget does not hold them back,
         * and they get room of their own in the job budget: a signal queued
         * behind a large copy goes to the ring at once, so the other engine's
         * wait for it is resolved and submitted too, and the GPU (POLL_REGMEM /
         * WAIT_REG_MEM on the fence) does the waiting, not this scheduler. */
        if (j->type == WIRE_JOB_SIGNAL_EVENT || j->type == WIRE_JOB_WAIT_EVENT)
                return q->stats.in_flight < QUEUE_MAX_JOBS + QUEUE_EVENT_JOBS;
        return q->stats.in_flight < QUEUE_MAX_JOBS && q->stats.in_flight_bytes + j->cost <= QUEUE_MAX_BYTES;
}

static uint64_t estimate_ns(const HwQueue *q, const Job *j) {
        uint64_t bytes = j->type == WIRE_JOB_COPY ? j->gpu.copy.size
                         : j->type == WIRE_JOB_FILL ? j->gpu.fill.size : 0;

        return bytes ? (uint64_t) ((double) bytes / q->bytes_per_ns) + EMPTY_JOB_NS : EMPTY_JOB_NS;
}

/* Where the stream stands, counting its jobs on the GPU at their estimate. */
static double stream_key(const SchedStream *st) {
        return st->vtime + (double) st->inflight_est / st->weight;
}

/* Drops the stream from the active list once it has nothing pending. */
static void stream_maybe_idle(HwQueue *q, SchedStream *st) {
        if (st->pending.first || !st->active)
                return;
        QUEUE_REMOVE(active, q->active, st);
        st->active = false;
}

/*
 * Fills the hardware queue: while it has room, submit the head job of the
 * ready stream with the least virtual time. Returns true if anything changed.
 */
static bool run_queue(Scheduler *s, HwQueue *q) {
        bool changed = false;

        for (;;) {
                SchedStream *best = NULL, *st, *next;
                Job *j;
                uint64_t seq;
                int r;

                for (st = q->active.first; st; st = next) {
                        next = st->active_next;
                        j = st->pending.first;
                        switch (job_prepare(j, q->index)) {
                        case JOB_CANCELLED:
                                QUEUE_REMOVE(queue, st->pending, j);
                                finish_job(s, j, ECANCELED,
                                           "the event this wait-event job waits for was destroyed", 0);
                                stream_maybe_idle(q, st);
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
                                if (!best || st->klass > best->klass ||
                                    (st->klass == best->klass && stream_key(st) < stream_key(best)))
                                        best = st;
                                break;
                        }
                }
                if (!best)
                        break;
                j = best->pending.first;
                if (!queue_has_room(q, j))
                        break;
                r = gpu_queue_submit(s->gpu, q->index, &j->gpu, &seq);
                if (r == -EAGAIN)
                        break;
                QUEUE_REMOVE(queue, best->pending, j);
                if (r < 0) {
                        char what[192], msg[320];

                        job_describe(j, what, sizeof(what));
                        log_warning_errno(r, "Session %" PRIu64 ": GPU refused %s %" PRIu64 ": %m",
                                          j->session->id, what, j->fence);
                        if (j->type == WIRE_JOB_DISPATCH)
                                snprintf(msg, sizeof(msg),
                                         "the GPU layer refused the %s: the hardware cannot run it (%s)",
                                         what, strerror(-r));
                        else
                                snprintf(msg, sizeof(msg), "the GPU layer refused the %s (%s)", what,
                                         strerror(-r));
                        finish_job(s, j, -r, msg, 0);
                        stream_maybe_idle(q, best);
                        changed = true;
                        continue;
                }
                j->state = JOB_SUBMITTED;
                j->queue = q->index;
                j->seq = seq;
                j->submitted_ns = now_ns();
                j->est_ns = estimate_ns(q, j);
                best->inflight_est += j->est_ns;
                best->n_inflight++;
                if (!q->inflight.first)
                        q->head_since_ns = j->submitted_ns;
                QUEUE_APPEND(queue, q->inflight, j);
                q->stats.in_flight++;
                q->stats.in_flight_bytes += j->cost;
                q->stats.submitted++;
                if (j->type == WIRE_JOB_SIGNAL_EVENT)
                        LIST_APPEND(signals, j->event->signals, j);
                stream_maybe_idle(q, best);
                changed = true;
        }
        return changed;
}

/* The earliest timeout deadline of any running or held job, or UINT64_MAX. */
static uint64_t next_deadline(const Scheduler *s) {
        uint64_t next = UINT64_MAX;

        for (unsigned i = 0; i < s->n_queues; i++) {
                const HwQueue *q = &s->queues[i];
                const Job *h = q->inflight.first;

                if (h && h->timeout_ns != UINT64_MAX)
                        next = MIN(next, q->head_since_ns + h->timeout_ns);
                for (const SchedStream *st = q->active.first; st; st = st->active_next)
                        if (st->blocked_head && st->blocked_head == st->pending.first &&
                            st->blocked_head->timeout_ns != UINT64_MAX)
                                next = MIN(next, st->blocked_since_ns + st->blocked_head->timeout_ns);
        }
        return next;
}

static void on_completion(const GpuCompletion *c, void *userdata);
static void arm_timeouts(Scheduler *s);

static int on_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        Scheduler *s = userdata;
        uint64_t now = now_ns();

        for (unsigned i = 0; i < s->n_queues; i++) {
                HwQueue *q = &s->queues[i];
                Job *h = q->inflight.first;
                SchedStream *st, *next;

                if (h && h->timeout_ns != UINT64_MAX && now >= q->head_since_ns + h->timeout_ns) {
                        int r = gpu_queue_abort(s->gpu, q->index, h->seq, -ETIME, on_completion, s);
                        if (r < 0)
                                log_warning_errno(r, "Failed to abort job %" PRIu64 " on queue %u: %m",
                                                  h->seq, q->index);
                }
                for (st = q->active.first; st; st = next) {
                        Job *j = st->pending.first;
                        char msg[160];

                        next = st->active_next;
                        if (!j || j != st->blocked_head || j->timeout_ns == UINT64_MAX ||
                            now < st->blocked_since_ns + j->timeout_ns)
                                continue;
                        QUEUE_REMOVE(queue, st->pending, j);
                        st->blocked_head = NULL;
                        snprintf(msg, sizeof(msg),
                                 "wait-event job waited longer than its timeout of %.3f s for its event",
                                 (double) j->timeout_ns / 1e9);
                        finish_job(s, j, ETIME, msg, 0);
                        stream_maybe_idle(q, st);
                }
        }
        scheduler_run(s);
        for (Session *x = s->manager->sessions; x; x = x->sessions_next)
                session_flush(x);
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
                r = sd_event_add_time(s->manager->event, &s->timeout_timer, CLOCK_MONOTONIC,
                                      next / 1000 + 1, 1000, on_timeout, s);
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
        do {
                bool changed = false;

                s->again = false;
                for (unsigned i = 0; i < s->n_queues; i++)
                        changed |= run_queue(s, &s->queues[i]);
                /* A signal submitted on one queue can unblock a wait on another. */
                if (changed)
                        s->again = true;
        } while (s->again);
        s->running = false;
        arm_timeouts(s);
}

/* Charges a retired job's measured GPU time to its stream and refines the
 * queue's throughput estimate. */
static void charge(HwQueue *q, Job *j, uint64_t busy_ns) {
        SchedStream *st = j->stream;
        uint64_t bytes = j->type == WIRE_JOB_COPY ? j->gpu.copy.size
                         : j->type == WIRE_JOB_FILL ? j->gpu.fill.size : 0;

        if (st) {
                st->inflight_est -= MIN(st->inflight_est, j->est_ns);
                st->vtime += (double) busy_ns / st->weight;
                if (st->n_inflight > 0)
                        st->n_inflight--;
        }
        if (bytes >= (1u << 20) && busy_ns > 0)
                q->bytes_per_ns = 0.9 * q->bytes_per_ns + 0.1 * ((double) bytes / (double) busy_ns);
}

static void on_completion(const GpuCompletion *c, void *userdata) {
        Scheduler *s = userdata;
        HwQueue *q;
        Job *j;
        char msg[512], what[192];

        if (c->queue >= s->n_queues) {
                log_error("GPU reported a completion on unknown queue %u", c->queue);
                return;
        }
        q = &s->queues[c->queue];
        for (j = q->inflight.first; j; j = j->queue_next)
                if (j->seq == c->seq)
                        break;
        if (!j) {
                log_error("GPU reported completion of unknown job %u:%" PRIu64, c->queue, c->seq);
                return;
        }
        if (j != q->inflight.first)
                log_warning("Queue %u retired job %" PRIu64 " out of order", c->queue, c->seq);

        QUEUE_REMOVE(queue, q->inflight, j);
        q->stats.in_flight--;
        q->stats.in_flight_bytes -= j->cost;
        q->stats.completed++;
        q->head_since_ns = now_ns(); /* the next job starts now */
        j->state = JOB_DONE;
        charge(q, j, c->end_ns > c->begin_ns ? c->end_ns - c->begin_ns : j->est_ns);
        if (j->stream)
                stream_maybe_rebind(s, j->stream);

        if (j->type == WIRE_JOB_SIGNAL_EVENT) {
                LIST_REMOVE(signals, j->event->signals, j);
                if (c->error == 0)
                        client_event_signal(j->event, j->signal_claimed);
        }

        /* What the client reads in JobFailed: what happened, and what the
         * device said about it (the simulator names the instruction). */
        job_describe(j, what, sizeof(what));
        if (c->error == -EFAULT)
                snprintf(msg, sizeof(msg), "GPU memory fault at address 0x%" PRIx64 " in %s%s%s", c->fault_va,
                         what, c->message ? ": " : "", c->message ? c->message : "");
        else if (c->error == -EIO)
                snprintf(msg, sizeof(msg), "%s raised a GPU exception: %s", what,
                         c->message ? c->message : "the device gave no details");
        else if (c->error == -ETIME)
                snprintf(msg, sizeof(msg), "%s ran longer than its timeout of %.3f s and was aborted", what,
                         (double) j->timeout_ns / 1e9);
        else if (c->error < 0)
                snprintf(msg, sizeof(msg), "%s failed on the GPU: %s%s%s", what, strerror(-c->error),
                         c->message ? ": " : "", c->message ? c->message : "");
        else
                msg[0] = '\0';
        finish_job(s, j, -c->error, c->error ? msg : NULL,
                   c->end_ns > c->begin_ns ? c->end_ns - c->begin_ns : 0);
}

int scheduler_process_gpu(Scheduler *s) {
        int r = gpu_context_process(s->gpu, on_completion, s);

        if (r < 0)
                return r;
        scheduler_run(s);
        return r;
}

unsigned scheduler_in_flight(const Scheduler *s) {
        unsigned n = 0;

        for (unsigned i = 0; i < s->n_queues; i++)
                n += s->queues[i].stats.in_flight;
        return n;
}

void scheduler_get_queue_stats(const Scheduler *s, unsigned queue, SchedQueueStats *ret) {
        *ret = queue < s->n_queues ? s->queues[queue].stats : (SchedQueueStats) {};
}

void scheduler_abandon(Scheduler *s) {
        for (unsigned i = 0; i < s->n_queues; i++) {
                HwQueue *q = &s->queues[i];

                while (q->inflight.first) {
                        Job *j = q->inflight.first;
                        QUEUE_REMOVE(queue, q->inflight, j);
                        q->stats.in_flight--;
                        q->stats.in_flight_bytes -= j->cost;
                        charge(q, j, 0);
                        if (j->type == WIRE_JOB_SIGNAL_EVENT)
                                LIST_REMOVE(signals, j->event->signals, j);
                        finish_job(s, j, ECANCELED, NULL, 0);
                }
        }
}
