/* SPDX-License-Identifier: MIT */
/*
 * `kfdbrokerctl policy check [DIR...]`: reads policy directories with the
 * daemon's own loader (daemon/policy/policy.c, built into kfdbrokerctl) and
 * reports what a reload would, without a daemon.
 */
#pragma once

/*
 * ctl_policy() - run `policy` (argv[0]) with its sub-command.
 * Prints each problem as "FILE:LINE: message" on stderr, as
 * `systemd-analyze verify` does, and a summary on stdout.
 * Returns 0 when the policy loads (warnings included), -EBADMSG when it
 * would be refused, -EINVAL after a usage error.
 */
int ctl_policy(const char *prog, int argc, char **argv);
