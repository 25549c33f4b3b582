/* OpenCL float math from the device libraries: exp, log, pow, sin/cos on
 * moderate arguments, fmod, hypot, copysign, round/rint/ceil, ldexp/frexp,
 * and double arithmetic. */
__kernel void float_builtins(__global const float *a, __global const float *b, __global float *out,
                             __global double *dout, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        float x = a[i], y = b[i];
        __global float *o = out + 12 * i;
        o[0] = exp(x * 0.01f);
        o[1] = log(fabs(y) + 1.0f);
        o[2] = sin(x * 0.01f) + cos(y * 0.01f);
        o[3] = pow(fabs(x) * 0.01f + 0.5f, 1.5f);
        o[4] = fmod(x, y == 0.0f ? 1.0f : y);
        o[5] = hypot(x, y);
        o[6] = copysign(x, y) + round(y * 0.3f) + rint(x * 0.7f) + ceil(y * 0.1f);
        int e;
        o[7] = ldexp(frexp(x, &e), 3) + (float) e;
        o[8] = tanh(x * 0.001f) + atan2(y, x + 0.5f);
        o[9] = exp2(x * 0.001f) + log2(fabs(x) + 2.0f) + rsqrt(fabs(y) + 1.0f);
        o[10] = cbrt(x) + fma(x, y, 1.0f);
        o[11] = fabs(x) - trunc(y * 0.5f);
        double dx = (double) x, dy = (double) y;
        dout[2 * i] = dx * dy + dx / (dy == 0.0 ? 3.0 : dy) - sqrt(fabs(dx));
        dout[2 * i + 1] = floor(dx * 0.37) + (double) (long) (dy * 1e3) + fmax(dx, dy);
}
