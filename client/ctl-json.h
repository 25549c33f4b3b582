/* SPDX-License-Identifier: MIT */
/*
 * JSON output helpers shared by kfdbrokerctl's verbs: strings escaped for
 * JSON, and "key":"value" members.
 */
#pragma once

#include <stdio.h>

static inline void json_string(const char *s) {
        putchar('"');
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        printf("\\%c", *p);
                else if (*p == '\n')
                        fputs("\\n", stdout);
                else if (*p == '\t')
                        fputs("\\t", stdout);
                else if (*p < 0x20 || *p == 0x7f)
                        printf("\\u%04x", *p);
                else
                        putchar(*p);
        }
        putchar('"');
}

/* Prints sep (e.g. "{" or ","), then "key":"value". */
static inline void json_member_string(const char *sep, const char *key, const char *value) {
        printf("%s\"%s\":", sep, key);
        json_string(value);
}
