/* SPDX-License-Identifier: MIT */
/*
 * The documentation and completions against the parsers' own tables: every
 * [Match] and [Limits] key the policy parser knows (policy.c,
 * policy-limits.c) is in kfdbroker-policy(5) and docs/policy.md; every
 * limit key is in kfdbrokerctl(1)'s `limits` list and in the bash, zsh and
 * fish completions; every kfdbrokerd option and configuration key
 * (daemon-config.c) is in kfdbrokerd(8). A key added to a parser and not
 * documented fails here, naming the key and the file.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "manager/daemon-config.h"
#include "policy/policy-limits.h"
#include "policy/policy.h"

/* The file's text with troff's font changes and escaped dashes undone. */
static char *read_plain(const char *rel) {
        char path[4096], *buf, *out;
        size_t n, o = 0;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", SOURCE_ROOT, rel);
        f = fopen(path, "r");
        cr_assert_not_null(f, "cannot open %s", path);
        buf = calloc(1, 1 << 20);
        out = calloc(1, 1 << 20);
        cr_assert(buf && out);
        n = fread(buf, 1, (1 << 20) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++) {
                if (buf[i] == '\\' && i + 2 < n && buf[i + 1] == 'f' && strchr("BIRP", buf[i + 2])) {
                        i += 2;
                        continue;
                }
                if (buf[i] == '\\' && i + 1 < n && buf[i + 1] == '-') {
                        out[o++] = '-';
                        i++;
                        continue;
                }
                out[o++] = buf[i];
        }
        free(buf);
        return out;
}

static void expect_word(const char *text, const char *file, const char *prefix, const char *key, const char *suffix) {
        char want[128];

        snprintf(want, sizeof(want), "%s%s%s", prefix, key, suffix);
        cr_expect(strstr(text, want), "%s does not mention %s", file, want);
}

Test(doc_keys, policy_keys_in_the_policy_docs) {
        static const char *const files[] = { "docs/man/kfdbroker-policy.5", "docs/policy.md" };
        unsigned n_match = 0;

        for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
                char *text = read_plain(files[f]);

                for (unsigned i = 0; policy_match_key_to_string(i); i++)
                        expect_word(text, files[f], "", policy_match_key_to_string(i), "=");
                for (int k = 0; k < _POLICY_LIMIT_MAX; k++)
                        expect_word(text, files[f], "", policy_limit_key_to_string((PolicyLimitKey) k), "=");
                free(text);
        }
        while (policy_match_key_to_string(n_match))
                n_match++;
        cr_expect_eq(n_match, 7, "the [Match] keys: User, Group, Unit, UserUnit, CgroupPrefix, AppId, Container");
}

Test(doc_keys, limit_keys_in_kfdbrokerctl_and_completions) {
        static const char *const files[] = {
                "docs/man/kfdbrokerctl.1",
                "client/completions/kfdbrokerctl.bash",
                "client/completions/_kfdbrokerctl",
                "client/completions/kfdbrokerctl.fish",
        };

        for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
                char *text = read_plain(files[f]);

                for (int k = 0; k < _POLICY_LIMIT_MAX; k++)
                        expect_word(text, files[f], "", policy_limit_key_to_string((PolicyLimitKey) k), "=");
                free(text);
        }
}

Test(doc_keys, daemon_options_in_kfdbrokerd_8) {
        static const char *const fixed[] = { "config=", "no-config", "config-root=", "show-config", "version", "help" };
        char *text = read_plain("docs/man/kfdbrokerd.8");

        for (int k = 0; k < _DAEMON_KEY_MAX; k++)
                expect_word(text, "kfdbrokerd.8", "--", daemon_key_to_string((DaemonKey) k), "=");
        for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
                expect_word(text, "kfdbrokerd.8", "--", fixed[i], "");
        /* The configuration file's paths, as the daemon reads them. */
        expect_word(text, "kfdbrokerd.8", "", DAEMON_CONFIG_ETC, "");
        expect_word(text, "kfdbrokerd.8", "", DAEMON_CONFIG_RUN, "");
        expect_word(text, "kfdbrokerd.8", "", DAEMON_CONFIG_DROPIN_ETC, "");
        expect_word(text, "kfdbrokerd.8", "", DAEMON_CONFIG_DROPIN_RUN, "");
        free(text);
}
