/* SPDX-License-Identifier: MIT */
/*
 * Small strict parsers shared by the daemon's GPU choice (kfd-gpu-choice.c)
 * and the policy's Devices= (policy-limits.c), which kfdbrokerctl builds in
 * too: nothing here allocates, logs or touches the system.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses s[0..len) entirely as an unsigned number in base 10 or 16 (no sign,
 * no prefix, at most 15 digits) not above max; false if it is not one. */
bool parse_uint_n(const char *s, size_t len, int base, unsigned long max, unsigned long *ret);

/* Parses s[0..len) as a PCI address "[DDDD:]BB:DD.F" (hex; domain 0 when left
 * out, device 0..1f, function 0..7) into the KFD topology's terms: domain, and
 * location_id = bus << 8 | device << 3 | function (kfd_topology.c:
 * pci_dev_id()). False if it is not one. */
bool parse_pci_address(const char *s, size_t len, uint32_t *ret_domain, uint32_t *ret_location);

/* "0000:03:00.0" for domain and location_id, as kfd_node_pci_name() writes it. */
void format_pci_address(uint32_t domain, uint32_t location, char *buf, size_t size);
