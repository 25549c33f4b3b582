/* SPDX-License-Identifier: MIT */
/*
 * A GPU of the simulated machine and its engines (see sim-gpu.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "sim-cp.h"
#include "sim-engine.h"
#include "sim-gpu.h"
#include "sim-sdma.h"
#include "util/macro.h"

SimGpu *sim_gpu_free(SimGpu *g) {
        if (!g)
                return NULL;
        for (unsigned i = 0; i < SIM_MAX_SDMA_ENGINES; i++)
                g->sdma_engines[i] = sim_engine_free(g->sdma_engines[i]);
        for (unsigned i = 0; i < g->n_cp_engines; i++)
                g->cp_engines[i] = sim_engine_free(g->cp_engines[i]);
        free(g->cp_engines);
        free(g->ih); /* every process is gone, and its entries with it */
        free(g);
        return NULL;
}
DEFINE_POINTER_CLEANUP(SimGpu, sim_gpu_free);

int sim_gpu_new(SimDevice *d, unsigned index, const SimGpuInfo *info, SimGpu **ret) {
        _cleanup_(sim_gpu_freep) SimGpu *g = NULL;
        int r;

        g = calloc(1, sizeof *g);
        if (!g)
                return -ENOMEM;
        g->device = d;
        g->index = index;
        g->info = *info;
        for (unsigned i = 0; i < g->info.num_sdma_engines && i < SIM_MAX_SDMA_ENGINES; i++) {
                r = sim_engine_new(d, SIM_ENGINE_SDMA, i, sim_sdma_queue_step, &g->sdma_engines[i]);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(g);
        return 0;
}

int sim_gpu_cp_engine_get(SimGpu *g, SimEngine **ret) {
        SimEngine **engines;
        int r;

        for (unsigned i = 0; i < g->n_cp_engines; i++)
                if (!g->cp_engines[i]->queues) {
                        *ret = g->cp_engines[i];
                        return 0;
                }
        engines = reallocarray(g->cp_engines, g->n_cp_engines + 1, sizeof *engines);
        if (!engines)
                return -ENOMEM;
        g->cp_engines = engines;
        r = sim_engine_new(g->device, SIM_ENGINE_CP, g->n_cp_engines, sim_cp_queue_step, &engines[g->n_cp_engines]);
        if (r < 0)
                return r;
        *ret = engines[g->n_cp_engines++];
        return 0;
}
