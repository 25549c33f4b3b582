/* SPDX-License-Identifier: MIT */
/*
 * The submit ring's records (proto/submit-ring.h) as WireJobs: the shape of a
 * record is checked here, its fields by the same checks a Submit's jobs get
 * (wire_job_copy() and the others). Pure decoding, no state: the session's
 * ring (sessions/session-ring.c) reads the shared memory and calls this on a
 * private copy of each record.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "submit-ring.h"
#include "wire/wire.h"

/*
 * Decodes the record at ring index @index, job @i of its batch, into *out and
 * tells whether the batch ends with it. Returns 0; -EPROTO when the record
 * is malformed (unknown kind or flags, a size other than
 * KFDB_RING_RECORD_SIZE, a non-zero reserved field): the ring is garbage;
 * -EINVAL when a field is one a Submit would refuse (errbuf names it as
 * "submit.jobs[i]...."). errbuf always says what was wrong.
 */
int wire_ring_decode_record(const KfdbRingRecord *rec, uint64_t index, size_t i, WireJob *out,
                            bool *ret_end, char *errbuf, size_t errlen);
