/* SPDX-License-Identifier: MIT */
/*
 * The worker's sandbox (worker-sandbox.h). A worker drives a GPU context
 * whose kernels a client wrote and reads the client's code objects and
 * kernel arguments (relayed by the daemon); if anything in it went wrong, it
 * should be able to do little: it runs as the service user (or a uid no
 * account has, manager/worker-user.c; never one a client can have), cannot
 * gain privileges, cannot be ptraced or have its memory read by
 * another process of that user (PR_SET_DUMPABLE 0: the kernel then requires
 * CAP_SYS_PTRACE, ptrace(2) "Ptrace access mode checking"), and its system
 * calls are filtered with libseccomp. The filter is an allow list; anything
 * else fails with EPERM (clone3 with ENOSYS, so that glibc falls back to
 * clone for its threads).
 */
#include <errno.h>
#include <grp.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/macro.h"
#include "worker/worker-sandbox.h"

/* Everything a running worker calls: reading and writing its sockets and
 * eventfds, the event loop, memory (mapping BOs and dma-bufs; MAP_FIXED at
 * GPU addresses), threads and their synchronisation, clocks, and exiting. */
static const char *const allowed[] = {
        "read", "write", "readv", "writev", "pread64", "pwrite64", "close", "close_range", "fstat", "newfstatat",
        "statx", "lseek", "fcntl", "dup", "dup3",
        "sendmsg", "recvmsg", "sendto", "recvfrom", "shutdown", "getsockopt",
        "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "poll", "ppoll", "eventfd2",
        "timerfd_create", "timerfd_settime", "timerfd_gettime",
        "mmap", "munmap", "mprotect", "mremap", "madvise", "brk",
        "futex", "futex_waitv", "set_robust_list", "get_robust_list", "rseq", "set_tid_address", "membarrier",
        "sched_yield", "sched_getaffinity", "gettid", "getpid", "getppid", "getuid", "geteuid", "getgid",
        "getegid", "tgkill",
        "rt_sigreturn", "rt_sigprocmask", "rt_sigaction", "sigaltstack", "restart_syscall",
        "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "getrandom",
        "exit", "exit_group",
#if defined(__SANITIZE_ADDRESS__)
        /* The sanitizer runtime: LeakSanitizer stops the world with a
         * ptracing helper at exit and reads /proc/self/maps. */
        "ptrace", "wait4", "waitid", "openat", "readlink", "readlinkat", "getdents64", "statfs", "fstatfs",
        "prctl", "process_vm_readv", "mincore", "sched_getparam", "getrlimit", "prlimit64", "pipe2",
#endif
};

static int add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n, const struct scmp_arg_cmp *cmp) {
        int nr = seccomp_syscall_resolve_name(name);

        if (nr == __NR_SCMP_ERROR)
                return 0; /* not on this architecture */
        return seccomp_rule_add_array(ctx, action, nr, n, cmp);
}

static int build(scmp_filter_ctx ctx) {
        int r;

        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(allowed); i++) {
                r = add(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL);
                if (r < 0)
                        return r;
        }
        /* ioctl: the KFD ('K') and DRM ('d') families only (kfd_ioctl.h
         * AMDKFD_IOCTL_BASE, drm.h DRM_IOCTL_BASE). */
        r = add(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00u, (uint64_t) 'K' << 8));
        if (r >= 0)
                r = add(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &SCMP_A1(SCMP_CMP_MASKED_EQ, 0xff00u, (uint64_t) 'd' << 8));
        /* Threads, not processes. */
        if (r >= 0)
                r = add(ctx, SCMP_ACT_ALLOW, "clone", 1,
                        &SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
        if (r >= 0)
                r = add(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL);
        /* New connections to the simulated GPU (sim-remote): AF_UNIX pairs. */
        if (r >= 0)
                r = add(ctx, SCMP_ACT_ALLOW, "socketpair", 1, &SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
        return r;
}

int worker_sandbox_enter(const WorkerSetup *setup, char *err, size_t errlen) {
        scmp_filter_ctx ctx;
        int r;

        if (geteuid() == 0 && setup->uid != 0) {
                gid_t groups[ELEMENTSOF(setup->groups)];
                size_t n = MIN((size_t) setup->n_groups, ELEMENTSOF(groups));

                for (size_t i = 0; i < n; i++)
                        groups[i] = (gid_t) setup->groups[i];
                if (setgroups(n, groups) < 0 || setresgid(setup->gid, setup->gid, setup->gid) < 0 ||
                    setresuid(setup->uid, setup->uid, setup->uid) < 0) {
                        r = -errno;
                        snprintf(err, errlen, "cannot switch to uid %u gid %u: %s", setup->uid, setup->gid,
                                 strerror(-r));
                        return r;
                }
                if (geteuid() != (uid_t) setup->uid || getegid() != (gid_t) setup->gid) {
                        snprintf(err, errlen, "still uid %u after switching to %u", (unsigned) geteuid(),
                                 setup->uid);
                        return -EPERM;
                }
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) {
                r = -errno;
                snprintf(err, errlen, "prctl: %s", strerror(-r));
                return r;
        }
        ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
        if (!ctx) {
                snprintf(err, errlen, "seccomp_init failed");
                return -ENOMEM;
        }
        r = build(ctx);
        if (r >= 0)
                r = seccomp_load(ctx);
        seccomp_release(ctx);
        if (r < 0) {
                snprintf(err, errlen, "installing the system-call filter failed: %s", strerror(-r));
                return r;
        }
        return 0;
}
