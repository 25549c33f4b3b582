/* Global atomics with and without return: a histogram, a counter handing out
 * slots, min/max, exchange and compare-and-swap. */
__kernel void atomics(__global const uint *in, __global uint *hist, __global uint *counter,
                      __global uint *slots, __global int *minmax, __global uint *sub, uint n)
{
        size_t i = get_global_id(0);
        if (i >= n)
                return;
        uint v = in[i];
        atomic_add(&hist[v & 15], 1);
        uint slot = atomic_inc(counter);
        slots[slot] = v;
        atomic_min(&minmax[0], (int) v - 1000);
        atomic_max(&minmax[1], (int) v - 1000);
        atomic_sub(&sub[0], v & 7);
        atomic_xchg(&sub[1], 42);
        atomic_cmpxchg(&sub[2], 0u, (uint) i + 1);
        atomic_or(&sub[3], 1u << (v & 31));
        atomic_and(&sub[4], ~(1u << (v & 31)));
        atomic_xor(&sub[5], v);
}
