/* SPDX-License-Identifier: MIT */
/*
 * FLAT addresses in the LDS and private apertures: tests/kernels/
 * generic-ptr.cl passes __local and __private arrays to functions taking
 * generic pointers (flat_load/flat_store/flat_load_ubyte/flat_atomic_add
 * through the apertures SH_MEM_BASES gives, next to ds_* and buffer scratch
 * accesses of the same arrays), in wave32 and wave64; private-array built
 * with flat scratch (scratch_* instructions, FLAT_SCRATCH set by the kernel
 * prologue). Both against CPU references. Plus what happens at the edges: a
 * flat address past the workgroup's LDS, an atomic that would cross a dword
 * of the swizzled private segment, and a dispatch without apertures.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "isa-helper.h"

static uint32_t rng_state = 4242;
static uint32_t rnd(void) {
        rng_state = rng_state * 1664525u + 1013904223u;
        return rng_state >> 8 ^ rng_state << 9;
}

static uint32_t sum_bytes(const void *p, unsigned n) {
        const uint8_t *b = p;
        uint32_t s = 0;
        for (unsigned j = 0; j < n; j++)
                s += b[j] * (j + 1);
        return s;
}

Test(isa_flat, kernels_use_the_apertures) {
        static const char *const needles[] = {
                "flat_load_dword", "flat_store_dword", "flat_load_ubyte", "flat_atomic_add",
                "hwreg(HW_REG_SH_MEM_BASES, 16, 16)", "hwreg(HW_REG_SH_MEM_BASES, 0, 16)", "hwreg(HW_REG_FLAT_SCR_LO)",
                "buffer_store_dword", "ds_write_b32",
        };
        for (size_t i = 0; i < sizeof(needles) / sizeof(needles[0]); i++) {
                cr_assert_gt(isa_objdump_count("generic-ptr.hsaco", needles[i]), 0, "generic-ptr.cl lost %s", needles[i]);
                cr_assert_gt(isa_objdump_count("generic-ptr-w64.hsaco", needles[i]), 0, "generic-ptr-w64 lost %s", needles[i]);
        }
        cr_assert_gt(isa_objdump_count("private-array-fs.hsaco", "scratch_store_dword"), 0);
        cr_assert_gt(isa_objdump_count("private-array-fs.hsaco", "scratch_load_dword"), 0);
        cr_assert_eq(isa_objdump_count("private-array-fs.hsaco", "buffer_"), 0, "flat scratch only");
}

static void check_generic_ptr(const char *file, bool wave32) {
        static const uint32_t wgs_list[] = { 64, 32, 48, 2, 16 };
        for (size_t t = 0; t < sizeof(wgs_list) / sizeof(wgs_list[0]); t++) {
                uint32_t wg = wgs_list[t], groups = 5, n = groups * wg, *in, *out;
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;

                isa_mem_init(&m);
                cr_assert_eq(isa_kernel_load(&m, isa_kernel_path(file), "generic_ptr", &k), 0);
                cr_assert_eq((k.code_properties >> 10) & 1, wave32);
                uint64_t iv = isa_mem_alloc(&m, 4 * 1024, (void **) &in), ov = isa_mem_alloc(&m, 12 * n, (void **) &out);
                for (uint32_t i = 0; i < 1024; i++)
                        in[i] = rnd();
                isa_args_u64(&a, iv), isa_args_u64(&a, ov);
                uint32_t grid[3] = { groups, 1, 1 }, wgs[3] = { wg, 1, 1 };
                cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 10000000, &res), 0, "%s wg %u: %s", file, wg, res.message);

                for (uint32_t g = 0; g < groups; g++) {
                        uint32_t tile[65] = { 0 };
                        for (uint32_t l = 0; l < wg; l++)
                                tile[l] = in[(g * wg + l) & 1023];
                        for (uint32_t l = 0; l < wg; l += 2)
                                for (uint32_t j = 0; j < 2; j++)
                                        tile[l + j] = tile[l + j] * 3 + l;
                        for (uint32_t l = 0; l < wg; l++) {
                                uint32_t i = g * wg + l, priv[16], acc;
                                for (uint32_t j = 0; j < 16; j++)
                                        priv[j] = in[(i + j) & 1023] ^ j;
                                for (uint32_t j = 0; j < 8; j++)
                                        priv[i % 4 + j] = priv[i % 4 + j] * 5 + i;
                                acc = sum_bytes(priv, 64) + sum_bytes(&tile[l], 4);
                                for (uint32_t j = 0; j < 16; j++)
                                        acc += priv[j] * (j + 3);
                                cr_assert_eq(out[3 * i], acc, "%s wg %u item %u: private part %#x, expected %#x", file, wg,
                                             i, out[3 * i], acc);
                                cr_assert_eq(out[3 * i + 1], tile[l], "%s wg %u item %u: tile %#x, expected %#x", file, wg,
                                             i, out[3 * i + 1], tile[l]);
                                cr_assert_eq(out[3 * i + 2], wg, "%s wg %u item %u: flat atomic count %u", file, wg, i,
                                             out[3 * i + 2]);
                        }
                }
                isa_mem_fini(&m);
        }
}

Test(isa_flat, generic_pointers_to_local_and_private) {
        check_generic_ptr("generic-ptr.hsaco", true);
}

Test(isa_flat, generic_pointers_wave64) {
        check_generic_ptr("generic-ptr-w64.hsaco", false);
}

/* The private segment through scratch_* and FLAT_SCRATCH, same results as
 * the buffer-instruction build (test-isa-kernels private_array). */
Test(isa_flat, flat_scratch_private_array) {
        static const uint32_t shapes[][2] = { { 1, 64 }, { 100, 32 }, { 1000, 256 }, { 77, 48 } };
        for (size_t t = 0; t < sizeof(shapes) / sizeof(shapes[0]); t++) {
                uint32_t n = shapes[t][0], wg = shapes[t][1], *in, *out;
                IsaMem m;
                IsaKernel k;
                IsaArgs a = { 0 };
                SimIsaResult res;

                isa_mem_init(&m);
                cr_assert_eq(isa_kernel_load(&m, isa_kernel_path("private-array-fs.hsaco"), "private_array", &k), 0);
                cr_assert(k.code_properties & (1u << 5), "ENABLE_SGPR_FLAT_SCRATCH_INIT");
                uint64_t iv = isa_mem_alloc(&m, 4 * n, (void **) &in), ov = isa_mem_alloc(&m, 4 * n, (void **) &out);
                for (uint32_t i = 0; i < n; i++)
                        in[i] = rnd() % 100000;
                isa_args_u64(&a, iv), isa_args_u64(&a, ov), isa_args_u32(&a, n);
                uint32_t grid[3] = { (n + wg - 1) / wg, 1, 1 }, wgs[3] = { wg, 1, 1 };
                cr_assert_eq(isa_launch(&m, &k, grid, wgs, &a, 100000000, &res), 0, "%s", res.message);
                for (uint32_t i = 0; i < n; i++) {
                        uint32_t v = in[i], acc = 0;
                        for (uint32_t j = 0; j < 16; j++)
                                acc += v * ((v + j * 7) & 63) + i;
                        cr_assert_eq(out[i], acc, "n=%u wg=%u i=%u", n, wg, i);
                }
                isa_mem_fini(&m);
        }
}

/* Runs hand-assembled code (llvm-mc-15 -mcpu=gfx1030) on one wave32. */
static int run_flat(const uint32_t *code, size_t n, uint32_t lds_bytes, uint32_t sh_mem_bases, IsaMem *m,
                    SimIsaResult *res) {
        uint32_t *p = isa_mem_map(m, 0x200000, 4096);
        memcpy(p, code, 4 * n);
        SimIsaDispatch d = { .entry_va = 0x200000, .grid = { 1, 1, 1 }, .wg_size = { 32, 1, 1 }, .wave32 = true,
                             .lds_bytes = lds_bytes, .sh_mem_bases = sh_mem_bases };
        return sim_isa_dispatch(&d, &m->mem, 1000, res);
}

/* flat_store_dword to LDS aperture + 4 * lane, then ds_read_b32 of the same
 * slot and a global store of it: LDS and flat LDS are one memory; an
 * address past the workgroup's LDS is a fault naming it. */
Test(isa_flat, lds_aperture_is_the_workgroups_lds) {
        static const uint32_t code[] = {
                0x34020082,                     /* v_lshlrev_b32 v1, 2, v0 */
                0x7e0402ff, 0x00010000,         /* v_mov_b32 v2, 0x10000 (LDS aperture, bits 63:32) */
                0x4a0600ff, 0x00000700,         /* v_add_nc_u32 v3, 0x700, v0 */
                0xdc700000, 0x007d0301,         /* flat_store_dword v[1:2], v3 */
                0xd8d80000, 0x04000001,         /* ds_read_b32 v4, v1 */
                0xbf8c0000,                     /* s_waitcnt 0 */
                0x7e040281,                     /* v_mov_b32 v2, 1: v[1:2] now a global VA */
                0xdc700000, 0x007d0401,         /* flat_store_dword v[1:2], v4 */
                0xbf810000,                     /* s_endpgm */
        };
        IsaMem m;
        SimIsaResult res;
        uint32_t *out;
        isa_mem_init(&m);
        out = isa_mem_map(&m, 0x100000000ull, 4096);    /* v[1:2] = 0x1_0000_0000 + lane * 4 */
        cr_assert_eq(run_flat(code, sizeof(code) / 4, 128, ISA_SH_MEM_BASES, &m, &res), 0, "%s", res.message);
        for (unsigned l = 0; l < 32; l++)
                cr_assert_eq(out[l], 0x700 + l, "lane %u read %#x back from LDS", l, out[l]);
        isa_mem_fini(&m);

        /* 32 lanes x 4 bytes do not fit 64 bytes of LDS. */
        isa_mem_init(&m);
        isa_mem_map(&m, 0x100000000ull, 4096);
        cr_assert_eq(run_flat(code, sizeof(code) / 4, 64, ISA_SH_MEM_BASES, &m, &res), -EFAULT);
        cr_assert(strstr(res.message, "LDS access of 4 bytes at 0x40 outside the 64 bytes of LDS"), "message: %s",
                  res.message);
        isa_mem_fini(&m);

        /* Without apertures (SH_MEM_BASES 0) the same address is a global one, unmapped here. */
        isa_mem_init(&m);
        isa_mem_map(&m, 0x100000000ull, 4096);
        cr_assert_eq(run_flat(code, sizeof(code) / 4, 128, 0, &m, &res), -EFAULT);
        cr_assert_eq(res.fault_va, ISA_LDS_APERTURE, "fault at %#llx", (unsigned long long) res.fault_va);
        isa_mem_fini(&m);
}

/* A 64-bit flat atomic on a private address would straddle two lanes' dwords. */
Test(isa_flat, private_atomic_across_dwords_refused) {
        static const uint32_t code[] = {
                0x7e020280,                     /* v_mov_b32 v1, 0 */
                0x7e0402ff, 0x00020000,         /* v_mov_b32 v2, 0x20000 (private aperture) */
                0xdd480000, 0x007d0301,         /* flat_atomic_add_x2 v[1:2], v[3:4] */
                0xbf810000,
        };
        IsaMem m;
        SimIsaResult res;
        isa_mem_init(&m);
        isa_mem_map(&m, 0, 1 << 20);
        cr_assert_eq(run_flat(code, sizeof(code) / 4, 0, ISA_SH_MEM_BASES, &m, &res), -EILSEQ);
        cr_assert(strstr(res.message, "private access of 8 bytes at 0x0 crosses a dword"), "message: %s", res.message);
        isa_mem_fini(&m);
}
