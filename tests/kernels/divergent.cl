/* Divergent branches: nested if/else and a switch chosen per lane. */
__kernel void divergent(__global const int *in, __global int *out, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        int v = in[i], r;
        if (v < 0) {
                r = -v * 3;
                if (r > 100)
                        r -= 100;
        } else if ((v & 3) == 1) {
                r = v * v;
        } else {
                switch (v % 5) {
                case 0: r = v + 11; break;
                case 1: r = v ^ 0x55; break;
                case 2: r = v << 3; break;
                default: r = v / 7; break;
                }
        }
        out[i] = r;
}
