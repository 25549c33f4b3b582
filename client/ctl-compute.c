/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl's compute verbs (see ctl-compute.h): the saxpy step of the
 * demo and `kernels FILE`. The demo's code object is built from
 * tests/kernels/saxpy.cl with clang-15 when kfdbrokerctl is built and
 * embedded in the program (ctl-saxpy-kernel.c); `kfdbrokerctl selftest`
 * runs it too (ctl-selftest.c).
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl-compute.h"
#include "ctl-json.h"
#include "util/macro.h"

#define SAXPY_BLOCK 256u
#define SAXPY_TIMEOUT_MS (10 * 60 * 1000)

static double now_s(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

const char *ctl_failure_text(int r, const char *msg, char *buf, size_t n) {
        const char *e = kfdb_strerror(r);

        /* A limit's message names the limit and its policy key; its errno's
         * strerror() ("Disk quota exceeded") would only mislead. Other
         * messages may end with the errno's text already ("cannot open F:
         * No such file or directory"): then it is not said twice. */
        if (msg[0] && (r == -EDQUOT || r == -EUSERS || strstr(msg, e)))
                snprintf(buf, n, "%s", msg);
        else if (msg[0])
                snprintf(buf, n, "%s (%s)", msg, e);
        else
                snprintf(buf, n, "%s", e);
        return buf;
}

int ctl_print_failure(const kfdb_session *s, const char *prog, int r, const char *what) {
        char text[1200];

        fprintf(stderr, "%s: %s: %s\n", prog, what,
                ctl_failure_text(r, kfdb_session_last_error(s), text, sizeof(text)));
        return r;
}

/* Records what failed in ret->failure and prints it; returns r. */
_printf_(5, 6) static int saxpy_fail(kfdb_session *s, const char *prog, CtlSaxpyResult *ret, int r,
                                     const char *fmt, ...) {
        const char *msg = r < 0 ? kfdb_session_last_error(s) : "";
        char what[160];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        char text[1200], full[sizeof(what) + 2 + sizeof(text)];
        if (r >= 0)
                snprintf(full, sizeof(full), "%s", what);
        else
                snprintf(full, sizeof(full), "%s: %s", what, ctl_failure_text(r, msg, text, sizeof(text)));
        /* The whole of it on stderr; what fits in the result. */
        fprintf(stderr, "%s: %s\n", prog, full);
        if (snprintf(ret->failure, sizeof(ret->failure), "%s", full) >= (int) sizeof(ret->failure))
                memcpy(ret->failure + sizeof(ret->failure) - 4, "...", 4);
        return r < 0 ? r : -EIO;
}

static void skip(CtlSaxpyResult *ret, const char *reason) {
        ret->ran = false;
        snprintf(ret->skip_reason, sizeof(ret->skip_reason), "%s", reason);
}

/* Inputs that exercise the whole float range a little, and are cheap to regenerate. */
static float saxpy_x(uint64_t i) {
        return (float) (i % 1000u) * 0.25f - 31.0f;
}

static float saxpy_y(uint64_t i) {
        return (float) (i % 777u) * 1.5f + 0.125f;
}

int ctl_demo_saxpy(kfdb_session *s, const char *prog, bool quiet, uint64_t elements, CtlSaxpyResult *ret) {
        const float a = 2.5f;
        kfdb_code_object *co = NULL;
        kfdb_buffer *x = NULL, *y = NULL;
        kfdb_batch *batch = NULL;
        float *xm, *ym;
        uint64_t fence, bytes = elements * sizeof(float);
        uint32_t grid, block = SAXPY_BLOCK, n;
        double t0;
        int r;

        *ret = (CtlSaxpyResult) { .elements = elements };
        if (ctl_saxpy_hsaco_size == 0) {
                char why[160];
                snprintf(why, sizeof(why), "the saxpy kernel could not be built (%s)", ctl_saxpy_hsaco_missing);
                skip(ret, why);
        } else if (!kfdb_session_has_feature(s, "compute"))
                skip(ret, "the daemon's device has no compute queue");
        if (ret->skip_reason[0]) {
                if (!quiet)
                        printf("  compute skipped: %s\n", ret->skip_reason);
                return 0;
        }
        if (elements == 0 || elements > UINT32_MAX)
                return saxpy_fail(s, prog, ret, -EINVAL, "the saxpy size must be 1..%u elements", UINT32_MAX);
        grid = n = (uint32_t) elements;

        /* Everything made here belongs to the session, which the caller frees on every path. */
        r = kfdb_code_object_load(s, ctl_saxpy_hsaco, ctl_saxpy_hsaco_size, &co);
        if (r < 0)
                return saxpy_fail(s, prog, ret, r, "cannot load the saxpy code object");
        r = kfdb_buffer_alloc(s, bytes, KFDB_PLACEMENT_GTT, &x);
        if (r >= 0)
                r = kfdb_buffer_alloc(s, bytes, KFDB_PLACEMENT_GTT, &y);
        if (r < 0)
                return saxpy_fail(s, prog, ret, r, "cannot allocate the saxpy buffers");
        r = kfdb_buffer_map(x, (void **) &xm);
        if (r >= 0)
                r = kfdb_buffer_map(y, (void **) &ym);
        if (r < 0)
                return saxpy_fail(s, prog, ret, r, "cannot map the dma-buf of a saxpy buffer");
        for (uint64_t i = 0; i < elements; i++) {
                xm[i] = saxpy_x(i);
                ym[i] = saxpy_y(i);
        }

        kfdb_arg args[] = { kfdb_arg_value(&a, sizeof(a)), kfdb_arg_buffer(x, 0), kfdb_arg_buffer(y, 0),
                            kfdb_arg_value(&n, sizeof(n)) };
        r = kfdb_batch_new(s, &batch);
        if (r >= 0)
                r = kfdb_batch_dispatch(batch, co, "saxpy", 1, &grid, &block, args, 4);
        if (r < 0)
                return saxpy_fail(s, prog, ret, r, "cannot add the saxpy dispatch");
        t0 = now_s();
        r = kfdb_batch_submit(batch, NULL, &fence);
        if (r == -EPERM) {
                skip(ret, "the daemon's policy does not grant this user compute dispatch (ComputeDispatch=, "
                          "see kfdbroker-policy(5))");
                if (!quiet)
                        printf("  compute skipped: %s\n", ret->skip_reason);
                /* The session lives on (kfdbrokerctl selftest goes on to other checks). */
                kfdb_batch_free(batch);
                kfdb_buffer_free(x);
                kfdb_buffer_free(y);
                kfdb_code_object_free(co);
                return 0;
        }
        if (r < 0)
                return saxpy_fail(s, prog, ret, r, "Submit of the saxpy dispatch failed");
        r = kfdb_fence_wait(s, fence, SAXPY_TIMEOUT_MS);
        if (r == -ETIMEDOUT)
                return saxpy_fail(s, prog, ret, r, "the saxpy dispatch did not complete within %d s",
                                  SAXPY_TIMEOUT_MS / 1000);
        if (r < 0)
                return saxpy_fail(s, prog, ret, r, "the saxpy dispatch failed");
        ret->ms = (now_s() - t0) * 1e3;
        ret->elements_per_s = (double) elements / (ret->ms / 1e3);
        ret->ran = true;

        /* The same fused multiply-add on the CPU must give the same bits. */
        for (uint64_t i = 0; i < elements; i++) {
                float want = fmaf(a, saxpy_x(i), saxpy_y(i));
                if (memcmp(&want, &ym[i], sizeof(float)) != 0) {
                        if (ret->wrong == 0)
                                fprintf(stderr, "%s: saxpy element %" PRIu64 " is %.9g, expected %.9g\n",
                                        prog, i, (double) ym[i], (double) want);
                        ret->wrong++;
                }
        }
        if (!quiet) {
                printf("  saxpy on the GPU: y = %.1f * x + y over %" PRIu64 " floats in %.2f ms: %.1f M elements/s\n",
                       (double) a, elements, ret->ms, ret->elements_per_s / 1e6);
                if (ret->wrong == 0)
                        printf("  checked all %" PRIu64 " elements of y through its dma-buf mapping against the CPU: correct\n",
                               elements);
        }
        kfdb_batch_free(batch);
        kfdb_buffer_free(x);
        kfdb_buffer_free(y);
        kfdb_code_object_free(co);
        if (ret->wrong != 0)
                return saxpy_fail(s, prog, ret, 0, "FAILED: %" PRIu64 " of %" PRIu64 " saxpy elements are wrong",
                                  ret->wrong, elements);
        return 0;
}

static const char *kind_name(kfdb_kernel_arg_kind k) {
        switch (k) {
        case KFDB_KERNEL_ARG_BY_VALUE:
                return "by_value";
        case KFDB_KERNEL_ARG_GLOBAL_BUFFER:
                return "global_buffer";
        case KFDB_KERNEL_ARG_DYNAMIC_LDS:
                return "dynamic_lds";
        case KFDB_KERNEL_ARG_HIDDEN:
                return "hidden";
        default:
                return "unknown";
        }
}

static void print_kernel_json(const kfdb_kernel *k, bool first) {
        kfdb_kernel_arg a;

        json_member_string(first ? "{" : ",{", "name", kfdb_kernel_get_name(k));
        printf(",\"kernarg_size\":%" PRIu32 ",\"group_segment_size\":%" PRIu32
               ",\"private_segment_size\":%" PRIu32 ",\"max_workgroup_size\":%" PRIu32 ",\"args\":[",
               kfdb_kernel_get_kernarg_size(k), kfdb_kernel_get_group_segment_size(k),
               kfdb_kernel_get_private_segment_size(k), kfdb_kernel_get_max_workgroup_size(k));
        for (size_t i = 0; i < kfdb_kernel_get_n_args(k); i++) {
                (void) kfdb_kernel_get_arg(k, i, &a);
                json_member_string(i == 0 ? "{" : ",{", "name", a.name);
                json_member_string(",", "kind", kind_name(a.kind));
                printf(",\"offset\":%" PRIu32 ",\"size\":%" PRIu32 "}", a.offset, a.size);
        }
        printf("]}");
}

static void print_kernel_text(const kfdb_kernel *k) {
        size_t hidden = kfdb_kernel_get_n_args(k) - kfdb_kernel_get_n_explicit_args(k);
        kfdb_kernel_arg a;

        printf("%s\n", kfdb_kernel_get_name(k));
        printf("  workgroup: at most %" PRIu32 " work-items; LDS %" PRIu32 " bytes; scratch %" PRIu32
               " bytes per work-item; kernarg segment %" PRIu32 " bytes\n",
               kfdb_kernel_get_max_workgroup_size(k), kfdb_kernel_get_group_segment_size(k),
               kfdb_kernel_get_private_segment_size(k), kfdb_kernel_get_kernarg_size(k));
        for (size_t i = 0, e = 0; i < kfdb_kernel_get_n_args(k); i++) {
                (void) kfdb_kernel_get_arg(k, i, &a);
                if (a.kind == KFDB_KERNEL_ARG_HIDDEN)
                        continue;
                /* Names are in the metadata only with clang -cl-kernel-arg-info. */
                printf("  arg %zu: %-14s offset %4" PRIu32 "  size %3" PRIu32 "%s%s\n", e++, kind_name(a.kind),
                       a.offset, a.size, a.name[0] ? "  " : "", a.name);
        }
        if (hidden > 0)
                printf("  (and %zu hidden argument%s the daemon fills)\n", hidden, hidden == 1 ? "" : "s");
}

int ctl_kernels(kfdb_session *s, const char *prog, bool json, const char *path) {
        kfdb_code_object *co = NULL;
        size_t n;
        int r;

        r = kfdb_code_object_load_file(s, path, &co);
        if (r < 0) {
                char what[512];
                snprintf(what, sizeof(what), "cannot load %s", path);
                return ctl_print_failure(s, prog, r, what);
        }
        n = kfdb_code_object_get_n_kernels(co);
        if (json) {
                json_member_string("{", "file", path);
                printf(",\"kernels\":[");
        }
        for (size_t i = 0; i < n; i++) {
                if (json)
                        print_kernel_json(kfdb_code_object_get_kernel(co, i), i == 0);
                else
                        print_kernel_text(kfdb_code_object_get_kernel(co, i));
        }
        if (json)
                printf("]}\n");
        return kfdb_code_object_free(co);
}
