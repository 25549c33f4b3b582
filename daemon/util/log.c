/* SPDX-License-Identifier: MIT */
/* See log.h. One process-wide logger; thread-safe (each message is one write). */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>

static int max_level = LOG_INFO;
static LogTarget target = LOG_TARGET_STDERR;

static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == dev && st.st_ino == ino;
}

void log_setup(LogTarget t) {
        if (t == LOG_TARGET_AUTO)
                t = stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_STDERR;
        target = t;
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = { "emerg", "alert", "crit", "err",
                                             "warning", "notice", "info", "debug" };
        char *end;
        long v;

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (strcmp(s, names[i]) == 0)
                        return (int) i;
        if (strcmp(s, "error") == 0)
                return LOG_ERR;
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno != 0 || *end != '\0' || end == s || v < 0 || v > 7)
                return -EINVAL;
        return (int) v;
}

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) {
        char msg[2048];
        va_list ap;
        int saved = errno;

        /* %m refers to the error we were given, not to whatever errno is now. */
        errno = error;
        va_start(ap, format);
        vsnprintf(msg, sizeof(msg), format, ap);
        va_end(ap);

        if (target == LOG_TARGET_JOURNAL) {
                char f[256], l[32], p[16], e[32];
                snprintf(f, sizeof(f), "CODE_FILE=%s", file);
                snprintf(l, sizeof(l), "CODE_LINE=%d", line);
                snprintf(p, sizeof(p), "PRIORITY=%d", level);
                snprintf(e, sizeof(e), "ERRNO=%d", error);
                sd_journal_send_with_location(f, l, func, "MESSAGE=%s", msg, p,
                                              error > 0 ? e : NULL, NULL);
        } else {
                static const char *const prefix[] = { "<0>", "<1>", "<2>", "error: ", "warning: ",
                                                      "notice: ", "", "debug: " };
                fprintf(stderr, "kfdbrokerd: %s%s\n", prefix[level & 7], msg);
        }
        errno = saved;
        return -error;
}

const char *log_escape(const char *s, size_t len, char *buf, size_t n) {
        size_t o = 0;

        if (n == 0)
                return buf;
        for (size_t i = 0; i < len && s[i] && o + 5 < n; i++) {
                unsigned char c = (unsigned char) s[i];
                if (c >= 0x20 && c < 0x7f && c != '\\')
                        buf[o++] = (char) c;
                else
                        o += (size_t) snprintf(buf + o, n - o, "\\x%02x", c);
        }
        buf[o] = '\0';
        return buf;
}
