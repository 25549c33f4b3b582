/* An image instruction (MIMG encoding) in a compute kernel: a GPU that
 * cannot run it fails the dispatch with an exception naming it. Only for the
 * simulated GPU: on real hardware the descriptor in s[0:7] is garbage. */
__kernel void illegal(__global uint *out)
{
        out[get_global_id(0)] = 1;
        __asm__ volatile("image_load v[0:3], v0, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_1D" ::: "v0", "v1", "v2", "v3");
        out[get_global_id(0)] = 2;
}
