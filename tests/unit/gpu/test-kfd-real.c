/* SPDX-License-Identifier: MIT */
/*
 * The real-device helpers that can be exercised without a GPU: the SIGSEGV
 * policy for KFD's fault notification (kfd-facts §5 #20) and the probe.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kfd/kfd-real.h"

Test(kfd_real, survives_kernel_sent_sigsegv) {
        cr_assert_eq(kfd_fault_signal_install(), 0);
        unsigned before = kfd_fault_signal_count();
        /* send_sig(SIGSEGV, task, 0) arrives with si_code SI_USER, as kill(2) does */
        cr_assert_eq(kill(getpid(), SIGSEGV), 0);
        cr_assert_eq(kill(getpid(), SIGSEGV), 0);
        cr_expect_eq(kfd_fault_signal_count(), before + 2);
}

Test(kfd_real, real_fault_still_kills, .signal = SIGSEGV) {
        cr_assert_eq(kfd_fault_signal_install(), 0);
        volatile int *p = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq((void *) p, MAP_FAILED);
        *p = 1; /* SEGV_ACCERR: the handler restores SIG_DFL and the retry dies */
}

Test(kfd_real, probe_reason_is_one_line) {
        char reason[256];
        int r = kfd_probe_real(reason, sizeof reason);
        cr_expect_neq(reason[0], '\0');
        cr_expect_null(strchr(reason, '\n'));
        if (access("/dev/kfd", F_OK) < 0)
                cr_expect_eq(r, -ENOENT);
        /* a tiny buffer is truncated, never overrun */
        char small[8];
        kfd_probe_real(small, sizeof small);
        cr_expect_eq(strlen(small), sizeof small - 1);
}
