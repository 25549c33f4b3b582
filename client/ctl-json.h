/* SPDX-License-Identifier: MIT */
/*
 * JSON output helpers shared by kfdbrokerctl's verbs: strings escaped for
 * JSON (to stdout or any stream), and "key":"value" members.
 */
#pragma once

#include <stdio.h>

/* Writes s to f as a JSON string, quoted and escaped. */
static inline void json_fstring(FILE *f, const char *s) {
        fputc('"', f);
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p == '"' || *p == '\\')
                        fprintf(f, "\\%c", *p);
                else if (*p == '\n')
                        fputs("\\n", f);
                else if (*p == '\t')
                        fputs("\\t", f);
                else if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\u%04x", *p);
                else
                        fputc(*p, f);
        }
        fputc('"', f);
}

static inline void json_string(const char *s) {
        json_fstring(stdout, s);
}

/* Prints sep (e.g. "{" or ","), then "key":"value". */
static inline void json_member_string(const char *sep, const char *key, const char *value) {
        printf("%s\"%s\":", sep, key);
        json_string(value);
}
