// SPDX-License-Identifier: MIT
/*
 * What bench-hip (tests/bench/bench-hip.c) measures inside a HIP program run
 * through the broker. Three modes, each printing "key value..." lines:
 *  - "hip-bench [N]": an empty kernel's launch + hipDeviceSynchronize (p50
 *    and p99 over N after a warm-up), and hipMemcpy of 256 MiB from
 *    hipHostMalloc memory to the device against memcpy of the same bytes
 *    (median of 5 each);
 *  - "hip-bench serve": the same measurements on command, so that a
 *    benchmark can interleave them with its own baseline in one run. After
 *    "ready" it reads lines on stdin: "launch N" answers "launch" and N
 *    latencies in us; "copy" answers "copy", the us of one hipMemcpy of
 *    256 MiB from hipHostMalloc memory to the device and the us of one
 *    memcpy of 256 MiB (the first "copy" also checks that the bytes reached
 *    the device); "quit" (or the end of stdin) ends it;
 *  - "hip-bench idle SECONDS": initialises HIP, makes two streams, runs one
 *    kernel on each, prints "ready" and waits, for the daemon's idle cost;
 *    then runs one more kernel on each and prints "done".
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define COPY_BYTES (256u << 20)

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

/* One empty kernel launched and waited for: its us, or -1 on an error. */
static double launch_once(void) {
        double t0 = now_us();
        hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, 0);
        if (hipDeviceSynchronize() != hipSuccess)
                return -1;
        return now_us() - t0;
}

typedef struct Copy {
        char *host, *plain, *dst;
        void *dev;
        int checked;
} Copy;

static int copy_init(Copy *c) {
        c->plain = (char *) malloc(COPY_BYTES);
        c->dst = (char *) malloc(COPY_BYTES);
        if (!c->plain || !c->dst || hipHostMalloc((void **) &c->host, COPY_BYTES, 0) != hipSuccess ||
            hipMalloc(&c->dev, COPY_BYTES) != hipSuccess) {
                fprintf(stderr, "hip-bench: cannot allocate 2 x 256 MiB for the copy\n");
                return -1;
        }
        for (size_t i = 0; i < COPY_BYTES; i++)
                c->host[i] = (char) (i * 7 + 1);
        memcpy(c->plain, c->host, COPY_BYTES);
        memset(c->dst, 0, COPY_BYTES);
        return 0;
}

/* One hipMemcpy to the device and one memcpy of the same bytes, in us. */
static int copy_once(Copy *c, double *h2d, double *mc) {
        double t0 = now_us();
        if (hipMemcpy(c->dev, c->host, COPY_BYTES, hipMemcpyHostToDevice) != hipSuccess)
                return -1;
        *h2d = now_us() - t0;
        t0 = now_us();
        memcpy(c->dst, c->plain, COPY_BYTES);
        *mc = now_us() - t0;
        /* Use what memcpy wrote, so that it is not optimised away. */
        if (c->dst[COPY_BYTES - 1] != c->plain[COPY_BYTES - 1])
                return -1;
        if (!c->checked) {
                /* The last 64 KiB and a slice in the middle did arrive. */
                static char back[65536];
                size_t at[] = { COPY_BYTES - sizeof back, COPY_BYTES / 2 + 4096 };
                for (int i = 0; i < 2; i++)
                        if (hipMemcpy(back, (char *) c->dev + at[i], sizeof back, hipMemcpyDeviceToHost) != hipSuccess ||
                            memcmp(back, c->host + at[i], sizeof back) != 0) {
                                fprintf(stderr, "hip-bench: the copy did not reach the device intact\n");
                                return -1;
                        }
                c->checked = 1;
        }
        return 0;
}

static int serve(void) {
        char line[64];
        Copy c = {};

        if (launch_once() < 0)
                return 1;
        printf("ready\n");
        fflush(stdout);
        while (fgets(line, sizeof line, stdin)) {
                int n;
                if (sscanf(line, "launch %d", &n) == 1 && n > 0) {
                        printf("launch");
                        for (int i = 0; i < n; i++) {
                                double us = launch_once();
                                if (us < 0)
                                        return 1;
                                printf(" %.1f", us);
                        }
                        printf("\n");
                } else if (strcmp(line, "copy\n") == 0) {
                        double h2d, mc;
                        if ((!c.dev && copy_init(&c) < 0) || copy_once(&c, &h2d, &mc) < 0)
                                return 1;
                        printf("copy %.1f %.1f\n", h2d, mc);
                } else if (strcmp(line, "quit\n") == 0)
                        break;
                else {
                        fprintf(stderr, "hip-bench: unknown command: %s", line);
                        return 2;
                }
                fflush(stdout);
        }
        return 0;
}

static int idle(unsigned seconds) {
        hipStream_t s1, s2;
        if (hipStreamCreate(&s1) != hipSuccess || hipStreamCreate(&s2) != hipSuccess)
                return 1;
        hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, s1);
        hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, s2);
        if (hipDeviceSynchronize() != hipSuccess)
                return 1;
        printf("ready\n");
        fflush(stdout);
        sleep(seconds);
        /* Work after an idle period still runs: with HSA_ENABLE_INTERRUPT=0
         * ROCr makes no KFD call between its doorbell store and the end of
         * its spin, and only the relay's own look finds the packets. */
        hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, s1);
        hipLaunchKernelGGL(empty, dim3(1), dim3(1), 0, s2);
        if (hipDeviceSynchronize() != hipSuccess)
                return 1;
        printf("done\n");
        return 0;
}

int main(int argc, char **argv) {
        if (argc > 2 && strcmp(argv[1], "idle") == 0)
                return idle((unsigned) atoi(argv[2]));
        if (argc > 1 && strcmp(argv[1], "serve") == 0)
                return serve();
        int n = argc > 1 ? atoi(argv[1]) : 300;
        if (n <= 0)
                n = 300;
        double *lat = (double *) calloc((size_t) n, sizeof(double));
        for (int i = 0; i < 20 + n; i++) {
                double us = launch_once();
                if (us < 0)
                        return 1;
                if (i >= 20)
                        lat[i - 20] = us;
        }
        qsort(lat, (size_t) n, sizeof(double), cmp);
        printf("launch_p50_us %.1f\nlaunch_p99_us %.1f\n", lat[n / 2], lat[n * 99 / 100]);

        Copy c = {};
        double h2d[5], mc[5];
        if (copy_init(&c) < 0)
                return 1;
        for (int i = 0; i < 5; i++)
                if (copy_once(&c, &h2d[i], &mc[i]) < 0)
                        return 1;
        qsort(h2d, 5, sizeof(double), cmp);
        qsort(mc, 5, sizeof(double), cmp);
        printf("memcpy_h2d_gbps %.3f\nmemcpy_host_gbps %.3f\n", COPY_BYTES / h2d[2] / 1e3,
               COPY_BYTES / mc[2] / 1e3);
        return 0;
}
