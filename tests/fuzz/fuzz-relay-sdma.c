/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for what the KFD relay reads of a ROCm program's SDMA ring
 * (daemon/gpu/gpu-sdma-scan.c, gpu_sdma_packet_scan(): which packets a
 * client may put on the daemon's SDMA queue, how long each is, and the
 * memory each reaches). The input is the ring's dwords; the relay's loop is
 * replayed over them (kfd-relay-queue.c scan_sdma: NOP padding skipped,
 * each packet scanned from a copy of at most 260 dwords).
 *
 * Besides "no crash, no read past the input, no UB" it checks the promises
 * the relay builds on: a packet that passes has a size of at least one dword
 * and no more than the dwords given; at most GPU_SDMA_MAX_RANGES ranges; a
 * refused packet names why; -EAGAIN only when the packet runs past the input;
 * and a packet that passes is one of the opcodes BlitSdma writes — never a
 * register write, an indirect buffer, a page-table, VM or semaphore packet.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "gpu/sdma.h"
#include "util/macro.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_DW 4096u
#define PACKET_MAX_DW 260u

static void check(bool ok) {
        if (!ok)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint32_t dw[MAX_DW];
        size_t n = MIN(size / 4, (size_t) MAX_DW), off = 0;

        memcpy(dw, data, 4 * n);
        while (off < n) {
                GpuSdmaRange ranges[GPU_SDMA_MAX_RANGES + 1];
                size_t have = MIN(n - off, (size_t) PACKET_MAX_DW), ndw = 0;
                unsigned nr = GPU_SDMA_MAX_RANGES + 1, op = dw[off] & 0xFF;
                const char *why = NULL;
                uint32_t pkt[PACKET_MAX_DW];

                if (op == SDMA_OP_NOP) {
                        off += 1 + ((dw[off] >> 16) & 0x3FFFu);
                        continue;
                }
                memcpy(pkt, dw + off, 4 * have);
                int k = gpu_sdma_packet_scan(pkt, have, &ndw, ranges, &nr, &why);
                if (k == -EAGAIN)
                        break;
                if (k < 0) {
                        check(k == -EINVAL && why && why[0]);
                        break;
                }
                check(k == 0 && ndw >= 1 && ndw <= have && nr <= GPU_SDMA_MAX_RANGES);
                check(op == SDMA_OP_COPY || op == SDMA_OP_WRITE || op == SDMA_OP_FENCE || op == SDMA_OP_TRAP ||
                      op == SDMA_OP_POLL_REGMEM || op == SDMA_OP_ATOMIC || op == SDMA_OP_CONST_FILL ||
                      op == SDMA_OP_TIMESTAMP || op == SDMA_OP_GCR_REQ);
                if (op == SDMA_OP_POLL_REGMEM)
                        check(pkt[0] >> 31); /* memory, never a register */
                for (unsigned i = 0; i < nr; i++)
                        check(ranges[i].size > 0 || op == SDMA_OP_COPY);
                off += ndw;
        }
        return 0;
}
