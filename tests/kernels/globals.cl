/*
 * Program-scope globals that the linker can only resolve at load time: the
 * pointers below need dynamic relocations (R_AMDGPU_RELATIVE64 for the hidden
 * ones, R_AMDGPU_ABS64 against the symbol for the default-visibility ones),
 * so the code object loader's relocation path runs on real compiler output.
 * Two kernels in one object; `scatter` takes a `local` pointer argument
 * (metadata value_kind dynamic_shared_pointer).
 */
global int table[4] = {10, 20, 30, 40};
global int *global table_ptr = &table[2];
constant int ctable[2] = {7, 8};
constant int *global ctable_ptr = &ctable[1];

__attribute__((visibility("default"))) global int exported[4] = {100, 200, 300, 400};
__attribute__((visibility("default"))) global int *global exported_ptr = &exported[3];

kernel void read_globals(global int *out) {
        out[0] = table_ptr[1] + *ctable_ptr + *exported_ptr;
}

kernel void scatter(global int *out, local int *tmp, int v) {
        tmp[get_local_id(0)] = v + (int) get_local_id(0);
        barrier(CLK_LOCAL_MEM_FENCE);
        out[get_global_id(0)] = tmp[get_local_size(0) - 1 - get_local_id(0)];
}
