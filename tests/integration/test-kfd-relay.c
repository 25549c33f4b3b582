/* SPDX-License-Identifier: MIT */
/*
 * The KFD relay (OpenKfd, docs/rocm.md) against the real daemon on the
 * simulated GPU, as libkfdbroker-kfd.so uses it but without ROCr: the
 * topology a session is given, the ioctls rocminfo needs, hostile
 * arguments answered with the kernel's errno while the session goes on and
 * another client stays unaffected, and the refusals (a second OpenKfd,
 * --contexts=shared, --max-contexts). Run once with secondary contexts (the
 * client's KFD process a secondary KFD context of the daemon's, as on the
 * kernel) and once with worker processes (test-kfd-relay-workers,
 * --sim-kfd-version=1.18: the simulator's stand-in, a process of its own).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <amdgpu_drm.h>

#include "compute-util.h"
#include "harness.h"
#include "kfd/kfd-uapi.h"
#include "relay-util.h"
#include "sim/sim-remote.h"

TestSuite(kfd_relay, .fini = relay_teardown, .timeout = 300);

Test(kfd_relay, topology_and_the_ioctls_of_rocminfo_checked_as_the_kernel_checks_them) {
        Relayed a = {}, b = {};
        struct kfd_ioctl_get_version_args v = {};
        struct kfd_ioctl_acquire_vm_args vm = {};
        struct kfd_ioctl_set_memory_policy_args pol = {};
        struct kfd_ioctl_set_xnack_mode_args x = { .xnack_enabled = -1 };
        struct kfd_ioctl_set_scratch_backing_va_args sc = {};
        struct kfd_ioctl_set_trap_handler_args th = {};
        struct kfd_ioctl_free_memory_of_gpu_args fr = {};
        uint64_t mine, theirs, wild;
        char *props;
        int r, past;

        test_daemon_start(&d, NULL);
        relayed_open(&a, 0);
        relayed_open(&b, 1);

        /* What ROCr needs of the topology (rocm-facts §1.2, §2): gfx1030,
         * DoorbellType 2, GPU caches, the render node. */
        props = read_text(topo[0], "topology/nodes/1/properties");
        cr_expect(strstr(props, "gfx_target_version 100300\n"), "%s", props);
        cr_expect(strstr(props, "capability 8192\n"), "%s", props);
        cr_expect(strstr(props, "caches_count 6\n"), "%s", props);
        cr_expect(strstr(props, "drm_render_minor 128\n"), "%s", props);
        free(props);
        props = read_text(topo[0], "topology/nodes/1/caches/4/properties");
        cr_expect(strstr(props, "level 2\nsize 4096\n"), "%s", props);
        free(props);

        cr_assert_eq(kioctl(&a, AMDKFD_IOC_GET_VERSION, &v), 0);
        cr_expect_eq(v.major_version, 1);

        /* The daemon's GPU context in the process acquired its VM before the
         * client came (kfd-relay.c): the client's ACQUIRE_VM finds it. */
        pol.gpu_id = a.gpu_id;
        vm.drm_fd = (uint32_t) a.render;
        vm.gpu_id = a.gpu_id;
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);

        pol.default_policy = 7;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_MEMORY_POLICY, &pol), -EINVAL, "a policy that is none");
        pol.default_policy = KFD_IOC_CACHE_POLICY_COHERENT;
        pol.gpu_id = a.gpu_id ^ 1;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_MEMORY_POLICY, &pol), -EINVAL, "a GPU that is not there");
        pol.gpu_id = a.gpu_id;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_MEMORY_POLICY, &pol), 0);

        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_XNACK_MODE, &x), 0);
        cr_expect_eq(x.xnack_enabled, 0, "gfx1030 has no XNACK");
        x.xnack_enabled = 1;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_XNACK_MODE, &x), -EPERM);

        sc.gpu_id = a.gpu_id ^ 1;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &sc), -EINVAL);
        sc.gpu_id = a.gpu_id;
        sc.va_addr = 0x7f0000000000ULL;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &sc), 0);
        th.gpu_id = a.gpu_id;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_TRAP_HANDLER, &th), 0);

        /* Past the table (the 5.2.3 thunk's DKMS DBG_TRAP 0x82, garbage
         * 0x7e): -EINVAL, -ENOTTY on the kernels that speak 1.19 (sim-device.c). */
        past = v.minor_version >= 19 ? -ENOTTY : -EINVAL;
        cr_expect_eq(kioctl(&a, _IOWR('K', 0x82, struct kfd_ioctl_get_version_args), &v), past);
        cr_expect_eq(kioctl(&a, _IOWR('K', 0x7e, uint64_t), &mine), past);

        /* Memory: a size of 0, a VA past the GPUVM aperture (at MAP, as
         * amdgpu_vm_bo_map refuses it), another process's handle. */
        alloc_at(&a, 0x10000000, &r);
        (void) alloc_at(&a, 0, &r);
        {
                struct kfd_ioctl_alloc_memory_of_gpu_args z = { .va_addr = 0x20000000, .gpu_id = a.gpu_id,
                                                                .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT };
                cr_expect_eq(kioctl(&a, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &z), -EINVAL, "size 0");
        }
        mine = alloc_at(&a, 0x30000000, &r);
        cr_assert_eq(r, 0);
        cr_expect_eq(map(&a, mine), 0);
        wild = alloc_at(&a, 1ULL << 47, &r);
        cr_assert_eq(r, 0);
        cr_expect_eq(map(&a, wild), -EINVAL, "a VA outside the aperture");

        vm.drm_fd = (uint32_t) b.render;
        vm.gpu_id = b.gpu_id;
        cr_assert_eq(kioctl(&b, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
        /* Handles are per process (an idr of each): one whose index this
         * process never gave out names nothing here. */
        for (unsigned i = 0; i < 5; i++) {
                theirs = alloc_at(&b, 0x40000000 + i * 0x100000ULL, &r);
                cr_assert_eq(r, 0);
        }
        cr_expect_eq(map(&b, theirs), 0);
        fr.handle = theirs;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), -EINVAL, "a handle of another process");

        /* Both go on. */
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_VERSION, &v), 0);
        cr_expect_eq(kioctl(&b, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), -EBUSY, "still mapped, and still there");
        {
                uint32_t ids[1] = { b.gpu_id };
                struct kfd_ioctl_unmap_memory_from_gpu_args um = {
                        .handle = theirs, .device_ids_array_ptr = (uintptr_t) ids, .n_devices = 1,
                };
                cr_expect_eq(kioctl(&b, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &um), 0);
        }
        cr_expect_eq(kioctl(&b, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), 0);
        fr.handle = mine;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), -EBUSY, "still mapped");

        /* The session's end ends its KFD process, whatever the client holds. */
        kfdb_session_free(a.s);
        a.s = NULL;
        for (int i = 0; i < 200 && (r = kioctl(&a, AMDKFD_IOC_GET_VERSION, &v)) == 0; i++)
                usleep(10000);
        cr_expect_lt(r, 0, "the KFD process outlived its session");
        sim_remote_ops_free(a.ops);
        relayed_close(&b);
}

Test(kfd_relay, open_kfd_once_per_session) {
        kfdb_session *s;
        int fd, r;

        test_daemon_start(&d, NULL);
        s = test_connect(&d, "relay");
        cr_assert_eq(open_kfd(s, 0, &fd, NULL), 0);
        close(fd);
        r = open_kfd(s, 1, &fd, NULL);
        cr_expect_eq(r, -EEXIST);
        cr_expect(strstr(kfdb_session_last_error(s), "has its KFD process already"), "%s",
                  kfdb_session_last_error(s));
        kfdb_session_free(s);
}

Test(kfd_relay, refused_without_client_contexts) {
        const char *args[] = { "--contexts=shared", NULL };
        kfdb_session *s;
        int fd;

        test_daemon_start(&d, args);
        s = test_connect(&d, "relay");
        cr_expect_eq(open_kfd(s, 0, &fd, NULL), -EACCES);
        cr_expect(strstr(kfdb_session_last_error(s), "gives no client a GPU context of its own"), "%s",
                  kfdb_session_last_error(s));
        kfdb_session_free(s);
}

Test(kfd_relay, counted_against_max_contexts_and_given_back) {
        const char *args[] = { "--max-contexts=1", NULL };
        kfdb_session *s1, *s2;
        int fd1, fd2;

        test_daemon_start(&d, args);
        s1 = test_connect(&d, "first");
        s2 = test_connect(&d, "second");
        cr_assert_eq(open_kfd(s1, 0, &fd1, NULL), 0);
        cr_expect_eq(open_kfd(s2, 1, &fd2, NULL), -EBUSY);
        cr_expect(strstr(kfdb_session_last_error(s2), "kfdbrokerd --max-contexts"), "%s",
                  kfdb_session_last_error(s2));
        close(fd1);
        kfdb_session_free(s1);
        /* The daemon sees the first session end when it reads its EOF. */
        for (int i = 0; i < 200; i++) {
                char cmd[160];
                snprintf(cmd, sizeof cmd, "rm -rf '%s'", topo[1]);
                cr_assert(system(cmd) == 0);
                if (open_kfd(s2, 1, &fd2, NULL) == 0)
                        break;
                fd2 = -1;
                usleep(10000);
        }
        cr_expect_geq(fd2, 0, "the first session's KFD process was not given back: %s",
                      kfdb_session_last_error(s2));
        if (fd2 >= 0)
                close(fd2);
        kfdb_session_free(s2);
}



static uint64_t charged(kfdb_session *s) {
        kfdb_usage u;

        cr_assert_eq(kfdb_query(s, &u), 0);
        return u.buffer_bytes;
}

Test(kfd_relay, allocations_are_charged_to_the_session_and_enomem_past_its_limit) {
        Relayed a = {};
        struct kfd_ioctl_free_memory_of_gpu_args fr = {};
        uint64_t h1, h2, base;
        char *log;
        int r;

        start_with_limits("BufferMemory=1M\n");
        relayed_open(&a, 0);
        acquire(&a);
        /* The GPU context the daemon keeps in the process (its event page,
         * fence memory) is the session's memory too. */
        base = charged(a.s);
        cr_expect_lt(base, 256 * 1024, "%lu bytes before the first allocation", (unsigned long) base);
        h1 = alloc_size(&a, 0x10000000, 600 * 1024 + 1, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &r);
        cr_assert_eq(r, 0);
        cr_expect_eq(charged(a.s), base + 604 * 1024, "rounded up to pages");
        (void) alloc_size(&a, 0x20000000, 512 * 1024, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, &r);
        cr_expect_eq(r, -ENOMEM, "over BufferMemory=: out of memory, never EAGAIN");
        cr_expect_eq(charged(a.s), base + 604 * 1024, "a refused allocation is not charged");
        /* A request word that claims another size is still an allocation. */
        {
                struct kfd_ioctl_alloc_memory_of_gpu_args big = { .va_addr = 0x30000000, .size = 512 * 1024,
                                                                   .gpu_id = a.gpu_id,
                                                                   .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT };
                cr_expect_eq(kioctl(&a, _IOC(_IOC_READ | _IOC_WRITE, 'K', 0x16, 40), &big), -ENOMEM);
        }
        fr.handle = h1;
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), 0);
        for (int i = 0; i < 200 && charged(a.s) != base; i++)
                usleep(5000);
        cr_expect_eq(charged(a.s), base, "freed memory is given back");
        h2 = alloc_size(&a, 0x20000000, 512 * 1024, KFD_IOC_ALLOC_MEM_FLAGS_VRAM, &r);
        cr_expect_eq(r, 0);
        cr_expect_eq(charged(a.s), base + 512 * 1024);
        (void) h2;

        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "KFD allocation refused: buffer memory limit (max_buffer_bytes 1048576, policy BufferMemory=)"),
                  "%s", log);
        free(log);
        relayed_close(&a);
}

Test(kfd_relay, what_a_sandboxed_client_must_not_have_is_refused_with_a_log_line) {
        Relayed a = {};
        struct kfd_ioctl_create_queue_args q = {};
        uint8_t svm[64] = {};
        char *log;
        int r;

        test_daemon_start(&d, NULL);
        relayed_open(&a, 0);
        acquire(&a);
        (void) alloc_size(&a, 0x10000000, 4096, KFD_IOC_ALLOC_MEM_FLAGS_USERPTR, &r);
        cr_expect_eq(r, -EOPNOTSUPP, "USERPTR");
        cr_expect_eq(kioctl(&a, _IOWR('K', 0x20, uint8_t[24]), svm), -EOPNOTSUPP, "SVM");
        cr_expect_eq(kioctl(&a, _IOWR('K', 0x20, uint8_t[24]), svm), -EOPNOTSUPP, "SVM again");
        cr_expect_eq(kioctl(&a, _IOWR('K', 0x26, uint8_t[40]), svm), -EOPNOTSUPP, "DBG_TRAP");
        q.gpu_id = a.gpu_id;
        q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_CREATE_QUEUE, &q), -EOPNOTSUPP, "a PM4 queue of the client's own");
        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "KFD relay refused user-pointer memory"), "%s", log);
        cr_expect(strstr(log, "KFD relay refused shared virtual memory"), "%s", log);
        cr_expect(strstr(log, "KFD relay refused the debugger interface"), "%s", log);
        cr_expect(strstr(log, "KFD relay refused a queue of type 0: only AQL queues are relayed"), "%s", log);
        {
                const char *p = strstr(log, "KFD relay refused shared virtual memory");
                cr_expect(p && !strstr(p + 1, "KFD relay refused shared virtual memory"), "logged once");
        }
        free(log);
        relayed_close(&a);
}

static uint64_t session_fds(kfdb_session *s) {
        kfdb_fd_budget b;

        cr_assert_eq(kfdb_query_fd_budget(s, &b), 0);
        return b.session_fds;
}

/* On the simulator each buffer object keeps a daemon fd (a memfd): counted
 * in the session's fd budget, and past it the allocation fails. */
Test(kfd_relay, the_daemon_fds_of_its_buffers_are_counted) {
        const char *args[] = { "--max-fds-per-session=8", NULL };
        struct kfd_ioctl_free_memory_of_gpu_args fr = {};
        uint64_t base, h[8];
        unsigned n = 0;
        Relayed a = {};
        int r = 0;

        test_daemon_start(&d, args);
        relayed_open(&a, 0);
        acquire(&a);
        base = session_fds(a.s);
        h[n] = alloc_size(&a, 0x10000000, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &r);
        cr_assert_eq(r, 0);
        n++;
        cr_expect_eq(session_fds(a.s), base + 1);
        while (n < 8) {
                h[n] = alloc_size(&a, 0x10000000 + n * 0x10000ULL, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &r);
                if (r < 0)
                        break;
                n++;
        }
        cr_expect_eq(r, -ENOMEM, "past --max-fds-per-session");
        cr_expect_leq(session_fds(a.s), 8);
        for (unsigned i = 0; i < n; i++) {
                fr.handle = h[i];
                cr_expect_eq(kioctl(&a, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), 0);
        }
        for (int i = 0; i < 200 && session_fds(a.s) != base; i++)
                usleep(5000);
        cr_expect_eq(session_fds(a.s), base, "given back at free");
        relayed_close(&a);
}

/* An iGPU listed first, the daemon on the gfx1030: the session's topology and
 * its KFD process hold that GPU alone. */
Test(kfd_relay, only_the_gpu_the_session_may_use) {
        const char *args[] = { "--sim-topology=igpu-first", NULL };
        struct kfd_ioctl_get_process_apertures_new_args ap = {};
        struct kfd_process_device_apertures pa[2] = {};
        char path[160], *text;
        Relayed a = {};

        test_daemon_start(&d, args);
        relayed_open(&a, 0);
        cr_expect_eq(a.minor, 129, "the gfx1030's render node");
        text = read_text(topo[0], "topology/nodes/1/properties");
        cr_expect(strstr(text, "gfx_target_version 100300\n"), "%s", text);
        free(text);
        text = read_text(topo[0], "topology/nodes/0/gpu_id");
        cr_expect_str_eq(text, "0\n", "node 0 is the CPU");
        free(text);
        snprintf(path, sizeof path, "%s/topology/nodes/2", topo[0]);
        cr_expect_eq(access(path, F_OK), -1, "no third node");
        /* The links follow: the CPU's one link goes to the GPU kept, now node
         * 1; the link to the iGPU left out is gone, and the counts say so. */
        text = read_text(topo[0], "topology/nodes/0/properties");
        cr_expect(strstr(text, "io_links_count 1\n"), "%s", text);
        free(text);
        text = read_text(topo[0], "topology/nodes/0/io_links/0/properties");
        cr_expect(strstr(text, "node_from 0\nnode_to 1\n"), "%s", text);
        free(text);
        snprintf(path, sizeof path, "%s/topology/nodes/0/io_links/1", topo[0]);
        cr_expect_eq(access(path, F_OK), -1, "no link to the iGPU");
        text = read_text(topo[0], "topology/nodes/1/io_links/0/properties");
        cr_expect(strstr(text, "node_from 1\nnode_to 0\n"), "%s", text);
        free(text);
        cr_expect_eq(a.ops->open_render(a.ops->userdata, 128), -ENOENT, "the iGPU's render node");
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &ap), 0);
        cr_expect_eq(ap.num_of_nodes, 1);
        ap.kfd_process_device_apertures_ptr = (uintptr_t) pa;
        ap.num_of_nodes = 2;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &ap), 0);
        cr_expect_eq(ap.num_of_nodes, 1);
        cr_expect_eq(pa[0].gpu_id, a.gpu_id);
        relayed_close(&a);
}

/* GET_TILE_CONFIG's two arrays and SET_CU_MASK's mask cross the relay. */
Test(kfd_relay, tile_config_and_cu_mask_through_the_relay) {
        uint32_t tiles[40], macros[20], mask[2] = { ~0u, ~0u };
        struct kfd_ioctl_get_tile_config_args t = {
                .tile_config_ptr = (uintptr_t) tiles, .macro_tile_config_ptr = (uintptr_t) macros,
                .num_tile_configs = 40, .num_macro_tile_configs = 20,
        };
        struct kfd_ioctl_set_cu_mask_args m = { .num_cu_mask = 64, .cu_mask_ptr = (uintptr_t) mask };
        Relayed a = {};

        test_daemon_start(&d, NULL);
        relayed_open(&a, 0);
        acquire(&a);
        t.gpu_id = a.gpu_id;
        memset(tiles, 0xff, sizeof tiles);
        memset(macros, 0xff, sizeof macros);
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_GET_TILE_CONFIG, &t), 0);
        cr_expect_eq(t.gb_addr_config, 0x10000444u);
        cr_expect_eq(t.num_tile_configs, 32u);
        cr_expect_eq(t.num_macro_tile_configs, 16u);
        cr_expect_eq(t.tile_config_ptr, (uintptr_t) tiles, "the caller's pointers come back");
        cr_expect_eq(tiles[0], 0u);
        cr_expect_eq(tiles[32], 0xffffffffu);
        cr_expect_eq(macros[15], 0u);
        cr_expect_eq(macros[16], 0xffffffffu);
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_CU_MASK, &m), -EFAULT, "no queue 0");
        m.num_cu_mask = 33;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_CU_MASK, &m), -EINVAL);
        relayed_close(&a);
}

/* A request word of the wrong direction is copied as the KFD copies it: in
 * the direction of its own table (kfd_ioctl: "Do not trust userspace, use
 * our own definition"), the size of the caller's word — through the relay's
 * wire, the served view and (test-kfd-relay-workers) a proxy worker. The
 * _IOR word of MAP's number is fuzz-relay-ioctl's finding (docs/fuzzing.md). */
Test(kfd_relay, a_word_of_the_wrong_direction_is_copied_as_the_kernel_copies_it) {
        struct kfd_ioctl_free_memory_of_gpu_args fr = {};
        uint32_t ids[1];
        Relayed a = {};
        int r;

        test_daemon_start(&d, NULL);
        relayed_open(&a, 0);
        acquire(&a);
        ids[0] = a.gpu_id;

        /* MAP is _IOWR: an _IOR word of its number reads the caller's bytes
         * (the buffer is mapped) and gives them back, its pointer and the
         * bytes past the struct (7 680 of them, as the fuzzer's word) too. */
        uint64_t h = alloc_at(&a, 0x10000000, &r);
        cr_assert_eq(r, 0);
        uint8_t big[7680];
        memset(big, 0x5a, sizeof big);
        struct kfd_ioctl_map_memory_to_gpu_args m = {
                .handle = h, .device_ids_array_ptr = (uintptr_t) ids, .n_devices = 1 };
        memcpy(big, &m, sizeof m);
        cr_expect_eq(kioctl(&a, _IOC(_IOC_READ, 'K', 0x18, sizeof big), big), 0);
        memcpy(&m, big, sizeof m);
        cr_expect_eq(m.device_ids_array_ptr, (uintptr_t) ids, "the caller's pointer comes back");
        cr_expect_eq(m.handle, h);
        cr_expect_eq(m.n_success, 1u);
        cr_expect_eq(big[sizeof m], 0x5a, "the caller's bytes past the struct come back");
        cr_expect_eq(big[sizeof big - 1], 0x5a);
        fr.handle = h;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), -EBUSY, "it was mapped");

        /* GET_VERSION is _IOR: an _IOW word of it has the version written
         * over the caller's bytes. */
        struct kfd_ioctl_get_version_args v = { .major_version = 77, .minor_version = 77 };
        cr_expect_eq(kioctl(&a, _IOW('K', 0x01, struct kfd_ioctl_get_version_args), &v), 0);
        cr_expect_eq(v.major_version, 1u);
        cr_expect_neq(v.minor_version, 77u);

        /* DESTROY_EVENT is _IOW: an _IOWR word of it writes nothing back,
         * so its argument may be read-only memory, as with the kernel. */
        struct kfd_ioctl_create_event_args e = { .event_type = KFD_IOC_EVENT_SIGNAL };
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_CREATE_EVENT, &e), 0);
        struct kfd_ioctl_destroy_event_args *ro =
                mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(ro, MAP_FAILED);
        ro->event_id = e.event_id;
        cr_assert_eq(mprotect(ro, 4096, PROT_READ), 0);
        cr_expect_eq(kioctl(&a, _IOWR('K', 0x09, struct kfd_ioctl_destroy_event_args), ro), 0);
        cr_expect_eq(kioctl(&a, _IOWR('K', 0x09, struct kfd_ioctl_destroy_event_args), ro), -EINVAL, "destroyed");
        munmap(ro, 4096);

        /* The session goes on: the same calls with their own words. */
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_VERSION, &v), 0);
        cr_expect_eq(map(&a, h), 0, "mapping again is a no-op");
        relayed_close(&a);
}

/* Events= bounds a relayed process's events as a session's: past it
 * CREATE_EVENT answers -ENOSPC (the kernel's answer for a full signal page). */
Test(kfd_relay, events_are_bounded_by_the_session_policy) {
        struct kfd_ioctl_create_event_args ce = { .event_type = KFD_IOC_EVENT_SIGNAL };
        struct kfd_ioctl_destroy_event_args de = {};
        uint32_t ids[2];
        Relayed a = {};
        char *log;

        start_with_limits("Events=2\n");
        relayed_open(&a, 0);
        acquire(&a);
        /* CREATE_EVENT writes event_page_offset back: a fresh argument each time. */
#define FRESH (ce = (struct kfd_ioctl_create_event_args) { .event_type = KFD_IOC_EVENT_SIGNAL }, &ce)
        for (unsigned i = 0; i < 2; i++) {
                int r = kioctl(&a, AMDKFD_IOC_CREATE_EVENT, FRESH);
                cr_assert_eq(r, 0, "event %u: %d", i, r);
                ids[i] = ce.event_id;
        }
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_CREATE_EVENT, FRESH), -ENOSPC);
        de.event_id = ids[0];
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_DESTROY_EVENT, &de), 0);
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_CREATE_EVENT, FRESH), 0, "one was given back");
        de.event_id = 0x7ffff; /* no event of this process */
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_DESTROY_EVENT, &de), -EINVAL, "no such event");
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_CREATE_EVENT, FRESH), -ENOSPC, "a failed destroy gives nothing back");
#undef FRESH
        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "KFD relay refused an event: event count limit (2, policy Events=) reached"), "%s", log);
        free(log);
        relayed_close(&a);
}

/* A relayed process's buffer objects are the user's (UserBuffers=). */
Test(kfd_relay, buffer_objects_count_as_the_users) {
        Relayed a = {};
        kfdb_buffer *b;
        int r;

        start_with_limits("UserBuffers=2\n");
        relayed_open(&a, 0);
        acquire(&a);
        (void) alloc_size(&a, 0x10000000, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &r);
        cr_assert_eq(r, 0);
        (void) alloc_size(&a, 0x10100000, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &r);
        cr_assert_eq(r, 0);
        (void) alloc_size(&a, 0x10200000, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &r);
        cr_expect_eq(r, -ENOMEM, "a third object of the user");
        cr_expect_eq(kfdb_buffer_alloc(a.s, 4096, KFDB_PLACEMENT_GTT, &b), -EDQUOT, "nor a native buffer");
        relayed_close(&a);
}

/* A relayed process's KFD process holds its place under --max-contexts for
 * as long as it lives: a native client's dispatch cannot reclaim it, and is
 * told why. */
Test(kfd_relay, never_reclaimed_for_a_native_client) {
        const char *args[] = { "--max-contexts=1", NULL };
        uint32_t n = 64, block = 64;
        kfdb_job_failure f;
        kfdb_code_object *co;
        kfdb_batch *b = NULL;
        kfdb_buffer *in, *out;
        kfdb_session *native;
        void *map;
        uint64_t fence;
        char msg[512] = "";
        Relayed a = {};
        int r;

        compute_require_kernels();
        test_daemon_start(&d, args);
        relayed_open(&a, 0);
        native = test_connect(&d, "native");
        co = load_kernel(native, "vector-add");
        in = new_buffer(native, 4096, 0, &map);
        out = new_buffer(native, 4096, 0, &map);
        kfdb_arg kargs[] = { kfdb_arg_buffer(in, 0), kfdb_arg_buffer(in, 0), kfdb_arg_buffer(out, 0),
                             kfdb_arg_value(&n, 4) };
        cr_assert_eq(kfdb_batch_new(native, &b), 0);
        cr_assert_eq(kfdb_batch_dispatch(b, co, "vector_add", 1, &n, &block, kargs, 4), 0);
        r = kfdb_batch_submit(b, NULL, &fence);
        if (r == 0)
                r = kfdb_fence_wait(native, fence, DISPATCH_TIMEOUT_MS);
        snprintf(msg, sizeof msg, "%s", kfdb_session_last_error(native));
        for (int i = 0; r < 0 && i < 1000 && !strstr(msg, "kfdbroker-run"); i++) {
                while (kfdb_job_failure_next(native, &f) > 0)
                        snprintf(msg, sizeof msg, "%s", f.message);
                usleep(2000);
        }
        cr_expect_lt(r, 0, "the dispatch ran: the relayed process's context was reclaimed or not counted");
        cr_expect(strstr(msg, "KFD processes of programs run by kfdbroker-run, which are not reclaimed"), "%s", msg);
        kfdb_batch_free(b);
        /* The relayed process is untouched. */
        struct kfd_ioctl_get_version_args v = {};
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_VERSION, &v), 0);
        kfdb_session_free(native);
        relayed_close(&a);
}

typedef struct Waiter {
        Relayed *c;
        uint32_t event_id;
        int r;
} Waiter;

static void *wait_forever(void *userdata) {
        Waiter *w = userdata;
        struct kfd_event_data ev = { .event_id = w->event_id };
        struct kfd_ioctl_wait_events_args a = { .events_ptr = (uintptr_t) &ev, .num_events = 1,
                                                .timeout = UINT32_MAX };

        w->r = kioctl(w->c, AMDKFD_IOC_WAIT_EVENTS, &a);
        return NULL;
}

/* The client's KFD process shares the daemon's KFD context in it, and must
 * not reach beyond it: not the daemon's render file (its DRM calls), not the
 * daemon's queues in that context (the queue calls past the relay), not
 * another GPU. And when the client goes while a thread of its sleeps in
 * WAIT_EVENTS for ever, the process still ends: its files are let go. */
Test(kfd_relay, the_daemons_files_and_queues_are_out_of_the_clients_reach) {
        struct kfd_ioctl_get_version_args v = {};
        union drm_amdgpu_gem_create gem = { .in = { .bo_size = 4096, .domains = AMDGPU_GEM_DOMAIN_GTT } };
        struct kfd_ioctl_get_queue_wave_state_args ws = {};
        struct kfd_ioctl_create_event_args ce = { .event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1 };
        struct kfd_ioctl_set_scratch_backing_va_args sc = { .va_addr = 0x7f0000000000ULL };
        Relayed a = {};
        Waiter w = { .c = &a };
        pthread_t t;
        int base;

        test_daemon_start(&d, NULL);
        base = test_daemon_count_fds(&d);
        relayed_open(&a, 0);
        acquire(&a);
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_GET_VERSION, &v), 0);
        if (v.minor_version >= KFD_MINOR_CREATE_PROCESS) {
                cr_expect_eq(a.ops->ioctl(a.ops->userdata, a.render, DRM_IOCTL_AMDGPU_GEM_CREATE, &gem), -EACCES,
                             "a DRM call on the daemon's render file");
                for (uint32_t q = 0; q < 4; q++) {
                        ws.queue_id = q;
                        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_QUEUE_WAVE_STATE, &ws), -EINVAL,
                                     "the wave state of queue %u (the daemon's queues are in this context)", q);
                }
                sc.gpu_id = a.gpu_id + 1;
                cr_expect_eq(kioctl(&a, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &sc), -EINVAL, "another gpu_id");
        }
        /* The relay still serves it. */
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_CREATE_EVENT, &ce), 0);
        w.event_id = ce.event_id;
        cr_assert_eq(pthread_create(&t, NULL, wait_forever, &w), 0);
        usleep(300 * 1000);
        /* The session ends under the sleeping thread: the daemon ends the
         * KFD process, the wait returns, and every file of it goes. */
        kfdb_session_free(a.s);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 20;
        cr_assert_eq(pthread_timedjoin_np(t, NULL, &until), 0, "the wait did not end with the session");
        cr_expect(w.r < 0, "the wait ended with an error (%d)", w.r);
        sim_remote_ops_free(a.ops);
        for (int i = 0; i < 2000 && test_daemon_count_fds(&d) > base; i++)
                usleep(10 * 1000);
        cr_expect_leq(test_daemon_count_fds(&d), base, "the KFD process's files are gone");
}

/* Where the kernel has no secondary KFD contexts (before 1.19), the
 * process is a proxy worker's: its own KFD process, the daemon making its
 * calls; the worker goes with the process. Below 1.12 (no dma-buf export:
 * Debian 12's own 6.1 speaks 1.11) the client's buffers are GEM buffers of
 * the process's render file: charged as any, mapped by the client, and gone
 * at the free (the daemon's fd of the simulator's BO with them). */
Test(kfd_relay, served_by_a_proxy_worker_where_the_kernel_has_no_secondary_contexts) {
        const char *args[] = { "--sim-kfd-version=1.18", NULL };
        struct kfd_ioctl_get_version_args v = {};
        Relayed a = {};
        char *log, *at;
        long pid = 0;
        int r = 0;

        test_daemon_start(&d, args);
        relayed_open(&a, 0);
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_GET_VERSION, &v), 0);
        /* The run's own daemon argument comes last and wins (below). */
        cr_expect_eq(v.minor_version,
                     getenv("KFDBROKER_TEST_DAEMON_ARG") &&
                                     strcmp(getenv("KFDBROKER_TEST_DAEMON_ARG"), "--sim-kfd-version=1.11") == 0
                             ? 11u
                             : 18u);
        acquire(&a);
        (void) alloc_at(&a, 0x10000000, &r);
        cr_expect_eq(r, 0, "an allocation in the worker's KFD process");
        log = test_daemon_read_log(&d);
        at = strstr(log, "the KFD process of worker ");
        cr_assert(at, "%s", log);
        pid = strtol(at + strlen("the KFD process of worker "), NULL, 10);
        free(log);
        cr_assert_gt(pid, 0);
        cr_expect_eq(kill((pid_t) pid, 0), 0, "the worker runs while the process does");
        relayed_close(&a);
        for (int i = 0; i < 2000 && (r = kill((pid_t) pid, 0)) == 0; i++)
                usleep(10000);
        cr_expect_lt(r, 0, "the worker %ld went with the KFD process", pid);
        test_daemon_stop(&d);

        /* The run's own daemon argument (KFDBROKER_TEST_DAEMON_ARG, the
         * -workers run's version) comes last and would win. */
        if (getenv("KFDBROKER_TEST_DAEMON_ARG"))
                return;
        const char *old[] = { "--sim-kfd-version=1.11", NULL };
        struct kfd_ioctl_alloc_memory_of_gpu_args g = { .va_addr = 0x10000000, .size = 3 * 4096,
                                                         .flags = 0xd6000002u /* ROCr's signals and rings */ };
        struct kfd_ioctl_free_memory_of_gpu_args fr = {};
        uint64_t base;
        uint8_t *m = NULL, *m2 = NULL;
        int fds;
        test_daemon_start(&d, old);
        relayed_open(&a, 0);
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_GET_VERSION, &v), 0);
        cr_expect_eq(v.minor_version, 11u);
        acquire(&a);
        base = charged(a.s);
        fds = test_daemon_count_fds(&d);
        g.gpu_id = a.gpu_id;
        cr_assert_eq(kioctl(&a, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &g), 0, "an allocation on KFD 1.11");
        cr_expect_eq(charged(a.s), base + 3 * 4096, "charged to the session");
        cr_expect_eq(map(&a, g.handle), 0);
        cr_assert_eq(a.ops->mmap(a.ops->userdata, NULL, g.size, PROT_READ | PROT_WRITE, MAP_SHARED, a.render,
                                 g.mmap_offset, (void **) &m),
                     0, "the client maps its buffer");
        cr_assert_eq(a.ops->mmap(a.ops->userdata, NULL, 4096, PROT_READ, MAP_SHARED, a.render, g.mmap_offset + 8192,
                                 (void **) &m2),
                     0, "and a page of it again");
        m[8192 + 5] = 0x3c;
        cr_expect_eq(m2[5], 0x3c, "the same memory");
        munmap(m, g.size);
        munmap(m2, 4096);
        fr.handle = g.handle;
        {
                uint32_t ids[1] = { a.gpu_id };
                struct kfd_ioctl_unmap_memory_from_gpu_args u = {
                        .handle = g.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1 };
                cr_expect_eq(kioctl(&a, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &u), 0);
        }
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), 0);
        for (int i = 0; i < 200 && (charged(a.s) != base || test_daemon_count_fds(&d) > fds); i++)
                usleep(5000);
        cr_expect_eq(charged(a.s), base, "given back at the free");
        cr_expect_leq(test_daemon_count_fds(&d), fds, "the buffer is gone with its GEM handle");
        relayed_close(&a);
}

/* A child of the daemon stopped (state T), other than skip: a proxy worker
 * held before READY (KFDBROKER_TEST_HOLD_PROXY_WORKER), or 0 after 20 s. */
static pid_t held_worker(pid_t daemon, pid_t skip) {
        for (int i = 0; i < 2000; i++) {
                DIR *dir = opendir("/proc");
                struct dirent *e;
                pid_t found = 0;

                cr_assert(dir);
                while (!found && (e = readdir(dir))) {
                        char path[64], buf[512], state = 0;
                        int ppid = 0;
                        pid_t pid = (pid_t) strtol(e->d_name, NULL, 10);
                        FILE *f;
                        char *close_paren;

                        if (pid <= 0 || pid == skip)
                                continue;
                        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
                        f = fopen(path, "re");
                        if (!f)
                                continue;
                        close_paren = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
                        fclose(f);
                        if (close_paren && sscanf(close_paren + 1, " %c %d", &state, &ppid) == 2 && ppid == daemon &&
                            state == 'T')
                                found = pid;
                }
                closedir(dir);
                if (found)
                        return found;
                usleep(10 * 1000);
        }
        return 0;
}

typedef struct OpenInThread {
        kfdb_session *s;
        int r, fd;
        bool done;
} OpenInThread;

static void *open_in_thread(void *userdata) {
        OpenInThread *o = userdata;

        o->r = open_kfd(o->s, 1, &o->fd, NULL);
        __atomic_store_n(&o->done, true, __ATOMIC_RELEASE);
        return NULL;
}

/* The topology directory open_in_thread() had written (topo[1]) goes. */
static void drop_topology(void) {
        char cmd[160];

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", topo[1]);
        cr_expect_eq(system(cmd), 0);
        topo[1][0] = 0;
}

/* A proxy worker's bring-up holds up nobody: while one is held before its
 * READY, the daemon serves another session, and answers the OpenKfd once
 * the worker goes on (before, its loop waited for the worker, up to 3 s,
 * and then refused the OpenKfd). A client that goes while its worker comes
 * up leaves nothing: the worker is killed, its slot and fds given back. */
Test(kfd_relay, a_proxy_worker_coming_up_holds_up_no_other_session) {
        const char *args[] = { "--sim-kfd-version=1.18", "--max-contexts=2", NULL };
        OpenInThread o = { .fd = -1 };
        kfdb_usage u;
        kfdb_session *other;
        pthread_t t;
        pid_t w, w2, child;
        int fds, status;
        char *at_start;

        setenv("KFDBROKER_TEST_HOLD_PROXY_WORKER", "1", 1);
        test_daemon_start(&d, args);
        fds = test_daemon_count_fds(&d);
        at_start = test_daemon_fd_names(&d);
        o.s = test_connect(&d, "relay");
        cr_assert_eq(pthread_create(&t, NULL, open_in_thread, &o), 0);
        w = held_worker(d.pid, 0);
        cr_assert_gt(w, 0, "a proxy worker held before READY");

        other = test_connect(&d, "other");
        cr_expect_eq(kfdb_query(other, &u), 0, "another session is served while the worker comes up");
        cr_expect(!__atomic_load_n(&o.done, __ATOMIC_ACQUIRE), "and the OpenKfd still waits for its worker");
        cr_expect_eq(kill(w, 0), 0, "which is not given up");
        kfdb_session_free(other);

        cr_assert_eq(kill(w, SIGCONT), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_expect_eq(o.r, 0, "answered once the worker is up: %s", kfdb_session_last_error(o.s));
        if (o.fd >= 0)
                close(o.fd);
        drop_topology();

        /* A client that goes while its worker is held. */
        char gone_topo[] = "/tmp/kfdbroker-topo.XXXXXX";
        cr_assert(mkdtemp(gone_topo));
        child = fork();
        cr_assert_geq(child, 0);
        if (child == 0) {
                kfdb_session *s = test_connect(&d, "gone");
                int dir_fd = open(gone_topo, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
                (void) kfdb_session_open_kfd(s, dir_fd, &fd, NULL);
                _exit(0);
        }
        w2 = held_worker(d.pid, w);
        cr_assert_gt(w2, 0);
        kill(child, SIGKILL);
        cr_assert_eq(waitpid(child, &status, 0), child);
        for (int i = 0; i < 2000 && kill(w2, 0) == 0; i++)
                usleep(10 * 1000);
        cr_expect_neq(kill(w2, 0), 0, "its worker %d is gone with it", (int) w2);
        cr_expect_eq(rmdir(gone_topo), 0, "nothing was written for the client that went");

        /* The first session's KFD process goes too: what is left is the start. */
        kfdb_session_free(o.s);
        for (int i = 0; i < 2000 && test_daemon_count_fds(&d) > fds; i++)
                usleep(10 * 1000);
        if (test_daemon_count_fds(&d) > fds) {
                char *now = test_daemon_fd_names(&d);

                fprintf(stderr, "the daemon's fds at the start: %s\nand now: %s\n", at_start, now);
                cr_expect_fail("no fd of the daemon is left (its fds above)");
                free(now);
        }
        free(at_start);
        /* Both slots of --max-contexts=2 are free again (each worker let go). */
        OpenInThread again[2] = { { .fd = -1 }, { .fd = -1 } };
        pthread_t ta[2];
        pid_t last = w2;
        for (unsigned i = 0; i < 2; i++) {
                again[i].s = test_connect(&d, "again");
                cr_assert_eq(pthread_create(&ta[i], NULL, open_in_thread, &again[i]), 0);
                last = held_worker(d.pid, last);
                cr_assert_gt(last, 0);
                kill(last, SIGCONT);
                cr_assert_eq(pthread_join(ta[i], NULL), 0);
                cr_expect_eq(again[i].r, 0, "slot %u: %s", i, kfdb_session_last_error(again[i].s));
                drop_topology();
        }
        for (unsigned i = 0; i < 2; i++) {
                if (again[i].fd >= 0)
                        close(again[i].fd);
                kfdb_session_free(again[i].s);
        }
}

typedef struct QueryInThread {
        kfdb_session *s;
        int r;
} QueryInThread;

static void *query_in_thread(void *userdata) {
        QueryInThread *q = userdata;
        kfdb_usage u;

        q->r = kfdb_query(q->s, &u);
        return NULL;
}

/* A proxy worker that stops answering after READY holds up nobody for
 * long: the daemon's calls into its KFD process (here, the teardown when
 * the program goes) are made on the loop, and before, the loop waited for
 * the stopped worker for ever. Now a call unanswered for 5 s gives the
 * worker up; other sessions are served again and the worker is killed. */
Test(kfd_relay, a_proxy_worker_that_stops_answering_holds_up_no_session_for_ever) {
        const char *args[] = { "--sim-kfd-version=1.18", NULL };
        QueryInThread q = { .r = -1 };
        struct timespec deadline;
        Relayed a = {};
        pthread_t t;
        pid_t w;
        int r = 0;

        test_daemon_start(&d, args);
        relayed_open(&a, 0);
        acquire(&a);
        w = logged_worker();
        cr_assert_gt(w, 0);
        cr_assert_eq(kill(w, SIGSTOP), 0);
        relayed_close(&a); /* the daemon tears the process down: calls into the stopped worker */

        q.s = test_connect(&d, "other");
        cr_assert_eq(pthread_create(&t, NULL, query_in_thread, &q), 0);
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 120;
        r = pthread_timedjoin_np(t, NULL, &deadline);
        cr_assert_eq(r, 0, "another session is served again once the stopped worker is given up");
        cr_expect_eq(q.r, 0, "%s", kfdb_session_last_error(q.s));
        for (int i = 0; i < 3000 && (r = kill(w, 0)) == 0; i++)
                usleep(10 * 1000);
        cr_expect_lt(r, 0, "the stopped worker %d is killed", (int) w);
        kfdb_session_free(q.s);
}

/* A proxy worker that dies while its program runs: the daemon's GPU
 * context in that KFD process can no longer learn of anything it runs, so
 * the context is lost, named in the log, and the program's calls fail
 * (before, the daemon logged the waiter's end and kept a deaf context);
 * its session and the others go on. */
Test(kfd_relay, a_proxy_worker_that_dies_loses_its_context_alone) {
        const char *args[] = { "--sim-kfd-version=1.18", NULL };
        struct kfd_ioctl_get_version_args v = {};
        kfdb_session *other;
        kfdb_usage u;
        Relayed a = {};
        char *log = NULL;
        pid_t w;
        int r = 0;

        test_daemon_start(&d, args);
        relayed_open(&a, 0);
        acquire(&a);
        w = logged_worker();
        cr_assert_gt(w, 0);
        cr_assert_eq(kill(w, SIGKILL), 0);
        for (int i = 0; i < 1000; i++) {
                free(log);
                log = test_daemon_read_log(&d);
                if (strstr(log, "its KFD process's worker went or stopped answering"))
                        break;
                usleep(10 * 1000);
        }
        cr_expect(strstr(log, "lost: its completions can no longer be waited for"), "%s", log);
        free(log);
        r = kioctl(&a, AMDKFD_IOC_GET_VERSION, &v);
        cr_expect_lt(r, 0, "the program's calls fail once its KFD process is gone");
        cr_expect_eq(kfdb_query(a.s, &u), 0, "its session goes on: %s", kfdb_session_last_error(a.s));
        other = test_connect(&d, "other");
        cr_expect_eq(kfdb_query(other, &u), 0, "and another session too");
        kfdb_session_free(other);
        relayed_close(&a);
}

static int render_info(Relayed *c, uint32_t query, void *out, uint32_t size) {
        struct drm_amdgpu_info a = { .return_pointer = (uint64_t) (uintptr_t) out, .return_size = size, .query = query };
        return kfd_ioctl(c->ops, c->render, DRM_IOCTL_AMDGPU_INFO, &a);
}

/* What libdrm_amdgpu's amdgpu_device_initialize() asks of the render node
 * (ROCr 5.7 and later fail a GPU agent without it) is answered for the
 * session's GPU; what would tell one tenant of the others' use of the GPU
 * (its VRAM in use, its state registers) is refused as a render node
 * refuses a call it does not allow. */
Test(kfd_relay, the_render_node_tells_what_the_gpu_is_and_not_how_others_use_it) {
        struct drm_amdgpu_info_device dev = {};
        struct drm_amdgpu_info_vram_gtt vg = {};
        struct drm_version v = {};
        uint64_t usage = 0;
        uint32_t reg = 0;
        Relayed a = {};
        kfdb_device info;

        test_daemon_start(&d, NULL);
        relayed_open(&a, 0);
        cr_assert_eq(kfdb_device_info(a.s, &info), 0);
        cr_expect_eq(kfd_ioctl(a.ops, a.render, DRM_IOCTL_VERSION, &v), 0);
        cr_expect_eq(v.version_major, 3);
        cr_expect_eq(render_info(&a, AMDGPU_INFO_DEV_INFO, &dev, sizeof dev), 0);
        cr_expect_eq(dev.family, (uint32_t) AMDGPU_FAMILY_NV);
        cr_expect_eq(dev.cu_active_number, info.cu_count, "the session's GPU");
        cr_expect_eq(render_info(&a, AMDGPU_INFO_VRAM_GTT, &vg, sizeof vg), 0);
        cr_expect_eq(vg.vram_size, info.vram_size);
        struct drm_amdgpu_info rr = { .return_pointer = (uint64_t) (uintptr_t) &reg, .return_size = 4,
                                      .query = AMDGPU_INFO_READ_MMR_REG,
                                      .read_mmr_reg = { .dword_offset = 0x263e, .count = 1, .instance = 0xffffffff } };
        cr_expect_eq(kfd_ioctl(a.ops, a.render, DRM_IOCTL_AMDGPU_INFO, &rr), 0, "GB_ADDR_CONFIG");

        cr_expect_eq(render_info(&a, AMDGPU_INFO_VRAM_USAGE, &usage, sizeof usage), -EACCES, "the VRAM others use");
        cr_expect_eq(render_info(&a, AMDGPU_INFO_GTT_USAGE, &usage, sizeof usage), -EACCES);
        rr.read_mmr_reg.dword_offset = 0x2004; /* GRBM_STATUS: the GPU's state */
        cr_expect_eq(kfd_ioctl(a.ops, a.render, DRM_IOCTL_AMDGPU_INFO, &rr), -EACCES);
        rr.read_mmr_reg = (typeof(rr.read_mmr_reg)) { .dword_offset = 0x263e, .count = 3, .instance = 0xffffffff };
        cr_expect_eq(kfd_ioctl(a.ops, a.render, DRM_IOCTL_AMDGPU_INFO, &rr), -EACCES, "a range past the config registers");
        union drm_amdgpu_gem_create gc = {};
        cr_expect_eq(kfd_ioctl(a.ops, a.render, DRM_IOCTL_AMDGPU_GEM_CREATE, &gc), -EACCES, "other DRM calls as before");
        cr_expect_eq(kfd_ioctl(a.ops, a.kfd, DRM_IOCTL_VERSION, &v), -ENOTTY, "not a KFD call on the KFD file");
        relayed_close(&a);
}

/* The daemon on two simulated GPUs with a policy of limits (none: NULL). */
static void start_two_gpus(const char *limits) {
        char arg[128], path[160];
        const char *args[] = { "--sim-gpus=2", arg, NULL };
        FILE *f;

        strcpy(policydir, "/tmp/kfdbroker-policy.XXXXXX");
        cr_assert(mkdtemp(policydir));
        if (limits) {
                snprintf(path, sizeof path, "%s/50-relay.conf", policydir);
                f = fopen(path, "we");
                cr_assert(f);
                fprintf(f, "[Limits]\n%s", limits);
                fclose(f);
        }
        snprintf(arg, sizeof arg, "--policy-dir=%s", policydir);
        test_daemon_start(&d, args);
}

/* The value of a "name value" line of a topology properties file. */
static unsigned long prop(const char *text, const char *name) {
        const char *at = strstr(text, name);

        cr_assert(at, "no %s in %s", name, text);
        return strtoul(at + strlen(name) + 1, NULL, 10);
}

/*
 * Two GPUs the session may use: the process sees both (CPU node 0, then the
 * GPUs in the daemon's order, their links renumbered), a render file of
 * each, ACQUIRE_VM with each GPU's own file, allocations on either, charged
 * on their GPU (BufferMemory= per GPU). Confined to GPU 1 (Devices=1) it
 * sees GPU 1 alone and GPU 0's gpu_id is -EINVAL everywhere. The same with
 * worker processes (KFD 1.18, and 1.11 with its GEM-backed buffers): the
 * proxy worker's KFD process has a render file of each GPU.
 */
Test(kfd_relay, every_gpu_the_session_may_use_and_no_other) {
        struct kfd_ioctl_get_process_apertures_new_args ap = {};
        struct kfd_process_device_apertures pa[4] = {};
        char path[160], *text;
        uint32_t gpu0, gpu1, minor1;
        Relayed a = {};
        int render1, r;

        start_two_gpus("BufferMemory=128K\n");
        relayed_open(&a, 0);
        gpu0 = a.gpu_id;
        text = read_text(topo[0], "topology/nodes/0/gpu_id");
        cr_expect_str_eq(text, "0\n", "node 0 is the CPU");
        free(text);
        text = read_text(topo[0], "topology/nodes/2/gpu_id");
        gpu1 = (uint32_t) strtoul(text, NULL, 10);
        free(text);
        cr_assert(gpu1 != 0 && gpu1 != gpu0, "node 2 is the second GPU (%u)", gpu1);
        snprintf(path, sizeof path, "%s/topology/nodes/3", topo[0]);
        cr_expect_eq(access(path, F_OK), -1, "no fourth node");
        text = read_text(topo[0], "topology/nodes/2/properties");
        minor1 = (uint32_t) prop(text, "drm_render_minor");
        free(text);
        cr_expect_neq(minor1, a.minor, "GPU 1 has a render node of its own");
        /* The CPU's links reach both GPUs, by their new numbers. */
        text = read_text(topo[0], "topology/nodes/0/properties");
        cr_expect_eq(prop(text, "io_links_count"), 2, "%s", text);
        free(text);
        text = read_text(topo[0], "topology/nodes/2/io_links/0/properties");
        cr_expect(strstr(text, "node_from 2\nnode_to 0\n"), "%s", text);
        free(text);

        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &ap), 0);
        cr_expect_eq(ap.num_of_nodes, 2, "both GPUs' apertures");
        ap.kfd_process_device_apertures_ptr = (uintptr_t) pa;
        ap.num_of_nodes = 4;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &ap), 0);
        cr_expect_eq(ap.num_of_nodes, 2);
        cr_expect(pa[0].gpu_id == gpu1 || pa[1].gpu_id == gpu1, "GPU 1 is listed");

        render1 = a.ops->open_render(a.ops->userdata, minor1);
        cr_assert(render1 >= 0, "GPU 1's render node: %s", strerror(-render1));
        acquire(&a);
        /* Each GPU's VM with its own render file, never another's. */
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) a.render, .gpu_id = gpu1 };
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL, "GPU 1 with GPU 0's render file");
        vm.drm_fd = (uint32_t) render1;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_ACQUIRE_VM, &vm), 0, "GPU 1 with its own render file");

        /* 128 KiB on GPU 1, and 64 KiB on GPU 0 beside the daemon's GPU
         * context there (56 KiB): BufferMemory= holds per GPU. */
        a.gpu_id = gpu1;
        uint64_t h = alloc_size(&a, 0x7f0000000000ull, 128 * 1024,
                                KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, &r);
        cr_expect_eq(r, 0, "128 KiB on GPU 1: %s", strerror(-r));
        cr_expect_eq(map(&a, h), 0, "mapped on GPU 1");
        (void) alloc_size(&a, 0x7f0000100000ull, 4096,
                          KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, &r);
        cr_expect_eq(r, -ENOMEM, "past BufferMemory= on GPU 1");
        a.gpu_id = gpu0;
        (void) alloc_size(&a, 0x7f0000200000ull, 64 * 1024,
                          KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, &r);
        cr_expect_eq(r, 0, "64 KiB on GPU 0 as well: %s", strerror(-r));
        relayed_close(&a);
        test_daemon_fini(&d);

        /* Confined to GPU 1: GPU 0 is not there. */
        char cmd[200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", policydir, topo[0]);
        cr_assert_eq(system(cmd), 0);
        policydir[0] = topo[0][0] = 0;
        start_two_gpus("Devices=1\n");
        relayed_open(&a, 0);
        cr_expect_eq(a.gpu_id, gpu1, "node 1 is GPU 1");
        cr_expect_eq(a.minor, minor1);
        snprintf(path, sizeof path, "%s/topology/nodes/2", topo[0]);
        cr_expect_eq(access(path, F_OK), -1, "GPU 0 is not shown");
        acquire(&a);
        a.gpu_id = gpu0;
        (void) alloc_at(&a, 0x7f0000000000ull, &r);
        cr_expect_eq(r, -EINVAL, "an allocation on GPU 0");
        vm.drm_fd = (uint32_t) a.render;
        vm.gpu_id = gpu0;
        cr_expect_eq(kioctl(&a, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL, "GPU 0's VM");
        relayed_close(&a);
}
