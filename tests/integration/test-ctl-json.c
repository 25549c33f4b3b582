/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl's one JSON convention (docs/selftest.md "JSON"): every --json
 * verb prints JSON that python3's json module parses, and every key in it,
 * at any depth, is snake_case — `accounting` and `limits` too, whose D-Bus
 * dictionaries are CamelCase, and `top --json`, one object per sample.
 * Against the real kfdbrokerd on a private system-like bus, with one client
 * that copied a buffer (so every dictionary has entries).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;
static TestBus tb;

static void setup(void) {
        static const char *const args[] = { "--bus=system", NULL };
        sd_bus *bus = NULL;

        test_bus_start(&tb);
        test_daemon_start(&d, args);
        for (int i = 0; i < 400; i++) {
                if (!bus)
                        cr_assert_eq(sd_bus_open_system(&bus), 0);
                if (sd_bus_get_name_creds(bus, "org.kfdbroker.Broker1", 0, NULL) >= 0)
                        break;
                usleep(10000);
        }
        sd_bus_unref(bus);
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_bus_stop(&tb);
        test_fini_end();
}

TestSuite(ctl_json, .init = setup, .fini = teardown, .timeout = 120);

/* Parses every line of text (lines: JSON Lines) or the whole of it as JSON and
 * walks every key; exits 0 if all are snake_case, else prints the bad ones. */
static const char KEYS_SCRIPT[] =
        "import json, re, sys\n"
        "text = open(sys.argv[1]).read()\n"
        "docs = [json.loads(l) for l in text.splitlines() if l] if sys.argv[2] == 'lines' else [json.loads(text)]\n"
        "bad = []\n"
        "def walk(v):\n"
        "    if isinstance(v, dict):\n"
        "        for k, x in v.items():\n"
        "            if not re.fullmatch(r'[a-z][a-z0-9]*(_[a-z0-9]+)*', k): bad.append(k)\n"
        "            walk(x)\n"
        "    elif isinstance(v, list):\n"
        "        for x in v: walk(x)\n"
        "for d in docs: walk(d)\n"
        "if bad: print('not snake_case:', bad); sys.exit(1)\n"
        "if not docs: print('no JSON'); sys.exit(1)\n"
        "print(len(docs))\n";

/* Runs the script on text; returns its exit status, its stdout in *ret_out. */
static int check_keys(const char *text, bool lines, char **ret_out) {
        char path[64] = "/tmp/kfdbroker-ctl-json.XXXXXX";
        const char *args[] = { "python3", "-c", KEYS_SCRIPT, path, lines ? "lines" : "one", NULL };
        int fd = mkstemp(path), r, pipefd[2];
        char buf[4096];
        size_t len = 0;
        ssize_t n;
        pid_t pid;

        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
        cr_assert_eq(pipe(pipefd), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                dup2(pipefd[1], STDOUT_FILENO);
                execvp("python3", (char **) args);
                _exit(127);
        }
        close(pipefd[1]);
        while ((n = read(pipefd[0], buf + len, sizeof(buf) - 1 - len)) > 0)
                len += (size_t) n;
        buf[len] = 0;
        close(pipefd[0]);
        cr_assert_eq(waitpid(pid, &r, 0), pid);
        unlink(path);
        *ret_out = strdup(buf);
        cr_assert(WIFEXITED(r));
        return WEXITSTATUS(r);
}

static void expect_snake_json(const char *const *args, bool lines, const char *must_have) {
        char *out, *err, *verdict;
        int r = test_run_ctl(args, false, &out, &err);

        cr_assert_eq(r, 0, "%s: exit %d\nstdout: %s\nstderr: %s", args[1], r, out, err);
        cr_expect_eq(check_keys(out, lines, &verdict), 0, "%s --json: %s\n%s", args[1], verdict, out);
        if (must_have)
                cr_expect(strstr(out, must_have), "%s --json lacks %s:\n%s", args[1], must_have, out);
        free(verdict);
        free(out);
        free(err);
}

Test(ctl_json, every_json_verb_parses_with_snake_case_keys) {
        kfdb_session *s = NULL;
        kfdb_buffer *a = NULL, *b = NULL;
        kfdb_batch *batch = NULL;
        uint64_t fence;
        char id[32];

        cr_assert_eq(kfdb_session_new(d.sock, "json-keys", &s), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_GTT, &a), 0);
        cr_assert_eq(kfdb_buffer_alloc(s, 1 << 20, KFDB_PLACEMENT_GTT, &b), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_copy(batch, b, 0, a, 0, 1 << 20), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, 10000), 0);
        snprintf(id, sizeof(id), "%llu", (unsigned long long) kfdb_session_get_id(s));

        {
                const char *args[] = { "--json", "accounting", NULL };
                /* Was "BytesCopied" (the D-Bus name) before: NEWS says so. */
                expect_snake_json(args, false, "\"bytes_copied\":1048576");
        }
        {
                const char *args[] = { "--json", "sessions", NULL };
                expect_snake_json(args, false, "\"client_name\":\"json-keys\"");
        }
        {
                const char *args[] = { "--json", "limits", id, NULL };
                expect_snake_json(args, false, "\"user_buffer_memory\":");
        }
        {
                const char *args[] = { "--socket", d.sock, "--json", "status", NULL };
                expect_snake_json(args, false, "\"context_mechanism\":");
        }
        {
                /* The same verbs over the socket (a daemon without D-Bus). */
                const char *args[] = { "--socket", d.sock, "--json", "accounting", NULL };
                expect_snake_json(args, false, "\"bytes_copied\":1048576");
        }
        {
                const char *args[] = { "--socket", d.sock, "--json", "sessions", NULL };
                expect_snake_json(args, false, "\"client_name\":\"json-keys\"");
        }
        {
                const char *args[] = { "--socket", d.sock, "--json", "limits", id, NULL };
                expect_snake_json(args, false, "\"user_buffer_memory\":");
        }
        {
                /* One sample and exit: no -n needed; its rates are not known yet. */
                const char *args[] = { "--json", "top", NULL };
                expect_snake_json(args, true, "\"jobs_per_second\":null");
        }
        {
                /* Two samples, two lines, the second with rates. */
                const char *args[] = { "top", "--json", "-n", "2", "--delay=0.2", NULL };
                char *out, *err, *verdict;

                cr_assert_eq(test_run_ctl(args, false, &out, &err), 0, "%s", err);
                cr_expect_eq(check_keys(out, true, &verdict), 0, "%s\n%s", verdict, out);
                cr_expect_str_eq(verdict, "2\n", "%s", out);
                cr_expect(strstr(strchr(out, '\n'), "\"busy_percent_sdma\":0"), "%s", out);
                free(verdict);
                free(out);
                free(err);
        }
        kfdb_batch_free(batch);
        kfdb_buffer_free(a);
        kfdb_buffer_free(b);
        kfdb_session_free(s);
}
