/* SPDX-License-Identifier: MIT */
/*
 * enforce_isolation (kfd-isolation.h). Facts: amdgpu's process isolation
 * "serializes access to the graphics engine and adds a cleaner shader which
 * clears the Local Data Store (LDS) and General Purpose Registers (GPRs)
 * between jobs" (Documentation/gpu/amdgpu/process-isolation.rst, Nov 2024);
 * with it on, KFD runs the HWS in single-process mode and sets
 * exec_cleaner_shader in MAP_PROCESS (kfd_packet_manager_v9.c, "drm/amdkfd:
 * Enable processes isolation on gfx9", also the gfx10 path); value 2 is the
 * "legacy" mode and 3 isolation without the cleaner shader ("drm/amdgpu: Add
 * Support for enforcing isolation without Cleaner Shader", May 2025).
 */
#include <stdio.h>
#include <stdlib.h>

#include "kfd/kfd-isolation.h"

KfdIsolation kfd_isolation_read(const char *drm_class_root, unsigned render_minor) {
        char path[512];
        FILE *f;
        int v, n;

        snprintf(path, sizeof path, "%s/renderD%u/device/enforce_isolation", drm_class_root, render_minor);
        f = fopen(path, "re");
        if (!f)
                return KFD_ISOLATION_UNKNOWN;
        n = fscanf(f, "%d", &v);
        fclose(f);
        if (n != 1)
                return KFD_ISOLATION_UNKNOWN;
        switch (v) {
        case 0:
                return KFD_ISOLATION_OFF;
        case 1:
        case 2:
                return KFD_ISOLATION_CLEANER;
        case 3:
                return KFD_ISOLATION_NO_CLEANER;
        default:
                return KFD_ISOLATION_UNKNOWN;
        }
}

const char *kfd_isolation_describe(KfdIsolation i) {
        switch (i) {
        case KFD_ISOLATION_CLEANER:
                return "on: amdgpu clears LDS and registers between processes (enforce_isolation)";
        case KFD_ISOLATION_NO_CLEANER:
                return "processes serialized, but nothing cleared between them (enforce_isolation=3): "
                       "a client's kernel may read LDS and registers another client's left "
                       "(CVE-2023-4969); write 1 to enforce_isolation to clear them";
        case KFD_ISOLATION_OFF:
                return "off (enforce_isolation=0): a client's kernel may read LDS and registers another "
                       "client's left on the same CUs (LeftoverLocals, CVE-2023-4969); write 1 to the GPU's "
                       "enforce_isolation in sysfs to clear them between processes (docs/security.md)";
        default:
                return "unknown: this kernel has no enforce_isolation for the GPU, so LDS and registers "
                       "another client's kernel left may be readable (LeftoverLocals, CVE-2023-4969; "
                       "docs/security.md)";
        }
}
