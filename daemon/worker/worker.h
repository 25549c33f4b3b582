/* SPDX-License-Identifier: MIT */
/*
 * The worker process's entry point (worker.c): `kfdbrokerd --worker`, started
 * by the daemon's contexts layer (contexts/context-worker.c), never by hand.
 */
#pragma once

/* Runs a worker to its end; returns the process's exit status. */
int worker_main(int argc, char *argv[]);
