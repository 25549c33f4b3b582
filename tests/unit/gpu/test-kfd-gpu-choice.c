/* SPDX-License-Identifier: MIT */
/*
 * kfd_gpu_choose() over KFD topology trees written out in a temp dir and read
 * back with kfd_topology_read(), as the daemon reads /sys: a desktop Ryzen
 * whose iGPU is listed first, an APU described by CRAT (CPU cores and SIMDs
 * in one node), two discrete cards, a node without memory banks; and every
 * form --gpu= takes, with the messages of the ones it refuses.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kfd/kfd-gpu-choice.h"
#include "test-fini.h"

static char root[256];

static void write_file(const char *rel, const char *text) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", root, rel);
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
        snprintf(root, sizeof root, "/tmp/test-kfd-gpu-choice-XXXXXX");
        cr_assert_not_null(mkdtemp(root));
}

static void teardown_root(void) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
        test_fini_expect(system(cmd) == 0, "%s failed", cmd);
        test_fini_end();
}

static void cpu_node(unsigned idx) {
        char rel[64];
        snprintf(rel, sizeof rel, "topology/nodes/%u/gpu_id", idx);
        write_file(rel, "0\n");
        snprintf(rel, sizeof rel, "topology/nodes/%u/properties", idx);
        write_file(rel, "cpu_cores_count 16\nsimd_count 0\nmem_banks_count 1\n");
}

/* A GPU node as node_show() prints it; mem 0 = no mem_banks directory. */
static void gpu_node(unsigned idx, unsigned gpu_id, unsigned cpu_cores, unsigned cus, unsigned gfx, unsigned location,
                     unsigned domain, unsigned minor, unsigned long long mem) {
        char rel[64], text[1024];
        snprintf(rel, sizeof rel, "topology/nodes/%u/gpu_id", idx);
        snprintf(text, sizeof text, "%u\n", gpu_id);
        write_file(rel, text);
        snprintf(rel, sizeof rel, "topology/nodes/%u/properties", idx);
        snprintf(text, sizeof text,
                 "cpu_cores_count %u\nsimd_count %u\nmem_banks_count %u\nsimd_per_cu 2\ngfx_target_version %u\n"
                 "vendor_id 4098\nlocation_id %u\ndomain %u\ndrm_render_minor %u\nnum_cp_queues 8\n"
                 "local_mem_size 0\n",
                 cpu_cores, cus * 2, mem ? 1 : 0, gfx, location, domain, minor);
        write_file(rel, text);
        if (mem) {
                snprintf(rel, sizeof rel, "topology/nodes/%u/mem_banks/0/properties", idx);
                snprintf(text, sizeof text, "heap_type 1\nsize_in_bytes %llu\nflags 0\nwidth 64\nmem_clk_max 2400\n",
                         mem);
                write_file(rel, text);
        }
}

static void read_topology(KfdTopology *t, int n) {
        int r = kfd_topology_read(root, t);
        cr_assert_eq(r, n, "kfd_topology_read: %d", r);
}

/* Ryzen 9 7950X (gfx1036 iGPU, 512 MiB carve-out, 10:00.0) + RX 7900 XTX (03:00.0). */
static void ryzen_desktop(void) {
        cpu_node(0);
        gpu_node(1, 0x5a0b, 0, 2, 100306, 0x1000, 0, 128, 512ULL << 20);
        gpu_node(2, 0xbee7, 0, 96, 110000, 0x0300, 0, 129, 24ULL << 30);
}

Test(kfd_gpu_choice, desktop_ryzen_prefers_the_discrete_card_listed_second, .init = setup_root,
     .fini = teardown_root) {
        KfdTopology t;
        KfdGpuChoice c;
        char err[512];

        ryzen_desktop();
        read_topology(&t, 2);
        cr_expect_eq(t.nodes[0].gpu_id, 0x5a0bu, "the iGPU is listed first");
        cr_expect(kfd_node_is_integrated(&t.nodes[0]));
        cr_expect(!kfd_node_is_integrated(&t.nodes[1]));
        cr_assert_eq(kfd_gpu_choose(&t, NULL, &c, err, sizeof err), 0);
        cr_expect_eq(c.index, 1u);
        cr_expect_str_eq(c.description,
                         "node 2 (gfx1100, 0000:03:00.0, renderD129, discrete, 24 GiB local memory)");
        cr_expect_str_eq(c.reason,
                         "a discrete GPU is preferred to an integrated one (1 of 2 GPU nodes look integrated)");
        cr_assert_eq(kfd_gpu_choose(&t, "auto", &c, err, sizeof err), 0);
        cr_expect_eq(c.index, 1u, "auto is the default");
        cr_assert_eq(kfd_gpu_choose(&t, "", &c, err, sizeof err), 0);
        cr_expect_eq(c.index, 1u);
}

Test(kfd_gpu_choice, every_form_names_a_gpu, .init = setup_root, .fini = teardown_root) {
        static const struct {
                const char *spec;
                unsigned index;
        } ok[] = {
                { "1", 0 },           { "2", 1 },           { "0000:10:00.0", 0 }, { "10:00.0", 0 },
                { "0000:03:00.0", 1 }, { "03:00.0", 1 },      { "3:0.0", 1 },        { "0000:03:00.0", 1 },
                { "renderD128", 0 },  { "renderD129", 1 },  { "/dev/dri/renderD128", 0 },
                { "00000000:03:00.0", 1 },
        };
        KfdTopology t;
        KfdGpuChoice c;
        char err[512];

        ryzen_desktop();
        read_topology(&t, 2);
        for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
                int r = kfd_gpu_choose(&t, ok[i].spec, &c, err, sizeof err);
                cr_expect_eq(r, 0, "%s: %s", ok[i].spec, err);
                cr_expect_eq(c.index, ok[i].index, "%s", ok[i].spec);
                char want[96];
                snprintf(want, sizeof want, "chosen by --gpu=%s", ok[i].spec);
                cr_expect_str_eq(c.reason, want);
        }
        /* The integrated GPU when asked for: the choice is the administrator's. */
        cr_assert_eq(kfd_gpu_choose(&t, "1", &c, err, sizeof err), 0);
        cr_expect_str_eq(c.description, "node 1 (gfx1036, 0000:10:00.0, renderD128, integrated, 512 MiB local memory)");
}

Test(kfd_gpu_choice, bad_values_are_named, .init = setup_root, .fini = teardown_root) {
        static const char *const malformed[] = {
                "discrete", "2x", "-1", "0x2", "renderD", "renderDx", "render128", "03:00", "03:00.8", "03:20.0",
                "100:00.0", "0:0:03:00.0", "123456789:03:00.0", ":03:00.0", "03:00.", "03:.0", "g3:00.0", "99999999999",
                "/dev/dri/card0",
        };
        static const struct {
                const char *spec, *message;
        } absent[] = {
                { "0", "no GPU at KFD node 0" },
                { "7", "no GPU at KFD node 7" },
                { "0000:09:00.0", "no GPU at PCI address 0000:09:00.0" },
                { "0001:03:00.0", "no GPU at PCI address 0001:03:00.0" },
                { "renderD130", "no GPU at render node renderD130" },
        };
        const char *nodes = " (the GPUs: node 1 gfx1036 0000:10:00.0 renderD128, node 2 gfx1100 0000:03:00.0 renderD129)";
        KfdTopology t;
        KfdGpuChoice c;
        char err[512], want[512];

        ryzen_desktop();
        read_topology(&t, 2);
        for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
                cr_expect_eq(kfd_gpu_choose(&t, malformed[i], &c, err, sizeof err), -EINVAL, "%s", malformed[i]);
                snprintf(want, sizeof want,
                         "'%s' is not a GPU: expected auto, all, a KFD node id (2), a PCI address (0000:03:00.0) "
                         "or a render node (renderD128), or a comma-separated list of them",
                         malformed[i]);
                cr_expect_str_eq(err, want);
        }
        for (size_t i = 0; i < sizeof absent / sizeof absent[0]; i++) {
                cr_expect_eq(kfd_gpu_choose(&t, absent[i].spec, &c, err, sizeof err), -ENODEV, "%s", absent[i].spec);
                snprintf(want, sizeof want, "%s%s", absent[i].message, nodes);
                cr_expect_str_eq(err, want);
        }
}

Test(kfd_gpu_choice, an_apu_node_with_cpu_cores_is_integrated, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        KfdGpuChoice c;
        char err[512];

        /* A CRAT-described APU: its CPU cores and SIMDs in one node (with 2 GiB
         * of carve-out, more than the memory rule alone would call integrated). */
        gpu_node(0, 0x1111, 8, 8, 90002, 0x0000, 0, 128, 2ULL << 30);
        gpu_node(1, 0x2222, 0, 36, 100102, 0x0a00, 0, 129, 8ULL << 30);
        read_topology(&t, 2);
        cr_expect_eq(t.nodes[0].cpu_cores_count, 8u);
        cr_expect(kfd_node_is_integrated(&t.nodes[0]));
        cr_assert_eq(kfd_gpu_choose(&t, NULL, &c, err, sizeof err), 0);
        cr_expect_eq(c.index, 1u);
}

Test(kfd_gpu_choice, the_only_gpu_even_integrated, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        KfdGpuChoice c;
        char err[512];

        cpu_node(0);
        gpu_node(1, 0x5a0b, 0, 12, 110003, 0xc400, 0, 128, 0); /* no memory banks: integrated */
        read_topology(&t, 1);
        cr_expect_eq(t.nodes[0].local_mem_size, 0u);
        cr_expect(kfd_node_is_integrated(&t.nodes[0]));
        cr_assert_eq(kfd_gpu_choose(&t, NULL, &c, err, sizeof err), 0);
        cr_expect_eq(c.index, 0u);
        cr_expect_str_eq(c.reason, "the only GPU");
        cr_expect_str_eq(c.description, "node 1 (gfx1103, 0000:c4:00.0, renderD128, integrated, 0 MiB local memory)");
}

Test(kfd_gpu_choice, two_discrete_cards_most_memory_then_most_cus_then_first, .init = setup_root,
     .fini = teardown_root) {
        KfdTopology t;
        KfdGpuChoice c;
        char err[512];

        cpu_node(0);
        gpu_node(1, 0x1001, 0, 36, 100300, 0x0300, 0, 128, 8ULL << 30);
        gpu_node(2, 0x1002, 0, 60, 100300, 0x0400, 1, 129, 16ULL << 30);
        gpu_node(3, 0x1003, 0, 72, 100300, 0x0500, 0, 130, 16ULL << 30);
        gpu_node(4, 0x1004, 0, 72, 100300, 0x0600, 0, 131, 16ULL << 30);
        read_topology(&t, 4);
        cr_assert_eq(kfd_gpu_choose(&t, NULL, &c, err, sizeof err), 0);
        cr_expect_eq(t.nodes[c.index].node_index, 3u, "16 GiB and 72 CUs, the first of two such");
        cr_expect_str_eq(c.reason, "of 4 discrete GPUs, the one with the most local memory and compute units");
        cr_assert_eq(kfd_gpu_choose(&t, "0001:04:00.0", &c, err, sizeof err), 0, "%s", err);
        cr_expect_eq(t.nodes[c.index].node_index, 2u, "the PCI domain counts");
        cr_expect_eq(kfd_gpu_choose(&t, "04:00.0", &c, err, sizeof err), -ENODEV, "domain 0 if left out");
}

Test(kfd_gpu_choice, no_gpu_node) {
        KfdTopology t = {};
        KfdGpuChoice c;
        char err[512];

        cr_expect_eq(kfd_gpu_choose(&t, NULL, &c, err, sizeof err), -ENODEV);
        cr_expect_str_eq(err, "the KFD topology lists no GPU node");
}

/* The set the daemon serves: its order is every GPU's index. */
Test(kfd_gpu_choice, the_served_set_is_every_discrete_gpu_discrete_first, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        KfdGpuChoice c[8];
        unsigned n = 0;
        char err[512];

        cpu_node(0);
        gpu_node(1, 0x5a0b, 0, 2, 100306, 0x1000, 0, 128, 512ULL << 20); /* iGPU, listed first */
        gpu_node(2, 0x1002, 0, 60, 100300, 0x0400, 0, 129, 16ULL << 30);
        gpu_node(3, 0x1003, 0, 72, 100300, 0x0500, 0, 130, 24ULL << 30);
        read_topology(&t, 3);

        cr_assert_eq(kfd_gpu_choose_set(&t, NULL, c, 8, &n, err, sizeof err), 0, "%s", err);
        cr_assert_eq(n, 2u, "the iGPU beside discrete cards is left out");
        cr_expect_eq(t.nodes[c[0].index].node_index, 2u);
        cr_expect_eq(t.nodes[c[1].index].node_index, 3u, "node order, not the most memory first");
        cr_expect_str_eq(c[0].reason, "every discrete GPU (1 of 3 GPU nodes look integrated and are left out: name "
                                      "them in --gpu= to serve them)");

        cr_assert_eq(kfd_gpu_choose_set(&t, "all", c, 8, &n, err, sizeof err), 0, "%s", err);
        cr_assert_eq(n, 3u);
        cr_expect_eq(t.nodes[c[2].index].node_index, 1u, "the integrated one comes last");

        cr_assert_eq(kfd_gpu_choose_set(&t, "renderD128,0000:05:00.0", c, 8, &n, err, sizeof err), 0, "%s", err);
        cr_assert_eq(n, 2u);
        cr_expect_eq(t.nodes[c[0].index].node_index, 3u, "discrete first whatever the list's order");
        cr_expect_eq(t.nodes[c[1].index].node_index, 1u);
        cr_expect_str_eq(c[1].reason, "listed by --gpu=renderD128,0000:05:00.0");

        cr_assert_eq(kfd_gpu_choose_set(&t, "3", c, 8, &n, err, sizeof err), 0, "%s", err);
        cr_expect_eq(n, 1u);

        cr_expect_eq(kfd_gpu_choose_set(&t, "2,renderD129", c, 8, &n, err, sizeof err), -EINVAL);
        cr_expect_str_eq(err, "'renderD129' names node 2, which the list already has");
        cr_expect_eq(kfd_gpu_choose_set(&t, "2,", c, 8, &n, err, sizeof err), -EINVAL, "an empty item");
        cr_expect_eq(kfd_gpu_choose_set(&t, "2,9", c, 8, &n, err, sizeof err), -ENODEV);
        cr_expect(strncmp(err, "no GPU at KFD node 9 (the GPUs: ", 32) == 0, "%s", err);
        cr_expect_eq(kfd_gpu_choose_set(&t, "all", c, 2, &n, err, sizeof err), -E2BIG);
        cr_expect_str_eq(err, "3 GPUs chosen, at most 2 can be served");
}

Test(kfd_gpu_choice, a_laptop_serves_its_integrated_gpus, .init = setup_root, .fini = teardown_root) {
        KfdTopology t;
        KfdGpuChoice c[8];
        unsigned n = 0;
        char err[512];

        cpu_node(0);
        gpu_node(1, 0x5a0b, 0, 12, 110003, 0xc400, 0, 128, 0);
        read_topology(&t, 1);
        cr_assert_eq(kfd_gpu_choose_set(&t, "auto", c, 8, &n, err, sizeof err), 0, "%s", err);
        cr_expect_eq(n, 1u);
        cr_expect_str_eq(c[0].reason, "the only GPU");
}
