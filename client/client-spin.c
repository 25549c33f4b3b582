/* SPDX-License-Identifier: MIT */
/*
 * Adaptive spinning before a wait sleeps (client-spin.h says why and how).
 */
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
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
        /* As if the looks before the first had found no CPU to spare: until
         * one does, each look decides on its own (a short-lived client or
         * one that rarely waits looks only a few times). */
        *sp = (ClientSpin) { .budget_ns = MIN(CLIENT_SPIN_START_NS, max_ns), .max_ns = max_ns,
                             .cpus = sysconf(_SC_NPROCESSORS_ONLN),
                             .crowded_looks = CLIENT_SPIN_CROWDED_LOOKS - 1u };
}

bool client_spin_crowded(const char *loadavg, long cpus) {
        unsigned long running, total;

        /* "0.52 0.58 0.59 3/467 12345": the fourth field is runnable/all. */
        if (sscanf(loadavg, "%*f %*f %*f %lu/%lu", &running, &total) != 2)
                return false;
        return running > (unsigned long) cpus;
}

void client_spin_count_look(ClientSpin *sp, bool crowded) {
        sp->crowded_looks = crowded ? MIN(sp->crowded_looks + 1u, CLIENT_SPIN_CROWDED_LOOKS) : 0u;
        sp->crowded = sp->crowded_looks >= CLIENT_SPIN_CROWDED_LOOKS;
}

static bool machine_crowded(ClientSpin *sp, uint64_t now) {
        char text[128];
        ssize_t n;
        int fd;

        if (sp->max_ns == 0 || now - sp->crowd_checked_ns < CLIENT_SPIN_CROWD_CHECK_NS)
                return sp->crowded;
        sp->crowd_checked_ns = now;
        fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return sp->crowded; /* cannot tell: as the looks before said */
        n = read(fd, text, sizeof(text) - 1);
        close(fd);
        if (n <= 0)
                return sp->crowded;
        text[n] = '\0';
        client_spin_count_look(sp, client_spin_crowded(text, sp->cpus));
        return sp->crowded;
}

void client_spin_look(ClientSpin *sp, uint64_t now_ns) {
        (void) machine_crowded(sp, now_ns);
}

void client_spin_take_looks(ClientSpin *dst, const ClientSpin *src) {
        dst->crowd_checked_ns = src->crowd_checked_ns;
        dst->crowded_looks = src->crowded_looks;
        dst->crowded = src->crowded;
}

bool client_spin(ClientSpin *sp, uint64_t start_ns, bool (*done)(void *userdata), void *userdata) {
        if (done(userdata))
                return true;
        if (sp->budget_ns == 0 || machine_crowded(sp, start_ns))
                return false;
        for (uint64_t yielded = start_ns;;) {
                uint64_t now;

                if (done(userdata))
                        return true;
                now = client_spin_now_ns();
                if (now - start_ns >= sp->budget_ns)
                        return false;
                if (now - yielded >= CLIENT_SPIN_YIELD_NS) {
                        sched_yield();
                        yielded = now;
                } else
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
