/* SPDX-License-Identifier: MIT */
/*
 * Framing of the daemon <-> worker messages (worker-proto.h): one datagram,
 * a header, a payload, at most one fd.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/macro.h"
#include "worker/worker-proto.h"

int worker_msg_sendv(int sock, WorkerMsgType type, const void *a, size_t a_size, const void *b, size_t b_size,
                     int fd) {
        WorkerMsgHeader h = { .type = type, .size = (uint32_t) (a_size + b_size) };
        struct iovec iov[3] = {
                { .iov_base = &h, .iov_len = sizeof h },
                { .iov_base = (void *) a, .iov_len = a_size },
                { .iov_base = (void *) b, .iov_len = b_size },
        };
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int))];
        } control = {};
        struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 3 };
        ssize_t n;

        if (sizeof h + a_size + b_size > WORKER_MSG_MAX)
                return -EMSGSIZE;
        if (fd >= 0) {
                struct cmsghdr *cm;

                mh.msg_control = control.buf;
                mh.msg_controllen = sizeof control.buf;
                cm = CMSG_FIRSTHDR(&mh);
                cm->cmsg_level = SOL_SOCKET;
                cm->cmsg_type = SCM_RIGHTS;
                cm->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(cm), &fd, sizeof(int));
        }
        do
                n = sendmsg(sock, &mh, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        return 0;
}

int worker_msg_send(int sock, WorkerMsgType type, const void *payload, size_t size, int fd) {
        return worker_msg_sendv(sock, type, payload, size, NULL, 0, fd);
}

static void close_fds(struct msghdr *mh) {
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < n; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        close(fd);
                }
        }
}

int worker_msg_recv(int sock, void *buf, WorkerMsg *ret) {
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(int) * 4)];
        } control;
        struct iovec iov = { .iov_base = buf, .iov_len = WORKER_MSG_MAX };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
                             .msg_controllen = sizeof control.buf };
        WorkerMsgHeader h;
        int fd = -EBADF, n_fds = 0;
        ssize_t n;

        *ret = (WorkerMsg) { .fd = -EBADF };
        do
                n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -errno;
        if (n == 0 && mh.msg_controllen == 0)
                return 0; /* end of file */
        if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
                close_fds(&mh);
                return -EBADMSG;
        }
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                        n_fds += (int) ((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                        if (n_fds == 1)
                                memcpy(&fd, CMSG_DATA(cm), sizeof(int));
                }
        if (n_fds > WORKER_MAX_FDS || (size_t) n < sizeof h) {
                close_fds(&mh);
                return -EBADMSG;
        }
        memcpy(&h, buf, sizeof h);
        if (h.type == 0 || h.size != (size_t) n - sizeof h) {
                close_fds(&mh);
                return -EBADMSG;
        }
        *ret = (WorkerMsg) {
                .type = (WorkerMsgType) h.type,
                .payload = (const uint8_t *) buf + sizeof h,
                .size = h.size,
                .fd = fd,
        };
        return 0;
}

void worker_text_set(char *dst, const char *text) {
        size_t n = text ? strnlen(text, WORKER_TEXT_MAX - 1) : 0;

        memcpy(dst, text ? text : "", n);
        memset(dst + n, 0, WORKER_TEXT_MAX - n);
}

bool worker_text_ok(const char *text) {
        size_t n = strnlen(text, WORKER_TEXT_MAX);

        if (n == WORKER_TEXT_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) text[i] < 0x20 || (unsigned char) text[i] == 0x7f)
                        return false;
        return true;
}
