/* SPDX-License-Identifier: MIT */
/*
 * The relay of a ROCm client's AQL queues (docs/rocm.md, "Queues").
 *
 * ROCr makes its queues with CREATE_QUEUE(COMPUTE_AQL): a ring of 64-byte
 * HSA packets in its memory, the read and write indices in its amd_queue_t,
 * and a doorbell it stores the write index to. None of that reaches a
 * hardware queue here. The relay answers CREATE_QUEUE itself, with a queue
 * id of its own and a doorbell in a page of its own (the KFD doorbell page
 * of the process is the daemon's, and a store there is the hardware's to
 * see); it reads the packets, copies each out once, checks every address
 * in it against the client's buffers, and submits it as a job on a compute
 * queue the daemon owns in the client's own KFD process — its GPU VM, so the
 * client's addresses mean there what they mean to the client. The job goes
 * through the scheduler as the session's other work does: its GPU time is
 * accounted, weights and priority classes and DispatchTimeout= apply, and a
 * fault ends only this process's context.
 *
 * A queue on another GPU the process sees (docs/rocm.md "Several GPUs")
 * runs on the daemon's GPU context on that GPU in the same KFD process — a
 * secondary context, or a proxy worker's process —, made at the first
 * queue there (gpu_up(): that GPU's context pool, sharing the first
 * context's event page), and its jobs go through the session's streams on
 * that GPU (its SessionOnGpu there): that GPU's scheduler, accounting and
 * limits. It goes with the first context (kfd_relay_gpus_follow()).
 *
 * A packet becomes (daemon/gpu/gpu.h, GPU_JOB_AQL and GpuHsaCompletion):
 *  - kernel dispatch: the dispatch with the user SGPRs the CP gives an AQL
 *    dispatch (the dispatch pointer is the ring slot, so the slot is never
 *    reused before the packet retires: read_dispatch_id is advanced only
 *    then), then the completion signal's 64-bit decrement, its event's id
 *    in the mailbox and in the process's event page, the interrupt, and the
 *    new read_dispatch_id — all written by the GPU before the daemon's fence;
 *  - barrier-AND / barrier-OR: waited for here, on the CPU: its dependent
 *    signals are read at each pass until they satisfy it (a GPU-side wait
 *    could hold the one in-order stream the process's queues share behind a
 *    signal that a later packet of another of its queues decrements), then
 *    a job that only completes it;
 *  - the vendor packet AMD_AQL_FORMAT_PM4_IB that ROCr uses to invalidate
 *    caches after loading code: its indirect buffer is read, and only
 *    ACQUIRE_MEM (and NOP) may be in it; the daemon emits its own
 *    invalidation and completes the packet.
 * Each packet's slot is marked INVALID again as the packet is taken, so that
 * the ring's next lap never finds it there, valid, in a slot a producer has
 * reserved and not yet written (below, at the store).
 * A packet the relay cannot run (an address outside the client's buffers,
 * a refused kernel descriptor, an unknown type) stops its queue, with one
 * log line naming it.
 *
 * Noticing work: the client's doorbell stores land in a page only it and
 * the relay see, and nothing wakes on them; the relay reads each queue's
 * write_dispatch_id when the process makes any KFD call (ROCr waits in
 * WAIT_EVENTS after a short spin), when a relayed job finishes, and on a
 * timer: at most RELAY_POLL_BUSY_US apart while the process had work in the last
 * RELAY_BUSY_MS or a barrier waits, seldom otherwise (poll_arm()).
 *
 * Facts: the packet layouts are the HSA Platform System Architecture
 * Specification 1.2 (§2.9: kernel dispatch, barrier-AND/OR) and ROCr 5.2.3
 * (hsa.h, amd_hsa_queue.h: amd_queue_t, amd_hsa_signal.h: amd_signal_t,
 * amd_aql_queue.cpp: the PM4-IB packet); rocm-facts.md §2 has them with
 * their line numbers.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu/pm4.h"
#include "gpu/sdma.h"
#include "kfd/kfd-uapi.h"
#include "scheduler/scheduler.h"
#include "sessions/job.h"
#include "sessions/kfd-relay-internal.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

#define RELAY_POLL_BUSY_US 200u
#define RELAY_POLL_IDLE_MS 20u
#define RELAY_BUSY_MS 50u
/* Jobs of one queue in the scheduler at once. */
#define RELAY_QUEUE_INFLIGHT 64u

/* HSA packet types (hsa.h hsa_packet_type_t) and header fields. */
#define HSA_PACKET_TYPE_VENDOR_SPECIFIC 0
#define HSA_PACKET_TYPE_INVALID 1
#define HSA_PACKET_TYPE_KERNEL_DISPATCH 2
#define HSA_PACKET_TYPE_BARRIER_AND 3
#define HSA_PACKET_TYPE_AGENT_DISPATCH 4
#define HSA_PACKET_TYPE_BARRIER_OR 5
#define HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE(h) (((h) >> 9) & 3u)
/* amd_aql_queue.cpp: the vendor format of ROCr's PM4 indirect-buffer packet. */
#define AMD_AQL_FORMAT_PM4_IB 1
#define AQL_PACKET_SIZE 64u

/* amd_hsa_queue.h amd_queue_t offsets. */
#define AMD_QUEUE_WRITE_DISPATCH_ID 0x38u
#define AMD_QUEUE_READ_DISPATCH_ID 0x80u
#define AMD_QUEUE_SIZE 256u
#define AMD_QUEUE_INACTIVE_SIGNAL 0xC0u
/* Error codes the CP writes to a queue's queue_inactive_signal, as ROCr
 * reads them (amd_aql_queue.cpp, AqlQueue::DynamicScratchHandler): 32 an
 * invalid packet, 256 an invalid vendor packet, 0x80000000 a trap
 * (HSA_STATUS_ERROR_EXCEPTION) — what a job the daemon ended is. */
#define QUEUE_ERROR_INVALID_PACKET 32u
#define QUEUE_ERROR_INVALID_VENDOR_PACKET 256u
#define QUEUE_ERROR_EXCEPTION 0x80000000u
/* amd_hsa_signal.h amd_signal_t offsets. */
#define AMD_SIGNAL_VALUE 8u
#define AMD_SIGNAL_EVENT_MAILBOX_PTR 16u
#define AMD_SIGNAL_EVENT_ID 24u
#define AMD_SIGNAL_START_TS 32u
#define AMD_SIGNAL_SIZE 64u

/* The most dwords of a PM4 indirect buffer we read (ROCr's are a few). */
#define PM4_IB_MAX_DW 256u

static uint16_t le16(const uint8_t *p) {
        uint16_t v;
        memcpy(&v, p, sizeof v);
        return v;
}

static uint32_t le32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, sizeof v);
        return v;
}

static uint64_t le64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, sizeof v);
        return v;
}

static uint64_t load64(const void *p) {
        return __atomic_load_n((const uint64_t *) p, __ATOMIC_ACQUIRE);
}

static RelayQueue *queue_by_id(KfdRelay *r, uint32_t id) {
        return id < RELAY_MAX_QUEUES && r->queues[id].used ? &r->queues[id] : NULL;
}

/* ---- the queue calls (server threads, answered on the loop) ---- */

typedef struct QueueCall {
        unsigned long request;
        void *arg;
} QueueCall;

/* A free queue slot, within the session's Queues= (loop thread): -ENOSPC
 * past it, what pqm_create_queue answers a process at its queue limit
 * (kfd_process_queue_manager.c), with one log line naming the policy. */
static int queue_slot(KfdRelay *r, RelayQueue **ret) {
        uint64_t max = MIN(r->session->policy.queues, (uint64_t) RELAY_MAX_QUEUES);
        uint32_t used = 0;

        for (uint32_t id = 0; id < RELAY_MAX_QUEUES; id++)
                used += r->queues[id].used;
        if (used >= max) {
                if (!r->queues_logged) {
                        r->queues_logged = true;
                        session_log(r->session, LOG_INFO, "Session %" PRIu64 ": KFD relay refused a queue: queue "
                                    "count limit (%" PRIu64 ", policy Queues=) reached", r->session_id, max);
                }
                return -ENOSPC;
        }
        for (uint32_t id = 0; id < RELAY_MAX_QUEUES; id++)
                if (!r->queues[id].used) {
                        r->queues[id].id = id;
                        *ret = &r->queues[id];
                        return 0;
                }
        return -ENOSPC;
}

/* The answer of the kernel on gfx9+: the doorbell page's mmap offset with
 * the doorbell's byte offset in its low bits (sim-queue.c). */
static void answer(KfdRelay *r, struct kfd_ioctl_create_queue_args *a, const RelayQueue *q) {
        a->queue_id = q->id;
        a->doorbell_offset = KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(r->gpus[q->gpu].gpu_id) |
                             ((uint64_t) q->id * 8);
        r->last_activity_ns = now_ns();
}

/* The daemon's GPU context in the process on the GPU of slot g (NULL once
 * gone), and what the session has there. */
static Context *gpu_ctx(const KfdRelay *r, unsigned g) {
        return g == 0 ? r->ctx : r->gpus[g].ctx;
}

static SessionOnGpu *gpu_on(KfdRelay *r, unsigned g) {
        return g == 0 ? &r->session->home : r->gpus[g].on;
}

/*
 * Loop thread: the daemon's GPU context in the process on another GPU the
 * process sees (slot g > 0), made at its first queue: a slot of that GPU's
 * pool sharing the process with the first (context_pool_kfd_relay_join()),
 * paid for on that GPU by what the session has there (session_on_gpu()),
 * whose compute stream runs in it — so the queues' work is that GPU's
 * scheduler's, counted, weighted and limited there. -ENOMEM (logged, saying
 * why) when it cannot be had: what the kernel answers when a queue cannot be
 * made.
 */
static int gpu_up(KfdRelay *r, unsigned g) {
        RelayGpu *rg = &r->gpus[g];
        Session *s = r->session;
        SessionGpu *sg = &s->set->gpus[rg->index];
        char key[96], err[384] = "";
        Context *ctx = NULL;
        int k;

        if (g == 0 || rg->ctx)
                return 0;
        if (!rg->on)
                rg->on = session_on_gpu(s, sg);
        if (!rg->on)
                return -ENOMEM;
        snprintf(key, sizeof key, "KFD process of session %" PRIu64 " on GPU %u", s->id, rg->index);
        k = context_pool_kfd_relay_join(sg->contexts, key, session_begin_paying_on(rg->on), r->ctx, &ctx, err,
                                        sizeof err);
        if (k < 0) {
                session_log(s, LOG_NOTICE, "Session %" PRIu64 ": KFD relay refused a queue on GPU %u: %s", s->id,
                            rg->index, err);
                return -ENOMEM;
        }
        rg->on->paid_ctx = context_ref(ctx);
        rg->ctx = ctx;
        scheduler_stream_set_context(sg->scheduler, &rg->on->streams[GPU_ENGINE_COMPUTE], ctx);
        session_log(s, LOG_INFO, "Session %" PRIu64 ": the KFD relay's GPU context on GPU %u is up (the process's "
                    "queues there run on it)", s->id, rg->index);
        return 0;
}

void kfd_relay_gpus_unbind(KfdRelay *r) {
        /* Not touched: they may be gone already (session_free() lets them
         * go first; their streams let go of the contexts then). */
        for (size_t g = 1; g < r->n_gpus; g++)
                r->gpus[g].on = NULL;
}

void kfd_relay_gpus_leave(KfdRelay *r) {
        for (size_t g = 1; g < r->n_gpus; g++) {
                /* Its GPU context goes before the first's, whose event page
                 * it maps. */
                context_kfd_relay_leave(r->gpus[g].ctx);
                r->gpus[g].ctx = NULL;
                r->gpus[g].sdma_bound = false;
        }
}

/*
 * The daemon's GPU context on GPU 0 of the process (r->ctx) is the one the
 * others stand on: theirs map its event page, and with a proxy worker
 * (KFD before 1.19) the worker, whose KFD process they all live in, is that
 * slot's (its kfd_worker_pid), let go as its incarnation ends — right after
 * this, which ends theirs first: nothing of the daemon calls into the
 * worker once it is let go. Its end also ends what the relay reads of the
 * process (its views), so the others could run nothing more anyway. When
 * it was lost (a fault, or its worker went or stopped answering: then
 * each waiter sees it too, and the first to see it ends them all), the
 * others are lost with it, named in the log with its id.
 */
void kfd_relay_gpus_follow(KfdRelay *r) {
        bool lost = r->ctx && context_get_losses(r->ctx) > 0;
        char why[160];

        for (size_t g = 1; lost && g < r->n_gpus; g++) {
                if (!r->gpus[g].ctx)
                        continue;
                snprintf(why, sizeof why, "lost with GPU context %" PRIu64 ", the daemon's first in the same KFD "
                         "process", context_get_id(r->ctx));
                context_kfd_relay_lose(r->gpus[g].ctx, why);
        }
        kfd_relay_gpus_leave(r);
}

/* The session's SDMA stream moves to an SDMA queue of the process's own
 * context (the device context's SDMA queues never touch client memory):
 * made on the first SDMA queue of the process. -ENOMEM when none can be
 * made, as allocate_sdma_queue answers with none left. */
static int sdma_bind(KfdRelay *r, unsigned g) {
        SessionOnGpu *on = gpu_on(r, g);
        uint32_t prio;
        unsigned idx;
        bool express;
        char err[256];
        int k;

        if (r->gpus[g].sdma_bound)
                return 0;
        k = context_get_queue(gpu_ctx(r, g), GPU_ENGINE_SDMA, GPU_QUEUE_PRIORITY_DEFAULT, false, &idx, &prio,
                              &express, err, sizeof err);
        if (k >= 0)
                k = scheduler_stream_use_sdma(on->gpu->scheduler, &on->streams[GPU_ENGINE_SDMA], gpu_ctx(r, g), idx);
        if (k < 0) {
                session_log(r->session, LOG_INFO, "Session %" PRIu64 ": KFD relay has no SDMA queue for the process "
                            "(%s); ROCr copies with blit kernels", r->session_id, k == -EBUSY ? "its session's "
                            "copies are in flight" : err[0] ? err : strerror(-k));
                return -ENOMEM;
        }
        r->gpus[g].sdma_bound = true;
        return 0;
}

static int create_sdma(KfdRelay *r, struct kfd_ioctl_create_queue_args *a, unsigned g) {
        RelayQueue *q;
        int k;

        if (a->ring_size < 256 || (a->ring_size & (a->ring_size - 1)) || (a->ring_base_address % 256) ||
            !kfd_relay_cpu(r, a->ring_base_address, a->ring_size) || (a->read_pointer_address % 8) ||
            (a->write_pointer_address % 8) || !kfd_relay_cpu(r, a->read_pointer_address, 8) ||
            !kfd_relay_cpu(r, a->write_pointer_address, 8)) {
                log_info("Session %" PRIu64 ": KFD relay refused an SDMA queue: its ring or pointers are not in the "
                         "process's buffers", r->session_id);
                return -EINVAL;
        }
        k = queue_slot(r, &q);
        if (k < 0)
                return k;
        k = sdma_bind(r, g);
        if (k < 0)
                return k;
        *q = (RelayQueue) {
                .used = true, .id = q->id, .gen = q->gen + 1, .sdma = true, .gpu = g,
                .ring_va = a->ring_base_address, .ring_bytes = a->ring_size,
                .rptr_va = a->read_pointer_address, .wptr_va = a->write_pointer_address,
                .suspended = a->queue_percentage == 0,
        };
        q->next = q->retired = load64(kfd_relay_cpu(r, q->rptr_va, 8));
        answer(r, a, q);
        log_debug("Session %" PRIu64 ": relayed SDMA queue %u: ring 0x%" PRIx64 " of %u bytes", r->session_id, q->id,
                  q->ring_va, q->ring_bytes);
        return 1;
}

static int create_on_loop(KfdRelay *r, void *data) {
        struct kfd_ioctl_create_queue_args *a = ((QueueCall *) data)->arg;
        uint64_t queue_va = a->write_pointer_address - AMD_QUEUE_WRITE_DISPATCH_ID;
        RelayQueue *q;

        if (!r->ctx || !r->session)
                return -ENODEV;
        /* kfd_ioctl_create_queue / set_queue_properties_from_user. */
        if (a->queue_percentage > 100 || a->queue_priority > 15)
                return -EINVAL;
        /* Its GPU: one the process sees (another is -EINVAL, as
         * kfd_ioctl_create_queue answers a GPU without device data). */
        unsigned g = 0;
        while (g < r->n_gpus && r->gpus[g].gpu_id != a->gpu_id)
                g++;
        if (g == r->n_gpus)
                return -EINVAL;
        int k = gpu_up(r, g);
        if (k < 0)
                return k;
        if (a->queue_type != KFD_IOC_QUEUE_TYPE_COMPUTE_AQL)
                return create_sdma(r, a, g);
        /* Kernels are a right policy gives (ComputeDispatch=): a client
         * without it gets no queue to run them on. */
        if (r->session->policy.compute_dispatch == POLICY_COMPUTE_NO) {
                char words[400];
                session_policy_words(r->session, words, sizeof words);
                session_log(r->session, LOG_NOTICE, "Session %" PRIu64 ": KFD relay refused an AQL queue: compute "
                            "dispatch is not allowed for this client by policy (%s)", r->session_id, words);
                return -EPERM;
        }
        if (a->ring_size == 0 || (a->ring_size & (a->ring_size - 1)) || a->ring_size < AQL_PACKET_SIZE)
                return -EINVAL;
        /* Every address in the client's memory (the newer kernels' buffer
         * checks, kfd_queue_acquire_buffers), and the indices where ROCr's
         * amd_queue_t has them: the dispatch's queue pointer is that. */
        if (!kfd_relay_cpu(r, a->ring_base_address, a->ring_size) || (a->ring_base_address % AQL_PACKET_SIZE) ||
            a->write_pointer_address < AMD_QUEUE_WRITE_DISPATCH_ID ||
            a->read_pointer_address != queue_va + AMD_QUEUE_READ_DISPATCH_ID || (queue_va % 64) ||
            !kfd_relay_cpu(r, queue_va, AMD_QUEUE_SIZE)) {
                log_info("Session %" PRIu64 ": KFD relay refused an AQL queue: its ring or amd_queue_t is not in "
                         "the process's buffers where ROCr puts them", r->session_id);
                return -EINVAL;
        }
        k = queue_slot(r, &q);
        if (k < 0)
                return k;
        *q = (RelayQueue) {
                .used = true,
                .id = q->id,
                .gen = q->gen + 1,
                .gpu = g,
                .ring_va = a->ring_base_address,
                .n_slots = a->ring_size / AQL_PACKET_SIZE,
                .queue_va = queue_va,
                .suspended = a->queue_percentage == 0,
        };
        q->next = q->retired = load64(kfd_relay_cpu(r, queue_va + AMD_QUEUE_READ_DISPATCH_ID, 8));
        answer(r, a, q);
        log_debug("Session %" PRIu64 ": relayed AQL queue %u: ring 0x%" PRIx64 " of %u packets, amd_queue_t 0x%" PRIx64,
                  r->session_id, q->id, q->ring_va, q->n_slots, q->queue_va);
        return 1;
}

static int other_on_loop(KfdRelay *r, void *data) {
        QueueCall *c = data;
        RelayQueue *q;

        switch (_IOC_NR(c->request)) {
        case 0x03: { /* DESTROY_QUEUE */
                struct kfd_ioctl_destroy_queue_args *a = c->arg;
                q = queue_by_id(r, a->queue_id);
                if (!q)
                        return -EINVAL;
                /* Its jobs still on the way finish unreported to it. */
                q->used = false;
                return 1;
        }
        case 0x07: { /* UPDATE_QUEUE: ROCr suspends a queue with percentage 0 */
                struct kfd_ioctl_update_queue_args *a = c->arg;
                if (a->queue_percentage > 100 || a->queue_priority > 15 ||
                    (a->ring_size && (a->ring_size & (a->ring_size - 1))))
                        return -EINVAL;
                /* pqm_update_queue_properties: no such queue -> -EFAULT */
                q = queue_by_id(r, a->queue_id);
                if (!q)
                        return -EFAULT;
                q->suspended = a->queue_percentage == 0;
                return 1;
        }
        case 0x1A: { /* SET_CU_MASK: accepted; the daemon's queues serve every stream of the process */
                struct kfd_ioctl_set_cu_mask_args *a = c->arg;
                if (a->num_cu_mask == 0 || (a->num_cu_mask % 32))
                        return -EINVAL;
                if (!a->cu_mask_ptr)
                        return -EFAULT; /* memdup_user */
                /* pqm_update_mqd: no such queue -> -EFAULT */
                return queue_by_id(r, a->queue_id) ? 1 : -EFAULT;
        }
        case 0x1E: { /* ALLOC_QUEUE_GWS: no global wave sync here, as on a GPU without it */
                struct kfd_ioctl_alloc_queue_gws_args *a = c->arg;
                return queue_by_id(r, a->queue_id) ? -ENODEV : -EINVAL;
        }
        default:
                return 0;
        }
}

int kfd_relay_queue_ioctl(KfdRelay *r, unsigned long request, void *arg) {
        QueueCall call = { request, arg };
        size_t need;

        if (_IOC_TYPE(request) != AMDKFD_IOCTL_BASE)
                return 0;
        switch (_IOC_NR(request)) {
        case 0x02: {
                struct kfd_ioctl_create_queue_args *a = arg;

                if (!a || _IOC_SIZE(request) < offsetof(struct kfd_ioctl_create_queue_args, eop_buffer_address))
                        return -EINVAL;
                switch (a->queue_type) {
                case KFD_IOC_QUEUE_TYPE_COMPUTE_AQL:
                case KFD_IOC_QUEUE_TYPE_SDMA:
                case KFD_IOC_QUEUE_TYPE_SDMA_XGMI:
                        return kfd_relay_on_loop(r, create_on_loop, &call);
                default:
                        /* A PM4 queue of the client's would run packets
                         * nobody checked. */
                        log_info("Session %" PRIu64 ": KFD relay refused a queue of type %u: only AQL queues are "
                                 "relayed", r->session_id, a->queue_type);
                        return -EOPNOTSUPP;
                }
        }
        case 0x03:
                need = sizeof(struct kfd_ioctl_destroy_queue_args);
                break;
        case 0x07:
                need = sizeof(struct kfd_ioctl_update_queue_args);
                break;
        case 0x1A:
                need = sizeof(struct kfd_ioctl_set_cu_mask_args);
                break;
        case 0x1E:
                need = sizeof(struct kfd_ioctl_alloc_queue_gws_args);
                break;
        default:
                return 0;
        }
        if (!arg || _IOC_SIZE(request) < need)
                return -EINVAL;
        return kfd_relay_on_loop(r, other_on_loop, &call);
}

/* ---- packets (loop thread) ---- */

/*
 * A queue error, as the CP reports one: the error code in the value of the
 * queue's queue_inactive_signal and that signal's event, so that ROCr's
 * handler suspends the queue and tells the program (HIP aborts with the
 * error) — with interrupts off too, since ROCr then polls the value.
 */
static void queue_error(KfdRelay *r, RelayQueue *q, uint64_t code) {
        const uint8_t *amd_queue = kfd_relay_cpu(r, q->queue_va, AMD_QUEUE_SIZE);
        uint64_t signal = amd_queue ? le64(amd_queue + AMD_QUEUE_INACTIVE_SIGNAL) : 0;
        uint8_t *sig = signal && signal % 8 == 0 ? kfd_relay_cpu(r, signal, AMD_SIGNAL_SIZE) : NULL;

        if (!sig)
                return;
        __atomic_store_n((uint64_t *) (sig + AMD_SIGNAL_VALUE), code, __ATOMIC_RELEASE);
        uint64_t mailbox = le64(sig + AMD_SIGNAL_EVENT_MAILBOX_PTR);
        uint32_t event_id = le32(sig + AMD_SIGNAL_EVENT_ID);
        if (!kfd_relay_client_event(r, event_id))
                return;
        uint8_t *m = mailbox && mailbox % 4 == 0 ? kfd_relay_cpu(r, mailbox, 4) : NULL;
        if (m)
                __atomic_store_n((uint32_t *) m, event_id, __ATOMIC_RELEASE);
        (void) gpu_context_set_event(context_get_gpu(r->ctx), event_id);
}

static void queue_stop(KfdRelay *r, RelayQueue *q, uint64_t index, uint64_t code, const char *why) {
        if (q->stopped)
                return;
        q->stopped = true;
        if (r->session)
                session_log(r->session, LOG_NOTICE,
                            "Session %" PRIu64 ": relayed AQL queue %u stopped at packet %" PRIu64 ": %s", r->session_id,
                            q->id, index, why);
        if (code && r->ctx && context_get_gpu(r->ctx))
                queue_error(r, q, code);
}

/* The completion of the packet whose signal is `signal` (0: none), as the
 * CP does it: decrement, mailbox and event, then the read index. -EINVAL
 * with why for a signal outside the client's memory. */
static int fill_completion(KfdRelay *r, RelayQueue *q, uint64_t index, uint64_t signal, GpuHsaCompletion *c,
                           const char **why) {
        GpuContext *gpu = context_get_gpu(gpu_ctx(r, q->gpu));

        c->index_va = q->queue_va + AMD_QUEUE_READ_DISPATCH_ID;
        c->index_value = index + 1;
        if (!signal)
                return 0;
        const uint8_t *sig = kfd_relay_cpu(r, signal, AMD_SIGNAL_SIZE);
        if (!sig || (signal % 8)) {
                *why = "its completion signal is not in the process's memory";
                return -EINVAL;
        }
        c->signal_va = signal + AMD_SIGNAL_VALUE;
        c->ts_va = signal + AMD_SIGNAL_START_TS;
        uint64_t mailbox = le64(sig + AMD_SIGNAL_EVENT_MAILBOX_PTR);
        uint32_t event_id = le32(sig + AMD_SIGNAL_EVENT_ID);
        /* An interrupt signal: its event is one of the client's and its
         * mailbox in its memory; the id also goes to the slot of the page
         * the process registered (the daemon's), which the kernel checks. */
        if (mailbox && (mailbox % 4) == 0 && kfd_relay_cpu(r, mailbox, 8) && kfd_relay_client_event(r, event_id)) {
                c->mailbox_va = mailbox;
                c->event_id = event_id;
                c->event_slot_va = gpu_context_get_event_slot_va(gpu, event_id);
        }
        return 0;
}

/* Whether a barrier's dependent signals let it complete now. */
static int barrier_ready(KfdRelay *r, const uint8_t *pkt, bool or, const char **why) {
        bool any = false, all = true;
        unsigned n = 0;

        for (unsigned i = 0; i < 5; i++) {
                uint64_t dep = le64(pkt + 8 + 8 * i);
                if (!dep)
                        continue;
                const void *v = kfd_relay_cpu(r, dep + AMD_SIGNAL_VALUE, 8);
                if (!v || (dep % 8)) {
                        *why = "a dependent signal of its barrier is not in the process's memory";
                        return -EINVAL;
                }
                bool zero = load64(v) == 0;
                any |= zero;
                all &= zero;
                n++;
        }
        return n == 0 || (or ? any : all);
}

/* The PM4 indirect buffer of ROCr's vendor packet: only cache invalidation. */
static int pm4_ib_ok(KfdRelay *r, const uint8_t *pkt, const char **why) {
        uint32_t hdr = le32(pkt + 4), lo = le32(pkt + 8), hi = le32(pkt + 12), ctl = le32(pkt + 16);
        uint64_t addr = ((uint64_t) hi << 32) | (lo & ~3u);
        uint32_t ndw = ctl & 0xFFFFFu;

        if (hdr != PKT3_HDR(PKT3_INDIRECT_BUFFER, 2) || ndw == 0 || ndw > PM4_IB_MAX_DW) {
                *why = "its PM4 packet is not an indirect buffer of at most 256 dwords";
                return -EINVAL;
        }
        const uint8_t *ib = kfd_relay_cpu(r, addr, 4ull * ndw);
        if (!ib) {
                *why = "its PM4 indirect buffer is not in the process's memory";
                return -EINVAL;
        }
        for (uint32_t i = 0; i < ndw;) {
                uint32_t h = le32(ib + 4 * i), op = (h >> 8) & 0xFF, count = ((h >> 16) & 0x3FFF) + 1;
                if ((h >> 30) != 3 || (op != PKT3_ACQUIRE_MEM && op != PKT3_NOP)) {
                        *why = "its PM4 indirect buffer holds a packet other than ACQUIRE_MEM";
                        return -EINVAL;
                }
                i += 1 + (h == PKT3_NOP_PAD ? 0 : count);
        }
        return 0;
}

static int submit(KfdRelay *r, RelayQueue *q, uint64_t index, const GpuJob *gj, bool dispatch) {
        Session *s = r->session;
        Job *j = job_new(s, s->last_fence + 1, q->sdma ? WIRE_JOB_COPY : dispatch ? WIRE_JOB_DISPATCH
                                                                               : WIRE_JOB_SIGNAL_EVENT);

        if (!j)
                return -ENOMEM;
        j->sched.kind = SCHED_JOB_WORK;
        j->sched.engine = q->sdma ? GPU_ENGINE_SDMA : GPU_ENGINE_COMPUTE;
        j->sched.gpu = *gj;
        j->on = gpu_on(r, q->gpu);
        j->relay = kfd_relay_ref(r);
        j->relay_queue = q->id;
        j->relay_gen = q->gen;
        j->relay_index = index;
        if (s->policy.job_timeout_ns != POLICY_INFINITY)
                j->sched.timeout_ns = s->policy.job_timeout_ns;
        if (dispatch && s->policy.dispatch_timeout_ns != POLICY_INFINITY)
                j->sched.timeout_ns = MIN(j->sched.timeout_ns, s->policy.dispatch_timeout_ns);
        if (gj->type == GPU_JOB_SDMA_PACKETS) {
                /* The job owns its copy of the packets (freed with it). */
                j->args = (uint8_t *) gj->packets.dw;
                j->sched.gpu.packets.dw = gj->packets.dw;
        }
        session_submit_relayed(s, j);
        q->inflight++;
        r->jobs_in_flight++;
        r->jobs_relayed++;
        return 0;
}

/* One packet: 0 submitted, 1 not ready yet, -EINVAL (why set) to stop the queue. */
static int relay_packet(KfdRelay *r, RelayQueue *q, uint64_t index, const uint8_t *pkt, const char **why) {
        uint16_t header = le16(pkt);
        GpuJob gj = { .type = GPU_JOB_NOP };
        char err[256];
        int k;

        switch (header & 0xFF) {
        case HSA_PACKET_TYPE_KERNEL_DISPATCH: {
                uint64_t kernel_object = le64(pkt + 32), kernarg = le64(pkt + 40);
                const uint8_t *desc = kfd_relay_cpu(r, kernel_object, GPU_AQL_DESCRIPTOR_SIZE);

                if (!desc || (kernel_object % 64)) {
                        *why = "its kernel_object is not a kernel descriptor in the process's memory";
                        return -EINVAL;
                }
                gj.type = GPU_JOB_AQL;
                memcpy(gj.aql.descriptor, desc, GPU_AQL_DESCRIPTOR_SIZE);
                gj.aql.descriptor_va = kernel_object;
                if (!kfd_relay_cpu(r, gpu_aql_entry_va(&gj), 4)) {
                        *why = "its kernel's code is not in the process's memory";
                        return -EINVAL;
                }
                /* kernarg_size of a v3 descriptor (offset 8), at least 1 byte. */
                uint32_t kernarg_size = le32(gj.aql.descriptor + 8);
                if (kernarg && !kfd_relay_cpu(r, kernarg, MAX(kernarg_size, 1u))) {
                        *why = "its kernarg_address is not in the process's memory";
                        return -EINVAL;
                }
                gj.aql.packet_va = q->ring_va + (index % q->n_slots) * AQL_PACKET_SIZE;
                gj.aql.queue_va = q->queue_va;
                gj.aql.kernarg_va = kernarg;
                gj.aql.dispatch_id = index;
                for (unsigned d = 0; d < 3; d++) {
                        gj.aql.block[d] = le16(pkt + 4 + 2 * d);
                        gj.aql.grid[d] = le32(pkt + 12 + 4 * d);
                }
                gj.aql.private_segment_size = le32(pkt + 24);
                gj.aql.group_segment_size = le32(pkt + 28);
                k = fill_completion(r, q, index, le64(pkt + 56), &gj.aql.hsa, why);
                if (k < 0)
                        return k;
                gj.aql.hsa.acquire = HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE(header) != 0;
                if (gpu_aql_check(context_get_gpu(gpu_ctx(r, q->gpu)), &gj, err, sizeof err) < 0) {
                        if (r->session)
                                session_log(r->session, LOG_NOTICE, "Session %" PRIu64 ": relayed dispatch refused: %s",
                                            r->session_id, err);
                        *why = "its kernel dispatch was refused (see above)";
                        return -EINVAL;
                }
                return submit(r, q, index, &gj, true) < 0 ? 1 : 0;
        }
        case HSA_PACKET_TYPE_BARRIER_AND:
        case HSA_PACKET_TYPE_BARRIER_OR:
                k = barrier_ready(r, pkt, (header & 0xFF) == HSA_PACKET_TYPE_BARRIER_OR, why);
                if (k <= 0) {
                        q->barrier_wait = k == 0;
                        return k < 0 ? k : 1;
                }
                q->barrier_wait = false;
                k = fill_completion(r, q, index, le64(pkt + 56), &gj.nop.hsa, why);
                if (k < 0)
                        return k;
                gj.nop.hsa.acquire = HSA_PACKET_HEADER_ACQUIRE_FENCE_SCOPE(header) != 0;
                return submit(r, q, index, &gj, false) < 0 ? 1 : 0;
        case HSA_PACKET_TYPE_VENDOR_SPECIFIC:
                if (le16(pkt + 2) != AMD_AQL_FORMAT_PM4_IB) {
                        *why = "it is a vendor packet of a format other than ROCr's PM4 indirect buffer";
                        return -EINVAL;
                }
                k = pm4_ib_ok(r, pkt, why);
                if (k >= 0)
                        k = fill_completion(r, q, index, le64(pkt + 56), &gj.nop.hsa, why);
                if (k < 0)
                        return k;
                gj.nop.hsa.acquire = true;
                return submit(r, q, index, &gj, false) < 0 ? 1 : 0;
        default:
                *why = "its packet type is not one the relay runs (kernel dispatch, barrier-AND/OR, ROCr's PM4 "
                       "indirect buffer)";
                return -EINVAL;
        }
}

/* The most dwords one relayed SDMA job carries, and one packet may have
 * (a WRITE_LINEAR of 256 dwords; BlitSdma writes none that long). */
#define SDMA_JOB_MAX_DW 2048u
#define SDMA_PACKET_MAX_DW 260u

/*
 * What an SDMA queue has between what was read and its write offset, in
 * jobs of whole packets that gpu_sdma_packet_scan() passes and whose memory
 * is the client's. Before a TRAP of one of the client's events, a FENCE of
 * the event's id to its slot of the page the process registered (the
 * daemon's): kfd_signal_event_interrupt checks that slot, and BlitSdma's own
 * FENCE goes to the mailbox in the thunk's page.
 */
static void scan_sdma(KfdRelay *r, RelayQueue *q) {
        const uint8_t *ring = kfd_relay_cpu(r, q->ring_va, q->ring_bytes);
        const void *wp = kfd_relay_cpu(r, q->wptr_va, 8);
        uint64_t wptr;

        if (!ring || !wp) {
                queue_stop(r, q, q->next, 0, "its ring or write pointer was freed");
                return;
        }
        wptr = load64(wp);
        if (wptr < q->next || wptr - q->retired > q->ring_bytes || wptr % 4) {
                queue_stop(r, q, q->next, 0, "its write pointer moved backwards or past what the ring holds");
                return;
        }
        while (q->next < wptr && q->inflight < RELAY_QUEUE_INFLIGHT) {
                uint64_t pos = q->next % q->ring_bytes;
                size_t avail = (size_t) (MIN(wptr - q->next, q->ring_bytes - pos) / 4), off = 0, n = 0;
                uint32_t *out = malloc(4u * SDMA_JOB_MAX_DW);
                const uint32_t *in = (const uint32_t *) (ring + pos);

                if (!out)
                        return;
                while (off < avail) {
                        GpuSdmaRange ranges[GPU_SDMA_MAX_RANGES];
                        uint32_t pkt[SDMA_PACKET_MAX_DW];
                        size_t have = MIN(avail - off, (size_t) SDMA_PACKET_MAX_DW), ndw = 0;
                        const char *why = NULL;
                        unsigned nr = 0;
                        int k;

                        /* One copy of each packet: what is checked is what runs. */
                        memcpy(pkt, in + off, 4u * have);
                        if ((pkt[0] & 0xFF) == SDMA_OP_NOP) {
                                /* Padding: skipped, its payload never read. */
                                ndw = 1 + ((pkt[0] >> 16) & 0x3FFFu);
                                if (ndw > avail - off)
                                        break;
                                off += ndw;
                                continue;
                        }
                        k = gpu_sdma_packet_scan(pkt, have, &ndw, ranges, &nr, &why);
                        if (k == -EAGAIN && have == avail - off)
                                break; /* the rest is not written yet */
                        if (k == -EAGAIN)
                                k = -EINVAL, why = "an SDMA packet larger than the relay takes";
                        if (k < 0) {
                                free(out);
                                queue_stop(r, q, q->next + 4 * off, 0, why);
                                return;
                        }
                        for (unsigned i = 0; i < nr; i++)
                                if (ranges[i].size && !kfd_relay_cpu(r, ranges[i].va, ranges[i].size)) {
                                        free(out);
                                        queue_stop(r, q, q->next + 4 * off, 0,
                                                   "an SDMA packet reaches memory outside the process's buffers");
                                        return;
                                }
                        if (n + ndw + SDMA_FENCE_DW > SDMA_JOB_MAX_DW)
                                break;
                        if ((pkt[0] & 0xFF) == SDMA_OP_TRAP && kfd_relay_client_event(r, pkt[1] & 0x0FFFFFFFu)) {
                                uint32_t id = pkt[1] & 0x0FFFFFFFu;
                                n += sdma_emit_fence(
                                        out + n,
                                        gpu_context_get_event_slot_va(context_get_gpu(gpu_ctx(r, q->gpu)), id), id);
                        }
                        memcpy(out + n, pkt, 4u * ndw);
                        n += ndw;
                        off += ndw;
                }
                if (off == 0) {
                        free(out);
                        return;
                }
                if (n == 0)
                        n = sdma_emit_nop(out, 1);
                GpuJob gj = { .type = GPU_JOB_SDMA_PACKETS, .packets = { .dw = out, .ndw = (uint32_t) n } };
                uint64_t end = q->next + 4 * off;
                if (submit(r, q, end, &gj, false) < 0) {
                        free(out);
                        return;
                }
                q->next = end;
                r->last_activity_ns = now_ns();
        }
}

static void scan_queue(KfdRelay *r, RelayQueue *q) {
        /* Its GPU's context of the daemon's went (lost): nothing more of it runs. */
        if (!gpu_ctx(r, q->gpu) || !context_get_gpu(gpu_ctx(r, q->gpu))) {
                queue_stop(r, q, q->next, q->sdma ? 0 : QUEUE_ERROR_EXCEPTION,
                           "the daemon's GPU context on its GPU is gone");
                return;
        }
        if (q->sdma) {
                if (!q->stopped && !q->suspended)
                        scan_sdma(r, q);
                return;
        }
        const uint8_t *amd_queue = kfd_relay_cpu(r, q->queue_va, AMD_QUEUE_SIZE);
        uint8_t *ring = kfd_relay_cpu(r, q->ring_va, (uint64_t) q->n_slots * AQL_PACKET_SIZE);
        uint64_t wptr, limit;

        if (q->stopped || q->suspended)
                return;
        if (!amd_queue || !ring) {
                queue_stop(r, q, q->next, 0, "its ring or amd_queue_t was freed");
                return;
        }
        wptr = load64(amd_queue + AMD_QUEUE_WRITE_DISPATCH_ID);
        /* Never more than the ring holds past what has retired, whatever the
         * client wrote there. */
        limit = MIN(wptr, q->retired + q->n_slots);
        while (q->next < limit && q->inflight < RELAY_QUEUE_INFLIGHT) {
                uint8_t pkt[AQL_PACKET_SIZE];
                const char *why = NULL;

                /* Copied out once: the header with acquire order first. */
                uint16_t header = __atomic_load_n((const uint16_t *) (ring + (q->next % q->n_slots) * AQL_PACKET_SIZE),
                                                  __ATOMIC_ACQUIRE);
                if ((header & 0xFF) == HSA_PACKET_TYPE_INVALID)
                        break; /* written but not yet published */
                memcpy(pkt, ring + (q->next % q->n_slots) * AQL_PACKET_SIZE, sizeof pkt);
                memcpy(pkt, &header, sizeof header);
                int k = relay_packet(r, q, q->next, pkt, &why);
                if (k < 0) {
                        queue_stop(r, q, q->next,
                                   (header & 0xFF) == HSA_PACKET_TYPE_VENDOR_SPECIFIC ? QUEUE_ERROR_INVALID_VENDOR_PACKET
                                                                                       : QUEUE_ERROR_INVALID_PACKET,
                                   why);
                        return;
                }
                if (k > 0)
                        break;
                /* The slot is INVALID again once its packet is taken, as the
                 * CP leaves it: producers reserve write_dispatch_id before
                 * they write a packet (ROCr's BlitKernel::AcquireWriteIndex,
                 * then PopulateQueue; ROCclr's dispatchGenericAqlPacket), so
                 * on the ring's next lap the slot would otherwise still hold
                 * this packet, valid, until the new one is written — and be
                 * run again in its place. ROCr counts on it: "The HW will
                 * stall on these packets until they enter a valid state"
                 * (amd_aql_queue.cpp, its doorbell of write_dispatch_id). The
                 * producer may not touch the slot again before
                 * read_dispatch_id passes it, at the packet's retirement. */
                __atomic_store_n((uint16_t *) (void *) (ring + (q->next % q->n_slots) * AQL_PACKET_SIZE),
                                 (uint16_t) HSA_PACKET_TYPE_INVALID, __ATOMIC_RELEASE);
                q->next++;
                r->last_activity_ns = now_ns();
        }
}

static void poll_arm(KfdRelay *r);

void kfd_relay_queues_scan(KfdRelay *r) {
        uint64_t relayed = r->jobs_relayed;
        bool any = false;

        /* Nothing more runs once the session is over (its jobs may still be
         * finishing) or the daemon's context in the process is gone. */
        if (!r->ctx || !context_get_gpu(r->ctx) || !r->session || !r->session->connected || r->released)
                return;
        /* Views of buffers the client freed go first. */
        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < r->n_bos;) {
                RelayBo *b = &r->bos[i];
                if (!b->freed) {
                        i++;
                        continue;
                }
                if (b->cpu && r->ops)
                        (void) r->ops->munmap(r->ops->userdata, b->cpu, b->size);
                r->bos[i] = r->bos[--r->n_bos];
        }
        pthread_mutex_unlock(&r->lock);
        for (unsigned i = 0; i < RELAY_MAX_QUEUES; i++)
                if (r->queues[i].used) {
                        scan_queue(r, &r->queues[i]);
                        any = true;
                }
        if (r->jobs_relayed != relayed)
                session_run_schedulers(r->session);
        if (any)
                poll_arm(r);
}

static int on_poll(sd_event_source *src, uint64_t usec, void *userdata) {
        kfd_relay_queues_scan(userdata);
        return 0;
}

/* How seldom an idle process's queues are looked at, at most: the longer it
 * has been idle, the longer the wait, from RELAY_POLL_IDLE_MS up to this. */
#define RELAY_POLL_IDLE_MAX_MS 250u
/* The first look after work, at the soonest: a client that waits for one
 * kernel and launches the next writes it a few us after the completion. */
#define RELAY_POLL_FIRST_US 20u

/*
 * The next look. Soon while the process is busy: it made a queue, a packet
 * was relayed or a job of it finished in the last RELAY_BUSY_MS, or a barrier
 * waits for a signal that the client may store without any KFD call — half
 * the time since that work, RELAY_POLL_FIRST_US .. RELAY_POLL_BUSY_US, so
 * that the packet a client writes right after a completion is found in tens
 * of us, and a busy process is looked at every RELAY_POLL_BUSY_US after its
 * first millisecond. Otherwise seldom, and less often the longer it idles (a
 * quarter of its idle time, RELAY_POLL_IDLE_MS .. RELAY_POLL_IDLE_MAX_MS):
 * the look is the only thing that finds the packets of a client that makes no
 * KFD call after its doorbell store (HSA_ENABLE_INTERRUPT=0, or HIP's active
 * waits), so it never stops while the process has a queue. A job in flight
 * needs no look of its own: its end rescans (kfd_relay_job_done()).
 * sd-event fires a timer anywhere in [time, time + accuracy], and an
 * accuracy of 0 means 250 ms (systemd's sd_event_add_time(3)): the busy look
 * asks for 1 us, the idle one lets sd-event put it together with the loop's
 * other wake-ups within half its period.
 */
static void poll_arm(KfdRelay *r) {
        uint64_t idle_us = (now_ns() - r->last_activity_ns) / 1000u, usec, accuracy;
        bool busy = idle_us < RELAY_BUSY_MS * 1000u;

        for (unsigned i = 0; i < RELAY_MAX_QUEUES && !busy; i++)
                busy = r->queues[i].used && r->queues[i].barrier_wait;
        if (busy) {
                usec = MIN(MAX(idle_us / 2, (uint64_t) RELAY_POLL_FIRST_US), (uint64_t) RELAY_POLL_BUSY_US);
                accuracy = 1;
        } else {
                usec = MIN(MAX(idle_us / 4, RELAY_POLL_IDLE_MS * 1000ull), RELAY_POLL_IDLE_MAX_MS * 1000ull);
                accuracy = usec / 2;
        }
        if (!r->poll)
                return;
        (void) sd_event_source_set_time_relative(r->poll, usec);
        (void) sd_event_source_set_time_accuracy(r->poll, accuracy);
        (void) sd_event_source_set_enabled(r->poll, SD_EVENT_ONESHOT);
}

void kfd_relay_job_done(KfdRelay *r, Job *j, int error, const char *message) {
        RelayQueue *q = queue_by_id(r, j->relay_queue);

        if (r->jobs_in_flight > 0)
                r->jobs_in_flight--;
        if (!q || q->gen != j->relay_gen)
                return;
        if (q->inflight > 0)
                q->inflight--;
        log_debug("Session %" PRIu64 ": relayed %s job of queue %u done (%d) %.3f ms after it was queued",
                  r->session_id, q->sdma ? "SDMA" : "AQL", q->id, error,
                  (double) (now_ns() - j->sched.queued_ns) / 1e6);
        if (error == 0 && q->sdma) {
                /* What the engine reports: the bytes it has read. */
                void *rp = kfd_relay_cpu(r, q->rptr_va, 8);
                q->retired = MAX(q->retired, j->relay_index);
                if (rp)
                        __atomic_store_n((uint64_t *) rp, q->retired, __ATOMIC_RELEASE);
        } else if (error == 0)
                q->retired = MAX(q->retired, j->relay_index + 1);
        else
                /* The client's signal was not decremented: the packets behind
                 * it must not run as if it had been. A memory fault ROCr
                 * learns of from the kernel's MEMORY event (the whole process
                 * is evicted); anything else the daemon ended — a timeout, a
                 * context lost under it — is a queue error. */
                queue_stop(r, q, j->relay_index,
                           error == EFAULT || (gpu_ctx(r, q->gpu) && context_get_losses(gpu_ctx(r, q->gpu)) > 0)
                                   ? 0
                                   : QUEUE_ERROR_EXCEPTION,
                           message ? message : strerror(error));
        r->last_activity_ns = now_ns();
        kfd_relay_queues_scan(r);
}

static int page_memfd(const char *name, size_t size) {
        int fd = memfd_create(name, MFD_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t) size) < 0) {
                int k = -errno;
                close(fd);
                return k;
        }
        return fd;
}

int kfd_relay_queues_init(KfdRelay *r) {
        int k;

        r->doorbell_memfd = page_memfd("kfd-relay-doorbells", KFD_DOORBELL_SLICE_SIZE);
        if (r->doorbell_memfd < 0)
                return r->doorbell_memfd;
        r->mmio_memfd = page_memfd("kfd-relay-mmio", PAGE_SIZE_4K);
        if (r->mmio_memfd < 0)
                return r->mmio_memfd;
        k = sd_event_add_time_relative(r->event, &r->poll, CLOCK_MONOTONIC,
                                       RELAY_POLL_IDLE_MS * 1000u, 1, on_poll, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_description(r->poll, "kfd-relay-poll");
        (void) sd_event_source_set_enabled(r->poll, SD_EVENT_OFF);
        return 0;
}

void kfd_relay_views_drop(KfdRelay *r) {
        const KfdOps *ops;
        int keep;

        pthread_mutex_lock(&r->lock);
        ops = r->ops;
        keep = r->ops_keep_fd;
        r->ops = NULL;
        r->ops_keep_fd = -EBADF;
        for (size_t i = 0; i < r->n_bos; i++)
                if (r->bos[i].cpu) {
                        if (ops)
                                (void) ops->munmap(ops->userdata, r->bos[i].cpu, r->bos[i].size);
                        r->bos[i].cpu = NULL;
                }
        /* The render files of the other GPUs (kfd_relay_attach()); the
         * daemon's GPU's is its context's. */
        for (size_t i = 1; i < r->n_gpus; i++) {
                if (ops && r->gpus[i].render_fd >= 0)
                        (void) ops->close(ops->userdata, r->gpus[i].render_fd);
                r->gpus[i].render_fd = -1;
        }
        pthread_mutex_unlock(&r->lock);
        /* Last: it may be what keeps the table alive. */
        if (ops && keep >= 0)
                (void) ops->close(ops->userdata, keep);
}

void kfd_relay_queues_done(KfdRelay *r) {
        r->poll = sd_event_source_disable_unref(r->poll);
        for (unsigned i = 0; i < RELAY_MAX_QUEUES; i++)
                r->queues[i].used = false;
        kfd_relay_views_drop(r);
}
