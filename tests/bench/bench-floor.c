/* SPDX-License-Identifier: MIT */
/*
 * The floor under the broker: a process that drives the same simulated GPU
 * layer in-process (sim_device_new() + gpu_context_new(), the code the daemon
 * runs), with no socket, no session and no scheduler between it and the ring.
 * Measures what bench-broker compares the broker against (issue 13):
 *   - the round trip of one 4-byte fill: submit, then poll the context's wake
 *     fd and gpu_context_process() until its completion is reported;
 *   - the throughput of batched small jobs: BATCH 4-byte fills submitted at
 *     once, all awaited, again and again (median of ROUNDS rounds).
 * Prints a human line for each and a last machine-readable line,
 *   floor rt_p50_us=X rt_p99_us=Y batch_jobs_per_s=Z
 * that bench-broker reads when it runs this program.
 */
#include <errno.h>
#include <poll.h>
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

static void round_trip(Floor *f, double *p50, double *p99) {
        uint64_t *t = calloc(ROUND_TRIPS, sizeof *t);

        if (!t)
                die("calloc", ENOMEM);
        for (int i = 0; i < ROUND_TRIPS + WARMUP; i++) {
                uint64_t t0 = now_ns();
                wait_seq(f, submit_fill(f));
                if (i >= WARMUP)
                        t[i - WARMUP] = now_ns() - t0;
        }
        percentiles(t, ROUND_TRIPS, p50, p99);
        free(t);
}

static double batched(Floor *f) {
        double rate[ROUNDS];

        for (int k = 0; k < ROUNDS; k++) {
                uint64_t t0 = now_ns(), jobs = 0, t;

                do {
                        uint64_t last = 0;
                        for (int i = 0; i < BATCH; i++)
                                last = submit_fill(f);
                        wait_seq(f, last);
                        jobs += BATCH;
                        t = now_ns() - t0;
                } while (t < ROUND_NS);
                rate[k] = (double) jobs * 1e9 / (double) t;
        }
        return median(rate, ROUNDS);
}

int main(void) {
        double p50, p99, jobs_per_s;
        Floor f;

        floor_open(&f);
        round_trip(&f, &p50, &p99);
        jobs_per_s = batched(&f);
        floor_close(&f);
        printf("in-process GPU layer (the floor): 4-byte fill round trip p50 %.1f us  p99 %.1f us\n", p50, p99);
        printf("in-process GPU layer (the floor): batches of %d 4-byte fills: %.0f jobs/s (median of %d)\n", BATCH,
               jobs_per_s, ROUNDS);
        printf("floor rt_p50_us=%.1f rt_p99_us=%.1f batch_jobs_per_s=%.0f\n", p50, p99, jobs_per_s);
        return 0;
}
