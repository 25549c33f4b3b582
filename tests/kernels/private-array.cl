/* A dynamically indexed private array, which forces real scratch memory. */
__kernel void private_array(__global const uint *in, __global uint *out, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        volatile uint a[64];
        uint v = in[i];
        for (int j = 0; j < 64; j++)
                a[j] = v * (uint) j + (uint) i;
        uint acc = 0;
        for (int j = 0; j < 16; j++)
                acc += a[(v + (uint) j * 7) & 63];
        out[i] = acc;
}
