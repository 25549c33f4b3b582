// SPDX-License-Identifier: MIT
/*
 * What bench-hip (tests/bench/bench-hip.c) measures inside a HIP program run
 * through the broker: an empty kernel's launch + hipDeviceSynchronize (p50
 * and p99 over N after a warm-up), and hipMemcpy of 256 MiB from
 * hipHostMalloc memory to the device against memcpy of the same bytes
 * (median of 5 each). "idle SECONDS" instead initialises HIP, makes two
 * streams, runs one kernel and then waits, for the daemon's idle cost.
 * Prints "key value" lines.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__global__ void empty(void) {
}

static double now_us(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
        if (argc > 2 && strcmp(argv[1], "idle") == 0) {
                hipStream_t s1, s2;
                if (hipStreamCreate(&s1) != hipSuccess || hipStreamCreate(&s2) != hipSuccess)
                        return 1;
                hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, s1);
                hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, s2);
                if (hipDeviceSynchronize() != hipSuccess)
                        return 1;
                printf("ready\n");
                fflush(stdout);
                sleep((unsigned) atoi(argv[2]));
                return 0;
        }
        int n = argc > 1 ? atoi(argv[1]) : 300;
        double *lat = (double *) calloc((size_t) n, sizeof(double));
        for (int i = 0; i < 20 + n; i++) {
                double t0 = now_us();
                hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, 0);
                if (hipDeviceSynchronize() != hipSuccess)
                        return 1;
                if (i >= 20)
                        lat[i - 20] = now_us() - t0;
        }
        qsort(lat, (size_t) n, sizeof(double), cmp);
        printf("launch_p50_us %.1f\nlaunch_p99_us %.1f\n", lat[n / 2], lat[n * 99 / 100]);

        size_t bytes = 256u << 20;
        char *host, *plain = (char *) malloc(bytes), *dst = (char *) malloc(bytes);
        void *dev;
        if (hipHostMalloc((void **) &host, bytes, 0) != hipSuccess || hipMalloc(&dev, bytes) != hipSuccess)
                return 1;
        memset(host, 1, bytes);
        memset(plain, 1, bytes);
        memset(dst, 0, bytes);
        double h2d[5], mc[5];
        for (int i = 0; i < 5; i++) {
                double t0 = now_us();
                if (hipMemcpy(dev, host, bytes, hipMemcpyHostToDevice) != hipSuccess)
                        return 1;
                h2d[i] = now_us() - t0;
                t0 = now_us();
                memcpy(dst, plain, bytes);
                mc[i] = now_us() - t0;
        }
        /* Use what memcpy wrote, so that it is not optimised away. */
        unsigned long sum = 0;
        for (size_t i = 0; i < bytes; i += 4096)
                sum += (unsigned char) dst[i];
        printf("checksum %lu\n", sum);
        qsort(h2d, 5, sizeof(double), cmp);
        qsort(mc, 5, sizeof(double), cmp);
        printf("memcpy_h2d_gbps %.3f\nmemcpy_host_gbps %.3f\n", bytes / h2d[2] / 1e3, bytes / mc[2] / 1e3);
        return 0;
}
