/* SPDX-License-Identifier: MIT */
/*
 * Session: one client connection — its identity from the kernel, its objects
 * by session handle (buffers, events), its limits, its accounting, its
 * session page, its job streams and the replies waiting to be sent. Handles
 * are looked up only inside the calling session.
 *
 * Lifetime: its SessionSet holds the session while it is connected. Jobs hold a
 * reference, so a client that disconnects with jobs in flight keeps its
 * Session (and buffers) alive until the GPU has retired them; everything is
 * freed by the last unref.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>

#include "scheduler/accounting.h"
#include "sessions/forward.h"
#include "policy/identity.h"
#include "policy/policy.h"
#include "contexts/context.h"
#include "scheduler/scheduler.h"
#include "sessions/fence-watch.h"
#include "sessions/session-page.h"
#include "sessions/tally.h"
#include "util/handle-table.h"
#include "util/log-ratelimit.h"
#include "util/list.h"
#include "wire/wire.h"

#define HANDLE_TAG_BUFFER 0x42 /* 'B' */
#define HANDLE_TAG_EVENT 0x45  /* 'E' */
#define HANDLE_TAG_CODE_OBJECT 0x43 /* 'C' */

/* What a buffer handle names in a session. */
typedef struct SessionBuffer {
        GpuBuffer *gpu;  /* reference */
        unsigned gpu_index; /* the GPU it is on: the device context of which gpu is a buffer */
        GpuPlacement placement;
        bool imported;
        bool exported;   /* its dma-buf left the daemon: charged after FreeBuffer while copies may live */
        bool exported_again; /* ExportBuffer gave out another dma-buf: never pooled */
} SessionBuffer;

/* Freed buffers kept for the session's next AllocBuffer (session-pool.c). */
#define SESSION_POOL_MAX_BUFFER_SIZE (256u * 1024u) /* only buffers up to this size */
#define SESSION_POOL_MAX_BUFFERS 16u
#define SESSION_POOL_MAX_BYTES (1024u * 1024u)

typedef struct PooledBuffer {
        GpuBuffer *gpu; /* reference */
        GpuPlacement placement;
} PooledBuffer;

/* A freed buffer still charged to its session (session-quota.c). */
typedef struct ReleasedBuffer ReleasedBuffer;

/* What a code object handle names in a session. */
typedef struct SessionCodeObject {
        GpuCodeObject *co; /* reference, parsed (loaded into a context where it runs); jobs hold their own */
        uint64_t charged;  /* bytes counted in the session's buffer memory */
} SessionCodeObject;

/* Where session_send_error() puts the first error instead of sending it,
 * while a submit ring batch is checked (its jobs fail with it). */
typedef struct SessionErrorSink {
        int error;
        char message[512];
} SessionErrorSink;

typedef struct SessionRing SessionRing;

/*
 * What a session has on one GPU (session-gpus.c): its job streams in that
 * GPU's scheduler (its weight and priority class hold there), the GPU
 * context its kernels run in there and the one whose own memory it pays for.
 * The session's own GPU's is made with it (Session.home); another GPU's the
 * first time a buffer or job names that GPU; all go with the session.
 */
struct SessionOnGpu {
        Session *session; /* not a reference: the session holds it */
        SessionGpu *gpu;
        SchedStream streams[_GPU_ENGINE_MAX];
        Context *compute_ctx;     /* where its kernels run (a reference), NULL until its first dispatch */
        char *compute_key;        /* the context key it was taken for; NULL until its first dispatch */
        /* The context whose own memory it pays for (a reference; context.h
         * ContextPayer): the one it brought up, or took over from a session
         * that went. Charged as buffer memory on this GPU. */
        ContextPayer payer;
        Context *paid_ctx;
        uint64_t context_bytes;
};

typedef struct OutMsg {
        void *buf;
        size_t len;
        int fds[2];
        unsigned n_fds;
        LIST_FIELDS(struct OutMsg, out);
} OutMsg;

struct Session {
        unsigned n_ref;
        SessionSet *set;
        /* The GPU its buffers and work are on: the first it may use, or the
         * one its Hello named (docs/protocol.md "GPUs"); NULL without a GPU. */
        SessionGpu *gpu;
        /* It came through GPU N's socket (gpu-socket.h): it may use GPU N
         * only, whatever Devices= says; -1: the main socket, or none. */
        int pinned_gpu;
        /* Its Hello named its GPU (HelloRequest.gpu, $KFDBROKER_GPU): a
         * relayed program is shown that GPU alone (session-kfd.c). */
        bool gpu_named;
        uint64_t id;

        int fd;
        sd_event_source *io;
        bool connected;
        bool hello_done;
        bool lazy;  /* its Hello asked for a lazy session (docs/protocol.md "Lazy sessions") */
        bool young; /* served after established sessions (session-set.h, "Young sessions") */
        bool reading_paused;
        bool corked; /* replies queue up without being sent (session_cork) */

        Identity identity;        /* from the kernel: SO_PEERCRED, pidfd, cgroup */
        char client_name[WIRE_CLIENT_NAME_MAX + 1];
        uint64_t opened_ns;

        PolicyLimits policy;      /* resolved from the policy for this identity */
        char *policy_matched;     /* which rules applied (FILE:LINE list); NULL: none, the defaults */
        bool limits_overridden;   /* SetLimits changed them; reloads keep them */
        WireLimits limits;        /* what Hello announces and requests are checked against */

        SessionPage page;         /* made at Hello, or for a lazy session at OpenSessionPage */
        HandleTable buffers; /* SessionBuffer* */
        HandleTable events;  /* ClientEvent* */
        HandleTable code_objects; /* SessionCodeObject*; each also counts against max_buffers */

        /* What it has on its own GPU (s->gpu), and on each GPU it used
         * (on[index]; on[s->gpu->index] is &home). The session page, the
         * fence page, the submit ring and the KFD relay are its own GPU's. */
        SessionOnGpu home;
        SessionOnGpu *on[SESSION_MAX_GPUS];
        uint64_t context_bytes;   /* GPU context memory it pays for, every GPU together */
        /* Buffer memory charged to it on each GPU, as usage.buffer_bytes
         * counts it (buffers, kept and pooled ones, code objects, context
         * memory): BufferMemory= holds per GPU (session-quota.c). */
        uint64_t gpu_bytes[SESSION_MAX_GPUS];

        uint64_t last_fence;      /* last fence handed out */
        uint64_t completed_fence; /* all fences <= this are finished */
        unsigned n_jobs;          /* unfinished jobs */
        unsigned n_jobs_peak;     /* the most it had at once (session_free() gives the memory back) */
        unsigned n_unordered;     /* of them, those not copies or fills (session-fence-page.c) */
        QUEUE_HEAD(Job, jobs);    /* unfinished jobs in fence order */

        LIST_HEAD(EventWait, waits);
        unsigned n_waits; /* entries of waits */

        QUEUE_HEAD(OutMsg, out);
        unsigned n_out;
        size_t out_bytes;

        SessionRing *ring;           /* the submit ring (session-ring.c), NULL until OpenSubmitRing */
        GpuBuffer *fence_page;       /* session-fence-page.c, NULL until OpenFencePage */
        int kfd_relay_fd;            /* session-kfd.c: a copy of the client's end, -EBADF until OpenKfd */
        struct KfdRelay *kfd_relay;  /* kfd-relay.h: the checks around its calls, NULL until OpenKfd */
        Context *kfd_ctx;            /* the daemon's GPU context in that KFD process (a use), NULL until OpenKfd */
        struct SessionKfdOpen *kfd_open; /* session-kfd.c: an OpenKfd whose KFD process is on its way, or NULL */
        FenceWatchEntry fence_watch; /* set up with fence_page; on the set's watch while armed */
        SessionErrorSink *error_sink; /* set while a ring batch is checked */

        Usage usage;
        uint64_t busy_ns_by_gpu[SESSION_MAX_GPUS]; /* usage.busy_ns of its jobs on each GPU */
        Account *account; /* the identity's usage across sessions */
        Tally *user_tally; /* what the sessions of its uid hold together */
        Tally *unit_tally; /* ... of its systemd unit (user unit), NULL outside one */
        /* Freed buffers still charged (in usage.buffer_bytes): those the
         * daemon watches for the last copy of their dma-buf, and the bytes
         * charged for good, by placement; both go to its user and unit when
         * it ends (session-quota.c, "Kept buffers"). */
        LIST_HEAD(ReleasedBuffer, released);
        unsigned n_released;
        uint64_t released_until_end[SESSION_MAX_GPUS][2]; /* by GPU index and placement */
        uint64_t released_bytes; /* both together */
        uint64_t placement_bytes[2]; /* buffer bytes by GpuPlacement (GTT, VRAM) */
        /* Freed buffers kept for reuse, still charged (in usage.buffer_bytes
         * and the tallies, and each still counted as an object):
         * SESSION_POOL_MAX_BUFFERS entries, allocated with the first. */
        PooledBuffer *pool;
        unsigned n_pooled;
        uint64_t pooled_bytes;
        uint64_t fds;             /* daemon fds held for it (session-fds.c), also in its user's Tally */

        LIST_FIELDS(Session, sessions);
};

/*
 * session_log_fields() - add the session's journal fields to f:
 * KFDBROKER_SESSION, KFDBROKER_UID, KFDBROKER_GID, KFDBROKER_PID,
 * KFDBROKER_COMM and, where known, KFDBROKER_CLIENT (the name it gave at
 * Hello), KFDBROKER_UNIT, KFDBROKER_USER_UNIT, KFDBROKER_SLICE,
 * KFDBROKER_APP_ID and KFDBROKER_CONTAINER (docs/journal.md). What a client
 * controls (comm, its name, cgroup names) is escaped as log_escape() does.
 */
void session_log_fields(const Session *s, LogFields *f);

/*
 * Logs a line the client caused, under its user's rate limit and the
 * daemon-wide one (log-ratelimit.h), as a journal entry with message_id
 * (log-ids.h; NULL: none), the session's fields (session_log_fields(), built
 * only when the line passes) and the fields of extra (NULL: none).
 */
#define session_log_struct(s, level, error, message_id, extra, ...)                                      \
        do {                                                                                            \
                const Session *_ls_ = (s);                                                              \
                int _ls_level_ = (level);                                                               \
                if (log_get_max_level() >= _ls_level_ &&                                                \
                    log_ratelimit_pass(_ls_->user_tally ? &_ls_->user_tally->log_limit : NULL,          \
                                       _ls_->user_tally ? _ls_->user_tally->key : NULL)) {              \
                        LogFields _ls_f_ = {};                                                          \
                        session_log_fields(_ls_, &_ls_f_);                                              \
                        log_fields_append(&_ls_f_, (extra));                                            \
                        (void) log_struct_errno(_ls_level_, (error), (message_id), &_ls_f_, __VA_ARGS__); \
                }                                                                                       \
        } while (0)
#define session_log(s, level, ...) session_log_struct(s, level, 0, NULL, NULL, __VA_ARGS__)

/* Takes ownership of fd (a connected SOCK_SEQPACKET socket). The identity is
 * read from the socket's peer, or taken from id (copied) when it is not NULL
 * (a session opened over D-Bus, whose peer is the D-Bus caller). */
int session_new(SessionSet *m, int fd, const Identity *id, Session **ret);
/* The same for an accepted connection, with the pidfd identity_peer_pidfd()
 * took at accept (not taken over; -EBADF if none). */
int session_new_from_peer(SessionSet *m, int fd, int pidfd, bool pidfd_exact, Session **ret);
/* Resolves the session's limits from the policy in force (unless SetLimits
 * overrode them) and applies them to new requests. */
void session_apply_policy(Session *s);
/* Applies explicit limits (SetLimits). */
/* Moves a session that holds nothing yet (no buffer, code object, context,
 * ring or fence page: -EBUSY) to GPU g: its streams go to g's scheduler. */
int session_use_gpu(Session *s, SessionGpu *g);
/* Whether the session's Devices= lets it use g. */
bool session_may_use_gpu(const Session *s, const SessionGpu *g);
/* The first GPU it may use, NULL for none. */
SessionGpu *session_first_gpu(Session *s);
/* Several GPUs in one session (session-gpus.c). session_gpu_ref() resolves
 * a GpuRef of request id (field names it, e.g. "alloc_buffer.gpu"): has
 * false is the session's own GPU; else the GPU of that index, or NULL after
 * replying ENODEV (the daemon serves none such, with how many it serves) or
 * EACCES (Devices= or the GPU's socket keeps the session off it, naming
 * which). session_on_gpu() returns what the session has on g, made the first
 * time (NULL: out of memory). session_on_gpu_done() lets go of it all (the
 * session ends). */
SessionGpu *session_gpu_ref(Session *s, uint64_t id, const char *field, bool has, uint32_t index);
SessionOnGpu *session_on_gpu(Session *s, SessionGpu *g);
void session_on_gpu_done(SessionOnGpu *on);
/* The buffer b of the session as the device context of on's GPU sees it: b
 * itself if it is on that GPU, else an import of its dma-buf there (made
 * once, kept with b: gpu_buffer_map_in(); borrowed, the job holds b). NULL
 * after replying to id (field names the job's buffer): the kernel cannot
 * import it (before KFD 1.15, naming both GPUs). */
GpuBuffer *session_buffer_seen_from(Session *s, uint64_t id, const char *field, SessionBuffer *b, SessionOnGpu *on);
void session_set_limits(Session *s, const PolicyLimits *l);
/* Quotas (session-quota.c). Buffer memory accounting for the session, its
 * identity, its user and its unit; buffer and code object counts of its user
 * and unit. */
void session_account_buffer(Session *s, unsigned gpu, GpuPlacement placement, int64_t delta);
void session_account_object(Session *s, int delta);
/* Pays for the own memory of ctx, the session's compute context on on's
 * GPU, unless another session does; stops paying for the one it paid for
 * there before (session-quota.c). session_stop_paying() at the end. */
void session_pay_context(SessionOnGpu *on, Context *ctx);
void session_stop_paying(SessionOnGpu *on);
/* The session as a payer for a context it is about to bring up itself
 * (context_pool_kfd_relay_begin()); set paid_ctx to it once it is up. */
ContextPayer *session_begin_paying(Session *s);
/* The same for what the session has on another GPU (its relayed KFD
 * process's context there, kfd-relay-queue.c). */
ContextPayer *session_begin_paying_on(SessionOnGpu *on);
/* Takes references to the Tallies of the session's uid and unit. */
int session_tallies_attach(Session *s);
void session_tallies_detach(Session *s);
/* FreeBuffer: drops the session's reference to b's GpuBuffer (b itself is the
 * caller's to free) and its charge — unless b was exported, which stays
 * charged while copies of its dma-buf may live (session-quota.c). */
void session_release_buffer(Session *s, SessionBuffer *b);
/* Charges of a freed buffer (its GPU, placement, size) that was exported:
 * kept while copies of its dma-buf may live, as session_release_buffer()
 * does; probe is a dma-buf fd of it (taken) or -EBADF. */
void session_release_exported(Session *s, unsigned gpu, GpuPlacement placement, uint64_t size, int probe);
/* The pool (session-pool.c). session_pool_put() keeps a freed buffer the
 * client keeps no copy of (FreeBuffer no_copy_kept) if it is small, idle and
 * there is room: it takes b's reference and returns true; its charge stays.
 * session_pool_take() returns a pooled buffer of exactly size bytes and that
 * placement, zeroed, with its charge (the caller charges nothing again), or
 * NULL. session_pool_drop() frees every pooled buffer: their charges follow
 * the rule for freed exported buffers (the session ends, or memory is short). */
bool session_pool_put(Session *s, SessionBuffer *b);
GpuBuffer *session_pool_take(Session *s, uint64_t size, GpuPlacement placement);
void session_pool_drop(Session *s);
/* File descriptor budgets (session-fds.c). A session's own fd: its socket;
 * its page adds its eventfd (and the memfd, until handed out). A connection
 * is taken when the socket and a page fit (SESSION_FDS + SESSION_PAGE_FDS). */
#define SESSION_FDS 1u
#define SESSION_PAGE_FDS 2u
/* Counts delta fds the daemon holds for the session (and its user). */
void session_account_fds(Session *s, int64_t delta);
/* Daemon fds each buffer keeps open (GpuDeviceInfo.fds_per_buffer). */
unsigned session_buffer_fds(const Session *s);
/* True if n more fds fit the user's budget and leave the daemon's reserve;
 * else replies EDQUOT (the user's budget) or EMFILE (the reserve) naming
 * what needed them (what) and returns false. */
bool session_check_fds(Session *s, uint64_t id, uint64_t n, const char *what);
/* 0 if one more session fits its user's fd budget, else -EUSERS with the
 * reason in msg. */
int session_check_connection_fds(SessionSet *set, const Session *s, char *msg, size_t msglen);
/* One more (delta > 0) or one less probe of a freed exported buffer: an
 * object and one fd (session-quota.c). */
void session_account_probe(Session *s, int delta);
/* Drops the charges of freed buffers no copy of which is left: the
 * session's own, and those its user and unit keep from ended sessions. */
void session_refresh_released(Session *s);
/* The session ends: the charges of what it freed whose dma-buf may still be
 * held move to its user's and unit's Tallies ("Kept buffers"). */
void session_keep_released(Session *s);
/* Lets go of every kept buffer's probe (the daemon exits). */
void session_set_drop_kept(SessionSet *set);
Session *session_ref(Session *s);
Session *session_unref(Session *s);
/* Closes the connection: cancels waits and pending jobs, drops handles. Jobs
 * already on the GPU finish; the session is freed after the last one. */
void session_disconnect(Session *s, const char *why);
/* Ends the session on purpose: tells the client why first (SessionEnded, if
 * it can be queued: error, why, and whether a new session may pick up where
 * this one ended), then disconnects. */
void session_end(Session *s, int error, const char *why, bool reconnect);

/* Queues a reply (copies fds: the caller keeps its own). Disconnects a
 * client whose unread replies exceed the limits. */
int session_send(Session *s, const WireReply *r, const int *fds, unsigned n_fds);
/* While corked, replies keep their order but wait in the queue; uncorking
 * sends what waits. A Submit's reply is corked while its jobs go to the GPU,
 * so the client learns its fences after the ring was written, and before any
 * notification about those jobs. */
void session_cork(Session *s);
void session_uncork(Session *s);
int session_send_error(Session *s, uint64_t id, int error, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/*
 * Submits one batch read from the submit ring as a Submit of those jobs, with
 * the same checks (session-requests.c). When a check fails, or decode_error
 * (a positive errno: the ring decoder refused a field, decode_message says
 * which) is set, the batch's jobs still take their fences and each fails at
 * once with a JobFailed naming the reason. 0 or a negative errno; the caller
 * runs the scheduler.
 */
int session_submit_ring_batch(Session *s, const WireJob *wjobs, size_t n, int decode_error,
                              const char *decode_message);
/* The submit ring (session-ring.c): OpenSubmitRing; taking what the client
 * published (before each request from the socket, so the two stay in order);
 * stopping its sources (disconnect); freeing it (with the session). */
void session_open_submit_ring(Session *s, const WireRequest *req);
void session_ring_drain(Session *s);
void session_ring_stop(Session *s);
void session_ring_free(Session *s);

/* The session page (session-page-open.c). session_page_make() checks the
 * fds (if check_fds: Hello's were when the connection was taken), makes the
 * page with what the session says now (its fences, failures, losses, limit,
 * live events) and counts its fds; 0, or a negative errno after replying to
 * request id with the reason (what names the request).
 * session_page_handed_out() closes the memfd once a reply holds a copy.
 * session_open_session_page() answers OpenSessionPage. */
int session_page_make(Session *s, uint64_t id, const char *what, bool check_fds);
void session_page_handed_out(Session *s);
void session_open_session_page(Session *s, const WireRequest *req);

/* The fence page (session-fence-page.c): OpenFencePage; counting a new
 * job, and giving it the slot write it ends with when it is a copy or fill
 * ordered after every unfinished job of the session; freeing the page (with
 * the session). */
void session_open_fence_page(Session *s, const WireRequest *req);
/* Gives a copy or fill its fence page slot write if it may have one: true if it did. */
bool session_fence_page_track(Session *s, Job *j);
/* The waiter thread is to wake the client once fence's slot says done (fence-watch.h). */
void session_fence_page_watch(Session *s, uint64_t fence);
void session_fence_page_free(Session *s);

/* OpenKfd (session-kfd.c): a KFD process of the session's own and the
 * topology it may see, answered once it is up (a proxy worker's comes up
 * while the loop serves on); ending it with the session. */
void session_open_kfd(Session *s, const WireRequest *req);
/* Gives up an OpenKfd still on its way (the client went): nothing of it
 * stays. No-op without one. */
void session_kfd_cancel(Session *s);
void session_kfd_free(Session *s);

/* Dispatches one decoded request (session-requests.c). */
void session_handle_request(Session *s, WireRequest *req, int *fds, unsigned n_fds);

/* How a handle that resolved to nothing looks ("a buffer handle", ...), for errors. */
const char *session_handle_kind(uint64_t handle);
/* Handle lookups for request handlers: the object, or NULL after replying
 * ENOENT with a message naming @field (session-requests.c). */
GpuBuffer *session_lookup_buffer(Session *s, uint64_t id, const char *field, uint64_t handle);
/* EDQUOT reply unless one more buffer or code object fits the session's
 * max_buffers (a code object counts as a buffer) and its user's UserBuffers=. */
bool session_check_object_count(Session *s, uint64_t id);
/* The same for the session's own max_buffers alone (a buffer taken from its
 * pool is already counted as its user's object). */
bool session_check_handle_count(Session *s, uint64_t id);
/* EDQUOT reply unless @size more bytes on GPU @gpu fit the session's memory
 * limits (BufferMemory= per GPU) and those of its user (UserBufferMemory=)
 * and unit (UnitBufferMemory=), which count every GPU. */
bool session_check_memory_quota(Session *s, uint64_t id, unsigned gpu, uint64_t size);

/* Status (session-status.c): the reply to a Status request. */
void session_handle_status(Session *s, const WireRequest *req);
/* TerminateSession over the socket (session-manage.c): ends another session
 * of the caller's uid, or of any uid for root; logged with the caller. */
void session_handle_terminate(Session *s, const WireRequest *req);
/* ListSessions (session-manage.c): the caller's uid's sessions, root every one. */
void session_handle_list_sessions(Session *s, const WireRequest *req);

/* Compute (session-compute.c): LoadCodeObject with its sealed memfd,
 * FreeCodeObject, and the resolution of a DispatchJob into a Job (0, or a
 * negative errno after replying with the error). */
void session_load_code_object(Session *s, const WireRequest *req, int fd);
void session_free_code_object(Session *s, const WireRequest *req);
int session_build_dispatch(Session *s, uint64_t id, const WireJob *wj, size_t idx, Job *j);
/* The session's buffer of handle for job idx on on's GPU (field: its field
 * after "submit.jobs[idx].", the name made only on error): its GpuBuffer
 * (what the job holds), or NULL after replying: ENOENT, no such buffer;
 * EINVAL, a buffer of another GPU where ret_seen is NULL, naming both GPUs.
 * With ret_seen (a copy), a buffer of another GPU is taken, and *ret_seen
 * is it as on's GPU sees it (session_buffer_seen_from()). */
GpuBuffer *session_job_buffer(Session *s, uint64_t id, size_t idx, const char *field, uint64_t handle,
                              SessionOnGpu *on, GpuBuffer **ret_seen);
/* Runs the scheduler of every GPU the session uses. */
void session_run_schedulers(Session *s);
/* Drops every code object handle (disconnect). */
void session_drop_code_objects(Session *s);
/* Whether the GPU g runs dispatches at all (it has compute queues). */
bool session_has_compute(const SessionGpu *g);
/* The GPU context the session's kernels and compute-engine jobs run in on
 * on's GPU, taken (and brought up) as its policy says: Isolation=,
 * ComputeDispatch= and the mechanism the daemon has. 0, or a negative errno
 * after replying to id with an error naming @field (EPERM by policy, EAGAIN
 * when the context limit is reached). */
int session_compute_context(SessionOnGpu *on, uint64_t id, const char *field, Context **ret);

/* A job finished (error 0) or failed: fence bookkeeping, accounting, the
 * client told; the job is freed. */
void session_job_finished(Job *j, int error, const char *message, uint64_t busy_ns);
/* Queues a job of the session's relayed KFD process (kfd-relay-queue.c) as
 * the session's next fence: accounted and scheduled as its other work. */
void session_submit_relayed(Session *s, Job *j);
/* "ComputeDispatch=…, Isolation=…; rules: …": what decided, for messages. */
void session_policy_words(const Session *s, char *buf, size_t size);
/* The GPU context ctx lost an incarnation: sessions running there are told
 * (the session page's context_lost). */
void session_context_lost(Session *s, Context *ctx, const char *reason);
/* Publishes page changes and signals the client's eventfd. */
void session_flush(Session *s);
