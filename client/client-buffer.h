/* SPDX-License-Identifier: MIT */
/*
 * kfdb_buffer: a GPU buffer of a session, known to the daemon by its handle
 * and to this process by its dma-buf fd and (once mapped) its mapping. Owned
 * by the session that made it.
 */
#pragma once

#include "client-session.h"

/* The largest buffer whose free waits for the session's next request
 * (kfdb_buffer_free()): the largest the daemon pools (SESSION_POOL_MAX_BUFFER_SIZE,
 * docs/protocol.md "Buffers"), so what waits is charged as it would be once
 * freed. */
#define CLIENT_DEFER_FREE_MAX (UINT64_C(256) << 10)

struct kfdb_buffer {
        ClientObject object; /* first: the session's list links */
        kfdb_session *session;
        uint64_t handle;
        uint64_t size;
        uint32_t gpu; /* the index of the GPU it is on, as the daemon said */
        int fd;
        void *map;
        /* Its fd was handed to the caller (kfdb_buffer_get_fd) or the buffer
         * imported: a copy may live on after kfdb_buffer_free(), so the
         * daemon is not told that none is kept. */
        bool fd_shared;
};
