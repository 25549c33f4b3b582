/* The reciprocal square root (v_rsq_f32/f64 through the clang builtins),
 * V_TRIG_PREOP_F64 through its builtin, and the LDS and private apertures
 * that s_getreg_b32 HW_REG_SH_MEM_BASES gives to a __local or __private
 * pointer turned into a generic one. */
__kernel void special_math(__global const float *f, __global const double *d, __global const int *seg,
                           __global float *of, __global double *od, __global ulong *ap)
{
        __local uint slot[64];
        uint mine[2];
        size_t i = get_global_id(0), l = get_local_id(0);

        of[i] = __builtin_amdgcn_rsqf(f[i]);
        od[2 * i] = __builtin_amdgcn_rsq(d[i]);
        od[2 * i + 1] = __builtin_amdgcn_trig_preop(d[i], seg[i]);
        slot[l & 63] = (uint) i;
        mine[i & 1] = (uint) l;
        ap[2 * i] = (ulong) (__generic uint *) &slot[l & 63];
        ap[2 * i + 1] = (ulong) (__generic uint *) &mine[i & 1] - (ulong) (__generic uint *) &mine[0] +
                        ((ulong) (__generic uint *) &mine[0] >> 32 << 32);
}
