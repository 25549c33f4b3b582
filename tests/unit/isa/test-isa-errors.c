/* SPDX-License-Identifier: MIT */
/*
 * How a dispatch fails: an instruction the interpreter does not implement
 * (-EILSEQ with its encoding and name), a load from unmapped memory (-EFAULT
 * with the address), an instruction budget (-ETIME), cancellation
 * (-ECANCELED), and parameters the model refuses (-EINVAL). Hand-assembled programs; encodings checked with
 * llvm-mc-15 -mcpu=gfx1030 -show-encoding.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "isa-helper.h"
#include "sim/isa/sim-isa.h"

#define CODE_VA 0x200000ull
#define ELEMENTS(x) (sizeof(x) / sizeof((x)[0]))

static SimIsaDispatch one_wave(void) {
        return (SimIsaDispatch) {
                .entry_va = CODE_VA,
                .grid = { 1, 1, 1 },
                .wg_size = { 32, 1, 1 },
                .wave32 = true,
        };
}

static int run(IsaMem *m, const uint32_t *code, size_t n, SimIsaDispatch *d, uint64_t budget, SimIsaResult *res) {
        uint32_t *p = isa_mem_map(m, CODE_VA, 4096);
        memcpy(p, code, n * 4);
        return sim_isa_dispatch(d, &m->mem, budget, res);
}

Test(isa, unknown_encoding_is_eilseq) {
        /* v_dot2_f32_f16 v0, v1, v2, v3 (VOP3P, not implemented), then s_endpgm. */
        static const uint32_t code[] = { 0xcc134000, 0x1c0e0501, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        isa_mem_init(&m);
        int r = run(&m, code, 3, &d, 0, &res);
        cr_assert_eq(r, -EILSEQ);
        cr_assert_eq(res.error, -EILSEQ);
        cr_assert_eq(res.fault_pc, CODE_VA);
        cr_assert_eq(res.bad_encoding[0], 0xcc134000);
        cr_assert_eq(res.bad_encoding[1], 0x1c0e0501);
        cr_assert(strstr(res.message, "v_dot2_f32_f16") && strstr(res.message, "0xcc134000") &&
                  strstr(res.message, "0x200000"), "message: %s", res.message);
        cr_assert_eq(res.wave_instructions, 0);
        isa_mem_fini(&m);
}

Test(isa, garbage_is_eilseq_not_silent) {
        /* s_nop 0, then an image (MIMG) instruction dword, which this model has no encoding for. */
        static const uint32_t code[] = { 0xbf800000, 0xf0000000, 0x00000000, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        isa_mem_init(&m);
        cr_assert_eq(run(&m, code, 4, &d, 0, &res), -EILSEQ);
        cr_assert_eq(res.fault_pc, CODE_VA + 4);
        cr_assert_eq(res.bad_encoding[0], 0xf0000000);
        cr_assert(strstr(res.message, "unsupported instruction"), "message: %s", res.message);
        cr_assert_eq(res.wave_instructions, 1);
        isa_mem_fini(&m);
}

Test(isa, unmapped_load_is_efault) {
        /* s_mov_b32 s0, 0x7ff00000; s_mov_b32 s1, 0x12; v_mov_b32 v1, 0;
         * global_load_dword v2, v1, s[0:1] offset:16; s_endpgm */
        static const uint32_t code[] = { 0xbe8003ff, 0x7ff00000, 0xbe810392, 0x7e020280,
                                         0xdc308010, 0x02000001, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        isa_mem_init(&m);
        cr_assert_eq(run(&m, code, 7, &d, 0, &res), -EFAULT);
        cr_assert_eq(res.fault_va, 0x127ff00010ull, "fault at %#llx", (unsigned long long) res.fault_va);
        cr_assert_eq(res.fault_pc, CODE_VA + 16);
        cr_assert(strstr(res.message, "0x127ff00010"), "message: %s", res.message);
        isa_mem_fini(&m);
}

Test(isa, dwords_fault_one_by_one) {
        /* s_mov_b32 s0, 0x300ff8; s_mov_b32 s1, 0; v_mov_b32 v1, 0;
         * global_load_dwordx4 v[2:5], v1, s[0:1]; s_endpgm: the third dword is
         * the first unmapped one. */
        static const uint32_t load[] = { 0xbe8003ff, 0x00300ff8, 0xbe810380, 0x7e020280,
                                         0xdc388000, 0x02000001, 0xbf810000 };
        /* ...; v_mov_b32 v1, 4; v_mov_b32 v2, 0x1234; v_mov_b32 v3, 0x5678;
         * global_store_dwordx2 v1, v[2:3], s[0:1]; s_endpgm: the first dword is
         * stored, the second faults. */
        static const uint32_t store[] = { 0xbe8003ff, 0x00300ff8, 0xbe810380, 0x7e020284, 0x7e0402ff,
                                          0x00001234, 0x7e0602ff, 0x00005678, 0xdc748000, 0x00000201,
                                          0xbf810000 };
        /* v_mov_b32 v1, 0xfff8; ds_read_b64 v[2:3], v1 offset:4; s_endpgm: the
         * second dword is past 64 KiB of LDS. */
        static const uint32_t lds[] = { 0x7e0202ff, 0x0000fff8, 0xd9d80004, 0x02000001, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        uint32_t *data;

        /* A fresh memory per program: run() maps the code page anew. */
        isa_mem_init(&m);
        isa_mem_map(&m, 0x300000, 4096);
        cr_assert_eq(run(&m, load, 7, &d, 0, &res), -EFAULT);
        cr_assert_eq(res.fault_va, 0x301000ull, "fault at %#llx", (unsigned long long) res.fault_va);
        cr_assert(strstr(res.message, "read of 4 bytes at 0x301000"), "message: %s", res.message);
        isa_mem_fini(&m);

        isa_mem_init(&m);
        data = isa_mem_map(&m, 0x300000, 4096);
        cr_assert_eq(run(&m, store, 11, &d, 0, &res), -EFAULT);
        cr_assert_eq(res.fault_va, 0x301000ull, "fault at %#llx", (unsigned long long) res.fault_va);
        cr_assert(strstr(res.message, "write of 4 bytes at 0x301000"), "message: %s", res.message);
        cr_assert_eq(data[1023], 0x1234);
        isa_mem_fini(&m);

        isa_mem_init(&m);
        d.lds_bytes = 65536;
        cr_assert_eq(run(&m, lds, 5, &d, 0, &res), -EFAULT);
        cr_assert(strstr(res.message, "LDS access of 4 bytes at 0x10000 outside the 65536 bytes"), "message: %s",
                  res.message);
        isa_mem_fini(&m);

        /* Lanes off in EXEC do not access memory: ...; v_lshlrev_b32 v1, 12, v0;
         * s_mov_b32 exec_lo, 1; global_store_dword v1, v1, s[0:1];
         * global_load_dword v3, v1, s[0:1]; ds_write_b32 v1, v1; ds_read_b32 v2, v1;
         * s_endpgm: lane l > 0 has the address l * 4096, unmapped and past the LDS. */
        static const uint32_t masked[] = { 0xbe8003ff, 0x00300ff8, 0xbe810380, 0x3402008c, 0xbefe0381,
                                           0xdc708000, 0x00000101, 0xdc308000, 0x03000001, 0xd8340000,
                                           0x00000101, 0xd8d80000, 0x02000001, 0xbf810000 };
        isa_mem_init(&m);
        data = isa_mem_map(&m, 0x300000, 4096);
        data[1022] = 0xdeadbeef;
        cr_assert_eq(run(&m, masked, ELEMENTS(masked), &d, 0, &res), 0, "%s", res.message);
        cr_assert_eq(data[1022], 0);
        isa_mem_fini(&m);
}

Test(isa, kernel_with_bad_pointer_faults) {
        IsaMem m;
        IsaKernel k;
        IsaArgs a = { 0 };
        SimIsaResult res;
        isa_mem_init(&m);
        cr_assert_eq(isa_kernel_load(&m, isa_kernel_path("vector-add.hsaco"), "vector_add", &k), 0);
        uint64_t xv = isa_mem_alloc(&m, 4096, NULL), zv = isa_mem_alloc(&m, 4096, NULL);
        isa_args_u64(&a, xv), isa_args_u64(&a, 0xdead0000ull), isa_args_u64(&a, zv), isa_args_u32(&a, 64);
        uint32_t grid[3] = { 1, 1, 1 }, wg[3] = { 64, 1, 1 };
        cr_assert_eq(isa_launch(&m, &k, grid, wg, &a, 0, &res), -EFAULT);
        cr_assert_eq(res.fault_va, 0xdead0000ull, "fault at %#llx: %s", (unsigned long long) res.fault_va, res.message);
        isa_mem_fini(&m);
}

Test(isa, budget_is_etime) {
        /* s_branch -1: a tight infinite loop. */
        static const uint32_t code[] = { 0xbf82ffff };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        isa_mem_init(&m);
        cr_assert_eq(run(&m, code, 1, &d, 1000, &res), -ETIME);
        cr_assert_eq(res.wave_instructions, 1000);
        cr_assert_eq(res.lane_instructions, 32000);
        isa_mem_fini(&m);
}

/* Wave64 runs (a 100-item workgroup is two waves of 64 and 36 lanes); oversized
 * workgroups and LDS are refused. */
Test(isa, wave64_runs_oversized_is_einval) {
        static const uint32_t code[] = { 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        isa_mem_init(&m);
        d.wave32 = false;
        d.wg_size[0] = 100;
        cr_assert_eq(run(&m, code, 1, &d, 0, &res), 0, "%s", res.message);
        cr_assert_eq(res.wave_instructions, 2, "two waves");
        cr_assert_eq(res.lane_instructions, 100, "of 64 and 36 lanes");
        d = one_wave();
        d.wg_size[0] = 2048;
        cr_assert_eq(sim_isa_dispatch(&d, &m.mem, 0, &res), -EINVAL);
        d = one_wave();
        d.lds_bytes = 128 * 1024;
        cr_assert_eq(sim_isa_dispatch(&d, &m.mem, 0, &res), -EINVAL);
        isa_mem_fini(&m);
}

Test(isa, partial_wave_exec_and_ids) {
        /* A 40-thread workgroup is two waves, the second with 8 live lanes:
         * v_lshlrev_b32 v1, 2, v0; global_store_dword v1, v0, s[0:1]; s_endpgm
         * with s[0:1] = the output buffer (user SGPRs 0-1). */
        static const uint32_t code[] = { 0x34020082, 0xdc708000, 0x00000001, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        uint32_t *out;
        isa_mem_init(&m);
        uint64_t ov = isa_mem_alloc(&m, 4 * 64, (void **) &out);
        memset(out, 0xff, 4 * 64);
        d.wg_size[0] = 40;
        d.rsrc2 = 2 << 1;       /* USER_SGPR_COUNT = 2 */
        d.user_sgpr[0] = (uint32_t) ov, d.user_sgpr[1] = (uint32_t) (ov >> 32);
        cr_assert_eq(run(&m, code, 4, &d, 0, &res), 0, "%s", res.message);
        for (uint32_t i = 0; i < 40; i++)
                cr_assert_eq(out[i], i);
        for (uint32_t i = 40; i < 64; i++)
                cr_assert_eq(out[i], 0xffffffffu, "lane %u of the partial wave ran", i);
        cr_assert_eq(res.wave_instructions, 6);
        cr_assert_eq(res.lane_instructions, 3 * 32 + 3 * 8);
        isa_mem_fini(&m);
}

Test(isa, sdwa_select_and_merge) {
        /* s_mov_b32 s2, 0x80ff7f01; v_mov_b32 v0, s2; v_mov_b32 v2, 0xaaaaaaaa;
         * v_add_nc_u32_sdwa v2, v0, v0 dst_sel:BYTE_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_0 src1_sel:BYTE_3
         * v_mov_b32_sdwa v3, sext(v0) dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:BYTE_3
         * v_mov_b32_sdwa v4, v0 dst_sel:BYTE_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_3
         * v_mov_b32 v5, 0; global_store_dwordx3 v5, v[2:4], s[0:1]; s_endpgm */
        static const uint32_t code[] = { 0xbe8203ff, 0x80ff7f01, 0x7e000202, 0x7e0402ff, 0xaaaaaaaa,
                                         0x4a0400f9, 0x03001100, 0x7e0602f9, 0x000b0600, 0x7e0802f9, 0x00030800,
                                         0x7e0a0280, 0xdc7c8000, 0x00000205, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        uint32_t *out;
        isa_mem_init(&m);
        uint64_t ov = isa_mem_alloc(&m, 4096, (void **) &out);
        d.rsrc2 = 2 << 1;
        d.user_sgpr[0] = (uint32_t) ov, d.user_sgpr[1] = (uint32_t) (ov >> 32);
        cr_assert_eq(run(&m, code, ELEMENTS(code), &d, 0, &res), 0, "%s", res.message);
        cr_assert_eq(out[0], 0xaaaa81aau, "%#x", out[0]);
        cr_assert_eq(out[1], 0xffffff80u, "%#x", out[1]);
        cr_assert_eq(out[2], 0xffffff80u, "%#x", out[2]);
        isa_mem_fini(&m);
}

Test(isa, gfx9_only_dpp_is_eilseq) {
        /* v_mov_b32_dpp v1, v0 row_bcast:15 (a gfx9 control that gfx10 does not have) */
        static const uint32_t code[] = { 0x7e0202fa, 0xff014200, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        isa_mem_init(&m);
        cr_assert_eq(run(&m, code, 3, &d, 0, &res), -EILSEQ);
        cr_assert(strstr(res.message, "v_mov_b32_dpp"), "message: %s", res.message);
        isa_mem_fini(&m);
}

/* Random instruction words never crash the interpreter: every run ends with
 * success or one of the documented errors (run this under ASan/UBSan). */
Test(isa, random_code_never_crashes) {
        static const uint32_t prefixes[] = {
                0x00000000, 0x7e000000, 0x7c000000, 0x80000000, 0xb0000000, 0xbe800000, 0xbf000000, 0xbf800000,
                0xd4000000, 0xd5000000, 0xd6000000, 0xd7000000, 0xd8000000, 0xdc000000, 0xdc008000, 0xe0000000,
                0xf4000000, 0xcc000000,
        };
        /* ISA_FUZZ_SEED picks another sequence for longer local runs. */
        uint32_t state = getenv("ISA_FUZZ_SEED") ? (uint32_t) strtoul(getenv("ISA_FUZZ_SEED"), NULL, 0) : 12345;
        IsaMem m;
        isa_mem_init(&m);
        isa_mem_map(&m, 0, 1u << 16);   /* zero registers address memory that exists */
        uint32_t *code = isa_mem_map(&m, CODE_VA, 4096);
        unsigned counts[5] = { 0 };

        for (unsigned iter = 0; iter < 3000; iter++) {
                for (unsigned i = 0; i < 1000;) {
                        uint32_t w[3];
                        unsigned size = 0;
                        for (unsigned j = 0; j < 3; j++) {
                                state = state * 1664525u + 1013904223u;
                                w[j] = state ^ (state >> 13);
                        }
                        /* A format prefix with random fields; mostly instructions the decoder
                         * knows (random operands), sometimes anything. */
                        w[0] = prefixes[w[2] % (sizeof(prefixes) / sizeof(prefixes[0]))] | (w[0] & 0x03ffffff);
                        /* Clear the bits of forms the model refuses (VOP3 op_sel, GDS, LDS/TFE). */
                        switch (w[0] >> 26) {
                        case 0x35: w[0] &= ~(15u << 11); break;
                        case 0x36: w[0] &= ~(1u << 17); break;
                        case 0x37: w[0] &= ~(1u << 13); break;
                        case 0x38: w[0] &= ~(1u << 16); w[1] &= ~(1u << 23); break;
                        }
                        if (!sim_isa_name(w, &size) && (iter % 8 != 0 || (w[2] & 255)))
                                continue;
                        if (size < 4 || size > 12)
                                size = 4;
                        memcpy(&code[i], w, size);
                        i += size / 4;
                }
                SimIsaDispatch d = one_wave();
                SimIsaResult res;
                d.wg_size[0] = 1 + state % 96;
                d.lds_bytes = 4096;
                d.rsrc2 = (state >> 8) & 0x1fff;
                int r = sim_isa_dispatch(&d, &m.mem, 2000, &res);
                cr_assert(r == 0 || r == -EILSEQ || r == -EFAULT || r == -ETIME || r == -EDEADLK,
                          "iteration %u: %d (%s)", iter, r, res.message);
                cr_assert_eq(r, res.error);
                counts[r == 0 ? 0 : r == -EILSEQ ? 1 : r == -EFAULT ? 2 : r == -ETIME ? 3 : 4]++;
        }
        cr_log_info("random code: %u ok, %u EILSEQ, %u EFAULT, %u ETIME, %u EDEADLK", counts[0], counts[1], counts[2],
                    counts[3], counts[4]);
        cr_assert_gt(counts[1], 0);
        cr_assert_gt(counts[0] + counts[2] + counts[3], 300, "too few programs ran past their first instructions");
        isa_mem_fini(&m);
}

Test(isa, partial_above_full_is_einval) {
        static const uint32_t code[] = { 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        isa_mem_init(&m);
        d.partial[1] = 2; /* wg_size[1] is 1 */
        cr_assert_eq(run(&m, code, 1, &d, 0, &res), -EINVAL);
        cr_assert(strstr(res.message, "partial"), "message: %s", res.message);
        isa_mem_fini(&m);
}

/* Workgroup IDs start at wg_id_base (COMPUTE_START_X without FORCE_START_AT_000):
 * one-item workgroups store their workgroup ID X (s2) at out[s2]:
 * v_mov_b32 v0, s2; v_lshlrev_b32 v1, 2, v0; global_store_dword v1, v0, s[0:1]; s_endpgm */
Test(isa, workgroup_ids_start_at_base) {
        static const uint32_t code[] = { 0x7e000202, 0x34020082, 0xdc708000, 0x00000001, 0xbf810000 };
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        uint32_t *out;
        isa_mem_init(&m);
        uint64_t ov = isa_mem_alloc(&m, 4 * 16, (void **) &out);
        memset(out, 0xff, 4 * 16);
        d.wg_size[0] = 1;
        d.grid[0] = 3;
        d.wg_id_base[0] = 5;
        d.rsrc2 = 2 << 1 | 1 << 7; /* USER_SGPR_COUNT = 2, WORKGROUP_ID_X */
        d.user_sgpr[0] = (uint32_t) ov, d.user_sgpr[1] = (uint32_t) (ov >> 32);
        cr_assert_eq(run(&m, code, 5, &d, 0, &res), 0, "%s", res.message);
        for (uint32_t i = 0; i < 16; i++)
                cr_assert_eq(out[i], i >= 5 && i < 8 ? i : 0xffffffffu, "out[%u] = %#x", i, out[i]);
        isa_mem_fini(&m);
}

Test(isa, cancel_flag_set_before_is_ecanceled) {
        static const uint32_t code[] = { 0xbf82ffff }; /* s_branch -1 */
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        int cancel = 1;
        isa_mem_init(&m);
        d.cancel = &cancel;
        cr_assert_eq(run(&m, code, 1, &d, 0, &res), -ECANCELED);
        cr_assert_eq(res.wave_instructions, 0);
        isa_mem_fini(&m);
}

static void *cancel_later(void *userdata) {
        usleep(20000);
        __atomic_store_n((int *) userdata, 1, __ATOMIC_RELAXED);
        return NULL;
}

Test(isa, cancel_stops_an_endless_loop) {
        static const uint32_t code[] = { 0xbf82ffff }; /* s_branch -1, no budget */
        IsaMem m;
        SimIsaResult res;
        SimIsaDispatch d = one_wave();
        struct timespec t0, t1;
        pthread_t t;
        int cancel = 0;
        isa_mem_init(&m);
        d.wg_size[0] = 256; /* 8 waves taking turns */
        d.cancel = &cancel;
        cr_assert_eq(pthread_create(&t, NULL, cancel_later, &cancel), 0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cr_assert_eq(run(&m, code, 1, &d, 0, &res), -ECANCELED);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        pthread_join(t, NULL);
        cr_assert_gt(res.wave_instructions, 0);
        cr_assert_lt((t1.tv_sec - t0.tv_sec) * 1000.0 + (t1.tv_nsec - t0.tv_nsec) / 1e6, 2000.0, "cancelled promptly");
        cr_assert(strstr(res.message, "cancel"), "message: %s", res.message);
        isa_mem_fini(&m);
}
