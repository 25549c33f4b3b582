/* SPDX-License-Identifier: MIT */
/*
 * ConfFiles: the list of *.conf files a set of drop-in directories holds, in
 * the order systemd reads drop-ins (systemd.unit(5), "drop-in"; the
 * conf-files logic of systemd's src/basic/conf-files.c): every directory's
 * names merged and sorted by name, and a name found in several directories
 * taken only from the most important one, so /etc/x.conf.d/50-a.conf hides
 * /usr/lib/x.conf.d/50-a.conf and a symlink to /dev/null masks it. Used by
 * the policy loader (policy.d) and the daemon's configuration
 * (kfdbrokerd.conf.d). The caller owns the list.
 */
#pragma once

#include <stddef.h>

typedef struct ConfFile {
        char *name; /* base name, the sort key */
        char *path; /* directory/name */
} ConfFile;

/*
 * conf_files_list() - the *.conf files of dirs, sorted by name.
 * @dirs: NULL-terminated, most important first; missing ones are skipped.
 * @max:  fail with -E2BIG past this many files.
 * @err:  on failure "DIR: message".
 * Returns 0 and *ret (free with conf_files_free()) and *ret_n, or -errno of
 * opening or reading a directory, -E2BIG or -ENOMEM.
 */
int conf_files_list(const char *const *dirs, size_t max, ConfFile **ret, size_t *ret_n, char *err,
                    size_t errlen);
void conf_files_free(ConfFile *f, size_t n);

/*
 * conf_file_read() - a whole configuration file, at most max bytes.
 * A symlink to /dev/null (or an empty file) masks it: *ret = NULL,
 * *ret_len = 0. Returns 0, or -errno of open/read, -EINVAL (not a regular
 * file) or -EFBIG, with "PATH: message" in err.
 */
int conf_file_read(const char *path, size_t max, char **ret, size_t *ret_len, char *err, size_t errlen);
