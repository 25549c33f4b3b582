/* SPDX-License-Identifier: MIT */
/*
 * CREATE_QUEUE and DESTROY_QUEUE of the simulated GPU. Validation follows
 * kfd_chardev.c set_queue_properties_from_user and kfd_ioctl_create_queue,
 * and kfd_queue.c kfd_queue_acquire_buffers of kernels >= 6.12 (kfd-facts
 * §1.6): each buffer address must fall in the first page of a GPU mapping
 * whose size, in pages, equals the expected size (kfd_queue_buffer_get; a
 * size below one page only checks the start), and the mapping is pinned with
 * queue_refcount until the queue is destroyed. SDMA queues come from the
 * pool of its GPU (sim-gpu.h) of num_sdma_engines * num_sdma_queues_per_engine slots
 * (allocate_sdma_queue: engine = id % engines, queue = id / engines); their
 * doorbells sit at the per-engine reserved indices, compute doorbells are the
 * lowest free index outside them (kfd_doorbell.c init_doorbell_bitmap).
 *
 * Choice: an unknown queue_type returns -EOPNOTSUPP. The kernel returns
 * -ENOTSUPP (524), an errno value internal to the kernel that user space sees
 * as "Unknown error 524"; -EOPNOTSUPP is the portable spelling of the same
 * refusal.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kfd/kfd-uapi.h"
#include "sim-atomic.h"
#include "sim-cp.h"
#include "sim-device.h"
#include "isa/sim-isa.h"
#include "sim-engine.h"
#include "sim-memory.h"
#include "sim-process.h"
#include "sim-ih.h"
#include "sim-queue.h"
#include "util/log.h"
#include "util/macro.h"

/* Navi10 doorbell layout (amdgpu_doorbell.h AMDGPU_NAVI10_DOORBELL_sDMA_ENGINE0/1):
 * SDMA engine e's queues start at 0x100 + 0xA * e; queue q sits at
 * base + (q & 1) * KFD_QUEUE_DOORBELL_MIRROR_OFFSET + (q >> 1)
 * (kfd_device_queue_manager.c allocate_doorbell). */
#define SDMA_DOORBELL_BASE 0x100u
#define SDMA_DOORBELL_ENGINE_STRIDE 0xAu
#define KFD_QUEUE_DOORBELL_MIRROR_OFFSET 512u
/* init_doorbell_bitmap reserves the non-CP range and its mirror. */
#define NON_CP_DOORBELLS_START 0x100u
#define NON_CP_DOORBELLS_END 0x1FFu

static bool access_ok(uint64_t addr, uint64_t size) {
        return addr <= SIM_TASK_SIZE_MAX && size <= SIM_TASK_SIZE_MAX - addr;
}

static bool is_reserved_doorbell(uint32_t i) {
        uint32_t j = i % KFD_QUEUE_DOORBELL_MIRROR_OFFSET;
        return j >= NON_CP_DOORBELLS_START && j <= NON_CP_DOORBELLS_END;
}

/* kfd_queue.c kfd_queue_buffer_get(). */
static int buffer_get(SimPdd *vm, uint64_t addr, uint64_t expected_size, SimMem **ret) {
        uint64_t page = addr >> 12, pages = expected_size >> 12;
        SimMem *m = sim_vm_lookup(vm, addr);

        if (!m)
                return -EINVAL;
        if (page != m->va >> 12 || (pages != 0 && page + pages - 1 != (m->va + m->size - 1) >> 12)) {
                log_debug("sim: expected size 0x%llx not equal to mapping addr 0x%llx size 0x%llx",
                          (unsigned long long) expected_size, (unsigned long long) m->va,
                          (unsigned long long) m->size);
                return -EINVAL;
        }
        *ret = m;
        return 0;
}

/* set_queue_properties_from_user(). */
static int check_properties(const SimDevice *d, SimCreateQueueArgs *a) {
        struct kfd_ioctl_create_queue_args *b = &a->base;

        if ((b->queue_percentage & 0xFF) > KFD_MAX_QUEUE_PERCENTAGE)
                return -EINVAL;
        if (b->queue_priority > KFD_MAX_QUEUE_PRIORITY)
                return -EINVAL;
        if (b->ring_base_address && !access_ok(b->ring_base_address, sizeof(uint64_t)))
                return -EFAULT;
        if (!is_power_of_2_u64(b->ring_size) && b->ring_size != 0)
                return -EINVAL; /* "Ring size must be a power of 2 or 0" */
        if (b->ring_size < KFD_MIN_QUEUE_RING_SIZE)
                b->ring_size = KFD_MIN_QUEUE_RING_SIZE; /* clamped, and copied back */
        if (!access_ok(b->read_pointer_address, sizeof(uint32_t)))
                return -EFAULT;
        if (!access_ok(b->write_pointer_address, sizeof(uint32_t)))
                return -EFAULT;
        if (b->eop_buffer_address && !access_ok(b->eop_buffer_address, sizeof(uint32_t)))
                return -EFAULT;
        if (b->ctx_save_restore_address && !access_ok(b->ctx_save_restore_address, sizeof(uint32_t)))
                return -EFAULT;
        switch (b->queue_type) {
        case KFD_IOC_QUEUE_TYPE_COMPUTE:
        case KFD_IOC_QUEUE_TYPE_SDMA:
        case KFD_IOC_QUEUE_TYPE_COMPUTE_AQL:
        case KFD_IOC_QUEUE_TYPE_SDMA_XGMI:
                return 0;
        case SIM_QUEUE_TYPE_SDMA_BY_ENG_ID:
                /* uapi 1.17; an older kernel does not know the type. */
                return d->kfd_minor >= 17 ? 0 : -EOPNOTSUPP;
        default:
                return -EOPNOTSUPP; /* kernel: -ENOTSUPP, see the file comment */
        }
}

/*
 * The HQD's pipe priority, as the MQD managers set it (kfd_mqd_manager_v10.c
 * set_priority: cp_hqd_pipe_priority = pipe_priority_map[queue_priority];
 * kfd_mqd_manager.c pipe_priority_map: 0-6 CS_LOW (0), 7-10 CS_MEDIUM (1),
 * 11-15 CS_HIGH (2)). The queue priority itself (cp_hqd_queue_priority) is
 * not modelled: amdkfd stopped setting it ("drm/amdkfd: Disable MQD queue
 * priority", 73463e26f7e2, 2026), so queues of one pipe take turns.
 */
static unsigned pipe_priority(uint32_t queue_priority) {
        return queue_priority >= 11 ? SIM_PIPE_PRIORITY_HIGH
               : queue_priority >= 7 ? SIM_PIPE_PRIORITY_MEDIUM
                                     : SIM_PIPE_PRIORITY_LOW;
}

static bool is_sdma(uint32_t type) {
        return type == KFD_IOC_QUEUE_TYPE_SDMA || type == KFD_IOC_QUEUE_TYPE_SDMA_XGMI ||
               type == SIM_QUEUE_TYPE_SDMA_BY_ENG_ID;
}

/* allocate_sdma_queue(): the lowest free slot, restricted to one engine for SDMA_BY_ENG_ID. */
static int allocate_sdma_slot(SimGpu *gpu, uint32_t type, uint32_t engine_id) {
        const SimGpuInfo *g = &gpu->info;
        unsigned n_engines = g->num_sdma_engines;
        unsigned n = MIN(n_engines * g->num_sdma_queues_per_engine, SIM_MAX_SDMA_SLOTS);

        if (type == KFD_IOC_QUEUE_TYPE_SDMA_XGMI)
                return -ENOMEM; /* num_sdma_xgmi_engines == 0: "No more XGMI SDMA queue to allocate" */
        for (unsigned s = 0; s < n; s++) {
                if (gpu->sdma_slots[s])
                        continue;
                if (type == SIM_QUEUE_TYPE_SDMA_BY_ENG_ID && s % n_engines != engine_id)
                        continue;
                return (int) s;
        }
        return -ENOMEM; /* "No more SDMA queue to allocate" */
}

int sim_queue_create(SimProcess *p, SimCreateQueueArgs *a) {
        struct kfd_ioctl_create_queue_args *b = &a->base;
        SimEngine *cp_engine = NULL;
        const SimGpuInfo *g;
        SimPdd *pdd;
        SimMem *wptr_mem, *rptr_mem, *ring_mem, *eop_mem = NULL, *cwsr_mem = NULL;
        uint32_t id, doorbell;
        int slot = -1, r;
        SimQueue *q;

        r = check_properties(p->device, a);
        if (r < 0)
                return r;
        /* kfd_ioctl_create_queue */
        pdd = sim_process_pdd(p, b->gpu_id);
        if (!pdd)
                return -EINVAL; /* "Could not find gpu id" */
        if (!pdd->vm_file)
                return -ESRCH; /* kfd_bind_process_to_device failed -> -ESRCH */
        g = &pdd->gpu->info;
        if (b->queue_type == SIM_QUEUE_TYPE_SDMA_BY_ENG_ID &&
            a->sdma_engine_id > g->num_sdma_engines + g->num_sdma_xgmi_engines - 1)
                return -EINVAL;

        /* kfd_queue_acquire_buffers(): wptr, rptr, ring, then EOP and CWSR for compute. */
        r = buffer_get(pdd, b->write_pointer_address, PAGE_SIZE_4K, &wptr_mem);
        if (r < 0)
                return r;
        r = buffer_get(pdd, b->read_pointer_address, PAGE_SIZE_4K, &rptr_mem);
        if (r < 0)
                return r;
        r = buffer_get(pdd, b->ring_base_address, b->ring_size, &ring_mem);
        if (r < 0)
                return r;
        if (!is_sdma(b->queue_type)) {
                /* "EOP buffer is not required for all ASICs" */
                if (b->eop_buffer_address) {
                        if (b->eop_buffer_size != g->eop_buffer_size)
                                return -EINVAL;
                        r = buffer_get(pdd, b->eop_buffer_address, b->eop_buffer_size, &eop_mem);
                        if (r < 0)
                                return r;
                }
                if (b->ctl_stack_size != g->ctl_stack_size)
                        return -EINVAL;
                if (b->ctx_save_restore_size != g->cwsr_size)
                        return -EINVAL;
                /* No SVM fallback: the CWSR area must be a BO mapping of exactly
                 * ALIGN((cwsr_size + debug_memory_size) * num_xcc, PAGE_SIZE). */
                r = buffer_get(pdd, b->ctx_save_restore_address, g->cwsr_bo_size, &cwsr_mem);
                if (r < 0)
                        return r;
        }

        /* pqm_create_queue: find_available_queue_slot(). */
        for (id = 0; id < SIM_MAX_QUEUES_PER_PROCESS; id++)
                if (!p->queues[id])
                        break;
        if (id == SIM_MAX_QUEUES_PER_PROCESS)
                return -ENOMEM; /* "Cannot open more queues for process" */

        if (is_sdma(b->queue_type)) {
                unsigned engine, qid;

                slot = allocate_sdma_slot(pdd->gpu, b->queue_type, a->sdma_engine_id);
                if (slot < 0)
                        return slot;
                engine = (unsigned) slot % g->num_sdma_engines;
                qid = (unsigned) slot / g->num_sdma_engines;
                doorbell = SDMA_DOORBELL_BASE + engine * SDMA_DOORBELL_ENGINE_STRIDE +
                           (qid & 1) * KFD_QUEUE_DOORBELL_MIRROR_OFFSET + (qid >> 1);
        } else {
                for (doorbell = 0; doorbell < SIM_DOORBELL_COUNT; doorbell++)
                        if (!pdd->doorbell_used[doorbell] && !is_reserved_doorbell(doorbell))
                                break;
                if (doorbell == SIM_DOORBELL_COUNT)
                        return -EBUSY; /* allocate_doorbell: "No doorbells available" */
        }

        if (!is_sdma(b->queue_type) && (b->queue_percentage & 0xFF) > 0) {
                r = sim_gpu_cp_engine_get(pdd->gpu, &cp_engine);
                if (r < 0)
                        return r;
        }
        q = calloc(1, sizeof *q);
        if (!q)
                return -ENOMEM;
        if (b->queue_type == KFD_IOC_QUEUE_TYPE_COMPUTE) {
                r = sim_cp_state_new(&q->cp);
                if (r < 0) {
                        free(q);
                        return r;
                }
        }
        q->process = p;
        q->pdd = pdd;
        q->id = id;
        q->type = b->queue_type;
        q->ring_va = b->ring_base_address;
        q->ring_size = b->ring_size;
        q->rptr_va = b->read_pointer_address;
        q->wptr_va = b->write_pointer_address;
        q->ring_mem = ring_mem;
        q->rptr_mem = rptr_mem;
        q->wptr_mem = wptr_mem;
        q->eop_mem = eop_mem;
        q->cwsr_mem = cwsr_mem;
        q->doorbell_index = doorbell;
        q->sdma_slot = slot;
        q->pipe_priority = pipe_priority(b->queue_priority);
        for (SimMem **m = (SimMem *[]) { ring_mem, rptr_mem, wptr_mem, eop_mem, cwsr_mem }, **end = m + 5;
             m < end; m++)
                if (*m)
                        (*m)->queue_refcount[pdd->gpu->index]++;

        p->queues[id] = q;
        pdd->doorbell_used[doorbell] = true;
        /* The hardware starts at RB_RPTR = RB_WPTR = 0 and writes rptr back. */
        __atomic_store_n(&pdd->doorbells[doorbell], 0, __ATOMIC_RELEASE);
        sim_queue_store_rptr(q, 0);

        /* An inactive queue (queue_percentage 0) exists but is not scheduled. */
        if (slot >= 0) {
                pdd->gpu->sdma_slots[slot] = q;
                if ((b->queue_percentage & 0xFF) > 0)
                        sim_engine_add_queue(pdd->gpu->sdma_engines[(unsigned) slot % g->num_sdma_engines], q);
        } else if (q->cp && cp_engine) {
                /* allocate_hqd(): pipes in turn (dqm->next_pipe_to_allocate).
                 * The queue gets an engine thread of its own all the same:
                 * a pipe's CP goes on to its other queues while a dispatch
                 * runs, so queues of one pipe run side by side. */
                log_debug("sim: compute queue %u of process %p on GPU 0x%x pipe %u, pipe priority %u", id, (void *) p,
                          g->gpu_id, pdd->gpu->next_cp_pipe, q->pipe_priority);
                sim_engine_add_queue(cp_engine, q);
                pdd->gpu->next_cp_pipe = (pdd->gpu->next_cp_pipe + 1) % SIM_CP_PIPES;
        }

        b->queue_id = id;
        b->doorbell_offset = KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(g->gpu_id) | ((uint64_t) doorbell * 8);
        log_debug("sim: created queue %u type %u doorbell index 0x%x", id, q->type, doorbell);
        return 0;
}

void sim_queue_free(SimQueue *q) {
        SimProcess *p;

        if (!q)
                return;
        p = q->process;
        /* First, while everything of q still stands: a dispatch running
         * without the lock may still use it. */
        q->destroying = true;
        sim_ih_queue_gone(q);
        sim_cp_state_free(q);
        if (q->engine)
                sim_engine_remove_queue(q->engine, q);
        for (SimMem **m = (SimMem *[]) { q->ring_mem, q->rptr_mem, q->wptr_mem, q->eop_mem, q->cwsr_mem },
                    **end = m + 5;
             m < end; m++)
                if (*m)
                        (*m)->queue_refcount[q->pdd->gpu->index]--;
        if (q->sdma_slot >= 0)
                q->pdd->gpu->sdma_slots[q->sdma_slot] = NULL;
        q->pdd->doorbell_used[q->doorbell_index] = false;
        p->queues[q->id] = NULL;
        free(q->fetch_copy);
        free(q);
}

/* pqm_destroy_queue: "Queue id does not match any known queue" -> -EINVAL. */
int sim_queue_destroy(SimProcess *p, struct kfd_ioctl_destroy_queue_args *a) {
        /* A queue another thread is destroying (waiting out its dispatch) is gone already. */
        if (a->queue_id >= SIM_MAX_QUEUES_PER_PROCESS || !p->queues[a->queue_id] || p->queues[a->queue_id]->destroying)
                return -EINVAL;
        sim_queue_free(p->queues[a->queue_id]);
        return 0;
}

/* kfd_ioctl_set_cu_mask: the count must be a nonzero multiple of 32; bits
 * past 1024 are dropped ("CU mask cannot be greater than 1024 bits"); the mask
 * is read with memdup_user (-EFAULT); pqm_update_mqd answers -EFAULT for a
 * queue id with no queue. */
int sim_queue_set_cu_mask(SimProcess *p, struct kfd_ioctl_set_cu_mask_args *a) {
        const uint32_t *mask = (const uint32_t *) (uintptr_t) a->cu_mask_ptr;
        uint32_t count = a->num_cu_mask;
        SimQueue *q;

        if (count == 0 || count % 32 != 0)
                return -EINVAL;
        count = MIN(count, 1024u);
        if (!mask)
                return -EFAULT;
        if (a->queue_id >= SIM_MAX_QUEUES_PER_PROCESS || !p->queues[a->queue_id] || p->queues[a->queue_id]->destroying)
                return -EFAULT;
        q = p->queues[a->queue_id];
        memset(q->cu_mask, 0, sizeof q->cu_mask);
        memcpy(q->cu_mask, mask, count / 8);
        q->cu_mask_count = count;
        return 0;
}

uint8_t *sim_queue_ring(SimQueue *q) {
        return q->ring_mem->bo->host + (q->ring_va - q->ring_mem->va);
}

/* The read-pointer report, 8 bytes (SDMA) or 4 (the CP, sim-cp.c): aligned,
 * one release store; unaligned (or cut by the end of its one-page mapping),
 * bytewise, never past the BO. */
static void store_rptr(SimQueue *q, const void *value, size_t n) {
        uint64_t off = q->rptr_va - q->rptr_mem->va;
        uint8_t *host = q->rptr_mem->bo->host + off;

        if (q->rptr_va % n == 0 && off + n <= q->rptr_mem->size) {
                if (n == 8)
                        __atomic_store_n((uint64_t *) (void *) host, *(const uint64_t *) value, __ATOMIC_RELEASE);
                else
                        __atomic_store_n((uint32_t *) (void *) host, *(const uint32_t *) value, __ATOMIC_RELEASE);
        } else
                memcpy(host, value, MIN((uint64_t) n, q->rptr_mem->size - off));
}

void sim_queue_store_rptr(SimQueue *q, uint64_t value) {
        store_rptr(q, &value, sizeof value);
}

void sim_queue_store_rptr32(SimQueue *q, uint32_t value) {
        store_rptr(q, &value, sizeof value);
}

uint64_t sim_queue_load_doorbell(SimQueue *q) {
        return __atomic_load_n(&q->pdd->doorbells[q->doorbell_index], __ATOMIC_ACQUIRE);
}

bool sim_queue_compare(unsigned func, uint32_t v, uint32_t ref) {
        /* Zero-extended, a 32-bit compare is the 64-bit one (sim-atomic.h). */
        return sim_compare64(func, v, ref);
}
