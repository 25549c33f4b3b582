/* SPDX-License-Identifier: MIT */
/*
 * Kept buffers (session-quota.c, docs/policy.md "Exported buffers"): a
 * buffer whose dma-buf outlives its session stays charged to its user and
 * unit until the daemon sees that no copy is left. The simulated GPU cannot
 * see that (its dma-bufs are memfds: tests/integration/test-quota.c shows the
 * charge staying until a restart); the kernel can, through the dma-buf's
 * fdinfo count (kfd-real.c). Here a daemon (a Manager on the simulated GPU)
 * runs in this process with the kernel-call table's dmabuf_refs answered by
 * the test, so that the path the kernel takes — a probe watched after its
 * session went, the charge let go with the last copy — is exercised.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "kfdbroker.pb-c.h"
#include "manager/manager.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "sim/sim-device.h"
#include "util/log.h"

#define MiB (1ull << 20)

static Manager *manager;
static char dir[] = "/tmp/kfdbroker-kept.XXXXXX", sock_path[96], conf_path[96];
/* What the kernel would say: references to a dma-buf besides the daemon's probe. */
static int copies;

static int fake_dmabuf_refs(void *userdata, int fd) {
        return fd < 0 ? -EBADF : copies;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void setup(void) {
        const char *dirs[2] = { dir, NULL };
        ManagerOptions o = {
                .device = DEVICE_SIM,
                .listen_path = sock_path,
                .bus = BUS_NONE,
                .policy_dirs = dirs,
                .contexts = CONTEXT_CHOICE_KERNEL,
        };
        FILE *f;

        log_set_max_level(LOG_WARNING);
        cr_assert(mkdtemp(dir));
        snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
        snprintf(conf_path, sizeof(conf_path), "%s/50-kept.conf", dir);
        f = fopen(conf_path, "we");
        cr_assert(f);
        fprintf(f, "[Limits]\nUserBufferMemory=24M\n");
        fclose(f);
        cr_assert_eq(manager_new(&o, &manager), 0);
        /* The kernel's answer instead of the simulator's "cannot tell". */
        manager->sim->mm.ops.dmabuf_refs = fake_dmabuf_refs;
        copies = 1;
}

static void teardown(void) {
        manager = manager_free(manager);
        unlink(sock_path);
        unlink(conf_path);
        rmdir(dir);
}

TestSuite(kept_buffers, .init = setup, .fini = teardown, .timeout = 60);

/* Runs the loop until it has been idle for 50 ms. */
static void settle(void) {
        uint64_t deadline = now_usec() + 10 * 1000000u;

        while (sd_event_run(manager->event, 50 * 1000) > 0)
                cr_assert_lt(now_usec(), deadline, "the loop does not go idle");
}

static void send_request(int fd, Kfdbroker__V1__Request *r) {
        static uint64_t next_id = 1;
        uint8_t buf[256];
        size_t len;

        r->id = next_id++;
        len = kfdbroker__v1__request__get_packed_size(r);
        cr_assert_leq(len, sizeof(buf));
        kfdbroker__v1__request__pack(r, buf);
        cr_assert_eq(send(fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL), (ssize_t) len, "send: %s", strerror(errno));
}

/* Reads the replies waiting on client and closes the fds they carry; how
 * many fds came. */
static unsigned drain(int client) {
        unsigned fds = 0;

        for (;;) {
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(4 * sizeof(int))];
                } control;
                char buf[8192];
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                                     .msg_controllen = sizeof(control) };

                if (recvmsg(client, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) <= 0)
                        return fds;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                                for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++, fds++)
                                        close(((int *) CMSG_DATA(c))[i]);
        }
}

/* A session of this process that has said Hello, its client end in *client. */
static Session *open_session(int *client) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;
        Identity me = { .comm = "kept", .user_unit_uid = (uid_t) -1 };
        Session *s = NULL;
        int sv[2];

        me.uid = getuid();
        me.gid = getgid();
        me.pid = getpid();
        cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
        cr_assert_eq(session_new(&manager->set, sv[0], &me, &s), 0);
        *client = sv[1];
        h.protocol_version = 1;
        h.client_name = (char *) "kept";
        r.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        r.hello = &h;
        send_request(*client, &r);
        settle();
        cr_assert_eq(drain(*client), 2, "no Hello reply (session page, eventfd)");
        return s;
}

/* Allocates size bytes in the session of client; the reply's dma-buf fd is
 * closed (the copy the kernel would count is the test's word: copies). */
static void alloc_buffer(int client, uint64_t size) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;

        a.size = size;
        r.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        r.alloc_buffer = &a;
        send_request(client, &r);
        settle();
        cr_assert_eq(drain(client), 1, "AllocBuffer of %llu bytes gave no dma-buf", (unsigned long long) size);
}

static Tally *user_tally(void) {
        Tally *t;
        char key[32];

        snprintf(key, sizeof key, "uid %u", (unsigned) getuid());
        LIST_FOREACH(tallies, t, manager->set.tallies.tallies)
                if (strcmp(t->key, key) == 0)
                        return t;
        return NULL;
}

/* Allocates 16 MiB in a session and ends it with the buffer alive, its
 * dma-buf (as far as the daemon can tell) still held. */
static void leave_a_kept_buffer(void) {
        int client;

        (void) open_session(&client);
        alloc_buffer(client, 16 * MiB);
        close(client);
        settle();
}

Test(kept_buffers, the_charge_stays_with_the_user_until_the_last_copy_goes) {
        uint64_t fds0 = manager->set.fds_held;
        int client;

        leave_a_kept_buffer();
        cr_assert_eq(manager->set.n_sessions, 0);
        cr_assert_eq(manager->set.n_kept, 1);
        Tally *t = user_tally();
        cr_assert(t, "the user's tally stays while it is charged");
        cr_expect_eq(t->sessions, 0);
        cr_expect_eq(t->buffer_bytes, 16 * MiB);
        cr_expect_eq(t->kept_bytes, 16 * MiB);
        cr_expect_eq(t->kept_probes, 1);
        cr_expect_eq(t->objects, 1, "the probe is one of the user's objects");
        cr_expect_eq(manager->set.fds_held, fds0 + 1, "the probe is one of the daemon's fds");

        /* A later session of the user: its own BufferMemory= is free, the
         * user's 24M holds the kept 16 MiB. */
        Session *s = open_session(&client);
        cr_expect_eq(s->usage.buffer_bytes, 0);
        cr_assert_not(session_check_memory_quota(s, 100, 0, 16 * MiB), "16 MiB more fit under UserBufferMemory=24M");
        cr_assert(session_check_memory_quota(s, 101, 0, 8 * MiB));

        /* The last copy goes: the next check lets the charge go. */
        copies = 0;
        cr_assert(session_check_memory_quota(s, 102, 0, 16 * MiB));
        cr_expect_eq(manager->set.n_kept, 0);
        cr_expect_eq(t->buffer_bytes, 0);
        cr_expect_eq(t->kept_bytes, 0);
        cr_expect_eq(t->kept_probes, 0);
        cr_expect_eq(t->objects, 0);
        close(client);
        settle();
        cr_expect_eq(manager->set.fds_held, fds0);
}

Test(kept_buffers, query_looks_again) {
        int client;

        leave_a_kept_buffer();
        Session *s = open_session(&client);
        Tally *t = user_tally();
        cr_assert_eq(t->kept_bytes, 16 * MiB);
        copies = 0;
        session_refresh_released(s); /* what Query does first */
        cr_expect_eq(t->kept_bytes, 0);
        cr_expect_eq(t->buffer_bytes, 0);
        close(client);
        settle();
}

Test(kept_buffers, a_probe_that_cannot_tell_any_more_keeps_the_charge_until_restart) {
        int client;

        leave_a_kept_buffer();
        Session *s = open_session(&client);
        Tally *t = user_tally();
        copies = -EOPNOTSUPP;
        session_refresh_released(s);
        cr_expect_eq(manager->set.n_kept, 0, "the probe goes");
        cr_expect_eq(t->kept_probes, 0);
        cr_expect_eq(t->objects, 0);
        cr_expect_eq(t->kept_bytes, 16 * MiB, "the charge stays");
        cr_expect_eq(t->buffer_bytes, 16 * MiB);
        cr_assert_not(session_check_memory_quota(s, 100, 0, 16 * MiB));
        close(client);
        settle();
}
