/* SPDX-License-Identifier: MIT */
/*
 * Fences: a job is done when the session page's completed_fence has reached
 * its fence value, or — for a copy or fill, where the daemon offers the fence
 * page — when the SDMA engine wrote its fence into its slot of the fence page
 * (proto/fence-page.h), which it does before the daemon has even heard of the
 * completion. Checking is a load from the pages; waiting looks at them for a
 * short while (an adaptive spin, client-spin.h), then sleeps in poll(2) on the
 * eventfd the daemon signals after each page update and on the socket, so job
 * failure notifications that arrive meanwhile are read and queued.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client-session.h"
#include "fence-page.h"

void session_fence_page_close(kfdb_session *s) {
        if (s->fence_page)
                munmap((void *) s->fence_page, KFDB_FENCE_PAGE_SIZE);
        s->fence_page = NULL;
        s->fence_page_slots = 0;
}

int session_fence_page_open(kfdb_session *s) {
        _cleanup_(client_reply_freep) ClientReply *r = NULL;
        ClientRequest req = { .type = CLIENT_REQUEST_OPEN_FENCE_PAGE };
        struct stat st;
        void *m;
        int k;

        session_fence_page_close(s);
        if (!s->fence_page_wanted || !kfdb_session_has_feature(s, "fence-page"))
                return 0;
        k = session_call(s, &req, NULL, 0, &r);
        if (session_connection_lost(k))
                return k;
        /* Anything else: fences are seen on the session page alone. */
        if (k < 0 || r->fence_page.size != KFDB_FENCE_PAGE_SIZE || r->fence_page.slots != KFDB_FENCE_PAGE_SLOTS ||
            fstat(r->fds[0], &st) < 0 || (S_ISREG(st.st_mode) && st.st_size < (off_t) KFDB_FENCE_PAGE_SIZE))
                return 0;
        m = mmap(NULL, KFDB_FENCE_PAGE_SIZE, PROT_READ, MAP_SHARED, r->fds[0], 0);
        if (m == MAP_FAILED)
                return 0;
        s->fence_page = m;
        s->fence_page_slots = r->fence_page.slots;
        return 0;
}

/* Whether the fence page says the copy or fill with this fence is done. */
static bool fence_page_done(const kfdb_session *s, uint64_t fence) {
        if (!s->fence_page)
                return false;
        return kfdb_fence_page_says_done(
                __atomic_load_n(&s->fence_page[kfdb_fence_page_slot(fence, s->fence_page_slots)], __ATOMIC_ACQUIRE),
                fence);
}

static bool fence_done(const kfdb_session *s, uint64_t fence) {
        return session_completed_fence(s) >= fence || (fence <= s->last_fence && fence_page_done(s, fence));
}

int kfdb_fence_is_done(const kfdb_session *s, uint64_t fence) {
        if (!s)
                return -EINVAL;
        return fence_done(s, fence) ? 1 : 0;
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
        if (s->page && session_page_load_u64(&s->page->last_failed_fence) == fence)
                return session_error(s, -EIO, "the job with fence %" PRIu64 " failed", fence);
        return 0;
}

/* The job is done (fence_done()): counts a wait the fence page ended. */
static int fence_finish(kfdb_session *s, uint64_t fence) {
        if (session_completed_fence(s) < fence)
                s->fence_page_waits++;
        return fence_result(s, fence);
}

typedef struct FenceSpin {
        const kfdb_session *s;
        uint64_t fence;
} FenceSpin;

static bool fence_reached(void *userdata) {
        const FenceSpin *f = userdata;

        return fence_done(f->s, f->fence);
}

/* Spins on the page for this wait's share of s->fence_spin, then sleeps until
 * the fence is reached or the deadline passes. */
static int fence_wait(kfdb_session *s, uint64_t fence, int timeout_ms, uint64_t start_ns) {
        int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : INT64_MAX;
        uint64_t v;
        int k;

        if (timeout_ms != 0 && client_spin(&s->fence_spin, start_ns, fence_reached,
                                           &(FenceSpin) { .s = s, .fence = fence }))
                return fence_finish(s, fence);
        for (;;) {
                struct pollfd p[2] = {
                        { .fd = s->event_fd, .events = POLLIN },
                        { .fd = s->fd, .events = POLLIN },
                };
                int64_t left;

                if (fence_done(s, fence))
                        return fence_finish(s, fence);
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

        if (!s)
                return -EINVAL;
        if (fence > s->last_fence)
                return session_error(s, -EINVAL, "fence %" PRIu64 " was never handed out (last %" PRIu64 ")",
                                     fence, s->last_fence);
        if (fence_done(s, fence))
                return fence_finish(s, fence);
        start = client_spin_now_ns();
        k = fence_wait(s, fence, timeout_ms, start);
        if (k != -ETIMEDOUT)
                client_spin_update(&s->fence_spin, start);
        return k;
}
