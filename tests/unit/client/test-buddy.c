/* SPDX-License-Identifier: MIT */
/*
 * The sub-allocator's buddy allocator (client/client-buddy.c) on its own:
 * ranges never overlap and are aligned to their size, everything freed merges
 * back into one range, a full allocator says ENOSPC and recovers, and a free
 * of anything but a live range is refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client-buddy.h"

#define ORDER 10u /* 1024 granules */

Test(buddy, random_allocations_are_disjoint_aligned_and_merge_back) {
        static int owner[1u << ORDER];
        uint64_t start[400];
        unsigned order[400];
        bool live[400] = {};
        Buddy b;

        cr_assert_eq(buddy_init(&b, ORDER), 0);
        memset(owner, -1, sizeof(owner));
        srand(42);
        for (unsigned step = 0; step < 20000; step++) {
                unsigned i = (unsigned) rand() % 400;
                if (live[i]) {
                        cr_assert_eq(buddy_free(&b, start[i]), 0);
                        for (uint64_t g = 0; g < (UINT64_C(1) << order[i]); g++)
                                owner[start[i] + g] = -1;
                        live[i] = false;
                        continue;
                }
                order[i] = (unsigned) rand() % 6;
                if (buddy_alloc(&b, order[i], &start[i]) < 0) {
                        cr_assert_not(buddy_can_alloc(&b, order[i]), "ENOSPC while a range of order %u is free", order[i]);
                        continue;
                }
                cr_assert_eq(start[i] % (UINT64_C(1) << order[i]), 0, "range at %llu of order %u is not aligned",
                             (unsigned long long) start[i], order[i]);
                cr_assert_eq(buddy_live_order(&b, start[i]), (int) order[i]);
                for (uint64_t g = 0; g < (UINT64_C(1) << order[i]); g++) {
                        cr_assert_eq(owner[start[i] + g], -1, "granule %llu handed out twice",
                                     (unsigned long long) (start[i] + g));
                        owner[start[i] + g] = (int) i;
                }
                live[i] = true;
        }
        for (unsigned i = 0; i < 400; i++)
                if (live[i])
                        cr_assert_eq(buddy_free(&b, start[i]), 0);
        cr_assert(buddy_is_empty(&b));
        /* Everything merged back: the whole block is one free range again. */
        cr_assert_eq(buddy_alloc(&b, ORDER, &start[0]), 0);
        cr_assert_eq(start[0], 0);
        buddy_done(&b);
}

Test(buddy, a_full_allocator_says_enospc_and_recovers) {
        uint64_t g, first = 0;
        Buddy b;

        cr_assert_eq(buddy_init(&b, 6), 0);
        for (unsigned i = 0; i < 64; i++) {
                cr_assert_eq(buddy_alloc(&b, 0, &g), 0);
                if (i == 17)
                        first = g;
        }
        cr_assert_eq(buddy_alloc(&b, 0, &g), -ENOSPC);
        cr_assert_eq(buddy_alloc(&b, 7, &g), -ENOSPC, "an order above the block");
        cr_assert_eq(buddy_free(&b, first), 0);
        cr_assert_eq(buddy_alloc(&b, 1, &g), -ENOSPC, "one free granule is no range of two");
        cr_assert_eq(buddy_alloc(&b, 0, &g), 0);
        cr_assert_eq(g, first);
        buddy_done(&b);
}

Test(buddy, only_live_ranges_can_be_freed) {
        uint64_t g;
        Buddy b;

        cr_assert_eq(buddy_init(&b, 8), 0);
        cr_assert_eq(buddy_alloc(&b, 3, &g), 0);
        cr_assert_eq(buddy_free(&b, g + 1), -EINVAL, "inside a range, not its start");
        cr_assert_eq(buddy_free(&b, 256), -EINVAL, "past the block");
        cr_assert_eq(buddy_free(&b, UINT64_MAX), -EINVAL);
        cr_assert_eq(buddy_free(&b, g), 0);
        cr_assert_eq(buddy_free(&b, g), -EINVAL, "freed twice");
        cr_assert(buddy_is_empty(&b));
        buddy_done(&b);
        cr_assert_eq(buddy_init(&b, BUDDY_MAX_ORDER + 1), -EINVAL);
}
