/* Narrow loads and stores: bytes and shorts, and a float4 (dwordx4) copy. */
__kernel void bytes_shorts(__global const uchar *b, __global const ushort *s, __global const float4 *v,
                           __global uint *out, __global uchar *ob, __global ushort *os, __global float4 *ov,
                           uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        out[i] = (uint) b[i] * 3u + (uint) s[i];
        ob[i] = (uchar) (b[i] + 1);
        os[i] = (ushort) (s[i] ^ 0xa5a5);
        float4 t = v[i];
        ov[i] = (float4) (t.w, t.z, t.y, t.x) * 2.0f;
}
