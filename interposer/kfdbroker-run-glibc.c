/* SPDX-License-Identifier: MIT */
/*
 * Whether libkfdbroker-kfd.so can be preloaded here: the glibc versions it
 * needs from libc.so.6 (its SHT_GNU_verneed entries) against the versions
 * this system's libc.so.6 defines (its SHT_GNU_verdef entries) — the check
 * the dynamic loader makes, done before exec so that a container with an
 * older glibc, or none (musl), gets a sentence instead of a loader error in
 * every program. kfdbroker-run is linked statically so that it runs there.
 * A system with neither a libc.so.6 in the usual directories nor musl has a
 * layout of its own, and is left to the loader.
 * The ELF structures are those of <elf.h> (the gABI's symbol versioning
 * section, "GNU extensions: versioning" in the LSB's ELF chapter); every
 * offset read from a file is checked against its size.
 */
#include "kfdbroker-run-glibc.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Where distributions put the x86-64 libc.so.6: Debian and Ubuntu
 * (multiarch), Fedora/RHEL/SUSE (lib64), Arch (usr/lib). First found wins. */
static const char *const libc_paths[] = {
        "/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
        "/lib64/libc.so.6", "/usr/lib64/libc.so.6", "/usr/lib/libc.so.6", "/lib/libc.so.6",
};

/* musl's dynamic loader on x86-64 (musl's Makefile: ld-musl-$(ARCH).so.1 in /lib). */
#define MUSL_LOADER "/lib/ld-musl-x86_64.so.1"

typedef struct Elf {
        const uint8_t *data;
        size_t size;
} Elf;

static bool in_file(const Elf *e, uint64_t off, uint64_t len) {
        return off <= e->size && len <= e->size - off;
}

/* Copies a structure out of the file (offsets in a file need not be
 * aligned): false if it does not lie inside. */
static bool elf_read(const Elf *e, uint64_t off, void *dst, size_t len) {
        if (!in_file(e, off, len))
                return false;
        memcpy(dst, e->data + off, len);
        return true;
}

static int elf_map(const char *path, Elf *ret) {
        struct stat st;
        void *m;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0 || st.st_size < (off_t) sizeof(Elf64_Ehdr)) {
                close(fd);
                return -ENOEXEC;
        }
        m = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (m == MAP_FAILED)
                return -errno;
        *ret = (Elf) { .data = m, .size = (size_t) st.st_size };
        return 0;
}

static void elf_unmap(Elf *e) {
        if (e->data)
                munmap((void *) e->data, e->size);
        e->data = NULL;
}

/* The section of @type and the string table it links to, or -ENOENT. */
static int elf_section(const Elf *e, uint32_t type, Elf64_Shdr *ret, Elf64_Shdr *ret_strtab) {
        Elf64_Ehdr h;

        if (!elf_read(e, 0, &h, sizeof h) || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 ||
            h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_machine != EM_X86_64 || h.e_shentsize != sizeof(Elf64_Shdr) ||
            !in_file(e, h.e_shoff, (uint64_t) h.e_shnum * sizeof(Elf64_Shdr)))
                return -ENOEXEC;
        for (unsigned i = 0; i < h.e_shnum; i++) {
                Elf64_Shdr sh, str;

                (void) elf_read(e, h.e_shoff + (uint64_t) i * sizeof sh, &sh, sizeof sh);
                if (sh.sh_type != type)
                        continue;
                if (sh.sh_link >= h.e_shnum || !in_file(e, sh.sh_offset, sh.sh_size))
                        return -ENOEXEC;
                (void) elf_read(e, h.e_shoff + (uint64_t) sh.sh_link * sizeof str, &str, sizeof str);
                if (!in_file(e, str.sh_offset, str.sh_size))
                        return -ENOEXEC;
                *ret = sh;
                *ret_strtab = str;
                return 0;
        }
        return -ENOENT;
}

/* The NUL-terminated string at @off of @strtab, or NULL. */
static const char *elf_string(const Elf *e, const Elf64_Shdr *strtab, uint64_t off) {
        const char *s = (const char *) e->data + strtab->sh_offset;

        if (off >= strtab->sh_size || !memchr(s + off, 0, strtab->sh_size - off))
                return NULL;
        return s + off;
}

/* Whether @off..+@len lies inside @sec. */
static bool in_section(const Elf64_Shdr *sec, uint64_t off, uint64_t len) {
        return off >= sec->sh_offset && off - sec->sh_offset <= sec->sh_size &&
               len <= sec->sh_size - (off - sec->sh_offset);
}

/* Whether libc's version definitions include @name. */
static int libc_defines(const Elf *libc, const char *name) {
        Elf64_Shdr sec, strtab;
        uint64_t off;
        int r = elf_section(libc, SHT_GNU_verdef, &sec, &strtab);

        if (r < 0)
                return r;
        off = sec.sh_offset;
        for (unsigned n = 0; n < 4096; n++) {
                Elf64_Verdef d;
                Elf64_Verdaux a;
                const char *s;

                if (!in_section(&sec, off, sizeof d) || !elf_read(libc, off, &d, sizeof d))
                        return -ENOEXEC;
                if (d.vd_cnt > 0) {
                        if (!in_section(&sec, off + d.vd_aux, sizeof a) || !elf_read(libc, off + d.vd_aux, &a, sizeof a))
                                return -ENOEXEC;
                        s = elf_string(libc, &strtab, a.vda_name);
                        if (!s)
                                return -ENOEXEC;
                        if (strcmp(s, name) == 0)
                                return 1;
                }
                if (d.vd_next == 0)
                        return 0;
                off += d.vd_next;
        }
        return -ENOEXEC;
}

/* "GLIBC_2.34" → 2034; 0 for another name. */
static unsigned glibc_number(const char *name) {
        unsigned major, minor;

        if (sscanf(name, "GLIBC_%u.%u", &major, &minor) != 2)
                return 0;
        return major * 1000 + minor;
}

/* Walks the interposer's needs from libc.so.6: *ret_newest is the newest
 * GLIBC_ version needed, *ret_missing the newest one @libc lacks (or NULL;
 * not looked for without @libc). */
static int check_needs(const Elf *lib, const Elf *libc, const char **ret_newest, const char **ret_missing) {
        Elf64_Shdr sec, strtab;
        uint64_t off;
        int r = elf_section(lib, SHT_GNU_verneed, &sec, &strtab);

        *ret_newest = *ret_missing = NULL;
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        off = sec.sh_offset;
        for (unsigned n = 0; n < 4096; n++) {
                Elf64_Verneed v;
                const char *file;
                uint64_t aoff;

                if (!in_section(&sec, off, sizeof v) || !elf_read(lib, off, &v, sizeof v))
                        return -ENOEXEC;
                file = elf_string(lib, &strtab, v.vn_file);
                if (!file)
                        return -ENOEXEC;
                aoff = off + v.vn_aux;
                for (unsigned i = 0; strcmp(file, "libc.so.6") == 0 && i < v.vn_cnt; i++) {
                        Elf64_Vernaux a;
                        const char *name;

                        if (!in_section(&sec, aoff, sizeof a) || !elf_read(lib, aoff, &a, sizeof a))
                                return -ENOEXEC;
                        name = elf_string(lib, &strtab, a.vna_name);
                        if (!name)
                                return -ENOEXEC;
                        if (!*ret_newest || glibc_number(name) > glibc_number(*ret_newest))
                                *ret_newest = name;
                        r = libc ? libc_defines(libc, name) : 1;
                        if (r < 0)
                                return r;
                        if (r == 0 && (!*ret_missing || glibc_number(name) > glibc_number(*ret_missing)))
                                *ret_missing = name;
                        aoff += a.vna_next;
                }
                if (v.vn_next == 0)
                        return 0;
                off += v.vn_next;
        }
        return -ENOEXEC;
}

int glibc_check(const char *interposer, char *msg, size_t size) {
        Elf lib = {}, libc = {};
        const char *libc_path = NULL, *newest, *missing;
        int r;

        for (size_t i = 0; i < sizeof libc_paths / sizeof libc_paths[0] && !libc_path; i++)
                if (access(libc_paths[i], R_OK) == 0)
                        libc_path = libc_paths[i];
        r = elf_map(interposer, &lib);
        if (r < 0) {
                snprintf(msg, size, "cannot read %s: %s", interposer, strerror(-r));
                return r;
        }
        if (!libc_path) {
                /* A layout of its own (NixOS keeps glibc in its store): the
                 * loader will check. musl's loader is always at this path. */
                if (access(MUSL_LOADER, F_OK) < 0) {
                        elf_unmap(&lib);
                        return 0;
                }
                r = check_needs(&lib, NULL, &newest, &missing);
                snprintf(msg, size,
                         "this system's C library is musl (" MUSL_LOADER "), not glibc; %s needs glibc %s or later "
                         "(use an image with glibc, not Alpine's)",
                         interposer, r == 0 && newest ? newest + 6 : "2.34");
                elf_unmap(&lib);
                return -ENOENT;
        }
        r = elf_map(libc_path, &libc);
        if (r < 0) {
                snprintf(msg, size, "cannot read %s: %s", libc_path, strerror(-r));
                elf_unmap(&lib);
                return r;
        }
        r = check_needs(&lib, &libc, &newest, &missing);
        if (r < 0)
                snprintf(msg, size, "cannot read the symbol versions of %s or %s: %s", interposer, libc_path,
                         strerror(-r));
        else if (missing) {
                snprintf(msg, size,
                         "%s needs glibc %s or later (its libc.so.6 symbols of version %s), and this system's %s "
                         "does not define %s: use an image with a newer glibc",
                         interposer, newest + 6, newest, libc_path, missing);
                r = -ENOEXEC;
        }
        elf_unmap(&libc);
        elf_unmap(&lib);
        return r;
}
