/* SPDX-License-Identifier: MIT */
/*
 * Tests of daemon/manager/daemon-config.c, kfdbrokerd.conf: every value and
 * where it came from after the built-in defaults, the main file (the first
 * of /etc, /run and the vendor directory), the drop-ins (sorted by name over
 * the three directories, /etc's name hiding /run's hiding the vendor's,
 * /dev/null masking) and the command line; unknown keys and sections are
 * warnings with FILE:LINE, bad values and broken lines errors with
 * FILE:LINE and the key.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "manager/daemon-config.h"
#include "test-fini.h"

static char root[PATH_MAX];

static void make_root(void) {
        snprintf(root, sizeof(root), "/tmp/kfdb-config-XXXXXX");
        cr_assert_not_null(mkdtemp(root));
}

static void remove_root(void) {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        test_fini_end();
}

/* Writes root/rel (making its directories); returns the full path. */
static const char *put(const char *rel, const char *content) {
        static char path[PATH_MAX * 2];
        char cmd[PATH_MAX * 3];
        FILE *f;

        snprintf(path, sizeof(path), "%s%s", root, rel);
        snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
        cr_assert_eq(system(cmd), 0);
        f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(content, f);
        fclose(f);
        return path;
}

static char *where(const DaemonConfig *c, DaemonKey k) {
        static char buf[PATH_MAX * 2];
        const DaemonSetting *s = &c->settings[k];

        if (s->source == DAEMON_SOURCE_DEFAULT)
                return strcpy(buf, "default");
        if (s->source == DAEMON_SOURCE_COMMAND_LINE)
                return strcpy(buf, "command line");
        cr_assert(strncmp(s->file, root, strlen(root)) == 0, "%s", s->file);
        snprintf(buf, sizeof(buf), "%s:%u", s->file + strlen(root), s->line);
        return buf;
}

Test(daemon_config, defaults) {
        DaemonConfig c;

        daemon_config_init(&c);
        cr_expect_eq(c.opts.device, DEVICE_AUTO);
        cr_expect_eq(c.opts.bus, BUS_NONE);
        cr_expect_eq(c.opts.max_connections_per_user, 32);
        cr_expect_eq(c.opts.metrics_file_mode, 0600);
        cr_expect_null(c.opts.policy_dirs);
        cr_expect_eq(c.log_level, -1);
        for (int k = 0; k < _DAEMON_KEY_MAX; k++) {
                cr_expect_eq(c.settings[k].source, DAEMON_SOURCE_DEFAULT);
                cr_expect_eq(daemon_key_from_string(daemon_key_to_string((DaemonKey) k)), k);
        }
        cr_expect_eq(daemon_key_from_string("Device"), -ENOENT);
        cr_expect_eq(daemon_key_from_string("help"), -ENOENT);
        daemon_config_done(&c);
}

Test(daemon_config, precedence, .init = make_root, .fini = remove_root) {
        char err[1024] = "";
        DaemonConfig c;

        put(KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf", "# vendor\n[Daemon]\ndevice=kfd\nbus=system\ngpu=1\n");
        put(KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf.d/10-vendor.conf", "[Daemon]\nmax-contexts=10\nsdma-queues=3\n");
        put(KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf.d/50-both.conf", "[Daemon]\nmax-contexts=50\n");
        put("/etc/kfdbroker/kfdbrokerd.conf.d/50-both.conf", "[Daemon]\n\n  gpu = 2  \n");
        put("/run/kfdbroker/kfdbrokerd.conf.d/60-run.conf", "[Daemon]\nsdma-queues=4\nmetrics-file=/run/m.prom\n");
        put("/etc/kfdbroker/kfdbrokerd.conf.d/70-undo.conf", "[Daemon]\nmetrics-file=\n");

        daemon_config_init(&c);
        cr_assert_eq(daemon_config_load(&c, root, err, sizeof(err)), 0, "%s", err);
        /* The vendor main file, under the drop-ins. */
        cr_expect_eq(c.opts.device, DEVICE_KFD);
        cr_expect_str_eq(where(&c, DAEMON_KEY_DEVICE), KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf:3");
        cr_expect_eq(c.opts.bus, BUS_SYSTEM);
        /* /etc's 50-both.conf hides the vendor's, so max-contexts stays 10. */
        cr_expect_str_eq(c.opts.gpu, "2");
        cr_expect_str_eq(where(&c, DAEMON_KEY_GPU), "/etc/kfdbroker/kfdbrokerd.conf.d/50-both.conf:3");
        cr_expect_eq(c.opts.max_contexts, 10);
        cr_expect_str_eq(where(&c, DAEMON_KEY_MAX_CONTEXTS), KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf.d/10-vendor.conf:2");
        /* Sorted by name over the directories: /run's 60 after the vendor's 10. */
        cr_expect_eq(c.opts.sdma_queues, 4);
        cr_expect_str_eq(where(&c, DAEMON_KEY_SDMA_QUEUES), "/run/kfdbroker/kfdbrokerd.conf.d/60-run.conf:2");
        /* An empty value puts the default back. */
        cr_expect_null(c.opts.metrics_file);
        cr_expect_str_eq(where(&c, DAEMON_KEY_METRICS_FILE), "default");
        cr_expect_eq(c.n_files, 5);
        cr_expect_eq(c.n_warnings, 0);

        /* The command line over everything. */
        cr_assert_eq(daemon_config_set(&c, DAEMON_KEY_BUS, "none", NULL, 0, err, sizeof(err)), 0);
        cr_expect_eq(c.opts.bus, BUS_NONE);
        cr_expect_str_eq(where(&c, DAEMON_KEY_BUS), "command line");
        cr_expect_eq(daemon_config_set(&c, DAEMON_KEY_BUS, "dbus", NULL, 0, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "expected none, system or session, got 'dbus'");
        cr_expect_eq(c.opts.bus, BUS_NONE);
        /* The simulator's fault order (docs/simulator.md "Fault order"). */
        cr_expect_eq(c.opts.sim_fault_order, SIM_FAULT_ORDER_DEFAULT, "fence-first unless set");
        cr_assert_eq(daemon_config_set(&c, DAEMON_KEY_SIM_FAULT_ORDER, "event-first", NULL, 0, err, sizeof(err)), 0);
        cr_expect_eq(c.opts.sim_fault_order, SIM_FAULT_ORDER_EVENT_FIRST);
        cr_expect_eq(daemon_config_set(&c, DAEMON_KEY_SIM_FAULT_ORDER, "fence-last", NULL, 0, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "expected fence-first or event-first, got 'fence-last'");
        cr_expect_eq(c.opts.sim_fault_order, SIM_FAULT_ORDER_EVENT_FIRST, "a bad value changes nothing");
        cr_assert_eq(daemon_config_set(&c, DAEMON_KEY_SIM_FAULT_ORDER, "fence-first", NULL, 0, err, sizeof(err)), 0);
        cr_expect_eq(c.opts.sim_fault_order, SIM_FAULT_ORDER_FENCE_FIRST);
        daemon_config_done(&c);

        /* /etc's main file replaces the vendor's whole; /run's is between. */
        put("/run/kfdbroker/kfdbrokerd.conf", "[Daemon]\ndevice=sim\n");
        daemon_config_init(&c);
        cr_assert_eq(daemon_config_load(&c, root, err, sizeof(err)), 0, "%s", err);
        cr_expect_eq(c.opts.device, DEVICE_SIM);
        cr_expect_eq(c.opts.bus, BUS_NONE);
        cr_expect_str_eq(where(&c, DAEMON_KEY_BUS), "default");
        daemon_config_done(&c);
        put("/etc/kfdbroker/kfdbrokerd.conf", "[Daemon]\nbus=session\n");
        daemon_config_init(&c);
        cr_assert_eq(daemon_config_load(&c, root, err, sizeof(err)), 0, "%s", err);
        cr_expect_eq(c.opts.device, DEVICE_AUTO);
        cr_expect_eq(c.opts.bus, BUS_SESSION);
        cr_expect_str_eq(where(&c, DAEMON_KEY_BUS), "/etc/kfdbroker/kfdbrokerd.conf:2");
        daemon_config_done(&c);
}

Test(daemon_config, masking_and_policy_dirs, .init = make_root, .fini = remove_root) {
        char err[1024] = "", path[PATH_MAX * 2];
        DaemonConfig c;

        put(KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf.d/20-limits.conf", "[Daemon]\nmax-fds-per-user=100\n");
        put(KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf.d/30-policy.conf",
            "[Daemon]\npolicy-dir=/a\npolicy-dir=/b\n");
        put("/etc/kfdbroker/kfdbrokerd.conf.d/README", "not a drop-in\n");
        put("/etc/kfdbroker/kfdbrokerd.conf.d/.hidden.conf", "garbage\n");
        snprintf(path, sizeof(path), "%s/etc/kfdbroker/kfdbrokerd.conf.d/20-limits.conf", root);
        cr_assert_eq(symlink("/dev/null", path), 0);

        daemon_config_init(&c);
        cr_assert_eq(daemon_config_load(&c, root, err, sizeof(err)), 0, "%s", err);
        cr_expect_eq(c.opts.max_fds_per_user, 0); /* masked: still derived */
        cr_expect_eq(c.n_policy_dirs, 2);
        cr_expect_str_eq(c.opts.policy_dirs[0], "/a");
        cr_expect_str_eq(c.opts.policy_dirs[1], "/b");
        cr_expect_null(c.opts.policy_dirs[2]);
        cr_expect_eq(c.policy_dir_settings[1].line, 3);
        /* The command line's list replaces the files'. */
        cr_assert_eq(daemon_config_set(&c, DAEMON_KEY_POLICY_DIR, "/c", NULL, 0, err, sizeof(err)), 0);
        cr_assert_eq(daemon_config_set(&c, DAEMON_KEY_POLICY_DIR, "/d", NULL, 0, err, sizeof(err)), 0);
        cr_expect_eq(c.n_policy_dirs, 2);
        cr_expect_str_eq(c.opts.policy_dirs[0], "/c");
        cr_expect_str_eq(c.opts.policy_dirs[1], "/d");
        cr_expect_eq(c.policy_dir_settings[0].source, DAEMON_SOURCE_COMMAND_LINE);
        daemon_config_done(&c);
}

/* The message for text as file F; "" if it loaded. */
static const char *load_text(DaemonConfig *c, const char *text, int want) {
        static char err[1024];

        err[0] = 0;
        daemon_config_init(c);
        cr_expect_eq(daemon_config_load_text(c, "/etc/kfdbroker/kfdbrokerd.conf", text, strlen(text), err,
                                             sizeof(err)), want, "%s", text);
        return err;
}

#define F "/etc/kfdbroker/kfdbrokerd.conf"

Test(daemon_config, bad_lines_and_values) {
        DaemonConfig c;

        cr_expect_str_eq(load_text(&c, "[Daemon]\nmax-fds-per-user=lots\n", -EINVAL),
                         F ":2: max-fds-per-user=: expected a number of file descriptors (at least 1) or infinity, got 'lots'");
        daemon_config_done(&c);
        cr_expect_str_eq(load_text(&c, "[Daemon]\ndevice=gpu\n", -EINVAL),
                         F ":2: device=: expected auto, kfd or sim, got 'gpu'");
        daemon_config_done(&c);
        cr_expect_str_eq(load_text(&c, "[Daemon]\nmetrics-file-mode=0666\n", -EINVAL),
                         F ":2: metrics-file-mode=: expected an octal mode within 0644 (e.g. 0600, 0640, 0644), got '0666'");
        daemon_config_done(&c);
        cr_expect_str_eq(load_text(&c, "[Daemon]\nsdma-queues=0\n", -EINVAL),
                         F ":2: sdma-queues=: expected 1..8, got '0'");
        daemon_config_done(&c);
        cr_expect_str_eq(load_text(&c, "[Daemon\n", -EINVAL), F ":1: invalid section header \"[Daemon\"");
        daemon_config_done(&c);
        cr_expect_str_eq(load_text(&c, "[Daemon]\ngpu 2\n", -EINVAL),
                         F ":2: expected KEY=VALUE or [Section], got \"gpu 2\"");
        daemon_config_done(&c);
        {
                static const char nul[] = "[Daemon]\ngpu=1\0x\n";
                char err[256];

                daemon_config_init(&c);
                cr_expect_eq(daemon_config_load_text(&c, F, nul, sizeof(nul) - 1, err, sizeof(err)), -EINVAL);
                cr_expect_str_eq(err, F ": NUL byte in file");
                daemon_config_done(&c);
        }
}

Test(daemon_config, unknown_keys_warn) {
        DaemonConfig c;

        cr_expect_str_eq(load_text(&c,
                                   "max-contexts=3\n"
                                   "[Daemon]\n"
                                   "Device=kfd\n"
                                   "max-contexts=5\n"
                                   "; a comment\n"
                                   "[Service]\n"
                                   "max-contexts=7\n"
                                   "[Daemon]\n"
                                   "help=yes\n",
                                   0),
                         "");
        cr_expect_eq(c.opts.max_contexts, 5);
        cr_expect_eq(c.opts.device, DEVICE_AUTO);
        cr_assert_eq(c.n_warnings, 4);
        cr_expect_str_eq(c.warnings[0], F ":1: max-contexts= outside of a section, ignoring it (start with [Daemon])");
        cr_expect_str_eq(c.warnings[1], F ":3: unknown key \"Device\" in [Daemon], ignoring it");
        cr_expect_str_eq(c.warnings[2], F ":6: unknown section [Service], ignoring it");
        cr_expect_str_eq(c.warnings[3], F ":9: unknown key \"help\" in [Daemon], ignoring it");
        daemon_config_done(&c);
}

Test(daemon_config, hostile_sizes) {
        size_t n = DAEMON_CONFIG_FILE_MAX + 1;
        char *text = malloc(n + 1);
        char err[256];
        DaemonConfig c;

        cr_assert_not_null(text);
        memset(text, '#', n);
        text[n] = 0;
        daemon_config_init(&c);
        cr_expect_eq(daemon_config_load_text(&c, "big.conf", text, n, err, sizeof(err)), -EFBIG);
        cr_expect_str_eq(err, "big.conf: file is larger than 65536 bytes");
        text[DAEMON_CONFIG_LINE_MAX + 1] = '\n';
        cr_expect_eq(daemon_config_load_text(&c, "long.conf", text, DAEMON_CONFIG_LINE_MAX + 2, err, sizeof(err)),
                     -EFBIG);
        cr_expect_str_eq(err, "long.conf:1: line longer than 4096 bytes");
        daemon_config_done(&c);
        free(text);
}
