/* SPDX-License-Identifier: MIT */
/*
 * The simulated SDMA engine's byte moves (sim-dma-move.c): streaming copies
 * and fills give the bytes memmove and a dword loop give, at every alignment
 * of source and destination, at lengths around the streaming threshold and
 * with ragged tails, and leave the bytes around the range alone; overlapping
 * copies keep memmove's semantics.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim-dma-move.h"

#define GUARD 64u
static const size_t lengths[] = { 0, 1, 3, 4, 63, 4096, SIM_DMA_STREAM_MIN - 1, SIM_DMA_STREAM_MIN,
                                  SIM_DMA_STREAM_MIN + 13, (1u << 20) + 5 };

static uint8_t *pattern_buf(size_t n, unsigned seed) {
        uint8_t *b = malloc(n);

        if (!b) /* abort(), not an assert: the compiler knows it does not return */
                abort();
        for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t) (i * 131u + seed * 7u + (i >> 9));
        return b;
}

Test(sim_dma_move, copy_matches_memmove_at_every_alignment) {
        for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
                for (unsigned so = 0; so < 16; so += 5)
                        for (unsigned dof = 0; dof < 16; dof += 3) {
                                size_t n = lengths[li], total = n + 2 * GUARD + 16;
                                uint8_t *src = pattern_buf(total, 1), *dst = pattern_buf(total, 2),
                                        *want = pattern_buf(total, 2);

                                for (size_t i = 0; i < n; i++)
                                        want[GUARD + dof + i] = src[GUARD + so + i];
                                sim_dma_copy(dst + GUARD + dof, src + GUARD + so, n);
                                cr_assert(memcmp(dst, want, total) == 0, "copy of %zu bytes, src +%u, dst +%u", n,
                                          so, dof);
                                free(src);
                                free(dst);
                                free(want);
                        }
}

Test(sim_dma_move, overlapping_copy_is_a_memmove) {
        size_t n = SIM_DMA_STREAM_MIN * 2, total = n + 4096;
        uint8_t *a = pattern_buf(total, 3), *want = pattern_buf(total, 3);

        for (size_t i = n; i-- > 0;) /* memmove, by hand: backwards */
                want[100 + i] = want[i];
        sim_dma_copy(a + 100, a, n);
        cr_assert(memcmp(a, want, total) == 0, "forward overlap");
        for (size_t i = 0; i < n; i++)
                want[i] = want[100 + i];
        sim_dma_copy(a, a + 100, n);
        cr_assert(memcmp(a, want, total) == 0, "backward overlap");
        free(a);
        free(want);
}

Test(sim_dma_move, fill_lays_the_pattern_from_the_first_byte) {
        static const uint32_t patterns[] = { 0x11223344u, 0x5a5a5a5au, 0 };

        for (size_t pi = 0; pi < 3; pi++)
                for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
                        for (unsigned dof = 0; dof < 16; dof += 3) {
                                size_t n = lengths[li], total = n + 2 * GUARD + 16;
                                uint8_t *dst = pattern_buf(total, 4), *want = pattern_buf(total, 4);
                                uint32_t p = patterns[pi];

                                for (size_t i = 0; i < n; i++)
                                        want[GUARD + dof + i] = (uint8_t) (p >> (8 * (i & 3)));
                                sim_dma_fill32(dst + GUARD + dof, p, n);
                                cr_assert(memcmp(dst, want, total) == 0, "fill 0x%08x of %zu bytes at +%u", p, n,
                                          dof);
                                free(dst);
                                free(want);
                        }
}
