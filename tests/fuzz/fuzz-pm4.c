/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the simulated GPU's compute (CP) engine: the PM4 decoder
 * (daemon/sim/sim-pm4-decode.c) and the execution of what it decodes
 * (sim-cp.c: register writes, memory writes and copies, waits, fences and
 * interrupts, indirect buffers, DISPATCH_DIRECT into the ISA interpreter with
 * a small instruction budget) against a real simulated compute queue and GPU
 * VM. The rig is fuzz-sim-queue.h: valid memory at fixed addresses (ring,
 * EOP, a 64 KiB data buffer starting with s_endpgm, a 4 KiB one, the event
 * page), everything else unmapped.
 *
 * An input is a 4-byte header and the ring dwords:
 *   [0..1] where in the ring the packets start (dwords, wrapping);
 *   [2]    bit 0: pointers near 2^64 (they wrap), bit 1: past 2^32;
 *   [3]    the doorbell: 0 the end of the packets, 1 short of it by 1..3
 *          dwords (a packet not all published), 2 more than a ring ahead,
 *          3 behind the start.
 * Besides "no crash, no leak, no UB" it checks the engine's promises
 * (sim-cp.c, fuzz-sim-queue.h rig_run): a stop is a VM fault or a refused
 * packet with a record, never both, never silent; the read position moves
 * forward only, up to the doorbell; the 32-bit report is the position
 * rounded down to 64 dwords, modulo the ring.
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files on its command line (the
 * pm4-corpus of fuzz-gen-corpus: every packet the daemon's builders emit, a
 * dispatch, an indirect buffer, faults, bad headers, wraps).
 */
#include "fuzz-sim-queue.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER_BYTES 4u
#define RING_DW (RIG_RING_BYTES / 4u)

static Rig rig;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint32_t dw[RING_DW];
        uint64_t start, doorbell, base = 0;
        size_t n;

        if (size < HEADER_BYTES)
                return 0;
        rig_up(&rig, "fuzz-pm4", KFD_IOC_QUEUE_TYPE_COMPUTE);
        n = (size - HEADER_BYTES) / 4;
        if (n > RING_DW)
                n = RING_DW;
        memcpy(dw, data + HEADER_BYTES, n * 4);
        if (data[2] & 1)
                base = 0ull - 4ull * RING_DW; /* a few packets later the pointers wrap */
        else if (data[2] & 2)
                base = 1ull << 32;
        start = base + (uint64_t) ((data[0] | data[1] << 8) % RING_DW);
        doorbell = start + n;
        switch (data[3] & 3) {
        case 1:
                doorbell -= n < 3 ? n : (size_t) ((data[3] >> 2) % 3 + 1);
                break;
        case 2:
                doorbell += RING_DW + 1;
                break;
        case 3:
                doorbell = start - 1;
                break;
        }

        pthread_mutex_lock(&rig.dev->lock);
        rig_load(&rig, start, dw, n, doorbell, true);
        rig_run(&rig, sim_cp_queue_step, start);
        if (!rig.q->cp->in_ib) {
                uint32_t reported;
                memcpy(&reported, rig_host(&rig, RIG_RPTR_VA, 4), 4);
                rig_check(&rig, reported == (uint32_t) ((rig.q->rptr & ~63ull) % RING_DW),
                          "the rptr report is not the read position in 64-dword blocks");
        }
        pthread_mutex_unlock(&rig.dev->lock);
        return 0;
}
