/* SPDX-License-Identifier: MIT */
/*
 * Adaptive spinning before a wait sleeps. Waking a sleeping thread on another
 * CPU costs a cross-CPU wake-up (an IPI; in a VM without guest halt-polling,
 * 35-45 us against 8 us for two threads on one CPU), and a round trip to the
 * daemon pays it once each way. A caller that is about to wait for a reply or
 * a fence looks for it for a short while first, so the daemon's answer finds
 * it running.
 *
 * How long adapts to what the last waits took, as KVM's halt-polling does
 * (virt/kvm/kvm_main.c grow_halt_poll_ns()/shrink_halt_poll_ns()): a wait
 * that ended soon after the spin gave up doubles the next spin, up to the
 * maximum; a wait longer than the maximum (a copy of many megabytes, a
 * daemon busy elsewhere) halves it, so a client waiting on long jobs soon
 * stops spinning at all.
 *
 * Spinning pays only with a CPU to spare: on a machine with more runnable
 * threads than CPUs it takes CPU time from others, the daemon's threads among
 * them, and makes the wait longer (measured: a round trip 2-4x slower next to
 * two CPU burners on 2 CPUs; an empty dispatch's p99 next to them 4.1 ms
 * sleeping, 5.1-7.3 ms spinning, bench-compute). So waits stop spinning once
 * the runnable count (/proc/loadavg, looked at most once a millisecond) has
 * left no CPU idle at CLIENT_SPIN_CROWDED_LOOKS looks in a row, and spin
 * again after the first look that finds one idle (a new spin starts as if
 * CLIENT_SPIN_CROWDED_LOOKS - 1 looks had found none: its first look
 * decides). Looks are taken just before the caller wakes the daemon
 * (client_spin_look() at a request or a submit) and, only when the last is
 * older than CLIENT_SPIN_CROWD_CHECK_NS, when a wait starts: by then the
 * daemon's own threads are runnable doing the caller's work, and looking
 * only then made 30-45% of the round trips of a 2-CPU machine sleep
 * (bench-broker: waits the fence page ended, 2139-2831 of 3960). A look that
 * cannot read /proc/loadavg counts for nothing. Even before waking the
 * daemon, one look in three finds the
 * daemon's threads still busy with the caller's last job (its main loop
 * retiring it, its engine thread finishing its pass) or a kernel thread
 * running: on an idle 2-CPU machine, 35-43% of the looks of a client
 * submitting batches of 64 fills counted more runnable threads than CPUs,
 * and one look deciding made it sleep as often, at 560-700k jobs a second
 * against 770-850k spinning. CPU-bound neighbours are runnable at every look.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The longest spin, unless KFDBROKER_SPIN_US says (0: never spin): KVM's
 * default halt_poll_ns (KVM_HALT_POLL_NS_DEFAULT, arch/x86/include/asm/
 * kvm_host.h). It was 100 us: a batch of 64 small jobs then took a little
 * longer than a spin, so each batch's wait shrank the spin and slept, and
 * was woken three thread hops after the engine had written the last fence on
 * the fence page (bench-broker batched: broker / floor 0.57-0.66 at 100 us,
 * 0.82-0.86 at 200 us, 0.80 at 400 us, alternating runs). */
#define CLIENT_SPIN_MAX_NS 200000u
/* Where a spin starts growing from 0. */
#define CLIENT_SPIN_START_NS 10000u
/* A spinning thread yields its CPU this often (a thread the scheduler put
 * behind it, perhaps the daemon's, runs then). */
#define CLIENT_SPIN_YIELD_NS 4000u
/* How long a look at the runnable count holds. */
#define CLIENT_SPIN_CROWD_CHECK_NS 1000000u
/* Looks in a row that must find more runnable threads than CPUs before waits
 * stop spinning. */
#define CLIENT_SPIN_CROWDED_LOOKS 4u

typedef struct ClientSpin {
        uint32_t budget_ns; /* how long the next wait spins */
        uint32_t max_ns;    /* 0: never */
        long cpus;          /* online */
        uint64_t crowd_checked_ns;
        unsigned crowded_looks; /* looks in a row that found no CPU to spare, up to CLIENT_SPIN_CROWDED_LOOKS */
        bool crowded;       /* no CPU to spare at the last CLIENT_SPIN_CROWDED_LOOKS looks */
} ClientSpin;

/* The maximum from $KFDBROKER_SPIN_US, or CLIENT_SPIN_MAX_NS; 0 on a machine
 * with one CPU online (spinning there only keeps the daemon off it). */
uint32_t client_spin_max_ns(void);

void client_spin_init(ClientSpin *sp, uint32_t max_ns);

uint64_t client_spin_now_ns(void);

/* Looks at done(userdata) until it is true or this wait's spin, which began
 * at start_ns, is used up (at once when no CPU is to spare): true when it
 * came true. */
bool client_spin(ClientSpin *sp, uint64_t start_ns, bool (*done)(void *userdata), void *userdata);

/* Looks at the runnable count now unless the last look is recent: call it
 * just before waking the daemon. */
void client_spin_look(ClientSpin *sp, uint64_t now_ns);

/* dst takes src's looks at the runnable count (when the last was, and the
 * row they make) in place of its own: two spins that hand their looks on to
 * each other count each look once. */
void client_spin_take_looks(ClientSpin *dst, const ClientSpin *src);

/* Counts one look at the runnable count that did (crowded) or did not find
 * more runnable threads than CPUs. */
void client_spin_count_look(ClientSpin *sp, bool crowded);

/* The wait that began at start_ns is over: adapt the next spin to how long it took. */
void client_spin_update(ClientSpin *sp, uint64_t start_ns);

/* Does /proc/loadavg's text say that more threads are runnable than there
 * are cpus, counting the caller's? False when it cannot tell. */
bool client_spin_crowded(const char *loadavg, long cpus);
