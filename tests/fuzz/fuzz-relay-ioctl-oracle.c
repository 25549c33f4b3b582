/* SPDX-License-Identifier: MIT */
/*
 * fuzz-relay-ioctl's oracle (fuzz-relay-ioctl.c says what it checks): which
 * messages sim-remote-protocol.h says end a channel, and what a reply to an
 * IOCTL may hold.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fuzz-relay-ioctl.h"
#include "sim/sim-remote-protocol.h"

/* ---- The oracle: does the server end the channel on this message? ---- */

/* The struct as the kernel reads it: the request's bytes if the kernel's
 * own table copies them in — kfd_ioctl() takes the direction from
 * amdkfd_ioctls[nr], not from the request word ("Do not trust userspace,
 * use our own definition", kfd_chardev.c) — zeros otherwise, and zeros past
 * its size. */
void rio_view_of(unsigned long request, const uint8_t *arg, uint8_t *view, size_t view_size) {
        size_t usize = _IOC_SIZE(request);

        memset(view, 0, view_size);
        if (sim_remote_ioctl_dir(request) & _IOC_WRITE)
                memcpy(view, arg, usize < view_size ? usize : view_size);
}

uint64_t rio_field(const uint8_t *view, size_t off, unsigned n) {
        uint64_t v = 0;

        memcpy(&v, view + off, n);
        return v;
}

static bool ioctl_malformed(const SimRemoteRequest *req, const uint8_t *payload, size_t payload_size, bool has_fd) {
        unsigned long request = (unsigned long) req->u64[0];
        bool arg_null = req->flags & SIM_REMOTE_ARG_NULL;
        size_t usize = _IOC_SIZE(request);
        uint8_t view[256];

        if (req->u64[0] > UINT32_MAX || req->u64[1] != 0 || (req->flags & ~SIM_REMOTE_ARG_NULL))
                return true;
        if (req->arg_size != (arg_null ? 0 : usize) || payload_size < req->arg_size)
                return true;
        SimRemoteIoctlKind kind = sim_remote_ioctl_kind(request);
        if (kind == SIM_REMOTE_IOCTL_REFUSED || kind == SIM_REMOTE_IOCTL_PLAIN || kind == SIM_REMOTE_IOCTL_ACQUIRE_VM)
                return has_fd || payload_size != req->arg_size;
        if (arg_null)
                return has_fd || payload_size != 0;
        size_t array = payload_size - usize;
        rio_view_of(request, payload, view, sizeof view);
        switch (kind) {
        case SIM_REMOTE_IOCTL_WAIT_EVENTS: {
                uint64_t ptr = rio_field(view, offsetof(struct kfd_ioctl_wait_events_args, events_ptr), 8);
                uint64_t num = rio_field(view, offsetof(struct kfd_ioctl_wait_events_args, num_events), 4);
                if (has_fd)
                        return true;
                if (ptr && num)
                        return num > SIM_REMOTE_MAX_WAIT_EVENTS || array != num * sizeof(struct kfd_event_data);
                return array != 0;
        }
        case SIM_REMOTE_IOCTL_MAP: {
                uint64_t ptr = rio_field(view, offsetof(struct kfd_ioctl_map_memory_to_gpu_args, device_ids_array_ptr), 8);
                uint64_t num = rio_field(view, offsetof(struct kfd_ioctl_map_memory_to_gpu_args, n_devices), 4);
                if (has_fd)
                        return true;
                if (ptr && num)
                        return num > SIM_REMOTE_MAX_DEVICE_IDS || array != num * 4;
                return array != 0;
        }
        case SIM_REMOTE_IOCTL_CU_MASK: {
                uint64_t ptr = rio_field(view, offsetof(struct kfd_ioctl_set_cu_mask_args, cu_mask_ptr), 8);
                uint64_t num = rio_field(view, offsetof(struct kfd_ioctl_set_cu_mask_args, num_cu_mask), 4);
                if (has_fd)
                        return true;
                if (ptr && num && num % 32 == 0)
                        return array != (num / 32 < SIM_REMOTE_MAX_CU_MASK ? num / 32 : SIM_REMOTE_MAX_CU_MASK) * 4;
                return array != 0;
        }
        case SIM_REMOTE_IOCTL_IMPORT_DMABUF:
        case SIM_REMOTE_IOCTL_DMABUF_INFO:
                return array != 0;
        case SIM_REMOTE_IOCTL_AMDGPU_INFO: {
                /* Its answer's buffer goes in, at most SIM_REMOTE_MAX_INFO. */
                uint64_t ptr = rio_field(view, offsetof(struct drm_amdgpu_info, return_pointer), 8);
                uint64_t size = rio_field(view, offsetof(struct drm_amdgpu_info, return_size), 4);
                if (has_fd)
                        return true;
                if (ptr && size)
                        return array != (size < SIM_REMOTE_MAX_INFO ? size : SIM_REMOTE_MAX_INFO);
                return array != 0;
        }
        case SIM_REMOTE_IOCTL_APERTURES:
        case SIM_REMOTE_IOCTL_EXPORT_DMABUF:
        case SIM_REMOTE_IOCTL_TILE_CONFIG:
        case SIM_REMOTE_IOCTL_PRIME_TO_FD:
        case SIM_REMOTE_IOCTL_DRM_VERSION:
                return has_fd || array != 0;
        default:
                check(false, "a kind of ioctl the target does not know");
                return true;
        }
}

bool rio_malformed(const uint8_t *msg, size_t n, bool has_fd) {
        SimRemoteRequest req;

        if (n < sizeof req || n > SIM_REMOTE_MAX_MESSAGE)
                return true;
        memcpy(&req, msg, sizeof req);
        const uint8_t *payload = msg + sizeof req;
        size_t payload_size = n - sizeof req;
        bool plain = payload_size == 0 && req.arg_size == 0 && req.flags == 0 && !has_fd;
        switch (req.op) {
        case SIM_REMOTE_OP_OPEN_KFD:
                return !plain || req.u64[0] != 0 || req.u64[1] != 0;
        case SIM_REMOTE_OP_OPEN_RENDER:
                return !plain || req.u64[0] > UINT32_MAX || req.u64[1] != 0;
        case SIM_REMOTE_OP_CLOSE:
                return !plain || req.u64[0] != 0 || req.u64[1] != 0;
        case SIM_REMOTE_OP_IOCTL:
                return ioctl_malformed(&req, payload, payload_size, has_fd);
        case SIM_REMOTE_OP_MMAP:
                return !plain;
        case SIM_REMOTE_OP_EXCEPTION_INFO:
                return !plain || req.u64[1] != 0;
        case SIM_REMOTE_OP_DOORBELL:
                return !plain || req.u64[0] > UINT32_MAX || req.u64[1] != 0;
        default:
                return true;
        }
}

/* ---- The replies ---- */

void rio_check_errno(int32_t r) {
        check(r <= 0 && r > -4096, "ret is neither 0 nor a negative errno");
}

/* What comes back of a field the server replaced: the client's bytes. */
static void check_restored(const uint8_t *sent, const uint8_t *got, size_t usize, size_t off, size_t size,
                           const char *what) {
        char msg[160];

        if (off >= usize)
                return;
        if (size > usize - off)
                size = usize - off;
        snprintf(msg, sizeof msg, "%s comes back other than the client sent it", what);
        check(memcmp(sent + off, got + off, size) == 0, msg);
}

#define RESTORED(type, member, what) \
        check_restored(sent, got, usize, offsetof(type, member), sizeof(((type *) NULL)->member), what)

/* Where a call's argument names a GPU (kfd_ioctl.h), or 0. */
static size_t gpu_id_at(unsigned long request) {
        if (_IOC_TYPE(request) != AMDKFD_IOCTL_BASE)
                return 0;
        switch (_IOC_NR(request)) {
        case _IOC_NR(AMDKFD_IOC_CREATE_QUEUE): return offsetof(struct kfd_ioctl_create_queue_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_SET_MEMORY_POLICY): return offsetof(struct kfd_ioctl_set_memory_policy_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_GET_CLOCK_COUNTERS): return offsetof(struct kfd_ioctl_get_clock_counters_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_SET_SCRATCH_BACKING_VA):
                return offsetof(struct kfd_ioctl_set_scratch_backing_va_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_GET_TILE_CONFIG): return offsetof(struct kfd_ioctl_get_tile_config_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_SET_TRAP_HANDLER): return offsetof(struct kfd_ioctl_set_trap_handler_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_ACQUIRE_VM): return offsetof(struct kfd_ioctl_acquire_vm_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU): return offsetof(struct kfd_ioctl_alloc_memory_of_gpu_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_AVAILABLE_MEMORY): return offsetof(struct kfd_ioctl_get_available_memory_args, gpu_id);
        case _IOC_NR(AMDKFD_IOC_IMPORT_DMABUF): return offsetof(struct kfd_ioctl_import_dmabuf_args, gpu_id);
        default: return 0;
        }
}

/* What the client may reach, checked on a call that succeeded. kdata: the
 * argument as the kernel reads it; got, size: what came back of it. */
static void check_reach(const RioReach *reach, unsigned long request, const uint8_t *kdata, const uint8_t *got,
                        size_t size) {
        size_t at = gpu_id_at(request);

        /* A simulated process stands for a worker's KFD process, which sees
         * every GPU of the machine, as the kernel shows any process; only a
         * relayed process is kept to its session's GPU. */
        if (!reach->relayed)
                return;
        /* The old apertures call: every node listed (whole or in part) is the client's GPU. */
        if (_IOC_TYPE(request) == AMDKFD_IOCTL_BASE && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_GET_PROCESS_APERTURES))
                for (size_t i = 0; i < NUM_OF_SUPPORTED_GPUS; i++) {
                        size_t off = offsetof(struct kfd_ioctl_get_process_apertures_args, process_apertures) +
                                     i * sizeof(struct kfd_process_device_apertures) +
                                     offsetof(struct kfd_process_device_apertures, gpu_id);
                        uint8_t id[4] = { 0 }, mine[4], none[4] = { 0 };
                        size_t n = off < size ? (size - off < 4 ? size - off : 4) : 0;
                        memcpy(id, got + off, n);
                        memcpy(mine, &reach->gpu_id, 4);
                        check(memcmp(id, mine, n) == 0 || memcmp(id, none, n) == 0,
                              "GET_PROCESS_APERTURES: a GPU the client may not see");
                }

        if (at > 0)
                check(rio_field(kdata, at, 4) != reach->other_gpu_id, "a call that names the other GPU succeeded");
        /* A relayed process's queues are the relay's to make (docs/rocm.md):
         * the calls that make, change or read them, and those ROCr does not
         * make, never reach its KFD context. */
        if (_IOC_TYPE(request) == AMDKFD_IOCTL_BASE)
                switch (_IOC_NR(request)) {
                case _IOC_NR(AMDKFD_IOC_CREATE_QUEUE):
                case _IOC_NR(AMDKFD_IOC_DESTROY_QUEUE):
                case _IOC_NR(AMDKFD_IOC_UPDATE_QUEUE):
                case _IOC_NR(AMDKFD_IOC_SET_CU_MASK):
                case _IOC_NR(AMDKFD_IOC_GET_QUEUE_WAVE_STATE):
                case _IOC_NR(AMDKFD_IOC_ALLOC_QUEUE_GWS):
                case _IOC_NR(AMDKFD_IOC_SMI_EVENTS):
                case _IOC_NR(AMDKFD_IOC_SVM):
                case _IOC_NR(AMDKFD_IOC_CRIU_OP):
                        check(false, "a relayed process made a queue, SVM, SMI or CRIU call");
                        break;
                default:
                        break;
                }
        if (_IOC_TYPE(request) == AMDKFD_IOCTL_BASE && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_ACQUIRE_VM)) {
                int32_t drm_fd = (int32_t) rio_field(kdata, offsetof(struct kfd_ioctl_acquire_vm_args, drm_fd), 4);
                bool given = false;
                for (unsigned i = 0; i < sizeof reach->render / sizeof reach->render[0]; i++)
                        given |= reach->render[i] >= 0 && drm_fd == reach->render[i];
                check(given, "ACQUIRE_VM of a file that is not a render file the client was given succeeded");
        }
}

void rio_check_ioctl_reply(const RioReach *reach, const SimRemoteRequest *req, const uint8_t *payload,
                              const SimRemoteReply *rep, const uint8_t *got, size_t array, int fd) {
        unsigned long request = (unsigned long) req->u64[0];
        bool arg_null = req->flags & SIM_REMOTE_ARG_NULL;
        size_t usize = _IOC_SIZE(request);
        SimRemoteIoctlKind kind = sim_remote_ioctl_kind(request);
        /* The argument comes back where the kernel's table copies it out. */
        bool reads = !arg_null && (sim_remote_ioctl_dir(request) & _IOC_READ) && kind != SIM_REMOTE_IOCTL_REFUSED;
        uint8_t sent[SIM_REMOTE_MAX_ARG + 1], view[256];

        rio_check_errno(rep->ret);
        if (rep->ret >= 0 && !arg_null && kind != SIM_REMOTE_IOCTL_REFUSED) {
                uint8_t kdata[256];
                rio_view_of(request, payload, kdata, sizeof kdata);
                check_reach(reach, request, kdata, got, rep->arg_size);
        }
        check(rep->arg_size == (reads ? usize : 0), "the argument back is not the request's size (or is there "
                                                    "when the kernel's table does not copy it out)");
        if (kind == SIM_REMOTE_IOCTL_REFUSED)
                check(rep->ret == -ENOTTY, "a refused ioctl answered other than -ENOTTY");
        else if (reach->relayed) {
                /* Its two files only (once it knows both numbers, any other
                 * is none of its); on the render file, which is the
                 * daemon's, nothing. */
                bool render = false;
                for (unsigned i = 0; i < sizeof reach->render / sizeof reach->render[0]; i++)
                        render |= reach->render[i] >= 0 && req->fd == reach->render[i];
                /* but what libdrm asks of the GPU itself (context-kfd-render.c):
                 * DRM_IOCTL_VERSION and AMDGPU_INFO, whose usage queries are
                 * -EACCES there too. */
                if (render)
                        check(rep->ret == -EACCES || kind == SIM_REMOTE_IOCTL_DRM_VERSION ||
                                      kind == SIM_REMOTE_IOCTL_AMDGPU_INFO,
                              "a call on a relayed process's render file answered other than -EACCES");
                else if (req->fd != reach->kfd && reach->kfd >= 0 && reach->render[0] >= 0)
                        check(rep->ret == -EBADF, "a call on a number that is not a relayed process's file "
                                                  "answered other than -EBADF");
        }
        bool gives_fd = (kind == SIM_REMOTE_IOCTL_EXPORT_DMABUF || kind == SIM_REMOTE_IOCTL_PRIME_TO_FD) &&
                        !arg_null && rep->ret >= 0;
        check(gives_fd == (fd >= 0), "an fd with an ioctl's answer where none belongs, or none where one does");
        if (arg_null) {
                check(array == 0, "an array with an ioctl whose argument is NULL");
                return;
        }
        memcpy(sent, payload, usize);
        rio_view_of(request, payload, view, sizeof view);
        switch (kind) {
        case SIM_REMOTE_IOCTL_WAIT_EVENTS: {
                uint64_t ptr = rio_field(view, offsetof(struct kfd_ioctl_wait_events_args, events_ptr), 8);
                uint64_t num = rio_field(view, offsetof(struct kfd_ioctl_wait_events_args, num_events), 4);
                check(array == (ptr && num ? num * sizeof(struct kfd_event_data) : 0),
                      "WAIT_EVENTS: the events back are not the events sent");
                if (reads)
                        RESTORED(struct kfd_ioctl_wait_events_args, events_ptr, "WAIT_EVENTS events_ptr");
                break;
        }
        case SIM_REMOTE_IOCTL_MAP:
                check(array == 0, "MAP/UNMAP: an array back");
                if (reads)
                        RESTORED(struct kfd_ioctl_map_memory_to_gpu_args, device_ids_array_ptr,
                                 "MAP/UNMAP device_ids_array_ptr");
                break;
        case SIM_REMOTE_IOCTL_APERTURES: {
                uint64_t num = rio_field(view, offsetof(struct kfd_ioctl_get_process_apertures_new_args, num_of_nodes), 4);
                check(array % sizeof(struct kfd_process_device_apertures) == 0 &&
                              array / sizeof(struct kfd_process_device_apertures) <=
                                      (num < SIM_REMOTE_MAX_APERTURES ? num : SIM_REMOTE_MAX_APERTURES),
                      "APERTURES_NEW: more apertures back than asked for");
                check(rep->ret >= 0 || array == 0, "APERTURES_NEW: apertures with a failure");
                if (reads)
                        RESTORED(struct kfd_ioctl_get_process_apertures_new_args, kfd_process_device_apertures_ptr,
                                 "APERTURES_NEW kfd_process_device_apertures_ptr");
                if (reads && rep->ret < 0)
                        RESTORED(struct kfd_ioctl_get_process_apertures_new_args, num_of_nodes,
                                 "APERTURES_NEW num_of_nodes after a failure");
                for (size_t i = 0; rep->ret >= 0 && i < array / sizeof(struct kfd_process_device_apertures); i++) {
                        struct kfd_process_device_apertures a;
                        memcpy(&a, got + usize + i * sizeof a, sizeof a);
                        check(!reach->relayed || a.gpu_id == reach->gpu_id,
                              "APERTURES_NEW: a GPU the client may not see");
                }
                break;
        }
        case SIM_REMOTE_IOCTL_IMPORT_DMABUF:
                check(array == 0, "IMPORT_DMABUF: an array back");
                if (reads)
                        RESTORED(struct kfd_ioctl_import_dmabuf_args, dmabuf_fd, "IMPORT_DMABUF dmabuf_fd");
                break;
        case SIM_REMOTE_IOCTL_DMABUF_INFO: {
                uint64_t ptr = rio_field(view, offsetof(struct kfd_ioctl_get_dmabuf_info_args, metadata_ptr), 8);
                uint64_t size = rio_field(view, offsetof(struct kfd_ioctl_get_dmabuf_info_args, metadata_size), 4);
                check(array <= (ptr ? (size < SIM_REMOTE_MAX_METADATA ? size : SIM_REMOTE_MAX_METADATA) : 0),
                      "GET_DMABUF_INFO: more metadata back than asked for");
                check(rep->ret >= 0 || array == 0, "GET_DMABUF_INFO: metadata with a failure");
                if (reads) {
                        RESTORED(struct kfd_ioctl_get_dmabuf_info_args, dmabuf_fd, "GET_DMABUF_INFO dmabuf_fd");
                        RESTORED(struct kfd_ioctl_get_dmabuf_info_args, metadata_ptr, "GET_DMABUF_INFO metadata_ptr");
                }
                break;
        }
        case SIM_REMOTE_IOCTL_EXPORT_DMABUF:
                check(array == 0, "EXPORT_DMABUF: an array back");
                if (reads) {
                        RESTORED(struct kfd_ioctl_export_dmabuf_args, flags, "EXPORT_DMABUF flags");
                        if (rep->ret >= 0)
                                check(usize < offsetof(struct kfd_ioctl_export_dmabuf_args, dmabuf_fd) + 4 ||
                                              rio_field(got, offsetof(struct kfd_ioctl_export_dmabuf_args, dmabuf_fd),
                                                    4) == 0,
                                      "EXPORT_DMABUF: the daemon's fd number in dmabuf_fd");
                }
                break;
        case SIM_REMOTE_IOCTL_PRIME_TO_FD:
                check(array == 0, "PRIME_HANDLE_TO_FD: an array back");
                if (reads) {
                        RESTORED(struct drm_prime_handle, flags, "PRIME_HANDLE_TO_FD flags");
                        if (rep->ret >= 0)
                                check(usize < offsetof(struct drm_prime_handle, fd) + 4 ||
                                              rio_field(got, offsetof(struct drm_prime_handle, fd), 4) == 0,
                                      "PRIME_HANDLE_TO_FD: the daemon's fd number in fd");
                }
                break;
        case SIM_REMOTE_IOCTL_TILE_CONFIG: {
                uint64_t nt = rio_field(view, offsetof(struct kfd_ioctl_get_tile_config_args, num_tile_configs), 4);
                uint64_t nm = rio_field(view, offsetof(struct kfd_ioctl_get_tile_config_args, num_macro_tile_configs), 4);
                uint64_t room = (nt < SIM_REMOTE_MAX_TILE_CONFIGS ? nt : SIM_REMOTE_MAX_TILE_CONFIGS) +
                                (nm < SIM_REMOTE_MAX_TILE_CONFIGS ? nm : SIM_REMOTE_MAX_TILE_CONFIGS);
                check(array % 4 == 0 && array / 4 <= room, "GET_TILE_CONFIG: more configs back than asked for");
                check(rep->ret >= 0 || array == 0, "GET_TILE_CONFIG: configs with a failure");
                if (reads) {
                        RESTORED(struct kfd_ioctl_get_tile_config_args, tile_config_ptr, "GET_TILE_CONFIG tile_config_ptr");
                        RESTORED(struct kfd_ioctl_get_tile_config_args, macro_tile_config_ptr,
                                 "GET_TILE_CONFIG macro_tile_config_ptr");
                }
                break;
        }
        case SIM_REMOTE_IOCTL_CU_MASK:
                check(array == 0, "SET_CU_MASK: an array back");
                if (reads)
                        RESTORED(struct kfd_ioctl_set_cu_mask_args, cu_mask_ptr, "SET_CU_MASK cu_mask_ptr");
                break;
        case SIM_REMOTE_IOCTL_DRM_VERSION: {
                /* Each string's room, at most SIM_REMOTE_MAX_VERSION_FIELD,
                 * in one array; the process's own pointers back, and its
                 * lengths when it failed. */
                static const size_t lens[3] = { offsetof(struct drm_version, name_len),
                                                offsetof(struct drm_version, date_len),
                                                offsetof(struct drm_version, desc_len) };
                uint64_t room = 0;
                for (unsigned i = 0; i < 3; i++) {
                        uint64_t len = rio_field(view, lens[i], sizeof(__kernel_size_t));
                        room += len < SIM_REMOTE_MAX_VERSION_FIELD ? len : SIM_REMOTE_MAX_VERSION_FIELD;
                }
                check(array == (rep->ret >= 0 ? room : 0), "DRM_VERSION: the strings back are not the room asked for");
                if (reads) {
                        RESTORED(struct drm_version, name, "DRM_VERSION name");
                        RESTORED(struct drm_version, date, "DRM_VERSION date");
                        RESTORED(struct drm_version, desc, "DRM_VERSION desc");
                }
                if (reads && rep->ret < 0) {
                        RESTORED(struct drm_version, name_len, "DRM_VERSION name_len after a failure");
                        RESTORED(struct drm_version, date_len, "DRM_VERSION date_len after a failure");
                        RESTORED(struct drm_version, desc_len, "DRM_VERSION desc_len after a failure");
                }
                break;
        }
        case SIM_REMOTE_IOCTL_AMDGPU_INFO: {
                uint64_t ptr = rio_field(view, offsetof(struct drm_amdgpu_info, return_pointer), 8);
                uint64_t size = rio_field(view, offsetof(struct drm_amdgpu_info, return_size), 4);
                uint64_t room = ptr && size ? (size < SIM_REMOTE_MAX_INFO ? size : SIM_REMOTE_MAX_INFO) : 0;
                check(array == (rep->ret >= 0 ? room : 0), "AMDGPU_INFO: the answer back is not the buffer sent");
                break;
        }
        default:
                /* Numbers only: the simulator's own answer. */
                check(array == 0, "an array with the answer of an ioctl that carries none");
                break;
        }
}
