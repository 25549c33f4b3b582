/* SPDX-License-Identifier: MIT */
/*
 * The process's end of sim-remote (sim_remote_ops_new() in sim-remote.h,
 * wire in sim-remote-protocol.h): a KfdOps table whose calls are carried out
 * by the daemon's simulated GPU. Owned by whoever made it; the KfdOps is the
 * first member, its userdata the SimRemoteOps.
 *
 * Channels: a call takes an idle channel from a pool, or opens a new one (a
 * socketpair whose other end goes to the daemon over the control channel),
 * sends its request, waits for the reply on that channel alone, and gives the
 * channel back. So calls of several threads proceed at once, a WAIT_EVENTS
 * asleep holds only its own channel, and there are never more channels than
 * calls that were in flight at once (at most SIM_REMOTE_MAX_CHANNELS).
 *
 * Files: the daemon hands out its file with each open (SCM_RIGHTS), so the
 * caller gets a real fd of its own; a table maps it to the daemon's number,
 * checked by identity (st_dev, st_ino) on every use as the simulator checks
 * its own, so a number the caller closed behind our back and reused names
 * nothing. An fd the table does not know goes out as -1: the daemon answers
 * what the simulator answers for a file that is not there.
 *
 * mmap: the daemon resolves (fd, offset, length) with the simulator's own
 * checks and sends the memfd behind it; it is mapped here with the caller's
 * address and flags. munmap is local: the simulator keeps nothing per mapping.
 *
 * Cancellation follows the simulator: calls run with cancellation disabled,
 * except while WAIT_EVENTS waits for its reply; a thread cancelled there
 * gives up its channel (closed: the daemon's thread for it ends once the
 * wait is over) and unwinds.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <amdgpu_drm.h>

#include "kfd/kfd-uapi.h"
#include "sim-remote-protocol.h"
#include "sim-remote.h"
#include "util/macro.h"

/* How long the handshake may take before sim_remote_ops_new() gives up. */
#define HANDSHAKE_TIMEOUT_MS 10000

typedef struct RemoteChannel {
        int fd;                  /* -EBADF: an unused slot */
        bool busy;
        uint8_t *buf;            /* replies, SIM_REMOTE_MAX_MESSAGE bytes */
} RemoteChannel;

typedef struct RemoteFile {
        int local, remote;
        dev_t dev;
        ino_t ino;
} RemoteFile;

typedef struct SimRemoteOps {
        KfdOps ops;              /* first: what callers hold */
        pthread_mutex_t lock;    /* channels, files, the control channel */
        int control_fd;
        char *sysfs_root;
        RemoteChannel channels[SIM_REMOTE_MAX_CHANNELS];
        RemoteFile *files;
        size_t n_files;
        int reply_timeout_ms;    /* sim_remote_ops_set_reply_timeout(); -1: none */
        bool broken;             /* a reply did not come in time: every call is -ENODEV */
} SimRemoteOps;

/* One request and its reply. The reply's argument and array point into the
 * channel's buffer, valid until call_end(). */
typedef struct Call {
        SimRemoteRequest req;
        const void *arg;
        size_t arg_size;
        const void *array;
        size_t array_size;
        int send_fd;             /* borrowed, or -1 */
        bool cancellable;
        uint32_t wait_ms;        /* a cancellable call's own timeout (WAIT_EVENTS'); UINT32_MAX: none */
        void *owned;             /* the caller's buffer, freed if the thread is cancelled */

        unsigned channel;
        bool have_channel;
        int old_cancel;
        SimRemoteReply rep;
        const uint8_t *rep_arg;
        size_t rep_arg_size;
        const uint8_t *rep_array;
        size_t rep_array_size;
        int rep_fd;              /* owned */
} Call;

/* ---- Files ---- */

static int files_add(SimRemoteOps *o, int local, int remote) {
        struct stat st;

        if (fstat(local, &st) < 0)
                return -errno;
        pthread_mutex_lock(&o->lock);
        RemoteFile *f = realloc(o->files, (o->n_files + 1) * sizeof *f);
        if (!f) {
                pthread_mutex_unlock(&o->lock);
                return -ENOMEM;
        }
        o->files = f;
        o->files[o->n_files++] = (RemoteFile) { .local = local, .remote = remote, .dev = st.st_dev, .ino = st.st_ino };
        pthread_mutex_unlock(&o->lock);
        return 0;
}

/* The index of the file at local, or -1 (a stale entry — the number was
 * closed behind our back — is dropped). Locked. */
static ssize_t files_find(SimRemoteOps *o, int local) {
        struct stat st;

        for (size_t i = 0; i < o->n_files; i++) {
                if (o->files[i].local != local)
                        continue;
                if (fstat(local, &st) == 0 && st.st_dev == o->files[i].dev && st.st_ino == o->files[i].ino)
                        return (ssize_t) i;
                o->files[i] = o->files[--o->n_files];
                return -1;
        }
        return -1;
}

/* The daemon's number of our file at local, or -1 if it is none of ours. */
static int files_remote(SimRemoteOps *o, int local) {
        int r = -1;

        if (local < 0)
                return -1;
        pthread_mutex_lock(&o->lock);
        ssize_t i = files_find(o, local);
        if (i >= 0)
                r = o->files[i].remote;
        pthread_mutex_unlock(&o->lock);
        return r;
}

/* ---- Channels ---- */

/* The other end stopped answering: every channel and the control channel
 * are shut down (not closed: their numbers stay ours until
 * sim_remote_ops_free()), so a WAIT_EVENTS asleep on one wakes to -ENODEV,
 * and every later call is -ENODEV at once. Locked. */
static void break_locked(SimRemoteOps *o) {
        o->broken = true;
        (void) shutdown(o->control_fd, SHUT_RDWR);
        for (unsigned i = 0; i < SIM_REMOTE_MAX_CHANNELS; i++)
                if (o->channels[i].fd >= 0)
                        (void) shutdown(o->channels[i].fd, SHUT_RDWR);
}

/* How long a call may wait for its reply, in ms (-1: for ever): the reply
 * timeout, and for a call that sleeps (WAIT_EVENTS) its own timeout on top
 * — a peer that works answers a WAIT_EVENTS of t ms within t ms and the
 * bound. Only KFD_EVENT_TIMEOUT_INFINITE (UINT32_MAX, kfd_events.c
 * user_timeout_to_jiffies()) sleeps for ever. */
static int reply_bound_ms(const SimRemoteOps *o, bool sleeps, uint32_t wait_ms) {
        int timeout_ms = __atomic_load_n(&o->reply_timeout_ms, __ATOMIC_RELAXED);

        if (timeout_ms < 0 || !sleeps)
                return timeout_ms;
        if (wait_ms == UINT32_MAX)
                return -1;
        return (int) MIN((uint64_t) wait_ms + (uint64_t) timeout_ms, (uint64_t) INT_MAX);
}

/* The peer did not answer within its bound: o broken, -ETIMEDOUT. */
static int reply_late(SimRemoteOps *o, bool locked) {
        if (!locked)
                pthread_mutex_lock(&o->lock);
        break_locked(o);
        if (!locked)
                pthread_mutex_unlock(&o->lock);
        return -ETIMEDOUT;
}

/* Waits until fd has a reply, for at most bound_ms (-1: for ever): 0, or
 * -ETIMEDOUT with o broken. With o->lock held (locked) or not: a call
 * waits for its reply unlocked, so that other threads' calls go on. */
static int wait_reply(SimRemoteOps *o, int fd, bool locked, int bound_ms) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r;

        if (bound_ms < 0)
                return 0;
        do
                r = poll(&p, 1, bound_ms);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return -errno;
        if (r > 0)
                return 0;
        return reply_late(o, locked);
}

static void channel_retire(SimRemoteOps *o, unsigned i) {
        pthread_mutex_lock(&o->lock);
        o->channels[i].fd = safe_close(o->channels[i].fd);
        o->channels[i].busy = false;
        pthread_mutex_unlock(&o->lock);
}

static void channel_release(SimRemoteOps *o, unsigned i) {
        pthread_mutex_lock(&o->lock);
        o->channels[i].busy = false;
        pthread_mutex_unlock(&o->lock);
}

/* Opens channel slot i: NEW_CHANNEL with one end of a fresh socketpair. Locked. */
static int channel_open(SimRemoteOps *o, unsigned i) {
        _cleanup_close_ int ours = -EBADF, theirs = -EBADF;
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_NEW_CHANNEL, .fd = -1 };
        SimRemoteReply rep;
        int sv[2], fd;
        ssize_t n;
        int r;

        if (!o->channels[i].buf) {
                o->channels[i].buf = malloc(SIM_REMOTE_MAX_MESSAGE);
                if (!o->channels[i].buf)
                        return -ENOMEM;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        ours = sv[0];
        theirs = sv[1];
        r = sim_remote_send(o->control_fd, &(struct iovec) { .iov_base = &req, .iov_len = sizeof req }, 1, theirs);
        if (r < 0)
                return r == -EPIPE ? -ENODEV : r;
        r = wait_reply(o, o->control_fd, true, reply_bound_ms(o, false, 0));
        if (r < 0)
                return r;
        n = sim_remote_recv(o->control_fd, &rep, sizeof rep, &fd);
        if (n == 0)
                return -ENODEV;
        if (n < 0)
                return (int) n;
        safe_close(fd);
        if ((size_t) n != sizeof rep || fd >= 0 || rep.arg_size != 0 || rep.ret > 0)
                return -EPROTO;
        if (rep.ret < 0)
                return rep.ret;
        o->channels[i].fd = TAKE_FD(ours);
        return 0;
}

/* An idle channel, or a new one: -EMFILE when SIM_REMOTE_MAX_CHANNELS are busy. */
static int channel_acquire(SimRemoteOps *o, unsigned *ret) {
        int free_slot = -1, r;

        pthread_mutex_lock(&o->lock);
        if (o->broken) {
                pthread_mutex_unlock(&o->lock);
                return -ENODEV;
        }
        for (unsigned i = 0; i < SIM_REMOTE_MAX_CHANNELS; i++) {
                if (o->channels[i].fd >= 0 && !o->channels[i].busy) {
                        o->channels[i].busy = true;
                        pthread_mutex_unlock(&o->lock);
                        *ret = i;
                        return 0;
                }
                if (o->channels[i].fd < 0 && free_slot < 0)
                        free_slot = (int) i;
        }
        if (free_slot < 0)
                r = -EMFILE;
        else {
                r = channel_open(o, (unsigned) free_slot);
                if (r >= 0) {
                        o->channels[free_slot].busy = true;
                        *ret = (unsigned) free_slot;
                }
        }
        pthread_mutex_unlock(&o->lock);
        return r;
}

typedef struct CancelUnwind {
        SimRemoteOps *o;
        unsigned channel;
        void *owned;
} CancelUnwind;

/* Cancelled while waiting for a reply: the channel is out of step for good,
 * and the caller's frame goes without its cleanup. */
static void call_cancelled(void *userdata) {
        CancelUnwind *u = userdata;
        channel_retire(u->o, u->channel);
        free(u->owned);
}

/* Waits for the reply with cancellation enabled (poll is the cancellation
 * point, so nothing is half received when the thread goes), for at most
 * bound_ms (-1: for ever): 0, or -ETIMEDOUT with o broken. A function of
 * its own so that pthread_cleanup_push's setjmp sees few locals. */
static int call_wait_cancellable(SimRemoteOps *o, Call *c, int bound_ms) {
        CancelUnwind unwind = { .o = o, .channel = c->channel, .owned = c->owned };
        struct pollfd p = { .fd = o->channels[c->channel].fd, .events = POLLIN };
        volatile int r;

        pthread_cleanup_push(call_cancelled, &unwind);
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
        do
                r = poll(&p, 1, bound_ms);
        while (r < 0 && errno == EINTR);
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
        pthread_cleanup_pop(0);
        return r == 0 ? reply_late(o, false) : 0;
}

static ssize_t call_recv(SimRemoteOps *o, Call *c) {
        RemoteChannel *ch = &o->channels[c->channel];
        /* A WAIT_EVENTS sleeps as long as it asked, and no longer: a worker
         * that stopped between answering the SET_EVENT that ends a wait and
         * passing on the wait's own answer would hold its caller (the GPU
         * context's waiter, which its teardown joins) for ever. Any other
         * call is answered at once by a peer that works. */
        int bound = reply_bound_ms(o, c->cancellable, c->wait_ms), r;

        if (c->cancellable && c->old_cancel == PTHREAD_CANCEL_ENABLE)
                r = call_wait_cancellable(o, c, bound);
        else
                r = wait_reply(o, ch->fd, false, bound);
        if (r < 0)
                return r;
        return sim_remote_recv(ch->fd, ch->buf, SIM_REMOTE_MAX_MESSAGE, &c->rep_fd);
}

static void call_end(SimRemoteOps *o, Call *c) {
        c->rep_fd = safe_close(c->rep_fd);
        if (c->have_channel)
                channel_release(o, c->channel);
        c->have_channel = false;
        pthread_setcancelstate(c->old_cancel, NULL);
}

/*
 * Sends c's request on a channel and receives the reply into c. On success
 * the channel stays c's until call_end(), which the caller must call whatever
 * this returns. -ENODEV when the daemon's end is gone, -EPROTO for a reply
 * that is not one, -EMFILE, -EBADF when send_fd is not open.
 */
static int call_begin(SimRemoteOps *o, Call *c) {
        struct iovec iov[3];
        size_t n_iov = 0;
        ssize_t n;
        int r;

        c->rep_fd = -EBADF;
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &c->old_cancel);
        r = channel_acquire(o, &c->channel);
        if (r < 0)
                return r;
        c->have_channel = true;

        c->req.arg_size = (uint32_t) c->arg_size;
        iov[n_iov++] = (struct iovec) { .iov_base = &c->req, .iov_len = sizeof c->req };
        if (c->arg_size > 0)
                iov[n_iov++] = (struct iovec) { .iov_base = (void *) c->arg, .iov_len = c->arg_size };
        if (c->array_size > 0)
                iov[n_iov++] = (struct iovec) { .iov_base = (void *) c->array, .iov_len = c->array_size };
        r = sim_remote_send(o->channels[c->channel].fd, iov, n_iov, c->send_fd);
        if (r == -EBADF && c->send_fd >= 0)
                return r; /* nothing went out: the channel is fine */
        if (r < 0)
                goto broken;

        n = call_recv(o, c);
        if (n <= 0) {
                r = n == 0 ? -ENODEV : (int) n;
                goto broken;
        }
        if ((size_t) n < sizeof c->rep) {
                r = -EPROTO;
                goto broken;
        }
        const uint8_t *buf = o->channels[c->channel].buf;
        memcpy(&c->rep, buf, sizeof c->rep);
        if (c->rep.arg_size > (size_t) n - sizeof c->rep) {
                r = -EPROTO;
                goto broken;
        }
        c->rep_arg = buf + sizeof c->rep;
        c->rep_arg_size = c->rep.arg_size;
        c->rep_array = c->rep_arg + c->rep_arg_size;
        c->rep_array_size = (size_t) n - sizeof c->rep - c->rep_arg_size;
        return 0;

broken:
        c->rep_fd = safe_close(c->rep_fd);
        channel_retire(o, c->channel);
        c->have_channel = false;
        return r == -EPIPE ? -ENODEV : r;
}

/* A reply of the header alone (no argument, array or fd) with an errno or 0. */
static int call_simple(SimRemoteOps *o, Call *c) {
        int r = call_begin(o, c);

        if (r >= 0) {
                r = c->rep.ret;
                if (c->rep_arg_size || c->rep_array_size || c->rep_fd >= 0 || r > 0)
                        r = -EPROTO;
        }
        call_end(o, c);
        return r;
}

/* ---- Operations ---- */

static int open_file(SimRemoteOps *o, SimRemoteOp op, unsigned minor) {
        Call c = { .req = { .op = op, .fd = -1, .u64 = { minor } }, .send_fd = -1 };
        int r = call_begin(o, &c), local;

        if (r >= 0) {
                r = c.rep.ret;
                if (c.rep_arg_size || c.rep_array_size || (r >= 0) != (c.rep_fd >= 0))
                        r = -EPROTO;
                else if (r >= 0) {
                        local = c.rep_fd;
                        int k = files_add(o, local, r);
                        if (k < 0)
                                r = k;
                        else {
                                c.rep_fd = -EBADF;
                                r = local;
                        }
                }
        }
        call_end(o, &c);
        return r;
}

static int op_open_kfd(void *userdata) {
        return open_file(userdata, SIM_REMOTE_OP_OPEN_KFD, 0);
}

static int op_open_render(void *userdata, unsigned minor) {
        return open_file(userdata, SIM_REMOTE_OP_OPEN_RENDER, minor);
}

static int op_close(void *userdata, int fd) {
        SimRemoteOps *o = userdata;
        int remote;

        pthread_mutex_lock(&o->lock);
        ssize_t i = fd >= 0 ? files_find(o, fd) : -1;
        if (i < 0) {
                pthread_mutex_unlock(&o->lock);
                return -EBADF;
        }
        remote = o->files[i].remote;
        o->files[i] = o->files[--o->n_files];
        pthread_mutex_unlock(&o->lock);
        safe_close(fd);

        Call c = { .req = { .op = SIM_REMOTE_OP_CLOSE, .fd = remote }, .send_fd = -1 };
        return call_simple(o, &c);
}

/* The value of a 32-bit field of the argument as the simulator would read it
 * (zero where the caller's struct does not reach), and whether all of it is
 * the caller's. */
static uint32_t view_u32(const uint8_t *view, size_t usize, size_t off, bool *ret_whole) {
        uint32_t v;
        memcpy(&v, view + off, sizeof v);
        if (ret_whole)
                *ret_whole = off + sizeof v <= usize;
        return v;
}

static uint64_t view_u64(const uint8_t *view, size_t off) {
        uint64_t v;
        memcpy(&v, view + off, sizeof v);
        return v;
}

/* DRM_IOCTL_VERSION's string i (name, date, desc): its length and buffer
 * fields in struct drm_version. */
static const size_t version_len_off[3] = { offsetof(struct drm_version, name_len), offsetof(struct drm_version, date_len),
                                           offsetof(struct drm_version, desc_len) };
static const size_t version_ptr_off[3] = { offsetof(struct drm_version, name), offsetof(struct drm_version, date),
                                           offsetof(struct drm_version, desc) };

static size_t version_len(const uint8_t *v, unsigned i) {
        return (size_t) view_u64(v, version_len_off[i]);
}

/* Each string the daemon sent (the part of the array for it) into the
 * caller's buffer: as many bytes as drm_copy_field() copies — the string's
 * length (what came back) or the buffer's, the fewer. */
static int version_scatter(const uint8_t *view, const uint8_t *rep, size_t rep_size, const uint8_t *array,
                           size_t array_size) {
        size_t at = 0;

        if (rep_size < sizeof(struct drm_version))
                return array_size == 0 ? 0 : -EPROTO;
        for (unsigned i = 0; i < 3; i++) {
                size_t room = MIN(version_len(view, i), (size_t) SIM_REMOTE_MAX_VERSION_FIELD);
                size_t n = MIN(room, version_len(rep, i));
                if (at + room > array_size && n > 0)
                        return -EPROTO;
                uint64_t ptr = view_u64(view, version_ptr_off[i]);
                if (n > 0 && ptr == 0)
                        return -EPROTO;
                if (n > 0)
                        memcpy((void *) (uintptr_t) ptr, array + at, n);
                at += room;
        }
        return 0;
}

/* The dma-buf fd field at off: our fd goes along with the request; a closed
 * one goes as none, and the daemon answers what the simulator answers for it. */
static int dmabuf_fd_to_send(const uint8_t *view, size_t usize, size_t off) {
        int local = (int) view_u32(view, usize, off, NULL);

        return local >= 0 && fcntl(local, F_GETFD) >= 0 ? local : -1;
}

static int op_ioctl(void *userdata, int fd, unsigned long request, void *arg) {
        SimRemoteOps *o = userdata;
        unsigned dir = sim_remote_ioctl_dir(request); /* the kernel's, not the caller's word's */
        size_t usize = _IOC_SIZE(request);
        SimRemoteIoctlKind kind = sim_remote_ioctl_kind(request);
        size_t vsize = MAX(usize, sim_remote_ioctl_struct_size(kind));
        _cleanup_free_ uint8_t *view = NULL;
        Call c = {
                .req = { .op = SIM_REMOTE_OP_IOCTL, .fd = files_remote(o, fd), .u64 = { (uint32_t) request } },
                .send_fd = -1,
        };
        void *out_array = NULL;
        size_t out_cap = 0; /* bytes of the caller's array the reply may fill */
        bool whole;
        int r;

        /* The argument as it goes out: the caller's bytes if the kernel
         * copies them in (it reads nothing otherwise, whatever the caller's
         * word says), zero-extended to the struct we parse. */
        view = calloc(1, MAX(vsize, (size_t) 1));
        if (!view)
                return -ENOMEM;
        if (arg && (dir & _IOC_WRITE))
                memcpy(view, arg, usize);
        if (arg) {
                c.arg = view;
                c.arg_size = usize;
        } else
                c.req.flags = SIM_REMOTE_ARG_NULL;
        c.owned = view;

        if (arg)
                switch (kind) {
                case SIM_REMOTE_IOCTL_ACQUIRE_VM: {
                        size_t off = offsetof(struct kfd_ioctl_acquire_vm_args, drm_fd);
                        uint32_t local = view_u32(view, usize, off, &whole);
                        if (whole && (dir & _IOC_WRITE)) {
                                int32_t remote = files_remote(o, (int) local);
                                memcpy(view + off, &remote, sizeof remote);
                        }
                        break;
                }
                case SIM_REMOTE_IOCTL_WAIT_EVENTS: {
                        uint64_t ptr = view_u64(view, offsetof(struct kfd_ioctl_wait_events_args, events_ptr));
                        uint32_t n = view_u32(view, usize, offsetof(struct kfd_ioctl_wait_events_args, num_events), NULL);
                        if (ptr == 0 || n == 0)
                                break;
                        if (n > SIM_REMOTE_MAX_WAIT_EVENTS) {
                                /* What kfd_ioctl copies out when the waiters cannot be allocated. */
                                uint32_t fail = KFD_IOC_WAIT_RESULT_FAIL;
                                size_t off = offsetof(struct kfd_ioctl_wait_events_args, wait_result);
                                if ((dir & _IOC_READ) && off + sizeof fail <= usize) {
                                        memcpy(arg, view, usize);
                                        memcpy((uint8_t *) arg + off, &fail, sizeof fail);
                                }
                                return -ENOMEM;
                        }
                        c.array = out_array = (void *) (uintptr_t) ptr;
                        c.array_size = out_cap = (size_t) n * sizeof(struct kfd_event_data);
                        c.cancellable = true;
                        c.wait_ms = view_u32(view, usize, offsetof(struct kfd_ioctl_wait_events_args, timeout), NULL);
                        break;
                }
                case SIM_REMOTE_IOCTL_MAP: {
                        uint64_t ptr = view_u64(view, offsetof(struct kfd_ioctl_map_memory_to_gpu_args, device_ids_array_ptr));
                        uint32_t n = view_u32(view, usize, offsetof(struct kfd_ioctl_map_memory_to_gpu_args, n_devices), NULL);
                        if (ptr == 0 || n == 0)
                                break;
                        if (n > SIM_REMOTE_MAX_DEVICE_IDS)
                                return -ENOMEM; /* kmalloc_array of the ids, for a count this large */
                        c.array = (const void *) (uintptr_t) ptr;
                        c.array_size = (size_t) n * sizeof(uint32_t);
                        break;
                }
                case SIM_REMOTE_IOCTL_APERTURES: {
                        uint64_t ptr = view_u64(view, offsetof(struct kfd_ioctl_get_process_apertures_new_args,
                                                               kfd_process_device_apertures_ptr));
                        uint32_t n = view_u32(view, usize,
                                              offsetof(struct kfd_ioctl_get_process_apertures_new_args, num_of_nodes), NULL);
                        if (ptr != 0 && n > 0) {
                                out_array = (void *) (uintptr_t) ptr;
                                out_cap = (size_t) MIN(n, SIM_REMOTE_MAX_APERTURES) *
                                          sizeof(struct kfd_process_device_apertures);
                        }
                        break;
                }
                case SIM_REMOTE_IOCTL_DMABUF_INFO: {
                        uint64_t ptr = view_u64(view, offsetof(struct kfd_ioctl_get_dmabuf_info_args, metadata_ptr));
                        uint32_t m = view_u32(view, usize, offsetof(struct kfd_ioctl_get_dmabuf_info_args, metadata_size), NULL);
                        if (ptr != 0) {
                                out_array = (void *) (uintptr_t) ptr;
                                out_cap = MIN(m, SIM_REMOTE_MAX_METADATA);
                        }
                        c.send_fd = dmabuf_fd_to_send(view, usize, offsetof(struct kfd_ioctl_get_dmabuf_info_args, dmabuf_fd));
                        break;
                }
                case SIM_REMOTE_IOCTL_IMPORT_DMABUF:
                        c.send_fd = dmabuf_fd_to_send(view, usize, offsetof(struct kfd_ioctl_import_dmabuf_args, dmabuf_fd));
                        break;
                case SIM_REMOTE_IOCTL_TILE_CONFIG: {
                        /* Both arrays come back in one: room for what the
                         * daemon may fill (it clamps each count as we do). */
                        uint32_t nt = view_u32(view, usize, offsetof(struct kfd_ioctl_get_tile_config_args, num_tile_configs), NULL);
                        uint32_t nm = view_u32(view, usize, offsetof(struct kfd_ioctl_get_tile_config_args, num_macro_tile_configs), NULL);
                        out_cap = ((size_t) MIN(nt, SIM_REMOTE_MAX_TILE_CONFIGS) + MIN(nm, SIM_REMOTE_MAX_TILE_CONFIGS)) * 4;
                        break;
                }
                case SIM_REMOTE_IOCTL_CU_MASK: {
                        uint64_t ptr = view_u64(view, offsetof(struct kfd_ioctl_set_cu_mask_args, cu_mask_ptr));
                        uint32_t n = view_u32(view, usize, offsetof(struct kfd_ioctl_set_cu_mask_args, num_cu_mask), NULL);
                        if (ptr == 0 || n == 0 || n % 32 != 0)
                                break;
                        /* memdup_user reads no more than 1024 bits. */
                        c.array = (const void *) (uintptr_t) ptr;
                        c.array_size = (size_t) MIN(n / 32, SIM_REMOTE_MAX_CU_MASK) * 4;
                        break;
                }
                case SIM_REMOTE_IOCTL_DRM_VERSION:
                        /* The three strings come back in one array, each
                         * in a part of its own (at most its length). */
                        for (unsigned i = 0; i < 3; i++)
                                out_cap += MIN(version_len(view, i), (size_t) SIM_REMOTE_MAX_VERSION_FIELD);
                        break;
                case SIM_REMOTE_IOCTL_AMDGPU_INFO: {
                        uint64_t ptr = view_u64(view, offsetof(struct drm_amdgpu_info, return_pointer));
                        uint32_t n = view_u32(view, usize, offsetof(struct drm_amdgpu_info, return_size), NULL);
                        if (ptr == 0 || n == 0)
                                break;
                        c.array = out_array = (void *) (uintptr_t) ptr;
                        c.array_size = out_cap = MIN(n, SIM_REMOTE_MAX_INFO);
                        break;
                }
                default:
                        break;
                }

        r = call_begin(o, &c);
        if (r < 0) {
                call_end(o, &c);
                return r;
        }
        r = c.rep.ret;
        /* The reply's shape: the argument back iff the kernel copies it out
         * (never into memory of a call that only copies in), an fd
         * only with a successful EXPORT_DMABUF or PRIME_HANDLE_TO_FD, an
         * array only where one may come and never larger than the caller's. */
        bool fd_out = kind == SIM_REMOTE_IOCTL_EXPORT_DMABUF || kind == SIM_REMOTE_IOCTL_PRIME_TO_FD;
        if (c.rep_arg_size != (arg && (dir & _IOC_READ) ? usize : 0) || r > 0 ||
            (c.rep_fd >= 0) != (fd_out && arg && r == 0) ||
            c.rep_array_size > out_cap ||
            (kind == SIM_REMOTE_IOCTL_AMDGPU_INFO && c.rep_array_size != 0 && c.rep_array_size != out_cap) ||
            (kind == SIM_REMOTE_IOCTL_WAIT_EVENTS && c.rep_array_size != out_cap) ||
            (kind == SIM_REMOTE_IOCTL_APERTURES && c.rep_array_size % sizeof(struct kfd_process_device_apertures))) {
                call_end(o, &c);
                return -EPROTO;
        }
        if (kind == SIM_REMOTE_IOCTL_TILE_CONFIG && c.rep_array_size > 0) {
                /* The counts the daemon wrote say where each array's part is. */
                struct kfd_ioctl_get_tile_config_args out = {};
                memcpy(&out, c.rep_arg, MIN(c.rep_arg_size, sizeof out));
                if (c.rep_arg_size < sizeof out ||
                    c.rep_array_size != ((size_t) out.num_tile_configs + out.num_macro_tile_configs) * 4 ||
                    out.num_tile_configs > view_u32(view, usize, offsetof(struct kfd_ioctl_get_tile_config_args, num_tile_configs), NULL) ||
                    out.num_macro_tile_configs > view_u32(view, usize, offsetof(struct kfd_ioctl_get_tile_config_args, num_macro_tile_configs), NULL)) {
                        call_end(o, &c);
                        return -EPROTO;
                }
                if (out.num_tile_configs > 0)
                        memcpy((void *) (uintptr_t) out.tile_config_ptr, c.rep_array, (size_t) out.num_tile_configs * 4);
                if (out.num_macro_tile_configs > 0)
                        memcpy((void *) (uintptr_t) out.macro_tile_config_ptr,
                               (const uint8_t *) c.rep_array + (size_t) out.num_tile_configs * 4,
                               (size_t) out.num_macro_tile_configs * 4);
        } else if (kind == SIM_REMOTE_IOCTL_DRM_VERSION) {
                if (r == 0 && version_scatter(view, c.rep_arg, c.rep_arg_size, c.rep_array, c.rep_array_size) < 0) {
                        call_end(o, &c);
                        return -EPROTO;
                }
        } else if (c.rep_array_size > 0)
                memcpy(out_array, c.rep_array, c.rep_array_size);
        if (c.rep_arg_size > 0)
                memcpy(arg, c.rep_arg, c.rep_arg_size);
        if (c.rep_fd >= 0) {
                /* The exported dma-buf: ours now, O_CLOEXEC as the caller asked
                 * (DRM_CLOEXEC is O_CLOEXEC). */
                bool prime = kind == SIM_REMOTE_IOCTL_PRIME_TO_FD;
                size_t off = prime ? offsetof(struct drm_prime_handle, fd)
                                   : offsetof(struct kfd_ioctl_export_dmabuf_args, dmabuf_fd);
                uint32_t flags = view_u32(view, usize,
                                          prime ? offsetof(struct drm_prime_handle, flags)
                                                : offsetof(struct kfd_ioctl_export_dmabuf_args, flags),
                                          NULL);
                if (!(flags & O_CLOEXEC))
                        (void) fcntl(c.rep_fd, F_SETFD, 0);
                if ((dir & _IOC_READ) && off + sizeof(uint32_t) <= usize) {
                        uint32_t local = (uint32_t) TAKE_FD(c.rep_fd);
                        memcpy((uint8_t *) arg + off, &local, sizeof local);
                }
                /* else the caller cannot learn the number: the fd is closed */
        }
        call_end(o, &c);
        return r;
}

/* KfdOps.mmap_resolve (kfd-ops.h): what the server says maps (fd, offset). */
static int op_mmap_resolve(void *userdata, int fd, size_t length, uint64_t offset, int *ret_fd,
                           uint64_t *ret_offset) {
        SimRemoteOps *o = userdata;
        Call c = {
                .req = { .op = SIM_REMOTE_OP_MMAP, .fd = files_remote(o, fd), .u64 = { length, offset } },
                .send_fd = -1,
        };
        int r = call_begin(o, &c);

        if (r >= 0) {
                r = c.rep.ret;
                if (c.rep_arg_size || c.rep_array_size || r > 0 || (r == 0) != (c.rep_fd >= 0) ||
                    c.rep.u64[0] > INT64_MAX)
                        r = -EPROTO;
                else if (r == 0) {
                        *ret_fd = TAKE_FD(c.rep_fd);
                        *ret_offset = c.rep.u64[0];
                }
        }
        call_end(o, &c);
        return r;
}

static int op_mmap(void *userdata, void *addr, size_t length, int prot, int flags, int fd, uint64_t offset,
                   void **ret_addr) {
        _cleanup_close_ int target = -EBADF;
        uint64_t target_offset = 0;
        int r = op_mmap_resolve(userdata, fd, length, offset, &target, &target_offset);
        void *m;

        if (r < 0)
                return r;
        m = mmap(addr, length, prot, flags, target, (off_t) target_offset);
        if (m == MAP_FAILED)
                return -errno;
        *ret_addr = m;
        return 0;
}

static int op_munmap(void *userdata, void *addr, size_t length) {
        return munmap(addr, length) < 0 ? -errno : 0;
}

static int op_exception_info(void *userdata, int kfd_fd, uint32_t *ret_queue_id, char *buf, size_t buflen) {
        SimRemoteOps *o = userdata;
        Call c = {
                .req = { .op = SIM_REMOTE_OP_EXCEPTION_INFO, .fd = files_remote(o, kfd_fd), .u64 = { buf ? buflen : 0 } },
                .send_fd = -1,
        };
        int r = call_begin(o, &c);

        if (r >= 0) {
                r = c.rep.ret;
                const char *text = (const char *) c.rep_array;
                bool text_ok = c.rep_array_size == 0 || memchr(text, 0, c.rep_array_size) != NULL;
                if (c.rep_arg_size || c.rep_fd >= 0 || r > 0 || c.rep.u64[0] > UINT32_MAX || !text_ok ||
                    (r < 0 && c.rep_array_size))
                        r = -EPROTO;
                else if (r == 0) {
                        if (ret_queue_id)
                                *ret_queue_id = (uint32_t) c.rep.u64[0];
                        if (buf && buflen > 0)
                                snprintf(buf, buflen, "%s", c.rep_array_size ? text : "");
                }
        }
        call_end(o, &c);
        return r;
}

/* The daemon's engine learns of the store as an in-process caller's would
 * (one round trip on this channel); errors are nothing to the caller: the
 * engine finds the doorbell on its own a little later. */
static void op_doorbell_written(void *userdata, int kfd_fd, uint32_t queue_id) {
        SimRemoteOps *o = userdata;
        Call c = {
                .req = { .op = SIM_REMOTE_OP_DOORBELL, .fd = files_remote(o, kfd_fd), .u64 = { queue_id } },
                .send_fd = -1,
        };

        (void) call_simple(o, &c);
}

/* ---- The table ---- */

static int handshake(SimRemoteOps *o) {
        SimRemoteRequest req = {
                .op = SIM_REMOTE_OP_HELLO,
                .fd = -1,
                .u64 = { SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32 },
        };
        _cleanup_free_ uint8_t *buf = malloc(sizeof(SimRemoteReply) + SIM_REMOTE_MAX_PATH);
        struct pollfd p = { .fd = o->control_fd, .events = POLLIN };
        SimRemoteReply rep;
        ssize_t n;
        int fd, r;

        if (!buf)
                return -ENOMEM;
        r = sim_remote_send(o->control_fd, &(struct iovec) { .iov_base = &req, .iov_len = sizeof req }, 1, -1);
        if (r < 0)
                return r == -EPIPE ? -EPROTO : r;
        do
                r = poll(&p, 1, HANDSHAKE_TIMEOUT_MS);
        while (r < 0 && errno == EINTR);
        if (r < 0)
                return -errno;
        if (r == 0)
                return -ETIMEDOUT;
        n = sim_remote_recv(o->control_fd, buf, sizeof(SimRemoteReply) + SIM_REMOTE_MAX_PATH, &fd);
        if (n < 0 && n != -EPROTO)
                return (int) n;
        safe_close(fd);
        if (n < (ssize_t) sizeof rep || fd >= 0)
                return -EPROTO;
        memcpy(&rep, buf, sizeof rep);
        if (rep.u64[0] != (SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32) || rep.arg_size != 0 || rep.ret > 0)
                return -EPROTO;
        if (rep.ret < 0)
                return rep.ret;
        const char *root = (const char *) buf + sizeof rep;
        size_t len = (size_t) n - sizeof rep;
        if (len < 2 || root[len - 1] != '\0' || strlen(root) != len - 1)
                return -EPROTO;
        o->sysfs_root = strdup(root);
        return o->sysfs_root ? 0 : -ENOMEM;
}

void sim_remote_ops_set_reply_timeout(const KfdOps *ops, int timeout_ms) {
        SimRemoteOps *o = container_of(ops, SimRemoteOps, ops);

        __atomic_store_n(&o->reply_timeout_ms, timeout_ms < 0 ? -1 : timeout_ms, __ATOMIC_RELAXED);
}

void sim_remote_ops_free(const KfdOps *ops) {
        SimRemoteOps *o;

        if (!ops)
                return;
        o = container_of(ops, SimRemoteOps, ops);
        for (unsigned i = 0; i < SIM_REMOTE_MAX_CHANNELS; i++) {
                safe_close(o->channels[i].fd);
                free(o->channels[i].buf);
        }
        /* The daemon's end sees EOF: the process is torn down there. */
        safe_close(o->control_fd);
        for (size_t i = 0; i < o->n_files; i++)
                safe_close(o->files[i].local);
        free(o->files);
        free(o->sysfs_root);
        pthread_mutex_destroy(&o->lock);
        free(o);
}

int sim_remote_ops_new(int fd, const KfdOps **ret) {
        _cleanup_close_ int sock = fd;
        SimRemoteOps *o;
        int r;

        if (fd < 0)
                return -EBADF;
        o = calloc(1, sizeof *o);
        if (!o)
                return -ENOMEM;
        pthread_mutex_init(&o->lock, NULL);
        for (unsigned i = 0; i < SIM_REMOTE_MAX_CHANNELS; i++)
                o->channels[i].fd = -EBADF;
        o->control_fd = TAKE_FD(sock);
        o->reply_timeout_ms = -1;
        o->ops = (KfdOps) {
                .name = "sim",
                .userdata = o,
                .open_kfd = op_open_kfd,
                .open_render = op_open_render,
                .ioctl = op_ioctl,
                .mmap = op_mmap,
                .munmap = op_munmap,
                .close = op_close,
                .exception_info = op_exception_info,
                .doorbell_written = op_doorbell_written,
                .mmap_resolve = op_mmap_resolve,
        };
        r = handshake(o);
        if (r < 0) {
                sim_remote_ops_free(&o->ops);
                return r;
        }
        o->ops.sysfs_root = o->sysfs_root;
        *ret = &o->ops;
        return 0;
}
