/* SPDX-License-Identifier: MIT */
/* See bus.h. The methods only read the sessions' state or call the same
 * functions the socket protocol and signals use (session_disconnect,
 * session_set_limits, session_set_reload_policy). */
#include "endpoints/bus.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "config.h"
#include "policy/identity.h"
#include "endpoints/bus-args.h"
#include "endpoints/bus-creds.h"
#include "endpoints/metrics.h"
#include "policy/policy.h"
#include "scheduler/scheduler.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

#define BUS_ERROR_POLICY_INVALID "org.kfdbroker.Broker1.Error.PolicyInvalid"
#define BUS_ERROR_NO_SUCH_SESSION "org.kfdbroker.Broker1.Error.NoSuchSession"
#define BUS_ERROR_NO_DEVICE "org.kfdbroker.Broker1.Error.NoDevice"
#define UID_NONE ((uid_t) -1)
/* How long polkit may take when it can ask the user (AllowUserInteraction). */
#define POLKIT_INTERACTIVE_TIMEOUT_USEC (5ull * 60 * 1000 * 1000)

typedef struct PendingAuth PendingAuth;
typedef struct PendingOpen PendingOpen;

struct Bus {
        SessionSet *set;
        BusCallbacks cb;
        sd_bus *bus;
        sd_bus_slot *vtable_slot;
        sd_bus_slot *name_slot;
        LIST_HEAD(PendingAuth, pending);
        LIST_HEAD(PendingOpen, opens);
        bool warned_no_process_fd;
        bool reloaded_config; /* asked the bus to re-read its policy after a refusal */
};

/* Runs a method once the caller is authorized; all = may see every session. */
typedef int (*AuthorizedFn)(Bus *b, sd_bus_message *call, bool all, sd_bus_error *error);

struct PendingAuth {
        Bus *bus;
        sd_bus_message *call;
        sd_bus_slot *slot;
        const char *action;
        AuthorizedFn fn;
        bool degrade; /* on refusal run fn with all = false instead of failing */
        LIST_FIELDS(PendingAuth, pending);
};

static void pending_free(PendingAuth *p) {
        LIST_REMOVE(pending, p->bus->pending, p);
        sd_bus_slot_unref(p->slot);
        sd_bus_message_unref(p->call);
        free(p);
}

static void reply_result(sd_bus_message *call, int r, sd_bus_error *error) {
        if (r >= 0)
                return;
        if (sd_bus_error_is_set(error))
                (void) sd_bus_reply_method_error(call, error);
        else
                (void) sd_bus_reply_method_errno(call, r, NULL);
}

static int on_polkit_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        PendingAuth *p = userdata;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int authorized = 0, challenge = 0, r;

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const sd_bus_error *e = sd_bus_message_get_error(reply);
                if (p->degrade)
                        r = p->fn(p->bus, p->call, false, &error);
                else
                        r = sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED,
                                              "Access denied: %s requires root or polkit authorization for "
                                              "action %s, and polkit could not be asked: %s",
                                              sd_bus_message_get_member(p->call), p->action,
                                              e && e->message ? e->message : "no reply");
                reply_result(p->call, r, &error);
                goto done;
        }
        r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
        if (r >= 0)
                r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
        if (r < 0) {
                r = sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED,
                                      "Access denied: polkit sent a reply that cannot be read");
                reply_result(p->call, r, &error);
                goto done;
        }
        if (authorized)
                r = p->fn(p->bus, p->call, true, &error);
        else if (p->degrade)
                r = p->fn(p->bus, p->call, false, &error);
        else
                r = sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED,
                                      "Access denied: polkit did not authorize action %s for %s%s",
                                      p->action, sd_bus_message_get_member(p->call),
                                      challenge ? " (authentication required; retry with "
                                                  "interactive authorization allowed)" : "");
        reply_result(p->call, r, &error);
done:
        sd_bus_error_free(&error);
        pending_free(p);
        return 0;
}

static int caller_uid(sd_bus_message *m, uid_t *ret) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *c = NULL;
        int r;

        /* The bus's own record (UnixUserID), never /proc of a pid (no AUGMENT). */
        r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID, &c);
        if (r < 0)
                return r;
        return sd_bus_creds_get_euid(c, ret);
}

/* "uid U (unit X, pid P)" of the caller of m, as the bus records it (bus-creds.h),
 * and the KFDBROKER_CALLER_* fields into f (may be NULL); the sender's bus name
 * where the bus does not say. */
static void bus_caller_describe(sd_bus_message *m, char *buf, size_t n, LogFields *f) {
        _cleanup_(identity_done) Identity id = {};

        if (bus_caller_identity(m, &id) < 0) {
                snprintf(buf, n, "%s (the bus did not tell its uid)", sd_bus_message_get_sender(m) ?: "?");
                return;
        }
        identity_caller_describe(&id, buf, n);
        if (f)
                identity_caller_log_fields(&id, f);
        if (f && sd_bus_message_get_sender(m))
                log_fields_add(f, "KFDBROKER_BUS_SENDER=%s", sd_bus_message_get_sender(m));
}

/*
 * Runs fn at once for a privileged caller, or for the owner when owner is not
 * UID_NONE and equals the caller; otherwise asks polkit for action and runs
 * fn when it says yes. Returns what the method handler should return.
 */
static int authorize(Bus *b, sd_bus_message *m, const char *action, uid_t owner, bool degrade,
                     AuthorizedFn fn, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *pk = NULL;
        PendingAuth *p;
        bool interactive;
        uid_t uid;
        int r;

        r = sd_bus_query_sender_privilege(m, CAP_SYS_ADMIN);
        if (r > 0)
                return fn(b, m, true, error);
        if (owner != UID_NONE && caller_uid(m, &uid) >= 0 && uid == owner)
                return fn(b, m, false, error);

        r = sd_bus_message_new_method_call(b->bus, &pk, "org.freedesktop.PolicyKit1",
                                           "/org/freedesktop/PolicyKit1/Authority",
                                           "org.freedesktop.PolicyKit1.Authority",
                                           "CheckAuthorization");
        if (r < 0)
                return r;
        /* Subject: the caller's bus name. Flag 1: AllowUserInteraction. */
        interactive = !degrade && sd_bus_message_get_allow_interactive_authorization(m) > 0;
        r = sd_bus_message_append(pk, "(sa{sv})sa{ss}us", "system-bus-name", 1, "name", "s",
                                  sd_bus_message_get_sender(m), action, 0, (uint32_t) interactive, "");
        if (r < 0)
                return r;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (PendingAuth) { .bus = b, .call = sd_bus_message_ref(m), .action = action, .fn = fn,
                             .degrade = degrade };
        LIST_PREPEND(pending, b->pending, p);
        /* An agent may be asking someone for a password meanwhile: wait as long as
         * kfdbrokerctl does (CTL_BUS_INTERACTIVE_TIMEOUT_USEC); the loop does not wait. */
        r = sd_bus_call_async(b->bus, &p->slot, pk, on_polkit_reply, p,
                              interactive ? POLKIT_INTERACTIVE_TIMEOUT_USEC : 0);
        if (r < 0) {
                pending_free(p);
                if (degrade)
                        return fn(b, m, false, error);
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Access denied: %s requires root or polkit authorization for "
                                         "action %s, and polkit could not be asked: %s",
                                         sd_bus_message_get_member(m), action, strerror(-r));
        }
        return 1; /* replied from on_polkit_reply */
}

/* ---- Dictionaries ---- */

static int append_sv_t(sd_bus_message *r, const char *k, uint64_t v) {
        return sd_bus_message_append(r, "{sv}", k, "t", v);
}
static int append_sv_u(sd_bus_message *r, const char *k, uint32_t v) {
        return sd_bus_message_append(r, "{sv}", k, "u", v);
}
static int append_sv_s(sd_bus_message *r, const char *k, const char *v) {
        return sd_bus_message_append(r, "{sv}", k, "s", v ? v : "");
}
static int append_sv_d(sd_bus_message *r, const char *k, double v) {
        return sd_bus_message_append(r, "{sv}", k, "d", v);
}

static int append_usage(sd_bus_message *r, const Usage *u) {
        uint64_t now = now_ns();
        int k = 0;

        k |= append_sv_t(r, "JobsSubmitted", u->jobs_submitted);
        k |= append_sv_t(r, "JobsCompleted", u->jobs_completed);
        k |= append_sv_t(r, "JobsFailed", u->jobs_failed);
        k |= append_sv_t(r, "BusyNSecSDMA", u->busy_ns[GPU_ENGINE_SDMA]);
        k |= append_sv_t(r, "BusyNSecCompute", u->busy_ns[GPU_ENGINE_COMPUTE]);
        k |= append_sv_t(r, "JobsSDMA", u->jobs[GPU_ENGINE_SDMA]);
        k |= append_sv_t(r, "JobsCompute", u->jobs[GPU_ENGINE_COMPUTE]);
        k |= append_sv_t(r, "QueuedNSec", u->queued_ns);
        k |= append_sv_t(r, "BytesCopied", u->bytes_copied);
        k |= append_sv_t(r, "BytesFilled", u->bytes_filled);
        k |= append_sv_t(r, "BufferBytes", u->buffer_bytes);
        k |= append_sv_t(r, "BufferBytesPeak", u->buffer_bytes_peak);
        k |= append_sv_d(r, "BufferByteSeconds", usage_byte_seconds(u, now));
        return k < 0 ? -ENOMEM : 0;
}

static int append_limits(sd_bus_message *r, const PolicyLimits *l) {
        int k = 0;

        k |= append_sv_t(r, "BufferMemory", l->buffer_memory);
        k |= append_sv_t(r, "MaxBufferSize", l->max_buffer_size);
        k |= append_sv_t(r, "Buffers", l->buffers);
        k |= append_sv_t(r, "Events", l->events);
        k |= append_sv_t(r, "JobsInFlight", l->jobs_in_flight);
        k |= append_sv_u(r, "Weight", l->weight);
        k |= append_sv_s(r, "Priority", policy_priority_to_string(l->priority));
        k |= append_sv_s(r, "ComputeDispatch", policy_compute_to_string(l->compute_dispatch));
        k |= append_sv_s(r, "Isolation", policy_isolation_to_string(l->isolation));
        k |= append_sv_t(r, "JobTimeoutUSec",
                         l->job_timeout_ns == POLICY_INFINITY ? UINT64_MAX : l->job_timeout_ns / 1000);
        k |= append_sv_t(r, "DispatchTimeoutUSec",
                         l->dispatch_timeout_ns == POLICY_INFINITY ? UINT64_MAX : l->dispatch_timeout_ns / 1000);
        k |= append_sv_t(r, "UserBufferMemory", l->user_buffer_memory);
        k |= append_sv_t(r, "UserBuffers", l->user_buffers);
        k |= append_sv_t(r, "UnitBufferMemory", l->unit_buffer_memory);
        k |= append_sv_t(r, "UserJobsInFlight", l->user_jobs_in_flight);
        k |= append_sv_t(r, "Queues", l->queues);
        {
                char devices[200];
                k |= append_sv_s(r, "Devices", policy_limit_format(POLICY_LIMIT_DEVICES, l, devices, sizeof devices));
        }
        return k < 0 ? -ENOMEM : 0;
}

static int append_session(sd_bus_message *r, Session *s) {
        const Identity *id = &s->identity;
        _cleanup_free_ char *drm = NULL;
        int k = 0;

        k |= sd_bus_message_open_container(r, 'a', "{sv}");
        k |= append_sv_t(r, "Id", s->id);
        k |= append_sv_u(r, "UID", (uint32_t) id->uid);
        k |= append_sv_u(r, "GID", (uint32_t) id->gid);
        k |= append_sv_u(r, "PID", (uint32_t) id->pid);
        k |= append_sv_s(r, "Comm", id->comm);
        k |= append_sv_s(r, "ClientName", s->client_name);
        k |= append_sv_s(r, "Unit", id->unit);
        k |= append_sv_s(r, "UserUnit", id->user_unit);
        k |= append_sv_s(r, "Slice", id->slice);
        k |= append_sv_s(r, "ControlGroup", id->cgroup);
        k |= append_sv_s(r, "AppId", id->app_id);
        k |= append_sv_s(r, "Container", id->container);
        k |= append_sv_s(r, "ContainerId", id->container_id);
        k |= append_sv_s(r, "PodUID", id->pod_uid);
        {
                /* Which of the keys above the daemon does not know (identity.h):
                 * their values are empty, and policy rules on them did not match. */
                char unknown[96];

                snprintf(unknown, sizeof(unknown), "%s%s%s", id->gid == IDENTITY_GID_UNKNOWN ? "GID" : "",
                         id->gid == IDENTITY_GID_UNKNOWN && id->process_unknown ? " " : "",
                         id->process_unknown ? "Comm Unit UserUnit Slice ControlGroup AppId Container" : "");
                k |= append_sv_s(r, "UnknownFields", unknown);
        }
        k |= append_sv_t(r, "OpenedNSec", s->opened_ns);
        k |= append_sv_u(r, "GPU", s->gpu ? s->gpu->index : 0);
        k |= sd_bus_message_open_container(r, 'e', "sv");
        k |= sd_bus_message_append(r, "s", "BusyNSecByGPU");
        k |= sd_bus_message_open_container(r, 'v', "at");
        k |= sd_bus_message_append_array(r, 't', s->busy_ns_by_gpu, s->set->n_gpus * sizeof(uint64_t));
        k |= sd_bus_message_close_container(r);
        k |= sd_bus_message_close_container(r);
        k |= append_sv_u(r, "Buffers", s->buffers.n_used);
        k |= append_sv_u(r, "Events", s->events.n_used);
        k |= append_sv_u(r, "JobsInFlight", s->n_jobs);
        k |= append_sv_t(r, "ReleasedBufferBytes", s->released_bytes);
        k |= append_sv_t(r, "UserBufferBytes", s->user_tally ? s->user_tally->buffer_bytes : 0);
        k |= append_sv_t(r, "UserBuffers", s->user_tally ? s->user_tally->objects : 0);
        k |= append_sv_t(r, "ContextBytes", s->context_bytes);
        k |= append_sv_t(r, "UserKeptBufferBytes", s->user_tally ? s->user_tally->kept_bytes : 0);
        k |= append_sv_s(r, "PolicyRules", s->policy_matched ?: "");
        k |= sd_bus_message_append(r, "{sv}", "LimitsOverridden", "b", (int) s->limits_overridden);
        if (metrics_format_drm_usage(s, &drm) >= 0)
                k |= append_sv_s(r, "DrmUsage", drm);
        k |= sd_bus_message_open_container(r, 'e', "sv");
        k |= sd_bus_message_append(r, "s", "Limits");
        k |= sd_bus_message_open_container(r, 'v', "a{sv}");
        k |= sd_bus_message_open_container(r, 'a', "{sv}");
        k |= append_limits(r, &s->policy);
        k |= sd_bus_message_close_container(r);
        k |= sd_bus_message_close_container(r);
        k |= sd_bus_message_close_container(r);
        k |= sd_bus_message_open_container(r, 'e', "sv");
        k |= sd_bus_message_append(r, "s", "Usage");
        k |= sd_bus_message_open_container(r, 'v', "a{sv}");
        k |= sd_bus_message_open_container(r, 'a', "{sv}");
        k |= append_usage(r, &s->usage);
        k |= sd_bus_message_close_container(r);
        k |= sd_bus_message_close_container(r);
        k |= sd_bus_message_close_container(r);
        k |= sd_bus_message_close_container(r);
        return k < 0 ? -ENOMEM : 0;
}

static int append_account(sd_bus_message *r, const Account *a) {
        int k = 0;

        k |= sd_bus_message_open_container(r, 'a', "{sv}");
        k |= append_sv_u(r, "UID", a->uid);
        k |= append_sv_s(r, "Unit", a->unit);
        k |= append_sv_s(r, "AppId", a->app_id);
        k |= append_sv_s(r, "Container", a->container);
        k |= append_sv_u(r, "SessionsNow", a->sessions_now);
        k |= append_sv_t(r, "SessionsTotal", a->sessions_total);
        k |= append_usage(r, &a->usage);
        k |= sd_bus_message_close_container(r);
        return k < 0 ? -ENOMEM : 0;
}

/* ---- Methods ---- */

/* Starts the reply of a method that shows every session when all, else only
 * the caller's own: *ret_uid is the caller's uid (UID_NONE when all). */
static int begin_filtered_reply(sd_bus_message *m, bool all, uid_t *ret_uid, sd_bus_message **ret,
                                sd_bus_error *error) {
        *ret_uid = UID_NONE;
        if (!all && caller_uid(m, ret_uid) < 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                        "Access denied: cannot determine the caller's uid");
        return sd_bus_message_new_method_return(m, ret);
}

static int run_list_sessions(Bus *b, sd_bus_message *m, bool all, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uid_t uid;
        Session *s;
        int r;

        r = begin_filtered_reply(m, all, &uid, &reply, error);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "(tuuussss)");
        if (r < 0)
                return r;
        LIST_FOREACH(sessions, s, b->set->sessions) {
                const Identity *id = &s->identity;
                if (!all && id->uid != uid)
                        continue;
                r = sd_bus_message_append(reply, "(tuuussss)", s->id, (uint32_t) id->uid,
                                          (uint32_t) id->gid, (uint32_t) id->pid,
                                          id->user_unit ? id->user_unit : id->unit ? id->unit : "",
                                          id->app_id ? id->app_id : "",
                                          id->container ? id->container : "", s->client_name);
                if (r < 0)
                        return r;
        }
        r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_list_sessions(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return authorize(userdata, m, POLKIT_ACTION_READ_ALL, UID_NONE, true, run_list_sessions, error);
}

static Session *session_from_message(Bus *b, sd_bus_message *m, sd_bus_error *error) {
        uint64_t id;
        Session *s;
        int r;

        r = sd_bus_message_rewind(m, true);
        if (r >= 0)
                r = sd_bus_message_read(m, "t", &id);
        if (r < 0) {
                sd_bus_error_set_errno(error, r);
                return NULL;
        }
        s = session_set_find(b->set, id);
        if (!s)
                sd_bus_error_setf(error, BUS_ERROR_NO_SUCH_SESSION, "No session %" PRIu64, id);
        return s;
}

static int run_get_session(Bus *b, sd_bus_message *m, bool all, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Session *s = session_from_message(b, m, error);
        int r;

        if (!s)
                return -ENOENT;
        r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = append_session(reply, s);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_session(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        Session *s = session_from_message(b, m, error);

        if (!s)
                return -ENOENT;
        return authorize(b, m, POLKIT_ACTION_READ_ALL, s->identity.uid, false, run_get_session, error);
}

static int run_get_accounting(Bus *b, sd_bus_message *m, bool all, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uid_t uid;
        Session *s;
        Account *a;
        int r;

        r = begin_filtered_reply(m, all, &uid, &reply, error);
        if (r < 0)
                return r;
        r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        LIST_FOREACH(sessions, s, b->set->sessions)
                if (r >= 0 && (all || s->identity.uid == uid))
                        r = append_session(reply, s);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        LIST_FOREACH(accounts, a, b->set->accounts.accounts)
                if (r >= 0 && (all || a->uid == uid))
                        r = append_account(reply, a);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_accounting(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return authorize(userdata, m, POLKIT_ACTION_READ_ALL, UID_NONE, true, run_get_accounting, error);
}

static int run_get_metrics(Bus *b, sd_bus_message *m, bool all, sd_bus_error *error) {
        _cleanup_free_ char *text = NULL;
        int r = metrics_format(b->set, METRICS_OPENMETRICS, &text);

        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, "s", text);
}

static int method_get_metrics(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        /* Aggregates per identity of every user: the read-all right. */
        return authorize(userdata, m, POLKIT_ACTION_READ_ALL, UID_NONE, false, run_get_metrics, error);
}

/* Reads SetLimits' a{sv} into l; bus_limit_apply() (bus-args.c) decides
 * what each entry may be. */
static int parse_limits(sd_bus_message *m, PolicyLimits *l, sd_bus_error *error) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                BusLimitValue v = {};
                const char *key;
                char err[512];

                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, NULL, &v.signature);
                if (r < 0)
                        return r;
                if (v.signature && strcmp(v.signature, "t") == 0)
                        r = sd_bus_message_read(m, "v", "t", &v.t);
                else if (v.signature && strcmp(v.signature, "u") == 0)
                        r = sd_bus_message_read(m, "v", "u", &v.u);
                else if (v.signature && strcmp(v.signature, "s") == 0)
                        r = sd_bus_message_read(m, "v", "s", &v.s);
                else if (v.signature && strcmp(v.signature, "b") == 0) {
                        int b;
                        r = sd_bus_message_read(m, "v", "b", &b);
                        v.b = b;
                }
                if (r < 0)
                        return r;
                /* A variant of another type is left unread: it is refused. */
                r = bus_limit_apply(l, key, &v, err, sizeof err);
                if (r < 0)
                        return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, err);
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

static int run_set_limits(Bus *b, sd_bus_message *m, bool all, sd_bus_error *error) {
        Session *s = session_from_message(b, m, error);
        PolicyLimits l;
        int r;

        if (!s)
                return -ENOENT;
        l = s->policy;
        r = parse_limits(m, &l, error);
        if (r < 0)
                return r;
        session_set_limits(s, &l);
        s->limits_overridden = true;
        {
                LogFields f = {};
                char caller[384];

                session_log_fields(s, &f);
                bus_caller_describe(m, caller, sizeof(caller), &f);
                log_struct(LOG_NOTICE, KFDBROKER_MESSAGE_LIMITS_SET, &f, "Session %" PRIu64 ": limits set over D-Bus by %s",
                           s->id, caller);
        }
        session_set_run_schedulers(b->set);
        return sd_bus_reply_method_return(m, NULL);
}

static int method_set_limits(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return authorize(userdata, m, POLKIT_ACTION_MANAGE, UID_NONE, false, run_set_limits, error);
}

static int run_terminate(Bus *b, sd_bus_message *m, bool all, sd_bus_error *error) {
        Session *s = session_from_message(b, m, error);
        const char *reason = NULL;
        char why[256];
        int r;

        if (!s)
                return -ENOENT;
        r = sd_bus_message_read(m, "s", &reason);
        if (r < 0)
                return r;
        {
                LogFields f = {};
                char caller[384];

                session_log_fields(s, &f);
                bus_caller_describe(m, caller, sizeof(caller), &f);
                bus_terminate_reason(caller, reason, why, sizeof why);
                log_struct(LOG_NOTICE, KFDBROKER_MESSAGE_SESSION_TERMINATED, &f, "Session %" PRIu64 ": %s", s->id,
                           why);
        }
        session_end(s, ECONNABORTED, why, false);
        return sd_bus_reply_method_return(m, NULL);
}

static int method_terminate(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        Session *s = session_from_message(b, m, error);

        if (!s)
                return -ENOENT;
        /* Users may end their own sessions; others need the manage right. */
        return authorize(b, m, POLKIT_ACTION_MANAGE, s->identity.uid, false, run_terminate, error);
}

static int run_reload(Bus *b, sd_bus_message *m, bool all, sd_bus_error *error) {
        char err[512] = "", caller[384];
        LogFields f = {};
        int r;

        /* Who asked; the outcome is logged by session_set_reload_policy(). */
        bus_caller_describe(m, caller, sizeof(caller), &f);
        log_struct(LOG_NOTICE, KFDBROKER_MESSAGE_POLICY_RELOAD_ASKED, &f, "Policy reload asked over D-Bus by %s", caller);
        r = session_set_reload_policy(b->set, "D-Bus", err, sizeof(err));

        if (r < 0)
                return sd_bus_error_setf(error, BUS_ERROR_POLICY_INVALID,
                                         "Policy not reloaded, the old policy stays: %s",
                                         err[0] ? err : strerror(-r));
        return sd_bus_reply_method_return(m, NULL);
}

static int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return authorize(userdata, m, POLKIT_ACTION_MANAGE, UID_NONE, false, run_reload, error);
}

/*
 * OpenSession: the session's identity is the caller's connection's, as the
 * bus records it (bus-creds.h) — asked with GetConnectionCredentials, without
 * blocking the loop. Its process (unit, cgroup, app id, container) is known
 * only through the bus's ProcessFD; without one it is unknown, and the
 * policy's rules on those keys do not match the session (policy.c).
 */
struct PendingOpen {
        Bus *bus;
        sd_bus_message *call;
        sd_bus_slot *slot;
        LIST_FIELDS(PendingOpen, opens);
};

static void pending_open_free(PendingOpen *p) {
        LIST_REMOVE(opens, p->bus->opens, p);
        sd_bus_slot_unref(p->slot);
        sd_bus_message_unref(p->call);
        free(p);
}

/* Makes the session; the reply's error or 0 (a socket was sent). */
static int open_session_for(Bus *b, sd_bus_message *call, const BusPeerCreds *pc, sd_bus_error *error) {
        _cleanup_(identity_done) Identity id = {};
        IdentityCreds c = bus_peer_creds_identity(pc);
        _cleanup_close_ int theirs = -EBADF;
        int sv[2], r;

        if (!pc->have_uid)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                        "Cannot determine the caller's uid: the bus did not tell it");
        if (pc->pidfd < 0 && !b->warned_no_process_fd) {
                /* Once: it is so for every caller of this bus. */
                b->warned_no_process_fd = true;
                log_notice("The bus gives no ProcessFD for its callers (dbus-daemon before 1.15): sessions opened "
                           "over D-Bus have no known unit, cgroup, app id or container, and policy rules on "
                           "Unit=, UserUnit=, CgroupPrefix=, AppId= or Container= do not match them");
        }
        r = identity_from_creds(&c, pc->pidfd, false, &id);
        if (r < 0)
                return r;
        if (pc->pidfd >= 0 && id.process_unknown)
                /* As a socket peer would be: unknown, it would escape the rules
                 * that restrict by unit or container. */
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                        "The caller's process has exited: its identity cannot be read");
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0)
                return -errno;
        theirs = sv[1];
        r = session_new(b->set, sv[0], &id, NULL);
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(call, "h", theirs);
}

static int on_open_credentials(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        _cleanup_(bus_peer_creds_done) BusPeerCreds pc = { .pidfd = -EBADF };
        sd_bus_error error = SD_BUS_ERROR_NULL;
        PendingOpen *p = userdata;
        int r;

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const sd_bus_error *e = sd_bus_message_get_error(reply);

                r = sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED,
                                      "Cannot determine the caller's credentials: %s",
                                      e && e->message ? e->message : "the bus did not answer");
        } else if ((r = bus_peer_creds_read(reply, &pc)) < 0)
                r = sd_bus_error_setf(&error, SD_BUS_ERROR_ACCESS_DENIED,
                                      "Cannot read the caller's credentials from the bus: %s", strerror(-r));
        else if (p->bus->set->shutting_down)
                r = sd_bus_error_set(&error, SD_BUS_ERROR_NO_SERVER, "kfdbrokerd is shutting down");
        else
                r = open_session_for(p->bus, p->call, &pc, &error);
        reply_result(p->call, r, &error);
        sd_bus_error_free(&error);
        pending_open_free(p);
        return 0;
}

static int method_open_session(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;
        const char *sender = sd_bus_message_get_sender(m);
        PendingOpen *p;
        int r;

        if (b->set->shutting_down)
                return sd_bus_error_set(error, SD_BUS_ERROR_NO_SERVER, "kfdbrokerd is shutting down");
        if (!sender)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "The call has no sender to identify");
        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (PendingOpen) { .bus = b, .call = sd_bus_message_ref(m) };
        LIST_PREPEND(opens, b->opens, p);
        r = sd_bus_call_method_async(b->bus, &p->slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                     "org.freedesktop.DBus", "GetConnectionCredentials", on_open_credentials, p,
                                     "s", sender);
        if (r < 0) {
                pending_open_free(p);
                return r;
        }
        return 1; /* replied from on_open_credentials */
}

/* ---- Properties ---- */

static int property_version(sd_bus *bus, const char *path, const char *interface,
                            const char *property, sd_bus_message *reply, void *userdata,
                            sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", KFDBROKER_VERSION);
}

static int property_devices(sd_bus *bus, const char *path, const char *interface,
                            const char *property, sd_bus_message *reply, void *userdata,
                            sd_bus_error *error) {
        Bus *b = userdata;
        int r;

        /* Every GPU served, in index order; none without a GPU (SessionSet.no_device). */
        r = sd_bus_message_open_container(reply, 'a', "(sssuuuut)");
        for (unsigned g = 0; r >= 0 && g < b->set->n_gpus; g++) {
                const GpuDeviceInfo *i = b->set->gpus[g].info;
                r = sd_bus_message_append(reply, "(sssuuuut)", i->backend, i->gfx_name, i->name,
                                          i->gpu_id, i->vendor_id, i->device_id, i->cu_count,
                                          i->vram_size);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int property_session_count(sd_bus *bus, const char *path, const char *interface,
                                  const char *property, sd_bus_message *reply, void *userdata,
                                  sd_bus_error *error) {
        Bus *b = userdata;
        return sd_bus_message_append(reply, "u", b->set->n_sessions);
}

static const sd_bus_vtable broker_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Devices", "a(sssuuuut)", property_devices, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("SessionCount", "u", property_session_count, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_METHOD_WITH_NAMES("ListSessions", "", , "a(tuuussss)", SD_BUS_PARAM(sessions),
                                 method_list_sessions, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetSession", "t", SD_BUS_PARAM(id), "a{sv}", SD_BUS_PARAM(session),
                                 method_get_session, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetAccounting", "", , "aa{sv}aa{sv}",
                                 SD_BUS_PARAM(sessions) SD_BUS_PARAM(identities),
                                 method_get_accounting, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("GetMetrics", "", , "s", SD_BUS_PARAM(openmetrics),
                                 method_get_metrics, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("SetLimits", "ta{sv}", SD_BUS_PARAM(id) SD_BUS_PARAM(limits), "", ,
                                 method_set_limits, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("TerminateSession", "ts", SD_BUS_PARAM(id) SD_BUS_PARAM(reason), "", ,
                                 method_terminate, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("ReloadPolicy", "", "", method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_NAMES("OpenSession", "", , "h", SD_BUS_PARAM(socket), method_open_session,
                                 SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL_WITH_NAMES("SessionOpened", "tus", SD_BUS_PARAM(id) SD_BUS_PARAM(uid) SD_BUS_PARAM(unit), 0),
        SD_BUS_SIGNAL_WITH_NAMES("SessionClosed", "ts", SD_BUS_PARAM(id) SD_BUS_PARAM(reason), 0),
        SD_BUS_SIGNAL_WITH_NAMES("JobFailed", "ttis",
                                 SD_BUS_PARAM(session) SD_BUS_PARAM(fence) SD_BUS_PARAM(errno) SD_BUS_PARAM(message), 0),
        SD_BUS_SIGNAL_WITH_NAMES("DeviceFault", "tts",
                                 SD_BUS_PARAM(session) SD_BUS_PARAM(fence) SD_BUS_PARAM(message), 0),
        SD_BUS_VTABLE_END,
};

/* ---- Signals ---- */

void bus_emit_session_opened(Bus *b, Session *s) {
        const Identity *id = &s->identity;

        (void) sd_bus_emit_signal(b->bus, BUS_PATH, BUS_INTERFACE, "SessionOpened", "tus", s->id,
                                  (uint32_t) id->uid,
                                  id->user_unit ? id->user_unit : id->unit ? id->unit : "");
        (void) sd_bus_emit_properties_changed(b->bus, BUS_PATH, BUS_INTERFACE, "SessionCount", NULL);
}

void bus_emit_session_closed(Bus *b, Session *s, const char *reason) {
        (void) sd_bus_emit_signal(b->bus, BUS_PATH, BUS_INTERFACE, "SessionClosed", "ts", s->id,
                                  reason ? reason : "");
        (void) sd_bus_emit_properties_changed(b->bus, BUS_PATH, BUS_INTERFACE, "SessionCount", NULL);
}

void bus_emit_job_failed(Bus *b, Session *s, uint64_t fence, int error, const char *message) {
        (void) sd_bus_emit_signal(b->bus, BUS_PATH, BUS_INTERFACE, "JobFailed", "ttis", s->id, fence,
                                  (int32_t) error, message ? message : "");
        if (error == EFAULT)
                (void) sd_bus_emit_signal(b->bus, BUS_PATH, BUS_INTERFACE, "DeviceFault", "tts", s->id,
                                          fence, message ? message : "");
}

/* ---- Setup ---- */

static int request_name(Bus *b);

/* The bus re-read its configuration (or could not): ask for the name again,
 * once. */
static int on_config_reloaded(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Bus *b = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        int r;

        b->name_slot = sd_bus_slot_unref(b->name_slot);
        if (e)
                log_warning("The bus did not re-read its configuration (ReloadConfig: %s)",
                            e->message ? e->message : e->name);
        r = request_name(b);
        if (r < 0) {
                log_error_errno(r, "Cannot ask the bus for the name %s: %m", BUS_NAME);
                if (b->cb.shutdown)
                        b->cb.shutdown(b->cb.userdata, r);
        }
        return 0;
}

/*
 * The name is refused: the bus policy (dbus-1/system.d/org.kfdbroker.Broker1.conf)
 * grants it to the user kfdbroker, and dbus-daemon resolves user names when it
 * reads its configuration, dropping a rule whose user does not exist yet
 * ("Unknown username" in its log). It reads system.d when a file appears
 * there, which on an install is before systemd-sysusers has made the user, and
 * never again when a user is made (dbus-daemon(1), "SIGHUP ... ReloadConfig":
 * the configuration is re-read only on those or an inotify event in its
 * directories). So the first refusal asks the bus to re-read it —
 * org.freedesktop.DBus.ReloadConfig, which the stock system.conf lets anyone
 * call and which answers once the new configuration is in force (Debian's dbus
 * package calls it from its dpkg trigger for the same reason) — and the name
 * is asked for again; a second refusal is final.
 */
static int on_name_acquired(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error) {
        Bus *b = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        int r;

        b->name_slot = sd_bus_slot_unref(b->name_slot);
        if (!e) {
                log_info("Serving %s on the bus", BUS_NAME);
                return 0;
        }
        if (!b->reloaded_config && sd_bus_error_has_name(e, SD_BUS_ERROR_ACCESS_DENIED)) {
                b->reloaded_config = true;
                log_notice("The bus refused the name %s (%s); asking it to re-read its configuration, which may "
                           "predate the user this daemon runs as",
                           BUS_NAME, e->message ? e->message : e->name);
                r = sd_bus_call_method_async(b->bus, &b->name_slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "ReloadConfig", on_config_reloaded, b, NULL);
                if (r >= 0)
                        return 0;
                log_warning_errno(r, "Cannot ask the bus to re-read its configuration: %m");
        }
        log_error("Cannot own the D-Bus name %s: %s%s", BUS_NAME, e->message ? e->message : e->name,
                  b->reloaded_config ? " (also after the bus re-read its configuration: does its policy, "
                                       "dbus-1/system.d/" BUS_NAME ".conf, grant it to this user?)"
                                     : "");
        if (b->cb.shutdown)
                b->cb.shutdown(b->cb.userdata, sd_bus_error_get_errno(e) > 0 ? -sd_bus_error_get_errno(e) : -EACCES);
        return 0;
}

static int request_name(Bus *b) {
        return sd_bus_request_name_async(b->bus, &b->name_slot, BUS_NAME, 0, on_name_acquired, b);
}

/* Before any message is dispatched: what the GPU finished is retired first,
 * so a client that saw its job done on its fence page sees it counted here
 * (context_catch_up()). */
static int on_message(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Bus *b = userdata;

        /* Without a GPU every method of the interface but ReloadPolicy (so
         * that `systemctl reload` works) is answered with the reason; the
         * properties and introspection still answer. */
        if (b->set->no_device) {
                if (sd_bus_message_is_method_call(m, BUS_INTERFACE, NULL) &&
                    !sd_bus_message_is_method_call(m, BUS_INTERFACE, "ReloadPolicy")) {
                        int r = sd_bus_reply_method_errorf(m, BUS_ERROR_NO_DEVICE, "%s", b->set->no_device);
                        return r < 0 ? r : 1;
                }
                return 0;
        }
        for (unsigned g = 0; g < b->set->n_gpus; g++)
                context_catch_up(context_pool_device(b->set->gpus[g].contexts));
        return 0;
}

int bus_new(sd_event *event, SessionSet *set, BusChoice which, const BusCallbacks *cb, Bus **ret) {
        Bus *b;
        int r;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->set = set;
        if (cb)
                b->cb = *cb;
        r = which == BUS_SYSTEM ? sd_bus_open_system(&b->bus) : sd_bus_open_user(&b->bus);
        if (r < 0)
                goto fail;
        r = sd_bus_attach_event(b->bus, event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                goto fail;
        r = sd_bus_add_filter(b->bus, NULL, on_message, b);
        if (r < 0)
                goto fail;
        r = sd_bus_add_object_vtable(b->bus, &b->vtable_slot, BUS_PATH, BUS_INTERFACE, broker_vtable, b);
        if (r < 0)
                goto fail;
        r = request_name(b);
        if (r < 0)
                goto fail;
        *ret = b;
        return 0;
fail:
        bus_free(b);
        return r;
}

Bus *bus_free(Bus *b) {
        if (!b)
                return NULL;
        while (b->pending)
                pending_free(b->pending);
        while (b->opens)
                pending_open_free(b->opens);
        sd_bus_slot_unref(b->vtable_slot);
        sd_bus_slot_unref(b->name_slot);
        if (b->bus) {
                sd_bus_flush(b->bus);
                sd_bus_detach_event(b->bus);
                sd_bus_flush_close_unref(b->bus);
        }
        free(b);
        return NULL;
}
