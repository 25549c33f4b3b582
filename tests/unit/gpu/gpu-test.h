/* SPDX-License-Identifier: MIT */
/*
 * Shared fixture of the GPU-layer tests: a simulated device with one
 * GpuContext on it, completions collected by a stand-in for the event loop,
 * and a teardown that fails the test on leaked buffers, fds or memory
 * (test-fini.h). Used by test-gpu-context.c and test-gpu-dispatch.c.
 */
#pragma once

#include <stdint.h>

#include "gpu/gpu.h"
#include "sim/sim.h"
#include "test-fini.h"

#define MiB (1024ull * 1024ull)

#define MAX_COMPS 8192
typedef struct Comps {
        unsigned n;
        GpuCompletion c[MAX_COMPS];
        char messages[64][256]; /* copies of GpuCompletion.message (valid only in the callback) */
        unsigned n_messages;
} Comps;

typedef struct Fixture {
        SimDevice *dev;
        const KfdOps *ops;
        GpuContext *ctx;
        Comps comps;
        unsigned fds_before;
} Fixture;

extern Fixture fx;

void on_comp(const GpuCompletion *comp, void *userdata);
const GpuCompletion *find_comp(const Comps *cs, unsigned q, uint64_t seq);
double now_s(void);
/* Runs the "event loop" until (q, seq) was reported, at most 30 s. */
const GpuCompletion *wait_seq(GpuContext *c, Comps *cs, unsigned q, uint64_t seq);
void setup_sim(const SimOptions *so, const GpuContextOptions *o);
void setup_opts(const GpuContextOptions *o);
void setup(void);
/* The device as Linux 6.1 (Debian 12) has it: KFD uapi 1.11, no EXPORT_DMABUF. */
void setup_kfd_1_11(void);
void teardown(void);
GpuBuffer *new_buf(uint64_t size, GpuPlacement pl);
void fill_pattern(uint8_t *p, uint64_t n, uint32_t seed);
uint64_t submit(unsigned q, const GpuJob *job);
/* Submits, processing completions while the queue answers -EAGAIN (as the
 * scheduler does), at most 30 s; counts the refusals in *ret_eagain if given. */
uint64_t submit_when_room(unsigned q, const GpuJob *job, unsigned *ret_eagain);
