/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the policy files (daemon/policy: the .conf parser and the
 * limit value syntax), which an administrator writes and a reload or a
 * runtime drop-in in /run feeds to the root daemon. The first byte picks
 * what the rest is:
 *   - even: a whole .conf file for policy_load_string(), whose rules are then
 *     resolved for a few identities (root, a user in a systemd unit, a
 *     Flatpak app, a container);
 *   - odd: one limit value (up to the first NUL) for the key chosen by the
 *     second byte, through policy_limit_parse(), and then the value as bytes,
 *     a count and a time span through the pure value parsers.
 *
 * Besides "no crash, no leak, no UB" it checks the promises of policy.h and
 * policy-limits.h: only the documented errnos; a refusal always has a
 * printable message (control characters shown as '?'), naming FILE:LINE for a
 * file; a loaded policy reports as many rules as it returned; resolved limits
 * stay in the ranges the parser enforces; the "matched" list is terminated;
 * every accepted value is written back by policy_limit_format() (and the
 * byte/time-span formatters) so that it reads back to the same value.
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files on its command line (the
 * seed corpus: the shipped policy files, the example, and the files of
 * tests/fuzz/corpus/policy).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_VALUE 256u

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-policy: broken promise: %s\n", what);
                abort();
        }
}

static bool printable(const char *s, size_t max) {
        size_t n = strnlen(s, max);

        if (n == 0 || n == max)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

static void check_limits(const PolicyLimits *l) {
        check(l->buffer_memory >= 1 && l->max_buffer_size >= 1, "a size below 1 byte");
        check(l->jobs_in_flight >= 1, "JobsInFlight below 1");
        check(l->buffers == POLICY_INFINITY || l->buffers < UINT32_MAX, "Buffers out of range");
        check(l->events == POLICY_INFINITY || l->events < UINT32_MAX, "Events out of range");
        check(l->weight >= POLICY_WEIGHT_MIN && l->weight <= POLICY_WEIGHT_MAX, "Weight out of range");
        check((unsigned) l->priority < _POLICY_PRIORITY_MAX, "Priority out of range");
        check((unsigned) l->compute_dispatch < _POLICY_COMPUTE_MAX, "ComputeDispatch out of range");
        check((unsigned) l->isolation < _POLICY_ISOLATION_MAX, "Isolation out of range");
        check(l->job_timeout_ns >= 1 && l->dispatch_timeout_ns >= 1, "a zero timeout");
}

/* Who a rule may be matched against: fields as identity.c fills them. */
static gid_t user_gids[] = { 100, 105, 1000 };
static const Identity identities[] = {
        { .uid = 0, .gid = 0, .pid = 1, .comm = "systemd", .cgroup = (char *) "/init.scope" },
        { .uid = 1000, .gid = 1000, .pid = 4242, .gids = user_gids, .n_gids = 3, .comm = "runner",
          .cgroup = (char *) "/system.slice/gitlab-runner@ci.service", .unit = (char *) "gitlab-runner@ci.service",
          .slice = (char *) "system.slice", .user_unit_uid = (uid_t) -1 },
        { .uid = 1000, .gid = 1000, .pid = 4243, .comm = "renderer",
          .cgroup = (char *) "/user.slice/user-1000.slice/user@1000.service/app.slice/app-flatpak-org.example.Renderer-1.scope",
          .unit = (char *) "user@1000.service", .user_unit = (char *) "app-flatpak-org.example.Renderer-1.scope",
          .user_unit_uid = 1000, .slice = (char *) "user-1000.slice", .app_id = (char *) "org.example.Renderer",
          .app_source = IDENTITY_APP_FLATPAK_SCOPE },
        { .uid = 65534, .gid = 65534, .pid = 77, .comm = "job", .in_container = true,
          .cgroup = (char *) "/machine.slice/machine-ci\\x2d7.scope/payload", .unit = (char *) "machine-ci\\x2d7.scope",
          .slice = (char *) "machine.slice", .user_unit_uid = (uid_t) -1, .container = (char *) "ci-7",
          .container_source = IDENTITY_CONTAINER_MACHINE, .other_pid_ns = true, .other_mnt_ns = true },
};

static void fuzz_file(const char *text, size_t len) {
        Policy *p = NULL;
        char err[512], matched[128];
        int r;

        memset(err, 0x55, sizeof err);
        r = policy_load_string(text, len, "fuzz.conf", &p, err, sizeof err);
        if (r < 0) {
                check(p == NULL, "a failed load returned a policy");
                check(r == -EINVAL || r == -EFBIG || r == -E2BIG || r == -ENOMEM, "undocumented errno");
                check(printable(err, sizeof err), "a refusal without a printable message");
                check(r == -ENOMEM || strncmp(err, "fuzz.conf:", 10) == 0, "a refusal that does not name FILE:LINE");
                return;
        }
        check(p != NULL, "a load without a policy");
        check((size_t) r == policy_n_rules(p), "the rule count differs from the returned one");
        check(policy_n_files(p) == 1, "one file loaded, another count reported");
        for (size_t i = 0; i < sizeof identities / sizeof identities[0]; i++) {
                PolicyLimits l;
                int n;

                memset(matched, 0x55, sizeof matched);
                n = policy_resolve(p, &identities[i], NULL, &l, matched, sizeof matched);
                check(n >= 0 && (size_t) n <= policy_n_rules(p), "matching rule count");
                check(memchr(matched, 0, sizeof matched) != NULL, "matched list not terminated");
                check(n > 0 || matched[0] == 0, "no rule matched but some are listed");
                check_limits(&l);
        }
        policy_free(p);
}

static void round_trip(PolicyLimitKey k, const PolicyLimits *l) {
        PolicyLimits again = *l;
        char buf[128], buf2[128], err[256];

        policy_limit_format(k, l, buf, sizeof buf);
        check(memchr(buf, 0, sizeof buf) && buf[0], "formatted value empty or not terminated");
        check(policy_limit_parse(k, buf, &again, err, sizeof err) == 0, "a formatted value does not parse");
        check(memcmp(l, &again, sizeof again) == 0, "a formatted value reads back differently");
        /* Read into other limits, it still writes the same text. */
        memset(&again, 0, sizeof again);
        check(policy_limit_parse(k, buf, &again, err, sizeof err) == 0, "a formatted value does not parse");
        check(strcmp(policy_limit_format(k, &again, buf2, sizeof buf2), buf) == 0,
              "a formatted value reads back differently");
}

static void fuzz_value(PolicyLimitKey k, const char *v) {
        PolicyLimits l;
        char err[256], buf[128];
        uint64_t x, y;
        int r;

        policy_limits_default(&l);
        memset(err, 0x55, sizeof err);
        r = policy_limit_parse(k, v, &l, err, sizeof err);
        if (r == 0) {
                check_limits(&l);
                round_trip(k, &l);
        } else {
                check(r == -EINVAL, "undocumented errno from policy_limit_parse");
                check(printable(err, sizeof err), "a refused value without a printable message");
                check(strstr(err, policy_limit_key_to_string(k)) != NULL, "a refusal that does not name the key");
        }

        r = policy_parse_bytes(v, &x);
        check(r == 0 || r == -EINVAL || r == -ERANGE, "undocumented errno from policy_parse_bytes");
        if (r == 0) {
                policy_format_bytes(x, buf, sizeof buf);
                check(policy_parse_bytes(buf, &y) == 0 && x == y, "bytes do not round-trip");
        }
        r = policy_parse_timespan(v, &x);
        check(r == 0 || r == -EINVAL || r == -ERANGE, "undocumented errno from policy_parse_timespan");
        if (r == 0) {
                policy_format_timespan(x, buf, sizeof buf);
                check(policy_parse_timespan(buf, &y) == 0 && x == y, "time span does not round-trip");
        }
        r = policy_parse_count(v, &x);
        check(r == 0 || r == -EINVAL || r == -ERANGE, "undocumented errno from policy_parse_count");
        r = policy_parse_boolean(v);
        check(r == 0 || r == 1 || r == -EINVAL, "undocumented value from policy_parse_boolean");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char v[MAX_VALUE + 1];
        size_t n;

        if (size < 1)
                return 0;
        if (!(data[0] & 1)) {
                fuzz_file((const char *) data + 1, size - 1);
                return 0;
        }
        if (size < 2)
                return 0;
        n = size - 2 < MAX_VALUE ? size - 2 : MAX_VALUE;
        memcpy(v, data + 2, n);
        v[n] = 0;
        fuzz_value((PolicyLimitKey) (data[1] % _POLICY_LIMIT_MAX), v);
        return 0;
}
