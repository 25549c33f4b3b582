/* SPDX-License-Identifier: MIT */
/*
 * dma-buf export/import across two KFD contexts of one simulated device
 * (kfd_ioctl_export_dmabuf, kfd_ioctl_import_dmabuf, kfd_ioctl_get_dmabuf_info):
 * exported fds are real memfds with the requested fd flags, sealed against
 * resizing; only fds this device exported can be imported, and from KFD 1.15
 * on another driver's dma-buf (anything else is -EINVAL, like a non-dma-buf
 * fd on the kernel); an imported BO shares the memory and outlives the
 * exporter's handle and context.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "sim-test.h"
#include "sim/sim-device.h" /* white box: the BO records */
#include "sim/sim-memory.h"

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

static int export(TestCtx *c, uint64_t handle, uint32_t flags, int *ret_fd) {
        struct kfd_ioctl_export_dmabuf_args a = { .handle = handle, .flags = flags };
        int r = t_ioctl(c, AMDKFD_IOC_EXPORT_DMABUF, &a);
        if (r == 0)
                *ret_fd = (int) a.dmabuf_fd;
        return r;
}

static int import(TestCtx *c, int fd, uint64_t va, uint64_t *ret_handle) {
        struct kfd_ioctl_import_dmabuf_args a = { .va_addr = va, .gpu_id = c->gpu_id, .dmabuf_fd = (uint32_t) fd };
        int r = t_ioctl(c, AMDKFD_IOC_IMPORT_DMABUF, &a);
        if (r == 0 && ret_handle)
                *ret_handle = a.handle;
        return r;
}

Test(sim_dmabuf, export_flags_and_info) {
        TestCtx c;
        t_open(&c, NULL);
        TestBo bo = t_bo(&c, 3 * 4096, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        int fd = -1, fd2 = -1;

        cr_expect_eq(export(&c, 0x697D00000099ull, O_CLOEXEC, &fd), -EINVAL, "unknown handle");
        cr_assert_eq(export(&c, bo.handle, O_CLOEXEC | O_RDWR, &fd), 0);
        cr_expect_geq(fd, 0);
        cr_expect(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        cr_expect_eq(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
        cr_assert_eq(export(&c, bo.handle, O_RDWR, &fd2), 0);
        cr_expect_eq(fcntl(fd2, F_GETFD) & FD_CLOEXEC, 0, "no O_CLOEXEC asked, none set");
        close(fd2);

        /* The exported fd is the BO's memory. */
        memset(bo.cpu, 0x5A, bo.size);
        uint8_t *m = mmap(NULL, bo.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(m, MAP_FAILED);
        cr_expect_eq(m[4096], 0x5A);
        m[5] = 0x11;
        cr_expect_eq(((uint8_t *) bo.cpu)[5], 0x11);
        munmap(m, bo.size);
        cr_expect_eq(ftruncate(fd, 4096), -1, "sealed against shrinking");
        cr_expect_eq(errno, EPERM);
        cr_expect_eq(ftruncate(fd, 1u << 20), -1, "and against growing");

        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) fd };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), 0);
        cr_expect_eq(info.size, 3u * 4096);
        cr_expect_eq(info.gpu_id, 0x697Du);
        cr_expect_eq(info.flags, KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC);
        cr_expect_eq(info.metadata_size, 0u);

        int efd = eventfd(0, EFD_CLOEXEC);
        info.dmabuf_fd = (uint32_t) efd;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), -EINVAL, "not a dma-buf");
        int memfd = memfd_create("not-a-bo", MFD_CLOEXEC);
        info.dmabuf_fd = (uint32_t) memfd;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), -EINVAL, "a memfd that is not ours");
        info.dmabuf_fd = 4000;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), -EBADF, "closed fd");
        close(efd);
        close(memfd);
        close(fd);
        t_close(&c, true);
}

Test(sim_dmabuf, import_validation) {
        TestCtx a, b;
        t_open(&a, NULL);
        t_open(&b, a.dev);
        TestBo bo = t_bo(&a, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo mine = t_bo(&b, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        int fd = -1;
        cr_assert_eq(export(&a, bo.handle, O_CLOEXEC | O_RDWR, &fd), 0);
        uint64_t va = t_reserve_va(8192);

        int efd = eventfd(0, EFD_CLOEXEC);
        cr_expect_eq(import(&b, efd, va, NULL), -EINVAL, "a non-dma-buf fd");
        int memfd = memfd_create("foreign", MFD_CLOEXEC);
        cr_expect_eq(import(&b, memfd, va, NULL), -EINVAL, "a memfd this device did not export");
        cr_expect_eq(import(&b, b.render, va, NULL), -EINVAL, "a render node fd");
        cr_expect_eq(import(&b, 4000, va, NULL), -EBADF);
        cr_expect_eq(import(&b, fd, mine.va + 4096, NULL), -EINVAL, "overlaps a BO of the importer");
        struct kfd_ioctl_import_dmabuf_args bad = { .va_addr = va, .gpu_id = 0x1234, .dmabuf_fd = (uint32_t) fd };
        cr_expect_eq(t_ioctl(&b, AMDKFD_IOC_IMPORT_DMABUF, &bad), -EINVAL, "unknown gpu");

        SimDevice *other;
        cr_assert_eq(sim_device_new(NULL, &other), 0);
        TestCtx o;
        t_open(&o, other);
        cr_expect_eq(import(&o, fd, va, NULL), -EINVAL, "exported by another device");
        t_close(&o, true);

        close(efd);
        close(memfd);
        close(fd);
        t_close(&b, false);
        t_close(&a, true);
}

Test(sim_dmabuf, shared_across_contexts) {
        TestCtx a, b;
        t_open(&a, NULL);
        t_open(&b, a.dev);
        uint32_t done;
        TestBo page = t_event_page(&b, &done);
        TestQueue q;
        t_sdma_queue(&b, &q, 4096);

        TestBo src = t_bo(&a, 65536, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        for (size_t i = 0; i < 65536 / 4; i++)
                ((uint32_t *) src.cpu)[i] = (uint32_t) i * 2654435761u;
        int fd = -1;
        cr_assert_eq(export(&a, src.handle, O_CLOEXEC | O_RDWR, &fd), 0);

        /* The exporter lets go of everything: the memfd keeps the memory. */
        t_bo_release(&a, &src);
        t_close(&a, false);

        uint64_t va = t_reserve_va(65536);
        uint64_t handle = 0;
        cr_assert_eq(import(&b, fd, va, &handle), 0);
        cr_expect_eq(KFD_HANDLE_GPU_ID(handle), 0x697Du);
        cr_assert_eq(t_map(&b, handle), 0);
        uint32_t *shared = mmap((void *) (uintptr_t) va, 65536, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
        cr_assert_eq((uint64_t) (uintptr_t) shared, va);

        TestBo dst = t_bo(&b, 65536, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t pk[] = { PKT_COPY(dst.va, va, 65536), PKT_FILL_DW(va, 0x77777777, 256), PKT_SIGNAL(page.va, done) };
        t_submit(&q, pk, ELEMENTSOF(pk));
        cr_assert_eq(t_wait1(&b, done, 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        for (size_t i = 0; i < 65536 / 4; i++)
                cr_assert_eq(((uint32_t *) dst.cpu)[i], (uint32_t) i * 2654435761u, "dword %zu", i);
        cr_expect_eq(shared[0], 0x77777777u, "the GPU wrote the shared memory");
        cr_expect_eq(shared[64], 64u * 2654435761u);

        cr_expect_eq(t_free(&b, handle), -EBUSY, "still mapped");
        cr_expect_eq(t_unmap(&b, handle), 0);
        cr_expect_eq(t_free(&b, handle), 0);
        munmap(shared, 65536);
        close(fd);
        t_close(&b, true);
}

static void t_free_bo(TestCtx *c, TestBo *bo) {
        cr_assert_eq(t_unmap(c, bo->handle), 0);
        munmap(bo->cpu, bo->size);
        cr_assert_eq(t_free(c, bo->handle), 0);
}

static unsigned bo_records(SimDevice *d) {
        unsigned n = 0;

        for (SimBo *bo = d->bos; bo; bo = bo->next)
                n++;
        return n;
}

/*
 * A BO whose dma-buf was exported keeps no record once its last handle is
 * gone (there used to be one for ever: ~96 bytes per exported buffer, and
 * every client buffer is exported), yet a dma-buf fd that outlived it still
 * imports — the same memory, its data intact — as a GEM object outlives its
 * handles in the kernel.
 */
Test(sim_dmabuf, no_record_outlives_the_last_handle) {
        TestCtx a, b;
        t_open(&a, NULL);
        t_open(&b, a.dev);
        unsigned base = bo_records(a.dev);
        int kept = -1;

        for (unsigned i = 0; i < 2000; i++) {
                TestBo bo = t_bo(&a, 4096, i % 2 ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM : KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                int fd = -1;
                cr_assert_eq(export(&a, bo.handle, O_CLOEXEC | O_RDWR, &fd), 0);
                if (i == 1) {
                        memset(bo.cpu, 0xC4, 4096);
                        kept = fd;
                } else
                        close(fd);
                t_free_bo(&a, &bo);
        }
        cr_expect_eq(bo_records(a.dev), base, "BO records left behind by freed, exported BOs");
        cr_expect_eq(a.dev->gpus[0]->info.vram_used, 0u);

        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) kept };
        cr_assert_eq(t_ioctl(&b, AMDKFD_IOC_GET_DMABUF_INFO, &info), 0);
        cr_expect_eq(info.size, 4096u);
        cr_expect(info.flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM, "the VRAM BO is still VRAM");
        uint64_t va = t_reserve_va(4096), h;
        cr_assert_eq(import(&b, kept, va, &h), 0);
        cr_expect_eq(bo_records(a.dev), base + 1);
        cr_expect_eq(a.dev->gpus[0]->info.vram_used, 4096u);
        uint8_t *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, kept, 0);
        cr_assert_neq(m, MAP_FAILED);
        cr_expect_eq(m[100], 0xC4);
        munmap(m, 4096);
        /* A memfd named like a BO of this device but resizable is no dma-buf. */
        {
                char name[64];
                snprintf(name, sizeof name, "kfd-bo:%08x:%08x:%08x", a.dev->gpus[0]->info.gpu_id, a.dev->bo_tag,
                         KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                int fake = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
                cr_assert_geq(fake, 0);
                cr_assert_eq(ftruncate(fake, 4096), 0);
                cr_expect_eq(import(&b, fake, t_reserve_va(4096), NULL), -EINVAL, "an unsealed memfd");
                close(fake);
        }
        close(kept);
        t_close(&b, false);
        t_close(&a, true);
}

/* The stand-in for another driver's dma-buf (sim-memory.c): a memfd named
 * "foreign-dmabuf:..." sealed against resizing, or unsealed (no dma-buf). */
static int foreign_memfd(size_t size, bool sealed) {
        int fd = memfd_create("foreign-dmabuf:camera", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, (off_t) size), 0);
        if (sealed)
                cr_assert_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
        return fd;
}

/* kfd-facts §7.6: GET_DMABUF_INFO refuses a dma-buf amdgpu did not make;
 * IMPORT_DMABUF takes it from KFD 1.15 on (as a GTT BO on the same memory),
 * not before. */
Test(sim_dmabuf, another_drivers_dma_buf) {
        SimOptions old = { .kfd_minor = 14 };
        SimDevice *dev14;
        TestCtx c, c14;
        int fd = foreign_memfd(8192, true), loose = foreign_memfd(8192, false);
        uint64_t va = t_reserve_va(8192), handle = 0;
        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = (uint32_t) fd };
        uint8_t *m;

        t_open(&c, NULL);
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), -EINVAL, "not amdgpu's");
        cr_expect_eq(import(&c, loose, va, NULL), -EINVAL, "a resizable memfd is no dma-buf");
        cr_assert_eq(import(&c, fd, va, &handle), 0);
        cr_assert_eq(t_map(&c, handle), 0);
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_GET_DMABUF_INFO, &info), -EINVAL, "still not amdgpu's once imported");

        /* The BO is the memfd's memory. */
        m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        cr_assert_neq(m, MAP_FAILED);
        m[4097] = 0x42;
        unsigned n_foreign = 0;
        for (SimBo *bo = c.dev->bos; bo; bo = bo->next)
                if (bo->foreign) {
                        n_foreign++;
                        cr_expect_eq(bo->host[4097], 0x42);
                        cr_expect_eq(bo->alloc_flags, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                }
        cr_expect_eq(n_foreign, 1u);
        munmap(m, 8192);

        cr_assert_eq(sim_device_new(&old, &dev14), 0);
        t_open(&c14, dev14);
        cr_expect_eq(import(&c14, fd, t_reserve_va(8192), NULL), -EINVAL, "KFD 1.14 takes only amdgpu's");
        t_close(&c14, true);

        close(fd);
        close(loose);
        t_close(&c, true);
}
