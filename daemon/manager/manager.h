/* SPDX-License-Identifier: MIT */
/*
 * Manager: the daemon itself — the sd-event loop, the device (real KFD or the
 * simulated GPU), the GPU context, the listener, the sessions and the
 * scheduler. main() makes one; tests make their own.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "contexts/context.h"
#include "endpoints/bus.h"
#include "endpoints/listener.h"
#include "forward.h"
#include "gpu/gpu.h"
#include "scheduler/accounting.h"
#include "scheduler/scheduler.h"
#include "sessions/session-set.h"
#include "policy/policy.h"
#include "sim/sim.h"
#include "util/list.h"
#include "util/time-util.h"
#include "kfd/kfd-gpu-choice.h"
#include "wire/wire.h"

typedef enum DeviceChoice {
        DEVICE_AUTO,
        DEVICE_KFD,
        DEVICE_SIM,
} DeviceChoice;

typedef struct ManagerOptions {
        DeviceChoice device;
        const char *listen_path;   /* NULL: socket activation only */
        unsigned sdma_queues;      /* 0 = default */
        BusChoice bus;
        const char *const *policy_dirs; /* NULL: the standard ones */
        const char *metrics_file;  /* NULL: none; else rewritten every metrics_interval */
        uint64_t metrics_interval_ns;
        unsigned metrics_file_mode; /* its permissions (whatever the umask); 0 = 0600 */
        unsigned max_connections_per_user; /* 0 = unlimited */
        unsigned max_connect_rate_per_user; /* connections a second from one uid; 0 = unlimited */
        uint64_t max_fds_per_user; /* daemon fds for one uid's sessions; 0 = derived, UINT64_MAX = none */
        uint64_t max_fds_per_session; /* daemon fds for one session; 0 = derived, UINT64_MAX = none */
        unsigned max_contexts;     /* client GPU contexts alive at once; 0 = default (64) */
        uint64_t context_idle_ns;  /* give an idle client context up after this; 0 = default (30 s) */
        ContextChoice contexts;    /* --contexts= */
        const char *worker_user;   /* --worker-user=: a root daemon's workers run as this user */
        uint32_t sim_kfd_minor;    /* --device=sim: the simulated KFD uapi minor; 0 = default */
        bool sim_igpu_first;       /* --sim-topology=igpu-first: an iGPU node listed before the GPU */
        SimFaultOrder sim_fault_order; /* --sim-fault-order: what the daemon sees first after a GPU VM fault */
        const char *gpu;           /* --gpu=: which GPU nodes (kfd_gpu_choose_set()); NULL = auto */
        unsigned sim_gpus;         /* --sim-gpus=: discrete GPUs the simulated machine has; 0 = 1 */
} ManagerOptions;

/*
 * One GPU served: its GPU contexts (the device context and the clients'),
 * its scheduler, and which topology node it is and why. The first GPU's
 * device context is the daemon's own KFD process; every other one's is a
 * secondary KFD context of it (docs/architecture.md "Several GPUs").
 */
typedef struct ManagerGpu {
        Manager *manager;
        unsigned index;           /* its position in the served order */
        KfdGpuChoice choice;      /* which topology node, and why (--gpu=) */
        uint32_t gpu_id;
        ContextPool *contexts;
        const GpuDeviceInfo *info;
        Scheduler *scheduler;
        /* What its contexts were made with, to make them again. */
        const KfdOps *ops;
        ContextPoolOptions pool_options;
        ContextPoolCallbacks pool_callbacks;
        SchedulerCallbacks scheduler_callbacks;
        /* Bringing it back after its device context was lost (manager-recover.c). */
        sd_event_source *recover_timer;
        uint64_t recover_start_ns;
        unsigned recoveries;      /* times it was brought back */
        char unavailable[400];    /* SessionGpu.unavailable while it is */
        char ended_why[500];      /* what its sessions are told */
} ManagerGpu;

struct Manager {
        sd_event *event;
        sd_event_source *sigterm_source, *sigint_source;
        sd_event_source *exit_timer;

        SimDevice *sim;
        ManagerGpu gpus[SESSION_MAX_GPUS];
        unsigned n_gpus;          /* 0 without a GPU (no_device) */

        Listener *listener;
        Bus *bus;
        SessionSet set;          /* the sessions, the policy in force, the accounts */

        sd_event_source *sighup_source;
        sd_event_source *sigusr2_source; /* --device=sim: a simulated GPU reset */
        char *metrics_file;
        uint64_t metrics_interval_ns;
        unsigned metrics_file_mode;
        sd_event_source *metrics_timer;

        bool shutting_down;
        bool device_lost;
        char no_device[160];     /* --device=kfd without a GPU: why (SessionSet.no_device) */
        int exit_error;          /* a failure that stopped the daemon after start-up (the bus name) */
        char device_lost_reason[256]; /* what sessions are told at the end */
};

int manager_new(const ManagerOptions *opts, Manager **ret);
Manager *manager_free(Manager *m);
/* Runs the loop until SIGTERM/SIGINT and the drain are done. Returns 0, or
 * -errno when what stopped it was a failure (the GPU context lost, the bus
 * name refused); main() exits 1 then. */
int manager_run(Manager *m);
/* Starts an orderly shutdown: stop accepting, fail pending jobs, wait for the
 * GPU to retire what it has, then exit the loop. */
void manager_begin_shutdown(Manager *m);

/* Picks and opens the device per the options (DeviceChoice, queues, the
 * context pool's limits); logs a one-line reason on failure. */
int manager_open_device(Manager *m, const ManagerOptions *opts);

/*
 * manager-recover.c: GPU index's device context was lost (reason). Where it
 * is a secondary KFD context of its own (KFD 1.19, every GPU but the
 * first), the GPU is brought back inside the running daemon: its sessions
 * end (SessionEnded with reconnect set; they come back to it when it is
 * served again), then its GPU contexts and scheduler are made anew, while
 * the other GPUs' sessions go on. Returns false where that cannot be (the
 * first GPU, whose device context is the daemon's own KFD process, or a GPU
 * sharing it on an older kernel): the caller ends the daemon as before.
 */
bool manager_gpu_recover(ManagerGpu *g, const char *reason);
/* Ends the daemon because its GPU contexts cannot go on (manager-recover.c). */
void manager_device_lost(Manager *m, uint64_t context_id, const char *reason);
