/* SPDX-License-Identifier: MIT */
/*
 * KfdRelay: what the daemon checks around the KFD calls of a relayed client
 * (OpenKfd, session-kfd.c), on the threads that serve them: memory charged
 * to the session as its buffers are, before the allocation is made, under
 * the same limits (over one: -ENOMEM, what the thunk maps to out of memory;
 * never -EAGAIN or -EINTR, which it retries for ever), and what a sandboxed
 * client must not have refused as a kernel without the feature refuses it,
 * with one log line per feature. Shared by the session (the event loop, which
 * does the charging) and the KFD process's server (its threads): reference
 * counted, the session's side detached when the session ends.
 */
#pragma once

#include <systemd/sd-event.h>

#include "sim/sim-remote.h"

typedef struct KfdRelay KfdRelay;
typedef struct Session Session;
typedef struct Job Job;
typedef struct Context Context;

/* A relay for s, charging on its event loop. -ENOMEM, or an eventfd/sd-event error. */
int kfd_relay_new(Session *s, sd_event *event, KfdRelay **ret);
/* The hooks to serve the KFD process with; userdata is the relay, which the
 * server holds a reference to (given back at end()). */
extern const SimRemoteHooks kfd_relay_hooks;
KfdRelay *kfd_relay_ref(KfdRelay *r);
void kfd_relay_unref(KfdRelay *r);
/* The session ends: its charges are given back, waiting calls fail with
 * -ENODEV, and the relay no longer touches it. Drops the session's reference. */
void kfd_relay_detach(KfdRelay *r);
/* The daemon's GPU context in the process is up (ctx, from
 * context_pool_kfd_relay_begin(); the relay keeps a reference): its
 * queues can be relayed. -errno from making the relay's pages and timer. */
int kfd_relay_attach(KfdRelay *r, Context *ctx);
/* Another GPU of the session's its KFD process sees (the session's GPU
 * @index, with @gpu_id and renderD<render_minor>): the client's buffers on it
 * are charged there (BufferMemory= per GPU) and mapped through the process's
 * render file of it. Before kfd_relay_attach(); at most SESSION_MAX_GPUS in
 * all. */
void kfd_relay_add_gpu(KfdRelay *r, unsigned index, uint32_t gpu_id, unsigned render_minor);
/* A relayed job finished (kfd-relay-queue.c): its queue goes on, or stops
 * at a failure. Loop thread. */
void kfd_relay_job_done(KfdRelay *r, Job *j, int error, const char *message);
/* Bytes charged to the session now (GTT and VRAM together). */
uint64_t kfd_relay_charged(KfdRelay *r);
