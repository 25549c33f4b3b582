/* SPDX-License-Identifier: MIT */
/*
 * The SDMA engine's work on one queue: read the doorbell, decode the packets
 * between rptr and the doorbell's wptr (bytes), execute them against the
 * process's GPU VM, write rptr back, raise TRAP interrupts, and stop the
 * queue on a fault or a packet it cannot execute. Runs on the engine thread
 * with the device lock held.
 */
#pragma once

#include "sim-types.h"

/* A SimEngineStep for SDMA queues. */
int sim_sdma_queue_step(SimQueue *q);

/* The GPU's 100 MHz global counter (GET_CLOCK_COUNTERS, TIMESTAMP). */
uint64_t sim_gpu_clock_counter(void);
