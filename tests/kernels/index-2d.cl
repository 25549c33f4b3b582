/* 2D indexing: out[y][x] = x * 1000 + y + in[y][x]; uses global ids, local ids,
 * group ids and sizes in both dimensions. */
__kernel void index_2d(__global const int *in, __global int *out, uint width, uint height)
{
        size_t x = get_global_id(0), y = get_global_id(1);
        if (x >= width || y >= height)
                return;
        size_t i = y * width + x;
        out[i] = (int) (x * 1000 + y) + in[i] + (int) (get_local_id(0) * 7 + get_local_id(1) * 13 +
                                                        get_group_id(0) * 17 + get_group_id(1) * 19);
}
