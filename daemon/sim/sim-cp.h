/* SPDX-License-Identifier: MIT */
/*
 * The compute (CP) engine's work on one PM4 compute queue: read the doorbell,
 * decode the type-3 packets between rptr and the doorbell's wptr (dwords),
 * keep the queue's SH register file, run DISPATCH_DIRECT on the RDNA2
 * interpreter, write fences, raise END_OF_PIPE interrupts, execute indirect
 * buffers, and stop the queue on a fault or a packet it cannot execute.
 * Each compute queue owns one SimCpState (created with the queue, freed with
 * it); the queue's CP engine thread (one per active compute queue) runs the
 * step.
 *
 * Locking: the step runs on the engine thread with the device lock held,
 * except around a shader dispatch, which runs with the lock released (see
 * sim-cp.c); the queue is pinned meanwhile by SimCpState.busy, and
 * sim_cp_state_free() cancels the dispatch and waits for it to let go.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "sim-pm4-decode.h"
#include "sim-types.h"

/* MEC1 of gfx10 has 4 pipes; KFD spreads compute queues over them round-robin
 * (kfd_device_queue_manager.c allocate_hqd, next_pipe_to_allocate). */
#define SIM_CP_PIPES 4u

struct SimCpState {
        uint32_t sh[SIM_SH_REG_END - SIM_SH_REG_START];                 /* SET_SH_REG */
        uint32_t uconfig[SIM_UCONFIG_REG_END - SIM_UCONFIG_REG_START];  /* SET_UCONFIG_REG */

        /* The indirect buffer being executed (one level); rptr stays at the
         * ring's INDIRECT_BUFFER packet until it is done. */
        bool in_ib;
        uint64_t ib_va;
        uint32_t ib_size_dw, ib_pos;
        uint32_t ib_packet_dw;

        /* A dispatch runs without the device lock: busy pins the queue, cancel
         * (atomic) asks the interpreter to stop. */
        bool busy;
        int cancel;
};

/* Locked. 0 or -ENOMEM. */
int sim_cp_state_new(SimCpState **ret);
/*
 * Locked. Cancels a running dispatch of q and waits (releasing the device lock
 * while it waits) until the engine has let go of q, then frees q->cp. Call it
 * before anything else of q is torn down.
 */
void sim_cp_state_free(SimQueue *q);

/* Locked. Asks a dispatch running on q to stop for good (process eviction):
 * it ends without completing and the queue does not run again. No wait. */
void sim_cp_preempt(SimQueue *q);

/* A SimEngineStep for PM4 compute queues. */
int sim_cp_queue_step(SimQueue *q);
