/* SPDX-License-Identifier: MIT */
/*
 * kfdb_batch: jobs collected on the client, checked against the buffers'
 * sizes as they are added, and sent as one Submit. Owned by its session.
 */
#pragma once

#include "client-session.h"

struct kfdb_batch {
        ClientObject object; /* first: the session's list links */
        kfdb_session *session;
        ClientJob *jobs;
        size_t n_jobs, n_allocated;
        uint32_t gpu; /* the GPU of the jobs added now (kfdb_batch_set_gpu()), or KFDB_GPU_SESSION */
};
