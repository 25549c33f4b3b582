/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the daemon's end of the KFD relay's wire: the sim-remote
 * server (daemon/sim/sim-remote-server.c: the handshake, serve_request(),
 * serve_ioctl(), serve_marshalled()) serving, as the relay does, a relayed
 * client's KFD process — the served view of a secondary KFD context of the
 * daemon's (daemon/contexts/context-kfd-process.c), with or without the
 * daemon's own GPU context in it — or, as for a worker process, a simulated
 * process of the device's own (sim_remote_serve_hooked()). One simulated
 * device of two GPUs (an iGPU first), with the daemon's GPU context on one,
 * is made for the whole run; each input is one client
 * (fuzz-relay-ioctl-client.c): a server over a real socketpair, a list of
 * messages sent on its channels, each answer read and checked (the oracle:
 * fuzz-relay-ioctl-oracle.c); then the client hangs up and the target waits
 * for the server's end.
 *
 * Input (fuzz-relay-ioctl.h names its parts): a flags byte — bit 0 a
 * simulated process (else a relayed KFD process), bit 1 the daemon's GPU
 * context in the relayed process, bit 2 no automatic HELLO and first
 * channel, bits 3 and 4 both set: the server on threads of its own, as the
 * daemon runs it (else driven on the fuzzer's thread by
 * sim_remote_server_run() before each answer is read: the same handshake,
 * control and request code and the same teardown, without a thread made
 * per channel and a switch between threads per message, which cost most
 * of an input under ASan) — then operations, each an opcode byte (modulo RIO_OP_COUNT) and
 * its operands (read as the operation needs them; missing bytes are zeros):
 *   0  a raw message on the channel: length (2 bytes, at most 1024; 0xffff:
 *      one byte more than a message may be), the bytes, which fd comes along
 *   1  IOCTL: request (a byte: one of the calls the wire knows, or 4 bytes of
 *      its own), file, flags, the argument's bytes, fix-ups (the client's GPU
 *      id or the other GPU's, a handle or event it has, a request size of its
 *      own), the array its pointer needs (or a wrong one), an fd
 *   2, 3  OPEN_KFD, OPEN_RENDER (the GPU's minor or 4 bytes)
 *   4  CLOSE a file;  5 MMAP (a buffer's offset or 8 bytes, a length)
 *   6  EXCEPTION_INFO (buffer length);  7 DOORBELL (a queue id)
 *   8  a new channel;  9 a raw message on the control channel (HELLO before
 *      the handshake; with a socket, a pipe or nothing)
 *  10  ALLOC of 1 to 16 pages of VRAM or GTT and MAP to the GPU (what ROCr
 *      does first), so that later calls find buffers
 * A WAIT_EVENTS's timeout is cut to at most 7 ms, as far as the request
 * holds it (a call that sleeps for ever is the relay's to end, at the
 * client's end: test-kfd-relay tests it); a file operand is the number
 * OPEN_KFD or OPEN_RENDER gave, or one of its own.
 *
 * Promises checked: each message is answered or ends its channel exactly as
 * sim-remote-protocol.h says (a short or long message, an unknown op or
 * flag, an argument size other than the request's, an array not as long as
 * its argument says or beyond its bound, an fd where none belongs end the
 * channel; anything else is answered); on the control channel only HELLO
 * (before) and NEW_CHANNEL with a socket (after) are answered, anything
 * else ends the process; after a channel ends the process is still served
 * (a new channel answers GET_VERSION); every reply is well formed: its
 * argument is the request's size if the kernel's table (not the request
 * word) copies it out, else empty; its
 * array within the bound of what was asked; an fd with it exactly where
 * the op gives one; ret a file number or 0 or a negative errno; pointer and
 * fd fields come back as the client sent them (never a daemon address or
 * fd number). What the client reaches: no call naming the other GPU
 * succeeds, nor ACQUIRE_VM of a file it was not given as a render file; a
 * relayed process's calls reach its KFD file only and make no queue; an
 * MMAP of a buffer it freed (never exported or mapped) is refused. At the
 * end: the server ended (end() called) within 10 s, the device holds the
 * files, contexts, queues, processes and GEM handles it held before, and no
 * fd of the process was left behind (/proc/self/fd, given 2 s for engine
 * threads to let go).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <amdgpu_drm.h>

#include "contexts/context-internal.h"
#include "gpu/gpu.h"
#include "kfd/kfd-uapi.h"
#include "sim/sim-device.h"
#include "sim/sim-process.h"
#include "sim/sim-topology.h"
#include "sim/sim-remote-protocol.h"
#include "sim/sim-remote.h"
#include "sim/sim.h"
#include "fuzz-relay-ioctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define DGPU_ID 0x697Du /* the simulated gfx1030's gpu_id (the default) */
#define RAW_MAX 1024u
/* The longest array an IOCTL carries (a longer one is cut to this; its
 * bytes past the first 64 are zeros), and msg's room for it. */
#define ARRAY_MAX (8192u + 1u)

/* ---- The daemon: made once ---- */

static SimDevice *dev;
static GpuContext *device_ctx;
static SimRemoteRegistry *reg;
/* Another relayed client's KFD process, made once and never served: its
 * render file, which no ACQUIRE_VM has taken yet, is a file of the daemon
 * that a client must not reach by number (neighbour_render). */
static KfdProcess *neighbour;
static int neighbour_render;
static uint32_t gpu_id, other_gpu_id, render_minor;
static SimDeviceStats base_stats;
static bool debug; /* FUZZ_RELAY_IOCTL_DEBUG=1: each message and its answer */
static int fd_dir = -1; /* /proc/self/fd, for count_fds() */

/* The server's end() hook: the last thing it does. */
static pthread_mutex_t end_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t end_cond = PTHREAD_COND_INITIALIZER;
static bool ended;

static void on_end(void *userdata) {
        pthread_mutex_lock(&end_lock);
        ended = true;
        pthread_cond_broadcast(&end_cond);
        pthread_mutex_unlock(&end_lock);
}

static const SimRemoteHooks hooks = { .end = on_end };

static void teardown(void) {
        reg = sim_remote_registry_free(reg);
        if (neighbour) {
                const KfdOps *o = kfd_process_daemon_ops(neighbour);
                SimRemoteProcess served = kfd_process_served(neighbour);
                o->close(o->userdata, neighbour_render);
                served.free(served.userdata);
                neighbour = NULL;
        }
        device_ctx = gpu_context_free(device_ctx);
        dev = sim_device_free(dev);
        if (fd_dir >= 0)
                close(fd_dir);
        fd_dir = -1;
}

static void bring_up(void) {
        if (dev)
                return;
        /* Two GPUs (an iGPU first): a client must reach only its own. A
         * kernel that loops is stopped soon; no helper threads. */
        check(sim_device_new(&(SimOptions) { .gpu_id = DGPU_ID, .igpu_first = true, .isa_helpers = -1,
                                             .max_dispatch_wave_instructions = 20000 },
                             &dev) == 0,
              "sim_device_new");
        check(gpu_context_new(sim_device_get_ops(dev), NULL, &device_ctx) == 0, "the daemon's GPU context");
        check(sim_remote_registry_new(&reg) == 0, "sim_remote_registry_new");
        char err[256];
        check(kfd_process_new(sim_device_get_ops(dev), NULL, KFD_PROCESS_SECONDARY,
                              gpu_context_get_info(device_ctx)->gpu_id,
                              gpu_context_get_info(device_ctx)->drm_render_minor, &neighbour, err, sizeof err) == 0,
              err);
        const KfdOps *o = kfd_process_daemon_ops(neighbour);
        neighbour_render = o->open_render(o->userdata, gpu_context_get_info(device_ctx)->drm_render_minor);
        check(neighbour_render >= 0, "the neighbour's render file");
        gpu_id = gpu_context_get_info(device_ctx)->gpu_id;
        other_gpu_id = gpu_id == DGPU_ID ? SIM_IGPU_GPU_ID : DGPU_ID;
        render_minor = gpu_context_get_info(device_ctx)->drm_render_minor;
        sim_device_get_stats(dev, &base_stats);
        debug = getenv("FUZZ_RELAY_IOCTL_DEBUG") != NULL;
        fd_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        check(fd_dir >= 0, "/proc/self/fd");
        atexit(teardown);
}

/* The fds of the process, the directory's own (open for the whole run)
 * included: read with getdents64() into a buffer of the target's, as
 * opendir() would allocate 32 KiB each time, which under ASan costs fresh
 * pages (its quarantine) three times an input. */
static unsigned count_fds(void) {
        static uint8_t buf[32768];
        unsigned n = 0;
        ssize_t got;

        check(lseek(fd_dir, 0, SEEK_SET) == 0, "rewinding /proc/self/fd");
        while ((got = getdents64(fd_dir, buf, sizeof buf)) > 0)
                for (ssize_t off = 0; off < got;) {
                        const struct dirent64 *de = (const struct dirent64 *) (buf + off);
                        if (de->d_name[0] != '.')
                                n++;
                        off += de->d_reclen;
                }
        check(got == 0, "reading /proc/self/fd");
        return n;
}

static uint64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* ---- The input ---- */

typedef struct Input {
        const uint8_t *p;
        size_t left;
} Input;

static uint64_t take(Input *in, unsigned n) {
        uint64_t v = 0;

        for (unsigned i = 0; i < n; i++)
                if (in->left > 0) {
                        v |= (uint64_t) *in->p++ << (8 * i);
                        in->left--;
                }
        return v;
}

static void take_bytes(Input *in, uint8_t *dst, size_t n) {
        size_t k = n < in->left ? n : in->left;

        memcpy(dst, in->p, k);
        memset(dst + k, 0, n - k);
        in->p += k;
        in->left -= k;
}

/* ---- Operations ---- */

#define N_REQUESTS (sizeof fuzz_relay_ioctl_requests / sizeof fuzz_relay_ioctl_requests[0])

/* A file operand: the KFD file, the render file, -1, or 4 bytes. */
static int32_t file_operand(Client *c, Input *in) {
        switch (take(in, 1) % 4) {
        case 0: return c->kfd;
        case 1: return c->render;
        case 2: return -1;
        default: return (int32_t) take(in, 4);
        }
}

static void put_field(uint8_t *arg, size_t usize, size_t off, uint64_t v, unsigned n) {
        if (off + n <= usize)
                memcpy(arg + off, &v, n);
}

/* IOCTL, with the argument from the input and fix-ups that make it
 * meaningful now and then. */
static bool op_ioctl(Client *c, Input *in) {
        static uint8_t msg[sizeof(SimRemoteRequest) + SIM_REMOTE_MAX_ARG + ARRAY_MAX];
        unsigned pick = (unsigned) take(in, 1);
        unsigned long request = pick >= RIO_PICK_RENDER_INFO ? fuzz_relay_ioctl_render_info[pick - RIO_PICK_RENDER_INFO]
                                : pick % (N_REQUESTS + 1) < N_REQUESTS ? fuzz_relay_ioctl_requests[pick % (N_REQUESTS + 1)]
                                                                       : (unsigned long) (uint32_t) take(in, 4);
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_IOCTL, .u64 = { (uint32_t) request } };
        uint8_t *arg = msg + sizeof req;
        size_t usize = _IOC_SIZE(request);

        req.fd = file_operand(c, in);
        unsigned flags = (unsigned) take(in, 1);
        bool arg_null = flags % 16 == 15;
        if (arg_null)
                req.flags = SIM_REMOTE_ARG_NULL;
        req.arg_size = arg_null ? 0 : (uint32_t) usize;
        size_t from_input = usize < 64 ? usize : 64;
        take_bytes(in, arg, from_input);
        memset(arg + from_input, 0, usize - from_input);

        /* Fix-ups: the client's GPU, its buffer or event, a short wait. */
        unsigned fix = (unsigned) take(in, 1);
        unsigned nr = _IOC_NR(request);
        bool kfd_call = _IOC_TYPE(request) == AMDKFD_IOCTL_BASE;
        if (kfd_call && (fix & RIO_FIX_GPU_ID)) {
                size_t off = 0;
                switch (nr) {
                case _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU):
                        off = offsetof(struct kfd_ioctl_alloc_memory_of_gpu_args, gpu_id);
                        break;
                case _IOC_NR(AMDKFD_IOC_ACQUIRE_VM):
                        off = offsetof(struct kfd_ioctl_acquire_vm_args, gpu_id);
                        put_field(arg, usize, offsetof(struct kfd_ioctl_acquire_vm_args, drm_fd),
                                  (uint32_t) (fix & RIO_FIX_NEIGHBOUR ? neighbour_render : c->render), 4);
                        break;
                case _IOC_NR(AMDKFD_IOC_IMPORT_DMABUF):
                        off = offsetof(struct kfd_ioctl_import_dmabuf_args, gpu_id);
                        break;
                case _IOC_NR(AMDKFD_IOC_GET_TILE_CONFIG):
                        off = offsetof(struct kfd_ioctl_get_tile_config_args, gpu_id);
                        break;
                case _IOC_NR(AMDKFD_IOC_AVAILABLE_MEMORY):
                        off = offsetof(struct kfd_ioctl_get_available_memory_args, gpu_id);
                        break;
                case _IOC_NR(AMDKFD_IOC_GET_CLOCK_COUNTERS):
                        off = offsetof(struct kfd_ioctl_get_clock_counters_args, gpu_id);
                        break;
                case _IOC_NR(AMDKFD_IOC_SET_MEMORY_POLICY):
                        off = offsetof(struct kfd_ioctl_set_memory_policy_args, gpu_id);
                        break;
                default:
                        break;
                }
                if (off)
                        put_field(arg, usize, off, fix & RIO_FIX_OTHER_GPU ? other_gpu_id : gpu_id, 4);
        }
        if (kfd_call && (fix & RIO_FIX_HANDLE) && c->n_bos > 0) {
                const Bo *b = &c->bos[(fix >> 4) % c->n_bos];
                switch (nr) {
                case _IOC_NR(AMDKFD_IOC_FREE_MEMORY_OF_GPU):
                case _IOC_NR(AMDKFD_IOC_MAP_MEMORY_TO_GPU):
                case _IOC_NR(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU):
                case _IOC_NR(AMDKFD_IOC_EXPORT_DMABUF):
                        put_field(arg, usize, 0, b->handle, 8); /* handle is the first field of each */
                        break;
                default:
                        break;
                }
        }
        if (kfd_call && (fix & RIO_FIX_EVENT) && c->event_id) {
                switch (nr) {
                case _IOC_NR(AMDKFD_IOC_DESTROY_EVENT):
                case _IOC_NR(AMDKFD_IOC_SET_EVENT):
                case _IOC_NR(AMDKFD_IOC_RESET_EVENT):
                        put_field(arg, usize, 0, c->event_id, 4);
                        break;
                default:
                        break;
                }
        }
        /* A request shorter (or longer) than its struct: the kernel reads
         * the bytes it has, zeros past them. */
        if (fix & RIO_FIX_SIZE) {
                size_t size = (size_t) take(in, 1);
                if (size > usize)
                        memset(arg + usize, 0, size - usize);
                request = (request & ~((unsigned long) _IOC_SIZEMASK << _IOC_SIZESHIFT)) |
                          (unsigned long) size << _IOC_SIZESHIFT;
                usize = size;
                req.u64[0] = (uint32_t) request;
                req.arg_size = arg_null ? 0 : (uint32_t) usize;
        }

        /* The array: what the argument asks for, or (fix bit 3) a length of
         * the input's own. */
        size_t array = 0;
        if (!arg_null) {
                uint8_t view[256];
                rio_view_of(request, arg, view, sizeof view);
                switch (sim_remote_ioctl_kind(request)) {
                case SIM_REMOTE_IOCTL_WAIT_EVENTS:
                        if (rio_field(view, 0, 8))
                                array = rio_field(view, offsetof(struct kfd_ioctl_wait_events_args, num_events), 4) *
                                        sizeof(struct kfd_event_data);
                        break;
                case SIM_REMOTE_IOCTL_MAP:
                        if (rio_field(view, offsetof(struct kfd_ioctl_map_memory_to_gpu_args, device_ids_array_ptr), 8))
                                array = rio_field(view, offsetof(struct kfd_ioctl_map_memory_to_gpu_args, n_devices), 4) *
                                        4;
                        break;
                case SIM_REMOTE_IOCTL_CU_MASK: {
                        uint64_t n = rio_field(view, offsetof(struct kfd_ioctl_set_cu_mask_args, num_cu_mask), 4);
                        if (rio_field(view, offsetof(struct kfd_ioctl_set_cu_mask_args, cu_mask_ptr), 8) && n % 32 == 0)
                                array = (n / 32 < SIM_REMOTE_MAX_CU_MASK ? n / 32 : SIM_REMOTE_MAX_CU_MASK) * 4;
                        break;
                }
                case SIM_REMOTE_IOCTL_AMDGPU_INFO: {
                        uint64_t n = rio_field(view, offsetof(struct drm_amdgpu_info, return_size), 4);
                        if (rio_field(view, offsetof(struct drm_amdgpu_info, return_pointer), 8))
                                array = n < SIM_REMOTE_MAX_INFO ? n : SIM_REMOTE_MAX_INFO;
                        break;
                }
                default:
                        break;
                }
        }
        if (fix & RIO_FIX_ARRAY_SIZE)
                array = take(in, 2) % 256;
        if (array > ARRAY_MAX)
                array = ARRAY_MAX; /* longer than its bound; the bytes do not matter */
        size_t from = array < 64 ? array : 64;
        take_bytes(in, arg + usize, from);
        memset(arg + usize + from, 0, array - from);
        if (kfd_call && nr == _IOC_NR(AMDKFD_IOC_WAIT_EVENTS) && array > 0 && (fix & RIO_FIX_EVENT) && c->event_id)
                for (size_t i = 0; i + sizeof(struct kfd_event_data) <= array; i += sizeof(struct kfd_event_data))
                        memcpy(arg + usize + i + offsetof(struct kfd_event_data, event_id), &c->event_id, 4);
        if (kfd_call && sim_remote_ioctl_kind(request) == SIM_REMOTE_IOCTL_MAP && array >= 4 && (fix & RIO_FIX_GPU_ID))
                memcpy(arg + usize, fix & RIO_FIX_OTHER_GPU ? &other_gpu_id : &gpu_id, 4);

        memcpy(msg, &req, sizeof req);
        int fd = (fix & RIO_FIX_FD) ? rio_make_fd(c, (unsigned) take(in, 1)) : -1;
        return rio_exchange(c, c->channel, msg, sizeof req + usize + array, fd);
}

/* A header alone. */
static bool op_plain(Client *c, uint32_t op, int32_t fd, uint64_t u0, uint64_t u1) {
        SimRemoteRequest req = { .op = op, .fd = fd, .u64 = { u0, u1 } };

        return rio_exchange(c, c->channel, (uint8_t *) &req, sizeof req, -1);
}

/* A raw message of the input's bytes. */
static bool op_raw(Client *c, Input *in, int sock) {
        static uint8_t msg[SIM_REMOTE_MAX_MESSAGE + 1];
        size_t n = (size_t) take(in, 2);

        n = n == 0xffff ? SIM_REMOTE_MAX_MESSAGE + 1 : n % (RAW_MAX + 1);
        take_bytes(in, msg, n < RAW_MAX ? n : RAW_MAX);
        if (n > RAW_MAX)
                memset(msg + RAW_MAX, 0, n - RAW_MAX);
        int fd = rio_make_fd(c, (unsigned) take(in, 1));
        return rio_exchange(c, sock, msg, n, fd);
}

static bool is_seqpacket(int fd) {
        int type = 0;
        socklen_t l = sizeof type;

        return fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) == 0 && type == SOCK_SEQPACKET;
}

/* A raw message on the control channel. Before the handshake only a HELLO
 * is answered (of another version: -EPROTONOSUPPORT, then the end); after
 * it only NEW_CHANNEL with a socket. Anything else ends the process. */
static void op_control(Client *c, Input *in) {
        uint8_t msg[64];
        size_t n = (size_t) take(in, 1) % sizeof msg;
        SimRemoteRequest req = { 0 };
        SimRemoteReply rep;
        int in_fd;

        take_bytes(in, msg, n);
        int fd = rio_make_fd(c, (unsigned) take(in, 1));
        if (n >= sizeof req)
                memcpy(&req, msg, sizeof req);
        bool header = n == sizeof req && req.flags == 0 && req.arg_size == 0 && req.u64[1] == 0;
        bool good = c->hello_done ? header && is_seqpacket(fd) && req.op == SIM_REMOTE_OP_NEW_CHANNEL && req.u64[0] == 0
                                  : header && fd < 0 && req.op == SIM_REMOTE_OP_HELLO &&
                                            (uint32_t) req.u64[0] == SIM_REMOTE_MAGIC;
        int r = rio_send(c->control, msg, n, fd);
        if (fd >= 0)
                close(fd);
        check(r == 0, "sending on the control channel");
        ssize_t got = rio_recv_answer(c, c->control, &in_fd);
        if (!good) {
                check(got == 0, "a malformed message on the control channel was answered");
                c->process_gone = true;
                return;
        }
        check(got >= (ssize_t) sizeof rep && in_fd < 0, "no answer to a good message on the control channel");
        memcpy(&rep, c->buf, sizeof rep);
        if (c->hello_done) {
                check(got == (ssize_t) sizeof rep, "NEW_CHANNEL: more than a reply");
                check(rep.ret == 0 || rep.ret == -EMFILE, "NEW_CHANNEL: an errno other than -EMFILE");
                /* Its other end was a socket of ours, closed: that channel ends at once. */
                return;
        }
        if (req.u64[0] >> 32 != SIM_REMOTE_VERSION) {
                check(rep.ret == -EPROTONOSUPPORT && got == (ssize_t) sizeof rep,
                      "HELLO of another version: not -EPROTONOSUPPORT");
                check(rio_recv_answer(c, c->control, &in_fd) == 0, "the process outlived a HELLO of another version");
                c->process_gone = true;
                return;
        }
        check(rep.ret == 0 && c->buf[got - 1] == '\0', "HELLO: no sysfs root");
        c->hello_done = true;
}

/* ALLOC and MAP as ROCr does them, recorded for later calls. */
static bool op_alloc(Client *c, Input *in) {
        unsigned k = (unsigned) take(in, 1);
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = 0x100000000ull + c->next_va,
                .size = (uint64_t) (k % 16 + 1) * 4096,
                .gpu_id = gpu_id,
                .flags = (k & 0x10 ? KFD_IOC_ALLOC_MEM_FLAGS_VRAM : KFD_IOC_ALLOC_MEM_FLAGS_GTT) |
                         KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC,
        };
        uint8_t msg[sizeof(SimRemoteRequest) + sizeof a + 4];
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_IOCTL, .fd = c->kfd, .arg_size = sizeof a,
                                 .u64 = { AMDKFD_IOC_ALLOC_MEMORY_OF_GPU } };
        SimRemoteReply rep;

        c->next_va += a.size + 0x10000;
        memcpy(msg, &req, sizeof req);
        memcpy(msg + sizeof req, &a, sizeof a);
        if (!rio_exchange(c, c->channel, msg, sizeof req + sizeof a, -1))
                return false;
        memcpy(&rep, c->buf, sizeof rep);
        if (rep.ret < 0)
                return true;
        memcpy(&a, c->buf + sizeof rep, sizeof a); /* learn() recorded it */
        struct kfd_ioctl_map_memory_to_gpu_args m = { .handle = a.handle, .device_ids_array_ptr = 0x1000,
                                                      .n_devices = 1 };
        req = (SimRemoteRequest) { .op = SIM_REMOTE_OP_IOCTL, .fd = c->kfd, .arg_size = sizeof m,
                                   .u64 = { AMDKFD_IOC_MAP_MEMORY_TO_GPU } };
        memcpy(msg, &req, sizeof req);
        memcpy(msg + sizeof req, &m, sizeof m);
        memcpy(msg + sizeof req + sizeof m, &gpu_id, 4);
        return rio_exchange(c, c->channel, msg, sizeof req + sizeof m + 4, -1);
}

/* Whether a buffer of the client's that is not freed holds [offset, offset + length). */
static bool live_bo_holds(const Client *c, uint64_t offset, uint64_t length) {
        for (unsigned i = 0; i < c->n_bos; i++) {
                const Bo *b = &c->bos[i];
                if (!b->freed && offset < b->mmap_offset + b->size && offset + length > b->mmap_offset)
                        return true;
        }
        return false;
}

/* MMAP; of a buffer the client freed (and no live one there): refused —
 * unless it was exported or mapped, which keeps the kernel's object (and
 * its mmap offset) alive beyond the handle, or the client made a buffer it
 * cannot place, which may hold that offset now. */
static bool op_mmap(Client *c, Input *in) {
        unsigned k = (unsigned) take(in, 1);
        int32_t fd = file_operand(c, in);
        uint64_t offset, length;
        bool of_freed = false;
        Bo *b = NULL;

        if (k & 1 && c->n_bos > 0) {
                b = &c->bos[(k >> 1) % c->n_bos];
                offset = b->mmap_offset + (uint64_t) ((k >> 4) % 4) * 4096;
                length = (uint64_t) (take(in, 1) % 4 + 1) * 4096;
                of_freed = b->freed && !b->held && !live_bo_holds(c, offset, length) && !c->unknown_bos;
                if (c->debug)
                        fprintf(stderr, "fuzz-relay-ioctl: MMAP at 0x%llx of buffer %u of %u:%s%s%s%s\n",
                                (unsigned long long) offset, (unsigned) (b - c->bos), c->n_bos,
                                b->freed ? " freed" : "", b->held ? " held" : "",
                                live_bo_holds(c, offset, length) ? ", a live buffer there" : "",
                                c->unknown_bos ? ", buffers the client cannot place" : "");
        } else {
                offset = take(in, 8);
                length = take(in, 8);
        }
        if (!op_plain(c, SIM_REMOTE_OP_MMAP, fd, length, offset))
                return false;
        SimRemoteReply rep;
        memcpy(&rep, c->buf, sizeof rep);
        check(!of_freed || rep.ret < 0, "MMAP of a buffer the client freed");
        if (b && rep.ret == 0)
                b->held = true;
        return true;
}

static bool run_op(Client *c, Input *in) {
        unsigned op = (unsigned) take(in, 1) % RIO_OP_COUNT;

        switch (op) {
        case RIO_OP_RAW: return op_raw(c, in, c->channel);
        case RIO_OP_IOCTL: return op_ioctl(c, in);
        case RIO_OP_OPEN_KFD: return op_plain(c, SIM_REMOTE_OP_OPEN_KFD, -1, 0, 0);
        case RIO_OP_OPEN_RENDER: {
                uint64_t minor = take(in, 1) & 1 ? take(in, 4) : render_minor;
                return op_plain(c, SIM_REMOTE_OP_OPEN_RENDER, -1, minor, 0);
        }
        case RIO_OP_CLOSE: return op_plain(c, SIM_REMOTE_OP_CLOSE, file_operand(c, in), 0, 0);
        case RIO_OP_MMAP: return op_mmap(c, in);
        case RIO_OP_EXCEPTION_INFO: {
                int32_t fd = file_operand(c, in);
                return op_plain(c, SIM_REMOTE_OP_EXCEPTION_INFO, fd, take(in, 2), 0);
        }
        case RIO_OP_DOORBELL: {
                int32_t fd = file_operand(c, in);
                return op_plain(c, SIM_REMOTE_OP_DOORBELL, fd, take(in, 1), 0);
        }
        case RIO_OP_NEW_CHANNEL: (void) rio_new_channel(c); return true;
        case RIO_OP_CONTROL: op_control(c, in); return true;
        default: return op_alloc(c, in);
        }
}

/* ---- One input ---- */

static bool device_back(void) {
        SimDeviceStats st;

        sim_device_get_stats(dev, &st);
        return st.processes == base_stats.processes && st.contexts == base_stats.contexts &&
               st.queues == base_stats.queues && st.files == base_stats.files &&
               st.remote_processes == base_stats.remote_processes && st.gem_handles == base_stats.gem_handles;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static uint8_t reply_buf[SIM_REMOTE_MAX_MESSAGE + 1];
        Input in = { .p = data, .left = size };
        Client c = { .control = -1, .channel = -1, .kfd = -1, .render = -1, .buf = reply_buf };
        KfdProcess *kp = NULL;
        GpuContext *daemon_gpu = NULL;
        char err[256];
        int sv[2];

        bring_up();
        c.render_minor = render_minor;
        c.debug = debug;
        unsigned fds_before = count_fds();
        unsigned flags = (unsigned) take(&in, 1);
        c.reach = (RioReach) { .gpu_id = gpu_id, .other_gpu_id = other_gpu_id, .render = { -1, -1, -1, -1 },
                               .kfd = -1, .relayed = !(flags & RIO_FLAG_SIM_PROCESS) };

        check(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
        pthread_mutex_lock(&end_lock);
        ended = false;
        pthread_mutex_unlock(&end_lock);
        bool threads = (flags & RIO_FLAG_THREADS) == RIO_FLAG_THREADS;
        SimRemoteServer **driven = threads ? NULL : &c.server;
        if (flags & RIO_FLAG_SIM_PROCESS)
                check((driven ? sim_remote_serve_driven(dev, sv[0], &hooks, NULL, driven)
                              : sim_remote_serve_hooked(dev, sv[0], &hooks, NULL)) == 0,
                      "serving a simulated process");
        else {
                check(kfd_process_new(sim_device_get_ops(dev), NULL, KFD_PROCESS_SECONDARY, gpu_id, render_minor, &kp,
                                      err, sizeof err) == 0,
                      err);
                SimRemoteProcess served = kfd_process_served(kp);
                if (flags & RIO_FLAG_DAEMON_CONTEXT) {
                        /* As context-pool.c brings it up in a relayed process. */
                        GpuContextOptions o = { .flags = GPU_CONTEXT_CLIENT | GPU_CONTEXT_NO_SDMA |
                                                         GPU_CONTEXT_NO_COMPUTE };
                        check(gpu_context_new(kfd_process_daemon_ops(kp), &o, &daemon_gpu) == 0,
                              "the daemon's GPU context in the relayed process");
                }
                check((driven ? sim_remote_serve_process_driven(reg, sv[0], &served, &hooks, NULL, driven)
                              : sim_remote_serve_process(reg, sv[0], &served, &hooks, NULL)) == 0,
                      "serving the KFD process");
        }
        c.control = sv[1];
        rio_client_socket(&c, c.control);

        if (!(flags & RIO_FLAG_NO_HANDSHAKE)) {
                rio_handshake(&c);
                check(rio_new_channel(&c) == 0, "the first channel");
        }
        while (in.left > 0 && !c.process_gone) {
                if (c.channel < 0) {
                        /* Before a handshake only the control channel
                         * speaks; after it, a channel first. */
                        if (!c.hello_done || rio_new_channel(&c) < 0)
                                op_control(&c, &in);
                        continue;
                }
                if (!run_op(&c, &in) && !c.process_gone)
                        rio_after_channel_end(&c);
        }

        /* The client hangs up; the server ends the process. */
        if (c.channel >= 0)
                close(c.channel);
        close(c.control);
        for (unsigned i = 0; i < c.n_kept; i++)
                close(c.kept[i]);
        if (c.server)
                check(sim_remote_server_run(c.server) == 0, "the server outlived the client's hang-up");
        uint64_t deadline = now_ms() + 10000;
        pthread_mutex_lock(&end_lock);
        while (!ended && now_ms() < deadline) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 10 * 1000000;
                if (ts.tv_nsec >= 1000000000) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000;
                }
                pthread_cond_timedwait(&end_cond, &end_lock, &ts);
        }
        bool done = ended;
        pthread_mutex_unlock(&end_lock);
        check(done, "the server did not end within 10 s of the client's hang-up");
        daemon_gpu = gpu_context_free(daemon_gpu);

        /* Engine threads may hold a buffer's memfd a moment longer. */
        deadline = now_ms() + 2000;
        bool back;
        unsigned fds_after = 0;
        while ((!(back = device_back()) || (fds_after = count_fds()) != fds_before) && now_ms() < deadline)
                usleep(1000);
        if (debug || !back) {
                SimDeviceStats st;
                sim_device_get_stats(dev, &st);
                fprintf(stderr, "fuzz-relay-ioctl: the device holds processes %u/%u contexts %u/%u queues %u/%u "
                                "files %u/%u remote processes %u/%u GEM handles %u/%u\n",
                        st.processes, base_stats.processes, st.contexts, base_stats.contexts, st.queues,
                        base_stats.queues, st.files, base_stats.files, st.remote_processes,
                        base_stats.remote_processes, st.gem_handles, base_stats.gem_handles);
        }
        check(back, "the device holds more (files, contexts, processes, GEM handles) than before");
        check(fds_after == fds_before, "an fd outlived the client");
        return 0;
}
