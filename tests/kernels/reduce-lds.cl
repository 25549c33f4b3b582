/* A workgroup sum in LDS with barriers; one partial sum per workgroup. */
__kernel void reduce_lds(__global const uint *in, __global uint *partial, uint n)
{
        __local uint tmp[256];
        size_t lid = get_local_id(0), gid = get_global_id(0), ls = get_local_size(0);
        tmp[lid] = gid < n ? in[gid] : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (size_t s = ls / 2; s > 0; s >>= 1) {
                if (lid < s)
                        tmp[lid] += tmp[lid + s];
                barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (lid == 0)
                partial[get_group_id(0)] = tmp[0];
}
