/* SPDX-License-Identifier: MIT */
/*
 * The client's half of the v1 protocol: a ClientRequest (plain C) becomes one
 * datagram, one datagram becomes a ClientReply (plain C). Only client-wire.c
 * sees the protobuf-c generated types; the rest of the library works on these
 * structs. A ClientReply owns the decoded message (its strings and arrays
 * point into it) and the fds that came with the datagram; client_reply_free()
 * releases both.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest datagram sent or accepted; the daemon's limit (daemon/wire/wire.h). */
#define CLIENT_MAX_MESSAGE_SIZE (64u * 1024u)
/* Sessions a ListSessions reply may hold (the daemon's WIRE_LIST_SESSIONS_MAX). */
#define CLIENT_LIST_SESSIONS_MAX 12u
/* Most fds any reply carries (Hello: session page and eventfd). */
#define CLIENT_MAX_FDS 2u

typedef enum ClientRequestType {
        CLIENT_REQUEST_HELLO = 1,
        CLIENT_REQUEST_DEVICE_INFO,
        CLIENT_REQUEST_ALLOC_BUFFER,
        CLIENT_REQUEST_IMPORT_BUFFER,
        CLIENT_REQUEST_FREE_BUFFER,
        CLIENT_REQUEST_EXPORT_BUFFER,
        CLIENT_REQUEST_CREATE_EVENT,
        CLIENT_REQUEST_DESTROY_EVENT,
        CLIENT_REQUEST_SET_EVENT,
        CLIENT_REQUEST_RESET_EVENT,
        CLIENT_REQUEST_WAIT_EVENTS,
        CLIENT_REQUEST_SUBMIT,
        CLIENT_REQUEST_QUERY,
        CLIENT_REQUEST_STATUS,
        CLIENT_REQUEST_LOAD_CODE_OBJECT, /* carries the sealed memfd */
        CLIENT_REQUEST_FREE_CODE_OBJECT,
        CLIENT_REQUEST_OPEN_SUBMIT_RING,
        CLIENT_REQUEST_OPEN_FENCE_PAGE,
        CLIENT_REQUEST_OPEN_KFD,
        CLIENT_REQUEST_TERMINATE_SESSION,
        CLIENT_REQUEST_LIST_SESSIONS,
        CLIENT_REQUEST_OPEN_SESSION_PAGE,
} ClientRequestType;

/* HelloRequest.features bits (docs/protocol.md "Lazy sessions"). */
#define CLIENT_HELLO_FEATURE_LAZY_SESSION (UINT64_C(1) << 0)

typedef enum ClientJobType {
        CLIENT_JOB_COPY = 1,
        CLIENT_JOB_FILL,
        CLIENT_JOB_SIGNAL_EVENT,
        CLIENT_JOB_WAIT_EVENT,
        CLIENT_JOB_DISPATCH,
} ClientJobType;

typedef enum ClientArgType {
        CLIENT_ARG_BYTES = 1,
        CLIENT_ARG_BUFFER,
        CLIENT_ARG_LOCAL_SIZE,
} ClientArgType;

typedef struct ClientKernelArg {
        ClientArgType type;
        uint32_t local_size;
        uint64_t handle, offset;
        const uint8_t *bytes; /* n_bytes */
        uint32_t n_bytes;
} ClientKernelArg;

typedef struct ClientJob {
        ClientJobType type;
        bool has_gpu; /* Job.gpu: gpu's index; else the session's GPU */
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
                        uint32_t engine; /* 0 auto, 1 SDMA, 2 compute (proto Engine) */
                } event;
                struct {
                        uint64_t code_object;
                        const char *kernel;
                        unsigned n_dims;
                        uint32_t grid[3], block[3];
                        const ClientKernelArg *args;
                        size_t n_args;
                } dispatch;
        };
} ClientJob;

typedef struct ClientWaitEntry {
        uint64_t handle;
        uint64_t last_event_age;
} ClientWaitEntry;

typedef struct ClientRequest {
        uint64_t id;
        ClientRequestType type;
        union {
                struct {
                        uint32_t protocol_version;
                        const char *client_name;
                        uint64_t resume_fence; /* 0: a new client */
                        uint64_t features;     /* CLIENT_HELLO_FEATURE_* */
                        bool has_gpu;          /* HelloRequest.gpu: gpu's index */
                        uint32_t gpu;
                } hello;
                struct {
                        uint64_t size;
                        uint32_t placement; /* 0 GTT, 1 VRAM */
                        uint32_t flags;
                        /* A FreeBuffer the daemon does first ("alloc-free-first"),
                         * with its own no-reply id; free_first_id 0: none. */
                        uint64_t free_first_id;
                        uint64_t free_first_handle;
                        bool free_first_no_copy_kept;
                        bool has_gpu; /* AllocBufferRequest.gpu: gpu's index */
                        uint32_t gpu;
                } alloc_buffer;
                struct {
                        uint64_t handle;
                        bool no_reply; /* FREE_BUFFER: the daemon answers only an error */
                        bool no_copy_kept; /* FREE_BUFFER: no fd or mapping of it is left here */
                } object; /* FREE/EXPORT_BUFFER, DESTROY/SET/RESET_EVENT, FREE_CODE_OBJECT */
                struct {
                        bool auto_reset;
                } create_event;
                struct {
                        ClientWaitEntry *entries; /* the caller's: rewritten on a reconnect */
                        size_t n_entries;
                        bool wait_all;
                        uint32_t timeout_ms;
                } wait_events;
                struct {
                        const ClientJob *jobs;
                        size_t n_jobs;
                } submit;
                struct {
                        uint64_t session_id;
                        const char *reason; /* may be NULL */
                } terminate_session;
                struct {
                        uint64_t after_id;
                } list_sessions;
        };
} ClientRequest;

/* Packs into a malloc'd buffer. -EMSGSIZE if larger than CLIENT_MAX_MESSAGE_SIZE. */
int client_request_encode(const ClientRequest *r, void **ret_buf, size_t *ret_len);
const char *client_request_type_name(ClientRequestType type);

typedef enum ClientReplyType {
        CLIENT_REPLY_NONE = 0, /* no body: an error reply */
        CLIENT_REPLY_HELLO,
        CLIENT_REPLY_DEVICE_INFO,
        CLIENT_REPLY_ALLOC_BUFFER,
        CLIENT_REPLY_IMPORT_BUFFER,
        CLIENT_REPLY_EMPTY,
        CLIENT_REPLY_EXPORT_BUFFER,
        CLIENT_REPLY_CREATE_EVENT,
        CLIENT_REPLY_WAIT_EVENTS,
        CLIENT_REPLY_SUBMIT,
        CLIENT_REPLY_QUERY,
        CLIENT_REPLY_STATUS,
        CLIENT_REPLY_JOB_FAILED,
        CLIENT_REPLY_LOAD_CODE_OBJECT,
        CLIENT_REPLY_SESSION_ENDED, /* notification: the daemon ends the session */
        CLIENT_REPLY_OPEN_SUBMIT_RING, /* 2 fds: the ring memfd, the doorbell */
        CLIENT_REPLY_OPEN_FENCE_PAGE,  /* 1 fd: the fence page, a dma-buf */
        CLIENT_REPLY_OPEN_KFD,         /* 1 fd: the KFD relay socket */
        CLIENT_REPLY_LIST_SESSIONS,
        CLIENT_REPLY_OPEN_SESSION_PAGE, /* 2 fds: the session page, its eventfd */
        CLIENT_REPLY_UNKNOWN, /* a body this library does not know (newer daemon) */
} ClientReplyType;

/* The reply a request type expects, how many fds that reply carries at most,
 * and at least (a lazy session's Hello reply carries none). */
ClientReplyType client_request_reply_type(ClientRequestType type);
unsigned client_reply_fds_expected(ClientReplyType type);
unsigned client_reply_fds_required(ClientReplyType type);

typedef struct ClientLimits {
        uint64_t max_buffer_size, max_buffer_bytes;
        uint32_t max_buffers, max_events, max_jobs_in_flight, max_jobs_per_submit;
        uint32_t max_message_size, max_wait_events, max_pending_waits;
        uint64_t max_user_buffer_bytes, max_user_buffers, max_unit_buffer_bytes;
        uint64_t max_user_fds, max_session_fds;
} ClientLimits;

typedef struct ClientKernelArgInfo {
        const char *name; /* points into the reply */
        uint32_t offset, size;
        const char *kind; /* "by_value", "global_buffer", "dynamic_lds", "hidden", or newer */
} ClientKernelArgInfo;

typedef struct ClientKernelInfo {
        const char *name;
        uint32_t kernarg_size, group_segment_size, private_segment_size, max_workgroup_size;
        ClientKernelArgInfo *args; /* owned by the reply */
        size_t n_args;
} ClientKernelInfo;

/* StatusReply.contexts (proto ContextInfo); strings point into the message. */
typedef struct ClientContextInfo {
        uint64_t id;
        const char *kind;
        bool live;
        uint32_t users, jobs_in_flight, losses;
        uint64_t memory_bytes, mapped_bytes;
        uint32_t pid;
        uint32_t gpu;
} ClientContextInfo;

/* StatusReply.gpus (proto GpuStatus); strings point into the message. */
typedef struct ClientGpuStatus {
        uint32_t index, gpu_id, cu_count, jobs_in_flight, sessions, gpu_buffers;
        const char *gfx_name, *name, *node, *node_reason;
        uint64_t vram_size, jobs_completed, jobs_failed;
} ClientGpuStatus;

/* OpenKfdReply.topology: paths checked by the decoder (client-wire.c:
 * relative, at most CLIENT_MAX_TOPOLOGY_PATH bytes of [A-Za-z0-9_.-] and "/",
 * no empty, "." or ".." component). */
#define CLIENT_MAX_TOPOLOGY_FILES 256u
#define CLIENT_MAX_TOPOLOGY_PATH 255u
#define CLIENT_MAX_TOPOLOGY_CONTENT 4096u
typedef struct ClientTopologyFile {
        const char *path;
        const uint8_t *content;
        size_t size;
} ClientTopologyFile;

typedef struct ClientReply {
        uint64_t id;
        int error;           /* positive errno or 0 */
        const char *message; /* never NULL; "" if none */
        ClientReplyType type;
        union {
                struct {
                        uint32_t protocol_version;
                        const char *daemon_version;
                        const char *const *features;
                        size_t n_features;
                        ClientLimits limits;
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
                        uint32_t gpu; /* ALLOC/IMPORT_BUFFER: the GPU it is on */
                } buffer; /* ALLOC/IMPORT_BUFFER; EXPORT_BUFFER uses size */
                struct {
                        uint64_t handle;
                        uint32_t slot;
                } create_event;
                struct {
                        uint32_t result; /* 0 complete, 1 timeout, 2 fail */
                        ClientWaitEntry *entries; /* owned */
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
                        ClientLimits limits;
                        uint32_t code_objects;
                        uint64_t released_buffer_bytes, user_buffer_bytes, user_buffers, unit_buffer_bytes;
                        uint64_t pooled_buffer_bytes, user_fds, session_fds, context_bytes;
                } query;
                struct {
                        const char *daemon_version, *backend, *gfx_name;
                        uint32_t sessions, gpu_buffers, jobs_in_flight, events, code_objects;
                        uint64_t jobs_completed, jobs_failed, uptime_ns, buffer_bytes;
                        const char *context_mechanism, *context_mechanism_reason;
                        uint32_t max_contexts;
                        ClientContextInfo *contexts; /* owned */
                        size_t n_contexts;
                        ClientGpuStatus *gpus; /* owned */
                        size_t n_gpus;
                } status;
                struct {
                        uint64_t fence;
                        int error;
                        const char *message;
                } job_failed;
                struct {
                        int error; /* positive errno */
                        const char *message;
                        bool reconnect;
                } session_ended;
                struct {
                        uint64_t handle;
                        ClientKernelInfo *kernels; /* owned */
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
                        ClientTopologyFile *files; /* owned; strings and bytes point into the message */
                        size_t n_files;
                        uint32_t render_minor;
                } open_kfd;
                struct {
                        struct kfdb_session_info *sessions; /* owned; at most CLIENT_LIST_SESSIONS_MAX */
                        size_t n_sessions;
                        bool more;
                } list_sessions;
        };
        int fds[CLIENT_MAX_FDS]; /* received with the datagram; -EBADF when taken */
        size_t n_fds;
        void *pb; /* the unpacked message the pointers above point into */
} ClientReply;

/*
 * Decodes one datagram; returns -EMSGSIZE if too long, -EBADMSG if it is not
 * a ServerMessage or a field is impossible (negative error, fence list of a
 * wrong length is left to the caller).
 */
int client_reply_decode(const void *buf, size_t len, ClientReply **ret);
/* Closes the fds still held and frees everything. NULL-safe. Returns NULL. */
ClientReply *client_reply_free(ClientReply *r);

static inline void client_reply_freep(ClientReply **p) {
        if (*p)
                client_reply_free(*p);
}
