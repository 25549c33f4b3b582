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

#include "client-wire.h"
#include "kfdbroker.h"
#include "macro.h"
#include "session-page.h"

#define CLIENT_ERROR_MAX 512u
/* Replies for requests no one waits for any more are kept up to this many. */
#define CLIENT_STASH_MAX 64u
/* Job failures not yet taken by kfdb_job_failure_next(); older ones are dropped beyond. */
#define CLIENT_FAILURES_MAX 1024u

/* An object owned by a session: linked so kfdb_session_free() can release it. */
typedef struct ClientObject ClientObject;
typedef void (*client_object_release_fn)(ClientObject *o);
struct ClientObject {
        ClientObject *prev, *next;
        client_object_release_fn release; /* local teardown only, no round trip */
};

struct kfdb_session {
        int fd;
        int event_fd;
        const KfdbSessionPage *page;
        size_t page_size;

        uint64_t next_id;
        uint64_t last_fence; /* highest fence a Submit reply handed out */
        uint64_t session_id;
        char *daemon_version;
        char **features;
        size_t n_features;
        kfdb_limits limits;

        ClientReply *stash[CLIENT_STASH_MAX]; /* replies by id, oldest first */
        size_t n_stash;

        kfdb_job_failure *failures; /* ring buffer */
        size_t failures_head, n_failures;

        ClientObject objects; /* list head */

        uint8_t *rbuf; /* CLIENT_MAX_MESSAGE_SIZE receive buffer */
        char last_error[CLIENT_ERROR_MAX];
};

/* Sets last_error from a printf format and returns r (a negative errno). */
int session_error(kfdb_session *s, int r, const char *format, ...) _printf_(3, 4);

/*
 * Sends a request (with fds) and waits for its reply; messages for other ids
 * and notifications that arrive meanwhile are kept. On a daemon error,
 * returns its negated errno with last_error set to the daemon's message; a
 * reply whose body or fd count does not match the request is -EBADMSG.
 * *ret is the reply (its fds still inside) on success.
 */
int session_call(kfdb_session *s, ClientRequest *req, const int *fds, size_t n_fds,
                 ClientReply **ret);

/* Reads and dispatches one message if one arrives within timeout_ms: 1, 0 (none) or negative errno. */
int session_receive(kfdb_session *s, int timeout_ms);

/* Page readers (acquire loads). */
uint64_t session_page_load_u64(const uint64_t *p);
uint32_t session_page_load_u32(const uint32_t *p);
uint64_t session_completed_fence(const kfdb_session *s);

/* Looks for a queued failure of exactly this fence; returns its negative errno or 0. */
int session_find_failure(kfdb_session *s, uint64_t fence);

void session_object_link(kfdb_session *s, ClientObject *o, client_object_release_fn release);
void session_object_unlink(ClientObject *o);
