/* 64-bit integer math: multiply, 64-bit division and remainder, shifts, rotates. */
__kernel void int64_math(__global const ulong *a, __global const ulong *b, __global ulong *out, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        ulong x = a[i], y = b[i] | 1;
        long sx = (long) x;
        out[4 * i + 0] = x * y + (x >> 7) - (y << 3);
        out[4 * i + 1] = x / y + x % y;
        out[4 * i + 2] = (ulong) (sx / (long) (y >> 40 | 3)) ^ rotate(x, (ulong) (y & 63));
        out[4 * i + 3] = mul_hi(x, y) + (ulong) (sx >> 13) + (ulong) mad_hi((long) x, (long) y, 5L);
}
