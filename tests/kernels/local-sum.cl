/* A workgroup sum through two `local` pointer arguments (dynamic LDS the
 * dispatcher sizes): each workgroup writes the sum of its inputs and the
 * largest one. */
__kernel void local_sum(__global const uint *in, __global uint *out, uint n, __local uint *sums,
                        __local uint *maxes)
{
        size_t lid = get_local_id(0), gid = get_global_id(0), ls = get_local_size(0);
        uint v = gid < n ? in[gid] : 0;

        sums[lid] = v;
        maxes[lid] = v;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (size_t s = ls / 2; s > 0; s >>= 1) {
                if (lid < s) {
                        sums[lid] += sums[lid + s];
                        maxes[lid] = max(maxes[lid], maxes[lid + s]);
                }
                barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (lid == 0) {
                out[2 * get_group_id(0)] = sums[0];
                out[2 * get_group_id(0) + 1] = maxes[0];
        }
}
