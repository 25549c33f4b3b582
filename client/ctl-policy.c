/* SPDX-License-Identifier: MIT */
/*
 * See ctl-policy.h. The loader stops at the first error, as the daemon's
 * does (a reload refuses the whole policy), so one error is reported, after
 * the warnings of the files read before it.
 */
#include "ctl-policy.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "policy/policy.h"
#include "util/macro.h"

static int policy_check(const char *prog, int n_dirs, char **dirs_arg) {
        const char *dirs[17];
        _cleanup_(policy_freep) Policy *p = NULL;
        char err[1024];
        int n = 0, r;

        if (n_dirs > 16) {
                fprintf(stderr, "%s policy check: at most 16 directories\n", prog);
                return -EINVAL;
        }
        for (int i = 0; i < n_dirs; i++) {
                struct stat st;

                /* The daemon skips a missing default directory; one named
                 * here is meant to be there. */
                if (stat(dirs_arg[i], &st) < 0) {
                        fprintf(stderr, "%s: %s\n", dirs_arg[i], strerror(errno));
                        return -EBADMSG;
                }
                if (!S_ISDIR(st.st_mode)) {
                        fprintf(stderr, "%s: not a directory\n", dirs_arg[i]);
                        return -EBADMSG;
                }
                dirs[n++] = dirs_arg[i];
        }
        if (n == 0)
                for (; policy_default_dirs[n]; n++)
                        dirs[n] = policy_default_dirs[n];
        dirs[n] = NULL;

        r = policy_load(dirs, &p, err, sizeof(err));
        if (r < 0) {
                fprintf(stderr, "%s\n", err[0] ? err : strerror(-r));
                printf("%s policy check: the policy would be refused; a reload keeps the old one\n", prog);
                return -EBADMSG;
        }
        for (size_t i = 0; i < policy_n_warnings(p); i++)
                fprintf(stderr, "%s\n", policy_warning(p, i));
        printf("%s policy check: %zu rules from %zu files, %zu warnings\n", prog, policy_n_rules(p),
               policy_n_files(p), policy_n_warnings(p));
        return 0;
}

int ctl_policy(const char *prog, int argc, char **argv) {
        if (argc < 2 || strcmp(argv[1], "check") != 0) {
                fprintf(stderr, "%s policy: expected 'check [DIR...]'%s%s%s\n", prog, argc >= 2 ? ", got '" : "",
                        argc >= 2 ? argv[1] : "", argc >= 2 ? "'" : "");
                return -EINVAL;
        }
        for (int i = 2; i < argc; i++)
                if (argv[i][0] == '-') {
                        fprintf(stderr, "%s policy check: unknown option '%s'\n", prog, argv[i]);
                        return -EINVAL;
                }
        return policy_check(prog, argc - 2, argv + 2);
}
