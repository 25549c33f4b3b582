/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl cdi`: a Container Device Interface spec that gives a
 * container the broker's socket, and nothing from /dev.
 */
#pragma once

/* The spec's CDI version: the oldest whose schema describes mount options as
 * an array (as every CDI implementation reads them) and that has a mount's
 * "type"; 0.3.0's schema types options as one string. */
#define CTL_CDI_VERSION "0.4.0"
#define CTL_CDI_KIND "kfdbroker.org/gpu"
#define CTL_CDI_DEVICE "all"

/*
 * Writes the spec for the host socket @socket_path (made absolute against
 * the working directory if relative) to stdout, or to @argv's --output FILE
 * (written to a temporary file in the same directory, then renamed over
 * it, mode 0644). Does not connect to the daemon; warns on stderr when
 * nothing listens at the path yet. @argv[0] is "cdi".
 * Returns 0, -EINVAL after printing a usage error (CTL_EXIT_USAGE is for
 * the caller to decide), or a negative errno after printing what failed.
 */
int ctl_cdi(const char *prog, const char *socket_path, int argc, char **argv);
