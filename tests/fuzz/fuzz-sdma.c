/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the simulated GPU's SDMA engine: the packet decoder
 * (daemon/sim/sim-sdma-decode.c) and the execution of what it decodes
 * (sim-sdma.c) against a real simulated queue and GPU VM — the code that
 * runs whatever a client's job (or a daemon bug) puts into an SDMA ring.
 * The rig is fuzz-sim-queue.h: valid memory at fixed addresses (ring, 64 KiB
 * and 4 KiB data buffers, the event page), everything else unmapped.
 *
 * An input is a 4-byte header and the ring dwords:
 *   [0..1] where in the ring the packets start (dwords, wrapping);
 *   [2]    bit 0: pointers near 2^64 (they wrap), bit 1: past 2^32;
 *   [3]    the doorbell: 0 the end of the packets, 1 that plus 1..3 bytes
 *          (misaligned), 2 more than a ring ahead, 3 behind the start.
 * Besides "no crash, no leak, no UB" it checks the engine's promises
 * (sim-sdma.c, fuzz-sim-queue.h rig_run): a stop is a VM fault or a refused
 * packet with a record, never both, never silent; the read pointer moves
 * forward only, up to the doorbell; the fetcher is never behind it, nor more
 * than a ring ahead of it, and the rptr word reports exactly the fetcher
 * (written again at the end of a pass, so a packet that wrote there too is
 * overwritten, as by the hardware's write-back timer).
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files on its command line (the
 * sdma-corpus of fuzz-gen-corpus: every packet the daemon's builders emit,
 * faults, bad headers, polls, wraps).
 */
#include "fuzz-sim-queue.h"
#include "sim/sim-sdma.h"

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
        rig_up(&rig, "fuzz-sdma", KFD_IOC_QUEUE_TYPE_SDMA);
        n = (size - HEADER_BYTES) / 4;
        if (n > RING_DW)
                n = RING_DW;
        memcpy(dw, data + HEADER_BYTES, n * 4);
        if (data[2] & 1)
                base = 0ull - RIG_RING_BYTES; /* the packets run past 2^64: the pointers wrap */
        else if (data[2] & 2)
                base = 1ull << 32;
        start = base + (uint64_t) ((data[0] | data[1] << 8) % RING_DW) * 4;
        doorbell = start + n * 4;
        switch (data[3] & 3) {
        case 1:
                doorbell += (uint64_t) ((data[3] >> 2) % 3 + 1);
                break;
        case 2:
                doorbell += RIG_RING_BYTES + 4;
                break;
        case 3:
                doorbell = start - 4;
                break;
        }

        pthread_mutex_lock(&rig.dev->lock);
        rig_load(&rig, start, dw, n, doorbell, false);
        rig_run(&rig, sim_sdma_queue_step, start);
        {
                uint64_t reported;
                memcpy(&reported, rig_host(&rig, RIG_RPTR_VA, 8), 8);
                rig_check(&rig, reported == rig.q->fetched, "the rptr word is not the fetcher's read pointer");
                rig_check(&rig, rig.q->fetched - rig.q->rptr <= RIG_RING_BYTES,
                          "the fetcher is behind the engine or more than a ring ahead of it");
                rig_check(&rig, rig.q->rptr % 4 == 0, "a read pointer inside a dword");
        }
        pthread_mutex_unlock(&rig.dev->lock);
        return 0;
}
