/* SPDX-License-Identifier: MIT */
/*
 * One GPU of the simulated machine (a kfd_node in the kernel): its topology
 * description (SimGpuInfo) and the state the kernel keeps per device — its
 * SDMA queue pool and engines (dqm->sdma_bitmap), its CP engine threads (the
 * HQDs of its pipes), its HDP and GL2 state and its MMIO remap page
 * (sim-cache.h), its interrupt handler's queue (sim-ih.h). VRAM accounting is SimGpuInfo.vram_used. Nothing here is
 * shared with the device's other GPUs: a copy on one GPU's SDMA engine does
 * not wait for another GPU's queues. What the GPUs do share is the host: the
 * device lock and the interpreter's helper threads (SimDevice.isa_pool). The
 * SimDevice owns its GPUs. Locked (the atomics of sim-cache.c aside).
 */
#pragma once

#include <stdint.h>

#include "sim-topology.h"
#include "sim-types.h"

#define SIM_MAX_SDMA_ENGINES 8u
#define SIM_MAX_SDMA_SLOTS 64u

struct SimGpu {
        SimDevice *device;
        unsigned index;             /* position among the device's GPUs, in topology order */
        SimGpuInfo info;

        SimQueue *sdma_slots[SIM_MAX_SDMA_SLOTS]; /* dqm->sdma_bitmap: engine = slot % n_engines */
        SimEngine *sdma_engines[SIM_MAX_SDMA_ENGINES];
        /* CP engines: one thread per active compute queue (an HQD), kept
         * when its queue goes and given to the next (sim-cp.h). */
        SimEngine **cp_engines;
        unsigned n_cp_engines;
        unsigned next_cp_pipe;      /* the pipe allocate_hqd() would pick next: for the logs */

        /* Caches (sim-cache.h): HDP flushes seen, the HDP flush count the last
         * GL2 invalidate published (atomics), VRAM BOs with dirty GL2 pages
         * (atomic), the MMIO remap page (weak: its handles hold it). */
        uint32_t hdp_gen, gl2_inv_gen;
        unsigned n_dirty_bos;
        SimBo *mmio_bo;

        /* Its interrupt handler's queue (sim-ih.h: its own IH ring and KFD
         * interrupt work, as each amdgpu device has): the entries raised
         * since a fault that waits, and the queue that faulted with the
         * steps it may still run. */
        struct SimIhEntry *ih;
        size_t ih_n, ih_cap;
        SimQueue *ih_fault_queue;
        unsigned ih_run_on;
};

/*
 * A GPU of d described by info, at position index, with one SDMA engine
 * thread per SDMA engine started. Call without the device lock. Returns 0,
 * -ENOMEM or the errno of starting a thread.
 */
int sim_gpu_new(SimDevice *d, unsigned index, const SimGpuInfo *info, SimGpu **ret);
/* Stops and joins its engine threads (no queue may be left on them; call
 * without the device lock) and frees g. NULL-safe; returns NULL. */
SimGpu *sim_gpu_free(SimGpu *g);
/* An engine thread of g for a new compute queue: one whose queue has gone,
 * or a new one. Locked. */
int sim_gpu_cp_engine_get(SimGpu *g, SimEngine **ret);
