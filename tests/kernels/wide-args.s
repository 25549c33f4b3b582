/* A kernel whose only argument, a 4-byte value, lies at offset 4016 of its
 * 4020-byte kernel argument segment (what clang never makes, but any ELF may
 * say): a dispatch of it carries 4 bytes of arguments, the GPU gets a 4 KiB
 * image. It ends at once. The daemon must keep a queued dispatch of it in
 * memory proportional to the 4 bytes (tests/integration/test-hogs.c). Written
 * in assembly for its metadata; assembled by clang-15 (tests/kernels/meson.build). */
	.amdgcn_target "amdgcn-amd-amdhsa--gfx1030"
	.text
	.globl	wide_args
	.p2align	8
	.type	wide_args,@function
wide_args:
	s_endpgm
.Lwide_args_end:
	.size	wide_args, .Lwide_args_end-wide_args

	.rodata
	.p2align	6
	.amdhsa_kernel wide_args
		.amdhsa_kernarg_size 4020
		.amdhsa_user_sgpr_count 6
		.amdhsa_user_sgpr_private_segment_buffer 1
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_wavefront_size32 1
		.amdhsa_next_free_vgpr 1
		.amdhsa_next_free_sgpr 1
		.amdhsa_reserve_vcc 0
		.amdhsa_reserve_flat_scratch 0
	.end_amdhsa_kernel

	.amdgpu_metadata
---
amdhsa.kernels:
  - .args:
      - .offset:         4016
        .size:           4
        .type_name:      uint
        .value_kind:     by_value
    .group_segment_fixed_size: 0
    .kernarg_segment_align: 4
    .kernarg_segment_size: 4020
    .max_flat_workgroup_size: 256
    .name:           wide_args
    .private_segment_fixed_size: 0
    .sgpr_count:     0
    .sgpr_spill_count: 0
    .symbol:         wide_args.kd
    .vgpr_count:     0
    .vgpr_spill_count: 0
    .wavefront_size: 32
amdhsa.target:   amdgcn-amd-amdhsa--gfx1030
amdhsa.version:
  - 1
  - 1
...
	.end_amdgpu_metadata
