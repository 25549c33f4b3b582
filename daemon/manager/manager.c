/* SPDX-License-Identifier: MIT */
/* See manager.h. */
#include "manager/manager.h"
#include "manager/worker-user.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "endpoints/bus.h"
#include "config.h"
#include "sessions/job.h"
#include "kfd/kfd-isolation.h"
#include "kfd/kfd-real.h"
#include "kfd/kfd-uapi.h"
#include "endpoints/metrics.h"
#include "endpoints/listener.h"
#include "scheduler/scheduler.h"
#include "sim/sim-remote.h"
#include "sessions/client-event.h"
#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log.h"
#include "util/macro.h"

/* How long a shutdown waits for the GPU to retire what it has. */
#define SHUTDOWN_DRAIN_USEC (10ull * 1000 * 1000)


/* ---- the layers below, wired together ---- */

/* The bus cannot be served (the name was refused): a start-up failure, so
 * the daemon exits with one and Restart=on-failure applies. */
static void on_bus_shutdown(void *userdata, int error) {
        Manager *m = userdata;

        if (m->exit_error == 0)
                m->exit_error = error < 0 ? error : -EIO;
        manager_begin_shutdown(m);
}

static void flush_sessions(Manager *m);
static void maybe_finish_shutdown(Manager *m);

static void on_job_finished(SchedJob *sj, int error, const char *message, uint64_t busy_ns, void *userdata) {
        session_job_finished(job_from_sched(sj), error, message, busy_ns);
}

static void on_event_signal(SchedEvent *e, bool consumed, void *userdata) {
        ManagerGpu *g = userdata;
        Manager *m = g->manager;

        client_event_signal(client_event_from_sched(e), consumed);
        /* A wait of the same session on another GPU may be held by it
         * (scheduler.c job_prepare()); this GPU's scheduler runs anyway. */
        for (unsigned i = 0; i < m->n_gpus; i++)
                if (&m->gpus[i] != g)
                        scheduler_run(m->gpus[i].scheduler);
}

static void on_event_reset(SchedEvent *e, void *userdata) {
        client_event_reset(client_event_from_sched(e));
}

static void on_settled(void *userdata) {
        ManagerGpu *g = userdata;
        Manager *m = g->manager;

        flush_sessions(m);
        maybe_finish_shutdown(m);
}

static SchedulerCallbacks scheduler_callbacks(ManagerGpu *g) {
        return (SchedulerCallbacks) { .userdata = g, .job_finished = on_job_finished, .event_signal = on_event_signal,
                                      .event_reset = on_event_reset, .settled = on_settled };
}

static void on_completion(Context *ctx, const GpuCompletion *comp, void *userdata) {
        ManagerGpu *g = userdata;

        scheduler_on_completion(g->scheduler, ctx, comp);
}

static void on_context_losing(Context *ctx, const char *reason, void *userdata) {
        ManagerGpu *g = userdata;

        session_set_context_lost(&g->manager->set, ctx, reason);
}


static void on_context_gone(Context *ctx, bool lost, const char *reason, void *userdata) {
        ManagerGpu *g = userdata;

        scheduler_on_context_gone(g->scheduler, ctx, lost, reason);
        /* The kernel keeps a lost KFD context evicted until it is closed
         * (kfd-facts §7.1): a GPU whose device context is a KFD context of
         * its own comes back with a new one; where it is the daemon's own
         * process, a new daemon gets a new one. */
        if (lost && context_is_device(ctx) && !manager_gpu_recover(g, reason))
                manager_device_lost(g->manager, context_get_id(ctx), reason);
}

static void on_processed(void *userdata) {
        ManagerGpu *g = userdata;

        scheduler_run(g->scheduler);
}

/* A worker process's connection to the simulated GPU, which lives here. */
static int connect_sim_worker(void *userdata, int *ret_fd) {
        Manager *m = userdata;
        int sv[2], r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        r = sim_remote_serve(m->sim, sv[0]);
        if (r < 0) {
                close(sv[1]);
                return r;
        }
        *ret_fd = sv[1];
        return 0;
}

/*
 * Who a root daemon's workers run as: --worker-user=, else the service's user
 * (kfdbroker), else a uid and gid that no account has and no process uses,
 * from systemd's dynamic range (worker-user.h) — never nobody, whom clients
 * may be and who could then signal the workers. With the groups that own GPU
 * device nodes.
 */
static int worker_identity(const ManagerOptions *o, ContextPoolOptions *po) {
        static const char *const groups[] = { "render", "video" };
        const char *name = o->worker_user ? o->worker_user : "kfdbroker";
        struct passwd *pw;

        if (geteuid() != 0) {
                po->worker_uid = (uint32_t) getuid();
                po->worker_gid = (uint32_t) getgid();
                return 0;
        }
        pw = getpwnam(name);
        if (pw) {
                po->worker_uid = (uint32_t) pw->pw_uid;
                po->worker_gid = (uint32_t) pw->pw_gid;
        } else if (o->worker_user)
                return log_error_errno(ENOENT, "--worker-user: no user '%s'", o->worker_user);
        else {
                uid_t id;
                int r = worker_user_pick_dynamic("/proc", &id);

                if (r < 0)
                        return log_error_errno(r, "No user kfdbroker, and no free uid in %u..%u for the worker "
                                                  "processes (give one with --worker-user=): %m",
                                               WORKER_DYNAMIC_UID_MIN, WORKER_DYNAMIC_UID_MAX);
                po->worker_uid = po->worker_gid = (uint32_t) id;
                log_info("No user kfdbroker: worker processes run as uid and gid %u, which no account has", id);
        }
        for (size_t i = 0; i < ELEMENTSOF(groups); i++) {
                struct group *g = getgrnam(groups[i]);
                if (g && po->n_worker_groups < ELEMENTSOF(po->worker_groups))
                        po->worker_groups[po->n_worker_groups++] = (uint32_t) g->gr_gid;
        }
        return 0;
}

/* Reads the topology behind ops and picks the GPUs --gpu= names, else every
 * discrete one (kfd_gpu_choose_set()), in served order. A bad value stops
 * the daemon, naming it. */
static int choose_gpus(Manager *m, const KfdOps *ops, const char *spec, const char *fallback) {
        _cleanup_free_ KfdTopology *t = calloc(1, sizeof *t);
        KfdGpuChoice choices[SESSION_MAX_GPUS];
        char err[700];
        unsigned n = 0;
        int r;

        if (!t)
                return log_error_errno(ENOMEM, "Out of memory");
        r = kfd_topology_read(ops->sysfs_root, t);
        if (r < 0)
                return log_error_errno(r, "Failed to read the KFD topology under %s: %m", ops->sysfs_root);
        r = kfd_gpu_choose_set(t, spec, choices, SESSION_MAX_GPUS, &n, err, sizeof err);
        if (r < 0)
                return log_error_errno(r, "--gpu=%s: %s", spec ? spec : "auto", err);
        for (unsigned i = 0; i < n; i++) {
                ManagerGpu *g = &m->gpus[i];

                *g = (ManagerGpu) { .manager = m, .index = i, .choice = choices[i],
                                    .gpu_id = t->nodes[choices[i].index].gpu_id };
                /* kfdbrokerctl status shows this reason next to the GPU. */
                if (fallback[0]) {
                        size_t k = strlen(g->choice.reason);
                        snprintf(g->choice.reason + k, sizeof(g->choice.reason) - k, "; simulated GPU (fallback: %s)",
                                 fallback);
                }
                log_info("GPU %u: %s: %s", i, g->choice.description, g->choice.reason);
        }
        m->n_gpus = n;
        return 0;
}

/*
 * Brings up every chosen GPU's contexts on ops. Each GPU's device context
 * is a secondary KFD context of its own (GPU_CONTEXT_SECONDARY, KFD 1.19), a
 * fault domain apart that can be made again (manager-recover.c); on an older
 * kernel the first GPU's is this process's KFD context and every other
 * one's the same KFD process on that GPU (share_process: a KFD process has
 * one event page, kfd_event_page_set), where a fault of either device
 * context evicts both. A GPU that cannot be brought up is not
 * served, nor those after it, with a warning naming why; the first GPU's
 * failure is the caller's (err).
 */
static ContextPoolCallbacks pool_callbacks(ManagerGpu *g) {
        return (ContextPoolCallbacks) { .userdata = g, .completion = on_completion, .losing = on_context_losing,
                                        .gone = on_context_gone, .processed = on_processed };
}

static int open_pools(Manager *m, const KfdOps *ops, const ContextPoolOptions *po, char *err, size_t errlen) {
        /* Each GPU's device context holds every client buffer of that GPU:
         * a window of the region each (4 TiB / the GPUs), not a client's
         * 64 GiB slot (gpu-va-window.c). */
        int r = m->n_gpus > 0 ? gpu_va_set_device_windows(m->n_gpus) : 0;
        if (r < 0) {
                snprintf(err, errlen, "cannot lay out the address windows of %u GPUs: %s", m->n_gpus, strerror(-r));
                return r;
        }
        for (unsigned i = 0; i < m->n_gpus; i++) {
                ManagerGpu *g = &m->gpus[i];
                ContextPoolCallbacks cb = pool_callbacks(g);
                ContextPoolOptions o = *po;
                char why[400] = "";

                o.device.gpu_id = g->gpu_id;
                o.device.flags |= GPU_CONTEXT_DEVICE;
                o.device.device_window = i;
                if (i > 0 && m->gpus[0].info->kfd_minor >= KFD_MINOR_CREATE_PROCESS)
                        o.device.flags |= GPU_CONTEXT_SECONDARY;
                else if (i > 0)
                        o.device.share_process = context_pool_device_gpu(m->gpus[0].contexts);
                g->ops = ops;
                g->pool_callbacks = cb;
                r = -EOPNOTSUPP;
                if (i == 0) {
                        /* Where the kernel has secondary contexts, the first
                         * GPU's device context is one too, so that a lost one
                         * can be made again in the running daemon
                         * (manager-recover.c); an older kernel says
                         * EOPNOTSUPP, and it is the daemon's own KFD process. */
                        ContextPoolOptions sec = o;
                        sec.device.flags |= GPU_CONTEXT_SECONDARY;
                        g->pool_options = sec;
                        r = context_pool_new(m->event, ops, &sec, &cb, &g->contexts, err, errlen);
                }
                if (r == -EOPNOTSUPP) {
                        g->pool_options = o;
                        r = context_pool_new(m->event, ops, &o, &cb, &g->contexts, i == 0 ? err : why,
                                             i == 0 ? errlen : sizeof why);
                }
                if (r < 0 && i == 0)
                        return r;
                if (r < 0) {
                        log_warning_errno(r, "GPU %u (%s) is not served: %s%s%m. Serving %u GPU%s.", i,
                                          g->choice.description, why, why[0] ? ": " : "", i, i == 1 ? "" : "s");
                        m->n_gpus = i;
                        break;
                }
                g->info = context_pool_info(g->contexts);
                if (i > 0 && o.device.share_process)
                        log_notice("GPU %u: its device context shares the daemon's KFD process with GPU 0's (KFD "
                                   "%u.%u has no secondary contexts, 1.%u): a GPU fault in either evicts both",
                                   i, g->info->kfd_major, g->info->kfd_minor, KFD_MINOR_CREATE_PROCESS);
        }
        return 0;
}

int manager_open_device(Manager *m, const ManagerOptions *o) {
        ContextPoolOptions po = {
                .device = { .n_sdma_queues = o->sdma_queues, .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT,
                            /* compute queues come per priority class when a
                             * shared-mode session first dispatches */
                            .flags = GPU_CONTEXT_NO_COMPUTE,
                            /* clients sleeping on their fence page are woken from its waiter */
                            .on_events = fence_watch_on_events,
                            .on_events_userdata = &m->set.fence_watch },
                .max_contexts = o->max_contexts,
                .idle_timeout_ns = o->context_idle_ns,
                .choice = o->contexts,
        };
        DeviceChoice choice = o->device;
        char reason[256] = "", err[400] = "", fallback[300] = "";
        int probe = 0, r;

        r = worker_identity(o, &po);
        if (r < 0)
                return r;

        /* Before any thread maps memory: the region every GPU address a client
         * sees comes from, at the same place whatever ASLR did (gpu/gpu-va-window.c). */
        r = gpu_va_region_reserve();
        if (r == -EEXIST)
                return log_error_errno(r, "Failed to reserve the client address window 0x%llx-0x%llx: "
                                          "something is mapped there already",
                                       GPU_VA_REGION_BASE, GPU_VA_REGION_END);
        if (r < 0)
                return log_error_errno(r, "Failed to reserve the client address window 0x%llx-0x%llx: %m",
                                       GPU_VA_REGION_BASE, GPU_VA_REGION_END);

        if (choice != DEVICE_SIM)
                probe = kfd_probe_real(reason, sizeof(reason));
        if (choice == DEVICE_AUTO) {
                if (probe < 0) {
                        /* A warning: a host whose GPU went missing must not
                         * serve a software GPU quietly. Said again by status. */
                        log_warning("--device=auto: %s; using the simulated GPU: clients' jobs run in software "
                                    "(--device=kfd never falls back)", reason);
                        snprintf(fallback, sizeof(fallback), "%s",
                                 probe == -ENOENT ? "no /dev/kfd" : probe == -ENODEV ? "KFD lists no GPU" : reason);
                        choice = DEVICE_SIM;
                } else {
                        r = choose_gpus(m, &kfd_ops_real, o->gpu, fallback);
                        if (r < 0)
                                return r;
                        r = open_pools(m, &kfd_ops_real, &po, err, sizeof err);
                        if (r >= 0) {
                                log_info("--device=auto: using /dev/kfd");
                                goto opened;
                        }
                        if (r == -EOPNOTSUPP && err[0])
                                return log_error_errno(r, "%s", err);
                        log_warning_errno(r, "--device=auto: /dev/kfd exists but cannot be used (%m), using the simulated GPU");
                        snprintf(fallback, sizeof(fallback), "/dev/kfd cannot be used: %s", strerror(-r));
                        choice = DEVICE_SIM;
                }
        }

        if (choice == DEVICE_KFD) {
                /* No AMD GPU here: the service stays up and says so to
                 * systemd (STATUS=), to every client and D-Bus caller, rather
                 * than fail, be restarted and take its socket unit down with
                 * it. A GPU that exists but cannot be used stays an error. */
                if (probe == -ENOENT || probe == -ENODEV) {
                        snprintf(m->no_device, sizeof(m->no_device),
                                 "no AMD GPU: %s — see kfdbrokerd(8) to run the simulated GPU",
                                 probe == -ENOENT ? "/dev/kfd missing" : "KFD lists no GPU");
                        log_warning("--device=kfd: %s: serving no GPU; every client is told: %s", reason,
                                    m->no_device);
                        return 0;
                }
                if (probe < 0)
                        return log_error_errno(probe, "--device=kfd: %s", reason);
                r = choose_gpus(m, &kfd_ops_real, o->gpu, fallback);
                if (r < 0)
                        return r;
                r = open_pools(m, &kfd_ops_real, &po, err, sizeof err);
                if (r == -EOPNOTSUPP && err[0])
                        return log_error_errno(r, "%s", err);
                if (r < 0)
                        return log_error_errno(r, "--device=kfd: cannot use /dev/kfd: %m%s",
                                               r == -ENOENT ? " (no AMD GPU with KFD on this machine)" : "");
        } else {
                /* The device is "where it is served": a daemon restarted on
                 * the same socket finds its predecessor's buffers its own. */
                SimOptions so = { .kfd_minor = o->sim_kfd_minor,
                                  .identity = o->listen_path ? o->listen_path : KFDBROKER_DEFAULT_SOCKET,
                                  .igpu_first = o->sim_igpu_first,
                                  .n_gpus = o->sim_gpus,
                                  .fault_order = o->sim_fault_order };
                r = sim_device_new(&so, &m->sim);
                if (r < 0)
                        return log_error_errno(r, "Failed to create the simulated GPU: %m");
                r = choose_gpus(m, sim_device_get_ops(m->sim), o->gpu, fallback);
                if (r < 0)
                        return r;
                po.worker_device = connect_sim_worker;
                po.worker_userdata = m;
                r = open_pools(m, sim_device_get_ops(m->sim), &po, err, sizeof err);
                if (r == -EOPNOTSUPP && err[0])
                        return log_error_errno(r, "%s", err);
                if (r < 0)
                        return log_error_errno(r, "Failed to bring up the simulated GPU on %s: %m",
                                               m->gpus[0].choice.description);
        }
opened:
        for (unsigned i = 0; i < m->n_gpus; i++) {
                const GpuDeviceInfo *info = m->gpus[i].info;

                log_info("Device %u: %s %s (%sgpu_id 0x%x, %u CUs, KFD %u.%u, %u SDMA queues)", i, info->backend,
                         info->gfx_name, m->sim ? "simulated GPU, " : "", info->gpu_id, info->cu_count,
                         info->kfd_major, info->kfd_minor, info->n_queues);
                if (info->render_node_buffers)
                        log_info("Buffers: KFD %u.%u has no dma-buf export (1.12): allocated on renderD%u (GEM) and "
                                 "imported into KFD",
                                 info->kfd_major, info->kfd_minor, info->drm_render_minor);
                if (!info->hdp_flush)
                        log_warning("HDP: KFD maps no HDP flush page for GPU %u: what clients write into VRAM "
                                    "buffers may reach the GPU late (use GTT buffers)", i);
                /* What the kernel leaves between processes on the CUs (kfd-isolation.h). */
                if (choice == DEVICE_KFD) {
                        KfdIsolation iso = kfd_isolation_read("/sys/class/drm", info->drm_render_minor);
                        if (iso == KFD_ISOLATION_CLEANER)
                                log_info("GPU %u process isolation: %s", i, kfd_isolation_describe(iso));
                        else
                                log_notice("GPU %u process isolation: %s", i, kfd_isolation_describe(iso));
                }
        }
        /* Said once: what isolation the clients get here (the same on every GPU). */
        if (context_pool_mechanism(m->gpus[0].contexts) == CONTEXT_MECHANISM_NONE)
                log_warning("GPU contexts: %s", context_pool_mechanism_reason(m->gpus[0].contexts));
        else
                log_info("GPU contexts: %s", context_pool_mechanism_reason(m->gpus[0].contexts));
        return 0;
}

static void flush_sessions(Manager *m) {
        session_set_flush(&m->set);
}

/* Jobs on the GPUs now; none without a GPU. */
static unsigned jobs_in_flight(Manager *m) {
        unsigned n = 0;

        for (unsigned i = 0; i < m->n_gpus; i++)
                n += m->gpus[i].scheduler ? scheduler_in_flight(m->gpus[i].scheduler) : 0;
        return n;
}

static void maybe_finish_shutdown(Manager *m) {
        if (m->shutting_down && jobs_in_flight(m) == 0)
                (void) sd_event_exit(m->event, 0);
}

static int on_exit_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        LogFields f = {};

        log_fields_add(&f, "KFDBROKER_JOBS_IN_FLIGHT=%u", jobs_in_flight(m));
        log_struct(LOG_WARNING, KFDBROKER_MESSAGE_SHUTDOWN_TIMEOUT, &f,
                   "The GPU did not retire %u jobs within %llu s, exiting anyway", jobs_in_flight(m),
                   SHUTDOWN_DRAIN_USEC / 1000000);
        return sd_event_exit(m->event, 0);
}

void manager_begin_shutdown(Manager *m) {
        LogFields f = {};
        int r;

        if (m->shutting_down)
                return;
        m->shutting_down = true;
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Shutting down: retiring jobs on the GPU");
        log_fields_add(&f, "KFDBROKER_JOBS_IN_FLIGHT=%u", jobs_in_flight(m));
        log_fields_add(&f, "KFDBROKER_SESSIONS=%u", m->set.n_sessions);
        log_struct(LOG_INFO, KFDBROKER_MESSAGE_SHUTTING_DOWN, &f,
                   "Shutting down: no new connections, retiring %u jobs on the GPU (%u sessions end)",
                   jobs_in_flight(m), m->set.n_sessions);
        m->set.shutting_down = true;
        m->listener = listener_free(m->listener);
        while (m->set.sessions)
                session_end(m->set.sessions, ESHUTDOWN, "daemon shutting down", true);
        r = sd_event_add_time_relative(m->event, &m->exit_timer, CLOCK_MONOTONIC,
                                       SHUTDOWN_DRAIN_USEC, 0, on_exit_timer, m);
        if (r < 0)
                log_warning_errno(r, "Failed to arm the shutdown timer: %m");
        maybe_finish_shutdown(m);
}

/* Session hooks, forwarded to D-Bus signals when a bus is connected. */
static void on_session_opened(Session *s, void *userdata) {
        Manager *m = userdata;

        if (m->bus)
                bus_emit_session_opened(m->bus, s);
}

static void on_session_closed(Session *s, const char *reason, void *userdata) {
        Manager *m = userdata;

        if (m->bus)
                bus_emit_session_closed(m->bus, s, reason);
}

static void on_job_failed_told(Session *s, uint64_t fence, int error, const char *message, void *userdata) {
        Manager *m = userdata;

        if (m->bus)
                bus_emit_job_failed(m->bus, s, fence, error, message);
}

/* --device=sim: SIGUSR2 resets the simulated GPU (VRAM lost), to test
 * recovery as a hang on real hardware would need it (sim.h); sent with
 * sigqueue() and a value N (1 to the GPUs served), only GPU N - 1. */
static int on_sigusr2(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        int n = si->ssi_code == SI_QUEUE ? si->ssi_int : 0;

        if (n <= 0) {
                log_warning("SIGUSR2: resetting the simulated GPU (VRAM contents are lost)");
                sim_device_reset(m->sim, true);
                return 0;
        }
        if ((unsigned) n > m->n_gpus) {
                log_warning("SIGUSR2 with value %d: no GPU %d (this daemon serves %u; a value N resets GPU N - 1), "
                            "ignored", n, n - 1, m->n_gpus);
                return 0;
        }
        log_warning("SIGUSR2: resetting simulated GPU %d (its VRAM contents are lost)", n - 1);
        (void) sim_device_reset_gpu(m->sim, m->gpus[n - 1].gpu_id, true);
        return 0;
}

static int on_sighup(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;
        char err[512];

        (void) sd_notify(false, "RELOADING=1");
        (void) session_set_reload_policy(&m->set, "SIGHUP", err, sizeof(err)); /* logged there */
        (void) sd_notify(false, "READY=1");
        return 0;
}

/*
 * Creates a temporary file next to path, named path.<16 random hex>.tmp, with
 * O_EXCL: the metrics file's directory may be writable by others (a
 * textfile-collector directory under /tmp, say), and whatever they put at a
 * name the daemon uses — a file they can read, a FIFO whose open() would
 * block the event loop, a symlink — must never be opened. With O_EXCL and
 * O_NOFOLLOW an existing name of any kind fails with EEXIST (open(2)), and a
 * fresh random name is tried; O_NONBLOCK is belt and braces, as a regular
 * file we created ignores it. Returns the fd, *ret_path the name, or -errno.
 */
static int open_fresh_temp(const char *path, char **ret_path) {
        for (unsigned attempt = 0; attempt < 16; attempt++) {
                _cleanup_free_ char *tmp = NULL;
                uint64_t rnd;
                int fd;

                /* Unpredictable so that no one can place a file there first. */
                if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t) sizeof(rnd))
                        return errno == EAGAIN ? -EAGAIN : -errno;
                if (asprintf(&tmp, "%s.%016" PRIx64 ".tmp", path, rnd) < 0)
                        return -ENOMEM;
                fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                          0600);
                if (fd >= 0) {
                        *ret_path = TAKE_PTR(tmp);
                        return fd;
                }
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

static int write_metrics_file(Manager *m) {
        _cleanup_free_ char *tmp = NULL, *text = NULL;
        FILE *f = NULL;
        int fd, r;

        r = metrics_format(&m->set, METRICS_PROMETHEUS_TEXT, &text);
        if (r < 0)
                return r;
        fd = open_fresh_temp(m->metrics_file, &tmp);
        if (fd < 0)
                return fd;
        /* The mode asked for, not what the umask (0077 in the unit) leaves of it. */
        if (fchmod(fd, m->metrics_file_mode) < 0 || !(f = fdopen(fd, "w"))) {
                r = -errno;
                close(fd);
                (void) unlink(tmp);
                return r;
        }
        fputs(text, f);
        if (fclose(f) != 0 || rename(tmp, m->metrics_file) < 0) {
                r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

static int on_metrics_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        r = write_metrics_file(m);
        if (r < 0)
                log_warning_errno(r, "Failed to write %s: %m", m->metrics_file);
        (void) sd_event_source_set_time_relative(src, m->metrics_interval_ns / 1000);
        (void) sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        return 0;
}

static int on_signal(sd_event_source *src, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        log_info("Received %s", strsignal((int) si->ssi_signo));
        manager_begin_shutdown(m);
        return 0;
}

int manager_new(const ManagerOptions *opts, Manager **ret) {
        Manager *m;
        sigset_t mask;
        int r;

        /* Signals are read through signalfd by sd-event. Block them before any
         * thread exists (the GPU waiter, the simulator's engines), so that
         * every thread inherits the mask and none takes the default action. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGUSR2); /* used with --device=sim only; blocked, so harmless otherwise */
        pthread_sigmask(SIG_BLOCK, &mask, NULL);

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        {
                char err[512];

                r = session_set_init(&m->set, opts->policy_dirs, err, sizeof(err));
                if (r < 0) {
                        log_error_errno(r, "Cannot load the policy: %s", err);
                        goto fail;
                }
        }

        r = sd_event_new(&m->event);
        if (r < 0)
                goto fail;

        r = manager_open_device(m, opts);
        if (r < 0)
                goto fail;
        for (unsigned i = 0; i < m->n_gpus; i++) {
                ManagerGpu *g = &m->gpus[i];

                SchedulerCallbacks scb = scheduler_callbacks(g);

                g->scheduler_callbacks = scb;

                r = scheduler_new(m->event, g->contexts, &scb, &g->scheduler);
                if (r < 0)
                        goto fail;
                m->set.gpus[i] = (SessionGpu) { .index = i, .scheduler = g->scheduler, .contexts = g->contexts,
                                                .info = g->info, .node = g->choice.description,
                                                .node_reason = g->choice.reason };
        }
        m->set.n_gpus = m->n_gpus;
        if (m->n_gpus == 0)
                m->set.no_device = m->no_device; /* manager_open_device() said why */
        m->set.event = m->event;
        m->set.max_connections_per_user = opts->max_connections_per_user;
        m->set.max_connect_rate_per_user = opts->max_connect_rate_per_user;
        if (m->n_gpus > 0) {
                /* BufferMemory= counts per GPU: fitted to the smallest one's VRAM. */
                uint64_t vram = m->gpus[0].info->vram_size;
                for (unsigned i = 1; i < m->n_gpus; i++)
                        vram = MIN(vram, m->gpus[i].info->vram_size);
                session_set_init_memory(&m->set, vram,
                                        gpu_sees_dmabuf_copies(context_pool_device_gpu(m->gpus[0].contexts)));
        }
        m->set.cb = (SessionSetCallbacks) { .userdata = m, .opened = on_session_opened,
                                            .closed = on_session_closed, .job_failed = on_job_failed_told };

        r = sd_event_add_signal(m->event, &m->sigterm_source, SIGTERM, on_signal, m);
        if (r < 0)
                goto fail;
        r = sd_event_add_signal(m->event, &m->sigint_source, SIGINT, on_signal, m);
        if (r < 0)
                goto fail;
        r = sd_event_add_signal(m->event, &m->sighup_source, SIGHUP, on_sighup, m);
        if (r < 0)
                goto fail;
        if (m->sim) {
                r = sd_event_add_signal(m->event, &m->sigusr2_source, SIGUSR2, on_sigusr2, m);
                if (r < 0)
                        goto fail;
        }

        if (opts->metrics_file && m->set.no_device)
                log_notice("No metrics file without a GPU: %s is not written", opts->metrics_file);
        else if (opts->metrics_file) {
                m->metrics_file = strdup(opts->metrics_file);
                m->metrics_interval_ns = opts->metrics_interval_ns ? opts->metrics_interval_ns
                                                                    : 15ull * 1000000000ull;
                m->metrics_file_mode = opts->metrics_file_mode ? opts->metrics_file_mode : 0600;
                if (!m->metrics_file) {
                        r = -ENOMEM;
                        goto fail;
                }
                r = sd_event_add_time_relative(m->event, &m->metrics_timer, CLOCK_MONOTONIC, 0, 0,
                                               on_metrics_timer, m);
                if (r < 0)
                        goto fail;
                (void) sd_event_source_set_description(m->metrics_timer, "metrics-file");
        }

        if (opts->bus != BUS_NONE) {
                r = bus_new(m->event, &m->set, opts->bus,
                            &(BusCallbacks) { .userdata = m, .shutdown = on_bus_shutdown }, &m->bus);
                if (r < 0) {
                        log_error_errno(r, "Failed to connect to the %s bus: %m",
                                        opts->bus == BUS_SYSTEM ? "system" : "session");
                        goto fail;
                }
        }

        r = listener_new(&m->set, opts->listen_path, &m->listener);
        if (r < 0) {
                if (r == -ENOENT && !opts->listen_path)
                        log_error("No socket: not socket-activated and no --listen PATH given");
                else if (r == -EADDRINUSE)
                        log_error("Failed to listen on %s: a daemon is already accepting connections there",
                                  opts->listen_path);
                else
                        log_error_errno(r, "Failed to listen on %s: %m",
                                        opts->listen_path ? opts->listen_path : "the activated socket");
                goto fail;
        }
        /* The fd budgets count what is open now as the daemon's own: the
         * device, the bus and every listening socket (one per GPU beside the
         * main one) with its reserve fd. */
        session_set_init_fds(&m->set, opts->max_fds_per_user, opts->max_fds_per_session);
        *ret = m;
        return 0;
fail:
        manager_free(m);
        return r;
}

/* The loop until it exits; see manager_run(). */
static int run_loop(Manager *m) {
        int r;

        r = sd_event_loop(m->event);
        if (r < 0 && m->device_lost)
                return r; /* said when it happened */
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return m->exit_error; /* said when it happened */
}

int manager_run(Manager *m) {
        if (m->set.no_device) {
                /* Up, so that the socket unit stays up and clients hear why;
                 * `systemctl status kfdbrokerd` shows the line. */
                (void) sd_notifyf(false, "READY=1\nSTATUS=%s", m->set.no_device);
                LogFields f = {};

                log_fields_add(&f, "KFDBROKER_VERSION=%s", KFDBROKER_VERSION);
                log_fields_add(&f, "KFDBROKER_GPUS=0");
                log_struct(LOG_INFO, KFDBROKER_MESSAGE_READY, &f, "kfdbrokerd %s ready, serving no GPU: %s",
                           KFDBROKER_VERSION, m->set.no_device);
                return run_loop(m);
        }
        const GpuDeviceInfo *info = m->gpus[0].info;
        if (m->n_gpus > 1)
                (void) sd_notifyf(false, "READY=1\nSTATUS=Serving %u %sGPUs (%s first, backend %s)", m->n_gpus,
                                  m->sim ? "simulated " : "", info->gfx_name, info->backend);
        else if (m->sim)
                (void) sd_notifyf(false, "READY=1\nSTATUS=Serving on the simulated GPU %s (backend %s)",
                                  info->gfx_name, info->backend);
        else
                (void) sd_notifyf(false, "READY=1\nSTATUS=Serving on %s %s", info->backend, info->gfx_name);
        {
                LogFields f = {};

                log_fields_add(&f, "KFDBROKER_VERSION=%s", KFDBROKER_VERSION);
                log_fields_add(&f, "KFDBROKER_BACKEND=%s", info->backend);
                log_fields_add(&f, "KFDBROKER_GFX=%s", info->gfx_name);
                log_fields_add(&f, "KFDBROKER_GPUS=%u", m->n_gpus);
                log_struct(LOG_INFO, KFDBROKER_MESSAGE_READY, &f, "kfdbrokerd %s ready", KFDBROKER_VERSION);
        }
        return run_loop(m);
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        m->listener = listener_free(m->listener);
        while (m->set.sessions)
                session_end(m->set.sessions, ESHUTDOWN, m->device_lost ? m->device_lost_reason : "daemon exiting",
                            true);
        m->bus = bus_free(m->bus);
        for (unsigned i = 0; i < m->n_gpus; i++)
                if (m->gpus[i].scheduler)
                        scheduler_abandon(m->gpus[i].scheduler);
        /* The client contexts go first (telling the scheduler), then the
         * scheduler lets go of the slots, then the device context; the
         * last GPU first, as its device context is a secondary KFD context
         * of the first's process (the kernel wants those closed first). */
        for (unsigned i = m->n_gpus; i-- > 0;) {
                ManagerGpu *g = &m->gpus[i];

                g->recover_timer = sd_event_source_disable_unref(g->recover_timer);
                if (!g->contexts) /* a recovery that failed half way (manager-recover.c) */
                        continue;
                context_pool_drop_clients(g->contexts);
                g->scheduler = scheduler_free(g->scheduler);
                g->contexts = context_pool_free(g->contexts);
        }
        sd_event_source_disable_unref(m->sigterm_source);
        sd_event_source_disable_unref(m->sigint_source);
        sd_event_source_disable_unref(m->exit_timer);
        sd_event_source_disable_unref(m->sighup_source);
        sd_event_source_disable_unref(m->sigusr2_source);
        sd_event_source_disable_unref(m->metrics_timer);
        free(m->metrics_file);
        session_set_done(&m->set);
        sim_device_free(m->sim);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}
