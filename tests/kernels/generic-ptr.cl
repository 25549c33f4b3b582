/* OpenCL 2.0 generic pointers to __local and __private data: functions that
 * take a plain (generic) pointer are called with the address of an LDS
 * array and of a private array, so clang accesses them with flat_load /
 * flat_store / flat_atomic through the LDS and private apertures, while the
 * kernel itself also touches the same arrays with ds_* and buffer (scratch)
 * instructions. */

__attribute__((noinline)) void scale_add(uint *p, uint n, uint k, uint add)
{
        for (uint j = 0; j < n; j++)
                p[j] = p[j] * k + add;
}

__attribute__((noinline)) uint sum_bytes(const uchar *p, uint n)
{
        uint s = 0;
        for (uint j = 0; j < n; j++)
                s += p[j] * (j + 1);
        return s;
}

__attribute__((noinline)) void bump(uint *counter)
{
        atomic_fetch_add_explicit((volatile atomic_uint *) counter, 1u, memory_order_relaxed, memory_scope_work_group);
}

/* in has 1024 elements. */
__kernel void generic_ptr(__global const uint *in, __global uint *out)
{
        __local uint tile[64];
        __local uint count;
        uint priv[16];
        size_t i = get_global_id(0), l = get_local_id(0);

        if (l == 0)
                count = 0;
        tile[l] = in[i & 1023];
        for (uint j = 0; j < 16; j++)
                priv[j] = in[(i + j) & 1023] ^ j;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l % 2 == 0)
                scale_add(&tile[l], 2, 3, (uint) l);    /* this lane's slot and the next one's */
        bump(&count);
        scale_add(priv + (i % 4), 8, 5, (uint) i);
        barrier(CLK_LOCAL_MEM_FENCE);
        uint acc = sum_bytes((const uchar *) priv, 64) + sum_bytes((const uchar *) &tile[l], 4);
        for (uint j = 0; j < 16; j++)
                acc += priv[j] * (j + 3);
        out[3 * i] = acc;
        out[3 * i + 1] = tile[l];
        out[3 * i + 2] = count;
}
