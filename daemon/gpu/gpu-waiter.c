/* SPDX-License-Identifier: MIT */
/*
 * The waiter: a thread of the GpuContext that sleeps in AMDKFD_IOC_WAIT_EVENTS
 * — the only blocking kernel call of the GPU layer — and wakes the event loop
 * through the context's eventfd. It waits for any of (wait_for_all = 0,
 * a timeout of WAITER_TIMEOUT_MS):
 *   - each queue's completion event (SIGNAL, auto-reset; a job ends with a
 *     FENCE to its slot + its interrupt, gpu-queue.c "Completion"), as many
 *     as GpuContext.n_done_events says when the wait starts,
 *   - the MEMORY event (GPU VM faults: va, gpu_id),
 *   - the HW_EXCEPTION event,
 *   - the shutdown event (SIGNAL), set by gpu_waiter_stop(), and by
 *     gpu_waiter_rewait() when a queue was added.
 * The signal events carry last_event_age (uapi 1.14): the waiter passes the
 * age it saw last, so an interrupt between two waits makes the next wait
 * return at once instead of being lost (kfd_wait_on_events/init_event_waiter,
 * kfd-facts §1.10). The fault data of activated MEMORY/HW_EXCEPTION events are
 * queued under waiter_lock for gpu_context_process(). Before waking the loop
 * it calls GpuContextOptions.on_events, if any (the daemon wakes clients
 * sleeping on their fence page there).
 *
 * The wait is not infinite: every WAITER_TIMEOUT_MS the thread looks at
 * waiter_stop again, so that stopping never needs pthread_cancel() — a thread
 * cancelled inside an ioctl of the simulator (or of any KfdOps that waits on a
 * condition variable) would die holding its lock. One idle wake-up a second
 * is the price.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "gpu/gpu-internal.h"
#include "util/log.h"
#include "util/macro.h"

#define WAITER_TIMEOUT_MS 1000u

enum {
        WAIT_MEMORY,
        WAIT_HW_EXCEPTION,
        WAIT_SHUTDOWN,
        WAIT_QUEUES, /* then one per queue */
        _WAIT_MAX = WAIT_QUEUES + GPU_MAX_QUEUES,
};

static void wake(GpuContext *c) {
        uint64_t one = 1;
        /* EAGAIN means the counter is saturated: the loop is woken anyway. */
        while (write(c->wake_fd, &one, sizeof one) < 0 && errno == EINTR)
                ;
}

static void push_fault(GpuContext *c, const GpuFault *f) {
        pthread_mutex_lock(&c->waiter_lock);
        if (c->waiter_n_faults < GPU_MAX_PENDING_FAULTS)
                c->waiter_faults[c->waiter_n_faults++] = *f;
        pthread_mutex_unlock(&c->waiter_lock);
}

static void *waiter_main(void *userdata) {
        GpuContext *c = userdata;
        /* Events are created with event_age 1 (kfd_events.c create_signal_event). */
        uint64_t age[_WAIT_MAX];

        for (unsigned i = 0; i < _WAIT_MAX; i++)
                age[i] = 1;
        while (!atomic_load(&c->waiter_stop)) {
                struct kfd_event_data ev[_WAIT_MAX] = {};
                unsigned n = WAIT_QUEUES + atomic_load_explicit(&c->n_done_events, memory_order_acquire);

                ev[WAIT_MEMORY].event_id = c->memory_event;
                ev[WAIT_HW_EXCEPTION].event_id = c->hw_exception_event;
                ev[WAIT_SHUTDOWN].event_id = c->shutdown_event;
                kfd_event_data_set_age(&ev[WAIT_SHUTDOWN], age[WAIT_SHUTDOWN]);
                for (unsigned i = WAIT_QUEUES; i < n; i++) {
                        ev[i].event_id = c->done_events[i - WAIT_QUEUES];
                        kfd_event_data_set_age(&ev[i], age[i]);
                }

                struct kfd_ioctl_wait_events_args a = {
                        .events_ptr = (uint64_t) (uintptr_t) ev,
                        .num_events = n,
                        .wait_for_all = 0,
                        .timeout = WAITER_TIMEOUT_MS,
                };
                int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_WAIT_EVENTS, &a);
                if (r == -EINTR)
                        continue;
                if (r < 0) {
                        pthread_mutex_lock(&c->waiter_lock);
                        c->waiter_error = r;
                        pthread_mutex_unlock(&c->waiter_lock);
                        wake(c);
                        log_debug_errno(r, "gpu: WAIT_EVENTS failed, waiter exits: %m");
                        break;
                }

                if (a.wait_result == KFD_IOC_WAIT_RESULT_TIMEOUT)
                        continue;

                for (unsigned i = WAIT_SHUTDOWN; i < n; i++) {
                        uint64_t seen = kfd_event_data_get_age(&ev[i]);
                        if (seen != 0)
                                age[i] = seen;
                }

                /* Only activated events get their data copied back
                 * (copy_signaled_event_data); a non-zero gpu_id marks a fault,
                 * as tinygrad's KFDIface.sleep checks it. */
                const struct kfd_hsa_memory_exception_data *m = &ev[WAIT_MEMORY].memory_exception_data;
                if (m->gpu_id != 0)
                        push_fault(c, &(GpuFault) { .va = m->va, .gpu_id = m->gpu_id, .memory = true });
                const struct kfd_hsa_hw_exception_data *h = &ev[WAIT_HW_EXCEPTION].hw_exception_data;
                if (h->gpu_id != 0)
                        push_fault(c, &(GpuFault) { .gpu_id = h->gpu_id, .memory = false,
                                                    .memory_lost = h->memory_lost != 0 });

                if (c->opts.on_events)
                        c->opts.on_events(c->opts.on_events_userdata);
                wake(c);
        }
        return NULL;
}

int gpu_waiter_start(GpuContext *c) {
        atomic_store(&c->waiter_stop, false);
        int r = pthread_create(&c->waiter, NULL, waiter_main, c);
        if (r != 0)
                return -r;
        c->waiter_started = true;
        return 0;
}

void gpu_waiter_rewait(GpuContext *c) {
        if (!c->waiter_started)
                return;
        struct kfd_ioctl_set_event_args a = { .event_id = c->shutdown_event };
        int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_SET_EVENT, &a);
        if (r < 0)
                log_debug_errno(r, "gpu: SET_EVENT to wake the waiter failed; it sees the new queue within %u ms: %m",
                                WAITER_TIMEOUT_MS);
}

void gpu_waiter_stop(GpuContext *c) {
        if (!c->waiter_started)
                return;
        atomic_store(&c->waiter_stop, true);
        struct kfd_ioctl_set_event_args a = { .event_id = c->shutdown_event };
        int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_SET_EVENT, &a);
        if (r < 0)
                /* The waiter sees waiter_stop within WAITER_TIMEOUT_MS. */
                log_debug_errno(r, "gpu: SET_EVENT(shutdown) failed, the waiter stops at its next timeout: %m");
        pthread_join(c->waiter, NULL);
        c->waiter_started = false;
}

int gpu_waiter_take_faults(GpuContext *c, GpuFault *ret, unsigned max) {
        pthread_mutex_lock(&c->waiter_lock);
        unsigned n = MIN(max, c->waiter_n_faults);
        memcpy(ret, c->waiter_faults, n * sizeof *ret);
        memmove(c->waiter_faults, c->waiter_faults + n, (c->waiter_n_faults - n) * sizeof *ret);
        c->waiter_n_faults -= n;
        int err = c->waiter_error;
        pthread_mutex_unlock(&c->waiter_lock);
        return n > 0 ? (int) n : err;
}
