/* SPDX-License-Identifier: MIT */
/*
 * One client of fuzz-relay-ioctl (fuzz-relay-ioctl.c says what it checks):
 * its end of the control channel and of one channel at a time, the
 * messages it sends, and each answer read and checked against the wire's
 * promises (the oracle, fuzz-relay-ioctl-oracle.c), or the end of a
 * channel where the oracle says the message ends it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz-relay-ioctl.h"
#include "sim/sim-device.h"
#include "sim/sim-process.h"
#include "sim/sim-remote.h"

#define MAX_WAIT_MS 7u
#define REPLY_WAIT_MS 10000

static uint64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

void rio_keep_fd(Client *c, int fd) {
        if (fd < 0)
                return;
        if (c->n_kept == MAX_KEPT_FDS) {
                close(c->kept[0]);
                memmove(c->kept, c->kept + 1, (MAX_KEPT_FDS - 1) * sizeof c->kept[0]);
                c->n_kept--;
        }
        c->kept[c->n_kept++] = fd;
}

/* An fd to send: 0 none, 1 a memfd, 2 a pipe's end, 3 one that came with a
 * reply (a dma-buf, a file's copy), 4 a socket. Returns it (the caller
 * closes it) or -1. */
int rio_make_fd(Client *c, unsigned kind) {
        int fds[2], fd = -1;

        switch (kind % 5) {
        case 1:
                fd = memfd_create("fuzz-relay-ioctl", MFD_CLOEXEC);
                if (fd >= 0 && ftruncate(fd, 4096) < 0) {
                        close(fd);
                        fd = -1;
                }
                break;
        case 2:
                if (pipe2(fds, O_CLOEXEC) == 0) {
                        close(fds[0]);
                        fd = fds[1];
                }
                break;
        case 3:
                if (c->n_kept > 0)
                        fd = fcntl(c->kept[c->n_kept - 1], F_DUPFD_CLOEXEC, 3);
                break;
        case 4:
                if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0) {
                        close(fds[1]);
                        fd = fds[0];
                }
                break;
        default:
                break;
        }
        return fd;
}

int rio_send(int sock, const void *msg, size_t n, int fd) {
        return sim_remote_send(sock, &(struct iovec) { .iov_base = (void *) msg, .iov_len = n }, 1, fd);
}

void rio_client_socket(const Client *c, int sock) {
        if (c->server)
                check(fcntl(sock, F_SETFL, O_NONBLOCK) == 0, "O_NONBLOCK on the client's socket");
}

/* The answer on sock: its length (0: EOF), and the fd that came with it. */
ssize_t rio_recv_answer(Client *c, int sock, int *ret_fd) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        int r;

        *ret_fd = -1;
        if (c->server) {
                /* A driven server: it serves what was sent, now; the
                 * answer (or the end of the channel) is there when it
                 * returns, and the socket (rio_client_socket()) does not
                 * wait for one that is not. */
                r = sim_remote_server_run(c->server);
                check(r >= 0, "running the server");
                if (r == 0)
                        c->server = NULL;
        } else {
                do
                        r = poll(&p, 1, REPLY_WAIT_MS);
                while (r < 0 && errno == EINTR);
                check(r == 1, "no answer and no end of the channel within 10 s");
        }
        ssize_t n = sim_remote_recv(sock, c->buf, SIM_REMOTE_MAX_MESSAGE + 1, ret_fd);
        check(n != -EAGAIN, "the driven server left a message without an answer or the end of its channel");
        check(n >= 0, "an answer the client cannot receive (too long, several fds, other control data)");
        check(n <= (ssize_t) SIM_REMOTE_MAX_MESSAGE, "an answer longer than a message may be");
        if (n == 0)
                check(*ret_fd < 0, "an fd with the end of the channel");
        return n;
}

/*
 * A buffer an ALLOC made, by op_alloc() or by any other request word of
 * ALLOC's number (the kernel runs the call by number): recorded with its
 * handle and mmap offset when the answer holds them (the kernel copies back
 * as many bytes as the request's size), else the client knows there is a
 * buffer it cannot place. The kernel hands a freed buffer's offset and
 * handle to a new one (DRM's offset manager, the process's IDR).
 */
static void learn_bo(Client *c, const SimRemoteReply *rep, const uint8_t *got) {
        struct kfd_ioctl_alloc_memory_of_gpu_args a = { 0 };

        if (rep->arg_size < offsetof(struct kfd_ioctl_alloc_memory_of_gpu_args, mmap_offset) + 8 ||
            c->n_bos == MAX_BOS) {
                c->unknown_bos = true;
                return;
        }
        memcpy(&a, got, rep->arg_size < sizeof a ? rep->arg_size : sizeof a);
        c->bos[c->n_bos++] = (Bo) { .handle = a.handle, .mmap_offset = a.mmap_offset, .va = a.va_addr,
                                    .size = a.size };
}

/* What the client learns from an answer it asked for. */
static void learn(Client *c, const SimRemoteRequest *req, const uint8_t *payload, const SimRemoteReply *rep,
                  const uint8_t *got) {
        unsigned long request = (unsigned long) req->u64[0];

        if (req->op == SIM_REMOTE_OP_OPEN_KFD && rep->ret >= 0)
                c->kfd = c->reach.kfd = rep->ret;
        if (req->op == SIM_REMOTE_OP_OPEN_RENDER && rep->ret >= 0) {
                if (req->u64[0] == c->render_minor)
                        c->render = rep->ret;
                memmove(c->reach.render + 1, c->reach.render, sizeof c->reach.render - sizeof c->reach.render[0]);
                c->reach.render[0] = rep->ret;
        }
        if (req->op == SIM_REMOTE_OP_CLOSE && rep->ret == 0) {
                if (req->fd == c->kfd)
                        c->kfd = -1;
                if (req->fd == c->render)
                        c->render = -1;
        }
        if (req->op != SIM_REMOTE_OP_IOCTL || rep->ret < 0)
                return;
        bool kfd_call = _IOC_TYPE(request) == AMDKFD_IOCTL_BASE;
        if (kfd_call && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_ALLOC_MEMORY_OF_GPU))
                learn_bo(c, rep, got);
        if (kfd_call && _IOC_NR(request) == _IOC_NR(AMDKFD_IOC_IMPORT_DMABUF))
                c->unknown_bos = true;
        if ((request == AMDKFD_IOC_FREE_MEMORY_OF_GPU || request == AMDKFD_IOC_EXPORT_DMABUF) &&
            !(req->flags & SIM_REMOTE_ARG_NULL)) {
                /* The handle as the kernel reads it: zeros past the request's size. A
                 * handle a freed buffer had may name a new one now. */
                uint8_t kdata[8] = { 0 };
                memcpy(kdata, payload, _IOC_SIZE(request) < 8 ? _IOC_SIZE(request) : 8);
                uint64_t handle = rio_field(kdata, 0, 8);
                for (unsigned i = 0; i < c->n_bos; i++)
                        if (c->bos[i].handle == handle && !c->bos[i].freed) {
                                c->bos[i].freed |= request == AMDKFD_IOC_FREE_MEMORY_OF_GPU;
                                c->bos[i].held |= request == AMDKFD_IOC_EXPORT_DMABUF;
                        }
        }
        if (rep->arg_size != _IOC_SIZE(request))
                return;
        if (_IOC_NR(request) == _IOC_NR(AMDKFD_IOC_CREATE_EVENT) &&
            rep->arg_size >= sizeof(struct kfd_ioctl_create_event_args)) {
                struct kfd_ioctl_create_event_args a;
                memcpy(&a, got, sizeof a);
                c->event_id = a.event_id;
        }
}

/* A WAIT_EVENTS waits MAX_WAIT_MS at most: its timeout, as far as the
 * request's bytes hold it, cut down. */
static void clamp_wait(uint8_t *msg, size_t n) {
        SimRemoteRequest req;
        const size_t at = sizeof req + offsetof(struct kfd_ioctl_wait_events_args, timeout);

        if (n < sizeof req)
                return;
        memcpy(&req, msg, sizeof req);
        if (req.op != SIM_REMOTE_OP_IOCTL ||
            sim_remote_ioctl_kind((unsigned long) req.u64[0]) != SIM_REMOTE_IOCTL_WAIT_EVENTS)
                return;
        size_t end = sizeof req + _IOC_SIZE((unsigned long) req.u64[0]);
        end = end < n ? end : n;
        uint32_t t = 0;
        for (size_t i = at; i < at + 4 && i < end; i++)
                t |= (uint32_t) msg[i] << (8 * (i - at));
        t %= MAX_WAIT_MS + 1;
        for (size_t i = at; i < at + 4 && i < end; i++)
                msg[i] = (uint8_t) (t >> (8 * (i - at)));
}

/*
 * Sends msg on sock (with fd if >= 0; closed here) and reads what comes
 * back: the answer, checked, or the end of the channel where the oracle
 * says the message is malformed. Returns false when the channel ended.
 */
bool rio_exchange(Client *c, int sock, uint8_t *msg, size_t n, int fd) {
        clamp_wait(msg, n);
        bool bad = rio_malformed(msg, n, fd >= 0);
        SimRemoteRequest req = { 0 };
        SimRemoteReply rep;
        int in_fd;

        memcpy(&req, msg, n < sizeof req ? n : sizeof req);
        int r = rio_send(sock, msg, n, fd);
        if (fd >= 0)
                close(fd);
        if (r == -EPIPE || r == -ECONNRESET)
                return false; /* ended by an earlier message */
        check(r == 0 || (r == -EMSGSIZE && n > SIM_REMOTE_MAX_MESSAGE), "sending a message");
        if (r < 0)
                return true;
        ssize_t got = rio_recv_answer(c, sock, &in_fd);
        if (c->debug) {
                int32_t ret = 0;
                if (got >= (ssize_t) sizeof rep)
                        memcpy(&ret, c->buf, sizeof ret);
                fprintf(stderr, "fuzz-relay-ioctl: op %u fd %d u64 0x%llx%s: %s %d\n", req.op, req.fd,
                        (unsigned long long) req.u64[0], bad ? " (malformed)" : "", got == 0 ? "EOF" : "ret", ret);
        }
        if (got == 0) {
                /* -ENOMEM also ends a channel; the fuzzer's sizes stay far below it. */
                check(bad, "a well-formed message ended the channel");
                return false;
        }
        check(!bad, "a malformed message was answered");
        check(got >= (ssize_t) sizeof rep, "an answer shorter than a reply");
        memcpy(&rep, c->buf, sizeof rep);
        check(rep.arg_size <= SIM_REMOTE_MAX_ARG && sizeof rep + rep.arg_size <= (size_t) got,
              "a reply's arg_size beyond its bound or its message");
        size_t array = (size_t) got - sizeof rep - rep.arg_size;
        const uint8_t *arg = c->buf + sizeof rep;

        switch (req.op) {
        case SIM_REMOTE_OP_OPEN_KFD:
        case SIM_REMOTE_OP_OPEN_RENDER:
                check(rep.ret >= 0 ? in_fd >= 0 : rep.ret > -4096 && in_fd < 0,
                      "OPEN: a file number without its fd, or an fd with a failure");
                check(rep.arg_size == 0 && array == 0, "OPEN: bytes with the answer");
                break;
        case SIM_REMOTE_OP_CLOSE:
        case SIM_REMOTE_OP_DOORBELL:
                rio_check_errno(rep.ret);
                check(rep.arg_size == 0 && array == 0 && in_fd < 0, "CLOSE/DOORBELL: more than ret");
                if (req.op == SIM_REMOTE_OP_DOORBELL)
                        check(rep.ret == 0, "DOORBELL: a doorbell write fails");
                break;
        case SIM_REMOTE_OP_MMAP:
                rio_check_errno(rep.ret);
                check((rep.ret == 0) == (in_fd >= 0), "MMAP: a success without its memory, or an fd with a failure");
                check(rep.arg_size == 0 && array == 0, "MMAP: bytes with the answer");
                break;
        case SIM_REMOTE_OP_EXCEPTION_INFO:
                rio_check_errno(rep.ret);
                check(rep.arg_size == 0 && in_fd < 0, "EXCEPTION_INFO: an argument or an fd");
                if (rep.ret >= 0 && req.u64[0] > 0)
                        check(array >= 1 && array <= SIM_EXCEPTION_TEXT && arg[array - 1] == '\0' &&
                                      strlen((const char *) arg) == array - 1,
                              "EXCEPTION_INFO: the text is not one string within its bound");
                else
                        check(array == 0, "EXCEPTION_INFO: text with a failure or without a buffer");
                break;
        case SIM_REMOTE_OP_IOCTL:
                rio_check_ioctl_reply(&c->reach, &req, msg + sizeof req, &rep, arg, array, in_fd);
                break;
        default:
                check(false, "an answer to an op that has none");
        }
        learn(c, &req, msg + sizeof req, &rep, arg);
        rio_keep_fd(c, in_fd);
        return true;
}

/* ---- Channels ---- */

/* HELLO on the control channel: the server's magic and version, and the
 * sysfs root as one string. */
void rio_handshake(Client *c) {
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_HELLO, .fd = -1,
                                 .u64 = { SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32 } };
        SimRemoteReply rep;
        int fd;

        check(rio_send(c->control, &req, sizeof req, -1) == 0, "sending HELLO");
        ssize_t n = rio_recv_answer(c, c->control, &fd);
        check(n > (ssize_t) sizeof rep && fd < 0, "HELLO: no answer, or an fd with it");
        memcpy(&rep, c->buf, sizeof rep);
        check(rep.ret == 0 && rep.arg_size == 0 &&
                      rep.u64[0] == (SIM_REMOTE_MAGIC | (uint64_t) SIM_REMOTE_VERSION << 32),
              "HELLO: not a sim-remote server's answer");
        check(c->buf[n - 1] == '\0' && strlen((const char *) c->buf + sizeof rep) == (size_t) n - sizeof rep - 1,
              "HELLO: the sysfs root is not one string");
        c->hello_done = true;
}

/* NEW_CHANNEL with a socket: the new channel replaces the old one. 0,
 * -EMFILE (the server's bound), or -EPIPE when the process is gone. */
int rio_new_channel(Client *c) {
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_NEW_CHANNEL, .fd = -1 };
        SimRemoteReply rep;
        int sv[2], fd;

        if (c->process_gone)
                return -EPIPE;
        check(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
        rio_client_socket(c, sv[0]);
        int r = rio_send(c->control, &req, sizeof req, sv[1]);
        close(sv[1]);
        check(r == 0, "sending NEW_CHANNEL");
        ssize_t n = rio_recv_answer(c, c->control, &fd);
        check(n == (ssize_t) sizeof rep && fd < 0, "NEW_CHANNEL: no answer of its own");
        memcpy(&rep, c->buf, sizeof rep);
        check(rep.ret == 0 || rep.ret == -EMFILE, "NEW_CHANNEL: an errno other than -EMFILE");
        if (rep.ret < 0) {
                close(sv[0]);
                return rep.ret;
        }
        if (c->channel >= 0)
                close(c->channel);
        c->channel = sv[0];
        return 0;
}

/* A channel ended: the process lives on — a new channel answers (once the
 * ended ones are gone: they count against the bound until their threads
 * return). */
void rio_after_channel_end(Client *c) {
        uint64_t deadline = now_ms() + 2000;
        int r;

        close(c->channel);
        c->channel = -1;
        while ((r = rio_new_channel(c)) == -EMFILE && now_ms() < deadline)
                usleep(1000);
        check(r == 0, "the process did not outlive the end of a channel");
        if (c->kfd < 0)
                return;
        struct kfd_ioctl_get_version_args v = { 0 };
        uint8_t msg[sizeof(SimRemoteRequest) + sizeof v];
        SimRemoteRequest req = { .op = SIM_REMOTE_OP_IOCTL, .fd = c->kfd, .arg_size = sizeof v,
                                 .u64 = { AMDKFD_IOC_GET_VERSION } };
        memcpy(msg, &req, sizeof req);
        memcpy(msg + sizeof req, &v, sizeof v);
        check(rio_exchange(c, c->channel, msg, sizeof msg, -1), "GET_VERSION after a channel ended");
        SimRemoteReply rep;
        memcpy(&rep, c->buf, sizeof rep);
        check(rep.ret == 0, "GET_VERSION fails after a channel ended");
}
