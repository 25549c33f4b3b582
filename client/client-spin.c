/* SPDX-License-Identifier: MIT */
/*
 * Adaptive spinning before a wait sleeps (client-spin.h says why and how).
 */
#include <limits.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "client-spin.h"
#include "macro.h"

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#endif
}

uint64_t client_spin_now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

uint32_t client_spin_max_ns(void) {
        const char *e = secure_getenv("KFDBROKER_SPIN_US");

        if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
                return 0;
        if (e && *e) {
                char *end = NULL;
                long v = strtol(e, &end, 10);

                /* Up to 10 ms: a longer spin is a busy wait, not a spin. */
                if (end && *end == '\0' && v >= 0 && v <= 10000)
                        return (uint32_t) v * 1000u;
        }
        return CLIENT_SPIN_MAX_NS;
}

void client_spin_init(ClientSpin *sp, uint32_t max_ns) {
        *sp = (ClientSpin) { .budget_ns = MIN(CLIENT_SPIN_START_NS, max_ns), .max_ns = max_ns };
}

bool client_spin(const ClientSpin *sp, uint64_t start_ns, bool (*done)(void *userdata), void *userdata) {
        if (sp->budget_ns == 0)
                return done(userdata);
        for (;;) {
                if (done(userdata))
                        return true;
                if (client_spin_now_ns() - start_ns >= sp->budget_ns)
                        return false;
                cpu_relax();
        }
}

void client_spin_update(ClientSpin *sp, uint64_t start_ns) {
        uint64_t waited = client_spin_now_ns() - start_ns;

        if (sp->max_ns == 0 || waited <= sp->budget_ns)
                return;
        if (waited <= sp->max_ns)
                sp->budget_ns = MIN(MAX(sp->budget_ns * 2u, CLIENT_SPIN_START_NS), sp->max_ns);
        else
                sp->budget_ns /= 2u;
}
