/* SPDX-License-Identifier: MIT */
/*
 * JSON output helpers shared by kfdbrokerctl's verbs: strings escaped for
 * JSON (to stdout or any stream), "key":"value" members, and numbers written
 * so that a reader gets back exactly what the daemon sent: a double in the
 * shortest form that parses back to the same value, and the "no limit"
 * sentinel (2^64-1 on D-Bus) as the string "infinity", never as
 * 18446744073709551615 (which most JSON readers round to a double, 2^64).
 * Keys are snake_case in every verb (docs/selftest.md "JSON"): the D-Bus
 * API's CamelCase names are converted by json_key().
 */
#pragma once

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
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

/*
 * Writes into buf (at least 32 bytes) the shortest %g form of v that strtod()
 * reads back as v: 0.1 stays "0.1", 1/3 becomes "0.3333333333333333". NaN
 * and the infinities have no JSON number: the caller decides (json_double()).
 */
static inline const char *format_double_exact(double v, char *buf, size_t n) {
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(buf, n, "%.*g", prec, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        return buf;
}

/* A double as JSON: exact (above); NaN (not measured) and the infinities,
 * which JSON has no number for, as null. */
static inline void json_double(double v) {
        char buf[32];

        if (isnan(v) || isinf(v))
                fputs("null", stdout);
        else
                fputs(format_double_exact(v, buf, sizeof(buf)), stdout);
}

/* The "no limit" value of a D-Bus limit or timeout (2^64-1). */
#define CTL_UINT64_INFINITY UINT64_MAX

/* A count or limit as JSON: the sentinel 2^64-1 as "infinity", anything else as a number. */
static inline void json_uint64(uint64_t v) {
        if (v == CTL_UINT64_INFINITY)
                fputs("\"infinity\"", stdout);
        else
                printf("%" PRIu64, v);
}

/*
 * json_key_convert() - a D-Bus name as a snake_case JSON key, into buf (cut to n).
 * A word starts at an upper-case letter after a lower-case one or a digit,
 * and at the last capital of an acronym followed by a lower-case letter
 * ("JobsSDMA" → "jobs_sdma", "AppId" → "app_id", "UID" → "uid"); the units
 * "NSec" and "USec" are one word each ("BusyNSecSDMA" → "busy_nsec_sdma",
 * "DispatchTimeoutUSec" → "dispatch_timeout_usec"), as systemd spells them.
 */
static inline const char *json_key_convert(const char *name, char *buf, size_t n) {
        size_t o = 0;

        if (n == 0)
                return buf;
        for (size_t i = 0; name[i] && o + 2 < n; i++) {
                char c = name[i], prev = i ? name[i - 1] : 0, next = name[i + 1];
                bool upper = c >= 'A' && c <= 'Z';
                bool unit = (c == 'S' && (prev == 'N' || prev == 'U') && next == 'e' && name[i + 2] == 'c');

                if (upper && i > 0 && !unit &&
                    ((prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9') ||
                     (prev >= 'A' && prev <= 'Z' && next >= 'a' && next <= 'z')))
                        buf[o++] = '_';
                buf[o++] = upper ? (char) (c - 'A' + 'a') : c;
        }
        buf[o] = 0;
        return buf;
}

/* Writes a D-Bus name as a quoted snake_case JSON key (json_key_convert()). */
static inline void json_key(const char *name) {
        char buf[128];

        json_string(json_key_convert(name, buf, sizeof(buf)));
}
