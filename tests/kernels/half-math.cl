/* Scalar half (cl_khr_fp16) arithmetic: the VOP2/VOP1/VOP3 f16 operations,
 * conversions to and from f32 and 16-bit integers, and f16 compares. FP
 * contraction is off so that every operation is the one written; fma() asks
 * for the fused ones. */
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL FP_CONTRACT OFF

__kernel void half_math(__global const half *a, __global const half *b, __global const half *c,
                        __global half *out, __global short *iout, __global uint *flags)
{
        size_t i = get_global_id(0);
        half x = a[i], y = b[i], z = c[i];
        __global half *o = out + 16 * i;

        o[0] = x + y;
        o[1] = x - y;
        o[2] = x * y;
        o[3] = fma(x, y, z);
        o[4] = fma(x, (half) 1.5h, z);
        o[5] = fma(x, y, (half) -0.75h);
        o[6] = fmin(x, y);
        o[7] = fmax(x, z);
        o[8] = x / y;
        o[9] = sqrt(x);
        o[10] = floor(x) + ceil(y);
        o[11] = trunc(x) - rint(y);
        o[12] = ldexp(x, (int) (i % 19) - 9);
        o[13] = (half) ((float) x * 0.375f);
        o[14] = convert_half((short) (i * 977 - 30000));
        o[15] = fabs(x) * -y;
        iout[2 * i] = convert_short_sat(x * (half) 64.0h);
        iout[2 * i + 1] = (short) as_ushort(x * y);
        flags[i] = (x < y) | (x <= y) << 1 | (x == y) << 2 | (x != y) << 3 | (x > y) << 4 | (x >= y) << 5 |
                   isnan(x) << 6 | isinf(y) << 7 | isordered(x, y) << 8 | isunordered(x, z) << 9;
}
