/* A loop with a data-dependent trip count: Collatz steps of each input. */
__kernel void collatz(__global const uint *in, __global uint *steps, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        uint v = in[i], s = 0;
        while (v > 1 && s < 100000) {
                v = (v & 1) ? 3 * v + 1 : v / 2;
                s++;
        }
        steps[i] = s;
}
