/* SPDX-License-Identifier: MIT */
/*
 * What the benchmarks of tests/bench share: a monotonic clock in ns and the
 * order statistics they report (medians, p50/p99). Header-only.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

static inline uint64_t now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static inline int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* Sorts v. */
static inline double median(double *v, size_t n) {
        qsort(v, n, sizeof *v, cmp_double);
        return v[n / 2];
}

/* Sorts v (ns); the 50th and 99th percentiles in us. */
static inline void percentiles(uint64_t *v, size_t n, double *p50, double *p99) {
        qsort(v, n, sizeof(*v), cmp_u64);
        *p50 = (double) v[n / 2] / 1000.0;
        *p99 = (double) v[(n * 99) / 100] / 1000.0;
}
