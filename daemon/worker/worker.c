/* SPDX-License-Identifier: MIT */
/*
 * A worker process: one client GPU context run in a process of its own, for
 * kernels without secondary KFD contexts (the kernel gives every process that
 * opens /dev/kfd its own GPU VM, queues and fault domain; a KFD fd works only
 * in the process that opened it). kfdbrokerd starts it as `kfdbrokerd
 * --worker` with the control socket at fd 3 (and, on the simulated GPU, the
 * device's connection at fd 4) when a client context needs an incarnation.
 *
 * The worker brings up a GPU context with the daemon's own GPU layer (the
 * same code as in the daemon: only the kernel-call table differs), then
 * enters its sandbox (worker-sandbox.c: the service user, no new privileges,
 * not dumpable, a system-call filter) before it reads anything a client
 * wrote. From then on it does what the daemon says (worker-proto.h): add
 * queues, map buffers from their dma-buf fds, load code objects from their
 * ELF bytes, submit and abort jobs; it reports completions, the loss of its
 * context and its memory. It exits when told to, when the daemon goes (its
 * socket ends, or PR_SET_PDEATHSIG), or after reporting its context lost.
 *
 * The daemon numbers queues and jobs; this file maps its queue indexes to the
 * context's and its sequence numbers to the GPU layer's, in both directions,
 * so that a job that could not be submitted (and is failed at once) does not
 * shift the numbering.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "contexts/context-kfd-process.h"
#include "gpu/gpu.h"
#include "kfd/kfd-ops.h"
#include "kfd/kfd-real.h"
#include "sim/sim-remote.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "worker/worker-proto.h"
#include "worker/worker-sandbox.h"
#include "worker/worker.h"

/* One queue of the daemon's numbering. */
typedef struct WQueue {
        bool created;
        unsigned gpu_index;
        /* Jobs on the GPU, oldest first: the daemon's sequence number and
         * the GPU layer's. */
        struct {
                uint64_t dseq, gseq;
        } *inflight;
        unsigned head, count, cap;
} WQueue;

/* A buffer or code object the daemon sent, by its id. */
typedef struct WObject {
        uint64_t id;
        GpuBuffer *buffer;
        GpuCodeObject *code;
        int error;                 /* why it could not be mapped or loaded */
        char message[WORKER_TEXT_MAX];
} WObject;

typedef struct W {
        sd_event *event;
        int sock;
        const KfdOps *ops;
        GpuContext *gpu;
        GpuBuffer *relay;          /* the daemon's relay page, mapped here (SETUP) */
        sd_event_source *sock_source, *wake_source;
        WQueue queues[GPU_MAX_QUEUES];
        int daemon_of_gpu[GPU_MAX_QUEUES]; /* GPU layer's queue index -> the daemon's */
        WObject *objects;
        size_t n_objects, cap_objects;
        bool losing_told;
        unsigned max_inflight;     /* jobs one queue holds (the GPU layer's bound) */
        uint64_t id;
        uint64_t msg_buf[WORKER_MSG_MAX / 8];
} W;

/* Sending: the worker's socket blocks, so a message is never dropped; the
 * daemon reads on its loop. A failed send means the daemon is gone. */
static void send_or_exit(W *w, WorkerMsgType type, const void *a, size_t a_size, const void *b, size_t b_size,
                         int fd) {
        int r = worker_msg_sendv(w->sock, type, a, a_size, b, b_size, fd);

        if (r < 0) {
                log_debug_errno(r, "worker %" PRIu64 ": the daemon is gone (%m); exiting", w->id);
                _exit(EXIT_SUCCESS);
        }
}

static void send_stats(W *w) {
        GpuContextStats s;
        WorkerStats m;

        gpu_context_get_stats(w->gpu, &s);
        m = (WorkerStats) {
                .mapped_buffers = s.mapped_buffers,
                .mapped_bytes = s.mapped_bytes,
                .internal_bytes = s.internal_bytes,
                .queues = s.queues,
                .jobs_submitted = s.jobs_submitted,
                .jobs_completed = s.jobs_completed,
                .faults = s.faults,
        };
        send_or_exit(w, WORKER_MSG_STATS, &m, sizeof m, NULL, 0, -EBADF);
}

static WObject *object_find(W *w, uint64_t id) {
        for (size_t i = 0; i < w->n_objects; i++)
                if (w->objects[i].id == id)
                        return &w->objects[i];
        return NULL;
}

static WObject *object_add(W *w, uint64_t id) {
        WObject *o = object_find(w, id);

        if (o)
                return o; /* the daemon sent the id twice: the new one wins */
        if (w->n_objects == w->cap_objects) {
                size_t cap = w->cap_objects ? w->cap_objects * 2 : 16;
                WObject *n = realloc(w->objects, cap * sizeof *n);
                if (!n)
                        return NULL;
                w->objects = n;
                w->cap_objects = cap;
        }
        o = &w->objects[w->n_objects++];
        *o = (WObject) { .id = id };
        return o;
}

static void object_clear(WObject *o) {
        o->buffer = gpu_buffer_unref(o->buffer);
        o->code = gpu_code_object_unref(o->code);
}

static void object_drop(W *w, uint64_t id) {
        WObject *o = object_find(w, id);

        if (!o)
                return;
        object_clear(o);
        *o = w->objects[--w->n_objects];
}

/* ---- Completions ---- */

static void tell_losing(W *w) {
        const char *why = NULL;
        WorkerText t;

        if (w->losing_told || !gpu_context_is_lost(w->gpu, &why))
                return;
        w->losing_told = true;
        worker_text_set(t.text, why);
        send_or_exit(w, WORKER_MSG_LOSING, &t, sizeof t, NULL, 0, -EBADF);
}

static void report(W *w, unsigned dqueue, uint64_t dseq, int error, uint64_t fault_va, uint64_t begin_ns,
                   uint64_t end_ns, const char *message) {
        WorkerCompletion m = {
                .queue = dqueue,
                .seq = dseq,
                .error = error,
                .fault_va = fault_va,
                .begin_ns = begin_ns,
                .end_ns = end_ns,
        };

        worker_text_set(m.message, message);
        send_or_exit(w, WORKER_MSG_COMPLETION, &m, sizeof m, NULL, 0, -EBADF);
}

static void on_completion(const GpuCompletion *comp, void *userdata) {
        W *w = userdata;
        int dq = comp->queue < GPU_MAX_QUEUES ? w->daemon_of_gpu[comp->queue] : -1;
        WQueue *q;

        tell_losing(w);
        if (dq < 0)
                return;
        q = &w->queues[dq];
        /* The GPU layer reports each queue's jobs once, in order. */
        while (q->count > 0) {
                uint64_t dseq = q->inflight[q->head].dseq, gseq = q->inflight[q->head].gseq;
                if (gseq > comp->seq)
                        break;
                q->head = (q->head + 1) % q->cap;
                q->count--;
                if (gseq == comp->seq) {
                        report(w, (unsigned) dq, dseq, comp->error, comp->fault_va, comp->begin_ns, comp->end_ns,
                               comp->message);
                        return;
                }
                /* Never reported by the GPU layer: say so rather than lose it. */
                report(w, (unsigned) dq, dseq, -ECANCELED, 0, 0, 0, "the job's completion was not reported");
        }
}

static bool inflight_find(const WQueue *q, uint64_t dseq, uint64_t *ret_gseq) {
        for (unsigned i = 0; i < q->count; i++) {
                unsigned k = (q->head + i) % q->cap;
                if (q->inflight[k].dseq == dseq) {
                        *ret_gseq = q->inflight[k].gseq;
                        return true;
                }
        }
        return false;
}

static int on_wake(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        W *w = userdata;
        const char *why = NULL;
        WorkerText t;
        int r;

        r = gpu_context_process(w->gpu, on_completion, w);
        if (r < 0 && !gpu_context_is_lost(w->gpu, NULL))
                log_error_errno(r, "worker %" PRIu64 ": cannot wait for completions any more: %m", w->id);
        if (gpu_context_is_lost(w->gpu, &why)) {
                tell_losing(w);
                worker_text_set(t.text, why);
                send_or_exit(w, WORKER_MSG_LOST, &t, sizeof t, NULL, 0, -EBADF);
                return sd_event_exit(w->event, 0);
        }
        if (r > 0)
                send_stats(w);
        return 0;
}

/* ---- Requests ---- */

static void do_add_queue(W *w, const WorkerAddQueue *m) {
        WorkerQueue reply = { .index = m->index, .priority = m->priority };
        unsigned gi;
        WQueue *q;
        int r;

        if (m->index >= GPU_MAX_QUEUES || w->queues[m->index].created || m->engine != GPU_ENGINE_COMPUTE ||
            m->priority > 15) {
                reply.error = -EINVAL;
                goto out;
        }
        q = &w->queues[m->index];
        q->cap = w->max_inflight;
        q->inflight = calloc(q->cap, sizeof *q->inflight);
        if (!q->inflight) {
                reply.error = -ENOMEM;
                goto out;
        }
        r = gpu_context_add_queue(w->gpu, GPU_ENGINE_COMPUTE, m->priority, &gi);
        if (r < 0) {
                free(q->inflight);
                q->inflight = NULL;
                reply.error = r;
                goto out;
        }
        q->created = true;
        q->gpu_index = gi;
        if (gi < GPU_MAX_QUEUES)
                w->daemon_of_gpu[gi] = (int) m->index;
out:
        send_or_exit(w, WORKER_MSG_QUEUE, &reply, sizeof reply, NULL, 0, -EBADF);
        send_stats(w);
}

static void do_map_buffer(W *w, const WorkerObject *m, int fd) {
        WObject *o = object_add(w, m->id);
        int r;

        if (!o)
                return;
        object_clear(o);
        o->error = 0;
        if (fd < 0) {
                o->error = -EBADF;
                worker_text_set(o->message, "no dma-buf came with the buffer");
                return;
        }
        r = gpu_buffer_import_mapped(w->gpu, fd, &o->buffer);
        if (r >= 0)
                gpu_buffer_set_tag(o->buffer, m->tag);
        if (r < 0) {
                char text[WORKER_TEXT_MAX + 128];
                o->error = r;
                snprintf(text, sizeof text, "mapping a buffer into the GPU context failed: %s", strerror(-r));
                worker_text_set(o->message, text);
        }
        send_stats(w);
}

static void do_load_code(W *w, const WorkerObject *m, int fd) {
        char err[WORKER_TEXT_MAX] = "";
        WObject *o = object_add(w, m->id);
        struct stat st;
        void *p;
        int r;

        if (!o)
                return;
        object_clear(o);
        o->error = 0;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_size <= 0 || (uint64_t) st.st_size > GPU_CODE_OBJECT_MAX_SIZE) {
                o->error = -EINVAL;
                worker_text_set(o->message, "the code object did not arrive");
                return;
        }
        p = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
                o->error = -errno;
                worker_text_set(o->message, "the code object could not be read");
                return;
        }
        r = gpu_code_object_load(w->gpu, p, (size_t) st.st_size, &o->code, err, sizeof err);
        munmap(p, (size_t) st.st_size);
        if (r >= 0)
                gpu_code_object_set_tag(o->code, m->tag);
        if (r < 0) {
                char text[WORKER_TEXT_MAX + 128];
                o->error = r;
                snprintf(text, sizeof text, "loading the code object into the GPU context failed: %s",
                         err[0] ? err : strerror(-r));
                worker_text_set(o->message, text);
        }
        send_stats(w);
}

static void put_le64(uint8_t *dst, uint64_t v) {
        for (unsigned i = 0; i < 8; i++)
                dst[i] = (uint8_t) (v >> (8 * i));
}

static void do_submit(W *w, const WorkerMsg *msg) {
        const WorkerSubmit *m = msg->payload;
        _cleanup_free_ uint8_t *args = NULL;
        const WorkerReloc *relocs;
        GpuJob job = {};
        uint64_t gseq;
        WQueue *q;
        int r;

        if (msg->size < sizeof *m)
                return; /* the daemon frames what it sends; nothing to answer to */
        if (m->queue >= GPU_MAX_QUEUES || !w->queues[m->queue].created) {
                report(w, m->queue, m->seq, -ENODEV, 0, 0, 0, "the job's queue could not be created");
                return;
        }
        q = &w->queues[m->queue];
        if (m->args_size > WORKER_MAX_ARGS_SIZE || m->n_relocs > GPU_KERNEL_MAX_ARGS ||
            m->n_waits > GPU_JOB_MAX_WAITS ||
            msg->size != sizeof *m + m->args_size + (size_t) m->n_relocs * sizeof(WorkerReloc) ||
            (m->type != GPU_JOB_NOP && m->type != GPU_JOB_DISPATCH)) {
                report(w, m->queue, m->seq, -EINVAL, 0, 0, 0, "malformed job");
                return;
        }
        if (q->count == q->cap) {
                report(w, m->queue, m->seq, -EAGAIN, 0, 0, 0, "too many jobs on the queue");
                return;
        }
        job.type = (GpuJobType) m->type;
        job.chain = m->chain;
        for (unsigned i = 0; i < m->n_waits; i++) {
                const WorkerWait *wt = &m->waits[i];
                uint64_t wseq;

                if (wt->relay) {
                        if (wt->queue >= 4096 / 4)
                                continue;
                        job.waits[job.n_waits++] = (GpuWait) { .va = gpu_buffer_get_va(w->relay) + 4ull * wt->queue,
                                                                .value = wt->value };
                        continue;
                }
                if (wt->va) {
                        job.waits[job.n_waits++] = (GpuWait) { .va = wt->va, .value = wt->value };
                        continue;
                }
                /* A job of this context the daemon ordered this one after: on
                 * the GPU still, or done (then there is nothing to wait for). */
                if (wt->queue < GPU_MAX_QUEUES && w->queues[wt->queue].created &&
                    inflight_find(&w->queues[wt->queue], wt->seq, &wseq))
                        job.waits[job.n_waits++] = (GpuWait) { .queue = w->queues[wt->queue].gpu_index,
                                                                .seq = wseq };
        }
        if (job.type == GPU_JOB_DISPATCH) {
                WObject *co = object_find(w, m->code);

                if (!co || (!co->code && co->error == 0)) {
                        report(w, m->queue, m->seq, -EINVAL, 0, 0, 0, "the job's code object was not sent");
                        return;
                }
                if (co->error < 0) {
                        report(w, m->queue, m->seq, co->error, 0, 0, 0, co->message);
                        return;
                }
                if (m->args_size > 0) {
                        args = malloc(m->args_size);
                        if (!args) {
                                report(w, m->queue, m->seq, -ENOMEM, 0, 0, 0, "out of memory");
                                return;
                        }
                        memcpy(args, (const uint8_t *) (m + 1), m->args_size);
                }
                relocs = (const WorkerReloc *) (const void *) ((const uint8_t *) (m + 1) + m->args_size);
                for (unsigned i = 0; i < m->n_relocs; i++) {
                        WorkerReloc rl;
                        WObject *b;

                        memcpy(&rl, &relocs[i], sizeof rl);
                        b = object_find(w, rl.buffer);
                        if (!b || (!b->buffer && b->error == 0) || rl.arg_offset > m->args_size ||
                            m->args_size - rl.arg_offset < 8) {
                                report(w, m->queue, m->seq, -EINVAL, 0, 0, 0, "a buffer of the job was not sent");
                                return;
                        }
                        if (b->error < 0) {
                                report(w, m->queue, m->seq, b->error, 0, 0, 0, b->message);
                                return;
                        }
                        put_le64(args + rl.arg_offset, gpu_buffer_get_va(b->buffer) + rl.offset);
                }
                job.dispatch.co = co->code;
                job.dispatch.kernel = m->kernel;
                memcpy(job.dispatch.grid, m->grid, sizeof m->grid);
                memcpy(job.dispatch.block, m->block, sizeof m->block);
                job.dispatch.dynamic_lds = m->dynamic_lds;
                job.dispatch.args_data = args;
                job.dispatch.args_size = m->args_size;
        }
        r = gpu_queue_submit(w->gpu, q->gpu_index, &job, &gseq);
        if (r < 0) {
                report(w, m->queue, m->seq, r, 0, 0, 0,
                       r == -EAGAIN ? "the queue's ring is full" : "the GPU layer refused the job");
                return;
        }
        q->inflight[(q->head + q->count) % q->cap].dseq = m->seq;
        q->inflight[(q->head + q->count) % q->cap].gseq = gseq;
        q->count++;
}

static void do_abort(W *w, const WorkerAbort *m) {
        uint64_t gseq;

        if (m->queue >= GPU_MAX_QUEUES || !w->queues[m->queue].created ||
            !inflight_find(&w->queues[m->queue], m->seq, &gseq))
                return; /* finished meanwhile: its completion is on its way */
        (void) gpu_queue_abort(w->gpu, w->queues[m->queue].gpu_index, gseq, m->error < 0 ? m->error : -ECANCELED,
                               on_completion, w);
}

static int on_message(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        W *w = userdata;

        for (unsigned n = 0; n < 64; n++) {
                WorkerMsg msg;
                int r = worker_msg_recv(w->sock, w->msg_buf, &msg);

                if (r == -EAGAIN)
                        return 0;
                if (r < 0 || msg.type == 0) {
                        /* The daemon went (or sent what it never sends). */
                        log_debug("worker %" PRIu64 ": the control socket ended; exiting", w->id);
                        return sd_event_exit(w->event, 0);
                }
                switch (msg.type) {
                case WORKER_MSG_ADD_QUEUE: {
                        const WorkerAddQueue *m = WORKER_MSG_AS(&msg, WorkerAddQueue);
                        if (m)
                                do_add_queue(w, m);
                        break;
                }
                case WORKER_MSG_MAP_BUFFER: {
                        const WorkerObject *m = WORKER_MSG_AS(&msg, WorkerObject);
                        if (m)
                                do_map_buffer(w, m, msg.fd);
                        break;
                }
                case WORKER_MSG_LOAD_CODE: {
                        const WorkerObject *m = WORKER_MSG_AS(&msg, WorkerObject);
                        if (m)
                                do_load_code(w, m, msg.fd);
                        break;
                }
                case WORKER_MSG_DROP_BUFFER:
                case WORKER_MSG_DROP_CODE: {
                        const WorkerObject *m = WORKER_MSG_AS(&msg, WorkerObject);
                        if (m) {
                                object_drop(w, m->id);
                                send_stats(w);
                        }
                        break;
                }
                case WORKER_MSG_SUBMIT:
                        do_submit(w, &msg);
                        break;
                case WORKER_MSG_ABORT: {
                        const WorkerAbort *m = WORKER_MSG_AS(&msg, WorkerAbort);
                        if (m)
                                do_abort(w, m);
                        break;
                }
                case WORKER_MSG_EXIT:
                        safe_close(msg.fd);
                        return sd_event_exit(w->event, 0);
                default:
                        log_debug("worker %" PRIu64 ": message type %u ignored", w->id, (unsigned) msg.type);
                        break;
                }
                safe_close(msg.fd);
        }
        return 0;
}

/* ---- Bring-up ---- */

static int read_setup(int sock, void *buf, WorkerSetup *ret, int *ret_relay_fd) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        WorkerMsg msg;
        int r;

        /* The daemon sends it right after starting us; do not wait forever. */
        r = poll(&p, 1, 10000);
        if (r <= 0)
                return r == 0 ? -ETIMEDOUT : -errno;
        r = worker_msg_recv(sock, buf, &msg);
        if (r < 0)
                return r;
        if (msg.type != WORKER_MSG_SETUP || !WORKER_MSG_AS(&msg, WorkerSetup)) {
                safe_close(msg.fd);
                return -EPROTO;
        }
        memcpy(ret, msg.payload, sizeof *ret);
        /* The relay page, but for a proxy (worker-proto.h). */
        if ((msg.fd < 0) != !!(ret->flags & WORKER_SETUP_KFD_PROXY)) {
                safe_close(msg.fd);
                return -EPROTO;
        }
        *ret_relay_fd = msg.fd;
        if (ret->version != WORKER_PROTO_VERSION)
                return -EPROTONOSUPPORT;
        return 0;
}

static void fail_setup(W *w, int error, const char *fmt, ...) _printf_(3, 4);
static void fail_setup(W *w, int error, const char *fmt, ...) {
        WorkerFailed m = { .error = error };
        char text[WORKER_TEXT_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(text, sizeof text, fmt, ap);
        va_end(ap);
        worker_text_set(m.text, text);
        (void) worker_msg_send(w->sock, WORKER_MSG_FAILED, &m, sizeof m, -EBADF);
}

static W *w_free(W *w) {
        if (!w)
                return NULL;
        w->sock_source = sd_event_source_disable_unref(w->sock_source);
        w->wake_source = sd_event_source_disable_unref(w->wake_source);
        for (size_t i = 0; i < w->n_objects; i++)
                object_clear(&w->objects[i]);
        free(w->objects);
        w->relay = gpu_buffer_unref(w->relay);
        w->gpu = gpu_context_free(w->gpu);
        for (unsigned i = 0; i < GPU_MAX_QUEUES; i++)
                free(w->queues[i].inflight);
        if (w->ops && w->ops != &kfd_ops_real)
                sim_remote_ops_free(w->ops);
        sd_event_unref(w->event);
        safe_close(w->sock);
        free(w);
        return NULL;
}

/*
 * WORKER_SETUP_KFD_PROXY: this process's own KFD process is a relayed ROCm
 * program's, on a kernel without secondary KFD contexts. The daemon makes
 * every call of that process — its GPU context's and the program's, checked
 * on its side — over the control socket, which now speaks sim-remote's
 * wire; it is served here in the TRUSTED flavour (context-kfd-process.c),
 * inside the same sandbox as any worker. Ends when the daemon closes it.
 */
static int proxy_main(W *w, const WorkerSetup *setup, uint64_t t0) {
        SimRemoteRegistry *reg = NULL;
        KfdProcess *kp = NULL;
        SimRemoteProcess served;
        char err[WORKER_TEXT_MAX];
        WorkerReady ready;
        int r;

        /* A GPU fault of the program's sends this process SIGSEGV as well as
         * its MEMORY event (kfd-real.h): survive it, as the daemon does. */
        if (w->ops == &kfd_ops_real) {
                r = kfd_fault_signal_install();
                if (r < 0) {
                        fail_setup(w, r, "cannot install the GPU fault signal handler: %s", strerror(-r));
                        return r;
                }
        }
        /* Before the sandbox: it opens /dev/kfd and the render nodes — of
         * every GPU the program sees (the sandbox allows no open). */
        if (setup->n_more_gpus > WORKER_MAX_MORE_GPUS) {
                fail_setup(w, -E2BIG, "the setup names %" PRIu32 " more GPUs, more than %u", setup->n_more_gpus,
                           WORKER_MAX_MORE_GPUS);
                return -E2BIG;
        }
        r = kfd_process_new(w->ops, NULL, KFD_PROCESS_TRUSTED, setup->gpu_id, setup->render_minor, &kp, err,
                            sizeof err);
        if (r < 0) {
                fail_setup(w, r, "%s", err);
                return r;
        }
        served = kfd_process_served(kp);
        for (uint32_t i = 0; i < setup->n_more_gpus; i++) {
                r = kfd_process_add_gpu(kp, setup->more_gpus[i].gpu_id, setup->more_gpus[i].render_minor, err,
                                        sizeof err);
                if (r < 0) {
                        served.free(served.userdata);
                        fail_setup(w, r, "%s", err);
                        return r;
                }
        }
        r = sim_remote_registry_new(&reg);
        if (r < 0) {
                served.free(served.userdata);
                fail_setup(w, r, "out of memory");
                return r;
        }
        /* For tests only (test-kfd-relay): stopped before READY until a
         * SIGCONT, the daemon is seen serving others meanwhile. */
        if (getenv("KFDBROKER_TEST_HOLD_PROXY_WORKER"))
                (void) raise(SIGSTOP);
        r = worker_sandbox_enter(setup, err, sizeof err);
        if (r < 0) {
                served.free(served.userdata);
                sim_remote_registry_free(reg);
                fail_setup(w, r, "entering the sandbox failed: %s", err);
                return r;
        }
        ready = (WorkerReady) { .bring_up_ns = now_ns() - t0, .pid = (uint32_t) getpid() };
        send_or_exit(w, WORKER_MSG_READY, &ready, sizeof ready, NULL, 0, -EBADF);
        r = sim_remote_serve_process(reg, TAKE_FD(w->sock), &served, NULL, NULL);
        if (r < 0)
                log_error_errno(r, "worker %" PRIu64 ": cannot serve the KFD process: %m", w->id);
        else
                sim_remote_registry_wait(reg);
        sim_remote_registry_free(reg);
        return r;
}

int worker_main(int argc, char *argv[]) {
        enum { ARG_WORKER = 0x100, ARG_DEVICE, ARG_PARENT, ARG_LOG_LEVEL };
        static const struct option options[] = {
                { "worker", no_argument, NULL, ARG_WORKER },
                { "device", required_argument, NULL, ARG_DEVICE },
                { "parent", required_argument, NULL, ARG_PARENT },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                {},
        };
        GpuContextOptions opts = { .flags = GPU_CONTEXT_NO_SDMA | GPU_CONTEXT_NO_COMPUTE,
                                   .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT };
        uint64_t t0 = now_ns();
        bool sim = false;
        pid_t parent = 0;
        char err[WORKER_TEXT_MAX];
        WorkerSetup setup;
        WorkerReady ready;
        W *w;
        _cleanup_close_ int relay_fd = -EBADF;
        int c, r;

        /* Gone with the daemon, whatever happens to it; and if it went
         * before this line, go now. */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        log_setup(LOG_TARGET_STDERR);
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case ARG_WORKER:
                        break;
                case ARG_DEVICE:
                        sim = strcmp(optarg, "sim") == 0;
                        break;
                case ARG_PARENT:
                        parent = (pid_t) strtol(optarg, NULL, 10);
                        break;
                case ARG_LOG_LEVEL:
                        r = log_level_from_string(optarg);
                        if (r >= 0)
                                log_set_max_level(r);
                        break;
                default:
                        return EXIT_FAILURE;
                }
        if (parent > 0 && getppid() != parent)
                return EXIT_FAILURE;
        /* Only the fds we were given. */
        (void) close_range(sim ? WORKER_FD_DEVICE + 1 : WORKER_FD_CONTROL + 1, ~0U, 0);

        w = calloc(1, sizeof *w);
        if (!w)
                return EXIT_FAILURE;
        w->sock = WORKER_FD_CONTROL;
        for (unsigned i = 0; i < GPU_MAX_QUEUES; i++)
                w->daemon_of_gpu[i] = -1;
        r = read_setup(w->sock, w->msg_buf, &setup, &relay_fd);
        if (r < 0) {
                fail_setup(w, r, "the worker did not get its setup: %s", strerror(-r));
                w_free(w);
                return EXIT_FAILURE;
        }
        w->id = setup.context_id;
        log_set_max_level((int) MIN(setup.log_level, 7u));
        if (setup.max_inflight)
                opts.max_inflight = setup.max_inflight;
        w->max_inflight = opts.max_inflight ? opts.max_inflight : 1024;
        opts.compute_ring_size = setup.ring_size;
        opts.gpu_id = setup.gpu_id;
        opts.flags |= GPU_CONTEXT_CLIENT;

        /* The same client address window as the daemon's, in this process. */
        r = gpu_va_region_reserve();
        if (r < 0) {
                fail_setup(w, r, "cannot reserve the client address window 0x%llx-0x%llx: %s", GPU_VA_REGION_BASE,
                           GPU_VA_REGION_END, r == -EEXIST ? "something is mapped there already" : strerror(-r));
                w_free(w);
                return EXIT_FAILURE;
        }

        if (sim) {
                r = sim_remote_ops_new(WORKER_FD_DEVICE, &w->ops);
                if (r < 0) {
                        fail_setup(w, r, "cannot reach the simulated GPU: %s", strerror(-r));
                        w_free(w);
                        return EXIT_FAILURE;
                }
        } else
                w->ops = &kfd_ops_real;
        if (setup.flags & WORKER_SETUP_KFD_PROXY) {
                relay_fd = safe_close(relay_fd);
                r = proxy_main(w, &setup, t0);
                w_free(w);
                /* _exit, as below. */
                _exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
        }
        r = gpu_context_new(w->ops, &opts, &w->gpu);
        if (r < 0) {
                fail_setup(w, r, "bringing up a GPU context failed: %s", strerror(-r));
                w_free(w);
                return EXIT_FAILURE;
        }
        /* The relay page: words the daemon's copy queues write when a copy a
         * kernel here waits for is done (context.h, context_relay()). */
        r = gpu_buffer_import_mapped(w->gpu, relay_fd, &w->relay);
        if (r < 0) {
                fail_setup(w, r, "mapping the relay page failed: %s", strerror(-r));
                w_free(w);
                return EXIT_FAILURE;
        }
        relay_fd = safe_close(relay_fd);

        r = worker_sandbox_enter(&setup, err, sizeof err);
        if (r < 0) {
                fail_setup(w, r, "entering the sandbox failed: %s", err);
                w_free(w);
                return EXIT_FAILURE;
        }

        r = sd_event_new(&w->event);
        if (r >= 0)
                r = sd_event_add_io(w->event, &w->sock_source, w->sock, EPOLLIN, on_message, w);
        if (r >= 0)
                r = sd_event_add_io(w->event, &w->wake_source, gpu_context_get_wake_fd(w->gpu), EPOLLIN, on_wake, w);
        if (r < 0) {
                fail_setup(w, r, "setting up the event loop failed: %s", strerror(-r));
                w_free(w);
                return EXIT_FAILURE;
        }
        ready = (WorkerReady) {
                .bring_up_ns = now_ns() - t0,
                .pid = (uint32_t) getpid(),
        };
        send_or_exit(w, WORKER_MSG_READY, &ready, sizeof ready, NULL, 0, -EBADF);
        send_stats(w);

        r = sd_event_loop(w->event);
        if (r < 0)
                log_error_errno(r, "worker %" PRIu64 ": event loop failed: %m", w->id);
        w_free(w);
        /* _exit: nothing of exit() is needed here, and under the seccomp
         * filter LeakSanitizer's exit-time check (a ptrace of a clone()d
         * child) cannot run — in a sanitizer build it would abort the worker
         * ("LeakSanitizer has encountered a fatal error"). */
        _exit(r < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}
