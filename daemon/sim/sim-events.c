/* SPDX-License-Identifier: MIT */
/*
 * KFD events of the simulated GPU, following kfd_events.c: signal (and debug)
 * events take a slot of the event page, their id equals the slot index and
 * starts at 1 (id 0 is reserved "to ignore bogus events sent by the CP
 * without a context ID"); other types get ids from
 * KFD_FIRST_NONSIGNAL_EVENT_ID = 0x40000000. Ages start at 1 and every
 * set_event() increments them, skipping 0 and 1 on wrap. Waiters are stack
 * entries of WAIT_EVENTS linked into the events they wait for; they sleep on
 * the device's condition variable, and every state change broadcasts it.
 *
 * Choices:
 *  - the event page BO must be a GTT BO (the kernel pins it to GTT with
 *    amdgpu_amdkfd_gpuvm_map_gtt_bo_to_kernel; kfd-facts §1.10) of at least
 *    32 KiB (stable patch "Event page size %llu is too small"); usable slots
 *    are capped at KFD_SIGNAL_EVENT_LIMIT.
 *  - a queue that hits a packet or an instruction it cannot run sets no
 *    event, as on the kernel (kfd-facts §7.2): it stops, and its job never
 *    completes. The simulator keeps a record of why (sim_events_queue_stopped)
 *    that KfdOps.exception_info hands out, words a real GPU does not give.
 *  - no SIGSEGV is sent on a VM fault (the kernel does, pitfall #20): the
 *    simulator runs inside the daemon.
 *  - when the device shuts down, sleeping waiters return FAIL (-EIO), as if
 *    their events had been destroyed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kfd/kfd-uapi.h"
#include "sim-device.h"
#include "sim-events.h"
#include "sim-memory.h"
#include "sim-process.h"
#include "util/log.h"
#include "util/macro.h"

/* kfd_events.h */
#define KFD_FIRST_NONSIGNAL_EVENT_ID 0x40000000u
#define KFD_LAST_NONSIGNAL_EVENT_ID 0x7FFFFFFFu
/* "Oldest user mode expects 256 event slots" (kernel-allocated page). */
#define KFD_LEGACY_SIGNAL_SLOTS 256u

struct SimWaiter {
        SimWaiter *next;     /* in event->waiters */
        SimEvent *event;     /* NULL once the event is destroyed */
        bool activated;
        bool event_age_enabled;
};

static bool is_signal_type(uint32_t type) {
        return type == KFD_IOC_EVENT_SIGNAL || type == KFD_IOC_EVENT_DEBUG_EVENT;
}

static SimEvent *event_find(SimProcess *p, uint32_t id) {
        if (id < KFD_SIGNAL_EVENT_LIMIT)
                return p->signal_events[id];
        for (SimEvent *e = p->events; e; e = e->next)
                if (e->id == id)
                        return e;
        return NULL;
}

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* set_event(): "Auto reset if the list is non-empty and we're waking someone."
 * From an engine's interrupt (from_irq) the sleepers are woken when the
 * engine delivers (sim_events_deliver()). */
static void set_event(SimProcess *p, SimEvent *ev, bool from_irq) {
        SimDevice *d = p->device;

        ev->signaled = !ev->auto_reset || !ev->waiters;
        if (++ev->age == 0)
                ev->age = 2; /* never wrap back to the reserved/default ages 0 and 1 */
        for (SimWaiter *w = ev->waiters; w; w = w->next)
                w->activated = true;
        if (!from_irq) {
                pthread_cond_broadcast(&d->wait_cond);
                return;
        }
        /* No one sleeps on it (a barrier event, gpu-queue.c): the kernel's
         * wake_up_all() of an empty queue wakes no one either. */
        if (!ev->waiters)
                return;
        if (!d->irq_pending) {
                d->irq_pending = true;
                d->irq_pending_since_ns = now_ns();
        }
}

bool sim_events_take_delivery(SimDevice *d, bool force) {
        if (!d->irq_pending || (!force && now_ns() - d->irq_pending_since_ns < SIM_IRQ_COALESCE_NS))
                return false;
        d->irq_pending = false;
        return true;
}

void sim_events_wake_sleepers(SimDevice *d) {
        pthread_cond_broadcast(&d->wait_cond);
}

void sim_events_deliver(SimDevice *d, bool force) {
        if (sim_events_take_delivery(d, force))
                sim_events_wake_sleepers(d);
}

static void destroy_event(SimProcess *p, SimEvent *ev) {
        for (SimWaiter *w = ev->waiters; w; w = w->next)
                w->event = NULL;
        ev->waiters = NULL;
        pthread_cond_broadcast(&p->device->wait_cond);
        if (is_signal_type(ev->type)) {
                p->signal_event_count--;
                p->signal_events[ev->id] = NULL;
        }
        for (SimEvent **e = &p->events; *e; e = &(*e)->next)
                if (*e == ev) {
                        *e = ev->next;
                        break;
                }
        free(ev);
}

void sim_events_free_all(SimProcess *p) {
        while (p->events)
                destroy_event(p, p->events);
        sim_bo_unref(p->signal_bo);
        p->signal_bo = NULL;
        p->signal_slots = NULL;
        p->signal_slot_count = 0;
        p->signal_handle = 0;
}

/* kfd_chardev.c kfd_kmap_event_page + kfd_events.c kfd_event_page_set. */
static int kmap_event_page(SimProcess *p, uint64_t handle) {
        SimMem *m;

        if (p->signal_bo)
                return -EINVAL; /* "Event page is already set" */
        SimPdd *pdd = sim_process_pdd(p, KFD_HANDLE_GPU_ID(handle));

        if (!pdd)
                return -EINVAL; /* "Getting device by id failed" */
        if (!pdd->vm_file)
                return -ENODEV; /* kfd_bind_process_to_device */
        m = sim_process_find_mem(p, handle);
        if (!m)
                return -EINVAL; /* "Can't find BO" */
        if (!(m->bo->alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT))
                return -EINVAL; /* only GTT BOs are kmapped as the signal page */
        if (m->bo->size < KFD_EVENT_PAGE_SIZE)
                return -EINVAL; /* "Event page size %llu is too small" */

        p->signal_bo = sim_bo_ref(m->bo);
        p->signal_slots = (uint64_t *) (void *) m->bo->host;
        p->signal_slot_count = KFD_SIGNAL_EVENT_LIMIT;
        p->signal_handle = handle;
        /* "Initialize all events to unsignaled" */
        memset(p->signal_slots, 0xFF, KFD_EVENT_PAGE_SIZE);
        return 0;
}

/* allocate_signal_page(): no user page was given; the kernel allocates one
 * that user space maps with mmap(KFD_MMAP_TYPE_EVENTS). */
static int allocate_signal_page(SimProcess *p) {
        SimGpu *gpu = sim_device_first_dgpu(p->device);
        SimBo *bo;
        int r;

        /* System memory: the GPU it is charged to is only its name. The one
         * the context has a VM on, else the first discrete one. */
        for (unsigned i = 0; i < p->n_pdds; i++)
                if (p->pdds[i]->vm_file) {
                        gpu = p->pdds[i]->gpu;
                        break;
                }
        r = sim_bo_new(p->device, gpu, KFD_EVENT_PAGE_SIZE, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &bo);
        if (r < 0)
                return r;
        p->signal_bo = bo;
        p->signal_slots = (uint64_t *) (void *) bo->host;
        p->signal_slot_count = KFD_LEGACY_SIGNAL_SLOTS;
        memset(p->signal_slots, 0xFF, KFD_EVENT_PAGE_SIZE);
        return 0;
}

static int create_signal_event(SimProcess *p, SimEvent *ev) {
        int r;

        if (!p->signal_bo) {
                r = allocate_signal_page(p);
                if (r < 0)
                        return r;
        }
        if (p->signal_event_count >= p->signal_slot_count)
                return -ENOSPC; /* "Signal event wasn't created because limit was reached" */
        /* idr_alloc(&p->event_idr, ev, 0, signal_mapped_size / 8): 0 is taken. */
        for (uint32_t id = 1; id < p->signal_slot_count; id++)
                if (!p->signal_events[id]) {
                        ev->id = id;
                        p->signal_events[id] = ev;
                        __atomic_store_n(&p->signal_slots[id], KFD_UNSIGNALED_EVENT_SLOT, __ATOMIC_RELEASE);
                        p->signal_event_count++;
                        return 0;
                }
        return -ENOSPC;
}

static int create_other_event(SimProcess *p, SimEvent *ev) {
        for (uint32_t id = KFD_FIRST_NONSIGNAL_EVENT_ID; id <= KFD_LAST_NONSIGNAL_EVENT_ID; id++)
                if (!event_find(p, id)) {
                        ev->id = id;
                        return 0;
                }
        return -ENOSPC;
}

/* kfd_ioctl_create_event + kfd_event_create. */
int sim_events_create(SimProcess *p, struct kfd_ioctl_create_event_args *a) {
        _cleanup_free_ SimEvent *ev = NULL;
        int r;

        if (a->event_page_offset) {
                r = kmap_event_page(p, a->event_page_offset);
                if (r < 0)
                        return r;
        }

        ev = calloc(1, sizeof *ev);
        if (!ev)
                return -ENOMEM;
        ev->type = a->event_type;
        ev->auto_reset = a->auto_reset != 0;
        ev->age = 1; /* "Event age starts at 1" */

        if (is_signal_type(ev->type)) {
                r = create_signal_event(p, ev);
                if (r < 0)
                        return r;
                a->event_page_offset = KFD_MMAP_TYPE_EVENTS;
                a->event_slot_index = ev->id;
        } else {
                r = create_other_event(p, ev);
                if (r < 0)
                        return r;
        }
        a->event_id = ev->id;
        a->event_trigger_data = ev->id;
        ev->next = p->events;
        p->events = TAKE_PTR(ev);
        log_debug("sim: created event %u (type %u)", a->event_id, a->event_type);
        return 0;
}

int sim_events_destroy(SimProcess *p, struct kfd_ioctl_destroy_event_args *a) {
        SimEvent *ev = event_find(p, a->event_id);

        if (!ev)
                return -EINVAL;
        destroy_event(p, ev);
        return 0;
}

/* kfd_set_event / kfd_reset_event: only SIGNAL events can be CPU-signalled. */
int sim_events_set(SimProcess *p, struct kfd_ioctl_set_event_args *a) {
        SimEvent *ev = event_find(p, a->event_id);

        if (!ev || ev->type != KFD_IOC_EVENT_SIGNAL)
                return -EINVAL;
        set_event(p, ev, false);
        return 0;
}

int sim_events_reset(SimProcess *p, struct kfd_ioctl_reset_event_args *a) {
        SimEvent *ev = event_find(p, a->event_id);

        if (!ev || ev->type != KFD_IOC_EVENT_SIGNAL)
                return -EINVAL;
        ev->signaled = false;
        return 0;
}

/* set_event_from_interrupt(): acknowledge (slot back to ~0), then set. */
static void set_event_from_interrupt(SimProcess *p, SimEvent *ev) {
        if (!ev || !is_signal_type(ev->type))
                return;
        __atomic_store_n(&p->signal_slots[ev->id], KFD_UNSIGNALED_EVENT_SLOT, __ATOMIC_RELEASE);
        set_event(p, ev, true);
}

static bool slot_signaled(SimProcess *p, uint32_t id) {
        return id < p->signal_slot_count &&
               __atomic_load_n(&p->signal_slots[id], __ATOMIC_ACQUIRE) != KFD_UNSIGNALED_EVENT_SLOT;
}

/* kfd_signal_event_interrupt. */
void sim_events_interrupt(SimProcess *p, uint32_t partial_id, unsigned valid_bits) {
        SimEvent *ev = NULL;

        p->device->n_interrupts++;
        if (!p->signal_bo)
                return;
        /* lookup_signaled_event_by_partial_id, fast path: enough bits for
         * uniqueness; invalid bits must be zero; only signaled slots count. */
        if (valid_bits > 0 && (valid_bits > 31 || (1u << valid_bits) >= KFD_SIGNAL_EVENT_LIMIT)) {
                if ((valid_bits > 31 || (partial_id >> valid_bits) == 0) && slot_signaled(p, partial_id))
                        ev = event_find(p, partial_id);
        }
        if (ev) {
                set_event_from_interrupt(p, ev);
                return;
        }
        /* "Partial ID lookup failed. Assume that the event ID in the interrupt
         * payload was invalid and do an exhaustive search of signaled events." */
        for (SimEvent *e = p->events, *next; e; e = next) {
                next = e->next;
                if (is_signal_type(e->type) && slot_signaled(p, e->id))
                        set_event_from_interrupt(p, e);
        }
}

/* lookup_events_by_type_and_signal() for kfd_signal_vm_fault_event. */
void sim_events_memory_fault(SimProcess *p, SimGpu *gpu, uint64_t va) {
        /* kfd_signal_vm_fault_event: NotPresent for a page that is not
         * there, ReadOnly for a write to one that is (the only protection
         * fault the simulator models, sim_vm_access_write()), in the VM of
         * the GPU that faulted, whose id the event carries. */
        bool read_only = sim_vm_read_only(p->pdds[gpu->index], va);
        struct kfd_hsa_memory_exception_data data = {
                .failure.NotPresent = !read_only,
                .failure.ReadOnly = read_only,
                .va = va,
                .gpu_id = gpu->info.gpu_id,
        };
        bool any = false;

        for (SimEvent *e = p->events; e; e = e->next)
                if (e->type == KFD_IOC_EVENT_MEMORY) {
                        e->memory_exception_data = data;
                        set_event(p, e, false);
                        any = true;
                }
        if (!any)
                log_debug("sim: GPU VM fault at 0x%llx with no MEMORY event to report it",
                          (unsigned long long) va);
}

void sim_events_gpu_reset(SimProcess *p, SimGpu *gpu, bool memory_lost) {
        struct kfd_hsa_hw_exception_data data = {
                .reset_type = KFD_HW_EXCEPTION_WHOLE_GPU_RESET,
                .reset_cause = KFD_HW_EXCEPTION_GPU_HANG,
                .memory_lost = memory_lost,
                .gpu_id = gpu->info.gpu_id,
        };

        for (SimEvent *e = p->events; e; e = e->next)
                if (e->type == KFD_IOC_EVENT_HW_EXCEPTION) {
                        e->hw_exception_data = data;
                        set_event(p, e, false);
                }
}

void sim_events_queue_stopped(SimProcess *p, uint32_t queue_id, const char *text) {
        SimException *x;

        if (p->exception_count == SIM_MAX_EXCEPTIONS) {
                /* Bounded: the oldest record gives way. */
                p->exception_first = (p->exception_first + 1) % SIM_MAX_EXCEPTIONS;
                p->exception_count--;
        }
        x = &p->exceptions[(p->exception_first + p->exception_count++) % SIM_MAX_EXCEPTIONS];
        x->queue_id = queue_id;
        snprintf(x->text, sizeof x->text, "%s", text ? text : "unknown GPU exception");
}

int sim_events_take_exception(SimProcess *p, uint32_t *ret_queue_id, char *buf, size_t buflen) {
        SimException *x;

        if (p->exception_count == 0)
                return -ENOENT;
        x = &p->exceptions[p->exception_first];
        if (ret_queue_id)
                *ret_queue_id = x->queue_id;
        if (buf && buflen > 0)
                snprintf(buf, buflen, "%s", x->text);
        p->exception_first = (p->exception_first + 1) % SIM_MAX_EXCEPTIONS;
        p->exception_count--;
        return 0;
}

/* init_event_waiter(). */
static int init_waiter(SimProcess *p, SimWaiter *w, const struct kfd_event_data *data) {
        SimEvent *ev = event_find(p, data->event_id);
        uint64_t last_age;

        if (!ev)
                return -EINVAL;
        w->event = ev;
        w->activated = ev->signaled;
        ev->signaled = ev->signaled && !ev->auto_reset;
        /* last_event_age = 0 is reserved for backward compatibility; kernels
         * before uapi 1.14 have no ages and ignore those bytes. */
        last_age = p->device->kfd_minor >= 14 ? kfd_event_data_get_age(data) : 0;
        if (ev->type == KFD_IOC_EVENT_SIGNAL && last_age != 0) {
                w->event_age_enabled = true;
                if (ev->age != last_age)
                        w->activated = true;
        }
        if (!w->activated) {
                w->next = ev->waiters;
                ev->waiters = w;
        }
        return 0;
}

static void free_waiters(uint32_t n, SimWaiter *w) {
        for (uint32_t i = 0; i < n; i++) {
                if (!w[i].event)
                        continue;
                for (SimWaiter **x = &w[i].event->waiters; *x; x = &(*x)->next)
                        if (*x == &w[i]) {
                                *x = w[i].next;
                                break;
                        }
        }
}

/* test_event_condition(). */
static uint32_t test_condition(bool all, uint32_t n, const SimWaiter *w) {
        uint32_t activated = 0;

        for (uint32_t i = 0; i < n; i++) {
                if (!w[i].event)
                        return KFD_IOC_WAIT_RESULT_FAIL;
                if (w[i].activated) {
                        if (!all)
                                return KFD_IOC_WAIT_RESULT_COMPLETE;
                        activated++;
                }
        }
        return activated == n ? KFD_IOC_WAIT_RESULT_COMPLETE : KFD_IOC_WAIT_RESULT_TIMEOUT;
}

/* copy_signaled_event_data(). */
static int copy_event_data(uint32_t n, const SimWaiter *w, struct kfd_event_data *data) {
        for (uint32_t i = 0; i < n; i++) {
                SimEvent *ev = w[i].event;

                if (!ev)
                        return -EINVAL; /* event was destroyed */
                if (!w[i].activated)
                        continue;
                if (ev->type == KFD_IOC_EVENT_MEMORY)
                        data[i].memory_exception_data = ev->memory_exception_data;
                else if (ev->type == KFD_IOC_EVENT_HW_EXCEPTION)
                        data[i].hw_exception_data = ev->hw_exception_data;
                else if (ev->type == KFD_IOC_EVENT_SIGNAL && w[i].event_age_enabled)
                        kfd_event_data_set_age(&data[i], ev->age);
        }
        return 0;
}

typedef struct WaitUnwind {
        uint32_t n;
        SimWaiter *w;
} WaitUnwind;

/* Cancelled while sleeping (sim_ioctl_cancellable()): unlink the waiters from
 * their events before the stack they live on goes. Locked. */
static void wait_cancelled(void *userdata) {
        WaitUnwind *u = userdata;

        free_waiters(u->n, u->w);
        free(u->w);
}

/* Sleeps on wait_cond until the condition holds, the deadline passes, the
 * device shuts down or the calling process is killed (*ret_killed): the one
 * place an ioctl of the simulator may be cancelled. (A function of its own so
 * that pthread_cleanup_push's setjmp sees few locals.) */
static uint32_t sleep_for_events(SimProcess *p, bool all, uint32_t n, SimWaiter *w, const struct timespec *deadline,
                                 bool *ret_killed) {
        SimDevice *d = p->device;
        WaitUnwind unwind = { .n = n, .w = w };
        volatile uint32_t result = KFD_IOC_WAIT_RESULT_TIMEOUT;

        pthread_cleanup_push(wait_cancelled, &unwind);
        for (;;) {
                int k;

                if (d->shutting_down) {
                        result = KFD_IOC_WAIT_RESULT_FAIL;
                        break;
                }
                /* kfd_wait_on_events: "if (fatal_signal_pending(current)) ret = -EINTR" */
                if (p->mm->killed) {
                        result = KFD_IOC_WAIT_RESULT_FAIL;
                        *ret_killed = true;
                        break;
                }
                sim_ioctl_cancellable(true);
                k = deadline ? pthread_cond_timedwait(&d->wait_cond, &d->lock, deadline)
                             : pthread_cond_wait(&d->wait_cond, &d->lock);
                sim_ioctl_cancellable(false);
                result = test_condition(all, n, w);
                if (result != KFD_IOC_WAIT_RESULT_TIMEOUT || k == ETIMEDOUT)
                        break;
        }
        pthread_cleanup_pop(0);
        return result;
}

/* kfd_wait_on_events(). Called with the device lock held; sleeps on wait_cond. */
int sim_events_wait(SimProcess *p, struct kfd_ioctl_wait_events_args *a) {
        struct kfd_event_data *data = (struct kfd_event_data *) (uintptr_t) a->events_ptr;
        bool all = a->wait_for_all != 0;
        uint32_t n = a->num_events, result = KFD_IOC_WAIT_RESULT_TIMEOUT;
        SimWaiter *w = NULL;
        struct timespec deadline;
        bool infinite = a->timeout == KFD_EVENT_TIMEOUT_INFINITE, killed = false;
        int r = 0;

        if (n > 0 && !data) {
                a->wait_result = KFD_IOC_WAIT_RESULT_FAIL;
                return -EFAULT;
        }
        w = calloc(MAX(n, 1u), sizeof *w);
        if (!w) {
                a->wait_result = KFD_IOC_WAIT_RESULT_FAIL;
                return -ENOMEM;
        }

        for (uint32_t i = 0; i < n; i++) {
                r = init_waiter(p, &w[i], &data[i]);
                if (r < 0) {
                        free_waiters(i, w);
                        free(w);
                        a->wait_result = KFD_IOC_WAIT_RESULT_FAIL;
                        return r;
                }
        }

        result = test_condition(all, n, w);
        if (result == KFD_IOC_WAIT_RESULT_TIMEOUT && a->timeout != KFD_EVENT_TIMEOUT_IMMEDIATE) {
                /* user_timeout_to_jiffies(): finite values are capped at 0x7FFFFFFF ms. */
                if (!infinite)
                        sim_deadline_after_ns(&deadline, (uint64_t) MIN(a->timeout, 0x7FFFFFFFu) * 1000000ULL);
                result = sleep_for_events(p, all, n, w, infinite ? NULL : &deadline, &killed);
        }

        if (result == KFD_IOC_WAIT_RESULT_COMPLETE)
                r = copy_event_data(n, w, data);
        free_waiters(n, w);
        free(w);

        if (killed)
                r = -EINTR; /* nothing copied out, auto-reset consumption kept, as the kernel's */
        if (r < 0)
                result = KFD_IOC_WAIT_RESULT_FAIL;
        else if (result == KFD_IOC_WAIT_RESULT_FAIL)
                r = -EIO;
        a->wait_result = result;
        return r;
}

/* kfd_event_mmap(): at most the 32 KiB page, which must exist. */
int sim_events_mmap_target(SimProcess *p, size_t length, int *ret_memfd) {
        if (length == 0 || length > KFD_EVENT_PAGE_SIZE)
                return -EINVAL; /* "Event page mmap requested illegal size" */
        if (!p->signal_bo)
                return -EINVAL; /* "Signal page could not be found" */
        /* A kernel-allocated page: the mapped length sets the usable slots
         * (the kernel sets signal_mapped_size once remap_pfn_range succeeded;
         * here once the mapping is resolved). */
        if (p->signal_handle == 0)
                p->signal_slot_count = (uint32_t) MIN(length / 8, (size_t) KFD_SIGNAL_EVENT_LIMIT);
        *ret_memfd = p->signal_bo->memfd;
        return 0;
}
