/* Stores far outside any buffer (p + offset): the GPU faults, the job fails
 * with EFAULT and the daemon keeps serving. */
__kernel void fault(__global uint *p, ulong offset)
{
        if (get_global_id(0) == 0)
                p[offset] = 0xdeadbeef;
}
