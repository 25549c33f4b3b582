/* SPDX-License-Identifier: MIT */
/*
 * Writes the KFD sysfs topology of the simulated machine: node 0 is the CPU
 * (gpu_id 0, simd_count 0), nodes 1.. the gfx1030 GPUs — or, for a desktop
 * Ryzen with a discrete card (SimOptions.igpu_first), node 1 the CPU's
 * integrated gfx1036 and nodes 2.. the gfx1030s, as such machines list them
 * (kfd-facts §7.6).
 * Property names and their
 * order follow kfd_topology.c node_show (kfd-facts §1.3); values are those of
 * a Navi21-class RDNA2 part scaled to the configured CU count. The queue
 * buffer sizes are computed with the formulas of kfd_queue.c
 * kfd_queue_ctx_save_restore_size so that the values the daemon reads are
 * the values CREATE_QUEUE validates against.
 */
#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim-topology.h"
#include "util/macro.h"

void sim_gpu_info_init(SimGpuInfo *g, uint32_t gpu_id, uint32_t cu_count, uint64_t vram_size) {
        uint32_t wave_num, wg_data_per_cu, wg_data_size, ctl;

        *g = (SimGpuInfo) {
                .gpu_id = gpu_id,
                .gfx_target_version = 100300,
                .cu_count = cu_count,
                .simd_per_cu = 2,
                .simd_count = cu_count * 2,
                .max_waves_per_simd = 16,
                .lds_size_in_kb = 64,
                .wave_front_size = 32,
                /* Navi21: 4 shader engines x 2 shader arrays; KFD reports
                 * array_count = SEs * SAs per SE and cu_per_simd_array = CUs per SA. */
                .array_count = 8,
                .simd_arrays_per_engine = 2,
                .cu_per_simd_array = DIV_ROUND_UP(cu_count, 8),
                .max_slots_scratch_cu = 32,
                .vendor_id = 0x1002,
                .device_id = 0x73BF,
                .pci_revision = 0xC1, /* amdgpu.ids: "73BF, C1, AMD Radeon RX 6800 XT" */
                .location_id = 0x0300, /* PCI 03:00.0 */
                .domain = 0,
                .drm_render_minor = 128,
                .num_sdma_engines = 2,
                .num_sdma_xgmi_engines = 0,
                .num_sdma_queues_per_engine = 8,
                .num_cp_queues = 8,
                .num_xcc = 1,
                .max_engine_clk_fcompute = 2250,
                .fw_version = 115,
                .sdma_fw_version = 83,
                /* HSA_CAP_DOORBELL_TYPE_2_0 (2 << 12, kfd_topology.h): gfx9 and
                 * later use 64-bit doorbells; ROCr takes the legacy doorbell
                 * path without it (rocm-facts §2). */
                .capability = 0x2000,
                .unique_id = 0x5a1e0000cafe0001ULL,
                .eop_buffer_size = 4096, /* gfx8+ (kfd_queue.c) */
                .vram_size = vram_size,
        };

        /* kfd_queue.c kfd_queue_ctx_save_restore_size, gfx10.1..gfx12: 32 waves
         * per CU, 12-byte control stack entries, vgpr 0x40000 per CU (RDNA2),
         * SGPR 0x4000, LDS 0x10000, HW regs 0x1000; gfx10.x control stack
         * clamped to 0x7000. */
        wave_num = cu_count * 32;
        wg_data_per_cu = 0x40000 + 0x4000 + 0x10000 + 0x1000;
        wg_data_size = ALIGN_UP(cu_count * wg_data_per_cu, 4096u);
        ctl = ALIGN_UP(40 + wave_num * 12 + 8, 4096u);
        if (g->gfx_target_version >= 100100 && g->gfx_target_version < 110000)
                ctl = MIN(ctl, 0x7000u);
        g->ctl_stack_size = ctl;
        g->cwsr_size = ctl + wg_data_size;
        g->debug_memory_size = ALIGN_UP(wave_num * 32, 64u);
        g->cwsr_bo_size = ALIGN_UP(((uint64_t) g->cwsr_size + g->debug_memory_size) * g->num_xcc, (uint64_t) 4096);
}

void sim_gpu_info_init_igpu(SimGpuInfo *g) {
        /* A Raphael (Ryzen 7000 desktop) iGPU: gfx1036, 2 CUs in one shader
         * array, one SDMA engine, the firmware's 512 MiB carve-out as its
         * local memory (virtual CRAT: kfd_crat.c reports amdgpu's VRAM). */
        sim_gpu_info_init(g, SIM_IGPU_GPU_ID, 2, 512ULL << 20);
        g->gfx_target_version = 100306;
        g->array_count = 1;
        g->simd_arrays_per_engine = 1;
        g->cu_per_simd_array = 2;
        g->device_id = 0x164E;
        g->pci_revision = 0xC1; /* not in libdrm 2.4.114's amdgpu.ids: named "AMD Radeon Graphics" */
        g->location_id = 0x1000; /* PCI 10:00.0 */
        g->drm_render_minor = 128;
        g->num_sdma_engines = 1;
        g->max_engine_clk_fcompute = 2200;
        g->unique_id = 0x5a1e0000cafe1001ULL;
}

static int write_file(int dir_fd, const char *name, const char *text) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(text), done = 0;

        fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
        if (fd < 0)
                return -errno;
        /* Read-only for everyone whatever the umask, as sysfs attributes are:
         * a worker process of another user reads the tree (sim-remote.h). */
        if (fchmod(fd, 0444) < 0)
                return -errno;
        while (done < len) {
                ssize_t n = write(fd, text + done, len - done);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) n;
        }
        return 0;
}

static int make_dir(int dir_fd, const char *name, int *ret_fd) {
        int fd;

        if (mkdirat(dir_fd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fchmod(fd, 0755) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        *ret_fd = fd;
        return 0;
}

/*
 * A Navi 21's GPU caches, one entry per kind, as kfd_crat.c's table for gfx10.3
 * (navi10_cache_info, sizes in KiB): the vector L1 (TCP) per CU, the scalar
 * instruction and data caches per SQC (2 CUs), the GL1 per shader array, the
 * L2 and the 128 MiB Infinity Cache as L3. The kernel lists one entry per
 * instance (per CU, per SQC, ...); one per kind is what ROCr reads to fill
 * its cache list (amd_gpu_agent.cpp asserts "GPU cache info missing" with
 * none). type is the CRAT cache flags' HSA_CACHE_TYPE_DATA (1) /
 * INSTRUCTION (2) | HSACU (8), as kfd_topology.c's cache_show prints them.
 */
typedef struct SimCache {
        unsigned level, size_kib, line, type, cus_shared;
} SimCache;

static const SimCache gpu_caches[] = {
        { 1, 16, 128, 1 | 8, 1 },       /* TCP: vector L1 per CU */
        { 1, 32, 64, 2 | 8, 2 },        /* SQC instruction cache */
        { 1, 16, 64, 1 | 8, 2 },        /* SQC scalar data cache */
        { 1, 128, 128, 1 | 8, 10 },     /* GL1 per shader array */
        { 2, 4096, 128, 1 | 8, 80 },    /* L2 */
        { 3, 131072, 64, 1 | 8, 80 },   /* Infinity Cache */
};

static int write_caches(int node_fd, const SimGpuInfo *g) {
        _cleanup_close_ int caches_fd = -EBADF;
        int r;

        r = make_dir(node_fd, "caches", &caches_fd);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(gpu_caches); i++) {
                _cleanup_close_ int cache_fd = -EBADF;
                const SimCache *c = &gpu_caches[i];
                char name[16], text[512], map[64];
                unsigned shared = MIN(c->cus_shared, g->cu_count), n = 0;

                /* sibling_map: one digit per CU sharing it, comma separated. */
                for (unsigned k = 0; k < MIN(shared, 16u) && n + 3 < sizeof map; k++)
                        n += (unsigned) snprintf(map + n, sizeof map - n, "%s1", k ? "," : "");
                map[n] = 0;
                snprintf(name, sizeof name, "%zu", i);
                r = make_dir(caches_fd, name, &cache_fd);
                if (r < 0)
                        return r;
                snprintf(text, sizeof text,
                         "processor_id_low %u\nlevel %u\nsize %u\ncache_line_size %u\ncache_lines_per_tag 1\n"
                         "association 16\nlatency 1\ntype %u\nsibling_map %s\n",
                         0x80000000u, c->level, c->size_kib, c->line, c->type, map);
                r = write_file(cache_fd, "properties", text);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* One "name value" line per property, in node_show order (kfd_topology.c). */
static int node_properties(char *buf, size_t size, const SimGpuInfo *g, bool gpu, unsigned io_links) {
        FILE *f = fmemopen(buf, size, "w");
        if (!f)
                return -errno;

#define P(name, val) fprintf(f, "%s %llu\n", name, (unsigned long long) (val))
        P("cpu_cores_count", gpu ? 0 : 16);
        P("simd_count", gpu ? g->simd_count : 0);
        P("mem_banks_count", 1);
        P("caches_count", gpu ? ELEMENTSOF(gpu_caches) : 0);
        P("io_links_count", io_links);
        P("p2p_links_count", 0);
        P("cpu_core_id_base", gpu ? 0 : 0);
        P("simd_id_base", gpu ? 0x80000000u : 0);
        P("max_waves_per_simd", gpu ? g->max_waves_per_simd : 0);
        P("lds_size_in_kb", gpu ? g->lds_size_in_kb : 0);
        P("gds_size_in_kb", 0);
        P("num_gws", gpu ? 64 : 0);
        P("wave_front_size", gpu ? g->wave_front_size : 0);
        P("array_count", gpu ? g->array_count : 0);
        P("simd_arrays_per_engine", gpu ? g->simd_arrays_per_engine : 0);
        P("cu_per_simd_array", gpu ? g->cu_per_simd_array : 0);
        P("simd_per_cu", gpu ? g->simd_per_cu : 0);
        P("max_slots_scratch_cu", gpu ? g->max_slots_scratch_cu : 0);
        P("gfx_target_version", gpu ? g->gfx_target_version : 0);
        P("vendor_id", gpu ? g->vendor_id : 0);
        P("device_id", gpu ? g->device_id : 0);
        P("location_id", gpu ? g->location_id : 0);
        P("domain", gpu ? g->domain : 0);
        P("drm_render_minor", gpu ? g->drm_render_minor : 0);
        P("hive_id", 0);
        P("num_sdma_engines", gpu ? g->num_sdma_engines : 0);
        P("num_sdma_xgmi_engines", gpu ? g->num_sdma_xgmi_engines : 0);
        P("num_sdma_queues_per_engine", gpu ? g->num_sdma_queues_per_engine : 0);
        P("num_cp_queues", gpu ? g->num_cp_queues : 0);
        /* Commit 8fc2796dea6f exports these after num_cp_queues. */
        P("cwsr_size", gpu ? g->cwsr_size : 0);
        P("ctl_stack_size", gpu ? g->ctl_stack_size : 0);
        if (gpu) {
                P("max_engine_clk_fcompute", g->max_engine_clk_fcompute);
                P("local_mem_size", 0); /* always 0 in node_show; see mem_banks */
                P("fw_version", g->fw_version);
                P("capability", g->capability);
                P("debug_prop", 0);
                P("sdma_fw_version", g->sdma_fw_version);
                P("unique_id", g->unique_id);
                P("num_xcc", g->num_xcc);
        }
        P("max_engine_clk_ccompute", 3600);
#undef P
        if (ferror(f)) {
                fclose(f);
                return -ENOSPC;
        }
        if (fclose(f) != 0)
                return -errno;
        return 0;
}

/*
 * IO links: the CPU<->GPU PCIe links the kernel reports for a discrete GPU.
 * kfd_crat.c kfd_fill_gpu_direct_io_link_to_cpu gives each GPU one link to
 * its NUMA node (CRAT_IOLINK_TYPE_PCIEXPRESS = 2, with min/max bandwidth from
 * amdgpu_amdkfd_get_pcie_bandwidth_mbytes: lanes x per-lane Mbit/s / 8, x1
 * gen1 for the minimum, here x16 gen4 = 16 x 16000 / 8 for the maximum; no
 * latency), and kfd_parse_subtype_iolink adds the reverse CPU->GPU link
 * (same values, from/to swapped) with weight 20 for PCIe on both. Flags are
 * rewritten by kfd_topology.c kfd_fill_iolink_non_crat_info: ENABLED on both;
 * kfd_set_iolink_no_atomics adds NO_ATOMICS_32_BIT | NO_ATOMICS_64_BIT to the
 * GPU->CPU link when the GPU did not get PCIe atomics (pci_atomic_requested)
 * and to the CPU->GPU link when the GPU's DEVCAP2 lacks the atomic completer
 * bits; kfd_set_iolink_non_coherent marks CPU->GPU over PCIe NON_COHERENT.
 * The simulated machine is a host with PCIe atomics: no NO_ATOMICS bits, so
 * ROCr's BlitSdma decrements signals with SDMA ATOMIC (rocm-facts §2).
 * Property names and order: kfd_topology.c iolink_show.
 */
/* kfd_crat.h: ENABLED bit 0, NON_COHERENT 1, NO_ATOMICS_32_BIT 2,
 * NO_ATOMICS_64_BIT 3, NO_PEER_TO_PEER_DMA 4, BI_DIRECTIONAL 31 (not kept in
 * sysfs: kfd_fill_iolink_non_crat_info overwrites the flags). */
#define CRAT_IOLINK_FLAGS_ENABLED (1u << 0)
#define CRAT_IOLINK_FLAGS_NON_COHERENT (1u << 1)
#define CRAT_IOLINK_TYPE_PCIEXPRESS 2u
#define KFD_PCIE_LINK_WEIGHT 20u
#define PCIE_MIN_BANDWIDTH_MBS (1u * 2500u / 8u)   /* x1 gen1 */
#define PCIE_MAX_BANDWIDTH_MBS (16u * 16000u / 8u) /* x16 gen4 */

static int write_io_link(int links_fd, unsigned index, unsigned from, unsigned to, bool from_cpu) {
        _cleanup_close_ int link_fd = -EBADF;
        char name[16], text[512];
        uint32_t flags = CRAT_IOLINK_FLAGS_ENABLED | (from_cpu ? CRAT_IOLINK_FLAGS_NON_COHERENT : 0);
        int r;

        snprintf(name, sizeof name, "%u", index);
        r = make_dir(links_fd, name, &link_fd);
        if (r < 0)
                return r;
        snprintf(text, sizeof text,
                 "type %u\nversion_major 0\nversion_minor 0\nnode_from %u\nnode_to %u\nweight %u\n"
                 "min_latency 0\nmax_latency 0\nmin_bandwidth %u\nmax_bandwidth %u\n"
                 "recommended_transfer_size 0\nflags %u\n",
                 CRAT_IOLINK_TYPE_PCIEXPRESS, from, to, KFD_PCIE_LINK_WEIGHT, PCIE_MIN_BANDWIDTH_MBS,
                 PCIE_MAX_BANDWIDTH_MBS, flags);
        return write_file(link_fd, "properties", text);
}

/* The node's io_links/0..n-1: from node `index` to each of to[0..n-1]. */
static int write_io_links(int node_fd, unsigned index, const unsigned *to, unsigned n, bool cpu) {
        _cleanup_close_ int links_fd = -EBADF;
        int r = make_dir(node_fd, "io_links", &links_fd);

        for (unsigned i = 0; r >= 0 && i < n; i++)
                r = write_io_link(links_fd, i, index, to[i], cpu);
        return r;
}

static int write_node(int nodes_fd, unsigned index, const SimGpuInfo *g, bool gpu, const unsigned *link_to,
                      unsigned n_links) {
        _cleanup_close_ int node_fd = -EBADF, banks_fd = -EBADF, bank_fd = -EBADF, sub_fd = -EBADF;
        char name[16], text[4096], val[64];
        int r;

        snprintf(name, sizeof name, "%u", index);
        r = make_dir(nodes_fd, name, &node_fd);
        if (r < 0)
                return r;
        snprintf(val, sizeof val, "%u\n", gpu ? g->gpu_id : 0);
        r = write_file(node_fd, "gpu_id", val);
        if (r < 0)
                return r;
        if (gpu)
                snprintf(val, sizeof val, "gfx%u%x%x\n", g->gfx_target_version / 10000,
                         (g->gfx_target_version / 100) % 100, g->gfx_target_version % 100);
        else
                snprintf(val, sizeof val, "\n");
        r = write_file(node_fd, "name", val);
        if (r < 0)
                return r;
        r = node_properties(text, sizeof text, g, gpu, n_links);
        if (r < 0)
                return r;
        r = write_file(node_fd, "properties", text);
        if (r < 0)
                return r;

        if (gpu) {
                r = write_caches(node_fd, g);
                if (r < 0)
                        return r;
        }
        for (const char *const *s = (const char *const[]) { "caches", "io_links", "p2p_links", NULL }; *s; s++) {
                if (gpu && strcmp(*s, "caches") == 0)
                        continue;
                r = make_dir(node_fd, *s, &sub_fd);
                if (r < 0)
                        return r;
                sub_fd = safe_close(sub_fd);
        }
        r = write_io_links(node_fd, index, link_to, n_links, !gpu);
        if (r < 0)
                return r;

        r = make_dir(node_fd, "mem_banks", &banks_fd);
        if (r < 0)
                return r;
        r = make_dir(banks_fd, "0", &bank_fd);
        if (r < 0)
                return r;
        /* kfd_topology.c mem_show: heap_type 1 = HSA_MEM_HEAP_TYPE_FB_PUBLIC (large BAR),
         * 0 = system memory. */
        snprintf(text, sizeof text,
                 "heap_type %u\nsize_in_bytes %llu\nflags 0\nwidth %u\nmem_clk_max %u\n",
                 gpu ? 1u : 0u,
                 (unsigned long long) (gpu ? g->vram_size : 16ULL << 30),
                 gpu ? 256u : 64u, gpu ? 1000u : 3200u);
        return write_file(bank_fd, "properties", text);
}

int sim_topology_write(const SimGpuInfo *const *gpus, unsigned n, const char *root) {
        _cleanup_close_ int root_fd = -EBADF, topo_fd = -EBADF, nodes_fd = -EBADF;
        static const unsigned cpu_node[] = { 0 };
        unsigned gpu_nodes[16];
        int r;

        assert(n >= 1 && n <= ELEMENTSOF(gpu_nodes));
        root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return -errno;
        r = make_dir(root_fd, "topology", &topo_fd);
        if (r < 0)
                return r;
        r = write_file(topo_fd, "generation_id", "1\n");
        if (r < 0)
                return r;
        r = write_file(topo_fd, "system_properties", "platform_oem 0\nplatform_id 0\nplatform_rev 0\n");
        if (r < 0)
                return r;
        r = make_dir(topo_fd, "nodes", &nodes_fd);
        if (r < 0)
                return r;
        /* The CPU links to every GPU; each GPU links to the CPU (node 0). No
         * GPU-GPU p2p_links: the kernel adds them only with CONFIG_HSA_AMD_P2P
         * between GPUs that can reach each other's BAR (kfd_topology.c
         * kfd_dev_create_p2p_links, amdgpu_device_is_peer_accessible); the
         * simulated machine is a host without P2P, where a peer's VRAM is
         * mapped through system memory (sim-memory.c sim_memory_map). */
        for (unsigned i = 0; i < n; i++)
                gpu_nodes[i] = i + 1;
        r = write_node(nodes_fd, 0, gpus[0], false, gpu_nodes, n);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < n; i++) {
                r = write_node(nodes_fd, i + 1, gpus[i], true, cpu_node, 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int remove_at(int parent_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        DIR *dir;
        struct dirent *de;
        int r = 0;

        fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOTDIR || errno == ELOOP)
                        return unlinkat(parent_fd, name, 0) < 0 ? -errno : 0;
                return -errno;
        }
        dir = fdopendir(fd);
        if (!dir)
                return -errno;
        fd = -EBADF; /* owned by dir now */
        while ((de = readdir(dir))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int k = remove_at(dirfd(dir), de->d_name);
                if (k < 0 && r == 0)
                        r = k;
        }
        closedir(dir);
        if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && r == 0)
                r = -errno;
        return r;
}

int sim_topology_remove(const char *root) {
        return remove_at(AT_FDCWD, root);
}

#define SIM_DIR_PREFIX "kfdbroker-sim-"

/* Removes "<tmpdir>/kfdbroker-sim-<pid>-*" of our uid whose pid no longer exists. */
static void sweep_stale(const char *tmpdir) {
        DIR *dir = opendir(tmpdir);
        struct dirent *de;

        if (!dir)
                return;
        while ((de = readdir(dir))) {
                const char *s = de->d_name;
                struct stat st;
                char *end;
                uintmax_t pid;

                if (strncmp(s, SIM_DIR_PREFIX, strlen(SIM_DIR_PREFIX)) != 0)
                        continue;
                s += strlen(SIM_DIR_PREFIX);
                errno = 0;
                pid = strtoumax(s, &end, 10);
                if (errno || end == s || *end != '-' || pid == 0 || pid > INT32_MAX)
                        continue;
                /* A live process (or one we may not signal) keeps its directory. */
                if (kill((pid_t) pid, 0) == 0 || errno != ESRCH)
                        continue;
                if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
                    st.st_uid != geteuid())
                        continue;
                (void) remove_at(dirfd(dir), de->d_name);
        }
        closedir(dir);
}

int sim_topology_mkdtemp(const char *tmpdir, char **ret) {
        char *path;

        sweep_stale(tmpdir);
        if (asprintf(&path, "%s/" SIM_DIR_PREFIX "%d-XXXXXX", tmpdir, (int) getpid()) < 0)
                return -ENOMEM;
        /* mkdtemp makes it 0700; it holds nothing secret, and worker
         * processes of other users read the topology below it. */
        if (!mkdtemp(path) || chmod(path, 0755) < 0) {
                int r = -errno;
                free(path);
                return r;
        }
        *ret = path;
        return 0;
}
