/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl top`: a live view of every session of the daemon, in the
 * manner of systemd-cgtop and nvtop. Every interval it calls GetAccounting
 * over D-Bus (the same data as `kfdbrokerctl accounting`) and shows, per
 * session, the rates between this sample and the previous one: jobs retired
 * per second and the share of the interval each engine spent on the
 * session's jobs (the BusyNSec* counters, GPU time between the timestamps
 * written around each job). Memory and jobs in flight are the values now.
 *
 * Two modes. Interactive (stdout a terminal, no -b): the alternate screen
 * (the normal one with -n, so the last refresh stays), redrawn in place,
 * rows and columns cut to the window (re-read on SIGWINCH); stdin, when it
 * is a terminal, is put in non-canonical mode so that 'q' quits at once;
 * Ctrl-C, SIGTERM and 'q' all restore the terminal, Ctrl-Z suspends.
 * Batch (-b, or stdout not a terminal): one plain frame per interval, no
 * escape codes, nothing cut, so it can be piped and tested. With --json
 * (batch): one JSON object per sample and line, one sample unless -n says
 * more; the first sample's rates are null (there is no previous one).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "ctl-bus.h"
#include "ctl-json.h"
#include "util/macro.h"

#define TOP_DELAY_MIN 0.1
#define TOP_DELAY_MAX 86400.0

enum { ENGINE_SDMA, ENGINE_COMPUTE, N_ENGINES };

typedef struct TopRow {
        uint64_t id;
        uint64_t uid;
        uint64_t gpu;           /* the index of its GPU */
        char unit[256], user_unit[256], app_id[256], container[256], client[80];
        uint64_t jobs_in_flight;
        uint64_t jobs_done; /* completed + failed */
        uint64_t busy_ns[N_ENGINES];
        uint64_t buffer_bytes;
        /* From the previous sample. */
        bool have_rates;
        double jobs_per_s, busy_pct[N_ENGINES];
} TopRow;

typedef struct TopSample {
        TopRow *rows;
        size_t n;
        uint64_t when_ns; /* CLOCK_MONOTONIC when the reply arrived */
} TopSample;

typedef struct Top {
        const char *prog;
        sd_bus *bus;
        char title[320];  /* daemon version and device */
        double delay_s;
        uint64_t iterations; /* 0: until quit */
        bool batch;
        bool json;                /* one JSON object per sample (batch) */
        bool raw;                 /* stdin switched to non-canonical mode */
        bool screen;              /* terminal taken over (cursor hidden) */
        bool alt_screen;          /* ...on the alternate screen */
        struct termios saved_tio; /* stdin's settings to restore */
        sigset_t saved_mask;
        int sigfd;
        unsigned rows, cols; /* window; 0: no limit */
        TopSample cur, prev;
        bool have_prev;
        char err[1024]; /* why the last sample failed, printed once the terminal is back */
} Top;

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* ---- sampling ---- */

static int usage_field(sd_bus_message *m, const char *key, const char *contents, void *userdata) {
        TopRow *row = userdata;
        uint64_t v;
        int r;

        if (strcmp(key, "JobsCompleted") != 0 && strcmp(key, "JobsFailed") != 0 &&
            strcmp(key, "BusyNSecSDMA") != 0 && strcmp(key, "BusyNSecCompute") != 0 &&
            strcmp(key, "BufferBytes") != 0)
                return 0;
        r = ctl_bus_read_number(m, contents, &v);
        if (r < 0)
                return r;
        if (strcmp(key, "BusyNSecSDMA") == 0)
                row->busy_ns[ENGINE_SDMA] = v;
        else if (strcmp(key, "BusyNSecCompute") == 0)
                row->busy_ns[ENGINE_COMPUTE] = v;
        else if (strcmp(key, "BufferBytes") == 0)
                row->buffer_bytes = v;
        else
                row->jobs_done += v;
        return 1;
}

static int session_field(sd_bus_message *m, const char *key, const char *contents, void *userdata) {
        static const struct {
                const char *key;
                size_t offset;
        } strings[] = {
                { "Unit", offsetof(TopRow, unit) },           { "UserUnit", offsetof(TopRow, user_unit) },
                { "AppId", offsetof(TopRow, app_id) },        { "Container", offsetof(TopRow, container) },
                { "ClientName", offsetof(TopRow, client) },
        };
        TopRow *row = userdata;
        int r;

        if (strcmp(key, "Id") == 0)
                return ctl_bus_read_number(m, contents, &row->id) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "UID") == 0)
                return ctl_bus_read_number(m, contents, &row->uid) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "GPU") == 0)
                return ctl_bus_read_number(m, contents, &row->gpu) < 0 ? -EBADMSG : 1;
        if (strcmp(key, "JobsInFlight") == 0)
                return ctl_bus_read_number(m, contents, &row->jobs_in_flight) < 0 ? -EBADMSG : 1;
        for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                if (strcmp(key, strings[i].key) == 0) {
                        char *buf = (char *) row + strings[i].offset;
                        size_t n = strcmp(key, "ClientName") == 0 ? sizeof(row->client) : sizeof(row->unit);
                        return ctl_bus_read_string(m, contents, buf, n) < 0 ? -EBADMSG : 1;
                }
        if (strcmp(key, "Usage") == 0 && strcmp(contents, "a{sv}") == 0) {
                r = sd_bus_message_enter_container(m, SD_BUS_TYPE_VARIANT, contents);
                if (r >= 0)
                        r = ctl_bus_read_dict(m, usage_field, row);
                if (r >= 0)
                        r = sd_bus_message_exit_container(m);
                return r < 0 ? r : 1;
        }
        return 0;
}

static int call_get_accounting(Top *t, sd_bus_message **ret, ...) {
        va_list ap;
        int r;

        va_start(ap, ret);
        r = ctl_bus_callv(t->bus, "GetAccounting", ret, t->err, sizeof(t->err), NULL, ap);
        va_end(ap);
        return r;
}

/* Calls GetAccounting and fills t->cur with its sessions; on failure t->err says why. */
static int top_sample(Top *t) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        TopSample s = {};
        size_t cap = 0;
        int r;

        r = call_get_accounting(t, &reply);
        if (r < 0)
                return r;
        s.when_ns = now_ns();
        r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "a{sv}");
        while (r >= 0 && (r = sd_bus_message_at_end(reply, false)) == 0) {
                if (s.n == cap) {
                        size_t nc = cap ? cap * 2 : 16;
                        TopRow *nr = reallocarray(s.rows, nc, sizeof(TopRow));
                        if (!nr) {
                                r = -ENOMEM;
                                break;
                        }
                        s.rows = nr;
                        cap = nc;
                }
                s.rows[s.n] = (TopRow) {};
                r = ctl_bus_read_dict(reply, session_field, &s.rows[s.n]);
                if (r >= 0)
                        s.n++;
        }
        if (r < 0) {
                free(s.rows);
                snprintf(t->err, sizeof(t->err), "cannot read the GetAccounting reply: %s", strerror(-r));
                return r;
        }
        free(t->prev.rows);
        t->prev = t->cur;
        t->have_prev = t->cur.when_ns != 0;
        t->cur = s;
        return 0;
}

static int row_cmp_id(const void *a, const void *b) {
        const TopRow *x = a, *y = b;
        return x->id < y->id ? -1 : x->id > y->id;
}

static double row_busy(const TopRow *r) {
        return r->have_rates ? r->busy_pct[ENGINE_SDMA] + r->busy_pct[ENGINE_COMPUTE] : -1.0;
}

/* Busiest first, then most jobs per second, then oldest session. */
static int row_cmp_busy(const void *a, const void *b) {
        const TopRow *x = a, *y = b;
        double bx = row_busy(x), by = row_busy(y);

        if (bx != by)
                return bx > by ? -1 : 1;
        if (x->have_rates && y->have_rates && x->jobs_per_s != y->jobs_per_s)
                return x->jobs_per_s > y->jobs_per_s ? -1 : 1;
        return row_cmp_id(a, b);
}

static uint64_t delta(uint64_t now, uint64_t before) {
        /* A counter never goes back within a session; be safe anyway. */
        return now >= before ? now - before : 0;
}

/* Rates of t->cur against t->prev. A session that was not in the previous
 * sample opened during the interval: all its counters are from within it. */
static void top_compute_rates(Top *t) {
        double dt;

        if (!t->have_prev || t->cur.when_ns <= t->prev.when_ns)
                return;
        dt = (double) (t->cur.when_ns - t->prev.when_ns);
        if (t->prev.n > 0)
                qsort(t->prev.rows, t->prev.n, sizeof(TopRow), row_cmp_id);
        for (size_t i = 0; i < t->cur.n; i++) {
                TopRow *r = &t->cur.rows[i];
                const TopRow zero = {}, *p = NULL;

                if (t->prev.n > 0)
                        p = bsearch(r, t->prev.rows, t->prev.n, sizeof(TopRow), row_cmp_id);
                if (!p)
                        p = &zero;
                r->have_rates = true;
                r->jobs_per_s = (double) delta(r->jobs_done, p->jobs_done) * 1e9 / dt;
                for (unsigned e = 0; e < N_ENGINES; e++)
                        r->busy_pct[e] = (double) delta(r->busy_ns[e], p->busy_ns[e]) * 100.0 / dt;
        }
}

/* ---- drawing ---- */

static const char *format_bytes(uint64_t v, char *buf, size_t n) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
        double d = (double) v;
        size_t u = 0;

        while (d >= 1024.0 && u + 1 < ELEMENTSOF(units)) {
                d /= 1024.0;
                u++;
        }
        if (u == 0)
                snprintf(buf, n, "%" PRIu64 " B", v);
        else
                snprintf(buf, n, "%.1f %s", d, units[u]);
        return buf;
}

/* One decimal, or "-" before there are two samples to compare. */
static const char *format_rate(bool have, double v, char *buf, size_t n) {
        if (!have)
                snprintf(buf, n, "-");
        else
                snprintf(buf, n, "%.1f", v);
        return buf;
}

/* What the session is, in one word: app id, container, user unit, unit. */
static const char *row_who(const TopRow *r) {
        return r->app_id[0] ? r->app_id
             : r->container[0] ? r->container
             : r->user_unit[0] ? r->user_unit
             : r->unit[0] ? r->unit : "-";
}

/* Appends one line, cut to the window's width in interactive mode (counting
 * UTF-8 code points, never splitting one). Returns false once the window
 * has no room for more lines. */
static bool put_line(Top *t, FILE *f, unsigned *n_lines, const char *line) {
        size_t cut = strlen(line);

        if (!t->batch && t->rows > 0 && *n_lines >= t->rows)
                return false;
        if (!t->batch && t->cols > 0) {
                unsigned cols = 0;

                for (size_t i = 0; line[i]; i++) {
                        if (((unsigned char) line[i] & 0xc0) == 0x80)
                                continue;
                        if (cols == t->cols) {
                                cut = i;
                                break;
                        }
                        cols++;
                }
        }
        /* In place: each line overwrites the old one and clears what is left of it;
         * the last line of a full window gets no newline, which would scroll. */
        if (*n_lines > 0)
                fputs(t->batch ? "\n" : "\033[K\n", f);
        fwrite(line, 1, cut, f);
        (*n_lines)++;
        return true;
}

static void top_draw(Top *t) {
        char *text = NULL, line[1024], b1[32], b2[32], b3[32], b4[32], who[256], client[128];
        double jobs = 0, busy[N_ENGINES] = {};
        uint64_t mem = 0, in_flight = 0;
        unsigned n_lines = 0;
        size_t len = 0;
        time_t now = time(NULL);
        struct tm tm;
        FILE *f;

        f = open_memstream(&text, &len);
        if (!f)
                return;
        if (t->cur.n > 0)
                qsort(t->cur.rows, t->cur.n, sizeof(TopRow), row_cmp_busy);
        for (size_t i = 0; i < t->cur.n; i++) {
                const TopRow *r = &t->cur.rows[i];
                jobs += r->jobs_per_s;
                busy[ENGINE_SDMA] += r->busy_pct[ENGINE_SDMA];
                busy[ENGINE_COMPUTE] += r->busy_pct[ENGINE_COMPUTE];
                mem += r->buffer_bytes;
                in_flight += r->jobs_in_flight;
        }
        if (!t->batch)
                fputs("\033[H", f);
        localtime_r(&now, &tm);
        snprintf(line, sizeof(line), "%s, %zu session%s, every %.1fs, %02d:%02d:%02d", t->title, t->cur.n,
                 t->cur.n == 1 ? "" : "s", t->delay_s, tm.tm_hour, tm.tm_min, tm.tm_sec);
        put_line(t, f, &n_lines, line);
        if (t->have_prev)
                snprintf(line, sizeof(line),
                         "total: %.1f jobs/s, SDMA %.1f%%, compute %.1f%%, buffers %s, %" PRIu64 " in flight",
                         jobs, busy[ENGINE_SDMA], busy[ENGINE_COMPUTE], format_bytes(mem, b4, sizeof(b4)),
                         in_flight);
        else
                snprintf(line, sizeof(line), "total: buffers %s, %" PRIu64 " in flight (rates from the next refresh)",
                         format_bytes(mem, b4, sizeof(b4)), in_flight);
        put_line(t, f, &n_lines, line);
        put_line(t, f, &n_lines, "");
        snprintf(line, sizeof(line), "%6s %6s %3s %8s %6s %6s %10s %5s  %-28s %s", "ID", "UID", "GPU", "JOBS/S",
                 "SDMA%", "COMP%", "MEMORY", "INFL", "UNIT/APP", "CLIENT");
        put_line(t, f, &n_lines, line);
        for (size_t i = 0; i < t->cur.n; i++) {
                const TopRow *r = &t->cur.rows[i];

                /* Keep the last line of a full window for what does not fit. */
                if (!t->batch && t->rows > 0 && n_lines + 1 == t->rows && i + 1 < t->cur.n) {
                        snprintf(line, sizeof(line), "(%zu more)", t->cur.n - i);
                        put_line(t, f, &n_lines, line);
                        break;
                }
                snprintf(line, sizeof(line), "%6" PRIu64 " %6" PRIu64 " %3" PRIu64 " %8s %6s %6s %10s %5" PRIu64
                                             "  %-28s %s",
                         r->id, r->uid, r->gpu, format_rate(r->have_rates, r->jobs_per_s, b1, sizeof(b1)),
                         format_rate(r->have_rates, r->busy_pct[ENGINE_SDMA], b2, sizeof(b2)),
                         format_rate(r->have_rates, r->busy_pct[ENGINE_COMPUTE], b3, sizeof(b3)),
                         format_bytes(r->buffer_bytes, b4, sizeof(b4)), r->jobs_in_flight,
                         ctl_sanitize(row_who(r), who, sizeof(who)),
                         ctl_sanitize(r->client[0] ? r->client : "-", client, sizeof(client)));
                if (!put_line(t, f, &n_lines, line))
                        break;
        }
        if (t->batch)
                fputs("\n\n", f);
        else
                fputs("\033[K\033[J", f);
        fclose(f);
        fwrite(text, 1, len, stdout);
        fflush(stdout);
        free(text);
}

/* ---- the terminal ---- */

/* One sample as one line of JSON (snake_case keys, as every verb's). */
static void top_print_json(Top *t) {
        static const char *const engine_key[N_ENGINES] = { "busy_percent_sdma", "busy_percent_compute" };

        if (t->cur.n > 0)
                qsort(t->cur.rows, t->cur.n, sizeof(TopRow), row_cmp_id);
        printf("{\"interval_ns\":");
        if (t->have_prev && t->cur.when_ns > t->prev.when_ns)
                printf("%" PRIu64, t->cur.when_ns - t->prev.when_ns);
        else
                fputs("null", stdout);
        printf(",\"sessions\":[");
        for (size_t i = 0; i < t->cur.n; i++) {
                const TopRow *r = &t->cur.rows[i];

                printf("%s{\"id\":%" PRIu64 ",\"uid\":%" PRIu64, i ? "," : "", r->id, r->uid);
                json_member_string(",", "unit", r->unit);
                json_member_string(",", "user_unit", r->user_unit);
                json_member_string(",", "app_id", r->app_id);
                json_member_string(",", "container", r->container);
                json_member_string(",", "client_name", r->client);
                printf(",\"jobs_in_flight\":%" PRIu64 ",\"jobs_done\":%" PRIu64 ",\"buffer_bytes\":%" PRIu64
                       ",\"jobs_per_second\":",
                       r->jobs_in_flight, r->jobs_done, r->buffer_bytes);
                if (r->have_rates)
                        json_double(r->jobs_per_s);
                else
                        fputs("null", stdout);
                for (unsigned e = 0; e < N_ENGINES; e++) {
                        printf(",\"%s\":", engine_key[e]);
                        if (r->have_rates)
                                json_double(r->busy_pct[e]);
                        else
                                fputs("null", stdout);
                }
                putchar('}');
        }
        printf("]}\n");
        fflush(stdout);
}

static void top_read_window(Top *t) {
        struct winsize ws = {};

        if (t->batch)
                return;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
                t->rows = ws.ws_row;
                t->cols = ws.ws_col;
        } else
                t->rows = t->cols = 0;
}

static int top_setup_terminal(Top *t) {
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGWINCH);
        if (!t->batch)
                sigaddset(&mask, SIGTSTP);
        if (sigprocmask(SIG_BLOCK, &mask, &t->saved_mask) < 0)
                return -errno;
        t->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (t->sigfd < 0)
                return -errno;
        if (t->batch)
                return 0;
        if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved_tio) == 0) {
                struct termios tio = t->saved_tio;

                /* Keys one at a time, not echoed; ISIG stays, so Ctrl-C is SIGINT. */
                tio.c_lflag &= ~(tcflag_t) (ICANON | ECHO);
                tio.c_cc[VMIN] = 1;
                tio.c_cc[VTIME] = 0;
                if (tcsetattr(STDIN_FILENO, TCSANOW, &tio) == 0)
                        t->raw = true;
        }
        /* Without a cursor, on the alternate screen; with -n on the normal one,
         * cleared, so that the last refresh stays (as systemd-cgtop -n does). */
        t->alt_screen = t->iterations == 0;
        fputs(t->alt_screen ? "\033[?1049h\033[?25l" : "\033[H\033[2J\033[?25l", stdout);
        fflush(stdout);
        t->screen = true;
        top_read_window(t);
        return 0;
}

static void top_leave_screen(Top *t) {
        if (t->screen)
                fputs(t->alt_screen ? "\033[?25h\033[?1049l" : "\033[?25h\n", stdout);
        fflush(stdout);
}

static void top_restore_terminal(Top *t) {
        top_leave_screen(t);
        if (t->raw)
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved_tio);
        t->sigfd = safe_close(t->sigfd);
        (void) sigprocmask(SIG_SETMASK, &t->saved_mask, NULL);
}

/* Ctrl-Z: give the terminal back while stopped, take it again on SIGCONT. */
static void top_suspend(Top *t) {
        top_leave_screen(t);
        if (t->raw)
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved_tio);
        (void) kill(getpid(), SIGSTOP);
        if (t->raw) {
                struct termios tio = t->saved_tio;
                tio.c_lflag &= ~(tcflag_t) (ICANON | ECHO);
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &tio);
        }
        if (t->screen)
                fputs(t->alt_screen ? "\033[?1049h\033[?25l" : "\033[H\033[2J\033[?25l", stdout);
        top_read_window(t);
        top_draw(t);
}

/* Waits until deadline_ns, handling keys and signals. Returns 1 to go on, 0 to quit. */
static int top_wait(Top *t, uint64_t deadline_ns) {
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = t->sigfd, .events = POLLIN },
                        { .fd = t->raw ? STDIN_FILENO : -1, .events = POLLIN },
                };
                uint64_t now = now_ns();
                int timeout, r;

                if (now >= deadline_ns)
                        return 1;
                timeout = (int) MIN((deadline_ns - now + 999999) / 1000000, (uint64_t) INT32_MAX);
                r = poll(p, 2, timeout);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (p[0].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        while (read(t->sigfd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
                                if (si.ssi_signo == SIGWINCH) {
                                        top_read_window(t);
                                        top_draw(t);
                                } else if (si.ssi_signo == SIGTSTP)
                                        top_suspend(t);
                                else
                                        return 0;
                        }
                }
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        char c;

                        if (read(STDIN_FILENO, &c, 1) == 1) {
                                if (c == 'q' || c == 'Q')
                                        return 0;
                        } else {
                                /* The terminal went away: stop reading it. */
                                (void) tcsetattr(STDIN_FILENO, TCSANOW, &t->saved_tio);
                                t->raw = false;
                        }
                }
        }
}

/* ---- the verb ---- */

static int top_parse_options(Top *t, int argc, char **argv) {
        static const struct option options[] = {
                { "delay", required_argument, NULL, 'd' },
                { "iterations", required_argument, NULL, 'n' },
                { "batch", no_argument, NULL, 'b' },
                {}
        };
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "d:n:b", options, NULL)) >= 0) {
                char *end;

                switch (c) {
                case 'd':
                        errno = 0;
                        t->delay_s = strtod(optarg, &end);
                        if (errno != 0 || end == optarg || *end || !isfinite(t->delay_s) ||
                            t->delay_s < TOP_DELAY_MIN || t->delay_s > TOP_DELAY_MAX) {
                                fprintf(stderr, "%s top: --delay must be seconds in %.1f..%.0f, got '%s'\n",
                                        t->prog, TOP_DELAY_MIN, TOP_DELAY_MAX, optarg);
                                return -EINVAL;
                        }
                        break;
                case 'n': {
                        unsigned long long v;

                        errno = 0;
                        v = strtoull(optarg, &end, 10);
                        if (errno != 0 || end == optarg || *end || optarg[0] == '-' || v == 0) {
                                fprintf(stderr, "%s top: --iterations must be a positive number, got '%s'\n",
                                        t->prog, optarg);
                                return -EINVAL;
                        }
                        t->iterations = v;
                        break;
                }
                case 'b':
                        t->batch = true;
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "%s top: unexpected argument '%s'\n", t->prog, argv[optind]);
                return -EINVAL;
        }
        return 0;
}

/* "kfdbrokerd 0.1.0 on gfx1030 (sim)" from the Version and Devices properties. */
static void top_read_title(Top *t) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *version = NULL;
        const char *backend = NULL, *gfx = NULL, *name = NULL;
        uint32_t gpu_id, vendor, device, cus;
        uint64_t vram;
        char b[3][96];
        int r;

        r = sd_bus_get_property_string(t->bus, "org.kfdbroker.Broker1", "/org/kfdbroker/Broker1",
                                       "org.kfdbroker.Broker1", "Version", &error, &version);
        sd_bus_error_free(&error);
        if (r >= 0)
                r = sd_bus_get_property(t->bus, "org.kfdbroker.Broker1", "/org/kfdbroker/Broker1",
                                        "org.kfdbroker.Broker1", "Devices", &error, &reply, "a(sssuuuut)");
        sd_bus_error_free(&error);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, SD_BUS_TYPE_ARRAY, "(sssuuuut)");
        if (r >= 0)
                r = sd_bus_message_read(reply, "(sssuuuut)", &backend, &gfx, &name, &gpu_id, &vendor,
                                        &device, &cus, &vram);
        if (r > 0)
                snprintf(t->title, sizeof(t->title), "kfdbrokerd %s on %s (%s%s)",
                         ctl_sanitize(version, b[0], sizeof(b[0])), ctl_sanitize(gfx, b[1], sizeof(b[1])),
                         strcmp(backend, "sim") == 0 ? "simulated GPU, " : "", ctl_sanitize(backend, b[2], sizeof(b[2])));
        else
                snprintf(t->title, sizeof(t->title), "kfdbrokerd %s",
                         version ? ctl_sanitize(version, b[0], sizeof(b[0])) : "?");
}

int ctl_top(const char *prog, bool json, int argc, char **argv) {
        Top t = { .prog = prog, .delay_s = 1.0, .sigfd = -EBADF };
        uint64_t deadline;
        int r;

        if (top_parse_options(&t, argc, argv) < 0)
                return CTL_EXIT_USAGE;
        if (!isatty(STDOUT_FILENO))
                t.batch = true;
        if (json) {
                /* For scripts: batch, and one sample unless -n asks for more. */
                t.json = t.batch = true;
                if (t.iterations == 0)
                        t.iterations = 1;
        }

        r = ctl_bus_open(prog, &t.bus);
        if (r < 0)
                return r;
        /* The first call also tells whether the daemon is there at all, before
         * the terminal is taken over. */
        r = top_sample(&t);
        if (r >= 0) {
                top_read_title(&t);
                r = top_setup_terminal(&t);
                if (r < 0)
                        fprintf(stderr, "%s top: cannot set up signal handling: %s\n", prog, strerror(-r));
        }
        for (uint64_t i = 1; r >= 0; i++) {
                top_compute_rates(&t);
                if (t.json)
                        top_print_json(&t);
                else
                        top_draw(&t);
                if (t.iterations > 0 && i >= t.iterations)
                        break;
                deadline = t.cur.when_ns + (uint64_t) (t.delay_s * 1e9);
                r = top_wait(&t, deadline);
                if (r <= 0)
                        break;
                r = top_sample(&t);
        }
        top_restore_terminal(&t);
        if (r < 0 && t.err[0])
                fprintf(stderr, "%s: %s\n", prog, t.err);
        free(t.cur.rows);
        free(t.prev.rows);
        sd_bus_flush_close_unref(t.bus);
        return r < 0 ? r : 0;
}
