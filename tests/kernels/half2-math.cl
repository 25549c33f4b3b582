/* Packed half2 arithmetic (VOP3P: v_pk_add/mul/fma/min/max_f16, op_sel,
 * op_sel_hi, neg_lo/neg_hi), short2 arithmetic (v_pk_add_u16, v_pk_mul_lo_u16,
 * shifts, min/max) and the mixed-precision fma. FP contraction is off. */
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL FP_CONTRACT OFF

__kernel void half2_math(__global const half2 *a, __global const half2 *b, __global const half2 *c,
                         __global half2 *out, __global const short2 *s, __global short2 *sout,
                         __global const float *f, __global float *fout)
{
        size_t i = get_global_id(0);
        half2 x = a[i], y = b[i], z = c[i];
        short2 p = s[i], q = s[i + 1];
        __global half2 *o = out + 8 * i;

        o[0] = x + y;
        o[1] = x * y - z;
        o[2] = fma(x, y.yx, z);
        o[3] = fma(-x, y, (half2) (1.5h, -2.0h));
        o[4] = fmin(x, y) + fmax(-x, z.yx);
        o[5] = (half2) (x.y, y.x) * (half2) (0.5h, 0.5h);
        o[6] = x.xx + y.yy;
        o[7] = fma(x, (half2) (2.0h, 2.0h), -y);
        sout[3 * i] = p + q;
        sout[3 * i + 1] = p * q - (short2) (3, -7);
        sout[3 * i + 2] = max(p, q) + (min(p >> (short2) (1, 3), q) << (short2) (2, 1));
        fout[2 * i] = fma((float) x.x, (float) y.y, f[i]);
        fout[2 * i + 1] = fma((float) x.y, f[i], (float) z.x);
}
