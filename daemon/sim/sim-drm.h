/* SPDX-License-Identifier: MIT */
/*
 * The render node's own ioctls on the simulated GPU: the amdgpu GEM buffer
 * calls a daemon needs on a kernel whose KFD cannot export dma-bufs (uapi
 * < 1.12, kfd-facts §7.4) — AMDGPU_GEM_CREATE, GEM_CLOSE,
 * PRIME_HANDLE_TO_FD and AMDGPU_GEM_MMAP — and what libdrm_amdgpu's
 * amdgpu_device_initialize() asks of a render node: DRM_IOCTL_VERSION and
 * AMDGPU_INFO (sim-drm-info.c). A GEM handle is a reference on a SimBo held by one
 * render-node file (its handle table, SimFile.gem), so a BO made here is the
 * same kind of object KFD allocates: IMPORT_DMABUF of its PRIME fd maps it
 * into a GPU VM, and it outlives its handle while a KFD handle or a dma-buf
 * fd holds it. Locked, like all of daemon/sim.
 */
#pragma once

#include <stdbool.h>

#include "sim-types.h"

struct drm_version;
struct drm_amdgpu_info;

/*
 * Whether request is one of the render-node ioctls the simulator runs. They
 * are matched on the whole request word (libdrm's DRM_IOCTL_* values), where
 * drm_ioctl() looks at the number only and applies its own size and
 * direction: another word on a render-node file is -ENOTTY here.
 */
bool sim_drm_ioctl_simulated(unsigned long request);
/*
 * Runs request on the render-node file f of the calling process, with
 * drm_ioctl()'s copy rules (the caller's _IOC_SIZE bytes in, zero-extended;
 * as many back, also on error). Returns 0 or a negative errno: -ENOTTY for a
 * request the simulator does not run, -EFAULT for a NULL arg. Locked.
 */
int sim_drm_ioctl(SimFile *f, unsigned long request, void *arg);
/* drm_version() (sim-drm-info.c): the pointers in v are the caller's
 * memory. 0 or -EFAULT. */
int sim_drm_version(struct drm_version *v);
/* amdgpu_info_ioctl() on f's GPU (sim-drm-info.c): return_pointer is the
 * caller's memory of return_size bytes. Locked. */
int sim_drm_info(SimFile *f, struct drm_amdgpu_info *info);
/* Drops every GEM handle of f (drm_gem_release, at the file's last
 * reference). Locked. */
void sim_drm_file_release(SimFile *f);
/* Whether f holds a GEM handle of bo (an mmap of f may map it). Locked. */
bool sim_drm_file_has_bo(SimFile *f, SimBo *bo);
/* GEM handles open on the device's render-node files, for tests. Locked. */
unsigned sim_drm_count_handles(SimDevice *d);
