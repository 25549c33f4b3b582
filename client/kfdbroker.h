/* SPDX-License-Identifier: MIT */
/*
 * libkfdbroker: the client library of kfdbroker.
 *
 * A kfdb_session is one connection to kfdbrokerd over its SOCK_SEQPACKET
 * socket. Through it a process that has no access to /dev/kfd allocates GPU
 * buffers (received as dma-buf fds it can mmap), creates events with KFD
 * semantics, loads GPU code objects and submits batches of jobs (copy, fill,
 * kernel dispatch, signal event, wait event). Completion is visible without
 * a round trip: the session page, a
 * read-only shared mapping the daemon keeps up to date, holds the completed
 * fence and every event's age, and an eventfd is signalled when a job
 * completes or fails or an event changes (not when a job is submitted;
 * with the fence page, also when the engine has written the slot of the
 * session's last copy or fill, perhaps before the session page says so).
 *
 * Conventions:
 *  - Every function that can fail returns an int: 0 (or a count) on success, a
 *    negative errno value on failure. errno is not used as an API.
 *  - When the daemon refuses a request, the function returns the daemon's
 *    errno, negated, and kfdb_session_last_error() returns the daemon's
 *    message naming the bad field. Errors found by the library itself
 *    (bad arguments, a malformed reply) also set that message.
 *  - Objects (buffers, events, batches) belong to the session that made them.
 *    kfdb_session_free() releases every object of the session still alive;
 *    pointers to them must not be used afterwards.
 *  - A session is not thread-safe: use it from one thread at a time.
 *  - The structs filled by value (kfdb_limits, kfdb_device, kfdb_usage,
 *    kfdb_daemon_status, kfdb_job_failure) are fixed for symbol version
 *    KFDBROKER_0.1, kfdb_kernel_arg and kfdb_arg for KFDBROKER_0.2; new
 *    fields come with new functions, never by growing them.
 *  - Calls are synchronous. Replies that arrive for other requests and job
 *    failure notifications that arrive while a call waits are kept and
 *    handed out later, so nothing is lost to ordering.
 *
 * Errno values common to every call that talks to the daemon:
 *  -ECONNRESET  the daemon closed the connection
 *  -EBADMSG     the daemon sent a reply this library cannot decode (truncated,
 *               wrong fds, a body that does not match the request)
 *  -ENOMEM      out of memory
 *  other        any errno the daemon returned for the request (for example
 *               -EINVAL for a bad field, -ENOENT for an unknown handle,
 *               -EDQUOT for a request over the session's limits,
 *               -EOPNOTSUPP for a request the daemon does not implement)
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KFDB_PROTOCOL_VERSION 1u
/* Buffer sizes are rounded up to this by the daemon; copy/fill offsets and sizes are multiples of 4. */
#define KFDB_BUFFER_ALIGNMENT 4096u
#define KFDB_JOB_ALIGNMENT 4u
/* timeout_ms value that waits forever. */
#define KFDB_TIMEOUT_INFINITE (-1)

typedef struct kfdb_session kfdb_session;
typedef struct kfdb_buffer kfdb_buffer;
typedef struct kfdb_event kfdb_event;
typedef struct kfdb_batch kfdb_batch;
typedef struct kfdb_code_object kfdb_code_object;
typedef struct kfdb_kernel kfdb_kernel;

typedef enum kfdb_placement {
        KFDB_PLACEMENT_GTT = 0,  /* system memory */
        KFDB_PLACEMENT_VRAM = 1, /* device memory */
} kfdb_placement;

/* ---- Sessions ---- */

/**
 * kfdb_session_new() - connect to kfdbrokerd and say Hello.
 * @path: socket path; NULL means $KFDBROKER_SOCKET if set, else the
 *        compiled-in default (kfdb_default_socket_path()).
 * @client_name: name shown in the daemon's logs and accounting, at most 64
 *        bytes of printable characters; NULL means the program's name.
 * @ret: the new session.
 *
 * Maps the session page read-only after checking its magic, version and
 * size, and keeps the eventfd that signals its changes — where the daemon
 * offers "lazy-session" (unless KFDBROKER_LAZY_SESSION=0), not at once but
 * when the session first needs them: its first event, its first submit
 * (which also opens the submit ring and the fence page) or
 * kfdb_get_event_fd(), one round trip each, once; an idle session costs the
 * daemon its socket alone.
 *
 * Returns 0, or -EINVAL (bad argument, client name too long or not
 * printable), -ENAMETOOLONG (path longer than a unix socket address),
 * the errno of socket(2)/connect(2) (-ENOENT: no socket at that path,
 * -ECONNREFUSED: nobody listening, -EACCES), -EPROTO (the session page is
 * not one this library understands), -EPROTONOSUPPORT (the daemon speaks
 * another protocol version), the daemon's refusal of the connection
 * (-EUSERS: this user is at its connection cap, connect rate or fd budget;
 * -EMFILE: the daemon is out of file descriptors; -ENODEV: the daemon has no
 * GPU to serve; kfdb_session_last_error(NULL) says why), or the common
 * errors above.
 *
 * A session made here survives a restart of the daemon: when the connection
 * is lost (the daemon stopped, crashed or was restarted), the next call —
 * or kfdb_process(), or a kfdb_fence_wait() in progress — connects to @path
 * again, for up to 30 s (kfdb_session_set_reconnect_timeout(),
 * $KFDBROKER_RECONNECT_TIMEOUT_MS), and carries on in a new session:
 * - buffers keep their memory and contents (the library holds their dma-buf
 *   fds and hands them to the new daemon; mappings stay valid);
 * - events and code objects are made again (events start unsignaled, and
 *   their ages start again: a wait with an age from before returns at once);
 * - batches not yet submitted submit as usual;
 * - fences go on from where they were; jobs that were in flight fail with
 *   -ECANCELED (kfdb_fence_wait(), kfdb_job_failure_next());
 * - the socket and eventfd keep their fd numbers (a poll loop goes on);
 * - handles change (kfdb_buffer_get_handle() etc. give the new ones) and so
 *   may kfdb_session_get_id();
 * - a Submit whose answer was lost to the restart fails with -ECANCELED (the
 *   old daemon may have run some of it); every other call is sent again.
 * A session ended on purpose (TerminateSession over D-Bus) does not come
 * back: its calls fail with -ECONNRESET. If the daemon does not come back in
 * time, calls fail with -ECONNRESET and the reason in
 * kfdb_session_last_error().
 */
int kfdb_session_new(const char *path, const char *client_name, kfdb_session **ret);

/**
 * kfdb_session_new_on_gpu() - kfdb_session_new() on the daemon's GPU @gpu:
 * its index, as `kfdbrokerctl status` and kfdb_gpus_get() list them (0 is
 * the first). A session's buffers and work are on its GPU unless a call
 * names another one: kfdb_buffer_alloc_on_gpu() and kfdb_batch_set_gpu()
 * (KFDBROKER_0.14) use several GPUs from one session; two sessions can also
 * share buffers with kfdb_buffer_export() and kfdb_buffer_import(). kfdb_session_new() puts the
 * session on $KFDBROKER_GPU's GPU when that is set, else on the first GPU it
 * may use. Returns what kfdb_session_new() returns, and -ENODEV when the
 * daemon has no GPU @gpu (kfdb_session_last_error(NULL) says how many it
 * has). A session that reconnects after a restart comes back on its GPU.
 * (KFDBROKER_0.13)
 */
int kfdb_session_new_on_gpu(const char *path, const char *client_name, uint32_t gpu, kfdb_session **ret);

/* The index of the session's GPU. (KFDBROKER_0.13) */
uint32_t kfdb_session_get_gpu(const kfdb_session *s);

/**
 * kfdb_session_new_from_fd() - like kfdb_session_new() on an already
 * connected SOCK_SEQPACKET socket (socket activation, a socketpair, a socket
 * passed in by a sandbox). On success the session owns @fd; on failure the
 * caller still does. Returns what kfdb_session_new() returns, and
 * -EPROTOTYPE if @fd is not a SOCK_SEQPACKET socket (-ENOTSOCK if no socket).
 * Such a session cannot reconnect (it does not know where to): a lost
 * connection is -ECONNRESET.
 */
int kfdb_session_new_from_fd(int fd, const char *client_name, kfdb_session **ret);

/**
 * kfdb_session_free() - close the session: unmaps and closes every buffer
 * and event still alive (the daemon frees its side when the connection
 * closes), frees every batch, closes the socket. NULL-safe. Returns NULL.
 */
kfdb_session *kfdb_session_free(kfdb_session *s);

/* Socket path used when NULL is given and $KFDBROKER_SOCKET is unset. */
const char *kfdb_default_socket_path(void);

/**
 * kfdb_session_last_error() - the message of the last failed call on @s: the
 * daemon's error_message if the daemon refused it, else the library's own
 * description. Empty string if no call failed yet. Valid until the next call.
 * With @s NULL: why the calling thread's last kfdb_session_new() or
 * kfdb_session_new_from_fd() failed once connected (the daemon's reason when
 * it refused the connection, e.g. "kfdbrokerd refused the connection: no AMD
 * GPU: ..."), else an empty string; valid until the thread's next one.
 */
const char *kfdb_session_last_error(const kfdb_session *s);

/* One limit of a session as a policy file writes it ("BufferMemory", "1G"),
 * and its number: bytes, a count, microseconds for a time span
 * (UINT64_MAX: infinity), 0 for the keys that are words. (KFDBROKER_0.12) */
typedef struct kfdb_policy_limit {
        char key[32];
        char value[64];
        uint64_t number;
} kfdb_policy_limit;

#define KFDB_POLICY_LIMITS_MAX 32

/* A session as kfdb_sessions_list() tells it; strings are empty where the
 * daemon does not know them, and cut to 255 bytes. (KFDBROKER_0.12) */
typedef struct kfdb_session_info {
        uint64_t id;
        uint32_t uid, gid, pid; /* gid 4294967295: not told by the connection */
        char client_name[256], unit[256], user_unit[256], app_id[256];
        char container[256];    /* name, or a container's 12-hex short id */
        char container_id[80];  /* docker, podman, CRI: the full 64-hex id */
        char pod_uid[48];       /* a Kubernetes pod's UID */
        char policy_rules[256]; /* FILE:LINE of the policy rules that matched */
        uint64_t opened_ns;     /* CLOCK_MONOTONIC when it connected */
        uint32_t buffers, events, jobs_in_flight;
        uint64_t buffer_bytes, jobs_submitted, jobs_completed, jobs_failed, bytes_copied, bytes_filled;
        uint64_t busy_ns_sdma, busy_ns_compute; /* GPU time of its jobs on each engine */
        uint64_t context_bytes; /* the own memory of its GPU context, part of buffer_bytes */
        bool limits_overridden; /* set with SetLimits over D-Bus */
        size_t n_limits;
        kfdb_policy_limit limits[KFDB_POLICY_LIMITS_MAX]; /* every policy key */
} kfdb_session_info;

/**
 * kfdb_sessions_list() - the sessions of this user (root: every session),
 * with their identity, use and limits, by increasing id: as
 * `kfdbrokerctl --socket=PATH sessions` lists them without D-Bus.
 * @s: the caller's session (itself among them)
 * @after_id: list only sessions with a larger id (0: from the first)
 * @ret: filled with up to @n sessions
 * @ret_n: how many were filled
 * @ret_more: (may be NULL) true if sessions after the last filled remain: call
 *            again with its id as @after_id
 *
 * The daemon answers at most 12 a call. Returns 0, -EINVAL, -EOPNOTSUPP
 * (a daemon before 0.12), -EBADMSG (a malformed reply), or a connection
 * error. (KFDBROKER_0.12)
 */
int kfdb_sessions_list(kfdb_session *s, uint64_t after_id, kfdb_session_info *ret, size_t n, size_t *ret_n,
                       bool *ret_more);

/**
 * kfdb_session_terminate() - end another session of this user (root: of any
 * user), as `kfdbrokerctl terminate` does, without D-Bus.
 * @s: the caller's session
 * @id: the session to end (kfdb_session_get_id() of its client; `kfdbrokerctl sessions`)
 * @reason: told to the ended client and logged with the caller's uid, unit
 *          and pid; NULL or "" for none; at most 255 bytes
 *
 * The ended session's client sees -ECONNRESET with "kfdbrokerd ended the
 * session: terminated by uid U (unit X, pid P): REASON" as its last error,
 * and does not reconnect. Returns 0, -ENOENT (no such session), -EPERM
 * (another user's session and the caller is not root), -EINVAL (@id is @s
 * itself, or the reason is too long), or a connection error. (KFDBROKER_0.12)
 */
int kfdb_session_terminate(kfdb_session *s, uint64_t id, const char *reason);

/**
 * kfdb_strerror() - what a negative errno from this library means here.
 * @error: a negative errno value returned by a kfdb_ function
 *
 * strerror()'s text, except where kfdbroker gives an errno its own meaning
 * (docs/protocol.md "Errors"): -EDQUOT is a limit of the daemon or its policy
 * ("a kfdbroker limit was reached", not a disk quota), -EUSERS the per-user
 * connection or file descriptor budget. Prefer kfdb_session_last_error(),
 * which names the limit and its policy key; this is for where there is no
 * session to ask. Never NULL; the string is static.
 */
const char *kfdb_strerror(int error);

/* The socket (readable when the daemon sent something) and the eventfd
 * (readable when a job completed or failed or an event changed on the session
 * page; a submission alone does not signal it), for a client's poll loop. After
 * either is readable call kfdb_process(). Owned by the session.
 * kfdb_get_event_fd() asks the daemon for the page and eventfd of a lazy
 * session that has none yet (kfdb_session_new()); it returns a negative errno
 * if that fails (the common errors). */
int kfdb_get_fd(const kfdb_session *s);
int kfdb_get_event_fd(const kfdb_session *s);

/**
 * kfdb_process() - without blocking: clear the eventfd and read every message
 * waiting on the socket (job failure notifications are queued for
 * kfdb_job_failure_next()). Returns the number of messages read, or
 * -ECONNRESET / -EBADMSG. If the daemon went away, this is where the session
 * reconnects (see kfdb_session_new()), which blocks until the daemon is back
 * or the reconnect timeout ends.
 */
int kfdb_process(kfdb_session *s);

/* How many times the session reconnected after the daemon restarted. */
uint64_t kfdb_session_get_reconnects(const kfdb_session *s);
/* How many batches kfdb_batch_submit() sent through the submit ring (0 when
 * the session has none: see kfdb_batch_submit()). (KFDBROKER_0.8) */
uint64_t kfdb_session_get_ring_submits(const kfdb_session *s);
/* How many kfdb_fence_wait() calls the fence page ended: the SDMA engine had
 * written the copy's or fill's fence there before the daemon's session page
 * said the job was done (0 when the session has no fence page: the daemon
 * does not offer "fence-page", or KFDBROKER_FENCE_PAGE=0). (KFDBROKER_0.10) */
uint64_t kfdb_session_get_fence_page_waits(const kfdb_session *s);
/* How long a lost connection is retried (ms; 0: never reconnect). Returns 0 or -EINVAL. */
int kfdb_session_set_reconnect_timeout(kfdb_session *s, int timeout_ms);

uint64_t kfdb_session_get_id(const kfdb_session *s);
const char *kfdb_session_get_daemon_version(const kfdb_session *s);
/* True if the daemon announced @feature at Hello ("sdma-copy", "events", …). */
bool kfdb_session_has_feature(const kfdb_session *s, const char *feature);
/* Number of times this session's GPU context was lost to a GPU fault (session
 * page): its jobs on the GPU failed (-EFAULT, -ECANCELED) and the next
 * dispatch runs in a new context. Buffers and handles are not affected. */
uint64_t kfdb_session_get_context_lost(const kfdb_session *s);

typedef struct kfdb_limits {
        uint64_t max_buffer_size;
        uint64_t max_buffer_bytes; /* total per session */
        uint32_t max_buffers;
        uint32_t max_events;
        uint32_t max_jobs_in_flight;
        uint32_t max_jobs_per_submit;
        uint32_t max_message_size;
        uint32_t max_wait_events;
} kfdb_limits;

/* The limits the daemon announced at Hello. */
void kfdb_session_get_limits(const kfdb_session *s, kfdb_limits *ret);

typedef struct kfdb_device {
        char backend[16]; /* "kfd" or "sim" */
        char gfx_name[32]; /* "gfx1030" */
        char name[128];
        uint32_t gpu_id;
        uint32_t vendor_id;
        uint32_t device_id;
        uint32_t cu_count;
        uint64_t vram_size;
        uint32_t kfd_major;
        uint32_t kfd_minor;
        uint32_t sdma_queues;
} kfdb_device;

/* kfdb_device_info() - the daemon's GPU. Returns 0 or the common errors. */
int kfdb_device_info(kfdb_session *s, kfdb_device *ret);

/**
 * kfdb_device_compute_queues() - the number of compute (PM4) queues the
 * daemon runs dispatches on; 0 if the device runs none (then Hello does not
 * announce the "compute" feature and dispatches are refused with
 * -EOPNOTSUPP). Returns 0 or the common errors. (KFDBROKER_0.2)
 */
int kfdb_device_compute_queues(kfdb_session *s, uint32_t *ret);

/**
 * kfdb_device_node() - which GPU of the machine's KFD topology the daemon
 * drives, and why (kfdbrokerd --gpu=; a discrete GPU before an integrated
 * one by default): node gets e.g. "node 2 (gfx1030, 0000:03:00.0, renderD129,
 * discrete, 16 GiB local memory)", reason e.g. "a discrete GPU is preferred
 * to an integrated one (1 of 2 GPU nodes look integrated)" or "chosen by
 * --gpu=2"; each NUL-terminated and truncated to its size ("" from a daemon
 * too old to say). Either buffer may be NULL with size 0. Returns 0, -EINVAL
 * or the common errors. (KFDBROKER_0.5)
 */
int kfdb_device_node(kfdb_session *s, char *node, size_t node_size, char *reason, size_t reason_size);

typedef struct kfdb_usage {
        uint32_t buffers;
        uint64_t buffer_bytes;
        uint32_t events;
        uint64_t jobs_submitted;
        uint64_t jobs_completed;
        uint64_t jobs_failed;
        uint32_t jobs_in_flight;
        uint64_t bytes_copied;
        uint64_t bytes_filled;
        kfdb_limits limits;
} kfdb_usage;

/* kfdb_query() - this session's usage and limits. Returns 0 or the common errors. */
int kfdb_query(kfdb_session *s, kfdb_usage *ret);

/* ---- Quotas shared by sessions (KFDBROKER_0.6) ---- */

/* What is charged to this session beyond its live buffers, and to all
 * sessions of its user and of its unit, with the caps the policy sets there
 * (docs/policy.md). UINT64_MAX for a cap means none. */
typedef struct kfdb_quota {
        /* Of kfdb_usage.buffer_bytes: buffers freed while their dma-buf may
         * still be held (by this client or anyone it gave it to), charged
         * until no copy is left (if the session ends first, its user's
         * user_buffer_bytes stays charged: docs/policy.md). */
        uint64_t released_buffer_bytes;
        uint64_t user_buffer_bytes;     /* charged to all sessions of this uid, and what ended ones left */
        uint64_t user_buffers;          /* buffers and code objects of all sessions of this uid */
        uint64_t unit_buffer_bytes;     /* charged to all sessions of this session's unit, 0 outside one */
        uint64_t max_user_buffer_bytes; /* UserBufferMemory= */
        uint64_t max_user_buffers;      /* UserBuffers= */
        uint64_t max_unit_buffer_bytes; /* UnitBufferMemory= */
} kfdb_quota;

/* kfdb_query_quota() - a Query, for what kfdb_quota holds. Returns 0 or the common errors. */
int kfdb_query_quota(kfdb_session *s, kfdb_quota *ret);

/* ---- Pooled buffers and file descriptor budgets (KFDBROKER_0.9) ---- */

typedef struct kfdb_fd_budget {
        /* Of kfdb_usage.buffer_bytes: freed small buffers the daemon keeps,
         * still charged, for this session's next kfdb_buffer_alloc() of the
         * same size and placement (zeroed then). */
        uint64_t pooled_buffer_bytes;
        uint64_t user_fds;     /* file descriptors the daemon holds for all sessions of this uid */
        uint64_t max_user_fds; /* kfdbrokerd --max-fds-per-user (UINT64_MAX: none; 0: a daemon without budgets) */
        uint64_t session_fds;     /* file descriptors the daemon holds for this session */
        uint64_t max_session_fds; /* kfdbrokerd --max-fds-per-session (UINT64_MAX: none; 0: a daemon without) */
} kfdb_fd_budget;

/* kfdb_query_fd_budget() - a Query, for what kfdb_fd_budget holds. Returns 0 or the common errors. */
int kfdb_query_fd_budget(kfdb_session *s, kfdb_fd_budget *ret);

/* ---- GPU context memory (KFDBROKER_0.11) ---- */

/*
 * kfdb_query_context_bytes() - a Query, for the GPU memory of the GPU context
 * this session pays for: the one its first dispatch brought up (its queue
 * rings, EOP and CWSR areas, kernel-argument slots, scratch), part of
 * kfdb_usage.buffer_bytes and charged under the same limits as buffers
 * (docs/policy.md "GPU context memory"); 0 when it pays for none (no
 * dispatch yet, the context was reclaimed while idle, or another session
 * sharing it pays). A dispatch that would grow it past a limit fails with
 * -EDQUOT naming the limit. Returns 0 or the common errors; a daemon older
 * than this field says 0.
 */
int kfdb_query_context_bytes(kfdb_session *s, uint64_t *ret);

/* ---- The KFD relay (KFDBROKER_0.12) ---- */

/*
 * kfdb_session_open_kfd() - a KFD process of this session's own, for
 * libkfdbroker-kfd.so, which gives unmodified ROCm programs a /dev/kfd made
 * of the broker (docs/rocm.md). Writes the KFD topology the session may see
 * into the directory @topology_dir_fd (the tree that stands for
 * /sys/devices/virtual/kfd/kfd; the directory should be empty), and returns
 * in @ret_fd a SOCK_SEQPACKET socket (O_CLOEXEC) to the daemon's relay of
 * that KFD process, and in @ret_render_minor (may be NULL) the render node
 * minor the topology names. The KFD process lives until the session ends.
 * Returns 0, -EACCES where the daemon gives clients no GPU context of their
 * own (--contexts=shared), -EBUSY when kfdbrokerd --max-contexts contexts are
 * up, -EEXIST for a second call, -EBADMSG for a reply
 * whose topology names a path outside the directory; the message is in
 * kfdb_session_last_error().
 */
int kfdb_session_open_kfd(kfdb_session *s, int topology_dir_fd, int *ret_fd, uint32_t *ret_render_minor);

typedef struct kfdb_daemon_status {
        char daemon_version[32];
        char backend[16];
        char gfx_name[32];
        uint32_t sessions;
        uint64_t jobs_completed; /* all sessions since the daemon started */
        uint64_t jobs_failed;
        uint64_t uptime_ns;
        uint64_t buffer_bytes; /* all sessions, now */
        uint32_t gpu_buffers;    /* GPU buffer objects held for clients (buffers and code objects, all
                                  * sessions, also freed ones a job in flight still uses); the
                                  * daemon's own rings and fences are not counted */
        uint32_t jobs_in_flight; /* jobs on the GPU now, all sessions */
        uint32_t events;         /* client events alive, all sessions */
} kfdb_daemon_status;

/* kfdb_status() - the daemon's overall state. Returns 0 or the common errors. */
int kfdb_status(kfdb_session *s, kfdb_daemon_status *ret);

/* ---- GPU contexts (KFDBROKER_0.3) ---- */

/* One GPU context: its own GPU address space, queues and fault domain. */
typedef struct kfdb_gpu_context {
        uint64_t id;
        char kind[16];          /* "device" (the daemon's own: copies, fills, shared-mode kernels),
                                 * "session", "identity" or "shared" */
        bool live;              /* up now (else made again by the next dispatch that needs it) */
        uint32_t users;         /* sessions using it */
        uint32_t jobs_in_flight;
        uint32_t losses;        /* times it was lost to a GPU fault */
        uint64_t memory_bytes;  /* what it holds for itself: rings, CWSR areas, scratch, ... */
        uint64_t mapped_bytes;  /* clients' buffers mapped into it (counted where allocated) */
        uint32_t pid;           /* its worker process (mechanism "process"), else 0 */
} kfdb_gpu_context;

typedef struct kfdb_gpu_contexts {
        char mechanism[16];     /* "kernel": a GPU context per client (secondary KFD contexts);
                                 * "process": the same, a worker process each; "none": shared mode */
        char reason[320];       /* one line: what isolation clients get on this machine, and why */
        uint32_t max;           /* client contexts alive at once, at most */
        size_t n;               /* contexts the daemon listed (the device context first) */
} kfdb_gpu_contexts;

/**
 * kfdb_gpu_contexts_get() - how this daemon keeps clients' kernels apart, and
 * its GPU contexts: fills @ret and the first @max_list entries of @list
 * (@list may be NULL when @max_list is 0); @ret->n tells how many there are.
 * Returns 0, -EINVAL, or the common errors.
 */
int kfdb_gpu_contexts_get(kfdb_session *s, kfdb_gpu_contexts *ret, kfdb_gpu_context *list, size_t max_list);

/* ---- GPUs (KFDBROKER_0.13) ---- */

/* One GPU the daemon serves. */
typedef struct kfdb_gpu {
        uint32_t index;          /* what kfdb_session_new_on_gpu() and $KFDBROKER_GPU take */
        char gfx_name[32];       /* "gfx1030" */
        char name[128];
        uint32_t gpu_id;         /* KFD's */
        char node[160];          /* which KFD topology node: "node 2 (gfx1030, 0000:03:00.0, ...)" */
        char node_reason[256];   /* why the daemon serves it (kfdbrokerd --gpu=) */
        uint64_t vram_size;
        uint32_t cu_count;
        uint32_t sessions;       /* sessions on it now: its own, and those with buffers or jobs on it */
        uint64_t jobs_completed, jobs_failed;
        uint32_t jobs_in_flight;
        uint32_t gpu_buffers;    /* buffer objects the daemon holds for clients on it */
} kfdb_gpu;

/**
 * kfdb_gpus_get() - the GPUs the daemon serves, in index order: fills the
 * first @max_list entries of @list (NULL when @max_list is 0) and says how
 * many there are in *@ret_n. Returns 0, -EINVAL, or the common errors.
 */
int kfdb_gpus_get(kfdb_session *s, kfdb_gpu *list, size_t max_list, size_t *ret_n);

/* ---- Buffers ---- */

/**
 * kfdb_buffer_alloc() - allocate a GPU buffer of at least @size bytes
 * (rounded up to 4 KiB by the daemon) and receive it as a dma-buf fd.
 * Returns 0, -EINVAL (size 0, unknown placement), -EDQUOT (over the
 * session's memory or buffer-count limit), -ENOMEM, or the common errors.
 */
int kfdb_buffer_alloc(kfdb_session *s, uint64_t size, kfdb_placement placement, kfdb_buffer **ret);

/* Not a GPU index: "the session's GPU" where a call takes a GPU (KFDBROKER_0.14). */
#define KFDB_GPU_SESSION UINT32_MAX

/**
 * kfdb_buffer_alloc_on_gpu() - kfdb_buffer_alloc() on the daemon's GPU @gpu
 * (its index, as kfdb_gpus_get() lists them) instead of the session's:
 * its memory is that GPU's. Fills and dispatches on it run on that GPU
 * (kfdb_batch_set_gpu()); a copy may take it on any GPU (the daemon imports
 * it into the copying GPU as a dma-buf, which kernels before KFD 1.15,
 * Linux 6.8, cannot: the copy is refused with -EINVAL naming both GPUs).
 * BufferMemory= holds on each GPU; UserBufferMemory= and UnitBufferMemory=
 * count every GPU together. Returns what kfdb_buffer_alloc() returns, and
 * -ENODEV (the daemon has no GPU @gpu; the message says how many it has),
 * -EACCES (the policy's Devices=, or the GPU socket the session came
 * through, keeps it off that GPU; the message names which), -EINVAL (@gpu is
 * KFDB_GPU_SESSION), -EOPNOTSUPP (another GPU than the session's, and a
 * daemon without the feature "gpu-per-job"). (KFDBROKER_0.14)
 */
int kfdb_buffer_alloc_on_gpu(kfdb_session *s, uint64_t size, kfdb_placement placement, uint32_t gpu,
                             kfdb_buffer **ret);

/* The index of the GPU the buffer is on: the session's, unless it was
 * allocated on another. A buffer re-imported after a daemon restart is on
 * the session's GPU. (KFDBROKER_0.14) */
uint32_t kfdb_buffer_get_gpu(const kfdb_buffer *b);

/**
 * kfdb_buffer_import() - make a dma-buf fd (exported by another client with
 * kfdb_buffer_export()) usable in this session's jobs. @fd is not taken: the
 * library keeps its own duplicate. Returns 0, -EBADF (bad @fd), -EINVAL (the
 * daemon does not know that buffer), -EDQUOT, or the common errors.
 */
int kfdb_buffer_import(kfdb_session *s, int fd, kfdb_buffer **ret);

/**
 * kfdb_buffer_export() - a new dma-buf fd for @b to hand to another process
 * (which imports it). The caller owns *ret_fd. Returns 0 or the common errors.
 */
int kfdb_buffer_export(kfdb_buffer *b, int *ret_fd);

/* The buffer's dma-buf fd, owned by the buffer (dup it to keep it longer). */
int kfdb_buffer_get_fd(const kfdb_buffer *b);
/* The size the daemon gave the buffer (rounded up). */
uint64_t kfdb_buffer_get_size(const kfdb_buffer *b);
/* The buffer's handle in this session (for logs; the API takes kfdb_buffer pointers). */
uint64_t kfdb_buffer_get_handle(const kfdb_buffer *b);

/**
 * kfdb_buffer_map() - map the whole buffer read-write into this process
 * (mmap of its dma-buf fd, MAP_SHARED). The mapping is made once and cached;
 * it lasts until kfdb_buffer_free(). Returns 0 or the errno of mmap(2).
 */
int kfdb_buffer_map(kfdb_buffer *b, void **ret);

/**
 * kfdb_buffer_free() - unmap and close the buffer here and tell the daemon to
 * free it. Jobs in flight that use it keep it alive until they finish. A
 * daemon with the feature "free-no-reply" is not waited for: the call
 * returns once the request is sent, and an error the daemon finds later
 * comes as a kfdb_job_failure with fence 0 (kfdb_job_failure_next()). If
 * its fd was never handed out (kfdb_buffer_get_fd()) and the buffer was not
 * imported, the daemon is told that no copy is kept, and may give its
 * memory, zeroed, to one of this session's next buffers (docs/protocol.md,
 * "Buffers"); such a buffer of at most 256 KiB is freed with the session's
 * next request where the daemon announces "alloc-free-first" (inside it when
 * that is a kfdb_buffer_alloc(): one datagram each way per alloc and free
 * pair). The local side is released even if the daemon refused (the return
 * value then says why). NULL-safe (returns 0). Returns 0 or the common
 * errors. Each kfdb_buffer_alloc() is one round trip and one daemon buffer:
 * for many small buffers, the sub-allocator below.
 */
int kfdb_buffer_free(kfdb_buffer *b);

/* ---- Many small buffers in one: the sub-allocator (KFDBROKER_0.7) ---- */

/*
 * A kfdb_suballocator hands out slices of a few large daemon buffers
 * ("blocks"), with no round trip to the daemon once a block is there: for
 * programs that need many small buffers, where one AllocBuffer each would
 * cost a round trip, a daemon file descriptor and a GPU mapping. The daemon
 * sees only the blocks: they are what is charged against the session's
 * limits, what jobs name (a slice is its block + an offset), what is mapped
 * and what kfdb_buffer_export() hands on. So slices of one block are not
 * isolated from each other: a job or a mapping of the block reaches all of
 * it. Use separate allocators (or kfdb_buffer_alloc()) for memory that must
 * be kept apart.
 *
 * A slice is a power-of-two number of 256-byte granules, aligned to its own
 * size inside its block (a buddy allocator; its bookkeeping is in this
 * process's heap, not in the block). A request larger than the block size
 * gets a block of its own. Each block is mapped read-write into this process
 * when it is made. A block whose slices are all freed is given back to the
 * daemon, but for one kept for the next allocation.
 *
 * Like every object of a session, an allocator belongs to its session:
 * kfdb_session_free() releases it and its blocks, and they live through a
 * daemon restart as the session's buffers do. Not thread-safe.
 */
typedef struct kfdb_suballocator kfdb_suballocator;

typedef struct kfdb_slice {
        kfdb_buffer *buffer; /* the block: name it in jobs, with offset */
        uint64_t offset;     /* of the slice in the block */
        uint64_t size;       /* bytes reserved: the size asked for, rounded up */
        void *ptr;           /* the slice in this process: the block's mapping + offset */
} kfdb_slice;

typedef struct kfdb_suballocator_stats {
        uint32_t blocks;        /* daemon buffers held, dedicated ones included */
        uint64_t block_bytes;   /* their bytes: what the daemon charges */
        uint32_t slices;        /* live slices, pending frees included */
        uint64_t slice_bytes;   /* bytes they reserve */
        uint32_t pending_frees; /* slices freed after a fence not yet done */
} kfdb_suballocator_stats;

/**
 * kfdb_suballocator_new() - an allocator whose blocks are @block_size bytes
 * of @placement memory (0: 4 MiB; else a power of two from 64 KiB to
 * 256 MiB). No block is allocated until the first slice. Returns 0, -EINVAL
 * (the message says which argument), or -ENOMEM.
 */
int kfdb_suballocator_new(kfdb_session *s, kfdb_placement placement, uint64_t block_size,
                          kfdb_suballocator **ret);

/**
 * kfdb_suballocator_free() - free every block (live slices with them: jobs
 * in flight keep their blocks alive in the daemon until they finish) and the
 * allocator. NULL-safe; returns NULL.
 */
kfdb_suballocator *kfdb_suballocator_free(kfdb_suballocator *a);

/**
 * kfdb_slice_alloc() - a slice of at least @size bytes, aligned to
 * @alignment (0: 256; a power of two, at most the block size) in its block.
 * Reuses a free range when there is one (no system call), else allocates a
 * block (kfdb_buffer_alloc(), one round trip) and maps it. The memory of a
 * reused range holds what was last written to it (this process's own data;
 * a new block is zeroed by the daemon). Returns 0, -EINVAL (@size 0 or
 * @alignment not a power of two or larger than the block; the message
 * says which), or the errors of kfdb_buffer_alloc() and kfdb_buffer_map()
 * (-EDQUOT when a new block would go over the session's limits).
 */
int kfdb_slice_alloc(kfdb_suballocator *a, uint64_t size, uint64_t alignment, kfdb_slice *ret);

/**
 * kfdb_slice_free() - give @slice back. With @after_fence 0 its range is free
 * at once; else only once that job has finished (succeeded or failed; see
 * kfdb_fence_is_done()), so a job still reading or writing the slice is not
 * raced by a new owner of the range. Pending frees are completed by later
 * calls of this allocator. Returns 0, or -EINVAL (a slice this allocator
 * does not hold: another allocator's, freed already, or altered; a fence never
 * handed out), with the message saying which.
 */
int kfdb_slice_free(kfdb_suballocator *a, const kfdb_slice *slice, uint64_t after_fence);

/* kfdb_suballocator_get_stats() - what @a holds now (completes pending frees first). */
int kfdb_suballocator_get_stats(kfdb_suballocator *a, kfdb_suballocator_stats *ret);

/* ---- Events (KFD semantics) ---- */

/**
 * kfdb_event_create() - a new event, unsignaled, age 1. An auto-reset event
 * is reset when a wait on it completes. Returns 0, -EDQUOT (too many events),
 * or the common errors.
 */
int kfdb_event_create(kfdb_session *s, bool auto_reset, kfdb_event **ret);

/* kfdb_event_destroy() - destroy on both sides; NULL-safe. Returns 0 or the common errors. */
int kfdb_event_destroy(kfdb_event *e);
/* Signal / reset from the CPU. Return 0 or the common errors. */
int kfdb_event_set(kfdb_event *e);
int kfdb_event_reset(kfdb_event *e);

/* The event's age in the session page (1 at creation, grows by each signal); 0 if the page no
 * longer lists the event. No round trip. */
uint64_t kfdb_event_get_age(const kfdb_event *e);
/* True while the event is signaled (session page, no round trip). */
bool kfdb_event_is_signaled(const kfdb_event *e);
uint64_t kfdb_event_get_handle(const kfdb_event *e);

typedef enum kfdb_wait_result {
        KFDB_WAIT_COMPLETE = 0,
        KFDB_WAIT_TIMEOUT = 1,
        KFDB_WAIT_FAIL = 2, /* an event was destroyed before the wait completed */
} kfdb_wait_result;

typedef struct kfdb_wait_entry {
        kfdb_event *event;
        /* In: 0 waits for a new signal; otherwise the age last seen (returns at once if the
         * event's age differs). Out: the event's current age. */
        uint64_t last_event_age;
} kfdb_wait_entry;

/**
 * kfdb_wait_events() - wait in the daemon (KFD WAIT_EVENTS semantics) until
 * any (or, with @wait_all, every) event of @entries is signaled, or
 * @timeout_ms passes (0 polls, KFDB_TIMEOUT_INFINITE waits forever). Each
 * entry's last_event_age is updated to the event's current age.
 * Returns 0 with *ret_result set, -EINVAL (n is 0 or over the daemon's
 * max_wait_events, an event of another session), or the common errors.
 */
int kfdb_wait_events(kfdb_session *s, kfdb_wait_entry *entries, size_t n, bool wait_all,
                     int timeout_ms, kfdb_wait_result *ret_result);

/* ---- Jobs ---- */

/* kfdb_batch_new() - an empty batch of jobs for @s. Returns 0 or -ENOMEM. */
int kfdb_batch_new(kfdb_session *s, kfdb_batch **ret);
/* NULL-safe; returns NULL. */
kfdb_batch *kfdb_batch_free(kfdb_batch *b);
/* Drop every job added so far (the GPU of kfdb_batch_set_gpu() stays). */
void kfdb_batch_reset(kfdb_batch *b);

/**
 * kfdb_batch_set_gpu() - the jobs added to @b from now on run on the
 * daemon's GPU @gpu (its scheduler and engines, where the session's weight
 * and priority class hold too), or, with KFDB_GPU_SESSION (the default), on
 * the session's GPU. A fill's or a dispatch's buffers must be on the job's
 * GPU (-EINVAL from kfdb_batch_fill(), or from the daemon at submit time,
 * naming both GPUs); a copy may take buffers of any GPU. Fences keep their
 * meaning across GPUs: a session's fences are one sequence, and
 * kfdb_fence_is_done() says a job is done once it and every earlier one
 * are. A batch with jobs on a GPU named here goes as a Submit, never
 * through the submit ring, and jobs on two GPUs are ordered only by their
 * fences or by events (a signal-event job on KFDB_ENGINE_AUTO follows the
 * job before it). A @gpu the daemon lacks or the session may not use fails
 * the submit (-ENODEV, -EACCES), and so does any GPU but the session's
 * with a daemon without the feature "gpu-per-job" (-EOPNOTSUPP, before
 * anything is sent). Returns 0 or -EINVAL (no batch).
 * kfdb_batch_get_gpu() returns what was set. (KFDBROKER_0.14)
 */
int kfdb_batch_set_gpu(kfdb_batch *b, uint32_t gpu);
uint32_t kfdb_batch_get_gpu(const kfdb_batch *b);
size_t kfdb_batch_get_n_jobs(const kfdb_batch *b);

/**
 * kfdb_batch_copy() - add a copy of @size bytes from @src at @src_off to
 * @dst at @dst_off, done by the GPU's DMA engine. kfdb_batch_fill() - add a
 * fill of @size bytes at @off with the 32-bit @pattern repeated.
 * Offsets and sizes must be multiples of 4 and inside the buffers.
 * Return 0, -EINVAL (misaligned, zero size, out of the buffer's bounds, a
 * buffer of another session; the message names which), -E2BIG (the batch
 * already holds the daemon's max_jobs_per_submit jobs), or -ENOMEM.
 */
int kfdb_batch_copy(kfdb_batch *b, kfdb_buffer *dst, uint64_t dst_off, kfdb_buffer *src,
                    uint64_t src_off, uint64_t size);
int kfdb_batch_fill(kfdb_batch *b, kfdb_buffer *dst, uint64_t off, uint64_t size, uint32_t pattern);
/* A job that signals @e when the jobs before it have completed. */
int kfdb_batch_signal_event(kfdb_batch *b, kfdb_event *e);
/* A job that holds the following jobs until @e is signaled (resolved on the GPU). */
int kfdb_batch_wait_event(kfdb_batch *b, kfdb_event *e);

/*
 * Engines. Jobs of one session on one engine run in order; across engines
 * (copies and fills run on SDMA, dispatches on compute) order is expressed
 * with events: a signal-event job on one engine and a wait-event job on the
 * other. The daemon turns such a wait into a wait on the GPU where it can (the
 * engine polls the other queue's fence memory), so a copy -> dispatch chain
 * submitted at once runs without a round trip through the CPU; a copy that
 * waits for a dispatch in the session's own GPU context is released by the
 * daemon when it sees the dispatch finish (the daemon's copy queues never
 * poll memory a client's kernel can write).
 */
typedef enum kfdb_engine {
        /* A signal goes on the engine of the job before it in the batch, a wait
         * on the engine of the job after it; SDMA when there is none. */
        KFDB_ENGINE_AUTO = 0,
        KFDB_ENGINE_SDMA = 1,
        KFDB_ENGINE_COMPUTE = 2,
} kfdb_engine;

/*
 * kfdb_batch_signal_event_on(), kfdb_batch_wait_event_on() - event jobs on
 * a chosen engine (kfdb_batch_signal_event() and kfdb_batch_wait_event() use
 * KFDB_ENGINE_AUTO). Return 0, -EINVAL (an event of another session, an
 * unknown engine), -E2BIG, -ENOMEM. (KFDBROKER_0.2)
 */
int kfdb_batch_signal_event_on(kfdb_batch *b, kfdb_event *e, kfdb_engine engine);
int kfdb_batch_wait_event_on(kfdb_batch *b, kfdb_event *e, kfdb_engine engine);

/**
 * kfdb_batch_submit() - send the batch. Each job gets one fence value,
 * increasing; a job is done when kfdb_fence_is_done() says so.
 * @fences_out: NULL, or room for kfdb_batch_get_n_jobs() values.
 * @ret_last_fence: NULL, or receives the last job's fence.
 * On success the batch is emptied and can be reused.
 * Returns 0, -ENODATA (empty batch), -EDQUOT (too many jobs in flight),
 * -EINVAL/-ENOENT (a job names a bad range or a freed object), or the common
 * errors.
 *
 * Where the daemon offers the feature "submit-ring", a batch of copies, fills
 * and event jobs goes through the session's submit ring (shared memory, no
 * round trip; docs/protocol.md) and the library assigns its fences itself
 * (they are sequential per session); a batch with a dispatch, or one the
 * ring has no room for, goes as a Submit request. A job the daemon refuses
 * from the ring (a handle freed meanwhile, say) is not an error of this call:
 * it fails with its reason, as kfdb_fence_wait() and kfdb_job_failure_next()
 * report. KFDBROKER_SUBMIT_RING=0 in the environment (read when the session
 * is made) keeps every batch on the socket.
 */
int kfdb_batch_submit(kfdb_batch *b, uint64_t *fences_out, uint64_t *ret_last_fence);

/**
 * kfdb_fence_is_done() - 1 if the job with @fence has finished (successfully
 * or not), 0 if not yet. Reads the session page and, for a copy or fill,
 * the fence page (docs/protocol.md): no system call.
 */
int kfdb_fence_is_done(const kfdb_session *s, uint64_t fence);

/**
 * kfdb_fence_wait() - wait until the job with @fence has finished: looks at
 * the session page and the fence page for a short while (an adaptive spin
 * of at most 200 us, $KFDBROKER_SPIN_US, none once looks at the machine
 * keep finding no CPU to spare; see libkfdbroker(3)), then sleeps in poll(2) on the eventfd and
 * the socket (messages arriving meanwhile are read and queued).
 * @timeout_ms: 0 checks once, KFDB_TIMEOUT_INFINITE waits forever.
 * Returns 0 when it finished successfully, -ETIMEDOUT on timeout, the job's
 * failure (negated errno from the daemon, e.g. -EFAULT for a GPU memory
 * fault, -ETIME for a job timeout; the message is in
 * kfdb_session_last_error()), -EINVAL (@fence was never handed out), or
 * -ECONNRESET / -EBADMSG.
 */
int kfdb_fence_wait(kfdb_session *s, uint64_t fence, int timeout_ms);

/* ---- Compute: code objects and dispatch (KFDBROKER_0.2) ---- */

/*
 * A code object is an AMDHSA ELF built for the daemon's GPU (kfdb_device's
 * gfx_name), for example with
 *   clang -x cl -target amdgcn-amd-amdhsa -mcpu=gfx1030 -O2 kernel.cl -o kernel.hsaco
 * The daemon checks it, copies its code into GPU memory and lists its
 * kernels. A loaded code object counts as one buffer against the session's
 * max_buffers limit and its size counts in max_buffer_bytes.
 *
 * Security: a session's kernels run in a GPU context of its own (its own
 * address space and fault domain), which holds only the buffers its
 * dispatches name and its own code; the policy decides (ComputeDispatch=,
 * Isolation=). Where the kernel cannot make one (Linux < 7.0), kernels would
 * share the daemon's address space with every client's buffers, and only
 * clients granted ComputeDispatch=yes may dispatch. See docs/security.md.
 */

/**
 * kfdb_code_object_load() - load a code object from memory. The library
 * copies @elf into a memfd sealed against writes and resizes
 * (F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW) and sends it to the daemon.
 * kfdb_code_object_load_file() does the same with the contents of @path.
 * Returns 0, -EINVAL (size 0), -E2BIG (larger than the daemon's 64 MiB
 * limit, or too many kernels to describe in one reply), -ENOEXEC (not an
 * AMDHSA code object: truncated, wrong ELF class, machine or OS ABI, no
 * kernel descriptor), -EXDEV (built for another GPU), -EDQUOT (over the
 * session's buffer count or memory limit), the errno of reading @path, or
 * the common errors. The daemon's message (kfdb_session_last_error()) says
 * what was wrong with the ELF.
 */
int kfdb_code_object_load(kfdb_session *s, const void *elf, size_t size, kfdb_code_object **ret);
int kfdb_code_object_load_file(kfdb_session *s, const char *path, kfdb_code_object **ret);

/**
 * kfdb_code_object_free() - tell the daemon to free the code object, then
 * release it here (its kfdb_kernel pointers with it). Dispatches already
 * submitted keep the code alive in the daemon until they retire. NULL-safe.
 * Returns 0 or the common errors (the local side is released anyway).
 */
int kfdb_code_object_free(kfdb_code_object *co);

/* The code object's handle in this session (for logs). */
uint64_t kfdb_code_object_get_handle(const kfdb_code_object *co);
/* Its kernels, in the order the daemon listed them. */
size_t kfdb_code_object_get_n_kernels(const kfdb_code_object *co);
/* The kernel at @index, or NULL past the end. Valid until the code object is freed. */
const kfdb_kernel *kfdb_code_object_get_kernel(const kfdb_code_object *co, size_t index);
/* The kernel called @name (its symbol name, without ".kd"), or NULL. */
const kfdb_kernel *kfdb_code_object_find_kernel(const kfdb_code_object *co, const char *name);

const char *kfdb_kernel_get_name(const kfdb_kernel *k);
/* Bytes of the kernel argument segment (explicit and hidden arguments). */
uint32_t kfdb_kernel_get_kernarg_size(const kfdb_kernel *k);
/* Static LDS bytes per workgroup (dynamic LDS comes on top, see kfdb_arg_local()). */
uint32_t kfdb_kernel_get_group_segment_size(const kfdb_kernel *k);
/* Scratch (private) bytes per work-item. */
uint32_t kfdb_kernel_get_private_segment_size(const kfdb_kernel *k);
/* Most work-items one workgroup of this kernel may have. */
uint32_t kfdb_kernel_get_max_workgroup_size(const kfdb_kernel *k);

typedef enum kfdb_kernel_arg_kind {
        KFDB_KERNEL_ARG_BY_VALUE = 0,      /* pass with kfdb_arg_value() */
        KFDB_KERNEL_ARG_GLOBAL_BUFFER = 1, /* pass with kfdb_arg_buffer() */
        KFDB_KERNEL_ARG_DYNAMIC_LDS = 2,   /* a `local` pointer: pass with kfdb_arg_local() */
        KFDB_KERNEL_ARG_HIDDEN = 3,        /* filled by the daemon; not passed */
        KFDB_KERNEL_ARG_UNKNOWN = 4,       /* a kind this library does not know */
} kfdb_kernel_arg_kind;

typedef struct kfdb_kernel_arg {
        const char *name; /* from the code object's metadata; "" if absent */
        uint32_t offset;  /* in the kernel argument segment */
        uint32_t size;
        kfdb_kernel_arg_kind kind;
} kfdb_kernel_arg;

/* Every argument of the kernel, explicit and hidden, in offset order. */
size_t kfdb_kernel_get_n_args(const kfdb_kernel *k);
/* The explicit arguments only: what kfdb_batch_dispatch() takes, in this order. */
size_t kfdb_kernel_get_n_explicit_args(const kfdb_kernel *k);
/* Fills *ret with argument @index (of kfdb_kernel_get_n_args()). Returns 0 or -EINVAL. */
int kfdb_kernel_get_arg(const kfdb_kernel *k, size_t index, kfdb_kernel_arg *ret);

typedef enum kfdb_arg_type {
        KFDB_ARG_VALUE = 1,  /* by value: exactly the argument's size in bytes */
        KFDB_ARG_BUFFER = 2, /* global pointer: buffer + offset */
        KFDB_ARG_LOCAL = 3,  /* local pointer: bytes of dynamic LDS */
} kfdb_arg_type;

/* One explicit argument of a dispatch; build it with the helpers below. */
typedef struct kfdb_arg {
        kfdb_arg_type type;
        const void *value;   /* KFDB_ARG_VALUE: copied when the job is added */
        size_t size;         /* KFDB_ARG_VALUE */
        kfdb_buffer *buffer; /* KFDB_ARG_BUFFER */
        uint64_t offset;     /* KFDB_ARG_BUFFER: the kernel gets the buffer's GPU address + offset */
        uint32_t local_size; /* KFDB_ARG_LOCAL */
} kfdb_arg;

static inline kfdb_arg kfdb_arg_value(const void *value, size_t size) {
        kfdb_arg a = { KFDB_ARG_VALUE, value, size, NULL, 0, 0 };
        return a;
}
static inline kfdb_arg kfdb_arg_buffer(kfdb_buffer *buffer, uint64_t offset) {
        kfdb_arg a = { KFDB_ARG_BUFFER, NULL, 0, buffer, offset, 0 };
        return a;
}
/* A region of @bytes of LDS for a `local` pointer argument; the regions of a
 * dispatch follow the kernel's static LDS, each 16-byte aligned, and all of
 * it must fit the device's LDS (64 KiB). */
static inline kfdb_arg kfdb_arg_local(uint32_t bytes) {
        kfdb_arg a = { KFDB_ARG_LOCAL, NULL, 0, NULL, 0, bytes };
        return a;
}

/**
 * kfdb_batch_dispatch() - add a dispatch of kernel @name of @co.
 * @n_dims: 1 to 3; @grid and @block hold that many values.
 * @grid: work-items per dimension (not workgroups), each >= 1; a grid that is
 *        not a multiple of the block ends in partial workgroups.
 * @block: work-items per workgroup per dimension, each >= 1; their product at
 *        most the kernel's kfdb_kernel_get_max_workgroup_size() and 1024.
 * @args, @n_args: exactly the kernel's explicit arguments, in order, each of
 *        the type its kind asks for; values are copied, buffers must be of
 *        this session with an offset inside them. A kernel given a buffer
 *        may read and write all of it.
 * The daemon runs it on its compute engine; use event jobs to order it
 * after copies and before later copies (see kfdb_engine).
 * Return 0, -ENOENT (no such kernel), -EINVAL (bad dimensions or
 * arguments; the message names which), -E2BIG (the batch is full), or
 * -ENOMEM. A submit can still be refused by the daemon: -EPERM when the
 * policy does not allow compute dispatch where it would run, -EAGAIN when the
 * daemon's GPU contexts are all busy (kfdbrokerd --max-contexts),
 * -EOPNOTSUPP when the device has no compute queue. A kernel that faults
 * fails its job with -EFAULT and loses its GPU context (the session's other
 * jobs on the GPU fail with -ECANCELED; see kfdb_session_get_context_lost()),
 * one that runs too long (DispatchTimeout=) with -ETIME — so does one with an
 * instruction the GPU cannot run, which stops its queue without a word (the
 * simulated GPU's words are added to the message); the job failure's message
 * says what happened.
 */
int kfdb_batch_dispatch(kfdb_batch *b, const kfdb_code_object *co, const char *name, unsigned n_dims,
                        const uint32_t *grid, const uint32_t *block, const kfdb_arg *args, size_t n_args);

typedef struct kfdb_job_failure {
        uint64_t fence;
        int error; /* negative errno */
        char message[256];
} kfdb_job_failure;

/**
 * kfdb_job_failure_next() - take the oldest job failure notification the
 * daemon sent (reads what is waiting on the socket first, without blocking).
 * A failure with fence 0 is not a job's: a kfdb_buffer_free() the daemon
 * refused after the call returned (its message says why).
 * Returns 1 and fills *ret, 0 if there is none, or -ECONNRESET / -EBADMSG.
 */
int kfdb_job_failure_next(kfdb_session *s, kfdb_job_failure *ret);

#ifdef __cplusplus
}
#endif
