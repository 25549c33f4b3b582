/* SPDX-License-Identifier: MIT */
/*
 * Fences: a job is done when the session page's completed_fence has reached
 * its fence value. Checking is a load from the page; waiting looks at the page
 * for a short while (an adaptive spin, client-spin.h), then sleeps in poll(2)
 * on the eventfd the daemon signals after each page update and on the socket,
 * so job failure notifications that arrive meanwhile are read and queued.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <time.h>

#include "client-session.h"

int kfdb_fence_is_done(const kfdb_session *s, uint64_t fence) {
        if (!s || !s->page)
                return -EINVAL;
        return session_completed_fence(s) >= fence ? 1 : 0;
}

static int64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The job is done: did it fail? Its notification may still be on the socket. */
static int fence_result(kfdb_session *s, uint64_t fence) {
        int k;

        /* Best effort: the job is done even if the daemon has gone since; a lost
         * connection shows at the next call. */
        (void) kfdb_process(s);
        k = session_find_failure(s, fence);
        if (k < 0)
                return k;
        k = session_find_cancelled(s, fence);
        if (k < 0)
                return k;
        if (session_page_load_u64(&s->page->last_failed_fence) == fence)
                return session_error(s, -EIO, "the job with fence %" PRIu64 " failed", fence);
        return 0;
}

typedef struct FenceSpin {
        const kfdb_session *s;
        uint64_t fence;
} FenceSpin;

static bool fence_reached(void *userdata) {
        const FenceSpin *f = userdata;

        return session_completed_fence(f->s) >= f->fence;
}

/* Spins on the page for this wait's share of s->fence_spin, then sleeps until
 * the fence is reached or the deadline passes. */
static int fence_wait(kfdb_session *s, uint64_t fence, int timeout_ms, uint64_t start_ns) {
        int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : INT64_MAX;
        uint64_t v;
        int k;

        if (timeout_ms != 0 && client_spin(&s->fence_spin, start_ns, fence_reached,
                                           &(FenceSpin) { .s = s, .fence = fence }))
                return fence_result(s, fence);
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = s->event_fd, .events = POLLIN },
                        { .fd = s->fd, .events = POLLIN },
                };
                int64_t left;

                if (session_completed_fence(s) >= fence)
                        return fence_result(s, fence);
                left = deadline == INT64_MAX ? -1 : MAX(deadline - now_ms(), (int64_t) 0);
                if (left == 0)
                        return session_error(s, -ETIMEDOUT,
                                             "fence %" PRIu64 " not done after %d ms (completed: %" PRIu64 ")",
                                             fence, timeout_ms, session_completed_fence(s));
                k = poll(p, 2, (int) MIN(left, (int64_t) INT32_MAX));
                if (k < 0 && errno != EINTR)
                        return -errno;
                if (k <= 0)
                        continue;
                if (p[0].revents & POLLIN)
                        (void) !read(s->event_fd, &v, sizeof(v));
                if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
                        k = session_receive(s, 0);
                        /* The daemon went away: its successor continues the
                         * fences, and this one's fails if it was in flight. */
                        if (k < 0)
                                k = session_recover(s, k);
                        if (k < 0)
                                return k;
                }
        }
}

int kfdb_fence_wait(kfdb_session *s, uint64_t fence, int timeout_ms) {
        uint64_t start;
        int k;

        if (!s || !s->page)
                return -EINVAL;
        if (fence > s->last_fence)
                return session_error(s, -EINVAL, "fence %" PRIu64 " was never handed out (last %" PRIu64 ")",
                                     fence, s->last_fence);
        if (session_completed_fence(s) >= fence)
                return fence_result(s, fence);
        start = client_spin_now_ns();
        k = fence_wait(s, fence, timeout_ms, start);
        if (k != -ETIMEDOUT)
                client_spin_update(&s->fence_spin, start);
        return k;
}
