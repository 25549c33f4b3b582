/* SPDX-License-Identifier: MIT */
/* Forward declarations of the daemon's core objects. */
#pragma once

typedef struct Manager Manager;
typedef struct Listener Listener;
typedef struct Session Session;
typedef struct Scheduler Scheduler;
typedef struct SchedStream SchedStream;
typedef struct Job Job;
typedef struct ClientEvent ClientEvent;
typedef struct EventWait EventWait;
typedef struct Bus Bus;
