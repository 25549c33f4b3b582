/* SPDX-License-Identifier: MIT */
/*
 * The KFD's own table of its calls: for each number, the request word
 * amdkfd_ioctls[] of kfd_chardev.c holds for it. kfd_ioctl() dispatches on
 * the caller's _IOC_NR alone and then takes the copy direction from this
 * word, not from the caller's ("Do not trust userspace, use our own
 * definition"): it copies in the caller's _IOC_SIZE bytes when the word has
 * IOC_IN, zeroes them when it has IOC_OUT alone, and copies the caller's size
 * back when it has IOC_OUT, into a buffer zero-filled up to the larger of the
 * two sizes. One table for every layer that must copy as the kernel does: the
 * simulator (sim-device.c) and both ends of sim-remote's wire, which is also
 * built into the interposer (libkfdbroker-kfd.so).
 */
#pragma once

/* AMDKFD_COMMAND_END of the newest uapi this table knows (1.19). */
#define KFD_IOCTL_TABLE_END 0x28u

/**
 * kfd_ioctl_word() - the KFD's own request word for a call number
 * @nr: _IOC_NR of a request word
 *
 * Returns the word of amdkfd_ioctls[@nr] as of uapi 1.19 (<linux/kfd_ioctl.h>
 * plus kfd-uapi.h for the numbers an older header lacks), or 0 for a number
 * no KFD has (0, at or past KFD_IOCTL_TABLE_END): kfd_ioctl() refuses such a
 * number before it copies anything. A kernel older than 1.19 refuses the
 * numbers past its own AMDKFD_COMMAND_END likewise, whatever this says.
 */
unsigned long kfd_ioctl_word(unsigned nr);
