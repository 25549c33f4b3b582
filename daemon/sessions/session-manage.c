/* SPDX-License-Identifier: MIT */
/*
 * Management over the socket: a client ends another session of its own uid
 * (root: of any uid) with a TerminateSession request, as TerminateSession
 * over D-Bus does, for a daemon run without a bus. The caller is the
 * requesting Session, whose identity was pinned when it connected; every
 * action, refused or done, is logged with its uid, unit and pid.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "policy/identity.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/log-ids.h"
#include "util/log.h"

void session_handle_terminate(Session *s, const WireRequest *req) {
        uint64_t id = req->terminate_session.session_id;
        const char *reason = req->terminate_session.reason;
        char caller[384], why[384 + 16 + WIRE_TERMINATE_REASON_MAX + 1];
        LogFields f = {};
        Session *t;

        identity_caller_describe(&s->identity, caller, sizeof(caller));
        t = session_set_find(s->set, id);
        /* Another user's session is reported as no session: its id tells nothing. */
        if (!t || (s->identity.uid != 0 && t->identity.uid != s->identity.uid)) {
                identity_caller_log_fields(&s->identity, &f);
                log_fields_add(&f, "KFDBROKER_SESSION=%" PRIu64, id);
                log_struct(LOG_NOTICE, KFDBROKER_MESSAGE_SESSION_TERMINATED, &f,
                           "Session %" PRIu64 ": TerminateSession over the socket by %s refused: %s", id, caller,
                           t ? "another user's session" : "no such session");
                if (t) {
                        session_send_error(s, req->id, EPERM,
                                           "terminate_session.session_id: session %" PRIu64 " is not one of uid %u's sessions; only root ends another user's",
                                           id, (unsigned) s->identity.uid);
                        return;
                }
                session_send_error(s, req->id, ENOENT, "terminate_session.session_id: no session %" PRIu64, id);
                return;
        }
        if (t == s) {
                session_send_error(s, req->id, EINVAL,
                                   "terminate_session.session_id: %" PRIu64 " is this session; close the connection to end it",
                                   id);
                return;
        }

        snprintf(why, sizeof(why), "terminated by %s%s%s", caller, reason[0] ? ": " : "", reason);
        session_log_fields(t, &f);
        identity_caller_log_fields(&s->identity, &f);
        log_struct(LOG_NOTICE, KFDBROKER_MESSAGE_SESSION_TERMINATED, &f,
                   "Session %" PRIu64 ": terminated over the socket by %s%s%s", id, caller, reason[0] ? ": " : "",
                   reason);
        session_end(t, ECONNABORTED, why, false);
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_EMPTY }, NULL, 0);
}
