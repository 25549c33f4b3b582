/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerd: parses the command line, sets up logging, makes the Manager
 * and runs it. Everything else lives in the daemon library.
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "manager/daemon-config.h"
#include "manager/manager.h"
#include "util/macro.h"
#include "util/log.h"
#include "worker/worker.h"

/* Every client buffer of the simulated GPU and every connection holds fds, so
 * the soft RLIMIT_NOFILE of 1024 that systemd and shells hand out is far too
 * low; raise it to the hard limit (systemd's default hard limit is 524288,
 * meant for exactly this: see systemd.exec(5), LimitNOFILE=). select() is not
 * used anywhere, so large fd numbers are safe. */
static void raise_fd_limit(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warning_errno(errno, "Cannot raise the open file limit to %llu: %m",
                                  (unsigned long long) rl.rlim_max);
}

static void help(void) {
        printf("Usage: kfdbrokerd [OPTIONS]\n"
               "Share an AMD GPU's /dev/kfd with unprivileged clients.\n\n"
               "  -h --help               Show this help\n"
               "     --version            Show the version\n"
               "     --device=DEVICE      auto (default), kfd or sim (the simulated GPU)\n"
               "     --listen=PATH        Listen on PATH instead of a socket-activated socket\n"
               "     --sdma-queues=N      SDMA queues to create (default 2)\n"
               "     --bus=BUS            none (default), system or session: serve the D-Bus API\n"
               "     --policy-dir=DIR     Read policy from DIR (repeatable, most important first;\n"
               "                          default /etc, /run and /usr/share kfdbroker/policy.d)\n"
               "     --metrics-file=PATH  Rewrite OpenMetrics text to PATH periodically\n"
               "     --metrics-interval=SEC  How often (default 15)\n"
               "     --metrics-file-mode=MODE  Its permissions, octal, within 0644 (default 0600)\n"
               "     --max-connections-per-user=N  Refuse a user's connections beyond N\n"
               "                          (default 32; 0 = no limit)\n"
               "     --max-connect-rate-per-user=N  Take at most N connections a second from\n"
               "                          one user; more wait their turn (default 1000; 0 = no limit)\n"
               "     --max-fds-per-user=N  File descriptors the daemon may hold for one user's\n"
               "                          sessions (default: half of what the open file limit\n"
               "                          leaves after a reserve; infinity = no limit)\n"
               "     --max-fds-per-session=N  File descriptors the daemon may hold for one\n"
               "                          session (default: half of the per-user budget, at\n"
               "                          least 16; infinity = no limit)\n"
               "     --contexts=MODE      How clients get GPU contexts of their own: auto\n"
               "                          (default: kernel, else process, else shared), kernel\n"
               "                          (secondary KFD contexts, KFD 1.19), process (a worker\n"
               "                          process each) or shared (none)\n"
               "     --worker-user=USER   The user worker processes of a root daemon run as\n"
               "                          (default kfdbroker, else a free uid in 61184..65519)\n"
               "     --max-contexts=N     Client GPU contexts alive at once (default 64)\n"
               "     --context-idle=SEC   Give up a client GPU context idle this long (default 30)\n"
               "     --gpu=GPUS           Which GPUs: auto (default: every discrete one, the\n"
               "                          integrated ones where there is none), all, or a list\n"
               "                          of KFD node ids (2), PCI addresses (0000:03:00.0) or\n"
               "                          render nodes (renderD128)\n"
               "     --sim-kfd-version=1.N  The KFD version the simulated GPU's kernel\n"
               "                          speaks, 1.11..1.19 (default 1.19; with --device=sim)\n"
               "     --sim-gpus=N         The simulated machine's discrete GPUs, 1..8 (default 1;\n"
               "                          with --device=sim; the daemon serves each: --gpu=)\n"
               "     --sim-topology=T     dgpu (default) or igpu-first: an integrated GPU listed\n"
               "                          before the simulated one (with --device=sim)\n"
               "     --sim-fault-order=O  fence-first (default: a faulting job's fence may land\n"
               "                          before the MEMORY event) or event-first (with --device=sim)\n"
               "     --log-level=LEVEL    debug, info (default), notice, warning, err\n"
               "     --log-target=TARGET  auto (default), journal or stderr\n"
               "     --config=PATH        Read only this configuration file\n"
               "     --no-config          Read no configuration file\n"
               "     --config-root=DIR    Look for the configuration files under DIR\n"
               "     --show-config        Print the settings and where each comes from, and exit\n\n"
               "Settings are read from " DAEMON_CONFIG_ETC " (or\n"
               DAEMON_CONFIG_RUN ", else " DAEMON_CONFIG_VENDOR "),\n"
               "then kfdbrokerd.conf.d/*.conf drop-ins; the command line overrides them.\n"
               "See kfdbrokerd(8).\n");
}

/* A long option that is also a configuration key: its DaemonKey and value,
 * kept until the files are read, since the command line overrides them. */
typedef struct CommandLineSetting {
        DaemonKey key;
        const char *value;
} CommandLineSetting;

int main(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_CONFIG, ARG_NO_CONFIG, ARG_CONFIG_ROOT, ARG_SHOW_CONFIG,
               ARG_KEY_FIRST = 0x200 }; /* ARG_KEY_FIRST + DaemonKey */
        static const struct option fixed[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "config", required_argument, NULL, ARG_CONFIG },
                { "no-config", no_argument, NULL, ARG_NO_CONFIG },
                { "config-root", required_argument, NULL, ARG_CONFIG_ROOT },
                { "show-config", no_argument, NULL, ARG_SHOW_CONFIG },
        };
        struct option options[ELEMENTSOF(fixed) + _DAEMON_KEY_MAX + 1] = {};
        _cleanup_free_ CommandLineSetting *cmdline = NULL;
        const char *config_path = NULL, *config_root = NULL;
        bool no_config = false, show_config = false;
        size_t n_cmdline = 0;
        DaemonConfig cfg;
        Manager *m = NULL;
        char err[1024];
        int c, r;

        /* A worker process (context-worker.c starts them): its own program. */
        if (argc > 1 && strcmp(argv[1], "--worker") == 0)
                return worker_main(argc, argv);

        memcpy(options, fixed, sizeof(fixed));
        for (int k = 0; k < _DAEMON_KEY_MAX; k++)
                options[ELEMENTSOF(fixed) + k] = (struct option) { daemon_key_to_string((DaemonKey) k),
                                                                   required_argument, NULL, ARG_KEY_FIRST + k };
        cmdline = calloc((size_t) argc, sizeof(CommandLineSetting));
        if (!cmdline)
                return EXIT_FAILURE;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return EXIT_SUCCESS;
                case ARG_VERSION:
                        printf("kfdbrokerd %s\n", KFDBROKER_VERSION);
                        return EXIT_SUCCESS;
                case ARG_CONFIG:
                        config_path = optarg;
                        break;
                case ARG_NO_CONFIG:
                        no_config = true;
                        break;
                case ARG_CONFIG_ROOT:
                        config_root = optarg;
                        break;
                case ARG_SHOW_CONFIG:
                        show_config = true;
                        break;
                default:
                        if (c < ARG_KEY_FIRST || c >= ARG_KEY_FIRST + _DAEMON_KEY_MAX)
                                return EXIT_FAILURE;
                        cmdline[n_cmdline++] = (CommandLineSetting) { (DaemonKey) (c - ARG_KEY_FIRST), optarg };
                        break;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "kfdbrokerd: unexpected argument '%s'\n", argv[optind]);
                return EXIT_FAILURE;
        }
        if (no_config && (config_path || config_root)) {
                fprintf(stderr, "kfdbrokerd: --no-config cannot be combined with --config= or --config-root=\n");
                return EXIT_FAILURE;
        }

        daemon_config_init(&cfg);
        /* The files first, then the command line over them. A bad value is
         * fatal wherever it is written: a limit that silently fell back to
         * its default would be worse than a daemon that says why it stopped. */
        err[0] = 0;
        r = 0;
        if (config_path)
                r = daemon_config_load_file(&cfg, config_path, err, sizeof(err));
        else if (!no_config)
                r = daemon_config_load(&cfg, config_root, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "kfdbrokerd: %s\n", err[0] ? err : strerror(-r));
                daemon_config_done(&cfg);
                return EXIT_FAILURE;
        }
        for (size_t i = 0; i < n_cmdline; i++) {
                r = daemon_config_set(&cfg, cmdline[i].key, cmdline[i].value, NULL, 0, err, sizeof(err));
                if (r < 0) {
                        fprintf(stderr, "kfdbrokerd: --%s: %s\n", daemon_key_to_string(cmdline[i].key),
                                r == -ENOMEM ? strerror(ENOMEM) : err);
                        daemon_config_done(&cfg);
                        return EXIT_FAILURE;
                }
        }
        if (show_config) {
                for (size_t i = 0; i < cfg.n_warnings; i++)
                        fprintf(stderr, "kfdbrokerd: warning: %s\n", cfg.warnings[i]);
                daemon_config_show(&cfg, stdout);
                daemon_config_done(&cfg);
                return EXIT_SUCCESS;
        }

        if (cfg.log_level >= 0)
                log_set_max_level(cfg.log_level);
        log_setup(cfg.log_target);
        for (size_t i = 0; i < cfg.n_files; i++)
                log_debug("Read configuration from %s", cfg.files[i]);
        for (size_t i = 0; i < cfg.n_warnings; i++)
                log_warning("Configuration: %s", cfg.warnings[i]);
        raise_fd_limit();

        r = manager_new(&cfg.opts, &m);
        if (r >= 0) {
                r = manager_run(m);
                manager_free(m);
                log_info("Stopped");
        }
        daemon_config_done(&cfg);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
