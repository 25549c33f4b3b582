/* SPDX-License-Identifier: MIT */
/*
 * The structures behind kfd-relay.h, shared by kfd-relay.c (the calls: the
 * checks, the charging, the hooks of the KFD process's server) and
 * kfd-relay-queue.c (the client's AQL queues, relayed to compute queues the
 * daemon owns in the client's KFD process).
 *
 * Threads: the hooks run on the server's threads, several at once; the
 * charging, the queues and the jobs on the session's event loop. A server
 * thread that needs the loop queues a LoopCall, wakes the loop through the
 * eventfd and waits. The lock guards what both sides touch.
 */
#pragma once

#include <pthread.h>

#include "gpu/gpu.h"
#include "sessions/job.h"
#include "sessions/kfd-relay.h"

typedef struct LoopCall LoopCall;
struct LoopCall {
        LoopCall *next;
        /* Either a charge: bytes > 0 to charge (waited for), < 0 to give back. */
        int64_t delta;
        GpuPlacement placement;
        unsigned gpu;            /* the GPU it is charged on (the session's index of it: BufferMemory= per GPU) */
        unsigned objects;        /* buffer objects given back with a give-back (a charge is one) */
        /* Or work for the loop (the session attached), its result in r. */
        int (*fn)(KfdRelay *r, void *data);
        void *data;
        bool done;
        int r;
};

typedef struct RelayGpu {
        unsigned index;          /* the session's (daemon's) index of the GPU */
        uint32_t gpu_id;
        unsigned render_minor;
        int render_fd;
        /* Another GPU's (gpus[1..]): the daemon's GPU context in the process
         * on it, made at the first queue there (context_pool_kfd_relay_join(),
         * a use), and what the session has there, whose streams its queues'
         * jobs run in. Loop thread. gpus[0] has KfdRelay.ctx and the
         * session's home. */
        Context *ctx;
        SessionOnGpu *on;
        bool sdma_bound;         /* its SDMA stream runs on an SDMA queue of ctx */
} RelayGpu;

typedef struct RelayBo {
        uint64_t handle, size, va, mmap_offset;
        uint32_t flags;
        GpuPlacement placement;
        unsigned gpu;            /* its GPU: the index into KfdRelay.gpus[] */
        void *cpu;               /* the daemon's mapping (loop thread), NULL until needed */
        bool freed;              /* FREE_MEMORY_OF_GPU'd: unmapped and forgotten by the loop */
        bool imported;           /* IMPORT_DMABUF: not charged, no view (size 0) */
} RelayBo;

#define RELAY_MAX_QUEUES 64u

/* A client AQL queue (kfd-relay-queue.c). Loop thread only, once made. */
typedef struct RelayQueue {
        bool used;
        uint32_t id;             /* what the client knows it by */
        uint32_t gen;            /* bumped each time the slot is made: jobs of an older one are not its */
        bool suspended;          /* UPDATE_QUEUE with queue_percentage 0 */
        uint64_t ring_va;        /* 64-byte packets */
        uint32_t n_slots;
        uint64_t queue_va;       /* its amd_queue_t */
        uint64_t next;           /* the next packet index to read */
        uint64_t retired;        /* packets finished (what read_dispatch_id says) */
        unsigned inflight;       /* its jobs not finished */
        bool stopped;            /* a packet we could not run: no more of it runs */
        /* An SDMA queue (ROCr's BlitSdma): a byte ring, its read and write
         * offsets (64-bit, in bytes, not wrapped) in the client's memory;
         * next and retired count bytes. */
        bool sdma;
        uint64_t rptr_va, wptr_va;
        uint32_t ring_bytes;
        bool barrier_wait;       /* its next packet waits for signals the CPU must see reach 0 */
        unsigned gpu;            /* its GPU: the index into KfdRelay.gpus[] */
} RelayQueue;

struct KfdRelay {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned n_ref;
        Session *session;        /* NULL once detached */
        uint64_t session_id;
        int eventfd;
        sd_event_source *source;
        LoopCall *pending;
        RelayBo *bos;            /* what the process holds, as charged (lock) */
        size_t n_bos, cap_bos;
        uint64_t charged[SESSION_MAX_GPUS][2]; /* by the session's GPU index and placement; loop thread */
        uint64_t objects;        /* buffer objects charged (each an object and its daemon fds); loop thread */
        unsigned refused_logged; /* features logged once (bit per Feature) */
        uint32_t max_events;     /* the session's Events= when the relay began */
        uint32_t n_events;       /* events the process holds (lock) */
        bool events_logged;
        uint64_t client_events[KFD_SIGNAL_EVENT_LIMIT / 64]; /* ids the client made (lock) */

        /* The daemon's GPU context in the process (kfd_relay_attach()). */
        Context *ctx;            /* loop thread; NULL once gone */
        /* The process's KfdOps, for the relay's views of its buffers
         * (RelayBo.cpu): a KFD file of it opened through them (ops_keep_fd)
         * keeps the process's table alive while views exist, however early
         * its server ends; both go in kfd_relay_views_drop(). r->lock. */
        const KfdOps *ops;
        int ops_keep_fd;
        int render_fd;           /* the daemon's render file there, shared with the client; -1 before */
        uint32_t gpu_id;
        unsigned render_minor;
        /* The GPUs the process sees: [0] the daemon's (the three above, the
         * session's own GPU), then the others the session may use
         * (kfd_relay_add_gpu()), each with the process's render file of it,
         * opened through ops at attach (-1 before and after). */
        RelayGpu gpus[SESSION_MAX_GPUS];
        size_t n_gpus;
        bool released;           /* the server let the process go: ops are gone */
        bool attached;           /* kfd_relay_attach() ran (lock) */
        bool ctx_dropped;        /* the daemon's context in the process went (lock) */
        sd_event_source *drop_source; /* kfd_relay_detach(): the context goes on the next iteration */

        /* Queues (kfd-relay-queue.c). */
        int doorbell_memfd;      /* the client's doorbell page, 8 KiB */
        int mmio_memfd;          /* a harmless page for the HDP flush page it asks for */
        RelayQueue queues[RELAY_MAX_QUEUES]; /* loop thread */
        bool queues_logged;       /* Queues= refusal logged */
        sd_event_source *poll;   /* rescans the rings */
        uint64_t last_activity_ns;
        uint64_t jobs_relayed;
        unsigned jobs_in_flight;
        sd_event *event;
};

/* kfd-relay.c */
/* Runs fn(r, data) on the loop and returns its result; -ENODEV when the
 * session is gone. Server threads only. */
int kfd_relay_on_loop(KfdRelay *r, int (*fn)(KfdRelay *r, void *data), void *data);
/* Whether the client made this event / holds this buffer handle (lock taken). */
bool kfd_relay_client_event(KfdRelay *r, uint32_t id);
/* The daemon's view of client memory [va, va + size): a pointer into its
 * mapping of the buffer that holds it, or NULL. Loop thread. */
void *kfd_relay_cpu(KfdRelay *r, uint64_t va, uint64_t size);

/* kfd-relay-queue.c */
/* Server threads: the queue ioctls of the client, answered by the relay
 * (1) or refused (negative errno); 0 for a call that is not about queues. */
int kfd_relay_queue_ioctl(KfdRelay *r, unsigned long request, void *arg);
/* Loop thread: reads what the client's queues have and relays it. */
void kfd_relay_queues_scan(KfdRelay *r);
/* Loop thread: the relay's timer and pages; their end. */
int kfd_relay_queues_init(KfdRelay *r);
void kfd_relay_queues_done(KfdRelay *r);
/* Loop thread: the daemon's GPU contexts on the process's other GPUs go
 * (before the first's: they map its event page). */
void kfd_relay_gpus_leave(KfdRelay *r);
/* Loop thread, as the first's incarnation ends (on_context_dropped()): the
 * others go with it, now — lost with it if it was lost. */
void kfd_relay_gpus_follow(KfdRelay *r);
/* Loop thread, when the session goes: its SessionOnGpus of those GPUs (which
 * go with it, perhaps already) are forgotten, the contexts stay. */
void kfd_relay_gpus_unbind(KfdRelay *r);
/* Unmaps the relay's views of the client's buffers and lets go of the
 * process's table (ops, ops_keep_fd); takes r->lock. */
void kfd_relay_views_drop(KfdRelay *r);
