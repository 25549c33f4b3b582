/* SPDX-License-Identifier: MIT */
/*
 * The daemon's half of the v1 protocol, requests: one datagram in, one
 * WireRequest out (replies: wire-reply.c). With wire-reply.c the only daemon
 * files that see the protobuf-c generated types. Decoding checks the
 * datagram's length before unpacking, copies every field into the plain
 * structs of wire.h and range-checks it there, so the session and the
 * scheduler only ever see values the protocol allows. Errors name the field ("submit.jobs[3].fill.size:
 * …") and never echo client bytes. The caller owns the WireRequest and releases
 * it with wire_request_done().
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kfdbroker.pb-c.h"
#include "util/macro.h"
#include "util/utf8.h"
#include "wire/wire.h"

typedef Kfdbroker__V1__Request PbRequest;

/*
 * Unpacking a Request allocates every submessage — a Submit of 64 jobs some
 * 200 objects — and frees them all when it has been translated into a
 * WireRequest. They come from an arena on the decoder's stack instead
 * (WIRE_ARENA_SIZE covers the largest Submit the default limits allow); what
 * does not fit comes from malloc. A message that fit is not walked to be
 * freed at all: nothing of it is outside the arena (that walk was 2.7 % of
 * the event loop's time on batched socket submissions).
 */
#define WIRE_ARENA_SIZE (64u * 1024u)

typedef struct Arena {
        uint8_t *buf;
        size_t used;
        size_t n_malloced; /* allocations that did not fit */
} Arena;

static void *arena_alloc(void *userdata, size_t size) {
        Arena *a = userdata;
        size_t need = ALIGN_UP(MAX(size, (size_t) 1), (size_t) 16);

        if (need <= WIRE_ARENA_SIZE - a->used) {
                void *p = a->buf + a->used;
                a->used += need;
                return p;
        }
        a->n_malloced++;
        return malloc(size);
}

static void arena_free(void *userdata, void *p) {
        Arena *a = userdata;

        if (p && ((uint8_t *) p < a->buf || (uint8_t *) p >= a->buf + WIRE_ARENA_SIZE))
                free(p);
}

typedef struct PbRequestArena {
        PbRequest *m;
        ProtobufCAllocator *allocator;
} PbRequestArena;

static void pb_request_freep(PbRequestArena *p) {
        const Arena *a = p->allocator->allocator_data;

        if (p->m && a->n_malloced > 0)
                kfdbroker__v1__request__free_unpacked(p->m, p->allocator);
}

_printf_(3, 4) static int wire_error(char *errbuf, size_t errlen, const char *format, ...) {
        va_list ap;

        if (errbuf && errlen > 0) {
                va_start(ap, format);
                vsnprintf(errbuf, errlen, format, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static const char *const request_type_names[] = {
        [WIRE_REQUEST_HELLO] = "Hello",
        [WIRE_REQUEST_DEVICE_INFO] = "DeviceInfo",
        [WIRE_REQUEST_ALLOC_BUFFER] = "AllocBuffer",
        [WIRE_REQUEST_IMPORT_BUFFER] = "ImportBuffer",
        [WIRE_REQUEST_FREE_BUFFER] = "FreeBuffer",
        [WIRE_REQUEST_EXPORT_BUFFER] = "ExportBuffer",
        [WIRE_REQUEST_CREATE_EVENT] = "CreateEvent",
        [WIRE_REQUEST_DESTROY_EVENT] = "DestroyEvent",
        [WIRE_REQUEST_SET_EVENT] = "SetEvent",
        [WIRE_REQUEST_RESET_EVENT] = "ResetEvent",
        [WIRE_REQUEST_WAIT_EVENTS] = "WaitEvents",
        [WIRE_REQUEST_SUBMIT] = "Submit",
        [WIRE_REQUEST_QUERY] = "Query",
        [WIRE_REQUEST_STATUS] = "Status",
        [WIRE_REQUEST_LOAD_CODE_OBJECT] = "LoadCodeObject",
        [WIRE_REQUEST_FREE_CODE_OBJECT] = "FreeCodeObject",
        [WIRE_REQUEST_OPEN_SUBMIT_RING] = "OpenSubmitRing",
        [WIRE_REQUEST_OPEN_FENCE_PAGE] = "OpenFencePage",
        [WIRE_REQUEST_OPEN_KFD] = "OpenKfd",
        [WIRE_REQUEST_TERMINATE_SESSION] = "TerminateSession",
        [WIRE_REQUEST_LIST_SESSIONS] = "ListSessions",
        [WIRE_REQUEST_OPEN_SESSION_PAGE] = "OpenSessionPage",
};

const char *wire_request_type_name(WireRequestType type) {
        if ((unsigned) type >= ELEMENTSOF(request_type_names) || !request_type_names[type])
                return "Unknown";
        return request_type_names[type];
}

unsigned wire_request_fds_expected(WireRequestType type) {
        return type == WIRE_REQUEST_IMPORT_BUFFER || type == WIRE_REQUEST_LOAD_CODE_OBJECT ? 1 : 0;
}

/* The first unknown field of a message, or 0: what a newer client sent that we do not know. */
static uint32_t first_unknown_field(const ProtobufCMessage *m) {
        return m->n_unknown_fields > 0 ? m->unknown_fields[0].tag : 0;
}

/*
 * A minimal walk over well-formed protobuf bytes (unpack has already accepted
 * them). protobuf-c copies strings up to their first NUL, so an embedded NUL
 * in hello.client_name can only be seen in the raw bytes: this finds every
 * occurrence of field `field` (length-delimited) and calls back with its bytes.
 */
static bool pb_read_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret) {
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
                uint8_t b = *(*p)++;
                v |= (uint64_t) (b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

typedef bool (*pb_field_cb)(const uint8_t *data, size_t len, void *userdata);

/* Returns false if the callback returned false or the bytes are malformed. */
static bool pb_for_each_field(const uint8_t *buf, size_t len, uint32_t field, pb_field_cb cb,
                              void *userdata) {
        const uint8_t *p = buf, *end = buf + len;

        while (p < end) {
                uint64_t key, v;

                if (!pb_read_varint(&p, end, &key))
                        return false;
                switch (key & 7) {
                case 0:
                        if (!pb_read_varint(&p, end, &v))
                                return false;
                        break;
                case 1:
                        if (end - p < 8)
                                return false;
                        p += 8;
                        break;
                case 5:
                        if (end - p < 4)
                                return false;
                        p += 4;
                        break;
                case 2:
                        if (!pb_read_varint(&p, end, &v) || v > (uint64_t) (end - p))
                                return false;
                        if ((key >> 3) == field && !cb(p, (size_t) v, userdata))
                                return false;
                        p += v;
                        break;
                default:
                        return false;
                }
        }
        return true;
}

static bool name_has_nul(const uint8_t *data, size_t len, void *userdata) {
        bool *found = userdata;

        if (memchr(data, 0, len))
                *found = true;
        return true;
}

static bool hello_name_has_nul(const uint8_t *data, size_t len, void *userdata) {
        /* HelloRequest.client_name = 2 */
        return pb_for_each_field(data, len, 2, name_has_nul, userdata);
}

static int decode_hello(const PbRequest *m, const void *buf, size_t len, WireRequest *r,
                        char *errbuf, size_t errlen) {
        const Kfdbroker__V1__HelloRequest *h = m->hello;
        const char *name = h->client_name ?: "";
        size_t n = strlen(name);
        bool nul = false;

        if (h->protocol_version != WIRE_PROTOCOL_VERSION) {
                (void) wire_error(errbuf, errlen,
                                  "hello.protocol_version: unsupported version %" PRIu32 ", this daemon speaks %u",
                                  h->protocol_version, WIRE_PROTOCOL_VERSION);
                return -EPROTONOSUPPORT; /* docs/protocol.md "Session" */
        }
        /* Request.hello = 10 */
        if (!pb_for_each_field(buf, len, 10, hello_name_has_nul, &nul)) {
                if (errbuf && errlen > 0)
                        snprintf(errbuf, errlen, "request: not a valid Request message");
                return -EBADMSG;
        }
        if (nul)
                return wire_error(errbuf, errlen, "hello.client_name: contains a NUL byte");
        if (n > WIRE_CLIENT_NAME_MAX)
                return wire_error(errbuf, errlen,
                                  "hello.client_name: must be at most %u bytes, got %zu",
                                  WIRE_CLIENT_NAME_MAX, n);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) name[i];
                if (c < 0x20 || c == 0x7f)
                        return wire_error(errbuf, errlen,
                                          "hello.client_name: control character 0x%02x at byte %zu",
                                          c, i);
        }
        /* It is shown over D-Bus, which refuses a reply with invalid UTF-8. */
        if (!utf8_is_valid(name))
                return wire_error(errbuf, errlen, "hello.client_name: not valid UTF-8");
        if (h->resume_fence > WIRE_MAX_RESUME_FENCE)
                return wire_error(errbuf, errlen, "hello.resume_fence: %" PRIu64 " is above the limit of 2^62",
                                  (uint64_t) h->resume_fence);
        r->hello.protocol_version = h->protocol_version;
        r->hello.resume_fence = h->resume_fence;
        r->hello.features = h->features;
        if (h->gpu) {
                r->hello.has_gpu = true;
                r->hello.gpu = h->gpu->index;
        }
        memcpy(r->hello.client_name, name, n);
        r->hello.client_name[n] = '\0';
        return 0;
}

static int decode_terminate_session(const PbRequest *m, WireRequest *r, char *errbuf, size_t errlen) {
        const char *reason = m->terminate_session->reason ? m->terminate_session->reason : "";
        size_t len = strlen(reason);

        if (m->terminate_session->session_id == 0)
                return wire_error(errbuf, errlen, "terminate_session.session_id: must not be 0");
        if (len > WIRE_TERMINATE_REASON_MAX)
                return wire_error(errbuf, errlen, "terminate_session.reason: %zu bytes, longer than %u", len,
                                  WIRE_TERMINATE_REASON_MAX);
        r->terminate_session.session_id = m->terminate_session->session_id;
        /* The reason is logged and sent to another client: printable ASCII only. */
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) reason[i];
                r->terminate_session.reason[i] = c < 0x20 || c >= 0x7f ? '?' : (char) c;
        }
        r->terminate_session.reason[len] = 0;
        return 0;
}

static int decode_alloc_buffer(const PbRequest *m, WireRequest *r, char *errbuf, size_t errlen) {
        const Kfdbroker__V1__AllocBufferRequest *a = m->alloc_buffer;

        if (a->size == 0)
                return wire_error(errbuf, errlen, "alloc_buffer.size: must be > 0");
        if (align_up_u64(a->size, PAGE_SIZE_4K) == 0)
                return wire_error(errbuf, errlen,
                                  "alloc_buffer.size: %" PRIu64 " overflows when rounded up to 4 KiB",
                                  a->size);
        if (a->placement != KFDBROKER__V1__PLACEMENT__PLACEMENT_GTT &&
            a->placement != KFDBROKER__V1__PLACEMENT__PLACEMENT_VRAM)
                return wire_error(errbuf, errlen, "alloc_buffer.placement: unknown placement %d",
                                  (int) a->placement);
        if (a->flags != 0)
                return wire_error(errbuf, errlen,
                                  "alloc_buffer.flags: reserved, must be 0, got 0x%" PRIx32, a->flags);
        r->alloc_buffer.size = a->size;
        r->alloc_buffer.placement = a->placement == KFDBROKER__V1__PLACEMENT__PLACEMENT_VRAM
                                            ? WIRE_PLACEMENT_VRAM
                                            : WIRE_PLACEMENT_GTT;
        r->alloc_buffer.flags = a->flags;
        if (a->free_first) {
                if (a->free_first->id == 0)
                        return wire_error(errbuf, errlen, "alloc_buffer.free_first.id: must not be 0");
                r->alloc_buffer.free_first_id = a->free_first->id;
                r->alloc_buffer.free_first_handle = a->free_first->handle;
                r->alloc_buffer.free_first_no_copy_kept = a->free_first->no_copy_kept;
        }
        if (a->gpu) {
                r->alloc_buffer.has_gpu = true;
                r->alloc_buffer.gpu = a->gpu->index;
        }
        return 0;
}

static int decode_wait_events(const PbRequest *m, WireRequest *r, char *errbuf, size_t errlen) {
        const Kfdbroker__V1__WaitEventsRequest *w = m->wait_events;
        _cleanup_free_ WireWaitEntry *entries = NULL;

        if (w->n_events < 1 || w->n_events > WIRE_MAX_WAIT_EVENTS)
                return wire_error(errbuf, errlen,
                                  "wait_events.events: must have 1..%u entries, got %zu",
                                  WIRE_MAX_WAIT_EVENTS, w->n_events);
        entries = calloc(w->n_events, sizeof(*entries));
        if (!entries)
                return -ENOMEM;
        for (size_t i = 0; i < w->n_events; i++) {
                entries[i].handle = w->events[i]->handle;
                entries[i].last_event_age = w->events[i]->last_event_age;
        }
        r->wait_events.entries = TAKE_PTR(entries);
        r->wait_events.n_entries = w->n_events;
        r->wait_events.wait_all = w->wait_all;
        r->wait_events.timeout_ms = w->timeout_ms;
        return 0;
}

/* Size, offsets: the checks a copy or fill range has in common. */
static int check_range(size_t i, const char *kind, const char *off_name, uint64_t off,
                       uint64_t size, char *errbuf, size_t errlen) {
        if (off % 4 != 0)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].%s.%s: must be a multiple of 4, got %" PRIu64,
                                  i, kind, off_name, off);
        if (off > UINT64_MAX - size)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].%s.%s: %" PRIu64 " + size %" PRIu64 " overflows",
                                  i, kind, off_name, off, size);
        return 0;
}

static int check_size(size_t i, const char *kind, uint64_t size, char *errbuf, size_t errlen) {
        if (size == 0)
                return wire_error(errbuf, errlen, "submit.jobs[%zu].%s.size: must be > 0", i, kind);
        if (size % 4 != 0)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].%s.size: must be a multiple of 4, got %" PRIu64,
                                  i, kind, size);
        return 0;
}

static int decode_engine(size_t i, const char *kind, int64_t e, WireEngine *ret, char *errbuf,
                         size_t errlen) {
        switch (e) {
        case KFDBROKER__V1__ENGINE__ENGINE_AUTO:
                *ret = WIRE_ENGINE_AUTO;
                return 0;
        case KFDBROKER__V1__ENGINE__ENGINE_SDMA:
                *ret = WIRE_ENGINE_SDMA;
                return 0;
        case KFDBROKER__V1__ENGINE__ENGINE_COMPUTE:
                *ret = WIRE_ENGINE_COMPUTE;
                return 0;
        default:
                return wire_error(errbuf, errlen, "submit.jobs[%zu].%s.engine: unknown engine %" PRIi64, i,
                                  kind, e);
        }
}

int wire_job_copy(size_t i, uint64_t src_handle, uint64_t src_offset, uint64_t dst_handle,
                  uint64_t dst_offset, uint64_t size, WireJob *out, char *errbuf, size_t errlen) {
        int r;

        r = check_size(i, "copy", size, errbuf, errlen);
        if (r < 0)
                return r;
        r = check_range(i, "copy", "src_offset", src_offset, size, errbuf, errlen);
        if (r < 0)
                return r;
        r = check_range(i, "copy", "dst_offset", dst_offset, size, errbuf, errlen);
        if (r < 0)
                return r;
        out->type = WIRE_JOB_COPY;
        out->copy.src_handle = src_handle;
        out->copy.src_offset = src_offset;
        out->copy.dst_handle = dst_handle;
        out->copy.dst_offset = dst_offset;
        out->copy.size = size;
        return 0;
}

int wire_job_fill(size_t i, uint64_t dst_handle, uint64_t dst_offset, uint64_t size, uint32_t pattern,
                  WireJob *out, char *errbuf, size_t errlen) {
        int r;

        r = check_size(i, "fill", size, errbuf, errlen);
        if (r < 0)
                return r;
        r = check_range(i, "fill", "dst_offset", dst_offset, size, errbuf, errlen);
        if (r < 0)
                return r;
        out->type = WIRE_JOB_FILL;
        out->fill.dst_handle = dst_handle;
        out->fill.dst_offset = dst_offset;
        out->fill.size = size;
        out->fill.pattern = pattern;
        return 0;
}

int wire_job_event(size_t i, WireJobType type, uint64_t handle, int64_t engine, WireJob *out,
                   char *errbuf, size_t errlen) {
        out->type = type;
        out->event.handle = handle;
        return decode_engine(i, type == WIRE_JOB_SIGNAL_EVENT ? "signal_event" : "wait_event", engine,
                             &out->event.engine, errbuf, errlen);
}

/* Kernel names are symbol names: 1..WIRE_KERNEL_NAME_MAX printable ASCII
 * bytes (so that errors may name them). protobuf-c stops a string at its
 * first NUL, but a NUL cannot reach a symbol lookup of ours anyway. */
static int decode_kernel_name(size_t i, const char *name, char *ret, char *errbuf, size_t errlen) {
        size_t n = name ? strlen(name) : 0;

        if (n == 0)
                return wire_error(errbuf, errlen, "submit.jobs[%zu].dispatch.kernel: must not be empty", i);
        if (n > WIRE_KERNEL_NAME_MAX)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].dispatch.kernel: must be at most %u bytes, got %zu",
                                  i, WIRE_KERNEL_NAME_MAX, n);
        for (size_t k = 0; k < n; k++) {
                unsigned char c = (unsigned char) name[k];
                if (c < 0x21 || c > 0x7e)
                        return wire_error(errbuf, errlen,
                                          "submit.jobs[%zu].dispatch.kernel: byte 0x%02x at %zu is not printable ASCII",
                                          i, c, k);
        }
        memcpy(ret, name, n + 1);
        return 0;
}

static int decode_kernel_arg(size_t i, size_t a, const Kfdbroker__V1__KernelArg *p, WireKernelArg *out,
                             char *errbuf, size_t errlen) {
        switch (p->value_case) {
        case KFDBROKER__V1__KERNEL_ARG__VALUE_BYTES:
                if (p->bytes.len == 0 || p->bytes.len > WIRE_DISPATCH_MAX_ARG_BYTES)
                        return wire_error(errbuf, errlen,
                                          "submit.jobs[%zu].dispatch.args[%zu].bytes: must be 1..%u bytes, got %zu",
                                          i, a, WIRE_DISPATCH_MAX_ARG_BYTES, p->bytes.len);
                out->bytes = malloc(p->bytes.len);
                if (!out->bytes)
                        return -ENOMEM;
                memcpy(out->bytes, p->bytes.data, p->bytes.len);
                out->n_bytes = (uint32_t) p->bytes.len;
                out->type = WIRE_ARG_BYTES;
                return 0;
        case KFDBROKER__V1__KERNEL_ARG__VALUE_BUFFER:
                out->type = WIRE_ARG_BUFFER;
                out->handle = p->buffer->handle;
                out->offset = p->buffer->offset;
                return 0;
        case KFDBROKER__V1__KERNEL_ARG__VALUE_LOCAL_SIZE:
                if (p->local_size == 0)
                        return wire_error(errbuf, errlen,
                                          "submit.jobs[%zu].dispatch.args[%zu].local_size: must be > 0", i, a);
                out->type = WIRE_ARG_LOCAL_SIZE;
                out->local_size = p->local_size;
                return 0;
        default:
                return wire_error(errbuf, errlen, "submit.jobs[%zu].dispatch.args[%zu]: no value set", i, a);
        }
}

static int decode_dims(size_t i, const char *what, size_t n, const uint32_t *v, uint32_t ret[3],
                       char *errbuf, size_t errlen) {
        for (size_t d = 0; d < 3; d++) {
                if (d < n && v[d] == 0)
                        return wire_error(errbuf, errlen, "submit.jobs[%zu].dispatch.%s[%zu]: must be >= 1",
                                          i, what, d);
                ret[d] = d < n ? v[d] : 1;
        }
        return 0;
}

static void wire_job_done(WireJob *j) {
        if (j->type != WIRE_JOB_DISPATCH || !j->dispatch.args)
                return;
        for (size_t a = 0; a < j->dispatch.n_args; a++)
                free(j->dispatch.args[a].bytes);
        free(j->dispatch.args);
        j->dispatch.args = NULL;
        j->dispatch.n_args = 0;
}

static int decode_dispatch(size_t i, const Kfdbroker__V1__DispatchJob *p, WireJob *out, char *errbuf,
                           size_t errlen) {
        uint64_t threads = 1, groups = 1;
        int r;

        out->dispatch.code_object = p->code_object;
        r = decode_kernel_name(i, p->kernel, out->dispatch.kernel, errbuf, errlen);
        if (r < 0)
                return r;
        if (p->n_grid < 1 || p->n_grid > 3)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].dispatch.grid: must have 1..3 dimensions, got %zu", i,
                                  p->n_grid);
        if (p->n_block != p->n_grid)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].dispatch.block: must have as many dimensions as grid (%zu), got %zu",
                                  i, p->n_grid, p->n_block);
        out->dispatch.n_dims = (unsigned) p->n_grid;
        r = decode_dims(i, "grid", p->n_grid, p->grid, out->dispatch.grid, errbuf, errlen);
        if (r < 0)
                return r;
        r = decode_dims(i, "block", p->n_block, p->block, out->dispatch.block, errbuf, errlen);
        if (r < 0)
                return r;
        for (unsigned d = 0; d < 3; d++) {
                threads *= out->dispatch.block[d];
                groups *= DIV_ROUND_UP((uint64_t) out->dispatch.grid[d], out->dispatch.block[d]);
        }
        if (threads > WIRE_DISPATCH_MAX_BLOCK)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].dispatch.block: %" PRIu64 " work-items per workgroup, at most %u allowed",
                                  i, threads, WIRE_DISPATCH_MAX_BLOCK);
        if (groups > WIRE_DISPATCH_MAX_WORKGROUPS)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].dispatch.grid: %" PRIu64 " workgroups, at most %u allowed",
                                  i, groups, WIRE_DISPATCH_MAX_WORKGROUPS);
        if (p->n_args > WIRE_DISPATCH_MAX_ARGS)
                return wire_error(errbuf, errlen,
                                  "submit.jobs[%zu].dispatch.args: at most %u arguments, got %zu", i,
                                  WIRE_DISPATCH_MAX_ARGS, p->n_args);
        if (p->n_args > 0) {
                out->dispatch.args = calloc(p->n_args, sizeof(WireKernelArg));
                if (!out->dispatch.args)
                        return -ENOMEM;
        }
        /* n_args counts what is allocated, so wire_job_done() frees a partial list. */
        for (size_t a = 0; a < p->n_args; a++) {
                out->dispatch.n_args = a + 1;
                r = decode_kernel_arg(i, a, p->args[a], &out->dispatch.args[a], errbuf, errlen);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int decode_job_kind(size_t i, const Kfdbroker__V1__Job *j, WireJob *out, char *errbuf,
                           size_t errlen) {
        switch (j->kind_case) {
        case KFDBROKER__V1__JOB__KIND_COPY:
                return wire_job_copy(i, j->copy->src_handle, j->copy->src_offset, j->copy->dst_handle,
                                     j->copy->dst_offset, j->copy->size, out, errbuf, errlen);
        case KFDBROKER__V1__JOB__KIND_FILL:
                return wire_job_fill(i, j->fill->dst_handle, j->fill->dst_offset, j->fill->size,
                                     j->fill->pattern, out, errbuf, errlen);
        case KFDBROKER__V1__JOB__KIND_SIGNAL_EVENT:
                return wire_job_event(i, WIRE_JOB_SIGNAL_EVENT, j->signal_event->handle,
                                      j->signal_event->engine, out, errbuf, errlen);
        case KFDBROKER__V1__JOB__KIND_WAIT_EVENT:
                return wire_job_event(i, WIRE_JOB_WAIT_EVENT, j->wait_event->handle, j->wait_event->engine,
                                      out, errbuf, errlen);
        case KFDBROKER__V1__JOB__KIND_DISPATCH:
                out->type = WIRE_JOB_DISPATCH;
                return decode_dispatch(i, j->dispatch, out, errbuf, errlen);
        default:
                break;
        }

        if (first_unknown_field(&j->base) != 0) {
                if (errbuf && errlen > 0)
                        snprintf(errbuf, errlen, "submit.jobs[%zu]: job kind %" PRIu32 " is not supported",
                                 i, first_unknown_field(&j->base));
                return -EOPNOTSUPP;
        }
        return wire_error(errbuf, errlen, "submit.jobs[%zu]: no job kind set", i);
}

static int decode_job(size_t i, const Kfdbroker__V1__Job *j, WireJob *out, char *errbuf, size_t errlen) {
        int r = decode_job_kind(i, j, out, errbuf, errlen);

        if (r < 0)
                return r;
        /* Range-checked against the GPUs served by the session, which knows them. */
        if (j->gpu) {
                out->has_gpu = true;
                out->gpu = j->gpu->index;
        }
        return 0;
}

static int decode_submit(const PbRequest *m, WireRequest *r, char *errbuf, size_t errlen) {
        const Kfdbroker__V1__SubmitRequest *s = m->submit;
        int k;

        if (s->n_jobs < 1 || s->n_jobs > WIRE_MAX_JOBS)
                return wire_error(errbuf, errlen, "submit.jobs: must have 1..%u jobs, got %zu",
                                  WIRE_MAX_JOBS, s->n_jobs);
        r->submit.jobs = calloc(s->n_jobs, sizeof(WireJob));
        if (!r->submit.jobs)
                return -ENOMEM;
        /* n_jobs counts the jobs decoded so far: wire_request_done() frees what they own. */
        for (size_t i = 0; i < s->n_jobs; i++) {
                r->submit.n_jobs = i + 1;
                k = decode_job(i, s->jobs[i], &r->submit.jobs[i], errbuf, errlen);
                if (k < 0)
                        return k;
        }
        return 0;
}

static int decode_body(const PbRequest *m, const void *buf, size_t len, WireRequest *r,
                       char *errbuf, size_t errlen) {
        switch (m->body_case) {
        case KFDBROKER__V1__REQUEST__BODY_HELLO:
                r->type = WIRE_REQUEST_HELLO;
                return decode_hello(m, buf, len, r, errbuf, errlen);
        case KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO:
                r->type = WIRE_REQUEST_DEVICE_INFO;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER:
                r->type = WIRE_REQUEST_ALLOC_BUFFER;
                return decode_alloc_buffer(m, r, errbuf, errlen);
        case KFDBROKER__V1__REQUEST__BODY_IMPORT_BUFFER:
                r->type = WIRE_REQUEST_IMPORT_BUFFER;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER:
                r->type = WIRE_REQUEST_FREE_BUFFER;
                r->object.handle = m->free_buffer->handle;
                r->object.no_reply = m->free_buffer->no_reply;
                r->object.no_copy_kept = m->free_buffer->no_copy_kept;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_EXPORT_BUFFER:
                r->type = WIRE_REQUEST_EXPORT_BUFFER;
                r->object.handle = m->export_buffer->handle;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT:
                r->type = WIRE_REQUEST_CREATE_EVENT;
                r->create_event.auto_reset = m->create_event->auto_reset;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_DESTROY_EVENT:
                r->type = WIRE_REQUEST_DESTROY_EVENT;
                r->object.handle = m->destroy_event->handle;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_SET_EVENT:
                r->type = WIRE_REQUEST_SET_EVENT;
                r->object.handle = m->set_event->handle;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_RESET_EVENT:
                r->type = WIRE_REQUEST_RESET_EVENT;
                r->object.handle = m->reset_event->handle;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_WAIT_EVENTS:
                r->type = WIRE_REQUEST_WAIT_EVENTS;
                return decode_wait_events(m, r, errbuf, errlen);
        case KFDBROKER__V1__REQUEST__BODY_SUBMIT:
                r->type = WIRE_REQUEST_SUBMIT;
                return decode_submit(m, r, errbuf, errlen);
        case KFDBROKER__V1__REQUEST__BODY_QUERY:
                r->type = WIRE_REQUEST_QUERY;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_STATUS:
                r->type = WIRE_REQUEST_STATUS;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_LOAD_CODE_OBJECT:
                r->type = WIRE_REQUEST_LOAD_CODE_OBJECT;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_FREE_CODE_OBJECT:
                r->type = WIRE_REQUEST_FREE_CODE_OBJECT;
                r->object.handle = m->free_code_object->handle;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_OPEN_SUBMIT_RING:
                r->type = WIRE_REQUEST_OPEN_SUBMIT_RING;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_OPEN_FENCE_PAGE:
                r->type = WIRE_REQUEST_OPEN_FENCE_PAGE;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_OPEN_KFD:
                r->type = WIRE_REQUEST_OPEN_KFD;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_TERMINATE_SESSION:
                r->type = WIRE_REQUEST_TERMINATE_SESSION;
                return decode_terminate_session(m, r, errbuf, errlen);
        case KFDBROKER__V1__REQUEST__BODY_OPEN_SESSION_PAGE:
                r->type = WIRE_REQUEST_OPEN_SESSION_PAGE;
                return 0;
        case KFDBROKER__V1__REQUEST__BODY_LIST_SESSIONS:
                r->type = WIRE_REQUEST_LIST_SESSIONS;
                r->list_sessions.after_id = m->list_sessions->after_id;
                return 0;
        default:
                break;
        }

        if (errbuf && errlen > 0) {
                uint32_t tag = first_unknown_field(&m->base);
                if (tag != 0 && tag != 1)
                        snprintf(errbuf, errlen, "request: body field %" PRIu32 " is not supported",
                                 tag);
                else
                        snprintf(errbuf, errlen, "request: no body set");
        }
        return -EOPNOTSUPP;
}

int wire_request_decode(const void *buf, size_t len, WireRequest *ret, uint64_t *ret_id,
                        char *errbuf, size_t errlen) {
        _Alignas(16) uint8_t arena_buf[WIRE_ARENA_SIZE];
        Arena arena = { .buf = arena_buf };
        ProtobufCAllocator allocator = { .alloc = arena_alloc, .free = arena_free, .allocator_data = &arena };
        _cleanup_(pb_request_freep) PbRequestArena unpacked = { .allocator = &allocator };
        PbRequest *m;
        WireRequest r = {};
        int k;

        if (errbuf && errlen > 0)
                errbuf[0] = '\0';
        if (ret_id)
                *ret_id = 0;
        if (len > WIRE_MAX_MESSAGE_SIZE) {
                if (errbuf && errlen > 0)
                        snprintf(errbuf, errlen, "request: %zu bytes, larger than the limit of %u",
                                 len, WIRE_MAX_MESSAGE_SIZE);
                return -EMSGSIZE;
        }
        if (len > 0 && !buf)
                return -EBADMSG;

        m = unpacked.m = kfdbroker__v1__request__unpack(&allocator, len, buf);
        if (!m) {
                if (errbuf && errlen > 0)
                        snprintf(errbuf, errlen, "request: not a valid Request message");
                return -EBADMSG;
        }
        if (m->id == 0)
                return wire_error(errbuf, errlen, "request.id: must not be 0");
        if (ret_id)
                *ret_id = m->id;

        r.id = m->id;
        k = decode_body(m, buf, len, &r, errbuf, errlen);
        if (k < 0) {
                wire_request_done(&r);
                return k;
        }
        *ret = r;
        return 0;
}

void wire_request_done(WireRequest *r) {
        if (!r)
                return;
        if (r->type == WIRE_REQUEST_WAIT_EVENTS) {
                free(r->wait_events.entries);
                r->wait_events.entries = NULL;
                r->wait_events.n_entries = 0;
        } else if (r->type == WIRE_REQUEST_SUBMIT) {
                for (size_t i = 0; r->submit.jobs && i < r->submit.n_jobs; i++)
                        wire_job_done(&r->submit.jobs[i]);
                free(r->submit.jobs);
                r->submit.jobs = NULL;
                r->submit.n_jobs = 0;
        }
}
