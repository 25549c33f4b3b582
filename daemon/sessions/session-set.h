/* SPDX-License-Identifier: MIT */
/*
 * SessionSet: every connected session, and what a session needs from the
 * rest of the daemon — the event loop, the scheduler and the GPU contexts
 * its work goes to, the device's description, the policy in force with the
 * defaults under it, the accounts that outlive sessions — handed in by the
 * Manager that owns it. Layers above (the listener, the D-Bus API, the
 * metrics) reach sessions through it; sessions tell the layers above what
 * happened through its callbacks, never by including them.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "contexts/context.h"
#include "gpu/gpu.h"
#include "policy/policy.h"
#include "scheduler/accounting.h"
#include "scheduler/scheduler.h"
#include "sessions/fence-watch.h"
#include "sessions/forward.h"
#include "sessions/tally.h"
#include "util/list.h"
#include "wire/wire.h"

typedef struct SessionSetCallbacks {
        void *userdata;
        void (*opened)(Session *s, void *userdata);
        void (*closed)(Session *s, const char *reason, void *userdata);
        /* A job failed with a message for the client (positive errno). */
        void (*job_failed)(Session *s, uint64_t fence, int error, const char *message, void *userdata);
} SessionSetCallbacks;

/*
 * One GPU the daemon serves: its scheduler and GPU contexts, and what it
 * is. index is its position in the served order (kfd_gpu_choose_set()):
 * what `kfdbrokerctl status`, the protocol and Devices= call it.
 */
struct SessionGpu {
        unsigned index;
        Scheduler *scheduler;
        ContextPool *contexts;
        const GpuDeviceInfo *info;
        const char *node, *node_reason; /* the manager's choice of GPU (kfd-gpu-choice.h) */
        /* Sessions with anything on it — connected, or ended with jobs
         * still to retire — until they are freed: a GPU being brought back
         * (manager-recover.c) waits for none to be left. */
        unsigned n_users;
        /* While the GPU is brought back after its device context was lost:
         * why (the manager's text); no session is put on it, and a Hello
         * that names it is EAGAIN. NULL otherwise. */
        const char *unavailable;
};

struct SessionSet {
        /* Handed in by the owner, which keeps them alive longer than any session. */
        sd_event *event;
        SessionGpu gpus[SESSION_MAX_GPUS];
        unsigned n_gpus;
        /* Set when there is no GPU to serve (kfdbrokerd --device=kfd on a
         * machine without one): why, said to every client (ENODEV) and
         * every D-Bus caller; then n_gpus is 0. */
        const char *no_device;
        /* The main socket's path (the listener's), NULL if unknown: a
         * connection through GPU N's socket beside it (gpu-socket.h) may use
         * GPU N only. */
        char *socket_path;
        SessionSetCallbacks cb;

        /* The policy in force, the directories it comes from, and what a
         * session gets where no rule says otherwise. */
        Policy *policy;
        char **policy_dirs;
        bool policy_reload_failed; /* STATUS= says so until a reload succeeds */
        PolicyLimits default_policy;
        WireLimits default_limits;

        /* The device context's waiter thread wakes clients sleeping on their
         * fence page through it (fence-watch.h); made before the device. */
        FenceWatch fence_watch;
        AccountTable accounts;
        TallyTable tallies; /* per uid and per unit; each lives while a session holds it or it is charged */
        /* Freed buffers whose dma-buf outlived their session, with a probe
         * to see the last copy go (session-quota.c, "Kept buffers"). */
        LIST_HEAD(KeptBuffer, kept);
        unsigned n_kept;
        LIST_HEAD(Session, sessions);
        unsigned n_sessions;
        unsigned max_connections_per_user; /* 0 = unlimited */
        unsigned max_connect_rate_per_user; /* connections taken per second from one uid; 0 = unlimited */
        sd_event_source *turn;             /* session-admit.c: when waiting connections get their turn */
        /* File descriptor budgets (session-fds.c). */
        uint64_t fd_limit;         /* RLIMIT_NOFILE at start; UINT64_MAX: none */
        uint64_t fd_base;          /* open before any session: the daemon's own, its GPU context's */
        uint64_t fd_reserve;       /* never given to buffers: new connections, client GPU contexts */
        uint64_t max_fds_per_user; /* one uid's sessions together (--max-fds-per-user); UINT64_MAX: none */
        uint64_t max_fds_per_session; /* one session (--max-fds-per-session); UINT64_MAX: none */
        uint64_t fds_held;         /* for all sessions together */
        uint64_t next_session_id;
        uint64_t start_ns;
        bool shutting_down;               /* no new sessions */

        /* Young sessions (see below). */
        sd_event_source *grow_up;
        unsigned n_young;
        uint64_t grown_up_before_ns; /* every session opened before this is established */
};

/* Fixes the fd budgets from RLIMIT_NOFILE and the fds open now (after the
 * device is up); max_fds_per_user, max_fds_per_session 0: derived
 * (session-fds.c). */
void session_set_init_fds(SessionSet *set, uint64_t max_fds_per_user, uint64_t max_fds_per_session);
/* Fits the default limits to the GPU served (policy_limits_fit_device()) and logs them. */
void session_set_init_memory(SessionSet *set, uint64_t vram_size, bool copies_visible);

/*
 * Young sessions. A session is young for its first SESSION_YOUNG_NS, and its
 * socket is served at SESSION_PRIORITY_YOUNG: after every established
 * session's (SD_EVENT_PRIORITY_NORMAL) and before new connections are taken
 * (the listener's priority is lower still). So a flood of connections — each
 * one a session set up, a Hello and a hang-up — waits while the clients that
 * were already there are served, instead of the other way round
 * (tests/bench/bench-flood). A timer makes sessions established when they
 * reach that age, so a young session is never starved for long by busy
 * established ones.
 */
#define SESSION_YOUNG_NS (50ull * 1000000ull)
#define SESSION_PRIORITY_YOUNG (SD_EVENT_PRIORITY_NORMAL + 5)

/* Takes a connection the listener accepted: sets its session up now, or
 * when its user's connect rate allows (session-admit.c); fd is the set's. */
void session_set_admit(SessionSet *set, int fd);
/* Connections waiting for their turn, all users together. */
unsigned session_set_n_waiting(SessionSet *set);

/* s was just opened: serve it as young, and make sure it will grow up. */
void session_set_add_young(SessionSet *set, Session *s);
/* s goes away while young. */
void session_set_forget_young(SessionSet *set, Session *s);

/* Loads the policy from dirs (NULL: the standard ones) and sets the
 * defaults. On a broken policy: -EBADMSG (or another errno) with
 * "FILE:LINE: message" in err. */
int session_set_init(SessionSet *set, const char *const *policy_dirs, char *err, size_t errlen);
/* Disconnects every session and frees what the set owns. */
void session_set_done(SessionSet *set);

Session *session_set_find(SessionSet *set, uint64_t id);
/* Loads the policy files again and re-resolves every session's limits
 * (sessions stay connected). On a broken file, keeps the old policy and
 * returns -EBADMSG with "FILE:LINE: message" in err. Logs the outcome
 * (KFDBROKER_MESSAGE_POLICY_RELOADED or _RELOAD_FAILED, with origin, e.g.
 * "SIGHUP" or "D-Bus", in KFDBROKER_RELOAD_ORIGIN). */
int session_set_reload_policy(SessionSet *set, const char *origin, char *err, size_t errlen);
/* The GPU of that index, NULL past the served ones. */
SessionGpu *session_set_gpu(SessionSet *set, unsigned index);
/* Runs every GPU's scheduler. */
void session_set_run_schedulers(SessionSet *set);
/* Publishes every session's page changes. */
void session_set_flush(SessionSet *set);
/* The GPU context ctx is being lost: the sessions running there are told. */
void session_set_context_lost(SessionSet *set, Context *ctx, const char *reason);
/*
 * Ends every connected session with anything on GPU index — its own GPU or
 * one it uses beside (Session.on) — (SessionEnded with reconnect
 * set, error ESHUTDOWN and why): its GPU is being brought back
 * (manager-recover.c). Returns how many it ended.
 */
unsigned session_set_end_gpu(SessionSet *set, unsigned index, const char *why);
