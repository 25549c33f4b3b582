/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the daemon's request decoder (daemon/wire/wire.c), the first
 * code that touches a client's bytes. Besides "no crash, no leak, no UB"
 * (ASan/UBSan), it checks the decoder's promises: only the documented errnos,
 * a message for every rejection the client is told about, and every field of
 * an accepted request inside the protocol's ranges. An error reply built
 * from the message must encode.
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files given on its command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-wire: broken promise: %s\n", what);
                abort();
        }
}

static void check_dispatch(const WireJob *j) {
        size_t n = strlen(j->dispatch.kernel);
        uint64_t threads = 1;

        check(n >= 1 && n <= WIRE_KERNEL_NAME_MAX, "kernel name length");
        for (size_t i = 0; i < n; i++)
                check(j->dispatch.kernel[i] > 0x20 && j->dispatch.kernel[i] < 0x7f, "kernel name byte");
        check(j->dispatch.n_dims >= 1 && j->dispatch.n_dims <= 3, "dispatch dimensions");
        for (unsigned d = 0; d < 3; d++) {
                check(j->dispatch.grid[d] >= 1 && j->dispatch.block[d] >= 1, "grid/block zero");
                check(d < j->dispatch.n_dims || (j->dispatch.grid[d] == 1 && j->dispatch.block[d] == 1),
                      "unused dimension not 1");
                threads *= j->dispatch.block[d];
        }
        check(threads <= WIRE_DISPATCH_MAX_BLOCK, "workgroup size");
        check(j->dispatch.n_args <= WIRE_DISPATCH_MAX_ARGS, "argument count");
        for (size_t a = 0; a < j->dispatch.n_args; a++) {
                const WireKernelArg *k = &j->dispatch.args[a];
                switch (k->type) {
                case WIRE_ARG_BYTES:
                        check(k->n_bytes >= 1 && k->n_bytes <= WIRE_DISPATCH_MAX_ARG_BYTES && k->bytes,
                              "argument bytes");
                        (void) *(volatile uint8_t *) &k->bytes[k->n_bytes - 1];
                        break;
                case WIRE_ARG_BUFFER:
                        break;
                case WIRE_ARG_LOCAL_SIZE:
                        check(k->local_size >= 1, "local size");
                        break;
                default:
                        check(false, "argument type");
                }
        }
}

static void check_request(const WireRequest *r) {
        check(r->id != 0, "accepted id 0");
        switch (r->type) {
        case WIRE_REQUEST_HELLO:
                check(r->hello.protocol_version == WIRE_PROTOCOL_VERSION, "hello version");
                check(strlen(r->hello.client_name) <= WIRE_CLIENT_NAME_MAX, "client_name length");
                check(r->hello.resume_fence <= WIRE_MAX_RESUME_FENCE, "resume_fence range");
                for (const char *p = r->hello.client_name; *p; p++)
                        check((unsigned char) *p >= 0x20 && *p != 0x7f, "client_name control char");
                return;
        case WIRE_REQUEST_ALLOC_BUFFER:
                check(r->alloc_buffer.size > 0, "alloc size 0");
                check(r->alloc_buffer.placement == WIRE_PLACEMENT_GTT ||
                              r->alloc_buffer.placement == WIRE_PLACEMENT_VRAM,
                      "placement");
                check(r->alloc_buffer.flags == 0, "alloc flags");
                return;
        case WIRE_REQUEST_WAIT_EVENTS:
                check(r->wait_events.n_entries >= 1 && r->wait_events.n_entries <= WIRE_MAX_WAIT_EVENTS,
                      "wait entry count");
                for (size_t i = 0; i < r->wait_events.n_entries; i++)
                        (void) *(volatile uint64_t *) &r->wait_events.entries[i].last_event_age;
                return;
        case WIRE_REQUEST_SUBMIT:
                check(r->submit.n_jobs >= 1 && r->submit.n_jobs <= WIRE_MAX_JOBS, "job count");
                for (size_t i = 0; i < r->submit.n_jobs; i++) {
                        const WireJob *j = &r->submit.jobs[i];
                        switch (j->type) {
                        case WIRE_JOB_COPY:
                                check(j->copy.size > 0 && j->copy.size % 4 == 0, "copy size");
                                check(j->copy.src_offset % 4 == 0 && j->copy.dst_offset % 4 == 0,
                                      "copy offsets");
                                check(j->copy.src_offset <= UINT64_MAX - j->copy.size &&
                                              j->copy.dst_offset <= UINT64_MAX - j->copy.size,
                                      "copy overflow");
                                break;
                        case WIRE_JOB_FILL:
                                check(j->fill.size > 0 && j->fill.size % 4 == 0, "fill size");
                                check(j->fill.dst_offset % 4 == 0, "fill offset");
                                check(j->fill.dst_offset <= UINT64_MAX - j->fill.size, "fill overflow");
                                break;
                        case WIRE_JOB_SIGNAL_EVENT:
                        case WIRE_JOB_WAIT_EVENT:
                                check(j->event.engine == WIRE_ENGINE_AUTO || j->event.engine == WIRE_ENGINE_SDMA ||
                                              j->event.engine == WIRE_ENGINE_COMPUTE,
                                      "event engine");
                                break;
                        case WIRE_JOB_DISPATCH:
                                check_dispatch(j);
                                break;
                        default:
                                check(false, "job type");
                        }
                }
                return;
        case WIRE_REQUEST_TERMINATE_SESSION: {
                const char *reason = r->terminate_session.reason;
                size_t len = strnlen(reason, sizeof(r->terminate_session.reason));

                check(r->terminate_session.session_id != 0, "terminate_session.session_id 0");
                check(len <= WIRE_TERMINATE_REASON_MAX, "terminate_session.reason unterminated");
                for (size_t i = 0; i < len; i++)
                        check(reason[i] >= 0x20 && reason[i] < 0x7f, "terminate_session.reason not printable");
                return;
        }
        /* Every other type, named one by one and no default: a type added
         * to WireRequestType without a case here fails the build (-Wswitch),
         * instead of the fuzzer reporting every valid request of it as a
         * broken promise, as it did for the two below once they came. */
        case WIRE_REQUEST_DEVICE_INFO:
        case WIRE_REQUEST_IMPORT_BUFFER:
        case WIRE_REQUEST_FREE_BUFFER:
        case WIRE_REQUEST_EXPORT_BUFFER:
        case WIRE_REQUEST_CREATE_EVENT:
        case WIRE_REQUEST_DESTROY_EVENT:
        case WIRE_REQUEST_SET_EVENT:
        case WIRE_REQUEST_RESET_EVENT:
        case WIRE_REQUEST_QUERY:
        case WIRE_REQUEST_STATUS:
        case WIRE_REQUEST_LOAD_CODE_OBJECT:
        case WIRE_REQUEST_FREE_CODE_OBJECT:
        case WIRE_REQUEST_OPEN_SUBMIT_RING:
        case WIRE_REQUEST_OPEN_FENCE_PAGE:
        case WIRE_REQUEST_OPEN_KFD:
        case WIRE_REQUEST_LIST_SESSIONS:
        case WIRE_REQUEST_OPEN_SESSION_PAGE:
                check(strcmp(wire_request_type_name(r->type), "Unknown") != 0, "request type without a name");
                return;
        }
        check(false, "request type");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        WireRequest r = {};
        uint64_t id = 0;
        char err[256];
        int k;

        k = wire_request_decode(data, size, &r, &id, err, sizeof(err));
        if (k == 0) {
                check_request(&r);
                wire_request_done(&r);
                return 0;
        }
        check(k == -EMSGSIZE || k == -EBADMSG || k == -EOPNOTSUPP || k == -EINVAL || k == -EPROTONOSUPPORT ||
                      k == -ENOMEM,
              "undocumented errno");
        if (k == -EINVAL || k == -EOPNOTSUPP || k == -EPROTONOSUPPORT) {
                WireReply reply = { .id = id, .error = -k, .message = err, .type = WIRE_REPLY_ERROR };
                void *buf = NULL;
                size_t len = 0;

                check(err[0] != '\0' && memchr(err, 0, sizeof(err)), "rejection without a message");
                check(wire_reply_encode(&reply, &buf, &len) == 0, "error reply does not encode");
                free(buf);
        }
        return 0;
}
