/* SPDX-License-Identifier: MIT */
/*
 * Intrusive doubly-linked lists in the style of systemd's LIST_* macros: the
 * head is a pointer, each element embeds <name>_next/<name>_prev pointers, so
 * an object can sit on several lists at once.
 */
#pragma once

#include <stddef.h>

#define LIST_HEAD(t, name) t *name
#define LIST_FIELDS(t, name) t *name##_next, *name##_prev

#define LIST_PREPEND(name, head, item)                                  \
        do {                                                            \
                __typeof__(*(head)) **_h = &(head), *_i = (item);       \
                if ((_i->name##_next = *_h))                            \
                        _i->name##_next->name##_prev = _i;              \
                _i->name##_prev = NULL;                                 \
                *_h = _i;                                               \
        } while (0)

#define LIST_REMOVE(name, head, item)                                   \
        do {                                                            \
                __typeof__(*(head)) **_h = &(head), *_i = (item);       \
                if (_i->name##_next)                                    \
                        _i->name##_next->name##_prev = _i->name##_prev; \
                if (_i->name##_prev)                                    \
                        _i->name##_prev->name##_next = _i->name##_next; \
                else                                                    \
                        *_h = _i->name##_next;                          \
                _i->name##_next = _i->name##_prev = NULL;               \
        } while (0)

/* Appends in O(n); use LIST_APPEND_TAIL with a tail pointer on hot paths. */
#define LIST_APPEND(name, head, item)                                   \
        do {                                                            \
                __typeof__(*(head)) **_h = &(head), *_t = *_h, *_i = (item); \
                _i->name##_next = NULL;                                 \
                if (!_t) {                                              \
                        _i->name##_prev = NULL;                         \
                        *_h = _i;                                       \
                } else {                                                \
                        while (_t->name##_next)                         \
                                _t = _t->name##_next;                   \
                        _t->name##_next = _i;                           \
                        _i->name##_prev = _t;                           \
                }                                                       \
        } while (0)

#define LIST_FOREACH(name, i, head) for ((i) = (head); (i); (i) = (i)->name##_next)
#define LIST_FOREACH_SAFE(name, i, n, head) \
        for ((i) = (head); (i) && (((n) = (i)->name##_next), 1); (i) = (n))

/*
 * A FIFO: head + tail, O(1) append and pop.
 */
#define QUEUE_HEAD(t, name) struct { t *first, *last; } name
#define QUEUE_APPEND(name, q, item)                                     \
        do {                                                            \
                __typeof__((q).first) _i = (item);                      \
                _i->name##_next = NULL;                                 \
                _i->name##_prev = (q).last;                             \
                if ((q).last)                                           \
                        (q).last->name##_next = _i;                     \
                else                                                    \
                        (q).first = _i;                                 \
                (q).last = _i;                                          \
        } while (0)
#define QUEUE_REMOVE(name, q, item)                                     \
        do {                                                            \
                __typeof__((q).first) _i = (item);                      \
                if (_i->name##_next)                                    \
                        _i->name##_next->name##_prev = _i->name##_prev; \
                else                                                    \
                        (q).last = _i->name##_prev;                     \
                if (_i->name##_prev)                                    \
                        _i->name##_prev->name##_next = _i->name##_next; \
                else                                                    \
                        (q).first = _i->name##_next;                    \
                _i->name##_next = _i->name##_prev = NULL;               \
        } while (0)
