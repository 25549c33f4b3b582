/* SPDX-License-Identifier: MIT */
/*
 * DaemonConfig: kfdbrokerd's settings and where each came from. Three layers,
 * the later overriding the earlier key by key: the built-in defaults, the
 * configuration files (kfdbrokerd.conf, INI, a [Daemon] section whose keys are
 * the long option names) and the command line. main() owns one; the
 * ManagerOptions in it point into strings the DaemonConfig owns, so it
 * outlives the Manager. File layout and precedence: kfdbrokerd(8), FILES.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "manager/manager.h"
#include "util/log.h"

/* The main file: the first found of these (under --config-root=), as
 * systemd reads its own (systemd-system.conf(5), "Configuration Directories
 * and Precedence"); the vendor copy under /usr sets what the service needs. */
#define DAEMON_CONFIG_ETC "/etc/kfdbroker/kfdbrokerd.conf"
#define DAEMON_CONFIG_RUN "/run/kfdbroker/kfdbrokerd.conf"
#define DAEMON_CONFIG_VENDOR KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf"
/* Drop-ins: *.conf in these, sorted by file name over all three, a name in
 * /etc hiding it in /run hiding it in the vendor directory (conf-files.h). */
#define DAEMON_CONFIG_DROPIN_ETC "/etc/kfdbroker/kfdbrokerd.conf.d"
#define DAEMON_CONFIG_DROPIN_RUN "/run/kfdbroker/kfdbrokerd.conf.d"
#define DAEMON_CONFIG_DROPIN_VENDOR KFDBROKER_CONFIG_VENDOR_DIR "/kfdbrokerd.conf.d"

#define DAEMON_CONFIG_FILE_MAX (64u * 1024u)
#define DAEMON_CONFIG_LINE_MAX 4096u
#define DAEMON_CONFIG_FILES_MAX 256u
#define DAEMON_CONFIG_POLICY_DIRS_MAX 16u

typedef enum DaemonKey {
        DAEMON_KEY_DEVICE,
        DAEMON_KEY_GPU,
        DAEMON_KEY_BUS,
        DAEMON_KEY_LISTEN,
        DAEMON_KEY_POLICY_DIR,
        DAEMON_KEY_SDMA_QUEUES,
        DAEMON_KEY_CONTEXTS,
        DAEMON_KEY_MAX_CONTEXTS,
        DAEMON_KEY_CONTEXT_IDLE,
        DAEMON_KEY_WORKER_USER,
        DAEMON_KEY_MAX_CONNECTIONS_PER_USER,
        DAEMON_KEY_MAX_CONNECT_RATE_PER_USER,
        DAEMON_KEY_MAX_FDS_PER_USER,
        DAEMON_KEY_MAX_FDS_PER_SESSION,
        DAEMON_KEY_METRICS_FILE,
        DAEMON_KEY_METRICS_INTERVAL,
        DAEMON_KEY_METRICS_FILE_MODE,
        DAEMON_KEY_SIM_KFD_VERSION,
        DAEMON_KEY_SIM_TOPOLOGY,
        DAEMON_KEY_SIM_GPUS,
        DAEMON_KEY_SIM_FAULT_ORDER,
        DAEMON_KEY_LOG_LEVEL,
        DAEMON_KEY_LOG_TARGET,
        _DAEMON_KEY_MAX,
} DaemonKey;

typedef enum DaemonSource {
        DAEMON_SOURCE_DEFAULT,
        DAEMON_SOURCE_FILE,
        DAEMON_SOURCE_COMMAND_LINE,
} DaemonSource;

typedef struct DaemonSetting {
        DaemonSource source;
        const char *value; /* as written, owned by the DaemonConfig; NULL = the default */
        const char *file;  /* DAEMON_SOURCE_FILE: path and line */
        unsigned line;
} DaemonSetting;

typedef struct DaemonConfig {
        ManagerOptions opts;
        int log_level; /* -1: not set */
        LogTarget log_target;
        const char *policy_dirs[DAEMON_CONFIG_POLICY_DIRS_MAX + 1];
        unsigned n_policy_dirs;
        DaemonSetting policy_dir_settings[DAEMON_CONFIG_POLICY_DIRS_MAX];
        bool policy_dirs_from_command_line;
        DaemonSetting settings[_DAEMON_KEY_MAX];
        char **strings; /* every value and file name kept */
        size_t n_strings;
        char **warnings; /* "FILE:LINE: message" */
        size_t n_warnings;
        const char **files; /* the files read, in order (strings kept in .strings) */
        size_t n_files;
} DaemonConfig;

/* The built-in defaults. */
void daemon_config_init(DaemonConfig *c);
void daemon_config_done(DaemonConfig *c);

/* The key named name (a long option name), or -ENOENT. */
int daemon_key_from_string(const char *name);
const char *daemon_key_to_string(DaemonKey k);

/*
 * daemon_config_set() - parse value for key and take it.
 * @file, @line: where it was written; NULL for the command line.
 * An empty value from a file puts the key back to its default (a drop-in
 * undoing the main file, as systemd's empty assignments do).
 * Returns 0, or -EINVAL with "expected ..., got '...'" in err, -E2BIG
 * (too many policy-dir), -ENOMEM.
 */
int daemon_config_set(DaemonConfig *c, DaemonKey key, const char *value, const char *file, unsigned line,
                      char *err, size_t errlen);

/*
 * daemon_config_load_text() - apply the [Daemon] section of one file's text.
 * Unknown sections, unknown keys and assignments outside a section are
 * warnings (systemd's config_parse() logs and ignores them); a bad value or
 * a malformed line is an error. Returns 0, or -EINVAL/-EFBIG/-ENOMEM with
 * "FILE:LINE: message" in err.
 */
int daemon_config_load_text(DaemonConfig *c, const char *file, const char *text, size_t len, char *err,
                            size_t errlen);

/*
 * daemon_config_load() - the main file and the drop-ins, all under root
 * ("" or NULL for /). Missing files and directories are fine.
 * Returns 0 or -errno with "FILE[:LINE]: message" in err.
 */
int daemon_config_load(DaemonConfig *c, const char *root, char *err, size_t errlen);

/* Only the file path (--config=PATH): it must exist. */
int daemon_config_load_file(DaemonConfig *c, const char *path, char *err, size_t errlen);

/* Prints every key, its value and where it came from, as a [Daemon] file. */
void daemon_config_show(const DaemonConfig *c, FILE *f);
