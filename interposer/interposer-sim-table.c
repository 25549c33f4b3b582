/* SPDX-License-Identifier: MIT */
/*
 * sim-remote-protocol.c classifies a request the simulator runs but whose
 * fields the wire does not carry as REFUSED, asking the simulator's ioctl
 * table. The interposer has no simulator: it sends such a request as a PLAIN
 * one (its bytes, no fd), which the daemon's end accepts and answers for a
 * REFUSED kind with -ENOTTY without running it (sim-remote-server.c
 * serve_ioctl) — so the answer is the daemon's either way.
 */
#include <stdbool.h>

bool sim_device_ioctl_simulated(unsigned nr);

bool sim_device_ioctl_simulated(unsigned nr) {
        (void) nr;
        return false;
}
