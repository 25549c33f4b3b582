/* SPDX-License-Identifier: MIT */
/*
 * The ELF half of the code object loader (see gpu-code-object.c for the
 * rules it implements): the ELF header and the device target, the section
 * and program header tables, the PT_LOAD segments, the kernel descriptor
 * symbols, the metadata note and its match with the symbols, and then the
 * image: the code buffer, the segments copied into it, the relocations.
 * libelf (elfutils) reads the tables; every offset and size it does not check
 * against the file is checked here first.
 */
#include <endian.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu-code-object-internal.h"
#include "util/macro.h"

/* LLVM llvm/include/llvm/BinaryFormat/ELF.h (glibc's elf.h has EM_AMDGPU only). */
#define ELFOSABI_AMDGPU_HSA 64
#define ELFABIVERSION_AMDGPU_HSA_V3 1
#define ELFABIVERSION_AMDGPU_HSA_V4 2
#define ELFABIVERSION_AMDGPU_HSA_V5 3
#define ELFABIVERSION_AMDGPU_HSA_V6 4
#define EF_AMDGPU_MACH 0x0ffu
#define EF_AMDGPU_FEATURE_XNACK_V4 0x300u
#define EF_AMDGPU_FEATURE_XNACK_UNSUPPORTED_V4 0x000u
#define EF_AMDGPU_FEATURE_XNACK_ANY_V4 0x100u
#define EF_AMDGPU_FEATURE_XNACK_OFF_V4 0x200u
#define EF_AMDGPU_FEATURE_XNACK_ON_V4 0x300u
#define EF_AMDGPU_FEATURE_SRAMECC_V4 0xc00u
#define NT_AMDGPU_METADATA 32
/* llvm/include/llvm/BinaryFormat/ELFRelocs/AMDGPU.def */
#define R_AMDGPU_NONE 0
#define R_AMDGPU_ABS64 3
#define R_AMDGPU_RELATIVE64 13
#define SHT_RELR_ 19 /* not in every elf.h */

#define CODE_OBJECT_MAX_ALIGN 4096u

/* The gfx10 and gfx11 targets (LLVM ELF.h EF_AMDGPU_MACH_AMDGCN_*, KFD
 * gfx_target_version; XNACK per ROCR-Runtime amd_hsa_code.cpp GetMachInfo). */
static const GfxTarget gfx_targets[] = {
        { 100100, 0x033, 10, true, "gfx1010" },  { 100101, 0x034, 10, true, "gfx1011" },
        { 100102, 0x035, 10, true, "gfx1012" },  { 100103, 0x042, 10, true, "gfx1013" },
        { 100300, 0x036, 10, false, "gfx1030" }, { 100301, 0x037, 10, false, "gfx1031" },
        { 100302, 0x038, 10, false, "gfx1032" }, { 100303, 0x039, 10, false, "gfx1033" },
        { 100304, 0x03e, 10, false, "gfx1034" }, { 100305, 0x03d, 10, false, "gfx1035" },
        { 100306, 0x045, 10, false, "gfx1036" }, { 110000, 0x041, 11, false, "gfx1100" },
        { 110001, 0x046, 11, false, "gfx1101" }, { 110002, 0x047, 11, false, "gfx1102" },
        { 110003, 0x044, 11, false, "gfx1103" }, { 110500, 0x043, 11, false, "gfx1150" },
        { 110501, 0x04a, 11, false, "gfx1151" }, { 110502, 0x055, 11, false, "gfx1152" },
};

static const GfxTarget *target_by_version(uint32_t v) {
        for (size_t i = 0; i < ELEMENTSOF(gfx_targets); i++)
                if (gfx_targets[i].version == v)
                        return &gfx_targets[i];
        return NULL;
}

static const GfxTarget *target_by_mach(uint32_t mach) {
        for (size_t i = 0; i < ELEMENTSOF(gfx_targets); i++)
                if (gfx_targets[i].mach == mach)
                        return &gfx_targets[i];
        return NULL;
}

void gpu_code_object_loader_done(Loader *l) {
        gpu_code_object_metadata_done(&l->md);
        free(l->kds);
        free(l->loads);
        if (l->elf)
                elf_end(l->elf);
        free(l->file);
        free(l->heap_image);
        gpu_buffer_unref(l->code);
}

static const char *section_name(Loader *l, const GElf_Shdr *sh, size_t index, char buf[static 280]) {
        const char *n = elf_strptr(l->elf, l->shstrndx, sh->sh_name);
        if (!n || !*n) {
                snprintf(buf, 280, "[%zu]", index);
                return buf;
        }
        return gpu_code_object_escape(n, SIZE_MAX, buf);
}

const Segment *gpu_code_object_segment_of(const Loader *l, uint64_t vaddr, uint64_t len, bool whole_mem) {
        for (size_t i = 0; i < l->n_loads; i++) {
                const Segment *s = &l->loads[i];
                if (vaddr >= s->vaddr &&
                    range_in_bounds(vaddr - s->vaddr, len, whole_mem ? s->memsz : s->filesz))
                        return s;
        }
        return NULL;
}

/* ---- ELF header ---- */

static int check_target(Loader *l, uint32_t flags) {
        const GpuDeviceInfo *info = l->info;
        const GfxTarget *dev = target_by_version(info->gfx_target_version);
        uint32_t mach = flags & EF_AMDGPU_MACH;
        const GfxTarget *obj = target_by_mach(mach);
        char objname[32];

        if (obj)
                snprintf(objname, sizeof objname, "%s", obj->name);
        else
                snprintf(objname, sizeof objname, "EF_AMDGPU_MACH 0x%03x", mach);
        if (!dev)
                return FAIL(l, -EXDEV, "built for %s, this device is %s, a target the loader does not know",
                            objname, info->gfx_name);
        if (obj != dev)
                return FAIL(l, -EXDEV, "built for %s, this device is %s", objname, dev->name);

        uint32_t xnack = flags & EF_AMDGPU_FEATURE_XNACK_V4;
        if (!dev->xnack && xnack != EF_AMDGPU_FEATURE_XNACK_UNSUPPORTED_V4)
                return FAIL(l, -EINVAL, "e_flags 0x%x sets an XNACK mode, but %s has no XNACK", flags,
                            dev->name);
        if (dev->xnack && xnack == EF_AMDGPU_FEATURE_XNACK_UNSUPPORTED_V4)
                return FAIL(l, -EINVAL, "e_flags 0x%x has no XNACK mode, but %s has XNACK", flags,
                            dev->name);
        if (xnack == EF_AMDGPU_FEATURE_XNACK_ON_V4)
                return FAIL(l, -EXDEV, "built for %s:xnack+, this device runs with XNACK off", dev->name);
        if (flags & EF_AMDGPU_FEATURE_SRAMECC_V4)
                return FAIL(l, -EINVAL, "e_flags 0x%x sets an SRAMECC mode, but %s has no SRAMECC", flags,
                            dev->name);
        uint32_t unknown =
                flags & ~(EF_AMDGPU_MACH | EF_AMDGPU_FEATURE_XNACK_V4 | EF_AMDGPU_FEATURE_SRAMECC_V4);
        if (unknown)
                return FAIL(l, -EINVAL, "e_flags 0x%x has unknown bits 0x%x", flags, unknown);
        l->target = dev;
        return 0;
}

static int check_header(Loader *l) {
        const uint8_t *id = l->file;
        Elf64_Ehdr eh;

        if (l->size == 0)
                return FAIL(l, -ENOEXEC, "the code object is empty");
        if (l->size < SELFMAG || memcmp(id, ELFMAG, SELFMAG) != 0)
                return FAIL(l, -ENOEXEC, "not an ELF file (no \\x7fELF magic)");
        if (l->size < EI_NIDENT)
                return FAIL(l, -ENOEXEC, "the file ends inside the ELF identification (%zu of %d bytes)",
                            l->size, EI_NIDENT);
        if (id[EI_CLASS] != ELFCLASS64)
                return FAIL(l, -ENOEXEC, "ELF class %u is not ELFCLASS64", id[EI_CLASS]);
        if (id[EI_DATA] != ELFDATA2LSB)
                return FAIL(l, -ENOEXEC, "ELF data encoding %u is not little endian (ELFDATA2LSB)",
                            id[EI_DATA]);
        if (id[EI_VERSION] != EV_CURRENT)
                return FAIL(l, -ENOEXEC, "ELF version %u is not EV_CURRENT", id[EI_VERSION]);
        if (l->size < sizeof eh)
                return FAIL(l, -ENOEXEC, "the file ends inside the ELF header (%zu of %zu bytes)", l->size,
                            sizeof eh);
        memcpy(&eh, l->file, sizeof eh);
        if (le16toh(eh.e_machine) != EM_AMDGPU)
                return FAIL(l, -ENOEXEC, "ELF machine %u is not EM_AMDGPU (224)", le16toh(eh.e_machine));
        if (id[EI_OSABI] != ELFOSABI_AMDGPU_HSA)
                return FAIL(l, -ENOEXEC, "OS ABI %u is not ELFOSABI_AMDGPU_HSA (64)", id[EI_OSABI]);
        switch (id[EI_ABIVERSION]) {
        case ELFABIVERSION_AMDGPU_HSA_V4:
                l->version = 4;
                break;
        case ELFABIVERSION_AMDGPU_HSA_V5:
                l->version = 5;
                break;
        default:
                if (id[EI_ABIVERSION] <= ELFABIVERSION_AMDGPU_HSA_V6)
                        return FAIL(l, -ENOEXEC,
                                    "code object v%u is not supported, only v4 and v5 "
                                    "(clang -mcode-object-version=4 or 5)",
                                    id[EI_ABIVERSION] + 2u);
                return FAIL(l, -ENOEXEC, "unknown AMDGPU HSA ABI version %u", id[EI_ABIVERSION]);
        }
        switch (le16toh(eh.e_type)) {
        case ET_DYN:
                break;
        case ET_REL:
                return FAIL(l, -ENOEXEC,
                            "ELF type ET_REL: a relocatable object, link it into a shared "
                            "object first (ld.lld -shared)");
        case ET_EXEC:
                return FAIL(l, -ENOEXEC, "ELF type ET_EXEC: code objects are shared objects (ET_DYN)");
        default:
                return FAIL(l, -ENOEXEC, "ELF type %u is not ET_DYN", le16toh(eh.e_type));
        }
        if (le32toh(eh.e_version) != EV_CURRENT)
                return FAIL(l, -ENOEXEC, "ELF header version %u is not EV_CURRENT", le32toh(eh.e_version));
        if (le16toh(eh.e_ehsize) != sizeof(Elf64_Ehdr))
                return FAIL(l, -ENOEXEC, "ELF header size %u is not %zu", le16toh(eh.e_ehsize),
                            sizeof(Elf64_Ehdr));

        uint16_t phnum = le16toh(eh.e_phnum), shnum = le16toh(eh.e_shnum);
        uint64_t phoff = le64toh(eh.e_phoff), shoff = le64toh(eh.e_shoff);
        if (phnum == 0)
                return FAIL(l, -ENOEXEC, "no program headers");
        if (phnum == PN_XNUM || (shnum == 0 && shoff != 0) || le16toh(eh.e_shstrndx) == SHN_XINDEX)
                return FAIL(l, -ENOEXEC, "extended ELF numbering (PN_XNUM/SHN_XINDEX) is not supported");
        if (le16toh(eh.e_phentsize) != sizeof(Elf64_Phdr))
                return FAIL(l, -ENOEXEC, "program header size %u is not %zu", le16toh(eh.e_phentsize),
                            sizeof(Elf64_Phdr));
        if (!range_in_bounds(phoff, (uint64_t) phnum * sizeof(Elf64_Phdr), l->size))
                return FAIL(l, -ENOEXEC, "the program header table extends past the end of the file");
        if (shnum == 0)
                return FAIL(l, -ENOEXEC,
                            "no section headers (the loader needs the symbol table and notes)");
        if (le16toh(eh.e_shentsize) != sizeof(Elf64_Shdr))
                return FAIL(l, -ENOEXEC, "section header size %u is not %zu", le16toh(eh.e_shentsize),
                            sizeof(Elf64_Shdr));
        if (!range_in_bounds(shoff, (uint64_t) shnum * sizeof(Elf64_Shdr), l->size))
                return FAIL(l, -ENOEXEC, "the section header table extends past the end of the file");
        if (le16toh(eh.e_shstrndx) == SHN_UNDEF || le16toh(eh.e_shstrndx) >= shnum)
                return FAIL(l, -ENOEXEC, "section name table index %u is out of range",
                            le16toh(eh.e_shstrndx));
        return check_target(l, le32toh(eh.e_flags));
}

/* ---- segments and sections ---- */

static int check_segments(Loader *l) {
        size_t phnum;
        uint64_t prev_end = 0;
        bool exec = false;

        if (elf_getphdrnum(l->elf, &phnum) < 0)
                return FAIL(l, -ENOEXEC, "program headers: %s", elf_errmsg(-1));
        l->loads = calloc(phnum, sizeof *l->loads);
        if (!l->loads)
                return FAIL(l, -ENOMEM, "out of memory");

        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr ph;
                if (!gelf_getphdr(l->elf, (int) i, &ph))
                        return FAIL(l, -ENOEXEC, "program header %zu: %s", i, elf_errmsg(-1));
                if (ph.p_type != PT_LOAD)
                        continue;
                if (!range_in_bounds(ph.p_offset, ph.p_filesz, l->size))
                        return FAIL(l, -ENOEXEC,
                                    "segment %zu (PT_LOAD, file offset 0x%" PRIx64 ", 0x%" PRIx64
                                    " bytes) extends past the end of the file",
                                    i, ph.p_offset, ph.p_filesz);
                if (ph.p_filesz > ph.p_memsz)
                        return FAIL(l, -EINVAL,
                                    "segment %zu has 0x%" PRIx64 " file bytes but only 0x%" PRIx64
                                    " bytes of memory",
                                    i, ph.p_filesz, ph.p_memsz);
                if (ph.p_align > 1) {
                        if (!is_power_of_2_u64(ph.p_align))
                                return FAIL(l, -EINVAL,
                                            "segment %zu alignment 0x%" PRIx64 " is not a power of two", i,
                                            ph.p_align);
                        if (ph.p_align > CODE_OBJECT_MAX_ALIGN)
                                return FAIL(l, -EINVAL,
                                            "segment %zu alignment 0x%" PRIx64
                                            " is over the 0x%x bytes the loader guarantees",
                                            i, ph.p_align, CODE_OBJECT_MAX_ALIGN);
                        if ((ph.p_vaddr - ph.p_offset) % ph.p_align != 0)
                                return FAIL(l, -EINVAL,
                                            "segment %zu address 0x%" PRIx64 " and file offset 0x%" PRIx64
                                            " differ modulo its alignment 0x%" PRIx64,
                                            i, ph.p_vaddr, ph.p_offset, ph.p_align);
                }
                if (ph.p_vaddr > GPU_CODE_OBJECT_MAX_SIZE ||
                    ph.p_memsz > GPU_CODE_OBJECT_MAX_SIZE - ph.p_vaddr)
                        return FAIL(l, -E2BIG,
                                    "segment %zu ends past %u MiB, the limit for a code object's image", i,
                                    GPU_CODE_OBJECT_MAX_SIZE >> 20);
                if (ph.p_memsz == 0)
                        continue;
                if (ph.p_vaddr < prev_end)
                        return FAIL(l, -EINVAL,
                                    "segment %zu at 0x%" PRIx64
                                    " overlaps the segment before it or is out of address order",
                                    i, ph.p_vaddr);
                prev_end = ph.p_vaddr + ph.p_memsz;
                l->loads[l->n_loads++] = (Segment) {
                        .vaddr = ph.p_vaddr,
                        .memsz = ph.p_memsz,
                        .filesz = ph.p_filesz,
                        .offset = ph.p_offset,
                        .exec = ph.p_flags & PF_X,
                };
                exec |= !!(ph.p_flags & PF_X);
        }
        if (l->n_loads == 0)
                return FAIL(l, -ENOEXEC, "no PT_LOAD segment");
        if (!exec)
                return FAIL(l, -ENOEXEC, "no executable PT_LOAD segment");
        l->image_size = prev_end;
        return 0;
}

static int check_sections(Loader *l) {
        char nb[280];

        if (elf_getshdrstrndx(l->elf, &l->shstrndx) < 0)
                return FAIL(l, -ENOEXEC, "section headers: %s", elf_errmsg(-1));
        for (Elf_Scn *scn = elf_nextscn(l->elf, NULL); scn; scn = elf_nextscn(l->elf, scn)) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh))
                        return FAIL(l, -ENOEXEC, "section %zu: %s", elf_ndxscn(scn), elf_errmsg(-1));
                if (sh.sh_type != SHT_NOBITS && !range_in_bounds(sh.sh_offset, sh.sh_size, l->size)) {
                        /* The name table itself may be the one cut off. */
                        GElf_Shdr strsh;
                        Elf_Scn *strscn = elf_getscn(l->elf, l->shstrndx);
                        if (!strscn || !gelf_getshdr(strscn, &strsh) ||
                            !range_in_bounds(strsh.sh_offset, strsh.sh_size, l->size))
                                snprintf(nb, sizeof nb, "[%zu]", elf_ndxscn(scn));
                        else
                                section_name(l, &sh, elf_ndxscn(scn), nb);
                        return FAIL(l, -ENOEXEC, "section %s extends past the end of the file", nb);
                }
        }
        return 0;
}

/* ---- symbols, notes, metadata ---- */

static int find_symtab(Loader *l, Elf_Scn **ret, GElf_Shdr *ret_sh) {
        Elf_Scn *found = NULL;
        GElf_Shdr sh;

        for (int pass = 0; pass < 2 && !found; pass++)
                for (Elf_Scn *scn = elf_nextscn(l->elf, NULL); scn; scn = elf_nextscn(l->elf, scn)) {
                        if (!gelf_getshdr(scn, &sh))
                                return FAIL(l, -ENOEXEC, "section headers: %s", elf_errmsg(-1));
                        if (sh.sh_type == (pass == 0 ? SHT_DYNSYM : SHT_SYMTAB)) {
                                found = scn;
                                break;
                        }
                }
        if (!found)
                return FAIL(l, -ENOEXEC, "no symbol table (.dynsym or .symtab)");
        if (sh.sh_entsize != sizeof(Elf64_Sym))
                return FAIL(l, -EINVAL, "symbol table entry size %" PRIu64 " is not %zu", sh.sh_entsize,
                            sizeof(Elf64_Sym));
        *ret = found;
        *ret_sh = sh;
        return 0;
}

static int check_kd_symbol(Loader *l, size_t index, const GElf_Sym *sym, const char *name) {
        char esc[280];
        size_t len = strlen(name) - 3;

        if (len == 0)
                return FAIL(l, -EINVAL, "symbol %zu '.kd' has an empty kernel name", index);
        if (len > GPU_KERNEL_NAME_MAX)
                return FAIL(l, -EINVAL, "kernel name '%s' is %zu bytes long, the limit is %zu",
                            gpu_code_object_escape(name, len, esc), len, GPU_KERNEL_NAME_MAX);
        for (size_t i = 0; i < len; i++)
                if (name[i] <= 0x20 || name[i] >= 0x7f)
                        return FAIL(l, -EINVAL, "kernel name '%s' has a byte outside printable ASCII",
                                    gpu_code_object_escape(name, len, esc));
        gpu_code_object_escape(name, SIZE_MAX, esc);
        if (sym->st_shndx == SHN_UNDEF)
                return FAIL(l, -EINVAL, "kernel descriptor %s is an undefined symbol", esc);
        if (sym->st_size != KD_SIZE)
                return FAIL(l, -EINVAL, "kernel descriptor %s is %" PRIu64 " bytes, not %u", esc,
                            sym->st_size, KD_SIZE);
        if (sym->st_value % KD_SIZE != 0)
                return FAIL(l, -EINVAL, "kernel descriptor %s at 0x%" PRIx64 " is not 64-byte aligned", esc,
                            sym->st_value);
        if (!gpu_code_object_segment_of(l, sym->st_value, KD_SIZE, false))
                return FAIL(l, -EINVAL,
                            "kernel descriptor %s at 0x%" PRIx64 " lies outside the loaded segments", esc,
                            sym->st_value);
        for (unsigned i = 0; i < l->n_kds; i++)
                if (streq(l->kds[i].name, name))
                        return FAIL(l, -EINVAL, "kernel descriptor %s is defined twice", esc);
        return 0;
}

static int find_kernel_descriptors(Loader *l) {
        Elf_Scn *scn = NULL;
        GElf_Shdr sh = {};
        int r;

        r = find_symtab(l, &scn, &sh);
        if (r < 0)
                return r;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data)
                return FAIL(l, -ENOEXEC, "symbol table: %s", elf_errmsg(-1));
        size_t n = sh.sh_size / sizeof(Elf64_Sym);
        for (size_t i = 1; i < n; i++) {
                GElf_Sym sym;
                if (!gelf_getsym(data, (int) i, &sym))
                        return FAIL(l, -EINVAL, "symbol %zu: %s", i, elf_errmsg(-1));
                if (GELF_ST_TYPE(sym.st_info) != STT_OBJECT)
                        continue;
                const char *name = elf_strptr(l->elf, sh.sh_link, sym.st_name);
                if (!name)
                        return FAIL(l, -EINVAL, "symbol %zu: its name is not in the string table", i);
                size_t len = strlen(name);
                if (len < 3 || !streq(name + len - 3, ".kd"))
                        continue;
                if (l->n_kds == GPU_CODE_OBJECT_MAX_KERNELS)
                        return FAIL(l, -E2BIG, "more than %u kernel descriptors",
                                    GPU_CODE_OBJECT_MAX_KERNELS);
                r = check_kd_symbol(l, i, &sym, name);
                if (r < 0)
                        return r;
                if (!l->kds) {
                        l->kds = calloc(GPU_CODE_OBJECT_MAX_KERNELS, sizeof *l->kds);
                        if (!l->kds)
                                return FAIL(l, -ENOMEM, "out of memory");
                }
                l->kds[l->n_kds++] = (KdSym) { .name = name, .vaddr = sym.st_value };
        }
        if (l->n_kds == 0)
                return FAIL(l, -ENOEXEC, "no kernel descriptor (no STT_OBJECT symbol named <kernel>.kd)");
        return 0;
}

static int parse_metadata(Loader *l) {
        const void *desc = NULL;
        size_t desc_size = 0;
        char nb[280];

        for (Elf_Scn *scn = elf_nextscn(l->elf, NULL); scn; scn = elf_nextscn(l->elf, scn)) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh))
                        return FAIL(l, -ENOEXEC, "section headers: %s", elf_errmsg(-1));
                if (sh.sh_type != SHT_NOTE)
                        continue;
                Elf_Data *data = elf_getdata(scn, NULL);
                if (!data)
                        return FAIL(l, -EINVAL, "section %s: %s", section_name(l, &sh, elf_ndxscn(scn), nb),
                                    elf_errmsg(-1));
                size_t off = 0;
                while (off < data->d_size) {
                        GElf_Nhdr nh;
                        size_t name_off, desc_off;
                        size_t next = gelf_getnote(data, off, &nh, &name_off, &desc_off);
                        if (next == 0)
                                return FAIL(l, -EINVAL, "section %s: the note at offset %zu is malformed",
                                            section_name(l, &sh, elf_ndxscn(scn), nb), off);
                        const char *owner = (const char *) data->d_buf + name_off;
                        if (nh.n_type == NT_AMDGPU_METADATA && nh.n_namesz == sizeof "AMDGPU" &&
                            memcmp(owner, "AMDGPU", sizeof "AMDGPU") == 0) {
                                if (desc)
                                        return FAIL(l, -EINVAL, "more than one NT_AMDGPU_METADATA note");
                                desc = (const uint8_t *) data->d_buf + desc_off;
                                desc_size = nh.n_descsz;
                        }
                        off = next;
                }
        }
        if (!desc)
                return FAIL(l, -ENOEXEC, "no NT_AMDGPU_METADATA note (AMDGPU \"amdhsa.kernels\" metadata)");
        int r = gpu_code_object_metadata_parse(desc, desc_size, &l->md, l->err, l->errlen);
        if (r < 0)
                return r;

        if (l->md.target[0]) {
                static const char prefix[] = "amdgcn-amd-amdhsa--";
                const char *t = l->md.target;
                size_t n = strlen(l->target->name);
                if (strncmp(t, prefix, sizeof prefix - 1) != 0 ||
                    strncmp(t + sizeof prefix - 1, l->target->name, n) != 0 ||
                    (t[sizeof prefix - 1 + n] != '\0' && t[sizeof prefix - 1 + n] != ':'))
                        return FAIL(l, -EINVAL,
                                    "metadata amdhsa.target '%s' does not name %s, the ELF header's target",
                                    t, l->target->name);
        }

        /* One metadata entry per descriptor and one descriptor per entry. */
        for (unsigned j = 0; j < l->n_kds; j++) {
                bool found = false;
                for (unsigned i = 0; i < l->md.n_kernels && !found; i++)
                        found = streq(l->kds[j].name, l->md.kernels[i].symbol);
                if (!found)
                        return FAIL(l, -EINVAL, "kernel descriptor %s has no metadata",
                                    gpu_code_object_escape(l->kds[j].name, SIZE_MAX, nb));
        }
        for (unsigned i = 0; i < l->md.n_kernels; i++) {
                const char *sym = l->md.kernels[i].symbol;
                bool found = false;
                for (unsigned j = 0; j < l->n_kds && !found; j++)
                        found = streq(l->kds[j].name, sym);
                if (!found)
                        return FAIL(
                                l, -EINVAL,
                                "metadata describes kernel descriptor %s, which is not in the symbol table",
                                sym);
                for (unsigned j = 0; j < i; j++)
                        if (streq(l->md.kernels[j].symbol, sym))
                                return FAIL(l, -EINVAL, "metadata describes kernel descriptor %s twice",
                                            sym);
        }
        return 0;
}

/* ---- loading and relocation ---- */

static int load_image(Loader *l) {
        if (!l->ctx) {
                l->heap_image = malloc(l->image_size);
                if (!l->heap_image)
                        return FAIL(l, -ENOMEM, "out of memory");
                l->image = l->heap_image;
                l->base = 0;
        } else {
                int r = gpu_buffer_new(l->ctx, l->image_size, GPU_PLACEMENT_GTT, true, &l->code);
                if (r < 0)
                        return FAIL(l, r, "allocating %" PRIu64 " bytes of code memory failed: %s",
                                    l->image_size, strerror(-r));
                l->image = gpu_buffer_get_cpu(l->code);
                l->base = gpu_buffer_get_va(l->code);
        }
        memset(l->image, 0, l->image_size);
        for (size_t i = 0; i < l->n_loads; i++) {
                const Segment *s = &l->loads[i];
                memcpy(l->image + s->vaddr, l->file + s->offset, s->filesz);
        }
        return 0;
}

static int apply_rela_section(Loader *l, Elf_Scn *scn, const GElf_Shdr *sh) {
        char nb[280], esc[280];
        Elf_Data *symdata = NULL;
        GElf_Shdr symsh = {};

        section_name(l, sh, elf_ndxscn(scn), nb);
        if (sh->sh_entsize != sizeof(Elf64_Rela))
                return FAIL(l, -EINVAL, "relocation section %s entry size %" PRIu64 " is not %zu", nb,
                            sh->sh_entsize, sizeof(Elf64_Rela));
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data)
                return FAIL(l, -EINVAL, "relocation section %s: %s", nb, elf_errmsg(-1));
        size_t n = sh->sh_size / sizeof(Elf64_Rela);

        for (size_t i = 0; i < n; i++) {
                GElf_Rela rela;
                uint64_t value;

                if (!gelf_getrela(data, (int) i, &rela))
                        return FAIL(l, -EINVAL, "relocation %zu in %s: %s", i, nb, elf_errmsg(-1));
                uint32_t type = (uint32_t) GELF_R_TYPE(rela.r_info);
                uint32_t symi = (uint32_t) GELF_R_SYM(rela.r_info);

                switch (type) {
                case R_AMDGPU_NONE:
                        continue;
                case R_AMDGPU_RELATIVE64:
                        value = l->base + (uint64_t) rela.r_addend;
                        break;
                case R_AMDGPU_ABS64: {
                        GElf_Sym sym;
                        if (!symdata) {
                                Elf_Scn *ss = elf_getscn(l->elf, sh->sh_link);
                                if (!ss || !gelf_getshdr(ss, &symsh) ||
                                    (symsh.sh_type != SHT_DYNSYM && symsh.sh_type != SHT_SYMTAB) ||
                                    !(symdata = elf_getdata(ss, NULL)))
                                        return FAIL(l, -EINVAL, "relocation section %s has no symbol table",
                                                    nb);
                        }
                        if (symi == 0 || !gelf_getsym(symdata, (int) symi, &sym))
                                return FAIL(
                                        l, -EINVAL,
                                        "relocation %zu in %s refers to symbol %u, which does not exist", i,
                                        nb, symi);
                        const char *name = elf_strptr(l->elf, symsh.sh_link, sym.st_name);
                        gpu_code_object_escape(name ? name : "?", SIZE_MAX, esc);
                        if (sym.st_shndx == SHN_UNDEF)
                                return FAIL(l, -EINVAL,
                                            "relocation %zu in %s is against undefined symbol '%s'", i, nb,
                                            esc);
                        if (sym.st_shndx == SHN_ABS)
                                value = sym.st_value + (uint64_t) rela.r_addend;
                        else if (sym.st_value > l->image_size)
                                return FAIL(l, -EINVAL,
                                            "symbol '%s' at 0x%" PRIx64 " lies outside the image", esc,
                                            sym.st_value);
                        else
                                value = l->base + sym.st_value + (uint64_t) rela.r_addend;
                        break;
                }
                default:
                        return FAIL(l, -EINVAL,
                                    "relocation %zu in %s has type %u, which the loader does not support "
                                    "(only R_AMDGPU_RELATIVE64 and R_AMDGPU_ABS64)",
                                    i, nb, type);
                }
                if (!gpu_code_object_segment_of(l, rela.r_offset, sizeof value, true))
                        return FAIL(l, -EINVAL,
                                    "relocation %zu in %s writes at 0x%" PRIx64
                                    ", outside the loaded segments",
                                    i, nb, rela.r_offset);
                value = htole64(value);
                memcpy(l->image + rela.r_offset, &value, sizeof value);
        }
        return 0;
}

static int apply_relocations(Loader *l) {
        char nb[280];
        for (Elf_Scn *scn = elf_nextscn(l->elf, NULL); scn; scn = elf_nextscn(l->elf, scn)) {
                GElf_Shdr sh;
                if (!gelf_getshdr(scn, &sh))
                        return FAIL(l, -ENOEXEC, "section headers: %s", elf_errmsg(-1));
                if (!(sh.sh_flags & SHF_ALLOC))
                        continue;
                if (sh.sh_type == SHT_REL || sh.sh_type == SHT_RELR_)
                        return FAIL(l, -EINVAL,
                                    "relocation section %s is SHT_%s; only SHT_RELA is supported",
                                    section_name(l, &sh, elf_ndxscn(scn), nb),
                                    sh.sh_type == SHT_REL ? "REL" : "RELR");
                if (sh.sh_type != SHT_RELA)
                        continue;
                int r = apply_rela_section(l, scn, &sh);
                if (r < 0)
                        return r;
        }
        return 0;
}

int gpu_code_object_elf_check(Loader *l) {
        int r = check_header(l);
        if (r < 0)
                return r;
        if (elf_version(EV_CURRENT) == EV_NONE)
                return FAIL(l, -ENOEXEC, "libelf: %s", elf_errmsg(-1));
        l->elf = elf_memory((char *) l->file, l->size);
        if (!l->elf || elf_kind(l->elf) != ELF_K_ELF)
                return FAIL(l, -ENOEXEC, "libelf: %s", elf_errmsg(-1));
        if ((r = check_sections(l)) < 0 || (r = check_segments(l)) < 0 ||
            (r = find_kernel_descriptors(l)) < 0 || (r = parse_metadata(l)) < 0)
                return r;
        return 0;
}

int gpu_code_object_elf_load(Loader *l) {
        int r = load_image(l);
        if (r < 0)
                return r;
        return apply_relocations(l);
}
