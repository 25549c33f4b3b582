/* SPDX-License-Identifier: MIT */
/*
 * The SDMA engine's queue step (see sim-sdma.h). Pointers are bytes,
 * monotonic 64-bit; the ring index is ptr % ring_size (kfd-facts §3.3) and a
 * packet may wrap around the end of the ring. The doorbell value is the new
 * wptr, as the kernel writes the same value to the doorbell and RB_WPTR
 * (sdma_v5_2_ring_set_wptr).
 *
 * The queues of one engine take turns by a time quantum, as the hardware's do:
 * amdgpu turns on the engine's automatic context switch between queues with
 * a phase quantum of amdgpu_sdma_phase_quantum x 1K engine clocks (default
 * 32; sdma_v5_2.c sdma_v5_2_ctx_switch_enable(): SDMA0_CNTL.AUTO_CTXSW_ENABLE,
 * SDMA0_PHASE0/1/2_QUANTUM), and mid-command preemption (sdma_v5_2.c
 * sdma_v5_2_gfx_resume(): SDMA0_CNTL.MIDCMD_PREEMPT_ENABLE, "enable MCBP").
 * A queue's saved context holds the state of a command cut short: the SDMA
 * MQD of gfx10 has SDMAx_RLCx_MIDCMD_DATA0..10 and MIDCMD_CNTL (the kernel's
 * v10_structs.h, struct v10_sdma_mqd), so the switch may fall inside a
 * packet, and a long COPY_LINEAR or CONSTANT_FILL resumes where it stopped.
 * No public source gives the granularity inside a copy; here the engine's
 * clock is counted in the bytes it moves, QUANTUM_BYTES a quantum (32K
 * clocks at 8 bytes a clock, this simulator's choice: a 2 MiB piece takes
 * ~0.27 ms here, so a quantum is ~33 us, as 32K clocks are at ~1 GHz). When
 * a queue's quantum runs out and another queue of its engine has work
 * (packets or a doorbell not yet looked at), the engine leaves it — between
 * packets, or inside a copy or fill with the bytes done kept in
 * SimQueue.midcmd_done — and comes back after the others' turns; with none
 * waiting, the queue keeps the engine for another quantum. A step also ends
 * after MAX_PACKETS_PER_STEP packets. The device lock is held per packet, not per step (sim-engine.h): it
 * is dropped between packets, and a COPY or CONST_FILL of UNLOCKED_BYTES or
 * more runs without it, holding a reference on the BOs it touches, so the
 * other engines report completions and ioctls go on while it moves memory.
 *
 * The read pointer is the fetcher's. The engine reads the ring ahead of the
 * packet it executes, up to FETCH_BYTES from that packet's start (never past
 * the doorbell's wptr), into a copy of its own, and writes the rptr word back
 * for what it has read before it executes it: the word says which ring
 * bytes the engine no longer needs, not which packets have run. No public
 * source promises more (kfd-facts §3.3, §7.7): the kernel judges an SDMA
 * ring's work done only by the fence values it writes (amdgpu_fence_process
 * reads the fence's write-back word), and uses rptr for ring space. So a
 * driver that took "rptr is past a FENCE" for "the FENCE's write has landed"
 * is caught here, as it would fail on a prefetching engine. A long packet
 * (a burst NOP, a WRITE_LINEAR with its data) is read whole, with what the
 * doorbell published after it up to a ring from its start.
 *
 * Failures:
 *  - a COPY/RECT/FILL/WRITE/FENCE/POLL/TIMESTAMP/ATOMIC access outside every GPU-mapped BO
 *    of the process is a VM fault: every queue of the process is evicted
 *    (sim_process_vm_fault), and every MEMORY event of the process is set
 *    with {NotPresent = 1, va, gpu_id}. va is the faulting address rounded
 *    down to its 4 KiB page, as kfd_signal_vm_fault_event reports
 *    (info->page_addr << PAGE_SHIFT). When depends on the fault order
 *    (sim-ih.h). Event-first: at once, the queue stopped at the faulting
 *    packet (the rptr word keeps what the fetcher had read, which may lie
 *    past it: where rptr stopped does not name the packet). Fence-first (the
 *    default): the packet ran against amdgpu's dummy page (gfx10 runs without
 *    fault retry; its writes there are lost, and a COPY_LINEAR whose source
 *    faulted writes the dummy page's zeros over a mapped destination — all of
 *    it: a real engine would copy the mapped source pages; other packets'
 *    mapped parts are not written either) and is retired, and the fault waits
 *    in the interrupt handler's queue while the queue runs on.
 * Other failures never skip a packet:
 *  - an unknown or malformed packet (decoder -EBADMSG), a doorbell wptr that
 *    is not dword aligned or runs more than a ring ahead of what the engine
 *    has read (or behind it), or a
 *    POLL_REGMEM whose finite RETRY_COUNT runs out: the queue stops at that
 *    packet (its record names where), and no event is set (kfd-facts §7.2: the kernel raises none for
 *    a bad packet; the job never completes); the simulator records why for
 *    KfdOps.exception_info. Retries are counted per engine polling pass.
 * A stopped queue stays stopped until DESTROY_QUEUE; the queues of an evicted
 * process never run again.
 *
 * Register polls (MEM_POLL = 0, e.g. the kernel's HDP flush sequence) have
 * no register to wait for in the simulator and complete at once.
 *
 * Caches (sim-cache.h): COPY, CONST_FILL and WRITE read and write through the
 * GL2 (VRAM is seen as the GL2 holds it; what they write stays there until a
 * GCR_REQ with GL2_WB, or a RELEASE_MEM or ACQUIRE_MEM with it on a compute
 * queue); GCR_REQ acts on the whole GL2 (GL2_WB, GL2_INV) and on the process's
 * instruction cache (GLI_INV); COPY_LINEAR_RECT reads and writes through it
 * as COPY does; FENCE, TIMESTAMP, POLL_REGMEM and ATOMIC go to memory (MTYPE
 * UC). A LOOP ATOMIC (compare-swap) whose compare fails waits as a
 * POLL_REGMEM does. The HDP flush page is read before each pass over a queue.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim-atomic.h"
#include "sim-device.h"
#include "sim-dma-move.h"
#include "sim-engine.h"
#include "sim-events.h"
#include "sim-ih.h"
#include "sim-memory.h"
#include "sim-process.h"
#include "sim-queue.h"
#include "sim-sdma-decode.h"
#include "sim-sdma.h"
#include "util/log.h"
#include "util/macro.h"

#define MAX_PACKETS_PER_STEP 64u
#define QUANTUM_BYTES (256u << 10)
#define UNLOCKED_BYTES (64u << 10)
#define GATHER_DWORDS 16u
#define FETCH_BYTES 256u
#define POLL_RETRY_FOREVER 0xFFFu

typedef enum ExecResult {
        EXEC_DONE,
        EXEC_RETRY,
        EXEC_FAULT,
        EXEC_ERROR,
        EXEC_SWITCH, /* the quantum ran out inside the packet: another queue's turn */
} ExecResult;

uint64_t sim_gpu_clock_counter(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
        /* 100 MHz: one tick per 10 ns. */
        return ((uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec) / 10;
}

static void stop_queue(SimQueue *q) {
        q->stopped = true;
        q->poll_tries = 0;
}

static void fail_fault(SimQueue *q, uint64_t va) {
        log_debug("sim: SDMA queue %u: GPU VM fault at 0x%llx, queue stopped at ring byte 0x%llx",
                  q->id, (unsigned long long) va, (unsigned long long) q->rptr);
        stop_queue(q);
        sim_ih_vm_fault(q, va & ~(uint64_t) (PAGE_SIZE_4K - 1));
}

static void fail_error(SimQueue *q, const char *reason) {
        char text[SIM_EXCEPTION_TEXT];

        snprintf(text, sizeof text, "SDMA: %s (packet at ring byte 0x%llx)", reason ? reason : "bad packet",
                 (unsigned long long) q->rptr);
        log_debug("sim: SDMA queue %u: %s, queue stopped", q->id, text);
        stop_queue(q);
        sim_events_queue_stopped(q->process, q->id, text);
}

/* bytes of a fill. A byte fill is a dword fill of the byte four times (the
 * byte count of either is a multiple of 4: the decoder's check; so is every
 * part of one the quantum cuts). */
static void fill(uint8_t *dst, const SimSdmaPacket *pk, uint64_t bytes) {
        uint32_t pattern = pk->fill.data;

        if (pk->fill.fillsize == SDMA_CONSTANT_FILL_BYTE)
                pattern = (pattern & 0xFF) * 0x01010101u;
        sim_dma_fill32(dst, pattern, bytes);
}

/* Whether q is the only SDMA queue of its GPU with packets to run
 * (locked): a bulk move then delays no other queue's work. A queue whose
 * doorbell was rung since its engine last looked has work too (an
 * engine's arbiter sees doorbells as they are rung). */
static bool only_busy_queue(const SimQueue *q) {
        const SimGpu *g = q->pdd->gpu;

        for (unsigned i = 0; i < SIM_MAX_SDMA_SLOTS; i++) {
                SimQueue *o = g->sdma_slots[i];
                if (o && o != q && !o->stopped &&
                    (o->rptr != o->wptr || sim_queue_load_doorbell(o) != o->doorbell_seen))
                        return false;
        }
        return true;
}

static bool queue_runnable(const SimQueue *q) {
        return !q->stopped && !q->destroying && !q->process->evicted;
}

/* Whether another queue of q's engine has work for it (locked): packets to
 * run, or a doorbell rung since the engine last looked. Its arbiter then
 * switches when q's quantum runs out. */
static bool engine_has_other_work(const SimQueue *q) {
        for (SimQueue *o = q->engine ? q->engine->queues : NULL; o; o = o->engine_next)
                if (o != q && queue_runnable(o) &&
                    (o->rptr != o->wptr || sim_queue_load_doorbell(o) != o->doorbell_seen))
                        return true;
        return false;
}

/* A copy (src != NULL) or a fill of dst: bytes of a packet of packet_bytes.
 * A large one runs without the device lock: the engine pins q, a reference
 * pins each BO, so neither UNMAP nor FREE can pull the memory away meanwhile
 * (it takes effect for later packets, as on the real VM after a TLB flush).
 * Locked on entry and return. */
static void move_bytes(SimQueue *q, const SimSdmaPacket *pk, uint64_t dst_va, uint8_t *dst, uint64_t src_va,
                       const uint8_t *src, uint64_t bytes, uint64_t packet_bytes) {
        SimProcess *p = q->process;
        SimBo *dst_bo = NULL, *src_bo = NULL;
        bool bulk = packet_bytes >= SIM_ENGINE_BULK_BYTES && only_busy_queue(q);

        if (bytes >= UNLOCKED_BYTES) {
                dst_bo = sim_bo_ref(sim_vm_lookup(q->pdd, dst_va)->bo);
                if (src)
                        src_bo = sim_bo_ref(sim_vm_lookup(q->pdd, src_va)->bo);
                pthread_mutex_unlock(&p->device->lock);
        }
        sim_engine_set_bulk(bulk);
        if (src)
                sim_dma_copy(dst, src, bytes);
        else
                fill(dst, pk, bytes);
        if (dst_bo) {
                pthread_mutex_lock(&p->device->lock);
                sim_bo_unref(src_bo);
                sim_bo_unref(dst_bo);
        }
}

/* The GPU's view (sim-cache.h: through the GL2 for VRAM) of [va, va + len),
 * which sim_vm_access() accepted; the BO and offset it lies at. */
static uint8_t *gpu_view(SimPdd *vm, uint64_t va, uint64_t len, bool write, bool pin, SimBo **ret_bo,
                         uint64_t *ret_off) {
        SimMem *m = sim_vm_lookup(vm, va);

        *ret_bo = m->bo;
        *ret_off = va - m->va;
        return sim_cache_view(m->bo, va - m->va, len, write, pin);
}

/* Fence-first (sim-ih.h): the faulting packet ran against the dummy page (see
 * the top) and is retired; the fault waits in the interrupt handler's queue. */
static void run_past_fault(SimQueue *q, const SimSdmaPacket *pk, uint64_t va) {
        uint64_t fault_va, off;
        uint8_t *dst;
        SimBo *bo;

        log_debug("sim: SDMA queue %u: GPU VM fault at 0x%llx by the packet at ring byte 0x%llx; the queue runs on",
                  q->id, (unsigned long long) va, (unsigned long long) q->rptr);
        sim_ih_vm_fault(q, va & ~(uint64_t) (PAGE_SIZE_4K - 1));
        if (pk->op != SDMA_OP_COPY || pk->sub_op == SDMA_SUBOP_COPY_LINEAR_RECT ||
            sim_vm_access_bulk_write(q->pdd, pk->copy.dst, pk->copy.bytes, &dst, &fault_va) < 0)
                return;
        /* The source faulted and the destination is mapped: what the engine
         * read there was the dummy page, zeros here. */
        dst = gpu_view(q->pdd, pk->copy.dst, pk->copy.bytes, true, true, &bo, &off);
        memset(dst, 0, pk->copy.bytes);
        sim_cache_unpin(bo, off, pk->copy.bytes);
}

/* Part of a copy (src_va != 0 with bytes to read) or a fill: [dst_va,
 * dst_va + bytes), through the GL2; the destination's pages stay pinned
 * while the bytes move. Each part is translated when the engine reaches it,
 * so a packet that runs out of its BO faults there, with the parts before it
 * written, as a streaming engine leaves them. */
static ExecResult move_part(SimQueue *q, const SimSdmaPacket *pk, uint64_t dst_va, uint64_t src_va, uint64_t bytes,
                            uint64_t packet_bytes, uint64_t *fault_va) {
        uint8_t *src = NULL, *dst;
        uint64_t soff, doff;
        SimBo *sbo, *dbo;

        if ((pk->op == SDMA_OP_COPY && sim_vm_access(q->pdd, src_va, bytes, &src, fault_va) < 0) ||
            sim_vm_access_bulk_write(q->pdd, dst_va, bytes, &dst, fault_va) < 0)
                return EXEC_FAULT;
        if (pk->op == SDMA_OP_COPY)
                src = gpu_view(q->pdd, src_va, bytes, false, false, &sbo, &soff);
        /* Every byte of the destination is written before the unpin. */
        {
                SimMem *m = sim_vm_lookup(q->pdd, dst_va);
                dbo = m->bo;
                doff = dst_va - m->va;
                dst = sim_cache_view_overwrite(dbo, doff, bytes);
        }
        sim_bo_ref(dbo); /* the unpin below comes after an unlocked move */
        move_bytes(q, pk, dst_va, dst, src_va, src, bytes, packet_bytes);
        sim_cache_unpin(dbo, doff, bytes);
        sim_bo_unref(dbo);
        return EXEC_DONE;
}

/* A COPY_LINEAR (src_va != 0) or a CONSTANT_FILL of bytes at dst_va, from
 * where the queue's last turn left it (q->midcmd_done), for what is left of
 * the turn's quantum (*quantum; see the top): EXEC_SWITCH when the quantum
 * ran out inside it and another queue of the engine waits, the bytes done
 * kept for the queue's next turn. */
static ExecResult move(SimQueue *q, const SimSdmaPacket *pk, uint64_t dst_va, uint64_t src_va, uint64_t bytes,
                       uint64_t *quantum, uint64_t *fault_va) {
        /* The packet comes from the engine's own copy of the ring, which a
         * client cannot rewrite once read: it is the one the bytes done
         * belong to. */
        assert(q->midcmd_done < bytes);
        for (;;) {
                uint64_t done = q->midcmd_done, part = MIN(bytes - done, *quantum);
                ExecResult x = move_part(q, pk, dst_va + done, src_va + done, part, bytes, fault_va);

                if (x != EXEC_DONE)
                        return x;
                q->midcmd_done += part;
                *quantum -= part;
                if (q->midcmd_done == bytes) {
                        q->midcmd_done = 0;
                        return EXEC_DONE;
                }
                if (!queue_runnable(q))
                        return EXEC_RETRY; /* stopped, destroyed or evicted meanwhile: no further */
                if (*quantum == 0) {
                        if (engine_has_other_work(q))
                                return EXEC_SWITCH;
                        *quantum = QUANTUM_BYTES; /* no one waits: the queue keeps the engine */
                }
        }
}

/* COPY_LINEAR_RECT: row by row, through the GL2 as COPY_LINEAR, each row
 * translated when it is reached: a row outside the VM faults there, with the
 * rows before it written, as an engine that streams the rectangle would
 * leave them. Rows are moved with memmove, so overlapping source and
 * destination copy as a CPU doing the same rows in the same order would.
 * The device lock is let go every RECT_YIELD_BYTES or RECT_YIELD_ROWS rows,
 * so that a rectangle of many rows (up to 2^14 x 2^11 of them) does not hold
 * up the other engines and the ioctls; a queue that is stopped, destroyed or
 * evicted meanwhile goes no further. */
#define RECT_YIELD_BYTES (64u << 10)
#define RECT_YIELD_ROWS 4096u

static uint64_t rect_row_va(uint64_t base, uint32_t x, uint32_t y, uint32_t z, unsigned element, uint64_t pitch,
                            uint64_t slice) {
        return base + ((uint64_t) x << element) + (uint64_t) y * pitch + (uint64_t) z * slice;
}

static ExecResult exec_rect(SimQueue *q, const SimSdmaPacket *pk, uint64_t *fault_va) {
        const typeof(pk->rect) *r = &pk->rect;
        uint64_t row = (uint64_t) r->x << r->element, soff, doff, since_bytes = 0;
        unsigned since_rows = 0;
        uint8_t *host;
        SimBo *sbo, *dbo;

        for (uint32_t z = 0; z < r->z; z++)
                for (uint32_t y = 0; y < r->y; y++) {
                        uint64_t s = rect_row_va(r->src, r->src_x, r->src_y + y, r->src_z + z, r->element,
                                                 r->src_pitch, r->src_slice);
                        uint64_t d = rect_row_va(r->dst, r->dst_x, r->dst_y + y, r->dst_z + z, r->element,
                                                 r->dst_pitch, r->dst_slice);
                        if (sim_vm_access(q->pdd, s, row, &host, fault_va) < 0 ||
                            sim_vm_access_write(q->pdd, d, row, &host, fault_va) < 0)
                                return EXEC_FAULT;
                        const uint8_t *src = gpu_view(q->pdd, s, row, false, false, &sbo, &soff);
                        uint8_t *dst = gpu_view(q->pdd, d, row, true, false, &dbo, &doff);
                        memmove(dst, src, row);
                        since_bytes += row;
                        if (++since_rows >= RECT_YIELD_ROWS || since_bytes >= RECT_YIELD_BYTES) {
                                since_rows = 0;
                                since_bytes = 0;
                                sim_engine_yield_lock(q);
                                if (!queue_runnable(q))
                                        return EXEC_RETRY;
                        }
                }
        return EXEC_DONE;
}

/* ATOMIC: on memory (as FENCE: MTYPE UC), atomic with respect to the CPU. A
 * LOOP compare-swap whose compare fails is tried again on a later pass, as
 * POLL_REGMEM is. */
static ExecResult exec_atomic(SimQueue *q, const SimSdmaPacket *pk, uint64_t *fault_va) {
        int r = sim_vm_atomic(q->pdd, pk->atomic.op, pk->atomic.addr, pk->atomic.src, pk->atomic.cmp, fault_va);

        if (r < 0)
                return EXEC_FAULT;
        return r > 0 && pk->atomic.loop ? EXEC_RETRY : EXEC_DONE;
}

static ExecResult execute(SimQueue *q, const SimSdmaPacket *pk, uint64_t *quantum, uint64_t *fault_va,
                          const char **reason) {
        SimProcess *p = q->process;
        uint8_t *src, *dst;
        uint64_t off;
        SimBo *bo;

        switch (pk->op) {
        case SDMA_OP_NOP:
                return EXEC_DONE;

        case SDMA_OP_GCR_REQ:
                /* The whole cache, whatever the range (more than asked is
                 * what a cache may always do). Writing back a bulk move's
                 * pages is that move's work, and runs at its priority
                 * (sim_engine_set_bulk()): ROCr splits a 256 MiB copy into
                 * 64 packets of 4 MiB - 32 bytes and one of 2 KiB, so the
                 * queue's last move is not bulk, and at 10 nice steps down
                 * the write-back of the copy took 18-80 ms here where the
                 * copy took 20 (bench-hip copy, load 6). */
                if ((pk->gcr.control & SIM_GCR_GL2_WB) &&
                    sim_cache_gl2_dirty_bytes(q->pdd->gpu) >= SIM_ENGINE_BULK_BYTES && only_busy_queue(q))
                        sim_engine_set_bulk(true);
                sim_cache_gl2(q->pdd->gpu, pk->gcr.control & SIM_GCR_GL2_WB, pk->gcr.control & SIM_GCR_GL2_INV);
                if (pk->gcr.control & SIM_GCR_GLI_INV_MASK)
                        sim_line_cache_invalidate(p->icache);
                if (pk->gcr.control & SIM_GCR_GLK_INV)
                        sim_line_cache_invalidate(p->kcache);
                sim_vcache_invalidate(p, pk->gcr.control);
                return EXEC_DONE;

        case SDMA_OP_COPY:
                if (pk->sub_op == SDMA_SUBOP_COPY_LINEAR_RECT)
                        return exec_rect(q, pk, fault_va);
                return move(q, pk, pk->copy.dst, pk->copy.src, pk->copy.bytes, quantum, fault_va);

        case SDMA_OP_ATOMIC:
                return exec_atomic(q, pk, fault_va);

        case SDMA_OP_WRITE:
                if (sim_vm_access_write(q->pdd, pk->write.dst, (uint64_t) pk->write.n_data * 4, &dst, fault_va) < 0)
                        return EXEC_FAULT;
                dst = gpu_view(q->pdd, pk->write.dst, (uint64_t) pk->write.n_data * 4, true, false, &bo, &off);
                memcpy(dst, pk->write.data, (size_t) pk->write.n_data * 4);
                return EXEC_DONE;

        case SDMA_OP_CONST_FILL:
                return move(q, pk, pk->fill.dst, 0, pk->fill.bytes, quantum, fault_va);

        case SDMA_OP_FENCE:
                if (sim_vm_access_write(q->pdd, pk->fence.addr, 4, &dst, fault_va) < 0)
                        return EXEC_FAULT;
                __atomic_store_n((uint32_t *) (void *) dst, pk->fence.data, __ATOMIC_RELEASE);
                return EXEC_DONE;

        case SDMA_OP_TRAP:
                /* SDMA_TRAP: kfd_signal_event_interrupt(pasid, context_id0 & 0xfffffff, 28). */
                sim_ih_interrupt(q->pdd->gpu, p, pk->trap.context, 28);
                return EXEC_DONE;

        case SDMA_OP_TIMESTAMP:
                if (sim_vm_access_write(q->pdd, pk->timestamp.addr, 8, &dst, fault_va) < 0)
                        return EXEC_FAULT;
                __atomic_store_n((uint64_t *) (void *) dst, sim_gpu_clock_counter(), __ATOMIC_RELEASE);
                return EXEC_DONE;

        case SDMA_OP_POLL_REGMEM: {
                uint32_t v;

                if (!pk->poll.mem_poll)
                        return EXEC_DONE;
                if (sim_vm_access(q->pdd, pk->poll.addr, 4, &src, fault_va) < 0)
                        return EXEC_FAULT;
                v = __atomic_load_n((uint32_t *) (void *) src, __ATOMIC_ACQUIRE);
                if (sim_queue_compare(pk->poll.func, v & pk->poll.mask, pk->poll.value)) {
                        q->poll_tries = 0;
                        return EXEC_DONE;
                }
                if (pk->poll.retry_count != POLL_RETRY_FOREVER && ++q->poll_tries > pk->poll.retry_count) {
                        *reason = "POLL_REGMEM retry count exhausted";
                        return EXEC_ERROR;
                }
                return EXEC_RETRY;
        }
        default:
                *reason = "packet decoded but not executable";
                return EXEC_ERROR;
        }
}

/* The fetcher: reads the ring into the engine's copy until it holds `ahead`
 * bytes from rptr on, and writes the rptr word back for it. Differences
 * only: the pointers may wrap past 2^64. */
static int fetch(SimQueue *q, uint64_t ahead) {
        const uint8_t *ring = sim_queue_ring(q);
        uint64_t mask = q->ring_size - 1, have = q->fetched - q->rptr;

        if (!q->fetch_copy) {
                q->fetch_copy = malloc(q->ring_size);
                if (!q->fetch_copy)
                        return -ENOMEM;
        }
        if (ahead <= have)
                return 0;
        for (uint64_t left = ahead - have; left > 0;) {
                uint64_t at = q->fetched & mask, n = MIN(left, q->ring_size - at);
                memcpy(q->fetch_copy + at, ring + at, n);
                q->fetched += n;
                left -= n;
        }
        sim_queue_store_rptr(q, q->fetched);
        return 0;
}

/* n dwords from rptr on, out of what the fetcher read. */
static void gather(const SimQueue *q, uint32_t *buf, size_t n) {
        const uint32_t *copy = (const uint32_t *) (const void *) q->fetch_copy;
        uint64_t mask = q->ring_size / 4 - 1, start = q->rptr / 4;

        for (size_t i = 0; i < n; i++)
                buf[i] = copy[(start + i) & mask];
}


static uint64_t packet_bytes(const SimSdmaPacket *pk) {
        if (pk->op == SDMA_OP_COPY && pk->sub_op == SDMA_SUBOP_COPY_LINEAR_RECT)
                return ((uint64_t) pk->rect.x << pk->rect.element) * pk->rect.y * pk->rect.z;
        return pk->op == SDMA_OP_COPY ? pk->copy.bytes : pk->op == SDMA_OP_CONST_FILL ? pk->fill.bytes : 0;
}

/* A COPY_LINEAR or CONSTANT_FILL: what move() runs, by the quantum. */
static bool is_move(const SimSdmaPacket *pk) {
        return (pk->op == SDMA_OP_COPY && pk->sub_op != SDMA_SUBOP_COPY_LINEAR_RECT) || pk->op == SDMA_OP_CONST_FILL;
}

static int step(SimQueue *q) {
        int result = SIM_STEP_IDLE;
        uint64_t db, quantum = QUANTUM_BYTES;

        if (!queue_runnable(q))
                return SIM_STEP_IDLE;
        db = sim_queue_load_doorbell(q);
        /* After the doorbell: a flush stored before it is seen now. */
        sim_cache_poll_hdp(q->pdd->gpu);
        if (db != q->doorbell_seen) {
                q->doorbell_seen = db;
                q->wptr = db;
        }

        for (unsigned n = 0; n < MAX_PACKETS_PER_STEP && q->rptr != q->wptr; n++) {
                uint64_t avail = q->wptr - q->rptr, fault_va = 0;
                uint32_t small[GATHER_DWORDS];
                _cleanup_free_ uint32_t *big = NULL;
                const char *reason = NULL;
                size_t avail_dw, n_dw;
                SimSdmaPacket pk;
                ExecResult x;
                int r;

                if (n > 0) {
                        /* The lock per packet: let the others in between two. */
                        sim_engine_yield_lock(q);
                        if (!queue_runnable(q))
                                return SIM_STEP_PROGRESS;
                }
                if (quantum == 0) {
                        if (engine_has_other_work(q))
                                break; /* the quantum is over: the others' turn */
                        quantum = QUANTUM_BYTES;
                }
                /* The ring's space is the fetcher's: a wptr up to a ring
                 * ahead of what it has read is fine (and may be more than a
                 * ring ahead of the packet it executes). */
                if (q->wptr - q->fetched > q->ring_size || avail % 4 || q->wptr % 4) {
                        fail_error(q, "doorbell wptr not dword aligned or beyond the ring");
                        return SIM_STEP_PROGRESS;
                }
                /* Out of memory for the copy or a long packet: the next pass retries. */
                if (fetch(q, MIN(avail, (uint64_t) FETCH_BYTES)) < 0)
                        return result == SIM_STEP_PROGRESS ? result : SIM_STEP_WAITING;
                /* No packet is longer than the ring; the copy holds a ring. */
                avail = MIN(avail, (uint64_t) q->ring_size);
                avail_dw = avail / 4;
                n_dw = MIN(avail_dw, (size_t) GATHER_DWORDS); /* FETCH_BYTES holds that many */
                gather(q, small, n_dw);
                r = sim_sdma_decode(small, n_dw, &pk, &reason);
                if (r == -EAGAIN && n_dw < avail_dw) {
                        /* A long packet (burst NOP, WRITE_LINEAR): read and unwrap all of it. */
                        big = malloc(avail_dw * sizeof *big);
                        if (!big || fetch(q, avail) < 0)
                                return result == SIM_STEP_PROGRESS ? result : SIM_STEP_WAITING;
                        gather(q, big, avail_dw);
                        r = sim_sdma_decode(big, avail_dw, &pk, &reason);
                }
                if (r == -EAGAIN)
                        /* The packet is not all published yet. */
                        return result == SIM_STEP_PROGRESS ? result : SIM_STEP_WAITING;
                if (r < 0) {
                        fail_error(q, reason);
                        return SIM_STEP_PROGRESS;
                }

                if (packet_bytes(&pk) >= UNLOCKED_BYTES)
                        /* A long packet: the interrupts before it are not held up by it. */
                        sim_events_deliver(q->process->device, true);
                x = execute(q, &pk, &quantum, &fault_va, &reason);
                switch (x) {
                case EXEC_DONE:
                        q->rptr += (uint64_t) pk.n_dwords * 4;
                        if (!is_move(&pk)) /* a move counted its bytes itself */
                                quantum -= MIN(quantum, packet_bytes(&pk));
                        result = SIM_STEP_PROGRESS;
                        break;
                case EXEC_SWITCH:
                        return SIM_STEP_PROGRESS;
                case EXEC_RETRY:
                        return result == SIM_STEP_PROGRESS ? result : SIM_STEP_WAITING;
                case EXEC_FAULT:
                        if (!sim_ih_fence_first(q->process->device)) {
                                fail_fault(q, fault_va);
                                return SIM_STEP_PROGRESS;
                        }
                        run_past_fault(q, &pk, fault_va);
                        q->midcmd_done = 0;
                        q->rptr += (uint64_t) pk.n_dwords * 4;
                        result = SIM_STEP_PROGRESS;
                        break;
                case EXEC_ERROR:
                        fail_error(q, reason);
                        return SIM_STEP_PROGRESS;
                }
        }
        return result;
}

int sim_sdma_queue_step(SimQueue *q) {
        int r = step(q);

        /* The write-back timer: the word says the fetcher's position again
         * after a pass, whatever a packet wrote there meanwhile. */
        if (r != SIM_STEP_IDLE)
                sim_queue_store_rptr(q, q->fetched);
        return r;
}
