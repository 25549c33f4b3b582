/* SPDX-License-Identifier: MIT */
/*
 * GpuVaWindow: the client address window of one GPU context — the range its
 * buffers, code objects, rings, kernel arguments and fences get their
 * addresses from (CPU VA == GPU VA, gpu-buffer.c). Owned by the context.
 *
 * Why: a kernel sees the GPU addresses of everything it is given (kernel
 * arguments, the dispatch packet, its own pc), and a fault names one. Were
 * they chosen by mmap(NULL), they would be addresses of the daemon's (or a
 * worker's) address space as the kernel's mmap randomisation placed it: an
 * ASLR leak to every client. So every process that runs GPU contexts (the
 * daemon, each worker) reserves one fixed region at start, the same address
 * in each, whatever ASLR does, and contexts take their addresses there:
 *
 *   GPU_VA_REGION_BASE 0x120000000000 .. GPU_VA_REGION_END 0x1e0000000000
 *     [0x120000000000, 0x160000000000)   4 TiB: the daemon's device
 *                                        contexts, one window each: 4 TiB /
 *                                        the GPUs it serves
 *                                        (gpu_va_set_device_windows()); the
 *                                        whole of it for the process's
 *                                        primary context otherwise
 *     [0x160000000000, 0x1e0000000000)   8 TiB: client contexts, one slot
 *                                        each (secondary contexts of the
 *                                        daemon; a worker's one context takes
 *                                        the first slot of its own process:
 *                                        GPU_CONTEXT_CLIENT); 128 slots of
 *                                        64 GiB unless more are needed
 *                                        (gpu_va_set_client_slots())
 *
 * The region lies inside the GPUVM aperture KFD gives a process on gfx9 and
 * later (SVM_USER_BASE .. gpuvm_size-1, 2^47-1 on gfx10: kfd_flat_memory.c
 * kfd_init_apertures_v9; the simulator reports the same), and each context
 * checks its slot against the aperture GET_PROCESS_APERTURES_NEW reports. It
 * is clear of what shares an x86-64 process: ASan's shadow (HighShadow ends at
 * 0x10007fff7fff) and its allocator (kAllocatorSpace 0x600000000000, 4 TiB;
 * compiler-rt asan_allocator.h), the arena Criterion's BoxFort maps at a
 * random address in [0x200000000000, 0x600000000000) in test programs
 * (BoxFort arena.c: mmap_base + rand & mmap_off_mask times mmap_off), PIE
 * executables (0x55..–0x56..), and the mmap area (top down from below the
 * stack; bottom up from 0x2aaaaaaab000 under an unlimited stack) and stack
 * below 0x7fffffffffff. It is reserved before main() runs (a
 * constructor; gpu_va_region_reserve() again at start, to report) with
 * mmap(MAP_FIXED_NOREPLACE, PROT_NONE, MAP_NORESERVE): no memory, no commit
 * charge; if anything is mapped there already the reservation fails with
 * EEXIST and no context can be made (gpu_va_region_reserve()).
 *
 * Inside a window the allocator is first fit over a sorted list of free
 * ranges. A range given back gets its PROT_NONE placeholder again by an
 * mmap(MAP_FIXED) over it, which also ends the buffer's mapping there in the
 * same system call: the hole is never open for another mmap(NULL) of the
 * process to land in.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "gpu/gpu-internal.h"
#include "util/log.h"
#include "util/macro.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17 (include/uapi/asm-generic/mman-common.h) */
#endif

#define GPU_VA_PRIMARY_SIZE (GPU_VA_CLIENT_BASE - GPU_VA_REGION_BASE)
#define GPU_VA_CLIENT_SIZE (GPU_VA_REGION_END - GPU_VA_CLIENT_BASE)
#define GPU_VA_DEFAULT_CLIENT_SLOTS 128u
#define GPU_VA_MAX_CLIENT_SLOTS 16384u
/* Buffers of 2 MiB or more start on a 2 MiB boundary: the GPU's page tables
 * can then use its big fragments (amdgpu_vm_pt fragment sizes), as libhsakmt's
 * aperture allocator aligns them. */
#define GPU_VA_BIG_ALIGN (2ULL << 20)

struct GpuVaRange {
        uint64_t start, end;
        GpuVaRange *next;
};

static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;
static bool region_reserved;
static unsigned n_device_windows = 1;
static bool device_taken[GPU_VA_MAX_DEVICE_WINDOWS];
static unsigned n_client_slots = GPU_VA_DEFAULT_CLIENT_SLOTS;
static uint8_t *client_slot_taken; /* n_client_slots entries while any is taken */
static unsigned n_client_taken;

static int placeholder(uint64_t va, uint64_t size, int fixed) {
        void *p = mmap((void *) (uintptr_t) va, size, PROT_NONE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | fixed, -1, 0);
        if (p == MAP_FAILED)
                return -errno;
        if (p != (void *) (uintptr_t) va) {
                /* A kernel older than 4.17 takes the flag for a hint. */
                munmap(p, size);
                return -EEXIST;
        }
        return 0;
}

static int region_reserve_locked(void) {
        int r;

        if (region_reserved)
                return 0;
        r = placeholder(GPU_VA_REGION_BASE, GPU_VA_REGION_END - GPU_VA_REGION_BASE, MAP_FIXED_NOREPLACE);
        if (r < 0)
                return r;
        region_reserved = true;
        return 0;
}

int gpu_va_region_reserve(void) {
        pthread_mutex_lock(&region_lock);
        int r = region_reserve_locked();
        pthread_mutex_unlock(&region_lock);
        return r;
}

/* As early as the process can: before main() starts threads or maps anything
 * at an address of its own choosing (a test runner's arena, say). A failure
 * is reported by the next gpu_va_region_reserve(), which tries again. */
static void __attribute__((constructor)) region_reserve_at_start(void) {
        (void) gpu_va_region_reserve();
}

int gpu_va_set_client_slots(unsigned n) {
        unsigned slots = GPU_VA_DEFAULT_CLIENT_SLOTS;
        int r = 0;

        if (n > GPU_VA_MAX_CLIENT_SLOTS)
                return -EINVAL;
        while (slots < n)
                slots *= 2;
        pthread_mutex_lock(&region_lock);
        if (client_slot_taken && slots != n_client_slots)
                r = -EBUSY; /* slots are in use at the old size */
        else
                n_client_slots = slots;
        pthread_mutex_unlock(&region_lock);
        return r;
}

uint64_t gpu_va_client_slot_size(void) {
        return GPU_VA_CLIENT_SIZE / n_client_slots;
}

int gpu_va_set_device_windows(unsigned n) {
        int r = 0;

        if (n == 0 || n > GPU_VA_MAX_DEVICE_WINDOWS)
                return -EINVAL;
        pthread_mutex_lock(&region_lock);
        for (unsigned i = 0; i < GPU_VA_MAX_DEVICE_WINDOWS; i++)
                if (device_taken[i] && n != n_device_windows)
                        r = -EBUSY; /* windows are in use at the old size */
        if (r == 0)
                n_device_windows = n;
        pthread_mutex_unlock(&region_lock);
        return r;
}

uint64_t gpu_va_device_window_size(void) {
        return GPU_VA_PRIMARY_SIZE / n_device_windows;
}

static void window_free_ranges(GpuVaWindow *w) {
        while (w->free) {
                GpuVaRange *x = w->free;
                w->free = x->next;
                free(x);
        }
}

/* Takes a slot of the region: device window `device` for a device context
 * while it is free, else a client slot. */
static int take_slot(GpuVaWindow *w, int device) {
        if (device >= 0 && (unsigned) device < n_device_windows && !device_taken[device]) {
                uint64_t size = GPU_VA_PRIMARY_SIZE / n_device_windows;
                device_taken[device] = true;
                *w = (GpuVaWindow) { .base = GPU_VA_REGION_BASE + (uint64_t) device * size, .size = size,
                                     .slot = -1 - device };
                return 0;
        }
        if (!client_slot_taken) {
                client_slot_taken = calloc(n_client_slots, 1);
                if (!client_slot_taken)
                        return -ENOMEM;
        }
        uint64_t slot_size = GPU_VA_CLIENT_SIZE / n_client_slots;
        for (unsigned i = 0; i < n_client_slots; i++)
                if (!client_slot_taken[i]) {
                        client_slot_taken[i] = 1;
                        n_client_taken++;
                        *w = (GpuVaWindow) { .base = GPU_VA_CLIENT_BASE + i * slot_size, .size = slot_size,
                                             .slot = (int) i };
                        return 0;
                }
        return -ENOSPC;
}

static void give_slot(GpuVaWindow *w) {
        if (w->slot < 0 && -1 - w->slot < (int) GPU_VA_MAX_DEVICE_WINDOWS)
                device_taken[-1 - w->slot] = false;
        else if (client_slot_taken && (unsigned) w->slot < n_client_slots && client_slot_taken[w->slot]) {
                client_slot_taken[w->slot] = 0;
                if (--n_client_taken == 0) {
                        /* None in use: the slot size may change again. */
                        free(client_slot_taken);
                        client_slot_taken = NULL;
                }
        }
}

int gpu_va_window_open(GpuVaWindow *w, int device, uint64_t gpuvm_base, uint64_t gpuvm_limit) {
        GpuVaRange *all;
        int r;

        pthread_mutex_lock(&region_lock);
        r = region_reserve_locked();
        if (r >= 0)
                r = take_slot(w, device);
        pthread_mutex_unlock(&region_lock);
        if (r < 0)
                return r;
        w->open = true;

        /* The whole slot must be GPU addressable in this process's VM. */
        if (gpuvm_limit < gpuvm_base || w->base < gpuvm_base || w->base + w->size - 1 > gpuvm_limit)
                return -EADDRNOTAVAIL;
        all = malloc(sizeof *all);
        if (!all)
                return -ENOMEM;
        *all = (GpuVaRange) { .start = w->base, .end = w->base + w->size };
        w->free = all;
        return 0;
}

void gpu_va_window_close(GpuVaWindow *w) {
        if (!w->open)
                return;
        window_free_ranges(w);
        pthread_mutex_lock(&region_lock);
        give_slot(w);
        pthread_mutex_unlock(&region_lock);
        w->open = false;
}

int gpu_va_alloc(GpuVaWindow *w, uint64_t size, uint64_t *ret) {
        uint64_t align = size >= GPU_VA_BIG_ALIGN ? GPU_VA_BIG_ALIGN : PAGE_SIZE_4K;

        if (!w->open || size == 0 || size % PAGE_SIZE_4K != 0)
                return -EINVAL;
        for (GpuVaRange **x = &w->free; *x; x = &(*x)->next) {
                GpuVaRange *f = *x;
                uint64_t start = align_up_u64(f->start, align);

                if (start < f->start || start >= f->end || f->end - start < size)
                        continue;
                if (start > f->start) {
                        /* Keep the gap before the aligned start as a range of its own. */
                        GpuVaRange *before = malloc(sizeof *before);
                        if (!before)
                                return -ENOMEM;
                        *before = (GpuVaRange) { .start = f->start, .end = start, .next = f };
                        *x = before;
                        f->start = start;
                }
                f->start += size;
                if (f->start == f->end) {
                        GpuVaRange **y = x;
                        while (*y != f)
                                y = &(*y)->next;
                        *y = f->next;
                        free(f);
                }
                *ret = start;
                return 0;
        }
        return -ENOMEM;
}

void gpu_va_free(GpuVaWindow *w, uint64_t va, uint64_t size) {
        GpuVaRange **x, *prev = NULL, *n;

        if (!w->open || size == 0 || va < w->base || va + size > w->base + w->size)
                return;
        /* The placeholder again, replacing the buffer's mapping in one call. */
        if (placeholder(va, size, MAP_FIXED) < 0) {
                /* Cannot happen short of the kernel running out of VMAs: keep
                 * the range out of use rather than hand it out half mapped. */
                log_debug("gpu: cannot restore the placeholder at window offset 0x%" PRIx64 "; range kept",
                          va - w->base);
                return;
        }
        for (x = &w->free; *x && (*x)->start < va; x = &(*x)->next)
                prev = *x;
        if (prev && prev->end == va) {
                prev->end += size;
                if (prev->next && prev->next->start == prev->end) {
                        n = prev->next;
                        prev->end = n->end;
                        prev->next = n->next;
                        free(n);
                }
                return;
        }
        if (*x && (*x)->start == va + size) {
                (*x)->start = va;
                return;
        }
        n = malloc(sizeof *n);
        if (!n) {
                log_debug("gpu: out of memory; window offset 0x%" PRIx64 " (%" PRIu64 " bytes) not reused",
                          va - w->base, size);
                return;
        }
        *n = (GpuVaRange) { .start = va, .end = va + size, .next = *x };
        *x = n;
}

bool gpu_va_window_contains(const GpuVaWindow *w, uint64_t va) {
        return w->open && va >= w->base && va - w->base < w->size;
}
