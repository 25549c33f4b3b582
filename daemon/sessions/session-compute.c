/* SPDX-License-Identifier: MIT */
/*
 * The compute half of a Session: code objects by session handle
 * (LoadCodeObject from a sealed memfd, FreeCodeObject) and the resolution of
 * a DispatchJob — policy, code object, kernel, grid, arguments — into the
 * GpuJob the GPU layer runs. Like every handler, it looks handles up only in
 * the calling session and replies with an error naming the bad field.
 *
 * A code object is charged to the session like a buffer: the GPU memory its
 * code occupies counts in the buffer memory (max_buffer_bytes) and the object
 * itself counts against max_buffers. A dispatch job holds references to its code object and to
 * every buffer its arguments name until it retires, so FreeCodeObject and
 * FreeBuffer never pull memory from under a running kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "sessions/job.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log.h"
#include "util/macro.h"

#define REQUIRED_SEALS (F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW)

/* Replies with error and a message; returns -error for the caller to pass on. */
_printf_(4, 5) static int fail(Session *s, uint64_t id, int error, const char *fmt, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        session_send_error(s, id, error, "%s", msg);
        return -error;
}

/* The LDS a workgroup may use on this device (the GPU layer's own limit). */
static uint32_t device_lds_bytes(const SessionGpu *g) {
        uint32_t kb = g->info->lds_size_in_kb ? g->info->lds_size_in_kb : 64;
        return MIN(kb, 64u) * 1024u;
}

bool session_has_compute(const SessionGpu *g) {
        return g->info->num_cp_queues > 0;
}

/* "(ComputeDispatch=isolated; rules: FILE:LINE, …)" for messages. */
void session_policy_words(const Session *s, char *buf, size_t size) {
        snprintf(buf, size, "ComputeDispatch=%s, Isolation=%s%s%s",
                 policy_compute_to_string(s->policy.compute_dispatch), policy_isolation_to_string(s->policy.isolation),
                 s->limits_overridden ? ", set by SetLimits" : "; rules: ",
                 s->limits_overridden ? "" : s->policy_matched ?: "defaults");
}

int session_compute_context(SessionOnGpu *on, uint64_t id, const char *field, Context **ret) {
        Session *s = on->session;
        ContextPool *pool = on->gpu->contexts;
        bool shared = context_pool_mechanism(pool) == CONTEXT_MECHANISM_NONE ||
                      s->policy.isolation == POLICY_ISOLATION_SHARED;
        char key[160], words[400], err[320] = "";
        Context *ctx;
        int r;

        /* A session with a relayed KFD process runs its kernels there (on its own GPU). */
        if (s->kfd_ctx && on == &s->home) {
                r = context_ensure(s->kfd_ctx, err, sizeof err);
                if (r < 0)
                        return fail(s, id, -r, "%s: %s", field, err);
                *ret = s->kfd_ctx;
                return 0;
        }
        session_policy_words(s, words, sizeof words);
        if (s->policy.compute_dispatch == POLICY_COMPUTE_NO)
                return fail(s, id, EPERM, "%s: compute dispatch is not allowed for this client by policy (%s)",
                            field, words);
        if (shared && s->policy.compute_dispatch != POLICY_COMPUTE_YES) {
                if (context_pool_mechanism(pool) == CONTEXT_MECHANISM_NONE)
                        return fail(s, id, EPERM,
                                    "%s: compute dispatch needs a GPU context of this client's own, and this daemon "
                                    "has none to give (%s); kernels would share one context with every other "
                                    "client, which policy allows only with ComputeDispatch=yes (%s)",
                                    field, context_pool_mechanism_reason(pool), words);
                return fail(s, id, EPERM,
                            "%s: Isolation=shared runs this client's kernels in a GPU context shared with other "
                            "clients, which policy allows only with ComputeDispatch=yes (%s)",
                            field, words);
        }
        switch (shared ? POLICY_ISOLATION_SHARED : s->policy.isolation) {
        case POLICY_ISOLATION_SESSION:
                snprintf(key, sizeof key, "session %" PRIu64, s->id);
                break;
        case POLICY_ISOLATION_IDENTITY:
                snprintf(key, sizeof key, "identity %s", s->account ? s->account->key : "?");
                break;
        default:
                snprintf(key, sizeof key, "shared");
                break;
        }
        if (!on->compute_ctx || !on->compute_key || strcmp(key, on->compute_key) != 0) {
                r = context_pool_get(pool, key, &ctx);
                if (r < 0)
                        return fail(s, id, -r, "%s: cannot make a GPU context: %s", field, strerror(-r));
                context_release(on->compute_ctx);
                on->compute_ctx = ctx;
                /* Out of memory, the next dispatch looks the key up again. */
                free(on->compute_key);
                on->compute_key = strdup(key);
                scheduler_stream_set_context(on->gpu->scheduler, &on->streams[GPU_ENGINE_COMPUTE], ctx);
        }
        /* Its memory is charged to the session that brings it up, or to the
         * next one that dispatches there after that one went. */
        session_pay_context(on, on->compute_ctx);
        /* A user whose GPU contexts keep faulting waits before its next one
         * comes up: the scheduler brings it up when the wait is over, and
         * the dispatch waits until then (scheduler.h). */
        if (!context_live(on->compute_ctx) && s->user_tally &&
            scheduler_user_backs_off(&s->user_tally->sched[on->gpu->index])) {
                *ret = on->compute_ctx;
                return 0;
        }
        r = context_ensure(on->compute_ctx, err, sizeof err);
        if (r < 0)
                return fail(s, id, -r, "%s: %s", field, err);
        *ret = on->compute_ctx;
        return 0;
}

static const char *arg_kind_wire_name(GpuArgKind k) {
        switch (k) {
        case GPU_ARG_BY_VALUE:
                return "by_value";
        case GPU_ARG_GLOBAL_BUFFER:
                return "global_buffer";
        case GPU_ARG_DYNAMIC_LDS:
                return "dynamic_lds";
        case GPU_ARG_HIDDEN:
                return "hidden";
        }
        return "unknown";
}

/* What the client must send for an argument of this kind, for errors. */
static const char *arg_kind_description(GpuArgKind k) {
        switch (k) {
        case GPU_ARG_BY_VALUE:
                return "a by-value argument (bytes)";
        case GPU_ARG_GLOBAL_BUFFER:
                return "a global pointer (buffer)";
        case GPU_ARG_DYNAMIC_LDS:
                return "a local pointer (local_size)";
        case GPU_ARG_HIDDEN:
                return "a hidden argument";
        }
        return "an argument of unknown kind";
}

static const char *wire_arg_name(WireArgType t) {
        switch (t) {
        case WIRE_ARG_BYTES:
                return "bytes";
        case WIRE_ARG_BUFFER:
                return "buffer";
        case WIRE_ARG_LOCAL_SIZE:
                return "local_size";
        }
        return "nothing";
}

static void seal_names(int missing, char *buf, size_t size) {
        snprintf(buf, size, "%s%s%s%s%s",
                 missing & F_SEAL_WRITE ? "F_SEAL_WRITE" : "",
                 (missing & F_SEAL_WRITE) && (missing & (F_SEAL_SHRINK | F_SEAL_GROW)) ? ", " : "",
                 missing & F_SEAL_SHRINK ? "F_SEAL_SHRINK" : "",
                 (missing & F_SEAL_SHRINK) && (missing & F_SEAL_GROW) ? ", " : "",
                 missing & F_SEAL_GROW ? "F_SEAL_GROW" : "");
}

/*
 * The fd must be a memfd sealed against writes and resizes: then what the
 * daemon checked and loads cannot change underneath it, and reading its
 * mapping never faults (no truncation, no SIGBUS). Returns its size, or
 * replies and returns a negative errno.
 */
static int64_t check_code_object_fd(Session *s, uint64_t id, int fd) {
        struct stat st;
        char missing[64];
        int seals, fl;

        if (fstat(fd, &st) < 0)
                return fail(s, id, EBADF, "load_code_object: cannot inspect the file descriptor: %s",
                            strerror(errno));
        seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 && errno == EBADF)
                return fail(s, id, EBADF,
                            "load_code_object: the file descriptor cannot be read (an O_PATH descriptor?)");
        if (seals < 0 || !S_ISREG(st.st_mode))
                return fail(s, id, EINVAL,
                            "load_code_object: the file descriptor is not a memfd (it must be a memfd_create(2) file sealed with F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW)");
        if ((seals & REQUIRED_SEALS) != REQUIRED_SEALS) {
                seal_names(REQUIRED_SEALS & ~seals, missing, sizeof(missing));
                return fail(s, id, EINVAL,
                            "load_code_object: the memfd is not sealed against change: %s missing (it needs F_SEAL_WRITE, F_SEAL_SHRINK and F_SEAL_GROW)",
                            missing);
        }
        fl = fcntl(fd, F_GETFL);
        if (fl < 0 || (fl & O_ACCMODE) == O_WRONLY)
                return fail(s, id, EBADF, "load_code_object: the memfd is not open for reading");
        if (st.st_size == 0)
                return fail(s, id, EINVAL, "load_code_object: the memfd is empty");
        if ((uint64_t) st.st_size > GPU_CODE_OBJECT_MAX_SIZE)
                return fail(s, id, E2BIG,
                            "load_code_object: %" PRIu64 " bytes, more than the limit of %u bytes",
                            (uint64_t) st.st_size, GPU_CODE_OBJECT_MAX_SIZE);
        return st.st_size;
}

static void kernel_infos_free(WireKernelInfo *k, size_t n) {
        for (size_t i = 0; k && i < n; i++)
                free((void *) k[i].args);
        free(k);
}

/* The reply's view of the kernels (names point into the code object). */
static int kernel_infos_new(const GpuCodeObject *co, WireKernelInfo **ret, size_t *ret_n) {
        unsigned n = gpu_code_object_n_kernels(co);
        WireKernelInfo *infos = calloc(MAX(n, 1u), sizeof(*infos));

        if (!infos)
                return -ENOMEM;
        for (unsigned i = 0; i < n; i++) {
                const GpuKernel *k = gpu_code_object_kernel(co, i);
                WireKernelArgInfo *args = calloc(MAX(k->n_args, 1u), sizeof(*args));

                if (!args) {
                        kernel_infos_free(infos, i);
                        return -ENOMEM;
                }
                for (unsigned a = 0; a < k->n_args; a++)
                        args[a] = (WireKernelArgInfo) { .name = k->args[a].name,
                                                        .offset = k->args[a].offset,
                                                        .size = k->args[a].size,
                                                        .kind = arg_kind_wire_name(k->args[a].kind) };
                infos[i] = (WireKernelInfo) { .name = k->name,
                                              .kernarg_size = k->kernarg_size,
                                              .group_segment_size = k->group_segment_size,
                                              .private_segment_size = k->private_segment_size,
                                              .max_workgroup_size = k->max_flat_workgroup_size,
                                              .args = args,
                                              .n_args = k->n_args };
        }
        *ret = infos;
        *ret_n = n;
        return 0;
}

static void code_object_unmap(void *p, size_t size) {
        if (p && p != MAP_FAILED)
                munmap(p, size);
}

void session_load_code_object(Session *s, const WireRequest *req, int fd) {
        WireKernelInfo *infos = NULL;
        SessionCodeObject *sco;
        GpuCodeObject *co = NULL;
        char err[256] = "";
        void *map, *buf = NULL;
        uint64_t handle, charge;
        int64_t size;
        size_t n_infos = 0, len = 0;
        int r;

        size = check_code_object_fd(s, req->id, fd);
        if (size < 0)
                return;
        /* Refuse early what cannot fit: the loaded image is at least as large
         * as the file's code, in whole pages. */
        if (!session_check_object_count(s, req->id) ||
            !session_check_fds(s, req->id, session_buffer_fds(s), "LoadCodeObject") ||
            !session_check_memory_quota(s, req->id, s->gpu->index, align_up_u64((uint64_t) size, PAGE_SIZE_4K)))
                return;

        map = mmap(NULL, (size_t) size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
                r = -errno;
                /* Readability was checked: what is left is memory, or a memfd that
                 * cannot be mapped this way (hugetlb with an unaligned size). */
                session_send_error(s, req->id, r == -ENOMEM ? ENOMEM : EINVAL,
                                   "load_code_object: cannot map the memfd: %s", strerror(-r));
                return;
        }
        /* Checked and described now; loaded into a GPU context where it is dispatched. */
        r = gpu_code_object_parse(s->gpu->info, map, (size_t) size, &co, err, sizeof(err));
        code_object_unmap(map, (size_t) size);
        if (r < 0) {
                session_send_error(s, req->id, -r, "load_code_object: %s", err[0] ? err : strerror(-r));
                return;
        }
        /* What the session pays: the GPU memory the loaded code occupies (its
         * image can be larger than the file: zero-filled segments). */
        charge = gpu_code_object_get_size(co);
        if (!session_check_memory_quota(s, req->id, s->gpu->index, charge)) {
                gpu_code_object_unref(co);
                return;
        }

        r = kernel_infos_new(co, &infos, &n_infos);
        if (r < 0) {
                gpu_code_object_unref(co);
                session_send_error(s, req->id, ENOMEM, "out of memory");
                return;
        }
        /* Make sure the kernel list fits in one reply before keeping anything. */
        r = wire_reply_encode(&(WireReply) { .id = req->id, .type = WIRE_REPLY_LOAD_CODE_OBJECT,
                                             .load_code_object = { .handle = UINT64_MAX,
                                                                   .kernels = infos,
                                                                   .n_kernels = n_infos } },
                              &buf, &len);
        free(buf);
        if (r < 0) {
                kernel_infos_free(infos, n_infos);
                gpu_code_object_unref(co);
                if (r == -EMSGSIZE)
                        session_send_error(s, req->id, E2BIG,
                                           "load_code_object: the description of its %zu kernels does not fit in one reply of %u bytes",
                                           n_infos, WIRE_MAX_MESSAGE_SIZE);
                else
                        session_send_error(s, req->id, -r, "load_code_object: cannot encode the reply: %s",
                                           strerror(-r));
                return;
        }

        sco = calloc(1, sizeof(*sco));
        if (!sco) {
                kernel_infos_free(infos, n_infos);
                gpu_code_object_unref(co);
                session_send_error(s, req->id, ENOMEM, "out of memory");
                return;
        }
        *sco = (SessionCodeObject) { .co = co, .charged = charge };
        r = handle_table_add(&s->code_objects, sco, &handle, NULL);
        if (r >= 0)
                gpu_code_object_set_tag(co, handle);
        if (r < 0) {
                kernel_infos_free(infos, n_infos);
                gpu_code_object_unref(co);
                free(sco);
                session_send_error(s, req->id, -r, "cannot store the code object: %s", strerror(-r));
                return;
        }
        session_account_buffer(s, s->gpu->index, GPU_PLACEMENT_GTT, (int64_t) charge);
        session_account_object(s, +1);
        log_debug("Session %" PRIu64 ": code object 0x%" PRIx64 " loaded, %u kernels, %" PRId64 " bytes",
                  s->id, handle, gpu_code_object_n_kernels(co), size);
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_LOAD_CODE_OBJECT,
                                       .load_code_object = { .handle = handle,
                                                             .kernels = infos,
                                                             .n_kernels = n_infos } },
                     NULL, 0);
        kernel_infos_free(infos, n_infos);
}

static void code_object_drop(Session *s, SessionCodeObject *sco) {
        session_account_buffer(s, s->gpu->index, GPU_PLACEMENT_GTT, -(int64_t) sco->charged);
        session_account_object(s, -1);
        /* Dispatch jobs still using it hold their own references. */
        gpu_code_object_unref(sco->co);
        free(sco);
}

static SessionCodeObject *lookup_code_object(Session *s, uint64_t id, const char *field, uint64_t handle) {
        SessionCodeObject *sco = handle_table_get(&s->code_objects, handle);

        if (!sco)
                session_send_error(s, id, ENOENT, "%s: no code object 0x%" PRIx64 " in this session (%s)",
                                   field, handle, session_handle_kind(handle));
        return sco;
}

void session_free_code_object(Session *s, const WireRequest *req) {
        if (!lookup_code_object(s, req->id, "free_code_object.handle", req->object.handle))
                return;
        code_object_drop(s, handle_table_remove(&s->code_objects, req->object.handle));
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_EMPTY }, NULL, 0);
}

void session_drop_code_objects(Session *s) {
        for (uint32_t i = 0; i < s->code_objects.n_alloc; i++) {
                SessionCodeObject *sco = handle_table_slot(&s->code_objects, i);
                if (sco)
                        code_object_drop(s, sco);
        }
        handle_table_done(&s->code_objects);
}

static void put_le(uint8_t *dst, uint32_t size, uint64_t v) {
        for (uint32_t i = 0; i < size; i++)
                dst[i] = i < 8 ? (uint8_t) (v >> (8 * i)) : 0;
}

/*
 * Lays one explicit argument's value into the kernarg bytes, after checking
 * it against the kernel's metadata. *lds is the LDS used so far (static +
 * earlier local-pointer regions), advanced for a local pointer the way the
 * GPU layer places them: each region 16-byte aligned, in argument order.
 */
static int lay_arg(Session *s, uint64_t id, size_t idx, size_t a, const GpuKernel *k,
                   const GpuKernelArg *ka, const WireKernelArg *wa, Job *j, uint64_t *lds) {
        char field[96], esc[sizeof(ka->name) * 4 + 1], name[sizeof(esc) + 64];

        snprintf(field, sizeof(field), "submit.jobs[%zu].dispatch.args[%zu]", idx, a);
        /* "argument 1 ("x")", or "argument 1" when the metadata has no names
         * (clang without -cl-kernel-arg-info). Names come from the client's
         * ELF: escaped, since messages get logged. */
        log_escape(ka->name, sizeof(ka->name), esc, sizeof(esc));
        if (esc[0])
                snprintf(name, sizeof(name), "argument %zu (\"%s\")", a, esc);
        else
                snprintf(name, sizeof(name), "argument %zu", a);
        if ((ka->kind == GPU_ARG_BY_VALUE && wa->type != WIRE_ARG_BYTES) ||
            (ka->kind == GPU_ARG_GLOBAL_BUFFER && wa->type != WIRE_ARG_BUFFER) ||
            (ka->kind == GPU_ARG_DYNAMIC_LDS && wa->type != WIRE_ARG_LOCAL_SIZE))
                return fail(s, id, EINVAL, "%s: %s of kernel \"%s\" is %s, got %s",
                            field, name, k->name, arg_kind_description(ka->kind),
                            wire_arg_name(wa->type));

        switch (ka->kind) {
        case GPU_ARG_BY_VALUE:
                if (wa->n_bytes != ka->size)
                        return fail(s, id, EINVAL,
                                    "%s.bytes: %s of kernel \"%s\" takes %" PRIu32 " bytes, got %" PRIu32,
                                    field, name, k->name, ka->size, wa->n_bytes);
                sched_args_append(j->args, &j->sched.args_packed_size, ka->offset, wa->bytes, wa->n_bytes);
                return 0;
        case GPU_ARG_GLOBAL_BUFFER: {
                GpuBuffer *b;
                char hfield[112];

                if (ka->size != 8)
                        return fail(s, id, EINVAL,
                                    "%s: %s of kernel \"%s\" is a %" PRIu32 "-byte pointer; only 64-bit pointers are supported",
                                    field, name, k->name, ka->size);
                snprintf(hfield, sizeof(hfield), "dispatch.args[%zu].buffer.handle", a);
                b = session_job_buffer(s, id, idx, hfield, wa->handle, j->on, NULL);
                if (!b)
                        return -ENOENT;
                if (wa->offset >= gpu_buffer_get_size(b))
                        return fail(s, id, ERANGE,
                                    "%s.buffer.offset: %" PRIu64 " is outside the %" PRIu64 "-byte buffer",
                                    field, wa->offset, gpu_buffer_get_size(b));
                /* The kernel gets the buffer's address in the GPU context it
                 * runs in, filled in when it is submitted there; it may reach
                 * the whole buffer, and whatever else that context maps
                 * (docs/security.md). */
                j->relocs[j->n_buffers] = (ContextReloc) { .arg_offset = ka->offset, .buffer = b,
                                                          .offset = wa->offset };
                j->buffers[j->n_buffers++] = gpu_buffer_ref(b);
                return 0;
        }
        case GPU_ARG_DYNAMIC_LDS: {
                uint32_t max = device_lds_bytes(j->on->gpu);

                if (ka->size < 4)
                        return fail(s, id, EINVAL,
                                    "%s: %s of kernel \"%s\" is a %" PRIu32 "-byte local pointer, too small to hold an LDS address",
                                    field, name, k->name, ka->size);
                *lds = align_up_u64(*lds, 16) + wa->local_size;
                if (*lds > max)
                        return fail(s, id, EINVAL,
                                    "%s.local_size: %" PRIu32 " bytes for %s bring kernel \"%s\" to %" PRIu64 " bytes of LDS (%" PRIu32 " static + local regions, 16-byte aligned), the device has %" PRIu32,
                                    field, wa->local_size, name, k->name, *lds,
                                    k->group_segment_size, max);
                /* The GPU layer replaces the size with the region's LDS
                 * address. Bytes past the eighth are zero in the image. */
                uint8_t le[8];
                put_le(le, sizeof le, wa->local_size);
                sched_args_append(j->args, &j->sched.args_packed_size, ka->offset, le, MIN(ka->size, 8u));
                return 0;
        }
        case GPU_ARG_HIDDEN:
                break;
        }
        return -EINVAL;
}

static int check_grid(Session *s, uint64_t id, size_t idx, const WireJob *wj, const GpuKernel *k) {
        uint64_t threads = (uint64_t) wj->dispatch.block[0] * wj->dispatch.block[1] * wj->dispatch.block[2];
        uint32_t max = k->max_flat_workgroup_size ? MIN(k->max_flat_workgroup_size, WIRE_DISPATCH_MAX_BLOCK)
                                                  : WIRE_DISPATCH_MAX_BLOCK;

        if (threads > max)
                return fail(s, id, EINVAL,
                            "submit.jobs[%zu].dispatch.block: %" PRIu64 " work-items per workgroup, kernel \"%s\" allows at most %" PRIu32,
                            idx, threads, k->name, max);
        return 0;
}

int session_build_dispatch(Session *s, uint64_t id, const WireJob *wj, size_t idx, Job *j) {
        const GpuKernel *k;
        SessionCodeObject *sco;
        uint32_t args_size = 0;
        uint64_t lds, packed = 0;
        unsigned n_explicit = 0, n_buffers = 0;
        char field[80];
        Context *ctx;
        size_t a;
        int r, ki;

        snprintf(field, sizeof(field), "submit.jobs[%zu].dispatch", idx);
        if (!session_has_compute(j->on->gpu))
                return fail(s, id, EOPNOTSUPP, "%s: GPU %u has no compute queue", field, j->on->gpu->index);
        r = session_compute_context(j->on, id, field, &ctx);
        if (r < 0)
                return r;
        snprintf(field, sizeof(field), "submit.jobs[%zu].dispatch.code_object", idx);
        sco = lookup_code_object(s, id, field, wj->dispatch.code_object);
        if (!sco)
                return -ENOENT;
        /* Code objects are checked against the session's own GPU at
         * LoadCodeObject: another GPU of the daemon may be another target. */
        if (j->on->gpu->info->gfx_target_version != s->gpu->info->gfx_target_version)
                return fail(s, id, EXDEV,
                            "%s: code object 0x%" PRIx64 " was loaded for the session's GPU %u (%s); the job runs on GPU %u (%s)",
                            field, wj->dispatch.code_object, s->gpu->index, s->gpu->info->gfx_name,
                            j->on->gpu->index, j->on->gpu->info->gfx_name);
        ki = gpu_code_object_find(sco->co, wj->dispatch.kernel);
        if (ki < 0)
                return fail(s, id, ENOENT,
                            "submit.jobs[%zu].dispatch.kernel: no kernel \"%s\" in code object 0x%" PRIx64,
                            idx, wj->dispatch.kernel, wj->dispatch.code_object);
        k = gpu_code_object_kernel(sco->co, (unsigned) ki);
        r = check_grid(s, id, idx, wj, k);
        if (r < 0)
                return r;

        for (unsigned i = 0; i < k->n_args; i++)
                if (k->args[i].kind != GPU_ARG_HIDDEN) {
                        n_explicit++;
                        n_buffers += k->args[i].kind == GPU_ARG_GLOBAL_BUFFER;
                        args_size = MAX(args_size, k->args[i].offset + k->args[i].size);
                }
        if (wj->dispatch.n_args != n_explicit)
                return fail(s, id, EINVAL,
                            "submit.jobs[%zu].dispatch.args: kernel \"%s\" takes %u argument%s, got %zu",
                            idx, k->name, n_explicit, n_explicit == 1 ? "" : "s",
                            wj->dispatch.n_args);
        if (args_size > SCHED_ARGS_IMAGE_MAX)
                return fail(s, id, EINVAL,
                            "submit.jobs[%zu].dispatch: kernel \"%s\" has %" PRIu32 " bytes of explicit arguments, at most %u fit",
                            idx, k->name, args_size, SCHED_ARGS_IMAGE_MAX);
        /* The arguments are kept as sent, a record each (sched-job.h): a
         * queued dispatch costs what its request carried. Buffers go in
         * as relocations; the image is laid when the job goes to the GPU. */
        for (size_t i = 0; i < wj->dispatch.n_args; i++)
                packed += SCHED_ARGS_RECORD +
                          (wj->dispatch.args[i].type == WIRE_ARG_BYTES ? wj->dispatch.args[i].n_bytes : 8u);
        if (packed > 0) {
                j->args = malloc(packed);
                if (!j->args)
                        return fail(s, id, ENOMEM, "out of memory");
        }
        if (n_buffers > 0) {
                j->buffers = calloc(n_buffers, sizeof(*j->buffers));
                j->relocs = calloc(n_buffers, sizeof(*j->relocs));
                if (!j->buffers || !j->relocs)
                        return fail(s, id, ENOMEM, "out of memory");
        }

        /* Explicit arguments in the kernel's order (its metadata lists them by offset). */
        lds = k->group_segment_size;
        a = 0;
        for (unsigned i = 0; i < k->n_args; i++) {
                if (k->args[i].kind == GPU_ARG_HIDDEN)
                        continue;
                r = lay_arg(s, id, idx, a, k, &k->args[i], &wj->dispatch.args[a], j, &lds);
                if (r < 0)
                        return r;
                a++;
        }
        if (lds > device_lds_bytes(j->on->gpu))
                return fail(s, id, EINVAL,
                            "submit.jobs[%zu].dispatch: kernel \"%s\" needs %" PRIu64 " bytes of LDS, the device has %" PRIu32,
                            idx, k->name, lds, device_lds_bytes(j->on->gpu));

        j->sched.engine = GPU_ENGINE_COMPUTE;
        j->co = gpu_code_object_ref(sco->co);
        j->sched.code = j->co;
        j->sched.relocs = j->relocs;
        j->sched.n_relocs = j->n_buffers;
        j->sched.gpu.type = GPU_JOB_DISPATCH;
        j->sched.gpu.dispatch.co = j->co;
        j->sched.gpu.dispatch.kernel = (unsigned) ki;
        memcpy(j->sched.gpu.dispatch.grid, wj->dispatch.grid, sizeof(j->sched.gpu.dispatch.grid));
        memcpy(j->sched.gpu.dispatch.block, wj->dispatch.block, sizeof(j->sched.gpu.dispatch.block));
        j->sched.gpu.dispatch.dynamic_lds = 0;
        j->sched.args_packed = j->args;
        j->sched.gpu.dispatch.args_data = NULL; /* laid when it goes to the GPU */
        j->sched.gpu.dispatch.args_size = args_size;
        /* A kernel is stopped after DispatchTimeout= on the GPU (or JobTimeout=, if shorter). */
        if (s->policy.dispatch_timeout_ns != POLICY_INFINITY)
                j->sched.timeout_ns = MIN(j->sched.timeout_ns, s->policy.dispatch_timeout_ns);

        /* What only the GPU layer knows to refuse (scratch beyond a queue's,
         * LDS beyond the device's), now rather than as a JobFailed later. */
        char why[256];
        uint8_t image[SCHED_ARGS_IMAGE_MAX];
        sched_args_lay(j->args, j->sched.args_packed_size, image, args_size);
        j->sched.gpu.dispatch.args_data = image;
        r = gpu_dispatch_check(context_pool_device_gpu(j->on->gpu->contexts), &j->sched.gpu, why, sizeof why);
        j->sched.gpu.dispatch.args_data = NULL;
        if (r < 0)
                return fail(s, id, EINVAL, "submit.jobs[%zu].dispatch: %s", idx, why);
        return 0;
}
