/* SPDX-License-Identifier: MIT */
/*
 * MESSAGE_IDs of the daemon's journal entries worth finding again
 * (journalctl MESSAGE_ID=...), one per kind of event, stable across
 * releases. Each has an entry in units/kfdbroker.catalog (journalctl -x
 * shows it; test-units checks that every one here has one and no other);
 * docs/journal.md lists them with their fields. Made once with
 * `systemd-id128 new`; never reuse or change one.
 */
#pragma once

/* The daemon */
#define KFDBROKER_MESSAGE_READY "465d0f4138044c94bbf095884326fdc8"
#define KFDBROKER_MESSAGE_SHUTTING_DOWN "188a6a2d2ecc478bac5e1f41c59a5b0b"
#define KFDBROKER_MESSAGE_SHUTDOWN_TIMEOUT "d47cf21e9ef14a94962e46c4a1333655"
#define KFDBROKER_MESSAGE_POLICY_RELOADED "c99222b1f1634bf591681a214ae4f496"
#define KFDBROKER_MESSAGE_POLICY_RELOAD_FAILED "edd4e5628305495a9418c75a6f4dcb49"

/* Sessions */
#define KFDBROKER_MESSAGE_SESSION_OPENED "171de76a94a04903bf4201b4f08e9564"
#define KFDBROKER_MESSAGE_SESSION_RESUMED "8abe204c4dbe437693de8e2fa4a69841"
#define KFDBROKER_MESSAGE_SESSION_CLOSED "f588fb37f4474ff5b3db2bf8eea07aeb"
#define KFDBROKER_MESSAGE_SESSION_ENDED "3180036822904ce8961dfe6a89bf0d87"
#define KFDBROKER_MESSAGE_SESSION_REFUSED "ea1d07acd16d46db914af5e0ea9138c7"
#define KFDBROKER_MESSAGE_CONNECTIONS_THROTTLED "b9354caa09be4836a09e509631b5176e"
#define KFDBROKER_MESSAGE_LIMITS_SET "0b1a21a2401e4b4cb5c8546b5b226cc3"
/* A management action on a session (TerminateSession), with the caller's KFDBROKER_CALLER_* fields. */
#define KFDBROKER_MESSAGE_SESSION_TERMINATED "4ccb3263c3514a92b6c070344e0d2b57"
/* ReloadPolicy called, with the caller's KFDBROKER_CALLER_* fields (the outcome: POLICY_RELOADED or _FAILED). */
#define KFDBROKER_MESSAGE_POLICY_RELOAD_ASKED "3fc3e3bcde674b5d8be5d86be5d3de21"
#define KFDBROKER_MESSAGE_JOB_FAILED "df882ae907de43dca001b6e328238753"

/* The GPU */
#define KFDBROKER_MESSAGE_GPU_RESET "4cf7a06bad55485c8e0a8ccc212570fc"
#define KFDBROKER_MESSAGE_CONTEXT_LOST "7b8e0c1d2ad64635b381f412bef9646b"
#define KFDBROKER_MESSAGE_DEVICE_LOST "72c1c872fcb24fde9043d763380ba2d8"

/* The log itself */
#define KFDBROKER_MESSAGE_LOG_SUPPRESSED "aab3e655a4e346e784877b2410197249"
#define KFDBROKER_MESSAGE_LOG_DROPPED "65e496b830834e89b217cca2e2d44a47"
