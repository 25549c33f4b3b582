/* SPDX-License-Identifier: MIT */
/*
 * See session.h. This file holds the connection plumbing (receive, send
 * queue, identity) and the request handlers; the handlers only resolve this
 * session's handles, check limits and hand jobs to the scheduler.
 */
#include "sessions/kfd-relay.h"
#include "sessions/session.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <assert.h>
#include <sys/epoll.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "sessions/client-event.h"
#include "config.h"
#include "sessions/job.h"
#include "sessions/session-set.h"
#include "util/gpu-socket.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/log-ratelimit.h"
#include "util/macro.h"
#include "util/time-util.h"

/* A session that had this many jobs at once gives the heap back when it goes. */
#define SESSION_TRIM_JOBS 1024u

/* A client that leaves this many replies unread stops being read from; past
 * the hard limit it is disconnected. */
#define OUT_SOFT_LIMIT 64u
#define OUT_HARD_LIMIT 1024u
#define OUT_HARD_BYTES (8u << 20)
/* Requests handled per wake-up before yielding to other sessions. */
#define REQUESTS_PER_WAKEUP 32
#define MAX_RECV_FDS 8

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5, include/uapi/asm-generic/socket.h */
#endif

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata);

static void out_free(Session *s, OutMsg *o) {
        session_account_fds(s, -(int64_t) o->n_fds);
        for (unsigned i = 0; i < o->n_fds; i++)
                safe_close(o->fds[i]);
        free(o->buf);
        free(o);
}

static void update_io_events(Session *s) {
        uint32_t ev = 0;

        if (!s->io)
                return;
        if (!s->reading_paused)
                ev |= EPOLLIN;
        if (s->out.first)
                ev |= EPOLLOUT;
        (void) sd_event_source_set_io_events(s->io, ev);
}

static WireLimits wire_limits_from_policy(const WireLimits *base, const PolicyLimits *p) {
        WireLimits l = *base;

        l.max_buffer_size = p->max_buffer_size;
        l.max_buffer_bytes = p->buffer_memory;
        l.max_buffers = (uint32_t) MIN(p->buffers, (uint64_t) (1u << 24) - 1);
        l.max_events = (uint32_t) MIN(p->events, (uint64_t) KFDB_PAGE_MAX_EVENTS);
        l.max_jobs_in_flight = (uint32_t) MIN(p->jobs_in_flight, (uint64_t) UINT32_MAX);
        l.max_user_buffer_bytes = p->user_buffer_memory;
        l.max_user_buffers = p->user_buffers;
        l.max_unit_buffer_bytes = p->unit_buffer_memory;
        return l;
}

void session_set_limits(Session *s, const PolicyLimits *l) {
        s->policy = *l;
        s->limits = wire_limits_from_policy(&s->set->default_limits, l);
        s->buffers.max = s->limits.max_buffers;
        s->code_objects.max = s->limits.max_buffers;
        s->events.max = s->limits.max_events;
        session_page_set_jobs_limit(&s->page, s->limits.max_jobs_in_flight);
        /* Weights and priority classes hold on every GPU it uses, each in that GPU's scheduler. */
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++) {
                SessionOnGpu *on = s->on[g];

                if (!on)
                        continue;
                for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++) {
                        on->streams[e].weight = l->weight ? l->weight : 1;
                        /* Compute streams move to a queue of the class's KFD priority once idle. */
                        scheduler_stream_set_class(on->gpu->scheduler, &on->streams[e], (unsigned) l->priority,
                                                   policy_priority_to_queue_priority(l->priority));
                }
                /* Isolation= may have changed: the next compute job takes its context anew. */
                free(on->compute_key);
                on->compute_key = NULL;
        }
        /* Before Hello the session sits on the first GPU Devices= allows
         * (none allowed: its Hello is refused, session-requests.c). */
        if (!s->hello_done && s->gpu && !session_may_use_gpu(s, s->gpu)) {
                SessionGpu *g = session_first_gpu(s);
                if (g)
                        (void) session_use_gpu(s, g); /* holds nothing yet */
        }
}

void session_apply_policy(Session *s) {
        char matched[256];
        PolicyLimits l;
        int r;

        if (s->limits_overridden)
                return;
        r = policy_resolve(s->set->policy, &s->identity, &s->set->default_policy, &l, matched, sizeof(matched));
        if (r < 0) {
                log_warning_errno(r, "Session %" PRIu64 ": cannot resolve the policy, using defaults: %m",
                                  s->id);
                l = s->set->default_policy;
                snprintf(matched, sizeof(matched), "(built-in defaults)");
        }
        /* Kept at its length: most sessions match a rule or two, or none.
         * Out of memory, the list is not said (shown as the defaults). */
        free(s->policy_matched);
        s->policy_matched = matched[0] ? strdup(matched) : NULL;
        session_set_limits(s, &l);
}

/* The journal fields of a refused connection, in f. */
static const LogFields *refused_fields(LogFields *f, const Identity *id) {
        char buf[512];

        log_fields_add(f, "KFDBROKER_UID=%u", (unsigned) id->uid);
        log_fields_add(f, "KFDBROKER_PID=%d", (int) id->pid);
        log_fields_add(f, "KFDBROKER_COMM=%s", log_escape(id->comm, sizeof(id->comm), buf, sizeof(buf)));
        if (id->unit)
                log_fields_add(f, "KFDBROKER_UNIT=%s", log_escape(id->unit, SIZE_MAX, buf, sizeof(buf)));
        if (id->user_unit)
                log_fields_add(f, "KFDBROKER_USER_UNIT=%s", log_escape(id->user_unit, SIZE_MAX, buf, sizeof(buf)));
        return f;
}

/* Refuses a connection of a user who already holds max_connections_per_user:
 * one error datagram (id 0, nothing was asked yet) says why, then the caller
 * closes the socket. The cap keeps one user from exhausting the daemon's fds. */
static int check_connection_limit(SessionSet *m, int fd, const Session *s, Tally *peer) {
        const Identity *id = &s->identity;
        LogFields fields = {};
        char msg[200];
        unsigned n = 0;
        Session *o;

        LIST_FOREACH(sessions, o, m->sessions)
                n += o->connected && o->identity.uid == id->uid;
        if (m->max_connections_per_user > 0 && n >= m->max_connections_per_user)
                snprintf(msg, sizeof(msg),
                         "too many connections: uid %u already holds %u (kfdbrokerd --max-connections-per-user=%u)",
                         (unsigned) id->uid, n, m->max_connections_per_user);
        else if (session_check_connection_fds(m, s, msg, sizeof(msg)) == 0)
                return 0;
        log_struct_ratelimited(&peer->log_limit, peer->key, LOG_NOTICE, EUSERS, KFDBROKER_MESSAGE_SESSION_REFUSED,
                               refused_fields(&fields, id), "Refusing a connection from pid %d: %s", (int) id->pid,
                               msg);
        wire_refuse(fd, EUSERS, msg);
        return -EUSERS;
}

void session_log_fields(const Session *s, LogFields *f) {
        const Identity *id = &s->identity;
        char buf[512];

        log_fields_add(f, "KFDBROKER_SESSION=%" PRIu64, s->id);
        log_fields_add(f, "KFDBROKER_UID=%u", (unsigned) id->uid);
        log_fields_add(f, "KFDBROKER_GID=%u", (unsigned) id->gid);
        log_fields_add(f, "KFDBROKER_PID=%d", (int) id->pid);
        log_fields_add(f, "KFDBROKER_COMM=%s", log_escape(id->comm, sizeof(id->comm), buf, sizeof(buf)));
        if (s->client_name[0])
                log_fields_add(f, "KFDBROKER_CLIENT=%s",
                               log_escape(s->client_name, sizeof(s->client_name), buf, sizeof(buf)));
        if (id->unit)
                log_fields_add(f, "KFDBROKER_UNIT=%s", log_escape(id->unit, SIZE_MAX, buf, sizeof(buf)));
        if (id->user_unit)
                log_fields_add(f, "KFDBROKER_USER_UNIT=%s", log_escape(id->user_unit, SIZE_MAX, buf, sizeof(buf)));
        if (id->slice)
                log_fields_add(f, "KFDBROKER_SLICE=%s", log_escape(id->slice, SIZE_MAX, buf, sizeof(buf)));
        if (id->app_id)
                log_fields_add(f, "KFDBROKER_APP_ID=%s", log_escape(id->app_id, SIZE_MAX, buf, sizeof(buf)));
        if (id->container)
                log_fields_add(f, "KFDBROKER_CONTAINER=%s", log_escape(id->container, SIZE_MAX, buf, sizeof(buf)));
}

/* Which GPU's socket the connection came through (its listener's bound
 * path, which an accepted unix socket reports), or -1. */
static int pinned_gpu(const SessionSet *m, int fd) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);
        char path[sizeof(sa.sun_path) + 16];

        if (!m->socket_path || getsockname(fd, (struct sockaddr *) &sa, &len) < 0 ||
            len <= offsetof(struct sockaddr_un, sun_path) || sa.sun_path[0] == '\0')
                return -1;
        for (unsigned k = 0; k < SESSION_MAX_GPUS; k++)
                if (gpu_socket_path(m->socket_path, k, path, sizeof path) >= 0 &&
                    strncmp(path, sa.sun_path, sizeof(sa.sun_path)) == 0)
                        return (int) k;
        return -1;
}

static int session_new_internal(SessionSet *m, int fd, const Identity *id, int pidfd, bool pidfd_exact,
                                Session **ret) {
        LogFields extra = {};
        char comm[80];
        Session *s;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s) {
                safe_close(fd);
                return -ENOMEM;
        }
        s->n_ref = 1;
        s->set = m;
        s->id = ++m->next_session_id;
        s->fd = fd;
        session_page_init(&s->page); /* made at Hello (session-page-open.c) */
        s->kfd_relay_fd = -EBADF;
        s->connected = true;
        s->opened_ns = now_ns();
        usage_init(&s->usage, s->opened_ns);
        handle_table_init(&s->buffers, HANDLE_TAG_BUFFER, 0);
        handle_table_init(&s->events, HANDLE_TAG_EVENT, 0);
        handle_table_init(&s->code_objects, HANDLE_TAG_CODE_OBJECT, 0);
        s->pinned_gpu = pinned_gpu(m, fd);
        /* The first GPU it may use until its Hello names one (session_use_gpu()). */
        s->gpu = session_set_gpu(m, s->pinned_gpu > 0 && (unsigned) s->pinned_gpu < m->n_gpus ? (unsigned) s->pinned_gpu : 0);
        s->home = (SessionOnGpu) { .session = s, .gpu = s->gpu };
        s->on[s->gpu->index] = &s->home;
        s->gpu->n_users++; /* session_on_gpu_done() gives it back */
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++)
                scheduler_stream_init(s->gpu->scheduler, &s->home.streams[e], s->id, (GpuEngine) e, 1);

        /* Identity from the kernel, never from the client. */
        r = id ? identity_copy(id, &s->identity) : identity_from_peer(fd, pidfd, pidfd_exact, &s->identity);
        if (r < 0) {
                log_ratelimited_errno(NULL, NULL, LOG_WARNING, r,
                                      "Session %" PRIu64 ": cannot read the client's identity: %m", s->id);
                goto fail;
        }
        r = session_tallies_attach(s);
        if (r < 0)
                goto fail;
        r = check_connection_limit(m, fd, s, s->user_tally);
        if (r < 0)
                goto fail;
        session_account_fds(s, SESSION_FDS);
        session_apply_policy(s);
        r = account_table_get(&m->accounts, s->identity.uid,
                              s->identity.user_unit ? s->identity.user_unit : s->identity.unit,
                              s->identity.app_id, s->identity.container, s->opened_ns, &s->account);
        if (r < 0)
                goto fail;

        r = sd_event_add_io(m->event, &s->io, fd, EPOLLIN, on_io, s);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(s->io, "session");

        LIST_PREPEND(sessions, m->sessions, s);
        m->n_sessions++;
        session_set_add_young(m, s);
        log_fields_add(&extra, "KFDBROKER_POLICY_RULES=%s", s->policy_matched ?: "defaults");
        session_log_struct(s, LOG_INFO, 0, KFDBROKER_MESSAGE_SESSION_OPENED, &extra,
                 "Session %" PRIu64 " opened: pid %d uid %u gid %d comm \"%s\" unit %s%s%s%s (policy: %s)",
                 s->id, (int) s->identity.pid, (unsigned) s->identity.uid,
                 s->identity.gid == IDENTITY_GID_UNKNOWN ? -1 : (int) s->identity.gid,
                 log_escape(s->identity.comm, sizeof(s->identity.comm), comm, sizeof(comm)),
                 s->identity.user_unit ? s->identity.user_unit : s->identity.unit ? s->identity.unit : "-",
                 s->identity.app_id ? " app " : "", s->identity.app_id ? s->identity.app_id : "",
                 s->identity.process_unknown ? " process unknown (no rule on unit, cgroup, app id or container applies)" : "",
                 s->policy_matched ?: "defaults");
        if (m->cb.opened)
                m->cb.opened(s, m->cb.userdata);
        if (ret)
                *ret = s;
        return 0;
fail:
        /* Tell the client (a refusal over the connection limit did already). */
        if (r != -EUSERS) {
                char msg[160];

                if (r == -ESRCH)
                        snprintf(msg, sizeof(msg), "the process that made this connection has exited: "
                                                   "its identity cannot be read (ESRCH)");
                else
                        snprintf(msg, sizeof(msg), "the daemon cannot set up a session: %s", strerror(-r));
                wire_refuse(s->fd, -r, msg);
        }
        s->connected = false;
        session_unref(s);
        return r;
}

int session_new(SessionSet *m, int fd, const Identity *id, Session **ret) {
        return session_new_internal(m, fd, id, -EBADF, false, ret);
}

int session_new_from_peer(SessionSet *m, int fd, int pidfd, bool pidfd_exact, Session **ret) {
        return session_new_internal(m, fd, NULL, pidfd, pidfd_exact, ret);
}

static void session_free(Session *s) {
        /* Only reached once disconnected and every job has retired. */
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                session_on_gpu_done(s->on[g]);
        session_ring_free(s);
        session_fence_page_free(s);
        session_kfd_free(s);
        session_page_done(&s->page);
        handle_table_done(&s->buffers);
        handle_table_done(&s->events);
        handle_table_done(&s->code_objects);
        if (s->account)
                account_unref(s->account);
        session_tallies_detach(s);
        identity_done(&s->identity);
        free(s->policy_matched);
        free(s->pool);
        safe_close(s->fd);
        /* A session that queued many jobs leaves many small free chunks all
         * over the heap, which glibc's free() returns to the system only
         * from the top of the heap; malloc_trim() also releases every whole
         * free page inside it (malloc_trim(3), glibc >= 2.8), so a client
         * that queued thousands of jobs and left costs the daemon nothing
         * after it (test-hogs: the RSS after such sessions went). */
        bool trim = s->n_jobs_peak >= SESSION_TRIM_JOBS;
        free(s);
        if (trim)
                (void) malloc_trim(0);
}

Session *session_ref(Session *s) {
        if (s)
                s->n_ref++;
        return s;
}

Session *session_unref(Session *s) {
        if (!s || --s->n_ref > 0)
                return NULL;
        session_free(s);
        return NULL;
}

static void drop_objects(Session *s) {
        for (uint32_t i = 0; i < s->buffers.n_alloc; i++) {
                SessionBuffer *b = handle_table_slot(&s->buffers, i);
                if (b) {
                        /* As a FreeBuffer: one whose dma-buf left the
                         * daemon stays charged while copies may live. */
                        session_release_buffer(s, b);
                        free(b);
                }
        }
        handle_table_done(&s->buffers);
        /* The session ends: what it freed but may still be held elsewhere
         * stays charged to its user and unit. */
        session_pool_drop(s);
        session_keep_released(s);
        for (uint32_t i = 0; i < s->events.n_alloc; i++) {
                ClientEvent *e = handle_table_slot(&s->events, i);
                if (e) {
                        client_event_destroy(e);
                        client_event_unref(e);
                }
        }
        handle_table_done(&s->events);
        session_drop_code_objects(s);
}

/* The line that says a session is gone: closed (by the client, or for
 * something it did), or ended by the daemon, which told it (when it had said
 * Hello) whether to reconnect (session_end()). */
static void log_disconnect(Session *s, const char *why, bool ended, int error, bool reconnect) {
        LogFields extra = {};

        log_fields_add(&extra, "KFDBROKER_REASON=%s", why);
        log_fields_add(&extra, "KFDBROKER_JOBS_COMPLETED=%" PRIu64, s->usage.jobs_completed);
        log_fields_add(&extra, "KFDBROKER_JOBS_FAILED=%" PRIu64, s->usage.jobs_failed);
        if (!ended) {
                session_log_struct(s, LOG_INFO, 0, KFDBROKER_MESSAGE_SESSION_CLOSED, &extra,
                                   "Session %" PRIu64 " closed: %s (%u jobs still on the GPU)", s->id, why, s->n_jobs);
                return;
        }
        if (s->hello_done)
                log_fields_add(&extra, "KFDBROKER_RECONNECT=%s", reconnect ? "yes" : "no");
        session_log_struct(s, LOG_INFO, error, KFDBROKER_MESSAGE_SESSION_ENDED, &extra,
                           "Session %" PRIu64 " ended by the daemon: %s%s (%u jobs still on the GPU)", s->id, why,
                           !s->hello_done ? "" : reconnect ? "; the client was told to reconnect" : "; the client was told",
                           s->n_jobs);
}

static void disconnect(Session *s, const char *why, bool ended, int error, bool reconnect) {
        SessionSet *m = s->set;

        if (!s->connected)
                return;
        s->connected = false;
        log_disconnect(s, why, ended, error, reconnect);

        s->io = sd_event_source_disable_unref(s->io);
        s->fd = safe_close(s->fd);
        session_ring_stop(s);
        while (s->out.first) {
                OutMsg *o = s->out.first;
                QUEUE_REMOVE(out, s->out, o);
                out_free(s, o);
        }
        s->n_out = 0;
        s->out_bytes = 0;

        while (s->waits)
                event_wait_cancel(s->waits);
        /* A KFD process on its way: its worker goes now. */
        session_kfd_cancel(s);

        /* Jobs not yet on the GPU are dropped; copies and fills on the GPU
         * retire normally; the client's kernels are stopped. */
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++) {
                SessionOnGpu *on = s->on[g];

                if (!on)
                        continue;
                scheduler_cancel_running(on->gpu->scheduler, &on->streams[GPU_ENGINE_COMPUTE]);
                for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++) {
                        SchedStream *st = &on->streams[e];
                        while (st->pending.first) {
                                Job *j = job_from_sched(st->pending.first);
                                if (scheduler_dequeue(on->gpu->scheduler, &j->sched) == 0)
                                        session_job_finished(j, ECANCELED, NULL, 0);
                        }
                        scheduler_stream_done(on->gpu->scheduler, st);
                }
                /* Its GPU context goes once what runs there has stopped
                 * (unless other sessions use it). */
                on->compute_ctx = context_release(on->compute_ctx);
        }
        drop_objects(s);
        if (s->account && s->hello_done)
                s->account->sessions_now--;

        LIST_REMOVE(sessions, m->sessions, s);
        m->n_sessions--;
        session_set_forget_young(m, s);
        if (m->cb.closed)
                m->cb.closed(s, why, m->cb.userdata);
        /* Destroyed events may have unblocked other sessions' waits, on any GPU. */
        session_set_run_schedulers(m);
        session_unref(s);
}

/* ---- Sending ---- */

static int flush_out(Session *s) {
        while (s->out.first) {
                OutMsg *o = s->out.first;
                struct iovec iov = { .iov_base = o->buf, .iov_len = o->len };
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(sizeof(int) * 2)];
                } control = {};
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
                ssize_t n;

                if (o->n_fds > 0) {
                        struct cmsghdr *c;
                        mh.msg_control = &control;
                        mh.msg_controllen = CMSG_SPACE(sizeof(int) * o->n_fds);
                        c = CMSG_FIRSTHDR(&mh);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int) * o->n_fds);
                        memcpy(CMSG_DATA(c), o->fds, sizeof(int) * o->n_fds);
                }
                n = sendmsg(s->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        return -errno;
                }
                QUEUE_REMOVE(out, s->out, o);
                s->n_out--;
                s->out_bytes -= o->len;
                out_free(s, o);
        }
        if (s->reading_paused && s->n_out < OUT_SOFT_LIMIT / 2)
                s->reading_paused = false;
        update_io_events(s);
        return 0;
}

void session_disconnect(Session *s, const char *why) {
        disconnect(s, why, false, 0, false);
}

void session_end(Session *s, int error, const char *why, bool reconnect) {
        if (!s->connected)
                return;
        /* A send that fails disconnects, which may drop the last reference. */
        s = session_ref(s);
        session_uncork(s); /* what waits goes first */
        if (s->hello_done && s->connected)
                (void) session_send(s, &(WireReply) {
                                            .type = WIRE_REPLY_SESSION_ENDED,
                                            .session_ended = { .error = error, .message = why,
                                                               .reconnect = reconnect },
                                    },
                                    NULL, 0);
        disconnect(s, why, true, error, reconnect);
        session_unref(s);
}

/* A reply or notification that cannot be queued would leave the client
 * waiting for it, holding what it was about (a buffer it never got the fd
 * of, say): the session ends instead, which returns everything it held. */
static int send_failed(Session *s, uint64_t id, int r, const char *what) {
        _cleanup_free_ void *buf = NULL;
        char msg[200];
        size_t len;

        log_ratelimited_errno(s->user_tally ? &s->user_tally->log_limit : NULL, s->user_tally ? s->user_tally->key : NULL,
                              LOG_WARNING, r, "Session %" PRIu64 ": cannot send a reply (%s), closing the session: %m",
                              s->id, what);
        /* Still say why, if a plain error fits (it needs no fd and little memory). */
        snprintf(msg, sizeof(msg), "the daemon cannot send its reply (%s: %s); the session ends", what, strerror(-r));
        if (!s->out.first && wire_reply_encode(&(WireReply) { .id = id, .error = -r, .message = msg }, &buf, &len) == 0)
                (void) send(s->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        session_disconnect(s, "a reply could not be sent");
        return r;
}

int session_send(Session *s, const WireReply *reply, const int *fds, unsigned n_fds) {
        _cleanup_free_ void *buf = NULL;
        OutMsg *o;
        size_t len;
        int r;

        if (!s->connected)
                return 0;
        assert(n_fds <= 2);
        r = wire_reply_encode(reply, &buf, &len);
        if (r < 0)
                return send_failed(s, reply->id, r, "encoding it failed");
        o = calloc(1, sizeof(*o));
        if (!o)
                return send_failed(s, reply->id, -ENOMEM, "out of memory");
        for (unsigned i = 0; i < n_fds; i++) {
                o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (o->fds[i] >= 0)
                        session_account_fds(s, +1);
                if (o->fds[i] < 0) {
                        r = -errno;
                        o->n_fds = i;
                        out_free(s, o);
                        return send_failed(s, reply->id, r, "duplicating its file descriptor failed");
                }
        }
        o->n_fds = n_fds;
        o->buf = TAKE_PTR(buf);
        o->len = len;
        QUEUE_APPEND(out, s->out, o);
        s->n_out++;
        s->out_bytes += len;

        if (s->corked)
                return 0;
        r = flush_out(s);
        if (r < 0) {
                session_disconnect(s, "send failed");
                return 0;
        }
        if (s->n_out > OUT_HARD_LIMIT || s->out_bytes > OUT_HARD_BYTES) {
                session_log(s, LOG_WARNING, "Session %" PRIu64 ": %u replies unread, disconnecting", s->id, s->n_out);
                session_disconnect(s, "client does not read its replies");
                return 0;
        }
        if (s->n_out >= OUT_SOFT_LIMIT && !s->reading_paused) {
                /* Back-pressure: stop taking requests until the client reads. */
                s->reading_paused = true;
                update_io_events(s);
        }
        return 0;
}

void session_cork(Session *s) {
        s->corked = true;
}

void session_uncork(Session *s) {
        if (!s->corked)
                return;
        s->corked = false;
        if (!s->connected || !s->out.first)
                return;
        if (flush_out(s) < 0)
                session_disconnect(s, "send failed");
}

int session_send_error(Session *s, uint64_t id, int error, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (s->error_sink) {
                /* A submit ring batch is being checked: its jobs carry the first error. */
                if (s->error_sink->error == 0) {
                        s->error_sink->error = error;
                        snprintf(s->error_sink->message, sizeof(s->error_sink->message), "%s", msg);
                }
                return 0;
        }
        log_debug("Session %" PRIu64 ": request %" PRIu64 " failed: %s", s->id, id, msg);
        return session_send(s, &(WireReply) { .id = id, .error = error, .message = msg,
                                              .type = WIRE_REPLY_ERROR },
                            NULL, 0);
}

void session_flush(Session *s) {
        if (s->connected)
                session_page_flush(&s->page);
}

/* ---- Job bookkeeping ---- */

static void advance_completed(Session *s) {
        uint64_t completed = s->jobs.first ? s->jobs.first->fence - 1 : s->last_fence;

        s->completed_fence = completed;
        session_page_set_fences(&s->page, completed, s->last_fence);
}

void session_job_finished(Job *j, int error, const char *message, uint64_t busy_ns) {
        Session *s = session_ref(j->session);
        UsageJob u = {
                .engine = j->sched.engine,
                .ok = error == 0,
                .busy_ns = busy_ns,
                .queued_ns = j->sched.submitted_ns > j->sched.queued_ns ? j->sched.submitted_ns - j->sched.queued_ns : 0,
        };

        QUEUE_REMOVE(session_jobs, s->jobs, j);
        s->n_jobs--;
        if (s->user_tally)
                s->user_tally->jobs--;
        if (j->unordered)
                s->n_unordered--;

        if (error == 0) {
                if (j->type == WIRE_JOB_COPY)
                        u.bytes_copied = j->sched.gpu.copy.size;
                else if (j->type == WIRE_JOB_FILL)
                        u.bytes_filled = j->sched.gpu.fill.size;
        } else if (j->relay) {
                /* ROCr learns of it from its queue and signals; the log says why. */
                if (message)
                        session_log(s, LOG_NOTICE, "Session %" PRIu64 ": relayed packet %" PRIu64 " of AQL queue %u "
                                    "failed: %s", s->id, j->relay_index, j->relay_queue, message);
        } else {
                if (s->connected) {
                        session_page_job_failed(&s->page, j->fence);
                        if (message)
                                session_send(s, &(WireReply) {
                                                     .type = WIRE_REPLY_JOB_FAILED,
                                                     .job_failed = { .fence = j->fence,
                                                                     .error = error,
                                                                     .message = message },
                                             },
                                             NULL, 0);
                }
                if (message) {
                        LogFields extra = {};

                        log_fields_add(&extra, "KFDBROKER_FENCE=%" PRIu64, j->fence);
                        session_log_struct(s, LOG_NOTICE, error, KFDBROKER_MESSAGE_JOB_FAILED, &extra,
                                           "Session %" PRIu64 ": job %" PRIu64 " failed: %s", s->id, j->fence, message);
                        if (s->set->cb.job_failed)
                                s->set->cb.job_failed(s, j->fence, error, message, s->set->cb.userdata);
                }
        }
        usage_add_job(&s->usage, &u);
        s->busy_ns_by_gpu[j->on->gpu->index] += busy_ns;
        if (s->account)
                usage_add_job(&s->account->usage, &u);
        if (s->connected)
                advance_completed(s);
        if (j->relay)
                kfd_relay_job_done(j->relay, j, error, message);
        job_free(j);
        session_unref(s);
}

void session_context_lost(Session *s, Context *ctx, const char *reason) {
        bool used = false;

        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                used = used || (s->on[g] && s->on[g]->compute_ctx == ctx);
        if (!s->connected || !used)
                return;
        LogFields extra = {};

        log_fields_add(&extra, "KFDBROKER_CONTEXT=%" PRIu64, context_get_id(ctx));
        log_fields_add(&extra, "KFDBROKER_REASON=%s", reason);
        session_log_struct(s, LOG_NOTICE, 0, KFDBROKER_MESSAGE_CONTEXT_LOST, &extra,
                           "Session %" PRIu64 ": its GPU context %" PRIu64 " was lost (%s); its next compute work runs in a new one",
                           s->id, context_get_id(ctx), reason);
        session_page_context_lost(&s->page);
        session_flush(s);
}

/* ---- Receiving ---- */

static void close_fds(int *fds, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                safe_close(fds[i]);
}

/* Reads one datagram. Returns 1 if one was handled, 0 if none was waiting,
 * negative errno if the connection must go. */
static int receive_one(Session *s) {
        static uint8_t buf[WIRE_MAX_MESSAGE_SIZE];
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * MAX_RECV_FDS)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                             .msg_controllen = sizeof(control) };
        int fds[MAX_RECV_FDS];
        unsigned n_fds = 0;
        WireRequest req;
        uint64_t id = 0;
        char err[256] = "";
        ssize_t n;
        int r;

        /* MSG_TRUNC makes recvmsg return the real length of an oversized datagram. */
        n = recvmsg(s->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
        if (n < 0) {
                if (errno == EAGAIN || errno == EINTR)
                        return 0;
                return -errno;
        }
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                        unsigned k = (unsigned) ((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        int *p = (int *) CMSG_DATA(c);
                        for (unsigned i = 0; i < k; i++) {
                                if (n_fds < MAX_RECV_FDS)
                                        fds[n_fds++] = p[i];
                                else
                                        safe_close(p[i]);
                        }
                }
        }
        if (n == 0 && n_fds == 0)
                return -ECONNRESET; /* orderly shutdown by the peer */

        if (mh.msg_flags & MSG_CTRUNC) {
                close_fds(fds, n_fds);
                /* Answer the request by its id when the message decodes;
                 * otherwise id 0 is all the client can be told. */
                if ((size_t) n <= sizeof(buf)) {
                        uint64_t maybe_id = 0;

                        r = wire_request_decode(buf, (size_t) n, &req, &maybe_id, err, sizeof(err));
                        if (r == 0)
                                wire_request_done(&req);
                        if (r == 0 || r == -EINVAL || r == -EOPNOTSUPP || r == -EPROTONOSUPPORT)
                                id = maybe_id;
                }
                session_send_error(s, id, EBADMSG,
                                   "too many file descriptors in one message (at most %u are read)",
                                   (unsigned) MAX_RECV_FDS);
                return 1;
        }
        if ((size_t) n > sizeof(buf)) {
                close_fds(fds, n_fds);
                session_send_error(s, 0, EMSGSIZE,
                                   "message of %zd bytes exceeds the limit of %u bytes", n,
                                   (unsigned) WIRE_MAX_MESSAGE_SIZE);
                return 1;
        }

        r = wire_request_decode(buf, (size_t) n, &req, &id, err, sizeof(err));
        if (r == -EBADMSG) {
                close_fds(fds, n_fds);
                session_log(s, LOG_NOTICE, "Session %" PRIu64 ": undecodable message of %zd bytes, disconnecting",
                            s->id, n);
                return -EBADMSG;
        }
        if (r < 0) {
                close_fds(fds, n_fds);
                session_send_error(s, id, -r, "%s", err[0] ? err : strerror(-r));
                return 1;
        }
        if (n_fds != wire_request_fds_expected(req.type)) {
                session_send_error(s, req.id, EINVAL, "%s carries %u file descriptor(s), got %u",
                                   wire_request_type_name(req.type),
                                   wire_request_fds_expected(req.type), n_fds);
                close_fds(fds, n_fds);
                wire_request_done(&req);
                return 1;
        }
        if (!s->hello_done && req.type != WIRE_REQUEST_HELLO) {
                session_send_error(s, req.id, EPROTO, "the first request must be Hello, got %s",
                                   wire_request_type_name(req.type));
                close_fds(fds, n_fds);
                wire_request_done(&req);
                return 1;
        }

        /* What the GPU finished before this request (a client that saw a
         * job done on its fence page finds it retired), then what the client
         * put in its submit ring before it, come first. */
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                if (s->on[g])
                        context_catch_up(context_pool_device(s->on[g]->gpu->contexts));
        session_ring_drain(s);
        if (s->connected)
                session_handle_request(s, &req, fds, n_fds);
        close_fds(fds, n_fds);
        wire_request_done(&req);
        return 1;
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        Session *s = userdata;
        int r;

        session_ref(s);
        if (revents & EPOLLOUT) {
                r = flush_out(s);
                if (r < 0)
                        session_disconnect(s, "send failed");
        }
        if (s->connected && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                for (int i = 0; i < REQUESTS_PER_WAKEUP && s->connected && !s->reading_paused; i++) {
                        r = receive_one(s);
                        if (r == 0)
                                break;
                        if (r < 0) {
                                session_disconnect(s, r == -ECONNRESET ? "client closed the connection"
                                                   : r == -EBADMSG ? "malformed message"
                                                                   : "receive failed");
                                break;
                        }
                }
                if (s->connected && (revents & (EPOLLHUP | EPOLLERR)) &&
                    (s->reading_paused || !(revents & EPOLLIN)))
                        session_disconnect(s, "client hung up");
        }
        session_flush(s);
        session_unref(s);
        return 0;
}
