/* SPDX-License-Identifier: MIT */
/*
 * An engine of the simulated GPU: a thread that owns a list of queues and
 * advances them. A real mapping cannot trap the client's doorbell stores, so
 * the thread polls the doorbell slots, as rocjitsu's simulator does ("…which
 * the owning XCD's command processor polls", ROCm/rocm-systems
 * emulation/rocjitsu docs/vm-design.md): a spin/yield phase right after
 * activity keeps the latency of the next doorbell small, then sleeps grow to
 * 1 ms while idle, and with no queues at all the thread sleeps until one is
 * added. What "advance a queue" means is the engine kind's step function
 * (sim-sdma.c for SDMA queues, sim-cp.c for PM4 compute queues). The
 * SimDevice owns its engines.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "sim-types.h"

typedef enum SimEngineKind {
        SIM_ENGINE_SDMA,
        SIM_ENGINE_CP,
} SimEngineKind;

/* Advances q; returns > 0 if it made progress, 0 if it has nothing to do now.
 * Called locked. A step may release the lock for long work that touches no
 * shared state (the CP step around a shader dispatch); it then keeps q pinned
 * itself, retakes the lock before it returns, and must not rely on anything
 * but q staying as it was. */
typedef int (*SimEngineStep)(SimQueue *q);

struct SimEngine {
        SimDevice *device;
        SimEngineKind kind;
        unsigned index;
        SimEngineStep step;
        pthread_t thread;
        bool running;
        bool stop;
        pthread_cond_t wake;
        SimQueue *queues;
};

/* Creates the engine and starts its thread. Call without the device lock. */
int sim_engine_new(SimDevice *d, SimEngineKind kind, unsigned index, SimEngineStep step, SimEngine **ret);
/* Stops and joins the thread (call without the device lock), frees e. NULL-safe. */
SimEngine *sim_engine_free(SimEngine *e);
/* Locked. */
void sim_engine_add_queue(SimEngine *e, SimQueue *q);
void sim_engine_remove_queue(SimEngine *e, SimQueue *q);
