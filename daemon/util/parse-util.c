/* SPDX-License-Identifier: MIT */
/* See parse-util.h. */
#include "parse-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool parse_uint_n(const char *s, size_t len, int base, unsigned long max, unsigned long *ret) {
        char buf[16], *end;

        if (len == 0 || len >= sizeof buf)
                return false;
        memcpy(buf, s, len);
        buf[len] = '\0';
        for (size_t i = 0; i < len; i++)
                if (!(base == 10 ? (buf[i] >= '0' && buf[i] <= '9')
                                 : ((buf[i] >= '0' && buf[i] <= '9') || (buf[i] >= 'a' && buf[i] <= 'f') ||
                                    (buf[i] >= 'A' && buf[i] <= 'F'))))
                        return false;
        errno = 0;
        unsigned long v = strtoul(buf, &end, base);
        if (errno || *end || v > max)
                return false;
        *ret = v;
        return true;
}

bool parse_pci_address(const char *s, size_t len, uint32_t *ret_domain, uint32_t *ret_location) {
        unsigned long domain = 0, bus, dev, fn;
        const char *dot, *c2;

        if (!s || len == 0)
                return false;
        dot = memrchr(s, '.', len);
        if (!dot)
                return false;
        c2 = memrchr(s, ':', (size_t) (dot - s));
        if (!c2)
                return false;
        const char *c1 = memrchr(s, ':', (size_t) (c2 - s));
        const char *bus_start = c1 ? c1 + 1 : s;
        /* Domains past 16 bits exist (VMD: 10000:e0:00.0); KFD prints a u32. */
        if (c1 && !parse_uint_n(s, (size_t) (c1 - s), 16, 0xffffffff, &domain))
                return false;
        if (c1 && memchr(s, ':', (size_t) (c1 - s)))
                return false;
        if (!parse_uint_n(bus_start, (size_t) (c2 - bus_start), 16, 0xff, &bus) ||
            !parse_uint_n(c2 + 1, (size_t) (dot - c2 - 1), 16, 0x1f, &dev) ||
            !parse_uint_n(dot + 1, (size_t) (s + len - dot - 1), 16, 7, &fn))
                return false;
        *ret_domain = (uint32_t) domain;
        *ret_location = (uint32_t) (bus << 8 | dev << 3 | fn);
        return true;
}

void format_pci_address(uint32_t domain, uint32_t location, char *buf, size_t size) {
        uint32_t bus = (location >> 8) & 0xff, devfn = location & 0xff;

        snprintf(buf, size, "%04x:%02x:%02x.%x", domain, bus, devfn >> 3, devfn & 7);
}
