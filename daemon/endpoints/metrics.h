/* SPDX-License-Identifier: MIT */
/*
 * Text exports of the accounting:
 *  - OpenMetrics (Prometheus) exposition of the daemon and of every identity
 *    (labels uid, unit, app, container; per-session labels would make the
 *    series count unbounded), for `kfdbrokerctl metrics`, the D-Bus
 *    GetMetrics method and the node-exporter textfile written by
 *    --metrics-file;
 *  - drm-usage-stats keys for one session (Documentation/gpu/drm-usage-stats.rst:
 *    drm-driver, drm-pdev (the GPU's PCI address, domain:bus:device.function,
 *    so a client id is unique per device as the document requires),
 *    drm-client-id, drm-engine-<name>: <ns> ns, drm-total-<region>: <n> KiB),
 *    so tools that read fdinfo can read ours. Engines are named as amdgpu
 *    names them in its fdinfo (drivers/gpu/drm/amd/amdgpu/amdgpu_fdinfo.c,
 *    amdgpu_ip_name[]): "dma" for SDMA, "compute".
 */
#pragma once

#include "sessions/forward.h"

typedef enum MetricsFormat {
        METRICS_OPENMETRICS,     /* OpenMetrics 1.0: D-Bus GetMetrics, kfdbrokerctl metrics */
        METRICS_PROMETHEUS_TEXT, /* Prometheus text 0.0.4: the --metrics-file for node exporter */
} MetricsFormat;

/* A malloc'd NUL-terminated text. -ENOMEM. */
int metrics_format(SessionSet *set, MetricsFormat fmt, char **ret);
int metrics_format_drm_usage(Session *s, char **ret);
