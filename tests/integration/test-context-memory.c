/* SPDX-License-Identifier: MIT */
/*
 * GPU context memory is charged (docs/policy.md "GPU context memory"): the
 * own memory of a client's GPU context — its queue's ring, EOP and CWSR
 * areas, kernel-argument slots, scratch — counts as the buffer memory of the
 * session that brought it up, under BufferMemory=, UserBufferMemory= and
 * UnitBufferMemory=, shows in Query as context_bytes, and is given back with
 * the context. Issue 29, item 4: twelve sessions whose kernels needed ~2.5 KiB
 * of scratch per work-item made the daemon hold 1383 MiB for one user charged
 * 192 KiB. Run with secondary contexts and (test-context-memory-workers) with
 * worker processes, whose memory the daemon counts itself.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

#define MiB (1ull << 20)

static TestDaemon d;
static char policydir[64];

/* Starts the daemon with a policy of these [Limits] lines (and a short
 * context idle time, so that the reclaim can be watched). */
static void start(const char *limits) {
        char arg[128], path[160];
        const char *args[] = { arg, "--context-idle=3", NULL };
        FILE *f;

        compute_require_kernels();
        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        snprintf(path, sizeof(path), "%s/50-context-memory.conf", policydir);
        f = fopen(path, "we");
        cr_assert(f);
        fprintf(f, "[Limits]\n%s", limits);
        fclose(f);
        snprintf(arg, sizeof(arg), "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
}

static void teardown(void) {
        char cmd[128];

        test_daemon_fini(&d);
        if (policydir[0]) {
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
                test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        }
        test_fini_end();
}

TestSuite(context_memory, .fini = teardown, .timeout = 600);

static kfdb_session *connect_session(void) {
        kfdb_session *s = NULL;

        cr_assert_eq(kfdb_session_new(d.sock, "context-memory", &s), 0);
        return s;
}

static uint64_t context_bytes(kfdb_session *s) {
        uint64_t n = 0;

        cr_assert_eq(kfdb_query_context_bytes(s, &n), 0, "%s", kfdb_session_last_error(s));
        return n;
}

/* One dispatch of NAME's kernel over n work-items: 0, or the negative errno
 * it failed with (at submit or on the GPU), the message in *msg. */
typedef struct Kernel {
        kfdb_code_object *co;
        kfdb_buffer *in, *out;
        const char *name;
} Kernel;

static Kernel load(kfdb_session *s, const char *file, const char *name) {
        Kernel k = { .co = load_kernel(s, file), .name = name };
        void *map;

        k.in = new_buffer(s, 4096 * 4, 0, &map);
        k.out = new_buffer(s, 4096 * 4, 0, &map);
        return k;
}

static void unload(Kernel *k) {
        kfdb_buffer_free(k->in);
        kfdb_buffer_free(k->out);
        kfdb_code_object_free(k->co);
}

/* Submits b and waits for its job: 0, or the negative errno it failed with
 * (at submit, or on its way to the GPU: its job failure), the message in msg. */
static int submit_wait(kfdb_session *s, kfdb_batch *b, char *msg, size_t msglen) {
        kfdb_job_failure f;
        uint64_t fence;
        int r;

        msg[0] = '\0';
        r = kfdb_batch_submit(b, NULL, &fence);
        if (r < 0) {
                snprintf(msg, msglen, "%s", kfdb_session_last_error(s));
                return r;
        }
        r = kfdb_fence_wait(s, fence, DISPATCH_TIMEOUT_MS);
        if (r == 0)
                return 0;
        snprintf(msg, msglen, "%s", kfdb_session_last_error(s));
        /* Done and failed, and its JobFailed (with the reason) not read yet:
         * wait for the message. */
        for (int i = 0; i < 1000; i++) {
                while (kfdb_job_failure_next(s, &f) > 0)
                        if (f.fence == fence) {
                                snprintf(msg, msglen, "%s", f.message);
                                return f.error;
                        }
                if (r != -EIO)
                        break;
                usleep(2000);
        }
        return r;
}

static int run(kfdb_session *s, const Kernel *k, uint32_t n, char *msg, size_t msglen) {
        uint32_t block = 64;
        kfdb_arg args[] = { kfdb_arg_buffer(k->in, 0), kfdb_arg_buffer(k->out, 0), kfdb_arg_value(&n, 4) };
        kfdb_batch *b = NULL;
        int r;

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        r = kfdb_batch_dispatch(b, k->co, k->name, 1, &n, &block, args, 3);
        cr_assert_eq(r, 0, "%s: %s", k->name, kfdb_session_last_error(s));
        r = submit_wait(s, b, msg, msglen);
        kfdb_batch_free(b);
        return r;
}

static Kernel load_copy(kfdb_session *s) {
        return load(s, "vector-add", "vector_add");
}

/* vector_add takes (a, b, c, n): a and b the input, c the output. */
static int run_copy(kfdb_session *s, const Kernel *k, char *msg, size_t msglen) {
        uint32_t n = 256, block = 64;
        kfdb_arg args[] = { kfdb_arg_buffer(k->in, 0), kfdb_arg_buffer(k->in, 0), kfdb_arg_buffer(k->out, 0),
                            kfdb_arg_value(&n, 4) };
        kfdb_batch *b = NULL;
        int r;

        cr_assert_eq(kfdb_batch_new(s, &b), 0);
        cr_assert_eq(kfdb_batch_dispatch(b, k->co, k->name, 1, &n, &block, args, 4), 0, "%s",
                     kfdb_session_last_error(s));
        r = submit_wait(s, b, msg, msglen);
        kfdb_batch_free(b);
        return r;
}

/* What the only client context says it holds for itself (status): the GPU
 * layer's count of its buffers, in this process or reported by its worker. */
static uint64_t context_memory_in_status(kfdb_session *s) {
        kfdb_gpu_context list[8];
        kfdb_gpu_contexts cs;
        uint64_t n = 0;

        cr_assert_eq(kfdb_gpu_contexts_get(s, &cs, list, 8), 0);
        for (size_t i = 0; i < cs.n && i < 8; i++)
                if (strcmp(list[i].kind, "device") != 0 && list[i].live)
                        n = list[i].memory_bytes;
        return n;
}

/* The charge is what the context allocated: the daemon's count agrees with
 * the GPU layer's own (a worker's report may come a little later). */
static void expect_charge_is_what_it_holds(kfdb_session *s) {
        uint64_t charged = context_bytes(s), held = 0;

        for (int i = 0; i < 500 && (held = context_memory_in_status(s)) != charged; i++)
                usleep(2000);
        cr_expect_eq(held, charged, "the context holds %llu bytes, %llu charged", (unsigned long long) held,
                     (unsigned long long) charged);
}

Test(context_memory, is_charged_shown_and_given_back) {
        char msg[512];
        kfdb_usage u;

        start("BufferMemory=1G\n");
        kfdb_session *s = connect_session();
        Kernel plain = load_copy(s), scratch = load(s, "private-array", "private_array");

        cr_expect_eq(context_bytes(s), 0, "no context before the first dispatch");
        cr_assert_eq(run_copy(s, &plain, msg, sizeof msg), 0, "%s", msg);
        uint64_t base = context_bytes(s);
        /* Its event page and fences, and one compute queue: ring, EOP, CWSR, kernel arguments. */
        cr_expect_gt(base, 64 * 1024, "context_bytes %llu", (unsigned long long) base);
        expect_charge_is_what_it_holds(s);
        cr_assert_eq(kfdb_query(s, &u), 0);
        cr_expect_geq(u.buffer_bytes, base, "buffer_bytes %llu includes context_bytes %llu",
                      (unsigned long long) u.buffer_bytes, (unsigned long long) base);

        /* Scratch for every wave the queue backs. */
        cr_assert_eq(run(s, &scratch, 256, msg, sizeof msg), 0, "%s", msg);
        uint64_t with_scratch = context_bytes(s);
        cr_expect_gt(with_scratch, base + MiB, "context_bytes %llu after a dispatch with scratch, %llu before",
                     (unsigned long long) with_scratch, (unsigned long long) base);
        expect_charge_is_what_it_holds(s);
        /* The same scratch again allocates nothing more. */
        cr_assert_eq(run(s, &scratch, 1024, msg, sizeof msg), 0, "%s", msg);
        cr_expect_eq(context_bytes(s), with_scratch);

        /* Idle for --context-idle=: the context is reclaimed, its charge goes. */
        uint64_t left = with_scratch;
        for (int i = 0; i < 1000 && (left = context_bytes(s)) > 0; i++)
                usleep(10000);
        cr_expect_eq(left, 0, "context_bytes %llu after the context was reclaimed", (unsigned long long) left);
        cr_assert_eq(kfdb_query(s, &u), 0);
        /* The buffers (two per kernel, 16 KiB each) and the code objects. */
        cr_expect_lt(u.buffer_bytes, base, "buffer_bytes %llu", (unsigned long long) u.buffer_bytes);

        /* The next dispatch brings a new one up, charged again. */
        cr_assert_eq(run(s, &scratch, 64, msg, sizeof msg), 0, "%s", msg);
        cr_expect_eq(context_bytes(s), with_scratch);
        unload(&plain);
        unload(&scratch);
        kfdb_session_free(s);
}

/* What the session's context holds with scratch, measured in a daemon of
 * its own before the limits below are chosen from it. */
static void measure(uint64_t *ret_base, uint64_t *ret_scratch) {
        char msg[512];

        start("BufferMemory=1G\n");
        kfdb_session *s = connect_session();
        Kernel plain = load_copy(s), scratch = load(s, "private-array", "private_array");
        cr_assert_eq(run_copy(s, &plain, msg, sizeof msg), 0, "%s", msg);
        *ret_base = context_bytes(s);
        cr_assert_eq(run(s, &scratch, 256, msg, sizeof msg), 0, "%s", msg);
        *ret_scratch = context_bytes(s) - *ret_base;
        unload(&plain);
        unload(&scratch);
        kfdb_session_free(s);
        test_daemon_fini(&d);
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", policydir);
        cr_assert_eq(system(cmd), 0);
        policydir[0] = '\0';
}

Test(context_memory, scratch_that_does_not_fit_fails_the_dispatch_with_edquot) {
        uint64_t base, scratch_bytes;
        char limits[128], msg[512];

        measure(&base, &scratch_bytes);
        fprintf(stderr, "a context: %llu bytes, with scratch %llu more\n", (unsigned long long) base,
                (unsigned long long) scratch_bytes);
        /* Room for the buffers, the code objects and the context, not its scratch. */
        uint64_t limit = (base + 2 * MiB + scratch_bytes / 2) / MiB * MiB;
        cr_assert_lt(limit, base + scratch_bytes);
        snprintf(limits, sizeof limits, "BufferMemory=%llu\n", (unsigned long long) limit);
        start(limits);
        kfdb_session *s = connect_session();
        Kernel plain = load_copy(s), scratch = load(s, "private-array", "private_array");

        cr_assert_eq(run_copy(s, &plain, msg, sizeof msg), 0, "%s", msg);
        cr_expect_eq(context_bytes(s), base);
        int r = run(s, &scratch, 256, msg, sizeof msg);
        cr_assert_eq(r, -EDQUOT, "a dispatch needing %llu bytes of scratch under BufferMemory=%llu: %d (%s)",
                     (unsigned long long) scratch_bytes, (unsigned long long) limit, r, msg);
        fprintf(stderr, "%s\n", msg);
        cr_expect(strstr(msg, "GPU context memory (scratch ") && strstr(msg, ") would exceed BufferMemory="),
                  "%s", msg);
        /* Nothing was allocated for it; what runs without scratch still runs. */
        cr_expect_eq(context_bytes(s), base);
        cr_assert_eq(run_copy(s, &plain, msg, sizeof msg), 0, "%s", msg);
        unload(&plain);
        unload(&scratch);
        kfdb_session_free(s);
}

Test(context_memory, a_queue_that_does_not_fit_is_not_made) {
        char msg[512];

        start("BufferMemory=512K\n");
        kfdb_session *s = connect_session();
        Kernel plain = load_copy(s);
        int r = run_copy(s, &plain, msg, sizeof msg);

        cr_assert_eq(r, -EDQUOT, "%d (%s)", r, msg);
        fprintf(stderr, "%s\n", msg);
        cr_expect(strstr(msg, "GPU context memory (a compute queue ") && strstr(msg, ") would exceed BufferMemory=512K"),
                  "%s", msg);
        /* The context is up without its queue: its event page and fences. */
        cr_expect_lt(context_bytes(s), 128 * 1024, "%llu", (unsigned long long) context_bytes(s));
        unload(&plain);
        kfdb_session_free(s);
}

/* The attack of issue 29: scratch in many sessions of one user. Each
 * session's own BufferMemory= has room for its context with scratch; the
 * user's UserBufferMemory= for two of them. */
#define SESSIONS 6
Test(context_memory, scratch_in_many_sessions_is_bounded_by_the_user_cap) {
        uint64_t base, scratch_bytes;
        kfdb_session *s[SESSIONS];
        Kernel k[SESSIONS];
        char limits[160], msg[512];
        unsigned ok = 0, refused = 0;
        kfdb_quota q;

        measure(&base, &scratch_bytes);
        uint64_t one = base + scratch_bytes + 2 * MiB; /* with its buffers and code object */
        uint64_t user = 2 * one + one / 2;
        snprintf(limits, sizeof limits, "BufferMemory=1G\nUserBufferMemory=%llu\n", (unsigned long long) user);
        start(limits);
        for (unsigned i = 0; i < SESSIONS; i++) {
                s[i] = connect_session();
                k[i] = load(s[i], "private-array", "private_array");
        }
        for (unsigned i = 0; i < SESSIONS; i++) {
                int r = run(s[i], &k[i], 256, msg, sizeof msg);
                if (r == 0) {
                        ok++;
                        continue;
                }
                cr_assert_eq(r, -EDQUOT, "session %u: %d (%s)", i, r, msg);
                fprintf(stderr, "session %u: %s\n", i, msg);
                cr_expect(strstr(msg, "GPU context memory (") && strstr(msg, ") would exceed UserBufferMemory="),
                          "%s", msg);
                refused++;
        }
        cr_expect_eq(ok, 2, "%u of %u sessions got their scratch under UserBufferMemory=%llu", ok, SESSIONS,
                     (unsigned long long) user);
        cr_expect_eq(refused, SESSIONS - 2);
        cr_assert_eq(kfdb_query_quota(s[0], &q), 0);
        cr_expect_leq(q.user_buffer_bytes, user, "the user holds %llu bytes", (unsigned long long) q.user_buffer_bytes);
        cr_expect_geq(q.user_buffer_bytes, 2 * (base + scratch_bytes));
        /* A session that goes gives its context's charge back: another gets its turn. */
        unload(&k[0]);
        kfdb_session_free(s[0]);
        int r = -1;
        for (int i = 0; i < 1000 && r != 0; i++) {
                r = run(s[SESSIONS - 1], &k[SESSIONS - 1], 256, msg, sizeof msg);
                if (r != 0)
                        usleep(10000);
        }
        cr_expect_eq(r, 0, "%s", msg);
        for (unsigned i = 1; i < SESSIONS; i++) {
                unload(&k[i]);
                kfdb_session_free(s[i]);
        }
}
