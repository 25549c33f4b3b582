/* SPDX-License-Identifier: MIT */
/*
 * The ContextPool (context.h): the device context, the mechanism that makes
 * client contexts, the client slots by key, the limit on client contexts
 * alive at once, and the reclaim of idle ones.
 *
 * The mechanism is decided once, at start, as kfdbrokerd --contexts= asks:
 * "kernel" where the KFD speaks uapi 1.19 (AMDKFD_IOC_CREATE_PROCESS) and a
 * first secondary context comes up (it is freed again; its bring-up time is
 * logged); else "process" where a first worker process comes up (the same);
 * else "none" with the reasons, which the Manager states once in the journal
 * and `kfdbrokerctl status` shows. An explicit choice that cannot work is an
 * error: the daemon says why and does not start.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "contexts/context-internal.h"
#include "kfd/kfd-uapi.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "worker/worker-proto.h"

#define DEFAULT_MAX_CONTEXTS 64u
#define DEFAULT_IDLE_TIMEOUT_NS (30ull * 1000000000ull)

static const char *const mechanism_names[_CONTEXT_MECHANISM_MAX] = {
        [CONTEXT_MECHANISM_NONE] = "none",
        [CONTEXT_MECHANISM_KERNEL] = "kernel",
        [CONTEXT_MECHANISM_PROCESS] = "process",
};

const char *context_mechanism_to_string(ContextMechanism m) {
        return (unsigned) m < _CONTEXT_MECHANISM_MAX ? mechanism_names[m] : "?";
}

static const GpuContextOptions client_options = {
        .flags = GPU_CONTEXT_SECONDARY | GPU_CONTEXT_NO_SDMA | GPU_CONTEXT_NO_COMPUTE,
        .compute_ring_size = CLIENT_RING_SIZE,
        .max_inflight = CLIENT_MAX_INFLIGHT,
        .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT,
};

static int bring_up_client(ContextPool *p, GpuContext **ret, uint64_t *ret_ns) {
        GpuContextOptions o = client_options;
        uint64_t t0 = now_ns();
        int r;

        /* On the device context's GPU, whichever node the topology lists first. */
        o.gpu_id = gpu_context_get_info(p->device->gpu)->gpu_id;
        r = gpu_context_new(p->ops, &o, ret);

        *ret_ns = now_ns() - t0;
        return r;
}

/* Whether secondary contexts work here: 0 and their bring-up time, or why not. */
static int try_kernel(ContextPool *p, uint64_t *ret_ns, char *why, size_t whylen) {
        const GpuDeviceInfo *i = gpu_context_get_info(p->device->gpu);
        GpuContext *probe = NULL;
        int r;

        if (i->kfd_minor < KFD_MINOR_CREATE_PROCESS) {
                snprintf(why, whylen, "KFD %u.%u has no secondary contexts (they need uapi 1.%u, Linux 7.0)",
                         i->kfd_major, i->kfd_minor, KFD_MINOR_CREATE_PROCESS);
                return -EOPNOTSUPP;
        }
        r = bring_up_client(p, &probe, ret_ns);
        if (r < 0) {
                snprintf(why, whylen, "KFD %u.%u offers secondary contexts but making one failed (%s)", i->kfd_major,
                         i->kfd_minor, strerror(-r));
                return r;
        }
        gpu_context_free(probe);
        return 0;
}

/* Whether worker processes work here: 0 and a first one's start-up time. */
static int try_process(ContextPool *p, uint64_t *ret_ns, char *why, size_t whylen) {
        char err[256] = "";
        int r;

        if (p->exe_fd < 0 && !p->opts.worker_exe) {
                p->exe_fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
                if (p->exe_fd < 0) {
                        r = -errno;
                        snprintf(why, whylen, "this program cannot find itself to start workers (/proc/self/exe: %s)",
                                 strerror(-r));
                        return r;
                }
        }
        r = worker_process_probe(p, ret_ns, err, sizeof err);
        if (r < 0)
                snprintf(why, whylen, "a worker process did not come up (%s)", err);
        return r;
}

/* Which mechanism makes client contexts here, and why (not). */
static int decide_mechanism(ContextPool *p, char *err, size_t errlen) {
        const GpuDeviceInfo *i = gpu_context_get_info(p->device->gpu);
        char why_kernel[320] = "", why_process[320] = "";
        uint64_t ns = 0;
        int r;

        switch (p->opts.choice) {
        case CONTEXT_CHOICE_SHARED:
                p->mechanism = CONTEXT_MECHANISM_NONE;
                snprintf(p->mechanism_reason, sizeof p->mechanism_reason,
                         "shared mode by configuration: every client's kernels run in the daemon's one GPU context "
                         "(compute needs ComputeDispatch=yes)");
                return 0;
        case CONTEXT_CHOICE_AUTO:
        case CONTEXT_CHOICE_KERNEL:
                r = try_kernel(p, &ns, why_kernel, sizeof why_kernel);
                if (r >= 0) {
                        p->mechanism = CONTEXT_MECHANISM_KERNEL;
                        snprintf(p->mechanism_reason, sizeof p->mechanism_reason,
                                 "a GPU context per client: secondary KFD contexts (KFD %u.%u), at most %u at once, "
                                 "one brought up in %.1f ms",
                                 i->kfd_major, i->kfd_minor, p->opts.max_contexts, (double) ns / 1e6);
                        return 0;
                }
                if (p->opts.choice == CONTEXT_CHOICE_KERNEL) {
                        snprintf(err, errlen, "--contexts=kernel: %s", why_kernel);
                        return -EOPNOTSUPP;
                }
                _fallthrough_;
        case CONTEXT_CHOICE_PROCESS:
                r = try_process(p, &ns, why_process, sizeof why_process);
                if (r >= 0) {
                        p->mechanism = CONTEXT_MECHANISM_PROCESS;
                        snprintf(p->mechanism_reason, sizeof p->mechanism_reason,
                                 "a GPU context per client: a worker process each%s%s%s, at most %u at once, one "
                                 "started in %.1f ms",
                                 why_kernel[0] ? " (" : "", why_kernel, why_kernel[0] ? ")" : "",
                                 p->opts.max_contexts, (double) ns / 1e6);
                        return 0;
                }
                if (p->opts.choice == CONTEXT_CHOICE_PROCESS) {
                        snprintf(err, errlen, "--contexts=process: %s", why_process);
                        return -EOPNOTSUPP;
                }
                break;
        }
        p->mechanism = CONTEXT_MECHANISM_NONE;
        snprintf(p->mechanism_reason, sizeof p->mechanism_reason,
                 "shared mode: %s, and %s, so every client's kernels run in the daemon's one GPU context (compute "
                 "needs ComputeDispatch=yes)",
                 why_kernel, why_process);
        return 0;
}

static int on_idle_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        ContextPool *p = userdata;
        uint64_t now = now_ns();
        Context *c, *next;

        for (c = p->clients; c; c = next) {
                /* Dropping tells the scheduler, which may let go of the slot. */
                context_ref(c);
                if (!c->kfd_process && context_live(c) && c->inflight == 0 &&
                    now - c->last_used_ns >= p->opts.idle_timeout_ns)
                        context_drop(c, false, "idle");
                next = c->next;
                context_unref(c);
        }
        (void) sd_event_source_set_time_relative(src, p->opts.idle_timeout_ns / 2000);
        (void) sd_event_source_set_enabled(src, SD_EVENT_ON);
        return 0;
}

int context_pool_new(sd_event *event, const KfdOps *ops, const ContextPoolOptions *opts,
                     const ContextPoolCallbacks *cb, ContextPool **ret, char *err, size_t errlen) {
        ContextPool *p = calloc(1, sizeof *p);
        GpuContext *gpu = NULL;
        uint64_t t0 = now_ns();
        int r;

        if (!p)
                return -ENOMEM;
        p->event = sd_event_ref(event);
        p->ops = ops;
        p->exe_fd = -EBADF;
        r = sim_remote_registry_new(&p->relays);
        if (r < 0) {
                context_pool_free(p);
                return r;
        }
        if (opts)
                p->opts = *opts;
        if (p->opts.max_contexts == 0)
                p->opts.max_contexts = DEFAULT_MAX_CONTEXTS;
        if (p->opts.idle_timeout_ns == 0)
                p->opts.idle_timeout_ns = DEFAULT_IDLE_TIMEOUT_NS;
        if (cb)
                p->cb = *cb;
        /* Window slots for every secondary context, with room for those
         * still winding down while their successors come up. */
        r = gpu_va_set_client_slots(2 * p->opts.max_contexts);
        if (r < 0)
                log_debug_errno(r, "Client address window slots stay at %" PRIu64 " bytes: %m",
                                gpu_va_client_slot_size());

        r = gpu_context_new(ops, &p->opts.device, &gpu);
        if (r < 0)
                goto fail;
        r = context_new(p, "device", true, &p->device);
        if (r < 0) {
                gpu_context_free(gpu);
                goto fail;
        }
        r = context_adopt(p->device, gpu, now_ns() - t0);
        if (r < 0) {
                gpu_context_free(gpu);
                goto fail;
        }
        if (err && errlen)
                err[0] = '\0';
        r = decide_mechanism(p, err, errlen);
        if (r < 0)
                goto fail;
        r = sd_event_add_time_relative(event, &p->idle_timer, CLOCK_MONOTONIC, p->opts.idle_timeout_ns / 2000,
                                       0, on_idle_timer, p);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(p->idle_timer, "gpu-context-reclaim");
        *ret = p;
        return 0;
fail:
        context_pool_free(p);
        return r;
}

static int on_reap(sd_event_source *src, void *userdata) {
        ContextPool *p = userdata;
        Context *c, *next;

        (void) sd_event_source_set_enabled(src, SD_EVENT_OFF);
        for (c = p->clients; c; c = next) {
                context_ref(c);
                if (!c->kfd_process && c->users == 0 && context_live(c) && c->inflight == 0)
                        context_drop(c, false, "no client uses it any more");
                next = c->next;
                context_unref(c);
        }
        return 0;
}

void context_pool_schedule_reap(ContextPool *p) {
        if (!p->reap) {
                if (sd_event_add_defer(p->event, &p->reap, on_reap, p) < 0)
                        return; /* the idle timer reclaims it later */
                (void) sd_event_source_set_description(p->reap, "gpu-context-unused");
                return;
        }
        (void) sd_event_source_set_enabled(p->reap, SD_EVENT_ONESHOT);
}

ContextPool *context_pool_free(ContextPool *p) {
        if (!p)
                return NULL;
        p->idle_timer = sd_event_source_disable_unref(p->idle_timer);
        p->reap = sd_event_source_disable_unref(p->reap);
        p->cb = (ContextPoolCallbacks) {};
        /* Secondary contexts go before the primary one (rocm-systems#1705). */
        while (p->clients) {
                Context *c = p->clients;
                context_drop(c, false, "daemon exiting");
                context_pool_unlink(p, c);
        }
        /* The relayed clients' KFD processes end (their servers' last
         * references to their files go), before the primary context. */
        p->relays = sim_remote_registry_free(p->relays);
        worker_reapers_free(p);
        safe_close(p->exe_fd);
        if (p->device) {
                Context *d = p->device;
                d->wake = sd_event_source_disable_unref(d->wake);
                d->gpu = gpu_context_free(d->gpu);
                d->pool = NULL;
                context_unref(d);
        }
        sd_event_unref(p->event);
        free(p);
        return NULL;
}

void context_pool_drop_clients(ContextPool *p) {
        if (!p)
                return;
        for (Context *c = p->clients, *next; c; c = next) {
                context_ref(c);
                context_drop(c, false, "daemon exiting");
                next = c->next;
                context_unref(c);
        }
}

ContextMechanism context_pool_mechanism(const ContextPool *p) {
        return p->mechanism;
}

const char *context_pool_mechanism_reason(const ContextPool *p) {
        return p->mechanism_reason;
}

const GpuDeviceInfo *context_pool_info(const ContextPool *p) {
        return gpu_context_get_info(p->device->gpu);
}

Context *context_pool_device(ContextPool *p) {
        return p->device;
}

GpuContext *context_pool_device_gpu(ContextPool *p) {
        return p->device->gpu;
}

unsigned context_pool_max(const ContextPool *p) {
        return p->opts.max_contexts;
}

unsigned context_pool_live(const ContextPool *p) {
        return p->n_live;
}

const char *context_pool_sysfs_root(const ContextPool *p) {
        return p->ops->sysfs_root;
}

int context_pool_get(ContextPool *p, const char *key, Context **ret) {
        Context *c;
        int r;

        if (p->mechanism == CONTEXT_MECHANISM_NONE) {
                p->device->users++;
                *ret = context_ref(p->device);
                return 0;
        }
        for (c = p->clients; c; c = c->next)
                if (strcmp(c->key, key) == 0) {
                        c->users++;
                        *ret = context_ref(c);
                        return 0;
                }
        r = context_new(p, key, false, &c);
        if (r < 0)
                return r;
        c->users = 1;
        c->next = p->clients;
        if (p->clients)
                p->clients->prev = c;
        p->clients = c;
        *ret = c;
        return 0;
}

void context_pool_unlink(ContextPool *p, Context *c) {
        if (c->device)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else if (p->clients == c)
                p->clients = c->next;
        if (c->next)
                c->next->prev = c->prev;
        c->prev = c->next = NULL;
        c->pool = NULL;
}

void context_pool_touch(ContextPool *p, Context *c) {
        c->last_used_ns = now_ns();
}

/* The live client context idle longest (nothing in flight), or NULL. */
static Context *least_recently_used_idle(ContextPool *p) {
        Context *best = NULL;

        for (Context *c = p->clients; c; c = c->next)
                if (!c->kfd_process && context_live(c) && c->inflight == 0 &&
                    (!best || c->last_used_ns < best->last_used_ns))
                        best = c;
        return best;
}

int context_pool_bring_up(ContextPool *p, Context *c, char *err, size_t errlen) {
        uint64_t own = gpu_context_own_bytes(p->device->gpu, CLIENT_MAX_INFLIGHT);
        GpuContext *gpu = NULL;
        uint64_t ns;
        int r;

        /* KFD processes of relayed clients count, and are never reclaimed. */
        if (p->n_live + p->n_relays >= p->opts.max_contexts) {
                Context *victim = least_recently_used_idle(p);
                if (!victim && p->n_relays > 0) {
                        snprintf(err, errlen,
                                 "the GPU context limit (%u, kfdbrokerd --max-contexts) is reached: %u of them are KFD "
                                 "processes of programs run by kfdbroker-run, which are not reclaimed, and every "
                                 "other context has work on the GPU; try again when one is idle",
                                 p->opts.max_contexts, p->n_relays);
                        return -EAGAIN;
                }
                if (!victim) {
                        snprintf(err, errlen,
                                 "the GPU context limit (%u, kfdbrokerd --max-contexts) is reached and every context "
                                 "has work on the GPU; try again when one is idle",
                                 p->opts.max_contexts);
                        return -EAGAIN;
                }
                context_ref(victim);
                context_drop(victim, false, "reclaimed for another client (the pool is full)");
                context_unref(victim);
        }
        /* Its memory before any queue (both mechanisms bring it up with
         * client_options' sizes), charged before it exists. */
        r = context_charge(c, own, "a new GPU context", err, errlen);
        if (r < 0)
                return r;
        if (p->mechanism == CONTEXT_MECHANISM_PROCESS) {
                WorkerLink *w;

                r = worker_link_spawn(p, c, &w, err, errlen);
                if (r < 0) {
                        context_uncharge(c, own);
                        return r;
                }
                context_adopt_worker(c, w);
                p->n_live++;
                log_debug("GPU context %" PRIu64 " (%s): a worker process started (%u of %u)", c->id, c->key,
                          p->n_live, p->opts.max_contexts);
                return 0;
        }
        r = bring_up_client(p, &gpu, &ns);
        if (r < 0) {
                context_uncharge(c, own);
                snprintf(err, errlen, "bringing up a GPU context failed: %s", strerror(-r));
                return r;
        }
        r = context_adopt(c, gpu, ns);
        if (r < 0) {
                context_uncharge(c, own);
                gpu_context_free(gpu);
                snprintf(err, errlen, "watching a new GPU context failed: %s", strerror(-r));
                return r;
        }
        p->n_live++;
        log_debug("GPU context %" PRIu64 " (%s) up in %.1f ms (%u of %u)", c->id, c->key, (double) ns / 1e6,
                  p->n_live, p->opts.max_contexts);
        return 0;
}

void context_pool_foreach(ContextPool *p, void (*fn)(Context *c, void *userdata), void *userdata) {
        Context *c, *next;

        fn(p->device, userdata);
        for (c = p->clients; c; c = next) {
                context_ref(c);
                fn(c, userdata);
                next = c->next;
                context_unref(c);
        }
}
