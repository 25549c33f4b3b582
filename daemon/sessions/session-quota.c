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
 * (the simulated GPU), or the probe cannot be had, it cannot ever see the
 * last copy go. Released charges are looked at again before a limit refuses
 * anything and when the client asks (Query).
 *
 * Kept buffers. Ending the session does not end the copies (issue 29: 48 MiB
 * kept per session, ten sessions, 480 MiB held under UserBufferMemory=64M).
 * So when a session ends, its released charges move to its user's and its
 * unit's Tallies: a probe's record to the SessionSet's list of kept buffers,
 * still looked at before a per-user or per-unit limit refuses and at Query,
 * and let go of when the last copy is gone; a charge nobody can watch (the
 * simulated GPU) stays until the daemon restarts. The bytes stay in
 * UserBufferMemory= and UnitBufferMemory= (and Query's user_buffer_bytes),
 * a probe stays one of the user's objects (UserBuffers=) and fds.
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
        unsigned gpu;
        GpuPlacement placement;
        int probe_fd; /* a dma-buf fd of the daemon's own, or -EBADF: charged for good */
        LIST_FIELDS(ReleasedBuffer, released);
};

static GpuContext *device_gpu(Session *s) {
        return context_pool_device_gpu(s->gpu->contexts);
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
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                s->user_tally->sched[g].name = s->user_tally->key;
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++)
                scheduler_stream_set_user(s->gpu->scheduler, &s->home.streams[e], &s->user_tally->sched[s->gpu->index]);
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

/* The session's and its identity's share of a charge on GPU gpu (not its Tallies'). */
static void account_own(Session *s, unsigned gpu, GpuPlacement placement, int64_t delta) {
        uint64_t now = now_ns();

        s->gpu_bytes[gpu] += (uint64_t) delta;
        s->placement_bytes[placement == GPU_PLACEMENT_VRAM] += (uint64_t) delta;
        usage_buffer_change(&s->usage, delta, now);
        if (s->account)
                usage_buffer_change(&s->account->usage, delta, now);
}

void session_account_buffer(Session *s, unsigned gpu, GpuPlacement placement, int64_t delta) {
        account_own(s, gpu, placement, delta);
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

/* Charged for good (to the session, then to its Tallies: "Kept buffers"): a
 * number, not a record, so that a client that frees many buffers costs the
 * daemon nothing per buffer. */
static void charge_until_end(Session *s, unsigned gpu, GpuPlacement placement, uint64_t size) {
        s->released_until_end[gpu][placement == GPU_PLACEMENT_VRAM] += size;
}

/* Looks at a record's probe: drops the charge when no copy of its dma-buf
 * is left; turns it into a charge for good when that cannot be told (any
 * more). */
static void released_check(Session *s, ReleasedBuffer *rb) {
        int r = gpu_dmabuf_refs(device_gpu(s), rb->probe_fd);

        if (r > 0)
                return; /* copies live on */
        if (r == 0) {
                s->released_bytes -= rb->size;
                session_account_buffer(s, rb->gpu, rb->placement, -(int64_t) rb->size);
        } else
                charge_until_end(s, rb->gpu, rb->placement, rb->size);
        released_free(s, rb);
}

static void refresh_own(Session *s) {
        ReleasedBuffer *rb, *next;

        for (rb = s->released; rb; rb = next) {
                next = rb->released_next;
                released_check(s, rb);
        }
}

/* ---- Kept buffers ---- */

/* A freed exported buffer whose session ended, watched through its probe:
 * charged to the user's and the unit's Tallies (one object and one fd of the
 * user's, as the probe was). */
struct KeptBuffer {
        uint64_t size;
        int probe_fd;
        Tally *user, *unit; /* not references: a Tally with kept_probes stays */
        LIST_FIELDS(KeptBuffer, kept);
};

static void kept_add(Tally *t, int64_t bytes, int probes) {
        if (!t)
                return;
        t->kept_bytes += (uint64_t) bytes;
        t->kept_probes += (unsigned) probes;
}

/* Lets go of kb's probe; uncharged: its bytes too, else they stay until the
 * daemon restarts. */
static void kept_free(SessionSet *set, KeptBuffer *kb, bool uncharged) {
        int64_t bytes = uncharged ? -(int64_t) kb->size : 0;

        LIST_REMOVE(kept, set->kept, kb);
        set->n_kept--;
        tally_add(kb->user, bytes, -1);
        tally_add(kb->unit, bytes, -1);
        kept_add(kb->user, bytes, -1);
        kept_add(kb->unit, bytes, -1);
        if (kb->user)
                kb->user->fds--;
        set->fds_held--;
        safe_close(kb->probe_fd);
        free(kb);
}

static void kept_check(SessionSet *set, KeptBuffer *kb) {
        /* Any GPU context can ask the kernel about a dma-buf; kept buffers exist only with a GPU. */
        int r = gpu_dmabuf_refs(context_pool_device_gpu(set->gpus[0].contexts), kb->probe_fd);

        if (r > 0)
                return; /* copies live on */
        kept_free(set, kb, r == 0);
}

/* The kept buffers charged to t (all of them: NULL). */
static void refresh_kept(SessionSet *set, Tally *t) {
        KeptBuffer *kb, *next;
        bool any = false;

        for (kb = set->kept; kb; kb = next) {
                next = kb->kept_next;
                if (!t || kb->user == t || kb->unit == t) {
                        kept_check(set, kb);
                        any = true;
                }
        }
        if (any)
                tally_table_prune(&set->tallies);
}

/* Moves a released charge of s (probe: taken, or -EBADF) to its Tallies. */
static void keep(Session *s, unsigned gpu, GpuPlacement placement, uint64_t size, int probe_fd) {
        _cleanup_close_ int probe = probe_fd;
        KeptBuffer *kb = NULL;

        if (size == 0 && probe < 0)
                return;
        account_own(s, gpu, placement, -(int64_t) size);
        if (probe >= 0 && (kb = calloc(1, sizeof(*kb)))) {
                *kb = (KeptBuffer) { .size = size, .probe_fd = TAKE_FD(probe), .user = s->user_tally,
                                     .unit = s->unit_tally };
                LIST_PREPEND(kept, s->set->kept, kb);
                s->set->n_kept++;
                /* The probe stays the user's object and fd; it leaves the session's count. */
                s->fds--;
                kept_add(s->user_tally, (int64_t) size, 1);
                kept_add(s->unit_tally, (int64_t) size, 1);
                return;
        }
        if (probe >= 0) /* no memory for the record: nobody watches it, and the fd goes */
                session_account_probe(s, -1);
        kept_add(s->user_tally, (int64_t) size, 0);
        kept_add(s->unit_tally, (int64_t) size, 0);
}

void session_keep_released(Session *s) {
        while (s->released) {
                ReleasedBuffer *rb = s->released;
                int probe = rb->probe_fd;

                rb->probe_fd = -EBADF;
                keep(s, rb->gpu, rb->placement, rb->size, probe);
                LIST_REMOVE(released, s->released, rb);
                s->n_released--;
                free(rb);
        }
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                for (unsigned p = 0; p < 2; p++) {
                        keep(s, g, p ? GPU_PLACEMENT_VRAM : GPU_PLACEMENT_GTT, s->released_until_end[g][p], -EBADF);
                        s->released_until_end[g][p] = 0;
                }
        s->released_bytes = 0;
}

void session_set_drop_kept(SessionSet *set) {
        while (set->kept)
                kept_free(set, set->kept, true);
}

void session_refresh_released(Session *s) {
        refresh_own(s);
        if (s->user_tally && s->user_tally->kept_probes > 0)
                refresh_kept(s->set, s->user_tally);
        if (s->unit_tally && s->unit_tally->kept_probes > 0)
                refresh_kept(s->set, s->unit_tally);
}

/* Every session of the tally t (its user's or its unit's). */
static void refresh_tally(Session *s, Tally *t) {
        Session *o;

        LIST_FOREACH(sessions, o, s->set->sessions)
                if (o->user_tally == t || o->unit_tally == t) {
                        session_pool_drop(o);
                        refresh_own(o);
                }
        if (t->kept_probes > 0)
                refresh_kept(s->set, t);
}

void session_release_exported(Session *s, unsigned gpu, GpuPlacement placement, uint64_t size, int probe_fd) {
        _cleanup_close_ int probe = probe_fd;
        ReleasedBuffer *rb = NULL;

        s->released_bytes += size;
        if (probe < 0 || !(rb = calloc(1, sizeof(*rb)))) {
                charge_until_end(s, gpu, placement, size);
                return;
        }
        *rb = (ReleasedBuffer) { .size = size, .gpu = gpu, .placement = placement, .probe_fd = TAKE_FD(probe) };
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
                session_account_buffer(s, b->gpu_index, b->placement, -(int64_t) size);
                return;
        }
        session_release_exported(s, b->gpu_index, b->placement, size, probe);
}

/* ---- GPU context memory ---- */

static uint64_t headroom(uint64_t limit, uint64_t used) {
        return used >= limit ? 0 : limit - used;
}

/* Whether size more bytes of context memory on GPU gpu fit the caps s is
 * charged under; else err says which. */
static bool context_memory_fits(Session *s, unsigned gpu, uint64_t size, const char *what, char *err, size_t errlen) {
        char v[32];

        if (size > headroom(s->limits.max_buffer_bytes, s->gpu_bytes[gpu]) && (s->released || s->n_pooled)) {
                session_pool_drop(s);
                refresh_own(s);
        }
        if (size > headroom(s->limits.max_buffer_bytes, s->gpu_bytes[gpu])) {
                char where[48] = "";

                if (s->set->n_gpus > 1)
                        snprintf(where, sizeof where, " on GPU %u", gpu);
                snprintf(err, errlen,
                         "GPU context memory (%s) would exceed BufferMemory=%s (max_buffer_bytes)%s: the session holds %" PRIu64 " bytes%s, %" PRIu64 " of them GPU context memory",
                         what, policy_format_bytes(s->limits.max_buffer_bytes, v, sizeof v), where, s->gpu_bytes[gpu],
                         where[0] ? " there" : "", s->on[gpu] ? s->on[gpu]->context_bytes : 0);
                return false;
        }
        struct {
                Tally *t;
                uint64_t limit;
                const char *key;
        } caps[] = {
                { s->user_tally, s->policy.user_buffer_memory, "UserBufferMemory" },
                { s->unit_tally, s->policy.unit_buffer_memory, "UnitBufferMemory" },
        };
        for (size_t i = 0; i < ELEMENTSOF(caps); i++) {
                Tally *t = caps[i].t;

                if (!t || size <= headroom(caps[i].limit, t->buffer_bytes))
                        continue;
                refresh_tally(s, t);
                if (size <= headroom(caps[i].limit, t->buffer_bytes))
                        continue;
                snprintf(err, errlen, "GPU context memory (%s) would exceed %s=%s: %s holds %" PRIu64 " bytes in %u sessions",
                         what, caps[i].key, policy_format_bytes(caps[i].limit, v, sizeof v), t->key, t->buffer_bytes,
                         t->sessions);
                return false;
        }
        return true;
}

static void account_context(SessionOnGpu *on, int64_t delta) {
        Session *s = on->session;

        on->context_bytes += (uint64_t) delta;
        s->context_bytes += (uint64_t) delta;
        s->gpu_bytes[on->gpu->index] += (uint64_t) delta;
        usage_buffer_change(&s->usage, delta, now_ns());
        if (s->account)
                usage_buffer_change(&s->account->usage, delta, now_ns());
        tally_add(s->user_tally, delta, 0);
        tally_add(s->unit_tally, delta, 0);
}

static int pay(ContextPayer *p, int64_t delta, bool force, const char *what, char *err, size_t errlen) {
        SessionOnGpu *on = container_of(p, SessionOnGpu, payer);

        if (delta > 0 && !force &&
            !context_memory_fits(on->session, on->gpu->index, (uint64_t) delta, what, err, errlen))
                return -EDQUOT;
        account_context(on, delta);
        return 0;
}

ContextPayer *session_begin_paying_on(SessionOnGpu *on) {
        session_stop_paying(on);
        on->payer.charge = pay;
        return &on->payer;
}

ContextPayer *session_begin_paying(Session *s) {
        return session_begin_paying_on(&s->home);
}

void session_pay_context(SessionOnGpu *on, Context *ctx) {
        if (on->paid_ctx == ctx)
                return;
        /* Its compute context changed (a policy reload): not its any more. */
        session_stop_paying(on);
        /* The device context is the daemon's; another session may pay. */
        if (context_is_device(ctx) || context_get_payer(ctx))
                return;
        on->payer.charge = pay;
        context_set_payer(ctx, &on->payer);
        on->paid_ctx = context_ref(ctx);
}

void session_stop_paying(SessionOnGpu *on) {
        if (!on->paid_ctx)
                return;
        if (context_get_payer(on->paid_ctx) == &on->payer)
                context_set_payer(on->paid_ctx, NULL);
        on->paid_ctx = context_unref(on->paid_ctx);
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

bool session_check_memory_quota(Session *s, uint64_t id, unsigned gpu, uint64_t size) {
        if (size > s->limits.max_buffer_size) {
                session_send_error(s, id, EDQUOT,
                                   "buffer of %" PRIu64 " bytes exceeds the max_buffer_size limit (policy MaxBufferSize=) of %" PRIu64 " bytes",
                                   size, s->limits.max_buffer_size);
                return false;
        }
        /* BufferMemory= holds on each GPU: what the session has on this one. */
        if (size > headroom(s->limits.max_buffer_bytes, s->gpu_bytes[gpu]) && (s->released || s->n_pooled)) {
                session_pool_drop(s);
                session_refresh_released(s);
        }
        if (size > headroom(s->limits.max_buffer_bytes, s->gpu_bytes[gpu])) {
                char released[96] = "", where[48] = "";

                if (s->released_bytes > 0)
                        snprintf(released, sizeof(released),
                                 " (%" PRIu64 " of it freed buffers whose dma-buf may still be held)", s->released_bytes);
                if (s->set->n_gpus > 1)
                        snprintf(where, sizeof(where), " on GPU %u", gpu);
                session_send_error(s, id, EDQUOT,
                                   "buffer memory limit (max_buffer_bytes %" PRIu64 ", policy BufferMemory=) reached%s: %" PRIu64 " in use%s, %" PRIu64 " requested",
                                   s->limits.max_buffer_bytes, where, s->gpu_bytes[gpu], released, size);
                return false;
        }
        return check_tally_bytes(s, id, s->user_tally, s->policy.user_buffer_memory, "UserBufferMemory",
                                 "per-user", size) &&
               check_tally_bytes(s, id, s->unit_tally, s->policy.unit_buffer_memory, "UnitBufferMemory",
                                 "per-unit", size);
}
