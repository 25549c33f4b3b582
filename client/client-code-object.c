/* SPDX-License-Identifier: MIT */
/*
 * Code objects: LoadCodeObject / FreeCodeObject, and the local copy of the
 * kernel list. The ELF travels as a memfd the library fills and seals
 * (F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW, then F_SEAL_SEAL), which is what
 * the daemon requires: then the bytes it checks cannot change while it loads
 * them, and reading them cannot fail under it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client-code-object.h"

/* The daemon's limit (GPU_CODE_OBJECT_MAX_SIZE); larger files are not even read. */
#define CODE_OBJECT_MAX_SIZE (64u << 20)

static void kernels_free(kfdb_kernel *k, size_t n) {
        for (size_t i = 0; k && i < n; i++) {
                for (size_t a = 0; a < k[i].n_args; a++)
                        free((char *) k[i].args[a].name);
                free(k[i].args);
                free(k[i].name);
        }
        free(k);
}

static void code_object_release(ClientObject *o) {
        kfdb_code_object *co = (kfdb_code_object *) o;

        session_object_unlink(&co->object);
        kernels_free(co->kernels, co->n_kernels);
        safe_close(co->memfd);
        free(co);
}

static kfdb_kernel_arg_kind kind_from_string(const char *s) {
        if (strcmp(s, "by_value") == 0)
                return KFDB_KERNEL_ARG_BY_VALUE;
        if (strcmp(s, "global_buffer") == 0)
                return KFDB_KERNEL_ARG_GLOBAL_BUFFER;
        if (strcmp(s, "dynamic_lds") == 0)
                return KFDB_KERNEL_ARG_DYNAMIC_LDS;
        if (strcmp(s, "hidden") == 0)
                return KFDB_KERNEL_ARG_HIDDEN;
        return KFDB_KERNEL_ARG_UNKNOWN;
}

static int kernels_copy(const ClientReply *r, kfdb_kernel **ret) {
        size_t n = r->load_code_object.n_kernels;
        kfdb_kernel *ks = calloc(n ? n : 1, sizeof(*ks));

        if (!ks)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const ClientKernelInfo *ki = &r->load_code_object.kernels[i];
                kfdb_kernel *k = &ks[i];

                k->name = strdup(ki->name);
                k->args = calloc(ki->n_args ? ki->n_args : 1, sizeof(*k->args));
                if (!k->name || !k->args) {
                        kernels_free(ks, i + 1);
                        return -ENOMEM;
                }
                k->kernarg_size = ki->kernarg_size;
                k->group_segment_size = ki->group_segment_size;
                k->private_segment_size = ki->private_segment_size;
                k->max_workgroup_size = ki->max_workgroup_size;
                for (size_t a = 0; a < ki->n_args; a++) {
                        kfdb_kernel_arg *ka = &k->args[a];

                        ka->name = strdup(ki->args[a].name);
                        if (!ka->name) {
                                kernels_free(ks, i + 1);
                                return -ENOMEM;
                        }
                        k->n_args = a + 1;
                        ka->offset = ki->args[a].offset;
                        ka->size = ki->args[a].size;
                        ka->kind = kind_from_string(ki->args[a].kind);
                        if (ka->kind != KFDB_KERNEL_ARG_HIDDEN)
                                k->n_explicit++;
                }
        }
        *ret = ks;
        return 0;
}

/* Tell the daemon to forget a handle we could not wrap locally. */
static void code_object_forget(kfdb_session *s, uint64_t handle) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_FREE_CODE_OBJECT, .object.handle = handle };

        (void) session_call(s, &req, NULL, 0, &r);
}

/* After a daemon restart: the same sealed ELF, so the same kernels. */
static int code_object_restore(ClientObject *o, ClientHandleMap *map) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        kfdb_code_object *co = (kfdb_code_object *) o;
        ClientRequest req = { .type = CLIENT_REQUEST_LOAD_CODE_OBJECT };
        uint64_t old = co->handle;
        int k;

        co->handle = 0;
        k = session_call(co->session, &req, &co->memfd, 1, &r);
        if (k < 0)
                return k;
        co->handle = r->load_code_object.handle;
        return client_handle_map_add(map, old, co->handle);
}

/* Sends the sealed memfd and wraps the reply; takes memfd. */
static int code_object_load_memfd(kfdb_session *s, int fd, kfdb_code_object **ret) {
        _cleanup_close_ int memfd = fd;
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_LOAD_CODE_OBJECT };
        kfdb_code_object *co;
        kfdb_kernel *kernels = NULL;
        int k;

        k = session_call(s, &req, &memfd, 1, &r);
        if (k < 0)
                return k;
        k = kernels_copy(r, &kernels);
        if (k < 0) {
                code_object_forget(s, r->load_code_object.handle);
                return k;
        }
        co = calloc(1, sizeof(*co));
        if (!co) {
                kernels_free(kernels, r->load_code_object.n_kernels);
                code_object_forget(s, r->load_code_object.handle);
                return -ENOMEM;
        }
        co->session = s;
        co->handle = r->load_code_object.handle;
        co->memfd = TAKE_FD(memfd);
        co->kernels = kernels;
        co->n_kernels = r->load_code_object.n_kernels;
        session_object_link(s, &co->object, code_object_release, code_object_restore, false);
        *ret = co;
        return 0;
}

static int memfd_new(kfdb_session *s, int *ret) {
        int fd = memfd_create("kfdbroker-code-object", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        if (fd < 0)
                return session_error(s, -errno, "cannot create a memfd for the code object: %m");
        *ret = fd;
        return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n) {
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += w;
                n -= (size_t) w;
        }
        return 0;
}

static int memfd_seal(kfdb_session *s, int fd) {
        if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
                return session_error(s, -errno, "cannot seal the code object's memfd: %m");
        return 0;
}

int kfdb_code_object_load(kfdb_session *s, const void *elf, size_t size, kfdb_code_object **ret) {
        _cleanup_close_ int fd = -EBADF;
        int k;

        if (!s || !ret || (!elf && size > 0))
                return -EINVAL;
        if (size == 0)
                return session_error(s, -EINVAL, "kfdb_code_object_load: the code object is empty");
        if (size > CODE_OBJECT_MAX_SIZE)
                return session_error(s, -E2BIG, "kfdb_code_object_load: %zu bytes, more than the limit of %u",
                                     size, CODE_OBJECT_MAX_SIZE);
        k = memfd_new(s, &fd);
        if (k < 0)
                return k;
        k = write_all(fd, elf, size);
        if (k < 0)
                return session_error(s, k, "cannot fill the code object's memfd: %s", strerror(-k));
        k = memfd_seal(s, fd);
        if (k < 0)
                return k;
        return code_object_load_memfd(s, TAKE_FD(fd), ret);
}

int kfdb_code_object_load_file(kfdb_session *s, const char *path, kfdb_code_object **ret) {
        _cleanup_close_ int in = -EBADF, fd = -EBADF;
        uint8_t buf[65536];
        struct stat st;
        uint64_t total = 0;
        int k;

        if (!s || !path || !ret)
                return -EINVAL;
        in = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (in < 0)
                return session_error(s, -errno, "cannot open %s: %m", path);
        if (fstat(in, &st) < 0)
                return session_error(s, -errno, "cannot stat %s: %m", path);
        if (!S_ISREG(st.st_mode))
                return session_error(s, -EINVAL, "%s is not a regular file", path);
        if ((uint64_t) st.st_size > CODE_OBJECT_MAX_SIZE)
                return session_error(s, -E2BIG, "%s: %lld bytes, more than the limit of %u", path,
                                     (long long) st.st_size, CODE_OBJECT_MAX_SIZE);
        k = memfd_new(s, &fd);
        if (k < 0)
                return k;
        for (;;) {
                ssize_t n = read(in, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return session_error(s, -errno, "cannot read %s: %m", path);
                if (n == 0)
                        break;
                total += (uint64_t) n;
                /* The file may grow while we read it. */
                if (total > CODE_OBJECT_MAX_SIZE)
                        return session_error(s, -E2BIG, "%s: more than the limit of %u bytes", path,
                                             CODE_OBJECT_MAX_SIZE);
                k = write_all(fd, buf, (size_t) n);
                if (k < 0)
                        return session_error(s, k, "cannot fill the code object's memfd: %s", strerror(-k));
        }
        if (total == 0)
                return session_error(s, -EINVAL, "%s is empty", path);
        k = memfd_seal(s, fd);
        if (k < 0)
                return k;
        return code_object_load_memfd(s, TAKE_FD(fd), ret);
}

int kfdb_code_object_free(kfdb_code_object *co) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_FREE_CODE_OBJECT };
        int k;

        if (!co)
                return 0;
        req.object.handle = co->handle;
        k = session_call(co->session, &req, NULL, 0, &r);
        code_object_release(&co->object);
        return k;
}

uint64_t kfdb_code_object_get_handle(const kfdb_code_object *co) {
        return co ? co->handle : 0;
}

size_t kfdb_code_object_get_n_kernels(const kfdb_code_object *co) {
        return co ? co->n_kernels : 0;
}

const kfdb_kernel *kfdb_code_object_get_kernel(const kfdb_code_object *co, size_t index) {
        return co && index < co->n_kernels ? &co->kernels[index] : NULL;
}

const kfdb_kernel *kfdb_code_object_find_kernel(const kfdb_code_object *co, const char *name) {
        if (!co || !name)
                return NULL;
        for (size_t i = 0; i < co->n_kernels; i++)
                if (strcmp(co->kernels[i].name, name) == 0)
                        return &co->kernels[i];
        return NULL;
}

const char *kfdb_kernel_get_name(const kfdb_kernel *k) {
        return k ? k->name : "";
}

uint32_t kfdb_kernel_get_kernarg_size(const kfdb_kernel *k) {
        return k ? k->kernarg_size : 0;
}

uint32_t kfdb_kernel_get_group_segment_size(const kfdb_kernel *k) {
        return k ? k->group_segment_size : 0;
}

uint32_t kfdb_kernel_get_private_segment_size(const kfdb_kernel *k) {
        return k ? k->private_segment_size : 0;
}

uint32_t kfdb_kernel_get_max_workgroup_size(const kfdb_kernel *k) {
        return k ? k->max_workgroup_size : 0;
}

size_t kfdb_kernel_get_n_args(const kfdb_kernel *k) {
        return k ? k->n_args : 0;
}

size_t kfdb_kernel_get_n_explicit_args(const kfdb_kernel *k) {
        return k ? k->n_explicit : 0;
}

int kfdb_kernel_get_arg(const kfdb_kernel *k, size_t index, kfdb_kernel_arg *ret) {
        if (!k || !ret || index >= k->n_args)
                return -EINVAL;
        *ret = k->args[index];
        return 0;
}
