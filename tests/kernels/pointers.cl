/* Stores every address a kernel is given or can read for itself: its two
 * buffer arguments, its kernel argument segment, its dispatch packet and its
 * own program counter (tests/integration/test-leaks.c checks that each lies in
 * the documented client address window, not in the daemon's own layout). */
__kernel void pointers(__global ulong *out, __global uint *other)
{
        if (get_global_id(0) == 0) {
                ulong pc;

                __asm__ volatile("s_getpc_b64 %0" : "=s"(pc));
                out[0] = (ulong) out;
                out[1] = (ulong) other;
                out[2] = (ulong) __builtin_amdgcn_kernarg_segment_ptr();
                out[3] = (ulong) __builtin_amdgcn_dispatch_ptr();
                out[4] = pc;
                out[5] = (ulong) __builtin_amdgcn_implicitarg_ptr();
        }
}
