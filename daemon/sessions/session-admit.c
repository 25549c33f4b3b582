/* SPDX-License-Identifier: MIT */
/*
 * Taking new connections, at most max_connect_rate_per_user a second from one
 * uid (kfdbrokerd --max-connect-rate-per-user=N). Setting a session up costs
 * the loop about 0.1 ms of CPU (its identity from /proc, the session page,
 * the Hello and, soon after, the hang-up): a user connecting in a loop from a
 * few processes would otherwise keep the loop busy, and every other client
 * waiting for it. Connections over the rate are not refused — a client that
 * connects often is slowed down, not failed — but wait, oldest first, until
 * their user's turn; the uid is the kernel's (SO_PEERCRED), read before
 * anything costly. A user with as many connections waiting as it may hold
 * (max_connections_per_user, else MAX_WAITING) is refused with EUSERS.
 *
 * The peer's pidfd is taken at once, before a connection waits: on a kernel
 * without SO_PEERPIDFD (before Linux 6.5) it is pidfd_open() of the pid that
 * connected, and the longer that waits, the likelier the connecting process
 * has exited and another got its pid (identity-peer.c).
 *
 * The rate is the generic cell rate algorithm (ITU-T I.371; the "virtual
 * scheduling" form): a theoretical arrival time per user, which moves
 * 1/rate s later with each connection taken; a connection may be taken while
 * that time is less than a second ahead of now (a burst of `rate`). It lives in the
 * user's Tally, which stays while it is ahead.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "policy/identity.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/log-ratelimit.h"
#include "util/macro.h"
#include "util/time-util.h"

#define NSEC_PER_SEC 1000000000ull
/* Connections one user may have waiting where no connection cap is set. */
#define MAX_WAITING 128u

static uint64_t emission_interval(const SessionSet *set) {
        return NSEC_PER_SEC / set->max_connect_rate_per_user;
}

/* 0 if t may have a connection taken now, else the time it may: while the
 * theoretical arrival time is at most the burst tolerance ahead, a second's
 * worth of connections less one interval (so that the burst is `rate`). */
static uint64_t next_turn(const SessionSet *set, const Tally *t, uint64_t now) {
        uint64_t tat = MAX(t->connect_tat_ns, now), tolerance = NSEC_PER_SEC - emission_interval(set);

        return tat - now > tolerance ? tat - tolerance : 0;
}

/* next_turn(), and a turn taken when it is now. */
static uint64_t take_turn(const SessionSet *set, Tally *t, uint64_t now) {
        uint64_t when = next_turn(set, t, now);

        if (when == 0)
                t->connect_tat_ns = MAX(t->connect_tat_ns, now) + emission_interval(set);
        return when;
}

/* Takes fd, and closes pidfd. */
static void start_session(SessionSet *set, int fd, int pidfd, bool pidfd_exact) {
        int r = session_new_from_peer(set, fd, pidfd, pidfd_exact, NULL);

        safe_close(pidfd);
        if (r < 0 && r != -EUSERS) /* a refusal over the connection limit is logged already */
                log_ratelimited_errno(NULL, NULL, LOG_WARNING, r, "Failed to set up a session: %m");
}

static int push_waiting(Tally *t, TallyWaiting c) {
        if (t->n_waiting == t->n_waiting_alloc) {
                unsigned n = MAX(8u, t->n_waiting_alloc * 2);
                TallyWaiting *w = malloc(n * sizeof(TallyWaiting));

                if (!w)
                        return -ENOMEM;
                for (unsigned i = 0; i < t->n_waiting; i++)
                        w[i] = t->waiting[(t->waiting_head + i) % t->n_waiting_alloc];
                free(t->waiting);
                t->waiting = w;
                t->n_waiting_alloc = n;
                t->waiting_head = 0;
        }
        t->waiting[(t->waiting_head + t->n_waiting) % t->n_waiting_alloc] = c;
        t->n_waiting++;
        return 0;
}

static TallyWaiting pop_waiting(Tally *t) {
        TallyWaiting c = t->waiting[t->waiting_head];

        t->waiting_head = (t->waiting_head + 1) % t->n_waiting_alloc;
        t->n_waiting--;
        return c;
}

static int on_turn(sd_event_source *src, uint64_t usec, void *userdata);

/* Wakes up at @when (ns), or earlier if already armed for earlier. */
static void arm_turn(SessionSet *set, uint64_t when) {
        uint64_t usec = when / 1000 + 1, armed;
        int r;

        if (!set->turn) {
                r = sd_event_add_time(set->event, &set->turn, CLOCK_MONOTONIC, usec, 1000, on_turn, set);
                if (r >= 0)
                        (void) sd_event_source_set_description(set->turn, "sessions-turn");
        } else if (sd_event_source_get_enabled(set->turn, NULL) > 0 &&
                   sd_event_source_get_time(set->turn, &armed) >= 0 && armed <= usec)
                return;
        else {
                r = sd_event_source_set_time(set->turn, usec);
                if (r >= 0)
                        r = sd_event_source_set_enabled(set->turn, SD_EVENT_ONESHOT);
        }
        if (r < 0) /* the connections would wait for the next one: better late than never */
                log_warning_errno(r, "Cannot arm the timer for waiting connections: %m");
}

/* The connections whose turn has come, taken out of every Tally first: a
 * session set up may drop Tallies, so none is walked while that happens. */
static int on_turn(sd_event_source *src, uint64_t usec, void *userdata) {
        SessionSet *set = userdata;
        uint64_t now = now_ns(), next = UINT64_MAX;
        _cleanup_free_ TallyWaiting *ready = NULL;
        unsigned n_ready = 0, n_waiting = 0;
        Tally *t;

        LIST_FOREACH(tallies, t, set->tallies.tallies)
                n_waiting += t->n_waiting;
        if (n_waiting == 0)
                return 0;
        ready = malloc(n_waiting * sizeof(TallyWaiting));
        if (!ready) {
                arm_turn(set, now + 10 * 1000000ull);
                return 0;
        }
        LIST_FOREACH(tallies, t, set->tallies.tallies)
                while (t->n_waiting > 0) {
                        uint64_t when = take_turn(set, t, now);

                        if (when) {
                                next = MIN(next, when);
                                break;
                        }
                        ready[n_ready++] = pop_waiting(t);
                }
        if (next != UINT64_MAX)
                arm_turn(set, next);
        for (unsigned i = 0; i < n_ready; i++)
                start_session(set, ready[i].fd, ready[i].pidfd, ready[i].pidfd_exact);
        return 0;
}

/* The journal fields of a connection not yet a session, in f. */
static const LogFields *peer_fields(LogFields *f, const struct ucred *cred) {
        log_fields_add(f, "KFDBROKER_UID=%u", (unsigned) cred->uid);
        log_fields_add(f, "KFDBROKER_PID=%d", (int) cred->pid);
        return f;
}

static void refuse(Tally *t, TallyWaiting c, const struct ucred *cred, unsigned limit) {
        LogFields fields = {};
        char msg[200];

        snprintf(msg, sizeof(msg),
                 "too many connections: uid %u has %u waiting for their turn (kfdbrokerd --max-connect-rate-per-user)",
                 (unsigned) cred->uid, limit);
        log_struct_ratelimited(&t->log_limit, t->key, LOG_NOTICE, EUSERS, KFDBROKER_MESSAGE_SESSION_REFUSED,
                               peer_fields(&fields, cred), "Refusing a connection: %s", msg);
        wire_refuse(c.fd, EUSERS, msg);
        safe_close(c.fd);
        safe_close(c.pidfd);
}

void session_set_admit(SessionSet *set, int fd) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        uint64_t now, when;
        unsigned limit;
        char key[32];
        TallyWaiting c = { .fd = fd };
        Tally *t;

        /* Before anything else (see the top of the file); without one the
         * session's process is unknown, or pinned later by SO_PEERPIDFD. */
        c.pidfd = identity_peer_pidfd(fd, &c.pidfd_exact);
        if (c.pidfd < 0)
                log_debug_errno(c.pidfd, "No pidfd for a new connection's peer: %m");
        if (set->max_connect_rate_per_user == 0 ||
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                start_session(set, c.fd, c.pidfd, c.pidfd_exact);
                return;
        }
        snprintf(key, sizeof(key), "uid %u", (unsigned) cred.uid);
        if (tally_table_get(&set->tallies, key, &t) < 0) {
                start_session(set, c.fd, c.pidfd, c.pidfd_exact);
                return;
        }
        now = now_ns();
        if (t->n_waiting == 0 && take_turn(set, t, now) == 0) {
                tally_unref(&set->tallies, t);
                start_session(set, c.fd, c.pidfd, c.pidfd_exact);
                return;
        }
        limit = set->max_connections_per_user ? set->max_connections_per_user : MAX_WAITING;
        if (t->n_waiting >= limit || push_waiting(t, c) < 0)
                refuse(t, c, &cred, t->n_waiting);
        else {
                if (t->n_waiting == 1) {
                        LogFields fields = {};

                        log_fields_add(&fields, "KFDBROKER_CONNECT_RATE=%u", set->max_connect_rate_per_user);
                        log_struct_ratelimited(&t->log_limit, t->key, LOG_NOTICE, 0,
                                               KFDBROKER_MESSAGE_CONNECTIONS_THROTTLED, peer_fields(&fields, &cred),
                                               "Connections from uid %u come faster than %u a second: they wait for their turn",
                                               (unsigned) cred.uid, set->max_connect_rate_per_user);
                }
                when = next_turn(set, t, now);
                arm_turn(set, when ? when : now);
        }
        tally_unref(&set->tallies, t);
}

unsigned session_set_n_waiting(SessionSet *set) {
        unsigned n = 0;
        Tally *t;

        LIST_FOREACH(tallies, t, set->tallies.tallies)
                n += t->n_waiting;
        return n;
}
