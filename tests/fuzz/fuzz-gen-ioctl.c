/* SPDX-License-Identifier: MIT */
/*
 * Seeds of fuzz-relay-ioctl (fuzz-relay-ioctl.h has the input's parts): what
 * ROCr's start and a small program do through the relay — open the files,
 * GET_VERSION, ACQUIRE_VM, apertures, buffers allocated, mapped, exported,
 * imported back, mmapped, events made, set, waited for, the tile config,
 * clock counters, exception info, doorbells — in each kind of process, and
 * the malformed messages the wire promises to end a channel on.
 */
#include <stdio.h>
#include <string.h>

#include "fuzz-gen.h"
#include "fuzz-relay-ioctl.h"
#include "sim/sim-remote-protocol.h"

#define SEED_MAX 8192u
#define N_REQUESTS (sizeof fuzz_relay_ioctl_requests / sizeof fuzz_relay_ioctl_requests[0])

typedef struct Seed {
        uint8_t b[SEED_MAX];
        size_t n;
} Seed;

static void put(Seed *s, uint64_t v, unsigned n) {
        for (unsigned i = 0; i < n && s->n < SEED_MAX; i++)
                s->b[s->n++] = (uint8_t) (v >> (8 * i));
}

static void put_bytes(Seed *s, const void *p, size_t n) {
        for (size_t i = 0; i < n && s->n < SEED_MAX; i++)
                s->b[s->n++] = ((const uint8_t *) p)[i];
}

static unsigned pick(unsigned long request) {
        for (unsigned i = 0; i < N_REQUESTS; i++)
                if (fuzz_relay_ioctl_requests[i] == request)
                        return i;
        return (unsigned) N_REQUESTS;
}

/* An IOCTL on the file (operand: 0 the KFD file, 1 the render file) with
 * the argument's first 64 bytes, the fix-ups, the array (its first 64
 * bytes) and an fd kind. */
static void ioctl_on(Seed *s, unsigned file, unsigned long request, const void *arg, unsigned fix, const void *array,
                     size_t array_n, unsigned fd_kind) {
        size_t usize = _IOC_SIZE(request);
        uint8_t zeros[64] = { 0 };

        put(s, RIO_OP_IOCTL, 1);
        put(s, pick(request), 1);
        put(s, file, 1);
        put(s, 0, 1); /* flags */
        put_bytes(s, arg ? arg : zeros, usize < 64 ? usize : 64);
        put(s, fix, 1);
        if (fix & RIO_FIX_ARRAY_SIZE)
                put(s, array_n, 2);
        put_bytes(s, array ? array : zeros, array_n < 64 ? array_n : 64);
        if (fix & RIO_FIX_FD)
                put(s, fd_kind, 1);
}

static void ioctl_op(Seed *s, unsigned long request, const void *arg, unsigned fix, const void *array, size_t array_n,
                     unsigned fd_kind) {
        ioctl_on(s, 0, request, arg, fix, array, array_n, fd_kind);
}

/* An IOCTL naming the device's other GPU, its request cut to size bytes
 * (the kernel reads what there is, zeros past it). */
static void other_gpu_op(Seed *s, unsigned long request, const void *arg, size_t size) {
        size_t usize = _IOC_SIZE(request);
        uint8_t zeros[64] = { 0 };

        put(s, RIO_OP_IOCTL, 1);
        put(s, pick(request), 1);
        put(s, 0, 1);
        put(s, 0, 1);
        put_bytes(s, arg ? arg : zeros, usize < 64 ? usize : 64);
        put(s, RIO_FIX_GPU_ID | RIO_FIX_OTHER_GPU | RIO_FIX_SIZE, 1);
        put(s, size, 1);
}

/* A ROCm program's start and a little work. */
static void rocm_session(Seed *s) {
        put(s, RIO_OP_OPEN_KFD, 1);
        put(s, RIO_OP_OPEN_RENDER, 1);
        put(s, 0, 1); /* the GPU's render minor */
        ioctl_op(s, AMDKFD_IOC_GET_VERSION, NULL, 0, NULL, 0, 0);
        ioctl_op(s, AMDKFD_IOC_RUNTIME_ENABLE, NULL, 0, NULL, 0, 0);
        struct kfd_ioctl_get_process_apertures_new_args ap = { .kfd_process_device_apertures_ptr = 0x7000,
                                                               .num_of_nodes = 4 };
        ioctl_op(s, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &ap, 0, NULL, 0, 0);
        ioctl_op(s, AMDKFD_IOC_ACQUIRE_VM, NULL, RIO_FIX_GPU_ID, NULL, 0, 0);
        struct kfd_ioctl_set_memory_policy_args mp = { .default_policy = 1, .alternate_policy = 1 };
        ioctl_op(s, AMDKFD_IOC_SET_MEMORY_POLICY, &mp, RIO_FIX_GPU_ID, NULL, 0, 0);
        ioctl_op(s, AMDKFD_IOC_AVAILABLE_MEMORY, NULL, RIO_FIX_GPU_ID, NULL, 0, 0);
        put(s, RIO_OP_ALLOC, 1);
        put(s, 0x13, 1); /* 4 pages of VRAM */
        put(s, RIO_OP_ALLOC, 1);
        put(s, 0x01, 1); /* 2 pages of GTT */
        put(s, RIO_OP_MMAP, 1);
        put(s, 0x01, 1); /* the first buffer */
        put(s, 1, 1);    /* the render file */
        put(s, 0, 1);
        struct kfd_ioctl_export_dmabuf_args ex = { .flags = 02000002 };
        ioctl_op(s, AMDKFD_IOC_EXPORT_DMABUF, &ex, RIO_FIX_HANDLE, NULL, 0, 0);
        struct kfd_ioctl_get_dmabuf_info_args di = { .metadata_ptr = 0x8000, .metadata_size = 64 };
        ioctl_op(s, AMDKFD_IOC_GET_DMABUF_INFO, &di, RIO_FIX_FD, NULL, 0, 3);
        struct kfd_ioctl_import_dmabuf_args im = { .va_addr = 0x200000000ull };
        ioctl_op(s, AMDKFD_IOC_IMPORT_DMABUF, &im, RIO_FIX_GPU_ID | RIO_FIX_FD, NULL, 0, 3);
        struct kfd_ioctl_create_event_args ce = { .event_type = KFD_IOC_EVENT_SIGNAL, .auto_reset = 1 };
        ioctl_op(s, AMDKFD_IOC_CREATE_EVENT, &ce, 0, NULL, 0, 0);
        ioctl_op(s, AMDKFD_IOC_SET_EVENT, NULL, RIO_FIX_EVENT, NULL, 0, 0);
        struct kfd_ioctl_wait_events_args we = { .events_ptr = 0x9000, .num_events = 1, .wait_for_all = 1,
                                                 .timeout = 5 };
        struct kfd_event_data ev = { 0 };
        ioctl_op(s, AMDKFD_IOC_WAIT_EVENTS, &we, RIO_FIX_EVENT, &ev, sizeof ev, 0);
        struct kfd_ioctl_get_tile_config_args tc = { .tile_config_ptr = 0xa000, .macro_tile_config_ptr = 0xb000,
                                                     .num_tile_configs = 32, .num_macro_tile_configs = 16 };
        ioctl_op(s, AMDKFD_IOC_GET_TILE_CONFIG, &tc, RIO_FIX_GPU_ID, NULL, 0, 0);
        ioctl_op(s, AMDKFD_IOC_GET_CLOCK_COUNTERS, NULL, RIO_FIX_GPU_ID, NULL, 0, 0);
        struct kfd_ioctl_map_memory_to_gpu_args um = { .device_ids_array_ptr = 0xc000, .n_devices = 1 };
        uint32_t ids[1] = { 0 };
        ioctl_op(s, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &um, RIO_FIX_GPU_ID | RIO_FIX_HANDLE, ids, sizeof ids, 0);
        ioctl_op(s, AMDKFD_IOC_FREE_MEMORY_OF_GPU, NULL, RIO_FIX_HANDLE, NULL, 0, 0);
        /* The second buffer, never mapped or exported: freed, its offset
         * maps nothing. */
        ioctl_op(s, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &um, RIO_FIX_GPU_ID | RIO_FIX_HANDLE | 0x10, ids, sizeof ids, 0);
        ioctl_op(s, AMDKFD_IOC_FREE_MEMORY_OF_GPU, NULL, RIO_FIX_HANDLE | 0x10, NULL, 0, 0);
        put(s, RIO_OP_MMAP, 1);
        put(s, 0x03, 1);
        put(s, 1, 1);
        put(s, 0, 1);
        ioctl_op(s, AMDKFD_IOC_DESTROY_EVENT, NULL, RIO_FIX_EVENT, NULL, 0, 0);
        put(s, RIO_OP_EXCEPTION_INFO, 1);
        put(s, 0, 1);
        put(s, 256, 2);
        put(s, RIO_OP_DOORBELL, 1);
        put(s, 0, 1);
        put(s, 3, 1);
        struct drm_prime_handle ph = { .handle = 1, .flags = 2 };
        ioctl_op(s, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph, 0, NULL, 0, 0);
        /* The render file is the daemon's: a relayed process's calls on it
         * are refused, DRM's and KFD's. */
        ioctl_on(s, 1, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph, 0, NULL, 0, 0);
        ioctl_on(s, 1, DRM_IOCTL_AMDGPU_GEM_CREATE, NULL, 0, NULL, 0, 0);
        ioctl_on(s, 1, AMDKFD_IOC_GET_VERSION, NULL, 0, NULL, 0, 0);
        put(s, RIO_OP_NEW_CHANNEL, 1);
        ioctl_op(s, AMDKFD_IOC_GET_VERSION, NULL, 0, NULL, 0, 0);
        put(s, RIO_OP_CLOSE, 1);
        put(s, 1, 1);
        put(s, RIO_OP_CLOSE, 1);
        put(s, 0, 1);
}

static int write_seed_of(const char *dir, const char *name, const Seed *s) {
        return write_seed(dir, name, s->b, s->n);
}

/* A raw message on the channel, after OPEN_KFD. */
static void raw_after_open(Seed *s, const void *msg, size_t n, unsigned fd_kind) {
        put(s, RIO_OP_OPEN_KFD, 1);
        put(s, RIO_OP_RAW, 1);
        put(s, n, 2);
        put_bytes(s, msg, n);
        put(s, fd_kind, 1);
        ioctl_op(s, AMDKFD_IOC_GET_VERSION, NULL, 0, NULL, 0, 0);
}

static int malformed(const char *dir) {
        struct {
                SimRemoteRequest h;
                uint8_t arg[64];
        } m;
        Seed s;

#define SEED(name, ...)                                                     \
        do {                                                                \
                s.n = 0;                                                    \
                put(&s, 0, 1);                                              \
                __VA_ARGS__;                                                \
                if (write_seed_of(dir, "malformed-" name, &s) < 0)          \
                        return -1;                                          \
        } while (0)

        memset(&m, 0, sizeof m);
        SEED("short", raw_after_open(&s, "abc", 3, 0));
        m.h = (SimRemoteRequest) { .op = 77, .fd = -1 };
        SEED("unknown-op", raw_after_open(&s, &m.h, sizeof m.h, 0));
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_NEW_CHANNEL, .fd = -1 };
        SEED("new-channel-on-a-channel", raw_after_open(&s, &m.h, sizeof m.h, 4));
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_DOORBELL, .fd = 3, .u64 = { 1ull << 32 } };
        SEED("doorbell-past-32-bits", raw_after_open(&s, &m.h, sizeof m.h, 0));
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_OPEN_KFD, .fd = -1 };
        SEED("fd-with-open", raw_after_open(&s, &m.h, sizeof m.h, 2));
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_IOCTL, .fd = 3, .arg_size = 24,
                                   .u64 = { AMDKFD_IOC_WAIT_EVENTS } };
        struct kfd_ioctl_wait_events_args w = { .events_ptr = 0x1000, .num_events = 0xFFFFFFFFu };
        memcpy(m.arg, &w, sizeof w);
        SEED("wait-events-huge-count", raw_after_open(&s, &m, sizeof m.h + sizeof w, 0));
        w.num_events = 2;
        memcpy(m.arg, &w, sizeof w);
        SEED("wait-events-short-array", raw_after_open(&s, &m, sizeof m.h + sizeof w + 24, 0));
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_IOCTL, .fd = 3, .arg_size = 8,
                                   .u64 = { AMDKFD_IOC_GET_VERSION } };
        memset(m.arg, 0, sizeof m.arg);
        SEED("fd-with-get-version", raw_after_open(&s, &m, sizeof m.h + 8, 1));
        SEED("ioctl-arg-size-wrong", m.h.arg_size = 4; raw_after_open(&s, &m, sizeof m.h + 4, 0));
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_IOCTL, .fd = 3, .flags = 2, .arg_size = 8,
                                   .u64 = { AMDKFD_IOC_GET_VERSION } };
        SEED("ioctl-unknown-flag", raw_after_open(&s, &m, sizeof m.h + 8, 0));
        SEED("oversized", put(&s, RIO_OP_RAW, 1); put(&s, 0xffff, 2); put(&s, 0, 1));
        /* On the control channel: garbage, a pipe as a channel. */
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_NEW_CHANNEL, .fd = -1 };
        SEED("control-pipe-as-channel", put(&s, RIO_OP_CONTROL, 1); put(&s, sizeof m.h, 1);
             put_bytes(&s, &m.h, sizeof m.h); put(&s, 2, 1));
        SEED("control-good-new-channel", put(&s, RIO_OP_CONTROL, 1); put(&s, sizeof m.h, 1);
             put_bytes(&s, &m.h, sizeof m.h); put(&s, 4, 1); ioctl_op(&s, AMDKFD_IOC_GET_VERSION, NULL, 0, NULL, 0, 0));
        /* Before the handshake: a HELLO, one of another version, garbage. */
        m.h = (SimRemoteRequest) { .op = SIM_REMOTE_OP_HELLO, .fd = -1,
                                   .u64 = { SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32 } };
        s.n = 0;
        put(&s, RIO_FLAG_NO_HANDSHAKE, 1);
        put(&s, sizeof m.h, 1);
        put_bytes(&s, &m.h, sizeof m.h);
        put(&s, 0, 1);
        rocm_session(&s);
        if (write_seed_of(dir, "hello-by-hand", &s) < 0)
                return -1;
        m.h.u64[0] = SIM_REMOTE_MAGIC | 99ull << 32;
        s.n = 0;
        put(&s, RIO_FLAG_NO_HANDSHAKE, 1);
        put(&s, sizeof m.h, 1);
        put_bytes(&s, &m.h, sizeof m.h);
        put(&s, 0, 1);
        if (write_seed_of(dir, "hello-version-99", &s) < 0)
                return -1;
        s.n = 0;
        put(&s, RIO_FLAG_NO_HANDSHAKE, 1);
        put(&s, 10, 1);
        put_bytes(&s, "garbage!!!", 10);
        put(&s, 0, 1);
        if (write_seed_of(dir, "hello-garbage", &s) < 0)
                return -1;
#undef SEED
        return 0;
}

/* Calls that name the other GPU, whole and cut short, before the process
 * is bound to a GPU and after. */
static int other_gpu(const char *dir) {
        static const struct {
                const char *name;
                unsigned long request;
                size_t at; /* the gpu_id field */
        } calls[] = {
                { "available-memory", AMDKFD_IOC_AVAILABLE_MEMORY,
                  offsetof(struct kfd_ioctl_get_available_memory_args, gpu_id) },
                { "acquire-vm", AMDKFD_IOC_ACQUIRE_VM, offsetof(struct kfd_ioctl_acquire_vm_args, gpu_id) },
                { "alloc", AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, offsetof(struct kfd_ioctl_alloc_memory_of_gpu_args, gpu_id) },
                { "clock-counters", AMDKFD_IOC_GET_CLOCK_COUNTERS,
                  offsetof(struct kfd_ioctl_get_clock_counters_args, gpu_id) },
                { "memory-policy", AMDKFD_IOC_SET_MEMORY_POLICY,
                  offsetof(struct kfd_ioctl_set_memory_policy_args, gpu_id) },
                { "scratch-backing-va", AMDKFD_IOC_SET_SCRATCH_BACKING_VA,
                  offsetof(struct kfd_ioctl_set_scratch_backing_va_args, gpu_id) },
                { "trap-handler", AMDKFD_IOC_SET_TRAP_HANDLER,
                  offsetof(struct kfd_ioctl_set_trap_handler_args, gpu_id) },
        };
        struct kfd_ioctl_alloc_memory_of_gpu_args alloc = { .va_addr = 0x300000000ull, .size = 4096,
                                                            .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT };
        char name[96];
        Seed s;

        for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
                for (unsigned cut = 0; cut <= 3; cut++) {
                        s.n = 0;
                        put(&s, cut == 2 ? RIO_FLAG_DAEMON_CONTEXT : cut == 3 ? RIO_FLAG_SIM_PROCESS : 0, 1);
                        put(&s, RIO_OP_OPEN_KFD, 1);
                        put(&s, RIO_OP_OPEN_RENDER, 1);
                        put(&s, 0, 1);
                        other_gpu_op(&s, calls[i].request,
                                     calls[i].request == AMDKFD_IOC_ALLOC_MEMORY_OF_GPU ? &alloc : NULL,
                                     cut == 0 ? _IOC_SIZE(calls[i].request) : calls[i].at + 2);
                        snprintf(name, sizeof name, "other-gpu-%s%s", calls[i].name,
                                 cut == 0 ? "" : cut == 1 ? "-cut" : cut == 2 ? "-cut-bound" : "-cut-simulated");
                        if (write_seed_of(dir, name, &s) < 0)
                                return -1;
                }
        /* ACQUIRE_VM of another relayed process's render file, whole and
         * cut inside gpu_id (the drm_fd whole): refused. */
        for (unsigned cut = 0; cut <= 1; cut++) {
                s.n = 0;
                put(&s, 0, 1);
                put(&s, RIO_OP_OPEN_KFD, 1);
                put(&s, RIO_OP_OPEN_RENDER, 1);
                put(&s, 0, 1);
                put(&s, RIO_OP_IOCTL, 1);
                put(&s, pick(AMDKFD_IOC_ACQUIRE_VM), 1);
                put(&s, 0, 1);
                put(&s, 0, 1);
                put_bytes(&s, (uint8_t[8]) { 0 }, 8);
                put(&s, RIO_FIX_GPU_ID | RIO_FIX_NEIGHBOUR | (cut ? RIO_FIX_SIZE : 0), 1);
                if (cut)
                        put(&s, offsetof(struct kfd_ioctl_acquire_vm_args, gpu_id) + 2, 1);
                if (write_seed_of(dir, cut ? "acquire-vm-of-a-neighbour-cut" : "acquire-vm-of-a-neighbour", &s) < 0)
                        return -1;
        }
        /* A buffer freed by a FREE cut after the 48 bits its handle has
         * (gpu_id << 32 | id), in each kind of process; a new one, then
         * an mmap of the first one's offset: refused. */
        for (unsigned kind = 0; kind <= 1; kind++) {
                s.n = 0;
                put(&s, kind ? RIO_FLAG_SIM_PROCESS : RIO_FLAG_DAEMON_CONTEXT, 1);
                put(&s, RIO_OP_OPEN_KFD, 1);
                put(&s, RIO_OP_OPEN_RENDER, 1);
                put(&s, 0, 1);
                ioctl_op(&s, AMDKFD_IOC_ACQUIRE_VM, NULL, RIO_FIX_GPU_ID, NULL, 0, 0);
                put(&s, RIO_OP_ALLOC, 1);
                put(&s, 0x01, 1);
                struct kfd_ioctl_map_memory_to_gpu_args um = { .device_ids_array_ptr = 0xc000, .n_devices = 1 };
                uint32_t ids[1] = { 0 };
                ioctl_op(&s, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &um, RIO_FIX_GPU_ID | RIO_FIX_HANDLE, ids, sizeof ids, 0);
                put(&s, RIO_OP_IOCTL, 1);
                put(&s, pick(AMDKFD_IOC_FREE_MEMORY_OF_GPU), 1);
                put(&s, 0, 1);
                put(&s, 0, 1);
                put_bytes(&s, (uint8_t[8]) { 0 }, 8);
                put(&s, RIO_FIX_HANDLE | RIO_FIX_SIZE, 1);
                put(&s, 6, 1);
                put(&s, RIO_OP_ALLOC, 1);
                put(&s, 0x00, 1);
                put(&s, RIO_OP_MMAP, 1);
                put(&s, 0x01, 1); /* the first buffer */
                put(&s, 1, 1);    /* the render file */
                put(&s, 0, 1);
                if (write_seed_of(dir, kind ? "free-cut-then-mmap-simulated" : "free-cut-then-mmap", &s) < 0)
                        return -1;
        }
        /* The old apertures call cut inside its first node's gpu_id, and
         * whole: only the client's GPU is listed. */
        for (unsigned cut = 0; cut <= 1; cut++) {
                s.n = 0;
                put(&s, 0, 1);
                put(&s, RIO_OP_OPEN_KFD, 1);
                put(&s, RIO_OP_IOCTL, 1);
                put(&s, pick(AMDKFD_IOC_GET_PROCESS_APERTURES), 1);
                put(&s, 0, 1);
                put(&s, 0, 1);
                put_bytes(&s, (uint8_t[64]) { 0 }, 64);
                put(&s, cut ? RIO_FIX_SIZE : 0, 1);
                if (cut)
                        put(&s, offsetof(struct kfd_process_device_apertures, gpu_id) + 2, 1);
                if (write_seed_of(dir, cut ? "old-apertures-cut" : "old-apertures", &s) < 0)
                        return -1;
        }
        return 0;
}

int relay_ioctl_corpus(const char *dir) {
        static const struct {
                const char *name;
                unsigned flags;
        } kinds[] = {
                { "relayed", 0 },
                { "relayed-with-daemon-context", RIO_FLAG_DAEMON_CONTEXT },
                { "simulated-process", RIO_FLAG_SIM_PROCESS },
        };
        Seed s;

        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
                s.n = 0;
                put(&s, kinds[i].flags, 1);
                rocm_session(&s);
                if (write_seed_of(dir, kinds[i].name, &s) < 0)
                        return -1;
        }
        /* Every call once, with a zero argument. */
        s.n = 0;
        put(&s, RIO_FLAG_DAEMON_CONTEXT, 1);
        put(&s, RIO_OP_OPEN_KFD, 1);
        for (unsigned i = 0; i < N_REQUESTS; i++)
                ioctl_op(&s, fuzz_relay_ioctl_requests[i], NULL, RIO_FIX_GPU_ID, NULL, 0, 0);
        if (write_seed_of(dir, "every-call", &s) < 0)
                return -1;
        return malformed(dir) == 0 && other_gpu(dir) == 0 ? 0 : -1;
}
