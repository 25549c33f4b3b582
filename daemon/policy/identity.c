/* SPDX-License-Identifier: MIT */
/*
 * See identity.h. Everything here reads small, bounded files under a /proc
 * root given as a parameter, so the same code runs against the real /proc and
 * against fabricated trees in tests. The cgroup path is parsed here rather
 * than through sd_pid_get_unit()/sd_pid_get_user_unit(): those work without
 * systemd as PID 1 (they only read /proc/PID/cgroup), but they cannot read a
 * different /proc root, they re-read /proc per call (one call per field,
 * each a separate race with pid reuse), and they know nothing of container
 * conventions. The unit rule is systemd's (cg_path_get_unit): skip leading
 * *.slice components, the next component is the unit; inside user@UID.service
 * the same rule again gives the user unit.
 */
#include "policy/identity.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"
#include "util/macro.h"
#include "util/utf8.h"

#define PROC_FILE_MAX (1024u * 1024u)   /* status with 65536 groups is ~720 KiB */
#define SMALL_FILE_MAX (64u * 1024u)

/* Reads a whole file below dirfd, NUL-terminated, at most max bytes.
 * -EFBIG if it is longer. */
static int read_file_at(int dirfd, const char *name, size_t max, char **ret, size_t *ret_len) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, cap = 4096;

        fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        buf = malloc(cap + 1);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t n;

                if (len == cap) {
                        char *nb;

                        if (cap >= max)
                                return -EFBIG;
                        cap = MIN(cap * 2, max);
                        nb = realloc(buf, cap + 1);
                        if (!nb)
                                return -ENOMEM;
                        buf = nb;
                }
                n = read(fd, buf + len, cap - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t) n;
        }
        buf[len] = 0;
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}

/* Finds "Key:" at the start of a line; returns the value (rest of line) or NULL. */
static const char *find_status_field(const char *status, const char *key) {
        size_t kl = strlen(key);

        for (const char *p = status; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, key, kl) == 0 && p[kl] == ':')
                        return p + kl + 1;
        return NULL;
}

static int parse_id_field(const char *status, const char *key, unsigned *ret) {
        const char *v = find_status_field(status, key);
        unsigned long long x;
        char *end;

        if (!v)
                return -EBADMSG;
        while (*v == ' ' || *v == '\t')
                v++;
        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno || end == v || x > UINT32_MAX)
                return -EBADMSG;
        *ret = (unsigned) x;
        return 0;
}

static int parse_groups(const char *status, Identity *id) {
        const char *v = find_status_field(status, "Groups");
        _cleanup_free_ gid_t *gids = NULL;
        size_t n = 0, cap = 0;

        if (!v)
                return 0; /* kernels always print it; a tree without it has no groups */
        for (;;) {
                unsigned long long x;
                char *end;

                while (*v == ' ' || *v == '\t')
                        v++;
                if (*v == '\n' || *v == 0)
                        break;
                if (!isdigit((unsigned char) *v))
                        return -EBADMSG;
                errno = 0;
                x = strtoull(v, &end, 10);
                if (errno || x >= UINT32_MAX)
                        return -EBADMSG;
                if (n >= IDENTITY_MAX_GIDS)
                        return -E2BIG;
                if (n == cap) {
                        size_t nc = cap ? cap * 2 : 16;
                        gid_t *ng = reallocarray(gids, nc, sizeof(gid_t));

                        if (!ng)
                                return -ENOMEM;
                        gids = ng;
                        cap = nc;
                }
                gids[n++] = (gid_t) x;
                v = end;
        }
        free(id->gids);
        id->gids = TAKE_PTR(gids);
        id->n_gids = n;
        return 0;
}

/* Picks the cgroup path from /proc/PID/cgroup: the v2 "0::" line, or on a
 * legacy-only system the "name=systemd" hierarchy, which systemd keeps in the
 * same shape. Lines are "ID:CONTROLLERS:PATH"; PATH may contain ':'. */
static int parse_cgroup_file(const char *text, char **ret) {
        const char *v2 = NULL, *named = NULL;
        size_t v2_len = 0, named_len = 0;

        for (const char *p = text; *p;) {
                const char *eol = strchrnul(p, '\n');
                const char *c1 = memchr(p, ':', (size_t) (eol - p));
                const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t) (eol - c1 - 1)) : NULL;

                if (c2) {
                        if (c1 - p == 1 && p[0] == '0' && c2 == c1 + 1) {
                                v2 = c2 + 1;
                                v2_len = (size_t) (eol - v2);
                        } else if ((size_t) (c2 - c1 - 1) == strlen("name=systemd") &&
                                   strncmp(c1 + 1, "name=systemd", strlen("name=systemd")) == 0) {
                                named = c2 + 1;
                                named_len = (size_t) (eol - named);
                        }
                }
                p = *eol ? eol + 1 : eol;
        }
        if (!v2 && !named)
                return -ENODATA;
        /* Hybrid hierarchy: systemd maintains both; prefer v2 unless it is the
         * bare root while name=systemd knows more (v2 not delegated). */
        if (!v2 || (v2_len == 1 && v2[0] == '/' && named && named_len > 1)) {
                v2 = named;
                v2_len = named_len;
        }
        if (v2_len == 0 || v2[0] != '/' || v2_len >= PATH_MAX)
                return -EBADMSG;
        *ret = strndup(v2, v2_len);
        return *ret ? 0 : -ENOMEM;
}

static bool endswith(const char *s, size_t len, const char *suffix) {
        size_t sl = strlen(suffix);

        return len >= sl && memcmp(s + len - sl, suffix, sl) == 0;
}

static bool startswith(const char *s, size_t len, const char *prefix) {
        size_t pl = strlen(prefix);

        return len >= pl && memcmp(s, prefix, pl) == 0;
}

/* A unit that may hold processes, named with systemd's unit-name alphabet. */
static bool unit_name_plausible(const char *s, size_t len) {
        static const char *const suffixes[] = { ".service", ".scope", ".socket", ".mount", ".swap" };
        bool suffix = false;

        if (len == 0 || len > 255)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!isalnum((unsigned char) s[i]) && !strchr(":-_.\\@", s[i]))
                        return false;
        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                suffix = suffix || endswith(s, len, suffixes[i]);
        return suffix && s[0] != '.';
}

static int hexval(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Undoes systemd's unit-name escaping (\xNN) of the len bytes at s. */
static char *unescape_unit(const char *s, size_t len) {
        char *out = malloc(len + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i++) {
                int a, b;

                if (s[i] == '\\' && i + 3 < len && s[i + 1] == 'x' && (a = hexval(s[i + 2])) >= 0 &&
                    (b = hexval(s[i + 3])) >= 0 && (a << 4 | b) != 0) {
                        *o++ = (char) (a << 4 | b);
                        i += 3;
                } else
                        *o++ = s[i];
        }
        *o = 0;
        return out;
}

static bool is_hex_id(const char *s, size_t len) {
        if (len < 12)
                return false;
        for (size_t i = 0; i < len; i++)
                if (hexval(s[i]) < 0)
                        return false;
        return true;
}

typedef struct Component {
        const char *s;
        size_t len;
} Component;

/* Splits a cgroup path into components, skipping empty ones. */
static size_t split_path(const char *path, Component *out, size_t max) {
        size_t n = 0;

        for (const char *p = path; *p && n < max;) {
                const char *e;

                while (*p == '/')
                        p++;
                if (!*p)
                        break;
                e = strchrnul(p, '/');
                out[n++] = (Component) { p, (size_t) (e - p) };
                p = e;
        }
        return n;
}

static int set_str(char **dst, const char *s, size_t len) {
        char *c = strndup(s, len);

        if (!c)
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

static int set_unescaped(char **dst, const char *s, size_t len) {
        char *c = unescape_unit(s, len);

        if (!c)
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

/* App id from a unit name: Flatpak's app-flatpak-<escaped id>-<n>.scope, or a
 * snap's snap.<snap>.<app>[-<uuid>].{scope,service}. */
static int app_from_unit(Identity *id, const char *u) {
        size_t len = strlen(u);

        if (startswith(u, len, "app-flatpak-") && endswith(u, len, ".scope")) {
                const char *b = u + strlen("app-flatpak-");
                const char *e = u + len - strlen(".scope");
                const char *dash = e;

                while (dash > b && isdigit((unsigned char) dash[-1]))
                        dash--;
                if (dash == e || dash - 1 <= b || dash[-1] != '-')
                        return 0;
                id->app_source = IDENTITY_APP_FLATPAK_SCOPE;
                return set_unescaped(&id->app_id, b, (size_t) (dash - 1 - b));
        }
        if (startswith(u, len, "snap.")) {
                const char *b = u + strlen("snap.");
                const char *dot = strchr(b, '.');

                if (!dot || dot == b)
                        return 0;
                id->app_source = IDENTITY_APP_SNAP;
                return set_str(&id->app_id, b, (size_t) (dot - b));
        }
        return 0;
}

/* Container conventions in a cgroup path, outermost first (the name the host
 * administrator knows):
 *  - systemd-machined: machine.slice/machine-<escaped name>.scope (nspawn
 *    with registration, libvirt: machine-qemu\x2d1\x2dvm.scope) — systemd's
 *    machine_start_scope();
 *  - systemd-nspawn@<escaped name>.service (machinectl start);
 *  - docker: docker-<64 hex>.scope (systemd cgroup driver) or /docker/<64 hex>
 *    (cgroupfs driver); the name is the 12-hex short id, as `docker ps` shows;
 *  - podman: libpod-<64 hex>.scope (systemd driver) or libpod_parent/libpod-<id>
 *    (cgroupfs); libpod-conmon-* is the monitor, not the container;
 *  - CRI runtimes: cri-containerd-<id>.scope, crio-<id>.scope (crio-conmon-*
 *    is the monitor);
 *  - LXC: lxc.payload.<name> (LXC 4+), lxc/<name> (older).
 */
static int container_from_components(Identity *id, const Component *c, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const char *s = c[i].s;
                size_t len = c[i].len;
                const char *b;
                size_t bl;
                IdentityContainerSource src = IDENTITY_CONTAINER_NONE;
                bool short_id = false;

                if (startswith(s, len, "machine-") && endswith(s, len, ".scope")) {
                        b = s + strlen("machine-");
                        bl = len - strlen("machine-") - strlen(".scope");
                        src = IDENTITY_CONTAINER_MACHINE;
                } else if (startswith(s, len, "systemd-nspawn@") && endswith(s, len, ".service")) {
                        b = s + strlen("systemd-nspawn@");
                        bl = len - strlen("systemd-nspawn@") - strlen(".service");
                        src = IDENTITY_CONTAINER_NSPAWN;
                } else if (startswith(s, len, "docker-") && endswith(s, len, ".scope")) {
                        b = s + strlen("docker-");
                        bl = len - strlen("docker-") - strlen(".scope");
                        src = is_hex_id(b, bl) ? IDENTITY_CONTAINER_DOCKER : IDENTITY_CONTAINER_NONE;
                        short_id = true;
                } else if (len == strlen("docker") && memcmp(s, "docker", len) == 0 && i + 1 < n &&
                           is_hex_id(c[i + 1].s, c[i + 1].len)) {
                        b = c[i + 1].s;
                        bl = c[i + 1].len;
                        src = IDENTITY_CONTAINER_DOCKER;
                        short_id = true;
                } else if (startswith(s, len, "libpod-") && !startswith(s, len, "libpod-conmon-")) {
                        b = s + strlen("libpod-");
                        bl = len - strlen("libpod-") - (endswith(s, len, ".scope") ? strlen(".scope") : 0);
                        src = is_hex_id(b, bl) ? IDENTITY_CONTAINER_PODMAN : IDENTITY_CONTAINER_NONE;
                        short_id = true;
                } else if (startswith(s, len, "cri-containerd-") && endswith(s, len, ".scope")) {
                        b = s + strlen("cri-containerd-");
                        bl = len - strlen("cri-containerd-") - strlen(".scope");
                        src = is_hex_id(b, bl) ? IDENTITY_CONTAINER_CRI : IDENTITY_CONTAINER_NONE;
                        short_id = true;
                } else if (startswith(s, len, "crio-") && !startswith(s, len, "crio-conmon-") &&
                           endswith(s, len, ".scope")) {
                        b = s + strlen("crio-");
                        bl = len - strlen("crio-") - strlen(".scope");
                        src = is_hex_id(b, bl) ? IDENTITY_CONTAINER_CRI : IDENTITY_CONTAINER_NONE;
                        short_id = true;
                } else if (startswith(s, len, "lxc.payload.") && len > strlen("lxc.payload.")) {
                        b = s + strlen("lxc.payload.");
                        bl = len - strlen("lxc.payload.");
                        src = IDENTITY_CONTAINER_LXC;
                } else if (i == 0 && len == 3 && memcmp(s, "lxc", 3) == 0 && i + 1 < n) {
                        b = c[i + 1].s;
                        bl = c[i + 1].len;
                        src = IDENTITY_CONTAINER_LXC;
                }
                if (src == IDENTITY_CONTAINER_NONE || bl == 0)
                        continue;

                id->in_container = true;
                id->container_source = src;
                if (short_id) {
                        int r = set_str(&id->container_id, b, bl);
                        return r < 0 ? r : set_str(&id->container, b, MIN(bl, (size_t) 12));
                }
                if (src == IDENTITY_CONTAINER_LXC)
                        return set_str(&id->container, b, bl);
                return set_unescaped(&id->container, b, bl);
        }
        return 0;
}

#define MAX_COMPONENTS 128

int identity_parse_cgroup(Identity *id) {
        Component c[MAX_COMPONENTS];
        size_t n, i = 0;
        int r;

        free(id->unit);
        free(id->user_unit);
        free(id->slice);
        id->unit = id->user_unit = id->slice = NULL;
        id->user_unit_uid = (uid_t) -1;
        if (!id->cgroup)
                return 0;

        n = split_path(id->cgroup, c, ELEMENTSOF(c));
        while (i < n && endswith(c[i].s, c[i].len, ".slice"))
                i++;
        if (i > 0) {
                r = set_str(&id->slice, c[i - 1].s, c[i - 1].len);
                if (r < 0)
                        return r;
        }
        if (i < n && unit_name_plausible(c[i].s, c[i].len)) {
                r = set_str(&id->unit, c[i].s, c[i].len);
                if (r < 0)
                        return r;

                if (startswith(c[i].s, c[i].len, "user@") && endswith(c[i].s, c[i].len, ".service")) {
                        const char *b = c[i].s + strlen("user@");
                        size_t bl = c[i].len - strlen("user@") - strlen(".service");
                        unsigned long long uid = 0;
                        bool ok = bl > 0 && bl <= 10;

                        for (size_t k = 0; ok && k < bl; k++) {
                                ok = isdigit((unsigned char) b[k]);
                                uid = uid * 10 + (unsigned) (b[k] - '0');
                        }
                        if (ok && uid < UINT32_MAX) {
                                size_t j = i + 1;

                                id->user_unit_uid = (uid_t) uid;
                                while (j < n && endswith(c[j].s, c[j].len, ".slice"))
                                        j++;
                                if (j < n && unit_name_plausible(c[j].s, c[j].len)) {
                                        r = set_str(&id->user_unit, c[j].s, c[j].len);
                                        if (r < 0)
                                                return r;
                                }
                        }
                }
        }

        if (id->app_source != IDENTITY_APP_FLATPAK_INFO) {
                /* The innermost unit names the app. */
                if (id->user_unit)
                        r = app_from_unit(id, id->user_unit);
                else if (id->unit)
                        r = app_from_unit(id, id->unit);
                else
                        r = 0;
                if (r < 0)
                        return r;
        }
        {
                _cleanup_free_ char *bare_id = NULL;

                free(id->pod_uid);
                r = identity_pod_from_cgroup(id->cgroup, &id->pod_uid, &bare_id);
                if (r < 0)
                        return r;
                r = container_from_components(id, c, n);
                if (r < 0 || id->in_container || !bare_id)
                        return r;
                /* A pod's container under the cgroupfs driver: no runtime prefix. */
                id->in_container = true;
                id->container_source = IDENTITY_CONTAINER_CRI;
                r = set_str(&id->container, bare_id, 12);
                if (r < 0)
                        return r;
                free(id->container_id);
                id->container_id = TAKE_PTR(bare_id);
                return 0;
        }
}

/* [Application] name= from a .flatpak-info keyfile. */
static int parse_flatpak_info(const char *text, char **ret) {
        bool in_app = false;

        for (const char *p = text; *p;) {
                const char *eol = strchrnul(p, '\n');
                size_t len = (size_t) (eol - p);

                if (len > 0 && p[0] == '[')
                        in_app = len == strlen("[Application]") && memcmp(p, "[Application]", len) == 0;
                else if (in_app && startswith(p, len, "name=") && len > strlen("name=")) {
                        const char *v = p + strlen("name=");
                        size_t vl = len - strlen("name=");

                        for (size_t k = 0; k < vl; k++)
                                if (!isalnum((unsigned char) v[k]) && !strchr("._-", v[k]))
                                        return -EBADMSG;
                        if (vl > 255)
                                return -EBADMSG;
                        *ret = strndup(v, vl);
                        return *ret ? 0 : -ENOMEM;
                }
                p = *eol ? eol + 1 : eol;
        }
        return -ENODATA;
}

/* The daemon's own namespace links: it never changes namespace, so they are
 * read once (for the real /proc/self; a test's fabricated root every time). */
static ssize_t self_ns_link(const char *self_ns_root, const char *which, char *buf, size_t size) {
        static struct {
                const char *which;
                char link[128];
                ssize_t n;
        } cache[] = { { "pid" }, { "mnt" } };
        char path[PATH_MAX];
        ssize_t n;

        if (strcmp(self_ns_root, "/proc/self") == 0)
                for (size_t i = 0; i < ELEMENTSOF(cache); i++)
                        if (strcmp(cache[i].which, which) == 0 && cache[i].n > 0 && (size_t) cache[i].n <= size) {
                                memcpy(buf, cache[i].link, (size_t) cache[i].n);
                                return cache[i].n;
                        }
        snprintf(path, sizeof(path), "%s/ns/%s", self_ns_root, which);
        n = readlink(path, buf, size);
        if (n < 0)
                return -errno;
        if (strcmp(self_ns_root, "/proc/self") == 0)
                for (size_t i = 0; i < ELEMENTSOF(cache); i++)
                        if (strcmp(cache[i].which, which) == 0 && (size_t) n <= sizeof(cache[i].link)) {
                                memcpy(cache[i].link, buf, (size_t) n);
                                cache[i].n = n;
                        }
        return n;
}

/* 1 if the ns link differs from the daemon's, 0 if equal, <0 if unreadable. */
static int ns_differs(int dirfd, const char *self_ns_root, const char *which) {
        char path[PATH_MAX], a[128], b[128];
        ssize_t na, nb;

        snprintf(path, sizeof(path), "ns/%s", which);
        na = readlinkat(dirfd, path, a, sizeof(a) - 1);
        if (na < 0)
                return -errno;
        nb = self_ns_link(self_ns_root, which, b, sizeof(b) - 1);
        if (nb < 0)
                return (int) nb;
        return na != nb || memcmp(a, b, (size_t) na) != 0;
}

int identity_pidfd_alive(int pidfd) {
        /* Signal 0 only checks: EPERM means alive but not ours to signal. */
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM)
                return 0;
        return errno == ESRCH ? -ESRCH : -errno;
}

int identity_make_valid_utf8(Identity *id) {
        char **fields[] = { &id->cgroup, &id->unit, &id->user_unit, &id->slice, &id->app_id, &id->container };

        utf8_replace_invalid(id->comm);
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                char *e;

                if (!*fields[i] || utf8_is_valid(*fields[i]))
                        continue;
                e = utf8_escape_invalid(*fields[i]);
                if (!e)
                        return -ENOMEM;
                free(*fields[i]);
                *fields[i] = e;
        }
        return 0;
}

int identity_read(const char *proc_root, pid_t pid, int pidfd, const struct ucred *cred,
                  const char *self_ns_root, Identity *ret) {
        _cleanup_(identity_done) Identity id = { .user_unit_uid = (uid_t) -1, .process_euid = (uid_t) -1 };
        _cleanup_free_ char *status = NULL, *cgroup = NULL, *comm = NULL, *fpi = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        char path[PATH_MAX];
        int r;

        if (!proc_root || pid <= 0 || !ret)
                return -EINVAL;

        snprintf(path, sizeof(path), "%s/%" PRIi32, proc_root, (int32_t) pid);
        dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return errno == ENOENT ? -ESRCH : -errno;

        id.pid = pid;
        r = read_file_at(dirfd, "status", PROC_FILE_MAX, &status, NULL);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        if (cred) {
                id.uid = cred->uid;
                id.gid = cred->gid;
        } else {
                unsigned u, g;

                r = parse_id_field(status, "Uid", &u);
                if (r >= 0)
                        r = parse_id_field(status, "Gid", &g);
                if (r < 0)
                        return r;
                id.uid = u;
                id.gid = g;
        }
        r = parse_groups(status, &id);
        if (r < 0)
                return r;
        {
                /* "Uid:\treal\teffective\tsaved\tfs" (proc(5)) */
                const char *v = find_status_field(status, "Uid");
                unsigned long long real, eff;
                char *end;

                if (v) {
                        errno = 0;
                        real = strtoull(v, &end, 10);
                        eff = strtoull(end, &end, 10);
                        if (errno == 0 && real <= UINT32_MAX && eff < UINT32_MAX)
                                id.process_euid = (uid_t) eff;
                }
        }

        r = read_file_at(dirfd, "comm", SMALL_FILE_MAX, &comm, NULL);
        if (r >= 0) {
                comm[strcspn(comm, "\n")] = 0;
                snprintf(id.comm, sizeof(id.comm), "%s", comm);
        } else if (r != -ENOENT && r != -EACCES)
                return r;

        r = read_file_at(dirfd, "cgroup", SMALL_FILE_MAX, &cgroup, NULL);
        if (r >= 0) {
                r = parse_cgroup_file(cgroup, &id.cgroup);
                if (r < 0 && r != -ENODATA)
                        return r;
        } else if (r != -ENOENT && r != -EACCES)
                return r;

        /* Readable only with ptrace-read access (same uid or CAP_SYS_PTRACE);
         * otherwise the scope name below still gives the Flatpak id. */
        r = read_file_at(dirfd, "root/.flatpak-info", SMALL_FILE_MAX, &fpi, NULL);
        if (r >= 0 && parse_flatpak_info(fpi, &id.app_id) >= 0)
                id.app_source = IDENTITY_APP_FLATPAK_INFO;
        else
                log_debug("identity: no .flatpak-info for pid %i: %s", (int) pid,
                          strerror(r < 0 ? -r : EBADMSG));

        r = identity_parse_cgroup(&id);
        if (r < 0)
                return r;

        if (self_ns_root) {
                r = ns_differs(dirfd, self_ns_root, "pid");
                id.other_pid_ns = r > 0;
                r = ns_differs(dirfd, self_ns_root, "mnt");
                id.other_mnt_ns = r > 0;
                if ((id.other_pid_ns || id.other_mnt_ns) && !id.in_container &&
                    id.app_source == IDENTITY_APP_NONE) {
                        id.in_container = true;
                        id.container_source = IDENTITY_CONTAINER_NAMESPACE;
                }
        }

        r = identity_make_valid_utf8(&id);
        if (r < 0)
                return r;

        /* Everything above may describe whoever holds the pid number now;
         * if the pidfd's process is still alive, it was ours. */
        if (pidfd >= 0) {
                r = identity_pidfd_alive(pidfd);
                if (r < 0)
                        return r;
        }

        *ret = id;
        id = (Identity) {};
        return 0;
}

/* The pid a pidfd refers to, from /proc/self/fdinfo (-1 once it exited). */
static int pidfd_get_pid(int pidfd, pid_t *ret) {
        _cleanup_free_ char *info = NULL;
        _cleanup_close_ int dirfd = -EBADF;
        char name[32];
        const char *v;
        long x;
        int r;

        dirfd = open("/proc/self/fdinfo", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dirfd < 0)
                return -errno;
        snprintf(name, sizeof(name), "%i", pidfd);
        r = read_file_at(dirfd, name, SMALL_FILE_MAX, &info, NULL);
        if (r < 0)
                return r;
        v = find_status_field(info, "Pid");
        if (!v)
                return -EOPNOTSUPP;
        x = strtol(v, NULL, 10);
        if (x <= 0)
                return -ESRCH;
        *ret = (pid_t) x;
        return 0;
}

int identity_from_pidfd(int pidfd, pid_t pid, const struct ucred *cred, Identity *ret) {
        pid_t p = 0;
        int r;

        if (pidfd >= 0) {
                r = pidfd_get_pid(pidfd, &p);
                if (r == -ESRCH)
                        return r;
                if (r >= 0 && p != pid)
                        return -ESRCH;
        }
        return identity_read("/proc", pid, pidfd, cred, "/proc/self", ret);
}

void identity_done(Identity *id) {
        if (!id)
                return;
        free(id->gids);
        free(id->cgroup);
        free(id->unit);
        free(id->user_unit);
        free(id->slice);
        free(id->app_id);
        free(id->container);
        free(id->container_id);
        free(id->pod_uid);
        *id = (Identity) { .user_unit_uid = (uid_t) -1, .process_euid = (uid_t) -1 };
}

static int dup_str(const char *s, char **ret) {
        if (!s) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int identity_copy(const Identity *src, Identity *ret) {
        _cleanup_(identity_done) Identity c = *src;

        c.gids = NULL;
        c.cgroup = c.unit = c.user_unit = c.slice = c.app_id = c.container = c.container_id = c.pod_uid = NULL;
        if (src->n_gids > 0) {
                c.gids = reallocarray(NULL, src->n_gids, sizeof(gid_t));
                if (!c.gids)
                        return -ENOMEM;
                memcpy(c.gids, src->gids, src->n_gids * sizeof(gid_t));
        }
        if (dup_str(src->cgroup, &c.cgroup) < 0 || dup_str(src->unit, &c.unit) < 0 ||
            dup_str(src->user_unit, &c.user_unit) < 0 || dup_str(src->slice, &c.slice) < 0 ||
            dup_str(src->app_id, &c.app_id) < 0 || dup_str(src->container, &c.container) < 0 ||
            dup_str(src->container_id, &c.container_id) < 0 || dup_str(src->pod_uid, &c.pod_uid) < 0)
                return -ENOMEM;
        *ret = c;
        c = (Identity) {};
        return 0;
}

bool identity_has_gid(const Identity *id, gid_t gid) {
        if (id->gid == gid)
                return true;
        for (size_t i = 0; i < id->n_gids; i++)
                if (id->gids[i] == gid)
                        return true;
        return false;
}

const char *identity_app_source_to_string(IdentityAppSource s) {
        static const char *const names[] = {
                [IDENTITY_APP_NONE] = "none",
                [IDENTITY_APP_FLATPAK_INFO] = "flatpak-info",
                [IDENTITY_APP_FLATPAK_SCOPE] = "flatpak-scope",
                [IDENTITY_APP_SNAP] = "snap",
        };
        return (unsigned) s < ELEMENTSOF(names) ? names[s] : NULL;
}

const char *identity_container_source_to_string(IdentityContainerSource s) {
        static const char *const names[] = {
                [IDENTITY_CONTAINER_NONE] = "none",
                [IDENTITY_CONTAINER_MACHINE] = "machine",
                [IDENTITY_CONTAINER_NSPAWN] = "nspawn",
                [IDENTITY_CONTAINER_DOCKER] = "docker",
                [IDENTITY_CONTAINER_PODMAN] = "podman",
                [IDENTITY_CONTAINER_CRI] = "cri",
                [IDENTITY_CONTAINER_LXC] = "lxc",
                [IDENTITY_CONTAINER_NAMESPACE] = "namespace",
        };
        return (unsigned) s < ELEMENTSOF(names) ? names[s] : NULL;
}
