/* SPDX-License-Identifier: MIT */
/*
 * Run by test-rocminfo.sh under kfdbroker-run: what a ROCm process does with
 * /dev/kfd around fork, through the preloaded interposer and a real daemon.
 * The parent opens /dev/kfd twice (one KFD process: the same GET_VERSION
 * through both) and the render node; the child's calls on the inherited fd
 * fail with EBADF (what the thunk reads as "a forked child"), its own open
 * gets a KFD process of its own, and the parent goes on. Prints what failed
 * and exits 1, or exits 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/kfd_ioctl.h>

static int fail(const char *what) {
        fprintf(stderr, "kfd-fork-probe: %s: %m\n", what);
        return 1;
}

static int version(int fd) {
        struct kfd_ioctl_get_version_args v = {};
        if (ioctl(fd, AMDKFD_IOC_GET_VERSION, &v) < 0)
                return -errno;
        return (int) v.major_version;
}

int main(void) {
        struct stat st;
        int a, b, c, status;
        pid_t pid;

        a = open("/dev/kfd", O_RDWR | O_CLOEXEC);
        b = open("/dev/kfd", O_RDWR | O_CLOEXEC);
        if (a < 0 || b < 0 || a == b)
                return fail("open /dev/kfd twice");
        if (version(a) != 1 || version(b) != 1)
                return fail("GET_VERSION");
        c = dup(b);
        close(b);
        if (c < 0 || version(c) != 1)
                return fail("GET_VERSION on a dup of a closed fd's file");
        if (stat("/dev/kfd", &st) < 0 || !S_ISCHR(st.st_mode))
                return fail("stat /dev/kfd");
        if (access("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties", R_OK) < 0)
                return fail("access to the topology");
        pid = fork();
        if (pid < 0)
                return fail("fork");
        if (pid == 0) {
                int d;
                errno = 0;
                if (version(a) != -EBADF) {
                        fprintf(stderr, "kfd-fork-probe: the child's GET_VERSION on the parent's fd: %d\n", version(a));
                        _exit(1);
                }
                d = open("/dev/kfd", O_RDWR | O_CLOEXEC);
                if (d < 0 || version(d) != 1) {
                        fprintf(stderr, "kfd-fork-probe: the child's own /dev/kfd: %m\n");
                        _exit(1);
                }
                _exit(0);
        }
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return fail("the child");
        if (version(a) != 1)
                return fail("the parent's GET_VERSION after the child");
        return 0;
}
