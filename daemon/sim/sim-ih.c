/* SPDX-License-Identifier: MIT */
/*
 * The interrupt handler's queue of the simulated GPU (see sim-ih.h): the
 * entries raised while a GPU VM fault waits to be handled, in the order they
 * were raised, and the queue whose fault holds them. Owned by the SimDevice;
 * locked.
 */
#include <stdlib.h>
#include <string.h>

#include "sim-device.h"
#include "sim-engine.h"
#include "sim-events.h"
#include "sim-ih.h"
#include "sim-process.h"
#include "sim-queue.h"
#include "util/log.h"

bool sim_ih_fence_first(const SimDevice *d) {
        return d->fault_order != SIM_FAULT_ORDER_EVENT_FIRST;
}

static void handle(const SimIhEntry *e) {
        if (e->fault)
                sim_process_vm_fault(e->process, e->gpu, e->va);
        else
                sim_events_interrupt(e->process, e->partial_id, e->valid_bits);
}

/* The kernel's interrupt work reaches the entries: all of them, in order.
 * The sleepers the interrupts wake are woken at once. */
static void drain(SimDevice *d) {
        /* Taken off first: handling one may not add another, but a fault
         * evicts queues, and nothing here should see a half-walked array. */
        SimIhEntry *entries = d->ih;
        size_t n = d->ih_n;

        d->ih = NULL;
        d->ih_n = d->ih_cap = 0;
        d->ih_fault_queue = NULL;
        d->ih_run_on = 0;
        for (size_t i = 0; i < n; i++)
                handle(&entries[i]);
        free(entries);
        if (n > 0)
                sim_events_deliver(d, true);
}

/* Queues e behind what is there. Without memory for it, what is there and e
 * are handled now, in order: sooner than planned, never out of order. */
static void push(SimDevice *d, const SimIhEntry *e) {
        if (d->ih_n == d->ih_cap) {
                size_t cap = d->ih_cap ? d->ih_cap * 2 : 16;
                SimIhEntry *a = realloc(d->ih, cap * sizeof *a);

                if (!a) {
                        drain(d);
                        handle(e);
                        return;
                }
                d->ih = a;
                d->ih_cap = cap;
        }
        d->ih[d->ih_n++] = *e;
}

void sim_ih_interrupt(SimProcess *p, uint32_t partial_id, unsigned valid_bits) {
        SimDevice *d = p->device;
        SimIhEntry e = { .process = p, .partial_id = partial_id, .valid_bits = valid_bits };

        if (d->ih_n == 0)
                handle(&e);
        else
                push(d, &e);
}

void sim_ih_vm_fault(SimQueue *q, uint64_t va) {
        SimDevice *d = q->process->device;
        SimIhEntry e = { .process = q->process, .gpu = q->pdd->gpu, .fault = true, .va = va };

        if (!sim_ih_fence_first(d)) {
                handle(&e); /* nothing is ever queued in this order */
                return;
        }
        if (q->destroying) {
                /* The queue goes (a dispatch of it ran on while DESTROY_QUEUE
                 * waited): nothing of it runs on to wait for. */
                push(d, &e);
                drain(d);
                return;
        }
        log_debug("sim: queue %u: GPU VM fault at 0x%llx queued for the interrupt handler; the queue runs on", q->id,
                  (unsigned long long) va);
        if (!d->ih_fault_queue) {
                d->ih_fault_queue = q;
                d->ih_run_on = SIM_IH_RUN_ON_STEPS;
        }
        push(d, &e);
}

void sim_ih_after_step(SimQueue *q, int result) {
        SimDevice *d = q->process->device;

        if (d->ih_fault_queue != q)
                return;
        if (result == SIM_STEP_PROGRESS && --d->ih_run_on > 0 && !q->stopped && !q->destroying && !q->process->evicted)
                return;
        drain(d);
}

void sim_ih_queue_gone(SimQueue *q) {
        SimDevice *d = q->process->device;

        if (d->ih_fault_queue == q)
                drain(d);
}

void sim_ih_process_gone(SimProcess *p) {
        SimDevice *d = p->device;
        size_t kept = 0;

        if (!d || d->ih_n == 0)
                return;
        for (size_t i = 0; i < d->ih_n; i++)
                if (d->ih[i].process != p)
                        d->ih[kept++] = d->ih[i];
        d->ih_n = kept;
        if (d->ih_fault_queue && d->ih_fault_queue->process == p)
                drain(d);
}

void sim_ih_flush(SimDevice *d) {
        drain(d);
}
