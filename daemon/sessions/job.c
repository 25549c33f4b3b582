/* SPDX-License-Identifier: MIT */
/* See job.h. */
#include "sessions/job.h"

#include <stdio.h>
#include <stdlib.h>

#include "sessions/client-event.h"
#include "sessions/kfd-relay.h"
#include "sessions/session.h"

Job *job_new(Session *s, uint64_t fence, WireJobType type) {
        Job *j = calloc(1, sizeof(*j));

        if (!j)
                return NULL;
        j->session = session_ref(s);
        j->on = &s->home;
        j->fence = fence;
        j->type = type;
        j->sched.kind = type == WIRE_JOB_SIGNAL_EVENT ? SCHED_JOB_SIGNAL
                        : type == WIRE_JOB_WAIT_EVENT ? SCHED_JOB_WAIT
                                                      : SCHED_JOB_WORK;
        j->sched.engine = GPU_ENGINE_SDMA;
        j->sched.owner_id = s->id;
        j->sched.timeout_ns = UINT64_MAX;
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
        free(j->relocs);
        gpu_code_object_unref(j->co);
        client_event_unref(j->event);
        if (j->relay)
                kfd_relay_unref(j->relay);
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
