/* SPDX-License-Identifier: MIT */
/*
 * kfdb_code_object: a GPU code object loaded into the daemon, known there by
 * its handle and here by the kernel list the daemon sent back (copied, so it
 * outlives the reply). Owned by the session that loaded it; its kfdb_kernel
 * entries live as long as it does.
 */
#pragma once

#include "client-session.h"

struct kfdb_kernel {
        char *name;
        uint32_t kernarg_size, group_segment_size, private_segment_size, max_workgroup_size;
        kfdb_kernel_arg *args; /* names owned */
        size_t n_args;
        size_t n_explicit;     /* args that are not KFDB_KERNEL_ARG_HIDDEN */
};

struct kfdb_code_object {
        ClientObject object; /* first: the session's list links */
        kfdb_session *session;
        uint64_t handle;
        int memfd; /* the sealed ELF, kept to load it again after a daemon restart */
        kfdb_kernel *kernels;
        size_t n_kernels;
};
