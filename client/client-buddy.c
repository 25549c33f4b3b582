/* SPDX-License-Identifier: MIT */
/*
 * The buddy allocator of client-buddy.h: per order a bitset of free ranges,
 * with a count and a hint (the lowest word that may hold a set bit), so
 * finding a free range costs a scan from the hint, and freeing costs one bit
 * test per order climbed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client-buddy.h"

static uint64_t ranges_of(const Buddy *b, unsigned order) {
        return UINT64_C(1) << (b->max_order - order);
}

static uint64_t words_of(const Buddy *b, unsigned order) {
        return (ranges_of(b, order) + 63) / 64;
}

static bool bit_get(const Buddy *b, unsigned order, uint64_t i) {
        return b->free_bits[order][i / 64] & (UINT64_C(1) << (i % 64));
}

static void bit_set(Buddy *b, unsigned order, uint64_t i) {
        b->free_bits[order][i / 64] |= UINT64_C(1) << (i % 64);
        b->n_free[order]++;
        if (i / 64 < b->hint[order])
                b->hint[order] = i / 64;
}

static void bit_clear(Buddy *b, unsigned order, uint64_t i) {
        b->free_bits[order][i / 64] &= ~(UINT64_C(1) << (i % 64));
        b->n_free[order]--;
}

/* The lowest free range of this order (n_free[order] > 0). */
static uint64_t first_free(Buddy *b, unsigned order) {
        uint64_t w = b->hint[order], n = words_of(b, order);

        while (w < n && b->free_bits[order][w] == 0)
                w++;
        b->hint[order] = w;
        return w * 64 + (uint64_t) __builtin_ctzll(b->free_bits[order][w]);
}

int buddy_init(Buddy *b, unsigned max_order) {
        *b = (Buddy) { .max_order = max_order };
        if (max_order > BUDDY_MAX_ORDER)
                return -EINVAL;
        for (unsigned k = 0; k <= max_order; k++) {
                b->free_bits[k] = calloc(words_of(b, k), sizeof(uint64_t));
                if (!b->free_bits[k]) {
                        buddy_done(b);
                        return -ENOMEM;
                }
        }
        b->state = calloc(ranges_of(b, 0), 1);
        if (!b->state) {
                buddy_done(b);
                return -ENOMEM;
        }
        bit_set(b, max_order, 0);
        return 0;
}

void buddy_done(Buddy *b) {
        for (unsigned k = 0; k <= BUDDY_MAX_ORDER; k++)
                free(b->free_bits[k]);
        free(b->state);
        *b = (Buddy) {};
}

bool buddy_can_alloc(const Buddy *b, unsigned order) {
        for (unsigned k = order; k <= b->max_order; k++)
                if (b->n_free[k] > 0)
                        return true;
        return false;
}

int buddy_alloc(Buddy *b, unsigned order, uint64_t *ret) {
        unsigned k = order;
        uint64_t i;

        if (order > b->max_order)
                return -ENOSPC;
        while (k <= b->max_order && b->n_free[k] == 0)
                k++;
        if (k > b->max_order)
                return -ENOSPC;
        i = first_free(b, k);
        bit_clear(b, k, i);
        /* Split down: keep the lower half, free the upper one. */
        while (k > order) {
                k--;
                i *= 2;
                bit_set(b, k, i + 1);
        }
        *ret = i << order;
        b->state[*ret] = (uint8_t) (order | BUDDY_LIVE);
        b->used += UINT64_C(1) << order;
        return 0;
}

int buddy_live_order(const Buddy *b, uint64_t granule) {
        if (granule >= ranges_of(b, 0) || !(b->state[granule] & BUDDY_LIVE))
                return -EINVAL;
        return b->state[granule] & BUDDY_ORDER_MASK;
}

int buddy_free(Buddy *b, uint64_t granule) {
        int r = buddy_live_order(b, granule);
        unsigned k;
        uint64_t i;

        if (r < 0)
                return r;
        k = (unsigned) r;
        b->state[granule] = 0;
        b->used -= UINT64_C(1) << k;
        /* Merge up while the buddy is free too. */
        for (i = granule >> k; k < b->max_order && bit_get(b, k, i ^ 1); k++, i >>= 1)
                bit_clear(b, k, i ^ 1);
        bit_set(b, k, i);
        return 0;
}
