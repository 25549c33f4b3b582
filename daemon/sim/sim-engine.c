/* SPDX-License-Identifier: MIT */
/*
 * The engine thread of the simulated GPU (see sim-engine.h). A pass runs
 * every queue's step with the device lock held between packets; the list is
 * walked by reading q->engine_next after q's step returns, with the lock
 * held, and q pinned (e->current) while its step runs, so queues added or
 * removed while a step had dropped the lock are seen correctly. Between
 * passes the thread sleeps as sim-engine.h says: not at all after progress,
 * a growing 10 µs .. 1 ms while a queue waits on memory, until kicked (or
 * IDLE_SLEEP_NS) when all is idle, and until a queue is added when it has
 * none. Its CPU priority: engine_apply().
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim-device.h"
#include "sim-engine.h"
#include "sim-events.h"
#include "sim-ih.h"
#include "sim-process.h"
#include "sim-queue.h"
#include "util/macro.h"

#define POLL_SLEEP_MIN_NS 10000ULL
#define POLL_SLEEP_MAX_NS 1000000ULL
#define IDLE_SLEEP_NS 20000000ULL
#define ENGINE_NICE 10

static void sleep_locked(SimEngine *e, uint64_t ns) {
        struct timespec deadline;

        sim_deadline_after_ns(&deadline, ns);
        (void) pthread_cond_timedwait(&e->wake, &e->device->lock, &deadline);
}

/* One pass over the queues; returns the strongest SimStepResult seen
 * (PROGRESS over WAITING over IDLE). Locked. */
static int engine_pass(SimEngine *e) {
        SimDevice *d = e->device;
        bool waiting = false, progress = false;

        for (SimQueue *q = e->queues; q; q = q->engine_next) {
                int r;

                e->current = q;
                r = e->step(q);
                sim_ih_after_step(q, r);
                if (sim_events_take_delivery(d, true)) {
                        /* With q still pinned, so that the lock may go meanwhile. */
                        pthread_mutex_unlock(&d->lock);
                        sim_events_wake_sleepers(d);
                        pthread_mutex_lock(&d->lock);
                }
                e->current = NULL;
                if (q->destroying)
                        pthread_cond_broadcast(&d->cp_cond);
                if (r == SIM_STEP_PROGRESS)
                        progress = true;
                else if (r == SIM_STEP_WAITING)
                        waiting = true;
        }
        return progress ? SIM_STEP_PROGRESS : waiting ? SIM_STEP_WAITING : SIM_STEP_IDLE;
}

/*
 * A real engine costs the host no CPU and sees a doorbell at once; a
 * simulated one runs on the host's CPUs. Its CPU priority (Linux: per
 * thread) weighs the two:
 *  - A CP engine runs work that comes after it idled (a launch and its
 *    completion) at the process's priority: its first PROMPT_PASSES passes
 *    that make progress. Next to a CPU-bound thread (a ROCr program spinning
 *    on its signal, another process's build) a thread ENGINE_NICE steps down
 *    gets a tenth of its share and waits for it: an empty HIP kernel's two
 *    relayed jobs waited 40-330 us between the doorbell and the engine's
 *    first pass, and again between the two jobs (bench-hip launch, per-stage
 *    timestamps), where the native round trip, whose client sleeps, saw
 *    about 10 us. Kept busy past that (a flood of jobs), it goes
 *    ENGINE_NICE steps below until it idles: then it goes back up before it
 *    sleeps, so that the next doorbell wakes it at the process's priority.
 *  - An SDMA engine runs ENGINE_NICE steps below, so that the copies it
 *    does with the host's CPU delay the threads that drive the GPU (the
 *    daemon's event loop, its WAIT_EVENTS waiter, the clients) as little as
 *    they can — but for bulk moves (sim_engine_set_bulk()). Its floods come
 *    in pieces the scheduler hands out one after another, with the engine
 *    idle in between, so the CP's rule would keep them at the process's
 *    priority (bench-broker noise: the light client's p99 next to 15 copy
 *    flooders 2.7-4.6 times its p99 next to burners, against 1.0-1.1).
 * Raising a thread's priority back needs CAP_SYS_NICE or an RLIMIT_NICE
 * that allows it (the unit's LimitNICE=); without, the thread stays below
 * once it went there. engine_base_nice is the process's priority in an
 * engine thread, INT_MIN elsewhere and once a change was refused.
 */
#define PROMPT_PASSES 16u

static _Thread_local int engine_base_nice = INT_MIN;
static _Thread_local bool engine_bulk;
static _Thread_local bool engine_prompt;     /* a CP engine: prompt after it idled */
static _Thread_local bool engine_low;        /* ENGINE_NICE steps below now */
static _Thread_local unsigned engine_streak; /* passes with progress since it last idled */

static int engine_set_nice(int nice) {
        return setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), MIN(nice, 19)) < 0 ? -errno : 0;
}

static void engine_apply(void) {
        bool low = !engine_bulk && (!engine_prompt || engine_streak >= PROMPT_PASSES);

        if (engine_base_nice == INT_MIN || low == engine_low)
                return;
        if (engine_set_nice(low ? engine_base_nice + ENGINE_NICE : engine_base_nice) < 0) {
                engine_base_nice = INT_MIN; /* not allowed: stay where it is */
                return;
        }
        engine_low = low;
}

static void engine_init_priority(void) {
        int base;

        errno = 0;
        base = getpriority(PRIO_PROCESS, 0);
        if (base == -1 && errno != 0)
                return;
        engine_base_nice = base;
}

/* Next to CPU-bound threads of other processes a thread 10 nice steps down
 * gets a tenth of their share: a 256 MiB copy next to two burners took
 * 0.4-0.9 GB/s against memcpy's 1.3-3.1 in the same run (bench-broker
 * copy), where a real engine would not have noticed them. So a bulk move
 * the step allows (sim-sdma.c: only while no other SDMA queue has work, as
 * engines at the process's priority kept busy by flooding clients took both
 * CPUs of a 2-CPU machine from the event loop: a light client's 4 KiB copy
 * p99 next to 15 flooders 83-189 ms against 4.4-7.0) runs at the process's
 * priority, and the thread stays there until its next move that is not one,
 * across the fences and waits between a large copy's pieces. */
void sim_engine_set_bulk(bool bulk) {
        engine_bulk = bulk;
        engine_apply();
}

static void *engine_thread(void *userdata) {
        SimEngine *e = userdata;
        SimDevice *d = e->device;
        unsigned waits = 0;

        engine_prompt = e->kind == SIM_ENGINE_CP;
        engine_init_priority();
        engine_apply();
        pthread_mutex_lock(&d->lock);
        while (!e->stop) {
                int r;

                if (!e->queues) {
                        pthread_cond_wait(&e->wake, &d->lock);
                        continue;
                }
                e->kicked = false;
                r = engine_pass(e);
                if (r == SIM_STEP_PROGRESS && engine_streak < UINT_MAX) {
                        engine_streak++;
                        engine_apply();
                }
                if (r == SIM_STEP_PROGRESS || e->kicked || e->stop) {
                        waits = 0;
                        continue;
                }
                if (r == SIM_STEP_WAITING) {
                        sleep_locked(e, MIN(POLL_SLEEP_MIN_NS << MIN(waits, 7u), POLL_SLEEP_MAX_NS));
                        waits++;
                } else {
                        waits = 0;
                        /* Idle: back up before it sleeps (engine_apply()). */
                        engine_streak = 0;
                        engine_apply();
                        sleep_locked(e, IDLE_SLEEP_NS);
                }
        }
        pthread_mutex_unlock(&d->lock);
        return NULL;
}

int sim_engine_new(SimDevice *d, SimEngineKind kind, unsigned index, SimEngineStep step, SimEngine **ret) {
        pthread_condattr_t attr;
        SimEngine *e;
        int r;

        e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        e->device = d;
        e->kind = kind;
        e->index = index;
        e->step = step;

        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        r = pthread_cond_init(&e->wake, &attr);
        pthread_condattr_destroy(&attr);
        if (r != 0) {
                free(e);
                return -r;
        }
        r = pthread_create(&e->thread, NULL, engine_thread, e);
        if (r != 0) {
                pthread_cond_destroy(&e->wake);
                free(e);
                return -r;
        }
        e->running = true;
        *ret = e;
        return 0;
}

SimEngine *sim_engine_free(SimEngine *e) {
        if (!e)
                return NULL;
        if (e->running) {
                pthread_mutex_lock(&e->device->lock);
                e->stop = true;
                pthread_cond_signal(&e->wake);
                pthread_mutex_unlock(&e->device->lock);
                pthread_join(e->thread, NULL);
        }
        pthread_cond_destroy(&e->wake);
        free(e);
        return NULL;
}

void sim_engine_add_queue(SimEngine *e, SimQueue *q) {
        q->engine = e;
        q->engine_next = e->queues;
        e->queues = q;
        pthread_cond_signal(&e->wake);
}

void sim_engine_remove_queue(SimEngine *e, SimQueue *q) {
        while (e->current == q)
                pthread_cond_wait(&e->device->cp_cond, &e->device->lock);
        for (SimQueue **x = &e->queues; *x; x = &(*x)->engine_next)
                if (*x == q) {
                        *x = q->engine_next;
                        break;
                }
        q->engine = NULL;
        q->engine_next = NULL;
}

void sim_engine_mark_kicked(SimEngine *e) {
        e->kicked = true;
}

void sim_engine_wake(SimEngine *e) {
        pthread_cond_signal(&e->wake);
}

void sim_engine_yield_lock(SimQueue *q) {
        SimDevice *d = q->process->device;
        bool deliver = sim_events_take_delivery(d, false);

        pthread_mutex_unlock(&d->lock);
        if (deliver)
                sim_events_wake_sleepers(d);
        pthread_mutex_lock(&d->lock);
}
