/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl cdi [--output FILE]`: prints a Container Device Interface
 * (CDI) spec for the device kfdbroker.org/gpu=all. A container runtime that
 * reads it (podman, Docker >= 25 with CDI enabled, containerd, CRI-O) bind
 * mounts the broker's socket into the container at the compiled-in default
 * path and sets KFDBROKER_SOCKET to it, which libkfdbroker reads. No device
 * node is passed: the container reaches the GPU only through the daemon,
 * which applies its policy to the container's processes like to any other.
 *
 * The file is JSON (a CDI spec may be JSON or YAML). The version and its
 * reasons are in ctl-cdi.h; docs/containers.md tells how to use it.
 */
#include "ctl-cdi.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "ctl-bus.h"
#include "ctl-json.h"
#include "util/macro.h"

static void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}

/* Whether s is well-formed UTF-8 (no overlong forms, surrogates, or code
 * points past U+10FFFF): a JSON document must be. */
static bool is_utf8(const char *s) {
        const unsigned char *p = (const unsigned char *) s;

        while (*p) {
                unsigned n;
                uint32_t c;

                if (*p < 0x80) {
                        p++;
                        continue;
                } else if ((*p & 0xe0) == 0xc0)
                        n = 1, c = *p & 0x1f;
                else if ((*p & 0xf0) == 0xe0)
                        n = 2, c = *p & 0x0f;
                else if ((*p & 0xf8) == 0xf0)
                        n = 3, c = *p & 0x07;
                else
                        return false;
                p++;
                for (unsigned i = 0; i < n; i++, p++) {
                        if ((*p & 0xc0) != 0x80)
                                return false;
                        c = c << 6 | (*p & 0x3f);
                }
                if ((n == 1 && c < 0x80) || (n == 2 && c < 0x800) || (n == 3 && c < 0x10000) ||
                    c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
                        return false;
        }
        return true;
}

/* The spec itself. Mount options: a bind mount of the socket file alone,
 * with nothing on it that could be executed, a device or set-uid. */
static void cdi_write_spec(FILE *f, const char *host_socket) {
        fputs("{\n"
              "  \"cdiVersion\": \"" CTL_CDI_VERSION "\",\n"
              "  \"kind\": \"" CTL_CDI_KIND "\",\n"
              "  \"devices\": [\n"
              "    {\n"
              "      \"name\": \"" CTL_CDI_DEVICE "\",\n"
              "      \"containerEdits\": {\n"
              "        \"env\": [\n"
              "          ",
              f);
        json_fstring(f, "KFDBROKER_SOCKET=" KFDBROKER_DEFAULT_SOCKET);
        fputs("\n"
              "        ],\n"
              "        \"mounts\": [\n"
              "          {\n"
              "            \"hostPath\": ",
              f);
        json_fstring(f, host_socket);
        fputs(",\n"
              "            \"containerPath\": ",
              f);
        json_fstring(f, KFDBROKER_DEFAULT_SOCKET);
        fputs(",\n"
              "            \"type\": \"bind\",\n"
              "            \"options\": [\"bind\", \"nosuid\", \"nodev\", \"noexec\"]\n"
              "          }\n"
              "        ]\n"
              "      }\n"
              "    }\n"
              "  ]\n"
              "}\n",
              f);
}

/*
 * Makes @path's directory if it is missing — /etc/cdi and /run/cdi exist only
 * once something puts a spec there — with mode 0755 whatever the umask, as
 * runtimes read it as root and tools as anyone. Only the last component: a
 * path whose parent is missing too is more likely a typo, and is named.
 */
static int make_parent_dir(const char *prog, const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash || slash == dir)
                return 0; /* the current directory or / */
        *slash = '\0';
        if (mkdir(dir, 0755) < 0) {
                int r = -errno;

                if (r == -EEXIST)
                        return 0;
                fprintf(stderr, "%s cdi: cannot write %s: cannot make its directory %s: %s\n", prog, path, dir,
                        strerror(-r));
                return r;
        }
        if (chmod(dir, 0755) < 0) {
                int r = -errno;

                fprintf(stderr, "%s cdi: cannot make %s mode 0755: %s\n", prog, dir, strerror(-r));
                return r;
        }
        return 0;
}

/* Writes @text to @path through a temporary file in its directory and a
 * rename, so a runtime reading the CDI directory never sees half a spec. */
static int write_file_atomic(const char *prog, const char *path, const char *text, size_t len) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t done = 0;
        int k;

        k = make_parent_dir(prog, path);
        if (k < 0)
                return k;
        if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
                return -ENOMEM;
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                int r = -errno;
                fprintf(stderr, "%s cdi: cannot write %s: %s\n", prog, path, strerror(-r));
                return r;
        }
        while (done < len) {
                ssize_t n = write(fd, text + done, len - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int r = -errno;
                        fprintf(stderr, "%s cdi: cannot write %s: %s\n", prog, tmp, strerror(-r));
                        unlink(tmp);
                        return r;
                }
                done += (size_t) n;
        }
        /* Runtimes read the CDI directories as root, tools as anyone. */
        if (fchmod(fd, 0644) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
                int r = -errno;
                fprintf(stderr, "%s cdi: cannot write %s: %s\n", prog, path, strerror(-r));
                unlink(tmp);
                return r;
        }
        return 0;
}

int ctl_cdi(const char *prog, const char *socket_path, int argc, char **argv) {
        static const struct option options[] = {
                { "output", required_argument, NULL, 'o' },
                {}
        };
        _cleanup_free_ char *host_socket = NULL, *text = NULL;
        _cleanup_(fclosep) FILE *mem = NULL;
        const char *output = NULL;
        struct stat st;
        size_t len = 0;
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "o:", options, NULL)) >= 0) {
                switch (c) {
                case 'o':
                        if (!optarg[0]) {
                                fprintf(stderr, "%s cdi: --output needs a file name\n", prog);
                                return CTL_EXIT_USAGE;
                        }
                        output = optarg;
                        break;
                default:
                        return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "%s cdi: unexpected argument '%s'\n", prog, argv[optind]);
                return CTL_EXIT_USAGE;
        }

        if (!socket_path[0]) {
                fprintf(stderr, "%s cdi: the socket path is empty\n", prog);
                return CTL_EXIT_USAGE;
        }
        if (!is_utf8(socket_path)) {
                fprintf(stderr, "%s cdi: the socket path is not valid UTF-8, which a CDI spec (JSON) cannot hold\n",
                        prog);
                return CTL_EXIT_USAGE;
        }
        /* The runtime resolves hostPath on its own: it must be absolute. */
        if (socket_path[0] == '/')
                host_socket = strdup(socket_path);
        else {
                _cleanup_free_ char *cwd = getcwd(NULL, 0);
                if (!cwd) {
                        int r = -errno;
                        fprintf(stderr, "%s cdi: cannot make '%s' absolute: %s\n", prog, socket_path,
                                strerror(-r));
                        return r;
                }
                if (asprintf(&host_socket, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, socket_path) < 0)
                        host_socket = NULL;
        }
        if (!host_socket)
                return -ENOMEM;

        /* A spec may be written before the daemon first listens (at image or
         * node provisioning); say so, but write it. */
        if (stat(host_socket, &st) < 0)
                fprintf(stderr, "%s cdi: warning: %s does not exist yet (%s); a container using the spec cannot "
                        "start until kfdbrokerd listens there\n", prog, host_socket, strerror(errno));
        else if (!S_ISSOCK(st.st_mode))
                fprintf(stderr, "%s cdi: warning: %s is not a socket; a container using the spec will not reach "
                        "kfdbrokerd\n", prog, host_socket);

        mem = open_memstream(&text, &len);
        if (!mem)
                return -ENOMEM;
        cdi_write_spec(mem, host_socket);
        if (fclose(TAKE_PTR(mem)) != 0)
                return -ENOMEM;

        if (!output) {
                if (fwrite(text, 1, len, stdout) != len || fflush(stdout) != 0) {
                        fprintf(stderr, "%s cdi: cannot write the spec to standard output: %s\n", prog,
                                strerror(errno));
                        return -EIO;
                }
                return 0;
        }
        return write_file_atomic(prog, output, text, len);
}
