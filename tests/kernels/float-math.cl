/* Float division and square root (IEEE: v_div_scale/fmas/fixup, v_sqrt), rsqrt,
 * conversions, min/max and floor. */
__kernel void float_math(__global const float *a, __global const float *b, __global float *out, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        float x = a[i], y = b[i];
        out[4 * i + 0] = x / y;
        out[4 * i + 1] = sqrt(fabs(x)) + native_rsqrt(fabs(y) + 1.0f);
        out[4 * i + 2] = fmin(x, y) * 3.0f - fmax(x, y) + floor(x) + (float) (int) y;
        out[4 * i + 3] = (float) ((uint) fabs(x * 100.0f) % 7u) + 1.0f / (fabs(x) + 0.5f);
}
