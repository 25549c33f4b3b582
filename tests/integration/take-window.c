/* SPDX-License-Identifier: MIT */
/*
 * Preloaded into kfdbrokerd by tests/integration/test-leaks.c: maps a page in
 * the middle of the client address window before the daemon's own
 * constructor can reserve it, as a library that chose the same fixed address
 * would. The daemon must then refuse to start, naming the range.
 */
#include <sys/mman.h>

__attribute__((constructor)) static void take_window(void) {
        (void) mmap((void *) 0x150000000000ULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                    -1, 0);
}
