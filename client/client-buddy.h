/* SPDX-License-Identifier: MIT */
/*
 * A binary buddy allocator over 2^max_order granules, the ranges of one
 * sub-allocator block (client-suballoc.c). It knows only granule indices:
 * no memory, no session. Its bookkeeping lives in this process's heap, never
 * in the block itself, so a GPU job that scribbles on the block cannot
 * corrupt it.
 *
 * A range of order k is 2^k granules, aligned to its own size inside the
 * block. Freeing merges a range with its buddy while both are free
 * (Knuth, TAOCP vol. 1, 2.5, "the buddy system").
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define BUDDY_MAX_ORDER 24u /* 16 Mi granules */

typedef struct Buddy {
        unsigned max_order;
        uint64_t *free_bits[BUDDY_MAX_ORDER + 1]; /* per order: one bit per range, set while free */
        uint64_t n_free[BUDDY_MAX_ORDER + 1];     /* per order: bits set */
        uint64_t hint[BUDDY_MAX_ORDER + 1];       /* per order: no set bit in words below this */
        uint8_t *state;                            /* per granule: BUDDY_* of a range starting there */
        uint64_t used;                             /* granules in live ranges */
} Buddy;

/* state[] of a granule that starts a live range: its order | BUDDY_LIVE,
 * and BUDDY_PENDING while a free of it waits for a fence. */
#define BUDDY_LIVE 0x40u
#define BUDDY_PENDING 0x80u
#define BUDDY_ORDER_MASK 0x3fu

int buddy_init(Buddy *b, unsigned max_order);
void buddy_done(Buddy *b);

/* A free range of 2^order granules: its first granule in *ret; -ENOSPC if none. */
int buddy_alloc(Buddy *b, unsigned order, uint64_t *ret);
/* The order of the live range starting at granule, or -EINVAL when none starts there. */
int buddy_live_order(const Buddy *b, uint64_t granule);
/* Frees the live range starting at granule; -EINVAL when none starts there. */
int buddy_free(Buddy *b, uint64_t granule);
/* Whether a range of 2^order granules could be handed out now. */
bool buddy_can_alloc(const Buddy *b, unsigned order);

static inline bool buddy_is_empty(const Buddy *b) {
        return b->used == 0;
}
