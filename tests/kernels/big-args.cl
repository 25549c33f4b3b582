/* A by-value struct argument of 4096 bytes: more kernel arguments than one
 * kernarg slot of the daemon's compute queues holds (4032 bytes), so the
 * loader refuses it rather than load a kernel that can never be dispatched. */
typedef struct Big {
        uint v[1024];
} Big;

__kernel void big_args(__global uint *out, Big big)
{
        size_t i = get_global_id(0);
        out[i] = big.v[i & 1023];
}
