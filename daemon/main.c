/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerd: parses the command line, sets up logging, makes the Manager
 * and runs it. Everything else lives in the daemon library.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "manager/manager.h"
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

/* N (at least min) or "infinity" for a --max-fds-per-* option. */
static int parse_fd_budget(const char *option, const char *arg, uint64_t min, uint64_t *ret) {
        unsigned long long v;
        char *end;

        if (strcmp(arg, "infinity") == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        errno = 0;
        v = strtoull(arg, &end, 10);
        if (*end || end == arg || arg[0] == '-' || errno != 0 || v < min || v == ULLONG_MAX) {
                fprintf(stderr, "kfdbrokerd: %s: expected a number of file descriptors (at least %" PRIu64 ") or infinity, got '%s'\n",
                        option, min, arg);
                return -EINVAL;
        }
        *ret = (uint64_t) v;
        return 0;
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
               "     --gpu=GPU            Which GPU: auto (default: a discrete one before an\n"
               "                          integrated one), a KFD node id (2), a PCI address\n"
               "                          (0000:03:00.0) or a render node (renderD128)\n"
               "     --sim-kfd-version=1.N  The KFD version the simulated GPU's kernel\n"
               "                          speaks, 1.11..1.19 (default 1.19; with --device=sim)\n"
               "     --sim-topology=T     dgpu (default) or igpu-first: an integrated GPU listed\n"
               "                          before the simulated one (with --device=sim)\n"
               "     --log-level=LEVEL    debug, info (default), notice, warning, err\n"
               "     --log-target=TARGET  auto (default), journal or stderr\n\n"
               "See kfdbrokerd(8).\n");
}

int main(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_DEVICE, ARG_LISTEN, ARG_SDMA_QUEUES, ARG_LOG_LEVEL, ARG_LOG_TARGET,
               ARG_BUS, ARG_POLICY_DIR, ARG_METRICS_FILE, ARG_METRICS_INTERVAL,
               ARG_MAX_CONNECTIONS, ARG_MAX_CONNECT_RATE, ARG_CONTEXTS, ARG_MAX_CONTEXTS, ARG_CONTEXT_IDLE, ARG_SIM_KFD_VERSION,
               ARG_WORKER_USER, ARG_GPU, ARG_SIM_TOPOLOGY, ARG_METRICS_FILE_MODE, ARG_MAX_FDS,
               ARG_MAX_SESSION_FDS };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "device", required_argument, NULL, ARG_DEVICE },
                { "listen", required_argument, NULL, ARG_LISTEN },
                { "sdma-queues", required_argument, NULL, ARG_SDMA_QUEUES },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                { "log-target", required_argument, NULL, ARG_LOG_TARGET },
                { "bus", required_argument, NULL, ARG_BUS },
                { "policy-dir", required_argument, NULL, ARG_POLICY_DIR },
                { "metrics-file", required_argument, NULL, ARG_METRICS_FILE },
                { "metrics-interval", required_argument, NULL, ARG_METRICS_INTERVAL },
                { "metrics-file-mode", required_argument, NULL, ARG_METRICS_FILE_MODE },
                { "max-connections-per-user", required_argument, NULL, ARG_MAX_CONNECTIONS },
                { "max-connect-rate-per-user", required_argument, NULL, ARG_MAX_CONNECT_RATE },
                { "max-fds-per-user", required_argument, NULL, ARG_MAX_FDS },
                { "max-fds-per-session", required_argument, NULL, ARG_MAX_SESSION_FDS },
                { "contexts", required_argument, NULL, ARG_CONTEXTS },
                { "max-contexts", required_argument, NULL, ARG_MAX_CONTEXTS },
                { "context-idle", required_argument, NULL, ARG_CONTEXT_IDLE },
                { "sim-kfd-version", required_argument, NULL, ARG_SIM_KFD_VERSION },
                { "worker-user", required_argument, NULL, ARG_WORKER_USER },
                { "gpu", required_argument, NULL, ARG_GPU },
                { "sim-topology", required_argument, NULL, ARG_SIM_TOPOLOGY },
                {},
        };
        ManagerOptions opts = { .device = DEVICE_AUTO, .bus = BUS_NONE,
                                .max_connections_per_user = 32, .max_connect_rate_per_user = 1000,
                                .metrics_file_mode = 0600 };
        const char *policy_dirs[17] = {};
        unsigned n_policy_dirs = 0;
        LogTarget target = LOG_TARGET_AUTO;
        Manager *m = NULL;
        int c, r;

        /* A worker process (context-worker.c starts them): its own program. */
        if (argc > 1 && strcmp(argv[1], "--worker") == 0)
                return worker_main(argc, argv);

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return EXIT_SUCCESS;
                case ARG_VERSION:
                        printf("kfdbrokerd %s\n", KFDBROKER_VERSION);
                        return EXIT_SUCCESS;
                case ARG_DEVICE:
                        if (strcmp(optarg, "auto") == 0)
                                opts.device = DEVICE_AUTO;
                        else if (strcmp(optarg, "kfd") == 0)
                                opts.device = DEVICE_KFD;
                        else if (strcmp(optarg, "sim") == 0)
                                opts.device = DEVICE_SIM;
                        else {
                                fprintf(stderr, "kfdbrokerd: --device: expected auto, kfd or sim, got '%s'\n", optarg);
                                return EXIT_FAILURE;
                        }
                        break;
                case ARG_LISTEN:
                        opts.listen_path = optarg;
                        break;
                case ARG_SDMA_QUEUES: {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (*end || end == optarg || v < 1 || v > GPU_MAX_QUEUES) {
                                fprintf(stderr, "kfdbrokerd: --sdma-queues: expected 1..%d, got '%s'\n",
                                        GPU_MAX_QUEUES, optarg);
                                return EXIT_FAILURE;
                        }
                        opts.sdma_queues = (unsigned) v;
                        break;
                }
                case ARG_LOG_LEVEL:
                        r = log_level_from_string(optarg);
                        if (r < 0) {
                                fprintf(stderr, "kfdbrokerd: --log-level: unknown level '%s'\n", optarg);
                                return EXIT_FAILURE;
                        }
                        log_set_max_level(r);
                        break;
                case ARG_LOG_TARGET:
                        if (strcmp(optarg, "auto") == 0)
                                target = LOG_TARGET_AUTO;
                        else if (strcmp(optarg, "journal") == 0)
                                target = LOG_TARGET_JOURNAL;
                        else if (strcmp(optarg, "stderr") == 0)
                                target = LOG_TARGET_STDERR;
                        else {
                                fprintf(stderr, "kfdbrokerd: --log-target: expected auto, journal or stderr, got '%s'\n", optarg);
                                return EXIT_FAILURE;
                        }
                        break;
                case ARG_BUS:
                        if (strcmp(optarg, "none") == 0)
                                opts.bus = BUS_NONE;
                        else if (strcmp(optarg, "system") == 0)
                                opts.bus = BUS_SYSTEM;
                        else if (strcmp(optarg, "session") == 0)
                                opts.bus = BUS_SESSION;
                        else {
                                fprintf(stderr, "kfdbrokerd: --bus: expected none, system or session, got '%s'\n", optarg);
                                return EXIT_FAILURE;
                        }
                        break;
                case ARG_POLICY_DIR:
                        if (n_policy_dirs >= 16) {
                                fprintf(stderr, "kfdbrokerd: --policy-dir: at most 16 directories\n");
                                return EXIT_FAILURE;
                        }
                        policy_dirs[n_policy_dirs++] = optarg;
                        opts.policy_dirs = policy_dirs;
                        break;
                case ARG_METRICS_FILE:
                        opts.metrics_file = optarg;
                        break;
                case ARG_METRICS_INTERVAL: {
                        char *end;
                        double v = strtod(optarg, &end);
                        if (*end || end == optarg || !(v >= 0.1 && v <= 86400)) {
                                fprintf(stderr, "kfdbrokerd: --metrics-interval: expected seconds in 0.1..86400, got '%s'\n", optarg);
                                return EXIT_FAILURE;
                        }
                        opts.metrics_interval_ns = (uint64_t) (v * 1e9);
                        break;
                }
                case ARG_METRICS_FILE_MODE: {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 8);
                        /* Read access for group and others at most: the file is
                         * replaced on every write, so writing it is the daemon's alone. */
                        if (*end || end == optarg || optarg[0] == '-' || (v & ~0644ul) != 0) {
                                fprintf(stderr, "kfdbrokerd: --metrics-file-mode: expected an octal mode within 0644 "
                                                "(e.g. 0600, 0640, 0644), got '%s'\n", optarg);
                                return EXIT_FAILURE;
                        }
                        opts.metrics_file_mode = (unsigned) v;
                        break;
                }
                case ARG_MAX_CONNECTIONS: {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (*end || end == optarg || optarg[0] == '-' || v > 1000000) {
                                fprintf(stderr, "kfdbrokerd: --max-connections-per-user: expected 0..1000000, got '%s'\n",
                                        optarg);
                                return EXIT_FAILURE;
                        }
                        opts.max_connections_per_user = (unsigned) v;
                        break;
                }
                case ARG_MAX_FDS:
                        if (parse_fd_budget("--max-fds-per-user", optarg, 1, &opts.max_fds_per_user) < 0)
                                return EXIT_FAILURE;
                        break;
                case ARG_MAX_SESSION_FDS:
                        /* A session holds 3 of its own: leave room for a few buffers. */
                        if (parse_fd_budget("--max-fds-per-session", optarg, 8, &opts.max_fds_per_session) < 0)
                                return EXIT_FAILURE;
                        break;
                case ARG_MAX_CONNECT_RATE: {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (*end || end == optarg || optarg[0] == '-' || v > 1000000) {
                                fprintf(stderr, "kfdbrokerd: --max-connect-rate-per-user: expected 0..1000000, got '%s'\n",
                                        optarg);
                                return EXIT_FAILURE;
                        }
                        opts.max_connect_rate_per_user = (unsigned) v;
                        break;
                }
                case ARG_CONTEXTS:
                        if (strcmp(optarg, "auto") == 0)
                                opts.contexts = CONTEXT_CHOICE_AUTO;
                        else if (strcmp(optarg, "kernel") == 0)
                                opts.contexts = CONTEXT_CHOICE_KERNEL;
                        else if (strcmp(optarg, "process") == 0)
                                opts.contexts = CONTEXT_CHOICE_PROCESS;
                        else if (strcmp(optarg, "shared") == 0)
                                opts.contexts = CONTEXT_CHOICE_SHARED;
                        else {
                                fprintf(stderr, "kfdbrokerd: --contexts: expected auto, kernel, process or shared, got '%s'\n",
                                        optarg);
                                return EXIT_FAILURE;
                        }
                        break;
                case ARG_WORKER_USER:
                        opts.worker_user = optarg;
                        break;
                case ARG_MAX_CONTEXTS: {
                        char *end;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (*end || end == optarg || optarg[0] == '-' || v < 1 || v > 4096) {
                                fprintf(stderr, "kfdbrokerd: --max-contexts: expected 1..4096, got '%s'\n", optarg);
                                return EXIT_FAILURE;
                        }
                        opts.max_contexts = (unsigned) v;
                        break;
                }
                case ARG_CONTEXT_IDLE: {
                        char *end;
                        double v = strtod(optarg, &end);
                        if (*end || end == optarg || !(v >= 0.01 && v <= 86400)) {
                                fprintf(stderr, "kfdbrokerd: --context-idle: expected seconds in 0.01..86400, got '%s'\n",
                                        optarg);
                                return EXIT_FAILURE;
                        }
                        opts.context_idle_ns = (uint64_t) (v * 1e9);
                        break;
                }
                case ARG_SIM_KFD_VERSION: {
                        unsigned major, minor;
                        char tail;
                        if (sscanf(optarg, "%u.%u%c", &major, &minor, &tail) != 2 || major != 1 ||
                            minor < SIM_MIN_KFD_MINOR || minor > SIM_DEFAULT_KFD_MINOR) {
                                fprintf(stderr, "kfdbrokerd: --sim-kfd-version: expected 1.%u..1.%u, got '%s'\n",
                                        SIM_MIN_KFD_MINOR, SIM_DEFAULT_KFD_MINOR, optarg);
                                return EXIT_FAILURE;
                        }
                        opts.sim_kfd_minor = minor;
                        break;
                }
                case ARG_GPU:
                        /* Checked against the topology once the device is known (kfd-gpu-choice.h). */
                        if (!*optarg) {
                                fprintf(stderr, "kfdbrokerd: --gpu: expected auto, a KFD node id, a PCI address "
                                                "or a render node, got ''\n");
                                return EXIT_FAILURE;
                        }
                        opts.gpu = optarg;
                        break;
                case ARG_SIM_TOPOLOGY:
                        if (strcmp(optarg, "dgpu") == 0)
                                opts.sim_igpu_first = false;
                        else if (strcmp(optarg, "igpu-first") == 0)
                                opts.sim_igpu_first = true;
                        else {
                                fprintf(stderr, "kfdbrokerd: --sim-topology: expected dgpu or igpu-first, got '%s'\n",
                                        optarg);
                                return EXIT_FAILURE;
                        }
                        break;
                default:
                        return EXIT_FAILURE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "kfdbrokerd: unexpected argument '%s'\n", argv[optind]);
                return EXIT_FAILURE;
        }
        log_setup(target);
        raise_fd_limit();

        r = manager_new(&opts, &m);
        if (r < 0)
                return EXIT_FAILURE;
        r = manager_run(m);
        manager_free(m);
        log_info("Stopped");
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
