/* A dot-product instruction (VOP3P v_dot2_f32_f16, harmless on real hardware)
 * that the simulated GPU's interpreter does not run: the queue stops there and
 * raises no event, as the kernel does (kfd-facts §7.2), and the job ends at its
 * timeout with the simulator's words, which name the instruction and its
 * encoding. */
__kernel void illegal(__global uint *out)
{
        out[get_global_id(0)] = 1;
        __asm__ volatile("v_dot2_f32_f16 v0, v0, v0, v0" ::: "v0");
        out[get_global_id(0)] = 2;
}
