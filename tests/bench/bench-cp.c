/* SPDX-License-Identifier: MIT */
/*
 * Interpreter throughput through the simulated GPU's compute (CP) path: each
 * corpus kernel (vector add, Collatz loop, tiled matrix multiply) is run once
 * directly on the interpreter (sim_isa_dispatch(), the baseline, which also
 * counts the lane-instructions) and once as the daemon runs it: PM4 written
 * to a compute queue of the simulated device, the doorbell rung, completion
 * awaited with WAIT_EVENTS on a RELEASE_MEM interrupt. Prints lane-
 * instructions per second for both and the CP path's ratio to the direct one
 * measured in the same run. Usage: bench-cp [scale] (default 1).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kfd/kfd-ops.h"
#include "kfd/kfd-uapi.h"
#include "pm4-emit.h"
#include "sim/sim.h"

#define CHECK(expr)                                                                         \
        do {                                                                                \
                int _r = (expr);                                                            \
                if (_r < 0) {                                                               \
                        fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, strerror(-_r)); \
                        exit(1);                                                            \
                }                                                                           \
        } while (0)

typedef struct Bo {
        uint64_t va, size;
        void *cpu;
} Bo;

typedef struct Dev {
        SimDevice *sim;
        const KfdOps *ops;
        int kfd, render;
        uint32_t gpu_id;
} Dev;

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU time of every thread of this process (the CP engine's and the pool's
 * helpers' too: CLOCK_PROCESS_CPUTIME_ID sums their CLOCK_THREAD_CPUTIME_ID). */
static double cpu_now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int dev_ioctl(Dev *d, unsigned long req, void *arg) {
        return kfd_ioctl(d->ops, d->kfd, req, arg);
}

static Bo bo_new(Dev *d, uint64_t size, uint32_t domain) {
        void *va = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        uint32_t ids[1] = { d->gpu_id };
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = (uint64_t) (uintptr_t) va, .size = size, .gpu_id = d->gpu_id,
                .flags = domain | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE |
                         KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
        };
        void *cpu;

        if (va == MAP_FAILED)
                exit(1);
        CHECK(dev_ioctl(d, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a));
        struct kfd_ioctl_map_memory_to_gpu_args m = {
                .handle = a.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
        };
        CHECK(dev_ioctl(d, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m));
        CHECK(d->ops->mmap(d->ops->userdata, va, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, d->render,
                           a.mmap_offset, &cpu));
        return (Bo) { .va = a.va_addr, .size = size, .cpu = cpu };
}

/* The compute queue sizes the daemon reads from the topology (kfd-facts §1.6.3). */
static void topology(Dev *d, uint32_t *cwsr, uint32_t *ctl, uint64_t *cwsr_bo) {
        char path[4096], name[64];
        unsigned long long v, simd = 0, per_cu = 0;
        snprintf(path, sizeof path, "%s/topology/nodes/1/properties", d->ops->sysfs_root);
        FILE *f = fopen(path, "re");
        if (!f)
                exit(1);
        while (fscanf(f, "%63s %llu", name, &v) == 2) {
                if (!strcmp(name, "cwsr_size"))
                        *cwsr = (uint32_t) v;
                else if (!strcmp(name, "ctl_stack_size"))
                        *ctl = (uint32_t) v;
                else if (!strcmp(name, "simd_count"))
                        simd = v;
                else if (!strcmp(name, "simd_per_cu"))
                        per_cu = v;
        }
        fclose(f);
        *cwsr_bo = (*cwsr + ((simd / per_cu) * 32 * 32 + 63) / 64 * 64 + 4095) & ~4095ull;
}

typedef struct Queue {
        Bo ring, rptr, wptr, eop, cwsr, page;   /* page: the event page (va only) */
        uint32_t event;
        volatile uint64_t *doorbell;
        uint32_t queue_id;
        uint64_t wptr_dw;
} Queue;

static void queue_new(Dev *d, Queue *q) {
        uint32_t cwsr = 0, ctl = 0;
        uint64_t cwsr_bo;
        void *db;

        topology(d, &cwsr, &ctl, &cwsr_bo);
        q->ring = bo_new(d, 65536, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q->rptr = bo_new(d, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q->wptr = bo_new(d, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q->eop = bo_new(d, 4096, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        q->cwsr = bo_new(d, cwsr_bo, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        struct kfd_ioctl_create_queue_args a = {
                .ring_base_address = q->ring.va, .write_pointer_address = q->wptr.va,
                .read_pointer_address = q->rptr.va, .ring_size = 65536, .gpu_id = d->gpu_id,
                .queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE, .queue_percentage = 100, .queue_priority = 7,
                .eop_buffer_address = q->eop.va, .eop_buffer_size = 4096, .ctx_save_restore_address = q->cwsr.va,
                .ctx_save_restore_size = cwsr, .ctl_stack_size = ctl,
        };
        CHECK(dev_ioctl(d, AMDKFD_IOC_CREATE_QUEUE, &a));
        CHECK(d->ops->mmap(d->ops->userdata, NULL, KFD_DOORBELL_SLICE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, d->kfd,
                           a.doorbell_offset & ~0x1FFFull, &db));
        q->doorbell = (volatile uint64_t *) ((char *) db + (a.doorbell_offset & 0x1FFF));
        q->queue_id = a.queue_id;
}

static void submit_and_wait(Dev *d, Queue *q, Pm4 *p) {
        uint32_t *ring = q->ring.cpu;
        pm4_signal(p, q->page.va, q->event);
        for (size_t i = 0; i < p->n; i++)
                ring[(q->wptr_dw + i) & (65536 / 4 - 1)] = p->dw[i];
        q->wptr_dw += p->n;
        p->n = 0;
        __atomic_store_n((uint64_t *) q->wptr.cpu, q->wptr_dw, __ATOMIC_RELEASE);
        __atomic_store_n(q->doorbell, q->wptr_dw, __ATOMIC_RELEASE);
        if (d->ops->doorbell_written) /* as the daemon tells the simulator (kfd-ops.h) */
                d->ops->doorbell_written(d->ops->userdata, d->kfd, q->queue_id);
        struct kfd_event_data ev = { .event_id = q->event };
        struct kfd_ioctl_wait_events_args w = {
                .events_ptr = (uint64_t) (uintptr_t) &ev, .num_events = 1, .timeout = 600000,
        };
        CHECK(dev_ioctl(d, AMDKFD_IOC_WAIT_EVENTS, &w));
        /* The CP writes back a 32-bit dword position inside the ring, per
         * 64-dword block (kfd-facts §7.7), not a growing count. */
        uint32_t rptr = __atomic_load_n((uint32_t *) q->rptr.cpu, __ATOMIC_ACQUIRE);
        uint32_t want = (uint32_t) ((q->wptr_dw & ~63ull) % (65536 / 4));
        if (w.wait_result != KFD_IOC_WAIT_RESULT_COMPLETE || rptr != want) {
                fprintf(stderr, "the dispatch did not complete (wait result %u, rptr %u, expected %u)\n",
                        w.wait_result, rptr, want);
                exit(1);
        }
}

typedef struct Run {
        const char *file, *name;
        double direct_s, cp_s, direct_cpu, cp_cpu;
        uint64_t lanes;
} Run;

/* Arguments and grid for a kernel at a scale, in memory placed by put(). */
static void setup(const char *name, unsigned scale, IsaArgs *a, uint32_t grid[3], uint32_t wg[3], uint64_t va[3],
                  void *host[3], uint64_t *bytes) {
        grid[0] = grid[1] = grid[2] = wg[0] = wg[1] = wg[2] = 1;
        if (!strcmp(name, "matmul_tiled")) {
                uint32_t n = 64 * scale;
                *bytes = 4ull * n * n;
                for (uint32_t i = 0; i < n * n; i++)
                        ((float *) host[0])[i] = (float) (i % 17), ((float *) host[1])[i] = (float) (i % 13);
                isa_args_u64(a, va[0]), isa_args_u64(a, va[1]), isa_args_u64(a, va[2]);
                isa_args_u32(a, n), isa_args_u32(a, n), isa_args_u32(a, n);
                grid[0] = grid[1] = n / 16, wg[0] = wg[1] = 16;
        } else {
                uint32_t n = 65536 * scale;
                *bytes = 4ull * n;
                for (uint32_t i = 0; i < n; i++)
                        ((uint32_t *) host[0])[i] = i + 1;
                isa_args_u64(a, va[0]), isa_args_u64(a, va[1]);
                if (!strcmp(name, "vector_add"))
                        isa_args_u64(a, va[2]);
                isa_args_u32(a, n);
                grid[0] = n / 256, wg[0] = 256;
        }
}

static void bench(Dev *d, Queue *q, unsigned scale, Run *run) {
        IsaMem m;
        IsaKernel k;
        SimIsaResult res;
        uint32_t grid[3], wg[3];
        uint64_t bytes = 0, va[3];
        void *host[3];
        IsaArgs a = { 0 };

        /* Direct: the interpreter on malloc'd memory (isa-helper). */
        isa_mem_init(&m);
        CHECK(isa_kernel_load(&m, isa_kernel_path(run->file), run->name, &k));
        uint64_t size = 4ull * 65536 * scale * 2 + 4ull * 64 * scale * 64 * scale;
        for (unsigned i = 0; i < 3; i++)
                va[i] = isa_mem_alloc(&m, size, &host[i]);
        setup(run->name, scale, &a, grid, wg, va, host, &bytes);
        double c0 = cpu_now(), t0 = now();
        CHECK(isa_launch(&m, &k, grid, wg, &a, 0, &res));
        run->direct_s = now() - t0;
        run->direct_cpu = cpu_now() - c0;
        run->lanes = res.lane_instructions;
        IsaRegion image = m.regions[0];

        /* Through the CP: the same code object, arguments and grid in GPU BOs. */
        Bo code = bo_new(d, (image.size + 4095) & ~4095ull, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memcpy(code.cpu, image.host, image.size);
        k.kd_va = code.va + (k.kd_va - image.va);
        k.entry_va = code.va + (k.entry_va - image.va);
        Bo buf[3];
        for (unsigned i = 0; i < 3; i++) {
                buf[i] = bo_new(d, size, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                va[i] = buf[i].va;
                host[i] = buf[i].cpu;
        }
        IsaArgs b = { 0 };
        setup(run->name, scale, &b, grid, wg, va, host, &bytes);
        Bo args = bo_new(d, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memcpy(args.cpu, b.bytes, b.size);
        CpLaunch l = { .grid = { grid[0], grid[1], grid[2] }, .wg = { wg[0], wg[1], wg[2] } };
        l.kernarg_va = args.va;
        l.packet_va = args.va + 4096;
        uint8_t *pkt = (uint8_t *) args.cpu + 4096;
        uint16_t setup_dims = wg[1] > 1 || grid[1] > 1 ? 2 : 1, wgs[3] = { (uint16_t) wg[0], (uint16_t) wg[1], (uint16_t) wg[2] };
        uint32_t gsize[3] = { grid[0] * wg[0], grid[1] * wg[1], grid[2] * wg[2] };
        memcpy(pkt + 2, &setup_dims, 2);
        memcpy(pkt + 4, wgs, 6);
        memcpy(pkt + 12, gsize, 12);
        memcpy(pkt + 32, &k.kd_va, 8);
        memcpy(pkt + 40, &l.kernarg_va, 8);
        Pm4 *p = calloc(1, sizeof *p);
        if (!p)
                exit(1);
        pm4_dispatch(p, &k, &l);
        c0 = cpu_now(), t0 = now();
        submit_and_wait(d, q, p);
        run->cp_s = now() - t0;
        run->cp_cpu = cpu_now() - c0;
        free(p);
        isa_mem_fini(&m);
}

int main(int argc, char **argv) {
        unsigned scale = argc > 1 ? (unsigned) atoi(argv[1]) : 1;
        Run runs[] = {
                { "vector-add.hsaco", "vector_add" },
                { "collatz.hsaco", "collatz" },
                { "matmul-tiled.hsaco", "matmul_tiled" },
        };
        Dev d = { .gpu_id = 0x697D };
        Queue q = { 0 };

        if (scale == 0)
                scale = 1;
        CHECK(sim_device_new(NULL, &d.sim));
        d.ops = sim_device_get_ops(d.sim);
        d.kfd = d.ops->open_kfd(d.ops->userdata);
        CHECK(d.kfd);
        d.render = d.ops->open_render(d.ops->userdata, 128);
        CHECK(d.render);
        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) d.render, .gpu_id = d.gpu_id };
        CHECK(dev_ioctl(&d, AMDKFD_IOC_ACQUIRE_VM, &vm));
        queue_new(&d, &q);
        /* The event page: the first CREATE_EVENT registers it by handle. */
        {
                void *va = mmap(NULL, KFD_EVENT_PAGE_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                uint32_t ids[1] = { d.gpu_id };
                struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                        .va_addr = (uint64_t) (uintptr_t) va, .size = KFD_EVENT_PAGE_SIZE, .gpu_id = d.gpu_id,
                        .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
                };
                CHECK(dev_ioctl(&d, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a));
                struct kfd_ioctl_map_memory_to_gpu_args mm = {
                        .handle = a.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1,
                };
                CHECK(dev_ioctl(&d, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mm));
                struct kfd_ioctl_create_event_args e = {
                        .event_page_offset = a.handle, .event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1,
                };
                CHECK(dev_ioctl(&d, AMDKFD_IOC_CREATE_EVENT, &e));
                q.page.va = a.va_addr;
                q.event = e.event_id;
        }

        for (unsigned i = 0; i < sizeof runs / sizeof runs[0]; i++) {
                bench(&d, &q, scale, &runs[i]);
                double direct = runs[i].lanes / runs[i].direct_s, cp = runs[i].lanes / runs[i].cp_s;
                printf("%-14s %12llu lane-instr  direct %8.3f s %8.2f M/s  CP path %8.3f s %8.2f M lane-instr/s (x%.2f of direct)\n",
                       runs[i].name, (unsigned long long) runs[i].lanes, runs[i].direct_s, direct / 1e6, runs[i].cp_s,
                       cp / 1e6, cp / direct);
                printf("%-14s direct %8.3f CPU-s, CP path %8.3f CPU-s: x%.2f work per CPU-second of direct, "
                       "x%.2f by the clock with %u helpers + the CP\n",
                       runs[i].name, runs[i].direct_cpu, runs[i].cp_cpu, runs[i].direct_cpu / runs[i].cp_cpu,
                       runs[i].direct_s / runs[i].cp_s, sim_isa_default_helpers());
        }
        d.ops->close(d.ops->userdata, d.kfd);
        d.ops->close(d.ops->userdata, d.render);
        sim_device_free(d.sim);
        return 0;
}
