/* IEEE division in single and double precision, including the operands that
 * take the scaling paths of v_div_scale/v_div_fmas/v_div_fixup (denormal
 * quotients, huge exponent differences, zeros, infinities, NaN). */
__kernel void divide(__global const float *a, __global const float *b, __global float *q,
                     __global const double *c, __global const double *d, __global double *r, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        q[i] = a[i] / b[i];
        r[i] = c[i] / d[i];
}
