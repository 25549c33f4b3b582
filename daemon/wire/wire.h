/* SPDX-License-Identifier: MIT */
/*
 * The wire layer: turns one datagram of the v1 protocol into a plain C
 * WireRequest and a WireReply back into bytes. Only wire.c (requests) and
 * wire-reply.c (replies) see the generated protobuf-c types. Decoding checks
 * the length first, copies into plain structs and range-checks every field,
 * so code above never sees a value the protocol does not allow.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest datagram accepted or sent. */
#define WIRE_MAX_MESSAGE_SIZE (64u * 1024u)
/* Jobs in one Submit, entries in one WaitEvents. */
#define WIRE_MAX_JOBS 1024u
#define WIRE_MAX_WAIT_EVENTS 256u
/* WaitEvents of one session pending at once (each holds up to
 * WIRE_MAX_WAIT_EVENTS waiters in daemon memory). */
#define WIRE_MAX_PENDING_WAITS 256u
#define WIRE_CLIENT_NAME_MAX 64u
/* HelloRequest.resume_fence: room for 2^62 more fences after it. */
#define WIRE_MAX_RESUME_FENCE (UINT64_C(1) << 62)
#define WIRE_PROTOCOL_VERSION 1u
/* HelloRequest.features bits (docs/protocol.md "Lazy sessions"); a daemon
 * ignores the bits it does not know. */
#define WIRE_HELLO_FEATURE_LAZY_SESSION (UINT64_C(1) << 0)
/* Dispatch jobs: a kernel name (the GPU layer's GpuKernel.name holds 127
 * bytes), explicit arguments (GPU_KERNEL_MAX_ARGS counts hidden ones too),
 * bytes of one by-value argument, work-items of one workgroup (the hardware's
 * and OpenCL's limit), and workgroups of one dispatch (DISPATCH_DIRECT
 * counts each dimension in 32 bits; more than 2^32 in all would run for
 * hours on real hardware and forever on the simulated one). */
#define WIRE_KERNEL_NAME_MAX 127u
#define WIRE_DISPATCH_MAX_ARGS 64u
#define WIRE_DISPATCH_MAX_ARG_BYTES 4096u
#define WIRE_DISPATCH_MAX_BLOCK 1024u
#define WIRE_DISPATCH_MAX_WORKGROUPS UINT32_MAX

typedef enum WireRequestType {
        WIRE_REQUEST_HELLO = 1,
        WIRE_REQUEST_DEVICE_INFO,
        WIRE_REQUEST_ALLOC_BUFFER,
        WIRE_REQUEST_IMPORT_BUFFER,
        WIRE_REQUEST_FREE_BUFFER,
        WIRE_REQUEST_EXPORT_BUFFER,
        WIRE_REQUEST_CREATE_EVENT,
        WIRE_REQUEST_DESTROY_EVENT,
        WIRE_REQUEST_SET_EVENT,
        WIRE_REQUEST_RESET_EVENT,
        WIRE_REQUEST_WAIT_EVENTS,
        WIRE_REQUEST_SUBMIT,
        WIRE_REQUEST_QUERY,
        WIRE_REQUEST_STATUS,
        WIRE_REQUEST_LOAD_CODE_OBJECT,
        WIRE_REQUEST_FREE_CODE_OBJECT,
        WIRE_REQUEST_OPEN_SUBMIT_RING,
        WIRE_REQUEST_OPEN_FENCE_PAGE,
        WIRE_REQUEST_OPEN_KFD,
        WIRE_REQUEST_TERMINATE_SESSION,
        WIRE_REQUEST_LIST_SESSIONS,
        WIRE_REQUEST_OPEN_SESSION_PAGE,
} WireRequestType;

/* Sessions in one ListSessions reply, at most (each well under 4 KiB with
 * its strings cut to WIRE_SESSION_STRING_MAX: the reply stays under
 * WIRE_MAX_MESSAGE_SIZE). */
#define WIRE_LIST_SESSIONS_MAX 12
#define WIRE_SESSION_STRING_MAX 255

/* Longest reason a TerminateSession request may give, in bytes. */
#define WIRE_TERMINATE_REASON_MAX 255

/* Number of fds a request type must carry (1 for ImportBuffer and
 * LoadCodeObject, else 0). */
unsigned wire_request_fds_expected(WireRequestType type);
const char *wire_request_type_name(WireRequestType type);

typedef enum WirePlacement {
        WIRE_PLACEMENT_GTT = 0,
        WIRE_PLACEMENT_VRAM = 1,
} WirePlacement;

typedef enum WireJobType {
        WIRE_JOB_COPY = 1,
        WIRE_JOB_FILL,
        WIRE_JOB_SIGNAL_EVENT,
        WIRE_JOB_WAIT_EVENT,
        WIRE_JOB_DISPATCH,
} WireJobType;

/* The engine an event job goes on (proto Engine). */
typedef enum WireEngine {
        WIRE_ENGINE_AUTO = 0, /* signal: the previous job's; wait: the next job's; else SDMA */
        WIRE_ENGINE_SDMA = 1,
        WIRE_ENGINE_COMPUTE = 2,
} WireEngine;

typedef enum WireArgType {
        WIRE_ARG_BYTES = 1, /* by value */
        WIRE_ARG_BUFFER,    /* global pointer: buffer handle + offset */
        WIRE_ARG_LOCAL_SIZE, /* local pointer: bytes of dynamic LDS */
} WireArgType;

typedef struct WireKernelArg {
        WireArgType type;
        uint32_t local_size;   /* LOCAL_SIZE: >= 1; the session checks it against the device LDS */
        uint64_t handle;       /* BUFFER */
        uint64_t offset;       /* BUFFER */
        uint8_t *bytes;        /* BYTES: owned, n_bytes (1..WIRE_DISPATCH_MAX_ARG_BYTES) */
        uint32_t n_bytes;
} WireKernelArg;

typedef struct WireJob {
        WireJobType type;
        bool has_gpu;  /* Job.gpu was sent: gpu is its index (the ring's records carry none) */
        uint32_t gpu;
        union {
                struct {
                        uint64_t src_handle, src_offset, dst_handle, dst_offset, size;
                } copy;
                struct {
                        uint64_t dst_handle, dst_offset, size;
                        uint32_t pattern;
                } fill;
                struct {
                        uint64_t handle;
                        WireEngine engine;
                } event; /* SIGNAL_EVENT and WAIT_EVENT */
                struct {
                        uint64_t code_object;
                        char kernel[WIRE_KERNEL_NAME_MAX + 1]; /* printable ASCII, NUL-terminated */
                        unsigned n_dims;         /* 1..3 */
                        uint32_t grid[3];        /* work-items, >= 1; unused dimensions are 1 */
                        uint32_t block[3];       /* >= 1, product <= WIRE_DISPATCH_MAX_BLOCK */
                        WireKernelArg *args;     /* owned */
                        size_t n_args;           /* <= WIRE_DISPATCH_MAX_ARGS */
                } dispatch;
        };
} WireJob;

typedef struct WireWaitEntry {
        uint64_t handle;
        uint64_t last_event_age;
} WireWaitEntry;

typedef struct WireRequest {
        uint64_t id;
        WireRequestType type;
        union {
                struct {
                        uint32_t protocol_version;
                        char client_name[WIRE_CLIENT_NAME_MAX + 1]; /* NUL-terminated */
                        uint64_t resume_fence; /* <= WIRE_MAX_RESUME_FENCE */
                        uint64_t features;     /* WIRE_HELLO_FEATURE_*, and bits of newer clients */
                        bool has_gpu;          /* HelloRequest.gpu was sent: gpu is its index */
                        uint32_t gpu;
                } hello;
                struct {
                        uint64_t size;
                        WirePlacement placement;
                        uint32_t flags;
                        /* A FreeBuffer (no_reply) to do first; free_first_id 0: none. */
                        uint64_t free_first_id;
                        uint64_t free_first_handle;
                        bool free_first_no_copy_kept;
                        bool has_gpu; /* AllocBufferRequest.gpu was sent: gpu is its index */
                        uint32_t gpu;
                } alloc_buffer;
                struct {
                        uint64_t handle;
                        bool no_reply; /* FREE_BUFFER: answer only an error */
                        bool no_copy_kept; /* FREE_BUFFER: its memory may serve a next AllocBuffer */
                } object; /* FREE_BUFFER, EXPORT_BUFFER, DESTROY/SET/RESET_EVENT, FREE_CODE_OBJECT */
                struct {
                        bool auto_reset;
                } create_event;
                struct {
                        WireWaitEntry *entries; /* owned; freed by wire_request_done() */
                        size_t n_entries;
                        bool wait_all;
                        uint32_t timeout_ms;
                } wait_events;
                struct {
                        WireJob *jobs; /* owned */
                        size_t n_jobs;
                } submit;
                struct {
                        uint64_t after_id;
                } list_sessions;
                struct {
                        uint64_t session_id;
                        /* NUL-terminated; bytes outside printable ASCII are '?' */
                        char reason[WIRE_TERMINATE_REASON_MAX + 1];
                } terminate_session;
        };
} WireRequest;

/*
 * Decodes one datagram. On failure returns:
 *  -EMSGSIZE  len > WIRE_MAX_MESSAGE_SIZE
 *  -EBADMSG   not a valid Request message (garbage: the caller disconnects)
 *  -EOPNOTSUPP  a Request with no body or an unknown body
 *  -EPROTONOSUPPORT  a Hello asking for a protocol version other than this daemon's
 *  -EINVAL    a field out of range
 * For -EOPNOTSUPP, -EPROTONOSUPPORT and -EINVAL, *ret_id holds the request id (so the caller can
 * reply) and errbuf a message naming the field. ret must be released with
 * wire_request_done() on success.
 */
int wire_request_decode(const void *buf, size_t len, WireRequest *ret, uint64_t *ret_id,
                        char *errbuf, size_t errlen);
void wire_request_done(WireRequest *r);

/*
 * The field checks a Submit's copy, fill and event jobs get (size > 0,
 * multiples of 4, no wrap past 2^64, a known engine), for jobs that come
 * another way (the submit ring, wire-ring.c). Each fills *out and returns 0,
 * or -EINVAL with errbuf naming "submit.jobs[i].<kind>.<field>".
 */
int wire_job_copy(size_t i, uint64_t src_handle, uint64_t src_offset, uint64_t dst_handle,
                  uint64_t dst_offset, uint64_t size, WireJob *out, char *errbuf, size_t errlen);
int wire_job_fill(size_t i, uint64_t dst_handle, uint64_t dst_offset, uint64_t size, uint32_t pattern,
                  WireJob *out, char *errbuf, size_t errlen);
/* type: WIRE_JOB_SIGNAL_EVENT or WIRE_JOB_WAIT_EVENT; engine as proto Engine. */
int wire_job_event(size_t i, WireJobType type, uint64_t handle, int64_t engine, WireJob *out,
                   char *errbuf, size_t errlen);

typedef struct WireLimits {
        uint64_t max_buffer_size, max_buffer_bytes;
        uint32_t max_buffers, max_events, max_jobs_in_flight, max_jobs_per_submit;
        uint32_t max_message_size, max_wait_events, max_pending_waits;
        uint64_t max_user_buffer_bytes, max_user_buffers, max_unit_buffer_bytes;
        uint64_t max_user_fds, max_session_fds;
} WireLimits;

typedef enum WireReplyType {
        WIRE_REPLY_ERROR = 0, /* only id, error, message */
        WIRE_REPLY_HELLO,
        WIRE_REPLY_DEVICE_INFO,
        WIRE_REPLY_ALLOC_BUFFER,
        WIRE_REPLY_IMPORT_BUFFER,
        WIRE_REPLY_EMPTY,
        WIRE_REPLY_EXPORT_BUFFER,
        WIRE_REPLY_CREATE_EVENT,
        WIRE_REPLY_WAIT_EVENTS,
        WIRE_REPLY_SUBMIT,
        WIRE_REPLY_QUERY,
        WIRE_REPLY_STATUS,
        WIRE_REPLY_JOB_FAILED, /* notification, id 0 */
        WIRE_REPLY_SESSION_ENDED, /* notification, id 0, the session's last message */
        WIRE_REPLY_LOAD_CODE_OBJECT,
        WIRE_REPLY_OPEN_SUBMIT_RING, /* 2 fds: the ring memfd, the doorbell eventfd */
        WIRE_REPLY_OPEN_FENCE_PAGE,  /* 1 fd: the fence page, a dma-buf */
        WIRE_REPLY_OPEN_KFD,         /* 1 fd: the KFD relay socket */
        WIRE_REPLY_LIST_SESSIONS,
        WIRE_REPLY_OPEN_SESSION_PAGE, /* 2 fds: the session page memfd, the eventfd */
} WireReplyType;

/* OpenKfd's topology: bounds both ends check (proto/kfdbroker/v1/kfdbroker.proto). */
#define WIRE_MAX_TOPOLOGY_FILES 256u
#define WIRE_MAX_TOPOLOGY_PATH 255u
#define WIRE_MAX_TOPOLOGY_CONTENT 4096u

typedef struct WireTopologyFile {
        const char *path;
        const void *content;
        size_t size;
} WireTopologyFile;

typedef enum WireWaitResult {
        WIRE_WAIT_COMPLETE = 0,
        WIRE_WAIT_TIMEOUT = 1,
        WIRE_WAIT_FAIL = 2,
} WireWaitResult;

typedef struct WireKernelArgInfo {
        const char *name;
        uint32_t offset, size;
        const char *kind; /* "by_value", "global_buffer", "dynamic_lds", "hidden" */
} WireKernelArgInfo;

typedef struct WireKernelInfo {
        const char *name;
        uint32_t kernarg_size, group_segment_size, private_segment_size, max_workgroup_size;
        const WireKernelArgInfo *args;
        size_t n_args;
} WireKernelInfo;

/* StatusReply.contexts (proto ContextInfo). */
typedef struct WireContextInfo {
        uint64_t id;
        const char *kind;
        bool live;
        uint32_t users, jobs_in_flight, losses;
        uint64_t memory_bytes, mapped_bytes;
        uint32_t pid;
        uint32_t gpu;
} WireContextInfo;

/* StatusReply.gpus (proto GpuStatus). */
typedef struct WireGpuStatus {
        uint32_t index;
        const char *gfx_name, *name, *node, *node_reason;
        uint32_t gpu_id, cu_count;
        uint64_t vram_size, jobs_completed, jobs_failed;
        uint32_t jobs_in_flight, sessions, gpu_buffers;
} WireGpuStatus;

/* ListSessionsReply.sessions[].limits (proto PolicyLimit). */
typedef struct WirePolicyLimit {
        const char *key;
        char value[64];
        uint64_t number;
} WirePolicyLimit;

/* ListSessionsReply.sessions (proto SessionInfo); strings may be NULL and are
 * cut to WIRE_SESSION_STRING_MAX bytes when encoded. */
typedef struct WireSessionInfo {
        uint64_t id;
        uint32_t uid, gid, pid;
        const char *client_name, *unit, *user_unit, *app_id, *container, *container_id, *pod_uid;
        uint64_t opened_ns;
        uint32_t buffers, events, jobs_in_flight;
        uint64_t buffer_bytes, jobs_submitted, jobs_completed, jobs_failed, bytes_copied, bytes_filled;
        uint64_t busy_ns_sdma, busy_ns_compute, context_bytes;
        const char *policy_rules;
        bool limits_overridden;
        uint32_t gpu;
        const uint64_t *busy_ns_by_gpu; /* n_busy_ns_by_gpu, by GPU index */
        size_t n_busy_ns_by_gpu;
        const WirePolicyLimit *limits;
        size_t n_limits;
} WireSessionInfo;

typedef struct WireReply {
        uint64_t id;
        int error;           /* positive errno or 0 */
        const char *message; /* NULL or error text */
        WireReplyType type;
        union {
                struct {
                        uint32_t protocol_version;
                        const char *daemon_version;
                        const char *const *features; /* NULL-terminated */
                        WireLimits limits;
                        uint64_t session_id;
                        uint32_t session_page_size;
                        uint32_t gpu, gpu_count;
                } hello;
                struct {
                        const char *backend, *gfx_name, *name;
                        uint32_t gpu_id, vendor_id, device_id, cu_count;
                        uint64_t vram_size;
                        uint32_t kfd_major, kfd_minor, sdma_queues, compute_queues;
                        const char *node, *node_reason;
                        uint32_t gpu_index, gpu_count;
                } device_info;
                struct {
                        uint64_t handle, size;
                        uint32_t gpu; /* the index of the GPU it is on */
                } buffer; /* ALLOC_BUFFER, IMPORT_BUFFER; EXPORT_BUFFER uses size */
                struct {
                        uint64_t handle;
                        uint32_t slot;
                } create_event;
                struct {
                        WireWaitResult result;
                        const WireWaitEntry *entries;
                        size_t n_entries;
                } wait_events;
                struct {
                        const uint64_t *fences;
                        size_t n_fences;
                } submit;
                struct {
                        uint32_t buffers, events, jobs_in_flight;
                        uint64_t buffer_bytes, jobs_submitted, jobs_completed, jobs_failed;
                        uint64_t bytes_copied, bytes_filled;
                        WireLimits limits;
                        uint32_t code_objects;
                        uint64_t released_buffer_bytes, user_buffer_bytes, user_buffers, unit_buffer_bytes;
                        uint64_t pooled_buffer_bytes, user_fds, session_fds, context_bytes;
                } query;
                struct {
                        const char *daemon_version, *backend, *gfx_name;
                        uint32_t sessions;
                        uint64_t jobs_completed, jobs_failed, uptime_ns, buffer_bytes;
                        uint32_t gpu_buffers, jobs_in_flight, events, code_objects;
                        const char *context_mechanism, *context_mechanism_reason;
                        uint32_t max_contexts;
                        const WireContextInfo *contexts;
                        size_t n_contexts;
                        const WireGpuStatus *gpus;
                        size_t n_gpus;
                } status;
                struct {
                        uint64_t fence;
                        int error;
                        const char *message;
                } job_failed;
                struct {
                        int error;
                        const char *message;
                        bool reconnect;
                } session_ended;
                struct {
                        const WireSessionInfo *sessions;
                        size_t n_sessions; /* <= WIRE_LIST_SESSIONS_MAX */
                        bool more;
                } list_sessions;
                struct {
                        uint64_t handle;
                        const WireKernelInfo *kernels;
                        size_t n_kernels;
                } load_code_object;
                struct {
                        uint32_t size, records;
                } submit_ring;
                struct {
                        uint32_t size, slots;
                } fence_page;
                struct {
                        uint32_t size;
                } session_page;
                struct {
                        const WireTopologyFile *files;
                        size_t n_files;
                        uint32_t render_minor;
                } open_kfd;
        };
} WireReply;

/* Encodes into a malloc'd buffer. -EMSGSIZE if larger than WIRE_MAX_MESSAGE_SIZE. */
int wire_reply_encode(const WireReply *r, void **ret_buf, size_t *ret_len);
/*
 * Refuses the connection fd before any session: sends the error (id 0) with
 * its message, without blocking, and makes sure the client can read it
 * whenever it looks — whether its Hello was already on the way or comes
 * after: no more input is taken (SHUT_RD: a later send of the client's fails
 * with EPIPE, and the error stays readable) and what came is read away, so
 * that closing fd does not reset the connection under the client's read
 * (AF_UNIX resets a peer when unread data is dropped). The caller closes fd.
 */
void wire_refuse(int fd, int error, const char *message);
