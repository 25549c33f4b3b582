/* SPDX-License-Identifier: MIT */
/*
 * Several GPUs in one session (docs/protocol.md "GPUs"): which GPUs a
 * session may use (Devices=, the GPU socket it came through) and which is
 * its own, what a session has on each GPU it uses (SessionOnGpu, session.h), the GpuRef of a request
 * resolved against what the daemon serves and the session may use, and a
 * buffer of one GPU seen from another one's device context, for a copy
 * between them.
 *
 * The session's own GPU (Session.gpu) has its SessionOnGpu inside the
 * session (Session.home); another GPU's is made the first time an
 * AllocBuffer or a job names that GPU, and lives as long as the session
 * (its jobs point at it). Everything else of the session — its fences, its
 * session page, fence page, submit ring and KFD relay — is one and stays on
 * its own GPU.
 *
 * A copy between GPUs runs on the job's GPU: the other buffer is imported
 * into that GPU's device context as a dma-buf (gpu_buffer_map_in(); the
 * kernel takes another GPU's buffer from KFD 1.15 on, as GTT: sim-memory.c
 * import_foreign()), once per buffer and GPU, and the import goes with the
 * buffer. Before KFD 1.15 such a copy is refused, naming both GPUs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/macro.h"

bool session_may_use_gpu(const Session *s, const SessionGpu *g) {
        if (s->pinned_gpu >= 0 && g->index != (unsigned) s->pinned_gpu)
                return false;
        return policy_devices_allow(&s->policy.devices, g->index, g->info ? g->info->pci_address : NULL);
}

SessionGpu *session_first_gpu(Session *s) {
        SessionGpu *found = NULL;

        /* One being brought back (manager-recover.c) only if there is no other. */
        for (unsigned i = 0; i < s->set->n_gpus; i++)
                if (session_may_use_gpu(s, &s->set->gpus[i]) &&
                    (!found || (found->unavailable && !s->set->gpus[i].unavailable)))
                        found = &s->set->gpus[i];
        return found;
}

int session_use_gpu(Session *s, SessionGpu *g) {
        if (g == s->gpu)
                return 0;
        /* Only before its first buffer or job: what it holds is on its GPU. */
        if (s->buffers.n_used > 0 || s->code_objects.n_used > 0 || s->home.compute_ctx || s->kfd_relay || s->ring ||
            s->fence_page)
                return -EBUSY;
        for (unsigned i = 0; i < SESSION_MAX_GPUS; i++)
                if (s->on[i] && s->on[i] != &s->home)
                        return -EBUSY;
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++) {
                scheduler_stream_done(s->gpu->scheduler, &s->home.streams[e]);
                scheduler_stream_init(g->scheduler, &s->home.streams[e], s->id, (GpuEngine) e, 1);
                if (s->user_tally)
                        scheduler_stream_set_user(g->scheduler, &s->home.streams[e], &s->user_tally->sched[g->index]);
        }
        s->on[s->gpu->index] = NULL;
        s->on[g->index] = &s->home;
        s->gpu->n_users--;
        g->n_users++;
        s->home.gpu = g;
        s->gpu = g;
        session_set_limits(s, &s->policy); /* weights and priority classes on its new streams */
        return 0;
}

SessionGpu *session_gpu_ref(Session *s, uint64_t id, const char *field, bool has, uint32_t index) {
        SessionGpu *g;
        char devices[200];

        if (!has)
                return s->gpu;
        g = session_set_gpu(s->set, index);
        if (!g) {
                session_send_error(s, id, ENODEV,
                                   "%s: no GPU %" PRIu32 ": this daemon serves %u (indexes 0 to %u, kfdbrokerctl status)",
                                   field, index, s->set->n_gpus, s->set->n_gpus - 1);
                return NULL;
        }
        if (s->pinned_gpu >= 0 && g->index != (unsigned) s->pinned_gpu) {
                session_send_error(s, id, EACCES,
                                   "%s: this connection came through GPU %d's socket, which serves GPU %d only", field,
                                   s->pinned_gpu, s->pinned_gpu);
                return NULL;
        }
        if (!session_may_use_gpu(s, g)) {
                session_send_error(s, id, EACCES,
                                   "%s: GPU %u is not one this session may use (policy Devices=%s, from %s)", field,
                                   g->index,
                                   policy_limit_format(POLICY_LIMIT_DEVICES, &s->policy, devices, sizeof devices),
                                   s->policy_matched ?: "the defaults");
                return NULL;
        }
        if (g->unavailable) {
                session_send_error(s, id, EAGAIN, "%s: GPU %u is being brought back: %s; try again in a moment",
                                   field, g->index, g->unavailable);
                return NULL;
        }
        return g;
}

SessionOnGpu *session_on_gpu(Session *s, SessionGpu *g) {
        SessionOnGpu *on = s->on[g->index];

        if (on)
                return on;
        on = calloc(1, sizeof(*on));
        if (!on)
                return NULL;
        *on = (SessionOnGpu) { .session = s, .gpu = g };
        /* Its streams there hold its weight and priority class, and count
         * for its user on that GPU, as those of its own GPU do. */
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++) {
                scheduler_stream_init(g->scheduler, &on->streams[e], s->id, (GpuEngine) e,
                                      s->policy.weight ? s->policy.weight : 1);
                if (s->user_tally)
                        scheduler_stream_set_user(g->scheduler, &on->streams[e], &s->user_tally->sched[g->index]);
                scheduler_stream_set_class(g->scheduler, &on->streams[e], (unsigned) s->policy.priority,
                                           policy_priority_to_queue_priority(s->policy.priority));
        }
        s->on[g->index] = on;
        g->n_users++; /* given back by session_on_gpu_done() */
        return on;
}

void session_on_gpu_done(SessionOnGpu *on) {
        if (!on)
                return;
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++)
                scheduler_stream_done(on->gpu->scheduler, &on->streams[e]);
        on->compute_ctx = context_release(on->compute_ctx);
        session_stop_paying(on);
        free(on->compute_key);
        on->compute_key = NULL;
        on->gpu->n_users--;
        if (on != &on->session->home) {
                on->session->on[on->gpu->index] = NULL;
                free(on);
        }
}

GpuBuffer *session_buffer_seen_from(Session *s, uint64_t id, const char *field, SessionBuffer *b, SessionOnGpu *on) {
        const GpuDeviceInfo *to = on->gpu->info;
        GpuBuffer *seen;
        int r;

        if (b->gpu_index == on->gpu->index)
                return b->gpu;
        /* Made once and kept with the buffer, as a dispatch's mapping into a
         * client context is (gpu.h); a job holds the buffer itself. */
        r = gpu_buffer_map_in(b->gpu, context_pool_device_gpu(on->gpu->contexts), &seen);
        if (r == -EINVAL && to->kfd_minor < 15) {
                session_send_error(s, id, EINVAL,
                                   "%s: the buffer is on GPU %u and the job runs on GPU %u: this kernel's KFD "
                                   "%" PRIu32 ".%" PRIu32 " cannot import another GPU's buffer (KFD 1.15, Linux 6.8, "
                                   "can)",
                                   field, b->gpu_index, on->gpu->index, to->kfd_major, to->kfd_minor);
                return NULL;
        }
        if (r < 0) {
                session_send_error(s, id, -r, "%s: mapping the buffer of GPU %u into GPU %u failed: %s", field,
                                   b->gpu_index, on->gpu->index, strerror(-r));
                return NULL;
        }
        return seen;
}

GpuBuffer *session_job_buffer(Session *s, uint64_t id, size_t idx, const char *field, uint64_t handle,
                              SessionOnGpu *on, GpuBuffer **ret_seen) {
        SessionBuffer *b = handle_table_get(&s->buffers, handle);
        char name[128];

        /* The field's name is made only on error: formatting it for every
         * job was about 10% of the event loop's time on batches of small
         * fills. */
        if (b && b->gpu_index == on->gpu->index) {
                if (ret_seen)
                        *ret_seen = b->gpu;
                return b->gpu;
        }
        snprintf(name, sizeof(name), "submit.jobs[%zu].%s", idx, field);
        if (!b) {
                (void) session_lookup_buffer(s, id, name, handle);
                return NULL;
        }
        if (!ret_seen) {
                session_send_error(s, id, EINVAL,
                                   "%s: buffer 0x%" PRIx64 " is on GPU %u and the job runs on GPU %u (submit.jobs[%zu].gpu); "
                                   "only a copy takes a buffer of another GPU",
                                   name, handle, b->gpu_index, on->gpu->index, idx);
                return NULL;
        }
        *ret_seen = session_buffer_seen_from(s, id, name, b, on);
        return *ret_seen ? b->gpu : NULL;
}

void session_run_schedulers(Session *s) {
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                if (s->on[g])
                        scheduler_run(s->on[g]->gpu->scheduler);
}
