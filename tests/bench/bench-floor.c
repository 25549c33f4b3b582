/* SPDX-License-Identifier: MIT */
/*
 * The floor under the broker: a process that drives the same simulated GPU
 * layer in-process (sim_device_new() + gpu_context_new(), the code the daemon
 * runs), with no socket, no session and no scheduler between it and the ring.
 * Measures what bench-broker compares the broker against (issue 13):
 *   - the round trip of one 4-byte fill: submit, then poll the context's wake
 *     fd and gpu_context_process() until its completion is reported;
 *   - the throughput of batched small jobs: BATCH 4-byte fills submitted at
 *     once (one doorbell for them, gpu_context_hold_doorbells()), all
 *     awaited, again and again.
 * One device, context and buffer for the whole life of the process.
 *
 * Without arguments it measures once (ROUND_TRIPS round trips, then ROUNDS
 * batched rounds of ROUND_NS) and prints a human line for each and a last
 * machine-readable line,
 *   floor rt_p50_us=X rt_p99_us=Y batch_jobs_per_s=Z
 * With --serve it is bench-broker's long-lived child, measuring a round at a
 * time between the broker's rounds (so that both see the same machine): it
 * says "ready" once its device is up, then reads one command a line on
 * stdin and answers each with one line on stdout,
 *   rt N        -> "rt p50_us=X p99_us=Y"   (N round trips after BENCH_RT_WARMUP)
 *   batch NS    -> "batch jobs_per_s=Z"     (batched fills for NS ns)
 *   quit        -> exits 0 (so does the end of stdin)
 * and anything else with "error <what was wrong>" (it goes on reading).
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench-util.h"
#include "gpu/gpu.h"
#include "sim/sim.h"

#define ROUND_TRIPS 3000
#define WARMUP 100
#define BATCH 64
#define ROUNDS 5
#define ROUND_NS 500000000ull
/* What --serve accepts: up to a million round trips, batches for up to a minute. */
#define SERVE_MAX_ROUND_TRIPS 1000000ull
#define SERVE_MAX_NS 60000000000ull

typedef struct Floor {
        SimDevice *dev;
        GpuContext *ctx;
        GpuBuffer *buf;
        unsigned queue;
        uint64_t completed; /* highest seq reported on the queue */
} Floor;

static void die(const char *what, int r) {
        fprintf(stderr, "bench-floor: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

static void on_completion(const GpuCompletion *c, void *userdata) {
        Floor *f = userdata;

        if (c->error != 0)
                die("job failed", c->error);
        if (c->seq > f->completed)
                f->completed = c->seq;
}

static void wait_seq(Floor *f, uint64_t seq) {
        while (f->completed < seq) {
                struct pollfd p = { .fd = gpu_context_get_wake_fd(f->ctx), .events = POLLIN };
                int r;

                if (poll(&p, 1, 10000) <= 0)
                        die("no completion", ETIMEDOUT);
                r = gpu_context_process(f->ctx, on_completion, f);
                if (r < 0)
                        die("gpu_context_process", r);
        }
}

static uint64_t submit_fill(Floor *f) {
        GpuJob job = { .type = GPU_JOB_FILL,
                       .fill = { .dst_va = gpu_buffer_get_va(f->buf), .size = 4, .pattern = 0x5a5a5a5a } };
        uint64_t seq;
        int r;

        r = gpu_queue_submit(f->ctx, f->queue, &job, &seq);
        if (r < 0)
                die("gpu_queue_submit", r);
        return seq;
}

static void floor_open(Floor *f) {
        const GpuDeviceInfo *info;
        int r;

        *f = (Floor) {};
        r = sim_device_new(NULL, &f->dev);
        if (r < 0)
                die("sim_device_new", r);
        r = gpu_context_new(sim_device_get_ops(f->dev), NULL, &f->ctx);
        if (r < 0)
                die("gpu_context_new", r);
        info = gpu_context_get_info(f->ctx);
        for (f->queue = 0; f->queue < info->n_queues && info->queue_engine[f->queue] != GPU_ENGINE_SDMA; f->queue++)
                ;
        if (f->queue == info->n_queues)
                die("no SDMA queue", ENODEV);
        r = gpu_buffer_new(f->ctx, 4096, GPU_PLACEMENT_GTT, false, &f->buf);
        if (r < 0)
                die("gpu_buffer_new", r);
}

static void floor_close(Floor *f) {
        gpu_buffer_unref(f->buf);
        gpu_context_free(f->ctx);
        sim_device_free(f->dev);
}

/* p50 and p99 (us) of n round trips, after warmup unmeasured ones. */
static void round_trip(Floor *f, int n, int warmup, double *p50, double *p99) {
        uint64_t *t = calloc((size_t) n, sizeof *t);

        if (!t)
                die("calloc", ENOMEM);
        for (int i = 0; i < n + warmup; i++) {
                uint64_t t0 = now_ns();
                wait_seq(f, submit_fill(f));
                if (i >= warmup)
                        t[i - warmup] = now_ns() - t0;
        }
        percentiles(t, (size_t) n, p50, p99);
        free(t);
}

/* Jobs per second in batches of BATCH 4-byte fills, each batch awaited, for
 * at least ns. */
static double batched_round(Floor *f, uint64_t ns) {
        uint64_t t0 = now_ns(), jobs = 0, t;

        do {
                uint64_t last = 0;
                /* One doorbell for the batch, as the daemon's scheduler does
                 * for what one pass writes. */
                gpu_context_hold_doorbells(f->ctx);
                for (int i = 0; i < BATCH; i++)
                        last = submit_fill(f);
                gpu_context_release_doorbells(f->ctx);
                wait_seq(f, last);
                jobs += BATCH;
                t = now_ns() - t0;
        } while (t < ns);
        return (double) jobs * 1e9 / (double) t;
}

static double batched(Floor *f) {
        double rate[ROUNDS];

        for (int k = 0; k < ROUNDS; k++)
                rate[k] = batched_round(f, ROUND_NS);
        return median(rate, ROUNDS);
}

/* The value of a command's argument: digits only, within [1, max]. */
static int parse_count(const char *arg, unsigned long long max, unsigned long long *ret) {
        unsigned long long v = 0;

        if (!*arg)
                return -EINVAL;
        for (const char *c = arg; *c; c++) {
                if (*c < '0' || *c > '9')
                        return -EINVAL;
                if (v > (max - (unsigned) (*c - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (unsigned) (*c - '0');
        }
        if (v == 0)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* One command line (without its newline): its answer on stdout. Returns
 * false on quit. */
static bool serve_command(Floor *f, char *line) {
        char *arg = strchr(line, ' ');
        unsigned long long v;
        int r;

        if (arg)
                *arg++ = '\0';
        if (strcmp(line, "quit") == 0) {
                if (!arg)
                        return false;
                printf("error quit takes no argument, got '%s'\n", arg);
        } else if (strcmp(line, "rt") == 0 || strcmp(line, "batch") == 0) {
                bool rt = line[0] == 'r';
                r = parse_count(arg ? arg : "", rt ? SERVE_MAX_ROUND_TRIPS : SERVE_MAX_NS, &v);
                if (r < 0)
                        printf("error %s wants a count from 1 to %llu, got '%s'\n", line,
                               rt ? SERVE_MAX_ROUND_TRIPS : SERVE_MAX_NS, arg ? arg : "");
                else if (rt) {
                        double p50, p99;
                        round_trip(f, (int) v, BENCH_RT_WARMUP, &p50, &p99);
                        printf("rt p50_us=%.3f p99_us=%.3f\n", p50, p99);
                } else
                        printf("batch jobs_per_s=%.0f\n", batched_round(f, v));
        } else
                printf("error unknown command '%s' (rt N, batch NS, quit)\n", line);
        fflush(stdout);
        return true;
}

/* bench-broker's child: commands on stdin until quit or its end. */
static void serve(Floor *f) {
        char line[128];

        printf("ready\n");
        fflush(stdout);
        while (fgets(line, sizeof line, stdin)) {
                size_t n = strcspn(line, "\n");
                if (line[n] != '\n' && !feof(stdin)) {
                        int c;
                        while ((c = getchar()) != EOF && c != '\n')
                                ;
                        printf("error command longer than %zu bytes\n", sizeof line - 2);
                        fflush(stdout);
                        continue;
                }
                line[n] = '\0';
                if (!serve_command(f, line))
                        return;
        }
}

int main(int argc, char **argv) {
        double p50, p99, jobs_per_s;
        Floor f;

        if (argc > 2 || (argc == 2 && strcmp(argv[1], "--serve") != 0)) {
                fprintf(stderr, "usage: bench-floor [--serve]\n");
                return 2;
        }
        floor_open(&f);
        if (argc == 2) {
                serve(&f);
                floor_close(&f);
                return 0;
        }
        round_trip(&f, ROUND_TRIPS, WARMUP, &p50, &p99);
        jobs_per_s = batched(&f);
        floor_close(&f);
        printf("in-process GPU layer (the floor): 4-byte fill round trip p50 %.1f us  p99 %.1f us\n", p50, p99);
        printf("in-process GPU layer (the floor): batches of %d 4-byte fills: %.0f jobs/s (median of %d)\n", BATCH,
               jobs_per_s, ROUNDS);
        printf("floor rt_p50_us=%.1f rt_p99_us=%.1f batch_jobs_per_s=%.0f\n", p50, p99, jobs_per_s);
        return 0;
}
