/* SPDX-License-Identifier: MIT */
/*
 * Job batches: jobs are checked here as they are added (alignment, bounds,
 * ownership: the daemon checks again, this gives the caller the error at the
 * call that caused it) and submitted in one Submit request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client-batch.h"
#include "client-buffer.h"
#include "client-code-object.h"
#include "client-event.h"

/* When the daemon announced no limit, the protocol's own. */
#define BATCH_DEFAULT_MAX_JOBS 1024u

/* A dispatch job owns one block: its ClientKernelArg array, the kernel name
 * and the argument bytes (dispatch.args points at its start). */
static void batch_jobs_clear(kfdb_batch *b) {
        for (size_t i = 0; i < b->n_jobs; i++)
                if (b->jobs[i].type == CLIENT_JOB_DISPATCH)
                        free((void *) b->jobs[i].dispatch.args);
        b->n_jobs = 0;
}

static void batch_release(ClientObject *o) {
        kfdb_batch *b = (kfdb_batch *) o;

        session_object_unlink(&b->object);
        batch_jobs_clear(b);
        free(b->jobs);
        free(b);
}

/* After a daemon restart: the jobs name the new handles of their objects. */
static int batch_restore(ClientObject *o, ClientHandleMap *map) {
        kfdb_batch *b = (kfdb_batch *) o;

        for (size_t i = 0; i < b->n_jobs; i++) {
                ClientJob *j = &b->jobs[i];

                switch (j->type) {
                case CLIENT_JOB_COPY:
                        j->copy.src_handle = client_handle_map_get(map, j->copy.src_handle);
                        j->copy.dst_handle = client_handle_map_get(map, j->copy.dst_handle);
                        break;
                case CLIENT_JOB_FILL:
                        j->fill.dst_handle = client_handle_map_get(map, j->fill.dst_handle);
                        break;
                case CLIENT_JOB_SIGNAL_EVENT:
                case CLIENT_JOB_WAIT_EVENT:
                        j->event.handle = client_handle_map_get(map, j->event.handle);
                        break;
                case CLIENT_JOB_DISPATCH: {
                        /* The batch owns the argument block (batch_jobs_clear). */
                        ClientKernelArg *args = (ClientKernelArg *) j->dispatch.args;

                        j->dispatch.code_object = client_handle_map_get(map, j->dispatch.code_object);
                        for (size_t a = 0; a < j->dispatch.n_args; a++)
                                if (args[a].type == CLIENT_ARG_BUFFER)
                                        args[a].handle = client_handle_map_get(map, args[a].handle);
                        break;
                }
                }
        }
        return 0;
}

int kfdb_batch_new(kfdb_session *s, kfdb_batch **ret) {
        kfdb_batch *b;

        if (!s || !ret)
                return -EINVAL;
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->session = s;
        b->gpu = KFDB_GPU_SESSION;
        session_object_link(s, &b->object, batch_release, batch_restore, true);
        *ret = b;
        return 0;
}

kfdb_batch *kfdb_batch_free(kfdb_batch *b) {
        if (b)
                batch_release(&b->object);
        return NULL;
}

void kfdb_batch_reset(kfdb_batch *b) {
        if (b)
                batch_jobs_clear(b);
}

size_t kfdb_batch_get_n_jobs(const kfdb_batch *b) {
        return b ? b->n_jobs : 0;
}

static size_t batch_max_jobs(const kfdb_batch *b) {
        uint32_t m = b->session->limits.max_jobs_per_submit;
        return m > 0 && m < BATCH_DEFAULT_MAX_JOBS ? m : BATCH_DEFAULT_MAX_JOBS;
}

static int batch_add(kfdb_batch *b, const ClientJob *job) {
        if (b->n_jobs >= batch_max_jobs(b))
                return session_error(b->session, -E2BIG, "batch already holds %zu jobs, the most one Submit takes",
                                     b->n_jobs);
        if (b->n_jobs == b->n_allocated) {
                size_t n = MAX(b->n_allocated * 2, (size_t) 16);
                ClientJob *jobs = reallocarray(b->jobs, n, sizeof(*jobs));
                if (!jobs)
                        return -ENOMEM;
                b->jobs = jobs;
                b->n_allocated = n;
        }
        b->jobs[b->n_jobs] = *job;
        if (b->gpu != KFDB_GPU_SESSION) {
                b->jobs[b->n_jobs].has_gpu = true;
                b->jobs[b->n_jobs].gpu = b->gpu;
        }
        b->n_jobs++;
        return 0;
}

int kfdb_batch_set_gpu(kfdb_batch *b, uint32_t gpu) {
        if (!b)
                return -EINVAL;
        b->gpu = gpu;
        return 0;
}

uint32_t kfdb_batch_get_gpu(const kfdb_batch *b) {
        return b ? b->gpu : KFDB_GPU_SESSION;
}

/* A fill's or a dispatch's buffer is on the GPU the job runs on (only a copy
 * reaches a buffer of another GPU: the daemon imports it). */
static int check_buffer_gpu(kfdb_batch *b, const char *what, const kfdb_buffer *buf) {
        uint32_t gpu = b->gpu == KFDB_GPU_SESSION ? b->session->gpu : b->gpu;

        if (buf->gpu != gpu)
                return session_error(b->session, -EINVAL,
                                     "%s: the buffer is on GPU %u and the job runs on GPU %u; only a copy takes a "
                                     "buffer of another GPU",
                                     what, buf->gpu, gpu);
        return 0;
}

static int check_buffer_range(kfdb_batch *b, const char *what, const kfdb_buffer *buf,
                              uint64_t off, uint64_t size) {
        if (!buf || buf->session != b->session)
                return session_error(b->session, -EINVAL, "%s: not a buffer of this session", what);
        if (off % KFDB_JOB_ALIGNMENT != 0)
                return session_error(b->session, -EINVAL,
                                     "%s: offset %" PRIu64 " is not a multiple of 4", what, off);
        if (!range_in_bounds(off, size, buf->size))
                return session_error(b->session, -EINVAL,
                                     "%s: range %" PRIu64 "+%" PRIu64 " exceeds the buffer's %" PRIu64
                                     " bytes",
                                     what, off, size, buf->size);
        return 0;
}

static int check_size(kfdb_batch *b, const char *what, uint64_t size) {
        if (size == 0)
                return session_error(b->session, -EINVAL, "%s: size must be > 0", what);
        if (size % KFDB_JOB_ALIGNMENT != 0)
                return session_error(b->session, -EINVAL,
                                     "%s: size %" PRIu64 " is not a multiple of 4", what, size);
        return 0;
}

int kfdb_batch_copy(kfdb_batch *b, kfdb_buffer *dst, uint64_t dst_off, kfdb_buffer *src,
                    uint64_t src_off, uint64_t size) {
        ClientJob job = { .type = CLIENT_JOB_COPY };
        int k;

        if (!b)
                return -EINVAL;
        k = check_size(b, "copy", size);
        if (k < 0)
                return k;
        k = check_buffer_range(b, "copy source", src, src_off, size);
        if (k < 0)
                return k;
        k = check_buffer_range(b, "copy destination", dst, dst_off, size);
        if (k < 0)
                return k;
        job.copy.src_handle = src->handle;
        job.copy.src_offset = src_off;
        job.copy.dst_handle = dst->handle;
        job.copy.dst_offset = dst_off;
        job.copy.size = size;
        return batch_add(b, &job);
}

int kfdb_batch_fill(kfdb_batch *b, kfdb_buffer *dst, uint64_t off, uint64_t size, uint32_t pattern) {
        ClientJob job = { .type = CLIENT_JOB_FILL };
        int k;

        if (!b)
                return -EINVAL;
        k = check_size(b, "fill", size);
        if (k < 0)
                return k;
        k = check_buffer_range(b, "fill", dst, off, size);
        if (k < 0)
                return k;
        k = check_buffer_gpu(b, "fill", dst);
        if (k < 0)
                return k;
        job.fill.dst_handle = dst->handle;
        job.fill.dst_offset = off;
        job.fill.size = size;
        job.fill.pattern = pattern;
        return batch_add(b, &job);
}

static int batch_event_job(kfdb_batch *b, kfdb_event *e, ClientJobType type, kfdb_engine engine) {
        const char *what = type == CLIENT_JOB_SIGNAL_EVENT ? "signal_event" : "wait_event";
        ClientJob job = { .type = type };

        if (!b)
                return -EINVAL;
        if (!e || e->session != b->session)
                return session_error(b->session, -EINVAL, "%s: not an event of this session", what);
        if (engine != KFDB_ENGINE_AUTO && engine != KFDB_ENGINE_SDMA && engine != KFDB_ENGINE_COMPUTE)
                return session_error(b->session, -EINVAL, "%s: unknown engine %d", what, (int) engine);
        job.event.handle = e->handle;
        job.event.engine = (uint32_t) engine;
        return batch_add(b, &job);
}

int kfdb_batch_signal_event(kfdb_batch *b, kfdb_event *e) {
        return batch_event_job(b, e, CLIENT_JOB_SIGNAL_EVENT, KFDB_ENGINE_AUTO);
}

int kfdb_batch_wait_event(kfdb_batch *b, kfdb_event *e) {
        return batch_event_job(b, e, CLIENT_JOB_WAIT_EVENT, KFDB_ENGINE_AUTO);
}

int kfdb_batch_signal_event_on(kfdb_batch *b, kfdb_event *e, kfdb_engine engine) {
        return batch_event_job(b, e, CLIENT_JOB_SIGNAL_EVENT, engine);
}

int kfdb_batch_wait_event_on(kfdb_batch *b, kfdb_event *e, kfdb_engine engine) {
        return batch_event_job(b, e, CLIENT_JOB_WAIT_EVENT, engine);
}

static const char *arg_type_name(kfdb_arg_type t) {
        switch (t) {
        case KFDB_ARG_VALUE:
                return "a value";
        case KFDB_ARG_BUFFER:
                return "a buffer";
        case KFDB_ARG_LOCAL:
                return "a local size";
        }
        return "an unknown argument type";
}

static const char *kind_wants(kfdb_kernel_arg_kind k) {
        switch (k) {
        case KFDB_KERNEL_ARG_BY_VALUE:
                return "a value (kfdb_arg_value)";
        case KFDB_KERNEL_ARG_GLOBAL_BUFFER:
                return "a buffer (kfdb_arg_buffer)";
        case KFDB_KERNEL_ARG_DYNAMIC_LDS:
                return "a local size (kfdb_arg_local)";
        default:
                return "an argument kind this library cannot pass";
        }
}

/* Checks one explicit argument against the kernel's metadata. */
static int check_arg(kfdb_batch *b, const kfdb_kernel *k, size_t i, const kfdb_kernel_arg *ka,
                     const kfdb_arg *a) {
        char name[160];
        bool ok = (ka->kind == KFDB_KERNEL_ARG_BY_VALUE && a->type == KFDB_ARG_VALUE) ||
                  (ka->kind == KFDB_KERNEL_ARG_GLOBAL_BUFFER && a->type == KFDB_ARG_BUFFER) ||
                  (ka->kind == KFDB_KERNEL_ARG_DYNAMIC_LDS && a->type == KFDB_ARG_LOCAL);

        if (ka->name[0])
                snprintf(name, sizeof(name), "argument %zu (\"%s\")", i, ka->name);
        else
                snprintf(name, sizeof(name), "argument %zu", i);
        if (!ok)
                return session_error(b->session, -EINVAL,
                                     "dispatch: %s of kernel \"%s\" takes %s, got %s", name, k->name,
                                     kind_wants(ka->kind), arg_type_name(a->type));
        switch (a->type) {
        case KFDB_ARG_VALUE:
                if (!a->value || a->size != ka->size)
                        return session_error(b->session, -EINVAL,
                                             "dispatch: %s of kernel \"%s\" takes %" PRIu32
                                             " bytes, got %zu",
                                             name, k->name, ka->size, a->value ? a->size : 0);
                return 0;
        case KFDB_ARG_BUFFER:
                if (!a->buffer || a->buffer->session != b->session)
                        return session_error(b->session, -EINVAL,
                                             "dispatch: %s: not a buffer of this session", name);
                if (a->offset >= a->buffer->size)
                        return session_error(b->session, -EINVAL,
                                             "dispatch: %s: offset %" PRIu64
                                             " is outside the %" PRIu64 "-byte buffer",
                                             name, a->offset, a->buffer->size);
                return 0;
        case KFDB_ARG_LOCAL:
                if (a->local_size == 0)
                        return session_error(b->session, -EINVAL,
                                             "dispatch: %s: the local size must be > 0", name);
                return 0;
        }
        return -EINVAL;
}

int kfdb_batch_dispatch(kfdb_batch *b, const kfdb_code_object *co, const char *name, unsigned n_dims,
                        const uint32_t *grid, const uint32_t *block, const kfdb_arg *args, size_t n_args) {
        ClientJob job = { .type = CLIENT_JOB_DISPATCH };
        const kfdb_kernel *k;
        ClientKernelArg *cargs;
        size_t blob, name_len, a, value_bytes = 0;
        uint64_t threads = 1;
        uint32_t max_wg;
        uint8_t *p;
        int r;

        if (!b)
                return -EINVAL;
        if (!co || co->session != b->session)
                return session_error(b->session, -EINVAL, "dispatch: not a code object of this session");
        if (!name)
                return session_error(b->session, -EINVAL, "dispatch: no kernel name");
        k = kfdb_code_object_find_kernel(co, name);
        if (!k)
                return session_error(b->session, -ENOENT, "dispatch: no kernel \"%s\" in the code object", name);
        if (n_dims < 1 || n_dims > 3 || !grid || !block)
                return session_error(b->session, -EINVAL, "dispatch: 1 to 3 grid and block dimensions needed, got %u",
                                     n_dims);
        for (unsigned d = 0; d < n_dims; d++) {
                if (grid[d] == 0 || block[d] == 0)
                        return session_error(b->session, -EINVAL, "dispatch: %s[%u] must be >= 1",
                                             grid[d] == 0 ? "grid" : "block", d);
                threads *= block[d];
        }
        max_wg = k->max_workgroup_size && k->max_workgroup_size < 1024 ? k->max_workgroup_size : 1024;
        if (threads > max_wg)
                return session_error(b->session, -EINVAL,
                                     "dispatch: %" PRIu64 " work-items per workgroup, kernel \"%s\" allows at most %" PRIu32,
                                     threads, k->name, max_wg);
        if (n_args != k->n_explicit || (n_args > 0 && !args))
                return session_error(b->session, -EINVAL, "dispatch: kernel \"%s\" takes %zu arguments, got %zu",
                                     k->name, k->n_explicit, n_args);
        a = 0;
        for (size_t i = 0; i < k->n_args; i++) {
                if (k->args[i].kind == KFDB_KERNEL_ARG_HIDDEN)
                        continue;
                r = check_arg(b, k, a, &k->args[i], &args[a]);
                if (r < 0)
                        return r;
                if (args[a].type == KFDB_ARG_VALUE)
                        value_bytes += args[a].size;
                a++;
        }

        /* One block: the argument array, the name, the values. */
        name_len = strlen(k->name) + 1;
        blob = n_args * sizeof(ClientKernelArg) + name_len + value_bytes;
        cargs = calloc(1, blob ? blob : 1);
        if (!cargs)
                return -ENOMEM;
        p = (uint8_t *) (cargs + n_args);
        memcpy(p, k->name, name_len);
        job.dispatch.kernel = (const char *) p;
        p += name_len;
        for (a = 0; a < n_args; a++) {
                switch (args[a].type) {
                case KFDB_ARG_VALUE:
                        memcpy(p, args[a].value, args[a].size);
                        cargs[a] = (ClientKernelArg) { .type = CLIENT_ARG_BYTES, .bytes = p,
                                                       .n_bytes = (uint32_t) args[a].size };
                        p += args[a].size;
                        break;
                case KFDB_ARG_BUFFER:
                        cargs[a] = (ClientKernelArg) { .type = CLIENT_ARG_BUFFER, .handle = args[a].buffer->handle,
                                                       .offset = args[a].offset };
                        break;
                case KFDB_ARG_LOCAL:
                        cargs[a] = (ClientKernelArg) { .type = CLIENT_ARG_LOCAL_SIZE,
                                                       .local_size = args[a].local_size };
                        break;
                }
        }
        job.dispatch.code_object = co->handle;
        job.dispatch.n_dims = n_dims;
        for (unsigned d = 0; d < 3; d++) {
                job.dispatch.grid[d] = d < n_dims ? grid[d] : 1;
                job.dispatch.block[d] = d < n_dims ? block[d] : 1;
        }
        job.dispatch.args = cargs;
        job.dispatch.n_args = n_args;
        r = batch_add(b, &job);
        if (r < 0)
                free(cargs);
        return r;
}

int kfdb_batch_submit(kfdb_batch *b, uint64_t *fences_out, uint64_t *ret_last_fence) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_SUBMIT };
        kfdb_session *s;
        int k;

        if (!b)
                return -EINVAL;
        s = b->session;
        if (b->n_jobs == 0)
                return session_error(s, -ENODATA, "kfdb_batch_submit: the batch is empty");
        /* A daemon from before "gpu-per-job" would run every job on the session's GPU. */
        for (size_t i = 0; i < b->n_jobs; i++)
                if (b->jobs[i].has_gpu && b->jobs[i].gpu != s->gpu && !kfdb_session_has_feature(s, "gpu-per-job"))
                        return session_error(s, -EOPNOTSUPP,
                                             "kfdb_batch_submit: job %zu names GPU %u, and kfdbrokerd %s runs a "
                                             "session's jobs on its GPU (%u) only (no feature \"gpu-per-job\")",
                                             i, b->jobs[i].gpu, kfdb_session_get_daemon_version(s), s->gpu);
        /* A lazy session's first submit makes its page, ring and fence page. */
        k = session_submit_need(s);
        if (k < 0)
                return k;
        /* Through the submit ring when it can take the batch: no round trip. */
        k = session_ring_submit(s, b->jobs, b->n_jobs, fences_out);
        if (k < 0)
                return k;
        if (k > 0) {
                if (ret_last_fence)
                        *ret_last_fence = s->last_fence;
                batch_jobs_clear(b);
                return 0;
        }
        req.submit.jobs = b->jobs;
        req.submit.n_jobs = b->n_jobs;
        k = session_call(s, &req, NULL, 0, &r);
        if (k < 0)
                return k;
        if (r->submit.n_fences != b->n_jobs)
                return session_error(s, -EBADMSG,
                                     "kfdbrokerd returned %zu fences for a batch of %zu jobs",
                                     r->submit.n_fences, b->n_jobs);
        for (size_t i = 1; i < r->submit.n_fences; i++)
                if (r->submit.fences[i] <= r->submit.fences[i - 1])
                        return session_error(s, -EBADMSG, "kfdbrokerd returned fences out of order");
        if (fences_out)
                memcpy(fences_out, r->submit.fences, r->submit.n_fences * sizeof(uint64_t));
        s->last_fence = MAX(s->last_fence, r->submit.fences[r->submit.n_fences - 1]);
        if (ret_last_fence)
                *ret_last_fence = r->submit.fences[r->submit.n_fences - 1];
        batch_jobs_clear(b);
        return 0;
}
