// SPDX-License-Identifier: MIT
/*
 * Several GPUs through the broker (tests/integration/test-hip.sh): a
 * program given N GPUs sees N (hipGetDeviceCount()), each a gfx1030, and
 * runs a kernel and copies both ways on the one it names with
 * hipSetDevice() — its results checked. Usage: hip-gpus COUNT DEVICE; the
 * last line is "PASS: 0 of K checks failed" or "FAIL: ...".
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_checks, n_failed;

static void check(bool ok, const char *what, const char *why) {
        n_checks++;
        if (ok)
                printf("ok %d - %s\n", n_checks, what);
        else {
                n_failed++;
                printf("not ok %d - %s: %s\n", n_checks, what, why);
        }
        fflush(stdout);
}

#define HIP_OK(expr, what)                                                                                             \
        do {                                                                                                           \
                hipError_t e_ = (expr);                                                                                \
                check(e_ == hipSuccess, what, hipGetErrorString(e_));                                                  \
        } while (0)

__global__ void scale_add(const int *in, int *out, int k, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                out[i] = in[i] * k + i;
}

int main(int argc, char **argv) {
        const int n = 1 << 14;
        int want = argc > 1 ? atoi(argv[1]) : 2, device = argc > 2 ? atoi(argv[2]) : 1, count = 0;
        char why[160];

        HIP_OK(hipGetDeviceCount(&count), "hipGetDeviceCount");
        snprintf(why, sizeof why, "%d, not %d", count, want);
        check(count == want, "hipGetDeviceCount sees the session's GPUs", why);
        for (int d = 0; d < count; d++) {
                hipDeviceProp_t prop;
                HIP_OK(hipGetDeviceProperties(&prop, d), "hipGetDeviceProperties");
                check(strstr(prop.gcnArchName, "gfx1030") != NULL, "the device is gfx1030", prop.gcnArchName);
        }
        HIP_OK(hipSetDevice(device), "hipSetDevice");
        int current = -1;
        HIP_OK(hipGetDevice(&current), "hipGetDevice");
        check(current == device, "hipGetDevice names it", "another");

        int *h = (int *) malloc(n * sizeof(int)), *in = NULL, *out = NULL;
        for (int i = 0; i < n; i++)
                h[i] = i;
        HIP_OK(hipMalloc(&in, n * sizeof(int)), "hipMalloc in");
        HIP_OK(hipMalloc(&out, n * sizeof(int)), "hipMalloc out");
        hipPointerAttribute_t attr;
        HIP_OK(hipPointerGetAttributes(&attr, in), "hipPointerGetAttributes");
        check(attr.device == device, "the buffer is on that device", "on another");
        HIP_OK(hipMemcpy(in, h, n * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy H2D");
        hipLaunchKernelGGL(scale_add, dim3(n / 256), dim3(256), 0, 0, in, out, 3, n);
        HIP_OK(hipGetLastError(), "kernel launch");
        HIP_OK(hipDeviceSynchronize(), "hipDeviceSynchronize");
        memset(h, 0, n * sizeof(int));
        HIP_OK(hipMemcpy(h, out, n * sizeof(int), hipMemcpyDeviceToHost), "hipMemcpy D2H");
        int bad = 0;
        for (int i = 0; i < n; i++)
                bad += h[i] != 4 * i;
        snprintf(why, sizeof why, "%d of %d wrong", bad, n);
        check(bad == 0, "the kernel's result", why);
        HIP_OK(hipFree(in), "hipFree in");
        HIP_OK(hipFree(out), "hipFree out");
        free(h);
        printf("%s: %d of %d checks failed\n", n_failed ? "FAIL" : "PASS", n_failed, n_checks);
        return n_failed ? 1 : 0;
}
