/* SPDX-License-Identifier: MIT */
/*
 * The client address window (gpu/gpu-va-window.c): the region is reserved in
 * this process at its fixed address; a context's window is a slot of it
 * inside the GPUVM aperture or refused; ranges are handed out in the slot,
 * 2 MiB aligned when large, and given back with the PROT_NONE placeholder
 * over them (never a hole another mmap could take); freed ranges coalesce
 * and are used again; slots run out with -ENOSPC; and addresses are told to
 * a client relative to the window.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "gpu/gpu-internal.h"

/* The protection of the mapping at va in /proc/self/maps ("---p", "rw-s"),
 * or "" where nothing is mapped. */
static void prot_at(uint64_t va, char ret[8]) {
        char line[512];
        FILE *f = fopen("/proc/self/maps", "re");

        ret[0] = '\0';
        cr_assert_not_null(f);
        while (fgets(line, sizeof line, f)) {
                unsigned long long lo, hi;
                char perms[8];

                if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perms) == 3 && va >= lo && va < hi) {
                        snprintf(ret, 8, "%s", perms);
                        break;
                }
        }
        fclose(f);
}

Test(gpu_va_window, the_region_is_reserved_at_its_fixed_address) {
        char prot[8];

        cr_assert_eq(gpu_va_region_reserve(), 0); /* done before main(): again is a no-op */
        prot_at(GPU_VA_REGION_BASE, prot);
        cr_assert_str_eq(prot, "---p");
        prot_at(GPU_VA_REGION_END - 1, prot);
        cr_assert_str_eq(prot, "---p");
        /* Nothing else may take it: a fixed mapping that must not replace fails. */
        void *p = mmap((void *) (uintptr_t) (GPU_VA_CLIENT_BASE + 4096), 4096, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        cr_assert_eq(p, MAP_FAILED);
        cr_assert_eq(errno, EEXIST);
}

Test(gpu_va_window, slots_inside_the_aperture_and_ranges_in_them) {
        GpuVaWindow dev = {}, a = {}, b = {};
        uint64_t x, y, z, big;
        char prot[8];

        cr_assert_eq(gpu_va_window_open(&dev, 0, 1ULL << 24, (1ULL << 47) - 1), 0);
        cr_assert_eq(dev.base, GPU_VA_REGION_BASE);
        cr_assert_eq(dev.size, GPU_VA_CLIENT_BASE - GPU_VA_REGION_BASE, "one GPU: the whole device range");
        cr_assert_eq(gpu_va_window_open(&a, -1, 1ULL << 24, (1ULL << 47) - 1), 0);
        cr_assert_eq(gpu_va_window_open(&b, 0, 1ULL << 24, (1ULL << 47) - 1), 0); /* device window taken: a client slot */
        cr_assert_eq(a.base, GPU_VA_CLIENT_BASE);
        cr_assert_eq(b.base, GPU_VA_CLIENT_BASE + gpu_va_client_slot_size());
        cr_assert_eq(a.size, gpu_va_client_slot_size());

        cr_assert_eq(gpu_va_alloc(&a, 8192, &x), 0);
        cr_assert_eq(x, a.base);
        cr_assert_eq(gpu_va_alloc(&a, 4096, &y), 0);
        cr_assert_eq(y, a.base + 8192);
        cr_assert_eq(gpu_va_alloc(&a, 4ULL << 20, &big), 0);
        cr_assert_eq(big % (2ULL << 20), 0, "large ranges start on 2 MiB");
        cr_assert_eq(big, a.base + (2ULL << 20));
        cr_assert_eq(gpu_va_alloc(&a, 4096, &z), 0);
        cr_assert_eq(z, a.base + 12288, "the gap before an aligned range is used");
        cr_assert_eq(gpu_va_alloc(&a, 100, &z), -EINVAL);
        cr_assert_eq(gpu_va_alloc(&a, a.size, &z), -ENOMEM);

        /* A buffer mapped there, given back: the placeholder is back over it. */
        void *p = mmap((void *) (uintptr_t) x, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                       -1, 0);
        cr_assert_eq(p, (void *) (uintptr_t) x);
        *(volatile uint32_t *) p = 1;
        gpu_va_free(&a, x, 8192);
        prot_at(x, prot);
        cr_assert_str_eq(prot, "---p");
        gpu_va_free(&a, y, 4096);
        /* x and y coalesce into one range, used again first. */
        cr_assert_eq(gpu_va_alloc(&a, 12288, &z), 0);
        cr_assert_eq(z, x);

        gpu_va_window_close(&b);
        gpu_va_window_close(&a);
        gpu_va_window_close(&dev);
}

Test(gpu_va_window, a_slot_outside_the_aperture_is_refused) {
        GpuVaWindow w = {};

        /* A GPU with a 40-bit VM (1 TiB) cannot address the window. */
        cr_assert_eq(gpu_va_window_open(&w, -1, 1ULL << 24, (1ULL << 40) - 1), -EADDRNOTAVAIL);
        gpu_va_window_close(&w);
}

Test(gpu_va_window, slots_run_out) {
        GpuVaWindow w[129] = {};
        unsigned n = 0;
        int r = 0;

        while (n < 129 && (r = gpu_va_window_open(&w[n], -1, 1ULL << 24, (1ULL << 47) - 1)) == 0)
                n++;
        cr_assert_eq(r, -ENOSPC);
        cr_assert_eq(n, 128);
        /* Not a slot more once one is in use at this size. */
        cr_assert_eq(gpu_va_set_client_slots(4096), -EBUSY);
        for (unsigned i = 0; i <= n && i < 129; i++)
                gpu_va_window_close(&w[i]);
        cr_assert_eq(gpu_va_set_client_slots(4096), 0);
        cr_assert_eq(gpu_va_client_slot_size(), (GPU_VA_REGION_END - GPU_VA_CLIENT_BASE) / 4096);
}

Test(gpu_va_window, addresses_are_told_relative_to_the_window) {
        GpuContext *c = calloc(1, sizeof *c);
        char out[256];

        cr_assert_not_null(c);
        cr_assert_eq(gpu_va_window_open(&c->va, -1, 1ULL << 24, (1ULL << 47) - 1), 0);
        gpu_context_describe_va(c, c->va.base + 0x5000, out, sizeof out);
        cr_assert_str_eq(out, "window offset 0x5000, outside any buffer of yours");
        gpu_context_describe_va(c, 0x1000, out, sizeof out);
        cr_assert_str_eq(out, "address 0x1000, outside any buffer of yours");

        char in[128];
        snprintf(in, sizeof in, "memory fault: store of 4 bytes at 0x%llx, pc 0x%llx (encoding 0x1c020100)",
                 (unsigned long long) c->va.base + 0x40, 0x10ULL);
        gpu_context_rewrite_addresses(c, in, out, sizeof out);
        cr_assert_str_eq(out, "memory fault: store of 4 bytes at window offset 0x40, outside any buffer of yours, "
                              "pc 0x10 (encoding 0x1c020100)");
        gpu_context_rewrite_addresses(c, in, out, 20);
        cr_assert_eq(strlen(out), 19, "cut to the size given");
        gpu_va_window_close(&c->va);
        free(c);
}

/* Several GPUs: each device context gets a window of the device range of its
 * own (4 TiB / the GPUs), not a client's slot — it holds every client buffer
 * of its GPU. The layout is fixed while any window is taken. */
Test(gpu_va_window, each_gpus_device_context_has_a_window_of_the_device_range) {
        const uint64_t all = GPU_VA_CLIENT_BASE - GPU_VA_REGION_BASE;
        GpuVaWindow w[3] = {};

        cr_assert_eq(gpu_va_set_device_windows(0), -EINVAL);
        cr_assert_eq(gpu_va_set_device_windows(GPU_VA_MAX_DEVICE_WINDOWS + 1), -EINVAL);
        cr_assert_eq(gpu_va_set_device_windows(2), 0);
        cr_assert_eq(gpu_va_device_window_size(), all / 2);
        cr_assert_eq(gpu_va_window_open(&w[1], 1, 1ULL << 24, (1ULL << 47) - 1), 0);
        cr_assert_eq(gpu_va_window_open(&w[0], 0, 1ULL << 24, (1ULL << 47) - 1), 0);
        cr_expect_eq(w[0].base, GPU_VA_REGION_BASE);
        cr_expect_eq(w[1].base, GPU_VA_REGION_BASE + all / 2);
        cr_expect_eq(w[1].size, all / 2, "2 TiB, not a 64 GiB client slot");
        cr_assert_eq(gpu_va_set_device_windows(4), -EBUSY, "windows are taken");
        cr_assert_eq(gpu_va_window_open(&w[2], 2, 1ULL << 24, (1ULL << 47) - 1), 0);
        cr_expect_geq(w[2].base, GPU_VA_CLIENT_BASE, "no third window: a client slot");
        for (unsigned i = 0; i < 3; i++)
                gpu_va_window_close(&w[i]);
        cr_assert_eq(gpu_va_set_device_windows(1), 0, "free again");
}
