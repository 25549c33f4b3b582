/* SPDX-License-Identifier: MIT */
/*
 * The GPU addresses of the queue fuzz targets' rig (fuzz-sim-queue.h), also
 * known to the seed generator (fuzz-gen-queues.c) so that seeds name valid
 * memory and mutations of them fall next to it.
 */
#pragma once

#define RIG_RING_BYTES 4096u
#define RIG_RING_VA 0x100000000ull
#define RIG_RPTR_VA 0x100010000ull
#define RIG_WPTR_VA 0x100011000ull
#define RIG_EOP_VA 0x100020000ull
#define RIG_CWSR_VA 0x100100000ull
#define RIG_DATA_VA 0x200000000ull /* 64 KiB, starts with s_endpgm x 64 */
#define RIG_DATA_BYTES 65536u
#define RIG_SMALL_VA 0x200012000ull /* 4 KiB, after an 8 KiB gap */
#define RIG_SMALL_BYTES 4096u
#define RIG_EVENT_PAGE_VA 0x300000000ull
#define RIG_S_ENDPGM 0xbf810000u
