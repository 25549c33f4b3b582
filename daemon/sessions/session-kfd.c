/* SPDX-License-Identifier: MIT */
/*
 * OpenKfd: the session of a process that runs unmodified ROCm through
 * libkfdbroker-kfd.so (docs/rocm.md) gets a KFD process of its own and the
 * KFD topology as this session may see it: the CPU and the GPUs it may use
 * (Devices=, the GPU socket it came through), no other — in a secondary KFD
 * context; a proxy worker's KFD process (before KFD 1.19) shows the
 * session's own GPU alone. The KFD process — a secondary KFD context of the daemon's
 * (context-kfd-process.c), or the simulator's stand-in on a KFD without
 * them — is reached over a SOCK_SEQPACKET socket that speaks sim-remote's
 * wire (daemon/sim/sim-remote-protocol.h): the interposer's ioctls, mmaps and
 * closes run there, each checked by the relay's hooks (kfd-relay.c) and then
 * by the kernel's own checks on that context alone, so a hostile argument
 * gets the kernel's errno and touches no other client. One per session; the
 * session keeps a copy of the daemon's end and shuts it down when it ends,
 * which ends the KFD process (its memory, events and queues) even if the
 * client still holds its end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scheduler/scheduler.h"
#include "sessions/kfd-relay.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"

typedef struct TopologyTree {
        WireTopologyFile files[WIRE_MAX_TOPOLOGY_FILES];
        size_t n_files;
        size_t bytes;
} TopologyTree;

static void topology_tree_done(TopologyTree *t) {
        for (size_t i = 0; i < t->n_files; i++) {
                free((char *) t->files[i].path);
                free((void *) t->files[i].content);
        }
        t->n_files = 0;
}

static int read_small_file(int dir_fd, const char *name, void **ret, size_t *ret_size) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;

        if (fd < 0)
                return -errno;
        buf = malloc(WIRE_MAX_TOPOLOGY_CONTENT);
        if (!buf)
                return -ENOMEM;
        for (;;) {
                ssize_t k = read(fd, buf + n, WIRE_MAX_TOPOLOGY_CONTENT - n);
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                n += (size_t) k;
                if (n == WIRE_MAX_TOPOLOGY_CONTENT)
                        return -EFBIG;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = n;
        return 0;
}

/* Every regular file under dir_fd, named relative to the tree's root. */
static int topology_tree_read(TopologyTree *t, int dir_fd, const char *prefix, unsigned depth) {
        DIR *d;
        struct dirent *de;
        int fd, r = 0;

        if (depth > 8)
                return -ELOOP;
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while (r == 0 && (de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                unsigned char type = de->d_type;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (asprintf(&path, "%s%s%s", prefix, prefix[0] ? "/" : "", de->d_name) < 0) {
                        r = -ENOMEM;
                        break;
                }
                if (strlen(path) > WIRE_MAX_TOPOLOGY_PATH) {
                        r = -ENAMETOOLONG;
                        break;
                }
                if (type == DT_UNKNOWN) {
                        struct stat st;
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                                r = -errno;
                                break;
                        }
                        type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
                }
                if (type == DT_DIR) {
                        _cleanup_close_ int sub = openat(dirfd(d), de->d_name,
                                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        r = sub < 0 ? -errno : topology_tree_read(t, sub, path, depth + 1);
                } else if (type == DT_REG) {
                        WireTopologyFile *f;

                        if (t->n_files == WIRE_MAX_TOPOLOGY_FILES) {
                                r = -E2BIG;
                                break;
                        }
                        f = &t->files[t->n_files];
                        r = read_small_file(dirfd(d), de->d_name, (void **) &f->content, &f->size);
                        if (r == 0) {
                                f->path = TAKE_PTR(path);
                                t->bytes += f->size + strlen(f->path);
                                t->n_files++;
                        }
                }
        }
        closedir(d);
        /* Room for framing in one message. */
        if (r == 0 && t->bytes > WIRE_MAX_MESSAGE_SIZE - 4096)
                r = -EMSGSIZE;
        return r;
}

/* The node index of a path under topology/nodes/, or -1. */
static int node_of(const char *path, const char **ret_rest) {
        static const char prefix[] = "topology/nodes/";
        char *end;
        unsigned long n;

        if (strncmp(path, prefix, sizeof prefix - 1) != 0)
                return -1;
        errno = 0;
        n = strtoul(path + sizeof prefix - 1, &end, 10);
        if (errno || end == path + sizeof prefix - 1 || (*end && *end != '/') || n >= 1024)
                return -1;
        *ret_rest = end;
        return (int) n;
}

/* The value of a "name value" line of a properties file, or -1. */
static long long prop_value(const WireTopologyFile *f, const char *name) {
        const char *p = f->content, *end = p + f->size;
        size_t len = strlen(name);

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                const char *line_end = nl ? nl : end;
                if ((size_t) (line_end - p) > len + 1 && memcmp(p, name, len) == 0 && p[len] == ' ') {
                        char num[24] = "";
                        size_t n = MIN((size_t) (line_end - p) - len - 1, sizeof num - 1);
                        char *e;
                        memcpy(num, p + len + 1, n);
                        errno = 0;
                        long long v = strtoll(num, &e, 10);
                        return errno || e == num || v < 0 ? -1 : v;
                }
                p = line_end + 1;
        }
        return -1;
}

/* f's content with the values of the lines named in names[] replaced. */
static int prop_set(WireTopologyFile *f, const char *const *names, const unsigned long long *values, size_t n) {
        const char *p = f->content, *end = p + f->size;
        char *out = NULL;
        size_t out_size = 0;
        FILE *o = open_memstream(&out, &out_size);

        if (!o)
                return -ENOMEM;
        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t) (end - p));
                const char *line_end = nl ? nl : end;
                bool done = false;
                for (size_t i = 0; i < n && !done; i++) {
                        size_t len = strlen(names[i]);
                        if ((size_t) (line_end - p) > len && memcmp(p, names[i], len) == 0 && p[len] == ' ') {
                                fprintf(o, "%s %llu\n", names[i], values[i]);
                                done = true;
                        }
                }
                if (!done)
                        fprintf(o, "%.*s\n", (int) (line_end - p), p);
                p = line_end + 1;
        }
        if (fclose(o) != 0) {
                free(out);
                return -ENOMEM;
        }
        free((void *) f->content);
        f->content = out;
        f->size = out_size;
        return 0;
}

/* Node, link kind (0 io_links, 1 p2p_links) and link index of a path under
 * topology/nodes/N/{io,p2p}_links/L/, or -1. */
static int link_of(const char *path, int *ret_node, unsigned *ret_index, const char **ret_rest) {
        static const char *const kinds[] = { "/io_links/", "/p2p_links/" };
        const char *rest;
        int n = node_of(path, &rest);

        if (n < 0)
                return -1;
        for (int k = 0; k < 2; k++) {
                size_t len = strlen(kinds[k]);
                char *end;
                if (strncmp(rest, kinds[k], len) != 0)
                        continue;
                errno = 0;
                unsigned long l = strtoul(rest + len, &end, 10);
                if (errno || end == rest + len || (*end && *end != '/') || l >= 1024)
                        return -1;
                *ret_node = n;
                *ret_index = (unsigned) l;
                *ret_rest = end;
                return k;
        }
        return -1;
}

/*
 * The links of the nodes kept (their paths already numbered anew): a link to
 * a node that was left out goes, the others name their nodes by the new
 * numbers, each node's links are numbered again from 0 in their old order,
 * and its properties count them — the thunk reads io_links/0 up to
 * io_links_count - 1 (topology.c) and follows node_to.
 */
static int topology_tree_fix_links(TopologyTree *t, const int *renumber, size_t n_renumber) {
        static const char *const counts[] = { "io_links_count", "p2p_links_count" };
        size_t k = 0;
        int r;

        /* Links to nodes that are gone, and anything else in their
         * directories: judged on the whole list first, then let go, since a
         * link's files are judged by its properties file. */
        bool *drop = calloc(t->n_files ? t->n_files : 1, sizeof(bool));
        if (!drop)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_files; i++) {
                const WireTopologyFile *props = NULL;
                const char *rest;
                unsigned idx;
                int node, kind = link_of(t->files[i].path, &node, &idx, &rest);
                char want[WIRE_MAX_TOPOLOGY_PATH + 32];

                if (kind < 0)
                        continue;
                snprintf(want, sizeof want, "topology/nodes/%d/%s/%u/properties", node,
                         kind ? "p2p_links" : "io_links", idx);
                for (size_t j = 0; j < t->n_files && !props; j++)
                        if (strcmp(t->files[j].path, want) == 0)
                                props = &t->files[j];
                long long to = props ? prop_value(props, "node_to") : -1;
                drop[i] = !(to >= 0 && (size_t) to < n_renumber && renumber[to] >= 0);
        }
        for (size_t i = 0; i < t->n_files; i++) {
                if (drop[i]) {
                        free((char *) t->files[i].path);
                        free((void *) t->files[i].content);
                        continue;
                }
                t->files[k++] = t->files[i];
        }
        free(drop);
        t->n_files = k;

        /* The kept links: new node numbers inside, new indices in their paths. */
        for (size_t i = 0; i < t->n_files; i++) {
                WireTopologyFile *f = &t->files[i];
                const char *rest;
                unsigned idx, new_idx = 0;
                int node, kind = link_of(f->path, &node, &idx, &rest);
                char *path;

                if (kind < 0)
                        continue;
                for (size_t j = 0; j < t->n_files; j++) {
                        const char *rest2;
                        unsigned idx2;
                        int node2;
                        if (link_of(t->files[j].path, &node2, &idx2, &rest2) == kind && node2 == node &&
                            idx2 < idx && strcmp(rest2, "/properties") == 0)
                                new_idx++;
                }
                if (strcmp(rest, "/properties") == 0) {
                        long long to = prop_value(f, "node_to");
                        const char *names[] = { "node_from", "node_to" };
                        unsigned long long values[] = { (unsigned long long) node,
                                                        (unsigned long long) renumber[to] };
                        r = prop_set(f, names, values, 2);
                        if (r < 0)
                                return r;
                }
                if (new_idx != idx) {
                        if (asprintf(&path, "topology/nodes/%d/%s/%u%s", node, kind ? "p2p_links" : "io_links",
                                     new_idx, rest) < 0)
                                return -ENOMEM;
                        free((char *) f->path);
                        f->path = path;
                }
        }

        /* Each node's counts. */
        for (size_t i = 0; i < t->n_files; i++) {
                WireTopologyFile *f = &t->files[i];
                const char *rest;
                int node = node_of(f->path, &rest);
                unsigned long long n[2] = { 0, 0 };

                if (node < 0 || strcmp(rest, "/properties") != 0)
                        continue;
                for (size_t j = 0; j < t->n_files; j++) {
                        const char *rest2;
                        unsigned idx2;
                        int node2, kind = link_of(t->files[j].path, &node2, &idx2, &rest2);
                        if (kind >= 0 && node2 == node && strcmp(rest2, "/properties") == 0)
                                n[kind]++;
                }
                r = prop_set(f, counts, n, 2);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * Only the GPUs this session may use, as a container given those GPUs'
 * device nodes sees them: the CPU nodes (gpu_id 0) in their order, then the
 * nodes of gpu_ids[] in that order (the daemon's GPU indexes, which
 * hipGetDeviceCount() and hipSetDevice() count in: ROCr numbers its GPU
 * agents in node order), numbered again from 0, as the thunk reads nodes
 * 0..N-1.
 */
static int topology_tree_keep_gpus(TopologyTree *t, const uint32_t *gpu_ids, size_t n_gpu_ids) {
        int renumber[1024];
        int gpu_of_node[1024]; /* -2: not a node; -1: a CPU; else the index into gpu_ids */
        unsigned next = 0;
        size_t k = 0;

        for (unsigned n = 0; n < 1024; n++)
                gpu_of_node[n] = -2;
        for (size_t i = 0; i < t->n_files; i++) {
                const char *rest;
                int n = node_of(t->files[i].path, &rest);
                if (n >= 0 && strcmp(rest, "/gpu_id") == 0) {
                        char text[32] = "";
                        memcpy(text, t->files[i].content, MIN(t->files[i].size, sizeof text - 1));
                        uint32_t id = (uint32_t) strtoul(text, NULL, 10);
                        if (id == 0)
                                gpu_of_node[n] = -1;
                        for (size_t g = 0; id != 0 && g < n_gpu_ids; g++)
                                if (gpu_ids[g] == id)
                                        gpu_of_node[n] = (int) g;
                }
        }
        for (unsigned n = 0; n < 1024; n++)
                renumber[n] = gpu_of_node[n] == -1 ? (int) next++ : -1;
        for (size_t g = 0; g < n_gpu_ids; g++)
                for (unsigned n = 0; n < 1024; n++)
                        if (gpu_of_node[n] == (int) g)
                                renumber[n] = (int) next++;
        for (size_t i = 0; i < t->n_files; i++) {
                WireTopologyFile *f = &t->files[i];
                const char *rest;
                int n = node_of(f->path, &rest);
                char *path;

                if (n >= 0 && renumber[n] < 0) {
                        free((char *) f->path);
                        free((void *) f->content);
                        continue;
                }
                if (n >= 0 && renumber[n] != n) {
                        if (asprintf(&path, "topology/nodes/%d%s", renumber[n], rest) < 0)
                                return -ENOMEM;
                        free((char *) f->path);
                        f->path = path;
                }
                t->files[k++] = *f;
        }
        t->n_files = k;
        return topology_tree_fix_links(t, renumber, ELEMENTSOF(renumber));
}

/* An OpenKfd: what its answer needs, kept while its KFD process is on its
 * way (a proxy worker coming up: the loop serves other sessions, and this
 * one, meanwhile). */
typedef struct SessionKfdOpen {
        Session *s;
        uint64_t req_id;
        TopologyTree tree;
        KfdRelay *relay;         /* ours; the server holds another */
        ContextKfdOpen *open;    /* on its way, or NULL */
} SessionKfdOpen;

static void kfd_open_free(SessionKfdOpen *o) {
        topology_tree_done(&o->tree);
        free(o);
}

/* The answer to OpenKfd, at once or once its KFD process is up: k < 0
 * refused it with err (hooks->end() was called); else fd is the client's
 * end of the connection and ctx the slot. */
static void kfd_opened(SessionKfdOpen *o, int k, int fd_in, Context *ctx, const char *err) {
        _cleanup_close_ int fd = fd_in, keep = -EBADF;
        Session *s = o->s;
        ContextPool *pool = s->gpu->contexts;

        if (k < 0) {
                kfd_relay_detach(o->relay); /* ours */
                session_log(s, LOG_NOTICE, "Session %" PRIu64 ": OpenKfd refused: %s", s->id, err);
                session_send_error(s, o->req_id, -k, "open_kfd: %s", err);
                return;
        }
        s->home.paid_ctx = context_ref(ctx);
        k = kfd_relay_attach(o->relay, ctx);
        /* A copy of the client's end: shutting it down when the session
         * ends is EOF at the daemon's end, which ends the KFD process. */
        keep = k < 0 ? -EBADF : fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (keep < 0) {
                k = k < 0 ? k : -errno;
                /* Our end goes with fd: the KFD process ends, the server lets the relay go. */
                kfd_relay_detach(o->relay);
                context_release(ctx);
                context_pool_kfd_relay_end(pool);
                session_send_error(s, o->req_id, -k, "open_kfd: %s", strerror(-k));
                return;
        }
        s->kfd_ctx = ctx;
        /* Its relayed packets are its compute stream's work, in that context. */
        scheduler_stream_set_context(s->gpu->scheduler, &s->home.streams[GPU_ENGINE_COMPUTE], ctx);
        s->kfd_relay_fd = TAKE_FD(keep);
        s->kfd_relay = o->relay;
        session_account_fds(s, 2);
        ContextStats st;
        context_get_stats(ctx, &st);
        if (st.pid)
                session_log(s, LOG_INFO, "Session %" PRIu64 ": opened a KFD process of its own (the KFD relay: the KFD "
                            "process of worker %" PRIu32 ", up in %.1f ms)",
                            s->id, st.pid, (double) st.bring_up_ns / 1e6);
        else
                session_log(s, LOG_INFO, "Session %" PRIu64 ": opened a KFD process of its own (the KFD relay: a "
                            "secondary KFD context, up in %.1f ms)",
                            s->id, (double) st.bring_up_ns / 1e6);
        session_send(s, &(WireReply) { .id = o->req_id, .type = WIRE_REPLY_OPEN_KFD,
                                       .open_kfd = { .files = o->tree.files, .n_files = o->tree.n_files,
                                                     .render_minor = context_pool_info(pool)->drm_render_minor } },
                     &fd, 1);
}

/* ContextKfdOpenDone: the proxy worker came up, or did not. */
static void on_kfd_open_done(void *userdata, int r, int fd, Context *ctx, const char *err) {
        SessionKfdOpen *o = userdata;

        o->s->kfd_open = NULL;
        kfd_opened(o, r, fd, ctx, err);
        kfd_open_free(o);
}

void session_open_kfd(Session *s, const WireRequest *req) {
        ContextPool *pool = s->gpu->contexts;
        _cleanup_close_ int root_fd = -EBADF;
        char err[384] = "", key[64];
        SessionKfdOpen *o;
        Context *ctx = NULL;
        ContextKfdGpu more[SESSION_MAX_GPUS];
        SessionGpu *others[SESSION_MAX_GPUS];
        uint32_t gpu_ids[SESSION_MAX_GPUS];
        size_t n_gpus = 0, n_more = 0;
        int fd = -EBADF, k;

        if (s->kfd_relay_fd >= 0 || s->kfd_open) {
                session_send_error(s, req->id, EEXIST, "open_kfd: this session has its KFD process already");
                return;
        }
        /* The daemon's end of the relay socket and our copy of the client's. */
        if (!session_check_fds(s, req->id, 2, "OpenKfd"))
                return;
        o = calloc(1, sizeof *o);
        if (!o) {
                session_send_error(s, req->id, ENOMEM, "open_kfd: %s", strerror(ENOMEM));
                return;
        }
        o->s = s;
        o->req_id = req->id;
        /* Every GPU the session may use, in the daemon's order, in its KFD
         * process — a secondary KFD context, or a proxy worker's own
         * process, whose worker opens each GPU's render file (docs/rocm.md
         * "Several GPUs"); its own GPU alone where its Hello named it
         * ($KFDBROKER_GPU, as HIP_VISIBLE_DEVICES shows a program one GPU). */
        for (unsigned i = 0; i < s->set->n_gpus; i++) {
                SessionGpu *g = &s->set->gpus[i];
                if (g != s->gpu && (s->gpu_named || !g->info || g->unavailable || !session_may_use_gpu(s, g)))
                        continue;
                gpu_ids[n_gpus++] = g == s->gpu ? context_pool_info(pool)->gpu_id : g->info->gpu_id;
                if (g == s->gpu)
                        continue;
                others[n_more] = g;
                more[n_more++] = (ContextKfdGpu) { .gpu_id = g->info->gpu_id,
                                                   .render_minor = g->info->drm_render_minor };
        }
        root_fd = open(context_pool_sysfs_root(pool), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        k = root_fd < 0 ? -errno : topology_tree_read(&o->tree, root_fd, "", 0);
        if (k >= 0)
                k = topology_tree_keep_gpus(&o->tree, gpu_ids, n_gpus);
        if (k < 0) {
                session_send_error(s, req->id, -k, "open_kfd: cannot read the KFD topology: %s", strerror(-k));
                kfd_open_free(o);
                return;
        }
        k = kfd_relay_new(s, s->set->event, &o->relay);
        if (k < 0) {
                session_send_error(s, req->id, -k, "open_kfd: %s", strerror(-k));
                kfd_open_free(o);
                return;
        }
        for (size_t i = 0; i < n_more; i++)
                kfd_relay_add_gpu(o->relay, others[i]->index, more[i].gpu_id, more[i].render_minor);
        /* The server's reference, given back at its end() — also when this fails. */
        snprintf(key, sizeof key, "KFD process of session %" PRIu64, s->id);
        k = context_pool_kfd_relay_begin(pool, key, session_begin_paying(s), &kfd_relay_hooks, kfd_relay_ref(o->relay),
                                         more, n_more,
                                         on_kfd_open_done, o, &o->open, &fd, &ctx, err, sizeof err);
        if (k > 0) {
                /* Answered when its worker is up (on_kfd_open_done()). */
                s->kfd_open = o;
                return;
        }
        kfd_opened(o, k, fd, ctx, err);
        kfd_open_free(o);
}

void session_kfd_cancel(Session *s) {
        SessionKfdOpen *o = s->kfd_open;

        if (!o)
                return;
        s->kfd_open = NULL;
        context_kfd_open_cancel(o->open);
        kfd_relay_detach(o->relay); /* ours */
        kfd_open_free(o);
}

void session_kfd_free(Session *s) {
        session_kfd_cancel(s);
        if (s->kfd_relay_fd < 0)
                return;
        (void) shutdown(s->kfd_relay_fd, SHUT_RDWR);
        s->kfd_relay_fd = safe_close(s->kfd_relay_fd);
        kfd_relay_detach(s->kfd_relay);
        s->kfd_relay = NULL;
        s->kfd_ctx = context_release(s->kfd_ctx);
        session_account_fds(s, -2);
        context_pool_kfd_relay_end(s->gpu->contexts);
}
