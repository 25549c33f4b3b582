/* SPDX-License-Identifier: MIT */
/* See session-set.h. */
#include "sessions/session-set.h"

#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include "config.h"
#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/log-ratelimit.h"
#include "util/macro.h"
#include "util/time-util.h"

static const WireLimits default_limits = {
        .max_buffer_size = 1ull << 30,
        .max_buffer_bytes = 4ull << 30,
        .max_buffers = 4096,
        .max_events = KFDB_PAGE_MAX_EVENTS,
        .max_jobs_in_flight = 4096,
        .max_jobs_per_submit = WIRE_MAX_JOBS,
        .max_message_size = WIRE_MAX_MESSAGE_SIZE,
        .max_wait_events = WIRE_MAX_WAIT_EVENTS,
        .max_pending_waits = WIRE_MAX_PENDING_WAITS,
};

/* UserBuffers= where no rule sets it: each buffer of the simulated GPU holds
 * a daemon fd, so no one user may hold more than a quarter of the fds the
 * daemon may open (RLIMIT_NOFILE, raised to its hard limit at start) —
 * others can still connect and allocate (issue 13: 5 sessions of 4096 buffers
 * of one user took every fd of a daemon whose limit was 20000). */
static void default_user_buffers(PolicyLimits *l) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                l->user_buffers = MIN(l->user_buffers, (uint64_t) rl.rlim_cur / 4);
}

/* Once per load: the rules that cannot match, FILE:LINE each. */
static void log_policy_warnings(const Policy *p) {
        for (size_t i = 0; i < policy_n_warnings(p); i++)
                log_warning("Policy: %s", policy_warning(p, i));
}

void session_set_init_memory(SessionSet *set, uint64_t vram_size, bool copies_visible) {
        char u[32], b[32];

        policy_limits_fit_device(&set->default_policy, vram_size, copies_visible);
        log_info("Default memory limits: UserBufferMemory=%s, BufferMemory=%s (%s)",
                 policy_format_bytes(set->default_policy.user_buffer_memory, u, sizeof(u)),
                 policy_format_bytes(set->default_policy.buffer_memory, b, sizeof(b)),
                 !copies_visible ? "not fitted to the GPU: this device cannot tell when a buffer's last copy goes"
                 : vram_size == 0 ? "not fitted to the GPU: its VRAM size is not known"
                                  : "fitted to the GPU's VRAM");
}

int session_set_init(SessionSet *set, const char *const *policy_dirs, char *err, size_t errlen) {
        static const char *const standard_dirs[] = { POLICY_DIR_ETC, POLICY_DIR_RUN, POLICY_DIR_VENDOR, NULL };
        const char *const *dirs = policy_dirs ? policy_dirs : standard_dirs;
        size_t n = 0;
        int r;

        fence_watch_init(&set->fence_watch);
        set->default_limits = default_limits;
        /* No fd budgets until session_set_init_fds() fixes them. */
        set->fd_limit = set->max_fds_per_user = set->max_fds_per_session = UINT64_MAX;
        set->default_limits.max_user_fds = set->default_limits.max_session_fds = UINT64_MAX;
        policy_limits_default(&set->default_policy);
        default_user_buffers(&set->default_policy);
        set->start_ns = now_ns();
        while (dirs[n])
                n++;
        set->policy_dirs = calloc(n + 1, sizeof(char *));
        if (!set->policy_dirs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!(set->policy_dirs[i] = strdup(dirs[i])))
                        return -ENOMEM;
        r = policy_load((const char *const *) set->policy_dirs, &set->policy, err, errlen);
        if (r < 0)
                return r;
        log_policy_warnings(set->policy);
        log_info("Policy: %zu rules from %zu files", policy_n_rules(set->policy), policy_n_files(set->policy));
        return 0;
}

/* Makes every session opened before cutoff established. The list holds the
 * newest first, and every session before the last cutoff grew up then. */
static void grow_up_sessions(SessionSet *set, uint64_t cutoff) {
        Session *s;

        LIST_FOREACH(sessions, s, set->sessions) {
                if (s->opened_ns < set->grown_up_before_ns)
                        break;
                if (!s->young || s->opened_ns >= cutoff)
                        continue;
                s->young = false;
                set->n_young--;
                (void) sd_event_source_set_priority(s->io, SD_EVENT_PRIORITY_NORMAL);
        }
        set->grown_up_before_ns = cutoff;
}

static int on_grow_up(sd_event_source *src, uint64_t usec, void *userdata) {
        SessionSet *set = userdata;
        uint64_t now = now_ns();

        grow_up_sessions(set, now - SESSION_YOUNG_NS + 1);
        if (set->n_young == 0)
                return 0; /* a one-shot timer: off until the next young session */
        /* The oldest young session is at most a timer period younger. */
        if (sd_event_source_set_time_relative(src, SESSION_YOUNG_NS / 2000) < 0 ||
            sd_event_source_set_enabled(src, SD_EVENT_ONESHOT) < 0)
                grow_up_sessions(set, UINT64_MAX);
        return 0;
}

static void arm_grow_up(SessionSet *set) {
        int r;

        if (!set->grow_up) {
                r = sd_event_add_time_relative(set->event, &set->grow_up, CLOCK_MONOTONIC, SESSION_YOUNG_NS / 1000,
                                               SESSION_YOUNG_NS / 5000, on_grow_up, set);
                if (r < 0)
                        goto fail;
                (void) sd_event_source_set_description(set->grow_up, "sessions-grow-up");
                /* Before the sessions it serves, so that it is not starved by them. */
                (void) sd_event_source_set_priority(set->grow_up, SD_EVENT_PRIORITY_NORMAL - 1);
                return;
        }
        r = sd_event_source_get_enabled(set->grow_up, NULL);
        if (r > 0)
                return;
        r = sd_event_source_set_time_relative(set->grow_up, SESSION_YOUNG_NS / 1000);
        if (r >= 0)
                r = sd_event_source_set_enabled(set->grow_up, SD_EVENT_ONESHOT);
        if (r >= 0)
                return;
fail:
        /* No timer: the session is served as established from the start. */
        log_debug_errno(r, "sessions: cannot arm the grow-up timer: %m");
        grow_up_sessions(set, UINT64_MAX);
}

void session_set_add_young(SessionSet *set, Session *s) {
        if (sd_event_source_set_priority(s->io, SESSION_PRIORITY_YOUNG) < 0)
                return;
        s->young = true;
        set->n_young++;
        arm_grow_up(set);
}

void session_set_forget_young(SessionSet *set, Session *s) {
        if (!s->young)
                return;
        s->young = false;
        set->n_young--;
}

void session_set_done(SessionSet *set) {
        while (set->sessions)
                session_end(set->sessions, ESHUTDOWN, "daemon exiting", true);
        set->grow_up = sd_event_source_disable_unref(set->grow_up);
        set->turn = sd_event_source_disable_unref(set->turn);
        account_table_done(&set->accounts);
        session_set_drop_kept(set);
        tally_table_done(&set->tallies);
        log_ratelimit_flush(log_ratelimit_global(), NULL);
        policy_free(set->policy);
        set->policy = NULL;
        free(set->socket_path);
        set->socket_path = NULL;
        if (set->policy_dirs)
                for (char **d = set->policy_dirs; *d; d++)
                        free(*d);
        free(set->policy_dirs);
        set->policy_dirs = NULL;
        fence_watch_done(&set->fence_watch);
}

Session *session_set_find(SessionSet *set, uint64_t id) {
        Session *s;

        LIST_FOREACH(sessions, s, set->sessions)
                if (s->id == id)
                        return s;
        return NULL;
}

SessionGpu *session_set_gpu(SessionSet *set, unsigned index) {
        return index < set->n_gpus ? &set->gpus[index] : NULL;
}

void session_set_run_schedulers(SessionSet *set) {
        for (unsigned g = 0; g < set->n_gpus; g++)
                scheduler_run(set->gpus[g].scheduler);
}

int session_set_reload_policy(SessionSet *set, const char *origin, char *err, size_t errlen) {
        LogFields f = {};
        Policy *p = NULL;
        Session *s;
        int r;

        if (errlen > 0)
                err[0] = '\0';
        log_fields_add(&f, "KFDBROKER_RELOAD_ORIGIN=%s", origin);
        r = policy_load((const char *const *) set->policy_dirs, &p, err, errlen);
        if (r < 0) {
                log_struct_errno(LOG_ERR, r, KFDBROKER_MESSAGE_POLICY_RELOAD_FAILED, &f,
                                 "Policy reload (%s) refused, keeping the old policy: %s", origin,
                                 err[0] ? err : strerror(-r));
                /* `systemctl status` shows STATUS=, so the operator whose
                 * `systemctl reload` failed reads why there (sd_notify(3)). */
                (void) sd_notifyf(false, "STATUS=Policy reload failed, old policy kept: %s",
                                  err[0] ? err : strerror(-r));
                set->policy_reload_failed = true;
                return r == -EINVAL ? -EBADMSG : r;
        }
        log_policy_warnings(p);
        if (set->policy_reload_failed) {
                (void) sd_notifyf(false, "STATUS=Policy reloaded (%s): %zu rules from %zu files%s", origin,
                                  policy_n_rules(p), policy_n_files(p),
                                  policy_n_warnings(p) ? ", with warnings (see the journal)" : "");
                set->policy_reload_failed = false;
        }
        policy_free(set->policy);
        set->policy = p;
        LIST_FOREACH(sessions, s, set->sessions)
                session_apply_policy(s);
        /* A session on a GPU Devices= no longer allows (its own, or one it
         * has buffers or jobs on) ends, saying so. */
        {
                Session *next;

                LIST_FOREACH_SAFE(sessions, s, next, set->sessions) {
                        char devices[200], why[320];
                        const SessionGpu *barred = NULL;

                        if (!s->hello_done || !s->gpu)
                                continue;
                        for (unsigned g = 0; g < SESSION_MAX_GPUS && !barred; g++)
                                if (s->on[g] && !session_may_use_gpu(s, s->on[g]->gpu))
                                        barred = s->on[g]->gpu;
                        if (!barred)
                                continue;
                        snprintf(why, sizeof why, "the policy no longer lets this session use GPU %u (Devices=%s)",
                                 barred->index,
                                 policy_limit_format(POLICY_LIMIT_DEVICES, &s->policy, devices, sizeof devices));
                        session_end(s, EACCES, why, false);
                }
        }
        /* Weights may have changed. */
        session_set_run_schedulers(set);
        log_fields_add(&f, "KFDBROKER_POLICY_RULES=%zu", policy_n_rules(p));
        log_fields_add(&f, "KFDBROKER_POLICY_FILES=%zu", policy_n_files(p));
        log_struct(LOG_INFO, KFDBROKER_MESSAGE_POLICY_RELOADED, &f,
                   "Policy loaded (%s): %zu rules from %zu files; %u sessions re-evaluated", origin,
                   policy_n_rules(p), policy_n_files(p), set->n_sessions);
        return 0;
}

void session_set_flush(SessionSet *set) {
        Session *s;

        LIST_FOREACH(sessions, s, set->sessions)
                session_flush(s);
}

void session_set_context_lost(SessionSet *set, Context *ctx, const char *reason) {
        Session *s, *next;

        for (s = set->sessions; s; s = next) {
                next = s->sessions_next;
                session_context_lost(s, ctx, reason);
        }
}

unsigned session_set_end_gpu(SessionSet *set, unsigned index, const char *why) {
        Session *s, *next;
        unsigned n = 0;

        for (s = set->sessions; s; s = next) {
                next = s->sessions_next;
                if (index < SESSION_MAX_GPUS && s->on[index]) {
                        session_end(s, ESHUTDOWN, why, true);
                        n++;
                }
        }
        return n;
}
