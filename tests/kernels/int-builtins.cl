/* OpenCL integer builtins and narrow types: popcount, clz, ctz, rotate,
 * mul24/mad24, mul_hi, abs_diff, hadd, add_sat/sub_sat, min/max/clamp,
 * select, bitfield tricks, char/short arithmetic and saturating conversion. */
__kernel void int_builtins(__global const int *a, __global const int *b, __global int *out, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        int x = a[i], y = b[i];
        uint ux = (uint) x, uy = (uint) y;
        __global int *o = out + 16 * i;
        o[0] = popcount(ux) + (int) clz(ux) * 64 + (int) ctz(uy) * 4096;
        o[1] = (int) rotate(ux, uy);
        o[2] = mul24(x & 0x7fffff, y & 0x3fff) + mad24(x >> 12, y >> 20, 7);
        o[3] = mul_hi(x, y) ^ (int) mul_hi(ux, uy);
        o[4] = (int) abs_diff(x, y) + (int) abs(x);
        o[5] = hadd(x, y) + rhadd(x, y);
        o[6] = add_sat(x, y) ^ sub_sat(x, y);
        o[7] = clamp(x, -1000, 1000) + min(x, y) - max(ux, uy);
        o[8] = select(x, y, x < y) * 3 + (x > y ? 11 : -11);
        o[9] = (int) (((ux >> (uy & 15)) & 0xfff) | ((ux & 0xff) << 20));
        char cx = (char) x, cy = (char) y;
        short sx = (short) x, sy = (short) y;
        o[10] = (int) (char) (cx * cy + cx / (cy | 1)) + (int) (short) (sx * sy - sx % (sy | 1));
        o[11] = (int) (uchar) ((uchar) x + (uchar) y) + ((int) (ushort) ((ushort) x >> 3));
        o[12] = convert_int_sat((float) x * 1e6f) ^ (int) convert_uchar_sat(y);
        o[13] = (x < 0) ? (x / 7) : (x % 13);
        o[14] = (int) (uy / (ux | 1u)) + (int) (uy % (ux | 1u));
        o[15] = (int) upsample((ushort) x, (ushort) y) + (int) bitselect(ux, uy, 0xf0f0f0f0u);
}
