/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl selftest (see ctl-selftest.h): asks the daemon about its
 * device, runs the checks of ctl-selftest-checks.c one after the other in the
 * caller's session, and prints what each found, as text (a line per check as
 * it ends) or as one JSON object at the end (docs/selftest.md). Each check
 * frees what it made, so one failing leaves nothing in the way of the next;
 * an alarm ends the program if a check still runs past its limit (a call the
 * daemon never answers).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl-compute.h"
#include "ctl-json.h"
#include "ctl-selftest-checks.h"
#include "ctl-selftest.h"
#include "util/macro.h"

/* The alarm that ends a check that hangs: above every wait it makes. */
#define CHECK_LIMIT_S 300u

static char alarm_message[160];

static void on_alarm(int sig) {
        (void) sig;
        (void) !write(STDERR_FILENO, alarm_message, strlen(alarm_message));
        _exit(EXIT_FAILURE);
}

static void run_check(const Selftest *t, size_t i, Check *c) {
        double t0 = selftest_now_ms();

        *c = (Check) { .name = selftest_checks[i].name, .result = RESULT_FAIL, .gbps = NAN, .elements_per_s = NAN,
                       .held_ms = NAN };
        snprintf(alarm_message, sizeof(alarm_message), "%s: the %s check did not finish within %u s\n",
                 t->prog, c->name, CHECK_LIMIT_S);
        alarm(CHECK_LIMIT_S);
        selftest_checks[i].run(t, c);
        alarm(0);
        selftest_drain_failures(t);
        c->ms = selftest_now_ms() - t0;
}

static const char *result_name(Result r) {
        return r == RESULT_PASS ? "pass" : r == RESULT_SKIP ? "skip" : "fail";
}

/* Milliseconds to the microsecond: what a clock read twice can tell. */
static double round_us(double ms) {
        return round(ms * 1e3) / 1e3;
}

/* A rate to four significant digits: more would be noise. */
static double round_rate(double v) {
        double scale;

        if (isnan(v) || v <= 0)
                return v;
        scale = pow(10.0, 3 - floor(log10(v)));
        return round(v * scale) / scale;
}

static void json_member_double(const char *key, double v) {
        printf(",\"%s\":", key);
        json_double(v);
}

static void json_member_errno(const char *key, int error) {
        printf(",\"%s\":", key);
        if (error < 0 && strerrorname_np(-error))
                json_string(strerrorname_np(-error));
        else
                fputs("null", stdout);
}

static void print_check_json(const Check *c) {
        json_member_string("{", "name", c->name);
        json_member_string(",", "result", result_name(c->result));
        json_member_double("ms", round_us(c->ms));
        json_member_string(",", "detail", c->detail);
        if (strcmp(c->name, "copy") == 0) {
                printf(",\"sizes\":[");
                for (size_t i = 0; i < c->n_copies; i++) {
                        printf("%s{\"bytes\":%" PRIu64, i ? "," : "", c->copies[i].bytes);
                        json_member_double("ms", round_us(c->copies[i].ms));
                        json_member_double("gbps", round_rate(c->copies[i].gbps));
                        printf("}");
                }
                printf("]");
        } else if (strcmp(c->name, "fill") == 0) {
                printf(",\"bytes\":%" PRIu64, c->bytes);
                json_member_double("gbps", round_rate(c->gbps));
        } else if (strcmp(c->name, "dispatch") == 0) {
                printf(",\"elements\":%" PRIu64, c->elements);
                json_member_double("elements_per_s", round_rate(c->elements_per_s));
        } else if (strcmp(c->name, "fault") == 0) {
                json_member_errno("error", c->error);
                printf(",\"context_lost_before\":%" PRIu64 ",\"context_lost_after\":%" PRIu64, c->context_lost_before,
                       c->context_lost_after);
        } else if (strcmp(c->name, "timeout") == 0) {
                json_member_string(",", "mechanism", c->mechanism ? c->mechanism : "");
                printf(",\"timeout_wait_ms\":%" PRIu32, c->timeout_wait_ms);
                json_member_double("held_ms", round_us(c->held_ms));
                json_member_errno("error", c->error);
        }
        printf("}");
}

static void print_json(const Selftest *t, const Check *cs, unsigned passed, unsigned failed, unsigned skipped,
                       bool ok) {
        json_member_string("{", "daemon_version", kfdb_session_get_daemon_version(t->s));
        json_member_string(",\"device\":{", "backend", t->dev.backend);
        json_member_string(",", "gfx_name", t->dev.gfx_name);
        json_member_string(",", "name", t->dev.name);
        printf(",\"gpu_id\":%" PRIu32 ",\"vendor_id\":%" PRIu32 ",\"device_id\":%" PRIu32 ",\"cu_count\":%" PRIu32
               ",\"vram_size\":%" PRIu64 ",\"kfd_major\":%" PRIu32 ",\"kfd_minor\":%" PRIu32
               ",\"sdma_queues\":%" PRIu32 ",\"compute_queues\":%" PRIu32 "}",
               t->dev.gpu_id, t->dev.vendor_id, t->dev.device_id, t->dev.cu_count, t->dev.vram_size,
               t->dev.kfd_major, t->dev.kfd_minor, t->dev.sdma_queues, t->compute_queues);
        json_member_string(",", "context_mechanism", t->contexts.mechanism);
        json_member_string(",", "context_mechanism_reason", t->contexts.reason);
        printf(",\"strict\":%s,\"checks\":[", t->o->strict ? "true" : "false");
        for (size_t i = 0; i < SELFTEST_N_CHECKS; i++) {
                if (i)
                        printf(",");
                print_check_json(&cs[i]);
        }
        printf("],\"passed\":%u,\"failed\":%u,\"skipped\":%u,\"ok\":%s}\n", passed, failed, skipped,
               ok ? "true" : "false");
}

static void print_header(const Selftest *t) {
        bool named = t->dev.name[0] && strcmp(t->dev.name, t->dev.gfx_name) != 0;

        printf("selftest of kfdbrokerd %s on %s%s%s%s (%s%s backend, KFD %" PRIu32 ".%" PRIu32 ", %" PRIu32
               " SDMA and %" PRIu32 " compute queues)\n",
               kfdb_session_get_daemon_version(t->s), t->dev.gfx_name, named ? " \"" : "", named ? t->dev.name : "",
               named ? "\"" : "", strcmp(t->dev.backend, "sim") == 0 ? "simulated GPU, " : "", t->dev.backend, t->dev.kfd_major, t->dev.kfd_minor, t->dev.sdma_queues,
               t->compute_queues);
        printf("GPU contexts: %s: %s\n", t->contexts.mechanism, t->contexts.reason);
}

static void print_check_text(const Check *c) {
        printf("  %-4s  %-14s %9.1f ms  %s\n", result_name(c->result), c->name, c->ms, c->detail);
}

int ctl_selftest(kfdb_session *s, const char *prog, const CtlSelftestOptions *o) {
        Selftest t = { .s = s, .prog = prog, .o = o };
        struct sigaction sa = { .sa_handler = on_alarm };
        Check cs[SELFTEST_N_CHECKS];
        unsigned passed = 0, failed = 0, skipped = 0;
        bool ok;
        int r;

        r = kfdb_device_info(s, &t.dev);
        if (r >= 0)
                r = kfdb_device_compute_queues(s, &t.compute_queues);
        if (r >= 0)
                r = kfdb_gpu_contexts_get(s, &t.contexts, NULL, 0);
        if (r < 0)
                return ctl_print_failure(s, prog, r, "cannot ask the daemon about its device");
        if (sigaction(SIGALRM, &sa, NULL) < 0)
                return -errno;
        if (!o->json) {
                print_header(&t);
                fflush(stdout);
        }
        for (size_t i = 0; i < SELFTEST_N_CHECKS; i++) {
                run_check(&t, i, &cs[i]);
                passed += cs[i].result == RESULT_PASS;
                failed += cs[i].result == RESULT_FAIL;
                skipped += cs[i].result == RESULT_SKIP;
                if (!o->json) {
                        print_check_text(&cs[i]);
                        fflush(stdout);
                }
        }
        ok = failed == 0 && (!o->strict || skipped == 0);
        if (o->json)
                print_json(&t, cs, passed, failed, skipped, ok);
        else {
                printf("%u checks: %u passed, %u failed, %u skipped%s\n", SELFTEST_N_CHECKS, passed, failed, skipped,
                       o->strict && skipped ? " (--strict: a skipped check fails the run)" : "");
                printf("selftest %s\n", ok ? "passed" : "FAILED");
        }
        return ok ? 0 : -EIO;
}
