/* SPDX-License-Identifier: MIT */
/*
 * The fence page of a session (proto/fence-page.h, docs/protocol.md "The
 * fence page"): 4096 bytes of GTT in the device context, made at
 * OpenFencePage and handed to the client as a dma-buf. Each copy or fill the
 * session submits afterwards ends with one more SDMA FENCE packet, after the
 * daemon's own (gpu-queue.c): the low 32 bits of the job's fence into its
 * slot. The engine writes it; the daemon reads only the slot of the
 * session's last copy or fill, to wake a sleeping client early
 * (fence-watch.h), so what a client does to its mapping changes nothing but
 * that: at most one more write to its own eventfd.
 *
 * Why: a job's completion otherwise reaches the client through four threads
 * (engine, WAIT_EVENTS waiter, main loop, client); a client that polls its
 * slot sees the engine's write directly, and one that sleeps is woken by the
 * waiter, which looks at the slot of the session's last copy or fill
 * (fence-watch.h). On the 2-core simulator machine a wake-up costs 8 us
 * between busy CPUs and 35-45 us across an idle one.
 *
 * Lifetime: the page is freed with the session, which happens only after
 * every job of it has retired (session.c), so no job on the GPU can write to
 * a page that is gone.
 */
#include <errno.h>
#include <string.h>

#include "fence-page.h"

#include "sessions/job.h"
#include "sessions/session-set.h"
#include "sessions/session.h"
#include "util/macro.h"

void session_open_fence_page(Session *s, const WireRequest *req) {
        unsigned held = session_buffer_fds(s);
        _cleanup_close_ int fd = -EBADF;
        uint32_t *slots;
        GpuBuffer *b;
        int k;

        if (s->fence_page) {
                session_send_error(s, req->id, EEXIST, "open_fence_page: this session has its fence page already");
                return;
        }
        /* Its slot writes wake the client through the session page's eventfd. */
        if (!s->page.page) {
                session_send_error(s, req->id, EPROTO,
                                   "open_fence_page: this lazy session has no session page yet, whose eventfd the "
                                   "fence page wakes: send OpenSessionPage first");
                return;
        }
        /* What the kernel-call table keeps for the buffer, and the reply's fd until read. */
        if (!session_check_fds(s, req->id, held + 1, "OpenFencePage"))
                return;
        k = gpu_buffer_new(context_pool_device_gpu(s->gpu->contexts), KFDB_FENCE_PAGE_SIZE, GPU_PLACEMENT_GTT,
                           false, &b);
        if (k < 0) {
                session_send_error(s, req->id, -k, "open_fence_page: cannot allocate the page: %s", strerror(-k));
                return;
        }
        /* Whatever the allocator gave, no slot may say a fence: slot i
         * starts as ~i, which no fence of it has (those are i modulo the
         * slots; zeros would say fence 0, 2^32, ...). */
        slots = gpu_buffer_get_cpu(b);
        if (!slots) {
                gpu_buffer_unref(b);
                session_send_error(s, req->id, ENODEV, "open_fence_page: the page has no CPU mapping to set up");
                return;
        }
        for (uint32_t i = 0; i < KFDB_FENCE_PAGE_SLOTS; i++)
                __atomic_store_n(&slots[i], kfdb_fence_page_fresh_slot(i), __ATOMIC_RELAXED);
        k = gpu_buffer_export(b, &fd);
        if (k < 0) {
                gpu_buffer_unref(b);
                session_send_error(s, req->id, -k, "open_fence_page: exporting the page as a dma-buf failed: %s",
                                   strerror(-k));
                return;
        }
        s->fence_page = b;
        fence_watch_entry_init(&s->fence_watch, slots, KFDB_FENCE_PAGE_SLOTS, s->page.eventfd);
        session_account_fds(s, (int64_t) held);
        session_send(s, &(WireReply) { .id = req->id, .type = WIRE_REPLY_OPEN_FENCE_PAGE,
                                       .fence_page = { .size = KFDB_FENCE_PAGE_SIZE, .slots = KFDB_FENCE_PAGE_SLOTS } },
                     &fd, 1);
}

bool session_fence_page_track(Session *s, Job *j) {
        /* A job on another GPU than the session's own is on another
         * scheduler's streams: nothing orders it with the session's SDMA
         * stream, and the page is memory of the session's own GPU. */
        if ((j->type != WIRE_JOB_COPY && j->type != WIRE_JOB_FILL) || j->on != &s->home) {
                j->unordered = true;
                s->n_unordered++;
                return false;
        }
        /* Only a job whose end proves every earlier one ended writes its
         * slot: with nothing but copies and fills unfinished, they are all on
         * the session's one SDMA stream, bound to one queue for the stream's
         * life, and run in fence order before this one. */
        if (!s->fence_page || s->n_unordered > 0)
                return false;
        j->sched.gpu.signal_va = gpu_buffer_get_va(s->fence_page) +
                                 (uint64_t) kfdb_fence_page_slot(j->fence, KFDB_FENCE_PAGE_SLOTS) * 4;
        j->sched.gpu.signal_value = (uint32_t) j->fence;
        return true;
}

void session_fence_page_watch(Session *s, uint64_t fence) {
        if (s->fence_page)
                fence_watch_arm(&s->set->fence_watch, &s->fence_watch, fence);
}

void session_fence_page_free(Session *s) {
        if (!s->fence_page)
                return;
        fence_watch_remove(&s->set->fence_watch, &s->fence_watch);
        /* Jobs of the session may still be on the GPU, each to write its
         * slot: the page stays mapped until those writes have landed. */
        s->fence_page = gpu_buffer_unref_after_jobs(s->fence_page);
        session_account_fds(s, -(int64_t) session_buffer_fds(s));
}
