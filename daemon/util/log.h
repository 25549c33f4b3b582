/* SPDX-License-Identifier: MIT */
/*
 * Logging for the daemon. Messages go to the journal (its native protocol,
 * with PRIORITY, CODE_FILE/LINE/FUNC, ERRNO, SYSLOG_IDENTIFIER and, for the
 * structured entries below, MESSAGE_ID and fields of our own) when stderr is
 * connected to it (JOURNAL_STREAM matches, see systemd.exec(5)), otherwise to
 * stderr. Writing never waits: what cannot be written at once is dropped and
 * counted (log.c). Lines a client can cause go through log_ratelimited()
 * (log-ratelimit.h).
 * Low layers (gpu/, kfd/, sim/, wire, util) log at debug level only; the layer
 * that decides what to do logs once. The log_*_errno() helpers return -|r| so
 * they can be used as `return log_error_errno(r, "Failed to …: %m");` where %m
 * expands to strerror(|r|).
 */
#pragma once

#include <stdarg.h>
#include <stddef.h>
#include <sys/uio.h>
#include <syslog.h>

#include "macro.h"

typedef enum LogTarget {
        LOG_TARGET_AUTO,    /* journal if JOURNAL_STREAM says so, else stderr */
        LOG_TARGET_STDERR,
        LOG_TARGET_JOURNAL,
} LogTarget;

/* Where LOG_TARGET_JOURNAL sends (NULL: /run/systemd/journal/socket); for tests. */
void log_set_journal_socket(const char *path);
/* LOG_TARGET_JOURNAL falls back to stderr where journald's socket cannot be reached. */
void log_setup(LogTarget target);
/* Messages dropped because the log could not take them without waiting, and
 * not yet reported (the next message that goes out reports them). */
unsigned log_get_dropped(void);
/* sd_journal_sendv() that never waits (each iovec one "KEY=value" field):
 * 0, -EAGAIN when journald's socket is full, -ENOTCONN without a journal. */
int log_journal_sendv_nowait(const struct iovec *iov, int n);
void log_set_max_level(int level);
int log_get_max_level(void);
/* Parses "debug", "info", "notice", "warning", "err", "crit" or a number 0..7. */
int log_level_from_string(const char *s);

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) _printf_(6, 7);

#define log_full_errno(level, error, ...)                                                   \
        ({                                                                                  \
                int _level_ = (level), _e_ = (error);                                       \
                _e_ = _e_ < 0 ? -_e_ : _e_;                                                 \
                (log_get_max_level() >= _level_)                                            \
                        ? log_internal(_level_, _e_, __FILE__, __LINE__, __func__, __VA_ARGS__) \
                        : -_e_;                                                             \
        })
#define log_full(level, ...) (void) log_full_errno(level, 0, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_notice_errno(e, ...) log_full_errno(LOG_NOTICE, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, e, __VA_ARGS__)

/*
 * Structured entries: a MESSAGE_ID (log-ids.h) and fields of our own
 * (KFDBROKER_SESSION=12, KFDBROKER_UNIT=…) for filtering with journalctl
 * (docs/journal.md). LogFields holds "KEY=VALUE" strings in its own storage;
 * on stderr only the message is written. Keys are upper-case letters, digits
 * and '_'. Lines a client can cause go through log_struct_ratelimited()
 * (log-ratelimit.h) instead.
 */
#define LOG_FIELDS_MAX 24
typedef struct LogFields {
        const char *v[LOG_FIELDS_MAX];
        size_t n;
        size_t used;
        char buf[3072];
} LogFields;

/* Adds "KEY=VALUE" (formatted). A field that does not fit is left out. */
void log_fields_add(LogFields *f, const char *format, ...) _printf_(2, 3);
/* Adds every field of from (NULL-safe) to f. */
void log_fields_append(LogFields *f, const LogFields *from);

int log_struct_internal(int level, int error, const char *file, int line, const char *func,
                        const char *message_id, const LogFields *fields, const char *format, ...)
        _printf_(8, 9);

#define log_struct_errno(level, error, message_id, fields, ...)                                        \
        ({                                                                                              \
                int _level_ = (level), _e_ = (error);                                                   \
                _e_ = _e_ < 0 ? -_e_ : _e_;                                                             \
                (log_get_max_level() >= _level_)                                                        \
                        ? log_struct_internal(_level_, _e_, __FILE__, __LINE__, __func__, (message_id), \
                                              (fields), __VA_ARGS__)                                    \
                        : -_e_;                                                                         \
        })
#define log_struct(level, message_id, fields, ...) \
        (void) log_struct_errno(level, 0, message_id, fields, __VA_ARGS__)

/* Writes s into buf (of size n) with control and non-ASCII bytes as \xNN. */
const char *log_escape(const char *s, size_t len, char *buf, size_t n);
