/* SPDX-License-Identifier: MIT */
/*
 * Status: the daemon's counters and its GPU contexts, for `kfdbrokerctl
 * status` (docs/protocol.md "Status"). What a caller sees of the contexts
 * depends on who it is: root every context in full, anyone else the device
 * context and the contexts of their own user's sessions, never another
 * user's jobs, mapped bytes or worker pid. Part of the session layer; runs on
 * the event loop.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/macro.h"
#include "util/time-util.h"

typedef struct ContextList {
        WireContextInfo *v;
        char (*kinds)[16];
        size_t n, max;
        bool all;      /* the caller sees every context in full */
        uint32_t gpu;  /* the GPU whose contexts are being added */
        /* else: the contexts of the caller's user's sessions and of other
         * users' sessions, one entry per session using one, sorted */
        const Context **own, **others;
        size_t n_own, n_others;
} ContextList;

static int context_ptr_cmp(const void *a, const void *b) {
        uintptr_t x = (uintptr_t) *(const Context *const *) a, y = (uintptr_t) *(const Context *const *) b;
        return x < y ? -1 : x > y;
}

/* How many entries of the sorted v[n] are c. */
static unsigned count_context(const Context **v, size_t n, const Context *c) {
        size_t lo = 0, hi = n;
        unsigned k = 0;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if ((uintptr_t) v[mid] < (uintptr_t) c)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        while (lo + k < n && v[lo + k] == c)
                k++;
        return k;
}

static void context_list_done(ContextList *l) {
        free(l->v);
        free(l->kinds);
        free(l->own);
        free(l->others);
}

/* Fills l's lists from the sessions: one pass, so that a Status costs
 * O(sessions log sessions), not sessions times contexts. */
static int context_list_users(ContextList *l, const SessionSet *m, uid_t uid) {
        Session *i;

        size_t max = (size_t) m->n_sessions * SESSION_MAX_GPUS; /* a context per GPU it uses */

        l->own = calloc(max + 1, sizeof *l->own);
        l->others = calloc(max + 1, sizeof *l->others);
        if (!l->own || !l->others)
                return -ENOMEM;
        LIST_FOREACH(sessions, i, m->sessions)
                for (unsigned g = 0; g < SESSION_MAX_GPUS; g++) {
                        const Context *c = i->on[g] ? i->on[g]->compute_ctx : NULL;

                        if (!c)
                                continue;
                        if (i->identity.uid == uid && l->n_own < max)
                                l->own[l->n_own++] = c;
                        else if (i->identity.uid != uid && l->n_others < max)
                                l->others[l->n_others++] = c;
                }
        qsort(l->own, l->n_own, sizeof *l->own, context_ptr_cmp);
        qsort(l->others, l->n_others, sizeof *l->others, context_ptr_cmp);
        return 0;
}

/*
 * One entry of StatusReply.contexts. Root sees every context in full. Anyone
 * else sees the device context and the contexts their own (same uid) sessions
 * use, and in full only those no other user's session uses: of a context
 * shared with others only its id, kind, state and losses, with users counting
 * the caller's own sessions — never another user's jobs, mapped bytes or
 * worker pid (a worker's pid is a process to signal).
 */
static void add_context_info(Context *c, void *userdata) {
        ContextList *l = userdata;
        ContextStats st;
        unsigned own = 0, others = 0;
        size_t k;

        if (l->n >= l->max)
                return;
        context_get_stats(c, &st);
        if (!l->all) {
                own = count_context(l->own, l->n_own, c);
                others = count_context(l->others, l->n_others, c);
                if (own == 0 && !st.device)
                        return;
        }
        /* The key's first word: "device", "session", "identity" or "shared". */
        k = strcspn(st.key, " ");
        snprintf(l->kinds[l->n], sizeof l->kinds[0], "%.*s", (int) MIN(k, sizeof l->kinds[0] - 1), st.key);
        l->v[l->n] = (WireContextInfo) {
                .id = st.id,
                .kind = l->kinds[l->n],
                .live = st.live,
                .users = st.users,
                .jobs_in_flight = st.jobs_in_flight,
                .losses = st.losses,
                .memory_bytes = st.gpu.internal_bytes,
                .mapped_bytes = st.gpu.mapped_bytes,
                .pid = st.pid,
                .gpu = l->gpu,
        };
        if (!l->all && (others > 0 || st.device))
                l->v[l->n] = (WireContextInfo) {
                        .id = st.id,
                        .kind = l->kinds[l->n],
                        .live = st.live,
                        .users = own,
                        .losses = st.losses,
                        .gpu = l->gpu,
                };
        l->n++;
}

void session_handle_status(Session *s, const WireRequest *req) {
        SessionSet *m = s->set;
        ContextList cl = { .all = s->identity.uid == 0 };
        WireGpuStatus gpus[SESSION_MAX_GPUS];
        uint64_t bytes = 0, completed = 0, failed = 0;
        uint32_t events = 0, code_objects = 0, gpu_buffers = 0, in_flight = 0;
        size_t n_listed = 0;
        ContextPool *first = m->gpus[0].contexts;
        Session *i;

        /* Each GPU's device context and slots: at most its limit plus the
         * slots kept without an incarnation by connected sessions. */
        cl.max = m->n_sessions;
        for (unsigned g = 0; g < m->n_gpus; g++)
                cl.max += 1 + context_pool_max(m->gpus[g].contexts);
        cl.v = calloc(cl.max, sizeof(*cl.v));
        cl.kinds = calloc(cl.max, sizeof(*cl.kinds));
        if (!cl.v || !cl.kinds || (!cl.all && context_list_users(&cl, m, s->identity.uid) < 0)) {
                context_list_done(&cl);
                session_send_error(s, req->id, ENOMEM, "out of memory");
                return;
        }
        for (unsigned g = 0; g < m->n_gpus; g++) {
                const SessionGpu *sg = &m->gpus[g];
                GpuContextStats gs;

                cl.gpu = g;
                context_pool_foreach(sg->contexts, add_context_info, &cl);
                gpu_context_get_stats(context_pool_device_gpu(sg->contexts), &gs);
                gpus[g] = (WireGpuStatus) { .index = g,
                                            .gfx_name = sg->info->gfx_name,
                                            .name = sg->info->name,
                                            .node = sg->node,
                                            .node_reason = sg->node_reason,
                                            .gpu_id = sg->info->gpu_id,
                                            .cu_count = sg->info->cu_count,
                                            .vram_size = sg->info->vram_size,
                                            .jobs_completed = scheduler_jobs_completed(sg->scheduler),
                                            .jobs_failed = scheduler_jobs_failed(sg->scheduler),
                                            .jobs_in_flight = scheduler_in_flight(sg->scheduler),
                                            .gpu_buffers = gs.buffers };
                completed += gpus[g].jobs_completed;
                failed += gpus[g].jobs_failed;
                in_flight += gpus[g].jobs_in_flight;
                gpu_buffers += gs.buffers;
        }

        LIST_FOREACH(sessions, i, m->sessions) {
                bytes += i->usage.buffer_bytes;
                events += i->events.n_used;
                code_objects += i->code_objects.n_used;
                /* A session counts on every GPU it uses. */
                for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                        if (i->on[g])
                                gpus[g].sessions++;
        }
        /* The caller's GPUs only (Devices=, its GPU's socket): a container
         * given one GPU sees one. The sums above stay the daemon's. */
        for (unsigned g = 0; g < m->n_gpus; g++)
                if (session_may_use_gpu(s, &m->gpus[g]))
                        gpus[n_listed++] = gpus[g];
        session_send(s, &(WireReply) {
                             .id = req->id,
                             .type = WIRE_REPLY_STATUS,
                             .status = { .daemon_version = KFDBROKER_VERSION,
                                         .backend = m->gpus[0].info->backend,
                                         .gfx_name = m->gpus[0].info->gfx_name,
                                         .sessions = m->n_sessions,
                                         .jobs_completed = completed,
                                         .jobs_failed = failed,
                                         .uptime_ns = now_ns() - m->start_ns,
                                         .buffer_bytes = bytes,
                                         .gpu_buffers = gpu_buffers,
                                         .jobs_in_flight = in_flight,
                                         .events = events,
                                         .code_objects = code_objects,
                                         /* The same mechanism on every GPU: one kernel, one choice. */
                                         .context_mechanism = context_mechanism_to_string(
                                                 context_pool_mechanism(first)),
                                         .context_mechanism_reason = context_pool_mechanism_reason(first),
                                         .max_contexts = context_pool_max(first),
                                         .contexts = cl.v,
                                         .n_contexts = cl.n,
                                         .gpus = gpus,
                                         .n_gpus = n_listed },
                     },
                     NULL, 0);
        context_list_done(&cl);
}
