// SPDX-License-Identifier: MIT
// private-array.cl without the device libraries (Debian 12's rocm-device-libs
// have no gfx11 bitcode): work-item ids from the amdgcn builtins, so that
// clang-15 builds it for gfx1100 with -nogpulib. Blocks of 64 work-items,
// one dimension. Built for gfx1030 too, where the simulator runs it.
__kernel void private_array_builtins(__global const uint *in, __global uint *out, uint n) {
        uint i = __builtin_amdgcn_workgroup_id_x() * 64u + __builtin_amdgcn_workitem_id_x();
        uint v, a[64], acc = 0;

        if (i >= n)
                return;
        v = in[i];
        for (int q = 0; q < 64; q++)
                a[q] = v * (uint) q + i;
        for (int q = 0; q < 16; q++)
                acc += a[(v + (uint) q * 7) & 63];
        out[i] = acc;
}
