/* SPDX-License-Identifier: MIT */
/*
 * worker-user.c: the workers' dynamic uid is in systemd's range, has no
 * account, and is skipped while any process — under a fabricated /proc — has
 * it as any of its uids or gids.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manager/worker-user.h"

static char root[64];

static void make_root(void) {
        strcpy(root, "/tmp/kfdbroker-proc.XXXXXX");
        cr_assert_not_null(mkdtemp(root));
}

static void remove_root(void) {
        char cmd[128];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        cr_assert_eq(system(cmd), 0);
}

/* A process pid whose status has these Uid: and Gid: lines. */
static void fake_process(int pid, const char *uid_line, const char *gid_line) {
        char path[128];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%d", root, pid);
        cr_assert_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/%d/status", root, pid);
        f = fopen(path, "we");
        cr_assert_not_null(f);
        fprintf(f, "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\nPPid:\t1\n"
                   "TracerPid:\t0\nUid:\t%s\nGid:\t%s\nFDSize:\t64\nGroups:\t\n",
                pid, pid, uid_line, gid_line);
        cr_assert_eq(fclose(f), 0);
}

Test(worker_user, picks_a_free_id_in_the_dynamic_range, .init = make_root, .fini = remove_root) {
        uid_t first, second, third;
        char line[64];

        fake_process(1, "0\t0\t0\t0", "0\t0\t0\t0");
        cr_assert_eq(worker_user_pick_dynamic(root, &first), 0);
        cr_assert(first >= WORKER_DYNAMIC_UID_MIN && first <= WORKER_DYNAMIC_UID_MAX, "%u", (unsigned) first);
        cr_assert_null(getpwuid(first));
        cr_assert_null(getgrgid(first));
        cr_assert_eq(worker_user_pick_dynamic(root, &second), 0);
        cr_assert_eq(second, first, "the same id while it stays free");

        /* A process with it as its saved uid: taken. */
        snprintf(line, sizeof(line), "1000\t1000\t%u\t1000", (unsigned) first);
        fake_process(2, line, "1000\t1000\t1000\t1000");
        cr_assert_eq(worker_user_id_in_use(root, first), 1);
        cr_assert_eq(worker_user_pick_dynamic(root, &second), 0);
        cr_assert_neq(second, first);

        /* One with the next as its filesystem gid: taken too. */
        snprintf(line, sizeof(line), "5\t5\t5\t%u", (unsigned) second);
        fake_process(3, "5\t5\t5\t5", line);
        cr_assert_eq(worker_user_pick_dynamic(root, &third), 0);
        cr_assert(third != first && third != second);
        cr_assert_eq(worker_user_id_in_use(root, 4242), 0);
}

Test(worker_user, unreadable_proc_is_an_error) {
        uid_t id;

        cr_assert_eq(worker_user_pick_dynamic("/nonexistent/proc", &id), -ENOENT);
}
