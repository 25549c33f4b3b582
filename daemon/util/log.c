/* SPDX-License-Identifier: MIT */
/*
 * See log.h. One process-wide logger; thread-safe (each message is one write).
 *
 * Logging never blocks the caller, which is often the event loop: journald
 * can be slow to read its socket, and a writer of a full socket or pipe would
 * wait for it (a connect flood once raised another client's latency from
 * 0.4 ms to 453 ms). Journal entries therefore go out as datagrams of the
 * native protocol (systemd's JOURNAL_NATIVE_PROTOCOL: KEY=value lines, a
 * value with a newline as KEY, a 64-bit little-endian length and the bytes)
 * on a socket of our own, sent with MSG_DONTWAIT; lines to stderr are written
 * only when poll(2) says the write will not wait. A message that cannot go at
 * once is dropped and counted, and the next one that goes out says how many
 * were lost.
 */
#include "log.h"

#include "log-ids.h"

#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define JOURNAL_SOCKET "/run/systemd/journal/socket"

static int max_level = LOG_INFO;
static LogTarget target = LOG_TARGET_STDERR;
static int journal_fd = -1;
static atomic_uint dropped;

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

static const char *journal_socket = JOURNAL_SOCKET;

void log_set_journal_socket(const char *path) {
        journal_socket = path ? path : JOURNAL_SOCKET;
        if (journal_fd >= 0)
                close(journal_fd);
        journal_fd = -1;
}

/* A datagram socket connected to journald's native socket, non-blocking. */
static int journal_connect(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        if (strlen(journal_socket) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, journal_socket);
        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

void log_setup(LogTarget t) {
        if (t == LOG_TARGET_AUTO)
                t = stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_STDERR;
        if (t == LOG_TARGET_JOURNAL && journal_fd < 0) {
                journal_fd = journal_connect();
                if (journal_fd < 0)
                        t = LOG_TARGET_STDERR; /* no journal here: stderr it is */
        }
        target = t;
}

unsigned log_get_dropped(void) {
        return atomic_load(&dropped);
}

/* Appends n bytes to buf (of size JOURNAL_ENTRY_MAX) at *used; false when full. */
#define JOURNAL_ENTRY_MAX 8192
static bool put(char *buf, size_t *used, const void *p, size_t n) {
        if (n > JOURNAL_ENTRY_MAX - *used)
                return false;
        memcpy(buf + *used, p, n);
        *used += n;
        return true;
}

/*
 * sd_journal_sendv()'s contract — each iovec one "KEY=value" field — but
 * never waiting: the entry is serialized in the native protocol and sent as
 * one datagram with MSG_DONTWAIT on our own socket. -EAGAIN when journald's
 * socket is full.
 */
int log_journal_sendv_nowait(const struct iovec *iov, int n) {
        char buf[JOURNAL_ENTRY_MAX];
        size_t used = 0;

        if (journal_fd < 0)
                return -ENOTCONN;
        for (int i = 0; i < n; i++) {
                const char *f = iov[i].iov_base, *eq = memchr(f, '=', iov[i].iov_len);
                size_t klen, vlen;
                uint8_t le[8];

                if (!eq)
                        continue; /* not a field */
                klen = (size_t) (eq - f);
                vlen = iov[i].iov_len - klen - 1;
                if (!memchr(eq + 1, '\n', vlen)) {
                        if (!put(buf, &used, f, iov[i].iov_len) || !put(buf, &used, "\n", 1))
                                return -EMSGSIZE;
                        continue;
                }
                for (unsigned b = 0; b < 8; b++)
                        le[b] = (uint8_t) ((uint64_t) vlen >> (8 * b));
                if (!put(buf, &used, f, klen) || !put(buf, &used, "\n", 1) || !put(buf, &used, le, 8) ||
                    !put(buf, &used, eq + 1, vlen) || !put(buf, &used, "\n", 1))
                        return -EMSGSIZE;
        }
        return send(journal_fd, buf, used, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static void iov_add(struct iovec *iov, int *n, const char *s) {
        iov[(*n)++] = (struct iovec) { .iov_base = (void *) s, .iov_len = strlen(s) };
}

void log_fields_add(LogFields *f, const char *format, ...) {
        size_t room = sizeof(f->buf) - f->used;
        va_list ap;
        int k;

        if (f->n >= LOG_FIELDS_MAX || room == 0)
                return;
        va_start(ap, format);
        k = vsnprintf(f->buf + f->used, room, format, ap);
        va_end(ap);
        if (k < 0 || (size_t) k >= room)
                return; /* truncated: better no field than a wrong one */
        f->v[f->n++] = f->buf + f->used;
        f->used += (size_t) k + 1;
}

void log_fields_append(LogFields *f, const LogFields *from) {
        for (size_t i = 0; from && i < from->n; i++)
                log_fields_add(f, "%s", from->v[i]);
}

/* One journal entry, sent without waiting. */
static int journal_write(int level, int error, const char *file, int line, const char *func,
                         const char *message_id, const LogFields *fields, const char *msg) {
        char m[2100], p[16], f[256], l[32], fn[128], ident[64], e[32], mid[64];
        struct iovec iov[8 + LOG_FIELDS_MAX];
        int n = 0;

        snprintf(m, sizeof(m), "MESSAGE=%s", msg);
        snprintf(p, sizeof(p), "PRIORITY=%d", level);
        snprintf(f, sizeof(f), "CODE_FILE=%s", file);
        snprintf(l, sizeof(l), "CODE_LINE=%d", line);
        snprintf(fn, sizeof(fn), "CODE_FUNC=%s", func);
        snprintf(ident, sizeof(ident), "SYSLOG_IDENTIFIER=%s", program_invocation_short_name);
        iov_add(iov, &n, m);
        iov_add(iov, &n, p);
        iov_add(iov, &n, f);
        iov_add(iov, &n, l);
        iov_add(iov, &n, fn);
        iov_add(iov, &n, ident);
        if (error > 0) {
                snprintf(e, sizeof(e), "ERRNO=%d", error);
                iov_add(iov, &n, e);
        }
        if (message_id) {
                snprintf(mid, sizeof(mid), "MESSAGE_ID=%s", message_id);
                iov_add(iov, &n, mid);
        }
        for (size_t i = 0; fields && i < fields->n; i++)
                iov_add(iov, &n, fields->v[i]);
        return log_journal_sendv_nowait(iov, n);
}

/* One line on stderr, if it can be written without waiting. */
static int stderr_write(int level, const char *msg) {
        static const char *const prefix[] = { "<0>", "<1>", "<2>", "error: ", "warning: ",
                                              "notice: ", "", "debug: " };
        struct pollfd p = { .fd = STDERR_FILENO, .events = POLLOUT };
        char buf[2200];
        int n;

        if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLOUT))
                return -EAGAIN;
        n = snprintf(buf, sizeof(buf), "kfdbrokerd: %s%s\n", prefix[level & 7], msg);
        if (n < 0)
                return -EINVAL;
        if ((size_t) n >= sizeof(buf)) {
                n = (int) sizeof(buf) - 1;
                buf[n - 1] = '\n';
        }
        return write(STDERR_FILENO, buf, (size_t) n) < 0 ? -errno : 0;
}

static int write_one(int level, int error, const char *file, int line, const char *func,
                     const char *message_id, const LogFields *fields, const char *msg) {
        if (target == LOG_TARGET_JOURNAL)
                return journal_write(level, error, file, line, func, message_id, fields, msg);
        return stderr_write(level, msg);
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

/* Writes msg, saying first what was lost since the last message that went out. */
static void log_dispatch(int level, int error, const char *file, int line, const char *func,
                         const char *message_id, const LogFields *fields, const char *msg) {
        unsigned lost = atomic_exchange(&dropped, 0);

        if (lost > 0) {
                char note[128];
                LogFields f = {};

                snprintf(note, sizeof(note),
                         "%u log messages were dropped: the log could not take them without waiting", lost);
                log_fields_add(&f, "KFDBROKER_DROPPED=%u", lost);
                if (write_one(LOG_WARNING, 0, __FILE__, __LINE__, __func__, KFDBROKER_MESSAGE_LOG_DROPPED, &f,
                              note) < 0)
                        atomic_fetch_add(&dropped, lost);
        }
        if (write_one(level, error, file, line, func, message_id, fields, msg) < 0)
                atomic_fetch_add(&dropped, 1);
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
        log_dispatch(level, error, file, line, func, NULL, NULL, msg);
        errno = saved;
        return -error;
}

int log_struct_internal(int level, int error, const char *file, int line, const char *func,
                        const char *message_id, const LogFields *fields, const char *format, ...) {
        char msg[2048];
        va_list ap;
        int saved = errno;

        errno = error;
        va_start(ap, format);
        vsnprintf(msg, sizeof(msg), format, ap);
        va_end(ap);
        log_dispatch(level, error, file, line, func, message_id, fields, msg);
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
