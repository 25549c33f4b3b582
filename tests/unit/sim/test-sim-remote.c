/* SPDX-License-Identifier: MIT */
/*
 * sim-remote: the simulated GPU served to another process (sim-remote.h).
 * Each test forks a child that talks to the parent's device only through
 * sim_remote_ops_new() on its end of a socketpair, while the parent serves it
 * with sim_remote_serve(): the daemon's GPU layer brings up a whole context
 * over it (fill, copy, a dispatch), a dma-buf the child exports is the same
 * memory in the parent, a fault of the child's context leaves a context of
 * the parent running, a WAIT_EVENTS asleep in one thread holds up no
 * allocation in another, and a child killed in WAIT_EVENTS is torn down on
 * the spot. The last tests speak the wire themselves, as a hostile process
 * would: the server ends the channel or answers an errno, and the daemon
 * neither crashes nor leaks.
 *
 * A child cannot use criterion's assertions; it exits with a code that names
 * the check that failed (printed on stderr), which the parent asserts is 0.
 * Children are forked before the parent starts a thread of its own, so
 * LeakSanitizer checks them too on the way out (its notice that a "running
 * thread was not suspended" is about Criterion's thread in the parent, which
 * the child does not have).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include <amdgpu_drm.h>

#include "gpu/gpu.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim-device.h" /* white box: sim_device_ioctl_simulated() */
#include "sim/sim-remote-protocol.h"
#include "sim/sim-remote.h"
#include "sim/sim.h"
#include "test-fini.h"
#include "util/macro.h"

#define GPU_ID 0x697Du

static double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* ---- Children ---- */

typedef int (*ChildFn)(const KfdOps *ops, int test_sock);

typedef struct Child {
        pid_t pid;
        int sock;       /* the daemon's end: for sim_remote_serve() */
        int test_sock;  /* the test's own channel to the child */
} Child;

static _Noreturn void child_exit(int code) {
#if defined(__SANITIZE_ADDRESS__)
        if (code == 0 && __lsan_do_recoverable_leak_check() != 0)
                code = 99;
#endif
        _exit(code);
}

/* A failed check in a child: say which and exit with its code. */
#define CHILD_CHECK(cond, code, ...)                                                    \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "child check %d failed (%s:%d): ", (code),     \
                                __FILE__, __LINE__);                                    \
                        fprintf(stderr, __VA_ARGS__);                                   \
                        fputc('\n', stderr);                                            \
                        child_exit(code);                                               \
                }                                                                       \
        } while (0)

/* Forks a child that runs fn on a remote table; the parent must serve
 * child.sock (sim_remote_serve) before the child's handshake times out. */
static Child child_start(ChildFn fn) {
        int sv[2], tv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, tv), 0);
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                const KfdOps *ops = NULL;
                close(sv[0]);
                close(tv[0]);
                int r = sim_remote_ops_new(sv[1], &ops);
                CHILD_CHECK(r == 0, 1, "sim_remote_ops_new: %s", strerror(-r));
                int code = fn(ops, tv[1]);
                sim_remote_ops_free(ops);
                close(tv[1]);
                child_exit(code);
        }
        close(sv[1]);
        close(tv[1]);
        return (Child) { .pid = pid, .sock = sv[0], .test_sock = tv[0] };
}

/* Waits (at most 60 s) for the child and fails the test unless it exited 0. */
static void child_finish(Child *c) {
        int status = 0;
        double deadline = now_s() + 60;
        pid_t r;

        while ((r = waitpid(c->pid, &status, WNOHANG)) == 0) {
                if (now_s() > deadline) {
                        kill(c->pid, SIGKILL);
                        waitpid(c->pid, &status, 0);
                        cr_assert_fail("the child did not finish within 60 s");
                }
                usleep(10000);
        }
        cr_assert_eq(r, c->pid);
        cr_assert(WIFEXITED(status), "the child died of signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        cr_assert_eq(WEXITSTATUS(status), 0, "the child failed check %d (its stderr says which)", WEXITSTATUS(status));
        close(c->test_sock);
        c->pid = 0;
}

/* One byte between parent and child, to keep them in step. */
static void send_byte(int sock, char b, int fd) {
        int r = sim_remote_send(sock, &(struct iovec) { .iov_base = &b, .iov_len = 1 }, 1, fd);
        if (r < 0) {
                fprintf(stderr, "send_byte: %s\n", strerror(-r));
                abort();
        }
}

static char recv_byte(int sock, int *ret_fd) {
        char b = 0;
        int fd = -1;
        ssize_t n = sim_remote_recv(sock, &b, 1, &fd);
        if (ret_fd)
                *ret_fd = fd;
        else if (fd >= 0)
                close(fd);
        return n == 1 ? b : 0;
}

/* Waits (at most 10 s) until the device looks as pred says. */
static bool stats_wait(SimDevice *d, bool (*pred)(const SimDeviceStats *st, const void *arg), const void *arg,
                       SimDeviceStats *ret) {
        double deadline = now_s() + 10;
        SimDeviceStats st;

        for (;;) {
                sim_device_get_stats(d, &st);
                if (pred(&st, arg) || now_s() > deadline)
                        break;
                usleep(5000);
        }
        if (ret)
                *ret = st;
        return pred(&st, arg);
}

static bool no_remote_process(const SimDeviceStats *st, const void *arg) {
        return st->remote_processes == 0 && st->processes == 1;
}

/* ---- A stand-in for the event loop ---- */

typedef struct Comps {
        unsigned n;
        GpuCompletion c[64];
        char messages[64][256]; /* copies of GpuCompletion.message */
} Comps;

static void on_comp(const GpuCompletion *comp, void *userdata) {
        Comps *cs = userdata;
        if (cs->n < 64) {
                cs->c[cs->n] = *comp;
                snprintf(cs->messages[cs->n], sizeof cs->messages[0], "%s", comp->message ? comp->message : "");
                cs->c[cs->n].message = cs->messages[cs->n];
                cs->n++;
        }
}

static const GpuCompletion *find_comp(const Comps *cs, unsigned q, uint64_t seq) {
        for (unsigned i = 0; i < cs->n; i++)
                if (cs->c[i].queue == q && cs->c[i].seq == seq)
                        return &cs->c[i];
        return NULL;
}

/* Runs the loop until (q, seq) was reported, at most 30 s; NULL if it never was. */
static const GpuCompletion *run_until(GpuContext *c, Comps *cs, unsigned q, uint64_t seq) {
        double deadline = now_s() + 30;
        while (!find_comp(cs, q, seq) && now_s() < deadline) {
                struct pollfd p = { .fd = gpu_context_get_wake_fd(c), .events = POLLIN };
                poll(&p, 1, 100);
                if (gpu_context_process(c, on_comp, cs) < 0)
                        return NULL;
        }
        return find_comp(cs, q, seq);
}

/* Submits a job and waits for its completion (*ret): 0, or < 0 if it was refused or never reported. */
static int run_job(GpuContext *c, Comps *cs, unsigned q, const GpuJob *j, const GpuCompletion **ret) {
        uint64_t seq = 0;
        int r = gpu_queue_submit(c, q, j, &seq);
        if (r < 0)
                return r;
        *ret = run_until(c, cs, q, seq);
        return *ret ? 0 : -ETIME;
}

static uint8_t pattern_byte(uint64_t i, uint32_t seed) {
        uint64_t x = (i + seed) * 0x9E3779B97F4A7C15ull;
        return (uint8_t) (x >> 56);
}

/* ---- A whole GPU context over the remote table ---- */

#ifdef KERNEL_DIR
static void *read_kernel(const char *name, size_t *ret_size) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", KERNEL_DIR, name);
        FILE *f = fopen(path, "rbe");
        if (!f)
                return NULL;
        fseek(f, 0, SEEK_END);
        long n = ftell(f);
        fseek(f, 0, SEEK_SET);
        void *p = malloc((size_t) n);
        if (p && fread(p, 1, (size_t) n, f) != (size_t) n) {
                free(p);
                p = NULL;
        }
        fclose(f);
        *ret_size = (size_t) n;
        return p;
}

static GpuCodeObject *child_load(GpuContext *c, const char *file) {
        size_t size = 0;
        char err[256] = "";
        void *elf = read_kernel(file, &size);
        CHILD_CHECK(elf, 30, "no %s in %s", file, KERNEL_DIR);
        GpuCodeObject *co = NULL;
        int r = gpu_code_object_load(c, elf, size, &co, err, sizeof err);
        free(elf);
        CHILD_CHECK(r == 0, 31, "gpu_code_object_load(%s): %s (%s)", file, strerror(-r), err);
        return co;
}

/* An instruction the simulator does not run: the queue stops and nothing
 * says so (no event, kfd-facts §7.2); the job given up on (as at its
 * timeout) fails with the words of KfdOps.exception_info, carried over the
 * wire, naming it; the queue is recreated and runs the next job. */
static int child_illegal(GpuContext *c, Comps *cs) {
        GpuCodeObject *co = child_load(c, "illegal.hsaco");
        int idx = gpu_code_object_find(co, "illegal");
        CHILD_CHECK(idx >= 0, 40, "no illegal kernel");
        GpuBuffer *out = NULL;
        CHILD_CHECK(gpu_buffer_new(c, 4096, GPU_PLACEMENT_GTT, false, &out) == 0, 41, "buffer");
        uint64_t va = gpu_buffer_get_va(out);
        const GpuKernel *k = gpu_code_object_kernel(co, (unsigned) idx);
        uint8_t args[64] = { 0 };
        uint32_t args_size = 0;
        for (unsigned i = 0; i < k->n_args; i++)
                if (k->args[i].kind != GPU_ARG_HIDDEN) {
                        memcpy(args + k->args[i].offset, &va, 8);
                        args_size = k->args[i].offset + 8;
                }
        GpuJob j = { .type = GPU_JOB_DISPATCH,
                     .dispatch = { .co = co, .kernel = (unsigned) idx, .grid = { 1, 1, 1 }, .block = { 1, 1, 1 },
                                   .args_data = args, .args_size = args_size } };
        const GpuCompletion *done = NULL;
        volatile uint32_t *o = gpu_buffer_get_cpu(out);
        uint64_t seq = 0;
        int r = gpu_queue_submit(c, 2, &j, &seq);
        CHILD_CHECK(r == 0, 42, "submit: %s", strerror(-r));
        for (int i = 0; i < 10000 && o[0] != 1; i++)
                usleep(1000);
        CHILD_CHECK(o[0] == 1, 42, "the kernel never ran");
        usleep(100000); /* it reaches the instruction right after that store */
        r = gpu_context_process(c, on_comp, cs);
        CHILD_CHECK(r >= 0 && !find_comp(cs, 2, seq), 43, "the stopped dispatch was reported without a timeout");
        CHILD_CHECK(gpu_queue_abort(c, 2, seq, -ETIME, on_comp, cs) == 1, 43, "abort");
        done = run_until(c, cs, 2, seq);
        CHILD_CHECK(done && done->error == -ETIME, 43, "error %d", done ? done->error : 0);
        CHILD_CHECK(done->message && strstr(done->message, "unsupported instruction v_dot2_f32_f16"), 44, "message: %s",
                    done->message ? done->message : "(none)");
        CHILD_CHECK(!gpu_context_is_lost(c, NULL), 45, "a stopped queue does not end the context");
        GpuJob nop = { .type = GPU_JOB_NOP };
        r = run_job(c, cs, 2, &nop, &done);
        CHILD_CHECK(r == 0 && done->error == 0, 46, "the recreated queue: %s, error %d", strerror(-r),
                    r == 0 ? done->error : 0);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
        return 0;
}

/* vector_add(a, b, c, n) on the compute queue, checked element by element. */
static int child_dispatch(GpuContext *c, Comps *cs) {
        GpuCodeObject *co = child_load(c, "vector-add.hsaco");
        int r;
        int idx = gpu_code_object_find(co, "vector_add");
        CHILD_CHECK(idx >= 0, 32, "no vector_add kernel");
        const GpuKernel *k = gpu_code_object_kernel(co, (unsigned) idx);

        const uint32_t n = 1000;
        GpuBuffer *a = NULL, *b = NULL, *out = NULL;
        CHILD_CHECK(gpu_buffer_new(c, n * 4, GPU_PLACEMENT_GTT, false, &a) == 0 &&
                            gpu_buffer_new(c, n * 4, GPU_PLACEMENT_VRAM, false, &b) == 0 &&
                            gpu_buffer_new(c, n * 4 + 4096, GPU_PLACEMENT_GTT, false, &out) == 0,
                    33, "buffers");
        float *pa = gpu_buffer_get_cpu(a), *pb = gpu_buffer_get_cpu(b), *po = gpu_buffer_get_cpu(out);
        for (uint32_t i = 0; i < n; i++) {
                pa[i] = (float) i * 0.25f;
                pb[i] = 3.0f * (float) i;
        }
        for (uint32_t i = 0; i < n + 1024; i++)
                po[i] = -1.0f;

        uint8_t args[256] = { 0 };
        uint32_t args_size = 0;
        uint64_t ptrs[3] = { gpu_buffer_get_va(a), gpu_buffer_get_va(b), gpu_buffer_get_va(out) };
        unsigned explicit = 0;
        for (unsigned i = 0; i < k->n_args; i++) {
                const GpuKernelArg *ka = &k->args[i];
                if (ka->kind == GPU_ARG_HIDDEN)
                        continue;
                CHILD_CHECK(ka->offset + ka->size <= sizeof args, 34, "argument %s out of range", ka->name);
                if (explicit < 3)
                        memcpy(args + ka->offset, &ptrs[explicit], 8);
                else
                        memcpy(args + ka->offset, &n, 4);
                args_size = MAX(args_size, ka->offset + ka->size);
                explicit++;
        }
        CHILD_CHECK(explicit == 4, 35, "vector_add takes %u explicit arguments", explicit);

        GpuJob j = { .type = GPU_JOB_DISPATCH,
                     .dispatch = { .co = co, .kernel = (unsigned) idx, .grid = { n, 1, 1 }, .block = { 64, 1, 1 },
                                   .args_data = args, .args_size = args_size } };
        const GpuCompletion *done = NULL;
        r = run_job(c, cs, 2, &j, &done);
        CHILD_CHECK(r == 0 && done->error == 0, 36, "dispatch: %s, error %d", strerror(-r), r == 0 ? done->error : 0);
        for (uint32_t i = 0; i < n; i++)
                CHILD_CHECK(po[i] == pa[i] + pb[i], 37, "c[%u] = %f, not %f", i, po[i], pa[i] + pb[i]);
        for (uint32_t i = n; i < n + 1024; i++)
                CHILD_CHECK(po[i] == -1.0f, 38, "c[%u] written past the grid", i);
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);
        gpu_buffer_unref(out);
        gpu_code_object_unref(co);
        return 0;
}
#endif

static int child_gpu_context(const KfdOps *ops, int test_sock) {
        GpuContext *c = NULL;
        Comps *cs = calloc(1, sizeof *cs);
        int r = gpu_context_new(ops, NULL, &c);
        CHILD_CHECK(r == 0, 10, "gpu_context_new: %s", strerror(-r));
        const GpuDeviceInfo *info = gpu_context_get_info(c);
        CHILD_CHECK(strcmp(info->gfx_name, "gfx1030") == 0 && info->gpu_id == GPU_ID, 11, "device %s 0x%x",
                    info->gfx_name, info->gpu_id);
        CHILD_CHECK(info->kfd_major == 1 && info->kfd_minor == SIM_DEFAULT_KFD_MINOR, 12, "KFD %u.%u",
                    info->kfd_major, info->kfd_minor);
        CHILD_CHECK(info->n_queues == 3 && info->queue_engine[2] == GPU_ENGINE_COMPUTE, 13, "%u queues",
                    info->n_queues);
        CHILD_CHECK(info->hdp_flush, 22, "the HDP flush page is mapped over the remote table");

        /* SDMA fill of a, then a copy of a into b on the other SDMA queue,
         * ordered on the GPU; the bytes checked through the CPU mappings. */
        const uint64_t size = 1 << 20;
        GpuBuffer *a = NULL, *b = NULL;
        CHILD_CHECK(gpu_buffer_new(c, size, GPU_PLACEMENT_GTT, false, &a) == 0, 14, "buffer a");
        CHILD_CHECK(gpu_buffer_new(c, size, GPU_PLACEMENT_VRAM, false, &b) == 0, 15, "buffer b");
        memset(gpu_buffer_get_cpu(b), 0xEE, size);
        GpuJob fill = { .type = GPU_JOB_FILL,
                        .fill = { .dst_va = gpu_buffer_get_va(a), .size = size, .pattern = 0xC0FFEE11u } };
        uint64_t fill_seq = 0;
        CHILD_CHECK(gpu_queue_submit(c, 0, &fill, &fill_seq) == 0, 16, "submit fill");
        GpuJob copy = { .type = GPU_JOB_COPY,
                        .copy = { .src_va = gpu_buffer_get_va(a), .dst_va = gpu_buffer_get_va(b), .size = size - 4096 },
                        .n_waits = 1,
                        .waits = { { .queue = 0, .seq = fill_seq } } };
        const GpuCompletion *done = NULL;
        r = run_job(c, cs, 1, &copy, &done);
        CHILD_CHECK(r == 0 && done->error == 0, 17, "copy: %s, error %d", strerror(-r), r == 0 ? done->error : 0);
        const uint32_t *pa = gpu_buffer_get_cpu(a), *pb = gpu_buffer_get_cpu(b);
        for (uint64_t i = 0; i < size / 4; i++) {
                CHILD_CHECK(pa[i] == 0xC0FFEE11u, 18, "a[%llu] = 0x%x", (unsigned long long) i, pa[i]);
                uint32_t want = i < (size - 4096) / 4 ? 0xC0FFEE11u : 0xEEEEEEEEu;
                CHILD_CHECK(pb[i] == want, 19, "b[%llu] = 0x%x, not 0x%x", (unsigned long long) i, pb[i], want);
        }
        gpu_buffer_unref(a);
        gpu_buffer_unref(b);

#ifdef KERNEL_DIR
        r = child_dispatch(c, cs);
        if (r != 0)
                return r;
        r = child_illegal(c, cs);
        if (r != 0)
                return r;
#else
        fprintf(stderr, "child: no kernel corpus (clang-15): the dispatch is skipped\n");
#endif
        GpuContextStats st;
        gpu_context_get_stats(c, &st);
        const uint64_t faults = 0; /* a stopped queue is no fault, and raises no exception */
        CHILD_CHECK(st.buffers == 0 && st.faults == faults, 20, "%u buffers left, %llu faults", st.buffers,
                    (unsigned long long) st.faults);
        gpu_context_free(c);
        free(cs);
        return 0;
}

Test(sim_remote, a_gpu_context_runs_over_the_remote_table, .timeout = 120) {
        Child ch = child_start(child_gpu_context);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        unsigned fds = test_count_fds();
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        child_finish(&ch);
        SimDeviceStats st;
        cr_expect(stats_wait(d, no_remote_process, NULL, &st), "the process is torn down: %u remote, %u mms",
                  st.remote_processes, st.processes);
        cr_expect_eq(st.contexts, 0u, "its context is gone");
        cr_expect_eq(st.queues, 0u, "its queues are gone");
        cr_expect_eq(st.files, 0u, "its files are closed");
        /* Gone: the socket the server had, and the test channel child_finish() closed. */
        cr_expect_eq(test_count_fds(), fds - 2, "the daemon holds no fd of the process (it had %u, has %u)", fds,
                     test_count_fds());
        sim_device_free(d);
}

/* ---- dma-bufs cross processes ---- */

static int child_export(const KfdOps *ops, int test_sock) {
        GpuContext *c = NULL;
        Comps *cs = calloc(1, sizeof *cs);
        int r = gpu_context_new(ops, NULL, &c);
        CHILD_CHECK(r == 0, 10, "gpu_context_new: %s", strerror(-r));
        const uint64_t size = 64 * 1024;
        GpuBuffer *b = NULL;
        CHILD_CHECK(gpu_buffer_new(c, size, GPU_PLACEMENT_VRAM, false, &b) == 0, 11, "buffer");
        uint8_t *p = gpu_buffer_get_cpu(b);
        for (uint64_t i = 0; i < size; i++)
                p[i] = pattern_byte(i, 7);
        /* The second half written by the GPU. */
        GpuJob fill = { .type = GPU_JOB_FILL,
                        .fill = { .dst_va = gpu_buffer_get_va(b) + size / 2, .size = size / 2, .pattern = 0x3C3C3C3Cu } };
        const GpuCompletion *done = NULL;
        r = run_job(c, cs, 0, &fill, &done);
        CHILD_CHECK(r == 0 && done->error == 0, 12, "fill");

        int fd = -1;
        r = gpu_buffer_export(b, &fd);
        CHILD_CHECK(r == 0 && fd >= 0, 13, "gpu_buffer_export: %s", strerror(-r));
        CHILD_CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC, 14, "the dma-buf fd is O_CLOEXEC as asked");
        send_byte(test_sock, 'E', fd);
        close(fd);
        /* The parent has seen the bytes and written one of its own; it sends
         * a buffer of its own the other way (GET_DMABUF_INFO and IMPORT_DMABUF
         * carry the fd to the daemon). */
        int pfd = -1;
        CHILD_CHECK(recv_byte(test_sock, &pfd) == 'W' && pfd >= 0, 15, "parent's dma-buf");
        const uint8_t flipped = (uint8_t) ~pattern_byte(5, 7);
        CHILD_CHECK(p[5] == flipped, 16, "the parent's write through its mapping: 0x%x", p[5]);
        GpuBuffer *imp = NULL;
        r = gpu_buffer_import(c, pfd, &imp);
        CHILD_CHECK(r == 0, 17, "gpu_buffer_import: %s", strerror(-r));
        CHILD_CHECK(gpu_buffer_get_size(imp) == 8192, 18, "size %llu", (unsigned long long) gpu_buffer_get_size(imp));
        GpuJob copy = { .type = GPU_JOB_COPY,
                        .copy = { .src_va = gpu_buffer_get_va(imp), .dst_va = gpu_buffer_get_va(b), .size = 8192 } };
        r = run_job(c, cs, 1, &copy, &done);
        CHILD_CHECK(r == 0 && done->error == 0, 19, "copy from the parent's buffer");
        for (uint64_t i = 0; i < 8192; i++)
                CHILD_CHECK(p[i] == pattern_byte(i, 9), 20, "byte %llu of the parent's buffer: 0x%x",
                            (unsigned long long) i, p[i]);
        CHILD_CHECK(((uint8_t *) gpu_buffer_get_cpu(imp))[100] == pattern_byte(100, 9), 21, "the CPU view of the import");
        close(pfd);
        gpu_buffer_unref(imp);
        gpu_buffer_unref(b);
        gpu_context_free(c);
        free(cs);
        return 0;
}

/* On KFD uapi minor (0: the default), where below 1.12 every buffer is a
 * GEM object the process made on its render node through the wire. */
static void dma_buf_across_processes(uint32_t minor) {
        const uint64_t size = 64 * 1024;
        Child ch = child_start(child_export);
        SimDevice *d = NULL;
        SimDeviceStats st;
        cr_assert_eq(sim_device_new(&(SimOptions) { .kfd_minor = minor }, &d), 0);
        GpuContext *pc = NULL;
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &pc), 0);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);

        int fd = -1;
        cr_assert_eq(recv_byte(ch.test_sock, &fd), 'E');
        cr_assert_geq(fd, 0, "the dma-buf fd arrived");
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.gem_handles, minor == 11 ? 1u : 0u, "the child's buffer came from its render node on 1.11 only");
        uint8_t *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(m, MAP_FAILED);
        for (uint64_t i = 0; i < size / 2; i++)
                cr_assert_eq(m[i], pattern_byte(i, 7), "byte %llu the child's CPU wrote", (unsigned long long) i);
        for (uint64_t i = size / 2; i < size; i++)
                cr_assert_eq(m[i], 0x3C, "byte %llu the child's GPU fill wrote", (unsigned long long) i);
        m[5] = (uint8_t) ~pattern_byte(5, 7);

        /* Imported into a context of the parent's own process and copied by its GPU. */
        GpuBuffer *imp = NULL, *local = NULL;
        cr_assert_eq(gpu_buffer_import(pc, fd, &imp), 0);
        cr_assert_eq(gpu_buffer_new(pc, size, GPU_PLACEMENT_GTT, false, &local), 0);
        Comps *cs = calloc(1, sizeof *cs);
        GpuJob copy = { .type = GPU_JOB_COPY,
                        .copy = { .src_va = gpu_buffer_get_va(imp), .dst_va = gpu_buffer_get_va(local), .size = size } };
        const GpuCompletion *done = NULL;
        cr_assert_eq(run_job(pc, cs, 0, &copy, &done), 0);
        cr_assert_eq(done->error, 0);
        cr_expect_eq(memcmp(gpu_buffer_get_cpu(local), m, size), 0, "the parent's GPU read the child's bytes");

        GpuBuffer *mine = NULL;
        cr_assert_eq(gpu_buffer_new(pc, 8192, GPU_PLACEMENT_GTT, false, &mine), 0);
        for (uint64_t i = 0; i < 8192; i++)
                ((uint8_t *) gpu_buffer_get_cpu(mine))[i] = pattern_byte(i, 9);
        int mine_fd = -1;
        cr_assert_eq(gpu_buffer_export(mine, &mine_fd), 0);
        send_byte(ch.test_sock, 'W', mine_fd);
        close(mine_fd);
        child_finish(&ch);
        gpu_buffer_unref(mine);
        cr_assert(stats_wait(d, no_remote_process, NULL, NULL), "the child's process is torn down");

        /* The exporter is gone; its dma-buf is not. */
        cr_expect_eq(m[size - 1], 0x3C);
        memset(gpu_buffer_get_cpu(local), 0, size);
        cr_assert_eq(run_job(pc, cs, 0, &copy, &done), 0);
        cr_expect_eq(done->error, 0);
        cr_expect_eq(memcmp(gpu_buffer_get_cpu(local), m, size), 0, "the import still works after the exporter exited");
        munmap(m, size);
        close(fd);
        gpu_buffer_unref(imp);
        gpu_buffer_unref(local);
        gpu_context_free(pc);
        free(cs);
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.gem_handles, 0u, "every GEM handle closed");
        sim_device_free(d);
}

Test(sim_remote, a_dma_buf_of_the_child_is_the_same_memory_in_the_parent, .timeout = 120) {
        dma_buf_across_processes(0);
}

/* KFD 1.11 has no EXPORT_DMABUF: GEM_CREATE, PRIME_HANDLE_TO_FD (an fd out)
 * and GEM_CLOSE cross the wire. */
Test(sim_remote, a_render_node_buffer_of_the_child_is_shared_on_kfd_1_11, .timeout = 120) {
        dma_buf_across_processes(11);
}

/* ---- A fault ends the child's context only ---- */

static int child_fault(const KfdOps *ops, int test_sock) {
        GpuContext *c = NULL;
        Comps *cs = calloc(1, sizeof *cs);
        int r = gpu_context_new(ops, NULL, &c);
        CHILD_CHECK(r == 0, 10, "gpu_context_new: %s", strerror(-r));
        GpuBuffer *dst = NULL, *page = NULL;
        CHILD_CHECK(gpu_buffer_new(c, 8192, GPU_PLACEMENT_GTT, false, &dst) == 0, 11, "buffer");
        CHILD_CHECK(gpu_buffer_new(c, 4096, GPU_PLACEMENT_GTT, false, &page) == 0, 11, "buffer");
        /* An address no buffer of this context has (the parent's VM is another). */
        const uint64_t bad = 0x00000c0000000000ull;
        /* With a signal write, as a fence page slot is (gpu-queue.c): in the
         * simulator's default fence-first order (sim-ih.h) the engine runs
         * on past the fault, and the signal must still not land. */
        volatile uint32_t *slot = gpu_buffer_get_cpu(page);
        GpuJob j = { .type = GPU_JOB_COPY, .copy = { .src_va = bad, .dst_va = gpu_buffer_get_va(dst), .size = 4096 },
                     .signal_va = gpu_buffer_get_va(page), .signal_value = 1 };
        const GpuCompletion *done = NULL;
        r = run_job(c, cs, 0, &j, &done);
        CHILD_CHECK(r == 0, 12, "the faulting job was never reported: %s", strerror(-r));
        CHILD_CHECK(done->error == -EFAULT && done->fault_va == bad, 13, "error %d at 0x%llx", done->error,
                    (unsigned long long) done->fault_va);
        CHILD_CHECK(*slot == 0, 17, "the faulting copy's signal was written: %u", *slot);
        CHILD_CHECK(gpu_context_is_lost(c, NULL), 14, "the context is lost");
        send_byte(test_sock, 'F', -1);
        CHILD_CHECK(recv_byte(test_sock, NULL) == 'K', 15, "parent's go");
        /* Still lost: the kernel evicted its queues for good. */
        uint64_t seq;
        GpuJob nop = { .type = GPU_JOB_NOP };
        CHILD_CHECK(gpu_queue_submit(c, 1, &nop, &seq) == -ENODEV, 16, "a lost context takes no job");
        gpu_buffer_unref(dst);
        gpu_buffer_unref(page);
        gpu_context_free(c);
        free(cs);
        return 0;
}

Test(sim_remote, a_fault_in_the_child_evicts_only_the_childs_queues, .timeout = 120) {
        Child ch = child_start(child_fault);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        GpuContext *pc = NULL;
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &pc), 0);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        cr_assert_eq(recv_byte(ch.test_sock, NULL), 'F', "the child saw its fault");

        /* The child's context is lost and still alive; ours runs on the same engines. */
        GpuBuffer *b = NULL;
        cr_assert_eq(gpu_buffer_new(pc, 65536, GPU_PLACEMENT_GTT, false, &b), 0);
        Comps *cs = calloc(1, sizeof *cs);
        for (unsigned q = 0; q < 2; q++) {
                GpuJob fill = { .type = GPU_JOB_FILL,
                                .fill = { .dst_va = gpu_buffer_get_va(b), .size = 65536, .pattern = 0x01010101u * (q + 1) } };
                const GpuCompletion *done = NULL;
                cr_assert_eq(run_job(pc, cs, q, &fill, &done), 0, "queue %u of the parent's context ran", q);
                cr_expect_eq(done->error, 0);
                cr_expect_eq(((uint8_t *) gpu_buffer_get_cpu(b))[65535], q + 1);
        }
        cr_expect_not(gpu_context_is_lost(pc, NULL));
        send_byte(ch.test_sock, 'K', -1);
        child_finish(&ch);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        gpu_buffer_unref(b);
        gpu_context_free(pc);
        free(cs);
        sim_device_free(d);
}

/* ---- Raw kernel calls of the child ---- */

typedef struct RawCtx {
        const KfdOps *ops;
        int kfd, render;
        uint64_t page_va, page_handle;
        uint32_t event;
} RawCtx;

static int raw_ioctl(RawCtx *x, unsigned long req, void *arg) {
        return x->ops->ioctl(x->ops->userdata, x->kfd, req, arg);
}

static uint64_t reserve_va(uint64_t size) {
        void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        CHILD_CHECK(p != MAP_FAILED, 50, "reserve");
        return (uint64_t) (uintptr_t) p;
}

/* ALLOC + MAP + CPU mapping through the render node, as the GPU layer does. */
static int raw_bo(RawCtx *x, uint64_t size, uint32_t domain, uint64_t *ret_va, uint64_t *ret_handle) {
        uint64_t va = reserve_va(size);
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = va, .size = size, .gpu_id = GPU_ID,
                .flags = domain | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
        };
        int r = raw_ioctl(x, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);
        if (r < 0)
                return r;
        uint32_t ids[1] = { GPU_ID };
        struct kfd_ioctl_map_memory_to_gpu_args m = {
                .handle = a.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };
        r = raw_ioctl(x, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m);
        if (r < 0)
                return r;
        if (m.n_success != 1)
                return -EIO;
        void *p = NULL;
        r = x->ops->mmap(x->ops->userdata, (void *) (uintptr_t) va, size, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_FIXED, x->render, a.mmap_offset, &p);
        if (r < 0)
                return r;
        if (p != (void *) (uintptr_t) va)
                return -EFAULT;
        *ret_va = va;
        *ret_handle = a.handle;
        return 0;
}

static int raw_bo_free(RawCtx *x, uint64_t va, uint64_t size, uint64_t handle) {
        uint32_t ids[1] = { GPU_ID };
        struct kfd_ioctl_unmap_memory_from_gpu_args u = {
                .handle = handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };
        int r = raw_ioctl(x, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &u);
        if (r < 0)
                return r;
        struct kfd_ioctl_free_memory_of_gpu_args f = { .handle = handle };
        r = raw_ioctl(x, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f);
        if (r < 0)
                return r;
        return x->ops->munmap(x->ops->userdata, (void *) (uintptr_t) va, size);
}

/* Opens kfd and render, acquires the VM, registers an event page and makes one signal event. */
static void raw_open(RawCtx *x, const KfdOps *ops) {
        *x = (RawCtx) { .ops = ops };
        x->kfd = ops->open_kfd(ops->userdata);
        CHILD_CHECK(x->kfd >= 0, 51, "open_kfd: %s", strerror(-x->kfd));
        x->render = ops->open_render(ops->userdata, 128);
        CHILD_CHECK(x->render >= 0, 52, "open_render: %s", strerror(-x->render));
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) x->render, .gpu_id = GPU_ID };
        int r = raw_ioctl(x, AMDKFD_IOC_ACQUIRE_VM, &vm);
        CHILD_CHECK(r == 0, 53, "ACQUIRE_VM: %s", strerror(-r));
        r = raw_bo(x, KFD_EVENT_PAGE_SIZE, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &x->page_va, &x->page_handle);
        CHILD_CHECK(r == 0, 54, "event page: %s", strerror(-r));
        struct kfd_ioctl_create_event_args e = {
                .event_page_offset = x->page_handle, .event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1,
        };
        r = raw_ioctl(x, AMDKFD_IOC_CREATE_EVENT, &e);
        CHILD_CHECK(r == 0 && e.event_id > 0, 55, "CREATE_EVENT: %s", strerror(-r));
        x->event = e.event_id;
}

typedef struct Waiter {
        RawCtx *x;
        uint32_t timeout;
        atomic_bool done;
        int r;
        uint32_t result;
        struct kfd_event_data ev[2];
} Waiter;

static void *waiter_main(void *userdata) {
        Waiter *w = userdata;
        struct kfd_ioctl_wait_events_args a = {
                .events_ptr = (uint64_t) (uintptr_t) w->ev, .num_events = 1, .timeout = w->timeout,
        };
        w->r = raw_ioctl(w->x, AMDKFD_IOC_WAIT_EVENTS, &a);
        w->result = a.wait_result;
        atomic_store(&w->done, true);
        return NULL;
}

static int child_wait_and_alloc(const KfdOps *ops, int test_sock) {
        RawCtx x;
        raw_open(&x, ops);

        Waiter w = { .x = &x, .timeout = KFD_EVENT_TIMEOUT_INFINITE };
        w.ev[0].event_id = x.event;
        w.ev[1].event_id = 0xDEAD; /* beyond num_events: must come back untouched */
        pthread_t t;
        CHILD_CHECK(pthread_create(&t, NULL, waiter_main, &w) == 0, 10, "thread");
        usleep(200 * 1000); /* the waiter is asleep in the daemon by now */
        CHILD_CHECK(!atomic_load(&w.done), 11, "the wait returned at once (%d, result %u)", w.r, w.result);

        /* While it sleeps: allocations, GPU mappings, CPU mappings, frees. */
        double t0 = now_s();
        for (unsigned i = 0; i < 50; i++) {
                uint64_t va, handle;
                int r = raw_bo(&x, 8192, i % 2 ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM : KFD_IOC_ALLOC_MEM_FLAGS_GTT, &va, &handle);
                CHILD_CHECK(r == 0, 12, "bo %u: %s", i, strerror(-r));
                ((volatile uint32_t *) (uintptr_t) va)[1000] = i;
                CHILD_CHECK(((volatile uint32_t *) (uintptr_t) va)[1000] == i, 13, "bo %u CPU mapping", i);
                r = raw_bo_free(&x, va, 8192, handle);
                CHILD_CHECK(r == 0, 14, "bo %u free: %s", i, strerror(-r));
        }
        double dt = now_s() - t0;
        CHILD_CHECK(dt < 10.0, 15, "50 allocations took %.1f s beside the sleeping wait", dt);
        CHILD_CHECK(!atomic_load(&w.done), 16, "the wait ended without its event (%d, result %u)", w.r, w.result);

        struct kfd_ioctl_set_event_args s = { .event_id = x.event };
        CHILD_CHECK(raw_ioctl(&x, AMDKFD_IOC_SET_EVENT, &s) == 0, 17, "SET_EVENT");
        pthread_join(t, NULL);
        CHILD_CHECK(w.r == 0 && w.result == KFD_IOC_WAIT_RESULT_COMPLETE, 18, "wait: %d, result %u", w.r, w.result);
        CHILD_CHECK(w.ev[0].event_id == x.event && w.ev[1].event_id == 0xDEAD, 19, "event data %u %u",
                    w.ev[0].event_id, w.ev[1].event_id);
        /* A finite wait times out after about its timeout. */
        Waiter w2 = { .x = &x, .timeout = 50 };
        w2.ev[0].event_id = x.event;
        t0 = now_s();
        waiter_main(&w2);
        dt = now_s() - t0;
        CHILD_CHECK(w2.r == 0 && w2.result == KFD_IOC_WAIT_RESULT_TIMEOUT && dt >= 0.045 && dt < 5, 20,
                    "timeout: %d, result %u after %.3f s", w2.r, w2.result, dt);

        CHILD_CHECK(raw_bo_free(&x, x.page_va, KFD_EVENT_PAGE_SIZE, x.page_handle) == -EPERM, 21,
                    "the event page cannot be freed (it is unmapped, FREE says EPERM)");
        CHILD_CHECK(ops->close(ops->userdata, x.kfd) == 0 && ops->close(ops->userdata, x.render) == 0, 22, "close");
        CHILD_CHECK(ops->close(ops->userdata, x.kfd) == -EBADF, 23, "a closed fd is -EBADF");
        return 0;
}

Test(sim_remote, a_sleeping_wait_holds_up_no_allocation, .timeout = 120) {
        Child ch = child_start(child_wait_and_alloc);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        child_finish(&ch);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        sim_device_free(d);
}

/* ---- Channels: cancellation, the bound ---- */

static void *cancellable_wait(void *userdata) {
        Waiter *w = userdata;
        pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, NULL);
        waiter_main(w);
        return NULL;
}

static int child_channels(const KfdOps *ops, int test_sock) {
        RawCtx x;
        raw_open(&x, ops);
        struct kfd_ioctl_get_version_args v = {};

        /* A thread cancelled in WAIT_EVENTS gives its channel up and unwinds,
         * as the in-process simulator lets it; the others go on. */
        Waiter w = { .x = &x, .timeout = KFD_EVENT_TIMEOUT_INFINITE };
        w.ev[0].event_id = x.event;
        pthread_t t;
        void *ret = NULL;
        CHILD_CHECK(pthread_create(&t, NULL, cancellable_wait, &w) == 0, 10, "thread");
        usleep(200 * 1000);
        CHILD_CHECK(pthread_cancel(t) == 0 && pthread_join(t, &ret) == 0, 11, "cancel");
        CHILD_CHECK(ret == PTHREAD_CANCELED && !atomic_load(&w.done), 12, "the thread was cancelled in its wait");
        CHILD_CHECK(raw_ioctl(&x, AMDKFD_IOC_GET_VERSION, &v) == 0 && v.major_version == 1, 13, "GET_VERSION after");
        struct kfd_ioctl_set_event_args se = { .event_id = x.event };
        CHILD_CHECK(raw_ioctl(&x, AMDKFD_IOC_SET_EVENT, &se) == 0, 14, "SET_EVENT");
        /* That ends the daemon's thread of the given-up channel (its wait
         * completes, its answer finds no reader); give it a moment to go, so
         * that it does not count against the bound below. */
        usleep(200 * 1000);

        /* SIM_REMOTE_MAX_CHANNELS calls in flight at once, and not one more. */
        static Waiter ws[SIM_REMOTE_MAX_CHANNELS];
        pthread_t ts[SIM_REMOTE_MAX_CHANNELS];
        for (unsigned i = 0; i < SIM_REMOTE_MAX_CHANNELS; i++) {
                ws[i] = (Waiter) { .x = &x, .timeout = 3000 };
                ws[i].ev[0].event_id = x.event;
                CHILD_CHECK(pthread_create(&ts[i], NULL, waiter_main, &ws[i]) == 0, 15, "thread %u", i);
        }
        usleep(1000 * 1000); /* every waiter holds its channel by now */
        int r = raw_ioctl(&x, AMDKFD_IOC_GET_VERSION, &v);
        CHILD_CHECK(r == -EMFILE, 16, "a call beside %u sleeping ones: %d", SIM_REMOTE_MAX_CHANNELS, r);
        for (unsigned i = 0; i < SIM_REMOTE_MAX_CHANNELS; i++) {
                pthread_join(ts[i], NULL);
                /* The event was set before they slept and is auto-reset: one
                 * of them may take it, the others time out. */
                CHILD_CHECK(ws[i].r == 0 && (ws[i].result == KFD_IOC_WAIT_RESULT_TIMEOUT ||
                                             ws[i].result == KFD_IOC_WAIT_RESULT_COMPLETE),
                            17, "waiter %u: %d, result %u", i, ws[i].r, ws[i].result);
        }
        CHILD_CHECK(raw_ioctl(&x, AMDKFD_IOC_GET_VERSION, &v) == 0, 18, "GET_VERSION once they are back");
        return 0;
}

Test(sim_remote, a_cancelled_wait_gives_its_channel_up_and_calls_are_bounded, .timeout = 120) {
        Child ch = child_start(child_channels);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        child_finish(&ch);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        sim_device_free(d);
}

/* A peer that answers everything but one WAIT_EVENTS (a proxy worker
 * stopped between its SET_EVENT's answer and passing on the wait's): with a
 * reply bound, the wait returns once its own timeout and the bound are past,
 * the connection given up, and every later call is -ENODEV at once. Before,
 * a sleeping call had no bound: the GPU context's waiter, which its
 * teardown joins, waited for ever (test-kfd-relay's stopped-worker test hung
 * now and then). */
static int child_unanswered_wait(const KfdOps *ops, int test_sock) {
        struct kfd_ioctl_get_version_args v = {};
        RawCtx x;

        raw_open(&x, ops);
        sim_remote_ops_set_reply_timeout(ops, 300);
        CHILD_CHECK(raw_ioctl(&x, AMDKFD_IOC_GET_VERSION, &v) == 0, 20, "GET_VERSION while served");
        send_byte(test_sock, 'W', -1);
        CHILD_CHECK(recv_byte(test_sock, NULL) == 'S', 21, "the parent stopped serving");

        Waiter w = { .x = &x, .timeout = 200 };
        w.ev[0].event_id = x.event;
        double t0 = now_s();
        waiter_main(&w);
        double waited = now_s() - t0;
        CHILD_CHECK(w.r < 0, 22, "an unanswered WAIT_EVENTS returned %d", w.r);
        CHILD_CHECK(waited >= 0.45, 23, "it gave up after %.3f s, before its timeout and the bound", waited);
        int r = raw_ioctl(&x, AMDKFD_IOC_GET_VERSION, &v);
        CHILD_CHECK(r == -ENODEV, 24, "a call after it: %d", r);
        return 0;
}

Test(sim_remote, a_sleeping_call_unanswered_past_its_timeout_gives_the_peer_up, .timeout = 60) {
        SimRemoteServer *srv = NULL;
        SimDevice *d = NULL;

        Child ch = child_start(child_unanswered_wait); /* before the device's threads (ASan's fork) */
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(sim_remote_serve_driven(d, ch.sock, NULL, NULL, &srv), 0);
        struct pollfd p = { .fd = ch.test_sock, .events = POLLIN };
        /* Served until the child says it will wait; then no more. */
        while (poll(&p, 1, 1) == 0)
                cr_assert_eq(sim_remote_server_run(srv), 1);
        cr_assert_eq(recv_byte(ch.test_sock, NULL), 'W');
        send_byte(ch.test_sock, 'S', -1);
        child_finish(&ch);
        /* The child's end is closed: the process ends. */
        int r;
        while ((r = sim_remote_server_run(srv)) == 1)
                usleep(1000);
        cr_expect_eq(r, 0);
        SimDeviceStats st;
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.remote_processes, 0u);
        sim_device_free(d);
}

/* ---- SDMA memory atomics of a worker process ---- */

/* What the relay submits for ROCr's BlitSdma on a worker's queue: ATOMIC
 * ADD -1 on a 64-bit signal (op 47, amd_blit_sdma.cpp), a LOOP compare-swap
 * that waits for the worker's own CPU store, then FENCE + TRAP to its event.
 * The engine runs in the daemon, the memory is the worker's: each side must
 * see the other's writes, atomically. The packets are written out by hand
 * from navi10_sdma_pkt_open.h. */
static int child_sdma_atomics(const KfdOps *ops, int test_sock) {
        (void) test_sock;
        RawCtx x;
        raw_open(&x, ops);
        uint64_t ring, ring_h, rw, rw_h, wp, wp_h, sig, sig_h;
        CHILD_CHECK(raw_bo(&x, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &ring, &ring_h) == 0 &&
                            raw_bo(&x, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &rw, &rw_h) == 0 &&
                            raw_bo(&x, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &wp, &wp_h) == 0 &&
                            raw_bo(&x, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &sig, &sig_h) == 0,
                    10, "buffers");
        struct kfd_ioctl_create_queue_args q = {
                .ring_base_address = ring, .write_pointer_address = wp, .read_pointer_address = rw,
                .ring_size = 4096, .gpu_id = GPU_ID, .queue_type = KFD_IOC_QUEUE_TYPE_SDMA,
                .queue_percentage = 100, .queue_priority = 7,
        };
        int r = raw_ioctl(&x, AMDKFD_IOC_CREATE_QUEUE, &q);
        CHILD_CHECK(r == 0, 11, "CREATE_QUEUE: %s", strerror(-r));
        void *db = NULL;
        r = ops->mmap(ops->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, x.kfd,
                      q.doorbell_offset & ~0x1FFFull, &db);
        CHILD_CHECK(r == 0, 12, "doorbell mmap: %s", strerror(-r));

        volatile uint64_t *v = (volatile uint64_t *) (uintptr_t) sig;
        v[0] = 0x100000001ull;
        v[1] = 1;
        uint64_t slot = x.page_va + 8ull * x.event;
        const uint32_t pk[] = {
                0x0000000Au | 47u << 25, (uint32_t) sig, (uint32_t) (sig >> 32), ~0u, ~0u, 0, 0, 0,
                0x0000000Au | 0x28u << 25 | 1u << 16, (uint32_t) (sig + 8), (uint32_t) ((sig + 8) >> 32), 42, 0, 2, 0, 0,
                0x00030005u, (uint32_t) slot, (uint32_t) (slot >> 32), x.event,
                0x00000006u, x.event,
        };
        memcpy((void *) (uintptr_t) ring, pk, sizeof pk);
        __atomic_store_n((uint64_t *) (uintptr_t) wp, (uint64_t) sizeof pk, __ATOMIC_RELEASE);
        __atomic_store_n((uint64_t *) ((uint8_t *) db + (q.doorbell_offset & 0x1FFFull)), (uint64_t) sizeof pk,
                         __ATOMIC_RELEASE);

        Waiter w = { .x = &x, .timeout = 100 };
        w.ev[0].event_id = x.event;
        waiter_main(&w);
        CHILD_CHECK(w.r == 0 && w.result == KFD_IOC_WAIT_RESULT_TIMEOUT, 13, "the loop did not wait: %d, %u", w.r,
                    w.result);
        CHILD_CHECK(v[0] == 0x100000000ull, 14, "ADD -1 on 64 bits: 0x%llx", (unsigned long long) v[0]);
        __atomic_store_n(&v[1], 2, __ATOMIC_RELEASE);
        Waiter w2 = { .x = &x, .timeout = 10000 };
        w2.ev[0].event_id = x.event;
        waiter_main(&w2);
        CHILD_CHECK(w2.r == 0 && w2.result == KFD_IOC_WAIT_RESULT_COMPLETE, 15, "completion: %d, %u", w2.r,
                    w2.result);
        CHILD_CHECK(v[1] == 42, 16, "the compare-swap saw the worker's store: %llu", (unsigned long long) v[1]);
        CHILD_CHECK(ops->close(ops->userdata, x.kfd) == 0 && ops->close(ops->userdata, x.render) == 0, 17, "close");
        return 0;
}

Test(sim_remote, sdma_atomics_on_a_worker_processs_memory, .timeout = 120) {
        Child ch = child_start(child_sdma_atomics);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        child_finish(&ch);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        sim_device_free(d);
}

/* ---- Killed while asleep ---- */

static int child_sleep_forever(const KfdOps *ops, int test_sock) {
        RawCtx x;
        raw_open(&x, ops);
        /* An SDMA queue too, so that the parent sees a queue go with the process. */
        uint64_t ring, ring_h, rw, rw_h, wp, wp_h;
        CHILD_CHECK(raw_bo(&x, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &ring, &ring_h) == 0 &&
                            raw_bo(&x, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &rw, &rw_h) == 0 &&
                            raw_bo(&x, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &wp, &wp_h) == 0,
                    10, "queue buffers");
        struct kfd_ioctl_create_queue_args q = {
                .ring_base_address = ring, .write_pointer_address = wp, .read_pointer_address = rw,
                .ring_size = 4096, .gpu_id = GPU_ID, .queue_type = KFD_IOC_QUEUE_TYPE_SDMA,
                .queue_percentage = 100, .queue_priority = 7,
        };
        int r = raw_ioctl(&x, AMDKFD_IOC_CREATE_QUEUE, &q);
        CHILD_CHECK(r == 0, 11, "CREATE_QUEUE: %s", strerror(-r));
        void *db = NULL;
        r = ops->mmap(ops->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, x.kfd,
                      q.doorbell_offset & ~0x1FFFull, &db);
        CHILD_CHECK(r == 0, 12, "doorbell mmap: %s", strerror(-r));
        send_byte(test_sock, 'S', -1);
        Waiter w = { .x = &x, .timeout = KFD_EVENT_TIMEOUT_INFINITE };
        w.ev[0].event_id = x.event;
        waiter_main(&w);
        CHILD_CHECK(false, 13, "the wait returned: %d, result %u", w.r, w.result);
        return 1;
}

/* At least *arg ioctls in flight (a WAIT_EVENTS asleep is one). */
static bool in_flight(const SimDeviceStats *st, const void *arg) {
        return st->ioctls_in_flight >= *(const unsigned *) arg;
}

static bool back_to(const SimDeviceStats *st, const void *arg) {
        const SimDeviceStats *base = arg;
        return st->remote_processes == 0 && st->processes == base->processes && st->contexts == base->contexts &&
               st->queues == base->queues && st->files == base->files;
}

Test(sim_remote, a_child_killed_in_wait_events_is_torn_down, .timeout = 120) {
        Child ch = child_start(child_sleep_forever);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        GpuContext *pc = NULL;
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &pc), 0);
        SimDeviceStats base, st;
        sim_device_get_stats(d, &base);
        unsigned fds = test_count_fds();
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);

        cr_assert_eq(recv_byte(ch.test_sock, NULL), 'S');
        /* Ours and the child's: the parent context's waiter sleeps there too. */
        unsigned two = 2;
        cr_assert(stats_wait(d, in_flight, &two, &st), "the child's WAIT_EVENTS is asleep in the daemon");
        cr_expect_eq(st.remote_processes, 1u);
        cr_expect_eq(st.processes, base.processes + 1);
        cr_expect_eq(st.contexts, base.contexts + 1);
        cr_expect_eq(st.queues, base.queues + 1, "the child's SDMA queue");
        cr_expect_eq(st.files, base.files + 2);

        kill(ch.pid, SIGKILL);
        int status;
        cr_assert_eq(waitpid(ch.pid, &status, 0), ch.pid);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        double t0 = now_s();
        cr_assert(stats_wait(d, back_to, &base, &st),
                  "torn down: %u remote, %u mms, %u contexts, %u queues, %u files, %u ioctls", st.remote_processes,
                  st.processes, st.contexts, st.queues, st.files, st.ioctls_in_flight);
        cr_expect_lt(now_s() - t0, 2.0, "promptly");
        cr_expect_eq(test_count_fds(), fds - 1, "the daemon let go of every fd of the process");
        close(ch.test_sock);

        /* The parent's context on the same device still works. */
        GpuBuffer *b = NULL;
        cr_assert_eq(gpu_buffer_new(pc, 4096, GPU_PLACEMENT_GTT, false, &b), 0);
        Comps *cs = calloc(1, sizeof *cs);
        GpuJob fill = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b), .size = 4096, .pattern = 0x77777777u } };
        const GpuCompletion *done = NULL;
        cr_assert_eq(run_job(pc, cs, 0, &fill, &done), 0);
        cr_expect_eq(done->error, 0);
        cr_expect_eq(((uint32_t *) gpu_buffer_get_cpu(b))[1023], 0x77777777u);
        gpu_buffer_unref(b);
        gpu_context_free(pc);
        free(cs);
        sim_device_free(d);
}

/* ---- The daemon shuts down under live processes ---- */

static int child_sleep_then_expect_eof(const KfdOps *ops, int test_sock) {
        RawCtx x;
        raw_open(&x, ops);
        send_byte(test_sock, 'S', -1);
        Waiter w = { .x = &x, .timeout = KFD_EVENT_TIMEOUT_INFINITE };
        w.ev[0].event_id = x.event;
        waiter_main(&w);
        /* The device went (FAIL, -EIO) or took the process with it (-EINTR),
         * or the daemon's end closed before the answer (-ENODEV). */
        CHILD_CHECK(w.r == -EIO || w.r == -EINTR || w.r == -ENODEV, 10, "wait: %d", w.r);
        /* Calls may still be answered while the daemon tears the process
         * down; then its end is gone for good. */
        double deadline = now_s() + 10;
        int r;
        do {
                struct kfd_ioctl_get_version_args v = {};
                r = raw_ioctl(&x, AMDKFD_IOC_GET_VERSION, &v);
                CHILD_CHECK(r == 0 || r == -ENODEV, 11, "GET_VERSION during the teardown: %d", r);
        } while (r == 0 && now_s() < deadline);
        CHILD_CHECK(r == -ENODEV, 12, "after the daemon's end is gone: %d", r);
        return 0;
}

Test(sim_remote, sim_device_free_ends_live_processes, .timeout = 120) {
        Child ch = child_start(child_sleep_then_expect_eof);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        cr_assert_eq(recv_byte(ch.test_sock, NULL), 'S');
        unsigned one = 1;
        cr_assert(stats_wait(d, in_flight, &one, NULL));
        double t0 = now_s();
        sim_device_free(d);
        cr_expect_lt(now_s() - t0, 5.0, "sim_device_free() did not hang on the process");
        child_finish(&ch);
}

/* ---- The topology, for a worker of another user ---- */

static unsigned tree_dirs, tree_files, tree_bad;

static int check_mode(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        mode_t want = type == FTW_D ? 0755 : 0444;
        if (type == FTW_D)
                tree_dirs++;
        else
                tree_files++;
        if ((st->st_mode & 07777) != want) {
                fprintf(stderr, "%s: mode %o, not %o\n", path, (unsigned) (st->st_mode & 07777), (unsigned) want);
                tree_bad++;
        }
        return 0;
}

Test(sim_remote, the_topology_is_readable_by_other_users_whatever_the_umask) {
        mode_t old = umask(077);
        SimDevice *d = NULL;
        int r = sim_device_new(NULL, &d);
        umask(old);
        cr_assert_eq(r, 0);
        tree_dirs = tree_files = tree_bad = 0;
        cr_assert_eq(nftw(sim_device_get_ops(d)->sysfs_root, check_mode, 16, FTW_PHYS), 0);
        cr_expect_geq(tree_dirs, 5u);
        cr_expect_geq(tree_files, 8u);
        cr_expect_eq(tree_bad, 0u, "directories 0755, files 0444 (listed above)");
        sim_device_free(d);
}

/* ---- A hostile process ---- */

/* A process of our own making: the daemon serves one end, the test speaks
 * the wire on the other. */
typedef struct Raw {
        int control;
        int channel;
} Raw;

static int raw_send(int sock, const SimRemoteRequest *req, const void *payload, size_t n, int fd) {
        struct iovec iov[2] = { { .iov_base = (void *) req, .iov_len = sizeof *req },
                                { .iov_base = (void *) payload, .iov_len = n } };
        return sim_remote_send(sock, iov, n ? 2 : 1, fd);
}

/* A driven server (sim_remote_serve_driven()), run before each reply is
 * read; NULL once it ended, or when the server has threads of its own. */
static SimRemoteServer *driven;

/* The reply to a request, or 0 at EOF (the server closed the channel). */
static ssize_t raw_reply(int sock, void *buf, size_t size, int *ret_fd) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        int fd = -1;
        if (driven) {
                int r = sim_remote_server_run(driven);
                cr_assert_geq(r, 0, "sim_remote_server_run: %d", r);
                if (r == 0)
                        driven = NULL;
        }
        cr_assert_eq(poll(&p, 1, 10000), 1, "the server answered nothing within 10 s");
        ssize_t n = sim_remote_recv(sock, buf, size, &fd);
        if (ret_fd)
                *ret_fd = fd;
        else if (fd >= 0)
                close(fd);
        return n;
}

static void raw_expect_eof(int sock, const char *what) {
        uint8_t buf[256];
        cr_expect_eq(raw_reply(sock, buf, sizeof buf, NULL), 0, "the server ended the channel after %s", what);
}

static Raw raw_connect(SimDevice *d, bool hello) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(sim_remote_serve(d, sv[0]), 0);
        Raw r = { .control = sv[1], .channel = -1 };
        if (hello) {
                SimRemoteRequest req = { .op = SIM_REMOTE_OP_HELLO, .fd = -1,
                                         .u64 = { SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32 } };
                uint8_t buf[sizeof(SimRemoteReply) + SIM_REMOTE_MAX_PATH];
                cr_assert_eq(raw_send(r.control, &req, NULL, 0, -1), 0);
                cr_assert_gt(raw_reply(r.control, buf, sizeof buf, NULL), (ssize_t) sizeof(SimRemoteReply));
        }
        return r;
}

/* NEW_CHANNEL: the channel's socket, or the server's errno. */
static int raw_new_channel(Raw *r) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_NEW_CHANNEL, .fd = -1 };
        cr_assert_eq(raw_send(r->control, &req, NULL, 0, sv[1]), 0);
        close(sv[1]);
        SimRemoteReply rep;
        cr_assert_eq(raw_reply(r->control, &rep, sizeof rep, NULL), (ssize_t) sizeof rep);
        if (rep.ret < 0) {
                close(sv[0]);
                return rep.ret;
        }
        return sv[0];
}

/* OPEN_KFD or OPEN_RENDER (of minor) on r's channel: the process's file
 * number (asserted; the copy of the file that comes with it closed). */
static int raw_open_file(Raw *r, uint32_t op, uint64_t minor) {
        SimRemoteRequest req = { .op = op, .fd = -1, .u64 = { minor } };
        SimRemoteReply rep;
        int copy = -1;
        cr_assert_eq(raw_send(r->channel, &req, NULL, 0, -1), 0);
        cr_assert_eq(raw_reply(r->channel, &rep, sizeof rep, &copy), (ssize_t) sizeof rep);
        close(copy);
        cr_assert_geq(rep.ret, 0, "open: %d", rep.ret);
        return rep.ret;
}

static void raw_close(Raw *r) {
        if (r->channel >= 0)
                close(r->channel);
        close(r->control);
}

/* An IOCTL request and its reply's ret (or INT32_MIN at EOF). */
static int raw_ioctl_on(int sock, int fd, unsigned long request, const void *arg, const void *array, size_t array_size,
                        int send_fd, void *ret_arg) {
        uint8_t payload[SIM_REMOTE_MAX_ARG + 1024];
        size_t usize = _IOC_SIZE(request);
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_IOCTL, .fd = fd, .arg_size = (uint32_t) usize,
                                 .u64 = { (uint32_t) request } };
        memcpy(payload, arg, usize);
        if (array_size)
                memcpy(payload + usize, array, array_size);
        cr_assert_eq(raw_send(sock, &req, payload, usize + array_size, send_fd), 0);
        uint8_t buf[SIM_REMOTE_MAX_MESSAGE];
        ssize_t n = raw_reply(sock, buf, sizeof buf, NULL);
        if (n == 0)
                return INT32_MIN;
        cr_assert_geq(n, (ssize_t) sizeof(SimRemoteReply));
        SimRemoteReply rep;
        memcpy(&rep, buf, sizeof rep);
        if (ret_arg && rep.arg_size == usize)
                memcpy(ret_arg, buf + sizeof rep, usize);
        return rep.ret;
}

static bool one_remote(const SimDeviceStats *st, const void *arg) {
        return st->remote_processes == 1;
}

static unsigned count_threads(void) {
        DIR *dir = opendir("/proc/self/task");
        struct dirent *de;
        unsigned n = 0;
        cr_assert_not_null(dir);
        while ((de = readdir(dir)))
                n += de->d_name[0] != '.';
        closedir(dir);
        return n;
}

static unsigned driven_ends;

static void on_driven_end(void *userdata) {
        driven_ends++;
}

/* A driven server (the fuzz target's) serves the same wire on its caller's
 * thread: no thread of its own, the handshake, channels, a request, a
 * malformed one ending its channel only, and at the control socket's EOF the
 * same teardown, end() once. */
Test(sim_remote, a_driven_server_serves_on_the_callers_thread, .timeout = 60) {
        static const SimRemoteHooks hooks = { .end = on_driven_end };
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        unsigned fds = test_count_fds(), threads = count_threads();
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        driven_ends = 0;
        cr_assert_eq(sim_remote_serve_driven(d, sv[0], &hooks, NULL, &driven), 0);
        Raw r = { .control = sv[1], .channel = -1 };
        SimRemoteRequest hello = { .op = SIM_REMOTE_OP_HELLO, .fd = -1,
                                   .u64 = { SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32 } };
        uint8_t buf[sizeof(SimRemoteReply) + SIM_REMOTE_MAX_PATH];
        cr_assert_eq(raw_send(r.control, &hello, NULL, 0, -1), 0);
        cr_assert_gt(raw_reply(r.control, buf, sizeof buf, NULL), (ssize_t) sizeof(SimRemoteReply));

        r.channel = raw_new_channel(&r);
        cr_assert_geq(r.channel, 0);
        SimRemoteRequest open_req = { .op = SIM_REMOTE_OP_OPEN_KFD, .fd = -1 };
        SimRemoteReply rep;
        int kfd_copy = -1;
        cr_assert_eq(raw_send(r.channel, &open_req, NULL, 0, -1), 0);
        cr_assert_eq(raw_reply(r.channel, &rep, sizeof rep, &kfd_copy), (ssize_t) sizeof rep);
        cr_assert_geq(rep.ret, 0, "OPEN_KFD: %d", rep.ret);
        close(kfd_copy);
        int kfd = rep.ret;
        struct kfd_ioctl_get_version_args v = {};
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_GET_VERSION, &v, NULL, 0, -1, &v), 0);
        cr_expect_eq(v.minor_version, SIM_DEFAULT_KFD_MINOR);
        cr_expect_eq(count_threads(), threads, "the driven server made no thread");

        cr_assert_eq(sim_remote_send(r.channel, &(struct iovec) { .iov_base = "abc", .iov_len = 3 }, 1, -1), 0);
        raw_expect_eof(r.channel, "a truncated request");
        close(r.channel);
        r.channel = raw_new_channel(&r);
        cr_assert_geq(r.channel, 0, "the process outlived its channel's end");
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_GET_VERSION, &v, NULL, 0, -1, &v), 0);

        raw_close(&r);
        cr_assert_not_null(driven);
        cr_expect_eq(sim_remote_server_run(driven), 0, "the control socket's EOF ends the process");
        driven = NULL;
        cr_expect_eq(driven_ends, 1u);
        SimDeviceStats st;
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.remote_processes, 0u);
        cr_expect_eq(test_count_fds(), fds, "no fd left behind");
        sim_device_free(d);
}

Test(sim_remote, garbage_before_the_handshake_ends_the_process) {
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        unsigned fds = test_count_fds();

        Raw r = raw_connect(d, false);
        uint8_t junk[100];
        for (unsigned i = 0; i < sizeof junk; i++)
                junk[i] = pattern_byte(i, 1);
        cr_assert_eq(sim_remote_send(r.control, &(struct iovec) { .iov_base = junk, .iov_len = sizeof junk }, 1, -1), 0);
        raw_expect_eof(r.control, "garbage in place of HELLO");
        raw_close(&r);

        /* A HELLO of another version is answered, then the process ends. */
        r = raw_connect(d, false);
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_HELLO, .fd = -1, .u64 = { SIM_REMOTE_MAGIC | 99ull << 32 } };
        cr_assert_eq(raw_send(r.control, &req, NULL, 0, -1), 0);
        SimRemoteReply rep;
        cr_assert_eq(raw_reply(r.control, &rep, sizeof rep, NULL), (ssize_t) sizeof rep);
        cr_expect_eq(rep.ret, -EPROTONOSUPPORT);
        raw_expect_eof(r.control, "a HELLO of version 99");
        raw_close(&r);
        /* Nor version 1, whose ends carried an argument in the direction of
         * the caller's word. */
        r = raw_connect(d, false);
        req.u64[0] = SIM_REMOTE_MAGIC | 1ull << 32;
        cr_assert_eq(raw_send(r.control, &req, NULL, 0, -1), 0);
        cr_assert_eq(raw_reply(r.control, &rep, sizeof rep, NULL), (ssize_t) sizeof rep);
        cr_expect_eq(rep.ret, -EPROTONOSUPPORT);
        raw_expect_eof(r.control, "a HELLO of version 1");
        raw_close(&r);

        /* A client finds an answer it cannot read a protocol error. */
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
        cr_assert_eq(sim_remote_send(sv[0], &(struct iovec) { .iov_base = junk, .iov_len = 10 }, 1, -1), 0);
        const KfdOps *ops = NULL;
        cr_expect_eq(sim_remote_ops_new(sv[1], &ops), -EPROTO, "a peer that is no sim-remote server");
        close(sv[0]);

        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        cr_expect_eq(test_count_fds(), fds, "no fd left behind");
        sim_device_free(d);
}

Test(sim_remote, malformed_requests_end_the_channel_not_the_daemon, .timeout = 60) {
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        unsigned fds = test_count_fds();
        Raw r = raw_connect(d, true);

        /* Shorter than a request. */
        r.channel = raw_new_channel(&r);
        cr_assert_geq(r.channel, 0);
        cr_assert_eq(sim_remote_send(r.channel, &(struct iovec) { .iov_base = "abc", .iov_len = 3 }, 1, -1), 0);
        raw_expect_eof(r.channel, "a truncated request");
        close(r.channel);

        /* The process lives on: a new channel works. */
        r.channel = raw_new_channel(&r);
        cr_assert_geq(r.channel, 0);
        SimRemoteRequest open_req = { .op = SIM_REMOTE_OP_OPEN_KFD, .fd = -1 };
        cr_assert_eq(raw_send(r.channel, &open_req, NULL, 0, -1), 0);
        SimRemoteReply rep;
        int kfd_copy = -1;
        cr_assert_eq(raw_reply(r.channel, &rep, sizeof rep, &kfd_copy), (ssize_t) sizeof rep);
        cr_assert_geq(rep.ret, 0, "OPEN_KFD: %d", rep.ret);
        cr_expect_geq(kfd_copy, 0, "a copy of the file came along");
        close(kfd_copy);
        int kfd = rep.ret;
        struct kfd_ioctl_get_version_args v = {};
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_GET_VERSION, &v, NULL, 0, -1, &v), 0);
        cr_expect_eq(v.minor_version, SIM_DEFAULT_KFD_MINOR);

        /* DOORBELL of a queue that does not exist, or on a file that is not
         * the process's: nothing happens and the channel goes on, as a store
         * to an unused doorbell does nothing. A queue id past 32 bits ends it. */
        SimRemoteRequest db[] = {
                { .op = SIM_REMOTE_OP_DOORBELL, .fd = kfd, .u64 = { 5 } },
                { .op = SIM_REMOTE_OP_DOORBELL, .fd = kfd, .u64 = { UINT32_MAX } },
                { .op = SIM_REMOTE_OP_DOORBELL, .fd = 1000, .u64 = { 0 } },
                { .op = SIM_REMOTE_OP_DOORBELL, .fd = -1, .u64 = { 0 } },
        };
        for (size_t i = 0; i < sizeof db / sizeof db[0]; i++) {
                cr_assert_eq(raw_send(r.channel, &db[i], NULL, 0, -1), 0);
                cr_expect_eq(raw_reply(r.channel, &rep, sizeof rep, NULL), (ssize_t) sizeof rep, "DOORBELL %zu", i);
                cr_expect_eq(rep.ret, 0, "DOORBELL %zu", i);
        }
        SimRemoteRequest db_bad = { .op = SIM_REMOTE_OP_DOORBELL, .fd = kfd, .u64 = { 1ull << 32 } };
        cr_assert_eq(raw_send(r.channel, &db_bad, NULL, 0, -1), 0);
        raw_expect_eof(r.channel, "a DOORBELL queue id past 32 bits");
        close(r.channel);
        r.channel = raw_new_channel(&r);
        cr_assert_geq(r.channel, 0);

        /* A WAIT_EVENTS of 2^32-1 events with none attached. */
        struct kfd_ioctl_wait_events_args w = { .events_ptr = 0x1000, .num_events = 0xFFFFFFFFu, .timeout = 0 };
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_WAIT_EVENTS, &w, NULL, 0, -1, NULL), INT32_MIN,
                     "a huge num_events ends the channel");
        close(r.channel);

        /* Two events announced, one sent. */
        r.channel = raw_new_channel(&r);
        struct kfd_event_data ev[1] = { { .event_id = 1 } };
        w = (struct kfd_ioctl_wait_events_args) { .events_ptr = 0x1000, .num_events = 2, .timeout = 0 };
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_WAIT_EVENTS, &w, ev, sizeof ev, -1, NULL), INT32_MIN,
                     "an array shorter than its count ends the channel");
        close(r.channel);

        /* An fd where none belongs: the channel ends and the daemon does not keep it. */
        r.channel = raw_new_channel(&r);
        int pfd[2];
        cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_GET_VERSION, &v, NULL, 0, pfd[1], NULL), INT32_MIN,
                     "an fd with GET_VERSION ends the channel");
        close(pfd[1]);
        char c;
        struct pollfd p = { .fd = pfd[0], .events = POLLIN };
        cr_expect_eq(poll(&p, 1, 5000), 1);
        cr_expect_eq(read(pfd[0], &c, 1), 0, "the daemon closed its copy of the pipe");
        close(pfd[0]);
        close(r.channel);

        /* A message larger than any request. */
        r.channel = raw_new_channel(&r);
        size_t big = SIM_REMOTE_MAX_MESSAGE + 4096;
        void *junk = calloc(1, big);
        cr_assert_eq(sim_remote_send(r.channel, &(struct iovec) { .iov_base = junk, .iov_len = big }, 1, -1), 0);
        free(junk);
        raw_expect_eof(r.channel, "an oversized message");
        close(r.channel);

        /* An unknown op; a NEW_CHANNEL on a channel. */
        r.channel = raw_new_channel(&r);
        SimRemoteRequest odd = { .op = 77, .fd = -1 };
        cr_assert_eq(raw_send(r.channel, &odd, NULL, 0, -1), 0);
        raw_expect_eof(r.channel, "op 77");
        close(r.channel);
        r.channel = -1;

        cr_expect(stats_wait(d, one_remote, NULL, NULL), "the process survived its broken channels");
        /* An fd that is not a SEQPACKET socket as a channel ends the process. */
        cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
        SimRemoteRequest nc = { .op = SIM_REMOTE_OP_NEW_CHANNEL, .fd = -1 };
        cr_assert_eq(raw_send(r.control, &nc, NULL, 0, pfd[0]), 0);
        raw_expect_eof(r.control, "a pipe as a channel");
        close(pfd[0]);
        close(pfd[1]);
        raw_close(&r);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        SimDeviceStats st;
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.files, 0u, "the process's KFD file was closed");
        cr_expect_eq(test_count_fds(), fds, "no fd left behind");
        sim_device_free(d);
}

/* An IOCTL's reply: its header, and the argument back in ret_arg. */
static SimRemoteReply raw_ioctl_reply(int sock, int fd, unsigned long request, const void *arg, const void *array,
                                      size_t array_size, void *ret_arg) {
        uint8_t payload[SIM_REMOTE_MAX_ARG + 1024], buf[SIM_REMOTE_MAX_MESSAGE];
        size_t usize = _IOC_SIZE(request);
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_IOCTL, .fd = fd, .arg_size = (uint32_t) usize,
                                 .u64 = { (uint32_t) request } };
        SimRemoteReply rep = { .ret = INT32_MIN };

        memcpy(payload, arg, usize);
        if (array_size)
                memcpy(payload + usize, array, array_size);
        cr_assert_eq(raw_send(sock, &req, payload, usize + array_size, -1), 0);
        ssize_t n = raw_reply(sock, buf, sizeof buf, NULL);
        cr_assert_geq(n, (ssize_t) sizeof rep, "an answer (not the channel's end)");
        memcpy(&rep, buf, sizeof rep);
        cr_assert_leq(rep.arg_size, (size_t) n - sizeof rep);
        memcpy(ret_arg, buf + sizeof rep, rep.arg_size);
        return rep;
}

/* The server reads the argument and gives it back in the KFD's direction
 * for the number (kfd_ioctl's own table), not the request word's. */
Test(sim_remote, the_argument_travels_in_the_kernels_direction, .timeout = 60) {
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        Raw r = raw_connect(d, true);
        r.channel = raw_new_channel(&r);
        cr_assert_geq(r.channel, 0);
        int kfd = raw_open_file(&r, SIM_REMOTE_OP_OPEN_KFD, 0);
        SimRemoteReply rep;

        /* GET_VERSION copies out only: an _IOW word of it has the version
         * back, whatever bytes came with it. */
        struct kfd_ioctl_get_version_args v = { .major_version = 77, .minor_version = 77 }, got = {};
        rep = raw_ioctl_reply(r.channel, kfd, _IOW('K', 0x01, struct kfd_ioctl_get_version_args), &v, NULL, 0, &got);
        cr_expect_eq(rep.ret, 0);
        cr_expect_eq(rep.arg_size, sizeof got, "the argument back");
        cr_expect_eq(got.major_version, 1u);
        cr_expect_eq(got.minor_version, 19u);

        /* DESTROY_EVENT copies in only: nothing back for an _IOWR word. */
        struct kfd_ioctl_destroy_event_args de = { .event_id = 4242 };
        rep = raw_ioctl_reply(r.channel, kfd, _IOWR('K', 0x09, struct kfd_ioctl_destroy_event_args), &de, NULL, 0, &got);
        cr_expect_eq(rep.ret, -EINVAL, "no such event");
        cr_expect_eq(rep.arg_size, 0u, "no argument back");

        /* UNMAP copies in and out: an _IOR word of it is read — its pointer
         * and count ask for the array that comes with it — and given back. */
        uint32_t ids[1] = { 0x697D };
        struct kfd_ioctl_unmap_memory_from_gpu_args um = {
                .handle = 0x697D00000077ull, .device_ids_array_ptr = 0x1234000, .n_devices = 1 }, umgot = {};
        rep = raw_ioctl_reply(r.channel, kfd, _IOR('K', 0x19, struct kfd_ioctl_unmap_memory_from_gpu_args), &um, ids,
                              sizeof ids, &umgot);
        /* Its count, pointer and handle were read: the handle's GPU is
         * known and has no VM yet (zeros would be n_devices 0: -EINVAL). */
        cr_expect_eq(rep.ret, -ENODEV, "%d", rep.ret);
        cr_expect_eq(rep.arg_size, sizeof umgot);
        cr_expect_eq(umgot.device_ids_array_ptr, 0x1234000u, "the client's pointer back");
        cr_expect_eq(umgot.handle, um.handle);

        raw_close(&r);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        sim_device_free(d);
}

Test(sim_remote, a_process_reaches_only_its_own_files, .timeout = 60) {
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        /* The daemon's own process: a context with a buffer exported as a dma-buf. */
        GpuContext *pc = NULL;
        cr_assert_eq(gpu_context_new(sim_device_get_ops(d), NULL, &pc), 0);
        GpuBuffer *secret = NULL;
        cr_assert_eq(gpu_buffer_new(pc, 4096, GPU_PLACEMENT_GTT, false, &secret), 0);
        int dmabuf = -1;
        cr_assert_eq(gpu_buffer_export(secret, &dmabuf), 0);
        const KfdOps *own = sim_device_get_ops(d);
        int own_kfd = own->open_kfd(own->userdata);
        cr_assert_geq(own_kfd, 0);
        unsigned fds = test_count_fds();

        Raw r = raw_connect(d, true);
        r.channel = raw_new_channel(&r);
        cr_assert_geq(r.channel, 0);
        int kfd = raw_open_file(&r, SIM_REMOTE_OP_OPEN_KFD, 0);
        int render = raw_open_file(&r, SIM_REMOTE_OP_OPEN_RENDER, 128);
        SimRemoteReply rep;

        /* The daemon's own KFD fd, named by number: not this process's. */
        struct kfd_ioctl_get_version_args v = {};
        cr_expect_eq(raw_ioctl_on(r.channel, own_kfd, AMDKFD_IOC_GET_VERSION, &v, NULL, 0, -1, NULL), -EBADF);
        SimRemoteRequest mm = { .op = SIM_REMOTE_OP_MMAP, .fd = own_kfd, .u64 = { 8192, 0xC000000000000000ull } };
        cr_assert_eq(raw_send(r.channel, &mm, NULL, 0, -1), 0);
        cr_assert_eq(raw_reply(r.channel, &rep, sizeof rep, NULL), (ssize_t) sizeof rep);
        cr_expect_eq(rep.ret, -EBADF, "MMAP of another process's fd");
        SimRemoteRequest cl = { .op = SIM_REMOTE_OP_CLOSE, .fd = own_kfd };
        cr_assert_eq(raw_send(r.channel, &cl, NULL, 0, -1), 0);
        cr_assert_eq(raw_reply(r.channel, &rep, sizeof rep, NULL), (ssize_t) sizeof rep);
        cr_expect_eq(rep.ret, -EBADF, "CLOSE of another process's fd");
        cr_expect_eq(kfd_ioctl(own, own_kfd, AMDKFD_IOC_GET_VERSION, &v), 0, "which is still open");

        /* The daemon's render fd as this process's VM: not its file either. */
        int own_render = own->open_render(own->userdata, 128);
        cr_assert_geq(own_render, 0);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) own_render, .gpu_id = GPU_ID };
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm, NULL, 0, -1, NULL), -EINVAL);
        vm.drm_fd = (uint32_t) render;
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm, NULL, 0, -1, NULL), 0);

        /* The daemon's dma-buf, named by number and not sent: nothing. */
        struct kfd_ioctl_import_dmabuf_args im = { .va_addr = 0x100000000ull, .gpu_id = GPU_ID, .dmabuf_fd = (uint32_t) dmabuf };
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_IMPORT_DMABUF, &im, NULL, 0, -1, NULL), -EBADF,
                     "a dma-buf is reached only through an fd the process sends");
        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) dmabuf };
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_GET_DMABUF_INFO, &info, NULL, 0, -1, NULL), -EBADF);
        /* Sent, it is the process's to import. */
        cr_expect_eq(raw_ioctl_on(r.channel, kfd, AMDKFD_IOC_IMPORT_DMABUF, &im, NULL, 0, dmabuf, &im), 0);
        cr_expect_neq(im.handle, 0u);
        cr_expect_eq(im.dmabuf_fd, (uint32_t) dmabuf, "the process's own number comes back");

        /* Pointers the process names are never read in the daemon: the
         * apertures go to a buffer of the server's and come back in the reply. */
        struct kfd_ioctl_get_process_apertures_new_args ap = { .kfd_process_device_apertures_ptr = 0x10, .num_of_nodes = 4 };
        uint8_t buf[SIM_REMOTE_MAX_MESSAGE];
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_IOCTL, .fd = kfd, .arg_size = sizeof ap,
                                 .u64 = { AMDKFD_IOC_GET_PROCESS_APERTURES_NEW } };
        cr_assert_eq(raw_send(r.channel, &req, &ap, sizeof ap, -1), 0);
        ssize_t n = raw_reply(r.channel, buf, sizeof buf, NULL);
        cr_assert_eq(n, (ssize_t) (sizeof rep + sizeof ap + sizeof(struct kfd_process_device_apertures)));
        memcpy(&rep, buf, sizeof rep);
        memcpy(&ap, buf + sizeof rep, sizeof ap);
        struct kfd_process_device_apertures one;
        memcpy(&one, buf + sizeof rep + sizeof ap, sizeof one);
        cr_expect_eq(rep.ret, 0);
        cr_expect_eq(ap.num_of_nodes, 1u);
        cr_expect_eq(ap.kfd_process_device_apertures_ptr, 0x10u, "no daemon address in the reply");
        cr_expect_eq(one.gpu_id, GPU_ID);

        /* Ioctls the simulator runs but the wire does not know are refused. */
        for (unsigned nr = 0; nr < 0x100; nr++)
                cr_expect(!sim_device_ioctl_simulated(nr) ||
                                  sim_remote_ioctl_kind(_IOWR('K', nr, uint64_t)) != SIM_REMOTE_IOCTL_REFUSED,
                          "ioctl 0x%x is simulated but sim-remote cannot carry it", nr);

        /* 64 channels at most. */
        int extra[SIM_REMOTE_MAX_CHANNELS];
        unsigned n_extra = 0;
        int k;
        while ((k = raw_new_channel(&r)) >= 0 && n_extra < SIM_REMOTE_MAX_CHANNELS)
                extra[n_extra++] = k;
        cr_expect_eq(k, -EMFILE, "past the bound: %d", k);
        cr_expect_eq(n_extra, SIM_REMOTE_MAX_CHANNELS - 1, "one is open already");
        for (unsigned i = 0; i < n_extra; i++)
                close(extra[i]);

        raw_close(&r);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        cr_expect_eq(test_count_fds(), fds + 1, "no fd of the process left (own_render is new)");
        own->close(own->userdata, own_render);
        own->close(own->userdata, own_kfd);
        close(dmabuf);
        gpu_buffer_unref(secret);
        gpu_context_free(pc);
        sim_device_free(d);
}

/* ---- Two GPUs ---- */

/* The gpu_id of topology node `node` of the table's sysfs tree, 0 if none. */
static uint32_t topology_gpu_id(const KfdOps *ops, unsigned node) {
        char path[4096];
        unsigned v = 0;
        snprintf(path, sizeof path, "%s/topology/nodes/%u/gpu_id", ops->sysfs_root, node);
        FILE *f = fopen(path, "re");
        if (!f)
                return 0;
        if (fscanf(f, "%u", &v) != 1)
                v = 0;
        fclose(f);
        return v;
}

/* A worker process (the proxy worker of a KFD 1.18 daemon) drives GPU 1 of a
 * two-GPU device: a fill there, then a fault there, which loses its context. */
static int child_gpu1(const KfdOps *ops, int test_sock) {
        GpuContextOptions o = { .gpu_id = topology_gpu_id(ops, 2), .flags = GPU_CONTEXT_NO_COMPUTE };
        GpuContext *c = NULL;
        Comps *cs = calloc(1, sizeof *cs);
        CHILD_CHECK(o.gpu_id != 0 && o.gpu_id != GPU_ID, 10, "GPU 1's id: 0x%x", o.gpu_id);
        int r = gpu_context_new(ops, &o, &c);
        CHILD_CHECK(r == 0, 11, "gpu_context_new on GPU 1: %s", strerror(-r));
        CHILD_CHECK(gpu_context_get_info(c)->gpu_id == o.gpu_id, 12, "on 0x%x", gpu_context_get_info(c)->gpu_id);
        GpuBuffer *b = NULL, *page = NULL;
        CHILD_CHECK(gpu_buffer_new(c, 65536, GPU_PLACEMENT_GTT, false, &b) == 0, 13, "buffer");
        CHILD_CHECK(gpu_buffer_new(c, 4096, GPU_PLACEMENT_GTT, false, &page) == 0, 13, "buffer");
        GpuJob fill = { .type = GPU_JOB_FILL, .fill = { .dst_va = gpu_buffer_get_va(b), .size = 65536, .pattern = 0x61616161u } };
        const GpuCompletion *done = NULL;
        r = run_job(c, cs, 0, &fill, &done);
        CHILD_CHECK(r == 0 && done->error == 0, 14, "fill on GPU 1: %s", strerror(-r));
        CHILD_CHECK(((uint8_t *) gpu_buffer_get_cpu(b))[65535] == 0x61, 15, "filled");
        GpuJob bad = { .type = GPU_JOB_COPY,
                       .copy = { .src_va = 0x00000c0000000000ull, .dst_va = gpu_buffer_get_va(b), .size = 4096 } };
        r = run_job(c, cs, 1, &bad, &done);
        CHILD_CHECK(r == 0 && done->error == -EFAULT, 16, "the fault on GPU 1: %s, %d", strerror(-r),
                    r == 0 ? done->error : 0);
        CHILD_CHECK(gpu_context_is_lost(c, NULL), 17, "the context is lost");
        send_byte(test_sock, 'F', -1);
        CHILD_CHECK(recv_byte(test_sock, NULL) == 'K', 18, "parent's go");
        gpu_buffer_unref(b);
        gpu_buffer_unref(page);
        gpu_context_free(c);
        free(cs);
        return 0;
}

/* SimOptions.n_gpus = 2 with both context mechanisms: a worker process's
 * context on GPU 1 faults; the daemon's own context on GPU 0 and a secondary
 * context of the daemon on GPU 1 run on. */
Test(sim_remote, a_worker_on_gpu1_faults_beside_contexts_on_both_gpus, .timeout = 120) {
        Child ch = child_start(child_gpu1);
        SimOptions so = { .n_gpus = 2 };
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(&so, &d), 0);
        const KfdOps *ops = sim_device_get_ops(d);
        GpuContext *pc[2] = {};
        GpuContextOptions o[2] = { { .flags = GPU_CONTEXT_NO_COMPUTE },
                                   { .flags = GPU_CONTEXT_NO_COMPUTE | GPU_CONTEXT_SECONDARY,
                                     .gpu_id = topology_gpu_id(ops, 2) } };
        for (unsigned i = 0; i < 2; i++)
                cr_assert_eq(gpu_context_new(ops, &o[i], &pc[i]), 0, "context on GPU %u", i);
        cr_expect_eq(gpu_context_get_info(pc[0])->gpu_id, GPU_ID);
        cr_expect_eq(gpu_context_get_info(pc[1])->gpu_id, o[1].gpu_id);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        cr_assert_eq(recv_byte(ch.test_sock, NULL), 'F', "the child saw its fault");

        Comps *cs = calloc(1, sizeof *cs);
        for (unsigned i = 0; i < 2; i++) {
                GpuBuffer *b = NULL;
                cr_assert_eq(gpu_buffer_new(pc[i], 65536, GPU_PLACEMENT_GTT, false, &b), 0);
                GpuJob fill = { .type = GPU_JOB_FILL,
                                .fill = { .dst_va = gpu_buffer_get_va(b), .size = 65536, .pattern = 0x01010101u * (i + 1) } };
                const GpuCompletion *done = NULL;
                memset(cs, 0, sizeof *cs);
                cr_assert_eq(run_job(pc[i], cs, 0, &fill, &done), 0, "the context on GPU %u ran", i);
                cr_expect_eq(done->error, 0);
                cr_expect_eq(((uint8_t *) gpu_buffer_get_cpu(b))[65535], i + 1);
                cr_expect_not(gpu_context_is_lost(pc[i], NULL));
                gpu_buffer_unref(b);
        }
        SimGpuStats g1;
        cr_assert_eq(sim_device_get_gpu_stats(d, 1, &g1), 0);
        cr_expect_geq(g1.queues, 4u, "the worker's and the secondary context's queues on GPU 1");
        send_byte(ch.test_sock, 'K', -1);
        child_finish(&ch);
        cr_expect(stats_wait(d, no_remote_process, NULL, NULL));
        for (unsigned i = 0; i < 2; i++)
                gpu_context_free(pc[i]);
        free(cs);
        sim_device_free(d);
}

/* ---- What libdrm asks of the render node, over the wire ---- */

static int child_render_info(const KfdOps *ops, int test_sock) {
        int render = ops->open_render(ops->userdata, 128);
        struct drm_version v = {};
        char name[3] = { 'x', 'x', 'x' }, desc[64] = "";
        uint8_t part[64];
        uint32_t u32 = 0;

        CHILD_CHECK(render >= 0, 1, "open_render: %s", strerror(-render));
        CHILD_CHECK(kfd_ioctl(ops, render, DRM_IOCTL_VERSION, &v) == 0, 2, "VERSION for the lengths");
        CHILD_CHECK(v.version_major == 3 && v.name_len == 6 && v.desc_len == 7 && !v.name, 3, "lengths %zu %zu",
                    (size_t) v.name_len, (size_t) v.desc_len);
        v = (struct drm_version) { .name = name, .name_len = 2, .desc = desc, .desc_len = sizeof desc };
        CHILD_CHECK(kfd_ioctl(ops, render, DRM_IOCTL_VERSION, &v) == 0, 4, "VERSION");
        CHILD_CHECK(name[0] == 'a' && name[1] == 'm' && name[2] == 'x', 5, "two bytes of the name and no more");
        CHILD_CHECK(v.name == name && v.desc == desc && v.name_len == 6, 6, "the caller's pointers, the whole lengths");
        CHILD_CHECK(strcmp(desc, "AMD GPU") == 0, 7, "desc %s", desc);
        v = (struct drm_version) { .name_len = 4 };
        CHILD_CHECK(kfd_ioctl(ops, render, DRM_IOCTL_VERSION, &v) == -EFAULT, 8, "a length without a buffer");

        /* The answer reaches only return_size bytes, and only those the
         * kernel writes: the rest of the caller's buffer stays its own. */
        memset(part, 0xab, sizeof part);
        struct drm_amdgpu_info a = { .return_pointer = (uint64_t) (uintptr_t) part, .return_size = sizeof part,
                                     .query = AMDGPU_INFO_ACCEL_WORKING };
        CHILD_CHECK(kfd_ioctl(ops, render, DRM_IOCTL_AMDGPU_INFO, &a) == 0, 9, "ACCEL_WORKING");
        memcpy(&u32, part, 4);
        CHILD_CHECK(u32 == 1 && part[4] == 0xab && part[63] == 0xab, 10, "four bytes written, the rest kept");
        struct drm_amdgpu_info_device dev = {};
        a = (struct drm_amdgpu_info) { .return_pointer = (uint64_t) (uintptr_t) &dev, .return_size = sizeof dev,
                                       .query = AMDGPU_INFO_DEV_INFO };
        CHILD_CHECK(kfd_ioctl(ops, render, DRM_IOCTL_AMDGPU_INFO, &a) == 0, 11, "DEV_INFO");
        CHILD_CHECK(dev.family == AMDGPU_FAMILY_NV && dev.device_id == 0x73BF, 12, "family %u", dev.family);
        a = (struct drm_amdgpu_info) { .return_size = 4, .query = AMDGPU_INFO_ACCEL_WORKING };
        CHILD_CHECK(kfd_ioctl(ops, render, DRM_IOCTL_AMDGPU_INFO, &a) == -EINVAL, 13, "no return pointer");
        (void) test_sock;
        ops->close(ops->userdata, render);
        return 0;
}

Test(sim_remote, the_render_node_answers_what_libdrm_asks, .timeout = 120) {
        /* The child first: forked beside the device's engine threads (which
         * allocate as they start), it could inherit ASan's allocator lock
         * held and hang in its exit's leak check. */
        Child ch = child_start(child_render_info);
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        cr_assert_eq(sim_remote_serve(d, ch.sock), 0);
        child_finish(&ch);
        sim_device_free(d);
}
