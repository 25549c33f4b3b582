/* SPDX-License-Identifier: MIT */
/*
 * The sim-remote wire (sim-remote-protocol.h): which ioctl fields need more
 * than a copy of the struct, and one-message send/receive with at most one
 * fd attached.
 */
#include <errno.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <amdgpu_drm.h>

#include "kfd/kfd-ioctl-table.h"
#include "kfd/kfd-uapi.h"
#include "sim-device.h"
#include "sim-remote-protocol.h"
#include "util/macro.h"

/* MAP and UNMAP share one layout, which the server reads through the MAP struct. */
_Static_assert(offsetof(struct kfd_ioctl_map_memory_to_gpu_args, device_ids_array_ptr) ==
                       offsetof(struct kfd_ioctl_unmap_memory_from_gpu_args, device_ids_array_ptr) &&
               offsetof(struct kfd_ioctl_map_memory_to_gpu_args, n_devices) ==
                       offsetof(struct kfd_ioctl_unmap_memory_from_gpu_args, n_devices) &&
               sizeof(struct kfd_ioctl_map_memory_to_gpu_args) ==
                       sizeof(struct kfd_ioctl_unmap_memory_from_gpu_args),
               "MAP and UNMAP arguments differ");

SimRemoteIoctlKind sim_remote_ioctl_kind(unsigned long request) {
        unsigned nr = _IOC_NR(request);

        /* The render node's calls (sim-drm.c): GEM_CREATE, GEM_CLOSE and
         * GEM_MMAP carry numbers only; PRIME_HANDLE_TO_FD makes an fd. The
         * same words on a KFD fd are KFD numbers 0x40, 0x41 and 0x2d (past
         * every table: -EINVAL or -ENOTTY, nothing read) and 0x09
         * (DESTROY_EVENT, numbers only). */
        if (request == DRM_IOCTL_PRIME_HANDLE_TO_FD)
                return SIM_REMOTE_IOCTL_PRIME_TO_FD;
        /* What libdrm asks of a render node (sim-drm-info.c); on a KFD fd
         * numbers 0x00 (before KFD's first: -EINVAL) and 0x45 (past every
         * table), which read nothing. */
        if (request == DRM_IOCTL_VERSION)
                return SIM_REMOTE_IOCTL_DRM_VERSION;
        if (request == DRM_IOCTL_AMDGPU_INFO)
                return SIM_REMOTE_IOCTL_AMDGPU_INFO;
        if (request == DRM_IOCTL_AMDGPU_GEM_CREATE || request == DRM_IOCTL_GEM_CLOSE ||
            request == DRM_IOCTL_AMDGPU_GEM_MMAP)
                return SIM_REMOTE_IOCTL_PLAIN;
        switch (nr) {
        case _IOC_NR(AMDKFD_IOC_ACQUIRE_VM):
                return SIM_REMOTE_IOCTL_ACQUIRE_VM;
        case _IOC_NR(AMDKFD_IOC_GET_PROCESS_APERTURES_NEW):
                return SIM_REMOTE_IOCTL_APERTURES;
        case _IOC_NR(AMDKFD_IOC_MAP_MEMORY_TO_GPU):
        case _IOC_NR(AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU):
                return SIM_REMOTE_IOCTL_MAP;
        case _IOC_NR(AMDKFD_IOC_WAIT_EVENTS):
                return SIM_REMOTE_IOCTL_WAIT_EVENTS;
        case _IOC_NR(AMDKFD_IOC_IMPORT_DMABUF):
                return SIM_REMOTE_IOCTL_IMPORT_DMABUF;
        case _IOC_NR(AMDKFD_IOC_GET_DMABUF_INFO):
                return SIM_REMOTE_IOCTL_DMABUF_INFO;
        case _IOC_NR(AMDKFD_IOC_EXPORT_DMABUF):
                return SIM_REMOTE_IOCTL_EXPORT_DMABUF;
        case _IOC_NR(AMDKFD_IOC_GET_TILE_CONFIG):
                return SIM_REMOTE_IOCTL_TILE_CONFIG;
        case _IOC_NR(AMDKFD_IOC_SET_CU_MASK):
                return SIM_REMOTE_IOCTL_CU_MASK;
        /* Numbers and handles only: GPU addresses are numbers to the kernel;
         * RUNTIME_ENABLE's r_debug is stored for a debugger, never read;
         * ALLOC's mmap_offset is a CPU address of the caller only for USERPTR,
         * which the simulator refuses (sim-memory.c) — should it ever take
         * USERPTR, ALLOC needs a kind of its own here. */
        case _IOC_NR(AMDKFD_IOC_GET_VERSION):
        case _IOC_NR(AMDKFD_IOC_CREATE_QUEUE):
        case _IOC_NR(AMDKFD_IOC_DESTROY_QUEUE):
        case _IOC_NR(AMDKFD_IOC_GET_CLOCK_COUNTERS):
        case _IOC_NR(AMDKFD_IOC_CREATE_EVENT):
        case _IOC_NR(AMDKFD_IOC_DESTROY_EVENT):
        case _IOC_NR(AMDKFD_IOC_SET_EVENT):
        case _IOC_NR(AMDKFD_IOC_RESET_EVENT):
        case _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU):
        case _IOC_NR(AMDKFD_IOC_FREE_MEMORY_OF_GPU):
        case _IOC_NR(AMDKFD_IOC_AVAILABLE_MEMORY):
        case _IOC_NR(AMDKFD_IOC_RUNTIME_ENABLE):
        case _IOC_NR(AMDKFD_IOC_CREATE_PROCESS):
        case _IOC_NR(AMDKFD_IOC_SET_MEMORY_POLICY):
        case _IOC_NR(AMDKFD_IOC_SET_SCRATCH_BACKING_VA):
        case _IOC_NR(AMDKFD_IOC_SET_TRAP_HANDLER):
        case _IOC_NR(AMDKFD_IOC_SET_XNACK_MODE):
                return SIM_REMOTE_IOCTL_PLAIN;
        default:
                /* The simulator answers the others with an errno, without
                 * reading the argument; should it learn one, this table must
                 * learn its fields first (test-sim-remote checks). */
                return sim_device_ioctl_simulated(nr) ? SIM_REMOTE_IOCTL_REFUSED : SIM_REMOTE_IOCTL_PLAIN;
        }
}

/* The render node's calls the wire carries, matched whole as the simulator
 * runs them (sim-drm.c sim_drm_ioctl_simulated(), which the interposer does
 * not link). */
static bool render_call(unsigned long request) {
        return request == DRM_IOCTL_AMDGPU_GEM_CREATE || request == DRM_IOCTL_GEM_CLOSE ||
               request == DRM_IOCTL_PRIME_HANDLE_TO_FD || request == DRM_IOCTL_AMDGPU_GEM_MMAP ||
               request == DRM_IOCTL_VERSION || request == DRM_IOCTL_AMDGPU_INFO;
}

/*
 * Where the direction comes from. The client cannot ask the kernel for its
 * table, and must not trust the caller's word: kfd_ioctl() takes the
 * direction from amdkfd_ioctls[nr] ("Do not trust userspace, use our own
 * definition", kfd_chardev.c), so an _IOR word of MAP's number has its
 * bytes read and given back, and an _IOW word of GET_VERSION's has the
 * version written. The server could tell the client in its reply, but the
 * client must decide before it sends (whether to read the caller's bytes)
 * and must refuse a reply that would write memory the kernel would not
 * write — an IN-only call's argument may be read-only — so both ends read
 * one table, compiled into both (kfd-ioctl-table.c, from the uapi words).
 * drm_ioctl() copies what both its word and the caller's say (drm_ioctl.c:
 * in_size = 0 unless cmd & ioctl->cmd & IOC_IN); the render calls the wire
 * carries are matched whole, so the two are one there. Any other word on a
 * render file is refused before a copy (the simulator: -ENOTTY; the served
 * view: -EACCES); by its number it may still name a KFD call, which is
 * what it is on a KFD file, and then its argument comes back as the
 * server's buffer holds it: the caller's own bytes, or zeros for a number
 * the KFD only copies out (GET_VERSION, GET_PROCESS_APERTURES) — the one
 * place the wire writes what the kernel would not. A number that is
 * neither is refused by every kernel before its copy (past
 * AMDKFD_COMMAND_END): nothing travels.
 */
unsigned sim_remote_ioctl_dir(unsigned long request) {
        if (render_call(request))
                return _IOC_DIR(request);
        return _IOC_DIR(kfd_ioctl_word(_IOC_NR(request)));
}

size_t sim_remote_ioctl_struct_size(SimRemoteIoctlKind kind) {
        switch (kind) {
        case SIM_REMOTE_IOCTL_ACQUIRE_VM:
                return sizeof(struct kfd_ioctl_acquire_vm_args);
        case SIM_REMOTE_IOCTL_APERTURES:
                return sizeof(struct kfd_ioctl_get_process_apertures_new_args);
        case SIM_REMOTE_IOCTL_MAP:
                return sizeof(struct kfd_ioctl_map_memory_to_gpu_args);
        case SIM_REMOTE_IOCTL_WAIT_EVENTS:
                return sizeof(struct kfd_ioctl_wait_events_args);
        case SIM_REMOTE_IOCTL_IMPORT_DMABUF:
                return sizeof(struct kfd_ioctl_import_dmabuf_args);
        case SIM_REMOTE_IOCTL_DMABUF_INFO:
                return sizeof(struct kfd_ioctl_get_dmabuf_info_args);
        case SIM_REMOTE_IOCTL_EXPORT_DMABUF:
                return sizeof(struct kfd_ioctl_export_dmabuf_args);
        case SIM_REMOTE_IOCTL_PRIME_TO_FD:
                return sizeof(struct drm_prime_handle);
        case SIM_REMOTE_IOCTL_TILE_CONFIG:
                return sizeof(struct kfd_ioctl_get_tile_config_args);
        case SIM_REMOTE_IOCTL_CU_MASK:
                return sizeof(struct kfd_ioctl_set_cu_mask_args);
        case SIM_REMOTE_IOCTL_DRM_VERSION:
                return sizeof(struct drm_version);
        case SIM_REMOTE_IOCTL_AMDGPU_INFO:
                return sizeof(struct drm_amdgpu_info);
        default:
                return 0;
        }
}

int sim_remote_send(int sock, const struct iovec *iov, size_t n_iov, int fd) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct msghdr mh = {
                .msg_iov = (struct iovec *) iov,
                .msg_iovlen = n_iov,
        };

        if (fd >= 0) {
                mh.msg_control = control.buf;
                mh.msg_controllen = sizeof control.buf;
                struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        for (;;) {
                if (sendmsg(sock, &mh, MSG_NOSIGNAL) >= 0)
                        return 0;
                if (errno != EINTR)
                        return errno == ECONNRESET ? -EPIPE : -errno;
        }
}

/* Up to this many fds are taken in at once, to be closed, when a peer sends
 * more than the one a message may carry (the kernel drops the rest). */
#define RECV_MAX_FDS 8

ssize_t sim_remote_recv(int sock, void *buf, size_t size, int *ret_fd) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * RECV_MAX_FDS)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr mh;
        ssize_t n;
        int fds = 0, fd = -EBADF;
        bool bad = false;

        *ret_fd = -EBADF;
        for (;;) {
                mh = (struct msghdr) {
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = control.buf,
                        .msg_controllen = sizeof control.buf,
                };
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
                if (n >= 0)
                        break;
                if (errno != EINTR)
                        return errno == ECONNRESET ? 0 : -errno;
        }

        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
                        bad = true;
                        continue;
                }
                size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < k; i++) {
                        int x;
                        memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                        if (fds++ == 0)
                                fd = x;
                        else
                                safe_close(x);
                }
        }
        if (bad || fds > 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
                safe_close(fd);
                return -EPROTO;
        }
        if (n == 0) {
                /* An empty message reads as EOF; whatever it carried goes. */
                safe_close(fd);
                return 0;
        }
        *ret_fd = fd;
        return n;
}
