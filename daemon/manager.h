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

#include "forward.h"
#include "gpu/gpu.h"
#include "sim/sim.h"
#include "util/list.h"
#include "wire.h"

typedef enum DeviceChoice {
        DEVICE_AUTO,
        DEVICE_KFD,
        DEVICE_SIM,
} DeviceChoice;

typedef struct ManagerOptions {
        DeviceChoice device;
        const char *listen_path; /* NULL: socket activation only */
        unsigned sdma_queues;    /* 0 = default */
} ManagerOptions;

struct Manager {
        sd_event *event;
        sd_event_source *gpu_source;
        sd_event_source *sigterm_source, *sigint_source;
        sd_event_source *exit_timer;

        SimDevice *sim;
        GpuContext *gpu;
        const GpuDeviceInfo *info;

        Listener *listener;
        Scheduler *scheduler;

        LIST_HEAD(Session, sessions);
        unsigned n_sessions;
        uint64_t next_session_id;

        WireLimits default_limits;
        uint64_t start_ns;
        uint64_t jobs_completed, jobs_failed;
        bool shutting_down;
};

int manager_new(const ManagerOptions *opts, Manager **ret);
Manager *manager_free(Manager *m);
/* Runs the loop until SIGTERM/SIGINT and the drain are done. Returns 0 or -errno. */
int manager_run(Manager *m);
/* Starts an orderly shutdown: stop accepting, fail pending jobs, wait for the
 * GPU to retire what it has, then exit the loop. */
void manager_begin_shutdown(Manager *m);

/* Picks and opens the device per DeviceChoice; fills a one-line reason on failure. */
int manager_open_device(Manager *m, DeviceChoice choice, unsigned sdma_queues);

uint64_t now_ns(void);
