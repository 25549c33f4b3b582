/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the session layer (daemon/sessions) on the simulated GPU:
 * the whole path from a client's datagrams to its replies — decoding, the
 * request handlers, handles, buffers (alloc, free, export, import of the
 * dma-bufs it handed out), events (create, set, reset, wait, destroy),
 * submits (copies, fills, signal and wait jobs, dispatches of a real code
 * object), the submit ring (records, head and doorbell written as a hostile
 * client would), the fence page, the scheduler and the GPU contexts — and the
 * teardown when the client goes.
 *
 * One daemon (a Manager on the simulated GPU, no bus, kernel GPU contexts,
 * a policy with small limits so that work per input stays bounded) serves
 * the whole run. Each input is one client session over a socketpair: it is
 * opened, driven by the input's operations, then the client hangs up and the
 * loop runs until the session and all its jobs are gone.
 *
 * An input is a flag byte (bit 0: no automatic Hello first) and a list of
 * operations, each an opcode byte and its operands: a raw datagram (the
 * fuzzer's own protobuf bytes), or a request built from a few bytes whose
 * handles refer to those the daemon gave out earlier in the session (or are
 * made up), with an fd where the request carries one (a dma-buf it exported,
 * a sealed memfd holding a real code object or the input's bytes, or an fd
 * of the wrong kind). After each operation the event loop runs until it is
 * idle and the GPU has retired what it was given; the replies are read.
 *
 * Besides "no crash, no leak, no UB" it checks: every reply decodes as a
 * ServerMessage; an error reply carries a positive errno and a message; a
 * request of the target's own is answered at most once, by its id; a submit
 * ring comes with the layout proto/submit-ring.h gives; a fence page comes
 * fresh, and each of its slots only ever holds its fresh value or a fence of
 * that slot (proto/fence-page.h); after
 * the hang-up no session, job, buffer, mapping, account user or fd of the
 * daemon is left over (the counts are those before the input).
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files on its command line (the
 * session-corpus of fuzz-gen-corpus and tests/fuzz/corpus/session).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fence-page.h"
#include "kfdbroker.pb-c.h"
#include "manager/manager.h"
#include "sessions/session.h"
#include "submit-ring.h"
#include "util/macro.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OPS 16u
#define MAX_HANDLES 16u
#define MAX_FDS 16u
#define MAX_IDS 64u
#define ID_BASE 0x46555a5a00000000ull /* "FUZZ": ids of the target's own requests */
#define RAW_MAX 512u
#define PUMP_LIMIT_NS (20ull * 1000 * 1000 * 1000)

/* Small limits: a buffer is at most 256 KiB, a session holds 2 MiB, a
 * dispatch runs at most 50 ms; kernels may run, in one context for all the
 * fuzzer's sessions (they share an identity). */
static const char policy_text[] = "[Limits]\n"
                                  "BufferMemory=2M\n"
                                  "MaxBufferSize=256K\n"
                                  "Buffers=12\n"
                                  "Events=12\n"
                                  "JobsInFlight=24\n"
                                  "ComputeDispatch=yes\n"
                                  "Isolation=identity\n"
                                  "DispatchTimeout=50ms\n"
                                  "JobTimeout=2s\n";

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-session: broken promise: %s\n", what);
                abort();
        }
}

static uint64_t mono_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* ---- the daemon, once per run ---- */

typedef struct Baseline {
        unsigned fds;     /* but pipes */
        unsigned fds_all; /* with libFuzzer's pipes, once it has them */
        unsigned device_buffers;
        uint64_t device_buffer_bytes;
} Baseline;

static Manager *manager;
static char tmpdir[64];
static char sock_path[128], policy_path[128];
static uint8_t *code_object;
static size_t code_object_size;
static Baseline baseline;
static bool debug;

/* The process's open fds. Pipes are left out when skip_pipes: libFuzzer
 * starts a symbolizer on two pipes when it first prints a new function, and
 * the daemon opens none. */
static unsigned count_fds(bool skip_pipes) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        unsigned n = 0;

        check(d != NULL, "opendir /proc/self/fd");
        while ((de = readdir(d))) {
                struct stat st;
                int fd = atoi(de->d_name);

                if (de->d_name[0] == '.' || fd == dirfd(d))
                        continue;
                if (skip_pipes && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
                        continue;
                n++;
        }
        closedir(d);
        return n;
}

static void device_stats(GpuContextStats *st) {
        gpu_context_get_stats(context_pool_device_gpu(manager->gpus[0].contexts), st);
}

static void teardown(void) {
        manager = manager_free(manager);
        unlink(sock_path);
        unlink(policy_path);
        rmdir(tmpdir);
        free(code_object);
}

static void load_code_object(void) {
#ifdef FUZZ_SESSION_CODE_OBJECT
        FILE *f = fopen(FUZZ_SESSION_CODE_OBJECT, "rb");
        long n;

        if (!f)
                return;
        if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
                code_object = malloc((size_t) n);
                if (code_object && fread(code_object, 1, (size_t) n, f) == (size_t) n)
                        code_object_size = (size_t) n;
        }
        fclose(f);
#endif
}

static void bring_up(void) {
        const char *dirs[2] = { tmpdir, NULL };
        ManagerOptions o = {
                .device = DEVICE_SIM,
                .listen_path = sock_path,
                .bus = BUS_NONE,
                .policy_dirs = dirs,
                .contexts = CONTEXT_CHOICE_KERNEL,
                .max_contexts = 4,
        };
        GpuContextStats st;
        FILE *f;

        if (manager)
                return;
        /* FUZZ_SESSION_DEBUG=1: the daemon's log and every reply on stderr. */
        debug = getenv("FUZZ_SESSION_DEBUG") != NULL;
        log_set_max_level(debug ? 7 : 2); /* else LOG_CRIT: the daemon talks a lot */
        snprintf(tmpdir, sizeof tmpdir, "/tmp/fuzz-session-XXXXXX");
        check(mkdtemp(tmpdir) != NULL, "mkdtemp");
        snprintf(sock_path, sizeof sock_path, "%s/sock", tmpdir);
        snprintf(policy_path, sizeof policy_path, "%s/50-fuzz.conf", tmpdir);
        f = fopen(policy_path, "we");
        check(f && fputs(policy_text, f) >= 0 && fclose(f) == 0, "write the policy");
        check(manager_new(&o, &manager) == 0, "manager_new");
        load_code_object();
        atexit(teardown);

        device_stats(&st);
        baseline.device_buffers = st.buffers;
        baseline.device_buffer_bytes = st.buffer_bytes;
        baseline.fds = count_fds(true);
        baseline.fds_all = count_fds(false);
}

/*
 * Runs the loop until nothing is ready and the GPU has retired what it was
 * given (jobs held for an event nobody signals stay held: they are not on
 * the GPU). The policy's timeouts bound the GPU's work, so a pump that does
 * not end is a hang.
 */
static void pump(void) {
        uint64_t deadline = mono_ns() + PUMP_LIMIT_NS;
        int r;

        for (;;) {
                r = sd_event_run(manager->event, 0);
                check(r >= 0, "sd_event_run");
                if (r > 0)
                        continue;
                if (scheduler_in_flight(manager->gpus[0].scheduler) == 0)
                        return;
                r = sd_event_run(manager->event, 1000);
                check(r >= 0, "sd_event_run");
                check(mono_ns() < deadline, "the GPU did not retire its jobs within 20 s");
        }
}

/* ---- one client ---- */

typedef struct Client {
        int fd;
        bool gone; /* the daemon closed the connection */
        uint64_t buffers[MAX_HANDLES], events[MAX_HANDLES], codes[MAX_HANDLES];
        unsigned n_buffers, n_events, n_codes;
        int fds[MAX_FDS]; /* received: dma-bufs, the session page and eventfd */
        unsigned n_fds;
        uint64_t next_id;
        uint8_t answered[MAX_IDS];
        KfdbSubmitRing *ring; /* mapped from OpenSubmitRing's memfd */
        uint64_t ring_head;   /* records this client published */
        int doorbell;         /* OpenSubmitRing's eventfd (one of fds) */
        const uint32_t *fence_page;
        const uint8_t *in;
        size_t left;
} Client;

static uint8_t take(Client *c) {
        uint8_t b = 0;

        if (c->left) {
                b = *c->in++;
                c->left--;
        }
        return b;
}

static uint64_t take_n(Client *c, unsigned bytes) {
        uint64_t v = 0;

        for (unsigned i = 0; i < bytes; i++)
                v |= (uint64_t) take(c) << (8 * i);
        return v;
}

static void keep_fd(Client *c, int fd) {
        if (c->n_fds < MAX_FDS)
                c->fds[c->n_fds++] = fd;
        else
                close(fd);
}

static void remember(uint64_t *table, unsigned *n, uint64_t handle) {
        if (*n < MAX_HANDLES)
                table[(*n)++] = handle;
}

/* A handle: one the daemon gave out (mostly), 0, or made up. */
static uint64_t take_handle(Client *c, const uint64_t *table, unsigned n) {
        uint8_t b = take(c);

        if (b < 0xf0 && n > 0)
                return table[b % n];
        if (b == 0xff)
                return take_n(c, 8);
        if (b == 0xfe && c->n_buffers)
                return c->buffers[0] ^ 0x0100000000000000ull; /* another kind's tag */
        return 0;
}

/* The submit ring's memfd and doorbell, as OpenSubmitRing handed them out. */
static void take_ring(Client *c, const Kfdbroker__V1__OpenSubmitRingReply *r, const int *fds, unsigned n_fds,
                      unsigned n_kept) {
        void *p;

        check(n_fds == 2, "OpenSubmitRing without its 2 fds");
        check(r->size == KFDB_RING_SIZE && r->records == KFDB_RING_RECORDS, "a submit ring of another layout");
        if (c->ring || n_kept < 2)
                return; /* the client had no room left for its fds */
        p = mmap(NULL, KFDB_RING_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
        check(p != MAP_FAILED, "mmap the submit ring");
        c->ring = p;
        check(c->ring->magic == KFDB_RING_MAGIC && c->ring->version == KFDB_RING_VERSION &&
                      c->ring->size == KFDB_RING_SIZE && c->ring->records == KFDB_RING_RECORDS &&
                      c->ring->record_size == KFDB_RING_RECORD_SIZE && c->ring->header_size == KFDB_RING_HEADER_SIZE,
              "a submit ring header other than proto/submit-ring.h says");
        c->ring_head = __atomic_load_n(&c->ring->head, __ATOMIC_ACQUIRE);
        c->doorbell = fds[1];
}

/* Each slot holds its fresh value or the low bits of a fence of its own. */
static void check_fence_page(const Client *c) {
        if (!c->fence_page)
                return;
        for (uint32_t i = 0; i < KFDB_FENCE_PAGE_SLOTS; i++) {
                uint32_t v = __atomic_load_n(&c->fence_page[i], __ATOMIC_ACQUIRE);
                check(v == kfdb_fence_page_fresh_slot(i) || kfdb_fence_page_slot(v, KFDB_FENCE_PAGE_SLOTS) == i,
                      "a fence page slot holding a fence of another slot");
        }
}

static void take_fence_page(Client *c, const Kfdbroker__V1__OpenFencePageReply *r, const int *fds, unsigned n_fds,
                            unsigned n_kept) {
        void *p;

        check(n_fds == 1, "OpenFencePage without its fd");
        check(r->size == KFDB_FENCE_PAGE_SIZE && r->slots == KFDB_FENCE_PAGE_SLOTS, "a fence page of another layout");
        if (n_kept < 1)
                return;
        p = mmap(NULL, KFDB_FENCE_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[0], 0);
        check(p != MAP_FAILED, "mmap the fence page");
        c->fence_page = p;
        for (uint32_t i = 0; i < KFDB_FENCE_PAGE_SLOTS; i++)
                check(c->fence_page[i] == kfdb_fence_page_fresh_slot(i), "a fence page that is not fresh");
}

/* fds: the first n_kept of the n_fds the message carried (the client keeps
 * MAX_FDS at most). */
static void check_reply(Client *c, const Kfdbroker__V1__ServerMessage *m, const int *fds, unsigned n_fds,
                        unsigned n_kept) {
        if (debug)
                fprintf(stderr, "reply id %#llx error %d body %d: %s\n", (unsigned long long) m->id, m->error,
                        (int) m->body_case, m->error_message ? m->error_message : "");
        check(m->error >= 0, "a negative errno in a reply");
        if (m->error != 0)
                check(m->error_message && m->error_message[0], "an error reply without a message");
        if (m->id >= ID_BASE && m->id < ID_BASE + MAX_IDS) {
                check(!c->answered[m->id - ID_BASE], "a request answered twice");
                c->answered[m->id - ID_BASE] = 1;
        }
        if (m->error != 0)
                return;
        switch (m->body_case) {
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_ALLOC_BUFFER:
                remember(c->buffers, &c->n_buffers, m->alloc_buffer->handle);
                break;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_IMPORT_BUFFER:
                remember(c->buffers, &c->n_buffers, m->import_buffer->handle);
                break;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_CREATE_EVENT:
                remember(c->events, &c->n_events, m->create_event->handle);
                break;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_LOAD_CODE_OBJECT:
                remember(c->codes, &c->n_codes, m->load_code_object->handle);
                break;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SUBMIT_RING:
                take_ring(c, m->open_submit_ring, fds, n_fds, n_kept);
                break;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_FENCE_PAGE:
                take_fence_page(c, m->open_fence_page, fds, n_fds, n_kept);
                break;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_HELLO:
                /* A lazy session gets no page (docs/protocol.md "Lazy sessions"). */
                check(n_fds == (m->hello->session_page_size ? 2u : 0u), "a Hello reply's fds and page size disagree");
                break;
        case KFDBROKER__V1__SERVER_MESSAGE__BODY_OPEN_SESSION_PAGE:
                check(n_fds == 2 && m->open_session_page->size > 0, "OpenSessionPage without its page and eventfd");
                break;
        default:
                break;
        }
}

/* Reads every reply that is there. */
static void read_replies(Client *c) {
        uint8_t buf[WIRE_MAX_MESSAGE_SIZE + 1];

        while (!c->gone) {
                union {
                        struct cmsghdr align;
                        char buf[CMSG_SPACE(sizeof(int) * 4)];
                } control;
                struct iovec iov = { .iov_base = buf, .iov_len = sizeof buf };
                struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                                     .msg_controllen = sizeof control };
                Kfdbroker__V1__ServerMessage *m;
                int got[4];
                unsigned n_got = 0, n_all = 0;
                ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

                if (n < 0) {
                        check(errno == EAGAIN, "recvmsg");
                        return;
                }
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
                                for (size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
                                        int fd = ((int *) (void *) CMSG_DATA(cm))[i];

                                        if (n_got < ELEMENTSOF(got) && c->n_fds < MAX_FDS)
                                                got[n_got++] = fd;
                                        n_all++;
                                        keep_fd(c, fd);
                                }
                check(!(mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)), "a reply larger than a message may be");
                if (n == 0) {
                        c->gone = true;
                        return;
                }
                m = kfdbroker__v1__server_message__unpack(NULL, (size_t) n, buf);
                check(m != NULL, "a reply that does not decode");
                check_reply(c, m, got, n_all, n_got);
                kfdbroker__v1__server_message__free_unpacked(m, NULL);
        }
        check_fence_page(c);
}

static void send_bytes(Client *c, const void *buf, size_t len, int fd) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (c->gone)
                return;
        if (fd >= 0) {
                struct cmsghdr *cm;
                mh.msg_control = &control;
                mh.msg_controllen = sizeof control;
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        }
        if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
                check(errno == EPIPE || errno == ECONNRESET, "sendmsg");
        pump();
        read_replies(c);
}

static void send_request(Client *c, Kfdbroker__V1__Request *r, int fd) {
        uint8_t buf[WIRE_MAX_MESSAGE_SIZE];
        size_t len;

        r->id = ID_BASE + c->next_id % MAX_IDS;
        c->next_id++;
        len = kfdbroker__v1__request__get_packed_size(r);
        check(len <= sizeof buf, "a request of the target's too large");
        kfdbroker__v1__request__pack(r, buf);
        send_bytes(c, buf, len, fd);
}

/* A sealed memfd holding bytes (a code object, or not). */
static int sealed_memfd(const void *bytes, size_t n, bool seal) {
        int fd = memfd_create("fuzz-code", MFD_CLOEXEC | MFD_ALLOW_SEALING);

        check(fd >= 0, "memfd_create");
        check(n == 0 || write(fd, bytes, n) == (ssize_t) n, "write memfd");
        if (seal)
                check(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0,
                      "seal memfd");
        return fd;
}

/* ---- operations ---- */

typedef enum Op {
        OP_RAW,
        OP_HELLO,
        OP_ALLOC,
        OP_FREE,
        OP_EXPORT,
        OP_IMPORT,
        OP_CREATE_EVENT,
        OP_DESTROY_EVENT,
        OP_SET_EVENT,
        OP_RESET_EVENT,
        OP_WAIT_EVENTS,
        OP_SUBMIT,
        OP_QUERY,
        OP_LOAD_CODE,
        OP_FREE_CODE,
        OP_STATUS,
        OP_OPEN_RING,
        OP_RING,
        OP_OPEN_FENCE_PAGE,
        _OP_MAX,
} Op;

static void op_raw(Client *c) {
        uint8_t buf[RAW_MAX];
        size_t n = take(c) | (size_t) (take(c) & 1) << 8;

        if (n > c->left)
                n = c->left;
        memcpy(buf, c->in, n);
        c->in += n;
        c->left -= n;
        send_bytes(c, buf, n, -1);
}

static void op_hello(Client *c, uint8_t b) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__HelloRequest h = KFDBROKER__V1__HELLO_REQUEST__INIT;

        h.protocol_version = b & 0x80 ? b & 0x7f : 1;
        h.client_name = (char *) (b & 1 ? "fuzz \xc3\xa9" : "fuzz");
        /* A client back after a restart: its fences continue after this
         * one (0x4 asks past the limit). */
        if (b & 2)
                h.resume_fence = b & 4 ? WIRE_MAX_RESUME_FENCE + 1 : WIRE_MAX_RESUME_FENCE - (b & 0x78);
        /* A lazy session (0x8), with a bit no daemon knows yet (0x10). */
        else if (b & 8)
                h.features = WIRE_HELLO_FEATURE_LAZY_SESSION | (b & 0x10 ? UINT64_C(1) << 9 : 0);
        r.body_case = KFDBROKER__V1__REQUEST__BODY_HELLO;
        r.hello = &h;
        send_request(c, &r, -1);
}

static void op_alloc(Client *c) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__AllocBufferRequest a = KFDBROKER__V1__ALLOC_BUFFER_REQUEST__INIT;
        uint8_t b = take(c);

        /* 4 KiB steps up to 320 KiB (over MaxBufferSize), or made up. */
        a.size = b == 0xff ? take_n(c, 8) : (uint64_t) (b % 80) * 4096 + (take(c) & 3);
        a.placement = b & 0x40 ? KFDBROKER__V1__PLACEMENT__PLACEMENT_VRAM : KFDBROKER__V1__PLACEMENT__PLACEMENT_GTT;
        a.flags = b == 0xfe ? 1 : 0;
        r.body_case = KFDBROKER__V1__REQUEST__BODY_ALLOC_BUFFER;
        r.alloc_buffer = &a;
        send_request(c, &r, -1);
}

static void op_handle(Client *c, Op op) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__FreeBufferRequest fb = KFDBROKER__V1__FREE_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__ExportBufferRequest eb = KFDBROKER__V1__EXPORT_BUFFER_REQUEST__INIT;
        Kfdbroker__V1__DestroyEventRequest de = KFDBROKER__V1__DESTROY_EVENT_REQUEST__INIT;
        Kfdbroker__V1__SetEventRequest se = KFDBROKER__V1__SET_EVENT_REQUEST__INIT;
        Kfdbroker__V1__ResetEventRequest re = KFDBROKER__V1__RESET_EVENT_REQUEST__INIT;
        Kfdbroker__V1__FreeCodeObjectRequest fc = KFDBROKER__V1__FREE_CODE_OBJECT_REQUEST__INIT;

        switch (op) {
        case OP_FREE:
                fb.handle = take_handle(c, c->buffers, c->n_buffers);
                r.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_BUFFER;
                r.free_buffer = &fb;
                break;
        case OP_EXPORT:
                eb.handle = take_handle(c, c->buffers, c->n_buffers);
                r.body_case = KFDBROKER__V1__REQUEST__BODY_EXPORT_BUFFER;
                r.export_buffer = &eb;
                break;
        case OP_DESTROY_EVENT:
                de.handle = take_handle(c, c->events, c->n_events);
                r.body_case = KFDBROKER__V1__REQUEST__BODY_DESTROY_EVENT;
                r.destroy_event = &de;
                break;
        case OP_SET_EVENT:
                se.handle = take_handle(c, c->events, c->n_events);
                r.body_case = KFDBROKER__V1__REQUEST__BODY_SET_EVENT;
                r.set_event = &se;
                break;
        case OP_RESET_EVENT:
                re.handle = take_handle(c, c->events, c->n_events);
                r.body_case = KFDBROKER__V1__REQUEST__BODY_RESET_EVENT;
                r.reset_event = &re;
                break;
        default:
                fc.handle = take_handle(c, c->codes, c->n_codes);
                r.body_case = KFDBROKER__V1__REQUEST__BODY_FREE_CODE_OBJECT;
                r.free_code_object = &fc;
                break;
        }
        send_request(c, &r, -1);
}

static void op_import(Client *c) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__ImportBufferRequest i = KFDBROKER__V1__IMPORT_BUFFER_REQUEST__INIT;
        uint8_t b = take(c);
        int fd, own = -1;

        r.body_case = KFDBROKER__V1__REQUEST__BODY_IMPORT_BUFFER;
        r.import_buffer = &i;
        if (b < 0xc0 && c->n_fds > 0)
                fd = c->fds[b % c->n_fds]; /* a dma-buf (or the session page, or its eventfd) */
        else if (b < 0xe0)
                fd = own = sealed_memfd("x", 1, false); /* not a dma-buf */
        else
                fd = -1; /* no fd at all */
        send_request(c, &r, fd);
        if (own >= 0)
                close(own);
}

static void op_create_event(Client *c) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__CreateEventRequest e = KFDBROKER__V1__CREATE_EVENT_REQUEST__INIT;

        e.auto_reset = take(c) & 1;
        r.body_case = KFDBROKER__V1__REQUEST__BODY_CREATE_EVENT;
        r.create_event = &e;
        send_request(c, &r, -1);
}

static void op_wait_events(Client *c) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__WaitEventsRequest w = KFDBROKER__V1__WAIT_EVENTS_REQUEST__INIT;
        Kfdbroker__V1__WaitEntry e[4], *ep[4];
        uint8_t b = take(c);

        w.n_events = b % 5; /* 0 is refused */
        for (size_t i = 0; i < w.n_events; i++) {
                kfdbroker__v1__wait_entry__init(&e[i]);
                e[i].handle = take_handle(c, c->events, c->n_events);
                e[i].last_event_age = take(c) % 3;
                ep[i] = &e[i];
        }
        w.events = ep;
        w.wait_all = b & 0x10;
        /* A poll or a wait for ever (answered or cancelled at the hang-up):
         * a timer would make the outcome depend on the GPU's speed. */
        w.timeout_ms = b & 0x20 ? 0xffffffffu : 0;
        r.body_case = KFDBROKER__V1__REQUEST__BODY_WAIT_EVENTS;
        r.wait_events = &w;
        send_request(c, &r, -1);
}

typedef struct JobBuf {
        Kfdbroker__V1__Job job;
        Kfdbroker__V1__CopyJob copy;
        Kfdbroker__V1__FillJob fill;
        Kfdbroker__V1__SignalEventJob sig;
        Kfdbroker__V1__WaitEventJob wait;
        Kfdbroker__V1__DispatchJob dispatch;
        uint32_t grid[1], block[1];
        Kfdbroker__V1__KernelArg args[4], *argp[4];
        Kfdbroker__V1__BufferRef refs[3];
        uint32_t n;
} JobBuf;

static void build_dispatch(Client *c, JobBuf *j) {
        static const char *const names[] = { "vector_add", "vector_add", "fault", "" };
        uint8_t b = take(c);

        kfdbroker__v1__dispatch_job__init(&j->dispatch);
        j->dispatch.code_object = take_handle(c, c->codes, c->n_codes);
        j->dispatch.kernel = (char *) names[b % 4];
        j->grid[0] = 1 + (uint32_t) take_n(c, 2) % 4096;
        j->block[0] = 1 + take(c) % 256;
        j->dispatch.n_grid = j->dispatch.n_block = 1;
        j->dispatch.grid = j->grid;
        j->dispatch.block = j->block;
        /* a, b, c and n of vector_add; sometimes one short. */
        j->dispatch.n_args = b & 0x10 ? 3 : 4;
        for (unsigned i = 0; i < 3; i++) {
                kfdbroker__v1__kernel_arg__init(&j->args[i]);
                kfdbroker__v1__buffer_ref__init(&j->refs[i]);
                j->refs[i].handle = take_handle(c, c->buffers, c->n_buffers);
                j->refs[i].offset = (uint64_t) take(c) * 256;
                j->args[i].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BUFFER;
                j->args[i].buffer = &j->refs[i];
                j->argp[i] = &j->args[i];
        }
        kfdbroker__v1__kernel_arg__init(&j->args[3]);
        j->n = (uint32_t) take_n(c, 2);
        j->args[3].value_case = KFDBROKER__V1__KERNEL_ARG__VALUE_BYTES;
        j->args[3].bytes.data = (uint8_t *) &j->n;
        j->args[3].bytes.len = b & 0x20 ? 2 : 4;
        j->argp[3] = &j->args[3];
        j->dispatch.args = j->argp;
        j->job.kind_case = KFDBROKER__V1__JOB__KIND_DISPATCH;
        j->job.dispatch = &j->dispatch;
}

static void build_job(Client *c, JobBuf *j) {
        uint8_t kind = take(c);

        kfdbroker__v1__job__init(&j->job);
        switch (kind % 5) {
        case 0:
                kfdbroker__v1__copy_job__init(&j->copy);
                j->copy.src_handle = take_handle(c, c->buffers, c->n_buffers);
                j->copy.src_offset = take_n(c, 2) * 4;
                j->copy.dst_handle = take_handle(c, c->buffers, c->n_buffers);
                j->copy.dst_offset = take_n(c, 2) * 4;
                j->copy.size = (take_n(c, 2) + (kind & 0x80 ? 0 : 1)) * 4;
                j->job.kind_case = KFDBROKER__V1__JOB__KIND_COPY;
                j->job.copy = &j->copy;
                break;
        case 1:
                kfdbroker__v1__fill_job__init(&j->fill);
                j->fill.dst_handle = take_handle(c, c->buffers, c->n_buffers);
                j->fill.dst_offset = take_n(c, 2) * 4;
                j->fill.size = (take_n(c, 2) + 1) * 4 + (kind & 0x80 ? 2 : 0);
                j->fill.pattern = (uint32_t) take_n(c, 4);
                j->job.kind_case = KFDBROKER__V1__JOB__KIND_FILL;
                j->job.fill = &j->fill;
                break;
        case 2:
                kfdbroker__v1__signal_event_job__init(&j->sig);
                j->sig.handle = take_handle(c, c->events, c->n_events);
                j->sig.engine = (Kfdbroker__V1__Engine) (take(c) % 4);
                j->job.kind_case = KFDBROKER__V1__JOB__KIND_SIGNAL_EVENT;
                j->job.signal_event = &j->sig;
                break;
        case 3:
                kfdbroker__v1__wait_event_job__init(&j->wait);
                j->wait.handle = take_handle(c, c->events, c->n_events);
                j->wait.engine = (Kfdbroker__V1__Engine) (take(c) % 4);
                j->job.kind_case = KFDBROKER__V1__JOB__KIND_WAIT_EVENT;
                j->job.wait_event = &j->wait;
                break;
        default:
                build_dispatch(c, j);
                break;
        }
}

static void op_submit(Client *c) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__SubmitRequest s = KFDBROKER__V1__SUBMIT_REQUEST__INIT;
        JobBuf jobs[4];
        Kfdbroker__V1__Job *jp[4];

        s.n_jobs = take(c) % 5; /* 0 is refused */
        for (size_t i = 0; i < s.n_jobs; i++) {
                build_job(c, &jobs[i]);
                jp[i] = &jobs[i].job;
        }
        s.jobs = jp;
        r.body_case = KFDBROKER__V1__REQUEST__BODY_SUBMIT;
        r.submit = &s;
        send_request(c, &r, -1);
}

/* The requests without fields: Query or OpenSessionPage, Status or
 * DeviceInfo (an operand byte chooses), OpenSubmitRing, OpenFencePage (no
 * operand). */
static void op_simple(Client *c, Op op) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__QueryRequest q = KFDBROKER__V1__QUERY_REQUEST__INIT;
        Kfdbroker__V1__StatusRequest st = KFDBROKER__V1__STATUS_REQUEST__INIT;
        Kfdbroker__V1__DeviceInfoRequest di = KFDBROKER__V1__DEVICE_INFO_REQUEST__INIT;
        Kfdbroker__V1__OpenSubmitRingRequest ring = KFDBROKER__V1__OPEN_SUBMIT_RING_REQUEST__INIT;
        Kfdbroker__V1__OpenFencePageRequest page = KFDBROKER__V1__OPEN_FENCE_PAGE_REQUEST__INIT;
        Kfdbroker__V1__OpenSessionPageRequest session_page = KFDBROKER__V1__OPEN_SESSION_PAGE_REQUEST__INIT;
        uint8_t b;

        if (op == OP_OPEN_RING) {
                r.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_SUBMIT_RING;
                r.open_submit_ring = &ring;
        } else if (op == OP_OPEN_FENCE_PAGE) {
                r.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_FENCE_PAGE;
                r.open_fence_page = &page;
        } else if ((b = take(c)) & 1 && op == OP_STATUS) {
                r.body_case = KFDBROKER__V1__REQUEST__BODY_STATUS;
                r.status = &st;
        } else if (b & 1) {
                r.body_case = KFDBROKER__V1__REQUEST__BODY_OPEN_SESSION_PAGE;
                r.open_session_page = &session_page;
        } else if (op == OP_STATUS) {
                r.body_case = KFDBROKER__V1__REQUEST__BODY_DEVICE_INFO;
                r.device_info = &di;
        } else {
                r.body_case = KFDBROKER__V1__REQUEST__BODY_QUERY;
                r.query = &q;
        }
        send_request(c, &r, -1);
}

static void op_load_code(Client *c) {
        Kfdbroker__V1__Request r = KFDBROKER__V1__REQUEST__INIT;
        Kfdbroker__V1__LoadCodeObjectRequest l = KFDBROKER__V1__LOAD_CODE_OBJECT_REQUEST__INIT;
        uint8_t b = take(c);
        int fd;

        r.body_case = KFDBROKER__V1__REQUEST__BODY_LOAD_CODE_OBJECT;
        r.load_code_object = &l;
        if (b < 0xc0 && code_object)
                fd = sealed_memfd(code_object, code_object_size, !(b & 0x20)); /* the real one, sealed or not */
        else {
                size_t n = take(c);
                if (n > c->left)
                        n = c->left;
                fd = sealed_memfd(c->in, n, true); /* the input's bytes */
                c->in += n;
                c->left -= n;
        }
        send_request(c, &r, fd);
        close(fd);
}

/* One ring record from the input: a kind (0 and 5 are none), its fields,
 * and now and then a bad length, flag or reserved word. */
static void build_record(Client *c, KfdbRingRecord *rec, bool last) {
        uint8_t kind = take(c), f = take(c);

        memset(rec, 0, sizeof *rec);
        rec->kind = kind % 6;
        rec->flags = last ? KFDB_RING_END_OF_BATCH : 0;
        if (f & 0x80)
                rec->flags ^= f & 0x3;
        rec->bytes = f & 0x40 ? take(c) : KFDB_RING_RECORD_SIZE;
        switch (rec->kind) {
        case KFDB_RING_COPY:
                rec->copy.src_handle = take_handle(c, c->buffers, c->n_buffers);
                rec->copy.src_offset = take_n(c, 2) * 4;
                rec->copy.dst_handle = take_handle(c, c->buffers, c->n_buffers);
                rec->copy.dst_offset = take_n(c, 2) * 4;
                rec->copy.size = (take_n(c, 2) + (kind & 0x80 ? 0 : 1)) * 4;
                break;
        case KFDB_RING_FILL:
                rec->fill.dst_handle = take_handle(c, c->buffers, c->n_buffers);
                rec->fill.dst_offset = take_n(c, 2) * 4;
                rec->fill.size = (take_n(c, 2) + 1) * 4 + (kind & 0x80 ? 2 : 0);
                rec->fill.pattern = (uint32_t) take_n(c, 4);
                break;
        case KFDB_RING_SIGNAL_EVENT:
        case KFDB_RING_WAIT_EVENT:
                rec->event.handle = take_handle(c, c->events, c->n_events);
                rec->event.engine = take(c) % 4;
                break;
        default:
                rec->raw[0] = take_n(c, 8);
                break;
        }
        if (f & 0x20)
                rec->raw[6] = take_n(c, 8); /* a reserved word, or a field of another kind */
}

/* Writes 1 to 8 records after the client's head and publishes them — or
 * moves head somewhere it has no business — then rings the doorbell. */
static void op_ring(Client *c) {
        uint8_t b = take(c), h;
        unsigned n = 1 + (b & 7);
        uint64_t head;

        if (!c->ring || c->gone)
                return;
        for (unsigned i = 0; i < n; i++)
                build_record(c, kfdb_ring_record(c->ring, c->ring_head + i), i + 1 == n);
        h = take(c);
        if (h < 0xe0)
                head = c->ring_head + n;
        else if (h < 0xf0)
                head = c->ring_head - (h & 0xf); /* back, or still */
        else if (h < 0xff)
                head = c->ring_head + KFDB_RING_RECORDS + (h & 0xf); /* past a whole ring */
        else
                head = take_n(c, 8);
        __atomic_store_n(&c->ring->head, head, __ATOMIC_RELEASE);
        if (h < 0xe0)
                c->ring_head = head;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        if (__atomic_load_n(&c->ring->doorbell_armed, __ATOMIC_ACQUIRE) == 1 || (b & 0x80)) {
                uint64_t one = 1;
                check(write(c->doorbell, &one, sizeof one) == (ssize_t) sizeof one, "write the doorbell");
        }
        if (debug)
                fprintf(stderr, "ring: %u records, head %llu, tail %llu, armed %u\n", n, (unsigned long long) head,
                        (unsigned long long) __atomic_load_n(&c->ring->tail, __ATOMIC_ACQUIRE),
                        __atomic_load_n(&c->ring->doorbell_armed, __ATOMIC_ACQUIRE));
        pump();
        read_replies(c);
}

static void run_op(Client *c, Op op) {
        switch (op) {
        case OP_RAW:
                op_raw(c);
                break;
        case OP_HELLO:
                op_hello(c, take(c));
                break;
        case OP_ALLOC:
                op_alloc(c);
                break;
        case OP_IMPORT:
                op_import(c);
                break;
        case OP_CREATE_EVENT:
                op_create_event(c);
                break;
        case OP_WAIT_EVENTS:
                op_wait_events(c);
                break;
        case OP_SUBMIT:
                op_submit(c);
                break;
        case OP_QUERY:
        case OP_STATUS:
        case OP_OPEN_RING:
        case OP_OPEN_FENCE_PAGE:
                op_simple(c, op);
                break;
        case OP_LOAD_CODE:
                op_load_code(c);
                break;
        case OP_RING:
                op_ring(c);
                break;
        default:
                op_handle(c, op);
                break;
        }
}

/* ---- after the hang-up ---- */

static void check_context(Context *ctx, void *userdata) {
        ContextStats st;

        context_get_stats(ctx, &st);
        if (st.device)
                return;
        check(st.users == 0, "a client GPU context still has users");
        check(st.jobs_in_flight == 0, "a client GPU context still has jobs");
        check(st.gpu.mapped_buffers == 0 && st.gpu.buffers == 0, "a client GPU context still holds buffers");
}

/*
 * Whether the exact fd count is back at the baseline, giving the daemon up to
 * SETTLE_LIMIT_NS of its loop first: a buffer an engine thread still held when
 * the last job retired (a copy keeps its BOs until the packet ends) comes back
 * through the loop a moment later (a fuzz run saw one at 0.26 M executions,
 * gone after one more pass). Returned within the limit is returned.
 */
#define SETTLE_LIMIT_NS (2ull * 1000000000ull)
static bool fds_settle(void) {
        uint64_t deadline = mono_ns() + SETTLE_LIMIT_NS;

        while (count_fds(true) != baseline.fds) {
                if (mono_ns() >= deadline)
                        return false;
                check(sd_event_run(manager->event, 1000) >= 0, "sd_event_run");
        }
        return true;
}

static void check_nothing_left(void) {
        GpuContextStats st;
        unsigned n;
        Account *a;

        check(manager->set.sessions == NULL && manager->set.n_sessions == 0, "a session outlived its hang-up");
        check(scheduler_in_flight(manager->gpus[0].scheduler) == 0, "jobs outlived their session");
        device_stats(&st);
        check(st.buffers == baseline.device_buffers && st.buffer_bytes == baseline.device_buffer_bytes,
              "buffers outlived their session");
        context_pool_foreach(manager->gpus[0].contexts, check_context, NULL);
        LIST_FOREACH(accounts, a, manager->set.accounts.accounts)
                check(a->sessions_now == 0 && a->usage.buffer_bytes == 0, "an account still counts the session");
        /* The exact count (an fstat per fd) only when the quick one differs. */
        n = count_fds(false);
        if (n != baseline.fds_all) {
                if (fds_settle())
                        baseline.fds_all = count_fds(false); /* libFuzzer's pipes came */
                else {
                        (void) system("ls -l /proc/$PPID/fd >&2");
                        check(false, "an fd outlived its session");
                }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const Identity id = { .comm = "fuzz-session", .user_unit_uid = (uid_t) -1 };
        Identity me = id;
        Client c = { .in = data, .left = size };
        Session *s = NULL;
        int sv[2];

        if (size < 1)
                return 0;
        bring_up();
        me.uid = getuid();
        me.gid = getgid();
        me.pid = getpid();
        check(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) == 0, "socketpair");
        check(session_new(&manager->set, sv[0], &me, &s) == 0, "session_new");
        c.fd = sv[1];

        if (!(take(&c) & 1))
                op_hello(&c, 0);
        for (unsigned i = 0; i < MAX_OPS && c.left > 0 && !c.gone; i++)
                run_op(&c, (Op) (take(&c) % _OP_MAX));

        /* The client hangs up; its fds and mappings go with it. */
        if (c.ring)
                munmap(c.ring, KFDB_RING_SIZE);
        if (c.fence_page)
                munmap((void *) c.fence_page, KFDB_FENCE_PAGE_SIZE);
        close(c.fd);
        for (unsigned i = 0; i < c.n_fds; i++)
                close(c.fds[i]);
        pump();
        check_nothing_left();
        return 0;
}
