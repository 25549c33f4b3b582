/* SPDX-License-Identifier: MIT */
/*
 * Tests of daemon/policy/policy.c: the value syntax (bytes, counts, time spans,
 * booleans, priorities) with exact results; rules resolved for identities
 * with later rules overriding key by key and the matching rules named;
 * every kind of broken file refused with the exact "FILE:LINE: message" an
 * administrator would read; directories merged by file name with /etc
 * winning and /dev/null masking; the shipped policy/00-defaults.conf giving
 * exactly the daemon's built-in limits.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy/policy.h"
#include "test-fini.h"

#define GiB (1ull << 30)
#define MiB (1ull << 20)

Test(policy, bytes) {
        uint64_t v;

        cr_expect_eq(policy_parse_bytes("512", &v), 0);
        cr_expect_eq(v, 512);
        cr_expect_eq(policy_parse_bytes("64K", &v), 0);
        cr_expect_eq(v, 65536);
        cr_expect_eq(policy_parse_bytes("2G", &v), 0);
        cr_expect_eq(v, 2 * GiB);
        cr_expect_eq(policy_parse_bytes("3T", &v), 0);
        cr_expect_eq(v, 3ull << 40);
        cr_expect_eq(policy_parse_bytes("infinity", &v), 0);
        cr_expect_eq(v, POLICY_INFINITY);
        cr_expect_eq(policy_parse_bytes("2X", &v), -EINVAL);
        cr_expect_eq(policy_parse_bytes("2GB", &v), -EINVAL);
        cr_expect_eq(policy_parse_bytes("-1", &v), -EINVAL);
        cr_expect_eq(policy_parse_bytes("", &v), -EINVAL);
        cr_expect_eq(policy_parse_bytes("1.5G", &v), -EINVAL);
        cr_expect_eq(policy_parse_bytes("16777216T", &v), -ERANGE);
        cr_expect_eq(policy_parse_bytes("99999999999999999999", &v), -ERANGE);
}

Test(policy, counts_booleans_priorities) {
        uint64_t v;

        cr_expect_eq(policy_parse_count("4096", &v), 0);
        cr_expect_eq(v, 4096);
        cr_expect_eq(policy_parse_count("infinity", &v), 0);
        cr_expect_eq(v, POLICY_INFINITY);
        cr_expect_eq(policy_parse_count("4294967295", &v), -ERANGE);
        cr_expect_eq(policy_parse_count("12k", &v), -EINVAL);

        cr_expect_eq(policy_parse_boolean("yes"), 1);
        cr_expect_eq(policy_parse_boolean("on"), 1);
        cr_expect_eq(policy_parse_boolean("false"), 0);
        cr_expect_eq(policy_parse_boolean("0"), 0);
        cr_expect_eq(policy_parse_boolean("maybe"), -EINVAL);

        cr_expect_eq(policy_priority_from_string("idle"), POLICY_PRIORITY_IDLE);
        cr_expect_eq(policy_priority_from_string("high"), POLICY_PRIORITY_HIGH);
        cr_expect_eq(policy_priority_from_string("realtime"), -EINVAL);
        cr_expect_eq(policy_priority_to_queue_priority(POLICY_PRIORITY_IDLE), 0);
        cr_expect_eq(policy_priority_to_queue_priority(POLICY_PRIORITY_LOW), 3);
        cr_expect_eq(policy_priority_to_queue_priority(POLICY_PRIORITY_NORMAL), 7);
        cr_expect_eq(policy_priority_to_queue_priority(POLICY_PRIORITY_HIGH), 11);
        cr_expect_str_eq(policy_priority_to_string(POLICY_PRIORITY_LOW), "low");
}

Test(policy, timespans) {
        uint64_t v;

        cr_expect_eq(policy_parse_timespan("500ms", &v), 0);
        cr_expect_eq(v, 500000000ull);
        cr_expect_eq(policy_parse_timespan("30s", &v), 0);
        cr_expect_eq(v, 30000000000ull);
        cr_expect_eq(policy_parse_timespan("5min", &v), 0);
        cr_expect_eq(v, 300000000000ull);
        cr_expect_eq(policy_parse_timespan("1min 30s", &v), 0);
        cr_expect_eq(v, 90000000000ull);
        cr_expect_eq(policy_parse_timespan("1h2m", &v), 0);
        cr_expect_eq(v, 3720000000000ull);
        cr_expect_eq(policy_parse_timespan("5 min", &v), 0);
        cr_expect_eq(v, 300000000000ull);
        cr_expect_eq(policy_parse_timespan("250us", &v), 0);
        cr_expect_eq(v, 250000ull);
        cr_expect_eq(policy_parse_timespan("30", &v), 0, "a bare number is seconds");
        cr_expect_eq(v, 30000000000ull);
        cr_expect_eq(policy_parse_timespan("infinity", &v), 0);
        cr_expect_eq(v, POLICY_INFINITY);
        cr_expect_eq(policy_parse_timespan("0", &v), -ERANGE);
        cr_expect_eq(policy_parse_timespan("0s", &v), -ERANGE);
        cr_expect_eq(policy_parse_timespan("30 5", &v), -EINVAL);
        cr_expect_eq(policy_parse_timespan("5fortnights", &v), -EINVAL);
        cr_expect_eq(policy_parse_timespan("", &v), -EINVAL);
        cr_expect_eq(policy_parse_timespan("ms", &v), -EINVAL);
        cr_expect_eq(policy_parse_timespan("99999999999999d", &v), -ERANGE);
}

/* What `kfdbrokerctl limits` prints must read back to the same value. */
Test(policy, format_reads_back) {
        static const uint64_t bytes[] = { 1, 512, 1024, 1536, 64ull << 10, 1536ull << 20, 4ull << 30, 3ull << 40,
                                          (1ull << 40) + 1, ((UINT64_MAX >> 40) - 1) << 40, UINT64_MAX - 1,
                                          POLICY_INFINITY };
        static const uint64_t spans[] = { 1000, 250000, 500000000, 30000000000ull, 90000000000ull,
                                          3723000000000ull, 86400000000000ull + 1000, POLICY_INFINITY };
        char buf[64];
        uint64_t v;

        for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
                policy_format_bytes(bytes[i], buf, sizeof(buf));
                cr_expect_eq(policy_parse_bytes(buf, &v), 0, "%s", buf);
                cr_expect_eq(v, bytes[i], "%s", buf);
        }
        cr_expect_str_eq(policy_format_bytes(1536ull << 20, buf, sizeof(buf)), "1536M");
        cr_expect_str_eq(policy_format_bytes(4ull << 30, buf, sizeof(buf)), "4G");
        cr_expect_str_eq(policy_format_bytes(1000, buf, sizeof(buf)), "1000");
        cr_expect_str_eq(policy_format_bytes(POLICY_INFINITY, buf, sizeof(buf)), "infinity");
        for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
                policy_format_timespan(spans[i], buf, sizeof(buf));
                cr_expect_eq(policy_parse_timespan(buf, &v), 0, "%s", buf);
                cr_expect_eq(v, spans[i], "%s", buf);
        }
        cr_expect_str_eq(policy_format_timespan(90000000000ull, buf, sizeof(buf)), "1min 30s");
        cr_expect_str_eq(policy_format_timespan(3723000000000ull, buf, sizeof(buf)), "1h 2min 3s");
        cr_expect_str_eq(policy_format_timespan(250000, buf, sizeof(buf)), "250us");
}

Test(policy, one_limit_parsed_and_printed) {
        PolicyLimits l, def;
        char err[256], buf[64];

        policy_limits_default(&def);
        l = def;
        cr_expect_eq(policy_limit_key_from_string("JobTimeout"), POLICY_LIMIT_JOB_TIMEOUT);
        cr_expect_eq(policy_limit_key_from_string("jobtimeout"), -EINVAL);
        cr_expect_str_eq(policy_limit_key_to_string(POLICY_LIMIT_BUFFER_MEMORY), "BufferMemory");
        cr_expect_null(policy_limit_key_to_string(_POLICY_LIMIT_MAX));
        cr_expect_str_eq(policy_limit_key_to_string(POLICY_LIMIT_USER_BUFFER_MEMORY), "UserBufferMemory");
        cr_expect_eq(policy_limit_key_from_string("UserBuffers"), POLICY_LIMIT_USER_BUFFERS);
        cr_expect_eq(policy_limit_key_from_string("UnitBufferMemory"), POLICY_LIMIT_UNIT_BUFFER_MEMORY);

        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_BUFFERS, "7", &l, err, sizeof(err)), 0);
        cr_expect_eq(l.buffers, 7);
        cr_expect_eq(l.events, def.events, "only the named field changes");
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_PRIORITY, "idle", &l, err, sizeof(err)), 0);
        cr_expect_eq(l.priority, POLICY_PRIORITY_IDLE);
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_COMPUTE_DISPATCH, "off", &l, err, sizeof(err)), 0);
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_COMPUTE_DISPATCH, &l, buf, sizeof(buf)), "no");
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_PRIORITY, &l, buf, sizeof(buf)), "idle");
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_JOB_TIMEOUT, &l, buf, sizeof(buf)), "infinity");
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_BUFFER_MEMORY, &l, buf, sizeof(buf)), "4G");

        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_WEIGHT, "0", &l, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "invalid Weight= value \"0\": expected 1..1000");
        cr_expect_eq(l.weight, def.weight, "a refused value changes nothing");
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_BUFFER_MEMORY, "16777216T", &l, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "invalid BufferMemory= value \"16777216T\": expected bytes with an optional K, M, G "
                              "or T suffix (base 1024), or \"infinity\" (too large)");
}

static Policy *load(const char *text) {
        char err[512];
        Policy *p = NULL;
        int r = policy_load_string(text, strlen(text), "test.conf", &p, err, sizeof(err));

        cr_assert_geq(r, 0, "load failed: %d %s", r, err);
        return p;
}

/* Loads text that must fail; returns the message. */
static const char *refuse(const char *text, int expect_errno) {
        static char err[512];
        Policy *p = NULL;
        int r = policy_load_string(text, strlen(text), "/etc/kfdbroker/policy.d/50-bad.conf", &p, err,
                                   sizeof(err));

        cr_expect_eq(r, expect_errno, "expected %d, got %d (%s)", expect_errno, r, err);
        cr_expect_null(p);
        return err;
}

static Identity ident(uid_t uid, gid_t gid, const char *cgroup) {
        Identity id = { .uid = uid, .gid = gid, .pid = 100, .user_unit_uid = (uid_t) -1 };

        if (cgroup) {
                id.cgroup = strdup(cgroup);
                cr_assert_eq(identity_parse_cgroup(&id), 0);
        }
        return id;
}

static const char example[] =
        "# everyone: the shipped defaults, a little tighter\n"
        "[Limits]\n"
        "BufferMemory = 2G\n"
        "Events=512\n"
        "\n"
        "; the CI runner\n"
        "[Match]\n"
        "Unit=ci-runner*.service\n"
        "[Limits]\n"
        "Weight=1\n"
        "BufferMemory=2G\n"
        "ComputeDispatch=no\n"
        "JobTimeout=5min\n"
        "\n"
        "[Match]\n"
        "User=root\n"
        "[Limits]\n"
        "Weight=100\n"
        "Priority=high\n"
        "BufferMemory=infinity\n";

Test(policy, resolve_key_by_key) {
        Policy *p = load(example);
        PolicyLimits l, def;
        char desc[256];
        Identity ci = ident(1000, 1000, "/system.slice/ci-runner@3.service");
        Identity rootci = ident(0, 0, "/system.slice/ci-runner.service");
        Identity other = ident(1000, 1000, "/user.slice/user-1000.slice/session-2.scope");

        cr_expect_eq(policy_n_rules(p), 3);
        policy_limits_default(&def);

        cr_expect_eq(policy_resolve(p, &ci, NULL, &l, desc, sizeof(desc)), 2);
        cr_expect_str_eq(desc, "test.conf:2, test.conf:7");
        cr_expect_eq(l.buffer_memory, 2 * GiB);
        cr_expect_eq(l.events, 512);
        cr_expect_eq(l.weight, 1);
        cr_expect_eq(l.compute_dispatch, POLICY_COMPUTE_NO);
        cr_expect_eq(l.job_timeout_ns, 300000000000ull);
        cr_expect_eq(l.max_buffer_size, def.max_buffer_size, "untouched keys keep the default");
        cr_expect_eq(l.buffers, 4096);
        cr_expect_eq(l.priority, POLICY_PRIORITY_NORMAL);

        /* Later rules win key by key: root's weight, priority and memory, the CI rule's timeout. */
        cr_expect_eq(policy_resolve(p, &rootci, NULL, &l, desc, sizeof(desc)), 3);
        cr_expect_str_eq(desc, "test.conf:2, test.conf:7, test.conf:15");
        cr_expect_eq(l.weight, 100);
        cr_expect_eq(l.priority, POLICY_PRIORITY_HIGH);
        cr_expect_eq(l.buffer_memory, POLICY_INFINITY);
        cr_expect_eq(l.compute_dispatch, POLICY_COMPUTE_NO);
        cr_expect_eq(l.job_timeout_ns, 300000000000ull);

        cr_expect_eq(policy_resolve(p, &other, NULL, &l, desc, sizeof(desc)), 1);
        cr_expect_str_eq(desc, "test.conf:2");
        cr_expect_eq(l.compute_dispatch, POLICY_COMPUTE_ISOLATED, "the built-in default: in a context of its own");
        cr_expect_eq(l.isolation, POLICY_ISOLATION_SESSION);
        cr_expect_eq(l.dispatch_timeout_ns, 60000000000ull, "a kernel is stopped after a minute");
        cr_expect_eq(l.job_timeout_ns, POLICY_INFINITY);

        /* Caller-supplied defaults, a short description buffer, no policy. */
        def.weight = 7;
        cr_expect_eq(policy_resolve(p, &other, &def, &l, desc, 6), 1);
        cr_expect_eq(l.weight, 7);
        cr_expect_str_eq(desc, "te...");
        cr_expect_eq(policy_resolve(NULL, &other, &def, &l, desc, sizeof(desc)), 0);
        cr_expect_str_eq(desc, "");
        cr_expect_eq(l.weight, 7);

        identity_done(&ci);
        identity_done(&rootci);
        identity_done(&other);
        policy_free(p);
}

Test(policy, match_keys) {
        Policy *p = load("[Match]\nGroup=0\n[Limits]\nBuffers=1\n"
                         "[Match]\nCgroupPrefix=/machine.slice/\n[Limits]\nEvents=2\n"
                         "[Match]\nContainer=yes\n[Limits]\nJobsInFlight=3\n"
                         "[Match]\nContainer=web*\n[Limits]\nWeight=4\n"
                         "[Match]\nContainer=no\n[Limits]\nPriority=idle\n"
                         "[Match]\nAppId=org.example.*\n[Limits]\nMaxBufferSize=5M\n"
                         "[Match]\nUserUnit=build-*.service\nUser=1000\n[Limits]\nJobTimeout=6s\n"
                         "[Match]\nUnit=build-*.service\n[Limits]\nBufferMemory=7K\n");
        PolicyLimits l;
        Identity a = ident(1000, 1000, "/machine.slice/machine-web1.scope/payload");
        Identity b = ident(1000, 1000, "/machine.slice2/x.service");
        Identity c = ident(1000, 1000,
                           "/user.slice/user-1000.slice/user@1000.service/app.slice/build-7.service");
        Identity d = ident(1001, 1001,
                           "/user.slice/user-1001.slice/user@1001.service/app.slice/app-flatpak-org.example.App-3.scope");
        gid_t groups[] = { 5, 0 };

        /* In a named machine: CgroupPrefix, Container=yes and the glob. */
        cr_expect_eq(policy_resolve(p, &a, NULL, &l, NULL, 0), 3);
        cr_expect_eq(l.events, 2);
        cr_expect_eq(l.jobs_in_flight, 3);
        cr_expect_eq(l.weight, 4);
        cr_expect_eq(l.buffers, 4096, "not in group 0");
        cr_expect_eq(l.priority, POLICY_PRIORITY_NORMAL);

        /* Prefixes end at a component boundary; supplementary groups count. */
        b.gids = groups;
        b.n_gids = 2;
        cr_expect_eq(policy_resolve(p, &b, NULL, &l, NULL, 0), 2);
        cr_expect_eq(l.buffers, 1);
        cr_expect_eq(l.events, 1024);
        cr_expect_eq(l.priority, POLICY_PRIORITY_IDLE);
        b.gids = NULL;
        b.n_gids = 0;

        /* UserUnit= matches the unit inside user@.service, Unit= does not. */
        cr_expect_eq(policy_resolve(p, &c, NULL, &l, NULL, 0), 2);
        cr_expect_eq(l.job_timeout_ns, 6000000000ull);
        cr_expect_eq(l.buffer_memory, 4 * GiB);

        /* AppId from the Flatpak scope; User=1000 must match too for UserUnit. */
        cr_expect_eq(policy_resolve(p, &d, NULL, &l, NULL, 0), 2);
        cr_expect_eq(l.max_buffer_size, 5 * MiB);
        cr_expect_eq(l.job_timeout_ns, POLICY_INFINITY);

        identity_done(&a);
        identity_done(&b);
        identity_done(&c);
        identity_done(&d);
        policy_free(p);
}

/* A session whose process is unknown (a D-Bus caller without a ProcessFD,
 * a socket peer that exited): no rule on a key only the process tells
 * matches it, whichever way — not even Container=no — while User= and
 * Group= still do. */
Test(policy, unknown_process_matches_no_process_key) {
        Policy *p = load("[Match]\nGroup=5\n[Limits]\nBuffers=1\n"
                         "[Match]\nContainer=no\n[Limits]\nEvents=2\n"
                         "[Match]\nUnit=*\n[Limits]\nJobsInFlight=3\n"
                         "[Match]\nCgroupPrefix=/\n[Limits]\nWeight=4\n"
                         "[Match]\nAppId=*\nUser=1000\n[Limits]\nMaxBufferSize=5M\n"
                         "[Match]\nUserUnit=*\n[Limits]\nJobTimeout=6s\n"
                         "[Match]\nUser=1000\n[Limits]\nBufferMemory=7K\n");
        PolicyLimits l;
        Identity known = ident(1000, 1000, "/system.slice/x.service");
        Identity unknown = { .uid = 1000, .gid = IDENTITY_GID_UNKNOWN, .user_unit_uid = (uid_t) -1,
                             .process_unknown = true };
        gid_t groups[] = { 5 };

        cr_expect_eq(policy_resolve(p, &known, NULL, &l, NULL, 0), 4, "Container=no, Unit, Cgroup, User");
        unknown.gids = groups;
        unknown.n_gids = 1;
        cr_expect_eq(policy_resolve(p, &unknown, NULL, &l, NULL, 0), 2);
        cr_expect_eq(l.buffers, 1, "Group= matches the connection's groups");
        cr_expect_eq(l.buffer_memory, 7 * 1024, "User= matches");
        cr_expect_eq(l.events, 1024, "Container=no does not match an unknown process");
        cr_expect_eq(l.jobs_in_flight, 4096);
        cr_expect_eq(l.weight, 1);
        cr_expect_eq(l.max_buffer_size, 1 * GiB);
        cr_expect_eq(l.job_timeout_ns, POLICY_INFINITY);
        identity_done(&known);
        policy_free(p);
}

Test(policy, user_names_resolve) {
        Policy *p = load("[Match]\nUser=root\nGroup=root\n[Limits]\nWeight=9\n");
        PolicyLimits l;
        Identity r = ident(0, 0, NULL), u = ident(1, 0, NULL);

        cr_expect_eq(policy_resolve(p, &r, NULL, &l, NULL, 0), 1);
        cr_expect_eq(l.weight, 9);
        cr_expect_eq(policy_resolve(p, &u, NULL, &l, NULL, 0), 0);
        policy_free(p);
}

/* A name no one has is a warning with FILE:LINE and a rule that matches no
 * one, every uid and gid included; the rest of the file still applies. */
Test(policy, unknown_user_or_group_warns) {
        static const char text[] = "[Limits]\nWeight=3\n"
                                   "[Match]\nUser=no-such-user-kfdb\n[Limits]\nWeight=2\n"
                                   "[Match]\nGroup=no-such-group-kfdb\n[Limits]\nWeight=4\n"
                                   "[Match]\nGroup=no-such-group-kfdb\nUser=root\n[Limits]\nWeight=5\n";
        char err[256] = "";
        Policy *p = NULL;
        PolicyLimits l;

        cr_assert_eq(policy_load_string(text, strlen(text), "/etc/kfdbroker/policy.d/50-x.conf", &p, err,
                                        sizeof(err)), 4, "%s", err);
        cr_assert_eq(policy_n_warnings(p), 3);
        cr_expect_str_eq(policy_warning(p, 0),
                         "/etc/kfdbroker/policy.d/50-x.conf:4: User=no-such-user-kfdb: no such user; this rule matches no one");
        cr_expect_str_eq(policy_warning(p, 1),
                         "/etc/kfdbroker/policy.d/50-x.conf:8: Group=no-such-group-kfdb: no such group; this rule matches no one");
        cr_expect_str_eq(policy_warning(p, 2),
                         "/etc/kfdbroker/policy.d/50-x.conf:12: Group=no-such-group-kfdb: no such group; this rule matches no one");
        cr_expect_null(policy_warning(p, 3));
        for (uid_t u = 0; u < 3; u++) {
                Identity id = ident(u, u, NULL);
                char matched[128];

                cr_expect_eq(policy_resolve(p, &id, NULL, &l, matched, sizeof(matched)), 1);
                cr_expect_eq(l.weight, 3);
                cr_expect_str_eq(matched, "/etc/kfdbroker/policy.d/50-x.conf:1");
        }
        cr_expect_eq(policy_n_warnings(NULL), 0);
        policy_free(p);
}

#define F "/etc/kfdbroker/policy.d/50-bad.conf"

Test(policy, refused_files) {
        cr_expect_str_eq(refuse("[Limits]\nWieght=3\n", -EINVAL),
                         F ":2: unknown key \"Wieght\" in [Limits] (value \"3\")");
        cr_expect_str_eq(refuse("[Match]\nBufferMemory=1G\n[Limits]\nWeight=1\n", -EINVAL),
                         F ":2: unknown key \"BufferMemory\" in [Match] (value \"1G\")");
        cr_expect_str_eq(refuse("# ok\n[Quota]\n", -EINVAL),
                         F ":2: unknown section [Quota] (expected [Match] or [Limits])");
        cr_expect_str_eq(refuse("[Limits\n", -EINVAL), F ":1: invalid section header \"[Limits\"");
        cr_expect_str_eq(refuse("[Limits]\nBufferMemory=2X\n", -EINVAL),
                         F ":2: invalid BufferMemory= value \"2X\": expected bytes with an optional K, M, G or T "
                           "suffix (base 1024), or \"infinity\"");
        cr_expect_str_eq(refuse("[Limits]\nMaxBufferSize=0\n", -EINVAL),
                         F ":2: invalid MaxBufferSize= value \"0\": must be at least 1 byte");
        cr_expect_str_eq(refuse("[Limits]\nWeight=0\n", -EINVAL),
                         F ":2: invalid Weight= value \"0\": expected 1..1000");
        cr_expect_str_eq(refuse("[Limits]\nWeight=1001\n", -EINVAL),
                         F ":2: invalid Weight= value \"1001\": expected 1..1000");
        cr_expect_str_eq(refuse("[Limits]\nPriority=realtime\n", -EINVAL),
                         F ":2: invalid Priority= value \"realtime\": expected idle, low, normal or high");
        cr_expect_str_eq(refuse("[Limits]\nComputeDispatch=perhaps\n", -EINVAL),
                         F ":2: invalid ComputeDispatch= value \"perhaps\": expected no, isolated or yes");
        cr_expect_str_eq(refuse("[Limits]\nIsolation=process\n", -EINVAL),
                         F ":2: invalid Isolation= value \"process\": expected session, identity or shared");
        cr_expect_str_eq(refuse("[Limits]\nDispatchTimeout=0\n", -EINVAL),
                         F ":2: invalid DispatchTimeout= value \"0\": expected a time span such as 500ms, 30s, "
                           "5min, 1h, or \"infinity\" (zero or too large)");
        cr_expect_str_eq(refuse("[Limits]\nJobTimeout=0\n", -EINVAL),
                         F ":2: invalid JobTimeout= value \"0\": expected a time span such as 500ms, 30s, 5min, "
                           "1h, or \"infinity\" (zero or too large)");
        cr_expect_str_eq(refuse("[Limits]\nJobsInFlight=0\n", -EINVAL),
                         F ":2: invalid JobsInFlight= value \"0\": must be at least 1 (use ComputeDispatch= or "
                           "Buffers= to deny work)");
        cr_expect_str_eq(refuse("[Limits]\nEvents=lots\n", -EINVAL),
                         F ":2: invalid Events= value \"lots\": expected a number below 4294967295 or \"infinity\"");
        cr_expect_str_eq(refuse("[Limits]\nWeight=2\n\nWeight=3\n", -EINVAL),
                         F ":4: duplicate key Weight=3 in this [Limits] section (first set at line 2)");
        cr_expect_str_eq(refuse("[Limits]\nWeight\n", -EINVAL),
                         F ":2: expected KEY=VALUE or [Section], got \"Weight\"");
        cr_expect_str_eq(refuse("Weight=2\n", -EINVAL),
                         F ":1: Weight=2 outside of a section (start with [Match] or [Limits])");
        cr_expect_str_eq(refuse("[Limits]\nWeight=\n", -EINVAL), F ":2: empty value for Weight=");
        cr_expect_str_eq(refuse("[Match]\nCgroupPrefix=system.slice\n[Limits]\nWeight=2\n", -EINVAL),
                         F ":2: CgroupPrefix=system.slice: must be an absolute cgroup path");
        cr_expect_str_eq(refuse("[Match]\nUser=root\n\n[Match]\nUser=0\n[Limits]\nWeight=2\n", -EINVAL),
                         F ":1: [Match] section is not followed by a [Limits] section");
        cr_expect_str_eq(refuse("[Limits]\nWeight=2\n[Match]\nUser=root\n", -EINVAL),
                         F ":3: [Match] section is not followed by a [Limits] section");
        /* Control characters in a value are not echoed raw. */
        cr_expect_str_eq(refuse("[Limits]\nPriority=\x1b[31mhigh\n", -EINVAL),
                         F ":2: invalid Priority= value \"?[31mhigh\": expected idle, low, normal or high");
}

Test(policy, hostile_sizes) {
        size_t big = POLICY_FILE_MAX + 1;
        char *text = malloc(big + 1);
        Policy *p = NULL;
        char err[256];

        cr_assert_not_null(text);
        /* A line past the line limit. */
        memset(text, 'x', POLICY_LINE_MAX + 1);
        strcpy(text + POLICY_LINE_MAX + 1, "\n");
        cr_expect_eq(policy_load_string(text, strlen(text), "long.conf", &p, err, sizeof(err)), -EFBIG);
        cr_expect_str_eq(err, "long.conf:1: line longer than 4096 bytes");

        /* A file past the size limit (comments only, otherwise valid). */
        memset(text, '#', big);
        for (size_t i = 100; i < big; i += 100)
                text[i] = '\n';
        text[big] = 0;
        cr_expect_eq(policy_load_string(text, big, "huge.conf", &p, err, sizeof(err)), -EFBIG);
        cr_expect_str_eq(err, "huge.conf:0: file is larger than 1048576 bytes");

        /* A NUL byte. */
        cr_expect_eq(policy_load_string("[Limits]\nWeight=1\0\n", 19, "nul.conf", &p, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "nul.conf:2: NUL byte in file");

        /* Many rules are fine up to the bound. */
        {
                size_t pos = 0;

                for (unsigned i = 0; i < 1000; i++)
                        pos += (size_t) sprintf(text + pos, "[Limits]\nWeight=%u\n", i % 1000 + 1);
                cr_expect_eq(policy_load_string(text, pos, "many.conf", &p, err, sizeof(err)), 1000);
                policy_free(p);
        }
        cr_expect_null(policy_free(NULL));
        free(text);
}

/* ---- directories ---- */

static char tmp[PATH_MAX];
static char etc[PATH_MAX + 8], vendor[PATH_MAX + 8];

static void write_file(const char *dir, const char *name, const char *content) {
        char path[PATH_MAX * 2];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(content, f);
        fclose(f);
}

static void make_dirs(void) {
        snprintf(tmp, sizeof(tmp), "/tmp/kfdb-policy-XXXXXX");
        cr_assert_not_null(mkdtemp(tmp));
        snprintf(etc, sizeof(etc), "%s/etc", tmp);
        snprintf(vendor, sizeof(vendor), "%s/usr", tmp);
        cr_assert_eq(mkdir(etc, 0755), 0);
        cr_assert_eq(mkdir(vendor, 0755), 0);
}

static void remove_dirs(void) {
        char cmd[PATH_MAX + 16];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        test_fini_end();
}

Test(policy, directories, .init = make_dirs, .fini = remove_dirs) {
        const char *dirs[] = { etc, "/nonexistent/kfdbroker", vendor, NULL };
        char err[1024], desc[1024], want[16384], path[PATH_MAX * 2];
        Policy *p = NULL, *old;
        PolicyLimits l;
        Identity id = ident(1000, 1000, "/system.slice/x.service");

        write_file(vendor, "00-defaults.conf", "[Limits]\nWeight=1\nEvents=100\n");
        write_file(vendor, "50-site.conf", "[Limits]\nWeight=5\n");
        write_file(vendor, "60-masked.conf", "[Limits]\nWeight=6\n");
        write_file(vendor, "README", "not a policy file\n");
        write_file(vendor, ".hidden.conf", "garbage\n");
        write_file(etc, "50-site.conf", "# the admin's copy replaces the shipped one\n[Limits]\nWeight=50\n");
        write_file(etc, "40-local.conf", "[Limits]\nBuffers=40\n");
        snprintf(path, sizeof(path), "%s/60-masked.conf", etc);
        cr_assert_eq(symlink("/dev/null", path), 0);

        cr_assert_eq(policy_load(dirs, &p, err, sizeof(err)), 3, "%s", err);
        cr_expect_eq(policy_n_files(p), 4);
        cr_expect_eq(policy_resolve(p, &id, NULL, &l, desc, sizeof(desc)), 3);
        snprintf(want, sizeof(want), "%s/00-defaults.conf:1, %s/40-local.conf:1, %s/50-site.conf:2", vendor, etc,
                 etc);
        cr_expect_str_eq(desc, want);
        cr_expect_eq(l.weight, 50);
        cr_expect_eq(l.events, 100);
        cr_expect_eq(l.buffers, 40);

        /* A broken file refuses the whole load; the caller keeps the old policy. */
        old = p;
        p = NULL;
        write_file(etc, "70-typo.conf", "[Limits]\nWeight=2\n[Limits]\nBufferMemory=lots\n");
        cr_expect_eq(policy_load(dirs, &p, err, sizeof(err)), -EINVAL);
        cr_expect_null(p);
        snprintf(want, sizeof(want),
                 "%s/70-typo.conf:4: invalid BufferMemory= value \"lots\": expected bytes with an optional K, M, G "
                 "or T suffix (base 1024), or \"infinity\"",
                 etc);
        cr_expect_str_eq(err, want);
        cr_expect_eq(policy_resolve(old, &id, NULL, &l, NULL, 0), 3);
        cr_expect_eq(l.weight, 50);
        policy_free(old);

        /* A directory that cannot be read is an error, not an empty policy. */
        snprintf(path, sizeof(path), "%s/70-typo.conf", etc);
        cr_assert_eq(unlink(path), 0);
        write_file(etc, "80-dir.conf", "");
        cr_expect_eq(policy_load(dirs, &p, err, sizeof(err)), 3, "an empty file is a valid, empty policy: %s", err);
        policy_free(p);
        p = NULL;

        /* No directories at all: an empty policy, the built-in defaults apply. */
        {
                const char *none[] = { "/nonexistent/a", NULL };

                cr_expect_eq(policy_load(none, &p, err, sizeof(err)), 0);
                cr_expect_eq(policy_resolve(p, &id, NULL, &l, desc, sizeof(desc)), 0);
                cr_expect_str_eq(desc, "");
                policy_free(p);
        }
        identity_done(&id);
}

Test(policy, shipped_defaults_equal_builtin) {
        const char *dirs[] = { SOURCE_ROOT "/policy/policy.d", NULL };
        char err[512];
        Policy *p = NULL;
        PolicyLimits def, l, poisoned;
        Identity id = ident(12345, 12345, "/system.slice/x.service");
        int r;

        r = policy_load(dirs, &p, err, sizeof(err));
        cr_assert_geq(r, 1, "%s", err);
        policy_limits_default(&def);
        /* Start from values that differ in every field: the file must set them all. */
        poisoned = (PolicyLimits) { 1, 1, 1, 1, 1, 2, POLICY_PRIORITY_IDLE, POLICY_COMPUTE_NO, POLICY_ISOLATION_SHARED,
                                    1, 1, 1, 1, 1 };
        policy_resolve(p, &id, &poisoned, &l, NULL, 0);
        /* BufferMemory=, MaxBufferSize= and UserBufferMemory= are the daemon's
         * to fit to the GPU (policy_limits_fit_device()): the file leaves them. */
        cr_expect_eq(l.buffer_memory, 1);
        cr_expect_eq(l.max_buffer_size, 1);
        cr_expect_eq(l.buffers, def.buffers);
        cr_expect_eq(l.events, def.events);
        cr_expect_eq(l.jobs_in_flight, def.jobs_in_flight);
        cr_expect_eq(l.weight, def.weight);
        cr_expect_eq(l.priority, def.priority);
        cr_expect_eq(l.compute_dispatch, def.compute_dispatch);
        cr_expect_eq(l.isolation, def.isolation);
        cr_expect_eq(l.job_timeout_ns, def.job_timeout_ns);
        cr_expect_eq(l.dispatch_timeout_ns, def.dispatch_timeout_ns);
        cr_expect_eq(l.user_buffer_memory, 1);
        cr_expect_eq(l.unit_buffer_memory, def.unit_buffer_memory);
        /* UserBuffers= is the daemon's to choose from its fd limit. */
        cr_expect_eq(l.user_buffers, 1);
        cr_expect_eq(l.compute_dispatch, POLICY_COMPUTE_ISOLATED, "compute in a context of the client's own");

        /* The one rule of the shipped file: root's clients may dispatch in a shared context too. */
        Identity root = ident(0, 0, "/system.slice/x.service");
        cr_expect_eq(policy_resolve(p, &root, NULL, &l, NULL, 0), 2);
        cr_expect_eq(l.compute_dispatch, POLICY_COMPUTE_YES);
        identity_done(&root);
        policy_free(p);
        identity_done(&id);
}

Test(policy, shipped_example_loads) {
        const char *dirs[] = { SOURCE_ROOT "/policy/examples", NULL };
        char err[512];
        Policy *p = NULL;
        PolicyLimits l;
        Identity runner = ident(999, 999, "/system.slice/gitlab-runner.service");

        cr_assert_eq(policy_load(dirs, &p, err, sizeof(err)), 5, "%s", err);
        policy_resolve(p, &runner, NULL, &l, NULL, 0);
        cr_expect_eq(l.buffer_memory, 2 * GiB);
        cr_expect_eq(l.compute_dispatch, POLICY_COMPUTE_NO);
        cr_expect_eq(l.job_timeout_ns, 600000000000ull);
        identity_done(&runner);
        policy_free(p);
}

Test(policy, default_dirs) {
        cr_expect_str_eq(policy_default_dirs[0], "/etc/kfdbroker/policy.d");
        cr_expect_str_eq(policy_default_dirs[1], "/run/kfdbroker/policy.d");
        cr_expect_str_eq(policy_default_dirs[2], KFDBROKER_POLICY_VENDOR_DIR);
        cr_expect_null(policy_default_dirs[3]);
}

/* Mutated copies of a valid file: every outcome is either a policy or a
 * refusal with "FILE:LINE: " and a message; nothing crashes or leaks (ASan). */
Test(policy, mutated_files_fail_cleanly) {
        size_t len = strlen(example);
        char *buf = malloc(len + 1);
        unsigned seed = 12345, refused = 0, loaded = 0;
        static const char alphabet[] = "[]=#;\n \tMatchLimitsUserWeight0123456789GKinfinity*\x01\xff";

        cr_assert_not_null(buf);
        for (unsigned iter = 0; iter < 3000; iter++) {
                Policy *p = NULL;
                char err[512];
                int r;

                memcpy(buf, example, len + 1);
                for (unsigned k = 0; k < 1 + iter % 4; k++) {
                        seed = seed * 1103515245u + 12345u;
                        buf[(seed >> 8) % len] = alphabet[(seed >> 20) % (sizeof(alphabet) - 1)];
                }
                r = policy_load_string(buf, len, "m.conf", &p, err, sizeof(err));
                if (r >= 0) {
                        cr_assert_not_null(p);
                        cr_assert_eq((size_t) r, policy_n_rules(p));
                        policy_free(p);
                        loaded++;
                } else {
                        cr_assert_null(p);
                        cr_assert(strncmp(err, "m.conf:", 7) == 0 && strstr(err, ": ") && strlen(err) > 12,
                                  "refusal without a location: \"%s\" (%d)", err, r);
                        refused++;
                }
        }
        cr_expect_gt(refused, 100);
        cr_expect_gt(loaded, 100);
        free(buf);
}

/* The caps shared by the sessions of a user or a unit parse, print and
 * resolve like the per-session ones. */
Test(policy, user_and_unit_caps) {
        char err[256], buf[32];
        PolicyLimits l;

        policy_limits_default(&l);
        cr_expect_eq(l.user_buffer_memory, POLICY_INFINITY);
        cr_expect_eq(l.unit_buffer_memory, POLICY_INFINITY);
        cr_expect_eq(l.user_buffers, 16384);
        cr_expect_eq(l.user_jobs_in_flight, 65536);
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_USER_BUFFER_MEMORY, "32M", &l, err, sizeof(err)), 0);
        cr_expect_eq(l.user_buffer_memory, 32 * MiB);
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_UNIT_BUFFER_MEMORY, "2G", &l, err, sizeof(err)), 0);
        cr_expect_eq(l.unit_buffer_memory, 2 * GiB);
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_USER_BUFFERS, "100", &l, err, sizeof(err)), 0);
        cr_expect_eq(l.user_buffers, 100);
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_USER_BUFFER_MEMORY, &l, buf, sizeof(buf)), "32M");
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_USER_BUFFERS, &l, buf, sizeof(buf)), "100");
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_UNIT_BUFFER_MEMORY, "0", &l, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "invalid UnitBufferMemory= value \"0\": must be at least 1 byte");
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_USER_BUFFERS, "lots", &l, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "invalid UserBuffers= value \"lots\": expected a number below 4294967295 or \"infinity\"");
        cr_expect_eq(policy_limit_number(&l, POLICY_LIMIT_WEIGHT), NULL);
        cr_expect_eq(policy_limit_number(&l, POLICY_LIMIT_USER_BUFFERS), &l.user_buffers);
        cr_expect(policy_limit_is_bytes(POLICY_LIMIT_USER_BUFFER_MEMORY));
        cr_expect(!policy_limit_is_bytes(POLICY_LIMIT_USER_BUFFERS));
        /* UserJobsInFlight=: what one user's sessions queue together (issue 29). */
        cr_expect_eq(policy_limit_key_from_string("UserJobsInFlight"), POLICY_LIMIT_USER_JOBS_IN_FLIGHT);
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_USER_JOBS_IN_FLIGHT, "10000", &l, err, sizeof(err)), 0);
        cr_expect_eq(l.user_jobs_in_flight, 10000);
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_USER_JOBS_IN_FLIGHT, &l, buf, sizeof(buf)), "10000");
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_USER_JOBS_IN_FLIGHT, "0", &l, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "invalid UserJobsInFlight= value \"0\": must be at least 1 (use ComputeDispatch= or Buffers= to deny work)");
        /* Queues=: the KFD queues of a relayed ROCm process (issue 30). */
        cr_expect_eq(policy_limit_key_from_string("Queues"), POLICY_LIMIT_QUEUES);
        policy_limits_default(&l);
        cr_expect_eq(l.queues, 64u);
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_QUEUES, "4", &l, err, sizeof(err)), 0);
        cr_expect_eq(l.queues, 4u);
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_QUEUES, &l, buf, sizeof(buf)), "4");
        cr_expect_eq(policy_limit_parse(POLICY_LIMIT_QUEUES, "lots", &l, err, sizeof(err)), -EINVAL);
        cr_expect_str_eq(err, "invalid Queues= value \"lots\": expected a number below 4294967295 or \"infinity\"");
}

/* Devices=: which GPUs a session may use, by index or PCI address (issue 33). */
Test(policy, devices) {
        PolicyLimits l;
        char err[256], buf[200];

        policy_limits_default(&l);
        cr_expect_eq(policy_limit_key_from_string("Devices"), POLICY_LIMIT_DEVICES);
        cr_expect_eq(l.devices.n, 0u, "all by default");
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_DEVICES, &l, buf, sizeof buf), "all");
        cr_expect(policy_devices_allow(&l.devices, 5, NULL));

        cr_assert_eq(policy_limit_parse(POLICY_LIMIT_DEVICES, "1, 03:00.0 2", &l, err, sizeof err), 0, "%s", err);
        cr_expect_eq(l.devices.n, 3u);
        cr_expect_str_eq(policy_limit_format(POLICY_LIMIT_DEVICES, &l, buf, sizeof buf), "1,0000:03:00.0,2");
        cr_expect(policy_devices_allow(&l.devices, 1, "0000:0c:00.0"));
        cr_expect(policy_devices_allow(&l.devices, 0, "0000:03:00.0"), "by its PCI address");
        cr_expect(!policy_devices_allow(&l.devices, 0, "0000:04:00.0"));
        cr_expect(!policy_devices_allow(&l.devices, 3, NULL));
        /* What it prints reads back to the same. */
        PolicyLimits again;
        policy_limits_default(&again);
        cr_assert_eq(policy_limit_parse(POLICY_LIMIT_DEVICES, buf, &again, err, sizeof err), 0, "%s", err);
        cr_expect_eq(memcmp(&again.devices, &l.devices, sizeof l.devices), 0);
        cr_assert_eq(policy_limit_parse(POLICY_LIMIT_DEVICES, "all", &l, err, sizeof err), 0);
        cr_expect_eq(l.devices.n, 0u);

        static const struct {
                const char *value, *err;
        } bad[] = {
                { "8", "invalid Devices= value \"8\": expected \"all\", or GPU indexes 0..7 (as kfdbrokerctl status "
                       "numbers them) and PCI addresses (0000:03:00.0)" },
                { "gpu1", "invalid Devices= value \"gpu1\": expected \"all\", or GPU indexes 0..7 (as kfdbrokerctl "
                          "status numbers them) and PCI addresses (0000:03:00.0)" },
                { "1,,2", "invalid Devices= value \"1,,2\": an empty item" },
                { "1,1", "invalid Devices= value \"1,1\": a GPU named twice" },
                { "0 1 2 3 4 5 6 7 03:00.0", "invalid Devices= value \"0 1 2 3 4 5 6 7 03:00.0\": more than 8 GPUs" },
                { ",", "invalid Devices= value \",\": an empty item" },
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_expect_eq(policy_limit_parse(POLICY_LIMIT_DEVICES, bad[i].value, &l, err, sizeof err), -EINVAL,
                             "%s", bad[i].value);
                cr_expect_str_eq(err, bad[i].err);
        }
}

/* The memory defaults fitted to the GPU (docs/policy.md "Defaults on a shared
 * GPU"): half its VRAM per user, at least 1G; a session at most that and 4G;
 * one buffer at most 1G and the session's. */
Test(policy, defaults_fit_the_gpu) {
        static const struct {
                uint64_t vram, user, session, buffer;
        } cases[] = {
                { 16 * GiB, 8 * GiB, 4 * GiB, 1 * GiB },
                { 8 * GiB, 4 * GiB, 4 * GiB, 1 * GiB },
                { 6 * GiB, 3 * GiB, 3 * GiB, 1 * GiB },
                { 1 * GiB, 1 * GiB, 1 * GiB, 1 * GiB },   /* 1 GiB of VRAM */
                { 512ull << 20, 1 * GiB, 1 * GiB, 1 * GiB }, /* an APU's carve-out: the floor */
        };
        PolicyLimits l;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                policy_limits_default(&l);
                policy_limits_fit_device(&l, cases[i].vram, true);
                cr_expect_eq(l.user_buffer_memory, cases[i].user, "VRAM %llu", (unsigned long long) cases[i].vram);
                cr_expect_eq(l.buffer_memory, cases[i].session, "VRAM %llu", (unsigned long long) cases[i].vram);
                cr_expect_eq(l.max_buffer_size, cases[i].buffer, "VRAM %llu", (unsigned long long) cases[i].vram);
        }
        /* VRAM not known: the defaults without a device. */
        policy_limits_default(&l);
        policy_limits_fit_device(&l, 0, true);
        cr_expect_eq(l.user_buffer_memory, POLICY_INFINITY);
        cr_expect_eq(l.buffer_memory, 4 * GiB);
        /* It lowers, never raises: a smaller value stays. */
        l.user_buffer_memory = 64ull << 20;
        l.buffer_memory = 32ull << 20;
        policy_limits_fit_device(&l, 16 * GiB, true);
        cr_expect_eq(l.user_buffer_memory, 64ull << 20);
        cr_expect_eq(l.buffer_memory, 32ull << 20);
        /* A device that cannot tell when a buffer's last copy goes (the
         * simulated GPU) keeps freed exported buffers charged until the
         * daemon restarts: no finite cap by default there. */
        policy_limits_default(&l);
        policy_limits_fit_device(&l, 1 * GiB, false);
        cr_expect_eq(l.user_buffer_memory, POLICY_INFINITY);
        cr_expect_eq(l.buffer_memory, 4 * GiB);
        cr_expect_eq(l.max_buffer_size, 1 * GiB);
}

/* Container= matches a container's short id, its full 64-hex id and its
 * Kubernetes pod's UID (docs/policy.md "Match keys"). */
Test(policy, container_matches_ids_and_pod_uids) {
        static const char hex64[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        char cg[512], rules[512];
        Identity pod, other;
        PolicyLimits l;
        Policy *p;

        snprintf(cg, sizeof(cg),
                 "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0f1e2d3c_4b5a_6978_8796_a5b4c3d2e1f0"
                 ".slice/cri-containerd-%s.scope", hex64);
        pod = ident(1000, 1000, cg);
        snprintf(cg, sizeof(cg), "/system.slice/docker-%s.scope", "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210");
        other = ident(1000, 1000, cg);
        snprintf(rules, sizeof(rules),
                 "[Match]\nContainer=%s\n[Limits]\nEvents=11\n"
                 "[Match]\nContainer=0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\n[Limits]\nWeight=7\n"
                 "[Match]\nContainer=0123456789ab\n[Limits]\nBuffers=5\n",
                 hex64);
        p = load(rules);
        cr_expect_eq(policy_resolve(p, &pod, NULL, &l, NULL, 0), 3, "the full id, the pod's UID and the short id");
        cr_expect_eq(l.events, 11);
        cr_expect_eq(l.weight, 7);
        cr_expect_eq(l.buffers, 5);
        cr_expect_eq(policy_resolve(p, &other, NULL, &l, NULL, 0), 0, "another container matches none");
        policy_free(p);
        identity_done(&pod);
        identity_done(&other);
}
