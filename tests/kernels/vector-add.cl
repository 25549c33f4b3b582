/* c[i] = a[i] + b[i]; the simplest kernel: kernarg loads, global id, one guard. */
__kernel void vector_add(__global const float *a, __global const float *b, __global float *c, uint n)
{
        size_t i = get_global_id(0);
        if (i < n)
                c[i] = a[i] + b[i];
}
