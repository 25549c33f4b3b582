/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU's identity and its KFD sysfs topology. SimGpuInfo holds
 * the node properties (a gfx1030 part) together with the queue buffer sizes
 * that kfd_queue.c derives from them; sim_topology_write() publishes them as
 * the directory tree the daemon's topology reader parses. The SimDevice owns
 * one SimGpuInfo and the directory.
 */
#pragma once

#include <stdint.h>

typedef struct SimGpuInfo {
        uint32_t gpu_id;
        uint32_t gfx_target_version;
        uint32_t cu_count;
        uint32_t simd_count;
        uint32_t simd_per_cu;
        uint32_t max_waves_per_simd;
        uint32_t lds_size_in_kb;
        uint32_t wave_front_size;
        uint32_t array_count;
        uint32_t simd_arrays_per_engine;
        uint32_t cu_per_simd_array;
        uint32_t max_slots_scratch_cu;
        uint32_t vendor_id;
        uint32_t device_id;
        uint32_t pci_revision;     /* the PCI revision (with device_id: the marketing name, libdrm's amdgpu.ids) */
        uint32_t location_id;
        uint32_t domain;
        uint32_t drm_render_minor;
        uint32_t num_sdma_engines;
        uint32_t num_sdma_xgmi_engines;
        uint32_t num_sdma_queues_per_engine;
        uint32_t num_cp_queues;
        uint32_t num_xcc;
        uint32_t max_engine_clk_fcompute;
        uint32_t fw_version;
        uint32_t sdma_fw_version;
        uint32_t capability;
        uint64_t unique_id;        /* the node's unique_id property: the GPU's serial (amdgpu_device.unique_id) */
        /* Derived exactly as kfd_queue.c does (kfd-facts §1.6.3). */
        uint32_t ctl_stack_size;
        uint32_t cwsr_size;
        uint32_t debug_memory_size;
        uint32_t eop_buffer_size;
        uint64_t cwsr_bo_size;
        uint64_t vram_size;
        /* State, under the device lock: bytes of this GPU's VRAM that BOs hold. */
        uint64_t vram_used;
} SimGpuInfo;

/* Fills a gfx1030 description with cu_count CUs and vram_size bytes of VRAM. */
void sim_gpu_info_init(SimGpuInfo *g, uint32_t gpu_id, uint32_t cu_count, uint64_t vram_size);
/* The gpu_id of the integrated GPU (a hash in the kernel too). */
#define SIM_IGPU_GPU_ID 0x5A0Bu
/* Fills the description of a desktop Ryzen 7000's integrated GPU (gfx1036,
 * 2 CUs, 512 MiB carve-out, renderD128, PCI 0000:10:00.0). */
void sim_gpu_info_init_igpu(SimGpuInfo *g);

/*
 * Writes <root>/topology/{generation_id,system_properties,nodes/0 (CPU),
 * nodes/1..n (gpus[0..n-1], in that order)}: directories 0755, files 0444
 * whatever the umask, so that processes of other users can read it. root
 * must exist. Returns 0 or a negative errno from the file system.
 */
int sim_topology_write(const SimGpuInfo *const *gpus, unsigned n, const char *root);

/* Removes the tree below root and root itself (rm -r). Returns 0 or -errno. */
int sim_topology_remove(const char *root);

/*
 * Creates a topology directory "<tmpdir>/kfdbroker-sim-<pid>-XXXXXX" for this
 * process, mode 0755 (readable by processes of other users, sim-remote.h;
 * only its creator writes it). Directories of that name left by a process of ours that is gone
 * (a daemon killed before it could remove its own) are removed first. On
 * success *ret is the new path (free it).
 */
int sim_topology_mkdtemp(const char *tmpdir, char **ret);
