/* SPDX-License-Identifier: MIT */
/*
 * Reader of the KFD sysfs topology (kfd-facts §1.3) and the queue-buffer size
 * rules KFD validates in CREATE_QUEUE (kfd-facts §1.6.3). Used by gpu-context.c
 * at bring-up; pure functions over files under a sysfs root, so the real
 * /sys/devices/virtual/kfd/kfd and the simulator's tree read the same way.
 *
 * Sources: kfd_topology.c node_show() for the property names [K7];
 * kfd_queue.c kfd_queue_ctx_save_restore_size() and its helpers
 * (kfd_get_vgpr_size_per_cu, get_num_waves, the gfx10 0x7000 clamp) [K2].
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kfd/kfd-topology.h"
#include "util/macro.h"

/* Reads a small sysfs file into buf (NUL-terminated). -ENOENT, -EACCES, -EPERM... */
static int read_small_file(const char *path, char *buf, size_t size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = 0;
        while (n < size - 1) {
                ssize_t k = read(fd, buf + n, size - 1 - n);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += (size_t) k;
        }
        if (n == size - 1)
                return -EFBIG;
        buf[n] = '\0';
        return (int) n;
}

static int parse_u64(const char *s, uint64_t *ret) {
        if (*s < '0' || *s > '9')
                return -EBADMSG;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || end == s)
                return -EBADMSG;
        while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
                end++;
        if (*end != '\0')
                return -EBADMSG;
        *ret = v;
        return 0;
}

typedef struct PropField {
        const char *name;
        size_t offset;
        bool is64;
} PropField;

#define U32F(f) { #f, offsetof(KfdNode, f), false }
#define U64F(f) { #f, offsetof(KfdNode, f), true }

static const PropField prop_fields[] = {
        U32F(cpu_cores_count),
        U32F(simd_count),         U32F(simd_per_cu),          U32F(max_waves_per_simd),
        U32F(lds_size_in_kb),     U32F(wave_front_size),      U32F(array_count),
        U32F(simd_arrays_per_engine), U32F(cu_per_simd_array), U32F(max_slots_scratch_cu),
        U32F(gfx_target_version), U32F(vendor_id),            U32F(device_id),
        U32F(location_id),        U32F(domain),               U32F(drm_render_minor),
        U32F(num_sdma_engines),   U32F(num_sdma_xgmi_engines), U32F(num_sdma_queues_per_engine),
        U32F(num_cp_queues),      U32F(num_xcc),              U32F(cwsr_size),
        U32F(ctl_stack_size),     U32F(max_engine_clk_fcompute), U32F(fw_version),
        U32F(capability),
};

static int apply_property(KfdNode *n, const char *name, uint64_t v) {
        for (size_t i = 0; i < ELEMENTSOF(prop_fields); i++) {
                if (strcmp(prop_fields[i].name, name) != 0)
                        continue;
                void *p = (uint8_t *) n + prop_fields[i].offset;
                if (prop_fields[i].is64) {
                        uint64_t v64 = v;
                        memcpy(p, &v64, sizeof v64);
                } else {
                        if (v > UINT32_MAX)
                                return -EBADMSG;
                        uint32_t v32 = (uint32_t) v;
                        memcpy(p, &v32, sizeof v32);
                }
                return 0;
        }
        return 0; /* unknown names are ignored */
}

/*
 * Each line is "<name> <decimal>" as node_show() prints it (sysfs_show_32bit_prop /
 * sysfs_show_64bit_prop: "%s %u\n" / "%s %llu\n"). Blank lines are allowed.
 */
int kfd_node_parse_properties(KfdNode *n, const char *text) {
        const char *p = text;
        bool saw_num_xcc = false;

        while (*p != '\0') {
                const char *eol = strchr(p, '\n');
                size_t len = eol ? (size_t) (eol - p) : strlen(p);
                char line[256];

                if (len >= sizeof line)
                        return -EBADMSG;
                memcpy(line, p, len);
                line[len] = '\0';
                p += len + (eol ? 1 : 0);

                if (len > 0 && line[len - 1] == '\r')
                        line[--len] = '\0';
                if (len == 0)
                        continue;

                char *sp = strchr(line, ' ');
                if (!sp || sp == line)
                        return -EBADMSG;
                *sp = '\0';
                const char *name = line;
                for (const char *c = name; *c; c++)
                        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
                                return -EBADMSG;

                const char *val = sp + 1;
                while (*val == ' ')
                        val++;
                uint64_t v;
                int r = parse_u64(val, &v);
                if (r < 0)
                        return r;
                r = apply_property(n, name, v);
                if (r < 0)
                        return r;
                if (strcmp(name, "num_xcc") == 0)
                        saw_num_xcc = true;
        }
        /* num_xcc is printed only by newer kernels; one XCC otherwise. */
        if (!saw_num_xcc || n->num_xcc == 0)
                n->num_xcc = 1;
        return 0;
}

void kfd_node_gfx_name(const KfdNode *n, char *buf, size_t size) {
        /* tinygrad: (v//10000, v//100%100, v%100) printed as gfx%d%x%x */
        uint32_t v = n->gfx_target_version;
        snprintf(buf, size, "gfx%u%x%x", v / 10000, (v / 100) % 100, v % 100);
}

uint32_t kfd_node_cu_count(const KfdNode *n) {
        if (n->simd_per_cu == 0)
                return 0;
        uint32_t xcc = n->num_xcc ? n->num_xcc : 1;
        return n->simd_count / n->simd_per_cu / xcc;
}

/* kfd_queue.c kfd_get_vgpr_size_per_cu() (mainline, incl. gfx1151 and gfx125x). */
static uint32_t vgpr_size_per_cu(uint32_t gfxv) {
        switch (gfxv) {
        case 90008: /* Arcturus */
        case 90010: /* Aldebaran */
        case 90402: /* Aqua Vanjaram */
        case 90500:
        case 120500:
        case 120501:
                return 0x80000;
        case 110000: /* Plum Bonito */
        case 110001: /* Wheat Nas */
        case 110501: /* gfx1151 */
        case 120000:
        case 120001:
                return 0x60000;
        default:
                return 0x40000;
        }
}

static uint32_t sgpr_size_per_cu(uint32_t gfxv) {
        return (gfxv == 120500 || gfxv == 120501) ? 0x8000 : 0x4000;
}

static uint32_t hwreg_size_per_cu(uint32_t gfxv) {
        return (gfxv == 120500 || gfxv == 120501) ? 0x8000 : 0x1000;
}

static uint32_t lds_size_per_cu(const KfdNode *n, uint32_t gfxv) {
        if (gfxv == 90500 || gfxv == 120500 || gfxv == 120501)
                return n->lds_size_in_kb << 10;
        return 0x10000;
}

static uint32_t num_waves(const KfdNode *n, uint32_t gfxv, uint32_t cu) {
        if (gfxv < 100100) { /* before Navi10: min(cu*40, SEs*512) */
                uint32_t se = n->simd_arrays_per_engine ? n->array_count / n->simd_arrays_per_engine : 0;
                return MIN(cu * 40, se * 512);
        }
        if (gfxv < 120500)
                return cu * 32; /* gfx10.1 .. gfx12.0: 32 waves per CU */
        return cu * 64;
}

#define SIZEOF_HSA_USER_CONTEXT_SAVE_AREA_HEADER 40
#define DEBUGGER_BYTES_ALIGN 64
#define DEBUGGER_BYTES_PER_WAVE 32

int kfd_node_queue_sizes(const KfdNode *n, KfdQueueSizes *ret) {
        uint32_t gfxv = n->gfx_target_version;

        /* kfd_queue_ctx_save_restore_size() returns early (no CWSR) below gfx8.0.1;
         * above the newest version it knows we cannot predict the sizes. */
        if (gfxv < 80001 || gfxv > 120501)
                return -EOPNOTSUPP;

        uint32_t cu = kfd_node_cu_count(n);
        if (cu == 0)
                return -EOPNOTSUPP;
        uint32_t xcc = n->num_xcc ? n->num_xcc : 1;
        uint32_t waves = num_waves(n, gfxv, cu);
        if (waves == 0)
                return -EOPNOTSUPP;

        uint64_t wg_per_cu = (uint64_t) vgpr_size_per_cu(gfxv) + sgpr_size_per_cu(gfxv) +
                             lds_size_per_cu(n, gfxv) + hwreg_size_per_cu(gfxv);
        uint64_t wg_data = ALIGN_UP((uint64_t) cu * wg_per_cu, PAGE_SIZE_4K);
        uint64_t ctl = (uint64_t) waves * (gfxv >= 100100 ? 12 : 8) + 8;
        ctl = ALIGN_UP(SIZEOF_HSA_USER_CONTEXT_SAVE_AREA_HEADER + ctl, PAGE_SIZE_4K);
        /* gfx10.x: "HW design limits control stack size to 0x7000" */
        if (gfxv / 10000 * 10000 == 100000)
                ctl = MIN(ctl, 0x7000);

        KfdQueueSizes s = {
                .ctl_stack_size = (uint32_t) ctl,
                .cwsr_size = (uint32_t) (ctl + wg_data),
                .debug_memory_size = ALIGN_UP(waves * DEBUGGER_BYTES_PER_WAVE, DEBUGGER_BYTES_ALIGN),
                .eop_buffer_size = gfxv == 80002 ? 0x8000 : 4096, /* Tonga: 0x8000 */
        };
        /* Prefer what KFD exports (commit 8fc2796dea6f): it is what it validates. */
        if (n->ctl_stack_size != 0)
                s.ctl_stack_size = n->ctl_stack_size;
        if (n->cwsr_size != 0)
                s.cwsr_size = n->cwsr_size;
        s.cwsr_bo_size = ALIGN_UP(((uint64_t) s.cwsr_size + s.debug_memory_size) * xcc, PAGE_SIZE_4K);
        *ret = s;
        return 0;
}

static int read_node(const char *root, unsigned idx, KfdNode *n, bool *ret_gpu) {
        char path[512], buf[8192];
        int r;

        *ret_gpu = false;
        *n = (KfdNode) { .node_index = idx };

        snprintf(path, sizeof path, "%s/topology/nodes/%u/gpu_id", root, idx);
        r = read_small_file(path, buf, sizeof buf);
        if (r == -ENOENT)
                return 0; /* a node without gpu_id is not a GPU node (or went away) */
        if (r < 0)
                return r;
        uint64_t gpu_id;
        r = parse_u64(buf, &gpu_id);
        if (r < 0)
                return r;
        if (gpu_id == 0 || gpu_id > UINT32_MAX)
                return 0; /* CPU node */
        n->gpu_id = (uint32_t) gpu_id;

        snprintf(path, sizeof path, "%s/topology/nodes/%u/name", root, idx);
        r = read_small_file(path, buf, sizeof buf);
        if (r >= 0) {
                size_t l = strcspn(buf, "\n");
                l = MIN(l, sizeof n->name - 1);
                memcpy(n->name, buf, l);
                n->name[l] = '\0';
        } else if (r != -ENOENT)
                return r;

        snprintf(path, sizeof path, "%s/topology/nodes/%u/properties", root, idx);
        r = read_small_file(path, buf, sizeof buf);
        if (r < 0)
                return r;
        r = kfd_node_parse_properties(n, buf);
        if (r < 0)
                return r;

        snprintf(path, sizeof path, "%s/topology/nodes/%u/mem_banks/0/properties", root, idx);
        r = read_small_file(path, buf, sizeof buf);
        if (r >= 0) {
                /* mem_banks/N/properties: "heap_type", "size_in_bytes", ... [K7 mem_show] */
                const char *s = strstr(buf, "size_in_bytes ");
                if (s) {
                        char num[32];
                        s += strlen("size_in_bytes ");
                        size_t l = strcspn(s, "\n");
                        if (l >= sizeof num)
                                return -EBADMSG;
                        memcpy(num, s, l);
                        num[l] = '\0';
                        r = parse_u64(num, &n->local_mem_size);
                        if (r < 0)
                                return r;
                }
        } else if (r != -ENOENT)
                return r;

        *ret_gpu = true;
        return 0;
}

static int cmp_unsigned(const void *a, const void *b) {
        unsigned x = *(const unsigned *) a, y = *(const unsigned *) b;
        return (x > y) - (x < y);
}

int kfd_topology_read(const char *sysfs_root, KfdTopology *ret) {
        char path[512];
        KfdTopology t = {};

        snprintf(path, sizeof path, "%s/topology/nodes", sysfs_root);
        DIR *d = opendir(path);
        if (!d)
                return -errno;

        int r = 0;
        struct dirent *de;
        unsigned idx_list[256];
        size_t n_idx = 0;
        while ((de = readdir(d))) {
                char *end;
                if (de->d_name[0] < '0' || de->d_name[0] > '9')
                        continue;
                unsigned long v = strtoul(de->d_name, &end, 10);
                if (*end != '\0' || v > 65535)
                        continue;
                if (n_idx < ELEMENTSOF(idx_list))
                        idx_list[n_idx++] = (unsigned) v;
        }
        closedir(d);
        /* Numeric order, as tinygrad sorts the node directories. */
        qsort(idx_list, n_idx, sizeof idx_list[0], cmp_unsigned);

        for (size_t i = 0; i < n_idx; i++) {
                KfdNode node;
                bool is_gpu;
                r = read_node(sysfs_root, idx_list[i], &node, &is_gpu);
                if (r < 0)
                        return r;
                if (!is_gpu || t.n_nodes >= KFD_TOPOLOGY_MAX_NODES)
                        continue;
                t.nodes[t.n_nodes++] = node;
        }
        *ret = t;
        return (int) t.n_nodes;
}
