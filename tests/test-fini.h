/* SPDX-License-Identifier: MIT */
/*
 * Teardown checks that fail. Criterion 2.4 prints a failed cr_expect() or
 * cr_assert() in a .fini function but fails neither the test nor the run
 * (exit status 0), and a cr_assert() there also skips the rest of the
 * teardown. So a .fini checks with test_fini_expect(), which prints what
 * failed and carries on, and ends with test_fini_end(), which under ASan runs
 * LeakSanitizer's check on the spot and then aborts if anything failed: a
 * teardown that dies of a signal makes Criterion warn "crashed during its
 * setup or teardown" and exit 1, so meson fails the test.
 *
 * Leaks of tests without a .fini are caught by LeakSanitizer's own check when
 * the test's worker exits: tests/meson.build runs every test with
 * abort_on_error=1, without which Criterion ignores that check's exit status
 * (23) just as it ignores a failed teardown.
 */
#pragma once

#include <stdbool.h>

#define TEST_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* Records a failed check of the running teardown unless ok, printing the test, file:line and the message. */
#define test_fini_expect(ok, ...) test_fini_expect_at((ok), __FILE__, __LINE__, __VA_ARGS__)
void test_fini_expect_at(bool ok, const char *file, int line, const char *fmt, ...) TEST_PRINTF(4, 5);

/*
 * Ends a teardown: under ASan, runs LeakSanitizer now (a leak is printed and
 * counts as a failed check); then aborts if any check of this teardown failed.
 * Call it last in a .fini, not from a test body (a test that restarts its
 * fixture calls the teardown's other half).
 */
void test_fini_end(void);

/* Number of fds this process has open. */
unsigned test_count_fds(void);
