/* SPDX-License-Identifier: MIT */
/*
 * The pool's KFD processes of relayed clients (OpenKfd, docs/rocm.md): a
 * secondary KFD context of the daemon's, or a proxy worker's process
 * (context-kfd-process.c), with the daemon's GPU context in it, counted
 * against --max-contexts (ContextPool.n_relays) and never reclaimed.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
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

/* How long the loop waits for a proxy worker to be ready (its start, the
 * sandbox, opening the device: milliseconds; docs/rocm.md says the loop
 * waits meanwhile). */
#define PROXY_READY_TIMEOUT_MS 3000

static void remote_ops_free(const KfdOps *ops) {
        sim_remote_ops_free(ops);
}

/* Where the kernel has no secondary contexts: a proxy worker process whose
 * own KFD process is the client's (worker.c, WORKER_SETUP_KFD_PROXY), its
 * calls made over sim-remote's wire. The worker is the slot's to reap. */
static int open_proxy_process(ContextPool *p, Context *c, uint32_t gpu_id, KfdProcess **ret, char *err,
                              size_t errlen) {
        const GpuDeviceInfo *info = gpu_context_get_info(p->device->gpu);
        _cleanup_close_ int sock = -EBADF, pidfd = -EBADF;
        const KfdOps *remote = NULL;
        GpuBuffer *relay = NULL;
        pid_t pid;
        int r;

        r = worker_process_spawn(p, c->id, WORKER_SETUP_KFD_PROXY, &pid, &pidfd, &sock, &relay, err, errlen);
        if (r < 0)
                return r;
        relay = gpu_buffer_unref(relay); /* not used by a proxy */
        r = worker_process_wait_ready(sock, PROXY_READY_TIMEOUT_MS, err, errlen);
        if (r >= 0 && fcntl(sock, F_SETFL, 0) < 0)
                r = -errno;
        if (r >= 0) {
                r = sim_remote_ops_new(TAKE_FD(sock), &remote);
                if (r < 0)
                        snprintf(err, errlen, "cannot reach its KFD process's worker: %s", strerror(-r));
        }
        if (r < 0) {
                (void) pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
                worker_process_reap_later(p, pid, TAKE_FD(pidfd), c->id, true);
                return r;
        }
        /* It exits when remote is freed, with the process (base_free). */
        c->kfd_worker_pid = pid;
        c->kfd_worker_pidfd = TAKE_FD(pidfd);
        return kfd_process_new(remote, remote_ops_free, 0, gpu_id, info->drm_render_minor, ret, err, errlen);
}

/* The KFD process of a relayed client, served over a new connection
 * (*ret_fd, the client's end), with the daemon's GPU context in it brought
 * up as *ret_gpu. Calls hooks->end() on failure. */
static int kfd_relay_process(ContextPool *p, Context *c, const GpuContextOptions *o, const SimRemoteHooks *hooks,
                             void *hooks_userdata, int *ret_fd, GpuContext **ret_gpu, char *err, size_t errlen) {
        KfdProcess *kp = NULL;
        GpuContext *gpu = NULL;
        SimRemoteProcess served;
        int sv[2], r;

        if (p->mechanism == CONTEXT_MECHANISM_KERNEL)
                r = kfd_process_new(p->ops, NULL, KFD_PROCESS_SECONDARY, o->gpu_id,
                                    gpu_context_get_info(p->device->gpu)->drm_render_minor, &kp, err, errlen);
        else
                r = open_proxy_process(p, c, o->gpu_id, &kp, err, errlen);
        if (r < 0)
                goto refused;
        served = kfd_process_served(kp);
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

int context_pool_kfd_relay_begin(ContextPool *p, const char *key, ContextPayer *payer, const SimRemoteHooks *hooks,
                                 void *hooks_userdata, int *ret_fd, Context **ret_ctx, char *err, size_t errlen) {
        uint64_t own = gpu_context_own_bytes(p->device->gpu, CLIENT_MAX_INFLIGHT), t0 = now_ns();
        const GpuDeviceInfo *info = gpu_context_get_info(p->device->gpu);
        GpuContextOptions o = kfd_process_options;
        GpuContext *gpu = NULL;
        Context *c = NULL;
        int fd = -EBADF, r;

        if (p->mechanism == CONTEXT_MECHANISM_NONE) {
                snprintf(err, errlen, "this daemon gives no client a GPU context of its own (%s); a KFD process needs one",
                         p->mechanism_reason);
                r = -EACCES;
                goto refused;
        }
        if (p->n_live + p->n_relays >= p->opts.max_contexts) {
                snprintf(err, errlen, "the GPU context limit (%u, kfdbrokerd --max-contexts) is reached",
                         p->opts.max_contexts);
                r = -EBUSY;
                goto refused;
        }
        r = context_new(p, key, false, &c);
        if (r < 0) {
                snprintf(err, errlen, "out of memory");
                goto refused;
        }
        c->kfd_process = true;
        c->users = 1;
        /* In the pool's list, so that its end at exit ends this one too. */
        c->next = p->clients;
        if (p->clients)
                p->clients->prev = c;
        p->clients = c;
        context_set_payer(c, payer);
        r = context_charge(c, own, "the GPU context of a KFD process", err, errlen);
        if (r < 0) {
                context_release(c);
                goto refused;
        }
        o.gpu_id = info->gpu_id;
        /* A proxy worker's MMIO page is its own; the device context's flushes
         * the same HDP. The pool frees its clients before it. */
        o.hdp_fallback = p->device->gpu;
        r = kfd_relay_process(p, c, &o, hooks, hooks_userdata, &fd, &gpu, err, errlen);
        if (r < 0) {
                /* hooks->end() was called, or the server calls it. */
                context_uncharge(c, own);
                context_release(c);
                return r;
        }
        r = context_adopt(c, gpu, now_ns() - t0);
        if (r < 0) {
                gpu_context_free(gpu);
                snprintf(err, errlen, "watching the KFD process's GPU context failed: %s", strerror(-r));
                context_uncharge(c, own);
                context_release(c);
                safe_close(fd);
                return r;
        }
        p->n_relays++;
        *ret_fd = fd;
        *ret_ctx = c;
        return 0;
refused:
        if (hooks && hooks->end)
                hooks->end(hooks_userdata);
        return r;
}

void context_kfd_relay_end(Context *c) {
        if (!c)
                return;
        assert(c->kfd_process);
        context_ref(c);
        context_drop(c, false, "its program's KFD process ended");
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

