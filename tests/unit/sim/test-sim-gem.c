/* SPDX-License-Identifier: MIT */
/*
 * The render node's GEM calls on the simulated GPU (sim-drm.c), against the
 * kernel's answers (amdgpu_gem_create_ioctl, drm_gem_close_ioctl,
 * drm_prime_handle_to_fd_ioctl of Linux 6.1): validation and errnos, handles
 * from 1 and reused lowest first, a read-only dma-buf without DRM_RDWR, a
 * GEM object imported into KFD outliving its handle, handles dropped with
 * their file, and the VRAM-to-GTT retry of a full VRAM.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>

#include <amdgpu_drm.h>

#include "sim-test.h"

static int gem_create(TestCtx *c, int render, uint64_t size, uint64_t domains, uint64_t flags, uint32_t *ret) {
        union drm_amdgpu_gem_create a = { .in = { .bo_size = size, .alignment = 4096, .domains = domains,
                                                  .domain_flags = flags } };
        int r = kfd_ioctl(c->ops, render, DRM_IOCTL_AMDGPU_GEM_CREATE, &a);
        if (r == 0 && ret)
                *ret = a.out.handle;
        return r;
}

static int gem_close(TestCtx *c, int render, uint32_t handle) {
        struct drm_gem_close a = { .handle = handle };
        return kfd_ioctl(c->ops, render, DRM_IOCTL_GEM_CLOSE, &a);
}

static int prime(TestCtx *c, int render, uint32_t handle, uint32_t flags, int *ret_fd) {
        struct drm_prime_handle a = { .handle = handle, .flags = flags, .fd = -1 };
        int r = kfd_ioctl(c->ops, render, DRM_IOCTL_PRIME_HANDLE_TO_FD, &a);
        if (r == 0)
                *ret_fd = a.fd;
        return r;
}

static unsigned gem_handles(TestCtx *c) {
        SimDeviceStats st;
        sim_device_get_stats(c->dev, &st);
        return st.gem_handles;
}

static SimDevice *device(uint32_t minor, uint64_t vram) {
        SimOptions o = { .kfd_minor = minor, .vram_size = vram };
        SimDevice *d = NULL;
        cr_assert_eq(sim_device_new(&o, &d), 0);
        return d;
}

Test(sim_gem, create_validates_as_amdgpu_does) {
        TestCtx c;
        uint32_t h = 0;
        t_open(&c, device(11, 0));

        cr_expect_eq(gem_create(&c, c.render, 4096, AMDGPU_GEM_DOMAIN_GTT, 1ull << 40, &h), -EINVAL, "unknown flag");
        cr_expect_eq(gem_create(&c, c.render, 4096, AMDGPU_GEM_DOMAIN_GTT, AMDGPU_GEM_CREATE_VRAM_CONTIGUOUS, &h),
                     -EINVAL, "a flag 6.1 does not take from user space");
        cr_expect_eq(gem_create(&c, c.render, 4096, 0x100, 0, &h), -EINVAL, "a domain outside the mask");
        cr_expect_eq(gem_create(&c, c.render, 4096, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_ENCRYPTED, &h), -EINVAL,
                     "no TMZ");
        cr_expect_eq(gem_create(&c, c.render, 0, AMDGPU_GEM_DOMAIN_GTT, 0, &h), -EINVAL, "size 0");
        cr_expect_eq(gem_handles(&c), 0u, "nothing made by a refused call");

        cr_assert_eq(gem_create(&c, c.render, 100, AMDGPU_GEM_DOMAIN_GTT, 0, &h), 0);
        cr_expect_eq(h, 1u, "handles start at 1 (idr_alloc(..., 1, 0))");
        cr_assert_eq(gem_create(&c, c.render, 4096, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, &h), 0);
        cr_expect_eq(h, 2u);
        cr_expect_eq(gem_close(&c, c.render, 1), 0);
        cr_expect_eq(gem_close(&c, c.render, 1), -EINVAL, "closed twice");
        cr_expect_eq(gem_close(&c, c.render, 77), -EINVAL, "never made");
        cr_assert_eq(gem_create(&c, c.render, 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h), 0);
        cr_expect_eq(h, 1u, "the lowest free handle again");
        cr_expect_eq(gem_handles(&c), 2u);

        /* Not on the KFD fd: there the words are KFD numbers past the 1.11 table. */
        cr_expect_eq(gem_create(&c, c.kfd, 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h), -EINVAL);
        /* And KFD's requests are not the render node's. */
        struct kfd_ioctl_get_version_args v = {};
        cr_expect_eq(kfd_ioctl(c.ops, c.render, AMDKFD_IOC_GET_VERSION, &v), -ENOTTY);
        t_close(&c, true);
}

Test(sim_gem, prime_gives_the_objects_memory_read_only_without_rdwr) {
        TestCtx c;
        uint32_t h = 0;
        int fd = -1, ro = -1;
        t_open(&c, device(11, 0));
        cr_assert_eq(gem_create(&c, c.render, 8192, AMDGPU_GEM_DOMAIN_GTT, 0, &h), 0);

        int e = prime(&c, c.render, h + 1, DRM_CLOEXEC | DRM_RDWR, &fd);
        cr_expect_eq(e, -ENOENT, "unknown handle: %d", e);
        cr_expect_eq(prime(&c, c.render, h, O_NONBLOCK, &fd), -EINVAL, "flags past DRM_CLOEXEC | DRM_RDWR");
        cr_assert_eq(prime(&c, c.render, h, DRM_CLOEXEC | DRM_RDWR, &fd), 0);
        cr_expect_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        cr_assert_eq(prime(&c, c.render, h, 0, &ro), 0);
        cr_expect_eq(fcntl(ro, F_GETFL) & O_ACCMODE, O_RDONLY, "dma_buf_fd with the flags given");
        cr_expect_eq(fcntl(ro, F_GETFD) & FD_CLOEXEC, 0);
        cr_expect_eq(mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0), MAP_FAILED);
        cr_expect_eq(errno, EACCES, "a read-only dma-buf cannot be mapped for writing");

        uint8_t *w = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        const uint8_t *r = mmap(NULL, 8192, PROT_READ, MAP_SHARED, ro, 0);
        cr_assert_neq(w, MAP_FAILED);
        cr_assert_neq(r, MAP_FAILED);
        w[8191] = 0xA5;
        cr_expect_eq(r[8191], 0xA5, "one object behind both fds");
        munmap(w, 8192);
        munmap((void *) r, 8192);
        close(fd);
        close(ro);
        t_close(&c, true);
}

Test(sim_gem, an_imported_object_outlives_its_handle) {
        TestCtx c;
        uint32_t h = 0;
        int fd = -1;
        t_open(&c, device(11, 0));
        cr_assert_eq(gem_create(&c, c.render, 3 * 4096, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, &h),
                     0);
        cr_assert_eq(prime(&c, c.render, h, DRM_CLOEXEC | DRM_RDWR, &fd), 0);

        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) fd };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), 0);
        cr_expect_eq(info.size, 3 * 4096u);
        cr_expect_eq(info.gpu_id, c.gpu_id);
        cr_expect(info.flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM, "a VRAM object: 0x%x", info.flags);

        uint64_t va = t_reserve_va(3 * 4096);
        struct kfd_ioctl_import_dmabuf_args imp = { .va_addr = va, .gpu_id = c.gpu_id, .dmabuf_fd = (uint32_t) fd };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_IMPORT_DMABUF, &imp), 0);
        cr_expect_eq(t_map(&c, imp.handle), 0);
        uint8_t *cpu = mmap((void *) (uintptr_t) va, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
        cr_assert_eq((uintptr_t) cpu, va);
        close(fd);

        /* The handle goes first; KFD's reference keeps the object. */
        cr_expect_eq(gem_close(&c, c.render, h), 0);
        cr_expect_eq(gem_handles(&c), 0u);
        cpu[4096] = 0x77;
        struct kfd_ioctl_export_dmabuf_args e = { .handle = imp.handle, .flags = O_CLOEXEC };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_EXPORT_DMABUF, &e), -EINVAL, "and KFD 1.11 still cannot export it");

        cr_expect_eq(t_free(&c, imp.handle), -EBUSY, "still mapped");
        cr_expect_eq(t_unmap(&c, imp.handle), 0);
        cr_expect_eq(t_free(&c, imp.handle), 0);
        munmap(cpu, 3 * 4096);
        t_close(&c, true);
}

Test(sim_gem, handles_go_with_their_file) {
        TestCtx c;
        uint32_t h = 0;
        t_open(&c, device(11, 0));
        int other = c.ops->open_render(c.ops->userdata, 128);
        cr_assert_geq(other, 0);
        cr_assert_eq(gem_create(&c, other, 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h), 0);
        cr_assert_eq(gem_create(&c, other, 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h), 0);
        cr_expect_eq(gem_close(&c, c.render, h), -EINVAL, "a handle names an object of its own file only");
        cr_expect_eq(gem_handles(&c), 2u);
        cr_expect_eq(c.ops->close(c.ops->userdata, other), 0);
        cr_expect_eq(gem_handles(&c), 0u, "drm_gem_release at the file's last reference");
        t_close(&c, true);
}

Test(sim_gem, a_full_vram_falls_back_to_gtt) {
        TestCtx c;
        uint32_t h = 0;
        int fd = -1;
        t_open(&c, device(11, 1u << 20));
        cr_assert_eq(gem_create(&c, c.render, 2u << 20, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, &h),
                     0, "6.1 retries with GTT added");
        cr_assert_eq(prime(&c, c.render, h, DRM_CLOEXEC | DRM_RDWR, &fd), 0);
        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) fd };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), 0);
        cr_expect(info.flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT, "placed in GTT: 0x%x", info.flags);
        struct kfd_ioctl_get_available_memory_args av = { .gpu_id = c.gpu_id };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, 1u << 20, "no VRAM taken");
        close(fd);
        t_close(&c, true);
}

/* AMDGPU_GEM_MMAP (amdgpu_mode_dumb_mmap, Linux 6.1): the object's offset on
 * the render files (-ENOENT for a handle the file lacks), where an mmap of a
 * file holding a handle of it maps it (drm_vma_node_allow at handle
 * creation) and of another file is -EACCES (drm_vma_node_is_allowed). */
Test(sim_gem, gem_mmap_gives_the_offset_a_file_with_a_handle_maps) {
        TestCtx c;
        uint32_t h = 0;
        union drm_amdgpu_gem_mmap m = { .in = { .handle = 9 } };
        void *p = NULL, *q = NULL;
        t_open(&c, device(11, 0));
        int other = c.ops->open_render(c.ops->userdata, 128);
        cr_assert_geq(other, 0);

        cr_expect_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_AMDGPU_GEM_MMAP, &m), -ENOENT, "no such handle");
        cr_assert_eq(gem_create(&c, c.render, 2 * 4096, AMDGPU_GEM_DOMAIN_GTT, 0, &h), 0);
        m = (union drm_amdgpu_gem_mmap) { .in = { .handle = h } };
        cr_assert_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_AMDGPU_GEM_MMAP, &m), 0);
        cr_expect_geq(m.out.addr_ptr, 1ull << 32, "a DRM offset (DRM_FILE_PAGE_OFFSET_START and up)");
        cr_expect_eq(m.out.addr_ptr % 4096, 0u);
        cr_assert_eq(c.ops->mmap(c.ops->userdata, NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, c.render,
                                 m.out.addr_ptr, &p),
                     0, "the file with the handle maps it");
        ((volatile uint8_t *) p)[4096] = 0x99;
        cr_expect_eq(c.ops->mmap(c.ops->userdata, NULL, 4096, PROT_READ, MAP_SHARED, other, m.out.addr_ptr, &q),
                     -EACCES, "another file, without a handle of it, may not");
        cr_expect_eq(kfd_ioctl(c.ops, other, DRM_IOCTL_AMDGPU_GEM_MMAP, &m), -ENOENT, "nor name it");
        cr_expect_eq(gem_close(&c, c.render, h), 0);
        cr_expect_eq(((volatile uint8_t *) p)[4096], 0x99, "a mapping keeps the memory");
        munmap(p, 2 * 4096);
        cr_expect_eq(c.ops->close(c.ops->userdata, other), 0);
        t_close(&c, true);
}

/* ---- What libdrm asks of the render node (sim-drm-info.c) ---- */

static int info(TestCtx *c, int fd, uint32_t query, void *out, uint32_t size) {
        struct drm_amdgpu_info a = { .return_pointer = (uint64_t) (uintptr_t) out, .return_size = size, .query = query };
        return kfd_ioctl(c->ops, fd, DRM_IOCTL_AMDGPU_INFO, &a);
}

Test(sim_gem, version_is_amdgpus_copied_as_drm_copy_field_does) {
        TestCtx c;
        t_open(&c, device(0, 0));
        struct drm_version v = {};
        char name[3] = { 'x', 'x', 'x' }, date[32] = "", desc[32] = "";

        cr_assert_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_VERSION, &v), 0, "lengths first, as drmGetVersion asks");
        cr_expect_eq(v.version_major, 3);
        cr_expect_eq(v.name_len, 6u);
        cr_expect_eq(v.date_len, 8u);
        cr_expect_eq(v.desc_len, 7u);
        v = (struct drm_version) { .name = name, .name_len = 2, .date = date, .date_len = sizeof date, .desc = desc,
                                   .desc_len = sizeof desc };
        cr_assert_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_VERSION, &v), 0);
        cr_expect(name[0] == 'a' && name[1] == 'm' && name[2] == 'x', "at most the buffer's length, no NUL added");
        cr_expect_eq(v.name_len, 6u, "the whole length back");
        cr_expect_str_eq(date, "20150101");
        cr_expect_str_eq(desc, "AMD GPU");
        v = (struct drm_version) { .name_len = 4 };
        cr_expect_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_VERSION, &v), -EFAULT, "a length without a buffer");
        t_close(&c, true);
}

Test(sim_gem, info_answers_what_libdrm_asks_with_the_kernels_errnos) {
        TestCtx c;
        t_open(&c, device(0, 256ull << 20));
        uint32_t u32 = 0, regs[2] = { 7, 7 };
        struct drm_amdgpu_info_device dev;
        struct drm_amdgpu_info_vram_gtt vg = {};
        uint8_t part[16];

        cr_expect_eq(info(&c, c.render, AMDGPU_INFO_ACCEL_WORKING, &u32, 4), 0);
        cr_expect_eq(u32, 1u);
        cr_expect_eq(info(&c, c.render, AMDGPU_INFO_ACCEL_WORKING, NULL, 4), -EINVAL, "no return pointer");
        cr_expect_eq(info(&c, c.render, AMDGPU_INFO_ACCEL_WORKING, &u32, 0), -EINVAL, "no return size");
        cr_expect_eq(info(&c, c.render, 0x7777, &u32, 4), -EINVAL, "an unknown query");
        cr_expect_eq(info(&c, c.render, AMDGPU_INFO_GTT_USAGE, &u32, 4), -EINVAL, "not modelled: refused, not made up");

        memset(&dev, 0xab, sizeof dev);
        cr_assert_eq(info(&c, c.render, AMDGPU_INFO_DEV_INFO, &dev, sizeof dev), 0);
        cr_expect_eq(dev.device_id, 0x73BFu);
        cr_expect_eq(dev.family, (uint32_t) AMDGPU_FAMILY_NV);
        cr_expect_eq(dev.gpu_counter_freq, 100000u, "kHz of the 100 MHz clock the simulator counts");
        cr_expect_eq(dev.cu_active_number, 40u);
        cr_expect_eq(dev.virtual_address_offset, 1ull << 20);
        cr_expect_eq(dev.virtual_address_max, 0x0000800000000000ull);
        memset(part, 0xab, sizeof part);
        cr_assert_eq(info(&c, c.render, AMDGPU_INFO_DEV_INFO, part, 4), 0);
        cr_expect(part[4] == 0xab && part[15] == 0xab, "only return_size bytes written");

        struct drm_amdgpu_info rr = { .return_pointer = (uint64_t) (uintptr_t) regs, .return_size = 4,
                                      .query = AMDGPU_INFO_READ_MMR_REG,
                                      .read_mmr_reg = { .dword_offset = 0x263e, .count = 1, .instance = 0xffffffff } };
        cr_expect_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_AMDGPU_INFO, &rr), 0, "GB_ADDR_CONFIG");
        cr_expect_eq(regs[0] & 7u, 4u, "16 pipes");
        rr.read_mmr_reg.dword_offset = 0x2004; /* GRBM_STATUS: on NV's list, not modelled */
        cr_expect_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_AMDGPU_INFO, &rr), -EFAULT, "a register not allowed");
        rr.read_mmr_reg = (typeof(rr.read_mmr_reg)) { .dword_offset = 0x263e, .count = 129, .instance = 0xffffffff };
        cr_expect_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_AMDGPU_INFO, &rr), -EINVAL, "more than 128");
        rr.read_mmr_reg = (typeof(rr.read_mmr_reg)) { .dword_offset = 0x263e, .count = 1, .instance = 5 };
        cr_expect_eq(kfd_ioctl(c.ops, c.render, DRM_IOCTL_AMDGPU_INFO, &rr), -EINVAL, "SE 5 of 4");

        cr_assert_eq(info(&c, c.render, AMDGPU_INFO_VRAM_GTT, &vg, sizeof vg), 0);
        cr_expect_eq(vg.vram_size, 256ull << 20);
        cr_expect_eq(vg.gtt_size, 3ull << 30, "max(3 GiB, VRAM), under 3/4 of 16 GiB");

        /* Not on the KFD fd: there the word is KFD's number 0x45, past every table. */
        cr_expect_eq(info(&c, c.kfd, AMDGPU_INFO_ACCEL_WORKING, &u32, 4), -ENOTTY);
        t_close(&c, true);
}
