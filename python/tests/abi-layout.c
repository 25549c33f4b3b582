/* SPDX-License-Identifier: MIT */
/*
 * Prints the size and field offsets of every struct of kfdbroker.h that the
 * Python package mirrors with ctypes (python/kfdbroker/_lib.py), as JSON, so
 * python/tests/test_abi.py can compare them with what the C compiler says.
 */
#include <stddef.h>
#include <stdio.h>

#include "kfdbroker.h"

static const char *sep;

static void begin(const char *name, size_t size) {
        printf("%s\"%s\":{\"size\":%zu,\"fields\":{", sep, name, size);
        sep = "";
}

static void field(const char *name, size_t offset) {
        printf("%s\"%s\":%zu", sep, name, offset);
        sep = ",";
}

static void end(void) {
        printf("}}");
        sep = ",";
}

#define BEGIN(T) begin(#T, sizeof(T))
#define FIELD(T, f) field(#f, offsetof(T, f))

int main(void) {
        sep = "{";
        BEGIN(kfdb_limits);
        FIELD(kfdb_limits, max_buffer_size);
        FIELD(kfdb_limits, max_buffer_bytes);
        FIELD(kfdb_limits, max_buffers);
        FIELD(kfdb_limits, max_events);
        FIELD(kfdb_limits, max_jobs_in_flight);
        FIELD(kfdb_limits, max_jobs_per_submit);
        FIELD(kfdb_limits, max_message_size);
        FIELD(kfdb_limits, max_wait_events);
        end();
        BEGIN(kfdb_device);
        FIELD(kfdb_device, backend);
        FIELD(kfdb_device, gfx_name);
        FIELD(kfdb_device, name);
        FIELD(kfdb_device, gpu_id);
        FIELD(kfdb_device, vendor_id);
        FIELD(kfdb_device, device_id);
        FIELD(kfdb_device, cu_count);
        FIELD(kfdb_device, vram_size);
        FIELD(kfdb_device, kfd_major);
        FIELD(kfdb_device, kfd_minor);
        FIELD(kfdb_device, sdma_queues);
        end();
        BEGIN(kfdb_usage);
        FIELD(kfdb_usage, buffers);
        FIELD(kfdb_usage, buffer_bytes);
        FIELD(kfdb_usage, events);
        FIELD(kfdb_usage, jobs_submitted);
        FIELD(kfdb_usage, jobs_completed);
        FIELD(kfdb_usage, jobs_failed);
        FIELD(kfdb_usage, jobs_in_flight);
        FIELD(kfdb_usage, bytes_copied);
        FIELD(kfdb_usage, bytes_filled);
        FIELD(kfdb_usage, limits);
        end();
        BEGIN(kfdb_daemon_status);
        FIELD(kfdb_daemon_status, daemon_version);
        FIELD(kfdb_daemon_status, backend);
        FIELD(kfdb_daemon_status, gfx_name);
        FIELD(kfdb_daemon_status, sessions);
        FIELD(kfdb_daemon_status, jobs_completed);
        FIELD(kfdb_daemon_status, jobs_failed);
        FIELD(kfdb_daemon_status, uptime_ns);
        FIELD(kfdb_daemon_status, buffer_bytes);
        FIELD(kfdb_daemon_status, gpu_buffers);
        FIELD(kfdb_daemon_status, jobs_in_flight);
        FIELD(kfdb_daemon_status, events);
        end();
        BEGIN(kfdb_wait_entry);
        FIELD(kfdb_wait_entry, event);
        FIELD(kfdb_wait_entry, last_event_age);
        end();
        BEGIN(kfdb_kernel_arg);
        FIELD(kfdb_kernel_arg, name);
        FIELD(kfdb_kernel_arg, offset);
        FIELD(kfdb_kernel_arg, size);
        FIELD(kfdb_kernel_arg, kind);
        end();
        BEGIN(kfdb_arg);
        FIELD(kfdb_arg, type);
        FIELD(kfdb_arg, value);
        FIELD(kfdb_arg, size);
        FIELD(kfdb_arg, buffer);
        FIELD(kfdb_arg, offset);
        FIELD(kfdb_arg, local_size);
        end();
        BEGIN(kfdb_job_failure);
        FIELD(kfdb_job_failure, fence);
        FIELD(kfdb_job_failure, error);
        FIELD(kfdb_job_failure, message);
        end();
        BEGIN(kfdb_slice);
        FIELD(kfdb_slice, buffer);
        FIELD(kfdb_slice, offset);
        FIELD(kfdb_slice, size);
        FIELD(kfdb_slice, ptr);
        end();
        BEGIN(kfdb_suballocator_stats);
        FIELD(kfdb_suballocator_stats, blocks);
        FIELD(kfdb_suballocator_stats, block_bytes);
        FIELD(kfdb_suballocator_stats, slices);
        FIELD(kfdb_suballocator_stats, slice_bytes);
        FIELD(kfdb_suballocator_stats, pending_frees);
        end();
        BEGIN(kfdb_gpu);
        FIELD(kfdb_gpu, index);
        FIELD(kfdb_gpu, gfx_name);
        FIELD(kfdb_gpu, name);
        FIELD(kfdb_gpu, gpu_id);
        FIELD(kfdb_gpu, node);
        FIELD(kfdb_gpu, node_reason);
        FIELD(kfdb_gpu, vram_size);
        FIELD(kfdb_gpu, cu_count);
        FIELD(kfdb_gpu, sessions);
        FIELD(kfdb_gpu, jobs_completed);
        FIELD(kfdb_gpu, jobs_failed);
        FIELD(kfdb_gpu, jobs_in_flight);
        FIELD(kfdb_gpu, gpu_buffers);
        end();
        printf(",\"enum_size\":%zu}\n", sizeof(kfdb_kernel_arg_kind));
        return 0;
}
