/* SPDX-License-Identifier: MIT */
/*
 * kfdb_session: one connection to kfdbrokerd. It connects, says Hello, maps
 * the session page (after checking it), keeps the eventfd, and runs the
 * synchronous request/reply exchange every other call uses: a request goes
 * out with a fresh id and the call reads datagrams until the reply with that
 * id arrives. Anything else read meanwhile is kept: replies by id (for a
 * caller that waits for them later), job failure notifications in a queue.
 * The session owns every buffer, event and batch made through it and
 * releases them when freed.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "client-session.h"
#include "client-socket.h"
#include "config.h"

int session_error(kfdb_session *s, int r, const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        vsnprintf(s->last_error, sizeof(s->last_error), format, ap);
        va_end(ap);
        return r;
}

uint64_t session_page_load_u64(const uint64_t *p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

uint32_t session_page_load_u32(const uint32_t *p) {
        return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

uint64_t session_completed_fence(const kfdb_session *s) {
        /* No page: nothing was submitted on this connection (client-page.c). */
        return s->page ? session_page_load_u64(&s->page->completed_fence) : s->last_fence;
}

void session_object_link(kfdb_session *s, ClientObject *o, client_object_release_fn release,
                         client_object_restore_fn restore, bool restore_late) {
        o->release = release;
        o->restore = restore;
        o->restore_late = restore_late;
        o->prev = &s->objects;
        o->next = s->objects.next;
        s->objects.next->prev = o;
        s->objects.next = o;
}

void session_object_unlink(ClientObject *o) {
        if (!o->next)
                return;
        o->prev->next = o->next;
        o->next->prev = o->prev;
        o->prev = o->next = NULL;
}

/* ---- Receiving ---- */

void session_push_failure(kfdb_session *s, const ClientReply *r) {
        kfdb_job_failure *f;

        if (s->n_failures == CLIENT_FAILURES_MAX) {
                /* Full: the oldest goes; the session page still counts every failure. */
                s->failures_head = (s->failures_head + 1) % CLIENT_FAILURES_MAX;
                s->n_failures--;
        }
        f = &s->failures[(s->failures_head + s->n_failures) % CLIENT_FAILURES_MAX];
        f->fence = r->job_failed.fence;
        f->error = -r->job_failed.error;
        snprintf(f->message, sizeof(f->message), "%s", r->job_failed.message);
        s->n_failures++;
}

int session_find_failure(kfdb_session *s, uint64_t fence) {
        for (size_t i = 0; i < s->n_failures; i++) {
                const kfdb_job_failure *f =
                        &s->failures[(s->failures_head + i) % CLIENT_FAILURES_MAX];
                if (f->fence == fence) {
                        session_error(s, f->error, "%s", f->message);
                        return f->error;
                }
        }
        return 0;
}

int kfdb_job_failure_next(kfdb_session *s, kfdb_job_failure *ret) {
        int k;

        if (!s || !ret)
                return -EINVAL;
        /* Failures already queued are handed out even after the daemon went away. */
        k = kfdb_process(s);
        if (s->n_failures == 0)
                return MIN(k, 0);
        *ret = s->failures[s->failures_head];
        s->failures_head = (s->failures_head + 1) % CLIENT_FAILURES_MAX;
        s->n_failures--;
        return 1;
}

static void stash_push(kfdb_session *s, ClientReply *r) {
        if (s->n_stash == CLIENT_STASH_MAX) {
                client_reply_free(s->stash[0]);
                memmove(s->stash, s->stash + 1, (CLIENT_STASH_MAX - 1) * sizeof(s->stash[0]));
                s->n_stash--;
        }
        s->stash[s->n_stash++] = r;
}

static ClientReply *stash_take(kfdb_session *s, uint64_t id) {
        for (size_t i = 0; i < s->n_stash; i++) {
                ClientReply *r = s->stash[i];
                if (r->id != id)
                        continue;
                memmove(s->stash + i, s->stash + i + 1, (s->n_stash - i - 1) * sizeof(s->stash[0]));
                s->n_stash--;
                return r;
        }
        return NULL;
}

/* The error of a request sent without waiting (session_send_only): queued
 * like a job failure, with fence 0. Takes r. */
static void push_no_reply_error(kfdb_session *s, ClientReply *r) {
        if (r->error != 0) {
                ClientReply f = { .type = CLIENT_REPLY_JOB_FAILED };

                f.job_failed.fence = 0;
                f.job_failed.error = r->error;
                f.job_failed.message = r->message[0] ? r->message : strerror(r->error);
                session_push_failure(s, &f);
        }
        client_reply_free(r);
}

/* Notifications are queued; replies are kept by id. Takes r. */
static void session_dispatch(kfdb_session *s, ClientReply *r) {
        if (r->id & CLIENT_NO_REPLY_ID_BIT) {
                push_no_reply_error(s, r);
                return;
        }
        if (r->id != 0) {
                stash_push(s, r);
                return;
        }
        if (r->type == CLIENT_REPLY_JOB_FAILED)
                session_push_failure(s, r);
        else if (r->type == CLIENT_REPLY_SESSION_ENDED && !r->session_ended.reconnect) {
                /* Ended on purpose (over D-Bus): coming back would undo that. */
                s->ended = true;
                snprintf(s->ended_message, sizeof(s->ended_message), "%s", r->session_ended.message);
        } else if (r->type == CLIENT_REPLY_SESSION_ENDED)
                /* The daemon stops (or lost its GPU): the jobs it drops are told why. */
                snprintf(s->restart_message, sizeof(s->restart_message), "%s", r->session_ended.message);
        /* Other notifications (from a newer daemon) carry nothing this library uses. */
        client_reply_free(r);
}

static bool socket_readable(void *userdata) {
        struct pollfd p = { .fd = *(const int *) userdata, .events = POLLIN };

        return poll(&p, 1, 0) != 0;
}

/* Waits up to timeout_ms for a datagram, spinning first (s->reply_spin) when
 * it may wait at all: 1 when one is there, 0, or negative errno. */
static int session_wait_readable(kfdb_session *s, int timeout_ms) {
        uint64_t start;
        int k;

        if (timeout_ms == 0)
                return client_socket_wait(s->fd, 0);
        start = client_spin_now_ns();
        k = client_spin(&s->reply_spin, start, socket_readable, &s->fd) ? 1 : client_socket_wait(s->fd, timeout_ms);
        if (k > 0)
                client_spin_update(&s->reply_spin, start);
        return k;
}

/* Reads one datagram if one arrives within timeout_ms: 1 with *ret, 0, or negative errno. */
static int session_read(kfdb_session *s, int timeout_ms, ClientReply **ret) {
        int fds[CLIENT_MAX_FDS];
        size_t n_fds = 0, n_extra = 0;
        ClientReply *r = NULL;
        unsigned expected;
        int n, k;

        k = session_wait_readable(s, timeout_ms);
        if (k <= 0)
                return k;
        n = client_socket_recv(s->fd, s->rbuf, CLIENT_MAX_MESSAGE_SIZE, fds, CLIENT_MAX_FDS,
                               &n_fds, &n_extra);
        if (n == -EAGAIN)
                return 0;
        if (n == -ECONNRESET && s->ended)
                return session_error(s, n, "kfdbrokerd ended the session: %s", s->ended_message);
        if (n == -ECONNRESET)
                return session_error(s, n, "kfdbrokerd closed the connection");
        if (n == -EBADMSG)
                return session_error(s, n, "kfdbrokerd sent a truncated message");
        if (n < 0)
                return session_error(s, n, "cannot receive from kfdbrokerd: %s", strerror(-n));

        k = client_reply_decode(s->rbuf, (size_t) n, &r);
        if (k < 0) {
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (k == -ENOMEM)
                        return k;
                return session_error(s, -EBADMSG,
                                     "kfdbrokerd sent a message of %d bytes that does not decode", n);
        }
        /* Keep only the fds this kind of message carries; close anything else. */
        expected = r->error == 0 ? client_reply_fds_expected(r->type) : 0;
        for (size_t i = 0; i < n_fds; i++) {
                if (i < expected)
                        r->fds[r->n_fds++] = fds[i];
                else
                        safe_close(fds[i]);
        }
        *ret = r;
        return 1;
}

int session_receive(kfdb_session *s, int timeout_ms) {
        ClientReply *r = NULL;
        int k;

        k = session_read(s, timeout_ms, &r);
        if (k <= 0)
                return k;
        session_dispatch(s, r);
        return 1;
}

int kfdb_process(kfdb_session *s) {
        struct pollfd p;
        uint64_t v;
        int k, n = 0;

        if (!s)
                return -EINVAL;
        p = (struct pollfd) { .fd = s->event_fd, .events = POLLIN };
        if (s->event_fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
                (void) !read(s->event_fd, &v, sizeof(v));
        for (;;) {
                k = session_receive(s, 0);
                if (k < 0) {
                        /* The daemon went away: come back to its successor, so
                         * the caller's loop goes on (jobs in flight fail). */
                        k = session_recover(s, k);
                        if (k < 0)
                                return k;
                        continue;
                }
                if (k == 0)
                        return n;
                n++;
        }
}

void session_drain(kfdb_session *s) {
        while (session_receive(s, 0) > 0)
                ;
}

/* ---- Calls ---- */

static int reply_errno(int error) {
        return error > 0 && error < 4096 ? -error : -EPROTO;
}

/* A plain error with id 0: the daemon refuses the connection itself (out of
 * fds, the user over its fd budget; docs/protocol.md) and closes it. */
static bool is_refusal(const ClientReply *m) {
        return m->id == 0 && m->type == CLIENT_REPLY_NONE && m->error != 0;
}

static int refused(kfdb_session *s, ClientReply *m) {
        int k = session_error(s, reply_errno(m->error), "kfdbrokerd refused the connection: %s",
                              m->message[0] ? m->message : strerror(m->error));
        client_reply_free(m);
        return k;
}

/* The request could not go out (k): the daemon closed the connection. If it
 * said why before closing (a refusal), that is the answer; what else is
 * queued is dispatched as usual. */
static int queued_refusal(kfdb_session *s, int k, const char *name) {
        ClientReply *m = NULL;

        while (session_read(s, 0, &m) > 0) {
                if (is_refusal(m))
                        return refused(s, m);
                session_dispatch(s, m);
        }
        /* It ended the session on purpose (SessionEnded): say why. */
        if (s->ended)
                return session_error(s, -ECONNRESET, "kfdbrokerd ended the session: %s", s->ended_message);
        return session_error(s, k, "cannot send %s request to kfdbrokerd: %s", name, strerror(-k));
}

/* An AllocBuffer takes the deferred free along as its free_first, when the
 * daemon would decode the request (a size that rounds up to 4 KiB; a request
 * the daemon cannot decode is refused whole, with the free in it). */
static bool take_deferred_free(kfdb_session *s, ClientRequest *req) {
        if (req->type != CLIENT_REQUEST_ALLOC_BUFFER || s->deferred_free.handle == 0 ||
            req->alloc_buffer.size == 0 || req->alloc_buffer.size > UINT64_MAX - 4095)
                return false;
        req->alloc_buffer.free_first_id = s->next_id++ | CLIENT_NO_REPLY_ID_BIT;
        if (s->next_id & CLIENT_NO_REPLY_ID_BIT)
                s->next_id = 1;
        req->alloc_buffer.free_first_handle = s->deferred_free.handle;
        req->alloc_buffer.free_first_no_copy_kept = s->deferred_free.no_copy_kept;
        s->deferred_free.handle = 0;
        return true;
}

int session_flush_deferred_free(kfdb_session *s) {
        ClientRequest req = { .type = CLIENT_REQUEST_FREE_BUFFER };

        if (s->deferred_free.handle == 0)
                return 0;
        req.object.handle = s->deferred_free.handle;
        req.object.no_reply = true;
        req.object.no_copy_kept = s->deferred_free.no_copy_kept;
        s->deferred_free.handle = 0;
        return session_send_only(s, &req);
}

int session_defer_free(kfdb_session *s, uint64_t handle, bool no_copy_kept) {
        int k = session_flush_deferred_free(s);

        if (handle == 0)
                return k;
        s->deferred_free.handle = handle;
        s->deferred_free.no_copy_kept = no_copy_kept;
        return k;
}

/* Sends the request and reads until its reply arrives. *ret_sent: whether it
 * went out (a lost connection after that leaves its fate unknown). */
static int session_exchange(kfdb_session *s, ClientRequest *req, const int *fds, size_t n_fds,
                            ClientReply **ret, bool *ret_sent) {
        _cleanup_free_ void *buf = NULL;
        const char *name = client_request_type_name(req->type);
        size_t len;
        int k;

        *ret_sent = false;
        /* A free that waits goes first (its send failing means the
         * connection is gone, and this request's send says so). */
        if (!take_deferred_free(s, req))
                (void) session_flush_deferred_free(s);
        req->id = s->next_id++;
        if (s->next_id & CLIENT_NO_REPLY_ID_BIT)
                s->next_id = 1;
        k = client_request_encode(req, &buf, &len);
        if (k == -EMSGSIZE)
                return session_error(s, k, "%s request larger than %u bytes", name,
                                     CLIENT_MAX_MESSAGE_SIZE);
        if (k < 0)
                return session_error(s, k, "cannot encode %s request", name);
        session_spin_look(s);
        k = client_socket_send(s->fd, buf, len, fds, n_fds);
        if (k == -ECONNRESET)
                return queued_refusal(s, k, name);
        if (k < 0)
                return session_error(s, k, "cannot send %s request to kfdbrokerd: %s", name,
                                     strerror(-k));
        *ret_sent = true;

        for (;;) {
                ClientReply *m = NULL;

                *ret = stash_take(s, req->id);
                if (*ret)
                        return 0;
                /* While reconnecting, a daemon that accepted but does not
                 * answer must not hold the caller past the reconnect time. */
                k = session_read(s, s->restoring ? s->reconnect_timeout_ms : -1, &m);
                if (k < 0)
                        return k;
                if (k == 0) {
                        if (s->restoring)
                                return session_error(s, -ETIMEDOUT, "kfdbrokerd did not answer %s within %d ms",
                                                     name, s->reconnect_timeout_ms);
                        continue;
                }
                if (m->id == req->id) {
                        *ret = m;
                        return 0;
                }
                if (is_refusal(m))
                        return refused(s, m);
                session_dispatch(s, m);
        }
}

int session_send_only(kfdb_session *s, ClientRequest *req) {
        _cleanup_free_ void *buf = NULL;
        size_t len;
        int k;

        (void) session_flush_deferred_free(s); /* it clears the free before sending it */
        req->id = s->next_id++ | CLIENT_NO_REPLY_ID_BIT;
        if (s->next_id & CLIENT_NO_REPLY_ID_BIT)
                s->next_id = 1;
        k = client_request_encode(req, &buf, &len);
        if (k < 0)
                return session_error(s, k, "cannot encode %s request", client_request_type_name(req->type));
        k = client_socket_send(s->fd, buf, len, NULL, 0);
        if (k < 0)
                return session_error(s, k, "cannot send %s request to kfdbrokerd: %s",
                                     client_request_type_name(req->type), strerror(-k));
        return 0;
}

int session_call(kfdb_session *s, ClientRequest *req, const int *fds, size_t n_fds,
                 ClientReply **ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        const char *name = client_request_type_name(req->type);
        ClientReplyType expected;
        bool sent;
        int k;

        s->last_error[0] = '\0';
        for (;;) {
                k = session_exchange(s, req, fds, n_fds, &r, &sent);
                if (k >= 0)
                        break;
                k = session_recover(s, k);
                if (k < 0)
                        return k;
                /* The old daemon may have run some of a Submit it took before
                 * it went: running it again could run jobs twice. */
                if (sent && req->type == CLIENT_REQUEST_SUBMIT)
                        return session_error(s, -ECANCELED,
                                             "kfdbrokerd restarted before it answered this Submit: some of its jobs may have run, none will complete; submit again if that is safe");
                session_request_remap(s, req);
        }

        if (r->error != 0)
                return session_error(s, reply_errno(r->error), "%s",
                                     r->message[0] ? r->message : strerror(r->error));
        expected = client_request_reply_type(req->type);
        if (r->type != expected)
                return session_error(s, -EBADMSG, "kfdbrokerd answered %s with the wrong reply body",
                                     name);
        if (r->n_fds < client_reply_fds_required(expected))
                return session_error(s, -EBADMSG,
                                     "kfdbrokerd answered %s with %zu fds, expected %u", name,
                                     r->n_fds, client_reply_fds_required(expected));
        *ret = TAKE_PTR(r);
        return 0;
}

/* ---- Lifetime ---- */

static int check_client_name(const char *name) {
        size_t n = strlen(name);

        if (n > 64)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) name[i] < 0x20 || name[i] == 0x7f)
                        return -EINVAL;
        return 0;
}

/* The program's name made acceptable: at most 64 bytes, control characters as '?'. */
static void default_client_name(char *buf, size_t size) {
        snprintf(buf, size, "%s", program_invocation_short_name ?: "");
        for (char *p = buf; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = '?';
}

static kfdb_limits limits_from_reply(const ClientLimits *l) {
        return (kfdb_limits) {
                .max_buffer_size = l->max_buffer_size,
                .max_buffer_bytes = l->max_buffer_bytes,
                .max_buffers = l->max_buffers,
                .max_events = l->max_events,
                .max_jobs_in_flight = l->max_jobs_in_flight,
                .max_jobs_per_submit = l->max_jobs_per_submit,
                .max_message_size = l->max_message_size,
                .max_wait_events = l->max_wait_events,
        };
}

void session_forget_hello(kfdb_session *s) {
        s->lazy = false;
        s->submit_ready = false;
        session_ring_close(s);
        session_fence_page_close(s);
        if (s->page)
                munmap((void *) s->page, s->page_size);
        s->page = NULL;
        for (size_t i = 0; i < s->n_features; i++)
                free(s->features[i]);
        free(s->features);
        s->features = NULL;
        s->n_features = 0;
        free(s->daemon_version);
        s->daemon_version = NULL;
}

int session_hello(kfdb_session *s, const char *client_name, uint64_t resume_fence) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_HELLO };
        int k;

        req.hello.protocol_version = KFDB_PROTOCOL_VERSION;
        req.hello.client_name = client_name;
        req.hello.resume_fence = resume_fence;
        req.hello.features = s->lazy_wanted ? CLIENT_HELLO_FEATURE_LAZY_SESSION : 0;
        req.hello.has_gpu = s->gpu_wanted;
        req.hello.gpu = s->gpu_asked;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        if (r->hello.protocol_version != KFDB_PROTOCOL_VERSION)
                return session_error(s, -EPROTONOSUPPORT,
                                     "kfdbrokerd speaks protocol version %u, this library %u",
                                     r->hello.protocol_version, KFDB_PROTOCOL_VERSION);

        s->session_id = r->hello.session_id;
        /* A daemon before several GPUs says nothing: its one GPU is 0. */
        s->gpu = r->hello.gpu;
        s->gpu_count = MAX(r->hello.gpu_count, 1u);
        if (s->gpu_wanted && s->gpu != s->gpu_asked)
                return session_error(s, -ENODEV, "kfdbrokerd put the session on GPU %u, not on GPU %u as asked "
                                                 "(a daemon before several GPUs)", s->gpu, s->gpu_asked);
        /* A reconnect comes back to the same GPU. */
        s->gpu_wanted = true;
        s->gpu_asked = s->gpu;
        s->daemon_version = strdup(r->hello.daemon_version);
        if (!s->daemon_version)
                return -ENOMEM;
        if (r->hello.n_features > 0) {
                s->features = calloc(r->hello.n_features, sizeof(char *));
                if (!s->features)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < r->hello.n_features; i++) {
                s->features[i] = strdup(r->hello.features[i]);
                if (!s->features[i])
                        return -ENOMEM;
                s->n_features++;
        }
        s->limits = limits_from_reply(&r->hello.limits);
        /* A daemon that knows the bit took it: the page comes when needed
         * (client-page.c). One that does not sent it, as to everyone. */
        s->lazy = s->lazy_wanted && kfdb_session_has_feature(s, "lazy-session");
        if (s->lazy)
                return 0;
        if (r->n_fds < 2)
                return session_error(s, -EBADMSG, "kfdbrokerd answered Hello with %zu fds, expected 2", r->n_fds);
        k = session_map_page(s, r->fds[0], r->hello.session_page_size);
        if (k < 0)
                return k;
        s->event_fd = TAKE_FD(r->fds[1]);
        return session_submit_need(s);
}

DEFINE_POINTER_CLEANUP(kfdb_session, kfdb_session_free)

/* Why the calling thread's last kfdb_session_new*() failed, when the daemon
 * said (kfdb_session_last_error(NULL)). */
static _Thread_local char new_error[CLIENT_ERROR_MAX];

/* $KFDBROKER_GPU: a GPU index, or unset/empty for the first the session may use. */
static int gpu_from_env(bool *ret_wanted, uint32_t *ret_gpu) {
        const char *e = secure_getenv("KFDBROKER_GPU");
        char *end = NULL;
        unsigned long v;

        *ret_wanted = false;
        if (!e || !*e)
                return 0;
        errno = 0;
        v = strtoul(e, &end, 10);
        if (errno || !end || *end || e[0] == '-' || e[0] == '+' || v > UINT32_MAX) {
                snprintf(new_error, sizeof(new_error),
                         "KFDBROKER_GPU=%.32s: not a GPU index (0, 1, ... as kfdbrokerctl status lists them)", e);
                return -EINVAL;
        }
        *ret_wanted = true;
        *ret_gpu = (uint32_t) v;
        return 0;
}

/* kfdb_session_new_from_fd() on GPU gpu when gpu_wanted, else on $KFDBROKER_GPU's. */
static int session_new_from_fd(int fd, const char *client_name, bool gpu_wanted, uint32_t gpu, kfdb_session **ret) {
        _cleanup_(kfdb_session_freep) kfdb_session *s = NULL;
        char name[65];
        int type = 0, k;
        socklen_t sl = sizeof(type);

        if (fd < 0 || !ret)
                return -EINVAL;
        if (!gpu_wanted) {
                k = gpu_from_env(&gpu_wanted, &gpu);
                if (k < 0)
                        return k;
        }
        if (client_name) {
                k = check_client_name(client_name);
                if (k < 0)
                        return k;
                snprintf(name, sizeof(name), "%s", client_name);
        } else
                default_client_name(name, sizeof(name));
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &sl) < 0)
                return -errno;
        if (type != SOCK_SEQPACKET)
                return -EPROTOTYPE;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->fd = -EBADF;
        s->event_fd = -EBADF;
        s->ring_doorbell = -EBADF;
        s->next_id = 1;
        s->objects.prev = s->objects.next = &s->objects;
        s->rbuf = malloc(CLIENT_MAX_MESSAGE_SIZE);
        s->failures = calloc(CLIENT_FAILURES_MAX, sizeof(*s->failures));
        if (!s->rbuf || !s->failures)
                return -ENOMEM;
        s->fd = fd;
        s->gpu_wanted = gpu_wanted;
        s->gpu_asked = gpu;
        snprintf(s->client_name, sizeof(s->client_name), "%s", name);
        s->reconnect_timeout_ms = CLIENT_RECONNECT_TIMEOUT_MS;
        client_spin_init(&s->reply_spin, client_spin_max_ns());
        s->fence_spin = s->reply_spin;
        {
                const char *e = secure_getenv("KFDBROKER_SUBMIT_RING");

                s->ring_wanted = !e || strcmp(e, "0") != 0;
                e = secure_getenv("KFDBROKER_FENCE_PAGE");
                s->fence_page_wanted = !e || strcmp(e, "0") != 0;
                e = secure_getenv("KFDBROKER_LAZY_SESSION");
                s->lazy_wanted = !e || strcmp(e, "0") != 0;
        }
        {
                const char *e = secure_getenv("KFDBROKER_RECONNECT_TIMEOUT_MS");
                char *end = NULL;
                long v = e && *e ? strtol(e, &end, 10) : -1;

                if (e && *e && end && *end == '\0' && v >= 0 && v <= INT_MAX)
                        s->reconnect_timeout_ms = (int) v;
        }
        k = session_hello(s, name, 0);
        if (k < 0) {
                /* The caller keeps fd when we fail. */
                s->fd = -EBADF;
                /* The daemon's reason (a refusal: no GPU, a limit) outlives s. */
                snprintf(new_error, sizeof(new_error), "%s", s->last_error);
                return k;
        }
        *ret = TAKE_PTR(s);
        return 0;
}

int kfdb_session_new_from_fd(int fd, const char *client_name, kfdb_session **ret) {
        new_error[0] = '\0';
        return session_new_from_fd(fd, client_name, false, 0, ret);
}

const char *kfdb_default_socket_path(void) {
        return KFDBROKER_DEFAULT_SOCKET;
}

int session_connect(const char *path, int *ret) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        *ret = TAKE_FD(fd);
        return 0;
}

static int session_new(const char *path, const char *client_name, bool gpu_wanted, uint32_t gpu, kfdb_session **ret) {
        _cleanup_close_ int fd = -EBADF;
        char *copy;
        int k;

        new_error[0] = '\0';
        if (!ret)
                return -EINVAL;
        if (!path)
                path = secure_getenv("KFDBROKER_SOCKET");
        if (!path || !*path)
                path = KFDBROKER_DEFAULT_SOCKET;
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        k = session_connect(path, &fd);
        if (k >= 0)
                k = session_new_from_fd(fd, client_name, gpu_wanted, gpu, ret);
        if (k < 0) {
                free(copy);
                return k;
        }
        TAKE_FD(fd);
        (*ret)->path = copy; /* it may come back here after a restart */
        return 0;
}

int kfdb_session_new(const char *path, const char *client_name, kfdb_session **ret) {
        return session_new(path, client_name, false, 0, ret);
}

int kfdb_session_new_on_gpu(const char *path, const char *client_name, uint32_t gpu, kfdb_session **ret) {
        return session_new(path, client_name, true, gpu, ret);
}

uint32_t kfdb_session_get_gpu(const kfdb_session *s) {
        return s ? s->gpu : 0;
}


kfdb_session *kfdb_session_free(kfdb_session *s) {
        if (!s)
                return NULL;
        /* Objects unlink themselves in release(). */
        while (s->objects.next && s->objects.next != &s->objects)
                s->objects.next->release(s->objects.next);
        for (size_t i = 0; i < s->n_stash; i++)
                client_reply_free(s->stash[i]);
        session_forget_hello(s);
        safe_close(s->event_fd);
        safe_close(s->fd);
        client_handle_map_clear(&s->restore_map);
        free(s->path);
        free(s->failures);
        free(s->rbuf);
        free(s);
        return NULL;
}

/* ---- Accessors and simple calls ---- */

const char *kfdb_session_last_error(const kfdb_session *s) {
        return s ? s->last_error : new_error;
}

const char *kfdb_strerror(int error) {
        switch (error) {
        case -EDQUOT:
                return "a kfdbroker limit was reached";
        case -EUSERS:
                return "this user's connections or file descriptors at kfdbrokerd are at their limit";
        default:
                return strerror(error < 0 ? -error : error);
        }
}

int kfdb_get_fd(const kfdb_session *s) {
        return s ? s->fd : -EINVAL;
}

int kfdb_get_event_fd(const kfdb_session *s) {
        int k;

        if (!s)
                return -EINVAL;
        /* A lazy session makes its page (and eventfd) now: what the caller
         * sees of the session does not change, hence the const. */
        k = session_page_need((kfdb_session *) s);
        return k < 0 ? k : s->event_fd;
}

uint64_t kfdb_session_get_id(const kfdb_session *s) {
        return s ? s->session_id : 0;
}

const char *kfdb_session_get_daemon_version(const kfdb_session *s) {
        return s && s->daemon_version ? s->daemon_version : "";
}

bool kfdb_session_has_feature(const kfdb_session *s, const char *feature) {
        if (!s || !feature)
                return false;
        for (size_t i = 0; i < s->n_features; i++)
                if (strcmp(s->features[i], feature) == 0)
                        return true;
        return false;
}

uint64_t kfdb_session_get_reconnects(const kfdb_session *s) {
        return s ? s->n_reconnects : 0;
}

uint64_t kfdb_session_get_ring_submits(const kfdb_session *s) {
        return s ? s->ring_submits : 0;
}

void session_spin_look(kfdb_session *s) {
        uint64_t now = client_spin_now_ns();

        /* One chain of looks at the machine for both waits: the newer state
         * (a wait may have looked on its own), one look, shared. */
        if (s->fence_spin.crowd_checked_ns > s->reply_spin.crowd_checked_ns)
                client_spin_take_looks(&s->reply_spin, &s->fence_spin);
        client_spin_look(&s->reply_spin, now);
        client_spin_take_looks(&s->fence_spin, &s->reply_spin);
}

uint64_t kfdb_session_get_fence_page_waits(const kfdb_session *s) {
        return s ? s->fence_page_waits : 0;
}

int kfdb_session_set_reconnect_timeout(kfdb_session *s, int timeout_ms) {
        if (!s || timeout_ms < 0)
                return -EINVAL;
        s->reconnect_timeout_ms = timeout_ms;
        return 0;
}

uint64_t kfdb_session_get_context_lost(const kfdb_session *s) {
        return s && s->page ? session_page_load_u64(&s->page->context_lost) : 0;
}

void kfdb_session_get_limits(const kfdb_session *s, kfdb_limits *ret) {
        if (s && ret)
                *ret = s->limits;
}

static void copy_string(char *dst, size_t size, const char *src) {
        snprintf(dst, size, "%s", src ?: "");
}

int kfdb_device_info(kfdb_session *s, kfdb_device *ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_DEVICE_INFO };
        int k;

        if (!s || !ret)
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        *ret = (kfdb_device) {
                .gpu_id = r->device_info.gpu_id,
                .vendor_id = r->device_info.vendor_id,
                .device_id = r->device_info.device_id,
                .cu_count = r->device_info.cu_count,
                .vram_size = r->device_info.vram_size,
                .kfd_major = r->device_info.kfd_major,
                .kfd_minor = r->device_info.kfd_minor,
                .sdma_queues = r->device_info.sdma_queues,
        };
        copy_string(ret->backend, sizeof(ret->backend), r->device_info.backend);
        copy_string(ret->gfx_name, sizeof(ret->gfx_name), r->device_info.gfx_name);
        copy_string(ret->name, sizeof(ret->name), r->device_info.name);
        return 0;
}

int kfdb_device_compute_queues(kfdb_session *s, uint32_t *ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_DEVICE_INFO };
        int k;

        if (!s || !ret)
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        *ret = r->device_info.compute_queues;
        return 0;
}

int kfdb_device_node(kfdb_session *s, char *node, size_t node_size, char *reason, size_t reason_size) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_DEVICE_INFO };
        int k;

        if (!s || (node_size > 0 && !node) || (reason_size > 0 && !reason))
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        if (node_size > 0)
                copy_string(node, node_size, r->device_info.node);
        if (reason_size > 0)
                copy_string(reason, reason_size, r->device_info.node_reason);
        return 0;
}

/* A Query for one of the kfdb_query*() calls, which fill their struct (ret)
 * from *reply. */
static int query_call(kfdb_session *s, const void *ret, ClientReply **reply) {
        ClientRequest req = { .type = CLIENT_REQUEST_QUERY };

        if (!s || !ret)
                return -EINVAL;
        return session_call(s, &req, NULL, 0, reply);
}

int kfdb_query(kfdb_session *s, kfdb_usage *ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        int k = query_call(s, ret, &r);

        if (k < 0)
                return k;
        *ret = (kfdb_usage) {
                .buffers = r->query.buffers,
                .buffer_bytes = r->query.buffer_bytes,
                .events = r->query.events,
                .jobs_submitted = r->query.jobs_submitted,
                .jobs_completed = r->query.jobs_completed,
                .jobs_failed = r->query.jobs_failed,
                .jobs_in_flight = r->query.jobs_in_flight,
                .bytes_copied = r->query.bytes_copied,
                .bytes_filled = r->query.bytes_filled,
                .limits = limits_from_reply(&r->query.limits),
        };
        return 0;
}

int kfdb_query_quota(kfdb_session *s, kfdb_quota *ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        int k = query_call(s, ret, &r);

        if (k < 0)
                return k;
        *ret = (kfdb_quota) {
                .released_buffer_bytes = r->query.released_buffer_bytes,
                .user_buffer_bytes = r->query.user_buffer_bytes,
                .user_buffers = r->query.user_buffers,
                .unit_buffer_bytes = r->query.unit_buffer_bytes,
                .max_user_buffer_bytes = r->query.limits.max_user_buffer_bytes,
                .max_user_buffers = r->query.limits.max_user_buffers,
                .max_unit_buffer_bytes = r->query.limits.max_unit_buffer_bytes,
        };
        return 0;
}

int kfdb_query_context_bytes(kfdb_session *s, uint64_t *ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        int k = query_call(s, ret, &r);

        if (k < 0)
                return k;
        *ret = r->query.context_bytes;
        return 0;
}

int kfdb_query_fd_budget(kfdb_session *s, kfdb_fd_budget *ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        int k = query_call(s, ret, &r);

        if (k < 0)
                return k;
        *ret = (kfdb_fd_budget) {
                .pooled_buffer_bytes = r->query.pooled_buffer_bytes,
                .user_fds = r->query.user_fds,
                .max_user_fds = r->query.limits.max_user_fds,
                .session_fds = r->query.session_fds,
                .max_session_fds = r->query.limits.max_session_fds,
        };
        return 0;
}

int kfdb_gpus_get(kfdb_session *s, kfdb_gpu *list, size_t max_list, size_t *ret_n) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_STATUS };
        int k;

        if (!s || !ret_n || (max_list > 0 && !list))
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        *ret_n = r->status.n_gpus;
        for (size_t i = 0; i < r->status.n_gpus && i < max_list; i++) {
                const ClientGpuStatus *g = &r->status.gpus[i];

                list[i] = (kfdb_gpu) { .index = g->index, .gpu_id = g->gpu_id, .cu_count = g->cu_count,
                                       .vram_size = g->vram_size, .sessions = g->sessions,
                                       .jobs_completed = g->jobs_completed, .jobs_failed = g->jobs_failed,
                                       .jobs_in_flight = g->jobs_in_flight, .gpu_buffers = g->gpu_buffers };
                copy_string(list[i].gfx_name, sizeof(list[i].gfx_name), g->gfx_name);
                copy_string(list[i].name, sizeof(list[i].name), g->name);
                copy_string(list[i].node, sizeof(list[i].node), g->node);
                copy_string(list[i].node_reason, sizeof(list[i].node_reason), g->node_reason);
        }
        return 0;
}

int kfdb_gpu_contexts_get(kfdb_session *s, kfdb_gpu_contexts *ret, kfdb_gpu_context *list, size_t max_list) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_STATUS };
        int k;

        if (!s || !ret || (max_list > 0 && !list))
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        *ret = (kfdb_gpu_contexts) { .max = r->status.max_contexts, .n = r->status.n_contexts };
        copy_string(ret->mechanism, sizeof(ret->mechanism), r->status.context_mechanism);
        copy_string(ret->reason, sizeof(ret->reason), r->status.context_mechanism_reason);
        for (size_t i = 0; i < r->status.n_contexts && i < max_list; i++) {
                const ClientContextInfo *c = &r->status.contexts[i];

                list[i] = (kfdb_gpu_context) { .id = c->id, .live = c->live, .users = c->users,
                                               .jobs_in_flight = c->jobs_in_flight, .losses = c->losses,
                                               .memory_bytes = c->memory_bytes, .mapped_bytes = c->mapped_bytes,
                                               .pid = c->pid };
                copy_string(list[i].kind, sizeof(list[i].kind), c->kind);
        }
        return 0;
}

int kfdb_session_terminate(kfdb_session *s, uint64_t id, const char *reason) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_TERMINATE_SESSION,
                              .terminate_session = { .session_id = id, .reason = reason } };

        if (!s)
                return -EINVAL;
        if (reason && strlen(reason) > 255)
                return session_error(s, -EINVAL, "the reason is %zu bytes, longer than 255", strlen(reason));
        return session_call(s, &req, NULL, 0, &r);
}

int kfdb_sessions_list(kfdb_session *s, uint64_t after_id, kfdb_session_info *ret, size_t n, size_t *ret_n,
                       bool *ret_more) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_LIST_SESSIONS, .list_sessions = { .after_id = after_id } };
        size_t take;
        int k;

        if (!s || (!ret && n > 0) || !ret_n)
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        take = MIN(n, r->list_sessions.n_sessions);
        if (take > 0)
                memcpy(ret, r->list_sessions.sessions, take * sizeof(*ret));
        *ret_n = take;
        if (ret_more)
                *ret_more = r->list_sessions.more || take < r->list_sessions.n_sessions;
        return 0;
}

int kfdb_status(kfdb_session *s, kfdb_daemon_status *ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_STATUS };
        int k;

        if (!s || !ret)
                return -EINVAL;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        *ret = (kfdb_daemon_status) {
                .sessions = r->status.sessions,
                .jobs_completed = r->status.jobs_completed,
                .jobs_failed = r->status.jobs_failed,
                .uptime_ns = r->status.uptime_ns,
                .buffer_bytes = r->status.buffer_bytes,
                .gpu_buffers = r->status.gpu_buffers,
                .jobs_in_flight = r->status.jobs_in_flight,
                .events = r->status.events,
        };
        copy_string(ret->daemon_version, sizeof(ret->daemon_version), r->status.daemon_version);
        copy_string(ret->backend, sizeof(ret->backend), r->status.backend);
        copy_string(ret->gfx_name, sizeof(ret->gfx_name), r->status.gfx_name);
        return 0;
}
