/* SPDX-License-Identifier: MIT */
/*
 * The daemon's half of the v1 protocol, replies: one WireReply (plain C, see
 * wire.h) in, one ServerMessage datagram out. With wire.c (requests) the only
 * daemon files that see the protobuf-c generated types. The caller keeps
 * ownership of everything the WireReply points to; the bytes out are a
 * malloc'd buffer of at most WIRE_MAX_MESSAGE_SIZE.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "kfdbroker.pb-c.h"
#include "util/macro.h"
#include "wire/wire.h"

typedef Kfdbroker__V1__ServerMessage PbServerMessage;

static char *str_or_empty(const char *s) {
        return (char *) (s ?: "");
}

static void limits_to_pb(const WireLimits *l, Kfdbroker__V1__Limits *p) {
        p->max_buffer_size = l->max_buffer_size;
        p->max_buffer_bytes = l->max_buffer_bytes;
        p->max_buffers = l->max_buffers;
        p->max_events = l->max_events;
        p->max_jobs_in_flight = l->max_jobs_in_flight;
        p->max_jobs_per_submit = l->max_jobs_per_submit;
        p->max_message_size = l->max_message_size;
        p->max_wait_events = l->max_wait_events;
        p->max_pending_waits = l->max_pending_waits;
        p->max_user_buffer_bytes = l->max_user_buffer_bytes;
        p->max_user_buffers = l->max_user_buffers;
        p->max_unit_buffer_bytes = l->max_unit_buffer_bytes;
        p->max_user_fds = l->max_user_fds;
        p->max_session_fds = l->max_session_fds;
}

/*
 * Every sub-message a reply may need, on the stack of wire_reply_encode();
 * protobuf-c only reads them while packing.
 */
typedef struct ReplyParts {
        Kfdbroker__V1__Empty empty;
        Kfdbroker__V1__Limits limits;
        Kfdbroker__V1__HelloReply hello;
        Kfdbroker__V1__DeviceInfoReply device_info;
        Kfdbroker__V1__AllocBufferReply alloc_buffer;
        Kfdbroker__V1__ImportBufferReply import_buffer;
        Kfdbroker__V1__ExportBufferReply export_buffer;
        Kfdbroker__V1__CreateEventReply create_event;
        Kfdbroker__V1__WaitEventsReply wait_events;
        Kfdbroker__V1__SubmitReply submit;
        Kfdbroker__V1__QueryReply query;
        Kfdbroker__V1__StatusReply status;
        Kfdbroker__V1__JobFailed job_failed;
        Kfdbroker__V1__SessionEnded session_ended;
        Kfdbroker__V1__LoadCodeObjectReply load_code_object;
        Kfdbroker__V1__OpenSubmitRingReply open_submit_ring;
        Kfdbroker__V1__OpenFencePageReply open_fence_page;
        Kfdbroker__V1__OpenSessionPageReply open_session_page;
        Kfdbroker__V1__OpenKfdReply open_kfd;
        Kfdbroker__V1__ListSessionsReply list_sessions;
        /* Owned temporaries, freed by reply_parts_done(). */
        char **features;
        Kfdbroker__V1__WaitEntry *entries;
        Kfdbroker__V1__WaitEntry **entry_ptrs;
        Kfdbroker__V1__KernelInfo *kernels;
        Kfdbroker__V1__KernelInfo **kernel_ptrs;
        Kfdbroker__V1__KernelArgInfo *arg_infos;
        Kfdbroker__V1__KernelArgInfo **arg_ptrs;
        Kfdbroker__V1__ContextInfo *contexts;
        Kfdbroker__V1__ContextInfo **context_ptrs;
        Kfdbroker__V1__GpuStatus *gpus;
        Kfdbroker__V1__GpuStatus **gpu_ptrs;
        Kfdbroker__V1__TopologyFile *topology;
        Kfdbroker__V1__TopologyFile **topology_ptrs;
        Kfdbroker__V1__SessionInfo *sessions;
        Kfdbroker__V1__SessionInfo **session_ptrs;
        Kfdbroker__V1__PolicyLimit *limit_entries;
        Kfdbroker__V1__PolicyLimit **limit_ptrs;
        char *strings; /* the sessions' strings, cut */
} ReplyParts;

static void reply_parts_done(ReplyParts *p) {
        free(p->topology);
        free(p->topology_ptrs);
        free(p->features);
        free(p->entries);
        free(p->entry_ptrs);
        free(p->kernels);
        free(p->kernel_ptrs);
        free(p->arg_infos);
        free(p->arg_ptrs);
        free(p->contexts);
        free(p->context_ptrs);
        free(p->gpus);
        free(p->gpu_ptrs);
        free(p->sessions);
        free(p->session_ptrs);
        free(p->limit_entries);
        free(p->limit_ptrs);
        free(p->strings);
}

/* The next string of a session, cut to WIRE_SESSION_STRING_MAX bytes, in the
 * reply's string area (room for every one was made). */
static char *cut_string(char **area, const char *s) {
        char *out = *area;
        size_t len = s ? strnlen(s, WIRE_SESSION_STRING_MAX) : 0;

        memcpy(out, s ? s : "", len);
        out[len] = 0;
        *area += len + 1;
        return out;
}

#define SESSION_STRINGS 9

static int fill_list_sessions(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        size_t n = r->list_sessions.n_sessions, n_limits = 0, l = 0;
        const WireSessionInfo *ws = r->list_sessions.sessions;
        char *area;

        if (n > WIRE_LIST_SESSIONS_MAX || (n > 0 && !ws))
                return -EINVAL;
        kfdbroker__v1__list_sessions_reply__init(&p->list_sessions);
        p->list_sessions.more = r->list_sessions.more;
        for (size_t i = 0; i < n; i++)
                n_limits += ws[i].n_limits;
        p->sessions = calloc(MAX(n, (size_t) 1), sizeof(*p->sessions));
        p->session_ptrs = calloc(MAX(n, (size_t) 1), sizeof(*p->session_ptrs));
        p->limit_entries = calloc(MAX(n_limits, (size_t) 1), sizeof(*p->limit_entries));
        p->limit_ptrs = calloc(MAX(n_limits, (size_t) 1), sizeof(*p->limit_ptrs));
        p->strings = malloc(MAX(n, (size_t) 1) * SESSION_STRINGS * (WIRE_SESSION_STRING_MAX + 1));
        if (!p->sessions || !p->session_ptrs || !p->limit_entries || !p->limit_ptrs || !p->strings)
                return -ENOMEM;
        area = p->strings;
        for (size_t i = 0; i < n; i++) {
                const WireSessionInfo *w = &ws[i];
                Kfdbroker__V1__SessionInfo *s = &p->sessions[i];

                if (w->n_limits > 0 && !w->limits)
                        return -EINVAL;
                kfdbroker__v1__session_info__init(s);
                s->id = w->id;
                s->uid = w->uid;
                s->gid = w->gid;
                s->pid = w->pid;
                s->client_name = cut_string(&area, w->client_name);
                s->unit = cut_string(&area, w->unit);
                s->user_unit = cut_string(&area, w->user_unit);
                s->app_id = cut_string(&area, w->app_id);
                s->container = cut_string(&area, w->container);
                s->container_id = cut_string(&area, w->container_id);
                s->pod_uid = cut_string(&area, w->pod_uid);
                s->policy_rules = cut_string(&area, w->policy_rules);
                s->opened_ns = w->opened_ns;
                s->buffers = w->buffers;
                s->buffer_bytes = w->buffer_bytes;
                s->events = w->events;
                s->jobs_in_flight = w->jobs_in_flight;
                s->jobs_submitted = w->jobs_submitted;
                s->jobs_completed = w->jobs_completed;
                s->jobs_failed = w->jobs_failed;
                s->bytes_copied = w->bytes_copied;
                s->bytes_filled = w->bytes_filled;
                s->busy_ns_sdma = w->busy_ns_sdma;
                s->busy_ns_compute = w->busy_ns_compute;
                s->context_bytes = w->context_bytes;
                s->limits_overridden = w->limits_overridden;
                s->gpu = w->gpu;
                /* protobuf-c only reads it while packing. */
                s->busy_ns_by_gpu = (uint64_t *) w->busy_ns_by_gpu;
                s->n_busy_ns_by_gpu = w->n_busy_ns_by_gpu;
                s->limits = &p->limit_ptrs[l];
                s->n_limits = w->n_limits;
                for (size_t k = 0; k < w->n_limits; k++, l++) {
                        Kfdbroker__V1__PolicyLimit *e = &p->limit_entries[l];

                        kfdbroker__v1__policy_limit__init(e);
                        e->key = (char *) str_or_empty(w->limits[k].key);
                        e->value = (char *) w->limits[k].value;
                        e->number = w->limits[k].number;
                        p->limit_ptrs[l] = e;
                }
                p->session_ptrs[i] = s;
        }
        p->list_sessions.n_sessions = n;
        p->list_sessions.sessions = p->session_ptrs;
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_LIST_SESSIONS;
        m->list_sessions = &p->list_sessions;
        return 0;
}

static int fill_hello(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        size_t n = 0;

        kfdbroker__v1__hello_reply__init(&p->hello);
        kfdbroker__v1__limits__init(&p->limits);
        limits_to_pb(&r->hello.limits, &p->limits);
        if (r->hello.features)
                while (r->hello.features[n])
                        n++;
        if (n > 0) {
                p->features = calloc(n, sizeof(char *));
                if (!p->features)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        p->features[i] = (char *) r->hello.features[i];
        }
        p->hello.protocol_version = r->hello.protocol_version;
        p->hello.daemon_version = str_or_empty(r->hello.daemon_version);
        p->hello.n_features = n;
        p->hello.features = p->features;
        p->hello.limits = &p->limits;
        p->hello.session_id = r->hello.session_id;
        p->hello.session_page_size = r->hello.session_page_size;
        p->hello.gpu = r->hello.gpu;
        p->hello.gpu_count = r->hello.gpu_count;
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_HELLO;
        m->hello = &p->hello;
        return 0;
}

static void fill_device_info(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        Kfdbroker__V1__DeviceInfoReply *d = &p->device_info;

        kfdbroker__v1__device_info_reply__init(d);
        d->backend = str_or_empty(r->device_info.backend);
        d->gpu_id = r->device_info.gpu_id;
        d->gfx_name = str_or_empty(r->device_info.gfx_name);
        d->name = str_or_empty(r->device_info.name);
        d->vendor_id = r->device_info.vendor_id;
        d->device_id = r->device_info.device_id;
        d->cu_count = r->device_info.cu_count;
        d->vram_size = r->device_info.vram_size;
        d->kfd_major = r->device_info.kfd_major;
        d->kfd_minor = r->device_info.kfd_minor;
        d->sdma_queues = r->device_info.sdma_queues;
        d->compute_queues = r->device_info.compute_queues;
        d->node = str_or_empty(r->device_info.node);
        d->node_reason = str_or_empty(r->device_info.node_reason);
        d->gpu_index = r->device_info.gpu_index;
        d->gpu_count = r->device_info.gpu_count;
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_DEVICE_INFO;
        m->device_info = d;
}

static int fill_wait_events(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        size_t n = r->wait_events.n_entries;

        kfdbroker__v1__wait_events_reply__init(&p->wait_events);
        if (n > WIRE_MAX_WAIT_EVENTS)
                return -EMSGSIZE;
        if (n > 0 && !r->wait_events.entries)
                return -EINVAL;
        switch (r->wait_events.result) {
        case WIRE_WAIT_COMPLETE:
                p->wait_events.result = KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_COMPLETE;
                break;
        case WIRE_WAIT_TIMEOUT:
                p->wait_events.result = KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_TIMEOUT;
                break;
        case WIRE_WAIT_FAIL:
                p->wait_events.result = KFDBROKER__V1__WAIT_RESULT__WAIT_RESULT_FAIL;
                break;
        default:
                return -EINVAL;
        }
        if (n > 0) {
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
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_WAIT_EVENTS;
        m->wait_events = &p->wait_events;
        return 0;
}

static void fill_query(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        Kfdbroker__V1__QueryReply *q = &p->query;

        kfdbroker__v1__query_reply__init(q);
        kfdbroker__v1__limits__init(&p->limits);
        limits_to_pb(&r->query.limits, &p->limits);
        q->buffers = r->query.buffers;
        q->buffer_bytes = r->query.buffer_bytes;
        q->events = r->query.events;
        q->jobs_submitted = r->query.jobs_submitted;
        q->jobs_completed = r->query.jobs_completed;
        q->jobs_failed = r->query.jobs_failed;
        q->jobs_in_flight = r->query.jobs_in_flight;
        q->bytes_copied = r->query.bytes_copied;
        q->bytes_filled = r->query.bytes_filled;
        q->limits = &p->limits;
        q->code_objects = r->query.code_objects;
        q->released_buffer_bytes = r->query.released_buffer_bytes;
        q->user_buffer_bytes = r->query.user_buffer_bytes;
        q->user_buffers = r->query.user_buffers;
        q->unit_buffer_bytes = r->query.unit_buffer_bytes;
        q->pooled_buffer_bytes = r->query.pooled_buffer_bytes;
        q->user_fds = r->query.user_fds;
        q->session_fds = r->query.session_fds;
        q->context_bytes = r->query.context_bytes;
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_QUERY;
        m->query = q;
}

static int fill_status(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        Kfdbroker__V1__StatusReply *s = &p->status;

        kfdbroker__v1__status_reply__init(s);
        s->daemon_version = str_or_empty(r->status.daemon_version);
        s->backend = str_or_empty(r->status.backend);
        s->gfx_name = str_or_empty(r->status.gfx_name);
        s->sessions = r->status.sessions;
        s->jobs_completed = r->status.jobs_completed;
        s->jobs_failed = r->status.jobs_failed;
        s->uptime_ns = r->status.uptime_ns;
        s->buffer_bytes = r->status.buffer_bytes;
        s->gpu_buffers = r->status.gpu_buffers;
        s->jobs_in_flight = r->status.jobs_in_flight;
        s->events = r->status.events;
        s->code_objects = r->status.code_objects;
        s->context_mechanism = str_or_empty(r->status.context_mechanism);
        s->context_mechanism_reason = str_or_empty(r->status.context_mechanism_reason);
        s->max_contexts = r->status.max_contexts;
        if (r->status.n_contexts > 0) {
                size_t n = r->status.n_contexts;

                if (!r->status.contexts)
                        return -EINVAL;
                p->contexts = calloc(n, sizeof(*p->contexts));
                p->context_ptrs = calloc(n, sizeof(*p->context_ptrs));
                if (!p->contexts || !p->context_ptrs)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        const WireContextInfo *w = &r->status.contexts[i];
                        Kfdbroker__V1__ContextInfo *c = &p->contexts[i];

                        kfdbroker__v1__context_info__init(c);
                        c->id = w->id;
                        c->kind = str_or_empty(w->kind);
                        c->live = w->live;
                        c->users = w->users;
                        c->jobs_in_flight = w->jobs_in_flight;
                        c->memory_bytes = w->memory_bytes;
                        c->mapped_bytes = w->mapped_bytes;
                        c->losses = w->losses;
                        c->pid = w->pid;
                        c->gpu = w->gpu;
                        p->context_ptrs[i] = c;
                }
                s->n_contexts = n;
                s->contexts = p->context_ptrs;
        }
        if (r->status.n_gpus > 0) {
                size_t n = r->status.n_gpus;

                if (!r->status.gpus)
                        return -EINVAL;
                p->gpus = calloc(n, sizeof(*p->gpus));
                p->gpu_ptrs = calloc(n, sizeof(*p->gpu_ptrs));
                if (!p->gpus || !p->gpu_ptrs)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++) {
                        const WireGpuStatus *w = &r->status.gpus[i];
                        Kfdbroker__V1__GpuStatus *g = &p->gpus[i];

                        kfdbroker__v1__gpu_status__init(g);
                        g->index = w->index;
                        g->gfx_name = str_or_empty(w->gfx_name);
                        g->name = str_or_empty(w->name);
                        g->gpu_id = w->gpu_id;
                        g->node = str_or_empty(w->node);
                        g->node_reason = str_or_empty(w->node_reason);
                        g->vram_size = w->vram_size;
                        g->cu_count = w->cu_count;
                        g->jobs_completed = w->jobs_completed;
                        g->jobs_failed = w->jobs_failed;
                        g->jobs_in_flight = w->jobs_in_flight;
                        g->sessions = w->sessions;
                        g->gpu_buffers = w->gpu_buffers;
                        p->gpu_ptrs[i] = g;
                }
                s->n_gpus = n;
                s->gpus = p->gpu_ptrs;
        }
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_STATUS;
        m->status = s;
        return 0;
}

static int fill_open_kfd(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        size_t n = r->open_kfd.n_files;

        if (n > WIRE_MAX_TOPOLOGY_FILES)
                return -EINVAL;
        kfdbroker__v1__open_kfd_reply__init(&p->open_kfd);
        if (n > 0) {
                p->topology = calloc(n, sizeof *p->topology);
                p->topology_ptrs = calloc(n, sizeof *p->topology_ptrs);
                if (!p->topology || !p->topology_ptrs)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                const WireTopologyFile *f = &r->open_kfd.files[i];

                if (strlen(f->path) > WIRE_MAX_TOPOLOGY_PATH || f->size > WIRE_MAX_TOPOLOGY_CONTENT)
                        return -EINVAL;
                kfdbroker__v1__topology_file__init(&p->topology[i]);
                p->topology[i].path = (char *) f->path;
                p->topology[i].content = (ProtobufCBinaryData) { .len = f->size, .data = (uint8_t *) f->content };
                p->topology_ptrs[i] = &p->topology[i];
        }
        p->open_kfd.n_topology = n;
        p->open_kfd.topology = p->topology_ptrs;
        p->open_kfd.render_minor = r->open_kfd.render_minor;
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_KFD;
        m->open_kfd = &p->open_kfd;
        return 0;
}

static int fill_load_code_object(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        size_t n = r->load_code_object.n_kernels, n_args = 0, a = 0;
        const WireKernelInfo *ks = r->load_code_object.kernels;

        if (n > 0 && !ks)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (ks[i].n_args > 0 && !ks[i].args)
                        return -EINVAL;
                if (ks[i].n_args > SIZE_MAX / 2 - n_args)
                        return -EMSGSIZE;
                n_args += ks[i].n_args;
        }
        if (n > 0) {
                p->kernels = calloc(n, sizeof(*p->kernels));
                p->kernel_ptrs = calloc(n, sizeof(*p->kernel_ptrs));
                if (!p->kernels || !p->kernel_ptrs)
                        return -ENOMEM;
        }
        if (n_args > 0) {
                p->arg_infos = calloc(n_args, sizeof(*p->arg_infos));
                p->arg_ptrs = calloc(n_args, sizeof(*p->arg_ptrs));
                if (!p->arg_infos || !p->arg_ptrs)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                Kfdbroker__V1__KernelInfo *k = &p->kernels[i];

                kfdbroker__v1__kernel_info__init(k);
                k->name = str_or_empty(ks[i].name);
                k->kernarg_size = ks[i].kernarg_size;
                k->group_segment_size = ks[i].group_segment_size;
                k->private_segment_size = ks[i].private_segment_size;
                k->max_workgroup_size = ks[i].max_workgroup_size;
                k->n_args = ks[i].n_args;
                k->args = ks[i].n_args > 0 ? &p->arg_ptrs[a] : NULL;
                for (size_t j = 0; j < ks[i].n_args; j++, a++) {
                        Kfdbroker__V1__KernelArgInfo *ai = &p->arg_infos[a];

                        kfdbroker__v1__kernel_arg_info__init(ai);
                        ai->name = str_or_empty(ks[i].args[j].name);
                        ai->offset = ks[i].args[j].offset;
                        ai->size = ks[i].args[j].size;
                        ai->kind = str_or_empty(ks[i].args[j].kind);
                        p->arg_ptrs[a] = ai;
                }
                p->kernel_ptrs[i] = k;
        }
        kfdbroker__v1__load_code_object_reply__init(&p->load_code_object);
        p->load_code_object.handle = r->load_code_object.handle;
        p->load_code_object.n_kernels = n;
        p->load_code_object.kernels = p->kernel_ptrs;
        m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_LOAD_CODE_OBJECT;
        m->load_code_object = &p->load_code_object;
        return 0;
}

static int fill_body(const WireReply *r, ReplyParts *p, PbServerMessage *m) {
        switch (r->type) {
        case WIRE_REPLY_ERROR:
                return 0;
        case WIRE_REPLY_HELLO:
                return fill_hello(r, p, m);
        case WIRE_REPLY_DEVICE_INFO:
                fill_device_info(r, p, m);
                return 0;
        case WIRE_REPLY_ALLOC_BUFFER:
                kfdbroker__v1__alloc_buffer_reply__init(&p->alloc_buffer);
                p->alloc_buffer.handle = r->buffer.handle;
                p->alloc_buffer.size = r->buffer.size;
                p->alloc_buffer.gpu = r->buffer.gpu;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_ALLOC_BUFFER;
                m->alloc_buffer = &p->alloc_buffer;
                return 0;
        case WIRE_REPLY_IMPORT_BUFFER:
                kfdbroker__v1__import_buffer_reply__init(&p->import_buffer);
                p->import_buffer.handle = r->buffer.handle;
                p->import_buffer.size = r->buffer.size;
                p->import_buffer.gpu = r->buffer.gpu;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_IMPORT_BUFFER;
                m->import_buffer = &p->import_buffer;
                return 0;
        case WIRE_REPLY_EMPTY:
                kfdbroker__v1__empty__init(&p->empty);
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_EMPTY;
                m->empty = &p->empty;
                return 0;
        case WIRE_REPLY_EXPORT_BUFFER:
                kfdbroker__v1__export_buffer_reply__init(&p->export_buffer);
                p->export_buffer.size = r->buffer.size;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_EXPORT_BUFFER;
                m->export_buffer = &p->export_buffer;
                return 0;
        case WIRE_REPLY_CREATE_EVENT:
                kfdbroker__v1__create_event_reply__init(&p->create_event);
                p->create_event.handle = r->create_event.handle;
                p->create_event.slot = r->create_event.slot;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_CREATE_EVENT;
                m->create_event = &p->create_event;
                return 0;
        case WIRE_REPLY_WAIT_EVENTS:
                return fill_wait_events(r, p, m);
        case WIRE_REPLY_SUBMIT:
                if (r->submit.n_fences > 0 && !r->submit.fences)
                        return -EINVAL;
                kfdbroker__v1__submit_reply__init(&p->submit);
                p->submit.n_fences = r->submit.n_fences;
                p->submit.fences = (uint64_t *) r->submit.fences;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_SUBMIT;
                m->submit = &p->submit;
                return 0;
        case WIRE_REPLY_QUERY:
                fill_query(r, p, m);
                return 0;
        case WIRE_REPLY_STATUS:
                return fill_status(r, p, m);
        case WIRE_REPLY_JOB_FAILED:
                kfdbroker__v1__job_failed__init(&p->job_failed);
                p->job_failed.fence = r->job_failed.fence;
                p->job_failed.error = r->job_failed.error;
                p->job_failed.message = str_or_empty(r->job_failed.message);
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_JOB_FAILED;
                m->job_failed = &p->job_failed;
                return 0;
        case WIRE_REPLY_SESSION_ENDED:
                kfdbroker__v1__session_ended__init(&p->session_ended);
                p->session_ended.error = r->session_ended.error;
                p->session_ended.message = str_or_empty(r->session_ended.message);
                p->session_ended.reconnect = r->session_ended.reconnect;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_SESSION_ENDED;
                m->session_ended = &p->session_ended;
                return 0;
        case WIRE_REPLY_LOAD_CODE_OBJECT:
                return fill_load_code_object(r, p, m);
        case WIRE_REPLY_OPEN_SUBMIT_RING:
                kfdbroker__v1__open_submit_ring_reply__init(&p->open_submit_ring);
                p->open_submit_ring.size = r->submit_ring.size;
                p->open_submit_ring.records = r->submit_ring.records;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SUBMIT_RING;
                m->open_submit_ring = &p->open_submit_ring;
                return 0;
        case WIRE_REPLY_OPEN_KFD:
                return fill_open_kfd(r, p, m);
        case WIRE_REPLY_LIST_SESSIONS:
                return fill_list_sessions(r, p, m);
        case WIRE_REPLY_OPEN_SESSION_PAGE:
                kfdbroker__v1__open_session_page_reply__init(&p->open_session_page);
                p->open_session_page.size = r->session_page.size;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SESSION_PAGE;
                m->open_session_page = &p->open_session_page;
                return 0;
        case WIRE_REPLY_OPEN_FENCE_PAGE:
                kfdbroker__v1__open_fence_page_reply__init(&p->open_fence_page);
                p->open_fence_page.size = r->fence_page.size;
                p->open_fence_page.slots = r->fence_page.slots;
                m->body_case = KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_FENCE_PAGE;
                m->open_fence_page = &p->open_fence_page;
                return 0;
        }
        return -EINVAL;
}

int wire_reply_encode(const WireReply *r, void **ret_buf, size_t *ret_len) {
        _cleanup_(reply_parts_done) ReplyParts parts = {};
        PbServerMessage m = KFDBROKER__V1__SERVER_MESSAGE__INIT;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size;
        int k;

        if (!r || !ret_buf || !ret_len)
                return -EINVAL;
        if (r->error < 0)
                return -EINVAL;

        m.id = r->id;
        m.error = r->error;
        m.error_message = str_or_empty(r->message);
        k = fill_body(r, &parts, &m);
        if (k < 0)
                return k;

        size = kfdbroker__v1__server_message__get_packed_size(&m);
        if (size > WIRE_MAX_MESSAGE_SIZE)
                return -EMSGSIZE;
        /* malloc(0) may return NULL; an all-default message packs to 0 bytes. */
        buf = malloc(MAX(size, (size_t) 1));
        if (!buf)
                return -ENOMEM;
        if (kfdbroker__v1__server_message__pack(&m, buf) != size)
                return -EIO;
        *ret_buf = TAKE_PTR(buf);
        *ret_len = size;
        return 0;
}

void wire_refuse(int fd, int error, const char *message) {
        _cleanup_free_ void *buf = NULL;
        uint8_t sink[256];
        size_t len;

        if (wire_reply_encode(&(WireReply) { .error = error, .message = message }, &buf, &len) == 0)
                (void) send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void) shutdown(fd, SHUT_RD);
        /* Bounded: after SHUT_RD nothing more arrives. */
        for (int i = 0; i < 64 && recv(fd, sink, sizeof sink, MSG_DONTWAIT | MSG_TRUNC) > 0; i++)
                ;
}
