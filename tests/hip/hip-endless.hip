// SPDX-License-Identifier: MIT
/*
 * A HIP program whose kernel never ends (tests/integration/test-hip.sh):
 * the broker's DispatchTimeout= must end it, and the program must learn of
 * it as of a queue error on hardware — not hang.
 */
#include <hip/hip_runtime.h>
#include <stdio.h>

__global__ void endless(volatile int *flag) {
        while (*flag == 0)
                ;
}

int main(void) {
        int *flag;
        if (hipMalloc(&flag, sizeof(int)) != hipSuccess || hipMemset(flag, 0, sizeof(int)) != hipSuccess)
                return 2;
        hipLaunchKernelGGL(endless, dim3(1), dim3(64), 0, 0, flag);
        printf("launched\n");
        fflush(stdout);
        hipError_t e = hipDeviceSynchronize();
        printf("hipDeviceSynchronize: %s\n", hipGetErrorString(e));
        return e == hipSuccess ? 0 : 4;
}
