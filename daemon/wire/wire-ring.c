/* SPDX-License-Identifier: MIT */
/*
 * See wire-ring.h. Everything in a record is the client's and may be
 * anything: each is checked before a WireJob is made of it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "wire/wire-ring.h"

_Static_assert(sizeof(KfdbRingRecord) == KFDB_RING_RECORD_SIZE, "ring record layout");
_Static_assert(sizeof(KfdbSubmitRing) <= KFDB_RING_HEADER_SIZE, "ring header layout");

/* Words raw[from..6] must be 0: fields the record's kind does not use. */
static int check_unused(const KfdbRingRecord *rec, uint64_t index, unsigned from, char *errbuf, size_t errlen) {
        for (unsigned w = from; w < 7; w++)
                if (rec->raw[w] != 0) {
                        snprintf(errbuf, errlen,
                                 "submit ring: record %" PRIu64 ": word %u must be 0 for a job of kind %u, got 0x%" PRIx64,
                                 index, w, rec->kind, rec->raw[w]);
                        return -EPROTO;
                }
        return 0;
}

static int reserved_error(const KfdbRingRecord *rec, uint64_t index, uint32_t value, char *errbuf, size_t errlen) {
        snprintf(errbuf, errlen, "submit ring: record %" PRIu64 ": the reserved field of a job of kind %u must be 0, got 0x%" PRIx32,
                 index, rec->kind, value);
        return -EPROTO;
}

static int check_shape(const KfdbRingRecord *rec, uint64_t index, char *errbuf, size_t errlen) {
        if (rec->bytes != KFDB_RING_RECORD_SIZE) {
                snprintf(errbuf, errlen, "submit ring: record %" PRIu64 " says it is %" PRIu32 " bytes, records are %u",
                         index, rec->bytes, KFDB_RING_RECORD_SIZE);
                return -EPROTO;
        }
        if (rec->flags & ~KFDB_RING_END_OF_BATCH) {
                snprintf(errbuf, errlen, "submit ring: record %" PRIu64 ": unknown flags 0x%x", index,
                         rec->flags & ~KFDB_RING_END_OF_BATCH);
                return -EPROTO;
        }
        return 0;
}

int wire_ring_decode_record(const KfdbRingRecord *rec, uint64_t index, size_t i, WireJob *out,
                            bool *ret_end, char *errbuf, size_t errlen) {
        int r;

        *out = (WireJob) {};
        r = check_shape(rec, index, errbuf, errlen);
        if (r < 0)
                return r;
        *ret_end = rec->flags & KFDB_RING_END_OF_BATCH;
        switch (rec->kind) {
        case KFDB_RING_COPY:
                r = check_unused(rec, index, 5, errbuf, errlen);
                if (r < 0)
                        return r;
                return wire_job_copy(i, rec->copy.src_handle, rec->copy.src_offset, rec->copy.dst_handle,
                                     rec->copy.dst_offset, rec->copy.size, out, errbuf, errlen);
        case KFDB_RING_FILL:
                if (rec->fill.reserved != 0)
                        return reserved_error(rec, index, rec->fill.reserved, errbuf, errlen);
                r = check_unused(rec, index, 4, errbuf, errlen);
                if (r < 0)
                        return r;
                return wire_job_fill(i, rec->fill.dst_handle, rec->fill.dst_offset, rec->fill.size,
                                     rec->fill.pattern, out, errbuf, errlen);
        case KFDB_RING_SIGNAL_EVENT:
        case KFDB_RING_WAIT_EVENT:
                if (rec->event.reserved != 0)
                        return reserved_error(rec, index, rec->event.reserved, errbuf, errlen);
                r = check_unused(rec, index, 2, errbuf, errlen);
                if (r < 0)
                        return r;
                return wire_job_event(i, rec->kind == KFDB_RING_SIGNAL_EVENT ? WIRE_JOB_SIGNAL_EVENT : WIRE_JOB_WAIT_EVENT,
                                      rec->event.handle, rec->event.engine, out, errbuf, errlen);
        default:
                snprintf(errbuf, errlen, "submit ring: record %" PRIu64 ": unknown job kind %u", index, rec->kind);
                return -EPROTO;
        }
}
