/* SPDX-License-Identifier: MIT */
/*
 * What the daemon does when a GPU's device context is lost (manager.h):
 * bring that GPU back inside the running daemon (manager_gpu_recover()), or,
 * where it cannot, end so that the service manager starts a new one
 * (manager_device_lost()).
 *
 * The kernel keeps a KFD context whose queues a fault or a reset evicted
 * evicted until it is closed (kfd-facts §7.1). Where a GPU's device context
 * is a KFD context of its own — a secondary context (KFD 1.19), every GPU
 * but the first — closing it and making a new one is all a new daemon
 * would do for that GPU, so the daemon does it itself and the other GPUs'
 * sessions never notice:
 *  1. GPU k is marked unavailable (SessionGpu.unavailable): no session is
 *     put on it, a Hello naming it is EAGAIN, which libkfdbroker's
 *     reconnect retries;
 *  2. every session on it ends, as at a daemon restart (SessionEnded with
 *     reconnect set): its jobs fail with the reason, its buffers go (VRAM
 *     contents are lost in a reset; libkfdbroker makes them again on the
 *     next connection, as after a restart);
 *  3. once no session holds anything on it (SessionGpu.n_users: an ended
 *     session stays until its jobs have retired, at most a few
 *     milliseconds with its contexts lost), its scheduler and GPU contexts
 *     — the device context and the clients' — are freed and made anew,
 *     then GPU k is served again.
 * Where step 3 cannot finish (sessions left after RECOVER_WAIT_NS, or the
 * new device context cannot be made), the daemon ends as before and the
 * service manager starts a new one.
 *
 * The first GPU's device context is the daemon's own KFD process, and on a
 * kernel without secondary contexts every GPU's is (share_process): that
 * process cannot be closed without ending the daemon, so there it ends as
 * before (manager.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "manager/manager.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/time-util.h"

/* How long the sessions of a GPU being brought back may take to go. */
#define RECOVER_WAIT_NS (10ull * 1000000000ull)
/* How often to look whether they have. */
#define RECOVER_POLL_US 20000ull

void manager_device_lost(Manager *m, uint64_t context_id, const char *reason) {
        LogFields f = {};

        if (m->device_lost)
                return;
        log_fields_add(&f, "KFDBROKER_CONTEXT=%" PRIu64, context_id);
        log_fields_add(&f, "KFDBROKER_REASON=%s", reason);
        log_struct(LOG_ERR, KFDBROKER_MESSAGE_DEVICE_LOST, &f,
                   "The GPU context of the daemon was lost (%s). No more work can run on it; exiting so that "
                   "the service manager starts a new daemon.", reason);
        m->device_lost = true;
        snprintf(m->device_lost_reason, sizeof(m->device_lost_reason),
                 "the daemon's GPU context was lost (%s); a new daemon takes over", reason);
        (void) sd_event_exit(m->event, -ENODEV);
}

static bool recoverable(const ManagerGpu *g) {
        return (g->pool_options.device.flags & GPU_CONTEXT_SECONDARY) && !g->pool_options.device.share_process;
}

/* The old scheduler and contexts go, new ones come: 0, or -errno with err. */
static int rebuild(ManagerGpu *g, char *err, size_t errlen) {
        Manager *m = g->manager;
        SessionGpu *sg = &m->set.gpus[g->index];
        int r;

        /* As at exit (manager_free()): the client contexts first, then the
         * scheduler lets go of the slots, then the device context. */
        scheduler_abandon(g->scheduler);
        context_pool_drop_clients(g->contexts);
        g->scheduler = scheduler_free(g->scheduler);
        g->contexts = context_pool_free(g->contexts);
        g->info = NULL;
        sg->scheduler = NULL;
        sg->contexts = NULL;
        sg->info = NULL;

        r = context_pool_new(m->event, g->ops, &g->pool_options, &g->pool_callbacks, &g->contexts, err, errlen);
        if (r < 0)
                return r;
        r = scheduler_new(m->event, g->contexts, &g->scheduler_callbacks, &g->scheduler);
        if (r < 0) {
                snprintf(err, errlen, "cannot make its scheduler: %s", strerror(-r));
                return r;
        }
        g->info = context_pool_info(g->contexts);
        sg->scheduler = g->scheduler;
        sg->contexts = g->contexts;
        sg->info = g->info;
        return 0;
}

static int on_recover_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        ManagerGpu *g = userdata;
        Manager *m = g->manager;
        SessionGpu *sg = &m->set.gpus[g->index];
        char err[400] = "";
        int r;

        /* Sessions that came (a pinned connection before its Hello) go too. */
        (void) session_set_end_gpu(&m->set, g->index, g->ended_why);
        if (sg->n_users > 0) {
                if (now_ns() - g->recover_start_ns < RECOVER_WAIT_NS) {
                        (void) sd_event_source_set_time_relative(src, RECOVER_POLL_US);
                        return sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
                }
                log_error("GPU %u: %u session%s still hold work on it %llu s after its device context was lost",
                          g->index, sg->n_users, sg->n_users == 1 ? "" : "s",
                          (unsigned long long) (RECOVER_WAIT_NS / 1000000000ull));
                manager_device_lost(m, 0, g->unavailable);
                return 0;
        }
        g->recover_timer = sd_event_source_disable_unref(g->recover_timer);
        r = rebuild(g, err, sizeof err);
        if (r < 0) {
                char why[600];

                snprintf(why, sizeof why, "GPU %u could not be brought back (%s)", g->index, err);
                manager_device_lost(m, 0, why);
                return 0;
        }
        g->recoveries++;
        sg->unavailable = NULL;
        log_notice("GPU %u is served again: a new device context, %.1f ms after the old one was lost (recovery %u)",
                   g->index, (double) (now_ns() - g->recover_start_ns) / 1e6, g->recoveries);
        return 0;
}

bool manager_gpu_recover(ManagerGpu *g, const char *reason) {
        Manager *m = g->manager;
        SessionGpu *sg = &m->set.gpus[g->index];
        unsigned n;
        int r;

        if (!recoverable(g) || m->device_lost)
                return false;
        if (sg->unavailable)
                return true; /* being brought back already */
        snprintf(g->unavailable, sizeof g->unavailable, "its device context was lost (%s)", reason);
        snprintf(g->ended_why, sizeof g->ended_why, "GPU %u's device context was lost (%s); the GPU is being "
                 "brought back, reconnect", g->index, reason);
        sg->unavailable = g->unavailable;
        g->recover_start_ns = now_ns();
        r = sd_event_add_time_relative(m->event, &g->recover_timer, CLOCK_MONOTONIC, 0, 0, on_recover_timer, g);
        if (r < 0) {
                log_error_errno(r, "GPU %u: cannot arm its recovery: %m", g->index);
                sg->unavailable = NULL;
                return false;
        }
        (void) sd_event_source_set_description(g->recover_timer, "gpu-recover");
        n = session_set_end_gpu(&m->set, g->index, g->ended_why);
        log_warning("GPU %u: %s; %u session%s on it ended (they may reconnect) and the GPU is brought back with a "
                    "new device context; the other GPUs go on",
                    g->index, g->unavailable, n, n == 1 ? "" : "s");
        return true;
}
