/* SPDX-License-Identifier: MIT */
/*
 * File descriptor budgets: no one user may make the daemon hold so many fds
 * that another user cannot connect or allocate (issue 13: one user's 5
 * sessions of 4096 buffers took every fd of a daemon whose limit was 20000,
 * and everyone else was refused).
 *
 * What is counted, per session and for its uid (the user's Tally): the
 * session's own fds (its socket, SESSION_FDS; its session page's eventfd,
 * and memfd until handed out, session-page-open.c), the fds of replies queued for it (a dma-buf each, until the
 * client reads them), the fds the kernel-call table keeps per buffer
 * (GpuDeviceInfo.fds_per_buffer: 0 on the kernel, 1 on the simulator) for
 * each buffer, pooled buffer and code object, and one per probe of a freed
 * exported buffer (session-quota.c).
 *
 * The budgets, fixed at start from RLIMIT_NOFILE (main.c raises it to the
 * hard limit) and the fds already open then (base):
 *  - a reserve, max(32, (limit - base) / 8), that no buffer may take: what
 *    new connections, client GPU contexts and the daemon itself need;
 *  - per user, --max-fds-per-user=, by default half of what is left, so that
 *    one user leaves at least as much to everyone else as it may take;
 *  - per session, --max-fds-per-session=, by default half of the user's, so
 *    that one session (one program) leaves as much to the user's others.
 * A request that would put its user or its session over the budget is
 * refused with EDQUOT (a quota, as the other caps); one that would eat into the reserve
 * with EMFILE (the daemon is short of fds whoever asks). A connection that
 * would put its user over the budget is refused with EUSERS, as one over
 * --max-connections-per-user is.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/resource.h>

#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/macro.h"

/* The fds open in this process now (/proc/self/fd, less the directory's own). */
static uint64_t count_open_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        uint64_t n = 0;

        if (!d)
                return 0;
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        return n > 0 ? n - 1 : 0;
}

void session_set_init_fds(SessionSet *set, uint64_t max_fds_per_user, uint64_t max_fds_per_session) {
        struct rlimit rl;
        uint64_t usable;

        set->fd_limit = UINT64_MAX;
        set->fd_base = count_open_fds();
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                set->fd_limit = (uint64_t) rl.rlim_cur;
        usable = set->fd_limit > set->fd_base ? set->fd_limit - set->fd_base : 0;
        set->fd_reserve = set->fd_limit == UINT64_MAX ? 0 : MIN(MAX(32u, usable / 8), usable / 2);
        if (max_fds_per_user > 0)
                set->max_fds_per_user = max_fds_per_user;
        else
                set->max_fds_per_user = set->fd_limit == UINT64_MAX ? UINT64_MAX : (usable - set->fd_reserve) / 2;
        set->default_limits.max_user_fds = set->max_fds_per_user;
        if (max_fds_per_session > 0)
                set->max_fds_per_session = max_fds_per_session;
        else
                set->max_fds_per_session =
                        set->max_fds_per_user == UINT64_MAX ? UINT64_MAX : MAX(set->max_fds_per_user / 2, (uint64_t) 16);
        set->default_limits.max_session_fds = set->max_fds_per_session;
}

void session_account_fds(Session *s, int64_t delta) {
        s->fds += (uint64_t) delta;
        s->set->fds_held += (uint64_t) delta;
        if (s->user_tally)
                s->user_tally->fds += (uint64_t) delta;
}

unsigned session_buffer_fds(const Session *s) {
        return s->gpu->info ? s->gpu->info->fds_per_buffer : 0;
}

static uint64_t user_fds(const Session *s) {
        return s->user_tally ? s->user_tally->fds : s->fds;
}

static bool over_user_budget(const Session *s, uint64_t n) {
        uint64_t held = user_fds(s);

        return held > s->set->max_fds_per_user || n > s->set->max_fds_per_user - held;
}

static bool over_session_budget(const Session *s, uint64_t n) {
        return s->fds > s->set->max_fds_per_session || n > s->set->max_fds_per_session - s->fds;
}

static bool into_reserve(const SessionSet *set, uint64_t n) {
        uint64_t usable;

        if (set->fd_limit == UINT64_MAX)
                return false;
        usable = set->fd_limit - MIN(set->fd_limit, set->fd_base + set->fd_reserve);
        return set->fds_held > usable || n > usable - set->fds_held;
}

/* Freed buffers may be let go of first: the pools of the user's sessions,
 * and the probes of freed exported buffers no copy of which is left. */
static void refresh_user(Session *s) {
        Session *o;

        LIST_FOREACH(sessions, o, s->set->sessions)
                if (o == s || (s->user_tally && o->user_tally == s->user_tally)) {
                        session_pool_drop(o);
                        session_refresh_released(o);
                }
}

bool session_check_fds(Session *s, uint64_t id, uint64_t n, const char *what) {
        SessionSet *set = s->set;

        if (n == 0)
                return true;
        if (over_user_budget(s, n) || over_session_budget(s, n) || into_reserve(set, n))
                refresh_user(s);
        if (over_user_budget(s, n)) {
                session_send_error(s, id, EDQUOT,
                                   "per-user file descriptor budget (kfdbrokerd --max-fds-per-user=%" PRIu64 ") reached: "
                                   "uid %u makes the daemon hold %" PRIu64 " fds in %u sessions; %s needs %" PRIu64 " more",
                                   set->max_fds_per_user, (unsigned) s->identity.uid, user_fds(s),
                                   s->user_tally ? s->user_tally->sessions : 1u, what, n);
                return false;
        }
        if (over_session_budget(s, n)) {
                session_send_error(s, id, EDQUOT,
                                   "per-session file descriptor budget (kfdbrokerd --max-fds-per-session=%" PRIu64 ") reached: "
                                   "session %" PRIu64 " makes the daemon hold %" PRIu64 " fds; %s needs %" PRIu64 " more",
                                   set->max_fds_per_session, s->id, s->fds, what, n);
                return false;
        }
        if (into_reserve(set, n)) {
                session_send_error(s, id, EMFILE,
                                   "the daemon is short of file descriptors: %" PRIu64 " of its %" PRIu64 " are held for "
                                   "sessions and %" PRIu64 " are kept for new connections; %s needs %" PRIu64 " more",
                                   set->fds_held, set->fd_limit, set->fd_reserve, what, n);
                return false;
        }
        return true;
}

int session_check_connection_fds(SessionSet *set, const Session *s, char *msg, size_t msglen) {
        /* A session that will ask for its page (every client without the
         * lazy session bit, at Hello) is to find room for it. */
        if (!over_user_budget(s, SESSION_FDS + SESSION_PAGE_FDS))
                return 0;
        snprintf(msg, msglen,
                 "too many file descriptors: uid %u makes the daemon hold %" PRIu64 " (kfdbrokerd --max-fds-per-user=%" PRIu64 ")",
                 (unsigned) s->identity.uid, user_fds(s), set->max_fds_per_user);
        return -EUSERS;
}
