/* SPDX-License-Identifier: MIT */
/*
 * The compute parts of kfdbrokerctl: the saxpy step of `demo` and the
 * `kernels` verb. Both talk to the daemon through libkfdbroker only.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "kfdbroker.h"

/* The saxpy code object built from tests/kernels/saxpy.cl at build time
 * (ctl-demo-kernel.c, generated); size 0 and a reason when it could not be. */
extern const unsigned char ctl_saxpy_hsaco[];
extern const unsigned long ctl_saxpy_hsaco_size;
extern const char ctl_saxpy_hsaco_missing[];

#define CTL_SAXPY_DEFAULT_ELEMENTS (16u << 20)

typedef struct CtlSaxpyResult {
        bool ran;             /* false: skipped (skip_reason says why) */
        char skip_reason[256];
        uint64_t elements;
        uint64_t wrong;       /* elements that differ from the CPU's result */
        double ms;            /* submit -> completion seen */
        double elements_per_s;
} CtlSaxpyResult;

/*
 * Runs y = a * x + y over @elements floats on the GPU through the broker:
 * two buffers filled through their dma-buf mappings, one dispatch, then
 * every element checked against the same fma on the CPU. Prints its lines
 * unless @json. Returns 0 (also when skipped: no compute, no kernel, not
 * allowed by policy) or a negative errno after printing what failed.
 */
int ctl_demo_saxpy(kfdb_session *s, const char *prog, bool json, uint64_t elements, CtlSaxpyResult *ret);

/* `kernels FILE`: loads FILE through the broker and lists its kernels and arguments. */
int ctl_kernels(kfdb_session *s, const char *prog, bool json, const char *path);
