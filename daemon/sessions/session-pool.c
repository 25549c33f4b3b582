/* SPDX-License-Identifier: MIT */
/*
 * The pool of a Session: small buffers it freed, kept for its next
 * AllocBuffer of the same size and placement, so that an alloc and free
 * pair costs the daemon a memset instead of a new buffer object, its GPU
 * and CPU mappings and their teardown (issue 13, item 3).
 *
 * A pooled buffer is unmapped from every client GPU context (and worker
 * process) it was mapped into, as a freed one would be; a dispatch that
 * names it after its reuse maps it again.
 *
 * Whose memory may be reused, and for whom. Only a buffer the client says it
 * keeps no copy of (FreeBuffer no_copy_kept: no dma-buf fd, no mapping, none
 * given away), that the daemon did not export again (ExportBuffer) and that no
 * job holds, is kept; it is given back to the same session only, zeroed
 * first. So a client that kept a copy after all (it lied, or a copy it gave
 * away lives on) can see and change only the memory of its own later
 * buffers — what it could do with the copy anyway — and never another
 * client's data.
 *
 * Charging. A pooled buffer stays charged to its session as it was (buffer
 * memory, the user's and unit's tallies, one object: it keeps a daemon fd on
 * the simulated GPU) and shows in Query as pooled_buffer_bytes; reuse moves
 * that charge to the new buffer. Dropping the pool (the session ends, or a
 * limit would refuse a request) frees them under the rule for freed
 * exported buffers (session-quota.c): the client's word is not taken for
 * what it charges.
 *
 * Bounded: at most SESSION_POOL_MAX_BUFFERS buffers of up to
 * SESSION_POOL_MAX_BUFFER_SIZE bytes, SESSION_POOL_MAX_BYTES in all.
 */
#include <errno.h>
#include <stdlib.h>

#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/macro.h"

bool session_pool_put(Session *s, SessionBuffer *b) {
        uint64_t size = gpu_buffer_get_size(b->gpu);

        /* The pool serves AllocBuffers on the session's own GPU only. */
        if (!s->connected || b->imported || b->exported_again || size > SESSION_POOL_MAX_BUFFER_SIZE ||
            b->gpu_index != s->gpu->index)
                return false;
        if (s->n_pooled >= SESSION_POOL_MAX_BUFFERS || s->pooled_bytes + size > SESSION_POOL_MAX_BYTES)
                return false;
        /* A job in flight still reads or writes it: it goes when they retire. */
        if (gpu_buffer_is_shared(b->gpu) || !gpu_buffer_get_cpu(b->gpu))
                return false;
        /* Most sessions never pool a buffer: room for the pool comes with its first. */
        if (!s->pool) {
                s->pool = calloc(SESSION_POOL_MAX_BUFFERS, sizeof(*s->pool));
                if (!s->pool)
                        return false;
        }
        /* Nowhere but in the daemon's own context while it waits. */
        gpu_buffer_unmap_elsewhere(b->gpu);
        s->pool[s->n_pooled++] = (PooledBuffer) { .gpu = b->gpu, .placement = b->placement };
        s->pooled_bytes += size;
        return true;
}

GpuBuffer *session_pool_take(Session *s, uint64_t size, GpuPlacement placement) {
        for (unsigned i = 0; i < s->n_pooled; i++) {
                GpuBuffer *b = s->pool[i].gpu;

                if (s->pool[i].placement != placement || gpu_buffer_get_size(b) != size)
                        continue;
                if (gpu_buffer_zero(b) < 0)
                        return NULL;
                s->pool[i] = s->pool[--s->n_pooled];
                s->pooled_bytes -= size;
                return b;
        }
        return NULL;
}

void session_pool_drop(Session *s) {
        while (s->n_pooled > 0) {
                PooledBuffer p = s->pool[--s->n_pooled];
                uint64_t size = gpu_buffer_get_size(p.gpu);
                int probe = -EBADF;

                s->pooled_bytes -= size;
                if (gpu_buffer_export(p.gpu, &probe) < 0)
                        probe = -EBADF;
                gpu_buffer_unref(p.gpu);
                session_account_object(s, -1);
                session_release_exported(s, s->gpu->index, p.placement, size, probe);
        }
}
