/* SPDX-License-Identifier: MIT */
/*
 * Accounting: what a session, and an identity across all its sessions, used.
 *
 * A Usage is fed once per retired job, the same way for every engine: the GPU
 * time between the timestamps written before and after the job (SDMA
 * TIMESTAMP, compute RELEASE_MEM with DATA_SEL 3), the time it waited from
 * acceptance to reaching the GPU, and the bytes it moved; and once per buffer
 * allocation or free, integrating buffer byte-seconds.
 *
 * An Account is the Usage of one identity — a uid together with its systemd
 * unit, app id and container — kept by the Manager across reconnects, so that
 * a client that reconnects (or many short CI jobs of one unit) add up.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "util/list.h"

typedef struct Usage {
        uint64_t jobs_submitted;
        uint64_t jobs_completed;
        uint64_t jobs_failed;
        uint64_t busy_ns[_GPU_ENGINE_MAX];   /* GPU time between the job's timestamps */
        uint64_t jobs[_GPU_ENGINE_MAX];      /* retired jobs per engine */
        uint64_t queued_ns;                  /* accept -> submitted to the GPU, summed */
        uint64_t bytes_copied;
        uint64_t bytes_filled;
        uint64_t buffer_bytes;               /* now */
        uint64_t buffer_bytes_peak;
        double buffer_byte_seconds;          /* integral of buffer_bytes over time */
        uint64_t last_change_ns;             /* when buffer_bytes last changed */
} Usage;

typedef struct UsageJob {
        GpuEngine engine;
        bool ok;
        uint64_t busy_ns;
        uint64_t queued_ns;
        uint64_t bytes_copied;
        uint64_t bytes_filled;
} UsageJob;

void usage_init(Usage *u, uint64_t now);
void usage_add_job(Usage *u, const UsageJob *j);
void usage_buffer_change(Usage *u, int64_t delta, uint64_t now);
/* Byte-seconds up to now (without changing u). */
double usage_byte_seconds(const Usage *u, uint64_t now);

const char *gpu_engine_to_string(GpuEngine e); /* "sdma", "compute" */
/* The engine's name in drm-usage-stats keys, as amdgpu has it: "dma", "compute". */
const char *gpu_engine_to_drm_name(GpuEngine e);

typedef struct Account {
        unsigned n_ref;
        char *key;        /* "uid=1000 unit=foo.service app=- container=-" */
        uint32_t uid;
        char *unit;       /* NULL if none */
        char *app_id;
        char *container;
        unsigned sessions_now;
        uint64_t sessions_total;
        Usage usage;
        LIST_FIELDS(struct Account, accounts);
} Account;

typedef struct AccountTable {
        LIST_HEAD(Account, accounts);
        unsigned n;
} AccountTable;

/* Finds or creates the account for this identity; returns a new reference. */
int account_table_get(AccountTable *t, uint32_t uid, const char *unit, const char *app_id,
                      const char *container, uint64_t now, Account **ret);
Account *account_ref(Account *a);
/* Accounts stay in the table after the last session; the table owns them. */
void account_unref(Account *a);
void account_table_done(AccountTable *t);
