/* A packed-math instruction (VOP3P v_pk_fma_f16, harmless on real hardware)
 * that the simulated GPU's interpreter does not run: the dispatch fails with
 * a GPU exception naming the instruction and its encoding. */
__kernel void illegal(__global uint *out)
{
        out[get_global_id(0)] = 1;
        __asm__ volatile("v_pk_fma_f16 v0, v0, v0, v0" ::: "v0");
        out[get_global_id(0)] = 2;
}
