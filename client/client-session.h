/* SPDX-License-Identifier: MIT */
/*
 * The library's session object (kfdb_session) as the other client files see
 * it: the socket, the mapped session page and its eventfd, what Hello
 * announced, replies that arrived for other requests, job failure
 * notifications, the last error message, and the objects made through it
 * (freed with it). The public API is in kfdbroker.h; these are the internal
 * calls buffers, events and batches build on.
 */
#pragma once

#include <stdarg.h>

#include "client-spin.h"
#include "client-wire.h"
#include "kfdbroker.h"
#include "macro.h"
#include "session-page.h"
#include "submit-ring.h"

#define CLIENT_ERROR_MAX 512u
/* Replies for requests no one waits for any more are kept up to this many. */
#define CLIENT_STASH_MAX 64u
/* Job failures not yet taken by kfdb_job_failure_next(); older ones are dropped beyond. */
#define CLIENT_FAILURES_MAX 1024u

/* The ids of requests sent without waiting for a reply (session_send_only)
 * have this bit set, so an error the daemon sends for one later is told
 * apart from the replies of calls. */
#define CLIENT_NO_REPLY_ID_BIT (UINT64_C(1) << 63)

/* Fences a daemon restart cancelled (jobs in flight then): first..last. */
#define CLIENT_CANCELLED_RANGES 4u
/* How long a session tries to reach a restarted daemon, unless
 * KFDBROKER_RECONNECT_TIMEOUT_MS or kfdb_session_set_reconnect_timeout() say. */
#define CLIENT_RECONNECT_TIMEOUT_MS 30000

/* Handles of the previous connection -> the new one's (client-resume.c). */
typedef struct ClientHandleMap {
        struct ClientHandlePair {
                uint64_t from, to;
        } *pairs;
        size_t n, n_allocated;
        bool sorted;
} ClientHandleMap;

int client_handle_map_add(ClientHandleMap *m, uint64_t from, uint64_t to);
/* The new handle of from, or from itself when the map does not know it. */
uint64_t client_handle_map_get(ClientHandleMap *m, uint64_t from);
void client_handle_map_clear(ClientHandleMap *m);

/* An object owned by a session: linked so kfdb_session_free() can release it
 * and a reconnect can make it again in the new session. */
typedef struct ClientObject ClientObject;
typedef void (*client_object_release_fn)(ClientObject *o);
/* Makes the object again on the new connection, adding old -> new handles to
 * map (0: done; negative errno: the object is lost, its handle 0). */
typedef int (*client_object_restore_fn)(ClientObject *o, ClientHandleMap *map);
struct ClientObject {
        ClientObject *prev, *next;
        client_object_release_fn release; /* local teardown only, no round trip */
        client_object_restore_fn restore; /* NULL: nothing to make again */
        bool restore_late;                /* after every object without it (batches: they name the others) */
};

struct kfdb_session {
        int fd;
        int event_fd;
        const KfdbSessionPage *page; /* NULL in a lazy session until needed (client-page.c) */
        size_t page_size;
        bool lazy_wanted;  /* KFDBROKER_LAZY_SESSION is not 0 */
        bool lazy;         /* this connection's Hello asked for a lazy session and the daemon took it */
        bool submit_ready; /* the ring and fence page were opened (or not offered) on this connection */

        uint64_t next_id;
        uint64_t last_fence; /* highest fence a Submit reply handed out */
        uint64_t session_id;
        /* The GPU: asked for at Hello when gpu_wanted (kfdb_session_new_on_gpu(),
         * $KFDBROKER_GPU, and after a reconnect the one it had); gpu is what
         * the daemon gave, of gpu_count it serves. */
        bool gpu_wanted;
        uint32_t gpu_asked, gpu, gpu_count;
        char *daemon_version;
        char **features;
        size_t n_features;
        kfdb_limits limits;

        ClientReply *stash[CLIENT_STASH_MAX]; /* replies by id, oldest first */
        size_t n_stash;

        kfdb_job_failure *failures; /* ring buffer */
        size_t failures_head, n_failures;

        ClientObject objects; /* list head */

        /* Reconnecting after a daemon restart (client-resume.c). */
        char client_name[65];     /* what Hello said */
        char *path;               /* the socket; NULL (kfdb_session_new_from_fd): no reconnecting */
        int reconnect_timeout_ms; /* 0: never */
        bool restoring;           /* a lost connection now is not recovered again */
        bool ended;               /* the daemon ended the session for good (SessionEnded) */
        char ended_message[256];
        char restart_message[256]; /* why the daemon said it went (SessionEnded, reconnect true) */
        uint64_t n_reconnects;
        ClientHandleMap restore_map; /* of the last reconnect */
        struct {
                uint64_t first, last;
                char why[256];
        } cancelled[CLIENT_CANCELLED_RANGES];
        size_t n_cancelled;

        /* The submit ring (client-ring.c), when the daemon offers it and
         * KFDBROKER_SUBMIT_RING is not 0. */
        bool ring_wanted;
        KfdbSubmitRing *ring; /* mapped read-write; NULL: Submit over the socket */
        int ring_doorbell;
        uint64_t ring_head;   /* records published */
        uint64_t ring_submits; /* batches that went through the ring */

        /* The fence page (client-fence.c), when the daemon offers it and
         * KFDBROKER_FENCE_PAGE is not 0: the SDMA engine writes each done
         * copy's or fill's fence into its slot. */
        bool fence_page_wanted;
        const uint32_t *fence_page; /* mapped read-only; NULL: the session page only */
        uint32_t fence_page_slots;
        uint64_t fence_page_waits; /* kfdb_fence_wait()s it ended before the session page */

        /* How long a wait for a reply, and for a fence, spins before it
         * sleeps (client-spin.h). */
        ClientSpin reply_spin, fence_spin;

        /* A FreeBuffer (no_reply) not sent yet (session_defer_free()):
         * handle 0 for none. */
        struct {
                uint64_t handle;
                bool no_copy_kept;
        } deferred_free;

        uint8_t *rbuf; /* CLIENT_MAX_MESSAGE_SIZE receive buffer */
        char last_error[CLIENT_ERROR_MAX];
};

/* Sets last_error from a printf format and returns r (a negative errno). */
int session_error(kfdb_session *s, int r, const char *format, ...) _printf_(3, 4);

/* Just before the daemon is woken (a request, a submit through the ring):
 * the spins of the waits to come look at the runnable count now
 * (client-spin.h). */
void session_spin_look(kfdb_session *s);

/*
 * Sends a request (with fds) and waits for its reply; messages for other ids
 * and notifications that arrive meanwhile are kept. On a daemon error,
 * returns its negated errno with last_error set to the daemon's message; a
 * reply whose body or fd count does not match the request is -EBADMSG.
 * *ret is the reply (its fds still inside) on success.
 */
int session_call(kfdb_session *s, ClientRequest *req, const int *fds, size_t n_fds,
                 ClientReply **ret);

/*
 * Sends a request the daemon answers only when it fails (FreeBuffer with
 * no_reply) and returns without waiting: 0, or the negative errno of a send
 * that failed (nothing was sent then; the connection may be lost). The
 * daemon's error, if one comes, is queued as a failure with fence 0 for
 * kfdb_job_failure_next().
 */
int session_send_only(kfdb_session *s, ClientRequest *req);

/*
 * Frees the buffer handle (FreeBuffer with no_reply; no_copy_kept as
 * FreeBufferRequest's) with the session's next request instead of now: in
 * the same datagram when that is an AllocBuffer (its free_first, feature
 * "alloc-free-first"), just before it otherwise. At most one free waits; a
 * second sends the first. A reconnect forgets it (its buffer went with the
 * old connection). Returns 0, or the negative errno of sending the free that
 * waited.
 */
int session_defer_free(kfdb_session *s, uint64_t handle, bool no_copy_kept);

/* Sends the free session_defer_free() keeps, if any: 0 or a negative errno. */
int session_flush_deferred_free(kfdb_session *s);

/* Reads and dispatches one message if one arrives within timeout_ms: 1, 0 (none) or negative errno. */
int session_receive(kfdb_session *s, int timeout_ms);

/* Page readers (acquire loads). */
uint64_t session_page_load_u64(const uint64_t *p);
uint32_t session_page_load_u32(const uint32_t *p);
uint64_t session_completed_fence(const kfdb_session *s);

/* Queues a job failure (a JOB_FAILED reply) for kfdb_job_failure_next(). */
void session_push_failure(kfdb_session *s, const ClientReply *r);
/* Looks for a queued failure of exactly this fence; returns its negative errno or 0. */
int session_find_failure(kfdb_session *s, uint64_t fence);

void session_object_link(kfdb_session *s, ClientObject *o, client_object_release_fn release,
                         client_object_restore_fn restore, bool restore_late);

/* Hello on s->fd (also when resuming: resume_fence = s->last_fence), maps the
 * page, takes the eventfd, limits and features. */
int session_hello(kfdb_session *s, const char *client_name, uint64_t resume_fence);
/* A new connected SOCK_SEQPACKET socket to path in *ret. */
int session_connect(const char *path, int *ret);
/* Drops what Hello gave (page, features, version) before a new Hello. */
void session_forget_hello(kfdb_session *s);
/* Reads and dispatches what the old connection still holds (failures, SessionEnded). */
void session_drain(kfdb_session *s);

/* The session page (client-page.c). session_map_page() checks and maps what
 * Hello or OpenSessionPage gave. session_page_need() makes a lazy session's
 * page and eventfd (a round trip, the first time); session_submit_need()
 * also opens the submit ring and the fence page where offered and wanted,
 * once a connection. 0, or a negative errno with last_error set. */
int session_map_page(kfdb_session *s, int page_fd, uint32_t page_size);
int session_page_need(kfdb_session *s);
int session_submit_need(kfdb_session *s);

/* The submit ring (client-ring.c). Opens it after Hello when the daemon
 * offers "submit-ring" and the session wants it; 0 also when it does not (the
 * socket path is used), a negative errno only for a lost connection. */
int session_ring_open(kfdb_session *s);
void session_ring_close(kfdb_session *s);
/* The fence page (client-fence.c). Opens it after Hello when the daemon
 * offers "fence-page" and the session wants it; 0 also when it does not
 * (fences are then seen on the session page only), < 0 only for a lost
 * connection. */
int session_fence_page_open(kfdb_session *s);
void session_fence_page_close(kfdb_session *s);
/* Submits the jobs through the ring when it can take them (no dispatch, room
 * in the ring, under the in-flight limit): 1 with the fences assigned, 0 when
 * the caller must use a Submit request, or a negative errno. */
int session_ring_submit(kfdb_session *s, const ClientJob *jobs, size_t n, uint64_t *fences_out);

/* Is k a lost connection (the daemon went away)? */
bool session_connection_lost(int k);
/*
 * The connection is lost (k says how): reconnects when it may — a session made
 * from a path, not ended by the daemon on purpose, reconnecting allowed — and
 * makes every buffer, event and code object again in the new session; jobs
 * that were in flight are failed with ECANCELED. 0 on success; else k or the
 * reason it could not reconnect, with last_error set.
 */
int session_recover(kfdb_session *s, int k);
/* Rewrites the handles in a request built before the last reconnect. */
void session_request_remap(kfdb_session *s, ClientRequest *req);
/* A fence cancelled by a restart: -ECANCELED with last_error set; else 0. */
int session_find_cancelled(kfdb_session *s, uint64_t fence);
void session_object_unlink(ClientObject *o);
