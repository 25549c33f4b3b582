/* SPDX-License-Identifier: MIT */
/*
 * One Context slot (context.h): its incarnations — brought up on demand,
 * watched on the event loop, dropped when lost or idle — and the work the
 * scheduler hands it: queues made on first use, dispatches whose code and
 * buffers are brought into this context's VM before they are submitted.
 *
 * Its own memory is charged to its payer before it is allocated (context.h,
 * ContextPayer), in both mechanisms, from the GPU layer's sizes of what this
 * file asks for: never from what a worker reports. A scratch backing only
 * grows while the incarnation lives (a queue made again after a failed job
 * may allocate a smaller one): the charge is its high-water mark, given back
 * with the incarnation.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>

#include "contexts/context-internal.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

/* When the loop woke up: a context's last use needs no finer clock. */
static uint64_t context_now_ns(const Context *c) {
        return loop_now_ns(c->pool ? c->pool->event : NULL);
}

int context_new(ContextPool *p, const char *key, bool device, Context **ret) {
        Context *c = calloc(1, sizeof *c);

        if (!c)
                return -ENOMEM;
        c->key = strdup(key);
        if (!c->key) {
                free(c);
                return -ENOMEM;
        }
        c->n_ref = 1;
        c->pool = p;
        /* Unique in the daemon, whose GPUs each have a pool: the logs,
         * status and metrics name a context by it alone. Contexts are made
         * on the event loop only. */
        static uint64_t next_id;
        c->id = ++next_id;
        c->kfd_worker_pid = -1;
        c->kfd_worker_pidfd = -EBADF;
        c->device = device;
        c->last_used_ns = context_now_ns(c);
        *ret = c;
        return 0;
}

Context *context_ref(Context *c) {
        if (c)
                c->n_ref++;
        return c;
}

bool context_live(const Context *c) {
        return c->gpu || c->worker;
}

/* "48 MiB", "13.3 MiB", "68 KiB" for messages. */
static void format_size(uint64_t bytes, char *buf, size_t size) {
        if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
                snprintf(buf, size, "%" PRIu64 " MiB", bytes >> 20);
        else if (bytes >= (1ull << 20))
                snprintf(buf, size, "%.1f MiB", (double) bytes / (double) (1ull << 20));
        else
                snprintf(buf, size, "%" PRIu64 " KiB", (bytes + 1023) >> 10);
}

int context_charge(Context *c, uint64_t bytes, const char *what, char *err, size_t errlen) {
        char words[96], size[32];
        int r;

        if (bytes == 0)
                return 0;
        if (c->payer && !c->device) {
                format_size(bytes, size, sizeof size);
                snprintf(words, sizeof words, "%s %s", what, size);
                r = c->payer->charge(c->payer, (int64_t) bytes, false, words, err, errlen);
                if (r < 0)
                        return r;
        }
        c->memory += bytes;
        return 0;
}

void context_uncharge(Context *c, uint64_t bytes) {
        bytes = MIN(bytes, c->memory);
        if (bytes == 0)
                return;
        c->memory -= bytes;
        if (c->payer && !c->device)
                (void) c->payer->charge(c->payer, -(int64_t) bytes, true, "", NULL, 0);
}

void context_set_payer(Context *c, ContextPayer *payer) {
        if (c->device || c->payer == payer)
                return;
        if (c->payer && c->memory > 0)
                (void) c->payer->charge(c->payer, -(int64_t) c->memory, true, "", NULL, 0);
        c->payer = payer;
        if (payer && c->memory > 0)
                (void) payer->charge(payer, (int64_t) c->memory, true, "GPU context memory", NULL, 0);
}

ContextPayer *context_get_payer(const Context *c) {
        return c->payer;
}

/* A relayed process's proxy worker: it exits once the daemon's last call
 * into it is done (its connection closes with the process's server); reaped
 * then, or killed after a grace. */
static void kfd_worker_let_go(Context *c) {
        if (c->kfd_worker_pidfd < 0)
                return;
        if (c->pool)
                worker_process_reap_later(c->pool, c->kfd_worker_pid, c->kfd_worker_pidfd, c->id, false);
        else {
                (void) pidfd_send_signal(c->kfd_worker_pidfd, SIGKILL, NULL, 0);
                safe_close(c->kfd_worker_pidfd);
        }
        c->kfd_worker_pidfd = -EBADF;
        c->kfd_worker_pid = -1;
}

/* Ends the incarnation without a word to anyone. */
static void incarnation_free(Context *c) {
        if (!context_live(c))
                return;
        context_uncharge(c, c->memory);
        memset(c->scratch_wave, 0, sizeof c->scratch_wave);
        memset(c->scratch_bytes, 0, sizeof c->scratch_bytes);
        c->worker = worker_link_free(c->worker);
        /* Relay jobs still on the way hold the page (and its mapping in the
         * device context) until their writes have landed; so does this last
         * reference, for a relay job reported done whose write is still to
         * come. */
        if (c->relay)
                c->relay = gpu_buffer_unref_after_jobs_of(c->relay, context_pool_device_gpu(c->pool));
        c->relay_device = NULL;
        memset(c->relay_values, 0, sizeof c->relay_values);
        c->wake = sd_event_source_disable_unref(c->wake);
        c->gpu = gpu_context_free(c->gpu);
        c->inflight = 0;
        if (c->kfd_process && c->kfd_dropped)
                c->kfd_dropped(c->kfd_dropped_userdata);
        kfd_worker_let_go(c);
        if (c->pool && !c->device && !c->kfd_process)
                c->pool->n_live--;
}

static void context_free(Context *c) {
        /* Nobody uses the slot any more (hardware queues hold references
         * too): nothing to tell. */
        if (!c->device)
                incarnation_free(c);
        kfd_worker_let_go(c);
        if (c->pool)
                context_pool_unlink(c->pool, c);
        free(c->key);
        free(c);
}

Context *context_unref(Context *c) {
        if (c && --c->n_ref == 0)
                context_free(c);
        return NULL;
}

/* A slot nobody uses gives its incarnation up once nothing is in flight. */
static void maybe_drop_unused(Context *c) {
        if (!c->device && c->users == 0 && context_live(c) && c->pool)
                context_pool_schedule_reap(c->pool);
}

Context *context_release(Context *c) {
        if (!c)
                return NULL;
        if (c->users > 0)
                c->users--;
        maybe_drop_unused(c);
        return context_unref(c);
}

bool context_is_device(const Context *c) {
        return c->device;
}

const char *context_get_key(const Context *c) {
        return c->key;
}

uint64_t context_get_id(const Context *c) {
        return c->id;
}

unsigned context_get_losses(const Context *c) {
        return c->losses;
}

unsigned context_get_users(const Context *c) {
        return c ? c->users : 0;
}

void context_get_stats(const Context *c, ContextStats *ret) {
        *ret = (ContextStats) {
                .id = c->id,
                .key = c->key,
                .device = c->device,
                .live = context_live(c),
                .incarnations = c->incarnations,
                .losses = c->losses,
                .users = c->users,
                .jobs_in_flight = c->inflight,
                .created_ns = context_live(c) ? c->created_ns : 0,
                .bring_up_ns = c->bring_up_ns,
        };
        if (c->kfd_worker_pid > 0)
                ret->pid = (uint32_t) c->kfd_worker_pid;
        if (c->gpu)
                gpu_context_get_stats(c->gpu, &ret->gpu);
        else if (c->worker)
                worker_link_get_stats(c->worker, ret);
}

void context_announce_losing(Context *c, const char *reason) {
        if (c->losing_told || !context_live(c))
                return;
        c->losing_told = true;
        if (c->pool && c->pool->cb.losing)
                c->pool->cb.losing(c, reason, c->pool->cb.userdata);
}

/* Announces a loss of a context of this process once, before its failed jobs. */
static void announce_loss(Context *c) {
        const char *why = NULL;

        if (c->gpu && gpu_context_is_lost(c->gpu, &why))
                context_announce_losing(c, why);
}

void context_report(Context *c, const GpuCompletion *comp) {
        if (c->inflight > 0)
                c->inflight--;
        c->last_used_ns = context_now_ns(c);
        maybe_drop_unused(c);
        if (c->pool && c->pool->cb.completion)
                c->pool->cb.completion(c, comp, c->pool->cb.userdata);
}

/* A completion of a GPU context of this process. */
static void on_completion(const GpuCompletion *comp, void *userdata) {
        Context *c = userdata;

        announce_loss(c);
        context_report(c, comp);
}

static void collect(Context *c) {
        ContextPool *p = c->pool;
        const char *why = NULL;
        int r;

        if (c->gpu) {
                r = gpu_context_process(c->gpu, on_completion, c);
                if (r < 0 && !gpu_context_is_lost(c->gpu, NULL)) {
                        /* Its waiter is gone: nothing it runs could be
                         * reported done. A client context is lost with
                         * it (for a proxy worker's KFD process: the worker
                         * went, or stopped answering, context-pool-kfd.c);
                         * the device context's loss is the daemon's. */
                        char reason[200];
                        snprintf(reason, sizeof reason, "its completions can no longer be waited for (%s)%s",
                                 strerror(-r), c->kfd_worker_pid > 0 ? ": its KFD process's worker went or stopped answering" : "");
                        if (c->device)
                                log_error("GPU context %" PRIu64 " (%s): %s", c->id, c->key, reason);
                        else {
                                context_announce_losing(c, reason);
                                context_drop(c, true, reason);
                        }
                }
                if (c->gpu && gpu_context_is_lost(c->gpu, &why)) {
                        char reason[200];
                        announce_loss(c); /* if nothing was in flight */
                        snprintf(reason, sizeof reason, "%s", why);
                        context_drop(c, true, reason);
                }
        }
        if (p && p->cb.processed)
                p->cb.processed(p->cb.userdata);
}

static int on_wake(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Context *c = context_ref(userdata);

        collect(c);
        context_unref(c);
        return 0;
}

void context_hold_doorbells(Context *c) {
        if (!c || !c->gpu || (c->held_gpu && c->held_gpu != c->gpu))
                return;
        c->held_gpu = c->gpu;
        c->doorbell_holds++;
        gpu_context_hold_doorbells(c->gpu);
}

void context_release_doorbells(Context *c) {
        if (!c || !c->held_gpu || c->doorbell_holds == 0)
                return;
        /* An incarnation that went meanwhile took its held jobs with it. */
        if (c->held_gpu == c->gpu)
                gpu_context_release_doorbells(c->gpu);
        if (--c->doorbell_holds == 0)
                c->held_gpu = NULL;
}

void context_catch_up(Context *c) {
        if (!c || !c->gpu || c->inflight == 0)
                return;
        context_ref(c);
        collect(c);
        context_unref(c);
}

int context_adopt(Context *c, GpuContext *gpu, uint64_t bring_up_ns) {
        int r;

        r = sd_event_add_io(c->pool->event, &c->wake, gpu_context_get_wake_fd(gpu), EPOLLIN, on_wake, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->wake, c->device ? "gpu-device-context" : "gpu-client-context");
        c->gpu = gpu;
        c->inflight = 0;
        c->losing_told = false;
        memset(c->express_queue, 0, sizeof c->express_queue);
        c->created_ns = now_ns();
        c->bring_up_ns = bring_up_ns;
        c->last_used_ns = c->created_ns;
        c->incarnations++;
        return 0;
}

void context_adopt_worker(Context *c, WorkerLink *w) {
        c->worker = w;
        c->inflight = 0;
        c->losing_told = false;
        c->created_ns = now_ns();
        c->bring_up_ns = 0; /* the worker says, when it is up */
        c->last_used_ns = c->created_ns;
        c->incarnations++;
}

void context_drop(Context *c, bool lost, const char *reason) {
        ContextPool *p = c->pool;

        if (!context_live(c))
                return;
        if (c->device) {
                /* The device context is never given up: a lost one stays,
                 * refusing work, until the daemon goes (shared mode). Its
                 * loss is reported once. */
                if (!lost || c->losses > 0)
                        return;
                c->losses++;
                if (p && p->cb.gone)
                        p->cb.gone(c, true, reason, p->cb.userdata);
                return;
        }
        if (lost)
                c->losses++;
        if (lost)
                log_warning("GPU context %" PRIu64 " (%s) lost: %s", c->id, c->key, reason);
        else
                log_debug("GPU context %" PRIu64 " (%s) reclaimed: %s", c->id, c->key, reason);
        incarnation_free(c);
        if (p && p->cb.gone)
                p->cb.gone(c, lost, reason, p->cb.userdata);
}

int context_ensure(Context *c, char *err, size_t errlen) {
        if (context_live(c)) {
                if (c->pool)
                        context_pool_touch(c->pool, c);
                return 0;
        }
        if (!c->pool || c->device) {
                snprintf(err, errlen, "the device's GPU context is gone");
                return -ENODEV;
        }
        if (c->kfd_process) {
                snprintf(err, errlen, "the GPU context in this program's KFD process is gone (lost, or the "
                                      "process ended)");
                return -ENODEV;
        }
        return context_pool_bring_up(c->pool, c, err, errlen);
}

/* What one more queue of engine costs a client context (context-pool.c
 * brings them up with these sizes, here and in workers). */
static uint64_t queue_bytes(const Context *c, GpuEngine engine) {
        return gpu_queue_own_bytes(context_pool_device_gpu(c->pool), engine, CLIENT_RING_SIZE, CLIENT_MAX_INFLIGHT);
}

/* gpu_context_add_queue(), charged first; err (if not NULL) set on -EDQUOT. */
static int add_queue(Context *c, GpuEngine engine, uint32_t priority, unsigned *ret_index, char *err,
                     size_t errlen) {
        char why[256];
        uint64_t bytes = c->device ? 0 : queue_bytes(c, engine);
        int r;

        r = context_charge(c, bytes, engine == GPU_ENGINE_COMPUTE ? "a compute queue" : "an SDMA queue", why,
                           sizeof why);
        if (r < 0) {
                if (err)
                        snprintf(err, errlen, "%s", why);
                return r;
        }
        r = gpu_context_add_queue(c->gpu, engine, priority, ret_index);
        if (r < 0)
                context_uncharge(c, bytes);
        return r;
}

/* Charges the larger scratch backing a dispatch on queue will allocate. */
static int charge_scratch(Context *c, unsigned queue, const GpuJob *job, char *err, size_t errlen) {
        uint32_t wave;
        uint64_t bytes;
        int r;

        if (c->device || !c->pool || (job->type != GPU_JOB_DISPATCH && job->type != GPU_JOB_AQL) ||
            queue >= GPU_MAX_QUEUES)
                return 0;
        bytes = gpu_dispatch_scratch_bytes(context_pool_device_gpu(c->pool), job, &wave);
        if (wave <= c->scratch_wave[queue])
                return 0;
        /* The old backing goes once the jobs programmed with it retire. */
        if (bytes > c->scratch_bytes[queue]) {
                r = context_charge(c, bytes - c->scratch_bytes[queue], "scratch", err, errlen);
                if (r < 0)
                        return r;
                c->scratch_bytes[queue] = bytes;
        }
        c->scratch_wave[queue] = wave;
        return 0;
}

static bool is_express_queue(const Context *c, unsigned index) {
        for (unsigned p = 0; p < ELEMENTSOF(c->express_queue); p++)
                if (c->express_queue[p] == index + 1)
                        return true;
        return false;
}

int context_get_queue(Context *c, GpuEngine engine, uint32_t priority, bool express, unsigned *ret_index,
                      uint32_t *ret_priority, bool *ret_express, char *err, size_t errlen) {
        const GpuDeviceInfo *info;
        int fallback = -1, r;

        *ret_express = false;
        r = context_ensure(c, err, errlen);
        if (r < 0)
                return r;
        if (c->worker) {
                r = worker_link_find_queue(c->worker, engine, priority, ret_index, ret_priority, err, errlen);
                if (r != -ENOENT)
                        return r;
                r = context_charge(c, queue_bytes(c, engine), "a compute queue", err, errlen);
                if (r < 0)
                        return r;
                r = worker_link_add_queue(c->worker, priority, ret_index, err, errlen);
                if (r < 0) {
                        context_uncharge(c, queue_bytes(c, engine));
                        return r;
                }
                *ret_priority = priority;
                return 0;
        }
        if (express && engine == GPU_ENGINE_COMPUTE && c->users > 1 && priority < ELEMENTSOF(c->express_queue)) {
                unsigned index;

                if (c->express_queue[priority] > 0) {
                        *ret_index = c->express_queue[priority] - 1;
                        *ret_priority = priority;
                        *ret_express = true;
                        return 0;
                }
                /* Made after the ordinary queue, so that the search below
                 * never meets it first. */
                r = context_get_queue(c, engine, priority, false, &index, ret_priority, ret_express, err, errlen);
                if (r < 0 || *ret_priority != priority)
                        return r;
                if (add_queue(c, engine, priority, &index, NULL, 0) >= 0) {
                        c->express_queue[priority] = index + 1;
                        *ret_index = index;
                        *ret_express = true;
                        return 0;
                }
                *ret_index = index; /* no room for it: the ordinary queue */
                return 0;
        }
        info = gpu_context_get_info(c->gpu);
        for (unsigned i = 0; i < info->n_queues; i++) {
                if (info->queue_engine[i] != engine || is_express_queue(c, i))
                        continue;
                if (engine == GPU_ENGINE_SDMA || info->queue_priority[i] == priority) {
                        *ret_index = i;
                        *ret_priority = info->queue_priority[i];
                        return 0;
                }
                if (fallback < 0)
                        fallback = (int) i;
        }
        r = add_queue(c, engine, priority, ret_index, err, errlen);
        if (r >= 0) {
                *ret_priority = priority;
                return 0;
        }
        if (r == -EDQUOT)
                return r;
        if (fallback >= 0 && r == -ENOSPC) {
                *ret_index = (unsigned) fallback;
                *ret_priority = info->queue_priority[fallback];
                return 0;
        }
        snprintf(err, errlen, "cannot create a %s queue in GPU context %" PRIu64 ": %s",
                 engine == GPU_ENGINE_COMPUTE ? "compute" : "SDMA", c->id, strerror(-r));
        return r;
}

static void put_le64(uint8_t *dst, uint64_t v) {
        for (unsigned i = 0; i < 8; i++)
                dst[i] = (uint8_t) (v >> (8 * i));
}

int context_submit(Context *c, unsigned queue, GpuJob *job, GpuCodeObject *code, const ContextReloc *relocs,
                   unsigned n_relocs, uint64_t *ret_seq, char *err, size_t errlen) {
        int r;

        if (!context_live(c)) {
                snprintf(err, errlen, "GPU context %" PRIu64 " is gone", c->id);
                return -ENODEV;
        }
        r = charge_scratch(c, queue, job, err, errlen);
        if (r < 0)
                return r;
        if (c->worker) {
                r = worker_link_submit(c->worker, queue, job, code, relocs, n_relocs, ret_seq, err, errlen);
                if (r < 0)
                        return r;
                c->inflight++;
                c->last_used_ns = context_now_ns(c);
                return 0;
        }
        if (job->type == GPU_JOB_DISPATCH) {
                GpuCodeObject *here;
                uint8_t *args = (uint8_t *) job->dispatch.args_data;

                r = gpu_code_object_load_in(code, c->gpu, &here, err, errlen);
                if (r < 0)
                        return r;
                job->dispatch.co = here;
                for (unsigned i = 0; i < n_relocs; i++) {
                        GpuBuffer *b;

                        if (!args || relocs[i].arg_offset + 8 > job->dispatch.args_size)
                                return -EINVAL;
                        r = gpu_buffer_map_in(relocs[i].buffer, c->gpu, &b);
                        if (r < 0) {
                                snprintf(err, errlen, "mapping a buffer into GPU context %" PRIu64 " failed: %s",
                                         c->id, strerror(-r));
                                return r;
                        }
                        put_le64(args + relocs[i].arg_offset, gpu_buffer_get_va(b) + relocs[i].offset);
                }
        }
        r = gpu_queue_submit(c->gpu, queue, job, ret_seq);
        if (r < 0) {
                if (r != -EAGAIN)
                        snprintf(err, errlen, "%s", strerror(-r));
                return r;
        }
        c->inflight++;
        c->last_used_ns = context_now_ns(c);
        return 0;
}

int context_relay(Context *c, unsigned device_queue, GpuBuffer **ret_hold, uint64_t *ret_write_va,
                  uint64_t *ret_wait_va, uint32_t *ret_value) {
        int r;

        if (!context_live(c) || c->device || !c->pool || device_queue >= GPU_MAX_QUEUES)
                return -ENODEV;
        if (c->worker)
                return worker_link_relay(c->worker, device_queue, ret_hold, ret_write_va, ret_wait_va, ret_value);
        if (!c->relay) {
                GpuBuffer *b, *shadow;

                r = gpu_buffer_new(c->gpu, 4096, GPU_PLACEMENT_GTT, false, &b);
                if (r < 0)
                        return r;
                r = gpu_buffer_map_in(b, context_pool_device_gpu(c->pool), &shadow);
                if (r < 0) {
                        gpu_buffer_unref(b);
                        return r;
                }
                c->relay = b;
                c->relay_device = shadow;
        }
        /* Values only grow, each slot written by one queue in its order; a
         * wait compares >=, so the slot is retired before it wraps. */
        if (c->relay_values[device_queue] >= UINT32_MAX / 2)
                return -ERANGE;
        *ret_value = ++c->relay_values[device_queue];
        *ret_write_va = gpu_buffer_get_va(c->relay_device) + 4ull * device_queue;
        *ret_wait_va = gpu_buffer_get_va(c->relay) + 4ull * device_queue;
        *ret_hold = gpu_buffer_ref(c->relay);
        return 0;
}

int context_abort(Context *c, unsigned queue, uint64_t seq, int error) {
        if (c->worker)
                return worker_link_abort(c->worker, queue, seq, error);
        if (!c->gpu)
                return 0;
        return gpu_queue_abort(c->gpu, queue, seq, error, on_completion, c);
}
