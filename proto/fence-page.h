/* SPDX-License-Identifier: MIT */
/*
 * The fence page (feature "fence-page", docs/protocol.md "The fence page"):
 * 4096 bytes of GPU memory of the daemon's GPU context, given to the client by
 * OpenFencePage as a dma-buf it maps read-only. When a copy or fill of the
 * session is done, the SDMA engine itself — after the job's last write, after
 * the daemon's own fence for it — stores the low 32 bits of the job's fence in
 * slots[fence % KFDB_FENCE_PAGE_SLOTS]. No daemon thread is on that path, so a
 * client that polls its slot sees the job done a few wake-ups before the
 * session page says so.
 *
 * What a slot proves: slots[f % N] == (uint32_t) f means job f ran to its
 * end and succeeded (a job that fails or is cancelled never gets there; one
 * whose access faulted neither, though the GPU runs on past a fault: the
 * engine writes the slot only after the kernel has handled every interrupt
 * raised before it, docs/architecture.md "Completion and faults"), and
 * every job of the session before it has finished too, as completed_fence
 * >= f would say: the daemon gives a copy or fill its slot write only when
 * every unfinished job before it is a copy or fill, all on the session's one
 * DMA queue ahead of it. Anything else proves nothing — the job is not done
 * yet, or failed, or it came after an unfinished dispatch or event job, or a
 * later job of the same slot wrote over it — and the session page stays the
 * one authority on every job. Dispatches and event jobs write no slot. The
 * daemon reads one slot of the page only to decide whether to write the
 * session eventfd early (the slot of the session's last copy or fill, after
 * each completion interrupt): what a client writes there can make it write
 * that eventfd, nothing else. A new page holds ~i in slot i, a value no
 * fence of that slot has.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define KFDB_FENCE_PAGE_SIZE 4096u
#define KFDB_FENCE_PAGE_SLOTS (KFDB_FENCE_PAGE_SIZE / 4u)

/* The slot of fence f in a page of n slots (n as OpenFencePageReply said). */
static inline unsigned kfdb_fence_page_slot(uint64_t f, uint32_t n) {
        return (unsigned) (f % n);
}

/* What slot i of a new page holds: no fence of the slot (those are i modulo
 * the slots) has this value. */
static inline uint32_t kfdb_fence_page_fresh_slot(uint32_t i) {
        return ~i;
}

/* Whether the slot's value says job f is done and succeeded. */
static inline bool kfdb_fence_page_says_done(uint32_t slot_value, uint64_t f) {
        return slot_value == (uint32_t) f;
}
