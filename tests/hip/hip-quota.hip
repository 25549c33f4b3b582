// SPDX-License-Identifier: MIT
/*
 * Run with a BufferMemory= limit (tests/integration/test-hip.sh): a
 * hipMalloc over it must fail with hipErrorOutOfMemory, and the program must
 * go on — a smaller allocation and a kernel still work. argv[1]: MiB to ask
 * for beyond the limit.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>
#include <stdlib.h>

__global__ void fill(int *p, int v) {
        p[threadIdx.x] = v;
}

int main(int argc, char **argv) {
        size_t big = (size_t) (argc > 1 ? atoi(argv[1]) : 512) << 20;
        void *p = NULL;
        int *small, h[64];
        hipError_t e = hipMalloc(&p, big);
        printf("big hipMalloc: %s\n", hipGetErrorString(e));
        if (e != hipErrorOutOfMemory)
                return 1;
        (void) hipGetLastError();
        if (hipMalloc(&small, 64 * sizeof(int)) != hipSuccess)
                return 2;
        hipLaunchKernelGGL(fill, dim3(1), dim3(64), 0, 0, small, 7);
        if (hipMemcpy(h, small, sizeof h, hipMemcpyDeviceToHost) != hipSuccess)
                return 3;
        for (int i = 0; i < 64; i++)
                if (h[i] != 7)
                        return 4;
        printf("after it: a small hipMalloc and a kernel work\n");
        return 0;
}
