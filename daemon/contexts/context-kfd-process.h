/* SPDX-License-Identifier: MIT */
/*
 * A relayed ROCm program's KFD process (context-kfd-process.c): the KFD
 * context the program's calls run in, and the daemon's own GPU context
 * beside them — a secondary KFD context of the daemon's where the kernel has
 * them (KFD 1.19), else the primary context of a proxy worker process whose
 * calls the daemon makes over sim-remote's wire (worker.c, WORKER_SETUP_KFD_PROXY),
 * which serves it with the same code in its TRUSTED flavour.
 */
#pragma once

#include <stdint.h>

#include "kfd/kfd-ops.h"
#include "sim/sim-remote.h"

/* context-kfd-process.c: a relayed client's KFD process. */
typedef struct KfdProcess KfdProcess;
enum {
        /* A secondary KFD context of the caller's (CREATE_PROCESS, KFD 1.19);
         * else the primary context of the process base's calls run in (a
         * proxy worker's). */
        KFD_PROCESS_SECONDARY = 1u << 0,
        /* The served view serves the daemon, in a proxy worker: every call
         * on the process's two files passes, and its doorbell page is a page
         * of ours whose slots are copied to the real one at each
         * doorbell_written() (the daemon cannot map another process's). */
        KFD_PROCESS_TRUSTED = 1u << 1,
};
#define KFD_PROCESS_MAX_GPUS 8u

/* Opens it through base (open_kfd, CREATE_PROCESS with SECONDARY: -EOPNOTSUPP
 * before KFD 1.19; a render file of renderD<render_minor>); the client sees
 * the GPU gpu_id alone (and those kfd_process_add_gpu() adds). base_free
 * (NULL: none) is called on base when the process is gone. err says what
 * failed. The caller's reference goes to the server with kfd_process_served(). */
int kfd_process_new(const KfdOps *base, void (*base_free)(const KfdOps *), unsigned flags, uint32_t gpu_id,
                    unsigned render_minor, KfdProcess **ret, char *err, size_t errlen);
/* One more GPU the client sees (its calls naming gpu_id pass, ACQUIRE_VM with
 * the process's render file of renderD<render_minor>, opened here through
 * base; TRUSTED: a doorbell slice shadow of its own), before the process is
 * served. Any flavour: a proxy worker adds its GPUs before its sandbox, and
 * the daemon's side of that process the same GPUs (its base's open_render
 * is the worker's). -EEXIST if it is there; up to KFD_PROCESS_MAX_GPUS
 * (-EOPNOTSUPP); the open's error. err says what failed. */
int kfd_process_add_gpu(KfdProcess *p, uint32_t gpu_id, unsigned render_minor, char *err, size_t errlen);
/* The table for the daemon's own GPU context in the process. */
const KfdOps *kfd_process_daemon_ops(KfdProcess *p);
/* The process as sim_remote_serve_process() serves it; its free() drops the
 * caller's reference. */
SimRemoteProcess kfd_process_served(KfdProcess *p);
