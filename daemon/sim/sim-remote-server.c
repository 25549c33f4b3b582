/* SPDX-License-Identifier: MIT */
/*
 * The daemon's end of sim-remote (sim-remote.h, wire in
 * sim-remote-protocol.h): a SimRemoteServer serves one remote process — a
 * SimMm of the device, or a KFD context the daemon holds
 * (SimRemoteProcess) — over its control socket and the channels the process
 * adds. Threads: the control thread (detached) does the handshake, starts a
 * thread per channel and, when the control socket ends, tears the process
 * down and frees the server; each channel thread runs one request at a time
 * as the process's kernel call through the process's KfdOps table, in the
 * daemon.
 *
 * The process is not trusted. Every message is checked for its exact length
 * and bounds before anything runs; an ioctl reaches the simulator with the
 * process's struct in a buffer of ours, every pointer field replaced by a
 * buffer of ours (or NULL) and every fd field by an fd the process sent with
 * the message (or -1), so no address or fd number it chose is ever used in
 * the daemon — except numbers of its own files, which its table looks up
 * among that process's files only. Replies carry back what the process sent in those fields,
 * never a daemon address. A protocol error ends the channel (the control
 * channel: the process).
 *
 * A driven server (sim_remote_serve_process_driven(), for tests and fuzz
 * targets) has no threads: its caller runs it (sim_remote_server_run()),
 * which serves on the caller's thread, through the same handshake,
 * control_step(), serve_request() and server_end(), whatever is waiting.
 *
 * Teardown, at EOF of the control socket or by sim_remote_servers_stop():
 * the process is killed (WAIT_EVENTS asleep for it return -EINTR), the channel
 * sockets are shut down (threads in recv or send return), the channel
 * threads joined, the process freed (files closed, contexts destroyed: the
 * kernel's process exit), the server unlinked from its registry.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <amdgpu_drm.h>

#include "kfd/kfd-uapi.h"
#include "sim-device.h"
#include "sim-process.h"
#include "sim-remote-protocol.h"
#include "sim-remote.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct SimRemoteChannel SimRemoteChannel;

struct SimRemoteChannel {
        SimRemoteChannel *next;
        SimRemoteServer *server;
        int fd;
        pthread_t thread;        /* none when the server is driven */
        bool done;               /* it ended (the thread returned): reap it (server lock) */
};

struct SimRemoteRegistry {
        pthread_mutex_t lock;
        pthread_cond_t cond;     /* broadcast when a server is unlinked */
        SimRemoteServer *servers;
        unsigned n_servers;
        bool stopping;
};

struct SimRemoteServer {
        SimRemoteServer *next;   /* SimRemoteRegistry.servers (its lock) */
        SimRemoteRegistry *reg;
        SimRemoteProcess proc;
        int fd;                  /* the control channel; closed only once unlinked */
        pthread_mutex_t lock;    /* channels */
        SimRemoteChannel *channels;
        unsigned n_channels;
        const SimRemoteHooks *hooks; /* NULL: none (sim-remote.h) */
        void *hooks_userdata;
        bool driven;             /* no threads: sim_remote_server_run() serves it */
        bool greeted;            /* driven: the handshake is done */
        uint8_t *in, *out;       /* driven: a message and its reply */
};

/* An ioctl of the process, between the hooks. */
static int server_ioctl(SimRemoteServer *s, int fd, unsigned long request, void *arg) {
        const KfdOps *ops = s->proc.ops;
        int r;

        if (s->hooks && s->hooks->before) {
                r = s->hooks->before(s->hooks_userdata, request, arg);
                if (r < 0)
                        return r;
                if (r > 0)
                        return 0; /* answered by the hook */
        }
        r = ops->ioctl(ops->userdata, fd, request, arg);
        if (s->hooks && s->hooks->after)
                s->hooks->after(s->hooks_userdata, request, arg, r);
        return r;
}

/* A reply being built: header, argument and array in one buffer of
 * SIM_REMOTE_MAX_MESSAGE bytes, and the fd to send with it. */
typedef struct Reply {
        SimRemoteReply h;
        uint8_t *arg;            /* SIM_REMOTE_MAX_ARG bytes, after the header */
        const void *array;
        size_t array_size;
        int fd;                  /* borrowed */
} Reply;

static int reply_send(int sock, uint8_t *buf, Reply *r) {
        size_t len = sizeof r->h + r->h.arg_size;

        memcpy(buf, &r->h, sizeof r->h);
        if (r->array_size > 0) {
                memcpy(buf + len, r->array, r->array_size);
                len += r->array_size;
        }
        return sim_remote_send(sock, &(struct iovec) { .iov_base = buf, .iov_len = len }, 1, r->fd);
}

/* Copies the bytes of field [off, off+size) that the caller's usize bytes
 * hold from src to dst: what the reply gives back of a field we replaced. */
static void restore_field(uint8_t *dst, const uint8_t *src, size_t usize, size_t off, size_t size) {
        if (off < usize)
                memcpy(dst + off, src + off, MIN(size, usize - off));
}

#define FIELD(type, member) offsetof(type, member), sizeof(((type *) NULL)->member)

/*
 * An ioctl whose struct holds pointers or fds (sim-remote-protocol.h). kdata
 * is the struct as the kernel would see it from the process — its usize
 * bytes if the kernel's table copies them in (sim_remote_ioctl_dir(), not
 * the process's word), zeros beyond — with the pointer and fd fields
 * replaced; the request goes to the simulator as read-write and at least the
 * struct's size, which changes nothing it sees and lets us read what it
 * wrote (an exported fd must come back to us even if the process's request
 * word does not read). Returns the ioctl's result in rep->h.ret, or -EPROTO.
 */
static int serve_marshalled(SimRemoteServer *s, const SimRemoteRequest *req, SimRemoteIoctlKind kind,
                            const uint8_t *arg, const uint8_t *array, size_t array_size, int in_fd, Reply *rep,
                            void **ret_scratch, int *ret_out_fd) {
        unsigned long request = (unsigned long) req->u64[0];
        size_t usize = _IOC_SIZE(request), ksize = MAX(usize, sim_remote_ioctl_struct_size(kind));
        _cleanup_free_ uint8_t *view = calloc(1, ksize), *kdata = calloc(1, ksize);
        void *buf = NULL;
        uint64_t cap = 0;
        uint32_t tile_room = 0; /* TILE_CONFIG: where the macro array starts in buf */
        uint64_t version_room[3] = {}; /* DRM_VERSION: each string's part of buf */
        unsigned long word = _IOC(_IOC_READ | _IOC_WRITE, _IOC_TYPE(request), _IOC_NR(request), ksize);
        unsigned dir = sim_remote_ioctl_dir(request);
        int r;

        if (!view || !kdata)
                return -ENOMEM;
        if (dir & _IOC_WRITE)
                memcpy(view, arg, usize);
        memcpy(kdata, view, ksize);

        switch (kind) {
        case SIM_REMOTE_IOCTL_WAIT_EVENTS: {
                struct kfd_ioctl_wait_events_args *a = (void *) kdata;
                bool has = a->events_ptr != 0 && a->num_events > 0;

                if (in_fd >= 0)
                        return -EPROTO;
                if (has) {
                        if (a->num_events > SIM_REMOTE_MAX_WAIT_EVENTS ||
                            array_size != (size_t) a->num_events * sizeof(struct kfd_event_data))
                                return -EPROTO;
                        buf = malloc(array_size);
                        if (!buf)
                                return -ENOMEM;
                        memcpy(buf, array, array_size);
                        cap = array_size;
                } else if (array_size != 0)
                        return -EPROTO;
                a->events_ptr = (uint64_t) (uintptr_t) buf;
                break;
        }
        case SIM_REMOTE_IOCTL_MAP: {
                struct kfd_ioctl_map_memory_to_gpu_args *a = (void *) kdata;
                bool has = a->device_ids_array_ptr != 0 && a->n_devices > 0;

                if (in_fd >= 0)
                        return -EPROTO;
                if (has) {
                        if (a->n_devices > SIM_REMOTE_MAX_DEVICE_IDS || array_size != (size_t) a->n_devices * 4)
                                return -EPROTO;
                        buf = malloc(array_size);
                        if (!buf)
                                return -ENOMEM;
                        memcpy(buf, array, array_size);
                } else if (array_size != 0)
                        return -EPROTO;
                a->device_ids_array_ptr = (uint64_t) (uintptr_t) buf;
                break;
        }
        case SIM_REMOTE_IOCTL_APERTURES: {
                struct kfd_ioctl_get_process_apertures_new_args *a = (void *) kdata;

                if (in_fd >= 0 || array_size != 0)
                        return -EPROTO;
                if (a->kfd_process_device_apertures_ptr != 0 && a->num_of_nodes > 0) {
                        /* Room for what we can carry back; the simulator fills one. */
                        a->num_of_nodes = MIN(a->num_of_nodes, SIM_REMOTE_MAX_APERTURES);
                        cap = a->num_of_nodes;
                        buf = calloc(cap, sizeof(struct kfd_process_device_apertures));
                        if (!buf)
                                return -ENOMEM;
                }
                a->kfd_process_device_apertures_ptr = (uint64_t) (uintptr_t) buf;
                break;
        }
        case SIM_REMOTE_IOCTL_IMPORT_DMABUF: {
                struct kfd_ioctl_import_dmabuf_args *a = (void *) kdata;

                if (array_size != 0)
                        return -EPROTO;
                a->dmabuf_fd = (uint32_t) (in_fd >= 0 ? in_fd : -1);
                break;
        }
        case SIM_REMOTE_IOCTL_DMABUF_INFO: {
                struct kfd_ioctl_get_dmabuf_info_args *a = (void *) kdata;

                if (array_size != 0)
                        return -EPROTO;
                a->dmabuf_fd = (uint32_t) (in_fd >= 0 ? in_fd : -1);
                if (a->metadata_ptr != 0) {
                        a->metadata_size = MIN(a->metadata_size, SIM_REMOTE_MAX_METADATA);
                        cap = a->metadata_size;
                        buf = calloc(1, MAX(cap, (uint64_t) 1));
                        if (!buf)
                                return -ENOMEM;
                }
                a->metadata_ptr = (uint64_t) (uintptr_t) buf;
                break;
        }
        case SIM_REMOTE_IOCTL_EXPORT_DMABUF: {
                struct kfd_ioctl_export_dmabuf_args *a = (void *) kdata;

                if (in_fd >= 0 || array_size != 0)
                        return -EPROTO;
                /* Our copy of the fd lives only until it is sent. */
                a->flags |= O_CLOEXEC;
                break;
        }
        case SIM_REMOTE_IOCTL_TILE_CONFIG: {
                struct kfd_ioctl_get_tile_config_args *a = (void *) kdata;
                uint32_t nt = MIN(a->num_tile_configs, SIM_REMOTE_MAX_TILE_CONFIGS);
                uint32_t nm = MIN(a->num_macro_tile_configs, SIM_REMOTE_MAX_TILE_CONFIGS);

                if (in_fd >= 0 || array_size != 0)
                        return -EPROTO;
                /* Room for both arrays, one after the other; a NULL pointer
                 * stays NULL (the simulator's -EFAULT). */
                a->num_tile_configs = nt;
                a->num_macro_tile_configs = nm;
                tile_room = nt;
                cap = (uint64_t) nt + nm;
                buf = calloc(MAX(cap, (uint64_t) 1), sizeof(uint32_t));
                if (!buf)
                        return -ENOMEM;
                a->tile_config_ptr = a->tile_config_ptr ? (uint64_t) (uintptr_t) buf : 0;
                a->macro_tile_config_ptr = a->macro_tile_config_ptr ? (uint64_t) (uintptr_t) ((uint32_t *) buf + nt) : 0;
                break;
        }
        case SIM_REMOTE_IOCTL_CU_MASK: {
                struct kfd_ioctl_set_cu_mask_args *a = (void *) kdata;
                bool has = a->cu_mask_ptr != 0 && a->num_cu_mask > 0 && a->num_cu_mask % 32 == 0;

                if (in_fd >= 0)
                        return -EPROTO;
                if (has) {
                        if (array_size != (size_t) MIN(a->num_cu_mask / 32, SIM_REMOTE_MAX_CU_MASK) * 4)
                                return -EPROTO;
                        buf = malloc(array_size);
                        if (!buf)
                                return -ENOMEM;
                        memcpy(buf, array, array_size);
                        a->cu_mask_ptr = (uint64_t) (uintptr_t) buf;
                } else if (array_size != 0)
                        return -EPROTO;
                break;
        }
        case SIM_REMOTE_IOCTL_DRM_VERSION: {
                struct drm_version *a = (void *) kdata;
                __kernel_size_t *lens[3] = { &a->name_len, &a->date_len, &a->desc_len };
                char **ptrs[3] = { &a->name, &a->date, &a->desc };

                if (in_fd >= 0 || array_size != 0)
                        return -EPROTO;
                /* Room for each string where the process gave a buffer (a
                 * NULL one with a length stays NULL: drm_copy_field's
                 * -EFAULT), at most the wire's bound of its length. */
                for (unsigned i = 0; i < 3; i++) {
                        *lens[i] = MIN(*lens[i], (__kernel_size_t) SIM_REMOTE_MAX_VERSION_FIELD);
                        version_room[i] = *lens[i];
                        cap += *lens[i];
                }
                buf = calloc(1, MAX(cap, (uint64_t) 1));
                if (!buf)
                        return -ENOMEM;
                for (unsigned i = 0, at = 0; i < 3; at += version_room[i], i++)
                        if (*ptrs[i])
                                *ptrs[i] = (char *) buf + at;
                break;
        }
        case SIM_REMOTE_IOCTL_AMDGPU_INFO: {
                struct drm_amdgpu_info *a = (void *) kdata;
                bool has = a->return_pointer != 0 && a->return_size != 0;

                if (in_fd >= 0)
                        return -EPROTO;
                if (has) {
                        if (array_size != MIN(a->return_size, SIM_REMOTE_MAX_INFO))
                                return -EPROTO;
                        a->return_size = (uint32_t) array_size;
                        cap = array_size;
                        buf = malloc(array_size);
                        if (!buf)
                                return -ENOMEM;
                        memcpy(buf, array, array_size);
                        a->return_pointer = (uint64_t) (uintptr_t) buf;
                } else if (array_size != 0)
                        return -EPROTO;
                /* Run with the process's own word (DRM_IOW): the render
                 * node's calls are matched whole (sim-drm.h). */
                word = request;
                break;
        }
        case SIM_REMOTE_IOCTL_PRIME_TO_FD: {
                struct drm_prime_handle *a = (void *) kdata;

                if (in_fd >= 0 || array_size != 0)
                        return -EPROTO;
                /* Our copy lives only until it is sent; DRM_RDWR is the
                 * process's choice and stays a property of the file. */
                if (!(a->flags & ~(uint32_t) (DRM_CLOEXEC | DRM_RDWR)))
                        a->flags |= DRM_CLOEXEC;
                break;
        }
        default:
                return -EPROTO;
        }
        *ret_scratch = buf;

        r = server_ioctl(s, req->fd, word, kdata);
        rep->h.ret = r;

        /* What goes back: the arrays the process gave, and in the struct its own
         * values of every field we replaced (in-out counts as the simulator left them). */
        switch (kind) {
        case SIM_REMOTE_IOCTL_WAIT_EVENTS:
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_wait_events_args, events_ptr));
                rep->array = buf;
                rep->array_size = cap;
                break;
        case SIM_REMOTE_IOCTL_MAP:
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_map_memory_to_gpu_args, device_ids_array_ptr));
                break;
        case SIM_REMOTE_IOCTL_APERTURES: {
                struct kfd_ioctl_get_process_apertures_new_args *a = (void *) kdata;
                restore_field(kdata, view, usize,
                              FIELD(struct kfd_ioctl_get_process_apertures_new_args, kfd_process_device_apertures_ptr));
                if (r < 0) /* the count we passed (clamped) is not the process's business */
                        restore_field(kdata, view, usize,
                                      FIELD(struct kfd_ioctl_get_process_apertures_new_args, num_of_nodes));
                else if (buf) {
                        rep->array = buf;
                        rep->array_size = MIN((uint64_t) a->num_of_nodes, cap) * sizeof(struct kfd_process_device_apertures);
                }
                break;
        }
        case SIM_REMOTE_IOCTL_IMPORT_DMABUF:
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_import_dmabuf_args, dmabuf_fd));
                break;
        case SIM_REMOTE_IOCTL_TILE_CONFIG: {
                struct kfd_ioctl_get_tile_config_args *a = (void *) kdata;
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_get_tile_config_args, tile_config_ptr));
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_get_tile_config_args, macro_tile_config_ptr));
                if (r < 0) {
                        restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_get_tile_config_args, num_tile_configs));
                        restore_field(kdata, view, usize,
                                      FIELD(struct kfd_ioctl_get_tile_config_args, num_macro_tile_configs));
                } else {
                        /* Both arrays as the simulator filled them: the tile
                         * configs it wrote, then the macro ones (which
                         * start after the room we gave the first). */
                        uint32_t nt = MIN(a->num_tile_configs, tile_room);
                        uint32_t nm = MIN(a->num_macro_tile_configs, (uint32_t) cap - tile_room);
                        if (nt != tile_room)
                                memmove((uint32_t *) buf + nt, (uint32_t *) buf + tile_room, (size_t) nm * 4);
                        rep->array = buf;
                        rep->array_size = ((size_t) nt + nm) * 4;
                }
                break;
        }
        case SIM_REMOTE_IOCTL_CU_MASK:
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_set_cu_mask_args, cu_mask_ptr));
                break;
        case SIM_REMOTE_IOCTL_DRM_VERSION:
                /* The lengths as drm_copy_field() left them (each string's
                 * whole length), the process's own pointers. */
                restore_field(kdata, view, usize, FIELD(struct drm_version, name));
                restore_field(kdata, view, usize, FIELD(struct drm_version, date));
                restore_field(kdata, view, usize, FIELD(struct drm_version, desc));
                if (r < 0) {
                        restore_field(kdata, view, usize, FIELD(struct drm_version, name_len));
                        restore_field(kdata, view, usize, FIELD(struct drm_version, date_len));
                        restore_field(kdata, view, usize, FIELD(struct drm_version, desc_len));
                } else {
                        rep->array = buf;
                        rep->array_size = cap;
                }
                break;
        case SIM_REMOTE_IOCTL_AMDGPU_INFO:
                if (r >= 0 && buf) {
                        rep->array = buf;
                        rep->array_size = cap;
                }
                break;
        case SIM_REMOTE_IOCTL_DMABUF_INFO: {
                struct kfd_ioctl_get_dmabuf_info_args *a = (void *) kdata;
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_get_dmabuf_info_args, dmabuf_fd));
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_get_dmabuf_info_args, metadata_ptr));
                if (r < 0)
                        restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_get_dmabuf_info_args, metadata_size));
                else if (buf) {
                        rep->array = buf;
                        rep->array_size = MIN((uint64_t) a->metadata_size, cap);
                }
                break;
        }
        case SIM_REMOTE_IOCTL_EXPORT_DMABUF: {
                struct kfd_ioctl_export_dmabuf_args *a = (void *) kdata;
                if (r >= 0) {
                        *ret_out_fd = (int) a->dmabuf_fd;
                        a->dmabuf_fd = 0; /* the process's own number comes with the fd */
                }
                restore_field(kdata, view, usize, FIELD(struct kfd_ioctl_export_dmabuf_args, flags));
                break;
        }
        case SIM_REMOTE_IOCTL_PRIME_TO_FD: {
                struct drm_prime_handle *a = (void *) kdata;
                if (r >= 0) {
                        *ret_out_fd = a->fd;
                        a->fd = 0; /* the process's own number comes with the fd */
                }
                restore_field(kdata, view, usize, FIELD(struct drm_prime_handle, flags));
                break;
        }
        default:
                break;
        }
        if (dir & _IOC_READ) {
                memcpy(rep->arg, kdata, usize);
                rep->h.arg_size = (uint32_t) usize;
        }
        return 0;
}

static int serve_ioctl(SimRemoteServer *s, const SimRemoteRequest *req, const uint8_t *payload, size_t payload_size,
                       int in_fd, Reply *rep, void **ret_scratch, int *ret_out_fd) {
        unsigned long request;
        bool arg_null = req->flags & SIM_REMOTE_ARG_NULL;
        SimRemoteIoctlKind kind;
        size_t usize;

        /* Request words are 32 bits (_IOC). */
        if (req->u64[0] > UINT32_MAX || req->u64[1] != 0 || (req->flags & ~SIM_REMOTE_ARG_NULL))
                return -EPROTO;
        request = (unsigned long) req->u64[0];
        usize = _IOC_SIZE(request);
        if (req->arg_size != (arg_null ? 0 : usize) || payload_size < req->arg_size)
                return -EPROTO;
        kind = sim_remote_ioctl_kind(request);

        switch (kind) {
        case SIM_REMOTE_IOCTL_REFUSED:
                if (in_fd >= 0 || payload_size != req->arg_size)
                        return -EPROTO;
                rep->h.ret = -ENOTTY;
                return 0;
        case SIM_REMOTE_IOCTL_PLAIN:
        case SIM_REMOTE_IOCTL_ACQUIRE_VM:
                /* Numbers only; ACQUIRE_VM's drm_fd is looked up among the
                 * process's own files (sim_process_acquire_vm). What the
                 * daemon's layers see is what the kernel would read: the
                 * process's bytes if its table copies them in, else zeros
                 * (whatever the process sent); they go back if it copies
                 * out. */
                if (in_fd >= 0 || payload_size != req->arg_size)
                        return -EPROTO;
                if (sim_remote_ioctl_dir(request) & _IOC_WRITE)
                        memcpy(rep->arg, payload, req->arg_size);
                else
                        memset(rep->arg, 0, req->arg_size);
                rep->h.ret = server_ioctl(s, req->fd, request, arg_null ? NULL : rep->arg);
                if (!arg_null && (sim_remote_ioctl_dir(request) & _IOC_READ))
                        rep->h.arg_size = (uint32_t) usize;
                return 0;
        default:
                if (arg_null) {
                        if (in_fd >= 0 || payload_size != 0)
                                return -EPROTO;
                        rep->h.ret = server_ioctl(s, req->fd, request, NULL);
                        return 0;
                }
                return serve_marshalled(s, req, kind, payload, payload + usize, payload_size - usize, in_fd, rep,
                                        ret_scratch, ret_out_fd);
        }
}

/*
 * One request on a channel: runs it and sends the reply. Returns 0, or a
 * negative errno that ends the channel (-EPROTO: the process broke the
 * protocol; others: the reply could not be sent).
 */
static int serve_request(SimRemoteServer *s, int sock, const uint8_t *msg, size_t n, int fd_in, uint8_t *out) {
        _cleanup_close_ int in_fd = fd_in, out_fd = -EBADF;
        _cleanup_free_ void *scratch = NULL;
        const KfdOps *ops = s->proc.ops;
        Reply rep = { .arg = out + sizeof(SimRemoteReply), .fd = -EBADF };
        char text[SIM_EXCEPTION_TEXT] = "";
        SimRemoteRequest req;
        const uint8_t *payload;
        size_t payload_size;
        uint64_t offset = 0;
        uint32_t queue_id = 0;
        bool plain;
        int r;

        if (n < sizeof req)
                return -EPROTO;
        memcpy(&req, msg, sizeof req);
        payload = msg + sizeof req;
        payload_size = n - sizeof req;
        /* Everything but IOCTL is the header alone, without an fd. */
        plain = payload_size == 0 && req.arg_size == 0 && req.flags == 0 && in_fd < 0;

        switch (req.op) {
        case SIM_REMOTE_OP_OPEN_KFD:
        case SIM_REMOTE_OP_OPEN_RENDER:
                if (!plain || req.u64[1] != 0 || req.u64[0] > (req.op == SIM_REMOTE_OP_OPEN_KFD ? 0 : UINT32_MAX))
                        return -EPROTO;
                if (req.op == SIM_REMOTE_OP_OPEN_KFD)
                        r = ops->open_kfd(ops->userdata);
                else if (s->hooks && s->hooks->open_render)
                        r = s->hooks->open_render(s->hooks_userdata, (unsigned) req.u64[0]);
                else
                        r = ops->open_render(ops->userdata, (unsigned) req.u64[0]);
                if (r >= 0) {
                        /* A copy taken under the device lock: a close of the number
                         * from another channel cannot hand out a reused one. */
                        out_fd = s->proc.dup_file(s->proc.userdata, r);
                        if (out_fd < 0)
                                r = out_fd;
                }
                rep.h.ret = r;
                rep.fd = out_fd;
                break;
        case SIM_REMOTE_OP_CLOSE:
                if (!plain || req.u64[0] != 0 || req.u64[1] != 0)
                        return -EPROTO;
                if (s->hooks && s->hooks->close_keeps && s->hooks->close_keeps(s->hooks_userdata, req.fd))
                        rep.h.ret = 0; /* a copy of the daemon's file: its copy stays open */
                else
                        rep.h.ret = ops->close(ops->userdata, req.fd);
                break;
        case SIM_REMOTE_OP_IOCTL:
                r = serve_ioctl(s, &req, payload, payload_size, in_fd, &rep, &scratch, &out_fd);
                if (r < 0)
                        return r;
                rep.fd = rep.h.ret >= 0 ? out_fd : -EBADF;
                break;
        case SIM_REMOTE_OP_MMAP:
                if (!plain)
                        return -EPROTO;
                r = 0;
                if (s->hooks && s->hooks->mmap)
                        r = s->hooks->mmap(s->hooks_userdata, req.fd, (size_t) req.u64[0], req.u64[1], &out_fd,
                                           &offset);
                rep.h.ret = r != 0 ? MIN(r, 0)
                                   : s->proc.mmap_resolve(s->proc.userdata, req.fd, (size_t) req.u64[0],
                                                          req.u64[1], &out_fd, &offset);
                rep.h.u64[0] = offset;
                rep.fd = out_fd;
                break;
        case SIM_REMOTE_OP_EXCEPTION_INFO:
                if (!plain || req.u64[1] != 0)
                        return -EPROTO;
                rep.h.ret = ops->exception_info(ops->userdata, req.fd, &queue_id, text,
                                                (size_t) MIN(req.u64[0], (uint64_t) sizeof text));
                if (rep.h.ret >= 0) {
                        rep.h.u64[0] = queue_id;
                        if (req.u64[0] > 0) {
                                rep.array = text;
                                rep.array_size = strnlen(text, sizeof text - 1) + 1;
                        }
                }
                break;
        case SIM_REMOTE_OP_DOORBELL:
                if (!plain || req.u64[0] > UINT32_MAX || req.u64[1] != 0)
                        return -EPROTO;
                ops->doorbell_written(ops->userdata, req.fd, (uint32_t) req.u64[0]);
                rep.h.ret = 0;
                break;
        default:
                return -EPROTO;
        }
        return reply_send(sock, out, &rep);
}

/* Receives one message on a channel and serves it: 1, 0 at EOF, or a
 * negative errno that ends the channel (serve_request()). */
static int channel_step(SimRemoteChannel *ch, uint8_t *in, uint8_t *out) {
        int fd;
        ssize_t n = sim_remote_recv(ch->fd, in, SIM_REMOTE_MAX_MESSAGE, &fd);

        if (n <= 0)
                return (int) n;
        int r = serve_request(ch->server, ch->fd, in, (size_t) n, fd, out);
        return r < 0 ? r : 1;
}

/* The channel ended (r: channel_step()'s last result). */
static void channel_finish(SimRemoteChannel *ch, int r) {
        SimRemoteServer *s = ch->server;

        if (r < 0)
                log_debug_errno(r, "sim-remote: channel %d ends: %m", ch->fd);
        /* The peer sees the channel end now; the fd itself is closed when the
         * channel is reaped (closing it here could let server_end() shut down
         * a number reused meanwhile). */
        (void) shutdown(ch->fd, SHUT_RDWR);
        pthread_mutex_lock(&s->lock);
        ch->done = true;
        pthread_mutex_unlock(&s->lock);
}

static void *channel_main(void *userdata) {
        SimRemoteChannel *ch = userdata;
        uint8_t *in = malloc(SIM_REMOTE_MAX_MESSAGE), *out = malloc(SIM_REMOTE_MAX_MESSAGE);
        int r = -ENOMEM;

        if (in && out)
                while ((r = channel_step(ch, in, out)) > 0)
                        ;
        free(in);
        free(out);
        channel_finish(ch, r);
        return NULL;
}

/* Joins and frees the channels whose threads returned (driven: that
 * ended). Server lock. */
static void reap_channels(SimRemoteServer *s) {
        for (SimRemoteChannel **x = &s->channels; *x;) {
                SimRemoteChannel *ch = *x;
                if (!ch->done) {
                        x = &ch->next;
                        continue;
                }
                if (!s->driven)
                        pthread_join(ch->thread, NULL);
                *x = ch->next;
                safe_close(ch->fd);
                free(ch);
                s->n_channels--;
        }
}

/* NEW_CHANNEL: a thread for the socket fd (taken over); driven: the
 * socket alone, which sim_remote_server_run() serves. */
static int channel_start(SimRemoteServer *s, int fd) {
        SimRemoteChannel *ch;
        int r;

        pthread_mutex_lock(&s->lock);
        reap_channels(s);
        if (s->n_channels >= SIM_REMOTE_MAX_CHANNELS) {
                r = -EMFILE;
                goto fail;
        }
        ch = calloc(1, sizeof *ch);
        if (!ch) {
                r = -ENOMEM;
                goto fail;
        }
        ch->server = s;
        ch->fd = fd;
        r = s->driven ? 0 : -pthread_create(&ch->thread, NULL, channel_main, ch);
        if (r < 0) {
                free(ch);
                goto fail;
        }
        ch->next = s->channels;
        s->channels = ch;
        s->n_channels++;
        pthread_mutex_unlock(&s->lock);
        return 0;
fail:
        pthread_mutex_unlock(&s->lock);
        safe_close(fd);
        return r;
}

static bool is_seqpacket_socket(int fd) {
        int type = 0, domain = 0;
        socklen_t l1 = sizeof type, l2 = sizeof domain;

        return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l1) == 0 && type == SOCK_SEQPACKET &&
               getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &l2) == 0 && domain == AF_UNIX;
}

static int handshake(SimRemoteServer *s, uint8_t *buf) {
        const char *root = s->proc.ops->sysfs_root ? s->proc.ops->sysfs_root : "";
        size_t root_len = strlen(root) + 1;
        SimRemoteRequest req;
        Reply rep = { .fd = -EBADF };
        ssize_t n;
        int fd;

        n = sim_remote_recv(s->fd, buf, SIM_REMOTE_MAX_MESSAGE, &fd);
        if (n <= 0)
                return n < 0 ? (int) n : -ECONNRESET;
        if (fd >= 0 || (size_t) n != sizeof req) {
                safe_close(fd);
                return -EPROTO;
        }
        memcpy(&req, buf, sizeof req);
        if (req.op != SIM_REMOTE_OP_HELLO || req.flags != 0 || req.arg_size != 0 || req.u64[1] != 0 ||
            (uint32_t) req.u64[0] != SIM_REMOTE_MAGIC)
                return -EPROTO;

        rep.h.u64[0] = SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32;
        if (req.u64[0] >> 32 != SIM_REMOTE_VERSION)
                rep.h.ret = -EPROTONOSUPPORT;
        else if (root_len > SIM_REMOTE_MAX_PATH)
                rep.h.ret = -ENAMETOOLONG;
        else {
                rep.array = root;
                rep.array_size = root_len;
        }
        int r = reply_send(s->fd, buf, &rep);
        if (r < 0)
                return r;
        return rep.h.ret;
}

/* One message on the control channel. Returns 0, or < 0 when the process is gone. */
static int control_step(SimRemoteServer *s, uint8_t *buf) {
        SimRemoteRequest req;
        Reply rep = { .fd = -EBADF };
        ssize_t n;
        int fd;

        n = sim_remote_recv(s->fd, buf, SIM_REMOTE_MAX_MESSAGE, &fd);
        if (n <= 0)
                return n < 0 ? (int) n : -ECONNRESET;
        if ((size_t) n != sizeof req || fd < 0) {
                safe_close(fd);
                return -EPROTO;
        }
        memcpy(&req, buf, sizeof req);
        if (req.op != SIM_REMOTE_OP_NEW_CHANNEL || req.flags != 0 || req.arg_size != 0 || req.u64[0] != 0 ||
            req.u64[1] != 0 || !is_seqpacket_socket(fd)) {
                safe_close(fd);
                return -EPROTO;
        }
        rep.h.ret = channel_start(s, fd);
        return reply_send(s->fd, buf, &rep);
}

static void registry_unlink(SimRemoteServer *s) {
        SimRemoteRegistry *reg = s->reg;

        pthread_mutex_lock(&reg->lock);
        for (SimRemoteServer **x = &reg->servers; *x; x = &(*x)->next)
                if (*x == s) {
                        *x = s->next;
                        break;
                }
        reg->n_servers--;
        pthread_cond_broadcast(&reg->cond);
        pthread_mutex_unlock(&reg->lock);
}

/* The process is gone: tear it down as its exit would, then let go of the registry. */
static void server_end(SimRemoteServer *s) {
        s->proc.kill(s->proc.userdata);
        pthread_mutex_lock(&s->lock);
        for (SimRemoteChannel *ch = s->channels; ch; ch = ch->next)
                (void) shutdown(ch->fd, SHUT_RDWR);
        pthread_mutex_unlock(&s->lock);
        /* No channel is added any more: this thread was the one adding them. */
        while (s->channels) {
                SimRemoteChannel *ch = s->channels;
                s->channels = ch->next;
                if (!s->driven)
                        pthread_join(ch->thread, NULL);
                safe_close(ch->fd);
                free(ch);
        }
        if (s->hooks && s->hooks->release)
                s->hooks->release(s->hooks_userdata);
        s->proc.free(s->proc.userdata);
        registry_unlink(s);

        safe_close(s->fd);
        pthread_mutex_destroy(&s->lock);
        if (s->hooks && s->hooks->end)
                s->hooks->end(s->hooks_userdata);
        free(s->in);
        free(s->out);
        free(s);
}

static void *server_main(void *userdata) {
        SimRemoteServer *s = userdata;
        uint8_t *buf = malloc(SIM_REMOTE_MAX_MESSAGE);
        int r = buf ? handshake(s, buf) : -ENOMEM;

        while (r >= 0)
                r = control_step(s, buf);
        log_debug_errno(r, "sim-remote: process ends: %m");
        free(buf);
        server_end(s);
        return NULL;
}

/* A server for proc on fd, with its own threads, or driven (*driven set). */
static int serve(SimRemoteRegistry *reg, int fd, const SimRemoteProcess *proc, const SimRemoteHooks *hooks,
                 void *userdata, SimRemoteServer **driven) {
        _cleanup_close_ int sock = fd;
        SimRemoteServer *s;
        pthread_attr_t attr;
        pthread_t thread;
        int r = 0;

        if (fd < 0) {
                proc->free(proc->userdata);
                return -EBADF;
        }
        s = calloc(1, sizeof *s);
        if (!s) {
                proc->free(proc->userdata);
                return -ENOMEM;
        }
        s->reg = reg;
        s->proc = *proc;
        s->hooks = hooks;
        s->hooks_userdata = userdata;
        s->driven = driven != NULL;
        s->fd = TAKE_FD(sock);
        pthread_mutex_init(&s->lock, NULL);
        if (s->driven) {
                s->in = malloc(SIM_REMOTE_MAX_MESSAGE);
                s->out = malloc(SIM_REMOTE_MAX_MESSAGE);
                if (!s->in || !s->out)
                        r = -ENOMEM;
        }

        if (r >= 0) {
                pthread_mutex_lock(&reg->lock);
                if (reg->stopping)
                        r = -ENODEV;
                else {
                        s->next = reg->servers;
                        reg->servers = s;
                        reg->n_servers++;
                }
                pthread_mutex_unlock(&reg->lock);
        }

        if (r >= 0 && s->driven) {
                *driven = s;
                return 0;
        }
        if (r >= 0) {
                pthread_attr_init(&attr);
                pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                r = -pthread_create(&thread, &attr, server_main, s);
                pthread_attr_destroy(&attr);
                if (r >= 0)
                        return 0;
                registry_unlink(s);
        }
        s->proc.free(s->proc.userdata);
        safe_close(s->fd);
        pthread_mutex_destroy(&s->lock);
        free(s->in);
        free(s->out);
        free(s);
        return r;
}

int sim_remote_serve_process(SimRemoteRegistry *reg, int fd, const SimRemoteProcess *proc,
                             const SimRemoteHooks *hooks, void *userdata) {
        return serve(reg, fd, proc, hooks, userdata, NULL);
}

int sim_remote_serve_process_driven(SimRemoteRegistry *reg, int fd, const SimRemoteProcess *proc,
                                    const SimRemoteHooks *hooks, void *userdata, SimRemoteServer **ret) {
        return serve(reg, fd, proc, hooks, userdata, ret);
}

int sim_remote_server_run(SimRemoteServer *s) {
        struct pollfd p[SIM_REMOTE_MAX_CHANNELS + 1];
        SimRemoteChannel *ch[SIM_REMOTE_MAX_CHANNELS + 1];
        bool served;
        int r;

        assert(s->driven);
        do {
                unsigned n = 0;
                ch[n] = NULL;
                p[n++] = (struct pollfd) { .fd = s->fd, .events = POLLIN };
                for (SimRemoteChannel *c = s->channels; c && n < ELEMENTSOF(p); c = c->next)
                        if (!c->done) {
                                ch[n] = c;
                                p[n++] = (struct pollfd) { .fd = c->fd, .events = POLLIN };
                        }
                while (poll(p, n, 0) < 0)
                        if (errno != EINTR)
                                return -errno;
                served = false;
                /* Each socket's messages in order; the sockets in any. */
                for (unsigned i = 1; i < n; i++)
                        if (p[i].revents) {
                                r = channel_step(ch[i], s->in, s->out);
                                if (r <= 0)
                                        channel_finish(ch[i], r);
                                served = true;
                        }
                if (p[0].revents) {
                        r = s->greeted ? control_step(s, s->in) : handshake(s, s->in);
                        if (r < 0) {
                                log_debug_errno(r, "sim-remote: process ends: %m");
                                server_end(s);
                                return 0;
                        }
                        s->greeted = true;
                        served = true;
                }
        } while (served);
        return 1;
}

/* A SimMm as a served process. */
static int mm_dup_file(void *userdata, int fd) {
        return sim_mm_dup_file(userdata, fd);
}

static int mm_mmap_resolve(void *userdata, int fd, size_t length, uint64_t offset, int *ret_fd,
                           uint64_t *ret_offset) {
        return sim_mm_mmap_resolve(userdata, fd, length, offset, ret_fd, ret_offset);
}

static void mm_kill(void *userdata) {
        sim_mm_kill(userdata);
}

static void mm_free(void *userdata) {
        sim_mm_free(userdata);
}

int sim_remote_serve(SimDevice *d, int fd) {
        return sim_remote_serve_hooked(d, fd, NULL, NULL);
}

static int serve_mm(SimDevice *d, int fd, const SimRemoteHooks *hooks, void *userdata, SimRemoteServer **driven) {
        SimMm *mm;
        int r;

        if (fd < 0)
                return -EBADF;
        r = sim_mm_new(d, &mm);
        if (r < 0) {
                close(fd);
                return r;
        }
        return serve(d->remotes, fd,
                     &(SimRemoteProcess) { .ops = &mm->ops, .userdata = mm, .dup_file = mm_dup_file,
                                           .mmap_resolve = mm_mmap_resolve, .kill = mm_kill, .free = mm_free },
                     hooks, userdata, driven);
}

int sim_remote_serve_hooked(SimDevice *d, int fd, const SimRemoteHooks *hooks, void *userdata) {
        return serve_mm(d, fd, hooks, userdata, NULL);
}

int sim_remote_serve_driven(SimDevice *d, int fd, const SimRemoteHooks *hooks, void *userdata,
                            SimRemoteServer **ret) {
        return serve_mm(d, fd, hooks, userdata, ret);
}

int sim_remote_registry_new(SimRemoteRegistry **ret) {
        SimRemoteRegistry *reg = calloc(1, sizeof *reg);

        if (!reg)
                return -ENOMEM;
        pthread_mutex_init(&reg->lock, NULL);
        pthread_cond_init(&reg->cond, NULL);
        *ret = reg;
        return 0;
}

void sim_remote_registry_stop(SimRemoteRegistry *reg) {
        if (!reg)
                return;
        pthread_mutex_lock(&reg->lock);
        reg->stopping = true;
        /* EOF on each control socket: every control thread ends its process. */
        for (SimRemoteServer *s = reg->servers; s; s = s->next)
                (void) shutdown(s->fd, SHUT_RDWR);
        while (reg->servers)
                pthread_cond_wait(&reg->cond, &reg->lock);
        pthread_mutex_unlock(&reg->lock);
}

SimRemoteRegistry *sim_remote_registry_free(SimRemoteRegistry *reg) {
        if (!reg)
                return NULL;
        sim_remote_registry_stop(reg);
        pthread_cond_destroy(&reg->cond);
        pthread_mutex_destroy(&reg->lock);
        free(reg);
        return NULL;
}

void sim_remote_registry_wait(SimRemoteRegistry *reg) {
        pthread_mutex_lock(&reg->lock);
        while (reg->servers)
                pthread_cond_wait(&reg->cond, &reg->lock);
        pthread_mutex_unlock(&reg->lock);
}

unsigned sim_remote_registry_count(SimRemoteRegistry *reg) {
        unsigned n;

        pthread_mutex_lock(&reg->lock);
        n = reg->n_servers;
        pthread_mutex_unlock(&reg->lock);
        return n;
}
