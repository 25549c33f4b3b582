/* SPDX-License-Identifier: MIT */
/*
 * The "process" mechanism (context.h): a client context's incarnation run by
 * a worker process, `kfdbrokerd --worker` (daemon/worker/worker.c), which
 * opens /dev/kfd itself and so has a KFD context — a GPU VM, queues, events,
 * a fault domain — of its own on any kernel. A WorkerLink is the daemon's end
 * of one worker: the process (a pidfd), its control socket on the event
 * loop, the queues and jobs the daemon gave it, and the buffers and code
 * objects it sent it. Starting and reaping the process is
 * context-worker-process.c's.
 *
 * Nothing here waits for the worker. Requests are written to the socket (or
 * queued while it is full) and the worker acts on them in order, so the
 * daemon numbers queues and jobs itself and learns of failures as failed
 * completions. The worker's word is checked like a client's: a completion
 * must name a job the daemon gave it, texts must be text; a worker that
 * breaks the protocol, dies, or does not stop a job when asked is killed,
 * and its context is lost — every job it had is failed with the reason.
 *
 * Buffers travel as dma-buf fds (exported from the device context, where
 * every client buffer lives) and code objects as sealed memfds of their ELF
 * bytes, each once per incarnation; a GpuWatch on the original tells the
 * worker to let go of its copy when the client frees it.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "contexts/context-internal.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "worker/worker-proto.h"

/* How long a worker may take to stop a job before it is killed. */
#define WORKER_ABORT_GRACE_NS (5ull * 1000000000ull)

typedef struct LinkQueue {
        bool used;
        bool failed;          /* the worker could not create it */
        uint32_t priority;
        uint64_t next_seq;
        uint64_t *inflight;   /* sequence numbers on the GPU, oldest first */
        unsigned head, count, cap;
} LinkQueue;

/* A buffer or code object sent to the worker. */
typedef struct LinkObject {
        WorkerLink *link;
        uint64_t id;
        const void *key;      /* the GpuBuffer or GpuCodeObject */
        GpuWatch watch;
        struct LinkObject *next;
} LinkObject;

/* A completion held back while the worker's context is being lost. */
typedef struct Held {
        struct Held *next;
        unsigned queue;
        uint64_t seq;
        int error;
        uint64_t fault_va, begin_ns, end_ns;
        char message[WORKER_TEXT_MAX];
} Held;

/* A message the socket had no room for. */
typedef struct Outgoing {
        struct Outgoing *next;
        WorkerMsgType type;
        int fd;
        size_t size;
        uint8_t data[];
} Outgoing;

struct WorkerLink {
        ContextPool *pool;
        Context *ctx;               /* weak: the slot this is the incarnation of */
        pid_t pid;
        int pidfd, sock;
        sd_event_source *io, *abort_timer;
        bool ready, dead;
        bool killed;          /* by us: its exit by SIGKILL is no news */
        /* Between LOSING and LOST the completions are held back and
         * reported with the loss, at once: a client told of its job's fault
         * must find its next job going to a new incarnation. */
        bool losing;
        char losing_reason[WORKER_TEXT_MAX];
        Held *held_first, **held_last;

        LinkQueue queues[GPU_MAX_QUEUES];
        unsigned n_queues;
        LinkObject *objects;
        uint64_t next_object_id;
        Outgoing *out_first, **out_last;

        /* The relay page (context_relay()): a page of the device context,
         * which its copy queues write and never read, sent to the worker with
         * its setup and mapped into its VM. */
        GpuBuffer *relay_device;
        uint32_t relay_values[GPU_MAX_QUEUES];

        WorkerStats stats;
        uint64_t bring_up_ns;
        uint64_t msg_buf[WORKER_MSG_MAX / 8];
};

static void link_end(WorkerLink *w, bool kill, const char *fmt, ...) _printf_(3, 4);
/* The worker failed us: it is killed before anyone is told. */
#define link_die(w, ...) link_end((w), true, __VA_ARGS__)

/* ---- Sending ---- */

static int flush(WorkerLink *w) {
        while (w->out_first) {
                Outgoing *o = w->out_first;
                int r = worker_msg_send(w->sock, o->type, o->data, o->size, o->fd);

                if (r == -EAGAIN)
                        return sd_event_source_set_io_events(w->io, EPOLLIN | EPOLLOUT);
                if (r < 0)
                        return r;
                w->out_first = o->next;
                if (!w->out_first)
                        w->out_last = &w->out_first;
                safe_close(o->fd);
                free(o);
        }
        return sd_event_source_set_io_events(w->io, EPOLLIN);
}

/* Sends (or queues) a message of two parts; fd is not consumed. */
static int link_send(WorkerLink *w, WorkerMsgType type, const void *a, size_t a_size, const void *b, size_t b_size,
                     int fd) {
        Outgoing *o;
        int r;

        if (w->dead)
                return -ENOTCONN;
        if (!w->out_first) {
                r = worker_msg_sendv(w->sock, type, a, a_size, b, b_size, fd);
                if (r != -EAGAIN)
                        return r;
        }
        o = malloc(sizeof *o + a_size + b_size);
        if (!o)
                return -ENOMEM;
        *o = (Outgoing) { .type = type, .size = a_size + b_size, .fd = -EBADF };
        memcpy(o->data, a, a_size);
        if (b_size)
                memcpy(o->data + a_size, b, b_size);
        if (fd >= 0) {
                o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (o->fd < 0) {
                        free(o);
                        return -errno;
                }
        }
        *w->out_last = o;
        w->out_last = &o->next;
        return sd_event_source_set_io_events(w->io, EPOLLIN | EPOLLOUT);
}

/* ---- Objects ---- */

static void object_free(LinkObject *o) {
        WorkerLink *w = o->link;

        gpu_watch_cancel(&o->watch);
        for (LinkObject **x = &w->objects; *x; x = &(*x)->next)
                if (*x == o) {
                        *x = o->next;
                        break;
                }
        free(o);
}

static void on_buffer_gone(GpuWatch *watch) {
        LinkObject *o = container_of(watch, LinkObject, watch);
        WorkerObject m = { .id = o->id };

        (void) link_send(o->link, WORKER_MSG_DROP_BUFFER, &m, sizeof m, NULL, 0, -EBADF);
        object_free(o);
}

static void on_code_gone(GpuWatch *watch) {
        LinkObject *o = container_of(watch, LinkObject, watch);
        WorkerObject m = { .id = o->id };

        (void) link_send(o->link, WORKER_MSG_DROP_CODE, &m, sizeof m, NULL, 0, -EBADF);
        object_free(o);
}

static LinkObject *object_find(WorkerLink *w, const void *key) {
        for (LinkObject *o = w->objects; o; o = o->next)
                if (o->key == key)
                        return o;
        return NULL;
}

static LinkObject *object_new(WorkerLink *w, const void *key, void (*gone)(GpuWatch *)) {
        LinkObject *o = calloc(1, sizeof *o);

        if (!o)
                return NULL;
        o->link = w;
        o->id = ++w->next_object_id;
        o->key = key;
        o->watch.gone = gone;
        o->next = w->objects;
        w->objects = o;
        return o;
}

/* The id under which the worker has buffer b mapped, sending it first. */
static int send_buffer(WorkerLink *w, GpuBuffer *b, uint64_t *ret_id, char *err, size_t errlen) {
        _cleanup_close_ int fd = -EBADF;
        LinkObject *o = object_find(w, b);
        WorkerObject m;
        int r;

        if (o) {
                *ret_id = o->id;
                return 0;
        }
        r = gpu_buffer_export(b, &fd);
        if (r < 0) {
                snprintf(err, errlen, "exporting a buffer for GPU context %" PRIu64 " failed: %s", w->ctx->id,
                         strerror(-r));
                return r;
        }
        o = object_new(w, b, on_buffer_gone);
        if (!o)
                return -ENOMEM;
        m = (WorkerObject) { .id = o->id, .tag = gpu_buffer_get_tag(b) };
        r = link_send(w, WORKER_MSG_MAP_BUFFER, &m, sizeof m, NULL, 0, fd);
        if (r < 0) {
                object_free(o);
                return r;
        }
        gpu_buffer_watch(b, &o->watch);
        *ret_id = o->id;
        return 0;
}

static int send_code(WorkerLink *w, GpuCodeObject *co, uint64_t *ret_id, char *err, size_t errlen) {
        _cleanup_close_ int fd = -EBADF;
        LinkObject *o = object_find(w, co);
        const void *file;
        WorkerObject m;
        size_t size = 0;
        int r;

        if (o) {
                *ret_id = o->id;
                return 0;
        }
        file = gpu_code_object_get_file(co, &size);
        if (!file) {
                snprintf(err, errlen, "the code object has no file to send");
                return -EINVAL;
        }
        /* A sealed memfd: the worker reads the ELF as the daemon parsed it. */
        fd = memfd_create("kfdbroker-code-object", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0)
                return -errno;
        for (size_t done = 0; done < size;) {
                ssize_t n = write(fd, (const uint8_t *) file + done, size - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) n;
        }
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
                return -errno;
        o = object_new(w, co, on_code_gone);
        if (!o)
                return -ENOMEM;
        m = (WorkerObject) { .id = o->id, .tag = gpu_code_object_get_tag(co) };
        r = link_send(w, WORKER_MSG_LOAD_CODE, &m, sizeof m, NULL, 0, fd);
        if (r < 0) {
                object_free(o);
                return r;
        }
        gpu_code_object_watch(co, &o->watch);
        *ret_id = o->id;
        return 0;
}

/* ---- Jobs ---- */

static bool queue_push(LinkQueue *q, uint64_t seq) {
        if (q->count == q->cap) {
                unsigned cap = q->cap ? q->cap * 2 : 64;
                uint64_t *n = malloc(cap * sizeof *n);
                if (!n)
                        return false;
                for (unsigned i = 0; i < q->count; i++)
                        n[i] = q->inflight[(q->head + i) % q->cap];
                free(q->inflight);
                q->inflight = n;
                q->cap = cap;
                q->head = 0;
        }
        q->inflight[(q->head + q->count) % q->cap] = seq;
        q->count++;
        return true;
}

static bool queue_holds(const LinkQueue *q, uint64_t seq) {
        for (unsigned i = 0; i < q->count; i++)
                if (q->inflight[(q->head + i) % q->cap] == seq)
                        return true;
        return false;
}

/* Reports a job of the worker's upwards (daemon numbering). */
static void report(WorkerLink *w, unsigned queue, uint64_t seq, int error, uint64_t fault_va, uint64_t begin_ns,
                   uint64_t end_ns, const char *message) {
        GpuCompletion comp = {
                .queue = queue,
                .seq = seq,
                .error = error,
                .fault_va = fault_va,
                .begin_ns = begin_ns,
                .end_ns = end_ns,
                .message = message && message[0] ? message : NULL,
        };

        context_report(w->ctx, &comp);
}

/* Reports the completions held back during a loss, in their order. */
static void report_held(WorkerLink *w) {
        while (w->held_first) {
                Held *h = w->held_first;
                w->held_first = h->next;
                if (!w->held_first)
                        w->held_last = &w->held_first;
                report(w, h->queue, h->seq, h->error, h->fault_va, h->begin_ns, h->end_ns, h->message);
                free(h);
        }
}

static void hold(WorkerLink *w, unsigned queue, uint64_t seq, int error, uint64_t fault_va, uint64_t begin_ns,
                 uint64_t end_ns, const char *message) {
        Held *h = calloc(1, sizeof *h);

        if (!h) {
                report(w, queue, seq, error, fault_va, begin_ns, end_ns, message);
                return;
        }
        *h = (Held) { .queue = queue, .seq = seq, .error = error, .fault_va = fault_va, .begin_ns = begin_ns,
                      .end_ns = end_ns };
        worker_text_set(h->message, message);
        *w->held_last = h;
        w->held_last = &h->next;
}

/* Fails every job the worker still has, oldest first per queue. */
static void fail_all(WorkerLink *w, const char *message) {
        for (unsigned i = 0; i < w->n_queues; i++) {
                LinkQueue *q = &w->queues[i];
                while (q->count > 0) {
                        uint64_t seq = q->inflight[q->head];
                        q->head = (q->head + 1) % q->cap;
                        q->count--;
                        report(w, i, seq, -ECANCELED, 0, 0, 0, message);
                }
        }
}

int worker_link_find_queue(WorkerLink *w, GpuEngine engine, uint32_t priority, unsigned *ret_index,
                           uint32_t *ret_priority, char *err, size_t errlen) {
        int fallback = -1;

        if (engine != GPU_ENGINE_COMPUTE) {
                snprintf(err, errlen, "a worker process runs compute queues only");
                return -ENODEV;
        }
        for (unsigned i = 0; i < w->n_queues; i++) {
                if (w->queues[i].failed)
                        continue;
                if (w->queues[i].priority == priority) {
                        *ret_index = i;
                        *ret_priority = priority;
                        return 0;
                }
                if (fallback < 0)
                        fallback = (int) i;
        }
        if (w->n_queues < GPU_MAX_QUEUES)
                return -ENOENT;
        if (fallback < 0) {
                snprintf(err, errlen, "no compute queue could be created in GPU context %" PRIu64, w->ctx->id);
                return -ENOSPC;
        }
        *ret_index = (unsigned) fallback;
        *ret_priority = w->queues[fallback].priority;
        return 0;
}

int worker_link_add_queue(WorkerLink *w, uint32_t priority, unsigned *ret_index, char *err, size_t errlen) {
        WorkerAddQueue m;
        LinkQueue *q;
        int r;

        assert(w->n_queues < GPU_MAX_QUEUES);
        /* The worker creates it in order with the jobs that follow; a
         * failure comes back as a WORKER_MSG_QUEUE error (and their failed
         * completions). */
        q = &w->queues[w->n_queues];
        m = (WorkerAddQueue) { .index = w->n_queues, .engine = GPU_ENGINE_COMPUTE, .priority = priority };
        r = link_send(w, WORKER_MSG_ADD_QUEUE, &m, sizeof m, NULL, 0, -EBADF);
        if (r < 0) {
                snprintf(err, errlen, "cannot reach the worker of GPU context %" PRIu64 ": %s", w->ctx->id,
                         strerror(-r));
                return r;
        }
        *q = (LinkQueue) { .used = true, .priority = priority, .next_seq = 1 };
        *ret_index = w->n_queues++;
        return 0;
}

int worker_link_submit(WorkerLink *w, unsigned queue, const GpuJob *job, GpuCodeObject *code,
                       const ContextReloc *relocs, unsigned n_relocs, uint64_t *ret_seq, char *err, size_t errlen) {
        WorkerReloc wr[GPU_KERNEL_MAX_ARGS];
        WorkerSubmit m = {};
        LinkQueue *q;
        int r;

        if (queue >= w->n_queues || w->queues[queue].failed) {
                snprintf(err, errlen, "no such queue in GPU context %" PRIu64, w->ctx->id);
                return -EINVAL;
        }
        if ((job->type != GPU_JOB_NOP && job->type != GPU_JOB_DISPATCH) || job->n_waits > GPU_JOB_MAX_WAITS ||
            n_relocs > GPU_KERNEL_MAX_ARGS) {
                snprintf(err, errlen, "a worker process runs dispatches only");
                return -EINVAL;
        }
        /* What WorkerSubmit does not carry yet (GPU_JOB_AQL is refused
         * above): a relayed packet's HSA completion and 64-bit waits. Refused
         * rather than run without them. */
        const GpuHsaCompletion *h = &job->nop.hsa;
        bool zero64 = false;
        for (unsigned i = 0; i < job->n_waits; i++)
                zero64 |= job->waits[i].zero64;
        if (zero64 || (job->type == GPU_JOB_NOP && (h->ts_va || h->signal_va || h->event_slot_va || h->mailbox_va ||
                                                      h->index_va || h->acquire))) {
                snprintf(err, errlen, "a worker process does not relay HSA completions or 64-bit waits");
                return -EOPNOTSUPP;
        }
        q = &w->queues[queue];
        m.queue = queue;
        m.type = job->type;
        m.seq = q->next_seq;
        m.chain = job->chain;
        for (unsigned i = 0; i < job->n_waits; i++) {
                const GpuWait *gw = &job->waits[i];
                if (gw->va >= WORKER_RELAY_TOKEN && gw->va < WORKER_RELAY_TOKEN + 4096)
                        m.waits[i] = (WorkerWait) { .relay = 1, .queue = (uint32_t) ((gw->va - WORKER_RELAY_TOKEN) / 4),
                                                    .value = gw->value };
                else
                        m.waits[i] = (WorkerWait) { .queue = gw->queue, .seq = gw->seq, .va = gw->va,
                                                    .value = gw->value };
        }
        m.n_waits = job->n_waits;
        if (job->type == GPU_JOB_DISPATCH) {
                if (job->dispatch.args_size > WORKER_MAX_ARGS_SIZE) {
                        snprintf(err, errlen, "kernel arguments of %u bytes", job->dispatch.args_size);
                        return -EINVAL;
                }
                r = send_code(w, code, &m.code, err, errlen);
                if (r < 0)
                        return r;
                for (unsigned i = 0; i < n_relocs; i++) {
                        r = send_buffer(w, relocs[i].buffer, &wr[i].buffer, err, errlen);
                        if (r < 0)
                                return r;
                        wr[i].offset = relocs[i].offset;
                        wr[i].arg_offset = relocs[i].arg_offset;
                        wr[i].pad = 0;
                }
                m.kernel = job->dispatch.kernel;
                memcpy(m.grid, job->dispatch.grid, sizeof m.grid);
                memcpy(m.block, job->dispatch.block, sizeof m.block);
                m.dynamic_lds = job->dispatch.dynamic_lds;
                m.args_size = job->dispatch.args_size;
                m.n_relocs = n_relocs;
        }
        {
                /* The arguments, then the relocations, after the struct. */
                size_t tail = (size_t) m.args_size + (size_t) m.n_relocs * sizeof(WorkerReloc);
                _cleanup_free_ uint8_t *buf = tail ? malloc(tail) : NULL;

                if (tail && !buf)
                        return -ENOMEM;
                if (m.args_size)
                        memcpy(buf, job->dispatch.args_data, m.args_size);
                if (m.n_relocs)
                        memcpy(buf + m.args_size, wr, (size_t) m.n_relocs * sizeof(WorkerReloc));
                if (!queue_push(q, m.seq))
                        return -ENOMEM;
                r = link_send(w, WORKER_MSG_SUBMIT, &m, sizeof m, buf, tail, -EBADF);
                if (r < 0) {
                        q->count--;
                        snprintf(err, errlen, "cannot reach the worker of GPU context %" PRIu64 ": %s", w->ctx->id,
                                 strerror(-r));
                        return r;
                }
        }
        q->next_seq++;
        *ret_seq = m.seq;
        return 0;
}

static int on_abort_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        WorkerLink *w = userdata;

        link_die(w, "its worker process (pid %d) did not stop a job when asked to", (int) w->pid);
        return 0;
}

int worker_link_abort(WorkerLink *w, unsigned queue, uint64_t seq, int error) {
        WorkerAbort m = { .queue = queue, .seq = seq, .error = error };

        if (queue >= w->n_queues || !queue_holds(&w->queues[queue], seq))
                return 0;
        if (link_send(w, WORKER_MSG_ABORT, &m, sizeof m, NULL, 0, -EBADF) < 0)
                return 0;
        /* A worker that cannot stop its job is stopped itself. */
        if (!w->abort_timer &&
            sd_event_add_time_relative(w->pool->event, &w->abort_timer, CLOCK_MONOTONIC, WORKER_ABORT_GRACE_NS / 1000, 0,
                                       on_abort_timer, w) >= 0)
                (void) sd_event_source_set_description(w->abort_timer, "gpu-worker-abort-timeout");
        return 1;
}

int worker_link_relay(WorkerLink *w, unsigned device_queue, GpuBuffer **ret_hold, uint64_t *ret_write_va,
                      uint64_t *ret_wait_va, uint32_t *ret_value) {
        if (!w->relay_device || device_queue >= GPU_MAX_QUEUES)
                return -ENODEV;
        if (w->relay_values[device_queue] >= UINT32_MAX / 2)
                return -ERANGE;
        *ret_value = ++w->relay_values[device_queue];
        *ret_write_va = gpu_buffer_get_va(w->relay_device) + 4ull * device_queue;
        *ret_wait_va = WORKER_RELAY_TOKEN + 4ull * device_queue;
        *ret_hold = gpu_buffer_ref(w->relay_device);
        return 0;
}

void worker_link_get_stats(const WorkerLink *w, ContextStats *ret) {
        ret->pid = (uint32_t) w->pid;
        ret->gpu = (GpuContextStats) {
                .mapped_buffers = (unsigned) w->stats.mapped_buffers,
                .mapped_bytes = w->stats.mapped_bytes,
                .internal_bytes = w->stats.internal_bytes,
                .queues = (unsigned) w->stats.queues,
                .jobs_submitted = w->stats.jobs_submitted,
                .jobs_completed = w->stats.jobs_completed,
                .faults = w->stats.faults,
        };
        if (w->bring_up_ns)
                ret->bring_up_ns = w->bring_up_ns;
}

/* ---- Receiving ---- */

static void on_ready(WorkerLink *w, const WorkerMsg *msg) {
        const WorkerReady *m = WORKER_MSG_AS(msg, WorkerReady);

        if (!m || w->ready) {
                link_die(w, "its worker process (pid %d) sent a malformed READY", (int) w->pid);
                return;
        }
        w->ready = true;
        w->bring_up_ns = m->bring_up_ns;
        log_debug("GPU context %" PRIu64 ": worker %d up in %.1f ms", w->ctx->id, (int) w->pid,
                  (double) m->bring_up_ns / 1e6);
}

static void on_queue(WorkerLink *w, const WorkerMsg *msg) {
        const WorkerQueue *m = WORKER_MSG_AS(msg, WorkerQueue);

        if (!m || m->index >= w->n_queues) {
                link_die(w, "its worker process (pid %d) answered for a queue it was not given", (int) w->pid);
                return;
        }
        if (m->error < 0) {
                w->queues[m->index].failed = true;
                log_warning("GPU context %" PRIu64 ": its worker could not create a compute queue: %s", w->ctx->id,
                            strerror(-m->error));
        }
}

static void on_completion(WorkerLink *w, const WorkerMsg *msg) {
        const WorkerCompletion *m = WORKER_MSG_AS(msg, WorkerCompletion);
        LinkQueue *q;

        if (!m || m->queue >= w->n_queues || !worker_text_ok(m->message) || m->error > 0 || m->error < -4095 ||
            !queue_holds(&w->queues[m->queue], m->seq)) {
                link_die(w, "its worker process (pid %d) reported a job it was not given", (int) w->pid);
                return;
        }
        q = &w->queues[m->queue];
        /* In order per queue: what it skipped, it lost. */
        while (q->count > 0) {
                uint64_t seq = q->inflight[q->head];
                q->head = (q->head + 1) % q->cap;
                q->count--;
                if (seq == m->seq) {
                        (w->losing ? hold : report)(w, m->queue, seq, m->error, m->error == -EFAULT ? m->fault_va : 0,
                                                    m->begin_ns, m->end_ns, m->message);
                        break;
                }
                (w->losing ? hold : report)(w, m->queue, seq, -ECANCELED, 0, 0, 0,
                                            "its worker process did not report it");
        }
        /* Every abort asked for was about a job at a queue's head; once
         * nothing is in flight any more, nothing is left to stop. */
        if (w->abort_timer) {
                bool any = false;
                for (unsigned i = 0; i < w->n_queues; i++)
                        any |= w->queues[i].count > 0;
                if (!any)
                        w->abort_timer = sd_event_source_disable_unref(w->abort_timer);
        }
}

static void on_stats(WorkerLink *w, const WorkerMsg *msg) {
        const WorkerStats *m = WORKER_MSG_AS(msg, WorkerStats);

        if (m)
                w->stats = *m;
}

static void on_failed(WorkerLink *w, const WorkerMsg *msg) {
        const WorkerFailed *m = WORKER_MSG_AS(msg, WorkerFailed);

        link_die(w, "its worker process could not start: %s",
                 m && worker_text_ok(m->text) ? m->text : "(no reason given)");
}

/* The worker said its context is lost: LOSING, its completions (held back
 * here), LOST. */
static void on_lost(WorkerLink *w, const WorkerMsg *msg, bool final) {
        const WorkerText *m = WORKER_MSG_AS(msg, WorkerText);
        const char *why = m && worker_text_ok(m->text) && m->text[0] ? m->text : "a GPU fault";

        if (!w->losing) {
                w->losing = true;
                worker_text_set(w->losing_reason, why);
        }
        if (final)
                link_end(w, false, "%s", w->losing_reason); /* it exits by itself */
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        WorkerLink *w = userdata;
        Context *c = context_ref(w->ctx);
        ContextPool *p = w->pool;

        if (revents & EPOLLOUT) {
                int r = flush(w);
                if (r < 0) {
                        link_die(w, "its worker process (pid %d) went away (%s)", (int) w->pid, strerror(-r));
                        goto out;
                }
        }
        for (unsigned n = 0; n < 256 && c->worker == w; n++) {
                WorkerMsg msg;
                int r = worker_msg_recv(w->sock, w->msg_buf, &msg);

                if (r == -EAGAIN)
                        break;
                if (r < 0 || msg.type == 0) {
                        link_die(w, "its worker process (pid %d) %s", (int) w->pid,
                                 r < 0 ? "broke the protocol" : "went away");
                        break;
                }
                switch (msg.type) {
                case WORKER_MSG_READY:
                        on_ready(w, &msg);
                        break;
                case WORKER_MSG_QUEUE:
                        on_queue(w, &msg);
                        break;
                case WORKER_MSG_COMPLETION:
                        on_completion(w, &msg);
                        break;
                case WORKER_MSG_STATS:
                        on_stats(w, &msg);
                        break;
                case WORKER_MSG_LOSING:
                        on_lost(w, &msg, false);
                        break;
                case WORKER_MSG_LOST:
                        on_lost(w, &msg, true);
                        break;
                case WORKER_MSG_FAILED:
                        on_failed(w, &msg);
                        break;
                default:
                        link_die(w, "its worker process (pid %d) sent message type %u", (int) w->pid,
                                 (unsigned) msg.type);
                        break;
                }
                safe_close(msg.fd);
        }
out:
        if (p && p->cb.processed)
                p->cb.processed(p->cb.userdata);
        context_unref(c);
        return 0;
}

/* The end of this incarnation, for a reason: the worker is killed (unless it
 * is on its way out by itself), every job it had fails with the reason, the
 * context is lost. */
static void link_end(WorkerLink *w, bool kill, const char *fmt, ...) {
        char reason[WORKER_TEXT_MAX + 64];
        va_list ap;

        if (w->dead)
                return;
        va_start(ap, fmt);
        vsnprintf(reason, sizeof reason, fmt, ap);
        va_end(ap);
        w->dead = true;
        if (kill && w->pidfd >= 0) {
                (void) pidfd_send_signal(w->pidfd, SIGKILL, NULL, 0);
                w->killed = true;
        }
        /* The worker's own word on its loss goes first; and the reason must
         * outlive w, which context_drop() frees. */
        if (w->losing)
                snprintf(reason, sizeof reason, "%s", w->losing_reason);
        context_announce_losing(w->ctx, reason);
        report_held(w);
        fail_all(w, w->losing ? "its GPU context was lost" : reason);
        context_drop(w->ctx, true, reason); /* frees w */
}

/* ---- Life ---- */

WorkerLink *worker_link_free(WorkerLink *w) {
        if (!w)
                return NULL;
        if (!w->dead && w->sock >= 0)
                (void) worker_msg_send(w->sock, WORKER_MSG_EXIT, NULL, 0, -EBADF);
        while (w->objects)
                object_free(w->objects);
        while (w->held_first) {
                Held *h = w->held_first;
                w->held_first = h->next;
                free(h);
        }
        while (w->out_first) {
                Outgoing *o = w->out_first;
                w->out_first = o->next;
                safe_close(o->fd);
                free(o);
        }
        for (unsigned i = 0; i < GPU_MAX_QUEUES; i++)
                free(w->queues[i].inflight);
        w->io = sd_event_source_disable_unref(w->io);
        w->abort_timer = sd_event_source_disable_unref(w->abort_timer);
        /* Relay jobs on their way hold the page; so does this last
         * reference, for one reported done whose write is still to come. */
        w->relay_device = gpu_buffer_unref_after_jobs(w->relay_device);
        safe_close(w->sock);
        if (w->pidfd >= 0)
                worker_process_reap_later(w->pool, w->pid, w->pidfd, w->ctx ? w->ctx->id : 0, w->killed);
        free(w);
        return NULL;
}

int worker_link_spawn(ContextPool *p, Context *c, WorkerLink **ret, char *err, size_t errlen) {
        WorkerLink *w;
        int r;

        w = calloc(1, sizeof *w);
        if (!w)
                return -ENOMEM;
        w->pool = p;
        w->ctx = c;
        w->pidfd = w->sock = -EBADF;
        w->out_last = &w->out_first;
        w->held_last = &w->held_first;
        r = worker_process_spawn(p, c->id, 0, NULL, 0, &w->pid, &w->pidfd, &w->sock, &w->relay_device, err, errlen);
        if (r < 0) {
                free(w);
                return r;
        }
        r = sd_event_add_io(p->event, &w->io, w->sock, EPOLLIN, on_io, w);
        if (r < 0) {
                snprintf(err, errlen, "watching a worker process failed: %s", strerror(-r));
                w->dead = true;
                worker_link_free(w);
                return r;
        }
        (void) sd_event_source_set_description(w->io, "gpu-worker");
        *ret = w;
        return 0;
}
