/* Holds its compute queue until the CPU writes a non-zero value to *flag
 * (through the buffer's dma-buf mapping), or max_spins polls went by; stores
 * how many polls it made, so a test can tell it really waited. */
__kernel void gate(__global uint *flag, __global uint *out, uint max_spins)
{
        uint spins = 0;

        if (get_global_id(0) != 0)
                return;
        while (atomic_add(flag, 0u) == 0u && spins < max_spins)
                spins++;
        out[0] = spins;
        out[1] = atomic_add(flag, 0u);
}
