/* SPDX-License-Identifier: MIT */
/* See listener.h. */
#include "endpoints/listener.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
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
#include "util/gpu-socket.h"
#include "util/macro.h"
#include "wire/wire.h"

struct Listener {
        Listener *next;         /* the other sockets (listener_new()) */
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

/* The unix SOCK_SEQPACKET socket's bound path, or "" (none, or another kind). */
static void socket_path_of(int fd, char *buf, size_t size) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);

        buf[0] = '\0';
        if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &len) < 0 || len <= offsetof(struct sockaddr_un, sun_path) ||
            sa.sun_path[0] == '\0')
                return;
        snprintf(buf, size, "%.*s", (int) (len - offsetof(struct sockaddr_un, sun_path)), sa.sun_path);
}

/* One listening socket, fd taken; path: the file to remove at the end, or NULL. */
static int listener_add(SessionSet *m, int fd, const char *path, Listener **ret) {
        Listener *l;
        int r;

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

/* Every socket systemd passed, in the unit's order; the first is the main one. */
static int listen_activated(SessionSet *m, Listener **ret) {
        _cleanup_(listener_freep) Listener *head = NULL;
        Listener **tail = &head;
        char path[sizeof(((struct sockaddr_un *) 0)->sun_path) + 1];
        int n = sd_listen_fds(true), r;

        if (n < 0)
                return n;
        if (n == 0)
                return -ENOENT;
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;

                if (sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, NULL, 0) <= 0) {
                        log_warning("Socket %d of %d from systemd is no listening SOCK_SEQPACKET unix socket: not used",
                                    i + 1, n);
                        safe_close(fd);
                        continue;
                }
                if (!head) {
                        socket_path_of(fd, path, sizeof path);
                        free(m->socket_path);
                        m->socket_path = path[0] ? strdup(path) : NULL;
                }
                r = listener_add(m, fd, NULL, tail);
                if (r < 0)
                        return r;
                tail = &(*tail)->next;
        }
        if (!head)
                return -ENOTSOCK;
        *ret = TAKE_PTR(head);
        return 0;
}

/* The main socket at path, and one per GPU served beside it (gpu-socket.h). */
static int listen_paths(SessionSet *m, const char *path, Listener **ret) {
        _cleanup_(listener_freep) Listener *head = NULL;
        Listener **tail = &head;
        char gpu_path[sizeof(((struct sockaddr_un *) 0)->sun_path) + 16];
        int r;

        for (unsigned k = 0; k <= m->n_gpus; k++) {
                const char *p = path;
                int fd;

                if (k > 0) {
                        r = gpu_socket_path(path, k - 1, gpu_path, sizeof gpu_path);
                        if (r < 0)
                                return log_error_errno(r, "GPU %u's socket beside %s: path too long", k - 1, path);
                        p = gpu_path;
                }
                fd = bind_path(p);
                if (fd < 0 && k > 0)
                        return log_error_errno(fd, "Failed to listen on GPU %u's socket %s: %m", k - 1, p);
                if (fd < 0)
                        return fd; /* the caller says why */
                r = listener_add(m, fd, p, tail);
                if (r < 0)
                        return r;
                tail = &(*tail)->next;
        }
        free(m->socket_path);
        m->socket_path = strdup(path);
        if (!m->socket_path)
                return -ENOMEM;
        *ret = TAKE_PTR(head);
        return 0;
}

int listener_new(SessionSet *m, const char *path, Listener **ret) {
        return path ? listen_paths(m, path, ret) : listen_activated(m, ret);
}

Listener *listener_free(Listener *l) {
        if (!l)
                return NULL;
        listener_free(l->next);
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
