/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target for the submit ring's record decoder (daemon/wire/wire-ring.c):
 * the input is a run of 64-byte records, as a client may leave them in its
 * ring, decoded one after another as the daemon does (job i of a batch until
 * a record ends it). Besides "no crash, no UB" it checks the decoder's
 * promises: only 0, -EPROTO and -EINVAL; a message for every rejection; and
 * every accepted job inside the ranges a Submit's jobs have (a known type,
 * size > 0, multiples of 4, no range wrapping past 2^64, a known engine).
 *
 * Built as a libFuzzer target with -Dfuzz=true (clang), otherwise with
 * fuzz-main.c as a program that replays the files given on its command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire-ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "fuzz-ring: broken promise: %s\n", what);
                abort();
        }
}

static bool range_ok(uint64_t off, uint64_t size) {
        return off % 4 == 0 && off <= UINT64_MAX - size;
}

static void check_job(const WireJob *j) {
        switch (j->type) {
        case WIRE_JOB_COPY:
                check(j->copy.size > 0 && j->copy.size % 4 == 0, "copy size");
                check(range_ok(j->copy.src_offset, j->copy.size) && range_ok(j->copy.dst_offset, j->copy.size),
                      "copy range");
                break;
        case WIRE_JOB_FILL:
                check(j->fill.size > 0 && j->fill.size % 4 == 0, "fill size");
                check(range_ok(j->fill.dst_offset, j->fill.size), "fill range");
                break;
        case WIRE_JOB_SIGNAL_EVENT:
        case WIRE_JOB_WAIT_EVENT:
                check(j->event.engine == WIRE_ENGINE_AUTO || j->event.engine == WIRE_ENGINE_SDMA ||
                              j->event.engine == WIRE_ENGINE_COMPUTE,
                      "engine");
                break;
        default:
                check(false, "job type (a dispatch never comes from the ring)");
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        size_t in_batch = 0;

        for (size_t at = 0; at + sizeof(KfdbRingRecord) <= size; at += sizeof(KfdbRingRecord)) {
                KfdbRingRecord rec;
                char err[512] = "";
                bool end = false;
                WireJob job;
                int r;

                memcpy(&rec, data + at, sizeof(rec));
                r = wire_ring_decode_record(&rec, at / sizeof(rec), in_batch, &job, &end, err, sizeof(err));
                check(r == 0 || r == -EPROTO || r == -EINVAL, "errno");
                if (r < 0) {
                        check(err[0] != '\0', "a rejection without a message");
                        if (r == -EPROTO)
                                return 0; /* the daemon ends the session here */
                } else
                        check_job(&job);
                in_batch = end ? 0 : in_batch + 1;
        }
        return 0;
}
