/* SPDX-License-Identifier: MIT */
/*
 * Which GPU of the KFD topology the daemon drives (kfd-facts §7.6): the one
 * the administrator names with --gpu=, else a discrete GPU in preference to
 * an integrated one — a desktop Ryzen's iGPU is a KFD node too, often the
 * first. Pure functions over a KfdTopology (kfd-topology.h), so the real
 * sysfs tree and the simulator's are judged the same way.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "kfd/kfd-topology.h"

/* Below this much local memory a GPU node counts as integrated (see kfd_node_is_integrated). */
#define KFD_IGPU_LOCAL_MEM_LIMIT (1ULL << 30)

/*
 * Whether the node looks like an APU's integrated GPU: it has CPU cores as
 * well (the combined node a CRAT table gives an APU), or less than 1 GiB of
 * local memory (an iGPU's memory bank is the firmware's carve-out).
 */
bool kfd_node_is_integrated(const KfdNode *n);

/* "0000:03:00.0" from domain and location_id (bus << 8 | devfn, kfd_topology.c). */
void kfd_node_pci_name(const KfdNode *n, char *buf, size_t size);

typedef struct KfdGpuChoice {
        unsigned index;         /* into KfdTopology.nodes */
        char description[160];  /* "node 2 (gfx1030, 0000:03:00.0, renderD129, discrete, 16 GiB)" */
        char reason[256];       /* why this one: "chosen by --gpu=renderD129", "the only GPU", ... */
} KfdGpuChoice;

/*
 * Picks the GPU named by spec among the topology's GPU nodes:
 *   NULL, "" or "auto"       a discrete GPU before an integrated one, then
 *                            the most local memory, the most CUs, the lowest
 *                            node id;
 *   "N" (decimal)            the KFD topology node N (topology/nodes/N);
 *   "[DDDD:]BB:DD.F" (hex)   the GPU at that PCI address (domain 0 if left out);
 *   "renderDN", "/dev/dri/renderDN"  the GPU whose render node that is.
 * Returns 0 and fills *ret; -EINVAL when spec is none of these forms, -ENODEV
 * when no GPU node matches (or the topology has none), each with a one-line
 * message in err that names the value and lists the GPU nodes there are.
 */
int kfd_gpu_choose(const KfdTopology *t, const char *spec, KfdGpuChoice *ret, char *err, size_t errlen);

/*
 * The GPUs the daemon serves, in served order — discrete before integrated,
 * then by KFD node id; a GPU's position in it is its index (kfdbrokerctl
 * status, the protocol, Devices=, the interposer's topology):
 *   NULL, "" or "auto"  every discrete GPU, or every GPU where all are
 *                       integrated (an iGPU beside a discrete one is left out);
 *   "all"               every GPU node;
 *   "A,B,..."           the ones listed, each in one of kfd_gpu_choose()'s forms.
 * Fills ret[0..*ret_n); -EINVAL for a malformed item or a GPU listed twice,
 * -ENODEV for an item that names no GPU (or no GPU node at all), -E2BIG past
 * max; err names what was wrong.
 */
int kfd_gpu_choose_set(const KfdTopology *t, const char *spec, KfdGpuChoice *ret, unsigned max, unsigned *ret_n,
                       char *err, size_t errlen);
