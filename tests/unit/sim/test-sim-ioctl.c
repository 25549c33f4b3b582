/* SPDX-License-Identifier: MIT */
/*
 * Conformance of the simulator's ioctl entry point, context set-up, memory
 * ioctls, mmap rules and topology with the kernel's documented behaviour
 * (kfd-facts §1.1-§1.9; kfd_chardev.c, amdgpu_amdkfd_gpuvm.c). Each test
 * asserts the exact errno the daemon would see from the kernel.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kfd/kfd-ioctl-table.h"
#include "kfd/kfd-topology.h"
#include "sim-test.h"
#include "test-fini.h"

#define GTT (KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)
#define VRAM (KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)

Test(sim_ioctl, get_version_and_dispatch) {
        TestCtx c;
        t_open(&c, NULL);

        struct kfd_ioctl_get_version_args v = {};
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_VERSION, &v), 0);
        cr_expect_eq(v.major_version, 1u);
        cr_expect_eq(v.minor_version, SIM_DEFAULT_KFD_MINOR, "uapi 1.19 (Linux 7.0) unless told otherwise");

        /* Dispatch on _IOC_NR only; a short struct is copied back with its own size. */
        uint32_t shortbuf[2] = { 0xFFFFFFFF, 0xFFFFFFFF };
        cr_assert_eq(t_ioctl(&c, _IOC(_IOC_READ, 'K', 0x01, 4), shortbuf), 0);
        cr_expect_eq(shortbuf[0], 1u);
        cr_expect_eq(shortbuf[1], 0xFFFFFFFFu, "bytes past the caller's size are not written");

        cr_expect_eq(t_ioctl(&c, _IOWR('K', 0x28, struct kfd_ioctl_get_version_args), &v), -ENOTTY);
        cr_expect_eq(t_ioctl(&c, _IOWR('K', 0x80, struct kfd_ioctl_get_version_args), &v), -ENOTTY);
        cr_expect_eq(t_ioctl(&c, _IOWR('K', 0x00, struct kfd_ioctl_get_version_args), &v), -EINVAL);
        cr_expect_eq(t_ioctl(&c, _IOWR('K', 0x20, struct kfd_ioctl_get_version_args), &v), -EOPNOTSUPP);
        cr_expect_eq(kfd_ioctl(c.ops, c.render, AMDKFD_IOC_GET_VERSION, &v), -ENOTTY);
        cr_expect_eq(kfd_ioctl(c.ops, 9999, AMDKFD_IOC_GET_VERSION, &v), -EBADF);
        t_close(&c, true);
}

/* What the thunk sets once at start (kfd_chardev.c): its checks and errno. */
Test(sim_ioctl, thunk_settings_before_and_after_acquire_vm) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        const KfdOps *ops = sim_device_get_ops(d);
        int kfd = ops->open_kfd(ops->userdata), render = ops->open_render(ops->userdata, 128);
        cr_assert(kfd >= 0 && render >= 0);
        struct kfd_ioctl_set_memory_policy_args pol = { .gpu_id = 0x697D };
        struct kfd_ioctl_set_scratch_backing_va_args sc = { .gpu_id = 0x697D, .va_addr = 1ULL << 40 };
        struct kfd_ioctl_set_trap_handler_args th = { .gpu_id = 0x697D, .tba_addr = 0x1000, .tma_addr = 0x2000 };
        struct kfd_ioctl_set_xnack_mode_args x = { .xnack_enabled = -1 };

        /* No VM yet: kfd_bind_process_to_device fails. */
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_MEMORY_POLICY, &pol), -ESRCH);
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &sc), -ENODEV);
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_TRAP_HANDLER, &th), -ESRCH);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) render, .gpu_id = 0x697D };
        cr_assert_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);

        pol.alternate_policy = 2;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_MEMORY_POLICY, &pol), -EINVAL, "no such policy");
        pol.alternate_policy = KFD_IOC_CACHE_POLICY_NONCOHERENT;
        pol.gpu_id = 0x1234;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_MEMORY_POLICY, &pol), -EINVAL, "no such GPU");
        pol.gpu_id = 0x697D;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_MEMORY_POLICY, &pol), 0);
        sc.gpu_id = 0x1234;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &sc), -EINVAL);
        sc.gpu_id = 0x697D;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_SCRATCH_BACKING_VA, &sc), 0);
        th.gpu_id = 0;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_TRAP_HANDLER, &th), -EINVAL);
        th.gpu_id = 0x697D;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_TRAP_HANDLER, &th), 0);

        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), 0);
        cr_expect_eq(x.xnack_enabled, 0, "a query answers off");
        x.xnack_enabled = 1;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), -EPERM, "gfx1030 has no XNACK");
        x.xnack_enabled = 0;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_SET_XNACK_MODE, &x), 0);
        cr_expect_eq(ops->close(ops->userdata, render), 0);
        cr_expect_eq(ops->close(ops->userdata, kfd), 0);
        sim_device_free(d);
}

/* kfd_ioctl_get_tile_config on gfx10: GB_ADDR_CONFIG, no banks or ranks,
 * the counts clamped to amdgpu's arrays (32, 16) and their entries zero. */
Test(sim_ioctl, get_tile_config) {
        TestCtx c;
        uint32_t tiles[40], macros[20];
        struct kfd_ioctl_get_tile_config_args a = {
                .tile_config_ptr = (uintptr_t) tiles, .macro_tile_config_ptr = (uintptr_t) macros,
                .num_tile_configs = 40, .num_macro_tile_configs = 20, .gpu_id = 0x1234,
        };

        t_open(&c, NULL);
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_GET_TILE_CONFIG, &a), -EINVAL, "no such GPU");
        a.gpu_id = c.gpu_id;
        memset(tiles, 0xff, sizeof tiles);
        memset(macros, 0xff, sizeof macros);
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_TILE_CONFIG, &a), 0);
        cr_expect_eq(a.gb_addr_config, 0x10000444u);
        cr_expect_eq(a.num_tile_configs, 32u);
        cr_expect_eq(a.num_macro_tile_configs, 16u);
        cr_expect_eq(tiles[31], 0u);
        cr_expect_eq(tiles[32], 0xffffffffu, "not written past the count");
        cr_expect_eq(macros[15], 0u);
        cr_expect_eq(macros[16], 0xffffffffu);
        a.tile_config_ptr = 0;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_GET_TILE_CONFIG, &a), -EFAULT);
        t_close(&c, true);
}

Test(sim_ioctl, fd_of_another_process) {
        TestCtx c;
        t_open(&c, NULL);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                struct kfd_ioctl_get_version_args v = {};
                _exit(kfd_ioctl(c.ops, c.kfd, AMDKFD_IOC_GET_VERSION, &v) == -EBADF ? 0 : 1);
        }
        int status = 0;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child ioctl on the parent's KFD fd must be -EBADF");
        t_close(&c, true);
}

Test(sim_ioctl, acquire_vm) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        const KfdOps *ops = sim_device_get_ops(d);
        int kfd = ops->open_kfd(ops->userdata);
        int r1 = ops->open_render(ops->userdata, 128);
        int r2 = ops->open_render(ops->userdata, 128);
        cr_assert(kfd >= 0 && r1 >= 0 && r2 >= 0);
        cr_expect_eq(ops->open_render(ops->userdata, 129), -ENOENT);

        /* ALLOC and CREATE_QUEUE before ACQUIRE_VM: kfd_bind_process_to_device has no
         * drm_priv -> -ENODEV; create_queue maps the failure to -ESRCH. */
        struct kfd_ioctl_alloc_memory_of_gpu_args a = { .va_addr = 0x10000000, .size = 4096, .gpu_id = 0x697D, .flags = GTT };
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), -ENODEV);
        struct kfd_ioctl_create_queue_args q = { .ring_size = 4096, .gpu_id = 0x697D, .queue_type = KFD_IOC_QUEUE_TYPE_SDMA };
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_CREATE_QUEUE, &q), -ESRCH);

        int efd = eventfd(0, EFD_CLOEXEC);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) efd, .gpu_id = 0x697D };
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL, "not a render node");
        vm.drm_fd = 12345;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL, "bad fd");
        vm = (struct kfd_ioctl_acquire_vm_args) { .drm_fd = (uint32_t) r1, .gpu_id = 0x1234 };
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL, "unknown gpu_id");
        vm.gpu_id = 0x697D;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0, "same file again");
        vm.drm_fd = (uint32_t) r2;
        cr_expect_eq(kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), -EBUSY, "another file");

        /* A second open of the same process is the same (primary) context. */
        int kfd2 = ops->open_kfd(ops->userdata);
        vm.drm_fd = (uint32_t) r1;
        cr_expect_eq(kfd_ioctl(ops, kfd2, AMDKFD_IOC_ACQUIRE_VM, &vm), 0, "same context, same file");
        vm.drm_fd = (uint32_t) r2;
        cr_expect_eq(kfd_ioctl(ops, kfd2, AMDKFD_IOC_ACQUIRE_VM, &vm), -EBUSY, "same context, another file");

        /* A secondary context cannot take over a render file that holds a compute VM. */
        cr_assert_eq(kfd_ioctl(ops, kfd2, AMDKFD_IOC_CREATE_PROCESS, NULL), 0);
        vm.drm_fd = (uint32_t) r1;
        cr_expect_eq(kfd_ioctl(ops, kfd2, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL);
        vm.drm_fd = (uint32_t) r2;
        cr_expect_eq(kfd_ioctl(ops, kfd2, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);

        close(efd);
        cr_expect_eq(ops->close(ops->userdata, kfd2), 0);
        cr_expect_eq(ops->close(ops->userdata, kfd), 0);
        cr_expect_eq(ops->close(ops->userdata, kfd), -EBADF, "closed twice");
        sim_device_free(d); /* closes r1, r2 */
}

Test(sim_ioctl, alloc_validation) {
        SimOptions o = { .vram_size = 64u << 20 };
        SimDevice *d;
        cr_assert_eq(sim_device_new(&o, &d), 0);
        TestCtx c;
        t_open(&c, d);
        uint64_t va = t_reserve_va(256u << 20);
        TestBo bo = {};

        cr_expect_eq(t_alloc_raw(&c, va, 0, GTT, NULL), -EINVAL, "size 0");
        cr_expect_eq(t_alloc_raw(&c, va, 4096, KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE, NULL), -EINVAL, "no domain");
        cr_expect_eq(t_alloc_raw(&c, va, 4096, VRAM | KFD_IOC_ALLOC_MEM_FLAGS_GTT, NULL), -EINVAL, "two domains");
        cr_expect_eq(t_alloc_raw(&c, va, 8192, KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL, NULL), -EOPNOTSUPP);
        /* MMIO_REMAP: the HDP flush page, exactly one page (kfd_ioctl_alloc_memory_of_gpu). */
        cr_expect_eq(t_alloc_raw(&c, va + (200u << 20), 8192, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, NULL), -EINVAL);
        TestBo mmio = {};
        cr_assert_eq(t_alloc_raw(&c, va + (200u << 20), 4096, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, &mmio), 0);
        cr_expect_eq(mmio.mmap_offset, KFD_MMAP_TYPE_MMIO | KFD_MMAP_GPU_ID(0x697D), "mapped through the KFD fd");
        struct kfd_ioctl_free_memory_of_gpu_args fm = { .handle = mmio.handle };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fm), 0);
        struct kfd_ioctl_alloc_memory_of_gpu_args a = { .va_addr = va, .size = 4096, .gpu_id = 0x1111, .flags = GTT };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), -EINVAL, "unknown gpu_id");
        cr_expect_eq(t_alloc_raw(&c, va, 65u << 20, VRAM, NULL), -ENOMEM, "more VRAM than the board has");

        /* Handles are gpu_id << 32 | idr with idr from 0, lowest free first. */
        TestBo b0, b1, b2;
        cr_assert_eq(t_alloc_raw(&c, va, 5000, VRAM, &b0), 0);
        cr_expect_eq(b0.handle, 0x697D00000000ull);
        cr_assert_eq(t_alloc_raw(&c, va + 0x100000, 32u << 20, VRAM, &b1), 0);
        cr_expect_eq(b1.handle, 0x697D00000001ull);
        struct kfd_ioctl_get_available_memory_args av = { .gpu_id = 0x697D };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, (64ull << 20) - 8192 - (32ull << 20), "5000 bytes round up to two pages");
        av.gpu_id = 1;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_AVAILABLE_MEMORY, &av), -EINVAL);
        cr_expect_eq(t_alloc_raw(&c, va + (64u << 20), 32u << 20, VRAM, NULL), -ENOMEM);

        /* Overlapping VA ranges (amdgpu_vm_bo_map conflict). 5000 bytes cover two pages. */
        cr_expect_eq(t_alloc_raw(&c, va + 4096, 4096, GTT, NULL), -EINVAL);
        cr_expect_eq(t_alloc_raw(&c, va + 0x100000 + (32u << 20) - 4096, 8192, GTT, NULL), -EINVAL);
        cr_assert_eq(t_alloc_raw(&c, va + 8192, 4096, GTT, &b2), 0, "adjacent is fine");
        cr_expect_eq(b2.handle, 0x697D00000002ull);
        cr_expect_eq(t_free(&c, b1.handle), 0);
        cr_assert_eq(t_alloc_raw(&c, va + 0x100000, 4096, GTT, &bo), 0);
        cr_expect_eq(bo.handle, 0x697D00000001ull, "the freed idr is reused");
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_AVAILABLE_MEMORY, &(struct kfd_ioctl_get_available_memory_args) { .gpu_id = 0x697D }), 0);
        t_close(&c, true);
}

Test(sim_ioctl, map_unmap_free) {
        TestCtx c;
        t_open(&c, NULL);
        uint64_t va = t_reserve_va(1u << 20);
        TestBo bo = {};
        cr_assert_eq(t_alloc_raw(&c, va, 8192, GTT, &bo), 0);

        uint32_t ids[2] = { 0x697D, 0x4242 };
        struct kfd_ioctl_map_memory_to_gpu_args m = { .handle = bo.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EINVAL, "n_devices 0");
        m.n_devices = 1;
        m.n_success = 2;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EINVAL, "n_success > n_devices");
        m.n_success = 0;
        m.handle = 0x697D00000077ull;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -ENOMEM, "unknown handle (sic)");
        m.handle = 0x123400000000ull;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EINVAL, "handle of an unknown gpu");

        /* n_success counts the devices done, so a failed call can be retried. */
        m = (struct kfd_ioctl_map_memory_to_gpu_args) { .handle = bo.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 2 };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EINVAL);
        cr_expect_eq(m.n_success, 1u);
        ids[1] = 0x697D;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), 0);
        cr_expect_eq(m.n_success, 2u);
        cr_expect_eq(t_map(&c, bo.handle), 0, "mapping again is a no-op");

        cr_expect_eq(t_free(&c, bo.handle), -EBUSY, "still mapped");
        cr_expect_eq(t_unmap(&c, bo.handle), 0);
        cr_expect_eq(t_unmap(&c, bo.handle), -EINVAL, "not mapped");
        cr_expect_eq(t_free(&c, bo.handle), 0);
        cr_expect_eq(t_free(&c, bo.handle), -EINVAL, "freed twice");
        cr_expect_eq(t_unmap(&c, bo.handle), -ENOMEM, "unknown handle (sic)");

        /* amdgpu_vm_bo_map refuses an unaligned VA. */
        cr_assert_eq(t_alloc_raw(&c, va + 0x10001, 4096, GTT, &bo), 0);
        cr_expect_eq(t_map(&c, bo.handle), -EINVAL);
        cr_expect_eq(t_free(&c, bo.handle), 0);
        t_close(&c, true);
}

/* The KFD's table (kfd-ioctl-table.h): a word of its own number for every
 * number from AMDKFD_COMMAND_START to 0x27, none before or past. */
Test(sim_ioctl, the_kfd_table_has_a_word_for_every_number) {
        cr_expect_eq(kfd_ioctl_word(0), 0ul);
        cr_expect_eq(kfd_ioctl_word(KFD_IOCTL_TABLE_END), 0ul);
        cr_expect_eq(kfd_ioctl_word(0xff), 0ul);
        for (unsigned nr = 1; nr < KFD_IOCTL_TABLE_END; nr++) {
                unsigned long w = kfd_ioctl_word(nr);
                cr_expect_eq(_IOC_NR(w), nr, "0x%02x", nr);
                cr_expect_eq(_IOC_TYPE(w), (unsigned) AMDKFD_IOCTL_BASE, "0x%02x", nr);
                cr_expect(nr == _IOC_NR(AMDKFD_IOC_CREATE_PROCESS) || _IOC_DIR(w) != _IOC_NONE,
                          "0x%02x: every call but CREATE_PROCESS has an argument", nr);
        }
        cr_expect_eq(kfd_ioctl_word(0x18), (unsigned long) AMDKFD_IOC_MAP_MEMORY_TO_GPU);
        cr_expect_eq(_IOC_DIR(kfd_ioctl_word(0x01)), (unsigned) _IOC_READ, "GET_VERSION only copies out");
        cr_expect_eq(_IOC_DIR(kfd_ioctl_word(0x09)), (unsigned) _IOC_WRITE, "DESTROY_EVENT only copies in");
}

/* kfd_ioctl copies in the direction of its own table, not of the caller's
 * word ("cmd = ioctl->cmd", "Do not trust userspace, use our own
 * definition", kfd_chardev.c); the caller's word gives only the size. */
Test(sim_ioctl, the_copy_direction_is_the_kfds_not_the_callers) {
        TestCtx c;
        t_open(&c, NULL);
        uint64_t va = t_reserve_va(1u << 20);
        TestBo bo = {};
        cr_assert_eq(t_alloc_raw(&c, va, 8192, GTT, &bo), 0);

        /* MAP is _IOWR: an _IOR word of its number and size has the
         * caller's bytes read (the buffer is mapped) and given back, the
         * pointer and all. */
        uint32_t ids[1] = { c.gpu_id };
        struct kfd_ioctl_map_memory_to_gpu_args m = {
                .handle = bo.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1 };
        cr_expect_eq(t_ioctl(&c, _IOR('K', 0x18, struct kfd_ioctl_map_memory_to_gpu_args), &m), 0);
        cr_expect_eq(m.device_ids_array_ptr, (uint64_t) (uintptr_t) ids, "the caller's pointer back");
        cr_expect_eq(m.handle, bo.handle);
        cr_expect_eq(m.n_success, 1u);
        cr_expect_eq(t_free(&c, bo.handle), -EBUSY, "it was mapped");
        /* ... and an _IOR word of it with no argument faults before the
         * call (copy_from_user), mapping nothing. */
        cr_expect_eq(t_ioctl(&c, _IOR('K', 0x19, struct kfd_ioctl_unmap_memory_from_gpu_args), NULL), -EFAULT);
        cr_expect_eq(t_free(&c, bo.handle), -EBUSY, "still mapped");

        /* GET_VERSION is _IOR: an _IOW word of it has the version written
         * over the caller's bytes, which are not read. */
        struct kfd_ioctl_get_version_args v = { .major_version = 77, .minor_version = 77 };
        cr_expect_eq(t_ioctl(&c, _IOW('K', 0x01, struct kfd_ioctl_get_version_args), &v), 0);
        cr_expect_eq(v.major_version, 1u);
        cr_expect_eq(v.minor_version, SIM_DEFAULT_KFD_MINOR);
        /* _IO of it (size 0): nothing copied either way. */
        v = (struct kfd_ioctl_get_version_args) { .major_version = 77, .minor_version = 77 };
        cr_expect_eq(t_ioctl(&c, _IO('K', 0x01), &v), 0);
        cr_expect_eq(v.major_version, 77u);
        /* An _IOW word of it without an argument runs, then faults on the
         * copy out. */
        cr_expect_eq(t_ioctl(&c, _IOW('K', 0x01, struct kfd_ioctl_get_version_args), NULL), -EFAULT);

        /* DESTROY_EVENT is _IOW: an _IOWR word of it writes nothing back, so
         * its argument may be read-only memory, as with the kernel. */
        struct kfd_ioctl_create_event_args e = { .event_type = KFD_IOC_EVENT_SIGNAL };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_CREATE_EVENT, &e), 0);
        struct kfd_ioctl_destroy_event_args *ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        cr_assert_neq(ro, MAP_FAILED);
        ro->event_id = e.event_id;
        cr_assert_eq(mprotect(ro, 4096, PROT_READ), 0);
        cr_expect_eq(t_ioctl(&c, _IOWR('K', 0x09, struct kfd_ioctl_destroy_event_args), ro), 0);
        cr_expect_eq(t_ioctl(&c, _IOWR('K', 0x09, struct kfd_ioctl_destroy_event_args), ro), -EINVAL, "destroyed");
        munmap(ro, 4096);

        cr_expect_eq(t_unmap(&c, bo.handle), 0);
        cr_expect_eq(t_free(&c, bo.handle), 0);
        t_close(&c, true);
}

Test(sim_ioctl, clocks_apertures_runtime) {
        TestCtx c;
        t_open(&c, NULL);
        struct kfd_ioctl_get_clock_counters_args k1 = { .gpu_id = 0x697D }, k2 = { .gpu_id = 0x697D }, k3 = { .gpu_id = 7 };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_CLOCK_COUNTERS, &k1), 0);
        usleep(2000);
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_CLOCK_COUNTERS, &k2), 0);
        cr_expect_eq(k1.system_clock_freq, 1000000000ull);
        cr_expect_gt(k2.gpu_clock_counter, k1.gpu_clock_counter + 100000, "100 MHz: > 1e5 ticks in 2 ms");
        cr_expect_gt(k2.cpu_clock_counter, k1.cpu_clock_counter + 1000000);
        cr_expect_gt(k2.system_clock_counter, k1.system_clock_counter);
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_CLOCK_COUNTERS, &k3), 0);
        cr_expect_eq(k3.gpu_clock_counter, 0u, "no GPU with that id");

        struct kfd_process_device_apertures ap[2] = {};
        struct kfd_ioctl_get_process_apertures_new_args pa = {};
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &pa), 0);
        cr_expect_eq(pa.num_of_nodes, 1u);
        pa = (struct kfd_ioctl_get_process_apertures_new_args) { .kfd_process_device_apertures_ptr = (uint64_t) (uintptr_t) ap, .num_of_nodes = 2 };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &pa), 0);
        cr_expect_eq(pa.num_of_nodes, 1u);
        cr_expect_eq(ap[0].gpu_id, 0x697Du);
        cr_expect_eq(ap[0].lds_base, 1ull << 48);
        cr_expect_eq(ap[0].scratch_base, 2ull << 48);
        cr_expect_eq(ap[0].gpuvm_limit, (1ull << 47) - 1);

        struct kfd_ioctl_runtime_enable_args re = { .mode_mask = 0 };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RUNTIME_ENABLE, &re), 0);
        re.mode_mask = 1;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RUNTIME_ENABLE, &re), 0);
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RUNTIME_ENABLE, &re), -EBUSY);
        re.mode_mask = 0;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RUNTIME_ENABLE, &re), 0);
        TestQueue q;
        t_sdma_queue(&c, &q, 4096);
        re.mode_mask = 1;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RUNTIME_ENABLE, &re), -EEXIST);
        t_queue_release(&c, &q);
        t_close(&c, true);
}

Test(sim_ioctl, mmap_rules) {
        TestCtx c, c2;
        t_open(&c, NULL);
        t_open(&c2, c.dev);
        void *m = NULL;
        uint64_t db = KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(0x697D);
        int rw = PROT_READ | PROT_WRITE;

        /* Doorbell slice: exactly 8 KiB at doorbell_offset & ~0x1FFF (kfd_doorbell_mmap). */
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.kfd, db, &m), -EINVAL);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 16384, rw, MAP_SHARED, c.kfd, db, &m), -EINVAL);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 8192, rw, MAP_SHARED, c.kfd, db | 0x1000, &m), -EINVAL);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 8192, rw, MAP_SHARED, c.kfd, db | 0x800, &m), -EINVAL);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 8192, rw, MAP_SHARED, c.kfd,
                                 KFD_MMAP_TYPE_DOORBELL | KFD_MMAP_GPU_ID(0x1234), &m), -ENODEV);
        cr_assert_eq(c.ops->mmap(c.ops->userdata, NULL, 8192, rw, MAP_SHARED, c.kfd, db, &m), 0);
        cr_expect_eq(c.ops->munmap(c.ops->userdata, m, 8192), 0);

        /* Event page: none yet -> -EINVAL; more than 32 KiB -> -EINVAL. */
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 32768, rw, MAP_SHARED, c.kfd, KFD_MMAP_TYPE_EVENTS, &m), -EINVAL);
        uint32_t first;
        TestBo page = t_event_page(&c, &first);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 36864, rw, MAP_SHARED, c.kfd, KFD_MMAP_TYPE_EVENTS, &m), -EINVAL);
        cr_assert_eq(c.ops->mmap(c.ops->userdata, NULL, 32768, rw, MAP_SHARED, c.kfd, KFD_MMAP_TYPE_EVENTS, &m), 0);
        cr_expect_eq(((uint64_t *) m)[first], ~0ull, "registered page reads unsignaled");
        cr_expect_eq(((uint64_t *) page.cpu)[4095], ~0ull, "the whole 32 KiB is set to ~0");
        c.ops->munmap(c.ops->userdata, m, 32768);
        /* MMIO: the HDP flush page, one page, once an MMIO_REMAP handle holds it. */
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.kfd, KFD_MMAP_GPU_ID(0x697D), &m), -EINVAL);
        TestBo mmio = {};
        cr_assert_eq(t_alloc_raw(&c, t_reserve_va(4096), 4096, KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP, &mmio), 0);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 8192, rw, MAP_SHARED, c.kfd, mmio.mmap_offset, &m), -EINVAL);
        cr_assert_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.kfd, mmio.mmap_offset, &m), 0);
        cr_expect_eq(((uint32_t *) m)[0], 0xFFFFFFFFu, "HDP_MEM_FLUSH_CNTL reads idle");
        c.ops->munmap(c.ops->userdata, m, 4096);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.kfd, KFD_MMAP_TYPE_RESERVED_MEM | KFD_MMAP_GPU_ID(0x697D), &m),
                     -EOPNOTSUPP, "reserved memory is not simulated");

        /* Render node: unknown offset -> -EINVAL, another context's BO -> -EACCES, unaligned -> -EINVAL. */
        TestBo other = t_bo(&c2, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.render, 0x1000, &m), -EINVAL);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.render, other.mmap_offset, &m), -EACCES);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.render, page.mmap_offset + 8, &m), -EINVAL);
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 40960, rw, MAP_SHARED, c.render, page.mmap_offset, &m), -EINVAL, "longer than the BO");
        cr_assert_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, rw, MAP_SHARED, c.render, page.mmap_offset + 4096, &m), 0);
        cr_expect_eq(((uint64_t *) m)[0], ~0ull, "an inner offset maps the rest of the BO");
        c.ops->munmap(c.ops->userdata, m, 4096);
        t_close(&c2, false);
        t_close(&c, true);
}

/* A freed object's render-node offset goes to a later object, as the
 * kernel's DRM offset manager gives it (best fit among the holes): a stale
 * offset may name another process's buffer, which its file may not map. */
Test(sim_ioctl, a_freed_objects_offset_goes_to_a_later_one) {
        TestCtx c, c2;
        TestBo a = {}, b = {}, theirs = {}, big = {};
        void *m = NULL;

        t_open(&c, NULL);
        t_open(&c2, c.dev);
        cr_assert_eq(t_alloc_raw(&c, t_reserve_va(8192), 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &a), 0);
        cr_assert_eq(t_alloc_raw(&c, t_reserve_va(4096), 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &b), 0);
        cr_expect_eq(t_free(&c, a.handle), 0);
        cr_assert_eq(t_alloc_raw(&c2, t_reserve_va(16384), 16384, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &big), 0);
        cr_expect_gt(big.mmap_offset, b.mmap_offset, "too large for the hole: past the last object");
        cr_assert_eq(t_alloc_raw(&c2, t_reserve_va(4096), 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &theirs), 0);
        cr_expect_eq(theirs.mmap_offset, a.mmap_offset, "the freed object's hole, the best fit");
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, PROT_READ, MAP_SHARED, c.render, a.mmap_offset, &m),
                     -EACCES, "the stale offset names another process's buffer now");
        cr_expect_eq(t_free(&c, b.handle), 0);
        t_close(&c2, false);
        t_close(&c, true);
}

Test(sim_ioctl, no_fd_leak) {
        unsigned before = test_count_fds();
        for (int round = 0; round < 2; round++) {
                TestCtx c;
                t_open(&c, NULL);
                uint32_t ev;
                TestBo page = t_event_page(&c, &ev);
                TestBo bo = t_bo(&c, 65536, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
                struct kfd_ioctl_export_dmabuf_args ex = { .handle = bo.handle, .flags = O_CLOEXEC | O_RDWR };
                cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_EXPORT_DMABUF, &ex), 0);
                close((int) ex.dmabuf_fd);
                TestQueue q;
                t_sdma_queue(&c, &q, 4096);
                if (round == 0) {
                        t_queue_release(&c, &q);
                        t_bo_release(&c, &bo);
                } else {
                        /* Leave everything to the context's teardown. */
                        munmap(bo.cpu, bo.size);
                        munmap(q.ring.cpu, q.ring.size);
                        munmap(q.rptr.cpu, 4096);
                        munmap(q.wptr.cpu, 4096);
                        c.ops->munmap(c.ops->userdata, q.doorbell_page, KFD_DOORBELL_SLICE_SIZE);
                }
                munmap(page.cpu, page.size);
                t_close(&c, true);
        }
        cr_expect_eq(test_count_fds(), before, "fds before %u, after %u", before, test_count_fds());
}

Test(sim_ioctl, topology) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        const KfdOps *ops = sim_device_get_ops(d);
        KfdTopology t;
        cr_assert_eq(kfd_topology_read(ops->sysfs_root, &t), 1);
        const KfdNode *n = &t.nodes[0];
        cr_expect_eq(n->node_index, 1u);
        cr_expect_eq(n->gpu_id, 0x697Du);
        cr_expect_eq(n->gfx_target_version, 100300u);
        cr_expect_eq(n->simd_count, 80u);
        cr_expect_eq(n->simd_per_cu, 2u);
        cr_expect_eq(n->wave_front_size, 32u);
        cr_expect_eq(n->lds_size_in_kb, 64u);
        cr_expect_eq(n->num_sdma_engines, 2u);
        cr_expect_eq(n->num_sdma_queues_per_engine, 8u);
        cr_expect_eq(n->num_cp_queues, 8u);
        cr_expect_eq(n->drm_render_minor, 128u);
        cr_expect_eq(n->vendor_id, 4098u);
        cr_expect_eq(n->device_id, 29631u);
        cr_expect_eq(n->num_xcc, 1u);
        cr_expect_eq(n->local_mem_size, 1ull << 30);
        cr_expect_eq(n->capability, 0x2000u, "HSA_CAP_DOORBELL_TYPE_2_0: ROCr's 64-bit doorbell path");
        /* kfd_queue.c for 40 CUs: ctl = ALIGN(40 + 1280*12 + 8, 4096) = 0x4000,
         * cwsr = 0x4000 + 40 * 0x55000 = 0xD4C000, debug = 1280*32 = 0xA000. */
        cr_expect_eq(n->ctl_stack_size, 0x4000u);
        cr_expect_eq(n->cwsr_size, 0xD4C000u);
        KfdQueueSizes s;
        cr_assert_eq(kfd_node_queue_sizes(n, &s), 0);
        cr_expect_eq(s.cwsr_bo_size, 0xD56000u);
        cr_expect_eq(s.eop_buffer_size, 4096u);

        char path[4096];
        snprintf(path, sizeof path, "%s/topology/nodes/0/gpu_id", ops->sysfs_root);
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f);
        unsigned id = 1;
        cr_expect_eq(fscanf(f, "%u", &id), 1);
        cr_expect_eq(id, 0u, "node 0 is the CPU");
        fclose(f);
        /* ROCr asserts "GPU cache info missing" without GPU caches. */
        char props[1024] = "";
        snprintf(path, sizeof path, "%s/topology/nodes/1/properties", ops->sysfs_root);
        f = fopen(path, "re");
        cr_assert_not_null(f);
        props[fread(props, 1, sizeof props - 1, f)] = 0;
        fclose(f);
        cr_expect(strstr(props, "\ncaches_count 6\n"), "%s", props);
        for (unsigned i = 0; i < 6; i++) {
                snprintf(path, sizeof path, "%s/topology/nodes/1/caches/%u/properties", ops->sysfs_root, i);
                cr_expect_eq(access(path, R_OK), 0, "%s", path);
        }
        snprintf(path, sizeof path, "%s/topology/nodes/1/caches/5/properties", ops->sysfs_root);
        f = fopen(path, "re");
        cr_assert_not_null(f);
        props[fread(props, 1, sizeof props - 1, f)] = 0;
        fclose(f);
        cr_expect(strstr(props, "level 3\nsize 131072\n"), "the Infinity Cache: %s", props);

        char root[4096];
        snprintf(root, sizeof root, "%s", ops->sysfs_root);
        sim_device_free(d);
        cr_expect_eq(access(root, F_OK), -1, "the private sysfs tree is removed");
}

/* A daemon killed before it removed its private sysfs tree leaves it behind;
 * the next simulator of the same user removes it, but never a live process's. */
Test(sim_ioctl, stale_topology_dirs_swept) {
        char tmp[] = "/tmp/kfdbroker-sweep.XXXXXX", dead[4200], live[4200], other[4200], cmd[4300];
        pid_t child;
        int status;

        cr_assert(mkdtemp(tmp));
        child = fork();
        cr_assert_geq(child, 0);
        if (child == 0)
                _exit(0);
        cr_assert_eq(waitpid(child, &status, 0), child);
        /* child's pid is gone now (and not reused within this test, barring a wrap). */
        snprintf(dead, sizeof dead, "%s/kfdbroker-sim-%d-AbCdEf", tmp, (int) child);
        snprintf(live, sizeof live, "%s/kfdbroker-sim-%d-GhIjKl", tmp, (int) getppid());
        snprintf(other, sizeof other, "%s/kfdbroker-sim-notapid", tmp);
        cr_assert_eq(mkdir(dead, 0700), 0);
        cr_assert_eq(mkdir(live, 0700), 0);
        cr_assert_eq(mkdir(other, 0700), 0);
        snprintf(cmd, sizeof cmd, "%s/topology", dead);
        cr_assert_eq(mkdir(cmd, 0700), 0);

        cr_assert_eq(setenv("TMPDIR", tmp, 1), 0);
        SimDevice *d;
        int r = sim_device_new(NULL, &d);
        unsetenv("TMPDIR");
        cr_assert_eq(r, 0, "%s", strerror(-r));
        const char *root = sim_device_get_ops(d)->sysfs_root;
        char want[4200];
        snprintf(want, sizeof want, "%s/kfdbroker-sim-%d-", tmp, (int) getpid());
        cr_expect_eq(strncmp(root, want, strlen(want)), 0, "%s names its pid (%s)", root, want);
        cr_expect_eq(access(dead, F_OK), -1, "a dead process's tree is removed");
        cr_expect_eq(access(live, F_OK), 0, "a live process's tree is kept");
        cr_expect_eq(access(other, F_OK), 0, "a name without a pid is not ours to remove");
        sim_device_free(d);

        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        cr_assert_eq(system(cmd), 0);
}

Test(sim_ioctl, topology_80cu_clamps_control_stack) {
        SimOptions o = { .cu_count = 80 };
        SimDevice *d;
        cr_assert_eq(sim_device_new(&o, &d), 0);
        KfdTopology t;
        cr_assert_eq(kfd_topology_read(sim_device_get_ops(d)->sysfs_root, &t), 1);
        /* RX 6900 XT trace (tinygrad #9363): ctl 0x7000 (clamped), cwsr 0x1A97000. */
        cr_expect_eq(t.nodes[0].ctl_stack_size, 0x7000u);
        cr_expect_eq(t.nodes[0].cwsr_size, 0x1A97000u);
        sim_device_free(d);
}

/* "name value" from a sysfs properties text (as the thunk's topology.c
 * reads it), or ~0 when the name is missing. */
static uint64_t prop(const char *text, const char *name) {
        size_t len = strlen(name);
        for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
                if (strncmp(p, name, len) == 0 && p[len] == ' ')
                        return strtoull(p + len + 1, NULL, 10);
        return ~0ull;
}

static void read_text(const char *path, char *buf, size_t size) {
        FILE *f = fopen(path, "re");
        cr_assert_not_null(f, "%s", path);
        size_t n = fread(buf, 1, size - 1, f);
        buf[n] = '\0';
        fclose(f);
}

/* The io_links of a PCIe dGPU host as kfd_crat.c / kfd_topology.c report
 * them: each GPU node links to the CPU node and the CPU node to each GPU,
 * io_links_count says how many, PCIe type 2, weight 20, ENABLED, the CPU->GPU
 * direction NON_COHERENT, and no NO_ATOMICS_32/64_BIT bits (the host has PCIe
 * atomics: ROCr's BlitSdma then uses SDMA ATOMIC). The daemon's topology
 * reader still takes the tree as before. */
static void check_io_links(bool igpu) {
        SimOptions o = { .igpu_first = igpu };
        SimDevice *d;
        cr_assert_eq(sim_device_new(&o, &d), 0);
        const char *root = sim_device_get_ops(d)->sysfs_root;
        KfdTopology t;
        unsigned n_gpus = igpu ? 2 : 1;
        cr_assert_eq(kfd_topology_read(root, &t), (int) n_gpus, "the daemon's reader takes the tree");
        char path[4200], text[4096];
        for (unsigned node = 0; node <= n_gpus; node++) {
                snprintf(path, sizeof path, "%s/topology/nodes/%u/properties", root, node);
                read_text(path, text, sizeof text);
                uint64_t count = prop(text, "io_links_count");
                cr_expect_eq(count, node == 0 ? n_gpus : 1u, "node %u io_links_count", node);
                for (unsigned i = 0; i < count; i++) {
                        snprintf(path, sizeof path, "%s/topology/nodes/%u/io_links/%u/properties", root, node, i);
                        read_text(path, text, sizeof text);
                        cr_expect_eq(prop(text, "type"), 2u, "PCIe");
                        cr_expect_eq(prop(text, "node_from"), node);
                        cr_expect_eq(prop(text, "node_to"), node == 0 ? i + 1 : 0u);
                        cr_expect_eq(prop(text, "weight"), 20u);
                        cr_expect_leq(prop(text, "min_bandwidth"), prop(text, "max_bandwidth"));
                        cr_expect_neq(prop(text, "max_bandwidth"), 0u);
                        uint64_t flags = prop(text, "flags");
                        cr_expect_eq(flags & 1u, 1u, "ENABLED");
                        cr_expect_eq(flags & (3u << 2), 0u, "no NO_ATOMICS_32/64_BIT: PCIe atomics are there");
                        cr_expect_eq(flags & 2u, node == 0 ? 2u : 0u, "NON_COHERENT only CPU->GPU");
                        cr_expect_neq(prop(text, "recommended_transfer_size"), ~0ull, "iolink_show's names");
                }
                snprintf(path, sizeof path, "%s/topology/nodes/%u/io_links/%u", root, node, (unsigned) count);
                cr_expect_eq(access(path, F_OK), -1, "no link beyond io_links_count");
        }
        sim_device_free(d);
}

Test(sim_ioctl, topology_io_links) {
        check_io_links(false);
        check_io_links(true);
}
