/* SPDX-License-Identifier: MIT */
/*
 * The daemon's choice of GPU (kfd-gpu-choice.h).
 *
 * Telling an integrated GPU from a discrete one with what the KFD topology
 * says (kfd_topology.c node_show(), mem_show()):
 *  - an APU described by a CRAT table comes out as one node with both
 *    cpu_cores_count and simd_count (kfd_crat.c parses the APU's CPU and GPU
 *    compute-unit entries into the same proximity domain); a discrete GPU's
 *    node has cpu_cores_count 0 (the ROCm topology documentation: "0 for a
 *    node with no such cores, e.g a discrete HSA GPU");
 *  - a GPU made from a virtual CRAT (every current APU, and a desktop Ryzen's
 *    iGPU) reports as local memory what amdgpu calls VRAM: for an iGPU the
 *    firmware's carve-out, 512 MiB on typical boards. ollama's AMD discovery
 *    (discover/amd_linux.go) treats a KFD node whose mem_banks total less than
 *    1 GiB (IGPUMemLimit) as an iGPU; the same bound is used here.
 * libhsakmt asks the DRM driver instead (HsaNodeProperties.Integrated from
 * amdgpu_query_gpu_info()'s AMDGPU_IDS_FLAGS_FUSION), which needs every
 * render node opened through libdrm; the topology needs nothing and reads the
 * same on the simulator.
 *
 * PCI addresses: kfd_topology.c sets location_id = pci_dev_id(pdev) =
 * bus << 8 | devfn (devfn = device << 3 | function) and domain =
 * pci_domain_nr(pdev->bus).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kfd/kfd-gpu-choice.h"
#include "util/macro.h"
#include "util/parse-util.h"

bool kfd_node_is_integrated(const KfdNode *n) {
        return n->cpu_cores_count > 0 || n->local_mem_size < KFD_IGPU_LOCAL_MEM_LIMIT;
}

void kfd_node_pci_name(const KfdNode *n, char *buf, size_t size) {
        format_pci_address(n->domain, n->location_id, buf, size);
}

static void format_size(uint64_t bytes, char *buf, size_t size) {
        if (bytes >= (1ULL << 30) && bytes % (1ULL << 30) == 0)
                snprintf(buf, size, "%" PRIu64 " GiB", bytes >> 30);
        else
                snprintf(buf, size, "%" PRIu64 " MiB", bytes >> 20);
}

static void describe(const KfdNode *n, char *buf, size_t size) {
        char gfx[16], pci[16], mem[32];

        kfd_node_gfx_name(n, gfx, sizeof gfx);
        kfd_node_pci_name(n, pci, sizeof pci);
        format_size(n->local_mem_size, mem, sizeof mem);
        snprintf(buf, size, "node %u (%s, %s, renderD%u, %s, %s local memory)", n->node_index, gfx, pci,
                 n->drm_render_minor, kfd_node_is_integrated(n) ? "integrated" : "discrete", mem);
}

/* "node 1 gfx1036 0000:0c:00.0 renderD128, node 2 ..." for error messages. */
static void list_nodes(const KfdTopology *t, char *buf, size_t size) {
        size_t used = 0;

        buf[0] = '\0';
        for (unsigned i = 0; i < t->n_nodes && used < size; i++) {
                char gfx[16], pci[16];
                kfd_node_gfx_name(&t->nodes[i], gfx, sizeof gfx);
                kfd_node_pci_name(&t->nodes[i], pci, sizeof pci);
                int k = snprintf(buf + used, size - used, "%snode %u %s %s renderD%u", i ? ", " : "",
                                 t->nodes[i].node_index, gfx, pci, t->nodes[i].drm_render_minor);
                if (k < 0)
                        break;
                used += (size_t) k;
        }
}

/* Whether a is to be preferred to b by default. */
static bool better(const KfdNode *a, const KfdNode *b) {
        bool ia = kfd_node_is_integrated(a), ib = kfd_node_is_integrated(b);

        if (ia != ib)
                return !ia;
        if (a->local_mem_size != b->local_mem_size)
                return a->local_mem_size > b->local_mem_size;
        if (kfd_node_cu_count(a) != kfd_node_cu_count(b))
                return kfd_node_cu_count(a) > kfd_node_cu_count(b);
        return a->node_index < b->node_index;
}

static void choose_default(const KfdTopology *t, KfdGpuChoice *ret) {
        unsigned best = 0, n_integrated = 0;

        for (unsigned i = 1; i < t->n_nodes; i++)
                if (better(&t->nodes[i], &t->nodes[best]))
                        best = i;
        for (unsigned i = 0; i < t->n_nodes; i++)
                n_integrated += kfd_node_is_integrated(&t->nodes[i]);

        ret->index = best;
        if (t->n_nodes == 1)
                snprintf(ret->reason, sizeof ret->reason, "the only GPU");
        else if (!kfd_node_is_integrated(&t->nodes[best]) && n_integrated > 0)
                snprintf(ret->reason, sizeof ret->reason,
                         "a discrete GPU is preferred to an integrated one (%u of %u GPU nodes look integrated)",
                         n_integrated, t->n_nodes);
        else
                snprintf(ret->reason, sizeof ret->reason,
                         "of %u %s GPUs, the one with the most local memory and compute units", t->n_nodes,
                         n_integrated == t->n_nodes ? "integrated" : "discrete");
}

/* The node spec[0..len) names, as an index into t->nodes: 0, -EINVAL (not
 * one of the forms) or -ENODEV (no such GPU), with err saying so. */
static int match_one(const KfdTopology *t, const char *spec, size_t len, unsigned *ret, char *err, size_t errlen) {
        char item[72], nodes[512];
        unsigned long v;
        uint32_t domain, location;
        const char *what;
        int match = -1;

        if (len >= sizeof item) {
                snprintf(err, errlen, "'%.64s…' is not a GPU: too long", spec);
                return -EINVAL;
        }
        memcpy(item, spec, len);
        item[len] = '\0';
        if (parse_uint_n(item, len, 10, 65535, &v)) {
                what = "KFD node";
                for (unsigned i = 0; i < t->n_nodes; i++)
                        if (t->nodes[i].node_index == v)
                                match = (int) i;
        } else if ((strncmp(item, "renderD", 7) == 0 && parse_uint_n(item + 7, len - 7, 10, 65535, &v)) ||
                   (strncmp(item, "/dev/dri/renderD", 16) == 0 && parse_uint_n(item + 16, len - 16, 10, 65535, &v))) {
                what = "render node";
                for (unsigned i = 0; i < t->n_nodes; i++)
                        if (t->nodes[i].drm_render_minor == v)
                                match = (int) i;
        } else if (parse_pci_address(item, len, &domain, &location)) {
                what = "PCI address";
                for (unsigned i = 0; i < t->n_nodes; i++)
                        if (t->nodes[i].domain == domain && t->nodes[i].location_id == location)
                                match = (int) i;
        } else {
                snprintf(err, errlen,
                         "'%.64s' is not a GPU: expected auto, all, a KFD node id (2), a PCI address (0000:03:00.0) "
                         "or a render node (renderD128), or a comma-separated list of them",
                         item);
                return -EINVAL;
        }
        if (match < 0) {
                list_nodes(t, nodes, sizeof nodes);
                snprintf(err, errlen, "no GPU at %s %.64s (the GPUs: %s)", what, item, nodes);
                return -ENODEV;
        }
        *ret = (unsigned) match;
        return 0;
}

int kfd_gpu_choose(const KfdTopology *t, const char *spec, KfdGpuChoice *ret, char *err, size_t errlen) {
        int r;

        if (t->n_nodes == 0) {
                snprintf(err, errlen, "the KFD topology lists no GPU node");
                return -ENODEV;
        }
        *ret = (KfdGpuChoice) {};
        if (!spec || !*spec || strcmp(spec, "auto") == 0) {
                choose_default(t, ret);
                describe(&t->nodes[ret->index], ret->description, sizeof ret->description);
                return 0;
        }
        r = match_one(t, spec, strlen(spec), &ret->index, err, errlen);
        if (r < 0)
                return r;
        describe(&t->nodes[ret->index], ret->description, sizeof ret->description);
        snprintf(ret->reason, sizeof ret->reason, "chosen by --gpu=%.64s", spec);
        return 0;
}

/* The served order: discrete GPUs first, then by KFD node id. */
static bool served_before(const KfdNode *a, const KfdNode *b) {
        bool ia = kfd_node_is_integrated(a), ib = kfd_node_is_integrated(b);

        if (ia != ib)
                return !ia;
        return a->node_index < b->node_index;
}

int kfd_gpu_choose_set(const KfdTopology *t, const char *spec, KfdGpuChoice *ret, unsigned max, unsigned *ret_n,
                       char *err, size_t errlen) {
        bool picked[KFD_TOPOLOGY_MAX_NODES] = {};
        unsigned n = 0, n_integrated = 0;
        char reason[256];
        int r;

        if (t->n_nodes == 0) {
                snprintf(err, errlen, "the KFD topology lists no GPU node");
                return -ENODEV;
        }
        for (unsigned i = 0; i < t->n_nodes; i++)
                n_integrated += kfd_node_is_integrated(&t->nodes[i]);

        if (!spec || !*spec || strcmp(spec, "auto") == 0) {
                /* Every discrete GPU; the integrated ones only where there is no other. */
                bool want_integrated = n_integrated == t->n_nodes;
                for (unsigned i = 0; i < t->n_nodes; i++)
                        picked[i] = kfd_node_is_integrated(&t->nodes[i]) == want_integrated;
                if (t->n_nodes == 1)
                        snprintf(reason, sizeof reason, "the only GPU");
                else if (want_integrated)
                        snprintf(reason, sizeof reason, "every GPU (all %u look integrated)", t->n_nodes);
                else if (n_integrated > 0)
                        snprintf(reason, sizeof reason,
                                 "every discrete GPU (%u of %u GPU nodes look integrated and are left out: name them "
                                 "in --gpu= to serve them)",
                                 n_integrated, t->n_nodes);
                else
                        snprintf(reason, sizeof reason, "every GPU (%u discrete)", t->n_nodes);
        } else if (strcmp(spec, "all") == 0) {
                for (unsigned i = 0; i < t->n_nodes; i++)
                        picked[i] = true;
                snprintf(reason, sizeof reason, "every GPU node (--gpu=all)");
        } else {
                for (const char *p = spec;;) {
                        const char *comma = strchr(p, ',');
                        size_t len = comma ? (size_t) (comma - p) : strlen(p);
                        unsigned idx;

                        r = match_one(t, p, len, &idx, err, errlen);
                        if (r < 0)
                                return r;
                        if (picked[idx]) {
                                snprintf(err, errlen, "'%.*s' names node %u, which the list already has",
                                         (int) MIN(len, (size_t) 64), p, t->nodes[idx].node_index);
                                return -EINVAL;
                        }
                        picked[idx] = true;
                        if (!comma)
                                break;
                        p = comma + 1;
                }
                snprintf(reason, sizeof reason, "listed by --gpu=%.200s", spec);
        }

        for (unsigned i = 0; i < t->n_nodes; i++)
                n += picked[i];
        if (n > max) {
                snprintf(err, errlen, "%u GPUs chosen, at most %u can be served", n, max);
                return -E2BIG;
        }
        n = 0;
        /* Insertion in served order: n is small. */
        for (unsigned i = 0; i < t->n_nodes; i++) {
                if (!picked[i])
                        continue;
                unsigned at = n;
                while (at > 0 && served_before(&t->nodes[i], &t->nodes[ret[at - 1].index])) {
                        ret[at] = ret[at - 1];
                        at--;
                }
                ret[at] = (KfdGpuChoice) { .index = i };
                n++;
        }
        for (unsigned k = 0; k < n; k++) {
                describe(&t->nodes[ret[k].index], ret[k].description, sizeof ret[k].description);
                snprintf(ret[k].reason, sizeof ret[k].reason, "%s", reason);
        }
        *ret_n = n;
        return 0;
}
