/* SPDX-License-Identifier: MIT */
/*
 * The production side of the kernel-call table: helpers around kfd_ops_real
 * (declared in kfd-ops.h) that the daemon's --device=kfd|auto choice needs,
 * and the libdrm_amdgpu identification of the render node (kfd-drm.c).
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/*
 * Checks whether /dev/kfd can be opened and the KFD topology lists a GPU.
 * Returns 0 if so, else a negative errno and a one-line human reason in
 * reason (e.g. "/dev/kfd: No such file or directory (no amdgpu KFD on this
 * machine)"). Opens and closes the device; does not keep anything.
 */
int kfd_probe_real(char *reason, size_t n);

/*
 * On a GPU VM fault the kernel sets the process's MEMORY events *and* sends
 * SIGSEGV to it: kfd_events.c lookup_events_by_type_and_signal() calls
 * send_sig(SIGSEGV, p->lead_thread, 0) for every KFD_EVENT_TYPE_MEMORY fault
 * (kfd-facts §5 #20). The daemon recovers from GPU faults, so it must survive
 * that signal. This installs a SIGSEGV handler that ignores signals sent with
 * si_code SI_USER (send_sig(..., 0) and kill(2)) and restores the default
 * action for real faults (SEGV_MAPERR, SEGV_ACCERR, SI_KERNEL, ...), whose
 * instruction then faults again and dumps core as usual. Call it once, early,
 * when using the real device. Returns 0 or a negative errno.
 */
int kfd_fault_signal_install(void);
/* How many kernel-sent SIGSEGVs the handler has swallowed. */
unsigned kfd_fault_signal_count(void);

/*
 * Parses the text of /proc/self/fdinfo/FD of a dma-buf (kfd_ops_real's
 * dmabuf_refs): *ret = its "count:", the references to the dma-buf's file
 * (fds, mappings, in-flight fds, importers; procfs's own left out). Returns 0,
 * -EINVAL when the text is not a dma-buf's (no "exp_name:"), -EOPNOTSUPP for
 * a dma-buf without "count:", -EBADMSG for a count that is not a number.
 */
int kfd_dmabuf_fdinfo_count(const char *fdinfo, long *ret);

/* What libdrm_amdgpu says about a render node (kfd-drm.c). */
typedef struct KfdDrmInfo {
        char driver[16];          /* "amdgpu" */
        int drm_major, drm_minor; /* DRM driver interface version */
        char marketing_name[96];  /* "AMD Radeon RX 6800 XT", or "" */
        uint32_t family_id, chip_external_rev;
        uint64_t gpu_counter_hz;  /* amdgpu_gpu_info.gpu_counter_freq (kHz) * 1000, 0 if unknown */
        uint64_t vram_size;       /* AMDGPU_INFO_VRAM_GTT vram_size, 0 if unknown */
} KfdDrmInfo;

/*
 * Identifies the render node open at render_fd with libdrm: drmGetVersion()
 * must name the "amdgpu" driver (-ENODEV otherwise); then
 * amdgpu_device_initialize() + amdgpu_query_gpu_info() +
 * amdgpu_get_marketing_name(). Used only with the real device. Does not take
 * ownership of render_fd.
 */
int kfd_drm_identify(int render_fd, KfdDrmInfo *ret);
