/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpora of the fuzz targets: one valid Request of every
 * type (plus a few rejected ones) into the first directory, one
 * ServerMessage of every type into the second. Run at build time; the
 * fuzz-*-corpus tests replay the result, and a libFuzzer run starts from it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kfdbroker.pb-c.h"
#include "wire/wire.h"

static int write_seed(const char *dir, const char *name, const void *buf, size_t len) {
        char path[4096];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "wb");
        if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -1;
        }
        return 0;
}

static int write_request(const char *dir, const char *name, const Kfdbroker__V1__Request *m) {
        size_t len = kfdbroker__v1__request__get_packed_size(m);
        uint8_t *buf = malloc(len + 1);
        int r;

        if (!buf)
                return -1;
        kfdbroker__v1__request__pack(m, buf);
        r = write_seed(dir, name, buf, len);
        free(buf);
        return r;
}

static int write_reply(const char *dir, const char *name, const WireReply *reply) {
        void *buf = NULL;
        size_t len = 0;
        int r;

        if (wire_reply_encode(reply, &buf, &len) < 0)
                return -1;
        r = write_seed(dir, name, buf, len);
        free(buf);
        return r;
}

static int requests(const char *dir) {
        Kfdbroker__V1__Request m = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest hello = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest alloc = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__FreeBufferRequest free_buffer = KFDBROKER__V1__FREE_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__CreateEventRequest create = KFDBROKER__V1__CREATE_EVENT_REQUEST__INIT;
        Kfdbroker__V1__WaitEntry we[2] = { KFDBROKER__V1__WAIT_ENTRY__INIT, KFDBROKER__V1__WAIT_ENTRY__INIT };
        Kfdbroker__V1__WaitEntry *wep[2] = { &we[0], &we[1] };
        Kfdbroker__V1__WaitEventsRequest wait = KFDBROKER__V1__WAIT_EVENTS_REQUEST__INIT;
        Kfdbroker__V1__CopyJob copy = KFDBROKER__V1__COPY_JOB__INIT;
        Kfdbroker__V1__FillJob fill = KFDBROKER__V1__FILL_JOB__INIT;
        Kfdbroker__V1__SignalEventJob sig = KFDBROKER__V1__SIGNAL_EVENT_JOB__INIT;
        Kfdbroker__V1__WaitEventJob wj = KFDBROKER__V1__WAIT_EVENT_JOB__INIT;
        Kfdbroker__V1__Job jobs[4] = { KFDBROKER__V1__JOB__INIT, KFDBROKER__V1__JOB__INIT,
                                       KFDBROKER__V1__JOB__INIT, KFDBROKER__V1__JOB__INIT };
        Kfdbroker__V1__Job *jp[4] = { &jobs[0], &jobs[1], &jobs[2], &jobs[3] };
        Kfdbroker__V1__SubmitRequest submit = KFDBROKER__V1__SUBMIT_REQUEST__INIT;
        Kfdbroker__V1__QueryRequest query = KFDBROKER__V1__QUERY_REQUEST__INIT;
        Kfdbroker__V1__StatusRequest status = KFDBROKER__V1__STATUS_REQUEST__INIT;
        Kfdbroker__V1__DeviceInfoRequest dev = KFDBROKER__V1__DEVICE_INFO_REQUEST__INIT;
        Kfdbroker__V1__ImportBufferRequest import = KFDBROKER__V1__IMPORT_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__LoadCodeObjectRequest load = KFDBROKER__V1__LOAD_CODE_OBJECT_REQUEST__INIT;
        Kfdbroker__V1__FreeCodeObjectRequest free_co = KFDBROKER__V1__FREE_CODE_OBJECT_REQUEST__INIT;
        Kfdbroker__V1__DispatchJob dispatch = KFDBROKER__V1__DISPATCH_JOB__INIT;
        Kfdbroker__V1__KernelArg ka[4] = { KFDBROKER__V1__KERNEL_ARG__INIT, KFDBROKER__V1__KERNEL_ARG__INIT,
                                           KFDBROKER__V1__KERNEL_ARG__INIT, KFDBROKER__V1__KERNEL_ARG__INIT };
        Kfdbroker__V1__KernelArg *kap[4] = { &ka[0], &ka[1], &ka[2], &ka[3] };
        Kfdbroker__V1__BufferRef refs[2] = { KFDBROKER__V1__BUFFER_REF__INIT, KFDBROKER__V1__BUFFER_REF__INIT };
        uint32_t grid[2] = { 1000, 3 }, block[2] = { 64, 2 };
        float alpha = 2.0f;
        uint32_t n = 1000;
        int r = 0;

        m.id = 1;
        hello.protocol_version = 1;
        hello.client_name = (char *) "seed";
        m.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        m.hello = &hello;
        r |= write_request(dir, "hello", &m);

        alloc.size = 64u << 20;
        alloc.placement = KFDBROKER__V1__PLACEMENT__PLACEMENT_VRAM;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        m.alloc_buffer = &alloc;
        r |= write_request(dir, "alloc-buffer", &m);
        alloc.flags = 3;
        r |= write_request(dir, "alloc-buffer-bad-flags", &m);

        free_buffer.handle = 0x100000001ull;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER;
        m.free_buffer = &free_buffer;
        r |= write_request(dir, "free-buffer", &m);

        create.auto_reset = 1;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT;
        m.create_event = &create;
        r |= write_request(dir, "create-event", &m);

        we[0].handle = 5;
        we[1].handle = 6;
        we[1].last_event_age = 3;
        wait.n_events = 2;
        wait.events = wep;
        wait.wait_all = 1;
        wait.timeout_ms = 1000;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_WAIT_EVENTS;
        m.wait_events = &wait;
        r |= write_request(dir, "wait-events", &m);

        copy.src_handle = 1;
        copy.dst_handle = 2;
        copy.dst_offset = 4096;
        copy.size = 8192;
        fill.dst_handle = 1;
        fill.size = 4096;
        fill.pattern = 0xdeadbeef;
        sig.handle = 5;
        wj.handle = 6;
        jobs[0].kind_case = KFDBROKER__V1__JOB__KIND_FILL;
        jobs[0].fill = &fill;
        jobs[1].kind_case = KFDBROKER__V1__JOB__KIND_COPY;
        jobs[1].copy = &copy;
        jobs[2].kind_case = KFDBROKER__V1__JOB__KIND_SIGNAL_EVENT;
        jobs[2].signal_event = &sig;
        jobs[3].kind_case = KFDBROKER__V1__JOB__KIND_WAIT_EVENT;
        jobs[3].wait_event = &wj;
        submit.n_jobs = 4;
        submit.jobs = jp;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        m.submit = &submit;
        r |= write_request(dir, "submit", &m);
        fill.size = 6;
        r |= write_request(dir, "submit-bad-fill", &m);

        m.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
        m.query = &query;
        r |= write_request(dir, "query", &m);
        m.body_case = KFDBROKER__V1__REQUEST__BODY_STATUS;
        m.status = &status;
        r |= write_request(dir, "status", &m);
        m.body_case = KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO;
        m.device_info = &dev;
        r |= write_request(dir, "device-info", &m);
        m.body_case = KFDBROKER__V1__REQUEST__BODY_IMPORT_BUFFER;
        m.import_buffer = &import;
        r |= write_request(dir, "import-buffer", &m);

        m.body_case = KFDBROKER__V1__REQUEST__BODY_LOAD_CODE_OBJECT;
        m.load_code_object = &load;
        r |= write_request(dir, "load-code-object", &m);
        free_co.handle = 0x4300000100000000ull;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_CODE_OBJECT;
        m.free_code_object = &free_co;
        r |= write_request(dir, "free-code-object", &m);

        /* saxpy(a, x, y, n) with a local-size argument's shape too, between
         * event jobs on explicit and automatic engines. */
        ka[0].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BYTES;
        ka[0].bytes = (ProtobufCBinaryData) { .len = sizeof(alpha), .data = (uint8_t *) &alpha };
        refs[0].handle = 1;
        refs[1].handle = 2;
        refs[1].offset = 64;
        ka[1].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BUFFER;
        ka[1].buffer = &refs[0];
        ka[2].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BUFFER;
        ka[2].buffer = &refs[1];
        ka[3].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BYTES;
        ka[3].bytes = (ProtobufCBinaryData) { .len = sizeof(n), .data = (uint8_t *) &n };
        dispatch.code_object = 0x4300000100000000ull;
        dispatch.kernel = (char *) "saxpy";
        dispatch.n_grid = dispatch.n_block = 2;
        dispatch.grid = grid;
        dispatch.block = block;
        dispatch.n_args = 4;
        dispatch.args = kap;
        sig.engine = KFDBROKER__V1__ENGINE__ENGINE_AUTO;
        wj.engine = KFDBROKER__V1__ENGINE__ENGINE_COMPUTE;
        fill.size = 4096;
        jobs[0].kind_case = KFDBROKER__V1__JOB__KIND_WAIT_EVENT;
        jobs[0].wait_event = &wj;
        jobs[1].kind_case = KFDBROKER__V1__JOB__KIND_DISPATCH;
        jobs[1].dispatch = &dispatch;
        jobs[2].kind_case = KFDBROKER__V1__JOB__KIND_SIGNAL_EVENT;
        jobs[2].signal_event = &sig;
        jobs[3].kind_case = KFDBROKER__V1__JOB__KIND_FILL;
        jobs[3].fill = &fill;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        m.submit = &submit;
        r |= write_request(dir, "submit-dispatch", &m);
        ka[3].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_LOCAL_SIZE;
        ka[3].local_size = 4096;
        r |= write_request(dir, "submit-dispatch-local", &m);
        block[1] = 1024;
        r |= write_request(dir, "submit-dispatch-bad-block", &m);
        return r;
}

static int replies(const char *dir) {
        static const char *const features[] = { "sdma-copy", "events", NULL };
        static const WireWaitEntry entries[] = { { 5, 2 }, { 6, 4 } };
        static const uint64_t fences[] = { 7, 8, 9 };
        static const WireKernelArgInfo args[] = {
                { "a", 0, 4, "by_value" }, { "x", 8, 8, "global_buffer" },
                { "y", 16, 8, "global_buffer" }, { "n", 24, 4, "by_value" },
                { "", 32, 8, "hidden" },
        };
        static const WireKernelInfo kernels[] = {
                { "saxpy", 280, 0, 0, 256, args, 5 },
                { "empty", 0, 0, 0, 1024, NULL, 0 },
        };
        int r = 0;

        r |= write_reply(dir, "hello", &(WireReply) {
                .id = 1, .type = WIRE_REPLY_HELLO,
                .hello = { 1, "0.1.0", features, { .max_buffers = 16 }, 3, 20480 } });
        r |= write_reply(dir, "error", &(WireReply) {
                .id = 2, .error = EINVAL, .message = "submit.jobs[0].fill.size: must be > 0" });
        r |= write_reply(dir, "device-info", &(WireReply) {
                .id = 3, .type = WIRE_REPLY_DEVICE_INFO,
                .device_info = { .backend = "sim", .gfx_name = "gfx1030", .name = "sim" } });
        r |= write_reply(dir, "alloc-buffer", &(WireReply) {
                .id = 4, .type = WIRE_REPLY_ALLOC_BUFFER, .buffer = { 9, 4096 } });
        r |= write_reply(dir, "wait-events", &(WireReply) {
                .id = 5, .type = WIRE_REPLY_WAIT_EVENTS, .wait_events = { WIRE_WAIT_COMPLETE, entries, 2 } });
        r |= write_reply(dir, "submit", &(WireReply) {
                .id = 6, .type = WIRE_REPLY_SUBMIT, .submit = { fences, 3 } });
        r |= write_reply(dir, "status", &(WireReply) {
                .id = 7, .type = WIRE_REPLY_STATUS, .status = { "0.1.0", "sim", "gfx1030", 1, 2, 3, 4, 5, 6, 7, 8 } });
        r |= write_reply(dir, "query", &(WireReply) {
                .id = 8, .type = WIRE_REPLY_QUERY, .query = { .buffers = 2, .limits = { .max_events = 9 } } });
        r |= write_reply(dir, "job-failed", &(WireReply) {
                .type = WIRE_REPLY_JOB_FAILED, .job_failed = { 9, EFAULT, "GPU memory fault" } });
        r |= write_reply(dir, "empty", &(WireReply) { .id = 10, .type = WIRE_REPLY_EMPTY });
        r |= write_reply(dir, "load-code-object", &(WireReply) {
                .id = 11, .type = WIRE_REPLY_LOAD_CODE_OBJECT,
                .load_code_object = { 0x4300000100000000ull, kernels, 2 } });
        return r;
}

int main(int argc, char **argv) {
        if (argc != 3) {
                fprintf(stderr, "usage: %s REQUEST-DIR REPLY-DIR\n", argv[0]);
                return EXIT_FAILURE;
        }
        for (int i = 1; i < 3; i++)
                if (mkdir(argv[i], 0755) < 0 && errno != EEXIST) {
                        fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
                        return EXIT_FAILURE;
                }
        return requests(argv[1]) == 0 && replies(argv[2]) == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
