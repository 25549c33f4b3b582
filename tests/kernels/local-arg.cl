/* Two `local` pointer arguments: dynamic LDS the dispatcher sizes and places
 * (regions after the static LDS, one per argument, not overlapping), read back
 * reversed within the workgroup — get_local_size() of a partial last
 * workgroup is its real size (from the dispatch packet). */
__kernel void local_arg(__global const uint *in, __global uint *out, __local uint *a, __local uint *b, uint n)
{
        size_t lid = get_local_id(0), gid = get_global_id(0), ls = get_local_size(0);
        a[lid] = gid < n ? in[gid] : 0;
        b[lid] = (uint) lid * 3u;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (gid < n)
                out[gid] = a[ls - 1 - lid] + (b[ls - 1 - lid] << 20);
}
