/* SPDX-License-Identifier: MIT */
/*
 * kfdbroker-run [--socket PATH] [--] PROGRAM [ARGS...]: runs an unmodified
 * ROCm program with libkfdbroker-kfd.so preloaded, so that its /dev/kfd,
 * render node and KFD topology are the broker's (docs/rocm.md,
 * kfdbroker-run(1)). The library is the one next to this program (the build
 * tree) or else the installed one in $libdir.
 *
 * Debian 12's rocminfo first runs `lsmod | grep amdgpu`, which a sandbox
 * without lsmod, or a host without amdgpu, fails. kfdbroker-run puts a
 * private directory first on PATH, for the process tree it runs only,
 * holding an `lsmod` that lists the amdgpu module the broker stands for;
 * nothing outside that tree changes. The directory goes when the program
 * ends. Signals that would end kfdbroker-run (INT, TERM, HUP, QUIT) are
 * passed on to the program; its exit status is ours (128 + N for signal N).
 *
 * It is linked statically and checks, before it preloads the library, that
 * this system's glibc defines every version the library needs
 * (kfdbroker-run-glibc.c): in a container with an older glibc, or musl, it
 * says so and exits 1 instead of the loader failing the program.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "config.h"
#include "kfdbroker-run-glibc.h"

#define PROG "kfdbroker-run"
#define LIBNAME "libkfdbroker-kfd.so"

static pid_t child = -1;
static pid_t parent;

static void forward(int sig) {
        if (child > 0)
                kill(child, sig);
}

static void usage(FILE *f) {
        fprintf(f,
                "Usage: " PROG " [--socket PATH] [--] PROGRAM [ARGS...]\n"
                "Runs PROGRAM with /dev/kfd and its render node served by kfdbrokerd.\n"
                "  --socket=PATH  socket of kfdbrokerd (default: $KFDBROKER_SOCKET, else %s)\n"
                "  -h, --help     this text\n"
                "      --version  the version\n",
                KFDBROKER_DEFAULT_SOCKET);
}

/* The interposer next to this program, else the installed one. */
static int find_library(char *buf, size_t size) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        char *slash;

        if (n > 0) {
                exe[n] = 0;
                slash = strrchr(exe, '/');
                if (slash) {
                        *slash = 0;
                        if ((size_t) snprintf(buf, size, "%s/%s", exe, LIBNAME) < size && access(buf, R_OK) == 0)
                                return 0;
                }
        }
        if ((size_t) snprintf(buf, size, "%s/%s", KFDBROKER_LIBDIR, LIBNAME) >= size)
                return -ENAMETOOLONG;
        return access(buf, R_OK) == 0 ? 0 : -ENOENT;
}

static int write_lsmod(const char *dir) {
        static const char script[] =
                "#!/bin/sh\n"
                "# kfdbroker-run(1): the amdgpu module as the program it runs sees it, served by kfdbrokerd.\n"
                "echo 'Module                  Size  Used by'\n"
                "echo 'amdgpu                     0  0'\n";
        char path[PATH_MAX];
        int fd;

        if ((size_t) snprintf(path, sizeof path, "%s/lsmod", dir) >= sizeof path)
                return -ENAMETOOLONG;
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
        if (fd < 0)
                return -errno;
        if (write(fd, script, sizeof script - 1) != (ssize_t) (sizeof script - 1)) {
                close(fd);
                return -EIO;
        }
        return close(fd) < 0 ? -errno : 0;
}

static int setenv_prepend(const char *name, const char *value, char sep) {
        const char *old = getenv(name);
        char *v;
        int r;

        if (!old || !old[0])
                return setenv(name, value, 1) < 0 ? -errno : 0;
        if (asprintf(&v, "%s%c%s", value, sep, old) < 0)
                return -ENOMEM;
        r = setenv(name, v, 1) < 0 ? -errno : 0;
        free(v);
        return r;
}

static void remove_dir(const char *dir) {
        char path[PATH_MAX];

        snprintf(path, sizeof path, "%s/lsmod", dir);
        (void) unlink(path);
        (void) rmdir(dir);
}

int main(int argc, char *argv[]) {
        const char *sock = NULL, *base;
        char lib[PATH_MAX], dir[PATH_MAX], msg[PATH_MAX + 512];
        int i, r, status;

        for (i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--") == 0) {
                        i++;
                        break;
                }
                if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
                        usage(stdout);
                        return 0;
                }
                if (strcmp(argv[i], "--version") == 0) {
                        printf(PROG " %s\n", KFDBROKER_VERSION);
                        return 0;
                }
                if (strcmp(argv[i], "--socket") == 0) {
                        if (++i == argc) {
                                fprintf(stderr, PROG ": --socket needs a path\n");
                                return 2;
                        }
                        sock = argv[i];
                        continue;
                }
                if (strncmp(argv[i], "--socket=", 9) == 0) {
                        sock = argv[i] + 9;
                        continue;
                }
                if (argv[i][0] == '-') {
                        fprintf(stderr, PROG ": unknown option %s\n", argv[i]);
                        usage(stderr);
                        return 2;
                }
                break;
        }
        if (i >= argc) {
                fprintf(stderr, PROG ": no program to run\n");
                usage(stderr);
                return 2;
        }
        if (sock && !sock[0]) {
                fprintf(stderr, PROG ": --socket needs a path\n");
                return 2;
        }
        if (!sock)
                sock = getenv("KFDBROKER_SOCKET");
        if (!sock || !sock[0])
                sock = KFDBROKER_DEFAULT_SOCKET;

        r = find_library(lib, sizeof lib);
        if (r < 0) {
                fprintf(stderr, PROG ": cannot find " LIBNAME " next to this program or in " KFDBROKER_LIBDIR ": %s\n",
                        strerror(-r));
                return 1;
        }
        /* A container's glibc may be older than the one the interposer was
         * built against, or missing: say so rather than let the loader fail
         * the program. */
        r = glibc_check(lib, msg, sizeof msg);
        if (r < 0) {
                fprintf(stderr, PROG ": cannot preload %s: %s\n", LIBNAME, msg);
                return 1;
        }
        base = getenv("XDG_RUNTIME_DIR");
        if (!base || base[0] != '/' || access(base, W_OK) < 0)
                base = "/tmp";
        snprintf(dir, sizeof dir, "%s/kfdbroker-run-XXXXXX", base);
        if (!mkdtemp(dir)) {
                fprintf(stderr, PROG ": cannot make a private directory in %s: %m\n", base);
                return 1;
        }
        r = write_lsmod(dir);
        if (r == 0)
                r = setenv_prepend("LD_PRELOAD", lib, ':');
        if (r == 0)
                r = setenv("KFDBROKER_SOCKET", sock, 1) < 0 ? -errno : 0;
        if (r == 0)
                r = setenv_prepend("PATH", dir, ':');
        if (r < 0) {
                fprintf(stderr, PROG ": cannot set up the environment: %s\n", strerror(-r));
                remove_dir(dir);
                return 1;
        }

        parent = getpid();
        child = fork();
        if (child < 0) {
                fprintf(stderr, PROG ": fork: %m\n");
                remove_dir(dir);
                return 1;
        }
        if (child == 0) {
                /* The program goes with kfdbroker-run, also when that is
                 * killed outright (a supervisor's SIGKILL must not leave a
                 * GPU program running with nobody to wait for it). */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(127);
                execvp(argv[i], argv + i);
                fprintf(stderr, PROG ": cannot run %s: %m\n", argv[i]);
                _exit(127);
        }
        for (const int *s = (const int[]) { SIGINT, SIGTERM, SIGHUP, SIGQUIT, 0 }; *s; s++)
                signal(*s, forward);
        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR) {
                        fprintf(stderr, PROG ": waitpid: %m\n");
                        remove_dir(dir);
                        return 1;
                }
        remove_dir(dir);
        if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
        return WEXITSTATUS(status);
}
