/* SPDX-License-Identifier: MIT */
/*
 * What a session may hold, and what it is charged for (session.h): its own
 * limits (BufferMemory=, MaxBufferSize=, Buffers=), those of all sessions of
 * its user and of its unit together (UserBufferMemory=, UserBuffers=,
 * UnitBufferMemory=, kept in Tallies), and the rule for exported buffers.
 *
 * Exported buffers. A client that frees a buffer may keep the dma-buf fd it
 * was given (or a mapping of it, or a copy it passed on): the memory then
 * lives on although the daemon let go of it. So a buffer whose dma-buf left
 * the daemon (AllocBuffer, ExportBuffer) stays charged to its session after
 * FreeBuffer — as "released" bytes, shown by Query — until the daemon can see
 * that no copy of the dma-buf remains: it keeps a dma-buf fd of its own (a
 * probe) and asks the kernel-call table how many other references exist
 * (/proc/self/fdinfo "count:" on the kernel). Where the table cannot tell
 * (the simulated GPU), or the probe cannot be had, the charge stays until the
 * session ends. Released charges are looked at again before a limit refuses
 * anything and when the client asks (Query).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"

/* A freed buffer still charged to its session. */
struct ReleasedBuffer {
        uint64_t size;
        GpuPlacement placement;
        int probe_fd; /* a dma-buf fd of the daemon's own, or -EBADF: charged until the session ends */
        LIST_FIELDS(ReleasedBuffer, released);
};

static GpuContext *device_gpu(Session *s) {
        return context_pool_device_gpu(s->set->contexts);
}

int session_tallies_attach(Session *s) {
        const Identity *id = &s->identity;
        char key[320];
        int r;

        snprintf(key, sizeof(key), "uid %u", (unsigned) id->uid);
        r = tally_table_get(&s->set->tallies, key, &s->user_tally);
        if (r < 0)
                return r;
        s->user_tally->sessions++;
        /* The compute group's slots are shared by user: all its sessions
         * together hold at most its share (scheduler.h); a user whose
         * contexts keep faulting waits before its next one. */
        s->user_tally->sched.name = s->user_tally->key;
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++)
                scheduler_stream_set_user(s->set->scheduler, &s->streams[e], &s->user_tally->sched);
        /* A user unit is the user's to name: it is told apart by the uid. */
        if (id->user_unit)
                snprintf(key, sizeof(key), "uid %u user unit %s", (unsigned) id->uid, id->user_unit);
        else if (id->unit)
                snprintf(key, sizeof(key), "unit %s", id->unit);
        else
                return 0;
        r = tally_table_get(&s->set->tallies, key, &s->unit_tally);
        if (r < 0)
                return r;
        s->unit_tally->sessions++;
        return 0;
}

void session_tallies_detach(Session *s) {
        session_account_fds(s, -(int64_t) s->fds);
        if (s->user_tally)
                s->user_tally->sessions--;
        if (s->unit_tally)
                s->unit_tally->sessions--;
        s->user_tally = tally_unref(&s->set->tallies, s->user_tally);
        s->unit_tally = tally_unref(&s->set->tallies, s->unit_tally);
}

void session_account_buffer(Session *s, GpuPlacement placement, int64_t delta) {
        uint64_t now = now_ns();

        s->placement_bytes[placement == GPU_PLACEMENT_VRAM] += (uint64_t) delta;
        usage_buffer_change(&s->usage, delta, now);
        if (s->account)
                usage_buffer_change(&s->account->usage, delta, now);
        tally_add(s->user_tally, delta, 0);
        tally_add(s->unit_tally, delta, 0);
}

void session_account_object(Session *s, int delta) {
        tally_add(s->user_tally, 0, delta);
        tally_add(s->unit_tally, 0, delta);
        session_account_fds(s, (int64_t) delta * session_buffer_fds(s));
}

void session_account_probe(Session *s, int delta) {
        tally_add(s->user_tally, 0, delta);
        tally_add(s->unit_tally, 0, delta);
        session_account_fds(s, delta);
}

/* ---- Released buffers ---- */

/* Frees the record (and its probe); the charge stays with the caller. */
static void released_free(Session *s, ReleasedBuffer *rb) {
        LIST_REMOVE(released, s->released, rb);
        s->n_released--;
        if (rb->probe_fd >= 0)
                session_account_probe(s, -1);
        safe_close(rb->probe_fd);
        free(rb);
}

/* Charged until the session ends: a number, not a record, so that a client
 * that frees many buffers costs the daemon nothing per buffer. */
static void charge_until_end(Session *s, GpuPlacement placement, uint64_t size) {
        s->released_until_end[placement == GPU_PLACEMENT_VRAM] += size;
}

/* Looks at a record's probe: drops the charge when no copy of its dma-buf
 * is left; turns it into a charge until the session ends when that cannot
 * be told (any more). */
static void released_check(Session *s, ReleasedBuffer *rb) {
        int r = gpu_dmabuf_refs(device_gpu(s), rb->probe_fd);

        if (r > 0)
                return; /* copies live on */
        if (r == 0) {
                s->released_bytes -= rb->size;
                session_account_buffer(s, rb->placement, -(int64_t) rb->size);
        } else
                charge_until_end(s, rb->placement, rb->size);
        released_free(s, rb);
}

void session_refresh_released(Session *s) {
        ReleasedBuffer *rb, *next;

        for (rb = s->released; rb; rb = next) {
                next = rb->released_next;
                released_check(s, rb);
        }
}

/* Every session of the tally t (its user's or its unit's). */
static void refresh_tally(Session *s, Tally *t) {
        Session *o;

        LIST_FOREACH(sessions, o, s->set->sessions)
                if (o->user_tally == t || o->unit_tally == t) {
                        session_pool_drop(o);
                        session_refresh_released(o);
                }
}

void session_release_exported(Session *s, GpuPlacement placement, uint64_t size, int probe_fd) {
        _cleanup_close_ int probe = probe_fd;
        ReleasedBuffer *rb = NULL;

        s->released_bytes += size;
        if (probe < 0 || !(rb = calloc(1, sizeof(*rb)))) {
                charge_until_end(s, placement, size);
                return;
        }
        *rb = (ReleasedBuffer) { .size = size, .placement = placement, .probe_fd = TAKE_FD(probe) };
        LIST_PREPEND(released, s->released, rb);
        s->n_released++;
        session_account_probe(s, +1);
        released_check(s, rb);
}

void session_release_buffer(Session *s, SessionBuffer *b) {
        uint64_t size = gpu_buffer_get_size(b->gpu);
        int probe = -EBADF;

        if (b->exported && gpu_buffer_export(b->gpu, &probe) < 0)
                probe = -EBADF;
        /* Jobs still using it hold their own references. */
        gpu_buffer_unref(b->gpu);
        session_account_object(s, -1);
        if (!b->exported) {
                session_account_buffer(s, b->placement, -(int64_t) size);
                return;
        }
        session_release_exported(s, b->placement, size, probe);
}

void session_drop_released(Session *s) {
        while (s->released) {
                charge_until_end(s, s->released->placement, s->released->size);
                released_free(s, s->released);
        }
        for (unsigned p = 0; p < 2; p++) {
                session_account_buffer(s, p ? GPU_PLACEMENT_VRAM : GPU_PLACEMENT_GTT,
                                       -(int64_t) s->released_until_end[p]);
                s->released_until_end[p] = 0;
        }
        s->released_bytes = 0;
}

/* ---- Limits ---- */

static bool check_user_objects(Session *s, uint64_t id) {
        Tally *t = s->user_tally;

        if (!t || t->objects < s->policy.user_buffers)
                return true;
        refresh_tally(s, t);
        if (t->objects < s->policy.user_buffers)
                return true;
        session_send_error(s, id, EDQUOT,
                           "per-user buffer count limit (policy UserBuffers=%" PRIu64 ") reached: %s holds %" PRIu64 " buffers and code objects in %u sessions",
                           s->policy.user_buffers, t->key, t->objects, t->sessions);
        return false;
}

bool session_check_handle_count(Session *s, uint64_t id) {
        uint64_t n = (uint64_t) s->buffers.n_used + s->code_objects.n_used;

        if (n >= s->limits.max_buffers) {
                session_send_error(s, id, EDQUOT,
                                   "buffer count limit (max_buffers %u, policy Buffers=) reached: %u buffers and %u code objects (a code object counts as a buffer)",
                                   s->limits.max_buffers, s->buffers.n_used, s->code_objects.n_used);
                return false;
        }
        return true;
}

bool session_check_object_count(Session *s, uint64_t id) {
        return session_check_handle_count(s, id) && check_user_objects(s, id);
}

static uint64_t headroom(uint64_t limit, uint64_t used) {
        return used >= limit ? 0 : limit - used;
}

/* Whether size more bytes fit a shared cap; refreshes the released charges
 * of the tally's sessions once before saying no. */
static bool check_tally_bytes(Session *s, uint64_t id, Tally *t, uint64_t limit, const char *key,
                              const char *what, uint64_t size) {
        char v[32];

        if (!t || size <= headroom(limit, t->buffer_bytes))
                return true;
        refresh_tally(s, t);
        if (size <= headroom(limit, t->buffer_bytes))
                return true;
        session_send_error(s, id, EDQUOT,
                           "%s buffer memory limit (policy %s=%s) reached: %s holds %" PRIu64 " bytes in %u sessions, %" PRIu64 " requested",
                           what, key, policy_format_bytes(limit, v, sizeof(v)), t->key, t->buffer_bytes, t->sessions, size);
        return false;
}

bool session_check_memory_quota(Session *s, uint64_t id, uint64_t size) {
        if (size > s->limits.max_buffer_size) {
                session_send_error(s, id, EDQUOT,
                                   "buffer of %" PRIu64 " bytes exceeds the max_buffer_size limit (policy MaxBufferSize=) of %" PRIu64 " bytes",
                                   size, s->limits.max_buffer_size);
                return false;
        }
        if (size > headroom(s->limits.max_buffer_bytes, s->usage.buffer_bytes) && (s->released || s->n_pooled)) {
                session_pool_drop(s);
                session_refresh_released(s);
        }
        if (size > headroom(s->limits.max_buffer_bytes, s->usage.buffer_bytes)) {
                char released[96] = "";

                if (s->released_bytes > 0)
                        snprintf(released, sizeof(released),
                                 " (%" PRIu64 " of it freed buffers whose dma-buf may still be held)", s->released_bytes);
                session_send_error(s, id, EDQUOT,
                                   "buffer memory limit (max_buffer_bytes %" PRIu64 ", policy BufferMemory=) reached: %" PRIu64 " in use%s, %" PRIu64 " requested",
                                   s->limits.max_buffer_bytes, s->usage.buffer_bytes, released, size);
                return false;
        }
        return check_tally_bytes(s, id, s->user_tally, s->policy.user_buffer_memory, "UserBufferMemory",
                                 "per-user", size) &&
               check_tally_bytes(s, id, s->unit_tally, s->policy.unit_buffer_memory, "UnitBufferMemory",
                                 "per-unit", size);
}
