/* SPDX-License-Identifier: MIT */
/* See handle-table.h. */
#include "handle-table.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define INDEX_BITS 24
#define INDEX_MASK ((1u << INDEX_BITS) - 1)

void handle_table_init(HandleTable *t, uint8_t tag, uint32_t max) {
        uint32_t salt = 0;

        /* Not a secret, only a per-session scramble: getrandom without blocking. */
        if (getrandom(&salt, sizeof(salt), GRND_NONBLOCK) != sizeof(salt))
                salt = (uint32_t) (uintptr_t) t ^ (uint32_t) time(NULL);
        *t = (HandleTable) { .tag = tag, .salt = salt, .max = max > INDEX_MASK ? INDEX_MASK : max };
}

void handle_table_done(HandleTable *t) {
        free(t->slots);
        t->slots = NULL;
        t->n_alloc = t->n_used = 0;
}

static uint64_t make_handle(const HandleTable *t, uint32_t index) {
        return (uint64_t) t->tag << 56 |
               (uint64_t) (t->slots[index].generation ^ t->salt) << INDEX_BITS | index;
}

int handle_table_add(HandleTable *t, void *obj, uint64_t *ret_handle, uint32_t *ret_index) {
        uint32_t i;

        if (t->n_used >= t->max)
                return -EDQUOT;
        for (i = 0; i < t->n_alloc; i++)
                if (!t->slots[i].obj)
                        break;
        if (i == t->n_alloc) {
                uint32_t n = t->n_alloc ? t->n_alloc * 2 : 16;
                struct HandleSlot *s;

                if (n > t->max)
                        n = t->max;
                s = realloc(t->slots, sizeof(*s) * n);
                if (!s)
                        return -ENOMEM;
                memset(s + t->n_alloc, 0, sizeof(*s) * (n - t->n_alloc));
                t->slots = s;
                t->n_alloc = n;
        }
        /* 32 generation bits fit in bits 24..55. */
        t->slots[i].generation++;
        t->slots[i].obj = obj;
        t->n_used++;
        *ret_handle = make_handle(t, i);
        if (ret_index)
                *ret_index = i;
        return 0;
}

void *handle_table_get(const HandleTable *t, uint64_t handle) {
        uint32_t i = (uint32_t) (handle & INDEX_MASK);

        if (handle_tag(handle) != t->tag || i >= t->n_alloc || !t->slots[i].obj)
                return NULL;
        if (make_handle(t, i) != handle)
                return NULL;
        return t->slots[i].obj;
}

void *handle_table_remove(HandleTable *t, uint64_t handle) {
        void *obj = handle_table_get(t, handle);

        if (obj) {
                t->slots[handle & INDEX_MASK].obj = NULL;
                t->n_used--;
        }
        return obj;
}
