/* SPDX-License-Identifier: MIT */
/*
 * Hostile and broken compute clients against the real daemon on the
 * simulated GPU: each bad LoadCodeObject or dispatch gets the exact errno
 * and message, nothing is queued from a refused Submit, the daemon's fds,
 * GPU buffers and code objects return to where they were, and a bystander
 * session keeps dispatching throughout. Kernels that fault or that the GPU
 * cannot run fail their job (EFAULT, EIO) with a message saying what
 * happened, and the daemon keeps serving. Freeing a code object while its
 * dispatch runs is safe. Compute denied by policy is EPERM.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;
static kfdb_session *bystander;
static kfdb_code_object *bystander_co;
static char policydir[64];
static int base_fds;
static uint32_t base_gpu_buffers, base_code_objects;

typedef Kfdbroker__V1__ServerMessage Msg;

static void baseline(void) {
        int fd = raw_connect(&d);
        Msg *holder;
        Kfdbroker__V1__StatusReply *st;

        raw_hello(fd);
        st = raw_status(fd, &holder);
        base_gpu_buffers = st->gpu_buffers;
        base_code_objects = st->code_objects;
        kfdbroker__v1__server_message__free_unpacked(holder, NULL);
        close(fd);
        /* Measured without our probing connection. */
        usleep(50 * 1000);
        base_fds = test_daemon_count_fds(&d);
}

static void start(const char *policy) {
        char arg[128], path[160];
        const char *args[] = { arg, NULL };
        FILE *f;
        int r;

        compute_require_kernels();
        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        if (policy) {
                snprintf(path, sizeof(path), "%s/50-test.conf", policydir);
                f = fopen(path, "we");
                cr_assert(f);
                fputs(policy, f);
                fclose(f);
        }
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
        r = kfdb_session_new(d.sock, "bystander", &bystander);
        cr_assert_eq(r, 0, "%s", strerror(-r));
}

static void assert_bystander_works(void);

static void setup(void) {
        start(NULL);
        bystander_co = load_kernel(bystander, "vector-add");
        /* The bystander's GPU context (its own: Isolation=session) is up
         * before the baseline is taken: it stays while the bystander is
         * connected, and its fds and buffers with it. */
        assert_bystander_works();
        baseline();
}

/* Stops the daemon (a test restarts it with its own policy); a daemon that did not exit cleanly fails the test. */
static void stop(void) {
        char cmd[128];

        kfdb_session_free(bystander);
        bystander = NULL;
        bystander_co = NULL;
        test_daemon_fini(&d);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
}

static void teardown(void) {
        stop();
        test_fini_end();
}

TestSuite(compute_hostile, .init = setup, .fini = teardown, .timeout = 600);

/* The bystander can still dispatch and gets the right answer. */
static void assert_bystander_works(void) {
        const uint32_t n = 300, block = 64;
        float *a, *b, *c;
        kfdb_buffer *ba = new_buffer(bystander, n * 4, 0, (void **) &a);
        kfdb_buffer *bb = new_buffer(bystander, n * 4, 0, (void **) &b);
        kfdb_buffer *bc = new_buffer(bystander, n * 4, 0, (void **) &c);

        for (uint32_t i = 0; i < n; i++) {
                a[i] = (float) i;
                b[i] = 0.5f;
        }
        kfdb_arg args[] = { kfdb_arg_buffer(ba, 0), kfdb_arg_buffer(bb, 0), kfdb_arg_buffer(bc, 0),
                            kfdb_arg_value(&n, 4) };
        run_dispatch(bystander, bystander_co, "vector_add", 1, &n, &block, args, 4);
        for (uint32_t i = 0; i < n; i++)
                cr_assert_eq(c[i], (float) i + 0.5f, "bystander: c[%u] = %g", i, (double) c[i]);
        kfdb_buffer_free(ba);
        kfdb_buffer_free(bb);
        kfdb_buffer_free(bc);
}

/* Waits until the daemon is back at the baseline: fds, GPU buffers, code objects. */
static void assert_back_to_baseline(void) {
        int fd = raw_connect(&d), now = -1;
        uint32_t bufs = 0, cos = 0;

        raw_hello(fd);
        for (int i = 0; i < 2000; i++) {
                Msg *holder;
                Kfdbroker__V1__StatusReply *st = raw_status(fd, &holder);

                bufs = st->gpu_buffers;
                cos = st->code_objects;
                kfdbroker__v1__server_message__free_unpacked(holder, NULL);
                if (bufs == base_gpu_buffers && cos == base_code_objects)
                        break;
                usleep(10000);
        }
        cr_assert_eq(bufs, base_gpu_buffers, "GPU buffers %u did not return to %u", bufs, base_gpu_buffers);
        cr_assert_eq(cos, base_code_objects, "code objects %u did not return to %u", cos, base_code_objects);
        close(fd);
        for (int i = 0; i < 2000; i++) {
                now = test_daemon_count_fds(&d);
                if (now >= 0 && now <= base_fds)
                        break;
                usleep(10000);
        }
        cr_assert_leq(now, base_fds, "daemon fd count %d did not return to %d", now, base_fds);
}

static void expect_error(Msg *m, int error, const char *message) {
        cr_assert_eq(m->error, error, "expected error %d (%s), got %d: %s", error, strerror(error), m->error,
                     m->error_message);
        cr_assert_str_eq(m->error_message, message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
}

static Msg *load_raw(int sock, const int *fds, unsigned n_fds) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__LoadCodeObjectRequest l = KFDBROKER__V1__LOAD_CODE_OBJECT_REQUEST__INIT;

        req.body_case = KFDBROKER__V1__REQUEST__BODY_LOAD_CODE_OBJECT;
        req.load_code_object = &l;
        return raw_call(sock, &req, fds, n_fds, NULL, NULL);
}

static Msg *free_code_object_raw(int sock, uint64_t handle) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__FreeCodeObjectRequest f = KFDBROKER__V1__FREE_CODE_OBJECT_REQUEST__INIT;

        f.handle = handle;
        req.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_CODE_OBJECT;
        req.free_code_object = &f;
        return raw_call(sock, &req, NULL, 0, NULL, NULL);
}

static void *read_file(const char *path, size_t *ret_len) {
        struct stat st;
        void *buf;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
        cr_assert_eq(fstat(fd, &st), 0);
        buf = malloc((size_t) st.st_size);
        cr_assert(buf);
        cr_assert_eq(read(fd, buf, (size_t) st.st_size), st.st_size);
        close(fd);
        *ret_len = (size_t) st.st_size;
        return buf;
}

/* A memfd holding data, with these seals added. */
static int memfd_with(const void *data, size_t len, int seals) {
        int fd = memfd_create("test-code-object", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        cr_assert(fd >= 0);
        if (len > 0)
                cr_assert_eq(write(fd, data, len), (ssize_t) len);
        if (seals)
                cr_assert_eq(fcntl(fd, F_ADD_SEALS, seals), 0, "%s", strerror(errno));
        return fd;
}

#define ALL_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)

static uint64_t load_ok(int sock, const char *kernel) {
        size_t len;
        void *elf = read_file(kernel_path(kernel), &len);
        int fd = memfd_with(elf, len, ALL_SEALS);
        Msg *m = load_raw(sock, &fd, 1);
        uint64_t handle;

        cr_assert_eq(m->error, 0, "load %s: %s", kernel, m->error_message);
        cr_assert_eq(m->body_case, KFDBROKER__V1__SERVER_MESSAGE__BODY_LOAD_CODE_OBJECT);
        handle = m->load_code_object->handle;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        close(fd);
        free(elf);
        return handle;
}

Test(compute_hostile, load_code_object_wants_one_sealed_memfd) {
        int sock = raw_connect(&d), fds[2], p[2], fd;
        char tmp[] = "/tmp/kfdbroker-co-XXXXXX";
        size_t len;
        void *elf = read_file(kernel_path("saxpy"), &len);

        raw_hello(sock);
        expect_error(load_raw(sock, NULL, 0), EINVAL, "LoadCodeObject carries 1 file descriptor(s), got 0");
        fds[0] = memfd_with(elf, len, ALL_SEALS);
        fds[1] = memfd_with(elf, len, ALL_SEALS);
        expect_error(load_raw(sock, fds, 2), EINVAL, "LoadCodeObject carries 1 file descriptor(s), got 2");
        close(fds[1]);

        fd = memfd_with(elf, len, 0);
        expect_error(load_raw(sock, &fd, 1), EINVAL,
                     "load_code_object: the memfd is not sealed against change: F_SEAL_WRITE, F_SEAL_SHRINK, F_SEAL_GROW missing (it needs F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW)");
        close(fd);
        fd = memfd_with(elf, len, F_SEAL_SHRINK | F_SEAL_GROW);
        expect_error(load_raw(sock, &fd, 1), EINVAL,
                     "load_code_object: the memfd is not sealed against change: F_SEAL_WRITE missing (it needs F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW)");
        close(fd);
        fd = memfd_with(elf, len, F_SEAL_WRITE);
        expect_error(load_raw(sock, &fd, 1), EINVAL,
                     "load_code_object: the memfd is not sealed against change: F_SEAL_SHRINK, F_SEAL_GROW missing (it needs F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW)");
        close(fd);

        /* Not a memfd: a pipe, a file on disk. */
        cr_assert_eq(pipe(p), 0);
        expect_error(load_raw(sock, &p[0], 1), EINVAL,
                     "load_code_object: the file descriptor is not a memfd (it must be a memfd_create(2) file sealed with F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW)");
        close(p[0]);
        close(p[1]);
        fd = mkstemp(tmp);
        cr_assert(fd >= 0);
        cr_assert_eq(write(fd, elf, len), (ssize_t) len);
        expect_error(load_raw(sock, &fd, 1), EINVAL,
                     "load_code_object: the file descriptor is not a memfd (it must be a memfd_create(2) file sealed with F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW)");
        close(fd);
        unlink(tmp);

        /* An O_PATH descriptor of a sealed memfd cannot be read. */
        {
                char path[64];
                int opath;
                snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[0]);
                opath = open(path, O_PATH | O_CLOEXEC);
                cr_assert(opath >= 0);
                expect_error(load_raw(sock, &opath, 1), EBADF,
                             "load_code_object: the file descriptor cannot be read (an O_PATH descriptor?)");
                close(opath);
        }
        close(fds[0]);

        /* Sizes: empty, and over the 64 MiB limit (sparse). */
        fd = memfd_with(NULL, 0, ALL_SEALS);
        expect_error(load_raw(sock, &fd, 1), EINVAL, "load_code_object: the memfd is empty");
        close(fd);
        fd = memfd_create("big", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        cr_assert_eq(ftruncate(fd, (64 << 20) + 1), 0);
        cr_assert_eq(fcntl(fd, F_ADD_SEALS, ALL_SEALS), 0);
        expect_error(load_raw(sock, &fd, 1), E2BIG,
                     "load_code_object: 67108865 bytes, more than the limit of 67108864 bytes");
        close(fd);

        free(elf);
        close(sock);
        assert_back_to_baseline();
        assert_bystander_works();
}

Test(compute_hostile, malformed_code_objects) {
        int sock = raw_connect(&d), fd;
        size_t len;
        uint8_t *elf = read_file(kernel_path("saxpy"), &len);
        static const char text[] = "#!/bin/sh\necho this is not a code object\n";
        uint16_t machine = 62; /* EM_X86_64 */
        uint8_t *copy = malloc(len);

        raw_hello(sock);
        /* Truncated: inside the ELF header, then half the file (any cut past
         * the header leaves something extending past the end). */
        fd = memfd_with(elf, 40, ALL_SEALS);
        expect_error(load_raw(sock, &fd, 1), ENOEXEC,
                     "load_code_object: the file ends inside the ELF header (40 of 64 bytes)");
        close(fd);
        fd = memfd_with(elf, len / 2, ALL_SEALS);
        {
                Msg *m = load_raw(sock, &fd, 1);
                const char *tail = " extends past the end of the file";
                size_t ml = strlen(m->error_message);

                cr_assert_eq(m->error, ENOEXEC, "%d: %s", m->error, m->error_message);
                cr_assert(strncmp(m->error_message, "load_code_object: ", 18) == 0 && ml > strlen(tail) &&
                                  strcmp(m->error_message + ml - strlen(tail), tail) == 0,
                          "%s", m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        close(fd);
        /* Not an ELF at all. */
        fd = memfd_with(text, sizeof(text), ALL_SEALS);
        expect_error(load_raw(sock, &fd, 1), ENOEXEC, "load_code_object: not an ELF file (no \\x7fELF magic)");
        close(fd);
        /* The wrong machine (e_machine at offset 18). */
        memcpy(copy, elf, len);
        memcpy(copy + 18, &machine, 2);
        fd = memfd_with(copy, len, ALL_SEALS);
        expect_error(load_raw(sock, &fd, 1), ENOEXEC, "load_code_object: ELF machine 62 is not EM_AMDGPU (224)");
        close(fd);
        /* Built for another GPU: EF_AMDGPU_MACH (e_flags at offset 48, low byte) gfx1100 = 0x41. */
        memcpy(copy, elf, len);
        copy[48] = 0x41;
        fd = memfd_with(copy, len, ALL_SEALS);
        expect_error(load_raw(sock, &fd, 1), EXDEV, "load_code_object: built for gfx1100, this device is gfx1030");
        close(fd);

        free(copy);
        free(elf);
        close(sock);
        assert_back_to_baseline();
        assert_bystander_works();
}

/* One DispatchJob over the raw protocol, built field by field. */
typedef struct RawDispatch {
        Kfdbroker__V1__Request req;
        Kfdbroker__V1__SubmitRequest sub;
        Kfdbroker__V1__Job jobs[2], *jp[2];
        Kfdbroker__V1__FillJob fill;
        Kfdbroker__V1__DispatchJob d;
        Kfdbroker__V1__KernelArg args[8], *ap[8];
        Kfdbroker__V1__BufferRef refs[8];
        uint8_t bytes[8][16];
        uint32_t grid[3], block[3];
} RawDispatch;

static void rd_init(RawDispatch *r, uint64_t co, const char *kernel, uint32_t n, uint32_t block) {
        memset(r, 0, sizeof(*r));
        kfdbroker__v1__request__init(&r->req);
        kfdbroker__v1__submit_request__init(&r->sub);
        kfdbroker__v1__dispatch_job__init(&r->d);
        for (unsigned i = 0; i < 2; i++) {
                kfdbroker__v1__job__init(&r->jobs[i]);
                r->jp[i] = &r->jobs[i];
        }
        r->jobs[0].kind_case = KFDBROKER__V1__JOB__KIND_DISPATCH;
        r->jobs[0].dispatch = &r->d;
        r->d.code_object = co;
        r->d.kernel = (char *) kernel;
        r->grid[0] = n;
        r->block[0] = block;
        r->d.grid = r->grid;
        r->d.block = r->block;
        r->d.n_grid = r->d.n_block = 1;
        r->d.args = r->ap;
        r->sub.jobs = r->jp;
        r->sub.n_jobs = 1;
        r->req.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        r->req.submit = &r->sub;
}

static Kfdbroker__V1__KernelArg *rd_next(RawDispatch *r) {
        Kfdbroker__V1__KernelArg *a = &r->args[r->d.n_args];

        kfdbroker__v1__kernel_arg__init(a);
        r->ap[r->d.n_args++] = a;
        return a;
}

static void rd_bytes(RawDispatch *r, const void *p, size_t n) {
        size_t i = r->d.n_args;
        Kfdbroker__V1__KernelArg *a = rd_next(r);

        memcpy(r->bytes[i], p, n);
        a->value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BYTES;
        a->bytes = (ProtobufCBinaryData) { .len = n, .data = r->bytes[i] };
}

static void rd_buffer(RawDispatch *r, uint64_t handle, uint64_t offset) {
        size_t i = r->d.n_args;
        Kfdbroker__V1__KernelArg *a = rd_next(r);

        kfdbroker__v1__buffer_ref__init(&r->refs[i]);
        r->refs[i].handle = handle;
        r->refs[i].offset = offset;
        a->value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BUFFER;
        a->buffer = &r->refs[i];
}

static void rd_local(RawDispatch *r, uint32_t size) {
        Kfdbroker__V1__KernelArg *a = rd_next(r);

        a->value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_LOCAL_SIZE;
        a->local_size = size;
}

static Msg *rd_submit(int sock, RawDispatch *r) {
        r->req.id = 0;
        return raw_call(sock, &r->req, NULL, 0, NULL, NULL);
}

/* saxpy(float a, global float *x, global float *y, uint n) with good arguments. */
static void rd_saxpy(RawDispatch *r, uint64_t co, uint64_t x, uint64_t y, uint32_t n, uint32_t block) {
        float a = 2.0f;

        rd_init(r, co, "saxpy", n, block);
        rd_bytes(r, &a, 4);
        rd_buffer(r, x, 0);
        rd_buffer(r, y, 0);
        rd_bytes(r, &n, 4);
}

static uint64_t session_jobs_submitted(int sock) {
        Kfdbroker__V1__Request req = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__QueryRequest q = KFDBROKER__V1__QUERY_REQUEST__INIT;
        Msg *m;
        uint64_t n;

        req.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
        req.query = &q;
        m = raw_call(sock, &req, NULL, 0, NULL, NULL);
        cr_assert_eq(m->error, 0);
        n = m->query->jobs_submitted;
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        return n;
}

Test(compute_hostile, bad_dispatches_name_the_field) {
        int sock = raw_connect(&d), other = raw_connect(&d);
        uint64_t co, other_co, x, y, other_buf, lds_co;
        RawDispatch r;
        char msg[512];
        double wide = 2.0;
        float a = 1.0f;
        uint32_t n = 1000;

        raw_hello(sock);
        raw_hello(other);
        co = load_ok(sock, "saxpy");
        lds_co = load_ok(sock, "local-sum");
        x = raw_alloc(sock, 4096, NULL);
        y = raw_alloc(sock, 4096, NULL);
        other_co = load_ok(other, "saxpy");
        other_buf = raw_alloc(other, 4096, NULL);

        /* The good dispatch is accepted (and its fence handed out). */
        rd_saxpy(&r, co, x, y, n, 64);
        {
                Msg *m = rd_submit(sock, &r);
                cr_assert_eq(m->error, 0, "%s", m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }

        /* A wave64 build of the same kernel is accepted too: the dispatch leaves
         * CS_W32_EN off for it (wave64_kernel_runs checks its results). */
        uint64_t w64 = load_ok(sock, "saxpy-w64");
        rd_saxpy(&r, w64, x, y, n, 64);
        {
                Msg *m = rd_submit(sock, &r);
                cr_assert_eq(m->error, 0, "%s", m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }

        rd_saxpy(&r, co, x, y, n, 64);
        r.d.kernel = (char *) "saxpyy";
        snprintf(msg, sizeof(msg), "submit.jobs[0].dispatch.kernel: no kernel \"saxpyy\" in code object 0x%" PRIx64, co);
        expect_error(rd_submit(sock, &r), ENOENT, msg);

        rd_saxpy(&r, other_co, x, y, n, 64);
        snprintf(msg, sizeof(msg),
                 "submit.jobs[0].dispatch.code_object: no code object 0x%" PRIx64 " in this session (a code object handle)",
                 other_co);
        expect_error(rd_submit(sock, &r), ENOENT, msg);

        rd_saxpy(&r, co, x, y, n, 64);
        r.d.n_args = 3;
        expect_error(rd_submit(sock, &r), EINVAL, "submit.jobs[0].dispatch.args: kernel \"saxpy\" takes 4 arguments, got 3");
        r.d.n_args = 0;
        rd_bytes(&r, &a, 4);
        rd_buffer(&r, x, 0);
        rd_buffer(&r, y, 0);
        rd_bytes(&r, &n, 4);
        rd_bytes(&r, &n, 4);
        expect_error(rd_submit(sock, &r), EINVAL, "submit.jobs[0].dispatch.args: kernel \"saxpy\" takes 4 arguments, got 5");

        rd_init(&r, co, "saxpy", n, 64);
        rd_bytes(&r, &wide, 8);
        rd_buffer(&r, x, 0);
        rd_buffer(&r, y, 0);
        rd_bytes(&r, &n, 4);
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.args[0].bytes: argument 0 of kernel \"saxpy\" takes 4 bytes, got 8");

        rd_init(&r, co, "saxpy", n, 64);
        rd_bytes(&r, &a, 4);
        rd_bytes(&r, &x, 8);
        rd_buffer(&r, y, 0);
        rd_bytes(&r, &n, 4);
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.args[1]: argument 1 of kernel \"saxpy\" is a global pointer (buffer), got bytes");
        rd_init(&r, co, "saxpy", n, 64);
        rd_buffer(&r, x, 0);
        rd_buffer(&r, x, 0);
        rd_buffer(&r, y, 0);
        rd_bytes(&r, &n, 4);
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.args[0]: argument 0 of kernel \"saxpy\" is a by-value argument (bytes), got buffer");
        rd_init(&r, co, "saxpy", n, 64);
        rd_bytes(&r, &a, 4);
        rd_local(&r, 64);
        rd_buffer(&r, y, 0);
        rd_bytes(&r, &n, 4);
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.args[1]: argument 1 of kernel \"saxpy\" is a global pointer (buffer), got local_size");

        rd_saxpy(&r, co, x, other_buf, n, 64);
        snprintf(msg, sizeof(msg),
                 "submit.jobs[0].dispatch.args[2].buffer.handle: no buffer 0x%" PRIx64 " in this session (a buffer handle)",
                 other_buf);
        expect_error(rd_submit(sock, &r), ENOENT, msg);
        rd_saxpy(&r, co, x, co, n, 64);
        snprintf(msg, sizeof(msg),
                 "submit.jobs[0].dispatch.args[2].buffer.handle: no buffer 0x%" PRIx64 " in this session (a code object handle)",
                 co);
        expect_error(rd_submit(sock, &r), ENOENT, msg);
        rd_saxpy(&r, co, x, y, n, 64);
        r.refs[2].offset = 4096;
        expect_error(rd_submit(sock, &r), ERANGE,
                     "submit.jobs[0].dispatch.args[2].buffer.offset: 4096 is outside the 4096-byte buffer");

        /* Grid and block. */
        rd_saxpy(&r, co, x, y, n, 64);
        r.grid[0] = 0;
        expect_error(rd_submit(sock, &r), EINVAL, "submit.jobs[0].dispatch.grid[0]: must be >= 1");
        rd_saxpy(&r, co, x, y, n, 64);
        r.d.n_grid = 2;
        r.grid[1] = 4;
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.block: must have as many dimensions as grid (2), got 1");
        rd_saxpy(&r, co, x, y, n, 512);
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.block: 512 work-items per workgroup, kernel \"saxpy\" allows at most 256");
        rd_saxpy(&r, co, x, y, n, 2048);
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.block: 2048 work-items per workgroup, at most 1024 allowed");
        rd_saxpy(&r, co, x, y, n, 0);
        expect_error(rd_submit(sock, &r), EINVAL, "submit.jobs[0].dispatch.block[0]: must be >= 1");

        /* LDS: two local regions of 40000 bytes do not fit 64 KiB. */
        rd_init(&r, lds_co, "local_sum", 256, 256);
        rd_buffer(&r, x, 0);
        rd_buffer(&r, y, 0);
        rd_bytes(&r, &n, 4);
        rd_local(&r, 40000);
        rd_local(&r, 40000);
        expect_error(rd_submit(sock, &r), EINVAL,
                     "submit.jobs[0].dispatch.args[4].local_size: 40000 bytes for argument 4 bring kernel \"local_sum\" to 80000 bytes of LDS (0 static + local regions, 16-byte aligned), the device has 65536");
        r.args[3].local_size = 0;
        expect_error(rd_submit(sock, &r), EINVAL, "submit.jobs[0].dispatch.args[3].local_size: must be > 0");

        /* All or nothing: a good fill before a bad dispatch is not queued either. */
        {
                uint64_t before = session_jobs_submitted(sock);
                rd_saxpy(&r, co, x, y, n, 64);
                r.d.kernel = (char *) "nope";
                kfdbroker__v1__fill_job__init(&r.fill);
                r.fill.dst_handle = x;
                r.fill.size = 4096;
                r.jobs[1] = r.jobs[0];
                r.jobs[0] = (Kfdbroker__V1__Job) KFDBROKER__V1__JOB__INIT;
                r.jobs[0].kind_case = KFDBROKER__V1__JOB__KIND_FILL;
                r.jobs[0].fill = &r.fill;
                r.sub.n_jobs = 2;
                snprintf(msg, sizeof(msg), "submit.jobs[1].dispatch.kernel: no kernel \"nope\" in code object 0x%" PRIx64, co);
                expect_error(rd_submit(sock, &r), ENOENT, msg);
                cr_assert_eq(session_jobs_submitted(sock), before);
        }

        /* Freed and other sessions' code objects are "no such code object". */
        snprintf(msg, sizeof(msg), "free_code_object.handle: no code object 0x%" PRIx64 " in this session (a code object handle)",
                 other_co);
        expect_error(free_code_object_raw(sock, other_co), ENOENT, msg);
        {
                Msg *m = free_code_object_raw(sock, lds_co);
                cr_assert_eq(m->error, 0, "%s", m->error_message);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        snprintf(msg, sizeof(msg), "free_code_object.handle: no code object 0x%" PRIx64 " in this session (a code object handle)",
                 lds_co);
        expect_error(free_code_object_raw(sock, lds_co), ENOENT, msg);
        snprintf(msg, sizeof(msg), "free_code_object.handle: no code object 0x%" PRIx64 " in this session (a buffer handle)", x);
        expect_error(free_code_object_raw(sock, x), ENOENT, msg);

        close(sock);
        close(other);
        assert_back_to_baseline();
        assert_bystander_works();
}

Test(compute_hostile, faulting_kernel_fails_its_job_and_the_daemon_serves_on) {
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *b;
        kfdb_batch *batch;
        kfdb_job_failure f;
        uint32_t one = 1, *p;
        uint64_t off = 1ull << 38, fences[2]; /* 1 TiB past the buffer: no mapping there */
        int r;

        cr_assert_eq(kfdb_session_new(d.sock, "faulter", &s), 0);
        co = load_kernel(s, "fault");
        b = new_buffer(s, 4096, 0, (void **) &p);
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_value(&off, 8) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "fault", 1, &one, &one, args, 2), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0x600d600d), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);
        r = kfdb_fence_wait(s, fences[0], DISPATCH_TIMEOUT_MS);
        cr_assert_eq(r, -EFAULT, "got %d: %s", r, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "GPU memory fault in dispatch of kernel \"fault\", at "), "%s",
                  kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "in dispatch of kernel \"fault\""), "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_job_failure_next(s, &f), 1);
        cr_assert_eq(f.error, -EFAULT);
        cr_assert_eq(f.fence, fences[0]);
        /* The job after it ran. */
        cr_assert_eq(kfdb_fence_wait(s, fences[1], DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(p[1023], 0x600d600d);
        cr_assert_geq(kfdb_session_get_context_lost(s), 1);
        kfdb_batch_free(batch);
        kfdb_session_free(s);

        assert_bystander_works();
        assert_back_to_baseline();
}

/* A client that watches its fence page (libkfdbroker opens it and its
 * waits spin on it) never reads a faulting kernel as done and succeeded,
 * though the simulated GPU lets the faulting dispatch's end-of-pipe fence
 * land before the MEMORY event (--sim-fault-order=fence-first, the default:
 * docs/simulator.md): the dispatch fails with EFAULT, and the fills around
 * it, whose slots the DMA engine writes, succeed and show on the page. Runs
 * with secondary contexts and with worker processes (-workers). */
Test(compute_hostile, faulting_kernel_never_reads_as_succeeded_with_a_fence_page) {
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *b;
        kfdb_batch *batch;
        kfdb_job_failure f;
        uint32_t one = 1, *p;
        uint64_t off = 1ull << 38, fences[3], after; /* 1 TiB past the buffer: no mapping there */
        int r;

        cr_assert_eq(kfdb_session_new(d.sock, "page-watcher", &s), 0);
        cr_assert(kfdb_session_has_feature(s, "fence-page"), "the daemon offers the fence page");
        co = load_kernel(s, "fault");
        b = new_buffer(s, 8192, 0, (void **) &p);
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_value(&off, 8) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 4096, 4096, 0x11111111), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "fault", 1, &one, &one, args, 2), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 4096, 4096, 0x22222222), 0);
        cr_assert_eq(kfdb_batch_submit(batch, fences, NULL), 0);
        kfdb_batch_free(batch);
        /* Waited for while it runs: the page is looked at first. */
        r = kfdb_fence_wait(s, fences[1], DISPATCH_TIMEOUT_MS);
        cr_assert_eq(r, -EFAULT, "the faulting dispatch: got %d: %s", r, kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fences[0], DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fences[2], DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(p[2047], 0x22222222u);
        cr_assert_eq(kfdb_job_failure_next(s, &f), 1);
        cr_assert_eq(f.error, -EFAULT);
        cr_assert_eq(f.fence, fences[1], "only the dispatch failed");
        cr_assert_eq(kfdb_job_failure_next(s, &f), 0, "only the dispatch failed");

        /* A fill with the page's help after the loss: done and succeeded. */
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_fill(batch, b, 0, 4096, 0x33333333), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &after), 0);
        kfdb_batch_free(batch);
        cr_assert_eq(kfdb_fence_wait(s, after, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(p[1023], 0x33333333u);
        kfdb_session_free(s);

        assert_bystander_works();
        assert_back_to_baseline();
}

/* saxpy built for wave64 runs on the daemon's queues and computes what the
 * wave32 build does (y = a * x + y, one fma per element). */
Test(compute_hostile, wave64_kernel_runs) {
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *bx, *by;
        float a = 2.5f, *x, *y;
        uint32_t n = 1000, block = 64;
        kfdb_batch *batch;
        uint64_t fence;

        cr_assert_eq(kfdb_session_new(d.sock, "wave64", &s), 0);
        co = load_kernel(s, "saxpy-w64");
        bx = new_buffer(s, 4 * n, 0, (void **) &x);
        by = new_buffer(s, 4 * n, 0, (void **) &y);
        for (uint32_t i = 0; i < n; i++)
                x[i] = (float) i / 7.0f - 30.0f, y[i] = (float) (i % 13) * 0.25f;
        kfdb_arg args[] = { kfdb_arg_value(&a, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0), kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, &n, &block, args, 4), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        for (uint32_t i = 0; i < n; i++) {
                float e = fmaf(a, (float) i / 7.0f - 30.0f, (float) (i % 13) * 0.25f);
                cr_assert_eq(y[i], e, "y[%u] = %a, expected %a", i, y[i], e);
        }
        kfdb_batch_free(batch);
        kfdb_session_free(s);
}

/* File offset of the kernel descriptor "<kernel>.kd" of a code object: its
 * .dynsym value, through the PT_LOAD that holds it. */
static size_t kd_file_offset(const uint8_t *elf, size_t len, const char *symbol) {
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *) elf;
        const Elf64_Shdr *sh = (const Elf64_Shdr *) (elf + eh->e_shoff);
        const Elf64_Phdr *ph = (const Elf64_Phdr *) (elf + eh->e_phoff);

        cr_assert(eh->e_shoff + (size_t) eh->e_shnum * sizeof *sh <= len);
        for (unsigned i = 0; i < eh->e_shnum; i++) {
                if (sh[i].sh_type != SHT_DYNSYM)
                        continue;
                const Elf64_Sym *sym = (const Elf64_Sym *) (elf + sh[i].sh_offset);
                const char *names = (const char *) elf + sh[sh[i].sh_link].sh_offset;
                for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++) {
                        if (strcmp(names + sym[k].st_name, symbol) != 0)
                                continue;
                        for (unsigned p = 0; p < eh->e_phnum; p++)
                                if (ph[p].p_type == PT_LOAD && sym[k].st_value >= ph[p].p_vaddr &&
                                    sym[k].st_value + 64 <= ph[p].p_vaddr + ph[p].p_filesz)
                                        return ph[p].p_offset + (sym[k].st_value - ph[p].p_vaddr);
                }
        }
        cr_assert_fail("no %s in the code object", symbol);
        return 0;
}

/* A descriptor that starts its waves privileged (COMPUTE_PGM_RSRC1.PRIV, bit
 * 20 of the word at byte 48) or with the trap handler present (RSRC2 bit 6,
 * byte 52) is refused, with EINVAL and the bit's name, and the session goes
 * on: the unchanged code object loads and runs. */
Test(compute_hostile, descriptor_bits_only_the_cp_may_set) {
        static const struct {
                unsigned offset, bit;
                const char *msg;
        } cases[] = {
                { 48, 20, "load_code_object: kernel saxpy: kernel descriptor sets COMPUTE_PGM_RSRC1.PRIV (bit 20), which "
                          "clients may not" },
                { 52, 6, "load_code_object: kernel saxpy: kernel descriptor sets COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6), "
                         "which clients may not" },
        };
        kfdb_session *s;
        kfdb_code_object *co = NULL;
        size_t len;
        uint8_t *elf = read_file(kernel_path("saxpy"), &len);
        size_t kd = kd_file_offset(elf, len, "saxpy.kd");

        cr_assert_eq(kfdb_session_new(d.sock, "privileged", &s), 0);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
                uint8_t *copy = malloc(len);
                uint32_t word;
                memcpy(copy, elf, len);
                memcpy(&word, copy + kd + cases[i].offset, 4);
                cr_assert_eq(word >> cases[i].bit & 1, 0u);
                word |= 1u << cases[i].bit;
                memcpy(copy + kd + cases[i].offset, &word, 4);
                cr_assert_eq(kfdb_code_object_load(s, copy, len, &co), -EINVAL);
                cr_assert_null(co);
                cr_assert_str_eq(kfdb_session_last_error(s), cases[i].msg);
                free(copy);
        }

        /* The session goes on: saxpy as clang built it loads and runs. */
        kfdb_buffer *bx, *by;
        float a = 2.0f, *x, *y;
        uint32_t n = 256, block = 64;
        kfdb_batch *batch;
        uint64_t fence;
        cr_assert_eq(kfdb_code_object_load(s, elf, len, &co), 0, "%s", kfdb_session_last_error(s));
        bx = new_buffer(s, 4 * n, 0, (void **) &x);
        by = new_buffer(s, 4 * n, 0, (void **) &y);
        for (uint32_t i = 0; i < n; i++)
                x[i] = (float) i, y[i] = 1.0f;
        kfdb_arg args[] = { kfdb_arg_value(&a, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0), kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        cr_assert_eq(kfdb_batch_dispatch(batch, co, "saxpy", 1, &n, &block, args, 4), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(s));
        for (uint32_t i = 0; i < n; i++)
                cr_assert_eq(y[i], 2.0f * (float) i + 1.0f, "y[%u] = %g", i, y[i]);
        kfdb_batch_free(batch);
        kfdb_session_free(s);
        free(elf);
        assert_bystander_works();
}

/*
 * Register and LDS residue (docs/simulator.md, "What a wave starts with"):
 * a victim session leaves a secret in v200, v255 and LDS in every wave of a
 * large dispatch and ends; an attacker's session then runs waves that read
 * those registers and its LDS without writing them, and must find zeros in
 * every work-item. The simulator's waves run on threads every context
 * shares (the CP engines and the device's helper pool), in both context
 * mechanisms.
 */
#define RESIDUE_ITEMS (64u * 512u)
#define RESIDUE_SECRET 0x5EC2E700u

Test(compute_hostile, residue_of_an_ended_session_reaches_no_other) {
        uint32_t grid = RESIDUE_ITEMS, block = 64, secret = RESIDUE_SECRET, write = 1, read = 0;

        for (unsigned round = 0; round < 3; round++) {
                kfdb_session *victim, *attacker;
                kfdb_code_object *co;
                kfdb_buffer *b;
                uint32_t *out;

                cr_assert_eq(kfdb_session_new(d.sock, "victim", &victim), 0);
                co = load_kernel(victim, "residue");
                b = new_buffer(victim, 3 * 4 * RESIDUE_ITEMS, 0, (void **) &out);
                kfdb_arg wargs[] = { kfdb_arg_buffer(b, 0), kfdb_arg_value(&secret, 4), kfdb_arg_value(&write, 4) };
                run_dispatch(victim, co, "residue", 1, &grid, &block, wargs, 3);
                kfdb_session_free(victim);

                cr_assert_eq(kfdb_session_new(d.sock, "attacker", &attacker), 0);
                co = load_kernel(attacker, "residue");
                b = new_buffer(attacker, 3 * 4 * RESIDUE_ITEMS, 0xEE, (void **) &out);
                kfdb_arg rargs[] = { kfdb_arg_buffer(b, 0), kfdb_arg_value(&secret, 4), kfdb_arg_value(&read, 4) };
                run_dispatch(attacker, co, "residue", 1, &grid, &block, rargs, 3);
                for (uint32_t i = 0; i < 3 * RESIDUE_ITEMS; i++)
                        cr_assert_eq(out[i], 0, "round %u: work-item %u found 0x%08x in %s, which it never wrote", round,
                                     i / 3, out[i], i % 3 == 0 ? "v200" : i % 3 == 1 ? "v255" : "its LDS word");
                kfdb_session_free(attacker);
        }
        assert_bystander_works();
}

Test(compute_hostile, code_object_freed_while_its_dispatch_runs) {
        int sock = raw_connect(&d), flag_fd;
        uint64_t co, flag, out, failed = 0;
        uint32_t *flag_map, max = UINT32_MAX;
        bool done = false;
        RawDispatch r;
        Msg *m, *holder;
        Kfdbroker__V1__StatusReply *st;

        raw_hello(sock);
        co = load_ok(sock, "gate");
        flag = raw_alloc(sock, 4096, &flag_fd);
        out = raw_alloc(sock, 4096, NULL);
        flag_map = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, flag_fd, 0);
        cr_assert(flag_map != MAP_FAILED);
        rd_init(&r, co, "gate", 1, 1);
        rd_buffer(&r, flag, 0);
        rd_buffer(&r, out, 0);
        rd_bytes(&r, &max, 4);
        m = rd_submit(sock, &r);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        cr_assert_eq(m->submit->n_fences, 1);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);

        /* Freed while the kernel spins: the handle is gone, the code is not. */
        usleep(100 * 1000);
        m = free_code_object_raw(sock, co);
        cr_assert_eq(m->error, 0, "%s", m->error_message);
        kfdbroker__v1__server_message__free_unpacked(m, NULL);
        st = raw_status(sock, &holder);
        cr_assert_eq(st->code_objects, base_code_objects, "the session no longer has it");
        cr_assert_eq(st->jobs_in_flight, 1, "the dispatch still runs");
        kfdbroker__v1__server_message__free_unpacked(holder, NULL);

        __atomic_store_n(&flag_map[0], 1u, __ATOMIC_RELEASE);
        for (int i = 0; i < 6000 && !done; i++) {
                st = raw_status(sock, &holder);
                done = st->jobs_in_flight == 0;
                failed = st->jobs_failed;
                kfdbroker__v1__server_message__free_unpacked(holder, NULL);
                usleep(10000);
        }
        cr_assert(done, "the dispatch did not finish after its gate opened");
        cr_assert_eq(failed, 0, "the dispatch must finish normally");
        munmap(flag_map, 4096);
        close(flag_fd);
        close(sock);
        assert_back_to_baseline();
        assert_bystander_works();
}

Test(compute_hostile, client_leaving_with_dispatches_in_flight) {
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *b;
        kfdb_batch *batch;
        uint32_t n = 65536, block = 256, *p;

        cr_assert_eq(kfdb_session_new(d.sock, "leaver", &s), 0);
        co = load_kernel(s, "collatz");
        b = new_buffer(s, n * 4, 0, (void **) &p);
        for (uint32_t i = 0; i < n; i++)
                p[i] = i + 1;
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_buffer(b, 0), kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        for (int i = 0; i < 8; i++)
                cr_assert_eq(kfdb_batch_dispatch(batch, co, "collatz", 1, &n, &block, args, 3), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, NULL), 0);
        kfdb_session_free(s);

        assert_back_to_baseline();
        assert_bystander_works();
}

/* Limits: a code object counts as a buffer, and its size as buffer memory. */
Test(compute_hostile, code_objects_count_against_the_buffer_limits) {
        int sock, fd;
        size_t len;
        void *elf = read_file(kernel_path("saxpy"), &len);
        char msg[256];

        stop();
        start("[Limits]\nBuffers=2\nBufferMemory=1M\n");
        bystander_co = load_kernel(bystander, "vector-add");
        sock = raw_connect(&d);
        raw_hello(sock);
        load_ok(sock, "saxpy");
        raw_alloc(sock, 4096, NULL);
        fd = memfd_with(elf, len, ALL_SEALS);
        expect_error(load_raw(sock, &fd, 1), EDQUOT,
                     "buffer count limit (max_buffers 2, policy Buffers=) reached: 1 buffers and 1 code objects (a code object counts as a buffer)");
        close(fd);
        close(sock);

        sock = raw_connect(&d);
        raw_hello(sock);
        raw_alloc(sock, 1 << 20, NULL);
        fd = memfd_with(elf, len, ALL_SEALS);
        snprintf(msg, sizeof(msg), "buffer memory limit (max_buffer_bytes 1048576, policy BufferMemory=) reached: 1048576 in use, %zu requested",
                 (len + 4095) / 4096 * 4096);
        expect_error(load_raw(sock, &fd, 1), EDQUOT, msg);
        close(fd);
        close(sock);
        free(elf);
}

Test(compute_hostile, compute_denied_by_policy) {
        int sock;
        uint64_t co, x;
        RawDispatch r;
        char msg[512];

        stop();
        start("[Limits]\nComputeDispatch=no\n");
        sock = raw_connect(&d);
        raw_hello(sock);
        /* Loading is allowed (listing kernels is harmless); running is not. */
        co = load_ok(sock, "saxpy");
        x = raw_alloc(sock, 4096, NULL);
        rd_saxpy(&r, co, x, x, 16, 16);
        snprintf(msg, sizeof(msg),
                 "submit.jobs[0].dispatch: compute dispatch is not allowed for this client by policy (ComputeDispatch=no, "
                 "Isolation=session; rules: %s/00-tests-may-dispatch.conf:2, %s/50-test.conf:1)",
                 d.grant_dir, policydir);
        expect_error(rd_submit(sock, &r), EPERM, msg);
        close(sock);
}
