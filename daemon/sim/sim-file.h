/* SPDX-License-Identifier: MIT */
/*
 * A file descriptor the simulator handed out through open_kfd()/open_render():
 * a real memfd (so close() and fd accounting behave) plus what it stands for.
 * A KFD file owns one reference on its SimProcess; a render-node file is
 * referenced by the SimProcess that ACQUIRE_VM'd it (the kernel keeps that
 * drm file alive the same way). The SimDevice owns the list. A file belongs
 * to the simulated process (SimMm) that opened it: another process naming its
 * number reaches nothing, as fget() in another process's fd table would.
 * The memfd is sealed (empty, no writes): it only stands for the node, and a
 * remote process may hold a copy of it (sim-remote.c). Locked.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sim-topology.h"
#include "sim-types.h"

typedef enum SimFileKind {
        SIM_FILE_KFD,
        SIM_FILE_RENDER,
} SimFileKind;

struct SimFile {
        SimFile *next;
        SimDevice *device;
        SimFileKind kind;
        unsigned n_ref;
        bool open;           /* false after close(); kept while referenced */
        int fd;
        dev_t st_dev;        /* identity of the memfd, to tell a reused fd number apart */
        ino_t st_ino;
        pid_t pid;           /* the opener */
        SimMm *mm;           /* the simulated process that opened it */
        SimProcess *process; /* KFD: the context; RENDER: the context that acquired this VM */
        SimGpu *gpu;         /* RENDER: the GPU whose render node this is */
        SimBo **gem;         /* RENDER: GEM handle h is gem[h - 1] (a reference), NULL if free (sim-drm.h) */
        uint32_t n_gem;
};

/* Opens a new memfd-backed file of kind for mm and links it into the device. */
int sim_file_new(SimMm *mm, SimFileKind kind, SimFile **ret);
/* Finds an open file of mm by fd number, checking that the number still names
 * our memfd; NULL for a number mm did not open. */
SimFile *sim_file_find(SimMm *mm, int fd);
SimFile *sim_file_ref(SimFile *f);
/* Drops a reference; unlinks and frees the file when unreferenced and closed. */
void sim_file_unref(SimFile *f);
