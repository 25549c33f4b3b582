/* SPDX-License-Identifier: MIT */
/*
 * The uid and gid a root daemon's worker processes run as — never one a
 * client can have, since a client of the same uid could signal (kill, stop)
 * the workers that run other clients' contexts. The choice is made once, at
 * start, by the Manager.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* systemd's range for DynamicUser= (docs/UIDS-GIDS.md in systemd's sources:
 * "61184…65519 → UIDs for dynamic users are allocated from this range"). */
#define WORKER_DYNAMIC_UID_MIN 61184u
#define WORKER_DYNAMIC_UID_MAX 65519u

/**
 * worker_user_pick_dynamic() - a uid (and the gid of the same number) that no
 * account has and no process uses, from systemd's dynamic range.
 * @proc_root: "/proc" (tests may fabricate one)
 * @ret: the id
 *
 * Candidates are tried from a point picked from the name "kfdbroker-worker",
 * as systemd starts from a hash of the unit name: free if getpwuid() and
 * getgrgid() know neither and no process under @proc_root has it as a real,
 * effective, saved or filesystem uid or gid (its "Uid:"/"Gid:" lines).
 * Returns 0, -EBUSY if every id of the range is taken, -ENOMEM, or -errno
 * from reading @proc_root.
 */
int worker_user_pick_dynamic(const char *proc_root, uid_t *ret);

/* True if some process under proc_root runs with id as a uid or gid (any of
 * the four of "Uid:" or "Gid:"); -errno if proc_root cannot be read. */
int worker_user_id_in_use(const char *proc_root, uint32_t id);
