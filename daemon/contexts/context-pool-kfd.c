/* SPDX-License-Identifier: MIT */
/*
 * The pool's KFD processes of relayed clients (OpenKfd, docs/rocm.md): a
 * secondary KFD context of the daemon's, or a proxy worker's process
 * (context-kfd-process.c), with the daemon's GPU context in it, counted
 * against --max-contexts (ContextPool.n_relays) and never reclaimed. The
 * process shows every GPU of the session (docs/rocm.md "Several GPUs"); the
 * daemon's GPU context on another GPU joins it in that GPU's pool
 * (context_pool_kfd_relay_join()).
 *
 * Lifetimes, with a proxy worker (KFD before 1.19):
 *  - the worker is the first slot's (the pool of the session's own GPU):
 *    Context.kfd_worker_pid/pidfd, taken at READY, let go as that slot's
 *    incarnation ends (context.c kfd_worker_let_go(): reaped when it exits,
 *    which it does once its connection closes, killed after a grace);
 *  - the connection (sim-remote's client, KfdOps) is the KfdProcess's
 *    base, freed with its last reference: the server's (the client) and the
 *    daemon view's, held while any GPU context of the daemon's has a file
 *    of the process open — the first's and every joined one's;
 *  - a joined slot (GPU k) has its GpuContext in the worker's process
 *    through the first's table, its own waiter there; it notes the worker's
 *    pid (stats, the reason of its loss) but does not own it. It goes before
 *    the first's: at the program's end (the relay's drop_context()) and as
 *    the first's incarnation ends for any reason (the relay's
 *    on_context_dropped() -> kfd_relay_gpus_follow(), before
 *    kfd_worker_let_go()) — lost with it when the first was lost;
 *  - the worker dying or not answering a call within PROXY_CALL_TIMEOUT_MS
 *    breaks the connection for every context on it: each waiter fails, the
 *    first to notice loses its context, and the first's loss takes the
 *    others; every slot is released and uncounted on its pool
 *    (context_pool_kfd_relay_end()), its charge given back, every file of
 *    the process closed with the last reference.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "contexts/context-internal.h"
#include "contexts/context-kfd-process.h"
#include "sim/sim-remote.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "worker/worker-proto.h"

/* The GPU context the daemon keeps in a relayed client's KFD process: its
 * objects in a slot of the client address window, which the interposer
 * keeps free in the client (docs/rocm.md); compute queues made as its
 * streams need them, no SDMA queue (a relayed client's copies run on its
 * compute queues: the device context's SDMA queues never touch memory a
 * client can write). */
static const GpuContextOptions kfd_process_options = {
        .flags = GPU_CONTEXT_CLIENT | GPU_CONTEXT_NO_SDMA | GPU_CONTEXT_NO_COMPUTE,
        .compute_ring_size = CLIENT_RING_SIZE,
        .max_inflight = CLIENT_MAX_INFLIGHT,
        .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT,
};

/* How long a proxy worker may take to be ready (its start, the sandbox,
 * opening the device: milliseconds); the loop serves others meanwhile. */
#define PROXY_READY_TIMEOUT_NS (3000ull * 1000000ull)

/* How long a call the daemon makes in a proxy worker's KFD process may
 * take: the daemon's own calls there (its GPU context's, doorbells, the
 * teardown) are made on the event loop, so a worker that stops answering
 * would stop every session. A working one answers in microseconds to
 * milliseconds (a KFD ioctl, or a VRAM_CLEARED allocation's clear); past
 * this the worker is given up — its connection shut down, so the GPU
 * context's waiter sees it gone and the context is lost, and the worker
 * is killed after the reaper's grace. */
#define PROXY_CALL_TIMEOUT_MS 5000

/* An OpenKfd on its way: the slot, charged and counted; with a proxy
 * worker, the worker until it says READY. */
struct ContextKfdOpen {
        ContextPool *p;
        Context *c;
        uint64_t context_id;     /* c's, for the worker's reaper */
        uint64_t own, t0, spawned;  /* spawned: when the worker was started (the loop went on) */
        GpuContextOptions o;
        const SimRemoteHooks *hooks;
        void *hooks_userdata;
        ContextKfdOpenDone done;
        void *done_userdata;
        sd_event_source *io, *timer;
        int sock, pidfd;
        pid_t pid;
        /* The other GPUs its KFD process shows (the worker was given them). */
        ContextKfdGpu more[WORKER_MAX_MORE_GPUS];
        size_t n_more;
};

/* The slot of a KFD process's daemon context: in use, paid for by payer,
 * and in the pool's list, so that its end at exit ends this one too. */
static int kfd_slot_new(ContextPool *p, const char *key, ContextPayer *payer, Context **ret, char *err,
                        size_t errlen) {
        Context *c;
        int r = context_new(p, key, false, &c);

        if (r < 0) {
                snprintf(err, errlen, "out of memory");
                return r;
        }
        c->kfd_process = true;
        c->users = 1;
        c->next = p->clients;
        if (p->clients)
                p->clients->prev = c;
        p->clients = c;
        context_set_payer(c, payer);
        *ret = c;
        return 0;
}

static void remote_ops_free(const KfdOps *ops) {
        sim_remote_ops_free(ops);
}

/* The KFD process of a relayed client, served over a new connection
 * (*ret_fd, the client's end), with the daemon's GPU context in it brought
 * up as *ret_gpu; kp is the caller's, given to the server. Calls
 * hooks->end() on failure. */
static int kfd_relay_process(ContextPool *p, KfdProcess *kp, const GpuContextOptions *o, const SimRemoteHooks *hooks,
                             void *hooks_userdata, int *ret_fd, GpuContext **ret_gpu, char *err, size_t errlen) {
        SimRemoteProcess served = kfd_process_served(kp);
        GpuContext *gpu = NULL;
        int sv[2], r;

        r = gpu_context_new(kfd_process_daemon_ops(kp), o, &gpu);
        if (r < 0) {
                snprintf(err, errlen, "bringing up the daemon's GPU context in the KFD process failed: %s",
                         strerror(-r));
                served.free(served.userdata);
                goto refused;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = -errno;
                snprintf(err, errlen, "cannot make its connection: %s", strerror(-r));
                served.free(served.userdata);
                gpu_context_free(gpu);
                goto refused;
        }
        /* From here the server holds the process and hooks_userdata. */
        r = sim_remote_serve_process(p->relays, sv[0], &served, hooks, hooks_userdata);
        if (r < 0) {
                snprintf(err, errlen, "cannot serve the KFD process: %s", strerror(-r));
                close(sv[1]);
                gpu_context_free(gpu);
                goto refused;
        }
        *ret_fd = sv[1];
        *ret_gpu = gpu;
        return 0;
refused:
        if (hooks && hooks->end)
                hooks->end(hooks_userdata);
        return r;
}

/* Ends op: its worker (if it never became the slot's) killed and reaped
 * later, its sources gone. The slot is the caller's. */
static void open_free(ContextKfdOpen *op) {
        op->io = sd_event_source_disable_unref(op->io);
        op->timer = sd_event_source_disable_unref(op->timer);
        safe_close(op->sock);
        if (op->pidfd >= 0) {
                (void) pidfd_send_signal(op->pidfd, SIGKILL, NULL, 0);
                worker_process_reap_later(op->p, op->pid, op->pidfd, op->context_id, true);
        }
        free(op);
}

/* The slot given up: r refused it, and hooks->end() was called (with_end:
 * call it now). */
static void open_refused(ContextKfdOpen *op, bool with_end) {
        if (with_end && op->hooks && op->hooks->end)
                op->hooks->end(op->hooks_userdata);
        context_uncharge(op->c, op->own);
        context_release(op->c);
        op->c = NULL;
        context_pool_kfd_relay_end(op->p);
}

/* The session's other GPUs in kp (the caller's; freed here on failure): the
 * KFD serves them all in one process (one KfdOps table, one /dev/kfd) —
 * through a proxy worker, the worker opened their render files as it was
 * told (worker_process_spawn()). */
static int add_gpus(KfdProcess *kp, const ContextKfdGpu *more, size_t n_more, char *err, size_t errlen) {
        for (size_t i = 0; i < n_more; i++) {
                int r = kfd_process_add_gpu(kp, more[i].gpu_id, more[i].render_minor, err, errlen);
                if (r < 0) {
                        SimRemoteProcess served = kfd_process_served(kp);
                        served.free(served.userdata);
                        return r;
                }
        }
        return 0;
}

/* The rest, with kp open (the caller's, given away here): the daemon's GPU
 * context in it and the server. */
static int open_finish(ContextKfdOpen *op, KfdProcess *kp, int *ret_fd, char *err, size_t errlen) {
        GpuContext *gpu = NULL;
        int fd = -EBADF, r;

        r = kfd_relay_process(op->p, kp, &op->o, op->hooks, op->hooks_userdata, &fd, &gpu, err, errlen);
        if (r < 0) {
                /* hooks->end() was called, or the server calls it. */
                open_refused(op, false);
                return r;
        }
        r = context_adopt(op->c, gpu, now_ns() - op->t0);
        if (r < 0) {
                gpu_context_free(gpu);
                snprintf(err, errlen, "watching the KFD process's GPU context failed: %s", strerror(-r));
                safe_close(fd);
                open_refused(op, false);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

/* The proxy worker said READY (or went, or failed): its KFD process over
 * sim-remote's wire, then the rest; done() says how it went. */
static void proxy_ready(ContextKfdOpen *op, int r, const char *why) {
        const GpuDeviceInfo *info = gpu_context_get_info(op->p->device->gpu);
        const KfdOps *remote = NULL;
        KfdProcess *kp = NULL;
        uint64_t ready = now_ns();
        char err[384] = "";
        int fd = -EBADF;

        if (r < 0)
                snprintf(err, sizeof err, "%s", why);
        else if (fcntl(op->sock, F_SETFL, 0) < 0) {
                r = -errno;
                snprintf(err, sizeof err, "cannot reach its KFD process's worker: %s", strerror(-r));
        } else {
                r = sim_remote_ops_new(TAKE_FD(op->sock), &remote);
                if (r < 0)
                        snprintf(err, sizeof err, "cannot reach its KFD process's worker: %s", strerror(-r));
                else
                        sim_remote_ops_set_reply_timeout(remote, PROXY_CALL_TIMEOUT_MS);
        }
        if (r < 0) {
                open_refused(op, true);
                op->done(op->done_userdata, r, -EBADF, NULL, err);
                open_free(op);
                return;
        }
        /* The worker is the slot's now, and exits when remote is freed,
         * with the process (base_free). */
        op->c->kfd_worker_pid = op->pid;
        op->c->kfd_worker_pidfd = TAKE_FD(op->pidfd);
        r = kfd_process_new(remote, remote_ops_free, 0, op->o.gpu_id, info->drm_render_minor, &kp, err, sizeof err);
        if (r >= 0)
                r = add_gpus(kp, op->more, op->n_more, err, sizeof err);
        if (r < 0)
                open_refused(op, true);
        else
                r = open_finish(op, kp, &fd, err, sizeof err);
        log_debug("KFD process of context %" PRIu64 ": its proxy worker (pid %d), started in %.1f ms of the loop, was "
                  "ready %.1f ms after the start; its KFD process and the daemon's GPU context there took %.1f ms of "
                  "the loop",
                  op->context_id, (int) op->pid, (double) (op->spawned - op->t0) / 1e6,
                  (double) (ready - op->t0) / 1e6, (double) (now_ns() - ready) / 1e6);
        op->done(op->done_userdata, r, fd, r < 0 ? NULL : op->c, err);
        open_free(op);
}

static int on_proxy_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        ContextKfdOpen *op = userdata;
        char err[256] = "";
        int r;

        r = worker_process_wait_ready(op->sock, 0, err, sizeof err);
        proxy_ready(op, r, err);
        return 0;
}

static int on_proxy_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        ContextKfdOpen *op = userdata;
        char err[128];

        snprintf(err, sizeof err, "the worker process did not come up: %s", strerror(ETIMEDOUT));
        proxy_ready(op, -ETIMEDOUT, err);
        return 0;
}

/* Where the kernel has no secondary contexts: a proxy worker process whose
 * own KFD process is the client's (worker.c, WORKER_SETUP_KFD_PROXY), its
 * calls made over sim-remote's wire; started here, waited for on the loop. */
static int open_proxy(ContextKfdOpen *op, char *err, size_t errlen) {
        ContextPool *p = op->p;
        GpuBuffer *relay = NULL;
        int r;

        r = worker_process_spawn(p, op->c->id, WORKER_SETUP_KFD_PROXY, op->more, op->n_more, &op->pid, &op->pidfd,
                                 &op->sock, &relay, err, errlen);
        if (r < 0)
                return r;
        relay = gpu_buffer_unref(relay); /* NULL: a proxy gets none */
        op->spawned = now_ns();
        r = sd_event_add_io(p->event, &op->io, op->sock, EPOLLIN, on_proxy_io, op);
        if (r >= 0)
                r = sd_event_add_time_relative(p->event, &op->timer, CLOCK_MONOTONIC, PROXY_READY_TIMEOUT_NS / 1000,
                                               0, on_proxy_timeout, op);
        if (r < 0) {
                snprintf(err, errlen, "cannot wait for its worker: %s", strerror(-r));
                return r;
        }
        (void) sd_event_source_set_description(op->io, "kfd-open-worker");
        (void) sd_event_source_set_description(op->timer, "kfd-open-worker-timeout");
        return 0;
}

int context_pool_kfd_relay_begin(ContextPool *p, const char *key, ContextPayer *payer, const SimRemoteHooks *hooks,
                                 void *hooks_userdata, const ContextKfdGpu *more_gpus, size_t n_more_gpus,
                                 ContextKfdOpenDone done, void *done_userdata, ContextKfdOpen **ret_open,
                                 int *ret_fd, Context **ret_ctx, char *err, size_t errlen) {
        const GpuDeviceInfo *info = gpu_context_get_info(p->device->gpu);
        ContextKfdOpen *op;
        Context *c = NULL;
        int r;

        if (p->mechanism == CONTEXT_MECHANISM_NONE) {
                snprintf(err, errlen, "this daemon gives no client a GPU context of its own (%s); a KFD process needs one",
                         p->mechanism_reason);
                r = -EACCES;
                goto refused;
        }
        /* Those on their way count too. */
        if (p->n_live + p->n_relays >= p->opts.max_contexts) {
                snprintf(err, errlen, "the GPU context limit (%u, kfdbrokerd --max-contexts) is reached",
                         p->opts.max_contexts);
                r = -EBUSY;
                goto refused;
        }
        op = calloc(1, sizeof *op);
        if (!op) {
                snprintf(err, errlen, "out of memory");
                r = -ENOMEM;
                goto refused;
        }
        *op = (ContextKfdOpen) { .p = p, .own = gpu_context_own_bytes(p->device->gpu, CLIENT_MAX_INFLIGHT),
                                 .t0 = now_ns(), .o = kfd_process_options, .hooks = hooks,
                                 .hooks_userdata = hooks_userdata, .done = done, .done_userdata = done_userdata,
                                 .sock = -EBADF, .pidfd = -EBADF };
        r = kfd_slot_new(p, key, payer, &c, err, errlen);
        if (r < 0) {
                free(op);
                goto refused;
        }
        r = context_charge(c, op->own, "the GPU context of a KFD process", err, errlen);
        if (r < 0) {
                context_release(c);
                free(op);
                goto refused;
        }
        op->c = c;
        op->context_id = c->id;
        p->n_relays++;
        op->o.gpu_id = info->gpu_id;
        /* A proxy worker's MMIO page is its own; the device context's flushes
         * the same HDP. The pool frees its clients before it. */
        op->o.hdp_fallback = p->device->gpu;
        if (n_more_gpus > MIN(ELEMENTSOF(op->more), KFD_PROCESS_MAX_GPUS - 1)) {
                snprintf(err, errlen, "a KFD process shows at most %u GPUs", KFD_PROCESS_MAX_GPUS);
                open_refused(op, true);
                open_free(op);
                return -E2BIG;
        }
        memcpy(op->more, more_gpus, n_more_gpus * sizeof *more_gpus);
        op->n_more = n_more_gpus;
        if (p->mechanism != CONTEXT_MECHANISM_KERNEL) {
                /* The session's other GPUs too: the worker opens their
                 * render files before its sandbox (docs/rocm.md "Several
                 * GPUs"). */
                r = open_proxy(op, err, errlen);
                if (r < 0) {
                        open_refused(op, true);
                        open_free(op);
                        return r;
                }
                *ret_open = op;
                return 1;
        }
        KfdProcess *kp = NULL;
        r = kfd_process_new(p->ops, NULL, KFD_PROCESS_SECONDARY, op->o.gpu_id, info->drm_render_minor, &kp, err,
                            errlen);
        if (r >= 0)
                r = add_gpus(kp, op->more, op->n_more, err, errlen);
        if (r < 0)
                open_refused(op, true);
        else
                r = open_finish(op, kp, ret_fd, err, errlen);
        if (r >= 0)
                *ret_ctx = c;
        open_free(op);
        return r;
refused:
        if (hooks && hooks->end)
                hooks->end(hooks_userdata);
        return r;
}

void context_kfd_open_cancel(ContextKfdOpen *op) {
        if (!op)
                return;
        open_refused(op, true);
        open_free(op);
}

int context_pool_kfd_relay_join(ContextPool *p, const char *key, ContextPayer *payer, Context *first,
                                Context **ret_ctx, char *err, size_t errlen) {
        GpuContextOptions o = kfd_process_options;
        uint64_t t0 = now_ns(), own;
        GpuContext *gpu = NULL;
        Context *c = NULL;
        int r;

        if (p->mechanism == CONTEXT_MECHANISM_NONE || !first || !first->kfd_process || !first->gpu) {
                snprintf(err, errlen, "the KFD process has no GPU context of the daemon's to share (%s)",
                         p->mechanism == CONTEXT_MECHANISM_NONE ? p->mechanism_reason : "it is gone");
                return -EOPNOTSUPP;
        }
        if (p->n_live + p->n_relays >= p->opts.max_contexts) {
                snprintf(err, errlen, "the GPU context limit (%u, kfdbrokerd --max-contexts) is reached",
                         p->opts.max_contexts);
                return -EBUSY;
        }
        r = kfd_slot_new(p, key, payer, &c, err, errlen);
        if (r < 0)
                return r;
        own = gpu_context_own_bytes(p->device->gpu, CLIENT_MAX_INFLIGHT);
        r = context_charge(c, own, "the GPU context of a KFD process", err, errlen);
        if (r < 0) {
                context_release(c);
                return r;
        }
        p->n_relays++;
        /* Its context lives in first's worker, if first has one (its
         * stats and its loss name it); the worker is first's alone. */
        c->kfd_worker_pid = first->kfd_worker_pid;
        /* In the same KFD process as first (one event page per process:
         * gpu-context.c maps first's into this GPU's VM). */
        o.gpu_id = gpu_context_get_info(p->device->gpu)->gpu_id;
        o.hdp_fallback = p->device->gpu;
        o.share_process = first->gpu;
        r = gpu_context_new(gpu_context_get_ops(first->gpu), &o, &gpu);
        if (r < 0)
                snprintf(err, errlen, "bringing up the daemon's GPU context on GPU 0x%x in the KFD process failed: %s",
                         o.gpu_id, strerror(-r));
        else {
                r = context_adopt(c, gpu, now_ns() - t0);
                if (r < 0) {
                        gpu_context_free(gpu);
                        snprintf(err, errlen, "watching the KFD process's GPU context failed: %s", strerror(-r));
                }
        }
        if (r < 0) {
                context_uncharge(c, own);
                context_release(c);
                context_pool_kfd_relay_end(p);
                return r;
        }
        *ret_ctx = c;
        return 0;
}

void context_kfd_relay_leave(Context *c) {
        ContextPool *p;

        if (!c)
                return;
        p = c->pool;
        context_kfd_relay_end(c);
        context_release(c);
        if (p)
                context_pool_kfd_relay_end(p);
}

void context_kfd_relay_end(Context *c) {
        if (!c)
                return;
        assert(c->kfd_process);
        context_ref(c);
        context_drop(c, false, "its program's KFD process ended");
        context_unref(c);
}

void context_kfd_relay_lose(Context *c, const char *reason) {
        if (!c)
                return;
        assert(c->kfd_process);
        context_ref(c);
        context_announce_losing(c, reason);
        context_drop(c, true, reason);
        context_unref(c);
}

void context_on_kfd_drop(Context *c, void (*fn)(void *userdata), void *userdata) {
        c->kfd_dropped = fn;
        c->kfd_dropped_userdata = userdata;
}

bool context_is_kfd_process(const Context *c) {
        return c->kfd_process;
}

GpuContext *context_get_gpu(const Context *c) {
        return c->gpu;
}

void context_pool_kfd_relay_end(ContextPool *p) {
        assert(p->n_relays > 0);
        p->n_relays--;
}

unsigned context_pool_kfd_relays(const ContextPool *p) {
        return p->n_relays;
}

