/* SPDX-License-Identifier: MIT */
/*
 * The real-device helpers that can be exercised without a GPU: the SIGSEGV
 * policy for KFD's fault notification (kfd-facts §5 #20), the probe, and
 * what the table resolves an mmap to.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kfd/kfd-ops.h"
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

/* The fdinfo of a dma-buf as dma_buf_show_fdinfo() prints it after the
 * generic lines (fs/proc/fd.c): the count the daemon reads to see whether a
 * freed buffer's dma-buf still has copies. */
Test(kfd_real, dmabuf_fdinfo_count) {
        long count = -1;

        cr_expect_eq(kfd_dmabuf_fdinfo_count("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1234\n"
                                             "size:\t4096\ncount:\t3\nexp_name:\tamdgpu\n",
                                             &count), 0);
        cr_expect_eq(count, 3);
        cr_expect_eq(kfd_dmabuf_fdinfo_count("size:\t4096\ncount:\t1\nexp_name:\tamdgpu\nname:\tx\n", &count), 0);
        cr_expect_eq(count, 1);
        /* A memfd (the simulator's dma-bufs): not a dma-buf, no count. */
        cr_expect_eq(kfd_dmabuf_fdinfo_count("pos:\t0\nflags:\t02100002\nmnt_id:\t0\nino:\t41219\n", &count), -EINVAL);
        /* A dma-buf of a kernel that does not print the count. */
        cr_expect_eq(kfd_dmabuf_fdinfo_count("size:\t4096\nexp_name:\tamdgpu\n", &count), -EOPNOTSUPP);
        cr_expect_eq(kfd_dmabuf_fdinfo_count("count:\tmany\nexp_name:\tamdgpu\n", &count), -EBADMSG);
        cr_expect_eq(kfd_dmabuf_fdinfo_count("count:\t-1\nexp_name:\tamdgpu\n", &count), -EBADMSG);
        cr_expect_eq(kfd_dmabuf_fdinfo_count("", &count), -EINVAL);
}

/* kfd_ops_real on an fd that is not a dma-buf: an error, never a count. */
Test(kfd_real, dmabuf_refs_of_a_memfd) {
        int fd = memfd_create("not-a-dmabuf", MFD_CLOEXEC);

        cr_assert_geq(fd, 0);
        cr_expect_eq(kfd_dmabuf_refs(&kfd_ops_real, fd), -EINVAL);
        close(fd);
        cr_expect_eq(kfd_dmabuf_refs(&kfd_ops_real, fd), -EBADF);
}

/* mmap_resolve: the file itself at the same offset (a DRM file maps its
 * objects for whoever holds it), so what the copy maps is what the file
 * maps; a length of 0 or an offset off a page is mmap(2)'s EINVAL. Shown on
 * a memfd standing for the render file. */
Test(kfd_real, mmap_resolve_is_the_file_itself) {
        int memfd = memfd_create("render", MFD_CLOEXEC), fd = -1;
        uint64_t off = 0;
        uint8_t *m;

        cr_assert_geq(memfd, 0);
        cr_assert_eq(ftruncate(memfd, 3 * 4096), 0);
        cr_expect_eq(kfd_ops_real.mmap_resolve(NULL, memfd, 0, 4096, &fd, &off), -EINVAL);
        cr_expect_eq(kfd_ops_real.mmap_resolve(NULL, memfd, 4096, 100, &fd, &off), -EINVAL);
        cr_assert_eq(kfd_ops_real.mmap_resolve(NULL, memfd, 4096, 8192, &fd, &off), 0);
        cr_expect_neq(fd, memfd, "a copy of the file");
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        cr_expect_eq(off, 8192u);
        m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t) off);
        cr_assert_neq(m, MAP_FAILED);
        m[1] = 0x5c;
        uint8_t b = 0;
        cr_expect_eq(pread(memfd, &b, 1, 8193), 1);
        cr_expect_eq(b, 0x5c);
        munmap(m, 4096);
        close(fd);
        close(memfd);
}
