/* SPDX-License-Identifier: MIT */
/*
 * Marshalling between the library's plain request/reply structs and the v1
 * protobuf messages; the only client file that sees protobuf-c types. It does
 * no I/O: client-socket.c moves the bytes and fds, client-session.c decides
 * what a reply means.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client-wire.h"
#include "kfdbroker.h"
#include "kfdbroker.pb-c.h"
#include "macro.h"

typedef Kfdbroker__V1__ServerMessage PbServerMessage;

static const char *const request_type_names[] = {
        [CLIENT_REQUEST_HELLO] = "Hello",
        [CLIENT_REQUEST_DEVICE_INFO] = "DeviceInfo",
        [CLIENT_REQUEST_ALLOC_BUFFER] = "AllocBuffer",
        [CLIENT_REQUEST_IMPORT_BUFFER] = "ImportBuffer",
        [CLIENT_REQUEST_FREE_BUFFER] = "FreeBuffer",
        [CLIENT_REQUEST_EXPORT_BUFFER] = "ExportBuffer",
        [CLIENT_REQUEST_CREATE_EVENT] = "CreateEvent",
        [CLIENT_REQUEST_DESTROY_EVENT] = "DestroyEvent",
        [CLIENT_REQUEST_SET_EVENT] = "SetEvent",
        [CLIENT_REQUEST_RESET_EVENT] = "ResetEvent",
        [CLIENT_REQUEST_WAIT_EVENTS] = "WaitEvents",
        [CLIENT_REQUEST_SUBMIT] = "Submit",
        [CLIENT_REQUEST_QUERY] = "Query",
        [CLIENT_REQUEST_STATUS] = "Status",
        [CLIENT_REQUEST_LOAD_CODE_OBJECT] = "LoadCodeObject",
        [CLIENT_REQUEST_FREE_CODE_OBJECT] = "FreeCodeObject",
        [CLIENT_REQUEST_OPEN_SUBMIT_RING] = "OpenSubmitRing",
        [CLIENT_REQUEST_OPEN_FENCE_PAGE] = "OpenFencePage",
        [CLIENT_REQUEST_OPEN_KFD] = "OpenKfd",
        [CLIENT_REQUEST_TERMINATE_SESSION] = "TerminateSession",
        [CLIENT_REQUEST_LIST_SESSIONS] = "ListSessions",
        [CLIENT_REQUEST_OPEN_SESSION_PAGE] = "OpenSessionPage",
};

const char *client_request_type_name(ClientRequestType type) {
        if ((unsigned) type >= ELEMENTSOF(request_type_names) || !request_type_names[type])
                return "Unknown";
        return request_type_names[type];
}

ClientReplyType client_request_reply_type(ClientRequestType type) {
        switch (type) {
        case CLIENT_REQUEST_HELLO:
                return CLIENT_REPLY_HELLO;
        case CLIENT_REQUEST_DEVICE_INFO:
                return CLIENT_REPLY_DEVICE_INFO;
        case CLIENT_REQUEST_ALLOC_BUFFER:
                return CLIENT_REPLY_ALLOC_BUFFER;
        case CLIENT_REQUEST_IMPORT_BUFFER:
                return CLIENT_REPLY_IMPORT_BUFFER;
        case CLIENT_REQUEST_EXPORT_BUFFER:
                return CLIENT_REPLY_EXPORT_BUFFER;
        case CLIENT_REQUEST_CREATE_EVENT:
                return CLIENT_REPLY_CREATE_EVENT;
        case CLIENT_REQUEST_WAIT_EVENTS:
                return CLIENT_REPLY_WAIT_EVENTS;
        case CLIENT_REQUEST_SUBMIT:
                return CLIENT_REPLY_SUBMIT;
        case CLIENT_REQUEST_QUERY:
                return CLIENT_REPLY_QUERY;
        case CLIENT_REQUEST_STATUS:
                return CLIENT_REPLY_STATUS;
        case CLIENT_REQUEST_LOAD_CODE_OBJECT:
                return CLIENT_REPLY_LOAD_CODE_OBJECT;
        case CLIENT_REQUEST_OPEN_SUBMIT_RING:
                return CLIENT_REPLY_OPEN_SUBMIT_RING;
        case CLIENT_REQUEST_OPEN_FENCE_PAGE:
                return CLIENT_REPLY_OPEN_FENCE_PAGE;
        case CLIENT_REQUEST_OPEN_KFD:
                return CLIENT_REPLY_OPEN_KFD;
        case CLIENT_REQUEST_LIST_SESSIONS:
                return CLIENT_REPLY_LIST_SESSIONS;
        case CLIENT_REQUEST_OPEN_SESSION_PAGE:
                return CLIENT_REPLY_OPEN_SESSION_PAGE;
        case CLIENT_REQUEST_FREE_CODE_OBJECT:
        case CLIENT_REQUEST_FREE_BUFFER:
        case CLIENT_REQUEST_DESTROY_EVENT:
        case CLIENT_REQUEST_SET_EVENT:
        case CLIENT_REQUEST_RESET_EVENT:
        case CLIENT_REQUEST_TERMINATE_SESSION:
                return CLIENT_REPLY_EMPTY;
        }
        return CLIENT_REPLY_UNKNOWN;
}

unsigned client_reply_fds_expected(ClientReplyType type) {
        switch (type) {
        case CLIENT_REPLY_HELLO:
        case CLIENT_REPLY_OPEN_SUBMIT_RING:
        case CLIENT_REPLY_OPEN_SESSION_PAGE:
                return 2;
        case CLIENT_REPLY_ALLOC_BUFFER:
        case CLIENT_REPLY_EXPORT_BUFFER:
        case CLIENT_REPLY_OPEN_FENCE_PAGE:
        case CLIENT_REPLY_OPEN_KFD:
                return 1;
        default:
                return 0;
        }
}

unsigned client_reply_fds_required(ClientReplyType type) {
        /* session_hello() checks a Hello's: none for a lazy session. */
        return type == CLIENT_REPLY_HELLO ? 0 : client_reply_fds_expected(type);
}

/* ---- Requests ---- */

/* Every sub-message a request may need; protobuf-c only reads them while packing. */
typedef struct RequestParts {
        Kfdbroker__V1__HelloRequest hello;
        Kfdbroker__V1__GpuRef gpu_ref;
        Kfdbroker__V1__DeviceInfoRequest device_info;
        Kfdbroker__V1__AllocBufferRequest alloc_buffer;
        Kfdbroker__V1__FreeFirst free_first;
        Kfdbroker__V1__ImportBufferRequest import_buffer;
        Kfdbroker__V1__FreeBufferRequest free_buffer;
        Kfdbroker__V1__ExportBufferRequest export_buffer;
        Kfdbroker__V1__CreateEventRequest create_event;
        Kfdbroker__V1__DestroyEventRequest destroy_event;
        Kfdbroker__V1__SetEventRequest set_event;
        Kfdbroker__V1__ResetEventRequest reset_event;
        Kfdbroker__V1__WaitEventsRequest wait_events;
        Kfdbroker__V1__SubmitRequest submit;
        Kfdbroker__V1__QueryRequest query;
        Kfdbroker__V1__StatusRequest status;
        Kfdbroker__V1__LoadCodeObjectRequest load_code_object;
        Kfdbroker__V1__FreeCodeObjectRequest free_code_object;
        Kfdbroker__V1__OpenSubmitRingRequest open_submit_ring;
        Kfdbroker__V1__OpenFencePageRequest open_fence_page;
        Kfdbroker__V1__OpenSessionPageRequest open_session_page;
        Kfdbroker__V1__OpenKfdRequest open_kfd;
        Kfdbroker__V1__TerminateSessionRequest terminate_session;
        Kfdbroker__V1__ListSessionsRequest list_sessions;
        /* Owned arrays, freed by request_parts_done(). */
        Kfdbroker__V1__WaitEntry *entries;
        Kfdbroker__V1__WaitEntry **entry_ptrs;
        Kfdbroker__V1__Job *jobs;
        Kfdbroker__V1__Job **job_ptrs;
        Kfdbroker__V1__CopyJob *copies;
        Kfdbroker__V1__FillJob *fills;
        Kfdbroker__V1__SignalEventJob *signals;
        Kfdbroker__V1__WaitEventJob *waits;
        Kfdbroker__V1__DispatchJob *dispatches;
        Kfdbroker__V1__GpuRef *job_gpus;     /* Job.gpu, one slot per job */
        Kfdbroker__V1__KernelArg *args;      /* every dispatch's arguments, one after another */
        Kfdbroker__V1__KernelArg **arg_ptrs;
        Kfdbroker__V1__BufferRef *refs;
        size_t next_arg;
} RequestParts;

static void request_parts_done(RequestParts *p) {
        free(p->entries);
        free(p->entry_ptrs);
        free(p->jobs);
        free(p->job_ptrs);
        free(p->copies);
        free(p->fills);
        free(p->signals);
        free(p->waits);
        free(p->dispatches);
        free(p->job_gpus);
        free(p->args);
        free(p->arg_ptrs);
        free(p->refs);
}

static int fill_wait_events(const ClientRequest *r, RequestParts *p, Kfdbroker__V1__Request *m) {
        size_t n = r->wait_events.n_entries;

        kfdbroker__v1__wait_events_request__init(&p->wait_events);
        if (n > 0) {
                if (!r->wait_events.entries)
                        return -EINVAL;
                p->entries = calloc(n, sizeof(*p->entries));
                p->entry_ptrs = calloc(n, sizeof(*p->entry_ptrs));
                if (!p->entries || !p->entry_ptrs)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                kfdbroker__v1__wait_entry__init(&p->entries[i]);
                p->entries[i].handle = r->wait_events.entries[i].handle;
                p->entries[i].last_event_age = r->wait_events.entries[i].last_event_age;
                p->entry_ptrs[i] = &p->entries[i];
        }
        p->wait_events.n_events = n;
        p->wait_events.events = p->entry_ptrs;
        p->wait_events.wait_all = r->wait_events.wait_all;
        p->wait_events.timeout_ms = r->wait_events.timeout_ms;
        m->body_case = KFDBROKER__V1__REQUEST__BODY_WAIT_EVENTS;
        m->wait_events = &p->wait_events;
        return 0;
}

static int fill_dispatch(const ClientJob *j, size_t i, RequestParts *p, Kfdbroker__V1__Job *out) {
        Kfdbroker__V1__DispatchJob *d = &p->dispatches[i];
        size_t first = p->next_arg;

        if (j->dispatch.n_dims < 1 || j->dispatch.n_dims > 3 || !j->dispatch.kernel ||
            (j->dispatch.n_args > 0 && !j->dispatch.args))
                return -EINVAL;
        kfdbroker__v1__dispatch_job__init(d);
        d->code_object = j->dispatch.code_object;
        d->kernel = (char *) j->dispatch.kernel;
        d->n_grid = d->n_block = j->dispatch.n_dims;
        d->grid = (uint32_t *) j->dispatch.grid;
        d->block = (uint32_t *) j->dispatch.block;
        for (size_t a = 0; a < j->dispatch.n_args; a++) {
                const ClientKernelArg *ca = &j->dispatch.args[a];
                Kfdbroker__V1__KernelArg *ka = &p->args[p->next_arg];

                kfdbroker__v1__kernel_arg__init(ka);
                switch (ca->type) {
                case CLIENT_ARG_BYTES:
                        ka->value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BYTES;
                        ka->bytes = (ProtobufCBinaryData) { .len = ca->n_bytes, .data = (uint8_t *) ca->bytes };
                        break;
                case CLIENT_ARG_BUFFER:
                        kfdbroker__v1__buffer_ref__init(&p->refs[p->next_arg]);
                        p->refs[p->next_arg].handle = ca->handle;
                        p->refs[p->next_arg].offset = ca->offset;
                        ka->value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BUFFER;
                        ka->buffer = &p->refs[p->next_arg];
                        break;
                case CLIENT_ARG_LOCAL_SIZE:
                        ka->value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_LOCAL_SIZE;
                        ka->local_size = ca->local_size;
                        break;
                default:
                        return -EINVAL;
                }
                p->arg_ptrs[p->next_arg++] = ka;
        }
        d->n_args = j->dispatch.n_args;
        d->args = j->dispatch.n_args > 0 ? &p->arg_ptrs[first] : NULL;
        out->kind_case = KFDBROKER__V1__JOB__KIND_DISPATCH;
        out->dispatch = d;
        return 0;
}

static int fill_job(const ClientJob *j, size_t i, RequestParts *p, Kfdbroker__V1__Job *out) {
        kfdbroker__v1__job__init(out);
        switch (j->type) {
        case CLIENT_JOB_COPY:
                kfdbroker__v1__copy_job__init(&p->copies[i]);
                p->copies[i].src_handle = j->copy.src_handle;
                p->copies[i].src_offset = j->copy.src_offset;
                p->copies[i].dst_handle = j->copy.dst_handle;
                p->copies[i].dst_offset = j->copy.dst_offset;
                p->copies[i].size = j->copy.size;
                out->kind_case = KFDBROKER__V1__JOB__KIND_COPY;
                out->copy = &p->copies[i];
                return 0;
        case CLIENT_JOB_FILL:
                kfdbroker__v1__fill_job__init(&p->fills[i]);
                p->fills[i].dst_handle = j->fill.dst_handle;
                p->fills[i].dst_offset = j->fill.dst_offset;
                p->fills[i].size = j->fill.size;
                p->fills[i].pattern = j->fill.pattern;
                out->kind_case = KFDBROKER__V1__JOB__KIND_FILL;
                out->fill = &p->fills[i];
                return 0;
        case CLIENT_JOB_SIGNAL_EVENT:
                kfdbroker__v1__signal_event_job__init(&p->signals[i]);
                p->signals[i].handle = j->event.handle;
                p->signals[i].engine = (Kfdbroker__V1__Engine) j->event.engine;
                out->kind_case = KFDBROKER__V1__JOB__KIND_SIGNAL_EVENT;
                out->signal_event = &p->signals[i];
                return 0;
        case CLIENT_JOB_WAIT_EVENT:
                kfdbroker__v1__wait_event_job__init(&p->waits[i]);
                p->waits[i].handle = j->event.handle;
                p->waits[i].engine = (Kfdbroker__V1__Engine) j->event.engine;
                out->kind_case = KFDBROKER__V1__JOB__KIND_WAIT_EVENT;
                out->wait_event = &p->waits[i];
                return 0;
        case CLIENT_JOB_DISPATCH:
                return fill_dispatch(j, i, p, out);
        }
        return -EINVAL;
}

static int fill_submit(const ClientRequest *r, RequestParts *p, Kfdbroker__V1__Request *m) {
        size_t n = r->submit.n_jobs, n_args = 0;
        int k;

        kfdbroker__v1__submit_request__init(&p->submit);
        if (n > 0) {
                if (!r->submit.jobs)
                        return -EINVAL;
                /* One slot of each kind per job keeps indexing trivial; batches are small. */
                p->jobs = calloc(n, sizeof(*p->jobs));
                p->job_ptrs = calloc(n, sizeof(*p->job_ptrs));
                p->copies = calloc(n, sizeof(*p->copies));
                p->fills = calloc(n, sizeof(*p->fills));
                p->signals = calloc(n, sizeof(*p->signals));
                p->waits = calloc(n, sizeof(*p->waits));
                p->dispatches = calloc(n, sizeof(*p->dispatches));
                p->job_gpus = calloc(n, sizeof(*p->job_gpus));
                if (!p->jobs || !p->job_ptrs || !p->copies || !p->fills || !p->signals || !p->waits ||
                    !p->dispatches || !p->job_gpus)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (r->submit.jobs[i].type == CLIENT_JOB_DISPATCH)
                        n_args += r->submit.jobs[i].dispatch.n_args;
        if (n_args > 0) {
                p->args = calloc(n_args, sizeof(*p->args));
                p->arg_ptrs = calloc(n_args, sizeof(*p->arg_ptrs));
                p->refs = calloc(n_args, sizeof(*p->refs));
                if (!p->args || !p->arg_ptrs || !p->refs)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                k = fill_job(&r->submit.jobs[i], i, p, &p->jobs[i]);
                if (k < 0)
                        return k;
                if (r->submit.jobs[i].has_gpu) {
                        kfdbroker__v1__gpu_ref__init(&p->job_gpus[i]);
                        p->job_gpus[i].index = r->submit.jobs[i].gpu;
                        p->jobs[i].gpu = &p->job_gpus[i];
                }
                p->job_ptrs[i] = &p->jobs[i];
        }
        p->submit.n_jobs = n;
        p->submit.jobs = p->job_ptrs;
        m->body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        m->submit = &p->submit;
        return 0;
}

static int fill_request(const ClientRequest *r, RequestParts *p, Kfdbroker__V1__Request *m) {
        switch (r->type) {
        case CLIENT_REQUEST_HELLO:
                kfdbroker__v1__hello_request__init(&p->hello);
                p->hello.protocol_version = r->hello.protocol_version;
                p->hello.client_name = (char *) (r->hello.client_name ?: "");
                p->hello.resume_fence = r->hello.resume_fence;
                p->hello.features = r->hello.features;
                if (r->hello.has_gpu) {
                        kfdbroker__v1__gpu_ref__init(&p->gpu_ref);
                        p->gpu_ref.index = r->hello.gpu;
                        p->hello.gpu = &p->gpu_ref;
                }
                m->body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
                m->hello = &p->hello;
                return 0;
        case CLIENT_REQUEST_DEVICE_INFO:
                kfdbroker__v1__device_info_request__init(&p->device_info);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO;
                m->device_info = &p->device_info;
                return 0;
        case CLIENT_REQUEST_ALLOC_BUFFER:
                kfdbroker__v1__alloc_buffer_request__init(&p->alloc_buffer);
                p->alloc_buffer.size = r->alloc_buffer.size;
                p->alloc_buffer.placement = (Kfdbroker__V1__Placement) r->alloc_buffer.placement;
                p->alloc_buffer.flags = r->alloc_buffer.flags;
                if (r->alloc_buffer.free_first_id != 0) {
                        kfdbroker__v1__free_first__init(&p->free_first);
                        p->free_first.id = r->alloc_buffer.free_first_id;
                        p->free_first.handle = r->alloc_buffer.free_first_handle;
                        p->free_first.no_copy_kept = r->alloc_buffer.free_first_no_copy_kept;
                        p->alloc_buffer.free_first = &p->free_first;
                }
                if (r->alloc_buffer.has_gpu) {
                        kfdbroker__v1__gpu_ref__init(&p->gpu_ref);
                        p->gpu_ref.index = r->alloc_buffer.gpu;
                        p->alloc_buffer.gpu = &p->gpu_ref;
                }
                m->body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
                m->alloc_buffer = &p->alloc_buffer;
                return 0;
        case CLIENT_REQUEST_IMPORT_BUFFER:
                kfdbroker__v1__import_buffer_request__init(&p->import_buffer);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_IMPORT_BUFFER;
                m->import_buffer = &p->import_buffer;
                return 0;
        case CLIENT_REQUEST_FREE_BUFFER:
                kfdbroker__v1__free_buffer_request__init(&p->free_buffer);
                p->free_buffer.handle = r->object.handle;
                p->free_buffer.no_reply = r->object.no_reply;
                p->free_buffer.no_copy_kept = r->object.no_copy_kept;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER;
                m->free_buffer = &p->free_buffer;
                return 0;
        case CLIENT_REQUEST_EXPORT_BUFFER:
                kfdbroker__v1__export_buffer_request__init(&p->export_buffer);
                p->export_buffer.handle = r->object.handle;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_EXPORT_BUFFER;
                m->export_buffer = &p->export_buffer;
                return 0;
        case CLIENT_REQUEST_CREATE_EVENT:
                kfdbroker__v1__create_event_request__init(&p->create_event);
                p->create_event.auto_reset = r->create_event.auto_reset;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT;
                m->create_event = &p->create_event;
                return 0;
        case CLIENT_REQUEST_DESTROY_EVENT:
                kfdbroker__v1__destroy_event_request__init(&p->destroy_event);
                p->destroy_event.handle = r->object.handle;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_DESTROY_EVENT;
                m->destroy_event = &p->destroy_event;
                return 0;
        case CLIENT_REQUEST_SET_EVENT:
                kfdbroker__v1__set_event_request__init(&p->set_event);
                p->set_event.handle = r->object.handle;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_SET_EVENT;
                m->set_event = &p->set_event;
                return 0;
        case CLIENT_REQUEST_RESET_EVENT:
                kfdbroker__v1__reset_event_request__init(&p->reset_event);
                p->reset_event.handle = r->object.handle;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_RESET_EVENT;
                m->reset_event = &p->reset_event;
                return 0;
        case CLIENT_REQUEST_WAIT_EVENTS:
                return fill_wait_events(r, p, m);
        case CLIENT_REQUEST_SUBMIT:
                return fill_submit(r, p, m);
        case CLIENT_REQUEST_QUERY:
                kfdbroker__v1__query_request__init(&p->query);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
                m->query = &p->query;
                return 0;
        case CLIENT_REQUEST_STATUS:
                kfdbroker__v1__status_request__init(&p->status);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_STATUS;
                m->status = &p->status;
                return 0;
        case CLIENT_REQUEST_TERMINATE_SESSION:
                kfdbroker__v1__terminate_session_request__init(&p->terminate_session);
                p->terminate_session.session_id = r->terminate_session.session_id;
                /* protobuf-c packs a string field from a non-const pointer; it only reads it. */
                p->terminate_session.reason = (char *) (r->terminate_session.reason ? r->terminate_session.reason : "");
                m->body_case = KFDBROKER__V1__REQUEST__BODY_TERMINATE_SESSION;
                m->terminate_session = &p->terminate_session;
                return 0;
        case CLIENT_REQUEST_LIST_SESSIONS:
                kfdbroker__v1__list_sessions_request__init(&p->list_sessions);
                p->list_sessions.after_id = r->list_sessions.after_id;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_LIST_SESSIONS;
                m->list_sessions = &p->list_sessions;
                return 0;
        case CLIENT_REQUEST_LOAD_CODE_OBJECT:
                kfdbroker__v1__load_code_object_request__init(&p->load_code_object);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_LOAD_CODE_OBJECT;
                m->load_code_object = &p->load_code_object;
                return 0;
        case CLIENT_REQUEST_FREE_CODE_OBJECT:
                kfdbroker__v1__free_code_object_request__init(&p->free_code_object);
                p->free_code_object.handle = r->object.handle;
                m->body_case = KFDBROKER__V1__REQUEST__BODY_FREE_CODE_OBJECT;
                m->free_code_object = &p->free_code_object;
                return 0;
        case CLIENT_REQUEST_OPEN_SUBMIT_RING:
                kfdbroker__v1__open_submit_ring_request__init(&p->open_submit_ring);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_SUBMIT_RING;
                m->open_submit_ring = &p->open_submit_ring;
                return 0;
        case CLIENT_REQUEST_OPEN_FENCE_PAGE:
                kfdbroker__v1__open_fence_page_request__init(&p->open_fence_page);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_FENCE_PAGE;
                m->open_fence_page = &p->open_fence_page;
                return 0;
        case CLIENT_REQUEST_OPEN_SESSION_PAGE:
                kfdbroker__v1__open_session_page_request__init(&p->open_session_page);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_SESSION_PAGE;
                m->open_session_page = &p->open_session_page;
                return 0;
        case CLIENT_REQUEST_OPEN_KFD:
                kfdbroker__v1__open_kfd_request__init(&p->open_kfd);
                m->body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_KFD;
                m->open_kfd = &p->open_kfd;
                return 0;
        }
        return -EINVAL;
}

int client_request_encode(const ClientRequest *r, void **ret_buf, size_t *ret_len) {
        _cleanup_(request_parts_done) RequestParts parts = {};
        Kfdbroker__V1__Request m = KFDBROKER__V1__REQUEST__INIT;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size;
        int k;

        if (!r || !ret_buf || !ret_len || r->id == 0)
                return -EINVAL;
        m.id = r->id;
        k = fill_request(r, &parts, &m);
        if (k < 0)
                return k;
        size = kfdbroker__v1__request__get_packed_size(&m);
        if (size > CLIENT_MAX_MESSAGE_SIZE)
                return -EMSGSIZE;
        buf = malloc(MAX(size, (size_t) 1));
        if (!buf)
                return -ENOMEM;
        if (kfdbroker__v1__request__pack(&m, buf) != size)
                return -EIO;
        *ret_buf = TAKE_PTR(buf);
        *ret_len = size;
        return 0;
}

/* ---- Replies ---- */

static void limits_from_pb(const Kfdbroker__V1__Limits *p, ClientLimits *l) {
        *l = (ClientLimits) {};
        if (!p)
                return;
        l->max_buffer_size = p->max_buffer_size;
        l->max_buffer_bytes = p->max_buffer_bytes;
        l->max_buffers = p->max_buffers;
        l->max_events = p->max_events;
        l->max_jobs_in_flight = p->max_jobs_in_flight;
        l->max_jobs_per_submit = p->max_jobs_per_submit;
        l->max_message_size = p->max_message_size;
        l->max_wait_events = p->max_wait_events;
        l->max_pending_waits = p->max_pending_waits;
        l->max_user_buffer_bytes = p->max_user_buffer_bytes;
        l->max_user_buffers = p->max_user_buffers;
        l->max_unit_buffer_bytes = p->max_unit_buffer_bytes;
        l->max_user_fds = p->max_user_fds;
        l->max_session_fds = p->max_session_fds;
}

static const char *str(const char *s) {
        return s ?: "";
}

static int decode_wait_events(const Kfdbroker__V1__WaitEventsReply *w, ClientReply *r) {
        r->type = CLIENT_REPLY_WAIT_EVENTS;
        r->wait_events.result = (uint32_t) w->result;
        if (w->n_events > 0) {
                r->wait_events.entries = calloc(w->n_events, sizeof(ClientWaitEntry));
                if (!r->wait_events.entries)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < w->n_events; i++) {
                r->wait_events.entries[i].handle = w->events[i]->handle;
                r->wait_events.entries[i].last_event_age = w->events[i]->last_event_age;
        }
        r->wait_events.n_entries = w->n_events;
        return 0;
}

static void kernel_infos_free(ClientKernelInfo *k, size_t n) {
        for (size_t i = 0; k && i < n; i++)
                free(k[i].args);
        free(k);
}

/* Copies a string from the daemon, cut to fit (a NULL one is empty). */
static void copy_cut(char *dst, size_t n, const char *src) {
        size_t len = src ? strnlen(src, n - 1) : 0;

        memcpy(dst, src ? src : "", len);
        dst[len] = 0;
}

static int decode_list_sessions(const Kfdbroker__V1__ListSessionsReply *m, ClientReply *r) {
        r->type = CLIENT_REPLY_LIST_SESSIONS;
        r->list_sessions.more = m->more;
        if (m->n_sessions == 0)
                return 0;
        if (m->n_sessions > CLIENT_LIST_SESSIONS_MAX)
                return -EBADMSG;
        r->list_sessions.sessions = calloc(m->n_sessions, sizeof(kfdb_session_info));
        if (!r->list_sessions.sessions)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_sessions; i++) {
                const Kfdbroker__V1__SessionInfo *w = m->sessions[i];
                kfdb_session_info *s = &r->list_sessions.sessions[i];

                if (!w || m->sessions[i]->n_limits > KFDB_POLICY_LIMITS_MAX)
                        return -EBADMSG;
                *s = (kfdb_session_info) {
                        .id = w->id, .uid = w->uid, .gid = w->gid, .pid = w->pid, .opened_ns = w->opened_ns,
                        .buffers = w->buffers, .events = w->events, .jobs_in_flight = w->jobs_in_flight,
                        .buffer_bytes = w->buffer_bytes, .jobs_submitted = w->jobs_submitted,
                        .jobs_completed = w->jobs_completed, .jobs_failed = w->jobs_failed,
                        .bytes_copied = w->bytes_copied, .bytes_filled = w->bytes_filled,
                        .busy_ns_sdma = w->busy_ns_sdma, .busy_ns_compute = w->busy_ns_compute,
                        .context_bytes = w->context_bytes, .limits_overridden = w->limits_overridden,
                        .n_limits = w->n_limits,
                };
                copy_cut(s->client_name, sizeof(s->client_name), w->client_name);
                copy_cut(s->unit, sizeof(s->unit), w->unit);
                copy_cut(s->user_unit, sizeof(s->user_unit), w->user_unit);
                copy_cut(s->app_id, sizeof(s->app_id), w->app_id);
                copy_cut(s->container, sizeof(s->container), w->container);
                copy_cut(s->container_id, sizeof(s->container_id), w->container_id);
                copy_cut(s->pod_uid, sizeof(s->pod_uid), w->pod_uid);
                copy_cut(s->policy_rules, sizeof(s->policy_rules), w->policy_rules);
                for (size_t k = 0; k < w->n_limits; k++) {
                        if (!w->limits[k])
                                return -EBADMSG;
                        copy_cut(s->limits[k].key, sizeof(s->limits[k].key), w->limits[k]->key);
                        copy_cut(s->limits[k].value, sizeof(s->limits[k].value), w->limits[k]->value);
                        s->limits[k].number = w->limits[k]->number;
                }
        }
        r->list_sessions.n_sessions = m->n_sessions;
        return 0;
}

static int decode_load_code_object(const Kfdbroker__V1__LoadCodeObjectReply *l, ClientReply *r) {
        r->type = CLIENT_REPLY_LOAD_CODE_OBJECT;
        r->load_code_object.handle = l->handle;
        if (l->n_kernels == 0)
                return 0;
        r->load_code_object.kernels = calloc(l->n_kernels, sizeof(ClientKernelInfo));
        if (!r->load_code_object.kernels)
                return -ENOMEM;
        /* n_kernels counts what is filled, so client_reply_free() frees a partial list. */
        for (size_t i = 0; i < l->n_kernels; i++) {
                const Kfdbroker__V1__KernelInfo *k = l->kernels[i];
                ClientKernelInfo *ck = &r->load_code_object.kernels[i];

                r->load_code_object.n_kernels = i + 1;
                *ck = (ClientKernelInfo) { .name = str(k->name),
                                           .kernarg_size = k->kernarg_size,
                                           .group_segment_size = k->group_segment_size,
                                           .private_segment_size = k->private_segment_size,
                                           .max_workgroup_size = k->max_workgroup_size };
                if (k->n_args == 0)
                        continue;
                ck->args = calloc(k->n_args, sizeof(ClientKernelArgInfo));
                if (!ck->args)
                        return -ENOMEM;
                ck->n_args = k->n_args;
                for (size_t a = 0; a < k->n_args; a++) {
                        const Kfdbroker__V1__KernelArgInfo *ai = k->args[a];
                        /* An argument that wraps around the kernarg segment is nonsense. */
                        if (ai->offset > UINT32_MAX - ai->size)
                                return -EBADMSG;
                        ck->args[a] = (ClientKernelArgInfo) { .name = str(ai->name), .offset = ai->offset,
                                                              .size = ai->size, .kind = str(ai->kind) };
                }
        }
        return 0;
}

/* A topology path a client may create below its private directory. */
static bool topology_path_ok(const char *path) {
        size_t n = strlen(path);
        const char *c = path;

        if (n == 0 || n > CLIENT_MAX_TOPOLOGY_PATH)
                return false;
        for (const char *p = path; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                      *p == '_' || *p == '-' || *p == '.' || *p == '/'))
                        return false;
        for (;;) {
                size_t len = strcspn(c, "/");
                if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
                        return false;
                if (!c[len])
                        return true;
                c += len + 1;
        }
}

static int decode_open_kfd(const Kfdbroker__V1__OpenKfdReply *k, ClientReply *r) {
        r->type = CLIENT_REPLY_OPEN_KFD;
        r->open_kfd.render_minor = k->render_minor;
        if (k->n_topology > CLIENT_MAX_TOPOLOGY_FILES)
                return -EBADMSG;
        if (k->n_topology == 0)
                return 0;
        r->open_kfd.files = calloc(k->n_topology, sizeof *r->open_kfd.files);
        if (!r->open_kfd.files)
                return -ENOMEM;
        for (size_t i = 0; i < k->n_topology; i++) {
                const Kfdbroker__V1__TopologyFile *f = k->topology[i];

                if (!topology_path_ok(f->path) || f->content.len > CLIENT_MAX_TOPOLOGY_CONTENT)
                        return -EBADMSG;
                r->open_kfd.files[i] = (ClientTopologyFile) { .path = f->path, .content = f->content.data,
                                                              .size = f->content.len };
        }
        r->open_kfd.n_files = k->n_topology;
        return 0;
}

static int decode_body(const PbServerMessage *m, ClientReply *r) {
        switch (m->body_case) {
        case KFDBROKER__V1__SERVER_MESSAGE__BODY__NOT_SET:
                /* A body from a newer daemon shows up as an unknown field. */
                r->type = m->base.n_unknown_fields > 0 ? CLIENT_REPLY_UNKNOWN : CLIENT_REPLY_NONE;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_HELLO:
                r->type = CLIENT_REPLY_HELLO;
                r->hello.protocol_version = m->hello->protocol_version;
                r->hello.daemon_version = str(m->hello->daemon_version);
                r->hello.features = (const char *const *) m->hello->features;
                r->hello.n_features = m->hello->n_features;
                limits_from_pb(m->hello->limits, &r->hello.limits);
                r->hello.session_id = m->hello->session_id;
                r->hello.session_page_size = m->hello->session_page_size;
                r->hello.gpu = m->hello->gpu;
                r->hello.gpu_count = m->hello->gpu_count;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_DEVICE_INFO: {
                const Kfdbroker__V1__DeviceInfoReply *d = m->device_info;
                r->type = CLIENT_REPLY_DEVICE_INFO;
                r->device_info.backend = str(d->backend);
                r->device_info.gfx_name = str(d->gfx_name);
                r->device_info.name = str(d->name);
                r->device_info.gpu_id = d->gpu_id;
                r->device_info.vendor_id = d->vendor_id;
                r->device_info.device_id = d->device_id;
                r->device_info.cu_count = d->cu_count;
                r->device_info.vram_size = d->vram_size;
                r->device_info.kfd_major = d->kfd_major;
                r->device_info.kfd_minor = d->kfd_minor;
                r->device_info.sdma_queues = d->sdma_queues;
                r->device_info.compute_queues = d->compute_queues;
                r->device_info.node = str(d->node);
                r->device_info.node_reason = str(d->node_reason);
                r->device_info.gpu_index = d->gpu_index;
                r->device_info.gpu_count = d->gpu_count;
                return 0;
        }
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_ALLOC_BUFFER:
                r->type = CLIENT_REPLY_ALLOC_BUFFER;
                r->buffer.handle = m->alloc_buffer->handle;
                r->buffer.size = m->alloc_buffer->size;
                r->buffer.gpu = m->alloc_buffer->gpu;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_IMPORT_BUFFER:
                r->type = CLIENT_REPLY_IMPORT_BUFFER;
                r->buffer.handle = m->import_buffer->handle;
                r->buffer.size = m->import_buffer->size;
                r->buffer.gpu = m->import_buffer->gpu;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_EMPTY:
                r->type = CLIENT_REPLY_EMPTY;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_EXPORT_BUFFER:
                r->type = CLIENT_REPLY_EXPORT_BUFFER;
                r->buffer.size = m->export_buffer->size;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_CREATE_EVENT:
                r->type = CLIENT_REPLY_CREATE_EVENT;
                r->create_event.handle = m->create_event->handle;
                r->create_event.slot = m->create_event->slot;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_WAIT_EVENTS:
                return decode_wait_events(m->wait_events, r);
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_SUBMIT:
                r->type = CLIENT_REPLY_SUBMIT;
                r->submit.fences = m->submit->fences;
                r->submit.n_fences = m->submit->n_fences;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_QUERY: {
                const Kfdbroker__V1__QueryReply *q = m->query;
                r->type = CLIENT_REPLY_QUERY;
                r->query.buffers = q->buffers;
                r->query.buffer_bytes = q->buffer_bytes;
                r->query.events = q->events;
                r->query.jobs_submitted = q->jobs_submitted;
                r->query.jobs_completed = q->jobs_completed;
                r->query.jobs_failed = q->jobs_failed;
                r->query.jobs_in_flight = q->jobs_in_flight;
                r->query.bytes_copied = q->bytes_copied;
                r->query.bytes_filled = q->bytes_filled;
                limits_from_pb(q->limits, &r->query.limits);
                r->query.code_objects = q->code_objects;
                r->query.released_buffer_bytes = q->released_buffer_bytes;
                r->query.user_buffer_bytes = q->user_buffer_bytes;
                r->query.user_buffers = q->user_buffers;
                r->query.unit_buffer_bytes = q->unit_buffer_bytes;
                r->query.pooled_buffer_bytes = q->pooled_buffer_bytes;
                r->query.user_fds = q->user_fds;
                r->query.session_fds = q->session_fds;
                r->query.context_bytes = q->context_bytes;
                return 0;
        }
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_STATUS: {
                const Kfdbroker__V1__StatusReply *s = m->status;
                r->type = CLIENT_REPLY_STATUS;
                r->status.daemon_version = str(s->daemon_version);
                r->status.backend = str(s->backend);
                r->status.gfx_name = str(s->gfx_name);
                r->status.sessions = s->sessions;
                r->status.jobs_completed = s->jobs_completed;
                r->status.jobs_failed = s->jobs_failed;
                r->status.uptime_ns = s->uptime_ns;
                r->status.buffer_bytes = s->buffer_bytes;
                r->status.gpu_buffers = s->gpu_buffers;
                r->status.jobs_in_flight = s->jobs_in_flight;
                r->status.events = s->events;
                r->status.code_objects = s->code_objects;
                r->status.context_mechanism = str(s->context_mechanism);
                r->status.context_mechanism_reason = str(s->context_mechanism_reason);
                r->status.max_contexts = s->max_contexts;
                if (s->n_contexts > 0) {
                        r->status.contexts = calloc(s->n_contexts, sizeof(ClientContextInfo));
                        if (!r->status.contexts)
                                return -ENOMEM;
                        for (size_t i = 0; i < s->n_contexts; i++) {
                                const Kfdbroker__V1__ContextInfo *c = s->contexts[i];
                                r->status.contexts[i] = (ClientContextInfo) {
                                        .id = c->id, .kind = str(c->kind), .live = c->live, .users = c->users,
                                        .jobs_in_flight = c->jobs_in_flight, .losses = c->losses,
                                        .memory_bytes = c->memory_bytes, .mapped_bytes = c->mapped_bytes,
                                        .pid = c->pid, .gpu = c->gpu,
                                };
                        }
                        r->status.n_contexts = s->n_contexts;
                }
                if (s->n_gpus > 0) {
                        r->status.gpus = calloc(s->n_gpus, sizeof(ClientGpuStatus));
                        if (!r->status.gpus)
                                return -ENOMEM;
                        for (size_t i = 0; i < s->n_gpus; i++) {
                                const Kfdbroker__V1__GpuStatus *g = s->gpus[i];
                                r->status.gpus[i] = (ClientGpuStatus) {
                                        .index = g->index, .gpu_id = g->gpu_id, .cu_count = g->cu_count,
                                        .jobs_in_flight = g->jobs_in_flight, .sessions = g->sessions,
                                        .gpu_buffers = g->gpu_buffers, .gfx_name = str(g->gfx_name),
                                        .name = str(g->name), .node = str(g->node),
                                        .node_reason = str(g->node_reason), .vram_size = g->vram_size,
                                        .jobs_completed = g->jobs_completed, .jobs_failed = g->jobs_failed,
                                };
                        }
                        r->status.n_gpus = s->n_gpus;
                }
                return 0;
        }
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_LOAD_CODE_OBJECT:
                return decode_load_code_object(m->load_code_object, r);
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_LIST_SESSIONS:
                return decode_list_sessions(m->list_sessions, r);
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_JOB_FAILED:
                r->type = CLIENT_REPLY_JOB_FAILED;
                r->job_failed.fence = m->job_failed->fence;
                r->job_failed.error = m->job_failed->error;
                r->job_failed.message = str(m->job_failed->message);
                /* A failure without a positive errno is not a failure we can report. */
                if (m->job_failed->error <= 0)
                        return -EBADMSG;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_SESSION_ENDED:
                r->type = CLIENT_REPLY_SESSION_ENDED;
                r->session_ended.error = m->session_ended->error;
                r->session_ended.message = str(m->session_ended->message);
                r->session_ended.reconnect = m->session_ended->reconnect;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SUBMIT_RING:
                r->type = CLIENT_REPLY_OPEN_SUBMIT_RING;
                r->submit_ring.size = m->open_submit_ring->size;
                r->submit_ring.records = m->open_submit_ring->records;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_FENCE_PAGE:
                r->type = CLIENT_REPLY_OPEN_FENCE_PAGE;
                r->fence_page.size = m->open_fence_page->size;
                r->fence_page.slots = m->open_fence_page->slots;
                return 0;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_KFD:
                return decode_open_kfd(m->open_kfd, r);
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SESSION_PAGE:
                r->type = CLIENT_REPLY_OPEN_SESSION_PAGE;
                r->session_page.size = m->open_session_page->size;
                return 0;
        default:
                break;
        }
        r->type = CLIENT_REPLY_UNKNOWN;
        return 0;
}

int client_reply_decode(const void *buf, size_t len, ClientReply **ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        PbServerMessage *m;
        int k;

        if (len > CLIENT_MAX_MESSAGE_SIZE)
                return -EMSGSIZE;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        for (size_t i = 0; i < CLIENT_MAX_FDS; i++)
                r->fds[i] = -EBADF;

        m = kfdbroker__v1__server_message__unpack(NULL, len, buf);
        if (!m)
                return -EBADMSG;
        r->pb = m;
        if (m->error < 0)
                return -EBADMSG;
        r->id = m->id;
        r->error = m->error;
        r->message = str(m->error_message);
        k = decode_body(m, r);
        if (k < 0)
                return k;
        *ret = TAKE_PTR(r);
        return 0;
}

ClientReply *client_reply_free(ClientReply *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_fds && i < CLIENT_MAX_FDS; i++)
                safe_close(r->fds[i]);
        if (r->type == CLIENT_REPLY_WAIT_EVENTS)
                free(r->wait_events.entries);
        else if (r->type == CLIENT_REPLY_LOAD_CODE_OBJECT)
                kernel_infos_free(r->load_code_object.kernels, r->load_code_object.n_kernels);
        else if (r->type == CLIENT_REPLY_STATUS) {
                free(r->status.contexts);
                free(r->status.gpus);
        }
        else if (r->type == CLIENT_REPLY_OPEN_KFD)
                free(r->open_kfd.files);
        else if (r->type == CLIENT_REPLY_LIST_SESSIONS)
                free(r->list_sessions.sessions);
        if (r->pb)
                kfdbroker__v1__server_message__free_unpacked(r->pb, NULL);
        free(r);
        return NULL;
}
