/* SPDX-License-Identifier: MIT */
/*
 * GpuQueue: one KFD user queue of a GpuContext — an SDMA queue or a compute
 * (PM4) queue — with its ring, its rptr and wptr words, its doorbell, the jobs
 * it has in flight; the code that writes jobs into the ring, reports their
 * completion from fence memory, recovers the queue after a GPU exception or an
 * abort, and reports everything in flight when a memory fault ends the
 * context (gpu_context_lose). Owned by the context; runs on the event loop
 * thread and never blocks. The compute job stream itself is gpu-dispatch.c.
 *
 * Queue buffers (kfd-facts §1.6.2, kernels >= 6.12 validate them exactly): the
 * ring is its own BO of exactly ring_size bytes; rptr and wptr each start a
 * mapping exactly one page long, so each lives in its own one-page BO (one
 * shared page would make the second pointer start mid-mapping and fail
 * kfd_queue_buffer_get()). All are GTT|COHERENT|UNCACHED: MES polls the wptr
 * through the GART on gfx11 (amdgpu_amdkfd_map_gtt_bo_to_gart). Compute
 * queues add the EOP buffer (eop_buffer_size, 4 KiB on gfx8+) and the CWSR
 * area (ALIGN((cwsr_size + debug_memory_size) * num_xcc, 4 KiB)) with the
 * topology's ctl_stack_size and cwsr_size (kfd-facts §1.6.3, kfd_queue.c), the
 * sizes kfd_node_queue_sizes() computes when the topology does not export them.
 *
 * Pointers are kept here as byte offsets, monotonically increasing 64-bit
 * values; the ring index is ptr % ring_size. The wptr word and the doorbell
 * count bytes on SDMA and dwords on PM4 queues (kfd-facts §1.7, §6 #4: "PM4 =
 * dwords, SDMA = bytes"). The read pointers differ (kfd-facts §7.7): SDMA's is
 * a monotonic byte count (ROCr HwIndexMonotonic), but the CP writes back a
 * 32-bit position *inside* the ring, in dwords, and only every
 * 2^RPTR_BLOCK_SIZE qwords (RPTR_BLOCK_SIZE 5 in the kernel's MQD setup,
 * kfd_mqd_manager_v10.c): queue_read_rptr() turns it back into a monotonic
 * value from our wptr, which is unambiguous because the ring is never full
 * and the report only lags. A lagging report is fine for ring space; whether
 * a compute job runs is read from its begin timestamp instead (head_running).
 * Submission: packets, then the HDP flush (below), then the wptr word
 * (release), then a 64-bit doorbell store of the same wptr.
 *
 * HDP flush (kfd-facts §7.5): the CPU's writes into VRAM (a client's mapping of
 * a VRAM buffer) pass the host data path, which may hold them until it is
 * flushed. User mode on KFD flushes it from the CPU: KFD maps the HDP flush
 * register page (ALLOC_MEMORY_OF_GPU with KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
 * one page, then mmap of /dev/kfd at the returned offset: kfd_mmio_mmap), and
 * a store to HDP_MEM_FLUSH_CNTL (byte 0, enum kfd_mmio_remap) flushes it
 * (libhsakmt's kfdtest HostHdpFlush: CPU write to VRAM, store 1 there, the
 * shader sees the data; the kernel's hdp_v5_0_flush_hdp writes the same
 * register and reads it back). queue_kick() does this before every doorbell,
 * so a job sees what was written before it was submitted; a device without
 * the page (MMIO_REMAP refused) goes without, and says so once.
 *
 * SDMA job stream (gpu_queue_submit):
 *   POLL_REGMEM per cross-queue wait, TIMESTAMP(begin slot), for a copy or a
 *   fill GCR_REQ(acquire: GL2/GL1/GLV/GLK written back and invalidated), the
 *   body (COPY_LINEAR split at 4 MiB / CONSTANT_FILL split at 4 MiB),
 *   GCR_REQ(release: GL2/GLK written back) — ROCr brackets every SDMA command
 *   so on gfx10+ (amd_blit_sdma.cpp useGCR, BuildGCRCommand) — TIMESTAMP(end slot),
 *   the barrier FENCE(barrier slot, id), TRAP(id), POLL_REGMEM(barrier slot
 *   == ~0) (see "Completion" below), FENCE(queue fence word, seq), if the job
 *   has a signal FENCE(signal_va, signal_value) and FENCE(queue signal word,
 *   seq), then FENCE(completion slot, id), TRAP(id). The signal comes after the fence word, so a
 *   client that saw its signal and asks the daemon anything finds the job
 *   done (docs/protocol.md, "The fence page"); the signal word after it says
 *   the signal has landed (gpu_buffer_unref_after_jobs()), which neither the
 *   fence word nor the read pointer can: an engine reads its ring ahead of
 *   what it executes (sim-sdma.c).
 * The last two raise the completion interrupt the way the kernel expects from
 * SDMA (kfd-facts §1.10: tinygrad AMDCopyQueue.signal, kfd_int_process_v10.c).
 *
 * Completion: what the daemon and its clients take for "done and succeeded"
 * is a fence the engine wrote — the queue's fence word (gpu_queue_collect()),
 * a client's fence page slot, a relay word another context waits on. On
 * gfx10/11 without fault retry a job whose access faults runs on (its access
 * goes to amdgpu's dummy page), and the fault reaches the kernel as an entry
 * of the IH ring, handled later by the KFD's interrupt work, which evicts the
 * process's queues and sets its MEMORY events (kfd-facts §7.1, §7.7). So a
 * fence written right after the job's work can be read before the MEMORY
 * event exists. The kernel takes IH entries in order (kfd_interrupt.c: one
 * FIFO, one work item, interrupt_wq() -> event_interrupt_wq_v10()), and an
 * interrupt the queue raises after the faulting access is an entry after the
 * fault's. Hence the barrier: after its work each job raises an interrupt of
 * the queue's barrier event, whose slot it has just written, and waits
 * until that slot reads ~0 again — the kernel's acknowledgement
 * (kfd_events.c set_event_from_interrupt -> acknowledge_signal) — before it
 * writes any fence. When that happens the kernel has handled every entry
 * raised before it, the fault's included, and had the job faulted, the
 * eviction would have stopped the queue at the wait: a fence the engine
 * wrote is a job that did not fault. The completion interrupt after the
 * fences wakes the waiter as before. Each queue has its own two events: the
 * kernel finds an interrupt's event by its slot, and an interrupt whose slot
 * another interrupt has already acknowledged makes it acknowledge every
 * written slot (kfd_signal_event_interrupt's exhaustive search) — a barrier
 * of another queue with them. With one barrier and one completion slot per
 * queue and each job waiting for its barrier, no slot is ever written twice
 * before its interrupt is handled, so no such search happens. The barrier
 * needs the slot's write to be seen by the kernel when it handles the
 * interrupt raised after it (else nothing acknowledges it, and the job waits
 * until its timeout aborts it): the kernel relies on the same for its own
 * SDMA fences (sdma_v5_2_ring_emit_fence: FENCE, then TRAP; the interrupt
 * handler reads the fence, amdgpu_fence_process), and RELEASE_MEM's INT_SEL
 * 2 raises the interrupt after the write is confirmed. The cost: each
 * job waits for one pass of the kernel's interrupt handling before its
 * fences (on the simulator none: it handles an interrupt when it is raised,
 * unless a fault waits, sim-ih.h). A queue made again after an abort
 * (queue_recover()) could have a barrier interrupt of its predecessor still
 * unhandled, which, handled late, would let its first job pass its wait
 * early; an abort comes after a job's timeout (seconds), by when the kernel
 * has long handled what the old queue raised.
 * A job never straddles the ring's end: the tail is padded with NOPs of the
 * queue's kind.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "gpu/gpu-internal.h"
#include "gpu/pm4.h"
#include "gpu/sdma.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"

uint64_t gpu_queue_fence_va(GpuContext *c, unsigned q) {
        return c->fence->va + (uint64_t) q * 8;
}

uint32_t *gpu_queue_fence_word(GpuContext *c, unsigned q) {
        return (uint32_t *) ((uint8_t *) c->fence->cpu + (size_t) q * 8);
}

/* The queue's signal word, the other half of its 8 bytes: the low 32 bits of
 * the last job whose signal FENCE has been written. */
static uint64_t signal_word_va(GpuContext *c, unsigned q) {
        return gpu_queue_fence_va(c, q) + 4;
}

static uint32_t *signal_word(GpuContext *c, unsigned q) {
        return gpu_queue_fence_word(c, q) + 1;
}

bool gpu_queue_signals_landed(GpuContext *c, GpuQueue *q, uint64_t seq) {
        uint32_t w = __atomic_load_n(signal_word(c, q->index), __ATOMIC_ACQUIRE);

        /* No hold spans 2^31 jobs of a queue: the difference's sign says. */
        return seq == 0 || (int32_t) (w - (uint32_t) seq) >= 0;
}

static uint64_t ts_offset(const GpuContext *c, unsigned q, uint64_t seq) {
        return GPU_FENCE_WORDS_SIZE + (uint64_t) q * GPU_FENCE_TS_PER_QUEUE(c->max_inflight) +
               (seq % c->max_inflight) * 16;
}

uint64_t gpu_queue_ts_va(GpuContext *c, unsigned q, uint64_t seq) {
        return c->fence->va + ts_offset(c, q, seq);
}

static volatile uint64_t *ts_cpu(GpuContext *c, unsigned q, uint64_t seq) {
        return (volatile uint64_t *) ((uint8_t *) c->fence->cpu + ts_offset(c, q, seq));
}

static uint64_t ticks_to_ns(const GpuContext *c, uint64_t ticks) {
        uint64_t hz = c->info.timestamp_hz ? c->info.timestamp_hz : 100000000;

        /* With ticks = q * hz + r, ticks * 10^9 / hz = q * 10^9 + r * 10^9 / hz
         * exactly: two 64-bit divisions where the 128-bit one was a library
         * call (__udivti3) on every completion, 1.5 % of the event loop's
         * samples on batches of small jobs. r * 10^9 fits while hz does in
         * 64 bits / 10^9 (18 GHz; GPU timestamps run at 100 MHz). */
        if (hz > UINT64_MAX / 1000000000u)
                return (uint64_t) ((unsigned __int128) ticks * 1000000000u / hz);
        return ticks / hz * 1000000000u + ticks % hz * 1000000000u / hz;
}

static int queue_create_kernel(GpuContext *c, GpuQueue *q) {
        struct kfd_ioctl_create_queue_args a = {
                .ring_base_address = q->ring->va,
                .write_pointer_address = q->wptr_bo->va,
                .read_pointer_address = q->rptr_bo->va,
                .ring_size = q->ring_size,
                .gpu_id = c->gpu_id,
                .queue_type = q->engine == GPU_ENGINE_COMPUTE ? KFD_IOC_QUEUE_TYPE_COMPUTE
                                                              : KFD_IOC_QUEUE_TYPE_SDMA,
                .queue_percentage = 100,
                .queue_priority = q->priority,
        };
        if (q->engine == GPU_ENGINE_COMPUTE) {
                a.eop_buffer_address = q->eop->va;
                a.eop_buffer_size = q->eop->size;
                a.ctx_save_restore_address = q->cwsr->va;
                a.ctx_save_restore_size = c->queue_sizes.cwsr_size;
                a.ctl_stack_size = c->queue_sizes.ctl_stack_size;
        }
        int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_CREATE_QUEUE, &a);
        if (r < 0)
                return r;
        q->queue_id = a.queue_id;
        q->doorbell_offset = a.doorbell_offset;
        q->created = true;

        /* The process's doorbell slice: one 8 KiB mmap of the KFD fd at
         * doorbell_offset & ~0x1FFF, exactly 0x2000 long (kfd_doorbell_mmap
         * refuses any other length); the queue's doorbell is the byte offset
         * doorbell_offset & 0x1FFF inside it (kfd-facts §1.7). */
        uint64_t base = a.doorbell_offset & ~(uint64_t) (KFD_DOORBELL_SLICE_SIZE - 1);
        uint64_t in_slice = a.doorbell_offset & (KFD_DOORBELL_SLICE_SIZE - 1);
        if (!c->doorbells) {
                void *p = NULL;
                r = c->ops->mmap(c->ops->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE,
                                 MAP_SHARED, c->kfd_fd, base, &p);
                if (r < 0)
                        return r;
                c->doorbells = p;
                c->doorbell_mmap_offset = base;
        } else if (base != c->doorbell_mmap_offset)
                return -EIO; /* one slice per process and GPU */
        if (in_slice % 8 != 0)
                return -EIO; /* 64-bit doorbells must be 8-byte aligned */
        q->doorbell = (volatile uint64_t *) ((uint8_t *) c->doorbells + in_slice);
        log_debug("gpu: %s queue %u: queue_id %u, priority %u, doorbell_offset 0x%" PRIx64,
                  q->engine == GPU_ENGINE_COMPUTE ? "compute" : "SDMA", q->index, q->queue_id, q->priority,
                  q->doorbell_offset);
        return 0;
}

static int queue_destroy_kernel(GpuContext *c, GpuQueue *q) {
        if (!q->created)
                return 0;
        struct kfd_ioctl_destroy_queue_args a = { .queue_id = q->queue_id };
        int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_DESTROY_QUEUE, &a);
        q->created = false;
        q->doorbell = NULL;
        return r;
}

/* The amd_queue_t the queue pointer user SGPRs point at: only the two fields
 * code object v4 kernels read for generic address casts, the upper halves of
 * the LDS and scratch apertures at 0x40 and 0x44 (LLVM SIISelLowering
 * getSegmentAperture: "StructOffset = AS == LOCAL ? 0x40 : 0x44"; ROCr
 * amd_hsa_queue.h group/private_segment_aperture_base_hi). */
static void fill_amd_queue(const GpuContext *c, GpuQueue *q) {
        uint8_t *page = (uint8_t *) q->kernargs->cpu + GPU_KERNARG_BO_SIZE(q->max_inflight) - 4096u;
        uint32_t lds_hi = (uint32_t) (c->lds_aperture_base >> 32);
        uint32_t scratch_hi = (uint32_t) (c->scratch_aperture_base >> 32);

        memcpy(page + 0x40, &lds_hi, 4);
        memcpy(page + 0x44, &scratch_hi, 4);
}

uint64_t gpu_queue_own_bytes(const GpuContext *like, GpuEngine engine, uint32_t ring_size, unsigned max_inflight) {
        /* What gpu_queue_setup() allocates, with the node's sizes (like
         * itself may have read them only if it has compute queues). */
        uint64_t n = align_up_u64(ring_size, PAGE_SIZE_4K) + 2 * PAGE_SIZE_4K;
        KfdQueueSizes qs = like->queue_sizes;

        if (engine != GPU_ENGINE_COMPUTE)
                return n;
        if (qs.cwsr_bo_size == 0 && kfd_node_queue_sizes(&like->node, &qs) < 0)
                return n; /* no compute queues on this node: none will be made */
        return n + align_up_u64(qs.eop_buffer_size, PAGE_SIZE_4K) + align_up_u64(qs.cwsr_bo_size, PAGE_SIZE_4K) +
               align_up_u64(GPU_KERNARG_BO_SIZE(max_inflight), PAGE_SIZE_4K);
}

int gpu_queue_setup(GpuContext *c, GpuQueue *q, unsigned index, GpuEngine engine, uint32_t ring_size,
                    uint32_t priority) {
        int r;

        *q = (GpuQueue) { .index = index, .engine = engine, .priority = priority, .ring_size = ring_size,
                          .max_inflight = c->max_inflight, .ptr_shift = engine == GPU_ENGINE_COMPUTE ? 2 : 0,
                          .next_seq = c->opts.first_seq, .completed = c->opts.first_seq - 1 };
        __atomic_store_n(gpu_queue_fence_word(c, index), (uint32_t) q->completed, __ATOMIC_RELEASE);
        __atomic_store_n(signal_word(c, index), (uint32_t) q->completed, __ATOMIC_RELEASE);
        q->inflight = calloc(q->max_inflight, sizeof *q->inflight);
        if (!q->inflight)
                return -ENOMEM;
        r = gpu_context_create_signal_event(c, &q->done_event);
        if (r < 0)
                return r;
        r = gpu_context_create_signal_event(c, &q->ack_event);
        if (r < 0)
                return r;
        r = gpu_buffer_alloc_internal(c, ring_size, GPU_BO_FLAGS_INTERNAL_READ_ONLY, true, &q->ring);
        if (r < 0)
                return r;
        r = gpu_buffer_alloc_internal(c, PAGE_SIZE_4K, GPU_BO_FLAGS_INTERNAL, true, &q->rptr_bo);
        if (r < 0)
                return r;
        r = gpu_buffer_alloc_internal(c, PAGE_SIZE_4K, GPU_BO_FLAGS_INTERNAL_READ_ONLY, true, &q->wptr_bo);
        if (r < 0)
                return r;
        if (engine == GPU_ENGINE_COMPUTE) {
                r = gpu_buffer_alloc_internal(c, c->queue_sizes.eop_buffer_size, GPU_BO_FLAGS_INTERNAL, true,
                                              &q->eop);
                if (r < 0)
                        return r;
                r = gpu_buffer_alloc_gpu_only(c, c->queue_sizes.cwsr_bo_size, &q->cwsr);
                if (r < 0)
                        return r;
                r = gpu_buffer_alloc_internal(c, GPU_KERNARG_BO_SIZE(q->max_inflight), GPU_BO_FLAGS_INTERNAL_READ_ONLY,
                                              true, &q->kernargs);
                if (r < 0)
                        return r;
                fill_amd_queue(c, q);
        }
        /* Fresh BOs are zero (the kernel clears what it hands out): the EOP
         * buffer, the ring and the pointer words start at 0 without being
         * written, and pages nobody touches cost no memory. */
        return queue_create_kernel(c, q);
}

/* The i-th in flight (i <= inflight_count, which is below max_inflight:
 * the one at inflight_count is the free slot gpu_queue_submit() fills). A
 * subtraction, not a division: a job takes several of these. */
static GpuInflight *inflight_at(GpuQueue *q, unsigned i) {
        unsigned k = q->inflight_head + i;

        assert(i < q->max_inflight && q->inflight_head < q->max_inflight);
        return &q->inflight[k >= q->max_inflight ? k - q->max_inflight : k];
}

static void inflight_pop(GpuQueue *q) {
        inflight_at(q, 0)->scratch = gpu_buffer_unref(inflight_at(q, 0)->scratch);
        q->inflight_head = q->inflight_head + 1 == q->max_inflight ? 0 : q->inflight_head + 1;
        q->inflight_count--;
}

void gpu_queue_teardown(GpuContext *c, GpuQueue *q) {
        int r = queue_destroy_kernel(c, q);
        if (r < 0)
                log_debug_errno(r, "gpu: DESTROY_QUEUE %u failed: %m", q->queue_id);
        if (q->inflight)
                while (q->inflight_count > 0)
                        inflight_pop(q);
        q->ring = gpu_buffer_unref(q->ring);
        q->rptr_bo = gpu_buffer_unref(q->rptr_bo);
        q->wptr_bo = gpu_buffer_unref(q->wptr_bo);
        q->eop = gpu_buffer_unref(q->eop);
        q->cwsr = gpu_buffer_unref(q->cwsr);
        q->kernargs = gpu_buffer_unref(q->kernargs);
        q->scratch = gpu_buffer_unref(q->scratch);
        free(q->inflight);
        q->inflight = NULL;
        q->inflight_count = 0;
        gpu_context_destroy_event(c, &q->done_event);
        gpu_context_destroy_event(c, &q->ack_event);
}

/* The engine's read pointer as a monotonic byte offset (see the top of the
 * file): SDMA's word is one already; the CP's is a wrapped dword position,
 * block-granular, so it is placed at the latest offset not after our wptr
 * that has it (the ring is never full, so that is the one). */
static uint64_t queue_read_rptr(GpuQueue *q) {
        uint64_t pos, back;

        if (q->engine != GPU_ENGINE_COMPUTE)
                return __atomic_load_n((volatile uint64_t *) q->rptr_bo->cpu, __ATOMIC_ACQUIRE);
        pos = (uint64_t) __atomic_load_n((volatile uint32_t *) q->rptr_bo->cpu, __ATOMIC_ACQUIRE) * 4 % q->ring_size;
        back = (q->wptr % q->ring_size + q->ring_size - pos) % q->ring_size;
        return q->wptr - back;
}

static void queue_store_ptrs(GpuQueue *q, uint64_t rptr, uint64_t wptr) {
        __atomic_store_n((volatile uint64_t *) q->rptr_bo->cpu, rptr >> q->ptr_shift, __ATOMIC_RELEASE);
        __atomic_store_n((volatile uint64_t *) q->wptr_bo->cpu, wptr >> q->ptr_shift, __ATOMIC_RELEASE);
}

/* True if the wait is already satisfied by order or by a reported fence (a
 * wait on another context's word always stands). */
static bool wait_needed(const GpuContext *c, unsigned qi, const GpuWait *w) {
        if (w->va)
                return true;
        return w->queue != qi && w->seq != 0 && w->seq > c->queues[w->queue].completed;
}

void gpu_wait_target(GpuContext *c, const GpuWait *w, uint64_t *ret_va, uint32_t *ret_value) {
        if (w->va) {
                *ret_va = w->va;
                *ret_value = w->value;
        } else {
                *ret_va = gpu_queue_fence_va(c, w->queue);
                *ret_value = (uint32_t) w->seq;
        }
}

/* Dwords of a job job_plan() accepted, as the queue's emitter writes it. */
static size_t job_ndw(const GpuContext *c, const GpuQueue *q, const GpuJob *job) {
        if (q->engine == GPU_ENGINE_COMPUTE)
                return gpu_compute_job_dwords(c, job);

        size_t n = 2 * SDMA_TIMESTAMP_DW + 3 * SDMA_FENCE_DW + 2 * SDMA_TRAP_DW +
                   (job->n_waits + 1) * SDMA_POLL_REGMEM_DW + (job->signal_va ? 2 * SDMA_FENCE_DW : 0);
        if (job->type == GPU_JOB_SDMA_PACKETS)
                n += job->packets.ndw;
        if (job->type == GPU_JOB_COPY)
                n += DIV_ROUND_UP(job->copy.size, (uint64_t) SDMA_COPY_MAX_BYTES) * SDMA_COPY_LINEAR_DW;
        else if (job->type == GPU_JOB_FILL)
                n += DIV_ROUND_UP(job->fill.size, (uint64_t) SDMA_FILL_MAX_BYTES) * SDMA_CONSTANT_FILL_DW;
        if (job->type == GPU_JOB_COPY || job->type == GPU_JOB_FILL)
                n += 2 * SDMA_GCR_REQ_DW;
        return n;
}

/*
 * Validates a job for queue qi and returns in *ret the job as it will be
 * emitted: only the waits still needed (the others are satisfied by order
 * or by a reported fence); *ret_ndw its dwords.
 */
static int job_plan(const GpuContext *c, unsigned qi, const GpuJob *job, GpuJob *ret, size_t *ret_ndw) {
        const GpuQueue *q = &c->queues[qi];
        size_t n;
        int r;

        if (job->n_waits > GPU_JOB_MAX_WAITS)
                return -EINVAL;
        *ret = *job;
        ret->n_waits = 0;
        for (unsigned i = 0; i < job->n_waits; i++) {
                const GpuWait *w = &job->waits[i];
                if (w->va) {
                        /* A 64-bit wait (an HSA signal) only on a compute queue. */
                        if (w->va % (w->zero64 ? 8 : 4) != 0 || (w->zero64 && q->engine != GPU_ENGINE_COMPUTE))
                                return -EINVAL;
                } else {
                        if (w->zero64)
                                return -EINVAL;
                        if (w->queue >= c->n_queues)
                                return -EINVAL;
                        if (w->seq >= c->queues[w->queue].next_seq)
                                return -EINVAL; /* a job that was never submitted: would wait forever */
                }
                if (wait_needed(c, qi, w))
                        ret->waits[ret->n_waits++] = *w;
        }
        if (job->signal_va && (job->signal_va % 4 != 0 || q->engine != GPU_ENGINE_SDMA))
                return -EINVAL;

        if (q->engine == GPU_ENGINE_COMPUTE) {
                if (job->type == GPU_JOB_DISPATCH) {
                        if (!job->dispatch.co || job->dispatch.co->ctx != c)
                                return -EINVAL; /* gpu_code_object_load_in() first */
                        r = gpu_dispatch_check(c, job, NULL, 0);
                        if (r < 0)
                                return r;
                } else if (job->type == GPU_JOB_AQL) {
                        r = gpu_aql_check(c, job, NULL, 0);
                        if (r < 0)
                                return r;
                } else if (job->type == GPU_JOB_NOP) {
                        r = gpu_hsa_check(job, NULL, 0);
                        if (r < 0)
                                return r;
                } else
                        return -EINVAL; /* copies and fills run on SDMA queues */
        } else {
                switch (job->type) {
                case GPU_JOB_NOP:
                        if (gpu_job_hsa(job))
                                return -EINVAL; /* HSA completions are PM4 packets */
                        break;
                case GPU_JOB_COPY:
                        if (job->copy.size == 0 || job->copy.src_va > UINT64_MAX - job->copy.size ||
                            job->copy.dst_va > UINT64_MAX - job->copy.size)
                                return -EINVAL;
                        break;
                case GPU_JOB_SDMA_PACKETS:
                        if (!job->packets.dw || job->packets.ndw == 0)
                                return -EINVAL;
                        break;
                case GPU_JOB_FILL:
                        /* CONSTANT_FILL writes whole dwords (FILLSIZE 2). */
                        if (job->fill.size == 0 || job->fill.size % 4 != 0 || job->fill.dst_va % 4 != 0 ||
                            job->fill.dst_va > UINT64_MAX - job->fill.size)
                                return -EINVAL;
                        break;
                default:
                        return -EINVAL; /* dispatches run on compute queues */
                }
        }
        n = job_ndw(c, q, ret);
        /* A job must fit in half the ring so that, with the padding that keeps
         * it from straddling the end, it always fits once the ring drains. */
        if (n * 4 > q->ring_size / 2)
                return -EINVAL;
        *ret_ndw = n;
        return 0;
}

/* SDMA_GCR_ACQUIRE (acquire) or SDMA_GCR_RELEASE as c emits them: every bit,
 * but for a test's omissions (GpuFlush). */
static uint32_t sdma_gcr(const GpuContext *c, bool acquire) {
        static const struct {
                GpuFlush flush;
                uint32_t bits;
        } acq[] = {
                { GPU_FLUSH_SDMA_ACQUIRE_GL2_INV, SDMA_GCR_GL2_INV },
                { GPU_FLUSH_SDMA_ACQUIRE_GL2_WB, SDMA_GCR_GL2_WB },
                { GPU_FLUSH_SDMA_ACQUIRE_GLK, SDMA_GCR_GLK_WB | SDMA_GCR_GLK_INV },
                { GPU_FLUSH_SDMA_ACQUIRE_GLV_GL1, SDMA_GCR_GLV_INV | SDMA_GCR_GL1_INV },
        }, rel[] = {
                { GPU_FLUSH_SDMA_RELEASE_GL2_WB, SDMA_GCR_GL2_WB },
                { GPU_FLUSH_SDMA_RELEASE_GLK_WB, SDMA_GCR_GLK_WB },
        };
        uint32_t gcr = 0;

        for (size_t i = 0; i < (acquire ? ELEMENTSOF(acq) : ELEMENTSOF(rel)); i++)
                if (gpu_flush_on(c, acquire ? acq[i].flush : rel[i].flush))
                        gcr |= acquire ? acq[i].bits : rel[i].bits;
        assert(gcr == (acquire ? SDMA_GCR_ACQUIRE : SDMA_GCR_RELEASE) || c->omit_flushes);
        return gcr;
}

/* Emits the job; interrupt false writes NOPs where its TRAP goes, for
 * queue_raise_quiet() to fill in. */
static size_t sdma_emit_job(GpuContext *c, GpuQueue *q, const GpuJob *job, uint64_t seq, bool interrupt,
                            uint32_t *p) {
        uint32_t *const p0 = p;
        uint64_t ts = gpu_queue_ts_va(c, q->index, seq);

        for (unsigned i = 0; i < job->n_waits; i++) {
                uint64_t va;
                uint32_t value;

                /* Wait until the other queue's 32-bit fence word >= seq: an
                 * unsigned compare, exact because no wait spans a wrap of the
                 * word (queue_turn_epoch()). */
                gpu_wait_target(c, &job->waits[i], &va, &value);
                p += sdma_emit_poll_regmem(p, va, value, 0xFFFFFFFFu, SDMA_POLL_FUNC_GE);
        }
        /* After the waits: time spent waiting is not the job's. */
        p += sdma_emit_timestamp(p, ts);
        /* gfx10+ SDMA reads and writes through the GL2 (every target this
         * daemon drives is gfx10.3 or gfx11): a copy or fill is bracketed by
         * ROCr's two GCR requests (sdma.h SDMA_GCR_ACQUIRE/RELEASE), so it
         * reads what the CPU or a shader wrote, and what it wrote is in
         * memory before the fence the CPU waits on. */
        if (job->type == GPU_JOB_COPY || job->type == GPU_JOB_FILL)
                p += sdma_emit_gcr_req(p, sdma_gcr(c, true));
        switch (job->type) {
        case GPU_JOB_COPY:
                for (uint64_t done = 0; done < job->copy.size;) {
                        uint32_t n = (uint32_t) MIN(job->copy.size - done, (uint64_t) SDMA_COPY_MAX_BYTES);
                        p += sdma_emit_copy_linear(p, job->copy.dst_va + done, job->copy.src_va + done, n);
                        done += n;
                }
                break;
        case GPU_JOB_FILL:
                for (uint64_t done = 0; done < job->fill.size;) {
                        uint32_t n = (uint32_t) MIN(job->fill.size - done, (uint64_t) SDMA_FILL_MAX_BYTES);
                        p += sdma_emit_constant_fill(p, job->fill.dst_va + done, job->fill.pattern, n);
                        done += n;
                }
                break;
        case GPU_JOB_SDMA_PACKETS:
                /* A relayed client's own packets, whole and checked (gpu.h). */
                memcpy(p, job->packets.dw, 4u * job->packets.ndw);
                p += job->packets.ndw;
                break;
        case GPU_JOB_NOP:
        case GPU_JOB_DISPATCH: /* refused by job_plan() */
        case GPU_JOB_AQL:
                break;
        }
        if (job->type == GPU_JOB_COPY || job->type == GPU_JOB_FILL)
                p += sdma_emit_gcr_req(p, sdma_gcr(c, false));
        p += sdma_emit_timestamp(p, ts + 8);
        /* The barrier (see "Completion" at the top): its slot, its interrupt,
         * and the wait until the kernel has acknowledged it. */
        p += sdma_emit_fence(p, gpu_context_event_slot_va(c, q->ack_event), q->ack_event);
        p += sdma_emit_trap(p, q->ack_event);
        p += sdma_emit_poll_regmem(p, gpu_context_event_slot_va(c, q->ack_event), KFD_UNSIGNALED_EVENT_SLOT32,
                                   0xFFFFFFFFu, SDMA_POLL_FUNC_EQ);
        p += sdma_emit_fence(p, gpu_queue_fence_va(c, q->index), (uint32_t) seq);
        if (job->signal_va) {
                p += sdma_emit_fence(p, job->signal_va, job->signal_value);
                p += sdma_emit_fence(p, signal_word_va(c, q->index), (uint32_t) seq);
        }
        /* The completion interrupt: the queue's completion slot (written by
         * every job: a slot written with no TRAP after it is found by the
         * next interrupt, as KFD looks slots up only then), then TRAP, last,
         * where queue_raise_quiet() finds it. */
        p += sdma_emit_fence(p, gpu_context_event_slot_va(c, q->done_event), q->done_event);
        p += interrupt ? sdma_emit_trap(p, q->done_event) : sdma_emit_nop(p, SDMA_TRAP_DW);
        return (size_t) (p - p0);
}

/*
 * Writes the job's packets at the queue's wptr (padding the ring's tail with
 * NOPs when the job would straddle the end) and advances q->wptr. No doorbell.
 * -EAGAIN, with nothing written, if the ring lacks room. f holds the job's seq
 * and what gpu_dispatch_prepare() set up for a dispatch.
 */
static int queue_emit_job(GpuContext *c, GpuQueue *q, const GpuJob *job, const GpuInflight *f, size_t ndw,
                          bool interrupt, uint64_t *ret_start) {
        uint64_t bytes = ndw * 4;
        uint64_t off = q->wptr % q->ring_size;
        uint64_t tail = q->ring_size - off;
        uint64_t pad = bytes > tail ? tail : 0;
        uint64_t rptr = queue_read_rptr(q);

        if (rptr > q->wptr)
                return -EIO; /* the engine claims to be ahead of us */
        /* Strictly less than the ring: wptr == rptr + ring_size would read as empty. */
        if ((q->wptr - rptr) + pad + bytes >= q->ring_size)
                return -EAGAIN;

        uint32_t *ring = q->ring->cpu;
        if (pad > 0) {
                if (q->engine == GPU_ENGINE_COMPUTE)
                        gpu_compute_emit_pad(ring + off / 4, pad / 4);
                else
                        sdma_emit_nop(ring + off / 4, pad / 4);
                q->wptr += pad;
        }
        uint64_t start = q->wptr;
        uint32_t *p = ring + (start % q->ring_size) / 4;

        /* The slot may hold the timestamps of seq - max_inflight. */
        ts_cpu(c, q->index, f->seq)[0] = 0;
        ts_cpu(c, q->index, f->seq)[1] = 0;

        size_t written = q->engine == GPU_ENGINE_COMPUTE ? gpu_compute_emit_job(c, q, job, f, p)
                                                         : sdma_emit_job(c, q, job, f->seq, interrupt, p);
        if (written != ndw)
                return -EIO; /* job_plan() and the emitter disagree: a bug */
        q->wptr += bytes;
        *ret_start = start;
        return 0;
}

static void queue_kick(GpuContext *c, GpuQueue *q) {
        /* A full barrier (what the CPU wrote, write-combined VRAM included,
         * is out), the HDP flush (see the top of the file), then the wptr
         * store with release semantics (the ring writes before it), then a
         * full barrier so the doorbell store cannot pass it, then the 64-bit
         * doorbell store of the same wptr, in the queue's unit
         * (kfd-facts §1.7, §3.3). The simulator is told of the store (the
         * GPU sees the MMIO write itself: kfd-ops.h). */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        gpu_context_flush_hdp(c);
        __atomic_store_n((volatile uint64_t *) q->wptr_bo->cpu, q->wptr >> q->ptr_shift, __ATOMIC_RELEASE);
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *q->doorbell = q->wptr >> q->ptr_shift;
        if (c->ops->doorbell_written)
                c->ops->doorbell_written(c->ops->userdata, c->kfd_fd, q->queue_id);
}

/*
 * The fence word holds the low 32 bits of a queue's completed seq, and GPU
 * waits compare it unsigned, >= (POLL_REGMEM, WAIT_REG_MEM). Across a wrap that
 * compare is wrong both ways: a wait for seq 2^32 (word 0) passes at once, and
 * a wait for 2^32 - 1 never passes once the word reads 0. So the wrap is
 * crossed only while nothing can see it: when the next seq would write 0, the
 * queue first drains, and no job of another queue may still wait on it (a
 * wait on a job that is already complete is never emitted, job_plan()); then
 * the CPU writes 0 to the word itself and that seq is skipped. Every wait
 * emitted afterwards is for a seq of the new epoch, whose low word is >= 1.
 * Until then the queue refuses jobs with -EAGAIN, like a full ring; the
 * caller submits again when a completion arrives. Once every 2^32 jobs.
 */
static int queue_turn_epoch(GpuContext *c, GpuQueue *q) {
        if (q->inflight_count > 0)
                return -EAGAIN;
        for (unsigned i = 0; i < c->n_queues; i++) {
                GpuQueue *o = &c->queues[i];
                for (unsigned k = 0; k < o->inflight_count; k++) {
                        const GpuInflight *f = inflight_at(o, k);
                        for (unsigned w = 0; w < f->job.n_waits; w++)
                                if (f->job.waits[w].queue == q->index)
                                        return -EAGAIN;
                }
        }
        __atomic_store_n(gpu_queue_fence_word(c, q->index), 0u, __ATOMIC_RELEASE);
        q->completed = q->next_seq++;
        log_debug("gpu: queue %u turned its fence word's epoch at seq %" PRIu64, q->index, q->completed);
        return 0;
}

/*
 * Interrupt moderation. A job on an SDMA queue ends with its completion
 * interrupt (the event slot's FENCE and TRAP); on a burst of small jobs that
 * is an interrupt, a waiter wake-up and an event-loop wake-up per job — on
 * the simulator about 9 of each per batch of 64 4-byte fills, with 10 us
 * coalescing. The queue's fence word is written by every job all the same,
 * and jobs of a queue end in order, so one interrupt after several jobs
 * reports them all (gpu_context_process() reads the fence words). While
 * doorbells are held, a job is written with NOPs in place of its TRAP, which
 * is written in when the next job would make the group of jobs without one
 * longer than QUIET_MAX_JOBS or larger than QUIET_MAX_BYTES (which bounds
 * how late a job's completion is seen: the GPU time of that much work; a
 * large job is a group of its own), or when the doorbells are released.
 * Nothing of it is visible to the engine before the doorbell.
 */
#define QUIET_MAX_JOBS 64u
#define QUIET_MAX_BYTES (256u << 10)

static void queue_raise_quiet(GpuContext *c, GpuQueue *q) {
        if (q->trap_pending)
                sdma_emit_trap((uint32_t *) q->ring->cpu + (q->trap_at % q->ring_size) / 4, q->done_event);
        q->trap_pending = false;
        q->quiet_jobs = 0;
        q->quiet_bytes = 0;
}

static uint64_t job_bytes(const GpuJob *job) {
        return job->type == GPU_JOB_COPY ? job->copy.size : job->type == GPU_JOB_FILL ? job->fill.size : 0;
}

int gpu_queue_submit(GpuContext *c, unsigned queue, const GpuJob *job, uint64_t *ret_seq) {
        GpuJob plan;
        size_t ndw;
        uint64_t start;
        bool quiet;
        int r;

        if (!c || !job || queue >= c->n_queues)
                return -EINVAL;
        GpuQueue *q = &c->queues[queue];
        r = job_plan(c, queue, job, &plan, &ndw);
        if (r < 0)
                return r;
        if (c->lost)
                return -ENODEV;
        if (!q->created)
                return -EIO; /* lost in a failed recovery */
        if (q->inflight_count >= q->max_inflight)
                return -EAGAIN;
        if ((uint32_t) q->next_seq == 0) {
                r = queue_turn_epoch(c, q);
                if (r < 0)
                        return r;
        }

        /* Built in its slot (free: inflight_count < max_inflight), which
         * counts once the job is on the ring. */
        GpuInflight *f = inflight_at(q, q->inflight_count);
        *f = (GpuInflight) { .seq = q->next_seq, .job = plan };
        r = gpu_dispatch_prepare(c, q, job, f->seq, f);
        if (r < 0)
                return r;
        /* The kernarg slot holds the arguments now and re-emission after a
         * fault reuses it: the caller's pointer is not kept. */
        if (f->job.type == GPU_JOB_DISPATCH)
                f->job.dispatch.args_data = NULL;
        quiet = c->doorbell_holds > 0 && q->engine == GPU_ENGINE_SDMA;
        /* A job that would take its group of quiet jobs past the bounds, or
         * that waits on the GPU (as long as a kernel runs, perhaps), starts a
         * new group: the one before raises its interrupt first, so no job's
         * completion waits behind a large copy or a wait. */
        if (quiet && (q->quiet_jobs >= QUIET_MAX_JOBS || q->quiet_bytes + job_bytes(&f->job) > QUIET_MAX_BYTES ||
                      f->job.n_waits > 0))
                queue_raise_quiet(c, q);
        r = queue_emit_job(c, q, &f->job, f, ndw, !quiet, &start);
        if (r < 0) {
                f->scratch = gpu_buffer_unref(f->scratch);
                return r;
        }
        if (quiet) {
                /* This job's interrupt is the one to write in if nothing follows. */
                if (q->trap_pending)
                        q->quiet_jobs++;
                q->trap_pending = true;
                q->trap_at = q->wptr - SDMA_TRAP_DW * 4;
                q->quiet_bytes += job_bytes(&f->job);
        }
        f->ring_start = start;
        f->ring_end = q->wptr;
        if (f->job.signal_va)
                q->last_signal_seq = f->seq;
        q->inflight_count++;
        q->next_seq++;
        if (c->doorbell_holds > 0)
                q->kick_pending = true;
        else
                queue_kick(c, q);
        c->stats.jobs_submitted++;
        if (ret_seq)
                *ret_seq = f->seq;
        return 0;
}

void gpu_context_hold_doorbells(GpuContext *c) {
        if (c)
                c->doorbell_holds++;
}

void gpu_context_release_doorbells(GpuContext *c) {
        if (!c || c->doorbell_holds == 0 || --c->doorbell_holds > 0)
                return;
        for (unsigned i = 0; i < c->n_queues; i++) {
                GpuQueue *q = &c->queues[i];

                if (q->trap_pending)
                        queue_raise_quiet(c, q);
                if (!q->kick_pending)
                        continue;
                q->kick_pending = false;
                if (q->created && !c->lost)
                        queue_kick(c, q);
        }
}

uint64_t gpu_queue_get_completed(const GpuContext *c, unsigned queue) {
        if (!c || queue >= c->n_queues)
                return 0;
        return c->queues[queue].completed;
}

static void report(GpuContext *c, GpuQueue *q, const GpuInflight *f, int error, uint64_t fault_va,
                   const char *message, GpuCompletionFn cb, void *userdata) {
        volatile uint64_t *ts = ts_cpu(c, q->index, f->seq);
        uint64_t b = ts[0], e = ts[1];
        char where[GPU_WHERE_TEXT_MAX], said[GPU_REPORT_TEXT_MAX], text[sizeof where + sizeof said + 8];

        /* Nothing the client reads names an address of this process. */
        if (message) {
                gpu_context_rewrite_addresses(c, message, said, sizeof said);
                message = said;
        }
        if (error == -EFAULT) {
                gpu_context_describe_va(c, fault_va, where, sizeof where);
                snprintf(text, sizeof text, "at %s%s%s", where, message ? ": " : "", message ? message : "");
                message = text;
        }
        GpuCompletion comp = {
                .queue = q->index,
                .seq = f->seq,
                .error = error,
                .fault_va = error == -EFAULT ? fault_va : 0,
                .begin_ns = b ? ticks_to_ns(c, b) : 0,
                .end_ns = e ? ticks_to_ns(c, e) : (b ? ticks_to_ns(c, b) : 0),
                .message = message,
        };
        c->stats.jobs_completed++;
        if (cb)
                cb(&comp, userdata);
}

#define DROPPED_MESSAGE "not run: a job before it in its stream failed"

/* Reports the dropped jobs at the head of q (see drop_chain()). */
/* Moves the fence word to seq from the CPU unless the engine has already
 * written a later one (it may be running the jobs after seq): waits on seq in
 * other queues proceed, as they do past a failed job. */
static void fence_advance(GpuContext *c, GpuQueue *q, uint64_t seq) {
        uint32_t *word = gpu_queue_fence_word(c, q->index), cur = __atomic_load_n(word, __ATOMIC_ACQUIRE);

        while ((int32_t) ((uint32_t) seq - cur) > 0 &&
               !__atomic_compare_exchange_n(word, &cur, (uint32_t) seq, false, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
                ;
        if (seq > q->completed)
                q->completed = seq;
}

static int report_dropped(GpuContext *c, GpuQueue *q, GpuCompletionFn cb, void *userdata) {
        int n = 0;

        for (; q->inflight_count > 0 && inflight_at(q, 0)->dropped; n++) {
                GpuInflight *f = inflight_at(q, 0);
                fence_advance(c, q, f->seq);
                report(c, q, f, -ECANCELED, 0, DROPPED_MESSAGE, cb, userdata);
                inflight_pop(q);
        }
        return n;
}

int gpu_queue_collect(GpuContext *c, GpuQueue *q, GpuCompletionFn cb, void *userdata) {
        /* The fence word holds the low 32 bits of the last completed seq;
         * extend it relative to what we reported last. */
        uint32_t w = __atomic_load_n(gpu_queue_fence_word(c, q->index), __ATOMIC_ACQUIRE);
        uint64_t done = q->completed + (uint32_t) (w - (uint32_t) q->completed);
        int n = 0;

        if (done >= q->next_seq)
                return 0; /* not a value we wrote (or ahead of us): ignore */
        for (;;) {
                n += report_dropped(c, q, cb, userdata);
                if (q->inflight_count == 0 || inflight_at(q, 0)->seq > done)
                        break;
                report(c, q, inflight_at(q, 0), 0, 0, NULL, cb, userdata);
                inflight_pop(q);
                n++;
        }
        if (done > q->completed)
                q->completed = done;
        return n;
}

static bool range_hits_page(uint64_t start, uint64_t size, uint64_t va) {
        uint64_t lo = start & ~(uint64_t) (PAGE_SIZE_4K - 1);
        uint64_t hi = align_up_u64(start + size, PAGE_SIZE_4K);
        return va >= lo && (hi == 0 || va < hi);
}

static bool job_touches(const GpuContext *c, const GpuJob *job, uint64_t va) {
        for (unsigned i = 0; i < job->n_waits; i++) {
                uint64_t wva;
                uint32_t value;
                gpu_wait_target((GpuContext *) c, &job->waits[i], &wva, &value);
                if (range_hits_page(wva, 4, va))
                        return true;
        }
        if (job->signal_va && range_hits_page(job->signal_va, 4, va))
                return true;
        const GpuHsaCompletion *h = gpu_job_hsa(job);
        if (h && ((h->ts_va && range_hits_page(h->ts_va, 16, va)) ||
                  (h->signal_va && range_hits_page(h->signal_va, 8, va)) ||
                  (h->event_slot_va && range_hits_page(h->event_slot_va, 4, va)) ||
                  (h->mailbox_va && range_hits_page(h->mailbox_va, 4, va)) ||
                  (h->index_va && range_hits_page(h->index_va, 8, va))))
                return true;
        switch (job->type) {
        case GPU_JOB_COPY:
                return range_hits_page(job->copy.src_va, job->copy.size, va) ||
                       range_hits_page(job->copy.dst_va, job->copy.size, va);
        case GPU_JOB_FILL:
                return range_hits_page(job->fill.dst_va, job->fill.size, va);
        default:
                return false;
        }
}

/*
 * Marks the in-flight jobs of chain (nonzero) dropped: they were ordered after
 * a job of their chain that failed, so they are not emitted again; each is
 * reported -ECANCELED in its turn, so that a queue's reports stay in order
 * (the jobs before it may still run).
 */
static void drop_chain(GpuQueue *q, uint32_t chain) {
        if (chain == 0)
                return;
        for (unsigned i = 0; i < q->inflight_count; i++) {
                GpuInflight *f = inflight_at(q, i);
                if (f->job.chain == chain && !f->dropped) {
                        f->dropped = true;
                        f->scratch = gpu_buffer_unref(f->scratch);
                }
        }
}

/* Whether f's signal is still to be written on a queue made again: it is
 * in flight, emitted again unless dropped. */
static bool signal_to_come(const GpuInflight *f) {
        return !f->dropped && f->job.signal_va;
}

uint64_t gpu_queue_signal_pending_upto(GpuQueue *q, uint64_t seq) {
        uint64_t last = 0;

        for (unsigned i = 0; i < q->inflight_count; i++) {
                const GpuInflight *f = inflight_at(q, i);
                if (f->seq > seq)
                        break;
                if (signal_to_come(f))
                        last = f->seq;
        }
        return last;
}

/* After DESTROY_QUEUE, nothing of the old queue writes: the signal word
 * stands just before the first signal to be written again (or at the last
 * seq given out, with none), and the holds wait for what will be. */
static void queue_reset_signals(GpuContext *c, GpuQueue *q) {
        uint64_t first = 0;

        q->last_signal_seq = gpu_queue_signal_pending_upto(q, UINT64_MAX);
        for (unsigned i = 0; i < q->inflight_count && first == 0; i++) {
                const GpuInflight *f = inflight_at(q, i);
                if (signal_to_come(f))
                        first = f->seq;
        }
        __atomic_store_n(signal_word(c, q->index), (uint32_t) (first ? first - 1 : q->next_seq - 1), __ATOMIC_RELEASE);
        gpu_context_requeue_holds(c, q);
}

/*
 * Recreates a queue after its head job faulted: DESTROY_QUEUE, zero rptr/wptr,
 * CREATE_QUEUE (fresh ring state), fence word := faulted seq from the CPU (so
 * waits on it in other queues proceed), the signal word and the holds on it
 * set for the signals to come (queue_reset_signals), then re-emit the later in-flight jobs
 * — but those of the failed job's chain, which are dropped — with their own
 * sequence numbers and kick once.
 */
static int queue_recover(GpuContext *c, GpuQueue *q, uint64_t faulted_seq, uint32_t chain, GpuCompletionFn cb,
                         void *userdata) {
        int r = queue_destroy_kernel(c, q);
        if (r < 0)
                log_debug_errno(r, "gpu: DESTROY_QUEUE %u after fault failed: %m", q->queue_id);

        queue_store_ptrs(q, 0, 0);
        q->wptr = 0;
        /* Everything is emitted again, each job with its interrupt. */
        q->trap_pending = false;
        q->quiet_jobs = 0;
        q->quiet_bytes = 0;
        __atomic_store_n(gpu_queue_fence_word(c, q->index), (uint32_t) faulted_seq, __ATOMIC_RELEASE);
        if (faulted_seq > q->completed)
                q->completed = faulted_seq;

        drop_chain(q, chain);
        queue_reset_signals(c, q);
        r = queue_create_kernel(c, q);
        if (r < 0) {
                /* The queue is gone: fail what it still held. */
                while (q->inflight_count > 0) {
                        report(c, q, inflight_at(q, 0), -ECANCELED, 0, NULL, cb, userdata);
                        q->completed = inflight_at(q, 0)->seq;
                        inflight_pop(q);
                }
                return r;
        }

        for (unsigned i = 0; i < q->inflight_count; i++) {
                GpuInflight *f = inflight_at(q, i);
                uint64_t start;

                if (f->dropped) {
                        f->ring_start = f->ring_end = q->wptr;
                        continue;
                }
                /* Emitted as planned at submission: waits satisfied since are
                 * harmless, and the kernarg slot still holds the arguments. */
                r = queue_emit_job(c, q, &f->job, f, job_ndw(c, q, &f->job), true, &start);
                if (r < 0) {
                        /* Cannot happen for jobs that fitted before (each is at
                         * most half the ring and the ring is empty now); if it
                         * does, fail the tail rather than leave it unreported. */
                        for (unsigned j = i; j < q->inflight_count; j++) {
                                GpuInflight *t = inflight_at(q, j);
                                report(c, q, t, -ECANCELED, 0, NULL, cb, userdata);
                                t->scratch = gpu_buffer_unref(t->scratch);
                        }
                        q->inflight_count = i;
                        break;
                }
                f->ring_start = start;
                f->ring_end = q->wptr;
        }
        if (q->wptr > 0)
                queue_kick(c, q);
        (void) report_dropped(c, q, cb, userdata);
        return 0;
}

/* The live, GPU-mapped buffer of this context that contains va, or NULL. */
static const GpuBuffer *buffer_at(const GpuContext *c, uint64_t va) {
        for (const GpuBuffer *b = c->buffers; b; b = b->next)
                if (b->gpu_mapped && va >= b->va && va - b->va < b->size)
                        return b;
        return NULL;
}

/* First address of [start, start+size) that no buffer of ours maps. */
static bool range_unmapped(const GpuContext *c, uint64_t start, uint64_t size, uint64_t *ret_va) {
        uint64_t va = start, end = start + size;
        while (va < end) {
                const GpuBuffer *b = buffer_at(c, va);
                if (!b) {
                        *ret_va = va;
                        return true;
                }
                va = b->va + b->size;
        }
        return false;
}

/* Whether the job touches memory outside every buffer of the context: such a
 * job cannot run without a VM fault. Sources first (a copy reads before it
 * writes). */
static bool job_unmapped_va(const GpuContext *c, const GpuJob *job, uint64_t *ret_va) {
        const GpuHsaCompletion *h = gpu_job_hsa(job);

        /* A relayed packet's 64-bit waits (a barrier's signals, read first),
         * then what its HSA completion writes, in stream order. */
        for (unsigned i = 0; i < job->n_waits; i++)
                if (job->waits[i].zero64 && range_unmapped(c, job->waits[i].va, 8, ret_va))
                        return true;
        if (h && ((h->ts_va && range_unmapped(c, h->ts_va, 16, ret_va)) ||
                  (h->signal_va && range_unmapped(c, h->signal_va, 8, ret_va)) ||
                  (h->event_slot_va && range_unmapped(c, h->event_slot_va, 4, ret_va)) ||
                  (h->mailbox_va && range_unmapped(c, h->mailbox_va, 4, ret_va)) ||
                  (h->index_va && range_unmapped(c, h->index_va, 8, ret_va))))
                return true;
        switch (job->type) {
        case GPU_JOB_COPY:
                return range_unmapped(c, job->copy.src_va, job->copy.size, ret_va) ||
                       range_unmapped(c, job->copy.dst_va, job->copy.size, ret_va);
        case GPU_JOB_FILL:
                return range_unmapped(c, job->fill.dst_va, job->fill.size, ret_va);
        default:
                return false;
        }
}

/* Fails the head job of q with error and recovers the queue. */
static void fail_head(GpuContext *c, GpuQueue *q, int error, uint64_t va, const char *message,
                      GpuCompletionFn cb, void *userdata) {
        GpuInflight h = *inflight_at(q, 0);

        log_debug("gpu: job %" PRIu64 " on queue %u failed (%s, va 0x%" PRIx64 "), recovering the queue", h.seq,
                  q->index, strerror(-error), va);
        report(c, q, &h, error, va, message, cb, userdata);
        inflight_pop(q);
        int r = queue_recover(c, q, h.seq, h.job.chain, cb, userdata);
        if (r < 0)
                log_debug_errno(r, "gpu: recreating queue %u failed: %m", q->index);
}

/* Whether the head job of q is being executed: its begin timestamp (written
 * once its waits are met) is there. Not the rptr: a compute queue's report
 * lags by a block, and an engine's read pointer is its fetcher's, which may
 * be jobs ahead of the packet it executes (sim-sdma.c). */
static bool head_running(GpuContext *c, GpuQueue *q) {
        GpuInflight *h = inflight_at(q, 0);

        return __atomic_load_n(&ts_cpu(c, q->index, h->seq)[0], __ATOMIC_ACQUIRE) != 0;
}

/*
 * A MEMORY event names an address, not a queue, and the kernel has already
 * evicted every queue of the context for good (kfd-facts §7.1): nothing of it
 * will run again. Every job still in flight is reported now, each once:
 *  - a copy or fill at the head of its queue that touches memory outside
 *    every buffer of the context faulted, or would have when it ran (every
 *    buffer is mapped writable, so nothing else can; the eviction may have
 *    stopped its queue before it began): -EFAULT, at the event's
 *    address if its range covers that page, else at its own first unmapped
 *    address (KFD keeps one record per event, so two faults close together
 *    arrive as one);
 *  - if no such copy or fill covers the event's page, the dispatches being
 *    executed are the candidates — a kernel computes its own addresses: if
 *    there is exactly one, it gets -EFAULT at the address; if there are
 *    several, none is blamed (each gets -ECANCELED, the message says why):
 *    telling an innocent client its kernel faulted would be worse;
 *  - every other job gets -ECANCELED.
 * The context is then lost (gpu_context_is_lost()).
 */
int gpu_context_lose(GpuContext *c, const GpuFault *f, GpuCompletionFn cb, void *userdata) {
        bool certain[GPU_MAX_QUEUES] = {}, page_explained = false;
        uint64_t own_va[GPU_MAX_QUEUES] = {};
        unsigned n_dispatch = 0, dispatch_q = 0;
        char msg[200], where[GPU_WHERE_TEXT_MAX];
        int n = 0;

        for (unsigned i = 0; i < c->n_queues; i++) {
                GpuQueue *q = &c->queues[i];
                if (!q->created || q->inflight_count == 0)
                        continue;
                GpuInflight *h = inflight_at(q, 0);
                if (h->job.type == GPU_JOB_DISPATCH || h->job.type == GPU_JOB_AQL) {
                        /* A kernel computes its own addresses (its HSA
                         * completion's come after it: the kernel first). */
                        if (head_running(c, q)) {
                                n_dispatch++;
                                dispatch_q = i;
                        }
                } else if (job_unmapped_va(c, &h->job, &own_va[i])) {
                        certain[i] = true;
                        if (job_touches(c, &h->job, f->va)) {
                                own_va[i] = f->va;
                                page_explained = true;
                        }
                }
        }
        if (!page_explained && n_dispatch == 1) {
                certain[dispatch_q] = true;
                own_va[dispatch_q] = f->va;
                page_explained = true;
        }

        c->lost = true;
        gpu_context_describe_va(c, f->va, where, sizeof where);
        snprintf(c->lost_reason, sizeof c->lost_reason, "a GPU memory fault at %s%s", where,
                 page_explained ? ""
                 : n_dispatch > 1 ? " by one of the kernels running at once (the device does not say which)"
                                  : " that no job in flight can have caused");
        log_debug("gpu: context on gpu_id 0x%x lost: %s", c->gpu_id, c->lost_reason);

        for (unsigned i = 0; i < c->n_queues; i++) {
                GpuQueue *q = &c->queues[i];
                bool head = true;
                while (q->inflight_count > 0) {
                        GpuInflight *h = inflight_at(q, 0);
                        if (head && certain[i])
                                report(c, q, h, -EFAULT, own_va[i], NULL, cb, userdata);
                        else {
                                snprintf(msg, sizeof msg, "its GPU context was lost to %s",
                                         page_explained ? "another job's memory fault"
                                         : n_dispatch > 1 && head &&
                                                           (h->job.type == GPU_JOB_DISPATCH || h->job.type == GPU_JOB_AQL)
                                                 ? "a memory fault of this or another kernel running with it "
                                                   "(the device does not say which)"
                                                 : "a memory fault of a job running with it");
                                report(c, q, h, -ECANCELED, 0, msg, cb, userdata);
                        }
                        head = false;
                        q->completed = h->seq;
                        inflight_pop(q);
                        n++;
                }
        }
        return n;
}

/*
 * A HW_EXCEPTION event: on the kernel, a GPU reset (kfd_signal_reset_event,
 * every KFD context of the GPU) or RAS poison, never an illegal instruction
 * or a bad packet (kfd-facts §7.2: a queue that stops at one of those says
 * nothing, and its job ends by its timeout, gpu_queue_abort()). After a reset
 * nothing of the context's work survives — its queues were stopped, and with
 * memory_lost its VRAM is gone — so every job in flight fails with -EIO, and
 * the context is lost like a faulted one: the context layer makes a new one
 * (a client context) or the daemon hands over to a new daemon (its own).
 */
int gpu_context_reset(GpuContext *c, const GpuFault *f, GpuCompletionFn cb, void *userdata) {
        LogFields fields = {};
        int n = 0;

        c->lost = true;
        snprintf(c->lost_reason, sizeof c->lost_reason, "the GPU was reset%s",
                 f->memory_lost ? " (VRAM contents lost)" : "");
        log_fields_add(&fields, "KFDBROKER_GPU_ID=0x%x", c->gpu_id);
        log_fields_add(&fields, "KFDBROKER_VRAM_LOST=%s", f->memory_lost ? "yes" : "no");
        log_struct(LOG_WARNING, KFDBROKER_MESSAGE_GPU_RESET, &fields, "GPU gpu_id 0x%x raised a HW exception: %s",
                   c->gpu_id, c->lost_reason);
        for (unsigned i = 0; i < c->n_queues; i++) {
                GpuQueue *q = &c->queues[i];
                while (q->inflight_count > 0) {
                        report(c, q, inflight_at(q, 0), -EIO, 0, c->lost_reason, cb, userdata);
                        q->completed = inflight_at(q, 0)->seq;
                        inflight_pop(q);
                        n++;
                }
        }
        return n;
}

/* Where the kernel-call table can say why a queue stopped (KfdOps.
 * exception_info: the simulator), files each record with its queue, for the
 * message of the job that is given up on there. */
static void take_stop_reasons(GpuContext *c) {
        char text[sizeof c->queues[0].stop_reason];
        uint32_t queue_id;
        int r;

        if (!c->ops->exception_info)
                return;
        while ((r = c->ops->exception_info(c->ops->userdata, c->kfd_fd, &queue_id, text, sizeof text)) >= 0) {
                bool filed = false;
                for (unsigned i = 0; i < c->n_queues; i++)
                        if (c->queues[i].queue_id == queue_id) {
                                snprintf(c->queues[i].stop_reason, sizeof c->queues[i].stop_reason, "%s", text);
                                filed = true;
                        }
                if (!filed)
                        log_debug("gpu: KFD queue %u, not one of ours, stopped: %s", queue_id, text);
        }
        if (r != -ENOENT)
                log_debug_errno(r, "gpu: reading why queues stopped failed: %m");
}

int gpu_queue_abort(GpuContext *c, unsigned queue, uint64_t seq, int error, GpuCompletionFn cb,
                    void *userdata) {
        GpuQueue *q;

        if (!c || queue >= c->n_queues || error >= 0)
                return -EINVAL;
        if (c->lost)
                return 0; /* everything was reported when it was lost */
        q = &c->queues[queue];
        /* Retire what already finished first: the job may have completed just now. */
        gpu_queue_collect(c, q, cb, userdata);
        if (q->inflight_count == 0 || inflight_at(q, 0)->seq != seq)
                return 0;
        /* Preempt by destroying the queue, as a fault does; jobs behind it are
         * re-emitted on the recreated queue with their own sequence numbers.
         * If the device said why the queue had stopped, the job's message says it. */
        {
                char reason[sizeof q->stop_reason];
                int r = queue_destroy_kernel(c, q); /* stopped now: whatever it stopped at is on record */

                if (r < 0)
                        log_debug_errno(r, "gpu: DESTROY_QUEUE %u to abort job %" PRIu64 " failed: %m", q->queue_id, seq);
                take_stop_reasons(c);
                snprintf(reason, sizeof reason, "%s", q->stop_reason);
                q->stop_reason[0] = '\0';
                /* The queue has stopped, its fence word is final: a job that
                 * ended between the look above and the destroy (it wrote its
                 * fences, a client may have seen it done on its fence page)
                 * is reported done, not failed, and what ended after it is
                 * not run again. */
                gpu_queue_collect(c, q, cb, userdata);
                if (q->inflight_count == 0 || inflight_at(q, 0)->seq != seq) {
                        r = queue_recover(c, q, q->completed, 0, cb, userdata);
                        if (r < 0)
                                log_debug_errno(r, "gpu: recreating queue %u failed: %m", q->index);
                        return 0;
                }
                fail_head(c, q, error, 0, reason[0] ? reason : NULL, cb, userdata);
        }
        return 1;
}
