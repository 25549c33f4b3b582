/* SPDX-License-Identifier: MIT */
/*
 * Whether amdgpu clears what one process's waves leave on the GPU before the
 * next process's run: its "process isolation" (enforce_isolation in the
 * device's sysfs directory). Off, the LDS and registers a client's kernel
 * left can be read by the next kernel on those CUs, another client's
 * (LeftoverLocals, CVE-2023-4969; docs/security.md). The daemon cannot clear
 * them itself, so it says at start what the kernel does.
 */
#pragma once

typedef enum KfdIsolation {
        KFD_ISOLATION_UNKNOWN,     /* no enforce_isolation file: a kernel without the feature, or no render node */
        KFD_ISOLATION_OFF,         /* 0: processes share the engine, nothing is cleared */
        KFD_ISOLATION_CLEANER,     /* 1 (or 2, "legacy"): serialized, and the cleaner shader runs between them */
        KFD_ISOLATION_NO_CLEANER,  /* 3: serialized, but nothing cleared */
} KfdIsolation;

/*
 * Reads <drm_class_root>/renderD<render_minor>/device/enforce_isolation, as
 * the kernel writes it: one value per partition, separated by spaces
 * (amdgpu_gfx_get_enforce_isolation, Documentation/gpu/amdgpu/
 * process-isolation.rst). The first partition's value counts: a GPU that is
 * not partitioned has one. Values outside 0-3 read as UNKNOWN.
 */
KfdIsolation kfd_isolation_read(const char *drm_class_root, unsigned render_minor);

/* A sentence for the log, saying what the value means for the clients. */
const char *kfd_isolation_describe(KfdIsolation i);
