/* SPDX-License-Identifier: MIT */
/*
 * <linux/kfd_ioctl.h> from the system, plus only what Debian 12's header
 * (uapi 1.11) lacks, each with its source. The kernel dispatches on _IOC_NR and
 * accepts short structs (kfd-facts §1.1), so defining the newer layouts here is
 * compatible with both older and newer kernels.
 */
#pragma once

#include <assert.h>
#include <linux/kfd_ioctl.h>

/*
 * The uapi header spells this flag (1 << 31): a signed shift into the sign
 * bit, undefined behaviour in C that UBSan reports at every use. Same value,
 * unsigned. (include/uapi/linux/kfd_ioctl.h, all versions up to 1.17.)
 */
#undef KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
#define KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE (1u << 31)

/*
 * AMDKFD_IOC_EXPORT_DMABUF, uapi 1.12 ("Add DMA-buf export ioctl").
 * Source: include/uapi/linux/kfd_ioctl.h of the kernels after 6.1 (6.1 itself
 * speaks 1.11 and lacks it, kfd-facts §7.4: gpu-buffer.c then makes buffers on
 * the render node):
 *   struct kfd_ioctl_export_dmabuf_args { __u64 handle; __u32 flags; __u32 dmabuf_fd; };
 *   #define AMDKFD_IOC_EXPORT_DMABUF AMDKFD_IOWR(0x24, struct kfd_ioctl_export_dmabuf_args)
 * flags are fd flags (O_CLOEXEC, O_RDWR) for dma_buf_fd() [kfd_chardev.c
 * kfd_ioctl_export_dmabuf].
 */
#ifndef AMDKFD_IOC_EXPORT_DMABUF
struct kfd_ioctl_export_dmabuf_args {
        __u64 handle;    /* to KFD */
        __u32 flags;     /* to KFD */
        __u32 dmabuf_fd; /* from KFD */
};
#define AMDKFD_IOC_EXPORT_DMABUF AMDKFD_IOWR(0x24, struct kfd_ioctl_export_dmabuf_args)
#endif

/*
 * AMDKFD_IOC_RUNTIME_ENABLE, uapi 1.13 (debugger API). mode_mask 0 is the
 * "disable" path that tinygrad sends; bit 0 would enable the debug runtime.
 * Source: include/uapi/linux/kfd_ioctl.h in Linux >= 6.4:
 *   struct kfd_ioctl_runtime_enable_args { __u64 r_debug; __u32 mode_mask; __u32 capabilities_mask; };
 *   #define AMDKFD_IOC_RUNTIME_ENABLE AMDKFD_IOWR(0x25, struct kfd_ioctl_runtime_enable_args)
 */
#ifndef AMDKFD_IOC_RUNTIME_ENABLE
struct kfd_ioctl_runtime_enable_args {
        __u64 r_debug;
        __u32 mode_mask;
        __u32 capabilities_mask;
};
#define AMDKFD_IOC_RUNTIME_ENABLE AMDKFD_IOWR(0x25, struct kfd_ioctl_runtime_enable_args)
#endif

/*
 * AMDKFD_IOC_CREATE_PROCESS, uapi 1.19 ("Add a new ioctl to create secondary
 * kfd processes"; Linux 7.0). No payload. On a /dev/kfd fd that still holds
 * the process's primary KFD context it replaces it with a new secondary
 * context — its own GPU VM, PASID, events, doorbells and queues — destroyed
 * when that fd is closed (kfd-facts §7.3). Source: include/uapi/linux/kfd_ioctl.h
 * in Linux >= 7.0 (amd-gfx "[PATCH V7 18/18] amdkfd: introduce new ioctl
 * AMDKFD_IOC_CREATE_PROCESS"):
 *   #define AMDKFD_IOC_CREATE_PROCESS AMDKFD_IO(0x27)
 * An older kernel answers -EINVAL (or -ENOTTY) for the number: gate on the
 * version (minor >= 19), not on the errno.
 */
#ifndef AMDKFD_IOC_CREATE_PROCESS
#define AMDKFD_IOC_CREATE_PROCESS AMDKFD_IO(0x27)
#endif
/*
 * AMDKFD_IOC_DBG_TRAP, uapi 1.13 (debugger API): only its word is needed
 * here (kfd-ioctl-table.c), not its struct. Source: include/uapi/linux/kfd_ioctl.h
 * in Linux >= 6.4:
 *   #define AMDKFD_IOC_DBG_TRAP AMDKFD_IOWR(0x26, struct kfd_ioctl_dbg_trap_args)
 * where struct kfd_ioctl_dbg_trap_args is { __u32 pid; __u32 op; union {...}; }
 * and the union's largest members (query_exception_info, queue_snapshot,
 * device_snapshot) are 24 bytes: 32 in all.
 */
#ifndef AMDKFD_IOC_DBG_TRAP
#define AMDKFD_IOC_DBG_TRAP _IOC(_IOC_READ | _IOC_WRITE, AMDKFD_IOCTL_BASE, 0x26, 32)
#endif
#define KFD_MINOR_CREATE_PROCESS 19u
#define KFD_MINOR_EXPORT_DMABUF 12u
#define KFD_MINOR_RUNTIME_ENABLE 13u
#define KFD_MINOR_EVENT_AGE 14u

/*
 * struct kfd_hsa_signal_event_data, uapi 1.14 ("kfd_event_data update"): the
 * first 8 bytes of kfd_event_data's union carry last_event_age, to and from
 * KFD, for SIGNAL and DEBUG events. Source: include/uapi/linux/kfd_ioctl.h in
 * Linux >= 6.4 (commit "drm/amdkfd: add event age tracking").
 */
#if KFD_IOCTL_MINOR_VERSION < 14
struct kfd_hsa_signal_event_data {
        __u64 last_event_age; /* to and from KFD */
};
#endif
static_assert(sizeof(struct kfd_event_data) == 48, "kfd_event_data is 48 bytes (uapi)");

/* Reads/writes last_event_age in a kfd_event_data whatever the header version. */
static inline __u64 kfd_event_data_get_age(const struct kfd_event_data *d) {
        const struct kfd_hsa_signal_event_data *s = (const void *) d;
        return s->last_event_age;
}
static inline void kfd_event_data_set_age(struct kfd_event_data *d, __u64 age) {
        struct kfd_hsa_signal_event_data *s = (void *) d;
        s->last_event_age = age;
}

/*
 * mmap offset encoding on /dev/kfd (kfd_priv.h, kfd-facts §1.8): bits 63:62
 * type, 61:46 gpu_id, 45:0 value.
 */
#define KFD_MMAP_TYPE_SHIFT 62
#define KFD_MMAP_TYPE_MASK (0x3ULL << KFD_MMAP_TYPE_SHIFT)
#define KFD_MMAP_TYPE_DOORBELL (0x3ULL << KFD_MMAP_TYPE_SHIFT)
#define KFD_MMAP_TYPE_EVENTS (0x2ULL << KFD_MMAP_TYPE_SHIFT)
#define KFD_MMAP_TYPE_RESERVED_MEM (0x1ULL << KFD_MMAP_TYPE_SHIFT)
#define KFD_MMAP_TYPE_MMIO (0x0ULL << KFD_MMAP_TYPE_SHIFT)
#define KFD_MMAP_GPU_ID_SHIFT 46
#define KFD_MMAP_GPU_ID_MASK (((1ULL << 16) - 1) << KFD_MMAP_GPU_ID_SHIFT)
#define KFD_MMAP_GPU_ID(gpu_id) ((((__u64) (gpu_id)) << KFD_MMAP_GPU_ID_SHIFT) & KFD_MMAP_GPU_ID_MASK)
#define KFD_MMAP_GET_GPU_ID(offset) (((offset) & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT)

/* Per-process doorbell slice on gfx9+: 1024 doorbells x 8 bytes (kfd-facts §1.7). */
#define KFD_DOORBELL_SLICE_SIZE 0x2000u
/* Signal page: 4096 slots x 8 bytes; unsignaled slot = ~0 (kfd-facts §1.10). */
#define KFD_EVENT_PAGE_SIZE (KFD_SIGNAL_EVENT_LIMIT * 8u)
#define KFD_UNSIGNALED_EVENT_SLOT (~0ULL)
/* Its low dword: what a 32-bit GPU wait on a slot compares with. */
#define KFD_UNSIGNALED_EVENT_SLOT32 0xFFFFFFFFu
/* Handles are gpu_id << 32 | idr (kfd_priv.h MAKE_HANDLE, kfd-facts §1.5). */
#define KFD_MAKE_HANDLE(gpu_id, idr) ((((__u64) (gpu_id)) << 32) | (__u32) (idr))
#define KFD_HANDLE_GPU_ID(h) ((__u32) ((h) >> 32))
#define KFD_HANDLE_IDR(h) ((__u32) (h))
/* KFD_IOC_WAIT_RESULT_* timeouts: 0 = poll, ~0 = forever (kfd-facts §1.10). */
#define KFD_EVENT_TIMEOUT_IMMEDIATE 0u
#define KFD_EVENT_TIMEOUT_INFINITE 0xFFFFFFFFu
