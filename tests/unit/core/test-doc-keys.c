/* SPDX-License-Identifier: MIT */
/*
 * The documentation and completions against the parsers' own tables: every
 * [Match] and [Limits] key the policy parser knows (policy.c,
 * policy-limits.c) is in kfdbroker-policy(5) and docs/policy.md; every
 * limit key is in kfdbrokerctl(1)'s `limits` list and in the bash, zsh and
 * fish completions; every kfdbrokerd option and configuration key
 * (daemon-config.c) is in kfdbrokerd(8); every document a man page names
 * under /usr/share/doc/kfdbroker is one docs/meson.build installs. A key added to a parser and not
 * documented fails here, naming the key and the file.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The man pages name documents where `meson install` puts them. */
Test(doc_keys, documents_the_man_pages_name_are_installed) {
        static const char *const pages[] = { "docs/man/kfdbrokerd.8", "docs/man/kfdbrokerctl.1",
                                             "docs/man/kfdbroker-policy.5", "docs/man/libkfdbroker.3" };
        static const char prefix[] = "/usr/share/doc/kfdbroker/";
        char *install = read_plain("docs/meson.build");
        unsigned n = 0;

        for (size_t p = 0; p < sizeof(pages) / sizeof(pages[0]); p++) {
                char *text = read_plain(pages[p]);

                for (const char *at = strstr(text, prefix); at; at = strstr(at + 1, prefix)) {
                        char name[64] = "", quoted[80], path[4200];
                        size_t len = strspn(at + strlen(prefix), "abcdefghijklmnopqrstuvwxyz0123456789-_.");

                        if (len == 0 || len >= sizeof(name))
                                continue;
                        memcpy(name, at + strlen(prefix), len);
                        if (name[len - 1] == '.')
                                name[len - 1] = 0;
                        snprintf(path, sizeof(path), "%s/docs/%s", SOURCE_ROOT, name);
                        cr_expect(access(path, R_OK) == 0, "%s names %s%s, which docs/ lacks", pages[p], prefix, name);
                        snprintf(quoted, sizeof(quoted), "'%s'", name);
                        cr_expect(strstr(install, quoted), "%s names %s%s, which docs/meson.build does not install",
                                  pages[p], prefix, name);
                        n++;
                }
                free(text);
        }
        cr_expect_geq(n, 10, "the man pages name their documents under %s", prefix);
        free(install);
}
