/* SPDX-License-Identifier: MIT */
/*
 * SDMA execution end to end through the KfdOps table only, as the daemon
 * drives it: BOs allocated and mapped, an SDMA queue created, the doorbell
 * slice mmapped, packets written to the ring, wptr stored, the doorbell
 * rung, and completion awaited with WAIT_EVENTS on an event signalled by
 * FENCE(slot) + TRAP. Also faults (MEMORY event with the address, queue
 * stopped at the faulting packet), bad packets (the queue stops, no event), POLL_REGMEM on
 * a value the CPU writes later, ring wrap-around and two engines at once.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim-test.h"

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

typedef struct Rig {
        TestCtx c;
        TestBo page;
        uint32_t done;     /* SIGNAL, auto-reset: completion */
        uint32_t mem_ev;   /* MEMORY */
        uint32_t hw_ev;    /* HW_EXCEPTION */
        TestQueue q;
} Rig;

static void rig_open(Rig *r, SimDevice *dev, uint32_t ring_size) {
        t_open(&r->c, dev);
        r->page = t_event_page(&r->c, &r->done);
        r->mem_ev = t_event(&r->c, KFD_IOC_EVENT_MEMORY, true, 0);
        r->hw_ev = t_event(&r->c, KFD_IOC_EVENT_HW_EXCEPTION, true, 0);
        t_sdma_queue(&r->c, &r->q, ring_size);
}

static void rig_submit_and_wait(Rig *r, const uint32_t *dw, size_t n) {
        t_submit(&r->q, dw, n);
        uint32_t signal[] = { PKT_SIGNAL(r->page.va, r->done) };
        t_submit(&r->q, signal, ELEMENTSOF(signal));
        cr_assert_eq(t_wait1(&r->c, r->done, 5000), KFD_IOC_WAIT_RESULT_COMPLETE, "completion event");
        cr_expect_eq(t_rptr(&r->q), r->q.wptr_value, "rptr written back up to wptr");
        cr_expect_eq(((uint64_t *) r->page.cpu)[r->done], ~0ull, "slot acknowledged (reset to ~0)");
}

Test(sim_sdma, copy_fill_write_fence) {
        Rig r;
        rig_open(&r, NULL, 65536);
        TestBo src = t_bo(&r.c, 1u << 20, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo dst = t_bo(&r.c, 1u << 20, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint8_t *s = src.cpu, *d = dst.cpu;
        for (size_t i = 0; i < src.size; i++)
                s[i] = (uint8_t) (i * 7 + 3);
        memset(d, 0, dst.size);

        uint32_t copy[] = { PKT_COPY(dst.va + 16, src.va + 3, 100000) };
        rig_submit_and_wait(&r, copy, ELEMENTSOF(copy));
        cr_expect_eq(memcmp(d + 16, s + 3, 100000), 0, "copied bytes");
        cr_expect_eq(d[15], 0, "nothing before the destination");
        cr_expect_eq(d[16 + 100000], 0, "nothing after it");

        uint32_t fill[] = { PKT_FILL_DW(dst.va + 4096, 0xCAFEF00D, 8192), PKT_FENCE(fence.va + 8, 0x12345678) };
        rig_submit_and_wait(&r, fill, ELEMENTSOF(fill));
        for (size_t i = 0; i < 8192 / 4; i++)
                cr_assert_eq(((uint32_t *) (d + 4096))[i], 0xCAFEF00Du, "dword %zu", i);
        cr_expect_eq(((uint32_t *) (d + 4096))[-1], ((uint32_t *) (d))[1023]);
        cr_expect_eq(((uint32_t *) fence.cpu)[2], 0x12345678u, "FENCE writes 32 bits");
        cr_expect_eq(((uint32_t *) fence.cpu)[3], 0u, "and only 32 bits");

        uint32_t bytefill[] = { 0x0000000B, (uint32_t) (dst.va + 1), (uint32_t) ((dst.va + 1) >> 32), 0x1234AB, 2 };
        uint32_t write[] = { 0x00000002, (uint32_t) (fence.va + 64), (uint32_t) ((fence.va + 64) >> 32), 1, 0xA1, 0xB2 };
        rig_submit_and_wait(&r, bytefill, ELEMENTSOF(bytefill));
        rig_submit_and_wait(&r, write, ELEMENTSOF(write));
        cr_expect(d[1] == 0xAB && d[2] == 0xAB && d[3] == 0xAB && d[4] == 0, "FILLSIZE 0 fills bytes");
        cr_expect_eq(((uint32_t *) fence.cpu)[16], 0xA1u);
        cr_expect_eq(((uint32_t *) fence.cpu)[17], 0xB2u);
        t_close(&r.c, true);
}

/* An SDMA engine thread runs 10 nice steps below the process for small
 * moves, and at its priority for bulk ones (>= 1 MiB, no other queue
 * waiting) until its next move that is not one; the bytes are the same
 * either way. */
Test(sim_sdma, a_bulk_move_runs_at_the_process_priority) {
        int base = getpriority(PRIO_PROCESS, 0), low = base + 10 > 19 ? 19 : base + 10;
        Rig r;

        if (low == base)
                cr_skip_test("this process runs at nice %d: its engines cannot go lower", base);
        if (!t_can_raise_priority(base))
                cr_skip_test("this process may not raise a thread's priority back (no CAP_SYS_NICE, RLIMIT_NICE too low)");
        rig_open(&r, NULL, 65536);
        TestBo src = t_bo(&r.c, 4u << 20, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo dst = t_bo(&r.c, 4u << 20, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint8_t *sp = src.cpu, *dp = dst.cpu;
        unsigned below;

        for (size_t i = 0; i < src.size; i++)
                sp[i] = (uint8_t) (i * 13 + 1);
        /* a first small move: the engine has run (and lowered itself) */
        uint32_t first[] = { PKT_COPY(dst.va + (3u << 20), src.va, 4096) };
        rig_submit_and_wait(&r, first, ELEMENTSOF(first));
        below = t_threads_at_nice(low);
        cr_assert_geq(below, 1, "no engine thread 10 nice steps down");
        uint32_t big[] = { PKT_COPY(dst.va, src.va, 2u << 20) };
        rig_submit_and_wait(&r, big, ELEMENTSOF(big));
        cr_expect_eq(memcmp(dp, sp, 2u << 20), 0, "bulk copy");
        cr_expect_eq(t_threads_at_nice(low), below - 1, "the engine did not run the bulk move at nice %d", base);
        uint32_t fence_only[] = { PKT_FENCE(dst.va + (3u << 20), 7) };
        rig_submit_and_wait(&r, fence_only, ELEMENTSOF(fence_only));
        cr_expect_eq(t_threads_at_nice(low), below - 1, "a fence after a bulk move lowered the engine");
        uint32_t small[] = { PKT_COPY(dst.va + (2u << 20), src.va, 4096) };
        rig_submit_and_wait(&r, small, ELEMENTSOF(small));
        cr_expect_eq(memcmp(dp + (2u << 20), sp, 4096), 0, "small copy");
        cr_expect_eq(t_threads_at_nice(low), below, "a small move ran at the process's priority");

        /* Another queue with work (a POLL_REGMEM that waits): a bulk move
         * would delay it, and stays 10 steps down. */
        TestQueue q2;
        TestBo mem = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint32_t *flag = mem.cpu;
        uint32_t poll[] = { PKT_POLL_GE(mem.va, 5) };
        t_sdma_queue(&r.c, &q2, 4096);
        __atomic_store_n(flag, 4, __ATOMIC_RELEASE);
        t_submit(&q2, poll, ELEMENTSOF(poll));
        uint32_t big2[] = { PKT_COPY(dst.va + (1u << 20), src.va, 2u << 20) };
        rig_submit_and_wait(&r, big2, ELEMENTSOF(big2));
        cr_expect_eq(memcmp(dp + (1u << 20), sp, 2u << 20), 0, "bulk copy next to a waiting queue");
        cr_expect_eq(t_threads_at_nice(low), below, "a bulk move ran at the process's priority while another queue waited");
        __atomic_store_n(flag, 5, __ATOMIC_RELEASE);
        t_close(&r.c, true);
}

/* Writing back a bulk move's pages (a GCR_REQ with GL2_WB while 1 MiB or
 * more of the GL2 is dirty, no other queue waiting) is that move's work,
 * and runs at the process's priority too — also when the queue's last move
 * was small, as in ROCr's 256 MiB copy, whose last packet is 2 KiB — and
 * the bytes reach memory only then. */
Test(sim_sdma, a_bulk_write_back_runs_at_the_process_priority) {
        int base = getpriority(PRIO_PROCESS, 0), low = base + 10 > 19 ? 19 : base + 10;
        Rig r;

        if (low == base)
                cr_skip_test("this process runs at nice %d: its engines cannot go lower", base);
        if (!t_can_raise_priority(base))
                cr_skip_test("this process may not raise a thread's priority back (no CAP_SYS_NICE, RLIMIT_NICE too low)");
        rig_open(&r, NULL, 65536);
        TestBo src = t_bo(&r.c, 4u << 20, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo dst = t_bo(&r.c, 4u << 20, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        uint8_t *sp = src.cpu, *dp = dst.cpu;
        unsigned below;

        for (size_t i = 0; i < src.size; i++)
                sp[i] = (uint8_t) (i * 13 + 1);
        /* a first small move: the engine has run (and lowered itself) */
        uint32_t first[] = { PKT_COPY(src.va + (3u << 20), src.va, 4096) };
        rig_submit_and_wait(&r, first, ELEMENTSOF(first));
        below = t_threads_at_nice(low);
        cr_assert_geq(below, 1, "no engine thread 10 nice steps down");
        /* 2 MiB and 2 KiB into VRAM: the last move is small. */
        uint32_t copy[] = { PKT_COPY(dst.va, src.va, 2u << 20), PKT_COPY(dst.va + (2u << 20), src.va, 2048) };
        rig_submit_and_wait(&r, copy, ELEMENTSOF(copy));
        cr_expect_eq(t_threads_at_nice(low), below, "the small move after the bulk one ran at the process's priority");
        cr_expect_neq(memcmp(dp, sp, 4096), 0, "the copy reached memory before its write-back");
        uint32_t wb[] = { 0x00000111u, 0, (1u << 15) << 16, 0, 0 }; /* GCR: GL2_WB */
        rig_submit_and_wait(&r, wb, ELEMENTSOF(wb));
        cr_expect_eq(memcmp(dp, sp, 2u << 20), 0, "the bulk copy after its write-back");
        cr_expect_eq(memcmp(dp + (2u << 20), sp, 2048), 0, "the small copy after its write-back");
        cr_expect_eq(t_threads_at_nice(low), below - 1, "the write-back of 2 MiB ran 10 nice steps down");
        t_close(&r.c, true);
}

/* Resident pages of [p, p + size) (mincore: of a file mapping, whether the
 * file has the page). */
static size_t resident_pages(void *p, uint64_t size) {
        size_t n = size / 4096, resident = 0;
        unsigned char *vec = malloc(n);

        cr_assert_not_null(vec);
        cr_assert_eq(mincore(p, size, vec), 0);
        for (size_t i = 0; i < n; i++)
                resident += vec[i] & 1;
        free(vec);
        return resident;
}

/* A VRAM BO is backed whole at the first engine write into it, its memory
 * and its GL2 view, by the device's populator thread beside the engine
 * (sim-populate.h), where the engine did it for the memory alone, on its
 * path and under the device lock — not before (a CWSR area nobody writes
 * costs the host nothing). What the copy wrote reaches memory at the
 * write-back; the rest stays zero. BOs freed while they are being backed go
 * cleanly (their mappings unmapped once: ASan). */
Test(sim_sdma, a_vram_bo_is_backed_beside_the_engine_at_its_first_write) {
        SimDeviceStats st;
        size_t resident;
        Rig r;

        rig_open(&r, NULL, 4096);
        TestBo src = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo v = t_bo(&r.c, 8u << 20, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        memset(src.cpu, 0x5A, 4096);
        struct kfd_ioctl_export_dmabuf_args x = { .handle = v.handle, .flags = O_CLOEXEC };
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_EXPORT_DMABUF, &x), 0);
        close((int) x.dmabuf_fd);
        usleep(10000);
        cr_expect_eq(resident_pages(v.cpu, v.size), 0u, "a VRAM BO no engine wrote was backed (mapped, exported)");
        sim_device_get_stats(r.c.dev, &st);
        uint64_t before = st.backed_ahead;
        /* One page copied into it, and written back. */
        uint32_t copy[] = { PKT_COPY(v.va + 4096, src.va, 4096) };
        rig_submit_and_wait(&r, copy, ELEMENTSOF(copy));
        uint32_t wb[] = { 0x00000111u, 0, (1u << 15) << 16, 0, 0 }; /* GCR: GL2_WB */
        rig_submit_and_wait(&r, wb, ELEMENTSOF(wb));
        for (int i = 0; i < 10000; i++) {
                sim_device_get_stats(r.c.dev, &st);
                if (st.backed_ahead - before >= 2 * v.size)
                        break;
                usleep(1000);
        }
        cr_expect_geq(st.backed_ahead - before, 2 * v.size,
                      "the populator backed %llu bytes of the 8 MiB BO's memory and view after 10 s",
                      (unsigned long long) (st.backed_ahead - before));
        resident = resident_pages(v.cpu, v.size);
        cr_expect_eq(resident, v.size / 4096, "%zu of the %llu pages of its memory backed", resident,
                     (unsigned long long) (v.size / 4096));
        size_t wrong = 0;
        for (uint64_t k = 0; k < v.size; k++)
                wrong += ((const uint8_t *) v.cpu)[k] != (k >= 4096 && k < 8192 ? 0x5A : 0);
        cr_expect_eq(wrong, 0u, "%zu bytes of the BO are not what the copy left", wrong);
        for (int i = 0; i < 8; i++) {
                TestBo b = t_bo(&r.c, 32u << 20, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
                uint32_t one[] = { PKT_COPY(b.va, src.va, 4096) };
                rig_submit_and_wait(&r, one, ELEMENTSOF(one));
                t_bo_release(&r.c, &b);
        }
        t_close(&r.c, true);
}

Test(sim_sdma, timestamps_are_monotonic) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo ts = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        struct kfd_ioctl_get_clock_counters_args k0 = { .gpu_id = 0x697D }, k1 = { .gpu_id = 0x697D };
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_GET_CLOCK_COUNTERS, &k0), 0);
        uint32_t pk[] = { PKT_TIMESTAMP(ts.va), PKT_FILL_DW(ts.va + 64, 0, 4032), PKT_TIMESTAMP(ts.va + 8) };
        rig_submit_and_wait(&r, pk, ELEMENTSOF(pk));
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_GET_CLOCK_COUNTERS, &k1), 0);
        uint64_t t0 = ((uint64_t *) ts.cpu)[0], t1 = ((uint64_t *) ts.cpu)[1];
        cr_expect_neq(t0, 0u);
        cr_expect_leq(k0.gpu_clock_counter, t0);
        cr_expect_leq(t0, t1);
        cr_expect_leq(t1, k1.gpu_clock_counter, "the same 100 MHz counter as GET_CLOCK_COUNTERS");
        t_close(&r.c, true);
}

Test(sim_sdma, poll_regmem_waits_for_the_cpu) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo mem = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint32_t *flag = mem.cpu, *out = (uint32_t *) mem.cpu + 1;
        uint32_t pk[] = { PKT_POLL_GE(mem.va, 5), PKT_FENCE(mem.va + 4, 7), PKT_SIGNAL(r.page.va, r.done) };
        __atomic_store_n(flag, 4, __ATOMIC_RELEASE);
        t_submit(&r.q, pk, ELEMENTSOF(pk));
        cr_expect_eq(t_wait1(&r.c, r.done, 50), KFD_IOC_WAIT_RESULT_TIMEOUT, "4 < 5: still polling");
        cr_expect_eq(*out, 0u);
        /* The read pointer is the fetcher's (sim-sdma.c): past the FENCE
         * that has not run. */
        cr_expect_eq(t_rptr(&r.q), r.q.wptr_value, "the engine read the packets after the POLL_REGMEM");
        __atomic_store_n(flag, 5, __ATOMIC_RELEASE);
        cr_expect_eq(t_wait1(&r.c, r.done, 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(*out, 7u);
        t_close(&r.c, true);
}

/* The fetcher reads 256 bytes from the start of the packet it executes, no
 * more: behind a POLL_REGMEM that waits, the rptr word stops there. What it
 * has read it runs as it read it, whatever the ring holds by then; what it
 * has not read is still the driver's to rewrite. */
Test(sim_sdma, the_fetcher_reads_a_window_ahead_of_the_engine) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo mem = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint32_t *flag = mem.cpu, *slot = (uint32_t *) mem.cpu + 1;
        const uint32_t poll[] = { PKT_POLL_GE(mem.va, 1) };
        const unsigned fence_dw = 4, n = 32; /* PKT_FENCE: header, address (2), value */
        uint32_t *ring = r.q.ring.cpu;

        /* The POLL (24 bytes), then FENCE i writing i + 1 to slot[i]. */
        __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
        t_submit(&r.q, poll, ELEMENTSOF(poll));
        for (unsigned i = 0; i < n; i++) {
                const uint32_t fence[] = { PKT_FENCE(mem.va + 4 + 4ull * i, i + 1) };
                t_submit(&r.q, fence, ELEMENTSOF(fence));
        }
        for (int tries = 0; t_rptr(&r.q) < 256 && tries < 50000; tries++)
                usleep(100);
        usleep(20000); /* and it reads no further */
        cr_expect_eq(t_rptr(&r.q), 256u, "the fetcher stopped 256 bytes from the waiting POLL_REGMEM");
        cr_expect_eq(slot[0], 0u, "nothing after the POLL_REGMEM ran");

        /* FENCE 13's value (byte 24 + 13 * 16 + 12 = 244) was read, FENCE 14's (260) was not. */
        ring[(sizeof poll + 13 * fence_dw * 4) / 4 + 3] = 1013;
        ring[(sizeof poll + 14 * fence_dw * 4) / 4 + 3] = 1014;
        __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
        uint32_t signal[] = { PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, signal, ELEMENTSOF(signal));
        cr_assert_eq(t_wait1(&r.c, r.done, 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(slot[13], 14u, "a packet already read runs as read");
        cr_expect_eq(slot[14], 1014u, "a packet not yet read runs as rewritten");
        cr_expect_eq(slot[n - 1], n);
        cr_expect_eq(t_rptr(&r.q), r.q.wptr_value);
        t_close(&r.c, true);
}

Test(sim_sdma, poll_regmem_retry_count_runs_out) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo mem = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        /* FUNC 3 (==) 1, RETRY_COUNT 3 */
        uint32_t pk[] = { 0xB0000008, LO(mem.va), HI(mem.va), 1, 0xFFFFFFFF, (3u << 16) | 4 };
        t_submit(&r.q, pk, ELEMENTSOF(pk));
        char text[256];
        cr_assert_eq(t_take_stop_record(&r.c, NULL, text, sizeof text), 0, "the queue did not stop");
        cr_expect(strstr(text, "SDMA"), "text: %s", text);
        cr_expect_eq(t_wait1(&r.c, r.hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "no HW_EXCEPTION (kfd-facts §7.2)");
        cr_expect(strstr(text, "(packet at ring byte 0x0)"), "the record names the packet: %s", text);
        t_close(&r.c, true);
}

Test(sim_sdma, ring_wraps_around) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        /* 40-byte rounds in a 4 KiB ring: packets straddle the end many times. */
        for (uint32_t i = 1; i <= 400; i++) {
                uint32_t pk[] = { PKT_FENCE(fence.va, i) };
                rig_submit_and_wait(&r, pk, ELEMENTSOF(pk));
                cr_assert_eq(((uint32_t *) fence.cpu)[0], i);
        }
        cr_expect_gt(r.q.wptr_value, 3u * 4096, "wrapped several times");
        t_close(&r.c, true);
}

Test(sim_sdma, fault_stops_the_queue_at_the_packet) {
        Rig r;
        SimDevice *dev;
        SimOptions o = { .fault_order = SIM_FAULT_ORDER_EVENT_FIRST };
        cr_assert_eq(sim_device_new(&o, &dev), 0);
        rig_open(&r, dev, 4096);
        TestBo buf = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint64_t hole = t_reserve_va(65536); /* reserved on the CPU, never GPU-mapped */

        uint32_t ok[] = { PKT_FENCE(fence.va, 1) };
        rig_submit_and_wait(&r, ok, ELEMENTSOF(ok));
        uint64_t fault_at = r.q.wptr_value;
        uint32_t bad[] = { PKT_COPY(buf.va, hole + 0x2000, 64), PKT_FENCE(fence.va, 2), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, bad, ELEMENTSOF(bad));

        struct kfd_event_data ev[2] = { { .event_id = r.done }, { .event_id = r.mem_ev } };
        kfd_event_data_set_age(&ev[0], 2); /* completion age after one signal */
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, ev, 2, false, 5000, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(ev[1].memory_exception_data.gpu_id, 0x697Du, "the MEMORY event fired");
        cr_expect_eq(ev[1].memory_exception_data.va, hole + 0x2000);
        cr_expect_eq(ev[1].memory_exception_data.failure.NotPresent, 1u);
        cr_expect_eq(kfd_event_data_get_age(&ev[0]), 2u, "completion did not fire");
        /* The fetcher had read all of it: rptr does not name the packet. */
        uint64_t fetched = r.q.wptr_value;
        cr_expect_eq(t_rptr(&r.q), fetched, "rptr is where the fetcher stopped, past the faulting packet at 0x%llx",
                     (unsigned long long) fault_at);
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 1u, "nothing after the fault ran");

        /* The queue stays stopped: new work is ignored until DESTROY_QUEUE. */
        uint32_t more[] = { PKT_FENCE(fence.va, 3), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, more, ELEMENTSOF(more));
        cr_expect_eq(t_wait1(&r.c, r.done, 50), KFD_IOC_WAIT_RESULT_TIMEOUT);
        cr_expect_eq(t_rptr(&r.q), fetched, "a stopped queue reads no more");

        /* The fault evicted the process for good (kfd-facts §7.1): a queue
         * created after it starts evicted and never runs. */
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = r.q.queue_id };
        cr_assert_eq(t_ioctl(&r.c, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
        *(uint64_t *) r.q.wptr.cpu = 0;
        *(uint64_t *) r.q.rptr.cpu = 0;
        struct kfd_ioctl_create_queue_args a;
        cr_assert_eq(t_create_sdma_queue_args(&r.c, &r.q, &a), 0, "CREATE_QUEUE itself succeeds");
        r.q.queue_id = a.queue_id;
        r.q.wptr_value = 0;
        uint32_t again[] = { PKT_FENCE(fence.va, 4), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, again, ELEMENTSOF(again));
        cr_expect_eq(t_wait1(&r.c, r.done, 100), KFD_IOC_WAIT_RESULT_TIMEOUT, "the new queue never runs");
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 1u);
        t_close(&r.c, true);
}

/* Fence-first (the default, sim-ih.h): the engine runs on past the faulting
 * copy, which read the dummy page (zeros into its destination); the FENCE
 * after it lands, and the TRAP raised after the fault is handled after it.
 * Then the process is evicted for good. */
Test(sim_sdma, fault_fence_first_runs_on_and_the_event_comes_first) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo buf = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint64_t hole = t_reserve_va(65536);
        memset(buf.cpu, 0xAB, 8192);

        uint32_t bad[] = { PKT_COPY(buf.va, hole + 0x2000, 64), PKT_FENCE(fence.va, 2), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, bad, ELEMENTSOF(bad));
        cr_assert_eq(t_wait1(&r.c, r.done, 5000), KFD_IOC_WAIT_RESULT_COMPLETE, "the TRAP after the fault came");
        struct kfd_event_data ev = { .event_id = r.mem_ev };
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, &ev, 1, false, 0, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "the MEMORY event was set before the TRAP raised after the fault");
        cr_expect_eq(ev.memory_exception_data.va, hole + 0x2000);
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 2u, "the FENCE after the faulting copy landed");
        for (unsigned i = 0; i < 64; i++)
                cr_assert_eq(((uint8_t *) buf.cpu)[i], 0, "byte %u: the dummy page's zero", i);
        cr_expect_eq(((uint8_t *) buf.cpu)[64], 0xAB, "nothing past the copy");

        uint32_t more[] = { PKT_FENCE(fence.va, 3), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, more, ELEMENTSOF(more));
        cr_expect_eq(t_wait1(&r.c, r.done, 50), KFD_IOC_WAIT_RESULT_TIMEOUT, "evicted: nothing more runs");
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 2u);
        t_close(&r.c, true);
}

Test(sim_sdma, fault_past_the_end_of_a_bo) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo buf = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        /* A fill that runs 4 bytes past the BO: the fault is on the page after it. */
        uint32_t bad[] = { PKT_FILL_DW(buf.va + 4096, 0x55, 4100) };
        t_submit(&r.q, bad, ELEMENTSOF(bad));
        struct kfd_event_data ev = { .event_id = r.mem_ev };
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, &ev, 1, false, 5000, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(ev.memory_exception_data.va, buf.va + 8192);
        cr_expect_eq(((uint32_t *) buf.cpu)[1024], 0u, "a faulting packet writes nothing");

        /* An unmapped BO faults too: the engine never touches memory it no longer maps. */
        t_close(&r.c, true);
}

Test(sim_sdma, unmapped_buffer_faults) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo buf = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        cr_assert_eq(t_unmap(&r.c, buf.handle), 0);
        uint32_t pk[] = { PKT_TIMESTAMP(buf.va + 8) };
        t_submit(&r.q, pk, ELEMENTSOF(pk));
        struct kfd_event_data ev = { .event_id = r.mem_ev };
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, &ev, 1, false, 5000, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(ev.memory_exception_data.va, buf.va);
        cr_expect_eq(((uint64_t *) buf.cpu)[1], 0u);
        t_close(&r.c, true);
}

Test(sim_sdma, bad_packet_raises_hw_exception) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t ok[] = { PKT_FENCE(fence.va, 1) };
        rig_submit_and_wait(&r, ok, ELEMENTSOF(ok));
        uint64_t at = r.q.wptr_value;
        uint32_t bad[] = { 0x00000007, 0, 0, 0, PKT_FENCE(fence.va, 2) }; /* SEM: not executable */
        t_submit(&r.q, bad, ELEMENTSOF(bad));
        char text[256];
        cr_assert_eq(t_take_stop_record(&r.c, NULL, text, sizeof text), 0, "the queue did not stop");
        cr_expect_eq(t_wait1(&r.c, r.hw_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "no HW_EXCEPTION (kfd-facts §7.2)");
        cr_expect_eq(t_wait1(&r.c, r.mem_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "not a memory fault");
        char where[64];
        snprintf(where, sizeof where, "(packet at ring byte 0x%llx)", (unsigned long long) at);
        cr_expect(strstr(text, where), "stopped at the bad packet: %s", text);
        cr_expect_eq(t_rptr(&r.q), r.q.wptr_value, "the fetcher read past it");
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 1u, "the packet after it did not run");
        t_close(&r.c, true);
}

Test(sim_sdma, inactive_queue_is_not_scheduled) {
        TestCtx c;
        t_open(&c, NULL);
        TestQueue q = { .ring_size = 4096 };
        q.ring = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q.rptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        q.wptr = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo fence = t_bo(&c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        struct kfd_ioctl_create_queue_args a;
        t_create_sdma_queue_args(&c, &q, &a);
        struct kfd_ioctl_destroy_queue_args d = { .queue_id = a.queue_id };
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
        a.queue_percentage = 0;
        cr_assert_eq(t_ioctl(&c, AMDKFD_IOC_CREATE_QUEUE, &a), 0);
        cr_assert_eq(c.ops->mmap(c.ops->userdata, NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, c.kfd,
                                 a.doorbell_offset & ~0x1FFFull, &q.doorbell_page), 0);
        q.doorbell = (volatile uint64_t *) ((char *) q.doorbell_page + (a.doorbell_offset & 0x1FFF));
        uint32_t pk[] = { PKT_FENCE(fence.va, 9) };
        t_submit(&q, pk, ELEMENTSOF(pk));
        usleep(30000);
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 0u, "queue_percentage 0: inactive");
        t_close(&c, true);
}

typedef struct Stream {
        Rig *r;
        TestBo fence;
        int n;
} Stream;

static void *stream_thread(void *userdata) {
        Stream *s = userdata;
        for (int i = 1; i <= s->n; i++) {
                uint32_t pk[] = { PKT_FENCE(s->fence.va, (uint32_t) i) };
                rig_submit_and_wait(s->r, pk, ELEMENTSOF(pk));
        }
        return NULL;
}

Test(sim_sdma, two_contexts_two_engines) {
        Rig a, b;
        rig_open(&a, NULL, 4096);
        rig_open(&b, a.c.dev, 4096);
        cr_expect_neq(a.q.doorbell_offset & 0x1FFF, b.q.doorbell_offset & 0x1FFF,
                      "queues land on different engines");
        Stream sa = { .r = &a, .fence = t_bo(&a.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT), .n = 200 };
        Stream sb = { .r = &b, .fence = t_bo(&b.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT), .n = 200 };
        pthread_t ta, tb;
        cr_assert_eq(pthread_create(&ta, NULL, stream_thread, &sa), 0);
        cr_assert_eq(pthread_create(&tb, NULL, stream_thread, &sb), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        cr_expect_eq(((uint32_t *) sa.fence.cpu)[0], 200u);
        cr_expect_eq(((uint32_t *) sb.fence.cpu)[0], 200u);

        /* A fault in one context leaves the other running. */
        uint32_t bad[] = { PKT_FENCE(0x10000000ull, 1) };
        t_submit(&a.q, bad, ELEMENTSOF(bad));
        cr_expect_eq(t_wait1(&a.c, a.mem_ev, 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        uint32_t ok[] = { PKT_FENCE(sb.fence.va, 201) };
        rig_submit_and_wait(&b, ok, ELEMENTSOF(ok));
        cr_expect_eq(((uint32_t *) sb.fence.cpu)[0], 201u);
        cr_expect_eq(t_wait1(&b.c, b.mem_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "no fault in the other context");
        t_close(&b.c, false);
        t_close(&a.c, true);
}

Test(sim_sdma, completions_are_reported_while_a_long_copy_runs) {
        /* As on hardware, an engine busy with a long copy does not hold up the
         * completion of a job on another engine: the device lock is held per
         * packet and the copy itself runs without it. A's 64 copies of 4 MiB
         * fill one step of the SDMA engine (up to 64 packets); before, that
         * step held the device lock throughout, so B's engine could neither
         * read its doorbell nor signal until all of A had run. A runs 256 of
         * them (1 GiB, about 100 ms here): with streaming stores 64 took
         * about 22 ms, which a loaded machine could let pass before B's
         * engine thread ran at all. */
        enum { N_COPIES = 256, COPY_BYTES = 4u << 20 };
        Rig a, b;
        rig_open(&a, NULL, 65536);
        rig_open(&b, a.c.dev, 4096);
        cr_assert_neq(a.q.doorbell_offset & 0x1FFF, b.q.doorbell_offset & 0x1FFF, "queues on different engines");
        TestBo src = t_bo(&a.c, COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo dst = t_bo(&a.c, COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo fence = t_bo(&b.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        memset(src.cpu, 0x5A, COPY_BYTES);

        for (int i = 0; i < N_COPIES; i++) {
                uint32_t copy[] = { PKT_COPY(dst.va, src.va, COPY_BYTES) };
                t_submit(&a.q, copy, ELEMENTSOF(copy));
        }
        while (t_rptr(&a.q) == 0)
                usleep(100); /* A's engine is inside its step */

        uint32_t pk[] = { PKT_FENCE(fence.va, 7), PKT_SIGNAL(b.page.va, b.done) };
        t_submit(&b.q, pk, ELEMENTSOF(pk));
        cr_assert_eq(t_wait1(&b.c, b.done, 20000), KFD_IOC_WAIT_RESULT_COMPLETE, "B completes");
        uint64_t a_rptr = t_rptr(&a.q);
        cr_expect_lt(a_rptr, a.q.wptr_value, "B completed while A's copies still ran (A at %llu of %llu bytes of ring)",
                     (unsigned long long) a_rptr, (unsigned long long) a.q.wptr_value);
        cr_expect_eq(((uint32_t *) fence.cpu)[0], 7u);

        uint32_t signal[] = { PKT_SIGNAL(a.page.va, a.done) };
        t_submit(&a.q, signal, ELEMENTSOF(signal));
        cr_assert_eq(t_wait1(&a.c, a.done, 60000), KFD_IOC_WAIT_RESULT_COMPLETE, "A completes");
        cr_expect_eq(((uint8_t *) dst.cpu)[COPY_BYTES - 1], 0x5A);
        t_close(&b.c, false);
        t_close(&a.c, true);
}

Test(sim_sdma, a_waiting_queue_gets_the_engine_inside_a_long_copy) {
        /* The queues of one engine take turns by a quantum, and the switch may
         * fall inside a packet (sim-sdma.c: the hardware's phase quantum and
         * mid-command preemption). C waits (POLL_REGMEM) until A has begun
         * its 4 MiB copy, then reads A's destination at its start and its
         * end. Before, the engine ran A's copy whole before it looked at C
         * again: C saw both ends copied. Now A leaves the engine after a
         * quantum (256 KiB) inside the copy, C runs and sees the start copied
         * and the end not yet, and A's copy then resumes where it stopped.
         * Queues 0 and 2 of a device with two SDMA engines share engine 0
         * (allocate_sdma_queue: engine = slot % engines). */
        enum { COPY_BYTES = 4u << 20 };
        Rig a;
        TestQueue other, c;
        rig_open(&a, NULL, 4096);
        t_sdma_queue(&a.c, &other, 4096);
        t_sdma_queue(&a.c, &c, 4096);
        TestBo src = t_bo(&a.c, COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo dst = t_bo(&a.c, COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo words = t_bo(&a.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint32_t *w = words.cpu; /* [0] A began, [1] [2] what C read, [3] C done */
        memset(src.cpu, 0x5A, COPY_BYTES);

        uint32_t pc[] = { PKT_POLL_GE(words.va, 1), PKT_COPY(words.va + 4, dst.va, 4),
                          PKT_COPY(words.va + 8, dst.va + COPY_BYTES - 4, 4), PKT_FENCE(words.va + 12, 1) };
        t_submit(&c, pc, ELEMENTSOF(pc));
        while (t_rptr(&c) == 0)
                usleep(100); /* C's engine has read its packets: C waits in the POLL_REGMEM */
        uint32_t pa[] = { PKT_FENCE(words.va, 1), PKT_COPY(dst.va, src.va, COPY_BYTES) };
        rig_submit_and_wait(&a, pa, ELEMENTSOF(pa));
        for (int i = 0; i < 5000 && w[3] != 1; i++)
                usleep(1000);
        cr_assert_eq(w[3], 1u, "C completed");
        cr_expect_eq(w[1], 0x5A5A5A5Au, "C ran after A's copy had begun (read 0x%08x at its start)", w[1]);
        cr_expect_eq(w[2], 0u, "C ran inside A's copy, before it reached its end (read 0x%08x there)", w[2]);
        cr_expect_eq(memcmp(dst.cpu, src.cpu, COPY_BYTES), 0, "A's copy resumed where it stopped and completed");
        t_close(&a.c, true);
}

Test(sim_sdma, destroy_and_free_while_a_copy_runs) {
        /* A copy running without the device lock keeps its queue and its BOs:
         * DESTROY_QUEUE waits for the engine to let go of the queue, and
         * UNMAP + FREE of the buffers it copies leave the memory in place until
         * the packet ends (ASan would see a use after free otherwise), and a
         * copy after the FREE faults. The buffers are released as soon as the
         * first copy is done; a POLL_REGMEM on a word the test sets after the
         * FREE holds back one more copy, so there is always one that starts
         * after it (the engine may have finished the 32 by then: how fast it
         * copies is the host's business; it used to make the test fail). */
        enum { N_COPIES = 32, COPY_BYTES = 4u << 20 };
        Rig r;
        rig_open(&r, NULL, 65536);
        TestBo src = t_bo(&r.c, COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        TestBo dst = t_bo(&r.c, COPY_BYTES, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo gate = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t copy[] = { PKT_COPY(dst.va, src.va, COPY_BYTES) }, wait[] = { PKT_POLL_GE(gate.va, 1) };
        for (int i = 0; i < N_COPIES; i++)
                t_submit(&r.q, copy, ELEMENTSOF(copy));
        t_submit(&r.q, wait, ELEMENTSOF(wait));
        t_submit(&r.q, copy, ELEMENTSOF(copy));
        while (t_rptr(&r.q) == 0)
                usleep(100);
        t_bo_release(&r.c, &src);
        t_bo_release(&r.c, &dst);
        uint64_t at = t_rptr(&r.q);
        cr_log_info("FREE done with %llu of %d copies left to start", (unsigned long long) (N_COPIES - at / sizeof copy),
                    N_COPIES);
        __atomic_store_n((uint32_t *) gate.cpu, 1, __ATOMIC_RELEASE);
        /* The first copy after the FREE (one of the 32, or the one behind the
         * gate) faults, its memory gone (the engine runs on past it in
         * fence-first order, sim-ih.h, until the fault is handled). */
        cr_expect_eq(t_wait1(&r.c, r.mem_ev, 20000), KFD_IOC_WAIT_RESULT_COMPLETE, "the copy after the FREE faults");
        t_queue_release(&r.c, &r.q);
        t_close(&r.c, true);
}

Test(sim_sdma, device_free_with_busy_queues) {
        /* sim_device_free() with contexts, queues and a POLL_REGMEM that never
         * completes still open: it closes everything and stops the engines. */
        Rig a, b;
        rig_open(&a, NULL, 4096);
        rig_open(&b, a.c.dev, 4096);
        TestBo mem = t_bo(&a.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t pk[] = { PKT_POLL_GE(mem.va, 1) };
        t_submit(&a.q, pk, ELEMENTSOF(pk));
        t_submit(&b.q, pk, 0);
        usleep(5000);
        sim_device_free(a.c.dev);
}

Test(sim_sdma, trap_context_lookup) {
        /* kfd_signal_event_interrupt: the context id finds the event only if its
         * slot was written; a bogus id falls back to scanning signaled slots. */
        Rig r;
        rig_open(&r, NULL, 4096);
        uint32_t other = t_event(&r.c, KFD_IOC_EVENT_SIGNAL, true, 0);

        uint32_t no_slot[] = { PKT_TRAP(other) };
        t_submit(&r.q, no_slot, ELEMENTSOF(no_slot));
        cr_expect_eq(t_wait1(&r.c, other, 50), KFD_IOC_WAIT_RESULT_TIMEOUT, "slot still ~0: no event");

        uint32_t bogus[] = { PKT_FENCE(r.page.va + 8ull * other, other), PKT_TRAP(0x0ABCDEF) };
        t_submit(&r.q, bogus, ELEMENTSOF(bogus));
        cr_expect_eq(t_wait1(&r.c, other, 5000), KFD_IOC_WAIT_RESULT_COMPLETE, "found by the exhaustive search");
        cr_expect_eq(t_wait1(&r.c, r.done, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "only the written slot fires");

        /* Burst NOP, GCR_REQ and a register poll (HDP flush style) are accepted. */
        uint32_t misc[] = { 2u << 16, 0xDEAD, 0xBEEF, 0x00000011, 0, 0, 0, 0,
                            0x34000008, 0x1000, 0x2000, 0, 0, 0x0FFF0004 };
        rig_submit_and_wait(&r, misc, ELEMENTSOF(misc));
        t_close(&r.c, true);
}

/* ATOMIC as navi10_sdma_pkt_open.h lays it out (written here by hand, not by
 * the daemon's builder): ATOMIC_OP [31:25], LOOP 16; ADDR, SRC, CMP; LOOP_INTERVAL. */
#define PKT_ATOMIC(op, loop, addr, src, cmp)                                                               \
        (0x0000000Au | ((uint32_t) (op) << 25) | ((uint32_t) (loop) << 16)), LO(addr), HI(addr), LO(src), \
                HI(src), LO(cmp), HI(cmp), 0u

/* What ROCr's BlitSdma sends after a copy to decrement the completion signal
 * (amd_blit_sdma.cpp BuildAtomicDecrementCommand: SDMA_ATOMIC_ADD64 = 47,
 * SRC_DATA = -1), and the other 64-bit ops on the same word. */
Test(sim_sdma, atomic_decrements_a_signal) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo sig = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint64_t *v = sig.cpu;
        v[1] = 0x100000001ull; /* a carry across the halves */
        v[2] = 7;
        v[3] = 7;
        v[4] = 9;
        uint32_t pk[] = { PKT_ATOMIC(47, 0, sig.va + 8, ~0ull, 0),           /* ADD_RTN_64 -1 */
                          PKT_ATOMIC(0x30, 0, sig.va + 16, 2, 0),            /* SUB_RTN_64 */
                          PKT_ATOMIC(0x28, 0, sig.va + 24, 0xAB, 7),         /* CMPSWAP_RTN_64, compare holds */
                          PKT_ATOMIC(0x68, 0, sig.va + 32, 0xCD, 8),         /* CMPSWAP_64, compare fails */
                          PKT_ATOMIC(0x78, 0, sig.va + 40, 3, 0),            /* INC_64 wraps at 3 */
                          PKT_ATOMIC(0x0F, 0, sig.va + 48, 0xFFFFFFFFu, 0) }; /* ADD_RTN_32 */
        v[5] = 3;
        v[6] = 0x500000001ull;
        rig_submit_and_wait(&r, pk, ELEMENTSOF(pk));
        cr_expect_eq(v[1], 0x100000000ull, "ADD -1 on 64 bits borrows across the dwords");
        cr_expect_eq(v[2], 5u);
        cr_expect_eq(v[3], 0xABu, "compare-swap swapped");
        cr_expect_eq(v[4], 9u, "a failed compare leaves memory alone");
        cr_expect_eq(v[5], 0u, "INC: old >= src gives 0");
        cr_expect_eq(v[6], 0x500000000ull, "a 32-bit op touches only its dword");
        t_close(&r.c, true);
}

/* LOOP compare-swap retries until the CPU makes the compare hold. */
Test(sim_sdma, atomic_loop_waits_for_the_compare) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo m = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        volatile uint64_t *w = m.cpu;
        *w = 1;
        uint32_t pk[] = { PKT_ATOMIC(0x28, 1, m.va, 42, 2), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, pk, ELEMENTSOF(pk));
        cr_expect_eq(t_wait1(&r.c, r.done, 50), KFD_IOC_WAIT_RESULT_TIMEOUT, "1 != 2: still looping");
        __atomic_store_n(w, 2, __ATOMIC_RELEASE);
        cr_expect_eq(t_wait1(&r.c, r.done, 5000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(*w, 42u);
        t_close(&r.c, true);
}

static void expect_sdma_stop(Rig *r, TestBo *fence, const uint32_t *pk, size_t n, const char *reason) {
        char text[256];
        t_submit(&r->q, pk, n);
        cr_assert_eq(t_take_stop_record(&r->c, NULL, text, sizeof text), 0, "the queue did not stop (%s)", reason);
        cr_expect(strstr(text, reason), "stop record names it: %s", text);
        cr_expect_eq(((uint32_t *) fence->cpu)[0], 0u, "the packet after it did not run");
}

Test(sim_sdma, atomic_bad_packets_stop_the_queue) {
        static const struct {
                uint32_t op, loop, off;
                const char *reason;
        } cases[] = {
                { 47, 0, 4, "not aligned" },            /* 64-bit op on a dword boundary */
                { 0x21, 0, 0, "not an integer" },       /* FCMPSWAP_RTN_64 */
                { 0x20, 0, 0, "not an integer" },       /* TC_OP_WRITE */
                { 0x2C, 0, 0, "not an integer" },       /* WBINVL2_SD: a cache op */
                { 47, 1, 0, "LOOP" },                   /* LOOP on an add */
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Rig r;
                rig_open(&r, NULL, 4096);
                TestBo m = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                ((uint64_t *) m.cpu)[0] = 5;
                uint32_t pk[] = { PKT_ATOMIC(cases[i].op, cases[i].loop, m.va + cases[i].off, ~0ull, 0),
                                  PKT_FENCE(fence.va, 1) };
                expect_sdma_stop(&r, &fence, pk, ELEMENTSOF(pk), cases[i].reason);
                cr_expect_eq(((uint64_t *) m.cpu)[0], 5u, "case %zu: memory untouched", i);
                cr_expect_eq(t_wait1(&r.c, r.mem_ev, 0), KFD_IOC_WAIT_RESULT_TIMEOUT, "not a memory fault");
                t_close(&r.c, true);
        }
        /* Reserved header bits (17) and TMZ (18). */
        for (unsigned bit = 17; bit <= 18; bit++) {
                Rig r;
                rig_open(&r, NULL, 4096);
                TestBo m = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                uint32_t pk[] = { PKT_ATOMIC(47, 0, m.va, ~0ull, 0), PKT_FENCE(fence.va, 1) };
                pk[0] |= 1u << bit;
                expect_sdma_stop(&r, &fence, pk, ELEMENTSOF(pk), bit == 17 ? "reserved" : "TMZ");
                t_close(&r.c, true);
        }
}

Test(sim_sdma, atomic_outside_the_vm_faults) {
        Rig r;
        rig_open(&r, NULL, 4096);
        uint64_t hole = t_reserve_va(65536);
        uint32_t pk[] = { PKT_ATOMIC(47, 0, hole + 0x1008, ~0ull, 0) };
        t_submit(&r.q, pk, ELEMENTSOF(pk));
        struct kfd_event_data ev = { .event_id = r.mem_ev };
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, &ev, 1, false, 5000, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE, "a VM fault, not success");
        cr_expect_eq(ev.memory_exception_data.va, hole + 0x1000);
        t_close(&r.c, true);
}

/* COPY_LINEAR_RECT, written by hand from the navi10 sub-window layout:
 * pitches and sizes in elements minus one. */
typedef struct RectSide {
        uint64_t base;
        uint32_t x, y, z, pitch, slice; /* pitch/slice in bytes */
} RectSide;

static void pkt_rect(uint32_t dw[13], const RectSide *dst, const RectSide *src, unsigned element, uint32_t x,
                     uint32_t y, uint32_t z) {
        const RectSide *sides[2] = { src, dst };
        dw[0] = 0x00000401u | element << 29;
        for (int i = 0; i < 2; i++) {
                const RectSide *s = sides[i];
                uint32_t *o = dw + 1 + 5 * i;
                o[0] = LO(s->base);
                o[1] = HI(s->base);
                o[2] = s->x | s->y << 16;
                o[3] = s->z | ((s->pitch >> element) - 1) << 13;
                o[4] = s->slice ? (s->slice >> element) - 1 : 0;
        }
        dw[11] = (x - 1) | (y - 1) << 16;
        dw[12] = z - 1;
}

/* The CPU reference: the same rectangle byte by byte. */
static void cpu_rect(uint8_t *dst_base, const RectSide *dst, const uint8_t *src_base, const RectSide *src,
                     unsigned element, uint32_t x, uint32_t y, uint32_t z) {
        size_t e = 1u << element;
        for (uint32_t k = 0; k < z; k++)
                for (uint32_t j = 0; j < y; j++)
                        for (size_t b = 0; b < x * e; b++)
                                dst_base[(dst->x * e) + (dst->y + j) * (size_t) dst->pitch +
                                         (dst->z + k) * (size_t) dst->slice + b] =
                                        src_base[(src->x * e) + (src->y + j) * (size_t) src->pitch +
                                                 (src->z + k) * (size_t) src->slice + b];
}

static void run_rect(unsigned element, RectSide src, RectSide dst, uint32_t x, uint32_t y, uint32_t z) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo s = t_bo(&r.c, 1u << 20, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo d = t_bo(&r.c, 1u << 20, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        uint8_t *ref = calloc(1, d.size);
        cr_assert(ref);
        for (size_t i = 0; i < s.size; i++)
                ((uint8_t *) s.cpu)[i] = (uint8_t) (i * 13 + (i >> 8) * 7 + 1);
        memset(d.cpu, 0, d.size);
        src.base += s.va;
        dst.base += d.va;
        uint32_t pk[13];
        pkt_rect(pk, &dst, &src, element, x, y, z);
        rig_submit_and_wait(&r, pk, ELEMENTSOF(pk));
        RectSide rs = src, rd = dst;
        rs.base -= s.va;
        rd.base -= d.va;
        cpu_rect(ref + rd.base, &rd, (uint8_t *) s.cpu + rs.base, &rs, element, x, y, z);
        /* VRAM is seen through the GL2 by the GPU; a RELEASE-style write-back is
         * what makes it visible to the CPU (sim-cache.h): the SIGNAL's FENCE
         * does not, so read it the way the engines see it after a GCR. */
        uint32_t wb[] = { 0x00000111u, 0, 0, 0, 0 }; /* GCR_REQ user, GCR_CONTROL set below */
        wb[2] = (1u << 15) << 16; /* GL2_WB */
        rig_submit_and_wait(&r, wb, ELEMENTSOF(wb));
        size_t bad = 0;
        for (size_t i = 0; i < d.size; i++)
                if (((uint8_t *) d.cpu)[i] != ref[i] && bad++ < 5)
                        cr_expect_eq(((uint8_t *) d.cpu)[i], ref[i], "byte %zu", i);
        cr_expect_eq(bad, 0u, "%zu bytes differ from the CPU reference", bad);
        free(ref);
        t_close(&r.c, true);
}

Test(sim_sdma, copy_linear_rect_2d) {
        /* 1-byte elements, a 37 x 21 window from (3, 5) of a 256-byte pitch to
         * (10, 2) of a 100-byte pitch, slice pitch 0 as ROCr sends for z == 1. */
        run_rect(0, (RectSide) { .base = 0x100, .x = 3, .y = 5, .pitch = 256 },
                 (RectSide) { .base = 0x40, .x = 10, .y = 2, .pitch = 100 }, 37, 21, 1);
        /* 12000 rows of 4 bytes: more rows than the engine runs without
         * letting go of the device lock (sim-sdma.c RECT_YIELD_ROWS). */
        run_rect(0, (RectSide) { .pitch = 8 }, (RectSide) { .base = 4, .pitch = 12 }, 4, 12000, 1);
        /* 16-byte elements (ELEMENT 4). */
        run_rect(4, (RectSide) { .x = 1, .y = 0, .pitch = 1024 },
                 (RectSide) { .base = 0x1000, .x = 2, .y = 3, .pitch = 512 }, 20, 9, 1);
}

Test(sim_sdma, copy_linear_rect_3d) {
        /* 4-byte elements, 12 x 7 x 5 from (1, 2, 1) of 64 x 16-row slices to
         * (0, 1, 2) of a 96-byte pitch, 1536-byte slice layout. */
        run_rect(2, (RectSide) { .base = 0x80, .x = 1, .y = 2, .z = 1, .pitch = 64, .slice = 64 * 16 },
                 (RectSide) { .base = 0x200, .y = 1, .z = 2, .pitch = 96, .slice = 1536 }, 12, 7, 5);
}

Test(sim_sdma, copy_linear_rect_bad_packets) {
        static const struct {
                unsigned element;
                uint32_t src_pitch, dst_off, x;
                uint32_t or_dw0, or_dw12;
                const char *reason;
        } cases[] = {
                { 5, 64, 0, 1, 0, 0, "ELEMENT above 4" },
                { 0, 62, 0, 4, 0, 0, "pitch not a multiple of 4" },
                { 0, 64, 2, 4, 0, 0, "not dword aligned" },
                { 0, 64, 0, 65, 0, 0, "runs past its pitch" },
                { 0, 64, 0, 4, 1u << 16, 0, "reserved header" },
                { 0, 64, 0, 4, 0, 1u << 16, "swapping" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                Rig r;
                rig_open(&r, NULL, 4096);
                TestBo m = t_bo(&r.c, 65536, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
                uint32_t pk[13 + 4];
                RectSide s = { .base = m.va, .pitch = cases[i].src_pitch };
                RectSide d = { .base = m.va + 32768 + cases[i].dst_off, .pitch = 64 };
                pkt_rect(pk, &d, &s, cases[i].element > 4 ? 0 : cases[i].element, cases[i].x, 2, 1);
                if (cases[i].element > 4)
                        pk[0] |= (uint32_t) cases[i].element << 29;
                pk[0] |= cases[i].or_dw0;
                pk[12] |= cases[i].or_dw12;
                uint32_t fp[] = { PKT_FENCE(fence.va, 1) };
                memcpy(pk + 13, fp, sizeof fp);
                memset((uint8_t *) m.cpu + 32768, 0, 4096);
                expect_sdma_stop(&r, &fence, pk, ELEMENTSOF(pk), cases[i].reason);
                cr_expect_eq(((uint8_t *) m.cpu)[32768 + 4], 0u, "case %zu: nothing copied", i);
                t_close(&r.c, true);
        }
        /* A rectangle whose last row leaves the BO: a VM fault there; the rows
         * before it were written, the faulting one was not. */
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo m = t_bo(&r.c, 8192, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        uint32_t pk[13];
        RectSide s = { .base = m.va, .pitch = 1024 };
        RectSide d = { .base = m.va + 4096, .pitch = 1024 };
        pkt_rect(pk, &d, &s, 0, 16, 5, 1); /* row 4 of dst starts at 8192: past the BO */
        for (size_t i = 0; i < 4096; i++)
                ((uint8_t *) m.cpu)[i] = (uint8_t) (i + 1);
        t_submit(&r.q, pk, ELEMENTSOF(pk));
        struct kfd_event_data ev = { .event_id = r.mem_ev };
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, &ev, 1, false, 5000, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(ev.memory_exception_data.va, m.va + 8192);
        cr_expect_eq(((uint8_t *) m.cpu)[4096 + 3 * 1024 + 15], 16u, "rows before the fault were copied");
        cr_expect_eq(((uint8_t *) m.cpu)[4096 + 3 * 1024 + 16], 0u, "and only the rectangle");
        t_close(&r.c, true);
}

/* A BO allocated without WRITABLE is mapped readable only
 * (amdgpu_amdkfd_gpuvm.c get_pte_flags): an engine reads it, and a write to
 * it is a protection fault reported as such (kfd_signal_vm_fault_event:
 * ReadOnly, not NotPresent) — what keeps a client's kernel from forging the
 * daemon's rings in the VM they share (gpu-internal.h). */
Test(sim_sdma, a_write_to_a_read_only_mapping_is_a_protection_fault) {
        Rig r;
        SimDevice *dev;
        SimOptions o = { .fault_order = SIM_FAULT_ORDER_EVENT_FIRST };
        cr_assert_eq(sim_device_new(&o, &dev), 0);
        rig_open(&r, dev, 4096);
        TestBo dst = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo fence = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo ro = {};
        uint64_t va = t_reserve_va(4096);
        void *addr = NULL;

        cr_assert_eq(t_alloc_raw(&r.c, va, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC, &ro), 0);
        cr_assert_eq(t_map(&r.c, ro.handle), 0);
        cr_assert_eq(r.c.ops->mmap(r.c.ops->userdata, (void *) (uintptr_t) va, 4096, PROT_READ | PROT_WRITE,
                                   MAP_SHARED | MAP_FIXED, r.c.render, ro.mmap_offset, &addr), 0);
        ((uint32_t *) addr)[0] = 0xC0FFEEu; /* the CPU mapping is writable */

        uint32_t read[] = { PKT_COPY(dst.va, va, 4), PKT_FENCE(fence.va, 1) };
        rig_submit_and_wait(&r, read, ELEMENTSOF(read));
        cr_expect_eq(((uint32_t *) dst.cpu)[0], 0xC0FFEEu, "the engine reads it");

        uint32_t bad[] = { PKT_FENCE(va + 8, 7), PKT_SIGNAL(r.page.va, r.done) };
        t_submit(&r.q, bad, ELEMENTSOF(bad));
        struct kfd_event_data ev[2] = { { .event_id = r.done }, { .event_id = r.mem_ev } };
        kfd_event_data_set_age(&ev[0], 2);
        uint32_t res;
        cr_assert_eq(t_wait(&r.c, ev, 2, false, 5000, &res), 0);
        cr_expect_eq(res, KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(ev[1].memory_exception_data.va, va);
        cr_expect_eq(ev[1].memory_exception_data.failure.ReadOnly, 1u, "a write to a read-only page");
        cr_expect_eq(ev[1].memory_exception_data.failure.NotPresent, 0u, "the page is there");
        cr_expect_eq(((uint32_t *) addr)[2], 0u, "nothing was written");
        t_close(&r.c, true);
}

/* The GL2 writes back the bytes the GPU changed, only those: what the host
 * wrote to the other bytes of the same words while the GPU's writes sat in
 * the GL2 stays (sim-cache.c page_write_back), whole words and single bytes
 * alike. */
Test(sim_sdma, gl2_write_back_keeps_the_bytes_the_gpu_did_not_change) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo s = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo d = t_bo(&r.c, 4096, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        uint8_t *src = s.cpu, *dst = d.cpu;

        memset(dst, 0, 4096);
        /* Bytes 0..7 all change; of 8..15 only byte 8; 16..23 none. */
        memset(src, 0, 64);
        for (int i = 0; i < 8; i++)
                src[i] = (uint8_t) (0x11 * (i + 1));
        src[8] = 0xAB;
        uint32_t copy[] = { PKT_COPY(d.va, s.va, 64) };
        rig_submit_and_wait(&r, copy, ELEMENTSOF(copy));
        /* The host writes while the GPU's bytes are in the GL2. */
        dst[9] = 0x5A;
        dst[20] = 0x77;
        uint32_t wb[] = { 0x00000111u, 0, (1u << 15) << 16, 0, 0 }; /* GCR: GL2_WB */
        rig_submit_and_wait(&r, wb, ELEMENTSOF(wb));
        for (int i = 0; i < 8; i++)
                cr_expect_eq(dst[i], (uint8_t) (0x11 * (i + 1)), "byte %d: the GPU's word", i);
        cr_expect_eq(dst[8], 0xAB, "the one byte the GPU changed in its word");
        cr_expect_eq(dst[9], 0x5A, "the host's byte beside it stays");
        cr_expect_eq(dst[20], 0x77, "the host's byte in a word the GPU left alone stays");
        t_close(&r.c, true);
}

/* A copy that writes whole pages (sim_cache_view_overwrite) sends every byte
 * of them at the write-back — the host's write into such a page meanwhile
 * is overwritten, as the GL2's full byte mask would — while the bytes of a
 * page it covers in part, outside the copy, stay the host's. */
Test(sim_sdma, a_copy_over_whole_pages_writes_all_of_them_back) {
        Rig r;
        rig_open(&r, NULL, 4096);
        TestBo s = t_bo(&r.c, 3 * 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT);
        TestBo d = t_bo(&r.c, 3 * 4096, KFD_IOC_ALLOC_MEM_FLAGS_VRAM);
        uint8_t *src = s.cpu, *dst = d.cpu;

        for (size_t i = 0; i < 3 * 4096; i++)
                src[i] = (uint8_t) (i * 7 + 3);
        memset(dst, 0xEE, 3 * 4096);
        /* Page 1 whole, and the first 100 bytes of page 2. */
        uint32_t copy[] = { PKT_COPY(d.va + 4096, s.va + 4096, 4096 + 100) };
        rig_submit_and_wait(&r, copy, ELEMENTSOF(copy));
        dst[4096 + 50] = 0x42;     /* inside the whole page */
        dst[2 * 4096 + 200] = 0x43; /* in page 2, past the copy */
        uint32_t wb[] = { 0x00000111u, 0, (1u << 15) << 16, 0, 0 }; /* GCR: GL2_WB */
        rig_submit_and_wait(&r, wb, ELEMENTSOF(wb));
        size_t bad = 0;
        for (size_t i = 4096; i < 2 * 4096 + 100; i++)
                bad += dst[i] != src[i];
        cr_expect_eq(bad, 0u, "%zu bytes of the copy did not reach memory", bad);
        cr_expect_eq(dst[2 * 4096 + 200], 0x43, "the host's byte past the copy stays");
        cr_expect_eq(dst[0], 0xEE, "the page before is untouched");
        t_close(&r.c, true);
}
