/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl selftest` against the real kfdbrokerd on the simulated GPU:
 * every check passes, in text and in JSON (parsed by Python's json module and
 * checked key by key, as docs/selftest.md describes it); a daemon whose
 * policy makes checks fail (a tiny BufferMemory=) or skip (ComputeDispatch=no,
 * and --strict) ends it with exit status 1; a JobTimeout= shorter than the
 * wait makes the timeout check see the daemon's ETIME; in shared mode the
 * fault is skipped and the daemon lives on; bad options exit 2.
 *
 * SELFTEST_KERNELS_EMBEDDED (meson) says whether kfdbrokerctl was built with
 * its kernels: without them the three compute checks are skipped.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "harness.h"
#include "kfdbroker.h"

#define N_CHECKS 7
#if SELFTEST_KERNELS_EMBEDDED
#define N_COMPUTE_PASSED 3
#else
#define N_COMPUTE_PASSED 0
#endif

static TestDaemon d;
static char policydir[64];

/* Starts the daemon with a policy file for this uid holding limits (NULL: none) and one more option. */
static void start(const char *limits, const char *arg) {
        char policy_arg[128], path[160];
        const char *args[] = { policy_arg, arg, NULL };
        FILE *f;

        strcpy(policydir, "/tmp/kfdbroker-selftest.XXXXXX");
        cr_assert(mkdtemp(policydir));
        snprintf(path, sizeof(path), "%s/50-selftest.conf", policydir);
        f = fopen(path, "we");
        cr_assert(f);
        fprintf(f, "[Match]\nUser=%u\n\n[Limits]\n%s\n", (unsigned) getuid(), limits ? limits : "");
        cr_assert_eq(fclose(f), 0);
        snprintf(policy_arg, sizeof(policy_arg), "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
}

static void teardown(void) {
        char cmd[128];

        test_daemon_fini(&d);
        if (policydir[0]) {
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
                test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        }
        test_fini_end();
}

TestSuite(selftest, .fini = teardown, .timeout = 300);

/* Runs kfdbrokerctl --socket SOCK selftest ARGS...; returns its exit status. */
static int run_selftest(const char *a1, const char *a2, char **ret_out, char **ret_err) {
        const char *args[] = { "--socket", d.sock, "selftest", a1, a2, NULL };
        return test_run_ctl(args, false, ret_out, ret_err);
}

/* The text line of check name, or fails. */
static const char *check_line(const char *out, const char *result, const char *name) {
        char head[64];
        const char *p;

        snprintf(head, sizeof(head), "  %-4s  %-14s ", result, name);
        p = strstr(out, head);
        cr_assert(p, "no line '%s' in:\n%s", head, out);
        return p;
}

/* Writes text to a file and runs python3 -c script on it; returns its exit status. */
static int python_check(const char *text, const char *script) {
        char path[64] = "/tmp/kfdbroker-selftest-json.XXXXXX";
        int fd = mkstemp(path), status;
        pid_t pid;

        cr_assert_geq(fd, 0);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                execlp("python3", "python3", "-c", script, path, (char *) NULL);
                _exit(127);
        }
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        unlink(path);
        cr_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

Test(selftest, every_check_passes_in_text) {
        char *out, *err;
        int r;

        start(NULL, NULL);
        r = run_selftest(NULL, NULL, &out, &err);
        cr_assert_eq(r, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        cr_assert(strstr(out, "selftest of kfdbrokerd " KFDBROKER_VERSION " on gfx1030 (simulated GPU, sim backend, KFD 1.19, 2 SDMA and 8 compute "
                              "queues)\n"), "%s", out);
        cr_assert(strstr(out, "GPU contexts: kernel: a GPU context per client"), "%s", out);
        cr_assert(strstr(check_line(out, "pass", "copy"), "4 KiB "), "%s", out);
        cr_assert(strstr(check_line(out, "pass", "copy"), ", 64 MiB "), "%s", out);
        check_line(out, "pass", "fill");
        check_line(out, "pass", "events");
        /* The daemon's default JobTimeout= is infinity: the client's own wait ends. */
        cr_assert(strstr(check_line(out, "pass", "timeout"), "still held after "), "%s", out);
#if SELFTEST_KERNELS_EMBEDDED
        check_line(out, "pass", "events-engines");
        cr_assert(strstr(check_line(out, "pass", "dispatch"), "saxpy over 1048576 floats"), "%s", out);
        cr_assert(strstr(check_line(out, "pass", "fault"), "EFAULT (GPU memory fault in dispatch of kernel \"fault\", at "), "%s", out);
        cr_assert(strstr(out, "context_lost 0 -> 1; the next dispatch ran"), "%s", out);
        cr_assert(strstr(out, "\n7 checks: 7 passed, 0 failed, 0 skipped\nselftest passed\n"), "%s", out);
#else
        check_line(out, "skip", "dispatch");
        cr_assert(strstr(out, "\n7 checks: 4 passed, 0 failed, 3 skipped\nselftest passed\n"), "%s", out);
#endif
        free(out);
        free(err);
}

/* The JSON's keys, as docs/selftest.md lists them. */
static const char json_script[] =
        "import json, sys\n"
        "d = json.load(open(sys.argv[1]))\n"
        "want = int(sys.argv[2]) if len(sys.argv) > 2 else 0\n"
        "assert set(d) == {'daemon_version', 'device', 'context_mechanism', 'context_mechanism_reason', 'strict',\n"
        "                  'checks', 'passed', 'failed', 'skipped', 'ok'}, sorted(d)\n"
        "assert d['device']['backend'] == 'sim' and d['device']['gfx_name'] == 'gfx1030', d['device']\n"
        "assert set(d['device']) == {'backend', 'gfx_name', 'name', 'gpu_id', 'vendor_id', 'device_id', 'cu_count',\n"
        "    'vram_size', 'kfd_major', 'kfd_minor', 'sdma_queues', 'compute_queues'}, sorted(d['device'])\n"
        "assert d['context_mechanism'] == 'kernel' and d['strict'] is False\n"
        "names = [c['name'] for c in d['checks']]\n"
        "assert names == ['copy', 'fill', 'events', 'events-engines', 'dispatch', 'fault', 'timeout'], names\n"
        "extra = {'copy': {'sizes'}, 'fill': {'bytes', 'gbps'}, 'events': set(), 'events-engines': set(),\n"
        "         'dispatch': {'elements', 'elements_per_s'}, 'fault': {'error', 'context_lost_before',\n"
        "         'context_lost_after'}, 'timeout': {'mechanism', 'timeout_wait_ms', 'held_ms', 'error'}}\n"
        "c = {x['name']: x for x in d['checks']}\n"
        "for n, x in c.items():\n"
        "    assert set(x) == {'name', 'result', 'ms', 'detail'} | extra[n], (n, sorted(x))\n"
        "    assert x['ms'] > 0 and x['detail'], x\n"
        "compute = ['events-engines', 'dispatch', 'fault']\n"
        "for n in names:\n"
        "    assert c[n]['result'] == ('skip' if n in compute and not want else 'pass'), c[n]\n"
        "assert [s['bytes'] for s in c['copy']['sizes']] == [4096, 1 << 20, 64 << 20], c['copy']\n"
        "assert all(s['gbps'] > 0 and s['ms'] > 0 for s in c['copy']['sizes']), c['copy']\n"
        "assert c['fill']['bytes'] == 16 * 1024 * 1024 - 8 and c['fill']['gbps'] > 0, c['fill']\n"
        "if want:\n"
        "    assert c['dispatch']['elements'] == 1 << 20 and c['dispatch']['elements_per_s'] > 0, c['dispatch']\n"
        "    assert c['fault']['error'] == 'EFAULT', c['fault']\n"
        "    assert c['fault']['context_lost_after'] == c['fault']['context_lost_before'] + 1, c['fault']\n"
        "t = c['timeout']\n"
        "assert t['mechanism'] == 'client-wait' and t['error'] is None and t['timeout_wait_ms'] == 300, t\n"
        "assert t['held_ms'] >= 300, t\n"
        "assert d['passed'] == 4 + 3 * want and d['failed'] == 0 and d['skipped'] == 3 - 3 * want, d\n"
        "assert d['ok'] is True\n";

Test(selftest, json_parses_and_has_every_key) {
        char *out, *err, script[4096];
        int r;

        start(NULL, NULL);
        r = run_selftest("--json", "--timeout-wait=300", &out, &err);
        cr_assert_eq(r, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        /* One JSON document and nothing else on stdout. */
        cr_assert_eq(out[0], '{', "%s", out);
        cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "%s", out);
        snprintf(script, sizeof(script), "import sys; sys.argv.append('%d')\n%s", SELFTEST_KERNELS_EMBEDDED,
                 json_script);
        cr_assert_eq(python_check(out, script), 0, "the JSON does not hold what docs/selftest.md says:\n%s", out);
        free(out);
        free(err);
}

/* A session allowed 1 MiB of buffers: the copy of 64 MiB and the fill of 16 MiB fail with the daemon's words. */
Test(selftest, a_failing_check_exits_1) {
        char *out, *err;
        int r;

        start("BufferMemory=1M", NULL);
        r = run_selftest(NULL, NULL, &out, &err);
        cr_assert_eq(r, 1, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        /* The daemon's words name the limit and its key; strerror(EDQUOT) is not shown. */
        cr_assert(strstr(check_line(out, "fail", "copy"), "cannot allocate a buffer: buffer memory limit ("), "%s",
                  out);
        cr_assert(strstr(out, "policy BufferMemory=) reached"), "%s", out);
        cr_assert(!strstr(out, "Disk quota"), "%s", out);
        check_line(out, "fail", "fill");
        /* The checks after it still ran. */
        check_line(out, "pass", "timeout");
        cr_assert(strstr(out, " failed, ") && strstr(out, "\nselftest FAILED\n"), "%s", out);
        cr_assert_null(strstr(out, " 0 failed, "), "%s", out);
        free(out);
        free(err);

        r = run_selftest("--json", NULL, &out, &err);
        cr_assert_eq(r, 1, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        cr_assert_eq(python_check(out, "import json, sys\n"
                                       "d = json.load(open(sys.argv[1]))\n"
                                       "c = {x['name']: x for x in d['checks']}\n"
                                       "assert c['copy']['result'] == 'fail' and d['ok'] is False, d\n"
                                       "assert 'BufferMemory=' in c['copy']['detail'], c['copy']\n"
                                       "assert d['failed'] >= 2, d\n"),
                     0, "%s", out);
        free(out);
        free(err);
}

/* ComputeDispatch=no: the compute checks are skipped with the daemon's reason; that passes, but not --strict. */
/* A user allowed 24 MiB over all sessions: the demo's first 64 MiB buffer does not fit, and kfdbrokerctl says which limit refused it, by its policy key, not "Disk quota
 * exceeded" (strerror of EDQUOT, the errno that carries every limit). */
Test(selftest, a_limit_is_named_by_its_key) {
        char *out, *err;
        int r;

        start("UserBufferMemory=24M", NULL);
        {
                const char *args[] = { "--socket", d.sock, "demo", NULL };
                r = test_run_ctl(args, false, &out, &err);
        }
        cr_assert_eq(r, 1, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        cr_assert(strstr(err, "per-user buffer memory limit (policy UserBufferMemory=24M) reached: "), "%s", err);
        cr_assert(!strstr(err, "Disk quota"), "%s", err);
        free(out);
        free(err);
}

Test(selftest, skipped_checks_fail_only_with_strict) {
        char *out, *err;
        int r;

        start("ComputeDispatch=no", NULL);
        r = run_selftest(NULL, NULL, &out, &err);
        cr_assert_eq(r, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
#if SELFTEST_KERNELS_EMBEDDED
        cr_assert(strstr(check_line(out, "skip", "events-engines"),
                         "compute dispatch is not allowed for this client by policy (ComputeDispatch=no"),
                  "%s", out);
        cr_assert(strstr(check_line(out, "skip", "dispatch"), "policy does not grant"), "%s", out);
        cr_assert(strstr(check_line(out, "skip", "fault"), "ComputeDispatch=no"), "%s", out);
#endif
        cr_assert(strstr(out, "\n7 checks: 4 passed, 0 failed, 3 skipped\nselftest passed\n"), "%s", out);
        free(out);
        free(err);

        r = run_selftest("--strict", NULL, &out, &err);
        cr_assert_eq(r, 1, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        cr_assert(strstr(out, "\n7 checks: 4 passed, 0 failed, 3 skipped (--strict: a skipped check fails the "
                              "run)\nselftest FAILED\n"), "%s", out);
        free(out);
        free(err);

        r = run_selftest("--strict", "--json", &out, &err);
        cr_assert_eq(r, 1);
        cr_assert(strstr(out, "\"strict\":true,"), "%s", out);
        cr_assert(strstr(out, "\"passed\":4,\"failed\":0,\"skipped\":3,\"ok\":false}\n"), "%s", out);
        free(out);
        free(err);
}

/* A JobTimeout= shorter than --timeout-wait: the daemon ends the held job with
 * ETIME. (Long enough for every other job of the suite on a loaded machine.) */
Test(selftest, job_timeout_of_the_daemon) {
        char *out, *err;
        int r;

        start("JobTimeout=5s", NULL);
        r = run_selftest("--timeout-wait=60000", NULL, &out, &err);
        cr_assert_eq(r, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        cr_assert(strstr(check_line(out, "pass", "timeout"), "the daemon ended the held job with ETIME after "), "%s",
                  out);
        cr_assert(strstr(out, "waited longer than its timeout of 5.000 s"), "%s", out);
        free(out);
        free(err);

        r = run_selftest("--json", "--timeout-wait=60000", &out, &err);
        cr_assert_eq(r, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        cr_assert(strstr(out, "\"mechanism\":\"job-timeout\",\"timeout_wait_ms\":60000,\"held_ms\":"), "%s", out);
        cr_assert(strstr(out, ",\"error\":\"ETIME\"}"), "%s", out);
        free(out);
        free(err);
}

/* Shared mode: a fault would end every client's work, so the check is skipped, and the daemon serves on. */
Test(selftest, fault_skipped_in_shared_mode) {
        char *out, *err;
        int r;

        start("ComputeDispatch=yes", "--contexts=shared");
        r = run_selftest(NULL, NULL, &out, &err);
        cr_assert_eq(r, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", r, out, err);
        cr_assert(strstr(out, "GPU contexts: none: "), "%s", out);
        cr_assert(strstr(check_line(out, "skip", "fault"), "one GPU context shared by every client (mechanism none)"),
                  "%s", out);
#if SELFTEST_KERNELS_EMBEDDED
        check_line(out, "pass", "dispatch");
#endif
        free(out);
        free(err);
        /* The daemon still serves. */
        kfdb_session *s;
        cr_assert_eq(kfdb_session_new(d.sock, "after", &s), 0);
        kfdb_session_free(s);
}

Test(selftest, bad_options_exit_2) {
        static const char *const bad[][2] = {
                { "--timeout-wait=0", "--timeout-wait must be 1..60000 milliseconds, got '0'" },
                { "--timeout-wait=1s", "--timeout-wait must be 1..60000 milliseconds, got '1s'" },
                { "extra", "unexpected argument 'extra'" },
        };
        char *out, *err;

        start(NULL, NULL);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_assert_eq(run_selftest(bad[i][0], NULL, &out, &err), 2, "%s", bad[i][0]);
                cr_assert(strstr(err, bad[i][1]), "%s", err);
                cr_assert_str_empty(out);
                free(out);
                free(err);
        }
}
