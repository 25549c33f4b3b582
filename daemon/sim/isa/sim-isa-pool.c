/* SPDX-License-Identifier: MIT */
/*
 * SimIsaPool: the helper threads that run workgroups of dispatches besides
 * the threads that called sim_isa_dispatch() (on the simulator, the CP
 * engines of its pipes). One pool per simulated device, made with it; the
 * device owns it. A dispatch with workgroups to spare is listed while helpers
 * may still join it (until its scratch ring has no slot left); a helper that
 * looks for work takes the oldest, runs its workgroups with wave and LDS
 * state of its own (allocated once, for the largest workgroup) until none is
 * left, and goes back to sleep. The caller takes the dispatch off the list
 * when it runs out of workgroups itself and waits for the helpers inside it
 * to leave, so nothing of a dispatch outlives sim_isa_dispatch(). Several
 * dispatches (from different pipes) may be open at once and share the
 * helpers: the highest priority first, then the oldest.
 *
 * Waking a sleeping helper costs CPU time of its own (the futex, the
 * scheduler, the other CPU's wake-up; on a 2-CPU VM 2 context switches and
 * ~40 us of CPU a dispatch), as much as a dispatch of a few small workgroups
 * does in all: 100 dispatches of 8 vector-add workgroups did 0.73-0.90x the
 * work per CPU-second with a helper that they woke as without it
 * (bench-isa). So a listed dispatch wakes helpers only once its caller has
 * run SIM_ISA_WAKE_AFTER wave-instructions in it (sim_isa_pool_want_helpers();
 * a count, not a clock, so that the threads a dispatch runs on do not depend
 * on the machine's load), as many as it has workgroups and scratch slots
 * left for; a helper already awake joins it at once, and the end of a
 * dispatch wakes helpers only for a listed one that wanted them and was held
 * back. Before, every dispatch of two workgroups or more woke every sleeping
 * helper, and every dispatch's end woke them all again.
 *
 * Wave launch (sim-isa.h, SIM_PIPE_PRIORITY_*): launching[p] counts the
 * dispatches of priority p that are open (from sim_isa_pool_open() until
 * every participant has left in sim_isa_pool_close()). A participant starts
 * a workgroup only while no higher count is non-zero: a helper leaves for the
 * higher dispatch, the caller (a queue's CP engine) waits, as a pipe whose
 * waves the SPI does not launch stalls. The hardware launches a lower pipe's
 * waves as soon as the higher dispatch has none left to launch, on the CUs it
 * does not use; here the "CUs" are host threads that outnumber the host's
 * CPUs and share them, so a lower dispatch started then would slow the
 * higher one's last workgroups down: it waits until they have finished. The
 * counts are written under the lock and read without it.
 *
 * CUs: a GPU runs the waves of every queue's dispatches side by side on its
 * CUs, so a dispatch of one workgroup starts within a few waves' time of its
 * doorbell even next to long ones. The simulator's CUs are host threads, and
 * once more threads run workgroups than the host has CPUs, its scheduler
 * decides which dispatch moves: a short dispatch's queue thread waited tens
 * of milliseconds behind eight long dispatches on 2 CPUs. So the pool hands
 * out n_cus CUs, and a participant holds one while it runs workgroups: the
 * helpers and one caller (the threads one dispatch may use; by default one
 * per host CPU), and one more, so that the CPU of a holder that blocks, or of
 * a CU handed to a thread still waking up, does not sit idle (with one CU
 * per CPU, 8 long dispatches on 2 CPUs left 18 % of the time idle and ran
 * 174 a second against 222 with one more; bench-compute). When others
 * wait, a holder gives its CU up after CU_QUANTUM_NS (CU_FRESH_QUANTUM_NS
 * when one of them is of a dispatch that has had no CU yet: in
 * bench-compute that took the light client's dispatches from 844-875 to
 * 1117-1210 a second, its p99 from 3.0 to 2.4-2.8 ms, and the flooders'
 * from 209-222 to 197-212), between two slices of a wave (the waves of a
 * workgroup stay on their thread, as resident waves stay on their CU), and
 * the CU goes to the waiter of the highest priority,
 * one of a dispatch that has not had a CU yet before the others, otherwise
 * the one that has waited longest: a new dispatch starts within a quantum,
 * and the threads that have run take turns. A waiter that has waited
 * CU_AGE_NS goes before all of these, so that neither dispatches of a higher
 * priority (the hardware does not pause resident waves for them) nor a
 * client that keeps starting new dispatches hold a workgroup that has
 * started off the CUs for longer. (Giving the CU to the dispatch that had
 * held CUs the least time, and later new dispatches first without the age
 * rule, let a client that kept starting one-workgroup dispatches hold the
 * CUs against a dispatch that had run, for 17 s and more.) A waiter whose
 * dispatch is cancelled, or whose workgroup an earlier failure makes moot,
 * stops waiting within CU_POLL_NS: a queue's teardown waits for it.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim-isa-internal.h"

/* The largest workgroup: 1024 work-items in waves of 32. */
#define MAX_WAVES 32u
#define MAX_LDS (64u * 1024u)

/* How long a gated caller sleeps before it looks at its cancel flag again. */
#define LAUNCH_WAIT_NS 2000000ull

/* How long a participant keeps a CU that others wait for. */
#define CU_QUANTUM_NS 500000ull
/* ... that a dispatch which has had none yet waits for. */
#define CU_FRESH_QUANTUM_NS 100000ull
/* A waiter this old goes first, whatever its priority. */
#define CU_AGE_NS (4 * CU_QUANTUM_NS)
/* How often a waiter looks at whether it should stop waiting. */
#define CU_POLL_NS 1000000ull

/* A participant waiting for a CU; on its own stack. */
typedef struct CuWaiter {
        pthread_cond_t granted_cond;
        SimIsaJob *job;
        uint64_t since;         /* when it began to wait */
        bool fresh;             /* its dispatch had had no CU then */
        bool granted;
        struct CuWaiter *next;
} CuWaiter;

struct SimIsaPool {
        pthread_mutex_t lock;
        pthread_cond_t wake;            /* a dispatch was listed or may launch again, or the pool stops */
        pthread_cond_t left;            /* a helper left a dispatch */
        pthread_cond_t launch;          /* a count in launching[] went down */
        unsigned launching[SIM_PIPE_PRIORITY_LEVELS];
        SimIsaJob *jobs;                /* open to helpers, oldest first */
        unsigned n_cus;                 /* participants that may run workgroups at once */
        unsigned cus_busy;
        unsigned cus_wanted;            /* waiters on cu_waiters; read without the lock */
        unsigned fresh_wanted;          /* of them, of dispatches that had no CU yet; the same */
        unsigned cus_most_busy;         /* the most CUs busy at once so far */
        CuWaiter *cu_waiters;           /* in the order they came */
        uint64_t wake_after;            /* SIM_ISA_WAKE_AFTER unless set */
        unsigned n_sleeping;            /* helpers waiting on wake */
        uint64_t wakeups;               /* times a helper woke up */
        bool stopping;
        unsigned n_threads;
        pthread_t threads[];
};

typedef struct Helper {
        SimIsaPool *pool;
        SimIsaWave *waves;
        uint8_t *lds;
        SimIsaICacheEntry *icache;
} Helper;

static void unlist(SimIsaPool *pool, SimIsaJob *job) {
        SimIsaJob **p = &pool->jobs;

        if (!job->listed)
                return;
        while (*p != job)
                p = &(*p)->next_job;
        *p = job->next_job;
        job->listed = false;
}

static unsigned job_priority(const SimIsaJob *job) {
        return job->d->priority < SIM_PIPE_PRIORITY_LEVELS ? job->d->priority : SIM_PIPE_PRIORITY_LEVELS - 1;
}

bool sim_isa_pool_may_launch(SimIsaPool *pool, const SimIsaJob *job) {
        if (!pool)
                return true;
        for (unsigned p = job_priority(job) + 1; p < SIM_PIPE_PRIORITY_LEVELS; p++)
                if (__atomic_load_n(&pool->launching[p], __ATOMIC_ACQUIRE) > 0)
                        return false;
        return true;
}

static void launch_begin(SimIsaPool *pool, SimIsaJob *job) {
        job->launching = true;
        __atomic_store_n(&pool->launching[job_priority(job)], pool->launching[job_priority(job)] + 1,
                         __ATOMIC_RELEASE);
}

/* Wakes as many sleeping helpers as job has room for: its workgroups left
 * to claim, its scratch slots left. Locked. */
static void wake_helpers(SimIsaPool *pool, const SimIsaJob *job) {
        uint64_t next = __atomic_load_n(&job->next, __ATOMIC_RELAXED), end = job->n_groups;
        uint64_t n = next < end ? end - next : 0;

        if (n > job->max_slots - job->n_slots)
                n = job->max_slots - job->n_slots;
        if (n > pool->n_sleeping)
                n = pool->n_sleeping;
        for (uint64_t i = 0; i < n; i++)
                pthread_cond_signal(&pool->wake);
}

static void launch_end(SimIsaPool *pool, SimIsaJob *job) {
        pthread_mutex_lock(&pool->lock);
        if (job->launching) {
                job->launching = false;
                __atomic_store_n(&pool->launching[job_priority(job)], pool->launching[job_priority(job)] - 1,
                                 __ATOMIC_RELEASE);
                pthread_cond_broadcast(&pool->launch);
                /* Helpers may join what was held back: the dispatches that
                 * wanted them (the others' callers wake them when they do). */
                for (SimIsaJob *j = pool->jobs; j; j = j->next_job)
                        if (j->helpers_wanted && sim_isa_pool_may_launch(pool, j))
                                wake_helpers(pool, j);
        }
        pthread_mutex_unlock(&pool->lock);
}

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* Whether waiter a should have a CU before waiter b, which came before it
 * and has not waited CU_AGE_NS. */
static bool cu_before(const CuWaiter *a, const CuWaiter *b) {
        if (job_priority(a->job) != job_priority(b->job))
                return job_priority(a->job) > job_priority(b->job);
        return !a->job->had_cu && b->job->had_cu;
}

/* w no longer waits. Locked. */
static void cu_unwant(SimIsaPool *pool, const CuWaiter *w) {
        __atomic_store_n(&pool->cus_wanted, pool->cus_wanted - 1, __ATOMIC_RELAXED);
        if (w->fresh)
                __atomic_store_n(&pool->fresh_wanted, pool->fresh_wanted - 1, __ATOMIC_RELAXED);
}

/* A CU was given up: it goes to the waiter that should have it first, or
 * becomes free. Locked. */
static void cu_hand_on(SimIsaPool *pool) {
        CuWaiter **best = NULL, *w;

        /* The list is in the order they came: an aged waiter is at its head. */
        if (pool->cu_waiters && now_ns() - pool->cu_waiters->since >= CU_AGE_NS)
                best = &pool->cu_waiters;
        else
                for (CuWaiter **p = &pool->cu_waiters; *p; p = &(*p)->next)
                        if (!best || cu_before(*p, *best))
                                best = p;
        if (!best) {
                pool->cus_busy--;
                return;
        }
        w = *best;
        *best = w->next;
        cu_unwant(pool, w);
        w->granted = true;
        w->job->had_cu = true;
        pthread_cond_signal(&w->granted_cond);
}

bool sim_isa_pool_cu_take(SimIsaPool *pool, SimIsaJob *job, bool (*abandon)(const void *userdata),
                          const void *userdata, uint64_t *ret_since) {
        bool granted = true;

        pthread_mutex_lock(&pool->lock);
        if (pool->cus_busy < pool->n_cus && !pool->cu_waiters) {
                pool->cus_busy++;
                job->had_cu = true;
                if (pool->cus_busy > pool->cus_most_busy)
                        pool->cus_most_busy = pool->cus_busy;
        } else {
                CuWaiter w = { .job = job, .since = now_ns(), .fresh = !job->had_cu }, **p;
                pthread_condattr_t attr;

                pthread_condattr_init(&attr);
                pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
                pthread_cond_init(&w.granted_cond, &attr);
                pthread_condattr_destroy(&attr);
                for (p = &pool->cu_waiters; *p; p = &(*p)->next)
                        ;
                *p = &w;
                __atomic_store_n(&pool->cus_wanted, pool->cus_wanted + 1, __ATOMIC_RELAXED);
                if (w.fresh)
                        __atomic_store_n(&pool->fresh_wanted, pool->fresh_wanted + 1, __ATOMIC_RELAXED);
                while (!w.granted) {
                        struct timespec ts;
                        uint64_t until = now_ns() + CU_POLL_NS;

                        ts.tv_sec = (time_t) (until / 1000000000ull);
                        ts.tv_nsec = (long) (until % 1000000000ull);
                        (void) pthread_cond_timedwait(&w.granted_cond, &pool->lock, &ts);
                        if (!w.granted && abandon && abandon(userdata)) {
                                for (p = &pool->cu_waiters; *p != &w; p = &(*p)->next)
                                        ;
                                *p = w.next;
                                cu_unwant(pool, &w);
                                granted = false;
                                break;
                        }
                }
                pthread_cond_destroy(&w.granted_cond);
        }
        pthread_mutex_unlock(&pool->lock);
        if (granted)
                *ret_since = now_ns();
        return granted;
}

void sim_isa_pool_cu_give(SimIsaPool *pool) {
        pthread_mutex_lock(&pool->lock);
        cu_hand_on(pool);
        pthread_mutex_unlock(&pool->lock);
}

bool sim_isa_pool_cu_check(SimIsaPool *pool, SimIsaJob *job, uint64_t *since, bool (*abandon)(const void *userdata),
                           const void *userdata) {
        uint64_t held;

        if (__atomic_load_n(&pool->cus_wanted, __ATOMIC_RELAXED) == 0)
                return true;
        held = now_ns() - *since;
        if (held < CU_FRESH_QUANTUM_NS ||
            (held < CU_QUANTUM_NS && __atomic_load_n(&pool->fresh_wanted, __ATOMIC_RELAXED) == 0))
                return true;
        sim_isa_pool_cu_give(pool);
        return sim_isa_pool_cu_take(pool, job, abandon, userdata, since);
}

unsigned sim_isa_pool_most_busy(SimIsaPool *pool) {
        unsigned n;

        pthread_mutex_lock(&pool->lock);
        n = pool->cus_most_busy;
        pthread_mutex_unlock(&pool->lock);
        return n;
}

void sim_isa_pool_wait_launch(SimIsaPool *pool, const SimIsaJob *job, const int *cancel) {
        if (!pool)
                return;
        pthread_mutex_lock(&pool->lock);
        while (!sim_isa_pool_may_launch(pool, job) && !(cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED))) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                ts.tv_nsec += (long) LAUNCH_WAIT_NS;
                if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                }
                (void) pthread_cond_timedwait(&pool->launch, &pool->lock, &ts);
        }
        pthread_mutex_unlock(&pool->lock);
}

/* The listed dispatch a helper should join: of those that still have
 * workgroups to claim and may launch them, the highest priority, then the
 * oldest; drops the ones that have none left. Locked. */
static SimIsaJob *next_open_job(SimIsaPool *pool) {
        SimIsaJob *best = NULL, *job, *next;

        for (job = pool->jobs; job; job = next) {
                next = job->next_job;
                if (__atomic_load_n(&job->next, __ATOMIC_RELAXED) >= __atomic_load_n(&job->stop_at, __ATOMIC_RELAXED)) {
                        unlist(pool, job);
                        continue;
                }
                if (sim_isa_pool_may_launch(pool, job) && (!best || job_priority(job) > job_priority(best)))
                        best = job;
        }
        return best;
}

static void *helper_main(void *userdata) {
        Helper *h = userdata;
        SimIsaPool *pool = h->pool;

        pthread_mutex_lock(&pool->lock);
        for (;;) {
                SimIsaJob *job = NULL;
                while (!pool->stopping && !(job = next_open_job(pool))) {
                        pool->n_sleeping++;
                        pthread_cond_wait(&pool->wake, &pool->lock);
                        pool->n_sleeping--;
                        pool->wakeups++;
                }
                if (pool->stopping)
                        break;
                unsigned slot = job->n_slots++;
                if (job->n_slots >= job->max_slots)
                        unlist(pool, job);
                job->n_helpers++;
                pthread_mutex_unlock(&pool->lock);

                sim_isa_participate(job, slot, true, h->waves, h->lds, h->icache);

                pthread_mutex_lock(&pool->lock);
                job->n_helpers--;
                pthread_cond_broadcast(&pool->left);
        }
        pthread_mutex_unlock(&pool->lock);
        return NULL;
}

void sim_isa_pool_open(SimIsaPool *pool, SimIsaJob *job) {
        SimIsaJob **p;

        if (!pool)
                return;
        pthread_mutex_lock(&pool->lock);
        launch_begin(pool, job);
        if (pool->n_threads == 0 || job->n_groups < 2 || job->max_slots < 2) {
                pthread_mutex_unlock(&pool->lock);
                return;
        }
        for (p = &pool->jobs; *p; p = &(*p)->next_job)
                ;
        *p = job;
        job->next_job = NULL;
        job->listed = true;
        /* No helper is woken yet: sim_isa_pool_want_helpers(). */
        pthread_mutex_unlock(&pool->lock);
}

void sim_isa_pool_want_helpers(SimIsaPool *pool, SimIsaJob *job) {
        pthread_mutex_lock(&pool->lock);
        if (job->listed && !job->helpers_wanted) {
                job->helpers_wanted = true;
                if (sim_isa_pool_may_launch(pool, job))
                        wake_helpers(pool, job);
        }
        pthread_mutex_unlock(&pool->lock);
}

void sim_isa_pool_close(SimIsaPool *pool, SimIsaJob *job) {
        if (!pool)
                return;
        pthread_mutex_lock(&pool->lock);
        unlist(pool, job);
        while (job->n_helpers > 0)
                pthread_cond_wait(&pool->left, &pool->lock);
        pthread_mutex_unlock(&pool->lock);
        launch_end(pool, job);
}

static void helper_free(Helper *h) {
        if (!h)
                return;
        free(h->waves);
        free(h->lds);
        free(h->icache);
        free(h);
}

static int helper_new(SimIsaPool *pool, Helper **ret) {
        Helper *h = calloc(1, sizeof *h);

        if (!h)
                return -ENOMEM;
        h->pool = pool;
        h->waves = calloc(MAX_WAVES, sizeof *h->waves);
        h->lds = calloc(1, MAX_LDS);
        h->icache = malloc(SIM_ISA_ICACHE_SIZE * sizeof *h->icache);
        if (!h->waves || !h->lds || !h->icache) {
                helper_free(h);
                return -ENOMEM;
        }
        *ret = h;
        return 0;
}

static void *helper_thread(void *userdata) {
        helper_main(userdata);
        helper_free(userdata);
        return NULL;
}

int sim_isa_pool_new(unsigned n_threads, SimIsaPool **ret) {
        SimIsaPool *pool;

        if (n_threads > SIM_ISA_MAX_HELPERS)
                n_threads = SIM_ISA_MAX_HELPERS;
        pool = calloc(1, sizeof *pool + n_threads * sizeof(pthread_t));
        if (!pool)
                return -ENOMEM;
        pthread_mutex_init(&pool->lock, NULL);
        pthread_cond_init(&pool->wake, NULL);
        pthread_cond_init(&pool->left, NULL);
        pool->n_cus = n_threads + 2;
        pool->wake_after = SIM_ISA_WAKE_AFTER;
        {
                pthread_condattr_t attr;
                pthread_condattr_init(&attr);
                pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
                pthread_cond_init(&pool->launch, &attr);
                pthread_condattr_destroy(&attr);
        }
        for (unsigned i = 0; i < n_threads; i++) {
                Helper *h = NULL;
                int r = helper_new(pool, &h);
                if (r == 0) {
                        r = -pthread_create(&pool->threads[i], NULL, helper_thread, h);
                        if (r < 0)
                                helper_free(h);
                }
                if (r < 0) {
                        sim_isa_pool_free(pool);
                        return r;
                }
                pool->n_threads++;
        }
        *ret = pool;
        return 0;
}

SimIsaPool *sim_isa_pool_free(SimIsaPool *pool) {
        if (!pool)
                return NULL;
        pthread_mutex_lock(&pool->lock);
        pool->stopping = true;
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->lock);
        for (unsigned i = 0; i < pool->n_threads; i++)
                pthread_join(pool->threads[i], NULL);
        pthread_cond_destroy(&pool->wake);
        pthread_cond_destroy(&pool->left);
        pthread_cond_destroy(&pool->launch);
        pthread_mutex_destroy(&pool->lock);
        free(pool);
        return NULL;
}

void sim_isa_pool_set_wake_after(SimIsaPool *pool, uint64_t wave_instructions) {
        __atomic_store_n(&pool->wake_after, wave_instructions, __ATOMIC_RELAXED);
}

uint64_t sim_isa_pool_wake_after(SimIsaPool *pool) {
        return pool ? __atomic_load_n(&pool->wake_after, __ATOMIC_RELAXED) : UINT64_MAX;
}

unsigned sim_isa_pool_sleeping(SimIsaPool *pool) {
        unsigned n;

        pthread_mutex_lock(&pool->lock);
        n = pool->n_sleeping;
        pthread_mutex_unlock(&pool->lock);
        return n;
}

uint64_t sim_isa_pool_wakeups(SimIsaPool *pool) {
        uint64_t n;

        pthread_mutex_lock(&pool->lock);
        n = pool->wakeups;
        pthread_mutex_unlock(&pool->lock);
        return n;
}

unsigned sim_isa_pool_threads(const SimIsaPool *pool) {
        return pool ? pool->n_threads : 0;
}

unsigned sim_isa_default_helpers(void) {
        cpu_set_t set;
        int n;

        if (sched_getaffinity(0, sizeof set, &set) < 0)
                return 0;
        n = CPU_COUNT(&set) - 1;
        if (n <= 0)
                return 0;
        return (unsigned) n < SIM_ISA_MAX_HELPERS ? (unsigned) n : SIM_ISA_MAX_HELPERS;
}
