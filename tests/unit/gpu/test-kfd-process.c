/* SPDX-License-Identifier: MIT */
/*
 * A relayed client's KFD process (context-kfd-process.c) on the simulated
 * GPU at KFD 1.11, the uapi of Linux 6.1, which has no dma-buf export
 * (kfd-facts §7.4): the client's VRAM and GTT allocations are GEM buffers of
 * the process's render file imported into KFD, its mmaps of them dma-bufs of
 * those buffers (the same memory the daemon's view of the render file maps),
 * a free closes the GEM handle; and a proxy worker's process (TRUSTED) hands
 * the daemon what maps its render file. The client's calls are made as
 * sim_remote_serve_process() makes them, through the served table.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "contexts/context-kfd-process.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim.h"

#define GPU_ID 0x697Du
#define RENDER_MINOR 128u

typedef struct Client {
        SimDevice *dev;
        KfdProcess *kp;
        SimRemoteProcess served;
        int kfd, render;
} Client;

static void client_open(Client *c, uint32_t kfd_minor, unsigned flags) {
        SimOptions o = { .kfd_minor = kfd_minor };
        char err[256] = "";

        memset(c, 0, sizeof *c);
        cr_assert_eq(sim_device_new(&o, &c->dev), 0);
        cr_assert_eq(kfd_process_new(sim_device_get_ops(c->dev), NULL, flags, GPU_ID, RENDER_MINOR, &c->kp, err,
                                     sizeof err),
                     0, "a KFD process on KFD 1.%u: %s", kfd_minor, err);
        c->served = kfd_process_served(c->kp);
        c->kfd = c->served.ops->open_kfd(c->served.ops->userdata);
        c->render = c->served.ops->open_render(c->served.ops->userdata, RENDER_MINOR);
        cr_assert_geq(c->kfd, 0);
        cr_assert_geq(c->render, 0);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) c->render, .gpu_id = GPU_ID };
        cr_assert_eq(c->served.ops->ioctl(c->served.ops->userdata, c->kfd, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
}

static void client_close(Client *c) {
        c->served.free(c->served.userdata);
        sim_device_free(c->dev);
}

static int cioctl(Client *c, unsigned long request, void *arg) {
        return c->served.ops->ioctl(c->served.ops->userdata, c->kfd, request, arg);
}

static unsigned gem_handles(Client *c) {
        SimDeviceStats st;

        sim_device_get_stats(c->dev, &st);
        return st.gem_handles;
}

static uint64_t reserve(uint64_t size) {
        void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

        cr_assert_neq(p, MAP_FAILED);
        return (uint64_t) (uintptr_t) p;
}

static int gpu_map(Client *c, uint64_t handle, bool map) {
        uint32_t ids[1] = { GPU_ID };
        struct kfd_ioctl_map_memory_to_gpu_args a = {
                .handle = handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };

        return cioctl(c, map ? AMDKFD_IOC_MAP_MEMORY_TO_GPU : AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &a);
}

/* The client's mmap of its render node: the fd and offset the server hands
 * it, mapped over the buffer's VA as the thunk maps it. */
static uint8_t *client_mmap(Client *c, uint64_t va, uint64_t size, uint64_t offset, int *ret) {
        uint64_t in_fd = 0;
        int fd = -1;
        void *m;

        *ret = c->served.mmap_resolve(c->served.userdata, c->render, size, offset, &fd, &in_fd);
        if (*ret < 0)
                return NULL;
        m = mmap((void *) (uintptr_t) va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, (off_t) in_fd);
        close(fd);
        cr_assert_eq((uintptr_t) m, va);
        return m;
}

Test(kfd_process, on_kfd_1_11_the_clients_buffers_are_gem_buffers_it_maps_through_dma_bufs) {
        /* ROCr 5.2.3's flags (rocm-facts §1.3): signals and rings (GTT
         * coherent uncached), hipMalloc (VRAM public). */
        const uint32_t gtt_flags = 0xd6000002u, vram_flags = 0xf0000001u;
        struct kfd_ioctl_alloc_memory_of_gpu_args g = { .size = 3 * 4096, .gpu_id = GPU_ID, .flags = gtt_flags };
        struct kfd_ioctl_alloc_memory_of_gpu_args v = { .size = 2 * 4096, .gpu_id = GPU_ID, .flags = vram_flags };
        const KfdOps *daemon;
        uint8_t *cg, *cv, *view;
        Client c;
        int r;

        client_open(&c, 11, 0);
        daemon = kfd_process_daemon_ops(c.kp);
        g.va_addr = reserve(g.size);
        v.va_addr = reserve(v.size);
        cr_assert_eq(cioctl(&c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &g), 0);
        cr_assert_eq(cioctl(&c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &v), 0);
        cr_expect_eq(gem_handles(&c), 2u, "each a GEM buffer of the process's render file");
        cr_expect_eq(g.handle >> 32, GPU_ID, "a KFD handle of the GPU asked for");
        cr_expect_neq(g.handle, v.handle);
        cr_expect_neq(g.mmap_offset, v.mmap_offset);
        cr_expect_eq(gpu_map(&c, g.handle, true), 0, "mapped to the GPU at the VA asked for");
        cr_expect_eq(gpu_map(&c, v.handle, true), 0);

        cg = client_mmap(&c, g.va_addr, g.size, g.mmap_offset, &r);
        cr_assert_eq(r, 0, "the client maps its GTT buffer: %s", strerror(-r));
        cv = client_mmap(&c, v.va_addr + 4096, 4096, v.mmap_offset + 4096, &r);
        cr_assert_eq(r, 0, "and its VRAM buffer's second page: %s", strerror(-r));
        memset(cg, 0x5a, g.size);
        cv[17] = 0xc3;

        /* The same memory as the render file maps at the offset the client
         * was given: what the daemon's relay reads of it. */
        cr_assert_eq(daemon->mmap(daemon->userdata, NULL, 4096, PROT_READ, MAP_SHARED, c.render, g.mmap_offset + 8192,
                                  (void **) &view),
                     0);
        cr_expect_eq(view[4095], 0x5a);
        munmap(view, 4096);
        cr_assert_eq(daemon->mmap(daemon->userdata, NULL, 8192, PROT_READ, MAP_SHARED, c.render, v.mmap_offset,
                                  (void **) &view),
                     0);
        cr_expect_eq(view[4096 + 17], 0xc3);
        munmap(view, 8192);

        /* Nothing but its buffers; no dma-buf export of its own (past the
         * 1.11 table, as the kernel answers). */
        cr_expect_null(client_mmap(&c, g.va_addr, 4 * 4096, g.mmap_offset, &r));
        cr_expect_eq(r, -EINVAL, "past the buffer");
        struct kfd_ioctl_export_dmabuf_args e = { .handle = g.handle, .flags = O_CLOEXEC | O_RDWR };
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_EXPORT_DMABUF, &e), -EINVAL);

        /* A free closes the GEM handle too: the memory goes (the client's
         * mappings hold their dma-bufs' memory, as on the kernel). */
        struct kfd_ioctl_free_memory_of_gpu_args f = { .handle = g.handle };
        cr_expect_eq(gpu_map(&c, g.handle, false), 0);
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f), 0);
        cr_expect_eq(gem_handles(&c), 1u, "the freed buffer's handle is closed");
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f), -EINVAL, "freed once");
        cr_expect_null(client_mmap(&c, g.va_addr, 4096, g.mmap_offset, &r));
        cr_expect_eq(r, -EINVAL, "a freed buffer is not the client's to map");
        f.handle = v.handle;
        cr_expect_eq(gpu_map(&c, v.handle, false), 0);
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f), 0);
        cr_expect_eq(gem_handles(&c), 0u);

        /* An allocation the GEM path cannot make leaves nothing: a size of
         * 0 (the kernel's GEM_CREATE refuses it). */
        struct kfd_ioctl_alloc_memory_of_gpu_args z = { .va_addr = g.va_addr, .gpu_id = GPU_ID, .flags = gtt_flags };
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &z), -EINVAL);
        cr_expect_eq(gem_handles(&c), 0u);
        munmap(cg, g.size);
        munmap(cv, 4096);
        client_close(&c);
}

/* A proxy worker's own process (TRUSTED) on KFD 1.11: the daemon maps what
 * it maps of it through the worker's render file, which the worker hands it
 * (no dma-buf export to make). */
Test(kfd_process, on_kfd_1_11_a_proxy_worker_hands_the_daemon_its_render_file) {
        struct kfd_ioctl_alloc_memory_of_gpu_args a = { .size = 2 * 4096, .gpu_id = GPU_ID, .flags = 0xd6000002u };
        uint64_t in_fd = 0;
        uint8_t *m;
        void *own;
        Client c;
        int fd = -1;

        client_open(&c, 11, KFD_PROCESS_TRUSTED);
        a.va_addr = reserve(a.size);
        cr_assert_eq(cioctl(&c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), 0);
        cr_expect_eq(gem_handles(&c), 0u, "the daemon's calls are made as they are");
        cr_assert_eq(c.served.mmap_resolve(c.served.userdata, c.render, a.size, a.mmap_offset, &fd, &in_fd), 0);
        m = mmap(NULL, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t) in_fd);
        close(fd);
        cr_assert_neq(m, MAP_FAILED);
        m[4096] = 0x42;
        cr_assert_eq(sim_device_get_ops(c.dev)->mmap(sim_device_get_ops(c.dev)->userdata, NULL, a.size, PROT_READ,
                                                     MAP_SHARED, c.render, a.mmap_offset, &own),
                     0);
        cr_expect_eq(((uint8_t *) own)[4096], 0x42, "the buffer the worker's render file maps");
        munmap(own, a.size);
        munmap(m, a.size);
        client_close(&c);
}

/* Two GPUs in one secondary process (kfd_process_add_gpu()): the client's
 * calls may name either, ACQUIRE_VM each with its own render file only, the
 * apertures list both; a GPU added twice is -EEXIST. A process that is
 * not secondary (a proxy worker's) takes GPUs the same way. */
Test(kfd_process, a_secondary_process_shows_the_gpus_added_to_it) {
        SimOptions o = { .n_gpus = 2 };
        struct kfd_process_device_apertures pa[4] = {};
        struct kfd_ioctl_get_process_apertures_new_args ap = { .kfd_process_device_apertures_ptr = (uintptr_t) pa,
                                                               .num_of_nodes = 4 };
        SimGpuStats st;
        Client c = {};
        char err[256] = "";
        int render1;

        cr_assert_eq(sim_device_new(&o, &c.dev), 0);
        cr_assert_eq(sim_device_get_gpu_stats(c.dev, 1, &st), 0);
        cr_assert_eq(kfd_process_new(sim_device_get_ops(c.dev), NULL, KFD_PROCESS_SECONDARY, GPU_ID, RENDER_MINOR,
                                     &c.kp, err, sizeof err),
                     0, "%s", err);
        c.served = kfd_process_served(c.kp);
        c.kfd = c.served.ops->open_kfd(c.served.ops->userdata);
        cr_expect_eq(c.served.ops->open_render(c.served.ops->userdata, RENDER_MINOR + 1), -ENOENT,
                     "GPU 1's render node before it is added");
        cr_assert_eq(kfd_process_add_gpu(c.kp, st.gpu_id, RENDER_MINOR + 1, err, sizeof err), 0, "%s", err);
        cr_expect_eq(kfd_process_add_gpu(c.kp, st.gpu_id, RENDER_MINOR + 1, err, sizeof err), -EEXIST);
        cr_expect(strstr(err, "already"), "%s", err);
        c.render = c.served.ops->open_render(c.served.ops->userdata, RENDER_MINOR);
        render1 = c.served.ops->open_render(c.served.ops->userdata, RENDER_MINOR + 1);
        cr_assert_geq(render1, 0);
        cr_expect_neq(render1, c.render, "a render file per GPU");

        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) c.render, .gpu_id = st.gpu_id };
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL, "GPU 1's VM with GPU 0's render file");
        vm.drm_fd = (uint32_t) render1;
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_ACQUIRE_VM, &vm), 0, "GPU 1's VM with its own");
        vm = (struct kfd_ioctl_acquire_vm_args) { .drm_fd = (uint32_t) c.render, .gpu_id = GPU_ID };
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_ACQUIRE_VM, &vm), 0, "GPU 0's VM with its own");
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &ap), 0);
        cr_expect_eq(ap.num_of_nodes, 2, "both GPUs' apertures");

        uint64_t va = reserve(1 << 20);
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = va, .size = 4096, .gpu_id = st.gpu_id,
                .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        };
        cr_expect_eq(cioctl(&c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), 0, "an allocation on GPU 1");
        /* Its mmap resolves on GPU 1's render file alone. */
        int fd = -1;
        uint64_t off = 0;
        cr_expect_eq(c.served.mmap_resolve(c.served.userdata, c.render, 4096, a.mmap_offset, &fd, &off), -EINVAL,
                     "GPU 1's buffer through GPU 0's render file");
        cr_expect_eq(c.served.mmap_resolve(c.served.userdata, render1, 4096, a.mmap_offset, &fd, &off), 0);
        if (fd >= 0)
                close(fd);
        munmap((void *) (uintptr_t) va, 1 << 20);
        client_close(&c);

        /* Not secondary (the daemon's side of a proxy worker's process):
         * GPUs are added the same way; one whose render file its base
         * cannot open (a GPU the worker was not given) is refused, named. */
        cr_assert_eq(sim_device_new(&o, &c.dev), 0);
        cr_assert_eq(kfd_process_new(sim_device_get_ops(c.dev), NULL, 0, GPU_ID, RENDER_MINOR, &c.kp, err, sizeof err),
                     0, "%s", err);
        c.served = kfd_process_served(c.kp);
        cr_expect_eq(kfd_process_add_gpu(c.kp, st.gpu_id, RENDER_MINOR + 1, err, sizeof err), 0, "%s", err);
        cr_expect_lt(kfd_process_add_gpu(c.kp, 0x1234, RENDER_MINOR + 7, err, sizeof err), 0);
        cr_expect(strstr(err, "cannot open renderD135"), "%s", err);
        c.kfd = c.served.ops->open_kfd(c.served.ops->userdata);
        cr_expect_geq(c.served.ops->open_render(c.served.ops->userdata, RENDER_MINOR + 1), 0);
        cr_expect_eq(c.served.ops->open_render(c.served.ops->userdata, RENDER_MINOR + 7), -ENOENT,
                     "the GPU that was refused is not there");
        client_close(&c);
}

/* A 4 KiB buffer of the process on gpu_id, mapped there: its VA. */
static uint64_t page_on(Client *c, uint32_t gpu_id) {
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = reserve(4096), .size = 4096, .gpu_id = gpu_id,
                .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        };
        uint32_t ids[1] = { gpu_id };

        cr_assert_eq(cioctl(c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), 0);
        struct kfd_ioctl_map_memory_to_gpu_args m = {
                .handle = a.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };
        cr_assert_eq(cioctl(c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), 0);
        return a.va_addr;
}

/* An SDMA queue of the process on gpu_id (its ring and pointers a buffer
 * each, as the kernel wants them): its CREATE_QUEUE answer. */
static struct kfd_ioctl_create_queue_args sdma_queue(Client *c, uint32_t gpu_id) {
        struct kfd_ioctl_create_queue_args q = {
                .ring_base_address = page_on(c, gpu_id), .ring_size = 4096,
                .read_pointer_address = page_on(c, gpu_id), .write_pointer_address = page_on(c, gpu_id),
                .gpu_id = gpu_id, .queue_type = KFD_IOC_QUEUE_TYPE_SDMA, .queue_percentage = 100,
                .queue_priority = 7,
        };
        int r = cioctl(c, AMDKFD_IOC_CREATE_QUEUE, &q);

        cr_assert_eq(r, 0, "CREATE_QUEUE on GPU 0x%x: %s", gpu_id, strerror(-r));
        return q;
}

/*
 * A proxy worker's process (TRUSTED) showing two GPUs: the worker opens
 * each GPU's render file (kfd_process_add_gpu()), and the doorbell slice the
 * daemon maps for each GPU is a shadow of that GPU's own — a KFD process has
 * a slice per GPU (kfd_doorbell.c), the simulator too (a pdd each) — so a
 * doorbell the daemon rings on GPU 1 reaches GPU 1's slice and never GPU
 * 0's, whichever GPU mapped its slice first (before, one shadow stood for
 * the slice mapped first).
 */
Test(kfd_process, a_proxy_workers_process_rings_each_gpus_own_doorbells) {
        SimOptions o = { .n_gpus = 2 };
        const KfdOps *base;
        struct kfd_ioctl_create_queue_args q[2];
        volatile uint64_t *shadow[2], *real[2];
        SimGpuStats st;
        Client c = {};
        char err[256] = "";
        int render[2];
        uint32_t ids[2];

        cr_assert_eq(sim_device_new(&o, &c.dev), 0);
        base = sim_device_get_ops(c.dev);
        cr_assert_eq(sim_device_get_gpu_stats(c.dev, 1, &st), 0);
        ids[0] = GPU_ID;
        ids[1] = st.gpu_id;
        cr_assert_eq(kfd_process_new(base, NULL, KFD_PROCESS_TRUSTED, GPU_ID, RENDER_MINOR, &c.kp, err, sizeof err), 0,
                     "%s", err);
        c.served = kfd_process_served(c.kp);
        cr_assert_eq(kfd_process_add_gpu(c.kp, ids[1], RENDER_MINOR + 1, err, sizeof err), 0, "%s", err);
        c.kfd = c.served.ops->open_kfd(c.served.ops->userdata);
        /* GPU 1 first: its slice is the first one mapped. */
        for (int k = 1; k >= 0; k--) {
                render[k] = c.served.ops->open_render(c.served.ops->userdata, RENDER_MINOR + (unsigned) k);
                cr_assert_geq(render[k], 0, "GPU %d's render file", k);
                struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) render[k], .gpu_id = ids[k] };
                cr_assert_eq(cioctl(&c, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
                q[k] = sdma_queue(&c, ids[k]);
                uint64_t slice = q[k].doorbell_offset & (KFD_MMAP_TYPE_MASK | KFD_MMAP_GPU_ID_MASK);
                uint64_t in_fd = 0;
                int fd = -1;
                cr_assert_eq(c.served.mmap_resolve(c.served.userdata, c.kfd, KFD_DOORBELL_SLICE_SIZE, slice, &fd,
                                                   &in_fd),
                             0, "GPU %d's doorbell slice", k);
                void *m = mmap(NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t) in_fd);
                close(fd);
                cr_assert_neq(m, MAP_FAILED);
                shadow[k] = m;
                void *r = NULL;
                cr_assert_eq(base->mmap(base->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ, MAP_SHARED, c.kfd,
                                        slice, &r),
                             0);
                real[k] = r;
        }
        cr_expect(shadow[0] != shadow[1], "a shadow slice per GPU");
        for (int k = 0; k < 2; k++) {
                size_t slot = (q[k].doorbell_offset & (KFD_DOORBELL_SLICE_SIZE - 1)) / 8;
                shadow[k][slot] = 16u * (unsigned) (k + 1);
                c.served.ops->doorbell_written(c.served.ops->userdata, c.kfd, q[k].queue_id);
        }
        for (int k = 0; k < 2; k++) {
                size_t slot = (q[k].doorbell_offset & (KFD_DOORBELL_SLICE_SIZE - 1)) / 8;
                cr_expect_eq(real[k][slot], 16u * (unsigned) (k + 1), "GPU %d's doorbell reached its own slice", k);
        }
        for (int k = 0; k < 2; k++) {
                munmap((void *) shadow[k], KFD_DOORBELL_SLICE_SIZE);
                munmap((void *) real[k], KFD_DOORBELL_SLICE_SIZE);
        }
        client_close(&c);
}

/*
 * A FREE in a request word shorter than its struct frees what the kernel
 * reads: the caller's bytes, zeros after. The process's table of the
 * client's buffers must forget that one too, for the kernel gives its
 * handle to the next buffer of the process (an IDR), the daemon's own among
 * them: an mmap of the freed offset would export that buffer to the client.
 * Found by fuzz-relay-ioctl (corpus/relay-ioctl/a-short-free-leaves-no-
 * stale-handle-to-mmap).
 */
Test(kfd_process, a_free_in_a_short_word_leaves_no_handle_that_names_the_daemons_buffer) {
        Client c;

        client_open(&c, 0, KFD_PROCESS_SECONDARY);
        const KfdOps *o = kfd_process_daemon_ops(c.kp);
        int daemon_kfd = o->open_kfd(o->userdata);
        cr_assert_geq(daemon_kfd, 0);
        uint64_t va = reserve(1 << 20);
        struct kfd_ioctl_alloc_memory_of_gpu_args mine = {
                .va_addr = va, .size = 4096, .gpu_id = GPU_ID,
                .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        };
        struct kfd_ioctl_alloc_memory_of_gpu_args daemons = mine;
        daemons.va_addr = va + 65536;
        cr_assert_eq(cioctl(&c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &mine), 0);
        cr_assert_eq(mine.handle >> 48, 0u, "the handle fits in six bytes");
        struct kfd_ioctl_free_memory_of_gpu_args fr = { .handle = mine.handle };
        cr_assert_eq(cioctl(&c, _IOC(_IOC_WRITE, 'K', 0x17, 6), &fr), 0, "freed by its first six bytes");

        cr_assert_eq(o->ioctl(o->userdata, daemon_kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &daemons), 0);
        cr_expect_eq(daemons.handle, mine.handle, "the daemon's buffer has the freed handle");
        int fd = -1;
        uint64_t off = 0;
        cr_expect_eq(c.served.mmap_resolve(c.served.userdata, c.render, 4096, mine.mmap_offset, &fd, &off), -EINVAL,
                     "the freed offset maps nothing, not the daemon's buffer");
        if (fd >= 0)
                close(fd);
        fr.handle = daemons.handle;
        cr_expect_eq(o->ioctl(o->userdata, daemon_kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), 0);
        o->close(o->userdata, daemon_kfd);
        munmap((void *) (uintptr_t) va, 1 << 20);
        client_close(&c);
}
