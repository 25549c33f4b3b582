/* SPDX-License-Identifier: MIT */
/*
 * The populator thread of a device (see sim-populate.h): a FIFO of VRAM BOs,
 * each backed PIECE bytes at a time, all its memory then all its view, with
 * the populator's lock let go around the madvise() calls.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "sim-cache.h"
#include "sim-memory.h"
#include "sim-populate.h"
#include "util/macro.h"

/* A piece: what the thread backs with its lock let go, so what a free of
 * the BO may leave it to unmap. 2 MiB: 512 pages. */
#define PIECE (2ull << 20)

typedef struct Job {
        struct Job *next;
        SimBo *bo;
        uint64_t done; /* bytes backed: of the memory, then size + bytes of the view */
} Job;

struct SimPopulator {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t thread;
        bool running, stop;
        Job *head, **tail;
        /* The piece being backed now: its BO (NULL if none), and where a
         * free of it left that BO's mappings (sim_populator_forget()). */
        SimBo *busy;
        uint8_t *orphan_host, *orphan_view;
        uint64_t orphan_size;
        uint64_t backed; /* sim_populator_backed() */
};

static void job_pop(SimPopulator *p) {
        Job *j = p->head;

        p->head = j->next;
        if (!p->head)
                p->tail = &p->head;
        free(j);
}

static void *populator_thread(void *userdata) {
        SimPopulator *p = userdata;

        pthread_mutex_lock(&p->lock);
        while (!p->stop) {
                Job *j = p->head;

                if (!j) {
                        pthread_cond_wait(&p->wake, &p->lock);
                        continue;
                }
                SimBo *bo = j->bo;
                uint8_t *view = sim_cache_view_pages(bo, false);
                /* The memory first, then the view: the engine that made the
                 * BO's first write is writing the view meanwhile, and needs
                 * the memory only at the write-back. */
                bool in_view = j->done >= bo->size;
                uint64_t off = in_view ? j->done - bo->size : j->done, len = MIN(PIECE, bo->size - off);
                uint8_t *at = (in_view ? view : bo->host) + off;

                /* The BO stays (its free waits for nothing, but leaves the
                 * mappings to us while it is busy), the job may go. */
                p->busy = bo;
                j->done += len;
                if (j->done >= (view ? 2 : 1) * bo->size)
                        job_pop(p);
                pthread_mutex_unlock(&p->lock);

                /* Best effort: MADV_POPULATE_WRITE needs Linux 5.14; without
                 * it (or with no memory) the engines fault the pages in. */
                (void) madvise(at, len, MADV_POPULATE_WRITE);

                pthread_mutex_lock(&p->lock);
                p->busy = NULL;
                p->backed += len;
                if (p->orphan_host) {
                        /* Unmapped with the lock let go: a free of a BO
                         * (sim_populator_forget(), under the device lock)
                         * does not wait for the pages to go. */
                        uint8_t *host = TAKE_PTR(p->orphan_host), *orphan_view = TAKE_PTR(p->orphan_view);
                        uint64_t size = p->orphan_size;

                        pthread_mutex_unlock(&p->lock);
                        munmap(host, size);
                        if (orphan_view)
                                munmap(orphan_view, size);
                        pthread_mutex_lock(&p->lock);
                }
        }
        pthread_mutex_unlock(&p->lock);
        return NULL;
}

int sim_populator_new(SimPopulator **ret) {
        SimPopulator *p = calloc(1, sizeof *p);
        int r;

        if (!p)
                return -ENOMEM;
        pthread_mutex_init(&p->lock, NULL);
        pthread_cond_init(&p->wake, NULL);
        p->tail = &p->head;
        r = pthread_create(&p->thread, NULL, populator_thread, p);
        if (r != 0) {
                sim_populator_free(p);
                return -r;
        }
        p->running = true;
        *ret = p;
        return 0;
}

SimPopulator *sim_populator_free(SimPopulator *p) {
        if (!p)
                return NULL;
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_signal(&p->wake);
        pthread_mutex_unlock(&p->lock);
        if (p->running)
                pthread_join(p->thread, NULL);
        /* Every BO was freed before: nothing is queued, nothing orphaned. */
        while (p->head)
                job_pop(p);
        pthread_cond_destroy(&p->wake);
        pthread_mutex_destroy(&p->lock);
        free(p);
        return NULL;
}

void sim_populator_add(SimPopulator *p, SimBo *bo) {
        if (!p)
                return;
        pthread_mutex_lock(&p->lock);
        for (Job *j = p->head; j; j = j->next)
                if (j->bo == bo) {
                        j->done = 0; /* again from the start (a reset dropped its pages meanwhile) */
                        pthread_mutex_unlock(&p->lock);
                        return;
                }
        Job *j = calloc(1, sizeof *j);
        if (j) { /* without memory for the job the engines fault the pages in */
                j->bo = bo;
                *p->tail = j;
                p->tail = &j->next;
                pthread_cond_signal(&p->wake);
        }
        pthread_mutex_unlock(&p->lock);
}

void sim_populator_forget(SimPopulator *p, SimBo *bo) {
        if (!p)
                return;
        pthread_mutex_lock(&p->lock);
        for (Job **jp = &p->head; *jp; jp = &(*jp)->next)
                if ((*jp)->bo == bo) {
                        Job *j = *jp;
                        *jp = j->next;
                        if (!*jp)
                                p->tail = jp;
                        free(j);
                        break;
                }
        if (p->busy == bo) {
                p->orphan_host = bo->host;
                p->orphan_view = sim_cache_view_pages(bo, true);
                p->orphan_size = bo->size;
                bo->host = NULL;
        }
        pthread_mutex_unlock(&p->lock);
}

uint64_t sim_populator_backed(SimPopulator *p) {
        uint64_t n;

        if (!p)
                return 0;
        pthread_mutex_lock(&p->lock);
        n = p->backed;
        pthread_mutex_unlock(&p->lock);
        return n;
}
