/* SPDX-License-Identifier: MIT */
/*
 * How the simulated SDMA engine moves bytes (sim-sdma.c): as a DMA engine
 * does, past the CPU's caches. A real engine's writes go to memory and
 * neither read the destination first nor leave it in a CPU cache; a CPU copy
 * with ordinary stores reads every destination line for ownership and
 * evicts the cache's contents on the way. glibc's memcpy switches to
 * non-temporal (streaming) stores only above about three quarters of the
 * shared cache (x86_shared_non_temporal_threshold, glibc 2.36
 * sysdeps/x86/dl-cacheinfo.h), so the engine's 1 MiB pieces of a large copy
 * (the scheduler's chunks, sim-sdma.c's STEP_BYTES) would all go through the
 * cache: 9.5 GB/s where one 256 MiB memcpy makes 11-12 GB/s and streaming
 * stores 18.8 GB/s on the 2-core build machine (1 MiB pieces of a memfd).
 * Moves of SIM_DMA_STREAM_MIN bytes or more use streaming stores where the
 * host has them (x86-64: SSE2, always), ordered before anything the engine
 * writes next (a fence, an rptr) by a store fence; smaller ones and
 * overlapping copies use memmove/memset.
 */
#pragma once

#include <stdint.h>
#include <stddef.h>

#define SIM_DMA_STREAM_MIN (64u << 10)

/* Copies n bytes from src to dst (memmove semantics: the ranges may overlap). */
void sim_dma_copy(void *dst, const void *src, size_t n);
/* Fills n bytes of dst with the dword pattern as it lies in memory (byte k
 * of dst gets byte k % 4 of the little-endian pattern); a byte fill passes
 * the byte four times. */
void sim_dma_fill32(void *dst, uint32_t pattern, size_t n);
