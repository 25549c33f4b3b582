/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the tests that dispatch corpus kernels (tests/kernels, built to
 * KERNEL_DIR) on the GPU layer's fixture (gpu-test.h): test-gpu-dispatch.c,
 * test-gpu-caches.c.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

#define COMPUTE_QUEUE 2u /* default context: SDMA 0 and 1, compute 2 */

/* Kernel arguments by value, in the kernel's explicit argument order. */
typedef struct Args {
        uint8_t data[1024];
        uint32_t size;
        unsigned next;
} Args;

/* The bytes of KERNEL_DIR/name (malloc'd). */
void *read_kernel_file(const char *name, size_t *ret_size);
/* KERNEL_DIR/file loaded into the fixture's context. */
GpuCodeObject *load_kernel_file(const char *file);
void arg(Args *a, const GpuKernel *k, const void *v, uint32_t n);
void arg_u32(Args *a, const GpuKernel *k, uint32_t v);
void arg_ptr(Args *a, const GpuKernel *k, uint64_t v);
GpuJob dispatch_job(GpuCodeObject *co, const char *kernel, uint32_t gx, uint32_t bx, const Args *a);
const GpuKernel *kernel_of(GpuCodeObject *co, const char *name);
/* A completion without error, with its timestamps. */
void check_ok(const GpuCompletion *c);
