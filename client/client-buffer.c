/* SPDX-License-Identifier: MIT */
/*
 * Buffers: AllocBuffer / ImportBuffer / ExportBuffer / FreeBuffer, and the
 * local side of a buffer (its dma-buf fd and a cached read-write mapping).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "client-buffer.h"

/* Tell the daemon to forget a handle we could not wrap locally. */
static void buffer_forget(kfdb_session *s, uint64_t handle) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_FREE_BUFFER, .object.handle = handle };

        (void) session_call(s, &req, NULL, 0, &r);
}

static void buffer_release(ClientObject *o) {
        kfdb_buffer *b = (kfdb_buffer *) o;

        session_object_unlink(&b->object);
        if (b->map)
                munmap(b->map, b->size);
        safe_close(b->fd);
        free(b);
}

/* The GPU a reply says a buffer is on; a daemon from before "gpu-per-job"
 * puts every buffer on the session's GPU and says nothing. */
static uint32_t reply_gpu(const kfdb_session *s, const ClientReply *r) {
        return kfdb_session_has_feature(s, "gpu-per-job") ? r->buffer.gpu : s->gpu;
}

/* After a daemon restart: the memory is the dma-buf's, which we hold. */
static int buffer_restore(ClientObject *o, ClientHandleMap *map) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        kfdb_buffer *b = (kfdb_buffer *) o;
        ClientRequest req = { .type = CLIENT_REQUEST_IMPORT_BUFFER };
        uint64_t old = b->handle;
        int k;

        b->handle = 0;
        k = session_call(b->session, &req, &b->fd, 1, &r);
        if (k < 0)
                return k;
        if (r->buffer.size != b->size) {
                buffer_forget(b->session, r->buffer.handle);
                return -EBADMSG;
        }
        b->handle = r->buffer.handle;
        /* Imported: on the new session's GPU, whichever it was on before. */
        b->gpu = reply_gpu(b->session, r);
        return client_handle_map_add(map, old, b->handle);
}

static int buffer_new(kfdb_session *s, uint64_t handle, uint64_t size, uint32_t gpu, int fd, kfdb_buffer **ret) {
        kfdb_buffer *b;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->session = s;
        b->handle = handle;
        b->size = size;
        b->gpu = gpu;
        b->fd = fd;
        session_object_link(s, &b->object, buffer_release, buffer_restore, false);
        *ret = b;
        return 0;
}


/* gpu: KFDB_GPU_SESSION for the session's GPU (no AllocBufferRequest.gpu, as ever). */
static int buffer_alloc(kfdb_session *s, uint64_t size, kfdb_placement placement, uint32_t gpu, kfdb_buffer **ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_ALLOC_BUFFER };
        int k;

        if (!s || !ret)
                return -EINVAL;
        if (gpu != KFDB_GPU_SESSION && gpu != s->gpu && !kfdb_session_has_feature(s, "gpu-per-job"))
                return session_error(s, -EOPNOTSUPP,
                                     "kfdb_buffer_alloc_on_gpu: kfdbrokerd %s puts a session's buffers on its GPU "
                                     "(%u) only (no feature \"gpu-per-job\")",
                                     kfdb_session_get_daemon_version(s), s->gpu);
        if (gpu != KFDB_GPU_SESSION) {
                req.alloc_buffer.has_gpu = true;
                req.alloc_buffer.gpu = gpu;
        }
        if (size == 0)
                return session_error(s, -EINVAL, "kfdb_buffer_alloc: size must be > 0");
        if (placement != KFDB_PLACEMENT_GTT && placement != KFDB_PLACEMENT_VRAM)
                return session_error(s, -EINVAL, "kfdb_buffer_alloc: unknown placement %d",
                                     (int) placement);
        req.alloc_buffer.size = size;
        req.alloc_buffer.placement = placement;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        if (r->buffer.size < size) {
                buffer_forget(s, r->buffer.handle);
                return session_error(s, -EBADMSG,
                                     "kfdbrokerd allocated %llu bytes for a request of %llu",
                                     (unsigned long long) r->buffer.size,
                                     (unsigned long long) size);
        }
        k = buffer_new(s, r->buffer.handle, r->buffer.size, reply_gpu(s, r), r->fds[0], ret);
        if (k < 0) {
                buffer_forget(s, r->buffer.handle);
                return k;
        }
        r->fds[0] = -EBADF;
        return 0;
}

int kfdb_buffer_alloc(kfdb_session *s, uint64_t size, kfdb_placement placement, kfdb_buffer **ret) {
        return buffer_alloc(s, size, placement, KFDB_GPU_SESSION, ret);
}

int kfdb_buffer_alloc_on_gpu(kfdb_session *s, uint64_t size, kfdb_placement placement, uint32_t gpu,
                             kfdb_buffer **ret) {
        if (s && gpu == KFDB_GPU_SESSION)
                return session_error(s, -EINVAL, "kfdb_buffer_alloc_on_gpu: GPU %u is no GPU index", gpu);
        return buffer_alloc(s, size, placement, gpu, ret);
}

uint32_t kfdb_buffer_get_gpu(const kfdb_buffer *b) {
        return b ? b->gpu : 0;
}

int kfdb_buffer_import(kfdb_session *s, int fd, kfdb_buffer **ret) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_IMPORT_BUFFER };
        _cleanup_close_ int copy = -EBADF;
        int k;

        if (!s || !ret)
                return -EINVAL;
        copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (copy < 0)
                return session_error(s, -errno, "kfdb_buffer_import: bad fd %d: %m", fd);
        k = session_call(s, &req, &copy, 1, &r);
        if (k < 0)
                return k;
        k = buffer_new(s, r->buffer.handle, r->buffer.size, reply_gpu(s, r), copy, ret);
        if (k < 0) {
                buffer_forget(s, r->buffer.handle);
                return k;
        }
        (*ret)->fd_shared = true; /* the caller's fd is the same dma-buf */
        TAKE_FD(copy);
        return 0;
}

int kfdb_buffer_export(kfdb_buffer *b, int *ret_fd) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_EXPORT_BUFFER };
        int k;

        if (!b || !ret_fd)
                return -EINVAL;
        req.object.handle = b->handle;
        k = session_call(b->session, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        *ret_fd = TAKE_FD(r->fds[0]);
        return 0;
}

int kfdb_buffer_get_fd(const kfdb_buffer *b) {
        if (!b)
                return -EINVAL;
        /* The caller may dup it and keep it past kfdb_buffer_free(). The
         * object is never const itself: the const is the API's promise not to
         * change what the caller sees. */
        ((kfdb_buffer *) b)->fd_shared = true;
        return b->fd;
}

uint64_t kfdb_buffer_get_size(const kfdb_buffer *b) {
        return b ? b->size : 0;
}

uint64_t kfdb_buffer_get_handle(const kfdb_buffer *b) {
        return b ? b->handle : 0;
}

int kfdb_buffer_map(kfdb_buffer *b, void **ret) {
        void *p;

        if (!b || !ret)
                return -EINVAL;
        if (!b->map) {
                if (b->size > SIZE_MAX)
                        return -EFBIG;
                p = mmap(NULL, (size_t) b->size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
                if (p == MAP_FAILED)
                        return session_error(b->session, -errno,
                                             "cannot map buffer %llu (%llu bytes): %m",
                                             (unsigned long long) b->handle,
                                             (unsigned long long) b->size);
                b->map = p;
        }
        *ret = b->map;
        return 0;
}

/* A daemon that announces "free-no-reply" is not waited for: one round trip
 * less for every alloc and free pair (docs/protocol.md, "Buffers"). The local
 * side goes first, so that no copy is left here when the daemon reads the
 * request. A send that fails means the connection is gone, and with it the
 * session's buffers; the next call reconnects (without this buffer). Older
 * daemons are waited for, before the local side goes, as a reconnect then
 * makes the buffer again in the new session and frees it there.
 *
 * A buffer the daemon may pool (no copy kept here, at most
 * CLIENT_DEFER_FREE_MAX bytes) is freed with the session's next request
 * where the daemon announces "alloc-free-first": inside the next AllocBuffer,
 * so that an alloc and free pair is one datagram each way and wakes the
 * daemon once (a FreeBuffer of its own woke it a second time: a 64 KiB pair
 * took 19.2-19.4 us p50 against 16.3-16.6 us on the 2-CPU build VM). Until
 * then it is charged as the pooled buffer it would become. */
int kfdb_buffer_free(kfdb_buffer *b) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_FREE_BUFFER };
        kfdb_session *s;
        uint64_t handle;
        int k;

        if (!b)
                return 0;
        s = b->session;
        handle = req.object.handle = b->handle;
        req.object.no_copy_kept = !b->fd_shared;
        if (kfdb_session_has_feature(s, "free-no-reply")) {
                bool defer = req.object.no_copy_kept && b->size <= CLIENT_DEFER_FREE_MAX && handle != 0 &&
                             kfdb_session_has_feature(s, "alloc-free-first");

                req.object.no_reply = true;
                buffer_release(&b->object);
                return defer ? session_defer_free(s, handle, true) : session_send_only(s, &req);
        }
        k = session_call(s, &req, NULL, 0, &r);
        buffer_release(&b->object);
        return k;
}
