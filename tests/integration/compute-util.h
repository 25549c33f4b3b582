/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the compute integration tests: where the code objects built
 * from tests/kernels are, loading one through libkfdbroker, buffers filled
 * and read through their dma-buf mappings, and one dispatch run to its end.
 * Header-only (static functions) so each test program takes what it uses.
 */
#pragma once

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "kfdbroker.h"

#define DISPATCH_TIMEOUT_MS 120000

/* Skips the test when the kernels could not be built (no clang-15). */
static inline void compute_require_kernels(void) {
#ifndef COMPUTE_KERNEL_DIR
        cr_skip_test("the test kernels were not built: clang-15 with the AMDGPU device libraries is missing");
#endif
}

/* Path of tests/kernels/NAME.cl built as a code object. */
static inline const char *kernel_path(const char *name) {
        static char path[4][512];
        static unsigned next;
        char *p = path[next++ % 4];

#ifdef COMPUTE_KERNEL_DIR
        snprintf(p, sizeof(path[0]), "%s/%s.hsaco", COMPUTE_KERNEL_DIR, name);
#else
        snprintf(p, sizeof(path[0]), "(not built)/%s.hsaco", name);
#endif
        return p;
}

static inline kfdb_code_object *load_kernel(kfdb_session *s, const char *name) {
        kfdb_code_object *co = NULL;
        int r = kfdb_code_object_load_file(s, kernel_path(name), &co);

        cr_assert_eq(r, 0, "loading %s: %s (%s)", kernel_path(name), strerror(-r), kfdb_session_last_error(s));
        return co;
}

/* A GTT buffer of at least size bytes, mapped, every byte set to poison. */
static inline kfdb_buffer *new_buffer(kfdb_session *s, size_t size, uint8_t poison, void **ret_map) {
        kfdb_buffer *b = NULL;
        void *map = NULL;
        int r;

        r = kfdb_buffer_alloc(s, size ? size : 1, KFDB_PLACEMENT_GTT, &b);
        cr_assert_eq(r, 0, "alloc %zu: %s", size, kfdb_session_last_error(s));
        cr_assert_eq(kfdb_buffer_map(b, &map), 0);
        memset(map, poison, kfdb_buffer_get_size(b));
        *ret_map = map;
        return b;
}

/* Submits one dispatch and waits for it; asserts it succeeded. */
static inline void run_dispatch(kfdb_session *s, const kfdb_code_object *co, const char *kernel, unsigned dims,
                                const uint32_t *grid, const uint32_t *block, const kfdb_arg *args, size_t n_args) {
        kfdb_batch *b = NULL;
        uint64_t fence;
        int r;

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        r = kfdb_batch_dispatch(b, co, kernel, dims, grid, block, args, n_args);
        cr_assert_eq(r, 0, "%s: %s", kernel, kfdb_session_last_error(s));
        r = kfdb_batch_submit(b, NULL, &fence);
        cr_assert_eq(r, 0, "%s: submit: %s", kernel, kfdb_session_last_error(s));
        r = kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS);
        cr_assert_eq(r, 0, "%s: %s (%s)", kernel, strerror(-r), kfdb_session_last_error(s));
        kfdb_batch_free(b);
}

/* Runs the gate kernel (tests/kernels/gate.cl: holds its queue until *flag
 * != 0) and returns its fence. */
static inline uint64_t hold_gpu(kfdb_session *s, const kfdb_code_object *gate, kfdb_buffer *flag, kfdb_buffer *out) {
        uint32_t one = 1, max = UINT32_MAX;
        kfdb_arg args[] = { kfdb_arg_buffer(flag, 0), kfdb_arg_buffer(out, 0), kfdb_arg_value(&max, 4) };
        kfdb_batch *b = NULL;
        uint64_t fence;

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_dispatch(b, gate, "gate", 1, &one, &one, args, 3), 0);
        cr_assert_eq(kfdb_batch_submit(b, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        kfdb_batch_free(b);
        return fence;
}

static inline uint64_t splitmix64(uint64_t x) {
        x += 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
}
