/* Cross-lane operations: ds_bpermute/ds_permute, the DPP16 controls
 * (quad_perm, row_shl/shr/ror, row_mirror, row_half_mirror, row_share,
 * row_xmask) with row/bank masks and bound_ctrl, DPP8, v_permlane16/x16, and
 * the sub-group reductions and scans the device library builds from them.
 * The first part runs with the whole wave active (lanes past the end of a
 * partial wave are inactive); the second inside a branch that leaves the lanes
 * with an even value out, each operation distinct from the first part's so
 * that none is merged with it. */
#pragma OPENCL EXTENSION cl_khr_subgroups : enable

#define OLD 0x0bad0000u

__kernel void cross_lane(__global const uint *in, __global uint *out)
{
        size_t i = get_global_id(0);
        uint v = in[i], lane = get_sub_group_local_id(), o = OLD + lane;
        __global uint *r = out + 24 * i;

        r[0] = __builtin_amdgcn_ds_bpermute((int) (((lane * 5 + 3) & 31) << 2), (int) v);
        r[1] = __builtin_amdgcn_ds_permute((int) (((lane * 7) & 31) << 2), (int) v);
        r[2] = __builtin_amdgcn_update_dpp(o, v, 0x4e, 0xf, 0xf, false);      /* quad_perm:[2,3,0,1] */
        r[3] = __builtin_amdgcn_update_dpp(o, v, 0x103, 0xf, 0xf, false);     /* row_shl:3 */
        r[4] = __builtin_amdgcn_update_dpp(o, v, 0x115, 0xf, 0xf, true);      /* row_shr:5 bound_ctrl */
        r[5] = __builtin_amdgcn_update_dpp(o, v, 0x127, 0x1, 0xf, false);     /* row_ror:7 row_mask:1 */
        r[6] = __builtin_amdgcn_update_dpp(o, v, 0x140, 0xf, 0x6, false);     /* row_mirror bank_mask:6 */
        r[7] = __builtin_amdgcn_update_dpp(o, v, 0x141, 0xf, 0xf, false);     /* row_half_mirror */
        r[8] = __builtin_amdgcn_update_dpp(o, v, 0x155, 0xf, 0xf, false);     /* row_share:5 */
        r[9] = __builtin_amdgcn_update_dpp(o, v, 0x169, 0xf, 0xf, false);     /* row_xmask:9 */
        r[10] = __builtin_amdgcn_mov_dpp8(v, 0x053977);                       /* dpp8:[7,6,5,4,3,2,1,0] */
        r[11] = __builtin_amdgcn_permlane16(o, v, 0x01234567u, 0x89abcdefu, false, false);
        r[12] = __builtin_amdgcn_permlanex16(o, v, 0x76543210u, 0xfedcba98u, false, false);
        r[13] = sub_group_reduce_add(v);
        r[14] = sub_group_scan_inclusive_add(v);
        r[15] = sub_group_scan_exclusive_max(v);
        r[16] = sub_group_broadcast(v, 3);
        r[17] = as_uint(sub_group_reduce_min(as_float(v >> 2)));

        uint x[6] = { OLD, OLD, OLD, OLD, OLD, OLD };
        if (v & 1) {
                x[0] = __builtin_amdgcn_ds_bpermute((int) (((lane * 3 + 1) & 31) << 2), (int) v);
                x[1] = __builtin_amdgcn_ds_permute((int) (((lane * 11 + 2) & 31) << 2), (int) v);
                x[2] = __builtin_amdgcn_update_dpp(o, v, 0x102, 0xf, 0xf, false);     /* row_shl:2 */
                x[3] = __builtin_amdgcn_update_dpp(o, v, 0x113, 0xf, 0xf, true);      /* row_shr:3 bound_ctrl */
                x[4] = __builtin_amdgcn_permlanex16(o, v, 0x67452301u, 0xefcdab89u, false, true);
                x[5] = __builtin_amdgcn_mov_dpp8(v, 0x1d3977);                        /* dpp8:[7,6,5,4,3,2,7,0] */
        }
        for (int k = 0; k < 6; k++)
                r[18 + k] = x[k];
}
