/* SPDX-License-Identifier: MIT */
/*
 * A user-mode queue of the simulated GPU: CREATE_QUEUE/DESTROY_QUEUE with the
 * validation of kfd_chardev.c set_queue_properties_from_user and kfd_queue.c
 * kfd_queue_acquire_buffers (kernels >= 6.12), the doorbell slot, the SDMA
 * queue pool, and the per-queue execution state an engine advances. The
 * SimProcess owns its queues; a queue runs on the GPU CREATE_QUEUE names, in
 * that GPU's VM, and an engine of that GPU only lists the ones it runs: SDMA
 * queues go to the SDMA engine of their slot, PM4 compute queues to a CP
 * engine thread of their own. AQL queues are validated and
 * created but not executed. Locked.
 */
#pragma once

#include <linux/kfd_ioctl.h>
#include <stdbool.h>
#include <stdint.h>

#include "sim-types.h"

/* kfd_ioctl_create_queue_args of uapi 1.17 (96 bytes): 1.11's 88 plus
 * sdma_engine_id and pad, for KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID. */
typedef struct SimCreateQueueArgs {
        struct kfd_ioctl_create_queue_args base;
        uint32_t sdma_engine_id;
        uint32_t pad;
} SimCreateQueueArgs;
#define SIM_QUEUE_TYPE_SDMA_BY_ENG_ID 4u

struct SimQueue {
        SimQueue *engine_next;   /* SimEngine.queues */
        SimProcess *process;
        SimPdd *pdd;             /* the GPU it runs on, and its VM and doorbell page there */
        SimEngine *engine;       /* NULL while inactive (queue_percentage 0) and for AQL queues */
        uint32_t id;
        uint32_t type;           /* KFD_IOC_QUEUE_TYPE_* */
        uint64_t ring_va;
        uint32_t ring_size;      /* bytes, power of two */
        uint64_t rptr_va, wptr_va;
        SimMem *ring_mem, *rptr_mem, *wptr_mem, *eop_mem, *cwsr_mem; /* queue_refcount held */
        uint32_t doorbell_index;
        int sdma_slot;           /* index in its GPU's SDMA pool, -1 for compute */
        unsigned pipe_priority;  /* compute: CP_HQD_PIPE_PRIORITY from queue_priority (sim-queue.c) */
        /* SET_CU_MASK's mask, kept as the kernel keeps it in the MQD; the
         * simulator's scheduling does not follow it (its CUs are host
         * threads shared by every queue). */
        uint32_t cu_mask[32];
        uint32_t cu_mask_count;  /* bits, 0 before any SET_CU_MASK */

        /* Engine state. */
        uint64_t rptr;           /* where the engine executes: bytes (SDMA), monotonic */
        uint64_t fetched;        /* SDMA: how far it has read the ring, >= rptr; what the rptr word reports */
        uint8_t *fetch_copy;     /* SDMA: the ring bytes it has read, at their ring offsets (ring_size) */
        uint64_t doorbell_seen;  /* last doorbell value acted on */
        uint64_t wptr;           /* target from the doorbell */
        unsigned poll_tries;
        uint64_t midcmd_done;    /* SDMA: bytes of the COPY/FILL at rptr moved before the engine switched
                                  * to another queue inside it (the MQD's MIDCMD state, sim-sdma.c) */
        bool stopped;            /* after a fault or a bad packet, until DESTROY_QUEUE */
        SimCpState *cp;          /* PM4 compute queues: registers, IB and dispatch state (sim-cp.h) */
        bool destroying;         /* sim_queue_free() is waiting for the engine to let go */
};

int sim_queue_create(SimProcess *p, SimCreateQueueArgs *a);
int sim_queue_destroy(SimProcess *p, struct kfd_ioctl_destroy_queue_args *a);
struct kfd_ioctl_set_cu_mask_args;
/* SET_CU_MASK (sim-queue.c): -EINVAL for a count of 0 or not a multiple of
 * 32, -EFAULT for a NULL mask or a queue that is not there. */
int sim_queue_set_cu_mask(SimProcess *p, struct kfd_ioctl_set_cu_mask_args *a);
/* Destroys a queue: cancels and waits out a running dispatch (releasing the
 * device lock meanwhile), detaches it from its engine, releases its buffers. */
void sim_queue_free(SimQueue *q);

/* Host views of the queue's ring and pointer words (their mappings are pinned
 * by queue_refcount, so these stay valid until sim_queue_free()). */
uint8_t *sim_queue_ring(SimQueue *q);
void sim_queue_store_rptr(SimQueue *q, uint64_t value);
/* The 32-bit report a CP writes (sim-cp.c), at the same place. */
void sim_queue_store_rptr32(SimQueue *q, uint32_t value);
/* The compare functions of SDMA POLL_REGMEM and PM4 WAIT_REG_MEM, which share
 * their codes (0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >; kfd-facts §2.2,
 * §3.2); an undefined code never passes. */
bool sim_queue_compare(unsigned func, uint32_t v, uint32_t ref);
uint64_t sim_queue_load_doorbell(SimQueue *q);
