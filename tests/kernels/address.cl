/* Stores the GPU address its buffer argument has in the context it runs in:
 * where that client's memory is, for a probe from another client
 * (tests/integration/test-isolation.c). */
__kernel void address(__global uint *buf, __global ulong *out)
{
        if (get_global_id(0) == 0)
                out[0] = (ulong) buf;
}
