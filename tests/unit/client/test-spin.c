/* SPDX-License-Identifier: MIT */
/*
 * libkfdbroker's adaptive spin (client/client-spin.c) on its own: a wait that
 * ends soon after the spin gave up grows the next spin (up to the maximum), a
 * wait longer than the maximum shrinks it to nothing, a spin ends as soon as
 * what it waits for is there and gives up when its time is used, waits stop
 * spinning only after looks in a row found no CPU to spare, and
 * $KFDBROKER_SPIN_US sets the maximum (0: never spin).
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client-spin.h"

#define US 1000u

/* A wait that began waited_ns ago is over. */
static void waited(ClientSpin *sp, uint64_t waited_ns) {
        client_spin_update(sp, client_spin_now_ns() - waited_ns);
}

Test(spin, short_waits_grow_the_spin_up_to_the_maximum) {
        ClientSpin sp;

        client_spin_init(&sp, 100 * US);
        cr_assert_eq(sp.budget_ns, CLIENT_SPIN_START_NS);
        waited(&sp, 30 * US);
        cr_expect_eq(sp.budget_ns, 20 * US, "a 30 us wait after a 10 us spin doubles it: %u", sp.budget_ns);
        waited(&sp, 30 * US);
        cr_expect_eq(sp.budget_ns, 40 * US);
        waited(&sp, 30 * US);
        cr_expect_eq(sp.budget_ns, 40 * US, "a wait the spin caught leaves it as it is");
        for (int i = 0; i < 10; i++)
                waited(&sp, 90 * US);
        cr_expect_eq(sp.budget_ns, 100 * US, "never past the maximum: %u", sp.budget_ns);
}

Test(spin, long_waits_shrink_the_spin_to_nothing_and_a_short_one_starts_it_again) {
        ClientSpin sp;
        int n = 0;

        client_spin_init(&sp, 100 * US);
        for (int i = 0; i < 4; i++)
                waited(&sp, 90 * US); /* 10 -> 20 -> 40 -> 80 -> 100 */
        cr_assert_eq(sp.budget_ns, 100 * US);
        while (sp.budget_ns > 0 && n < 64) {
                waited(&sp, 5000 * US);
                n++;
        }
        cr_expect_eq(sp.budget_ns, 0u, "waits of 5 ms (a long copy) end the spinning");
        cr_expect_leq(n, 20, "within %d waits", n);
        waited(&sp, 5000 * US);
        cr_expect_eq(sp.budget_ns, 0u);
        waited(&sp, 20 * US);
        cr_expect_eq(sp.budget_ns, CLIENT_SPIN_START_NS, "short waits again: %u", sp.budget_ns);
}

Test(spin, a_maximum_of_zero_never_spins) {
        ClientSpin sp;

        client_spin_init(&sp, 0);
        cr_assert_eq(sp.budget_ns, 0u);
        waited(&sp, 20 * US);
        cr_expect_eq(sp.budget_ns, 0u);
}

static bool third_look(void *userdata) {
        int *looks = userdata;

        return ++*looks >= 3;
}

static bool never(void *userdata) {
        int *looks = userdata;

        ++*looks;
        return false;
}

Test(spin, a_spin_ends_when_the_wait_is_over_or_its_time_is_used) {
        ClientSpin sp;
        uint64_t start, took;
        int looks = 0;

        client_spin_init(&sp, 100 * US);
        sp.budget_ns = 100 * US;
        /* As if the machine had just been seen with a CPU to spare (this
         * test must not depend on how busy the machine is). */
        sp.crowd_checked_ns = client_spin_now_ns();
        cr_expect(client_spin(&sp, client_spin_now_ns(), third_look, &looks));
        cr_expect_eq(looks, 3, "looked %d times", looks);

        looks = 0;
        start = client_spin_now_ns();
        sp.crowd_checked_ns = start;
        cr_expect_not(client_spin(&sp, start, never, &looks));
        took = client_spin_now_ns() - start;
        cr_expect_geq(took, 100 * US, "gave up after %llu ns", (unsigned long long) took);
        cr_expect_gt(looks, 1);

        looks = 0;
        sp.budget_ns = 0;
        cr_expect_not(client_spin(&sp, client_spin_now_ns(), never, &looks));
        cr_expect_eq(looks, 1, "no spin: one look");
}

Test(spin, the_environment_sets_the_maximum) {
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
                cr_expect_eq(client_spin_max_ns(), 0u, "one CPU: no spinning");
                return;
        }
        unsetenv("KFDBROKER_SPIN_US");
        cr_expect_eq(client_spin_max_ns(), CLIENT_SPIN_MAX_NS);
        setenv("KFDBROKER_SPIN_US", "0", 1);
        cr_expect_eq(client_spin_max_ns(), 0u);
        setenv("KFDBROKER_SPIN_US", "250", 1);
        cr_expect_eq(client_spin_max_ns(), 250 * US);
        setenv("KFDBROKER_SPIN_US", "20000", 1);
        cr_expect_eq(client_spin_max_ns(), CLIENT_SPIN_MAX_NS, "more than 10 ms is ignored");
        setenv("KFDBROKER_SPIN_US", "fast", 1);
        cr_expect_eq(client_spin_max_ns(), CLIENT_SPIN_MAX_NS, "not a number is ignored");
        unsetenv("KFDBROKER_SPIN_US");
}

Test(spin, the_runnable_count_says_whether_a_cpu_is_to_spare) {
        cr_expect_not(client_spin_crowded("0.52 0.58 0.59 2/467 12345\n", 2));
        cr_expect(client_spin_crowded("0.52 0.58 0.59 3/467 12345\n", 2));
        cr_expect_not(client_spin_crowded("3.00 2.00 1.00 3/90 7\n", 4));
        cr_expect_not(client_spin_crowded("", 2), "cannot tell: not crowded");
        cr_expect_not(client_spin_crowded("0.52 0.58 0.59 x/467 1", 2));
}

/* CLIENT_SPIN_CROWDED_LOOKS looks at the machine as it is now, as if taken a
 * check interval apart. */
static void look_enough(ClientSpin *sp) {
        uint64_t now = client_spin_now_ns();

        for (unsigned i = 0; i < CLIENT_SPIN_CROWDED_LOOKS; i++)
                client_spin_look(sp, now + (uint64_t) (i + 1) * CLIENT_SPIN_CROWD_CHECK_NS);
        sp->crowd_checked_ns = client_spin_now_ns(); /* the last look holds for the wait */
}

Test(spin, only_looks_in_a_row_that_find_no_cpu_to_spare_stop_the_spin) {
        ClientSpin sp;

        client_spin_init(&sp, 100 * US);
        cr_expect_not(sp.crowded);
        client_spin_count_look(&sp, true);
        cr_expect(sp.crowded, "a new spin's first look decides");
        client_spin_count_look(&sp, false);
        cr_expect_not(sp.crowded);
        for (unsigned i = 0; i + 1 < CLIENT_SPIN_CROWDED_LOOKS; i++) {
                client_spin_count_look(&sp, true);
                cr_expect_not(sp.crowded, "%u crowded looks of %u: still spinning", i + 1,
                              CLIENT_SPIN_CROWDED_LOOKS);
        }
        client_spin_count_look(&sp, false);
        cr_expect_not(sp.crowded);
        for (unsigned i = 0; i + 1 < CLIENT_SPIN_CROWDED_LOOKS; i++)
                client_spin_count_look(&sp, true);
        cr_expect_not(sp.crowded, "a look with a CPU to spare started the count again");
        client_spin_count_look(&sp, true);
        cr_expect(sp.crowded, "%u crowded looks in a row", CLIENT_SPIN_CROWDED_LOOKS);
        for (int i = 0; i < 10; i++)
                client_spin_count_look(&sp, true);
        cr_expect(sp.crowded);
        client_spin_count_look(&sp, false);
        cr_expect_not(sp.crowded, "one look with a CPU to spare is enough to spin again");
}

Test(spin, looks_handed_on_between_two_spins_count_once) {
        ClientSpin a, b;

        client_spin_init(&a, 100 * US);
        client_spin_init(&b, 100 * US);
        client_spin_count_look(&a, false);
        client_spin_count_look(&a, true);
        client_spin_take_looks(&b, &a);
        client_spin_count_look(&b, true); /* b's own look, on a's row */
        client_spin_take_looks(&a, &b);
        client_spin_count_look(&a, true);
        cr_expect_not(a.crowded, "3 crowded looks in a row so far");
        client_spin_count_look(&a, true);
        cr_expect(a.crowded, "the 4th, whichever spin took them");
        a.crowd_checked_ns = client_spin_now_ns();
        client_spin_take_looks(&b, &a);
        cr_expect(b.crowded);
        cr_expect_eq(b.crowd_checked_ns, a.crowd_checked_ns, "no look of its own within the interval");
        client_spin_count_look(&b, false);
        cr_expect_not(b.crowded);
        cr_expect(a.crowded, "each goes its own way after");
}

Test(spin, no_spin_while_more_threads_are_runnable_than_there_are_cpus) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        pid_t burners[64];
        uint64_t start, took;
        ClientSpin sp;
        int looks = 0;

        cr_assert_leq(cpus, 64);
        /* One busy child per CPU: with this thread, more runnable than CPUs. */
        for (long i = 0; i < cpus; i++) {
                burners[i] = fork();
                if (burners[i] == 0)
                        for (;;)
                                __asm__ __volatile__("" ::: "memory");
        }
        usleep(20000);
        client_spin_init(&sp, 10000 * US);
        sp.budget_ns = 10000 * US;
        look_enough(&sp);
        start = client_spin_now_ns();
        cr_expect_not(client_spin(&sp, start, never, &looks));
        took = client_spin_now_ns() - start;
        for (long i = 0; i < cpus; i++) {
                kill(burners[i], SIGKILL);
                waitpid(burners[i], NULL, 0);
        }
        cr_expect(sp.crowded, "%ld busy threads on %ld CPUs: crowded", cpus, cpus);
        cr_expect_eq(looks, 1, "spun for %llu ns, looking %d times", (unsigned long long) took, looks);
}

/* The look taken just before the daemon is woken (client_spin_look()) is the
 * one a wait starting right after uses: threads that became runnable in
 * between (the daemon's, doing the caller's work) do not stop the spin. */
Test(spin, a_look_before_waking_the_daemon_holds_for_the_wait) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        pid_t burners[64];
        uint64_t start;
        ClientSpin sp;
        int looks = 0;

        cr_assert_leq(cpus, 64);
        client_spin_init(&sp, 10000 * US);
        sp.budget_ns = 200 * US;
        for (long i = 0; i < cpus; i++) {
                burners[i] = fork();
                if (burners[i] == 0)
                        for (;;)
                                __asm__ __volatile__("" ::: "memory");
        }
        /* As if a look had just found a CPU to spare (before the burners
         * were runnable): within its millisecond it holds, the wait spins. */
        sp.crowd_checked_ns = client_spin_now_ns();
        sp.crowded = false;
        start = client_spin_now_ns();
        cr_expect_not(client_spin(&sp, start, never, &looks));
        cr_expect_gt(looks, 1, "the wait spun on the earlier look");
        /* Looks after it find the machine crowded, and the next wait does not spin. */
        usleep(20000);
        look_enough(&sp);
        looks = 0;
        cr_expect_not(client_spin(&sp, client_spin_now_ns(), never, &looks));
        for (long i = 0; i < cpus; i++) {
                kill(burners[i], SIGKILL);
                waitpid(burners[i], NULL, 0);
        }
        cr_expect(sp.crowded, "%ld busy threads on %ld CPUs: crowded", cpus, cpus);
        cr_expect_eq(looks, 1, "no spin after crowded looks");
}
