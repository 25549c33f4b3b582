/* SPDX-License-Identifier: MIT */
/* Forward declarations of the session layer's objects. */
#pragma once

typedef struct Session Session;
typedef struct SessionSet SessionSet;
typedef struct Job Job;
typedef struct ClientEvent ClientEvent;
typedef struct EventWait EventWait;
typedef struct KeptBuffer KeptBuffer;
