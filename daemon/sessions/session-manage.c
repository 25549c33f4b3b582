/* SPDX-License-Identifier: MIT */
/*
 * Management over the socket, for a daemon run without a bus: a client lists
 * the sessions of its own uid (root: every session) with their identity, use
 * and limits (ListSessions, as GetAccounting over D-Bus), and ends another
 * session of its own uid (root: of any uid) with TerminateSession. The
 * caller is the requesting Session, whose identity was pinned when it
 * connected; every action, refused or done, is logged with its uid, unit and
 * pid.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu/gpu.h"
#include "policy/policy-limits.h"

#include "policy/identity.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log.h"

void session_handle_terminate(Session *s, const WireRequest *req) {
        uint64_t id = req->terminate_session.session_id;
        const char *reason = req->terminate_session.reason;
        char caller[384], why[384 + 16 + WIRE_TERMINATE_REASON_MAX + 1];
        LogFields f = {};
        Session *t;

        identity_caller_describe(&s->identity, caller, sizeof(caller));
        t = session_set_find(s->set, id);
        /* Another user's session is reported as no session: its id tells nothing. */
        if (!t || (s->identity.uid != 0 && t->identity.uid != s->identity.uid)) {
                identity_caller_log_fields(&s->identity, &f);
                log_fields_add(&f, "KFDBROKER_SESSION=%" PRIu64, id);
                log_struct(LOG_NOTICE, KFDBROKER_MESSAGE_SESSION_TERMINATED, &f,
                           "Session %" PRIu64 ": TerminateSession over the socket by %s refused: %s", id, caller,
                           t ? "another user's session" : "no such session");
                if (t) {
                        session_send_error(s, req->id, EPERM,
                                           "terminate_session.session_id: session %" PRIu64 " is not one of uid %u's sessions; only root ends another user's",
                                           id, (unsigned) s->identity.uid);
                        return;
                }
                session_send_error(s, req->id, ENOENT, "terminate_session.session_id: no session %" PRIu64, id);
                return;
        }
        if (t == s) {
                session_send_error(s, req->id, EINVAL,
                                   "terminate_session.session_id: %" PRIu64 " is this session; close the connection to end it",
                                   id);
                return;
        }

        snprintf(why, sizeof(why), "terminated by %s%s%s", caller, reason[0] ? ": " : "", reason);
        session_log_fields(t, &f);
        identity_caller_log_fields(&s->identity, &f);
        log_struct(LOG_NOTICE, KFDBROKER_MESSAGE_SESSION_TERMINATED, &f,
                   "Session %" PRIu64 ": terminated over the socket by %s%s%s", id, caller, reason[0] ? ": " : "",
                   reason);
        session_end(t, ECONNABORTED, why, false);
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_EMPTY }, NULL, 0);
}

static int session_cmp_id(const void *a, const void *b) {
        const Session *x = *(Session *const *) a, *y = *(Session *const *) b;

        return x->id < y->id ? -1 : x->id > y->id;
}

static void limit_entries(const PolicyLimits *l, WirePolicyLimit out[_POLICY_LIMIT_MAX]) {
        PolicyLimits copy = *l;

        for (int k = 0; k < _POLICY_LIMIT_MAX; k++) {
                const uint64_t *n = policy_limit_number(&copy, (PolicyLimitKey) k);
                WirePolicyLimit *e = &out[k];

                e->key = policy_limit_key_to_string((PolicyLimitKey) k);
                policy_limit_format((PolicyLimitKey) k, l, e->value, sizeof(e->value));
                if (n)
                        e->number = *n;
                else if (k == POLICY_LIMIT_WEIGHT)
                        e->number = l->weight;
                else if (k == POLICY_LIMIT_JOB_TIMEOUT || k == POLICY_LIMIT_DISPATCH_TIMEOUT) {
                        uint64_t ns = k == POLICY_LIMIT_JOB_TIMEOUT ? l->job_timeout_ns : l->dispatch_timeout_ns;
                        e->number = ns == POLICY_INFINITY ? UINT64_MAX : ns / 1000;
                } else
                        e->number = 0;
        }
}

void session_handle_list_sessions(Session *s, const WireRequest *req) {
        _cleanup_free_ Session **visible = NULL;
        WireSessionInfo info[WIRE_LIST_SESSIONS_MAX];
        WirePolicyLimit limits[WIRE_LIST_SESSIONS_MAX][_POLICY_LIMIT_MAX];
        bool all = s->identity.uid == 0;
        size_t n = 0, take;
        Session *i;

        visible = calloc(MAX(s->set->n_sessions, 1u), sizeof(*visible));
        if (!visible) {
                session_send_error(s, req->id, ENOMEM, "out of memory listing sessions");
                return;
        }
        LIST_FOREACH(sessions, i, s->set->sessions)
                if (i->id > req->list_sessions.after_id && (all || i->identity.uid == s->identity.uid) &&
                    n < s->set->n_sessions)
                        visible[n++] = i;
        if (n > 0)
                qsort(visible, n, sizeof(*visible), session_cmp_id);
        take = MIN(n, (size_t) WIRE_LIST_SESSIONS_MAX);
        for (size_t k = 0; k < take; k++) {
                const Session *t = visible[k];
                const Identity *id = &t->identity;

                limit_entries(&t->policy, limits[k]);
                info[k] = (WireSessionInfo) {
                        .id = t->id,
                        .uid = (uint32_t) id->uid,
                        .gid = (uint32_t) id->gid,
                        .pid = (uint32_t) id->pid,
                        .client_name = t->client_name,
                        .unit = id->unit,
                        .user_unit = id->user_unit,
                        .app_id = id->app_id,
                        .container = id->container,
                        .container_id = id->container_id,
                        .pod_uid = id->pod_uid,
                        .opened_ns = t->opened_ns,
                        .buffers = t->buffers.n_used,
                        .events = t->events.n_used,
                        .jobs_in_flight = t->n_jobs,
                        .buffer_bytes = t->usage.buffer_bytes,
                        .jobs_submitted = t->usage.jobs_submitted,
                        .jobs_completed = t->usage.jobs_completed,
                        .jobs_failed = t->usage.jobs_failed,
                        .bytes_copied = t->usage.bytes_copied,
                        .bytes_filled = t->usage.bytes_filled,
                        .busy_ns_sdma = t->usage.busy_ns[GPU_ENGINE_SDMA],
                        .busy_ns_compute = t->usage.busy_ns[GPU_ENGINE_COMPUTE],
                        .context_bytes = t->context_bytes,
                        .policy_rules = t->policy_matched,
                        .limits_overridden = t->limits_overridden,
                        .gpu = t->gpu ? t->gpu->index : 0,
                        .busy_ns_by_gpu = t->busy_ns_by_gpu,
                        .n_busy_ns_by_gpu = s->set->n_gpus,
                        .limits = limits[k],
                        .n_limits = _POLICY_LIMIT_MAX,
                };
        }
        session_send(s,
                     &(WireReply) { .id = req->id, .type = WIRE_REPLY_LIST_SESSIONS,
                                    .list_sessions = { .sessions = info, .n_sessions = take, .more = n > take } },
                     NULL, 0);
}
