/* SPDX-License-Identifier: MIT */
/*
 * KFD events of the simulated GPU (kfd_events.c counterpart): signal events
 * with slots in the user-provided 32 KiB GTT event page, MEMORY and
 * HW_EXCEPTION events with non-signal ids, ages, auto-reset, WAIT_EVENTS
 * sleeping on the device's condition variable, and the "interrupt" and fault
 * paths the engines call. Events belong to their SimProcess. Locked.
 */
#pragma once

#include <linux/kfd_ioctl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim-types.h"

struct SimEvent {
        SimEvent *next;          /* SimProcess.events */
        uint32_t id;
        uint32_t type;           /* KFD_IOC_EVENT_* */
        bool auto_reset;
        bool signaled;
        uint64_t age;
        SimWaiter *waiters;      /* sleeping WAIT_EVENTS entries */
        struct kfd_hsa_memory_exception_data memory_exception_data;
        struct kfd_hsa_hw_exception_data hw_exception_data;
};

int sim_events_create(SimProcess *p, struct kfd_ioctl_create_event_args *a);
int sim_events_destroy(SimProcess *p, struct kfd_ioctl_destroy_event_args *a);
int sim_events_set(SimProcess *p, struct kfd_ioctl_set_event_args *a);
int sim_events_reset(SimProcess *p, struct kfd_ioctl_reset_event_args *a);
/* Blocks (releasing the device lock) for up to the timeout. */
int sim_events_wait(SimProcess *p, struct kfd_ioctl_wait_events_args *a);

/*
 * sim_events_interrupt() - what kfd_signal_event_interrupt() does for an
 * SDMA TRAP or CP end-of-pipe interrupt with context id partial_id of which
 * valid_bits are meaningful.
 */
void sim_events_interrupt(SimProcess *p, uint32_t partial_id, unsigned valid_bits);

/*
 * sim_events_deliver() - wake the WAIT_EVENTS sleepers for the interrupts the
 * engines raised since the last delivery: with @force at once, else only once
 * the oldest has waited SIM_IRQ_COALESCE_NS. An engine's interrupt sets its
 * event at once (a WAIT_EVENTS that looks finds it signaled) but wakes no
 * one by itself: the engines deliver at the end of each queue's step, before
 * a packet that moves UNLOCKED_BYTES or more, and between two packets once
 * SIM_IRQ_COALESCE_NS have passed. The kernel's interrupt handler takes a
 * burst of IH ring entries in one go (amdgpu_ih_process() loops until the
 * ring is empty) and wakes a waiter that is already awake for nothing; an
 * engine thread that woke the waiter for every packet made it preempt the
 * engine and contend for the device lock once per job instead.
 * Locked.
 */
#define SIM_IRQ_COALESCE_NS 10000u
void sim_events_deliver(SimDevice *d, bool force);
/* sim_events_deliver() in two halves, for a caller that can let the lock go
 * (an engine between packets, its queue pinned): whether a delivery is due
 * (it is then taken; locked), and the wake-up, called after unlocking (any
 * time). A sleeper woken while the engine holds the lock wakes only to block
 * on it — glibc's condition variables hand nothing over — and the engine's
 * unlock wakes it a second time: two futex calls and a context switch more
 * per delivery. */
bool sim_events_take_delivery(SimDevice *d, bool force);
void sim_events_wake_sleepers(SimDevice *d);
/* GPU VM fault at va: sets every MEMORY event with {NotPresent, va, gpu_id}. */
void sim_events_memory_fault(SimProcess *p, SimGpu *gpu, uint64_t va);
/* kfd_signal_reset_event: every HW_EXCEPTION event of p, with the reset's data. */
void sim_events_gpu_reset(SimProcess *p, SimGpu *gpu, bool memory_lost);
/*
 * A queue stopped at a packet it cannot execute (or a shader it cannot run):
 * records {queue_id, text} for KfdOps.exception_info, dropping the oldest
 * record beyond SIM_MAX_EXCEPTIONS and truncating text to
 * SIM_EXCEPTION_TEXT - 1 bytes. No event is set: the kernel raises none for
 * an illegal instruction or a bad packet (kfd-facts §7.2), the job simply
 * never completes; the record is the simulator's extra words for whoever
 * gives up on it.
 */
void sim_events_queue_stopped(SimProcess *p, uint32_t queue_id, const char *text);
/*
 * Takes the oldest exception record: the queue id and its text (NUL
 * terminated, truncated to buflen; buf may be NULL when buflen is 0).
 * Returns 0, or -ENOENT when none is pending.
 */
int sim_events_take_exception(SimProcess *p, uint32_t *ret_queue_id, char *buf, size_t buflen);
/* Destroys every event of the process, failing its waiters (teardown). */
void sim_events_free_all(SimProcess *p);
/* mmap of KFD_MMAP_TYPE_EVENTS on the KFD fd (kfd_event_mmap): the memfd of
 * the event page (borrowed, valid while locked) to map from offset 0, or the
 * errno of the mmap. */
int sim_events_mmap_target(SimProcess *p, size_t length, int *ret_memfd);
