/* SPDX-License-Identifier: MIT */
/*
 * The rig of the simulator's queue fuzz targets (fuzz-sdma.c, fuzz-pm4.c): one
 * simulated gfx1030 device, brought up once per run through the KfdOps table
 * as the daemon does it (open, ACQUIRE_VM, event page, events, buffers at
 * fixed GPU addresses, one inactive queue), whose queue an input then drives
 * step by step on the fuzzing thread: the input's dwords go into the ring,
 * the doorbell is rung, and the engine's step function (the one an engine
 * thread would call) runs under the device lock until it stops making
 * progress or has had RIG_MAX_STEPS tries. The queue is created inactive
 * (queue_percentage 0), so no engine thread runs it behind the fuzzer's back;
 * what the engine thread does after each step (sim_ih_after_step(): a VM
 * fault waits for its queue to run on in the default fence-first order,
 * sim-ih.h) the rig does too, and at the end it lets the interrupt handler
 * take whatever still waits.
 *
 * Memory (GPU VAs, fixed so that seeds can name them and mutations miss
 * them): the ring at RIG_RING_VA, a 64 KiB writable data buffer at
 * RIG_DATA_VA whose first dwords hold s_endpgm (code a dispatch can run), a
 * 4 KiB one at RIG_SMALL_VA right after an unmapped gap, the event page at
 * RIG_EVENT_PAGE_VA; everything else faults.
 *
 * Before each input the rig puts back what an input may have changed: the
 * data and ring contents, the queue's pointers and stop state, the CP's
 * registers, the process's eviction by a VM fault, and its record of HW
 * exceptions. That is internal state of the simulator (a real process would
 * need a new queue, or a new context after a fault); resetting it instead of
 * building them again keeps an input at a few microseconds.
 */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfd/kfd-ops.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim-cp.h"
#include "sim/sim-device.h"
#include "sim/sim-engine.h"
#include "sim/sim-events.h"
#include "sim/sim-ih.h"
#include "sim/sim-memory.h"
#include "sim/sim-process.h"
#include "sim/sim-queue.h"
#include "sim/sim.h"

#include "fuzz-sim-layout.h"

#define RIG_MAX_STEPS 8u
/* Wave-instructions per dispatch (SimOptions): small, so that an input
 * stays at microseconds whatever the kernel does. */
#define RIG_DISPATCH_BUDGET 4096u

typedef struct Rig {
        const char *name;
        SimDevice *dev;
        const KfdOps *ops;
        int kfd, render;
        SimProcess *proc;
        SimQueue *q;
        uint32_t signal_event, memory_event;
        uint8_t data_template[RIG_DATA_BYTES];
} Rig;

static void rig_check(const Rig *rig, bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "%s: broken promise: %s\n", rig->name, what);
                abort();
        }
}

static int rig_ioctl(Rig *rig, unsigned long req, void *arg) {
        return kfd_ioctl(rig->ops, rig->kfd, req, arg);
}

static void rig_bo(Rig *rig, uint64_t va, uint64_t size, uint32_t domain) {
        uint32_t ids[1] = { 0x697D };
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = va, .size = size, .gpu_id = 0x697D,
                .flags = domain | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE |
                         KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
        };
        rig_check(rig, rig_ioctl(rig, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a) == 0, "ALLOC_MEMORY_OF_GPU");
        struct kfd_ioctl_map_memory_to_gpu_args m = {
                .handle = a.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };
        rig_check(rig, rig_ioctl(rig, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m) == 0, "MAP_MEMORY_TO_GPU");
        if (domain == KFD_IOC_ALLOC_MEM_FLAGS_GTT && va == RIG_EVENT_PAGE_VA) {
                struct kfd_ioctl_create_event_args e = {
                        .event_page_offset = a.handle, .event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1,
                };
                rig_check(rig, rig_ioctl(rig, AMDKFD_IOC_CREATE_EVENT, &e) == 0, "CREATE_EVENT");
                rig->signal_event = e.event_id;
        }
}

/* Host view of [va, va + len): only for the rig's own buffers. Locked. */
static uint8_t *rig_host(Rig *rig, uint64_t va, uint64_t len) {
        uint64_t fault_va;
        uint8_t *host = NULL;

        rig_check(rig, sim_vm_access(rig->proc->pdds[0], va, len, &host, &fault_va) == 0, "the rig's own memory");
        return host;
}

static void rig_teardown(Rig *rig) {
        rig->ops->close(rig->ops->userdata, rig->kfd);
        rig->ops->close(rig->ops->userdata, rig->render);
        sim_device_free(rig->dev);
        rig->dev = NULL;
}

static Rig *rig_instance;

static void rig_atexit(void) {
        if (rig_instance && rig_instance->dev)
                rig_teardown(rig_instance);
}

/* Brings the device, the context, the memory and the queue up (once). */
static void rig_up(Rig *rig, const char *name, uint32_t queue_type) {
        SimOptions o = { .max_dispatch_wave_instructions = RIG_DISPATCH_BUDGET };
        struct kfd_ioctl_create_queue_args q;
        struct kfd_ioctl_acquire_vm_args vm;
        const SimGpuInfo *g;

        if (rig->dev)
                return;
        rig->name = name;
        rig_check(rig, sim_device_new(&o, &rig->dev) == 0, "sim_device_new");
        rig->ops = sim_device_get_ops(rig->dev);
        rig->kfd = rig->ops->open_kfd(rig->ops->userdata);
        rig->render = rig->ops->open_render(rig->ops->userdata, 128);
        rig_check(rig, rig->kfd >= 0 && rig->render >= 0, "open");
        vm = (struct kfd_ioctl_acquire_vm_args) { .drm_fd = (uint32_t) rig->render, .gpu_id = 0x697D };
        rig_check(rig, rig_ioctl(rig, AMDKFD_IOC_ACQUIRE_VM, &vm) == 0, "ACQUIRE_VM");
        g = &rig->dev->gpus[0]->info;

        rig_bo(rig, RIG_EVENT_PAGE_VA, KFD_EVENT_PAGE_SIZE, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        {
                struct kfd_ioctl_create_event_args e = { .event_type = KFD_IOC_EVENT_MEMORY, .auto_reset = 1 };
                rig_check(rig, rig_ioctl(rig, AMDKFD_IOC_CREATE_EVENT, &e) == 0, "CREATE_EVENT memory");
                rig->memory_event = e.event_id;
        }
        rig_bo(rig, RIG_RING_VA, RIG_RING_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        rig_bo(rig, RIG_RPTR_VA, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        rig_bo(rig, RIG_WPTR_VA, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        rig_bo(rig, RIG_DATA_VA, RIG_DATA_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        rig_bo(rig, RIG_SMALL_VA, RIG_SMALL_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);

        q = (struct kfd_ioctl_create_queue_args) {
                .ring_base_address = RIG_RING_VA,
                .write_pointer_address = RIG_WPTR_VA,
                .read_pointer_address = RIG_RPTR_VA,
                .ring_size = RIG_RING_BYTES,
                .gpu_id = 0x697D,
                .queue_type = queue_type,
                .queue_percentage = 0, /* inactive: no engine thread runs it */
                .queue_priority = 7,
        };
        if (queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE) {
                rig_bo(rig, RIG_EOP_VA, g->eop_buffer_size, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
                rig_bo(rig, RIG_CWSR_VA, g->cwsr_bo_size, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
                q.eop_buffer_address = RIG_EOP_VA;
                q.eop_buffer_size = g->eop_buffer_size;
                q.ctx_save_restore_address = RIG_CWSR_VA;
                q.ctx_save_restore_size = g->cwsr_size;
                q.ctl_stack_size = g->ctl_stack_size;
        }
        rig_check(rig, rig_ioctl(rig, AMDKFD_IOC_CREATE_QUEUE, &q) == 0, "CREATE_QUEUE");

        pthread_mutex_lock(&rig->dev->lock);
        rig->proc = rig->dev->mm.primary;
        rig_check(rig, rig->proc && q.queue_id < SIM_MAX_QUEUES_PER_PROCESS && rig->proc->queues[q.queue_id],
                  "the queue in its process");
        rig->q = rig->proc->queues[q.queue_id];
        rig_check(rig, rig->q->engine == NULL, "an inactive queue has no engine");
        pthread_mutex_unlock(&rig->dev->lock);

        /* Data: s_endpgm at the start (code), then pointers into the data
         * buffer and a pattern, so that loads and polls find plausible values. */
        for (uint32_t i = 0; i < RIG_DATA_BYTES / 4; i++) {
                uint32_t v = i < 64 ? RIG_S_ENDPGM : i < 128 ? (uint32_t) (RIG_DATA_VA + i * 64) : i * 0x9E3779B9u;
                memcpy(rig->data_template + i * 4, &v, 4);
        }
        rig_instance = rig;
        atexit(rig_atexit);
}

/*
 * Puts the queue back at ring position start_ptr (the engine's unit: bytes
 * for SDMA, dwords for the CP) with the ring holding dw (wrapping), resets
 * what an earlier input changed, and rings the doorbell with doorbell.
 * Locked.
 */
static void rig_load(Rig *rig, uint64_t start_ptr, const uint32_t *dw, size_t n, uint64_t doorbell, bool dword_ptrs) {
        SimQueue *q = rig->q;
        uint32_t *ring = (uint32_t *) (void *) rig_host(rig, RIG_RING_VA, RIG_RING_BYTES);
        uint64_t ring_dw = RIG_RING_BYTES / 4, start_dw = dword_ptrs ? start_ptr : start_ptr / 4;

        memset(ring, 0, RIG_RING_BYTES);
        for (size_t i = 0; i < n; i++)
                ring[(start_dw + i) % ring_dw] = dw[i];
        memcpy(rig_host(rig, RIG_DATA_VA, RIG_DATA_BYTES), rig->data_template, RIG_DATA_BYTES);
        memset(rig_host(rig, RIG_SMALL_VA, RIG_SMALL_BYTES), 0, RIG_SMALL_BYTES);
        memset(rig_host(rig, RIG_RPTR_VA, 4096), 0, 4096);
        /* The read pointer word as the engine left it at start_ptr. */
        if (dword_ptrs)
                sim_queue_store_rptr32(q, (uint32_t) ((start_ptr & ~63ull) % ring_dw));
        else
                sim_queue_store_rptr(q, start_ptr);

        q->rptr = start_ptr;
        q->fetched = start_ptr;
        q->wptr = start_ptr;
        q->stopped = false;
        q->poll_tries = 0;
        if (q->cp) {
                memset(q->cp->sh, 0, sizeof q->cp->sh);
                memset(q->cp->uconfig, 0, sizeof q->cp->uconfig);
                q->cp->in_ib = false;
                q->cp->ib_va = 0;
                q->cp->ib_size_dw = q->cp->ib_pos = q->cp->ib_packet_dw = 0;
                __atomic_store_n(&q->cp->cancel, 0, __ATOMIC_RELEASE);
        }
        rig->proc->evicted = false;
        rig->proc->exception_first = rig->proc->exception_count = 0;
        q->doorbell_seen = ~doorbell;
        __atomic_store_n(&q->pdd->doorbells[q->doorbell_index], doorbell, __ATOMIC_RELEASE);
}

typedef int (*RigStep)(SimQueue *q);

/*
 * Runs the queue until a step makes no progress, at most RIG_MAX_STEPS, and
 * checks the engine's promises: a stopped queue was either faulted (process
 * evicted, MEMORY event, no record) or refused a packet (a printable record
 * naming the queue; no eviction, unless a fault it ran on past came first:
 * fence-first order, sim-ih.h); a queue still running has no record, no
 * eviction but after a fault it ran on past, and its read position moved
 * forward only, never past the doorbell's wptr. Returns whether the queue
 * stopped. Locked.
 */
static bool rig_run(Rig *rig, RigStep step, uint64_t start_ptr) {
        SimQueue *q = rig->q;
        unsigned steps = 0;
        int r;

        /* Until the queue stops making progress (idle, or waiting on memory
         * nobody will write). */
        do {
                r = step(q);
                sim_ih_after_step(q, r);
        } while (r == SIM_STEP_PROGRESS && ++steps < RIG_MAX_STEPS);
        sim_ih_flush(rig->dev);

        if (q->stopped) {
                bool record = rig->proc->exception_count > 0;
                rig_check(rig, record || rig->proc->evicted, "a stop is either a VM fault or a refused packet");
                rig_check(rig, !record || !rig->proc->evicted || sim_ih_fence_first(rig->dev),
                          "a refused packet evicted the process (event-first order)");
                if (record) {
                        const SimException *x = &rig->proc->exceptions[rig->proc->exception_first];
                        size_t n = strnlen(x->text, sizeof x->text);
                        rig_check(rig, x->queue_id == q->id, "the record names another queue");
                        rig_check(rig, n > 0 && n < sizeof x->text, "an empty or unterminated record");
                        for (size_t i = 0; i < n; i++)
                                rig_check(rig, (unsigned char) x->text[i] >= 0x20 && (unsigned char) x->text[i] < 0x7f,
                                          "a record with unprintable text");
                        rig_check(rig, rig->proc->exception_count == 1, "more than one record for one stop");
                }
        } else {
                rig_check(rig, rig->proc->exception_count == 0, "a record without a stop");
                rig_check(rig, !rig->proc->evicted || sim_ih_fence_first(rig->dev),
                          "an eviction without a stop (event-first order)");
                rig_check(rig, q->rptr - start_ptr <= q->wptr - start_ptr, /* differences: they may wrap */
                          "the read position left [start, wptr]");
        }
        /* Once stopped, a step does nothing more. */
        if (q->stopped)
                rig_check(rig, step(q) == SIM_STEP_IDLE, "a stopped queue made progress");
        return q->stopped;
}
