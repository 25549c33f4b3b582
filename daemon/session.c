/* SPDX-License-Identifier: MIT */
/*
 * See session.h. This file holds the connection plumbing (receive, send
 * queue, identity) and the request handlers; the handlers only resolve this
 * session's handles, check limits and hand jobs to the scheduler.
 */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <assert.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "client-event.h"
#include "config.h"
#include "job.h"
#include "manager.h"
#include "util/log.h"
#include "util/macro.h"

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

static void out_free(OutMsg *o) {
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

static void read_identity(Session *s) {
        socklen_t len = sizeof(s->cred);
        char path[64];
        int fd;

        if (getsockopt(s->fd, SOL_SOCKET, SO_PEERCRED, &s->cred, &len) < 0)
                s->cred = (struct ucred) { .pid = 0, .uid = (uid_t) -1, .gid = (gid_t) -1 };

        /* A pidfd pins the identity to the process, not a reusable pid number. */
        len = sizeof(fd);
        if (getsockopt(s->fd, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0)
                s->pidfd = fd;
        else if (s->cred.pid > 0)
                s->pidfd = (int) syscall(SYS_pidfd_open, s->cred.pid, 0);
        if (s->pidfd < 0)
                s->pidfd = -EBADF;

        if (s->cred.pid > 0) {
                FILE *f;
                snprintf(path, sizeof(path), "/proc/%d/comm", (int) s->cred.pid);
                f = fopen(path, "re");
                if (f) {
                        if (fgets(s->comm, sizeof(s->comm), f))
                                s->comm[strcspn(s->comm, "\n")] = '\0';
                        fclose(f);
                }
        }
}

int session_new(Manager *m, int fd, Session **ret) {
        Session *s;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s) {
                safe_close(fd);
                return -ENOMEM;
        }
        s->n_ref = 1;
        s->manager = m;
        s->id = ++m->next_session_id;
        s->fd = fd;
        s->pidfd = -EBADF;
        s->page.memfd = s->page.eventfd = -EBADF;
        s->limits = m->default_limits;
        s->weight = 1;
        s->connected = true;
        handle_table_init(&s->buffers, HANDLE_TAG_BUFFER, s->limits.max_buffers);
        handle_table_init(&s->events, HANDLE_TAG_EVENT,
                          MIN(s->limits.max_events, KFDB_PAGE_MAX_EVENTS));
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++)
                scheduler_stream_init(m->scheduler, &s->streams[e], s, (GpuEngine) e, s->weight);

        read_identity(s);

        r = session_page_init(&s->page);
        if (r < 0)
                goto fail;
        r = sd_event_add_io(m->event, &s->io, fd, EPOLLIN, on_io, s);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(s->io, "session");

        LIST_PREPEND(sessions, m->sessions, s);
        m->n_sessions++;
        log_info("Session %" PRIu64 " opened: pid %d uid %d gid %d (%s)", s->id,
                 (int) s->cred.pid, (int) s->cred.uid, (int) s->cred.gid,
                 s->comm[0] ? s->comm : "?");
        if (ret)
                *ret = s;
        return 0;
fail:
        s->connected = false;
        session_unref(s);
        return r;
}

static void session_free(Session *s) {
        /* Only reached once disconnected and every job has retired. */
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++)
                scheduler_stream_done(s->manager->scheduler, &s->streams[e]);
        session_page_done(&s->page);
        handle_table_done(&s->buffers);
        handle_table_done(&s->events);
        safe_close(s->pidfd);
        safe_close(s->fd);
        free(s);
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
                GpuBuffer *b = handle_table_slot(&s->buffers, i);
                if (b)
                        gpu_buffer_unref(b);
        }
        handle_table_done(&s->buffers);
        for (uint32_t i = 0; i < s->events.n_alloc; i++) {
                ClientEvent *e = handle_table_slot(&s->events, i);
                if (e) {
                        client_event_destroy(e);
                        client_event_unref(e);
                }
        }
        handle_table_done(&s->events);
        s->stats.buffer_bytes = 0;
}

void session_disconnect(Session *s, const char *why) {
        Manager *m = s->manager;

        if (!s->connected)
                return;
        s->connected = false;
        log_info("Session %" PRIu64 " closed: %s (%u jobs still on the GPU)", s->id, why,
                 s->n_jobs);

        s->io = sd_event_source_disable_unref(s->io);
        s->fd = safe_close(s->fd);
        while (s->out.first) {
                OutMsg *o = s->out.first;
                QUEUE_REMOVE(out, s->out, o);
                out_free(o);
        }
        s->n_out = 0;
        s->out_bytes = 0;

        while (s->waits)
                event_wait_cancel(s->waits);

        /* Jobs not yet on the GPU are dropped; jobs on the GPU retire normally. */
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++) {
                SchedStream *st = &s->streams[e];
                while (st->pending.first) {
                        Job *j = st->pending.first;
                        QUEUE_REMOVE(queue, st->pending, j);
                        session_job_finished(s, j, ECANCELED, NULL, 0);
                        job_free(j);
                }
                scheduler_stream_done(m->scheduler, st);
        }
        drop_objects(s);

        LIST_REMOVE(sessions, m->sessions, s);
        m->n_sessions--;
        /* Destroyed events may have unblocked other sessions' waits. */
        scheduler_run(m->scheduler);
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
                out_free(o);
        }
        if (s->reading_paused && s->n_out < OUT_SOFT_LIMIT / 2)
                s->reading_paused = false;
        update_io_events(s);
        return 0;
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
                return log_error_errno(r, "Session %" PRIu64 ": failed to encode a reply: %m", s->id);
        o = calloc(1, sizeof(*o));
        if (!o)
                return -ENOMEM;
        for (unsigned i = 0; i < n_fds; i++) {
                o->fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
                if (o->fds[i] < 0) {
                        r = -errno;
                        o->n_fds = i;
                        out_free(o);
                        return r;
                }
        }
        o->n_fds = n_fds;
        o->buf = TAKE_PTR(buf);
        o->len = len;
        QUEUE_APPEND(out, s->out, o);
        s->n_out++;
        s->out_bytes += len;

        r = flush_out(s);
        if (r < 0) {
                session_disconnect(s, "send failed");
                return 0;
        }
        if (s->n_out > OUT_HARD_LIMIT || s->out_bytes > OUT_HARD_BYTES) {
                log_warning("Session %" PRIu64 ": %u replies unread, disconnecting", s->id, s->n_out);
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

int session_send_error(Session *s, uint64_t id, int error, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
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

void session_job_finished(Session *s, Job *j, int error, const char *message, uint64_t busy_ns) {
        QUEUE_REMOVE(session_jobs, s->jobs, j);
        s->n_jobs--;

        if (error == 0) {
                s->stats.jobs_completed++;
                if (j->type == WIRE_JOB_COPY)
                        s->stats.bytes_copied += j->gpu.copy.size;
                else if (j->type == WIRE_JOB_FILL)
                        s->stats.bytes_filled += j->gpu.fill.size;
        } else {
                s->stats.jobs_failed++;
                if (s->connected) {
                        session_page_job_failed(&s->page, j->fence, error == EFAULT);
                        if (message)
                                session_send(s, &(WireReply) {
                                                     .type = WIRE_REPLY_JOB_FAILED,
                                                     .job_failed = { .fence = j->fence,
                                                                     .error = error,
                                                                     .message = message },
                                             },
                                             NULL, 0);
                }
                if (message)
                        log_notice("Session %" PRIu64 ": job %" PRIu64 " failed: %s", s->id,
                                   j->fence, message);
        }
        s->stats.busy_ns[j->engine] += busy_ns;
        if (s->connected)
                advance_completed(s);
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
                session_send_error(s, 0, EBADMSG,
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
                log_notice("Session %" PRIu64 ": undecodable message of %zd bytes, disconnecting",
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
