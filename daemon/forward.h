/* SPDX-License-Identifier: MIT */
/* Forward declarations of the daemon's top-level objects. */
#pragma once

#include "sessions/forward.h"

typedef struct Manager Manager;
typedef struct Listener Listener;
typedef struct Bus Bus;
