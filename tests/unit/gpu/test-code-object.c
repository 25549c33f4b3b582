/* SPDX-License-Identifier: MIT */
/*
 * The code object loader (daemon/gpu/gpu-code-object.c) on the simulated
 * gfx1030, with the kernel corpus of tests/kernels/ as clang-15 built it:
 * every object loads and says what llvm-readelf-15 --notes says about it, the
 * code lands at its entry points byte for byte, relocations are applied;
 * malformed objects (each made from a real one by cutting or patching it) are
 * refused with the documented errno and a message naming the problem; random
 * byte flips never crash or leak; the metadata decoder on msgpack documents
 * built here; nothing stays behind (buffers, fds) after loads, unloads and
 * failures.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu-code-object-internal.h"
#include "gpu/gpu-internal.h"
#include "gpu/gpu.h"
#include "sim/sim.h"
#include "test-fini.h"

typedef struct Fixture {
        SimDevice *dev;
        GpuContext *ctx;
        unsigned fds_before;
} Fixture;

static Fixture fx;

static void setup(void) {
        memset(&fx, 0, sizeof fx);
        fx.fds_before = test_count_fds();
        cr_assert_eq(sim_device_new(NULL, &fx.dev), 0);
        int r = gpu_context_new(sim_device_get_ops(fx.dev), NULL, &fx.ctx);
        cr_assert_eq(r, 0, "gpu_context_new: %s", strerror(-r));
        cr_assert_eq(elf_version(EV_CURRENT), EV_CURRENT);
}

/* Fails the test on buffers or code objects still alive, fds or memory leaked (test-fini.h). */
static void teardown(void) {
        if (fx.ctx) {
                GpuContextStats st;

                gpu_context_get_stats(fx.ctx, &st);
                test_fini_expect(st.buffers == 0 && st.buffer_bytes == 0, "%u buffers (%llu bytes) still alive",
                                 st.buffers, (unsigned long long) st.buffer_bytes);
                test_fini_expect(!fx.ctx->code_objects, "a code object is still linked to the context");
        }
        fx.ctx = gpu_context_free(fx.ctx);
        fx.dev = sim_device_free(fx.dev);
        test_fini_expect(test_count_fds() == fx.fds_before, "fd leak: %u before, %u after", fx.fds_before,
                         test_count_fds());
        test_fini_end();
}

TestSuite(code_object, .init = setup, .fini = teardown, .timeout = 240);

/* ---- files ---- */

typedef struct Blob {
        uint8_t *data;
        size_t size;
} Blob;

static const char *corpus_path(const char *file) {
        static char buf[1024];
        snprintf(buf, sizeof buf, "%s/%s", CODE_OBJECT_DIR, file);
        return buf;
}

static Blob read_blob(const char *file) {
        Blob b = {};
        FILE *f = fopen(corpus_path(file), "rb");
        cr_assert_not_null(f, "%s: %s", corpus_path(file), strerror(errno));
        cr_assert_eq(fseek(f, 0, SEEK_END), 0);
        long n = ftell(f);
        cr_assert_gt(n, 0);
        rewind(f);
        b.data = malloc((size_t) n);
        b.size = (size_t) n;
        cr_assert_eq(fread(b.data, 1, b.size, f), b.size);
        fclose(f);
        return b;
}

static Blob blob_dup(const Blob *b) {
        Blob c = { .data = malloc(b->size), .size = b->size };
        memcpy(c.data, b->data, b->size);
        return c;
}

static void put32(uint8_t *p, uint32_t v) {
        memcpy(p, &v, 4);
}
static uint32_t get32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, 4);
        return v;
}
static void put64(uint8_t *p, uint64_t v) {
        memcpy(p, &v, 8);
}
static uint64_t get64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
}

/* ---- looking into an ELF file with libelf (the test's own view) ---- */

typedef struct Sec {
        GElf_Shdr sh;
        size_t index;
        size_t shdr_off; /* file offset of the section header */
} Sec;

static Elf *open_elf(const Blob *b) {
        Elf *e = elf_memory((char *) b->data, b->size);
        cr_assert_not_null(e, "%s", elf_errmsg(-1));
        return e;
}

static bool find_section(const Blob *b, const char *name, Sec *ret) {
        Elf *e = open_elf(b);
        size_t shstrndx;
        bool found = false;
        cr_assert_eq(elf_getshdrstrndx(e, &shstrndx), 0);
        for (Elf_Scn *s = elf_nextscn(e, NULL); s && !found; s = elf_nextscn(e, s)) {
                GElf_Shdr sh;
                gelf_getshdr(s, &sh);
                const char *n = elf_strptr(e, shstrndx, sh.sh_name);
                if (n && strcmp(n, name) == 0) {
                        Elf64_Ehdr eh;
                        memcpy(&eh, b->data, sizeof eh);
                        *ret = (Sec) { .sh = sh,
                                       .index = elf_ndxscn(s),
                                       .shdr_off = eh.e_shoff + elf_ndxscn(s) * sizeof(Elf64_Shdr) };
                        found = true;
                }
        }
        elf_end(e);
        return found;
}

/* Symbol name in table (".dynsym"/".symtab"): its value, and the file offset
 * of its Elf64_Sym. */
static bool find_symbol(const Blob *b, const char *table, const char *name, uint64_t *ret_value,
                        size_t *ret_sym_off) {
        Sec sec;
        cr_assert(find_section(b, table, &sec), "no %s", table);
        Elf *e = open_elf(b);
        Elf_Data *d = elf_getdata(elf_getscn(e, sec.index), NULL);
        bool found = false;
        for (size_t i = 1; i < sec.sh.sh_size / sizeof(Elf64_Sym) && !found; i++) {
                GElf_Sym s;
                gelf_getsym(d, (int) i, &s);
                const char *n = elf_strptr(e, sec.sh.sh_link, s.st_name);
                if (n && strcmp(n, name) == 0) {
                        *ret_value = s.st_value;
                        if (ret_sym_off)
                                *ret_sym_off = sec.sh.sh_offset + i * sizeof(Elf64_Sym);
                        found = true;
                }
        }
        elf_end(e);
        return found;
}

static size_t vaddr_to_offset(const Blob *b, uint64_t vaddr) {
        Elf *e = open_elf(b);
        size_t n;
        elf_getphdrnum(e, &n);
        for (size_t i = 0; i < n; i++) {
                GElf_Phdr ph;
                gelf_getphdr(e, (int) i, &ph);
                if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
                        elf_end(e);
                        return ph.p_offset + (vaddr - ph.p_vaddr);
                }
        }
        elf_end(e);
        cr_assert_fail("vaddr 0x%llx not in a segment", (unsigned long long) vaddr);
        return 0;
}

/* File offset of the first kernel descriptor named symbol. */
static size_t kd_offset(const Blob *b, const char *symbol) {
        uint64_t v;
        cr_assert(find_symbol(b, ".dynsym", symbol, &v, NULL), "no %s", symbol);
        return vaddr_to_offset(b, v);
}

/* File offset and size of the NT_AMDGPU_METADATA desc. */
static size_t metadata_offset(const Blob *b, size_t *ret_size) {
        Sec sec;
        cr_assert(find_section(b, ".note", &sec));
        Elf *e = open_elf(b);
        Elf_Data *d = elf_getdata(elf_getscn(e, sec.index), NULL);
        size_t off = 0, found = 0;
        GElf_Nhdr nh;
        size_t name_off, desc_off;
        while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0)
                if (nh.n_type == 32) {
                        found = sec.sh.sh_offset + desc_off;
                        *ret_size = nh.n_descsz;
                }
        elf_end(e);
        cr_assert_neq(found, 0u, "no metadata note");
        return found;
}

/* File offset of the value after the nth (0-based) occurrence of msgpack
 * string key in the metadata. */
static size_t metadata_value(const Blob *b, const char *key, unsigned nth) {
        size_t size, base = metadata_offset(b, &size);
        size_t klen = strlen(key);
        cr_assert_lt(klen, 32u);
        uint8_t pat[40];
        pat[0] = (uint8_t) (0xa0 | klen);
        memcpy(pat + 1, key, klen);
        for (size_t i = 0; i + klen + 1 < size; i++)
                if (memcmp(b->data + base + i, pat, klen + 1) == 0 && nth-- == 0)
                        return base + i + klen + 1;
        cr_assert_fail("metadata key %s not found", key);
        return 0;
}

/* ---- loading ---- */

static char errbuf[512];

static GpuCodeObject *load_ok(const Blob *b) {
        GpuCodeObject *co = NULL;
        errbuf[0] = '\0';
        int r = gpu_code_object_load(fx.ctx, b->data, b->size, &co, errbuf, sizeof errbuf);
        cr_assert_eq(r, 0, "load: %s: %s", strerror(-r), errbuf);
        cr_assert_not_null(co);
        return co;
}

static void load_fails(const Blob *b, int want, const char *msg) {
        GpuCodeObject *co = NULL;
        errbuf[0] = '\0';
        int r = gpu_code_object_load(fx.ctx, b->data, b->size, &co, errbuf, sizeof errbuf);
        cr_assert_eq(r, want, "expected %s (%s), got %d (%s): %s", strerror(-want), msg, r,
                     r < 0 ? strerror(-r) : "success", errbuf);
        cr_assert_null(co);
        cr_assert(strstr(errbuf, msg), "message '%s' does not contain '%s'", errbuf, msg);
}

/* ---- what llvm-readelf-15 --notes says ---- */

typedef struct RArg {
        uint32_t offset, size;
        char value_kind[40], name[64], address_space[16];
} RArg;

typedef struct RKernel {
        char name[128], symbol[140];
        uint32_t kernarg_size, kernarg_align, group, priv, max_wg, wave;
        unsigned n_args;
        RArg args[64];
} RKernel;

static void set_field(char *dst, size_t size, const char *v) {
        size_t n = strlen(v);
        if (n >= 2 && v[0] == '\'' && v[n - 1] == '\'') {
                v++;
                n -= 2;
        }
        cr_assert_lt(n, size);
        memcpy(dst, v, n);
        dst[n] = '\0';
}

static unsigned readelf_kernels(const char *file, RKernel *ks, unsigned max) {
        char cmd[1200], line[512];
        unsigned n = 0;
        RKernel *k = NULL;
        RArg *a = NULL;

        snprintf(cmd, sizeof cmd, "'%s' --notes '%s'", LLVM_READELF, corpus_path(file));
        FILE *p = popen(cmd, "r");
        cr_assert_not_null(p);
        while (fgets(line, sizeof line, p)) {
                line[strcspn(line, "\n")] = '\0';
                size_t ind = strspn(line, " ");
                char *s = line + ind;
                size_t col = ind;
                bool item = strncmp(s, "- ", 2) == 0;
                if (item) {
                        s += 2;
                        col += 2;
                }
                if (s[0] != '.')
                        continue;
                char *colon = strchr(s, ':');
                if (!colon)
                        continue;
                *colon = '\0';
                const char *key = s, *val = colon + 1 + strspn(colon + 1, " ");
                if (col == 4) {
                        if (item) {
                                cr_assert_lt(n, max);
                                k = &ks[n++];
                                memset(k, 0, sizeof *k);
                                a = NULL;
                        }
                        cr_assert_not_null(k);
                        if (!strcmp(key, ".name"))
                                set_field(k->name, sizeof k->name, val);
                        else if (!strcmp(key, ".symbol"))
                                set_field(k->symbol, sizeof k->symbol, val);
                        else if (!strcmp(key, ".kernarg_segment_size"))
                                k->kernarg_size = (uint32_t) strtoul(val, NULL, 0);
                        else if (!strcmp(key, ".kernarg_segment_align"))
                                k->kernarg_align = (uint32_t) strtoul(val, NULL, 0);
                        else if (!strcmp(key, ".group_segment_fixed_size"))
                                k->group = (uint32_t) strtoul(val, NULL, 0);
                        else if (!strcmp(key, ".private_segment_fixed_size"))
                                k->priv = (uint32_t) strtoul(val, NULL, 0);
                        else if (!strcmp(key, ".max_flat_workgroup_size"))
                                k->max_wg = (uint32_t) strtoul(val, NULL, 0);
                        else if (!strcmp(key, ".wavefront_size"))
                                k->wave = (uint32_t) strtoul(val, NULL, 0);
                } else if (col == 8 && k) {
                        if (item) {
                                cr_assert_lt(k->n_args, 64u);
                                a = &k->args[k->n_args++];
                        }
                        cr_assert_not_null(a);
                        if (!strcmp(key, ".offset"))
                                a->offset = (uint32_t) strtoul(val, NULL, 0);
                        else if (!strcmp(key, ".size"))
                                a->size = (uint32_t) strtoul(val, NULL, 0);
                        else if (!strcmp(key, ".value_kind"))
                                set_field(a->value_kind, sizeof a->value_kind, val);
                        else if (!strcmp(key, ".name"))
                                set_field(a->name, sizeof a->name, val);
                        else if (!strcmp(key, ".address_space"))
                                set_field(a->address_space, sizeof a->address_space, val);
                }
        }
        cr_assert_eq(pclose(p), 0, "%s failed", cmd);
        return n;
}

static GpuArgKind expected_kind(const char *vk) {
        if (!strcmp(vk, "by_value"))
                return GPU_ARG_BY_VALUE;
        if (!strcmp(vk, "global_buffer"))
                return GPU_ARG_GLOBAL_BUFFER;
        if (!strcmp(vk, "dynamic_shared_pointer"))
                return GPU_ARG_DYNAMIC_LDS;
        cr_assert(!strncmp(vk, "hidden_", 7), "unexpected value kind %s in the corpus", vk);
        return GPU_ARG_HIDDEN;
}

/* Checks one loaded object against readelf and the file's bytes. */
static void check_against_file(const char *file) {
        Blob b = read_blob(file);
        RKernel *rk = calloc(16, sizeof *rk);
        unsigned nk = readelf_kernels(file, rk, 16);
        cr_assert_gt(nk, 0u, "%s: readelf shows no kernel", file);

        GpuContextStats before, after;
        gpu_context_get_stats(fx.ctx, &before);
        GpuCodeObject *co = load_ok(&b);
        gpu_context_get_stats(fx.ctx, &after);
        cr_expect_eq(after.buffers, before.buffers + 1, "%s: the code buffer is counted", file);
        cr_expect_eq(after.buffer_bytes - before.buffer_bytes, gpu_code_object_get_size(co));
        cr_expect_eq(gpu_code_object_get_size(co), gpu_buffer_get_size(co->code));
        cr_expect_eq(gpu_code_object_get_size(co) % 4096, 0u);

        cr_assert_eq(gpu_code_object_n_kernels(co), nk, "%s: %u kernels, readelf shows %u", file,
                     gpu_code_object_n_kernels(co), nk);
        Sec text;
        cr_assert(find_section(&b, ".text", &text));
        uint64_t va = gpu_buffer_get_va(co->code), size = gpu_buffer_get_size(co->code);
        const uint8_t *cpu = gpu_buffer_get_cpu(co->code);

        for (unsigned i = 0; i < nk; i++) {
                const GpuKernel *k = gpu_code_object_kernel(co, i);
                const GpuKernelCode *kc = &co->kernel_code[i];
                const RKernel *r = &rk[i];
                char want_name[140];
                snprintf(want_name, sizeof want_name, "%s", r->symbol);
                cr_assert_gt(strlen(want_name), 3u);
                want_name[strlen(want_name) - 3] = '\0';
                cr_expect_str_eq(k->name, want_name, "%s kernel %u", file, i);
                cr_expect_str_eq(k->name, r->name);
                cr_expect_eq(gpu_code_object_find(co, r->name), (int) i);
                cr_expect_eq(k->kernarg_size, r->kernarg_size, "%s %s kernarg", file, k->name);
                cr_expect_eq(k->kernarg_align, r->kernarg_align);
                cr_expect_eq(k->group_segment_size, r->group);
                cr_expect_eq(k->private_segment_size, r->priv);
                cr_expect_eq(k->max_flat_workgroup_size, r->max_wg);
                cr_expect_eq(kc->wave32, r->wave == 32);
                cr_expect_eq(kc->wave32, !!(kc->code_properties & (1u << 10)));
                cr_assert_eq(k->n_args, r->n_args, "%s %s: %u args, readelf shows %u", file, k->name,
                             k->n_args, r->n_args);
                for (unsigned j = 0; j < k->n_args; j++) {
                        const GpuKernelArg *a = &k->args[j];
                        cr_expect_eq(a->offset, r->args[j].offset, "%s %s arg %u offset", file, k->name, j);
                        cr_expect_eq(a->size, r->args[j].size, "%s %s arg %u size", file, k->name, j);
                        cr_expect_str_eq(a->value_kind, r->args[j].value_kind);
                        cr_expect_str_eq(a->name, r->args[j].name);
                        cr_expect_eq(a->kind, expected_kind(r->args[j].value_kind), "%s %s arg %u kind",
                                     file, k->name, j);
                }

                /* The descriptor and the code are where the file says. */
                cr_assert(kc->kd_va >= va && kc->kd_va + 64 <= va + size);
                cr_expect_eq(memcmp(cpu + (kc->kd_va - va), b.data + kd_offset(&b, r->symbol), 64), 0,
                             "%s: descriptor bytes", file);
                cr_assert(kc->entry_va >= va && kc->entry_va < va + size, "%s: entry outside the buffer",
                          file);
                cr_expect_eq(kc->entry_va % 256, 0u);
                uint64_t ev = kc->entry_va - va;
                cr_assert(ev >= text.sh.sh_addr && ev < text.sh.sh_addr + text.sh.sh_size,
                          "%s %s: entry 0x%llx not in .text", file, k->name, (unsigned long long) ev);
                size_t n = text.sh.sh_addr + text.sh.sh_size - ev;
                cr_expect_eq(memcmp(cpu + ev, b.data + text.sh.sh_offset + (ev - text.sh.sh_addr), n), 0,
                             "%s %s: code bytes differ from .text", file, k->name);
                cr_expect_eq(kc->rsrc1, get32(b.data + kd_offset(&b, r->symbol) + 48));
                cr_expect_eq(kc->rsrc2, get32(b.data + kd_offset(&b, r->symbol) + 52));
                cr_expect_eq(kc->rsrc3, get32(b.data + kd_offset(&b, r->symbol) + 44));
        }
        cr_expect_null(gpu_code_object_kernel(co, nk));
        cr_expect_eq(gpu_code_object_find(co, "no_such_kernel"), -ENOENT);

        gpu_code_object_unref(co);
        gpu_context_get_stats(fx.ctx, &after);
        cr_expect_eq(after.buffers, before.buffers);
        cr_expect_eq(after.buffer_bytes, before.buffer_bytes);
        free(rk);
        free(b.data);
}

Test(code_object, corpus_loads_as_readelf_describes_it) {
        char list[] = CODE_OBJECTS, *save = NULL;
        unsigned n = 0;
        for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
                check_against_file(f);
                n++;
        }
        cr_expect_geq(n, 17u, "the whole corpus ran");
}

Test(code_object, v5_hidden_arguments) {
        Blob b = read_blob("vector-add-v5.hsaco");
        GpuCodeObject *co = load_ok(&b);
        const GpuKernel *k = gpu_code_object_kernel(co, 0);
        cr_assert_str_eq(k->name, "vector_add");
        cr_expect_eq(k->kernarg_size, 288u);
        /* AMDGPUUsage "Code Object V5 Metadata": hidden_block_count_x at 32 (4 bytes) */
        cr_assert_geq(k->n_args, 5u);
        cr_expect_str_eq(k->args[4].value_kind, "hidden_block_count_x");
        cr_expect_eq(k->args[4].offset, 32u);
        cr_expect_eq(k->args[4].size, 4u);
        cr_expect_eq(k->args[4].kind, GPU_ARG_HIDDEN);
        gpu_code_object_unref(co);
        free(b.data);
}

/* The pointers in .data hold GPU addresses of the globals after loading:
 * hidden globals through R_AMDGPU_RELATIVE64, exported ones through
 * R_AMDGPU_ABS64 (also the GOT entry the code reads exported_ptr through). */
static void check_globals(const char *file) {
        Blob b = read_blob(file);
        GpuCodeObject *co = load_ok(&b);
        uint64_t base = gpu_buffer_get_va(co->code);
        const uint8_t *cpu = gpu_buffer_get_cpu(co->code);
        struct {
                const char *ptr, *target;
                uint64_t addend;
        } want[] = {
                { "table_ptr", "table", 8 },
                { "ctable_ptr", "ctable", 4 },
                { "exported_ptr", "exported", 12 },
        };
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
                uint64_t p, t;
                cr_assert(find_symbol(&b, ".symtab", want[i].ptr, &p, NULL), "%s", want[i].ptr);
                cr_assert(find_symbol(&b, ".symtab", want[i].target, &t, NULL), "%s", want[i].target);
                cr_expect_eq(get64(cpu + p), base + t + want[i].addend, "%s: %s = 0x%llx, expected 0x%llx",
                             file, want[i].ptr, (unsigned long long) get64(cpu + p),
                             (unsigned long long) (base + t + want[i].addend));
        }
        /* Every 8-byte word of the loaded image that the file has as 0 but is
         * now a pointer into the buffer was written by a relocation; there are
         * as many as .rela.dyn has entries. */
        Sec rela;
        cr_assert(find_section(&b, ".rela.dyn", &rela));
        unsigned n = 0;
        for (size_t i = 0; i < rela.sh.sh_size / sizeof(Elf64_Rela); i++) {
                Elf64_Rela r;
                memcpy(&r, b.data + rela.sh.sh_offset + i * sizeof r, sizeof r);
                uint64_t v = get64(cpu + r.r_offset);
                cr_expect(v >= base && v < base + gpu_buffer_get_size(co->code), "%s: reloc %zu -> 0x%llx",
                          file, i, (unsigned long long) v);
                n++;
        }
        cr_expect_eq(n, 4u, "%s: two RELATIVE64 and two ABS64 relocations", file);

        cr_assert_eq(gpu_code_object_n_kernels(co), 2u);
        int s = gpu_code_object_find(co, "scatter");
        cr_assert_geq(s, 0);
        const GpuKernel *k = gpu_code_object_kernel(co, (unsigned) s);
        cr_assert_geq(k->n_args, 3u);
        cr_expect_eq(k->args[0].kind, GPU_ARG_GLOBAL_BUFFER);
        cr_expect_eq(k->args[1].kind, GPU_ARG_DYNAMIC_LDS);
        cr_expect_str_eq(k->args[1].name, "", "clang emits argument names only with -cl-kernel-arg-info");
        cr_expect_eq(k->args[1].size, 4u);
        cr_expect_eq(k->args[2].kind, GPU_ARG_BY_VALUE);
        gpu_code_object_unref(co);
        free(b.data);
}

Test(code_object, relocations_v4) {
        check_globals("globals.hsaco");
}

Test(code_object, relocations_v5) {
        check_globals("globals-v5.hsaco");
}

Test(code_object, refcount_and_cycles_leave_nothing) {
        Blob b = read_blob("matmul-tiled.hsaco");
        for (unsigned i = 0; i < 40; i++) {
                GpuCodeObject *co = load_ok(&b);
                cr_assert_eq(gpu_code_object_ref(co), co);
                cr_assert_null(gpu_code_object_unref(co));
                GpuContextStats st;
                gpu_context_get_stats(fx.ctx, &st);
                cr_assert_eq(st.buffers, 1u, "the extra reference kept it alive");
                cr_assert_null(gpu_code_object_unref(co));
        }
        cr_expect_null(gpu_code_object_unref(NULL));
        cr_expect_eq(gpu_code_object_n_kernels(NULL), 0u);
        cr_expect_eq(gpu_code_object_get_size(NULL), 0u);
        free(b.data);
}

Test(code_object, context_freed_first) {
        Blob b = read_blob("vector-add.hsaco");
        GpuCodeObject *a = load_ok(&b), *c = load_ok(&b);
        fx.ctx = gpu_context_free(fx.ctx);
        cr_expect_null(a->ctx);
        cr_expect_null(c->ctx);
        cr_expect_str_eq(gpu_code_object_kernel(a, 0)->name, "vector_add");
        gpu_code_object_unref(c);
        gpu_code_object_unref(a);
        free(b.data);
}

/* Parsed once for the device, loaded where it is dispatched: each context
 * gets a copy of its own, kept until the parsed object or the context goes. */
Test(code_object, parsed_then_loaded_per_context) {
        Blob b = read_blob("matmul-tiled.hsaco");
        GpuCodeObject *p = NULL, *here = NULL, *again = NULL, *there = NULL;
        char err[256];
        cr_assert_eq(gpu_code_object_parse(gpu_context_get_info(fx.ctx), b.data, b.size, &p, err, sizeof err), 0,
                     "%s", err);
        cr_expect_null(p->ctx);
        cr_expect_null(p->code);
        cr_expect_eq(gpu_code_object_n_kernels(p), 1u);
        cr_expect_str_eq(gpu_code_object_kernel(p, 0)->name, "matmul_tiled");
        cr_expect_gt(gpu_code_object_get_size(p), 0u, "what loading it will occupy");
        GpuContextStats st;
        gpu_context_get_stats(fx.ctx, &st);
        cr_expect_eq(st.buffers, 0u, "parsing allocates nothing on the GPU");

        cr_assert_eq(gpu_code_object_load_in(p, fx.ctx, &here, err, sizeof err), 0, "%s", err);
        cr_expect_eq(here->ctx, fx.ctx);
        cr_expect_eq(gpu_code_object_get_size(here), gpu_code_object_get_size(p));
        cr_assert_eq(gpu_code_object_load_in(p, fx.ctx, &again, err, sizeof err), 0);
        cr_expect_eq(again, here, "loaded once per context");

        GpuContext *other = NULL;
        GpuContextOptions o = { .flags = GPU_CONTEXT_SECONDARY };
        cr_assert_eq(gpu_context_new(sim_device_get_ops(fx.dev), &o, &other), 0);
        cr_assert_eq(gpu_code_object_load_in(p, other, &there, err, sizeof err), 0, "%s", err);
        cr_expect_neq(there->kernel_code[0].entry_va, here->kernel_code[0].entry_va, "its own copy");
        cr_expect_eq(there->kernel_code[0].entry_va - gpu_buffer_get_va(there->code),
                     here->kernel_code[0].entry_va - gpu_buffer_get_va(here->code));
        gpu_context_get_stats(other, &st);
        cr_expect_eq(st.buffers, 1u);
        /* The other context goes first: its copy goes with it. */
        other = gpu_context_free(other);
        cr_expect_null(p->loads->load_next, "one copy left");
        /* A loaded (not parsed) object cannot be loaded elsewhere. */
        cr_expect_eq(gpu_code_object_load_in(here, fx.ctx, &again, err, sizeof err), 0, "itself");
        gpu_code_object_unref(p); /* takes the copy in fx.ctx with it */
        gpu_context_get_stats(fx.ctx, &st);
        cr_expect_eq(st.buffers, 0u);
        free(b.data);
}

Test(code_object, bad_arguments) {
        GpuCodeObject *co = NULL;
        cr_expect_eq(gpu_code_object_load(NULL, "x", 1, &co, NULL, 0), -EINVAL);
        cr_expect_eq(gpu_code_object_load(fx.ctx, NULL, 1, &co, NULL, 0), -EINVAL);
        cr_expect_eq(gpu_code_object_load(fx.ctx, "x", 1, NULL, NULL, 0), -EINVAL);
        /* no err buffer is fine */
        cr_expect_eq(gpu_code_object_load(fx.ctx, "x", 1, &co, NULL, 0), -ENOEXEC);
        cr_expect_null(co);
}

/* ---- malformed objects ---- */

Test(code_object, empty_and_not_elf) {
        Blob b = { .data = (uint8_t *) "", .size = 0 };
        load_fails(&b, -ENOEXEC, "the code object is empty");
        b = (Blob) { .data = (uint8_t *) "#!/bin/sh\necho hi\n", .size = 18 };
        load_fails(&b, -ENOEXEC, "not an ELF file");
        b = (Blob) { .data = (uint8_t *) "\x7f"
                                         "EL",
                     .size = 3 };
        load_fails(&b, -ENOEXEC, "not an ELF file");
}

Test(code_object, truncated_at_every_byte) {
        Blob b = read_blob("vector-add.hsaco");
        for (size_t cut = 0; cut < b.size; cut++) {
                Blob t = { .data = b.data, .size = cut };
                GpuCodeObject *co = NULL;
                errbuf[0] = '\0';
                int r = gpu_code_object_load(fx.ctx, t.data, t.size, &co, errbuf, sizeof errbuf);
                cr_assert_eq(r, -ENOEXEC, "cut at %zu: %d %s", cut, r, errbuf);
                cr_assert(strstr(errbuf, "past the end of the file") || strstr(errbuf, "ends inside") ||
                                  strstr(errbuf, "empty") || strstr(errbuf, "not an ELF"),
                          "cut at %zu: '%s'", cut, errbuf);
        }
        Elf64_Ehdr eh;
        memcpy(&eh, b.data, sizeof eh);
        Blob t = { .data = b.data, .size = 10 };
        load_fails(&t, -ENOEXEC, "the file ends inside the ELF identification (10 of 16 bytes)");
        t.size = 40;
        load_fails(&t, -ENOEXEC, "the file ends inside the ELF header (40 of 64 bytes)");
        t.size = eh.e_phoff + 3 * sizeof(Elf64_Phdr) + 10;
        load_fails(&t, -ENOEXEC, "the program header table extends past the end of the file");
        Sec text;
        cr_assert(find_section(&b, ".text", &text));
        t.size = text.sh.sh_offset + 16;
        load_fails(&t, -ENOEXEC, "the section header table extends past the end of the file");
        free(b.data);
}

/* A cut inside a section when the section header table survives: cut the
 * file, then append the original section header table and point e_shoff at
 * it (the table of a linked object is at its end, so a plain cut always
 * takes it first). */
static void cut_keeping_section_table(const Blob *b, size_t cut, Blob *ret) {
        Elf64_Ehdr eh;
        Elf64_Shdr str;
        memcpy(&eh, b->data, sizeof eh);
        memcpy(&str, b->data + eh.e_shoff + eh.e_shstrndx * sizeof str, sizeof str);
        size_t at = (cut + 7) & ~(size_t) 7, tab = (size_t) eh.e_shnum * sizeof(Elf64_Shdr);
        ret->size = at + tab + str.sh_size; /* the table, then the section names */
        ret->data = calloc(1, ret->size);
        memcpy(ret->data, b->data, cut);
        memcpy(ret->data + at, b->data + eh.e_shoff, tab);
        memcpy(ret->data + at + tab, b->data + str.sh_offset, str.sh_size);
        str.sh_offset = at + tab;
        memcpy(ret->data + at + eh.e_shstrndx * sizeof str, &str, sizeof str);
        eh.e_shoff = at;
        memcpy(ret->data, &eh, sizeof eh);
}

Test(code_object, truncated_inside_sections) {
        Blob b = read_blob("vector-add.hsaco"), t;
        Sec note;
        cr_assert(find_section(&b, ".note", &note));
        size_t md_size, md = metadata_offset(&b, &md_size);
        Elf64_Ehdr eh;
        Sec shstr;
        memcpy(&eh, b.data, sizeof eh);
        cr_assert(find_section(&b, ".shstrtab", &shstr));
        /* inside the msgpack document, early enough that the appended table
         * and names still end before the note does */
        size_t cut = note.sh.sh_offset + note.sh.sh_size - eh.e_shnum * sizeof(Elf64_Shdr) -
                     shstr.sh.sh_size - 8;
        cr_assert(cut > md && cut < md + md_size);
        cut_keeping_section_table(&b, cut, &t);
        cr_assert_lt(t.size, note.sh.sh_offset + note.sh.sh_size);
        load_fails(&t, -ENOEXEC, "section .note extends past the end of the file");
        free(t.data);
        cut_keeping_section_table(&b, note.sh.sh_offset + 8, &t);
        load_fails(&t, -ENOEXEC, "section .note extends past the end of the file");
        free(t.data);

        /* a section or segment whose declared size runs past the end */
        Sec text;
        cr_assert(find_section(&b, ".text", &text));
        t = blob_dup(&b);
        put64(t.data + text.shdr_off + offsetof(Elf64_Shdr, sh_size), b.size);
        load_fails(&t, -ENOEXEC, "section .text extends past the end of the file");
        free(t.data);

        t = blob_dup(&b);
        size_t ph2 = eh.e_phoff + 2 * sizeof(Elf64_Phdr); /* the R E PT_LOAD */
        cr_assert_eq(get32(t.data + ph2), PT_LOAD);
        put64(t.data + ph2 + offsetof(Elf64_Phdr, p_filesz), b.size);
        put64(t.data + ph2 + offsetof(Elf64_Phdr, p_memsz), b.size);
        load_fails(&t, -ENOEXEC, "segment 2 (PT_LOAD, file offset 0x800");
        free(t.data);
        free(b.data);
}

Test(code_object, wrong_identity) {
        Blob b = read_blob("saxpy.hsaco"), t;
        struct {
                size_t off;
                uint8_t val;
                int err;
                const char *msg;
        } cases[] = {
                { EI_CLASS, ELFCLASS32, -ENOEXEC, "ELF class 1 is not ELFCLASS64" },
                { EI_DATA, ELFDATA2MSB, -ENOEXEC, "not little endian" },
                { EI_VERSION, 0, -ENOEXEC, "ELF version 0 is not EV_CURRENT" },
                { EI_OSABI, 0, -ENOEXEC, "OS ABI 0 is not ELFOSABI_AMDGPU_HSA (64)" },
                { EI_ABIVERSION, 1, -ENOEXEC, "code object v3 is not supported, only v4 and v5" },
                { EI_ABIVERSION, 4, -ENOEXEC, "code object v6 is not supported" },
                { EI_ABIVERSION, 9, -ENOEXEC, "unknown AMDGPU HSA ABI version 9" },
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                t = blob_dup(&b);
                t.data[cases[i].off] = cases[i].val;
                load_fails(&t, cases[i].err, cases[i].msg);
                free(t.data);
        }

        t = blob_dup(&b);
        uint16_t m = EM_X86_64;
        memcpy(t.data + offsetof(Elf64_Ehdr, e_machine), &m, 2);
        load_fails(&t, -ENOEXEC, "ELF machine 62 is not EM_AMDGPU (224)");
        free(t.data);

        uint16_t types[] = { ET_EXEC, ET_REL, ET_CORE };
        const char *msgs[] = { "ELF type ET_EXEC", "ELF type ET_REL: a relocatable object",
                               "ELF type 4 is not ET_DYN" };
        for (size_t i = 0; i < 3; i++) {
                t = blob_dup(&b);
                memcpy(t.data + offsetof(Elf64_Ehdr, e_type), &types[i], 2);
                load_fails(&t, -ENOEXEC, msgs[i]);
                free(t.data);
        }
        free(b.data);
}

static void with_flags(const Blob *b, uint32_t flags, int err, const char *msg) {
        Blob t = blob_dup(b);
        put32(t.data + offsetof(Elf64_Ehdr, e_flags), flags);
        if (err == 0) {
                gpu_code_object_unref(load_ok(&t));
        } else
                load_fails(&t, err, msg);
        free(t.data);
}

Test(code_object, other_targets) {
        Blob b = read_blob("vector-add.hsaco");
        cr_assert_eq(get32(b.data + offsetof(Elf64_Ehdr, e_flags)), 0x036u, "gfx1030, no features");
        with_flags(&b, 0x041, -EXDEV, "built for gfx1100, this device is gfx1030");
        with_flags(&b, 0x037, -EXDEV, "built for gfx1031, this device is gfx1030");
        with_flags(&b, 0x033 | 0x100, -EXDEV, "built for gfx1010, this device is gfx1030");
        with_flags(&b, 0x02c, -EXDEV, "built for EF_AMDGPU_MACH 0x02c, this device is gfx1030");
        with_flags(&b, 0x036 | 0x100, -EINVAL, "sets an XNACK mode, but gfx1030 has no XNACK");
        with_flags(&b, 0x036 | 0x400, -EINVAL, "sets an SRAMECC mode, but gfx1030 has no SRAMECC");
        with_flags(&b, 0x036 | 0x1000, -EINVAL, "has unknown bits 0x1000");
        free(b.data);
}

Test(code_object, kernel_descriptor_symbols) {
        Blob b = read_blob("vector-add.hsaco"), t;
        uint64_t v;
        size_t sym;
        cr_assert(find_symbol(&b, ".dynsym", "vector_add.kd", &v, &sym));

        t = blob_dup(&b); /* no .kd object symbol left */
        t.data[sym + offsetof(Elf64_Sym, st_info)] = ELF64_ST_INFO(STB_GLOBAL, STT_NOTYPE);
        load_fails(&t, -ENOEXEC, "no kernel descriptor (no STT_OBJECT symbol named <kernel>.kd)");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + sym + offsetof(Elf64_Sym, st_value), 0x100000);
        load_fails(&t, -EINVAL,
                   "kernel descriptor vector_add.kd at 0x100000 lies outside the loaded segments");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + sym + offsetof(Elf64_Sym, st_value), v + 8);
        load_fails(&t, -EINVAL, "is not 64-byte aligned");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + sym + offsetof(Elf64_Sym, st_size), 32);
        load_fails(&t, -EINVAL, "kernel descriptor vector_add.kd is 32 bytes, not 64");
        free(t.data);

        t = blob_dup(&b);
        uint16_t undef = SHN_UNDEF;
        memcpy(t.data + sym + offsetof(Elf64_Sym, st_shndx), &undef, 2);
        load_fails(&t, -EINVAL, "kernel descriptor vector_add.kd is an undefined symbol");
        free(t.data);

        /* the .kd symbol renamed (same length): metadata and symbols disagree */
        t = blob_dup(&b);
        uint32_t name_off = get32(t.data + sym + offsetof(Elf64_Sym, st_name));
        Sec dynsym, dynstr;
        cr_assert(find_section(&b, ".dynsym", &dynsym));
        cr_assert(find_section(&b, ".dynstr", &dynstr));
        uint8_t *nm = t.data + dynstr.sh.sh_offset + name_off;
        cr_assert_eq(memcmp(nm, "vector_add.kd", 14), 0);
        nm[0] = 'W';
        load_fails(&t, -EINVAL, "kernel descriptor Wector_add.kd has no metadata");
        nm[0] = 0x01;
        load_fails(&t, -EINVAL, "kernel name '\\x01ector_add' has a byte outside printable ASCII");
        free(t.data);
        free(b.data);
}

Test(code_object, kernel_descriptor_fields) {
        Blob b = read_blob("vector-add.hsaco"), t;
        size_t kd = kd_offset(&b, "vector_add.kd");

        t = blob_dup(&b); /* entry offset far out */
        put64(t.data + kd + 16, 0x100000);
        load_fails(
                &t, -EINVAL,
                "kernel vector_add: the entry point (descriptor at 0x740 +1048576) is outside the executable segment");
        free(t.data);

        t = blob_dup(&b); /* entry into the descriptor's own (non-executable) segment */
        put64(t.data + kd + 16, 0);
        load_fails(&t, -EINVAL, "is outside the executable segment");
        free(t.data);

        t = blob_dup(&b); /* negative, before the image */
        put64(t.data + kd + 16, (uint64_t) -0x10000);
        load_fails(&t, -EINVAL, "is outside the executable segment");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + kd + 16, get64(b.data + kd + 16) + 4);
        load_fails(&t, -EINVAL, "kernel vector_add: the entry point 0x1804 is not 256-byte aligned");
        free(t.data);

        t = blob_dup(&b); /* RSRC2.USER_SGPR_COUNT 8 -> 5 */
        uint32_t rsrc2 = get32(b.data + kd + 52);
        cr_assert_eq((rsrc2 >> 1) & 0x1f, 8u);
        put32(t.data + kd + 52, (rsrc2 & ~0x3eu) | (5u << 1));
        load_fails(
                &t, -EINVAL,
                "kernel vector_add: COMPUTE_PGM_RSRC2.USER_SGPR_COUNT is 5 but kernel_code_properties 0x40b enables 8 user SGPRs");
        free(t.data);

        t = blob_dup(&b); /* an extra user SGPR enabled: queue ptr */
        t.data[kd + 56] |= 1u << 2;
        load_fails(&t, -EINVAL,
                   "USER_SGPR_COUNT is 8 but kernel_code_properties 0x40f enables 10 user SGPRs");
        free(t.data);

        size_t reserved[] = { 12, 24, 43, 60, 63 };
        for (size_t i = 0; i < 5; i++) {
                t = blob_dup(&b);
                t.data[kd + reserved[i]] = 1;
                load_fails(&t, -EINVAL,
                           "kernel vector_add: reserved bytes of the kernel descriptor are not zero");
                free(t.data);
        }

        t = blob_dup(&b);
        t.data[kd + 58] = 0x81;
        load_fails(&t, -EINVAL, "asks for kernarg preload, which gfx1030 does not have");
        free(t.data);

        t = blob_dup(&b);
        t.data[kd + 57] |= 0x10; /* kernel_code_properties bit 12 */
        load_fails(&t, -EINVAL, "kernel_code_properties 0x140b sets reserved bits");
        free(t.data);

        t = blob_dup(&b);
        put32(t.data + kd + 44, 1u << 4); /* INST_PREF_SIZE: gfx11 only */
        load_fails(&t, -EINVAL,
                   "kernel vector_add: kernel descriptor sets bit 4 of COMPUTE_PGM_RSRC3, which is reserved on gfx10");
        free(t.data);

        t = blob_dup(&b);
        put32(t.data + kd + 52, rsrc2 | (1u << 31));
        load_fails(&t, -EINVAL,
                   "kernel vector_add: kernel descriptor sets bit 31 of COMPUTE_PGM_RSRC2, which is reserved on gfx10");
        free(t.data);

        t = blob_dup(&b); /* descriptor and metadata disagree */
        put32(t.data + kd + 8, 96);
        load_fails(&t, -EINVAL,
                   "kernel vector_add: kernarg size is 96 in the descriptor, 88 in the metadata");
        free(t.data);
        t = blob_dup(&b);
        put32(t.data + kd + 0, 512);
        load_fails(&t, -EINVAL, "group segment size is 512 in the descriptor, 0 in the metadata");
        free(t.data);
        t = blob_dup(&b);
        put32(t.data + kd + 4, 16);
        load_fails(&t, -EINVAL, "private segment size is 16 in the descriptor, 0 in the metadata");
        free(t.data);
        t = blob_dup(&b);
        t.data[kd + 57] &= (uint8_t) ~0x04; /* wave32 bit off */
        load_fails(&t, -EINVAL, "the descriptor is wave64, the metadata says wavefront size 32");
        free(t.data);
        free(b.data);
}

/* The RSRC bits only the CP, a debugger or a trap handler may set
 * (gpu-kernel-rsrc.c): each refused at load with its name and position, on
 * clang's vector_add descriptor with that one bit added. */
static const struct {
        unsigned offset, bit;   /* descriptor byte offset of the RSRC word: 48 RSRC1, 52 RSRC2, 44 RSRC3 */
        const char *msg;
} refused_bits[] = {
        { 48, 20, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC1.PRIV (bit 20), which clients may not" },
        { 48, 22, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC1.DEBUG_MODE (bit 22), which clients may not" },
        { 48, 24, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC1.BULKY (bit 24), which clients may not" },
        { 48, 25, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC1.CDBG_USER (bit 25), which clients may not" },
        { 48, 27, "kernel vector_add: kernel descriptor sets bit 27 of COMPUTE_PGM_RSRC1, which is reserved on gfx10" },
        { 48, 28, "kernel vector_add: kernel descriptor sets bit 28 of COMPUTE_PGM_RSRC1, which is reserved on gfx10" },
        { 52, 6, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6), which clients may not" },
        { 52, 13, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC2.EXCP_EN_MSB (address watch) (bit 13), "
                  "which clients may not" },
        { 52, 14, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC2.EXCP_EN_MSB (memory violation) (bit 14), "
                  "which clients may not" },
        { 52, 24, "kernel vector_add: kernel descriptor sets COMPUTE_PGM_RSRC2.EXCP_EN (IEEE invalid operation) (bit 24), "
                  "which needs a trap handler, and the daemon gives clients none" },
        { 52, 25, "COMPUTE_PGM_RSRC2.EXCP_EN (denormal source) (bit 25), which needs a trap handler" },
        { 52, 26, "COMPUTE_PGM_RSRC2.EXCP_EN (IEEE division by zero) (bit 26), which needs a trap handler" },
        { 52, 27, "COMPUTE_PGM_RSRC2.EXCP_EN (IEEE overflow) (bit 27), which needs a trap handler" },
        { 52, 28, "COMPUTE_PGM_RSRC2.EXCP_EN (IEEE underflow) (bit 28), which needs a trap handler" },
        { 52, 29, "COMPUTE_PGM_RSRC2.EXCP_EN (IEEE inexact) (bit 29), which needs a trap handler" },
        { 52, 30, "COMPUTE_PGM_RSRC2.EXCP_EN (integer division by zero) (bit 30), which needs a trap handler" },
        { 44, 10, "kernel vector_add: kernel descriptor sets bit 10 of COMPUTE_PGM_RSRC3, which is reserved on gfx10" },
        { 44, 31, "kernel vector_add: kernel descriptor sets bit 31 of COMPUTE_PGM_RSRC3, which is reserved on gfx10" },
};

Test(code_object, descriptor_bits_clients_may_not_set) {
        Blob b = read_blob("vector-add.hsaco");
        size_t kd = kd_offset(&b, "vector_add.kd");

        for (size_t i = 0; i < sizeof refused_bits / sizeof refused_bits[0]; i++) {
                Blob t = blob_dup(&b);
                uint32_t word = get32(b.data + kd + refused_bits[i].offset);
                cr_assert_eq(word >> refused_bits[i].bit & 1, 0u, "clang set bit %u", refused_bits[i].bit);
                put32(t.data + kd + refused_bits[i].offset, word | 1u << refused_bits[i].bit);
                load_fails(&t, -EINVAL, refused_bits[i].msg);
                free(t.data);
        }
        free(b.data);
}

/* gfx11 (no gfx11 device here: the check itself): TRAP_ON_START/END refused
 * by name, INST_PREF_SIZE and IMAGE_OP allowed; the lowest refused bit is
 * the one named. */
Test(code_object, descriptor_bits_gfx11) {
        char why[160];

        cr_assert_eq(gpu_kernel_rsrc_check(11, 0, 0, 0x3fu << 4 | 1u << 31, why, sizeof why), 0);
        cr_assert_eq(gpu_kernel_rsrc_check(11, 0, 0, 1u << 10, why, sizeof why), -EINVAL);
        cr_assert_str_eq(why, "kernel descriptor sets COMPUTE_PGM_RSRC3.TRAP_ON_START (bit 10), which clients may not");
        cr_assert_eq(gpu_kernel_rsrc_check(11, 0, 0, 1u << 11, why, sizeof why), -EINVAL);
        cr_assert_str_eq(why, "kernel descriptor sets COMPUTE_PGM_RSRC3.TRAP_ON_END (bit 11), which clients may not");
        cr_assert_eq(gpu_kernel_rsrc_check(11, 0, 0, 1u << 12, why, sizeof why), -EINVAL);
        cr_assert_str_eq(why, "kernel descriptor sets bit 12 of COMPUTE_PGM_RSRC3, which is reserved on gfx11");
        cr_assert_eq(gpu_kernel_rsrc_check(10, 1u << 25 | 1u << 20, 0, 0, why, sizeof why), -EINVAL);
        cr_assert_str_eq(why, "kernel descriptor sets COMPUTE_PGM_RSRC1.PRIV (bit 20), which clients may not");
        cr_assert_eq(gpu_kernel_rsrc_check(10, 0, 0, 0, NULL, 0), 0);
}

Test(code_object, wave64_kernels_load) {
        Blob b = read_blob("vector-add.hsaco");
        size_t kd = kd_offset(&b, "vector_add.kd");
        b.data[kd + 57] &= (uint8_t) ~0x04;
        size_t w = metadata_value(&b, ".wavefront_size", 0);
        cr_assert_eq(b.data[w], 32);
        b.data[w] = 64;
        GpuCodeObject *co = load_ok(&b);
        cr_expect_not(co->kernel_code[0].wave32);
        gpu_code_object_unref(co);
        free(b.data);
}

/* Static LDS beyond the device's: the simulated gfx1030 has 64 KiB, more than
 * the metadata of a real object can claim in place, so the context is told
 * it has 1 KiB. */
Test(code_object, lds_over_the_device) {
        Blob b = read_blob("matmul-tiled.hsaco");
        uint32_t saved = fx.ctx->info.lds_size_in_kb;
        fx.ctx->info.lds_size_in_kb = 1;
        load_fails(&b, -EINVAL, "kernel matmul_tiled needs 2048 bytes of LDS, the device has 1024");
        fx.ctx->info.lds_size_in_kb = 2;
        gpu_code_object_unref(load_ok(&b));
        fx.ctx->info.lds_size_in_kb = saved;
        free(b.data);
}

/* A kernel whose kernel arguments do not fit a compute queue's kernarg slot. */
Test(code_object, kernarg_over_the_slot) {
        Blob b = read_blob("big-args.hsaco");
        load_fails(&b, -EINVAL, ".kernarg_segment_size 4160 is over the limit of 4032");
        free(b.data);
}

Test(code_object, metadata_problems) {
        Blob b = read_blob("vector-add.hsaco"), t;
        Sec note;
        cr_assert(find_section(&b, ".note", &note));
        size_t md_size, md = metadata_offset(&b, &md_size);

        t = blob_dup(&b); /* note type 32 -> 33 */
        put32(t.data + md - 8 - 4, 33);
        cr_assert_eq(get32(b.data + md - 8 - 4), 32u);
        load_fails(&t, -ENOEXEC, "no NT_AMDGPU_METADATA note");
        free(t.data);

        t = blob_dup(&b);
        t.data[md] = 0xc1;
        load_fails(&t, -EINVAL, "metadata: the NT_AMDGPU_METADATA note is not a valid msgpack document");
        free(t.data);

        t = blob_dup(&b); /* the document's top map claims 2^32-1 entries */
        cr_assert_eq(t.data[md] & 0xf0, 0x80);
        /* overwrite from the start: map32 header, then the old bytes */
        memmove(t.data + md + 5, t.data + md + 1, md_size - 5);
        t.data[md] = 0xdf;
        put32(t.data + md + 1, 0xffffffff);
        load_fails(&t, -EINVAL, "not a valid msgpack document");
        free(t.data);

        t = blob_dup(&b);
        t.data[metadata_value(&t, ".kernarg_segment_size", 0)] = 0xc0;
        load_fails(
                &t, -EINVAL,
                "metadata: kernel 'vector_add.kd' .kernarg_segment_size is nil, expected an unsigned integer");
        free(t.data);

        t = blob_dup(&b);
        t.data[metadata_value(&t, ".offset", 1)] = 4; /* second arg at 4 overlaps the first */
        load_fails(
                &t, -EINVAL,
                "metadata: kernel 'vector_add.kd' argument 1 at offset 4 overlaps the argument before it");
        free(t.data);

        t = blob_dup(&b);
        size_t ks = metadata_value(&t, ".kernarg_segment_size", 0);
        cr_assert_eq(t.data[ks], 88);
        t.data[ks] = 80;
        load_fails(&t, -EINVAL,
                   "argument 10 (offset 80, size 8) ends past the kernarg segment of 80 bytes");
        free(t.data);

        t = blob_dup(&b); /* the first value_kind, rewritten in place (13 bytes) */
        size_t vk = metadata_value(&t, ".value_kind", 0);
        cr_assert_eq(t.data[vk], 0xad); /* fixstr 13 "global_buffer" */
        memcpy(t.data + vk + 1, "hidden_foobar", 13);
        {
                GpuCodeObject *co = load_ok(&t);
                const GpuKernelArg *a = &gpu_code_object_kernel(co, 0)->args[0];
                cr_expect_eq(a->kind, GPU_ARG_HIDDEN, "unknown hidden_* kinds are kept as hidden");
                cr_expect_str_eq(a->value_kind, "hidden_foobar");
                gpu_code_object_unref(co);
        }
        memcpy(t.data + vk + 1, "sampler______", 13);
        load_fails(&t, -EINVAL, "has unknown value_kind 'sampler______'");
        free(t.data);

        t = blob_dup(&b); /* the symbol the metadata names, renamed in the metadata */
        size_t sy = metadata_value(&t, ".symbol", 0);
        t.data[sy + 1] = 'W';
        load_fails(&t, -EINVAL, "kernel descriptor vector_add.kd has no metadata");
        free(t.data);

        t = blob_dup(&b); /* more metadata entries than descriptors */
        {
                Blob g = read_blob("globals.hsaco");
                size_t sym;
                uint64_t v;
                cr_assert(find_symbol(&g, ".dynsym", "scatter.kd", &v, &sym));
                g.data[sym + offsetof(Elf64_Sym, st_info)] = ELF64_ST_INFO(STB_GLOBAL, STT_NOTYPE);
                load_fails(
                        &g, -EINVAL,
                        "metadata describes kernel descriptor scatter.kd, which is not in the symbol table");
                free(g.data);
        }
        free(t.data);

        t = blob_dup(&b); /* amdhsa.target names another processor */
        size_t tg = metadata_value(&t, "amdhsa.target", 0);
        cr_assert_eq(t.data[tg], 0xba); /* fixstr 26 "amdgcn-amd-amdhsa--gfx1030" */
        memcpy(t.data + tg + 1 + 22, "1100", 4);
        load_fails(&t, -EINVAL,
                   "metadata amdhsa.target 'amdgcn-amd-amdhsa--gfx1100' does not name gfx1030");
        free(t.data);
        free(b.data);
}

Test(code_object, oversize) {
        Blob b = { .size = (size_t) GPU_CODE_OBJECT_MAX_SIZE + 1 };
        b.data = calloc(1, b.size);
        load_fails(&b, -E2BIG, "the code object is 67108865 bytes, the limit is 67108864");
        free(b.data);

        b = read_blob("vector-add.hsaco");
        Elf64_Ehdr eh;
        memcpy(&eh, b.data, sizeof eh);
        size_t ph3 = eh.e_phoff + 3 * sizeof(Elf64_Phdr); /* the RW PT_LOAD */
        cr_assert_eq(get32(b.data + ph3), PT_LOAD);
        put64(b.data + ph3 + offsetof(Elf64_Phdr, p_memsz), 128u << 20);
        load_fails(&b, -E2BIG, "segment 3 ends past 64 MiB, the limit for a code object's image");
        free(b.data);
}

Test(code_object, segment_rules) {
        Blob b = read_blob("vector-add.hsaco"), t;
        Elf64_Ehdr eh;
        memcpy(&eh, b.data, sizeof eh);
        size_t ph2 = eh.e_phoff + 2 * sizeof(Elf64_Phdr), ph3 = eh.e_phoff + 3 * sizeof(Elf64_Phdr);

        t = blob_dup(&b); /* the first PT_LOAD grows over the second */
        put64(t.data + eh.e_phoff + sizeof(Elf64_Phdr) + offsetof(Elf64_Phdr, p_memsz), 0x2000);
        load_fails(&t, -EINVAL,
                   "segment 2 at 0x1800 overlaps the segment before it or is out of address order");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + ph2 + offsetof(Elf64_Phdr, p_align), 0x10000);
        load_fails(&t, -EINVAL,
                   "segment 2 alignment 0x10000 is over the 0x1000 bytes the loader guarantees");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + ph2 + offsetof(Elf64_Phdr, p_align), 0x300);
        load_fails(&t, -EINVAL, "segment 2 alignment 0x300 is not a power of two");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + ph3 + offsetof(Elf64_Phdr, p_vaddr), 0x2988);
        load_fails(&t, -EINVAL,
                   "segment 3 address 0x2988 and file offset 0x980 differ modulo its alignment 0x1000");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + ph3 + offsetof(Elf64_Phdr, p_memsz), 0x10);
        load_fails(&t, -EINVAL, "segment 3 has 0x70 file bytes but only 0x10 bytes of memory");
        free(t.data);

        t = blob_dup(&b); /* the code segment loses PF_X */
        put32(t.data + ph2 + offsetof(Elf64_Phdr, p_flags), PF_R);
        load_fails(&t, -ENOEXEC, "no executable PT_LOAD segment");
        free(t.data);

        t = blob_dup(&b); /* every PT_LOAD becomes PT_NULL */
        for (unsigned i = 0; i < eh.e_phnum; i++)
                if (get32(t.data + eh.e_phoff + i * sizeof(Elf64_Phdr)) == PT_LOAD)
                        put32(t.data + eh.e_phoff + i * sizeof(Elf64_Phdr), PT_NULL);
        load_fails(&t, -ENOEXEC, "no PT_LOAD segment");
        free(t.data);
        free(b.data);
}

Test(code_object, relocation_problems) {
        Blob b = read_blob("globals.hsaco"), t;
        Sec rela;
        cr_assert(find_section(&b, ".rela.dyn", &rela));
        size_t r0 = rela.sh.sh_offset; /* first entry: R_AMDGPU_RELATIVE64 */
        cr_assert_eq(get64(b.data + r0 + 8) & 0xffffffff, 13u);

        t = blob_dup(&b);
        put64(t.data + r0 + 8, 10); /* R_AMDGPU_REL32_LO */
        load_fails(&t, -EINVAL, "relocation 0 in .rela.dyn has type 10, which the loader does not support");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + r0, 0x200000);
        load_fails(&t, -EINVAL,
                   "relocation 0 in .rela.dyn writes at 0x200000, outside the loaded segments");
        free(t.data);

        /* an ABS64 against a symbol made undefined */
        size_t abs = 0;
        for (size_t i = 0; i < rela.sh.sh_size / 24 && !abs; i++)
                if ((get64(b.data + r0 + i * 24 + 8) & 0xffffffff) == 3)
                        abs = r0 + i * 24;
        cr_assert_neq(abs, 0u);
        uint32_t symi = (uint32_t) (get64(b.data + abs + 8) >> 32);
        Sec dynsym;
        cr_assert(find_section(&b, ".dynsym", &dynsym));
        t = blob_dup(&b);
        uint16_t undef = SHN_UNDEF;
        memcpy(t.data + dynsym.sh.sh_offset + symi * sizeof(Elf64_Sym) + offsetof(Elf64_Sym, st_shndx),
               &undef, 2);
        load_fails(&t, -EINVAL, "is against undefined symbol 'exported_ptr'");
        free(t.data);

        t = blob_dup(&b);
        put64(t.data + abs + 8, (999ull << 32) | 3);
        load_fails(&t, -EINVAL, "refers to symbol 999, which does not exist");
        free(t.data);

        t = blob_dup(&b);
        put32(t.data + rela.shdr_off + offsetof(Elf64_Shdr, sh_type), SHT_REL);
        load_fails(&t, -EINVAL, "relocation section .rela.dyn is SHT_REL; only SHT_RELA is supported");
        free(t.data);
        free(b.data);
}

/* Random byte flips over real objects: each load either succeeds or fails
 * with a documented errno and a message; ASan/LSan watch the rest. */
Test(code_object, random_byte_flips) {
        const char *files[] = { "vector-add.hsaco", "globals.hsaco", "globals-v5.hsaco",
                                "private-array.hsaco" };
        unsigned seed = 0x5eed1234, loaded = 0, failed = 0;
        for (size_t f = 0; f < 4; f++) {
                Blob b = read_blob(files[f]);
                for (unsigned iter = 0; iter < 600; iter++) {
                        Blob t = blob_dup(&b);
                        unsigned flips = 1 + rand_r(&seed) % 8;
                        for (unsigned i = 0; i < flips; i++) {
                                size_t at = (size_t) rand_r(&seed) % t.size;
                                if (iter % 3 == 0) /* bias towards the headers */
                                        at %= 1024;
                                t.data[at] ^= (uint8_t) (1u << (rand_r(&seed) % 8));
                        }
                        GpuCodeObject *co = NULL;
                        errbuf[0] = '\0';
                        int r = gpu_code_object_load(fx.ctx, t.data, t.size, &co, errbuf, sizeof errbuf);
                        if (r == 0) {
                                cr_assert_not_null(co);
                                for (unsigned k = 0; k < gpu_code_object_n_kernels(co); k++)
                                        cr_assert_not_null(gpu_code_object_kernel(co, k));
                                gpu_code_object_unref(co);
                                loaded++;
                        } else {
                                cr_assert(r == -ENOEXEC || r == -EINVAL || r == -EXDEV || r == -E2BIG,
                                          "%s iter %u: errno %d (%s)", files[f], iter, r, errbuf);
                                cr_assert_null(co);
                                cr_assert_neq(errbuf[0], '\0', "%s iter %u: no message", files[f], iter);
                                failed++;
                        }
                        free(t.data);
                }
                free(b.data);
        }
        cr_expect_gt(failed, 100u);
        cr_log_info("random flips: %u loaded, %u refused", loaded, failed);
}

/* ---- the metadata decoder on documents built here ---- */

typedef struct Doc {
        msgpack_sbuffer sb;
        msgpack_packer pk;
} Doc;

static void doc_init(Doc *d) {
        msgpack_sbuffer_init(&d->sb);
        msgpack_packer_init(&d->pk, &d->sb, msgpack_sbuffer_write);
}

static void str(Doc *d, const char *s) {
        msgpack_pack_str(&d->pk, strlen(s));
        msgpack_pack_str_body(&d->pk, s, strlen(s));
}

static void kv_u(Doc *d, const char *k, uint64_t v) {
        str(d, k);
        msgpack_pack_uint64(&d->pk, v);
}

static void kv_s(Doc *d, const char *k, const char *v) {
        str(d, k);
        str(d, v);
}

/* A root map with n_kernels kernels "kN" of n_args by_value args of 4 bytes;
 * extra_arg, if given, is appended as one more argument map
 * {.offset, .size 8, .value_kind extra_arg}. */
static void build(Doc *d, unsigned n_kernels, unsigned n_args, const char *extra_arg) {
        doc_init(d);
        msgpack_pack_map(&d->pk, 3);
        str(d, "amdhsa.version");
        msgpack_pack_array(&d->pk, 2);
        msgpack_pack_uint32(&d->pk, 1);
        msgpack_pack_uint32(&d->pk, 1);
        kv_s(d, "amdhsa.target", "amdgcn-amd-amdhsa--gfx1030");
        str(d, "amdhsa.kernels");
        msgpack_pack_array(&d->pk, n_kernels);
        for (unsigned k = 0; k < n_kernels; k++) {
                char sym[32];
                unsigned total = n_args + (extra_arg ? 1 : 0);
                snprintf(sym, sizeof sym, "k%u.kd", k);
                msgpack_pack_map(&d->pk, 9);
                kv_s(d, ".name", sym);
                kv_s(d, ".symbol", sym);
                kv_u(d, ".kernarg_segment_size", ((4u * n_args + 7u) & ~7u) + 8u);
                kv_u(d, ".kernarg_segment_align", 8);
                kv_u(d, ".group_segment_fixed_size", 0);
                kv_u(d, ".private_segment_fixed_size", 0);
                kv_u(d, ".max_flat_workgroup_size", 256);
                kv_u(d, ".wavefront_size", 32);
                str(d, ".args");
                msgpack_pack_array(&d->pk, total);
                for (unsigned a = 0; a < total; a++) {
                        bool extra = a == n_args;
                        msgpack_pack_map(&d->pk, 3);
                        kv_u(d, ".offset", extra ? ((4u * n_args + 7u) & ~7u) : 4u * a);
                        kv_u(d, ".size", extra ? 8 : 4);
                        kv_s(d, ".value_kind", extra ? extra_arg : "by_value");
                }
        }
}

static int parse(const void *p, size_t n, GpuCodeObjectMetadata *m) {
        errbuf[0] = '\0';
        return gpu_code_object_metadata_parse(p, n, m, errbuf, sizeof errbuf);
}

Test(code_object, metadata_decoder) {
        Doc d;
        GpuCodeObjectMetadata m;

        build(&d, 2, 3, "global_buffer");
        cr_assert_eq(parse(d.sb.data, d.sb.size, &m), 0, "%s", errbuf);
        cr_expect_eq(m.n_kernels, 2u);
        cr_expect_str_eq(m.kernels[1].symbol, "k1.kd");
        cr_expect_eq(m.kernels[1].kernel.n_args, 4u);
        cr_expect_eq(m.kernels[1].kernel.args[3].kind, GPU_ARG_GLOBAL_BUFFER);
        cr_expect_str_eq(m.target, "amdgcn-amd-amdhsa--gfx1030");
        gpu_code_object_metadata_done(&m);
        msgpack_sbuffer_destroy(&d.sb);

        build(&d, GPU_CODE_OBJECT_MAX_KERNELS + 1, 0, NULL);
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -E2BIG);
        cr_expect_str_eq(errbuf, "metadata: 1025 kernels, the limit is 1024");
        msgpack_sbuffer_destroy(&d.sb);

        build(&d, GPU_CODE_OBJECT_MAX_KERNELS, 0, NULL);
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), 0, "%s", errbuf);
        gpu_code_object_metadata_done(&m);
        msgpack_sbuffer_destroy(&d.sb);

        build(&d, 1, GPU_KERNEL_MAX_ARGS + 1, NULL);
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -E2BIG);
        cr_expect_str_eq(errbuf, "metadata: kernel 'k0.kd' has 65 arguments, the limit is 64");
        msgpack_sbuffer_destroy(&d.sb);

        const char *refused[][2] = {
                { "image",
                  "kernel 'k0.kd' argument 1 is an image: images, samplers, pipes and device queues are not supported" },
                { "sampler", "is a sampler: images" },
                { "pipe", "is a pipe: images" },
                { "queue", "is a queue: images" },
                { "by_reference", "has unknown value_kind 'by_reference'" },
        };
        for (size_t i = 0; i < 5; i++) {
                build(&d, 1, 1, refused[i][0]);
                cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -EINVAL, "%s", refused[i][0]);
                cr_expect(strstr(errbuf, refused[i][1]), "'%s'", errbuf);
                msgpack_sbuffer_destroy(&d.sb);
        }

        build(&d, 1, 1, "hidden_whatever_comes_next");
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), 0, "%s", errbuf);
        cr_expect_eq(m.kernels[0].kernel.args[1].kind, GPU_ARG_HIDDEN);
        gpu_code_object_metadata_done(&m);
        msgpack_sbuffer_destroy(&d.sb);

        build(&d, 1, 1, "hidden_this_value_kind_is_far_too_long");
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -EINVAL);
        cr_expect(strstr(errbuf, ".value_kind is 38 bytes long, the limit is 31"), "'%s'", errbuf);
        msgpack_sbuffer_destroy(&d.sb);

        build(&d, 1, 1, "global_buffer");
        msgpack_pack_nil(&d.pk); /* trailing bytes */
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -EINVAL);
        cr_expect_str_eq(errbuf, "metadata: 1 bytes after the msgpack document");
        cr_expect_eq(parse(d.sb.data, d.sb.size - 2, &m), -EINVAL, "truncated");
        cr_expect(strstr(errbuf, "not a valid msgpack document"));
        msgpack_sbuffer_destroy(&d.sb);
}

/* Keys the loader does not use may hold any msgpack type: the pre-scan
 * (msgpack_measure) must size every format exactly as msgpack-c does. */
Test(code_object, metadata_decoder_every_format) {
        Doc d;
        GpuCodeObjectMetadata m;
        char big[70000];
        memset(big, 'x', sizeof big);

        doc_init(&d);
        msgpack_pack_map(&d.pk, 3);
        str(&d, "amdhsa.version");
        msgpack_pack_array(&d.pk, 2);
        msgpack_pack_uint32(&d.pk, 1);
        msgpack_pack_uint32(&d.pk, 2);
        str(&d, "amdhsa.misc");
        msgpack_pack_array(&d.pk, 27);
        msgpack_pack_nil(&d.pk);
        msgpack_pack_true(&d.pk);
        msgpack_pack_false(&d.pk);
        msgpack_pack_int8(&d.pk, -100);
        msgpack_pack_int16(&d.pk, -30000);
        msgpack_pack_int32(&d.pk, -2000000000);
        msgpack_pack_int64(&d.pk, -9000000000000000000ll);
        msgpack_pack_uint8(&d.pk, 200);
        msgpack_pack_uint16(&d.pk, 60000);
        msgpack_pack_uint32(&d.pk, 4000000000u);
        msgpack_pack_uint64(&d.pk, 18000000000000000000ull);
        msgpack_pack_float(&d.pk, 1.5f);
        msgpack_pack_double(&d.pk, 2.5);
        msgpack_pack_str(&d.pk, 40); /* str 8 */
        msgpack_pack_str_body(&d.pk, big, 40);
        msgpack_pack_str(&d.pk, 300); /* str 16 */
        msgpack_pack_str_body(&d.pk, big, 300);
        msgpack_pack_str(&d.pk, sizeof big); /* str 32 */
        msgpack_pack_str_body(&d.pk, big, sizeof big);
        msgpack_pack_bin(&d.pk, 3);
        msgpack_pack_bin_body(&d.pk, big, 3);
        msgpack_pack_bin(&d.pk, 300);
        msgpack_pack_bin_body(&d.pk, big, 300);
        size_t ext_sizes[] = { 1, 2, 4, 8, 16, 5, 300 }; /* fixext 1..16, ext 8, ext 16 */
        for (size_t i = 0; i < 7; i++) {
                msgpack_pack_ext(&d.pk, ext_sizes[i], 7);
                msgpack_pack_ext_body(&d.pk, big, ext_sizes[i]);
        }
        msgpack_pack_map(&d.pk, 16); /* map 16 */
        for (unsigned i = 0; i < 16; i++) {
                msgpack_pack_uint32(&d.pk, i);
                msgpack_pack_nil(&d.pk);
        }
        msgpack_pack_array(&d.pk, 20); /* array 16 */
        for (unsigned i = 0; i < 20; i++)
                msgpack_pack_int32(&d.pk, -1);
        str(&d, "amdhsa.kernels");
        msgpack_pack_array(&d.pk, 0);
        cr_assert_eq(parse(d.sb.data, d.sb.size, &m), 0, "%s", errbuf);
        cr_expect_eq(m.n_kernels, 0u);
        cr_expect_eq(m.version[1], 2u);
        gpu_code_object_metadata_done(&m);
        msgpack_sbuffer_destroy(&d.sb);
}

Test(code_object, metadata_decoder_hostile_documents) {
        GpuCodeObjectMetadata m;

        /* containers claiming more elements than there are bytes */
        const uint8_t huge_map[] = { 0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0 };
        cr_expect_eq(parse(huge_map, sizeof huge_map, &m), -EINVAL);
        const uint8_t huge_array[] = { 0x81, 0xa1, 'a', 0xdd, 0x10, 0x00, 0x00, 0x00, 0xc0, 0xc0 };
        cr_expect_eq(parse(huge_array, sizeof huge_array, &m), -EINVAL);
        const uint8_t huge_str[] = { 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x' };
        cr_expect_eq(parse(huge_str, sizeof huge_str, &m), -EINVAL);
        const uint8_t never_used[] = { 0xc1 };
        cr_expect_eq(parse(never_used, 1, &m), -EINVAL);
        cr_expect_eq(parse("", 0, &m), -EINVAL);

        /* nested deeper than msgpack-c's stack */
        uint8_t deep[64];
        memset(deep, 0x91, sizeof deep);
        deep[63] = 0xc0;
        cr_expect_eq(parse(deep, sizeof deep, &m), -EINVAL);
        cr_expect_str_eq(errbuf, "metadata: the msgpack document is nested too deeply");

        /* many small elements: over the element budget */
        size_t n = (2u << 20) + 16;
        uint8_t *many = malloc(n + 5);
        many[0] = 0xdd;
        many[1] = (uint8_t) (n >> 24);
        many[2] = (uint8_t) (n >> 16);
        many[3] = (uint8_t) (n >> 8);
        many[4] = (uint8_t) n;
        memset(many + 5, 0xc0, n);
        cr_expect_eq(parse(many, n + 5, &m), -EINVAL);
        free(many);

        Doc d;
        doc_init(&d);
        msgpack_pack_map(&d.pk, 2);
        str(&d, "amdhsa.version");
        msgpack_pack_array(&d.pk, 2);
        msgpack_pack_uint32(&d.pk, 1);
        msgpack_pack_uint32(&d.pk, 0);
        str(&d, "amdhsa.version");
        msgpack_pack_nil(&d.pk);
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -EINVAL);
        cr_expect_str_eq(errbuf, "metadata: the document has key amdhsa.version twice");
        msgpack_sbuffer_destroy(&d.sb);

        doc_init(&d);
        msgpack_pack_map(&d.pk, 2);
        str(&d, "amdhsa.version");
        msgpack_pack_array(&d.pk, 2);
        msgpack_pack_uint32(&d.pk, 2);
        msgpack_pack_uint32(&d.pk, 0);
        kv_u(&d, "amdhsa.kernels", 0);
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -EINVAL);
        cr_expect_str_eq(errbuf, "metadata: amdhsa.version 2.0 is not 1.x");
        msgpack_sbuffer_destroy(&d.sb);

        doc_init(&d);
        msgpack_pack_array(&d.pk, 0);
        cr_expect_eq(parse(d.sb.data, d.sb.size, &m), -EINVAL);
        cr_expect_str_eq(errbuf, "metadata: the document is an array, expected a map");
        msgpack_sbuffer_destroy(&d.sb);
}
