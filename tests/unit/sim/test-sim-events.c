/* SPDX-License-Identifier: MIT */
/*
 * KFD event semantics of the simulator against kfd_events.c and kfd-facts
 * §1.10: event page registration checks, slot ids, non-signal ids, SET/RESET
 * only on SIGNAL events, auto-reset, ages and the last_event_age fast path,
 * wait any/all, timeouts 0/finite/infinite with a second thread, destroy while
 * waiting, and the data MEMORY events carry.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "sim-test.h"
#include "sim/sim-device.h"  /* white box: an event's waiters */
#include "sim/sim-events.h"
#include "sim/sim-process.h"

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static int create_event(TestCtx *c, uint32_t type, uint64_t page, struct kfd_ioctl_create_event_args *a) {
        *a = (struct kfd_ioctl_create_event_args) { .event_page_offset = page, .event_type = type, .auto_reset = 1 };
        return t_ioctl(c, AMDKFD_IOC_CREATE_EVENT, a);
}

Test(sim_events, event_page_registration) {
        TestCtx c;
        t_open(&c, NULL);
        struct kfd_ioctl_create_event_args a;
        TestBo small = t_bo(&c, 16384, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo vram = t_bo(&c, 32768, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        TestBo page = t_bo(&c, 32768, KFD_IOC_ALLOC_MEM_FLAGS_GTT);

        cr_expect_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, small.handle, &a), -EINVAL, "page too small");
        cr_expect_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, vram.handle, &a), -EINVAL, "not GTT");
        cr_expect_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, 0x697D000000FFull, &a), -EINVAL, "unknown handle");
        cr_expect_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, 0x123400000000ull | KFD_HANDLE_IDR(page.handle), &a),
                     -EINVAL, "unknown gpu_id");
        memset(page.cpu, 0, 32768);
        cr_assert_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, page.handle, &a), 0);
        cr_expect_eq(a.event_id, 1u, "signal ids start at 1");
        cr_expect_eq(a.event_slot_index, 1u);
        cr_expect_eq(a.event_trigger_data, 1u);
        cr_expect_eq(a.event_page_offset, KFD_MMAP_TYPE_EVENTS);
        cr_expect_eq(((uint64_t *) page.cpu)[0], ~0ull, "the page is initialised to unsignaled");
        cr_expect_eq(((uint64_t *) page.cpu)[4095], ~0ull);
        cr_expect_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, page.handle, &a), -EINVAL, "already set");

        cr_expect_eq(t_free(&c, page.handle), -EPERM, "freeing the event page");
        cr_expect_eq(t_unmap(&c, page.handle), 0);
        cr_expect_eq(t_free(&c, page.handle), -EPERM, "still refused once unmapped");
        t_close(&c, true);
}

Test(sim_events, ids_and_limits) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t first;
        t_event_page(&c, &first);
        cr_expect_eq(first, 1u);
        struct kfd_ioctl_create_event_args a;

        cr_assert_eq(create_event(&c, KFD_IOC_EVENT_MEMORY, 0, &a), 0);
        cr_expect_eq(a.event_id, 0x40000000u, "KFD_FIRST_NONSIGNAL_EVENT_ID");
        cr_expect_eq(a.event_slot_index, 0u, "non-signal events take no slot");
        cr_assert_eq(create_event(&c, KFD_IOC_EVENT_HW_EXCEPTION, 0, &a), 0);
        cr_expect_eq(a.event_id, 0x40000001u);

        /* 4096 slots, id 0 reserved: 4095 signal events, then -ENOSPC. */
        for (uint32_t i = 2; i < 4096; i++) {
                cr_assert_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, 0, &a), 0);
                cr_assert_eq(a.event_id, i);
        }
        cr_expect_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, 0, &a), -ENOSPC);
        struct kfd_ioctl_destroy_event_args d = { .event_id = 77 };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_DESTROY_EVENT, &d), 0);
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_DESTROY_EVENT, &d), -EINVAL, "destroyed twice");
        d.event_id = 0;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_DESTROY_EVENT, &d), -EINVAL, "id 0 is reserved");
        cr_assert_eq(create_event(&c, KFD_IOC_EVENT_SIGNAL, 0, &a), 0);
        cr_expect_eq(a.event_id, 77u, "the freed slot is reused");
        t_close(&c, true);
}

Test(sim_events, set_reset_only_on_signal_events) {
        TestCtx c;
        t_open(&c, NULL);
        t_event_page(&c, NULL);
        uint32_t mem = t_event(&c, KFD_IOC_EVENT_MEMORY, true, 0);
        uint32_t hw = t_event(&c, KFD_IOC_EVENT_HW_EXCEPTION, true, 0);
        struct kfd_ioctl_set_event_args s = { .event_id = mem };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), -EINVAL);
        s.event_id = hw;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), -EINVAL);
        s.event_id = 999;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), -EINVAL);
        struct kfd_ioctl_reset_event_args r = { .event_id = mem };
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RESET_EVENT, &r), -EINVAL);
        r.event_id = 1;
        cr_expect_eq(t_ioctl(&c, AMDKFD_IOC_RESET_EVENT, &r), 0);
        t_close(&c, true);
}

Test(sim_events, auto_reset_and_manual_reset) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t autoev;
        t_event_page(&c, &autoev);
        uint32_t manual = t_event(&c, KFD_IOC_EVENT_SIGNAL, false, 0);

        cr_expect_eq(t_wait1(&c, autoev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT);
        struct kfd_ioctl_set_event_args s = { .event_id = autoev };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);
        cr_expect_eq(t_wait1(&c, autoev, 0), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(t_wait1(&c, autoev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "auto-reset consumed by the first waiter");

        s.event_id = manual;
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);
        cr_expect_eq(t_wait1(&c, manual, 0), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(t_wait1(&c, manual, 0), KFD_IOC_WAIT_RESULT_COMPLETE, "stays signaled");
        struct kfd_ioctl_reset_event_args r = { .event_id = manual };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_RESET_EVENT, &r), 0);
        cr_expect_eq(t_wait1(&c, manual, 0), KFD_IOC_WAIT_RESULT_TIMEOUT);
        t_close(&c, true);
}

Test(sim_events, ages_and_last_event_age) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t id;
        t_event_page(&c, &id);
        struct kfd_event_data ev = { .event_id = id };
        uint32_t res;

        /* Age starts at 1: passing 1 waits; passing anything else returns at once. */
        kfd_event_data_set_age(&ev, 1);
        cr_assert_eq(t_wait(&c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_TIMEOUT);
        cr_expect_eq(kfd_event_data_get_age(&ev), 1u, "not written back on timeout");

        struct kfd_ioctl_set_event_args s = { .event_id = id };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);
        kfd_event_data_set_age(&ev, 1);
        cr_assert_eq(t_wait(&c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(kfd_event_data_get_age(&ev), 3u, "two sets: age 1 -> 3, written back");

        /* The fast path: the age moved since the caller looked, even though the
         * auto-reset state was consumed above. */
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);
        cr_expect_eq(t_wait1(&c, id, 0), KFD_IOC_WAIT_RESULT_COMPLETE, "legacy wait consumes the signal");
        kfd_event_data_set_age(&ev, 3);
        cr_assert_eq(t_wait(&c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "age 4 != 3 completes although not signaled");
        cr_expect_eq(kfd_event_data_get_age(&ev), 4u);
        cr_assert_eq(t_wait(&c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_TIMEOUT, "same age: nothing new");

        /* Age 0 = legacy: the age is not written back. */
        kfd_event_data_set_age(&ev, 0);
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);
        cr_assert_eq(t_wait(&c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(kfd_event_data_get_age(&ev), 0u);
        t_close(&c, true);
}

Test(sim_events, wait_any_all_and_bad_ids) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t a;
        t_event_page(&c, &a);
        uint32_t b = t_event(&c, KFD_IOC_EVENT_SIGNAL, false, 0);
        struct kfd_event_data ev[2] = { { .event_id = a }, { .event_id = b } };
        uint32_t res;
        struct kfd_ioctl_set_event_args s = { .event_id = b };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);

        cr_assert_eq(t_wait(&c, ev, 2, true, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_TIMEOUT, "all: only one is signaled");
        cr_assert_eq(t_wait(&c, ev, 2, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "any");
        s.event_id = a;
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &s), 0);
        cr_assert_eq(t_wait(&c, ev, 2, true, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "all");

        ev[1].event_id = 4000;
        cr_expect_eq(t_wait(&c, ev, 2, false, 0, &res), -EINVAL, "unknown event id");
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_FAIL);
        cr_assert_eq(t_wait(&c, NULL, 0, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "no events: trivially complete");
        t_close(&c, true);
}

typedef struct Setter {
        TestCtx *c;
        uint32_t id;
        unsigned delay_ms;
        bool destroy;
} Setter;

static void *setter_thread(void *userdata) {
        Setter *s = userdata;
        usleep(s->delay_ms * 1000);
        if (s->destroy) {
                struct kfd_ioctl_destroy_event_args d = { .event_id = s->id };
                cr_assert_eq(t_ioctl(s->c, AMDKFD_IOC_DESTROY_EVENT, &d), 0);
        } else {
                struct kfd_ioctl_set_event_args a = { .event_id = s->id };
                cr_assert_eq(t_ioctl(s->c, AMDKFD_IOC_SET_EVENT, &a), 0);
        }
        return NULL;
}

Test(sim_events, timeouts) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t id;
        t_event_page(&c, &id);
        pthread_t t;

        uint64_t t0 = now_ms();
        cr_expect_eq(t_wait1(&c, id, 50), KFD_IOC_WAIT_RESULT_TIMEOUT);
        uint64_t dt = now_ms() - t0;
        cr_expect(dt >= 50 && dt < 1000, "finite timeout of 50 ms took %llu ms", (unsigned long long) dt);

        /* Finite timeout, set by another thread before it expires. */
        Setter s = { .c = &c, .id = id, .delay_ms = 20 };
        cr_assert_eq(pthread_create(&t, NULL, setter_thread, &s), 0);
        t0 = now_ms();
        cr_expect_eq(t_wait1(&c, id, 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_lt(now_ms() - t0, 2000u);
        pthread_join(t, NULL);

        /* Infinite timeout. */
        cr_assert_eq(pthread_create(&t, NULL, setter_thread, &s), 0);
        cr_expect_eq(t_wait1(&c, id, KFD_EVENT_TIMEOUT_INFINITE), KFD_IOC_WAIT_RESULT_COMPLETE);
        pthread_join(t, NULL);
        cr_expect_eq(t_wait1(&c, id, 0), KFD_IOC_WAIT_RESULT_TIMEOUT,
                     "set while a waiter slept: auto-reset leaves it unsignaled");
        t_close(&c, true);
}

Test(sim_events, destroy_while_waiting) {
        TestCtx c;
        t_open(&c, NULL);
        t_event_page(&c, NULL);
        uint32_t id = t_event(&c, KFD_IOC_EVENT_SIGNAL, true, 0);
        Setter s = { .c = &c, .id = id, .delay_ms = 20, .destroy = true };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, setter_thread, &s), 0);
        struct kfd_event_data ev = { .event_id = id };
        uint32_t res = 99;
        cr_expect_eq(t_wait(&c, &ev, 1, false, KFD_EVENT_TIMEOUT_INFINITE, &res), -EIO);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_FAIL);
        pthread_join(t, NULL);
        t_close(&c, true);
}

typedef struct Waiter {
        TestCtx *c;
        uint32_t id;
        int r;
        uint32_t result;
} Waiter;

static void *waiter_thread(void *userdata) {
        Waiter *w = userdata;
        struct kfd_event_data ev = { .event_id = w->id };
        w->r = t_wait(w->c, &ev, 1, false, KFD_EVENT_TIMEOUT_INFINITE, &w->result);
        return NULL;
}

/* Until the waiter sleeps inside WAIT_EVENTS (white box: it is on the event's
 * list of waiters), so the test acts on a waiter in the simulator rather than
 * on one still on its way there, however loaded the machine. */
static bool has_waiter(SimDevice *dev, uint32_t id) {
        bool found = false;
        pthread_mutex_lock(&dev->lock);
        for (SimProcess *p = dev->processes; p; p = p->next)
                for (SimEvent *e = p->events; e; e = e->next)
                        if (e->id == id && e->waiters)
                                found = true;
        pthread_mutex_unlock(&dev->lock);
        return found;
}

static void wait_until_asleep(Waiter *w) {
        for (int i = 0; i < 5000; i++) {
                if (has_waiter(w->c->dev, w->id))
                        return;
                usleep(1000);
        }
        cr_assert_fail("the waiter thread never went to sleep in WAIT_EVENTS");
}

Test(sim_events, device_shutdown_releases_waiters) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t id;
        t_event_page(&c, &id);
        Waiter w = { .c = &c, .id = id, .result = 99 };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, waiter_thread, &w), 0);
        wait_until_asleep(&w);
        sim_device_free(c.dev);
        pthread_join(t, NULL);
        cr_expect_eq(w.r, -EIO);
        cr_expect_eq(w.result, KFD_IOC_WAIT_RESULT_FAIL);
}

/* An engine's interrupt sets its event at once but wakes the sleepers only
 * when the engine delivers (sim_events_deliver(): at the end of a step,
 * between packets after SIM_IRQ_COALESCE_NS, before a long packet), so that
 * a burst of small jobs wakes the daemon's waiter once, not once per job. */
Test(sim_events, an_engine_interrupt_wakes_its_sleeper_when_the_engine_delivers, .timeout = 20) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t id;
        TestBo page = t_event_page(&c, &id);
        Waiter w = { .c = &c, .id = id, .result = 99 };
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, waiter_thread, &w), 0);
        wait_until_asleep(&w);

        /* What an SDMA FENCE + TRAP of the engine does: the slot, then the interrupt. */
        __atomic_store_n(&((uint64_t *) page.cpu)[id], (uint64_t) id, __ATOMIC_RELEASE);
        pthread_mutex_lock(&c.dev->lock);
        sim_events_interrupt(c.dev->processes, id, 28);
        bool pending = c.dev->irq_pending;
        pthread_mutex_unlock(&c.dev->lock);
        cr_expect(pending, "the interrupt waits for the engine to deliver it");
        usleep(20000);
        cr_expect(has_waiter(c.dev, id), "the sleeper was woken before the engine delivered");

        pthread_mutex_lock(&c.dev->lock);
        sim_events_deliver(c.dev, false); /* between two packets, 20 ms later */
        pending = c.dev->irq_pending;
        pthread_mutex_unlock(&c.dev->lock);
        cr_expect_not(pending);
        pthread_join(t, NULL);
        cr_expect_eq(w.r, 0);
        cr_expect_eq(w.result, KFD_IOC_WAIT_RESULT_COMPLETE);
        t_close(&c, true);
}

/* A thread cancelled while it sleeps in WAIT_EVENTS (what the daemon's waiter
 * falls back to when it cannot wake it) leaves the device unlocked and its
 * waiters unlinked: the event still works afterwards, for other threads too. */
Test(sim_events, cancelled_waiter_leaves_no_lock_behind, .timeout = 10) {
        TestCtx c;
        t_open(&c, NULL);
        uint32_t id;
        t_event_page(&c, &id);
        for (int i = 0; i < 3; i++) {
                Waiter w = { .c = &c, .id = id, .result = 99 };
                pthread_t t;
                void *ret;
                cr_assert_eq(pthread_create(&t, NULL, waiter_thread, &w), 0);
                wait_until_asleep(&w);
                cr_assert_eq(pthread_cancel(t), 0);
                cr_assert_eq(pthread_join(t, &ret), 0);
                cr_expect_eq(ret, PTHREAD_CANCELED);
                cr_expect_eq(w.result, 99u, "the ioctl never returned");
        }
        /* The lock is free and no stale waiter hangs off the event. */
        struct kfd_ioctl_set_event_args set = { .event_id = id };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_SET_EVENT, &set), 0);
        cr_expect_eq(t_wait1(&c, id, 1000), KFD_IOC_WAIT_RESULT_COMPLETE);
        t_close(&c, true);
}

/* sim_device_reset(): every context's HW_EXCEPTION events carry the reset's
 * data (kfd_signal_reset_event), VRAM reads as zeros, GTT keeps its bytes. */
Test(sim_events, gpu_reset_signals_every_context_and_loses_vram) {
        TestCtx a, b;
        t_open(&a, NULL);
        t_open(&b, a.dev);
        uint32_t ha = t_event(&a, KFD_IOC_EVENT_HW_EXCEPTION, false, 0);
        uint32_t hb = t_event(&b, KFD_IOC_EVENT_HW_EXCEPTION, false, 0);
        TestBo vram = t_bo(&a, 1 << 16, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        TestBo gtt = t_bo(&a, 1 << 16, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        struct kfd_event_data ev = { .event_id = ha };
        uint32_t res;

        memset(vram.cpu, 0x5a, vram.size);
        memset(gtt.cpu, 0xa5, gtt.size);
        cr_assert_eq(t_wait(&a, &ev, 1, false, 0, &res), 0);
        cr_assert_eq(res, KFD_IOC_WAIT_RESULT_TIMEOUT, "no reset yet");

        sim_device_reset(a.dev, true);
        cr_assert_eq(t_wait(&a, &ev, 1, false, 1000, &res), 0);
        cr_assert_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_assert_eq(ev.hw_exception_data.gpu_id, a.gpu_id);
        cr_assert_eq(ev.hw_exception_data.memory_lost, 1);
        cr_assert_eq(ev.hw_exception_data.reset_type, KFD_HW_EXCEPTION_WHOLE_GPU_RESET);
        ev = (struct kfd_event_data) { .event_id = hb };
        cr_assert_eq(t_wait(&b, &ev, 1, false, 1000, &res), 0);
        cr_assert_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "the other context is told too");
        cr_assert_eq(ev.hw_exception_data.memory_lost, 1);
        for (size_t i = 0; i < vram.size; i++) {
                cr_assert_eq(((uint8_t *) vram.cpu)[i], 0, "VRAM byte %zu survived", i);
                cr_assert_eq(((uint8_t *) gtt.cpu)[i], 0xa5, "GTT byte %zu changed", i);
        }
        t_bo_release(&a, &vram);
        t_bo_release(&a, &gtt);
        t_close(&b, false);
        t_close(&a, true);
}
