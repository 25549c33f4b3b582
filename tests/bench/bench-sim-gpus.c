/* SPDX-License-Identifier: MIT */
/*
 * What the extra GPUs of a simulated device (SimOptions.n_gpus) cost the host
 * when nothing runs (issue 33 item 3): for N = 1, 2 and 8 GPUs, a device with
 * no daemon is left alone for a while, first with no queue, then with one
 * idle SDMA queue per GPU (what a daemon that served each GPU once keeps);
 * the process's CPU time and its threads' context switches (each one a
 * wake-up of a sleeping thread) are counted over that time. Printed per
 * second and as a ratio against N = 1 measured in the same run.
 *
 *   bench-sim-gpus [seconds per measurement, default 2]
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kfd/kfd-ops.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim.h"

typedef struct Sample {
        double cpu_s;
        unsigned long long switches;
        unsigned threads;
} Sample;

static double clock_s(clockid_t id) {
        struct timespec ts;

        clock_gettime(id, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Context switches of every thread of this process, and how many threads. */
static Sample sample(void) {
        Sample s = { .cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) };
        DIR *dir = opendir("/proc/self/task");
        struct dirent *de;

        while (dir && (de = readdir(dir))) {
                char path[300], line[256];
                unsigned long long v;
                FILE *f;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "/proc/self/task/%s/status", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                s.threads++;
                while (fgets(line, sizeof line, f))
                        if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
                            sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)
                                s.switches += v;
                fclose(f);
        }
        if (dir)
                closedir(dir);
        return s;
}

/* One SDMA queue on the GPU at index, as the daemon makes it, then idle. */
static int idle_queue(SimDevice *d, const KfdOps *ops, int kfd, unsigned index) {
        struct kfd_ioctl_acquire_vm_args vm;
        struct kfd_ioctl_create_queue_args q;
        uint64_t va[3];
        SimGpuStats st;
        int render, r;

        r = sim_device_get_gpu_stats(d, index, &st);
        if (r < 0)
                return r;
        render = ops->open_render(ops->userdata, st.drm_render_minor);
        if (render < 0)
                return render;
        vm = (struct kfd_ioctl_acquire_vm_args) { .drm_fd = (uint32_t) render, .gpu_id = st.gpu_id };
        r = kfd_ioctl(ops, kfd, AMDKFD_IOC_ACQUIRE_VM, &vm);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < 3; i++) {
                void *m = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
                uint32_t ids[1] = { st.gpu_id };
                struct kfd_ioctl_alloc_memory_of_gpu_args al = {
                        .va_addr = (uint64_t) (uintptr_t) m, .size = 4096, .gpu_id = st.gpu_id,
                        .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE };
                if (m == MAP_FAILED)
                        return -ENOMEM;
                r = kfd_ioctl(ops, kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &al);
                if (r < 0)
                        return r;
                struct kfd_ioctl_map_memory_to_gpu_args map = {
                        .handle = al.handle, .device_ids_array_ptr = (uint64_t) (uintptr_t) ids, .n_devices = 1 };
                r = kfd_ioctl(ops, kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &map);
                if (r < 0)
                        return r;
                va[i] = al.va_addr;
        }
        q = (struct kfd_ioctl_create_queue_args) {
                .ring_base_address = va[0], .read_pointer_address = va[1], .write_pointer_address = va[2],
                .ring_size = 4096, .gpu_id = st.gpu_id, .queue_type = KFD_IOC_QUEUE_TYPE_SDMA,
                .queue_percentage = 100, .queue_priority = 7,
        };
        return kfd_ioctl(ops, kfd, AMDKFD_IOC_CREATE_QUEUE, &q);
}

typedef struct Result {
        double cpu_ms_per_s, wakeups_per_s;
        unsigned threads;
} Result;

static int measure(unsigned n_gpus, bool queues, double seconds, Result *ret) {
        SimOptions o = { .n_gpus = n_gpus, .isa_helpers = -1 };
        SimDevice *d = NULL;
        const KfdOps *ops;
        Sample a, b;
        int kfd = -1, r;

        r = sim_device_new(&o, &d);
        if (r < 0)
                return r;
        ops = sim_device_get_ops(d);
        if (queues) {
                kfd = ops->open_kfd(ops->userdata);
                if (kfd < 0) {
                        sim_device_free(d);
                        return kfd;
                }
                for (unsigned i = 0; i < n_gpus; i++) {
                        r = idle_queue(d, ops, kfd, i);
                        if (r < 0) {
                                sim_device_free(d);
                                return r;
                        }
                }
        }
        usleep(100000); /* the threads settle */
        a = sample();
        usleep((useconds_t) (seconds * 1e6));
        b = sample();
        sim_device_free(d);
        *ret = (Result) { .cpu_ms_per_s = (b.cpu_s - a.cpu_s) * 1e3 / seconds,
                          .wakeups_per_s = (double) (b.switches - a.switches) / seconds,
                          .threads = b.threads };
        return 0;
}

static void ratio(char *buf, size_t size, double x, double base) {
        if (base > 0)
                snprintf(buf, size, "%.2fx", x / base);
        else
                snprintf(buf, size, "%s", x > 0 ? "inf" : "=");
}

int main(int argc, char **argv) {
        double seconds = argc > 1 ? atof(argv[1]) : 2.0;
        static const unsigned ns[] = { 1, 2, 8 };

        if (seconds <= 0) {
                fprintf(stderr, "usage: bench-sim-gpus [seconds > 0]\n");
                return 2;
        }
        printf("simulated device left idle %.1f s per line (no daemon, no ISA helpers)\n", seconds);
        printf("%-8s %-22s %8s %12s %10s %12s %10s\n", "GPUs", "state", "threads", "wake-ups/s", "ratio",
               "CPU ms/s", "ratio");
        for (int queues = 0; queues <= 1; queues++) {
                Result base = {};
                for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
                        Result res;
                        char rw[16], rc[16];
                        int r = measure(ns[i], queues, seconds, &res);
                        if (r < 0) {
                                fprintf(stderr, "bench-sim-gpus: %u GPUs: %s\n", ns[i], strerror(-r));
                                return 1;
                        }
                        if (i == 0)
                                base = res;
                        ratio(rw, sizeof rw, res.wakeups_per_s, base.wakeups_per_s);
                        ratio(rc, sizeof rc, res.cpu_ms_per_s, base.cpu_ms_per_s);
                        printf("%-8u %-22s %8u %12.1f %10s %12.3f %10s\n", ns[i],
                               queues ? "1 idle SDMA queue/GPU" : "no queue", res.threads, res.wakeups_per_s, rw,
                               res.cpu_ms_per_s, rc);
                }
        }
        return 0;
}
