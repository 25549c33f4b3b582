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
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "ctl-bus.h"
#include "ctl-json.h"
#include "kfdbroker.h"
#include "util/gpu-socket.h"
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

/* The broker's socket: a bind mount of the socket file alone, with nothing
 * on it that could be executed, a device or set-uid. */
static void cdi_write_socket_mount(FILE *f, const char *host_socket) {
        fputs("          {\n"
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
              "          }",
              f);
}

/* One of the ROCm files, read-only under CTL_CDI_ROCM_DIR; executable (the
 * library is mapped PROT_EXEC, kfdbroker-run is run), no devices, no set-uid. */
static void cdi_write_file_mount(FILE *f, const char *host_path, const char *name) {
        fputs(",\n"
              "          {\n"
              "            \"hostPath\": ",
              f);
        json_fstring(f, host_path);
        fputs(",\n"
              "            \"containerPath\": \"" CTL_CDI_ROCM_DIR "/",
              f);
        fputs(name, f);
        fputs("\",\n"
              "            \"type\": \"bind\",\n"
              "            \"options\": [\"bind\", \"ro\", \"nosuid\", \"nodev\"]\n"
              "          }",
              f);
}

/* A device: the socket and KFDBROKER_SOCKET; with @rocm (not NULL: the host
 * paths of kfdbroker-run and the interposer) those two files as well. */
static void cdi_write_device(FILE *f, const char *name, const char *host_socket, const char *const rocm[2]) {
        fputs("    {\n"
              "      \"name\": \"",
              f);
        fputs(name, f);
        fputs("\",\n"
              "      \"containerEdits\": {\n"
              "        \"env\": [\n"
              "          ",
              f);
        json_fstring(f, "KFDBROKER_SOCKET=" KFDBROKER_DEFAULT_SOCKET);
        fputs("\n"
              "        ],\n"
              "        \"mounts\": [\n",
              f);
        cdi_write_socket_mount(f, host_socket);
        if (rocm) {
                cdi_write_file_mount(f, rocm[0], CTL_CDI_RUN_NAME);
                cdi_write_file_mount(f, rocm[1], CTL_CDI_INTERPOSER_NAME);
        }
        fputs("\n"
              "        ]\n"
              "      }\n"
              "    }",
              f);
}

/* The spec itself: the device for native clients, the one for unmodified
 * ROCm programs, then one per GPU k whose gpu_sockets[k] is set. */
static void cdi_write_spec(FILE *f, const char *host_socket, const char *const rocm[2], char *const *gpu_sockets) {
        fputs("{\n"
              "  \"cdiVersion\": \"" CTL_CDI_VERSION "\",\n"
              "  \"kind\": \"" CTL_CDI_KIND "\",\n"
              "  \"devices\": [\n",
              f);
        cdi_write_device(f, CTL_CDI_DEVICE, host_socket, NULL);
        fputs(",\n", f);
        cdi_write_device(f, CTL_CDI_ROCM_DEVICE, host_socket, rocm);
        for (unsigned k = 0; k < CTL_CDI_MAX_GPUS; k++) {
                char name[16];

                if (!gpu_sockets[k])
                        continue;
                snprintf(name, sizeof name, "%u", k);
                fputs(",\n", f);
                cdi_write_device(f, name, gpu_sockets[k], rocm);
        }
        fputs("\n"
              "  ]\n"
              "}\n",
              f);
}

/* The GPUs the daemon at @path serves (the indexes it lists to this caller,
 * as bits), asked as a client within CTL_CDI_ASK_TIMEOUT_MS: > 0, or a
 * negative errno (not reachable, too slow). A daemon before several GPUs
 * lists none: its one GPU, 0. */
static int ask_gpus(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        struct timeval tv = { .tv_sec = CTL_CDI_ASK_TIMEOUT_MS / 1000,
                              .tv_usec = (CTL_CDI_ASK_TIMEOUT_MS % 1000) * 1000 };
        kfdb_session *s = NULL;
        kfdb_gpu gpus[CTL_CDI_MAX_GPUS];
        size_t n = 0;
        int fd, r;

        if (strlen(path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, path, strlen(path));
        fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        /* A socket whose daemon is not up yet (still being activated) must
         * not hold the spec up for long. */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0 ||
            connect(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        r = kfdb_session_new_from_fd(fd, "kfdbrokerctl cdi", &s);
        if (r < 0) {
                close(fd);
                return r;
        }
        r = kfdb_gpus_get(s, gpus, CTL_CDI_MAX_GPUS, &n);
        kfdb_session_free(s);
        if (r < 0)
                return r;
        unsigned mask = n == 0 ? 1u : 0u;
        for (size_t i = 0; i < MIN(n, (size_t) CTL_CDI_MAX_GPUS); i++)
                if (gpus[i].index < CTL_CDI_MAX_GPUS)
                        mask |= 1u << gpus[i].index;
        return (int) mask;
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

/* @path made absolute against the working directory, or NULL (-ENOMEM or
 * the errno of getcwd in *ret_error). */
static char *absolute_path(const char *path, int *ret_error) {
        _cleanup_free_ char *cwd = NULL;
        char *r;

        *ret_error = -ENOMEM;
        if (path[0] == '/')
                return strdup(path);
        cwd = getcwd(NULL, 0);
        if (!cwd) {
                *ret_error = -errno;
                return NULL;
        }
        if (asprintf(&r, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, path) < 0)
                return NULL;
        return r;
}

/* A ROCm file the spec mounts: warn, as for the socket, when it is not a
 * readable regular file yet (a runtime refuses the rocm device until it is). */
static void warn_rocm_file(const char *prog, const char *path) {
        struct stat st;

        if (stat(path, &st) < 0)
                fprintf(stderr, "%s cdi: warning: %s does not exist (%s); a container asking for "
                        CTL_CDI_KIND "=" CTL_CDI_ROCM_DEVICE " cannot start until it does\n", prog, path,
                        strerror(errno));
        else if (!S_ISREG(st.st_mode))
                fprintf(stderr, "%s cdi: warning: %s is not a regular file; the " CTL_CDI_KIND "="
                        CTL_CDI_ROCM_DEVICE " device will not work\n", prog, path);
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
                { "rocm-dir", required_argument, NULL, 'r' },
                { "from-sockets", no_argument, NULL, 's' },
                {}
        };
        char *gpu_sockets[CTL_CDI_MAX_GPUS] = {};
        bool from_sockets = false;
        unsigned n_gpus = 0, mask = 0;
        _cleanup_free_ char *host_socket = NULL, *text = NULL, *run = NULL, *interposer = NULL;
        _cleanup_(fclosep) FILE *mem = NULL;
        const char *output = NULL, *rocm_dir = NULL;
        struct stat st;
        size_t len = 0;
        int c, r;

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
                case 'r':
                        if (!optarg[0]) {
                                fprintf(stderr, "%s cdi: --rocm-dir needs a directory\n", prog);
                                return CTL_EXIT_USAGE;
                        }
                        if (!is_utf8(optarg)) {
                                fprintf(stderr, "%s cdi: the --rocm-dir path is not valid UTF-8, which a CDI spec "
                                        "(JSON) cannot hold\n", prog);
                                return CTL_EXIT_USAGE;
                        }
                        rocm_dir = optarg;
                        break;
                case 's':
                        from_sockets = true;
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
        host_socket = absolute_path(socket_path, &r);
        if (!host_socket) {
                if (r != -ENOMEM)
                        fprintf(stderr, "%s cdi: cannot make '%s' absolute: %s\n", prog, socket_path, strerror(-r));
                return r;
        }
        if (rocm_dir) {
                _cleanup_free_ char *dir = absolute_path(rocm_dir, &r);
                if (!dir) {
                        if (r != -ENOMEM)
                                fprintf(stderr, "%s cdi: cannot make '%s' absolute: %s\n", prog, rocm_dir,
                                        strerror(-r));
                        return r;
                }
                if (asprintf(&run, "%s/" CTL_CDI_RUN_NAME, dir) < 0)
                        run = NULL;
                if (asprintf(&interposer, "%s/" CTL_CDI_INTERPOSER_NAME, dir) < 0)
                        interposer = NULL;
        } else {
                run = strdup(KFDBROKER_BINDIR "/" CTL_CDI_RUN_NAME);
                interposer = strdup(KFDBROKER_LIBDIR "/" CTL_CDI_INTERPOSER_NAME);
        }
        if (!run || !interposer)
                return -ENOMEM;

        /* A spec may be written before the daemon first listens (at image or
         * node provisioning); say so, but write it. */
        if (stat(host_socket, &st) < 0)
                fprintf(stderr, "%s cdi: warning: %s does not exist yet (%s); a container using the spec cannot "
                        "start until kfdbrokerd listens there\n", prog, host_socket, strerror(errno));
        else if (!S_ISSOCK(st.st_mode))
                fprintf(stderr, "%s cdi: warning: %s is not a socket; a container using the spec will not reach "
                        "kfdbrokerd\n", prog, host_socket);
        warn_rocm_file(prog, run);
        warn_rocm_file(prog, interposer);

        /* A device per GPU: those the daemon serves, else per socket there is. */
        r = from_sockets ? -ECANCELED : ask_gpus(host_socket);
        if (r > 0)
                mask = (unsigned) r;
        for (unsigned k = 0; k < CTL_CDI_MAX_GPUS; k++) {
                char path[PATH_MAX];

                if (gpu_socket_path(host_socket, k, path, sizeof path) < 0)
                        break;
                if (r <= 0 && stat(path, &st) < 0)
                        break; /* the sockets beside it: 0, 1, ... while they exist */
                if (r <= 0 || (mask & (1u << k))) {
                        gpu_sockets[k] = strdup(path);
                        if (!gpu_sockets[k])
                                break;
                        n_gpus++;
                }
        }
        if (r <= 0 && !from_sockets && n_gpus > 0)
                fprintf(stderr, "%s cdi: note: cannot ask kfdbrokerd at %s which GPUs it serves (%s); a device "
                        "for each of the %u GPU sockets beside it\n", prog, host_socket, kfdb_strerror(r), n_gpus);

        mem = open_memstream(&text, &len);
        if (mem)
                cdi_write_spec(mem, host_socket, (const char *const[2]) { run, interposer }, gpu_sockets);
        for (unsigned k = 0; k < CTL_CDI_MAX_GPUS; k++)
                free(gpu_sockets[k]);
        if (!mem)
                return -ENOMEM;
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
