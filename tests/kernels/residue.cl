/* What a wave finds in registers and LDS it never wrote
 * (tests/integration/test-compute-hostile.c, residue_*): with mode 1 each
 * work-item leaves secret ^ its global ID in v200 and v255 and in its LDS
 * word; with mode 0 it writes what it finds in v200, v255 and its LDS word,
 * without writing them first, to out[3 x id ..]. */
__kernel void residue(__global uint *out, uint secret, uint mode)
{
        __local uint lds[256];
        size_t lid = get_local_id(0), gid = get_global_id(0);
        uint a, b;

        if (mode) {
                uint s = secret ^ (uint) gid;
                __asm__ volatile("v_mov_b32 v200, %0\n\tv_mov_b32 v255, %0" : : "v"(s) : "v200", "v255");
                lds[lid] = s;
                return;
        }
        __asm__ volatile("v_mov_b32 %0, v200\n\tv_mov_b32 %1, v255" : "=v"(a), "=v"(b) : : "v200", "v255");
        out[3 * gid] = a;
        out[3 * gid + 1] = b;
        out[3 * gid + 2] = lds[lid];
}
