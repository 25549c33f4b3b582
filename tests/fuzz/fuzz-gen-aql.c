/* SPDX-License-Identifier: MIT */
/*
 * Seeds of fuzz-relay-aql (its input layout is in fuzz-relay-aql.c): the
 * kernel descriptors of real code objects (tests/kernels, when built), an
 * amd_kernel_code_t as ROCr's blit kernels write it, a hand-made v3
 * descriptor, each in jobs that pass, and one refusal of every kind from
 * them.
 */
#include <elf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz-gen.h"

#define INPUT_SIZE 152u
#define FLAG_GFX11 0x1u
#define CODE_BASE 0x7f0000000000ull

typedef struct Seed {
        uint8_t b[INPUT_SIZE];
} Seed;

static void put(uint8_t *p, uint64_t v, unsigned n) {
        for (unsigned i = 0; i < n; i++)
                p[i] = (uint8_t) (v >> (8 * i));
}

static uint64_t get(const uint8_t *p, unsigned n) {
        uint64_t v = 0;

        for (unsigned i = 0; i < n; i++)
                v |= (uint64_t) p[i] << (8 * i);
        return v;
}

/* A job that passes around descriptor d at va: a 256 x 1 x 1 grid of 64
 * work-items, the descriptor's own LDS and scratch sizes (v3+), a signal,
 * the read index and timestamps. */
static void job(Seed *s, const uint8_t d[64], uint64_t va, bool v3) {
        memset(s, 0, sizeof *s);
        memcpy(s->b, d, 64);
        put(s->b + 65, va, 8);
        put(s->b + 73, 256, 4);
        put(s->b + 77, 1, 4);
        put(s->b + 81, 1, 4);
        put(s->b + 85, 64, 2);
        put(s->b + 87, 1, 2);
        put(s->b + 89, 1, 2);
        put(s->b + 91, v3 ? get(d, 4) : 0, 4);
        put(s->b + 95, v3 ? get(d + 4, 4) : 0, 4);
        put(s->b + 99, 0x7e0000001020ull, 8);   /* start_ts of an amd_signal_t at ...1000 */
        put(s->b + 107, 0x7e0000001008ull, 8);  /* its value */
        put(s->b + 131, 0x7e0000002038ull, 8);  /* amd_queue_t.read_dispatch_id */
        put(s->b + 139, 4, 8);
        s->b[151] = 1;
}

static int write_job(const char *dir, const char *name, const Seed *s) {
        return write_seed(dir, name, s->b, sizeof s->b);
}

/* The job, and one refusal of every kind made from it. */
static int variants(const char *dir, const char *name, const Seed *good, bool v3) {
        static const char *const what[] = {
                "grid-y-0", "block-z-0", "block-2048", "lds-65537", "scratch-1m", "rsrc1-priv", "rsrc2-trap",
                "rsrc3-reserved", "kcp-reserved", "reserved-bytes", "kernarg-preload", "user-sgprs-0",
                "entry-unaligned", "entry-wraps", "signal-unaligned", "index-unaligned", "ts-unaligned",
                "mailbox-unaligned", "gfx11", "gfx11-trap-on-start", "wave32",
        };
        char n[128];

        snprintf(n, sizeof n, "%s-ok", name);
        if (write_job(dir, n, good) < 0)
                return -1;
        for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) {
                Seed s = *good;
                uint8_t *b = s.b;

                switch (i) {
                case 0: put(b + 77, 0, 4); break;
                case 1: put(b + 89, 0, 2); break;
                case 2: put(b + 87, 32, 2); break;
                case 3: put(b + 91, 65537, 4); break;
                case 4: put(b + 95, 1u << 20, 4); break;
                case 5: b[48 + 2] |= 1u << 4; break;
                case 6: b[52] |= 1u << 6; break;
                case 7: b[44] |= 1u << 4; break;
                case 8: b[56] |= 1u << 7; break;
                case 9: b[30] = 1; break;
                case 10: b[58] = 1; break;
                case 11: b[52] &= (uint8_t) ~0x3Eu; break;
                case 12: put(b + 65, get(b + 65, 8) + 64, 8); break;
                case 13: put(b + 16, 1ull << 63, 8); break;
                case 14: put(b + 107, 0x7e000000100cull, 8); break;
                case 15: put(b + 131, 0x7e000000203cull, 8); break;
                case 16: put(b + 99, 0x7e0000001024ull, 8); break;
                case 17: put(b + 123, 0x7e0000003002ull, 8); break;
                case 18: b[64] |= FLAG_GFX11; break;
                case 19: b[64] |= FLAG_GFX11; b[44 + 1] |= 1u << 2; break; /* RSRC3 bit 10 */
                case 20: b[57] |= 1u << 2; break;                          /* kernel_code_properties bit 10 */
                }
                if (!v3 && (i == 7 || i == 9 || i == 10))
                        continue; /* no such field in amd_kernel_code_t */
                snprintf(n, sizeof n, "%s-%s", name, what[i]);
                if (write_job(dir, n, &s) < 0)
                        return -1;
        }
        return 0;
}

/* amd_kernel_code_t as ROCr's AssembleShader writes it for its gfx10 blit
 * kernels (ROCr amd_blit_kernel.cpp, amd_hsa_kernel_code.h): version 1.2,
 * AMD_MACHINE_KIND_AMDGPU, ISA 10.3.0, the code 256 bytes after it, 6 user
 * SGPRs (private segment buffer, kernarg segment ptr), is_ptr64,
 * private_element_size 4. */
static void kernel_code_t(uint8_t d[64]) {
        memset(d, 0, 64);
        put(d + 0, 1, 4);          /* amd_kernel_code_version_major */
        put(d + 4, 2, 4);          /* amd_kernel_code_version_minor */
        put(d + 8, 1, 2);          /* amd_machine_kind */
        put(d + 10, 10, 2);        /* amd_machine_version_major, minor, stepping */
        put(d + 12, 3, 2);
        put(d + 16, 256, 8);       /* kernel_code_entry_byte_offset */
        put(d + 24, 256, 8);       /* kernel_code_prefetch_byte_offset */
        put(d + 44, 1u << 20, 4);  /* high half of max_scratch_backing_memory_byte_size */
        put(d + 48, 0x60AF0041u, 4);
        put(d + 52, 0x0000008Cu, 4);
        put(d + 56, 0x9u | 1u << 19 | 2u << 17, 4);
}

/* A v3+ descriptor as clang writes one for a wave64 kernel with a kernarg
 * segment and a dispatch ptr. */
static void v3_descriptor(uint8_t d[64]) {
        memset(d, 0, 64);
        put(d + 0, 0, 4);          /* group_segment_fixed_size */
        put(d + 8, 24, 4);         /* kernarg_size */
        put(d + 16, 0x100 - 0x40, 8);
        put(d + 48, 0x60AF0041u, 4);
        put(d + 52, 0x00000088u, 4); /* USER_SGPR_COUNT 4, TGID_X_EN */
        put(d + 56, 0x000Au, 2);   /* dispatch ptr, kernarg segment ptr */
}

/* The first kernel descriptor (a symbol named *.kd) of an ELF64 code
 * object, and its address. */
static int read_descriptor(const char *path, uint8_t d[64], uint64_t *ret_va) {
        FILE *f = fopen(path, "rb");
        uint8_t *img = NULL;
        long size;
        int r = -1;

        if (!f)
                goto out;
        if (fseek(f, 0, SEEK_END) < 0 || (size = ftell(f)) < (long) sizeof(Elf64_Ehdr) || fseek(f, 0, SEEK_SET) < 0)
                goto out;
        img = malloc((size_t) size);
        if (!img || fread(img, 1, (size_t) size, f) != (size_t) size)
                goto out;
        const Elf64_Ehdr *eh = (const void *) img;
        if ((uint64_t) eh->e_shoff + (uint64_t) eh->e_shnum * sizeof(Elf64_Shdr) > (uint64_t) size)
                goto out;
        const Elf64_Shdr *sh = (const void *) (img + eh->e_shoff);
        for (unsigned i = 0; i < eh->e_shnum; i++) {
                if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum)
                        continue;
                const Elf64_Shdr *strs = &sh[sh[i].sh_link];
                for (uint64_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); k++) {
                        const Elf64_Sym *sym = (const void *) (img + sh[i].sh_offset + k * sizeof(Elf64_Sym));
                        const char *name = (const char *) img + strs->sh_offset + sym->st_name;
                        size_t len = strnlen(name, 256);
                        if (len < 3 || strcmp(name + len - 3, ".kd") != 0 || sym->st_shndx >= eh->e_shnum)
                                continue;
                        const Elf64_Shdr *sec = &sh[sym->st_shndx];
                        uint64_t off = sec->sh_offset + (sym->st_value - sec->sh_addr);
                        if (off + 64 > (uint64_t) size)
                                continue;
                        memcpy(d, img + off, 64);
                        *ret_va = sym->st_value;
                        r = 0;
                        goto out;
                }
        }
out:
        if (r < 0)
                fprintf(stderr, "%s: no kernel descriptor read\n", path);
        free(img);
        if (f)
                fclose(f);
        return r;
}

int relay_aql_corpus(const char *dir, char **code_objects, int n) {
        uint8_t d[64];
        Seed s;
        char name[64];

        kernel_code_t(d);
        job(&s, d, CODE_BASE + 0x1000, false);
        if (variants(dir, "rocr-blit", &s, false) < 0)
                return -1;
        v3_descriptor(d);
        job(&s, d, CODE_BASE + 0x2040, true);
        if (variants(dir, "v3", &s, true) < 0)
                return -1;
        for (int i = 0; i < n; i++) {
                uint64_t va;
                if (read_descriptor(code_objects[i], d, &va) < 0)
                        return -1;
                job(&s, d, CODE_BASE + va, true);
                snprintf(name, sizeof name, "code-object-%d", i);
                if (variants(dir, name, &s, true) < 0)
                        return -1;
        }
        return 0;
}
