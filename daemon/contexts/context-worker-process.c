/* SPDX-License-Identifier: MIT */
/*
 * Worker processes as processes (the "process" mechanism, context.h): how
 * the daemon starts one — posix_spawn of its own executable (/proc/self/exe,
 * opened once at start, so that a package upgrade on disk never mixes
 * versions) as `kfdbrokerd --worker`, with its control socket, the device's
 * connection (sim-remote) and the setup with the relay page — the probe at
 * start, and the reaping of workers that exited or were killed, through
 * their pidfds on the event loop. The link to a running worker is in
 * context-worker.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "contexts/context-internal.h"
#include "util/log.h"
#include "util/macro.h"
#include "util/time-util.h"
#include "worker/worker-proto.h"

extern char **environ;

/* The fd the worker's own executable is passed at (then closed by it). */
#define WORKER_FD_EXE 5
/* How long a worker may take to exit when told to before it is killed. */
#define WORKER_GRACE_NS (5ull * 1000000000ull)
/* How long the daemon, exiting, waits for its workers to exit. */
#define WORKER_EXIT_WAIT_NS (1ull * 1000000000ull)
/* How long the probe at start waits for a first worker to come up. */
#define WORKER_PROBE_TIMEOUT_MS 10000

/* A worker on its way out (told to exit, or killed), until it is reaped. */
struct WorkerReaper {
        ContextPool *pool;
        WorkerReaper *prev, *next;
        pid_t pid;
        int pidfd;
        uint64_t context_id;
        bool killed;
        sd_event_source *io, *timer;
};

/* ---- Reaping ---- */

static void reaper_free(WorkerReaper *r) {
        ContextPool *p = r->pool;

        if (r->prev)
                r->prev->next = r->next;
        else if (p->reapers == r)
                p->reapers = r->next;
        if (r->next)
                r->next->prev = r->prev;
        sd_event_source_disable_unref(r->io);
        sd_event_source_disable_unref(r->timer);
        safe_close(r->pidfd);
        free(r);
}

/* Reaps the worker if it exited; logs how (a SIGKILL of ours quietly).
 * Returns true if it did. */
static bool reap(pid_t pid, int pidfd, uint64_t context_id, bool wait, bool killed) {
        siginfo_t si = {};

        if (waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED | (wait ? 0 : WNOHANG)) < 0 || si.si_pid == 0)
                return false;
        if (killed && si.si_code == CLD_KILLED && si.si_status == SIGKILL)
                log_debug("Worker %d of GPU context %" PRIu64 " killed", (int) pid, context_id);
        else if (si.si_code == CLD_EXITED && si.si_status == 0)
                log_debug("Worker %d of GPU context %" PRIu64 " exited", (int) pid, context_id);
        else if (si.si_code == CLD_EXITED)
                log_warning("Worker %d of GPU context %" PRIu64 " exited with status %d", (int) pid, context_id,
                            si.si_status);
        else
                log_warning("Worker %d of GPU context %" PRIu64 " was killed by signal %s", (int) pid, context_id,
                            sigabbrev_np(si.si_status) ? sigabbrev_np(si.si_status) : "?");
        return true;
}

static int on_reaper_exit(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        WorkerReaper *r = userdata;

        if (reap(r->pid, r->pidfd, r->context_id, false, r->killed))
                reaper_free(r);
        return 0;
}

static int on_reaper_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        WorkerReaper *r = userdata;

        log_warning("Worker %d of GPU context %" PRIu64 " did not exit when told to; killing it", (int) r->pid,
                    r->context_id);
        (void) pidfd_send_signal(r->pidfd, SIGKILL, NULL, 0);
        r->killed = true;
        return 0;
}

void worker_process_reap_later(ContextPool *p, pid_t pid, int pidfd, uint64_t context_id, bool killed) {
        WorkerReaper *r;

        if (reap(pid, pidfd, context_id, false, killed)) {
                safe_close(pidfd);
                return;
        }
        r = calloc(1, sizeof *r);
        if (!r || sd_event_add_io(p->event, &r->io, pidfd, EPOLLIN, on_reaper_exit, r) < 0 ||
            sd_event_add_time_relative(p->event, &r->timer, CLOCK_MONOTONIC, WORKER_GRACE_NS / 1000, 0,
                                       on_reaper_timer, r) < 0) {
                /* Cannot watch it: make sure it goes, and wait for it. */
                if (r) {
                        sd_event_source_disable_unref(r->io);
                        free(r);
                }
                (void) pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
                (void) reap(pid, pidfd, context_id, true, true);
                safe_close(pidfd);
                return;
        }
        (void) sd_event_source_set_description(r->io, "gpu-worker-exit");
        (void) sd_event_source_set_description(r->timer, "gpu-worker-exit-timeout");
        r->pool = p;
        r->pid = pid;
        r->pidfd = pidfd;
        r->context_id = context_id;
        r->killed = killed;
        r->next = p->reapers;
        if (p->reapers)
                p->reapers->prev = r;
        p->reapers = r;
}

void worker_reapers_free(ContextPool *p) {
        uint64_t deadline = now_ns() + WORKER_EXIT_WAIT_NS;

        /* The daemon is going: the workers were told to exit; give them a
         * moment, then make sure none is left behind. */
        while (p->reapers) {
                WorkerReaper *r = p->reapers;
                uint64_t now = now_ns();
                struct pollfd pfd = { .fd = r->pidfd, .events = POLLIN };

                if (now < deadline)
                        (void) poll(&pfd, 1, (int) ((deadline - now) / 1000000 + 1));
                if (!reap(r->pid, r->pidfd, r->context_id, false, r->killed)) {
                        log_debug("Worker %d of GPU context %" PRIu64 " still runs at exit; killing it", (int) r->pid,
                                  r->context_id);
                        (void) pidfd_send_signal(r->pidfd, SIGKILL, NULL, 0);
                        (void) waitid(P_PIDFD, (id_t) r->pidfd, &(siginfo_t) {}, WEXITED);
                }
                reaper_free(r);
        }
}

int worker_process_spawn(ContextPool *p, uint64_t context_id, uint32_t setup_flags, const ContextKfdGpu *more_gpus,
                         size_t n_more_gpus, pid_t *ret_pid, int *ret_pidfd, int *ret_sock, GpuBuffer **ret_relay,
                         char *err, size_t errlen) {
        _cleanup_close_ int mine = -EBADF, theirs = -EBADF, device = -EBADF, pidfd = -EBADF, relay_fd = -EBADF;
        GpuBuffer *relay = NULL;
        char parent[32], level[32], path[32];
        const char *argv[8];
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, deflt;
        WorkerSetup setup;
        unsigned n = 0;
        int sv[2], r;
        pid_t pid;

        if (n_more_gpus > WORKER_MAX_MORE_GPUS) {
                snprintf(err, errlen, "a KFD process shows at most %u GPUs", WORKER_MAX_MORE_GPUS + 1);
                return -E2BIG;
        }
        /* A proxy's relay page would not be used (worker-proto.h). */
        r = (setup_flags & WORKER_SETUP_KFD_PROXY) ? 0
                                                   : gpu_buffer_new(context_pool_device_gpu(p), 4096, GPU_PLACEMENT_GTT,
                                                                    false, &relay);
        if (r >= 0 && relay)
                r = gpu_buffer_export(relay, &relay_fd);
        if (r < 0) {
                gpu_buffer_unref(relay);
                snprintf(err, errlen, "allocating a relay page failed: %s", strerror(-r));
                return r;
        }
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
                r = -errno;
                gpu_buffer_unref(relay);
                snprintf(err, errlen, "socketpair: %s", strerror(-r));
                return r;
        }
        mine = sv[0];
        theirs = sv[1];
        if (fcntl(mine, F_SETFL, O_NONBLOCK) < 0) {
                r = -errno;
                gpu_buffer_unref(relay);
                return r;
        }
        if (p->opts.worker_device) {
                r = p->opts.worker_device(p->opts.worker_userdata, &device);
                if (r < 0) {
                        gpu_buffer_unref(relay);
                        snprintf(err, errlen, "cannot connect a worker to the device: %s", strerror(-r));
                        return r;
                }
        }

        snprintf(parent, sizeof parent, "--parent=%d", (int) getpid());
        snprintf(level, sizeof level, "--log-level=%d", log_get_max_level());
        argv[n++] = "kfdbrokerd";
        argv[n++] = "--worker";
        argv[n++] = device >= 0 ? "--device=sim" : "--device=kfd";
        argv[n++] = parent;
        argv[n++] = level;
        argv[n] = NULL;

        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, theirs, WORKER_FD_CONTROL);
        if (device >= 0)
                posix_spawn_file_actions_adddup2(&fa, device, WORKER_FD_DEVICE);
        if (p->exe_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, p->exe_fd, WORKER_FD_EXE);
        posix_spawnattr_init(&attr);
        sigemptyset(&none);
        sigemptyset(&deflt);
        sigaddset(&deflt, SIGPIPE);
        sigaddset(&deflt, SIGTERM);
        sigaddset(&deflt, SIGINT);
        sigaddset(&deflt, SIGHUP);
        sigaddset(&deflt, SIGCHLD);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &deflt);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        snprintf(path, sizeof path, "/proc/self/fd/%d", WORKER_FD_EXE);
        r = posix_spawn(&pid, p->opts.worker_exe ? p->opts.worker_exe : path, &fa, &attr, (char *const *) argv,
                        environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (r != 0) {
                gpu_buffer_unref(relay);
                snprintf(err, errlen, "starting a worker process failed: %s", strerror(r));
                return -r;
        }
        pidfd = pidfd_open(pid, 0);
        if (pidfd < 0) {
                r = -errno;
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                gpu_buffer_unref(relay);
                snprintf(err, errlen, "pidfd_open: %s", strerror(-r));
                return r;
        }

        setup = (WorkerSetup) {
                .version = WORKER_PROTO_VERSION,
                .max_inflight = CLIENT_MAX_INFLIGHT,
                .ring_size = CLIENT_RING_SIZE,
                .log_level = (uint32_t) log_get_max_level(),
                .context_id = context_id,
                .uid = p->opts.worker_uid,
                .gid = p->opts.worker_gid,
                .n_groups = MIN(p->opts.n_worker_groups, (unsigned) ELEMENTSOF(setup.groups)),
                .gpu_id = gpu_context_get_info(context_pool_device_gpu(p))->gpu_id,
                .flags = setup_flags,
                .render_minor = gpu_context_get_info(context_pool_device_gpu(p))->drm_render_minor,
        };
        memcpy(setup.groups, p->opts.worker_groups, sizeof setup.groups);
        setup.n_more_gpus = (uint32_t) n_more_gpus;
        for (size_t i = 0; i < n_more_gpus; i++) {
                setup.more_gpus[i].gpu_id = more_gpus[i].gpu_id;
                setup.more_gpus[i].render_minor = more_gpus[i].render_minor;
        }
        r = worker_msg_send(mine, WORKER_MSG_SETUP, &setup, sizeof setup, relay_fd);
        if (r < 0) {
                (void) pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
                (void) reap(pid, pidfd, context_id, true, true);
                gpu_buffer_unref(relay);
                snprintf(err, errlen, "cannot talk to a new worker process: %s", strerror(-r));
                return r;
        }
        *ret_relay = relay;
        *ret_pid = pid;
        *ret_pidfd = TAKE_FD(pidfd);
        *ret_sock = TAKE_FD(mine);
        return 0;
}

int worker_process_wait_ready(int sock, int timeout_ms, char *err, size_t errlen) {
        uint64_t buf[WORKER_MSG_MAX / 8];
        WorkerMsg msg = { .fd = -EBADF };
        struct pollfd pfd = { .fd = sock, .events = POLLIN };
        int r;

        r = poll(&pfd, 1, timeout_ms);
        if (r > 0)
                r = worker_msg_recv(sock, buf, &msg);
        else if (r == 0)
                r = -ETIMEDOUT;
        else
                r = -errno;
        safe_close(msg.fd);
        if (r >= 0 && msg.type == WORKER_MSG_READY && WORKER_MSG_AS(&msg, WorkerReady))
                return 0;
        if (r >= 0 && msg.type == WORKER_MSG_FAILED && WORKER_MSG_AS(&msg, WorkerFailed) &&
            worker_text_ok(((const WorkerFailed *) msg.payload)->text))
                snprintf(err, errlen, "%s", ((const WorkerFailed *) msg.payload)->text);
        else if (r >= 0)
                snprintf(err, errlen, "the worker process ended before it was ready");
        else
                snprintf(err, errlen, "the worker process did not come up: %s", strerror(-r));
        return r < 0 ? r : -EIO;
}

int worker_process_probe(ContextPool *p, uint64_t *ret_ns, char *err, size_t errlen) {
        _cleanup_close_ int sock = -EBADF, pidfd = -EBADF;
        GpuBuffer *relay = NULL;
        uint64_t t0 = now_ns();
        pid_t pid;
        int r;

        r = worker_process_spawn(p, 0, 0, NULL, 0, &pid, &pidfd, &sock, &relay, err, errlen);
        if (r < 0)
                return r;
        relay = gpu_buffer_unref(relay); /* the worker has its own mapping */
        /* At start, before any client: waiting here blocks nobody. */
        r = worker_process_wait_ready(sock, WORKER_PROBE_TIMEOUT_MS, err, errlen);
        if (r >= 0) {
                *ret_ns = now_ns() - t0;
                (void) worker_msg_send(sock, WORKER_MSG_EXIT, NULL, 0, -EBADF);
                (void) reap(pid, pidfd, 0, true, true);
                return 0;
        }
        (void) pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
        (void) reap(pid, pidfd, 0, true, true);
        return r;
}
