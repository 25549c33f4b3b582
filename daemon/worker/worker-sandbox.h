/* SPDX-License-Identifier: MIT */
/*
 * The worker's sandbox (worker-sandbox.c), entered once its GPU context is
 * up and before it reads anything a client wrote.
 */
#pragma once

#include <stddef.h>

#include "worker/worker-proto.h"

/*
 * Switches to setup->uid/gid (with its supplementary groups) if running as
 * root, forbids new privileges, makes the process undumpable (so that no
 * other process of the same user can ptrace it or read its memory), and
 * installs a system-call filter on every thread: what a GPU context needs
 * (KFD and DRM ioctls, memory mapping, the sockets it already holds, threads,
 * futexes, clocks) and nothing else — no open, exec, new sockets or
 * processes. Returns 0 or a negative errno with err saying what failed.
 */
int worker_sandbox_enter(const WorkerSetup *setup, char *err, size_t errlen);
