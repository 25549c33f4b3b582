/* SPDX-License-Identifier: MIT */
/* See job.h. */
#include "job.h"

#include <stdlib.h>

#include "client-event.h"
#include "session.h"

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
        }
        return "unknown";
}
