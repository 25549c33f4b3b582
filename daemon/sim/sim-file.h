/* SPDX-License-Identifier: MIT */
/*
 * A file descriptor the simulator handed out through open_kfd()/open_render():
 * a real memfd (so close() and fd accounting behave) plus what it stands for.
 * A KFD file owns one reference on its SimProcess; a render-node file is
 * referenced by the SimProcess that ACQUIRE_VM'd it (the kernel keeps that
 * drm file alive the same way). The SimDevice owns the list. Locked.
 */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

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
        SimProcess *process; /* KFD: the context; RENDER: the context that acquired this VM */
};

/* Opens a new memfd-backed file of kind and links it into the device. */
int sim_file_new(SimDevice *d, SimFileKind kind, SimFile **ret);
/* Finds an open file by fd number, checking that the number still names our memfd. */
SimFile *sim_file_find(SimDevice *d, int fd);
SimFile *sim_file_ref(SimFile *f);
/* Drops a reference; unlinks and frees the file when unreferenced and closed. */
void sim_file_unref(SimFile *f);
