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
 * Returns 0 if so; else a negative errno with a sentence in @msg (@size
 * bytes) naming what is missing: -ENOENT when there is no libc.so.6 (a musl
 * or libc-less system), -ENOEXEC when a needed version is not defined (an
 * older glibc) or a file is not a well-formed x86-64 ELF, another errno when
 * a file cannot be read.
 */
int glibc_check(const char *interposer, char *msg, size_t size);
