/* SPDX-License-Identifier: MIT */
/*
 * kfd_isolation_read() over enforce_isolation files written in a temp dir
 * laid out as /sys/class/drm: each value the kernel writes, several
 * partitions, no file, and values it does not write.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kfd/kfd-isolation.h"
#include "test-fini.h"

static char root[256];

static void setup_root(void) {
        snprintf(root, sizeof root, "/tmp/test-kfd-isolation-XXXXXX");
        cr_assert_not_null(mkdtemp(root));
}

static void teardown_root(void) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        cr_assert_eq(system(cmd), 0);
}

TestSuite(isolation, .init = setup_root, .fini = teardown_root);

static void write_value(unsigned minor, const char *text) {
        char path[512];
        snprintf(path, sizeof path, "%s/renderD%u", root, minor);
        mkdir(path, 0755);
        strcat(path, "/device");
        mkdir(path, 0755);
        strcat(path, "/enforce_isolation");
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s", path);
        fputs(text, f);
        fclose(f);
}

Test(isolation, each_value_the_kernel_writes) {
        write_value(128, "0\n");
        cr_assert_eq(kfd_isolation_read(root, 128), KFD_ISOLATION_OFF);
        write_value(128, "1\n");
        cr_assert_eq(kfd_isolation_read(root, 128), KFD_ISOLATION_CLEANER);
        write_value(128, "2\n");
        cr_assert_eq(kfd_isolation_read(root, 128), KFD_ISOLATION_CLEANER);
        write_value(128, "3\n");
        cr_assert_eq(kfd_isolation_read(root, 128), KFD_ISOLATION_NO_CLEANER);
}

Test(isolation, the_first_partition_counts) {
        write_value(129, "1 0 0 0\n");
        cr_assert_eq(kfd_isolation_read(root, 129), KFD_ISOLATION_CLEANER);
        write_value(129, "0 1 1 1\n");
        cr_assert_eq(kfd_isolation_read(root, 129), KFD_ISOLATION_OFF);
}

Test(isolation, no_file_or_a_value_it_does_not_write_is_unknown) {
        cr_assert_eq(kfd_isolation_read(root, 130), KFD_ISOLATION_UNKNOWN);
        write_value(131, "7\n");
        cr_assert_eq(kfd_isolation_read(root, 131), KFD_ISOLATION_UNKNOWN);
        write_value(132, "on\n");
        cr_assert_eq(kfd_isolation_read(root, 132), KFD_ISOLATION_UNKNOWN);
        write_value(133, "");
        cr_assert_eq(kfd_isolation_read(root, 133), KFD_ISOLATION_UNKNOWN);
}

Test(isolation, the_log_says_what_to_do_when_it_is_not_on) {
        cr_assert_not_null(strstr(kfd_isolation_describe(KFD_ISOLATION_OFF), "write 1"));
        cr_assert_not_null(strstr(kfd_isolation_describe(KFD_ISOLATION_OFF), "CVE-2023-4969"));
        cr_assert_not_null(strstr(kfd_isolation_describe(KFD_ISOLATION_NO_CLEANER), "write 1"));
        cr_assert_null(strstr(kfd_isolation_describe(KFD_ISOLATION_CLEANER), "CVE"));
}
