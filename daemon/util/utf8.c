/* SPDX-License-Identifier: MIT */
/* See utf8.h. */
#include "util/utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Length of the valid character at s (1..4), or 0 if the byte at s does not
 * start one. Well-formed sequences as in the Unicode Standard, table 3-7;
 * then the code points the D-Bus specification's validation also refuses
 * (as libdbus and sd-bus do): noncharacters U+FDD0..U+FDEF and U+xFFFE/xFFFF.
 */
static size_t valid_char_len(const unsigned char *s) {
        unsigned char c = s[0];
        uint32_t cp;
        size_t n;

        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                n = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef)
                n = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4)
                n = 4, cp = c & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0; /* includes the terminating NUL */
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff)
                return 0; /* overlong, or past Unicode */
        if (cp >= 0xd800 && cp <= 0xdfff)
                return 0; /* UTF-16 surrogates */
        if ((cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe)
                return 0; /* noncharacters */
        return n;
}

bool utf8_is_valid(const char *s) {
        const unsigned char *p = (const unsigned char *) s;

        while (*p) {
                size_t n = valid_char_len(p);
                if (n == 0)
                        return false;
                p += n;
        }
        return true;
}

char *utf8_escape_invalid(const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        char *out = malloc(strlen(s) * 4 + 1), *o = out;

        if (!out)
                return NULL;
        while (*p) {
                size_t n = valid_char_len(p);
                if (n == 0) {
                        o += sprintf(o, "\\x%02x", *p);
                        p++;
                        continue;
                }
                memcpy(o, p, n);
                o += n;
                p += n;
        }
        *o = 0;
        return out;
}

void utf8_replace_invalid(char *s) {
        unsigned char *p = (unsigned char *) s;

        while (*p) {
                size_t n = valid_char_len(p);
                if (n == 0)
                        *p++ = '?';
                else
                        p += n;
        }
}
