/* SPDX-License-Identifier: MIT */
/*
 * kfdbroker-run's check that this system's glibc can load the interposer
 * (kfdbroker-run-glibc.c).
 */
#pragma once

#include <stddef.h>

/*
 * Whether the first libc.so.6 found in the usual x86-64 library directories
 * defines every GLIBC_x.y version that @interposer needs from libc.so.6.
 * Returns 0 if so, or if there is neither such a libc.so.6 nor musl (a
 * layout of its own, such as NixOS's: the loader checks); else a negative
 * errno with a sentence in @msg (@size bytes) naming what is missing:
 * -ENOENT on a musl system, -ENOEXEC when a needed version is not defined
 * (an older glibc) or a file is not a well-formed x86-64 ELF, another errno
 * when a file cannot be read.
 */
int glibc_check(const char *interposer, char *msg, size_t size);
