/* SPDX-License-Identifier: MIT */
/*
 * kfdb_suballocator: slices of a few daemon buffers (blocks), each block's
 * ranges kept by a buddy allocator (client-buddy.c). The daemon knows only
 * the blocks; slices cost no round trip once their block exists.
 *
 * A slice handed back by the caller is checked before anything is done with
 * it: its buffer must be a block of this allocator and a live range must
 * start at its offset, with the size it was given. A free after a fence marks
 * the range pending (a second free of it is refused) and is completed by the
 * first call of this allocator that finds the fence done.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client-buddy.h"
#include "client-buffer.h"

#define GRANULE_SHIFT 8u /* 256 bytes */
#define GRANULE (UINT64_C(1) << GRANULE_SHIFT)
#define DEFAULT_BLOCK_SIZE (UINT64_C(4) << 20)
#define MIN_BLOCK_SIZE (UINT64_C(64) << 10)
#define MAX_BLOCK_SIZE (UINT64_C(256) << 20)

typedef struct Block {
        kfdb_buffer *buffer;
        char *map;
        bool dedicated; /* one slice, larger than the block size: no buddy */
        bool pending;   /* a dedicated block's slice is freed after a fence */
        Buddy buddy;
} Block;

typedef struct PendingFree {
        Block *block;
        uint64_t granule;
        uint64_t fence;
} PendingFree;

struct kfdb_suballocator {
        ClientObject object; /* first: the session's list links */
        kfdb_session *session;
        kfdb_placement placement;
        uint64_t block_size;
        unsigned block_order; /* block_size in granules, log2 */

        Block **blocks;
        size_t n_blocks, n_blocks_allocated;

        PendingFree *pending;
        size_t n_pending, n_pending_allocated;

        uint32_t slices;
        uint64_t slice_bytes;
};

static unsigned log2_ceil(uint64_t v) {
        return v <= 1 ? 0 : 64u - (unsigned) __builtin_clzll(v - 1);
}

static void block_free(Block *b) {
        if (!b)
                return;
        buddy_done(&b->buddy);
        free(b);
}

/* Local teardown only: the blocks are the session's buffers, which
 * kfdb_session_free() releases on their own. */
static void suballocator_release(ClientObject *o) {
        kfdb_suballocator *a = (kfdb_suballocator *) o;

        session_object_unlink(&a->object);
        for (size_t i = 0; i < a->n_blocks; i++)
                block_free(a->blocks[i]);
        free(a->blocks);
        free(a->pending);
        free(a);
}

int kfdb_suballocator_new(kfdb_session *s, kfdb_placement placement, uint64_t block_size,
                          kfdb_suballocator **ret) {
        kfdb_suballocator *a;

        if (!s || !ret)
                return -EINVAL;
        if (placement != KFDB_PLACEMENT_GTT && placement != KFDB_PLACEMENT_VRAM)
                return session_error(s, -EINVAL, "kfdb_suballocator_new: unknown placement %d", (int) placement);
        if (block_size == 0)
                block_size = DEFAULT_BLOCK_SIZE;
        if (!is_power_of_2_u64(block_size) || block_size < MIN_BLOCK_SIZE || block_size > MAX_BLOCK_SIZE)
                return session_error(s, -EINVAL,
                                     "kfdb_suballocator_new: block size %" PRIu64
                                     " is not a power of two from 64 KiB to 256 MiB",
                                     block_size);
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->session = s;
        a->placement = placement;
        a->block_size = block_size;
        a->block_order = log2_ceil(block_size >> GRANULE_SHIFT);
        session_object_link(s, &a->object, suballocator_release, NULL, false);
        *ret = a;
        return 0;
}

/* Drops block i: the daemon buffer and the bookkeeping. */
static void drop_block(kfdb_suballocator *a, size_t i) {
        Block *b = a->blocks[i];

        (void) kfdb_buffer_free(b->buffer);
        block_free(b);
        a->blocks[i] = a->blocks[--a->n_blocks];
}

kfdb_suballocator *kfdb_suballocator_free(kfdb_suballocator *a) {
        if (!a)
                return NULL;
        while (a->n_blocks > 0)
                drop_block(a, a->n_blocks - 1);
        suballocator_release(&a->object);
        return NULL;
}

static int add_block(kfdb_suballocator *a, uint64_t size, bool dedicated, Block **ret) {
        _cleanup_free_ Block *b = NULL;
        void *map;
        int k;

        if (a->n_blocks == a->n_blocks_allocated) {
                size_t n = MAX(a->n_blocks_allocated * 2, (size_t) 8);
                Block **v = realloc(a->blocks, n * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                a->blocks = v;
                a->n_blocks_allocated = n;
        }
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->dedicated = dedicated;
        if (!dedicated && buddy_init(&b->buddy, a->block_order) < 0)
                return -ENOMEM;
        k = kfdb_buffer_alloc(a->session, size, a->placement, &b->buffer);
        if (k < 0) {
                buddy_done(&b->buddy);
                return k;
        }
        k = kfdb_buffer_map(b->buffer, &map);
        if (k < 0) {
                (void) kfdb_buffer_free(b->buffer);
                buddy_done(&b->buddy);
                return k;
        }
        b->map = map;
        a->blocks[a->n_blocks++] = b;
        *ret = TAKE_PTR(b);
        return 0;
}

static bool block_is_spare(const Block *b) {
        return !b->dedicated && buddy_is_empty(&b->buddy);
}

/* Gives the range back; a block left empty goes back to the daemon unless
 * it is the only empty one (kept for the next allocation). */
static void release_range(kfdb_suballocator *a, Block *b, uint64_t granule) {
        size_t i, spare = 0;

        a->slices--;
        if (b->dedicated)
                a->slice_bytes -= kfdb_buffer_get_size(b->buffer);
        else {
                a->slice_bytes -= GRANULE << buddy_live_order(&b->buddy, granule);
                (void) buddy_free(&b->buddy, granule);
                if (!buddy_is_empty(&b->buddy))
                        return;
        }
        for (i = 0; i < a->n_blocks; i++)
                spare += block_is_spare(a->blocks[i]);
        for (i = 0; i < a->n_blocks; i++)
                if (a->blocks[i] == b)
                        break;
        if (b->dedicated || spare > 1)
                drop_block(a, i);
}

static void mark_pending(Block *b, uint64_t granule, bool pending) {
        if (b->dedicated)
                b->pending = pending;
        else if (pending)
                b->buddy.state[granule] |= BUDDY_PENDING;
        else
                b->buddy.state[granule] &= (uint8_t) ~BUDDY_PENDING;
}

static bool is_pending(const Block *b, uint64_t granule) {
        return b->dedicated ? b->pending : (b->buddy.state[granule] & BUDDY_PENDING);
}

/* Completes the pending frees whose fences are done. */
static void collect_pending(kfdb_suballocator *a) {
        size_t i = 0;

        while (i < a->n_pending) {
                PendingFree p = a->pending[i];
                if (kfdb_fence_is_done(a->session, p.fence) != 1) {
                        i++;
                        continue;
                }
                a->pending[i] = a->pending[--a->n_pending];
                mark_pending(p.block, p.granule, false);
                release_range(a, p.block, p.granule);
        }
}

static int slice_from(kfdb_suballocator *a, Block *b, uint64_t granule, uint64_t size, kfdb_slice *ret) {
        uint64_t offset = granule << GRANULE_SHIFT;

        *ret = (kfdb_slice) { .buffer = b->buffer, .offset = offset, .size = size, .ptr = b->map + offset };
        a->slices++;
        a->slice_bytes += size;
        return 0;
}

int kfdb_slice_alloc(kfdb_suballocator *a, uint64_t size, uint64_t alignment, kfdb_slice *ret) {
        uint64_t granule;
        unsigned order;
        Block *b;
        int k;

        if (!a || !ret)
                return -EINVAL;
        if (size == 0)
                return session_error(a->session, -EINVAL, "kfdb_slice_alloc: size must be > 0");
        if (alignment == 0)
                alignment = GRANULE;
        if (!is_power_of_2_u64(alignment) || alignment > a->block_size)
                return session_error(a->session, -EINVAL,
                                     "kfdb_slice_alloc: alignment %" PRIu64
                                     " is not a power of two of at most the block size %" PRIu64,
                                     alignment, a->block_size);
        if (a->n_pending > 0)
                collect_pending(a);
        if (size > a->block_size) {
                /* Its own buffer: the daemon rounds to pages, which meets any
                 * alignment up to the block size for the offset 0. */
                k = add_block(a, size, true, &b);
                return k < 0 ? k : slice_from(a, b, 0, kfdb_buffer_get_size(b->buffer), ret);
        }
        order = MAX(log2_ceil(DIV_ROUND_UP(size, GRANULE)), log2_ceil(alignment >> GRANULE_SHIFT));
        /* Blocks in use first, so that empty ones can go back to the daemon. */
        for (size_t i = 0; i < a->n_blocks; i++) {
                b = a->blocks[i];
                if (!b->dedicated && !buddy_is_empty(&b->buddy) && buddy_alloc(&b->buddy, order, &granule) == 0)
                        return slice_from(a, b, granule, GRANULE << order, ret);
        }
        for (size_t i = 0; i < a->n_blocks; i++) {
                b = a->blocks[i];
                if (block_is_spare(b) && buddy_alloc(&b->buddy, order, &granule) == 0)
                        return slice_from(a, b, granule, GRANULE << order, ret);
        }
        k = add_block(a, a->block_size, false, &b);
        if (k < 0)
                return k;
        k = buddy_alloc(&b->buddy, order, &granule);
        if (k < 0)
                return session_error(a->session, k, "kfdb_slice_alloc: a new block has no room for %" PRIu64 " bytes",
                                     size);
        return slice_from(a, b, granule, GRANULE << order, ret);
}

/* The block and granule of a live slice of a, checked; or -EINVAL with the reason. */
static int slice_find(kfdb_suballocator *a, const kfdb_slice *slice, Block **ret_block, uint64_t *ret_granule) {
        uint64_t granule = slice->offset >> GRANULE_SHIFT;
        Block *b = NULL;
        bool live;
        int order;

        for (size_t i = 0; i < a->n_blocks && !b; i++)
                if (a->blocks[i]->buffer == slice->buffer)
                        b = a->blocks[i];
        if (!b)
                return session_error(a->session, -EINVAL,
                                     "kfdb_slice_free: the slice's buffer is not a block of this allocator");
        if (b->dedicated)
                live = slice->offset == 0 && slice->size == kfdb_buffer_get_size(b->buffer);
        else {
                order = slice->offset % GRANULE == 0 ? buddy_live_order(&b->buddy, granule) : -EINVAL;
                live = order >= 0 && (GRANULE << order) == slice->size;
        }
        if (!live)
                return session_error(a->session, -EINVAL,
                                     "kfdb_slice_free: no live slice at offset %" PRIu64 " of buffer %" PRIu64
                                     " with size %" PRIu64 " (freed already?)",
                                     slice->offset, kfdb_buffer_get_handle(b->buffer), slice->size);
        if (is_pending(b, granule))
                return session_error(a->session, -EINVAL,
                                     "kfdb_slice_free: the slice at offset %" PRIu64 " of buffer %" PRIu64
                                     " is already freed after a fence",
                                     slice->offset, kfdb_buffer_get_handle(b->buffer));
        *ret_block = b;
        *ret_granule = granule;
        return 0;
}

int kfdb_slice_free(kfdb_suballocator *a, const kfdb_slice *slice, uint64_t after_fence) {
        uint64_t granule = 0;
        Block *b = NULL;
        int k;

        if (!a || !slice)
                return -EINVAL;
        k = slice_find(a, slice, &b, &granule);
        if (k < 0)
                return k;
        k = after_fence == 0 ? 1 : kfdb_fence_is_done(a->session, after_fence);
        if (k < 0)
                return k;
        if (k == 0) {
                if (after_fence > a->session->last_fence)
                        return session_error(a->session, -EINVAL,
                                             "kfdb_slice_free: fence %" PRIu64 " was never handed out (last %" PRIu64 ")",
                                             after_fence, a->session->last_fence);
                if (a->n_pending == a->n_pending_allocated) {
                        size_t n = MAX(a->n_pending_allocated * 2, (size_t) 16);
                        PendingFree *v = realloc(a->pending, n * sizeof(*v));
                        if (!v)
                                return -ENOMEM;
                        a->pending = v;
                        a->n_pending_allocated = n;
                }
                a->pending[a->n_pending++] = (PendingFree) { .block = b, .granule = granule, .fence = after_fence };
                mark_pending(b, granule, true);
                return 0;
        }
        release_range(a, b, granule);
        if (a->n_pending > 0)
                collect_pending(a);
        return 0;
}

int kfdb_suballocator_get_stats(kfdb_suballocator *a, kfdb_suballocator_stats *ret) {
        if (!a || !ret)
                return -EINVAL;
        if (a->n_pending > 0)
                collect_pending(a);
        *ret = (kfdb_suballocator_stats) {
                .blocks = (uint32_t) a->n_blocks,
                .slices = a->slices,
                .slice_bytes = a->slice_bytes,
                .pending_frees = (uint32_t) a->n_pending,
        };
        for (size_t i = 0; i < a->n_blocks; i++)
                ret->block_bytes += kfdb_buffer_get_size(a->blocks[i]->buffer);
        return 0;
}
