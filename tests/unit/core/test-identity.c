/* SPDX-License-Identifier: MIT */
/*
 * Tests of daemon/policy/identity.c: cgroup paths of the shapes systemd, Flatpak,
 * snap, systemd-machined, nspawn, docker, podman, CRI runtimes and LXC produce
 * give the unit, user unit, app id and container the policy matches on;
 * fabricated /proc trees give the groups, comm, cgroup and namespace answers
 * (and -ESRCH / -E2BIG / -EBADMSG for vanished, oversized and malformed
 * ones); the test process itself, by pid and through a socket, reads back as
 * what the kernel says it is; a pidfd of a dead process turns a successful
 * read into -ESRCH.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy/identity.h"
#include "util/utf8.h"
#include "test-fini.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

typedef struct CgroupCase {
        const char *cgroup;
        const char *unit, *user_unit, *slice;
        long user_unit_uid;
        const char *app_id;
        IdentityAppSource app_source;
        const char *container;
        IdentityContainerSource container_source;
} CgroupCase;

static const CgroupCase cgroup_cases[] = {
        { "/system.slice/foo.service", "foo.service", NULL, "system.slice", -1, NULL, 0, NULL, 0 },
        { "/system.slice/foo.service/worker", "foo.service", NULL, "system.slice", -1, NULL, 0, NULL, 0 },
        { "/init.scope", "init.scope", NULL, NULL, -1, NULL, 0, NULL, 0 },
        { "/", NULL, NULL, NULL, -1, NULL, 0, NULL, 0 },
        { "/user.slice/user-1000.slice/session-3.scope", "session-3.scope", NULL, "user-1000.slice", -1,
          NULL, 0, NULL, 0 },
        { "/user.slice/user-1000.slice/user@1000.service/app.slice/foo.service", "user@1000.service",
          "foo.service", "user-1000.slice", 1000, NULL, 0, NULL, 0 },
        { "/user.slice/user-1000.slice/user@1000.service/init.scope", "user@1000.service", "init.scope",
          "user-1000.slice", 1000, NULL, 0, NULL, 0 },
        { "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.gnome.Calculator-12345.scope",
          "user@1000.service", "app-flatpak-org.gnome.Calculator-12345.scope", "user-1000.slice", 1000,
          "org.gnome.Calculator", IDENTITY_APP_FLATPAK_SCOPE, NULL, 0 },
        { "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.My\\x2dApp-77.scope",
          "user@1000.service", "app-flatpak-org.example.My\\x2dApp-77.scope", "user-1000.slice", 1000,
          "org.example.My-App", IDENTITY_APP_FLATPAK_SCOPE, NULL, 0 },
        { "/user.slice/user-1000.slice/user@1000.service/app.slice/snap.firefox.firefox-1b2c3d.scope",
          "user@1000.service", "snap.firefox.firefox-1b2c3d.scope", "user-1000.slice", 1000, "firefox",
          IDENTITY_APP_SNAP, NULL, 0 },
        { "/system.slice/snap.lxd.daemon.service", "snap.lxd.daemon.service", NULL, "system.slice", -1, "lxd",
          IDENTITY_APP_SNAP, NULL, 0 },
        { "/machine.slice/machine-debian\\x2dtest.scope/payload/system.slice/x.service",
          "machine-debian\\x2dtest.scope", NULL, "machine.slice", -1, NULL, 0, "debian-test",
          IDENTITY_CONTAINER_MACHINE },
        { "/machine.slice/machine-qemu\\x2d1\\x2dvm.scope/libvirt", "machine-qemu\\x2d1\\x2dvm.scope", NULL,
          "machine.slice", -1, NULL, 0, "qemu-1-vm", IDENTITY_CONTAINER_MACHINE },
        { "/machine.slice/systemd-nspawn@web.service/payload", "systemd-nspawn@web.service", NULL,
          "machine.slice", -1, NULL, 0, "web", IDENTITY_CONTAINER_NSPAWN },
        { "/system.slice/docker-" HEX64 ".scope", "docker-" HEX64 ".scope", NULL, "system.slice", -1, NULL, 0,
          "0123456789ab", IDENTITY_CONTAINER_DOCKER },
        { "/docker/" HEX64, NULL, NULL, NULL, -1, NULL, 0, "0123456789ab", IDENTITY_CONTAINER_DOCKER },
        { "/system.slice/docker.service", "docker.service", NULL, "system.slice", -1, NULL, 0, NULL, 0 },
        { "/machine.slice/libpod-" HEX64 ".scope/container", "libpod-" HEX64 ".scope", NULL, "machine.slice", -1,
          NULL, 0, "0123456789ab", IDENTITY_CONTAINER_PODMAN },
        { "/machine.slice/libpod-conmon-" HEX64 ".scope", "libpod-conmon-" HEX64 ".scope", NULL,
          "machine.slice", -1, NULL, 0, NULL, 0 },
        { "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" HEX64 ".scope/container",
          "user@1000.service", "libpod-" HEX64 ".scope", "user-1000.slice", 1000, NULL, 0, "0123456789ab",
          IDENTITY_CONTAINER_PODMAN },
        { "/libpod_parent/libpod-" HEX64, NULL, NULL, NULL, -1, NULL, 0, "0123456789ab",
          IDENTITY_CONTAINER_PODMAN },
        { "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-" HEX64 ".scope",
          "cri-containerd-" HEX64 ".scope", NULL, "kubepods-burstable-pod1.slice", -1, NULL, 0, "0123456789ab",
          IDENTITY_CONTAINER_CRI },
        { "/kubepods.slice/crio-" HEX64 ".scope", "crio-" HEX64 ".scope", NULL, "kubepods.slice", -1, NULL, 0,
          "0123456789ab", IDENTITY_CONTAINER_CRI },
        { "/lxc.payload.web1/init.scope", NULL, NULL, NULL, -1, NULL, 0, "web1", IDENTITY_CONTAINER_LXC },
        { "/lxc/old1", NULL, NULL, NULL, -1, NULL, 0, "old1", IDENTITY_CONTAINER_LXC },
        /* Not units: junk or a bogus user@ stays out of unit/user_unit. */
        { "/system.slice/not a unit", NULL, NULL, "system.slice", -1, NULL, 0, NULL, 0 },
        { "/user.slice/user@x.service/app.slice/foo.service", "user@x.service", NULL, "user.slice", -1, NULL, 0,
          NULL, 0 },
};

static void check_str(const char *what, const char *cg, const char *got, const char *want) {
        if (!want)
                cr_expect_null(got, "%s: %s is \"%s\", expected none", cg, what, got ? got : "");
        else
                cr_expect(got && strcmp(got, want) == 0, "%s: %s is \"%s\", expected \"%s\"", cg, what,
                          got ? got : "(null)", want);
}

Test(identity, cgroup_conventions) {
        for (size_t i = 0; i < sizeof(cgroup_cases) / sizeof(cgroup_cases[0]); i++) {
                const CgroupCase *c = &cgroup_cases[i];
                Identity id = { .user_unit_uid = (uid_t) -1 };

                id.cgroup = strdup(c->cgroup);
                cr_assert_eq(identity_parse_cgroup(&id), 0);
                check_str("unit", c->cgroup, id.unit, c->unit);
                check_str("user_unit", c->cgroup, id.user_unit, c->user_unit);
                check_str("slice", c->cgroup, id.slice, c->slice);
                cr_expect_eq((long) (int) id.user_unit_uid, c->user_unit_uid, "%s: user_unit_uid %ld", c->cgroup,
                             (long) (int) id.user_unit_uid);
                check_str("app_id", c->cgroup, id.app_id, c->app_id);
                cr_expect_eq(id.app_source, c->app_source, "%s: app source %s", c->cgroup,
                             identity_app_source_to_string(id.app_source));
                check_str("container", c->cgroup, id.container, c->container);
                cr_expect_eq(id.in_container, c->container != NULL, "%s: in_container", c->cgroup);
                cr_expect_eq(id.container_source, c->container_source, "%s: container source %s", c->cgroup,
                             identity_container_source_to_string(id.container_source));
                identity_done(&id);
        }
}

/* ---- fabricated /proc trees ---- */

static char root[PATH_MAX];

static void put(const char *rel, const char *content) {
        char path[PATH_MAX * 2];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        f = fopen(path, "w");
        cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
        fputs(content, f);
        fclose(f);
}

static void mk(const char *rel) {
        char path[PATH_MAX * 2];

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

static void link_to(const char *rel, const char *target) {
        char path[PATH_MAX * 2];

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        cr_assert_eq(symlink(target, path), 0, "symlink %s: %s", path, strerror(errno));
}

static void rm_rel(const char *rel) {
        char path[PATH_MAX * 2];

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        cr_assert_eq(unlink(path), 0, "unlink %s: %s", path, strerror(errno));
}

static void make_tree(void) {
        snprintf(root, sizeof(root), "/tmp/kfdb-identity-XXXXXX");
        cr_assert_not_null(mkdtemp(root));
        mk("self");
        mk("self/ns");
        link_to("self/ns/pid", "pid:[4026531836]");
        link_to("self/ns/mnt", "mnt:[4026531841]");

        mk("4242");
        mk("4242/ns");
        put("4242/status", "Name:\tcijob\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\nPid:\t4242\n"
                           "Uid:\t1000\t1000\t1000\t1000\nGid:\t1001\t1001\t1001\t1001\nFDSize:\t64\n"
                           "Groups:\t27 44 105 1001 \nNStgid:\t4242\n");
        put("4242/comm", "cijob\n");
        put("4242/cgroup", "12:pids:/system.slice/runner.service\n"
                           "1:name=systemd:/system.slice/runner.service\n"
                           "0::/system.slice/runner.service\n");
        link_to("4242/ns/pid", "pid:[4026531836]");
        link_to("4242/ns/mnt", "mnt:[4026531841]");
        mk("4242/rootfs");
        link_to("4242/root", "rootfs");
}

static void remove_tree(void) {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        test_fini_end();
}

static char self_ns[PATH_MAX + 8];

static const char *self_ns_root(void) {
        snprintf(self_ns, sizeof(self_ns), "%s/self", root);
        return self_ns;
}

Test(identity, fabricated_proc, .init = make_tree, .fini = remove_tree) {
        Identity id;

        cr_assert_eq(identity_read(root, 4242, -1, NULL, self_ns_root(), &id), 0);
        cr_expect_eq(id.pid, 4242);
        cr_expect_eq(id.uid, 1000);
        cr_expect_eq(id.gid, 1001);
        cr_assert_eq(id.n_gids, 4);
        cr_expect_eq(id.gids[0], 27);
        cr_expect_eq(id.gids[1], 44);
        cr_expect_eq(id.gids[2], 105);
        cr_expect_eq(id.gids[3], 1001);
        cr_expect(identity_has_gid(&id, 44));
        cr_expect(identity_has_gid(&id, 1001));
        cr_expect_not(identity_has_gid(&id, 45));
        cr_expect_str_eq(id.comm, "cijob");
        cr_expect_str_eq(id.cgroup, "/system.slice/runner.service");
        cr_expect_str_eq(id.unit, "runner.service");
        cr_expect_null(id.app_id);
        cr_expect_not(id.in_container);
        cr_expect_not(id.other_pid_ns);
        cr_expect_not(id.other_mnt_ns);

        /* The kernel-stamped credentials win over /proc's current ones. */
        {
                struct ucred cred = { .pid = 4242, .uid = 2000, .gid = 2001 };
                Identity c;

                cr_assert_eq(identity_read(root, 4242, -1, &cred, NULL, &c), 0);
                cr_expect_eq(c.uid, 2000);
                cr_expect_eq(c.gid, 2001);
                cr_expect(identity_has_gid(&c, 2001));
                identity_done(&c);
        }

        /* identity_copy duplicates everything. */
        {
                Identity c;

                cr_assert_eq(identity_copy(&id, &c), 0);
                cr_expect_neq(c.cgroup, id.cgroup);
                cr_expect_str_eq(c.cgroup, id.cgroup);
                cr_expect_str_eq(c.unit, id.unit);
                cr_expect_eq(c.n_gids, 4);
                cr_expect_eq(c.gids[3], 1001);
                identity_done(&c);
        }
        identity_done(&id);
        cr_expect_null(id.cgroup);
        identity_done(&id); /* twice is harmless */
        identity_done(NULL);
}

/*
 * A client names its own cgroup, scope and comm, with any bytes: every string
 * the daemon derives must still be valid UTF-8, because D-Bus refuses a reply
 * that holds one invalid string (root's ListSessions would fail for everyone).
 */
Test(identity, names_that_are_not_utf8_are_escaped, .init = make_tree, .fini = remove_tree) {
        Identity id;

        put("4242/comm", "bad\xff\xc0name\n");
        /* A Flatpak scope whose escaped app id decodes to bytes that are not UTF-8. */
        put("4242/cgroup", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                           "app-flatpak-org.ex\\xffmple-42.scope\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, NULL, &id), 0);
        cr_expect_str_eq(id.comm, "bad??name");
        cr_assert_not_null(id.app_id);
        cr_expect_str_eq(id.app_id, "org.ex\\xffmple");
        cr_expect(utf8_is_valid(id.cgroup), "cgroup \"%s\"", id.cgroup);
        cr_expect(utf8_is_valid(id.user_unit), "user unit \"%s\"", id.user_unit);
        identity_done(&id);

        /* Raw invalid bytes in the cgroup path itself. */
        put("4242/cgroup", "0::/system.slice/r\xe9nner.service\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, NULL, &id), 0);
        cr_expect_str_eq(id.cgroup, "/system.slice/r\\xe9nner.service");
        cr_expect_null(id.unit, "not a valid unit name"); /* systemd allows only ASCII in unit names */
        identity_done(&id);
}

Test(identity, utf8_validation) {
        static const char *const valid[] = { "", "abc", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
                                             "\xef\xbf\xbd" /* U+FFFD */ };
        static const char *const invalid[] = {
                "\xff", "\xc0\x80" /* overlong NUL */, "\xe0\x80\xaf" /* overlong */,
                "\xed\xa0\x80" /* surrogate */, "\xf4\x90\x80\x80" /* > U+10FFFF */,
                "\xef\xbf\xbe" /* U+FFFE */, "\xef\xb7\x90" /* U+FDD0 */, "\xc3" /* truncated */,
                "ab\xe2\x82" /* truncated at the end */,
        };

        for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
                cr_expect(utf8_is_valid(valid[i]), "valid[%zu]", i);
        for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
                char *e;

                cr_expect_not(utf8_is_valid(invalid[i]), "invalid[%zu]", i);
                e = utf8_escape_invalid(invalid[i]);
                cr_assert_not_null(e);
                cr_expect(utf8_is_valid(e), "escaped invalid[%zu] is \"%s\"", i, e);
                free(e);
        }
        {
                char *e = utf8_escape_invalid("a\xff" "b\xc3\xa9");
                cr_expect_str_eq(e, "a\\xffb\xc3\xa9");
                free(e);
        }
}

Test(identity, flatpak_info_and_namespaces, .init = make_tree, .fini = remove_tree) {
        Identity id;

        /* Other namespaces, no app: a container without a name. */
        rm_rel("4242/ns/pid");
        link_to("4242/ns/pid", "pid:[4026532999]");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, self_ns_root(), &id), 0);
        cr_expect(id.other_pid_ns);
        cr_expect_not(id.other_mnt_ns);
        cr_expect(id.in_container);
        cr_expect_eq(id.container_source, IDENTITY_CONTAINER_NAMESPACE);
        cr_expect_null(id.container);
        identity_done(&id);

        /* A Flatpak sandbox also has its own namespaces: an app, not a container.
         * .flatpak-info wins over the scope name. */
        put("4242/cgroup", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/"
                           "app-flatpak-org.spoofed.Name-9.scope\n");
        put("4242/rootfs/.flatpak-info", "[Instance]\ninstance-id=1\n[Application]\nname=org.example.Viewer\n"
                                         "runtime=runtime/org.gnome.Platform/x86_64/45\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, self_ns_root(), &id), 0);
        cr_expect_str_eq(id.app_id, "org.example.Viewer");
        cr_expect_eq(id.app_source, IDENTITY_APP_FLATPAK_INFO);
        cr_expect_not(id.in_container);
        cr_expect_str_eq(id.user_unit, "app-flatpak-org.spoofed.Name-9.scope");
        identity_done(&id);

        /* An unreadable root (the daemon lacks ptrace access): the scope decides. */
        put("4242/rootfs/.flatpak-info", "[Application]\nname=bad name!\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, self_ns_root(), &id), 0);
        cr_expect_str_eq(id.app_id, "org.spoofed.Name");
        cr_expect_eq(id.app_source, IDENTITY_APP_FLATPAK_SCOPE);
        identity_done(&id);
}

Test(identity, cgroup_file_variants, .init = make_tree, .fini = remove_tree) {
        Identity id;

        /* Hybrid hierarchy with an undelegated v2 root: name=systemd knows the unit. */
        put("4242/cgroup", "1:name=systemd:/system.slice/legacy.service\n0::/\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, NULL, &id), 0);
        cr_expect_str_eq(id.cgroup, "/system.slice/legacy.service");
        cr_expect_str_eq(id.unit, "legacy.service");
        identity_done(&id);

        /* Legacy only. */
        put("4242/cgroup", "3:memory:/x\n1:name=systemd:/system.slice/old.service\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, NULL, &id), 0);
        cr_expect_str_eq(id.unit, "old.service");
        identity_done(&id);

        /* A path with a colon stays whole. */
        put("4242/cgroup", "0::/system.slice/we:ird.service\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, NULL, &id), 0);
        cr_expect_str_eq(id.cgroup, "/system.slice/we:ird.service");
        cr_expect_str_eq(id.unit, "we:ird.service");
        identity_done(&id);

        /* No cgroup line at all: no cgroup, no unit, still an identity. */
        put("4242/cgroup", "garbage\n");
        cr_assert_eq(identity_read(root, 4242, -1, NULL, NULL, &id), 0);
        cr_expect_null(id.cgroup);
        cr_expect_null(id.unit);
        identity_done(&id);

        /* A relative path is not a cgroup path. */
        put("4242/cgroup", "0::system.slice\n");
        cr_expect_eq(identity_read(root, 4242, -1, NULL, NULL, &id), -EBADMSG);
}

Test(identity, bad_status, .init = make_tree, .fini = remove_tree) {
        Identity id;
        char *big;
        size_t pos;

        cr_expect_eq(identity_read(root, 999, -1, NULL, NULL, &id), -ESRCH);
        cr_expect_eq(identity_read(root, 0, -1, NULL, NULL, &id), -EINVAL);

        put("4242/status", "Uid:\t1000\t1000\t1000\t1000\nGid:\t1\t1\t1\t1\nGroups:\t12 x3\n");
        cr_expect_eq(identity_read(root, 4242, -1, NULL, NULL, &id), -EBADMSG);

        put("4242/status", "Name:\tx\n");
        cr_expect_eq(identity_read(root, 4242, -1, NULL, NULL, &id), -EBADMSG, "no Uid: line without cred");

        /* More groups than the kernel allows. */
        big = malloc(1024 * 1024);
        cr_assert_not_null(big);
        pos = (size_t) sprintf(big, "Uid:\t1\t1\t1\t1\nGid:\t1\t1\t1\t1\nGroups:\t");
        for (unsigned i = 0; i <= IDENTITY_MAX_GIDS; i++)
                pos += (size_t) sprintf(big + pos, "%u ", i % 100);
        strcpy(big + pos, "\n");
        put("4242/status", big);
        cr_expect_eq(identity_read(root, 4242, -1, NULL, NULL, &id), -E2BIG);

        /* Over the 1 MiB read bound. */
        memset(big, 'A', 1024 * 1024 - 1);
        big[1024 * 1024 - 1] = 0;
        put("4242/status", big);
        {
                char path[PATH_MAX + 32];
                FILE *f;

                snprintf(path, sizeof(path), "%s/4242/status", root);
                f = fopen(path, "a");
                fputs("more than a mebibyte", f);
                fclose(f);
        }
        cr_expect_eq(identity_read(root, 4242, -1, NULL, NULL, &id), -EFBIG);
        free(big);
}

static int my_pidfd_open(pid_t pid) {
        return (int) syscall(SYS_pidfd_open, pid, 0);
}

Test(identity, dead_pidfd_is_esrch, .init = make_tree, .fini = remove_tree) {
        Identity id;
        pid_t child;
        int pidfd, status;

        child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                pause();
                _exit(0);
        }
        pidfd = my_pidfd_open(child);
        cr_assert_geq(pidfd, 0, "pidfd_open: %s", strerror(errno));

        /* Alive: the fabricated tree is read and the pidfd check passes. */
        cr_expect_eq(identity_read(root, 4242, pidfd, NULL, NULL, &id), 0);
        identity_done(&id);

        cr_assert_eq(kill(child, SIGKILL), 0);
        cr_assert_eq(waitpid(child, &status, 0), child);

        /* Dead: whatever /proc said may describe a new owner of the pid. */
        cr_expect_eq(identity_read(root, 4242, pidfd, NULL, NULL, &id), -ESRCH);
        cr_expect_eq(identity_from_pidfd(pidfd, child, NULL, &id), -ESRCH);
        close(pidfd);
        cr_expect_eq(identity_from_pid(child, NULL, &id), -ESRCH);
}

/* ---- the test process itself ---- */

static void expect_self(const Identity *id) {
        char comm[64] = "";
        gid_t groups[256];
        int n;
        FILE *f = fopen("/proc/self/comm", "r");

        cr_assert_not_null(f);
        cr_assert_not_null(fgets(comm, sizeof(comm), f));
        fclose(f);
        comm[strcspn(comm, "\n")] = 0;

        cr_expect_eq(id->pid, getpid());
        cr_expect_eq(id->uid, getuid());
        cr_expect_eq(id->gid, getgid());
        cr_expect_str_eq(id->comm, comm);
        cr_expect_not_null(id->cgroup, "every process has a cgroup");
        cr_expect(id->cgroup && id->cgroup[0] == '/');
        cr_expect_not(id->other_pid_ns);
        cr_expect_not(id->other_mnt_ns);
        cr_expect_not(id->in_container);
        n = getgroups(256, groups);
        cr_assert_geq(n, 0);
        cr_expect_eq(id->n_gids, (size_t) n);
        for (int i = 0; i < n; i++)
                cr_expect(identity_has_gid(id, groups[i]), "missing supplementary group %u", groups[i]);
}

Test(identity, self_by_pid) {
        Identity id;

        cr_assert_eq(identity_from_pid(getpid(), NULL, &id), 0);
        expect_self(&id);
        identity_done(&id);
}

Test(identity, self_through_socket) {
        Identity id;
        int sv[2];

        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(identity_from_peer(sv[0], -1, false, &id), 0);
        expect_self(&id);
        identity_done(&id);
        close(sv[0]);
        close(sv[1]);

        cr_expect_eq(identity_from_peer(-1, -1, false, &id), -EBADF);
}

/* With the caller's fd table full, the peer's process cannot be pinned (no
 * pidfd): that is the caller's EMFILE, not the peer's exit (ESRCH, "the
 * process that made this connection has exited", was what a client heard
 * from a daemon at its fd limit). */
Test(identity, a_full_fd_table_is_emfile_not_a_gone_peer) {
        struct rlimit old, low;
        Identity id;
        int sv[2], probe;

        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        probe = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the lowest free fd: none below it */
        cr_assert_geq(probe, 0);
        close(probe);
        cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = (struct rlimit) { .rlim_cur = (rlim_t) probe, .rlim_max = old.rlim_max };
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        int r = identity_from_peer(sv[0], -1, false, &id);
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        cr_expect_eq(r, -EMFILE, "got %d (%s)", r, strerror(-r));
        if (r >= 0)
                identity_done(&id);
        close(sv[0]);
        close(sv[1]);
}

/* A connection's identity: uid, gid and groups always from its credentials;
 * the process's fields only through a pidfd naming a live process of that
 * pid (and, for a pidfd found by pid, running as the connection's uid). */
Test(identity, from_creds_pins_the_process) {
        gid_t conn_groups[] = { 4242, 7 };
        IdentityCreds c = { .uid = getuid(), .gid = 4242, .pid = getpid(), .gids = conn_groups, .n_gids = 2,
                            .have_gids = true };
        Identity id;
        pid_t child;
        int pidfd, status;

        /* Alive, exact: the process is read, the groups are the connection's. */
        pidfd = my_pidfd_open(getpid());
        cr_assert_geq(pidfd, 0);
        cr_assert_eq(identity_from_creds(&c, pidfd, false, &id), 0);
        cr_expect_not(id.process_unknown);
        cr_expect_not_null(id.cgroup);
        cr_expect_eq(id.process_euid, geteuid());
        cr_expect_eq(id.n_gids, 2);
        cr_expect(identity_has_gid(&id, 7));
        identity_done(&id);

        /* Found by pid, but the process there runs as another uid: not read. */
        c.uid = geteuid() + 1;
        cr_assert_eq(identity_from_creds(&c, pidfd, true, &id), 0);
        cr_expect(id.process_unknown);
        cr_expect_null(id.cgroup);
        cr_expect_eq(id.uid, c.uid);
        identity_done(&id);
        c.uid = geteuid();
        close(pidfd);

        /* No pidfd: unknown; groups still the connection's. */
        cr_assert_eq(identity_from_creds(&c, -1, false, &id), 0);
        cr_expect(id.process_unknown);
        cr_expect_null(id.unit);
        cr_expect_str_eq(id.comm, "");
        cr_expect(identity_has_gid(&id, 7));
        cr_expect_eq(id.pid, getpid());
        identity_done(&id);

        /* The process that connected is gone: unknown, not refused. */
        child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                pause();
                _exit(0);
        }
        pidfd = my_pidfd_open(child);
        cr_assert_geq(pidfd, 0);
        cr_assert_eq(kill(child, SIGKILL), 0);
        cr_assert_eq(waitpid(child, &status, 0), child);
        c.pid = child;
        c.have_gids = false;
        cr_assert_eq(identity_from_creds(&c, pidfd, false, &id), 0);
        cr_expect(id.process_unknown);
        cr_expect_eq(id.n_gids, 0, "groups neither told nor readable");
        cr_expect_eq(id.gid, 4242);
        identity_done(&id);
        close(pidfd);
}

/* What kfdbrokerd sees as an unprivileged user reading another user's client:
 * signal 0 through the pidfd is EPERM (alive, not ours), the namespace links
 * and the root are unreadable, status and cgroup are readable. Needs root to
 * drop to nobody. */
Test(identity, unprivileged_reader_of_other_user) {
        int pipefd[2], status;
        pid_t child, me = getpid();
        char buf[256] = "";
        ssize_t n;

        if (getuid() != 0)
                cr_skip_test("needs root to run a reader as nobody");
        cr_assert_eq(pipe(pipefd), 0);
        child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                Identity id;
                int r;

                close(pipefd[0]);
                if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(2);
                r = identity_from_pid(me, NULL, &id);
                if (r < 0)
                        dprintf(pipefd[1], "error %d", r);
                else
                        dprintf(pipefd[1], "uid %u pidns %d mntns %d container %d cgroup %s", (unsigned) id.uid,
                                id.other_pid_ns, id.other_mnt_ns, id.in_container, id.cgroup ? "yes" : "no");
                _exit(0);
        }
        close(pipefd[1]);
        n = read(pipefd[0], buf, sizeof(buf) - 1);
        close(pipefd[0]);
        cr_assert_eq(waitpid(child, &status, 0), child);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child could not drop privileges");
        cr_assert_gt(n, 0);
        cr_expect_str_eq(buf, "uid 0 pidns 0 mntns 0 container 0 cgroup yes");
}

/* Recorded /proc/PID/cgroup contents of containers (docker, rootless podman,
 * containerd and CRI-O under Kubernetes with the systemd and the cgroupfs
 * cgroup drivers): the container's full id and a pod's UID are found, so that
 * Container= can match them (policy.c) and `kfdbrokerctl sessions` show them. */
#define POD_UID "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
#define POD_UID_UNDERSCORED "0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0"

Test(identity, container_ids_and_kubernetes_pods, .init = make_tree, .fini = remove_tree) {
        static const struct {
                const char *cgroup_file;
                const char *container, *container_id, *pod_uid;
                IdentityContainerSource source;
        } cases[] = {
                { "0::/system.slice/docker-" HEX64 ".scope\n", "0123456789ab", HEX64, NULL,
                  IDENTITY_CONTAINER_DOCKER },
                { "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" HEX64 ".scope/container\n",
                  "0123456789ab", HEX64, NULL, IDENTITY_CONTAINER_PODMAN },
                /* kubelet with the systemd driver, containerd */
                { "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_UID_UNDERSCORED
                  ".slice/cri-containerd-" HEX64 ".scope\n",
                  "0123456789ab", HEX64, POD_UID, IDENTITY_CONTAINER_CRI },
                /* a guaranteed pod (no QoS slice), CRI-O */
                { "0::/kubepods.slice/kubepods-pod" POD_UID_UNDERSCORED ".slice/crio-" HEX64 ".scope\n",
                  "0123456789ab", HEX64, POD_UID, IDENTITY_CONTAINER_CRI },
                /* kubelet with the cgroupfs driver on a v1 host: the container is its bare id */
                { "12:pids:/kubepods/besteffort/pod" POD_UID "/" HEX64 "\n"
                  "1:name=systemd:/kubepods/besteffort/pod" POD_UID "/" HEX64 "\n0::/\n",
                  "0123456789ab", HEX64, POD_UID, IDENTITY_CONTAINER_CRI },
                /* Not a pod UID: no pod, and a bare id outside a pod is no container. */
                { "0::/kubepods.slice/kubepods-podnot_a_uid.slice/x.scope\n", NULL, NULL, NULL, 0 },
                { "0::/system.slice/" HEX64 "\n", NULL, NULL, NULL, 0 },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                Identity id;

                put("4242/cgroup", cases[i].cgroup_file);
                cr_assert_eq(identity_read(root, 4242, -1, NULL, NULL, &id), 0, "%s", cases[i].cgroup_file);
                check_str("container", cases[i].cgroup_file, id.container, cases[i].container);
                check_str("container_id", cases[i].cgroup_file, id.container_id, cases[i].container_id);
                check_str("pod_uid", cases[i].cgroup_file, id.pod_uid, cases[i].pod_uid);
                cr_expect_eq(id.container_source, cases[i].source, "%s: %s", cases[i].cgroup_file,
                             identity_container_source_to_string(id.container_source));
                identity_done(&id);
        }
}
