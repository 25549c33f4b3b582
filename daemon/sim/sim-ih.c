/* SPDX-License-Identifier: MIT */
/*
 * The interrupt handler's queue of the simulated GPU (see sim-ih.h): the
 * entries raised while a GPU VM fault waits to be handled, in the order they
 * were raised, and the queue whose fault holds them. One per GPU, owned by
 * its SimGpu; locked.
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
static void drain(SimGpu *g) {
        /* Taken off first: handling one may not add another, but a fault
         * evicts queues, and nothing here should see a half-walked array. */
        SimIhEntry *entries = g->ih;
        size_t n = g->ih_n;

        g->ih = NULL;
        g->ih_n = g->ih_cap = 0;
        g->ih_fault_queue = NULL;
        g->ih_run_on = 0;
        for (size_t i = 0; i < n; i++)
                handle(&entries[i]);
        free(entries);
        if (n > 0)
                sim_events_deliver(g->device, true);
}

/* Queues e behind what is there. Without memory for it, what is there and e
 * are handled now, in order: sooner than planned, never out of order. */
static void push(SimGpu *g, const SimIhEntry *e) {
        if (g->ih_n == g->ih_cap) {
                size_t cap = g->ih_cap ? g->ih_cap * 2 : 16;
                SimIhEntry *a = realloc(g->ih, cap * sizeof *a);

                if (!a) {
                        drain(g);
                        handle(e);
                        return;
                }
                g->ih = a;
                g->ih_cap = cap;
        }
        g->ih[g->ih_n++] = *e;
}

void sim_ih_interrupt(SimGpu *g, SimProcess *p, uint32_t partial_id, unsigned valid_bits) {
        SimIhEntry e = { .process = p, .partial_id = partial_id, .valid_bits = valid_bits };

        if (g->ih_n == 0)
                handle(&e);
        else
                push(g, &e);
}

void sim_ih_vm_fault(SimQueue *q, uint64_t va) {
        SimGpu *g = q->pdd->gpu;
        SimIhEntry e = { .process = q->process, .gpu = g, .fault = true, .va = va };

        if (!sim_ih_fence_first(g->device)) {
                handle(&e); /* nothing is ever queued in this order */
                return;
        }
        if (q->destroying) {
                /* The queue goes (a dispatch of it ran on while DESTROY_QUEUE
                 * waited): nothing of it runs on to wait for. */
                push(g, &e);
                drain(g);
                return;
        }
        log_debug("sim: queue %u: GPU VM fault at 0x%llx queued for the interrupt handler; the queue runs on", q->id,
                  (unsigned long long) va);
        if (!g->ih_fault_queue) {
                g->ih_fault_queue = q;
                g->ih_run_on = SIM_IH_RUN_ON_STEPS;
        }
        push(g, &e);
}

void sim_ih_after_step(SimQueue *q, int result) {
        SimGpu *g = q->pdd->gpu;

        if (g->ih_fault_queue != q)
                return;
        if (result == SIM_STEP_PROGRESS && --g->ih_run_on > 0 && !q->stopped && !q->destroying && !q->process->evicted)
                return;
        drain(g);
}

void sim_ih_queue_gone(SimQueue *q) {
        SimGpu *g = q->pdd->gpu;

        if (g->ih_fault_queue == q)
                drain(g);
}

static void gpu_process_gone(SimGpu *g, SimProcess *p) {
        size_t kept = 0;

        if (g->ih_n == 0)
                return;
        for (size_t i = 0; i < g->ih_n; i++)
                if (g->ih[i].process != p)
                        g->ih[kept++] = g->ih[i];
        g->ih_n = kept;
        if (g->ih_fault_queue && g->ih_fault_queue->process == p)
                drain(g);
}

void sim_ih_process_gone(SimProcess *p) {
        if (!p->device)
                return;
        for (unsigned i = 0; i < p->device->n_gpus; i++)
                gpu_process_gone(p->device->gpus[i], p);
}

void sim_ih_flush(SimDevice *d) {
        for (unsigned i = 0; i < d->n_gpus; i++)
                drain(d->gpus[i]);
}
