/* SPDX-License-Identifier: MIT */
/*
 * The interrupt handler of the simulated GPU: the IH ring and the kernel's
 * work that takes its entries, in order. On the kernel an engine's interrupt
 * (CP END_OF_PIPE, SDMA TRAP) and a GPU VM fault are both entries of the IH
 * ring; amdgpu_ih_process() hands each to kgd2kfd_interrupt(), which queues
 * it on the KFD's interrupt FIFO, and the KFD's interrupt work item takes them
 * one after another (kfd_interrupt.c interrupt_wq ->
 * event_interrupt_wq_v10(), kfd_int_process_v10.c): an end-of-pipe interrupt
 * raised after a fault is handled after the fault, whose handling
 * (kfd_set_dbg_ev_from_interrupt: kfd_dqm_evict_pasid, then
 * kfd_signal_vm_fault_event) evicts every queue of the process and sets its
 * MEMORY events.
 *
 * SimOptions.fault_order says when that handling comes:
 *  - event-first (today's order before issue 34): at once, from the engine
 *    that faulted, which stops its queue at the faulting packet first. Every
 *    interrupt is handled when it is raised.
 *  - fence-first (the default): a fault is queued here, and so is every
 *    interrupt any engine raises while something is queued; the engine that
 *    faulted runs on past the faulting access (gfx10/11 run without fault
 *    retry: the access goes to amdgpu's dummy page, see sim-cp.c and
 *    sim-sdma.c), and its queue keeps going until one of its steps makes no
 *    progress (its ring is empty, or it waits on memory), it has run
 *    SIM_IH_RUN_ON_STEPS steps since the fault, it stops or goes; then every
 *    queued entry is handled in the order it was raised. So the faulting
 *    job's end-of-pipe fence (and the later jobs of its queue) can land
 *    before the MEMORY event is set, on the simulator's own ordering, not on
 *    wall time.
 * Each GPU has its own queue (SimGpu.ih), as each device has its IH ring: a
 * fault waiting on one GPU holds up no interrupt of another. Every function
 * here is called with the device lock held.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim-types.h"

#define SIM_IH_RUN_ON_STEPS 8u

typedef struct SimIhEntry {
        SimProcess *process;
        SimGpu *gpu;             /* fault: the GPU whose VM faulted */
        bool fault;              /* a GPU VM fault at va; else an interrupt */
        uint64_t va;
        uint32_t partial_id;     /* interrupt: context id and its valid bits */
        unsigned valid_bits;
} SimIhEntry;

/* Whether d runs in fence-first order (SimOptions.fault_order). */
bool sim_ih_fence_first(const SimDevice *d);

/* An engine of gpu raised an interrupt for p with this context id
 * (kfd_signal_event_interrupt(pasid, partial_id, valid_bits)): handled now,
 * or after the entries queued before it on that GPU. */
void sim_ih_interrupt(SimGpu *gpu, SimProcess *p, uint32_t partial_id, unsigned valid_bits);

/* q's engine faulted at va (already rounded down to its page). Event-first:
 * handled now (the caller has stopped q). Fence-first: queued; q may run on. */
void sim_ih_vm_fault(SimQueue *q, uint64_t va);

/* After the engine ran a step of q that returned result (a SimStepResult):
 * handles what is queued once q has run on far enough (see the top). */
void sim_ih_after_step(SimQueue *q, int result);

/* q is going (DESTROY_QUEUE, teardown): what waited for it to run on is
 * handled now. */
void sim_ih_queue_gone(SimQueue *q);

/* p is being freed: its entries are dropped (the kernel drops the interrupts
 * of a PASID it no longer knows, kfd_lookup_process_by_pasid), and the
 * others are handled now. */
void sim_ih_process_gone(SimProcess *p);

/* Handles everything queued on every GPU (device shutdown). */
void sim_ih_flush(SimDevice *d);
