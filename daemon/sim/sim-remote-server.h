/* SPDX-License-Identifier: MIT */
/*
 * The daemon's end of sim-remote (sim_remote_serve() in sim-remote.h): one
 * SimRemoteServer per remote process, linked into its SimDevice. This header
 * is what sim-device.c needs of it.
 */
#pragma once

#include "sim-types.h"

/*
 * Ends every remote process of d and waits until each server has torn its
 * process down and let go of the device. Called by sim_device_free() once
 * the device is shutting down (no server starts after that).
 */
void sim_remote_servers_stop(SimDevice *d);
