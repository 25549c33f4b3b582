/* SPDX-License-Identifier: MIT */
/*
 * A table of session-scoped handles. A handle names one object of one type in
 * one session: it encodes the type tag, a generation counter and a slot index,
 * so a handle of another type, a freed handle or a made-up number is refused
 * instead of resolving to whatever reuses the slot. Lookups never cross
 * sessions because each session owns its own tables.
 *
 *   handle = tag << 56 | (generation ^ salt) << 24 | index     (index < 2^24)
 *
 * The salt is random per table (so per session): a handle value copied from
 * another session resolves to nothing here rather than to this session's
 * object in the same slot (probability 2^-32 of a match).
 */
#pragma once

#include <stdint.h>

typedef struct HandleTable {
        uint8_t tag;
        uint32_t salt;
        uint32_t max;       /* capacity limit (slots) */
        uint32_t n_used;
        uint32_t n_alloc;
        struct HandleSlot {
                void *obj;
                uint32_t generation;
        } *slots;
} HandleTable;

void handle_table_init(HandleTable *t, uint8_t tag, uint32_t max);
/* Frees the slot array only; the caller frees the objects first. */
void handle_table_done(HandleTable *t);
/* Stores obj in the lowest free slot. -EDQUOT if max slots are used, -ENOMEM. */
int handle_table_add(HandleTable *t, void *obj, uint64_t *ret_handle, uint32_t *ret_index);
/* The object for handle, or NULL if the handle is not a live handle of this table. */
void *handle_table_get(const HandleTable *t, uint64_t handle);
/* Removes and returns the object, or NULL. */
void *handle_table_remove(HandleTable *t, uint64_t handle);
/* Iteration: the object in slot i (may be NULL); i < t->n_alloc. */
static inline void *handle_table_slot(const HandleTable *t, uint32_t i) {
        return t->slots[i].obj;
}
/* The tag encoded in any handle, to name the right type in an error. */
static inline uint8_t handle_tag(uint64_t handle) {
        return (uint8_t) (handle >> 56);
}
