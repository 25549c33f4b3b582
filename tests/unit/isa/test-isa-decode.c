/* SPDX-License-Identifier: MIT */
/*
 * The decoder against llvm-objdump-15: every instruction clang-15 emitted for
 * the whole corpus of tests/kernels (but the objects made to be refused) must
 * be one the interpreter knows, and decoding its bytes must
 * give the name llvm-objdump prints. And every instruction the decoder claims
 * to know must execute (not -EILSEQ) in a neutral setting.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa-helper.h"
#include "sim/isa/sim-isa-internal.h"
#include "sim/isa/sim-isa-opcodes.h"

static void strip_suffix(char *name) {
        static const char *const suffixes[] = { "_e32", "_e64", "_sdwa", "_dpp" };
        size_t n = strlen(name);
        for (size_t i = 0; i < 4; i++) {
                size_t k = strlen(suffixes[i]);
                if (n > k && strcmp(name + n - k, suffixes[i]) == 0)
                        name[n - k] = 0;
        }
}

Test(isa, corpus_mnemonics_known_and_decoded_like_objdump) {
        char kernels[] = ISA_DECODE_KERNELS, *save = NULL;
        unsigned total = 0, missing = 0, mismatched = 0;
        char first_missing[512] = "";

        for (char *k = strtok_r(kernels, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
                char cmd[4096], line[1024];
                snprintf(cmd, sizeof(cmd), "%s -d --mcpu=gfx1030 '%s'", ISA_OBJDUMP, isa_kernel_path(k));
                FILE *p = popen(cmd, "r");
                cr_assert(p, "cannot run %s", cmd);
                while (fgets(line, sizeof(line), p)) {
                        char name[128], *comment;
                        uint32_t words[3] = { 0 };
                        unsigned size = 0;
                        if (line[0] != '\t' || sscanf(line + 1, "%127s", name) != 1)
                                continue;
                        /* "// 000000001800: F4000242 FA000004" */
                        comment = strstr(line, "// ");
                        cr_assert(comment && strchr(comment, ':'), "unexpected objdump line: %s", line);
                        int nw = sscanf(strchr(comment, ':') + 1, "%x %x %x", &words[0], &words[1], &words[2]);
                        cr_assert_geq(nw, 1);
                        total++;
                        if (!sim_isa_knows(name)) {
                                if (!missing++)
                                        snprintf(first_missing, sizeof(first_missing), "%s in %s", name, k);
                                cr_log_error("not implemented: %s (%s)", name, k);
                                continue;
                        }
                        const char *got = sim_isa_name(words, &size);
                        strip_suffix(name);
                        if (!got || strcmp(got, name) != 0 || size != 4u * (unsigned) nw) {
                                mismatched++;
                                cr_log_error("%s: decoded as %s, %u bytes (objdump: %d dwords)", name, got ? got : "(null)",
                                             size, nw);
                        }
                }
                cr_assert_eq(pclose(p), 0, "%s failed", cmd);
        }
        cr_assert_gt(total, 500, "only %u instructions disassembled", total);
        cr_assert_eq(missing, 0, "%u instructions unknown to the decoder, first: %s", missing, first_missing);
        cr_assert_eq(mismatched, 0, "%u instructions decoded differently from llvm-objdump", mismatched);
}

Test(isa, knows_suffixes) {
        cr_assert(sim_isa_knows("v_add_nc_u32_e32"));
        cr_assert(sim_isa_knows("v_add_co_ci_u32_e64"));
        cr_assert(sim_isa_knows("global_atomic_cmpswap"));
        cr_assert(sim_isa_knows("s_waitcnt_vscnt"));
        cr_assert(!sim_isa_knows("v_fmamk_f32_e64"), "fmamk has no VOP3 form");
        cr_assert(sim_isa_knows("v_pk_add_f16"));
        cr_assert(sim_isa_knows("v_add_f16_e64"));
        cr_assert(!sim_isa_knows("v_dot2_f32_f16"));
        cr_assert(sim_isa_knows("v_mov_b32_sdwa"));
        cr_assert(sim_isa_knows("v_mov_b32_dpp"));
        cr_assert(sim_isa_knows("v_add_nc_u32_dpp"));
        cr_assert(!sim_isa_knows("v_fmamk_f32_dpp"), "fmamk has no DPP form");
        cr_assert(!sim_isa_knows("image_sample"));
}

/* Encodes opcode op of enc with neutral operands: v0/s0 sources, v1/s2
 * destinations, zero offsets. */
static unsigned encode(SimIsaEnc enc, unsigned op, uint32_t *w) {
        switch (enc) {
        case ENC_SOP2: w[0] = 0x80000000u | op << 23 | 2u << 16; return 1;
        case ENC_SOPK: w[0] = 0xb0000000u | op << 23 | 2u << 16 | 1u /* hwreg(HW_REG_MODE) */; w[1] = 0; return op == SOPK_S_SETREG_IMM32_B32 ? 2 : 1;
        case ENC_SOP1: w[0] = 0xbe800000u | 2u << 16 | op << 8; return 1;
        case ENC_SOPC: w[0] = 0xbf000000u | op << 16; return 1;
        case ENC_SOPP: w[0] = 0xbf800000u | op << 16; return 1;
        case ENC_SMEM: w[0] = 0xf4000000u | op << 18 | 2u << 6; w[1] = 0xfa000000u; return 2;
        case ENC_VOP2: w[0] = op << 25 | 1u << 17 | 0x100; w[1] = 0x3f800000; return op == VOP2_V_FMAMK_F32 || op == VOP2_V_FMAAK_F32 || op == VOP2_V_FMAMK_F16 || op == VOP2_V_FMAAK_F16 ? 2 : 1;
        case ENC_VOP1: w[0] = 0x7e000000u | 1u << 17 | op << 9 | 0x100; return 1;
        case ENC_VOPC: w[0] = 0x7c000000u | op << 17 | 0x100; return 1;
        case ENC_VOP3: w[0] = 0xd4000000u | op << 16 | 2; w[1] = 0x100 | 0x100 << 9 | 0x100 << 18; return 2;
        case ENC_VOP3P: w[0] = 0xcc004000u | op << 16 | 2; w[1] = 0x18000000u | 0x100 | 0x100 << 9 | 0x100 << 18; return 2;
        case ENC_DS: w[0] = 0xd8000000u | op << 18; w[1] = 4u << 24; return 2;
        case ENC_MUBUF: w[0] = 0xe0000000u | op << 18; w[1] = 0x80000000u | 4u << 8; return 2;
        case ENC_FLAT: w[0] = 0xdc000000u | op << 18; w[1] = 4u << 24 | 0x7d0000 | 2u << 8; return 2;
        case ENC_GLOBAL: w[0] = 0xdc008000u | op << 18; w[1] = 4u << 24 | 0x7d0000 | 2u << 8; return 2;
        case ENC_SCRATCH: w[0] = 0xdc004000u | op << 18; w[1] = 4u << 24 | 0x7f0000 | 2u << 8; return 2; /* offset only */
        default: return 0;
        }
}

Test(isa, every_known_instruction_executes) {
        static const SimIsaEnc encs[] = { ENC_SOP2, ENC_SOPK, ENC_SOP1, ENC_SOPC, ENC_SOPP, ENC_SMEM, ENC_VOP2, ENC_VOP1,
                                          ENC_VOPC, ENC_VOP3, ENC_VOP3P, ENC_DS, ENC_MUBUF, ENC_FLAT, ENC_GLOBAL, ENC_SCRATCH };
        unsigned tried = 0, failed = 0;
        IsaMem m;
        isa_mem_init(&m);
        /* Zero registers address VA 0; map it so memory instructions succeed. */
        isa_mem_map(&m, 0, 1u << 20);
        uint32_t *code = isa_mem_map(&m, 0x200000, 4096);

        for (size_t e = 0; e < sizeof(encs) / sizeof(encs[0]); e++)
                for (unsigned op = 0; op < 1024; op++) {
                        const char *name = sim_isa_opcode_name(encs[e], op);
                        uint32_t w[4] = { 0 };
                        if (!name)
                                continue;
                        /* Control transfer to the zero page would run zeros; s_endpgm ends early. */
                        if (!strcmp(name, "s_setpc_b64") || !strcmp(name, "s_swappc_b64") || !strcmp(name, "s_call_b64") ||
                            !strcmp(name, "s_endpgm") || !strcmp(name, "s_code_end"))
                                continue;
                        unsigned n = encode(encs[e], op, w);
                        cr_assert_gt(n, 0);
                        memset(code, 0, 64);
                        memcpy(code, w, 4 * n);
                        code[n] = 0xbf810000; /* s_endpgm */
                        SimIsaDispatch d = { .entry_va = 0x200000, .grid = { 1, 1, 1 }, .wg_size = { 32, 1, 1 },
                                             .wave32 = true, .lds_bytes = 65536 };
                        SimIsaResult res;
                        int r = sim_isa_dispatch(&d, &m.mem, 100, &res);
                        tried++;
                        if (r == -EILSEQ) {
                                failed++;
                                cr_log_error("%s: %s", name, res.message);
                        }
                }
        cr_assert_gt(tried, 500);
        cr_assert_eq(failed, 0, "%u of %u known instructions refused to execute", failed, tried);
        isa_mem_fini(&m);
}

/* docs/simulator.md lists, between two markers, every opcode the decoder knows
 * by name and the interpreter does not run ("- ENC: `name`, `name`"); the list
 * must be exactly that set (VOP3: only the VOP3-only opcodes 320..383 and
 * 512.., the others being VOP3 forms of VOP1/VOP2/VOPC opcodes). */
Test(isa, simulator_doc_lists_every_unimplemented_opcode) {
        static const SimIsaEnc encs[] = { ENC_SOP2, ENC_SOPK, ENC_SOP1, ENC_SOPC, ENC_SOPP, ENC_SMEM, ENC_VOP2, ENC_VOP1,
                                          ENC_VOPC, ENC_VOP3, ENC_VOP3P, ENC_DS, ENC_MUBUF, ENC_FLAT, ENC_GLOBAL, ENC_SCRATCH };
        FILE *f = fopen(ISA_SIMULATOR_DOC, "r");
        char line[8192], listed[2048][64];
        unsigned n_listed = 0, unlisted = 0, expected = 0;
        bool inside = false, seen_end = false;

        cr_assert(f, "cannot open %s", ISA_SIMULATOR_DOC);
        while (fgets(line, sizeof(line), f)) {
                char enc[16], *p;
                if (strstr(line, "<!-- unimplemented-opcodes:begin")) {
                        inside = true;
                        continue;
                }
                if (strstr(line, "<!-- unimplemented-opcodes:end")) {
                        seen_end = inside;
                        break;
                }
                if (!inside)
                        continue;
                cr_assert_eq(sscanf(line, " - %15[A-Z0-9]:", enc), 1, "unexpected line in the list: %s", line);
                for (p = strchr(line, '`'); p; p = strchr(p, '`')) {
                        char *end = strchr(p + 1, '`');
                        cr_assert(end && end - p < 40, "unbalanced quote: %s", line);
                        cr_assert_lt(n_listed, 2048);
                        snprintf(listed[n_listed++], sizeof(listed[0]), "%s:%.*s", enc, (int) (end - p - 1), p + 1);
                        p = end + 1;
                }
        }
        fclose(f);
        cr_assert(seen_end, "markers not found in %s", ISA_SIMULATOR_DOC);

        for (size_t e = 0; e < sizeof(encs) / sizeof(encs[0]); e++)
                for (unsigned op = 0; op < 1024; op++) {
                        SimIsaInst in = { .enc = encs[e], .op = op };
                        const char *name = sim_isa_any_name(&in);
                        char key[64];
                        bool found = false;
                        if (!name || sim_isa_opcode_name(encs[e], op))
                                continue;
                        if (encs[e] == ENC_VOP3 && !(op >= 320 && op < 384) && op < 512)
                                continue;
                        expected++;
                        snprintf(key, sizeof(key), "%s:%s", sim_isa_enc_name(encs[e]), name);
                        for (unsigned i = 0; i < n_listed && !found; i++)
                                found = !strcmp(listed[i], key);
                        if (!found) {
                                unlisted++;
                                cr_log_error("not listed in docs/simulator.md: %s", key);
                        }
                }
        cr_assert_gt(expected, 0);
        cr_assert_eq(unlisted, 0, "%u unimplemented opcodes missing from docs/simulator.md", unlisted);
        cr_assert_eq(n_listed, expected,
                     "docs/simulator.md lists %u opcodes, %u are unimplemented (a listed one runs now or is no opcode:"
                     " regenerate with gen-opcode-tables.py --unimplemented)",
                     n_listed, expected);
}
