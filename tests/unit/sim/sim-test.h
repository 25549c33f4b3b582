/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the simulated-GPU conformance tests: a context (device,
 * ops, KFD fd, acquired render fd), BO allocation at a reserved VA with GPU
 * and CPU mappings, the event page, SDMA queue creation and submission. They
 * reach the simulator only through the KfdOps table, as the daemon does.
 */
#pragma once

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kfd/kfd-ops.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim.h"

typedef struct TestCtx {
        SimDevice *dev;
        const KfdOps *ops;
        uint32_t gpu_id;
        int kfd;
        int render;
} TestCtx;

typedef struct TestBo {
        uint64_t va;
        uint64_t size;
        uint64_t handle;
        uint64_t mmap_offset;
        void *cpu; /* == (void *) va */
} TestBo;

typedef struct TestQueue {
        TestBo ring, rptr, wptr;
        uint32_t ring_size;
        uint32_t queue_id;
        uint64_t doorbell_offset;
        void *doorbell_page;
        volatile uint64_t *doorbell;
        uint64_t wptr_value;
        const KfdOps *ops; /* to tell the simulator of a doorbell store, as the daemon does */
        int kfd;
} TestQueue;

/* Stores value to the doorbell and tells the simulator (kfd-ops.h). */
static inline void t_ring_doorbell(TestQueue *q, uint64_t value) {
        __atomic_store_n(q->doorbell, value, __ATOMIC_RELEASE);
        if (q->ops && q->ops->doorbell_written)
                q->ops->doorbell_written(q->ops->userdata, q->kfd, q->queue_id);
}

static inline int t_ioctl(TestCtx *c, unsigned long req, void *arg) {
        return kfd_ioctl(c->ops, c->kfd, req, arg);
}

/* Opens a KFD context on dev (creating dev if NULL) and acquires the VM. */
static inline void t_open(TestCtx *c, SimDevice *dev) {
        bool dev_given = dev != NULL;

        memset(c, 0, sizeof *c);
        if (!dev)
                cr_assert_eq(sim_device_new(NULL, &dev), 0);
        c->dev = dev;
        /* A context of its own: the device's own process, or for a second
         * context on a device another simulated process (opens of one
         * process share its primary KFD process, as the kernel's do). */
        if (dev_given)
                cr_assert_eq(sim_device_add_mm(dev, &c->ops), 0);
        else
                c->ops = sim_device_get_ops(dev);
        c->gpu_id = 0x697D;
        c->kfd = c->ops->open_kfd(c->ops->userdata);
        cr_assert_geq(c->kfd, 0);
        c->render = c->ops->open_render(c->ops->userdata, 128);
        cr_assert_geq(c->render, 0);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) c->render, .gpu_id = c->gpu_id };
        cr_assert_eq(t_ioctl(c, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
}

/* A secondary KFD context (AMDKFD_IOC_CREATE_PROCESS) of dev's own process
 * on a fresh KFD fd, with a fresh render fd acquired as its VM (kfd-facts §7.3). */
static inline void t_open_secondary(TestCtx *c, SimDevice *dev) {
        memset(c, 0, sizeof *c);
        c->dev = dev;
        c->ops = sim_device_get_ops(dev);
        c->gpu_id = 0x697D;
        c->kfd = c->ops->open_kfd(c->ops->userdata);
        cr_assert_geq(c->kfd, 0);
        cr_assert_eq(t_ioctl(c, AMDKFD_IOC_CREATE_PROCESS, NULL), 0);
        c->render = c->ops->open_render(c->ops->userdata, 128);
        cr_assert_geq(c->render, 0);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) c->render, .gpu_id = c->gpu_id };
        cr_assert_eq(t_ioctl(c, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
}

/* The same KFD context on the device's GPU at topology index (SimOptions.n_gpus):
 * *ret shares c's KFD fd, with that GPU's render node acquired as the
 * context's VM on it. t_close_gpu() closes just that render fd. */
static inline void t_on_gpu(TestCtx *c, unsigned index, TestCtx *ret) {
        SimGpuStats st;

        cr_assert_eq(sim_device_get_gpu_stats(c->dev, index, &st), 0);
        *ret = *c;
        ret->gpu_id = st.gpu_id;
        ret->render = c->ops->open_render(c->ops->userdata, st.drm_render_minor);
        cr_assert_geq(ret->render, 0);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) ret->render, .gpu_id = ret->gpu_id };
        cr_assert_eq(t_ioctl(ret, AMDKFD_IOC_ACQUIRE_VM, &vm), 0);
}

static inline void t_close_gpu(TestCtx *c) {
        cr_expect_eq(c->ops->close(c->ops->userdata, c->render), 0);
}

static inline void t_close(TestCtx *c, bool free_device) {
        if (c->kfd >= 0)
                cr_expect_eq(c->ops->close(c->ops->userdata, c->kfd), 0);
        if (c->render >= 0)
                cr_expect_eq(c->ops->close(c->ops->userdata, c->render), 0);
        if (free_device)
                sim_device_free(c->dev);
}

/* Reserves a VA range the way the daemon does (PROT_NONE anonymous mapping). */
static inline uint64_t t_reserve_va(uint64_t size) {
        void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        cr_assert_neq(p, MAP_FAILED);
        return (uint64_t) (uintptr_t) p;
}

static inline int t_alloc_raw(TestCtx *c, uint64_t va, uint64_t size, uint32_t flags, TestBo *bo) {
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = va, .size = size, .gpu_id = c->gpu_id, .flags = flags,
        };
        int r = t_ioctl(c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a);
        if (r == 0 && bo)
                *bo = (TestBo) { .va = va, .size = size, .handle = a.handle, .mmap_offset = a.mmap_offset };
        return r;
}

static inline int t_map(TestCtx *c, uint64_t handle) {
        uint32_t ids[1] = { c->gpu_id };
        struct kfd_ioctl_map_memory_to_gpu_args a = {
                .handle = handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };
        return t_ioctl(c, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &a);
}

static inline int t_unmap(TestCtx *c, uint64_t handle) {
        uint32_t ids[1] = { c->gpu_id };
        struct kfd_ioctl_unmap_memory_from_gpu_args a = {
                .handle = handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };
        return t_ioctl(c, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &a);
}

static inline int t_free(TestCtx *c, uint64_t handle) {
        struct kfd_ioctl_free_memory_of_gpu_args a = { .handle = handle };
        return t_ioctl(c, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &a);
}

/* ALLOC at a fresh VA, MAP, and CPU-map through the render node at the same VA. */
static inline TestBo t_bo(TestCtx *c, uint64_t size, uint32_t domain) {
        TestBo bo = {};
        uint64_t va = t_reserve_va(size);
        uint32_t flags = domain | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE |
                         KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        cr_assert_eq(t_alloc_raw(c, va, size, flags, &bo), 0);
        cr_assert_eq(t_map(c, bo.handle), 0);
        void *addr = NULL;
        cr_assert_eq(c->ops->mmap(c->ops->userdata, (void *) (uintptr_t) va, size, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_FIXED, c->render, bo.mmap_offset, &addr), 0);
        cr_assert_eq((uint64_t) (uintptr_t) addr, va);
        bo.cpu = addr;
        return bo;
}

static inline void t_bo_release(TestCtx *c, TestBo *bo) {
        cr_expect_eq(t_unmap(c, bo->handle), 0);
        cr_expect_eq(t_free(c, bo->handle), 0);
        munmap(bo->cpu, bo->size);
}

static inline uint32_t t_event(TestCtx *c, uint32_t type, bool auto_reset, uint64_t page_handle) {
        struct kfd_ioctl_create_event_args a = {
                .event_page_offset = page_handle, .event_type = type, .auto_reset = auto_reset,
        };
        cr_assert_eq(t_ioctl(c, AMDKFD_IOC_CREATE_EVENT, &a), 0);
        return a.event_id;
}

/* The daemon's event page: 32 KiB GTT, registered by the first CREATE_EVENT. */
static inline TestBo t_event_page(TestCtx *c, uint32_t *ret_first_signal_event) {
        TestBo page = t_bo(c, KFD_EVENT_PAGE_SIZE, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t id = t_event(c, KFD_IOC_EVENT_SIGNAL, true, page.handle);
        if (ret_first_signal_event)
                *ret_first_signal_event = id;
        return page;
}

static inline int t_wait(TestCtx *c, struct kfd_event_data *ev, uint32_t n, bool all, uint32_t timeout,
                         uint32_t *ret_result) {
        struct kfd_ioctl_wait_events_args a = {
                .events_ptr = (uint64_t) (uintptr_t) ev, .num_events = n, .wait_for_all = all, .timeout = timeout,
        };
        int r = t_ioctl(c, AMDKFD_IOC_WAIT_EVENTS, &a);
        if (ret_result)
                *ret_result = a.wait_result;
        return r;
}

/* Takes the simulator's record of why a queue stopped (KfdOps.exception_info),
 * waiting up to 10 s for it: no event announces a stop (kfd-facts §7.2). */
static inline int t_take_stop_record(TestCtx *c, uint32_t *ret_qid, char *text, size_t size) {
        int r = -ENOENT;
        for (int i = 0; i < 10000 && (r = c->ops->exception_info(c->ops->userdata, c->kfd, ret_qid, text, size)) == -ENOENT;
             i++)
                usleep(1000);
        return r;
}

static inline uint32_t t_wait1(TestCtx *c, uint32_t id, uint32_t timeout) {
        struct kfd_event_data ev = { .event_id = id };
        uint32_t result = 99;
        int r = t_wait(c, &ev, 1, false, timeout, &result);
        cr_assert(r == 0 || r == -EIO, "WAIT_EVENTS returned %d", r);
        return result;
}

static inline int t_create_sdma_queue_args(TestCtx *c, TestQueue *q, struct kfd_ioctl_create_queue_args *a) {
        *a = (struct kfd_ioctl_create_queue_args) {
                .ring_base_address = q->ring.va,
                .write_pointer_address = q->wptr.va,
                .read_pointer_address = q->rptr.va,
                .ring_size = q->ring_size,
                .gpu_id = c->gpu_id,
                .queue_type = KFD_IOC_QUEUE_TYPE_SDMA,
                .queue_percentage = 100,
                .queue_priority = 7,
        };
        return t_ioctl(c, AMDKFD_IOC_CREATE_QUEUE, a);
}

/* An SDMA queue as the daemon builds it; maps the doorbell slice. */
static inline void t_sdma_queue(TestCtx *c, TestQueue *q, uint32_t ring_size) {
        struct kfd_ioctl_create_queue_args a;
        memset(q, 0, sizeof *q);
        q->ring_size = ring_size;
        q->ring = t_bo(c, ring_size, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q->rptr = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q->wptr = t_bo(c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cr_assert_eq(t_create_sdma_queue_args(c, q, &a), 0);
        q->queue_id = a.queue_id;
        q->ops = c->ops;
        q->kfd = c->kfd;
        q->doorbell_offset = a.doorbell_offset;
        cr_assert_eq(c->ops->mmap(c->ops->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE,
                                  MAP_SHARED, c->kfd, a.doorbell_offset & ~0x1FFFull, &q->doorbell_page), 0);
        q->doorbell = (volatile uint64_t *) ((char *) q->doorbell_page + (a.doorbell_offset & 0x1FFF));
}

static inline void t_queue_release(TestCtx *c, TestQueue *q) {
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = q->queue_id };
        cr_expect_eq(t_ioctl(c, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
        c->ops->munmap(c->ops->userdata, q->doorbell_page, KFD_DOORBELL_SLICE_SIZE);
        t_bo_release(c, &q->ring);
        t_bo_release(c, &q->rptr);
        t_bo_release(c, &q->wptr);
}

/* Writes dwords at the queue's wptr (wrapping), stores wptr, rings the doorbell. */
static inline void t_submit(TestQueue *q, const uint32_t *dw, size_t n) {
        uint32_t *ring = q->ring.cpu;
        uint64_t mask = q->ring_size / 4 - 1;
        for (size_t i = 0; i < n; i++)
                ring[(q->wptr_value / 4 + i) & mask] = dw[i];
        q->wptr_value += n * 4;
        __atomic_store_n((uint64_t *) q->wptr.cpu, q->wptr_value, __ATOMIC_RELEASE);
        t_ring_doorbell(q, q->wptr_value);
}

static inline uint64_t t_rptr(TestQueue *q) {
        return __atomic_load_n((uint64_t *) q->rptr.cpu, __ATOMIC_ACQUIRE);
}

/* Hand-written SDMA 5 packets (kfd-facts §3.2), independent of daemon/gpu's builders. */
#define LO(x) ((uint32_t) (uint64_t) (x))
#define HI(x) ((uint32_t) ((uint64_t) (x) >> 32))
#define PKT_COPY(dst, src, bytes) 0x00000001u, (uint32_t) ((bytes) - 1), 0u, LO(src), HI(src), LO(dst), HI(dst)
#define PKT_FILL_DW(dst, data, bytes) 0x8000000Bu, LO(dst), HI(dst), (uint32_t) (data), (uint32_t) ((bytes) - 1)
#define PKT_FENCE(addr, data) (0x00000005u | (3u << 16)), LO(addr), HI(addr), (uint32_t) (data)
#define PKT_TRAP(ctx) 0x00000006u, (uint32_t) (ctx)
#define PKT_POLL_GE(addr, value) (0x00000008u | (5u << 28) | (1u << 31)), LO(addr), HI(addr), (uint32_t) (value), 0xFFFFFFFFu, (4u | (0xFFFu << 16))
#define PKT_TIMESTAMP(addr) 0x0000020Du, LO(addr), HI(addr)

/* FENCE(event slot, id) + TRAP(id): how the daemon signals completion. */
#define PKT_SIGNAL(page_va, id) PKT_FENCE((page_va) + 8ull * (id), (id)), PKT_TRAP(id)

/* ---- The engine thread's CPU priority ---- */

/* Threads of this process at CPU priority nice (/proc/self/task/N/stat, field 19). */
static inline unsigned t_threads_at_nice(int nice) {
        DIR *dir = opendir("/proc/self/task");
        struct dirent *de;
        unsigned n = 0;

        cr_assert(dir);
        while ((de = readdir(dir))) {
                char path[300], buf[512], *p;
                int field = 2, value = 0;
                FILE *f;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "/proc/self/task/%s/stat", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue; /* gone meanwhile */
                p = fgets(buf, sizeof buf, f) ? strrchr(buf, ')') : NULL;
                fclose(f);
                /* after the name: " state(3) ppid(4) ... nice(19)" */
                for (p = p ? p + 1 : NULL; p && *p && field < 19; p++)
                        if (*p == ' ' && p[1] != ' ')
                                field++;
                if (p && field == 19 && sscanf(p, "%d", &value) == 1 && value == nice)
                        n++;
        }
        closedir(dir);
        return n;
}

static inline void *t_can_raise_priority_thread(void *userdata) {
        pid_t tid = (pid_t) syscall(SYS_gettid);
        int base = *(int *) userdata;

        if (setpriority(PRIO_PROCESS, (id_t) tid, base + 1) < 0)
                return NULL;
        return setpriority(PRIO_PROCESS, (id_t) tid, base) == 0 ? userdata : NULL;
}

/* Whether this process may raise a thread's priority back (CAP_SYS_NICE or
 * an RLIMIT_NICE that allows it), as the engines do (sim-engine.c). */
static inline bool t_can_raise_priority(int base) {
        pthread_t probe;
        void *ok = NULL;

        cr_assert_eq(pthread_create(&probe, NULL, t_can_raise_priority_thread, &base), 0);
        cr_assert_eq(pthread_join(probe, &ok), 0);
        return ok != NULL;
}

/* Waits (at most 10 s, in 1 ms steps) until want threads are at nice; the
 * count then. */
static inline unsigned t_wait_threads_at_nice(int nice, unsigned want) {
        unsigned n = t_threads_at_nice(nice);

        for (int i = 0; i < 10000 && n != want; i++) {
                usleep(1000);
                n = t_threads_at_nice(nice);
        }
        return n;
}
