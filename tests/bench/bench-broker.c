/* SPDX-License-Identifier: MIT */
/*
 * The broker against baselines measured in the same run (compare ratios;
 * machines here are small and noisy), one line per ratio of issue 13 next to
 * its goal ("ratio 0.93 (goal >= 0.9) ok" or "below"). It reports; it does
 * not gate. Medians of several rounds throughout.
 *   1. 4-byte fill round trip through the broker against the in-process
 *      floor (bench-floor: the same simulated GPU layer driven directly) and
 *      a raw SOCK_SEQPACKET echo between two processes, with the submit ring
 *      and on the socket path (a session made with KFDBROKER_SUBMIT_RING=0),
 *      and, for comparison only, the ring of a session made with
 *      KFDBROKER_SPIN_US=0 (libkfdbroker's waits sleep at once; the floor
 *      never spins);
 *   2. batches of 64 4-byte fills through the broker against the floor's
 *      (both paths);
 *   3. a 256 MiB GPU copy against memcpy of the same size, quiet and next
 *      to 2 CPU burner threads (issue 32 item 4: >= 0.8 both times);
 *   4. AllocBuffer+FreeBuffer pairs of 64 KiB, quiet and next to 2 CPU
 *      burner threads (issue 32 item 3: >= 0.5 both times), and
 *      kfdb_slice_alloc+kfdb_slice_free pairs of libkfdbroker's
 *      sub-allocator, against memfd_create+ftruncate+mmap+munmap+close, in
 *      alternating rounds;
 *   1b. 1 and 2 again, fewer rounds, with a burner thread keeping one CPU
 *      busy: no goals, but the floor sleeps in its waits, and what waking a
 *      vCPU costs it depends on the VM's state and drifts over minutes (its
 *      round trip has measured ~45 us idle and ~16 us busy, and on other
 *      runs ~16 us idle and ~31 us busy), more than it costs the broker's
 *      client (which spins), so the ratios of 1 and 2 also say how the
 *      machine was;
 *   5. noisy neighbours (issue 32 item 1): a light client's 4 KiB copies
 *      (one at a time, back to back or 200 us apart) next to 2 CPU burners,
 *      and next to 15 flooders each keeping one 16 MiB copy in flight or 8
 *      of them queued — on a daemon that splits large copies into pieces
 *      and on one started with KFDBROKERD_CHUNKING=0; for each of the four
 *      shapes the light client's p99 with flooders against its p99 (same
 *      light shape) with burners (goal <= 2), and for each flood shape the
 *      flooders' throughput with chunking against without (goal >= 0.7).
 * How 1 and 2 are interleaved: on this kind of VM a round trip between two
 * processes takes ~8 us when both run on one vCPU and ~35-45 us across
 * vCPUs, and which of the two a process pair gets drifts over seconds, so a
 * baseline measured at another time than the broker compares two machines.
 * bench-floor therefore runs for the whole of 1 and 2 as a child
 * (bench-floor --serve) that measures one round when asked, and the echo's
 * child lives through all of 1. Each of the RT_ROUNDS rounds of 1 runs
 * RT_PER_ROUND round trips of the floor, the echo, the socket path, the
 * ring and the ring without the spin, one after the other; each of the BATCH_ROUNDS rounds of 2 runs the
 * floor, the socket path and the ring for BATCH_ROUND_NS each. A ratio is
 * taken within each round (the round's broker figure against the same
 * round's floor, or floor + echo), and the line gives the median of those
 * per-round ratios with their range; the absolute figures printed are the
 * medians over rounds of each one's own figure. Where the scheduler puts
 * each process's threads is the other half of that drift, and it is chosen
 * for the floor and for the broker independently (docs/simulator.md: the
 * ring's round trip is ~13-20 us with the simulator's engine and waiter
 * threads off the spinning client's vCPU, 30-42 us with one of them on it;
 * the floor's ~15 us with its three threads on one vCPU, ~42 us spread), so
 * 1 also prints, without a goal, the fastest round of each against the
 * fastest of the other.
 * Starts its own kfdbrokerd --device=sim daemons (path from $KFDBROKERD or
 * the build tree) and bench-floor --serve ($BENCH_FLOOR or the build tree).
 * Usage: bench-broker [round-trip|batched|warm|copy|alloc|suballoc|noise...] (all of them
 * without arguments).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench-util.h"
#include "kfdbroker.h"

#define ECHO_TRIPS 3000
#define RT_ROUNDS 24
#define RT_PER_ROUND 300
#define COPY_SIZE (256ull << 20)
#define COPY_RUNS 5
#define ALLOC_PAIRS 2000
#define ALLOC_SIZE (64u << 10)
#define ALLOC_ROUNDS 5
#define BATCH 64
#define BATCH_ROUNDS 16
#define BATCH_ROUND_NS 250000000ull
#define WARM_ROUNDS 5
#define FLOODERS 15
#define FLOOD_BYTES (16ull << 20)
#define LIGHT_BYTES 4096u
#define BURNERS 2
#define NOISE_ROUNDS 3
#define NOISE_WARMUP_NS 500000000ull
#define NOISE_NS 2500000000ull

static void die(const char *what, int r) {
        fprintf(stderr, "bench-broker: %s: %s\n", what, strerror(r < 0 ? -r : r));
        exit(1);
}

/* The median of n per-round ratios (sorts them), with their range. */
static void report_rounds(const char *what, double *ratio, int n, bool at_most, double goal) {
        char tail[64];
        double m = median(ratio, (size_t) n);

        snprintf(tail, sizeof tail, " (median of %d rounds, %.2f-%.2f)", n, ratio[0], ratio[n - 1]);
        report_line(what, m, at_most, goal, tail);
}

/* BURNERS CPU burner threads (bench_burner_thread) for the goals of issue
 * 32 that hold "next to the bench's own two burner threads". */
typedef struct Burners {
        BenchNoise n;
        pthread_t th[BURNERS];
} Burners;

static void burners_start(Burners *b) {
        atomic_store(&b->n.stop, false);
        for (int i = 0; i < BURNERS; i++)
                if (pthread_create(&b->th[i], NULL, bench_burner_thread, &b->n) != 0)
                        die("pthread_create", EAGAIN);
}

static void burners_stop(Burners *b) {
        atomic_store(&b->n.stop, true);
        for (int i = 0; i < BURNERS; i++)
                pthread_join(b->th[i], NULL);
}

static void chunking_off(void) {
        setenv("KFDBROKERD_CHUNKING", "0", 1);
}

static pid_t start_daemon(const char *sock, bool chunking) {
        pid_t pid = bench_start_daemon(KFDBROKERD_BUILD_PATH, sock, "warning", NULL, chunking ? NULL : chunking_off);

        if (pid < 0)
                die("kfdbrokerd did not start", ETIMEDOUT);
        return pid;
}

static void stop_daemon(pid_t pid, const char *sock) {
        int status;

        kill(pid, SIGTERM);
        waitpid(pid, &status, 0);
        unlink(sock);
}

/* ---- the floor: bench-floor --serve, one round at a time ---- */

typedef struct Floor {
        pid_t pid;
        FILE *in;  /* its stdin: one command a line */
        FILE *out; /* its stdout: one answer a command */
} Floor;

static void floor_start(Floor *f) {
        const char *bin = getenv("BENCH_FLOOR");
        int to[2], from[2];
        char line[64];

        if (!bin)
                bin = BENCH_FLOOR_PATH;
        /* A floor that died answers a write with EPIPE, not with our death. */
        signal(SIGPIPE, SIG_IGN);
        if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0)
                die("pipe2", errno);
        f->pid = fork();
        if (f->pid < 0)
                die("fork", errno);
        if (f->pid == 0) {
                if (dup2(to[0], STDIN_FILENO) < 0 || dup2(from[1], STDOUT_FILENO) < 0)
                        _exit(127);
                execl(bin, bin, "--serve", (char *) NULL);
                fprintf(stderr, "bench-broker: cannot run %s: %s\n", bin, strerror(errno));
                _exit(127);
        }
        close(to[0]);
        close(from[1]);
        f->in = fdopen(to[1], "w");
        f->out = fdopen(from[0], "r");
        if (!f->in || !f->out)
                die("fdopen", errno);
        /* Its device is up before the daemon starts (and a floor that
         * cannot run stops us before there is a daemon to leave behind). */
        if (!fgets(line, sizeof line, f->out) || strcmp(line, "ready\n") != 0)
                die("bench-floor --serve did not start", EPROTO);
}

static void floor_bad_answer(const char *cmd, const char *answer) {
        fprintf(stderr, "bench-broker: bench-floor answered '%s' to '%s'\n", answer, cmd);
        exit(1);
}

/* Sends cmd, reads its one-line answer (newline removed) into answer. */
static void floor_ask(Floor *f, const char *cmd, char *answer, size_t size) {
        if (fprintf(f->in, "%s\n", cmd) < 0 || fflush(f->in) != 0)
                die("bench-floor: sending a command", errno);
        if (!fgets(answer, (int) size, f->out))
                die("bench-floor stopped answering", EPIPE);
        answer[strcspn(answer, "\n")] = '\0';
        if (strncmp(answer, "error ", 6) == 0)
                floor_bad_answer(cmd, answer);
}

/* n round trips of the floor's (after its BENCH_RT_WARMUP): p50, p99 in us. */
static void floor_round_trips(Floor *f, int n, double *p50, double *p99) {
        char cmd[64], answer[256];

        snprintf(cmd, sizeof cmd, "rt %d", n);
        floor_ask(f, cmd, answer, sizeof answer);
        if (sscanf(answer, "rt p50_us=%lf p99_us=%lf", p50, p99) != 2)
                floor_bad_answer(cmd, answer);
}

/* The floor's jobs per second in batches of BATCH fills for ns. */
static double floor_batched(Floor *f, uint64_t ns) {
        char cmd[64], answer[256];
        double rate;

        snprintf(cmd, sizeof cmd, "batch %" PRIu64, ns);
        floor_ask(f, cmd, answer, sizeof answer);
        if (sscanf(answer, "batch jobs_per_s=%lf", &rate) != 1)
                floor_bad_answer(cmd, answer);
        return rate;
}

static void floor_stop(Floor *f) {
        int status;

        (void) fprintf(f->in, "quit\n");
        fclose(f->in);
        fclose(f->out);
        if (waitpid(f->pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                die("bench-floor did not exit cleanly", EPROTO);
}

/* ---- the raw SOCK_SEQPACKET echo: a child process sending back what it gets ---- */

typedef struct Echo {
        int fd;
        pid_t child;
} Echo;

static void echo_open(Echo *e) {
        char buf[64];
        int sv[2];

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                die("socketpair", errno);
        e->child = fork();
        if (e->child < 0)
                die("fork", errno);
        if (e->child == 0) {
                close(sv[0]);
                for (;;) {
                        ssize_t n = recv(sv[1], buf, sizeof(buf), 0);
                        if (n <= 0)
                                _exit(0);
                        if (send(sv[1], buf, (size_t) n, 0) < 0)
                                _exit(1);
                }
        }
        close(sv[1]);
        e->fd = sv[0];
}

/* p50 and p99 (us) of n 64-byte round trips, after warmup unmeasured ones. */
static void echo_round_trips(Echo *e, int n, int warmup, double *p50, double *p99) {
        uint64_t *t = calloc((size_t) n, sizeof(*t));
        char buf[64] = "ping";

        if (!t)
                die("calloc", ENOMEM);
        for (int i = 0; i < n + warmup; i++) {
                uint64_t t0 = now_ns();
                if (send(e->fd, buf, sizeof(buf), 0) < 0 || recv(e->fd, buf, sizeof(buf), 0) <= 0)
                        die("echo round trip", errno);
                if (i >= warmup)
                        t[i - warmup] = now_ns() - t0;
        }
        percentiles(t, (size_t) n, p50, p99);
        free(t);
}

static void echo_close(Echo *e) {
        close(e->fd);
        waitpid(e->child, NULL, 0);
}

/* ECHO_TRIPS round trips of a new echo, for the alloc section. */
static void baseline_seqpacket(double *p50, double *p99) {
        Echo e;

        echo_open(&e);
        echo_round_trips(&e, ECHO_TRIPS, 100, p50, p99);
        echo_close(&e);
}

/* ---- round trips ---- */

/* p50 and p99 (us) of n round trips of one 4-byte fill on s, after
 * BENCH_RT_WARMUP unmeasured ones. */
static void fill_round_trips(kfdb_session *s, kfdb_buffer *buf, kfdb_batch *batch, int n, double *p50, double *p99) {
        uint64_t *t = calloc((size_t) n, sizeof(*t));
        int r;

        if (!t)
                die("calloc", ENOMEM);
        for (int i = 0; i < n + BENCH_RT_WARMUP; i++) {
                uint64_t fence, t0 = now_ns();
                if ((r = kfdb_batch_fill(batch, buf, 0, 4, 0x5a5a5a5a)) < 0 ||
                    (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 ||
                    (r = kfdb_fence_wait(s, fence, 10000)) < 0)
                        die("4-byte fill", r);
                if (i >= BENCH_RT_WARMUP)
                        t[i - BENCH_RT_WARMUP] = now_ns() - t0;
        }
        percentiles(t, (size_t) n, p50, p99);
        free(t);
}

/* A buffer and a batch on each of the two sessions. */
typedef struct Pair {
        kfdb_buffer *rbuf, *sbuf;
        kfdb_batch *rbatch, *sbatch;
} Pair;

static void pair_open(Pair *p, kfdb_session *ring, kfdb_session *sock) {
        int r;

        if ((r = kfdb_buffer_alloc(ring, 4096, KFDB_PLACEMENT_GTT, &p->rbuf)) < 0 ||
            (r = kfdb_batch_new(ring, &p->rbatch)) < 0 ||
            (r = kfdb_buffer_alloc(sock, 4096, KFDB_PLACEMENT_GTT, &p->sbuf)) < 0 ||
            (r = kfdb_batch_new(sock, &p->sbatch)) < 0)
                die("setup", r);
}

static void pair_close(Pair *p) {
        kfdb_batch_free(p->rbatch);
        kfdb_buffer_free(p->rbuf);
        kfdb_batch_free(p->sbatch);
        kfdb_buffer_free(p->sbuf);
}

/* One round trip figure per round (p50 or p99, us) of each thing measured. */
typedef struct RtRounds {
        double sock[RT_ROUNDS], ring[RT_ROUNDS], ring_nospin[RT_ROUNDS], floor[RT_ROUNDS], echo[RT_ROUNDS];
} RtRounds;

/* One line of bench_round_trip(): the medians over rounds of the rounds'
 * p50 and p99 (sorts them), and the range of the p50s (a process pair that
 * changes vCPUs between rounds shows as a wide one). */
static void print_rt_line(const char *what, double *p50, double *p99) {
        double m50 = median(p50, RT_ROUNDS);

        printf("  %-47s p50 %7.1f us  p99 %8.1f us  (p50 %.1f-%.1f)\n", what, m50, median(p99, RT_ROUNDS), p50[0],
               p50[RT_ROUNDS - 1]);
}

/* RT_ROUNDS rounds, each of RT_PER_ROUND round trips of the floor, the echo,
 * the socket path (the session made with KFDBROKER_SUBMIT_RING=0), the
 * submit ring (ring), and the submit ring of a session made with
 * KFDBROKER_SPIN_US=0 (nospin: what libkfdbroker's spin before a wait
 * sleeps is worth; no goal), one after the other; the ratios are taken round
 * by round. */
static void bench_round_trip(kfdb_session *ring, kfdb_session *sock, kfdb_session *nospin, Floor *floor) {
        double sock_ratio[RT_ROUNDS], ring_ratio[RT_ROUNDS], nospin_ratio[RT_ROUNDS];
        kfdb_buffer *nbuf;
        kfdb_batch *nbatch;
        RtRounds p50, p99;
        uint64_t page0[2], page1[2];
        bool ring_used;
        Echo echo;
        Pair p;
        int r;

        pair_open(&p, ring, sock);
        if ((r = kfdb_buffer_alloc(nospin, 4096, KFDB_PLACEMENT_GTT, &nbuf)) < 0 ||
            (r = kfdb_batch_new(nospin, &nbatch)) < 0)
                die("setup", r);
        echo_open(&echo);
        page0[0] = kfdb_session_get_fence_page_waits(sock);
        page0[1] = kfdb_session_get_fence_page_waits(ring);
        for (int k = 0; k < RT_ROUNDS; k++) {
                floor_round_trips(floor, RT_PER_ROUND, &p50.floor[k], &p99.floor[k]);
                echo_round_trips(&echo, RT_PER_ROUND, BENCH_RT_WARMUP, &p50.echo[k], &p99.echo[k]);
                fill_round_trips(sock, p.sbuf, p.sbatch, RT_PER_ROUND, &p50.sock[k], &p99.sock[k]);
                fill_round_trips(ring, p.rbuf, p.rbatch, RT_PER_ROUND, &p50.ring[k], &p99.ring[k]);
                fill_round_trips(nospin, nbuf, nbatch, RT_PER_ROUND, &p50.ring_nospin[k], &p99.ring_nospin[k]);
                sock_ratio[k] = p50.sock[k] / (p50.floor[k] + p50.echo[k]);
                ring_ratio[k] = p50.ring[k] / p50.floor[k];
                nospin_ratio[k] = p50.ring_nospin[k] / p50.floor[k];
        }
        echo_close(&echo);
        page1[0] = kfdb_session_get_fence_page_waits(sock);
        page1[1] = kfdb_session_get_fence_page_waits(ring);
        ring_used = kfdb_session_get_ring_submits(ring) > 0 && kfdb_session_get_ring_submits(sock) == 0;
        printf("4-byte fill round trip (medians of %d interleaved rounds of %d: each round's p50 and p99; "
               "the range of the rounds' p50):\n",
               RT_ROUNDS, RT_PER_ROUND);
        print_rt_line(ring_used ? "broker, socket path (KFDBROKER_SUBMIT_RING=0):" : "broker, socket path:", p50.sock,
                      p99.sock);
        print_rt_line(ring_used ? "broker, submit ring:" : "broker, submit ring (NOT IN USE):", p50.ring, p99.ring);
        print_rt_line("broker, submit ring, KFDBROKER_SPIN_US=0:", p50.ring_nospin, p99.ring_nospin);
        print_rt_line("in-process floor:", p50.floor, p99.floor);
        print_rt_line("raw SEQPACKET echo:", p50.echo, p99.echo);
        report_rounds("round trip p50: broker / (floor + echo), socket path", sock_ratio, RT_ROUNDS, true, 1.0);
        report_rounds(ring_used ? "round trip p50: broker / floor (with a submission ring)"
                                : "round trip p50: broker / floor (ring NOT in use)",
                      ring_ratio, RT_ROUNDS, true, 1.3);
        /* print_rt_line() sorted each p50 array: [0] is its fastest round. */
        printf("  fastest rounds against fastest rounds (each where the scheduler placed its threads best; no goal): "
               "socket path / (floor + echo) %.2f, ring / floor %.2f\n",
               p50.sock[0] / (p50.floor[0] + p50.echo[0]), p50.ring[0] / p50.floor[0]);
        printf("  without the client's spin (KFDBROKER_SPIN_US=0), the ring's ratio is %.2f (median of %d rounds; "
               "no goal: what the spin is worth)\n",
               median(nospin_ratio, RT_ROUNDS), RT_ROUNDS);
        printf("  waits the fence page ended before the session page: %" PRIu64 " of %d over the socket, %" PRIu64
               " of %d with the ring\n",
               page1[0] - page0[0], RT_ROUNDS * (RT_PER_ROUND + BENCH_RT_WARMUP), page1[1] - page0[1],
               RT_ROUNDS * (RT_PER_ROUND + BENCH_RT_WARMUP));
        kfdb_batch_free(nbatch);
        kfdb_buffer_free(nbuf);
        pair_close(&p);
}

/* ---- batched small jobs ---- */

/* Jobs per second in batches of BATCH 4-byte fills for BATCH_ROUND_NS. */
static double batched_rate(kfdb_session *s, kfdb_buffer *buf, kfdb_batch *batch) {
        uint64_t t0 = now_ns(), jobs = 0, t;
        int r;

        do {
                uint64_t last;
                for (int i = 0; i < BATCH; i++)
                        if ((r = kfdb_batch_fill(batch, buf, 0, 4, 0x5a5a5a5a)) < 0)
                                die("batch", r);
                if ((r = kfdb_batch_submit(batch, NULL, &last)) < 0 || (r = kfdb_fence_wait(s, last, 10000)) < 0)
                        die("batch", r);
                jobs += BATCH;
                t = now_ns() - t0;
        } while (t < BATCH_ROUND_NS);
        return (double) jobs * 1e9 / (double) t;
}

/* BATCH_ROUNDS rounds, each of the floor, the socket path and the submit
 * ring for BATCH_ROUND_NS, one after the other; the ratios are taken round
 * by round. */
static void bench_batched(kfdb_session *ring, kfdb_session *sock, Floor *floor) {
        double rate[BATCH_ROUNDS], srate[BATCH_ROUNDS], frate[BATCH_ROUNDS], ratio[BATCH_ROUNDS],
                sratio[BATCH_ROUNDS];
        Pair p;

        pair_open(&p, ring, sock);
        for (int k = 0; k < BATCH_ROUNDS; k++) {
                frate[k] = floor_batched(floor, BATCH_ROUND_NS);
                srate[k] = batched_rate(sock, p.sbuf, p.sbatch);
                rate[k] = batched_rate(ring, p.rbuf, p.rbatch);
                ratio[k] = rate[k] / frate[k];
                sratio[k] = srate[k] / frate[k];
        }
        printf("batches of %d 4-byte fills:  broker %9.0f jobs/s with the submit ring, %9.0f over the socket, "
               "floor %9.0f jobs/s (medians of %d interleaved rounds)\n",
               BATCH, median(rate, BATCH_ROUNDS), median(srate, BATCH_ROUNDS), median(frate, BATCH_ROUNDS),
               BATCH_ROUNDS);
        report_rounds("batched small jobs: broker / floor throughput", ratio, BATCH_ROUNDS, false, 0.9);
        report_rounds("batched small jobs: broker / floor throughput, socket path", sratio, BATCH_ROUNDS, false, 0.9);
        pair_close(&p);
}

/* ---- 1 and 2 with one CPU kept busy ---- */

/* WARM_ROUNDS rounds of round trips (floor, echo, socket path, ring) and of
 * batches (floor, socket path, ring) next to one burner thread; the ratios
 * as in 1 and 2, round by round, printed without goals. */
static void bench_warm(kfdb_session *ring, kfdb_session *sock, Floor *floor) {
        double rt_sock[WARM_ROUNDS], rt_ring[WARM_ROUNDS], b_sock[WARM_ROUNDS], b_ring[WARM_ROUNDS],
                floor_p50[WARM_ROUNDS], ring_p50[WARM_ROUNDS], x;
        BenchNoise n = {};
        pthread_t burner;
        Echo echo;
        Pair p;

        pair_open(&p, ring, sock);
        echo_open(&echo);
        if (pthread_create(&burner, NULL, bench_burner_thread, &n) != 0)
                die("pthread_create", EAGAIN);
        for (int k = 0; k < WARM_ROUNDS; k++) {
                double e50, s50, f;
                floor_round_trips(floor, RT_PER_ROUND, &floor_p50[k], &x);
                echo_round_trips(&echo, RT_PER_ROUND, BENCH_RT_WARMUP, &e50, &x);
                fill_round_trips(sock, p.sbuf, p.sbatch, RT_PER_ROUND, &s50, &x);
                fill_round_trips(ring, p.rbuf, p.rbatch, RT_PER_ROUND, &ring_p50[k], &x);
                rt_sock[k] = s50 / (floor_p50[k] + e50);
                rt_ring[k] = ring_p50[k] / floor_p50[k];
                f = floor_batched(floor, BATCH_ROUND_NS);
                b_sock[k] = batched_rate(sock, p.sbuf, p.sbatch) / f;
                b_ring[k] = batched_rate(ring, p.rbuf, p.rbatch) / f;
        }
        atomic_store(&n.stop, true);
        pthread_join(burner, NULL);
        echo_close(&echo);
        pair_close(&p);
        printf("with one CPU kept busy by a burner thread (medians of %d rounds; no goals: what waking a vCPU costs "
               "the floor's sleeping waits drifts with the VM's state, so the ratios above also say how the machine "
               "was):\n"
               "  round trip p50: floor %.1f us, ring %.1f us; ratios: socket path / (floor + echo) %.2f, ring / floor "
               "%.2f\n"
               "  batched small jobs, broker / floor throughput: ring %.2f, socket path %.2f\n",
               WARM_ROUNDS, median(floor_p50, WARM_ROUNDS), median(ring_p50, WARM_ROUNDS), median(rt_sock, WARM_ROUNDS),
               median(rt_ring, WARM_ROUNDS), median(b_ring, WARM_ROUNDS), median(b_sock, WARM_ROUNDS));
}

/* ---- 256 MiB copy ---- */

/* COPY_RUNS runs of the GPU copy of a to b and of memcpy of x to y,
 * interleaved so that both see the same noise: their GB/s in gpu and cpu. */
static void copy_runs(kfdb_session *s, kfdb_batch *batch, kfdb_buffer *a, kfdb_buffer *b, char *x, char *y,
                      double *gpu, double *cpu) {
        uint64_t fence, t0;
        int r;

        for (int i = 0; i < COPY_RUNS; i++) {
                t0 = now_ns();
                if ((r = kfdb_batch_copy(batch, b, 0, a, 0, COPY_SIZE)) < 0 ||
                    (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 ||
                    (r = kfdb_fence_wait(s, fence, 60000)) < 0)
                        die("copy", r);
                gpu[i] = (double) COPY_SIZE / (double) (now_ns() - t0);
                t0 = now_ns();
                memcpy(y, x, COPY_SIZE);
                __asm__ __volatile__("" ::"r"(y) : "memory");
                cpu[i] = (double) COPY_SIZE / (double) (now_ns() - t0);
        }
}

/* The 256 MiB copy against memcpy, quiet and next to BURNERS burner threads
 * (issue 32, item 4: the goal holds next to them too). */
static void bench_copy(kfdb_session *s) {
        double gpu[COPY_RUNS], cpu[COPY_RUNS], gpu_busy[COPY_RUNS], cpu_busy[COPY_RUNS];
        kfdb_buffer *a, *b;
        kfdb_batch *batch;
        Burners burners = {};
        uint64_t fence;
        char *x, *y;
        int r;

        if ((r = kfdb_buffer_alloc(s, COPY_SIZE, KFDB_PLACEMENT_GTT, &a)) < 0 ||
            (r = kfdb_buffer_alloc(s, COPY_SIZE, KFDB_PLACEMENT_GTT, &b)) < 0 ||
            (r = kfdb_batch_new(s, &batch)) < 0)
                die("copy setup", r);
        /* Touch both buffers once (first-touch page faults are not the copy's cost). */
        if ((r = kfdb_batch_fill(batch, a, 0, COPY_SIZE, 0x5a5a5a5a)) < 0 ||
            (r = kfdb_batch_fill(batch, b, 0, COPY_SIZE, 0)) < 0 ||
            (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 60000)) < 0)
                die("fill", r);
        x = malloc(COPY_SIZE);
        y = malloc(COPY_SIZE);
        if (!x || !y)
                die("malloc", ENOMEM);
        memset(x, 0x5a, COPY_SIZE);
        memset(y, 0, COPY_SIZE);
        copy_runs(s, batch, a, b, x, y, gpu, cpu);
        burners_start(&burners);
        copy_runs(s, batch, a, b, x, y, gpu_busy, cpu_busy);
        burners_stop(&burners);
        double g = median(gpu, COPY_RUNS), c = median(cpu, COPY_RUNS);
        double gb = median(gpu_busy, COPY_RUNS), cb = median(cpu_busy, COPY_RUNS);
        printf("256 MiB copy:               GPU %6.2f GB/s (submit to completion seen), memcpy %6.2f GB/s (medians of %d)\n",
               g, c, COPY_RUNS);
        printf("  next to %d CPU burners:    GPU %6.2f GB/s, memcpy %6.2f GB/s (medians of %d)\n", BURNERS, gb, cb,
               COPY_RUNS);
        report("256 MiB copy: GPU / memcpy", g / c, false, 0.8);
        report("256 MiB copy: GPU / memcpy, next to 2 CPU burners", gb / cb, false, 0.8);
        free(x);
        free(y);
        kfdb_batch_free(batch);
        kfdb_buffer_free(a);
        kfdb_buffer_free(b);
}

/* ---- allocation ---- */

/* memfd_create+ftruncate+mmap+munmap+close, ALLOC_PAIRS times: the baseline. */
static uint64_t memfd_pairs_ns(void) {
        uint64_t t0 = now_ns();

        for (int i = 0; i < ALLOC_PAIRS; i++) {
                int fd = memfd_create("bench", MFD_CLOEXEC);
                void *p;
                if (fd < 0 || ftruncate(fd, ALLOC_SIZE) < 0)
                        die("memfd", errno);
                p = mmap(NULL, ALLOC_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
                if (p == MAP_FAILED)
                        die("mmap", errno);
                munmap(p, ALLOC_SIZE);
                close(fd);
        }
        return now_ns() - t0;
}

/* Pairs per second of ALLOC_PAIRS AllocBuffer+FreeBuffer (the library does
 * not wait for a FreeBuffer where the daemon says it need not). */
static double alloc_round_broker(kfdb_session *s) {
        uint64_t t0 = now_ns();
        int r;

        for (int i = 0; i < ALLOC_PAIRS; i++) {
                kfdb_buffer *b;
                if ((r = kfdb_buffer_alloc(s, ALLOC_SIZE, KFDB_PLACEMENT_GTT, &b)) < 0 ||
                    (r = kfdb_buffer_free(b)) < 0)
                        die("alloc/free", r);
        }
        return ALLOC_PAIRS * 1e9 / (double) (now_ns() - t0);
}

/* ALLOC_ROUNDS rounds of the broker's pairs and memfd's, alternating: the
 * broker's pairs per second in broker, memfd's in memfd, their ratios round
 * by round in ratio. */
static void alloc_rounds(kfdb_session *s, double *broker, double *memfd, double *ratio) {
        for (int k = 0; k < ALLOC_ROUNDS; k++) {
                broker[k] = alloc_round_broker(s);
                memfd[k] = ALLOC_PAIRS * 1e9 / (double) memfd_pairs_ns();
                ratio[k] = broker[k] / memfd[k];
        }
}

/* AllocBuffer+FreeBuffer against memfd, quiet and next to BURNERS burner
 * threads (issue 32, item 3: the goal holds next to them too). */
static void bench_alloc(kfdb_session *s) {
        double broker[ALLOC_ROUNDS], memfd[ALLOC_ROUNDS], ratio[ALLOC_ROUNDS], e50, e99;
        double broker_busy[ALLOC_ROUNDS], memfd_busy[ALLOC_ROUNDS], ratio_busy[ALLOC_ROUNDS];
        Burners burners = {};

        alloc_rounds(s, broker, memfd, ratio);
        burners_start(&burners);
        alloc_rounds(s, broker_busy, memfd_busy, ratio_busy);
        burners_stop(&burners);
        printf("AllocBuffer+FreeBuffer:     %8.0f pairs/s (64 KiB), memfd+mmap+close %8.0f pairs/s (medians of %d)\n",
               median(broker, ALLOC_ROUNDS), median(memfd, ALLOC_ROUNDS), ALLOC_ROUNDS);
        printf("  next to %d CPU burners:    %8.0f pairs/s, memfd+mmap+close %8.0f pairs/s\n", BURNERS,
               median(broker_busy, ALLOC_ROUNDS), median(memfd_busy, ALLOC_ROUNDS));
        /* What the goal asks in round trips: a pair is one (the free is not
         * answered), so the goal needs a round trip, daemon work included,
         * within 2 memfd pairs; on an idle machine a bare echo may not fit. */
        baseline_seqpacket(&e50, &e99);
        printf("  a pair takes %.1f us: %.2f SEQPACKET echo round trips (p50 %.1f us); the goal allows %.1f us\n",
               1e6 / median(broker, ALLOC_ROUNDS), 1e6 / median(broker, ALLOC_ROUNDS) / e50, e50,
               2e6 / median(memfd, ALLOC_ROUNDS));
        report_rounds("alloc + free: broker / memfd", ratio, ALLOC_ROUNDS, false, 0.5);
        report_rounds("alloc + free: broker / memfd, next to 2 CPU burners", ratio_busy, ALLOC_ROUNDS, false, 0.5);
}

/* Slices of 4 MiB blocks (kfdb_suballocator): the first slice brings a block
 * in, the rest cost no round trip. Medians of ALLOC_ROUNDS rounds, each with
 * its own memfd baseline and a new allocator. */
static void bench_suballoc(kfdb_session *s) {
        double ratio[ALLOC_ROUNDS], rate[ALLOC_ROUNDS];
        int r;

        for (int k = 0; k < ALLOC_ROUNDS; k++) {
                kfdb_suballocator *a;
                uint64_t t0, ns;
                if ((r = kfdb_suballocator_new(s, KFDB_PLACEMENT_GTT, 0, &a)) < 0)
                        die("kfdb_suballocator_new", r);
                t0 = now_ns();
                for (int i = 0; i < ALLOC_PAIRS; i++) {
                        kfdb_slice sl;
                        if ((r = kfdb_slice_alloc(a, ALLOC_SIZE, 0, &sl)) < 0 || (r = kfdb_slice_free(a, &sl, 0)) < 0)
                                die("slice alloc/free", r);
                }
                ns = now_ns() - t0;
                kfdb_suballocator_free(a);
                ratio[k] = (double) memfd_pairs_ns() / (double) ns;
                rate[k] = ALLOC_PAIRS * 1e9 / (double) ns;
        }
        printf("kfdb_slice_alloc+free:      %8.0f pairs/s (64 KiB slices of 4 MiB blocks, median of %d)\n",
               median(rate, ALLOC_ROUNDS), ALLOC_ROUNDS);
        report("alloc + free: sub-allocated / memfd", median(ratio, ALLOC_ROUNDS), false, 1.0);
}

/* ---- noisy neighbours ---- */

/* The flood shapes of issue 32 item 1: each flooder keeps one 16 MiB copy
 * in flight, or keeps FLOOD_QUEUED of them queued. */
#define FLOOD_QUEUED 8u
/* The light client's shapes: its next 4 KiB copy as soon as the last one
 * completes, or LIGHT_SLEEP_US after. */
#define LIGHT_SLEEP_US 200u

typedef struct Flooder {
        pthread_t thread;
        kfdb_session *s;
        kfdb_buffer *src, *dst;
        kfdb_batch *batch;
        uint64_t bytes; /* copied inside the measuring window */
} Flooder;


typedef struct FlooderArg {
        Flooder *f;
        BenchNoise *n;
        unsigned depth; /* copies kept queued: 1 or FLOOD_QUEUED */
} FlooderArg;

static kfdb_session *connect_to(const char *sock, const char *name) {
        kfdb_session *s;
        int r = kfdb_session_new(sock, name, &s);

        if (r < 0)
                die("connect", r);
        return s;
}

static void flooder_open(Flooder *f, const char *sock) {
        uint64_t fence;
        int r;

        *f = (Flooder) { .s = connect_to(sock, "flooder") };
        if ((r = kfdb_buffer_alloc(f->s, FLOOD_BYTES, KFDB_PLACEMENT_GTT, &f->src)) < 0 ||
            (r = kfdb_buffer_alloc(f->s, FLOOD_BYTES, KFDB_PLACEMENT_GTT, &f->dst)) < 0 ||
            (r = kfdb_batch_new(f->s, &f->batch)) < 0 ||
            (r = kfdb_batch_fill(f->batch, f->src, 0, FLOOD_BYTES, 1)) < 0 ||
            (r = kfdb_batch_fill(f->batch, f->dst, 0, FLOOD_BYTES, 0)) < 0 ||
            (r = kfdb_batch_submit(f->batch, NULL, &fence)) < 0 || (r = kfdb_fence_wait(f->s, fence, 60000)) < 0)
                die("flooder setup", r);
}

static void flooder_close(Flooder *f) {
        kfdb_batch_free(f->batch);
        kfdb_buffer_free(f->src);
        kfdb_buffer_free(f->dst);
        kfdb_session_free(f->s);
}

/* Keeps depth copies queued: submits until depth are outstanding, then
 * waits for the oldest. A copy counts when it completes in the window. */
static void *flooder_thread(void *userdata) {
        FlooderArg *a = userdata;
        Flooder *f = a->f;
        uint64_t fences[FLOOD_QUEUED];
        unsigned head = 0, n = 0;
        int r;

        while (!atomic_load(&a->n->stop) || n > 0) {
                if (n < a->depth && !atomic_load(&a->n->stop)) {
                        if ((r = kfdb_batch_copy(f->batch, f->dst, 0, f->src, 0, FLOOD_BYTES)) < 0 ||
                            (r = kfdb_batch_submit(f->batch, NULL, &fences[(head + n) % FLOOD_QUEUED])) < 0)
                                die("flooder copy", r);
                        n++;
                        continue;
                }
                bool counting = atomic_load(&a->n->measuring);
                if ((r = kfdb_fence_wait(f->s, fences[head], 60000)) < 0)
                        die("flooder wait", r);
                head = (head + 1) % FLOOD_QUEUED;
                n--;
                if (counting && atomic_load(&a->n->measuring))
                        f->bytes += FLOOD_BYTES;
        }
        return NULL;
}

/* The light client's 4 KiB copies, one at a time (back to back, or
 * LIGHT_SLEEP_US apart), for NOISE_NS after a warm-up; its p99 in us. */
static double light_p99(kfdb_session *s, BenchNoise *n, bool sleeps) {
        size_t cap = 1 << 20, count = 0;
        uint64_t *t = calloc(cap, sizeof *t), start = now_ns(), end;
        kfdb_buffer *a, *b;
        kfdb_batch *batch;
        double p50, p99;
        int r;

        if (!t)
                die("calloc", ENOMEM);
        if ((r = kfdb_buffer_alloc(s, LIGHT_BYTES, KFDB_PLACEMENT_GTT, &a)) < 0 ||
            (r = kfdb_buffer_alloc(s, LIGHT_BYTES, KFDB_PLACEMENT_GTT, &b)) < 0 || (r = kfdb_batch_new(s, &batch)) < 0)
                die("light setup", r);
        end = start + NOISE_WARMUP_NS + NOISE_NS;
        for (uint64_t now = start; now < end; now = now_ns()) {
                uint64_t fence, t0 = now_ns();
                if (t0 >= start + NOISE_WARMUP_NS)
                        atomic_store(&n->measuring, true);
                if ((r = kfdb_batch_copy(batch, b, 0, a, 0, LIGHT_BYTES)) < 0 ||
                    (r = kfdb_batch_submit(batch, NULL, &fence)) < 0 || (r = kfdb_fence_wait(s, fence, 60000)) < 0)
                        die("light copy", r);
                if (t0 >= start + NOISE_WARMUP_NS && count < cap)
                        t[count++] = now_ns() - t0;
                if (sleeps)
                        usleep(LIGHT_SLEEP_US);
        }
        atomic_store(&n->measuring, false);
        if (count == 0)
                die("light client got no sample", ETIMEDOUT);
        percentiles(t, count, &p50, &p99);
        kfdb_batch_free(batch);
        kfdb_buffer_free(a);
        kfdb_buffer_free(b);
        free(t);
        return p99;
}

/* One round next to 2 CPU burners: the light client's p99 (us). */
static double noise_burners(const char *sock, bool sleeps) {
        BenchNoise n = {};
        pthread_t th[BURNERS];
        kfdb_session *s = connect_to(sock, "light");
        double p99;

        for (int i = 0; i < BURNERS; i++)
                pthread_create(&th[i], NULL, bench_burner_thread, &n);
        p99 = light_p99(s, &n, sleeps);
        atomic_store(&n.stop, true);
        for (int i = 0; i < BURNERS; i++)
                pthread_join(th[i], NULL);
        kfdb_session_free(s);
        return p99;
}

/* One round next to the flooders fl (open on sock), each keeping depth
 * copies queued: the light client's p99 (us) and the flooders' throughput
 * (GB/s) while it measured. */
static void noise_flooders(const char *sock, Flooder *fl, unsigned depth, bool sleeps, double *ret_p99,
                           double *ret_gbps) {
        BenchNoise n = {};
        FlooderArg args[FLOODERS];
        kfdb_session *s = connect_to(sock, "light");
        uint64_t t0, t1, bytes = 0;

        for (int i = 0; i < FLOODERS; i++) {
                fl[i].bytes = 0;
                args[i] = (FlooderArg) { .f = &fl[i], .n = &n, .depth = depth };
                pthread_create(&fl[i].thread, NULL, flooder_thread, &args[i]);
        }
        t0 = now_ns() + NOISE_WARMUP_NS;
        *ret_p99 = light_p99(s, &n, sleeps);
        t1 = now_ns();
        atomic_store(&n.stop, true);
        for (int i = 0; i < FLOODERS; i++) {
                pthread_join(fl[i].thread, NULL);
                bytes += fl[i].bytes;
        }
        *ret_gbps = (double) bytes / (double) (t1 - t0);
        kfdb_session_free(s);
}

/* Per round, interleaved so that all see the same noise: the light client
 * (both shapes) next to the burners; then for each flood shape the light
 * client (both shapes) next to the flooders on the chunking daemon, and the
 * sleeping one next to the same flood on the daemon without chunking (the
 * throughput baseline). */
enum { SHAPE_B2B, SHAPE_SLEEP, N_LIGHT };
enum { FLOOD_ONE, FLOOD_EIGHT, N_FLOOD };

static void bench_noise(const char *sock_on, const char *sock_off) {
        static const unsigned depth[N_FLOOD] = { 1, FLOOD_QUEUED };
        static const char *const light_name[N_LIGHT] = { "back to back", "sleeping 200 us" };
        static const char *const flood_name[N_FLOOD] = { "1 copy in flight", "8 copies queued" };
        double burn[N_LIGHT][NOISE_ROUNDS], on_p99[N_FLOOD][N_LIGHT][NOISE_ROUNDS],
                on_gbps[N_FLOOD][NOISE_ROUNDS], off_p99[N_FLOOD][NOISE_ROUNDS], off_gbps[N_FLOOD][NOISE_ROUNDS];
        static Flooder fl_on[FLOODERS], fl_off[FLOODERS];
        double unused;
        char what[128];

        for (int i = 0; i < FLOODERS; i++) {
                flooder_open(&fl_on[i], sock_on);
                flooder_open(&fl_off[i], sock_off);
        }
        for (int k = 0; k < NOISE_ROUNDS; k++) {
                for (int l = 0; l < N_LIGHT; l++)
                        burn[l][k] = noise_burners(sock_on, l == SHAPE_SLEEP);
                for (int f = 0; f < N_FLOOD; f++) {
                        noise_flooders(sock_on, fl_on, depth[f], false, &on_p99[f][SHAPE_B2B][k], &unused);
                        noise_flooders(sock_on, fl_on, depth[f], true, &on_p99[f][SHAPE_SLEEP][k], &on_gbps[f][k]);
                        noise_flooders(sock_off, fl_off, depth[f], true, &off_p99[f][k], &off_gbps[f][k]);
                }
        }
        for (int i = 0; i < FLOODERS; i++) {
                flooder_close(&fl_on[i]);
                flooder_close(&fl_off[i]);
        }
        for (int l = 0; l < N_LIGHT; l++)
                printf("light client 4 KiB copy p99, %-15s: %.3f ms next to %d CPU burners (median of %d)\n",
                       light_name[l], median(burn[l], NOISE_ROUNDS) / 1000, BURNERS, NOISE_ROUNDS);
        for (int f = 0; f < N_FLOOD; f++) {
                printf("%d flooders, %s each: light p99 %.3f ms back to back, %.3f ms sleeping (%.3f ms with chunking "
                       "off); flooders %.2f GB/s with chunking, %.2f GB/s without\n",
                       FLOODERS, flood_name[f], median(on_p99[f][SHAPE_B2B], NOISE_ROUNDS) / 1000,
                       median(on_p99[f][SHAPE_SLEEP], NOISE_ROUNDS) / 1000, median(off_p99[f], NOISE_ROUNDS) / 1000,
                       median(on_gbps[f], NOISE_ROUNDS), median(off_gbps[f], NOISE_ROUNDS));
        }
        for (int f = 0; f < N_FLOOD; f++)
                for (int l = 0; l < N_LIGHT; l++) {
                        snprintf(what, sizeof what, "noisy neighbours (%s, light %s): p99 flood / burners",
                                 flood_name[f], light_name[l]);
                        report(what, median(on_p99[f][l], NOISE_ROUNDS) / median(burn[l], NOISE_ROUNDS), true, 2.0);
                }
        for (int f = 0; f < N_FLOOD; f++) {
                snprintf(what, sizeof what, "noisy neighbours (%s): flooder throughput, chunking on / off",
                         flood_name[f]);
                report(what, median(on_gbps[f], NOISE_ROUNDS) / median(off_gbps[f], NOISE_ROUNDS), false, 0.7);
        }
}

/* The load average when the run starts: a broker round trip wakes more
 * threads, in two processes, than the floor's, so with more runnable
 * threads than CPUs it loses more time waiting for one, and its ratios say
 * more about the load than about the broker. */
static void print_load(void) {
        double load;
        FILE *f = fopen("/proc/loadavg", "re");

        if (f && fscanf(f, "%lf", &load) == 1)
                printf("load average (1 min) at start: %.2f on %ld CPUs\n", load, sysconf(_SC_NPROCESSORS_ONLN));
        if (f)
                fclose(f);
}

/* Whether to run the part named `name`: all of them without arguments,
 * else the ones named (round-trip, batched, copy, alloc, suballoc, noise). */
static bool want(int argc, char **argv, const char *name) {
        if (argc < 2)
                return true;
        for (int i = 1; i < argc; i++)
                if (strcmp(argv[i], name) == 0)
                        return true;
        return false;
}

int main(int argc, char **argv) {
        char dir[] = "/tmp/kfdbroker-bench.XXXXXX", sock[128], sock_off[128];
        bool floor_wanted = want(argc, argv, "round-trip") || want(argc, argv, "batched") || want(argc, argv, "warm");
        Floor floor;
        kfdb_session *s, *s_sock, *s_nospin;
        pid_t pid, pid_off;
        int r;

        if (!mkdtemp(dir))
                die("mkdtemp", errno);
        snprintf(sock, sizeof(sock), "%s/sock", dir);
        snprintf(sock_off, sizeof(sock_off), "%s/sock-unchunked", dir);
        setvbuf(stdout, NULL, _IOLBF, 0);

        printf("kfdbroker against baselines measured in the same run (simulated GPU; issue 13 goals)\n");
        print_load();
        if (floor_wanted)
                floor_start(&floor);
        pid = start_daemon(sock, true);
        r = kfdb_session_new(sock, "bench-broker", &s);
        if (r < 0)
                die("connect", r);
        /* The same client on the socket path (read when the session is made). */
        setenv("KFDBROKER_SUBMIT_RING", "0", 1);
        r = kfdb_session_new(sock, "bench-broker-socket", &s_sock);
        if (r < 0)
                die("connect", r);
        unsetenv("KFDBROKER_SUBMIT_RING");
        /* The ring without libkfdbroker's spin before a wait sleeps. */
        setenv("KFDBROKER_SPIN_US", "0", 1);
        r = kfdb_session_new(sock, "bench-broker-nospin", &s_nospin);
        if (r < 0)
                die("connect", r);
        unsetenv("KFDBROKER_SPIN_US");
        if (want(argc, argv, "round-trip"))
                bench_round_trip(s, s_sock, s_nospin, &floor);
        if (want(argc, argv, "batched"))
                bench_batched(s, s_sock, &floor);
        if (want(argc, argv, "warm"))
                bench_warm(s, s_sock, &floor);
        if (floor_wanted)
                floor_stop(&floor);
        kfdb_session_free(s_sock);
        kfdb_session_free(s_nospin);
        if (want(argc, argv, "copy"))
                bench_copy(s);
        if (want(argc, argv, "alloc"))
                bench_alloc(s);
        if (want(argc, argv, "suballoc"))
                bench_suballoc(s);
        kfdb_session_free(s);

        if (want(argc, argv, "noise")) {
                pid_off = start_daemon(sock_off, false);
                bench_noise(sock, sock_off);
                stop_daemon(pid_off, sock_off);
        }
        printf("measured elsewhere: the fd budgets (item 3: bench-fds), the parallel interpreter (item 4: bench-isa, "
               "bench-cp)\n");
        stop_daemon(pid, sock);
        rmdir(dir);
        return 0;
}
