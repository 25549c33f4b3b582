/* SPDX-License-Identifier: MIT */
/*
 * kfdbroker-run's glibc check (interposer/kfdbroker-run-glibc.c) on this
 * host: the built interposer passes against the host's glibc (which it was
 * built with), and files that are not what they claim — missing, not ELF,
 * truncated anywhere, bytes flipped anywhere in its headers and version
 * sections — get an errno and a sentence, never a crash or a read past the
 * file (this test runs under ASan too).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kfdbroker-run-glibc.h"

static const char *interposer(void) {
        const char *p = getenv("KFDBROKER_INTERPOSER");
        cr_assert(p && p[0], "KFDBROKER_INTERPOSER is not set (run through meson test)");
        return p;
}

static char *slurp(const char *path, size_t *ret_size) {
        struct stat st;
        char *buf;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        cr_assert_geq(fd, 0);
        cr_assert_eq(fstat(fd, &st), 0);
        buf = malloc((size_t) st.st_size);
        cr_assert_not_null(buf);
        cr_assert_eq(read(fd, buf, (size_t) st.st_size), st.st_size);
        close(fd);
        *ret_size = (size_t) st.st_size;
        return buf;
}

static void spit(const char *path, const char *data, size_t size) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, data, size), (ssize_t) size);
        close(fd);
}

Test(run_glibc, the_built_interposer_loads_with_the_hosts_glibc) {
        char msg[1024] = "";

        cr_assert_eq(glibc_check(interposer(), msg, sizeof msg), 0, "%s", msg);
}

Test(run_glibc, a_missing_or_non_elf_library_is_named) {
        char msg[1024], path[] = "/tmp/kfdbroker-run-glibc.XXXXXX";
        int fd;

        cr_assert_eq(glibc_check("/nonexistent/libkfdbroker-kfd.so", msg, sizeof msg), -ENOENT);
        cr_assert_str_eq(msg, "cannot read /nonexistent/libkfdbroker-kfd.so: No such file or directory");
        static const char script[] = "#!/bin/sh\necho not a library, but longer than an ELF header is....\n";
        fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        close(fd);
        spit(path, script, sizeof script - 1);
        cr_assert_eq(glibc_check(path, msg, sizeof msg), -ENOEXEC);
        cr_assert(strstr(msg, "cannot read the symbol versions of"), "%s", msg);
        spit(path, "", 0);
        cr_assert_eq(glibc_check(path, msg, sizeof msg), -ENOEXEC);
        unlink(path);
}

/* Every truncation and byte flip of the real file: no crash, an answer. */
Test(run_glibc, damaged_copies_get_an_answer, .timeout = 120) {
        char msg[1024], path[] = "/tmp/kfdbroker-run-glibc.XXXXXX";
        size_t size, step;
        char *data = slurp(interposer(), &size);
        unsigned ok = 0, refused = 0;
        int fd = mkstemp(path);

        cr_assert_geq(fd, 0);
        close(fd);
        step = size / 500 + 1;
        for (size_t len = 0; len < size; len += step) {
                spit(path, data, len);
                int r = glibc_check(path, msg, sizeof msg);
                cr_assert(r == 0 || r == -ENOEXEC, "length %zu: %d %s", len, r, msg);
                r == 0 ? ok++ : refused++;
        }
        /* The headers, then every byte of the file at a stride, flipped. */
        spit(path, data, size);
        fd = open(path, O_WRONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        for (size_t i = 0; i < size; i += i < 4096 ? 1 : step) {
                char flipped = (char) (data[i] ^ 0xa5);
                cr_assert_eq(pwrite(fd, &flipped, 1, (off_t) i), 1);
                int r = glibc_check(path, msg, sizeof msg);
                cr_assert(r == 0 || r == -ENOEXEC, "byte %zu: %d %s", i, r, msg);
                r == 0 ? ok++ : refused++;
                cr_assert_eq(pwrite(fd, &data[i], 1, (off_t) i), 1);
        }
        close(fd);
        cr_assert_gt(refused, 0);
        cr_assert_gt(ok, 0);
        unlink(path);
        free(data);
}
