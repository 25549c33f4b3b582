/* SPDX-License-Identifier: MIT */
/*
 * Bus: the management API on D-Bus (sd-bus). Name org.kfdbroker.Broker1,
 * object /org/kfdbroker/Broker1, interface org.kfdbroker.Broker1; see
 * docs/dbus.md. Owned by the Manager.
 *
 * Authorization: callers with CAP_SYS_ADMIN (root) may do everything; a user
 * may read and terminate their own sessions; everything else — reading other
 * users' sessions, SetLimits, TerminateSession of another user's session,
 * ReloadPolicy — is checked with polkit (actions org.kfdbroker.read-all and
 * org.kfdbroker.manage, shipped in policy/) by an asynchronous
 * CheckAuthorization call, so the loop never waits on polkit. A refusal is
 * org.freedesktop.DBus.Error.AccessDenied with a message that says why.
 */
#pragma once

#include <stdint.h>

#include <systemd/sd-event.h>

#include "sessions/forward.h"

typedef struct Bus Bus;

#define BUS_NAME "org.kfdbroker.Broker1"
#define BUS_PATH "/org/kfdbroker/Broker1"
#define BUS_INTERFACE "org.kfdbroker.Broker1"
#define POLKIT_ACTION_MANAGE "org.kfdbroker.manage"
#define POLKIT_ACTION_READ_ALL "org.kfdbroker.read-all"

typedef enum BusChoice {
        BUS_NONE,
        BUS_SYSTEM,
        BUS_SESSION,
} BusChoice;

typedef struct BusCallbacks {
        void *userdata;
        /* The daemon cannot serve its name (error: why, a negative errno):
         * stop, and exit with a failure. */
        void (*shutdown)(void *userdata, int error);
} BusCallbacks;

int bus_new(sd_event *event, SessionSet *set, BusChoice which, const BusCallbacks *cb, Bus **ret);
Bus *bus_free(Bus *b);

void bus_emit_session_opened(Bus *b, Session *s);
void bus_emit_session_closed(Bus *b, Session *s, const char *reason);
void bus_emit_job_failed(Bus *b, Session *s, uint64_t fence, int error, const char *message);
