/* SPDX-License-Identifier: MIT */
/*
 * An engine of the simulated GPU: a thread that owns a list of queues and
 * advances them. A real engine costs the host no CPU and sees a doorbell
 * write at once; a store to a memory mapping traps nothing, so the daemon
 * tells the simulator after each doorbell store (KfdOps.doorbell_written),
 * which kicks the queue's engine (sim_engine_mark_kicked, sim_engine_wake).
 * The engine still reads the doorbell slot to learn the new wptr. The thread
 * sleeps:
 *  - until kicked, or at most IDLE_SLEEP (a backstop for a writer that does
 *    not tell, e.g. a test that stores to the slot itself), when every queue
 *    is idle (rptr at the doorbell's wptr, or stopped);
 *  - 10 µs, 20 µs, ... up to 1 ms per pass while a queue waits on memory
 *    (POLL_REGMEM, WAIT_REG_MEM) or on a packet not all published yet — a
 *    real engine re-polls memory at an interval too;
 *  - never after a pass that made progress.
 * What "advance a queue" means is the engine kind's step function (sim-sdma.c
 * for SDMA queues, sim-cp.c for PM4 compute queues). A step holds the device
 * lock per packet, not per pass: between packets (and around long work that
 * touches no shared state, e.g. a large copy or a shader dispatch) it drops
 * the lock, so ioctls, WAIT_EVENTS wake-ups and the other engines go on —
 * a completion is reported while a long copy runs, as on hardware. The
 * WAIT_EVENTS sleepers for the interrupts a step raises are woken at the end
 * of the step, between packets once the oldest has waited 10 µs, and before
 * a long copy or fill (sim_events_deliver()). The
 * queue a step works on is pinned (SimEngine.current): sim_queue_free()
 * waits for the engine to let go of it. The SimDevice owns its engines.
 */
#pragma once

#include <pthread.h>
#include <stdbool.h>

#include "sim-types.h"

typedef enum SimEngineKind {
        SIM_ENGINE_SDMA,
        SIM_ENGINE_CP,
} SimEngineKind;

/* What a step did. */
typedef enum SimStepResult {
        SIM_STEP_IDLE = 0,     /* nothing to do until the next doorbell */
        SIM_STEP_PROGRESS = 1, /* ran at least one packet (or stopped the queue) */
        SIM_STEP_WAITING = 2,  /* work pending, waiting on memory or a packet still being written */
} SimStepResult;

/* Advances q; returns a SimStepResult. Called locked, with q pinned by the
 * engine. A step may release the lock between packets and around long work
 * that touches no shared state (sim_engine_unlock_pinned); after it retakes
 * the lock, q is still there but anything else may have changed (q may be
 * stopped, destroying, or its process evicted: check). */
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
        bool kicked;             /* a doorbell was written since the pass began */
        SimQueue *queues;
        SimQueue *current;       /* pinned: the queue whose step runs */
};

/* Creates the engine and starts its thread. Call without the device lock. */
int sim_engine_new(SimDevice *d, SimEngineKind kind, unsigned index, SimEngineStep step, SimEngine **ret);
/* Stops and joins the thread (call without the device lock), frees e. NULL-safe. */
SimEngine *sim_engine_free(SimEngine *e);
/* Locked. */
void sim_engine_add_queue(SimEngine *e, SimQueue *q);
/* Locked. Waits (dropping the lock meanwhile) until the engine's step has let
 * go of q, then unlinks it. */
void sim_engine_remove_queue(SimEngine *e, SimQueue *q);
/* A doorbell of one of e's queues was written: run a pass soon. In two
 * halves, so that the thread is woken with the lock dropped (a thread woken
 * while the lock is held wakes only to block on it): mark it, locked; then
 * wake it, after unlocking. The thread reads kicked under the lock before it
 * sleeps, so a mark made before the unlock is never slept through. The
 * engine lives as long as its device. */
void sim_engine_mark_kicked(SimEngine *e);
void sim_engine_wake(SimEngine *e);
/* Locked, from a step: lets other threads take the device lock for a moment
 * (between two packets). */
void sim_engine_yield_lock(SimQueue *q);
/* From a step, on its engine's thread, before moving bytes: a bulk move (the
 * step's call: SIM_ENGINE_BULK_BYTES or more, no other queue waiting; or an
 * SDMA GCR_REQ's write-back of as many dirty bytes, sim-sdma.c) runs at
 * the process's CPU priority, any other 10 nice steps below it (sim-engine.c,
 * engine_apply(); a CP engine's prompt passes after it idled are at the
 * process's priority). On another thread, a no-op. */
#define SIM_ENGINE_BULK_BYTES (1u << 20)
void sim_engine_set_bulk(bool bulk);
