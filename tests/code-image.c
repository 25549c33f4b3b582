/* SPDX-License-Identifier: MIT */
/* See code-image.h. */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code-image.h"

static int read_file(const char *path, uint8_t **ret, size_t *ret_size) {
        FILE *f = fopen(path, "rb");
        long n;

        if (!f)
                return -errno;
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fseek(f, 0, SEEK_SET);
        *ret = malloc(n > 0 ? (size_t) n : 1);
        if (!*ret || n < (long) sizeof(Elf64_Ehdr) || fread(*ret, 1, (size_t) n, f) != (size_t) n) {
                fclose(f);
                free(*ret);
                return -EIO;
        }
        fclose(f);
        *ret_size = (size_t) n;
        return 0;
}

int code_image_read(const char *path, const char *name, CodeImage *ret) {
        uint8_t *file = NULL;
        size_t size = 0;
        int r = read_file(path, &file, &size);

        if (r < 0)
                return r;
        const Elf64_Ehdr *eh = (const void *) file;
        memset(ret, 0, sizeof *ret);
        r = -EBADMSG;
#define IN_FILE(off, len) ((uint64_t) (off) <= size && (uint64_t) (len) <= size - (uint64_t) (off))
        if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
            eh->e_machine != EM_AMDGPU || !IN_FILE(eh->e_phoff, (uint64_t) eh->e_phnum * sizeof(Elf64_Phdr)) ||
            !IN_FILE(eh->e_shoff, (uint64_t) eh->e_shnum * sizeof(Elf64_Shdr)))
                goto out;

        /* The image: all PT_LOAD segments at their p_vaddr. */
        const Elf64_Phdr *ph = (const void *) (file + eh->e_phoff);
        for (unsigned i = 0; i < eh->e_phnum; i++)
                if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > ret->size)
                        ret->size = ph[i].p_vaddr + ph[i].p_memsz;
        if (ret->size == 0 || ret->size > (64u << 20))
                goto out;
        ret->bytes = calloc(1, ret->size);
        if (!ret->bytes) {
                r = -ENOMEM;
                goto out;
        }
        for (unsigned i = 0; i < eh->e_phnum; i++) {
                if (ph[i].p_type != PT_LOAD)
                        continue;
                if (!IN_FILE(ph[i].p_offset, ph[i].p_filesz) || ph[i].p_filesz > ph[i].p_memsz)
                        goto out;
                memcpy(ret->bytes + ph[i].p_vaddr, file + ph[i].p_offset, ph[i].p_filesz);
        }

        /* The "<name>.kd" symbol in .symtab. */
        char want[256];
        snprintf(want, sizeof(want), "%s.kd", name);
        const Elf64_Shdr *sh = (const void *) (file + eh->e_shoff);
        ret->kd_off = UINT64_MAX;
        for (unsigned i = 0; i < eh->e_shnum && ret->kd_off == UINT64_MAX; i++) {
                if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum ||
                    !IN_FILE(sh[i].sh_offset, sh[i].sh_size))
                        continue;
                const Elf64_Shdr *strs = &sh[sh[i].sh_link];
                if (!IN_FILE(strs->sh_offset, strs->sh_size))
                        goto out;
                const Elf64_Sym *sym = (const void *) (file + sh[i].sh_offset);
                for (size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); j++) {
                        if (sym[j].st_name >= strs->sh_size)
                                continue;
                        const char *s = (const char *) file + strs->sh_offset + sym[j].st_name;
                        if (strnlen(s, strs->sh_size - sym[j].st_name) == strlen(want) && strcmp(s, want) == 0) {
                                ret->kd_off = sym[j].st_value;
                                break;
                        }
                }
        }
        if (ret->kd_off == UINT64_MAX || ret->kd_off + 64 > ret->size) {
                r = -ENOENT;
                goto out;
        }
        r = 0;
out:
#undef IN_FILE
        free(file);
        if (r < 0)
                code_image_free(ret);
        return r;
}

void code_image_free(CodeImage *img) {
        free(img->bytes);
        img->bytes = NULL;
        img->size = 0;
}
