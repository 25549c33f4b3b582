/* SPDX-License-Identifier: MIT */
/*
 * kfdb_event: an event of a session, known to the daemon by its handle; its
 * age and signaled state are read from its slot in the session page. Owned
 * by the session that made it.
 */
#pragma once

#include "client-session.h"

struct kfdb_event {
        ClientObject object; /* first: the session's list links */
        kfdb_session *session;
        uint64_t handle;
        uint32_t slot;
        bool auto_reset;
};
