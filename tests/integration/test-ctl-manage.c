/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl top` and `kfdbrokerctl limits` against the real kfdbrokerd
 * on a private system-like bus (the stock default-deny policy plus ours):
 * top's batch output under a known load (a client copying without pause
 * shows in its own row with SDMA busy time, an idle client next to it shows
 * none), limits shown and set with the effect observed on the client (a
 * lowered Buffers= makes the next AllocBuffer fail with EDQUOT naming the
 * limit), a set refused for another uid with the daemon's reason, and bad
 * keys and values refused with exit status 2 before anything is sent.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"
#include "kfdbroker.h"

#define NAME "org.kfdbroker.Broker1"
#define PATH "/org/kfdbroker/Broker1"
#define IFACE "org.kfdbroker.Broker1"

static TestDaemon d;
static TestBus tb;

static sd_bus *wait_for_name(void) {
        sd_bus *bus = NULL;

        for (int i = 0; i < 400; i++) {
                if (!bus)
                        cr_assert_eq(sd_bus_open_system(&bus), 0);
                if (sd_bus_get_name_creds(bus, NAME, 0, NULL) >= 0)
                        return bus;
                usleep(10000);
        }
        cr_assert_fail("%s never appeared on the private bus", NAME);
        return NULL;
}

static void setup(void) {
        static const char *const args[] = { "--bus=system", NULL };

        test_bus_start(&tb);
        test_daemon_start(&d, args);
        sd_bus_unref(wait_for_name());
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_bus_stop(&tb);
        test_fini_end();
}

TestSuite(ctl_manage, .init = setup, .fini = teardown, .timeout = 120);

static kfdb_session *connect_session(const char *name) {
        kfdb_session *s = NULL;
        int r = kfdb_session_new(d.sock, name, &s);

        cr_assert_eq(r, 0, "connect: %s", strerror(-r));
        return s;
}

static void free_outputs(char *out, char *err) {
        free(out);
        free(err);
}

/* ---- top ---- */

typedef struct Load {
        kfdb_session *s;
        kfdb_buffer *src, *dst;
        atomic_bool stop;
        atomic_uint copies;
        int error;
} Load;

/* Copies 4 MiB again and again, waiting for each, until told to stop. */
static void *load_thread(void *userdata) {
        Load *l = userdata;
        kfdb_batch *b = NULL;
        uint64_t fence;
        int r = kfdb_batch_new(l->s, &b);

        while (r >= 0 && !atomic_load(&l->stop)) {
                r = kfdb_batch_copy(b, l->dst, 0, l->src, 0, 4u << 20);
                if (r >= 0)
                        r = kfdb_batch_submit(b, NULL, &fence);
                if (r >= 0)
                        r = kfdb_fence_wait(l->s, fence, 10000);
                if (r >= 0)
                        atomic_fetch_add(&l->copies, 1);
        }
        l->error = r < 0 ? r : 0;
        kfdb_batch_free(b);
        return NULL;
}

/* Finds the data row of session id in one frame; fills the numbers and names. */
static bool top_row(const char *frame, uint64_t id, double *jobs, double *sdma, double *comp, char *mem,
                    unsigned *uid, char *who, char *client) {
        char want[32];
        const char *p;

        snprintf(want, sizeof(want), "\n%6llu ", (unsigned long long) id);
        p = strstr(frame, want);
        if (!p)
                return false;
        /* ID UID GPU JOBS/S SDMA% COMP% MEMORY(2 words) INFL UNIT/APP CLIENT */
        return sscanf(p + 1, "%*u %u %*u %lf %lf %lf %15s %*s %*u %127s %127[^\n]", uid, jobs, sdma, comp, mem, who,
                      client) == 7;
}

Test(ctl_manage, top_batch_follows_a_copying_client) {
        const char *args[] = { "top", "-b", "-n", "2", "--delay=0.5", NULL };
        kfdb_session *idle = connect_session("top-idle"), *busy = connect_session("top-busy");
        kfdb_buffer *idle_buf;
        Load load = { .s = busy };
        pthread_t thread;
        char *out, *err, *second, mem[16], who[128], client[128];
        double jobs, sdma, comp;
        unsigned uid;
        const char *busy_row, *idle_row;

        cr_assert_eq(kfdb_buffer_alloc(idle, 1u << 20, KFDB_PLACEMENT_GTT, &idle_buf), 0);
        cr_assert_eq(kfdb_buffer_alloc(busy, 4u << 20, KFDB_PLACEMENT_GTT, &load.src), 0);
        cr_assert_eq(kfdb_buffer_alloc(busy, 4u << 20, KFDB_PLACEMENT_GTT, &load.dst), 0);
        cr_assert_eq(pthread_create(&thread, NULL, load_thread, &load), 0);
        while (atomic_load(&load.copies) < 2 && load.error == 0)
                usleep(1000);

        cr_assert_eq(test_run_ctl(args, false, &out, &err), 0, "stderr: %s", err);
        atomic_store(&load.stop, true);
        pthread_join(thread, NULL);
        cr_assert_eq(load.error, 0, "the load failed: %s", strerror(-load.error));
        cr_assert_str_empty(err);
        cr_assert_null(strchr(out, '\033'), "batch mode writes no escape codes: %s", out);

        /* Two frames, each ending in a blank line. */
        second = strstr(out, "\n\nkfdbrokerd " KFDBROKER_VERSION " on gfx1030 (simulated GPU, sim), 2 sessions, every 0.5s, ");
        cr_assert_not_null(second, "%s", out);
        {
                static const char head[] = "kfdbrokerd " KFDBROKER_VERSION " on gfx1030 (simulated GPU, sim), 2 sessions, every 0.5s, ";

                cr_assert(strncmp(out, head, sizeof(head) - 1) == 0, "%s", out);
        }
        cr_assert(strstr(out, "\ntotal: buffers 9.0 MiB, "), "first frame: no rates yet: %s", out);
        cr_assert(strstr(out, "\n    ID    UID GPU   JOBS/S  SDMA%  COMP%     MEMORY  INFL  UNIT/APP"), "%s", out);
        cr_assert_eq(second[strlen(second) - 1], '\n');
        cr_assert_eq(second[strlen(second) - 2], '\n');

        /* First frame: the rows are there, with '-' for the rates. */
        {
                char want[128];
                const char *row;

                snprintf(want, sizeof(want), "\n%6llu %6u %3u %8s %6s %6s %10s ",
                         (unsigned long long) kfdb_session_get_id(busy), (unsigned) getuid(), 0u, "-", "-", "-",
                         "8.0 MiB");
                row = strstr(out, want);
                cr_assert(row && row < second, "first frame lacks '%s': %s", want, out);
        }

        /* Second frame: the copying client has SDMA busy time and jobs; the idle one none. */
        cr_assert(top_row(second, kfdb_session_get_id(busy), &jobs, &sdma, &comp, mem, &uid, who, client),
                  "no row for session %llu: %s", (unsigned long long) kfdb_session_get_id(busy), second);
        cr_assert_eq(uid, getuid());
        cr_assert_gt(jobs, 0.0, "%s", second);
        cr_assert_gt(sdma, 0.0, "a client copying without pause keeps SDMA busy: %s", second);
        cr_assert_leq(sdma, 110.0, "one session's jobs run on one queue: %s", second);
        cr_assert_eq(comp, 0.0);
        cr_assert_str_eq(mem, "8.0");
        cr_assert_str_eq(who, "-");
        cr_assert_str_eq(client, "top-busy");

        cr_assert(top_row(second, kfdb_session_get_id(idle), &jobs, &sdma, &comp, mem, &uid, who, client),
                  "%s", second);
        cr_assert_eq(jobs, 0.0);
        cr_assert_eq(sdma, 0.0);
        cr_assert_str_eq(mem, "1.0");
        cr_assert_str_eq(client, "top-idle");

        /* Sorted by GPU busy: the copying client first. */
        {
                char b[32], i[32];
                snprintf(b, sizeof(b), "\n%6llu ", (unsigned long long) kfdb_session_get_id(busy));
                snprintf(i, sizeof(i), "\n%6llu ", (unsigned long long) kfdb_session_get_id(idle));
                busy_row = strstr(second, b);
                idle_row = strstr(second, i);
                cr_assert(busy_row && idle_row && busy_row < idle_row, "%s", second);
        }
        cr_assert(strstr(second, "\ntotal: "), "%s", second);
        cr_assert(strstr(second, " jobs/s, SDMA "), "%s", second);
        cr_assert(strstr(second, "%, compute 0.0%, buffers 9.0 MiB, "), "%s", second);
        free_outputs(out, err);
        kfdb_session_free(busy);
        kfdb_session_free(idle);
}

Test(ctl_manage, top_bad_usage_and_no_daemon) {
        static const struct {
                const char *args[6];
                const char *err;
        } bad[] = {
                { { "top", "-d", "0", NULL }, "kfdbrokerctl top: --delay must be seconds in 0.1..86400, got '0'\n" },
                { { "top", "--delay=soon", NULL }, "kfdbrokerctl top: --delay must be seconds in 0.1..86400, got 'soon'\n" },
                { { "top", "-n", "0", NULL }, "kfdbrokerctl top: --iterations must be a positive number, got '0'\n" },
                { { "top", "-n", "-3", NULL }, "kfdbrokerctl top: --iterations must be a positive number, got '-3'\n" },
                { { "top", "extra", NULL }, "kfdbrokerctl top: unexpected argument 'extra'\n" },
        };
        const char *args[] = { "top", "-b", "-n", "1", NULL };
        char *out, *err;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_expect_eq(test_run_ctl(bad[i].args, false, &out, &err), 2, "%s", bad[i].args[1]);
                cr_expect_str_eq(err, bad[i].err);
                cr_expect_str_empty(out);
                free_outputs(out, err);
        }

        /* One frame of a daemon without clients: the header alone. */
        cr_assert_eq(test_run_ctl(args, false, &out, &err), 0, "%s", err);
        cr_assert(strstr(out, ", 0 sessions, every 1.0s, "), "%s", out);
        free_outputs(out, err);

        /* The daemon gone from the bus. */
        cr_assert_eq(test_daemon_stop(&d), 0);
        cr_assert_eq(test_run_ctl(args, false, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl: org.kfdbroker.Broker1 is not on the system bus (is kfdbrokerd running, with --bus=system? Without it, only the socket's commands work: status, device, demo, selftest, terminate)\n");
        free_outputs(out, err);
        test_daemon_start(&d, (const char *const[]) { "--bus=system", NULL });
        sd_bus_unref(wait_for_name());
}

/* Reads what the pty master gives within timeout_ms and appends it to buf; stops early
 * once buf contains until. Returns the bytes added. */
static size_t pty_read(int fd, char *buf, size_t cap, size_t *len, const char *until, int timeout_ms) {
        size_t before = *len;

        for (int waited = 0; waited < timeout_ms; waited += 10) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                ssize_t n;

                if (poll(&p, 1, 10) == 1) {
                        n = read(fd, buf + *len, cap - *len - 1);
                        /* EIO while no slave is open (the child not yet started, or gone):
                         * keep waiting until the deadline. */
                        if (n <= 0) {
                                usleep(10000);
                                continue;
                        }
                        *len += (size_t) n;
                        buf[*len] = 0;
                }
                if (until && strstr(buf + before, until))
                        break;
        }
        return *len - before;
}

/* The longest line of a stretch of terminal output, escape sequences removed. */
static size_t widest_line(const char *s, unsigned *ret_lines) {
        size_t widest = 0, cur = 0;
        unsigned lines = 1;

        for (; *s; s++) {
                if (*s == '\033') {
                        /* CSI: ESC [ parameters, then a final byte in @..~ */
                        for (s++; *s && s[1] && !(s[1] >= '@' && s[1] <= '~' && s[1] != '['); s++)
                                ;
                        if (*s)
                                s++;
                        continue;
                }
                if (*s == '\r')
                        continue;
                if (*s == '\n') {
                        widest = cur > widest ? cur : widest;
                        cur = 0;
                        lines++;
                        continue;
                }
                cur++;
        }
        *ret_lines = lines;
        return cur > widest ? cur : widest;
}

/* On a terminal: the alternate screen, redrawn in place, cut to the window and
 * redrawn when it changes; 'q' and Ctrl-C quit with exit 0 and give the
 * terminal back (screen, cursor, line mode). */
Test(ctl_manage, top_on_a_terminal_follows_the_window_and_quits) {
        static const char quit_keys[] = { 'q', '\003' };
        kfdb_session *s[3] = { connect_session("pty-a"), connect_session("pty-b"), connect_session("pty-c") };

        for (unsigned k = 0; k < sizeof(quit_keys); k++) {
                struct winsize ws = { .ws_row = 24, .ws_col = 100 };
                static char out[65536];
                size_t len = 0;
                unsigned lines;
                struct termios tio;
                int master, status;
                pid_t pid;

                out[0] = 0;
                pid = forkpty(&master, NULL, NULL, &ws);
                cr_assert_geq(pid, 0);
                if (pid == 0) {
                        execl(getenv("KFDBROKERCTL"), "kfdbrokerctl", "top", "--delay=0.2", (char *) NULL);
                        _exit(127);
                }
                /* The first frame: alternate screen, no cursor, home, the header. */
                pty_read(master, out, sizeof(out), &len, "\033[J", 5000);
                cr_assert(strncmp(out, "\033[?1049h\033[?25l\033[H", 16) == 0, "%s", out);
                cr_assert(strstr(out, "pty-c"), "%s", out);
                cr_assert_leq(widest_line(out, &lines), 100, "%s", out);

                /* A window of 40 columns and 5 rows: the kernel sends SIGWINCH. */
                ws = (struct winsize) { .ws_row = 5, .ws_col = 40 };
                cr_assert_eq(ioctl(master, TIOCSWINSZ, &ws), 0);
                usleep(300000);
                len = 0;
                pty_read(master, out, sizeof(out), &len, NULL, 300);
                {
                        const char *home = NULL; /* the last frame: from its "\033[H" */

                        for (const char *p = out; (p = strstr(p, "\033[H")); p++)
                                home = p;
                        cr_assert_not_null(home, "no redraw after the resize: %s", out);
                        cr_assert_leq(widest_line(home, &lines), 40, "cut to 40 columns: %s", home);
                        cr_assert_leq(lines, 5, "cut to 5 rows: %s", home);
                        cr_assert(strstr(home, "more)"), "the rows that do not fit are counted: %s", home);
                }

                /* Line mode is off while it runs... */
                cr_assert_eq(tcgetattr(master, &tio), 0);
                cr_assert_eq(tio.c_lflag & (ICANON | ECHO), 0);
                cr_assert_eq(write(master, &quit_keys[k], 1), 1);
                len = 0;
                pty_read(master, out, sizeof(out), &len, "\033[?1049l", 5000);
                cr_assert_eq(waitpid(pid, &status, 0), pid);
                cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "key 0x%02x: status 0x%x", quit_keys[k],
                          status);
                cr_assert(strstr(out, "\033[?25h\033[?1049l"), "cursor and screen given back: %s", out);
                /* ...and back on after. */
                cr_assert_eq(tcgetattr(master, &tio), 0);
                cr_assert_eq(tio.c_lflag & (ICANON | ECHO), (tcflag_t) (ICANON | ECHO));
                close(master);
        }
        for (unsigned i = 0; i < 3; i++)
                kfdb_session_free(s[i]);
}

/* ---- accounting: a session's Usage and Limits dictionaries ---- */

Test(ctl_manage, accounting_shows_each_sessions_usage_and_limits) {
        const char *json[] = { "--json", "accounting", NULL }, *text[] = { "accounting", NULL };
        kfdb_session *s = connect_session("acct");
        kfdb_buffer *a;
        kfdb_batch *b;
        uint64_t fence;
        char *out, *err;

        cr_assert_eq(kfdb_buffer_alloc(s, 1u << 20, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_fill(b, a, 0, 65536, 7), 0);
        cr_assert_eq(kfdb_batch_submit(b, NULL, &fence), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0);

        cr_assert_eq(test_run_ctl(json, false, &out, &err), 0, "%s", err);
        cr_assert(strstr(out, "\"client_name\":\"acct\","), "%s", out);
        cr_assert(strstr(out, ",\"limits\":{\"buffer_memory\":4294967296,"), "%s", out);
        cr_assert(strstr(out, ",\"usage\":{\"jobs_submitted\":1,\"jobs_completed\":1,\"jobs_failed\":0,"
                              "\"busy_nsec_sdma\":"), "%s", out);
        cr_assert(strstr(out, ",\"bytes_filled\":65536,\"buffer_bytes\":1048576,"), "%s", out);
        cr_assert(strstr(out, "\"drm_usage\":\"drm-driver:\\tkfdbroker\\n"), "%s", out);
        /* Its GPU time on each GPU (one here), a JSON array. */
        cr_assert(strstr(out, "\"busy_nsec_by_gpu\":["), "%s", out);
        free_outputs(out, err);

        cr_assert_eq(test_run_ctl(text, false, &out, &err), 0, "%s", err);
        cr_assert(strstr(out, "\n  Limits:\n    BufferMemory         4294967296\n"), "%s", out);
        cr_assert(strstr(out, "\n  Usage:\n    JobsSubmitted        1\n    JobsCompleted        1\n"), "%s", out);
        cr_assert(strstr(out, "\n    BytesFilled          65536\n"), "%s", out);
        cr_assert(strstr(out, "\n  BusyNSecByGPU        "), "%s", out);
        cr_assert(!strstr(out, "\n  BusyNSecByGPU        -\n"), "one number, not '-':\n%s", out);
        cr_assert(strstr(out, "\n  DrmUsage             drm-driver: kfdbroker\n"
                              "                       drm-pdev: 0000:03:00.0\n"
                              "                       drm-client-id: "), "%s", out);
        free_outputs(out, err);
        kfdb_batch_free(b);
        kfdb_session_free(s);
}

/* The session's Usage BufferByteSeconds as D-Bus sends it (a double). */
static double byte_seconds(sd_bus *bus, uint64_t id) {
        sd_bus_message *reply = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        double sent = -1;

        cr_assert_geq(sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, &reply, "t", id), 0,
                      "GetSession: %s", e.message);
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
        while (sd_bus_message_enter_container(reply, 'e', "sv") > 0) {
                const char *k;

                cr_assert_geq(sd_bus_message_read(reply, "s", &k), 0);
                if (strcmp(k, "Usage") != 0) {
                        cr_assert_geq(sd_bus_message_skip(reply, "v"), 0);
                } else {
                        cr_assert_geq(sd_bus_message_enter_container(reply, 'v', "a{sv}"), 0);
                        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
                        while (sd_bus_message_enter_container(reply, 'e', "sv") > 0) {
                                cr_assert_geq(sd_bus_message_read(reply, "s", &k), 0);
                                if (strcmp(k, "BufferByteSeconds") == 0)
                                        cr_assert_geq(sd_bus_message_read(reply, "v", "d", &sent), 0);
                                else
                                        cr_assert_geq(sd_bus_message_skip(reply, "v"), 0);
                                cr_assert_geq(sd_bus_message_exit_container(reply), 0);
                        }
                        cr_assert_geq(sd_bus_message_exit_container(reply), 0);
                        cr_assert_geq(sd_bus_message_exit_container(reply), 0);
                }
                cr_assert_geq(sd_bus_message_exit_container(reply), 0);
        }
        sd_bus_message_unref(reply);
        return sent;
}

/*
 * JSON numbers are what the daemon sent: the double BufferByteSeconds (which
 * grows while the session holds memory, so it is read over D-Bus before and
 * after) is printed with all the digits it needs — %.6g printed 6 — and a
 * limit of "infinity" (2^64-1 on D-Bus) is the string "infinity", never
 * 18446744073709551615.
 */
Test(ctl_manage, json_doubles_exact_and_no_limit_as_infinity) {
        const char *json[] = { "--json", "accounting", NULL }, *text[] = { "accounting", NULL };
        sd_bus *bus = wait_for_name();
        kfdb_session *s = connect_session("json-exact");
        char *out, *err, *p, *end;
        double before, after, printed;
        unsigned digits = 0;
        kfdb_buffer *a;

        cr_assert_eq(kfdb_buffer_alloc(s, 3u << 20, KFDB_PLACEMENT_GTT, &a), 0);
        usleep(12345);
        before = byte_seconds(bus, kfdb_session_get_id(s));
        cr_assert_gt(before, 0.0, "BufferByteSeconds over D-Bus: %g", before);

        cr_assert_eq(test_run_ctl(json, false, &out, &err), 0, "%s", err);
        after = byte_seconds(bus, kfdb_session_get_id(s));
        p = strstr(out, "\"client_name\":\"json-exact\",");
        cr_assert_not_null(p, "%s", out);
        p = strstr(p, "\"buffer_byte_seconds\":");
        cr_assert_not_null(p, "%s", out);
        p += strlen("\"buffer_byte_seconds\":");
        printed = strtod(p, &end);
        cr_assert(end > p && (*end == '}' || *end == ','), "not a JSON number: %.40s", p);
        for (const char *c = p; c < end && *c != 'e'; c++)
                digits += *c >= '0' && *c <= '9';
        cr_assert(printed >= before && printed <= after, "BufferByteSeconds printed as %.*s, D-Bus said %.17g then %.17g",
                  (int) (end - p), p, before, after);
        cr_assert_geq(digits, 10, "BufferByteSeconds printed as %.*s: its digits were cut", (int) (end - p), p);
        /* The harness's policy says JobTimeout=infinity. */
        cr_assert(strstr(out, "\"job_timeout_usec\":\"infinity\","), "%s", out);
        cr_assert_null(strstr(out, "18446744073709551615"), "%s", out);
        free_outputs(out, err);

        cr_assert_eq(test_run_ctl(text, false, &out, &err), 0, "%s", err);
        cr_assert(strstr(out, "\n    JobTimeoutUSec       infinity\n"), "%s", out);
        cr_assert_null(strstr(out, "18446744073709551615"), "%s", out);
        free_outputs(out, err);
        kfdb_buffer_free(a);
        kfdb_session_free(s);
        sd_bus_unref(bus);
}

/* ---- limits ---- */

static char *limits_show(uint64_t id, bool json) {
        char ids[32];
        const char *text[] = { "limits", ids, NULL }, *js[] = { "--json", "limits", ids, NULL };
        char *out, *err;

        snprintf(ids, sizeof(ids), "%llu", (unsigned long long) id);
        cr_assert_eq(test_run_ctl(json ? js : text, false, &out, &err), 0, "stderr: %s", err);
        cr_assert_str_empty(err);
        free(err);
        return out;
}

Test(ctl_manage, limits_show_set_and_the_effect) {
        kfdb_session *s = connect_session("limits-test");
        uint64_t id = kfdb_session_get_id(s);
        kfdb_buffer *a, *b;
        char ids[32], want[512], *out, *err;
        const char *set[] = { "limits", ids, "Buffers=1", "BufferMemory=512M", "JobTimeout=1min 30s",
                              "Priority=high", "Weight=3", "ComputeDispatch=no", NULL };
        const char *set_usec[] = { "limits", ids, "JobTimeoutUSec=250us", "Events=infinity", NULL };
        kfdb_usage u;

        snprintf(ids, sizeof(ids), "%llu", (unsigned long long) id);
        out = limits_show(id, false);
        snprintf(want, sizeof(want), "Session %llu: uid %u, client \"limits-test\"\n",
                 (unsigned long long) id, (unsigned) getuid());
        cr_assert(strncmp(out, want, strlen(want)) == 0, "%s", out);
        /* The harness's rule granting compute dispatch (harness.c) is the one that matched. */
        snprintf(want, sizeof(want),
                 "\nLimits from the policy rules %s/00-tests-may-dispatch.conf:2\n"
                 "  BufferMemory=4G\n  MaxBufferSize=1G\n  Buffers=4096\n  Events=1024\n"
                 "  JobsInFlight=4096\n  Weight=1\n  Priority=normal\n  ComputeDispatch=yes\n"
                 "  Isolation=session\n  JobTimeout=infinity\n  DispatchTimeout=1min\n",
                 d.grant_dir);
        cr_assert(strstr(out, want), "%s", out);
        free(out);

        cr_assert_eq(test_run_ctl(set, false, &out, &err), 0, "stderr: %s", err);
        cr_assert_str_empty(out);
        cr_assert_str_empty(err);
        free_outputs(out, err);

        /* What the client sees: the limits of its session changed under it. */
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_assert_eq(u.limits.max_buffers, 1);
        cr_assert_eq(u.limits.max_buffer_bytes, 512ull << 20);
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 4096, KFDB_PLACEMENT_GTT, &b), -EDQUOT);
        cr_assert(strstr(kfdb_session_last_error(s), "max_buffers 1"), "the error names the limit: %s",
                  kfdb_session_last_error(s));

        out = limits_show(id, false);
        cr_assert(strstr(out, "\nLimits set with SetLimits (policy reloads keep them)\n"
                              "  BufferMemory=512M\n  MaxBufferSize=1G\n  Buffers=1\n  Events=1024\n"
                              "  JobsInFlight=4096\n  Weight=3\n  Priority=high\n  ComputeDispatch=no\n"
                              "  Isolation=session\n  JobTimeout=1min 30s\n  DispatchTimeout=1min\n"), "%s", out);
        free(out);
        out = limits_show(id, true);
        snprintf(want, sizeof(want),
                 "{\"id\":%llu,\"uid\":%u,\"client_name\":\"limits-test\",\"policy_rules\":\"%s/00-tests-may-dispatch.conf:2\","
                 "\"limits_overridden\":true,\"limits\":{",
                 (unsigned long long) id, (unsigned) getuid(), d.grant_dir);
        cr_assert(strncmp(out, want, strlen(want)) == 0, "%s", out);
        cr_assert(strstr(out, "\"buffer_memory\":536870912,\"max_buffer_size\":1073741824,\"buffers\":1,"
                              "\"events\":1024,\"jobs_in_flight\":4096,\"weight\":3,\"priority\":\"high\","
                              "\"compute_dispatch\":\"no\",\"isolation\":\"session\",\"job_timeout_usec\":90000000,"
                              "\"dispatch_timeout_usec\":60000000,\"user_buffer_memory\":\"infinity\",\"user_buffers\":"),
                  "%s", out);
        /* UserBuffers= comes from the daemon's fd limit. */
        cr_assert(strstr(out, ",\"unit_buffer_memory\":\"infinity\",\"user_jobs_in_flight\":65536,\"queues\":64,\"devices\":\"all\"}}\n"), "%s", out);
        free(out);

        /* The D-Bus key name works too (with a unit), and "infinity". */
        cr_assert_eq(test_run_ctl(set_usec, false, &out, &err), 0, "stderr: %s", err);
        free_outputs(out, err);
        out = limits_show(id, false);
        cr_assert(strstr(out, "  Events=infinity\n"), "%s", out);
        cr_assert(strstr(out, "  JobTimeout=250us\n"), "%s", out);
        free(out);
        kfdb_session_free(s);
}

Test(ctl_manage, limits_refused_for_another_user) {
        kfdb_session *s = connect_session("root-session");
        char ids[32], *out, *err;
        const char *set[] = { "limits", ids, "Weight=5", NULL };
        const char *show[] = { "limits", ids, NULL };

        snprintf(ids, sizeof(ids), "%llu", (unsigned long long) kfdb_session_get_id(s));
        cr_assert_eq(test_run_ctl(set, true, &out, &err), 1, "stdout: %s stderr: %s", out, err);
        cr_assert(strncmp(err, "kfdbrokerctl: SetLimits failed: Access denied: SetLimits requires root or "
                               "polkit authorization for action org.kfdbroker.manage",
                          strlen("kfdbrokerctl: SetLimits failed: Access denied: SetLimits requires root or "
                                 "polkit authorization for action org.kfdbroker.manage")) == 0, "%s", err);
        cr_assert_str_empty(out);
        free_outputs(out, err);

        cr_assert_eq(test_run_ctl(show, true, &out, &err), 1, "stdout: %s stderr: %s", out, err);
        cr_assert(strstr(err, "kfdbrokerctl: GetSession failed: Access denied: "), "%s", err);
        free_outputs(out, err);

        /* Nothing changed. */
        out = limits_show(kfdb_session_get_id(s), false);
        cr_assert(strstr(out, "  Weight=1\n"), "%s", out);
        cr_assert(strstr(out, "Limits from the policy rules ") && strstr(out, "/00-tests-may-dispatch.conf:2\n"),
                  "%s", out);
        free(out);
        kfdb_session_free(s);
}

Test(ctl_manage, limits_bad_keys_and_values_send_nothing) {
        kfdb_session *s = connect_session("bad-limits");
        char ids[32], *out, *err;
        static const struct {
                const char *kv[3];
                const char *err;
        } bad[] = {
                { { "Bogus=1" }, "kfdbrokerctl limits: unknown limit 'Bogus' (known: BufferMemory, MaxBufferSize, "
                                 "Buffers, Events, JobsInFlight, Weight, Priority, ComputeDispatch, Isolation, JobTimeout, "
                                 "DispatchTimeout, UserBufferMemory, UserBuffers, UnitBufferMemory, UserJobsInFlight, Queues)\n" },
                { { "Buffers=2", "Wieght=3" }, "kfdbrokerctl limits: unknown limit 'Wieght' (known: BufferMemory, "
                                               "MaxBufferSize, Buffers, Events, JobsInFlight, Weight, Priority, "
                                               "ComputeDispatch, Isolation, JobTimeout, DispatchTimeout, UserBufferMemory, "
                                               "UserBuffers, UnitBufferMemory, UserJobsInFlight, Queues)\n" },
                { { "Buffers=lots" }, "kfdbrokerctl limits: invalid Buffers= value \"lots\": expected a number below "
                                      "4294967295 or \"infinity\"\n" },
                { { "Devices=1" }, "kfdbrokerctl limits: Devices= cannot be set on a live session: a session stays on "
                                   "its GPU; set it in a policy file (kfdbroker-policy(5)) and reload\n" },
                { { "BufferMemory=2X" }, "kfdbrokerctl limits: invalid BufferMemory= value \"2X\": expected bytes with "
                                         "an optional K, M, G or T suffix (base 1024), or \"infinity\"\n" },
                { { "MaxBufferSize=0" }, "kfdbrokerctl limits: invalid MaxBufferSize= value \"0\": must be at least 1 byte\n" },
                { { "JobsInFlight=0" }, "kfdbrokerctl limits: invalid JobsInFlight= value \"0\": must be at least 1 "
                                        "(use ComputeDispatch= or Buffers= to deny work)\n" },
                { { "Weight=1001" }, "kfdbrokerctl limits: invalid Weight= value \"1001\": expected 1..1000\n" },
                { { "Priority=realtime" }, "kfdbrokerctl limits: invalid Priority= value \"realtime\": expected idle, "
                                           "low, normal or high\n" },
                { { "ComputeDispatch=perhaps" }, "kfdbrokerctl limits: invalid ComputeDispatch= value \"perhaps\": "
                                                 "expected no, isolated or yes\n" },
                { { "Isolation=process" }, "kfdbrokerctl limits: invalid Isolation= value \"process\": "
                                           "expected session, identity or shared\n" },
                { { "JobTimeout=0" }, "kfdbrokerctl limits: invalid JobTimeout= value \"0\": expected a time span such "
                                      "as 500ms, 30s, 5min, 1h, or \"infinity\" (zero or too large)\n" },
                { { "JobTimeoutUSec=30000000" }, "kfdbrokerctl limits: invalid JobTimeoutUSec= value \"30000000\": "
                                                 "give a unit, e.g. 30s, 500ms or 250us, or \"infinity\"\n" },
                { { "Weight=2", "Weight=3" }, "kfdbrokerctl limits: Weight= is given more than once\n" },
                { { "Weight=" }, "kfdbrokerctl limits: empty value for Weight=\n" },
                { { "Weight" }, "kfdbrokerctl limits: expected KEY=VALUE, got 'Weight'\n" },
                { { "Priority=\033[31mhigh" }, "kfdbrokerctl limits: invalid Priority= value \"?[31mhigh\": expected "
                                                "idle, low, normal or high\n" },
        };

        snprintf(ids, sizeof(ids), "%llu", (unsigned long long) kfdb_session_get_id(s));
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                const char *args[6] = { "limits", ids, bad[i].kv[0], bad[i].kv[1], NULL };

                cr_expect_eq(test_run_ctl(args, false, &out, &err), 2, "%s", bad[i].kv[0]);
                cr_expect_str_eq(err, bad[i].err);
                cr_expect_str_empty(out);
                free_outputs(out, err);
        }
        {
                const char *no_id[] = { "limits", NULL }, *bad_id[] = { "limits", "first", NULL };
                const char *json_set[] = { "--json", "limits", ids, "Weight=2", NULL };

                cr_expect_eq(test_run_ctl(no_id, false, &out, &err), 2);
                cr_expect_str_eq(err, "kfdbrokerctl limits: missing session id: kfdbrokerctl limits ID [KEY=VALUE...]\n");
                free_outputs(out, err);
                cr_expect_eq(test_run_ctl(bad_id, false, &out, &err), 2);
                cr_expect_str_eq(err, "kfdbrokerctl limits: invalid session id 'first' (see 'kfdbrokerctl sessions')\n");
                free_outputs(out, err);
                cr_expect_eq(test_run_ctl(json_set, false, &out, &err), 2);
                cr_expect_str_eq(err, "kfdbrokerctl limits: --json applies to showing limits, not to setting them\n");
                free_outputs(out, err);
        }
        /* A session that does not exist: the daemon's answer, exit 1. */
        {
                const char *args[] = { "limits", "999", "Weight=2", NULL };
                cr_expect_eq(test_run_ctl(args, false, &out, &err), 1);
                cr_expect_str_eq(err, "kfdbrokerctl: SetLimits failed: No session 999\n");
                free_outputs(out, err);
        }
        /* Nothing was sent: the session still has the defaults, not overridden. */
        out = limits_show(kfdb_session_get_id(s), false);
        cr_assert(strstr(out, "Limits from the policy rules ") && strstr(out, "/00-tests-may-dispatch.conf:2\n"),
                  "%s", out);
        cr_assert(strstr(out, "  Buffers=4096\n  Events=1024\n  JobsInFlight=4096\n  Weight=1\n"), "%s", out);
        free(out);
        kfdb_session_free(s);
}

/* ---- reload ---- */

static void write_policy(const char *path, const char *limits) {
        FILE *f = fopen(path, "we");

        cr_assert_not_null(f, "%s", path);
        fprintf(f, "[Match]\nUser=%u\n[Limits]\n%s", (unsigned) getuid(), limits);
        cr_assert_eq(fclose(f), 0);
}

/*
 * `kfdbrokerctl reload` waits for the daemon's answer: a broken policy makes
 * it exit 1 with the daemon's reason (file and line), and the policy in force
 * stays for connected and new sessions; a good one is applied at once (no
 * sleep before checking); another user is refused by polkit's rules, not
 * asked for a password (no terminal).
 */
Test(ctl_manage, reload_fails_with_the_reason_and_keeps_the_policy) {
        const char *reload[] = { "reload", NULL }, *reload_nobody[] = { "--no-ask-password", "reload", NULL };
        kfdb_session *s = connect_session("reload-test"), *later;
        char path[256], want[512], *out, *err;
        kfdb_usage u;

        snprintf(path, sizeof(path), "%s/50-reload.conf", d.grant_dir);
        write_policy(path, "Buffers=7\n");
        cr_assert_eq(test_run_ctl(reload, false, &out, &err), 0, "stderr: %s", err);
        cr_assert_str_empty(out);
        cr_assert_str_empty(err);
        free_outputs(out, err);
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_assert_eq(u.limits.max_buffers, 7, "applied when reload returned");

        write_policy(path, "Buffers=9\nWeight=heavy\n");
        cr_assert_eq(test_run_ctl(reload, false, &out, &err), 1, "stdout: %s stderr: %s", out, err);
        snprintf(want, sizeof(want),
                 "kfdbrokerctl: ReloadPolicy failed: Policy not reloaded, the old policy stays: %s:5: ", path);
        cr_assert(strncmp(err, want, strlen(want)) == 0, "want '%s...', got '%s'", want, err);
        cr_assert(strstr(err, "Weight="), "the message names the key: %s", err);
        cr_assert_str_empty(out);
        free_outputs(out, err);
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_assert_eq(u.limits.max_buffers, 7, "the old policy stays for a connected session");
        later = connect_session("reload-later");
        cr_assert_eq(kfdb_query(later, &u), 0);
        cr_assert_eq(u.limits.max_buffers, 7, "and for a new one");
        kfdb_session_free(later);

        cr_assert_eq(test_run_ctl(reload_nobody, true, &out, &err), 1, "stdout: %s stderr: %s", out, err);
        cr_assert(strstr(err, "kfdbrokerctl: ReloadPolicy failed: Access denied: ReloadPolicy requires root or polkit "
                              "authorization for action org.kfdbroker.manage"), "%s", err);
        free_outputs(out, err);

        cr_assert_eq(unlink(path), 0);
        cr_assert_eq(test_run_ctl(reload, false, &out, &err), 0, "stderr: %s", err);
        free_outputs(out, err);
        kfdb_session_free(s);
}

/* Without a daemon on the bus, reload says so and fails. */
Test(ctl_manage, reload_without_the_daemon_says_so) {
        const char *reload[] = { "reload", NULL };
        char *out, *err;

        cr_assert_eq(test_daemon_stop(&d), 0);
        cr_assert_eq(test_run_ctl(reload, false, &out, &err), 1);
        cr_assert_str_eq(err, "kfdbrokerctl: org.kfdbroker.Broker1 is not on the system bus (is kfdbrokerd running, with --bus=system? Without it, only the socket's commands work: status, device, demo, selftest, terminate)\n");
        free_outputs(out, err);
}

/* `terminate --bus` ends a session over D-Bus; the client is told why, and the
 * log names the caller by uid, unit and pid (not only a bus name), as it does
 * for SetLimits. */
Test(ctl_manage, terminate_over_the_bus_names_the_caller) {
        kfdb_session *s = connect_session("to-end");
        char ids[32], want[128], *out, *err, *log;
        const char *set[] = { "limits", ids, "Weight=2", NULL };
        const char *term[] = { "terminate", "--bus", ids, "bye", NULL };
        kfdb_usage u;

        snprintf(ids, sizeof(ids), "%llu", (unsigned long long) kfdb_session_get_id(s));
        cr_assert_eq(test_run_ctl(set, false, &out, &err), 0, "stderr: %s", err);
        free_outputs(out, err);
        cr_assert_eq(test_run_ctl(term, false, &out, &err), 0, "stderr: %s", err);
        free_outputs(out, err);
        cr_assert_eq(kfdb_query(s, &u), -ECONNRESET);
        cr_assert(strstr(kfdb_session_last_error(s), "kfdbrokerd ended the session: terminated over D-Bus by uid 0 (unit "),
                  "%s", kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "): bye"), "%s", kfdb_session_last_error(s));

        log = test_daemon_read_log(&d);
        snprintf(want, sizeof(want), "Session %s: limits set over D-Bus by uid 0 (unit ", ids);
        cr_assert(strstr(log, want), "no '%s' in:\n%s", want, log);
        snprintf(want, sizeof(want), "Session %s: terminated over D-Bus by uid 0 (unit ", ids);
        cr_assert(strstr(log, want) && strstr(strstr(log, want), ", pid "), "no '%s' in:\n%s", want, log);
        free(log);
        kfdb_session_free(s);
}
