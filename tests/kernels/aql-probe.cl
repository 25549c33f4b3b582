/* What an AQL dispatch gives a kernel (tests/unit/gpu/test-gpu-aql.c): a
 * result out of its arguments, and, from work-item 0, the values of the user
 * SGPRs the CP sets up for an AQL packet — the packet's workgroup_size_x and
 * grid_size_x read through the dispatch ptr (s[4:5]), the dispatch ptr
 * itself, the queue ptr and the kernarg segment ptr (LLVM AMDGPUUsage,
 * "Initial Kernel Execution State"; clang-15 has no builtin for the
 * dispatch id, whose SGPRs the stream test checks). */
kernel void aql_probe(global uint *out, global const uint *in, global ulong *probe, uint n) {
        uint i = get_global_id(0);

        if (i < n)
                out[i] = in[i] * 3u + 1u;
        if (i == 0) {
                const __constant uchar *pkt = (const __constant uchar *) __builtin_amdgcn_dispatch_ptr();
                probe[0] = *(const __constant ushort *) (pkt + 4);
                probe[1] = *(const __constant uint *) (pkt + 12);
                probe[2] = (ulong) pkt;
                probe[3] = (ulong) __builtin_amdgcn_queue_ptr();
                probe[4] = (ulong) __builtin_amdgcn_kernarg_segment_ptr();
        }
}
