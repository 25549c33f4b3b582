/* SPDX-License-Identifier: MIT */
/* See metrics.h. Format: OpenMetrics 1.0 text exposition. */
#include "endpoints/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/accounting.h"
#include "config.h"
#include "sessions/session-set.h"
#include "scheduler/scheduler.h"
#include "sessions/session.h"
#include "util/macro.h"
#include "util/time-util.h"

/* Label values: backslash, double quote and newline escaped (OpenMetrics ABNF). */
static void put_label(FILE *f, const char *name, const char *v) {
        fprintf(f, "%s=\"", name);
        for (const char *c = v ? v : ""; *c; c++) {
                if (*c == '\\' || *c == '"')
                        fputc('\\', f), fputc(*c, f);
                else if (*c == '\n')
                        fputs("\\n", f);
                else
                        fputc(*c, f);
        }
        fputc('"', f);
}

static void put_account_labels(FILE *f, const Account *a) {
        char uid[16];

        snprintf(uid, sizeof(uid), "%u", a->uid);
        fputc('{', f);
        put_label(f, "uid", uid);
        fputc(',', f);
        put_label(f, "unit", a->unit);
        fputc(',', f);
        put_label(f, "app", a->app_id);
        fputc(',', f);
        put_label(f, "container", a->container);
}

/*
 * The metadata of a metric family. OpenMetrics names a counter family X and
 * its samples X_total, and has an info type (samples X_info). The Prometheus
 * text format (0.0.4), which node exporter's textfile collector parses, has
 * no info type and wants the family named as its samples; otherwise it drops
 * the whole file ("unknown metric type") or imports the samples untyped. The
 * samples are the same in both; "# UNIT" and "# EOF" are comments there.
 */
static void family(FILE *f, MetricsFormat fmt, const char *name, const char *type, const char *unit,
                   const char *help) {
        const char *suffix = "";

        if (fmt == METRICS_PROMETHEUS_TEXT && strcmp(type, "counter") == 0)
                suffix = "_total";
        else if (fmt == METRICS_PROMETHEUS_TEXT && strcmp(type, "info") == 0)
                suffix = "_info", type = "gauge";
        fprintf(f, "# TYPE %s%s %s\n", name, suffix, type);
        if (unit)
                fprintf(f, "# UNIT %s%s %s\n", name, suffix, unit);
        fprintf(f, "# HELP %s%s %s\n", name, suffix, help);
}

typedef struct ContextSeries {
        FILE *f;
        int pass; /* 0: memory, 1: mapped, 2: jobs, 3: losses */
        unsigned gpu;
} ContextSeries;

static void put_context(Context *c, void *userdata) {
        ContextSeries *cs = userdata;
        ContextStats st;
        size_t k;

        context_get_stats(c, &st);
        /* The key's first word (device, session, identity, shared); keys name
         * sessions and identities, which the per-identity series label already. */
        k = strcspn(st.key, " ");
        switch (cs->pass) {
        case 0:
                fprintf(cs->f, "kfdbroker_gpu_context_memory_bytes{context=\"%" PRIu64 "\",kind=\"%.*s\",gpu=\"%u\"} %" PRIu64 "\n",
                        st.id, (int) k, st.key, cs->gpu, st.gpu.internal_bytes);
                break;
        case 1:
                fprintf(cs->f, "kfdbroker_gpu_context_mapped_bytes{context=\"%" PRIu64 "\",kind=\"%.*s\",gpu=\"%u\"} %" PRIu64 "\n",
                        st.id, (int) k, st.key, cs->gpu, st.gpu.mapped_bytes);
                break;
        case 2:
                fprintf(cs->f, "kfdbroker_gpu_context_jobs_in_flight{context=\"%" PRIu64 "\",kind=\"%.*s\",gpu=\"%u\"} %u\n",
                        st.id, (int) k, st.key, cs->gpu, st.jobs_in_flight);
                break;
        default:
                fprintf(cs->f, "kfdbroker_gpu_context_losses_total{context=\"%" PRIu64 "\",kind=\"%.*s\",gpu=\"%u\"} %u\n",
                        st.id, (int) k, st.key, cs->gpu, st.losses);
                break;
        }
}

int metrics_format(SessionSet *m, MetricsFormat fmt, char **ret) {
        char *buf = NULL;
        size_t len = 0;
        uint64_t now;
        Account *a;
        FILE *f;

        /* Jobs the GPUs finished are counted before they are reported. */
        for (unsigned g = 0; g < m->n_gpus; g++)
                context_catch_up(context_pool_device(m->gpus[g].contexts));
        now = now_ns();

        f = open_memstream(&buf, &len);
        if (!f)
                return -ENOMEM;

        family(f, fmt, "kfdbroker_build", "info", NULL, "Daemon version and device.");
        fprintf(f, "kfdbroker_build_info{version=\"%s\",backend=\"%s\",gfx=\"%s\"} 1\n", KFDBROKER_VERSION,
                m->gpus[0].info->backend, m->gpus[0].info->gfx_name);
        family(f, fmt, "kfdbroker_gpu", "info", NULL,
               "Every GPU served, by index (kfdbrokerctl status): its gfx target and KFD gpu_id.");
        for (unsigned g = 0; g < m->n_gpus; g++)
                fprintf(f, "kfdbroker_gpu_info{gpu=\"%u\",gfx=\"%s\",gpu_id=\"0x%x\"} 1\n", g,
                        m->gpus[g].info->gfx_name, m->gpus[g].info->gpu_id);
        family(f, fmt, "kfdbroker_sessions", "gauge", NULL, "Connected client sessions.");
        fprintf(f, "kfdbroker_sessions %u\n", m->n_sessions);
        family(f, fmt, "kfdbroker_jobs_in_flight", "gauge", NULL, "Jobs on each GPU now.");
        for (unsigned g = 0; g < m->n_gpus; g++)
                fprintf(f, "kfdbroker_jobs_in_flight{gpu=\"%u\"} %u\n", g, scheduler_in_flight(m->gpus[g].scheduler));
        family(f, fmt, "kfdbroker_gpu_jobs", "counter", NULL, "Retired jobs per GPU and result.");
        for (unsigned g = 0; g < m->n_gpus; g++) {
                fprintf(f, "kfdbroker_gpu_jobs_total{gpu=\"%u\",result=\"completed\"} %" PRIu64 "\n", g,
                        scheduler_jobs_completed(m->gpus[g].scheduler));
                fprintf(f, "kfdbroker_gpu_jobs_total{gpu=\"%u\",result=\"failed\"} %" PRIu64 "\n", g,
                        scheduler_jobs_failed(m->gpus[g].scheduler));
        }
        family(f, fmt, "kfdbroker_uptime_seconds", "gauge", "seconds", "Time since the daemon started.");
        fprintf(f, "kfdbroker_uptime_seconds %.3f\n", (double) (now - m->start_ns) / 1e9);

        /* GPU contexts: how many are up, and what each costs (the device
         * context and every client context up now, by id). */
        family(f, fmt, "kfdbroker_gpu_contexts", "gauge", NULL,
               "Client GPU contexts up now, and the mechanism that makes them (kernel, or none: shared mode).");
        for (unsigned g = 0; g < m->n_gpus; g++)
                fprintf(f, "kfdbroker_gpu_contexts{gpu=\"%u\",mechanism=\"%s\"} %u\n", g,
                        context_mechanism_to_string(context_pool_mechanism(m->gpus[g].contexts)),
                        context_pool_live(m->gpus[g].contexts));
        family(f, fmt, "kfdbroker_gpu_contexts_max", "gauge", NULL, "Client GPU contexts up at once on a GPU, at most.");
        for (unsigned g = 0; g < m->n_gpus; g++)
                fprintf(f, "kfdbroker_gpu_contexts_max{gpu=\"%u\"} %u\n", g, context_pool_max(m->gpus[g].contexts));
        {
                static const struct {
                        const char *name, *type, *unit, *help;
                } fams[] = {
                        { "kfdbroker_gpu_context_memory_bytes", "gauge", "bytes",
                          "Memory a GPU context holds for itself: rings, CWSR areas, EOP, scratch, kernel arguments, fences, event page." },
                        { "kfdbroker_gpu_context_mapped_bytes", "gauge", "bytes",
                          "Clients' buffers mapped into a GPU context (allocated, and counted, in the device context)." },
                        { "kfdbroker_gpu_context_jobs_in_flight", "gauge", NULL, "Jobs on the GPU in a GPU context." },
                        { "kfdbroker_gpu_context_losses", "counter", NULL, "Times a GPU context was lost to a GPU fault." },
                };
                ContextSeries cs = { .f = f };

                for (cs.pass = 0; cs.pass < 4; cs.pass++) {
                        family(f, fmt, fams[cs.pass].name, fams[cs.pass].type, fams[cs.pass].unit, fams[cs.pass].help);
                        for (cs.gpu = 0; cs.gpu < m->n_gpus; cs.gpu++)
                                context_pool_foreach(m->gpus[cs.gpu].contexts, put_context, &cs);
                }
        }

        family(f, fmt, "kfdbroker_identity_sessions", "gauge", NULL, "Connected sessions per identity.");
        LIST_FOREACH(accounts, a, m->accounts.accounts) {
                fputs("kfdbroker_identity_sessions", f);
                put_account_labels(f, a);
                fprintf(f, "} %u\n", a->sessions_now);
        }
        family(f, fmt, "kfdbroker_identity_jobs", "counter", NULL, "Retired jobs per identity and result.");
        LIST_FOREACH(accounts, a, m->accounts.accounts) {
                fputs("kfdbroker_identity_jobs_total", f);
                put_account_labels(f, a);
                fprintf(f, ",result=\"completed\"} %" PRIu64 "\n", a->usage.jobs_completed);
                fputs("kfdbroker_identity_jobs_total", f);
                put_account_labels(f, a);
                fprintf(f, ",result=\"failed\"} %" PRIu64 "\n", a->usage.jobs_failed);
        }
        family(f, fmt, "kfdbroker_identity_gpu_busy_seconds", "counter", "seconds",
               "GPU time between the timestamps around each job, per engine.");
        LIST_FOREACH(accounts, a, m->accounts.accounts)
                for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++) {
                        fputs("kfdbroker_identity_gpu_busy_seconds_total", f);
                        put_account_labels(f, a);
                        fprintf(f, ",engine=\"%s\"} %.9f\n", gpu_engine_to_string((GpuEngine) e),
                                (double) a->usage.busy_ns[e] / 1e9);
                }
        family(f, fmt, "kfdbroker_identity_queued_seconds", "counter", "seconds",
               "Time jobs waited between acceptance and the GPU.");
        LIST_FOREACH(accounts, a, m->accounts.accounts) {
                fputs("kfdbroker_identity_queued_seconds_total", f);
                put_account_labels(f, a);
                fprintf(f, "} %.9f\n", (double) a->usage.queued_ns / 1e9);
        }
        family(f, fmt, "kfdbroker_identity_bytes", "counter", "bytes", "Bytes copied and filled by the GPU.");
        LIST_FOREACH(accounts, a, m->accounts.accounts) {
                fputs("kfdbroker_identity_bytes_total", f);
                put_account_labels(f, a);
                fprintf(f, ",kind=\"copied\"} %" PRIu64 "\n", a->usage.bytes_copied);
                fputs("kfdbroker_identity_bytes_total", f);
                put_account_labels(f, a);
                fprintf(f, ",kind=\"filled\"} %" PRIu64 "\n", a->usage.bytes_filled);
        }
        family(f, fmt, "kfdbroker_identity_buffer_bytes", "gauge", "bytes", "GPU buffer memory held now.");
        LIST_FOREACH(accounts, a, m->accounts.accounts) {
                fputs("kfdbroker_identity_buffer_bytes", f);
                put_account_labels(f, a);
                fprintf(f, "} %" PRIu64 "\n", a->usage.buffer_bytes);
        }
        family(f, fmt, "kfdbroker_identity_buffer_peak_bytes", "gauge", "bytes",
               "Most GPU buffer memory held at once.");
        LIST_FOREACH(accounts, a, m->accounts.accounts) {
                fputs("kfdbroker_identity_buffer_peak_bytes", f);
                put_account_labels(f, a);
                fprintf(f, "} %" PRIu64 "\n", a->usage.buffer_bytes_peak);
        }
        family(f, fmt, "kfdbroker_identity_buffer_byte_seconds", "counter", NULL,
               "Buffer memory integrated over time (byte-seconds).");
        LIST_FOREACH(accounts, a, m->accounts.accounts) {
                fputs("kfdbroker_identity_buffer_byte_seconds_total", f);
                put_account_labels(f, a);
                fprintf(f, "} %.3f\n", usage_byte_seconds(&a->usage, now));
        }
        fputs("# EOF\n", f);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}

int metrics_format_drm_usage(Session *s, char **ret) {
        const GpuDeviceInfo *info = s->gpu ? s->gpu->info : NULL;
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return -ENOMEM;
        fprintf(f, "drm-driver:\tkfdbroker\n");
        if (info && info->pci_address[0])
                fprintf(f, "drm-pdev:\t%s\n", info->pci_address);
        fprintf(f, "drm-client-id:\t%" PRIu64 "\n", s->id);
        for (unsigned e = 0; e < _GPU_ENGINE_MAX; e++)
                fprintf(f, "drm-engine-%s:\t%" PRIu64 " ns\n", gpu_engine_to_drm_name((GpuEngine) e),
                        s->usage.busy_ns[e]);
        fprintf(f, "drm-total-gtt:\t%" PRIu64 " KiB\n", s->placement_bytes[GPU_PLACEMENT_GTT] / 1024);
        fprintf(f, "drm-total-vram:\t%" PRIu64 " KiB\n", s->placement_bytes[GPU_PLACEMENT_VRAM] / 1024);
        if (fclose(f) != 0) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}
