/* SPDX-License-Identifier: MIT */
/* See accounting.h. */
#include "scheduler/accounting.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/macro.h"

void usage_init(Usage *u, uint64_t now) {
        *u = (Usage) { .last_change_ns = now };
}

void usage_add_job(Usage *u, const UsageJob *j) {
        if (j->ok)
                u->jobs_completed++;
        else
                u->jobs_failed++;
        if (j->engine < _GPU_ENGINE_MAX) {
                u->busy_ns[j->engine] += j->busy_ns;
                u->jobs[j->engine]++;
        }
        u->queued_ns += j->queued_ns;
        u->bytes_copied += j->bytes_copied;
        u->bytes_filled += j->bytes_filled;
}

double usage_byte_seconds(const Usage *u, uint64_t now) {
        uint64_t dt = now > u->last_change_ns ? now - u->last_change_ns : 0;

        return u->buffer_byte_seconds + (double) u->buffer_bytes * ((double) dt / 1e9);
}

void usage_buffer_change(Usage *u, int64_t delta, uint64_t now) {
        u->buffer_byte_seconds = usage_byte_seconds(u, now);
        u->last_change_ns = now;
        if (delta < 0 && (uint64_t) -delta > u->buffer_bytes)
                u->buffer_bytes = 0;
        else
                u->buffer_bytes += (uint64_t) delta;
        if (u->buffer_bytes > u->buffer_bytes_peak)
                u->buffer_bytes_peak = u->buffer_bytes;
}

/* amdgpu's engine names in fdinfo (amdgpu_fdinfo.c, amdgpu_ip_name[]):
 * AMDGPU_HW_IP_DMA is "dma", AMDGPU_HW_IP_COMPUTE "compute". */
const char *gpu_engine_to_drm_name(GpuEngine e) {
        switch (e) {
        case GPU_ENGINE_SDMA:
                return "dma";
        case GPU_ENGINE_COMPUTE:
                return "compute";
        default:
                return "unknown";
        }
}

const char *gpu_engine_to_string(GpuEngine e) {
        switch (e) {
        case GPU_ENGINE_SDMA:
                return "sdma";
        case GPU_ENGINE_COMPUTE:
                return "compute";
        default:
                return "unknown";
        }
}

static char *strdup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

int account_table_get(AccountTable *t, uint32_t uid, const char *unit, const char *app_id,
                      const char *container, uint64_t now, Account **ret) {
        _cleanup_free_ char *key = NULL;
        Account *a;

        if (asprintf(&key, "uid=%u unit=%s app=%s container=%s", uid, unit ? unit : "-",
                     app_id ? app_id : "-", container ? container : "-") < 0)
                return -ENOMEM;
        LIST_FOREACH(accounts, a, t->accounts)
                if (strcmp(a->key, key) == 0) {
                        *ret = account_ref(a);
                        return 0;
                }
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->n_ref = 1; /* the table's */
        a->uid = uid;
        a->unit = strdup_or_null(unit);
        a->app_id = strdup_or_null(app_id);
        a->container = strdup_or_null(container);
        if ((unit && !a->unit) || (app_id && !a->app_id) || (container && !a->container)) {
                free(a->unit);
                free(a->app_id);
                free(a->container);
                free(a);
                return -ENOMEM;
        }
        a->key = TAKE_PTR(key);
        usage_init(&a->usage, now);
        LIST_PREPEND(accounts, t->accounts, a);
        t->n++;
        *ret = account_ref(a);
        return 0;
}

Account *account_ref(Account *a) {
        if (a)
                a->n_ref++;
        return a;
}

static void account_free(Account *a) {
        free(a->key);
        free(a->unit);
        free(a->app_id);
        free(a->container);
        free(a);
}

void account_unref(Account *a) {
        if (a && --a->n_ref == 0)
                account_free(a);
}

void account_table_done(AccountTable *t) {
        while (t->accounts) {
                Account *a = t->accounts;
                LIST_REMOVE(accounts, t->accounts, a);
                account_unref(a);
        }
        t->n = 0;
}
