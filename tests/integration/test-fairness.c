/* SPDX-License-Identifier: MIT */
/*
 * Scheduler fairness on a saturated engine: one SDMA queue, two sessions
 * with weights 1 and 3 (set over D-Bus), both keeping the engine busy with
 * copies. Over a window where both are backlogged, their shares of GPU busy
 * time must be within +-10% (relative) of 25% and 75%. Also: a light session
 * next to a flooding one sees its jobs finish within a bounded time, and its
 * small copies pass the flood's work on the GPU (the express SDMA queue).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "compute-util.h"
#include "harness.h"
#include "kfdbroker.h"

#define NAME "org.kfdbroker.Broker1"
#define PATH "/org/kfdbroker/Broker1"
#define IFACE "org.kfdbroker.Broker1"
#define JOB_BYTES (2u << 20)
/* Each client copies a different slice every time out of a working set much
 * larger than the CPU's caches: the simulated SDMA engine copies with the
 * CPU, and a cache-resident job would run faster than one from DRAM, which a
 * real engine's DMA does not see. */
#define SET_BYTES (96u << 20)
/* Far more than the hardware queue takes (a few ms of work), so both stay
 * backlogged even when this process gets no CPU for a while: 96 (192 MiB, a
 * weight-3 client's 25 ms) once let the weight-3 client run dry on a loaded
 * machine, and the weight-1 one got 45 %. */
#define OUTSTANDING 1024

static TestDaemon d;
static TestBus tb;

static void setup(void) {
        static const char *const args[] = { "--bus=system", "--sdma-queues=1", NULL };

        test_bus_start(&tb);
        test_daemon_start(&d, args);
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_bus_stop(&tb);
        test_fini_end();
}

TestSuite(fairness, .init = setup, .fini = teardown, .timeout = 120);

typedef struct Client {
        kfdb_session *s;
        kfdb_buffer *src, *dst;
        kfdb_batch *batch;
        uint64_t fences[4096];
        unsigned head, tail; /* outstanding fences in [head, tail) */
        unsigned min_backlog; /* the fewest jobs it had outstanding when pumped */
} Client;

static void client_open(Client *c) {
        memset(c, 0, sizeof(*c));
        cr_assert_eq(kfdb_session_new(d.sock, "fairness", &c->s), 0);
        cr_assert_eq(kfdb_buffer_alloc(c->s, SET_BYTES, KFDB_PLACEMENT_GTT, &c->src), 0);
        cr_assert_eq(kfdb_buffer_alloc(c->s, SET_BYTES, KFDB_PLACEMENT_GTT, &c->dst), 0);
        cr_assert_eq(kfdb_batch_new(c->s, &c->batch), 0);
        /* Make every page resident first: first-touch page faults in the
         * simulated engine are real GPU time of whoever touches first. */
        {
                uint64_t f;
                cr_assert_eq(kfdb_batch_fill(c->batch, c->src, 0, SET_BYTES, 0x01010101), 0);
                cr_assert_eq(kfdb_batch_fill(c->batch, c->dst, 0, SET_BYTES, 0), 0);
                cr_assert_eq(kfdb_batch_submit(c->batch, NULL, &f), 0);
                cr_assert_eq(kfdb_fence_wait(c->s, f, 60000), 0);
        }
}

/* Retires finished fences and tops up to OUTSTANDING jobs. */
static void client_pump(Client *c, unsigned outstanding) {
        int r;

        while (c->head < c->tail && kfdb_fence_is_done(c->s, c->fences[c->head % 4096]) == 1)
                c->head++;
        if (c->tail - c->head < c->min_backlog)
                c->min_backlog = c->tail - c->head;
        while (c->tail - c->head < outstanding) {
                uint64_t f;
                uint64_t off = (uint64_t) (c->tail % (SET_BYTES / JOB_BYTES)) * JOB_BYTES;
                cr_assert_eq(kfdb_batch_copy(c->batch, c->dst, off, c->src, off, JOB_BYTES), 0);
                r = kfdb_batch_submit(c->batch, NULL, &f);
                cr_assert_eq(r, 0, "%s", kfdb_session_last_error(c->s));
                c->fences[c->tail++ % 4096] = f;
        }
}

static void client_close(Client *c) {
        if (c->tail > 0)
                (void) kfdb_fence_wait(c->s, c->fences[(c->tail - 1) % 4096], 60000);
        kfdb_batch_free(c->batch);
        kfdb_session_free(c->s);
}

static uint64_t busy_ns(sd_bus *bus, uint64_t id) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        uint64_t v = UINT64_MAX;
        int r;

        r = sd_bus_call_method(bus, NAME, PATH, IFACE, "GetSession", &e, &reply, "t", id);
        cr_assert_geq(r, 0, "%s", e.message);
        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
        while (sd_bus_message_enter_container(reply, 'e', "sv") > 0) {
                const char *key;
                cr_assert_geq(sd_bus_message_read(reply, "s", &key), 0);
                if (strcmp(key, "Usage") == 0) {
                        cr_assert_geq(sd_bus_message_enter_container(reply, 'v', "a{sv}"), 0);
                        cr_assert_geq(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
                        while (sd_bus_message_enter_container(reply, 'e', "sv") > 0) {
                                const char *k;
                                cr_assert_geq(sd_bus_message_read(reply, "s", &k), 0);
                                if (strcmp(k, "BusyNSecSDMA") == 0)
                                        cr_assert_geq(sd_bus_message_read(reply, "v", "t", &v), 0);
                                else
                                        cr_assert_geq(sd_bus_message_skip(reply, "v"), 0);
                                cr_assert_geq(sd_bus_message_exit_container(reply), 0);
                        }
                        cr_assert_geq(sd_bus_message_exit_container(reply), 0);
                        cr_assert_geq(sd_bus_message_exit_container(reply), 0);
                } else
                        cr_assert_geq(sd_bus_message_skip(reply, "v"), 0);
                cr_assert_geq(sd_bus_message_exit_container(reply), 0);
        }
        sd_bus_message_unref(reply);
        cr_assert_neq(v, UINT64_MAX);
        return v;
}

static void set_weight(sd_bus *bus, uint64_t id, uint32_t w) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", id, 1,
                                   "Weight", "u", w);
        cr_assert_geq(r, 0, "%s", e.message);
}

static sd_bus *open_bus(void) {
        sd_bus *bus;

        cr_assert_eq(sd_bus_open_system(&bus), 0);
        for (int i = 0; i < 200 && sd_bus_get_name_creds(bus, NAME, 0, NULL) < 0; i++)
                usleep(10000);
        return bus;
}

/* Sleeps until either session's event fd fires (or 10 ms), and drains them. */
static void wait_either(kfdb_session *a, kfdb_session *b) {
        struct pollfd p[2] = { { .fd = kfdb_get_event_fd(a), .events = POLLIN },
                               { .fd = kfdb_get_event_fd(b), .events = POLLIN } };
        uint64_t n;

        if (poll(p, 2, 10) > 0)
                for (int i = 0; i < 2; i++)
                        if (p[i].revents & POLLIN)
                                (void) !read(p[i].fd, &n, sizeof(n));
}

static void run_for(Client *a, Client *b, uint64_t ns) {
        uint64_t end = harness_now_ns() + ns;

        while (harness_now_ns() < end) {
                client_pump(a, OUTSTANDING);
                client_pump(b, OUTSTANDING);
                wait_either(a->s, b->s);
        }
}

static uint64_t bytes_copied(const Client *c) {
        kfdb_usage u;

        cr_assert_eq(kfdb_query(c->s, &u), 0);
        return u.bytes_copied;
}

/* Runs both clients for a window of ns; a's share of the GPU busy time and of
 * the bytes in it. Returns whether both kept work queued all through it: a
 * share measured where one ran dry says nothing about the weights. */
static bool measure_window(sd_bus *bus, Client *a, Client *b, uint64_t ns, double *ret_busy_share,
                           double *ret_bytes_share) {
        uint64_t a0, b0, a1, b1, abytes0, bbytes0, abytes, bbytes;

        a->min_backlog = b->min_backlog = UINT_MAX;
        a0 = busy_ns(bus, kfdb_session_get_id(a->s));
        b0 = busy_ns(bus, kfdb_session_get_id(b->s));
        abytes0 = bytes_copied(a);
        bbytes0 = bytes_copied(b);
        run_for(a, b, ns);
        a1 = busy_ns(bus, kfdb_session_get_id(a->s));
        b1 = busy_ns(bus, kfdb_session_get_id(b->s));
        abytes = bytes_copied(a) - abytes0;
        bbytes = bytes_copied(b) - bbytes0;
        *ret_busy_share = (double) (a1 - a0) / (double) ((a1 - a0) + (b1 - b0));
        *ret_bytes_share = (double) abytes / (double) (abytes + bbytes);
        fprintf(stderr, "fairness: weight-1 session had %.1f%% of the GPU busy time (%.0f vs %.0f ms), moved %.1f%% "
                        "of the bytes (%llu vs %llu MiB); fewest jobs outstanding %u and %u\n",
                100 * *ret_busy_share, (double) (a1 - a0) / 1e6, (double) (b1 - b0) / 1e6, 100 * *ret_bytes_share,
                (unsigned long long) abytes >> 20, (unsigned long long) bbytes >> 20, a->min_backlog,
                b->min_backlog);
        return a->min_backlog > 0 && b->min_backlog > 0;
}

Test(fairness, weights_1_to_3_share_a_saturated_engine_25_75) {
        sd_bus *bus = open_bus();
        double share = 0, bytes_share;
        bool backlogged = false;
        Client a, b;

        client_open(&a);
        client_open(&b);
        set_weight(bus, kfdb_session_get_id(a.s), 1);
        set_weight(bus, kfdb_session_get_id(b.s), 3);

        run_for(&a, &b, 300000000ull); /* warm up: both backlogged */
        for (int w = 0; w < 3 && !backlogged; w++)
                backlogged = measure_window(bus, &a, &b, 2000000000ull, &share, &bytes_share);
        cr_assert(backlogged, "in 3 windows of 2 s the clients never both stayed backlogged (this process starved?)");
        cr_assert(share >= 0.225 && share <= 0.275, "weight 1:3 should give 25%% +-10%%, got %.1f%%", share * 100);
        client_close(&a);
        client_close(&b);
        sd_bus_unref(bus);
}

/* Runs c alone for ns, then lets all its jobs finish, so it goes idle. */
static void run_alone_then_drain(Client *c, uint64_t ns) {
        uint64_t end = harness_now_ns() + ns;

        while (harness_now_ns() < end) {
                client_pump(c, OUTSTANDING);
                wait_either(c->s, c->s);
        }
        cr_assert_eq(kfdb_fence_wait(c->s, c->fences[(c->tail - 1) % 4096], 60000), 0);
        c->head = c->tail;
}

/* A session that had the engine to itself for a while, went idle and comes
 * back next to a newcomer gets its share at once. The newcomer's stream
 * woke while no other was active: it must not keep the virtual time it
 * started with (0) while the other's grew by all it ran alone — that credit
 * starved the old session until the newcomer had run as long (a light
 * client waited 1.3 s behind 8 compute flooders in a shared context). */
Test(fairness, a_session_that_ran_alone_is_not_starved_by_a_newcomer) {
        sd_bus *bus = open_bus();
        double share = 0, bytes_share;
        bool backlogged = false;
        Client a, b;

        client_open(&a);
        run_alone_then_drain(&a, 1500000000ull);
        client_open(&b);
        client_pump(&b, OUTSTANDING); /* b's stream wakes with nothing else active */
        for (int w = 0; w < 3 && !backlogged; w++)
                backlogged = measure_window(bus, &a, &b, 1000000000ull, &share, &bytes_share);
        cr_assert(backlogged, "in 3 windows of 1 s the clients never both stayed backlogged (this process starved?)");
        cr_assert(share >= 0.35, "equal weights should share the engine about evenly at once, the old session got %.1f%%",
                  share * 100);
        client_close(&a);
        client_close(&b);
        sd_bus_unref(bus);
}

static void set_priority(sd_bus *bus, uint64_t id, const char *prio) {
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r = sd_bus_call_method(bus, NAME, PATH, IFACE, "SetLimits", &e, NULL, "ta{sv}", id, 1,
                                   "Priority", "s", prio);
        cr_assert_geq(r, 0, "%s", e.message);
}

Test(fairness, higher_priority_class_is_served_first) {
        sd_bus *bus = open_bus();
        Client lo, hi;
        uint64_t l0, h0, l1, h1;
        bool backlogged = false;
        double share = 0;

        client_open(&lo);
        client_open(&hi);
        set_priority(bus, kfdb_session_get_id(hi.s), "high");
        set_priority(bus, kfdb_session_get_id(lo.s), "low");
        run_for(&lo, &hi, 300000000ull);
        /* While the high class has work queued, the low class only gets
         * what it leaves: a window where it ran dry (this process got no
         * CPU for long) is measured again. */
        for (int w = 0; w < 3 && !backlogged; w++) {
                hi.min_backlog = UINT_MAX;
                l0 = busy_ns(bus, kfdb_session_get_id(lo.s));
                h0 = busy_ns(bus, kfdb_session_get_id(hi.s));
                run_for(&lo, &hi, 1000000000ull);
                l1 = busy_ns(bus, kfdb_session_get_id(lo.s));
                h1 = busy_ns(bus, kfdb_session_get_id(hi.s));
                backlogged = hi.min_backlog > 0;
                share = (double) (h1 - h0) / (double) ((h1 - h0) + (l1 - l0));
                fprintf(stderr, "priority: the high-class session had %.1f%% of the GPU busy time; fewest jobs "
                                "it had outstanding %u\n", 100 * share, hi.min_backlog);
        }
        cr_assert(backlogged, "in 3 windows of 1 s the high class never stayed backlogged (this process starved?)");
        cr_assert_gt(share, 0.9, "high class got only %.1f%%", 100 * share);
        client_close(&lo);
        client_close(&hi);
        sd_bus_unref(bus);
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

/* A light session that wakes from idle next to a flood waits behind a few
 * milliseconds of the flood's work (its queue's budget of estimated GPU time,
 * the flood's copies in 2 MiB pieces), not behind 64 MiB of it: its median
 * latency stays under the time the flood takes to copy 32 MiB, measured in
 * the same run (machines differ; the ratio does not). */
Test(fairness, a_light_session_waits_behind_little_of_a_flood) {
        enum { N = 21 };
        Client flood, light;
        uint64_t lat[N], t_start, t_end, bytes0, bytes1;
        kfdb_buffer *small;
        kfdb_batch *batch;
        kfdb_usage u;

        client_open(&flood);
        client_open(&light);
        cr_assert_eq(kfdb_buffer_alloc(light.s, 4096, KFDB_PLACEMENT_GTT, &small), 0);
        cr_assert_eq(kfdb_batch_new(light.s, &batch), 0);
        client_pump(&flood, 2000);
        usleep(200000); /* the flood's queue reaches its budget, its throughput is measured */
        cr_assert_eq(kfdb_query(flood.s, &u), 0);
        bytes0 = u.bytes_copied;
        t_start = harness_now_ns();
        for (int i = 0; i < N; i++) {
                uint64_t f, t0;
                usleep(5000); /* idle between jobs: a light client */
                client_pump(&flood, 2000);
                t0 = harness_now_ns();
                cr_assert_eq(kfdb_batch_fill(batch, small, 0, 4096, (uint32_t) i), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &f), 0);
                cr_assert_eq(kfdb_fence_wait(light.s, f, 30000), 0);
                lat[i] = harness_now_ns() - t0;
        }
        t_end = harness_now_ns();
        cr_assert_eq(kfdb_query(flood.s, &u), 0);
        bytes1 = u.bytes_copied;
        qsort(lat, N, sizeof lat[0], cmp_u64);
        double rate = (double) (bytes1 - bytes0) / (double) (t_end - t_start); /* bytes per ns */
        double t32 = (double) (32u << 20) / rate;
        cr_log_info("light session median latency next to a flood: %.2f ms; the flood copies 32 MiB in %.2f ms",
                    (double) lat[N / 2] / 1e6, t32 / 1e6);
        cr_assert_gt(bytes1, bytes0, "the flood made progress");
        cr_assert_lt((double) lat[N / 2], t32,
                     "a 4 KiB fill waited %.2f ms (median), longer than the flood takes to copy 32 MiB (%.2f ms)",
                     (double) lat[N / 2] / 1e6, t32 / 1e6);
        kfdb_batch_free(batch);
        kfdb_session_free(light.s);
        kfdb_session_free(flood.s);
}

Test(fairness, a_flood_does_not_starve_a_light_session) {
        Client flood, light;
        uint64_t worst = 0;
        kfdb_buffer *small;
        kfdb_batch *batch;

        client_open(&flood);
        client_open(&light);
        cr_assert_eq(kfdb_buffer_alloc(light.s, 4096, KFDB_PLACEMENT_GTT, &small), 0);
        cr_assert_eq(kfdb_batch_new(light.s, &batch), 0);
        /* The flood keeps far more work queued than the hardware queue takes. */
        client_pump(&flood, 2000);
        for (int i = 0; i < 20; i++) {
                uint64_t f, t0 = harness_now_ns(), dt;
                cr_assert_eq(kfdb_batch_fill(batch, small, 0, 4096, (uint32_t) i), 0);
                cr_assert_eq(kfdb_batch_submit(batch, NULL, &f), 0);
                cr_assert_eq(kfdb_fence_wait(light.s, f, 30000), 0);
                dt = harness_now_ns() - t0;
                worst = dt > worst ? dt : worst;
                client_pump(&flood, 2000);
        }
        /* Bounded by the hardware queue's budget (a few ms of work), not by the
         * 2000 jobs (4 GiB) the flood has queued. */
        cr_log_info("light session worst latency next to a flood: %.1f ms", (double) worst / 1e6);
        cr_assert_lt(worst, 3000000000ull, "a 4 KiB fill waited %.1f ms behind the flood",
                     (double) worst / 1e6);
        kfdb_batch_free(batch);
        kfdb_session_free(light.s);
        kfdb_session_free(flood.s); /* its queued jobs are dropped */
}

/* ---- compute: priority classes ---- */

/* Collatz steps of 1 .. 4096 in 64 workgroups: a few ms on the simulator,
 * the same work every time. Each dispatch writes a slice of its own (of
 * SLICES, reused in turn), poisoned before it is submitted, so what it has
 * done so far can be counted. */
#define COLLATZ_N 4096u
#define COLLATZ_BLOCK 64u
#define SLICES 64u
#define POISON 0xFFFFFFFFu

typedef struct Dispatcher {
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *in, *out;
        uint32_t *out_map;      /* SLICES slices of COLLATZ_N entries */
        kfdb_batch *batch;
        uint64_t fences[4096];
        unsigned head, tail;    /* outstanding dispatches in [head, tail) */
        unsigned done;          /* retired so far */
        unsigned min_backlog;   /* the fewest dispatches it had outstanding when pumped */
} Dispatcher;

static void dispatcher_open(Dispatcher *c, const char *name) {
        uint32_t *in;

        memset(c, 0, sizeof *c);
        cr_assert_eq(kfdb_session_new(d.sock, name, &c->s), 0);
        c->co = load_kernel(c->s, "collatz");
        c->in = new_buffer(c->s, COLLATZ_N * 4, 0, (void **) &in);
        c->out = new_buffer(c->s, SLICES * COLLATZ_N * 4, 0xFF, (void **) &c->out_map);
        for (uint32_t i = 0; i < COLLATZ_N; i++)
                in[i] = i + 1;
        cr_assert_eq(kfdb_batch_new(c->s, &c->batch), 0);
}

static uint32_t *dispatcher_slice(Dispatcher *c, unsigned k) {
        return c->out_map + (size_t) (k % SLICES) * COLLATZ_N;
}

/* Submits dispatch number c->tail (fewer than SLICES outstanding: its slice
 * is free). */
static void dispatcher_submit(Dispatcher *c) {
        uint32_t n = COLLATZ_N, block = COLLATZ_BLOCK;
        kfdb_arg args[] = { kfdb_arg_buffer(c->in, 0),
                            kfdb_arg_buffer(c->out, (uint64_t) (c->tail % SLICES) * COLLATZ_N * 4),
                            kfdb_arg_value(&n, 4) };
        uint64_t f;
        int r;

        cr_assert_lt(c->tail - c->head, SLICES);
        memset(dispatcher_slice(c, c->tail), 0xFF, COLLATZ_N * 4);
        cr_assert_eq(kfdb_batch_dispatch(c->batch, c->co, "collatz", 1, &n, &block, args, 3), 0);
        r = kfdb_batch_submit(c->batch, NULL, &f);
        cr_assert_eq(r, 0, "%s", kfdb_session_last_error(c->s));
        c->fences[c->tail++ % 4096] = f;
}

/* Retires finished dispatches and tops up to `outstanding`. */
static void dispatcher_pump(Dispatcher *c, unsigned outstanding) {
        while (c->head < c->tail && kfdb_fence_is_done(c->s, c->fences[c->head % 4096]) == 1) {
                c->head++;
                c->done++;
        }
        if (c->tail - c->head < c->min_backlog)
                c->min_backlog = c->tail - c->head;
        while (c->tail - c->head < outstanding)
                dispatcher_submit(c);
}

static void dispatcher_drain(Dispatcher *c) {
        if (c->tail > c->head)
                cr_assert_eq(kfdb_fence_wait(c->s, c->fences[(c->tail - 1) % 4096], DISPATCH_TIMEOUT_MS), 0);
        c->done += c->tail - c->head;
        c->head = c->tail;
}

static void dispatcher_close(Dispatcher *c) {
        dispatcher_drain(c);
        kfdb_batch_free(c->batch);
        kfdb_buffer_free(c->in);
        kfdb_buffer_free(c->out);
        kfdb_code_object_free(c->co);
        kfdb_session_free(c->s);
}

/* Entries written so far by c's outstanding dispatches. */
static unsigned dispatcher_progress(Dispatcher *c) {
        unsigned k = 0;

        for (unsigned t = c->head; t < c->tail; t++) {
                const volatile uint32_t *slice = dispatcher_slice(c, t);
                for (unsigned i = 0; i < COLLATZ_N; i++)
                        k += slice[i] != POISON;
        }
        return k;
}

static void dispatchers_run_for(Dispatcher *a, Dispatcher *b, unsigned outstanding, uint64_t ns) {
        uint64_t end = harness_now_ns() + ns;

        while (harness_now_ns() < end) {
                dispatcher_pump(a, outstanding);
                dispatcher_pump(b, outstanding);
                wait_either(a->s, b->s);
        }
}

/* Like dispatchers_run_for(), but the high session keeps hi_outstanding
 * dispatches queued and the low one lo_outstanding, until the high one has
 * completed n more (or ns have passed). */
static void dispatchers_run_until(Dispatcher *lo, unsigned lo_outstanding, Dispatcher *hi, unsigned hi_outstanding,
                                  unsigned n, uint64_t ns) {
        uint64_t end = harness_now_ns() + ns;
        unsigned goal = hi->done + n;

        while (hi->done < goal && harness_now_ns() < end) {
                dispatcher_pump(hi, hi_outstanding);
                dispatcher_pump(lo, lo_outstanding);
                wait_either(lo->s, hi->s);
        }
}

/*
 * A high and a low session (their own GPU contexts, or the shared one), both
 * flooding the compute engine: while the high one has dispatches queued, the
 * low one gets no new dispatch onto the GPU, so of the dispatches that
 * complete the high one's are more than 90 % — counted, not timed: the GPU
 * timestamps of dispatches that overlap on the GPU overlap too.
 *
 * The property holds only while the high session has work queued, and what
 * keeps it queued is this process: on a loaded host (ASan, two CPU burners)
 * four in flight ran dry whenever the process waited for a CPU, the low
 * session rightly got the GPU, and the high one completed 84 %. So the high
 * session keeps HI_BACKLOG dispatches queued (~100 ms of work), each window
 * of HI_SAMPLES of its completions is counted only if it never had fewer
 * than two outstanding when looked at (one may end between the look and the
 * next submit), and a window where it ran dry is measured again.
 */
#define HI_BACKLOG 32u
#define HI_SAMPLES 150u

static void high_class_gets_the_compute_engine_first(void) {
        sd_bus *bus = open_bus();
        Dispatcher lo, hi;
        unsigned l0 = 0, h0 = 0, windows = 0;
        bool backlogged = false;
        double share;

        compute_require_kernels();
        dispatcher_open(&lo, "compute-low");
        dispatcher_open(&hi, "compute-high");
        set_priority(bus, kfdb_session_get_id(hi.s), "high");
        set_priority(bus, kfdb_session_get_id(lo.s), "low");
        /* The contexts and queues come up with the first dispatches. */
        dispatchers_run_for(&lo, &hi, 4, 300000000ull);
        for (; windows < 5 && !backlogged; windows++) {
                /* The high session's queue fills up, and what the low one
                 * had on the GPU before ends. */
                dispatchers_run_until(&lo, 4, &hi, HI_BACKLOG, HI_BACKLOG, 60000000000ull);
                l0 = lo.done;
                h0 = hi.done;
                hi.min_backlog = UINT_MAX;
                dispatchers_run_until(&lo, 4, &hi, HI_BACKLOG, HI_SAMPLES, 60000000000ull);
                backlogged = hi.min_backlog >= 2;
                fprintf(stderr, "compute priority, window %u: the high session completed %u dispatches, the low "
                                "one %u; the high one had at least %u queued\n",
                        windows, hi.done - h0, lo.done - l0, hi.min_backlog);
        }
        cr_assert(backlogged, "in %u windows the high session never stayed backlogged (this process starved?)", windows);
        share = (double) (hi.done - h0) / (double) (hi.done - h0 + lo.done - l0);
        fprintf(stderr, "compute priority: the high session completed %u dispatches, the low one %u (%.1f %%)\n",
                hi.done - h0, lo.done - l0, 100 * share);
        cr_assert_geq(hi.done - h0, HI_SAMPLES, "the high session made progress");
        cr_assert_gt(share, 0.9, "high class completed only %.1f%% of the dispatches (%u vs %u)", 100 * share,
                     hi.done - h0, lo.done - l0);
        dispatcher_close(&lo);
        dispatcher_close(&hi);
        sd_bus_unref(bus);
}

Test(fairness, high_class_gets_the_compute_engine_first) {
        high_class_gets_the_compute_engine_first();
}

Test(fairness, high_class_gets_the_shared_compute_engine_first) {
        static const char *const shared[] = { "--bus=system", "--sdma-queues=1", "--contexts=shared", NULL };

        cr_assert_eq(test_daemon_restart(&d, SIGTERM, shared), 0);
        high_class_gets_the_compute_engine_first();
}

/*
 * What a low-priority flood could add to a high-priority dispatch's latency
 * is its own work running while the high one's does. So: the low session
 * keeps eight dispatches queued; the high one submits one at a time; from
 * the high dispatch's first results to half of them the flood finishes
 * nothing but the workgroups it was running when the high one started (one
 * per simulated thread) — counted in the flood's output, not timed (on this
 * 2-core machine shared with other builds, 15-sample latency medians varied
 * from 6 to 97 ms run to run). A look that came too late (the high dispatch
 * had ended: this process waited for a CPU) is not counted; the test goes on
 * until LOOKS looks came in time, up to N dispatches. The latencies are
 * printed.
 */
Test(fairness, a_low_priority_flood_runs_nothing_while_a_high_priority_dispatch_runs) {
        enum { N = 48, LOOKS = 8, MAX_WORKGROUPS = 3 };
        sd_bus *bus = open_bus();
        unsigned looks = 0, worst = 0, i;
        uint64_t lat[N];
        Dispatcher lo, hi;

        compute_require_kernels();
        dispatcher_open(&lo, "compute-flood");
        dispatcher_open(&hi, "compute-light");
        set_priority(bus, kfdb_session_get_id(hi.s), "high");
        set_priority(bus, kfdb_session_get_id(lo.s), "low");
        dispatchers_run_for(&lo, &hi, 1, 200000000ull); /* contexts up */
        dispatcher_drain(&hi);
        for (i = 0; i < N && looks < LOOKS; i++) {
                const volatile uint32_t *h = dispatcher_slice(&hi, hi.tail);
                unsigned first, half, got;
                uint64_t t0;

                dispatchers_run_for(&lo, &lo, 8, 5000000ull);
                t0 = harness_now_ns();
                dispatcher_submit(&hi);
                while (h[0] == POISON && h[COLLATZ_N / 2 - 1] == POISON)
                        usleep(20);
                first = dispatcher_progress(&lo);
                while (h[COLLATZ_N / 2 - 1] == POISON)
                        usleep(20);
                half = dispatcher_progress(&lo);
                if (h[COLLATZ_N - 1] == POISON) { /* still running: the look was in time */
                        got = (half - first + COLLATZ_BLOCK - 1) / COLLATZ_BLOCK;
                        worst = got > worst ? got : worst;
                        looks++;
                }
                dispatcher_drain(&hi);
                lat[i] = harness_now_ns() - t0;
        }
        qsort(lat, i, sizeof lat[0], cmp_u64);
        fprintf(stderr, "compute priority: at most %u low-priority workgroups finished during the first half of a "
                        "high-priority dispatch (%u looks in time of %u); its latency next to the flood %.2f ms "
                        "(median)\n", worst, looks, i, (double) lat[i / 2] / 1e6);
        cr_assert_geq(looks, LOOKS, "only %u of %u looks came before the high dispatch ended", looks, i);
        cr_assert_leq(worst, MAX_WORKGROUPS, "%u workgroups of the low-priority flood ran while a high-priority "
                                            "dispatch ran", worst);
        dispatcher_close(&lo);
        dispatcher_close(&hi);
        sd_bus_unref(bus);
}

/*
 * In a GPU context several sessions share, a session whose dispatches are
 * all short gets the context's express queue: its dispatch does not wait
 * behind another session's long one, which the queue they would share runs
 * first (a queue runs its dispatches in order). Here the long one is the
 * gate kernel, which holds its queue until the test opens the gate. The
 * light session warms up while it is the context's only user, so its stream
 * takes the ordinary queue (there is no express queue for one user); when
 * it wakes with another user there, it must move to the express queue. It
 * used to keep the queue it had, and waited behind the gate: the first
 * attempt always failed and only the retry (the other session a user of
 * the context by then) passed. Each attempt has new sessions; an attempt
 * where a loaded host made the warm-up dispatches look long (so the light
 * session had not earned the express queue) is repeated.
 */
Test(fairness, short_dispatches_pass_a_long_one_in_a_shared_context) {
        static const char *const shared[] = { "--bus=system", "--sdma-queues=1", "--contexts=shared", NULL };
        const uint32_t one = 1;
        bool passed = false;

        compute_require_kernels();
        cr_assert_eq(test_daemon_restart(&d, SIGTERM, shared), 0);
        for (int attempt = 0; attempt < 5 && !passed; attempt++) {
                kfdb_code_object *empty, *gate;
                kfdb_session *light, *heavy;
                uint64_t gate_fence, fence;
                kfdb_buffer *flag, *out;
                uint32_t *flag_map;
                void *out_map;
                kfdb_batch *b;
                int r;

                cr_assert_eq(kfdb_session_new(d.sock, "light", &light), 0);
                empty = load_kernel(light, "empty");
                cr_assert_eq(kfdb_batch_new(light, &b), 0);
                /* The light session's dispatches are seen to be short (the
                 * first ones, which bring code and caches in, are not). */
                for (int i = 0; i < 50; i++)
                        run_dispatch(light, empty, "empty", 1, &one, &one, NULL, 0);
                cr_assert_eq(kfdb_session_new(d.sock, "heavy", &heavy), 0);
                gate = load_kernel(heavy, "gate");
                flag = new_buffer(heavy, 4096, 0, (void **) &flag_map);
                out = new_buffer(heavy, 4096, 0, &out_map);
                __atomic_store_n(flag_map, 0, __ATOMIC_RELEASE);
                gate_fence = hold_gpu(heavy, gate, flag, out);
                usleep(20000); /* the gate is on the GPU (running or about to: ahead on its queue) */
                cr_assert_eq(kfdb_batch_dispatch(b, empty, "empty", 1, &one, &one, NULL, 0), 0);
                cr_assert_eq(kfdb_batch_submit(b, NULL, &fence), 0, "%s", kfdb_session_last_error(light));
                r = kfdb_fence_wait(light, fence, 3000);
                passed = r == 0 && kfdb_fence_is_done(heavy, gate_fence) == 0;
                fprintf(stderr, "express queue, attempt %d: the light dispatch %s\n", attempt,
                        r == 0 ? "completed while the gate held the other queue" : "waited behind the gate");
                __atomic_store_n(flag_map, 1, __ATOMIC_RELEASE);
                cr_assert_eq(kfdb_fence_wait(heavy, gate_fence, DISPATCH_TIMEOUT_MS), 0, "%s",
                             kfdb_session_last_error(heavy));
                cr_assert_eq(kfdb_fence_wait(light, fence, DISPATCH_TIMEOUT_MS), 0, "%s",
                             kfdb_session_last_error(light));
                kfdb_batch_free(b);
                kfdb_buffer_free(flag);
                kfdb_buffer_free(out);
                kfdb_code_object_free(empty);
                kfdb_code_object_free(gate);
                kfdb_session_free(light);
                kfdb_session_free(heavy);
        }
        if (!passed)
                test_daemon_dump_log(&d);
        cr_assert(passed, "the light session's dispatch never completed while the other's held its queue, 5 times");
}

/* ---- the express SDMA queue ---- */

static void unchunked(void) {
        setenv("KFDBROKERD_CHUNKING", "0", 1);
}

static void setup_unchunked(void) {
        static const char *const args[] = { "--sdma-queues=1", NULL };

        test_daemon_start_hooked(&d, args, unchunked);
}

/* The simulated kernel of the worker-process mechanism (KFD 1.18): the
 * copies still run in the device context, on its express queue. */
static void setup_unchunked_kfd_1_18(void) {
        static const char *const args[] = { "--sdma-queues=1", "--sim-kfd-version=1.18", NULL };

        test_daemon_start_hooked(&d, args, unchunked);
}

/* Two ordinary queues (the default): the express one is the device's third
 * SDMA queue, on the first engine with the first ordinary one (KFD's
 * engine = slot % engines), where the flood (the first session) runs: the
 * fill waits for the engine's switch, not for the flood's copy. (Without an
 * express queue this passes too: the light session's own ordinary queue is
 * then the second one, on the other engine.) */
static void setup_unchunked_shared_engine(void) {
        test_daemon_start_hooked(&d, NULL, unchunked);
}

static void teardown_unchunked(void) {
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(express, .init = setup_unchunked, .fini = teardown_unchunked, .timeout = 120);
TestSuite(express_shared_engine, .init = setup_unchunked_shared_engine, .fini = teardown_unchunked, .timeout = 120);
TestSuite(express_kfd_1_18, .init = setup_unchunked_kfd_1_18, .fini = teardown_unchunked, .timeout = 120);

/*
 * A small copy of a session that wakes from idle does not wait behind a
 * flood's work already on the GPU: it goes to the express SDMA queue
 * (scheduler.c, EXPRESS_SDMA_BYTES), not behind the flood's copy on the one
 * ordinary queue (--sdma-queues=1) they would otherwise share. Shown by
 * order, not time: one ring runs its jobs in the order they were written, so
 * a fill submitted once the flood's copy is on the GPU (Status says so)
 * cannot end before that copy on the same ring. The flood's copy is one
 * 32 MiB job (chunking off, so it is one job on the ring, several ms on the
 * simulator); a round where it ended before the fill was submitted (this
 * process got no CPU) says nothing and is run again. With the express queue
 * on the flood's engine, the engine switches to it inside the flood's copy
 * (sim-sdma.c, the phase quantum). Copies run in the device context, so
 * this holds whatever context mechanism the compute side uses: shown with
 * the simulated KFD 1.18 of the worker processes too.
 */
static void small_copy_passes_a_flood_on_the_ring(void) {
        enum { FLOOD_BYTES = 32u << 20, ROUNDS = 20 };
        kfdb_session *flood, *light;
        kfdb_buffer *src, *dst, *small;
        kfdb_batch *fb, *lb;
        kfdb_daemon_status st;
        int passed = 0, said = 0;
        uint64_t f;

        cr_assert_eq(kfdb_session_new(d.sock, "flood", &flood), 0);
        cr_assert_eq(kfdb_session_new(d.sock, "light", &light), 0);
        cr_assert_eq(kfdb_buffer_alloc(flood, FLOOD_BYTES, KFDB_PLACEMENT_GTT, &src), 0);
        cr_assert_eq(kfdb_buffer_alloc(flood, FLOOD_BYTES, KFDB_PLACEMENT_GTT, &dst), 0);
        cr_assert_eq(kfdb_buffer_alloc(light, 4096, KFDB_PLACEMENT_GTT, &small), 0);
        cr_assert_eq(kfdb_batch_new(flood, &fb), 0);
        cr_assert_eq(kfdb_batch_new(light, &lb), 0);
        /* Every page resident first (first-touch faults are the simulated engine's time). */
        cr_assert_eq(kfdb_batch_fill(fb, src, 0, FLOOD_BYTES, 1), 0);
        cr_assert_eq(kfdb_batch_fill(fb, dst, 0, FLOOD_BYTES, 0), 0);
        cr_assert_eq(kfdb_batch_submit(fb, NULL, &f), 0);
        cr_assert_eq(kfdb_fence_wait(flood, f, 60000), 0);

        for (int round = 0; round < ROUNDS && said < 5; round++) {
                uint64_t ff, lf;
                cr_assert_eq(kfdb_batch_copy(fb, dst, 0, src, 0, FLOOD_BYTES), 0);
                cr_assert_eq(kfdb_batch_submit(fb, NULL, &ff), 0);
                /* On the GPU now? A submit through the ring returns before
                 * the daemon has read it; a request on the socket is served
                 * after what the ring holds, and Status counts the jobs on
                 * the GPU (here only the flood's). */
                cr_assert_eq(kfdb_status(flood, &st), 0);
                if (st.jobs_in_flight == 0) {
                        cr_assert_eq(kfdb_fence_wait(flood, ff, 60000), 0);
                        continue; /* done already: no order to see */
                }
                cr_assert_eq(kfdb_batch_fill(lb, small, 0, 4096, (uint32_t) round), 0);
                cr_assert_eq(kfdb_batch_submit(lb, NULL, &lf), 0);
                bool flood_done_before = kfdb_fence_is_done(flood, ff) == 1;
                cr_assert_eq(kfdb_fence_wait(light, lf, 60000), 0);
                bool flood_done_after = kfdb_fence_is_done(flood, ff) == 1;
                cr_assert_eq(kfdb_fence_wait(flood, ff, 60000), 0);
                if (flood_done_before)
                        continue; /* the copy ended before the fill went in: no order to see */
                said++;
                if (!flood_done_after)
                        passed++;
        }
        cr_log_info("the fill ended before the flood's copy written ahead of it in %d of %d rounds", passed, said);
        cr_assert_gt(said, 0, "the flood's copy always ended before the fill was submitted (this process starved?)");
        cr_assert_gt(passed, 0, "the 4 KiB fill never ended before the flood's 32 MiB copy written to the GPU "
                                "before it (%d rounds): it waited behind it on one ring", said);
        kfdb_batch_free(fb);
        kfdb_batch_free(lb);
        kfdb_session_free(light);
        kfdb_session_free(flood);
}

Test(express, a_small_copy_passes_a_flood_on_the_ring) {
        small_copy_passes_a_flood_on_the_ring();
}

Test(express_shared_engine, a_small_copy_passes_a_flood_on_the_ring) {
        small_copy_passes_a_flood_on_the_ring();
}

Test(express_kfd_1_18, a_small_copy_passes_a_flood_on_the_ring) {
        small_copy_passes_a_flood_on_the_ring();
}
