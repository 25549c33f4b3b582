/* SPDX-License-Identifier: MIT */
/* See listener.h. */
#include "endpoints/listener.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <unistd.h>

#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/log-ratelimit.h"
#include "util/macro.h"
#include "wire/wire.h"

struct Listener {
        SessionSet *set;
        int fd;
        char *path; /* set when we bound the socket ourselves */
        sd_event_source *io;
        sd_event_source *retry; /* re-enables io after a resource shortage */
        sd_event_source *catch_up; /* accepts when busy sessions starve io */
        sd_event_source *busy;     /* post source: the loop served something */
        bool catching_up;          /* the dispatch that just ran was catch_up's */
        unsigned n_refused;     /* accept failures since the last log line */
        int reserve_fd;         /* /dev/null, given up to refuse a connection at the fd limit */
};

/* How long accepting pauses when the daemon is out of fds or memory: the
 * listening socket stays readable, so without a pause the loop would spin. */
#define ACCEPT_BACKOFF_USEC (250 * 1000)

static int on_retry(sd_event_source *src, uint64_t usec, void *userdata) {
        Listener *l = userdata;

        l->retry = sd_event_source_disable_unref(l->retry);
        if (l->n_refused > 1)
                log_warning("Accepting again; %u more accept attempts failed meanwhile", l->n_refused - 1);
        l->n_refused = 0;
        (void) sd_event_source_set_enabled(l->io, SD_EVENT_ON);
        return 0;
}

static void pause_accepting(Listener *l, int error) {
        int r;

        if (l->n_refused++ == 0)
                log_warning_errno(error, "Failed to accept a connection, pausing for %d ms: %m",
                                  ACCEPT_BACKOFF_USEC / 1000);
        if (l->retry)
                return;
        r = sd_event_add_time_relative(l->set->event, &l->retry, CLOCK_MONOTONIC,
                                       ACCEPT_BACKOFF_USEC, 0, on_retry, l);
        if (r < 0)
                return; /* keep accepting; better a busy loop than a dead listener */
        (void) sd_event_source_set_description(l->retry, "listener-retry");
        (void) sd_event_source_set_enabled(l->io, SD_EVENT_OFF);
}

/* Connections taken per wake-up. Each costs the loop a session's set-up
 * (identity from /proc, the session page), so a connect flood must not take
 * the loop for long at a time: the sessions' requests get their turn after
 * every ACCEPTS_PER_WAKEUP connections (bench-flood measures it). */
#define ACCEPTS_PER_WAKEUP 2

/* New connections wait until the sessions already there, established and
 * young, have been served (session-set.h, "Young sessions"): the listener's
 * priority is below theirs. So that sessions kept busy all the time cannot
 * starve it, a catch-up timer of a higher priority also accepts, at most
 * ACCEPT_CATCH_UP_USEC after the loop served anything (a post source arms
 * it); an idle daemon stays asleep. */
#define LISTENER_PRIORITY (SESSION_PRIORITY_YOUNG + 5)
#define ACCEPT_CATCH_UP_USEC (10 * 1000)

static void arm_catch_up(Listener *l);

/*
 * At the fd limit (EMFILE, ENFILE) a connection cannot even be accepted to be
 * told why, and its client would wait for a Hello reply that never comes. So
 * the listener keeps one fd in reserve: it gives it up, accepts, sends the
 * client an error (EMFILE, the reason, id 0 — as a refusal over a connection
 * limit is sent), closes, and takes the reserve back. 0 if a connection was
 * refused so, else -errno (no reserve, or no connection after all).
 */
static int refuse_at_fd_limit(Listener *l, int error) {
        const char *msg = "the daemon is out of file descriptors; try again later";
        int c;

        if (l->reserve_fd < 0)
                return -EBADF;
        l->reserve_fd = safe_close(l->reserve_fd);
        c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c >= 0) {
                wire_refuse(c, error, msg);
                safe_close(c);
                log_ratelimited_errno(NULL, NULL, LOG_WARNING, error, "Refused a connection: %s: %m", msg);
        }
        l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        return c >= 0 ? 0 : -errno;
}

/* No GPU to serve: the client is told so at once (an error with id 0, as for
 * the refusals above; libkfdbroker reports it as the answer to its Hello),
 * and the connection closed. */
static void refuse_no_device(Listener *l, int c) {

        wire_refuse(c, ENODEV, l->set->no_device);
        safe_close(c);
        log_ratelimited_errno(NULL, NULL, LOG_DEBUG, ENODEV, "Refused a connection: %s", l->set->no_device);
}

/* Takes up to ACCEPTS_PER_WAKEUP connections; how many it took. */
static unsigned accept_some(Listener *l) {
        unsigned n = 0;

        for (int i = 0; i < ACCEPTS_PER_WAKEUP; i++) {
                int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

                if (c < 0) {
                        int error = errno;

                        if (error == EAGAIN || error == EINTR || error == ECONNABORTED)
                                break;
                        if ((error == EMFILE || error == ENFILE) && refuse_at_fd_limit(l, error) == 0)
                                continue;
                        /* Out of memory, or no reserve: existing sessions keep being served. */
                        pause_accepting(l, error);
                        break;
                }
                n++;
                if (l->set->no_device)
                        refuse_no_device(l, c);
                else
                        session_set_admit(l->set, c);
        }
        return n;
}

static int on_accept(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        (void) accept_some(userdata);
        return 0;
}

static int on_catch_up(sd_event_source *src, uint64_t usec, void *userdata) {
        Listener *l = userdata;

        l->catching_up = true; /* not a sign of work for on_busy */
        /* Not while accepting pauses (out of fds): on_retry ends that. */
        if (!l->retry)
                (void) accept_some(l);
        return 0;
}

static int on_busy(sd_event_source *src, void *userdata) {
        Listener *l = userdata;

        if (l->catching_up)
                l->catching_up = false;
        else
                arm_catch_up(l);
        return 0;
}

/* Fires once, ACCEPT_CATCH_UP_USEC after the first thing the loop served
 * since it last fired. */
static void arm_catch_up(Listener *l) {
        int r;

        if (!l->catch_up) {
                r = sd_event_add_time_relative(l->set->event, &l->catch_up, CLOCK_MONOTONIC, ACCEPT_CATCH_UP_USEC,
                                               ACCEPT_CATCH_UP_USEC / 5, on_catch_up, l);
                if (r < 0)
                        return;
                (void) sd_event_source_set_description(l->catch_up, "listener-catch-up");
                (void) sd_event_source_set_priority(l->catch_up, SD_EVENT_PRIORITY_NORMAL - 1);
                return;
        }
        if (sd_event_source_get_enabled(l->catch_up, NULL) > 0)
                return;
        if (sd_event_source_set_time_relative(l->catch_up, ACCEPT_CATCH_UP_USEC) >= 0)
                (void) sd_event_source_set_enabled(l->catch_up, SD_EVENT_ONESHOT);
}

static int bind_path(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A stale socket file (its daemon is gone) is replaced; one that a
         * live daemon still answers on is not taken over. */
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 || errno == EAGAIN)
                return -EADDRINUSE;
        safe_close(fd);
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        (void) unlink(path);
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        /* Anyone who can reach the path may connect; the directory guards it. */
        (void) chmod(path, 0666);
        if (listen(fd, SOMAXCONN) < 0)
                return -errno;
        return TAKE_FD(fd);
}

static int activated_fd(void) {
        int n = sd_listen_fds(true);

        if (n < 0)
                return n;
        if (n == 0)
                return -ENOENT;
        if (n > 1)
                log_warning("Got %d sockets from systemd, using the first", n);
        if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_SEQPACKET, 1, NULL, 0) <= 0)
                return -ENOTSOCK;
        return SD_LISTEN_FDS_START;
}

int listener_new(SessionSet *m, const char *path, Listener **ret) {
        Listener *l;
        int fd, r;

        if (path)
                fd = bind_path(path);
        else
                fd = activated_fd();
        if (fd < 0)
                return fd;
        (void) sd_is_socket(fd, AF_UNIX, SOCK_SEQPACKET, 1);

        l = calloc(1, sizeof(*l));
        if (!l) {
                safe_close(fd);
                return -ENOMEM;
        }
        l->set = m;
        l->fd = fd;
        l->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (path) {
                l->path = strdup(path);
                if (!l->path) {
                        listener_free(l);
                        return -ENOMEM;
                }
        } else {
                /* Socket activation hands us a blocking fd; accept must not block. */
                int fl = fcntl(fd, F_GETFL);
                if (fl >= 0)
                        (void) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
        }
        r = sd_event_add_io(m->event, &l->io, fd, EPOLLIN, on_accept, l);
        if (r < 0) {
                listener_free(l);
                return r;
        }
        (void) sd_event_source_set_description(l->io, "listener");
        (void) sd_event_source_set_priority(l->io, LISTENER_PRIORITY);
        r = sd_event_add_post(m->event, &l->busy, on_busy, l);
        if (r < 0) {
                listener_free(l);
                return r;
        }
        (void) sd_event_source_set_description(l->busy, "listener-busy");
        *ret = l;
        return 0;
}

Listener *listener_free(Listener *l) {
        if (!l)
                return NULL;
        sd_event_source_disable_unref(l->io);
        sd_event_source_disable_unref(l->retry);
        sd_event_source_disable_unref(l->catch_up);
        sd_event_source_disable_unref(l->busy);
        safe_close(l->reserve_fd);
        safe_close(l->fd);
        if (l->path)
                (void) unlink(l->path);
        free(l->path);
        free(l);
        return NULL;
}
