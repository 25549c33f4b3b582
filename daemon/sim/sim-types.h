/* SPDX-License-Identifier: MIT */
/*
 * Forward declarations of the simulated GPU's objects and the constants they
 * share, so that each object's header can name the others. Locking rule for
 * all of daemon/sim: every object below is guarded by its SimDevice's one
 * mutex (SimDevice.lock); functions documented "locked" expect the caller to
 * hold it. Engine threads take the same lock around each polling pass; the CP
 * engine releases it while the interpreter runs a dispatch (sim-cp.c).
 */
#pragma once

#include <stdint.h>

#include "kfd/kfd-uapi.h"

typedef struct SimDevice SimDevice;
typedef struct SimMm SimMm;
typedef struct SimFile SimFile;
typedef struct SimProcess SimProcess;
typedef struct SimPdd SimPdd;
typedef struct SimGpu SimGpu;
typedef struct SimBo SimBo;
typedef struct SimMem SimMem;
typedef struct SimEvent SimEvent;
typedef struct SimWaiter SimWaiter;
typedef struct SimQueue SimQueue;
typedef struct SimEngine SimEngine;
typedef struct SimCpState SimCpState;
typedef struct SimRemoteServer SimRemoteServer;
typedef struct SimRemoteRegistry SimRemoteRegistry;
typedef struct SimBoCache SimBoCache;
typedef struct SimLineCache SimLineCache;
typedef struct SimPopulator SimPopulator;

/* kfd_priv.h KFD_MAX_NUM_OF_QUEUES_PER_PROCESS: queue ids and doorbell indices. */
#define SIM_MAX_QUEUES_PER_PROCESS 1024u
/* 8-byte doorbells on gfx9+ (kfd_doorbell.c write_kernel_doorbell64). */
#define SIM_DOORBELL_COUNT (KFD_DOORBELL_SLICE_SIZE / 8u)
/* GPUVM user range on gfx10: 48-bit VA, user half (kfd_flat_memory.c). */
#define SIM_GPUVM_BASE 0x1000000ULL
#define SIM_GPUVM_LIMIT ((1ULL << 47) - 1)
/* x86-64 TASK_SIZE_MAX, what access_ok() tests user pointers against. */
#define SIM_TASK_SIZE_MAX ((1ULL << 47) - 4096)
