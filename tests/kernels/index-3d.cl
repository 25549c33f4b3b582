/* 3D indexing: every work-item writes its local and group ids in x, y, z
 * (v0/v1/v2 and the workgroup-ID SGPRs) and its global linear index. */
__kernel void index_3d(__global uint *out, uint nx, uint ny, uint nz)
{
        size_t x = get_global_id(0), y = get_global_id(1), z = get_global_id(2);
        if (x >= nx || y >= ny || z >= nz)
                return;
        size_t i = (z * ny + y) * nx + x;
        out[2 * i] = (uint) (get_local_id(0) | get_local_id(1) << 8 | get_local_id(2) << 16) ^
                     (uint) (get_group_id(2) << 24);
        out[2 * i + 1] = (uint) (get_group_id(0) | get_group_id(1) << 12) + (uint) get_local_size(2) * 100000u;
}
