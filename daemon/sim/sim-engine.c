/* SPDX-License-Identifier: MIT */
/*
 * The engine thread of the simulated GPU (see sim-engine.h). One polling pass
 * runs every queue's step with the device lock held (a step may drop it for a
 * while, see SimEngineStep); between passes the lock is released. The list is
 * walked by reading q->engine_next after q's step returns, with the lock held,
 * so queues added or removed while a step had dropped the lock are seen
 * correctly. Backoff: after a pass that made progress the thread yields for
 * up to SPIN_PASSES passes (a doorbell written right after a completion is
 * seen within microseconds), then sleeps 10 µs, 20 µs, ... up to 1 ms per pass
 * while idle (at most ~1000 wake-ups a second per engine), and with no queue
 * at all it sleeps until sim_engine_add_queue() or shutdown signals it.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include "sim-device.h"
#include "sim-engine.h"
#include "sim-queue.h"
#include "util/macro.h"

#define SPIN_PASSES 64u
#define SLEEP_MIN_NS 10000ULL
#define SLEEP_MAX_NS 1000000ULL

static void *engine_thread(void *userdata) {
        SimEngine *e = userdata;
        SimDevice *d = e->device;
        unsigned idle = 0;

        pthread_mutex_lock(&d->lock);
        while (!e->stop) {
                bool progress = false;

                if (!e->queues) {
                        pthread_cond_wait(&e->wake, &d->lock);
                        idle = 0;
                        continue;
                }
                for (SimQueue *q = e->queues; q; q = q->engine_next)
                        if (e->step(q) > 0)
                                progress = true;

                idle = progress ? 0 : idle + 1;
                if (idle < SPIN_PASSES) {
                        pthread_mutex_unlock(&d->lock);
                        sched_yield();
                        pthread_mutex_lock(&d->lock);
                } else {
                        unsigned shift = MIN(idle - SPIN_PASSES, 7u);
                        struct timespec deadline;

                        sim_deadline_after_ns(&deadline, MIN(SLEEP_MIN_NS << shift, SLEEP_MAX_NS));
                        (void) pthread_cond_timedwait(&e->wake, &d->lock, &deadline);
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
        for (SimQueue **x = &e->queues; *x; x = &(*x)->engine_next)
                if (*x == q) {
                        *x = q->engine_next;
                        break;
                }
        q->engine = NULL;
        q->engine_next = NULL;
}
