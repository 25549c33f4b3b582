/* SPDX-License-Identifier: MIT */
/*
 * Writes the seed corpora of the fuzz targets: one valid Request of every
 * type (plus a few rejected ones) into the first directory, one
 * ServerMessage of every type into the second, instruction streams for the
 * interpreter into the third, SDMA and PM4 rings (fuzz-gen-queues.c) into
 * the fourth and fifth, client sessions (fuzz-gen-session.c) into the sixth, AQL jobs around kernel
 * descriptors (fuzz-gen-aql.c, with those of the code objects named after the directories) into the
 * seventh, relayed clients' messages (fuzz-gen-ioctl.c) into the eighth. Run at build time; the
 * fuzz-*-corpus tests replay the result, and a libFuzzer run starts from it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kfdbroker.pb-c.h"
#include "wire/wire.h"
#include "fuzz-gen.h"

int write_seed(const char *dir, const char *name, const void *buf, size_t len) {
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
        Kfdbroker__V1__FreeFirst free_first = KFDBROKER__V1__FREE_FIRST__INIT;
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
        Kfdbroker__V1__ExportBufferRequest export = KFDBROKER__V1__EXPORT_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__DestroyEventRequest destroy = KFDBROKER__V1__DESTROY_EVENT_REQUEST__INIT;
        Kfdbroker__V1__SetEventRequest set = KFDBROKER__V1__SET_EVENT_REQUEST__INIT;
        Kfdbroker__V1__ResetEventRequest reset = KFDBROKER__V1__RESET_EVENT_REQUEST__INIT;
        Kfdbroker__V1__OpenSubmitRingRequest ring = KFDBROKER__V1__OPEN_SUBMIT_RING_REQUEST__INIT;
        Kfdbroker__V1__OpenFencePageRequest fence_page = KFDBROKER__V1__OPEN_FENCE_PAGE_REQUEST__INIT;
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
        alloc.flags = 0;
        alloc.size = 64u << 10;
        alloc.placement = KFDBROKER__V1__PLACEMENT__PLACEMENT_GTT;
        free_first.id = 0x8000000000000002ull;
        free_first.handle = 0x100000001ull;
        free_first.no_copy_kept = 1;
        alloc.free_first = &free_first;
        r |= write_request(dir, "alloc-buffer-free-first", &m);
        alloc.free_first = NULL;

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

        /* The rest of the request types, one seed each. */
        export.handle = 0x100000001ull;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_EXPORT_BUFFER;
        m.export_buffer = &export;
        r |= write_request(dir, "export-buffer", &m);
        destroy.handle = 5;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_DESTROY_EVENT;
        m.destroy_event = &destroy;
        r |= write_request(dir, "destroy-event", &m);
        set.handle = 5;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_SET_EVENT;
        m.set_event = &set;
        r |= write_request(dir, "set-event", &m);
        reset.handle = 5;
        m.body_case = KFDBROKER__V1__REQUEST__BODY_RESET_EVENT;
        m.reset_event = &reset;
        r |= write_request(dir, "reset-event", &m);
        m.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_SUBMIT_RING;
        m.open_submit_ring = &ring;
        r |= write_request(dir, "open-submit-ring", &m);
        m.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_FENCE_PAGE;
        m.open_fence_page = &fence_page;
        r |= write_request(dir, "open-fence-page", &m);

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
        r |= write_reply(dir, "import-buffer", &(WireReply) {
                .id = 12, .type = WIRE_REPLY_IMPORT_BUFFER, .buffer = { 0x100000002ull, 8192 } });
        r |= write_reply(dir, "export-buffer", &(WireReply) {
                .id = 13, .type = WIRE_REPLY_EXPORT_BUFFER, .buffer = { .size = 8192 } });
        r |= write_reply(dir, "create-event", &(WireReply) {
                .id = 14, .type = WIRE_REPLY_CREATE_EVENT, .create_event = { 5, 3 } });
        r |= write_reply(dir, "session-ended", &(WireReply) {
                .type = WIRE_REPLY_SESSION_ENDED, .session_ended = { EPROTO, "submit ring: head moved back", false } });
        r |= write_reply(dir, "open-submit-ring", &(WireReply) {
                .id = 15, .type = WIRE_REPLY_OPEN_SUBMIT_RING, .submit_ring = { 65536, 1024 } });
        r |= write_reply(dir, "open-fence-page", &(WireReply) {
                .id = 16, .type = WIRE_REPLY_OPEN_FENCE_PAGE, .fence_page = { 4096, 1024 } });
        return r;
}

/*
 * The interpreter's seeds (fuzz-isa.c: a 16-byte dispatch header, then the
 * instruction stream): short gfx1030 programs assembled with llvm-mc-15
 * (encodings below, each with its instruction), each under a few dispatch
 * headers; random dword streams; and mutations of the programs (flipped bits,
 * replaced or dropped dwords), all from a fixed-seed generator so the corpus
 * is the same on every build.
 */
/* global-rmw */
static const uint32_t isa_global_rmw[] = {
        0xf4040103, 0xfa000000, /* s_load_dwordx2 s[4:5], s[6:7], 0x0 */
        0xbf8cc07f, /* s_waitcnt lgkmcnt(0) */
        0x34020082, /* v_lshlrev_b32_e32 v1, 2, v0 */
        0x7e040204, /* v_mov_b32_e32 v2, s4 */
        0x7e060205, /* v_mov_b32_e32 v3, s5 */
        0xd70f6a02, 0x00020302, /* v_add_co_u32 v2, vcc_lo, v2, v1 */
        0x50060680, /* v_add_co_ci_u32_e32 v3, vcc_lo, 0, v3, vcc_lo */
        0xdc308000, 0x047d0002, /* global_load_dword v4, v[2:3], off */
        0xbf8c3f70, /* s_waitcnt vmcnt(0) */
        0x4a080881, /* v_add_nc_u32_e32 v4, 1, v4 */
        0xdc708000, 0x007d0402, /* global_store_dword v[2:3], v4, off */
        0xd8340000, 0x00000401, /* ds_write_b32 v1, v4 */
        0xd8d80000, 0x05000001, /* ds_read_b32 v5, v1 */
        0xbf8a0000, /* s_barrier */
        0x7d880090, /* v_cmp_gt_u32_e32 vcc_lo, 16, v0 */
        0xbe863c6a, /* s_and_saveexec_b32 s6, vcc_lo */
        0xbf880002, /* s_cbranch_execz 2 */
        0x100c0904, /* v_mul_f32_e32 v6, v4, v4 */
        0x7e0e5506, /* v_rcp_f32_e32 v7, v6 */
        0x887e067e, /* s_or_b32 exec_lo, exec_lo, s6 */
        0xe0700004, 0x80000400, /* buffer_store_dword v4, off, s[0:3], 0 offset:4 */
        0x80088108, /* s_add_u32 s8, s8, 1 */
        0xbf0a8a08, /* s_cmp_lt_u32 s8, 10 */
        0xbf85fffd, /* s_cbranch_scc1 -3 */
        0xbf810000, /* s_endpgm */
};
/* scalar-loop */
static const uint32_t isa_scalar_loop[] = {
        0xbe880380, /* s_mov_b32 s8, 0 */
        0xbe890381, /* s_mov_b32 s9, 1 */
        0x80080908, /* s_add_u32 s8, s8, s9 */
        0x8f098109, /* s_lshl_b32 s9, s9, 1 */
        0xbf0aff08, 0x00000064, /* s_cmp_lt_u32 s8, 0x64 */
        0xbf85fffc, /* s_cbranch_scc1 -4 */
        0xf4080302, 0xfa000010, /* s_load_dwordx4 s[12:15], s[4:5], 0x10 */
        0xf4000403, 0xfa000004, /* s_load_dword s16, s[6:7], 0x4 */
        0xbf8cc07f, /* s_waitcnt lgkmcnt(0) */
        0x93110c10, /* s_mul_i32 s17, s16, s12 */
        0x9392ff11, 0x00080004, /* s_bfe_u32 s18, s17, 0x80004 */
        0xbe941f00, /* s_getpc_b64 s[20:21] */
        0xbe961311, /* s_ff1_i32_b32 s22, s17 */
        0xbf810000, /* s_endpgm */
};
/* float-math */
static const uint32_t isa_float_math[] = {
        0x7e020d00, /* v_cvt_f32_u32_e32 v1, v0 */
        0x100402ff, 0x40490fdb, /* v_mul_f32_e32 v2, 0x40490fdb, v1 */
        0x7e066b02, /* v_sin_f32_e32 v3, v2 */
        0x7e086701, /* v_sqrt_f32_e32 v4, v1 */
        0x7e0a5d01, /* v_rsq_f32_e32 v5, v1 */
        0xd54b0006, 0x04160903, /* v_fma_f32 v6, v3, v4, v5 */
        0x7e102106, /* v_cvt_f64_f32_e32 v[8:9], v6 */
        0xd565000a, 0x00021108, /* v_mul_f64 v[10:11], v[8:9], v[8:9] */
        0xd56d6a0c, 0x04060901, /* v_div_scale_f32 v12, vcc_lo, v1, v4, v1 */
        0x7e1a550c, /* v_rcp_f32_e32 v13, v12 */
        0x7e1c110d, /* v_cvt_i32_f32_e32 v14, v13 */
        0xd488006a, 0x0001ff0d, 0x000003ff, /* v_cmp_class_f32_e64 vcc_lo, v13, 0x3ff */
        0x021e010e, /* v_cndmask_b32_e32 v15, v14, v0, vcc_lo */
        0x34020082, /* v_lshlrev_b32_e32 v1, 2, v0 */
        0x7e040206, /* v_mov_b32_e32 v2, s6 */
        0x7e060207, /* v_mov_b32_e32 v3, s7 */
        0xd70f6a02, 0x00020302, /* v_add_co_u32 v2, vcc_lo, v2, v1 */
        0x50060680, /* v_add_co_ci_u32_e32 v3, vcc_lo, 0, v3, vcc_lo */
        0xdc708000, 0x007d0f02, /* global_store_dword v[2:3], v15, off */
        0xbf810000, /* s_endpgm */
};
/* atomics-lds */
static const uint32_t isa_atomics_lds[] = {
        0x34020082, /* v_lshlrev_b32_e32 v1, 2, v0 */
        0x7e040204, /* v_mov_b32_e32 v2, s4 */
        0x7e060205, /* v_mov_b32_e32 v3, s5 */
        0xdcc98000, 0x047d0002, /* global_atomic_add v4, v[2:3], v0, off glc */
        0xdcc58008, 0x057d0002, /* global_atomic_cmpswap v5, v[2:3], v[0:1], off offset:8 glc */
        0xd8000000, 0x00000001, /* ds_add_u32 v1, v0 */
        0xd8dc0100, 0x06000001, /* ds_read2_b32 v[6:7], v1 offset1:1 */
        0xd8a00000, 0x08000001, /* ds_max_rtn_u32 v8, v1, v0 */
        0xbf8c0070, /* s_waitcnt vmcnt(0) lgkmcnt(0) */
        0xbf8a0000, /* s_barrier */
        0xdc300000, 0x097d0002, /* flat_load_dword v9, v[2:3] */
        0xdcf10000, 0x0a7d0002, /* flat_atomic_inc v10, v[2:3], v0 glc */
        0xbf8c0070, /* s_waitcnt vmcnt(0) lgkmcnt(0) */
        0xdc748040, 0x007d0602, /* global_store_dwordx2 v[2:3], v[6:7], off offset:64 */
        0xbf810000, /* s_endpgm */
};
/* scratch */
static const uint32_t isa_scratch[] = {
        0x7e0202ff, 0x00001234, /* v_mov_b32_e32 v1, 0x1234 */
        0xe0700004, 0x80000100, /* buffer_store_dword v1, off, s[0:3], 0 offset:4 */
        0xe0700008, 0x80000000, /* buffer_store_dword v0, off, s[0:3], 0 offset:8 */
        0xe0300004, 0x80000200, /* buffer_load_dword v2, off, s[0:3], 0 offset:4 */
        0xbf8c3f70, /* s_waitcnt vmcnt(0) */
        0x4a060102, /* v_add_nc_u32_e32 v3, v2, v0 */
        0xe070000c, 0x80000300, /* buffer_store_dword v3, off, s[0:3], 0 offset:12 */
        0xbf810000, /* s_endpgm */
};
/* divergent */
static const uint32_t isa_divergent[] = {
        0x36020081, /* v_and_b32_e32 v1, 1, v0 */
        0x7d840280, /* v_cmp_eq_u32_e32 vcc_lo, 0, v1 */
        0xbe883c6a, /* s_and_saveexec_b32 s8, vcc_lo */
        0xbf880003, /* s_cbranch_execz 3 */
        0x4a04008a, /* v_add_nc_u32_e32 v2, 10, v0 */
        0xd5690002, 0x00020502, /* v_mul_lo_u32 v2, v2, v2 */
        0xbf800000, /* s_nop 0 */
        0xbe883f08, /* s_andn2_saveexec_b32 s8, s8 */
        0x4c040080, /* v_sub_nc_u32_e32 v2, 0, v0 */
        0x887e087e, /* s_or_b32 exec_lo, exec_lo, s8 */
        0x7e120502, /* v_readfirstlane_b32 s9, v2 */
        0xd7610003, 0x00010a09, /* v_writelane_b32 v3, s9, 5 */
        0xd760000a, 0x00010b03, /* v_readlane_b32 s10, v3, 5 */
        0xbf810000, /* s_endpgm */
};
/* cross-lane: DPP16, DPP8, permlane, ds_(b)permute */
static const uint32_t isa_cross_lane[] = {
        0x34020082, /* v_lshlrev_b32_e32 v1, 2, v0 */
        0x7e0402fa, 0xff00b100, /* v_mov_b32_dpp v2, v0 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf */
        0x4a0604fa, 0xff091100, /* v_add_nc_u32_dpp v3, v0, v2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1 */
        0x7e0802fa, 0xff016100, /* v_mov_b32_dpp v4, v0 row_xmask:1 row_mask:0xf bank_mask:0xf */
        0x7e0a02fa, 0x5a055300, /* v_mov_b32_dpp v5, v0 row_share:3 row_mask:0x5 bank_mask:0xa fi:1 */
        0x7e0c02e9, 0x05397700, /* v_mov_b32_dpp v6, v0 dpp8:[7,6,5,4,3,2,1,0] */
        0xd7770007, 0x00241100, /* v_permlane16_b32 v7, v0, s8, s9 */
        0xd7780808, 0x00241100, /* v_permlanex16_b32 v8, v0, s8, s9 op_sel:[1,0] */
        0xdacc0000, 0x09000001, /* ds_bpermute_b32 v9, v1, v0 */
        0xdac80000, 0x0a000001, /* ds_permute_b32 v10, v1, v0 */
        0xbf8cc07f, /* s_waitcnt lgkmcnt(0) */
        0x061608fa, 0xff014003, /* v_add_f32_dpp v11, v3, v4 row_mirror row_mask:0xf bank_mask:0xf */
        0x7e1a02fa, 0xff014109, /* v_mov_b32_dpp v13, v9 row_half_mirror row_mask:0xf bank_mask:0xf */
        0x7d82150d, /* v_cmp_lt_u32_e32 vcc_lo, v13, v10 */
        0x0218130b, /* v_cndmask_b32_e32 v12, v11, v9, vcc_lo */
        0xdc708000, 0x00040c01, /* global_store_dword v1, v12, s[4:5] */
        0xbf810000, /* s_endpgm */
};

/* half: f16, packed 16-bit math, fma_mix, d16 loads and stores, f64 rsq and trig_preop */
static const uint32_t isa_half[] = {
        0x7e02a100, /* v_cvt_f16_u16_e32 v1, v0 */
        0x64040301, /* v_add_f16_e32 v2, v1, v1 */
        0xd5350003, 0x0001e102, /* v_mul_f16_e64 v3, v2, 0.5 */
        0xd74b0004, 0x040e0501, /* v_fma_f16 v4, v1, v2, v3 */
        0xcc0f4005, 0x18020501, /* v_pk_add_f16 v5, v1, v2 */
        0xcc104006, 0x10020b05, /* v_pk_mul_f16 v6, v5, v5 op_sel_hi:[0,1] */
        0xcc0e4007, 0x1c160d05, /* v_pk_fma_f16 v7, v5, v6, v5 */
        0xcc0a4008, 0x18020100, /* v_pk_add_u16 v8, v0, v0 */
        0xcc204009, 0x1c0e0501, /* v_fma_mix_f32 v9, v1, v2, v3 op_sel_hi:[1,1,1] */
        0x7d920501, /* v_cmp_lt_f16_e32 vcc_lo, v1, v2 */
        0x02140f04, /* v_cndmask_b32_e32 v10, v4, v7, vcc_lo */
        0x7e16170a, /* v_cvt_f32_f16_e32 v11, v10 */
        0xbfa5000f, /* s_denorm_mode 15 */
        0x7e18ab0b, /* v_sqrt_f16_e32 v12, v11 */
        0x341a0082, /* v_lshlrev_b32_e32 v13, 2, v0 */
        0xdc6c8000, 0x0004070d, /* global_store_short_d16_hi v13, v7, s[4:5] */
        0xdc908000, 0x0e04000d, /* global_load_short_d16 v14, v13, s[4:5] */
        0xdc848002, 0x0e04000d, /* global_load_ubyte_d16_hi v14, v13, s[4:5] offset:2 */
        0xda840000, 0x0000070d, /* ds_write_b16_d16_hi v13, v7 */
        0xda980000, 0x0f00000d, /* ds_read_u16_d16 v15, v13 */
        0x7e206308, /* v_rsq_f64_e32 v[16:17], v[8:9] */
        0xd5740012, 0x00020110, /* v_trig_preop_f64 v[18:19], v[16:17], v0 */
        0xdc788000, 0x00060e0d, /* global_store_dwordx4 v13, v[14:17], s[6:7] */
        0xbf810000, /* s_endpgm */
};

/* apertures: FLAT_SCRATCH set as the kernel prologue does, SCRATCH instructions,
 * FLAT into the private and LDS apertures read from SH_MEM_BASES */
static const uint32_t isa_apertures[] = {
        0xbe8a0380, /* s_mov_b32 s10, 0 */
        0xbe8b0383, /* s_mov_b32 s11, 3 */
        0xb98af814, /* s_setreg_b32 hwreg(HW_REG_FLAT_SCR_LO), s10 */
        0xb98bf815, /* s_setreg_b32 hwreg(HW_REG_FLAT_SCR_HI), s11 */
        0xb90cf80f, /* s_getreg_b32 s12, hwreg(HW_REG_SH_MEM_BASES) */
        0x8f0d900c, /* s_lshl_b32 s13, s12, 16 */
        0x870eff0c, 0xffff0000, /* s_and_b32 s14, s12, 0xffff0000 */
        0x36020083, /* v_and_b32_e32 v1, 3, v0 */
        0x34020282, /* v_lshlrev_b32_e32 v1, 2, v1 */
        0xdc704000, 0x007d0001, /* scratch_store_dword v1, v0, off */
        0xdc304000, 0x027d0001, /* scratch_load_dword v2, v1, off */
        0xdc70400c, 0x000a0000, /* scratch_store_dword off, v0, s10 offset:12 */
        0x7e080301, /* v_mov_b32_e32 v4, v1 */
        0x7e0a020d, /* v_mov_b32_e32 v5, s13 */
        0xdc700000, 0x007d0004, /* flat_store_dword v[4:5], v0 */
        0xdc300000, 0x067d0004, /* flat_load_dword v6, v[4:5] */
        0x34080082, /* v_lshlrev_b32_e32 v4, 2, v0 */
        0x7e0a020e, /* v_mov_b32_e32 v5, s14 */
        0xdc700000, 0x007d0004, /* flat_store_dword v[4:5], v0 */
        0xdcc90000, 0x077d0004, /* flat_atomic_add v7, v[4:5], v0 glc */
        0xdc300004, 0x087d0004, /* flat_load_dword v8, v[4:5] offset:4 */
        0xbf8c0070, /* s_waitcnt vmcnt(0) lgkmcnt(0) */
        0xdc748000, 0x00040604, /* global_store_dwordx2 v4, v[6:7], s[4:5] */
        0xbf810000, /* s_endpgm */
};

typedef struct IsaSeed {
        const char *name;
        const uint32_t *words;
        size_t n;
} IsaSeed;

#define ISA_SEED(n) { #n, isa_##n, sizeof(isa_##n) / sizeof(isa_##n[0]) }
static const IsaSeed isa_seeds[] = {
        ISA_SEED(global_rmw), ISA_SEED(scalar_loop), ISA_SEED(float_math),
        ISA_SEED(atomics_lds), ISA_SEED(scratch), ISA_SEED(divergent),
        ISA_SEED(cross_lane), ISA_SEED(half), ISA_SEED(apertures),
};

/* Headers (fuzz-isa.c dispatch_from_header): flags, wg x/y/z, grid x/y,
 * partial, user SGPRs, LDS granules, scratch dwords per lane, TIDIG count,
 * SGPR multiplier, RSRC1. All but the one over the LDS limit run. */
static const uint8_t isa_headers[][16] = {
        { 0x02, 63, 0, 0, 1, 0, 0x00, 8, 8, 4, 0, 1, 0, 0, 0, 0 },      /* wave32, 2 x 64 work-items */
        { 0x1e, 31, 1, 0, 2, 1, 0xc5, 16, 128, 16, 2, 3, 0, 0, 0xaf, 0 }, /* 3-D ids, partial x, 64 KiB LDS */
        { 0x01, 63, 0, 0, 0, 0, 0x00, 8, 2, 0, 0, 0, 0, 0, 0, 0 },      /* wave64 */
        { 0x22, 95, 0, 0, 2, 0, 0x00, 4, 130, 255, 0, 9, 0, 0, 0, 0 },  /* LDS over the limit */
        { 0x42, 63, 0, 0, 1, 0, 0x00, 8, 8, 4, 0, 1, 0, 0, 0, 0 },      /* wave32 with the apertures */
        { 0x43, 63, 0, 0, 1, 0, 0x00, 8, 8, 4, 0, 1, 0, 0, 0, 0 },      /* wave64 with the apertures */
};
#define ISA_HEADER_OVER_LDS 3

static uint64_t xorshift(uint64_t *s) {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

static int write_isa(const char *dir, const char *name, const uint8_t header[16], const uint32_t *words, size_t n) {
        uint8_t buf[16 + 4 * 1024];

        if (n > 1024)
                n = 1024;
        memcpy(buf, header, 16);
        memcpy(buf + 16, words, n * 4);
        return write_seed(dir, name, buf, 16 + n * 4);
}

static int isa_corpus(const char *dir) {
        uint64_t rng = 0x9e3779b97f4a7c15ull;
        uint32_t words[1024];
        uint8_t header[16];
        char name[64];

        for (size_t i = 0; i < sizeof(isa_seeds) / sizeof(isa_seeds[0]); i++)
                for (size_t h = 0; h < sizeof(isa_headers) / sizeof(isa_headers[0]); h++) {
                        snprintf(name, sizeof name, "%s-%zu", isa_seeds[i].name, h);
                        if (write_isa(dir, name, isa_headers[h], isa_seeds[i].words, isa_seeds[i].n) < 0)
                                return -1;
                }
        for (unsigned i = 0; i < 64; i++) {
                size_t n = 1 + xorshift(&rng) % 64;
                for (size_t k = 0; k < n; k++)
                        words[k] = (uint32_t) xorshift(&rng);
                for (size_t k = 0; k < 16; k++)
                        header[k] = (uint8_t) xorshift(&rng);
                if (xorshift(&rng) % 8) /* wave32 mostly, as clang builds for gfx1030 */
                        header[0] &= (uint8_t) ~0x01;
                snprintf(name, sizeof name, "random-%u", i);
                if (write_isa(dir, name, header, words, n) < 0)
                        return -1;
        }
        for (unsigned i = 0; i < 192; i++) {
                const IsaSeed *s = &isa_seeds[xorshift(&rng) % (sizeof(isa_seeds) / sizeof(isa_seeds[0]))];
                size_t n = s->n;
                memcpy(words, s->words, n * 4);
                for (unsigned m = 0, k = 1 + xorshift(&rng) % 4; m < k; m++) {
                        size_t at = xorshift(&rng) % n;
                        switch (xorshift(&rng) % 3) {
                        case 0: /* a flipped bit */
                                words[at] ^= 1u << (xorshift(&rng) % 32);
                                break;
                        case 1: /* a replaced dword */
                                words[at] = (uint32_t) xorshift(&rng);
                                break;
                        default: /* a dropped dword: the rest shifts */
                                if (n > 1) {
                                        memmove(words + at, words + at + 1, (n - at - 1) * 4);
                                        n--;
                                }
                        }
                }
                size_t h = xorshift(&rng) % (sizeof(isa_headers) / sizeof(isa_headers[0]) - 1);
                memcpy(header, isa_headers[h >= ISA_HEADER_OVER_LDS ? h + 1 : h], 16); /* one that runs */
                snprintf(name, sizeof name, "mutant-%u", i);
                if (write_isa(dir, name, header, words, n) < 0)
                        return -1;
        }
        return 0;
}

int main(int argc, char **argv) {
        if (argc < 9) {
                fprintf(stderr, "usage: %s REQUEST-DIR REPLY-DIR ISA-DIR SDMA-DIR PM4-DIR SESSION-DIR RELAY-AQL-DIR "
                                "RELAY-IOCTL-DIR [CODE-OBJECT...]\n",
                        argv[0]);
                return EXIT_FAILURE;
        }
        for (int i = 1; i < 9; i++)
                if (mkdir(argv[i], 0755) < 0 && errno != EEXIST) {
                        fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
                        return EXIT_FAILURE;
                }
        return requests(argv[1]) == 0 && replies(argv[2]) == 0 && isa_corpus(argv[3]) == 0 &&
                               sdma_corpus(argv[4]) == 0 && pm4_corpus(argv[5]) == 0 && session_corpus(argv[6]) == 0 &&
                               relay_aql_corpus(argv[7], argv + 9, argc - 9) == 0 &&
                               relay_ioctl_corpus(argv[8]) == 0
                       ? EXIT_SUCCESS
                       : EXIT_FAILURE;
}
