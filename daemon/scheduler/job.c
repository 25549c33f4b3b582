/* SPDX-License-Identifier: MIT */
/* See job.h. */
#include "scheduler/job.h"

#include <stdio.h>
#include <stdlib.h>

#include "sessions/client-event.h"
#include "sessions/session.h"

Job *job_new(Session *s, uint64_t fence, WireJobType type) {
        Job *j = calloc(1, sizeof(*j));

        if (!j)
                return NULL;
        j->session = session_ref(s);
        j->fence = fence;
        j->type = type;
        j->engine = GPU_ENGINE_SDMA;
        j->state = JOB_PENDING;
        j->timeout_ns = UINT64_MAX;
        return j;
}

Job *job_free(Job *j) {
        if (!j)
                return NULL;
        gpu_buffer_unref(j->src);
        gpu_buffer_unref(j->dst);
        for (unsigned i = 0; i < j->n_buffers; i++)
                gpu_buffer_unref(j->buffers[i]);
        free(j->buffers);
        free(j->args);
        gpu_code_object_unref(j->co);
        client_event_unref(j->event);
        session_unref(j->session);
        free(j);
        return NULL;
}

const char *job_type_name(WireJobType t) {
        switch (t) {
        case WIRE_JOB_COPY:
                return "copy";
        case WIRE_JOB_FILL:
                return "fill";
        case WIRE_JOB_SIGNAL_EVENT:
                return "signal-event";
        case WIRE_JOB_WAIT_EVENT:
                return "wait-event";
        case WIRE_JOB_DISPATCH:
                return "dispatch";
        }
        return "unknown";
}

void job_describe(const Job *j, char *buf, size_t size) {
        if (j->type == WIRE_JOB_DISPATCH && j->co &&
            j->gpu.dispatch.kernel < gpu_code_object_n_kernels(j->co))
                snprintf(buf, size, "dispatch of kernel \"%s\"",
                         gpu_code_object_kernel(j->co, j->gpu.dispatch.kernel)->name);
        else
                snprintf(buf, size, "%s job", job_type_name(j->type));
}
