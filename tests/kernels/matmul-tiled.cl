/* C = A * B with 16x16 tiles staged in LDS. A is m x k, B is k x n. */
#define TILE 16
__kernel void matmul_tiled(__global const float *a, __global const float *b, __global float *c,
                           uint m, uint n, uint k)
{
        __local float ta[TILE][TILE], tb[TILE][TILE];
        uint col = get_global_id(0), row = get_global_id(1);
        uint lx = get_local_id(0), ly = get_local_id(1);
        float acc = 0.0f;
        for (uint t = 0; t < k; t += TILE) {
                ta[ly][lx] = (row < m && t + lx < k) ? a[row * k + t + lx] : 0.0f;
                tb[ly][lx] = (col < n && t + ly < k) ? b[(t + ly) * n + col] : 0.0f;
                barrier(CLK_LOCAL_MEM_FENCE);
                for (uint j = 0; j < TILE; j++)
                        acc += ta[ly][j] * tb[j][lx];
                barrier(CLK_LOCAL_MEM_FENCE);
        }
        if (row < m && col < n)
                c[row * n + col] = acc;
}
