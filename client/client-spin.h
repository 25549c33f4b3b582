/* SPDX-License-Identifier: MIT */
/*
 * Adaptive spinning before a wait sleeps. Waking a sleeping thread on another
 * CPU costs a cross-CPU wake-up (an IPI; in a VM without guest halt-polling,
 * 35-45 us against 8 us for two threads on one CPU), and a round trip to the
 * daemon pays it once each way. A caller that is about to wait for a reply or
 * a fence looks for it for a short while first, so the daemon's answer finds
 * it running. How long adapts to what the last waits took (as KVM's
 * halt-polling does, virt/kvm/kvm_main.c grow_halt_poll_ns()/
 * shrink_halt_poll_ns()): a wait that ended soon after the spin gave up
 * doubles the next spin, up to the maximum; a wait longer than the maximum
 * (a copy of many megabytes, a daemon that is busy elsewhere) halves it, so a
 * client waiting on long jobs soon stops spinning at all.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The longest spin, unless KFDBROKER_SPIN_US says (0: never spin). */
#define CLIENT_SPIN_MAX_NS 100000u
/* Where a spin starts growing from 0. */
#define CLIENT_SPIN_START_NS 10000u

typedef struct ClientSpin {
        uint32_t budget_ns; /* how long the next wait spins */
        uint32_t max_ns;    /* 0: never */
} ClientSpin;

/* The maximum from $KFDBROKER_SPIN_US, or CLIENT_SPIN_MAX_NS; 0 on a machine
 * with one CPU online (spinning there only keeps the daemon off it). */
uint32_t client_spin_max_ns(void);

void client_spin_init(ClientSpin *sp, uint32_t max_ns);

uint64_t client_spin_now_ns(void);

/* Looks at done(userdata) until it is true or this wait's spin, which began
 * at start_ns, is used up: true when it came true. */
bool client_spin(const ClientSpin *sp, uint64_t start_ns, bool (*done)(void *userdata), void *userdata);

/* The wait that began at start_ns is over: adapt the next spin to how long it took. */
void client_spin_update(ClientSpin *sp, uint64_t start_ns);
