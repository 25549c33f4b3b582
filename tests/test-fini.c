/* SPDX-License-Identifier: MIT */
/* See test-fini.h. */
#include "test-fini.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

static unsigned failed;

void test_fini_expect_at(bool ok, const char *file, int line, const char *fmt, ...) {
        va_list ap;

        if (ok)
                return;
        failed++;
        if (criterion_current_test)
                fprintf(stderr, "teardown of %s::%s: ", criterion_current_test->category,
                        criterion_current_test->name);
        else
                fprintf(stderr, "teardown: ");
        fprintf(stderr, "%s:%d: ", file, line);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

void test_fini_end(void) {
#if defined(__SANITIZE_ADDRESS__)
        test_fini_expect(__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer found leaks (reported above)");
#endif
        if (failed > 0) {
                fprintf(stderr, "teardown: %u check(s) failed, aborting to fail the test\n", failed);
                fflush(stderr);
                abort();
        }
}

unsigned test_count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        unsigned n = 0;

        if (!d) {
                perror("opendir /proc/self/fd");
                abort();
        }
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n - 1; /* the DIR's own fd */
}
