/* y[i] = a * x[i] + y[i] (fused multiply-add on the vector ALU). */
__kernel void saxpy(float a, __global const float *x, __global float *y, uint n)
{
        size_t i = get_global_id(0);
        if (i < n)
                y[i] = fma(a, x[i], y[i]);
}
