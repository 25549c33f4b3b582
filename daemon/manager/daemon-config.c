/* SPDX-License-Identifier: MIT */
/*
 * See daemon-config.h. One table names every key, its parser and how
 * --show-config and --help describe its default; the command line (main.c)
 * and the files go through the same parsers, so a value means the same
 * wherever it is written.
 */
#include "manager/daemon-config.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/sim.h"
#include "util/conf-files.h"
#include "util/macro.h"

typedef int (*KeyParser)(DaemonConfig *c, const char *v, char *err, size_t errlen);

typedef struct KeyInfo {
        const char *name;
        KeyParser parse;
        const char *default_text; /* --show-config for an unset key */
} KeyInfo;

static int _printf_(3, 4) fail(char *err, size_t errlen, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

static int parse_choice(const char *v, const char *const *names, int n, int *ret) {
        for (int i = 0; i < n; i++)
                if (strcmp(v, names[i]) == 0) {
                        *ret = i;
                        return 0;
                }
        return -EINVAL;
}

/* 0..max, decimal, nothing else. */
static int parse_unsigned(const char *v, unsigned long min, unsigned long max, unsigned long *ret) {
        unsigned long x;
        char *end;

        errno = 0;
        x = strtoul(v, &end, 10);
        if (*end || end == v || v[0] == '-' || errno != 0 || x < min || x > max)
                return -EINVAL;
        *ret = x;
        return 0;
}

static int parse_device(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        static const char *const names[] = { [DEVICE_AUTO] = "auto", [DEVICE_KFD] = "kfd", [DEVICE_SIM] = "sim" };
        int i;

        if (parse_choice(v, names, ELEMENTSOF(names), &i) < 0)
                return fail(err, errlen, "expected auto, kfd or sim, got '%s'", v);
        c->opts.device = (DeviceChoice) i;
        return 0;
}

static int parse_gpu(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        /* Checked against the topology once the device is known (kfd-gpu-choice.h). */
        if (!*v)
                return fail(err, errlen, "expected auto, a KFD node id, a PCI address or a render node, got ''");
        c->opts.gpu = v;
        return 0;
}

static int parse_bus(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        static const char *const names[] = { [BUS_NONE] = "none", [BUS_SYSTEM] = "system", [BUS_SESSION] = "session" };
        int i;

        if (parse_choice(v, names, ELEMENTSOF(names), &i) < 0)
                return fail(err, errlen, "expected none, system or session, got '%s'", v);
        c->opts.bus = (BusChoice) i;
        return 0;
}

static int parse_listen(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        if (!*v)
                return fail(err, errlen, "expected a socket path, got ''");
        c->opts.listen_path = v;
        return 0;
}

static int parse_policy_dir(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        if (!*v)
                return fail(err, errlen, "expected a directory, got ''");
        if (c->n_policy_dirs >= DAEMON_CONFIG_POLICY_DIRS_MAX) {
                fail(err, errlen, "at most %u directories", DAEMON_CONFIG_POLICY_DIRS_MAX);
                return -E2BIG;
        }
        c->policy_dirs[c->n_policy_dirs++] = v;
        c->policy_dirs[c->n_policy_dirs] = NULL;
        c->opts.policy_dirs = c->policy_dirs;
        return 0;
}

static int parse_sdma_queues(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        unsigned long x;

        if (parse_unsigned(v, 1, GPU_MAX_QUEUES, &x) < 0)
                return fail(err, errlen, "expected 1..%d, got '%s'", GPU_MAX_QUEUES, v);
        c->opts.sdma_queues = (unsigned) x;
        return 0;
}

static int parse_contexts(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        static const char *const names[] = {
                [CONTEXT_CHOICE_AUTO] = "auto", [CONTEXT_CHOICE_KERNEL] = "kernel",
                [CONTEXT_CHOICE_PROCESS] = "process", [CONTEXT_CHOICE_SHARED] = "shared",
        };
        int i;

        if (parse_choice(v, names, ELEMENTSOF(names), &i) < 0)
                return fail(err, errlen, "expected auto, kernel, process or shared, got '%s'", v);
        c->opts.contexts = (ContextChoice) i;
        return 0;
}

static int parse_max_contexts(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        unsigned long x;

        if (parse_unsigned(v, 1, 4096, &x) < 0)
                return fail(err, errlen, "expected 1..4096, got '%s'", v);
        c->opts.max_contexts = (unsigned) x;
        return 0;
}

/* Seconds as a decimal in [min, max]. */
static int parse_seconds(const char *v, double min, double max, uint64_t *ret_ns) {
        char *end;
        double x = strtod(v, &end);

        if (*end || end == v || !(x >= min && x <= max))
                return -EINVAL;
        *ret_ns = (uint64_t) (x * 1e9);
        return 0;
}

static int parse_context_idle(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        if (parse_seconds(v, 0.01, 86400, &c->opts.context_idle_ns) < 0)
                return fail(err, errlen, "expected seconds in 0.01..86400, got '%s'", v);
        return 0;
}

static int parse_worker_user(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        if (!*v)
                return fail(err, errlen, "expected a user name, got ''");
        c->opts.worker_user = v;
        return 0;
}

static int parse_max_connections(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        unsigned long x;

        if (parse_unsigned(v, 0, 1000000, &x) < 0)
                return fail(err, errlen, "expected 0..1000000, got '%s'", v);
        c->opts.max_connections_per_user = (unsigned) x;
        return 0;
}

static int parse_max_connect_rate(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        unsigned long x;

        if (parse_unsigned(v, 0, 1000000, &x) < 0)
                return fail(err, errlen, "expected 0..1000000, got '%s'", v);
        c->opts.max_connect_rate_per_user = (unsigned) x;
        return 0;
}

/* N (at least min) or "infinity". */
static int parse_fd_budget(const char *v, uint64_t min, uint64_t *ret, char *err, size_t errlen) {
        unsigned long long x;
        char *end;

        if (strcmp(v, "infinity") == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        errno = 0;
        x = strtoull(v, &end, 10);
        if (*end || end == v || v[0] == '-' || errno != 0 || x < min || x == ULLONG_MAX)
                return fail(err, errlen, "expected a number of file descriptors (at least %" PRIu64 ") or infinity, got '%s'",
                            min, v);
        *ret = (uint64_t) x;
        return 0;
}

static int parse_max_fds_per_user(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        return parse_fd_budget(v, 1, &c->opts.max_fds_per_user, err, errlen);
}

static int parse_max_fds_per_session(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        /* A session holds 3 of its own: leave room for a few buffers. */
        return parse_fd_budget(v, 8, &c->opts.max_fds_per_session, err, errlen);
}

static int parse_metrics_file(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        if (!*v)
                return fail(err, errlen, "expected a file path, got ''");
        c->opts.metrics_file = v;
        return 0;
}

static int parse_metrics_interval(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        if (parse_seconds(v, 0.1, 86400, &c->opts.metrics_interval_ns) < 0)
                return fail(err, errlen, "expected seconds in 0.1..86400, got '%s'", v);
        return 0;
}

static int parse_metrics_file_mode(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        char *end;
        unsigned long x;

        errno = 0;
        x = strtoul(v, &end, 8);
        /* Read access for group and others at most: the file is replaced on
         * every write, so writing it is the daemon's alone. */
        if (*end || end == v || v[0] == '-' || errno != 0 || (x & ~0644ul) != 0)
                return fail(err, errlen, "expected an octal mode within 0644 (e.g. 0600, 0640, 0644), got '%s'", v);
        c->opts.metrics_file_mode = (unsigned) x;
        return 0;
}

static int parse_sim_kfd_version(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        unsigned major, minor;
        char tail;

        if (sscanf(v, "%u.%u%c", &major, &minor, &tail) != 2 || major != 1 || minor < SIM_MIN_KFD_MINOR ||
            minor > SIM_DEFAULT_KFD_MINOR)
                return fail(err, errlen, "expected 1.%u..1.%u, got '%s'", SIM_MIN_KFD_MINOR, SIM_DEFAULT_KFD_MINOR, v);
        c->opts.sim_kfd_minor = minor;
        return 0;
}

static int parse_sim_topology(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        static const char *const names[] = { "dgpu", "igpu-first" };
        int i;

        if (parse_choice(v, names, ELEMENTSOF(names), &i) < 0)
                return fail(err, errlen, "expected dgpu or igpu-first, got '%s'", v);
        c->opts.sim_igpu_first = i == 1;
        return 0;
}

static int parse_sim_gpus(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        unsigned long n;
        char *end;

        errno = 0;
        n = strtoul(v, &end, 10);
        if (*end || end == v || v[0] == '-' || errno != 0 || n < 1 || n > SIM_MAX_GPUS)
                return fail(err, errlen, "expected 1..%u discrete GPUs, got '%s'", SIM_MAX_GPUS, v);
        c->opts.sim_gpus = (unsigned) n;
        return 0;
}

static int parse_sim_fault_order(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        static const char *const names[] = { "fence-first", "event-first" };
        int i;

        if (parse_choice(v, names, ELEMENTSOF(names), &i) < 0)
                return fail(err, errlen, "expected fence-first or event-first, got '%s'", v);
        c->opts.sim_fault_order = i == 1 ? SIM_FAULT_ORDER_EVENT_FIRST : SIM_FAULT_ORDER_FENCE_FIRST;
        return 0;
}

static int parse_log_level(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        int r = log_level_from_string(v);

        if (r < 0)
                return fail(err, errlen, "unknown level '%s'", v);
        c->log_level = r;
        return 0;
}

static int parse_log_target(DaemonConfig *c, const char *v, char *err, size_t errlen) {
        static const char *const names[] = {
                [LOG_TARGET_AUTO] = "auto", [LOG_TARGET_STDERR] = "stderr", [LOG_TARGET_JOURNAL] = "journal",
        };
        int i;

        if (parse_choice(v, names, ELEMENTSOF(names), &i) < 0)
                return fail(err, errlen, "expected auto, journal or stderr, got '%s'", v);
        c->log_target = (LogTarget) i;
        return 0;
}

static const KeyInfo keys[_DAEMON_KEY_MAX] = {
        [DAEMON_KEY_DEVICE] = { "device", parse_device, "auto" },
        [DAEMON_KEY_GPU] = { "gpu", parse_gpu, "auto" },
        [DAEMON_KEY_BUS] = { "bus", parse_bus, "none" },
        [DAEMON_KEY_LISTEN] = { "listen", parse_listen, "(none: the socket systemd passes)" },
        [DAEMON_KEY_POLICY_DIR] = { "policy-dir", parse_policy_dir,
                                    "(" POLICY_DIR_ETC " " POLICY_DIR_RUN " " POLICY_DIR_VENDOR ")" },
        [DAEMON_KEY_SDMA_QUEUES] = { "sdma-queues", parse_sdma_queues, "2" },
        [DAEMON_KEY_CONTEXTS] = { "contexts", parse_contexts, "auto" },
        [DAEMON_KEY_MAX_CONTEXTS] = { "max-contexts", parse_max_contexts, "64" },
        [DAEMON_KEY_CONTEXT_IDLE] = { "context-idle", parse_context_idle, "30" },
        [DAEMON_KEY_WORKER_USER] = { "worker-user", parse_worker_user, "(kfdbroker, else a free uid)" },
        [DAEMON_KEY_MAX_CONNECTIONS_PER_USER] = { "max-connections-per-user", parse_max_connections, NULL },
        [DAEMON_KEY_MAX_CONNECT_RATE_PER_USER] = { "max-connect-rate-per-user", parse_max_connect_rate, NULL },
        [DAEMON_KEY_MAX_FDS_PER_USER] = { "max-fds-per-user", parse_max_fds_per_user,
                                          "(half of what the open file limit leaves)" },
        [DAEMON_KEY_MAX_FDS_PER_SESSION] = { "max-fds-per-session", parse_max_fds_per_session,
                                             "(half of the per-user budget, at least 16)" },
        [DAEMON_KEY_METRICS_FILE] = { "metrics-file", parse_metrics_file, "(none)" },
        [DAEMON_KEY_METRICS_INTERVAL] = { "metrics-interval", parse_metrics_interval, "15" },
        [DAEMON_KEY_METRICS_FILE_MODE] = { "metrics-file-mode", parse_metrics_file_mode, "0600" },
        [DAEMON_KEY_SIM_KFD_VERSION] = { "sim-kfd-version", parse_sim_kfd_version, NULL },
        [DAEMON_KEY_SIM_TOPOLOGY] = { "sim-topology", parse_sim_topology, "dgpu" },
        [DAEMON_KEY_SIM_GPUS] = { "sim-gpus", parse_sim_gpus, "1" },
        [DAEMON_KEY_SIM_FAULT_ORDER] = { "sim-fault-order", parse_sim_fault_order, "fence-first" },
        [DAEMON_KEY_LOG_LEVEL] = { "log-level", parse_log_level, "info" },
        [DAEMON_KEY_LOG_TARGET] = { "log-target", parse_log_target, "auto" },
};

int daemon_key_from_string(const char *name) {
        for (int k = 0; k < _DAEMON_KEY_MAX; k++)
                if (strcmp(keys[k].name, name) == 0)
                        return k;
        return -ENOENT;
}

const char *daemon_key_to_string(DaemonKey k) {
        return (unsigned) k < _DAEMON_KEY_MAX ? keys[k].name : NULL;
}

static void reset_opts(DaemonConfig *c) {
        c->opts = (ManagerOptions) { .device = DEVICE_AUTO, .bus = BUS_NONE,
                                     .max_connections_per_user = 32, .max_connect_rate_per_user = 1000,
                                     .metrics_file_mode = 0600 };
        c->log_level = -1;
        c->log_target = LOG_TARGET_AUTO;
}

void daemon_config_init(DaemonConfig *c) {
        *c = (DaemonConfig) {};
        reset_opts(c);
}

static void free_strv(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void daemon_config_done(DaemonConfig *c) {
        free_strv(c->strings, c->n_strings);
        free_strv(c->warnings, c->n_warnings);
        free(c->files);
        *c = (DaemonConfig) {};
}

/* Keeps a copy of s for as long as the DaemonConfig lives. */
static int keep(DaemonConfig *c, const char *s, const char **ret) {
        char **n = reallocarray(c->strings, c->n_strings + 1, sizeof(char *));

        if (!n)
                return -ENOMEM;
        c->strings = n;
        if (!(c->strings[c->n_strings] = strdup(s)))
                return -ENOMEM;
        *ret = c->strings[c->n_strings++];
        return 0;
}

static int _printf_(4, 5) warn(DaemonConfig *c, const char *file, unsigned line, const char *fmt, ...) {
        char msg[600], **n;
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        n = reallocarray(c->warnings, c->n_warnings + 1, sizeof(char *));
        if (!n)
                return -ENOMEM;
        c->warnings = n;
        if (asprintf(&c->warnings[c->n_warnings], "%s:%u: %s", file, line, msg) < 0)
                return -ENOMEM;
        c->n_warnings++;
        return 0;
}

/* Puts key back to its built-in default: a scratch config says what that is. */
static void reset_key(DaemonConfig *c, DaemonKey key) {
        DaemonConfig d;

        if (key == DAEMON_KEY_POLICY_DIR) {
                c->n_policy_dirs = 0;
                c->policy_dirs[0] = NULL;
                c->opts.policy_dirs = NULL;
                return;
        }
        daemon_config_init(&d);
        /* The one field the key's parser writes. */
        switch (key) {
        case DAEMON_KEY_DEVICE: c->opts.device = d.opts.device; break;
        case DAEMON_KEY_GPU: c->opts.gpu = d.opts.gpu; break;
        case DAEMON_KEY_BUS: c->opts.bus = d.opts.bus; break;
        case DAEMON_KEY_LISTEN: c->opts.listen_path = d.opts.listen_path; break;
        case DAEMON_KEY_SDMA_QUEUES: c->opts.sdma_queues = d.opts.sdma_queues; break;
        case DAEMON_KEY_CONTEXTS: c->opts.contexts = d.opts.contexts; break;
        case DAEMON_KEY_MAX_CONTEXTS: c->opts.max_contexts = d.opts.max_contexts; break;
        case DAEMON_KEY_CONTEXT_IDLE: c->opts.context_idle_ns = d.opts.context_idle_ns; break;
        case DAEMON_KEY_WORKER_USER: c->opts.worker_user = d.opts.worker_user; break;
        case DAEMON_KEY_MAX_CONNECTIONS_PER_USER: c->opts.max_connections_per_user = d.opts.max_connections_per_user; break;
        case DAEMON_KEY_MAX_CONNECT_RATE_PER_USER: c->opts.max_connect_rate_per_user = d.opts.max_connect_rate_per_user; break;
        case DAEMON_KEY_MAX_FDS_PER_USER: c->opts.max_fds_per_user = d.opts.max_fds_per_user; break;
        case DAEMON_KEY_MAX_FDS_PER_SESSION: c->opts.max_fds_per_session = d.opts.max_fds_per_session; break;
        case DAEMON_KEY_METRICS_FILE: c->opts.metrics_file = d.opts.metrics_file; break;
        case DAEMON_KEY_METRICS_INTERVAL: c->opts.metrics_interval_ns = d.opts.metrics_interval_ns; break;
        case DAEMON_KEY_METRICS_FILE_MODE: c->opts.metrics_file_mode = d.opts.metrics_file_mode; break;
        case DAEMON_KEY_SIM_KFD_VERSION: c->opts.sim_kfd_minor = d.opts.sim_kfd_minor; break;
        case DAEMON_KEY_SIM_TOPOLOGY: c->opts.sim_igpu_first = d.opts.sim_igpu_first; break;
        case DAEMON_KEY_SIM_GPUS: c->opts.sim_gpus = d.opts.sim_gpus; break;
        case DAEMON_KEY_SIM_FAULT_ORDER: c->opts.sim_fault_order = d.opts.sim_fault_order; break;
        case DAEMON_KEY_LOG_LEVEL: c->log_level = d.log_level; break;
        case DAEMON_KEY_LOG_TARGET: c->log_target = d.log_target; break;
        default: break;
        }
}

int daemon_config_set(DaemonConfig *c, DaemonKey key, const char *value, const char *file, unsigned line,
                      char *err, size_t errlen) {
        DaemonSetting *s = &c->settings[key];
        const char *v;
        int r;

        assert((unsigned) key < _DAEMON_KEY_MAX);
        if (file && value[0] == 0) {
                reset_key(c, key);
                *s = (DaemonSetting) { .source = DAEMON_SOURCE_DEFAULT };
                return 0;
        }
        /* The command line's --policy-dir= list replaces the files' list. */
        if (key == DAEMON_KEY_POLICY_DIR && !file && !c->policy_dirs_from_command_line) {
                reset_key(c, key);
                c->policy_dirs_from_command_line = true;
        }
        r = keep(c, value, &v);
        if (r < 0)
                return r;
        r = keys[key].parse(c, v, err, errlen);
        if (r < 0)
                return r;
        *s = (DaemonSetting) { .source = file ? DAEMON_SOURCE_FILE : DAEMON_SOURCE_COMMAND_LINE,
                               .value = v, .file = file, .line = line };
        if (key == DAEMON_KEY_POLICY_DIR)
                c->policy_dir_settings[c->n_policy_dirs - 1] = *s;
        return 0;
}

static char *strip(char *s) {
        char *e;

        while (*s == ' ' || *s == '\t')
                s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
                *--e = 0;
        return s;
}

/* One line of a file; section says whether we are in [Daemon] (1), another
 * section (0) or none yet (-1). */
static int parse_line(DaemonConfig *c, const char *file, unsigned line, char *text, int *section, char *err,
                      size_t errlen) {
        char msg[400], *eq, *key, *value;
        int k, r;

        text = strip(text);
        if (text[0] == 0 || text[0] == '#' || text[0] == ';')
                return 0;
        if (text[0] == '[') {
                size_t l = strlen(text);

                if (text[l - 1] != ']') {
                        snprintf(err, errlen, "%s:%u: invalid section header \"%.64s\"", file, line, text);
                        return -EINVAL;
                }
                text[l - 1] = 0;
                *section = strcmp(text + 1, "Daemon") == 0;
                if (!*section)
                        return warn(c, file, line, "unknown section [%.64s], ignoring it", text + 1);
                return 0;
        }
        eq = strchr(text, '=');
        if (!eq) {
                snprintf(err, errlen, "%s:%u: expected KEY=VALUE or [Section], got \"%.64s\"", file, line, text);
                return -EINVAL;
        }
        *eq = 0;
        key = strip(text);
        value = strip(eq + 1);
        if (*section < 0)
                return warn(c, file, line, "%.64s= outside of a section, ignoring it (start with [Daemon])", key);
        if (*section == 0)
                return 0;
        k = daemon_key_from_string(key);
        if (k < 0)
                return warn(c, file, line, "unknown key \"%.64s\" in [Daemon], ignoring it", key);
        r = daemon_config_set(c, (DaemonKey) k, value, file, line, msg, sizeof(msg));
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                snprintf(err, errlen, "%s:%u: %s=: %s", file, line, keys[k].name, msg);
                return r;
        }
        return 0;
}

int daemon_config_load_text(DaemonConfig *c, const char *file, const char *text, size_t len, char *err,
                            size_t errlen) {
        char buf[DAEMON_CONFIG_LINE_MAX + 1];
        const char *kept, **nf;
        unsigned line = 0;
        int section = -1, r;
        size_t pos = 0;

        r = keep(c, file, &kept);
        if (r < 0)
                return r;
        nf = reallocarray(c->files, c->n_files + 1, sizeof(char *));
        if (!nf)
                return -ENOMEM;
        c->files = nf;
        c->files[c->n_files++] = kept;
        if (len > DAEMON_CONFIG_FILE_MAX) {
                snprintf(err, errlen, "%s: file is larger than %u bytes", file, DAEMON_CONFIG_FILE_MAX);
                return -EFBIG;
        }
        if (memchr(text, 0, len)) {
                snprintf(err, errlen, "%s: NUL byte in file", file);
                return -EINVAL;
        }
        while (pos < len) {
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t ll = nl ? (size_t) (nl - (text + pos)) : len - pos;

                line++;
                if (ll > DAEMON_CONFIG_LINE_MAX) {
                        snprintf(err, errlen, "%s:%u: line longer than %u bytes", kept, line, DAEMON_CONFIG_LINE_MAX);
                        return -EFBIG;
                }
                memcpy(buf, text + pos, ll);
                buf[ll] = 0;
                pos += ll + (nl ? 1 : 0);
                r = parse_line(c, kept, line, buf, &section, err, errlen);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int load_path(DaemonConfig *c, const char *path, bool must_exist, char *err, size_t errlen) {
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r;

        r = conf_file_read(path, DAEMON_CONFIG_FILE_MAX, &text, &len, err, errlen);
        if (r == -ENOENT && !must_exist)
                return 0;
        if (r < 0)
                return r;
        return daemon_config_load_text(c, path, text ? text : "", len, err, errlen);
}

int daemon_config_load_file(DaemonConfig *c, const char *path, char *err, size_t errlen) {
        return load_path(c, path, true, err, errlen);
}

int daemon_config_load(DaemonConfig *c, const char *root, char *err, size_t errlen) {
        static const char *const mains[] = { DAEMON_CONFIG_ETC, DAEMON_CONFIG_RUN, DAEMON_CONFIG_VENDOR };
        static const char *const dropins[] = { DAEMON_CONFIG_DROPIN_ETC, DAEMON_CONFIG_DROPIN_RUN,
                                               DAEMON_CONFIG_DROPIN_VENDOR };
        char *dirs[ELEMENTSOF(dropins) + 1] = {};
        ConfFile *files = NULL;
        size_t n = 0;
        int r = 0;

        if (!root)
                root = "";
        /* The main file: the first that exists. */
        for (size_t i = 0; i < ELEMENTSOF(mains); i++) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s%s", root, mains[i]) < 0)
                        return -ENOMEM;
                if (access(p, F_OK) < 0)
                        continue;
                r = load_path(c, p, false, err, errlen);
                if (r < 0)
                        return r;
                break;
        }
        /* Then the drop-ins, which override it. */
        for (size_t i = 0; i < ELEMENTSOF(dropins) && r >= 0; i++)
                if (asprintf(&dirs[i], "%s%s", root, dropins[i]) < 0) {
                        dirs[i] = NULL;
                        r = -ENOMEM;
                }
        if (r >= 0)
                r = conf_files_list((const char *const *) dirs, DAEMON_CONFIG_FILES_MAX, &files, &n, err, errlen);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = load_path(c, files[i].path, false, err, errlen);
        conf_files_free(files, n);
        for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
                free(dirs[i]);
        return r;
}

/* "key=value   # where": a default with no value of its own (derived at
 * start-up) shows as "key=" and says what it is in the comment. */
static void show_one(const char *name, const char *value, const DaemonSetting *s, FILE *f) {
        bool derived = s->source == DAEMON_SOURCE_DEFAULT && value[0] == '(';
        char line[512];
        int w = snprintf(line, sizeof(line), "%s=%s", name, derived ? "" : value);

        fprintf(f, "%s%*s # ", line, w < 40 ? 40 - w : 0, "");
        switch (s->source) {
        case DAEMON_SOURCE_FILE:
                fprintf(f, "%s:%u\n", s->file, s->line);
                break;
        case DAEMON_SOURCE_COMMAND_LINE:
                fprintf(f, "command line\n");
                break;
        default:
                if (derived)
                        fprintf(f, "default: %.*s\n", (int) strlen(value) - 2, value + 1);
                else
                        fprintf(f, "default\n");
                break;
        }
}

void daemon_config_show(const DaemonConfig *c, FILE *f) {
        fprintf(f, "[Daemon]\n");
        for (int k = 0; k < _DAEMON_KEY_MAX; k++) {
                const DaemonSetting *s = &c->settings[k];
                char def[64];
                const char *dv = keys[k].default_text;

                if (k == DAEMON_KEY_POLICY_DIR && c->n_policy_dirs > 0) {
                        for (unsigned i = 0; i < c->n_policy_dirs; i++)
                                show_one(keys[k].name, c->policy_dirs[i], &c->policy_dir_settings[i], f);
                        continue;
                }
                if (!dv) { /* defaults kept in one place: the initial options */
                        DaemonConfig d;

                        daemon_config_init(&d);
                        if (k == DAEMON_KEY_MAX_CONNECTIONS_PER_USER)
                                snprintf(def, sizeof(def), "%u", d.opts.max_connections_per_user);
                        else if (k == DAEMON_KEY_MAX_CONNECT_RATE_PER_USER)
                                snprintf(def, sizeof(def), "%u", d.opts.max_connect_rate_per_user);
                        else
                                snprintf(def, sizeof(def), "1.%u", SIM_DEFAULT_KFD_MINOR);
                        dv = def;
                }
                show_one(keys[k].name, s->source == DAEMON_SOURCE_DEFAULT ? dv : s->value, s, f);
        }
}
