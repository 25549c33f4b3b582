/* SPDX-License-Identifier: MIT */
/*
 * GpuCodeObject: an AMDHSA code object (the ELF shared object clang/lld make
 * for -target amdgcn-amd-amdhsa) loaded into an executable buffer of one
 * GpuContext, with its kernels' public description (GpuKernel, from the
 * metadata note) and what a dispatch needs (GpuKernelCode, from the kernel
 * descriptors). Reference counted: the session that loaded it holds one
 * reference and every dispatch in flight another. The code buffer is an
 * ordinary (non-internal) buffer of the context, so it shows in the context's
 * buffer stats and gpu_code_object_get_size() tells what to charge for it.
 * If the context is freed first, the object is detached (ctx = NULL, its
 * buffer released by the context) and its last unref frees what is left.
 *
 * The input is hostile (a client's bytes). The rules, each refusal with a
 * message naming what was wrong:
 *
 * ELF header (-ENOEXEC unless noted): ELF64, little endian, EV_CURRENT,
 * EM_AMDGPU (224), OS ABI ELFOSABI_AMDGPU_HSA (64) with ABI version 2 (code
 * object v4, clang-15's default) or 3 (v5, -mcode-object-version=5); v2/v3
 * (older ABI, different e_flags and metadata) and v6 (generic targets) are
 * refused. ET_DYN only (an ET_REL must be linked with ld.lld -shared first;
 * ET_EXEC is not what the toolchain makes). Header sizes as in ELF64; no
 * extended section/segment numbering. e_flags: EF_AMDGPU_MACH must be the
 * device's target (-EXDEV "built for gfx1100, this device is gfx1030"); the
 * gfx10 and gfx11 targets are known (table below); the v4 XNACK field must be
 * "unsupported" on targets without XNACK and "any" or "off" on those with it
 * (KFD runs gfx10.1 with XNACK off: "on" is -EXDEV); SRAMECC must be
 * "unsupported" (no gfx10/11 part has it); no other bits (-EINVAL).
 * Constants: LLVM llvm/include/llvm/BinaryFormat/ELF.h, AMDGPUUsage "ELF
 * Header" and "Processors"; XNACK support per target as in ROCR-Runtime
 * amd_hsa_code.cpp GetMachInfo.
 *
 * Layout: the whole file is checked before anything is allocated. Program
 * and section header tables, every PT_LOAD's file bytes and every section's
 * bytes (but SHT_NOBITS) must lie inside the file — else -ENOEXEC "... extends
 * past the end of the file", which is what a truncated file gives at any cut.
 * PT_LOAD segments (-EINVAL): p_filesz <= p_memsz; p_align 0, 1 or a power of
 * two up to 4096 (the buffer is page aligned, no more) with p_vaddr congruent
 * to p_offset; ascending p_vaddr, no two overlapping; the image, from 0 to the
 * highest p_vaddr + p_memsz, at most GPU_CODE_OBJECT_MAX_SIZE (-E2BIG, as is a
 * larger file); at least one PT_LOAD and one executable PT_LOAD (-ENOEXEC).
 * Other program headers are not loaded and not looked at.
 *
 * Loading: one buffer of the image's size, GTT, executable
 * (gpu_buffer_new(..., GPU_PLACEMENT_GTT, true)); zeroed, then each PT_LOAD's
 * file bytes copied to buffer VA + p_vaddr (so p_memsz beyond p_filesz stays
 * zero). Dynamic relocations: every SHF_ALLOC SHT_RELA section (.rela.dyn).
 * R_AMDGPU_RELATIVE64 = B + A; R_AMDGPU_ABS64 = S + A against a defined symbol
 * of the section's linked symbol table (lld emits it for default-visibility
 * globals; see tests/kernels/globals.cl), R_AMDGPU_NONE skipped; any other
 * type, a relocation against an undefined symbol or one that writes outside
 * the loaded segments is -EINVAL naming it; SHT_REL and SHT_RELR sections are
 * refused. Non-SHF_ALLOC relocation sections (static link leftovers) are
 * ignored.
 *
 * Kernels: every STT_OBJECT symbol of .dynsym (or .symtab if there is no
 * .dynsym) named "<kernel>.kd" is a kernel descriptor; none at all is
 * -ENOEXEC. Each (-EINVAL): defined, 64 bytes, 64-byte aligned, inside the
 * file bytes of a PT_LOAD; kernel name 1..127 bytes of printable ASCII; no
 * duplicates; at most GPU_CODE_OBJECT_MAX_KERNELS (-E2BIG). The descriptor
 * (AMDHSAKernelDescriptor.h, AMDGPUUsage "Kernel Descriptor", kfd-facts §2.4)
 * is read from the loaded image: reserved bytes zero; kernarg_preload zero
 * (only gfx90a/gfx94x preload); reserved bits of kernel_code_properties
 * zero; no bit of COMPUTE_PGM_RSRC1/2/3 that is reserved for the target's
 * generation or that only the CP, a debugger or a trap handler may set
 * (gpu_kernel_rsrc_check(), gpu-kernel-rsrc.c: PRIV, DEBUG_MODE, BULKY,
 * CDBG_USER, TRAP_PRESENT, the exception enables, gfx11's TRAP_ON_START/END);
 * RSRC2.USER_SGPR_COUNT equal to the user SGPRs that
 * kernel_code_properties enables (private segment buffer 4, dispatch ptr 2,
 * queue ptr 2, kernarg segment ptr 2, dispatch id 2, flat scratch init 2,
 * private segment size 1); the entry point (descriptor address +
 * kernel_code_entry_byte_offset) inside the file bytes of an executable
 * PT_LOAD and 256-byte aligned (COMPUTE_PGM_LO takes address >> 8); static
 * LDS within the device's LDS. Wave64 kernels load (GpuKernelCode.wave32 is
 * false); whether they can be dispatched is the dispatcher's decision.
 *
 * Metadata (gpu-code-object-metadata.c has its own rules): exactly one
 * NT_AMDGPU_METADATA note (owner "AMDGPU", type 32) in a SHT_NOTE section,
 * none is -ENOEXEC; every kernel descriptor has one metadata entry whose
 * .symbol names it and vice versa; amdhsa.target, when present, names the
 * ELF header's target. The descriptor is what the hardware is programmed
 * from, so where it and the metadata both give a value they must agree
 * (-EINVAL otherwise, rather than silently preferring one): kernarg size,
 * group and private segment sizes, wavefront size.
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu-code-object-internal.h"
#include "util/macro.h"

/* The kernel descriptor (AMDHSAKernelDescriptor.h kernel_descriptor_t). */
#define KD_GROUP_SEGMENT_FIXED_SIZE 0
#define KD_PRIVATE_SEGMENT_FIXED_SIZE 4
#define KD_KERNARG_SIZE 8
#define KD_RESERVED0 12 /* 4 bytes */
#define KD_KERNEL_CODE_ENTRY_BYTE_OFFSET 16
#define KD_RESERVED1 24 /* 20 bytes */
#define KD_COMPUTE_PGM_RSRC3 44
#define KD_COMPUTE_PGM_RSRC1 48
#define KD_COMPUTE_PGM_RSRC2 52
#define KD_KERNEL_CODE_PROPERTIES 56
#define KD_KERNARG_PRELOAD 58
#define KD_RESERVED3 60 /* 4 bytes */

#define RSRC2_USER_SGPR_COUNT(v) (((v) >> 1) & 0x1fu)
#define KCP_PRIVATE_SEGMENT_BUFFER (1u << 0)
#define KCP_DISPATCH_PTR (1u << 1)
#define KCP_QUEUE_PTR (1u << 2)
#define KCP_KERNARG_SEGMENT_PTR (1u << 3)
#define KCP_DISPATCH_ID (1u << 4)
#define KCP_FLAT_SCRATCH_INIT (1u << 5)
#define KCP_PRIVATE_SEGMENT_SIZE (1u << 6)
#define KCP_WAVEFRONT_SIZE32 (1u << 10)
#define KCP_RESERVED ((0x7u << 7) | (0xfu << 12))

int gpu_code_object_error(char *err, size_t errlen, int r, const char *fmt, ...) {
        if (err && errlen > 0) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return r;
}

const char *gpu_code_object_escape(const char *s, size_t n, char buf[static 280]) {
        size_t o = 0;
        if (n == SIZE_MAX)
                n = strlen(s);
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char) s[i];
                if (i == 64) {
                        memcpy(buf + o, "...", 3);
                        o += 3;
                        break;
                }
                if (ch >= 0x20 && ch < 0x7f && ch != '\\')
                        buf[o++] = (char) ch;
                else
                        o += (size_t) snprintf(buf + o, 5, "\\x%02x", ch);
        }
        buf[o] = '\0';
        return buf;
}

static uint32_t rd32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        return le32toh(v);
}

static uint16_t rd16(const uint8_t *p) {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return le16toh(v);
}

static bool all_zero(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

/* ---- kernel descriptors ---- */

unsigned gpu_kernel_user_sgprs(uint16_t kcp) {
        return (kcp & KCP_PRIVATE_SEGMENT_BUFFER ? 4 : 0) + (kcp & KCP_DISPATCH_PTR ? 2 : 0) +
               (kcp & KCP_QUEUE_PTR ? 2 : 0) + (kcp & KCP_KERNARG_SEGMENT_PTR ? 2 : 0) +
               (kcp & KCP_DISPATCH_ID ? 2 : 0) + (kcp & KCP_FLAT_SCRATCH_INIT ? 2 : 0) +
               (kcp & KCP_PRIVATE_SEGMENT_SIZE ? 1 : 0);
}

static int read_descriptor(Loader *l, const KdSym *kd, const GpuKernelMetadata *km, GpuKernel *k,
                           GpuKernelCode *kc) {
        const uint8_t *d = l->image + kd->vaddr;
        const char *t = l->target->name;
        char name[280];

        *k = km->kernel;
        memcpy(k->name, kd->name, strlen(kd->name) - 3);
        k->name[strlen(kd->name) - 3] = '\0';
        gpu_code_object_escape(k->name, SIZE_MAX, name);

        if (!all_zero(d + KD_RESERVED0, 4) || !all_zero(d + KD_RESERVED1, 20) ||
            !all_zero(d + KD_RESERVED3, 4))
                return FAIL(l, -EINVAL, "kernel %s: reserved bytes of the kernel descriptor are not zero",
                            name);
        if (rd16(d + KD_KERNARG_PRELOAD) != 0)
                return FAIL(l, -EINVAL,
                            "kernel %s: the descriptor asks for kernarg preload, which %s does not have",
                            name, t);

        uint32_t group = rd32(d + KD_GROUP_SEGMENT_FIXED_SIZE);
        uint32_t priv = rd32(d + KD_PRIVATE_SEGMENT_FIXED_SIZE);
        uint32_t kernarg = rd32(d + KD_KERNARG_SIZE);
        int64_t entry_off;
        memcpy(&entry_off, d + KD_KERNEL_CODE_ENTRY_BYTE_OFFSET, sizeof entry_off);
        entry_off = (int64_t) le64toh((uint64_t) entry_off);
        uint32_t rsrc3 = rd32(d + KD_COMPUTE_PGM_RSRC3);
        uint32_t rsrc1 = rd32(d + KD_COMPUTE_PGM_RSRC1);
        uint32_t rsrc2 = rd32(d + KD_COMPUTE_PGM_RSRC2);
        uint16_t kcp = rd16(d + KD_KERNEL_CODE_PROPERTIES);

        if (kcp & KCP_RESERVED)
                return FAIL(l, -EINVAL, "kernel %s: kernel_code_properties 0x%x sets reserved bits", name,
                            kcp);
        char why[160];
        if (gpu_kernel_rsrc_check(l->target->gfx, rsrc1, rsrc2, rsrc3, why, sizeof why) < 0)
                return FAIL(l, -EINVAL, "kernel %s: %s", name, why);
        /* "must be greater than or equal to the number of user data registers
         * enabled" (LLVM AMDGPUUsage, compute_pgm_rsrc2, since D117936): clang
         * 15 builds gfx11 kernels with 15 (their system SGPRs from s15) for two
         * enabled; the CP then loads USER_DATA registers nobody reads. */
        unsigned want = gpu_kernel_user_sgprs(kcp);
        if (RSRC2_USER_SGPR_COUNT(rsrc2) < want)
                return FAIL(l, -EINVAL,
                            "kernel %s: COMPUTE_PGM_RSRC2.USER_SGPR_COUNT is %u but kernel_code_properties "
                            "0x%x enables %u user SGPRs",
                            name, RSRC2_USER_SGPR_COUNT(rsrc2), kcp, want);

        /* kd->vaddr is below GPU_CODE_OBJECT_MAX_SIZE (check_kd_symbol). */
        int64_t entry_s;
        const Segment *es = NULL;
        if (!__builtin_add_overflow((int64_t) kd->vaddr, entry_off, &entry_s) && entry_s >= 0)
                es = gpu_code_object_segment_of(l, (uint64_t) entry_s, 1, false);
        if (!es || !es->exec)
                return FAIL(l, -EINVAL,
                            "kernel %s: the entry point (descriptor at 0x%" PRIx64 " %+" PRId64
                            ") is outside the executable segment",
                            name, kd->vaddr, entry_off);
        uint64_t entry = (uint64_t) entry_s;
        if (entry % 256 != 0)
                return FAIL(l, -EINVAL,
                            "kernel %s: the entry point 0x%" PRIx64 " is not 256-byte aligned "
                            "(COMPUTE_PGM_LO holds address >> 8)",
                            name, entry);

        if (kernarg != k->kernarg_size)
                return FAIL(l, -EINVAL,
                            "kernel %s: kernarg size is %u in the descriptor, %u in the metadata", name,
                            kernarg, k->kernarg_size);
        if (group != k->group_segment_size)
                return FAIL(l, -EINVAL,
                            "kernel %s: group segment size is %u in the descriptor, %u in the metadata",
                            name, group, k->group_segment_size);
        if (priv != k->private_segment_size)
                return FAIL(l, -EINVAL,
                            "kernel %s: private segment size is %u in the descriptor, %u in the metadata",
                            name, priv, k->private_segment_size);
        bool wave32 = kcp & KCP_WAVEFRONT_SIZE32;
        if ((wave32 ? 32u : 64u) != km->wavefront_size)
                return FAIL(l, -EINVAL,
                            "kernel %s: the descriptor is wave%u, the metadata says wavefront size %u",
                            name, wave32 ? 32 : 64, km->wavefront_size);
        uint32_t lds = l->info->lds_size_in_kb * 1024u;
        if (lds > 0 && group > lds)
                return FAIL(l, -EINVAL, "kernel %s needs %u bytes of LDS, the device has %u", name, group,
                            lds);

        *kc = (GpuKernelCode) {
                .kd_va = l->base + kd->vaddr,
                .entry_va = l->base + entry,
                .rsrc1 = rsrc1,
                .rsrc2 = rsrc2,
                .rsrc3 = rsrc3,
                .code_properties = kcp,
                .wave32 = wave32,
        };
        return 0;
}

/* ---- the object ---- */

static void code_object_unlink_ctx(GpuCodeObject *co) {
        if (!co->ctx)
                return;
        if (co->prev)
                co->prev->next = co->next;
        else
                co->ctx->code_objects = co->next;
        if (co->next)
                co->next->prev = co->prev;
        co->prev = co->next = NULL;
        co->ctx = NULL;
}

static void code_object_unlink_origin(GpuCodeObject *co) {
        if (!co->origin)
                return;
        for (GpuCodeObject **x = &co->origin->loads; *x; x = &(*x)->load_next)
                if (*x == co) {
                        *x = co->load_next;
                        break;
                }
        co->origin = NULL;
        co->load_next = NULL;
}

/* Frees the object and what was loaded from it into other contexts. */
static void code_object_free(GpuCodeObject *co) {
        if (!co)
                return;
        gpu_watches_fire(&co->watches);
        while (co->loads)
                code_object_free(co->loads); /* unlinks itself */
        code_object_unlink_origin(co);
        code_object_unlink_ctx(co);
        gpu_buffer_unref(co->code);
        free(co->file);
        free(co->kernels);
        free(co->kernel_code);
        free(co);
}
DEFINE_POINTER_CLEANUP(GpuCodeObject, code_object_free);

void gpu_code_objects_release_all(GpuContext *c) {
        while (c->code_objects) {
                GpuCodeObject *co = c->code_objects;
                if (co->origin)
                        code_object_free(co); /* a copy of another object: ours alone */
                else
                        code_object_unlink_ctx(co);
        }
}

static int load(GpuContext *c, const GpuDeviceInfo *info, const void *elf, size_t size, GpuCodeObject **ret,
                char *err, size_t errlen) {
        _cleanup_(gpu_code_object_loader_done)
                Loader l = { .ctx = c, .info = info, .err = err, .errlen = errlen, .size = size };
        int r;

        if (err && errlen > 0)
                err[0] = '\0';
        if (!info || !ret || (!elf && size > 0))
                return gpu_code_object_error(err, errlen, -EINVAL, "invalid arguments");
        if (size > GPU_CODE_OBJECT_MAX_SIZE)
                return FAIL(&l, -E2BIG, "the code object is %zu bytes, the limit is %u", size,
                            GPU_CODE_OBJECT_MAX_SIZE);

        /* Our own copy: libelf's elf_memory() wants writable memory, and
         * malloc's alignment lets libelf use the headers in place. */
        l.file = malloc(size > 0 ? size : 1);
        if (!l.file)
                return FAIL(&l, -ENOMEM, "out of memory");
        if (size > 0)
                memcpy(l.file, elf, size);

        if ((r = gpu_code_object_elf_check(&l)) < 0 || (r = gpu_code_object_elf_load(&l)) < 0)
                return r;

        _cleanup_(code_object_freep) GpuCodeObject *co = calloc(1, sizeof *co);
        if (!co)
                return FAIL(&l, -ENOMEM, "out of memory");
        co->n_ref = 1;
        co->kernels = calloc(l.md.n_kernels, sizeof *co->kernels);
        co->kernel_code = calloc(l.md.n_kernels, sizeof *co->kernel_code);
        if (!co->kernels || !co->kernel_code)
                return FAIL(&l, -ENOMEM, "out of memory");
        for (unsigned i = 0; i < l.md.n_kernels; i++) {
                const GpuKernelMetadata *km = &l.md.kernels[i];
                const KdSym *kd = NULL;
                for (unsigned j = 0; j < l.n_kds && !kd; j++)
                        if (streq(l.kds[j].name, km->symbol))
                                kd = &l.kds[j];
                assert(kd); /* parse_metadata() matched them */
                r = read_descriptor(&l, kd, km, &co->kernels[i], &co->kernel_code[i]);
                if (r < 0)
                        return r;
        }
        co->n_kernels = l.md.n_kernels;
        co->image_size = align_up_u64(l.image_size, PAGE_SIZE_4K);
        if (c) {
                co->code = TAKE_PTR(l.code);
                co->ctx = c;
                co->next = c->code_objects;
                if (c->code_objects)
                        c->code_objects->prev = co;
                c->code_objects = co;
        } else {
                /* Parsed only: keep the file to load it where it is dispatched. */
                co->file = TAKE_PTR(l.file);
                co->file_size = size;
        }
        *ret = TAKE_PTR(co);
        return 0;
}

int gpu_code_object_load(GpuContext *c, const void *elf, size_t size, GpuCodeObject **ret, char *err,
                         size_t errlen) {
        if (!c)
                return gpu_code_object_error(err, errlen, -EINVAL, "invalid arguments");
        return load(c, gpu_context_get_info(c), elf, size, ret, err, errlen);
}

int gpu_code_object_parse(const GpuDeviceInfo *dev, const void *elf, size_t size, GpuCodeObject **ret,
                          char *err, size_t errlen) {
        return load(NULL, dev, elf, size, ret, err, errlen);
}

int gpu_code_object_load_in(GpuCodeObject *co, GpuContext *c, GpuCodeObject **ret, char *err, size_t errlen) {
        GpuCodeObject *copy;
        int r;

        if (!co || !c || !ret)
                return gpu_code_object_error(err, errlen, -EINVAL, "invalid arguments");
        if (co->ctx == c) {
                *ret = co;
                return 0;
        }
        for (copy = co->loads; copy; copy = copy->load_next)
                if (copy->ctx == c) {
                        *ret = copy;
                        return 0;
                }
        if (!co->file)
                return gpu_code_object_error(err, errlen, -EINVAL,
                                             "the code object was loaded into another context, not parsed");
        r = gpu_code_object_load(c, co->file, co->file_size, &copy, err, errlen);
        if (r < 0)
                return r;
        copy->origin = co;
        copy->load_next = co->loads;
        co->loads = copy;
        *ret = copy;
        return 0;
}

GpuCodeObject *gpu_code_object_ref(GpuCodeObject *co) {
        if (co)
                co->n_ref++;
        return co;
}

GpuCodeObject *gpu_code_object_unref(GpuCodeObject *co) {
        if (co && --co->n_ref == 0)
                code_object_free(co);
        return NULL;
}

unsigned gpu_code_object_n_kernels(const GpuCodeObject *co) {
        return co ? co->n_kernels : 0;
}

const GpuKernel *gpu_code_object_kernel(const GpuCodeObject *co, unsigned index) {
        if (!co || index >= co->n_kernels)
                return NULL;
        return &co->kernels[index];
}

int gpu_code_object_find(const GpuCodeObject *co, const char *name) {
        if (!co || !name)
                return -ENOENT;
        for (unsigned i = 0; i < co->n_kernels; i++)
                if (streq(co->kernels[i].name, name))
                        return (int) i;
        return -ENOENT;
}

void gpu_code_object_watch(GpuCodeObject *co, GpuWatch *w) {
        gpu_watch_add(&co->watches, w);
}

const void *gpu_code_object_get_file(const GpuCodeObject *co, size_t *ret_size) {
        if (!co || !co->file)
                return NULL;
        *ret_size = co->file_size;
        return co->file;
}

uint64_t gpu_code_object_get_size(const GpuCodeObject *co) {
        if (!co)
                return 0;
        return co->code ? gpu_buffer_get_size(co->code) : co->image_size;
}
