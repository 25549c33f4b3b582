/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the tests that dispatch corpus kernels on the GPU layer
 * (dispatch-test.h): loading a code object of tests/kernels, kernel arguments,
 * dispatch jobs, completion checks.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch-test.h"
#include "gpu-test.h"

void *read_kernel_file(const char *name, size_t *ret_size) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", KERNEL_DIR, name);
        FILE *f = fopen(path, "rbe");
        cr_assert_not_null(f, "%s", path);
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        void *p = malloc((size_t) n);
        cr_assert(p && fread(p, 1, (size_t) n, f) == (size_t) n);
        fclose(f);
        *ret_size = (size_t) n;
        return p;
}

GpuCodeObject *load_kernel_file(const char *file) {
        size_t size;
        char err[256] = "";
        GpuCodeObject *co = NULL;
        void *elf = read_kernel_file(file, &size);
        int r = gpu_code_object_load(fx.ctx, elf, size, &co, err, sizeof err);
        free(elf);
        cr_assert_eq(r, 0, "loading %s: %s (%s)", file, strerror(-r), err);
        return co;
}

void arg(Args *a, const GpuKernel *k, const void *v, uint32_t n) {
        while (a->next < k->n_args && k->args[a->next].kind == GPU_ARG_HIDDEN)
                a->next++;
        cr_assert_lt(a->next, k->n_args, "more arguments than %s takes", k->name);
        const GpuKernelArg *ka = &k->args[a->next++];
        cr_assert_eq(ka->size, ka->kind == GPU_ARG_DYNAMIC_LDS ? ka->size : n, "arg %s size", ka->name);
        memcpy(a->data + ka->offset, v, n);
        if (ka->offset + ka->size > a->size)
                a->size = ka->offset + ka->size;
}
void arg_u32(Args *a, const GpuKernel *k, uint32_t v) {
        arg(a, k, &v, 4);
}
void arg_ptr(Args *a, const GpuKernel *k, uint64_t v) {
        arg(a, k, &v, 8);
}

GpuJob dispatch_job(GpuCodeObject *co, const char *kernel, uint32_t gx, uint32_t bx, const Args *a) {
        int idx = gpu_code_object_find(co, kernel);
        cr_assert_geq(idx, 0, "kernel %s", kernel);
        return (GpuJob) { .type = GPU_JOB_DISPATCH,
                          .dispatch = { .co = co, .kernel = (unsigned) idx, .grid = { gx, 1, 1 },
                                        .block = { bx, 1, 1 }, .args_data = a->data, .args_size = a->size } };
}

const GpuKernel *kernel_of(GpuCodeObject *co, const char *name) {
        int idx = gpu_code_object_find(co, name);
        cr_assert_geq(idx, 0, "kernel %s", name);
        return gpu_code_object_kernel(co, (unsigned) idx);
}

void check_ok(const GpuCompletion *c) {
        cr_assert_not_null(c);
        cr_expect_eq(c->error, 0, "job %llu error %d (%s)", (unsigned long long) c->seq, c->error,
                     c->message ? c->message : "");
        cr_expect_gt(c->end_ns, 0u, "end timestamp written");
        cr_expect_leq(c->begin_ns, c->end_ns);
}

