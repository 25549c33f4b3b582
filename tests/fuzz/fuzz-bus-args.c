/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the D-Bus method arguments (daemon/endpoints/bus-args.c):
 * the a{sv} of SetLimits, entry by entry, as bus.c reads it from a call, and
 * the reason of TerminateSession. The callers are D-Bus peers: root, a
 * polkit-authorized administrator, or for TerminateSession any user on their
 * own sessions.
 *
 * An input is a list of entries. Each starts with a selector byte: below
 * 0x80 it picks one of the known keys (or a near miss of one), otherwise the
 * key is the next length-prefixed string; then a type byte picks the
 * variant's signature ("t", "u", "s", "b" or one a limit never has) and the
 * value follows (8 bytes, 4 bytes, a length-prefixed string, a bit, or
 * nothing). A selector 0xFF instead makes the entry a TerminateSession
 * reason (a length-prefixed string and a buffer size byte).
 *
 * Besides "no crash, no leak, no UB" it checks the promises of bus-args.h:
 * only -EINVAL; every refusal worded in printable ASCII; a refused entry
 * changes nothing; an accepted one changes at most its own limit, keeps
 * every limit in the range a policy file allows, and is what the policy
 * file syntax says for the same value (policy_limit_format() of it reads
 * back through policy_limit_parse() unchanged); a termination reason is
 * terminated inside its buffer and printable ASCII.
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files on its command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "endpoints/bus-args.h"
#include "policy/policy-limits.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ENTRIES 32u

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-bus-args: broken promise: %s\n", what);
                abort();
        }
}

static bool printable_ascii(const char *s, size_t max, bool may_be_empty) {
        size_t n = strnlen(s, max);

        if (n == max || (n == 0 && !may_be_empty))
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] >= 0x7f)
                        return false;
        return true;
}

/* The SetLimits keys and the policy file key each corresponds to: every
 * policy file key (policy_limit_key_to_string()), the two timeouts with
 * "USec" as SetLimits takes them (microseconds, docs/dbus.md) — so a key
 * added to the policy is fuzzed without a change here (a table of this
 * target's own missed the five keys added after it and took each for an
 * unknown one that was accepted) — then near misses, which are no key. */
#define N_NEAR_MISSES 3u
#define N_KEYS ((size_t) _POLICY_LIMIT_MAX + N_NEAR_MISSES)
static struct {
        char name[64];
        PolicyLimitKey key;
} keys[N_KEYS];

static void keys_init(void) {
        static const char *const near_misses[N_NEAR_MISSES] = { "JobTimeout", "weight", "" };
        static bool done;

        if (done)
                return;
        for (unsigned k = 0; k < _POLICY_LIMIT_MAX; k++) {
                bool usec = k == POLICY_LIMIT_JOB_TIMEOUT || k == POLICY_LIMIT_DISPATCH_TIMEOUT;
                const char *name = policy_limit_key_to_string((PolicyLimitKey) k);
                check(name != NULL, "a policy key without a name");
                snprintf(keys[k].name, sizeof keys[k].name, "%s%s", name, usec ? "USec" : "");
                keys[k].key = (PolicyLimitKey) k;
        }
        for (unsigned i = 0; i < N_NEAR_MISSES; i++) {
                snprintf(keys[_POLICY_LIMIT_MAX + i].name, sizeof keys[0].name, "%s", near_misses[i]);
                keys[_POLICY_LIMIT_MAX + i].key = _POLICY_LIMIT_MAX;
        }
        done = true;
}

static const char *const signatures[] = { "t", "u", "s", "b", "i", "x", "as", "a{sv}", "v", NULL };
#define N_SIGNATURES (sizeof signatures / sizeof signatures[0])

typedef struct Input {
        const uint8_t *p;
        size_t left;
} Input;

static uint8_t take_byte(Input *in) {
        uint8_t b = 0;

        if (in->left) {
                b = *in->p++;
                in->left--;
        }
        return b;
}

static void take_bytes(Input *in, void *buf, size_t n) {
        memset(buf, 0, n);
        n = n < in->left ? n : in->left;
        memcpy(buf, in->p, n);
        in->p += n;
        in->left -= n;
}

/* A length-prefixed string (NUL bytes in it end it early, as in a C string). */
static void take_string(Input *in, char *buf, size_t size) {
        size_t n = take_byte(in);

        if (n > size - 1)
                n = size - 1;
        take_bytes(in, buf, n);
        buf[n] = 0;
}

/* The limit field k of l, compared through the policy file syntax. */
static void check_same_as_policy_file(PolicyLimitKey k, const PolicyLimits *l) {
        PolicyLimits again = *l;
        char text[128], err[256];

        policy_limit_format(k, l, text, sizeof text);
        memset(&again, 0, sizeof again);
        again = *l;
        check(policy_limit_parse(k, text, &again, err, sizeof err) == 0,
              "an accepted value is one a policy file refuses");
        check(memcmp(&again, l, sizeof again) == 0, "an accepted value reads differently in a policy file");
}

static void fuzz_entry(Input *in, PolicyLimits *l) {
        char key_buf[300], str[300], err[512];
        const char *key;
        BusLimitValue v = {};
        PolicyLimitKey pk = _POLICY_LIMIT_MAX;
        PolicyLimits before = *l;
        uint8_t sel = take_byte(in), type;
        int r;

        if (sel < 0x80) {
                key = keys[sel % N_KEYS].name;
                pk = keys[sel % N_KEYS].key;
        } else {
                take_string(in, key_buf, sizeof key_buf);
                key = key_buf;
                for (size_t i = 0; i < N_KEYS; i++)
                        if (strcmp(key, keys[i].name) == 0)
                                pk = keys[i].key;
        }
        type = take_byte(in);
        v.signature = signatures[type % N_SIGNATURES];
        switch (type % N_SIGNATURES) {
        case 0:
                take_bytes(in, &v.t, sizeof v.t);
                break;
        case 1:
                take_bytes(in, &v.u, sizeof v.u);
                break;
        case 2:
                take_string(in, str, sizeof str);
                v.s = str;
                break;
        case 3:
                v.b = take_byte(in) & 1;
                break;
        default:
                break;
        }

        memset(err, 0x55, sizeof err);
        r = bus_limit_apply(l, key, &v, err, sizeof err);
        if (r < 0) {
                check(r == -EINVAL, "undocumented errno");
                check(printable_ascii(err, sizeof err, false), "a refusal not in printable ASCII");
                check(memcmp(&before, l, sizeof before) == 0, "a refused entry changed the limits");
                return;
        }
        check(r == 0, "a positive return");
        check(pk != _POLICY_LIMIT_MAX, "an unknown key was accepted");
        /* At most the key's own field changed: put it back and compare. */
        {
                PolicyLimits restored = *l;
                char text[128], err2[256];

                policy_limit_format(pk, &before, text, sizeof text);
                check(policy_limit_parse(pk, text, &restored, err2, sizeof err2) == 0, "the old value does not parse");
                check(memcmp(&restored, &before, sizeof before) == 0, "an entry changed another limit");
        }
        check_same_as_policy_file(pk, l);
}

static void fuzz_reason(Input *in) {
        char reason[300], sender[40], buf[300];
        size_t n;

        take_string(in, reason, sizeof reason);
        take_string(in, sender, sizeof sender);
        n = take_byte(in) % sizeof buf + 1;
        memset(buf, 0x55, sizeof buf);
        bus_terminate_reason(sender, reason, buf, n);
        check(memchr(buf, 0, n) != NULL, "reason not terminated inside its buffer");
        check(printable_ascii(buf, n, n < 2), "reason not printable ASCII");
        for (size_t i = n; i < sizeof buf; i++)
                check((uint8_t) buf[i] == 0x55, "reason written past its buffer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Input in = { .p = data, .left = size };
        PolicyLimits l;

        keys_init();
        policy_limits_default(&l);
        for (unsigned i = 0; i < MAX_ENTRIES && in.left > 0; i++) {
                if (in.p[0] == 0xFF) {
                        (void) take_byte(&in);
                        fuzz_reason(&in);
                } else
                        fuzz_entry(&in, &l);
        }
        return 0;
}
