/* SPDX-License-Identifier: MIT */
/*
 * The render-node calls a relayed client may make on its KFD process's
 * render file (context-kfd-process.c's served view): what libdrm_amdgpu's
 * amdgpu_device_initialize() asks — DRM_IOCTL_VERSION and AMDGPU_INFO —
 * which ROCr 5.7 and later make for every GPU agent (docs/rocm.md
 * "Versions"). The answers are the kernel's (or the simulator's) for the
 * GPU the session may use; only queries about the GPU itself pass, never
 * ones about what others do with it.
 */
#pragma once

#include <stdbool.h>

/*
 * Whether the client may make request with arg on its render file: true for
 * DRM_IOCTL_VERSION, and for AMDGPU_INFO queries of what the GPU is (
 * ACCEL_WORKING, DEV_INFO, VRAM_GTT, HW_IP_INFO, HW_IP_COUNT, FW_VERSION,
 * and READ_MMR_REG of the configuration registers libdrm reads). False for
 * anything else, with a debug line naming it: the usage queries (VRAM_USAGE,
 * GTT_USAGE, MEMORY, SENSOR, ...) would tell one tenant what the others do.
 */
bool kfd_render_call_allowed(unsigned long request, const void *arg);
