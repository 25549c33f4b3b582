/* SPDX-License-Identifier: MIT */
/*
 * JSON output helpers shared by kfdbrokerctl's verbs: strings escaped for
 * JSON (to stdout or any stream), "key":"value" members, and doubles.
 */
#pragma once

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

/* A double as JSON: the shortest %g form that reads back as v; NaN (not
 * measured) and the infinities, which JSON has no number for, as null. */
static inline void json_double(double v) {
        char buf[32];

        if (isnan(v) || isinf(v)) {
                fputs("null", stdout);
                return;
        }
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(buf, sizeof(buf), "%.*g", prec, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        fputs(buf, stdout);
}
