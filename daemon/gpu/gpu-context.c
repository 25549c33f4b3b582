/* SPDX-License-Identifier: MIT */
/*
 * GpuContext: one KFD process context on one GPU node (see gpu.h). This file
 * is the bring-up and teardown of the context and the completion processing
 * that gpu_context_process() runs on the event loop.
 *
 * Bring-up (kfd-facts §1.2, the same order as tinygrad's KFDIface and
 * libhsakmt), every call through the KfdOps table:
 *   open /dev/kfd; GET_VERSION; topology (the GPU node opts->gpu_id names, else
 *   kfd_gpu_choose()'s default: discrete before integrated); open the render
 *   node (drm_render_minor) and, on the real device only, identify it with
 *   libdrm (kfd-drm.c); ACQUIRE_VM; RUNTIME_ENABLE(mode 0) on uapi >= 1.13;
 *   the 32 KiB event page (GTT|COHERENT|UNCACHED BO) registered by the first
 *   CREATE_EVENT; the internal events; fence memory; the SDMA queues (the first
 *   one maps the doorbell slice); the waiter thread.
 *
 * Internal events: per queue, a completion SIGNAL event the waiter waits for
 * and a barrier SIGNAL event no one waits for (gpu-queue.c, "Completion":
 * each job waits until the kernel has acknowledged its barrier interrupt
 * before it writes a fence, so that a fault it raised is handled first; per
 * queue because a slot shared by several queues' interrupts would make the
 * kernel scan every slot and acknowledge another queue's barrier early).
 * last_event_age makes each auto-reset event lossless: interrupts that arrive
 * while the waiter is away only bump the age, and the next wait returns at
 * once. Plus a MEMORY and a HW_EXCEPTION event for faults and a SIGNAL event
 * that registers the event page and wakes the waiter (at shutdown, and to
 * wait for a queue added since).
 *
 * Timestamp frequency: neither GET_CLOCK_COUNTERS (its only frequency,
 * system_clock_freq, is that of the CPU boottime clock, 1e9) nor the topology
 * reports the frequency of the SDMA GET_GLOBAL timestamp. On the real device
 * we take amdgpu's gpu_counter_freq (libdrm amdgpu_query_gpu_info, kHz); else a
 * per-generation table: 100 MHz on gfx10/11/12 and gfx94x, 25 MHz on other gfx9
 * (LLVM libc src/time/gpu/time_utils.h). The simulator (gfx1030) runs a
 * 100 MHz counter.
 */
#include <errno.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpu/gpu-internal.h"
#include "kfd/kfd-gpu-choice.h"
#include "kfd/kfd-real.h"
#include "util/log.h"
#include "util/macro.h"

#define GPU_DEFAULT_SDMA_QUEUES 2u
#define GPU_DEFAULT_RING_SIZE (256u * 1024u)
#define GPU_MAX_RING_SIZE (64u * 1024u * 1024u)

static uint64_t timestamp_hz_for(uint32_t gfxv) {
        if (gfxv >= 100000 || (gfxv >= 90400 && gfxv < 90500))
                return 100000000;
        if (gfxv >= 90000)
                return 25000000;
        return 100000000;
}

static int create_event(GpuContext *c, uint32_t type, uint64_t page_handle, uint32_t *ret_id,
                        uint32_t *ret_slot) {
        struct kfd_ioctl_create_event_args a = {
                .event_page_offset = page_handle,
                .event_type = type,
                .auto_reset = 1,
                .node_id = c->node.node_index,
        };
        int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_CREATE_EVENT, &a);
        if (r < 0)
                return r;
        if (a.event_id == 0)
                return -EIO; /* id 0 is reserved by the kernel */
        *ret_id = a.event_id;
        if (ret_slot)
                *ret_slot = a.event_slot_index;
        return 0;
}

static void destroy_event(GpuContext *c, uint32_t *id) {
        if (*id == 0)
                return;
        struct kfd_ioctl_destroy_event_args a = { .event_id = *id };
        int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_DESTROY_EVENT, &a);
        if (r < 0)
                log_debug_errno(r, "gpu: DESTROY_EVENT %u failed: %m", *id);
        *id = 0;
}

int gpu_context_create_signal_event(GpuContext *c, uint32_t *ret_id) {
        uint32_t id, slot;
        int r = create_event(c, KFD_IOC_EVENT_SIGNAL, c->event_page_registered ? 0 : c->event_page->handle, &id, &slot);

        if (r < 0)
                return r;
        c->event_page_registered = true;
        if (slot != id || slot >= KFD_SIGNAL_EVENT_LIMIT) {
                destroy_event(c, &id);
                return -EIO; /* kfd_events.c: a signal event's id is its slot */
        }
        *ret_id = id;
        return 0;
}

void gpu_context_destroy_event(GpuContext *c, uint32_t *id) {
        destroy_event(c, id);
}

uint64_t gpu_context_event_slot_va(const GpuContext *c, uint32_t id) {
        return c->event_page->va + (uint64_t) id * 8;
}

static void release_job_holds(GpuContext *c, bool all);

GpuContext *gpu_context_free(GpuContext *c) {
        if (!c)
                return NULL;

        gpu_waiter_stop(c);
        release_job_holds(c, true);

        for (unsigned i = 0; i < c->n_queues; i++)
                gpu_queue_teardown(c, &c->queues[i]);
        c->n_queues = 0;
        if (c->doorbells) {
                int r = c->ops->munmap(c->ops->userdata, c->doorbells, KFD_DOORBELL_SLICE_SIZE);
                if (r < 0)
                        log_debug_errno(r, "gpu: munmap of the doorbell slice failed: %m");
                c->doorbells = NULL;
        }
        c->fence = gpu_buffer_unref(c->fence);
        c->hdp_page = gpu_buffer_unref(c->hdp_page);

        destroy_event(c, &c->shutdown_event);
        destroy_event(c, &c->memory_event);
        destroy_event(c, &c->hw_exception_event);
        if (c->event_page_peer && c->event_page) {
                int r = gpu_unmap_from_gpu(c, c->event_page->handle);
                if (r < 0)
                        log_debug_errno(r, "gpu: unmapping the shared event page from gpu_id 0x%x failed: %m", c->gpu_id);
        }
        c->event_page = gpu_buffer_unref(c->event_page);

        /* Code objects still referenced elsewhere keep their struct and
         * kernels (copies loaded from another object go); buffers still
         * referenced elsewhere (a caller bug, or a core that frees the
         * context first at exit) lose their kernel objects and mappings now,
         * their last unref frees the struct; imports of other contexts'
         * buffers go. */
        gpu_code_objects_release_all(c);
        gpu_buffers_release_all(c);

        if (c->render_fd >= 0)
                c->ops->close(c->ops->userdata, c->render_fd);
        if (c->kfd_fd >= 0)
                c->ops->close(c->ops->userdata, c->kfd_fd);
        gpu_va_window_close(&c->va);
        safe_close(c->wake_fd);
        pthread_mutex_destroy(&c->waiter_lock);
        free(c);
        return NULL;
}
DEFINE_POINTER_CLEANUP(GpuContext, gpu_context_free);

static bool ring_size_ok(uint32_t size) {
        return is_power_of_2_u64(size) && size >= PAGE_SIZE_4K && size <= GPU_MAX_RING_SIZE;
}

static int resolve_options(const KfdNode *n, const GpuContextOptions *in, GpuContextOptions *out) {
        GpuContextOptions o = {
                .n_sdma_queues = GPU_DEFAULT_SDMA_QUEUES,
                .n_compute_queues = 1,
                .compute_priority = { GPU_QUEUE_PRIORITY_DEFAULT },
                .sdma_ring_size = GPU_DEFAULT_RING_SIZE,
                .compute_ring_size = GPU_DEFAULT_RING_SIZE,
                .queue_priority = GPU_QUEUE_PRIORITY_DEFAULT,
                .max_inflight = GPU_QUEUE_MAX_INFLIGHT,
        };
        if (in) {
                o.flags = in->flags;
                if (in->max_inflight != 0)
                        o.max_inflight = in->max_inflight;
                if (in->n_sdma_queues != 0)
                        o.n_sdma_queues = in->n_sdma_queues;
                if (in->n_compute_queues != 0) {
                        o.n_compute_queues = in->n_compute_queues;
                        memcpy(o.compute_priority, in->compute_priority, sizeof o.compute_priority);
                }
                if (in->sdma_ring_size != 0)
                        o.sdma_ring_size = in->sdma_ring_size;
                if (in->compute_ring_size != 0)
                        o.compute_ring_size = in->compute_ring_size;
                o.queue_priority = in->queue_priority;
                o.first_seq = in->first_seq;
                o.on_events = in->on_events;
                o.on_events_userdata = in->on_events_userdata;
        }
        if (o.first_seq == 0)
                o.first_seq = 1;
        if (!is_power_of_2_u64(o.max_inflight) || o.max_inflight > GPU_QUEUE_MAX_INFLIGHT)
                return -EINVAL;
        /* KFD_MAX_QUEUE_PRIORITY 15; rings: power of two (KFD), a whole number
         * of pages (each is its own BO whose size must equal ring_size). */
        if (o.queue_priority > 15 || o.n_compute_queues > GPU_MAX_QUEUES)
                return -EINVAL;
        for (unsigned i = 0; i < o.n_compute_queues; i++)
                if (o.compute_priority[i] > 15)
                        return -EINVAL;
        if (!ring_size_ok(o.sdma_ring_size) || !ring_size_ok(o.compute_ring_size))
                return -EINVAL;
        /* SDMA queues are a fixed pool of engines x queues per engine (kfd-facts §3.3). */
        unsigned pool = n->num_sdma_engines * n->num_sdma_queues_per_engine;
        o.n_sdma_queues = MIN(o.n_sdma_queues, MIN(pool, (unsigned) GPU_MAX_QUEUES));
        if (o.flags & GPU_CONTEXT_NO_SDMA)
                o.n_sdma_queues = 0;
        else if (o.n_sdma_queues == 0)
                return -ENODEV;
        /* Compute queues share the HQD slots KFD exposes (num_cp_queues; beyond
         * them the HWS oversubscribes with time slicing, kfd-facts §5 #13) and
         * the queue table with the SDMA queues. A node without CP queues (or
         * whose CWSR sizes we cannot compute) gets none: copies still work. */
        o.n_compute_queues = MIN(o.n_compute_queues, GPU_MAX_QUEUES - o.n_sdma_queues);
        if (n->num_cp_queues == 0 || (o.flags & GPU_CONTEXT_NO_COMPUTE))
                o.n_compute_queues = 0;
        else
                o.n_compute_queues = MIN(o.n_compute_queues, n->num_cp_queues);
        *out = o;
        return 0;
}

/* The apertures of our node (GET_PROCESS_APERTURES_NEW, asked for the count
 * first): code object v4/v5 kernels read the upper halves of the LDS and
 * scratch ones for generic address casts (gpu-dispatch.c); the client address
 * window must lie inside the GPUVM one. */
static int read_apertures(GpuContext *c) {
        struct kfd_ioctl_get_process_apertures_new_args a = {};
        int r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &a);
        if (r < 0)
                return r;
        if (a.num_of_nodes == 0 || a.num_of_nodes > KFD_TOPOLOGY_MAX_NODES)
                return -EIO;
        struct kfd_process_device_apertures ap[KFD_TOPOLOGY_MAX_NODES] = {};
        a.kfd_process_device_apertures_ptr = (uint64_t) (uintptr_t) ap;
        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_GET_PROCESS_APERTURES_NEW, &a);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < a.num_of_nodes && i < KFD_TOPOLOGY_MAX_NODES; i++)
                if (ap[i].gpu_id == c->gpu_id) {
                        c->lds_aperture_base = ap[i].lds_base;
                        c->scratch_aperture_base = ap[i].scratch_base;
                        c->gpuvm_base = ap[i].gpuvm_base;
                        c->gpuvm_limit = ap[i].gpuvm_limit;
                        return 0;
                }
        return -ENODEV;
}

static void fill_info(GpuContext *c, const KfdDrmInfo *drm) {
        GpuDeviceInfo *i = &c->info;
        const KfdNode *n = &c->node;

        snprintf(i->backend, sizeof i->backend, "%s", c->ops->name ? c->ops->name : "?");
        i->gpu_id = n->gpu_id;
        kfd_node_gfx_name(n, i->gfx_name, sizeof i->gfx_name);
        const char *name = drm && drm->marketing_name[0] ? drm->marketing_name : n->name;
        size_t l = MIN(strlen(name), sizeof i->name - 1);
        memcpy(i->name, name, l);
        i->name[l] = '\0';
        i->gfx_target_version = n->gfx_target_version;
        i->vendor_id = n->vendor_id;
        i->device_id = n->device_id;
        i->cu_count = kfd_node_cu_count(n);
        i->wave_front_size = n->wave_front_size;
        i->lds_size_in_kb = n->lds_size_in_kb;
        i->num_sdma_engines = n->num_sdma_engines;
        i->num_sdma_queues_per_engine = n->num_sdma_queues_per_engine;
        i->num_cp_queues = n->num_cp_queues;
        i->drm_render_minor = n->drm_render_minor;
        kfd_node_pci_name(n, i->pci_address, sizeof i->pci_address);
        i->vram_size = n->local_mem_size ? n->local_mem_size : (drm ? drm->vram_size : 0);
        i->timestamp_hz = drm && drm->gpu_counter_hz ? drm->gpu_counter_hz
                                                     : timestamp_hz_for(n->gfx_target_version);
}

/* Reads the CWSR/EOP sizes and the apertures compute queues need, once. */
static int compute_prepare(GpuContext *c) {
        int r;

        if (c->compute_ready)
                return 0;
        if (c->node.num_cp_queues == 0)
                return -ENODEV;
        r = kfd_node_queue_sizes(&c->node, &c->queue_sizes);
        if (r < 0) {
                log_debug("gpu: no CWSR/EOP sizes for gfx target %u: no compute queues",
                          c->node.gfx_target_version);
                return -ENODEV;
        }
        c->compute_ready = true;
        return 0;
}

static int add_queue(GpuContext *c, GpuEngine engine, uint32_t priority, unsigned *ret_index) {
        unsigned i = c->n_queues;
        int r;

        if (i >= GPU_MAX_QUEUES)
                return -ENOSPC;
        if (engine == GPU_ENGINE_COMPUTE) {
                r = compute_prepare(c);
                if (r < 0)
                        return r;
        }
        c->n_queues = i + 1; /* so that a half-built queue is torn down */
        r = gpu_queue_setup(c, &c->queues[i], i, engine,
                            engine == GPU_ENGINE_SDMA ? c->opts.sdma_ring_size : c->opts.compute_ring_size, priority);
        if (r < 0) {
                gpu_queue_teardown(c, &c->queues[i]);
                c->n_queues = i;
                return r;
        }
        c->info.queue_engine[i] = engine;
        c->info.queue_priority[i] = priority;
        c->info.n_queues = c->n_queues;
        /* The waiter waits for its completion interrupts from its next wait
         * on, which this wakes it for. */
        c->done_events[i] = c->queues[i].done_event;
        atomic_store_explicit(&c->n_done_events, i + 1, memory_order_release);
        gpu_waiter_rewait(c);
        if (ret_index)
                *ret_index = i;
        return 0;
}

int gpu_context_add_queue(GpuContext *c, GpuEngine engine, uint32_t priority, unsigned *ret_index) {
        if (!c || priority > 15 || (engine != GPU_ENGINE_SDMA && engine != GPU_ENGINE_COMPUTE))
                return -EINVAL;
        if (c->lost)
                return -ENODEV;
        return add_queue(c, engine, priority, ret_index);
}

/* The topology node with gpu_id, or kfd_gpu_choose()'s default for 0. */
static int pick_node(GpuContext *c, uint32_t gpu_id) {
        _cleanup_free_ KfdTopology *t = calloc(1, sizeof *t);
        KfdGpuChoice choice;
        char err[512];
        int r;

        if (!t)
                return -ENOMEM;
        r = kfd_topology_read(c->ops->sysfs_root, t);
        if (r < 0)
                return r;
        if (r == 0)
                return -ENODEV;
        if (gpu_id == 0) {
                r = kfd_gpu_choose(t, NULL, &choice, err, sizeof err);
                if (r < 0)
                        return r;
                c->node = t->nodes[choice.index];
                return 0;
        }
        for (unsigned i = 0; i < t->n_nodes; i++)
                if (t->nodes[i].gpu_id == gpu_id) {
                        c->node = t->nodes[i];
                        return 0;
                }
        return -ENODEV;
}

static int bring_up(GpuContext *c, const GpuContextOptions *opts) {
        int r;

        c->kfd_fd = c->ops->open_kfd(c->ops->userdata);
        if (c->kfd_fd < 0)
                return c->kfd_fd;

        struct kfd_ioctl_get_version_args v = {};
        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_GET_VERSION, &v);
        if (r < 0)
                return r;
        c->info.kfd_major = v.major_version;
        c->info.kfd_minor = v.minor_version;
        if (v.major_version != 1)
                return -EPROTONOSUPPORT;
        /* Gate on the version (kfd-facts §7.4): before 1.12 the KFD ioctl
         * table ends before EXPORT_DMABUF (0x24), so kfd_ioctl answers -EINVAL
         * for it and buffers come from the render node (gpu-buffer.c). */
        c->info.render_node_buffers = v.minor_version < KFD_MINOR_EXPORT_DMABUF;
        c->info.fds_per_buffer = c->ops->fds_per_bo;
        if (opts && opts->share_process && (opts->flags & GPU_CONTEXT_SECONDARY))
                return -EINVAL;
        if (opts && (opts->flags & GPU_CONTEXT_SECONDARY)) {
                /* Gate on the version, not on the errno: an older kernel's
                 * table ends before 0x27 (kfd-facts §7.3). */
                if (v.minor_version < KFD_MINOR_CREATE_PROCESS)
                        return -EOPNOTSUPP;
                r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_CREATE_PROCESS, NULL);
                if (r < 0)
                        return r;
        }

        r = pick_node(c, opts ? opts->gpu_id : 0);
        if (r < 0)
                return r;
        c->gpu_id = c->node.gpu_id;

        r = resolve_options(&c->node, opts, &c->opts);
        if (r < 0)
                return r;
        c->opts.gpu_id = c->gpu_id;
        if (c->opts.n_compute_queues > 0 && kfd_node_queue_sizes(&c->node, &c->queue_sizes) < 0) {
                log_debug("gpu: no CWSR/EOP sizes for gfx target %u: no compute queues",
                          c->node.gfx_target_version);
                c->opts.n_compute_queues = 0;
        }
        c->max_inflight = c->opts.max_inflight;

        c->render_fd = c->ops->open_render(c->ops->userdata, c->node.drm_render_minor);
        if (c->render_fd < 0)
                return c->render_fd;

        KfdDrmInfo drm = {}, *drmp = NULL;
        if (c->ops == &kfd_ops_real) {
                /* The kernel sends SIGSEGV with every GPU VM fault; we recover
                 * from those, so do not die of the notification. */
                r = kfd_fault_signal_install();
                if (r < 0)
                        return r;
                r = kfd_drm_identify(c->render_fd, &drm);
                if (r < 0)
                        return r;
                drmp = &drm;
                log_debug("gpu: renderD%u is %s %d.%d, \"%s\"", c->node.drm_render_minor, drm.driver,
                          drm.drm_major, drm.drm_minor, drm.marketing_name);
        }
        fill_info(c, drmp);

        struct kfd_ioctl_acquire_vm_args vm = { .drm_fd = (uint32_t) c->render_fd, .gpu_id = c->gpu_id };
        r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_ACQUIRE_VM, &vm);
        if (r < 0)
                return r;

        /* Where the context's addresses come from: its slot of the client
         * address window, inside the GPUVM aperture (gpu-va-window.c). */
        r = read_apertures(c);
        if (r < 0)
                return r;
        /* A device context takes its GPU's device window; a primary
         * context otherwise the first (a test's, a core of its own); the
         * others a client slot. */
        int device = -1;
        if (opts && (opts->flags & GPU_CONTEXT_DEVICE))
                device = (int) opts->device_window;
        else if (!(opts && ((opts->flags & (GPU_CONTEXT_SECONDARY | GPU_CONTEXT_CLIENT)) || opts->share_process)))
                device = 0;
        r = gpu_va_window_open(&c->va, device, c->gpuvm_base, c->gpuvm_limit);
        if (r < 0)
                return r;

        /* mode_mask 0 takes the runtime_disable() path: harmless, and what
         * tinygrad sends; only a debugger cares (kfd-facts §1.4). Once per
         * process: a context sharing one leaves it to the first. */
        if (v.minor_version >= KFD_MINOR_RUNTIME_ENABLE && !(opts && opts->share_process)) {
                struct kfd_ioctl_runtime_enable_args re = {};
                r = kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_RUNTIME_ENABLE, &re);
                if (r < 0 && r != -ENOTTY)
                        return r;
        }

        /* The event page: 4096 slots x 8 bytes in a GTT BO the kernel kmaps;
         * one per process, so a context sharing one maps its page into this
         * GPU's VM (at the same address), where this GPU's end-of-pipe
         * writes land, and its events are the process's as well. */
        if (opts && opts->share_process) {
                const GpuContext *first = opts->share_process;

                if (!first->event_page || !first->event_page_registered)
                        return -EINVAL;
                r = gpu_map_to_gpu(c, first->event_page->handle);
                if (r < 0)
                        return r;
                c->event_page = gpu_buffer_ref(first->event_page);
                c->event_page_peer = true;
                c->event_page_registered = true;
        } else {
                r = gpu_buffer_alloc_internal(c, KFD_EVENT_PAGE_SIZE, GPU_BO_FLAGS_INTERNAL, true, &c->event_page);
                if (r < 0)
                        return r;
        }
        /* The first signal event registers the page (kfd_kmap_event_page). */
        r = gpu_context_create_signal_event(c, &c->shutdown_event);
        if (r < 0)
                return r;
        c->event_page->keep_bo = true;
        r = create_event(c, KFD_IOC_EVENT_MEMORY, 0, &c->memory_event, NULL);
        if (r < 0)
                return r;
        r = create_event(c, KFD_IOC_EVENT_HW_EXCEPTION, 0, &c->hw_exception_event, NULL);
        if (r < 0)
                return r;

        /* The HDP flush page (gpu-queue.c, "HDP flush"). Without it the
         * context still works, but CPU writes into VRAM may reach the GPU late. */
        r = gpu_buffer_alloc_hdp_page(c, &c->hdp_page);
        if (r < 0) {
                log_debug_errno(r, "gpu: no HDP flush page on gpu_id 0x%x: %m", c->gpu_id);
                if (opts && opts->hdp_fallback)
                        c->hdp_shared = opts->hdp_fallback->hdp_page;
        }
        c->info.hdp_flush = c->hdp_page || c->hdp_shared;

        /* Room for every queue the context may ever have (gpu_context_add_queue);
         * a fresh BO is zero, so only the fence words are written here. */
        r = gpu_buffer_alloc_internal(c, GPU_FENCE_WORDS_SIZE + GPU_MAX_QUEUES * GPU_FENCE_TS_PER_QUEUE(c->max_inflight),
                                      GPU_BO_FLAGS_INTERNAL, true, &c->fence);
        if (r < 0)
                return r;
        memset(c->fence->cpu, 0, GPU_FENCE_WORDS_SIZE);

        for (unsigned i = 0; i < c->opts.n_sdma_queues; i++) {
                r = add_queue(c, GPU_ENGINE_SDMA, c->opts.queue_priority, NULL);
                if (r < 0)
                        return r;
        }
        for (unsigned i = 0; i < c->opts.n_compute_queues; i++) {
                r = add_queue(c, GPU_ENGINE_COMPUTE, c->opts.compute_priority[i], NULL);
                if (r < 0)
                        return r;
        }

        c->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (c->wake_fd < 0)
                return -errno;
        return gpu_waiter_start(c);
}

int gpu_context_new(const KfdOps *ops, const GpuContextOptions *opts, GpuContext **ret) {
        if (!ops || !ret)
                return -EINVAL;

        _cleanup_(gpu_context_freep) GpuContext *c = calloc(1, sizeof *c);
        if (!c)
                return -ENOMEM;
        c->ops = ops;
        c->kfd_fd = c->render_fd = c->wake_fd = -EBADF;
        pthread_mutex_init(&c->waiter_lock, NULL);

        int r = bring_up(c, opts);
        if (r < 0) {
                log_debug_errno(r, "gpu: bring-up on %s failed: %m", ops->name ? ops->name : "?");
                return r;
        }
        log_debug("gpu: %s %scontext on gpu_id 0x%x (%s, %s), KFD %u.%u, %u SDMA and %u compute queue(s)",
                  c->info.backend, (c->opts.flags & GPU_CONTEXT_SECONDARY) ? "secondary " : "", c->gpu_id,
                  c->info.gfx_name, c->info.name, c->info.kfd_major, c->info.kfd_minor, c->opts.n_sdma_queues,
                  c->opts.n_compute_queues);
        *ret = TAKE_PTR(c);
        return 0;
}

void gpu_context_test_omit_flushes(GpuContext *c, uint32_t mask) {
        c->omit_flushes = mask;
}

void gpu_context_flush_hdp(GpuContext *c) {
        GpuBuffer *page = c->hdp_page ? c->hdp_page : c->hdp_shared;
        volatile uint32_t *cntl;

        if (!page || !gpu_flush_on(c, GPU_FLUSH_HDP))
                return;
        cntl = (volatile uint32_t *) page->cpu + KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL / 4;
        *cntl = 1;
        (void) *cntl;
}

const GpuDeviceInfo *gpu_context_get_info(const GpuContext *c) {
        return &c->info;
}

int gpu_context_set_event(GpuContext *c, uint32_t event_id) {
        struct kfd_ioctl_set_event_args a = { .event_id = event_id };

        return kfd_ioctl(c->ops, c->kfd_fd, AMDKFD_IOC_SET_EVENT, &a);
}

const KfdOps *gpu_context_get_ops(const GpuContext *c) {
        return c->ops;
}

int gpu_context_get_render_fd(const GpuContext *c) {
        return c->render_fd;
}

uint64_t gpu_context_get_event_slot_va(const GpuContext *c, uint32_t slot) {
        return c->event_page->va + 8ull * slot;
}

int gpu_context_get_wake_fd(const GpuContext *c) {
        return c->wake_fd;
}

bool gpu_context_is_lost(const GpuContext *c, const char **reason) {
        if (reason)
                *reason = c->lost ? c->lost_reason : NULL;
        return c->lost;
}

uint64_t gpu_context_own_bytes(const GpuContext *like, unsigned max_inflight) {
        /* What gpu_context_new() allocates before its queues. */
        return align_up_u64(KFD_EVENT_PAGE_SIZE, PAGE_SIZE_4K) + (like->hdp_page ? PAGE_SIZE_4K : 0) +
               align_up_u64(GPU_FENCE_WORDS_SIZE + GPU_MAX_QUEUES * GPU_FENCE_TS_PER_QUEUE(max_inflight),
                            PAGE_SIZE_4K);
}

void gpu_context_get_stats(const GpuContext *c, GpuContextStats *ret) {
        *ret = c->stats;
        ret->buffers = c->n_user_buffers;
        ret->buffer_bytes = c->user_buffer_bytes;
        ret->mapped_buffers = 0;
        ret->mapped_bytes = 0;
        ret->internal_bytes = 0;
        for (const GpuBuffer *b = c->buffers; b; b = b->next)
                if (b->origin || b->mapped_in) {
                        ret->mapped_buffers++;
                        ret->mapped_bytes += b->size;
                } else if (b->internal)
                        ret->internal_bytes += b->size;
        ret->queues = c->n_queues;
}

/* Whether every queue of c has written the signals of its jobs up to
 * h->seq[its index], or is gone (it writes nothing more). */
static bool signals_landed(GpuContext *c, const struct GpuJobsHold *h) {
        for (unsigned i = 0; i < c->n_queues; i++) {
                GpuQueue *q = &c->queues[i];
                if (q->created && !gpu_queue_signals_landed(c, q, h->seq[i]))
                        return false;
        }
        return true;
}

void gpu_context_requeue_holds(GpuContext *c, GpuQueue *q) {
        for (unsigned k = 0; k < c->n_job_holds; k++)
                c->job_holds[k].seq[q->index] = gpu_queue_signal_pending_upto(q, c->job_holds[k].seq[q->index]);
}

GpuBuffer *gpu_buffer_unref_after_jobs(GpuBuffer *b) {
        return gpu_buffer_unref_after_jobs_of(b, b ? b->ctx : NULL);
}

GpuBuffer *gpu_buffer_unref_after_jobs_of(GpuBuffer *b, GpuContext *c) {
        struct GpuJobsHold h = { .buffer = b }, *holds;

        if (!b)
                return NULL;
        if (b->n_ref > 1)
                return gpu_buffer_unref(b); /* not the last reference */
        if (c)
                for (unsigned i = 0; i < c->n_queues; i++)
                        h.seq[i] = c->queues[i].last_signal_seq;
        if (!c || c->lost || signals_landed(c, &h))
                return gpu_buffer_unref(b);
        holds = reallocarray(c->job_holds, c->n_job_holds + 1, sizeof *holds);
        if (!holds) {
                /* Rather than risk the fault: the context's end unmaps it. */
                log_warning("gpu: out of memory; a buffer the GPU may still write stays mapped until its context ends");
                return NULL;
        }
        c->job_holds = holds;
        c->job_holds[c->n_job_holds++] = h;
        return NULL;
}

/* Drops the holds whose signals have landed; with all, every one. */
static void release_job_holds(GpuContext *c, bool all) {
        unsigned kept = 0;

        for (unsigned k = 0; k < c->n_job_holds; k++) {
                struct GpuJobsHold *h = &c->job_holds[k];

                if (all || c->lost || signals_landed(c, h))
                        gpu_buffer_unref(h->buffer);
                else
                        c->job_holds[kept++] = *h;
        }
        c->n_job_holds = kept;
        if (kept == 0) {
                free(c->job_holds);
                c->job_holds = NULL;
        }
}

int gpu_context_process(GpuContext *c, GpuCompletionFn cb, void *userdata) {
        uint64_t v;
        GpuFault faults[GPU_MAX_PENDING_FAULTS];
        int n = 0;

        if (!c)
                return -EINVAL;
        /* One read takes the whole count (an eventfd without EFD_SEMAPHORE);
         * a second would only find it empty, a system call per wake-up. A
         * write landing after it leaves the fd readable for the next wake. */
        (void) !read(c->wake_fd, &v, sizeof v);

        int nf = gpu_waiter_take_faults(c, faults, ELEMENTSOF(faults));

        /* First what finished before any fault, then the faults (a memory
         * fault ends the context and fails everything still in flight; an
         * exception recreates its queue), then whatever moved since. */
        for (unsigned i = 0; i < c->n_queues; i++)
                n += gpu_queue_collect(c, &c->queues[i], cb, userdata);
        for (int i = 0; i < nf; i++) {
                c->stats.faults++;
                if (c->lost)
                        continue;
                /* A reset signals every KFD process with its own data on the
                 * reset GPU — every process, as each has one for every GPU
                 * (kfd_init_apertures) — naming that GPU
                 * (kfd_signal_reset_event: the user gpu_id); the queues of the
                 * other GPUs are not stopped (kgd2kfd_pre_reset suspends that
                 * node). A memory fault, on any GPU, evicts the process's
                 * queues on every GPU (kfd_process_evict_queues). */
                if (!faults[i].memory && faults[i].gpu_id && faults[i].gpu_id != c->gpu_id) {
                        log_info("gpu: GPU gpu_id 0x%x was reset; the context on gpu_id 0x%x goes on",
                                 faults[i].gpu_id, c->gpu_id);
                        continue;
                }
                if (faults[i].memory)
                        n += gpu_context_lose(c, &faults[i], cb, userdata);
                else
                        n += gpu_context_reset(c, &faults[i], cb, userdata);
        }
        if (nf > 0)
                for (unsigned i = 0; i < c->n_queues; i++)
                        n += gpu_queue_collect(c, &c->queues[i], cb, userdata);
        if (c->n_job_holds > 0)
                release_job_holds(c, false);

        if (nf < 0 && n == 0)
                return nf; /* the waiter died: completions will no longer wake us */
        return n;
}
