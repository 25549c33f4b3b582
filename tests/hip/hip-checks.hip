// SPDX-License-Identifier: MIT
/*
 * One HIP program that checks many things, run unmodified through the
 * broker (tests/integration/test-hip.sh): every HIP process compiles HIP's
 * blit kernels at start, so one process checks as much as it can. Prints
 * "ok N - what" or "not ok N - what: why" per check (TAP) and exits 1 if any
 * failed.
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

__global__ void vadd(const float *a, const float *b, float *c, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n)
                c[i] = a[i] + b[i];
}

/* Shared memory and __syncthreads: each block reverses its slice. */
__global__ void reverse_block(const int *in, int *out) {
        __shared__ int s[256];
        int t = threadIdx.x, base = blockIdx.x * blockDim.x;
        s[t] = in[base + t];
        __syncthreads();
        out[base + t] = s[blockDim.x - 1 - t];
}

/* Global atomics. */
__global__ void count_odd(const int *in, int n, unsigned *count) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n && (in[i] & 1))
                atomicAdd(count, 1u);
}

/* Spins on the device for a while, then writes a value. */
__global__ void slow_write(int *out, int value, int spins) {
        volatile int x = 0;
        for (int i = 0; i < spins; i++)
                x += i;
        if (threadIdx.x == 0)
                *out = value + (x & 0);
}

__global__ void add_one(int *p) {
        *p += 1;
}

int main(void) {
        const int n = 1 << 16;
        size_t bytes = n * sizeof(float);
        int count = 0;
        char why[160];

        check(hipGetDeviceCount(&count) == hipSuccess && count == 1, "hipGetDeviceCount sees one GPU", "not 1");
        hipDeviceProp_t prop;
        HIP_OK(hipGetDeviceProperties(&prop, 0), "hipGetDeviceProperties");
        check(strstr(prop.gcnArchName, "gfx1030") != NULL, "the device is gfx1030", prop.gcnArchName);

        /* Pageable host memory both ways. */
        float *ha = (float *) malloc(bytes), *hb = (float *) malloc(bytes), *hc = (float *) malloc(bytes);
        for (int i = 0; i < n; i++) {
                ha[i] = (float) i;
                hb[i] = 2.0f * (float) i;
        }
        float *da, *db, *dc;
        HIP_OK(hipMalloc(&da, bytes), "hipMalloc a");
        HIP_OK(hipMalloc(&db, bytes), "hipMalloc b");
        HIP_OK(hipMalloc(&dc, bytes), "hipMalloc c");
        HIP_OK(hipMemcpy(da, ha, bytes, hipMemcpyHostToDevice), "hipMemcpy H2D (pageable)");
        HIP_OK(hipMemcpy(db, hb, bytes, hipMemcpyHostToDevice), "hipMemcpy H2D (pageable) again");
        hipLaunchKernelGGL(vadd, dim3(n / 256), dim3(256), 0, 0, da, db, dc, n);
        HIP_OK(hipGetLastError(), "kernel launch");
        HIP_OK(hipMemcpy(hc, dc, bytes, hipMemcpyDeviceToHost), "hipMemcpy D2H (pageable)");
        int bad = 0;
        for (int i = 0; i < n; i++)
                bad += hc[i] != 3.0f * (float) i;
        snprintf(why, sizeof why, "%d of %d wrong", bad, n);
        check(bad == 0, "vadd result", why);

        /* hipHostMalloc memory both ways. */
        float *pa, *pc;
        HIP_OK(hipHostMalloc(&pa, bytes, 0), "hipHostMalloc");
        HIP_OK(hipHostMalloc(&pc, bytes, 0), "hipHostMalloc again");
        for (int i = 0; i < n; i++)
                pa[i] = (float) (n - i);
        HIP_OK(hipMemcpy(da, pa, bytes, hipMemcpyHostToDevice), "hipMemcpy H2D (hipHostMalloc)");
        /* Device to device. */
        HIP_OK(hipMemcpy(db, da, bytes, hipMemcpyDeviceToDevice), "hipMemcpy D2D");
        HIP_OK(hipMemcpy(pc, db, bytes, hipMemcpyDeviceToHost), "hipMemcpy D2H (hipHostMalloc)");
        bad = 0;
        for (int i = 0; i < n; i++)
                bad += pc[i] != (float) (n - i);
        snprintf(why, sizeof why, "%d of %d wrong", bad, n);
        check(bad == 0, "H2D, D2D, D2H through pinned memory", why);

        /* hipMemset. */
        HIP_OK(hipMemset(dc, 0x5a, bytes), "hipMemset");
        HIP_OK(hipMemcpy(hc, dc, bytes, hipMemcpyDeviceToHost), "hipMemcpy D2H after hipMemset");
        bad = 0;
        for (size_t i = 0; i < bytes; i++)
                bad += ((unsigned char *) hc)[i] != 0x5a;
        snprintf(why, sizeof why, "%d of %zu bytes wrong", bad, bytes);
        check(bad == 0, "hipMemset result", why);

        /* Shared memory and __syncthreads, then atomics. */
        int *hi = (int *) malloc(n * sizeof(int)), *ho = (int *) malloc(n * sizeof(int));
        int *di, *dout;
        unsigned *dcount, hcount = 0;
        for (int i = 0; i < n; i++)
                hi[i] = i * 7 + 3;
        HIP_OK(hipMalloc(&di, n * sizeof(int)), "hipMalloc ints");
        HIP_OK(hipMalloc(&dout, n * sizeof(int)), "hipMalloc ints out");
        HIP_OK(hipMalloc(&dcount, sizeof(unsigned)), "hipMalloc counter");
        HIP_OK(hipMemcpy(di, hi, n * sizeof(int), hipMemcpyHostToDevice), "hipMemcpy ints");
        HIP_OK(hipMemset(dcount, 0, sizeof(unsigned)), "hipMemset counter");
        hipLaunchKernelGGL(reverse_block, dim3(n / 256), dim3(256), 0, 0, di, dout);
        hipLaunchKernelGGL(count_odd, dim3(n / 256), dim3(256), 0, 0, di, n, dcount);
        HIP_OK(hipDeviceSynchronize(), "hipDeviceSynchronize");
        HIP_OK(hipMemcpy(ho, dout, n * sizeof(int), hipMemcpyDeviceToHost), "hipMemcpy reversed");
        HIP_OK(hipMemcpy(&hcount, dcount, sizeof hcount, hipMemcpyDeviceToHost), "hipMemcpy counter");
        bad = 0;
        unsigned odd = 0;
        for (int i = 0; i < n; i++) {
                int base = i / 256 * 256;
                bad += ho[i] != hi[base + 255 - (i - base)];
                odd += hi[i] & 1;
        }
        snprintf(why, sizeof why, "%d of %d wrong", bad, n);
        check(bad == 0, "shared memory and __syncthreads", why);
        snprintf(why, sizeof why, "counted %u, expected %u", hcount, odd);
        check(hcount == odd, "atomicAdd", why);

        /* Two streams, an event, hipStreamWaitEvent: s2 must see s1's write. */
        hipStream_t s1, s2;
        hipEvent_t e, t0, t1;
        int *dflag, hflag = 0;
        HIP_OK(hipStreamCreate(&s1), "hipStreamCreate 1");
        HIP_OK(hipStreamCreate(&s2), "hipStreamCreate 2");
        HIP_OK(hipEventCreate(&e), "hipEventCreate");
        HIP_OK(hipEventCreate(&t0), "hipEventCreate t0");
        HIP_OK(hipEventCreate(&t1), "hipEventCreate t1");
        HIP_OK(hipMalloc(&dflag, sizeof(int)), "hipMalloc flag");
        HIP_OK(hipMemset(dflag, 0, sizeof(int)), "hipMemset flag");
        HIP_OK(hipEventRecord(t0, s1), "hipEventRecord t0");
        hipLaunchKernelGGL(slow_write, dim3(1), dim3(64), 0, s1, dflag, 41, 20000);
        HIP_OK(hipEventRecord(e, s1), "hipEventRecord");
        HIP_OK(hipStreamWaitEvent(s2, e, 0), "hipStreamWaitEvent");
        hipLaunchKernelGGL(add_one, dim3(1), dim3(1), 0, s2, dflag);
        HIP_OK(hipEventRecord(t1, s2), "hipEventRecord t1");
        HIP_OK(hipStreamSynchronize(s2), "hipStreamSynchronize");
        HIP_OK(hipMemcpy(&hflag, dflag, sizeof hflag, hipMemcpyDeviceToHost), "hipMemcpy flag");
        snprintf(why, sizeof why, "flag %d, expected 42", hflag);
        check(hflag == 42, "hipStreamWaitEvent orders two streams", why);
        float ms = -1;
        HIP_OK(hipEventElapsedTime(&ms, t0, t1), "hipEventElapsedTime");
        snprintf(why, sizeof why, "%f ms", (double) ms);
        check(ms > 0 && ms < 60000, "hipEventElapsedTime is positive", why);

        HIP_OK(hipStreamDestroy(s1), "hipStreamDestroy 1");
        HIP_OK(hipStreamDestroy(s2), "hipStreamDestroy 2");
        HIP_OK(hipFree(da), "hipFree");
        HIP_OK(hipHostFree(pa), "hipHostFree");
        printf("1..%d\n", n_checks);
        printf("%s: %d of %d checks failed\n", n_failed ? "FAIL" : "PASS", n_failed, n_checks);
        return n_failed ? 1 : 0;
}
