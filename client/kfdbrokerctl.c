/* SPDX-License-Identifier: MIT */
/*
 * kfdbrokerctl: the command-line face of kfdbroker, built on libkfdbroker.
 * Global options (--socket, --json, --no-ask-password) come before or after a verb from the
 * table below; each verb parses its own options. A verb returns 0 on success, a
 * negative errno after printing what went wrong (exit status 1), or
 * CTL_EXIT_USAGE (2) for bad usage when nothing was sent.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "ctl-bus.h"
#include "ctl-cdi.h"
#include "ctl-policy.h"
#include "ctl-compute.h"
#include "ctl-json.h"
#include "ctl-polkit.h"
#include "ctl-selftest.h"
#include "ctl-socket.h"
#include "kfdbroker.h"
#include "util/macro.h"

#define PROG "kfdbrokerctl"

typedef struct Ctl {
        const char *socket_path; /* NULL: library default ($KFDBROKER_SOCKET, compiled-in) */
        bool json;
        bool no_ask_password;
        bool gpu_wanted;         /* a session on GPU gpu (selftest --gpu=), else the library's choice */
        uint32_t gpu;
        kfdb_session *session;
} Ctl;

typedef struct Verb {
        const char *name;
        const char *args;
        const char *help;
        int (*run)(Ctl *ctl, int argc, char **argv);
} Verb;

static const char *ctl_socket_path(const Ctl *ctl) {
        const char *e;

        if (ctl->socket_path)
                return ctl->socket_path;
        e = secure_getenv("KFDBROKER_SOCKET");
        return e && *e ? e : kfdb_default_socket_path();
}

static int ctl_connect(Ctl *ctl) {
        const char *path = ctl_socket_path(ctl);
        int r;

        if (ctl->session)
                return 0;
        r = ctl->gpu_wanted ? kfdb_session_new_on_gpu(path, PROG, ctl->gpu, &ctl->session)
                            : kfdb_session_new(path, PROG, &ctl->session);
        if (r == -ENOENT || r == -ECONNREFUSED)
                fprintf(stderr, PROG ": cannot connect to %s: %s (is kfdbrokerd running?)\n", path,
                        strerror(-r));
        else if (r < 0 && kfdb_session_last_error(NULL)[0])
                /* The daemon's own words: why it refused (no GPU, a limit, a GPU not allowed). */
                fprintf(stderr, PROG ": cannot start a session on %s: %s\n", path, kfdb_session_last_error(NULL));
        else if (r == -EACCES || r == -EPERM)
                fprintf(stderr, PROG ": cannot connect to %s: %s (may this user use the socket?)\n",
                        path, strerror(-r));
        else if (r < 0)
                fprintf(stderr, PROG ": cannot start a session on %s: %s\n", path, kfdb_strerror(r));
        return r;
}

/* Prints the failure of a library call with the daemon's (or library's) message. */
static int ctl_fail(const Ctl *ctl, int r, const char *what) {
        return ctl_print_failure(ctl->session, PROG, r, what);
}

static const char *format_bytes(uint64_t v, char *buf, size_t size) {
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
        double d = (double) v;
        size_t u = 0;

        while (d >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
                d /= 1024.0;
                u++;
        }
        if (u == 0)
                snprintf(buf, size, "%" PRIu64 " B", v);
        else
                snprintf(buf, size, "%.1f %s", d, units[u]);
        return buf;
}

static const char *format_duration(uint64_t ns, char *buf, size_t size) {
        uint64_t s = ns / 1000000000u;

        if (s >= 86400)
                snprintf(buf, size, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", s / 86400,
                         s / 3600 % 24, s / 60 % 60);
        else if (s >= 3600)
                snprintf(buf, size, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", s / 3600,
                         s / 60 % 60, s % 60);
        else if (s >= 60)
                snprintf(buf, size, "%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
        else
                snprintf(buf, size, "%.1fs", (double) ns / 1e9);
        return buf;
}

/* Verbs take no options of their own unless they parse them; reject stray arguments. */
static int no_arguments(const char *verb, int argc, char **argv) {
        if (argc > 1) {
                fprintf(stderr, PROG " %s: unexpected argument '%s'\n", verb, argv[1]);
                return -EINVAL;
        }
        return 0;
}

/* For a verb without options that talks to the daemon over the socket. */
static int ctl_prepare(Ctl *ctl, int argc, char **argv) {
        int r = no_arguments(argv[0], argc, argv);
        return r < 0 ? r : ctl_connect(ctl);
}

/* ---- status ---- */

/* What a backend value means, for people: "sim" is API (kfdbroker.h, the
 * metrics label, the journal field) and stays as it is in JSON. */
static const char *backend_words(const char *backend) {
        return strcmp(backend, "sim") == 0 ? " (simulated GPU)" : "";
}

#define MAX_LISTED_CONTEXTS 4097u
#define MAX_LISTED_GPUS 64u

static int verb_status(Ctl *ctl, int argc, char **argv) {
        _cleanup_free_ kfdb_gpu_context *list = NULL;
        kfdb_gpu_contexts cs;
        kfdb_daemon_status st;
        kfdb_device dev;
        char b1[32], b2[32], node[256], node_reason[512];
        _cleanup_free_ kfdb_gpu *gpus = calloc(MAX_LISTED_GPUS, sizeof(kfdb_gpu));
        unsigned live = 0;
        size_t n, n_gpus = 0;
        int r;

        r = ctl_prepare(ctl, argc, argv);
        if (r < 0)
                return r;
        if (!gpus)
                return ctl_fail(ctl, -ENOMEM, "Status failed");
        r = kfdb_status(ctl->session, &st);
        if (r < 0)
                return ctl_fail(ctl, r, "Status failed");
        r = kfdb_device_info(ctl->session, &dev);
        if (r < 0)
                return ctl_fail(ctl, r, "DeviceInfo failed");
        r = kfdb_device_node(ctl->session, node, sizeof node, node_reason, sizeof node_reason);
        if (r < 0)
                return ctl_fail(ctl, r, "DeviceInfo failed");
        list = calloc(MAX_LISTED_CONTEXTS, sizeof(*list));
        if (!list)
                return ctl_fail(ctl, -ENOMEM, "Status failed");
        r = kfdb_gpu_contexts_get(ctl->session, &cs, list, MAX_LISTED_CONTEXTS);
        if (r < 0)
                return ctl_fail(ctl, r, "Status failed");
        r = kfdb_gpus_get(ctl->session, gpus, MAX_LISTED_GPUS, &n_gpus);
        if (r < 0)
                return ctl_fail(ctl, r, "Status failed");
        n = MIN(cs.n, (size_t) MAX_LISTED_CONTEXTS);

        if (ctl->json) {
                json_member_string("{", "daemon_version", st.daemon_version);
                json_member_string(",", "backend", st.backend);
                json_member_string(",", "gfx_name", dev.gfx_name);
                json_member_string(",", "device_name", dev.name);
                json_member_string(",", "gpu_node", node);
                json_member_string(",", "gpu_node_reason", node_reason);
                printf(",\"gpu_id\":%" PRIu32 ",\"sessions\":%" PRIu32 ",\"jobs_completed\":%" PRIu64
                       ",\"jobs_failed\":%" PRIu64 ",\"jobs_in_flight\":%" PRIu32
                       ",\"uptime_ns\":%" PRIu64 ",\"buffer_bytes\":%" PRIu64
                       ",\"gpu_buffers\":%" PRIu32 ",\"events\":%" PRIu32,
                       dev.gpu_id, st.sessions, st.jobs_completed, st.jobs_failed, st.jobs_in_flight,
                       st.uptime_ns, st.buffer_bytes, st.gpu_buffers, st.events);
                json_member_string(",", "context_mechanism", cs.mechanism);
                json_member_string(",", "context_mechanism_reason", cs.reason);
                printf(",\"max_contexts\":%" PRIu32 ",\"contexts\":[", cs.max);
                for (size_t i = 0; i < n; i++) {
                        printf("%s{\"id\":%" PRIu64, i ? "," : "", list[i].id);
                        json_member_string(",", "kind", list[i].kind);
                        printf(",\"live\":%s,\"users\":%" PRIu32 ",\"jobs_in_flight\":%" PRIu32
                               ",\"losses\":%" PRIu32 ",\"memory_bytes\":%" PRIu64 ",\"mapped_bytes\":%" PRIu64
                               ",\"pid\":%" PRIu32 "}",
                               list[i].live ? "true" : "false", list[i].users, list[i].jobs_in_flight,
                               list[i].losses, list[i].memory_bytes, list[i].mapped_bytes, list[i].pid);
                }
                printf("],\"gpus\":[");
                for (size_t g = 0; g < MIN(n_gpus, (size_t) MAX_LISTED_GPUS); g++) {
                        printf("%s{\"index\":%" PRIu32, g ? "," : "", gpus[g].index);
                        json_member_string(",", "gfx_name", gpus[g].gfx_name);
                        json_member_string(",", "name", gpus[g].name);
                        json_member_string(",", "node", gpus[g].node);
                        json_member_string(",", "node_reason", gpus[g].node_reason);
                        printf(",\"gpu_id\":%" PRIu32 ",\"vram_size\":%" PRIu64 ",\"cu_count\":%" PRIu32
                               ",\"sessions\":%" PRIu32 ",\"jobs_completed\":%" PRIu64 ",\"jobs_failed\":%" PRIu64
                               ",\"jobs_in_flight\":%" PRIu32 ",\"gpu_buffers\":%" PRIu32 "}",
                               gpus[g].gpu_id, gpus[g].vram_size, gpus[g].cu_count, gpus[g].sessions,
                               gpus[g].jobs_completed, gpus[g].jobs_failed, gpus[g].jobs_in_flight,
                               gpus[g].gpu_buffers);
                }
                printf("]}\n");
                return 0;
        }
        printf("daemon:   kfdbrokerd %s\n", st.daemon_version);
        printf("backend:  %s%s\n", st.backend, backend_words(st.backend));
        /* The session's GPU, with its marketing name when it says more than the gfx target. */
        if (dev.name[0] && strcmp(dev.name, dev.gfx_name) != 0)
                printf("device:   %s \"%s\" (gpu_id %" PRIu32 ")\n", dev.gfx_name, dev.name, dev.gpu_id);
        else
                printf("device:   %s (gpu_id %" PRIu32 ")\n", dev.gfx_name, dev.gpu_id);
        /* Which node of the machine's KFD topology, and why (kfdbrokerd --gpu=);
         * with several GPUs, each by its index, with its own work. */
        if (n_gpus > 1)
                for (size_t g = 0; g < MIN(n_gpus, (size_t) MAX_LISTED_GPUS); g++)
                        printf("gpu %" PRIu32 ":    %s: %s; %" PRIu32 " session%s, %" PRIu64 " jobs completed, %" PRIu64
                               " failed, %" PRIu32 " on the GPU\n",
                               gpus[g].index, gpus[g].node, gpus[g].node_reason, gpus[g].sessions,
                               gpus[g].sessions == 1 ? "" : "s", gpus[g].jobs_completed, gpus[g].jobs_failed,
                               gpus[g].jobs_in_flight);
        else if (node[0])
                printf("gpu:      %s: %s\n", node, node_reason);
        printf("sessions: %" PRIu32 "\n", st.sessions);
        printf("jobs:     %" PRIu64 " completed, %" PRIu64 " failed, %" PRIu32 " on the GPU\n",
               st.jobs_completed, st.jobs_failed, st.jobs_in_flight);
        printf("uptime:   %s\n", format_duration(st.uptime_ns, b1, sizeof(b1)));
        printf("buffers:  %s (%" PRIu64 " bytes), %" PRIu32 " GPU buffer objects\n",
               format_bytes(st.buffer_bytes, b2, sizeof(b2)), st.buffer_bytes, st.gpu_buffers);
        printf("events:   %" PRIu32 "\n", st.events);
        /* How clients' kernels are kept apart here, said as the daemon says it. */
        printf("contexts: %s: %s\n", cs.mechanism, cs.reason);
        for (size_t k = 0; k < n; k++)
                live += list[k].live && strcmp(list[k].kind, "device") != 0; /* one device context per GPU */
        if (n > 0)
                printf("          %u of at most %" PRIu32 " client contexts up\n", live, cs.max);
        for (size_t i = 0; i < n; i++) {
                printf("          #%" PRIu64 " %-8s %s, %" PRIu32 " session%s, %" PRIu32 " jobs on the GPU, %s of its own",
                       list[i].id, list[i].kind, list[i].live ? "up" : "down", list[i].users,
                       list[i].users == 1 ? "" : "s", list[i].jobs_in_flight,
                       format_bytes(list[i].memory_bytes, b1, sizeof(b1)));
                if (list[i].mapped_bytes)
                        printf(", %s of clients' buffers mapped", format_bytes(list[i].mapped_bytes, b2, sizeof(b2)));
                if (list[i].losses)
                        printf(", lost %" PRIu32 " time%s", list[i].losses, list[i].losses == 1 ? "" : "s");
                if (list[i].pid)
                        printf(", worker pid %" PRIu32, list[i].pid);
                printf("\n");
        }
        return 0;
}

/* ---- device ---- */

static int verb_device(Ctl *ctl, int argc, char **argv) {
        kfdb_device dev;
        char b[32];
        int r;

        r = ctl_prepare(ctl, argc, argv);
        if (r < 0)
                return r;
        r = kfdb_device_info(ctl->session, &dev);
        if (r < 0)
                return ctl_fail(ctl, r, "DeviceInfo failed");
        uint32_t compute = 0;
        r = kfdb_device_compute_queues(ctl->session, &compute);
        if (r < 0)
                return ctl_fail(ctl, r, "DeviceInfo failed");
        if (ctl->json) {
                json_member_string("{", "backend", dev.backend);
                json_member_string(",", "gfx_name", dev.gfx_name);
                json_member_string(",", "name", dev.name);
                printf(",\"gpu_id\":%" PRIu32 ",\"vendor_id\":%" PRIu32 ",\"device_id\":%" PRIu32
                       ",\"cu_count\":%" PRIu32 ",\"vram_size\":%" PRIu64 ",\"kfd_major\":%" PRIu32
                       ",\"kfd_minor\":%" PRIu32 ",\"sdma_queues\":%" PRIu32 ",\"compute_queues\":%" PRIu32
                       "}\n",
                       dev.gpu_id, dev.vendor_id, dev.device_id, dev.cu_count, dev.vram_size,
                       dev.kfd_major, dev.kfd_minor, dev.sdma_queues, compute);
                return 0;
        }
        printf("backend:     %s%s\n", dev.backend, backend_words(dev.backend));
        printf("name:        %s\n", dev.name);
        printf("gfx:         %s\n", dev.gfx_name);
        printf("gpu_id:      %" PRIu32 "\n", dev.gpu_id);
        printf("pci id:      %04" PRIx32 ":%04" PRIx32 "\n", dev.vendor_id, dev.device_id);
        printf("CUs:         %" PRIu32 "\n", dev.cu_count);
        printf("VRAM:        %s\n", format_bytes(dev.vram_size, b, sizeof(b)));
        printf("KFD:         %" PRIu32 ".%" PRIu32 "\n", dev.kfd_major, dev.kfd_minor);
        printf("SDMA queues: %" PRIu32 "\n", dev.sdma_queues);
        printf("compute queues: %" PRIu32 "%s\n", compute, compute ? "" : " (no compute dispatch)");
        return 0;
}

/* ---- demo ---- */

#define DEMO_DEFAULT_SIZE (64ull << 20)
#define DEMO_STRIPES 16u
#define DEMO_TIMEOUT_MS 60000

static double now_s(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* A different 32-bit pattern per stripe, so a copy that lands at the wrong offset shows. */
static uint32_t demo_pattern(unsigned stripe) {
        return (0x9E3779B9u * (stripe + 1)) ^ 0x5A5A5A5Au;
}

/* Checks every byte of buf (filled stripe by stripe); returns the number of wrong bytes. */
static uint64_t demo_check(const uint8_t *buf, uint64_t size, uint64_t stripe,
                           uint64_t *ret_first_bad, uint8_t *ret_got, uint8_t *ret_want) {
        uint64_t bad = 0;

        for (uint64_t off = 0; off < size; off += 4) {
                uint32_t want = demo_pattern((unsigned) (off / stripe)), got;

                memcpy(&got, buf + off, 4);
                if (got == want)
                        continue;
                for (unsigned i = 0; i < 4; i++) {
                        uint8_t g = (uint8_t) (got >> (8 * i)), w = (uint8_t) (want >> (8 * i));
                        if (g == w)
                                continue;
                        if (bad == 0) {
                                *ret_first_bad = off + i;
                                *ret_got = g;
                                *ret_want = w;
                        }
                        bad++;
                }
        }
        return bad;
}

static int parse_size(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 0);
        if (errno != 0 || end == s)
                return -EINVAL;
        if (*end == 'K' || *end == 'k')
                v <<= 10, end++;
        else if (*end == 'M' || *end == 'm')
                v <<= 20, end++;
        else if (*end == 'G' || *end == 'g')
                v <<= 30, end++;
        if (*end != '\0' || v == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static int demo_wait(Ctl *ctl, uint64_t fence, const char *what) {
        int r = kfdb_fence_wait(ctl->session, fence, DEMO_TIMEOUT_MS);

        if (r == -ETIMEDOUT) {
                fprintf(stderr, PROG " demo: the %s did not complete within %d s\n", what,
                        DEMO_TIMEOUT_MS / 1000);
                return r;
        }
        if (r < 0)
                return ctl_fail(ctl, r, what);
        return 0;
}

static int verb_demo(Ctl *ctl, int argc, char **argv) {
        static const struct option options[] = {
                { "size", required_argument, NULL, 's' },
                { "vram", no_argument, NULL, 'V' },
                { "elements", required_argument, NULL, 'e' },
                {}
        };
        kfdb_placement placement = KFDB_PLACEMENT_GTT;
        uint64_t size = DEMO_DEFAULT_SIZE, stripe, fence, first_bad = 0, bad;
        uint64_t elements = CTL_SAXPY_DEFAULT_ELEMENTS;
        CtlSaxpyResult saxpy = {};
        kfdb_buffer *src = NULL, *dst = NULL;
        kfdb_batch *batch = NULL;
        kfdb_daemon_status st;
        kfdb_device dev;
        void *src_map, *dst_map;
        uint8_t got = 0, want = 0;
        double t0, t_fill, t_copy, gbps;
        char b[32];
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case 's':
                        if (parse_size(optarg, &size) < 0 || size % (4096ull * DEMO_STRIPES) != 0) {
                                fprintf(stderr, PROG " demo: --size must be a multiple of %u bytes, got '%s'\n",
                                        4096u * DEMO_STRIPES, optarg);
                                return -EINVAL;
                        }
                        break;
                case 'V':
                        placement = KFDB_PLACEMENT_VRAM;
                        break;
                case 'e':
                        if (parse_size(optarg, &elements) < 0 || elements > UINT32_MAX) {
                                fprintf(stderr, PROG " demo: --elements must be 1..%u, got '%s'\n", UINT32_MAX,
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, PROG " demo: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        stripe = size / DEMO_STRIPES;

        r = ctl_connect(ctl);
        if (r < 0)
                return r;
        r = kfdb_device_info(ctl->session, &dev);
        if (r < 0)
                return ctl_fail(ctl, r, "DeviceInfo failed");
        if (!ctl->json)
                printf("demo on %s (%s backend%s%s), kfdbrokerd %s\n", dev.gfx_name, dev.backend,
                       strcmp(dev.name, dev.gfx_name) != 0 && dev.name[0] ? ", " : "",
                       strcmp(dev.name, dev.gfx_name) != 0 ? dev.name : "",
                       kfdb_session_get_daemon_version(ctl->session));

        /* Both buffers belong to the session: kfdb_session_free() in main() releases them on
         * every path out of here. */
        r = kfdb_buffer_alloc(ctl->session, size, placement, &src);
        if (r >= 0)
                r = kfdb_buffer_alloc(ctl->session, size, placement, &dst);
        if (r < 0)
                return ctl_fail(ctl, r, "cannot allocate the demo buffers");
        r = kfdb_buffer_map(src, &src_map);
        if (r >= 0)
                r = kfdb_buffer_map(dst, &dst_map);
        if (r < 0)
                return ctl_fail(ctl, r, "cannot map the dma-buf of a demo buffer");
        if (!ctl->json)
                printf("  allocated 2 buffers of %s in %s, dma-buf fds %d and %d\n",
                       format_bytes(size, b, sizeof(b)),
                       placement == KFDB_PLACEMENT_VRAM ? "VRAM" : "GTT",
                       kfdb_buffer_get_fd(src), kfdb_buffer_get_fd(dst));
        /* What the GPU must overwrite: a copy or fill that does nothing cannot pass. */
        memset(src_map, 0x11, size);
        memset(dst_map, 0xee, size);

        r = kfdb_batch_new(ctl->session, &batch);
        if (r < 0)
                return ctl_fail(ctl, r, "cannot make a batch");
        for (unsigned i = 0; i < DEMO_STRIPES && r >= 0; i++)
                r = kfdb_batch_fill(batch, src, i * stripe, stripe, demo_pattern(i));
        if (r < 0)
                return ctl_fail(ctl, r, "cannot add a fill job");
        t0 = now_s();
        r = kfdb_batch_submit(batch, NULL, &fence);
        if (r < 0)
                return ctl_fail(ctl, r, "Submit of the fill jobs failed");
        r = demo_wait(ctl, fence, "fill");
        if (r < 0)
                return r;
        t_fill = now_s() - t0;
        if (!ctl->json)
                printf("  filled %s on the GPU with %u patterns in %.2f ms\n",
                       format_bytes(size, b, sizeof(b)), DEMO_STRIPES, t_fill * 1e3);

        r = kfdb_batch_copy(batch, dst, 0, src, 0, size);
        if (r < 0)
                return ctl_fail(ctl, r, "cannot add the copy job");
        t0 = now_s();
        r = kfdb_batch_submit(batch, NULL, &fence);
        if (r < 0)
                return ctl_fail(ctl, r, "Submit of the copy job failed");
        r = demo_wait(ctl, fence, "copy");
        if (r < 0)
                return r;
        t_copy = now_s() - t0;
        gbps = (double) size / t_copy / 1e9;
        if (!ctl->json)
                printf("  copied %s on the GPU in %.2f ms: %.2f GB/s\n",
                       format_bytes(size, b, sizeof(b)), t_copy * 1e3, gbps);

        bad = demo_check(src_map, size, stripe, &first_bad, &got, &want);
        if (bad == 0)
                bad = demo_check(dst_map, size, stripe, &first_bad, &got, &want);
        else
                fprintf(stderr, PROG " demo: the filled source buffer is wrong\n");

        if (bad == 0 && !ctl->json)
                printf("  checked all %" PRIu64 " bytes of both buffers through their dma-buf mappings: correct\n",
                       size);

        /* Compute: saxpy through the broker (skipped, and said so, where it cannot run). */
        if (bad == 0) {
                r = ctl_demo_saxpy(ctl->session, PROG " demo", ctl->json, elements, &saxpy);
                if (r < 0)
                        return r;
        }

        r = kfdb_status(ctl->session, &st);
        if (r < 0)
                return ctl_fail(ctl, r, "Status failed");

        if (ctl->json) {
                printf("{\"passed\":%s,\"size\":%" PRIu64, bad == 0 ? "true" : "false", size);
                json_member_string(",", "backend", dev.backend);
                json_member_string(",", "gfx_name", dev.gfx_name);
                printf(",\"fill_ms\":");
                json_double(t_fill * 1e3);
                printf(",\"copy_ms\":");
                json_double(t_copy * 1e3);
                printf(",\"copy_gbps\":");
                json_double(gbps);
                printf(",\"wrong_bytes\":%" PRIu64, bad);
                if (saxpy.ran) {
                        printf(",\"saxpy\":{\"elements\":%" PRIu64 ",\"ms\":", saxpy.elements);
                        json_double(saxpy.ms);
                        printf(",\"elements_per_s\":");
                        json_double(saxpy.elements_per_s);
                        printf(",\"wrong_elements\":%" PRIu64 "}", saxpy.wrong);
                } else
                        json_member_string(",", "saxpy_skipped", saxpy.skip_reason);
                printf(",\"daemon_jobs_completed\":%" PRIu64 ",\"daemon_jobs_failed\":%" PRIu64 "}\n",
                       st.jobs_completed, st.jobs_failed);
        } else {
                printf("  daemon: %" PRIu64 " jobs completed, %" PRIu64 " failed (all sessions)\n",
                       st.jobs_completed, st.jobs_failed);
        }
        if (bad != 0) {
                fprintf(stderr,
                        PROG " demo: FAILED: %" PRIu64 " wrong bytes; first at offset %" PRIu64
                             ": 0x%02x, expected 0x%02x\n",
                        bad, first_bad, got, want);
                return -EIO;
        }
        if (!ctl->json)
                printf("demo passed\n");
        return 0;
}

/* ---- kernels ---- */

static int verb_kernels(Ctl *ctl, int argc, char **argv) {
        int r;

        if (argc != 2) {
                fprintf(stderr, PROG " kernels: expected one code object file, got %d arguments\n", argc - 1);
                return -EINVAL;
        }
        r = ctl_connect(ctl);
        return r < 0 ? r : ctl_kernels(ctl->session, PROG, ctl->json, argv[1]);
}

/* ---- selftest ---- */

/* selftest --all: the suite on every GPU in turn, each in a session of its
 * own; a JSON array of the suites' objects, by index. */
static int selftest_every_gpu(Ctl *ctl, const CtlSelftestOptions *o) {
        kfdb_gpu gpus[16];
        size_t n = 0;
        int r, worst = 0;

        r = ctl_connect(ctl);
        if (r < 0)
                return r;
        r = kfdb_gpus_get(ctl->session, gpus, 16, &n);
        if (r < 0)
                return ctl_fail(ctl, r, "Status failed");
        ctl->session = kfdb_session_free(ctl->session);
        if (o->json)
                printf("[");
        for (size_t i = 0; i < n && i < 16; i++) {
                if (o->json && i > 0)
                        printf(",");
                else if (!o->json)
                        printf("%sGPU %" PRIu32 ": %s\n", i ? "\n" : "", gpus[i].index, gpus[i].node);
                fflush(stdout);
                ctl->gpu_wanted = true;
                ctl->gpu = gpus[i].index;
                r = ctl_connect(ctl);
                if (r >= 0)
                        r = ctl_selftest(ctl->session, PROG " selftest", o);
                ctl->session = kfdb_session_free(ctl->session);
                if (r < 0 && (worst == 0 || r != -EIO))
                        worst = r;
        }
        if (o->json)
                printf("]\n");
        return worst;
}

static int verb_selftest(Ctl *ctl, int argc, char **argv) {
        enum { ARG_STRICT = 0x100, ARG_TIMEOUT_WAIT, ARG_GPU, ARG_ALL };
        static const struct option options[] = {
                { "strict", no_argument, NULL, ARG_STRICT },
                { "timeout-wait", required_argument, NULL, ARG_TIMEOUT_WAIT },
                { "gpu", required_argument, NULL, ARG_GPU },
                { "all", no_argument, NULL, ARG_ALL },
                {}
        };
        CtlSelftestOptions o = { .json = ctl->json, .timeout_wait_ms = CTL_SELFTEST_DEFAULT_TIMEOUT_WAIT_MS };
        bool all = false;
        unsigned long v;
        char *end;
        int c, r;

        optind = 0;
        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                switch (c) {
                case ARG_STRICT:
                        o.strict = true;
                        break;
                case ARG_TIMEOUT_WAIT:
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (errno != 0 || end == optarg || *end != '\0' || v < 1 || v > 60000) {
                                fprintf(stderr, PROG " selftest: --timeout-wait must be 1..60000 milliseconds, "
                                                "got '%s'\n", optarg);
                                return CTL_EXIT_USAGE;
                        }
                        o.timeout_wait_ms = (uint32_t) v;
                        break;
                case ARG_GPU:
                        errno = 0;
                        v = strtoul(optarg, &end, 10);
                        if (errno != 0 || end == optarg || *end != '\0' || optarg[0] == '-' || v > UINT32_MAX) {
                                fprintf(stderr, PROG " selftest: --gpu must be a GPU index (kfdbrokerctl status), "
                                                "got '%s'\n", optarg);
                                return CTL_EXIT_USAGE;
                        }
                        ctl->gpu_wanted = true;
                        ctl->gpu = (uint32_t) v;
                        break;
                case ARG_ALL:
                        all = true;
                        break;
                default:
                        return CTL_EXIT_USAGE;
                }
        }
        if (optind < argc) {
                fprintf(stderr, PROG " selftest: unexpected argument '%s'\n", argv[optind]);
                return CTL_EXIT_USAGE;
        }
        if (all && ctl->gpu_wanted) {
                fprintf(stderr, PROG " selftest: --all and --gpu cannot be combined\n");
                return CTL_EXIT_USAGE;
        }
        if (all)
                return selftest_every_gpu(ctl, &o);
        r = ctl_connect(ctl);
        return r < 0 ? r : ctl_selftest(ctl->session, PROG " selftest", &o);
}

/* ---- cdi ---- */

static int verb_cdi(Ctl *ctl, int argc, char **argv) {
        return ctl_cdi(PROG, ctl_socket_path(ctl), argc, argv);
}

/* ---- Management verbs: D-Bus, or the socket given --socket ---- */

/* For a verb that exists only on the bus, given --socket: say so plainly. */
static int bus_only(const Ctl *ctl, const char *verb, const char *why) {
        if (!ctl->socket_path)
                return 0;
        fprintf(stderr,
                PROG " %s: %s, so it needs kfdbrokerd's D-Bus API (kfdbrokerd --bus=system) and takes no --socket; "
                     "over the socket: status, sessions, accounting, limits ID, terminate ID\n",
                verb, why);
        return CTL_EXIT_USAGE;
}

static int verb_sessions(Ctl *ctl, int argc, char **argv) {
        int r = no_arguments("sessions", argc, argv);

        if (r < 0 || !ctl->socket_path)
                return r < 0 ? r : ctl_bus_sessions(PROG, ctl->json);
        r = ctl_connect(ctl);
        return r < 0 ? r : ctl_socket_sessions(ctl->session, PROG, ctl->json);
}

static int verb_accounting(Ctl *ctl, int argc, char **argv) {
        int r = no_arguments("accounting", argc, argv);

        if (r < 0 || !ctl->socket_path)
                return r < 0 ? r : ctl_bus_accounting(PROG, ctl->json);
        r = ctl_connect(ctl);
        return r < 0 ? r : ctl_socket_accounting(ctl->session, PROG, ctl->json);
}

static int verb_metrics(Ctl *ctl, int argc, char **argv) {
        int r = no_arguments("metrics", argc, argv);

        if (r >= 0)
                r = bus_only(ctl, "metrics", "the metrics cover every user's sessions");
        return r != 0 ? r : ctl_bus_metrics(PROG);
}

static int verb_reload(Ctl *ctl, int argc, char **argv) {
        int r = no_arguments("reload", argc, argv);

        if (r >= 0)
                r = bus_only(ctl, "reload", "reloading the policy is for root or org.kfdbroker.manage (polkit)");
        return r != 0 ? r : ctl_bus_reload(PROG);
}

/*
 * terminate [--bus] ID [REASON]: over the socket by default (the caller's
 * own uid's sessions, root any; works without D-Bus); --bus calls
 * TerminateSession on the bus, where polkit's org.kfdbroker.manage may
 * allow more.
 */
static int verb_terminate(Ctl *ctl, int argc, char **argv) {
        const char *reason = "";
        bool bus = false;
        uint64_t id;
        char *end;
        int i = 1, r;

        if (i < argc && strcmp(argv[i], "--bus") == 0) {
                bus = true;
                i++;
        }
        if (i >= argc || argc - i > 2) {
                fprintf(stderr, PROG " terminate: expected a session ID and an optional REASON\n");
                return CTL_EXIT_USAGE;
        }
        errno = 0;
        id = strtoull(argv[i], &end, 10);
        if (errno != 0 || end == argv[i] || *end || argv[i][0] == '-' || id == 0) {
                fprintf(stderr, PROG " terminate: '%s' is not a session id (a positive number, as 'sessions' lists)\n",
                        argv[i]);
                return CTL_EXIT_USAGE;
        }
        if (i + 1 < argc)
                reason = argv[i + 1];
        if (strlen(reason) > 255) {
                fprintf(stderr, PROG " terminate: the reason is %zu bytes, at most 255\n", strlen(reason));
                return CTL_EXIT_USAGE;
        }
        if (bus)
                return ctl_bus_terminate(PROG, id, reason);
        r = ctl_connect(ctl);
        if (r < 0)
                return r;
        r = kfdb_session_terminate(ctl->session, id, reason);
        if (r < 0)
                return ctl_fail(ctl, r, "TerminateSession failed");
        return 0;
}

static int verb_top(Ctl *ctl, int argc, char **argv) {
        int r = bus_only(ctl, "top", "it samples GetAccounting");
        return r != 0 ? r : ctl_top(PROG, ctl->json, argc, argv);
}

/* limits ID over the socket shows; setting needs the bus (root or org.kfdbroker.manage). */
static int verb_limits(Ctl *ctl, int argc, char **argv) {
        uint64_t id;
        char *end;
        int r;

        if (!ctl->socket_path)
                return ctl_limits(PROG, ctl->json, argc, argv);
        if (argc > 2)
                return bus_only(ctl, "limits", "setting limits is for root or org.kfdbroker.manage (polkit)");
        if (argc < 2) {
                fprintf(stderr, PROG " limits: missing session id: " PROG " limits ID [KEY=VALUE...]\n");
                return CTL_EXIT_USAGE;
        }
        errno = 0;
        id = strtoull(argv[1], &end, 10);
        if (errno != 0 || end == argv[1] || *end || argv[1][0] == '-' || id == 0) {
                fprintf(stderr, PROG " limits: '%s' is not a session id (a positive number, as 'sessions' lists)\n",
                        argv[1]);
                return CTL_EXIT_USAGE;
        }
        r = ctl_connect(ctl);
        return r < 0 ? r : ctl_socket_limits(ctl->session, PROG, ctl->json, id);
}

/* ---- policy (no daemon) ---- */

static int verb_policy(Ctl *ctl, int argc, char **argv) {
        int r = ctl_policy(PROG, argc, argv);

        return r == -EINVAL ? CTL_EXIT_USAGE : r;
}

/* ---- main ---- */

static const Verb verbs[] = {
        { "status", "", "Show the daemon's version, device, sessions, jobs and memory", verb_status },
        { "device", "", "Show the GPU the daemon serves", verb_device },
        { "demo", "[--size=BYTES] [--vram] [--elements=N]",
          "Fill a 64 MiB buffer on the GPU, copy it to another, check every byte; run saxpy over 16 M floats",
          verb_demo },
        { "kernels", "FILE", "List the kernels of a GPU code object, as the daemon loads it", verb_kernels },
        { "selftest", "[--strict] [--timeout-wait=MS] [--gpu=N | --all]",
          "Check copy, fill, events, a dispatch, a fault and a timeout on the daemon's GPU (N, or each)",
          verb_selftest },
        { "cdi", "[--output=FILE] [--rocm-dir=DIR]",
          "Print a CDI spec giving containers the socket (kfdbroker.org/gpu=all; =rocm adds kfdbroker-run)",
          verb_cdi },
        { "sessions", "", "List the client sessions (D-Bus: every one you may see; --socket: your own)",
          verb_sessions },
        { "accounting", "", "GPU use per session and per identity (D-Bus; --socket: your sessions)",
          verb_accounting },
        { "metrics", "", "Print the daemon's OpenMetrics text (D-Bus)", verb_metrics },
        { "top", "[-b] [-d SEC] [-n N]", "Live view of every session's GPU use (D-Bus)", verb_top },
        { "limits", "ID [KEY=VALUE...]", "Show or set a session's limits (D-Bus; --socket: show yours)",
          verb_limits },
        { "reload", "", "Reload the policy files; fail with the reason if they are broken (D-Bus)", verb_reload },
        { "policy", "check [DIR...]",
          "Check policy directories as a reload would (default: the daemon's), no daemon needed", verb_policy },
        { "terminate", "[--bus] ID [REASON]", "End a session of this user (root: any); --bus: over D-Bus",
          verb_terminate },
};

static void help(void) {
        printf("Usage: " PROG " [OPTIONS] COMMAND [ARGS]\n\n"
               "Talk to kfdbrokerd, the AMD GPU sharing daemon.\n\n"
               "Commands:\n");
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
                char head[64];

                snprintf(head, sizeof(head), "%s %s", verbs[i].name, verbs[i].args);
                printf("  %-32s %s\n", head, verbs[i].help);
        }
        printf("\nOptions:\n"
               "  --socket=PATH  socket of kfdbrokerd (default: $KFDBROKER_SOCKET, else %s);\n"
               "                 D-Bus verbs use the system bus ($DBUS_SYSTEM_BUS_ADDRESS); given\n"
               "                 --socket, sessions, accounting and limits ID ask the socket\n"
               "                 (your own sessions; root: all), for a daemon run without D-Bus\n"
               "  --json         print JSON instead of text\n"
               "  --no-ask-password  do not ask for a password when polkit wants one\n"
               "                 (D-Bus verbs; otherwise pkttyagent asks on a terminal)\n"
               "  -h --help      show this help\n"
               "  --version      show the version\n"
               "--socket, --json and --no-ask-password may also follow the command.\n",
               kfdb_default_socket_path());
}

/*
 * Takes the global options out of a verb's arguments (argv[0] is the verb),
 * so "kfdbrokerctl accounting --json" means what "--json accounting" does.
 * Stops at "--". Returns 0, or -EINVAL when --socket lacks its value.
 */
static int take_global_options(Ctl *ctl, int *argc, char **argv) {
        int out = 1;

        for (int i = 1; i < *argc; i++) {
                const char *a = argv[i];

                if (strcmp(a, "--") == 0) {
                        while (i < *argc)
                                argv[out++] = argv[i++];
                        break;
                }
                if (strcmp(a, "--json") == 0)
                        ctl->json = true;
                else if (strcmp(a, "--no-ask-password") == 0)
                        ctl->no_ask_password = true;
                else if (strncmp(a, "--socket=", 9) == 0)
                        ctl->socket_path = a + 9;
                else if (strcmp(a, "--socket") == 0) {
                        if (i + 1 >= *argc) {
                                fprintf(stderr, PROG ": option '--socket' requires an argument\n");
                                return -EINVAL;
                        }
                        ctl->socket_path = argv[++i];
                } else
                        argv[out++] = argv[i];
        }
        *argc = out;
        argv[out] = NULL;
        return 0;
}

int main(int argc, char **argv) {
        enum { ARG_VERSION = 0x100, ARG_SOCKET, ARG_JSON, ARG_NO_ASK_PASSWORD };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "socket", required_argument, NULL, ARG_SOCKET },
                { "json", no_argument, NULL, ARG_JSON },
                { "no-ask-password", no_argument, NULL, ARG_NO_ASK_PASSWORD },
                {}
        };
        Ctl ctl = {};
        const Verb *verb = NULL;
        int c, r;

        /* '+': stop at the verb, whose options are its own. */
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return EXIT_SUCCESS;
                case ARG_VERSION:
                        printf(PROG " %s\n", KFDBROKER_VERSION);
                        return EXIT_SUCCESS;
                case ARG_SOCKET:
                        ctl.socket_path = optarg;
                        break;
                case ARG_JSON:
                        ctl.json = true;
                        break;
                case ARG_NO_ASK_PASSWORD:
                        ctl.no_ask_password = true;
                        break;
                default:
                        fprintf(stderr, "Try '" PROG " --help'.\n");
                        return EXIT_FAILURE;
                }
        }
        if (optind >= argc) {
                fprintf(stderr, PROG ": missing command. Try '" PROG " --help'.\n");
                return EXIT_FAILURE;
        }
        for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
                if (strcmp(argv[optind], verbs[i].name) == 0)
                        verb = &verbs[i];
        if (!verb) {
                fprintf(stderr, PROG ": unknown command '%s'. Try '" PROG " --help'.\n", argv[optind]);
                return EXIT_FAILURE;
        }

        argc -= optind;
        argv += optind;
        if (take_global_options(&ctl, &argc, argv) < 0)
                return CTL_EXIT_USAGE;
        ctl_bus_set_ask_password(!ctl.no_ask_password);
        r = verb->run(&ctl, argc, argv);
        ctl_polkit_agent_close();
        kfdb_session_free(ctl.session);
        return r == CTL_EXIT_USAGE ? CTL_EXIT_USAGE : r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
