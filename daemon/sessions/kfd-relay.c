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
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "kfd/kfd-uapi.h"
#include "sessions/kfd-relay.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"

/* How long a serving thread waits for the event loop to charge before it
 * answers -ENOMEM (a loop that busy is as good as out of memory). */
#define CHARGE_WAIT_S 30

typedef struct Charge Charge;
struct Charge {
        Charge *next;
        int64_t delta;           /* bytes: > 0 to charge (waited for), < 0 to give back */
        GpuPlacement placement;
        unsigned objects;        /* buffer objects given back with a give-back (a charge is one) */
        bool done;
        int r;
};

typedef struct RelayBo {
        uint64_t handle, size;
        GpuPlacement placement;
} RelayBo;

struct KfdRelay {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        unsigned n_ref;
        Session *session;        /* NULL once detached */
        uint64_t session_id;
        int eventfd;
        sd_event_source *source;
        Charge *pending;
        RelayBo *bos;            /* what the process holds, as charged */
        size_t n_bos, cap_bos;
        uint64_t charged[2];     /* by placement; loop thread */
        uint64_t objects;        /* buffer objects charged (each an object and its daemon fds); loop thread */
        unsigned refused_logged; /* features logged once (bit per Feature) */
        uint32_t max_events;     /* the session's Events= when the relay began */
        uint32_t n_events;       /* events the process holds (lock) */
        bool events_logged;
};

typedef enum Feature {
        FEATURE_SVM,
        FEATURE_USERPTR,
        FEATURE_DEBUGGER,
        FEATURE_CRIU,
        FEATURE_SMI,
        FEATURE_QUEUES,
        _FEATURE_MAX,
} Feature;

static const char *const feature_names[_FEATURE_MAX] = {
        [FEATURE_SVM] = "shared virtual memory (AMDKFD_IOC_SVM)",
        [FEATURE_USERPTR] = "user-pointer memory (ALLOC_MEMORY_OF_GPU with USERPTR)",
        [FEATURE_DEBUGGER] = "the debugger interface (DBG_TRAP)",
        [FEATURE_CRIU] = "checkpoint/restore (CRIU_OP)",
        [FEATURE_SMI] = "SMI events",
        [FEATURE_QUEUES] = "user queues (CREATE_QUEUE; not relayed yet)",
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
        for (Charge *c = r->pending; c; c = r->pending) {
                r->pending = c->next;
                if (c->delta < 0)
                        free(c);
        }
        free(r->bos);
        pthread_cond_destroy(&r->cond);
        pthread_mutex_destroy(&r->lock);
        free(r);
}

/* Loop thread: applies every queued charge. */
static void charges_run(KfdRelay *r) {
        Charge *list;
        Session *s;

        pthread_mutex_lock(&r->lock);
        list = r->pending;
        r->pending = NULL;
        s = r->session;
        pthread_mutex_unlock(&r->lock);
        /* Oldest first: the list is last-in first. */
        for (Charge *prev = NULL, *c = list, *next; c; c = next) {
                next = c->next;
                c->next = prev;
                prev = c;
                list = c;
        }
        while (list) {
                Charge *c = list;
                list = c->next;
                if (c->delta < 0) {
                        uint64_t back = MIN((uint64_t) -c->delta, r->charged[c->placement]);
                        uint64_t objects = MIN((uint64_t) c->objects, r->objects);
                        if (s && back > 0) {
                                session_account_buffer(s, c->placement, -(int64_t) back);
                                r->charged[c->placement] -= back;
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
                        if (session_check_memory_quota(s, 0, (uint64_t) c->delta) && session_check_object_count(s, 0))
                                (void) session_check_fds(s, 0, session_buffer_fds(s), "a KFD allocation");
                        s->error_sink = NULL;
                        if (sink.error) {
                                session_log(s, LOG_NOTICE, "Session %" PRIu64 ": KFD allocation refused: %s", s->id,
                                            sink.message);
                                c->r = -ENOMEM;
                        } else {
                                session_account_buffer(s, c->placement, c->delta);
                                session_account_object(s, 1);
                                r->charged[c->placement] += (uint64_t) c->delta;
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
        uint64_t n;

        (void) read(fd, &n, sizeof n);
        charges_run(userdata);
        return 0;
}

static void queue_locked(KfdRelay *r, Charge *c) {
        uint64_t one = 1;

        c->next = r->pending;
        r->pending = c;
        (void) write(r->eventfd, &one, sizeof one);
}

/* Serving thread: gives bytes (and objects) back, without waiting. */
static void give_back(KfdRelay *r, uint64_t size, GpuPlacement placement, unsigned objects) {
        Charge *c = calloc(1, sizeof *c);

        if (!c)
                return; /* the session's end gives it back */
        *c = (Charge) { .delta = -(int64_t) size, .placement = placement, .objects = objects };
        pthread_mutex_lock(&r->lock);
        if (r->session)
                queue_locked(r, c);
        else
                free(c);
        pthread_mutex_unlock(&r->lock);
}

/* Serving thread: charges size bytes, waiting for the loop. */
static int charge(KfdRelay *r, uint64_t size, GpuPlacement placement) {
        Charge c = { .delta = (int64_t) size, .placement = placement };
        struct timespec deadline;
        int k = 0;

        if (size > INT64_MAX)
                return -ENOMEM;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += CHARGE_WAIT_S;
        pthread_mutex_lock(&r->lock);
        if (!r->session) {
                pthread_mutex_unlock(&r->lock);
                return -ENODEV;
        }
        queue_locked(r, &c);
        while (!c.done && k == 0)
                k = pthread_cond_timedwait(&r->cond, &r->lock, &deadline);
        if (!c.done) {
                /* Still queued: take it out (the loop has not seen it). */
                for (Charge **x = &r->pending; *x; x = &(*x)->next)
                        if (*x == &c) {
                                *x = c.next;
                                break;
                        }
                c.r = -ENOMEM;
        }
        pthread_mutex_unlock(&r->lock);
        return c.r;
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

static int hook_before(void *userdata, unsigned long request, const void *arg) {
        KfdRelay *r = userdata;
        Feature f = _FEATURE_MAX;

        if (_IOC_TYPE(request) != AMDKFD_IOCTL_BASE)
                return 0;
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
        case 0x02: /* AMDKFD_IOC_CREATE_QUEUE */
                f = FEATURE_QUEUES;
                break;
        case 0x08: { /* AMDKFD_IOC_CREATE_EVENT: Events= bounds them as a session's */
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
                return full ? -ENOSPC : 0;
        }
        case 0x16: { /* AMDKFD_IOC_ALLOC_MEMORY_OF_GPU */
                struct kfd_ioctl_alloc_memory_of_gpu_args buf;
                const struct kfd_ioctl_alloc_memory_of_gpu_args *a = args_copy(request, arg, &buf, sizeof buf);

                if (!a)
                        return 0; /* the simulator answers -EFAULT */
                if (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) {
                        f = FEATURE_USERPTR;
                        break;
                }
                if (a->size == 0 || a->size > UINT64_MAX - PAGE_SIZE_4K)
                        return 0; /* the simulator answers -EINVAL, nothing is made */
                return charge(r, ALIGN_UP(a->size, (uint64_t) PAGE_SIZE_4K), placement_of(a->flags));
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
                pthread_mutex_lock(&r->lock);
                if (is_kfd(request, 0x08))
                        r->n_events++;
                else if (r->n_events > 0)
                        r->n_events--;
                pthread_mutex_unlock(&r->lock);
                return;
        }

        if (is_kfd(request, 0x16)) {
                struct kfd_ioctl_alloc_memory_of_gpu_args buf;
                const struct kfd_ioctl_alloc_memory_of_gpu_args *a = args_copy(request, arg, &buf, sizeof buf);
                uint64_t size;

                if (!a || (a->flags & KFD_IOC_ALLOC_MEM_FLAGS_USERPTR) || a->size == 0 ||
                    a->size > UINT64_MAX - PAGE_SIZE_4K)
                        return;
                size = ALIGN_UP(a->size, (uint64_t) PAGE_SIZE_4K);
                if (result == 0) {
                        pthread_mutex_lock(&r->lock);
                        if (r->n_bos == r->cap_bos) {
                                size_t cap = MAX(r->cap_bos * 2, (size_t) 64);
                                RelayBo *n = realloc(r->bos, cap * sizeof *n);
                                if (n) {
                                        r->bos = n;
                                        r->cap_bos = cap;
                                }
                        }
                        /* Not listed (no memory): it stays charged until the session ends. */
                        if (r->n_bos < r->cap_bos)
                                r->bos[r->n_bos++] = (RelayBo) { a->handle, size, placement_of(a->flags) };
                        pthread_mutex_unlock(&r->lock);
                } else
                        give_back(r, size, placement_of(a->flags), 1);
        } else if (is_kfd(request, 0x17) && result == 0 && arg) {
                struct kfd_ioctl_free_memory_of_gpu_args buf;
                const struct kfd_ioctl_free_memory_of_gpu_args *a = args_copy(request, arg, &buf, sizeof buf);
                RelayBo bo = {};

                pthread_mutex_lock(&r->lock);
                for (size_t i = 0; i < r->n_bos; i++)
                        if (r->bos[i].handle == a->handle) {
                                bo = r->bos[i];
                                r->bos[i] = r->bos[--r->n_bos];
                                break;
                        }
                pthread_mutex_unlock(&r->lock);
                if (bo.size > 0)
                        give_back(r, bo.size, bo.placement, 1);
        }
}

/* The KFD process is gone, and its memory with it. */
static void hook_end(void *userdata) {
        KfdRelay *r = userdata;
        uint64_t bytes[2] = {};
        unsigned objects[2] = {};

        pthread_mutex_lock(&r->lock);
        for (size_t i = 0; i < r->n_bos; i++) {
                bytes[r->bos[i].placement] += r->bos[i].size;
                objects[r->bos[i].placement]++;
        }
        r->n_bos = 0;
        pthread_mutex_unlock(&r->lock);
        for (unsigned p = 0; p < 2; p++)
                if (bytes[p] > 0)
                        give_back(r, bytes[p], (GpuPlacement) p, objects[p]);
        kfd_relay_unref(r);
}

const SimRemoteHooks kfd_relay_hooks = {
        .before = hook_before,
        .after = hook_after,
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

void kfd_relay_detach(KfdRelay *r) {
        Session *s;

        if (!r)
                return;
        /* What is queued first (charges waited for fail, give-backs apply). */
        charges_run(r);
        pthread_mutex_lock(&r->lock);
        s = r->session;
        r->session = NULL;
        for (Charge *c = r->pending; c; c = r->pending) {
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
        for (unsigned p = 0; p < 2; p++)
                if (s && r->charged[p] > 0)
                        session_account_buffer(s, (GpuPlacement) p, -(int64_t) r->charged[p]);
        if (s && r->objects > 0)
                session_account_object(s, -(int) MIN(r->objects, (uint64_t) INT32_MAX));
        r->charged[0] = r->charged[1] = 0;
        r->objects = 0;
        r->source = sd_event_source_disable_unref(r->source);
        r->eventfd = safe_close(r->eventfd);
        kfd_relay_unref(r);
}

uint64_t kfd_relay_charged(KfdRelay *r) {
        return r->charged[0] + r->charged[1];
}
