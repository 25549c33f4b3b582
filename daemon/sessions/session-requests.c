/* SPDX-License-Identifier: MIT */
/*
 * The request handlers of a Session: each resolves handles inside the calling
 * session only, checks limits, acts, and replies. Errors name what was wrong.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sessions/client-event.h"
#include "config.h"
#include "sessions/job.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

/* What Hello announces; "compute" only where the device has a compute queue. */
static const char *const features[] = {
        "sdma-copy", "sdma-fill", "events", "session-page", "dma-buf-import", "resume", "submit-ring", "free-no-reply",
        "fence-page", "lazy-session", "alloc-free-first", "gpu-per-job", NULL,
};
static const char *const features_compute[] = {
        "sdma-copy", "sdma-fill", "events", "session-page", "dma-buf-import", "resume", "submit-ring", "free-no-reply",
        "fence-page", "lazy-session", "alloc-free-first", "gpu-per-job", "compute", NULL,
};

const char *session_handle_kind(uint64_t handle) {
        switch (handle_tag(handle)) {
        case HANDLE_TAG_BUFFER:
                return "a buffer handle";
        case HANDLE_TAG_EVENT:
                return "an event handle";
        case HANDLE_TAG_CODE_OBJECT:
                return "a code object handle";
        default:
                return "not a handle of this session";
        }
}

GpuBuffer *session_lookup_buffer(Session *s, uint64_t id, const char *field, uint64_t handle) {
        SessionBuffer *b = handle_table_get(&s->buffers, handle);

        if (!b) {
                session_send_error(s, id, ENOENT, "%s: no buffer 0x%" PRIx64 " in this session (%s)",
                                   field, handle, session_handle_kind(handle));
                return NULL;
        }
        return b->gpu;
}

static ClientEvent *lookup_event(Session *s, uint64_t id, const char *field, uint64_t handle) {
        ClientEvent *e = handle_table_get(&s->events, handle);

        if (!e)
                session_send_error(s, id, ENOENT, "%s: no event 0x%" PRIx64 " in this session (%s)",
                                   field, handle, session_handle_kind(handle));
        return e;
}

static void reply_empty(Session *s, uint64_t id) {
        session_send(s, &(WireReply) { .id = id, .type = WIRE_REPLY_EMPTY }, NULL, 0);
}

static void handle_hello(Session *s, const WireRequest *req) {
        /* Bits of a newer client that this daemon does not know are left
         * alone: the features of the reply say what it took. */
        bool lazy = req->hello.features & WIRE_HELLO_FEATURE_LAZY_SESSION;

        if (s->hello_done) {
                session_send_error(s, req->id, EPROTO, "Hello was already sent on this connection");
                return;
        }
        if (req->hello.protocol_version != WIRE_PROTOCOL_VERSION) {
                session_send_error(s, req->id, EPROTONOSUPPORT,
                                   "hello.protocol_version: %u is not supported (this daemon speaks %u)",
                                   req->hello.protocol_version, WIRE_PROTOCOL_VERSION);
                return;
        }
        if (req->hello.has_gpu) {
                SessionGpu *g = session_gpu_ref(s, req->id, "hello.gpu", true, req->hello.gpu);

                if (!g)
                        return;
                int r = session_use_gpu(s, g);
                if (r < 0) { /* nothing is held before Hello: a bug if so */
                        session_send_error(s, req->id, -r, "hello.gpu: cannot move the session to GPU %u",
                                           g->index);
                        return;
                }
                s->gpu_named = true;
        }
        if (s->pinned_gpu >= 0 && (unsigned) s->pinned_gpu >= s->set->n_gpus) {
                session_send_error(s, req->id, ENODEV,
                                   "this connection came through GPU %d's socket, but this daemon serves %u GPU%s",
                                   s->pinned_gpu, s->set->n_gpus, s->set->n_gpus == 1 ? "" : "s");
                return;
        }
        if (!session_may_use_gpu(s, s->gpu)) {
                char devices[200];

                session_send_error(s, req->id, EACCES,
                                   "no GPU this session may use: policy Devices=%s (from %s) names none of the %u "
                                   "GPUs this daemon serves",
                                   policy_limit_format(POLICY_LIMIT_DEVICES, &s->policy, devices, sizeof devices),
                                   s->policy_matched ?: "the defaults", s->set->n_gpus);
                return;
        }
        if (s->gpu->unavailable) {
                /* A reconnect after its GPU's recovery began comes back
                 * here until the GPU is served again (EAGAIN: try again). */
                session_send_error(s, req->id, EAGAIN, "GPU %u is being brought back: %s; try again in a moment",
                                   s->gpu->index, s->gpu->unavailable);
                return;
        }
        if (req->hello.resume_fence > 0)
                s->last_fence = s->completed_fence = req->hello.resume_fence;
        session_page_set_fences(&s->page, s->completed_fence, s->last_fence);
        /* A lazy session gets its page at OpenSessionPage; anyone else now,
         * as ever. */
        if (!lazy && session_page_make(s, req->id, "Hello", false) < 0) {
                s->last_fence = s->completed_fence = 0;
                session_page_set_fences(&s->page, 0, 0);
                return;
        }
        memcpy(s->client_name, req->hello.client_name, sizeof(s->client_name));
        s->hello_done = true;
        s->lazy = lazy;
        if (req->hello.resume_fence > 0) {
                /* A client back after a restart: its fences go on from where
                 * they were (docs/protocol.md "When the daemon restarts"). */
                LogFields extra = {};

                log_fields_add(&extra, "KFDBROKER_RESUME_FENCE=%" PRIu64, s->last_fence);
                session_log_struct(s, LOG_INFO, 0, KFDBROKER_MESSAGE_SESSION_RESUMED, &extra,
                                   "Session %" PRIu64 ": \"%s\" resumes after a daemon restart (fences after %" PRIu64 ")",
                                   s->id, s->client_name, s->last_fence);
        }
        /* Connections that never say Hello are not sessions of the identity. */
        s->account->sessions_now++;
        s->account->sessions_total++;
        log_debug("Session %" PRIu64 ": hello from \"%s\"%s", s->id, s->client_name, lazy ? " (lazy session)" : "");
        session_send(s, &(WireReply) {
                             .id = req->id,
                             .type = WIRE_REPLY_HELLO,
                             .hello = { .protocol_version = WIRE_PROTOCOL_VERSION,
                                        .daemon_version = KFDBROKER_VERSION,
                                        .features = session_has_compute(s->gpu) ? features_compute : features,
                                        .limits = s->limits,
                                        .session_id = s->id,
                                        .session_page_size = lazy ? 0 : (uint32_t) KFDB_PAGE_SIZE,
                                        .gpu = s->gpu->index,
                                        .gpu_count = s->set->n_gpus },
                     },
                     lazy ? NULL : (int[]) { s->page.memfd, s->page.eventfd }, lazy ? 0 : 2);
        if (!lazy)
                session_page_handed_out(s);
}

static void handle_device_info(Session *s, const WireRequest *req) {
        const GpuDeviceInfo *i = s->gpu->info;
        unsigned sdma = 0, compute = 0;

        /* The ordinary ones: the express SDMA queue is the scheduler's. */
        if (s->gpu->scheduler)
                sdma = scheduler_sdma_queues(s->gpu->scheduler);
        else
                for (unsigned q = 0; q < i->n_queues; q++)
                        sdma += i->queue_engine[q] == GPU_ENGINE_SDMA;
        /* Compute queues are made per GPU context when it first dispatches:
         * say how many the device offers a context (KFD's num_cp_queues). */
        compute = i->num_cp_queues;
        session_send(s, &(WireReply) {
                             .id = req->id,
                             .type = WIRE_REPLY_DEVICE_INFO,
                             .device_info = { .backend = i->backend, .gfx_name = i->gfx_name,
                                              .name = i->name, .gpu_id = i->gpu_id,
                                              .vendor_id = i->vendor_id, .device_id = i->device_id,
                                              .cu_count = i->cu_count, .vram_size = i->vram_size,
                                              .kfd_major = i->kfd_major, .kfd_minor = i->kfd_minor,
                                              .sdma_queues = sdma,
                                              .compute_queues = compute,
                                              .node = s->gpu->node,
                                              .node_reason = s->gpu->node_reason,
                                              .gpu_index = s->gpu->index,
                                              .gpu_count = s->set->n_gpus },
                     },
                     NULL, 0);
}

/* A buffer add_buffer() could not store: a pooled one (pooled) keeps its
 * charge under the rule for freed exported buffers, as if freed again. */
static void drop_new_buffer(Session *s, GpuBuffer *b, GpuPlacement placement, bool pooled) {
        SessionBuffer sb = { .gpu = b, .placement = placement, .exported = true };

        if (pooled)
                session_release_buffer(s, &sb);
        else
                gpu_buffer_unref(b);
}

/* Stores b in the table and replies with handle (+ a dma-buf fd when export).
 * pooled: b came from the session's pool, charged already. */
static void add_buffer(Session *s, uint64_t id, GpuBuffer *b, unsigned gpu, GpuPlacement placement,
                       WireReplyType type, bool export, bool pooled) {
        uint64_t size = gpu_buffer_get_size(b), handle;
        _cleanup_close_ int fd = -EBADF;
        SessionBuffer *sb;
        int r;

        if (export) {
                r = gpu_buffer_export(b, &fd);
                if (r < 0) {
                        drop_new_buffer(s, b, placement, pooled);
                        session_send_error(s, id, -r, "exporting the buffer as a dma-buf failed: %s",
                                           strerror(-r));
                        return;
                }
        }
        if (!(pooled ? session_check_handle_count(s, id) : session_check_object_count(s, id))) {
                drop_new_buffer(s, b, placement, pooled);
                return;
        }
        sb = calloc(1, sizeof(*sb));
        if (!sb) {
                drop_new_buffer(s, b, placement, pooled);
                session_send_error(s, id, ENOMEM, "out of memory");
                return;
        }
        *sb = (SessionBuffer) { .gpu = b, .gpu_index = gpu, .placement = placement, .imported = !export,
                                .exported = export };
        r = handle_table_add(&s->buffers, sb, &handle, NULL);
        if (r >= 0)
                gpu_buffer_set_tag(b, handle); /* what a fault there is told as */
        if (r < 0) {
                free(sb);
                drop_new_buffer(s, b, placement, pooled);
                if (r == -EDQUOT)
                        session_send_error(s, id, EDQUOT, "buffer count limit (max_buffers %u, policy Buffers=) reached",
                                           s->limits.max_buffers);
                else
                        session_send_error(s, id, -r, "cannot store the buffer: %s", strerror(-r));
                return;
        }
        if (!pooled) {
                session_account_buffer(s, gpu, placement, (int64_t) size);
                session_account_object(s, +1);
        }
        session_send(s, &(WireReply) { .id = id, .type = type,
                                       .buffer = { .handle = handle, .size = size, .gpu = gpu } },
                     export ? &fd : NULL, export ? 1 : 0);
}

static void handle_free_buffer(Session *s, const WireRequest *req);

/* AllocBuffer's free_first: the FreeBuffer a client sent in the same
 * datagram, handled as if it had come just before, with no_reply set (an
 * error is answered with its own id): the pool then holds its memory for
 * this allocation, and the daemon is woken once for the pair. */
static void handle_free_first(Session *s, const WireRequest *req) {
        WireRequest f = {
                .id = req->alloc_buffer.free_first_id,
                .type = WIRE_REQUEST_FREE_BUFFER,
                .object = { .handle = req->alloc_buffer.free_first_handle,
                            .no_reply = true,
                            .no_copy_kept = req->alloc_buffer.free_first_no_copy_kept },
        };

        handle_free_buffer(s, &f);
}

static void handle_alloc_buffer(Session *s, const WireRequest *req) {
        uint64_t size = align_up_u64(req->alloc_buffer.size, PAGE_SIZE_4K);
        GpuPlacement placement;
        SessionGpu *g;
        GpuBuffer *b;
        int r;

        if (req->alloc_buffer.free_first_id != 0)
                handle_free_first(s, req);
        g = session_gpu_ref(s, req->id, "alloc_buffer.gpu", req->alloc_buffer.has_gpu, req->alloc_buffer.gpu);
        if (!g)
                return;
        if (size == 0) {
                session_send_error(s, req->id, EINVAL, "alloc_buffer.size: %" PRIu64 " is too large",
                                   req->alloc_buffer.size);
                return;
        }
        placement = req->alloc_buffer.placement == WIRE_PLACEMENT_VRAM ? GPU_PLACEMENT_VRAM
                                                                        : GPU_PLACEMENT_GTT;
        /* One the session freed, zeroed: charged already, and its fds
         * counted (session-pool.c); the reply's dma-buf fd is not. */
        b = size <= s->limits.max_buffer_size && g == s->gpu ? session_pool_take(s, size, placement) : NULL;
        if (b) {
                if (!session_check_fds(s, req->id, 1, "AllocBuffer")) {
                        drop_new_buffer(s, b, placement, true);
                        return;
                }
                add_buffer(s, req->id, b, g->index, placement, WIRE_REPLY_ALLOC_BUFFER, true, true);
                return;
        }
        if (!session_check_memory_quota(s, req->id, g->index, size) ||
            !session_check_fds(s, req->id, session_buffer_fds(s) + 1, "AllocBuffer"))
                return;
        /* The session uses g from now on (status, Devices= at a reload). */
        r = session_on_gpu(s, g) ? gpu_buffer_new(context_pool_device_gpu(g->contexts), size, placement, false, &b)
                                 : -ENOMEM;
        if (r < 0) {
                session_send_error(s, req->id, -r, "allocating %" PRIu64 " bytes of %s on GPU %u failed: %s",
                                   size, req->alloc_buffer.placement == WIRE_PLACEMENT_VRAM ? "VRAM" : "GTT",
                                   g->index, strerror(-r));
                return;
        }
        add_buffer(s, req->id, b, g->index, placement, WIRE_REPLY_ALLOC_BUFFER, true, false);
}

static void handle_import_buffer(Session *s, const WireRequest *req, int fd) {
        GpuBuffer *b;
        int r;

        if (!session_check_fds(s, req->id, session_buffer_fds(s), "ImportBuffer"))
                return;
        r = gpu_buffer_import(context_pool_device_gpu(s->gpu->contexts), fd, &b);
        if (r == -EINVAL && s->gpu->info->kfd_minor < 15)
                session_send_error(s, req->id, EINVAL,
                                   "import_buffer: the file descriptor is not a dma-buf of this GPU (this kernel's "
                                   "KFD %" PRIu32 ".%" PRIu32 " imports no dma-buf of another driver; KFD 1.15, "
                                   "Linux 6.8, does)",
                                   s->gpu->info->kfd_major, s->gpu->info->kfd_minor);
        else if (r == -EINVAL)
                session_send_error(s, req->id, EINVAL,
                                   "import_buffer: the file descriptor is not a dma-buf this GPU can import");
        else if (r < 0)
                session_send_error(s, req->id, -r, "import_buffer: importing the dma-buf failed: %s", strerror(-r));
        if (r < 0)
                return;
        if (!session_check_memory_quota(s, req->id, s->gpu->index, gpu_buffer_get_size(b))) {
                gpu_buffer_unref(b);
                return;
        }
        /* Shared memory: counted as GTT for the importer (the exporter chose). */
        add_buffer(s, req->id, b, s->gpu->index, GPU_PLACEMENT_GTT, WIRE_REPLY_IMPORT_BUFFER, false, false);
}

static void handle_free_buffer(Session *s, const WireRequest *req) {
        SessionBuffer *b;

        if (!session_lookup_buffer(s, req->id, "free_buffer.handle", req->object.handle))
                return;
        b = handle_table_remove(&s->buffers, req->object.handle);
        if (!req->object.no_copy_kept || !session_pool_put(s, b))
                session_release_buffer(s, b);
        free(b);
        /* An error is still answered (above); success, if asked, is not. */
        if (!req->object.no_reply)
                reply_empty(s, req->id);
}

static void handle_export_buffer(Session *s, const WireRequest *req) {
        GpuBuffer *b = session_lookup_buffer(s, req->id, "export_buffer.handle", req->object.handle);
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (!b || !session_check_fds(s, req->id, 1, "ExportBuffer"))
                return;
        SessionBuffer *sb = handle_table_get(&s->buffers, req->object.handle);
        sb->exported = sb->exported_again = true;
        r = gpu_buffer_export(b, &fd);
        if (r < 0) {
                session_send_error(s, req->id, -r, "exporting the buffer failed: %s", strerror(-r));
                return;
        }
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_EXPORT_BUFFER,
                                       .buffer = { .size = gpu_buffer_get_size(b) } },
                     &fd, 1);
}

static void handle_create_event(Session *s, const WireRequest *req) {
        ClientEvent *e = client_event_new(s, req->create_event.auto_reset);
        uint32_t slot;
        int r;

        if (!e) {
                session_send_error(s, req->id, ENOMEM, "out of memory creating an event");
                return;
        }
        r = handle_table_add(&s->events, e, &e->handle, &slot);
        if (r < 0) {
                client_event_unref(e);
                if (r == -EDQUOT)
                        session_send_error(s, req->id, EDQUOT, "event count limit (max_events %u, policy Events=) reached",
                                           s->events.max);
                else
                        session_send_error(s, req->id, -r, "cannot store the event: %s", strerror(-r));
                return;
        }
        e->slot = slot;
        session_page_set_event(&s->page, slot, e->age, false, true);
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_CREATE_EVENT,
                                       .create_event = { .handle = e->handle, .slot = slot } },
                     NULL, 0);
}

static void handle_event_op(Session *s, const WireRequest *req) {
        const char *field = req->type == WIRE_REQUEST_DESTROY_EVENT ? "destroy_event.handle"
                            : req->type == WIRE_REQUEST_SET_EVENT   ? "set_event.handle"
                                                                    : "reset_event.handle";
        ClientEvent *e = lookup_event(s, req->id, field, req->object.handle);

        if (!e)
                return;
        switch (req->type) {
        case WIRE_REQUEST_DESTROY_EVENT:
                handle_table_remove(&s->events, req->object.handle);
                client_event_destroy(e);
                client_event_unref(e);
                break;
        case WIRE_REQUEST_SET_EVENT:
                client_event_signal(e, false);
                break;
        default:
                client_event_reset(e);
                break;
        }
        reply_empty(s, req->id);
        /* A set or a destroy can release a held wait-event job, on any GPU. */
        session_set_run_schedulers(s->set);
}

static void handle_wait_events(Session *s, const WireRequest *req) {
        size_t n = req->wait_events.n_entries;
        _cleanup_free_ ClientEvent **events = NULL;
        char field[64];
        int r;

        if (n > s->limits.max_wait_events) {
                session_send_error(s, req->id, EINVAL,
                                   "wait_events.events: %zu entries exceed the limit of %u", n,
                                   s->limits.max_wait_events);
                return;
        }
        if (s->n_waits >= s->limits.max_pending_waits) {
                session_send_error(s, req->id, EDQUOT,
                                   "pending wait limit (max_pending_waits %u) reached: let a WaitEvents complete or time out first",
                                   s->limits.max_pending_waits);
                return;
        }
        events = calloc(n, sizeof(*events));
        if (!events) {
                session_send_error(s, req->id, ENOMEM, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++) {
                snprintf(field, sizeof(field), "wait_events.events[%zu].handle", i);
                events[i] = lookup_event(s, req->id, field, req->wait_events.entries[i].handle);
                if (!events[i])
                        return;
        }
        r = event_wait_start(s, req->id, events, req->wait_events.entries, n,
                             req->wait_events.wait_all, req->wait_events.timeout_ms);
        if (r < 0)
                session_send_error(s, req->id, -r, "cannot start the wait: %s", strerror(-r));
}

/* Resolves and checks one job; on error replies and returns NULL. */
static Job *build_job(Session *s, uint64_t id, const WireJob *wj, size_t idx, uint64_t fence) {
        SessionGpu *g = s->gpu;
        char field[80];
        Job *j;

        if (wj->has_gpu) {
                snprintf(field, sizeof(field), "submit.jobs[%zu].gpu", idx);
                g = session_gpu_ref(s, id, field, true, wj->gpu);
                if (!g)
                        return NULL;
        }
        j = job_new(s, fence, wj->type);
        if (!j || !(j->on = session_on_gpu(s, g))) {
                job_free(j);
                session_send_error(s, id, ENOMEM, "out of memory");
                return NULL;
        }
        /* An event job left on ENGINE_AUTO follows its neighbour's GPU too,
         * unless it names one (resolve_auto_engines()). */
        j->gpu_auto = !wj->has_gpu;
        j->sched.timeout_ns = s->policy.job_timeout_ns == POLICY_INFINITY ? UINT64_MAX : s->policy.job_timeout_ns;
        switch (wj->type) {
        case WIRE_JOB_COPY: {
                GpuBuffer *src, *dst, *src_seen, *dst_seen;

                /* Either may be on another GPU: the job's GPU reaches it through an import. */
                src = session_job_buffer(s, id, idx, "copy.src_handle", wj->copy.src_handle, j->on, &src_seen);
                if (!src)
                        return job_free(j);
                dst = session_job_buffer(s, id, idx, "copy.dst_handle", wj->copy.dst_handle, j->on, &dst_seen);
                if (!dst)
                        return job_free(j);
                if (!range_in_bounds(wj->copy.src_offset, wj->copy.size, gpu_buffer_get_size(src))) {
                        session_send_error(s, id, ERANGE,
                                           "submit.jobs[%zu].copy: source range offset %" PRIu64 " + size %" PRIu64 " is outside the %" PRIu64 "-byte buffer",
                                           idx, wj->copy.src_offset, wj->copy.size, gpu_buffer_get_size(src));
                        return job_free(j);
                }
                if (!range_in_bounds(wj->copy.dst_offset, wj->copy.size, gpu_buffer_get_size(dst))) {
                        session_send_error(s, id, ERANGE,
                                           "submit.jobs[%zu].copy: destination range offset %" PRIu64 " + size %" PRIu64 " is outside the %" PRIu64 "-byte buffer",
                                           idx, wj->copy.dst_offset, wj->copy.size, gpu_buffer_get_size(dst));
                        return job_free(j);
                }
                if (src == dst && wj->copy.src_offset < wj->copy.dst_offset + wj->copy.size &&
                    wj->copy.dst_offset < wj->copy.src_offset + wj->copy.size) {
                        session_send_error(s, id, EINVAL,
                                           "submit.jobs[%zu].copy: source and destination ranges overlap",
                                           idx);
                        return job_free(j);
                }
                j->src = gpu_buffer_ref(src);
                j->dst = gpu_buffer_ref(dst);
                j->sched.gpu.type = GPU_JOB_COPY;
                j->sched.gpu.copy.src_va = gpu_buffer_get_va(src_seen) + wj->copy.src_offset;
                j->sched.gpu.copy.dst_va = gpu_buffer_get_va(dst_seen) + wj->copy.dst_offset;
                j->sched.gpu.copy.size = wj->copy.size;
                break;
        }
        case WIRE_JOB_FILL: {
                GpuBuffer *dst;

                dst = session_job_buffer(s, id, idx, "fill.dst_handle", wj->fill.dst_handle, j->on, NULL);
                if (!dst)
                        return job_free(j);
                if (!range_in_bounds(wj->fill.dst_offset, wj->fill.size, gpu_buffer_get_size(dst))) {
                        session_send_error(s, id, ERANGE,
                                           "submit.jobs[%zu].fill: range offset %" PRIu64 " + size %" PRIu64 " is outside the %" PRIu64 "-byte buffer",
                                           idx, wj->fill.dst_offset, wj->fill.size, gpu_buffer_get_size(dst));
                        return job_free(j);
                }
                j->dst = gpu_buffer_ref(dst);
                j->sched.gpu.type = GPU_JOB_FILL;
                j->sched.gpu.fill.dst_va = gpu_buffer_get_va(dst) + wj->fill.dst_offset;
                j->sched.gpu.fill.size = wj->fill.size;
                j->sched.gpu.fill.pattern = wj->fill.pattern;
                break;
        }
        case WIRE_JOB_SIGNAL_EVENT:
        case WIRE_JOB_WAIT_EVENT: {
                ClientEvent *e;

                snprintf(field, sizeof(field), "submit.jobs[%zu].%s.handle", idx,
                         wj->type == WIRE_JOB_SIGNAL_EVENT ? "signal_event" : "wait_event");
                e = lookup_event(s, id, field, wj->event.handle);
                if (!e)
                        return job_free(j);
                j->event = client_event_ref(e);
                j->sched.event = &e->sched;
                j->sched.gpu.type = GPU_JOB_NOP;
                switch (wj->event.engine) {
                case WIRE_ENGINE_AUTO:
                        j->engine_auto = true;
                        break;
                case WIRE_ENGINE_SDMA:
                        j->sched.engine = GPU_ENGINE_SDMA;
                        break;
                case WIRE_ENGINE_COMPUTE: {
                        Context *ctx;

                        snprintf(field, sizeof(field), "submit.jobs[%zu].%s.engine", idx,
                                 wj->type == WIRE_JOB_SIGNAL_EVENT ? "signal_event" : "wait_event");
                        if (!session_has_compute(j->on->gpu)) {
                                session_send_error(s, id, EOPNOTSUPP, "%s: GPU %u has no compute queue", field,
                                                   j->on->gpu->index);
                                return job_free(j);
                        }
                        if (session_compute_context(j->on, id, field, &ctx) < 0)
                                return job_free(j);
                        j->sched.engine = GPU_ENGINE_COMPUTE;
                        break;
                }
                }
                break;
        }
        case WIRE_JOB_DISPATCH:
                if (session_build_dispatch(s, id, wj, idx, j) < 0)
                        return job_free(j);
                break;
        }
        return j;
}

/* The job's engine if it is decided: not an event job left on ENGINE_AUTO. */
static bool engine_known(Job *const *jobs, size_t n, size_t i, const bool *resolved) {
        return i < n && (!jobs[i]->engine_auto || resolved[i]);
}

/* An event job on ENGINE_AUTO takes the engine of the job it goes with,
 * and its GPU unless it named one (Job.gpu): a signal after a copy on GPU
 * 1 says when that copy is done. */
static void follow(Job *j, const Job *neighbour) {
        j->sched.engine = neighbour->sched.engine;
        if (j->gpu_auto)
                j->on = neighbour->on;
}

/*
 * ENGINE_AUTO (proto Engine): a signal goes on the engine of the job before
 * it in the batch — the work it signals the end of — and a wait on the engine
 * of the job after it — the work it holds; SDMA when there is no such job.
 * Chains of event jobs resolve through each other (signals front to back,
 * waits back to front, then signals once more for those that followed an
 * AUTO wait); whatever is still open (a wait and a signal pointing at each
 * other) goes on SDMA.
 */
static int resolve_auto_engines(Job **jobs, size_t n) {
        _cleanup_free_ bool *resolved = calloc(MAX(n, (size_t) 1), sizeof(bool));

        if (!resolved)
                return -ENOMEM;
        for (unsigned pass = 0; pass < 2; pass++) {
                for (size_t i = 0; i < n; i++)
                        if (jobs[i]->engine_auto && !resolved[i] && jobs[i]->type == WIRE_JOB_SIGNAL_EVENT &&
                            i > 0 && engine_known(jobs, n, i - 1, resolved)) {
                                follow(jobs[i], jobs[i - 1]);
                                resolved[i] = true;
                        }
                for (size_t i = n; i-- > 0;)
                        if (jobs[i]->engine_auto && !resolved[i] && jobs[i]->type == WIRE_JOB_WAIT_EVENT &&
                            engine_known(jobs, n, i + 1, resolved)) {
                                follow(jobs[i], jobs[i + 1]);
                                resolved[i] = true;
                        }
        }
        for (size_t i = 0; i < n; i++)
                if (jobs[i]->engine_auto && !resolved[i])
                        jobs[i]->sched.engine = GPU_ENGINE_SDMA;
        return 0;
}

/*
 * Checks n jobs and queues them, all or nothing, with the fences after the
 * session's last one. 0, or a negative errno after replying to @id with an
 * error naming what was wrong (or handing it to the session's error sink).
 * The caller runs the scheduler.
 */
static int submit_jobs(Session *s, uint64_t id, const WireJob *wjobs, size_t n) {
        _cleanup_free_ Job **jobs = NULL;
        uint64_t watch = 0;

        if (n > s->limits.max_jobs_per_submit) {
                session_send_error(s, id, EINVAL, "submit.jobs: %zu jobs exceed the limit of %u per submit",
                                   n, s->limits.max_jobs_per_submit);
                return -EINVAL;
        }
        if (s->n_jobs + n > s->limits.max_jobs_in_flight) {
                session_send_error(s, id, EDQUOT,
                                   "jobs in flight limit (max_jobs_in_flight %u, policy JobsInFlight=) reached: %u unfinished, %zu submitted",
                                   s->limits.max_jobs_in_flight, s->n_jobs, n);
                return -EDQUOT;
        }
        /* Each unfinished job is daemon memory: all sessions of a user
         * together are bounded too. */
        if (s->user_tally && s->user_tally->jobs + n > s->policy.user_jobs_in_flight) {
                session_send_error(s, id, EDQUOT,
                                   "per-user jobs in flight limit (policy UserJobsInFlight=%" PRIu64 ") reached: %s has %" PRIu64 " unfinished jobs in %u sessions, %zu submitted",
                                   s->policy.user_jobs_in_flight, s->user_tally->key, s->user_tally->jobs,
                                   s->user_tally->sessions, n);
                return -EDQUOT;
        }
        jobs = calloc(n, sizeof(*jobs));
        if (!jobs) {
                session_send_error(s, id, ENOMEM, "out of memory");
                return -ENOMEM;
        }
        /* All or nothing: check every job before any is queued. */
        for (size_t i = 0; i < n; i++) {
                jobs[i] = build_job(s, id, &wjobs[i], i, s->last_fence + 1 + i);
                if (!jobs[i]) {
                        for (size_t k = 0; k < i; k++)
                                job_free(jobs[k]);
                        return -EINVAL;
                }
        }
        if (resolve_auto_engines(jobs, n) < 0) {
                for (size_t k = 0; k < n; k++)
                        job_free(jobs[k]);
                session_send_error(s, id, ENOMEM, "out of memory");
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                Job *j = jobs[i];

                QUEUE_APPEND(session_jobs, s->jobs, j);
                s->n_jobs++;
                if (s->user_tally)
                        s->user_tally->jobs++;
                if (session_fence_page_track(s, j))
                        watch = j->fence;
                scheduler_enqueue(j->on->gpu->scheduler, &j->on->streams[j->sched.engine], &j->sched);
        }
        if (watch)
                session_fence_page_watch(s, watch);
        s->n_jobs_peak = MAX(s->n_jobs_peak, s->n_jobs);
        s->last_fence += n;
        s->usage.jobs_submitted += n;
        if (s->account)
                s->account->usage.jobs_submitted += n;
        session_page_set_fences(&s->page, s->completed_fence, s->last_fence);
        return 0;
}

void session_submit_relayed(Session *s, Job *j) {
        j->fence = ++s->last_fence;
        QUEUE_APPEND(session_jobs, s->jobs, j);
        s->n_jobs++;
        if (s->user_tally)
                s->user_tally->jobs++;
        /* On its GPU: a relayed queue's (kfd-relay-queue.c). */
        scheduler_enqueue(j->on->gpu->scheduler, &j->on->streams[j->sched.engine], &j->sched);
        s->n_jobs_peak = MAX(s->n_jobs_peak, s->n_jobs);
        s->usage.jobs_submitted++;
        if (s->account)
                s->account->usage.jobs_submitted++;
        session_page_set_fences(&s->page, s->completed_fence, s->last_fence);
}

static void handle_submit(Session *s, const WireRequest *req) {
        size_t n = req->submit.n_jobs;
        _cleanup_free_ uint64_t *fences = calloc(MAX(n, (size_t) 1), sizeof(uint64_t));

        if (!fences) {
                session_send_error(s, req->id, ENOMEM, "out of memory");
                return;
        }
        if (submit_jobs(s, req->id, req->submit.jobs, n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                fences[i] = s->last_fence - n + 1 + i;
        /* The jobs go to the GPU before the reply goes out (issue 13: the
         * reply first put the ring write on the client's critical path); the
         * reply still comes before anything said about the jobs. */
        session_ref(s);
        session_cork(s);
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_SUBMIT,
                                       .submit = { .fences = fences, .n_fences = n } },
                     NULL, 0);
        session_run_schedulers(s);
        session_uncork(s);
        session_unref(s);
}

/* A batch nothing of which may run still has its fences (the client counted
 * them): each job fails at once with the reason. */
static void fail_batch(Session *s, const WireJob *wjobs, size_t n, int error, const char *why) {
        uint64_t first = s->last_fence + 1;
        char message[640];

        snprintf(message, sizeof(message), "refused (submit ring batch of fences %" PRIu64 "..%" PRIu64 "): %s",
                 first, first + n - 1, why);
        s->usage.jobs_submitted += n;
        if (s->account)
                s->account->usage.jobs_submitted += n;
        for (size_t i = 0; i < n; i++) {
                Job *j = job_new(s, ++s->last_fence, wjobs[i].type ? wjobs[i].type : WIRE_JOB_COPY);

                if (!j) {
                        /* Out of memory: the session cannot keep its fences. */
                        session_end(s, ENOMEM, "out of memory failing a submit ring batch", false);
                        return;
                }
                QUEUE_APPEND(session_jobs, s->jobs, j);
                s->n_jobs++;
                if (s->user_tally)
                        s->user_tally->jobs++;
                session_job_finished(j, error, message, 0);
        }
}

int session_submit_ring_batch(Session *s, const WireJob *wjobs, size_t n, int decode_error,
                              const char *decode_message) {
        SessionErrorSink sink = {};
        int r;

        if (decode_error != 0) {
                fail_batch(s, wjobs, n, decode_error, decode_message);
                return -decode_error;
        }
        s->error_sink = &sink;
        r = submit_jobs(s, 0, wjobs, n);
        s->error_sink = NULL;
        if (r < 0)
                fail_batch(s, wjobs, n, sink.error ? sink.error : -r, sink.error ? sink.message : strerror(-r));
        return r;
}

static void handle_query(Session *s, const WireRequest *req) {
        /* What is charged should be what can still be held. */
        session_refresh_released(s);
        session_send(s, &(WireReply) {
                             .id = req->id,
                             .type = WIRE_REPLY_QUERY,
                             .query = { .buffers = s->buffers.n_used,
                                        .events = s->events.n_used,
                                        .jobs_in_flight = s->n_jobs,
                                        .buffer_bytes = s->usage.buffer_bytes,
                                        .jobs_submitted = s->usage.jobs_submitted,
                                        .jobs_completed = s->usage.jobs_completed,
                                        .jobs_failed = s->usage.jobs_failed,
                                        .bytes_copied = s->usage.bytes_copied,
                                        .bytes_filled = s->usage.bytes_filled,
                                        .limits = s->limits,
                                        .code_objects = s->code_objects.n_used,
                                        .released_buffer_bytes = s->released_bytes,
                                        .user_buffer_bytes = s->user_tally ? s->user_tally->buffer_bytes : 0,
                                        .user_buffers = s->user_tally ? s->user_tally->objects : 0,
                                        .unit_buffer_bytes = s->unit_tally ? s->unit_tally->buffer_bytes : 0,
                                        .pooled_buffer_bytes = s->pooled_bytes,
                                        .user_fds = s->user_tally ? s->user_tally->fds : s->fds,
                                        .session_fds = s->fds,
                                        .context_bytes = s->context_bytes },
                     },
                     NULL, 0);
}

void session_handle_request(Session *s, WireRequest *req, int *fds, unsigned n_fds) {
        switch (req->type) {
        case WIRE_REQUEST_HELLO:
                return handle_hello(s, req);
        case WIRE_REQUEST_DEVICE_INFO:
                return handle_device_info(s, req);
        case WIRE_REQUEST_ALLOC_BUFFER:
                return handle_alloc_buffer(s, req);
        case WIRE_REQUEST_IMPORT_BUFFER:
                return handle_import_buffer(s, req, fds[0]);
        case WIRE_REQUEST_FREE_BUFFER:
                return handle_free_buffer(s, req);
        case WIRE_REQUEST_EXPORT_BUFFER:
                return handle_export_buffer(s, req);
        case WIRE_REQUEST_CREATE_EVENT:
                return handle_create_event(s, req);
        case WIRE_REQUEST_DESTROY_EVENT:
        case WIRE_REQUEST_SET_EVENT:
        case WIRE_REQUEST_RESET_EVENT:
                return handle_event_op(s, req);
        case WIRE_REQUEST_WAIT_EVENTS:
                return handle_wait_events(s, req);
        case WIRE_REQUEST_SUBMIT:
                return handle_submit(s, req);
        case WIRE_REQUEST_QUERY:
                return handle_query(s, req);
        case WIRE_REQUEST_STATUS:
                return session_handle_status(s, req);
        case WIRE_REQUEST_LOAD_CODE_OBJECT:
                return session_load_code_object(s, req, fds[0]);
        case WIRE_REQUEST_FREE_CODE_OBJECT:
                return session_free_code_object(s, req);
        case WIRE_REQUEST_OPEN_SUBMIT_RING:
                return session_open_submit_ring(s, req);
        case WIRE_REQUEST_OPEN_FENCE_PAGE:
                return session_open_fence_page(s, req);
        case WIRE_REQUEST_OPEN_KFD:
                return session_open_kfd(s, req);
        case WIRE_REQUEST_TERMINATE_SESSION:
                return session_handle_terminate(s, req);
        case WIRE_REQUEST_LIST_SESSIONS:
                return session_handle_list_sessions(s, req);
        case WIRE_REQUEST_OPEN_SESSION_PAGE:
                return session_open_session_page(s, req);
        }
        session_send_error(s, req->id, EOPNOTSUPP, "request type %d is not supported", (int) req->type);
}
