/* SPDX-License-Identifier: MIT */
/*
 * KFD contexts of the simulated GPU, as unkind as the kernel's (kfd-facts
 * §7.1, §7.3, §7.4): opens of one process share its primary context;
 * AMDKFD_IOC_CREATE_PROCESS makes a secondary one with a VM of its own, so an
 * address valid in one context faults in another; a fault evicts every queue
 * of that context — and only of that context — for good; closing a secondary
 * context's fd tears it down; the engines stay shared. Processes: a file
 * belongs to the process that opened it, and a process's exit takes its
 * contexts with it (not its dma-bufs). And the uapi version: what an older
 * kernel lacks, it refuses as that kernel does.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "sim-test.h"

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

typedef struct Ctx {
        TestCtx c;
        TestBo page;
        uint32_t done, mem_ev;
        TestQueue q;
} Ctx;

static void ctx_setup(Ctx *x) {
        x->page = t_event_page(&x->c, &x->done);
        x->mem_ev = t_event(&x->c, KFD_IOC_EVENT_MEMORY, true, 0);
        t_sdma_queue(&x->c, &x->q, 4096);
}

static void ctx_open_secondary(Ctx *x, SimDevice *dev) {
        memset(x, 0, sizeof *x);
        t_open_secondary(&x->c, dev);
        ctx_setup(x);
}

/* Submits dw plus a completion signal; waits up to timeout_ms. */
static uint32_t ctx_run(Ctx *x, const uint32_t *dw, size_t n, uint32_t timeout_ms) {
        uint32_t signal[] = { PKT_SIGNAL(x->page.va, x->done) };
        t_submit(&x->q, dw, n);
        t_submit(&x->q, signal, ELEMENTSOF(signal));
        return t_wait1(&x->c, x->done, timeout_ms);
}

static uint32_t ctx_wait_fault(Ctx *x, uint64_t *ret_va) {
        struct kfd_event_data ev = { .event_id = x->mem_ev };
        uint32_t res = 0;
        cr_assert_eq(t_wait(&x->c, &ev, 1, false, 5000, &res), 0);
        *ret_va = ev.memory_exception_data.va;
        return res;
}

Test(sim_contexts, opens_of_one_process_share_the_primary_context) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        TestCtx a;
        t_open(&a, d);
        TestBo bo = t_bo(&a, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);

        /* A second fd of the same process names the same context: its handles work there. */
        TestCtx b = a;
        b.kfd = a.ops->open_kfd(a.ops->userdata);
        cr_assert_geq(b.kfd, 0);
        struct kfd_ioctl_export_dmabuf_args e = { .handle = bo.handle, .flags = O_CLOEXEC };
        cr_expect_eq(t_ioctl(&b, AMDKFD_IOC_EXPORT_DMABUF, &e), 0, "a handle of the first fd, exported through the second");
        close((int) e.dmabuf_fd);

        /* After CREATE_PROCESS the second fd is a context of its own: the handle is unknown there. */
        cr_assert_eq(t_ioctl(&b, AMDKFD_IOC_CREATE_PROCESS, NULL), 0);
        cr_expect_eq(t_ioctl(&b, AMDKFD_IOC_CREATE_PROCESS, NULL), -EINVAL, "each fd owns only one context");
        cr_expect_eq(t_ioctl(&b, AMDKFD_IOC_EXPORT_DMABUF, &e), -EINVAL, "the handle is unknown in the new context");

        /* Closing every fd of the primary keeps it (the kernel keeps it until the process exits). */
        cr_expect_eq(a.ops->close(a.ops->userdata, b.kfd), 0);
        cr_expect_eq(a.ops->close(a.ops->userdata, a.kfd), 0);
        a.kfd = a.ops->open_kfd(a.ops->userdata);
        cr_assert_geq(a.kfd, 0);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) a.render, .gpu_id = a.gpu_id };
        cr_expect_eq(t_ioctl(&a, AMDKFD_IOC_ACQUIRE_VM, &vm), 0, "the same VM is still acquired");
        cr_expect_eq(t_ioctl(&a, AMDKFD_IOC_EXPORT_DMABUF, &e), 0, "and the buffer is still there");
        close((int) e.dmabuf_fd);
        t_close(&a, true);
}

Test(sim_contexts, an_address_of_one_context_faults_in_another) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        Ctx p = {}, s;
        t_open(&p.c, d);
        ctx_setup(&p);
        ctx_open_secondary(&s, d);

        TestBo secret = t_bo(&p.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memset(secret.cpu, 0x5A, 8192);
        TestBo mine = t_bo(&s.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);

        /* The secondary context copies from the primary's buffer address: a fault there. */
        uint32_t probe[] = { PKT_COPY(mine.va, secret.va, 4096) };
        t_submit(&s.q, probe, ELEMENTSOF(probe));
        uint64_t va = 0;
        cr_expect_eq(ctx_wait_fault(&s, &va), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(va, secret.va, "the fault names the other context's address");
        cr_expect_eq(((uint8_t *) mine.cpu)[0], 0, "nothing was read");

        /* The primary context did not fault and still runs. */
        cr_expect_eq(t_wait1(&p.c, p.mem_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT);
        uint32_t fill[] = { PKT_FILL_DW(secret.va, 0x11111111u, 4096) };
        cr_expect_eq(ctx_run(&p, fill, ELEMENTSOF(fill), 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(((uint32_t *) secret.cpu)[0], 0x11111111u);
        t_close(&s.c, false);
        t_close(&p.c, true);
}

Test(sim_contexts, a_fault_evicts_every_queue_of_its_context_and_no_other) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        Ctx s1, s2;
        ctx_open_secondary(&s1, d);
        ctx_open_secondary(&s2, d);
        TestQueue q1b;
        t_sdma_queue(&s1.c, &q1b, 4096);
        TestBo f1 = t_bo(&s1.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo f2 = t_bo(&s2.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint64_t hole = t_reserve_va(1 << 20);

        uint32_t bad[] = { PKT_FILL_DW(hole, 0, 64) };
        t_submit(&s1.q, bad, ELEMENTSOF(bad));
        uint64_t va;
        cr_expect_eq(ctx_wait_fault(&s1, &va), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(va, hole);

        /* s1's other queue, innocent, is evicted too; so is a queue s1 creates now. */
        uint32_t w1[] = { PKT_FENCE(f1.va, 7), PKT_SIGNAL(s1.page.va, s1.done) };
        t_submit(&q1b, w1, ELEMENTSOF(w1));
        TestQueue q1c;
        t_sdma_queue(&s1.c, &q1c, 4096);
        t_submit(&q1c, w1, ELEMENTSOF(w1));
        cr_expect_eq(t_wait1(&s1.c, s1.done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT);
        cr_expect_eq(((uint32_t *) f1.cpu)[0], 0u, "no queue of the faulted context runs");

        /* s2 shares the engines and is untouched. */
        uint32_t w2[] = { PKT_FENCE(f2.va, 9) };
        cr_expect_eq(ctx_run(&s2, w2, ELEMENTSOF(w2), 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(((uint32_t *) f2.cpu)[0], 9u);
        cr_expect_eq(t_wait1(&s2.c, s2.mem_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "no fault reported to s2");

        /* Only a new context helps: close s1 and make another. */
        t_close(&s1.c, false);
        Ctx s3;
        ctx_open_secondary(&s3, d);
        TestBo f3 = t_bo(&s3.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t w3[] = { PKT_FENCE(f3.va, 3) };
        cr_expect_eq(ctx_run(&s3, w3, ELEMENTSOF(w3), 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        t_close(&s3.c, false);
        t_close(&s2.c, true);
}

Test(sim_contexts, closing_a_secondary_fd_tears_its_context_down) {
        SimOptions o = { .vram_size = 64u << 20 };
        SimDevice *d;
        cr_assert_eq(sim_device_new(&o, &d), 0);
        TestCtx p;
        t_open(&p, d);
        struct kfd_ioctl_get_available_memory_args av = { .gpu_id = 0x697D };
        cr_assert_eq(t_ioctl(&p, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        uint64_t before = av.available;

        TestCtx s;
        t_open_secondary(&s, d);
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = t_reserve_va(16u << 20), .size = 16u << 20, .gpu_id = 0x697D,
                .flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        };
        cr_assert_eq(t_ioctl(&s, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), 0);
        cr_assert_eq(t_ioctl(&p, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, before - (16u << 20));

        cr_expect_eq(s.ops->close(s.ops->userdata, s.kfd), 0);
        cr_assert_eq(t_ioctl(&p, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, before, "the secondary context's VRAM went with its fd");
        s.ops->close(s.ops->userdata, s.render);
        t_close(&p, true);
}

static SimDevice *device_at(uint32_t minor) {
        SimOptions o = { .kfd_minor = minor };
        SimDevice *d;
        cr_assert_eq(sim_device_new(&o, &d), 0, "uapi 1.%u", minor);
        return d;
}

Test(sim_contexts, an_older_kernel_lacks_what_came_later) {
        SimOptions bad = { .kfd_minor = 10 };
        SimDevice *d;
        cr_expect_eq(sim_device_new(&bad, &d), -EINVAL, "1.10 is older than anything modelled");
        bad.kfd_minor = 20;
        cr_expect_eq(sim_device_new(&bad, &d), -EINVAL, "1.20 does not exist yet");

        /* 1.18 (Linux 6.12 .. 6.19): no secondary contexts; the number is past the table. */
        TestCtx c;
        t_open(&c, device_at(18));
        struct kfd_ioctl_get_version_args v = {};
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_GET_VERSION, &v), 0);
        cr_expect_eq(v.minor_version, 18u);
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_CREATE_PROCESS, NULL), -EINVAL);
        TestBo bo = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        struct kfd_ioctl_export_dmabuf_args e = { .handle = bo.handle, .flags = O_CLOEXEC };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_EXPORT_DMABUF, &e), 0, "1.12's export is there");
        close((int) e.dmabuf_fd);
        t_close(&c, true);

        /* 1.11 (Linux 6.1, Debian 12): no EXPORT_DMABUF, no RUNTIME_ENABLE. */
        t_open(&c, device_at(11));
        bo = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_EXPORT_DMABUF, &e), -EINVAL);
        struct kfd_ioctl_runtime_enable_args re = {};
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RUNTIME_ENABLE, &re), -EINVAL);
        t_close(&c, true);

        /* 1.19 answers -ENOTTY past its table. */
        t_open(&c, device_at(19));
        cr_expect_eq(t_ioctl(&c, _IO('K', 0x28), NULL), -ENOTTY);
        t_close(&c, true);
}

Test(sim_contexts, sdma_queues_by_engine_id_need_uapi_1_17) {
        for (uint32_t minor = 16; minor <= 17; minor++) {
                TestCtx c;
                t_open(&c, device_at(minor));
                TestQueue q;
                memset(&q, 0, sizeof q);
                q.ring_size = 4096;
                q.ring = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                q.rptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                q.wptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                struct {
                        struct kfd_ioctl_create_queue_args base;
                        uint32_t sdma_engine_id, pad;
                } a = { .base = { .ring_base_address = q.ring.va, .write_pointer_address = q.wptr.va,
                                  .read_pointer_address = q.rptr.va, .ring_size = 4096, .gpu_id = c.gpu_id,
                                  .queue_type = 4 /* SDMA_BY_ENG_ID */, .queue_percentage = 100 },
                        .sdma_engine_id = 1 };
                int r = kfd_ioctl(c.ops, c.kfd, _IOWR('K', 0x02, a), &a);
                if (minor < 17)
                        cr_expect_eq(r, -EOPNOTSUPP, "1.%u does not know the queue type", minor);
                else
                        cr_expect_eq(r, 0, "1.17 creates it");
                t_close(&c, true);
        }
}

Test(sim_contexts, event_ages_need_uapi_1_14) {
        for (uint32_t minor = 13; minor <= 14; minor++) {
                TestCtx c;
                t_open(&c, device_at(minor));
                uint32_t id;
                (void) t_event_page(&c, &id);
                /* An age the caller has not seen (the event is at age 1): with ages
                 * the wait returns at once; without them it waits for a signal. */
                struct kfd_event_data ev = { .event_id = id };
                kfd_event_data_set_age(&ev, 5);
                uint32_t res = 0;
                cr_assert_eq(t_wait(&c, &ev, 1, false, 20, &res), 0);
                if (minor < 14)
                        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_TIMEOUT, "1.13 ignores last_event_age");
                else
                        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "1.14 compares it");
                t_close(&c, true);
        }
}

Test(sim_contexts, a_process_reaches_no_file_of_another) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        TestCtx a, b;
        t_open(&a, d);
        t_open(&b, d);
        TestBo bo = t_bo(&a, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);

        /* a's numbers through b's table: as in another process's fd table. */
        struct kfd_ioctl_get_version_args v = {};
        cr_expect_eq(kfd_ioctl(b.ops, a.kfd, AMDKFD_IOC_GET_VERSION, &v), -EBADF);
        void *m = NULL;
        cr_expect_eq(b.ops->mmap(b.ops->userdata, NULL, 4096, PROT_READ, MAP_SHARED, a.render, bo.mmap_offset, &m),
                     -EBADF, "a's render fd is no file of b");
        cr_expect_eq(b.ops->close(b.ops->userdata, a.kfd), -EBADF);
        cr_expect_eq(b.ops->exception_info(b.ops->userdata, a.kfd, NULL, NULL, 0), -EBADF);
        cr_expect_eq(kfd_ioctl(a.ops, a.kfd, AMDKFD_IOC_GET_VERSION, &v), 0, "a's fd is still open");

        /* ACQUIRE_VM with another process's render fd: fget finds nothing. */
        TestCtx s;
        t_open_secondary(&s, d);
        int render = s.ops->open_render(s.ops->userdata, 128);
        cr_assert_geq(render, 0);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) render, .gpu_id = 0x697D };
        int kfd2 = b.ops->open_kfd(b.ops->userdata);
        cr_assert_geq(kfd2, 0);
        cr_expect_eq(t_ioctl(&(TestCtx) { .ops = b.ops, .kfd = kfd2 }, AMDKFD_IOC_CREATE_PROCESS, NULL), 0);
        cr_expect_eq(kfd_ioctl(b.ops, kfd2, AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL);
        cr_expect_eq(kfd_ioctl(s.ops, s.kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
        cr_expect_eq(b.ops->close(b.ops->userdata, kfd2), 0);
        cr_expect_eq(s.ops->close(s.ops->userdata, render), 0);
        t_close(&s, false);
        t_bo_release(&a, &bo);
        t_close(&b, false);
        t_close(&a, true);
}

typedef struct Sleeper {
        TestCtx *c;
        uint32_t event;
        int r;
        uint32_t result;
} Sleeper;

static void *sleeper_main(void *userdata) {
        Sleeper *s = userdata;
        struct kfd_event_data ev = { .event_id = s->event };
        s->r = t_wait(s->c, &ev, 1, false, KFD_EVENT_TIMEOUT_INFINITE, &s->result);
        return NULL;
}

Test(sim_contexts, a_process_exit_takes_its_contexts_and_leaves_its_dma_bufs) {
        SimDevice *d;
        cr_assert_eq(sim_device_new(NULL, &d), 0);
        TestCtx a;
        t_open(&a, d);
        SimDeviceStats base, st;
        sim_device_get_stats(d, &base);

        /* Process b: its primary context with a queue and an exported buffer,
         * a secondary one, and a thread asleep in WAIT_EVENTS. */
        Ctx b = {};
        t_open(&b.c, d);
        ctx_setup(&b);
        Ctx b2;
        memset(&b2, 0, sizeof b2);
        b2.c.ops = b.c.ops;
        b2.c.gpu_id = 0x697D;
        b2.c.kfd = b.c.ops->open_kfd(b.c.ops->userdata);
        cr_assert_geq(b2.c.kfd, 0);
        cr_assert_eq(t_ioctl(&b2.c, AMDKFD_IOC_CREATE_PROCESS, NULL), 0);
        TestBo shared = t_bo(&b.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        memset(shared.cpu, 0x6B, 8192);
        struct kfd_ioctl_export_dmabuf_args e = { .handle = shared.handle, .flags = O_CLOEXEC };
        cr_assert_eq(t_ioctl(&b.c, AMDKFD_IOC_EXPORT_DMABUF, &e), 0);
        munmap(shared.cpu, 8192);
        Sleeper sl = { .c = &b.c, .event = b.done, .r = 1 };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, sleeper_main, &sl), 0);
        do {
                usleep(1000);
                sim_device_get_stats(d, &st);
        } while (st.ioctls_in_flight == 0);
        cr_expect_eq(st.processes, base.processes + 1);
        cr_expect_eq(st.contexts, base.contexts + 2);
        cr_expect_eq(st.queues, base.queues + 1);

        /* b exits with its fds open and its thread asleep. */
        cr_assert_eq(sim_device_remove_mm(d, b.c.ops), 0);
        pthread_join(t, NULL);
        cr_expect_eq(sl.r, -EINTR, "the sleeper of a killed process: %d", sl.r);
        cr_expect_eq(sl.result, KFD_IOC_WAIT_RESULT_FAIL);
        sim_device_get_stats(d, &st);
        cr_expect_eq(st.processes, base.processes);
        cr_expect_eq(st.contexts, base.contexts, "both of b's contexts are gone");
        cr_expect_eq(st.queues, base.queues);
        cr_expect_eq(st.files, base.files, "b's files are closed");
        cr_expect_eq(sim_device_remove_mm(d, sim_device_get_ops(d)), -EINVAL, "the device's own process stays");

        /* Its dma-buf lives on: a maps it and imports it. */
        uint8_t *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, (int) e.dmabuf_fd, 0);
        cr_assert_neq(m, MAP_FAILED);
        cr_expect_eq(m[8191], 0x6B);
        munmap(m, 8192);
        struct kfd_ioctl_import_dmabuf_args im = { .va_addr = t_reserve_va(8192), .gpu_id = 0x697D,
                                                   .dmabuf_fd = e.dmabuf_fd };
        cr_expect_eq(t_ioctl(&a, AMDKFD_IOC_IMPORT_DMABUF, &im), 0);
        close((int) e.dmabuf_fd);
        t_close(&a, true);
}

/* SimOptions.igpu_first: two GPUs. A context's VM goes on the GPU its
 * ACQUIRE_VM names, with that GPU's render node; memory is per GPU, and
 * every context sees every GPU's (kfd_ioctl_get_available_memory wants only
 * the pdd, not a VM); a dma-buf of one GPU is refused by the other (6.1's
 * import: "Can't handle buffers from other devices"). */
Test(sim_contexts, two_gpus_an_integrated_one_listed_first) {
        SimOptions o = { .igpu_first = true };
        SimDevice *d = NULL;
        const KfdOps *ops[2];
        int kfd[2], render[2];
        const uint32_t ids[2] = { 0x5A0B, 0x697D };
        const unsigned minors[2] = { 128, 129 };

        cr_assert_eq(sim_device_new(&o, &d), 0);
        for (unsigned i = 0; i < 2; i++) {
                cr_assert_eq(sim_device_add_mm(d, &ops[i]), 0);
                kfd[i] = ops[i]->open_kfd(ops[i]->userdata);
                cr_assert_geq(kfd[i], 0);
                render[i] = ops[i]->open_render(ops[i]->userdata, minors[i]);
                cr_assert_geq(render[i], 0);
        }
        cr_expect_eq(ops[0]->open_render(ops[0]->userdata, 130), -ENOENT, "no third render node");

        /* Another GPU's render node is no VM of this one. */
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) render[0], .gpu_id = ids[1] };
        cr_expect_eq(kfd_ioctl(ops[0], kfd[0], AMDKFD_IOC_ACQUIRE_VM, &vm), -EINVAL);
        for (unsigned i = 0; i < 2; i++) {
                vm = (struct kfd_ioctl_acquire_vm_args) { .drm_fd = (uint32_t) render[i], .gpu_id = ids[i] };
                cr_assert_eq(kfd_ioctl(ops[i], kfd[i], AMDKFD_IOC_ACQUIRE_VM, &vm), 0, "GPU %u", i);
        }

        /* Every GPU's apertures, the iGPU first. */
        struct kfd_process_device_apertures ap[4] = {};
        struct kfd_ioctl_get_process_apertures_new_args aa = { .kfd_process_device_apertures_ptr = (uint64_t) (uintptr_t) ap,
                                                              .num_of_nodes = 4 };
        cr_assert_eq(kfd_ioctl(ops[1], kfd[1], AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &aa), 0);
        cr_expect_eq(aa.num_of_nodes, 2u);
        cr_expect_eq(ap[0].gpu_id, ids[0]);
        cr_expect_eq(ap[1].gpu_id, ids[1]);

        /* VRAM per GPU: 512 MiB on the iGPU, 1 GiB on the other. */
        struct kfd_ioctl_get_available_memory_args av = { .gpu_id = ids[0] };
        cr_assert_eq(kfd_ioctl(ops[0], kfd[0], AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, 512u << 20);
        av.gpu_id = ids[1];
        cr_assert_eq(kfd_ioctl(ops[0], kfd[0], AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0,
                     "a context has a pdd on every GPU, with or without its VM");
        cr_expect_eq(av.available, 1u << 30);
        cr_assert_eq(kfd_ioctl(ops[1], kfd[1], AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, 1u << 30);

        uint64_t va = t_reserve_va(4096);
        struct kfd_ioctl_alloc_memory_of_gpu_args al = { .va_addr = va, .size = 4096, .gpu_id = ids[0],
                                                         .flags = KFD_IOC_ALLOC_MEM_FLAGS_VRAM };
        cr_assert_eq(kfd_ioctl(ops[0], kfd[0], AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &al), 0);
        cr_expect_eq(KFD_HANDLE_GPU_ID(al.handle), ids[0]);
        av.gpu_id = ids[0];
        cr_assert_eq(kfd_ioctl(ops[0], kfd[0], AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
        cr_expect_eq(av.available, (512u << 20) - 4096, "the iGPU's VRAM, not the other's");

        struct kfd_ioctl_export_dmabuf_args e = { .handle = al.handle, .flags = O_CLOEXEC };
        cr_assert_eq(kfd_ioctl(ops[0], kfd[0], AMDKFD_IOC_EXPORT_DMABUF, &e), 0);
        struct kfd_ioctl_get_dmabuf_info_args info = { .dmabuf_fd = e.dmabuf_fd };
        cr_assert_eq(kfd_ioctl(ops[1], kfd[1], AMDKFD_IOC_GET_DMABUF_INFO, &info), 0);
        cr_expect_eq(info.gpu_id, ids[0], "the exporting GPU's id");
        uint64_t va2 = t_reserve_va(4096);
        struct kfd_ioctl_import_dmabuf_args im = { .va_addr = va2, .gpu_id = ids[1], .dmabuf_fd = e.dmabuf_fd };
        /* From KFD 1.15 another GPU's buffer is imported through DRM as a
         * foreign dma-buf: a GTT BO of this GPU on the same pages. */
        cr_assert_eq(kfd_ioctl(ops[1], kfd[1], AMDKFD_IOC_IMPORT_DMABUF, &im), 0, "another GPU's buffer");
        cr_expect_eq(KFD_HANDLE_GPU_ID(im.handle), ids[1]);
        struct kfd_ioctl_free_memory_of_gpu_args fr = { .handle = im.handle };
        cr_expect_eq(kfd_ioctl(ops[1], kfd[1], AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), 0);
        close((int) e.dmabuf_fd);
        munmap((void *) (uintptr_t) va, 4096);
        munmap((void *) (uintptr_t) va2, 4096);

        for (unsigned i = 0; i < 2; i++)
                cr_expect_eq(sim_device_remove_mm(d, ops[i]), 0);
        sim_device_free(d);
}
