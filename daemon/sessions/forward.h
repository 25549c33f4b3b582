/* SPDX-License-Identifier: MIT */
/* Forward declarations of the session layer's objects. */
#pragma once

/* GPUs one daemon serves, at most (kfdbrokerd --gpu=). */
#define SESSION_MAX_GPUS 8u

typedef struct Session Session;
typedef struct SessionSet SessionSet;
typedef struct SessionGpu SessionGpu;
typedef struct SessionOnGpu SessionOnGpu;
typedef struct Job Job;
typedef struct ClientEvent ClientEvent;
typedef struct EventWait EventWait;
typedef struct KeptBuffer KeptBuffer;
