/* SPDX-License-Identifier: MIT */
/*
 * Job batches: jobs are checked here as they are added (alignment, bounds,
 * ownership: the daemon checks again, this gives the caller the error at the
 * call that caused it) and submitted in one Submit request.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client-batch.h"
#include "client-buffer.h"
#include "client-event.h"

/* When the daemon announced no limit, the protocol's own. */
#define BATCH_DEFAULT_MAX_JOBS 1024u

static void batch_release(ClientObject *o) {
        kfdb_batch *b = (kfdb_batch *) o;

        session_object_unlink(&b->object);
        free(b->jobs);
        free(b);
}

int kfdb_batch_new(kfdb_session *s, kfdb_batch **ret) {
        kfdb_batch *b;

        if (!s || !ret)
                return -EINVAL;
        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->session = s;
        session_object_link(s, &b->object, batch_release);
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
                b->n_jobs = 0;
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
        b->jobs[b->n_jobs++] = *job;
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
        job.fill.dst_handle = dst->handle;
        job.fill.dst_offset = off;
        job.fill.size = size;
        job.fill.pattern = pattern;
        return batch_add(b, &job);
}

static int batch_event_job(kfdb_batch *b, kfdb_event *e, ClientJobType type) {
        ClientJob job = { .type = type };

        if (!b)
                return -EINVAL;
        if (!e || e->session != b->session)
                return session_error(b->session, -EINVAL, "%s: not an event of this session",
                                     type == CLIENT_JOB_SIGNAL_EVENT ? "signal_event" : "wait_event");
        job.event.handle = e->handle;
        return batch_add(b, &job);
}

int kfdb_batch_signal_event(kfdb_batch *b, kfdb_event *e) {
        return batch_event_job(b, e, CLIENT_JOB_SIGNAL_EVENT);
}

int kfdb_batch_wait_event(kfdb_batch *b, kfdb_event *e) {
        return batch_event_job(b, e, CLIENT_JOB_WAIT_EVENT);
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
        b->n_jobs = 0;
        return 0;
}
