/* SPDX-License-Identifier: MIT */
/*
 * sendmsg/recvmsg of single datagrams with SCM_RIGHTS, for the client
 * session. Stateless: the session owns the socket.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "client-socket.h"
#include "macro.h"

#define CLIENT_SOCKET_MAX_FDS 8u

int client_socket_wait(int fd, int timeout_ms) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int k;

        for (;;) {
                k = poll(&p, 1, timeout_ms);
                if (k >= 0)
                        return k > 0 ? 1 : 0;
                if (errno != EINTR)
                        return -errno;
        }
}

static int wait_writable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };

        for (;;) {
                if (poll(&p, 1, -1) >= 0)
                        return 0;
                if (errno != EINTR)
                        return -errno;
        }
}

int client_socket_send(int fd, const void *buf, size_t len, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * CLIENT_SOCKET_MAX_FDS)];
        } control = {};
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = len };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
        ssize_t n;
        int k;

        if (n_fds > CLIENT_SOCKET_MAX_FDS)
                return -EINVAL;
        if (n_fds > 0) {
                struct cmsghdr *c;

                mh.msg_control = control.buf;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                c = CMSG_FIRSTHDR(&mh);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }

        for (;;) {
                n = sendmsg(fd, &mh, MSG_NOSIGNAL);
                if (n >= 0)
                        return (size_t) n == len ? 0 : -EIO;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return errno == EPIPE ? -ECONNRESET : -errno;
                k = wait_writable(fd);
                if (k < 0)
                        return k;
        }
}

int client_socket_recv(int fd, void *buf, size_t size, int *ret_fds, size_t max_fds,
                       size_t *ret_n_fds, size_t *ret_n_extra) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * CLIENT_SOCKET_MAX_FDS)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr mh;
        size_t n_fds = 0, n_extra = 0;
        ssize_t n;

        for (bool reset = false;;) {
                mh = (struct msghdr) { .msg_iov = &iov, .msg_iovlen = 1,
                                       .msg_control = control.buf,
                                       .msg_controllen = sizeof(control.buf) };
                n = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n >= 0)
                        break;
                if (errno == EINTR)
                        continue;
                /* A daemon that closes the connection with our request unread
                 * (a refused Hello: its reason is queued for us) makes the
                 * kernel report ECONNRESET once, ahead of what it sent
                 * (unix_release_sock() sets the peer's sk_err): read on,
                 * so that the reason is not lost. */
                if (errno == ECONNRESET && !reset) {
                        reset = true;
                        continue;
                }
                return reset ? -ECONNRESET : -errno;
        }

        for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
                size_t count;
                int *data;

                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                data = (int *) CMSG_DATA(c);
                for (size_t i = 0; i < count; i++) {
                        int received;

                        memcpy(&received, &data[i], sizeof(int));
                        if (n_fds < max_fds)
                                ret_fds[n_fds++] = received;
                        else {
                                safe_close(received);
                                n_extra++;
                        }
                }
        }

        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                for (size_t i = 0; i < n_fds; i++)
                        ret_fds[i] = safe_close(ret_fds[i]);
                *ret_n_fds = 0;
                if (ret_n_extra)
                        *ret_n_extra = n_extra;
                return -EBADMSG;
        }
        /* A SOCK_SEQPACKET read of 0 bytes is the end of the stream. */
        if (n == 0 && n_fds == 0)
                return -ECONNRESET;

        *ret_n_fds = n_fds;
        if (ret_n_extra)
                *ret_n_extra = n_extra;
        return (int) n;
}
