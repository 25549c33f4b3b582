/* SPDX-License-Identifier: MIT */
/*
 * Who asked for a management action (TerminateSession, SetLimits,
 * ReloadPolicy, over D-Bus or the socket), for the audit log: the caller's
 * uid, systemd unit and pid, as words for the message and as journal fields.
 * The Identity is the caller's, filled by identity_from_peer() (socket) or
 * identity_from_creds() (D-Bus: the bus's record of the connection, the unit
 * read only through a pidfd); this file only formats it.
 */
#include <stdint.h>
#include <stdio.h>

#include "policy/identity.h"
#include "util/log.h"

static const char *caller_unit(const Identity *id) {
        if (id->process_unknown)
                return NULL;
        return id->user_unit ? id->user_unit : id->unit;
}

const char *identity_caller_describe(const Identity *id, char *buf, size_t n) {
        const char *unit = caller_unit(id);
        char esc[256];

        snprintf(buf, n, "uid %u (unit %s, pid %d)", (unsigned) id->uid,
                 unit ? log_escape(unit, SIZE_MAX, esc, sizeof(esc)) : "unknown", (int) id->pid);
        return buf;
}

void identity_caller_log_fields(const Identity *id, LogFields *f) {
        const char *unit = caller_unit(id);
        char esc[512];

        log_fields_add(f, "KFDBROKER_CALLER_UID=%u", (unsigned) id->uid);
        log_fields_add(f, "KFDBROKER_CALLER_PID=%d", (int) id->pid);
        if (unit)
                log_fields_add(f, "KFDBROKER_CALLER_UNIT=%s", log_escape(unit, SIZE_MAX, esc, sizeof(esc)));
}
