/* 16-bit halves of registers loaded and stored on their own (the _d16 and
 * _d16_hi forms of global and LDS loads/stores): half2 and short2 built
 * from scalar loads, and their upper halves stored alone. */
#pragma OPENCL EXTENSION cl_khr_fp16 : enable

__kernel void d16(__global const half *h, __global const uchar *u8, __global const char *s8,
                  __global const short *s16, __global half2 *h2out, __global short2 *s2out,
                  __global half *hout, __global short *sout)
{
        __local half lh[128];
        __local short ls[128];
        size_t i = get_global_id(0), l = get_local_id(0);
        half2 v = (half2) (h[i], h[(i * 7) & 1023]) * (half2) (2.0h, 0.5h);
        short2 w = (short2) ((short) u8[i] - 7, (short) s8[i] * 3);
        lh[l] = v.y;
        ls[l] = w.y;
        barrier(CLK_LOCAL_MEM_FENCE);
        size_t o = (l + 1) % get_local_size(0);
        half2 x = (half2) (lh[o], lh[l]) + v;
        short2 y = (short2) (ls[o], ls[l]) + w + (short2) (s16[i], s16[(i * 5) & 1023]);
        h2out[i] = x;
        s2out[i] = y;
        hout[i] = x.y;
        sout[i] = y.y;
}
