/* SPDX-License-Identifier: MIT */
/*
 * UTF-8 checks for strings that come from clients or the kernel (cgroup and
 * unit names, app ids, comm) and go out as D-Bus strings, log fields and
 * metric labels. D-Bus refuses a string that is not valid UTF-8 (sd-bus
 * returns -EINVAL from sd_bus_message_append), so one such name would make
 * every reply that lists it fail.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Whether s is valid UTF-8 as D-Bus demands: no overlong forms, surrogates,
 * code points past U+10FFFF or Unicode noncharacters. */
bool utf8_is_valid(const char *s);

/* A malloc'd copy of s with each byte that is not part of a valid character
 * (see utf8_is_valid) written as "\xNN"; NULL when out of memory. */
char *utf8_escape_invalid(const char *s);

/* In place: each byte that is not part of a valid character becomes '?'. */
void utf8_replace_invalid(char *s);
