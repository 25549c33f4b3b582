/* SPDX-License-Identifier: MIT */
/*
 * The KFD topology as read from sysfs (kfd-facts §1.3): one KfdNode per GPU
 * node (gpu_id != 0) under <sysfs_root>/topology/nodes/N/. Properties are the
 * "name value" lines of nodes/N/properties; unknown names are ignored, missing
 * optional ones (cwsr_size, ctl_stack_size, num_xcc) are 0.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct KfdNode {
        unsigned node_index;   /* N in topology/nodes/N */
        uint32_t gpu_id;       /* nodes/N/gpu_id */
        char name[64];         /* nodes/N/name (e.g. "gfx1030" or a marketing name) */

        uint32_t cpu_cores_count;  /* > 0 on an APU's combined CPU+GPU node */

        uint32_t simd_count;
        uint32_t simd_per_cu;
        uint32_t max_waves_per_simd;
        uint32_t lds_size_in_kb;
        uint32_t wave_front_size;
        uint32_t array_count;
        uint32_t simd_arrays_per_engine;
        uint32_t cu_per_simd_array;
        uint32_t max_slots_scratch_cu;
        uint32_t gfx_target_version; /* major*10000 + minor*100 + stepping */
        uint32_t vendor_id;
        uint32_t device_id;
        uint32_t location_id;
        uint32_t domain;
        uint32_t drm_render_minor;
        uint32_t num_sdma_engines;
        uint32_t num_sdma_xgmi_engines;
        uint32_t num_sdma_queues_per_engine;
        uint32_t num_cp_queues;
        uint32_t num_xcc;          /* 1 if absent */
        uint32_t cwsr_size;        /* 0 if not exported (older kernels) */
        uint32_t ctl_stack_size;   /* 0 if not exported */
        uint64_t local_mem_size;   /* from mem_banks/0/properties size_in_bytes, 0 if absent */
        uint32_t max_engine_clk_fcompute;
        uint32_t fw_version;
        uint32_t capability;
} KfdNode;

/* Up to 16 GPU nodes; more are ignored. */
#define KFD_TOPOLOGY_MAX_NODES 16

typedef struct KfdTopology {
        unsigned n_nodes;
        KfdNode nodes[KFD_TOPOLOGY_MAX_NODES];
} KfdTopology;

/*
 * Reads <sysfs_root>/topology/nodes/. Returns the number of GPU nodes found
 * (0 if none), -ENOENT if the directory does not exist, -EPERM/-EACCES if the
 * device cgroup hides it, -EBADMSG for a malformed properties line.
 */
int kfd_topology_read(const char *sysfs_root, KfdTopology *ret);

/* Parses one properties file's text into n. -EBADMSG on a malformed line. */
int kfd_node_parse_properties(KfdNode *n, const char *text);

/* "gfx1030" from gfx_target_version 100300 (hex digits for minor/stepping). */
void kfd_node_gfx_name(const KfdNode *n, char *buf, size_t size);

/* CU count = simd_count / simd_per_cu / num_xcc (kfd-facts §1.6.3). */
uint32_t kfd_node_cu_count(const KfdNode *n);

/*
 * Queue buffer sizes exactly as kfd_queue.c validates them (kfd-facts §1.6.3):
 * control stack, CWSR (save area) size and debug area, and the BO size the
 * CWSR mapping must have. Uses the exported cwsr_size/ctl_stack_size when
 * present. Returns -EOPNOTSUPP for a gfx version the table does not know.
 */
typedef struct KfdQueueSizes {
        uint32_t ctl_stack_size;
        uint32_t cwsr_size;
        uint32_t debug_memory_size;
        uint64_t cwsr_bo_size;
        uint32_t eop_buffer_size;
} KfdQueueSizes;
int kfd_node_queue_sizes(const KfdNode *n, KfdQueueSizes *ret);
