/* SPDX-License-Identifier: MIT */
/*
 * The sub-allocator of libkfdbroker (kfdb_suballocator, kfdb_slice_*) against
 * the real daemon on the simulated GPU: slices are disjoint and a GPU fill of
 * one touches no other, the daemon charges the blocks, a free after a fence
 * keeps the range until the job is done, large slices get a block of their
 * own, empty blocks go back but one, every bad slice is refused with a
 * reason, and a session freed with a live allocator leaks nothing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kfdbroker.h"

static TestDaemon d;

static void setup(void) {
        test_daemon_start(&d, NULL);
}

static void teardown(void) {
        test_daemon_fini(&d);
        test_fini_end();
}

TestSuite(suballoc, .init = setup, .fini = teardown, .timeout = 120);

static kfdb_suballocator *new_allocator(kfdb_session *s, uint64_t block_size) {
        kfdb_suballocator *a = NULL;
        int r = kfdb_suballocator_new(s, KFDB_PLACEMENT_GTT, block_size, &a);

        cr_assert_eq(r, 0, "kfdb_suballocator_new: %s (%s)", strerror(-r), kfdb_session_last_error(s));
        return a;
}

static kfdb_slice slice_alloc(kfdb_session *s, kfdb_suballocator *a, uint64_t size, uint64_t alignment) {
        kfdb_slice sl;
        int r = kfdb_slice_alloc(a, size, alignment, &sl);

        cr_assert_eq(r, 0, "kfdb_slice_alloc(%llu): %s (%s)", (unsigned long long) size, strerror(-r),
                     kfdb_session_last_error(s));
        cr_assert_geq(sl.size, size);
        cr_assert_leq(sl.offset + sl.size, kfdb_buffer_get_size(sl.buffer));
        return sl;
}

static kfdb_suballocator_stats stats_of(kfdb_suballocator *a) {
        kfdb_suballocator_stats st;

        cr_assert_eq(kfdb_suballocator_get_stats(a, &st), 0);
        return st;
}

static void submit_and_wait(kfdb_session *s, kfdb_batch *b) {
        uint64_t fence = 0;
        int r = kfdb_batch_submit(b, NULL, &fence);

        cr_assert_eq(r, 0, "submit: %s (%s)", strerror(-r), kfdb_session_last_error(s));
        r = kfdb_fence_wait(s, fence, 30000);
        cr_assert_eq(r, 0, "fence %llu: %s (%s)", (unsigned long long) fence, strerror(-r), kfdb_session_last_error(s));
}

#define N_SLICES 120

Test(suballoc, slices_are_disjoint_and_a_gpu_fill_stays_in_its_slice) {
        kfdb_session *s = test_connect(&d, "suballoc-fill");
        kfdb_suballocator *a = new_allocator(s, 256u << 10);
        static kfdb_slice sl[N_SLICES];
        kfdb_batch *batch;
        void *block;

        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        srand(7);
        for (unsigned i = 0; i < N_SLICES; i++) {
                uint64_t size = 4 + (uint64_t) (rand() % 20000), align = i % 5 == 0 ? 4096 : 0;
                sl[i] = slice_alloc(s, a, size, align);
                if (align)
                        cr_assert_eq(sl[i].offset % align, 0, "slice %u at %llu is not 4 KiB aligned", i,
                                     (unsigned long long) sl[i].offset);
                cr_assert_eq(kfdb_buffer_map(sl[i].buffer, &block), 0);
                cr_assert_eq(sl[i].ptr, (char *) block + sl[i].offset, "slice %u: ptr is not its block's mapping + offset", i);
                memset(sl[i].ptr, 0xee, sl[i].size);
                for (unsigned j = 0; j < i; j++)
                        if (sl[j].buffer == sl[i].buffer)
                                cr_assert(sl[i].offset + sl[i].size <= sl[j].offset ||
                                                  sl[j].offset + sl[j].size <= sl[i].offset,
                                          "slices %u and %u overlap", i, j);
        }
        for (unsigned i = 0; i < N_SLICES; i++)
                cr_assert_eq(kfdb_batch_fill(batch, sl[i].buffer, sl[i].offset, sl[i].size, 0x01010101u * (i + 1)), 0,
                             "%s", kfdb_session_last_error(s));
        submit_and_wait(s, batch);
        for (unsigned i = 0; i < N_SLICES; i++) {
                const uint32_t *w = sl[i].ptr;
                for (uint64_t k = 0; k < sl[i].size / 4; k++)
                        if (w[k] != 0x01010101u * (i + 1))
                                cr_assert_fail("slice %u word %llu: got 0x%08x, want 0x%08x", i, (unsigned long long) k,
                                               w[k], 0x01010101u * (i + 1));
        }
        for (unsigned i = 0; i < N_SLICES; i++)
                cr_assert_eq(kfdb_slice_free(a, &sl[i], 0), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(stats_of(a).slices, 0);
        cr_assert_eq(stats_of(a).blocks, 1, "all but one empty block go back to the daemon");
        kfdb_batch_free(batch);
        kfdb_suballocator_free(a);
        kfdb_session_free(s);
}

Test(suballoc, the_daemon_charges_the_blocks) {
        kfdb_session *s = test_connect(&d, "suballoc-charge");
        kfdb_suballocator *a = new_allocator(s, 0);
        kfdb_usage before, after;
        kfdb_suballocator_stats st;
        kfdb_slice sl[64];

        cr_assert_eq(kfdb_query(s, &before), 0);
        for (unsigned i = 0; i < 64; i++)
                sl[i] = slice_alloc(s, a, 100u << 10, 0);
        st = stats_of(a);
        cr_assert_eq(st.slices, 64);
        cr_assert_eq(st.slice_bytes, 64 * (128u << 10), "100 KiB rounds up to a 128 KiB range");
        cr_assert_eq(st.blocks, 2, "64 ranges of 128 KiB fill two 4 MiB blocks");
        cr_assert_eq(kfdb_query(s, &after), 0);
        cr_assert_eq(after.buffers - before.buffers, st.blocks, "the daemon holds one buffer per block");
        cr_assert_eq(after.buffer_bytes - before.buffer_bytes, st.block_bytes);
        for (unsigned i = 0; i < 64; i++)
                cr_assert_eq(kfdb_slice_free(a, &sl[i], 0), 0);
        cr_assert_eq(stats_of(a).blocks, 1);
        kfdb_suballocator_free(a);
        cr_assert_eq(kfdb_query(s, &after), 0);
        cr_assert_eq(after.buffers, before.buffers, "kfdb_suballocator_free gives every block back");
        kfdb_session_free(s);
}

Test(suballoc, a_free_after_a_fence_keeps_the_range_until_the_job_is_done) {
        kfdb_session *s = test_connect(&d, "suballoc-fence");
        kfdb_suballocator *a = new_allocator(s, 64u << 10);
        kfdb_slice x, y, z;
        kfdb_event *e;
        kfdb_batch *batch;
        uint64_t fence;

        cr_assert_eq(kfdb_event_create(s, false, &e), 0);
        cr_assert_eq(kfdb_batch_new(s, &batch), 0);
        x = slice_alloc(s, a, 4096, 0);
        /* The fill waits for the event: the job is not done until we set it. */
        cr_assert_eq(kfdb_batch_wait_event(batch, e), 0);
        cr_assert_eq(kfdb_batch_fill(batch, x.buffer, x.offset, x.size, 0x5a5a5a5a), 0);
        cr_assert_eq(kfdb_batch_submit(batch, NULL, &fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(kfdb_slice_free(a, &x, fence), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(stats_of(a).pending_frees, 1);
        cr_assert_eq(kfdb_slice_free(a, &x, fence), -EINVAL, "freed twice while pending");
        cr_assert(strstr(kfdb_session_last_error(s), "already freed after a fence"), "%s", kfdb_session_last_error(s));
        y = slice_alloc(s, a, 4096, 0);
        cr_assert(y.buffer != x.buffer || y.offset != x.offset, "the range was reused while its job may still run");
        cr_assert_eq(kfdb_event_set(e), 0);
        cr_assert_eq(kfdb_fence_wait(s, fence, 30000), 0, "%s", kfdb_session_last_error(s));
        cr_assert_eq(((uint32_t *) x.ptr)[0], 0x5a5a5a5a, "the job wrote its slice");
        cr_assert_eq(stats_of(a).pending_frees, 0, "the fence is done: the free is complete");
        z = slice_alloc(s, a, 4096, 0);
        cr_assert(z.buffer == x.buffer && z.offset == x.offset, "the freed range is handed out again");
        cr_assert_eq(kfdb_slice_free(a, &y, 0), 0);
        cr_assert_eq(kfdb_slice_free(a, &z, 0), 0);
        kfdb_batch_free(batch);
        kfdb_event_destroy(e);
        kfdb_suballocator_free(a);
        kfdb_session_free(s);
}

Test(suballoc, a_slice_larger_than_a_block_gets_a_block_of_its_own) {
        kfdb_session *s = test_connect(&d, "suballoc-large");
        kfdb_suballocator *a = new_allocator(s, 64u << 10);
        kfdb_slice small, big;

        small = slice_alloc(s, a, 256, 0);
        big = slice_alloc(s, a, (1u << 20) + 1, 0);
        cr_assert_neq(big.buffer, small.buffer);
        cr_assert_eq(big.offset, 0);
        cr_assert_eq(kfdb_buffer_get_size(big.buffer), big.size);
        cr_assert_eq(stats_of(a).blocks, 2);
        memset(big.ptr, 1, big.size);
        cr_assert_eq(kfdb_slice_free(a, &big, 0), 0);
        cr_assert_eq(stats_of(a).blocks, 1, "a dedicated block goes back at once");
        cr_assert_eq(kfdb_slice_free(a, &big, 0), -EINVAL, "freed twice");
        cr_assert_eq(kfdb_slice_free(a, &small, 0), 0);
        kfdb_suballocator_free(a);
        kfdb_session_free(s);
}

Test(suballoc, bad_arguments_and_bad_slices_are_refused_with_a_reason) {
        kfdb_session *s = test_connect(&d, "suballoc-bad");
        kfdb_suballocator *a = new_allocator(s, 64u << 10), *other = new_allocator(s, 64u << 10), *none = NULL;
        kfdb_slice x, y, bad;

#define REFUSED(call, text)                                                                                   \
        do {                                                                                                  \
                int r_ = (call);                                                                              \
                cr_assert_eq(r_, -EINVAL, "%s: got %d", #call, r_);                                           \
                cr_assert(strstr(kfdb_session_last_error(s), text), "%s: %s", #call, kfdb_session_last_error(s)); \
        } while (0)
        REFUSED(kfdb_suballocator_new(s, KFDB_PLACEMENT_GTT, 100000, &none), "power of two");
        REFUSED(kfdb_suballocator_new(s, KFDB_PLACEMENT_GTT, 4096, &none), "from 64 KiB");
        REFUSED(kfdb_suballocator_new(s, KFDB_PLACEMENT_GTT, 1ull << 30, &none), "to 256 MiB");
        REFUSED(kfdb_suballocator_new(s, (kfdb_placement) 7, 0, &none), "placement");
        cr_assert_null(none);
        REFUSED(kfdb_slice_alloc(a, 0, 0, &x), "size");
        REFUSED(kfdb_slice_alloc(a, 64, 48, &x), "alignment 48");
        REFUSED(kfdb_slice_alloc(a, 64, 128u << 10, &x), "alignment");
        x = slice_alloc(s, a, 1000, 0);
        y = slice_alloc(s, other, 1000, 0);
        REFUSED(kfdb_slice_free(other, &x, 0), "not a block of this allocator");
        bad = x;
        bad.offset += 256;
        REFUSED(kfdb_slice_free(a, &bad, 0), "no live slice");
        bad = x;
        bad.size = 256;
        REFUSED(kfdb_slice_free(a, &bad, 0), "no live slice");
        bad = x;
        bad.offset = UINT64_MAX - 255;
        REFUSED(kfdb_slice_free(a, &bad, 0), "no live slice");
        REFUSED(kfdb_slice_free(a, &x, 1000000), "never handed out");
        cr_assert_eq(kfdb_slice_free(a, &x, 0), 0);
        REFUSED(kfdb_slice_free(a, &x, 0), "freed already");
        /* Nothing above broke either allocator. */
        x = slice_alloc(s, a, 1000, 0);
        cr_assert_eq(kfdb_slice_free(a, &x, 0), 0);
        cr_assert_eq(kfdb_slice_free(other, &y, 0), 0);
        cr_assert_eq(stats_of(a).slices, 0);
        kfdb_suballocator_free(other);
        kfdb_suballocator_free(a);
        kfdb_session_free(s);
#undef REFUSED
}

/* The session owns the allocator: freeing the session with slices live
 * releases it and its blocks (the sanitizer build checks for leaks). */
Test(suballoc, a_session_freed_with_a_live_allocator_leaks_nothing) {
        kfdb_session *s = test_connect(&d, "suballoc-leak");
        kfdb_suballocator *a = new_allocator(s, 0);
        kfdb_slice sl;

        for (unsigned i = 0; i < 10; i++)
                sl = slice_alloc(s, a, 4u << 20, 0);
        (void) sl;
        cr_assert_eq(stats_of(a).blocks, 10);
        kfdb_session_free(s);
}
