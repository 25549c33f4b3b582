/* SPDX-License-Identifier: MIT */
/*
 * The CP engine's queue step for PM4 compute queues (see sim-cp.h).
 *
 * Pointers (kfd-facts §1.7, §6 #4): wptr and the doorbell are 64-bit
 * monotonic dword counts ("PM4/CP counts in dwords", kfd_mqd_manager_v10.c);
 * the ring index is ptr % (ring_size / 4), and a packet may wrap around the
 * end of the ring, as the CP reads the ring modulo its size. The doorbell
 * value is the new wptr. The engine keeps its read position as a monotonic
 * count too, but writes back what the CP writes (kfd-facts §7.7): a 32-bit
 * position inside the ring, in dwords, and only every 2^RPTR_BLOCK_SIZE
 * qwords — RPTR_BLOCK_SIZE 5 in the kernel's MQD (kfd_mqd_manager_v10.c
 * init_mqd), so the report is the position rounded down to 64 dwords, modulo
 * the ring. A driver that reads it as a growing count jams after one trip
 * round the ring. While an indirect buffer runs the position stays at the
 * ring's INDIRECT_BUFFER packet. A doorbell more than a ring ahead of rptr
 * (or behind it) stops the queue with a HW exception; in dword units no
 * doorbell value is misaligned.
 *
 * Execution is in order: a packet starts when the one before it has finished,
 * so RELEASE_MEM writes after all earlier work of the queue, EVENT_WRITE
 * CS_PARTIAL_FLUSH only has its fields checked, and WAIT_REG_MEM (32 or 64 bits)
 * on memory, like an ATOMIC_MEM compare-swap with COMMAND 1, re-polls on the next engine pass
 * without blocking the engine thread (register waits complete at once, as the
 * SDMA model's register polls do; the simulator has no registers to wait on).
 * Up to MAX_PACKETS_PER_STEP packets run per step, and a step ends after a
 * dispatch, so the queues of one pipe share it. The device lock is held per
 * packet (sim-engine.h): the step drops it between packets.
 *
 * DISPATCH_DIRECT builds a SimIsaDispatch from the queue's SH registers
 * (kfd-facts §2.3; Mesa si_compute.c si_emit_dispatch_packets):
 *   entry = (COMPUTE_PGM_HI[7:0]:COMPUTE_PGM_LO) << 8; RSRC1/2/3 verbatim;
 *   s0.. = COMPUTE_USER_DATA_0..(RSRC2.USER_SGPR_COUNT - 1), at most 16;
 *   workgroup size = NUM_THREAD_X/Y/Z.NUM_THREAD_FULL [15:0]; with
 *   DISPATCH_INITIATOR.PARTIAL_TG_EN the last workgroup of each dimension has
 *   NUM_THREAD_PARTIAL [31:16] work-items ("If no partial_block, these should
 *   be an entire block size, not 0", so 0 is refused);
 *   workgroup IDs run from COMPUTE_START_X/Y/Z (0 with FORCE_START_AT_000) up
 *   to DIM - 1: DIM_X/Y/Z are end values, not counts, when START is used
 *   (Mesa radv_emit_dispatch_packets "The blocks in the packet are not counts
 *   but end values");
 *   CS_W32_EN [15] selects wave32, its absence wave64 (gfx10 runs both; the
 *   wave size comes from the initiator, not from the code);
 *   LDS = RSRC2.LDS_SIZE [23:15] x 512 bytes;
 *   scratch (RSRC2.SCRATCH_EN): COMPUTE_TMPRING_SIZE.WAVESIZE [24:12] in
 *   1 KiB units per wave (gfx10), so wave w of a workgroup gets the private
 *   segment wave byte offset (slot x waves per workgroup + w) x WAVESIZE x
 *   1024, where slot numbers the workgroups running at once (the device's
 *   interpreter pool runs a dispatch's workgroups on several threads), and
 *   WAVESIZE x 1024 / (32 or 64) bytes per lane; WAVES [11:0] must cover one
 *   workgroup's waves of that size, and bounds how many run at once. The base address
 *   reaches the kernel through the private segment buffer V# the daemon puts
 *   in the user SGPRs, as on gfx10 hardware, which has no scratch base
 *   register.
 *
 * Caches (sim-cache.h): ACQUIRE_MEM's GCR_CNTL invalidates the process's
 * instruction cache (GLI_INV), scalar data cache (GLK_INV), vector L0
 * (GLV_INV) and GL1 (GL1_INV) and writes back (GL2_WB) and invalidates
 * (GL2_INV) the GL2; RELEASE_MEM's GL2_WB/GL2_INV
 * act at the end of the pipe, before its write. A dispatch reads and writes
 * VRAM through the GL2, fetches code through the instruction cache, runs
 * its scalar loads through the scalar data cache and its vector loads through
 * the L0 and GL1. The other packets' memory
 * accesses go to memory. The HDP flush page is read before each pass over a
 * queue.
 *
 * The interpreter runs WITHOUT the device lock, so a long dispatch stalls
 * neither ioctls, WAIT_EVENTS wake-ups nor the other engines. Its memory is a
 * snapshot of the process's GPU VM taken when the dispatch starts, holding a
 * reference on every mapped BO (sim_vm_snapshot_new): UNMAP and FREE may race
 * with the dispatch without pulling memory from under it, and translation
 * takes no lock. SimCpState.busy pins the queue; DESTROY_QUEUE and teardown
 * set SimCpState.cancel, which the interpreter polls between instruction
 * slices, and wait for busy to clear before freeing anything. Every dispatch
 * has a finite instruction budget (SimOptions.max_dispatch_wave_instructions),
 * so a kernel that loops forever ends as a HW exception.
 *
 * Failures:
 *  - an access outside every GPU-mapped BO of the process, by a packet or by
 *    the shader, is a VM fault: every queue of the process is evicted (a
 *    dispatch running on another of them is cancelled and never completes)
 *    and every MEMORY event of the process is set with {NotPresent, va
 *    rounded down to its page, gpu_id}, as the SDMA engine does. When
 *    depends on the fault order (sim-ih.h). Event-first: at once, the queue
 *    stopped at the packet (rptr written back pointing at it; for a packet
 *    inside an indirect buffer, at the ring's INDIRECT_BUFFER packet).
 *    Fence-first (the default): the access goes to the dummy page, as on
 *    gfx10 without fault retry (dispatch_fault_to_dummy()) — a wave's load
 *    reads zeros (or what a faulting store of the dispatch wrote there) and
 *    the wave runs on; a packet's write is lost, its read yields nothing and
 *    the packet is retired as if run — and the fault waits in the interrupt
 *    handler's queue while this queue runs on. The CP's own fetch of an
 *    indirect buffer, and an instruction fetch, are not sent there: the
 *    former stops the queue, the latter ends the dispatch (the simulator does
 *    not run the dummy page as code or packets).
 * Other failures never skip a packet; the queue stops with rptr written back
 * pointing at the packet:
 *  - a packet the decoder refuses, a documented feature the model does not
 *    have, a dispatch the interpreter cannot run (-EILSEQ, -ETIME, -EINVAL,
 *    -EDEADLK), or a RELEASE_MEM on a queue without an EOP buffer: the queue
 *    stops there and nothing else happens — no event, as the kernel raises
 *    none for an illegal instruction or a bad packet (kfd-facts §7.2): the job
 *    never completes, and only a timeout notices. The simulator keeps a
 *    record {queue id, text} for KfdOps.exception_info (words a real GPU does
 *    not give): the interpreter's message for a shader failure, the
 *    decoder's or the engine's reason with the packet's place for a packet.
 *
 * Interrupts: RELEASE_MEM INT_SEL 1 (interrupt only) and 2 (interrupt after
 * the write is confirmed) raise CP_END_OF_PIPE with INT_CTXID, which
 * kfd_int_process_v10.c hands to kfd_signal_event_interrupt(pasid, ctxid, 32),
 * through the interrupt handler's queue (sim-ih.h): after a fault raised
 * before it. A RELEASE_MEM whose write faults (fence-first) raises none.
 * INT_SEL 3 ("send data after write confirm") writes without an interrupt:
 * Mesa radv_cs_emit_write_event_eop uses it to "wait for write confirmation
 * before writing data, but don't send an interrupt". INT_SEL 4..6
 * (context-id and conditional interrupts) are not modelled.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isa/sim-isa.h"
#include "sim-atomic.h"
#include "sim-cp.h"
#include "sim-device.h"
#include "sim-engine.h"
#include "sim-events.h"
#include "sim-ih.h"
#include "sim-memory.h"
#include "sim-process.h"
#include "sim-queue.h"
#include "sim-sdma.h"
#include "util/log.h"
#include "util/macro.h"

#define MAX_PACKETS_PER_STEP 64u

/* COMPUTE_* registers, absolute dword offsets (kfd-facts §2.3; Mesa sid.h R_00B8xx / 4). */
#define COMPUTE_DISPATCH_INITIATOR 0x2E00u
#define COMPUTE_DIM_X 0x2E01u
#define COMPUTE_START_X 0x2E04u
#define COMPUTE_NUM_THREAD_X 0x2E07u
#define COMPUTE_PGM_LO 0x2E0Cu
#define COMPUTE_PGM_HI 0x2E0Du
#define COMPUTE_PGM_RSRC1 0x2E12u
#define COMPUTE_PGM_RSRC2 0x2E13u
#define COMPUTE_TMPRING_SIZE 0x2E18u
#define COMPUTE_PGM_RSRC3 0x2E28u
#define COMPUTE_USER_DATA_0 0x2E40u
#define COMPUTE_USER_DATA_COUNT 16u
#define SH(cp, reg) ((cp)->sh[(reg) - SIM_SH_REG_START])

/* COMPUTE_DISPATCH_INITIATOR bits (kfd-facts §2.3, gc register headers). */
#define CSI_COMPUTE_SHADER_EN (1u << 0)
#define CSI_PARTIAL_TG_EN (1u << 1)
#define CSI_FORCE_START_AT_000 (1u << 2)
#define CSI_ORDERED_APPEND_ENBL (1u << 3)
#define CSI_ORDERED_APPEND_MODE (1u << 4)
#define CSI_USE_THREAD_DIMENSIONS (1u << 5)
#define CSI_ORDER_MODE (1u << 6)
#define CSI_SCALAR_L1_INV_VOL (1u << 10)
#define CSI_VECTOR_L1_INV_VOL (1u << 11)
#define CSI_TUNNEL_ENABLE (1u << 13)
#define CSI_RESTORE (1u << 14)
#define CSI_CS_W32_EN (1u << 15)
/* Accepted and without effect here: wave launch order, L1 invalidation, tunneling. */
#define CSI_MODELLED (CSI_COMPUTE_SHADER_EN | CSI_PARTIAL_TG_EN | CSI_FORCE_START_AT_000 | CSI_ORDER_MODE | \
                      CSI_SCALAR_L1_INV_VOL | CSI_VECTOR_L1_INV_VOL | CSI_TUNNEL_ENABLE | CSI_CS_W32_EN)

/* Events (Mesa sid.h V_028A90_*). */
#define EVENT_INDEX_SAMPLE_FIRST 1u
#define EVENT_INDEX_SAMPLE_LAST 3u

typedef enum ExecResult {
        EXEC_DONE,       /* advance past the packet */
        EXEC_IB,         /* an indirect buffer was entered or chained to: no advance */
        EXEC_RETRY,      /* WAIT_REG_MEM not satisfied yet */
        EXEC_FAULT,      /* VM fault at Failure.fault_va */
        EXEC_ERROR,      /* HW exception with Failure.text */
        EXEC_CANCELLED,  /* the queue is being destroyed: touch nothing more */
} ExecResult;

typedef struct Failure {
        uint64_t fault_va;
        bool fetch;      /* the fault was the CP's own fetch (an indirect buffer) */
        bool verbatim;   /* text is complete (the interpreter's message) */
        char text[SIM_EXCEPTION_TEXT];
} Failure;

_printf_(2, 3) static ExecResult failf(Failure *f, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(f->text, sizeof f->text, fmt, ap);
        va_end(ap);
        return EXEC_ERROR;
}

static ExecResult fault(Failure *f, uint64_t va) {
        f->fault_va = va;
        return EXEC_FAULT;
}

int sim_cp_state_new(SimCpState **ret) {
        SimCpState *cp = calloc(1, sizeof *cp);

        if (!cp)
                return -ENOMEM;
        *ret = cp;
        return 0;
}

void sim_cp_state_free(SimQueue *q) {
        SimCpState *cp = q->cp;
        SimDevice *d = q->process->device;

        if (!cp)
                return;
        __atomic_store_n(&cp->cancel, 1, __ATOMIC_RELEASE);
        while (cp->busy)
                pthread_cond_wait(&d->cp_cond, &d->lock);
        free(cp);
        q->cp = NULL;
}

void sim_cp_preempt(SimQueue *q) {
        if (q->cp)
                __atomic_store_n(&q->cp->cancel, 1, __ATOMIC_RELEASE);
}

/* The CP's read-pointer report: block-granular, wrapped (see the top). */
#define RPTR_BLOCK_DW 64u

static void report_rptr(SimQueue *q) {
        uint64_t ring_dw = q->ring_size / 4;

        sim_queue_store_rptr32(q, (uint32_t) ((q->rptr & ~(uint64_t) (RPTR_BLOCK_DW - 1)) % ring_dw));
}

static void stop_queue(SimQueue *q) {
        q->stopped = true;
        q->cp->in_ib = false;
        report_rptr(q);
}

static void where(const SimQueue *q, char *buf, size_t size) {
        const SimCpState *cp = q->cp;

        if (cp->in_ib)
                snprintf(buf, size, "IB 0x%llx dword %u (ring dword 0x%llx)", (unsigned long long) cp->ib_va,
                         cp->ib_pos, (unsigned long long) q->rptr);
        else
                snprintf(buf, size, "ring dword 0x%llx", (unsigned long long) q->rptr);
}

/* A fault that stops the queue at the packet: any fault in event-first
 * order, the CP's own fetch of a packet in either. */
static void fail_fault(SimQueue *q, uint64_t va) {
        char at[96];

        where(q, at, sizeof at);
        log_debug("sim: compute queue %u: GPU VM fault at 0x%llx, queue stopped at %s", q->id,
                  (unsigned long long) va, at);
        stop_queue(q);
        sim_ih_vm_fault(q, va & ~(uint64_t) (PAGE_SIZE_4K - 1));
}

/* A packet's data access faulted. Fence-first: the access went to the dummy
 * page (see the top), the packet is retired and the queue runs on: true.
 * Event-first: the queue stops there (fail_fault): false. */
static bool run_past_fault(SimQueue *q, uint64_t va) {
        if (!sim_ih_fence_first(q->process->device)) {
                fail_fault(q, va);
                return false;
        }
        sim_ih_vm_fault(q, va & ~(uint64_t) (PAGE_SIZE_4K - 1));
        return true;
}

/* A HW exception for the packet at the current position (header, if known). */
static void fail_error(SimQueue *q, const char *reason, bool verbatim, const uint32_t *header) {
        char text[SIM_EXCEPTION_TEXT], at[96];

        where(q, at, sizeof at);
        if (verbatim)
                snprintf(text, sizeof text, "%s", reason);
        else if (header)
                snprintf(text, sizeof text, "%s (PM4 header 0x%08x at %s)", reason, *header, at);
        else
                snprintf(text, sizeof text, "%s (at %s)", reason, at);
        log_debug("sim: compute queue %u: %s; queue stopped", q->id, text);
        stop_queue(q);
        sim_events_queue_stopped(q->process, q->id, text);
}

static bool in_sh_window(uint64_t reg, uint64_t n) {
        return reg >= SIM_SH_REG_START && reg < SIM_SH_REG_END && n <= SIM_SH_REG_END - reg;
}

static ExecResult exec_write_data(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        const typeof(pk->write_data) *w = &pk->write_data;
        uint8_t *dst;

        /* gfx_v10_0 emits ENGINE_SEL(0) on compute rings: the MEC has no PFP/CE. */
        if (w->engine_sel != 0)
                return failf(f, "WRITE_DATA: ENGINE_SEL %u names an engine a compute queue does not have (ME only)",
                             w->engine_sel);
        if (w->dst_sel == SIM_WRITE_DATA_DST_GDS)
                return failf(f, "WRITE_DATA: DST_SEL 3 (GDS) is not modelled");
        if (w->dst_sel == SIM_WRITE_DATA_DST_REG) {
                uint64_t reg = w->addr & 0x3FFFF;
                if (!in_sh_window(reg, w->one_addr ? 1 : w->n))
                        return failf(f, "WRITE_DATA: register 0x%llx outside the SH window 0x2C00..0x2FFF is not writable "
                                        "from this model's user queue", (unsigned long long) reg);
                for (uint32_t i = 0; i < w->n; i++)
                        q->cp->sh[reg - SIM_SH_REG_START + (w->one_addr ? 0 : i)] = w->data[i];
                return EXEC_DONE;
        }
        if (sim_vm_access_write(q->pdd, w->addr, w->one_addr ? 4 : (uint64_t) w->n * 4, &dst, &f->fault_va) < 0)
                return EXEC_FAULT;
        for (uint32_t i = 0; i < w->n; i++)
                __atomic_store_n((uint32_t *) (void *) (dst + (w->one_addr ? 0 : 4 * i)), w->data[i], __ATOMIC_RELEASE);
        return EXEC_DONE;
}

static ExecResult exec_release_mem(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        const typeof(pk->release_mem) *m = &pk->release_mem;
        uint8_t *dst;

        /* The end-of-pipe write goes through the EOP queue the MQD describes
         * (cp_hqd_eop_base_addr); tinygrad: "this needs an EOP buffer on the
         * queue or it will NULL pointer". */
        if (!q->eop_mem)
                return failf(f, "RELEASE_MEM on a queue created without an EOP buffer");
        if (m->dst_sel > 1)
                return failf(f, "RELEASE_MEM: DST_SEL %u (queue write pointer) is not modelled", m->dst_sel);
        if (m->int_sel > SIM_RELEASE_MEM_DATA_AFTER_WRITE)
                return failf(f, "RELEASE_MEM: INT_SEL %u (context-id or conditional interrupt) is not modelled", m->int_sel);
        if (m->data_sel > SIM_RELEASE_MEM_DATA_GPU_CLOCK)
                return failf(f, "RELEASE_MEM: DATA_SEL %u (%s) is not modelled", m->data_sel,
                             m->data_sel == 4 ? "CP perfcounter" : "GDS");

        /* The cache actions come at the end of the pipe, before the write
         * (GCR bits [22:12] of DW1: GL2_INV 20, GL2_WB 21). */
        sim_cache_gl2(q->pdd->gpu, m->gcr & (1u << (21 - 12)), m->gcr & (1u << (20 - 12)));

        switch (m->data_sel) {
        case SIM_RELEASE_MEM_DATA_32:
                if (sim_vm_access_write(q->pdd, m->addr, 4, &dst, &f->fault_va) < 0)
                        return EXEC_FAULT;
                __atomic_store_n((uint32_t *) (void *) dst, (uint32_t) m->data, __ATOMIC_RELEASE);
                break;
        case SIM_RELEASE_MEM_DATA_64:
        case SIM_RELEASE_MEM_DATA_GPU_CLOCK:
                if (sim_vm_access_write(q->pdd, m->addr, 8, &dst, &f->fault_va) < 0)
                        return EXEC_FAULT;
                __atomic_store_n((uint64_t *) (void *) dst,
                                 m->data_sel == SIM_RELEASE_MEM_DATA_64 ? m->data : sim_gpu_clock_counter(),
                                 __ATOMIC_RELEASE);
                break;
        default:
                break;
        }
        /* kfd_int_process_v10.c: CP_END_OF_PIPE -> kfd_signal_event_interrupt(pasid, context_id0, 32). */
        if (m->int_sel == SIM_RELEASE_MEM_INT_ONLY || m->int_sel == SIM_RELEASE_MEM_INT_AFTER_WRITE)
                sim_ih_interrupt(q->pdd->gpu, q->process, m->int_ctxid, 32);
        return EXEC_DONE;
}

static ExecResult exec_wait_reg_mem(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        const typeof(pk->wait_reg_mem) *w = &pk->wait_reg_mem;
        uint8_t *src;
        uint32_t v;

        if (w->engine != 0)
                return failf(f, "WAIT_REG_MEM: ENGINE 1 (PFP) does not exist on a compute queue");
        if (w->mem_space == 0)
                return EXEC_DONE; /* no registers to wait for (see the file comment) */
        if (sim_vm_access(q->pdd, w->addr, 4, &src, &f->fault_va) < 0)
                return EXEC_FAULT;
        v = __atomic_load_n((uint32_t *) (void *) src, __ATOMIC_ACQUIRE);
        return sim_queue_compare(w->function, v & w->mask, w->ref) ? EXEC_DONE : EXEC_RETRY;
}

/* WAIT_REG_MEM64: as WAIT_REG_MEM, on a qword (barrier-AND on a 64-bit signal). */
static ExecResult exec_wait_reg_mem64(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        const typeof(pk->wait_reg_mem64) *w = &pk->wait_reg_mem64;
        uint8_t *src;

        if (sim_vm_access(q->pdd, w->addr, 8, &src, &f->fault_va) < 0)
                return EXEC_FAULT;
        return sim_compare64(w->function, __atomic_load_n((uint64_t *) (void *) src, __ATOMIC_ACQUIRE) & w->mask,
                             w->ref) ? EXEC_DONE : EXEC_RETRY;
}

/* ATOMIC_MEM: on memory (sim-atomic.h); COMMAND 1 retries a failed
 * compare-swap on a later pass, as a WAIT_REG_MEM re-polls. The atomic's
 * return value is not kept (COPY_DATA SRC_SEL 6 is not modelled). */
static ExecResult exec_atomic_mem(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        const typeof(pk->atomic_mem) *a = &pk->atomic_mem;
        int r = sim_vm_atomic(q->pdd, a->op, a->addr, a->src, a->cmp, &f->fault_va);

        if (r < 0)
                return EXEC_FAULT;
        return r > 0 && a->command == SIM_ATOMIC_MEM_LOOP_UNTIL_COMPARE ? EXEC_RETRY : EXEC_DONE;
}

static ExecResult exec_copy_data(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        const typeof(pk->copy_data) *c = &pk->copy_data;
        unsigned bytes = c->count_64 ? 8 : 4;
        uint64_t value;
        uint8_t *host;

        switch (c->src_sel) {
        case 0: /* register */
                if (!in_sh_window(c->src & 0x3FFFF, c->count_64 ? 2 : 1))
                        return failf(f, "COPY_DATA: source register outside the SH window is not modelled");
                value = SH(q->cp, c->src & 0x3FFFF);
                if (c->count_64)
                        value |= (uint64_t) SH(q->cp, (c->src & 0x3FFFF) + 1) << 32;
                break;
        case 1:
        case SIM_COPY_DATA_SRC_MEM:
                if (sim_vm_access(q->pdd, c->src, bytes, &host, &f->fault_va) < 0)
                        return EXEC_FAULT;
                value = c->count_64 ? __atomic_load_n((uint64_t *) (void *) host, __ATOMIC_ACQUIRE)
                                    : __atomic_load_n((uint32_t *) (void *) host, __ATOMIC_ACQUIRE);
                break;
        case SIM_COPY_DATA_SRC_IMM:
                value = c->src;
                break;
        case SIM_COPY_DATA_SRC_GPU_CLOCK:
                value = sim_gpu_clock_counter();
                break;
        default:
                return failf(f, "COPY_DATA: SRC_SEL %u (GDS, perfcounters, atomic return data, system clock) is not modelled",
                             c->src_sel);
        }
        if (!c->count_64)
                value &= 0xFFFFFFFFu;

        switch (c->dst_sel) {
        case 0:
                if (!in_sh_window(c->dst & 0x3FFFF, c->count_64 ? 2 : 1))
                        return failf(f, "COPY_DATA: destination register outside the SH window is not modelled");
                SH(q->cp, c->dst & 0x3FFFF) = (uint32_t) value;
                if (c->count_64)
                        SH(q->cp, (c->dst & 0x3FFFF) + 1) = (uint32_t) (value >> 32);
                return EXEC_DONE;
        case 1:
        case SIM_COPY_DATA_DST_TC_L2:
        case SIM_COPY_DATA_DST_MEM:
                if (sim_vm_access_write(q->pdd, c->dst, bytes, &host, &f->fault_va) < 0)
                        return EXEC_FAULT;
                if (c->count_64)
                        __atomic_store_n((uint64_t *) (void *) host, value, __ATOMIC_RELEASE);
                else
                        __atomic_store_n((uint32_t *) (void *) host, (uint32_t) value, __ATOMIC_RELEASE);
                return EXEC_DONE;
        default:
                return failf(f, "COPY_DATA: DST_SEL %u (GDS, perfcounters) is not modelled", c->dst_sel);
        }
}

static ExecResult exec_dma_data(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        const typeof(pk->dma_data) *m = &pk->dma_data;
        uint8_t *src, *dst;

        if (m->src_sel == 1 || m->dst_sel == 1)
                return failf(f, "DMA_DATA: GDS is not modelled");
        if (sim_vm_access_write(q->pdd, m->dst, m->byte_count, &dst, &f->fault_va) < 0)
                return EXEC_FAULT;
        if (m->src_sel == 2) {
                uint32_t v = (uint32_t) m->src;
                for (uint32_t i = 0; i < m->byte_count; i += 4)
                        memcpy(dst + i, &v, 4);
                return EXEC_DONE;
        }
        if (sim_vm_access(q->pdd, m->src, m->byte_count, &src, &f->fault_va) < 0)
                return EXEC_FAULT;
        memmove(dst, src, m->byte_count);
        return EXEC_DONE;
}

static ExecResult exec_indirect_buffer(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        SimCpState *cp = q->cp;
        uint8_t *host;

        if (pk->ib.priv)
                return failf(f, "INDIRECT_BUFFER: PRIV set on a user queue");
        /* KFD user queues leave VMID 0: the queue's own VMID applies (kfd-facts §2.2). */
        if (pk->ib.vmid != 0)
                return failf(f, "INDIRECT_BUFFER: VMID %u on a user queue (must be 0)", pk->ib.vmid);
        if (!cp->in_ib && pk->ib.chain)
                return failf(f, "INDIRECT_BUFFER: CHAIN in the ring (chaining replaces the rest of the current IB; "
                                "the ring is not one)");
        if (cp->in_ib && !pk->ib.chain)
                return failf(f, "INDIRECT_BUFFER inside an indirect buffer: one level of IB is modelled (CHAIN is)");
        if (sim_vm_access(q->pdd, pk->ib.addr, (uint64_t) pk->ib.size_dw * 4, &host, &f->fault_va) < 0) {
                f->fetch = true;
                return EXEC_FAULT;
        }
        if (!cp->in_ib)
                cp->ib_packet_dw = (uint32_t) pk->n_dwords;
        cp->in_ib = true;
        cp->ib_va = pk->ib.addr;
        cp->ib_size_dw = pk->ib.size_dw;
        cp->ib_pos = 0;
        return EXEC_IB;
}

/* What a dispatch's shaders see of memory: the VM snapshot, VRAM through the
 * GL2 (sim-cache.h) with the pages it writes pinned until it ends, code
 * through the process's instruction cache, scalar loads through its scalar
 * data cache. */
typedef struct DispatchMemory {
        SimVmSnapshot snap;
        SimLineCache *icache, *kcache;
        pthread_mutex_t lock; /* pins: the helper threads translate too */
        struct Pin { SimBo *bo; uint64_t off, len; } *pins;
        size_t n_pins, cap_pins;
        /* Fence-first (sim-ih.h): the queue, and the dummy page a faulting
         * data access goes to instead (NULL in event-first order); whether
         * the fault was raised (under the device lock). */
        SimQueue *q;
        uint8_t *dummy;
        bool faulted;
} DispatchMemory;

#define DUMMY_BYTES (2 * PAGE_SIZE_4K)

/* A data access of the dispatch at an unmapped va, fence-first: gfx10/11 run
 * without fault retry (amdgpu's noretry default), and the GPU's VM then
 * sends the access to the page the kernel programmed as the protection fault
 * default (gfxhub_v2_0.c/gfxhub_v2_1.c: GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR
 * := adev->dummy_page_addr): a load reads it, a store writes it, and the wave
 * goes on. The fault interrupt is raised (once per dispatch here) now, in
 * the order of the IH. */
static int dispatch_fault_to_dummy(DispatchMemory *m, uint64_t va, uint64_t len, void **ret_host) {
        SimDevice *d = m->q->process->device;

        if (len > DUMMY_BYTES)
                return -EFAULT;
        pthread_mutex_lock(&d->lock);
        if (!m->faulted) {
                m->faulted = true;
                sim_ih_vm_fault(m->q, va & ~(uint64_t) (PAGE_SIZE_4K - 1));
        }
        pthread_mutex_unlock(&d->lock);
        *ret_host = m->dummy;
        return 0;
}

static int translate(DispatchMemory *m, uint64_t va, uint64_t len, bool write, bool code, void **ret_host) {
        const SimVmEntry *e;
        uint64_t fault_va, off;
        int r;

        r = sim_vm_snapshot_find(&m->snap, va, len, &e, &fault_va);
        /* A store to a page mapped read-only is a protection fault, to the
         * dummy page as any other (sim_vm_access_write()). */
        if (r >= 0 && write && !e->writable)
                r = -EFAULT;
        if (r == -EFAULT && m->dummy && !code)
                return dispatch_fault_to_dummy(m, va, len, ret_host);
        if (r < 0)
                return r;
        off = va - e->va;
        if (!e->bo->cache) {
                *ret_host = e->host + off;
                return 0;
        }
        if (write) {
                pthread_mutex_lock(&m->lock);
                if (m->n_pins == m->cap_pins) {
                        size_t n = MAX((size_t) 16, m->cap_pins * 2);
                        struct Pin *a = realloc(m->pins, n * sizeof *a);
                        if (!a) {
                                pthread_mutex_unlock(&m->lock);
                                return -ENOMEM;
                        }
                        m->pins = a;
                        m->cap_pins = n;
                }
                m->pins[m->n_pins++] = (struct Pin) { e->bo, off, len };
                pthread_mutex_unlock(&m->lock);
        }
        *ret_host = sim_cache_view(e->bo, off, len, write, write);
        return 0;
}

static int dispatch_translate(void *userdata, uint64_t va, uint64_t len, bool write, void **ret_host) {
        return translate(userdata, va, len, write, false, ret_host);
}

/* Code is fetched without the dummy page: the simulator does not run the
 * dummy page's bytes as instructions, the fetch fault ends the dispatch. */
static int dispatch_translate_code(void *userdata, uint64_t va, uint64_t len, bool write, void **ret_host) {
        return translate(userdata, va, len, write, true, ret_host);
}

static int dispatch_fetch(void *userdata, uint64_t va, uint32_t *ret) {
        DispatchMemory *m = userdata;
        return sim_line_cache_read(m->icache, va, ret, dispatch_translate_code, m);
}

static int dispatch_scalar_load(void *userdata, uint64_t va, uint32_t *ret) {
        DispatchMemory *m = userdata;
        return sim_line_cache_read(m->kcache, va, ret, dispatch_translate, m);
}

static void dispatch_scalar_invalidate(void *userdata) {
        DispatchMemory *m = userdata;
        sim_line_cache_invalidate(m->kcache);
}

/* Locked: the pins go; the snapshot's references last until here. */
static void dispatch_memory_release(DispatchMemory *m) {
        for (size_t i = 0; i < m->n_pins; i++)
                sim_cache_unpin(m->pins[i].bo, m->pins[i].off, m->pins[i].len);
        free(m->pins);
        free(m->dummy);
        pthread_mutex_destroy(&m->lock);
        sim_vm_snapshot_release(&m->snap);
}

/* The SimIsaDispatch the registers describe (see the file comment). */
static ExecResult build_dispatch(SimDevice *dev, SimCpState *cp, const SimPm4Packet *pk, SimIsaDispatch *d, Failure *f) {
        uint32_t init = pk->dispatch.initiator, pgm_hi = SH(cp, COMPUTE_PGM_HI), rsrc2, user;
        uint64_t wg_threads = 1;
        static const char dim_name[3] = { 'X', 'Y', 'Z' };

        SH(cp, COMPUTE_DISPATCH_INITIATOR) = init;
        for (unsigned i = 0; i < 3; i++)
                SH(cp, COMPUTE_DIM_X + i) = pk->dispatch.dim[i];

        if (!(init & CSI_COMPUTE_SHADER_EN))
                return failf(f, "DISPATCH_DIRECT: COMPUTE_DISPATCH_INITIATOR.COMPUTE_SHADER_EN (bit 0) is clear");
        if (init & CSI_USE_THREAD_DIMENSIONS)
                return failf(f, "DISPATCH_DIRECT: USE_THREAD_DIMENSIONS (DIM in threads) is not modelled");
        if (init & (CSI_ORDERED_APPEND_ENBL | CSI_ORDERED_APPEND_MODE))
                return failf(f, "DISPATCH_DIRECT: ordered append (GDS) is not modelled");
        if (init & CSI_RESTORE)
                return failf(f, "DISPATCH_DIRECT: RESTORE (context restore) is not modelled");
        if (init & ~CSI_MODELLED)
                return failf(f, "DISPATCH_DIRECT: reserved COMPUTE_DISPATCH_INITIATOR bits 0x%x set", init & ~CSI_MODELLED);
        if (pgm_hi & ~0xFFu)
                return failf(f, "DISPATCH_DIRECT: COMPUTE_PGM_HI 0x%x has bits above DATA [7:0] (PGM_LO/HI hold "
                                "the code address >> 8)", pgm_hi);

        *d = (SimIsaDispatch) {
                .entry_va = (((uint64_t) pgm_hi << 32) | SH(cp, COMPUTE_PGM_LO)) << 8,
                .rsrc1 = SH(cp, COMPUTE_PGM_RSRC1),
                .rsrc2 = SH(cp, COMPUTE_PGM_RSRC2),
                .rsrc3 = SH(cp, COMPUTE_PGM_RSRC3),
                .wave32 = (init & CSI_CS_W32_EN) != 0,
                .cancel = &cp->cancel,
                .pool = dev->isa_pool,
                /* As kfd_device_queue_manager_v10.c compute_sh_mem_bases_64bit
                 * computes it from the process's apertures. */
                .sh_mem_bases = (uint32_t) (SIM_SCRATCH_APERTURE_BASE >> 48) | (uint32_t) (SIM_LDS_APERTURE_BASE >> 48) << 16,
        };
        /* Modes a dispatch of a user queue may not start, which the model
         * lacks (privileged waves, single-step debugging, trap handlers and
         * the exceptions that enter them) or that only the CP fills in
         * (LLVM AMDGPUUsage, compute_pgm_rsrc1/2/3 for gfx10: "Must be 0"):
         * the queue stops rather than run waves the hardware would start
         * privileged or trapping, so a dispatcher that lets one through is
         * found. The daemon refuses them in kernel descriptors
         * (daemon/gpu/gpu-kernel-rsrc.c). */
        static const struct {
                unsigned reg;
                uint32_t mask;
                const char *what;
        } unmodelled[] = {
                { 1, 1u << 20, "COMPUTE_PGM_RSRC1.PRIV (bit 20): privileged waves" },
                { 1, 1u << 22, "COMPUTE_PGM_RSRC1.DEBUG_MODE (bit 22): single-step debugging" },
                { 1, 1u << 24, "COMPUTE_PGM_RSRC1.BULKY (bit 24): one workgroup per CU" },
                { 1, 1u << 25, "COMPUTE_PGM_RSRC1.CDBG_USER (bit 25): debugger control" },
                { 1, 3u << 27, "COMPUTE_PGM_RSRC1 bits 27-28: reserved" },
                { 2, 1u << 6, "COMPUTE_PGM_RSRC2.TRAP_PRESENT (bit 6): a trap handler" },
                { 2, 3u << 13, "COMPUTE_PGM_RSRC2.EXCP_EN_MSB (bits 13-14): address watch and memory violation traps" },
                { 2, 0x7Fu << 24, "COMPUTE_PGM_RSRC2.EXCP_EN (bits 24-30): arithmetic exception traps" },
                { 2, 1u << 31, "COMPUTE_PGM_RSRC2 bit 31: reserved" },
                { 3, ~0xFu, "COMPUTE_PGM_RSRC3 bits 4-31: reserved on gfx10" },
        };
        for (size_t i = 0; i < sizeof unmodelled / sizeof unmodelled[0]; i++) {
                uint32_t v = unmodelled[i].reg == 1 ? d->rsrc1 : unmodelled[i].reg == 2 ? d->rsrc2 : d->rsrc3;
                if (v & unmodelled[i].mask)
                        return failf(f, "DISPATCH_DIRECT: %s, not modelled (a user queue's dispatch must leave it 0)",
                                     unmodelled[i].what);
        }
        rsrc2 = d->rsrc2;
        user = (rsrc2 >> 1) & 31;
        if (user > COMPUTE_USER_DATA_COUNT)
                return failf(f, "DISPATCH_DIRECT: RSRC2.USER_SGPR_COUNT %u exceeds the 16 COMPUTE_USER_DATA registers", user);
        memcpy(d->user_sgpr, &SH(cp, COMPUTE_USER_DATA_0), sizeof d->user_sgpr);

        for (unsigned i = 0; i < 3; i++) {
                uint32_t nt = SH(cp, COMPUTE_NUM_THREAD_X + i), full = nt & 0xFFFF, partial = nt >> 16;
                uint32_t start = (init & CSI_FORCE_START_AT_000) ? 0 : SH(cp, COMPUTE_START_X + i);

                d->wg_size[i] = full;
                wg_threads *= full;
                if (init & CSI_PARTIAL_TG_EN) {
                        /* Mesa si_compute.c: "If no partial_block, these should be an
                         * entire block size, not 0." */
                        if (partial == 0)
                                return failf(f, "DISPATCH_DIRECT: PARTIAL_TG_EN with COMPUTE_NUM_THREAD_%c.NUM_THREAD_PARTIAL 0 "
                                                "(a dimension without a partial workgroup carries the full size)", dim_name[i]);
                        if (partial > full)
                                return failf(f, "DISPATCH_DIRECT: COMPUTE_NUM_THREAD_%c.NUM_THREAD_PARTIAL %u exceeds "
                                                "NUM_THREAD_FULL %u", dim_name[i], partial, full);
                        d->partial[i] = partial;
                }
                d->wg_id_base[i] = start;
                d->grid[i] = pk->dispatch.dim[i] > start ? pk->dispatch.dim[i] - start : 0;
        }

        d->lds_bytes = ((rsrc2 >> 15) & 0x1FF) * 512;
        if (rsrc2 & 1) {
                uint32_t tmpring = SH(cp, COMPUTE_TMPRING_SIZE), waves = tmpring & 0xFFF, wavesize = (tmpring >> 12) & 0x1FFF;
                uint32_t lanes = d->wave32 ? 32 : 64;
                uint64_t wg_waves = (wg_threads + lanes - 1) / lanes;

                if (tmpring >> 25)
                        return failf(f, "DISPATCH_DIRECT: COMPUTE_TMPRING_SIZE 0x%x has bits above WAVESIZE [24:12] "
                                        "(gfx10 layout)", tmpring);
                if (wavesize == 0)
                        return failf(f, "DISPATCH_DIRECT: RSRC2.SCRATCH_EN with COMPUTE_TMPRING_SIZE.WAVESIZE 0 "
                                        "(the waves would get no private memory)");
                if (waves < wg_waves)
                        return failf(f, "DISPATCH_DIRECT: COMPUTE_TMPRING_SIZE.WAVES %u is fewer than the %llu waves of "
                                        "one workgroup", waves, (unsigned long long) wg_waves);
                /* WAVESIZE is in 1 KiB units per wave on gfx10; the interpreter
                 * gives wave w the offset w * lanes * scratch_per_lane. */
                d->scratch_per_lane = wavesize * 1024 / lanes;
                d->scratch_waves = waves;
        }
        return EXEC_DONE;
}

static ExecResult exec_dispatch(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        SimCpState *cp = q->cp;
        SimDevice *dev = q->process->device;
        DispatchMemory dm = {};
        SimIsaDispatch d;
        SimIsaResult res;
        SimIsaMemory mem;
        uint64_t budget = dev->dispatch_budget, t0, t1;
        ExecResult x;

        x = build_dispatch(dev, cp, pk, &d, f);
        if (x != EXEC_DONE)
                return x;
        d.priority = q->pipe_priority; /* the SPI's wave launch order (sim-isa.h) */
        dm.q = q;
        if (sim_ih_fence_first(dev)) {
                dm.dummy = calloc(1, DUMMY_BYTES);
                if (!dm.dummy)
                        return EXEC_RETRY;
        }
        if (sim_icache_get(q->process, &dm.icache) < 0 || sim_kcache_get(q->process, &dm.kcache) < 0 ||
            sim_vm_snapshot_new(q->pdd, &dm.snap) < 0) {
                free(dm.dummy);
                return EXEC_RETRY; /* out of memory: try again on the next pass */
        }
        pthread_mutex_init(&dm.lock, NULL);
        mem = (SimIsaMemory) { .userdata = &dm, .translate = dispatch_translate, .fetch = dispatch_fetch,
                               .scalar_load = dispatch_scalar_load,
                               .scalar_invalidate = dispatch_scalar_invalidate,
                               .vcache = &q->process->vcache };

        cp->busy = true;
        pthread_mutex_unlock(&dev->lock);
        t0 = sim_gpu_clock_counter();
        (void) sim_isa_dispatch(&d, &mem, budget, &res);
        t1 = sim_gpu_clock_counter();
        pthread_mutex_lock(&dev->lock);
        dispatch_memory_release(&dm);
        cp->busy = false;
        pthread_cond_broadcast(&dev->cp_cond);

        log_debug("sim: compute queue %u: dispatch %ux%ux%u ended (%d) after %llu wave / %llu lane instructions in %llu us",
                  q->id, d.grid[0], d.grid[1], d.grid[2], res.error, (unsigned long long) res.wave_instructions,
                  (unsigned long long) res.lane_instructions, (unsigned long long) (t1 - t0) / 100);
        if (__atomic_load_n(&cp->cancel, __ATOMIC_ACQUIRE))
                return EXEC_CANCELLED;
        switch (res.error) {
        case 0:
                return EXEC_DONE;
        case -EFAULT:
                return fault(f, res.fault_va);
        default:
                f->verbatim = true;
                snprintf(f->text, sizeof f->text, "%s", res.message[0] ? res.message : "dispatch failed");
                return EXEC_ERROR;
        }
}

static ExecResult execute(SimQueue *q, const SimPm4Packet *pk, Failure *f) {
        SimCpState *cp = q->cp;

        if (pk->predicate)
                return failf(f, "%s: predicated packets (header PREDICATE bit) are not modelled",
                             sim_pm4_opcode_name(pk->opcode));

        switch (pk->opcode) {
        case SIM_PKT3_NOP:
                return EXEC_DONE;
        case SIM_PKT3_ACQUIRE_MEM:
                /* The whole caches, whatever COHER_BASE/SIZE say (more than
                 * asked is what a cache may always do). */
                if (pk->acquire_mem.gcr_cntl & SIM_GCR_GLI_INV_MASK)
                        sim_line_cache_invalidate(q->process->icache);
                if (pk->acquire_mem.gcr_cntl & SIM_GCR_GLK_INV)
                        sim_line_cache_invalidate(q->process->kcache);
                sim_vcache_invalidate(q->process, pk->acquire_mem.gcr_cntl);
                sim_cache_gl2(q->pdd->gpu, pk->acquire_mem.gcr_cntl & SIM_GCR_GL2_WB,
                              pk->acquire_mem.gcr_cntl & SIM_GCR_GL2_INV);
                return EXEC_DONE;
        case SIM_PKT3_SET_SH_REG:
                memcpy(&SH(cp, pk->set_reg.reg), pk->set_reg.values, (size_t) pk->set_reg.n * 4);
                return EXEC_DONE;
        case SIM_PKT3_SET_UCONFIG_REG:
                memcpy(&cp->uconfig[pk->set_reg.reg - SIM_UCONFIG_REG_START], pk->set_reg.values,
                       (size_t) pk->set_reg.n * 4);
                return EXEC_DONE;
        case SIM_PKT3_WRITE_DATA:
                return exec_write_data(q, pk, f);
        case SIM_PKT3_RELEASE_MEM:
                return exec_release_mem(q, pk, f);
        case SIM_PKT3_WAIT_REG_MEM:
                return exec_wait_reg_mem(q, pk, f);
        case SIM_PKT3_WAIT_REG_MEM64:
                return exec_wait_reg_mem64(q, pk, f);
        case SIM_PKT3_ATOMIC_MEM:
                return exec_atomic_mem(q, pk, f);
        case SIM_PKT3_EVENT_WRITE:
                /* In order, so CS_PARTIAL_FLUSH has nothing to wait for. */
                if (pk->event_write.event_index >= EVENT_INDEX_SAMPLE_FIRST &&
                    pk->event_write.event_index <= EVENT_INDEX_SAMPLE_LAST)
                        return failf(f, "EVENT_WRITE: sample events (EVENT_INDEX %u) are not modelled",
                                     pk->event_write.event_index);
                return EXEC_DONE;
        case SIM_PKT3_DISPATCH_DIRECT:
                return exec_dispatch(q, pk, f);
        case SIM_PKT3_INDIRECT_BUFFER:
                return exec_indirect_buffer(q, pk, f);
        case SIM_PKT3_COPY_DATA:
                return exec_copy_data(q, pk, f);
        case SIM_PKT3_DMA_DATA:
                return exec_dma_data(q, pk, f);
        default:
                return failf(f, "PM4 opcode 0x%02x decoded but not executable", pk->opcode);
        }
}

/* The packet at rptr, unwrapped if it straddles the end of the ring. Returns
 * 0, -EAGAIN (not all published yet), -EBADMSG with a reason, -ENOMEM. */
static int fetch_ring(SimQueue *q, SimPm4Packet *pk, uint32_t **ret_copy, uint32_t *ret_header, const char **reason) {
        const uint32_t *ring = (const uint32_t *) (const void *) sim_queue_ring(q);
        uint64_t ring_dw = q->ring_size / 4, idx = q->rptr & (ring_dw - 1), avail = q->wptr - q->rptr;
        size_t contig = (size_t) MIN(avail, ring_dw - idx);
        uint32_t *copy;
        int r;

        *ret_header = ring[idx];
        r = sim_pm4_decode(ring + idx, contig, pk, reason);
        if (r != -EAGAIN)
                return r;
        if (pk->n_dwords > ring_dw) {
                *reason = "packet longer than the ring";
                return -EBADMSG;
        }
        if (pk->n_dwords > avail)
                return -EAGAIN;
        copy = malloc(pk->n_dwords * sizeof *copy);
        if (!copy)
                return -ENOMEM;
        for (size_t i = 0; i < pk->n_dwords; i++)
                copy[i] = ring[(idx + i) & (ring_dw - 1)];
        *ret_copy = copy;
        return sim_pm4_decode(copy, pk->n_dwords, pk, reason);
}

/* The next packet of the running indirect buffer. Returns 0, -EFAULT (IB memory
 * not mapped, *ret_fault_va), -EBADMSG with a reason. */
static int fetch_ib(SimQueue *q, SimPm4Packet *pk, uint32_t *ret_header, const char **reason, uint64_t *ret_fault_va) {
        SimCpState *cp = q->cp;
        uint32_t left = cp->ib_size_dw - cp->ib_pos;
        const uint32_t *dw;
        uint8_t *host;
        int r;

        if (sim_vm_access(q->pdd, cp->ib_va + (uint64_t) cp->ib_pos * 4, (uint64_t) left * 4, &host, ret_fault_va) < 0)
                return -EFAULT;
        dw = (const uint32_t *) (const void *) host;
        *ret_header = dw[0];
        r = sim_pm4_decode(dw, left, pk, reason);
        if (r == -EAGAIN) {
                *reason = "packet runs past the end of the indirect buffer";
                return -EBADMSG;
        }
        return r;
}

int sim_cp_queue_step(SimQueue *q) {
        SimCpState *cp = q->cp;
        uint64_t ring_dw = q->ring_size / 4, db;
        int result = SIM_STEP_IDLE;

        if (q->stopped || !cp || q->process->evicted || q->destroying)
                return SIM_STEP_IDLE;
        db = sim_queue_load_doorbell(q);
        /* After the doorbell: a flush stored before it is seen now. */
        sim_cache_poll_hdp(q->pdd->gpu);
        if (db != q->doorbell_seen) {
                q->doorbell_seen = db;
                q->wptr = db;
        }

        for (unsigned n = 0; n < MAX_PACKETS_PER_STEP; n++) {
                _cleanup_free_ uint32_t *copy = NULL;
                const char *reason = NULL;
                uint32_t header = 0;
                SimPm4Packet pk = {};
                Failure f = {};
                ExecResult x;
                int r;

                if (n > 0) {
                        /* The lock per packet: let the others in between two. */
                        sim_engine_yield_lock(q);
                        if (q->stopped || q->process->evicted || q->destroying)
                                return SIM_STEP_PROGRESS;
                }
                if (cp->in_ib)
                        r = fetch_ib(q, &pk, &header, &reason, &f.fault_va);
                else {
                        if (q->rptr == q->wptr)
                                break;
                        if (q->wptr - q->rptr > ring_dw) {
                                fail_error(q, "doorbell wptr more than a ring ahead of rptr (or behind it)", false, NULL);
                                return SIM_STEP_PROGRESS;
                        }
                        r = fetch_ring(q, &pk, &copy, &header, &reason);
                }
                if (r == -EAGAIN || r == -ENOMEM) /* not all published yet, or retry on the next pass */
                        return result == SIM_STEP_PROGRESS ? result : SIM_STEP_WAITING;
                if (r == -EFAULT) {
                        fail_fault(q, f.fault_va);
                        return SIM_STEP_PROGRESS;
                }
                if (r < 0) {
                        fail_error(q, reason ? reason : "malformed PM4 packet", false, &header);
                        return SIM_STEP_PROGRESS;
                }

                x = execute(q, &pk, &f);
                switch (x) {
                case EXEC_DONE:
                        result = SIM_STEP_PROGRESS;
                        if (cp->in_ib) {
                                cp->ib_pos += (uint32_t) pk.n_dwords;
                                if (cp->ib_pos < cp->ib_size_dw)
                                        break;
                                cp->in_ib = false;
                                q->rptr += cp->ib_packet_dw;
                        } else
                                q->rptr += pk.n_dwords;
                        report_rptr(q);
                        break;
                case EXEC_IB:
                        result = SIM_STEP_PROGRESS;
                        break;
                case EXEC_RETRY:
                        return result == SIM_STEP_PROGRESS ? result : SIM_STEP_WAITING;
                case EXEC_FAULT:
                        if (f.fetch || !run_past_fault(q, f.fault_va)) {
                                if (f.fetch)
                                        fail_fault(q, f.fault_va);
                                return SIM_STEP_PROGRESS;
                        }
                        /* Retired as if it ran (see the top). */
                        result = SIM_STEP_PROGRESS;
                        if (cp->in_ib) {
                                cp->ib_pos += (uint32_t) pk.n_dwords;
                                if (cp->ib_pos < cp->ib_size_dw)
                                        break;
                                cp->in_ib = false;
                                q->rptr += cp->ib_packet_dw;
                        } else
                                q->rptr += pk.n_dwords;
                        report_rptr(q);
                        break;
                case EXEC_ERROR:
                        fail_error(q, f.text, f.verbatim, &header);
                        return SIM_STEP_PROGRESS;
                case EXEC_CANCELLED:
                        return SIM_STEP_PROGRESS;
                }
                if (pk.opcode == SIM_PKT3_DISPATCH_DIRECT)
                        break; /* let the other queues of this pipe have the engine */
        }
        return result;
}
