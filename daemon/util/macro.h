/* SPDX-License-Identifier: MIT */
/*
 * Small helpers used everywhere: scope-bound cleanup (_cleanup_), ownership
 * transfer (TAKE_PTR/TAKE_FD), array sizes and overflow-checked arithmetic.
 * The idea follows systemd's src/fundamental/macro.h; the code is ours.
 */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _fallthrough_ __attribute__((fallthrough))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Hand the value of a cleanup-owned local to someone else. */
#define TAKE_PTR(p)                         \
        ({                                  \
                __typeof__(p) _tp_ = (p);   \
                (p) = NULL;                 \
                _tp_;                       \
        })
#define TAKE_FD(fd)                         \
        ({                                  \
                int _tf_ = (fd);            \
                (fd) = -EBADF;              \
                _tf_;                       \
        })

/* Define a cleanup function for a pointer to a type with a NULL-safe free. */
#define DEFINE_POINTER_CLEANUP(type, func)                  \
        static inline void func##p(type **p) {              \
                if (*p)                                     \
                        func(*p);                           \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

/* Closes fd if it is valid, keeps errno, returns -EBADF for assignment. */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        *fd = safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline bool is_power_of_2_u64(uint64_t v) {
        return v != 0 && (v & (v - 1)) == 0;
}

/* Round up to a power-of-two alignment; returns 0 on overflow. */
static inline uint64_t align_up_u64(uint64_t v, uint64_t a) {
        if (v > UINT64_MAX - (a - 1))
                return 0;
        return (v + a - 1) & ~(a - 1);
}
#define ALIGN_UP(v, a) (((v) + (a) - 1) & ~((__typeof__(v)) (a) - 1))
#define DIV_ROUND_UP(x, y) (((x) + (y) - 1) / (y))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* True if [off, off+len) lies inside [0, size) without wrapping. */
static inline bool range_in_bounds(uint64_t off, uint64_t len, uint64_t size) {
        return off <= size && len <= size - off;
}

#define PAGE_SIZE_4K 4096u

/* The struct that holds member ptr (offsetof arithmetic, as the kernel's). */
#define container_of(ptr, type, member) ((type *) (void *) ((char *) (ptr) - offsetof(type, member)))
