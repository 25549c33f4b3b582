/* Reads n words at an absolute GPU address into out, then overwrites them
 * with value: a kernel that tries to reach memory it was not given
 * (tests/integration/test-isolation.c). In a GPU context of its own the first
 * access faults; in a context shared with the owner of that memory it would
 * read and write it. */
__kernel void poke(ulong addr, uint value, uint n, __global uint *out)
{
        __global uint *p = (__global uint *) addr;
        size_t i = get_global_id(0);

        if (i < n) {
                out[i] = p[i];
                p[i] = value;
        }
}
