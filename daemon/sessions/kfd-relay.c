/* SPDX-License-Identifier: MIT */
/*
 * The checks around a relayed client's KFD calls (kfd-relay.h). A call that
 * allocates (ALLOC_MEMORY_OF_GPU, by its number, whatever size its request
 * word claims) is charged before it runs: the serving thread queues a charge,
 * wakes the event loop through an eventfd and waits; the loop checks the
 * session's limits as for an AllocBuffer and charges or refuses. A failed
 * allocation gives its charge back, a FREE_MEMORY_OF_GPU that worked gives
 * back what that handle was charged, and the end of the KFD process or of the
 * session gives back the rest. Refused outright, as a kernel without them
 * (EOPNOTSUPP, as a secondary KFD context answers SVM, USERPTR and DBG_TRAP,
 * kfd-facts §7.3): SVM, USERPTR allocations (memory the daemon cannot see),
 * the debugger (DBG_TRAP), CRIU, SMI events, and queues
 * (CREATE_QUEUE) until the relay of queues exists. Events are bounded by the
 * session's Events= (taken when the relay began): past it CREATE_EVENT
 * answers -ENOSPC, as the kernel does when the signal page is full.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kfd/kfd-uapi.h"
#include "sessions/kfd-relay-internal.h"
#include "sessions/kfd-relay.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"

/* How long a serving thread waits for the event loop to charge before it
 * answers -ENOMEM (a loop that busy is as good as out of memory). */
#define CHARGE_WAIT_S 30
/* How long the end of a process waits for the loop to let the daemon's GPU
 * context in it go (hook_release()). */
#define RELEASE_WAIT_S 10

typedef enum Feature {
        FEATURE_SVM,
        FEATURE_USERPTR,
        FEATURE_DEBUGGER,
        FEATURE_CRIU,
        FEATURE_SMI,
        _FEATURE_MAX,
} Feature;

static const char *const feature_names[_FEATURE_MAX] = {
        [FEATURE_SVM] = "shared virtual memory (AMDKFD_IOC_SVM)",
        [FEATURE_USERPTR] = "user-pointer memory (ALLOC_MEMORY_OF_GPU with USERPTR)",
        [FEATURE_DEBUGGER] = "the debugger interface (DBG_TRAP)",
        [FEATURE_CRIU] = "checkpoint/restore (CRIU_OP)",
        [FEATURE_SMI] = "SMI events",
};

KfdRelay *kfd_relay_ref(KfdRelay *r) {
        pthread_mutex_lock(&r->lock);
        r->n_ref++;
        pthread_mutex_unlock(&r->lock);
        return r;
}

void kfd_relay_unref(KfdRelay *r) {
        unsigned n;

        pthread_mutex_lock(&r->lock);
        n = --r->n_ref;
        pthread_mutex_unlock(&r->lock);
        if (n > 0)
                return;
        for (LoopCall *c = r->pending; c; c = r->pending) {
                r->pending = c->next;
                if (c->delta < 0)
                        free(c);
        }
        kfd_relay_views_drop(r);
        free(r->bos);
        for (size_t g = 1; g < r->n_gpus; g++)
                context_kfd_relay_leave(r->gpus[g].ctx);
        /* Left to the end (the loop went before the deferred drop ran):
         * the pool ended its incarnation; the slot is let go here. */
        if (r->ctx) {
                context_on_kfd_drop(r->ctx, NULL, NULL);
                context_unref(r->ctx);
        }
        safe_close(r->doorbell_memfd);
        safe_close(r->mmio_memfd);
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        free(r);
}

/* Loop thread: applies every queued charge, and runs every queued call
 * (with run_calls; else they fail with -ENODEV: the session is going, and
 * this may be inside a GPU context's completion callback, where no call may
 * free that context). */
static void charges_run(KfdRelay *r, bool run_calls) {
        LoopCall *list;
        Session *s;

        pthread_mutex_lock(&r->lock);
        list = r->pending;
        r->pending = NULL;
        s = r->session;
        pthread_mutex_unlock(&r->lock);
        /* Oldest first: the list is last-in first. */
        for (LoopCall *prev = NULL, *c = list, *next; c; c = next) {
                next = c->next;
                c->next = prev;
                prev = c;
                list = c;
        }
        while (list) {
                LoopCall *c = list;
                list = c->next;
                if (c->fn) {
                        c->r = s && run_calls ? c->fn(r, c->data) : -ENODEV;
                        pthread_mutex_lock(&r->lock);
                        c->done = true;
                        pthread_cond_broadcast(&r->cond);
                        pthread_mutex_unlock(&r->lock);
                        continue;
                }
                if (c->delta < 0) {
                        uint64_t back = MIN((uint64_t) -c->delta, r->charged[c->gpu][c->placement]);
                        uint64_t objects = MIN((uint64_t) c->objects, r->objects);
                        if (s && back > 0) {
                                session_account_buffer(s, c->gpu, c->placement, -(int64_t) back);
                                r->charged[c->gpu][c->placement] -= back;
                        }
                        if (s && objects > 0) {
                                session_account_object(s, -(int) objects);
                                r->objects -= objects;
                        }
                        free(c);
                        continue;
                }
                if (!s)
                        c->r = -ENODEV;
                else {
                        SessionErrorSink sink = {};

                        /* Its memory, one more buffer object of the user
                         * (UserBuffers=), and the daemon's fds that hold it
                         * (one memfd per buffer object on the simulator). */
                        s->error_sink = &sink;
                        if (session_check_memory_quota(s, 0, c->gpu, (uint64_t) c->delta) && session_check_object_count(s, 0))
                                (void) session_check_fds(s, 0, session_buffer_fds(s), "a KFD allocation");
                        s->error_sink = NULL;
                        if (sink.error) {
                                session_log(s, LOG_NOTICE, "Session %" PRIu64 ": KFD allocation refused: %s", s->id,
                                            sink.message);
                                c->r = -ENOMEM;
                        } else {
                                session_account_buffer(s, c->gpu, c->placement, c->delta);
                                session_account_object(s, 1);
                                r->charged[c->gpu][c->placement] += (uint64_t) c->delta;
                                r->objects++;
                                c->r = 0;
                        }
                }
                pthread_mutex_lock(&r->lock);
                c->done = true;
                pthread_cond_broadcast(&r->cond);
                pthread_mutex_unlock(&r->lock);
        }
}

static int on_charge(sd_event_source *es, int fd, uint32_t revents, void *userdata) {
        KfdRelay *r = userdata;
        uint64_t n;

        (void) read(fd, &n, sizeof n);
        charges_run(r, true);
        /* Any call of the process is a nudge: its queues may have work. */
        kfd_relay_queues_scan(r);
        return 0;
}

static void queue_locked(KfdRelay *r, LoopCall *c) {
        uint64_t one = 1;

        c->next = r->pending;
        r->pending = c;
        (void) write(r->eventfd, &one, sizeof one);
}

/* Serving thread: gives bytes (and objects) of the session's GPU gpu back,
 * without waiting. */
static void give_back(KfdRelay *r, unsigned gpu, uint64_t size, GpuPlacement placement, unsigned objects) {
        LoopCall *c = calloc(1, sizeof *c);

        if (!c)
                return; /* the session's end gives it back */
        *c = (LoopCall) { .delta = -(int64_t) size, .placement = placement, .gpu = gpu, .objects = objects };
        pthread_mutex_lock(&r->lock);
        if (r->session)
                queue_locked(r, c);
        else
                free(c);
        pthread_mutex_unlock(&r->lock);
}

/* Serving thread: queues c and waits until the loop ran it (or for
 * CHARGE_WAIT_S, if the loop has not taken it by then: -ENOMEM). */
static int run_on_loop(KfdRelay *r, LoopCall *c) {
        struct timespec deadline;
        int k = 0;

        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += CHARGE_WAIT_S;
        pthread_mutex_lock(&r->lock);
        if (!r->session) {
                pthread_mutex_unlock(&r->lock);
                return -ENODEV;
        }
        queue_locked(r, c);
        while (!c->done && k == 0)
                k = pthread_cond_timedwait(&r->cond, &r->lock, &deadline);
        if (!c->done) {
                bool queued = false;

                /* Still queued: take it out (the loop has not seen it). */
                for (LoopCall **x = &r->pending; *x; x = &(*x)->next)
                        if (*x == c) {
                                *x = c->next;
                                queued = true;
                                break;
                        }
                if (queued) {
                        log_warning("Session %" PRIu64 ": KFD relay: the event loop did not take a call of the "
                                    "process within %d s", r->session_id, CHARGE_WAIT_S);
                        c->r = -ENOMEM;
                }
                else /* the loop is running it now */
                        while (!c->done)
                                pthread_cond_wait(&r->cond, &r->lock);
        }
        pthread_mutex_unlock(&r->lock);
        return c->r;
}

/* Serving thread: charges size bytes on the session's GPU gpu, waiting for
 * the loop. */
static int charge(KfdRelay *r, unsigned gpu, uint64_t size, GpuPlacement placement) {
        LoopCall c = { .delta = (int64_t) size, .placement = placement, .gpu = gpu };

        if (size > INT64_MAX)
                return -ENOMEM;
        return run_on_loop(r, &c);
}

int kfd_relay_on_loop(KfdRelay *r, int (*fn)(KfdRelay *r, void *data), void *data) {
        LoopCall c = { .fn = fn, .data = data };

        return run_on_loop(r, &c);
}

/* Serving thread: wakes the loop to look at the queues. */
static void nudge(KfdRelay *r) {
        uint64_t one = 1;

        (void) write(r->eventfd, &one, sizeof one);
}

bool kfd_relay_client_event(KfdRelay *r, uint32_t id) {
        bool yes;

        if (id >= KFD_SIGNAL_EVENT_LIMIT)
                return false;
        pthread_mutex_lock(&r->lock);
        yes = r->client_events[id / 64] & (1ull << (id % 64));
        pthread_mutex_unlock(&r->lock);
        return yes;
}

static void client_event_set(KfdRelay *r, uint32_t id, bool on) {
        if (id >= KFD_SIGNAL_EVENT_LIMIT)
                return;
        pthread_mutex_lock(&r->lock);
        if (on)
                r->client_events[id / 64] |= 1ull << (id % 64);
        else
                r->client_events[id / 64] &= ~(1ull << (id % 64));
        pthread_mutex_unlock(&r->lock);
}

/* The record of a buffer handle of the client (lock held), or NULL: the
 * daemon's own buffers in the process are not the client's to name. */
static RelayBo *find_bo_locked(KfdRelay *r, uint64_t handle) {
        for (size_t i = 0; i < r->n_bos; i++)
                if (r->bos[i].handle == handle && !r->bos[i].freed)
                        return &r->bos[i];
        return NULL;
}

/* Not listed (no memory): it stays charged until the session ends, the
 * relay cannot read it, and the client cannot name it. */
static void add_bo_locked(KfdRelay *r, RelayBo bo) {
        if (r->n_bos == r->cap_bos) {
                size_t cap = MAX(r->cap_bos * 2, (size_t) 64);
                RelayBo *n = realloc(r->bos, cap * sizeof *n);
                if (!n)
                        return;
                r->bos = n;
                r->cap_bos = cap;
        }
        r->bos[r->n_bos++] = bo;
}

static bool client_handle(KfdRelay *r, uint64_t handle) {
        bool yes;

        pthread_mutex_lock(&r->lock);
        yes = find_bo_locked(r, handle);
        pthread_mutex_unlock(&r->lock);
        return yes;
}

void *kfd_relay_cpu(KfdRelay *r, uint64_t va, uint64_t size) {
        RelayBo *bo = NULL;
        void *cpu = NULL;

        if (size == 0 || va + size < va || r->released)
                return NULL;
        pthread_mutex_lock(&r->lock);
        if (!r->ops) {
                pthread_mutex_unlock(&r->lock);
                return NULL;
        }
        for (size_t i = 0; i < r->n_bos && !bo; i++)
                if (!r->bos[i].freed && r->bos[i].va && va >= r->bos[i].va &&
                    va + size <= r->bos[i].va + r->bos[i].size)
                        bo = &r->bos[i];
        if (bo && !bo->cpu && r->gpus[bo->gpu].render_fd >= 0) {
                void *m = NULL;
                /* The process's render file of its GPU maps its buffers (the same VM). */
                if (r->ops->mmap(r->ops->userdata, NULL, bo->size, PROT_READ | PROT_WRITE, MAP_SHARED,
                                 r->gpus[bo->gpu].render_fd, bo->mmap_offset, &m) >= 0)
                        bo->cpu = m;
        }
        if (bo && bo->cpu)
                cpu = (uint8_t *) bo->cpu + (va - bo->va);
        pthread_mutex_unlock(&r->lock);
        return cpu;
}

static void refuse_log(KfdRelay *r, Feature f) {
        bool first;

        pthread_mutex_lock(&r->lock);
        first = !(r->refused_logged & (1u << f));
        r->refused_logged |= 1u << f;
        pthread_mutex_unlock(&r->lock);
        if (first)
                log_info("Session %" PRIu64 ": KFD relay refused %s: not available to relayed clients", r->session_id,
                         feature_names[f]);
}

/* The GPU of gpu_id among those the process sees (r->gpus[]), or -1. */
static int gpu_slot(const KfdRelay *r, uint32_t gpu_id) {
        for (size_t i = 0; i < r->n_gpus; i++)
                if (r->gpus[i].gpu_id == gpu_id)
                        return (int) i;
        return -1;
}

/* The GPU whose render file fd is, or -1. */
static int render_slot(const KfdRelay *r, int fd) {
        for (size_t i = 0; fd >= 0 && i < r->n_gpus; i++)
                if (r->gpus[i].render_fd == fd)
                        return (int) i;
        return -1;
}

static bool is_kfd(unsigned long request, unsigned long nr) {
        return _IOC_TYPE(request) == AMDKFD_IOCTL_BASE && _IOC_NR(request) == nr;
}

static GpuPlacement placement_of(uint32_t flags) {
        return (flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM) ? GPU_PLACEMENT_VRAM : GPU_PLACEMENT_GTT;
}

/* The argument as the simulator reads it: the bytes the request word
 * encodes, zero-extended to the uapi struct (kfd_ioctl copies _IOC_SIZE
 * bytes and clears the rest). NULL for a NULL argument. */
static const void *args_copy(unsigned long request, const void *arg, void *buf, size_t size) {
        if (!arg)
                return NULL;
        memset(buf, 0, size);
        memcpy(buf, arg, MIN((size_t) _IOC_SIZE(request), size));
        return buf;
}

/* The daemon's own objects in the process live in the client address
 * window (gpu-va-window.c); the interposer keeps the client out of it, and
 * so does this: a buffer of the client there could shadow one of ours. */
static bool in_daemon_window(uint64_t va, uint64_t size) {
        return va < GPU_VA_REGION_END && va + size > GPU_VA_REGION_BASE;
}

static int hook_before(void *userdata, unsigned long request, void *arg) {
        KfdRelay *r = userdata;
        Feature f = _FEATURE_MAX;
        int k;

        if (_IOC_TYPE(request) != AMDKFD_IOCTL_BASE)
                return 0;
        /* Every call is a nudge: the process may have rung a doorbell. */
        nudge(r);
        k = kfd_relay_queue_ioctl(r, request, arg);
        if (k != 0)
                return k;
        switch (_IOC_NR(request)) {
        case 0x20: /* AMDKFD_IOC_SVM */
                f = FEATURE_SVM;
                break;
        case 0x22: /* AMDKFD_IOC_CRIU_OP */
                f = FEATURE_CRIU;
                break;
        case 0x1F: /* AMDKFD_IOC_SMI_EVENTS */
                f = FEATURE_SMI;
                break;
        case 0x26: /* AMDKFD_IOC_DBG_TRAP */
                f = FEATURE_DEBUGGER;
                break;
        case 0x08: { /* AMDKFD_IOC_CREATE_EVENT: Events= bounds them as a session's */
                struct kfd_ioctl_create_event_args *a = arg;
                bool full, first = false;

                pthread_mutex_lock(&r->lock);
                full = r->n_events >= r->max_events;
                if (full && !r->events_logged)
                        first = r->events_logged = true;
                pthread_mutex_unlock(&r->lock);
                if (first)
                        log_info("Session %" PRIu64 ": KFD relay refused an event: event count limit (%u, policy "
                                 "Events=) reached", r->session_id, r->max_events);
                /* What kfd_event_create answers when the signal page is full. */
                if (full)
                        return -ENOSPC;
                /* The event page the thunk offers: the process has one
                 * already, the daemon's context's, where the relay writes
                 * the ids of completed signals (kfd-relay-queue.c); the
                 * thunk's page is only where it looks. A handle that is not
                 * the client's is -EINVAL, as kfd_event_page_set's lookup. */
                if (a && _IOC_SIZE(request) >= sizeof a->event_page_offset && a->event_page_offset) {
                        if (!client_handle(r, a->event_page_offset))
                                return -EINVAL;
                        a->event_page_offset = 0;
                }
                return 0;
        }
        case 0x09: /* DESTROY_EVENT */
        case 0x0A: /* SET_EVENT */
        case 0x0B: { /* RESET_EVENT: the client's own events only */
                const struct kfd_ioctl_destroy_event_args *a = arg;
                if (a && _IOC_SIZE(request) >= sizeof *a && !kfd_relay_client_event(r, a->event_id))
                        return -EINVAL;
                return 0;
        }
        case 0x17:   /* FREE_MEMORY_OF_GPU */
        case 0x18:   /* MAP_MEMORY_TO_GPU */
        case 0x19:   /* UNMAP_MEMORY_FROM_GPU */
        case 0x24: { /* EXPORT_DMABUF: the client's own buffers only (handle first in each) */
                const uint64_t *handle = arg;
                if (handle && _IOC_SIZE(request) >= sizeof *handle && !client_handle(r, *handle))
                        return -EINVAL;
                return 0;
        }
        case 0x16: { /* AMDKFD_IOC_ALLOC_MEMORY_OF_GPU */
                struct kfd_ioctl_alloc_memory_of_gpu_args buf;
                const struct kfd_ioctl_alloc_memory_of_gpu_args *a = args_copy(request, arg, &buf, sizeof buf);

                if (!a)
                        return 0; /* the simulator answers -EFAULT */
                if (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) {
                        log_debug("Session %" PRIu64 ": USERPTR allocation of 0x%" PRIx64 " bytes at 0x%" PRIx64
                                  " refused", r->session_id, (uint64_t) a->size, (uint64_t) a->mmap_offset);
                        f = FEATURE_USERPTR;
                        break;
                }
                if (a->size == 0 || a->size > UINT64_MAX - PAGE_SIZE_4K)
                        return 0; /* the simulator answers -EINVAL, nothing is made */
                if (in_daemon_window(a->va_addr, a->size))
                        return -EINVAL;
                /* Charged on its GPU; a GPU the process does not see is
                 * -EINVAL, as the KFD process answers it. */
                int g = gpu_slot(r, a->gpu_id);
                if (g < 0)
                        return -EINVAL;
                return charge(r, r->gpus[g].index, ALIGN_UP(a->size, (uint64_t) PAGE_SIZE_4K),
                              placement_of(a->flags));
        }
        default:
                return 0;
        }
        refuse_log(r, f);
        return -EOPNOTSUPP;
}

static void hook_after(void *userdata, unsigned long request, const void *arg, int result) {
        KfdRelay *r = userdata;

        if ((is_kfd(request, 0x08) || is_kfd(request, 0x09)) && result == 0) {
                const struct kfd_ioctl_create_event_args *a = arg;
                const struct kfd_ioctl_destroy_event_args *d = arg;

                pthread_mutex_lock(&r->lock);
                if (is_kfd(request, 0x08))
                        r->n_events++;
                else if (r->n_events > 0)
                        r->n_events--;
                pthread_mutex_unlock(&r->lock);
                if (is_kfd(request, 0x08))
                        client_event_set(r, a->event_id, true);
                else
                        client_event_set(r, d->event_id, false);
                return;
        }

        if (is_kfd(request, 0x1D) && result == 0) { /* IMPORT_DMABUF: the client's buffer too (no view of it) */
                const struct kfd_ioctl_import_dmabuf_args *a = arg;
                pthread_mutex_lock(&r->lock);
                add_bo_locked(r, (RelayBo) { .handle = a->handle, .placement = GPU_PLACEMENT_GTT, .imported = true });
                pthread_mutex_unlock(&r->lock);
                return;
        }
        if (is_kfd(request, 0x16)) {
                struct kfd_ioctl_alloc_memory_of_gpu_args buf;
                const struct kfd_ioctl_alloc_memory_of_gpu_args *a = args_copy(request, arg, &buf, sizeof buf);
                uint64_t size;

                if (!a || (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) || a->size == 0 ||
                    a->size > UINT64_MAX - PAGE_SIZE_4K || in_daemon_window(a->va_addr, a->size))
                        return;
                int g = gpu_slot(r, a->gpu_id);
                if (g < 0)
                        return; /* refused before it ran: nothing charged */
                size = ALIGN_UP(a->size, (uint64_t) PAGE_SIZE_4K);
                if (result == 0) {
                        pthread_mutex_lock(&r->lock);
                        add_bo_locked(r, (RelayBo) { .handle = a->handle, .size = size, .va = a->va_addr,
                                                     .mmap_offset = a->mmap_offset, .flags = a->flags,
                                                     .placement = placement_of(a->flags), .gpu = (unsigned) g });
                        pthread_mutex_unlock(&r->lock);
                } else
                        give_back(r, r->gpus[g].index, size, placement_of(a->flags), 1);
        } else if (is_kfd(request, 0x17) && result == 0 && arg) {
                struct kfd_ioctl_free_memory_of_gpu_args buf;
                const struct kfd_ioctl_free_memory_of_gpu_args *a = args_copy(request, arg, &buf, sizeof buf);
                RelayBo bo = {};

                /* Marked: the loop unmaps its view and forgets it. */
                pthread_mutex_lock(&r->lock);
                RelayBo *b = find_bo_locked(r, a->handle);
                if (b) {
                        bo = *b;
                        b->freed = true;
                }
                pthread_mutex_unlock(&r->lock);
                if (bo.size > 0)
                        give_back(r, r->gpus[bo.gpu].index, bo.size, bo.placement, 1);
                nudge(r);
        }
}

static int hook_open_render(void *userdata, unsigned minor) {
        KfdRelay *r = userdata;

        /* The process has one render file per GPU it sees, the daemon's
         * GPU's the one its context acquired its VM with. */
        if (r->render_fd < 0)
                return -ENODEV;
        /* The render node of a GPU the process may not see: none (the
         * simulator's answer for a node that is not there). */
        for (size_t i = 0; i < r->n_gpus; i++)
                if (r->gpus[i].render_minor == minor)
                        return r->gpus[i].render_fd >= 0 ? r->gpus[i].render_fd : -ENODEV;
        return -ENOENT;
}

static bool hook_close_keeps(void *userdata, int fd) {
        KfdRelay *r = userdata;

        return render_slot(r, fd) >= 0;
}

static int hook_mmap(void *userdata, int fd, size_t length, uint64_t offset, int *ret_memfd, uint64_t *ret_offset) {
        KfdRelay *r = userdata;
        int memfd = -EBADF;

        int g = render_slot(r, fd);

        if (g >= 0) {
                /* Only the client's own buffers of that GPU: not the
                 * daemon's rings and fences beside them in the same file. */
                bool ok = false;
                pthread_mutex_lock(&r->lock);
                for (size_t i = 0; i < r->n_bos && !ok; i++)
                        ok = !r->bos[i].freed && r->bos[i].gpu == (unsigned) g && offset >= r->bos[i].mmap_offset &&
                             offset - r->bos[i].mmap_offset < r->bos[i].size;
                pthread_mutex_unlock(&r->lock);
                return ok ? 0 : -EACCES;
        }
        switch (offset & KFD_MMAP_TYPE_MASK) {
        case KFD_MMAP_TYPE_DOORBELL:
                /* The client's doorbells are a page of the relay's: its
                 * stores reach no hardware queue (kfd-relay-queue.c). */
                if (length > KFD_DOORBELL_SLICE_SIZE)
                        return -EINVAL;
                memfd = r->doorbell_memfd;
                break;
        case KFD_MMAP_TYPE_MMIO:
                /* The HDP flush page: a harmless page; the daemon flushes the
                 * HDP itself before relayed work. */
                if (length > PAGE_SIZE_4K)
                        return -EINVAL;
                memfd = r->mmio_memfd;
                break;
        default:
                return 0;
        }
        if (memfd < 0)
                return -ENODEV;
        *ret_memfd = fcntl(memfd, F_DUPFD_CLOEXEC, 3);
        if (*ret_memfd < 0)
                return -errno;
        *ret_offset = 0;
        return 1;
}

/* Loop thread, from incarnation_free(): the daemon's context in the process
 * is gone; a server thread waiting in release() may let the process go. */
static void on_context_dropped(void *userdata) {
        KfdRelay *r = userdata;

        /* Its contexts on the process's other GPUs first (before its worker,
         * if it has one, is let go). */
        kfd_relay_gpus_follow(r);
        /* Nothing of the process is read any more: the views go now, while
         * what the process's table stands on (the device) is sure to be
         * there — at exit the pool ends the contexts before the device. */
        kfd_relay_views_drop(r);
        pthread_mutex_lock(&r->lock);
        r->ctx_dropped = true;
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
}

/* Loop thread: the daemon's context in the process goes (before the process). */
static void drop_context(KfdRelay *r) {
        Context *ctx = r->ctx;

        if (!ctx)
                return;
        kfd_relay_queues_done(r);
        kfd_relay_gpus_leave(r);
        r->ctx = NULL;
        context_kfd_relay_end(ctx);
        context_on_kfd_drop(ctx, NULL, NULL);
        context_unref(ctx);
}

static int on_drop_deferred(sd_event_source *es, void *userdata) {
        KfdRelay *r = userdata;

        drop_context(r);
        /* The source is the loop's (floating): taking it back drops the
         * loop's reference, the last, and its destroy callback gives back
         * the deferral's reference to r. */
        r->drop_source = NULL;
        (void) sd_event_source_set_floating(es, false);
        return 0;
}

/* The deferral's reference goes with its source: after it ran, or when the
 * loop is freed at exit without running it. */
static void on_drop_source_destroyed(void *userdata) {
        kfd_relay_unref(userdata);
}

static int release_on_loop(KfdRelay *r, void *data) {
        drop_context(r);
        return 0;
}

/* The process is going: the daemon's context in it goes first — on the
 * loop, now if the session is there, else where kfd_relay_detach() left it
 * to (a deferred drop, or the pool's end at exit). */
static void hook_release(void *userdata) {
        KfdRelay *r = userdata;
        bool dropped;

        pthread_mutex_lock(&r->lock);
        dropped = r->ctx_dropped;
        pthread_mutex_unlock(&r->lock);
        /* Gone already (the pool's end at exit, where the loop runs no more). */
        if (!dropped)
                (void) kfd_relay_on_loop(r, release_on_loop, NULL);
        /* Bounded: a loop that no longer runs must not hold the exit. */
        struct timespec deadline;
        int k = 0;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += RELEASE_WAIT_S;
        pthread_mutex_lock(&r->lock);
        while (r->attached && !r->ctx_dropped && k == 0)
                k = pthread_cond_timedwait(&r->cond, &r->lock, &deadline);
        if (r->attached && !r->ctx_dropped)
                log_warning("Session %" PRIu64 ": KFD relay: the daemon's GPU context in the process was not let go "
                            "within %d s; the process goes anyway", r->session_id, RELEASE_WAIT_S);
        r->released = true;
        pthread_mutex_unlock(&r->lock);
}

/* The KFD process is gone, and its memory with it. */
static void hook_end(void *userdata) {
        KfdRelay *r = userdata;
        uint64_t bytes[SESSION_MAX_GPUS][2] = {};
        unsigned objects[SESSION_MAX_GPUS][2] = {};

        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < r->n_bos; i++) {
                if (r->bos[i].freed || r->bos[i].imported)
                        continue;
                bytes[r->bos[i].gpu][r->bos[i].placement] += r->bos[i].size;
                objects[r->bos[i].gpu][r->bos[i].placement]++;
                r->bos[i].freed = true;
        }
        pthread_mutex_unlock(&r->lock);
        for (size_t g = 0; g < r->n_gpus; g++)
                for (unsigned p = 0; p < 2; p++)
                        if (bytes[g][p] > 0)
                                give_back(r, r->gpus[g].index, bytes[g][p], (GpuPlacement) p, objects[g][p]);
        kfd_relay_unref(r);
}

const SimRemoteHooks kfd_relay_hooks = {
        .before = hook_before,
        .after = hook_after,
        .open_render = hook_open_render,
        .close_keeps = hook_close_keeps,
        .mmap = hook_mmap,
        .release = hook_release,
        .end = hook_end,
};

int kfd_relay_new(Session *s, sd_event *event, KfdRelay **ret) {
        KfdRelay *r = calloc(1, sizeof *r);
        int k;

        if (!r)
                return -ENOMEM;
        pthread_mutex_init(&r->lock, NULL);
        pthread_cond_init(&r->cond, NULL);
        r->n_ref = 1;
        r->session = s;
        r->session_id = s->id;
        r->max_events = s->limits.max_events;
        r->event = event;
        r->render_fd = -1;
        r->gpus[0] = (RelayGpu) { .index = s->gpu->index, .render_fd = -1 };
        r->n_gpus = 1;
        r->doorbell_memfd = r->mmio_memfd = r->ops_keep_fd = -EBADF;
        r->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->eventfd < 0) {
                k = -errno;
                kfd_relay_unref(r);
                return k;
        }
        k = sd_event_add_io(event, &r->source, r->eventfd, EPOLLIN, on_charge, r);
        if (k < 0) {
                close(r->eventfd);
                kfd_relay_unref(r);
                return k;
        }
        (void) sd_event_source_set_description(r->source, "kfd-relay-charge");
        *ret = r;
        return 0;
}

void kfd_relay_add_gpu(KfdRelay *r, unsigned index, uint32_t gpu_id, unsigned render_minor) {
        if (r->n_gpus == ELEMENTSOF(r->gpus))
                return;
        r->gpus[r->n_gpus++] = (RelayGpu) { .index = index, .gpu_id = gpu_id, .render_minor = render_minor,
                                            .render_fd = -1 };
}

int kfd_relay_attach(KfdRelay *r, Context *ctx) {
        GpuContext *gpu = context_get_gpu(ctx);
        int k;

        if (!gpu)
                return -ENODEV;
        r->ctx = context_ref(ctx);
        context_on_kfd_drop(ctx, on_context_dropped, r);
        pthread_mutex_lock(&r->lock);
        r->attached = true;
        pthread_mutex_unlock(&r->lock);
        pthread_mutex_lock(&r->lock);
        r->ops = gpu_context_get_ops(gpu);
        /* An open of the process's KFD file: the process's table lives as
         * long as the relay's views need it (kfd_relay_views_drop()). */
        r->ops_keep_fd = r->ops->open_kfd(r->ops->userdata);
        pthread_mutex_unlock(&r->lock);
        if (r->ops_keep_fd < 0) {
                k = r->ops_keep_fd;
                kfd_relay_views_drop(r);
                drop_context(r);
                return k;
        }
        r->gpu_id = gpu_context_get_info(gpu)->gpu_id;
        r->render_minor = gpu_context_get_info(gpu)->drm_render_minor;
        k = kfd_relay_queues_init(r);
        if (k < 0) {
                drop_context(r);
                return k;
        }
        /* The process's render files of the session's other GPUs, opened
         * through its table (closed with the views: kfd_relay_views_drop()). */
        pthread_mutex_lock(&r->lock);
        for (size_t i = 1; i < r->n_gpus && k >= 0; i++) {
                r->gpus[i].render_fd = r->ops->open_render(r->ops->userdata, r->gpus[i].render_minor);
                k = r->gpus[i].render_fd;
        }
        pthread_mutex_unlock(&r->lock);
        if (k < 0) {
                drop_context(r);
                return k;
        }
        /* Last: the server's threads read them once the client has its end. */
        r->gpus[0].gpu_id = r->gpu_id;
        r->gpus[0].render_minor = r->render_minor;
        r->gpus[0].render_fd = gpu_context_get_render_fd(gpu);
        r->render_fd = r->gpus[0].render_fd;
        return 0;
}

void kfd_relay_detach(KfdRelay *r) {
        Session *s;

        if (!r)
                return;
        /* The daemon's context in the process goes while the process is
         * still there (the server waits in release() for this) — on its own
         * loop iteration: this may run inside that context's completion
         * callback (the session's last job), which must not free it. */
        if (r->ctx && sd_event_add_defer(r->event, &r->drop_source, on_drop_deferred, r) >= 0) {
                kfd_relay_ref(r);
                (void) sd_event_source_set_destroy_callback(r->drop_source, on_drop_source_destroyed);
                /* The loop's from now on: freed with it at exit if it never
                 * runs (a source of ours would keep the loop alive). */
                (void) sd_event_source_set_floating(r->drop_source, true);
                sd_event_source_unref(r->drop_source);
        } else
                drop_context(r);
        /* What the session has on other GPUs goes with it. */
        kfd_relay_gpus_unbind(r);
        /* What is queued first (charges waited for fail, give-backs apply). */
        charges_run(r, false);
        pthread_mutex_lock(&r->lock);
        s = r->session;
        r->session = NULL;
        for (LoopCall *c = r->pending; c; c = r->pending) {
                r->pending = c->next;
                if (c->delta < 0)
                        free(c);
                else {
                        c->r = -ENODEV;
                        c->done = true;
                }
        }
        pthread_cond_broadcast(&r->cond);
        pthread_mutex_unlock(&r->lock);
        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                for (unsigned p = 0; p < 2; p++) {
                        if (s && r->charged[g][p] > 0)
                                session_account_buffer(s, g, (GpuPlacement) p, -(int64_t) r->charged[g][p]);
                        r->charged[g][p] = 0;
                }
        if (s && r->objects > 0)
                session_account_object(s, -(int) MIN(r->objects, (uint64_t) INT32_MAX));
        r->objects = 0;
        r->source = sd_event_source_disable_unref(r->source);
        r->eventfd = safe_close(r->eventfd);
        /* No more looks at the queues: and no source of ours keeps the loop
         * alive past the daemon's end (the deferred drop's is the loop's). */
        r->poll = sd_event_source_disable_unref(r->poll);
        kfd_relay_unref(r);
}

uint64_t kfd_relay_charged(KfdRelay *r) {
        uint64_t sum = 0;

        for (unsigned g = 0; g < SESSION_MAX_GPUS; g++)
                sum += r->charged[g][0] + r->charged[g][1];
        return sum;
}
