/* SPDX-License-Identifier: MIT */
/*
 * Interactive polkit authorization for kfdbrokerctl, as systemctl does it:
 * a call that may need an administrator's password is sent with the D-Bus
 * flag ALLOW_INTERACTIVE_AUTHORIZATION (the daemon passes polkit's
 * AllowUserInteraction on), and when standard input is a terminal a text
 * authentication agent, pkttyagent(1), is started for the caller's session
 * first, so polkit has someone to ask. --no-ask-password turns both off.
 */
#pragma once

#include <stdbool.h>

/*
 * ctl_polkit_agent_open() - start pkttyagent --fallback for this session if
 * standard input is a terminal, we are not root (root needs no polkit) and
 * none runs yet; waits until it has registered (its --notify-fd is closed),
 * at most 5 s. Without pkttyagent or a terminal it does nothing: a call that
 * needs authentication then fails with the daemon's reason.
 */
void ctl_polkit_agent_open(void);
/* Stops the agent if one was started. */
void ctl_polkit_agent_close(void);
