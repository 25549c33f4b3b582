/* SPDX-License-Identifier: MIT */
/*
 * The submission ring (feature "submit-ring", docs/protocol.md "The submit
 * ring"): a memfd the daemon makes and maps, sealed with F_SEAL_SHRINK |
 * F_SEAL_GROW | F_SEAL_SEAL, given to the client by OpenSubmitRing with a
 * doorbell eventfd. The client maps it read-write and writes copy, fill and
 * event jobs into it without a round trip; the daemon reads them as it reads
 * a Submit, and trusts nothing in it.
 *
 * Layout version 1, little-endian, naturally aligned. `head` is the client's
 * (records published, counting from 0 and never wrapping: record i is in
 * records[i % records]); `tail` and `doorbell_armed` are the daemon's (it
 * never reads them back). A client writes whole batches — the last record of
 * each has KFDB_RING_END_OF_BATCH — then stores `head` with release order,
 * then (after a full fence) reads `doorbell_armed` and, when it is 1, writes
 * 1 to the doorbell. Fences are handed out as for a Submit: one per record,
 * in order, continuing the session's fences.
 */
#pragma once

#include <stdint.h>

#define KFDB_RING_MAGIC 0x5244464bu /* "KFDR" */
#define KFDB_RING_VERSION 1u
#define KFDB_RING_RECORDS 1024u
#define KFDB_RING_RECORD_SIZE 64u
#define KFDB_RING_HEADER_SIZE 4096u
#define KFDB_RING_SIZE (KFDB_RING_HEADER_SIZE + KFDB_RING_RECORDS * KFDB_RING_RECORD_SIZE)

/* KfdbRingRecord.kind */
#define KFDB_RING_COPY 1u
#define KFDB_RING_FILL 2u
#define KFDB_RING_SIGNAL_EVENT 3u
#define KFDB_RING_WAIT_EVENT 4u
/* KfdbRingRecord.flags: the batch (all or nothing, as one Submit) ends here. */
#define KFDB_RING_END_OF_BATCH 0x1u

/* One job. Fields a kind does not use, and the reserved ones, must be 0. */
typedef struct KfdbRingRecord {
        uint16_t kind;
        uint16_t flags;
        uint32_t bytes; /* KFDB_RING_RECORD_SIZE */
        union {
                struct {
                        uint64_t src_handle, src_offset, dst_handle, dst_offset, size;
                } copy;
                struct {
                        uint64_t dst_handle, dst_offset, size;
                        uint32_t pattern, reserved;
                } fill;
                struct {
                        uint64_t handle;
                        uint32_t engine; /* 0 auto, 1 SDMA, 2 compute (proto Engine) */
                        uint32_t reserved;
                } event; /* SIGNAL_EVENT, WAIT_EVENT */
                uint64_t raw[7];
        };
} KfdbRingRecord;

typedef struct KfdbSubmitRing {
        uint32_t magic;
        uint32_t version;
        uint32_t size;        /* bytes of the memfd */
        uint32_t records;     /* entries of the record array */
        uint32_t record_size; /* KFDB_RING_RECORD_SIZE */
        uint32_t header_size; /* where the records start */
        uint8_t reserved0[40];
        uint64_t head;           /* client: records published */
        uint8_t reserved1[56];
        uint64_t tail;           /* daemon: records taken */
        uint32_t doorbell_armed; /* daemon: 1 while it sleeps on the doorbell */
        uint32_t reserved2;
} KfdbSubmitRing;

static inline KfdbRingRecord *kfdb_ring_record(KfdbSubmitRing *r, uint64_t index) {
        return (KfdbRingRecord *) ((uint8_t *) r + KFDB_RING_HEADER_SIZE) + index % KFDB_RING_RECORDS;
}
