/* SPDX-License-Identifier: MIT */
/*
 * Backing a VRAM BO's pages beside the engines (sim-populate.c). The real
 * device's VRAM BO has its memory from its creation: amdgpu creates a KFD
 * VRAM BO in the VRAM domain (amdgpu_amdkfd_gpuvm.c
 * amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu() -> amdgpu_gem_object_create()),
 * and TTM validates a new BO into its placement at creation
 * (ttm_bo_init_reserved() -> ttm_bo_validate()), where the VRAM manager
 * hands it physical blocks (amdgpu_vram_mgr.c amdgpu_vram_mgr_new()). The
 * simulator's VRAM is a memfd, and its GL2 view an anonymous mapping
 * (sim-cache.h), whose pages the host allocates and clears at their first
 * touch; it backs a BO at the first engine write into it (sim_bo_populate()),
 * so that VRAM nobody touches (a queue's CWSR area) costs the host nothing.
 * Done there, on the engine's thread and under the device lock, a 256 MiB
 * BO's first copy waited 0.5-1 s for its memory (and faulted its view in
 * 4 KiB at a time), with every ioctl and engine of the device waiting too.
 * So each device has a thread that backs such a BO's memory, then its view,
 * with MADV_POPULATE_WRITE, a piece at a time from the start, at the
 * process's priority, while the engine writes the view: the memory is
 * written only by the GL2 write-back that comes after the copy. (Starting at
 * a VRAM BO's dma-buf export as well — a ROCm program's hipMalloc is
 * exported for its CPU mapping at the allocation — took bench-hip's first
 * copy from 0.8-1.3 s to 0.2-0.5 s at a load of 15, but backed every buffer
 * ROCr exports and never touches: the daemon's RSS with one idle HIP client
 * +6 MiB instead of +1.6, +33 MiB instead of +1.7 with worker processes.) Content does not change
 * (MADV_POPULATE_WRITE faults pages in as a write would, without writing),
 * so it races with nothing; an engine that gets to a page first faults it in
 * itself.
 *
 * Locking: the populator has a lock of its own, taken inside the device
 * lock (sim_populator_add/forget run locked) and never around it; the thread
 * never takes the device lock. A BO freed while its piece is being
 * populated leaves its two mappings to the thread, which unmaps them after
 * the piece: a free neither waits for the thread nor is delayed by it.
 */
#pragma once

#include "sim-types.h"

/* Starts a device's populator thread. 0, -ENOMEM or a pthread_create error. */
int sim_populator_new(SimPopulator **ret);
/* Stops and joins the thread (after every BO of the device is freed); NULL-safe. */
SimPopulator *sim_populator_free(SimPopulator *p);
/* bo (a VRAM BO an engine writes for the first time, sim_bo_populate()) is
 * backed from its start: queued behind the others. Locked (device lock).
 * NULL-safe p. */
void sim_populator_add(SimPopulator *p, SimBo *bo);
/* bo is being freed: it leaves the queue, and if its piece is being
 * populated now, its memory and view mappings are the thread's to unmap
 * (bo->host and its view become NULL). Locked (device lock). NULL-safe p. */
void sim_populator_forget(SimPopulator *p, SimBo *bo);
/* The bytes of memory and views the thread has backed so far (counted
 * whether or not the host had them already). */
uint64_t sim_populator_backed(SimPopulator *p);
