/* SPDX-License-Identifier: MIT */
/*
 * GPU contexts per client, from the outside, with both mechanisms — secondary
 * KFD contexts (the simulated KFD at uapi 1.19) and worker processes (at
 * 1.18, as on the kernels people run today): a client's kernel cannot reach
 * another client's buffers, a fault stops only the client that made it, even
 * under load from others; a killed worker fails only its client's jobs, and a
 * killed daemon leaves no worker behind; sessions of one identity share a
 * context with Isolation=identity; the context limit says what it is; idle
 * contexts are given up and made again; in shared mode (--contexts=shared)
 * the daemon says so and lets only ComputeDispatch=yes dispatch.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;
static char policydir[64];
static bool running;

/* The worker-process mechanism: a kernel without secondary contexts. */
static const char *const worker_mode[] = { "--sim-kfd-version=1.18", NULL };

/* Starts the daemon with extra options and, when policy is not NULL, a policy
 * file of its own (read after the harness's grant, so it overrides it). */
static void start(const char *policy, const char *const *extra) {
        const char *args[12] = {};
        char arg[128], path[160];
        unsigned n = 0;

        compute_require_kernels();
        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        if (policy) {
                FILE *f;

                snprintf(path, sizeof(path), "%s/50-test.conf", policydir);
                f = fopen(path, "we");
                cr_assert(f);
                fputs(policy, f);
                fclose(f);
        }
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policydir);
        args[n++] = arg;
        for (unsigned i = 0; extra && extra[i] && n < 11; i++)
                args[n++] = extra[i];
        test_daemon_start(&d, args);
        running = true;
}

static void teardown_daemon(void) {
        char cmd[128];

        if (!running)
                return;
        test_daemon_fini(&d);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        running = false;
}

static void teardown(void) {
        teardown_daemon();
        test_fini_end();
}

TestSuite(isolation, .fini = teardown, .timeout = 300);

static kfdb_session *connect_session(const char *name) {
        kfdb_session *s = NULL;
        int r = kfdb_session_new(d.sock, name, &s);

        cr_assert_eq(r, 0, "%s: %s", name, strerror(-r));
        return s;
}

/*
 * Addresses at which the daemon maps the memory behind a buffer (its mappings
 * of the buffer's memfd, from /proc/PID/maps): among them the buffer's GPU
 * address in the daemon's own context, where CPU and GPU addresses are the
 * same.
 */
static unsigned daemon_addresses_of(const kfdb_buffer *b, uint64_t *ret, unsigned max) {
        char path[64], line[512];
        struct stat st;
        unsigned n = 0;
        FILE *f;

        cr_assert_eq(fstat(kfdb_buffer_get_fd(b), &st), 0);
        snprintf(path, sizeof(path), "/proc/%d/maps", (int) d.pid);
        f = fopen(path, "re");
        cr_assert_not_null(f);
        while (fgets(line, sizeof(line), f) && n < max) {
                unsigned long long lo, hi, off, ino;
                char perms[8], dev[16];

                if (sscanf(line, "%llx-%llx %7s %llx %15s %llu", &lo, &hi, perms, &off, dev, &ino) == 6 &&
                    ino == (unsigned long long) st.st_ino && strstr(line, "memfd:"))
                        ret[n++] = lo;
        }
        fclose(f);
        return n;
}

/* The GPU address buffer b has in its owner's own GPU context: what a kernel
 * of that client sees (tests/kernels/address.cl). */
static uint64_t own_address_of(kfdb_session *s, kfdb_buffer *b) {
        kfdb_code_object *co = load_kernel(s, "address");
        uint64_t *out, addr;
        uint32_t one = 1;
        kfdb_buffer *bo = new_buffer(s, 4096, 0, (void **) &out);
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_buffer(bo, 0) };

        run_dispatch(s, co, "address", 1, &one, &one, args, 2);
        addr = out[0];
        kfdb_buffer_free(bo);
        kfdb_code_object_free(co);
        return addr;
}

/* The worker process of the one client context of kind "session" that s's
 * daemon lists with the given user count, or 0. */
static pid_t worker_of_only_session_context(kfdb_session *s) {
        kfdb_gpu_context list[8];
        kfdb_gpu_contexts cs;
        pid_t pid = 0;

        cr_assert_eq(kfdb_gpu_contexts_get(s, &cs, list, 8), 0);
        for (size_t i = 0; i < cs.n && i < 8; i++)
                if (strcmp(list[i].kind, "session") == 0 && list[i].live)
                        pid = (pid_t) list[i].pid;
        return pid;
}

/* Runs poke(addr, value, n, out) and returns the job's result (0 or -errno). */
static int poke(kfdb_session *s, const kfdb_code_object *co, uint64_t addr, uint32_t value, uint32_t n,
                kfdb_buffer *out) {
        uint32_t block = 64;
        kfdb_arg args[] = { kfdb_arg_value(&addr, 8), kfdb_arg_value(&value, 4), kfdb_arg_value(&n, 4),
                            kfdb_arg_buffer(out, 0) };
        kfdb_batch *b = NULL;
        uint64_t fence;
        int r;

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_dispatch(b, co, "poke", 1, &n, &block, args, 4), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_batch_submit(b, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        r = kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS);
        kfdb_batch_free(b);
        return r;
}

/* saxpy over n floats in s: y = 2 x + y with known inputs, checked. */
static void saxpy_checked(kfdb_session *s, const kfdb_code_object *co, uint32_t n, uint32_t seed) {
        float *x, *y, a = 2.0f;
        uint32_t block = 128;
        kfdb_buffer *bx = new_buffer(s, n * 4, 0, (void **) &x);
        kfdb_buffer *by = new_buffer(s, n * 4, 0, (void **) &y);

        for (uint32_t i = 0; i < n; i++) {
                x[i] = (float) (i + seed);
                y[i] = (float) (i % 7);
        }
        kfdb_arg args[] = { kfdb_arg_value(&a, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                            kfdb_arg_value(&n, 4) };
        run_dispatch(s, co, "saxpy", 1, &n, &block, args, 4);
        for (uint32_t i = 0; i < n; i++)
                cr_assert_eq(y[i], fmaf(2.0f, (float) (i + seed), (float) (i % 7)), "y[%u] = %g", i, (double) y[i]);
        kfdb_buffer_free(bx);
        kfdb_buffer_free(by);
}

static bool pattern_intact(const uint32_t *p, size_t words, uint32_t magic) {
        for (size_t i = 0; i < words; i++)
                if (p[i] != (magic ^ (uint32_t) i))
                        return false;
        return true;
}

/*
 * The cross-client probe. B's buffer holds a pattern. A's kernel reads and
 * writes at every address where the daemon maps B's memory — among them B's
 * GPU address in the daemon's context, which a kernel running there (shared
 * mode) would reach. Each attempt faults in A's own context: A's job gets
 * EFAULT and its context is lost; B's data is untouched, B's kernels and A's
 * next kernel run.
 */
static void probe_test(const char *const *extra, const char *mechanism) {
        start(NULL, extra);
        kfdb_session *a = connect_session("prober"), *b = connect_session("victim");
        kfdb_code_object *pa = load_kernel(a, "poke"), *sa = load_kernel(a, "saxpy"), *sb = load_kernel(b, "saxpy");
        const size_t words = 16384;
        uint32_t *vict, *out, magic = 0x5eed0000u;
        kfdb_buffer *bv = new_buffer(b, words * 4, 0, (void **) &vict);
        kfdb_buffer *bo = new_buffer(a, 4096 * 4, 0x11, (void **) &out);
        kfdb_gpu_contexts cs;
        uint64_t addr[16];
        pid_t worker_b;
        unsigned n;

        cr_assert_eq(kfdb_gpu_contexts_get(a, &cs, NULL, 0), 0);
        cr_assert_str_eq(cs.mechanism, mechanism, "%s", cs.reason);
        for (size_t i = 0; i < words; i++)
                vict[i] = magic ^ (uint32_t) i;
        saxpy_checked(b, sb, 1000, 1); /* B has a context of its own and its buffers are mapped there */
        worker_b = worker_of_only_session_context(b);
        cr_assert_eq(worker_b != 0, strcmp(mechanism, "process") == 0, "B's context has a worker: pid %d",
                     (int) worker_b);
        n = daemon_addresses_of(bv, addr, 15);
        cr_assert_geq(n, 2, "the daemon maps B's buffer at least in its own context and the simulator");
        /* And where B's own context has it, which B's kernels reach: a
         * secondary context's window is a slot of the daemon's of its own,
         * whereas every worker has the same first client slot in its own
         * process, where that address may well be A's own memory. */
        if (strcmp(mechanism, "kernel") == 0)
                addr[n++] = own_address_of(b, bv);

        for (unsigned i = 0; i < n; i++) {
                int r = poke(a, pa, addr[i], 0xbad0bad0u, 4096, bo);
                cr_assert_eq(r, -EFAULT, "poke at 0x%" PRIx64 ": got %d (%s)", addr[i], r, kfdb_session_last_error(a));
                cr_assert(strstr(kfdb_session_last_error(a), "GPU memory fault in dispatch of kernel \"poke\", at "), "%s",
                          kfdb_session_last_error(a));
                /* What A's kernel read is never B's: its out[k] kept what it
                 * held (the wave stopped at the fault: --sim-fault-order=
                 * event-first), or got what the faulting load read instead,
                 * amdgpu's dummy page — zeros, or the value A's own faulting
                 * stores left there (fence-first, the default: the wave runs
                 * on, docs/simulator.md "Fault order"). */
                for (size_t k = 0; k < 4096; k++)
                        cr_assert(out[k] == 0x11111111u || out[k] == 0 || out[k] == 0xbad0bad0u,
                                  "A read B's memory at 0x%" PRIx64 ": out[%zu] = 0x%08x", addr[i], k, out[k]);
                cr_assert(pattern_intact(vict, words, magic), "A's kernel changed B's buffer through 0x%" PRIx64,
                          addr[i]);
        }
        cr_assert_geq(kfdb_session_get_context_lost(a), n, "A was told each time its context went");
        cr_assert_eq(kfdb_session_get_context_lost(b), 0, "B's context was never lost");
        saxpy_checked(b, sb, 5000, 2);
        saxpy_checked(a, sa, 5000, 3); /* A goes on, in a new context */
        cr_assert(pattern_intact(vict, words, magic));

        kfdb_code_object_free(pa);
        kfdb_code_object_free(sa);
        kfdb_code_object_free(sb);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

Test(isolation, a_kernel_cannot_reach_another_clients_buffer) {
        probe_test(NULL, "kernel");
}

Test(isolation, a_kernel_in_a_worker_cannot_reach_another_clients_buffer) {
        probe_test(worker_mode, "process");
}

typedef struct Worker {
        pthread_t thread;
        const char *name;
        uint32_t seed;
        int rounds;
        bool faulter;
        uint64_t lost;
        int failed; /* errors seen by a client that should see none */
} Worker;

static void *worker_main(void *userdata) {
        Worker *w = userdata;
        kfdb_session *s = NULL;
        kfdb_code_object *sx = NULL, *fa = NULL;
        uint32_t n = 20000, block = 128, one = 1;
        float *x, *y;
        kfdb_buffer *bx, *by, *bc;
        void *cmap;

        if (kfdb_session_new(d.sock, w->name, &s) < 0 || kfdb_code_object_load_file(s, kernel_path("saxpy"), &sx) < 0) {
                w->failed++;
                return NULL;
        }
        if (w->faulter && kfdb_code_object_load_file(s, kernel_path("fault"), &fa) < 0) {
                w->failed++;
                return NULL;
        }
        if (kfdb_buffer_alloc(s, n * 4, KFDB_PLACEMENT_GTT, &bx) < 0 ||
            kfdb_buffer_alloc(s, n * 4, KFDB_PLACEMENT_GTT, &by) < 0 ||
            kfdb_buffer_alloc(s, n * 4, KFDB_PLACEMENT_GTT, &bc) < 0 || kfdb_buffer_map(bx, (void **) &x) < 0 ||
            kfdb_buffer_map(by, (void **) &y) < 0 || kfdb_buffer_map(bc, &cmap) < 0) {
                w->failed++;
                return NULL;
        }
        for (int round = 0; round < w->rounds; round++) {
                kfdb_batch *b = NULL;
                uint64_t fences[3];
                float a = 3.0f;
                int r;

                if (w->faulter) {
                        uint64_t off = 1ull << 38; /* 1 TiB past the buffer: mapped nowhere */
                        kfdb_arg fargs[] = { kfdb_arg_buffer(bx, 0), kfdb_arg_value(&off, 8) };
                        kfdb_batch_new(s, &b);
                        kfdb_batch_dispatch(b, fa, "fault", 1, &one, &one, fargs, 2);
                        if (kfdb_batch_submit(b, fences, NULL) < 0 ||
                            kfdb_fence_wait(s, fences[0], DISPATCH_TIMEOUT_MS) != -EFAULT)
                                w->failed++;
                        kfdb_batch_free(b);
                }
                for (uint32_t i = 0; i < n; i++) {
                        x[i] = (float) (i + w->seed + (uint32_t) round);
                        y[i] = 1.0f;
                }
                kfdb_arg args[] = { kfdb_arg_value(&a, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                                    kfdb_arg_value(&n, 4) };
                kfdb_batch_new(s, &b);
                kfdb_batch_dispatch(b, sx, "saxpy", 1, &n, &block, args, 4);
                kfdb_batch_copy(b, bc, 0, bx, 0, n * 4);
                r = kfdb_batch_submit(b, fences, NULL);
                if (r < 0 || kfdb_fence_wait(s, fences[1], DISPATCH_TIMEOUT_MS) < 0 ||
                    kfdb_fence_wait(s, fences[0], DISPATCH_TIMEOUT_MS) < 0)
                        w->failed++;
                else
                        for (uint32_t i = 0; i < n; i++)
                                if (y[i] != fmaf(3.0f, (float) (i + w->seed + (uint32_t) round), 1.0f) ||
                                    ((float *) cmap)[i] != x[i]) {
                                        w->failed++;
                                        break;
                                }
                kfdb_batch_free(b);
        }
        w->lost = kfdb_session_get_context_lost(s);
        kfdb_session_free(s);
        return NULL;
}

/*
 * Three clients dispatch and copy at once; one of them runs a faulting kernel
 * before each of its good ones. Only that client's jobs fail (EFAULT), it is
 * told of each lost context and goes on; the others' results are all right
 * and their contexts are never lost.
 */
static void fault_under_load(const char *const *extra) {
        start(NULL, extra);
        Worker w[3] = {
                { .name = "steady-1", .seed = 10, .rounds = 6 },
                { .name = "steady-2", .seed = 20, .rounds = 6 },
                { .name = "faulter", .seed = 30, .rounds = 4, .faulter = true },
        };

        for (unsigned i = 0; i < 3; i++)
                cr_assert_eq(pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
        for (unsigned i = 0; i < 3; i++)
                pthread_join(w[i].thread, NULL);
        for (unsigned i = 0; i < 3; i++)
                cr_expect_eq(w[i].failed, 0, "%s saw %d unexpected results", w[i].name, w[i].failed);
        cr_expect_eq(w[0].lost, 0);
        cr_expect_eq(w[1].lost, 0);
        cr_expect_eq(w[2].lost, 4, "the faulter lost one context per fault");
}

Test(isolation, a_fault_under_load_stops_only_the_faulting_client) {
        fault_under_load(NULL);
}

Test(isolation, a_fault_under_load_stops_only_the_faulting_worker) {
        fault_under_load(worker_mode);
}

/* With Isolation=identity the sessions of one user share one context. */
Test(isolation, sessions_of_one_identity_share_a_context) {
        start("[Limits]\nIsolation=identity\n", NULL);
        kfdb_session *a = connect_session("one"), *b = connect_session("two");
        kfdb_code_object *ca = load_kernel(a, "saxpy"), *cb = load_kernel(b, "saxpy");
        kfdb_gpu_context list[8];
        kfdb_gpu_contexts cs;
        unsigned identity = 0;

        kfdb_usage u;

        saxpy_checked(a, ca, 1000, 1);
        saxpy_checked(b, cb, 1000, 2);
        /* kfdb_buffer_free() does not wait for the daemon: a round trip on
         * each session puts its frees before the look from a. */
        cr_assert_eq(kfdb_query(a, &u), 0);
        cr_assert_eq(kfdb_query(b, &u), 0);
        cr_assert_eq(kfdb_gpu_contexts_get(a, &cs, list, 8), 0);
        cr_assert_str_eq(cs.mechanism, "kernel");
        cr_assert_eq(cs.n, 2, "the device context and one client context");
        for (size_t i = 0; i < cs.n; i++)
                if (strcmp(list[i].kind, "identity") == 0) {
                        identity++;
                        cr_expect(list[i].live);
                        cr_expect_eq(list[i].users, 2);
                        cr_expect_gt(list[i].memory_bytes, 0u);
                        cr_expect_eq(list[i].mapped_bytes, 0u, "the buffers both sessions mapped into it went with them");
                }
        cr_assert_eq(identity, 1);
        kfdb_code_object_free(ca);
        kfdb_code_object_free(cb);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

/* --max-contexts=1: a second client that needs a context while the only one
 * is busy is told why; once it is idle, it is reclaimed for the newcomer. */
Test(isolation, the_context_limit_names_itself) {
        const char *extra[] = { "--max-contexts=1", NULL };
        start(NULL, extra);
        kfdb_session *a = connect_session("holder"), *b = connect_session("waiter");
        kfdb_code_object *gate = load_kernel(a, "gate"), *sb = load_kernel(b, "saxpy");
        uint32_t *flag, *gout, one = 1, max = UINT32_MAX;
        kfdb_buffer *bf = new_buffer(a, 4096, 0, (void **) &flag), *bg = new_buffer(a, 4096, 0, (void **) &gout);
        kfdb_arg gargs[] = { kfdb_arg_buffer(bf, 0), kfdb_arg_buffer(bg, 0), kfdb_arg_value(&max, 4) };
        kfdb_batch *hb = NULL, *bb = NULL;
        uint64_t hold, f;
        float *x, *y, two = 2.0f;
        uint32_t n = 64, block = 64;
        kfdb_buffer *bx = new_buffer(b, 4096, 0, (void **) &x), *by = new_buffer(b, 4096, 0, (void **) &y);
        kfdb_arg sargs[] = { kfdb_arg_value(&two, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                             kfdb_arg_value(&n, 4) };
        int r;

        cr_assert_eq(kfdb_batch_new(a, &hb), 0);
        cr_assert_eq(kfdb_batch_dispatch(hb, gate, "gate", 1, &one, &one, gargs, 3), 0);
        cr_assert_eq(kfdb_batch_submit(hb, NULL, &hold), 0, "%s", kfdb_session_last_error(a));
        cr_assert_eq(kfdb_batch_new(b, &bb), 0);
        r = kfdb_batch_dispatch(bb, sb, "saxpy", 1, &n, &block, sargs, 4);
        if (r == 0)
                r = kfdb_batch_submit(bb, NULL, &f);
        cr_assert_eq(r, -EAGAIN, "got %d: %s", r, kfdb_session_last_error(b));
        cr_assert(strstr(kfdb_session_last_error(b),
                         "the GPU context limit (1, kfdbrokerd --max-contexts) is reached and every context has work "
                         "on the GPU"),
                  "%s", kfdb_session_last_error(b));
        kfdb_batch_free(bb);

        __atomic_store_n(&flag[0], 1u, __ATOMIC_RELEASE);
        cr_assert_eq(kfdb_fence_wait(a, hold, DISPATCH_TIMEOUT_MS), 0, "%s", kfdb_session_last_error(a));
        run_dispatch(b, sb, "saxpy", 1, &n, &block, sargs, 4); /* the idle context gives way */
        kfdb_batch_free(hb);
        kfdb_code_object_free(gate);
        kfdb_code_object_free(sb);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

static bool client_context_live(kfdb_session *s) {
        kfdb_gpu_context list[8];
        kfdb_gpu_contexts cs;
        bool live = false;

        cr_assert_eq(kfdb_gpu_contexts_get(s, &cs, list, 8), 0);
        for (size_t i = 0; i < cs.n && i < 8; i++)
                live |= strcmp(list[i].kind, "session") == 0 && list[i].live;
        return live;
}

/* An idle context is given up (--context-idle) and made again on demand. */
static void idle_test(const char *version) {
        const char *extra[] = { "--context-idle=0.2", version, NULL };
        start(NULL, extra);
        kfdb_session *s = connect_session("idler");
        kfdb_code_object *co = load_kernel(s, "saxpy");

        saxpy_checked(s, co, 1000, 1);
        cr_assert(client_context_live(s));
        for (int i = 0; i < 100 && client_context_live(s); i++)
                usleep(20000);
        cr_assert(!client_context_live(s), "the idle context was not given up within 2 s");
        saxpy_checked(s, co, 1000, 2); /* code and buffers brought into a new one */
        cr_assert(client_context_live(s));
        cr_assert_eq(kfdb_session_get_context_lost(s), 0, "giving an idle context up is not a loss");
        kfdb_code_object_free(co);
        kfdb_session_free(s);
}

Test(isolation, an_idle_context_is_given_up_and_made_again) {
        idle_test("--sim-kfd-version=1.19");
}

Test(isolation, an_idle_worker_is_given_up_and_made_again) {
        idle_test(worker_mode[0]);
}

/*
 * Shared mode (--contexts=shared; also where neither secondary contexts nor
 * worker processes work): said at start-up and in the status;
 * ComputeDispatch=isolated (the default) refuses with the reason;
 * ComputeDispatch=yes runs in the shared context.
 */
Test(isolation, shared_mode_gates_compute) {
        const char *extra[] = { "--contexts=shared", NULL };
        start("[Limits]\nComputeDispatch=isolated\n", extra);
        kfdb_session *s = connect_session("shared");
        kfdb_code_object *co = load_kernel(s, "saxpy");
        kfdb_gpu_contexts cs;
        kfdb_batch *b = NULL;
        float *x, *y, two = 2.0f;
        uint32_t n = 64, block = 64;
        kfdb_buffer *bx = new_buffer(s, 4096, 0, (void **) &x), *by = new_buffer(s, 4096, 0, (void **) &y);
        kfdb_arg args[] = { kfdb_arg_value(&two, 4), kfdb_arg_buffer(bx, 0), kfdb_arg_buffer(by, 0),
                            kfdb_arg_value(&n, 4) };
        char *log;
        int r;

        cr_assert_eq(kfdb_gpu_contexts_get(s, &cs, NULL, 0), 0);
        cr_assert_str_eq(cs.mechanism, "none");
        cr_assert(strstr(cs.reason, "shared mode by configuration"), "%s", cs.reason);
        log = test_daemon_read_log(&d);
        cr_assert(strstr(log, "GPU contexts: shared mode by configuration"), "%s", log);
        free(log);

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        r = kfdb_batch_dispatch(b, co, "saxpy", 1, &n, &block, args, 4);
        if (r == 0)
                r = kfdb_batch_submit(b, NULL, NULL);
        cr_assert_eq(r, -EPERM, "got %d: %s", r, kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s),
                         "compute dispatch needs a GPU context of this client's own, and this daemon has none to give"),
                  "%s", kfdb_session_last_error(s));
        cr_assert(strstr(kfdb_session_last_error(s), "which policy allows only with ComputeDispatch=yes"), "%s",
                  kfdb_session_last_error(s));
        kfdb_batch_free(b);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
        teardown_daemon();

        /* Granted: it runs, in the daemon's own context. */
        start("[Limits]\nComputeDispatch=yes\n", extra);
        s = connect_session("shared-granted");
        co = load_kernel(s, "saxpy");
        saxpy_checked(s, co, 2000, 5);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
}

/* A kernel without secondary contexts (simulated KFD 1.18, Linux 6.12 ..
 * 6.19): a worker process per context, said at start-up and in the status. */
Test(isolation, an_older_kernel_gets_worker_processes) {
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_gpu_contexts cs;
        char *log;

        start(NULL, worker_mode);
        s = connect_session("old-kernel");
        co = load_kernel(s, "saxpy");
        cr_assert_eq(kfdb_gpu_contexts_get(s, &cs, NULL, 0), 0);
        cr_assert_str_eq(cs.mechanism, "process");
        cr_assert(strstr(cs.reason, "a GPU context per client: a worker process each (KFD 1.18 has no secondary "
                                    "contexts (they need uapi 1.19, Linux 7.0))"),
                  "%s", cs.reason);
        log = test_daemon_read_log(&d);
        cr_assert(strstr(log, "GPU contexts: a GPU context per client: a worker process each"), "%s", log);
        free(log);
        saxpy_checked(s, co, 3000, 7);
        cr_assert_neq(worker_of_only_session_context(s), 0, "the context runs in a worker process");
        kfdb_code_object_free(co);
        kfdb_session_free(s);
}

/* The four ids of a "Uid:" or "Gid:" line of /proc/PID/status. */
static void status_ids(pid_t pid, const char *key, unsigned ids[4]) {
        char path[64], line[256];
        bool found = false;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        f = fopen(path, "re");
        cr_assert_not_null(f, "%s: %s", path, strerror(errno));
        while (!found && fgets(line, sizeof(line), f))
                found = strncmp(line, key, strlen(key)) == 0 &&
                        sscanf(line + strlen(key), "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]) == 4;
        fclose(f);
        cr_assert(found, "no %s line in %s", key, path);
}

/*
 * A root daemon without a kfdbroker user (--worker-user unset) runs its
 * workers as a uid and gid no account has, from systemd's dynamic range —
 * not as nobody, whom a client may be: a client that is nobody cannot
 * signal them (EPERM), and they still serve.
 */
Test(isolation, workers_run_as_a_uid_no_client_has) {
        kfdb_session *s;
        kfdb_code_object *co;
        unsigned uids[4], gids[4];
        char needle[96], *log;
        pid_t worker, child;
        int status;

        if (geteuid() != 0)
                cr_skip_test("SKIP: needs root (the daemon picks the workers' user only as root)");
        if (getpwnam("kfdbroker"))
                cr_skip_test("SKIP: a kfdbroker user exists here: the workers run as it");
        start(NULL, worker_mode);
        s = connect_session("worker-uid");
        co = load_kernel(s, "saxpy");
        saxpy_checked(s, co, 1000, 3);
        worker = worker_of_only_session_context(s);
        cr_assert_gt(worker, 0, "the context runs in a worker");
        status_ids(worker, "Uid:", uids);
        status_ids(worker, "Gid:", gids);
        for (int i = 1; i < 4; i++)
                cr_assert(uids[i] == uids[0] && gids[i] == gids[0], "the worker's ids differ: uid %u/%u gid %u/%u",
                          uids[0], uids[i], gids[0], gids[i]);
        cr_assert(uids[0] >= 61184 && uids[0] <= 65519, "the worker runs as uid %u, not from 61184..65519", uids[0]);
        cr_assert_eq(gids[0], uids[0], "gid %u, uid %u", gids[0], uids[0]);
        cr_assert_null(getpwuid(uids[0]), "uid %u has an account", uids[0]);
        cr_assert_null(getgrgid(gids[0]), "gid %u has a group", gids[0]);
        log = test_daemon_read_log(&d);
        snprintf(needle, sizeof(needle), "worker processes run as uid and gid %u, which no account has", uids[0]);
        cr_assert(strstr(log, needle), "the log does not say \"%s\"", needle);
        free(log);

        /* A client that is nobody (as the attacker was) cannot signal it. */
        child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                        _exit(3);
                if (kill(worker, 0) == 0)
                        _exit(1);
                _exit(errno == EPERM ? 0 : 2);
        }
        cr_assert_eq(waitpid(child, &status, 0), child);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "nobody could signal the worker (status 0x%x: 1 = kill(worker, 0) succeeded)", status);
        saxpy_checked(s, co, 1000, 4);
        cr_assert_eq(worker_of_only_session_context(s), worker, "the same worker still serves");
        kfdb_code_object_free(co);
        kfdb_session_free(s);
}

/*
 * SIGKILL to a worker while its kernel runs: that client's job fails
 * (ECANCELED, the message says the worker went), its context is lost and
 * made again for its next dispatch; another client's work is untouched.
 */
Test(isolation, a_killed_worker_fails_only_its_clients_jobs) {
        start(NULL, worker_mode);
        kfdb_session *a = connect_session("killed"), *b = connect_session("bystander");
        kfdb_code_object *gate = load_kernel(a, "gate"), *sa = load_kernel(a, "saxpy"), *sb = load_kernel(b, "saxpy");
        uint32_t *flag, *gout;
        kfdb_buffer *bf = new_buffer(a, 4096, 0, (void **) &flag), *bg = new_buffer(a, 4096, 0, (void **) &gout);
        uint64_t fence;
        pid_t worker;
        int r;

        fence = hold_gpu(a, gate, bf, bg);
        worker = worker_of_only_session_context(a);
        cr_assert_gt(worker, 0, "A's context runs in a worker");
        saxpy_checked(b, sb, 4000, 1); /* B's own worker runs alongside */

        cr_assert_eq(kill(worker, SIGKILL), 0);
        r = kfdb_fence_wait(a, fence, DISPATCH_TIMEOUT_MS);
        cr_assert_eq(r, -ECANCELED, "got %d (%s)", r, kfdb_session_last_error(a));
        cr_assert(strstr(kfdb_session_last_error(a), "worker process"), "%s", kfdb_session_last_error(a));
        cr_assert_eq(kfdb_session_get_context_lost(a), 1);
        cr_assert_eq(kfdb_session_get_context_lost(b), 0);

        saxpy_checked(b, sb, 4000, 2);
        saxpy_checked(a, sa, 4000, 3); /* A goes on, in a new worker */
        cr_assert_neq(worker_of_only_session_context(a), worker);
        kfdb_code_object_free(gate);
        kfdb_code_object_free(sa);
        kfdb_code_object_free(sb);
        kfdb_session_free(a);
        kfdb_session_free(b);
}

static bool process_gone(pid_t pid) {
        char path[64], state = 0, line[512];
        FILE *f;

        /* Gone, or a zombie nobody reaps (its parent is dead: init will). */
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        f = fopen(path, "re");
        if (!f)
                return true;
        if (fgets(line, sizeof(line), f)) {
                const char *p = strrchr(line, ')');
                if (p && p[1] == ' ')
                        state = p[2];
        }
        fclose(f);
        return state == 'Z' || state == 'X';
}

/*
 * A worker that does not stop a job when told to (here: stopped with
 * SIGSTOP, so it cannot even read the request) is killed after its grace
 * (5 s); the job fails with the reason and the client goes on.
 */
Test(isolation, a_worker_that_does_not_stop_a_job_is_killed) {
        start("[Limits]\nDispatchTimeout=200ms\n", worker_mode);
        kfdb_session *a = connect_session("stuck");
        kfdb_code_object *gate = load_kernel(a, "gate"), *sa = load_kernel(a, "saxpy");
        uint32_t *flag, *gout;
        kfdb_buffer *bf = new_buffer(a, 4096, 0, (void **) &flag), *bg = new_buffer(a, 4096, 0, (void **) &gout);
        uint64_t fence, t0;
        pid_t worker;
        int r;

        fence = hold_gpu(a, gate, bf, bg);
        worker = worker_of_only_session_context(a);
        cr_assert_gt(worker, 0);
        cr_assert_eq(kill(worker, SIGSTOP), 0);
        t0 = harness_now_ns();
        r = kfdb_fence_wait(a, fence, 20000);
        cr_assert_eq(r, -ECANCELED, "got %d (%s)", r, kfdb_session_last_error(a));
        cr_assert(strstr(kfdb_session_last_error(a), "did not stop a job when asked to"), "%s",
                  kfdb_session_last_error(a));
        cr_assert_geq(harness_now_ns() - t0, 4000000000ull, "killed before its grace of 5 s");
        /* SIGKILL was sent before the report; the exit itself is asynchronous
         * (a large address space takes a while to tear down under ASan). */
        for (int i = 0; i < 500 && !process_gone(worker); i++)
                usleep(10000);
        cr_assert(process_gone(worker), "the stuck worker still runs 5 s after its job failed");
        saxpy_checked(a, sa, 2000, 4); /* a new worker */
        kfdb_code_object_free(gate);
        kfdb_code_object_free(sa);
        kfdb_session_free(a);
}

/* SIGKILL to the daemon: its workers go with it (PR_SET_PDEATHSIG). */
Test(isolation, a_killed_daemon_leaves_no_worker_behind) {
        start(NULL, worker_mode);
        kfdb_session *a = connect_session("one"), *b = connect_session("two");
        kfdb_code_object *gate = load_kernel(a, "gate"), *sb = load_kernel(b, "saxpy");
        uint32_t *flag, *gout;
        kfdb_buffer *bf = new_buffer(a, 4096, 0, (void **) &flag), *bg = new_buffer(a, 4096, 0, (void **) &gout);
        pid_t workers[2];
        int i;

        (void) hold_gpu(a, gate, bf, bg);
        saxpy_checked(b, sb, 1000, 1);
        {
                kfdb_gpu_context list[8];
                kfdb_gpu_contexts cs;
                unsigned n = 0;

                cr_assert_eq(kfdb_gpu_contexts_get(a, &cs, list, 8), 0);
                for (size_t k = 0; k < cs.n && k < 8; k++)
                        if (list[k].pid && n < 2)
                                workers[n++] = (pid_t) list[k].pid;
                cr_assert_eq(n, 2, "two clients, two workers");
        }
        cr_assert_eq(kill(d.pid, SIGKILL), 0);
        cr_assert_eq(waitpid(d.pid, NULL, 0), d.pid);
        for (i = 0; i < 200 && !(process_gone(workers[0]) && process_gone(workers[1])); i++)
                usleep(10000);
        cr_assert(process_gone(workers[0]) && process_gone(workers[1]), "workers %d and %d outlived the daemon",
                  (int) workers[0], (int) workers[1]);
        d.pid = 0; /* nothing left to stop */
        kfdb_session_free(a);
        kfdb_session_free(b);
}

/* The built-in policy (ComputeDispatch=isolated): a client of another user,
 * whom no policy file names, dispatches in a GPU context of its own. The
 * harness's grant names only the tests' own uid. */
static void unprivileged_demo(const char *const *extra) {
        const char *args[] = { "--socket", d.sock, "demo", "--size=1M", "--elements=4096", NULL };
        char *out = NULL, *err = NULL;
        int rc;

        if (geteuid() != 0)
                cr_skip_test("needs root to run the client as nobody (65534)");
        start(NULL, extra);
        cr_assert_eq(chmod(d.dir, 0755), 0); /* nobody must reach the socket */
        rc = test_run_ctl(args, true, &out, &err);
        cr_assert_eq(rc, 0, "kfdbrokerctl demo as nobody: %d\nstdout: %s\nstderr: %s", rc, out, err);
        cr_assert(strstr(out, "saxpy on the GPU"), "the demo ran no kernel: %s", out);
        cr_assert(strstr(out, "elements of y through its dma-buf mapping against the CPU: correct"), "%s", out);
        free(out);
        free(err);
}

Test(isolation, an_unprivileged_client_dispatches_under_the_default_policy) {
        unprivileged_demo(NULL);
}

Test(isolation, an_unprivileged_client_dispatches_in_a_worker_under_the_default_policy) {
        unprivileged_demo(worker_mode);
}
