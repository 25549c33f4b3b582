/* SPDX-License-Identifier: MIT */
/*
 * The checks of `kfdbrokerctl selftest` (ctl-selftest-checks.h). The kernels
 * are the code objects embedded in kfdbrokerctl (ctl-compute.h): saxpy, the
 * demo's, and fault, which stores far outside its buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl-compute.h"
#include "ctl-selftest-checks.h"
#include "util/macro.h"

/* Waits for one job; far longer than any check needs on the simulator under ASan. */
#define WAIT_MS 120000
/* How long a job that must not run yet is watched before it is released. */
#define HELD_MS 50
#define SAXPY_ELEMENTS (1u << 20)
/* 1 TiB past the buffer: nothing is mapped there in a client's GPU context
 * (the same distance as tests/integration/test-compute-hostile.c). */
#define FAULT_WORDS (1ull << 38)
#define FAULT_MARK 0xdeadbeefu

static const uint64_t copy_sizes[N_COPY_SIZES] = { 4096, 1u << 20, 64u << 20 };

double selftest_now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

_printf_(3, 4) static void set_result(Check *c, Result result, const char *fmt, ...) {
        va_list ap;

        c->result = result;
        va_start(ap, fmt);
        vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
        va_end(ap);
}

/* Fails c with what went wrong and, when the library or the daemon said why, its words. */
static void fail_call(Check *c, const Selftest *t, int r, const char *what) {
        char text[1200];

        set_result(c, RESULT_FAIL, "%s: %s", what,
                   ctl_failure_text(r, kfdb_session_last_error(t->s), text, sizeof(text)));
}

/* Waits for a job that must succeed; fails c and returns < 0 if it did not. */
static int wait_job(Check *c, const Selftest *t, uint64_t fence, const char *what) {
        int r = kfdb_fence_wait(t->s, fence, WAIT_MS);
        char buf[160];

        if (r == -ETIMEDOUT) {
                set_result(c, RESULT_FAIL, "the %s did not complete within %d s", what, WAIT_MS / 1000);
                return r;
        }
        if (r < 0) {
                snprintf(buf, sizeof(buf), "the %s failed", what);
                fail_call(c, t, r, buf);
        }
        return r;
}

void selftest_drain_failures(const Selftest *t) {
        kfdb_job_failure f;

        while (kfdb_job_failure_next(t->s, &f) > 0)
                ;
}

static void batch_freep(kfdb_batch **b) {
        kfdb_batch_free(*b);
}
static void buffer_freep(kfdb_buffer **b) {
        (void) kfdb_buffer_free(*b);
}
static void event_destroyp(kfdb_event **e) {
        (void) kfdb_event_destroy(*e);
}
static void code_object_freep(kfdb_code_object **co) {
        (void) kfdb_code_object_free(*co);
}
#define _cleanup_batch_ _cleanup_(batch_freep)
#define _cleanup_buffer_ _cleanup_(buffer_freep)
#define _cleanup_event_ _cleanup_(event_destroyp)
#define _cleanup_code_object_ _cleanup_(code_object_freep)

/* A buffer mapped into this process; fails c on error. */
static int new_buffer(Check *c, const Selftest *t, uint64_t size, kfdb_buffer **ret, void **ret_map) {
        int r = kfdb_buffer_alloc(t->s, size, KFDB_PLACEMENT_GTT, ret);

        if (r < 0) {
                fail_call(c, t, r, "cannot allocate a buffer");
                return r;
        }
        r = kfdb_buffer_map(*ret, ret_map);
        if (r < 0)
                fail_call(c, t, r, "cannot map a buffer's dma-buf");
        return r;
}

static int new_batch(Check *c, const Selftest *t, kfdb_batch **ret) {
        int r = kfdb_batch_new(t->s, ret);

        if (r < 0)
                fail_call(c, t, r, "cannot make a batch");
        return r;
}

static int new_event(Check *c, const Selftest *t, bool auto_reset, kfdb_event **ret) {
        int r = kfdb_event_create(t->s, auto_reset, ret);

        if (r < 0)
                fail_call(c, t, r, "cannot create an event");
        return r;
}

/* Submits b; fences (room for every job) or ret_last (the last job's fence) may be NULL. */
static int submit(Check *c, const Selftest *t, kfdb_batch *b, uint64_t *fences, uint64_t *ret_last, const char *what) {
        char buf[160];
        int r = kfdb_batch_submit(b, fences, ret_last);

        if (r < 0) {
                snprintf(buf, sizeof(buf), "Submit of the %s was refused", what);
                fail_call(c, t, r, buf);
        }
        return r;
}

/* A pattern that differs per word and per seed, so a copy to the wrong place or a stale word shows. */
static uint32_t word_pattern(uint64_t i, uint32_t seed) {
        return (uint32_t) (i * 0x9E3779B1u) ^ seed;
}

/* Index of the first word of p[0..n) that is not want, or n. */
static uint64_t first_not(const uint32_t *p, uint64_t n, uint32_t want) {
        for (uint64_t i = 0; i < n; i++)
                if (p[i] != want)
                        return i;
        return n;
}

static const char *size_name(uint64_t bytes, char *buf, size_t n) {
        if (bytes >= (1u << 20))
                snprintf(buf, n, "%" PRIu64 " MiB", bytes >> 20);
        else
                snprintf(buf, n, "%" PRIu64 " KiB", bytes >> 10);
        return buf;
}

/* ---- copy ---- */

/* One copy of size bytes between two buffers filled through their mappings, every word checked. */
static int copy_once(Check *c, const Selftest *t, uint64_t size, CopyRun *ret) {
        _cleanup_buffer_ kfdb_buffer *src = NULL, *dst = NULL;
        _cleanup_batch_ kfdb_batch *batch = NULL;
        uint32_t *sp, *dp, seed = (uint32_t) size ^ 0xC0FFEEu;
        uint64_t fence, words = size / 4, bad;
        char name[32];
        double t0;
        int r;

        if (new_buffer(c, t, size, &src, (void **) &sp) < 0 || new_buffer(c, t, size, &dst, (void **) &dp) < 0 ||
            new_batch(c, t, &batch) < 0)
                return -EIO;
        for (uint64_t i = 0; i < words; i++)
                sp[i] = word_pattern(i, seed);
        memset(dp, 0xee, size);
        r = kfdb_batch_copy(batch, dst, 0, src, 0, size);
        if (r < 0) {
                fail_call(c, t, r, "cannot add a copy job");
                return r;
        }
        t0 = selftest_now_ms();
        if (submit(c, t, batch, NULL, &fence, "copy") < 0 || wait_job(c, t, fence, "copy") < 0)
                return -EIO;
        *ret = (CopyRun) { .bytes = size, .ms = selftest_now_ms() - t0 };
        ret->gbps = (double) size / (ret->ms / 1e3) / 1e9;
        for (bad = 0; bad < words && dp[bad] == word_pattern(bad, seed); bad++)
                ;
        if (bad < words) {
                set_result(c, RESULT_FAIL, "copy of %s: byte %" PRIu64 " of the destination is wrong: 0x%08x, expected 0x%08x",
                           size_name(size, name, sizeof(name)), bad * 4, dp[bad], word_pattern(bad, seed));
                return -EIO;
        }
        return 0;
}

static void check_copy(const Selftest *t, Check *c) {
        char line[256] = "", name[32];
        size_t len = 0;

        for (size_t i = 0; i < N_COPY_SIZES; i++) {
                if (copy_once(c, t, copy_sizes[i], &c->copies[i]) < 0)
                        return;
                c->n_copies++;
                len += (size_t) snprintf(line + len, sizeof(line) - MIN(len, sizeof(line)), "%s%s %.3g GB/s",
                                         i ? ", " : "", size_name(copy_sizes[i], name, sizeof(name)),
                                         c->copies[i].gbps);
        }
        set_result(c, RESULT_PASS, "%s; every byte checked", line);
}

/* ---- fill ---- */

#define FILL_SIZE (16u << 20)
#define FILL_STRIPES 8u
#define FILL_LAST 0x5EEDF111u

static uint32_t fill_pattern(unsigned stripe) {
        return stripe + 1 < FILL_STRIPES ? word_pattern(stripe, 0xF111u) : FILL_LAST;
}

/* Checks what check_fill() asked for; returns 0 or fails c. */
static int fill_verify(Check *c, const uint32_t *p) {
        const uint64_t words = FILL_SIZE / FILL_STRIPES / 4;

        for (unsigned i = 0; i < FILL_STRIPES; i++) {
                const uint32_t *s = p + i * words;
                /* The last stripe was filled but for its first and last word. */
                uint64_t from = i + 1 < FILL_STRIPES ? 0 : 1, n = i + 1 < FILL_STRIPES ? words : words - 2;
                uint64_t at = first_not(s + from, n, fill_pattern(i));

                if (at < n) {
                        set_result(c, RESULT_FAIL, "byte %" PRIu64 " is 0x%08x, the fill of stripe %u wrote 0x%08x",
                                   (i * words + from + at) * 4, s[from + at], i, fill_pattern(i));
                        return -EIO;
                }
        }
        if (p[FILL_STRIPES * words - words] != 0x11111111u || p[FILL_STRIPES * words - 1] != 0x11111111u) {
                set_result(c, RESULT_FAIL, "a fill wrote outside its range: the words around the last stripe's "
                                           "fill are 0x%08x and 0x%08x, expected 0x11111111",
                           p[FILL_STRIPES * words - words], p[FILL_STRIPES * words - 1]);
                return -EIO;
        }
        return 0;
}

static void check_fill(const Selftest *t, Check *c) {
        _cleanup_buffer_ kfdb_buffer *b = NULL;
        _cleanup_batch_ kfdb_batch *batch = NULL;
        const uint64_t stripe = FILL_SIZE / FILL_STRIPES;
        uint64_t fence;
        uint32_t *p;
        double t0, ms;
        int r = 0;

        if (new_buffer(c, t, FILL_SIZE, &b, (void **) &p) < 0 || new_batch(c, t, &batch) < 0)
                return;
        memset(p, 0x11, FILL_SIZE);
        for (unsigned i = 0; i + 1 < FILL_STRIPES && r >= 0; i++)
                r = kfdb_batch_fill(batch, b, i * stripe, stripe, fill_pattern(i));
        if (r >= 0)
                r = kfdb_batch_fill(batch, b, (FILL_STRIPES - 1) * stripe + 4, stripe - 8, FILL_LAST);
        if (r < 0)
                return fail_call(c, t, r, "cannot add a fill job");
        t0 = selftest_now_ms();
        if (submit(c, t, batch, NULL, &fence, "fills") < 0 || wait_job(c, t, fence, "fills") < 0)
                return;
        ms = selftest_now_ms() - t0;
        if (fill_verify(c, p) < 0)
                return;
        c->bytes = FILL_SIZE - 8;
        c->gbps = (double) c->bytes / (ms / 1e3) / 1e9;
        set_result(c, RESULT_PASS, "%u fills over 16 MiB at %.3g GB/s; every byte checked, none written outside",
                   FILL_STRIPES, c->gbps);
}

/* ---- events ---- */

/* One WaitEvents on e; returns the result, or < 0 after failing c. */
static int wait_event(Check *c, const Selftest *t, kfdb_event *e, uint64_t *last_age, int timeout_ms) {
        kfdb_wait_entry entry = { .event = e, .last_event_age = *last_age };
        kfdb_wait_result res;
        int r = kfdb_wait_events(t->s, &entry, 1, false, timeout_ms, &res);

        if (r < 0) {
                fail_call(c, t, r, "WaitEvents failed");
                return r;
        }
        *last_age = entry.last_event_age;
        return (int) res;
}

/* Set from the CPU, seen by a waiter with the age it last saw; reset; then an auto-reset event. */
static int events_cpu(Check *c, const Selftest *t) {
        _cleanup_event_ kfdb_event *e = NULL, *a = NULL;
        uint64_t age;
        int r;

        if (new_event(c, t, false, &e) < 0 || new_event(c, t, true, &a) < 0)
                return -EIO;
        age = kfdb_event_get_age(e);
        if (age != 1) {
                set_result(c, RESULT_FAIL, "a new event has age %" PRIu64 " in the session page, expected 1", age);
                return -EIO;
        }
        r = kfdb_event_set(e);
        if (r < 0) {
                fail_call(c, t, r, "SetEvent failed");
                return r;
        }
        /* A waiter that saw age 1 returns at once: the age moved. */
        r = wait_event(c, t, e, &age, 0);
        if (r < 0)
                return r;
        if (r != KFDB_WAIT_COMPLETE || age != 2) {
                set_result(c, RESULT_FAIL, "after SetEvent a wait from age 1 gave result %d and age %" PRIu64
                                           ", expected complete and age 2", r, age);
                return -EIO;
        }
        r = kfdb_event_reset(e);
        if (r < 0) {
                fail_call(c, t, r, "ResetEvent failed");
                return r;
        }
        age = 0;
        r = wait_event(c, t, e, &age, 0);
        if (r < 0)
                return r;
        if (r != KFDB_WAIT_TIMEOUT) {
                set_result(c, RESULT_FAIL, "a reset event still satisfied a wait (result %d)", r);
                return -EIO;
        }
        /* An auto-reset event is reset by the wait it satisfies. */
        r = kfdb_event_set(a);
        if (r < 0) {
                fail_call(c, t, r, "SetEvent failed");
                return r;
        }
        age = 0;
        r = wait_event(c, t, a, &age, WAIT_MS);
        if (r >= 0 && r != KFDB_WAIT_COMPLETE)
                set_result(c, RESULT_FAIL, "a wait on a signaled auto-reset event gave result %d", r);
        if (r != KFDB_WAIT_COMPLETE)
                return -EIO;
        age = 0;
        r = wait_event(c, t, a, &age, 0);
        if (r >= 0 && r != KFDB_WAIT_TIMEOUT)
                set_result(c, RESULT_FAIL, "an auto-reset event stayed signaled after the wait it satisfied");
        return r == KFDB_WAIT_TIMEOUT ? 0 : -EIO;
}

#define EVENTS_SIZE (1u << 20)

/* A fill then a signal on the GPU wake a CPU waiter, the fill's data already there; a
 * wait-event job holds the fill behind it until the CPU sets its event. */
static int events_gpu(Check *c, const Selftest *t) {
        _cleanup_event_ kfdb_event *e = NULL, *g = NULL;
        _cleanup_buffer_ kfdb_buffer *b = NULL;
        _cleanup_batch_ kfdb_batch *batch = NULL;
        uint64_t fences[2], age, at;
        uint32_t *p;
        int r;

        if (new_event(c, t, false, &e) < 0 || new_event(c, t, false, &g) < 0 ||
            new_buffer(c, t, EVENTS_SIZE, &b, (void **) &p) < 0 || new_batch(c, t, &batch) < 0)
                return -EIO;
        memset(p, 0, EVENTS_SIZE);
        r = kfdb_batch_fill(batch, b, 0, EVENTS_SIZE, 0xE0E0E0E1u);
        if (r >= 0)
                r = kfdb_batch_signal_event_on(batch, e, KFDB_ENGINE_SDMA);
        if (r < 0) {
                fail_call(c, t, r, "cannot add the fill and signal jobs");
                return r;
        }
        if (submit(c, t, batch, fences, NULL, "fill and signal") < 0)
                return -EIO;
        age = 1;
        r = wait_event(c, t, e, &age, WAIT_MS);
        if (r < 0)
                return r;
        if (r != KFDB_WAIT_COMPLETE || age != 2) {
                set_result(c, RESULT_FAIL, "the GPU's signal did not wake the CPU's wait within %d s "
                                           "(result %d, age %" PRIu64 ")", WAIT_MS / 1000, r, age);
                return -EIO;
        }
        at = first_not(p, EVENTS_SIZE / 4, 0xE0E0E0E1u);
        if (at < EVENTS_SIZE / 4) {
                set_result(c, RESULT_FAIL, "the event signaled after a fill was seen before the fill's data "
                                           "(byte %" PRIu64 " is 0x%08x)", at * 4, p[at]);
                return -EIO;
        }
        if (wait_job(c, t, fences[1], "signal job") < 0)
                return -EIO;

        r = kfdb_batch_wait_event_on(batch, g, KFDB_ENGINE_SDMA);
        if (r >= 0)
                r = kfdb_batch_fill(batch, b, 0, EVENTS_SIZE, 0xE0E0E0E2u);
        if (r < 0) {
                fail_call(c, t, r, "cannot add the wait and fill jobs");
                return r;
        }
        if (submit(c, t, batch, fences, NULL, "wait and fill") < 0)
                return -EIO;
        r = kfdb_fence_wait(t->s, fences[1], HELD_MS);
        if (r != -ETIMEDOUT || p[0] != 0xE0E0E0E1u) {
                set_result(c, RESULT_FAIL, "a fill behind a wait for an event nobody set ran (%s)",
                           r < 0 ? kfdb_strerror(r) : "it completed");
                return -EIO;
        }
        r = kfdb_event_set(g);
        if (r < 0) {
                fail_call(c, t, r, "SetEvent failed");
                return r;
        }
        if (wait_job(c, t, fences[1], "fill held by the event") < 0)
                return -EIO;
        at = first_not(p, EVENTS_SIZE / 4, 0xE0E0E0E2u);
        if (at < EVENTS_SIZE / 4) {
                set_result(c, RESULT_FAIL, "the fill released by SetEvent left byte %" PRIu64 " as 0x%08x",
                           at * 4, p[at]);
                return -EIO;
        }
        return 0;
}

static void check_events(const Selftest *t, Check *c) {
        if (events_cpu(c, t) < 0 || events_gpu(c, t) < 0)
                return;
        set_result(c, RESULT_PASS, "ages 1 -> 2 on a signal; a wait with the last age seen returns at once; "
                                   "auto-reset; a GPU signal woke the CPU after its fill; a GPU wait held a fill "
                                   "until SetEvent");
}

/* ---- events between engines ---- */

#define CHAIN_FLOATS (256u * 1024u)
#define CHAIN_BLOCK 256u

/* Why the kernels built in cannot run on this GPU, or NULL: they are gfx1030
 * code (client/meson.build). */
static const char *kernels_foreign(const Selftest *t, char *buf, size_t n) {
        if (strcmp(t->dev.gfx_name, "gfx1030") == 0)
                return NULL;
        snprintf(buf, n, "the kernels built in are for gfx1030; this GPU is %s", t->dev.gfx_name);
        return buf;
}

/* Why compute cannot run here, or NULL. */
static const char *compute_missing(const Selftest *t, char *buf, size_t n) {
        if (ctl_saxpy_hsaco_size == 0) {
                snprintf(buf, n, "the saxpy kernel could not be built (%s)", ctl_saxpy_hsaco_missing);
                return buf;
        }
        if (!kfdb_session_has_feature(t->s, "compute"))
                return "the daemon's device has no compute queue";
        return kernels_foreign(t, buf, n);
}

/* A submit refused for a reason the checks skip on (policy, no compute); fills c. */
static bool refused_as_skip(Check *c, const Selftest *t, int r) {
        if (r != -EPERM && r != -EOPNOTSUPP && r != -EAGAIN)
                return false;
        set_result(c, RESULT_SKIP, "the daemon refused compute work: %s (%s)", kfdb_session_last_error(t->s),
                   strerror(-r));
        return true;
}

static float bits_float(uint32_t v) {
        float f;
        memcpy(&f, &v, sizeof(f));
        return f;
}

static uint32_t float_bits(float f) {
        uint32_t v;
        memcpy(&v, &f, sizeof(v));
        return v;
}

/*
 * fill x and y (SDMA) -> signal E (SDMA) -> wait E (compute) -> saxpy y = 3x + y
 * -> signal F (compute) -> wait F (SDMA) -> copy y to z (SDMA), submitted at once.
 * z holds 3 * 2 + 1 = 7 everywhere only if every step waited for the one before.
 */
static void check_events_engines(const Selftest *t, Check *c) {
        _cleanup_event_ kfdb_event *e = NULL, *f = NULL;
        _cleanup_buffer_ kfdb_buffer *x = NULL, *y = NULL, *z = NULL;
        _cleanup_code_object_ kfdb_code_object *co = NULL;
        _cleanup_batch_ kfdb_batch *batch = NULL;
        uint32_t *xp, *yp, *zp, grid = CHAIN_FLOATS, block = CHAIN_BLOCK, n = CHAIN_FLOATS;
        const float a = 3.0f;
        const uint32_t want = float_bits(7.0f);
        uint64_t fence, at, e_age, f_age;
        char why[256];
        int r;

        if (compute_missing(t, why, sizeof(why)))
                return set_result(c, RESULT_SKIP, "%s", compute_missing(t, why, sizeof(why)));
        r = kfdb_code_object_load(t->s, ctl_saxpy_hsaco, ctl_saxpy_hsaco_size, &co);
        if (r < 0)
                return fail_call(c, t, r, "cannot load the saxpy code object");
        if (new_event(c, t, false, &e) < 0 || new_event(c, t, false, &f) < 0 ||
            new_buffer(c, t, CHAIN_FLOATS * 4, &x, (void **) &xp) < 0 ||
            new_buffer(c, t, CHAIN_FLOATS * 4, &y, (void **) &yp) < 0 ||
            new_buffer(c, t, CHAIN_FLOATS * 4, &z, (void **) &zp) < 0 || new_batch(c, t, &batch) < 0)
                return;
        memset(xp, 0, CHAIN_FLOATS * 4);
        memset(yp, 0, CHAIN_FLOATS * 4);
        memset(zp, 0, CHAIN_FLOATS * 4);
        kfdb_arg args[] = { kfdb_arg_value(&a, sizeof(a)), kfdb_arg_buffer(x, 0), kfdb_arg_buffer(y, 0),
                            kfdb_arg_value(&n, sizeof(n)) };
        r = kfdb_batch_fill(batch, x, 0, CHAIN_FLOATS * 4, float_bits(2.0f));
        if (r >= 0)
                r = kfdb_batch_fill(batch, y, 0, CHAIN_FLOATS * 4, float_bits(1.0f));
        if (r >= 0)
                r = kfdb_batch_signal_event_on(batch, e, KFDB_ENGINE_SDMA);
        if (r >= 0)
                r = kfdb_batch_wait_event_on(batch, e, KFDB_ENGINE_COMPUTE);
        if (r >= 0)
                r = kfdb_batch_dispatch(batch, co, "saxpy", 1, &grid, &block, args, ELEMENTSOF(args));
        if (r >= 0)
                r = kfdb_batch_signal_event_on(batch, f, KFDB_ENGINE_COMPUTE);
        if (r >= 0)
                r = kfdb_batch_wait_event_on(batch, f, KFDB_ENGINE_SDMA);
        if (r >= 0)
                r = kfdb_batch_copy(batch, z, 0, y, 0, CHAIN_FLOATS * 4);
        if (r < 0)
                return fail_call(c, t, r, "cannot build the chain of jobs");
        r = kfdb_batch_submit(batch, NULL, &fence);
        if (refused_as_skip(c, t, r))
                return;
        if (r < 0)
                return fail_call(c, t, r, "Submit of the chain was refused");
        if (wait_job(c, t, fence, "chain's last copy") < 0)
                return;
        at = first_not(zp, CHAIN_FLOATS, want);
        if (at < CHAIN_FLOATS)
                return set_result(c, RESULT_FAIL, "z[%" PRIu64 "] is %g, expected 7: a job of the chain did not "
                                                  "wait for the one before it", at, (double) bits_float(zp[at]));
        e_age = kfdb_event_get_age(e);
        f_age = kfdb_event_get_age(f);
        if (e_age != 2 || f_age != 2)
                return set_result(c, RESULT_FAIL, "the chain's events have ages %" PRIu64 " and %" PRIu64
                                                  ", expected 2 (one signal each)", e_age, f_age);
        set_result(c, RESULT_PASS, "fill (SDMA) -> event -> saxpy (compute) -> event -> copy (SDMA), "
                                   "submitted at once: all %u results right, each event signaled once",
                   CHAIN_FLOATS);
}

/* ---- dispatch ---- */

static void check_dispatch(const Selftest *t, Check *c) {
        CtlSaxpyResult res = {};
        char why[256];
        int r;

        if (kernels_foreign(t, why, sizeof(why)))
                return set_result(c, RESULT_SKIP, "%s", why);
        r = ctl_demo_saxpy(t->s, t->prog, true, SAXPY_ELEMENTS, &res);
        if (r < 0)
                return set_result(c, RESULT_FAIL, "%s", res.failure[0] ? res.failure : strerror(-r));
        if (!res.ran)
                return set_result(c, RESULT_SKIP, "%s", res.skip_reason);
        c->elements = res.elements;
        c->elements_per_s = res.elements_per_s;
        set_result(c, RESULT_PASS, "saxpy over %" PRIu64 " floats in %.1f ms, %.1f M elements/s; every element "
                                   "equal to the CPU's fma", res.elements, res.ms, res.elements_per_s / 1e6);
}

/* ---- fault ---- */

#define MAX_CONTEXTS 4097u

/* Whether a fault here could end other sessions' jobs: shared mode, or a
 * context several sessions share (Isolation=identity or shared). */
static const char *fault_unsafe(const Selftest *t) {
        _cleanup_free_ kfdb_gpu_context *list = NULL;
        kfdb_gpu_contexts cs;

        if (strcmp(t->contexts.mechanism, "none") == 0)
                return "the daemon runs kernels in one GPU context shared by every client (mechanism none): "
                       "a fault would stop every client's work and restart the daemon";
        list = calloc(MAX_CONTEXTS, sizeof(*list));
        if (!list || kfdb_gpu_contexts_get(t->s, &cs, list, MAX_CONTEXTS) < 0)
                return "the daemon's GPU contexts could not be listed, so a fault's reach is unknown";
        for (size_t i = 0; i < MIN(cs.n, (size_t) MAX_CONTEXTS); i++)
                if (strcmp(list[i].kind, "session") != 0 && strcmp(list[i].kind, "device") != 0 &&
                    list[i].users > 1)
                        return "a GPU context here is shared by several sessions (Isolation=identity or shared): "
                               "a fault in it would cancel other sessions' jobs";
        return NULL;
}

/* One single-lane dispatch of fault(p, offset); returns its fence, or < 0 after filling c. */
static int fault_dispatch(Check *c, const Selftest *t, kfdb_code_object *co, kfdb_buffer *b, uint64_t words,
                          uint64_t *ret_fence) {
        _cleanup_batch_ kfdb_batch *batch = NULL;
        uint32_t one = 1;
        kfdb_arg args[] = { kfdb_arg_buffer(b, 0), kfdb_arg_value(&words, sizeof(words)) };
        int r;

        if (new_batch(c, t, &batch) < 0)
                return -EIO;
        r = kfdb_batch_dispatch(batch, co, "fault", 1, &one, &one, args, ELEMENTSOF(args));
        if (r < 0) {
                fail_call(c, t, r, "cannot add the fault kernel's dispatch");
                return r;
        }
        r = kfdb_batch_submit(batch, NULL, ret_fence);
        if (refused_as_skip(c, t, r))
                return r;
        if (r < 0)
                fail_call(c, t, r, "Submit of the fault kernel was refused");
        return r;
}

static void check_fault(const Selftest *t, Check *c) {
        _cleanup_code_object_ kfdb_code_object *co = NULL;
        _cleanup_buffer_ kfdb_buffer *b = NULL;
        char why[256], message[256];
        const char *unsafe;
        uint64_t fence;
        uint32_t *p;
        int r;

        if (ctl_fault_hsaco_size == 0)
                return set_result(c, RESULT_SKIP, "the fault kernel could not be built (%s)", ctl_fault_hsaco_missing);
        if (compute_missing(t, why, sizeof(why)))
                return set_result(c, RESULT_SKIP, "%s", compute_missing(t, why, sizeof(why)));
        unsafe = fault_unsafe(t);
        if (unsafe)
                return set_result(c, RESULT_SKIP, "%s", unsafe);
        r = kfdb_code_object_load(t->s, ctl_fault_hsaco, ctl_fault_hsaco_size, &co);
        if (r < 0)
                return fail_call(c, t, r, "cannot load the fault code object");
        if (new_buffer(c, t, 4096, &b, (void **) &p) < 0)
                return;
        memset(p, 0, 4096);
        c->context_lost_before = kfdb_session_get_context_lost(t->s);
        if (fault_dispatch(c, t, co, b, FAULT_WORDS, &fence) < 0)
                return;
        r = kfdb_fence_wait(t->s, fence, WAIT_MS);
        c->error = r;
        snprintf(message, sizeof(message), "%s", kfdb_session_last_error(t->s));
        selftest_drain_failures(t);
        c->context_lost_after = kfdb_session_get_context_lost(t->s);
        if (r != -EFAULT)
                return set_result(c, RESULT_FAIL, "a kernel storing 1 TiB past its buffer ended with %s, expected "
                                                  "EFAULT (%s)", r == 0 ? "success" : kfdb_strerror(r), message);
        if (c->context_lost_after <= c->context_lost_before)
                return set_result(c, RESULT_FAIL, "the fault failed its job but context_lost stayed at %" PRIu64,
                                  c->context_lost_after);
        /* The session goes on: the same kernel storing inside its buffer runs in a new context. */
        if (fault_dispatch(c, t, co, b, 0, &fence) < 0 || wait_job(c, t, fence, "dispatch after the fault") < 0)
                return;
        if (p[0] != FAULT_MARK)
                return set_result(c, RESULT_FAIL, "the dispatch after the fault completed but its store is missing "
                                                  "(0x%08x)", p[0]);
        set_result(c, RESULT_PASS, "EFAULT (%s); context_lost %" PRIu64 " -> %" PRIu64 "; the next dispatch ran",
                   message, c->context_lost_before, c->context_lost_after);
}

/* ---- timeout ---- */

/* The daemon ended the held job with ETIME: the job behind it is cancelled, the next one runs. */
static void timeout_by_daemon(const Selftest *t, Check *c, kfdb_buffer *b, const uint32_t *p, const uint64_t *fences,
                              double t0, const char *daemon_message) {
        _cleanup_batch_ kfdb_batch *batch = NULL;
        char message[256];
        uint64_t fence;
        int r;

        /* Its own copy: daemon_message may be the session's last error, which the next call replaces. */
        snprintf(message, sizeof(message), "%s", daemon_message);
        c->mechanism = "job-timeout";
        c->error = -ETIME;
        c->held_ms = selftest_now_ms() - t0;
        r = kfdb_fence_wait(t->s, fences[1], WAIT_MS);
        if (r != -ECANCELED)
                return set_result(c, RESULT_FAIL, "the fill behind the timed-out job ended with %s, expected "
                                                  "ECANCELED", r == 0 ? "success" : kfdb_strerror(r));
        selftest_drain_failures(t);
        if (new_batch(c, t, &batch) < 0)
                return;
        r = kfdb_batch_fill(batch, b, 0, 4096, 0x71E0u);
        if (r < 0)
                return fail_call(c, t, r, "cannot add a fill job");
        if (submit(c, t, batch, NULL, &fence, "fill after the timeout") < 0 ||
            wait_job(c, t, fence, "fill after the timeout") < 0)
                return;
        if (p[1023] != 0x71E0u)
                return set_result(c, RESULT_FAIL, "the fill after the timeout completed but left 0x%08x", p[1023]);
        set_result(c, RESULT_PASS, "the daemon ended the held job with ETIME after %.0f ms (this session's "
                                   "JobTimeout=: \"%s\"); the job behind it was cancelled; the next one ran",
                   c->held_ms, message);
}

/*
 * A wait-event job on an event nothing sets, and a fill behind it. Where the
 * session's JobTimeout= is shorter than the wait, the daemon ends it (ETIME).
 * A client cannot lower its own timeout (policy and D-Bus SetLimits only),
 * so otherwise the client's own bounded waits end: the fence wait and
 * WaitEvents' timeout_ms; then SetEvent releases the job.
 */
static void check_timeout(const Selftest *t, Check *c) {
        _cleanup_event_ kfdb_event *e = NULL;
        _cleanup_buffer_ kfdb_buffer *b = NULL;
        _cleanup_batch_ kfdb_batch *batch = NULL;
        uint64_t fences[2], age = 0;
        char message[256];
        uint32_t *p;
        double t0;
        int r;

        c->timeout_wait_ms = t->o->timeout_wait_ms;
        if (new_event(c, t, false, &e) < 0 || new_buffer(c, t, 4096, &b, (void **) &p) < 0 ||
            new_batch(c, t, &batch) < 0)
                return;
        memset(p, 0x11, 4096);
        r = kfdb_batch_wait_event_on(batch, e, KFDB_ENGINE_SDMA);
        if (r >= 0)
                r = kfdb_batch_fill(batch, b, 0, 4096, 0x71E1u);
        if (r < 0)
                return fail_call(c, t, r, "cannot add the wait and fill jobs");
        t0 = selftest_now_ms();
        if (submit(c, t, batch, fences, NULL, "wait and fill") < 0)
                return;
        r = kfdb_fence_wait(t->s, fences[0], (int) t->o->timeout_wait_ms);
        c->error = r == -ETIMEDOUT ? 0 : r;
        snprintf(message, sizeof(message), "%s", kfdb_session_last_error(t->s));
        if (r == -ETIME)
                return timeout_by_daemon(t, c, b, p, fences, t0, message);
        if (r != -ETIMEDOUT)
                return set_result(c, RESULT_FAIL, "a wait-event job on an event nobody set ended with %s",
                                  r == 0 ? "success" : kfdb_strerror(r));
        /* The daemon's timeout may come just after ours. */
        if (kfdb_fence_is_done(t->s, fences[0]) && kfdb_fence_wait(t->s, fences[0], 0) == -ETIME)
                return timeout_by_daemon(t, c, b, p, fences, t0, kfdb_session_last_error(t->s));
        c->mechanism = "client-wait";
        if (p[0] != 0x11111111u || kfdb_fence_is_done(t->s, fences[1]))
                return set_result(c, RESULT_FAIL, "the fill behind a held wait-event job ran");
        r = wait_event(c, t, e, &age, HELD_MS);
        if (r < 0)
                return;
        if (r != KFDB_WAIT_TIMEOUT)
                return set_result(c, RESULT_FAIL, "WaitEvents on an event nobody set gave result %d, expected "
                                                  "a timeout", r);
        c->held_ms = selftest_now_ms() - t0;
        r = kfdb_event_set(e);
        if (r < 0)
                return fail_call(c, t, r, "SetEvent failed");
        r = kfdb_fence_wait(t->s, fences[0], WAIT_MS);
        if (r == -ETIME) /* the daemon's timeout came just after the checks above */
                return timeout_by_daemon(t, c, b, p, fences, t0, kfdb_session_last_error(t->s));
        if (r < 0)
                return fail_call(c, t, r, "the released wait-event job failed");
        if (wait_job(c, t, fences[1], "fill behind the released wait") < 0)
                return;
        if (p[1023] != 0x71E1u)
                return set_result(c, RESULT_FAIL, "the fill behind the released wait left 0x%08x", p[1023]);
        set_result(c, RESULT_PASS, "still held after %.0f ms: this session's JobTimeout= is longer than "
                                   "--timeout-wait=%" PRIu32 " and a client cannot lower it, so the client's own "
                                   "timeouts were used (a fence wait, WaitEvents timeout_ms); SetEvent then "
                                   "released the job and the fill behind it ran",
                   c->held_ms, c->timeout_wait_ms);
}

const SelftestCheck selftest_checks[] = {
        { "copy", check_copy },
        { "fill", check_fill },
        { "events", check_events },
        { "events-engines", check_events_engines },
        { "dispatch", check_dispatch },
        { "fault", check_fault },
        { "timeout", check_timeout },
};
