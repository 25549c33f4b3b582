/* SPDX-License-Identifier: MIT */
/*
 * Integration-test harness: starts the real kfdbrokerd binary (path from the
 * KFDBROKERD environment variable, set by meson) on the simulated GPU with a
 * private socket, speaks the raw protocol for hostile-input tests, reads
 * the daemon's fd and object counts for leak checks, and opens libkfdbroker
 * sessions on it.
 */
#pragma once

#include "kfdbroker.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "kfdbroker.pb-c.h"
#include "test-fini.h"

typedef struct TestDaemon {
        pid_t pid;
        char dir[64];
        char sock[128];
        char log[128];
        char grant_dir[128], grant_arg[160]; /* the policy granting this uid compute dispatch */
        unsigned nofile; /* the daemon's RLIMIT_NOFILE (soft and hard); 0 = inherited */
        void (*in_child)(void); /* run in the daemon's process before exec; NULL = none */
} TestDaemon;

/* Starts the daemon; extra_args is NULL or NULL-terminated. Asserts on failure. */
/* Forks $KFDBROKERD with argv[1..] (argv[0] is set to it) and --no-config
 * (whatever kfdbrokerd.conf the machine has is not the test's), stderr to
 * log; setup_child runs in the child before exec (NULL: nothing). For tests
 * that watch the daemon's own start and exit. */
pid_t test_daemon_spawn(const char **argv, const char *log, void (*setup_child)(void));
/* Exit status of pid within timeout_ms (128 + signal when killed), or -1,
 * and then it is killed. */
int test_wait_exit(pid_t pid, int timeout_ms);
/* The whole file at path, NUL-terminated (free it), as test_daemon_read_log. */
char *test_read_file(const char *path);
void test_daemon_start(TestDaemon *d, const char *const *extra_args);
/* The same with the daemon's fd limit set to nofile (soft and hard). */
void test_daemon_start_limited(TestDaemon *d, const char *const *extra_args, unsigned nofile);
/* The same with in_child run in the daemon's process just before exec
 * (e.g. a seccomp filter playing an older kernel); it must not return on
 * failure but _exit(127). */
void test_daemon_start_hooked(TestDaemon *d, const char *const *extra_args, void (*in_child)(void));
/* A libkfdbroker session on d's socket, called name. Asserts on failure. */
kfdb_session *test_connect(const TestDaemon *d, const char *name);
/*
 * SIGTERM, wait (SIGKILL after 30 s); returns the exit status, 128+signal, or
 * TEST_DAEMON_SANITIZER_REPORT if it exited 0 but its log has an ASan,
 * LeakSanitizer or UBSan report. Prints the log unless 0. Removes the temp dir.
 */
#define TEST_DAEMON_SANITIZER_REPORT 256
int test_daemon_stop(TestDaemon *d);
/*
 * Sends sig (SIGTERM: a clean stop, SIGKILL: a crash; 0: none, the daemon
 * exits on its own) and waits for the
 * daemon, then starts it again with extra_args on the same socket, policy and
 * log (appended). Returns how the old one ended, as test_daemon_stop().
 */
int test_daemon_restart(TestDaemon *d, int sig, const char *const *extra_args);
/*
 * For a teardown: stops the daemon if it runs, and fails the test
 * (test-fini.h) unless it exited 0 without a sanitizer report. Under ASan a
 * leak at exit makes it abort (tests/meson.build), so leaks fail the test
 * too, with the report in the log.
 */
void test_daemon_fini(TestDaemon *d);
/* Number of open fds of the daemon process. */
int test_daemon_count_fds(const TestDaemon *d);
/* The daemon's open fds as "N=target ..." (for a failure message), malloc'd. */
char *test_daemon_fd_names(const TestDaemon *d);
/* Prints the daemon log to stderr (for failures). */
void test_daemon_dump_log(const TestDaemon *d);
/* The daemon log so far, malloc'd (never NULL; asserts). */
char *test_daemon_read_log(const TestDaemon *d);
/* Writes 50-devices.conf in the grant directory: a rule for this uid with
 * limits (lines of [Limits], e.g. "Devices=1\nBufferMemory=1M"), and has the
 * daemon reload (SIGHUP), waiting for its log to say so a count-th time. */
void test_daemon_set_limits(const TestDaemon *d, const char *limits, unsigned count);

/* A private system-like D-Bus bus: the stock default-deny policy plus the
 * project's bus policy (KFDBROKER_POLICY_SRC), and root allowed to own the
 * name (tests run the daemon as root). Sets DBUS_SYSTEM_BUS_ADDRESS. */
typedef struct TestBus {
        char dir[64];
        pid_t pid;
} TestBus;
void test_bus_start(TestBus *b);
void test_bus_stop(TestBus *b);

/* Runs $KFDBROKERCTL (set by meson) with args (NULL-terminated), as uid and
 * gid nobody (65534) when as_nobody, with stdin from /dev/null; returns its
 * exit status and everything it wrote to stdout and stderr (malloc'd).
 * Asserts if it could not be run or died of a signal. */
int test_run_ctl(const char *const *args, bool as_nobody, char **ret_out, char **ret_err);

/* A raw connection. */
int raw_connect(const TestDaemon *d);
/* Sends bytes with optional fds. Returns 0 or -errno. */
int raw_send_bytes(int fd, const void *buf, size_t len, const int *fds, unsigned n_fds);
int raw_send(int fd, const Kfdbroker__V1__Request *req, const int *fds, unsigned n_fds);
/* Receives one message within timeout_ms. Returns 1 with *ret set, 0 on EOF,
 * -ETIMEDOUT, or another -errno. Received fds are stored (up to *n_fds) or closed. */
int raw_recv(int fd, Kfdbroker__V1__ServerMessage **ret, int *fds, unsigned *n_fds, int timeout_ms);
/* Request/response for a request with id; skips notifications. Asserts on transport errors. */
Kfdbroker__V1__ServerMessage *raw_call(int fd, Kfdbroker__V1__Request *req, const int *fds,
                                       unsigned n_fds, int *ret_fds, unsigned *n_ret_fds);
/* CLOCK_MONOTONIC in ns. */
uint64_t harness_now_ns(void);

/* Hello; returns the session id. Closes the page fds. */
uint64_t raw_hello(int fd);
/* Sends a Hello named client_name with id and returns the daemon's answer:
 * a session or a refusal. A connection refused at accept may be closed
 * before the Hello goes out (EPIPE) and reports ECONNRESET once ahead of
 * the refusal queued for it; both are read past. Received fds are stored
 * (up to *n_fds) or closed. Asserts that an answer came within timeout_ms. */
Kfdbroker__V1__ServerMessage *raw_hello_answer(int fd, const char *client_name, uint64_t id, int *fds,
                                               unsigned *n_fds, int timeout_ms);
/* Allocates a GTT buffer; returns its handle, *ret_fd gets the dma-buf (or closed if NULL). */
uint64_t raw_alloc(int fd, uint64_t size, int *ret_fd);
/* Sends WaitEvents { events [event], timeout_ms } with id, without waiting for the answer. */
void raw_send_wait(int fd, uint64_t id, uint64_t event, uint32_t timeout_ms);
/* Sends SetEvent { event } with id, without waiting for the answer. */
void raw_send_set_event(int fd, uint64_t id, uint64_t event);
/* A Submit of one copy job, in caller-provided storage (protobuf-c points into it). */
typedef struct RawCopy {
        Kfdbroker__V1__Request req;
        Kfdbroker__V1__SubmitRequest sub;
        Kfdbroker__V1__Job job, *jobs[1];
        Kfdbroker__V1__CopyJob copy;
} RawCopy;
Kfdbroker__V1__Request *raw_copy_request(RawCopy *c, uint64_t id, uint64_t src, uint64_t src_off, uint64_t dst,
                                         uint64_t dst_off, uint64_t size);
/* Status of the daemon. */
Kfdbroker__V1__StatusReply *raw_status(int fd, Kfdbroker__V1__ServerMessage **holder);
