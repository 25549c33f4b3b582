/* SPDX-License-Identifier: MIT */
/*
 * The relay of AQL queues (daemon/sessions/kfd-relay-queue.c, docs/rocm.md),
 * without ROCr: a client made of the KFD calls ROCr makes lays out an AQL
 * ring, an amd_queue_t and amd_signal_t's in its own buffers, writes HSA
 * packets and moves write_dispatch_id, as ROCr does, and the daemon must run
 * them as the CP would — the kernel's result, the completion signal
 * decremented, its event raised, read_dispatch_id advanced, the timestamps —
 * and refuse what the CP would (a kernel object outside the client's memory,
 * a PM4 indirect buffer with more than cache maintenance) with the queue
 * error ROCr reads from queue_inactive_signal. Also: a barrier-AND waits for
 * its dependency, and nothing of the daemon's own in the process (its buffer
 * handles, events, queue ids, mappings, address window) is the client's to
 * name. Run with secondary contexts and with worker processes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "code-image.h"
#include "compute-util.h"
#include "gpu/pm4.h"
#include "gpu/sdma.h"
#include "kfd/kfd-uapi.h"
#include "relay-util.h"
#include "sim/sim-remote.h"

TestSuite(kfd_relay_queue, .fini = relay_teardown, .timeout = 300);

/* amd_queue_t and amd_signal_t offsets (ROCr amd_hsa_queue.h, amd_hsa_signal.h). */
#define Q_WRITE_DISPATCH_ID 0x38
#define Q_READ_DISPATCH_ID 0x80
#define Q_INACTIVE_SIGNAL 0xC0
#define S_VALUE 8
#define S_MAILBOX 16
#define S_EVENT_ID 24
#define S_START_TS 32
#define S_END_TS 40

/* A buffer of the client: its GPU address and the test's view of it. */
typedef struct Buf {
        uint64_t va, handle, size;
        uint8_t *cpu;
} Buf;

static Buf buf_new(Relayed *c, uint64_t va, uint64_t size) {
        struct kfd_ioctl_alloc_memory_of_gpu_args a = {
                .va_addr = va, .size = size, .gpu_id = c->gpu_id,
                .flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
                         KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE | KFD_IOC_ALLOC_MEM_FLAGS_COHERENT,
        };
        Buf b = { .va = va, .size = size };
        void *m = NULL;

        cr_assert_eq(kioctl(c, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), 0);
        b.handle = a.handle;
        cr_assert_eq(map(c, b.handle), 0);
        cr_assert_eq(c->ops->mmap(c->ops->userdata, NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, c->render,
                                  a.mmap_offset, &m),
                     0);
        b.cpu = m;
        return b;
}

static void put64(Buf *b, uint64_t off, uint64_t v) {
        __atomic_store_n((uint64_t *) (b->cpu + off), v, __ATOMIC_RELEASE);
}

static uint64_t get64(const Buf *b, uint64_t off) {
        return __atomic_load_n((const uint64_t *) (b->cpu + off), __ATOMIC_ACQUIRE);
}

/* A word the GPU writes after the interrupt that woke the test (the read
 * index comes last of a completion): what it holds within 2 s. */
static uint64_t get64_when(const Buf *b, uint64_t off, uint64_t want) {
        for (int i = 0; i < 400 && get64(b, off) != want; i++)
                usleep(5000);
        return get64(b, off);
}

static uint32_t make_event(Relayed *c, const Buf *page, uint32_t *ret_slot) {
        struct kfd_ioctl_create_event_args e = { .event_page_offset = page->handle,
                                                 .event_type = KFD_IOC_EVENT_SIGNAL };

        cr_assert_eq(kioctl(c, AMDKFD_IOC_CREATE_EVENT, &e), 0);
        *ret_slot = e.event_slot_index;
        return e.event_id;
}

/* An interrupt signal as ROCr makes one: value, and its event's mailbox. */
static void signal_init(Buf *sigs, uint64_t off, uint64_t value, const Buf *page, uint32_t event_id, uint32_t slot) {
        memset(sigs->cpu + off, 0, 64);
        put64(sigs, off, 1); /* AMD_SIGNAL_KIND_USER */
        put64(sigs, off + S_VALUE, value);
        put64(sigs, off + S_MAILBOX, page->va + 8ull * slot);
        memcpy(sigs->cpu + off + S_EVENT_ID, &event_id, 4);
}

static int wait_event(Relayed *c, uint32_t event_id, uint32_t timeout_ms) {
        struct kfd_event_data ev = { .event_id = event_id };
        struct kfd_ioctl_wait_events_args w = { .events_ptr = (uintptr_t) &ev, .num_events = 1,
                                                .wait_for_all = 1, .timeout = timeout_ms };
        int r = kioctl(c, AMDKFD_IOC_WAIT_EVENTS, &w);

        return r < 0 ? r : (int) w.wait_result;
}

/* The client's queue: ring, amd_queue_t, and the relay's answer. */
typedef struct Aql {
        Buf ring, q;
        uint32_t id;
        uint64_t write;
} Aql;

static int aql_create(Relayed *c, Aql *a, uint64_t va) {
        a->ring = buf_new(c, va, 4096);
        a->q = buf_new(c, va + 0x10000, 4096);
        memset(a->ring.cpu, 0, 4096);
        for (unsigned i = 0; i < 64; i++)
                a->ring.cpu[i * 64] = 1; /* HSA_PACKET_TYPE_INVALID */
        struct kfd_ioctl_create_queue_args q = {
                .ring_base_address = a->ring.va, .ring_size = 4096, .gpu_id = c->gpu_id,
                .queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, .queue_percentage = 100, .queue_priority = 7,
                .write_pointer_address = a->q.va + Q_WRITE_DISPATCH_ID,
                .read_pointer_address = a->q.va + Q_READ_DISPATCH_ID,
        };
        int r = kioctl(c, AMDKFD_IOC_CREATE_QUEUE, &q);
        if (r == 0) {
                a->id = q.queue_id;
                cr_expect_eq(q.doorbell_offset & KFD_MMAP_TYPE_MASK, KFD_MMAP_TYPE_DOORBELL,
                             "a doorbell offset of the kernel's form");
        }
        return r;
}

/* Writes a packet (header last, as ROCr does), moves write_dispatch_id and
 * rings the doorbell the relay gave (a page nobody else sees). */
static void aql_submit(Relayed *c, Aql *a, const uint8_t pkt[64]) {
        uint8_t *slot = a->ring.cpu + (a->write % 64) * 64;
        uint16_t header;

        memcpy(slot + 2, pkt + 2, 62);
        memcpy(&header, pkt, 2);
        __atomic_store_n((uint16_t *) slot, header, __ATOMIC_RELEASE);
        a->write++;
        put64(&a->q, Q_WRITE_DISPATCH_ID, a->write);
        /* Any call of the process is a nudge too. */
        struct kfd_ioctl_get_version_args v = {};
        (void) kioctl(c, AMDKFD_IOC_GET_VERSION, &v);
}

static void put_u16(uint8_t *p, uint16_t v) {
        memcpy(p, &v, 2);
}
static void put_u32(uint8_t *p, uint32_t v) {
        memcpy(p, &v, 4);
}
static void put_u64(uint8_t *p, uint64_t v) {
        memcpy(p, &v, 8);
}

/* HSA header: type, barrier bit, system-scope acquire and release. */
static uint16_t header(unsigned type) {
        return (uint16_t) (type | 1u << 8 | 2u << 9 | 2u << 11);
}

typedef struct Setup {
        Relayed c;
        Aql aql;
        Buf code, sigs, args, data, page;
        uint64_t kd_va;
        uint32_t ev, slot, ev_inactive, slot_inactive;
} Setup;

/* The process's buffers and queue, on the daemon already started. */
static void setup_buffers(Setup *s) {
        CodeImage img;
        char path[512];

        snprintf(path, sizeof path, "%s/vector-add.hsaco", COMPUTE_KERNEL_DIR);
        cr_assert_eq(code_image_read(path, "vector_add", &img), 0, "%s", path);
        s->code = buf_new(&s->c, 0x10000000, (img.size + 4095) & ~4095ull);
        memcpy(s->code.cpu, img.bytes, img.size);
        s->kd_va = s->code.va + img.kd_off;
        code_image_free(&img);
        s->sigs = buf_new(&s->c, 0x11000000, 4096);
        s->args = buf_new(&s->c, 0x12000000, 4096);
        s->data = buf_new(&s->c, 0x13000000, 3 * 4096);
        s->page = buf_new(&s->c, 0x14000000, 8 * 4096);
        cr_assert_eq(aql_create(&s->c, &s->aql, 0x15000000), 0);
        s->ev = make_event(&s->c, &s->page, &s->slot);
        s->ev_inactive = make_event(&s->c, &s->page, &s->slot_inactive);
        /* queue_inactive_signal: the signal at 0x800 of sigs. */
        signal_init(&s->sigs, 0x800, 0, &s->page, s->ev_inactive, s->slot_inactive);
        put64(&s->aql.q, Q_INACTIVE_SIGNAL, s->sigs.va + 0x800);
}

static void setup(Setup *s) {
        test_daemon_start(&d, NULL);
        relayed_open(&s->c, 0);
        acquire(&s->c);
        setup_buffers(s);
}

/* A kernel dispatch of vector_add over n floats of data (a, b, c in its three pages). */
static void dispatch_packet(Setup *s, uint8_t pkt[64], uint64_t kernel_object, uint32_t n, uint64_t signal) {
        memset(pkt, 0, 64);
        put_u16(pkt, header(2));
        put_u16(pkt + 2, 1); /* one dimension */
        put_u16(pkt + 4, 64);
        put_u16(pkt + 6, 1);
        put_u16(pkt + 8, 1);
        put_u32(pkt + 12, n);
        put_u32(pkt + 16, 1);
        put_u32(pkt + 20, 1);
        put_u64(pkt + 32, kernel_object);
        put_u64(pkt + 40, s->args.va);
        put_u64(pkt + 56, signal);
        memset(s->args.cpu, 0, 4096);
        put_u64(s->args.cpu, s->data.va);
        put_u64(s->args.cpu + 8, s->data.va + 4096);
        put_u64(s->args.cpu + 16, s->data.va + 8192);
        put_u32(s->args.cpu + 24, n);
}

Test(kfd_relay_queue, a_kernel_dispatch_runs_and_completes_as_the_cp_does) {
        Setup s = {};
        uint8_t pkt[64];
        float *a, *b, *c;
        kfdb_usage u;
        int bad = 0;

        setup(&s);
        a = (float *) s.data.cpu;
        b = a + 1024;
        c = b + 1024;
        for (int i = 0; i < 1024; i++) {
                a[i] = (float) i;
                b[i] = 0.5f * (float) i;
                c[i] = -1;
        }
        signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
        dispatch_packet(&s, pkt, s.kd_va, 1000, s.sigs.va);
        aql_submit(&s.c, &s.aql, pkt);
        cr_assert_eq(wait_event(&s.c, s.ev, 20000), KFD_IOC_WAIT_RESULT_COMPLETE, "the completion signal's event");
        cr_expect_eq(get64(&s.sigs, S_VALUE), 0, "the completion signal decremented");
        cr_expect_eq(get64_when(&s.aql.q, Q_READ_DISPATCH_ID, 1), 1, "read_dispatch_id advanced");
        uint32_t mailbox;
        memcpy(&mailbox, s.page.cpu + 8ull * s.slot, 4);
        cr_expect_eq(mailbox, s.ev, "the event id in the mailbox");
        cr_expect(get64(&s.sigs, S_START_TS) > 0 && get64(&s.sigs, S_END_TS) >= get64(&s.sigs, S_START_TS),
                  "timestamps %lu .. %lu", (unsigned long) get64(&s.sigs, S_START_TS),
                  (unsigned long) get64(&s.sigs, S_END_TS));
        for (int i = 0; i < 1024; i++)
                bad += c[i] != (i < 1000 ? 1.5f * (float) i : -1.0f);
        cr_expect_eq(bad, 0, "vector_add's result");
        /* The packet was a job of the session: accounted as its others. */
        /* The daemon learns of the job's end after the client does. */
        for (int i = 0; i < 400; i++) {
                cr_assert_eq(kfdb_query(s.c.s, &u), 0);
                if (u.jobs_completed >= 1)
                        break;
                usleep(5000);
        }
        cr_expect_geq(u.jobs_completed, 1);
        cr_expect_eq(u.jobs_failed, 0);
        relayed_close(&s.c);
}

Test(kfd_relay_queue, a_packet_outside_the_clients_memory_is_a_queue_error) {
        Setup s = {};
        uint8_t pkt[64];
        char *log;

        setup(&s);
        signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
        dispatch_packet(&s, pkt, 0x7770000000ull, 64, s.sigs.va);
        aql_submit(&s.c, &s.aql, pkt);
        cr_assert_eq(wait_event(&s.c, s.ev_inactive, 20000), KFD_IOC_WAIT_RESULT_COMPLETE,
                     "queue_inactive_signal's event");
        cr_expect_eq(get64(&s.sigs, 0x800 + S_VALUE), 32, "error 32: an invalid packet (as ROCr reads it)");
        cr_expect_eq(get64(&s.sigs, S_VALUE), 1, "its completion signal untouched");
        cr_expect_eq(get64(&s.aql.q, Q_READ_DISPATCH_ID), 0);
        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "relayed AQL queue 0 stopped at packet 0: its kernel_object is not a kernel descriptor "
                              "in the process's memory"),
                  "%s", log);
        free(log);
        relayed_close(&s.c);
}

Test(kfd_relay_queue, a_barrier_and_waits_for_its_dependency) {
        Setup s = {};
        uint8_t pkt[64] = {};

        setup(&s);
        signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
        signal_init(&s.sigs, 0x100, 1, &s.page, s.ev, s.slot); /* the dependency */
        put_u16(pkt, header(3));
        put_u64(pkt + 8, s.sigs.va + 0x100);
        put_u64(pkt + 56, s.sigs.va);
        aql_submit(&s.c, &s.aql, pkt);
        /* However long it is given, it must not complete. */
        cr_expect_eq(wait_event(&s.c, s.ev, 300), KFD_IOC_WAIT_RESULT_TIMEOUT);
        cr_expect_eq(get64(&s.sigs, S_VALUE), 1, "not completed while its dependency is 1");
        cr_expect_eq(get64(&s.aql.q, Q_READ_DISPATCH_ID), 0);
        put64(&s.sigs, 0x100 + S_VALUE, 0);
        cr_assert_eq(wait_event(&s.c, s.ev, 20000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(get64(&s.sigs, S_VALUE), 0);
        cr_expect_eq(get64_when(&s.aql.q, Q_READ_DISPATCH_ID, 1), 1);
        relayed_close(&s.c);
}

/* A slot of the ring once the CP has taken its packet is INVALID again:
 * ROCr and ROCclr reserve write_dispatch_id before they write a packet, so
 * on the next lap a reserved, not yet written slot must not run the packet
 * it held a lap before (which decremented its signal once already). */
Test(kfd_relay_queue, a_taken_slot_is_invalid_and_a_reserved_slot_waits_for_its_packet) {
        Setup s = {};
        uint8_t pkt[64] = {};

        setup(&s);
        /* One lap of barrier-ANDs without dependencies, each completing the
         * signal at sigs + 0 (reset to 1 before each, as a signal pool does;
         * its value and the read index say when each is done). */
        put_u16(pkt, header(3));
        put_u64(pkt + 56, s.sigs.va);
        for (unsigned i = 0; i < 64; i++) {
                signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
                aql_submit(&s.c, &s.aql, pkt);
                cr_assert_eq(get64_when(&s.aql.q, Q_READ_DISPATCH_ID, i + 1), i + 1, "packet %u retired", i);
                cr_assert_eq(get64(&s.sigs, S_VALUE), 0, "packet %u completed its signal", i);
                cr_assert_eq(s.aql.ring.cpu[(i % 64) * 64], 1, "slot %u is INVALID once its packet is taken", i);
        }
        /* The producer reserves packet 64 (slot 0 again) and is held before
         * it writes it; its signal is the pool's next use of the same one. */
        signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
        put64(&s.aql.q, Q_WRITE_DISPATCH_ID, 65);
        struct kfd_ioctl_get_version_args v = {};
        (void) kioctl(&s.c, AMDKFD_IOC_GET_VERSION, &v);
        usleep(500000);
        cr_expect_eq(get64(&s.sigs, S_VALUE), 1, "nothing ran in the reserved slot: the signal is untouched");
        cr_expect_eq(get64(&s.aql.q, Q_READ_DISPATCH_ID), 64);
        /* Written at last (header last): it runs, once. */
        s.aql.write = 64;
        aql_submit(&s.c, &s.aql, pkt);
        cr_expect_eq(get64_when(&s.aql.q, Q_READ_DISPATCH_ID, 65), 65);
        cr_expect_eq(get64(&s.sigs, S_VALUE), 0, "decremented once");
        relayed_close(&s.c);
}

/* ROCr's cache invalidation packet: an indirect buffer of ACQUIRE_MEM. */
static void pm4_ib_packet(Setup *s, uint8_t pkt[64], const uint32_t *ib, unsigned ndw) {
        memcpy(s->args.cpu + 2048, ib, 4u * ndw);
        memset(pkt, 0, 64);
        put_u16(pkt, header(0));
        put_u16(pkt + 2, 1); /* AMD_AQL_FORMAT_PM4_IB */
        put_u32(pkt + 4, PKT3_HDR(PKT3_INDIRECT_BUFFER, 2));
        put_u32(pkt + 8, (uint32_t) (s->args.va + 2048));
        put_u32(pkt + 12, (uint32_t) ((s->args.va + 2048) >> 32));
        put_u32(pkt + 16, ndw | 1u << 23);
        put_u32(pkt + 20, 0xA);
        put_u64(pkt + 56, s->sigs.va);
}

Test(kfd_relay_queue, a_pm4_ib_packet_may_only_invalidate_caches) {
        Setup s = {};
        uint32_t ib[16];
        uint8_t pkt[64];
        size_t n;

        setup(&s);
        signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
        n = pm4_emit_acquire_mem(ib, 0);
        pm4_ib_packet(&s, pkt, ib, (unsigned) n);
        aql_submit(&s.c, &s.aql, pkt);
        cr_assert_eq(wait_event(&s.c, s.ev, 20000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(get64(&s.sigs, S_VALUE), 0);
        cr_expect_eq(get64_when(&s.aql.q, Q_READ_DISPATCH_ID, 1), 1);

        /* A WRITE_DATA of the client's own choosing: refused. */
        signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
        uint32_t value = 7;
        n = pm4_emit_write_data(ib, s.sigs.va + 0x200, &value, 1);
        pm4_ib_packet(&s, pkt, ib, (unsigned) n);
        aql_submit(&s.c, &s.aql, pkt);
        cr_assert_eq(wait_event(&s.c, s.ev_inactive, 20000), KFD_IOC_WAIT_RESULT_COMPLETE);
        cr_expect_eq(get64(&s.sigs, 0x800 + S_VALUE), 256, "error 256: an invalid vendor packet");
        cr_expect_eq(get64(&s.sigs, 0x200), 0, "the write never ran");
        relayed_close(&s.c);
}

Test(kfd_relay_queue, nothing_of_the_daemons_own_is_the_clients_to_name) {
        Setup s = {};
        struct kfd_ioctl_free_memory_of_gpu_args fr = {};
        struct kfd_ioctl_destroy_event_args de = { .event_id = 4000 };
        struct kfd_ioctl_destroy_queue_args dq = { .queue_id = 60 };
        struct kfd_ioctl_update_queue_args uq = { .queue_id = 60, .queue_percentage = 100 };
        struct kfd_ioctl_create_queue_args q = { .ring_size = 4096, .queue_percentage = 100 };
        void *m = NULL;
        uint64_t h;
        int r;

        setup(&s);
        /* Buffer handles of the daemon's context in the process. */
        for (uint64_t idx = 1; idx < 8; idx++) {
                fr.handle = ((uint64_t) s.c.gpu_id << 32) | idx;
                if (fr.handle == s.code.handle || fr.handle == s.sigs.handle || fr.handle == s.args.handle ||
                    fr.handle == s.data.handle || fr.handle == s.page.handle || fr.handle == s.aql.ring.handle ||
                    fr.handle == s.aql.q.handle)
                        continue;
                cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &fr), -EINVAL, "handle 0x%lx",
                             (unsigned long) fr.handle);
        }
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_DESTROY_EVENT, &de), -EINVAL, "an event not the client's");
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_DESTROY_QUEUE, &dq), -EINVAL, "no such queue");
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_UPDATE_QUEUE, &uq), -EFAULT, "no such queue (pqm's answer)");
        /* The daemon's window. */
        h = alloc_size(&s.c, 0x130000000000ull, 4096, KFD_IOC_ALLOC_MEM_FLAGS_GTT, &r);
        cr_expect_eq(r, -EINVAL, "a buffer in the daemon's address window");
        (void) h;
        /* Mappings of the render file that are not the client's buffers. */
        cr_expect_lt(s.c.ops->mmap(s.c.ops->userdata, NULL, 4096, PROT_READ, MAP_SHARED, s.c.render, 0, &m), 0);
        /* Queues the relay does not run. */
        q.gpu_id = s.c.gpu_id;
        q.ring_base_address = s.aql.ring.va;
        q.write_pointer_address = s.aql.q.va + Q_WRITE_DISPATCH_ID;
        q.read_pointer_address = s.aql.q.va + Q_READ_DISPATCH_ID;
        q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE;
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_CREATE_QUEUE, &q), -EOPNOTSUPP, "a PM4 queue of the client's");
        q.queue_type = KFD_IOC_QUEUE_TYPE_SDMA;
        q.ring_base_address = 0x7770000000ull;
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_CREATE_QUEUE, &q), -EINVAL, "an SDMA ring outside the client's memory");
        q.ring_base_address = s.aql.ring.va;
        q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL;
        q.read_pointer_address += 8;
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_CREATE_QUEUE, &q), -EINVAL, "pointers not where amd_queue_t has them");
        q.read_pointer_address -= 8;
        q.ring_base_address = 0x7770000000ull;
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_CREATE_QUEUE, &q), -EINVAL, "a ring outside the client's memory");
        dq.queue_id = s.aql.id;
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_DESTROY_QUEUE, &dq), 0);
        cr_expect_eq(kioctl(&s.c, AMDKFD_IOC_DESTROY_QUEUE, &dq), -EINVAL, "destroyed already");
        relayed_close(&s.c);
}

Test(kfd_relay_queue, compute_dispatch_no_gets_no_queue) {
        Relayed c = {};
        Aql a = {};
        char *log;

        start_with_limits("ComputeDispatch=no\n");
        relayed_open(&c, 0);
        acquire(&c);
        cr_expect_eq(aql_create(&c, &a, 0x15000000), -EPERM);
        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "KFD relay refused an AQL queue: compute dispatch is not allowed for this client by "
                              "policy (ComputeDispatch=no"),
                  "%s", log);
        free(log);
        relayed_close(&c);
}

/* An SDMA queue as ROCr's BlitSdma makes one: a byte ring and 64-bit read
 * and write offsets in the client's memory. */
typedef struct Sdma {
        Buf ring, ptrs; /* ptrs: rptr at 0, wptr at 8 */
        uint32_t id;
        uint64_t wptr;
} Sdma;

static int sdma_create(Relayed *c, Sdma *s, uint64_t va) {
        s->ring = buf_new(c, va, 4096);
        s->ptrs = buf_new(c, va + 0x10000, 4096);
        struct kfd_ioctl_create_queue_args q = {
                .ring_base_address = s->ring.va, .ring_size = 4096, .gpu_id = c->gpu_id,
                .queue_type = KFD_IOC_QUEUE_TYPE_SDMA, .queue_percentage = 100, .queue_priority = 7,
                .read_pointer_address = s->ptrs.va, .write_pointer_address = s->ptrs.va + 8,
        };
        int r = kioctl(c, AMDKFD_IOC_CREATE_QUEUE, &q);
        s->id = q.queue_id;
        return r;
}

static void sdma_submit(Relayed *c, Sdma *s, const uint32_t *dw, size_t n) {
        memcpy(s->ring.cpu + s->wptr % 4096, dw, 4 * n);
        s->wptr += 4 * n;
        put64(&s->ptrs, 8, s->wptr);
        struct kfd_ioctl_get_version_args v = {};
        (void) kioctl(c, AMDKFD_IOC_GET_VERSION, &v); /* a nudge, as any call */
}

Test(kfd_relay_queue, sdma_packets_run_on_the_processs_own_sdma_queue) {
        Setup s = {};
        Sdma q = {};
        uint32_t pkt[64];
        size_t n = 0;
        char *log;

        setup(&s);
        cr_assert_eq(sdma_create(&s.c, &q, 0x16000000), 0);
        for (unsigned i = 0; i < 1024; i++)
                ((uint32_t *) s.data.cpu)[i] = i * 3u;
        memset(s.data.cpu + 4096, 0, 4096);
        /* ROCr's shape: copy, then the completion value and event (FENCE, TRAP). */
        n += sdma_emit_copy_linear(pkt + n, s.data.va + 4096, s.data.va, 4096);
        n += sdma_emit_fence(pkt + n, s.sigs.va + 0x300, 0x1234);
        n += sdma_emit_fence(pkt + n, s.page.va + 8ull * s.slot, s.ev);
        n += sdma_emit_trap(pkt + n, s.ev);
        sdma_submit(&s.c, &q, pkt, n);
        cr_assert_eq(wait_event(&s.c, s.ev, 20000), KFD_IOC_WAIT_RESULT_COMPLETE, "the TRAP's event");
        cr_expect_eq(memcmp(s.data.cpu, s.data.cpu + 4096, 4096), 0, "the copy ran");
        cr_expect_eq(*(uint32_t *) (s.sigs.cpu + 0x300), 0x1234u);
        for (int i = 0; i < 200 && get64(&q.ptrs, 0) != q.wptr; i++)
                usleep(5000);
        cr_expect_eq(get64(&q.ptrs, 0), q.wptr, "rptr reports what the engine read");

        /* Memory outside the client's buffers: the queue stops there. */
        n = sdma_emit_copy_linear(pkt, 0x7770000000ull, s.data.va, 4096);
        n += sdma_emit_fence(pkt + n, s.sigs.va + 0x300, 0x5678);
        sdma_submit(&s.c, &q, pkt, n);
        /* A register write (SRBM_WRITE) on another queue: refused too. */
        Sdma q2 = {};
        cr_assert_eq(sdma_create(&s.c, &q2, 0x17000000), 0);
        pkt[0] = SDMA_OP_SRBM_WRITE;
        pkt[1] = 0x1234;
        pkt[2] = 0;
        sdma_submit(&s.c, &q2, pkt, 3);
        for (int i = 0; i < 400; i++) {
                log = test_daemon_read_log(&d);
                bool both = strstr(log, "an SDMA packet reaches memory outside the process's buffers") &&
                            strstr(log, "an SDMA opcode clients may not use");
                free(log);
                if (both)
                        break;
                usleep(5000);
        }
        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "an SDMA packet reaches memory outside the process's buffers"), "%s", log);
        cr_expect(strstr(log, "an SDMA opcode clients may not use"), "%s", log);
        free(log);
        cr_expect_eq(*(uint32_t *) (s.sigs.cpu + 0x300), 0x1234u, "nothing after the refused packet ran");
        relayed_close(&s.c);
}

/* Queues= bounds the queues a process makes, AQL and SDMA together: past
 * it CREATE_QUEUE answers ENOSPC (pqm_create_queue at its limit) with one
 * log line naming the policy; a queue destroyed gives its place back. */
Test(kfd_relay_queue, queues_are_bounded_by_the_session_policy) {
        Relayed c = {};
        Aql a = {}, b = {};
        Sdma q = {};
        char *log;

        start_with_limits("Queues=1\n");
        relayed_open(&c, 0);
        acquire(&c);
        cr_assert_eq(aql_create(&c, &a, 0x15000000), 0);
        cr_expect_eq(aql_create(&c, &b, 0x16000000), -ENOSPC, "a second AQL queue");
        cr_expect_eq(sdma_create(&c, &q, 0x17000000), -ENOSPC, "an SDMA queue besides");
        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "KFD relay refused a queue: queue count limit (1, policy Queues=) reached"), "%s", log);
        free(log);
        struct kfd_ioctl_destroy_queue_args del = { .queue_id = a.id };
        cr_assert_eq(kioctl(&c, AMDKFD_IOC_DESTROY_QUEUE, &del), 0);
        cr_expect_eq(sdma_create(&c, &q, 0x18000000), 0, "its place, given back");
        relayed_close(&c);
}

/* A kernel's wild write faults the process's GPU context: it is lost. Then
 * the program goes first and its session after it — the relay's views of
 * the program's buffers are let go through the process's table after the
 * process's server has ended, which must still be there (a use after free
 * the ASan pass caught in test-hip's fault case). The daemon goes on. */
Test(kfd_relay_queue, a_faulted_process_that_goes_before_its_session_leaves_the_daemon_well) {
        Setup s = {};
        uint8_t pkt[64];
        kfdb_session *other;

        setup(&s);
        struct kfd_ioctl_create_event_args mem = { .event_type = KFD_IOC_EVENT_MEMORY };
        cr_assert_eq(kioctl(&s.c, AMDKFD_IOC_CREATE_EVENT, &mem), 0);
        signal_init(&s.sigs, 0, 1, &s.page, s.ev, s.slot);
        dispatch_packet(&s, pkt, s.kd_va, 64, s.sigs.va);
        put_u64(s.args.cpu + 16, 0x10000000000ull); /* c: nobody's memory */
        aql_submit(&s.c, &s.aql, pkt);
        /* The fault reaches the process as a MEMORY event, as ROCr waits for it. */
        cr_assert_eq(wait_event(&s.c, mem.event_id, 20000), KFD_IOC_WAIT_RESULT_COMPLETE, "the MEMORY event");
        for (int i = 0; i < 200; i++) {
                char *log = test_daemon_read_log(&d);
                bool lost = strstr(log, "KFD process of session") && strstr(log, "lost");
                free(log);
                if (lost)
                        break;
                usleep(10000);
        }
        /* The program goes; its session a moment later. */
        sim_remote_ops_free(s.c.ops);
        usleep(200 * 1000);
        kfdb_session_free(s.c.s);
        usleep(200 * 1000);
        kfdb_usage u;
        other = test_connect(&d, "after");
        cr_expect_eq(kfdb_query(other, &u), 0, "the daemon still serves");
        kfdb_session_free(other);
        cr_expect_eq(test_daemon_stop(&d), 0, "the daemon exits cleanly");
}

/* The value of a "name value" line of a topology properties file. */
static unsigned long prop(const char *text, const char *name) {
        const char *at = strstr(text, name);

        cr_assert(at, "no %s in %s", name, text);
        return strtoul(at + strlen(name) + 1, NULL, 10);
}

/* The jobs GPU n completed, as kfdbrokerctl status says ("gpu N: ... J jobs completed"). */
static long gpu_jobs(const char *status, unsigned n) {
        char prefix[16];
        const char *line, *at;

        snprintf(prefix, sizeof prefix, "\ngpu %u:", n);
        line = strstr(status, prefix);
        cr_assert(line, "no GPU %u in %s", n, status);
        at = strstr(line, " jobs completed");
        cr_assert(at, "%s", line);
        while (at > line && at[-1] >= '0' && at[-1] <= '9')
                at--;
        return strtol(at, NULL, 10);
}

/*
 * Two GPUs the session may use: a queue on GPU 1 runs there — on the
 * daemon's GPU context on GPU 1 in the same KFD process, made at that first
 * queue — its kernel's result and completion as on GPU 0, and the daemon
 * counts the job as GPU 1's. The same with worker processes: the daemon's
 * context on GPU 1 lives in the proxy worker's KFD process, its doorbell
 * the worker's slice of GPU 1.
 */
/* On the daemon started with two GPUs: the process opened, its buffers and
 * queue on GPU 1 (a render file of GPU 1, its VM acquired), and vector_add
 * run there through the relay: its result and completion. */
static void run_on_gpu1(Setup *s) {
        uint8_t pkt[64];
        char *text, *log;
        float *a, *b, *c;
        int bad = 0, render1;

        relayed_open(&s->c, 0);
        acquire(&s->c);
        text = read_text(topo[0], "topology/nodes/2/gpu_id");
        uint32_t gpu1 = (uint32_t) strtoul(text, NULL, 10);
        free(text);
        text = read_text(topo[0], "topology/nodes/2/properties");
        render1 = s->c.ops->open_render(s->c.ops->userdata, (unsigned) prop(text, "drm_render_minor"));
        free(text);
        cr_assert_geq(render1, 0);
        s->c.gpu_id = gpu1;
        s->c.render = render1;
        acquire(&s->c);
        setup_buffers(s);

        a = (float *) s->data.cpu;
        b = a + 1024;
        c = b + 1024;
        for (int i = 0; i < 1024; i++) {
                a[i] = (float) i;
                b[i] = 2.0f * (float) i;
                c[i] = -1;
        }
        signal_init(&s->sigs, 0, 1, &s->page, s->ev, s->slot);
        dispatch_packet(s, pkt, s->kd_va, 1000, s->sigs.va);
        aql_submit(&s->c, &s->aql, pkt);
        cr_assert_eq(wait_event(&s->c, s->ev, 20000), KFD_IOC_WAIT_RESULT_COMPLETE, "the completion signal's event");
        cr_expect_eq(get64(&s->sigs, S_VALUE), 0, "the completion signal decremented");
        cr_expect_eq(get64_when(&s->aql.q, Q_READ_DISPATCH_ID, 1), 1, "read_dispatch_id advanced");
        for (int i = 0; i < 1024; i++)
                bad += c[i] != (i < 1000 ? 3.0f * (float) i : -1.0f);
        cr_expect_eq(bad, 0, "vector_add's result on GPU 1");
        log = test_daemon_read_log(&d);
        cr_expect(strstr(log, "the KFD relay's GPU context on GPU 1 is up"), "%s", log);
        free(log);
}

/* The client's views of its buffers (what a process's end unmaps). */
static void unmap_buffers(Setup *s) {
        Buf *all[] = { &s->code, &s->sigs, &s->args, &s->data, &s->page, &s->aql.ring, &s->aql.q };

        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
                if (all[i]->cpu)
                        munmap(all[i]->cpu, all[i]->size);
}

Test(kfd_relay_queue, a_queue_on_the_sessions_second_gpu_runs_there) {
        const char *args[] = { "--sim-gpus=2", NULL };
        Setup s = {};
        char *out = NULL, *err = NULL;

        test_daemon_start(&d, args);
        run_on_gpu1(&s);

        /* GPU 1's job; GPU 0 ran none (the daemon learns of the end after the client). */
        const char *ctl[] = { "--socket", d.sock, "status", NULL };
        long j0 = -1, j1 = -1;
        for (int i = 0; i < 400 && j1 < 1; i++) {
                free(out);
                free(err);
                cr_assert_eq(test_run_ctl(ctl, false, &out, &err), 0, "%s", err);
                j0 = gpu_jobs(out, 0);
                j1 = gpu_jobs(out, 1);
                if (j1 < 1)
                        usleep(5000);
        }
        cr_expect_eq(j1, 1, "GPU 1 ran the job: %s", out);
        cr_expect_eq(j0, 0, "GPU 0 ran none: %s", out);
        free(out);
        free(err);
        relayed_close(&s.c);
}

/* Waits until the daemon has no more fds than base; names them if it has. */
static void expect_fds_back(int base, const char *at_start, const char *what) {
        for (int i = 0; i < 2000 && test_daemon_count_fds(&d) > base; i++)
                usleep(10 * 1000);
        if (test_daemon_count_fds(&d) > base) {
                char *now = test_daemon_fd_names(&d);
                fprintf(stderr, "the daemon's fds at the start: %s\nand now: %s\n", at_start, now);
                cr_expect_fail("%s: no fd of the daemon is left (its fds above)", what);
                free(now);
        }
}

/*
 * A program using both GPUs that ends abruptly leaves nothing behind: with
 * worker processes its proxy worker is killed while its queue on GPU 1 is
 * up — the daemon's contexts on both GPUs, which live in that worker's KFD
 * process, are lost and named in the log; with secondary contexts the
 * client goes without a word. Either way no fd of the daemon is left and
 * no slot on either GPU's pool: with --max-contexts=1 a second program
 * gets GPU 0's slot and GPU 1's again and runs on GPU 1.
 */
Test(kfd_relay_queue, a_program_on_two_gpus_that_dies_leaves_no_slot_and_no_fd) {
        const char *args[] = { "--sim-gpus=2", "--max-contexts=1", NULL };
        Setup s = {}, again = {};
        char *at_start, *log = NULL;
        pid_t w;
        int fds;

        test_daemon_start(&d, args);
        fds = test_daemon_count_fds(&d);
        at_start = test_daemon_fd_names(&d);
        run_on_gpu1(&s);
        w = logged_worker();
        if (w > 0) {
                cr_assert_eq(kill(w, SIGKILL), 0);
                for (int i = 0; i < 2000; i++) {
                        free(log);
                        log = test_daemon_read_log(&d);
                        if (strstr(log, "on GPU 1) lost: "))
                                break;
                        usleep(10 * 1000);
                }
                cr_expect(strstr(log, "(KFD process of session "), "%s", log);
                cr_expect(strstr(log, "on GPU 1) lost: "), "GPU 1's context is lost, named: %s", log);
                cr_expect(strstr(log, "its KFD process's worker went or stopped answering"), "%s", log);
                free(log);
                struct kfd_ioctl_get_version_args v = {};
                cr_expect_lt(kioctl(&s.c, AMDKFD_IOC_GET_VERSION, &v), 0, "the program's calls fail");
        }
        relayed_close(&s.c);
        unmap_buffers(&s);
        expect_fds_back(fds, at_start, "after the first program");

        /* Both pools' slots are free: the next program runs on GPU 1. */
        run_on_gpu1(&again);
        relayed_close(&again.c);
        unmap_buffers(&again);
        expect_fds_back(fds, at_start, "after the second program");
        free(at_start);
}

/*
 * With worker processes: a proxy worker that stops answering while its
 * program has contexts on both GPUs is given up once — the teardown's calls
 * into it (GPU 1's context first, then GPU 0's) wait 5 s at most, the
 * connection then being shut down for both — another session is served
 * again, the worker is killed, and no fd or slot is left on either GPU.
 */
Test(kfd_relay_queue, a_stopped_worker_of_a_program_on_two_gpus_is_given_up) {
        const char *args[] = { "--sim-gpus=2", "--max-contexts=1", NULL };
        Setup s = {}, again = {};
        kfdb_session *other;
        kfdb_usage u;
        char *at_start;
        pid_t w;
        int fds, r = 0;

        test_daemon_start(&d, args);
        fds = test_daemon_count_fds(&d);
        at_start = test_daemon_fd_names(&d);
        run_on_gpu1(&s);
        w = logged_worker();
        if (w <= 0) {
                /* Secondary contexts: no worker to stop. */
                relayed_close(&s.c);
                unmap_buffers(&s);
                free(at_start);
                return;
        }
        cr_assert_eq(kill(w, SIGSTOP), 0);
        relayed_close(&s.c); /* the daemon tears both contexts down: calls into the stopped worker */
        unmap_buffers(&s);
        other = test_connect(&d, "other");
        cr_expect_eq(kfdb_query(other, &u), 0, "another session is served: %s", kfdb_session_last_error(other));
        kfdb_session_free(other);
        for (int i = 0; i < 3000 && (r = kill(w, 0)) == 0; i++)
                usleep(10 * 1000);
        cr_expect_lt(r, 0, "the stopped worker %d is killed", (int) w);
        expect_fds_back(fds, at_start, "after the stopped worker");

        run_on_gpu1(&again);
        relayed_close(&again.c);
        unmap_buffers(&again);
        expect_fds_back(fds, at_start, "after the next program");
        free(at_start);
}
