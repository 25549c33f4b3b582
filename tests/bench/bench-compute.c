/* SPDX-License-Identifier: MIT */
/*
 * Compute through the broker, on the simulated GPU:
 *   1. Round trip: an empty kernel (one workgroup of one work-item) submitted
 *      and its completion seen through the session page, against the SDMA
 *      no-op job round trip measured in the same run (and a no-op job on the
 *      compute queue, which separates the cost of the queue from the cost of
 *      the dispatch). The three are interleaved so that noise on this small
 *      machine hits them alike; compare the ratios.
 *   2. Noisy neighbours on the compute engine, in both modes of GPU contexts
 *      (issue 13: contexts share the engines, so latency must hold across
 *      them): a light client's empty-kernel dispatch p99 next to FLOODERS
 *      clients that each keep one long dispatch in flight, against its p99
 *      next to BURNERS CPU burners, with a GPU context per session (the
 *      default) and with one context for all (--contexts=shared). The goal is
 *      the one for copies: at most 2x. The flooders' dispatches per second
 *      are printed for both modes.
 * Starts its own kfdbrokerd --device=sim (path from $KFDBROKERD or the build
 * tree), with a policy that lets this uid dispatch in either mode.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench-util.h"
#include "kfdbroker.h"

#define ROUND_TRIPS 2000
#define WARMUP 100

#define FLOODERS 8
#define FLOOD_ITEMS 4096u
#define BURNERS 2
#define NOISE_ROUNDS 3
#define NOISE_WARMUP_NS 500000000ull
#define NOISE_NS 2500000000ull

#if defined(EMPTY_HSACO) && defined(COLLATZ_HSACO)

static void die(kfdb_session *s, const char *what, int r) {
        fprintf(stderr, "bench-compute: %s: %s%s%s\n", what, strerror(r < 0 ? -r : r), s ? ": " : "",
                s ? kfdb_session_last_error(s) : "");
        exit(1);
}

typedef BenchGrant Bench;

static void bench_init(Bench *b) {
        int r = bench_grant_init(b);

        if (r < 0)
                die(NULL, "making the benchmark's directory and policy", r);
}

static void bench_start(Bench *b, bool shared) {
        if (bench_grant_start(b, KFDBROKERD_BUILD_PATH, shared ? "--contexts=shared" : NULL) < 0)
                die(NULL, "kfdbrokerd did not start", ETIMEDOUT);
}

static void bench_stop(Bench *b) {
        bench_grant_stop(b);
}

static void bench_done(Bench *b) {
        bench_grant_done(b);
}

static kfdb_session *connect_to(const Bench *b, const char *name, const char *hsaco, kfdb_code_object **ret_co) {
        kfdb_session *s;
        int r = kfdb_session_new(b->sock, name, &s);

        if (r < 0)
                die(NULL, "connect", r);
        if ((r = kfdb_code_object_load_file(s, hsaco, ret_co)) < 0)
                die(s, hsaco, r);
        return s;
}

/* ---- round trips ---- */

typedef enum Kind { KIND_SDMA_NOP, KIND_COMPUTE_NOP, KIND_DISPATCH, _KIND_MAX } Kind;

/* One job of the kind, submitted and waited for; returns its round trip in ns. */
static uint64_t round_trip(kfdb_session *s, kfdb_batch *b, Kind k, kfdb_event *ev, const kfdb_code_object *co) {
        const uint32_t one = 1;
        uint64_t fence, t0 = now_ns();
        int r;

        switch (k) {
        case KIND_SDMA_NOP:
                r = kfdb_batch_signal_event_on(b, ev, KFDB_ENGINE_SDMA);
                break;
        case KIND_COMPUTE_NOP:
                r = kfdb_batch_signal_event_on(b, ev, KFDB_ENGINE_COMPUTE);
                break;
        default:
                r = kfdb_batch_dispatch(b, co, "empty", 1, &one, &one, NULL, 0);
                break;
        }
        if (r < 0 || (r = kfdb_batch_submit(b, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 10000)) < 0)
                die(s, "round trip", r);
        return now_ns() - t0;
}

static void bench_round_trips(const Bench *bench) {
        static const char *const names[_KIND_MAX] = {
                [KIND_SDMA_NOP] = "SDMA no-op job", [KIND_COMPUTE_NOP] = "compute no-op job",
                [KIND_DISPATCH] = "empty-kernel dispatch",
        };
        uint64_t *t[_KIND_MAX];
        double p50[_KIND_MAX], p99[_KIND_MAX];
        kfdb_code_object *co;
        kfdb_session *s = connect_to(bench, "bench-compute", EMPTY_HSACO, &co);
        kfdb_batch *b;
        kfdb_event *ev;
        int r;

        if ((r = kfdb_event_create(s, false, &ev)) < 0 || (r = kfdb_batch_new(s, &b)) < 0)
                die(s, "setup", r);
        for (int k = 0; k < _KIND_MAX; k++) {
                t[k] = calloc(ROUND_TRIPS, sizeof(uint64_t));
                if (!t[k])
                        die(s, "calloc", ENOMEM);
        }
        for (int i = 0; i < WARMUP + ROUND_TRIPS; i++)
                for (int k = 0; k < _KIND_MAX; k++) {
                        uint64_t ns = round_trip(s, b, (Kind) k, ev, co);
                        if (i >= WARMUP)
                                t[k][i - WARMUP] = ns;
                }
        for (int k = 0; k < _KIND_MAX; k++)
                percentiles(t[k], ROUND_TRIPS, &p50[k], &p99[k]);

        printf("round trip, submit -> completion seen in the session page (%d each, interleaved):\n", ROUND_TRIPS);
        for (int k = 0; k < _KIND_MAX; k++) {
                printf("  %-22s p50 %8.1f us  p99 %8.1f us", names[k], p50[k], p99[k]);
                if (k != KIND_SDMA_NOP)
                        printf("   vs SDMA no-op: p50 %.2fx  p99 %.2fx", p50[k] / p50[KIND_SDMA_NOP],
                               p99[k] / p99[KIND_SDMA_NOP]);
                printf("\n");
        }
        printf("  dispatch vs compute no-op: p50 %.2fx  p99 %.2fx (the cost of the dispatch itself)\n",
               p50[KIND_DISPATCH] / p50[KIND_COMPUTE_NOP], p99[KIND_DISPATCH] / p99[KIND_COMPUTE_NOP]);
        for (int k = 0; k < _KIND_MAX; k++)
                free(t[k]);
        kfdb_batch_free(b);
        kfdb_event_destroy(ev);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
}

/* ---- noisy neighbours ---- */

/* A client that keeps one collatz dispatch over FLOOD_ITEMS inputs in flight. */
typedef struct Flooder {
        kfdb_session *s;
        kfdb_code_object *co;
        kfdb_buffer *in, *out;
        kfdb_batch *batch;
        pthread_t thread;
        BenchNoise *noise;
        uint64_t dispatches; /* finished while measuring */
} Flooder;

static void flooder_open(Flooder *f, const Bench *bench) {
        kfdb_code_object *co;
        kfdb_session *s = connect_to(bench, "flooder", COLLATZ_HSACO, &co);

        uint32_t *in;
        int r;

        *f = (Flooder) { .s = s, .co = co };
        if ((r = kfdb_buffer_alloc(f->s, FLOOD_ITEMS * 4, KFDB_PLACEMENT_GTT, &f->in)) < 0 ||
            (r = kfdb_buffer_alloc(f->s, FLOOD_ITEMS * 4, KFDB_PLACEMENT_GTT, &f->out)) < 0 ||
            (r = kfdb_buffer_map(f->in, (void **) &in)) < 0 || (r = kfdb_batch_new(f->s, &f->batch)) < 0)
                die(f->s, "flooder setup", r);
        /* 27 takes 111 steps; its neighbours take between a few and ~120. */
        for (uint32_t i = 0; i < FLOOD_ITEMS; i++)
                in[i] = 27 + i % 64;
}

static void flooder_close(Flooder *f) {
        kfdb_batch_free(f->batch);
        kfdb_buffer_free(f->in);
        kfdb_buffer_free(f->out);
        kfdb_code_object_free(f->co);
        kfdb_session_free(f->s);
}

static void *flooder_thread(void *userdata) {
        Flooder *f = userdata;
        const uint32_t grid = FLOOD_ITEMS, block = 64, n = FLOOD_ITEMS;
        const kfdb_arg args[] = { kfdb_arg_buffer(f->in, 0), kfdb_arg_buffer(f->out, 0),
                                  kfdb_arg_value(&n, sizeof(n)) };

        while (!atomic_load(&f->noise->stop)) {
                bool counting = atomic_load(&f->noise->measuring);
                uint64_t fence;
                int r;

                if ((r = kfdb_batch_dispatch(f->batch, f->co, "collatz", 1, &grid, &block, args, 3)) < 0 ||
                    (r = kfdb_batch_submit(f->batch, NULL, &fence)) < 0 || (r = kfdb_fence_wait(f->s, fence, 60000)) < 0)
                        die(f->s, "flooder dispatch", r);
                if (counting && atomic_load(&f->noise->measuring))
                        f->dispatches++;
        }
        return NULL;
}

/* The light client's empty dispatches, one at a time, for NOISE_NS after a
 * warm-up; its p99 in us, and in *ret_rate (if set) how many it finished per
 * second. */
static double light_p99(kfdb_session *s, const kfdb_code_object *co, BenchNoise *n, double *ret_rate) {
        size_t cap = 1 << 20, count = 0;
        uint64_t *t = calloc(cap, sizeof *t), start = now_ns(), end = start + NOISE_WARMUP_NS + NOISE_NS;
        const uint32_t one = 1;
        kfdb_batch *batch;
        double p50, p99;
        int r;

        if (!t)
                die(s, "calloc", ENOMEM);
        if ((r = kfdb_batch_new(s, &batch)) < 0)
                die(s, "light setup", r);
        for (uint64_t now = start; now < end; now = now_ns()) {
                uint64_t fence, t0 = now_ns();

                if (t0 >= start + NOISE_WARMUP_NS)
                        atomic_store(&n->measuring, true);
                if ((r = kfdb_batch_dispatch(batch, co, "empty", 1, &one, &one, NULL, 0)) < 0 ||
                    (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 60000)) < 0)
                        die(s, "light dispatch", r);
                if (t0 >= start + NOISE_WARMUP_NS && count < cap)
                        t[count++] = now_ns() - t0;
                usleep(200); /* a light client: not a flood of its own */
        }
        atomic_store(&n->measuring, false);
        if (count == 0)
                die(s, "the light client got no sample", ETIMEDOUT);
        percentiles(t, count, &p50, &p99);
        if (ret_rate)
                *ret_rate = (double) count * 1e9 / (double) NOISE_NS;
        kfdb_batch_free(batch);
        free(t);
        return p99;
}

static double noise_burners(kfdb_session *s, const kfdb_code_object *co) {
        BenchNoise n = {};
        pthread_t th[BURNERS];
        double p99;

        for (int i = 0; i < BURNERS; i++)
                pthread_create(&th[i], NULL, bench_burner_thread, &n);
        p99 = light_p99(s, co, &n, NULL);
        atomic_store(&n.stop, true);
        for (int i = 0; i < BURNERS; i++)
                pthread_join(th[i], NULL);
        return p99;
}

/* The light client's p99 (us) next to the flooders, its dispatches per second
 * and theirs while it measured. */
static void noise_flooders(kfdb_session *s, const kfdb_code_object *co, Flooder *fl, double *ret_p99,
                           double *ret_light_rate, double *ret_rate) {
        BenchNoise n = {};
        uint64_t t0, t1, dispatches = 0;

        for (int i = 0; i < FLOODERS; i++) {
                fl[i].dispatches = 0;
                fl[i].noise = &n;
                pthread_create(&fl[i].thread, NULL, flooder_thread, &fl[i]);
        }
        t0 = now_ns() + NOISE_WARMUP_NS;
        *ret_p99 = light_p99(s, co, &n, ret_light_rate);
        t1 = now_ns();
        atomic_store(&n.stop, true);
        for (int i = 0; i < FLOODERS; i++) {
                pthread_join(fl[i].thread, NULL);
                dispatches += fl[i].dispatches;
        }
        *ret_rate = (double) dispatches * 1e9 / (double) (t1 - t0);
}

/* One mode: a daemon started with or without --contexts=shared. */
static void bench_noise(Bench *bench, bool shared) {
        double burn[NOISE_ROUNDS], flood[NOISE_ROUNDS], rate[NOISE_ROUNDS], light_rate[NOISE_ROUNDS], b, p;
        static Flooder fl[FLOODERS];
        kfdb_code_object *co;
        kfdb_session *s;
        char what[96];

        bench_start(bench, shared);
        s = connect_to(bench, "light", EMPTY_HSACO, &co);
        for (int i = 0; i < FLOODERS; i++)
                flooder_open(&fl[i], bench);
        /* Interleaved rounds, so that both see the same noise. */
        for (int k = 0; k < NOISE_ROUNDS; k++) {
                burn[k] = noise_burners(s, co);
                noise_flooders(s, co, fl, &flood[k], &light_rate[k], &rate[k]);
        }
        for (int i = 0; i < FLOODERS; i++)
                flooder_close(&fl[i]);
        kfdb_code_object_free(co);
        kfdb_session_free(s);
        bench_stop(bench);

        b = median(burn, NOISE_ROUNDS);
        p = median(flood, NOISE_ROUNDS);
        printf("%s: light empty dispatch p99 %.2f ms next to %d CPU burners, %.2f ms next to %d flooders "
               "(%.0f dispatches/s of %u work-items; the light client's %.0f/s) (medians of %d)\n",
               shared ? "one shared GPU context" : "a GPU context per session", b / 1000.0, BURNERS, p / 1000.0,
               FLOODERS, median(rate, NOISE_ROUNDS), FLOOD_ITEMS, median(light_rate, NOISE_ROUNDS), NOISE_ROUNDS);
        snprintf(what, sizeof(what), "compute noisy neighbours, %s: p99 flooders / burners",
                 shared ? "shared context" : "context per session");
        report(what, p / b, true, 2.0);
}

int main(void) {
        Bench bench;

        printf("kfdbroker compute benchmark (simulated GPU; baselines measured in the same run)\n");
        bench_init(&bench);
        bench_start(&bench, false);
        bench_round_trips(&bench);
        bench_stop(&bench);
        bench_noise(&bench, false);
        bench_noise(&bench, true);
        bench_done(&bench);
        return 0;
}

#else

int main(void) {
        printf("kfdbroker compute benchmark: skipped, the test kernels were not built "
               "(clang-15 with the AMDGPU device libraries is missing)\n");
        return 0;
}

#endif
