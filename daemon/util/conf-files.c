/* SPDX-License-Identifier: MIT */
/*
 * See conf-files.h. Plain readdir() and read(): the files are small and read
 * at start-up and on reload.
 */
#include "util/conf-files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util/macro.h"

void conf_files_free(ConfFile *f, size_t n) {
        for (size_t i = 0; f && i < n; i++) {
                free(f[i].name);
                free(f[i].path);
        }
        free(f);
}

static int conf_file_cmp(const void *a, const void *b) {
        return strcmp(((const ConfFile *) a)->name, ((const ConfFile *) b)->name);
}

static bool conf_name_ok(const char *n) {
        size_t l = strlen(n);

        return n[0] != '.' && l > strlen(".conf") && strcmp(n + l - strlen(".conf"), ".conf") == 0;
}

int conf_files_list(const char *const *dirs, size_t max, ConfFile **ret, size_t *ret_n, char *err,
                    size_t errlen) {
        ConfFile *files = NULL;
        size_t n = 0;
        int r = 0;

        for (size_t d = 0; dirs && dirs[d] && r >= 0; d++) {
                DIR *dir = opendir(dirs[d]);
                struct dirent *de;

                if (!dir) {
                        if (errno == ENOENT || errno == ENOTDIR)
                                continue;
                        r = -errno;
                        snprintf(err, errlen, "%s: cannot open directory: %s", dirs[d], strerror(-r));
                        break;
                }
                while (r >= 0 && (errno = 0, de = readdir(dir))) {
                        bool seen = false;
                        ConfFile *nf;

                        if (!conf_name_ok(de->d_name))
                                continue;
                        for (size_t i = 0; i < n && !seen; i++)
                                seen = strcmp(files[i].name, de->d_name) == 0;
                        if (seen)
                                continue;
                        if (n >= max) {
                                snprintf(err, errlen, "%s: more than %zu configuration files", dirs[d], max);
                                r = -E2BIG;
                                break;
                        }
                        nf = reallocarray(files, n + 1, sizeof(ConfFile));
                        if (!nf) {
                                r = -ENOMEM;
                                break;
                        }
                        files = nf;
                        files[n] = (ConfFile) { strdup(de->d_name), NULL };
                        if (!files[n].name || asprintf(&files[n].path, "%s/%s", dirs[d], de->d_name) < 0) {
                                files[n].path = NULL;
                                n++;
                                r = -ENOMEM;
                                break;
                        }
                        n++;
                }
                if (r >= 0 && errno != 0) {
                        r = -errno;
                        snprintf(err, errlen, "%s: cannot read directory: %s", dirs[d], strerror(-r));
                }
                closedir(dir);
        }
        if (r < 0) {
                conf_files_free(files, n);
                return r;
        }
        if (n > 0)
                qsort(files, n, sizeof(ConfFile), conf_file_cmp);
        *ret = files;
        *ret_n = n;
        return 0;
}

int conf_file_read(const char *path, size_t max, char **ret, size_t *ret_len, char *err, size_t errlen) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        struct stat st;
        size_t len = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
                return -errno;
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) { /* /dev/null */
                *ret = NULL;
                *ret_len = 0;
                return 0;
        }
        if (!S_ISREG(st.st_mode)) {
                snprintf(err, errlen, "%s: not a regular file", path);
                return -EINVAL;
        }
        if (st.st_size > (off_t) max) {
                snprintf(err, errlen, "%s: file is larger than %zu bytes", path, max);
                return -EFBIG;
        }
        buf = malloc(max + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n = read(fd, buf + len, max + 1 - len);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
                if (len > max) { /* grew since fstat */
                        snprintf(err, errlen, "%s: file is larger than %zu bytes", path, max);
                        return -EFBIG;
                }
        }
        buf[len] = 0;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}
