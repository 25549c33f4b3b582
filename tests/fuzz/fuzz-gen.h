/* SPDX-License-Identifier: MIT */
/* The parts of the seed generator (fuzz-gen-corpus.c and the files it calls). */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Writes buf to DIR/NAME. 0 or -1 (said on stderr). */
int write_seed(const char *dir, const char *name, const void *buf, size_t len);

/* fuzz-gen-queues.c: the seeds of fuzz-sdma and fuzz-pm4. */
int sdma_corpus(const char *dir);
int pm4_corpus(const char *dir);

/* fuzz-gen-session.c: the seeds of fuzz-session. */
int session_corpus(const char *dir);

/* fuzz-gen-aql.c: the seeds of fuzz-relay-aql, with the kernel descriptors
 * of the n code objects named. */
int relay_aql_corpus(const char *dir, char **code_objects, int n);

/* fuzz-gen-ioctl.c: the seeds of fuzz-relay-ioctl. */
int relay_ioctl_corpus(const char *dir);
