/* SPDX-License-Identifier: MIT */
/*
 * The structures behind context.h, shared by context.c (one slot and its
 * incarnations) and context-pool.c (the pool: the device context, the
 * mechanism, the slots by key, the limit and the idle reclaim).
 */
#pragma once

#include "contexts/context.h"

struct Context {
        unsigned n_ref;
        unsigned users;          /* sessions that took it with context_pool_get() */
        ContextPool *pool;       /* weak; NULL once the pool is gone */
        Context *prev, *next;    /* ContextPool.clients */
        uint64_t id;
        char *key;
        bool device;

        /* The current incarnation. */
        GpuContext *gpu;
        sd_event_source *wake;
        unsigned inflight;
        uint64_t created_ns, bring_up_ns;
        uint64_t last_used_ns;

        unsigned incarnations, losses;
        bool losing_told;        /* the current incarnation's loss was announced */

        /* Relays (context_relay()): a page of the current incarnation that
         * device-context SDMA queues write when they are past a point, one
         * 32-bit slot per queue; mapped into the device context too. */
        GpuBuffer *relay;        /* a reference (jobs writing it hold more) */
        GpuBuffer *relay_device; /* its mapping in the device context (owned by relay) */
        uint32_t relay_values[GPU_MAX_QUEUES];
};

struct ContextPool {
        sd_event *event;
        const KfdOps *ops;
        ContextPoolOptions opts;
        ContextPoolCallbacks cb;
        ContextMechanism mechanism;
        char mechanism_reason[320];

        Context *device;
        Context *clients;        /* client slots, most recently used first */
        unsigned n_live;         /* client incarnations up */
        uint64_t next_id;
        sd_event_source *idle_timer;
        sd_event_source *reap;   /* deferred: drops incarnations nobody uses */
};

/* context.c */
int context_new(ContextPool *p, const char *key, bool device, Context **ret);
/* Takes over gpu as the slot's incarnation and watches its wake fd. */
int context_adopt(Context *c, GpuContext *gpu, uint64_t bring_up_ns);
/* Ends the current incarnation (nothing may be in flight unless lost).
 * lost: reported to the callbacks as a loss. */
void context_drop(Context *c, bool lost, const char *reason);

/* context-pool.c */
/* Brings up a client incarnation for c, reclaiming an idle one if the pool is full. */
int context_pool_bring_up(ContextPool *p, Context *c, char *err, size_t errlen);
void context_pool_touch(ContextPool *p, Context *c);
void context_pool_unlink(ContextPool *p, Context *c);
/* Soon (on the next loop iteration, outside whatever calls this): drop the
 * incarnations of slots no session uses and with nothing in flight. */
void context_pool_schedule_reap(ContextPool *p);
