/* SPDX-License-Identifier: MIT */
/* See tally.h. */
#include "sessions/tally.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"
#include "util/time-util.h"

bool tally_idle(const Tally *t, uint64_t now) {
        return log_ratelimit_idle(&t->log_limit) && t->connect_tat_ns <= now && t->n_waiting == 0 &&
               t->kept_bytes == 0 && t->kept_probes == 0;
}

static void tally_free(TallyTable *table, Tally *t) {
        log_ratelimit_flush(&t->log_limit, t->key);
        for (unsigned i = 0; i < t->n_waiting; i++) {
                TallyWaiting *w = &t->waiting[(t->waiting_head + i) % t->n_waiting_alloc];

                safe_close(w->fd);
                safe_close(w->pidfd);
        }
        free(t->waiting);
        LIST_REMOVE(tallies, table->tallies, t);
        table->n--;
        free(t->key);
        free(t);
}

/* A Tally no session holds stays while its log rate limit or its connect
 * rate still counts (a peer that connects and disconnects in a loop keeps
 * its limits), and while it is charged for kept buffers. */
void tally_table_prune(TallyTable *table) {
        uint64_t now = now_ns();
        Tally *t, *next;

        for (t = table->tallies; t; t = next) {
                next = t->tallies_next;
                if (t->n_ref == 0 && tally_idle(t, now))
                        tally_free(table, t);
        }
}

int tally_table_get(TallyTable *table, const char *key, Tally **ret) {
        Tally *t;

        tally_table_prune(table);
        LIST_FOREACH(tallies, t, table->tallies)
                if (strcmp(t->key, key) == 0) {
                        *ret = tally_ref(t);
                        return 0;
                }
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->key = strdup(key);
        if (!t->key) {
                free(t);
                return -ENOMEM;
        }
        t->n_ref = 1;
        log_ratelimit_init(&t->log_limit, LOG_RATELIMIT_PEER_INTERVAL_USEC, LOG_RATELIMIT_PEER_BURST);
        LIST_PREPEND(tallies, table->tallies, t);
        table->n++;
        *ret = t;
        return 0;
}

Tally *tally_ref(Tally *t) {
        if (t)
                t->n_ref++;
        return t;
}

Tally *tally_unref(TallyTable *table, Tally *t) {
        if (!t || --t->n_ref > 0)
                return NULL;
        if (table->closing || tally_idle(t, now_ns()))
                tally_free(table, t);
        return NULL;
}

void tally_table_done(TallyTable *table) {
        Tally *t, *next;

        /* Sessions whose jobs have not retired yet let go of theirs later. */
        table->closing = true;
        for (t = table->tallies; t; t = next) {
                next = t->tallies_next;
                if (t->n_ref == 0)
                        tally_free(table, t);
        }
}

void tally_add(Tally *t, int64_t bytes_delta, int64_t objects_delta) {
        if (!t)
                return;
        t->buffer_bytes += (uint64_t) bytes_delta;
        t->objects += (uint64_t) objects_delta;
}
