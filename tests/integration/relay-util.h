/* SPDX-License-Identifier: MIT */
/*
 * What the KFD relay's tests share (test-kfd-relay.c, test-kfd-relay-queue.c):
 * the daemon, the topology directories OpenKfd fills, and a relayed client
 * made without ROCr — its session, its KFD process's ops and fds there.
 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "kfd/kfd-ops.h"

extern TestDaemon d;
extern char topo[2][64];
extern char policydir[64];

/* A relayed client: its session, its KFD process's ops, its fds there. */
typedef struct Relayed {
        kfdb_session *s;
        const KfdOps *ops;
        int kfd, render;
        uint32_t gpu_id, minor;
} Relayed;

void relay_teardown(void);
char *read_text(const char *dir, const char *name);
int open_kfd(kfdb_session *s, unsigned slot, int *ret_fd, uint32_t *ret_minor);
void relayed_open(Relayed *c, unsigned slot);
int kioctl(Relayed *c, unsigned long req, void *arg);
void relayed_close(Relayed *c);
uint64_t alloc_at(Relayed *c, uint64_t va, int *ret);
int map(Relayed *c, uint64_t handle);
void acquire(Relayed *c);
uint64_t alloc_size(Relayed *c, uint64_t va, uint64_t size, uint32_t flags, int *ret);
/* The pid of the proxy worker whose KFD process the daemon's log names last
 * (0: none, secondary contexts). */
pid_t logged_worker(void);
/* The daemon with a policy of one [Limits] section holding limits. */
void start_with_limits(const char *limits);
