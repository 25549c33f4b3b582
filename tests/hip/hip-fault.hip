// SPDX-License-Identifier: MIT
/*
 * A HIP program whose kernel writes a wild address (tests/integration/
 * test-hip.sh): ROCr must report the memory access fault in this process
 * (and abort it, as it does on hardware), nothing else.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void wild(int *p) {
        p[threadIdx.x] = 1;
}

int main(void) {
        int *good;
        if (hipMalloc(&good, 4096) != hipSuccess)
                return 2;
        hipLaunchKernelGGL(wild, dim3(1), dim3(64), 0, 0, (int *) 0x10000000000ull);
        hipError_t e = hipDeviceSynchronize();
        printf("hipDeviceSynchronize: %s\n", hipGetErrorString(e));
        return 3;
}
