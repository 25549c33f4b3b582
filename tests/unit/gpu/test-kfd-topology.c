/* SPDX-License-Identifier: MIT */
/*
 * The KFD topology reader on a sysfs tree written out in a temp dir, and the
 * CREATE_QUEUE size rules (kfd-facts §1.6.3) against the gfx1030 numbers from
 * a real trace (tinygrad issue #9363: 80 CUs, ctx_save_restore_size 0x1A97000,
 * ctl_stack_size 0x7000, debug area 0x14000).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kfd/kfd-topology.h"
#include "test-fini.h"

static char root[256];

static void write_file(const char *rel, const char *text) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", root, rel);
        /* mkdir -p the parent */
        for (char *p = path + strlen(root) + 1; *p; p++)
                if (*p == '/') {
                        *p = '\0';
                        mkdir(path, 0755);
                        *p = '/';
                }
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f, "%s", path);
        fputs(text, f);
        fclose(f);
}

static void setup_root(void) {
        snprintf(root, sizeof root, "/tmp/test-kfd-topology-XXXXXX");
        cr_assert_not_null(mkdtemp(root));
}

static void teardown_root(void) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        test_fini_end();
}

static const char props_gfx1030[] =
        "cpu_cores_count 0\n"
        "simd_count 160\n"
        "mem_banks_count 1\n"
        "max_waves_per_simd 16\n"
        "lds_size_in_kb 64\n"
        "wave_front_size 32\n"
        "array_count 8\n"
        "simd_arrays_per_engine 2\n"
        "cu_per_simd_array 10\n"
        "simd_per_cu 2\n"
        "max_slots_scratch_cu 32\n"
        "gfx_target_version 100300\n"
        "vendor_id 4098\n"
        "device_id 29631\n"
        "location_id 768\n"
        "domain 0\n"
        "drm_render_minor 128\n"
        "hive_id 0\n"
        "num_sdma_engines 4\n"
        "num_sdma_xgmi_engines 0\n"
        "num_sdma_queues_per_engine 8\n"
        "num_cp_queues 8\n"
        "max_engine_clk_fcompute 2555\n"
        "local_mem_size 0\n"
        "fw_version 115\n"
        "capability 671588992\n"
        "unique_id 18374686479671623680\n"
        "max_engine_clk_ccompute 3000\n";

Test(kfd_topology, reads_gpu_nodes, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;

        write_file("topology/nodes/0/gpu_id", "0\n");
        write_file("topology/nodes/0/name", "\n");
        write_file("topology/nodes/0/properties", "cpu_cores_count 16\nsimd_count 0\n");
        write_file("topology/nodes/1/gpu_id", "27005\n");
        write_file("topology/nodes/1/name", "gfx1030\n");
        write_file("topology/nodes/1/properties", props_gfx1030);
        write_file("topology/nodes/1/mem_banks/0/properties",
                   "heap_type 1\nsize_in_bytes 17163091968\nflags 0\nwidth 256\nmem_clk_max 1000\n");

        int r = kfd_topology_read(root, &t);
        cr_assert_eq(r, 1, "r=%d", r);
        const KfdNode *n = &t.nodes[0];
        cr_expect_eq(n->node_index, 1u);
        cr_expect_eq(n->gpu_id, 27005u);
        cr_expect_str_eq(n->name, "gfx1030");
        cr_expect_eq(n->simd_count, 160u);
        cr_expect_eq(n->drm_render_minor, 128u);
        cr_expect_eq(n->num_sdma_engines, 4u);
        cr_expect_eq(n->num_sdma_queues_per_engine, 8u);
        cr_expect_eq(n->num_xcc, 1u, "num_xcc defaults to 1 when absent");
        cr_expect_eq(n->cwsr_size, 0u);
        cr_expect_eq(n->local_mem_size, 17163091968ull);
        cr_expect_eq(kfd_node_cu_count(n), 80u);
        char gfx[16];
        kfd_node_gfx_name(n, gfx, sizeof gfx);
        cr_expect_str_eq(gfx, "gfx1030");
}

Test(kfd_topology, missing_root_is_enoent, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        cr_expect_eq(kfd_topology_read(root, &t), -ENOENT);
}

Test(kfd_topology, no_gpu_nodes, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        write_file("topology/nodes/0/gpu_id", "0\n");
        write_file("topology/nodes/0/properties", "simd_count 0\n");
        cr_expect_eq(kfd_topology_read(root, &t), 0);
        cr_expect_eq(t.n_nodes, 0u);
}

Test(kfd_topology, gpu_without_properties_is_enoent, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        write_file("topology/nodes/1/gpu_id", "4660\n");
        cr_expect_eq(kfd_topology_read(root, &t), -ENOENT);
}

Test(kfd_topology, node_without_gpu_id_is_skipped, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        write_file("topology/nodes/2/properties", props_gfx1030);
        write_file("topology/nodes/10/gpu_id", "1\n");
        write_file("topology/nodes/10/properties", props_gfx1030);
        write_file("topology/nodes/3/gpu_id", "2\n");
        write_file("topology/nodes/3/properties", props_gfx1030);
        cr_assert_eq(kfd_topology_read(root, &t), 2);
        /* numeric order, not readdir or string order */
        cr_expect_eq(t.nodes[0].node_index, 3u);
        cr_expect_eq(t.nodes[1].node_index, 10u);
        cr_expect_str_eq(t.nodes[0].name, "", "missing name file gives an empty name");
        cr_expect_eq(t.nodes[0].local_mem_size, 0u);
}

Test(kfd_topology, malformed_properties_file, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        write_file("topology/nodes/1/gpu_id", "1\n");
        write_file("topology/nodes/1/properties", "simd_count 160\nsimd_per_cu two\n");
        cr_expect_eq(kfd_topology_read(root, &t), -EBADMSG);
}

Test(kfd_topology, malformed_lines) {
        KfdNode n = {};
        cr_expect_eq(kfd_node_parse_properties(&n, "simd_count\n"), -EBADMSG);
        cr_expect_eq(kfd_node_parse_properties(&n, "simd_count -1\n"), -EBADMSG);
        cr_expect_eq(kfd_node_parse_properties(&n, "simd_count 12x\n"), -EBADMSG);
        cr_expect_eq(kfd_node_parse_properties(&n, " 12\n"), -EBADMSG);
        cr_expect_eq(kfd_node_parse_properties(&n, "Simd-count 12\n"), -EBADMSG);
        cr_expect_eq(kfd_node_parse_properties(&n, "simd_count 99999999999\n"), -EBADMSG,
                     "a 32-bit property out of range");
        /* fine: unknown names, blank lines, 64-bit unknown values, no final newline */
        cr_expect_eq(kfd_node_parse_properties(&n, "\nfoo_bar 18374686479671623680\n\nsimd_count 7"), 0);
        cr_expect_eq(n.simd_count, 7u);
}

static KfdNode node_gfx(uint32_t gfxv, uint32_t cus) {
        KfdNode n = {};
        n.gfx_target_version = gfxv;
        n.simd_per_cu = 2;
        n.simd_count = cus * 2;
        n.num_xcc = 1;
        n.array_count = 8;
        n.simd_arrays_per_engine = 2;
        n.lds_size_in_kb = 64;
        return n;
}

Test(kfd_topology, queue_sizes_gfx1030_80cu) {
        KfdNode n = node_gfx(100300, 80);
        KfdQueueSizes s;
        cr_assert_eq(kfd_node_queue_sizes(&n, &s), 0);
        /* waves = 80*32 = 2560; ctl = ALIGN(40 + 2560*12 + 8, 4K) = 0x8000, clamped to 0x7000 */
        cr_expect_eq(s.ctl_stack_size, 0x7000u);
        /* wg = 80 * (0x40000 + 0x4000 + 0x10000 + 0x1000) = 0x1A90000; cwsr = 0x7000 + wg */
        cr_expect_eq(s.cwsr_size, 0x1A97000u, "got 0x%x", s.cwsr_size);
        cr_expect_eq(s.debug_memory_size, 0x14000u); /* 2560 * 32 */
        cr_expect_eq(s.cwsr_bo_size, 0x1AAB000ull);
        cr_expect_eq(s.eop_buffer_size, 0x1000u);
}

Test(kfd_topology, queue_sizes_small_gfx10_not_clamped) {
        /* Steam Deck gfx1033, 8 CUs: ALIGN(40 + 256*12 + 8, 4K) = 0x1000 (kfd-facts §5 #2) */
        KfdNode n = node_gfx(100303, 8);
        KfdQueueSizes s;
        cr_assert_eq(kfd_node_queue_sizes(&n, &s), 0);
        cr_expect_eq(s.ctl_stack_size, 0x1000u);
}

Test(kfd_topology, queue_sizes_gfx1100_vgpr) {
        /* gfx1100, 96 CUs: no clamp, vgpr 0x60000 */
        KfdNode n = node_gfx(110000, 96);
        KfdQueueSizes s;
        cr_assert_eq(kfd_node_queue_sizes(&n, &s), 0);
        /* ctl = ALIGN(40 + 3072*12 + 8, 4K) = ALIGN(36912, 4K) = 0xA000 */
        cr_expect_eq(s.ctl_stack_size, 0xA000u);
        /* wg = 96 * (0x60000+0x4000+0x10000+0x1000) = 96*0x75000 = 0x2BE0000 */
        cr_expect_eq(s.cwsr_size, 0xA000u + 0x2BE0000u);
        cr_expect_eq(s.debug_memory_size, 3072u * 32);
}

Test(kfd_topology, queue_sizes_gfx9_wave_rule) {
        /* gfx906 60 CUs: waves = min(60*40, 8/2*512) = 2048; 8 bytes per wave */
        KfdNode n = node_gfx(90006, 60);
        KfdQueueSizes s;
        cr_assert_eq(kfd_node_queue_sizes(&n, &s), 0);
        cr_expect_eq(s.ctl_stack_size, 0x5000u); /* ALIGN(40 + 2048*8 + 8, 4K) = ALIGN(16432) */
        cr_expect_eq(s.debug_memory_size, 2048u * 32);
}

Test(kfd_topology, queue_sizes_prefer_exported) {
        KfdNode n = node_gfx(100300, 80);
        n.cwsr_size = 0x1A98000;
        n.ctl_stack_size = 0x6000;
        KfdQueueSizes s;
        cr_assert_eq(kfd_node_queue_sizes(&n, &s), 0);
        cr_expect_eq(s.ctl_stack_size, 0x6000u);
        cr_expect_eq(s.cwsr_size, 0x1A98000u);
        cr_expect_eq(s.cwsr_bo_size, 0x1A98000ull + 0x14000);
}

Test(kfd_topology, queue_sizes_unknown_gfx) {
        KfdNode n = node_gfx(70000, 8);
        KfdQueueSizes s;
        cr_expect_eq(kfd_node_queue_sizes(&n, &s), -EOPNOTSUPP);
        n = node_gfx(130000, 8);
        cr_expect_eq(kfd_node_queue_sizes(&n, &s), -EOPNOTSUPP);
}
