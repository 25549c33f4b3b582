/* SPDX-License-Identifier: MIT */
/* The shared fixture of the GPU-layer tests (gpu-test.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpu-test.h"

void on_comp(const GpuCompletion *comp, void *userdata) {
        Comps *cs = userdata;
        cr_assert_lt(cs->n, MAX_COMPS);
        cs->c[cs->n] = *comp;
        if (comp->message && cs->n_messages < 64) {
                snprintf(cs->messages[cs->n_messages], sizeof cs->messages[0], "%s", comp->message);
                cs->c[cs->n].message = cs->messages[cs->n_messages++];
        } else
                cs->c[cs->n].message = NULL;
        cs->n++;
}

const GpuCompletion *find_comp(const Comps *cs, unsigned q, uint64_t seq) {
        for (unsigned i = 0; i < cs->n; i++)
                if (cs->c[i].queue == q && cs->c[i].seq == seq)
                        return &cs->c[i];
        return NULL;
}

double now_s(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the "event loop" until (q, seq) was reported, at most 30 s. */
const GpuCompletion *wait_seq(GpuContext *c, Comps *cs, unsigned q, uint64_t seq) {
        double deadline = now_s() + 30;
        while (!find_comp(cs, q, seq)) {
                cr_assert_lt(now_s(), deadline, "queue %u seq %llu never completed", q,
                             (unsigned long long) seq);
                struct pollfd p = { .fd = gpu_context_get_wake_fd(c), .events = POLLIN };
                poll(&p, 1, 100);
                int r = gpu_context_process(c, on_comp, cs);
                cr_assert_geq(r, 0, "gpu_context_process: %s", strerror(-r));
        }
        return find_comp(cs, q, seq);
}

Fixture fx;

void setup_sim(const SimOptions *so, const GpuContextOptions *o) {
        memset(&fx, 0, sizeof fx);
        fx.fds_before = test_count_fds();
        cr_assert_eq(sim_device_new(so, &fx.dev), 0);
        fx.ops = sim_device_get_ops(fx.dev);
        int r = gpu_context_new(fx.ops, o, &fx.ctx);
        cr_assert_eq(r, 0, "gpu_context_new: %s", strerror(-r));
}

void setup_opts(const GpuContextOptions *o) {
        setup_sim(NULL, o);
}

void setup(void) {
        setup_opts(NULL);
}

void setup_kfd_1_11(void) {
        setup_sim(&(SimOptions) { .kfd_minor = 11 }, NULL);
}

/* Fails the test on buffers still alive, fds or memory leaked (test-fini.h). */
void teardown(void) {
        if (fx.ctx) {
                GpuContextStats st;

                gpu_context_get_stats(fx.ctx, &st);
                test_fini_expect(st.buffers == 0 && st.buffer_bytes == 0, "%u buffers (%llu bytes) still alive",
                                 st.buffers, (unsigned long long) st.buffer_bytes);
        }
        fx.ctx = gpu_context_free(fx.ctx);
        fx.dev = sim_device_free(fx.dev);
        test_fini_expect(test_count_fds() == fx.fds_before, "fd leak: %u before, %u after", fx.fds_before,
                         test_count_fds());
        test_fini_end();
}

GpuBuffer *new_buf(uint64_t size, GpuPlacement pl) {
        GpuBuffer *b = NULL;
        int r = gpu_buffer_new(fx.ctx, size, pl, false, &b);
        cr_assert_eq(r, 0, "gpu_buffer_new(%llu): %s", (unsigned long long) size, strerror(-r));
        cr_assert_eq(gpu_buffer_get_va(b), (uint64_t) (uintptr_t) gpu_buffer_get_cpu(b), "CPU VA == GPU VA");
        return b;
}

void fill_pattern(uint8_t *p, uint64_t n, uint32_t seed) {
        uint32_t x = seed * 2654435761u + 1;
        for (uint64_t i = 0; i < n; i++) {
                x = x * 1103515245u + 12345u;
                p[i] = (uint8_t) (x >> 16);
        }
}

uint64_t submit(unsigned q, const GpuJob *job) {
        uint64_t seq = 0;
        int r = gpu_queue_submit(fx.ctx, q, job, &seq);
        cr_assert_eq(r, 0, "gpu_queue_submit: %s", strerror(-r));
        return seq;
}

uint64_t submit_when_room(unsigned q, const GpuJob *job, unsigned *ret_eagain) {
        double deadline = now_s() + 30;
        uint64_t seq = 0;
        int r;

        while ((r = gpu_queue_submit(fx.ctx, q, job, &seq)) == -EAGAIN) {
                cr_assert_lt(now_s(), deadline, "queue %u never took the job", q);
                if (ret_eagain)
                        (*ret_eagain)++;
                struct pollfd p = { .fd = gpu_context_get_wake_fd(fx.ctx), .events = POLLIN };
                poll(&p, 1, 10);
                cr_assert_geq(gpu_context_process(fx.ctx, on_comp, &fx.comps), 0);
        }
        cr_assert_eq(r, 0, "gpu_queue_submit: %s", strerror(-r));
        return seq;
}

